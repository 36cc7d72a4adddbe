//! `hel sessions import --from codex|claude|pi`: session files of other
//! agents (tests/fixtures/import/, their provenance in PROVENANCE.md) as
//! hel sessions that resume, fork, search, export and fsck.

use crate::common::*;
use serde_json::{json, Value};

fn fixture(rel: &str) -> String {
    format!(
        "{}/../../tests/fixtures/import/{rel}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Import `rel` with `--from from`; the new session's id (the newest).
fn import(p: &Project, from: &str, rel: &str) -> (Run, String) {
    let run = p.run(None, &["sessions", "import", "--from", from, &fixture(rel)]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let id = run
        .stdout
        .split("session ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session in {}", run.stdout))
        .to_owned();
    (run, id)
}

/// The stored checkpoint `at` (None: the newest) as `hel sessions show --json` has it.
fn shown(p: &Project, id: &str) -> Value {
    let run = p.run(None, &["sessions", "show", id, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap()
}

/// `got` equals `want`, or the first message where they differ is shown.
fn same(got: &[Value], want: &[Value]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let (g, w) = (g.to_string(), w.to_string());
        assert!(
            g == w,
            "message {i} differs:\n got {}\nwant {}",
            &g[..g.len().min(400)],
            &w[..w.len().min(400)]
        );
    }
    assert_eq!(got.len(), want.len(), "message counts");
}

fn tool_call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

fn summary(text: &str) -> Value {
    json!({"role": "user", "content": format!("<compacted-summary>\n{text}\n</compacted-summary>")})
}

/// The imported session resumes: the model is sent its messages (after a
/// system message rebuilt here), and the answer is saved as its next
/// checkpoint; a fork of its first checkpoint starts from that one's
/// messages; search finds it; fsck is sound.
fn resumes_forks_searches(p: &Project, id: &str, messages: &[Value], needle: &str) {
    let mock = Mock::start(json!([{"content": "resumed"}, {"content": "forked"}]));
    let run = p.run(Some(&mock), &["resume", id, "-p", "go on"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "resumed\n");
    let sent = mock.messages(0);
    assert_eq!(sent[0]["role"], "system");
    assert!(sent[0]["content"]
        .as_str()
        .unwrap()
        .contains(&p.path().display().to_string()));
    // On the wire a tool-calling message's null content is "" (README).
    let wire: Vec<Value> = messages[1..]
        .iter()
        .map(|m| {
            let mut m = m.clone();
            if m["content"].is_null() {
                m["content"] = json!("");
            }
            m
        })
        .collect();
    same(&sent[1..sent.len() - 1], &wire);
    assert_eq!(sent.last().unwrap()["content"], "go on");
    assert_calls_answered(&sent);
    // What the chat form has no place for never reaches the model.
    let body = serde_json::to_string(&mock.requests()[0]).unwrap();
    assert!(!body.contains("\"import\""), "{body}");

    let log = p.run(None, &["sessions", "log", id, "--json"]);
    let log: Value = serde_json::from_str(&log.stdout).unwrap();
    let first = log.as_array().unwrap().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let fork = p.run(
        Some(&mock),
        &["resume", id, "--at", &first[..12], "-p", "again"],
    );
    assert_eq!(fork.code, 0, "{}", fork.stderr);
    assert_ne!(fork.session(), id);
    let sent = mock.messages(1);
    assert_eq!(sent.last().unwrap()["content"], "again");

    let search = p.run(None, &["sessions", "search", needle, "--json"]);
    assert_eq!(search.code, 0, "{}", search.stderr);
    assert!(search.stdout.contains(id), "{}", search.stdout);
    let export = p.run(None, &["sessions", "export", id, "--format", "json"]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
    assert!(fsck.stdout.contains("store is sound"), "{}", fsck.stdout);
}

#[test]
fn codex_rollouts_import_with_their_tool_calls_compaction_and_reasoning_aside() {
    let p = Project::new();
    let (run, id) = import(&p, "codex", "codex/compaction.jsonl");
    assert!(
        run.stdout.contains("4 checkpoints, 6 messages"),
        "{}",
        run.stdout
    );
    let src: Vec<Value> = std::fs::read_to_string(fixture("codex/compaction.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let text = |i: usize| src[i]["payload"]["content"][0]["text"].clone();
    let shell = &src[16]["payload"];
    let expected = vec![
        json!({"role": "system", "content": "A conversation imported from codex."}),
        summary(src[12]["payload"]["message"].as_str().unwrap()),
        json!({"role": "user", "content": text(13)}),
        json!({"role": "assistant", "content": text(15), "tool_calls": [tool_call(
            shell["call_id"].as_str().unwrap(), "shell", shell["arguments"].as_str().unwrap())]}),
        json!({"role": "tool", "tool_call_id": "call_compact_002", "content": ""}),
        json!({"role": "assistant", "content": text(18)}),
    ];
    let cp = shown(&p, &id);
    same(cp["messages"].as_array().unwrap(), &expected);
    // The reasoning and the source's fields are in the import record.
    let record = &cp["request_config"]["import"];
    assert_eq!(record["version"], 1);
    assert_eq!(record["from"], "codex");
    assert_eq!(record["session"]["id"], "compact-codex-001");
    assert_eq!(
        record["session"]["cwd"],
        "/home/testuser/codex-compact-project"
    );
    let rec = serde_json::to_string(record).unwrap();
    assert!(
        rec.contains("Planning authentication middleware implementation"),
        "{rec}"
    );
    assert_eq!(cp["request_config"]["model"], "gpt-4.5-turbo");
    // The first checkpoint is the first answer, before the compaction.
    let log = p.run(None, &["sessions", "log", &id]);
    assert!(
        log.stdout.lines().last().unwrap().contains("5 msgs"),
        "{}",
        log.stdout
    );
    resumes_forks_searches(&p, &id, &expected, "require_auth");

    // A real `codex exec` rollout: Codex's own context messages are
    // skipped and counted, the answer is one checkpoint.
    let (run, id) = import(&p, "codex", "codex/exec-session.jsonl");
    assert!(
        run.stdout.contains("1 checkpoint, 3 messages"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("1 response_item/message (Codex context)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("1 response_item/message (developer)"),
        "{}",
        run.stdout
    );
    let cp = shown(&p, &id);
    assert_eq!(
        cp["messages"].as_array().unwrap()[1..],
        [
            json!({"role": "user", "content": "[REDACTED_PROMPT]"}),
            json!({"role": "assistant", "content": "[REDACTED_ASSISTANT_TEXT]"}),
        ]
    );
    assert_eq!(cp["request_config"]["model"], "gpt-5.5");

    // A directory: each of its session files is a session.
    let before = p.run(None, &["sessions", "--json"]).stdout;
    let before = serde_json::from_str::<Value>(&before)
        .unwrap()
        .as_array()
        .unwrap()
        .len();
    let dir = p.run(
        None,
        &["sessions", "import", "--from", "codex", &fixture("codex")],
    );
    assert_eq!(dir.code, 0, "{}", dir.stderr);
    assert_eq!(dir.stdout.lines().count(), 2, "{}", dir.stdout);
    let after = p.run(None, &["sessions", "--json"]).stdout;
    let after = serde_json::from_str::<Value>(&after)
        .unwrap()
        .as_array()
        .unwrap()
        .len();
    assert_eq!(after, before + 2);
}

#[test]
fn claude_code_sessions_import_with_tool_results_paired_and_the_compaction_summary() {
    let p = Project::new();
    let (run, id) = import(&p, "claude", "claude/compaction.jsonl");
    assert!(
        run.stdout.contains("3 checkpoints, 6 messages"),
        "{}",
        run.stdout
    );
    let src: Vec<Value> = std::fs::read_to_string(fixture("claude/compaction.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let edit = &src[11]["message"]["content"][1];
    let expected = vec![
        json!({"role": "system", "content": "A conversation imported from claude."}),
        summary(src[9]["message"]["content"].as_str().unwrap()),
        json!({"role": "user", "content": "Now let's add logout functionality"}),
        json!({"role": "assistant", "content": src[11]["message"]["content"][0]["text"], "tool_calls": [tool_call(
            "toolu_c003", "Edit", &serde_json::to_string(&edit["input"]).unwrap())]}),
        json!({"role": "tool", "tool_call_id": "toolu_c003", "content": "File updated successfully"}),
        json!({"role": "assistant", "content": src[13]["message"]["content"][0]["text"]}),
    ];
    let cp = shown(&p, &id);
    same(cp["messages"].as_array().unwrap(), &expected);
    let record = &cp["request_config"]["import"];
    assert_eq!(record["session"]["id"], "compact-session-001");
    assert_eq!(record["messages"][2]["source"]["request_id"], "req_c005");
    resumes_forks_searches(&p, &id, &expected, "invalidated");

    // A real Claude Code (SDK) session: the queue records are skipped and counted.
    let (run, id) = import(&p, "claude", "claude/sdk-session.jsonl");
    assert!(
        run.stdout
            .contains("skipped 1 last-prompt, 2 queue-operation"),
        "{}",
        run.stdout
    );
    let cp = shown(&p, &id);
    assert_eq!(
        cp["messages"].as_array().unwrap()[1..],
        [
            json!({"role": "user", "content": "[REDACTED_PROMPT]"}),
            json!({"role": "assistant", "content": "[REDACTED_ASSISTANT_TEXT]"}),
        ]
    );
    assert_eq!(
        cp["request_config"]["import"]["messages"][1]["source"]["usage"]["cache_read_input_tokens"],
        3057
    );
}

#[test]
fn pi_sessions_import_with_the_aborted_answer_left_out() {
    let p = Project::new();
    let (run, id) = import(&p, "pi", "pi/large-session-head.jsonl");
    assert!(
        run.stdout.contains("2 checkpoints, 22 messages"),
        "{}",
        run.stdout
    );
    // The first instruction's response was aborted: it and its
    // instruction are left out, as hel's loop leaves an incomplete one.
    assert!(
        run.stderr.contains(
            "large-session-head.jsonl: line 3: a response that did not complete was left out"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("before line 5: an instruction without an answer: 1 message left out"),
        "{}",
        run.stderr
    );
    // The messages, made from the source independently: lines 5 to 25.
    let mut expected =
        vec![json!({"role": "system", "content": "A conversation imported from pi."})];
    for line in std::fs::read_to_string(fixture("pi/large-session-head.jsonl"))
        .unwrap()
        .lines()
        .skip(4)
    {
        let e: Value = serde_json::from_str(line).unwrap();
        let m = &e["message"];
        let blocks = m["content"].as_array().cloned().unwrap_or_default();
        let text = |blocks: &[Value]| {
            blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .map(|b| b["text"].as_str().unwrap())
                .collect::<Vec<_>>()
                .join("\n")
        };
        expected.push(match m["role"].as_str() {
            Some("user") => json!({"role": "user", "content": text(&blocks)}),
            Some("assistant") => {
                let calls: Vec<Value> = blocks
                    .iter()
                    .filter(|b| b["type"] == "toolCall")
                    .map(|b| tool_call(b["id"].as_str().unwrap(), b["name"].as_str().unwrap(), &serde_json::to_string(&b["arguments"]).unwrap()))
                    .collect();
                let t = text(&blocks);
                let mut a = json!({"role": "assistant", "content": if t.is_empty() { Value::Null } else { Value::String(t) }});
                if !calls.is_empty() {
                    a["tool_calls"] = Value::Array(calls);
                }
                a
            }
            Some("toolResult") => json!({"role": "tool", "tool_call_id": m["toolCallId"], "content": text(&blocks)}),
            _ => continue,
        });
    }
    let cp = shown(&p, &id);
    same(cp["messages"].as_array().unwrap(), &expected);
    let record = &cp["request_config"]["import"];
    assert_eq!(
        record["session"]["id"],
        "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"
    );
    assert_eq!(cp["request_config"]["model"], "claude-sonnet-4-5");
    resumes_forks_searches(&p, &id, &expected, "user-message-selector");
}

#[test]
fn hostile_lines_are_reported_and_skipped_and_an_incomplete_tail_is_dropped() {
    let p = Project::new();
    let file = p.path().join("pi-hostile.jsonl");
    let lines = [
        r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00Z","cwd":"/x"}"#,
        r#"{"type":"session_info","id":"a0","parentId":null,"name":"Fix the parser"}"#,
        r#"{"type":"message","id":"a1","parentId":"a0","message":{"role":"user","content":"first"}}"#,
        r#"{"type":"message","id":"a2","parentId":"a1","message":{"role":"assistant","content":[{"type":"thinking","thinking":"secret plan","thinkingSignature":"sig"},{"type":"text","text":"answer one"}],"stopReason":"stop"}}"#,
        "{not json",
        r#"{"type":"message","message":{"role":"user"}}"#,
        r#"{"type":"hologram","id":"x","parentId":"a2"}"#,
        r#"{"type":"compaction","id":"c1","parentId":"x","summary":"we did one thing","firstKeptEntryId":"a1"}"#,
        r#"{"type":"message","id":"a3","parentId":"c1","message":{"role":"user","content":"second"}}"#,
        r#"{"type":"message","id":"a4","parentId":"a3","message":{"role":"assistant","content":[{"type":"text","text":"answer two"}],"stopReason":"stop"}}"#,
        r#"{"type":"message","id":"a5","parentId":"a4","message":{"role":"user","content":"third"}}"#,
        r#"{"type":"message","id":"a6","parentId":"a5","message":{"role":"assistant","content":[{"type":"toolCall","id":"t1","name":"read","arguments":{"path":"x"}}],"stopReason":"toolUse"}}"#,
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let run = p.run(
        None,
        &["sessions", "import", "--from", "pi", file.to_str().unwrap()],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let f = file.display().to_string();
    assert!(run.stderr.contains(&format!("{f}:5: ")), "{}", run.stderr);
    assert!(run.stderr.contains(&format!("{f}:6: ")), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("an incomplete tail of 2 messages from line 11 on"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("(fix-the-parser)"), "{}", run.stdout);
    assert!(run.stdout.contains("skipped 1 hologram"), "{}", run.stdout);
    assert!(run.stdout.contains("2 malformed lines"), "{}", run.stdout);
    let cp = shown(&p, "fix-the-parser");
    // The compaction kept its messages from a1 on: nothing before it to
    // summarize but the system message, so the conversation goes on whole.
    let texts: Vec<&str> = cp["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        texts,
        [
            "A conversation imported from pi.",
            "first",
            "answer one",
            "second",
            "answer two"
        ]
    );
    // The thinking went to the first checkpoint's import record.
    let log = p.run(None, &["sessions", "log", "fix-the-parser", "--json"]);
    let log: Value = serde_json::from_str(&log.stdout).unwrap();
    let first = log.as_array().unwrap().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let show = p.run(
        None,
        &[
            "sessions",
            "show",
            "fix-the-parser",
            "--at",
            &first[..12],
            "--json",
        ],
    );
    let cp: Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(
        cp["request_config"]["import"]["messages"][1]["source"]["thinking"],
        json!([{"text": "secret plan", "signature": "sig"}])
    );
    assert_eq!(p.run(None, &["fsck"]).code, 0);

    // A file that is not there is a one-line error, exit 1.
    let missing = p.run(
        None,
        &[
            "sessions",
            "import",
            "--from",
            "codex",
            "/nonexistent/x.jsonl",
        ],
    );
    assert_eq!(missing.code, 1);
    assert_eq!(missing.stderr.lines().count(), 1, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("/nonexistent/x.jsonl"),
        "{}",
        missing.stderr
    );
}

#[test]
fn of_a_file_with_branches_the_branch_the_source_resumes_is_imported() {
    let p = Project::new();
    let file = p.path().join("claude-rewound.jsonl");
    let rec = |uuid: &str, parent: Option<&str>, kind: &str, content: Value| {
        let message = match kind {
            "user" => json!({"role": "user", "content": content}),
            _ => {
                json!({"id": format!("msg_{uuid}"), "role": "assistant", "content": content, "stop_reason": "end_turn"})
            }
        };
        json!({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s", "message": message}).to_string()
    };
    let text = |t: &str| json!([{"type": "text", "text": t}]);
    let lines = [
        rec("u1", None, "user", json!("first question")),
        rec("a1", Some("u1"), "assistant", text("first answer")),
        rec("u2", Some("a1"), "user", json!("a question taken back")),
        rec(
            "a2",
            Some("u2"),
            "assistant",
            text("an answer on the abandoned branch"),
        ),
        // The user went back to a1 and asked again.
        rec(
            "u3",
            Some("a1"),
            "user",
            json!("the question asked instead"),
        ),
        rec("a3", Some("u3"), "assistant", text("the answer kept")),
        json!({"type": "summary", "summary": "Rewound chat", "leafUuid": "a3"}).to_string(),
        json!({"type": "custom-title", "customTitle": "Rewound chat 2", "sessionId": "s"})
            .to_string(),
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let run = p.run(
        None,
        &[
            "sessions",
            "import",
            "--from",
            "claude",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("(rewound-chat-2) · 2 checkpoints, 5 messages"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("skipped 2 records of other branches"),
        "{}",
        run.stdout
    );
    let cp = shown(&p, "rewound-chat-2");
    let texts: Vec<&str> = cp["messages"].as_array().unwrap()[1..]
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "first question",
            "first answer",
            "the question asked instead",
            "the answer kept"
        ]
    );
}
