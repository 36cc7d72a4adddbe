//! Sessions across machines: `hel remote`, `hel push`, `hel pull`,
//! `hel sessions --remote`, remote delete and gc, through the CLI, against
//! a `file://` remote and (when tools/test started one) a loopback S3
//! server. Two "machines" are two HOMEs (each with its own remotes.toml);
//! the project sits at the same path on both (a pulled session resumed at
//! another path is `hel resume --relocate`'s part).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// Machine B: its own HOME, and its own project directory that takes the
/// project's path while B works (A's is parked beside it meanwhile).
struct Machines {
    p: Project,
    home_b: tempfile::TempDir,
    remote: tempfile::TempDir,
}

impl Machines {
    fn new() -> Machines {
        let m = Machines {
            p: Project::new(),
            home_b: tempfile::tempdir().unwrap(),
            remote: tempfile::tempdir().unwrap(),
        };
        let url = format!("file://{}", m.remote.path().display());
        for b in [false, true] {
            let run = m.run(b, None, &["remote", "add", "shared", &url]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            assert!(
                run.stdout.contains("conditional writes: honoured"),
                "{}",
                run.stdout
            );
        }
        std::fs::create_dir(m.parked(true)).unwrap();
        m
    }

    fn parked(&self, b: bool) -> PathBuf {
        let p = self.p.dir.path();
        p.with_file_name(format!(
            "{}.{}",
            p.file_name().unwrap().to_string_lossy(),
            if b { "b" } else { "a" }
        ))
    }

    /// Make machine `b` (or A) the one whose project is at the path.
    fn switch_to(&self, b: bool) {
        let here = self.p.dir.path();
        std::fs::rename(here, self.parked(!b)).unwrap();
        std::fs::rename(self.parked(b), here).unwrap();
    }

    fn cmd(&self, b: bool, mock: Option<&Mock>) -> Command {
        let mut cmd = self.p.hel(mock);
        if b {
            cmd.env("HOME", self.home_b.path());
        }
        cmd
    }

    fn run(&self, b: bool, mock: Option<&Mock>, args: &[&str]) -> Run {
        Run::from_cmd(self.cmd(b, mock).args(args))
    }
}

impl Drop for Machines {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.parked(true));
        let _ = std::fs::remove_dir_all(self.parked(false));
    }
}

