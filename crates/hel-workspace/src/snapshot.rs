//! Taking a snapshot: walk the project, hash what the stat cache cannot
//! vouch for (in parallel), and write the blobs and trees that are new
//! through a commit transaction of the session.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hel_secrets::Detector;
use hel_store::tree::{EntryKind, Tree, FLAT_BYTES_MAX, FLAT_PATHS_MAX};
use hel_store::{Cap, Encoded, ObjectId, Store, Txn};

use crate::cache::{Cache, Known};
use crate::flat::{Flat, FlatError, Item, TreesError};
use crate::stat::FileStat;
use crate::walk::{self, Content, Found, NotRead};
use crate::watch::{Off, Stamp, Watch};

/// Limits of a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// A file larger than this that the session has not recorded before is
    /// listed as not tracked instead of stored.
    pub max_file: u64,
    /// New content (bytes of files not stored yet) one snapshot may add;
    /// past it, new files are listed as not tracked.
    pub budget: u64,
    /// Keep watching the project between snapshots (inotify, on local
    /// file systems, from the workspace's second walk on): a snapshot
    /// after which nothing changed is then the last walk's result, without
    /// a walk ([`crate::watch`]).
    pub notify: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_file: 1 << 20,
            budget: 64 << 20,
            notify: true,
        }
    }
}

/// Why a snapshot could not record a path it meant to (what the user is
/// told). Ignored paths and special files are recorded as not tracked
/// too, silently: not reading them is what was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotTracked {
    /// A file larger than the size limit.
    TooLarge { size: u64 },
    /// A file past the snapshot's budget of new bytes.
    OverBudget { size: u64 },
    /// Could not be opened, listed or read: why.
    Unreadable(String),
    /// A directory past the snapshot's budget of paths.
    PastPaths,
    /// A directory holding what no tree can hold: what.
    Unrecordable(&'static str),
    /// Replaced by something else while the snapshot looked at it.
    Changed,
    /// Its content holds a secret (a file, or a link's target): never
    /// stored, so that no byte of it is under `.hel/`.
    HoldsSecret,
}

impl NotTracked {
    /// Why the walk did not read a path, as the user is told; `None` for
    /// what is not read on purpose (ignored, special files).
    fn of(why: NotRead) -> Option<NotTracked> {
        match why {
            NotRead::Ignored | NotRead::Special => None,
            NotRead::Unreadable(why) => Some(NotTracked::Unreadable(why)),
            NotRead::PastPaths => Some(NotTracked::PastPaths),
            NotRead::Unrecordable(what) => Some(NotTracked::Unrecordable(what)),
            NotRead::Changed => Some(NotTracked::Changed),
        }
    }
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
    /// Its paths. Shared: a snapshot that finds nothing changed gives the
    /// last walk's paths back without copying them (at 70,000 files the
    /// copy was the whole cost of such a snapshot).
    pub flat: Arc<Flat>,
    /// Every path's `lstat` as the walk saw it (what a restore re-checks
    /// before touching the path).
    pub stats: HashMap<Vec<u8>, FileStat>,
    /// Paths the snapshot could not record (listed as not tracked: kind
    /// 4, or kind 6 for directories), and why; not the paths it did not
    /// read on purpose (ignored, special files).
    pub not_tracked: Vec<(Vec<u8>, NotTracked)>,
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
    Trees(#[source] TreesError),
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
    /// The most paths and bytes of paths a snapshot records.
    paths_max: u64,
    bytes_max: u64,
    /// The project's watches (when notifications are on and work), or
    /// why they are off for this process.
    watch: Result<Option<Watch>, Off>,
    /// The last walk's result, which stands while the watches say nothing
    /// changed.
    kept: Option<Kept>,
    /// Walks taken, and why the last one was (not the last walk's result).
    walks: u64,
    walked_because: &'static str,
    /// What finds secrets in files: a file holding one is not stored
    /// (`None` only in measurements of what the scan costs).
    secrets: Option<Arc<Detector>>,
    /// The `lstat` of the files the last walk found holding a secret (not
    /// read again while they match).
    held_secrets: crate::Set<FileStat>,
}

/// A walk's result, kept for the snapshots after it (its paths are the
/// previous snapshot's that a later snapshot is given: the same tree).
struct Kept {
    tree: ObjectId,
    /// Its paths (those of `tree`, so any snapshot naming `tree` has these).
    flat: Arc<Flat>,
    /// Every path's `lstat`, when that walk kept them.
    stats: Option<HashMap<Vec<u8>, FileStat>>,
    not_tracked: Vec<(Vec<u8>, NotTracked)>,
    repositories: Vec<Vec<u8>>,
    /// What the walk's result depended on besides the files: the limits,
    /// and the project-wide ignore files.
    limits: [u64; 4],
    stamp: Stamp,
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
        let (dir, _) = hel_store::workspace::dir(store)?;
        let cache = Cache::load(dir.as_fd());
        let project = hel_fs::at::open_dir_following(&root).map_err(|e| {
            SnapshotError::Walk(walk::WalkError {
                path: root.display().to_string(),
                reason: e.to_string(),
            })
        })?;
        Ok(Workspace {
            root,
            project,
            dir,
            cache,
            options,
            paths_max: FLAT_PATHS_MAX,
            bytes_max: FLAT_BYTES_MAX,
            watch: Ok(None),
            kept: None,
            walks: 0,
            walked_because: "",
            secrets: Some(Arc::new(Detector::from_env())),
            held_secrets: crate::Set::default(),
        })
    }

