//! The walk of a project for a snapshot, in parallel and by descriptors:
//! what is there, with its `lstat`, and for files what the stat cache
//! vouches for or what was read.
//!
//! What is read: everything under the project directory that `.gitignore`
//! files, `.git/info/exclude` and git's global excludes file do not ignore
//! (whether or not the project is a git repository), hidden files
//! included. Never `.git`, `.hel` or `.jj` (at any depth, any case); a
//! directory holding `.git` (a nested repository or submodule) is listed
//! as such and not entered; links are recorded, never followed.
//!
//! A walk never leaves a path out silently: what it sees but does not read
//! is an entry too ([`Found::NotRead`], [`Found::DirNotRead`]): ignored
//! paths (never opened, never entered), FIFOs, sockets and devices (never
//! opened), what cannot be opened or read, what changed under it, what
//! falls past the path budget. A directory is [`Found::Dir`] only when
//! it was listed whole: every name in it is an entry of the walk (but
//! `.git`, `.hel` and `.jj`, which no tree holds). One that cannot be
//! opened, whose listing fails part way, that holds a name a tree cannot
//! hold, or that falls past the budget is a [`Found::DirNotRead`] and
//! none of its entries are sent.
//!
//! Every directory is opened relative to its parent's descriptor with
//! `O_NOFOLLOW` (or, when that descriptor is no longer kept, from the
//! project one component at a time, the same way) and checked to be the
//! directory its parent saw, so a directory swapped for a link mid-walk is
//! never followed out of the project; files are opened relative to their
//! directory, never blocking (`O_NONBLOCK`), checked to be the regular
//! file the walk saw; ignore files are read the same way, at most
//! [`IGNORE_FILE_BYTES`] each, so a FIFO named `.gitignore` cannot hang a
//! snapshot.
//!
//! Descriptors are bounded whatever the tree's shape: a directory waiting
//! to be listed holds none of its own, only a share of its parent's while
//! fewer than [`SHARED_FDS`] are shared, and each walking thread holds at
//! most two at once (its directory, listed through that same descriptor,
//! and one file). A thousand sibling directories cost what one does.
//!
//! What a directory costs is kept to what git's own walk pays: it is
//! listed first, names only, into the thread's buffer, so that `.git` and
//! `.gitignore` are looked for only when listed (no failed `stat` and
//! `open` in every directory); then one `lstat` per name, relative to the
//! directory's descriptor. The entries of several directories go to the
//! caller in one message, and a thread is woken only when there is a
//! directory to list or the walk is over.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use hel_fs::at;
use hel_secrets::Detector;
use hel_store::tree::{bad_name, is_never, DEPTH_MAX, PATH_MAX, TARGET_MAX};
use hel_store::{Cap, Encoded, ObjectId};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use rustix::fs::AtFlags;
use rustix::io::Errno;

use crate::cache::Cache;
use crate::flat::{join, Flat};
use crate::stat::FileStat;

/// Bytes of an ignore file read; the rest is not applied.
pub const IGNORE_FILE_BYTES: u64 = 1 << 20;

/// The most directory descriptors kept open for directories waiting to
/// be listed; past it they are opened again by path when their turn
/// comes.
pub const SHARED_FDS: usize = 16;

/// The most threads a walk uses.
const THREADS_MAX: usize = 8;

/// What the walk found at a path.
#[derive(Debug)]
pub enum Found {
    File(Content),
    /// A symbolic link and its target.
    Symlink(Vec<u8>),
    /// A directory listed whole: every name in it (but `.git`, `.hel` and
    /// `.jj`) is an entry of the walk.
    Dir,
    /// A directory holding `.git`: left out whole.
    Repository,
    /// A directory the walk did not read (nothing under it is sent).
    DirNotRead(NotRead),
    /// Something other than a directory that the walk saw but did not
    /// read.
    NotRead(NotRead),
}

/// Why the walk did not read a path it saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotRead {
    /// Ignored by a rule: never opened, never entered.
    Ignored,
    /// A FIFO, socket or device: never opened.
    Special,
    /// Could not be opened, listed or read (permissions, too many open
    /// files, an I/O error): why.
    Unreadable(String),
    /// A directory past the snapshot's budget of paths.
    PastPaths,
    /// A directory holding what no tree can hold: what.
    Unrecordable(&'static str),
    /// Replaced by something else while the walk looked at it.
    Changed,
}

