//! Streamed answers: assembled exactly as the same answers not streamed,
//! whatever the chunk boundaries; a stream that breaks off, stalls or is
//! interrupted saves nothing; stdout into a pipe carries only completed
//! answers, byte for byte.

use serde_json::{json, Value};

use crate::common::*;

/// Tool calls whose arguments arrive in pieces of 3 characters, the two
/// calls' pieces interleaved, the stream's frames cut every 7 bytes with
/// keep-alive comments between events; then a final answer with escape
/// sequences and non-ASCII text, one character per piece.
fn script(stream_shape: Value) -> Value {
    let mut calls = json!({
        "content": "Writing both files.",
        "tool_calls": [
            call("write_file", json!({"path": "a.txt", "content": "alpha \"quoted\"\nline 2 é\n"})),
            call("write_file", json!({"path": "b.txt", "content": "beta\t한\n"})),
        ],
    });
    let mut answer =
        json!({"content": "Done: a.txt, b.txt \u{1b}[1mbold\u{1b}[0m\r\nnext line é 한"});
    for step in [&mut calls, &mut answer] {
        for (k, v) in stream_shape.as_object().unwrap() {
            step[k] = v.clone();
        }
    }
    calls["piece"] = json!(3);
    answer["piece"] = json!(1);
    json!([calls, answer])
}

#[test]
fn streamed_answers_assemble_exactly_as_unstreamed_ones() {
    let shapes = [
        (
            json!({"interleave": true, "keepalive": true, "frame_bytes": 7}),
            false,
        ),
        (json!({}), true),
        (json!({"no_stream": true}), false),
    ];
    let mut seen: Vec<(String, Vec<Value>, String, String)> = Vec::new();
    for (shape, no_stream) in shapes {
        let p = Project::new();
        let rec = p.path().join("rec");
        let mock = Mock::start(script(shape.clone()));
        let mut args = vec!["--access", "auto", "--record", rec.to_str().unwrap()];
        if no_stream {
            args.push("--no-stream");
        }
        args.extend(["-p", "write them"]);
        let run = p.run(Some(&mock), &args);
        assert_eq!(run.code, 0, "{shape}: {}", run.stderr);
        let requests = mock.requests();
        assert_eq!(requests.len(), 2, "{shape}");
        if no_stream {
            assert!(requests[0].get("stream").is_none(), "{}", requests[0]);
        } else {
            assert_eq!(requests[0]["stream"], true);
            assert_eq!(
                requests[0]["stream_options"],
                json!({"include_usage": true})
            );
        }
        // The Meter and the record saw the server's real usage.
        let r = record(&rec);
        assert!(r["usage"]["input_tokens"].as_u64().unwrap() > 100, "{r}");
        // The record holds the assembled response of each request.
        let raw = std::fs::read_to_string(rec.join("raw/requests.jsonl")).unwrap();
        let lines: Vec<Value> = raw
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines[0]["response"]["choices"][0]["message"], requests[1]["messages"][2],
            "{shape}"
        );
        seen.push((
            run.stdout,
            // After the system message (it names the project's directory).
            requests[1]["messages"].as_array().unwrap()[1..].to_vec(),
            p.read("a.txt"),
            p.read("b.txt"),
        ));
    }
    let (stdout, messages, a, b) = &seen[1];
    assert_eq!(a, "alpha \"quoted\"\nline 2 é\n");
    assert_eq!(b, "beta\t한\n");
    // Into a pipe, the answer byte for byte, once, after it was saved.
    assert_eq!(
        stdout,
        "Done: a.txt, b.txt \u{1b}[1mbold\u{1b}[0m\r\nnext line é 한\n"
    );
    let assistant = &messages[1];
    assert_eq!(assistant["content"], "Writing both files.");
    assert_eq!(assistant["tool_calls"].as_array().unwrap().len(), 2);
    for other in [&seen[0], &seen[2]] {
        assert_eq!(other, &seen[1], "streamed and not streamed differ");
    }
}

/// The session's checkpoints and messages, from `hel sessions --json`.
fn saved(p: &Project) -> (u64, u64) {
    let run = p.run(None, &["sessions", "--json"]);
    let sessions: Value = serde_json::from_str(&run.stdout).unwrap();
    (
        sessions[0]["checkpoints"].as_u64().unwrap(),
        sessions[0]["messages"].as_u64().unwrap(),
    )
}

