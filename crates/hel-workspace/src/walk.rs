//! The walk of a project for a snapshot, in parallel and by descriptors:
//! what is there, with its `lstat`, and for files what the stat cache
//! vouches for or what was read.
//!
//! What is included: everything under the project directory that
//! `.gitignore` files, `.git/info/exclude` and git's global excludes file
//! do not ignore (whether or not the project is a git repository), hidden
//! files included. Never `.git`, `.hel` or `.jj` (at any depth, any case);
//! a directory holding `.git` (a nested repository or submodule) is listed
//! as such and not entered; links are recorded, never followed; FIFOs,
//! sockets and devices are left out unopened.
//!
//! Every directory is opened relative to its parent's descriptor with
//! `O_NOFOLLOW`, so a directory swapped for a link mid-walk is never
//! followed out of the project; files are opened relative to their
//! directory, never blocking (`O_NONBLOCK`), checked to be the regular
//! file the walk saw; ignore files are read the same way, at most
//! [`IGNORE_FILE_BYTES`] each, so a FIFO named `.gitignore` cannot hang a
//! snapshot.

use std::ffi::OsStr;
use std::io::Read as _;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use hel_store::tree::{bad_name, DEPTH_MAX, TARGET_MAX};
use hel_store::{Cap, Encoded, ObjectId};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::cache::Cache;
use crate::flat::{join, Flat, PATH_MAX};
use crate::stat::FileStat;

/// Bytes of an ignore file read; the rest is not applied.
pub const IGNORE_FILE_BYTES: u64 = 1 << 20;

/// What the walk found at a path.
#[derive(Debug)]
pub enum Found {
    File(Content),
    /// A symbolic link and its target.
    Symlink(Vec<u8>),
    Dir,
    /// A directory holding `.git`: left out whole.
    Repository,
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
    /// Over the most it may hold: its size.
    TooLarge(u64),
    /// Could not be read.
    Unreadable(String),
    /// No longer there, or no longer the regular file the walk saw.
    Gone,
}

/// A path the walk found, relative to the project, with its `lstat`.
#[derive(Debug)]
pub struct Entry {
    pub path: Vec<u8>,
    pub stat: FileStat,
    pub found: Found,
}

/// What the walk left out and the user may want to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skipped {
    /// A name a tree cannot hold.
    BadName(Vec<u8>),
    /// Deeper than a tree may nest, or a path too long.
    TooDeep(Vec<u8>),
    /// Could not be read (permissions, vanished during the walk).
    Unreadable(Vec<u8>, String),
}

/// Why a walk failed as a whole.
#[derive(Debug, thiserror::Error)]
#[error("cannot walk the project {path}: {reason}")]
pub struct WalkError {
    pub path: String,
    pub reason: String,
}

/// What the walk reports besides its entries.
#[derive(Debug, Default)]
pub struct Walked {
    pub skipped: Vec<Skipped>,
    /// FIFOs, sockets and devices left out.
    pub special: u64,
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
}

/// A name no snapshot enters: one no tree may hold.
pub use hel_store::tree::is_never;

/// The ignore rules of one directory, and its parent's.
struct Rules {
    gitignore: Option<Gitignore>,
    parent: Option<Arc<Rules>>,
}

/// A directory waiting to be listed.
struct Job {
    fd: OwnedFd,
    rel: Vec<u8>,
    depth: usize,
    rules: Option<Arc<Rules>>,
}

/// The shared queue of directories, and how many are being listed.
struct Queue {
    state: Mutex<(Vec<Job>, usize)>,
    more: Condvar,
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Open regular file `name` in `dir` without following a link or blocking
/// on a FIFO; `None` when it is not a regular file.
pub(crate) fn open_regular(
    dir: BorrowedFd<'_>,
    name: &[u8],
) -> rustix::io::Result<Option<(OwnedFd, FileStat)>> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    let st = FileStat::of(&rustix::fs::fstat(&fd)?);
    Ok(st.is_file().then_some((fd, st)))
}