/// A regular file's content as the walk knows it.
#[derive(Debug)]
pub enum Content {
    /// The stat cache names it (the caller checks it is stored).
    Cached(ObjectId),
    /// Read, hashed and compressed; its `fstat` before the read.
    Read {
        blob: Encoded,
        stat: FileStat,
        size: u64,
    },
    /// Read, and its content holds a secret ([`holds_secret`]): not
    /// encoded, never stored. Its `fstat` before the read (or the `lstat`
    /// that matched a file found holding one before), and its size.
    Secret { stat: FileStat, size: u64 },
    /// Over the most it may hold: its size.
    TooLarge(u64),
    /// Could not be read.
    Unreadable(String),
    /// No longer the regular file the walk saw (another file or a link).
    Changed,
    /// No longer there.
    Gone,
}

/// A path the walk found, relative to the project, with its `lstat`.
#[derive(Debug)]
pub struct Entry {
    pub path: Vec<u8>,
    pub stat: FileStat,
    pub found: Found,
}

/// Why a walk failed as a whole: the project directory itself could not
/// be listed whole (it has no entry of its own to say so).
#[derive(Debug, thiserror::Error)]
#[error("cannot walk the project {path}: {reason}")]
pub struct WalkError {
    pub path: String,
    pub reason: String,
}

/// What a walk needs to decide what to read.
pub struct Plan<'a> {
    /// The project's path (ignore rules match paths under it).
    pub root: &'a Path,
    pub cache: &'a Cache,
    /// The session's last snapshot: a file it tracked is read whatever its
    /// size (up to [`Cap::FILE`]).
    pub prev: Option<&'a Flat>,
    /// The most bytes a file not tracked before is read.
    pub max_file: u64,
    /// The most paths the walk sends (past them, directories are not
    /// read); at most [`hel_store::tree::FLAT_PATHS_MAX`].
    pub paths_max: u64,
    /// The most bytes of paths (each counted whole) the walk sends.
    pub bytes_max: u64,
    /// Where each directory is watched before it is listed, when
    /// notifications are on.
    pub watch: Option<&'a crate::watch::Walking<'a>>,
    /// What finds a secret in a file read (`None`: nothing is scanned).
    pub secrets: Option<&'a Detector>,
    /// The `lstat` of files an earlier walk of this process found holding
    /// a secret: one that still matches is not read again.
    pub held_secrets: &'a crate::Set<FileStat>,
}

/// The ignore rules of one directory, and its parent's.
struct Rules {
    gitignore: Option<Gitignore>,
    /// The bytes of a path (relative to the project) that name the
    /// directory the rules are in, with its `/`: what is cut off a path
    /// to match it against them.
    dir: usize,
    parent: Option<Arc<Rules>>,
}

/// A directory descriptor shared by the directories in it waiting to be
/// listed; closed when the last of them opened itself.
struct Held<'a> {
    fd: OwnedFd,
    /// How many are shared now.
    count: &'a AtomicUsize,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A directory waiting to be listed: its name in its parent, whose
/// descriptor it may share, and what its parent saw of it.
struct Job<'a> {
    parent: Option<Arc<Held<'a>>>,
    name: Vec<u8>,
    rel: Vec<u8>,
    depth: usize,
    stat: FileStat,
    /// The parent directory's device (a mount point is checked to be a
    /// local file system before it is watched).
    parent_dev: u64,
    rules: Option<Arc<Rules>>,
}

/// The shared queue of directories, and how many are being listed.
struct Queue<'a> {
    state: Mutex<(Vec<Job<'a>>, usize)>,
    more: Condvar,
}

/// What all walking threads share.
struct Ctx<'a> {
    project: BorrowedFd<'a>,
    global: Global,
    plan: &'a Plan<'a>,
    /// Paths and bytes of paths the walk may still send.
    paths_left: AtomicU64,
    bytes_left: AtomicU64,
    /// Descriptors shared by waiting directories.
    held: &'a AtomicUsize,
}

