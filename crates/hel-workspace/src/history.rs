//! Reading a session's history for its workspace: which instruction an
//! undo puts back, what the session last recorded of the files, what was
//! restored since the last answer.
//!
//! A session's records (objects-spec §4) are answers, instruction starts,
//! interrupted instructions, restores (a before-restore record and a
//! restored record) and a fork's first record. An instruction is a start
//! record followed by its answer or interrupted record, whose `start` is
//! the start record's tree; a start record not followed by its end is an
//! instruction that never ended (a crash).

use std::collections::BTreeSet;

use hel_store::{Checkpoint, ObjectId, Record, Store, Workspace};

/// The most records a history walk reads before giving up (a hostile
/// store cannot make it loop: ids are hashes, but a long chain is long).
const WALK_MAX: usize = 1_000_000;

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
}

/// Why there is nothing to go back to.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(transparent)]
    Store(#[from] hel_store::Error),
    #[error("nothing to undo: {0}")]
    NothingToUndo(String),
    #[error("checkpoint {0} has no workspace snapshot (saved without one, or by an older hel): its files cannot be compared or restored")]
    NoWorkspace(ObjectId),
    #[error("checkpoint {0} is not in this session's history")]
    NotInHistory(ObjectId),
    #[error("the snapshot nests deeper than a tree may, at {0}; the store may be damaged: run `hel fsck`")]
    TooDeep(String),
}

fn parent(cp: &Checkpoint) -> Option<ObjectId> {
    cp.parents.first().copied()
}

/// The instruction the next `hel undo` of the session whose head is
/// `head` puts back: the last one, or, after an undo, the one before the
/// instruction that undo put back.
pub fn undo_target(store: &Store, head: &ObjectId) -> Result<Instruction, HistoryError> {
    let mut at = Some(*head);
    // After stepping back over an instruction's end, its own start record
    // is skipped (by its tree).
    let mut skip_start: Option<ObjectId> = None;
    for _ in 0..WALK_MAX {
        let Some(id) = at else { break };
        let cp = store.checkpoint(&id)?;
        let record = Record::of(&cp);
        let ws = cp.workspace.as_ref();
        match (record, ws) {
            (Record::Restored, Some(Workspace { restored: Some(r), .. })) if r.undo => {
                // Continue before the instruction that undo put back.
                let from = store.checkpoint(&r.from)?;
                skip_start = from.workspace.as_ref().and_then(|w| w.start);
                at = parent(&from);
                continue;
            }
            (Record::Restored | Record::BeforeRestore | Record::Relocated, _) => {}
            (Record::Answer | Record::Interrupted, Some(w)) => {
                let Some(start) = w.start else {
                    return Err(HistoryError::NoWorkspace(id));
                };
                return Ok(Instruction {
                    record: id,
                    start,
                    end: Some(w.tree),
                    instruction: cp.summary.instruction.clone(),
                });
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
                    });
                }
            }
            (Record::Start, None) => return Err(HistoryError::NoWorkspace(id)),
            (Record::Fork, _) => {
                return Err(HistoryError::NothingToUndo(format!(
                    "the session begins at checkpoint {id}, a fork; undo in the session it was forked from"
                )))
            }
        }
        at = parent(&cp);
    }
    Err(HistoryError::NothingToUndo(
        "no earlier instruction of this session recorded the project's files".into(),
    ))
}

