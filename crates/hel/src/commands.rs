//! The store commands: `sessions` (list, log, show, delete), `gc`, `fsck`.
//! They need no key and no provider, and print their report on stdout.

use std::path::{Path, PathBuf};

use std::io::Write;

use hel_store::time::rfc3339;
use hel_store::Store;
use serde_json::{json, Value};

use crate::cli::SessionsCommand;
use crate::exit::Exit;
use crate::session;

fn project() -> Result<PathBuf, Exit> {
    std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| Exit::refused(format!("cannot use the current directory: {e}")))
}

/// Print a line of a report for people. What it shows came from the store
/// (instructions, messages, paths), so control characters are escaped.
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", crate::terminal::escape_text(&format!($($arg)*)))
    };
}

fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

pub fn sessions(command: Option<SessionsCommand>, json_flag: bool) -> Result<u8, Exit> {
    let project = project()?;
    let store = Store::open(&project)?;
    match command.unwrap_or(SessionsCommand::List { json: json_flag }) {
        SessionsCommand::List { json } => list(&store, json || json_flag),
        SessionsCommand::Log { session, json } => {
            log(&store, &project, &session, json || json_flag)
        }
        SessionsCommand::Show { session, at, json } => {
            show(&store, &project, &session, at.as_deref(), json || json_flag)
        }
        SessionsCommand::Delete { session } => delete(&store, &project, &session),
    }
}

fn list(store: &Store, as_json: bool) -> Result<u8, Exit> {
    let sessions = store.sessions()?;
    if as_json {
        print_json(&Value::Array(
            sessions
                .iter()
                .map(|s| {
                    json!({
                        "id": s.id, "busy": s.busy, "updated": rfc3339(s.updated_ms),
                        "checkpoints": s.checkpoints, "messages": s.messages, "instruction": s.instruction,
                        "head": s.head.map(|h| h.to_hex()), "broken": s.broken,
                    })
                })
                .collect(),
        ));
        return Ok(0);
    }
    if sessions.is_empty() {
        say!("no sessions in this project");
        return Ok(0);
    }
    say!(
        "{:<36}  {:<5}  {:<24}  {:>11}  {:>8}  INSTRUCTION",
        "SESSION",
        "STATE",
        "UPDATED",
        "CHECKPOINTS",
        "MESSAGES"
    );
    let mut broken = 0;
    for s in sessions {
        let state = match (&s.broken, s.busy) {
            (Some(_), _) => "broken",
            (None, true) => "busy",
            (None, false) => "idle",
        };
        let updated = if s.broken.is_some() {
            "?".to_owned()
        } else {
            rfc3339(s.updated_ms)
        };
        say!(
            "{:<36}  {:<5}  {:<24}  {:>11}  {:>8}  {}",
            s.id,
            state,
            updated,
            s.checkpoints,
            s.messages,
            s.instruction.chars().take(60).collect::<String>()
        );
        if let Some(why) = &s.broken {
            broken += 1;
            crate::note!(
                "hel: session {}: {}",
                s.id,
                crate::terminal::escape_line(why)
            );
        }
    }
    if broken > 0 {
        crate::note!("hel: {broken} session(s) cannot be read; `hel fsck` checks the whole store");
    }
    Ok(0)
}

fn log(store: &Store, project: &Path, spec: &str, as_json: bool) -> Result<u8, Exit> {
    let id = session::resolve(store, project, spec)?;
    let entries = store.log(&id)?;
    if as_json {
        print_json(&Value::Array(
            entries
                .iter()
                .map(|e| {
                    json!({
                        "id": e.id.to_hex(), "session": e.session_id, "time": e.time, "messages": e.messages,
                        "input_tokens": e.input_tokens, "output_tokens": e.output_tokens,
                        "instruction": e.instruction, "fork_point": e.fork_point,
                    })
                })
                .collect(),
        ));
        return Ok(0);
    }
    for e in entries {
        if e.fork_point {
            say!(
                "--- forked from session {} at checkpoint {} ---",
                e.session_id,
                &e.id.to_hex()[..12]
            );
        }
        say!(
            "{}  {}  {:>5} msgs  {:>8} in {:>6} out  {}",
            &e.id.to_hex()[..12],
            e.time,
            e.messages,
            e.input_tokens,
            e.output_tokens,
            e.instruction.chars().take(60).collect::<String>()
        );
    }
    Ok(0)
}