impl Ctx<'_> {
    /// Take `paths` and `bytes` from what is left, all or nothing.
    fn reserve(&self, paths: u64, bytes: u64) -> bool {
        let take = |left: &AtomicU64, n: u64| {
            left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(n))
                .is_ok()
        };
        if !take(&self.paths_left, paths) {
            return false;
        }
        if !take(&self.bytes_left, bytes) {
            self.paths_left.fetch_add(paths, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Whether `paths` and `bytes` could still be taken.
    fn fits(&self, paths: u64, bytes: u64) -> bool {
        paths <= self.paths_left.load(Ordering::Relaxed)
            && bytes <= self.bytes_left.load(Ordering::Relaxed)
    }
}

/// Open regular file `name` in `dir` without following a link or blocking
/// on a FIFO; `None` when it is not a regular file.
pub(crate) fn open_regular(
    dir: BorrowedFd<'_>,
    name: &[u8],
) -> rustix::io::Result<Option<(OwnedFd, FileStat)>> {
    Ok(at::open_regular(dir, name)?.map(|(fd, st)| (fd, FileStat::of(&st))))
}

/// A gitignore matcher from the file `name` in `dir` (whose path is
/// `abs`): `None` when there is none (no such file, or not a regular
/// file); `Err` when there is one that cannot be read.
fn load_ignore(dir: BorrowedFd<'_>, name: &str, abs: &Path) -> Result<Option<Gitignore>, String> {
    let fd = match open_regular(dir, name.as_bytes()) {
        Ok(Some((fd, _))) => fd,
        Ok(None) | Err(Errno::NOENT | Errno::LOOP) => return Ok(None),
        Err(e) => return Err(format!("cannot read its {name}: {e}")),
    };
    let bytes = hel_fs::read_head(std::fs::File::from(fd), IGNORE_FILE_BYTES)
        .map_err(|e| format!("cannot read its {name}: {e}"))?;
    let mut b = GitignoreBuilder::new(abs);
    let from = abs.join(name);
    for (i, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        let _ = b.add_line(Some(from.clone()), line);
    }
    Ok(b.build().ok().filter(|g| !g.is_empty()))
}

/// The project-wide rules: `.git/info/exclude` and git's global excludes.
struct Global {
    exclude: Option<Gitignore>,
    global: Option<Gitignore>,
}

impl Global {
    fn load(project: BorrowedFd<'_>, root: &Path) -> Global {
        let exclude = at::open_dir(project, ".git")
            .and_then(|git| at::open_dir(&git, "info"))
            .ok()
            .and_then(|info| load_ignore(info.as_fd(), "exclude", root).ok().flatten());
        // The user's own configuration (not the project's): read as git does.
        let (global, _) = GitignoreBuilder::new(root).build_global();
        Global {
            exclude,
            global: (!global.is_empty()).then_some(global),
        }
    }
}

/// Is `rel` ignored: `.gitignore` rules from the deepest directory up,
/// then `.git/info/exclude`, then the global excludes; the first that
/// matches decides.
fn ignored(rules: &Option<Arc<Rules>>, global: &Global, rel: &[u8], is_dir: bool) -> bool {
    if rules.is_none() && global.exclude.is_none() && global.global.is_none() {
        return false;
    }
    // Each matcher is given the path relative to its own directory, what
    // it would cut an absolute path down to (rather than an absolute path
    // built for every path walked).
    let mut at = rules.as_deref();
    while let Some(r) = at {
        if let Some(g) = &r.gitignore {
            let below = rel.get(r.dir..).unwrap_or_default();
            match g.matched(Path::new(OsStr::from_bytes(below)), is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        at = r.parent.as_deref();
    }
    let rel = Path::new(OsStr::from_bytes(rel));
    for g in [&global.exclude, &global.global].into_iter().flatten() {
        match g.matched(rel, is_dir) {
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
            Match::None => {}
        }
    }
    false
}

/// What a walking thread sends: the entries of one directory listed
/// whole (its own among them), or the one entry saying it was not, or
/// that the project directory itself could not be listed.
enum Msg {
    Entries(Vec<Entry>),
    RootFailed(String),
}

/// Walk the project open as `project`, calling `each` on this thread for
/// every entry found (in no particular order) while other threads go on
/// walking and reading. Every path under the project is an entry or under
/// a [`Found::DirNotRead`] or [`Found::Repository`] entry, but for paths
/// that vanished while it looked and `.git`, `.hel` and `.jj`. Refused
/// when the project directory itself cannot be listed whole.
pub fn walk(
    project: BorrowedFd<'_>,
    plan: &Plan<'_>,
    mut each: impl FnMut(Entry),
) -> Result<(), WalkError> {
    let failed = |reason: String| WalkError {
        path: plan.root.display().to_string(),
        reason,
    };
    let top_stat = FileStat::of(&rustix::fs::fstat(project).map_err(|e| failed(e.to_string()))?);
    let held = AtomicUsize::new(0);
    let ctx = Ctx {
        project,
        global: Global::load(project, plan.root),
        plan,
        paths_left: AtomicU64::new(plan.paths_max),
        bytes_left: AtomicU64::new(plan.bytes_max),
        held: &held,
    };
    let queue = Queue {
        state: Mutex::new((
            vec![Job {
                parent: None,
                name: Vec::new(),
                rel: Vec::new(),
                depth: 0,
                stat: top_stat,
                parent_dev: top_stat.dev,
                rules: None,
            }],
            0,
        )),
        more: Condvar::new(),
    };
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(THREADS_MAX));
    let mut root_failed = None;
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(64);
        // Fewer threads than asked for (a process or container limit)
        // walk the same; none at all is an error, not a panic.
        let mut started = 0;
        for _ in 0..threads {
            let tx = tx.clone();
            let (queue, ctx) = (&queue, &ctx);
            // The failpoint `thread-spawn` stands for that limit in tests.
            if !hel_fs::failpoint::hit("thread-spawn")
                && std::thread::Builder::new()
                    .spawn_scoped(s, move || worker(queue, ctx, &tx))
                    .is_ok()
            {
                started += 1;
            }
        }
        drop(tx);
        if started == 0 {
            root_failed = Some("no thread could be started to walk it".to_owned());
        }
        for msg in rx {
            match msg {
                Msg::Entries(batch) => batch.into_iter().for_each(&mut each),
                Msg::RootFailed(why) => root_failed = Some(why),
            }
        }
    });
    match root_failed {
        Some(why) => Err(failed(why)),
        None => Ok(()),
    }
}

