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
pub(crate) fn bytes(text: &str) -> String {
    text.bytes().map(char::from).collect()
}

/// The end of every prompt (`hel 4da5b0e0 · 12% › `).
pub(crate) const PROMPT_END: &str = "% › ";

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
pub(crate) fn type_in(s: &mut PtySession, keys: &str) {
    s.send(keys).unwrap();
    s.flush().unwrap();
}

pub(crate) fn expect(s: &mut PtySession, text: &str) -> String {
    s.exp_string(&bytes(text))
        .unwrap_or_else(|e| panic!("waiting for {text:?}: {e}"))
}

/// The newest user message the mock was sent.
fn last_instruction(mock: &Mock) -> Value {
    let reqs = mock.requests();
    let msgs = reqs.last().unwrap()["messages"].as_array().unwrap().clone();
    msgs.iter().rev().find(|m| m["role"] == "user").unwrap()["content"].clone()
}

pub(crate) fn exited_with(s: &PtySession, code: i32) {
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
    // The next line: the model, the access mode and where help is.
    expect(
        &mut s,
        "hel: model mock-model · access confirm · /help lists the commands",
    );
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

    // Another command: the models (this mock lists none), then the next
    // request to another one.
    type_in(&mut s, "/model\r");
    expect(&mut s, "hel: cannot list the server's models (HTTP 404)");
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/model other-model\r");
    expect(&mut s, PROMPT_END);
    // And a name for the session, which other commands then take, and
    // the prompt shows.
    type_in(&mut s, "/rename prompt-task\r");
    expect(&mut s, "is named prompt-task");
    expect(&mut s, "hel prompt-task · ");
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
    // The model never answered it: nothing of it is recorded.
    let log = p.run(None, &["sessions", "log", &id, "--json"]);
    let log: Value = serde_json::from_str(&log.stdout).unwrap();
    assert_eq!(log[0]["record"], "answer", "{log}");
    assert!(!log.to_string().contains("slow"), "{log}");

    // Ctrl-C on the empty prompt right after the cancel does not leave;
    // twice within a second does, saying how to come back.
    s.send_control('c').unwrap();
    expect(&mut s, "press Ctrl-C again within a second to leave");
    s.send("\x03").unwrap();
    s.flush().unwrap();
    expect(&mut s, "resume with: hel resume prompt-task");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// Wait until the mock has had `n` requests.
fn wait_requests(mock: &Mock, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(TIMEOUT_MS);
    while mock.requests().len() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "request {n} never came"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// An instruction cancelled before any answer: `/retry` sends it again as
/// it was; cancelled again, the next instruction's user message carries it
/// first, then says it was interrupted. One Ctrl-C on the empty prompt
/// does not leave (an instruction typed after it runs); two in a row do,
/// with the hint.
#[test]
fn an_interrupted_instruction_is_retried_or_carried() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "too late", "delay_ms": 60_000},
        {"content": "Retried."},
        {"content": "too late", "delay_ms": 60_000},
        {"content": "Carried."},
    ]));
    let mut s = spawn(&p, &mock, &[]);
    expect(&mut s, "session: ");
    let id: String = expect(&mut s, "\n").trim().to_owned();
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/retry\r");
    expect(&mut s, "nothing to retry");
    expect(&mut s, PROMPT_END);

    type_in(&mut s, "write forever\r");
    wait_requests(&mock, 1);
    s.send_control('c').unwrap();
    expect(&mut s, "hel: instruction incomplete (interrupted)");
    expect(
        &mut s,
        "your next message carries it, or /retry sends it again",
    );
    expect(&mut s, PROMPT_END);
    // Nothing reached the store: no answer came.
    assert!(!p.path().join(".hel").exists());
    type_in(&mut s, "/retry\r");
    expect(&mut s, "Retried.");
    expect(&mut s, PROMPT_END);
    assert_eq!(last_instruction(&mock), "write forever");
    assert_eq!(mock.requests().len(), 2);

    type_in(&mut s, "slow again\r");
    wait_requests(&mock, 3);
    s.send_control('c').unwrap();
    expect(&mut s, "hel: instruction incomplete (interrupted)");
    expect(&mut s, PROMPT_END);
    s.send_control('c').unwrap();
    expect(&mut s, "press Ctrl-C again within a second to leave");
    type_in(&mut s, "continue\r");
    expect(&mut s, "Carried.");
    expect(&mut s, PROMPT_END);
    assert_eq!(
        last_instruction(&mock),
        "slow again\n\n[hel: the instruction above was interrupted before it was answered; the next instruction follows]\n\ncontinue"
    );
    let roles: Vec<Value> = mock.messages(3).iter().map(|m| m["role"].clone()).collect();
    assert_eq!(
        roles,
        [
            json!("system"),
            json!("user"),
            json!("assistant"),
            json!("user")
        ]
    );

    s.send("\x03\x03").unwrap();
    s.flush().unwrap();
    expect(&mut s, &format!("resume with: hel resume {}", &id[..8]));
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// A bare `hel resume` on a terminal: a picker of this project's
/// answered sessions, filtered by typing; Enter continues the one picked.
#[test]
fn bare_resume_picks_a_session_on_the_terminal() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "Alpha done."},
        {"content": "Beta done."},
        {"content": "Back in alpha."},
    ]));
    let alpha = p.run(Some(&mock), &["-p", "alpha task"]);
    assert_eq!(alpha.code, 0, "{}", alpha.stderr);
    let beta = p.run(Some(&mock), &["-p", "beta task"]);
    assert_eq!(beta.code, 0, "{}", beta.stderr);
    let alpha = alpha.session();

    let mut s = spawn(&p, &mock, &["resume"]);
    expect(&mut s, "resume which session?");
    expect(&mut s, "beta task");
    type_in(&mut s, "alpha");
    expect(&mut s, "alpha task");
    type_in(&mut s, "\r");
    expect(&mut s, &format!("session: {alpha}"));
    expect(&mut s, &format!("hel {} · ", &alpha[..8]));
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "more\r");
    expect(&mut s, "Back in alpha.");
    expect(&mut s, PROMPT_END);
    assert_eq!(mock.messages(2)[1]["content"], "alpha task");
    s.send_control('d').unwrap();
    expect(&mut s, &format!("resume with: hel resume {}", &alpha[..8]));
    s.exp_eof().unwrap();
    exited_with(&s, 0);

    // Esc picks nothing, and says so.
    let mut s = spawn(&p, &mock, &["resume"]);
    expect(&mut s, "resume which session?");
    type_in(&mut s, "\x1b");
    expect(&mut s, "no session picked");
    s.exp_eof().unwrap();
    exited_with(&s, 1);
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
    expect(&mut s, "hel: │ 1 +hi");
    expect(
        &mut s,
        "hel: allow write_file a.txt? [y/n/a = always for a.txt/?] ",
    );
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