/// A gitignore matcher from the file `name` in `dir` (whose path is
/// `abs`), or None when there is none to read.
fn load_ignore(dir: BorrowedFd<'_>, name: &str, abs: &Path) -> Option<Gitignore> {
    let (fd, _) = open_regular(dir, name.as_bytes()).ok()??;
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(IGNORE_FILE_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
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
    b.build().ok().filter(|g| !g.is_empty())
}

/// The project-wide rules: `.git/info/exclude` and git's global excludes.
struct Global {
    exclude: Option<Gitignore>,
    global: Option<Gitignore>,
}

impl Global {
    fn load(project: BorrowedFd<'_>, root: &Path) -> Global {
        let exclude = rustix::fs::openat(project, ".git", DIR_FLAGS, Mode::empty())
            .and_then(|git| rustix::fs::openat(&git, "info", DIR_FLAGS, Mode::empty()))
            .ok()
            .and_then(|info| load_ignore(info.as_fd(), "exclude", root));
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
fn ignored(
    root: &Path,
    rules: &Option<Arc<Rules>>,
    global: &Global,
    rel: &[u8],
    is_dir: bool,
) -> bool {
    if rules.is_none() && global.exclude.is_none() && global.global.is_none() {
        return false;
    }
    let abs = root.join(OsStr::from_bytes(rel));
    let mut at = rules.as_deref();
    while let Some(r) = at {
        if let Some(g) = &r.gitignore {
            match g.matched(&abs, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        at = r.parent.as_deref();
    }
    for g in [&global.exclude, &global.global].into_iter().flatten() {
        match g.matched(&abs, is_dir) {
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
            Match::None => {}
        }
    }
    false
}

/// What a walking thread sends.
enum Msg {
    Entry(Entry),
    Skipped(Skipped),
    Special,
}

/// Walk the project open as `project`, calling `each` on this thread for
/// every entry found (in no particular order) while other threads go on
/// walking and reading.
pub fn walk(
    project: BorrowedFd<'_>,
    plan: &Plan<'_>,
    mut each: impl FnMut(Entry),
) -> Result<Walked, WalkError> {
    let failed = |e: Errno| WalkError {
        path: plan.root.display().to_string(),
        reason: e.to_string(),
    };
    let top = rustix::fs::openat(project, ".", DIR_FLAGS, Mode::empty()).map_err(failed)?;
    let global = Global::load(project, plan.root);
    let root_rules = load_ignore(top.as_fd(), ".gitignore", plan.root).map(|g| {
        Arc::new(Rules {
            gitignore: Some(g),
            parent: None,
        })
    });
    let queue = Queue {
        state: Mutex::new((
            vec![Job {
                fd: top,
                rel: Vec::new(),
                depth: 0,
                rules: root_rules,
            }],
            0,
        )),
        more: Condvar::new(),
    };
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    let mut walked = Walked::default();
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Msg>>(64);
        for _ in 0..threads {
            let tx = tx.clone();
            let (queue, global) = (&queue, &global);
            s.spawn(move || worker(queue, global, plan, &tx));
        }
        drop(tx);
        for batch in rx {
            for msg in batch {
                match msg {
                    Msg::Entry(e) => each(e),
                    Msg::Skipped(k) => walked.skipped.push(k),
                    Msg::Special => walked.special += 1,
                }
            }
        }
    });
    Ok(walked)
}

fn worker(
    queue: &Queue,
    global: &Global,
    plan: &Plan<'_>,
    tx: &std::sync::mpsc::SyncSender<Vec<Msg>>,
) {
    loop {
        let job = {
            let mut st = queue.state.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(job) = st.0.pop() {
                    st.1 += 1;
                    break Some(job);
                }
                if st.1 == 0 {
                    break None;
                }
                st = queue.more.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        };
        let Some(job) = job else {
            queue.more.notify_all();
            return;
        };
        let mut batch = Vec::new();
        let jobs = list(job, global, plan, &mut batch);
        // One message per directory: the caller's thread wakes once for
        // all its entries. A closed channel means the caller stopped.
        let _ = tx.send(batch);
        let mut st = queue.state.lock().unwrap_or_else(|p| p.into_inner());
        st.0.extend(jobs);
        st.1 -= 1;
        drop(st);
        queue.more.notify_all();
    }
}

/// List one directory: send its entries, return its subdirectories.
fn list(job: Job, global: &Global, plan: &Plan<'_>, out: &mut Vec<Msg>) -> Vec<Job> {
    let mut subdirs = Vec::new();
    let mut send = |m: Msg| out.push(m);
    let dir = match rustix::fs::Dir::read_from(&job.fd) {
        Ok(d) => d,
        Err(e) => {
            send(Msg::Skipped(Skipped::Unreadable(job.rel, e.to_string())));
            return subdirs;
        }
    };
    for item in dir {
        let item = match item {
            Ok(i) => i,
            Err(e) => {
                send(Msg::Skipped(Skipped::Unreadable(
                    job.rel.clone(),
                    e.to_string(),
                )));
                break;
            }
        };
        let name = item.file_name().to_bytes();
        if name == b"." || name == b".." || is_never(name) {
            continue;
        }
        let rel = join(&job.rel, name);
        if rel.len() > PATH_MAX || job.depth + 1 >= DEPTH_MAX {
            send(Msg::Skipped(Skipped::TooDeep(rel)));
            continue;
        }
        if bad_name(name).is_some() {
            send(Msg::Skipped(Skipped::BadName(rel)));
            continue;
        }
        let stat = match rustix::fs::statat(&job.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => FileStat::of(&st),
            Err(Errno::NOENT) => continue,
            Err(e) => {
                send(Msg::Skipped(Skipped::Unreadable(rel, e.to_string())));
                continue;
            }
        };
        let found = if stat.is_dir() {
            if ignored(plan.root, &job.rules, global, &rel, true) {
                continue;
            }
            let fd = match rustix::fs::openat(&job.fd, name, DIR_FLAGS, Mode::empty()) {
                Ok(fd) => fd,
                // Swapped for a link or gone since the lstat.
                Err(Errno::LOOP | Errno::NOTDIR | Errno::NOENT) => continue,
                Err(e) => {
                    send(Msg::Skipped(Skipped::Unreadable(rel, e.to_string())));
                    continue;
                }
            };
            if rustix::fs::statat(&fd, ".git", AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                Found::Repository
            } else {
                let abs = plan.root.join(OsStr::from_bytes(&rel));
                let rules = match load_ignore(fd.as_fd(), ".gitignore", &abs) {
                    Some(g) => Some(Arc::new(Rules {
                        gitignore: Some(g),
                        parent: job.rules.clone(),
                    })),
                    None => job.rules.clone(),
                };
                subdirs.push(Job {
                    fd,
                    rel: rel.clone(),
                    depth: job.depth + 1,
                    rules,
                });
                Found::Dir
            }
        } else if stat.is_file() || stat.is_symlink() {
            if ignored(plan.root, &job.rules, global, &rel, false) {
                continue;
            }
            if stat.is_symlink() {
                match rustix::fs::readlinkat(&job.fd, name, Vec::new()) {
                    Ok(t)
                        if !t.as_bytes().is_empty() && t.as_bytes().len() as u64 <= TARGET_MAX =>
                    {
                        Found::Symlink(t.into_bytes())
                    }
                    Ok(_) => {
                        send(Msg::Skipped(Skipped::Unreadable(
                            rel,
                            "a symbolic link target over 4095 bytes".into(),
                        )));
                        continue;
                    }
                    Err(Errno::NOENT) => continue,
                    Err(e) => {
                        send(Msg::Skipped(Skipped::Unreadable(rel, e.to_string())));
                        continue;
                    }
                }
            } else {
                Found::File(content(job.fd.as_fd(), name, &rel, &stat, plan))
            }
        } else {
            send(Msg::Special);
            continue;
        };
        send(Msg::Entry(Entry {
            path: rel,
            stat,
            found,
        }));
    }
    subdirs
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
    if let Some(id) = plan.cache.lookup(rel, stat) {
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
    read(dir, name, stat, max)
}

/// Read file `name` in `dir` if it is still the regular file `seen`, at
/// most `max` bytes, and encode it as a blob.
pub fn read(dir: BorrowedFd<'_>, name: &[u8], seen: &FileStat, max: u64) -> Content {
    let (fd, stat) = match open_regular(dir, name) {
        Ok(Some(x)) => x,
        Ok(None) | Err(Errno::NOENT | Errno::LOOP) => return Content::Gone,
        Err(e) => return Content::Unreadable(e.to_string()),
    };
    if stat.ino != seen.ino || stat.dev != seen.dev {
        return Content::Gone;
    }
    if stat.size > max {
        return Content::TooLarge(stat.size);
    }
    let mut bytes = Vec::with_capacity(stat.size as usize);
    if let Err(e) = std::fs::File::from(fd)
        .take(max + 1)
        .read_to_end(&mut bytes)
    {
        return Content::Unreadable(e.to_string());
    }
    if bytes.len() as u64 > max {
        return Content::TooLarge(bytes.len() as u64);
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

/// Open directory `dir` (relative, `/`-separated, maybe empty) beneath
/// `project`, one component at a time, never following a link.
pub fn open_dir(project: BorrowedFd<'_>, dir: &[u8]) -> rustix::io::Result<OwnedFd> {
    let mut cur = rustix::fs::openat(project, ".", DIR_FLAGS, Mode::empty())?;
    if !dir.is_empty() {
        for name in dir.split(|&c| c == b'/') {
            cur = rustix::fs::openat(&cur, name, DIR_FLAGS, Mode::empty())?;
        }
    }
    Ok(cur)
}

/// The path `rel` of the project as a path.
pub fn path_of(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(OsStr::from_bytes(rel))
}
