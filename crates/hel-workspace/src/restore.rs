//! Restore: apply a plan of file changes to the project, under the rules
//! that keep a user's own work safe.
//!
//! A plan ([`Change`]s) says, per path, what the path was when the
//! before-restore snapshot looked (its item and its `lstat`) and what it
//! must become. [`apply`] touches a path only when it is still exactly
//! what that snapshot saw, never through a symbolic link, never inside
//! `.git`, `.hel` or `.jj`, and never removes a directory that still holds
//! something. Whatever it leaves alone is listed with the reason.
//!
//! How it writes, so that a crash never tears a file:
//!
//! 1. Every new file and symlink is written to a temporary name in
//!    `.hel/workspace/tmp/` (`restore-<pid>-<n>`, created exclusively, its
//!    permission bits set with `fchmod` so the umask cannot change them);
//!    then one `syncfs` makes them all durable. A store error (a missing or
//!    damaged blob, a size that does not match) stops the restore here,
//!    before anything in the project changed.
//! 2. Removals, deepest first (a directory after its contents).
//! 3. Creations and updates, shallowest first (a directory before its
//!    contents): directories are made, temporaries renamed into place (a
//!    path that must be absent with `RENAME_NOREPLACE`, so nothing created
//!    meanwhile is overwritten).
//! 4. Directory permission bits, deepest first (last, so a directory that
//!    will be read-only can still be filled).
//! 5. One `syncfs` per filesystem touched makes the renames and removals
//!    durable.
//!
//! A SIGKILL (or power loss) at any point leaves every file with either its
//! old or its new content, whole; a path that changes between a directory
//! and something else may be absent in between. Temporaries are left only
//! in `.hel/workspace/tmp/`, and the next restore removes them (those of
//! processes that no longer exist). The one exception: when a rename
//! across filesystems fails with `EXDEV` (a mount point inside the
//! project), the new content is copied to a temporary
//! `.hel-restore-<pid>-<n>` in the target's own directory, fsynced and
//! renamed; a crash in that window leaves that temporary there.
//!
//! Two restores of one project at once are not coordinated here (the
//! caller holds the session lease); each only removes temporaries of
//! processes that no longer exist.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use hel_store::tree::{bad_name, check_entry, Entry, EntryError, EntryKind};
use hel_store::{Cap, Store};
use rustix::fs::{AtFlags, Mode, RenameFlags};
use rustix::io::Errno;

use crate::flat::{split, Item, PATH_MAX};
use crate::stat::FileStat;

/// The name prefix of a restore's temporaries in `.hel/workspace/tmp/`.
const TMP_PREFIX: &str = "restore-";
/// The name prefix of the temporaries written beside their target when a
/// rename across filesystems is refused.
const BESIDE_PREFIX: &str = ".hel-restore-";
/// Tries at a fresh temporary name before giving up (a name can be taken
/// only by a crashed process that had the same pid).
const NAME_TRIES: u32 = 64;

/// One path of a restore plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Relative to the project, `/`-separated.
    pub path: Vec<u8>,
    /// What the path is now, as the before-restore snapshot saw it: `None`
    /// = absent.
    pub now: Option<Item>,
    /// Its `lstat` at that snapshot (`None` when absent): re-checked right
    /// before the path is touched.
    pub stat: Option<FileStat>,
    /// What it must become: `None` = remove it.
    pub target: Option<Item>,
}

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Paths written or removed, in path order: what each is now (`None` =
    /// removed) and, for what was written, its `lstat` right after (for the
    /// stat cache; `None` when the path no longer showed what was written,
    /// so the caller must read it again). A path whose old entry was
    /// removed but whose new one could not be made is listed here as
    /// removed and in `skipped` with the reason.
    pub done: Vec<(Vec<u8>, Option<Item>, Option<FileStat>)>,
    /// Paths left alone (or only partly changed, see `done`), in path
    /// order, and why.
    pub skipped: Vec<(Vec<u8>, Skip)>,
}

/// Why a path was left alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Not a path a snapshot may hold (empty, too long, `.`/`..`, a
    /// `.git`, `.hel` or `.jj` component, ...).
    BadPath(&'static str),
    /// The plan contradicts itself (an item without a stat, a stat of
    /// another kind than the item, an invalid target, a path listed twice).
    BadPlan(&'static str),
    /// The target's mode, size or id do not fit its kind.
    BadEntry(EntryError),
    /// A not-tracked file or directory or a nested repository on either
    /// side: hel has not their content and never writes or removes them.
    NotRestorable(EntryKind),
    /// A directory on the way is a symbolic link.
    ThroughLink,
    /// A directory on the way does not exist (and the plan did not make
    /// it).
    MissingParent,
    /// Something on the way is not a directory.
    ParentNotDir,
    /// The path is no longer what the before-restore snapshot saw.
    Changed,
    /// A directory to remove still holds something.
    NotEmpty,
    /// A system call failed.
    Failed { op: &'static str, errno: Errno },
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::BadPath(why) => write!(f, "not a path hel restores: {why}"),
            Skip::BadPlan(why) => write!(f, "the restore plan is inconsistent: {why}"),
            Skip::BadEntry(why) => write!(f, "the restore plan is inconsistent: {why}"),
            Skip::NotRestorable(EntryKind::Repository) => {
                f.write_str("a nested repository, which hel leaves alone")
            }
            Skip::NotRestorable(EntryKind::NotTrackedDir) => f.write_str(
                "a directory hel did not read (ignored, unreadable, or past the snapshot's budget)",
            ),
            Skip::NotRestorable(_) => f.write_str(
                "a file hel did not record (ignored, over the size limit or budget, unreadable, or holding a secret)",
            ),
            Skip::ThroughLink => f.write_str("goes through a symbolic link"),
            Skip::MissingParent => f.write_str("its directory does not exist"),
            Skip::ParentNotDir => f.write_str("a component of its directory is not a directory"),
            Skip::Changed => f.write_str("changed during the restore"),
            Skip::NotEmpty => f.write_str(
                "the directory holds files hel does not track (or left alone), so it stays",
            ),
            Skip::Failed { op, errno } => write!(f, "could not {op}: {errno}"),
        }
    }
}

/// Why a restore stopped.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// `.hel/workspace/` could not be opened or created. Nothing changed.
    #[error(transparent)]
    Workspace(hel_store::Error),
    /// A blob could not be read. Nothing in the project changed.
    #[error("{}: {source}", path.display())]
    Blob {
        path: PathBuf,
        #[source]
        source: hel_store::Error,
    },
    /// A blob's length is not the size its item records. Nothing in the
    /// project changed.
    #[error("{}: the snapshot records {expected} bytes, its blob holds {found}; the store may be damaged: run `hel fsck`", path.display())]
    SizeMismatch {
        path: PathBuf,
        expected: u64,
        found: u64,
    },
    /// A symbolic link's target holds a NUL byte. Nothing in the project
    /// changed.
    #[error("{}: the symbolic link's target holds a NUL byte; the store may be damaged: run `hel fsck`", path.display())]
    BadTarget { path: PathBuf },
    /// A temporary could not be made, written or synced. Nothing in the
    /// project changed.
    #[error("{}: could not {op}: {source}", path.display())]
    Temp {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// Everything in `applied` was done, but could not be made durable: a
    /// crash now may lose some of it (never tear a file).
    #[error("{}: could not make the restore durable ({} paths changed): {source}", path.display(), applied.done.len())]
    NotDurable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
        applied: Box<Applied>,
    },
}

/// A path of the project as a `PathBuf` (for messages).
fn show(path: &[u8]) -> PathBuf {
    PathBuf::from(OsString::from_vec(path.to_vec()))
}

