//! `hel sessions show`: the stored conversation of a checkpoint, its spill
//! references and the request config it was saved with.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use hel_agent::session;
use hel_store::{Checkpoint, Loaded, ObjectId, SessionId, SpillEntry, Store};
use serde_json::Value;

use super::report::say;
use crate::exit::Exit;

pub fn show(
    store: &Store,
    project: &Path,
    spec: &str,
    at: Option<&str>,
    as_json: bool,
) -> Result<u8, Exit> {
    let id = session::resolve(store, project, spec)?;
    let checkpoint = match at {
        Some(at) => session::resolve_checkpoint(&store.log(&id)?, at)?,
        None => store.head(&id)?,
    };
    let loaded = store.load(&checkpoint)?;
    if as_json {
        show_json(&id, checkpoint, &loaded);
    } else {
        show_text(&id, checkpoint, &loaded);
    }
    Ok(0)
}

/// The checkpoint as JSON (fields in the order the JSON has).
#[derive(serde::Serialize)]
struct Shown<'a> {
    session: &'a SessionId,
    checkpoint: String,
    created_at: &'a str,
    cwd: &'a str,
    parents: Vec<String>,
    request_config: &'a Value,
    meter: &'a Value,
    cursors: &'a Value,
    spill: &'a BTreeMap<String, SpillEntry>,
    messages: &'a [Value],
}

/// Written straight out: the conversation is not copied into another value.
fn show_json(id: &SessionId, checkpoint: ObjectId, loaded: &Loaded) {
    let cp = &loaded.checkpoint;
    let shown = Shown {
        session: id,
        checkpoint: checkpoint.to_hex(),
        created_at: &cp.created_at,
        cwd: &cp.cwd,
        parents: cp.parents.iter().map(|p| p.to_hex()).collect(),
        request_config: &loaded.request_config,
        meter: &cp.meter,
        cursors: &loaded.cursors,
        spill: &cp.spill,
        messages: &loaded.messages,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let _ = serde_json::to_writer_pretty(&mut out, &shown);
    let _ = writeln!(out);
}

fn show_text(id: &SessionId, checkpoint: ObjectId, loaded: &Loaded) {
    let cp = &loaded.checkpoint;
    say!(
        "session {id}\ncheckpoint {checkpoint}\ncreated {}\ncwd {}",
        cp.created_at,
        cp.cwd
    );
    let rc = &loaded.request_config;
    say!(
        "saved with: provider {}, model {}, output limit {}, tools [{}]\n",
        rc["provider"].as_str().unwrap_or("?"),
        rc["model"].as_str().unwrap_or("?"),
        rc["max_output_tokens"],
        tool_names(rc)
    );
    for (i, m) in loaded.messages.iter().enumerate() {
        show_message(i, m);
    }
    show_spill(cp);
}

/// The names of the tools a request config offered.
fn tool_names(rc: &Value) -> String {
    rc["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|d| d.pointer("/function/name").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// Message `i`: its role, its first line, its tool calls and the spill it
/// names.
fn show_message(i: usize, m: &Value) {
    let role = m["role"].as_str().unwrap_or("?");
    let text = m["content"].as_str().unwrap_or("");
    let first: String = text
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(100)
        .collect();
    let more = if text.lines().count() > 1 || first.chars().count() < text.chars().count() {
        " …"
    } else {
        ""
    };
    match role {
        "tool" => say!(
            "[{i}] tool ({}): {first}{more}",
            m["tool_call_id"].as_str().unwrap_or("")
        ),
        _ => say!("[{i}] {role}: {first}{more}"),
    }
    if let Some(calls) = m["tool_calls"].as_array() {
        for c in calls {
            say!(
                "      → {} {}",
                c.pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or("?"),
                c.pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            );
        }
    }
    for line in text.lines().filter(|l| l.starts_with("spill: ")) {
        say!("      {line}");
    }
}

fn show_spill(cp: &Checkpoint) {
    if !cp.spill.is_empty() {
        say!("\nspill:");
        for (k, v) in &cp.spill {
            say!("  {k}  {} bytes  blob {}", v.size, &v.blob.to_hex()[..12]);
        }
    }
}