/// The confirm question shows what it asks about (the lines a
/// search_replace changes, the size and head of a write_file, a command in
/// full) and takes every answer: `?` explains, anything else asks again,
/// `n REASON` sends the reason to the model, `a` allows the call until hel
/// exits (for an edit: the tool on that path; for bash: the exact command
/// or every command of its program).
#[test]
fn the_confirm_question_shows_the_change_and_takes_every_answer() {
    let p = Project::new();
    p.write("a.txt", "old line\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("search_replace", json!({"path": "a.txt", "search": "old line", "replace": "new line"}))]},
        {"tool_calls": [call("write_file", json!({"path": "b.txt", "content": "hi\n"}))]},
        {"tool_calls": [call("write_file", json!({"path": "b.txt", "content": "more\n"}))]},
        {"tool_calls": [call("bash", json!({"command": "echo one"}))]},
        {"tool_calls": [call("bash", json!({"command": "echo two"}))]},
        {"content": "Done."},
    ]));
    let mut s = spawn(&p, &mock, &["--access", "confirm"]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "change things\r");
    expect(&mut s, "hel: │ 1 -old line");
    expect(&mut s, "hel: │ 1 +new line");
    expect(
        &mut s,
        "hel: allow search_replace a.txt? [y/n/a = always for a.txt/?] ",
    );
    type_in(&mut s, "?\r");
    expect(
        &mut s,
        "n [REASON]  do not; the reason, if any, goes to the model",
    );
    expect(&mut s, "[y/n/a = always for a.txt/?] ");
    type_in(&mut s, "perhaps\r");
    expect(&mut s, "hel: answer y, n (or n and a reason), a or ?");
    expect(&mut s, "[y/n/a = always for a.txt/?] ");
    type_in(&mut s, "n not that line\r");
    // The write_file: its size and head, then always for write_file.
    expect(&mut s, "hel: │ 1 line, 3 bytes");
    expect(
        &mut s,
        "hel: allow write_file b.txt? [y/n/a = always for b.txt/?] ",
    );
    assert_eq!(
        mock.messages(1).last().unwrap()["content"],
        "denied: the user declined this call: not that line"
    );
    type_in(&mut s, "a\r");
    // The next write_file of that path is allowed without asking.
    expect(&mut s, "hel: allowed write_file b.txt (you said always)");
    // A simple command: always its program, after choosing.
    expect(&mut s, "hel: │ echo one");
    expect(&mut s, "hel: allow run `echo one`? [y/n/a/?] ");
    type_in(&mut s, "a\r");
    expect(
        &mut s,
        "[c] exactly this command, or [p] every `echo` command? [c/p] ",
    );
    type_in(&mut s, "p\r");
    expect(&mut s, "hel: allowed run `echo two` (you said always)");
    expect(&mut s, "Done.");
    expect(&mut s, PROMPT_END);
    assert_eq!(p.read("a.txt"), "old line\n", "denied");
    assert_eq!(p.read("b.txt"), "more\n");
    let last = mock.messages(5);
    let results: Vec<&str> = last
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        results[3].contains("one") && results[4].contains("two"),
        "{results:?}"
    );
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// The session commands inside the prompt: `/diff` shows what the last
/// instruction changed, `/undo` puts its files back (as `hel undo`) and the
/// session goes on, `/rewind` picks an earlier answer and goes on from it
/// in a fork whose files are restored (the later answers stay in the
/// original session).
#[test]
fn diff_undo_and_rewind_at_the_prompt() {
    let p = Project::new();
    let write = |text: &str| json!({"tool_calls": [call("write_file", json!({"path": "a.txt", "content": text}))]});
    let mock = Mock::start(json!([
        write("one\n"), {"content": "A1"},
        write("two\n"), {"content": "A2"},
        write("three\n"), {"content": "A3"},
        {"content": "In the fork."},
    ]));
    let mut s = spawn(&p, &mock, &["--access", "auto"]);
    expect(&mut s, "session: ");
    let id: String = expect(&mut s, "\n").trim().to_owned();
    expect(&mut s, PROMPT_END);
    for (instruction, answer) in [("write one", "A1"), ("write two", "A2")] {
        type_in(&mut s, &format!("{instruction}\r"));
        expect(&mut s, answer);
        expect(&mut s, PROMPT_END);
    }
    type_in(&mut s, "/diff\r");
    expect(&mut s, "-one");
    expect(&mut s, "+two");
    expect(&mut s, PROMPT_END);

    type_in(&mut s, "/undo\r");
    expect(&mut s, "restore   a.txt");
    expect(&mut s, &format!("session: {id}"));
    expect(&mut s, PROMPT_END);
    assert_eq!(p.read("a.txt"), "one\n");

    type_in(&mut s, "write three\r");
    expect(&mut s, "A3");
    expect(&mut s, PROMPT_END);
    assert_eq!(p.read("a.txt"), "three\n");

    type_in(&mut s, "/rewind\r");
    expect(&mut s, "go back to which answer?");
    type_in(&mut s, "write one");
    expect(&mut s, "write one");
    type_in(&mut s, "\r");
    expect(
        &mut s,
        "also make the project's files as they were there? [y/N] ",
    );
    type_in(&mut s, "y\r");
    expect(&mut s, "session: ");
    let fork: String = expect(&mut s, "\n").trim().to_owned();
    assert_ne!(fork, id);
    expect(&mut s, "restored the files of the forked checkpoint");
    expect(&mut s, PROMPT_END);
    assert_eq!(p.read("a.txt"), "one\n");
    type_in(&mut s, "where am I\r");
    expect(&mut s, "In the fork.");
    expect(&mut s, PROMPT_END);
    let sent: Vec<Value> = mock.messages(6);
    let users: Vec<&str> = sent
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    // The fork has the first answer only; the model is told the files
    // were restored.
    assert_eq!(users.len(), 2, "{users:?}");
    assert_eq!(users[0], "write one");
    assert!(
        users[1].starts_with(
            "[hel: since your last answer the user restored 1 file to an earlier state"
        ) && users[1].ends_with("\n\nwhere am I"),
        "{users:?}"
    );
    // The original session keeps its later answers.
    let log = p.run(None, &["sessions", "log", &id]);
    assert!(
        log.stdout.contains("write three") && log.stdout.contains("write two"),
        "{}",
        log.stdout
    );
    // `/undo` in the fork, whose instruction changed no file: it names the
    // checkpoint picked and its session, and the session goes on without
    // its banner again.
    let json = p.run(None, &["sessions", "log", &id, "--json"]);
    let picked = serde_json::from_str::<Vec<Value>>(&json.stdout)
        .unwrap()
        .into_iter()
        .find(|e| e["record"] == "answer" && e["instruction"] == "write one")
        .unwrap()["id"]
        .as_str()
        .unwrap()[..12]
        .to_owned();
    type_in(&mut s, "/undo\r");
    expect(&mut s, "nothing to undo: the session begins at a fork of");
    expect(&mut s, &format!("checkpoint {picked} of"));
    expect(&mut s, &format!("session {id}: run `hel undo"));
    let after = expect(&mut s, PROMPT_END);
    assert!(!after.contains("session: "), "{after}");
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// Tab completes slash commands and `@paths`; an `@path` in an
/// instruction sends the file's content with it.
#[test]
fn tab_completes_and_at_path_attaches_a_file() {
    let p = Project::new();
    p.write("notes.txt", "the port is 8080\n");
    let mock = Mock::start(json!([{"content": "Read it."}]));
    let mut s = spawn(&p, &mock, &[]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/hel\t");
    expect(&mut s, "/help");
    type_in(&mut s, "\r");
    expect(&mut s, "Commands:");
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "summarize @no\t");
    expect(&mut s, "@notes.txt");
    type_in(&mut s, "\r");
    expect(&mut s, "hel: attached notes.txt (17 bytes)");
    expect(&mut s, "Read it.");
    expect(&mut s, PROMPT_END);
    assert_eq!(
        last_instruction(&mock),
        "summarize @notes.txt\n\n--- @notes.txt (17 bytes) ---\nthe port is 8080\n\n--- end of @notes.txt ---"
    );
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// On a terminal hel's own lines are dimmed and a failure stands out;
/// `NO_COLOR` (or `--color never`) leaves them plain, and `hel diff`
/// colours its lines only when asked to (`--color always` into a pipe).
#[test]
fn colour_on_a_terminal_and_plain_with_no_color() {
    let p = Project::new();
    let mock =
        Mock::start(json!([{"content": "One."}, {"content": "Two."}, {"content": "Three."}]));
    let dim = "\x1b[2mhel: model mock-model";
    let mut s = spawn(&p, &mock, &[]);
    expect(&mut s, dim);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();

    let mut cmd = Command::new(hel_bin());
    cmd.current_dir(p.dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p.home.path())
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .args(["--base-url", &mock.url, "--model", "mock-model"]);
    let mut s = rexpect::session::spawn_command(cmd, Some(TIMEOUT_MS)).unwrap();
    let seen = expect(&mut s, "hel: model mock-model");
    assert!(!seen.contains("\x1b[2m"), "{seen:?}");
    let rest = expect(&mut s, PROMPT_END);
    assert!(!rest.contains("\x1b[2m"), "{rest:?}");
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();

    let mut s = spawn(&p, &mock, &["--color", "never"]);
    let seen = expect(&mut s, "hel: model mock-model");
    assert!(!seen.contains("\x1b[2m"), "{seen:?}");
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();

    let writes = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "a.txt", "content": "x\n"}))]},
        {"content": "ok"},
    ]));
    let run = p.run(Some(&writes), &["--access", "auto", "-p", "w"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let plain = p.run(None, &["diff", &sid]);
    assert!(
        plain.stdout.contains("\n+x\n") && !plain.stdout.contains('\x1b'),
        "{}",
        plain.stdout
    );
    let coloured = p.run(None, &["diff", &sid, "--color", "always"]);
    assert!(
        coloured.stdout.contains("\x1b[32m+x\x1b[0m\n"),
        "{:?}",
        coloured.stdout
    );
}

/// While a command runs, a spinner names the tool and the seconds it has
/// taken (here: until the test, having seen it, lets the command end).
#[test]
fn a_spinner_names_the_running_tool() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "while [ ! -e go ]; do sleep 0.05; done; echo went"}))]},
        {"content": "Done."},
    ]));
    let mut s = spawn(&p, &mock, &["--access", "auto"]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "wait for it\r");
    expect(&mut s, "running bash ");
    expect(&mut s, "s\x1b[K");
    std::fs::write(p.path().join("go"), "").unwrap();
    expect(&mut s, "Done.");
    expect(&mut s, PROMPT_END);
    let results = mock.messages(1);
    assert!(
        results.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("went"),
        "{results:?}"
    );
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// An answer with a heading, a table far wider than 80 columns, a rust
/// code block and a list.
const MARKDOWN_ANSWER: &str = "## Overview\n\nThe change touches **two** files.\n\n| file | what changed | why it matters for the people who read and run this code |\n|---|---|---|\n| src/config/network/listener.rs | renamed the port variable everywhere it is read | clearer for readers and for grep |\n| src/main.rs | dropped the silent fallback to port 8080 | it hid configuration errors |\n\n```rust\nfn main() {\n    println!(\"listening\");\n}\n```\n\n- first item\n- second item with **bold** text\n- third item";

