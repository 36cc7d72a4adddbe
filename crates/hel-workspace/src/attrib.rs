//! Which session a change is: an instruction's own changes are what its
//! tools and commands changed, never what another session changed while
//! it ran (objects-spec §10.6).
//!
//! Another session's records name the paths it changed (its
//! instructions' start and end trees, its restores): an undo or restore
//! leaves alone, and names, every path another session recorded as its
//! own change while one of the instructions it puts back ran, also one
//! that session recorded only after this instruction ended
//! ([`others_during`]). Both sessions' records may name a path both
//! changed at the same time: neither undoes it.

use std::collections::{BTreeMap, BTreeSet};

use hel_store::{Record, Store};

use crate::history::{parent, record_change, span_start, tree_diff, HistoryError, WALK_MAX};

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

/// Whether a path differs between two sets of paths: a directory in both
/// by its mode only (what is under it are paths of their own), anything
/// else in any field.
fn differs(a: Option<&crate::flat::Item>, b: Option<&crate::flat::Item>) -> bool {
    use hel_store::tree::EntryKind;
    match (a, b) {
        (None, None) => false,
        (Some(x), Some(y)) if x.kind == EntryKind::Dir && y.kind == EntryKind::Dir => {
            x.mode != y.mode
        }
        (x, y) => x != y,
    }
}

/// Every path that differs between `a` and `b` ([`differs`]), added to
/// `out`: one merge of the two sorted maps.
pub fn changed_between(a: &crate::Flat, b: &crate::Flat, out: &mut BTreeSet<Vec<u8>>) {
    let (mut x, mut y) = (a.items.iter().peekable(), b.items.iter().peekable());
    loop {
        match (x.peek(), y.peek()) {
            (None, None) => break,
            (Some((pa, ia)), Some((pb, ib))) if pa == pb => {
                if differs(Some(ia), Some(ib)) {
                    out.insert((*pa).clone());
                }
                x.next();
                y.next();
            }
            (Some((pa, _)), Some((pb, _))) if pa < pb => {
                out.insert((*pa).clone());
                x.next();
            }
            (Some((pa, _)), None) => {
                out.insert((*pa).clone());
                x.next();
            }
            (_, Some((pb, _))) => {
                out.insert((*pb).clone());
                y.next();
            }
        }
    }
}

/// The end of an instruction as its own (objects-spec §10.6): `end`, the
/// files when it ended (not committed yet), with every path that differs
/// from `start` (the files when it started) and that `owned` does not
/// name (a change made between its calls: by the user, another session)
/// as `start` has it. A directory such a path would take away from under
/// a path of the instruction's own stays as `end` has it. The trees that
/// differ from `end`'s go to `sink`, and `end` becomes the result;
/// returns the paths given back to `start`'s state.
pub fn own_end(
    sink: &mut dyn crate::Sink,
    start: &crate::Flat,
    end: &mut crate::Snapshot,
    owned: &BTreeSet<Vec<u8>>,
) -> Result<Vec<Vec<u8>>, crate::SnapshotError> {
    use crate::flat::split;
    use hel_store::tree::EntryKind;
    let mut changed = BTreeSet::new();
    changed_between(start, &end.flat, &mut changed);
    let theirs: Vec<Vec<u8>> = changed.into_iter().filter(|p| !owned.contains(p)).collect();
    if theirs.is_empty() {
        return Ok(theirs);
    }
    let mut flat = crate::Flat::clone(&end.flat);
    for path in &theirs {
        match start.get(path) {
            Some(i) => {
                flat.items.insert(path.clone(), *i);
            }
            None => {
                flat.items.remove(path);
            }
        }
    }
    let is_dir = |f: &crate::Flat, p: &[u8]| {
        p.is_empty() || f.items.get(p).is_some_and(|i| i.kind == EntryKind::Dir)
    };
    // Every path needs its directories: `end`'s, where the instruction
    // made one of its own paths under a directory it did not make.
    loop {
        let missing: BTreeSet<Vec<u8>> = flat
            .items
            .keys()
            .map(|p| split(p).0)
            .filter(|d| !is_dir(&flat, d))
            .map(<[u8]>::to_vec)
            .collect();
        if missing.is_empty() {
            break;
        }
        let mut fixed = false;
        for dir in &missing {
            if let Some(i) = end.flat.get(dir).filter(|i| i.kind == EntryKind::Dir) {
                flat.items.insert(dir.clone(), *i);
                fixed = true;
            }
        }
        if !fixed {
            // Not `end`'s either: what `start` gave back under it goes.
            let orphans: Vec<Vec<u8>> = flat
                .items
                .keys()
                .filter(|p| missing.contains(split(p).0))
                .cloned()
                .collect();
            for p in orphans {
                flat.items.remove(&p);
            }
        }
    }
    let trees = flat
        .trees_since(Some(&end.flat))
        .map_err(crate::SnapshotError::Trees)?;
    for (_, tree, _) in &trees {
        sink.put_tree(tree)?;
    }
    if let Some((dir, _, id)) = trees.last() {
        if dir.is_empty() {
            end.tree = *id;
        }
    }
    end.not_tracked
        .retain(|(p, _)| flat.get(p).is_some_and(|i| crate::history::opaque(i.kind)));
    end.stats.retain(|p, _| flat.items.contains_key(p));
    end.flat = std::sync::Arc::new(flat);
    Ok(theirs)
}
