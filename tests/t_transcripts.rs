//! Transcripts for people: `hel sessions show` and `hel sessions export`.

use crate::common::*;
use serde_json::{json, Value};

#[test]
fn show_and_export_a_conversation_with_tool_calls() {
    let p = Project::new();
    let notes: String = (1..=50).map(|i| format!("note {i}\n")).collect();
    p.write("notes.txt", &notes);
    let mock = Mock::start(json!([
        {"content": "Reading it.", "tool_calls": [call("read_file", json!({"path": "notes.txt"}))]},
        {"content": "There are fifty notes.\nThe last is note 50.\u{1b}[2J"}
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "count the notes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    // For a person: headers, the instruction, the call on one line, the
    // result cut with a count, the answer in full; no terminal control.
    let run = p.run(None, &["sessions", "show", &sid[..8]]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let t = &run.stdout;
    assert!(t.contains("── user ──\ncount the notes\n"), "{t}");
    assert!(
        t.contains("── assistant ──\nReading it.\n→ read_file {\"path\":\"notes.txt\"}\n"),
        "{t}"
    );
    assert!(t.contains("── read_file result ──\n"), "{t}");
    assert!(t.contains("more lines (") && t.contains(") cut\n"), "{t}");
    assert!(!t.contains("note 40"), "{t}");
    assert!(
        t.contains("There are fifty notes.\nThe last is note 50.^[[2J\n"),
        "{t}"
    );
    assert!(!t.contains('\u{1b}'), "{t}");
    // JSON export: the messages as the model was sent them.
    let run = p.run(None, &["sessions", "export", &sid, "--format", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let exported: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    let sent = mock.messages(1);
    assert_eq!(exported[..sent.len()], sent[..]);
    assert_eq!(exported.len(), sent.len() + 1);
    assert_eq!(exported[sent.len()]["role"], "assistant");
    // Markdown: everything in full, tool output fenced.
    let run = p.run(None, &["sessions", "export", &sid, "--format", "md"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let md = &run.stdout;
    assert!(
        md.starts_with(&format!("# hel session {}\n", &sid[..8])),
        "{md}"
    );
    assert!(md.contains("## User\n\ncount the notes\n"), "{md}");
    assert!(
        md.contains("Tool call `read_file`:\n\n```json\n{\n  \"path\": \"notes.txt\"\n}\n```"),
        "{md}"
    );
    assert!(
        md.contains("### Tool result: `read_file`\n\n```text\n"),
        "{md}"
    );
    assert!(
        md.contains("note 40") && md.contains("The last is note 50.^[[2J"),
        "{md}"
    );
    assert!(!md.contains('\u{1b}'));
}
