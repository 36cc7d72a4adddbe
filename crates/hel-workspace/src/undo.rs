//! Undo and restore: put the project's files back as a snapshot has them,
//! touching only what the session knows it changed and only where nobody
//! changed it since.
//!
//! The rules (objects-spec §10.6):
//! - Before anything is written, the project is snapshotted into a
//!   `before-restore` record, so every restore can itself be undone.
//! - A path is considered only if the session itself changed it (an
//!   instruction of the session, interrupted or not, or a restore) after
//!   the record whose files are brought back: files the user created or
//!   changed between instructions, files of other sessions, untracked and
//!   ignored files are never touched.
//! - A path that is, or is under, what a snapshot did not read (kinds 4,
//!   5 and 6: a not-tracked file or directory, a nested repository) in the
//!   target is never written or removed. So a path the target does not
//!   hold is removed only when the target proves it absent ([`not_read`]).
//! - One that is, or is under, such an entry in what the session last
//!   recorded or in the files now (the agent made it a FIFO, grew it past
//!   the size limit, ignored it) is never removed, and is written only
//!   when the target holds it, both did not read it under the same entry
//!   ([`unread_since`]) and the disk shows no change since the
//!   instruction's end ([`settle_unread`]): the target's content is the
//!   proof. Otherwise it is a conflict, which `--force` writes only where
//!   the end snapshot proves the session changed it.
//! - One that the session's own last change of it left, or left under,
//!   such an entry, read again since (it only became ignored, then the
//!   user moved it), is written only where that change's snapshot proves
//!   the session changed it; otherwise it is a conflict, forced or not.
//! - A path is written or removed only if it is now what the session last
//!   recorded for it (what its last instruction left, with what later
//!   restores wrote laid over it); anything else is a conflict, listed and
//!   left alone (unless forced).
//! - What the restore wrote is recorded in a `restored` record, so a
//!   following restore or undo of the session does not see it as a
//!   conflict. A restore with nothing to write records nothing (nor does
//!   an undo whose refused paths keep its step current).
//! - A path named with `--force` is the user's decision for that path:
//!   what the target holds there (and under it) is written even when the
//!   session did not change it after the record (the user deleted a file
//!   the agent made). Still never touched: another session's work, what a
//!   snapshot did not read, and a path the target does not hold.

use std::collections::HashSet;

use hel_store::tree::EntryKind;
use hel_store::{ObjectId, Record, Restored, SessionLease, Store, Workspace, RESTORED_PATHS_MAX};

use crate::flat::{split, Flat, Item};
use crate::history::{self, HistoryError, Instruction, Recorded};
use crate::restore::{self, Change, Skip};
use crate::snapshot::{Prev, SnapshotError, Workspace as Project};

/// A restore to perform.
#[derive(Clone, Debug)]
pub struct GoBack {
    /// The tree to bring back.
    pub target: ObjectId,
    /// What the session last recorded as its own.
    pub expected: Recorded,
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

impl GoBack {
    /// The snapshot this restore brings back, as a reason names it.
    pub fn target_snapshot(&self) -> Snap {
        match (self.undo, self.start) {
            (true, _) => Snap::InstructionStart,
            (false, true) => Snap::CheckpointStart(self.from),
            (false, false) => Snap::Checkpoint(self.from),
        }
    }
}

/// A snapshot a reason speaks of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Snap {
    /// The start of the instruction an undo puts back.
    InstructionStart,
    /// A checkpoint's own files.
    Checkpoint(ObjectId),
    /// The files when a checkpoint's instruction started.
    CheckpointStart(ObjectId),
    /// What the session last recorded as its own.
    Recorded,
    /// The files now (the before-restore snapshot).
    Now,
}

impl std::fmt::Display for Snap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Snap::InstructionStart => f.write_str("at the instruction's start"),
            Snap::Checkpoint(id) => write!(f, "at checkpoint {}", &id.to_hex()[..12]),
            Snap::CheckpointStart(id) => write!(
                f,
                "at the start of checkpoint {}'s instruction",
                &id.to_hex()[..12]
            ),
            Snap::Recorded => f.write_str("the session last recorded"),
            Snap::Now => f.write_str("of the files now"),
        }
    }
}

/// Why a path was left alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Conflict {
    /// It changed since the session recorded it (by the user, another
    /// session, an editor): `--force` writes it.
    Changed,
    /// It is what a snapshot did not read (an entry of kind 4, 5 or 6,
    /// objects-spec §10.1), or a path under it was one the session
    /// changed: nothing is known of its content, nor of what is under it,
    /// so it is neither written nor removed, forced or not.
    NotRead { snapshot: Snap, kind: EntryKind },
    /// What the session last recorded, or the files now, did not read
    /// (the target holds it), and it changed after the record whose files
    /// come back: nothing shows the session made what is there, so it is
    /// neither written nor removed, forced or not.
    ChangedUnread,
    /// Another session changed it while an instruction of this one ran
    /// (that session's own records say so, objects-spec §10.6): it is
    /// that session's work, never written or removed here, forced or
    /// not.
    OtherSession(hel_store::SessionId),
    /// The restore could not touch it.
    Skipped(Skip),
}

impl Conflict {
    /// Whether the path was refused because it changed since the session
    /// recorded it (before or during the restore): what a `restored`
    /// record counts as `conflicts`, and what keeps an undo's step current.
    pub fn refused(&self) -> bool {
        matches!(self, Conflict::Changed | Conflict::Skipped(Skip::Changed))
    }
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conflict::Changed => f.write_str("changed since the session recorded it"),
            Conflict::NotRead { snapshot, kind } => {
                let what = match kind {
                    EntryKind::NotTracked => "a file it saw but did not record (ignored, over the size limit or budget, unreadable, or holding a secret)",
                    EntryKind::Repository => "a nested repository, left out whole",
                    _ => "a directory it did not list (ignored, unreadable, or past its budget), so nothing in it is touched",
                };
                write!(f, "not read by the snapshot {snapshot}: {what}")
            }
            Conflict::ChangedUnread => f.write_str("not read by the snapshot the session last recorded, and changed since: nothing shows the session made what is there, so it is left alone, forced or not"),
            Conflict::OtherSession(id) => write!(
                f,
                "changed by session {id} while this session's instruction ran: that session's work, undone only by `hel undo {id}`"
            ),
            Conflict::Skipped(why) => write!(f, "{why}"),
        }
    }
}

