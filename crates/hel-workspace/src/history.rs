//! Reading a session's history for its workspace: which instruction an
//! undo puts back, what the session last recorded of the files, what was
//! restored since the last answer.
//!
//! A session's records (objects-spec §10.2) are answers, instruction starts,
//! interrupted instructions, restores (a before-restore record and a
//! restored record) and a fork's first record. An instruction is a start
//! record followed by its answer or interrupted record, whose `start` is
//! the start record's tree; a start record not followed by its end is an
//! instruction that never ended (a crash).

use std::collections::{BTreeMap, BTreeSet};

use crate::flat::Item;
use hel_store::tree::{Entry, EntryKind, DEPTH_MAX, FLAT_PATHS_MAX};
use hel_store::{Checkpoint, ObjectId, Record, Store, Workspace};

/// The most records a history walk reads before giving up (a hostile
/// store cannot make it loop: ids are hashes, but a long chain is long).
pub(crate) const WALK_MAX: usize = 1_000_000;

/// An instruction an undo can put back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instruction {
    /// Its end record (answer or interrupted), or its start record when it
    /// never ended.
    pub record: ObjectId,
    /// The project when it started.
    pub start: ObjectId,
    /// The project when it ended; `None` when it never did (what is on
    /// disk now counts as what it left).
    pub end: Option<ObjectId>,
    /// The first line of the instruction.
    pub instruction: String,
    /// How many newer instructions that changed no file (their start and
    /// end trees are equal) the walk passed over to reach this one.
    pub skipped: usize,
}

/// Why there is nothing to go back to.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(transparent)]
    Store(#[from] hel_store::Error),
    #[error("nothing to undo: {0}")]
    NothingToUndo(String),
    #[error("checkpoint {0} has no workspace snapshot (saved without one): its files cannot be compared or restored")]
    NoWorkspace(ObjectId),
    #[error("checkpoint {0} is not in this session's history")]
    NotInHistory(ObjectId),
    #[error("the snapshot nests deeper than a tree may, at {0}; the store may be damaged: run `hel fsck`")]
    TooDeep(String),
}

pub(crate) fn parent(cp: &Checkpoint) -> Option<ObjectId> {
    cp.parents.first().copied()
}

/// " (skipped N instructions that changed no file)", or "" for none.
pub fn skipped_note(skipped: usize) -> String {
    match skipped {
        0 => String::new(),
        1 => " (skipped 1 instruction that changed no file)".into(),
        n => format!(" (skipped {n} instructions that changed no file)"),
    }
}

