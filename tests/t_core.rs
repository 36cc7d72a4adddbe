//! The core: request bodies, the loop, providers, errors, exit codes, record mode.

use crate::common::*;
use serde_json::json;

#[test]
fn request_bodies_follow_the_conversation() {
    let p = Project::new();
    p.write("HEL.md", "Rule: always say PINEAPPLE.");
    p.write("notes.txt", "port = 8080\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("read_file", json!({"path": "notes.txt"})), call("grep", json!({"pattern": "port"}))]},
        {"content": "The port is 8080."},
        {"content": "Done."},
    ]));
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "-p", "Which port?", "-p", "Thanks"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "The port is 8080.\nDone.\n");
    assert!(run.stderr.starts_with("session: "), "{}", run.stderr);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    let first = &reqs[0];
    assert_eq!(first["model"], "mock-model");
    assert_eq!(first["max_tokens"], 8192);
    assert_eq!(first["tools"].as_array().unwrap().len(), 6);
    let sys = first["messages"][0]["content"].as_str().unwrap();
    assert!(
        sys.contains("Rule: always say PINEAPPLE.")
            && sys.contains(&p.path().display().to_string())
    );
    let last = mock.messages(2);
    assert_eq!(
        roles(&last),
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "user"
        ]
    );
    assert_calls_answered(&last);
    assert_eq!(last[3]["content"], "port = 8080\n");
    assert_eq!(last[4]["content"], "notes.txt:1:port = 8080");
    assert_eq!(last[6]["content"], "Thanks");
}

