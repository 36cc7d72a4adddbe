//! Output for scripts: `--output-format stream-json` and `json`.

use crate::common::*;
use serde_json::{json, Value};

/// Every line of stdout as a JSON object.
fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[test]
fn stream_json_reports_a_tool_using_run_in_order_and_its_session_resumes() {
    let p = Project::new();
    p.write("notes.txt", "port = 8080\n");
    let mock = Mock::start(json!([
        {"content": "Let me look.", "tool_calls": [call("read_file", json!({"path": "notes.txt"})), call("bash", json!({"command": "seq 1 30000"}))]},
        {"content": "The port is 8080."},
        {"content": "You asked about the port."},
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--access",
            "auto",
            "--output-format",
            "stream-json",
            "-p",
            "Which port?",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    // stderr keeps the human lines.
    assert!(run.stderr.starts_with("session: "), "{}", run.stderr);
    let ev = events(&run.stdout);
    assert_eq!(
        types(&ev),
        [
            "session",
            "response",
            "tool_call",
            "tool_result",
            "tool_call",
            "tool_result",
            "response",
            "checkpoint",
            "result"
        ],
        "{}",
        run.stdout
    );
    let s = &ev[0];
    assert_eq!(s["version"], 1);
    let sid = s["session_id"].as_str().unwrap().to_owned();
    assert_eq!(sid, run.session());
    assert_eq!(s["saved"], false);
    assert_eq!(s["model"], "mock-model");
    assert_eq!(s["access"], "auto");
    assert_eq!(s["project"], p.path().display().to_string());
    assert_eq!(ev[1]["text"], "Let me look.");
    assert_eq!(ev[1]["tool_calls"], 2);
    assert!(ev[1]["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(ev[2]["name"], "read_file");
    assert_eq!(ev[2]["arguments"], r#"{"path":"notes.txt"}"#);
    assert_eq!(ev[3]["id"], ev[2]["id"]);
    assert_eq!(ev[3]["ok"], true);
    assert_eq!(ev[3]["content"], "port = 8080\n");
    assert_eq!(ev[3]["spill"], Value::Null);
    assert_eq!(ev[4]["name"], "bash");
    // The large output: spilled, its excerpt bounded, its path named.
    let spill = ev[5]["spill"].as_str().unwrap();
    assert!(
        spill.starts_with(".hel/sessions/") && spill.contains("/spill/"),
        "{spill}"
    );
    assert_eq!(ev[5]["cut"], true);
    assert_eq!(ev[5]["content"].as_str().unwrap().chars().count(), 2000);
    assert_eq!(ev[6]["text"], "The port is 8080.");
    assert_eq!(ev[6]["tool_calls"], 0);
    let checkpoint = ev[7]["id"].as_str().unwrap();
    assert_eq!(checkpoint.len(), 64);
    let r = &ev[8];
    assert_eq!(r["version"], 1);
    assert_eq!(r["session_id"], sid.as_str());
    assert_eq!(r["instruction"], 1);
    assert_eq!(r["answer"], "The port is 8080.");
    assert_eq!(r["termination"], "completed");
    assert_eq!(r["error"], Value::Null);
    assert_eq!(r["checkpoint"], checkpoint);
    assert_eq!(r["exit"], 0);
    let sum = |k: &str| {
        ev.iter()
            .filter(|e| e["type"] == "response")
            .map(|e| e["usage"][k].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(
        r["usage"]["input_tokens"].as_u64().unwrap(),
        sum("input_tokens")
    );
    assert_eq!(
        r["usage"]["output_tokens"].as_u64().unwrap(),
        sum("output_tokens")
    );
    assert!(r["duration_ms"].is_u64());

    // A script resumes the session from the id in the first event.
    let again = p.run(
        Some(&mock),
        &[
            "--output-format",
            "json",
            "resume",
            &sid,
            "-p",
            "What did I ask?",
        ],
    );
    assert_eq!(again.code, 0, "{}", again.stderr);
    let out = events(&again.stdout);
    assert_eq!(types(&out), ["result"], "{}", again.stdout);
    assert_eq!(out[0]["session_id"], sid.as_str());
    assert_eq!(out[0]["answer"], "You asked about the port.");
    assert_ne!(out[0]["checkpoint"], checkpoint);
    let sent = mock.messages(2);
    assert_eq!(
        roles(&sent),
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
    assert_eq!(sent[1]["content"], "Which port?");
    assert_eq!(sent[5]["content"], "The port is 8080.");
}

#[test]
fn json_prints_one_result_per_instruction_and_stream_json_the_confirm_and_partial_text() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "one"},
        {"tool_calls": [call("bash", json!({"command": "true"}))]},
        {"content": "two"},
    ]));
    let run = p.run(
        Some(&mock),
        &["--output-format", "json", "-p", "first", "-p", "second"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = events(&run.stdout);
    assert_eq!(types(&out), ["result", "result"], "{}", run.stdout);
    assert_eq!(out[0]["answer"], "one");
    assert_eq!(out[0]["instruction"], 1);
    assert_eq!(out[1]["answer"], "two");
    assert_eq!(out[1]["instruction"], 2);
    assert_eq!(out[0]["session_id"], out[1]["session_id"]);

    // Confirm mode with no terminal denies the command: a confirm event
    // says so before the result the model reads; text arrives in deltas.
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "true"}))]},
        {"content": "ok then"},
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--output-format",
            "stream-json",
            "--include-partial",
            "--no-sandbox",
            "-p",
            "run it",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ev = events(&run.stdout);
    let t = types(&ev);
    // A warning the run gives as it starts comes after the session event.
    assert_eq!(t[..2], ["session", "warning"], "{}", run.stdout);
    assert!(
        ev[1]["message"].as_str().unwrap().contains("--no-sandbox"),
        "{}",
        run.stdout
    );
    let confirm = t.iter().position(|t| *t == "confirm").unwrap();
    assert_eq!(ev[confirm]["name"], "bash");
    assert_eq!(ev[confirm]["allowed"], false);
    assert_eq!(t[confirm + 1], "tool_result");
    assert_eq!(ev[confirm + 1]["ok"], false);
    let deltas: String = ev
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "ok then");
    assert_eq!(t.last(), Some(&"result"));

    // An instruction that does not complete: its result says why, with
    // no answer and no checkpoint, and the run exits 1 as in text mode.
    let mock = Mock::start(json!([{"content": "cut", "finish_reason": "length"}]));
    let run = p.run(Some(&mock), &["--output-format", "stream-json", "-p", "x"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let ev = events(&run.stdout);
    assert_eq!(
        types(&ev),
        ["session", "response_incomplete", "result"],
        "{}",
        run.stdout
    );
    let r = &ev[2];
    assert_eq!(r["termination"], "max_output_tokens");
    assert_eq!(r["answer"], Value::Null);
    assert_eq!(r["checkpoint"], Value::Null);
    assert_eq!(r["exit"], 1);
    assert!(
        r["error"].as_str().unwrap().contains("output limit"),
        "{}",
        run.stdout
    );

    // A bad combination is a usage error.
    let bad = p.run(Some(&mock), &["--include-partial", "-p", "x"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr
            .contains("--include-partial needs --output-format stream-json"),
        "{}",
        bad.stderr
    );
}