/// Entries a walking thread gathers (from as many directories as it
/// lists meanwhile) before it sends them.
const BATCH: usize = 256;

/// Bytes of the buffer a walking thread lists directories into.
const DIRENT_BUF: usize = 32 << 10;

/// A walking thread's buffers, reused from one directory to the next.
struct Scratch {
    dirents: Vec<std::mem::MaybeUninit<u8>>,
    /// The names of the directory being listed, one after another, and
    /// where each ends.
    names: Vec<u8>,
    ends: Vec<usize>,
}

impl Scratch {
    /// The names listed, in their order.
    fn names(&self) -> impl Iterator<Item = &[u8]> {
        self.ends.iter().scan(0, |start, &end| {
            Some(&self.names[std::mem::replace(start, end)..end])
        })
    }

    /// Whether a name listed is `what` in any case.
    fn has(&self, what: &[u8]) -> bool {
        self.names().any(|n| n.eq_ignore_ascii_case(what))
    }
}

fn worker<'a>(queue: &Queue<'a>, ctx: &Ctx<'a>, tx: &std::sync::mpsc::SyncSender<Msg>) {
    let mut scratch = Scratch {
        dirents: vec![std::mem::MaybeUninit::uninit(); DIRENT_BUF],
        names: Vec::new(),
        ends: Vec::new(),
    };
    // Entries of several directories go in one message: the caller's
    // thread (and this one) wakes once for all of them. A closed channel
    // means the caller stopped.
    let mut batch: Vec<Entry> = Vec::new();
    loop {
        let mut st = queue.state.lock().unwrap_or_else(|p| p.into_inner());
        let job = loop {
            if let Some(job) = st.0.pop() {
                st.1 += 1;
                break Some(job);
            }
            if st.1 == 0 {
                break None;
            }
            if !batch.is_empty() {
                // Nothing to list now: what was gathered goes before this
                // thread waits.
                drop(st);
                let _ = tx.send(Msg::Entries(std::mem::take(&mut batch)));
                st = queue.state.lock().unwrap_or_else(|p| p.into_inner());
                continue;
            }
            st = queue.more.wait(st).unwrap_or_else(|p| p.into_inner());
        };
        drop(st);
        let Some(job) = job else {
            if !batch.is_empty() {
                let _ = tx.send(Msg::Entries(batch));
            }
            queue.more.notify_all();
            return;
        };
        let (msg, jobs) = visit(job, ctx, &mut scratch);
        match msg {
            Some(Msg::Entries(entries)) if batch.is_empty() => batch = entries,
            Some(Msg::Entries(entries)) => batch.extend(entries),
            Some(other) => {
                let _ = tx.send(other);
            }
            None => {}
        }
        if batch.len() >= BATCH {
            let _ = tx.send(Msg::Entries(std::mem::take(&mut batch)));
        }
        let mut st = queue.state.lock().unwrap_or_else(|p| p.into_inner());
        let new = jobs.len();
        st.0.extend(jobs);
        st.1 -= 1;
        let done = st.1 == 0 && st.0.is_empty();
        drop(st);
        // Waiting threads wait for a job or for the end: woken for those
        // only.
        match new {
            0 if !done => {}
            1 => queue.more.notify_one(),
            _ => queue.more.notify_all(),
        }
    }
}