#[test]
fn assistant_messages_are_sent_back_unchanged() {
    let p = Project::new();
    let msg = json!({"role": "assistant", "content": "hi", "reasoning_content": "thinking…", "x_vendor": {"a": [1, 2]}});
    let mock = Mock::start(json!([{"message": msg}, {"content": "ok"}]));
    let run = p.run(Some(&mock), &["-p", "a", "-p", "b"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(mock.messages(1)[2], msg);
}

#[test]
fn tools_none_sends_no_tools_field_and_openai_uses_max_completion_tokens() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "a"}]));
    let run = p.run(
        Some(&mock),
        &["--tools", "none", "--max-output-tokens", "100", "-p", "x"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let req = &mock.requests()[0];
    assert!(req.get("tools").is_none(), "{req}");
    assert_eq!(req["max_tokens"], 100);

    let mock = Mock::start(json!([{"content": "a"}]));
    let run = Run::from_cmd(p.hel(None).env("OPENAI_API_KEY", "sk-test").args([
        "--provider",
        "openai",
        "--base-url",
        &mock.url,
        "--model",
        "gpt-x",
        "-p",
        "x",
    ]));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let req = &mock.requests()[0];
    assert_eq!(req["max_completion_tokens"], 8192);
    assert!(req.get("max_tokens").is_none());
    assert_eq!(req["model"], "gpt-x");
}

#[test]
fn missing_key_or_model_is_a_usage_error_before_any_session() {
    let p = Project::new();
    let run = p.run(None, &["-p", "x"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("DEEPSEEK_API_KEY"), "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(!p.dir.path().join(".hel").exists());
    let run = p.run(None, &["--provider", "openai", "-p", "x"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--model"), "{}", run.stderr);
    let run = p.run(None, &["--base-url", "http://127.0.0.1:9", "-p", "x"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("HEL_MODEL"), "{}", run.stderr);
    let run = p.run(None, &["--no-such-flag"]);
    assert_eq!(run.code, 2);
    let run = p.run(
        None,
        &[
            "--base-url",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--compact-at",
            "10",
            "--keep-recent",
            "20",
            "-p",
            "x",
        ],
    );
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--keep-recent"), "{}", run.stderr);
}

#[test]
fn server_down_is_a_clear_error_at_once() {
    let p = Project::new();
    // Bind and drop: a port with nobody listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let run = p.run(None, &["--base-url", &url, "--model", "m", "-p", "x"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("cannot reach the model server")
            && run.stderr.contains("nobody listens there"),
        "{}",
        run.stderr
    );
    // Asking again would only be refused again.
    assert_eq!(run.stderr.matches("retrying").count(), 0, "{}", run.stderr);
    assert!(run.stdout.is_empty());
}

#[test]
fn http_500_then_success_retries() {
    let p = Project::new();
    let mock = Mock::start(json!([{"status": 500}, {"status": 429}, {"content": "fine"}]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "fine\n");
    assert_eq!(mock.requests().len(), 3);
    let mock =
        Mock::start(json!([{"status": 400, "body": "{\"error\":{\"message\":\"bad model\"}}"}]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("HTTP 400: bad model"), "{}", run.stderr);
    assert_eq!(mock.requests().len(), 1, "a 400 is not retried");
}

/// A 503 with `Retry-After` is asked again no sooner than it says, with
/// a line saying so; a server that stays busy gets a bounded number of
/// attempts.
#[test]
fn retry_after_is_honoured_and_retries_are_bounded() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"status": 503, "retry_after": "1", "body": "{\"error\":{\"message\":\"busy\"}}"},
        {"content": "fine"}
    ]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "fine\n");
    assert!(
        run.stderr
            .contains("HTTP 503: busy; retrying in 1 s (1 of 7)"),
        "{}",
        run.stderr
    );
    let times = mock.request_times();
    assert_eq!(times.len(), 2);
    assert!(
        times[1].duration_since(times[0]) >= std::time::Duration::from_secs(1),
        "asked again after {:?}",
        times[1].duration_since(times[0])
    );

    let busy = json!({"status": 503, "retry_after": "0"});
    let mock = Mock::start(json!(vec![busy; 12]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("HTTP 503"), "{}", run.stderr);
    assert_eq!(run.stderr.matches("retrying").count(), 7, "{}", run.stderr);
    assert!(run.stderr.contains("(7 of 7)"), "{}", run.stderr);
    assert_eq!(mock.requests().len(), 8, "the first attempt and 7 retries");
}

#[test]
fn length_malformed_and_timeout_end_incomplete() {
    let p = Project::new();
    let rec = p.path().join("rec");
    let mock = Mock::start(json!([{"content": "cut", "finish_reason": "length"}]));
    let run = p.run(Some(&mock), &["--record", rec.to_str().unwrap(), "-p", "x"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.is_empty());
    assert!(run.stderr.contains("output limit"), "{}", run.stderr);
    assert_eq!(record(&rec)["termination"], "max_output_tokens");

    let mock = Mock::start(json!([{"raw": "{not json"}]));
    let run = p.run(Some(&mock), &["--record", rec.to_str().unwrap(), "-p", "x"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("malformed response"), "{}", run.stderr);
    assert_eq!(record(&rec)["termination"], "error");

    // A timeout is asked again, three times, before it ends the instruction.
    let late = json!({"content": "late", "delay_ms": 3000});
    let mock = Mock::start(json!([late, late, late, late]));
    let run = p.run(
        Some(&mock),
        &[
            "--record",
            rec.to_str().unwrap(),
            "--request-timeout",
            "1",
            "-p",
            "x",
        ],
    );
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("timed out after 1s"), "{}", run.stderr);
    assert_eq!(run.stderr.matches("retrying").count(), 3, "{}", run.stderr);
    assert_eq!(mock.requests().len(), 4);
    assert_eq!(record(&rec)["termination"], "timeout");
}

/// The line after `session: <uuid>` names the model and the access mode.
#[test]
fn the_second_line_names_the_model_and_the_access_mode() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "a"}, {"content": "b"}]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert!(lines[0].starts_with("session: "), "{}", run.stderr);
    assert_eq!(lines[1], "hel: model mock-model · access confirm");
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(
        run.stderr.lines().nth(1),
        Some("hel: model mock-model · access auto"),
        "{}",
        run.stderr
    );
}

/// With no terminal to ask on, a write is denied with a whole sentence
/// saying why and what to do (it was cut at 120 characters).
#[test]
fn a_denial_off_a_terminal_is_shown_whole() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "a.txt", "content": "x"}))]},
        {"content": "ok"},
    ]));
    let run = p.run(Some(&mock), &["-p", "write"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let denial = run
        .stderr
        .lines()
        .find(|l| l.starts_with("hel:   denied: "))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        denial.ends_with("; with --access auto hel runs writes and commands without asking"),
        "{denial}"
    );
    assert!(!p.path().join("a.txt").exists());
}

/// A 401 or 403 names the variable the key comes from, and is not asked
/// again.
#[test]
fn an_unauthorized_request_names_the_key_variable() {
    let p = Project::new();
    for status in [401, 403] {
        let mock = Mock::start(json!([
            {"status": status, "body": "{\"error\":{\"message\":\"invalid api key\"}}"},
        ]));
        let run = p.run(Some(&mock), &["-p", "x"]);
        assert_eq!(run.code, 1);
        assert!(
            run.stderr.contains(&format!(
                "HTTP {status}: invalid api key (check the API key in HEL_API_KEY)"
            )),
            "{}",
            run.stderr
        );
        assert_eq!(mock.requests().len(), 1);
    }
}