/// `hel` on a pseudo-terminal `columns` wide, with `env` set.
fn spawn_sized(
    p: &Project,
    mock: &Mock,
    args: &[&str],
    env: &[(&str, &str)],
    columns: u16,
) -> PtySession {
    spawn_with(p, Some(mock), columns, args, env)
}

/// What rexpect read (a char per byte) as the text it was.
fn text_of(seen: &str) -> String {
    let bytes: Vec<u8> = seen.chars().map(|c| c as u32 as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `s` without SGR sequences.
fn unstyled(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            chars.by_ref().find(|d| *d == 'm');
        } else {
            out.push(c);
        }
    }
    out
}

/// Ask for the answer at `s` and return what the terminal showed of it,
/// from just after its heading to its last list item, checking that no
/// Markdown mark is left and no line is wider than `columns`.
fn shown_answer(s: &mut PtySession, heading: &str, columns: usize) -> String {
    expect(s, PROMPT_END);
    type_in(s, "explain\r");
    expect(s, heading);
    let shown = text_of(&expect(s, "third item"));
    for raw in ["##", "**", "|---", "| file", "```"] {
        assert!(!shown.contains(raw), "{raw:?} left in {shown:?}");
    }
    for line in unstyled(&shown).split("\r\n") {
        let width = unicode_width::UnicodeWidthStr::width(line);
        assert!(width <= columns, "{width} columns: {line:?} in {shown:?}");
    }
    expect(s, PROMPT_END);
    type_in(s, "/exit\r");
    s.exp_eof().unwrap();
    shown
}