    /// Find secrets with `secrets` (a session's detector, which may know
    /// more of the environment's values than [`Detector::from_env`], the
    /// one a workspace opens with).
    pub fn set_secrets(&mut self, secrets: Arc<Detector>) {
        self.secrets = Some(secrets);
        self.held_secrets.clear();
        self.kept = None;
    }

    /// Store files without scanning them for secrets: for measuring what
    /// the scan costs (`testing` feature only, never hel's build).
    #[cfg(feature = "testing")]
    pub fn without_secret_scan(&mut self) {
        self.secrets = None;
        self.held_secrets.clear();
        self.kept = None;
    }

    /// How many snapshots walked the project (the others were a walk's
    /// result kept standing by notifications): for tests (`testing`
    /// feature only).
    #[cfg(feature = "testing")]
    pub fn walks(&self) -> u64 {
        self.walks
    }

    /// Why the last walk was taken rather than the walk before it kept
    /// standing (`testing` feature only).
    #[cfg(feature = "testing")]
    pub fn walked_because(&self) -> &'static str {
        self.walked_because
    }

    /// Whether the project is watched between snapshots now (its last
    /// walk's result standing until an event), or why notifications are
    /// off for this process.
    pub fn watching(&self) -> Result<bool, Off> {
        match &self.watch {
            Ok(w) => Ok(w.is_some() && self.kept.is_some()),
            Err(off) => Err(*off),
        }
    }

    fn limits(&self) -> [u64; 4] {
        [
            self.options.max_file,
            self.options.budget,
            self.paths_max,
            self.bytes_max,
        ]
    }

    /// The last walk's result, when notifications say nothing it saw has
    /// changed since and `prev` is the snapshot it made (so everything it
    /// names is stored where `prev` is).
    fn unchanged(
        &mut self,
        prev: Option<&Prev<'_>>,
        keep_stats: bool,
    ) -> Result<Snapshot, &'static str> {
        let limits = self.limits();
        let Ok(Some(watch)) = &mut self.watch else {
            return Err("not watching");
        };
        let Some(kept) = self.kept.as_ref() else {
            return Err("no walk kept");
        };
        if prev.is_none_or(|p| p.tree != kept.tree) {
            return Err("another previous snapshot");
        }
        if kept.limits != limits {
            return Err("other limits");
        }
        if keep_stats && kept.stats.is_none() {
            return Err("stats asked for");
        }
        watch.unchanged()?;
        if Stamp::now(self.project.as_fd()) != kept.stamp {
            return Err("an ignore file outside the project's directories");
        }
        Ok(Snapshot {
            tree: kept.tree,
            // The walk's paths: those of its tree, which `prev` is (every
            // field of every path is in the tree).
            flat: Arc::clone(&kept.flat),
            stats: match (&kept.stats, keep_stats) {
                (Some(s), true) => s.clone(),
                _ => HashMap::new(),
            },
            not_tracked: kept.not_tracked.clone(),
            repositories: kept.repositories.clone(),
            files_read: 0,
            new_bytes: 0,
        })
    }

    /// Record at most `paths` paths and `bytes` bytes of paths per
    /// snapshot (less than [`FLAT_PATHS_MAX`] and [`FLAT_BYTES_MAX`], what
    /// every snapshot is held to): for tests of what lies past the budget
    /// (`testing` feature only).
    #[cfg(feature = "testing")]
    pub fn limit_paths(&mut self, paths: u64, bytes: u64) {
        self.paths_max = paths.min(FLAT_PATHS_MAX);
        self.bytes_max = bytes.min(FLAT_BYTES_MAX);
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What the project holds at `path` now, for a diff against the files
    /// on disk: a regular file's bytes (at most [`Cap::FILE`]) or a
    /// symlink's target. Never through a link, never blocking on a FIFO.
    pub fn read_current(&self, path: &[u8], kind: EntryKind) -> std::io::Result<Vec<u8>> {
        let (dir, name) = crate::flat::split(path);
        let dirfd = hel_fs::at::open_dir_beneath(self.project.as_fd(), dir)?;
        if kind == EntryKind::Symlink {
            return Ok(rustix::fs::readlinkat(&dirfd, name, Vec::new())?.into_bytes());
        }
        let Some((fd, _)) = walk::open_regular(dirfd.as_fd(), name)? else {
            return Err(std::io::Error::other("not a regular file"));
        };
        hel_fs::read_head(std::fs::File::from(fd), Cap::FILE.max)
    }

    /// The paths of the snapshot whose root tree is `tree` (the session's
    /// last one, on which the next builds): the stat cache's copy when it
    /// holds that very tree's (its paths hashed into trees again give
    /// `tree`: nothing is read), else read from `store` ([`Flat::read`]).
    pub fn read_last(&mut self, store: &Store, tree: &ObjectId) -> Result<Flat, FlatError> {
        if !self.cache.is_current(self.dir.as_fd()) {
            self.cache = Cache::load(self.dir.as_fd());
        }
        match self.cache.take_last(tree) {
            Some(flat) => Ok(flat),
            None => Flat::read(store, tree),
        }
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
        self.take_snapshot(txn, prev, false)
    }

    /// [`Workspace::snapshot`], also keeping every path's `lstat` in
    /// [`Snapshot::stats`] (what a restore checks before touching a path).
    pub fn snapshot_with_stats(
        &mut self,
        txn: &mut dyn Sink,
        prev: Option<Prev<'_>>,
    ) -> Result<Snapshot, SnapshotError> {
        self.take_snapshot(txn, prev, true)
    }

    fn take_snapshot(
        &mut self,
        txn: &mut dyn Sink,
        prev: Option<Prev<'_>>,
        keep_stats: bool,
    ) -> Result<Snapshot, SnapshotError> {
        if !self.options.notify {
            self.watch = Ok(None);
            self.kept = None;
            self.walked_because = "notifications off";
        } else {
            match self.unchanged(prev.as_ref(), keep_stats) {
                Ok(snap) => return Ok(snap),
                Err(why) => self.walked_because = why,
            }
        }
        self.kept = None;
        // Watched from a workspace's second walk on: a process that
        // snapshots once (undo, restore, diff) would pay for thousands of
        // watches it never reads.
        if self.options.notify && matches!(self.watch, Ok(None)) && self.walks > 0 {
            self.watch = Watch::new(self.project.as_fd()).map(Some);
        }
        if !self.cache.is_current(self.dir.as_fd()) {
            self.cache = Cache::load(self.dir.as_fd());
        }
        let stamp = Stamp::now(self.project.as_fd());
        let limits = self.limits();
        self.walks += 1;
        let walk_start = now_ns();
        let watching = match &mut self.watch {
            Ok(Some(w)) => Some(w.begin()),
            _ => None,
        };
        let prev_flat = prev.as_ref().map(|p| p.flat);
        let mut t = Taking {
            txn,
            project: self.project.as_fd(),
            prev: prev_flat,
            cache_in_prev: prev
                .as_ref()
                .is_some_and(|p| self.cache.ids_are_files_of(&p.tree)),
            max_file: self.options.max_file.min(Cap::FILE.max),
            budget: self.options.budget,
            keep_stats,
            secrets: self.secrets.as_deref(),
            held_secrets: Vec::new(),
            known: Vec::new(),
            cache_hits: 0,
            flat: Flat::default(),
            out: Snapshot {
                tree: ObjectId::ZERO,
                flat: Arc::default(),
                stats: HashMap::new(),
                not_tracked: Vec::new(),
                repositories: Vec::new(),
                files_read: 0,
                new_bytes: 0,
            },
            failed: None,
        };
        let plan = walk::Plan {
            root: &self.root,
            cache: &self.cache,
            prev: prev_flat,
            max_file: self.options.max_file,
            paths_max: self.paths_max,
            bytes_max: self.bytes_max,
            watch: watching.as_ref(),
            secrets: self.secrets.as_deref(),
            held_secrets: &self.held_secrets,
        };
        walk::walk(self.project.as_fd(), &plan, |e| {
            if t.failed.is_none() {
                if let Err(err) = t.take(e) {
                    t.failed = Some(err);
                }
            }
        })?;
        let walked = watching.map(|w| w.done());
        if let Some(e) = t.failed {
            return Err(e);
        }
        let Taking {
            txn,
            mut out,
            mut flat,
            known,
            cache_hits,
            held_secrets,
            ..
        } = t;
        self.held_secrets = held_secrets.into_iter().collect();
        // The trees that differ from the last snapshot's, deepest first; the
        // others are stored already.
        let trees = flat.trees_since(prev_flat).map_err(SnapshotError::Trees)?;
        out.flat = Arc::new(flat);
        for (_, tree, _) in &trees {
            txn.put_tree(tree)?;
        }
        out.tree = match (trees.last(), &prev) {
            (Some((dir, _, id)), _) if dir.is_empty() => *id,
            (_, Some(p)) => p.tree,
            _ => hel_store::tree_id(&Tree::default()),
        };
        // The cache changes when a file was read (new, changed, or racy:
        // saved again it settles), a file it knew is gone, or the tree is
        // another (its paths are the next process's previous snapshot).
        let changed = out.files_read > 0
            || cache_hits != self.cache.len()
            || self.cache.root() != Some(out.tree);
        if changed || !self.cache.is_current(self.dir.as_fd()) {
            // A cache that cannot be written costs the next snapshot a
            // full read, nothing else.
            let _ = self
                .cache
                .save(self.dir.as_fd(), known, walk_start, out.tree, &out.flat);
        }
        if let (Some(walked), Ok(Some(watch))) = (walked, &mut self.watch) {
            // A path left unread for a reason that may pass is read again
            // by the next walk, so this result must not stand.
            let sound = !out.not_tracked.iter().any(|(_, why)| {
                matches!(
                    why,
                    NotTracked::Unreadable(_) | NotTracked::Changed | NotTracked::OverBudget { .. }
                )
            });
            match watch.end(walked, sound) {
                Ok(()) => {
                    self.kept = Some(Kept {
                        tree: out.tree,
                        flat: Arc::clone(&out.flat),
                        stats: keep_stats.then(|| out.stats.clone()),
                        not_tracked: out.not_tracked.clone(),
                        repositories: out.repositories.clone(),
                        limits,
                        stamp,
                    });
                }
                Err(off) => self.watch = Err(off),
            }
        }
        Ok(out)
    }
}