#[test]
fn incomplete_instruction_keeps_its_valid_prefix() {
    let p = Project::new();
    p.write("a.txt", "alpha\n");
    let mock = Mock::start(json!([
        // Instruction 1: a finished tool round, then the answer is cut.
        {"tool_calls": [call("read_file", json!({"path": "a.txt"}))]},
        {"content": "partial", "finish_reason": "length"},
        // Instruction 2: no round finishes.
        {"status": 400},
        // Instruction 3.
        {"content": "ok"},
    ]));
    let run = p.run_stdin(Some(&mock), &["--access", "auto"], "first\nsecond\nthird\n");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "ok\n");
    let last = mock.messages(3);
    // first's user message and its finished round stay; the cut answer and
    // all of "second" are gone.
    assert_eq!(
        roles(&last),
        ["system", "user", "assistant", "tool", "user"]
    );
    assert_eq!(last[1]["content"], "first");
    // "second" got no answer: "third"'s user message carries it first.
    assert_eq!(
        last[4]["content"],
        "second\n\n[hel: the instruction above did not complete (error) before it was answered; the next instruction follows]\n\nthird"
    );
    assert_calls_answered(&last);
}

#[test]
fn unknown_tools_and_bad_arguments_become_tool_errors() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("teleport", json!({})), {"name": "read_file", "arguments": "{not json"}]},
        {"content": "recovered"},
    ]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let m = mock.messages(1);
    assert!(m[3]["content"]
        .as_str()
        .unwrap()
        .contains("unknown tool \"teleport\""));
    assert!(m[4]["content"]
        .as_str()
        .unwrap()
        .contains("not a JSON object"));
}

#[test]
fn unreadable_hel_md_warns_and_goes_on() {
    let p = Project::new();
    std::fs::create_dir(p.path().join("HEL.md")).unwrap();
    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot read") && run.stderr.contains("HEL.md"),
        "{}",
        run.stderr
    );
    let run = p.run(Some(&mock), &["--no-context-file", "-p", "x"]);
    assert!(!run.stderr.contains("cannot read"), "{}", run.stderr);
}

#[test]
fn stdin_mode_answers_each_line_until_exit() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "one"}, {"content": "two"}]));
    let run = p.run_stdin(Some(&mock), &[], "a\n\nb\n/exit\nc\n");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "one\ntwo\n");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn max_turns_caps_model_calls() {
    let p = Project::new();
    let step = json!({"tool_calls": [call("glob", json!({"pattern": "*"}))]});
    let mock = Mock::start(json!([step.clone(), step.clone(), step]));
    let rec = p.path().join("rec");
    let run = p.run(
        Some(&mock),
        &[
            "--max-turns",
            "2",
            "--record",
            rec.to_str().unwrap(),
            "-p",
            "x",
        ],
    );
    assert_eq!(run.code, 1);
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(record(&rec)["termination"], "max_turns");
}

