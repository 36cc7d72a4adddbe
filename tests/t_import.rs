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
        run.stdout.contains("2 checkpoints, 23 messages"),
        "{}",
        run.stdout
    );
    // The first instruction's response was aborted: it is left out; its
    // instruction stays, as the source sent it on with the next one.
    assert!(
        run.stderr.contains(
            "large-session-head.jsonl: line 3: a response that did not complete was left out"
        ),
        "{}",
        run.stderr
    );
    // The messages, made from the source independently: lines 2 to 25,
    // without the aborted response.
    let mut expected =
        vec![json!({"role": "system", "content": "A conversation imported from pi."})];
    for line in std::fs::read_to_string(fixture("pi/large-session-head.jsonl"))
        .unwrap()
        .lines()
        .skip(1)
    {
        let e: Value = serde_json::from_str(line).unwrap();
        let m = &e["message"];
        if m["stopReason"] == "aborted" {
            continue;
        }
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

/// Every file under `.hel/` with its bytes.
fn store_files(p: &Project) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut dirs = vec![p.path().join(".hel")];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if e.file_type().unwrap().is_dir() {
                dirs.push(path);
            } else {
                out.insert(
                    path.display().to_string(),
                    std::fs::read(&path).unwrap_or_default(),
                );
            }
        }
    }
    out
}