/// Apply `changes` to the project open at `project`, reading new contents
/// from `store` (whose `.hel/` is inside that project: temporaries are
/// written there, so the renames stay on one filesystem). Every new
/// content is staged before anything changes, so the disk must hold the
/// new files once more for the duration.
///
/// Promises, per path: it is written or removed only if its `lstat` right
/// before is the change's `stat` (absent when that is `None`; for a
/// directory, only device, inode and mode are compared, since removing or
/// adding its entries changes its times); only through real directories
/// opened one component at a time from `project` without following links;
/// never with a `.git`, `.hel` or `.jj` component (any case); a file gets
/// exactly the blob's bytes and exactly the item's permission bits; a
/// symlink is created as a link (never followed); a directory is removed
/// only when empty. `NotTracked`, `Repository` and `NotTrackedDir` items
/// are never written, nor removed but to put a file, link or directory in
/// their place (a special file is replaced by a rename or an unlink, never
/// opened). Paths already as their target (same content, kind and mode)
/// are not touched and not listed. Every temporary it made is gone when it
/// returns, and stale ones of crashed restores are removed first.
///
/// An `Err` other than [`RestoreError::NotDurable`] means nothing in the
/// project was changed. Hostile input (any plan, any store) never panics.
pub fn apply(
    project: BorrowedFd<'_>,
    store: &Store,
    changes: &[Change],
) -> Result<Applied, RestoreError> {
    let (ws, ws_path) = hel_store::workspace::dir(store).map_err(RestoreError::Workspace)?;
    let tmp_path = ws_path.join("tmp");
    let tmp = open_tmp(&ws).map_err(|source| RestoreError::Temp {
        path: tmp_path.clone(),
        op: "open the directory of temporary files",
        source,
    })?;
    remove_stale(&tmp);

    let order = Order::of(changes);
    let mut ops = plan(changes, &order);
    let mut temps = Temps {
        dir: &tmp,
        live: Vec::new(),
    };
    let mut syncs = Syncs::default();
    let mut run = Run {
        project,
        changes,
        ops: &mut ops,
        syncs: &mut syncs,
    };
    // 1. Temporaries: all of them written before anything else changes.
    stage(store, &mut run, &order.creation, &mut temps, &tmp_path)?;
    // 2. Removals, deepest first.
    run.remove(&order.removal);
    // 3. Creations and updates, shallowest first.
    run.create(&order.creation, &mut temps);
    // 4. Directory permission bits, deepest first.
    run.set_dir_modes(&order.removal);
    let applied = outcome(changes, &order.by_path, &ops);
    drop(temps);
    // 5. Durable: one syncfs per filesystem touched.
    make_durable(&syncs, applied)
}

/// The orders a restore visits its changes in (indices into the plan).
struct Order {
    /// By path (and plan order for a path listed twice).
    by_path: Vec<usize>,
    /// Shallowest first, then by path: the order creations happen in.
    creation: Vec<usize>,
    /// Deepest first, then by path: removals and directory bits.
    removal: Vec<usize>,
}

impl Order {
    fn of(changes: &[Change]) -> Order {
        let mut by_path: Vec<usize> = (0..changes.len()).collect();
        by_path.sort_by(|&a, &b| changes[a].path.cmp(&changes[b].path).then(a.cmp(&b)));
        let mut creation = by_path.clone();
        creation.sort_by_key(|&i| (depth(&changes[i].path), &changes[i].path));
        let mut removal = by_path.clone();
        removal.sort_by_key(|&i| (std::cmp::Reverse(depth(&changes[i].path)), &changes[i].path));
        Order {
            by_path,
            creation,
            removal,
        }
    }
}

/// Each change's [`Op`]; a second change of one path is refused.
fn plan(changes: &[Change], order: &Order) -> Vec<Op> {
    let mut ops: Vec<Op> = changes.iter().map(Op::plan).collect();
    for w in order.by_path.windows(2) {
        if changes[w[0]].path == changes[w[1]].path {
            ops[w[1]].skip = Some(Skip::BadPlan("the path is listed twice"));
        }
    }
    ops
}

/// Step 1: every new file's and symlink's content read from `store`,
/// checked and written to a temporary, then synced. A store error stops
/// the restore before anything in the project changed.
fn stage(
    store: &Store,
    run: &mut Run<'_, '_>,
    creation: &[usize],
    temps: &mut Temps<'_>,
    tmp_path: &std::path::Path,
) -> Result<(), RestoreError> {
    for &i in creation {
        let op = &mut run.ops[i];
        let Some(target) = op.create else { continue };
        if op.skip.is_some() || target.kind == EntryKind::Dir {
            continue;
        }
        let path = &run.changes[i].path;
        let bytes =
            hel_store::workspace::read_blob(store, &target.id, Cap::FILE).map_err(|source| {
                RestoreError::Blob {
                    path: show(path),
                    source,
                }
            })?;
        if bytes.len() as u64 != target.size {
            return Err(RestoreError::SizeMismatch {
                path: show(path),
                expected: target.size,
                found: bytes.len() as u64,
            });
        }
        if target.kind == EntryKind::Symlink && bytes.contains(&0) {
            return Err(RestoreError::BadTarget { path: show(path) });
        }
        let made = temps
            .write(&target, &bytes)
            .map_err(|(name, source)| RestoreError::Temp {
                path: tmp_path.join(show(&name)),
                op: "write a temporary file",
                source,
            })?;
        op.temp = Some(made);
    }
    if !temps.live.is_empty() {
        rustix::fs::syncfs(temps.dir).map_err(|e| RestoreError::Temp {
            path: tmp_path.to_path_buf(),
            op: "sync the temporary files",
            source: e.into(),
        })?;
    }
    Ok(())
}

/// Steps 2 to 4: the changes to the project, each path checked right
/// before it is touched; what fails is recorded in its [`Op`].
struct Run<'a, 'c> {
    project: BorrowedFd<'a>,
    changes: &'c [Change],
    ops: &'c mut [Op],
    syncs: &'c mut Syncs,
}

impl Run<'_, '_> {
    /// Step 2: the old entries that must go, deepest first.
    fn remove(&mut self, removal: &[usize]) {
        let changes = self.changes;
        for &i in removal {
            if self.ops[i].skip.is_some() || !self.ops[i].remove {
                continue;
            }
            match self.remove_one(&changes[i]) {
                Ok(()) => self.ops[i].removed = true,
                Err(s) => self.ops[i].skip = Some(s),
            }
        }
    }

    fn remove_one(&mut self, change: &Change) -> Result<(), Skip> {
        let (dir, name) = split(&change.path);
        let parent = open_dir(self.project, dir)?;
        unchanged(&parent, name, change.stat.as_ref())?;
        let is_dir = change.stat.is_some_and(|s| s.is_dir());
        let flags = if is_dir {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        match rustix::fs::unlinkat(&parent, name, flags) {
            Ok(()) => {}
            Err(Errno::NOTEMPTY | Errno::EXIST) if is_dir => return Err(Skip::NotEmpty),
            Err(errno) => {
                let op = if is_dir {
                    "remove the directory"
                } else {
                    "remove it"
                };
                return Err(Skip::Failed { op, errno });
            }
        }
        self.syncs.note(&parent, dir);
        Ok(())
    }

    /// Step 3: directories made and temporaries renamed into place,
    /// shallowest first.
    fn create(&mut self, creation: &[usize], temps: &mut Temps<'_>) {
        let changes = self.changes;
        for &i in creation {
            let op = &self.ops[i];
            let Some(target) = op.create else { continue };
            if op.skip.is_some() || op.dir_mode {
                continue;
            }
            let change = &changes[i];
            // What must be there: nothing when this restore removed it.
            let expect = if op.remove {
                None
            } else {
                change.stat.as_ref()
            };
            // Renamed into place or not, no later step needs it.
            let temp = self.ops[i].temp.take();
            let made = if target.kind == EntryKind::Dir {
                self.make_dir(&change.path, expect)
            } else {
                self.move_into_place(&change.path, &target, expect, temp, temps)
            };
            let op = &mut self.ops[i];
            match made {
                Ok(Made::Dir(st)) => op.made_dir = Some(st),
                Ok(Made::Entry(st)) => op.done = Some((Some(target), st)),
                Err(s) => op.skip = Some(s),
            }
        }
    }

    fn make_dir(&mut self, path: &[u8], expect: Option<&FileStat>) -> Result<Made, Skip> {
        let (dir, name) = split(path);
        let parent = open_dir(self.project, dir)?;
        unchanged(&parent, name, expect)?;
        // Owner-only until step 4 sets its bits, so that it can be filled
        // whatever they are.
        match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(0o700)) {
            Ok(()) => {}
            Err(Errno::EXIST) => return Err(Skip::Changed),
            Err(errno) => {
                return Err(Skip::Failed {
                    op: "create the directory",
                    errno,
                })
            }
        }
        self.syncs.note(&parent, dir);
        let st = lstat(&parent, name)?;
        Ok(Made::Dir(st.ok_or(Skip::Changed)?))
    }