/// The instruction the next `hel undo` of the session whose head is
/// `head` puts back (objects-spec §10.6): undo is a stack of the session's
/// instructions.
/// - The newest instruction that changed files (its start and end trees
///   differ, or it never ended) is the top; instructions that changed no
///   file are passed over and counted in [`Instruction::skipped`].
/// - An undo that left nothing refused (a `restored` record with `undo`
///   and `conflicts` 0) pops its instruction: the next undo targets the
///   one below.
/// - An undo that left paths alone because they changed since the session
///   recorded them (`conflicts` > 0: refused or partial) does not: the
///   next undo, forced or not, targets the same instruction again.
/// - Other restores, before-restore records (of a restore that never
///   wrote) and relocations are passed over.
pub fn undo_target(store: &Store, head: &ObjectId) -> Result<Instruction, HistoryError> {
    let mut at = Some(*head);
    // After stepping back over an instruction's end, its own start record
    // is skipped (by its tree).
    let mut skip_start: Option<ObjectId> = None;
    let mut skipped = 0;
    for _ in 0..WALK_MAX {
        let Some(id) = at else { break };
        let cp = store.checkpoint(&id)?;
        let record = Record::of(&cp);
        let ws = cp.workspace.as_ref();
        match (record, ws) {
            (
                Record::Restored,
                Some(Workspace {
                    restored: Some(r), ..
                }),
            ) if r.undo => {
                if r.conflicts > 0 {
                    // Refused or partial: the same instruction again.
                    skip_start = None;
                    at = Some(r.from);
                } else {
                    // Continue before the instruction that undo put back.
                    let from = store.checkpoint(&r.from)?;
                    skip_start = from.workspace.as_ref().and_then(|w| w.start);
                    at = parent(&from);
                }
                continue;
            }
            (Record::Restored | Record::BeforeRestore | Record::Relocated, _) => {}
            (Record::Answer | Record::Interrupted, Some(w)) => {
                let Some(start) = w.start else {
                    return Err(HistoryError::NoWorkspace(id));
                };
                if start != w.tree {
                    return Ok(Instruction {
                        record: id,
                        start,
                        end: Some(w.tree),
                        instruction: cp.summary.instruction.clone(),
                        skipped,
                    });
                }
                // It changed no file: nothing of it to put back.
                skipped += 1;
                skip_start = Some(start);
            }
            (Record::Answer | Record::Interrupted, None) => {
                return Err(HistoryError::NoWorkspace(id));
            }
            (Record::Start, Some(w)) => {
                if skip_start.take() != Some(w.tree) {
                    return Ok(Instruction {
                        record: id,
                        start: w.tree,
                        end: None,
                        instruction: cp.summary.instruction.clone(),
                        skipped,
                    });
                }
            }
            (Record::Start, None) => return Err(HistoryError::NoWorkspace(id)),
            (Record::Fork, _) => {
                // The checkpoint forked from (the one `/rewind` or `--at`
                // picked, not the fork's own record), and its session if
                // it can be read.
                let from = parent(&cp);
                let origin = from
                    .and_then(|p| store.checkpoint(&p).ok())
                    .map(|c| c.session_id);
                let note = skipped_note(skipped);
                return Err(HistoryError::NothingToUndo(match (from, origin) {
                    (Some(f), Some(o)) => format!(
                        "the session begins at a fork of checkpoint {} of session {o}: run `hel undo {o}` there{note}",
                        &f.to_hex()[..12]
                    ),
                    _ => format!(
                        "the session begins at a fork (record {}) of a checkpoint this store cannot read{note}",
                        &id.to_hex()[..12]
                    ),
                }));
            }
        }
        at = parent(&cp);
    }
    Err(HistoryError::NothingToUndo(format!(
        "no earlier instruction of this session recorded the project's files{}",
        skipped_note(skipped)
    )))
}

/// What a session last recorded of the project as its own result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The tree its newest answer, interrupted instruction, fork or
    /// relocation left; `None` while an instruction has started and not
    /// ended (or never will: a crash): what is on disk then counts as that
    /// instruction's.
    pub base: Option<ObjectId>,
    /// The restores since then, newest first, each as its before-restore
    /// tree and its restored tree: what a restore wrote or removed is the
    /// session's own; what it left alone is still what `base` (or an
    /// older restore) says, not what the user had on disk.
    pub restores: Vec<(ObjectId, ObjectId)>,
}

/// What the session whose head is `head` last recorded of the project as
/// its own result (see [`Recorded`]).
pub fn last_recorded(store: &Store, head: &ObjectId) -> Result<Recorded, HistoryError> {
    let mut out = Recorded::default();
    let mut at = Some(*head);
    for _ in 0..WALK_MAX {
        let Some(id) = at else { break };
        let cp = store.checkpoint(&id)?;
        match (Record::of(&cp), cp.workspace.as_ref()) {
            // A restore that never wrote: what the session had before.
            (Record::BeforeRestore, _) => {}
            (Record::Restored, Some(w)) => {
                let before = match parent(&cp) {
                    Some(p) => Some(store.checkpoint(&p)?),
                    None => None,
                };
                match before {
                    Some(b) if Record::of(&b) == Record::BeforeRestore => {
                        let Some(bw) = &b.workspace else {
                            return Err(HistoryError::NoWorkspace(id));
                        };
                        out.restores.push((bw.tree, w.tree));
                        at = parent(&b);
                        continue;
                    }
                    // Not how hel writes a restore: take its tree whole.
                    _ => {
                        out.base = Some(w.tree);
                        return Ok(out);
                    }
                }
            }
            (Record::Start, Some(_)) => return Ok(out),
            (_, Some(w)) => {
                out.base = Some(w.tree);
                return Ok(out);
            }
            (_, None) => return Err(HistoryError::NoWorkspace(id)),
        }
        at = parent(&cp);
    }
    Err(HistoryError::NothingToUndo(
        "the session has recorded no snapshot of the project's files".into(),
    ))
}

