//! What hel does with the wire format of real compatible servers, as
//! llama-cpp-python 0.3.36 showed it (issue 20; `tools/compat/run` runs the
//! same cases against the real server): hel-mock answers as that server
//! does (`"server": "llama-cpp-python"`, `"usage": "none"`), so each case
//! runs in seconds. Each test asserts on what hel sends and records.

use serde_json::{json, Value};

use crate::common::*;

const LLAMA: &str = "llama-cpp-python";

/// A step answered as llama-cpp-python does.
fn llama(step: Value) -> Value {
    let mut step = step;
    step["server"] = json!(LLAMA);
    step
}

/// The lines of a record's raw/requests.jsonl.
fn raw_lines(rec: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(rec.join("raw/requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The newest checkpoint of the project's only session, loaded.
fn head(p: &Project, sid: &str) -> hel_store::Loaded {
    let store = hel_store::Store::open(&p.path()).unwrap();
    let head = store.head(&sid.parse().unwrap()).unwrap();
    store.load(&head).unwrap()
}

fn is_compaction(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .starts_with("You compact")
}

/// Case 1: a stream without a usage chunk is not 0 tokens: hel estimates
/// the request (chars/4 of the whole body as sent, tool definitions
/// included) and the answer, says so in the record, and saves a Meter that
/// says its figure is an estimate.
#[test]
fn a_stream_without_usage_is_estimated_not_zero() {
    let p = Project::new();
    let rec = p.path().join("rec");
    let mock = Mock::start(json!([
        llama(json!({"content": "first answer"})),
        llama(json!({"content": "second answer"})),
    ]));
    let run = p.run(
        Some(&mock),
        &["--record", rec.to_str().unwrap(), "-p", "one", "-p", "two"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "first answer\nsecond answer\n");
    let r = record(&rec);
    let lines = raw_lines(&rec);
    let reqs = r["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 2);
    for (q, line) in reqs.iter().zip(&lines) {
        assert!(line["response"].get("usage").is_none(), "{line}");
        assert_eq!(q["estimated"], true, "{q}");
        // chars/4 of the request as it went on the wire, tools and all.
        let sent = serde_json::to_string(&line["request"]).unwrap();
        assert!(line["request"]["tools"].as_array().unwrap().len() > 1);
        assert_eq!(q["input_tokens"], sent.chars().count() as u64 / 4, "{q}");
        assert!(q["output_tokens"].as_u64().unwrap() > 0, "{q}");
    }
    assert_eq!(r["usage"]["estimated"], true);
    // The second request's estimate rested on the first's (estimated)
    // observation, and came close to what it then was.
    assert_eq!(reqs[1]["meter"]["observed"], true);
    let estimate = reqs[1]["meter"]["estimate"].as_u64().unwrap();
    let actual = reqs[1]["input_tokens"].as_u64().unwrap();
    assert!(
        estimate <= actual && actual - estimate < 40,
        "{estimate} vs {actual}"
    );
    // The checkpoint's figures are the estimates, and its Meter says so.
    let sid = run.session();
    let log: Value =
        serde_json::from_str(&p.run(None, &["sessions", "log", &sid, "--json"]).stdout).unwrap();
    assert_eq!(log[0]["input_tokens"], reqs[1]["input_tokens"], "{log}");
    assert!(log[0]["output_tokens"].as_u64().unwrap() > 0, "{log}");
    let meter = head(&p, &sid).checkpoint.meter;
    assert_eq!(
        meter,
        json!({"observed": {"messages_sent": 4, "prompt_tokens": actual, "estimated": true}})
    );
}

/// Usage is read wherever the server puts it: on the chunk with the finish
/// reason, or in a chunk of its own (the default); a 0 is no count.
#[test]
fn usage_is_read_from_the_final_chunk_and_a_zero_is_estimated() {
    let p = Project::new();
    let rec = p.path().join("rec");
    let zero = json!({"raw": json!({
        "id": "z", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "zero"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }).to_string()});
    let mock = Mock::start(json!([{"content": "a", "usage": "final"}, zero]));
    let run = p.run(
        Some(&mock),
        &["--record", rec.to_str().unwrap(), "-p", "x", "-p", "y"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = record(&rec);
    let lines = raw_lines(&rec);
    // The mock's usage: the request body's bytes / 4.
    let body = serde_json::to_vec(&mock.requests()[0]).unwrap();
    assert_eq!(r["requests"][0]["estimated"], false);
    assert_eq!(
        lines[0]["response"]["usage"]["prompt_tokens"],
        body.len() / 4
    );
    assert_eq!(r["requests"][0]["input_tokens"], body.len() / 4);
    assert_eq!(r["requests"][1]["estimated"], true);
    assert!(r["requests"][1]["input_tokens"].as_u64().unwrap() > 100);
}

/// Case 1 on resume: a saved Meter whose figure is 0 for a request of
/// messages (what hel saved before it estimated) is not believed.
#[test]
fn a_saved_zero_meter_is_reset_on_resume() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "a"}, {"content": "b"}, {"content": "c"}]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let rec = p.path().join("rec");
    let resumed = |p: &Project| {
        let run = p.run(
            Some(&mock),
            &["--record", rec.to_str().unwrap(), "resume", &sid, "-p", "y"],
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        record(&rec)
    };
    // A real figure is kept.
    assert_eq!(resumed(&p)["meter_restored"], true);
    // The same checkpoint again, with the Meter a usage-less server left.
    {
        let store = hel_store::Store::open(&p.path()).unwrap();
        let (lease, head_id) = store.resume(&sid.parse().unwrap()).unwrap();
        let mut loaded = store.load(&head_id).unwrap();
        let zero = hel_store::Observation {
            messages_sent: loaded.messages.len() - 1,
            prompt_tokens: 0,
            estimated: false,
        };
        let leaves: Vec<_> = loaded.leaves.iter().cloned().map(Some).collect();
        let input = hel_store::CommitInput::new(
            hel_store::Record::Answer,
            &loaded.messages,
            &leaves,
            &loaded.checkpoint.cwd.clone(),
            hel_store::SessionRecord {
                config: loaded.record.config.clone().unwrap(),
                meter: Some(zero),
                cursors: loaded.record.cursors.clone().unwrap(),
            },
        )
        .instruction("y")
        .why("test: a Meter of 0")
        .spill(vec![]);
        store.commit(&lease, &mut loaded.state, input).unwrap();
    }
    let r = resumed(&p);
    assert_eq!(r["meter_restored"], false, "{r}");
    assert_eq!(r["requests"][0]["meter"]["observed"], false);
    assert!(r["requests"][0]["meter"]["estimate"].as_u64().unwrap() > 100);
}

/// Case 1, what it led to: a long streamed conversation with a server
/// that reports no usage compacts before it overflows the server's window
/// (the mock refuses, as llama-cpp-python does, a request whose tokens and
/// output limit exceed it).
#[test]
fn a_long_conversation_without_usage_compacts_before_it_overflows() {
    let p = Project::new();
    let rec = p.path().join("rec");
    let long = |n: usize| format!("Part {n}: {}", "lorem ipsum dolor sit amet ".repeat(150));
    let step =
        |content: &str| llama(json!({"content": content, "context_window": 3000, "piece": 64}));
    let summary = json!({"match": "You compact", "content": "Goal: parts. Decisions: none."});
    let mock = Mock::start(json!([
        summary,
        summary,
        summary,
        step("ok 1"),
        step("ok 2"),
        step("ok 3"),
        step("ok 4"),
    ]));
    let (a, b, c, d) = (long(1), long(2), long(3), long(4));
    let run = p.run(
        Some(&mock),
        &[
            "--tools",
            "none",
            "--context-window",
            "3000",
            "--max-output-tokens",
            "200",
            "--record",
            rec.to_str().unwrap(),
            "-p",
            &a,
            "-p",
            &b,
            "-p",
            &c,
            "-p",
            &d,
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "ok 1\nok 2\nok 3\nok 4\n");
    let reqs = mock.requests();
    assert!(reqs.iter().any(is_compaction), "no compaction");
    let r = record(&rec);
    assert_eq!(r["termination"], "completed");
    assert!(r["compaction_requests"].as_u64().unwrap() >= 1);
}

/// Case 2: with tools, `tool_choice: "auto"` is sent (llama-cpp-python
/// leaves the tools out of the prompt without it); without tools, none.
#[test]
fn tool_choice_auto_goes_with_the_tools() {
    let p = Project::new();
    p.write("app.js", "console.log(1)\n");
    let mock = Mock::start(json!([
        llama(
            json!({"content": "Here are your files: made-up.js", "tool_calls": [call("glob", json!({"pattern": "*.js"}))], "stream_calls": true}),
        ),
        llama(json!({"content": "There is app.js."})),
    ]));
    let run = p.run(Some(&mock), &["-p", "List the files using the glob tool"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let reqs = mock.requests();
    assert_eq!(reqs[0]["tool_choice"], "auto");
    assert_eq!(run.stdout, "There is app.js.\n");
    let tool = &mock.messages(1)[3];
    assert_eq!(tool["role"], "tool");
    assert!(
        tool["content"].as_str().unwrap().contains("app.js"),
        "{tool}"
    );

    let mock = Mock::start(json!([{"content": "plain"}]));
    let run = p.run(Some(&mock), &["--tools", "none", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let first = &mock.requests()[0];
    assert!(
        first.get("tool_choice").is_none() && first.get("tools").is_none(),
        "{first}"
    );
}

/// Cases 3, 4 and 5: a tool call streamed as llama-cpp-python streams it
/// (the whole name, the id and the deprecated `function_call` repeated in
/// every chunk, `content: null`; it does so for a `tool_choice` naming the
/// tool) runs under its own name; the assistant message goes back with
/// `""` for its content and no `function_call` (the server refuses a null
/// with an HTTP 500), while the session keeps it exactly as the server
/// sent it; and the session resumes against the same server.
#[test]
fn a_tool_call_streamed_as_llama_cpp_python_does_runs_and_goes_back_valid() {
    let p = Project::new();
    p.write("app.js", "console.log(1)\n");
    let rec = p.path().join("rec");
    let mock = Mock::start(json!([
        llama(
            json!({"tool_calls": [call("glob", json!({"pattern": "*.js"}))], "piece": 2, "stream_calls": true}),
        ),
        llama(json!({"content": "There is app.js."})),
        llama(json!({"content": "Resumed."})),
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--record",
            rec.to_str().unwrap(),
            "-p",
            "List the .js files",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "There is app.js.\n");
    assert!(
        run.stderr.contains("hel: glob *.js\n") && !run.stderr.contains("globglob"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("retrying"), "{}", run.stderr);
    let sent = &mock.messages(1)[2];
    assert_eq!(sent["content"], "", "{sent}");
    assert!(sent.get("function_call").is_none(), "{sent}");
    assert_eq!(sent["tool_calls"][0]["function"]["name"], "glob");
    assert_eq!(
        sent["tool_calls"][0]["function"]["arguments"],
        "{\"pattern\":\"*.js\"}"
    );
    // Stored as the server sent it (as the record's assembled response).
    let sid = run.session();
    let stored = &head(&p, &sid).messages[2];
    let assembled = &raw_lines(&rec)[0]["response"]["choices"][0]["message"];
    assert_eq!(stored, assembled);
    assert!(stored["content"].is_null() && stored.get("function_call").is_some());
    // Resumed against the same server, the request is accepted.
    let run = p.run(Some(&mock), &["resume", &sid, "-p", "and now?"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "Resumed.\n");
    assert_eq!(mock.requests().len(), 3);
}

/// The same, not streamed: the whole message carries `function_call` and
/// `content: null`.
#[test]
fn a_whole_llama_cpp_python_tool_call_goes_back_valid() {
    let p = Project::new();
    p.write("app.js", "console.log(1)\n");
    let mock = Mock::start(json!([
        llama(json!({"tool_calls": [call("glob", json!({"pattern": "*.js"}))]})),
        llama(json!({"content": "app.js"})),
    ]));
    let run = p.run(Some(&mock), &["--no-stream", "-p", "files?"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sent = &mock.messages(1)[2];
    assert_eq!(sent["content"], "");
    assert!(sent.get("function_call").is_none(), "{sent}");
    let stored = &head(&p, &run.session()).messages[2];
    assert_eq!(stored["function_call"]["name"], "glob");
}

/// Case 3, the error: a 500 whose body is a validation error of the
/// request is shown (its first line, with the one it introduces) and not
/// retried; a plain 500 still is.
#[test]
fn a_validation_error_is_shown_and_not_retried() {
    let p = Project::new();
    // llama-cpp-python's (hel-mock has it whole).
    let body = r#"{"error":{"message":"7 validation errors:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestSystemMessage', 'role'), 'msg': \"Input should be 'system'\", 'input': 'assistant'}\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', 'input': None}\n","type":"internal_server_error","param":null,"code":null}}"#;
    let fastapi = r#"{"detail":[{"type":"missing","loc":["body","model"],"msg":"Field required","input":{}},{"type":"x","loc":["body"],"msg":"y"}]}"#;
    for (body, shown) in [
        (
            body,
            "HTTP 500: 7 validation errors: {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestSystemMessage', 'role'), 'msg': \"Input should be 'system'\", 'input': 'assistant'}",
        ),
        (fastapi, "HTTP 500: body.model: Field required (and 1 more)"),
    ] {
        let mock = Mock::start(json!([{"status": 500, "body": body}, {"content": "never"}]));
        let run = p.run(Some(&mock), &["-p", "x"]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(run.stderr.contains(shown), "{}", run.stderr);
        assert!(!run.stderr.contains("string_type"), "{}", run.stderr);
        assert!(!run.stderr.contains("retrying"), "{}", run.stderr);
        assert_eq!(mock.requests().len(), 1);
    }
    let mock = Mock::start(
        json!([{"status": 500, "body": "{\"error\":{\"message\":\"busy\"}}"}, {"content": "fine"}]),
    );
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(mock.requests().len(), 2);
}

/// A 4xx saying the context is too long compacts once and sends again.
#[test]
fn context_too_long_compacts_once_and_retries() {
    let p = Project::new();
    let rec = p.path().join("rec");
    let too_long = r#"{"error":{"message":"This model's maximum context length is 4000 tokens. However, you requested 4300 tokens (4100 in the messages, 200 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    let mock = Mock::start(json!([
        {"match": "You compact", "content": "Goal: three steps."},
        {"content": "one"},
        {"content": "two"},
        {"status": 400, "body": too_long},
        {"content": "three"},
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--tools",
            "none",
            "--compact-at",
            "100000",
            "--keep-recent",
            "20",
            "--record",
            rec.to_str().unwrap(),
            "-p",
            "first step, with enough words to be worth a summary",
            "-p",
            "second step, with enough words to be worth a summary",
            "-p",
            "third",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "one\ntwo\nthree\n");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 5);
    assert!(is_compaction(&reqs[3]), "{}", reqs[3]);
    let last = reqs[4]["messages"].as_array().unwrap();
    assert!(last[1]["content"]
        .as_str()
        .unwrap()
        .starts_with("<compacted-summary>"));
    assert_eq!(last.last().unwrap()["content"], "third");
    // Refused again after that: the error ends the instruction. (A
    // compaction that changes nothing sends nothing again either.)
    let mock = Mock::start(json!([
        {"match": "You compact", "content": "Goal."},
        {"content": "one"},
        {"status": 400, "body": too_long},
        {"status": 400, "body": too_long},
        {"content": "never"},
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--tools",
            "none",
            "--compact-at",
            "100000",
            "--keep-recent",
            "20",
            "-p",
            &"a first step with many words ".repeat(10),
            "-p",
            "second",
        ],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("HTTP 400: This model's maximum context length"),
        "{}",
        run.stderr
    );
    assert_eq!(
        mock.requests().len(),
        4,
        "{}\n{:#?}",
        run.stderr,
        mock.requests()
    );
}

/// Case 6: an instruction that ends incomplete saves a Meter that counts
/// only the messages kept, so the estimate after resume is of what is
/// sent, not of the message that was dropped.
#[test]
fn an_incomplete_instruction_saves_a_true_meter() {
    let p = Project::new();
    let huge = format!("Read this: {}", "many words here ".repeat(2_000));
    // The huge instruction's first reply is a tool call (so its start is
    // recorded and its end is saved as an interrupted record, Meter and
    // all); its second reply is cut at the output limit.
    let mock = Mock::start(json!([
        {"content": "first"},
        {"tool_calls": [call("glob", json!({"pattern": "*.js"}))]},
        {"content": "cut", "finish_reason": "length"},
        {"content": "after"},
    ]));
    let run = p.run(Some(&mock), &["-p", "small", "-p", &huge]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let sid = run.session();
    let loaded = head(&p, &sid);
    assert_eq!(
        loaded.checkpoint.record,
        Some(hel_store::Record::Interrupted),
        "{}",
        run.stderr
    );
    let kept = loaded.messages.len() as u64;
    let meter = &loaded.checkpoint.meter;
    let sent = meter["observed"]["messages_sent"].as_u64().unwrap_or(0);
    assert!(
        meter["observed"].is_null() || sent <= kept,
        "the saved Meter counts a dropped message ({kept} kept): {meter}"
    );
    let rec = p.path().join("rec");
    let run = p.run(
        Some(&mock),
        &["--record", rec.to_str().unwrap(), "resume", &sid, "-p", "q"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = record(&rec);
    let estimate = r["requests"][0]["meter"]["estimate"].as_u64().unwrap();
    let actual = r["requests"][0]["input_tokens"].as_u64().unwrap();
    assert!(
        estimate <= actual + 50,
        "estimated {estimate} for a request of {actual}"
    );
}

/// Case 7: a window too small for the output limit lowers each request's
/// limit to what fits, says so once, and compacts nothing that fits.
#[test]
fn a_small_window_lowers_the_output_limit_instead_of_failing() {
    let p = Project::new();
    let rec = p.path().join("rec");
    let step = |c: &str| llama(json!({"content": c, "context_window": 8192}));
    let mock = Mock::start(json!([step("one"), step("two")]));
    let run = p.run(
        Some(&mock),
        &[
            "--context-window",
            "8192",
            "--record",
            rec.to_str().unwrap(),
            "-p",
            "hello",
            "-p",
            "again",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "one\ntwo\n");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "no compaction request");
    for q in &reqs {
        let max = q["max_tokens"].as_u64().unwrap();
        let body = serde_json::to_vec(q).unwrap().len() as u64;
        assert!(max < 8192 && body / 4 + max <= 8192, "{max} {body}");
        assert!(max > 4000, "{max}");
    }
    let notes: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("--max-output-tokens"))
        .collect();
    assert_eq!(notes.len(), 1, "{}", run.stderr);
    assert!(
        notes[0].contains("8192 tokens (--max-output-tokens)")
            && notes[0].contains("8192 tokens (--context-window)"),
        "{}",
        notes[0]
    );
    assert_eq!(record(&rec)["compaction_requests"], 0);
    // An answer cut at the lowered limit names the limit it was cut at.
    let mock = Mock::start(json!([{"content": "cut", "finish_reason": "length"}]));
    let run = p.run(Some(&mock), &["--context-window", "8192", "-p", "x"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let sent = mock.requests()[0]["max_tokens"].as_u64().unwrap();
    assert!(
        sent < 8192
            && run
                .stderr
                .contains(&format!("cut at the output limit ({sent} tokens")),
        "{}",
        run.stderr
    );
}

/// `hel config` says when the output limit is more than the window can
/// plan for.
#[test]
fn config_notes_an_output_limit_too_large_for_the_window() {
    let p = Project::new();
    let run = p.run(None, &["config", "--context-window", "8192"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "note: max_output_tokens (8192) is more than a quarter of context_window (8192)"
        ) && run.stdout.contains("compaction plans for 2048"),
        "{}",
        run.stdout
    );
    let run = p.run(None, &["config", "--context-window", "32768"]);
    assert!(!run.stdout.contains("note:"), "{}", run.stdout);
}

/// A stream that ends before any of the answer (llama-cpp-python's, when
/// the model calls a tool with `tool_choice: "auto"`) is asked again once
/// without a stream; a stream that breaks off later is not.
#[test]
fn an_empty_stream_is_asked_again_without_a_stream() {
    let p = Project::new();
    p.write("app.js", "console.log(1)\n");
    let rec = p.path().join("rec");
    let mock = Mock::start(json!([
        llama(json!({"tool_calls": [call("glob", json!({"pattern": "*.js"}))]})),
        llama(json!({"tool_calls": [call("glob", json!({"pattern": "*.js"}))]})),
        llama(json!({"content": "There is app.js."})),
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--record",
            rec.to_str().unwrap(),
            "-p",
            "List the .js files",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "There is app.js.\n");
    assert!(
        run.stderr
            .contains("stream ended before any of the answer; asking again, not streamed"),
        "{}",
        run.stderr
    );
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0]["stream"], true);
    assert!(reqs[1].get("stream").is_none() && reqs[1].get("stream_options").is_none());
    assert_eq!(reqs[1]["messages"], reqs[0]["messages"]);
    // The answer after the tool: streamed again.
    assert_eq!(reqs[2]["stream"], true);
    assert_eq!(reqs[2]["messages"][2]["content"], "");
    let lines = raw_lines(&rec);
    assert_eq!(
        lines[0]["response"]["choices"][0]["message"]["function_call"]["name"],
        "glob"
    );

    // Cut after its first event: no second request.
    let mock = Mock::start(
        json!([{"content": "a long enough answer", "cut_after": 1}, {"content": "never"}]),
    );
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(mock.requests().len(), 1);
}
