//! Which session a change is: an instruction's own changes are what its
//! tools and commands changed, never what another session changed while
//! it ran (objects-spec §10.6).
//!
//! Another session's records name the paths it changed itself (its
//! instructions' start and end trees, its restores). So:
//! - when an instruction ends, the paths that another session recorded
//!   as its own change during the instruction are taken out of the
//!   instruction's end tree (they keep what its start tree holds there):
//!   [`own_end`];
//! - an undo or restore leaves alone, and names, every path another
//!   session recorded as its own change while one of the instructions it
//!   puts back ran, also one that session recorded only after this
//!   instruction ended: [`others_during`].

use std::collections::BTreeMap;

use hel_store::{ObjectId, Record, Store};

use crate::flat::{split, Flat, Item};
use crate::history::{
    opaque, parent, record_change, span_start, tree_diff, HistoryError, WALK_MAX,
};
use crate::snapshot::{Sink, Snapshot, SnapshotError};
use hel_store::tree::EntryKind;

/// Paths other sessions changed while one of a session's instructions
/// ran, each with the session that changed it (see [`others_during`]).
#[derive(Debug, Default)]
pub struct Others {
    pub paths: BTreeMap<Vec<u8>, hel_store::SessionId>,
}

/// Why another session's work cannot be told apart.
#[derive(Debug, thiserror::Error)]
#[error("session {session} is running an instruction that overlaps this session's: what it changes is not recorded yet; undo or restore after it ends")]
pub struct OtherRunning {
    pub session: hel_store::SessionId,
}

/// What other sessions of the store recorded as their own changes while
/// one of `spans` ran (objects-spec §10.6): for each session but `own`,
/// every instruction (its start record's time to its end record's) and
/// every restore (its before-restore record's time to its own) that
/// overlaps a span names the paths it changed (its start to its end tree;
/// its before-restore tree to its restored tree). Those are another
/// session's work: an undo or restore of `own` never writes them.
///
/// A session whose newest record is an instruction's start and that is
/// being worked on now (its lease is held) is still changing files that
/// no record names yet: when that instruction began before a span ended
/// (it overlaps the span),
/// [`OtherRunning`] (refused; one that is not being worked on crashed,
/// and what it changed is counted as nobody's). Sessions that cannot be
/// read are passed over (the store's listing reports them).
pub fn others_during(
    store: &Store,
    own: &hel_store::SessionId,
    spans: &[(u64, u64)],
) -> Result<Result<Others, OtherRunning>, HistoryError> {
    let mut out = Others::default();
    let Some(earliest) = spans.iter().map(|s| s.0).min() else {
        return Ok(Ok(out));
    };
    let latest = spans.iter().map(|s| s.1).max().unwrap_or(u64::MAX);
    let overlaps = |a: u64, b: u64| spans.iter().any(|&(s, e)| a <= e && s <= b);
    for info in store.sessions()? {
        if info.id == *own || info.broken.is_some() {
            continue;
        }
        let Some(head) = info.head else { continue };
        // Nothing it recorded before every span began can overlap one,
        // but an instruction it runs now may have begun before.
        if info.updated_ms < earliest && !info.busy {
            continue;
        }
        let mut at = Some(head);
        let mut newest = true;
        for _ in 0..WALK_MAX {
            let Some(id) = at else { break };
            let cp = store.checkpoint(&id)?;
            if cp.session_id != info.id {
                break; // a fork's first record leads into its origin
            }
            let record = Record::of(&cp);
            if newest && record == Record::Start && info.busy && cp.created_at_ms <= latest {
                return Ok(Err(OtherRunning { session: info.id }));
            }
            newest = false;
            let change = match record {
                Record::Answer | Record::Interrupted | Record::Restored => {
                    record_change(store, &cp)?
                }
                _ => None,
            };
            if let Some((a, b)) = change {
                let began = span_start(store, &cp)?;
                if overlaps(began, cp.created_at_ms) {
                    tree_diff(store, &a, &b, |path, _, _| {
                        out.paths.entry(path).or_insert_with(|| info.id.clone());
                    })?;
                }
            }
            if cp.created_at_ms < earliest {
                break;
            }
            at = parent(&cp);
        }
    }
    Ok(Ok(out))
}