/// On a terminal an answer is rendered as Markdown as it arrives: a
/// heading, emphasis, a table shrunk to the terminal's 80 columns (its
/// cells wrapped), a highlighted code block and a list, no line wider
/// than the terminal; with NO_COLOR the same layout without a single
/// escape sequence, and on a narrower terminal everything fits it too.
/// Piped, stdout is the model's bytes exactly.
#[test]
fn answers_render_as_markdown_fitted_to_the_terminal() {
    let p = Project::new();
    let step = json!({"content": MARKDOWN_ANSWER, "piece": 7});
    let mock = Mock::start(json!([step, step, step, step]));

    let mut s = spawn_sized(&p, &mock, &[], &[], 80);
    let shown = shown_answer(&mut s, "\x1b[1;4mOverview\x1b[0m", 80);
    for styled in [
        "The change touches \x1b[1mtwo\x1b[0m files.",
        // The table: header bold, columns apart, the header ruled off.
        "\x1b[1mfile\x1b[0m",
        "─┼─",
        // The code: the rust keyword highlighted.
        "  \x1b[1;31mfn\x1b[0m ",
        "• second item with \x1b[1mbold\x1b[0m text\r\n",
    ] {
        assert!(shown.contains(styled), "{styled:?} not in {shown:?}");
    }
    let plain = unstyled(&shown);
    // The table was wider than the terminal: its cells wrapped.
    assert!(plain.contains("│ people who read and run"), "{plain}");
    let rows = plain.lines().filter(|l| l.contains(" │ ")).count();
    assert!(rows > 3, "{rows} table lines: {plain}");

    let mut s = spawn_sized(&p, &mock, &[], &[("NO_COLOR", "1")], 80);
    let bare = shown_answer(&mut s, "Overview", 80);
    assert!(!bare.contains('\x1b'), "{bare:?}");
    assert_eq!(bare, plain, "the same layout without colour");
    assert!(bare.contains("\r\n  fn main() {\r\n"), "{bare:?}");
    assert!(bare.contains("\r\n• first item\r\n"), "{bare:?}");

    let mut s = spawn_sized(&p, &mock, &["--color", "never"], &[], 50);
    let narrow = shown_answer(&mut s, "Overview", 50);
    assert!(!narrow.contains('\x1b'), "{narrow:?}");
    assert_ne!(narrow, bare, "laid out for 50 columns");

    let run = p.run(Some(&mock), &["-p", "explain"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, format!("{MARKDOWN_ANSWER}\n"));
}

/// `command` for bash, printing a line, a line with a screen clear and a
/// window title in it, and (once `gate` exists) `went`.
fn noisy_command(gate: &str) -> String {
    format!(
        "echo alpha-$((6*7)); printf 'evil\\033]0;pwned\\007\\033[2Jtail\\n'; while [ ! -e {gate} ]; do sleep 0.05; done; echo went"
    )
}

/// What a pty shows of a running bash command, from `hel: bash` to its
/// result line: its last lines under the spinner, dimmed and stripped of
/// escape sequences (none reaches the terminal raw), and cleared before
/// the result line, so only hel's own lines stay.
fn shows_the_live_tail(s: &mut PtySession, p: &Project, gate: &str) {
    let mut seen = expect(s, "hel: bash ");
    seen += &expect(s, "\x1b[2m  alpha-42\x1b[0m");
    seen += &expect(s, "\x1b[2m  eviltail\x1b[0m");
    std::fs::write(p.path().join(gate), "").unwrap();
    let end = expect(s, "hel:   exit 0");
    seen += &end;
    let cleared = end.rfind("\r\x1b[J").expect("the tail is cleared");
    let after = &end[cleared..];
    assert!(
        !after.contains("alpha-42") && !after.contains("eviltail") && !after.contains('\n'),
        "{after:?}"
    );
    seen += &expect(s, "Done.");
    for raw in ["\x1b]0;pwned", "\x1b[2J", "\x07"] {
        assert!(
            !seen.contains(raw),
            "{raw:?} reached the terminal: {seen:?}"
        );
    }
}

/// While bash runs at the prompt, its last lines show under the spinner
/// as they arrive, and are gone when it ends.
#[test]
fn a_running_command_shows_its_last_lines_live() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": noisy_command("go")}))]},
        {"content": "Done."},
    ]));
    let mut s = spawn(&p, &mock, &["--access", "auto"]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "run it\r");
    shows_the_live_tail(&mut s, &p, "go");
    // The model reads the command's output as it always did.
    let results = mock.messages(1);
    let content = results.last().unwrap()["content"].as_str().unwrap();
    assert!(
        content.contains("alpha-42\nevil\x1b]0;pwned\x07\x1b[2Jtail\nwent"),
        "{content:?}"
    );
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// The same live tail with `-p` on a terminal, for a command run
/// unconfined (`--no-sandbox` reads its output in another place).
#[test]
fn a_running_command_shows_its_last_lines_live_with_p() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": noisy_command("gate")}))]},
        {"content": "Done."},
    ]));
    let mut s = spawn(
        &p,
        &mock,
        &["--access", "auto", "--no-sandbox", "-p", "run it"],
    );
    shows_the_live_tail(&mut s, &p, "gate");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// The model's reasoning, streamed before its tool calls, shows on a