/// A snapshot being taken: what the walk's entries go into.
struct Taking<'a, 'b> {
    txn: &'a mut dyn Sink,
    project: BorrowedFd<'b>,
    prev: Option<&'b Flat>,
    /// Every id the stat cache vouches for is a file's in `prev`, so
    /// stored where the session may name it.
    cache_in_prev: bool,
    max_file: u64,
    budget: u64,
    keep_stats: bool,
    secrets: Option<&'b Detector>,
    /// The files found holding a secret.
    held_secrets: Vec<FileStat>,
    /// Every file with content, for the stat cache.
    known: Vec<(Vec<u8>, Known)>,
    /// Files the cache vouched for.
    cache_hits: usize,
    /// The snapshot's paths, until it is whole.
    flat: Flat,
    out: Snapshot,
    failed: Option<SnapshotError>,
}

impl Taking<'_, '_> {
    /// Record one entry of the walk: store what is new (within the budget,
    /// unless the session tracked the file before), list what is not
    /// tracked.
    fn take(&mut self, e: walk::Entry) -> Result<(), SnapshotError> {
        let item = |kind, mode, size, id| Item {
            kind,
            mode,
            size,
            id,
        };
        let (out, flat) = (&mut self.out, &mut self.flat);
        if self.keep_stats {
            out.stats.insert(e.path.clone(), e.stat);
        }
        let content = match e.found {
            Found::Dir => {
                flat.items.insert(
                    e.path,
                    item(EntryKind::Dir, e.stat.perm(), 0, ObjectId::ZERO),
                );
                return Ok(());
            }
            Found::DirNotRead(why) => {
                not_read(out, flat, e.path, EntryKind::NotTrackedDir, why);
                return Ok(());
            }
            Found::NotRead(why) => {
                not_read(out, flat, e.path, EntryKind::NotTracked, why);
                return Ok(());
            }
            Found::Repository => {
                out.repositories.push(e.path.clone());
                flat.items
                    .insert(e.path, item(EntryKind::Repository, 0, 0, ObjectId::ZERO));
                return Ok(());
            }
            Found::Symlink(target) => {
                if walk::holds_secret(self.secrets, &target) {
                    out.not_tracked
                        .push((e.path.clone(), NotTracked::HoldsSecret));
                    let size = target.len() as u64;
                    flat.items
                        .insert(e.path, item(EntryKind::NotTracked, 0, size, ObjectId::ZERO));
                    return Ok(());
                }
                let id = self.txn.put_blob(&target)?;
                let size = target.len() as u64;
                flat.items
                    .insert(e.path, item(EntryKind::Symlink, 0, size, id));
                return Ok(());
            }
            Found::File(c) => c,
        };
        // A file the cache vouches for needs no look at `prev` when the
        // cache's ids are all `prev`'s (the common case: one lookup in a
        // map of every path saved per file).
        let prev = match content {
            Content::Cached(_) if self.cache_in_prev => None,
            _ => self.prev.and_then(|f| f.get(&e.path)),
        };
        let tracked = prev.is_some_and(|i| i.kind == EntryKind::File);
        let content = match content {
            Content::Cached(id) => {
                // Named by the session's last snapshot (at this path, or by
                // the cache at any): stored where the session may name it.
                // Otherwise ask the store, and read the file again if its
                // content is not there.
                if self.cache_in_prev || prev.map(|i| i.id) == Some(id) || self.txn.has(&id)? {
                    self.cache_hits += 1;
                    self.known
                        .push((e.path.clone(), Known { stat: e.stat, id }));
                    flat.items.insert(
                        e.path,
                        item(EntryKind::File, e.stat.perm(), e.stat.size, id),
                    );
                    return Ok(());
                }
                let (dir, name) = crate::flat::split(&e.path);
                let max = if tracked {
                    Cap::FILE.max
                } else {
                    self.max_file
                };
                match hel_fs::at::open_dir_beneath(self.project, dir) {
                    Ok(fd) => walk::read(fd.as_fd(), name, &e.stat, max, self.secrets),
                    Err(rustix::io::Errno::NOENT) => Content::Gone,
                    Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => Content::Changed,
                    Err(err) => Content::Unreadable(err.to_string()),
                }
            }
            other => other,
        };
        let path = e.path;
        let not_tracked =
            |out: &mut Snapshot, flat: &mut Flat, path: Vec<u8>, why: NotTracked, size: u64| {
                out.not_tracked.push((path.clone(), why));
                let item = item(EntryKind::NotTracked, 0, size, ObjectId::ZERO);
                flat.items.insert(path, item);
            };
        match content {
            // Vanished since the listing: absent is what is true.
            Content::Gone => {
                out.stats.remove(&path);
            }
            Content::Changed => {
                not_tracked(out, flat, path, NotTracked::Changed, 0);
            }
            Content::TooLarge(size) => {
                not_tracked(out, flat, path, NotTracked::TooLarge { size }, size);
            }
            Content::Unreadable(why) => {
                not_tracked(out, flat, path, NotTracked::Unreadable(why), e.stat.size);
            }
            // Recorded as a file it did not read, with its size (what a
            // forced restore compares, objects-spec §10.6).
            Content::Secret { stat, size } => {
                self.held_secrets.push(stat);
                not_tracked(out, flat, path, NotTracked::HoldsSecret, size);
            }
            Content::Cached(_) => {}
            Content::Read { blob, stat, size } => {
                out.files_read += 1;
                let id = blob.id();
                if !self.txn.has(&id)? {
                    if out.new_bytes + size > self.budget && !tracked {
                        not_tracked(out, flat, path, NotTracked::OverBudget { size }, size);
                        return Ok(());
                    }
                    if self.txn.put_encoded(blob)? {
                        out.new_bytes += size;
                    }
                }
                self.known.push((path.clone(), Known { stat, id }));
                if self.keep_stats {
                    out.stats.insert(path.clone(), stat);
                }
                flat.items
                    .insert(path, item(EntryKind::File, stat.perm(), size, id));
            }
        }
        Ok(())
    }
}

/// Record `path`, seen but not read, as `kind` (4 or 6), and tell why
/// unless it was not read on purpose.
fn not_read(out: &mut Snapshot, flat: &mut Flat, path: Vec<u8>, kind: EntryKind, why: NotRead) {
    if let Some(told) = NotTracked::of(why) {
        out.not_tracked.push((path.clone(), told));
    }
    let item = Item {
        kind,
        mode: 0,
        size: 0,
        id: ObjectId::ZERO,
    };
    flat.items.insert(path, item);
}