fn ok(run: &Run) -> &str {
    assert_eq!(
        run.code, 0,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    &run.stdout
}

#[test]
fn push_pull_continue_push_back_fast_forward_and_diverge() {
    let m = Machines::new();
    let mock = Mock::recall();
    let run = m.run(false, Some(&mock), &["-p", "Remember ID-5e55105acf0e."]);
    let sid = run.session();
    assert!(ok(&m.run(false, None, &["push"])).contains(&format!("{sid}: pushed to shared")));
    // Nothing changed since: nothing to push.
    assert!(ok(&m.run(false, None, &["push"])).contains("nothing to push"));

    // Machine B lists it without downloading the conversation, pulls it,
    // continues it and pushes back.
    m.switch_to(true);
    let listed = ok(&m.run(true, None, &["sessions", "--remote", "shared"])).to_owned();
    assert!(
        listed.contains(&sid) && listed.contains("1 checkpoint, 3 messages"),
        "{listed}"
    );
    assert!(!m.p.dir.path().join(".hel").exists());
    assert!(ok(&m.run(true, None, &["pull"])).contains(&format!("{sid}: pulled from shared")));
    let run = m.run(
        true,
        Some(&mock),
        &["resume", &sid[..8], "-p", "What was the identifier?"],
    );
    assert_eq!(ok(&run), "ID-5e55105acf0e\n");
    ok(&m.run(true, None, &["push", &sid[..8]]));
    let fsck = m.run(true, None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);

    // A pulls: a fast-forward, and the conversation goes on from B's turn.
    m.switch_to(false);
    assert!(ok(&m.run(false, None, &["pull", "--remote", "shared"])).contains("fast-forward"));
    let log = ok(&m.run(false, None, &["sessions", "log", &sid])).to_owned();
    assert!(
        log.lines().filter(|l| !l.trim().is_empty()).count() >= 2,
        "{log}"
    );
    let run = m.run(
        false,
        Some(&mock),
        &["resume", &sid, "-p", "And once more?"],
    );
    assert_eq!(ok(&run), "ID-5e55105acf0e\n");
    let history = mock.messages(mock.requests().len() - 1);
    assert_eq!(
        roles(&history),
        ["system", "user", "assistant", "user", "assistant", "user"]
    );

    // Both continue, both push: B's lands, A's is refused and told how to
    // go on; A's pull brings B's line in as a new session.
    ok(&m.run(false, None, &["push"]));
    m.switch_to(true);
    ok(&m.run(true, None, &["pull"]));
    ok(&m.run(true, Some(&mock), &["resume", &sid, "-p", "B says hi"]));
    ok(&m.run(true, None, &["push"]));
    m.switch_to(false);
    ok(&m.run(false, Some(&mock), &["resume", &sid, "-p", "A says hi"]));
    let refused = m.run(false, None, &["push"]);
    assert_eq!(refused.code, 1);
    assert!(
        refused
            .stderr
            .contains(&format!("session {sid} diverged on remote shared"))
            && refused
                .stderr
                .contains(&format!("hel pull --remote shared {sid}")),
        "{}",
        refused.stderr
    );
    let pulled = ok(&m.run(false, None, &["pull", &sid])).to_owned();
    assert!(pulled.contains("diverged from shared"), "{pulled}");
    let fork = pulled
        .split("is now session ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap()
        .to_owned();
    let sessions = ok(&m.run(false, None, &["sessions", "--json"])).to_owned();
    let v: serde_json::Value = serde_json::from_str(&sessions).unwrap();
    let ids: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&sid.as_str()) && ids.contains(&fork.as_str()),
        "{sessions}"
    );
    // Nothing lost: A's line has A's turn, the fork has B's.
    let show_a = ok(&m.run(false, None, &["sessions", "show", &sid])).to_owned();
    let show_f = ok(&m.run(false, None, &["sessions", "show", &fork])).to_owned();
    assert!(
        show_a.contains("A says hi") && !show_a.contains("B says hi"),
        "{show_a}"
    );
    assert!(
        show_f.contains("B says hi") && !show_f.contains("A says hi"),
        "{show_f}"
    );
    assert_eq!(m.run(false, None, &["fsck"]).code, 0);

    // Remote delete removes the ref; its data goes at later gc runs.
    let del = m.run(
        false,
        None,
        &["sessions", "delete", "--remote", "shared", &sid],
    );
    assert!(ok(&del).contains("deleted session"));
    let listed = ok(&m.run(false, None, &["sessions", "--remote", "shared"])).to_owned();
    assert!(!listed.contains(&sid), "{listed}");
    assert!(
        ok(&m.run(false, None, &["sessions"])).contains(&sid),
        "local copy kept"
    );
    let gc = ok(&m.run(false, None, &["gc", "--remote", "shared"])).to_owned();
    assert!(gc.contains("0 deleted"), "{gc}");
    let short = m.run(false, None, &["gc", "--remote", "shared", "--grace", "5m"]);
    assert_eq!(short.code, 2, "{}", short.stderr);
}

#[test]
fn push_killed_at_any_step_then_retried_leaves_complete_data() {
    let m = Machines::new();
    let mock = Mock::recall();
    let sid = m
        .run(false, Some(&mock), &["-p", "Remember ID-00c0ffee00."])
        .session();
    for (point, turn) in [("push-after-pack", "one"), ("push-after-ref", "two")] {
        let killed = Run::from_cmd(
            m.cmd(false, None)
                .env("HEL_FAILPOINTS", point)
                .args(["push"]),
        );
        assert_eq!(
            killed.code, -1,
            "{point}: killed by SIGKILL; {}",
            killed.stderr
        );
        ok(&m.run(false, None, &["push"]));
        // A fresh pull on another machine is sound.
        m.switch_to(true);
        let _ = std::fs::remove_dir_all(m.p.dir.path().join(".hel"));
        ok(&m.run(true, None, &["pull"]));
        let fsck = m.run(true, None, &["fsck"]);
        assert_eq!(fsck.code, 0, "{}", fsck.stdout);
        m.switch_to(false);
        ok(&m.run(false, Some(&mock), &["resume", &sid, "-p", turn]));
    }
    // The orphan pack of the first kill is there until remote gc takes it.
    let packs = std::fs::read_dir(m.remote.path().join("packs"))
        .unwrap()
        .count();
    assert!(packs >= 3, "{packs}");
}