/// The newest workspace tree of the session whose head is `head` (any
/// record), if any: the previous snapshot the next one builds on.
pub fn newest_tree(store: &Store, head: &ObjectId) -> Result<Option<ObjectId>, HistoryError> {
    let mut at = Some(*head);
    for _ in 0..WALK_MAX {
        let Some(id) = at else { break };
        let cp = store.checkpoint(&id)?;
        if let Some(w) = &cp.workspace {
            return Ok(Some(w.tree));
        }
        at = parent(&cp);
    }
    Ok(None)
}

/// The restores recorded since the session's last answer, interrupted
/// instruction or start, newest first (what the model is told at the next
/// instruction).
pub fn restores_since_answer(
    store: &Store,
    head: &ObjectId,
) -> Result<Vec<hel_store::Restored>, HistoryError> {
    let mut out = Vec::new();
    let mut at = Some(*head);
    for _ in 0..WALK_MAX {
        let Some(id) = at else { break };
        let cp = store.checkpoint(&id)?;
        match (Record::of(&cp), &cp.workspace) {
            (
                Record::Restored,
                Some(Workspace {
                    restored: Some(r), ..
                }),
            ) => out.push(r.clone()),
            (Record::BeforeRestore | Record::Relocated, _) => {}
            _ => break,
        }
        at = parent(&cp);
    }
    Ok(out)
}

/// Paths a session changed.
#[derive(Debug, Default)]
pub struct Changed {
    /// Changed with their content known on both sides (files, links,
    /// directories that appear or go, and everything under them).
    pub known: BTreeSet<Vec<u8>>,
    /// Changed where one side is what a snapshot did not read (a
    /// not-tracked file or directory, a nested repository): hel never
    /// writes or removes those.
    pub unknown: BTreeSet<Vec<u8>>,
    /// For every path of `known` and `unknown`, what the first change
    /// added left there (`None`: absent). [`changed_by_session`] adds the
    /// newest change first, so this is what the session itself last made
    /// of the path: what it must still be for a restore to touch it. (Not
    /// the newest tree whole: a later instruction's snapshot also holds
    /// what the user changed between instructions, which is not the
    /// session's.)
    pub last: BTreeMap<Vec<u8>, Option<Item>>,
    /// Paths that changed between the session's own changes, after the
    /// record a restore goes back to: from one record's files to the next
    /// record's files before it (the user's edits between instructions,
    /// another session's).
    pub gapped: BTreeSet<Vec<u8>>,
    /// For the paths an instruction (not a restore) changed, what the
    /// newest such change left there. A path of `gapped` that is not now
    /// what an instruction made of it holds the user's work, even where a
    /// restore put it back since (an undo that brought back the user's
    /// edit): going further back would undo that edit.
    pub made: BTreeMap<Vec<u8>, Option<Item>>,
    /// When each of the session's instructions counted here ran: from its
    /// start record's time to its end record's, in milliseconds since the
    /// epoch (an instruction that never ended runs on: `u64::MAX`). What
    /// another session recorded as its own change during one of them is
    /// not this session's ([`crate::attrib::others_during`]).
    pub spans: Vec<(u64, u64)>,
}

impl Changed {
    /// Whether `path`, now `now`, holds what someone other than the
    /// session made of it after the record a restore goes back to.
    pub fn users(&self, path: &[u8], now: Option<&Item>) -> bool {
        self.gapped.contains(path)
            && match self.made.get(path) {
                Some(made) => match (now, made) {
                    (None, None) => false,
                    (Some(a), Some(b)) => !a.same(b),
                    _ => true,
                },
                None => true,
            }
    }
}

/// Whether an entry of this kind is something a snapshot did not read
/// (objects-spec §10.1 kinds 4, 5 and 6): nothing is known of its content,
/// nor of what is under it.
pub fn opaque(kind: EntryKind) -> bool {
    matches!(
        kind,
        EntryKind::NotTracked | EntryKind::Repository | EntryKind::NotTrackedDir
    )
}

