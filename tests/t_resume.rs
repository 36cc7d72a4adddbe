//! Resuming as people expect (issue 22): a run that never reaches a model
//! leaves no session, `--last` and `--continue` skip sessions the model
//! never answered, a bare `hel resume` off a terminal says what to give,
//! and an instruction that got no answer is carried into the next one.

use serde_json::{json, Value};

use crate::common::*;

fn sessions(p: &Project) -> Vec<Value> {
    let run = p.run(None, &["sessions", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str::<Value>(&run.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The newest user message of request `i`.
fn user_message(mock: &Mock, i: usize) -> String {
    let msgs = mock.messages(i);
    msgs.iter().rev().find(|m| m["role"] == "user").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_run_that_never_reaches_a_model_leaves_nothing() {
    let p = Project::new();
    // Nobody listens on port 9: no answer ever comes.
    let run = p.run(
        None,
        &[
            "--base-url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "-p",
            "hi",
        ],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    // The first line still names the session the run would have made.
    let id = run.session();
    assert!(!p.path().join(".hel").exists(), "{}", run.stderr);
    // A server that refuses the request: no session either, beside a real one.
    let mock = Mock::start(json!([{"content": "Done."}, {"status": 400, "body": "bad request"}]));
    let first = p.run(Some(&mock), &["-p", "real work"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let refused = p.run(Some(&mock), &["-p", "refused"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    let listed = sessions(&p);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["id"], first.session().as_str());
    assert_ne!(listed[0]["id"], id.as_str());
}

#[test]
fn last_and_continue_skip_sessions_without_an_answer() {
    let p = Project::new();
    p.write("notes.txt", "n\n");
    let mock = Mock::start(json!([
        {"content": "First answer."},
        // A newer session the model answered only with a tool call, then
        // failed: it exists (its files can be undone) but has no answer.
        {"tool_calls": [call("read_file", json!({"path": "notes.txt"}))]},
        {"status": 400, "body": "bad request"},
        {"content": "Continued."},
        {"content": "Continued again."},
        {"content": "And again."},
    ]));
    let answered = p.run(Some(&mock), &["-p", "first task"]);
    assert_eq!(answered.code, 0, "{}", answered.stderr);
    let failed = p.run(Some(&mock), &["--access", "auto", "-p", "never answered"]);
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    let listed = sessions(&p);
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[0]["id"], failed.session().as_str(), "the newest");
    assert_eq!(listed[0]["checkpoints"], 0);

    let last = p.run(Some(&mock), &["resume", "--last", "-p", "go on"]);
    assert_eq!(last.code, 0, "{}", last.stderr);
    assert_eq!(last.session(), answered.session());
    assert_eq!(last.stdout, "Continued.\n");
    let msgs = mock.messages(3);
    assert_eq!(msgs[1]["content"], "first task", "{msgs:?}");

    for (flag, answer) in [("-c", "Continued again.\n"), ("--continue", "And again.\n")] {
        let run = p.run(Some(&mock), &[flag, "-p", "and again"]);
        assert_eq!(run.code, 0, "{flag}: {}", run.stderr);
        assert_eq!(run.session(), answered.session(), "{flag}");
        assert_eq!(run.stdout, answer, "{flag}");
    }
    let both = p.run(Some(&mock), &["-c", "--resume", "abcd", "-p", "x"]);
    assert_eq!(both.code, 2, "{}", both.stderr);
}

#[test]
fn bare_resume_off_a_terminal_says_what_to_give() {
    let p = Project::new();
    let run = p.run(None, &["resume"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr.trim(),
        "hel: resume needs a session: give its name or id (`hel sessions` lists them), or --last for the newest"
    );
}

#[test]
fn an_instruction_without_an_answer_is_carried_into_the_next() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "Hello."},
        {"status": 400, "body": "bad request"},
        {"content": "Carried on."},
    ]));
    let run = p.run_stdin(Some(&mock), &[], "hello\nwrite forever\ncontinue\n");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "Hello.\nCarried on.\n");
    assert_eq!(mock.requests().len(), 3);
    assert_eq!(
        user_message(&mock, 2),
        "write forever\n\n[hel: the instruction above did not complete (error) before it was answered; the next instruction follows]\n\ncontinue"
    );
    // Roles still alternate: the failed instruction left no message.
    assert_eq!(
        roles(&mock.messages(2)),
        ["system", "user", "assistant", "user"]
    );
    // Saved as the model was told it.
    let show = p.run(
        None,
        &["sessions", "export", &run.session(), "--format", "json"],
    );
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(show.stdout.contains("write forever"), "{}", show.stdout);
}
