//! Undo and restore: put the project's files back as a snapshot has them,
//! touching only what the session itself changed and only where nobody
//! changed it since.
//!
//! The rules (objects-spec §13.6):
//! - Before anything is written, the project is snapshotted into a
//!   `before-restore` record, so every restore can itself be undone.
//! - A path is considered only if the session itself changed it (an
//!   instruction of the session, interrupted or not, or a restore) after
//!   the record whose files are brought back: files the user created or
//!   changed between instructions, files of other sessions, untracked and
//!   ignored files are never touched.
//! - A path is written or removed only if it is now what the session last
//!   recorded for it; anything else is a conflict, listed and left alone
//!   (unless forced). Not-tracked files and nested repositories are never
//!   touched.
//! - What the restore wrote is recorded in a `restored` record, so a
//!   following restore or undo of the session does not see it as a
//!   conflict.

use std::collections::HashSet;

use hel_store::tree::EntryKind;
use hel_store::{ObjectId, Record, Restored, SessionLease, Store, Workspace, RESTORED_PATHS_MAX};

use crate::flat::{Flat, Item};
use crate::history::{self, HistoryError};
use crate::restore::{self, Change};
use crate::snapshot::{Prev, SnapshotError, Workspace as Project};

/// What the files should be compared with before writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// The session recorded this tree as its last result.
    Tree(ObjectId),
    /// An instruction never ended: what is on disk counts as the session's.
    Disk,
}

/// A restore to perform.
#[derive(Clone, Debug)]
pub struct GoBack {
    /// The tree to bring back.
    pub target: ObjectId,
    /// What the session last recorded.
    pub expected: Expected,
    /// The record whose files these are, and whether they are its
    /// instruction's start (`true`) or the record's own.
    pub from: ObjectId,
    pub start: bool,
    /// The head of the history that leads to `from` (the session's, or for
    /// a fork the head of the session forked from): the paths its records
    /// changed after `from` are the ones considered.
    pub history: ObjectId,
    /// An undo (a following undo steps further back).
    pub undo: bool,
    /// Only these paths (and what is under them); all when empty.
    pub paths: Vec<Vec<u8>>,
    /// Write even where the files changed since the session recorded them.
    pub force: bool,
}

/// Why a path was left alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Conflict {
    /// It changed since the session recorded it (by the user, another
    /// session, an editor).
    Changed,
    /// The snapshot did not record its content (too large, over budget).
    NotTracked,
    /// It is a nested repository.
    Repository,
    /// The restore could not touch it (see the reason).
    Skipped(String),
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conflict::Changed => f.write_str("changed since the session recorded it"),
            Conflict::NotTracked => f.write_str("its content was not recorded (too large)"),
            Conflict::Repository => f.write_str("a nested repository"),
            Conflict::Skipped(why) => f.write_str(why),
        }
    }
}

