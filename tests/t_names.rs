//! Session names (rename, resolution everywhere, fork copies, delete) and
//! search across sessions and forks.

use crate::common::*;
use serde_json::{json, Value};

fn json_out(run: &Run) -> Value {
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// The ids of a session's answer checkpoints, oldest first.
fn answers(p: &Project, session: &str) -> Vec<String> {
    let log = json_out(&p.run(None, &["sessions", "log", session, "--json"]));
    let mut ids: Vec<String> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["record"] == "answer")
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    ids.reverse();
    ids
}

fn name_of(p: &Project, session: &str) -> Value {
    let list = json_out(&p.run(None, &["sessions", "--json"]));
    list.as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == session)
        .map(|s| s["name"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn sessions_are_renamed_resumed_forked_and_deleted_by_name() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "one"}, {"content": "two"}, {"content": "three"}, {"content": "four"}
    ]));
    let a = p.run(Some(&mock), &["-p", "first"]).session();
    let b = p.run(Some(&mock), &["-p", "other"]).session();
    let run = p.run(None, &["sessions", "rename", &a[..8], "fix-login"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Names that could be read as ids, and taken names, are refused.
    let run = p.run(None, &["sessions", "rename", &b, "dead-beef"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("session id prefix"), "{}", run.stderr);
    let run = p.run(None, &["sessions", "rename", &b, "fix-login"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains(&format!("taken by session {a}")),
        "{}",
        run.stderr
    );
    // Listed, and stored where objects-spec §11 says, nowhere else.
    let list = p.run(None, &["sessions"]);
    assert!(
        list.stdout
            .lines()
            .any(|l| l.starts_with(&a) && l.ends_with("  fix-login")),
        "{}",
        list.stdout
    );
    assert_eq!(name_of(&p, &a), "fix-login");
    assert_eq!(name_of(&p, &b), Value::Null);
    let names = std::fs::read_to_string(p.path().join(".hel/names")).unwrap();
    assert_eq!(names, format!("hel-names 1\n{a} fix-login\n"));
    // Resumed by name: the same session, which keeps its name.
    let run = p.run(Some(&mock), &["resume", "fix-login", "-p", "second"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.session(), a);
    assert_eq!(mock.messages(2)[1]["content"], "first");
    assert_eq!(name_of(&p, &a), "fix-login");
    // Forked by name: the fork gets a copy of the name with a suffix.
    let first = &answers(&p, "fix-login")[0];
    let run = p.run(
        Some(&mock),
        &["resume", "fix-login", "--at", &first[..12], "-p", "again"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let fork = run.session();
    assert_ne!(fork, a);
    assert_eq!(name_of(&p, &fork), "fix-login-2");
    let log = p.run(None, &["sessions", "log", "fix-login-2"]);
    assert!(log.stdout.contains("forked from session"), "{}", log.stdout);
    // Deleted by name: the name goes with it.
    let run = p.run(None, &["sessions", "delete", "fix-login-2"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains(&fork), "{}", run.stdout);
    let run = p.run(None, &["sessions", "show", "fix-login-2"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("no session matches fix-login-2"),
        "{}",
        run.stderr
    );
    let names = std::fs::read_to_string(p.path().join(".hel/names")).unwrap();
    assert_eq!(names, format!("hel-names 1\n{a} fix-login\n"));
    let run = p.run(None, &["fsck"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    // A hostile names file: a link is never followed, a malformed one is
    // named; listings go on without names, fsck reports it.
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("names");
    std::fs::write(&target, format!("hel-names 1\n{b} stolen\n")).unwrap();
    std::fs::remove_file(p.path().join(".hel/names")).unwrap();
    std::os::unix::fs::symlink(&target, p.path().join(".hel/names")).unwrap();
    let run = p.run(None, &["sessions", "show", "stolen"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("symbolic link"), "{}", run.stderr);
    let run = p.run(None, &["sessions"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("session names not shown"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("stolen"), "{}", run.stdout);
    std::fs::remove_file(p.path().join(".hel/names")).unwrap();
    std::fs::write(p.path().join(".hel/names"), "hel-names 1\nnot a line\n").unwrap();
    let run = p.run(None, &["fsck"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("names line 2 is malformed"),
        "{}",
        run.stdout
    );
}

/// A search finds what the user and the model said, not the note hel
/// adds to an instruction that follows one left unanswered.
#[test]
fn search_skips_hels_own_notes() {
    let p = Project::new();
    let mock = Mock::start(json!([{"status": 400}, {"content": "ok"}]));
    let run = p.run_stdin(Some(&mock), &[], "first\nsecond\n");
    assert_eq!(run.stdout, "ok\n", "{}", run.stderr);
    let sent = mock.messages(1);
    let said = sent.last().unwrap()["content"].as_str().unwrap();
    assert!(said.contains("[hel: the instruction above"), "{said}");
    let run = p.run(None, &["sessions", "search", "instruction above"]);
    assert_eq!((run.code, run.stdout.as_str()), (1, ""), "{}", run.stderr);
    let run = p.run(None, &["sessions", "search", "SECOND", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let found = json_out(&run);
    assert_eq!(found[0]["matches"][0]["role"], "user", "{found}");
    assert_eq!(found[0]["matches"][0]["excerpt"], "second", "{found}");
}

#[test]
fn search_reports_each_message_once_per_session_with_where_it_first_appeared() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "looking"}, {"content": "ok"}, {"content": "forked"},
        {"content": "The Flaky-Widget test is fixed elsewhere."}
    ]));
    let a = p
        .run(
            Some(&mock),
            &[
                "-p",
                "fix the flaky-widget test",
                "-p",
                "and now something else",
            ],
        )
        .session();
    let first = answers(&p, &a)[0].clone();
    let head = answers(&p, &a)[1].clone();
    let run = p.run(
        Some(&mock),
        &["resume", &a, "--at", &head[..12], "-p", "more"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let fork = run.session();
    let b = p.run(Some(&mock), &["-p", "nothing to see"]).session();
    let b_answer = answers(&p, &b)[0].clone();
    // One line per session, newest first; A's message is found once in A
    // and once in its fork, at the checkpoint that first stored it.
    let run = p.run(None, &["sessions", "search", "(?i)flaky-widget"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    assert!(lines[0].starts_with(&b[..8]), "{}", run.stdout);
    assert!(lines[1].starts_with(&fork[..8]), "{}", run.stdout);
    assert!(lines[2].starts_with(&a[..8]), "{}", run.stdout);
    assert!(lines[0].contains(&b_answer[..12]) && lines[0].contains("assistant"));
    for l in &lines[1..] {
        assert!(l.contains(&first[..12]) && l.contains("user"), "{l}");
        assert!(l.ends_with("fix the flaky-widget test"), "{l}");
    }
    let found = json_out(&p.run(None, &["sessions", "search", "flaky-widget", "--json"]));
    assert_eq!(
        found.as_array().unwrap().len(),
        3,
        "case is ignored: {found}"
    );
    let found = json_out(&p.run(
        None,
        &[
            "sessions",
            "search",
            "flaky-widget",
            "--case-sensitive",
            "--json",
        ],
    ));
    let found = found.as_array().unwrap();
    assert_eq!(
        found.len(),
        2,
        "case-sensitive: B's answer says Flaky-Widget"
    );
    for s in found {
        let m = s["matches"].as_array().unwrap();
        assert_eq!(m.len(), 1, "one hit per message, not per checkpoint: {s}");
        assert_eq!(m[0]["checkpoint"], first.as_str());
        assert_eq!(m[0]["index"], 1);
    }
    let run = p.run(
        None,
        &["sessions", "search", "(?i)flaky", "--role", "assistant"],
    );
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);
    let run = p.run(None, &["sessions", "search", "no such thing"]);
    assert_eq!((run.code, run.stdout.as_str()), (1, ""));
    let run = p.run(None, &["sessions", "search", "(unclosed"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}