/// terminal as it arrives, set apart: marked `thinking:` and dimmed, its
/// escape sequences escaped.
#[test]
fn reasoning_streams_set_apart_on_a_terminal() {
    let p = Project::new();
    std::fs::write(p.path().join("a.txt"), "hi\n").unwrap();
    let mock = Mock::start(json!([
        {"message": {"role": "assistant", "reasoning_content": "Look at a.txt\u{1b}[2J first.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}},
        ]}},
        {"content": "Done."},
    ]));
    let mut s = spawn(&p, &mock, &["--access", "auto"]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "look\r");
    expect(
        &mut s,
        "\x1b[2;3mthinking:\x1b[0m \x1b[2mLook at a.txt^[[2\x1b[0m",
    );
    let rest = expect(&mut s, "Done.");
    assert!(rest.contains("J first."), "{rest:?}");
    assert!(!rest.contains("\x1b[2J"), "{rest:?}");
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// `hel ARGS` (against `mock`, if any) on a pseudo-terminal `cols`
/// columns wide: `stty` sets the size before hel starts.
fn spawn_stty(p: &Project, mock: Option<&Mock>, cols: u16, args: &[&str]) -> PtySession {
    spawn_with(p, mock, cols, args, &[])
}

/// `hel ARGS` with `env` set on a pseudo-terminal `cols` columns wide
/// (sized before hel starts, so there is no moment it has another width).
pub(crate) fn spawn_with(
    p: &Project,
    mock: Option<&Mock>,
    cols: u16,
    args: &[&str],
    env: &[(&str, &str)],
) -> PtySession {
    let mut cmd = Command::new("sh");
    cmd.current_dir(p.dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p.home.path())
        .env("TERM", "xterm")
        .envs(env.iter().copied())
        .arg("-c")
        .arg(format!("stty cols {cols} rows 40 && exec \"$0\" \"$@\""))
        .arg(hel_bin());
    if let Some(m) = mock {
        cmd.args(["--base-url", &m.url, "--model", "mock-model"]);
    }
    cmd.args(args);
    rexpect::session::spawn_command(cmd, Some(TIMEOUT_MS)).unwrap()
}