#[test]
fn hostile_remote_and_credentials_in_urls_are_refused() {
    let m = Machines::new();
    let mock = Mock::recall();
    let sid = m
        .run(false, Some(&mock), &["-p", "Remember ID-0bad0bad."])
        .session();
    ok(&m.run(false, None, &["push"]));
    // Damage the one pack: the pull names it and brings nothing in.
    let packs: Vec<PathBuf> = std::fs::read_dir(m.remote.path().join("packs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let mut bytes = std::fs::read(&packs[0]).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0x40;
    std::fs::write(&packs[0], bytes).unwrap();
    m.switch_to(true);
    let run = m.run(true, None, &["pull"]);
    assert_eq!(run.code, 1);
    let name = packs[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        run.stderr.contains(&format!("packs/{name}"))
            && run.stderr.contains("do not hash to its name"),
        "{}",
        run.stderr
    );
    assert!(!ok(&m.run(true, None, &["sessions"])).contains(&sid));
    // A ref that is not a ref.
    std::fs::write(m.remote.path().join("sessions").join(&sid), b"{}").unwrap();
    let run = m.run(true, None, &["pull", &sid[..8]]);
    assert!(
        run.stderr.contains("not a hel remote ref"),
        "{}",
        run.stderr
    );
    // Credentials in a URL are refused, and not repeated.
    for args in [
        vec!["remote", "add", "x", "s3://AKIAEXAMPLE:s3cr3t@bucket/p"],
        vec![
            "remote",
            "add",
            "x",
            "s3://bucket/p",
            "--endpoint",
            "http://k:s3cr3t@127.0.0.1:9",
        ],
    ] {
        let run = m.run(true, None, &args);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr.contains("credentials in a URL are refused"),
            "{}",
            run.stderr
        );
        assert!(!run.stderr.contains("s3cr3t") && !run.stdout.contains("s3cr3t"));
    }
    // Remotes live in the user's config, never in the project.
    assert!(m.home_b.path().join(".config/hel/remotes.toml").exists());
    assert!(!m.p.dir.path().join(".hel").join("remotes.toml").exists());
}

/// The loopback S3 server tools/test starts (`HEL_TEST_S3_ENDPOINT`, with
/// `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` for it). Without one the
/// test fails, unless `HEL_SKIP_S3=1` says to skip it (local runs).
fn s3_endpoint() -> Option<String> {
    match std::env::var("HEL_TEST_S3_ENDPOINT") {
        Ok(e) => Some(e),
        Err(_) if std::env::var_os("HEL_SKIP_S3").is_some() => {
            eprintln!("skipped: HEL_SKIP_S3 is set and no loopback S3 server was started");
            None
        }
        Err(_) => panic!(
            "no loopback S3 server: run the tests through tools/test (it starts one), or set HEL_SKIP_S3=1 to skip this test"
        ),
    }
}

fn s3_cmd(m: &Machines, b: bool, mock: Option<&Mock>) -> Command {
    let mut cmd = m.cmd(b, mock);
    for k in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"] {
        if let Ok(v) = std::env::var(k) {
            cmd.env(k, v);
        }
    }
    cmd
}