/// What listing one directory came to.
enum Listed {
    /// Listed whole: its entries and its subdirectories (name, path,
    /// `lstat`), with the descriptor they are opened from.
    Whole {
        fd: OwnedFd,
        stat: FileStat,
        rules: Option<Arc<Rules>>,
        entries: Vec<Entry>,
        subdirs: Vec<(Vec<u8>, Vec<u8>, FileStat)>,
        paths: u64,
        bytes: u64,
    },
    Repository(FileStat),
    NotRead(NotRead),
    /// It vanished since its parent listed it.
    Gone,
}

/// List one directory and say what came of it: the message to send (its
/// entry and its entries, or the entry saying it was not read) and its
/// subdirectories to list.
fn visit<'a>(job: Job<'a>, ctx: &Ctx<'a>, scratch: &mut Scratch) -> (Option<Msg>, Vec<Job<'a>>) {
    let is_root = job.rel.is_empty();
    let (rel, depth, seen) = (job.rel.clone(), job.depth, job.stat);
    let listed = list(job, ctx, scratch);
    let listed = match listed {
        Listed::Whole { paths, bytes, .. } if !ctx.reserve(paths, bytes) => {
            Listed::NotRead(NotRead::PastPaths)
        }
        other => other,
    };
    let one = |stat, found| {
        Some(Msg::Entries(vec![Entry {
            path: rel.clone(),
            stat,
            found,
        }]))
    };
    match listed {
        Listed::Whole {
            fd,
            stat,
            rules,
            mut entries,
            subdirs,
            ..
        } => {
            if !is_root {
                entries.push(Entry {
                    path: rel.clone(),
                    stat,
                    found: Found::Dir,
                });
            }
            let parent = (!subdirs.is_empty()).then(|| share(fd, ctx.held)).flatten();
            let jobs = subdirs
                .into_iter()
                .map(|(name, rel, sub)| Job {
                    parent: parent.clone(),
                    name,
                    rel,
                    depth: depth + 1,
                    stat: sub,
                    parent_dev: stat.dev,
                    rules: rules.clone(),
                })
                .collect();
            (Some(Msg::Entries(entries)), jobs)
        }
        _ if is_root => {
            let why = match listed {
                Listed::NotRead(NotRead::Unreadable(why)) => why,
                Listed::NotRead(NotRead::PastPaths) => format!(
                    "it holds more than {} paths, over what a snapshot records",
                    ctx.plan.paths_max
                ),
                Listed::NotRead(NotRead::Unrecordable(what)) => format!("it holds {what}"),
                _ => "it changed while it was listed".into(),
            };
            (Some(Msg::RootFailed(why)), Vec::new())
        }
        Listed::Repository(stat) => (one(stat, Found::Repository), Vec::new()),
        Listed::NotRead(why) => (one(seen, Found::DirNotRead(why)), Vec::new()),
        Listed::Gone => (None, Vec::new()),
    }
}

/// `fd` shared with the directories in it, when fewer than [`SHARED_FDS`]
/// are; otherwise closed (they are opened again by path).
fn share<'a>(fd: OwnedFd, count: &'a AtomicUsize) -> Option<Arc<Held<'a>>> {
    count
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < SHARED_FDS).then_some(n + 1)
        })
        .ok()?;
    Some(Arc::new(Held { fd, count }))
}

/// Open and list the directory of `job`, all or nothing.
fn list<'a>(job: Job<'a>, ctx: &Ctx<'a>, scratch: &mut Scratch) -> Listed {
    listing(job, ctx, scratch).unwrap_or_else(|short| short)
}

