//! Scanning what a store holds: every distinct stored message, once.
//!
//! A search over every session reads each list node and each message blob
//! of the store one time, whatever number of checkpoints, sessions or
//! forks share it: content addressing makes "the same message" one object.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::list::RawNode;
use crate::object::{self, Cap, Kind};
use crate::odb::{self, Found};
use crate::{heads, ObjectId, Result, Store};

/// Every object id the store holds, each once: in journals, sealed packs
/// and loose files.
fn all_objects(layout: &crate::odb::Odb) -> Result<Vec<ObjectId>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for session in heads::list(layout)?.sessions {
        if let Some(v) = layout.index().journal(layout, &session)? {
            for id in v.read().unwrap_or_else(|p| p.into_inner()).objects.keys() {
                if seen.insert(*id) {
                    out.push(*id);
                }
            }
        }
    }
    for p in layout.index().all_sealed(layout)? {
        for e in &p.idx.entries {
            if seen.insert(e.id) {
                out.push(e.id);
            }
        }
    }
    for (id, _, _) in crate::gc::object_files(layout)?.objects {
        if seen.insert(id) {
            out.push(id);
        }
    }
    Ok(out)
}

#[derive(Deserialize)]
struct InlineItem<'a> {
    #[serde(borrow)]
    m: Option<&'a RawValue>,
    b: Option<ObjectId>,
}

/// Call `f` with the canonical JSON bytes of every distinct message
/// the store holds (inline in list nodes, and message blobs), each
/// once. Objects are verified as they are read.
pub fn scan_messages(store: &Store, f: &mut dyn FnMut(&[u8])) -> Result<()> {
    let Some(layout) = store.layout_for_gc()? else {
        return Ok(());
    };
    let mut blobs: HashSet<ObjectId> = HashSet::new();
    for id in all_objects(layout)? {
        let max = Cap::LIST.max + Cap::LIST.max / 128 + 4096;
        let payload = match layout.index().locate_open(layout, &id)? {
            Some(Found::Record { file, place, len }) => {
                if len > max + crate::pack::RECORD_HEADER {
                    continue; // larger than any list node: a blob
                }
                let record = odb::read_found(&file, &place, len, &id, max)?;
                let stored = &record[crate::pack::RECORD_HEADER as usize..];
                // Skip what is not a list node from its first bytes alone.
                if object::peek_kind(stored) != Some(Kind::List) {
                    continue;
                }
                object::decode(&id, &place.display_path(), stored, Cap::LIST)
                    .map_err(|e| odb::explain_damage(e.into(), &record, &place, &id))?
                    .1
            }
            _ => match crate::read::object(layout, &id, Cap::ANY)? {
                (Kind::List, payload) => payload,
                _ => continue,
            },
        };
        let raw = RawNode::parse(&payload).map_err(|e| crate::list::malformed(layout, &id, e))?;
        for (a, b) in raw.items {
            let Ok(item) = serde_json::from_slice::<InlineItem>(&payload[a..b]) else {
                continue;
            };
            if let Some(m) = item.m {
                f(m.get().as_bytes());
            }
            if let Some(b) = item.b {
                blobs.insert(b);
            }
        }
    }
    for b in blobs {
        f(&crate::read::of_kind(layout, &b, Kind::Blob, Cap::MESSAGE)?);
    }
    Ok(())
}
