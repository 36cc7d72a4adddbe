//! `hel sessions export`: a conversation as Markdown, for people to read
//! elsewhere, or as the JSON messages the model was sent.

use std::io::Write;
use std::path::Path;

use hel_store::Store;

use super::{scan, show, transcript};
use crate::cli::{ExportArgs, ExportFormat};
use crate::exit::{Exit, Failure};

pub fn export(store: &Store, project: &Path, args: &ExportArgs) -> Result<u8, Exit> {
    let (id, checkpoint, loaded) =
        show::load_at(store, project, &args.session, args.at.as_deref())?;
    if !args.allow_secrets {
        let secrets = scan::Secrets::from_env();
        let found = scan::Exits::new(store, &secrets)?.conversation(&id, &checkpoint)?;
        if !found.is_empty() {
            scan::refuse(&found);
            scan::refused_last(&format!("session {id}"), "written");
            return Ok(1);
        }
    }
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
        ExportFormat::Md => {
            let name = hel_store::names::name_of(store, &id).ok().flatten();
            let cp = &loaded.checkpoint;
            let (provider, model) = loaded.record.model();
            let title = match &name {
                Some(n) => format!("hel session {n}"),
                None => format!("hel session {}", &id.as_str()[..8]),
            };
            let facts = [
                ("Session", id.to_string()),
                ("Checkpoint", checkpoint.to_hex()),
                ("Saved", cp.created_at.clone()),
                ("Model", format!("{model} ({provider})")),
            ];
            transcript::markdown(&title, &facts, &loaded.messages)
        }
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(Failure::Export)?;
    Ok(0)
}