#[test]
fn s3_push_and_pull_through_the_loopback_server() {
    let Some(endpoint) = s3_endpoint() else {
        return;
    };
    let m = Machines::new();
    let mock = Mock::recall();
    let bucket = std::env::var("HEL_TEST_S3_BUCKET").unwrap_or_else(|_| "hel-test".into());
    let url = format!("s3://{bucket}/{}", uuid_like(m.p.dir.path()));
    for b in [false, true] {
        let run = Run::from_cmd(s3_cmd(&m, b, None).args([
            "remote",
            "add",
            "s3",
            &url,
            "--endpoint",
            &endpoint,
            "--region",
            "us-east-1",
        ]));
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let sid = m
        .run(false, Some(&mock), &["-p", "Remember ID-5335ab1e."])
        .session();
    let push = Run::from_cmd(s3_cmd(&m, false, None).args(["push", "--remote", "s3"]));
    assert!(ok(&push).contains("pushed to s3"));
    m.switch_to(true);
    let list = Run::from_cmd(s3_cmd(&m, true, None).args(["sessions", "--remote", "s3"]));
    assert!(ok(&list).contains(&sid));
    let pull = Run::from_cmd(s3_cmd(&m, true, None).args(["pull", "--remote", "s3"]));
    assert!(ok(&pull).contains("pulled from s3"));
    let run = m.run(
        true,
        Some(&mock),
        &["resume", &sid, "-p", "Which identifier?"],
    );
    assert_eq!(ok(&run), "ID-5335ab1e\n");
    let push = Run::from_cmd(s3_cmd(&m, true, None).args(["push", "--remote", "s3"]));
    ok(&push);
    m.switch_to(false);
    let pull = Run::from_cmd(s3_cmd(&m, false, None).args(["pull", "--remote", "s3"]));
    assert!(ok(&pull).contains("fast-forward"));
}

/// A key prefix unique to this test run.
fn uuid_like(p: &Path) -> String {
    p.file_name()
        .unwrap()
        .to_string_lossy()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase()
}

#[test]
fn bundle_round_trip_and_a_tampered_bundle() {
    let m = Machines::new();
    let mock = Mock::recall();
    let sid = m
        .run(false, Some(&mock), &["-p", "Remember ID-b0b0b0b0."])
        .session();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("s.helbundle");
    let bundle_arg = bundle.to_str().unwrap();
    let out = ok(&m.run(
        false,
        None,
        &["sessions", "export", &sid[..8], "--bundle", bundle_arg],
    ))
    .to_owned();
    assert!(out.contains(&format!("wrote session {sid}")), "{out}");
    // Tampered: one byte of the last object flipped. Refused, naming the
    // object, and nothing is added.
    let good = std::fs::read(&bundle).unwrap();
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 2] ^= 0x01;
    let tampered = dir.path().join("t.helbundle");
    std::fs::write(&tampered, &bad).unwrap();
    m.switch_to(true);
    let run = m.run(
        true,
        None,
        &["sessions", "import", tampered.to_str().unwrap()],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("t.helbundle") && run.stderr.contains("(object "),
        "{}",
        run.stderr
    );
    assert!(!ok(&m.run(true, None, &["sessions"])).contains(&sid));
    // The good one comes in whole and resumes.
    assert!(ok(&m.run(true, None, &["sessions", "import", bundle_arg])).contains("imported"));
    let run = m.run(
        true,
        Some(&mock),
        &["resume", &sid, "-p", "Which identifier?"],
    );
    assert_eq!(ok(&run), "ID-b0b0b0b0\n");
    assert_eq!(m.run(true, None, &["fsck"]).code, 0);
}

/// Pushes killed with SIGKILL at moments spread over a push's whole
/// duration, each after one more checkpoint: whatever moment it was, a
/// fresh pull on another machine gets complete data (fsck sound, the
/// session loads, at the old head or the new one), and the retried push
/// then succeeds.
#[test]
fn pushes_killed_at_moments_across_the_push_leave_the_remote_complete() {
    const KILLS: u32 = 10;
    let m = Machines::new();
    let mock = Mock::recall();
    let sid = m
        .run(false, Some(&mock), &["-p", "Remember ID-0badcafe."])
        .session();
    ok(&m.run(false, None, &["push"]));
    // How long one push takes here, to spread the kills over it.
    ok(&m.run(false, Some(&mock), &["resume", &sid, "-p", "warm"]));
    let t = std::time::Instant::now();
    ok(&m.run(false, None, &["push"]));
    let span = t.elapsed();
    for k in 0..KILLS {
        let turn = format!("turn {k}");
        ok(&m.run(false, Some(&mock), &["resume", &sid, "-p", &turn]));
        let mut child = m
            .cmd(false, None)
            .arg("push")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(span * k / KILLS);
        let _ = child.kill();
        let _ = child.wait();
        m.switch_to(true);
        let _ = std::fs::remove_dir_all(m.p.dir.path().join(".hel"));
        ok(&m.run(true, None, &["pull"]));
        let fsck = m.run(true, None, &["fsck"]);
        assert_eq!(fsck.code, 0, "kill {k}: {}{}", fsck.stdout, fsck.stderr);
        let shown = ok(&m.run(true, None, &["sessions", "show", &sid, "--json"])).to_owned();
        let newest = if k == 0 {
            "warm".to_owned()
        } else {
            format!("turn {}", k - 1)
        };
        assert!(
            shown.contains(&turn) || shown.contains(&newest),
            "kill {k}: the remote holds neither head"
        );
        m.switch_to(false);
        ok(&m.run(false, None, &["push"]));
    }
}