/// [`list`], each way it stops short of a whole listing an `Err`.
fn listing<'a>(job: Job<'a>, ctx: &Ctx<'a>, scratch: &mut Scratch) -> Result<Listed, Listed> {
    let (fd, stat) = open(job.parent, &job.name, &job.rel, &job.stat, ctx)?;
    // Watched before anything in it is looked at: a change after this
    // point gives an event, one before it is what the listing sees.
    if let Some(w) = ctx.plan.watch {
        w.add(fd.as_fd(), &stat, job.parent_dev, job.rel.is_empty());
    }
    read_names(fd.as_fd(), &job.rel, ctx, scratch)?;
    if !job.rel.is_empty() && is_repository(&fd, scratch)? {
        return Ok(Listed::Repository(stat));
    }
    let rules = rules_here(fd.as_fd(), &job.rel, &job.rules, ctx.plan, scratch)?;
    let mut here = Entries::default();
    for name in scratch.names() {
        if is_never(name) {
            continue;
        }
        here.add(&fd, name, &job.rel, job.depth, &rules, ctx)?;
    }
    Ok(Listed::Whole {
        fd,
        stat,
        rules,
        entries: here.entries,
        subdirs: here.subdirs,
        paths: here.paths,
        bytes: here.bytes,
    })
}

/// Open the directory `name` (at `rel`) from its parent's descriptor when
/// shared, else by path; it must still be what its parent's `lstat` saw.
fn open(
    parent: Option<Arc<Held<'_>>>,
    name: &[u8],
    rel: &[u8],
    seen: &FileStat,
    ctx: &Ctx<'_>,
) -> Result<(OwnedFd, FileStat), Listed> {
    let opened = match &parent {
        Some(p) => at::open_dir(&p.fd, name),
        None => at::open_dir_beneath(ctx.project, rel),
    };
    // The parent's descriptor is not needed any more: let it close.
    drop(parent);
    let fd = match opened {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Err(Listed::Gone),
        // Swapped for a link or a file since its parent's lstat.
        Err(Errno::LOOP | Errno::NOTDIR) => return Err(Listed::NotRead(NotRead::Changed)),
        Err(e) => return Err(Listed::NotRead(NotRead::Unreadable(e.to_string()))),
    };
    let stat = match rustix::fs::fstat(&fd) {
        Ok(st) => FileStat::of(&st),
        Err(e) => return Err(Listed::NotRead(NotRead::Unreadable(e.to_string()))),
    };
    if stat.ino != seen.ino || stat.dev != seen.dev {
        return Err(Listed::NotRead(NotRead::Changed));
    }
    Ok((fd, stat))
}

/// The names in `fd` (the directory at `rel`), read from this very
/// descriptor (opened here, so at its start) into the thread's buffer.
/// The listing is bounded as it is read: past the paths and bytes the
/// walk may still take it is not read further (a directory of millions of
/// names is not kept whole in memory first).
fn read_names(
    fd: BorrowedFd<'_>,
    rel: &[u8],
    ctx: &Ctx<'_>,
    scratch: &mut Scratch,
) -> Result<(), Listed> {
    let Scratch {
        dirents,
        names,
        ends,
    } = scratch;
    names.clear();
    ends.clear();
    // A test can make a listing fail part way (after its first entry).
    let fail = hel_fs::failpoint::hit("walk-readdir");
    let mut raw = rustix::fs::RawDir::new(fd, dirents);
    let mut k = 0usize;
    let (mut listed_paths, mut listed_bytes) = (0u64, 0u64);
    while let Some(item) = raw.next() {
        let item = match item {
            Ok(_) if fail && k > 0 => {
                return Err(Listed::NotRead(NotRead::Unreadable(
                    "failpoint walk-readdir".into(),
                )))
            }
            Ok(i) => i,
            Err(e) => return Err(Listed::NotRead(NotRead::Unreadable(e.to_string()))),
        };
        k += 1;
        let name = item.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if !is_never(name) {
            listed_paths += 1;
            listed_bytes += (rel.len() + usize::from(!rel.is_empty()) + name.len()) as u64;
            if !ctx.fits(listed_paths, listed_bytes) {
                return Err(Listed::NotRead(NotRead::PastPaths));
            }
        }
        names.extend_from_slice(name);
        ends.push(names.len());
    }
    Ok(())
}

/// Whether the directory listed in `scratch` is a repository of its own:
/// it holds `.git`, listed so exactly or in another case (which a
/// case-insensitive directory may also resolve `.git` to).
fn is_repository(fd: &OwnedFd, scratch: &Scratch) -> Result<bool, Listed> {
    if !scratch.has(b".git") {
        return Ok(false);
    }
    if scratch.names().any(|n| n == b".git") {
        return Ok(true);
    }
    match rustix::fs::statat(fd, ".git", AtFlags::SYMLINK_NOFOLLOW) {
        Ok(_) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(Listed::NotRead(NotRead::Unreadable(e.to_string()))),
    }
}

