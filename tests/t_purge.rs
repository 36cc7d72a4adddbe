//! `hel sessions purge`: a value stored before hel knew it for a secret
//! (here: the value of an environment variable named `*_TOKEN` that is set
//! only when purging) is taken out of the session's history and of its
//! fork's, by handle; after `hel gc` no byte of it is under `.hel/`;
//! everything else is what it was; the fork resumes; a remote the session
//! was pushed to is replaced at the next push; a kill during the purge
//! leaves sessions that resume, and the next purge finishes.

use std::path::Path;

use serde_json::{json, Value};

use crate::common::*;
use crate::t_secrets::leaks_under;

/// No rule knows it: only the environment variable set when purging.
const VALUE: &str = "plum7Kettle2Quartz9Vane";
const VAR: &str = "DEPLOY_TOKEN";

/// A session whose instruction, tool result, answer and spill hold
/// `VALUE`, and a fork of its first answer that went on: (session, fork).
fn session_with_value(p: &Project) -> (String, String) {
    // Not ignored: the workspace snapshots record it.
    p.write("notes.txt", &format!("word: {VALUE}\n"));
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("bash", json!({"command": "cat notes.txt"})),
            // Spilled whole; the conversation keeps its head and tail.
            call("bash", json!({"command": "seq 1 15000; cat notes.txt; seq 1 15000"})),
        ]},
        {"content": format!("The token is {VALUE}.")},
        {"content": "Second answer."},
    ]));
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "-p", &format!("remember {VALUE}")],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let session = run.session();
    let first = show(p, &session)["checkpoint"].as_str().unwrap().to_owned();
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "resume", &session, "-p", "and then?"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mock = Mock::start(json!([{"content": format!("Forked, still {VALUE}.")}]));
    let run = p.run(
        Some(&mock),
        &["resume", &session, "--at", &first, "-p", "fork it"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    (session, run.session())
}

fn show(p: &Project, session: &str) -> Value {
    let run = p.run(None, &["sessions", "show", session, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap()
}

/// `hel` with the value known for a secret.
fn knowing(p: &Project, args: &[&str]) -> Run {
    Run::from_cmd(p.hel(None).env(VAR, VALUE).args(args))
}

fn leaks(p: &Project) -> Vec<String> {
    leaks_under(&p.path().join(".hel"), &[VALUE.to_owned()])
}

fn sound(p: &Project) {
    let run = p.run(None, &["fsck"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("store is sound"), "{}", run.stdout);
}

/// The handle the purge gave the value, read from what `after` shows.
fn handle_in(after: &str) -> String {
    let at = after.find("‹secret:deploy").expect("a handle");
    let end = at + after[at..].find('›').unwrap() + '›'.len_utf8();
    after[at..end].to_owned()
}

#[test]
fn a_purged_session_and_its_fork_hold_handles_and_gc_leaves_no_byte_of_the_value() {
    let p = Project::new();
    let (session, fork) = session_with_value(&p);
    assert!(
        !leaks(&p).is_empty(),
        "the value is stored before the purge"
    );
    let rename = p.run(None, &["sessions", "rename", &session, "with-token"]);
    assert_eq!(rename.code, 0, "{}", rename.stderr);
    let before = show(&p, &session);
    let fork_before = show(&p, &fork);
    assert!(before.to_string().contains(VALUE));
    let sp = String::from_utf8_lossy(&spill_bytes(&p, &session)).into_owned();
    assert!(
        sp.contains(VALUE),
        "{} {:?}",
        sp.len(),
        sp.lines().find(|l| l.contains("token"))
    );
    // The scan that knows the value finds it.
    let scan = knowing(&p, &["sessions", "scan", &session]);
    assert_eq!(scan.code, 1, "{}", scan.stdout);
    let run = knowing(&p, &["sessions", "purge", &session]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(&format!("purged session {session}")),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(&fork[..8]),
        "the fork moved: {}",
        run.stdout
    );
    // The journals were written again: only sealed packs may hold the
    // value (none here), and gc takes those.
    let gc = p.run(None, &["gc"]);
    assert_eq!(gc.code, 0, "{}", gc.stderr);
    assert_eq!(leaks(&p), Vec::<String>::new());
    sound(&p);
    // Every message as it was, the value replaced by its handle; new
    // checkpoints.
    for (id, old) in [(&session, &before), (&fork, &fork_before)] {
        let new = show(&p, id);
        let text = serde_json::to_string(&new["messages"]).unwrap();
        let handle = handle_in(&text);
        let want = serde_json::to_string(&old["messages"])
            .unwrap()
            .replace(VALUE, &handle);
        assert_eq!(text, want, "session {id}");
        assert_ne!(new["checkpoint"], old["checkpoint"]);
        assert_eq!(new["session"], old["session"]);
    }
    let scan = knowing(&p, &["sessions", "scan"]);
    assert_eq!(scan.code, 0, "{}", scan.stdout);
    // The log walks the new history.
    let log = p.run(None, &["sessions", "log", &session, "--all"]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert!(!log.stdout.contains(VALUE), "{}", log.stdout);
    assert!(log.stdout.contains("‹secret:deploy"), "{}", log.stdout);
    // The spill file by handle, the name kept.
    let spill = String::from_utf8(spill_bytes(&p, &session)).unwrap();
    assert!(spill.contains("word: ‹secret:deploy"), "{}", &spill[..100]);
    assert_eq!(show(&p, "with-token")["session"], before["session"]);
    // The fork resumes on the new history: the model sees the handle.
    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = p.run(Some(&mock), &["resume", &fork, "-p", "go on"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let body = serde_json::to_string(&mock.requests()[0]).unwrap();
    assert!(!body.contains(VALUE), "{body}");
    assert!(body.contains("‹secret:deploy"), "{body}");
    sound(&p);
}

/// Every file under `dir` and its bytes.
/// (the summary index, a listing's hint, aside).
fn files(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut all = hel_store::testing::files_under(dir);
    all.retain(|(p, _)| !p.ends_with("summaries"));
    all.sort();
    all
}

#[test]
fn a_purge_that_finds_nothing_says_so_and_writes_nothing() {
    let p = Project::new();
    let (session, _) = session_with_value(&p);
    // Without the variable nothing is a secret.
    let listed = p.run(None, &["sessions", "--json"]);
    assert_eq!(listed.code, 0);
    let store = files(&p.path().join(".hel"));
    let run = p.run(None, &["sessions", "purge", &session]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("nothing to purge"), "{}", run.stdout);
    assert_eq!(files(&p.path().join(".hel")), store);
}

/// `hel` in `p` with `env` (a remote's credentials) and `args`.
fn with(p: &Project, env: &[(String, String)], args: &[&str]) -> Run {
    let mut cmd = p.hel(None);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Run::from_cmd(cmd.args(args))
}

/// A session pushed to the remote `add` adds (with `env`), then purged:
/// a pull does not bring the old history back, the next push replaces
/// the remote's ref, and another project pulling it gets no byte of the
/// value. Gives the project and the session.
fn replaced_on_the_remote(add: &[&str], env: &[(String, String)]) -> (Project, String) {
    let p = Project::new();
    let run = with(&p, env, add);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let (session, fork) = session_with_value(&p);
    let push = with(&p, env, &["push", "--remote", "r", &session]);
    assert_eq!(push.code, 0, "{}", push.stderr);
    // One more checkpoint after the push: the remote's head is not the
    // head the purge replaces, but a record before it.
    let mock = Mock::start(json!([{"content": "later"}]));
    let run = p.run(Some(&mock), &["resume", &session, "-p", "later"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut knows = env.to_vec();
    knows.push((VAR.into(), VALUE.into()));
    let run = with(&p, &knows, &["sessions", "purge", &session]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let pull = with(&p, env, &["pull", "--remote", "r", &session]);
    assert_ne!(pull.code, 0, "{}", pull.stdout);
    assert!(
        pull.stderr.contains("`hel sessions purge` replaced here"),
        "{}",
        pull.stderr
    );
    // The push scans what it sends with the value known: none is.
    let push = with(&p, &knows, &["push", "--remote", "r", &session]);
    assert_eq!(push.code, 0, "{}{}", push.stdout, push.stderr);
    let push = with(&p, &knows, &["push", "--remote", "r", &fork]);
    assert_eq!(push.code, 0, "{}{}", push.stdout, push.stderr);
    // What the remote's refs name now.
    let q = Project::new();
    let run = with(&q, env, add);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for id in [&session, &fork] {
        let pull = with(&q, env, &["pull", "--remote", "r", id]);
        assert_eq!(pull.code, 0, "{}", pull.stderr);
        assert_eq!(show(&q, id)["checkpoint"], show(&p, id)["checkpoint"]);
    }
    assert_eq!(
        leaks_under(&q.path().join(".hel"), &[VALUE.to_owned()]),
        Vec::<String>::new()
    );
    (p, session)
}

#[test]
fn a_pushed_session_is_replaced_on_a_directory_remote_at_the_next_push() {
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let (p, session) = replaced_on_the_remote(&["remote", "add", "r", &url], &[]);
    let r: Value = serde_json::from_slice(
        &std::fs::read(remote.path().join("sessions").join(&session)).unwrap(),
    )
    .unwrap();
    assert_eq!(r["head"], show(&p, &session)["checkpoint"]);
    // One pack, of the new history: the old ones are remote gc's.
    assert_eq!(r["packs"].as_array().unwrap().len(), 1, "{r}");
    assert!(
        std::fs::read_dir(remote.path().join("packs"))
            .unwrap()
            .count()
            > 1
    );
}

/// The loopback S3 server tools/test starts; `None` (the test skipped)
/// when there is none and `HEL_SKIP_S3` is set.
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

#[test]
fn a_pushed_session_is_replaced_on_an_s3_remote_at_the_next_push() {
    let Some(endpoint) = s3_endpoint() else {
        return;
    };
    let env: Vec<(String, String)> = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"]
        .iter()
        .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
        .collect();
    let bucket = std::env::var("HEL_TEST_S3_BUCKET").unwrap_or_else(|_| "hel-test".into());
    // A prefix unique to this run: the name of a fresh directory.
    let unique = tempfile::tempdir().unwrap();
    let prefix: String = unique
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    let url = format!("s3://{bucket}/purge-{prefix}");
    replaced_on_the_remote(
        &[
            "remote",
            "add",
            "r",
            &url,
            "--endpoint",
            &endpoint,
            "--region",
            "us-east-1",
        ],
        &env,
    );
}

#[test]
fn a_purge_killed_part_way_leaves_sessions_that_resume_and_the_next_finishes() {
    for point in ["purge-moved@1", "purge-journal@1"] {
        let p = Project::new();
        let (session, fork) = session_with_value(&p);
        let run = Run::from_cmd(
            p.hel(None)
                .env(VAR, VALUE)
                .env("HEL_FAILPOINTS", point)
                .args(["sessions", "purge", &session]),
        );
        assert_ne!(run.code, 0, "{point}: killed");
        sound(&p);
        // Resumed by a user who knows the value for a secret now (the
        // workspace snapshots then leave notes.txt out).
        for id in [&session, &fork] {
            let mock = Mock::start(json!([{"content": "ok"}]));
            let run = Run::from_cmd(p.hel(Some(&mock)).env(VAR, VALUE).args([
                "resume",
                id,
                "-p",
                "still there?",
            ]));
            assert_eq!(run.code, 0, "{point}: {}", run.stderr);
        }
        let run = knowing(&p, &["sessions", "purge", &session]);
        assert_eq!(run.code, 0, "{point}: {}", run.stderr);
        let gc = p.run(None, &["gc"]);
        assert_eq!(gc.code, 0, "{}", gc.stderr);
        assert_eq!(leaks(&p), Vec::<String>::new(), "{point}");
        sound(&p);
    }
}

#[test]
fn a_purge_is_refused_while_a_session_it_would_move_is_in_use() {
    use crate::t_sandbox::wait_until;
    let p = Project::new();
    let (session, fork) = session_with_value(&p);
    let head = show(&p, &session)["checkpoint"].clone();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "touch ready; sleep 300"}))]},
        {"content": "never"},
    ]));
    let (mut hel, _) = p.spawn_session(
        Some(&mock),
        &["--access", "auto", "resume", &fork, "-p", "wait"],
    );
    wait_until("the fork's command to run", || {
        p.path().join("ready").exists()
    });
    let run = knowing(&p, &["sessions", "purge", &session]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(run.stderr.contains("in use"), "{}", run.stderr);
    // Nothing written: the head, and no record for the next push.
    assert_eq!(show(&p, &session)["checkpoint"], head);
    assert!(!p.path().join(".hel/remotes").exists());
    hel.kill().unwrap();
    hel.wait().unwrap();
    let run = knowing(&p, &["sessions", "purge", &session]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let gc = p.run(None, &["gc"]);
    assert_eq!(gc.code, 0, "{}", gc.stderr);
    assert_eq!(leaks(&p), Vec::<String>::new());
    sound(&p);
}

/// The fork of a deleted session: while its origin is in the trash (its
/// journal kept whole) the purge is refused, naming it; deleted for good,
/// what the fork reaches of its origin is in a sealed pack (the delete
/// copied it there); the purge of the fork rewrites that part too, and gc
/// takes the old copy.
#[test]
fn the_fork_of_a_deleted_session_is_purged_through_what_it_inherited() {
    let p = Project::new();
    let (session, fork) = session_with_value(&p);
    let run = p.run(None, &["sessions", "delete", &session]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let before = show(&p, &fork);
    let run = knowing(&p, &["sessions", "purge", &fork]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stderr.contains("in the trash") && run.stderr.contains(&session),
        "{}",
        run.stderr
    );
    assert_eq!(show(&p, &fork)["checkpoint"], before["checkpoint"]);
    let run = p.run(None, &["sessions", "delete", "--now", &session]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = knowing(&p, &["sessions", "purge", &fork]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let gc = p.run(None, &["gc"]);
    assert_eq!(gc.code, 0, "{}", gc.stderr);
    assert_eq!(leaks(&p), Vec::<String>::new());
    sound(&p);
    let after = serde_json::to_string(&show(&p, &fork)["messages"]).unwrap();
    let handle = handle_in(&after);
    let want = serde_json::to_string(&before["messages"])
        .unwrap()
        .replace(VALUE, &handle);
    assert_eq!(after, want);
}