    /// Rename the temporary `temp` to `path`.
    fn move_into_place(
        &mut self,
        path: &[u8],
        target: &Item,
        expect: Option<&FileStat>,
        temp: Option<Temp>,
        temps: &mut Temps<'_>,
    ) -> Result<Made, Skip> {
        let (dir, name) = split(path);
        let parent = open_dir(self.project, dir)?;
        unchanged(&parent, name, expect)?;
        let Some(Temp {
            name: temp,
            dev,
            ino,
        }) = temp
        else {
            return Err(Skip::BadPlan("no content was prepared"));
        };
        if hel_fs::failpoint::hit("restore-rename") {
            die();
        }
        match rename(temps.dir, &temp, &parent, name, expect.is_none()) {
            Ok(()) => temps.gone(&temp),
            Err(Errno::EXIST) => return Err(Skip::Changed),
            Err(Errno::XDEV) => {
                beside(temps.dir, &temp, target, &parent, name, expect.is_none())?;
            }
            Err(errno) => {
                return Err(Skip::Failed {
                    op: "move the new content into place",
                    errno,
                })
            }
        }
        self.syncs.note(&parent, dir);
        // The stat cache may trust only what shows the inode written.
        let st = lstat(&parent, name).ok().flatten();
        Ok(Made::Entry(st.filter(|s| (s.dev, s.ino) == (dev, ino))))
    }

    /// Step 4: the permission bits of the directories made or kept,
    /// deepest first.
    fn set_dir_modes(&mut self, removal: &[usize]) {
        let changes = self.changes;
        for &i in removal {
            let op = &self.ops[i];
            let Some(target) = op.create else { continue };
            if op.skip.is_some() || target.kind != EntryKind::Dir {
                continue;
            }
            let expect = match (op.made_dir, changes[i].stat) {
                (Some(made), _) => made,
                (None, Some(st)) if op.dir_mode => st,
                _ => continue,
            };
            let set = self.set_dir_mode(&changes[i].path, &target, &expect);
            let op = &mut self.ops[i];
            match set {
                Ok(st) => op.done = Some((Some(target), Some(st))),
                Err(s) => op.skip = Some(s),
            }
        }
    }

    fn set_dir_mode(
        &mut self,
        path: &[u8],
        target: &Item,
        expect: &FileStat,
    ) -> Result<FileStat, Skip> {
        let (dir, name) = split(path);
        let parent = open_dir(self.project, dir)?;
        let fd = match hel_fs::at::open_dir(&parent, name) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => return Err(Skip::Changed),
            Err(errno) => {
                return Err(Skip::Failed {
                    op: "open the directory",
                    errno,
                })
            }
        };
        let fail = |op| move |errno| Skip::Failed { op, errno };
        let st = FileStat::of(&rustix::fs::fstat(&fd).map_err(fail("stat the directory"))?);
        if !same_dir(&st, expect) {
            return Err(Skip::Changed);
        }
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(u32::from(target.mode)))
            .map_err(fail("set its permission bits"))?;
        self.syncs.note(&parent, dir);
        Ok(FileStat::of(
            &rustix::fs::fstat(&fd).map_err(fail("stat the directory"))?,
        ))
    }
}

/// What the restore did and left alone, in path order.
fn outcome(changes: &[Change], by_path: &[usize], ops: &[Op]) -> Applied {
    let mut applied = Applied::default();
    for &i in by_path {
        let op = &ops[i];
        let path = &changes[i].path;
        match (&op.done, op.removed) {
            (Some((item, st)), _) => applied.done.push((path.clone(), *item, *st)),
            (None, true) => applied.done.push((path.clone(), None, None)),
            (None, false) => {}
        }
        if let Some(s) = op.skip {
            applied.skipped.push((path.clone(), s));
        }
    }
    applied
}

/// Step 5: one syncfs per filesystem touched.
fn make_durable(syncs: &Syncs, applied: Applied) -> Result<Applied, RestoreError> {
    for (fd, path) in syncs.fds() {
        if let Err(e) = rustix::fs::syncfs(fd) {
            return Err(RestoreError::NotDurable {
                path: show(if path.is_empty() { b"." } else { path }),
                source: e.into(),
                applied: Box::new(applied),
            });
        }
    }
    Ok(applied)
}

/// What one change needs, and what became of it.
#[derive(Default)]
struct Op {
    /// The old entry must go first (to a directory or from one, or for
    /// good).
    remove: bool,
    /// What to make.
    create: Option<Item>,
    /// A directory that stays one but changes permission bits.
    dir_mode: bool,
    temp: Option<Temp>,
    removed: bool,
    /// A directory this restore made, as it stood right after.
    made_dir: Option<FileStat>,
    done: Option<(Option<Item>, Option<FileStat>)>,
    skip: Option<Skip>,
}

enum Made {
    Dir(FileStat),
    Entry(Option<FileStat>),
}

impl Op {
    /// What `c` needs, or why it is refused (checks that need nothing but
    /// the plan).
    fn plan(c: &Change) -> Op {
        let refuse = |skip| Op {
            skip: Some(skip),
            ..Op::default()
        };
        if let Some(why) = bad_path(&c.path) {
            return refuse(Skip::BadPath(why));
        }
        // What a snapshot did not read is replaced by known content,
        // never written as a target nor removed for good.
        let unread = match (c.now, c.target) {
            (_, Some(t)) if !t.kind.has_object() => Some(t.kind),
            (Some(n), None) if !n.kind.has_object() => Some(n.kind),
            _ => None,
        };
        if let Some(kind) = unread {
            return refuse(Skip::NotRestorable(kind));
        }
        match (&c.now, &c.stat) {
            (None, None) => {}
            (Some(now), Some(st)) => {
                let fits = match now.kind {
                    EntryKind::File => st.is_file(),
                    EntryKind::Symlink => st.is_symlink(),
                    EntryKind::Dir => st.is_dir(),
                    // A FIFO, socket, device, or a file or link not read.
                    EntryKind::NotTracked => !st.is_dir(),
                    EntryKind::Repository | EntryKind::NotTrackedDir => st.is_dir(),
                };
                if !fits {
                    return refuse(Skip::BadPlan("the recorded stat is of another kind"));
                }
            }
            _ => {
                return refuse(Skip::BadPlan(
                    "an item without its stat, or a stat without item",
                ))
            }
        }
        if let Some(t) = &c.target {
            let (_, name) = split(&c.path);
            let entry = Entry {
                name: name.to_vec(),
                kind: t.kind,
                mode: t.mode,
                size: t.size,
                id: t.id,
            };
            if let Err(why) = check_entry(&entry) {
                return refuse(Skip::BadEntry(why));
            }
        }
        match (c.now, c.target) {
            (None, None) => Op::default(),
            (Some(_), None) => Op {
                remove: true,
                ..Op::default()
            },
            (None, Some(t)) => Op {
                create: Some(t),
                ..Op::default()
            },
            (Some(n), Some(t)) if n.same(&t) => Op::default(),
            (Some(n), Some(t)) if is_dir_kind(n.kind) && t.kind == EntryKind::Dir => Op {
                create: Some(t),
                dir_mode: true,
                ..Op::default()
            },
            (Some(n), Some(t)) => Op {
                // A rename replaces a file, symlink or special file in one
                // step (never opening it); a directory must go first, or be
                // made after.
                remove: is_dir_kind(n.kind) || t.kind == EntryKind::Dir,
                create: Some(t),
                ..Op::default()
            },
        }
    }
}

/// A directory, listed or not (a not-tracked directory, a nested
/// repository).
fn is_dir_kind(kind: EntryKind) -> bool {
    matches!(
        kind,
        EntryKind::Dir | EntryKind::NotTrackedDir | EntryKind::Repository
    )
}

/// Why `path` is not one a restore may touch, or `None`.
fn bad_path(path: &[u8]) -> Option<&'static str> {
    if path.is_empty() {
        return Some("an empty path");
    }
    if path.len() > PATH_MAX {
        return Some("a path over 4095 bytes");
    }
    path.split(|&c| c == b'/').find_map(bad_name)
}