#[test]
fn a_broken_line_refuses_the_file_and_a_call_without_result_is_answered() {
    let p = Project::new();
    let file = p.path().join("pi-hostile.jsonl");
    let lines = vec![
        r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00Z","cwd":"/x"}"#,
        r#"{"type":"session_info","id":"a0","parentId":null,"name":"Fix the parser"}"#,
        r#"{"type":"message","id":"a1","parentId":"a0","message":{"role":"user","content":"first"}}"#,
        r#"{"type":"message","id":"a2","parentId":"a1","message":{"role":"assistant","content":[{"type":"thinking","thinking":"secret plan","thinkingSignature":"sig"},{"type":"text","text":"answer one"}],"stopReason":"stop"}}"#,
        r#"{"type":"hologram","id":"x","parentId":"a2"}"#,
        r#"{"type":"compaction","id":"c1","parentId":"x","summary":"we did one thing","firstKeptEntryId":"a1"}"#,
        r#"{"type":"message","id":"a3","parentId":"c1","message":{"role":"user","content":"second"}}"#,
        r#"{"type":"message","id":"a4","parentId":"a3","message":{"role":"assistant","content":[{"type":"text","text":"answer two"}],"stopReason":"stop"}}"#,
        r#"{"type":"message","id":"a5","parentId":"a4","message":{"role":"user","content":"third"}}"#,
        r#"{"type":"message","id":"a6","parentId":"a5","message":{"role":"assistant","content":[{"type":"toolCall","id":"t1","name":"read","arguments":{"path":"x"}}],"stopReason":"toolUse"}}"#,
    ];
    // A line that is not JSON, one with a repeated key, one without its
    // fields: each refuses the file, naming its line, and nothing under
    // .hel/ changes.
    let import_file = || {
        p.run(
            None,
            &["sessions", "import", "--from", "pi", file.to_str().unwrap()],
        )
    };
    let f = file.display().to_string();
    for broken in [
        "{not json",
        r#"{"type":"message","id":"b1","id":"b2","parentId":"a4","message":{"role":"user","content":"x"}}"#,
        r#"{"type":"message","message":{"role":"user"}}"#,
    ] {
        let mut with = lines.clone();
        with.insert(7, broken);
        std::fs::write(&file, with.join("\n") + "\n").unwrap();
        let before = store_files(&p);
        let run = import_file();
        assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains(&format!("{f}:8: "))
                && run.stderr.contains("nothing of the file is imported"),
            "{}",
            run.stderr
        );
        assert_eq!(run.stdout, "");
        assert!(store_files(&p) == before, "the store changed");
    }
    assert!(!p.run(None, &["sessions", "--json"]).stdout.contains("s1"));

    // The file whole: its last call has no result; it is answered "no
    // result was recorded", and the last instruction, without an answer,
    // is saved as it stands.
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let run = import_file();
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("1 tool call without a recorded result answered \"no result was recorded\""),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("the last instruction (from line 9 on) has no answer: saved as it stands"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("(fix-the-parser)"), "{}", run.stdout);
    assert!(run.stdout.contains("skipped 1 hologram"), "{}", run.stdout);
    let cp = shown(&p, "fix-the-parser");
    // The compaction kept its messages from a1 on: nothing before it to
    // summarize but the system message, so the conversation goes on whole.
    let messages = cp["messages"].as_array().unwrap();
    let texts: Vec<&str> = messages
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
            "answer two",
            "third",
            "no result was recorded"
        ]
    );
    assert_eq!(messages.last().unwrap()["tool_call_id"], "t1");
    assert_eq!(
        cp["request_config"]["import"]["session"]["last_instruction_unanswered"],
        true
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

    // A file name with a newline cannot forge a line of the report.
    let forged = p
        .path()
        .join("x.jsonl\nforged.jsonl: session 0000 · 9 checkpoints");
    std::fs::write(&forged, lines[..4].join("\n") + "\n").unwrap();
    let run = p.run(
        None,
        &[
            "sessions",
            "import",
            "--from",
            "pi",
            forged.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("x.jsonl^Jforged.jsonl"),
        "{}",
        run.stdout
    );

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

/// What a conversation holds: user prompts, model messages, tool calls,
/// tool results.
#[derive(Debug, Default, PartialEq, Clone, Copy)]
struct Counts {
    prompts: usize,
    answers: usize,
    calls: usize,
    results: usize,
}

fn records(rel: &str) -> Vec<Value> {
    std::fs::read_to_string(fixture(rel))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn blocks<'a>(content: &'a Value, kind: &str) -> Vec<&'a Value> {
    content
        .as_array()
        .map(|b| b.iter().filter(|b| b["type"] == kind).collect())
        .unwrap_or_default()
}

/// Counted from a Claude Code transcript as its format has it: every
/// record of the main conversation (not a sub-agent's), a prompt being a
/// user record with text that is not a meta record nor a compaction's
/// summary, a model message an API message (its records share
/// `message.id`).
fn claude_source(rel: &str) -> Counts {
    let mut c = Counts::default();
    let mut messages = std::collections::HashSet::new();
    let mut calls = std::collections::HashSet::new();
    let mut results = std::collections::HashSet::new();
    for r in records(rel) {
        if r["isSidechain"] == true {
            continue;
        }
        let content = &r["message"]["content"];
        match r["type"].as_str() {
            Some("user") if r["isMeta"] != true && r["isCompactSummary"] != true => {
                if content.is_string() || !blocks(content, "text").is_empty() {
                    c.prompts += 1;
                }
                for b in blocks(content, "tool_result") {
                    results.insert(b["tool_use_id"].as_str().unwrap().to_owned());
                }
            }
            Some("assistant") => {
                messages.insert(r["message"]["id"].as_str().unwrap().to_owned());
                for b in blocks(content, "tool_use") {
                    calls.insert(b["id"].as_str().unwrap().to_owned());
                }
            }
            _ => {}
        }
    }
    c.answers = messages.len();
    c.calls = calls.len();
    c.results = results.intersection(&calls).count();
    c
}

/// Counted from a Codex rollout as its format has it: the user's
/// messages (not the context Codex writes as user messages), the model's
/// messages, and its calls (a call the model makes right after its
/// message or another call is part of that response).
fn codex_source(rel: &str) -> Counts {
    let mut c = Counts::default();
    let mut model_last = false;
    for r in records(rel) {
        if r["type"] != "response_item" {
            continue;
        }
        let p = &r["payload"];
        match (p["type"].as_str().unwrap(), p["role"].as_str()) {
            ("message", Some("user")) => {
                let text = blocks(&p["content"], "input_text")
                    .first()
                    .and_then(|b| b["text"].as_str())
                    .unwrap_or("")
                    .trim_start()
                    .to_owned();
                let context = [
                    "<environment_context>",
                    "<user_instructions>",
                    "# AGENTS.md instructions",
                ]
                .iter()
                .any(|p| text.starts_with(p));
                if !context {
                    c.prompts += 1;
                    model_last = false;
                }
            }
            ("message", Some("assistant")) => {
                c.answers += 1;
                model_last = true;
            }
            ("function_call" | "custom_tool_call" | "local_shell_call", _) => {
                c.calls += 1;
                if !model_last {
                    c.answers += 1;
                }
                model_last = true;
            }
            ("function_call_output" | "custom_tool_call_output", _) => {
                c.results += 1;
                model_last = false;
            }
            _ => {}
        }
    }
    c
}

/// Counted from a pi session (version 1: one linear branch) as its format
/// has it: messages of the user, the model's responses that completed
/// (an aborted or failed one is not part of what pi sends on), their
/// calls and the results of those calls.
fn pi_source(rel: &str) -> Counts {
    let mut c = Counts::default();
    let mut calls = std::collections::HashSet::new();
    for r in records(rel) {
        let m = &r["message"];
        match m["role"].as_str() {
            Some("user") if r["type"] == "message" => c.prompts += 1,
            Some("assistant") if !matches!(m["stopReason"].as_str(), Some("aborted" | "error")) => {
                c.answers += 1;
                for b in blocks(&m["content"], "toolCall") {
                    calls.insert(b["id"].as_str().unwrap().to_owned());
                }
            }
            Some("toolResult") if calls.contains(m["toolCallId"].as_str().unwrap()) => {
                c.results += 1
            }
            _ => {}
        }
    }
    c.calls = calls.len();
    c
}

/// Counted from what the import stored: every message of every
/// checkpoint, once (a checkpoint's new messages are those its
/// predecessor does not hold; a compaction's summary is not counted), and
/// the tool results the import made up for calls without one.
fn imported(p: &Project, id: &str) -> (Counts, usize) {
    let log = p.run(None, &["sessions", "log", id, "--json"]);
    let log: Value = serde_json::from_str(&log.stdout).unwrap();
    let mut c = Counts::default();
    let mut synthetic = 0;
    let mut before: Vec<String> = Vec::new();
    for cp in log.as_array().unwrap().iter().rev() {
        let at = cp["id"].as_str().unwrap();
        let run = p.run(
            None,
            &[
                "sessions",
                "export",
                id,
                "--at",
                &at[..16],
                "--format",
                "json",
            ],
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        let messages: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
        let mut held = before.clone();
        for m in &messages[1..] {
            let key = m.to_string();
            if let Some(i) = held.iter().position(|h| *h == key) {
                held.swap_remove(i);
                continue;
            }
            let content = m["content"].as_str().unwrap_or("");
            match m["role"].as_str() {
                Some("user") if !content.starts_with("<compacted-summary>") => c.prompts += 1,
                Some("assistant") => {
                    c.answers += 1;
                    c.calls += m["tool_calls"].as_array().map_or(0, Vec::len);
                }
                Some("tool") if content == "no result was recorded" => synthetic += 1,
                Some("tool") => c.results += 1,
                _ => {}
            }
        }
        before = messages[1..].iter().map(Value::to_string).collect();
    }
    (c, synthetic)
}

/// Real session files other projects publish (tests/fixtures/import/real,
/// PROVENANCE.md there) import whole: the prompts, model messages, tool
/// calls and results of every checkpoint together are those a count over
/// the file finds; fsck is sound and gc runs after; the newest checkpoint
/// resumes with every call paired.
#[test]
fn real_session_files_import_whole_with_their_tool_calls() {
    let p = Project::new();
    type Counter = fn(&str) -> Counts;
    let files: [(&str, &str, Counter); 5] = [
        (
            "claude",
            "real/claude/4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
            claude_source,
        ),
        ("claude", "real/claude/subagent.jsonl", claude_source),
        ("claude", "real/claude/tool_heavy.jsonl", claude_source),
        (
            "codex",
            "real/codex/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
            codex_source,
        ),
        ("pi", "real/pi/before-compaction.jsonl", pi_source),
    ];
    for (from, rel, count) in files {
        let (run, id) = import(&p, from, rel);
        let source = count(rel);
        let (got, synthetic) = imported(&p, &id);
        eprintln!("{rel}: source {source:?}; imported {got:?}, {synthetic} results made up");
        assert!(source.calls > 0, "{rel}: no tool calls");
        assert_eq!(
            got,
            Counts {
                results: source.results,
                ..source
            },
            "{rel}\n{}",
            run.stderr
        );
        assert_eq!(synthetic, source.calls - source.results, "{rel}");

        // Resumed (a long one is compacted by hel first: one request
        // more), every request pairs every call.
        let mock = Mock::start(json!([{"content": "summary"}, {"content": "resumed"}]));
        let resumed = p.run(Some(&mock), &["resume", &id, "-p", "go on"]);
        assert_eq!(resumed.code, 0, "{rel}: {}", resumed.stderr);
        let requests = mock.requests().len();
        assert!(requests >= 1, "{rel}");
        for i in 0..requests {
            assert_calls_answered(&mock.messages(i));
        }
        let last = mock.messages(requests - 1);
        assert!(last.len() > 2, "{rel}");
        assert_eq!(last.last().unwrap()["content"], "go on", "{rel}");
    }
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
    assert!(fsck.stdout.contains("store is sound"), "{}", fsck.stdout);
    let gc = p.run(None, &["gc"]);
    assert_eq!(gc.code, 0, "{}{}", gc.stdout, gc.stderr);
}

/// A file of a few huge records is read a line at a time, keeping per
/// record only ids and links, each id bounded: 12 records whose uuids are
/// 24 MiB each (a 288 MiB file; an import that kept every uuid held more
/// than 256 MiB) are refused at the first, naming it, and the import's
/// peak memory stays far below the file's size.
#[test]
fn an_import_keeps_no_record_whole_and_refuses_an_overlong_id() {
    use std::io::Write;
    let p = Project::new();
    let file = p.path().join("huge-ids.jsonl");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
        let id = "x".repeat(24 << 20);
        for i in 0..12 {
            let kind = if i % 2 == 0 { "user" } else { "assistant" };
            writeln!(
                f,
                r#"{{"type":"{kind}","uuid":"{id}{i}","parentUuid":null,"message":{{"role":"{kind}","content":"hi"}}}}"#
            )
            .unwrap();
        }
    }
    let before = store_files(&p);
    let m = run_measured(p.hel(None).args([
        "sessions",
        "import",
        "--from",
        "claude",
        file.to_str().unwrap(),
    ]));
    std::fs::remove_file(&file).unwrap();
    eprintln!("peak RSS {} KiB", m.max_rss_kib);
    assert_eq!(m.run.code, 1, "{}", m.run.stderr);
    assert!(
        m.run
            .stderr
            .contains("huge-ids.jsonl:1: a record id longer than 256 bytes"),
        "{}",
        m.run.stderr
    );
    assert!(m.max_rss_kib < 256 << 10, "peak RSS {} KiB", m.max_rss_kib);
    assert!(store_files(&p) == before, "the store changed");
}

/// The shapes of a Claude Code transcript the real files hold, each in a
/// few lines: a parallel call's part and its result branching off the
/// chain, progress records in the chain, a sub-agent's records
/// (`isSidechain`), a record written twice, and a compaction boundary
/// whose logical parent the source pruned.
#[test]
fn claude_code_chains_branches_sidechains_and_a_pruned_compaction() {
    let p = Project::new();
    let file = p.path().join("claude-shapes.jsonl");
    let u = |uuid: &str, parent: Option<&str>, content: Value| json!({"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": "s", "message": {"role": "user", "content": content}});
    let a = |uuid: &str, parent: &str, id: &str, block: Value| json!({"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s", "message": {"id": id, "role": "assistant", "content": [block], "stop_reason": null}});
    let progress = |uuid: &str, parent: &str| json!({"type": "progress", "uuid": uuid, "parentUuid": parent, "data": {"type": "hook_progress"}});
    let call = |id: &str| json!({"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": id}});
    let result = |id: &str| json!([{"type": "tool_result", "tool_use_id": id, "content": format!("read {id}")}]);
    let text = |t: &str| json!({"type": "text", "text": t});
    let records = [
        progress("p0", "none"),
        u("u1", Some("p0"), json!("read both files")),
        a("a1", "u1", "m1", call("t1")),
        progress("p1", "a1"),
        a("a2", "p1", "m1", call("t2")),
        // A sub-agent's records, in the main file.
        json!({"type": "user", "uuid": "s1", "parentUuid": null, "isSidechain": true, "message": {"role": "user", "content": "sub task"}}),
        json!({"type": "assistant", "uuid": "s2", "parentUuid": "s1", "isSidechain": true, "message": {"id": "sm", "role": "assistant", "content": [text("sub answer")]}}),
        // The first call's result hangs off the first part.
        u("r1", Some("a1"), result("t1")),
        u("r2", Some("a2"), result("t2")),
        // Written twice.
        u("r2", Some("a2"), result("t2")),
        a("a3", "r2", "m2", text("both read")),
        json!({"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": null, "logicalParentUuid": "pruned", "content": "Conversation compacted"}),
        json!({"type": "user", "uuid": "c1", "parentUuid": "b1", "isCompactSummary": true, "message": {"role": "user", "content": "we read both files"}}),
        u("u2", Some("c1"), json!("and now?")),
        a("a4", "u2", "m3", text("done")),
    ];
    let lines: Vec<String> = records.iter().map(Value::to_string).collect();
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
            .contains("2 checkpoints, 4 messages · skipped 2 progress, 1 repeated records, 2 sub-agent records (sidechains)"),
        "{}",
        run.stdout
    );
    assert_eq!(run.stderr, "");
    let id = run
        .stdout
        .split("session ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    let log = p.run(None, &["sessions", "log", id, "--json"]);
    let log: Value = serde_json::from_str(&log.stdout).unwrap();
    let first = log.as_array().unwrap().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cp = p.run(
        None,
        &[
            "sessions",
            "export",
            id,
            "--at",
            &first[..12],
            "--format",
            "json",
        ],
    );
    let messages: Vec<Value> = serde_json::from_str(&cp.stdout).unwrap();
    same(
        &messages,
        &[
            json!({"role": "system", "content": "A conversation imported from claude."}),
            json!({"role": "user", "content": "read both files"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                tool_call("t1", "Read", r#"{"file_path":"t1"}"#),
                tool_call("t2", "Read", r#"{"file_path":"t2"}"#)]}),
            json!({"role": "tool", "tool_call_id": "t1", "content": "read t1"}),
            json!({"role": "tool", "tool_call_id": "t2", "content": "read t2"}),
            json!({"role": "assistant", "content": "both read"}),
        ],
    );
    let newest = shown(&p, id);
    same(
        newest["messages"].as_array().unwrap(),
        &[
            json!({"role": "system", "content": "A conversation imported from claude."}),
            summary("we read both files"),
            json!({"role": "user", "content": "and now?"}),
            json!({"role": "assistant", "content": "done"}),
        ],
    );
    assert_eq!(
        newest["request_config"]["import"]["session"]["records_aside"],
        json!({"repeated records": 1, "sub-agent records (sidechains)": 2})
    );
    assert_eq!(p.run(None, &["fsck"]).code, 0);
}