/// The lines a terminal shows of `seen` (as rexpect read it, a byte a
/// char), without escape sequences; a line redrawn after `\r` is what it
/// was redrawn as.
pub(crate) fn screen_lines(seen: &str) -> Vec<String> {
    let bytes: Vec<u8> = seen.chars().map(|c| c as u8).collect();
    let text = String::from_utf8_lossy(&bytes);
    let mut plain = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            plain.push(c);
            continue;
        }
        // ESC [ parameters final: a CSI sequence.
        if chars.next_if_eq(&'[').is_some() {
            for c in chars.by_ref() {
                if ('\x40'..='\x7e').contains(&c) {
                    break;
                }
            }
        }
    }
    plain
        .split('\n')
        .map(|l| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            l.rsplit('\r').next().unwrap_or(l).to_owned()
        })
        .collect()
}

/// Assert that no line of `lines` is wider than `cols` (ASCII and `…`
/// here: a character a column).
pub(crate) fn all_fit(lines: &[String], cols: usize, what: &str) {
    for l in lines {
        assert!(
            l.chars().count() <= cols,
            "{what}: a line of {} columns on a {cols}-column terminal: {l:?}",
            l.chars().count()
        );
    }
}

/// On an 80-column terminal every line of `hel sessions log`, `/log`
/// and `hel sessions` fits (rows shrink and are cut with `…`), also at
/// 40 columns; piped, the rows are as they always were.
#[test]
fn listings_fit_the_terminal_width() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "First answer."},
        {"content": "Second answer."},
    ]));
    let long = "Rename the configuration option port_number to listen_port everywhere in the project, update the documentation and the tests, and keep the old name working";
    let mut s = spawn_stty(&p, Some(&mock), 80, &[]);
    expect(&mut s, "session: ");
    let id: String = expect(&mut s, "\n").trim().to_owned();
    expect(&mut s, PROMPT_END);
    type_in(&mut s, &format!("{long}\r"));
    expect(&mut s, "First answer.");
    expect(&mut s, PROMPT_END);
    type_in(&mut s, &format!("Then {long}\r"));
    expect(&mut s, "Second answer.");
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/log\r");
    let shown = screen_lines(&expect(&mut s, PROMPT_END));
    let rows: Vec<&String> = shown.iter().filter(|l| l.contains("Rename the")).collect();
    assert_eq!(rows.len(), 2, "{shown:#?}");
    all_fit(&shown, 80, "/log");
    assert!(rows.iter().all(|r| r.ends_with('…')), "{rows:#?}");
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();

    for cols in [80, 40] {
        for args in [vec!["sessions", "log", id.as_str()], vec!["sessions"]] {
            let mut s = spawn_stty(&p, None, cols, &args);
            let shown = screen_lines(&s.exp_eof().unwrap());
            exited_with(&s, 0);
            let what = format!("{args:?} at {cols} columns");
            assert!(
                shown
                    .iter()
                    .any(|l| l.contains("Rename the") || l.contains("Then Ren")),
                "{what}: {shown:#?}"
            );
            all_fit(&shown, cols as usize, &what);
        }
    }

    // Piped: the rows as before, the instruction's first 60 characters.
    let piped = p.run(None, &["sessions", "log", &id]);
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    let first: String = long.chars().take(60).collect();
    let row = piped.stdout.lines().find(|l| l.ends_with(&first)).unwrap();
    assert!(row.chars().count() > 80, "{row}");
}

