//! `hel sessions export`: a conversation as Markdown or as an HTML page,
//! for people to read elsewhere, or as the JSON messages the model was
//! sent.

use std::io::Write;
use std::path::Path;

use hel_store::Store;

use super::{html, scan, show, transcript};
use crate::cli::{ExportArgs, ExportFormat};
use crate::exit::{Exit, Failure};

pub fn export(store: &Store, project: &Path, args: &ExportArgs) -> Result<u8, Exit> {
    let (id, checkpoint, loaded) =
        show::load_at(store, project, &args.session, args.at.as_deref())?;
    // The page shows the records up to the checkpoint, and the forks made
    // from them (whose conversations it writes too).
    let (entries, forks) = match args.format {
        ExportFormat::Html => {
            let mut entries = hel_store::log::log(store, &id)?;
            if let Some(at) = entries.iter().position(|e| e.id == checkpoint) {
                entries.drain(..at);
            }
            entries.reverse();
            let forks = html::forks(store, &id, &entries)?;
            (entries, forks)
        }
        _ => (Vec::new(), Vec::new()),
    };
    if !args.allow_secrets {
        let secrets = scan::Secrets::from_env();
        let mut exits = scan::Exits::new(store, &secrets)?;
        let mut found = exits.conversation(&id, &checkpoint)?;
        for f in &forks {
            found.extend(exits.conversation(&f.session, &f.head)?);
        }
        if !found.is_empty() {
            scan::refuse(&found);
            scan::refused_last(&format!("session {id}"), "written");
            return Ok(1);
        }
    }
    let name = hel_store::names::name_of(store, &id).ok().flatten();
    let title = match &name {
        Some(n) => format!("hel session {n}"),
        None => format!("hel session {}", &id.as_str()[..8]),
    };
    let cp = &loaded.checkpoint;
    let (provider, model) = loaded.record.model();
    let facts = [
        ("Session", id.to_string()),
        ("Checkpoint", checkpoint.to_hex()),
        ("Saved", cp.created_at.clone()),
        ("Model", format!("{model} ({provider})")),
    ];
    let text = match args.format {
        // The messages exactly as stored, which is exactly what the model
        // was sent (system prompt first; hel-agent's request body carries
        // them unchanged). Control characters are escaped, JSON's way.
        ExportFormat::Json => {
            let mut t = Vec::new();
            super::report::write_json(&mut t, &loaded.messages).map_err(Failure::MessagesJson)?;
            t.push(b'\n');
            String::from_utf8(t).map_err(Failure::MessagesText)?
        }
        ExportFormat::Md => transcript::markdown(&title, &facts, &loaded.messages),
        ExportFormat::Html => {
            // The files' diffs were not scanned: what looks like a secret
            // in them is masked, unless --allow-secrets.
            let detector = hel_secrets::Detector::from_env();
            let page = html::Page {
                title: &title,
                facts: &facts,
                mask: (!args.allow_secrets).then_some(&detector),
            };
            html::page(store, &id, &entries, &loaded.messages, &forks, &page)?
        }
    };
    match &args.output {
        Some(path) => std::fs::write(path, text.as_bytes()).map_err(Failure::Export)?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .map_err(Failure::Export)?;
        }
    }
    Ok(0)
}
