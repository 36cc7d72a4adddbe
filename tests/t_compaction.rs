//! Context budget: trimming, then summary compaction, through the program.

use crate::common::*;
use serde_json::{json, Value};

const SUMMARY: &str =
    "Goal: follow the user's steps. Identifiers and values the user gave: ID-deadbeef42.";

fn script() -> Value {
    json!([
        {"match": "You compact a coding agent", "content": SUMMARY},
        {"content": "ok"},
        {"tool_calls": [call("bash", json!({"command": "seq 1 6000"}))]},
        {"content": "done two"},
        {"tool_calls": [call("bash", json!({"command": "seq 6001 12000"}))]},
        {"content": "done three"},
        {"recall": true},
    ])
}

/// The threshold counts the tool definitions too (about 570 tokens of
/// the estimate before the first observation and after a trim).
const FLAGS: &[&str] = &[
    "--access",
    "auto",
    "--compact-at",
    "4100",
    "--keep-recent",
    "2000",
];

fn compaction_index(reqs: &[Value]) -> usize {
    reqs.iter()
        .position(|r| {
            r["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .starts_with("You compact")
        })
        .expect("a compaction request")
}

#[test]
fn long_session_trims_then_compacts_and_keeps_the_identifier() {
    let p = Project::new();
    let rec = p.path().join("rec");
    let mock = Mock::start(script());
    let mut args = FLAGS.to_vec();
    let rec_s = rec.to_str().unwrap().to_owned();
    args.extend([
        "--record",
        &rec_s,
        "-p",
        "Remember ID-deadbeef42.",
        "-p",
        "step two",
        "-p",
        "step three",
        "-p",
        "Which ID did I give you?",
    ]);
    let run = p.run(Some(&mock), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The recall model answers from what it was sent: the summary carried the id.
    assert_eq!(run.stdout.lines().last(), Some("ID-deadbeef42"));
    let reqs = mock.requests();
    // Trimming came first: some turn request carries a trimmed tool result.
    let c = compaction_index(&reqs);
    let trimmed = reqs[..c].iter().any(|r| {
        r.to_string()
            .contains("characters trimmed from this old tool result")
    });
    assert!(trimmed, "no trimmed result before compaction");
    // The compaction request carries the prompt and the span, not the tools.
    assert!(reqs[c].get("tools").is_none());
    assert!(reqs[c]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("Remember ID-deadbeef42."));
    // The next turn: system → summary → verbatim recent tail.
    let after = reqs[c + 1]["messages"].as_array().unwrap();
    assert_eq!(after[0]["role"], "system");
    assert_eq!(after[1]["role"], "user");
    let summary = after[1]["content"].as_str().unwrap();
    assert!(
        summary.starts_with("<compacted-summary>")
            && summary.ends_with("</compacted-summary>")
            && summary.contains(SUMMARY)
    );
    assert_ne!(after[2]["role"], "tool");
    assert_eq!(after.last().unwrap()["content"], "Which ID did I give you?");
    assert_calls_answered(after);
    // The tail is verbatim: the end of the conversation sent before, and
    // the answer that request received.
    let before = reqs[c - 1]["messages"].as_array().unwrap();
    let tail = &after[2..after.len() - 1];
    assert!(tail.len() >= 2, "{tail:?}");
    assert!(
        before.ends_with(&tail[..tail.len() - 1]),
        "the tail is not verbatim"
    );
    assert_eq!(tail.last().unwrap()["content"], "done three");
    let r = record(&rec);
    assert_eq!(r["compaction_requests"], 1);
    let purposes: Vec<String> = std::fs::read_to_string(rec.join("raw/requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["purpose"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(purposes.iter().filter(|p| *p == "compaction").count(), 1);
    // The compaction request's usage does not feed the Meter: the next turn estimates.
    let turns: Vec<&Value> = r["requests"].as_array().unwrap().iter().collect();
    let ci = turns
        .iter()
        .position(|q| q["purpose"] == "compaction")
        .unwrap();
    assert_eq!(turns[ci + 1]["meter"]["observed"], false);
}

#[test]
fn compacted_session_resumes_and_reuses_the_tails_blobs() {
    let p = Project::new();
    let mock = Mock::start(script());
    let mut args = FLAGS.to_vec();
    args.extend([
        "-p",
        "Remember ID-deadbeef42.",
        "-p",
        "step two",
        "-p",
        "step three",
    ]);
    let run = p.run(Some(&mock), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let before = journal_of(&p, &sid);
    let mut args = FLAGS.to_vec();
    args.extend(["resume", &sid, "-p", "Which ID did I give you?"]);
    let run = p.run(Some(&mock), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "ID-deadbeef42\n");
    let after = journal_of(&p, &sid);
    assert!(
        after.0.starts_with(&before.0),
        "the journal was rewritten, not appended to"
    );
    // New: the summary, the new instruction and answer, one list node, one snapshot.
    let new = after.1 - before.1;
    assert!(new <= 5, "{new} new objects");
    // Resume again: the model is sent the compacted conversation as stored.
    let mock2 = Mock::start(json!([{"content": "bye"}]));
    let run = p.run(Some(&mock2), &["resume", &sid, "-p", "bye"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let m = mock2.messages(0);
    assert!(m[1]["content"]
        .as_str()
        .unwrap()
        .starts_with("<compacted-summary>"));
    assert_calls_answered(&m);
}

/// Session `sid`'s journal, and how many object records its sidecar
/// lists (48-byte entries after a 16-byte header, the type in each
/// entry's last byte: 1 for an object).
fn journal_of(p: &Project, sid: &str) -> (Vec<u8>, usize) {
    let dir = p.path().join(".hel/packs/journals");
    let journal = std::fs::read(dir.join(format!("{sid}.journal"))).unwrap();
    let jidx = std::fs::read(dir.join(format!("{sid}.jidx"))).unwrap();
    let objects = jidx[16..].chunks_exact(48).filter(|e| e[47] == 1).count();
    (journal, objects)
}

#[test]
fn context_overflow_ends_the_instruction_cleanly() {
    let p = Project::new();
    let rec = p.path().join("rec");
    let big = "word ".repeat(8000);
    // A summary that is not smaller than what it would replace is refused.
    let mock = Mock::start(json!([{"match": "You compact", "content": "summary ".repeat(9000)}]));
    let run = p.run(
        Some(&mock),
        &[
            "--tools",
            "none",
            "--context-window",
            "2000",
            "--max-output-tokens",
            "100",
            "--compact-at",
            "1000",
            "--keep-recent",
            "500",
            "--record",
            rec.to_str().unwrap(),
            "-p",
            &big,
        ],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("does not fit the context window"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("not smaller"), "{}", run.stderr);
    assert_eq!(record(&rec)["termination"], "context_overflow");
    assert!(
        mock.requests().iter().all(|r| r["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .starts_with("You compact")),
        "no turn request was sent"
    );
}
