//! `hel sessions show`: the conversation of a checkpoint for a person to
//! read (through a pager on a terminal), or with `--json` everything
//! stored: the messages, spill references and request config.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use hel_agent::text::escape_line;
use hel_store::{Loaded, ObjectId, ReadRecord, SessionId, SpillEntry, Store};
use serde_json::Value;

use super::{pager, transcript};
use crate::exit::Exit;

pub fn show(
    store: &Store,
    project: &Path,
    spec: &str,
    at: Option<&str>,
    as_json: bool,
) -> Result<u8, Exit> {
    let (id, checkpoint, loaded) = load_at(store, project, spec, at)?;
    if as_json {
        show_json(&id, checkpoint, &loaded);
    } else {
        show_text(store, &id, checkpoint, &loaded);
    }
    Ok(0)
}

/// The session `spec` names, its checkpoint `at` (default: its newest),
/// and that checkpoint loaded whole.
pub(super) fn load_at(
    store: &Store,
    project: &Path,
    spec: &str,
    at: Option<&str>,
) -> Result<(SessionId, ObjectId, Loaded), Exit> {
    let id = hel_agent::resolve_session(store, project, spec)?;
    let checkpoint = match at {
        Some(at) => hel_agent::resolve_checkpoint(&hel_store::log::log(store, &id)?, at)?,
        None => store.head(&id)?,
    };
    let loaded = store.load(&checkpoint)?;
    Ok((id, checkpoint, loaded))
}

/// The checkpoint as JSON (fields in the order the JSON has): its session
/// record (`request_config`, `meter`, `cursors`) as the record reads it.
#[derive(serde::Serialize)]
struct Shown<'a> {
    session: &'a SessionId,
    checkpoint: String,
    created_at: &'a str,
    cwd: &'a str,
    parents: Vec<String>,
    #[serde(flatten)]
    record: &'a ReadRecord,
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
        record: &loaded.record,
        spill: loaded.state.spill(),
        messages: &loaded.messages,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let _ = super::report::write_json(&mut out, &shown);
    let _ = writeln!(out);
}

fn show_text(store: &Store, id: &SessionId, checkpoint: ObjectId, loaded: &Loaded) {
    let cp = &loaded.checkpoint;
    let style = transcript::Style::for_stdout();
    let name = match hel_store::names::name_of(store, id) {
        Ok(Some(n)) => format!(" ({n})"),
        _ => String::new(),
    };
    let config = loaded.record.config.as_ref();
    let (provider, model) = loaded.record.model();
    // Each header line holds stored strings: a line break in one (a cwd
    // from a store that came with a repository) is escaped, so it cannot
    // forge header lines.
    let mut out = [
        format!("session {id}{name}"),
        format!("checkpoint {checkpoint}"),
        format!("created {}", cp.created_at),
        format!("cwd {}", cp.cwd),
        format!(
            "saved with: provider {provider}, model {model}, output limit {}, tools [{}]",
            config.map_or("null".to_owned(), |c| c.max_output_tokens.to_string()),
            config
                .map(|c| c.tool_names().join(", "))
                .unwrap_or_default()
        ),
    ]
    .iter()
    .map(|line| format!("{}\n", escape_line(line)))
    .collect::<String>();
    out.push('\n');
    out.push_str(transcript::text(&loaded.messages, style).trim_end());
    out.push('\n');
    if !loaded.state.spill().is_empty() {
        out.push_str("\nspill:\n");
        for (k, v) in loaded.state.spill() {
            let line = format!("  {k}  {} bytes  blob {}", v.size, &v.blob.to_hex()[..12]);
            out.push_str(&escape_line(&line));
            out.push('\n');
        }
    }
    pager::show(&out);
}
