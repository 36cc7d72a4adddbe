//! `hel sessions purge SESSION`: the session's history rewritten with
//! every secret `hel sessions scan` finds replaced by its handle
//! (`‹secret:KIND:N›`), the sessions forked from it moved onto the new
//! history (hel-store's [`hel_store::purge`]).

use std::collections::HashMap;
use std::path::Path;

use hel_secrets::{handle_ranges, Detector};
use hel_store::purge::{Moved, Purged, Purger};
use hel_store::Store;
use serde::Serialize;

use super::report::{print_json, say};
use crate::exit::Exit;
use crate::render::{self, count};

/// What a purge replaces: what the detector finds (a handle is what
/// redaction left, not a finding), and every value found once wherever
/// else it stands; the same value always by the same handle.
struct Handles {
    detector: Detector,
    /// Value → its handle.
    handles: HashMap<String, String>,
    /// The values, longest first (a value inside a longer one is the
    /// longer one's).
    values: Vec<String>,
    count: u64,
}

impl Handles {
    fn from_env() -> Handles {
        Handles {
            detector: Detector::from_env(),
            handles: HashMap::new(),
            values: Vec::new(),
            count: 0,
        }
    }

    fn handle(&mut self, value: &str, kind: &str) -> String {
        if let Some(h) = self.handles.get(value) {
            return h.clone();
        }
        self.count += 1;
        let kind = if kind.is_empty() { "secret" } else { kind };
        let h = format!("{}{kind}:{}›", hel_secrets::HANDLE_OPEN, self.count);
        self.handles.insert(value.to_owned(), h.clone());
        self.values.push(value.to_owned());
        self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        h
    }
}

impl Purger for Handles {
    fn text(&mut self, text: &str) -> Option<String> {
        let handles = handle_ranges(text);
        let outside = |r: &std::ops::Range<usize>| {
            !handles.iter().any(|h| h.start < r.end && r.start < h.end)
        };
        let mut found: Vec<(std::ops::Range<usize>, String)> = self
            .detector
            .detect(text)
            .into_iter()
            .filter(|f| outside(&f.range))
            .map(|f| (f.range, f.kind))
            .collect();
        for v in &self.values {
            for (at, _) in text.match_indices(v.as_str()) {
                let r = at..at + v.len();
                if outside(&r) {
                    found.push((r, String::new()));
                }
            }
        }
        if found.is_empty() {
            return None;
        }
        // In order, the earlier (then the longer) of two that overlap.
        found.sort_by_key(|(r, _)| (r.start, std::cmp::Reverse(r.end)));
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (r, kind) in found {
            if r.start < at {
                continue;
            }
            out.push_str(&text[at..r.start]);
            let h = self.handle(&text[r.clone()], &kind);
            out.push_str(&h);
            at = r.end;
        }
        out.push_str(&text[at..]);
        Some(out)
    }

    fn file(&mut self, bytes: &[u8]) -> bool {
        hel_workspace::walk::holds_secret(Some(&self.detector), bytes)
    }
}

#[derive(Serialize)]
struct MovedJson {
    new: String,
    old: String,
    session: String,
}

#[derive(Serialize)]
struct PurgedJson {
    files: u64,
    journals: u64,
    messages: u64,
    moved: Vec<MovedJson>,
    spill: u64,
}

/// `hel sessions purge SESSION`.
pub fn purge(store: &Store, project: &Path, spec: &str, json: bool) -> Result<u8, Exit> {
    let id = hel_agent::resolve_session(store, project, spec)?;
    let mut handles = Handles::from_env();
    let done: Purged = hel_store::purge::purge(store, &id, &mut handles)?;
    for w in &done.warnings {
        render::line(&format!("hel: {w}"));
    }
    if json {
        print_json(&PurgedJson {
            files: done.files,
            journals: done.journals,
            messages: done.messages,
            moved: done
                .moved
                .iter()
                .map(|m| MovedJson {
                    new: m.new.to_hex(),
                    old: m.old.to_hex(),
                    session: m.session.to_string(),
                })
                .collect(),
            spill: done.spill,
        });
        return Ok(0);
    }
    if done.moved.is_empty() {
        say!("nothing to purge: no secret found in session {id}; nothing written");
        return Ok(0);
    }
    for Moved { session, old, new } in &done.moved {
        say!(
            "{}  {} -> {}",
            &session.as_str()[..8],
            &old.to_hex()[..12],
            &new.to_hex()[..12]
        );
    }
    say!(
        "purged session {id}: {} replaced by handles in {} and {}, {} no longer recorded; {} moved onto the new history",
        count(handles.values.len() as u64, "secret", "secrets"),
        count(done.messages, "message", "messages"),
        count(done.spill, "spill file", "spill files"),
        count(done.files, "workspace file", "workspace files"),
        count(done.moved.len() as u64, "session", "sessions"),
    );
    render::line("hel: `hel gc` reclaims what sealed packs still hold of the old history; the next `hel push` replaces the session on its remotes");
    Ok(0)
}
