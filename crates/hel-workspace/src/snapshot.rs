//! Taking a snapshot: walk the project, hash what the stat cache cannot
//! vouch for (in parallel), and write the blobs and trees that are new
//! through a commit transaction of the session.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use hel_store::tree::{EntryKind, Tree, TARGET_MAX};
use hel_store::{Cap, Encoded, ObjectId, Store, Txn};
use rustix::fs::{Mode, OFlags};

use crate::cache::{Cache, Known};
use crate::flat::{Flat, Item};
use crate::stat::FileStat;
use crate::walk::{self, Found, Skipped};

/// Limits of a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// A file larger than this that the session has not recorded before is
    /// listed as not tracked instead of stored.
    pub max_file: u64,
    /// New content (bytes of files not stored yet) one snapshot may add;
    /// past it, new files are listed as not tracked.
    pub budget: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_file: 1 << 20,
            budget: 64 << 20,
        }
    }
}

/// Why a path is listed as not tracked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotTracked {
    /// Larger than the size limit.
    TooLarge { size: u64 },
    /// Past the snapshot's budget of new bytes.
    OverBudget { size: u64 },
    /// Could not be read.
    Unreadable(String),
}

/// The previous snapshot of the session: its files are tracked whatever
/// their size, and what it names is stored where the session may name it.
pub struct Prev<'a> {
    pub tree: ObjectId,
    pub flat: &'a Flat,
}

/// A snapshot written (or found unchanged).
#[derive(Debug)]
pub struct Snapshot {
    /// The root tree.
    pub tree: ObjectId,
    pub flat: Flat,
    /// Every path's `lstat` as the walk saw it (what a restore re-checks
    /// before touching the path).
    pub stats: HashMap<Vec<u8>, FileStat>,
    /// Paths listed as not tracked, and why.
    pub not_tracked: Vec<(Vec<u8>, NotTracked)>,
    /// What the walk left out.
    pub skipped: Vec<Skipped>,
    /// Nested repositories left out whole.
    pub repositories: Vec<Vec<u8>>,
    /// Files read and hashed (the others the cache vouched for).
    pub files_read: u64,
    /// Bytes of new file content stored.
    pub new_bytes: u64,
}

/// Why a snapshot failed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Walk(#[from] walk::WalkError),
    #[error(transparent)]
    Store(#[from] hel_store::Error),
    #[error("{0} is {1}: hel does not snapshot it (use --no-workspace, or run hel in a project directory)")]
    Refused(PathBuf, &'static str),
    #[error("snapshot of the project: {0}")]
    Internal(String),
}

/// Where a snapshot's objects go: a commit in progress ([`Txn`]), or
/// nowhere ([`Scan`]) when only the ids are wanted.
pub trait Sink {
    /// Is `id` stored where this snapshot may name it?
    fn has(&mut self, id: &ObjectId) -> Result<bool, hel_store::Error>;
    fn put_blob(&mut self, bytes: &[u8]) -> Result<ObjectId, hel_store::Error>;
    /// Returns whether the blob was new.
    fn put_encoded(&mut self, e: Encoded) -> Result<bool, hel_store::Error>;
    fn put_tree(&mut self, t: &Tree) -> Result<ObjectId, hel_store::Error>;
}

impl Sink for Txn<'_> {
    fn has(&mut self, id: &ObjectId) -> Result<bool, hel_store::Error> {
        Txn::has(self, id)
    }
    fn put_blob(&mut self, bytes: &[u8]) -> Result<ObjectId, hel_store::Error> {
        Txn::put_blob(self, bytes)
    }
    fn put_encoded(&mut self, e: Encoded) -> Result<bool, hel_store::Error> {
        Txn::put_encoded(self, e)
    }
    fn put_tree(&mut self, t: &Tree) -> Result<ObjectId, hel_store::Error> {
        Txn::put_tree(self, t)
    }
}

/// A sink that stores nothing: a snapshot through it computes the ids of
/// what is on disk (for a diff against the files), as if all were stored.
pub struct Scan;