/// Every path where trees `a` and `b` differ, in no particular order,
/// given to `each` with its entry on each side (`None`: absent there).
/// Read from the store descending only into subtrees whose ids differ,
/// with a stack, no deeper than [`DEPTH_MAX`]. A directory on both sides
/// with the same mode is not given (its content is its own paths), but
/// what differs under it is.
pub fn tree_diff(
    store: &Store,
    a: &ObjectId,
    b: &ObjectId,
    mut each: impl FnMut(Vec<u8>, Option<&Entry>, Option<&Entry>),
) -> Result<(), HistoryError> {
    /// A directory to compare: its path, its tree on each side, its depth.
    type Pair = (Vec<u8>, Option<ObjectId>, Option<ObjectId>, usize);
    let mut stack: Vec<Pair> = vec![(Vec::new(), Some(*a), Some(*b), 0)];
    // A tree names each of its paths once at most here; a hostile one (a
    // subtree named a thousand times a level) names far more: past what
    // one may flatten to, the diff is refused naming the larger side.
    let (mut seen_a, mut seen_b) = (0u64, 0u64);
    while let Some((dir, ta, tb, depth)) = stack.pop() {
        if ta == tb {
            continue;
        }
        if depth >= DEPTH_MAX {
            return Err(HistoryError::TooDeep(
                String::from_utf8_lossy(&dir).into_owned(),
            ));
        }
        let read = |t: Option<ObjectId>| -> Result<Vec<Entry>, HistoryError> {
            Ok(match t {
                Some(t) => hel_store::workspace::read_tree(store, &t)?.entries,
                None => Vec::new(),
            })
        };
        let (ea, eb) = (read(ta)?, read(tb)?);
        let mut names: BTreeSet<&[u8]> = ea.iter().map(|e| e.name.as_slice()).collect();
        names.extend(eb.iter().map(|e| e.name.as_slice()));
        let find = |es: &'_ [Entry], n: &[u8]| -> Option<usize> {
            es.binary_search_by(|e| e.name.as_slice().cmp(n)).ok()
        };
        seen_a = seen_a.saturating_add(ea.len() as u64);
        seen_b = seen_b.saturating_add(eb.len() as u64);
        if seen_a.max(seen_b) > FLAT_PATHS_MAX {
            let big = if seen_a >= seen_b { a } else { b };
            return Err(HistoryError::Store(hel_store::Error::TreeTooLarge {
                tree: *big,
                what: "paths",
                limit: FLAT_PATHS_MAX,
            }));
        }
        for name in names {
            let x = find(&ea, name).map(|k| &ea[k]);
            let y = find(&eb, name).map(|k| &eb[k]);
            if x == y {
                continue;
            }
            let path = crate::flat::join(&dir, name);
            let sub = |e: Option<&Entry>| e.filter(|e| e.kind == EntryKind::Dir).map(|e| e.id);
            let (da, db) = (sub(x), sub(y));
            if da.is_some() || db.is_some() {
                stack.push((path.clone(), da, db, depth + 1));
            }
            let both_dirs = da.is_some() && db.is_some();
            if !both_dirs || x.map(|e| e.mode) != y.map(|e| e.mode) {
                each(path, x, y);
            }
        }
    }
    Ok(())
}

/// The paths that differ between trees `a` and `b` ([`tree_diff`]), added
/// to `out`: to `unknown` where either side is [`opaque`].
pub fn tree_changes(
    store: &Store,
    a: &ObjectId,
    b: &ObjectId,
    out: &mut Changed,
) -> Result<(), HistoryError> {
    tree_diff(store, a, b, |path, x, y| {
        out.last.entry(path.clone()).or_insert(y.map(Item::of));
        if x.is_some_and(|e| opaque(e.kind)) || y.is_some_and(|e| opaque(e.kind)) {
            out.unknown.insert(path);
        } else {
            out.known.insert(path);
        }
    })
}

