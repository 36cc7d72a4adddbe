//! The interactive prompt, driven through a pseudo-terminal: an
//! instruction, a multi-line paste, slash commands, Ctrl-C cancelling a
//! slow answer and the prompt coming back, the confirm question asked at
//! the prompt, and the history surviving a restart.

use std::process::Command;

use rexpect::process::wait::WaitStatus;
use rexpect::session::PtySession;
use serde_json::{json, Value};

use crate::common::*;

/// How long any one expected text may take to appear.
const TIMEOUT_MS: u64 = 30_000;

/// `text` as rexpect sees it: it reads the terminal a byte at a time, each
/// byte as one char.
fn bytes(text: &str) -> String {
    text.bytes().map(char::from).collect()
}

/// The end of every prompt (`hel 4da5b0e0 · 12% › `).
const PROMPT_END: &str = "% › ";

/// `hel` on a fresh pseudo-terminal in project `p` against `mock`.
/// (Not `Project::hel`: that one detaches from any terminal.)
fn spawn(p: &Project, mock: &Mock, args: &[&str]) -> PtySession {
    let mut cmd = Command::new(hel_bin());
    cmd.current_dir(p.dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p.home.path())
        .env("TERM", "xterm")
        .args(["--base-url", &mock.url, "--model", "mock-model"])
        .args(args);
    rexpect::session::spawn_command(cmd, Some(TIMEOUT_MS)).unwrap()
}

/// Type `keys` (flushed: the process sees them now).
fn type_in(s: &mut PtySession, keys: &str) {
    s.send(keys).unwrap();
    s.flush().unwrap();
}

fn expect(s: &mut PtySession, text: &str) -> String {
    s.exp_string(&bytes(text))
        .unwrap_or_else(|e| panic!("waiting for {text:?}: {e}"))
}

/// The newest user message the mock was sent.
fn last_instruction(mock: &Mock) -> Value {
    let reqs = mock.requests();
    let msgs = reqs.last().unwrap()["messages"].as_array().unwrap().clone();
    msgs.iter().rev().find(|m| m["role"] == "user").unwrap()["content"].clone()
}

fn exited_with(s: &PtySession, code: i32) {
    match s.process.wait().unwrap() {
        WaitStatus::Exited(_, c) => assert_eq!(c, code),
        other => panic!("hel ended as {other:?}"),
    }
}

#[test]
fn prompt_instruction_paste_command_and_ctrl_c() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "Hello there."},
        {"content": "Pasted."},
        {"content": "too late", "delay_ms": 60_000},
    ]));
    let mut s = spawn(&p, &mock, &[]);
    let before = expect(&mut s, "session: ");
    assert!(!before.contains("hel:"), "{before:?}");
    let id: String = expect(&mut s, "\n").trim().to_owned();
    expect(&mut s, &format!("hel {} · ", &id[..8]));
    expect(&mut s, PROMPT_END);

    // An instruction: its answer, then one line of token use.
    type_in(&mut s, "hello\r");
    expect(&mut s, "Hello there.");
    expect(&mut s, "tokens in, ");
    expect(&mut s, PROMPT_END);
    assert_eq!(last_instruction(&mock), "hello");

    // A bracketed paste of two lines, then Alt-Enter and one more line:
    // one instruction.
    type_in(
        &mut s,
        "\x1b[200~line one\nline two\x1b[201~\x1b\rline three\r",
    );
    expect(&mut s, "Pasted.");
    expect(&mut s, PROMPT_END);
    assert_eq!(last_instruction(&mock), "line one\nline two\nline three");
    assert_eq!(mock.requests().len(), 2);

    // A slash command: this session's log, from inside it.
    type_in(&mut s, "/log\r");
    let log = expect(&mut s, PROMPT_END);
    assert!(log.contains("line one") && log.contains("hello"), "{log}");
    assert_eq!(mock.requests().len(), 2, "a command is not sent");

    // Another command: the next request goes to another model.
    type_in(&mut s, "/model other-model\r");
    expect(&mut s, PROMPT_END);
    // And a name for the session, which other commands then take.
    type_in(&mut s, "/rename prompt-task\r");
    expect(&mut s, "is named prompt-task");
    expect(&mut s, PROMPT_END);
    let log = p.run(None, &["sessions", "log", "prompt-task"]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert!(log.stdout.contains("line one"), "{}", log.stdout);

    // A slow answer, cancelled by Ctrl-C once the request is out.
    type_in(&mut s, "slow\r");
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(TIMEOUT_MS);
    while mock.requests().len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the request never came"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(mock.requests()[2]["model"], "other-model");
    s.send_control('c').unwrap();
    expect(&mut s, "hel: instruction incomplete (interrupted)");
    expect(&mut s, PROMPT_END);
    // Recorded as any interrupt is, and the answer never saved.
    let log = p.run(None, &["sessions", "log", &id, "--json"]);
    let log: Value = serde_json::from_str(&log.stdout).unwrap();
    assert_eq!(log[0]["record"], "interrupted", "{log}");
    assert_eq!(log[0]["instruction"], "slow");

    // Ctrl-C again, on the empty prompt: hel leaves.
    s.send_control('c').unwrap();
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

#[test]
fn history_survives_a_restart_and_confirm_asks_at_the_prompt() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "Writing the file now.", "piece": 3,
         "tool_calls": [call("write_file", json!({"path": "a.txt", "content": "hi\n"}))]},
        {"content": "Wrote it.", "piece": 2},
        {"content": "Again."},
    ]));
    let mut s = spawn(&p, &mock, &["--access", "confirm"]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "write\x1b\rthe file\r");
    // Streamed text of a response that goes on with tools: shown as it
    // arrives, then set apart as working notes.
    expect(&mut s, "Writing the file now.");
    expect(&mut s, "working notes");
    expect(&mut s, "hel: allow write_file a.txt? [y/N] ");
    type_in(&mut s, "y\r");
    expect(&mut s, "Wrote it.");
    expect(&mut s, PROMPT_END);
    assert_eq!(p.read("a.txt"), "hi\n");
    s.send_control('d').unwrap();
    s.exp_eof().unwrap();
    exited_with(&s, 0);

    let file = p.home.path().join(".local/state/hel/history");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    // A new process: Up brings back the last instruction (the answer to
    // the question is not history).
    let mut s = spawn(&p, &mock, &[]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "\x1b[A\r");
    expect(&mut s, "Again.");
    assert_eq!(last_instruction(&mock), "write\nthe file");
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// The line of token use marks hel's estimates: a server that reported no
/// usage (issue 20) gets `~` on each figure, one that did gets none.
#[test]
fn the_token_line_marks_estimated_figures() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "Counted."},
        {"content": "Guessed.", "usage": "none"},
    ]));
    let mut s = spawn(&p, &mock, &[]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "one\r");
    expect(&mut s, "Counted.");
    let line = expect(&mut s, PROMPT_END);
    assert!(
        line.contains(" tokens in, ") && !line.contains('~'),
        "{line:?}"
    );
    type_in(&mut s, "two\r");
    expect(&mut s, "Guessed.");
    let line = expect(&mut s, PROMPT_END);
    assert!(
        line.contains("hel: ~") && line.contains(&bytes(" out · context ~")),
        "{line:?}"
    );
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}