/// The ignore rules in force in the directory at `rel`: its parent's
/// (`inherited`), with its own `.gitignore` when it lists one.
fn rules_here(
    fd: BorrowedFd<'_>,
    rel: &[u8],
    inherited: &Option<Arc<Rules>>,
    plan: &Plan<'_>,
    scratch: &Scratch,
) -> Result<Option<Arc<Rules>>, Listed> {
    if !scratch.has(b".gitignore") {
        return Ok(inherited.clone());
    }
    let abs = plan.root.join(OsStr::from_bytes(rel));
    match load_ignore(fd, ".gitignore", &abs) {
        Ok(Some(g)) => Ok(Some(Arc::new(Rules {
            gitignore: Some(g),
            dir: if rel.is_empty() { 0 } else { rel.len() + 1 },
            parent: inherited.clone(),
        }))),
        Ok(None) => Ok(inherited.clone()),
        Err(why) => Err(Listed::NotRead(NotRead::Unreadable(why))),
    }
}

/// What one directory's listing found: its entries, its subdirectories
/// to list (name, path, `lstat`), and the paths and bytes they count.
#[derive(Default)]
struct Entries {
    entries: Vec<Entry>,
    subdirs: Vec<(Vec<u8>, Vec<u8>, FileStat)>,
    paths: u64,
    bytes: u64,
}

impl Entries {
    /// Add `name`, listed in `fd` (the directory at `rel`, `depth` deep):
    /// an `Err` when the directory cannot be recorded whole.
    fn add(
        &mut self,
        fd: &OwnedFd,
        name: &[u8],
        rel: &[u8],
        depth: usize,
        rules: &Option<Arc<Rules>>,
        ctx: &Ctx<'_>,
    ) -> Result<(), Listed> {
        let rel = join(rel, name);
        if rel.len() > PATH_MAX {
            return Err(Listed::NotRead(NotRead::Unrecordable(
                "a path over 4095 bytes",
            )));
        }
        if depth + 1 >= DEPTH_MAX {
            return Err(Listed::NotRead(NotRead::Unrecordable(
                "more than 255 levels of directories",
            )));
        }
        if let Some(why) = bad_name(name) {
            return Err(Listed::NotRead(NotRead::Unrecordable(why)));
        }
        if !ctx.fits(self.paths + 1, self.bytes + rel.len() as u64) {
            return Err(Listed::NotRead(NotRead::PastPaths));
        }
        let stat = match rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => FileStat::of(&st),
            // Gone since the listing: not one of its paths.
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(Listed::NotRead(NotRead::Unreadable(e.to_string()))),
        };
        let is_dir = stat.is_dir();
        let found = if (is_dir || stat.is_file() || stat.is_symlink())
            && ignored(rules, &ctx.global, &rel, is_dir)
        {
            if is_dir {
                Found::DirNotRead(NotRead::Ignored)
            } else {
                Found::NotRead(NotRead::Ignored)
            }
        } else if is_dir {
            self.count(&rel);
            self.subdirs.push((name.to_vec(), rel, stat));
            return Ok(());
        } else if stat.is_symlink() {
            match symlink(fd, name) {
                Some(found) => found,
                None => return Ok(()),
            }
        } else if stat.is_file() {
            Found::File(content(fd.as_fd(), name, &rel, &stat, ctx.plan))
        } else {
            Found::NotRead(NotRead::Special)
        };
        self.count(&rel);
        self.entries.push(Entry {
            path: rel,
            stat,
            found,
        });
        Ok(())
    }

    fn count(&mut self, rel: &[u8]) {
        self.paths += 1;
        self.bytes += rel.len() as u64;
    }
}

/// The symbolic link `name` in `fd` read, or `None` when it is gone since
/// the listing.
fn symlink(fd: &OwnedFd, name: &[u8]) -> Option<Found> {
    Some(match rustix::fs::readlinkat(fd, name, Vec::new()) {
        Ok(t) if !t.as_bytes().is_empty() && t.as_bytes().len() as u64 <= TARGET_MAX => {
            Found::Symlink(t.into_bytes())
        }
        Ok(_) => Found::NotRead(NotRead::Unreadable(
            "a symbolic link target over 4095 bytes".into(),
        )),
        Err(Errno::NOENT) => return None,
        Err(Errno::INVAL) => Found::NotRead(NotRead::Changed),
        Err(e) => Found::NotRead(NotRead::Unreadable(e.to_string())),
    })
}