#[test]
fn a_broken_or_stalled_stream_saves_nothing() {
    let long = "This answer is long enough to arrive in several pieces.";
    let cases = [
        // Cut mid-answer, and mid-way through a tool call's arguments.
        (
            json!({"content": long, "cut_after": 3}),
            "broke off",
            "error",
        ),
        (
            json!({"tool_calls": [call("write_file", json!({"path": "c.txt", "content": long}))], "piece": 4, "cut_after": 5}),
            "broke off",
            "error",
        ),
        // Keep-alive comments only, every 100 ms: no progress.
        (
            json!({"content": long, "stall_after": 2}),
            "sent nothing new for 1s",
            "timeout",
        ),
    ];
    for (step, says, termination) in cases {
        let p = Project::new();
        let rec = p.path().join("rec");
        let mock = Mock::start(json!([{"content": "first answer"}, step.clone()]));
        let run = p.run(
            Some(&mock),
            &[
                "--access",
                "auto",
                "--request-timeout",
                "1",
                "--record",
                rec.to_str().unwrap(),
                "-p",
                "one",
                "-p",
                "two",
            ],
        );
        assert_eq!(run.code, 1, "{step}: {}", run.stderr);
        assert_eq!(run.stdout, "first answer\n", "{step}");
        let line = run
            .stderr
            .lines()
            .find(|l| l.starts_with("hel: instruction incomplete"))
            .unwrap_or_else(|| panic!("{step}: {}", run.stderr));
        assert!(
            line.contains(says) && line.contains(&format!("({termination})")),
            "{line}"
        );
        assert_eq!(mock.requests().len(), 2, "{step}: not retried");
        assert_eq!(record(&rec)["termination"], termination);
        assert!(!p.path().join("c.txt").exists(), "no tool ran");
        // Only the first instruction is saved: system, user, assistant.
        assert_eq!(saved(&p), (1, 3), "{step}");
    }
}

#[test]
fn ctrl_c_during_a_stream_saves_nothing() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "never finished", "stall_after": 2}]));
    let child = p
        .hel(Some(&mock))
        .args(["-p", "wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Ready when the model has the request (the stream then stalls for good).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while mock.requests().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no request");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("instruction incomplete (interrupted)"),
        "{stderr}"
    );
    // No complete answer ever came: no session was made.
    let run = p.run(None, &["sessions", "--json"]);
    assert_eq!(run.stdout.trim(), "[]", "{}", run.stderr);
}

/// Usage figures are the server's word: absurd ones (the largest u64, on
/// every response) must not overflow a sum or the compaction estimate;
/// taken at their word, the conversation no longer fits: said in one line.
#[test]
fn absurd_usage_figures_do_not_crash_the_run() {
    let p = Project::new();
    let big = u64::MAX;
    let reply = |message: Value, finish: &str| {
        json!({"raw": json!({
            "id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": big, "completion_tokens": big},
        }).to_string()})
    };
    let call = json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"true\"}"}}]});
    let mock = Mock::start(json!([
        reply(call, "tool_calls"),
        reply(json!({"role": "assistant", "content": "done"}), "stop"),
    ]));
    let run = p.run(Some(&mock), &["-p", "go"]);
    assert!(
        !run.stderr.contains("panicked") && run.code != 101,
        "{}",
        run.stderr
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("does not fit the context window of 128000 tokens"),
        "{}",
        run.stderr
    );
}

/// A reply whose message the store could not save back (content not text,
/// a role that is not the assistant's, a call's arguments not a string),
/// whole or assembled from a stream, is refused as the server's fault: the
/// run does not go on unable to save.
#[test]
fn a_reply_the_store_could_not_save_is_refused() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"raw": json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": 5}, "finish_reason": "stop"}]}).to_string()},
        {"message": {"role": "banana", "content": "x"}},
    ]));
    for _ in 0..2 {
        let run = p.run(Some(&mock), &["-p", "go"]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.stderr.contains("choices[0].message is not")
                && !run.stderr.contains("internal error"),
            "{}",
            run.stderr
        );
    }
}