fn depth(path: &[u8]) -> usize {
    path.iter().filter(|&&c| c == b'/').count()
}

/// Open the directory `dir` (relative, `/`-separated, maybe empty) beneath
/// `project`, one component at a time, never following a link.
fn open_dir(project: BorrowedFd<'_>, dir: &[u8]) -> Result<OwnedFd, Skip> {
    hel_fs::at::open_dir_beneath(project, dir).map_err(|errno| match errno {
        Errno::NOENT => Skip::MissingParent,
        Errno::LOOP => Skip::ThroughLink,
        Errno::NOTDIR => Skip::ParentNotDir,
        errno => Skip::Failed {
            op: "open its directory",
            errno,
        },
    })
}

/// `lstat` of `name` in `dir`; `None` when absent.
fn lstat(dir: &OwnedFd, name: &[u8]) -> Result<Option<FileStat>, Skip> {
    match hel_fs::at::lstat(dir, name) {
        Ok(st) => Ok(st.map(|st| FileStat::of(&st))),
        Err(errno) => Err(Skip::Failed { op: "lstat", errno }),
    }
}

fn same_dir(a: &FileStat, b: &FileStat) -> bool {
    (a.dev, a.ino, a.mode) == (b.dev, b.ino, b.mode)
}

/// Is `name` in `dir` still what `expect` says (absent for `None`)?
fn unchanged(dir: &OwnedFd, name: &[u8], expect: Option<&FileStat>) -> Result<(), Skip> {
    let same = match (lstat(dir, name)?, expect) {
        (None, None) => true,
        // A directory's times move with its entries, which are paths of
        // their own: its identity and mode are what count.
        (Some(a), Some(b)) if a.is_dir() && b.is_dir() => same_dir(&a, b),
        (Some(a), Some(b)) => a == *b,
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(Skip::Changed)
    }
}

/// Rename `from` in `from_dir` to `to` in `to_dir`; when `absent`, refuse
/// (EEXIST) to replace anything that appeared since it was checked.
fn rename(
    from_dir: &OwnedFd,
    from: &[u8],
    to_dir: &OwnedFd,
    to: &[u8],
    absent: bool,
) -> Result<(), Errno> {
    if absent {
        match rustix::fs::renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
            // A filesystem without RENAME_NOREPLACE: the lstat just before
            // is the check left.
            Err(Errno::INVAL | Errno::NOSYS) => {}
            r => return r,
        }
    }
    rustix::fs::renameat(from_dir, from, to_dir, to)
}

/// The rename from `.hel/workspace/tmp/` crossed filesystems: copy the
/// temporary `name` to a temporary beside the target, fsync it and rename
/// that. The copy in `tmp` is left for [`Temps`] to remove.
fn beside(
    tmp: &OwnedFd,
    name: &[u8],
    target: &Item,
    parent: &OwnedFd,
    to: &[u8],
    absent: bool,
) -> Result<(), Skip> {
    let fail = |op| move |errno| Skip::Failed { op, errno };
    let mut made = None;
    let result = (|| {
        let (new, fd) = if target.kind == EntryKind::Symlink {
            let link = rustix::fs::readlinkat(tmp, name, Vec::new())
                .map_err(fail("read the temporary link"))?;
            let new = fresh(BESIDE_PREFIX, |n| {
                rustix::fs::symlinkat(link.as_c_str(), parent, n)
            })
            .map_err(fail("create a temporary link beside it"))?;
            made = Some(new.clone());
            (new, None)
        } else {
            let src = hel_fs::at::open_read(tmp, name).map_err(fail("open the temporary file"))?;
            let mut out = None;
            let new = fresh(BESIDE_PREFIX, |n| {
                out = Some(hel_fs::at::create_new(parent, n, 0o600)?);
                Ok(())
            })
            .map_err(fail("create a temporary file beside it"))?;
            made = Some(new.clone());
            let Some(out) = out else {
                return Err(Skip::BadPlan("no temporary was made"));
            };
            let mut reader = std::fs::File::from(src).take(target.size);
            let mut writer = std::fs::File::from(out);
            let copied = std::io::copy(&mut reader, &mut writer).map_err(io_fail("copy it"))?;
            if copied != target.size {
                return Err(Skip::Failed {
                    op: "copy it",
                    errno: Errno::IO,
                });
            }
            rustix::fs::fchmod(&writer, Mode::from_raw_mode(u32::from(target.mode)))
                .map_err(fail("set its permission bits"))?;
            (new, Some(writer))
        };
        // The rename below must not be durable before the content is.
        match fd {
            Some(f) => rustix::fs::fsync(&f).map_err(fail("sync it"))?,
            None => rustix::fs::fsync(parent).map_err(fail("sync its directory"))?,
        }
        match rename(parent, &new, parent, to, absent) {
            Ok(()) => {
                made = None;
                Ok(())
            }
            Err(Errno::EXIST) => Err(Skip::Changed),
            Err(errno) => Err(Skip::Failed {
                op: "move the new content into place",
                errno,
            }),
        }
    })();
    if let Some(n) = made {
        let _ = rustix::fs::unlinkat(parent, &n, AtFlags::empty());
    }
    result
}

fn io_fail(op: &'static str) -> impl Fn(std::io::Error) -> Skip {
    move |e| Skip::Failed {
        op,
        errno: Errno::from_io_error(&e).unwrap_or(Errno::IO),
    }
}

/// Call `make` with fresh names `<prefix><pid>-<n>` until one does not
/// exist yet; the name it made.
fn fresh(prefix: &str, mut make: impl FnMut(&[u8]) -> Result<(), Errno>) -> Result<Vec<u8>, Errno> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let pid = rustix::process::getpid().as_raw_nonzero().get();
    let mut last = Errno::EXIST;
    for _ in 0..NAME_TRIES {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}{pid}-{n}").into_bytes();
        match make(&name) {
            Ok(()) => return Ok(name),
            Err(Errno::EXIST) => last = Errno::EXIST,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// A temporary holding a path's new content.
struct Temp {
    name: Vec<u8>,
    dev: u64,
    ino: u64,
}

/// The temporaries in `.hel/workspace/tmp/` not yet renamed into place:
/// removed when this is dropped, whatever happened.
struct Temps<'a> {
    dir: &'a OwnedFd,
    live: Vec<Vec<u8>>,
}

impl Temps<'_> {
    /// Write `bytes` as `item` (a file with its mode, or a symlink) to a
    /// fresh temporary. On error, the name tried (for the message).
    fn write(&mut self, item: &Item, bytes: &[u8]) -> Result<Temp, (Vec<u8>, std::io::Error)> {
        let dir = self.dir;
        let name = if item.kind == EntryKind::Symlink {
            fresh(TMP_PREFIX, |n| rustix::fs::symlinkat(bytes, dir, n))
                .map_err(|e| (TMP_PREFIX.as_bytes().to_vec(), e.into()))?
        } else {
            let mut fd = None;
            let name = fresh(TMP_PREFIX, |n| {
                fd = Some(hel_fs::at::create_new(dir, n, 0o600)?);
                Ok(())
            })
            .map_err(|e| (TMP_PREFIX.as_bytes().to_vec(), e.into()))?;
            self.live.push(name.clone());
            let Some(fd) = fd else {
                return Err((name, std::io::Error::other("no file was opened")));
            };
            let mut f = std::fs::File::from(fd);
            let written = f.write_all(bytes).and_then(|()| {
                // Exactly the recorded bits, whatever the umask.
                rustix::fs::fchmod(&f, Mode::from_raw_mode(u32::from(item.mode)))
                    .map_err(Into::into)
            });
            if let Err(e) = written {
                return Err((name, e));
            }
            name
        };
        if item.kind == EntryKind::Symlink {
            self.live.push(name.clone());
        }
        let st = rustix::fs::statat(dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| (name.clone(), e.into()))?;
        let st = FileStat::of(&st);
        Ok(Temp {
            name,
            dev: st.dev,
            ino: st.ino,
        })
    }

    /// `name` was renamed into place: nothing to remove.
    fn gone(&mut self, name: &[u8]) {
        self.live.retain(|n| n != name);
    }
}

impl Drop for Temps<'_> {
    fn drop(&mut self) {
        for name in &self.live {
            let _ = rustix::fs::unlinkat(self.dir, name.as_slice(), AtFlags::empty());
        }
    }
}