/// What the walk knows of file `name` in `dir` (at `rel`, with `stat`):
/// the cache's word for it, or its content read.
fn content(
    dir: BorrowedFd<'_>,
    name: &[u8],
    rel: &[u8],
    stat: &FileStat,
    plan: &Plan<'_>,
) -> Content {
    // Unchanged since a walk found a secret in it (a file changed within
    // the same clock tick with the same size keeps its `lstat` and is
    // still taken to hold one: the safe way to be wrong).
    if plan.held_secrets.contains(stat) {
        return Content::Secret {
            stat: *stat,
            size: stat.size,
        };
    }
    if let Some(id) = plan.cache.lookup(stat) {
        return Content::Cached(id);
    }
    let tracked = plan
        .prev
        .and_then(|f| f.get(rel))
        .is_some_and(|i| i.kind == hel_store::tree::EntryKind::File);
    let max = if tracked {
        Cap::FILE.max
    } else {
        plan.max_file.min(Cap::FILE.max)
    };
    if stat.size > max {
        return Content::TooLarge(stat.size);
    }
    read(dir, name, stat, max, plan.secrets)
}

/// Read file `name` in `dir` if it is still the regular file `seen`, at
/// most `max` bytes, and encode it as a blob, unless `secrets` finds a
/// secret in it ([`Content::Secret`]).
pub fn read(
    dir: BorrowedFd<'_>,
    name: &[u8],
    seen: &FileStat,
    max: u64,
    secrets: Option<&Detector>,
) -> Content {
    let (fd, stat) = match open_regular(dir, name) {
        Ok(Some(x)) => x,
        Err(Errno::NOENT) => return Content::Gone,
        Ok(None) | Err(Errno::LOOP) => return Content::Changed,
        Err(e) => return Content::Unreadable(e.to_string()),
    };
    if stat.ino != seen.ino || stat.dev != seen.dev {
        return Content::Changed;
    }
    if stat.size > max {
        return Content::TooLarge(stat.size);
    }
    let path = Path::new(OsStr::from_bytes(name));
    let bytes = match hel_fs::read_to_bound(std::fs::File::from(fd), stat.size, max, path) {
        Ok(b) => b,
        Err(hel_fs::Error::TooLarge { size, .. }) => return Content::TooLarge(size),
        Err(hel_fs::Error::Io { source, .. }) => return Content::Unreadable(source.to_string()),
        Err(e) => return Content::Unreadable(e.to_string()),
    };
    if holds_secret(secrets, &bytes) {
        return Content::Secret {
            stat,
            size: bytes.len() as u64,
        };
    }
    match hel_store::encode_blob(&bytes) {
        Ok(blob) => Content::Read {
            blob,
            stat,
            size: bytes.len() as u64,
        },
        Err(e) => Content::Unreadable(e.to_string()),
    }
}

/// Whether `bytes` (a file's content, a link's target) hold a secret that
/// `secrets` finds. The detector reads text: a text file that is not
/// UTF-8 is read with each invalid sequence replaced by U+FFFD; of a
/// binary file (a NUL byte in its first 8000 bytes, as git tells them)
/// only its runs of printable ASCII at least [`hel_secrets::MIN_VALUE`]
/// bytes long are read, one per line (what `strings` shows: a token in a
/// database file or a build is found, the rest of an image is not
/// scanned).
pub fn holds_secret(secrets: Option<&Detector>, bytes: &[u8]) -> bool {
    let Some(d) = secrets else {
        return false;
    };
    if !bytes[..bytes.len().min(8000)].contains(&0) {
        return !d.detect(&String::from_utf8_lossy(bytes)).is_empty();
    }
    let printable = |b: &u8| matches!(b, 0x20..=0x7e | b'\t' | b'\n' | b'\r');
    let mut text = String::new();
    for run in bytes.split(|b| !printable(b)) {
        if run.len() >= hel_secrets::MIN_VALUE {
            // Printable ASCII is UTF-8.
            text.push_str(std::str::from_utf8(run).unwrap_or_default());
            text.push('\n');
        }
    }
    !text.is_empty() && !d.detect(&text).is_empty()
}

/// The path `rel` of the project as a path.
pub fn path_of(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(OsStr::from_bytes(rel))
}