/// On a 40-column terminal hel's sentences (the start line, an error
/// naming a long URL) are wrapped at spaces, every word kept; only the
/// `session: <uuid>` line scripts read stays whole.
#[test]
fn messages_wrap_to_a_narrow_terminal() {
    let p = Project::new();
    let url = "http://hel-test.invalid:1/v1";
    let mut s = spawn_stty(
        &p,
        None,
        40,
        &[
            "--base-url",
            url,
            "--model",
            "mock-model",
            "--color",
            "never",
            "-p",
            "x",
        ],
    );
    let shown = screen_lines(&s.exp_eof().unwrap());
    exited_with(&s, 1);
    let (session, rest): (Vec<String>, Vec<String>) =
        shown.into_iter().partition(|l| l.starts_with("session: "));
    assert_eq!(session.len(), 1, "{rest:#?}");
    assert_eq!(session[0].len(), "session: ".len() + 36, "{session:?}");
    all_fit(&rest, 40, "-p on 40 columns");
    let text: Vec<&str> = rest.iter().flat_map(|l| l.split_whitespace()).collect();
    let text = text.join(" ");
    for part in [
        "hel: model mock-model · access confirm",
        "hel: instruction incomplete (error): cannot reach the model server at",
        "the host name does not resolve",
    ] {
        assert!(text.contains(part), "{part:?} in {rest:#?}");
    }
    // The URL, longer than a line, is broken across lines, not cut.
    assert!(
        text.replace(' ', "")
            .contains(&format!("{url}/chat/completions")),
        "{rest:#?}"
    );
}