/// The end of an instruction as its own (objects-spec §10.6): `end`, the
/// files when it ended, with every path that differs from `start` and
/// that another session recorded as its own change (`others`) as `start`
/// has it, so that the instruction's record names only what it changed.
/// A directory such a path leaves a path of the instruction's own under
/// stays as `end` has it. `None` when no such path differs (the record's
/// tree is `end`'s). The new trees go to `sink`; the paths that were
/// not recorded and are no longer in the tree leave `not_tracked`.
pub fn own_end(
    store: &Store,
    sink: &mut dyn Sink,
    start: &ObjectId,
    end: &mut Snapshot,
    others: &Others,
) -> Result<Option<Vec<Vec<u8>>>, SnapshotError> {
    if others.paths.is_empty() {
        return Ok(None);
    }
    // `end` is not committed yet (its trees may not be readable from the
    // store): compared as the paths it holds.
    let before = Flat::read(store, start).map_err(|e| match e {
        crate::flat::FlatError::Store(e) => SnapshotError::Store(e),
        other => SnapshotError::Store(hel_store::Error::Internal(other.to_string())),
    })?;
    let mut theirs: Vec<(Vec<u8>, Option<Item>)> = Vec::new();
    for path in others.paths.keys() {
        let (was, now) = (before.get(path), end.flat.get(path));
        let differs = match (was, now) {
            (None, None) => false,
            // A directory is its own paths (listed apart) and its mode.
            (Some(a), Some(b)) if a.kind == EntryKind::Dir && b.kind == EntryKind::Dir => {
                a.mode != b.mode
            }
            (a, b) => a != b,
        };
        if differs {
            theirs.push((path.clone(), was.copied()));
        }
    }
    if theirs.is_empty() {
        return Ok(None);
    }
    let mut flat = Flat::clone(&end.flat);
    for (path, item) in &theirs {
        match item {
            Some(i) => {
                flat.items.insert(path.clone(), *i);
            }
            None => {
                flat.items.remove(path);
            }
        }
    }
    // Every path needs its directories: one the other session made, or
    // made something else, that holds a path of this instruction's stays
    // as the instruction left it.
    loop {
        let missing: Vec<Vec<u8>> = flat
            .items
            .keys()
            .filter_map(|p| {
                let (dir, _) = split(p);
                let ok = dir.is_empty()
                    || flat
                        .items
                        .get(dir)
                        .is_some_and(|i| i.kind == EntryKind::Dir);
                (!ok).then(|| dir.to_vec())
            })
            .collect();
        if missing.is_empty() {
            break;
        }
        let mut fixed = false;
        for dir in missing {
            if let Some(i) = end.flat.get(&dir) {
                fixed |= flat.items.insert(dir, *i) != Some(*i);
            }
        }
        if !fixed {
            // `end` holds every directory of its paths; a path `start`
            // gave back whose directory `end` does not hold goes.
            let orphans: Vec<Vec<u8>> = flat
                .items
                .keys()
                .filter(|p| {
                    let (dir, _) = split(p);
                    !dir.is_empty()
                        && !flat
                            .items
                            .get(dir)
                            .is_some_and(|i| i.kind == EntryKind::Dir)
                })
                .cloned()
                .collect();
            for p in orphans {
                flat.items.remove(&p);
            }
        }
    }
    let trees = flat
        .trees_since(Some(&end.flat))
        .map_err(SnapshotError::Trees)?;
    for (_, tree, _) in &trees {
        sink.put_tree(tree)?;
    }
    if let Some((dir, _, id)) = trees.last() {
        if dir.is_empty() {
            end.tree = *id;
        }
    }
    end.not_tracked
        .retain(|(p, _)| flat.get(p).is_some_and(|i| opaque(i.kind)));
    end.flat = std::sync::Arc::new(flat);
    Ok(Some(theirs.into_iter().map(|(p, _)| p).collect()))
}