/// `.hel/workspace/tmp/`, created when absent, opened without following a
/// link.
fn open_tmp(ws: &OwnedFd) -> std::io::Result<OwnedFd> {
    match rustix::fs::mkdirat(ws, "tmp", Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(hel_fs::at::open_dir(ws, "tmp")?)
}

/// Remove the temporaries crashed restores left in `tmp`: regular files
/// and symlinks (removed as links, never followed) named
/// `restore-<pid>-<n>` whose process no longer exists. Anything else,
/// and anything that cannot be read, is left alone.
fn remove_stale(tmp: &OwnedFd) {
    let me = rustix::process::getpid();
    let Ok(mut dir) = rustix::fs::Dir::read_from(tmp) else {
        return;
    };
    let mut stale = Vec::new();
    while let Some(Ok(entry)) = dir.read() {
        let name = entry.file_name().to_bytes();
        let Some(rest) = name.strip_prefix(TMP_PREFIX.as_bytes()) else {
            continue;
        };
        let Some(pid) = std::str::from_utf8(rest)
            .ok()
            .and_then(|r| r.split_once('-'))
            .and_then(|(p, _)| p.parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
        else {
            continue;
        };
        // A live process (or one that is not ours to signal) may be
        // restoring right now.
        if pid == me || rustix::process::test_kill_process(pid) != Err(Errno::SRCH) {
            continue;
        }
        stale.push(name.to_vec());
    }
    for name in stale {
        let kind = lstat(tmp, &name).ok().flatten();
        if kind.is_some_and(|st| st.is_file() || st.is_symlink()) {
            let _ = rustix::fs::unlinkat(tmp, name.as_slice(), AtFlags::empty());
        }
    }
}

/// One directory per filesystem touched (and its path, for messages), to
/// `syncfs` at the end.
#[derive(Default)]
struct Syncs {
    by_dev: HashMap<u64, (OwnedFd, Vec<u8>)>,
    /// Directories whose device could not be told (synced each).
    other: Vec<(OwnedFd, Vec<u8>)>,
}

impl Syncs {
    fn note(&mut self, fd: &OwnedFd, path: &[u8]) {
        let dev = rustix::fs::fstat(fd).map(|st| st.st_dev).ok();
        if dev.is_some_and(|d| self.by_dev.contains_key(&d)) {
            return;
        }
        let Ok(fd) = fd.try_clone() else { return };
        match dev {
            Some(d) => {
                self.by_dev.insert(d, (fd, path.to_vec()));
            }
            None => self.other.push((fd, path.to_vec())),
        }
    }

    fn fds(&self) -> impl Iterator<Item = (BorrowedFd<'_>, &[u8])> {
        self.by_dev
            .values()
            .chain(&self.other)
            .map(|(fd, path)| (fd.as_fd(), path.as_slice()))
    }
}

/// The crash tests' failpoint fired: die as a SIGKILL would.
fn die() -> ! {
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::path::Path;

    use hel_store::{CommitInput, ObjectId, SessionState};

    /// A project in a temporary directory with its store.
    struct Fx {
        dir: tempfile::TempDir,
        store: Store,
        project: fs::File,
    }

    impl Fx {
        fn new() -> Fx {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            let project = fs::File::open(dir.path()).unwrap();
            Fx {
                dir,
                store,
                project,
            }
        }

        fn p(&self, rel: &str) -> PathBuf {
            self.dir.path().join(rel)
        }

        /// Store `blobs` (one commit of a new session).
        fn put(&self, blobs: &[&[u8]]) -> Vec<ObjectId> {
            let lease = self.store.new_session().unwrap();
            let mut state = SessionState::default();
            let mut txn = self.store.begin(&lease, &mut state).unwrap();
            let ids = blobs.iter().map(|b| txn.put_blob(b).unwrap()).collect();
            txn.commit(
                CommitInput::new(
                    hel_store::Record::Answer,
                    &[],
                    &[],
                    "/project",
                    hel_store::SessionRecord::of(hel_store::RequestConfig::bare("test", "m")),
                )
                .why("test"),
            )
            .unwrap();
            ids
        }

        fn file(&self, bytes: &[u8], mode: u16) -> Item {
            Item {
                kind: EntryKind::File,
                mode,
                size: bytes.len() as u64,
                id: self.put(&[bytes])[0],
            }
        }

        fn link(&self, target: &[u8]) -> Item {
            Item {
                kind: EntryKind::Symlink,
                mode: 0,
                size: target.len() as u64,
                id: self.put(&[target])[0],
            }
        }

        /// What `rel` is on disk now, as a snapshot would record it.
        fn now(&self, rel: &str) -> (Option<Item>, Option<FileStat>) {
            let st = match FileStat::at(&self.project, rel.as_bytes()) {
                Ok(st) => st,
                Err(e)
                    if matches!(Errno::from_io_error(&e), Some(Errno::NOENT | Errno::NOTDIR)) =>
                {
                    return (None, None)
                }
                Err(e) => panic!("{rel}: {e}"),
            };
            let item = if st.is_file() {
                let bytes = fs::read(self.p(rel)).unwrap();
                Item {
                    kind: EntryKind::File,
                    mode: st.perm(),
                    size: bytes.len() as u64,
                    id: hel_store::blob_id(&bytes),
                }
            } else if st.is_symlink() {
                let t = fs::read_link(self.p(rel))
                    .unwrap()
                    .into_os_string()
                    .into_vec();
                Item {
                    kind: EntryKind::Symlink,
                    mode: 0,
                    size: t.len() as u64,
                    id: hel_store::blob_id(&t),
                }
            } else {
                dir(st.perm())
            };
            (Some(item), Some(st))
        }

        /// The change from what `rel` is now to `target`.
        fn change(&self, rel: &str, target: Option<Item>) -> Change {
            let (now, stat) = self.now(rel);
            Change {
                path: rel.as_bytes().to_vec(),
                now,
                stat,
                target,
            }
        }

        fn apply(&self, changes: &[Change]) -> Result<Applied, RestoreError> {
            apply(self.project.as_fd(), &self.store, changes)
        }

        /// Names in `.hel/workspace/tmp/`.
        fn temps(&self) -> Vec<String> {
            let mut v: Vec<String> = fs::read_dir(self.p(".hel/workspace/tmp"))
                .map(|d| {
                    d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v
        }

        fn write(&self, rel: &str, bytes: &[u8], mode: u32) {
            fs::write(self.p(rel), bytes).unwrap();
            fs::set_permissions(self.p(rel), fs::Permissions::from_mode(mode)).unwrap();
        }
    }

    fn dir(mode: u16) -> Item {
        Item {
            kind: EntryKind::Dir,
            mode,
            size: 0,
            // A directory's tree is never read by a restore.
            id: ObjectId::from_bytes([1; 32]),
        }
    }

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
    }

    fn skipped(a: &Applied) -> Vec<(&str, Skip)> {
        a.skipped
            .iter()
            .map(|(p, s)| (std::str::from_utf8(p).unwrap(), *s))
            .collect()
    }

    fn done_paths(a: &Applied) -> Vec<(&str, Option<EntryKind>)> {
        a.done
            .iter()
            .map(|(p, i, _)| (std::str::from_utf8(p).unwrap(), i.map(|i| i.kind)))
            .collect()
    }

    #[test]
    fn creates_files_links_and_directories_exactly() {
        let fx = Fx::new();
        let script = b"#!/bin/sh\necho hi\n";
        let changes = vec![
            // Modes a umask of 022 or 077 would cut: fchmod sets them.
            fx.change("bin", Some(dir(0o777))),
            fx.change("bin/run", Some(fx.file(script, 0o777))),
            fx.change("bin/deep", Some(dir(0o500))),
            fx.change("bin/deep/f", Some(fx.file(b"", 0o604))),
            fx.change("notes.txt", Some(fx.file(b"notes\n", 0o640))),
            // Dangling and pointing outside: created as is, never followed.
            fx.change("ln", Some(fx.link(b"../outside/target"))),
        ];
        let a = fx.apply(&changes).unwrap();
        assert!(a.skipped.is_empty(), "{:?}", a.skipped);
        assert_eq!(
            done_paths(&a),
            [
                ("bin", Some(EntryKind::Dir)),
                ("bin/deep", Some(EntryKind::Dir)),
                ("bin/deep/f", Some(EntryKind::File)),
                ("bin/run", Some(EntryKind::File)),
                ("ln", Some(EntryKind::Symlink)),
                ("notes.txt", Some(EntryKind::File)),
            ]
        );
        assert_eq!(fs::read(fx.p("bin/run")).unwrap(), script);
        assert_eq!(mode(&fx.p("bin/run")), 0o777);
        assert_eq!(mode(&fx.p("bin")), 0o777);
        assert_eq!(mode(&fx.p("bin/deep")), 0o500);
        assert_eq!(fs::read(fx.p("bin/deep/f")).unwrap(), b"");
        assert_eq!(mode(&fx.p("bin/deep/f")), 0o604);
        assert_eq!(fs::read(fx.p("notes.txt")).unwrap(), b"notes\n");
        assert_eq!(mode(&fx.p("notes.txt")), 0o640);
        assert!(fs::symlink_metadata(fx.p("ln")).unwrap().is_symlink());
        assert_eq!(
            fs::read_link(fx.p("ln")).unwrap(),
            Path::new("../outside/target")
        );
        // The stats handed back are the paths' as they are now.
        for (path, item, st) in &a.done {
            let rel = std::str::from_utf8(path).unwrap();
            assert_eq!(*st, Some(FileStat::at(&fx.project, path).unwrap()), "{rel}");
            assert_eq!(
                fx.now(rel).0.map(|i| (i.kind, i.mode, i.size)),
                item.map(|i| (i.kind, i.mode, i.size))
            );
        }
        assert_eq!(fx.temps(), Vec::<String>::new());
    }

    #[test]
    fn updates_replaces_and_removes() {
        let fx = Fx::new();
        fx.write("a.txt", b"old a\n", 0o644);
        fx.write("gone.txt", b"gone\n", 0o644);
        symlink("x", fx.p("ln")).unwrap();
        fs::create_dir(fx.p("emptydir")).unwrap();
        fx.write("f2l", b"was a file\n", 0o644);
        symlink("was-a-link", fx.p("l2f")).unwrap();
        fx.write("mode.sh", b"same\n", 0o644);
        fs::create_dir(fx.p("d")).unwrap();
        fs::set_permissions(fx.p("d"), fs::Permissions::from_mode(0o755)).unwrap();
        fx.write("same.txt", b"same\n", 0o644);
        let same = fx.now("same.txt").0;
        let changes = vec![
            fx.change("a.txt", Some(fx.file(b"new a, longer\n", 0o600))),
            fx.change("gone.txt", None),
            fx.change("ln", None),
            fx.change("emptydir", None),
            fx.change("f2l", Some(fx.link(b"target"))),
            fx.change("l2f", Some(fx.file(b"now a file\n", 0o644))),
            fx.change("mode.sh", Some(fx.file(b"same\n", 0o755))),
            fx.change("d", Some(dir(0o700))),
            fx.change("same.txt", same),
        ];
        let a = fx.apply(&changes).unwrap();
        assert!(a.skipped.is_empty(), "{:?}", a.skipped);
        assert_eq!(
            done_paths(&a),
            [
                ("a.txt", Some(EntryKind::File)),
                ("d", Some(EntryKind::Dir)),
                ("emptydir", None),
                ("f2l", Some(EntryKind::Symlink)),
                ("gone.txt", None),
                ("l2f", Some(EntryKind::File)),
                ("ln", None),
                ("mode.sh", Some(EntryKind::File)),
            ]
        );
        assert_eq!(fs::read(fx.p("a.txt")).unwrap(), b"new a, longer\n");
        assert_eq!(mode(&fx.p("a.txt")), 0o600);
        for gone in ["gone.txt", "ln", "emptydir"] {
            assert!(fs::symlink_metadata(fx.p(gone)).is_err(), "{gone}");
        }
        assert_eq!(fs::read_link(fx.p("f2l")).unwrap(), Path::new("target"));
        assert!(fs::symlink_metadata(fx.p("l2f")).unwrap().is_file());
        assert_eq!(fs::read(fx.p("l2f")).unwrap(), b"now a file\n");
        assert_eq!(mode(&fx.p("mode.sh")), 0o755);
        assert_eq!(mode(&fx.p("d")), 0o700);
        // Already as its target: not touched.
        assert_eq!(fx.now("same.txt").1, changes[8].stat);
        let (_, _, st) = &a.done[1];
        assert_eq!(*st, Some(FileStat::at(&fx.project, b"d").unwrap()));
    }

    #[test]
    fn file_to_directory_and_back() {
        let fx = Fx::new();
        fx.write("a", b"a file\n", 0o644);
        fs::create_dir(fx.p("b")).unwrap();
        fx.write("b/y", b"in b\n", 0o644);
        let changes = vec![
            fx.change("a", Some(dir(0o755))),
            fx.change("a/x", Some(fx.file(b"in a\n", 0o644))),
            fx.change("b", Some(fx.file(b"b is a file\n", 0o644))),
            fx.change("b/y", None),
        ];
        let a = fx.apply(&changes).unwrap();
        assert!(a.skipped.is_empty(), "{:?}", a.skipped);
        assert_eq!(
            done_paths(&a),
            [
                ("a", Some(EntryKind::Dir)),
                ("a/x", Some(EntryKind::File)),
                ("b", Some(EntryKind::File)),
                ("b/y", None),
            ]
        );
        assert_eq!(mode(&fx.p("a")), 0o755);
        assert_eq!(fs::read(fx.p("a/x")).unwrap(), b"in a\n");
        assert_eq!(fs::read(fx.p("b")).unwrap(), b"b is a file\n");
    }

    #[test]
    fn a_directory_that_holds_other_files_stays() {
        let fx = Fx::new();
        fs::create_dir(fx.p("d")).unwrap();
        fx.write("d/tracked", b"t\n", 0o644);
        fx.write("d/untracked", b"mine\n", 0o644);
        fs::create_dir(fx.p("e")).unwrap();
        fx.write("e/own", b"mine too\n", 0o644);
        let changes = vec![
            fx.change("d/tracked", None),
            fx.change("d", None),
            fx.change("e", Some(fx.file(b"e as a file\n", 0o644))),
        ];
        let a = fx.apply(&changes).unwrap();
        assert_eq!(done_paths(&a), [("d/tracked", None)]);
        assert_eq!(skipped(&a), [("d", Skip::NotEmpty), ("e", Skip::NotEmpty)]);
        assert!(Skip::NotEmpty
            .to_string()
            .contains("holds files hel does not track"));
        assert_eq!(fs::read(fx.p("d/untracked")).unwrap(), b"mine\n");
        assert_eq!(fs::read(fx.p("e/own")).unwrap(), b"mine too\n");
        assert!(fx.p("e").is_dir());
        assert_eq!(fx.temps(), Vec::<String>::new());
    }

    #[test]
    fn never_through_a_symbolic_link() {
        let fx = Fx::new();
        let out = tempfile::tempdir().unwrap();
        fs::write(out.path().join("victim"), b"outside\n").unwrap();
        symlink(out.path(), fx.p("ln")).unwrap();
        fs::create_dir(fx.p("real")).unwrap();
        fs::create_dir(fx.p("real2")).unwrap();
        symlink("../real2", fx.p("real/ln2")).unwrap();
        fx.write("real2/kept", b"kept\n", 0o644);
        // What a caller that followed the links would have seen.
        let victim = fx.change("ln/victim", None);
        assert!(victim.now.is_some());
        let kept = fx.change("real/ln2/kept", None);
        let changes = vec![
            fx.change("ln/new", Some(fx.file(b"x", 0o644))),
            victim,
            fx.change("real/ln2/f", Some(fx.file(b"y", 0o644))),
            kept,
        ];
        let a = fx.apply(&changes).unwrap();
        assert!(a.done.is_empty(), "{:?}", a.done);
        assert_eq!(
            skipped(&a),
            [
                ("ln/new", Skip::ThroughLink),
                ("ln/victim", Skip::ThroughLink),
                ("real/ln2/f", Skip::ThroughLink),
                ("real/ln2/kept", Skip::ThroughLink),
            ]
        );
        assert_eq!(
            Skip::ThroughLink.to_string(),
            "goes through a symbolic link"
        );
        assert!(!out.path().join("new").exists());
        assert_eq!(fs::read(out.path().join("victim")).unwrap(), b"outside\n");
        assert!(!fx.p("real2/f").exists());
        assert_eq!(fs::read(fx.p("real2/kept")).unwrap(), b"kept\n");
        assert_eq!(fx.temps(), Vec::<String>::new());
    }

    #[test]
    fn missing_or_blocked_parents() {
        let fx = Fx::new();
        fx.write("plain", b"a file\n", 0o644);
        let mut gone = fx.change("gone", Some(dir(0o755)));
        fx.write("gone", b"appeared\n", 0o644);
        gone.stat = None;
        let changes = vec![
            fx.change("nope/f", Some(fx.file(b"1", 0o644))),
            fx.change("plain/f", Some(fx.file(b"2", 0o644))),
            // A directory the plan makes, but cannot: its contents follow.
            gone,
            fx.change("gone/x", Some(fx.file(b"3", 0o644))),
        ];
        let a = fx.apply(&changes).unwrap();
        assert!(a.done.is_empty(), "{:?}", a.done);
        assert_eq!(
            skipped(&a),
            [
                ("gone", Skip::Changed),
                ("gone/x", Skip::ParentNotDir),
                ("nope/f", Skip::MissingParent),
                ("plain/f", Skip::ParentNotDir),
            ]
        );
        assert!(!fx.p("nope").exists());
        assert_eq!(fs::read(fx.p("gone")).unwrap(), b"appeared\n");
        assert_eq!(fx.temps(), Vec::<String>::new());
    }

    #[test]
    fn refuses_version_control_and_bad_paths() {
        let fx = Fx::new();
        fs::create_dir(fx.p(".git")).unwrap();
        fs::create_dir(fx.p("src")).unwrap();
        fs::create_dir(fx.p("src/.HEL")).unwrap();
        let f = fx.file(b"evil", 0o644);
        let long = vec![b'a'; PATH_MAX + 1];
        let name = fx.dir.path().file_name().unwrap().to_str().unwrap();
        let escape = format!("../{name}-escape");
        let paths: Vec<&[u8]> = vec![
            b".git/config",
            b"src/.HEL/x",
            b".jj",
            b".Git",
            b"a//b",
            escape.as_bytes(),
            b"/abs",
            b"",
            b"./a",
            b"a/..",
            b"a\0b",
            &long,
        ];
        let changes: Vec<Change> = paths
            .iter()
            .map(|p| Change {
                path: p.to_vec(),
                now: None,
                stat: None,
                target: Some(f),
            })
            .collect();
        let a = fx.apply(&changes).unwrap();
        assert!(a.done.is_empty());
        assert_eq!(a.skipped.len(), paths.len());
        assert!(a.skipped.iter().all(|(_, s)| matches!(s, Skip::BadPath(_))));
        assert!(!fx.p(".git/config").exists());
        assert!(!fx.p("src/.HEL/x").exists());
        assert!(!fx.p(".jj").exists());
        assert!(!fx.p(".Git").exists());
        assert!(!fx.p(&escape).exists());
        // Nor is `.hel` removed when named.
        let hel = fx.change(".hel", None);
        let a = fx.apply(&[hel]).unwrap();
        assert!(matches!(a.skipped[..], [(_, Skip::BadPath(_))]));
        assert!(fx.p(".hel").is_dir());
    }

    #[test]
    fn paths_changed_since_the_snapshot_are_left_alone() {
        let fx = Fx::new();
        fx.write("edited", b"before\n", 0o644);
        fx.write("touched", b"before\n", 0o644);
        fx.write("to-remove", b"before\n", 0o644);
        fx.write("deleted", b"before\n", 0o644);
        let new = fx.file(b"restored\n", 0o644);
        let changes = vec![
            fx.change("edited", Some(new)),
            fx.change("touched", Some(new)),
            fx.change("appeared", Some(new)),
            fx.change("to-remove", None),
            fx.change("deleted", Some(new)),
        ];
        // The user works on after the snapshot.
        fx.write("edited", b"the user's edit\n", 0o644);
        let t = fs::File::options()
            .write(true)
            .open(fx.p("touched"))
            .unwrap();
        t.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
        fx.write("appeared", b"new user file\n", 0o644);
        fx.write("to-remove", b"edited too\n", 0o644);
        fs::remove_file(fx.p("deleted")).unwrap();
        let a = fx.apply(&changes).unwrap();
        assert!(a.done.is_empty(), "{:?}", a.done);
        assert_eq!(
            skipped(&a),
            [
                ("appeared", Skip::Changed),
                ("deleted", Skip::Changed),
                ("edited", Skip::Changed),
                ("to-remove", Skip::Changed),
                ("touched", Skip::Changed),
            ]
        );
        assert_eq!(Skip::Changed.to_string(), "changed during the restore");
        assert_eq!(fs::read(fx.p("edited")).unwrap(), b"the user's edit\n");
        assert_eq!(fs::read(fx.p("touched")).unwrap(), b"before\n");
        assert_eq!(fs::read(fx.p("appeared")).unwrap(), b"new user file\n");
        assert_eq!(fs::read(fx.p("to-remove")).unwrap(), b"edited too\n");
        assert!(!fx.p("deleted").exists());
        assert_eq!(fx.temps(), Vec::<String>::new());
    }

    #[test]
    fn not_tracked_files_and_repositories_are_never_written_nor_removed() {
        let fx = Fx::new();
        fx.write("big.bin", b"too big to record\n", 0o644);
        fs::create_dir(fx.p("vendor")).unwrap();
        let (_, st) = fx.now("big.bin");
        let not_tracked = Item {
            kind: EntryKind::NotTracked,
            mode: 0,
            size: 18,
            id: ObjectId::ZERO,
        };
        let repo = Item {
            kind: EntryKind::Repository,
            mode: 0,
            size: 0,
            id: ObjectId::ZERO,
        };
        let (_, vst) = fx.now("vendor");
        let changes = vec![
            Change {
                path: b"big.bin".to_vec(),
                now: Some(not_tracked),
                stat: st,
                target: Some(fx.file(b"small\n", 0o644)),
            },
            Change {
                path: b"other.bin".to_vec(),
                now: None,
                stat: None,
                target: Some(not_tracked),
            },
            Change {
                path: b"vendor".to_vec(),
                now: Some(repo),
                stat: vst,
                target: None,
            },
        ];
        let a = fx.apply(&changes).unwrap();
        // What was not read is replaced by known content (the plan's
        // choice); it is never a target, nor removed for good.
        assert_eq!(done_paths(&a), [("big.bin", Some(EntryKind::File))]);
        assert_eq!(
            skipped(&a),
            [
                ("other.bin", Skip::NotRestorable(EntryKind::NotTracked)),
                ("vendor", Skip::NotRestorable(EntryKind::Repository)),
            ]
        );
        assert!(Skip::NotRestorable(EntryKind::Repository)
            .to_string()
            .contains("nested repository"));
        assert_eq!(fs::read(fx.p("big.bin")).unwrap(), b"small\n");
        assert!(!fx.p("other.bin").exists());
        assert!(fx.p("vendor").is_dir());
    }

    /// A FIFO, a socket and a link where a file was are replaced, never
    /// opened nor written through; a not-read directory is replaced by a
    /// file only when empty, and kept (its bits set) for a directory.
    #[test]
    fn special_files_are_replaced_never_opened() {
        let fx = Fx::new();
        let unread = |kind| Item {
            kind,
            mode: 0,
            size: 0,
            id: ObjectId::ZERO,
        };
        let fifo = fx.p("pipe");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(fx.p("sock")).unwrap();
        let out = tempfile::tempdir().unwrap();
        fs::write(out.path().join("victim"), b"outside\n").unwrap();
        symlink(out.path().join("victim"), fx.p("ln")).unwrap();
        fs::create_dir(fx.p("full")).unwrap();
        fx.write("full/x", b"kept\n", 0o644);
        fs::create_dir(fx.p("ignored")).unwrap();
        let stat = |rel: &str| Some(FileStat::at(&fx.project, rel.as_bytes()).unwrap());
        let new = fx.file(b"restored\n", 0o640);
        let change = |rel: &str, kind, target| Change {
            path: rel.as_bytes().to_vec(),
            now: Some(unread(kind)),
            stat: stat(rel),
            target: Some(target),
        };
        let changes = vec![
            change("pipe", EntryKind::NotTracked, new),
            change("sock", EntryKind::NotTracked, new),
            change("ln", EntryKind::NotTracked, new),
            change("full", EntryKind::NotTrackedDir, new),
            change("ignored", EntryKind::NotTrackedDir, dir(0o750)),
        ];
        let a = fx.apply(&changes).unwrap();
        assert_eq!(
            done_paths(&a),
            [
                ("ignored", Some(EntryKind::Dir)),
                ("ln", Some(EntryKind::File)),
                ("pipe", Some(EntryKind::File)),
                ("sock", Some(EntryKind::File)),
            ]
        );
        assert_eq!(skipped(&a), [("full", Skip::NotEmpty)]);
        for f in ["pipe", "sock", "ln"] {
            assert_eq!(fs::read(fx.p(f)).unwrap(), b"restored\n", "{f}");
            assert_eq!(mode(&fx.p(f)), 0o640);
        }
        assert_eq!(fs::read(out.path().join("victim")).unwrap(), b"outside\n");
        assert_eq!(fs::read(fx.p("full/x")).unwrap(), b"kept\n");
        assert_eq!(mode(&fx.p("ignored")), 0o750);
        assert_eq!(fx.temps(), Vec::<String>::new());
    }

    #[test]
    fn store_errors_stop_before_anything_changes() {
        let fx = Fx::new();
        fx.write("old.txt", b"old\n", 0o644);
        let ok = fx.file(b"fine\n", 0o644);
        let mut short = fx.file(b"twelve bytes", 0o644);
        short.size = 5;
        let base = vec![fx.change("old.txt", None), fx.change("ok.txt", Some(ok))];

        let mut plan = base.clone();
        plan.push(fx.change("short.txt", Some(short)));
        match fx.apply(&plan) {
            Err(RestoreError::SizeMismatch {
                path,
                expected: 5,
                found: 12,
            }) => assert_eq!(path, Path::new("short.txt")),
            other => panic!("{other:?}"),
        }

        let unknown = Item {
            id: hel_store::blob_id(b"never stored"),
            ..ok
        };
        let mut plan = base.clone();
        plan.push(fx.change("missing.txt", Some(unknown)));
        match fx.apply(&plan) {
            Err(RestoreError::Blob {
                path,
                source: hel_store::Error::Missing { .. },
            }) => assert_eq!(path, Path::new("missing.txt")),
            other => panic!("{other:?}"),
        }

        let mut plan = base.clone();
        plan.push(fx.change("nul", Some(fx.link(b"a\0b"))));
        let e = fx.apply(&plan).unwrap_err();
        assert!(matches!(&e, RestoreError::BadTarget { path } if path == Path::new("nul")));
        assert!(e.to_string().starts_with("nul: "), "{e}");

        // Nothing changed, no temporary is left.
        assert_eq!(fs::read(fx.p("old.txt")).unwrap(), b"old\n");
        assert!(!fx.p("ok.txt").exists());
        assert_eq!(fx.temps(), Vec::<String>::new());
    }

    #[test]
    fn inconsistent_plans_are_refused_path_by_path() {
        let fx = Fx::new();
        fx.write("f", b"f\n", 0o644);
        let good = fx.file(b"good\n", 0o644);
        let mut setuid = good;
        setuid.mode = 0o4755;
        let mut empty_link = fx.link(b"x");
        empty_link.size = 0;
        let mut no_stat = fx.change("f", Some(good));
        no_stat.stat = None;
        let mut wrong_kind = fx.change("f", Some(good));
        wrong_kind.path = b"g".to_vec();
        if let Some(now) = &mut wrong_kind.now {
            now.kind = EntryKind::Dir;
        }
        let changes = vec![
            fx.change("setuid", Some(setuid)),
            fx.change("empty-link", Some(empty_link)),
            no_stat,
            wrong_kind,
            fx.change("twice", Some(good)),
            fx.change("twice", Some(fx.file(b"second\n", 0o644))),
        ];
        let a = fx.apply(&changes).unwrap();
        assert_eq!(done_paths(&a), [("twice", Some(EntryKind::File))]);
        assert_eq!(fs::read(fx.p("twice")).unwrap(), b"good\n");
        let reasons = skipped(&a);
        assert_eq!(reasons.len(), 5, "{reasons:?}");
        assert!(reasons
            .iter()
            .all(|(_, s)| matches!(s, Skip::BadPlan(_) | Skip::BadEntry(_))));
        assert!(reasons.contains(&("setuid", Skip::BadEntry(EntryError::ModeAbove777))));
        assert!(reasons.contains(&("empty-link", Skip::BadEntry(EntryError::SymlinkSize))));
        assert_eq!(
            Skip::BadEntry(EntryError::ModeAbove777).to_string(),
            "the restore plan is inconsistent: mode bits above 0o777"
        );
        assert_eq!(
            reasons[4],
            ("twice", Skip::BadPlan("the path is listed twice"))
        );
        assert_eq!(fs::read(fx.p("f")).unwrap(), b"f\n");
        assert!(!fx.p("setuid").exists());
        assert_eq!(fx.temps(), Vec::<String>::new());
    }

    #[test]
    fn stale_temporaries_of_dead_processes_are_removed() {
        let fx = Fx::new();
        let (ws, _) = hel_store::workspace::dir(&fx.store).unwrap();
        drop(open_tmp(&ws).unwrap());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let me = std::process::id();
        let tmp = fx.p(".hel/workspace/tmp");
        let out = tempfile::tempdir().unwrap();
        fs::write(out.path().join("precious"), b"keep\n").unwrap();
        fs::write(tmp.join(format!("restore-{dead}-1")), b"stale").unwrap();
        symlink(
            out.path().join("precious"),
            tmp.join(format!("restore-{dead}-2")),
        )
        .unwrap();
        fs::create_dir(tmp.join(format!("restore-{dead}-3"))).unwrap();
        fs::write(tmp.join(format!("restore-{me}-99")), b"mine").unwrap();
        fs::write(tmp.join("other"), b"not ours").unwrap();
        fx.apply(&[]).unwrap();
        let mut expect = vec![
            "other".to_owned(),
            format!("restore-{dead}-3"),
            format!("restore-{me}-99"),
        ];
        expect.sort();
        assert_eq!(fx.temps(), expect);
        assert_eq!(fs::read(out.path().join("precious")).unwrap(), b"keep\n");
    }

    #[test]
    fn copy_beside_the_target_when_renames_cross_filesystems() {
        let fx = Fx::new();
        let (ws, _) = hel_store::workspace::dir(&fx.store).unwrap();
        let tmp = open_tmp(&ws).unwrap();
        fs::create_dir(fx.p("sub")).unwrap();
        let parent = open_dir(fx.project.as_fd(), b"sub").unwrap();
        let file = fx.file(b"copied\n", 0o751);
        let link = fx.link(b"there");
        let mut temps = Temps {
            dir: &tmp,
            live: Vec::new(),
        };
        let t = temps.write(&file, b"copied\n").unwrap();
        beside(&tmp, &t.name, &file, &parent, b"f", true).unwrap();
        let t = temps.write(&link, b"there").unwrap();
        beside(&tmp, &t.name, &link, &parent, b"l", true).unwrap();
        // Something appeared: nothing is overwritten.
        fx.write("sub/taken", b"user\n", 0o644);
        let t = temps.write(&file, b"copied\n").unwrap();
        assert_eq!(
            beside(&tmp, &t.name, &file, &parent, b"taken", true),
            Err(Skip::Changed)
        );
        drop(temps);
        assert_eq!(fs::read(fx.p("sub/f")).unwrap(), b"copied\n");
        assert_eq!(mode(&fx.p("sub/f")), 0o751);
        assert_eq!(fs::read_link(fx.p("sub/l")).unwrap(), Path::new("there"));
        assert_eq!(fs::read(fx.p("sub/taken")).unwrap(), b"user\n");
        let mut names: Vec<_> = fs::read_dir(fx.p("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["f", "l", "taken"]);
        assert_eq!(fx.temps(), Vec::<String>::new());
    }
}