/// On a terminal 80 and 40 columns wide, a search_replace shows as its
/// file name and the diff of its lines, and a failing command as its exit
/// status and the last lines of its stderr, each on a line of its own,
/// under a label, with a count of the lines not shown; no line is wider
/// than the terminal.
#[test]
fn an_edit_shows_its_diff_and_a_failing_command_its_last_lines() {
    let failing = "echo collected; for i in 1 2 3 4 5 6 7 8; do echo \"  trace line $i\" >&2; done; echo AssertionError >&2; exit 1";
    for cols in [80u16, 40] {
        let p = Project::new();
        p.write("calc.py", "def sub(a, b):\n    return a - b\n");
        let mock = Mock::start(json!([
            {"tool_calls": [call("search_replace", json!({"path": "calc.py", "search": "    return a - b", "replace": "    return a + b"}))]},
            {"tool_calls": [call("bash", json!({"command": failing}))]},
            {"content": "Done."},
        ]));
        let mut s = spawn_with(
            &p,
            Some(&mock),
            cols,
            &["--access", "auto", "-p", "fix it"],
            &[],
        );
        let seen = expect(&mut s, "Done.");
        s.exp_eof().unwrap();
        exited_with(&s, 0);
        let lines = screen_lines(&seen);
        // `session: <uuid>` is for scripts: never cut.
        let shown: Vec<String> = lines
            .iter()
            .filter(|l| !l.starts_with("session: "))
            .cloned()
            .collect();
        all_fit(&shown, cols as usize, "an edit and a command");
        let at = |want: &str| {
            lines
                .iter()
                .position(|l| l == want)
                .unwrap_or_else(|| panic!("{cols}: no line {want:?} in {lines:#?}"))
        };
        let edit = at("hel: search_replace calc.py");
        let minus = at("  2 -    return a - b");
        assert!(edit < minus && minus + 1 == at("  2 +    return a + b"));
        let exit = at("hel:   exit 1");
        assert!(minus < exit && exit < at("  stdout:") && at("  stdout:") < at("  stderr:"));
        assert_eq!(at("    collected"), at("  stdout:") + 1);
        let earlier = at("    … 3 earlier lines");
        assert_eq!(earlier, at("  stderr:") + 1);
        assert_eq!(at("    AssertionError"), earlier + 6);
        assert!(!lines.iter().any(|l| l.contains("trace line 3")));
        assert!(!lines.iter().any(|l| l.contains("exit=")));
        assert_eq!(
            std::fs::read_to_string(p.path().join("calc.py")).unwrap(),
            "def sub(a, b):\n    return a + b\n"
        );
    }
}