/// What one record of a session changed in the project, as a pair of
/// trees (before, after): an instruction's start and end, a restore's
/// before-restore tree and what it wrote. `None` for records that only
/// observe (starts that ended, before-restore records, forks).
pub(crate) fn record_change(
    store: &Store,
    cp: &Checkpoint,
) -> Result<Option<(ObjectId, ObjectId)>, HistoryError> {
    let Some(w) = &cp.workspace else {
        return Ok(None);
    };
    Ok(match Record::of(cp) {
        Record::Answer | Record::Interrupted => w.start.map(|s| (s, w.tree)),
        Record::Restored => match parent(cp) {
            Some(p) => store
                .checkpoint(&p)?
                .workspace
                .map(|before| (before.tree, w.tree)),
            None => None,
        },
        _ => None,
    })
}

/// The paths the session whose head is `head` changed itself after record
/// `since` (its instructions, interrupted or not, and its restores), and
/// with `include_since` those `since`'s own instruction changed. An
/// instruction that never ended changed what differs between its start
/// and `now` (the files on disk). `since` must be in the history; when
/// the history reaches a fork before it, the walk continues in the
/// session forked from (through `origin`, the head of the session `since`
/// belongs to, if another).
pub fn changed_by_session(
    store: &Store,
    head: &ObjectId,
    since: &ObjectId,
    include_since: bool,
    now: &ObjectId,
) -> Result<Changed, HistoryError> {
    let mut out = Changed::default();
    let mut at = Some(*head);
    let mut newest = true;
    // The files just before the newer record processed last (its
    // instruction's start, its before-restore tree, or its own files):
    // what differs from an older record's files to them changed between
    // the two, by someone other than the session.
    let mut newer_before: Option<ObjectId> = None;
    for _ in 0..WALK_MAX {
        let Some(id) = at else { break };
        let cp = store.checkpoint(&id)?;
        let record = Record::of(&cp);
        if let (Some(w), Some(nb)) = (&cp.workspace, newer_before) {
            if w.tree != nb {
                let mut gap = Changed::default();
                tree_changes(store, &w.tree, &nb, &mut gap)?;
                out.gapped.extend(gap.known);
                out.gapped.extend(gap.unknown);
            }
        }
        if id == *since && !include_since {
            return Ok(out);
        }
        let change = match (record, &cp.workspace) {
            (Record::Start, Some(w)) if newest => {
                out.spans.push((cp.created_at_ms, u64::MAX));
                Some((w.tree, *now))
            }
            _ => record_change(store, &cp)?,
        };
        if change.is_some() && matches!(record, Record::Answer | Record::Interrupted) {
            out.spans.push((span_start(store, &cp)?, cp.created_at_ms));
        }
        if let Some((a, b)) = change {
            let mut this = Changed::default();
            tree_changes(store, &a, &b, &mut this)?;
            for (path, item) in this.last {
                if record != Record::Restored {
                    out.made.entry(path.clone()).or_insert(item);
                }
                out.last.entry(path).or_insert(item);
            }
            out.known.extend(this.known);
            out.unknown.extend(this.unknown);
        }
        if let Some(w) = &cp.workspace {
            newer_before = Some(match record {
                Record::Answer | Record::Interrupted => w.start.unwrap_or(w.tree),
                // Its parent, the before-restore record, holds the files
                // the restore changed: no gap between the two.
                Record::Restored => match record_change(store, &cp)? {
                    Some((before, _)) => before,
                    None => w.tree,
                },
                _ => w.tree,
            });
        }
        if !matches!(record, Record::BeforeRestore | Record::Restored) {
            newest = false;
        }
        if id == *since {
            return Ok(out);
        }
        at = parent(&cp);
    }
    Err(HistoryError::NotInHistory(*since))
}

/// When the instruction that `cp` (an answer or interrupted record) ends
/// began: its parent's time (the instruction's start record), or its own
/// when it has none.
pub(crate) fn span_start(store: &Store, cp: &Checkpoint) -> Result<u64, HistoryError> {
    Ok(match parent(cp) {
        Some(p) => store.checkpoint(&p)?.created_at_ms.min(cp.created_at_ms),
        None => cp.created_at_ms,
    })
}