/// What a restore did.
#[derive(Debug)]
pub struct Outcome {
    /// The before-restore and restored records.
    pub before: ObjectId,
    pub restored: ObjectId,
    /// Paths written (created or overwritten) and removed.
    pub written: Vec<Vec<u8>>,
    pub removed: Vec<Vec<u8>>,
    /// Paths left alone, and why.
    pub conflicts: Vec<(Vec<u8>, Conflict)>,
    /// Why the writes may not survive a power loss (a failed sync), if so.
    pub not_durable: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error(transparent)]
    Store(#[from] hel_store::Error),
    #[error(transparent)]
    History(#[from] HistoryError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Flat(#[from] crate::flat::FlatError),
    #[error(transparent)]
    Restore(#[from] restore::RestoreError),
    #[error("restore: {0}")]
    Trees(#[source] crate::flat::TreesError),
    /// The session being restored has no checkpoint to record after.
    #[error("restore: the session has no checkpoint")]
    NoCheckpoint,
    /// `--before` of a checkpoint that is not an instruction's end.
    #[error("restore: checkpoint {0} is not the end of an instruction: it has no start to go back to (drop --before)")]
    NoStart(ObjectId),
}

/// Whether `path` is one of `filter` or under one (all when empty).
fn selected(path: &[u8], filter: &[Vec<u8>]) -> bool {
    filter.is_empty()
        || filter.iter().any(|f| {
            path == f.as_slice() || (path.starts_with(f) && path.get(f.len()) == Some(&b'/'))
        })
}

fn untouchable(i: Option<&Item>) -> Option<Conflict> {
    match i.map(|i| i.kind) {
        Some(EntryKind::NotTracked) => Some(Conflict::NotTracked),
        Some(EntryKind::Repository) => Some(Conflict::Repository),
        _ => None,
    }
}

fn same(a: Option<&Item>, b: Option<&Item>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.same(b),
        _ => false,
    }
}

/// Plan the changes to `target` of the paths the session changed
/// (`owned`), given what it last recorded (`expected`) and what is on disk
/// now (`before`).
fn plan(
    target: &Flat,
    expected: &Flat,
    owned: &history::Changed,
    before: &crate::Snapshot,
    go: &GoBack,
) -> (Vec<Change>, Vec<(Vec<u8>, Conflict)>) {
    let mut changes = Vec::new();
    let mut conflicts = Vec::new();
    for path in &owned.unknown {
        if selected(path, &go.paths) {
            let repo = [target.get(path), expected.get(path), before.flat.get(path)]
                .iter()
                .any(|i| i.is_some_and(|i| i.kind == EntryKind::Repository));
            let why = if repo {
                Conflict::Repository
            } else {
                Conflict::NotTracked
            };
            conflicts.push((path.clone(), why));
        }
    }
    for path in owned.known.difference(&owned.unknown) {
        if !selected(path, &go.paths) {
            continue;
        }
        let (t, x) = (target.get(path), expected.get(path));
        let now = before.flat.get(path);
        if same(now, t) {
            continue; // already as wanted
        }
        if let Some(c) = untouchable(t)
            .or_else(|| untouchable(x))
            .or_else(|| untouchable(now))
        {
            conflicts.push((path.clone(), c));
            continue;
        }
        if !same(now, x) && !go.force {
            conflicts.push((path.clone(), Conflict::Changed));
            continue;
        }
        changes.push(Change {
            path: path.clone(),
            now: now.copied(),
            stat: before.stats.get(path).copied(),
            target: t.copied(),
        });
    }
    (changes, conflicts)
}

/// Restore the files of the project `ws` as `go` says, in the session of
/// `lease` whose last checkpoint `state` describes (it must have one;
/// [`Store::record_state`] gives a state for a process that has not loaded
/// the conversation): a before-restore record, the writes, then a restored
/// record. `state` follows the records.
pub fn go_back(
    store: &Store,
    lease: &SessionLease,
    state: &mut hel_store::SessionState,
    ws: &mut Project,
    go: &GoBack,
) -> Result<Outcome, UndoError> {
    let head = state.head.ok_or(UndoError::NoCheckpoint)?;
    let prev_tree = history::newest_tree(store, &head)?;
    let prev_flat = match prev_tree {
        Some(t) => Some(Flat::read(store, &t)?),
        None => None,
    };
    // 1. What is on disk now, recorded before anything is written.
    let mut txn = store.begin(lease, state)?;
    let prev = prev_tree
        .zip(prev_flat.as_ref())
        .map(|(tree, flat)| Prev { tree, flat });
    let before = ws.snapshot_with_stats(&mut txn, prev)?;
    let before_id = txn
        .commit_record(
            Record::BeforeRestore,
            Workspace {
                tree: before.tree,
                start: None,
                not_tracked: before.not_tracked.len() as u64,
                restored: None,
            },
            "before restore",
        )?
        .id;
    // 2. The plan.
    let target = Flat::read(store, &go.target)?;
    let expected = match go.expected {
        Expected::Tree(t) => Flat::read(store, &t)?,
        Expected::Disk => before.flat.clone(),
    };
    let owned = history::changed_by_session(store, &go.history, &go.from, go.start, &before.tree)?;
    let (changes, mut conflicts) = plan(&target, &expected, &owned, &before, go);
    // 3. The writes.
    // Once the writes are made they are recorded, even when they could not
    // be made durable (said in `not_durable`).
    let (applied, not_durable) = match restore::apply(ws.project_fd(), store, &changes) {
        Ok(a) => (a, None),
        Err(restore::RestoreError::NotDurable {
            path,
            source,
            applied,
        }) => (*applied, Some(format!("{}: {source}", path.display()))),
        Err(e) => return Err(e.into()),
    };
    let mut after = before.flat.clone();
    let (mut written, mut removed) = (Vec::new(), Vec::new());
    for (path, item, _stat) in &applied.done {
        match item {
            Some(i) => {
                after.items.insert(path.clone(), *i);
                written.push(path.clone());
            }
            None => {
                after.items.remove(path);
                removed.push(path.clone());
            }
        }
    }
    for (path, why) in &applied.skipped {
        conflicts.push((path.clone(), Conflict::Skipped(why.to_string())));
    }
    // 4. What the session now has, recorded as its own.
    let known: HashSet<ObjectId> = before
        .flat
        .items
        .values()
        .filter(|i| i.kind == EntryKind::Dir)
        .map(|i| i.id)
        .chain(std::iter::once(before.tree))
        .collect();
    let mut txn = store.begin(lease, state)?;
    let trees = after.trees().map_err(UndoError::Trees)?;
    for (_, tree, id) in &trees {
        if !known.contains(id) {
            txn.put_tree(tree)?;
        }
    }
    let tree = trees.last().map_or(before.tree, |(_, _, id)| *id);
    let mut shown: Vec<String> = written
        .iter()
        .chain(&removed)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    shown.sort();
    shown.truncate(RESTORED_PATHS_MAX);
    let restored_id = txn
        .commit_record(
            Record::Restored,
            Workspace {
                tree,
                start: None,
                not_tracked: after.not_tracked().count() as u64,
                restored: Some(Restored {
                    from: go.from,
                    start: go.start,
                    undo: go.undo,
                    count: (written.len() + removed.len()) as u64,
                    conflicts: conflicts.len() as u64,
                    paths: shown,
                }),
            },
            if go.undo { "undo" } else { "restore" },
        )?
        .id;
    Ok(Outcome {
        before: before_id,
        restored: restored_id,
        written,
        removed,
        conflicts,
        not_durable,
    })
}

/// The restore `hel undo` performs on the session whose head is `head`.
pub fn undo_plan(store: &Store, head: &ObjectId, force: bool) -> Result<GoBack, UndoError> {
    let i = history::undo_target(store, head)?;
    let expected = history::last_recorded(store, head)?.map_or(Expected::Disk, Expected::Tree);
    Ok(GoBack {
        target: i.start,
        expected,
        from: i.record,
        start: true,
        history: *head,
        undo: true,
        paths: Vec::new(),
        force,
    })
}

/// The restore `hel restore --at <at> [--before] [PATH...]` performs on the
/// session whose head is `head`.
pub fn restore_plan(
    store: &Store,
    head: &ObjectId,
    at: &ObjectId,
    before: bool,
    paths: Vec<Vec<u8>>,
    force: bool,
) -> Result<GoBack, UndoError> {
    let cp = store.checkpoint(at)?;
    let ws = cp
        .workspace
        .as_ref()
        .ok_or(HistoryError::NoWorkspace(*at))?;
    let target = if before {
        ws.start.ok_or(UndoError::NoStart(*at))?
    } else {
        ws.tree
    };
    let expected = history::last_recorded(store, head)?.map_or(Expected::Disk, Expected::Tree);
    Ok(GoBack {
        target,
        expected,
        from: *at,
        start: before,
        history: *head,
        undo: false,
        paths,
        force,
    })
}
