//! The defaults people expect: `hel "INSTRUCTION"` (at the prompt on a
//! terminal, as -p off one), and `hel diff`, `hel sessions log`, `hel
//! sessions show` choosing this project's newest session when none is
//! named; `hel diff SESSION` showing the whole session's change.

use serde_json::json;

use crate::common::*;
use crate::t_prompt::{exited_with, expect, spawn_with, type_in, PROMPT_END};

/// The user messages of the mock's request `i`.
fn users(mock: &Mock, i: usize) -> Vec<String> {
    mock.messages(i)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_positional_instruction_off_a_terminal_runs_as_p() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "Fixed it."}]));
    // Piped stdin, which is not read: the instruction is the run.
    let r = p.run_stdin(Some(&mock), &["fix the bug"], "not an instruction\n");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("Fixed it."), "{}", r.stdout);
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(users(&mock, 0), ["fix the bug"]);
    // With -p too, it comes first.
    let mock = Mock::start(json!([{"content": "One."}, {"content": "Two."}]));
    let r = p.run(Some(&mock), &["first", "-p", "second"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(users(&mock, 1), ["first", "second"]);
    // A subcommand's name stays the subcommand; after `--` it is an instruction.
    let r = p.run(None, &["sessions"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mock = Mock::start(json!([{"content": "About sessions."}]));
    let r = p.run(Some(&mock), &["--", "sessions"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(users(&mock, 0), ["sessions"]);
}

#[test]
fn a_positional_instruction_on_a_terminal_runs_at_the_prompt() {
    for cols in [80, 40] {
        on_a_terminal(cols);
    }
}

fn on_a_terminal(cols: u16) {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "Fixed on the terminal."}, {"content": "Next."}]));
    let mut s = spawn_with(&p, Some(&mock), cols, &["fix the bug"], &[]);
    expect(&mut s, "fix the bug");
    expect(&mut s, "Fixed on the terminal.");
    expect(&mut s, PROMPT_END);
    assert_eq!(users(&mock, 0), ["fix the bug"]);
    // The prompt goes on in the same session.
    type_in(&mut s, "and then\r");
    expect(&mut s, "Next.");
    expect(&mut s, PROMPT_END);
    assert_eq!(users(&mock, 1), ["fix the bug", "and then"]);
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

#[test]
fn diff_log_and_show_default_to_the_newest_session() {
    let p = Project::new();
    let write = |path: &str| json!({"tool_calls": [call("write_file", json!({"path": path, "content": "x\n"}))]});
    let mock = Mock::start(json!([
        write("older.txt"), {"content": "Older."},
        write("newer.txt"), {"content": "Newer."},
    ]));
    let older = p.run(Some(&mock), &["--access", "auto", "-p", "write older"]);
    assert_eq!(older.code, 0, "{}", older.stderr);
    let newer = p.run(Some(&mock), &["--access", "auto", "-p", "write newer"]);
    assert_eq!(newer.code, 0, "{}", newer.stderr);
    assert_ne!(older.session(), newer.session());

    let diff = p.run(None, &["diff"]);
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    assert!(diff.stdout.contains("A newer.txt"), "{}", diff.stdout);
    assert!(!diff.stdout.contains("older.txt"), "{}", diff.stdout);

    let log = p.run(None, &["sessions", "log"]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert!(log.stdout.contains("write newer"), "{}", log.stdout);
    assert!(!log.stdout.contains("write older"), "{}", log.stdout);

    let show = p.run(None, &["sessions", "show"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(show.stdout.contains("Newer."), "{}", show.stdout);
    assert!(!show.stdout.contains("Older."), "{}", show.stdout);
}

#[test]
fn diff_of_a_session_is_its_whole_change() {
    let p = Project::new();
    p.write("kept.txt", "same\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "a.txt", "content": "one\n"}))]},
        {"content": "Wrote it."},
        {"content": "Nothing to do."},
    ]));
    let r = p.run(
        Some(&mock),
        &["--access", "auto", "-p", "write a", "-p", "look only"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let sid = r.session();
    let whole = p.run(None, &["diff", &sid]);
    assert_eq!(whole.code, 0, "{}", whole.stderr);
    assert!(whole.stdout.contains("A a.txt"), "{}", whole.stdout);
    assert!(whole.stdout.contains("+one"), "{}", whole.stdout);
    assert!(!whole.stdout.contains("kept.txt"), "{}", whole.stdout);
    // The last instruction alone changed nothing.
    let last = p.run(None, &["diff", &sid, "--last"]);
    assert_eq!(last.code, 0, "{}", last.stderr);
    assert_eq!(last.stdout.trim(), "no changes", "{}", last.stdout);
    let stat = p.run(None, &["diff", &sid, "--stat"]);
    assert_eq!(stat.stdout.trim(), "A a.txt | +1 -0", "{}", stat.stdout);
}