#[test]
fn record_mode_writes_the_documented_fields() {
    let p = Project::new();
    let rec = p.path().join("rec");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "exit 3"}))]},
        {"content": "answer"},
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--access",
            "auto",
            "--record",
            rec.to_str().unwrap(),
            "-p",
            "x",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = record(&rec);
    assert_eq!(r["model"]["requested"], "mock-model");
    assert_eq!(r["model"]["actual"], "mock-model");
    assert_eq!(r["final_outputs"], json!(["answer"]));
    assert_eq!(r["termination"], "completed");
    assert_eq!(r["model_calls"], 2);
    assert_eq!(r["compaction_requests"], 0);
    assert_eq!(r["meter_restored"], false);
    let reqs = r["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0]["meter"]["observed"], false);
    assert_eq!(reqs[1]["meter"]["observed"], true);
    assert!(reqs[1]["input_tokens"].as_u64().unwrap() > reqs[0]["input_tokens"].as_u64().unwrap());
    let in_sum: u64 = reqs
        .iter()
        .map(|q| q["input_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(r["usage"]["input_tokens"], in_sum);
    let calls = r["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["name"], "bash");
    assert_eq!(calls[0]["args"]["command"], "exit 3");
    assert_eq!(calls[0]["ok"], true, "a non-zero exit is still ok");
    assert!(r["wall_time_ms"].as_u64().is_some());
    let raw = std::fs::read_to_string(rec.join("raw/requests.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = raw
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["purpose"], "turn");
    assert_eq!(lines[0]["request"], mock.requests()[0]);
    assert!(lines[1]["response"]["choices"].is_array());
    assert!(!raw.to_lowercase().contains("authorization"));
}

#[test]
fn ctrl_c_cancels_the_instruction_and_exits_130() {
    let p = Project::new();
    let rec = p.path().join("rec");
    let mock = Mock::start(json!([{"content": "too late", "delay_ms": 30000}]));
    let child = p
        .hel(Some(&mock))
        .args(["--record", rec.to_str().unwrap(), "-p", "wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Ready when the model has the request.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while mock.requests().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "hel never sent its request"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert_eq!(record(&rec)["termination"], "interrupted");
    // The model never answered: no session was made, nothing is stored.
    let sessions: serde_json::Value =
        serde_json::from_str(&p.run(None, &["sessions", "--json"]).stdout).unwrap();
    assert_eq!(sessions, serde_json::json!([]));
    assert!(!p.path().join(".hel").exists());
}

/// Interrupted once the model has answered with a tool call (a session
/// exists from then on): the session holds the instruction's start and
/// what the interrupted instruction left (files `hel undo` can revert),
/// and its conversation keeps the interrupted call with a result saying
/// so (t_rounds has the rest).
#[test]
fn ctrl_c_after_the_first_answer_records_start_and_interrupt() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "echo started; sleep 60"}))]},
    ]));
    let mut child = p
        .hel(Some(&mock))
        .args(["--access", "auto", "-p", "wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    // Ready when the command runs (its start record was written before).
    while !line.contains("hel: bash") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut err, &mut line).unwrap() > 0,
            "hel ended before running the command"
        );
    }
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let sessions: serde_json::Value =
        serde_json::from_str(&p.run(None, &["sessions", "--json"]).stdout).unwrap();
    assert_eq!(sessions[0]["checkpoints"], 0);
    assert_eq!(
        sessions[0]["messages"], 4,
        "the system message, the instruction, the call and its result"
    );
    let sid = sessions[0]["id"].as_str().unwrap().to_owned();
    let log: serde_json::Value =
        serde_json::from_str(&p.run(None, &["sessions", "log", &sid, "--json"]).stdout).unwrap();
    let records: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["record"].as_str().unwrap())
        .collect();
    assert_eq!(records, ["interrupted", "start"]);
}

#[test]
fn a_closed_stderr_does_not_stop_a_run() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("glob", json!({"pattern": "*"}))]},
        {"content": "done"},
    ]));
    let mut child = p
        .hel(Some(&mock))
        .args(["-p", "x"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take()); // nobody reads progress
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    let sessions: serde_json::Value =
        serde_json::from_str(&p.run(None, &["sessions", "--json"]).stdout).unwrap();
    assert_eq!(sessions[0]["checkpoints"], 1);
}

/// A name that does not resolve and a port nobody listens on are said at
/// once, on one line naming the server and why, and not asked again
/// (asking again would only repeat them); the classes that are retried
/// (429, 5xx, timeouts) are counted on the mock in
/// `http_500_then_success_retries` and
/// `length_malformed_and_timeout_end_incomplete`.
#[test]
fn dns_failure_and_refused_connection_are_not_retried() {
    let p = Project::new();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let refused = format!("http://127.0.0.1:{closed}/v1");
    for (url, why) in [
        (
            "http://hel-test.invalid:1/v1",
            "the host name does not resolve",
        ),
        (refused.as_str(), "nobody listens there"),
    ] {
        let run = p.run(None, &["--base-url", url, "--model", "m", "-p", "x"]);
        assert_eq!(run.code, 1, "{url}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{url}: {}", run.stdout);
        assert_eq!(run.stderr.matches("retrying").count(), 0, "{}", run.stderr);
        let failed: Vec<&str> = run
            .stderr
            .lines()
            .filter(|l| l.contains("cannot reach"))
            .collect();
        assert_eq!(failed.len(), 1, "{}", run.stderr);
        assert!(
            failed[0].starts_with(&format!(
                "hel: instruction incomplete (error): cannot reach the model server at {url}/chat/completions: {why} ("
            )),
            "{}",
            run.stderr
        );
        // Nothing was answered: no session was left behind.
        let list = p.run(None, &["sessions"]);
        assert_eq!(
            list.stdout, "no sessions in this project\n",
            "{}",
            list.stderr
        );
    }
}