impl Sink for Scan {
    fn has(&mut self, _: &ObjectId) -> Result<bool, hel_store::Error> {
        Ok(true)
    }
    fn put_blob(&mut self, bytes: &[u8]) -> Result<ObjectId, hel_store::Error> {
        Ok(hel_store::blob_id(bytes))
    }
    fn put_encoded(&mut self, _: Encoded) -> Result<bool, hel_store::Error> {
        Ok(false)
    }
    fn put_tree(&mut self, t: &Tree) -> Result<ObjectId, hel_store::Error> {
        Ok(hel_store::tree_id(t))
    }
}

/// A project's workspace, open for snapshots: its path, its stat cache
/// (kept in memory between snapshots, reloaded when another process saved
/// a newer one), and the limits.
pub struct Workspace {
    root: PathBuf,
    /// The project directory, opened once (restores write beneath it).
    project: OwnedFd,
    dir: OwnedFd,
    cache: Cache,
    pub options: Options,
}

/// Whether `project` may be snapshotted: never `/` nor the home directory.
pub fn check_project(project: &Path) -> Result<(), SnapshotError> {
    let canonical = project
        .canonicalize()
        .unwrap_or_else(|_| project.to_owned());
    if canonical == Path::new("/") {
        return Err(SnapshotError::Refused(canonical, "the root directory"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        let home = PathBuf::from(home);
        if home.canonicalize().unwrap_or(home) == canonical {
            return Err(SnapshotError::Refused(canonical, "your home directory"));
        }
    }
    Ok(())
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64)
}

impl Workspace {
    /// Open the workspace of `store`'s project (refused for `/` and the
    /// home directory).
    pub fn open(store: &Store, options: Options) -> Result<Workspace, SnapshotError> {
        let root = store.project_path().to_owned();
        check_project(&root)?;
        let (dir, _) = store.workspace_dir()?;
        let cache = Cache::load(dir.as_fd());
        let project = rustix::fs::open(
            &root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| SnapshotError::Walk(walk::WalkError {
            path: root.display().to_string(),
            reason: e.to_string(),
        }))?;
        Ok(Workspace {
            root,
            project,
            dir,
            cache,
            options,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The project directory's descriptor.
    pub fn project_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.project.as_fd()
    }

    /// Snapshot the project through `txn` (the session's commit in
    /// progress): files the cache vouches for are not read, new content is
    /// written, and every tree that `prev` does not already hold. The trees
    /// are published with the record `txn` commits.
    pub fn snapshot(
        &mut self,
        txn: &mut dyn Sink,
        prev: Option<Prev<'_>>,
    ) -> Result<Snapshot, SnapshotError> {
        if !self.cache.is_current(self.dir.as_fd()) {
            self.cache = Cache::load(self.dir.as_fd());
        }
        let walk_start = now_ns();
        let walked = walk::walk(&self.root)?;
        let prev_flat = prev.as_ref().map(|p| p.flat);
        let tracked_before = |path: &[u8]| {
            prev_flat.and_then(|f| f.get(path)).map(|i| i.kind) == Some(EntryKind::File)
        };
        let mut out = Snapshot {
            tree: ObjectId::ZERO,
            flat: Flat::default(),
            stats: HashMap::with_capacity(walked.entries.len()),
            not_tracked: Vec::new(),
            skipped: walked.skipped,
            repositories: Vec::new(),
            files_read: 0,
            new_bytes: 0,
        };
        let mut known: HashMap<Vec<u8>, Known> = HashMap::new();
        // Files to read: (index in walked.entries, the most it may hold).
        let mut to_read: Vec<(usize, u64)> = Vec::new();
        for (k, e) in walked.entries.iter().enumerate() {
            out.stats.insert(e.path.clone(), e.stat);
            let item = |kind, mode, size, id| Item {
                kind,
                mode,
                size,
                id,
            };
            match e.found {
                Found::Dir => {
                    out.flat.items.insert(
                        e.path.clone(),
                        item(EntryKind::Dir, e.stat.perm(), 0, ObjectId::ZERO),
                    );
                }
                Found::Repository => {
                    out.repositories.push(e.path.clone());
                    out.flat.items.insert(
                        e.path.clone(),
                        item(EntryKind::Repository, 0, 0, ObjectId::ZERO),
                    );
                }
                Found::Symlink => {
                    let target =
                        match rustix::fs::readlink(self.root.join(path_of(&e.path)), Vec::new()) {
                            Ok(t) => t.into_bytes(),
                            Err(err) => {
                                out.skipped
                                    .push(Skipped::Unreadable(e.path.clone(), err.to_string()));
                                continue;
                            }
                        };
                    let size = target.len() as u64;
                    if size == 0 || size > TARGET_MAX {
                        out.skipped.push(Skipped::Unreadable(
                            e.path.clone(),
                            "a symbolic link target over 4095 bytes".into(),
                        ));
                        continue;
                    }
                    let id = txn.put_blob(&target)?;
                    out.flat
                        .items
                        .insert(e.path.clone(), item(EntryKind::Symlink, 0, size, id));
                }
                Found::File => {
                    let cached = self.cache.lookup(&e.path, &e.stat).filter(|id| {
                        // Named by the session's last snapshot at this path:
                        // stored where the session may name it.
                        prev_flat.and_then(|f| f.get(&e.path)).map(|i| i.id) == Some(*id)
                    });
                    let cached = match cached {
                        Some(id) => Some(id),
                        None => match self.cache.lookup(&e.path, &e.stat) {
                            Some(id) if txn.has(&id)? => Some(id),
                            _ => None,
                        },
                    };
                    if let Some(id) = cached {
                        known.insert(e.path.clone(), Known { stat: e.stat, id });
                        out.flat.items.insert(
                            e.path.clone(),
                            item(EntryKind::File, e.stat.perm(), e.stat.size, id),
                        );
                        continue;
                    }
                    let before = tracked_before(&e.path);
                    if e.stat.size > self.options.max_file && !before {
                        out.not_tracked
                            .push((e.path.clone(), NotTracked::TooLarge { size: e.stat.size }));
                        out.flat.items.insert(
                            e.path.clone(),
                            item(EntryKind::NotTracked, 0, e.stat.size, ObjectId::ZERO),
                        );
                        continue;
                    }
                    let max = if before {
                        Cap::FILE.max
                    } else {
                        self.options.max_file.min(Cap::FILE.max)
                    };
                    to_read.push((k, max));
                }
            }
        }
        self.read_files(
            txn,
            &walked.entries,
            &to_read,
            &tracked_before,
            &mut known,
            &mut out,
        )?;
        // The trees, deepest first; what the last snapshot holds is stored.
        let known_trees: HashSet<ObjectId> = prev
            .iter()
            .flat_map(|p| {
                std::iter::once(p.tree).chain(
                    p.flat
                        .items
                        .values()
                        .filter(|i| i.kind == EntryKind::Dir)
                        .map(|i| i.id),
                )
            })
            .collect();
        let trees = out.flat.trees().map_err(SnapshotError::Internal)?;
        for (_, tree, id) in &trees {
            if !known_trees.contains(id) {
                txn.put_tree(tree)?;
            }
        }
        out.tree = trees.last().map_or(ObjectId::ZERO, |(_, _, id)| *id);
        if self
            .cache
            .differs(known.iter().map(|(p, k)| (p.as_slice(), k)), walk_start)
            || !self.cache.is_current(self.dir.as_fd())
        {
            // A cache that cannot be written costs the next snapshot a
            // full read, nothing else.
            let _ = self.cache.save(self.dir.as_fd(), known, walk_start);
        }
        Ok(out)
    }

    /// Read, hash and compress `to_read` on every core; store what is new
    /// within the budget.
    fn read_files(
        &self,
        txn: &mut dyn Sink,
        entries: &[walk::Entry],
        to_read: &[(usize, u64)],
        tracked_before: &dyn Fn(&[u8]) -> bool,
        known: &mut HashMap<Vec<u8>, Known>,
        out: &mut Snapshot,
    ) -> Result<(), SnapshotError> {
        if to_read.is_empty() {
            return Ok(());
        }
        let threads = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .min(to_read.len());
        let next = AtomicUsize::new(0);
        let root = &self.root;
        std::thread::scope(|s| -> Result<(), SnapshotError> {
            let (tx, rx) =
                std::sync::mpsc::sync_channel::<(usize, Result<Read, String>)>(threads * 4);
            for _ in 0..threads {
                let tx = tx.clone();
                let next = &next;
                s.spawn(move || loop {
                    let j = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(k, max)) = to_read.get(j) else {
                        break;
                    };
                    let e = &entries[k];
                    if tx.send((k, read_file(root, e, max))).is_err() {
                        break;
                    }
                });
            }
            drop(tx);
            let mut failed = None;
            for (k, read) in rx {
                if failed.is_some() {
                    continue; // drain so the workers end
                }
                let e = &entries[k];
                out.files_read += 1;
                let result = self.store_read(txn, e, read, tracked_before, known, out);
                if let Err(err) = result {
                    failed = Some(err);
                }
            }
            failed.map_or(Ok(()), Err)
        })
    }

    fn store_read(
        &self,
        txn: &mut dyn Sink,
        e: &walk::Entry,
        read: Result<Read, String>,
        tracked_before: &dyn Fn(&[u8]) -> bool,
        known: &mut HashMap<Vec<u8>, Known>,
        out: &mut Snapshot,
    ) -> Result<(), SnapshotError> {
        let not_tracked = |out: &mut Snapshot, why: NotTracked, size: u64| {
            out.not_tracked.push((e.path.clone(), why));
            out.flat.items.insert(
                e.path.clone(),
                Item {
                    kind: EntryKind::NotTracked,
                    mode: 0,
                    size,
                    id: ObjectId::ZERO,
                },
            );
        };
        let r = match read {
            Ok(Read::Gone) => return Ok(()),
            Ok(Read::TooLarge(size)) => {
                not_tracked(out, NotTracked::TooLarge { size }, size);
                return Ok(());
            }
            Ok(Read::Content(r)) => r,
            Err(why) => {
                not_tracked(out, NotTracked::Unreadable(why), e.stat.size);
                return Ok(());
            }
        };
        let id = r.blob.id();
        if !txn.has(&id)? {
            if out.new_bytes + r.size > self.options.budget && !tracked_before(&e.path) {
                not_tracked(out, NotTracked::OverBudget { size: r.size }, r.size);
                return Ok(());
            }
            if txn.put_encoded(r.blob)? {
                out.new_bytes += r.size;
            }
        }
        let perm = r.stat.perm();
        known.insert(e.path.clone(), Known { stat: r.stat, id });
        out.stats.insert(e.path.clone(), r.stat);
        out.flat.items.insert(
            e.path.clone(),
            Item {
                kind: EntryKind::File,
                mode: perm,
                size: r.size,
                id,
            },
        );
        Ok(())
    }
}

/// A file read for a snapshot.
struct Content {
    blob: hel_store::Encoded,
    /// Its `fstat` before it was read.
    stat: FileStat,
    size: u64,
}

enum Read {
    Content(Content),
    /// Over the most it may hold (its size when known).
    TooLarge(u64),
    /// No longer there (or no longer a regular file).
    Gone,
}

fn path_of(rel: &[u8]) -> &Path {
    Path::new(std::ffi::OsStr::from_bytes(rel))
}

/// Read file `e` (relative to `root`) if it is still the regular file the
/// walk saw: never through a link at its last component, never blocking
/// on a FIFO swapped in, at most `max` bytes.
fn read_file(root: &Path, e: &walk::Entry, max: u64) -> Result<Read, String> {
    let path = root.join(path_of(&e.path));
    let fd = match rustix::fs::open(
        &path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
            return Ok(Read::Gone)
        }
        Err(err) => return Err(err.to_string()),
    };
    let stat = FileStat::of(&rustix::fs::fstat(&fd).map_err(|e| e.to_string())?);
    if !stat.is_file() || stat.ino != e.stat.ino || stat.dev != e.stat.dev {
        return Ok(Read::Gone);
    }
    if stat.size > max {
        return Ok(Read::TooLarge(stat.size));
    }
    let mut bytes = Vec::with_capacity(stat.size as usize);
    use std::io::Read as _;
    std::fs::File::from(fd)
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max {
        return Ok(Read::TooLarge(bytes.len() as u64));
    }
    let blob = hel_store::encode_blob(&bytes).map_err(|e| e.to_string())?;
    Ok(Read::Content(Content {
        blob,
        stat,
        size: bytes.len() as u64,
    }))
}