/// What the session whose head is `head` last recorded of the project as
/// its own result: the tree its last answer, interrupted instruction,
/// restore or fork left. `None` while an instruction has started and not
/// ended (or never will: a crash): what is on disk then counts as that
/// instruction's.
pub fn last_recorded(store: &Store, head: &ObjectId) -> Result<Option<ObjectId>, HistoryError> {
    let mut at = Some(*head);
    for _ in 0..WALK_MAX {
        let Some(id) = at else { break };
        let cp = store.checkpoint(&id)?;
        match (Record::of(&cp), cp.workspace.as_ref()) {
            // A restore that never finished: what the session had before.
            (Record::BeforeRestore, _) => {}
            (Record::Start, Some(_)) => return Ok(None),
            (_, Some(w)) => return Ok(Some(w.tree)),
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
    /// Changed where one side is a not-tracked file or a nested repository:
    /// hel never writes or removes those.
    pub unknown: BTreeSet<Vec<u8>>,
}

/// The paths that differ between trees `a` and `b`, read from the store
/// descending only into subtrees whose ids differ.
pub fn tree_changes(
    store: &Store,
    a: &ObjectId,
    b: &ObjectId,
    out: &mut Changed,
) -> Result<(), HistoryError> {
    use hel_store::tree::{EntryKind, DEPTH_MAX};
    /// A directory to compare: its path, its tree on each side, its depth.
    type Pair = (Vec<u8>, Option<ObjectId>, Option<ObjectId>, usize);
    let mut stack: Vec<Pair> = vec![(Vec::new(), Some(*a), Some(*b), 0)];
    while let Some((dir, ta, tb, depth)) = stack.pop() {
        if ta == tb {
            continue;
        }
        if depth >= DEPTH_MAX {
            return Err(HistoryError::TooDeep(
                String::from_utf8_lossy(&dir).into_owned(),
            ));
        }
        let read = |t: Option<ObjectId>| -> Result<Vec<hel_store::tree::Entry>, HistoryError> {
            Ok(match t {
                Some(t) => store.read_tree(&t)?.entries,
                None => Vec::new(),
            })
        };
        let (ea, eb) = (read(ta)?, read(tb)?);
        let mut names: BTreeSet<&[u8]> = ea.iter().map(|e| e.name.as_slice()).collect();
        names.extend(eb.iter().map(|e| e.name.as_slice()));
        let find = |es: &[hel_store::tree::Entry], n: &[u8]| {
            es.binary_search_by(|e| e.name.as_slice().cmp(n))
                .ok()
                .map(|k| es[k].clone())
        };
        for name in names {
            let (x, y) = (find(&ea, name), find(&eb, name));
            if x == y {
                continue;
            }
            let path = crate::flat::join(&dir, name);
            let sub = |e: &Option<hel_store::tree::Entry>| {
                e.as_ref()
                    .filter(|e| e.kind == EntryKind::Dir)
                    .map(|e| e.id)
            };
            let (da, db) = (sub(&x), sub(&y));
            let both_dirs = da.is_some() && db.is_some();
            let opaque = |e: &Option<hel_store::tree::Entry>| {
                e.as_ref().is_some_and(|e| {
                    matches!(e.kind, EntryKind::NotTracked | EntryKind::Repository)
                })
            };
            if opaque(&x) || opaque(&y) {
                out.unknown.insert(path.clone());
            } else if !both_dirs || x.as_ref().map(|e| e.mode) != y.as_ref().map(|e| e.mode) {
                out.known.insert(path.clone());
            }
            if da.is_some() || db.is_some() {
                stack.push((path, da, db, depth + 1));
            }
        }
    }
    Ok(())
}

/// What one record of a session changed in the project, as a pair of
/// trees (before, after): an instruction's start and end, a restore's
/// before-restore tree and what it wrote. `None` for records that only
/// observe (starts that ended, before-restore records, forks).
fn record_change(
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
    for _ in 0..WALK_MAX {
        let Some(id) = at else { break };
        let cp = store.checkpoint(&id)?;
        if id == *since && !include_since {
            return Ok(out);
        }
        let record = Record::of(&cp);
        match (record, &cp.workspace) {
            (Record::Start, Some(w)) if newest => tree_changes(store, &w.tree, now, &mut out)?,
            _ => {
                if let Some((a, b)) = record_change(store, &cp)? {
                    tree_changes(store, &a, &b, &mut out)?;
                }
            }
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