/// Why a path named on the command line was not touched, when no path
/// written, removed or left alone at, under or above it says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Untouched {
    /// It already is what the snapshot holds (not a failure).
    AsTarget(Snap),
    /// Neither the snapshot nor the files hold it.
    Absent(Snap),
    /// The snapshot does not hold it, and the session did not make it
    /// after that record: it is not removed, forced or not.
    NotInTarget(Snap),
    /// The files differ from the snapshot there, and the session did not
    /// change it after that record: `--force` brings it back.
    NotTheSessions(Snap),
}

impl Untouched {
    /// Whether the path is as asked (nothing had to be done).
    pub fn as_asked(&self) -> bool {
        matches!(self, Untouched::AsTarget(_))
    }
}

impl std::fmt::Display for Untouched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Untouched::AsTarget(s) => write!(f, "already as it was {s}"),
            Untouched::Absent(s) => write!(f, "not in the files, nor {s}"),
            Untouched::NotInTarget(s) => write!(
                f,
                "not in the files {s}, and the session did not make it after: not removed, forced or not"
            ),
            Untouched::NotTheSessions(s) => write!(
                f,
                "changed since it was as {s}, not by this session after that: --force brings it back"
            ),
        }
    }
}

/// What a restore did.
#[derive(Debug)]
pub struct Outcome {
    /// The before-restore and restored records; `None` when the restore
    /// had nothing to write and wrote no record.
    pub before: Option<ObjectId>,
    pub restored: Option<ObjectId>,
    /// Paths named (`GoBack::paths`) that nothing written, removed or left
    /// alone speaks of, and why each was not touched.
    pub named: Vec<(Vec<u8>, Untouched)>,
    /// Paths written (created or overwritten) and removed.
    pub written: Vec<Vec<u8>>,
    pub removed: Vec<Vec<u8>>,
    /// Paths left alone, and why: those the plan left alone, then those
    /// the writes could not touch.
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
    #[error("refused: {0}")]
    OtherRunning(#[from] crate::attrib::OtherRunning),
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

/// What `flat` says of `path` when it does not know: the path itself or
/// the deepest of its directories that `flat` holds, when that is an
/// entry the snapshot did not read (kind 4, 5 or 6), with its kind.
///
/// `None` means the snapshot knows the path: it holds it as a file,
/// symlink or directory, or proves it absent (the deepest of its
/// directories that it holds is the root or a directory, both listed
/// whole, or a file or symlink, under which nothing can be). Only such a
/// proof lets a restore remove a path its target does not hold.
pub fn not_read<'p>(flat: &Flat, path: &'p [u8]) -> Option<(&'p [u8], EntryKind)> {
    let mut p = path;
    while !p.is_empty() {
        if let Some(item) = flat.get(p) {
            return history::opaque(item.kind).then_some((p, item.kind));
        }
        p = split(p).0;
    }
    None
}

/// Whether the files now (`now`) are, at `path`, what the session last
/// recorded (`recorded`) where that did not read it: both did not read it,
/// under the same entry (the same path, kind and size: a FIFO still a
/// FIFO, a file over the size limit still its size, an ignored directory
/// still ignored). What the target snapshot holds there may then be put
/// back: the path is the session's, and nobody has been seen to change it.
fn unread_since(recorded: &Flat, now: &Flat, path: &[u8]) -> bool {
    match (not_read(recorded, path), not_read(now, path)) {
        (Some((a, _)), Some((b, _))) => a == b && recorded.get(a) == now.get(b),
        _ => false,
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
/// now (`before`). A path that is, or is under, what one of the three
/// snapshots did not read is left alone, listed once under that entry's
/// path; so is one changed since the session recorded it (unless forced).
/// Conflicts come sorted by path, each path once.
fn plan(
    target: &Flat,
    expected: &Flat,
    owned: &history::Changed,
    others: &crate::attrib::Others,
    before: &crate::Snapshot,
    go: &GoBack,
) -> (Vec<Change>, Vec<(Vec<u8>, Conflict)>) {
    let mut changes = Vec::new();
    let mut conflicts = Vec::new();
    // What other sessions changed while this one's instructions ran is
    // theirs: named, never touched (whether this session's snapshots
    // also saw it change or not).
    for (path, session) in &others.paths {
        if selected(path, &go.paths) {
            conflicts.push((path.clone(), Conflict::OtherSession(session.clone())));
        }
    }
    let sides = [
        (target, go.target_snapshot()),
        (&before.flat, Snap::Now),
        (expected, Snap::Recorded),
    ];
    let mut listed: HashSet<Vec<u8>> = HashSet::new();
    for path in owned.known.union(&owned.unknown) {
        if !selected(path, &go.paths) || others.paths.contains_key(path) {
            continue;
        }
        let unread = sides
            .iter()
            .find_map(|(flat, snap)| not_read(flat, path).map(|(at, kind)| (at, kind, *snap)));
        if let Some((at, kind, snapshot)) = unread {
            // What the target holds is put back over what a later snapshot
            // did not read, when the files are still what that snapshot
            // recorded there ([`unread_since`]).
            if snapshot != go.target_snapshot() {
                if let Some(t) = target.get(path) {
                    let as_recorded = unread_since(expected, &before.flat, path);
                    if (!as_recorded || owned.users(path, before.flat.get(path))) && !go.force {
                        conflicts.push((path.clone(), Conflict::Changed));
                    } else {
                        changes.push(Change {
                            path: path.clone(),
                            now: before.flat.get(path).copied(),
                            stat: before.stats.get(path).copied(),
                            target: Some(*t),
                        });
                    }
                    continue;
                }
            }
            if listed.insert(at.to_vec()) {
                conflicts.push((at.to_vec(), Conflict::NotRead { snapshot, kind }));
            }
            continue;
        }
        // What the session's own newest change left at the path; the
        // recorded tree only for what no change of the walk gave.
        let x = match owned.last.get(path) {
            Some(last) => last.as_ref(),
            None => expected.get(path),
        };
        let t = target.get(path);
        let now = before.flat.get(path);
        if same(now, t) {
            continue; // already as wanted
        }
        // The session's own last change left it, or a directory above
        // it, not read (it only became ignored, say), and the files now
        // and what it last recorded read it: nothing shows the session
        // made what the target differs from, unless that change's
        // snapshot saw a size that is not the target's.
        if let Some(t) = t {
            if left_unread(owned, path) && !proves(x, t) {
                conflicts.push((path.clone(), Conflict::ChangedUnread));
                continue;
            }
        }
        if (!same(now, x) || owned.users(path, now)) && !go.force {
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
    if go.force && !go.paths.is_empty() {
        forced(
            target,
            expected,
            owned,
            others,
            before,
            go,
            &mut changes,
            &mut conflicts,
            &mut listed,
        );
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    // A path is left alone once, for the first reason found (another
    // session's change, a change since, an entry not read at it): the
    // counts the user reads are paths, not reasons.
    conflicts.sort_by(|a, b| a.0.cmp(&b.0));
    conflicts.dedup_by(|b, a| a.0 == b.0);
    (changes, conflicts)
}

/// The paths named with `--force` that the target holds and the session
/// did not change after the record (the user deleted or edited a file the
/// agent made, say): naming them is the user's decision for them, so what
/// the target holds there is written whatever is there now, with the
/// directories above it the target holds and the files lack. Still never
/// touched: another session's work, what any of the three snapshots did
/// not read, and a path the target does not hold (nothing is removed
/// that the session did not change).
#[allow(clippy::too_many_arguments)]
fn forced(
    target: &Flat,
    expected: &Flat,
    owned: &history::Changed,
    others: &crate::attrib::Others,
    before: &crate::Snapshot,
    go: &GoBack,
    changes: &mut Vec<Change>,
    conflicts: &mut Vec<(Vec<u8>, Conflict)>,
    listed: &mut HashSet<Vec<u8>>,
) {
    let mut planned: HashSet<Vec<u8>> = changes.iter().map(|c| c.path.clone()).collect();
    let sides = [
        (target, go.target_snapshot()),
        (&before.flat, Snap::Now),
        (expected, Snap::Recorded),
    ];
    let mut want: Vec<Vec<u8>> = Vec::new();
    for (path, t) in &target.items {
        if !selected(path, &go.paths)
            || owned.known.contains(path)
            || owned.unknown.contains(path)
            || others.paths.contains_key(path)
            || planned.contains(path)
            || same(before.flat.get(path), Some(t))
        {
            continue;
        }
        let unread = sides
            .iter()
            .find_map(|(flat, snap)| not_read(flat, path).map(|(at, kind)| (at, kind, *snap)));
        if let Some((at, kind, snapshot)) = unread {
            if listed.insert(at.to_vec()) {
                conflicts.push((at.to_vec(), Conflict::NotRead { snapshot, kind }));
            }
            continue;
        }
        // The directories above it that the target holds and the files
        // lack are made first.
        let mut up = split(path).0;
        while !up.is_empty() {
            if before.flat.get(up).is_none()
                && target.get(up).is_some_and(|i| i.kind == EntryKind::Dir)
                && !planned.contains(up)
                && !others.paths.contains_key(up)
            {
                want.push(up.to_vec());
            }
            up = split(up).0;
        }
        want.push(path.clone());
        planned.extend(want.drain(..).filter_map(|p| {
            let t = target.get(&p).copied();
            (!changes.iter().any(|c| c.path == p)).then(|| {
                changes.push(Change {
                    now: before.flat.get(&p).copied(),
                    stat: before.stats.get(&p).copied(),
                    target: t,
                    path: p.clone(),
                });
                p
            })
        }));
    }
}

/// Whether the session's own newest change of `path`, or of a directory
/// above it, left an entry that its snapshot did not read.
fn left_unread(owned: &history::Changed, path: &[u8]) -> bool {
    let mut p = path;
    while !p.is_empty() {
        if let Some(Some(item)) = owned.last.get(p) {
            if history::opaque(item.kind) {
                return true;
            }
        }
        p = split(p).0;
    }
    false
}

/// Whether `end`, what a snapshot taken when the session changed the
/// path holds there, proves the session changed it from `t`: it tried to
/// read a file and saw another size than the target's.
fn proves(end: Option<&Item>, t: &Item) -> bool {
    end.is_some_and(|e| e.kind == EntryKind::NotTracked && e.size != 0 && e.size != t.size)
}

/// Whether what the end snapshot (`expected`) held at `path` (the path
/// itself, or the entry above it that it did not read) is proven absent
/// from the files now (`before`): it went after the instruction's end,
/// whatever the times on disk say.
fn gone_since(before: &Flat, expected: &Flat, path: &[u8]) -> bool {
    let at = match not_read(expected, path) {
        Some((at, _)) => at,
        None if expected.get(path).is_some() => path,
        None => return false,
    };
    before.get(at).is_none() && not_read(before, at).is_none()
}

/// The changes of paths under what the before-restore walk did not read
/// (an ignored directory, say) name what is there now by an `lstat` taken
/// here, through directories opened without following links: the restore
/// replaces that, and only that (it checks the `lstat` again right before).
/// What is there is unknown content, so an item of kind 4 (or 6 for a
/// directory) stands for it. A path whose directory cannot be opened is
/// left as absent: the restore then finds out what is in the way.
fn look_under_unread(project: std::os::fd::BorrowedFd<'_>, before: &Flat, changes: &mut [Change]) {
    for c in changes.iter_mut() {
        if c.now.is_some() || c.stat.is_some() || not_read(before, &c.path).is_none() {
            continue;
        }
        let (dir, name) = split(&c.path);
        let Ok(fd) = hel_fs::at::open_dir_beneath(project, dir) else {
            continue;
        };
        if let Ok(Some(st)) = hel_fs::at::lstat(&fd, name) {
            let st = crate::FileStat::of(&st);
            c.now = Some(Item {
                kind: if st.is_dir() {
                    EntryKind::NotTrackedDir
                } else {
                    EntryKind::NotTracked
                },
                mode: 0,
                size: 0,
                id: ObjectId::ZERO,
            });
            c.stat = Some(st);
        }
    }
}

/// The changes of paths that the files now or what the session recorded
/// did not read, checked against the disk, since neither snapshot can
/// tell their content:
/// - one already as its target (the same bytes and bits, the same link, a
///   directory with the same bits) is dropped: a file that only became
///   ignored is not touched;
/// - one whose status last changed before `since` (ns: when the record
///   whose files come back was made, the instruction's end) is written:
///   it is as the instruction left it;
/// - one that changed at or after `since` (for an absent path: its
///   nearest directory's listing, or what the end snapshot held there
///   being gone; a directory's bits, which no time tells) is a
///   [`Conflict::Changed`] when the end snapshot proves the session
///   changed it (a size it recorded that is not the target's),
///   written when forced; otherwise a [`Conflict::ChangedUnread`], left
///   alone forced or not.
fn settle_unread(
    project: std::os::fd::BorrowedFd<'_>,
    before: &Flat,
    expected: &Flat,
    since: i64,
    force: bool,
    changes: &mut Vec<Change>,
    conflicts: &mut Vec<(Vec<u8>, Conflict)>,
) {
    let mut left = false;
    changes.retain(|c| {
        let Some(t) = c.target else { return true };
        if not_read(before, &c.path).is_none() && not_read(expected, &c.path).is_none() {
            return true;
        }
        let changed = match c.stat {
            Some(st) => {
                let as_target = match t.kind {
                    EntryKind::Dir => st.is_dir() && st.perm() == t.mode,
                    EntryKind::File => {
                        st.is_file()
                            && st.perm() == t.mode
                            && st.size == t.size
                            && content_is(project, &c.path, &st, &t)
                    }
                    EntryKind::Symlink => st.is_symlink() && content_is(project, &c.path, &st, &t),
                    _ => false,
                };
                if as_target {
                    return false;
                }
                (t.kind == EntryKind::Dir && st.is_dir()) || st.ctime_ns >= since
            }
            None => {
                gone_since(before, expected, &c.path) || listing_changed(project, &c.path, since)
            }
        };
        if !changed {
            return true;
        }
        // The end snapshot tried to read it and saw another size than the
        // target's: the session changed it.
        let proven = proves(expected.get(&c.path), &t);
        match (proven, force) {
            (true, true) => return true,
            (true, false) => conflicts.push((c.path.clone(), Conflict::Changed)),
            (false, _) => conflicts.push((c.path.clone(), Conflict::ChangedUnread)),
        }
        left = true;
        false
    });
    if left {
        conflicts.sort_by(|a, b| a.0.cmp(&b.0));
    }
}

/// Whether the file or link at `path`, whose `lstat` is `st`, holds what
/// `t` names: read without following a link or blocking, bounded by the
/// size `t` records.
fn content_is(
    project: std::os::fd::BorrowedFd<'_>,
    path: &[u8],
    st: &crate::FileStat,
    t: &Item,
) -> bool {
    let (dir, name) = split(path);
    let Ok(fd) = hel_fs::at::open_dir_beneath(project, dir) else {
        return false;
    };
    let bytes = if st.is_symlink() {
        match rustix::fs::readlinkat(&fd, name, Vec::new()) {
            Ok(target) => target.into_bytes(),
            Err(_) => return false,
        }
    } else {
        let Ok(Some((file, now))) = hel_fs::at::open_regular(&fd, name) else {
            return false;
        };
        if (now.st_dev, now.st_ino) != (st.dev, st.ino) {
            return false;
        }
        match hel_fs::read_head(std::fs::File::from(file), t.size.saturating_add(1)) {
            Ok(b) => b,
            Err(_) => return false,
        }
    };
    bytes.len() as u64 == t.size && hel_store::blob_id(&bytes) == t.id
}

/// Whether the listing of the nearest existing directory of `path` (which
/// is absent) changed at or after `since`: something in it was made or
/// removed then. A directory that cannot be looked at counts as changed.
fn listing_changed(project: std::os::fd::BorrowedFd<'_>, path: &[u8], since: i64) -> bool {
    let mut dir = split(path).0;
    loop {
        match hel_fs::at::open_dir_beneath(project, dir) {
            Ok(fd) => {
                return rustix::fs::fstat(&fd)
                    .map_or(true, |st| crate::FileStat::of(&st).mtime_ns >= since)
            }
            Err(rustix::io::Errno::NOENT) if !dir.is_empty() => dir = split(dir).0,
            Err(_) => return true,
        }
    }
}

/// What the session recorded as its own, as one map: its base tree (or
/// the files on disk, `disk`, while an instruction never ended) with what
/// each later restore wrote or removed laid over it, oldest first.
fn recorded_flat(store: &Store, rec: &Recorded, disk: &Flat) -> Result<Flat, UndoError> {
    let mut flat = match rec.base {
        Some(t) => Flat::read(store, &t)?,
        None => disk.clone(),
    };
    for (before, after) in rec.restores.iter().rev() {
        history::tree_diff(store, before, after, |path, _, now| match now {
            Some(e) => {
                flat.items.insert(path, Item::of(e));
            }
            None => {
                flat.items.remove(&path);
            }
        })?;
    }
    Ok(flat)
}

/// A restore planned and not yet written: the files as they were before
/// it are recorded (its `before-restore` record is committed), and what it
/// will write, remove and leave alone is known.
#[derive(Debug)]
pub struct Prepared {
    /// The before-restore record; `None` when there is nothing to write
    /// (and, for an undo, a path refused keeps its step current), so
    /// nothing was recorded and [`finish`] records nothing either.
    pub before: Option<ObjectId>,
    snapshot: crate::Snapshot,
    changes: Vec<Change>,
    /// Paths left alone, and why, sorted by path.
    pub conflicts: Vec<(Vec<u8>, Conflict)>,
    /// Named paths nothing else speaks of, and why they are not touched.
    pub named: Vec<(Vec<u8>, Untouched)>,
}

impl Prepared {
    /// Paths the restore will create or overwrite, in path order.
    pub fn writes(&self) -> impl Iterator<Item = &[u8]> {
        self.changes
            .iter()
            .filter(|c| c.target.is_some())
            .map(|c| c.path.as_slice())
    }

    /// Paths the restore will remove, in path order.
    pub fn removals(&self) -> impl Iterator<Item = &[u8]> {
        self.changes
            .iter()
            .filter(|c| c.target.is_none())
            .map(|c| c.path.as_slice())
    }
}

/// The first half of a restore of the project `ws` as `go` says, in the
/// session of `lease` whose last checkpoint `state` describes (it must
/// have one; [`Store::record_state`] gives a state for a process that has
/// not loaded the conversation): the files as they are now are recorded in
/// a `before-restore` record, then the plan is made against that record.
/// When a look at the files first shows nothing to write (see `before` of
/// [`Prepared`]), nothing is recorded. Nothing in the project is written. A caller that stops here (the user
/// said no) leaves only that record, which every reader of the history
/// passes over as it passes over a restore killed before it wrote: the
/// next undo targets the same instruction. `state` follows the record.
pub fn prepare(
    store: &Store,
    lease: &SessionLease,
    state: &mut hel_store::SessionState,
    ws: &mut Project,
    go: &GoBack,
) -> Result<Prepared, UndoError> {
    let head = state.head.ok_or(UndoError::NoCheckpoint)?;
    let prev_tree = history::newest_tree(store, &head)?;
    let prev_flat = match prev_tree {
        Some(t) => Some(ws.read_last(store, &t)?),
        None => None,
    };
    let prev = || {
        prev_tree
            .zip(prev_flat.as_ref())
            .map(|(tree, flat)| Prev { tree, flat })
    };
    // 0. A look at the files without storing them: a restore that would
    // write nothing records nothing (an undo does, unless a refused path
    // keeps its step current: its `restored` record is what moves the
    // next undo one instruction back). When the look cannot make a plan
    // (an instruction that never ended names the files now by a tree the
    // look did not store), the restore goes on as below.
    let look = ws.snapshot_with_stats(&mut crate::Scan, prev())?;
    if let Ok((changes, conflicts)) = make_plan(store, ws, go, &look) {
        if changes.is_empty() && (!go.undo || conflicts.iter().any(|(_, c)| c.refused())) {
            let target = Flat::read(store, &go.target)?;
            let named = untouched(&target, &look.flat, go, &changes, &conflicts);
            return Ok(Prepared {
                before: None,
                snapshot: look,
                changes,
                conflicts,
                named,
            });
        }
    }
    // 1. What is on disk now, recorded before anything is written.
    let mut txn = store.begin(lease, state)?;
    let before = ws.snapshot_with_stats(&mut txn, prev())?;
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
    let (changes, conflicts) = make_plan(store, ws, go, &before)?;
    let target = Flat::read(store, &go.target)?;
    let named = untouched(&target, &before.flat, go, &changes, &conflicts);
    Ok(Prepared {
        before: Some(before_id),
        snapshot: before,
        changes,
        conflicts,
        named,
    })
}

/// The named paths (`go.paths`) that no change or conflict is at, under
/// or above, and why each is not touched.
fn untouched(
    target: &Flat,
    now: &Flat,
    go: &GoBack,
    changes: &[Change],
    conflicts: &[(Vec<u8>, Conflict)],
) -> Vec<(Vec<u8>, Untouched)> {
    let snap = go.target_snapshot();
    go.paths
        .iter()
        .filter(|p| {
            let one = std::slice::from_ref(*p);
            !changes.iter().any(|c| selected(&c.path, one))
                && !conflicts
                    .iter()
                    .any(|(c, _)| selected(c, one) || selected(p, std::slice::from_ref(c)))
        })
        .map(|p| {
            let (t, n) = (target.get(p), now.get(p));
            let why = if t.is_none() && n.is_none() {
                Untouched::Absent(snap)
            } else if same(n, t) && same_under(target, now, p) {
                Untouched::AsTarget(snap)
            } else if t.is_none() {
                Untouched::NotInTarget(snap)
            } else {
                Untouched::NotTheSessions(snap)
            };
            (p.clone(), why)
        })
        .collect()
}

/// Whether `a` and `b` hold the same under the directory `dir` (nothing
/// for a file): the same paths, each the same ([`Item::same`]).
fn same_under(a: &Flat, b: &Flat, dir: &[u8]) -> bool {
    let one = [dir.to_vec()];
    let under = |f: &Flat| {
        f.items
            .iter()
            .filter(|(p, _)| p.as_slice() != dir && selected(p, &one))
            .map(|(p, i)| (p.clone(), *i))
            .collect::<Vec<_>>()
    };
    let (x, y) = (under(a), under(b));
    x.len() == y.len() && x.iter().zip(&y).all(|((p, i), (q, j))| p == q && i.same(j))
}

/// The plan of a restore against the files now (`before`): what to write
/// or remove, and what to leave alone, sorted by path.
#[allow(clippy::type_complexity)]
fn make_plan(
    store: &Store,
    ws: &Project,
    go: &GoBack,
    before: &crate::Snapshot,
) -> Result<(Vec<Change>, Vec<(Vec<u8>, Conflict)>), UndoError> {
    let target = Flat::read(store, &go.target)?;
    let expected = recorded_flat(store, &go.expected, &before.flat)?;
    let owned = history::changed_by_session(store, &go.history, &go.from, go.start, &before.tree)?;
    let own = store.checkpoint(&go.history)?.session_id;
    let others = crate::attrib::others_during(store, &own, &owned.spans)??;
    let (mut changes, mut conflicts) = plan(&target, &expected, &owned, &others, before, go);
    look_under_unread(ws.project_fd(), &before.flat, &mut changes);
    let from = store.checkpoint(&go.from)?;
    let since = match Record::of(&from) {
        // An instruction that never ended: what is on disk is its own.
        Record::Start => i64::MAX,
        _ => i64::try_from(from.created_at_ms)
            .unwrap_or(i64::MAX)
            .saturating_mul(1_000_000),
    };
    settle_unread(
        ws.project_fd(),
        &before.flat,
        &expected,
        since,
        go.force,
        &mut changes,
        &mut conflicts,
    );
    Ok((changes, conflicts))
}

/// The second half of a restore [`prepare`]d with the same arguments: the
/// writes, then a `restored` record of what the project now has. `state`
/// follows the record.
pub fn finish(
    store: &Store,
    lease: &SessionLease,
    state: &mut hel_store::SessionState,
    ws: &mut Project,
    go: &GoBack,
    prepared: Prepared,
) -> Result<Outcome, UndoError> {
    let Prepared {
        before: before_id,
        snapshot: before,
        changes,
        mut conflicts,
        named,
    } = prepared;
    let Some(before_id) = before_id else {
        // Nothing to write: nothing written, nothing recorded.
        return Ok(Outcome {
            before: None,
            restored: None,
            named,
            written: Vec::new(),
            removed: Vec::new(),
            conflicts,
            not_durable: None,
        });
    };
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
    let mut after = Flat::clone(&before.flat);
    let (mut written, mut removed) = (Vec::new(), Vec::new());
    for (path, item, _stat) in &applied.done {
        match item {
            Some(i) => {
                // Where the before-restore walk did not read, what was
                // written replaces the entry it made (a directory stays one
                // not read); under such an entry the tree stays as it was.
                match not_read(&before.flat, path) {
                    None => {
                        after.items.insert(path.clone(), *i);
                    }
                    Some((at, kind)) if at == path.as_slice() => {
                        let kept = match i.kind {
                            EntryKind::Dir => Item {
                                kind: if kind == EntryKind::NotTracked {
                                    EntryKind::NotTrackedDir
                                } else {
                                    kind
                                },
                                mode: 0,
                                size: 0,
                                id: ObjectId::ZERO,
                            },
                            _ => *i,
                        };
                        after.items.insert(path.clone(), kept);
                    }
                    Some(_) => {}
                }
                written.push(path.clone());
            }
            None => {
                after.items.remove(path);
                removed.push(path.clone());
            }
        }
    }
    for (path, why) in &applied.skipped {
        conflicts.push((path.clone(), Conflict::Skipped(*why)));
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
        .map(|p| hel_store::restored_path(p))
        .collect();
    shown.sort();
    shown.truncate(RESTORED_PATHS_MAX);
    let restored_id = txn
        .commit_record(
            Record::Restored,
            Workspace {
                tree,
                start: None,
                // What `before` could not record and the restore did not
                // replace (the tree cannot say which entries were ignored
                // rather than unreadable).
                not_tracked: before
                    .not_tracked
                    .iter()
                    .filter(|(p, _)| after.get(p).is_some_and(|i| history::opaque(i.kind)))
                    .count() as u64,
                restored: Some(Restored {
                    from: go.from,
                    start: go.start,
                    undo: go.undo,
                    count: (written.len() + removed.len()) as u64,
                    conflicts: conflicts.iter().filter(|(_, c)| c.refused()).count() as u64,
                    paths: shown,
                }),
            },
            if go.undo { "undo" } else { "restore" },
        )?
        .id;
    Ok(Outcome {
        before: Some(before_id),
        restored: Some(restored_id),
        named,
        written,
        removed,
        conflicts,
        not_durable,
    })
}

/// Restore the files of the project `ws` as `go` says, without asking:
/// [`prepare`] then [`finish`].
pub fn go_back(
    store: &Store,
    lease: &SessionLease,
    state: &mut hel_store::SessionState,
    ws: &mut Project,
    go: &GoBack,
) -> Result<Outcome, UndoError> {
    let prepared = prepare(store, lease, state, ws, go)?;
    finish(store, lease, state, ws, go, prepared)
}

/// The restore `hel undo` performs on the session whose head is `head`,
/// and the instruction it puts back.
pub fn undo_plan(
    store: &Store,
    head: &ObjectId,
    force: bool,
) -> Result<(GoBack, Instruction), UndoError> {
    let i = history::undo_target(store, head)?;
    let expected = history::last_recorded(store, head)?;
    let go = GoBack {
        target: i.start,
        expected,
        from: i.record,
        start: true,
        history: *head,
        undo: true,
        paths: Vec::new(),
        force,
    };
    Ok((go, i))
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
    let expected = history::last_recorded(store, head)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn item(kind: EntryKind, n: u8) -> Item {
        let has = kind.has_object();
        Item {
            kind,
            mode: if has && kind != EntryKind::Symlink {
                0o644
            } else {
                0
            },
            size: 0,
            id: if has {
                ObjectId::from_bytes([n; 32])
            } else {
                ObjectId::ZERO
            },
        }
    }

    fn flat(items: &[(&str, EntryKind, u8)]) -> Flat {
        Flat {
            items: items
                .iter()
                .map(|(p, k, n)| (p.as_bytes().to_vec(), item(*k, *n)))
                .collect(),
        }
    }

    use EntryKind::{Dir, File, NotTracked, NotTrackedDir, Repository, Symlink};

    #[test]
    fn only_a_directory_read_whole_or_a_file_proves_a_path_absent() {
        let f = flat(&[
            ("src", Dir, 1),
            ("src/a.rs", File, 2),
            ("build", NotTrackedDir, 0),
            ("big.bin", NotTracked, 0),
            ("vendor", Repository, 0),
            ("notes", File, 3),
            ("ln", Symlink, 4),
        ]);
        let nr = |p: &str| not_read(&f, p.as_bytes()).map(|(at, k)| (at.to_vec(), k));
        // Absent at the root or under a directory: proven, removable.
        assert_eq!(nr("new.txt"), None);
        assert_eq!(nr("src/new.rs"), None);
        assert_eq!(nr("src/deep/er/x"), None);
        // Under a file or a symlink nothing can be: proven too.
        assert_eq!(nr("notes/x"), None);
        assert_eq!(nr("ln/x"), None);
        // Held as what it is: known.
        assert_eq!(nr("src/a.rs"), None);
        assert_eq!(nr("src"), None);
        // Under (or itself) what the snapshot did not read: unknown.
        let at = |p: &str, k| Some((p.as_bytes().to_vec(), k));
        assert_eq!(nr("build"), at("build", NotTrackedDir));
        assert_eq!(nr("build/out.o"), at("build", NotTrackedDir));
        assert_eq!(nr("build/a/b/c"), at("build", NotTrackedDir));
        assert_eq!(nr("big.bin"), at("big.bin", NotTracked));
        assert_eq!(nr("big.bin/x"), at("big.bin", NotTracked));
        assert_eq!(nr("vendor/lib/x.c"), at("vendor", Repository));
    }

    fn snapshot(flat: Flat) -> crate::Snapshot {
        crate::Snapshot {
            tree: ObjectId::ZERO,
            flat: std::sync::Arc::new(flat),
            stats: Default::default(),
            not_tracked: Vec::new(),
            repositories: Vec::new(),
            files_read: 0,
            new_bytes: 0,
        }
    }

    fn undo_of(from: ObjectId) -> GoBack {
        GoBack {
            target: ObjectId::ZERO,
            expected: Recorded::default(),
            from,
            start: true,
            history: ObjectId::ZERO,
            undo: true,
            paths: Vec::new(),
            force: false,
        }
    }

    /// Every path that differs between `a` and `b`, as the session's own.
    fn owned(a: &Flat, b: &Flat) -> history::Changed {
        let mut out = history::Changed::default();
        for p in a.items.keys().chain(b.items.keys()) {
            if a.get(p) != b.get(p) {
                out.known.insert(p.clone());
            }
        }
        out
    }

    fn shown(changes: &[Change]) -> Vec<(String, bool)> {
        changes
            .iter()
            .map(|c| {
                (
                    String::from_utf8_lossy(&c.path).into_owned(),
                    c.target.is_some(),
                )
            })
            .collect()
    }

    #[test]
    fn force_brings_back_a_named_path_the_session_did_not_change_since() {
        // The checkpoint holds new.txt and sub/x; the user deleted both
        // and made mine.txt; an ignored dir holds what the checkpoint had.
        let target = flat(&[
            ("new.txt", File, 1),
            ("sub", Dir, 2),
            ("sub/x", File, 3),
            ("gone", Dir, 2),
            ("gone/y", File, 4),
        ]);
        let now = flat(&[("mine.txt", File, 5), ("gone", NotTrackedDir, 0)]);
        let cp = ObjectId::from_bytes([7; 32]);
        let mut go = undo_of(cp);
        go.undo = false;
        go.start = false;
        go.paths = ["new.txt", "sub/x", "mine.txt", "gone/y"]
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect();
        let none = crate::attrib::Others::default();
        let nothing = history::Changed::default();
        // Not forced: nothing is the session's, nothing is planned.
        let (changes, conflicts) = plan(
            &target,
            &target,
            &nothing,
            &none,
            &snapshot(now.clone()),
            &go,
        );
        assert!(changes.is_empty() && conflicts.is_empty(), "{changes:?}");
        // Forced: what the checkpoint holds comes back, with the directory
        // above; the user's file stays; the unread directory is not entered.
        go.force = true;
        let (changes, conflicts) = plan(&target, &target, &nothing, &none, &snapshot(now), &go);
        assert_eq!(
            shown(&changes),
            [
                ("new.txt".to_owned(), true),
                ("sub".to_owned(), true),
                ("sub/x".to_owned(), true),
            ]
        );
        assert_eq!(
            conflicts,
            [(
                b"gone".to_vec(),
                Conflict::NotRead {
                    snapshot: Snap::Now,
                    kind: NotTrackedDir
                }
            )]
        );
    }

    #[test]
    fn a_plan_removes_only_what_the_target_proves_absent() {
        // The instruction's start: .gitignore ignored secret.env and
        // build/, vendor is a repository, notes a file.
        let start = flat(&[
            (".gitignore", File, 1),
            ("secret.env", NotTracked, 0),
            ("build", NotTrackedDir, 0),
            ("vendor", Repository, 0),
            ("notes", File, 2),
            ("src", Dir, 3),
        ]);
        // Its end: .gitignore rewritten, so all of them were read; notes
        // became a directory; a new file in src and a new directory.
        let end = flat(&[
            (".gitignore", File, 9),
            ("secret.env", File, 4),
            ("build", Dir, 5),
            ("build/out.o", File, 6),
            ("build/sub", Dir, 5),
            ("build/sub/x", File, 6),
            ("vendor", Dir, 7),
            ("vendor/x.c", File, 8),
            ("notes", Dir, 5),
            ("notes/a", File, 10),
            ("src", Dir, 3),
            ("src/new.rs", File, 11),
            ("cache", Dir, 5),
            ("cache/x", File, 12),
        ]);
        // Now: as the instruction left it, but cache/ cannot be read.
        let mut now = end.clone();
        now.items.remove(&b"cache/x"[..]);
        now.items.insert(b"cache".to_vec(), item(NotTrackedDir, 0));
        let cp = ObjectId::from_bytes([7; 32]);
        let go = undo_of(cp);
        let none = crate::attrib::Others::default();
        let (changes, conflicts) = plan(
            &start,
            &end,
            &owned(&start, &end),
            &none,
            &snapshot(now),
            &go,
        );
        assert_eq!(
            shown(&changes),
            [
                (".gitignore".to_owned(), true),
                ("notes".to_owned(), true),
                ("notes/a".to_owned(), false),
                ("src/new.rs".to_owned(), false),
            ]
        );
        let start_of = |kind| Conflict::NotRead {
            snapshot: Snap::InstructionStart,
            kind,
        };
        let got: Vec<(String, Conflict)> = conflicts
            .iter()
            .map(|(p, c)| (String::from_utf8_lossy(p).into_owned(), c.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("build".to_owned(), start_of(NotTrackedDir)),
                (
                    "cache".to_owned(),
                    Conflict::NotRead {
                        snapshot: Snap::Now,
                        kind: NotTrackedDir
                    }
                ),
                ("secret.env".to_owned(), start_of(NotTracked)),
                ("vendor".to_owned(), start_of(Repository)),
            ]
        );
        assert!(!got.iter().any(|(_, c)| c.refused()));
        assert_eq!(
            got[0].1.to_string(),
            "not read by the snapshot at the instruction's start: a directory it did not list (ignored, unreadable, or past its budget), so nothing in it is touched"
        );
        assert_eq!(
            got[2].1.to_string(),
            "not read by the snapshot at the instruction's start: a file it saw but did not record (ignored, over the size limit or budget, unreadable, or holding a secret)"
        );
        // A restore names its checkpoint; forced or not, nothing unread is
        // touched.
        let mut restore = undo_of(cp);
        restore.undo = false;
        restore.start = false;
        restore.force = true;
        let (changes2, conflicts2) = plan(
            &start,
            &end,
            &owned(&start, &end),
            &none,
            &snapshot(end.clone()),
            &restore,
        );
        // cache/ is readable now: the session's new directory goes too.
        assert_eq!(changes2.len(), 6, "{:?}", shown(&changes2));
        assert!(changes2.iter().all(|c| not_read(&start, &c.path).is_none()));
        assert_eq!(
            conflicts2[0].1.to_string(),
            format!(
                "not read by the snapshot at checkpoint {}: a directory it did not list (ignored, unreadable, or past its budget), so nothing in it is touched",
                &cp.to_hex()[..12]
            )
        );
    }

    /// What the start holds is put back where the instruction left what a
    /// snapshot does not read (a FIFO, a file over the size limit, an
    /// ignored file or directory), when the files are still what its end
    /// recorded there; otherwise it is a conflict that `--force` writes.
    #[test]
    fn the_start_is_put_back_over_what_the_end_did_not_read() {
        let mut big = item(NotTracked, 0);
        big.size = 70 << 20;
        let start = flat(&[
            ("pipe", File, 1),
            ("big", File, 2),
            ("secret", File, 3),
            ("build", Dir, 4),
            ("build/out", File, 5),
            ("absent-then", Dir, 4),
        ]);
        let mut end = flat(&[
            ("pipe", NotTracked, 0),
            ("secret", NotTracked, 0),
            ("build", NotTrackedDir, 0),
            ("absent-then", Dir, 4),
            ("absent-then/fifo", NotTracked, 0),
        ]);
        end.items.insert(b"big".to_vec(), big);
        let go = undo_of(ObjectId::ZERO);
        let (changes, conflicts) = plan(
            &start,
            &end,
            &owned(&start, &end),
            &crate::attrib::Others::default(),
            &snapshot(end.clone()),
            &go,
        );
        assert_eq!(
            shown(&changes),
            [
                ("big".to_owned(), true),
                ("build".to_owned(), true),
                ("build/out".to_owned(), true),
                ("pipe".to_owned(), true),
                ("secret".to_owned(), true),
            ]
        );
        // What replaces an entry not read carries that entry; what is
        // under one is looked at when the restore prepares.
        assert_eq!(changes[0].now, Some(big));
        assert_eq!(changes[2].now, None);
        // A path the start proves absent is not removed: nothing proves
        // what is there now is the session's.
        assert_eq!(
            conflicts,
            [(
                b"absent-then/fifo".to_vec(),
                Conflict::NotRead {
                    snapshot: Snap::Now,
                    kind: NotTracked
                }
            )]
        );
        // The big file grew, build/ became readable, the pipe a file:
        // changed since, so left alone unless forced.
        let mut now = end.clone();
        now.items.get_mut(&b"big"[..]).unwrap().size += 1;
        now.items.insert(b"build".to_vec(), item(Dir, 4));
        now.items.insert(b"build/out".to_vec(), item(File, 9));
        now.items.insert(b"pipe".to_vec(), item(File, 9));
        let (changes, conflicts) = plan(
            &start,
            &end,
            &owned(&start, &end),
            &crate::attrib::Others::default(),
            &snapshot(now.clone()),
            &go,
        );
        assert_eq!(shown(&changes), [("secret".to_owned(), true)]);
        let changed: Vec<&[u8]> = conflicts
            .iter()
            .filter(|(_, c)| *c == Conflict::Changed)
            .map(|(p, _)| p.as_slice())
            .collect();
        assert_eq!(changed, [&b"big"[..], b"build", b"build/out", b"pipe"]);
        let forced = GoBack { force: true, ..go };
        let (changes, _) = plan(
            &start,
            &end,
            &owned(&start, &end),
            &crate::attrib::Others::default(),
            &snapshot(now),
            &forced,
        );
        assert_eq!(changes.len(), 5, "{:?}", shown(&changes));
    }

    #[test]
    fn what_the_session_recorded_decides_a_conflict_and_force_overrides_it() {
        let start = flat(&[("a", File, 1), ("b", File, 1)]);
        let end = flat(&[("a", File, 2), ("b", File, 2)]);
        let mut now = end.clone();
        now.items.insert(b"b".to_vec(), item(File, 3)); // the user's edit
        let go = undo_of(ObjectId::ZERO);
        let none = crate::attrib::Others::default();
        let (changes, conflicts) = plan(
            &start,
            &end,
            &owned(&start, &end),
            &none,
            &snapshot(now.clone()),
            &go,
        );
        assert_eq!(shown(&changes), [("a".to_owned(), true)]);
        assert_eq!(conflicts, [(b"b".to_vec(), Conflict::Changed)]);
        assert!(conflicts[0].1.refused());
        let forced = GoBack { force: true, ..go };
        let (changes, conflicts) = plan(
            &start,
            &end,
            &owned(&start, &end),
            &none,
            &snapshot(now),
            &forced,
        );
        assert_eq!(changes.len(), 2);
        assert!(conflicts.is_empty());
    }
}