fn show(
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
    let hel_store::Loaded {
        checkpoint: cp,
        messages,
        request_config,
        cursors,
        ..
    } = store.load(&checkpoint)?;
    if as_json {
        // Written straight out: the conversation is not copied into another value.
        #[derive(serde::Serialize)]
        struct Shown<'a> {
            session: &'a hel_store::SessionId,
            checkpoint: String,
            created_at: &'a str,
            cwd: &'a str,
            parents: Vec<String>,
            request_config: &'a Value,
            meter: &'a Value,
            cursors: &'a Value,
            spill: &'a std::collections::BTreeMap<String, hel_store::SpillEntry>,
            messages: &'a [Value],
        }
        let shown = Shown {
            session: &id,
            checkpoint: checkpoint.to_hex(),
            created_at: &cp.created_at,
            cwd: &cp.cwd,
            parents: cp.parents.iter().map(|p| p.to_hex()).collect(),
            request_config: &request_config,
            meter: &cp.meter,
            cursors: &cursors,
            spill: &cp.spill,
            messages: &messages,
        };
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let _ = serde_json::to_writer_pretty(&mut out, &shown);
        let _ = writeln!(out);
        return Ok(0);
    }
    say!(
        "session {id}\ncheckpoint {checkpoint}\ncreated {}\ncwd {}",
        cp.created_at,
        cp.cwd
    );
    let rc = &request_config;
    say!(
        "saved with: provider {}, model {}, output limit {}, tools [{}]\n",
        rc["provider"].as_str().unwrap_or("?"),
        rc["model"].as_str().unwrap_or("?"),
        rc["max_output_tokens"],
        rc["tools"]
            .as_array()
            .map(|t| t
                .iter()
                .filter_map(|d| d.pointer("/function/name").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(", "))
            .unwrap_or_default()
    );
    for (i, m) in messages.iter().enumerate() {
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
    if !cp.spill.is_empty() {
        say!("\nspill:");
        for (k, v) in &cp.spill {
            say!("  {k}  {} bytes  blob {}", v.size, &v.blob.to_hex()[..12]);
        }
    }
    Ok(0)
}

fn delete(store: &Store, project: &Path, spec: &str) -> Result<u8, Exit> {
    let id = session::resolve(store, project, spec)?;
    let report = store.delete(&id, true)?.unwrap_or_default();
    say!(
        "deleted session {id}; reclaimed {} objects, {} bytes",
        report.objects_removed,
        report.bytes_removed
    );
    Ok(0)
}

pub fn gc(dry_run: bool) -> Result<u8, Exit> {
    let store = Store::open(&project()?)?;
    let r = store.gc(dry_run)?;
    let verb = if dry_run {
        "would reclaim"
    } else {
        "reclaimed"
    };
    say!(
        "{verb} {} objects ({} bytes), {} temporary files, {} abandoned sessions, {} spill working copies; {} objects kept",
        r.objects_removed,
        r.bytes_removed,
        r.tmp_files_removed,
        r.sessions_removed.len(),
        r.spill_dirs_removed,
        r.objects_kept
    );
    Ok(0)
}

pub fn fsck() -> Result<u8, Exit> {
    let store = Store::open(&project()?)?;
    let r = store.fsck()?;
    say!(
        "checked {} objects ({} bytes) and {} refs",
        r.objects,
        r.bytes,
        r.refs
    );
    for fault in &r.faults {
        say!("fault: {fault}");
    }
    for note in &r.notes {
        say!("note: {note}");
    }
    match r.unreachable {
        Some(n) => say!(
            "garbage: {n} unreachable objects, {} temporary files (not faults; `hel gc` reclaims them)",
            r.tmp_files
        ),
        None => say!("garbage: not counted while the store has faults (`hel gc` refuses until they are fixed)"),
    }
    if r.is_sound() {
        say!("store is sound");
        Ok(0)
    } else {
        say!("store has {} faults", r.faults.len());
        Ok(1)
    }
}
