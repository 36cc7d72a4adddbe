//! File-system notifications between the snapshots of one process
//! (Linux inotify), so that a snapshot with nothing changed since the
//! last one need not walk the project again.
//!
//! A workspace watches from its second walk on: a process that snapshots
//! once (undo, restore, diff) would pay for a watch per directory (about
//! a third of a walk) and never read one.
//!
//! The rule that makes a snapshot without a walk true: during a walk,
//! every directory is watched before it is listed (the watch is added to
//! the very directory the walk opened, through `/proc/self/fd`), so any
//! change to what the listing or the reads after it saw gives an event;
//! a later snapshot that finds no event, no overflow of the queue, no
//! change of the mount table and the same project-wide ignore files as
//! that walk may take the walk's result as it is. Anything else is a
//! doubt, and a doubt is a full walk: an event of any kind (but for the
//! names no snapshot enters, in the project directory itself), a queue
//! overflow, a watch that could not be added (the kernel's watch limit,
//! `/proc` not mounted), a directory on a file system that is not on the
//! local list ([`hel_fs::local_file_system`]: a network or FUSE file
//! system can change without telling this kernel), a mount or unmount
//! anywhere, and a last walk that left a path unread for a reason that
//! may pass (unreadable, changed while read, over the budget).
//!
//! inotify directly rather than the `notify` crate: the crate adds
//! watches by path from its own thread (racing with a directory swapped
//! for a link, and not in the walk's order), so it cannot promise that
//! the directory watched is the one listed, nor say that a watch failed
//! before the directory is listed.
//!
//! What inotify never reports, nothing here sees: writes through a
//! shared writable `mmap` (the kernel sends no event for them). A restore
//! checks every path's `lstat` again before it writes (objects-spec
//! §13.6), so such a file is not overwritten unseen; it is recorded at
//! the next snapshot that walks.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::{Map, Set};
use hel_store::tree::is_never;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

use crate::stat::FileStat;

/// What a watch reports: every change to a directory's names and to the
/// content and metadata of what it holds (not reads).
fn mask() -> WatchFlags {
    WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
}

/// The project-wide ignore files a walk applied, as their `stat`s and the
/// global file's path: when any differs, the rules may have changed
/// without an event (they are outside the watched directories).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    exclude: Option<FileStat>,
    global: Option<(PathBuf, Option<FileStat>)>,
}

impl Stamp {
    /// The stamp of `project`'s `.git/info/exclude` and git's global
    /// excludes file now.
    pub fn now(project: BorrowedFd<'_>) -> Stamp {
        let exclude = FileStat::at(project, b".git/info/exclude").ok();
        let global = ignore::gitignore::gitconfig_excludes_path().map(|p| {
            let st = std::fs::metadata(&p).ok().map(|m| {
                use std::os::unix::fs::MetadataExt;
                FileStat {
                    dev: m.dev(),
                    ino: m.ino(),
                    mode: m.mode(),
                    size: m.size(),
                    mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
                    ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
                }
            });
            (p, st)
        });
        Stamp { exclude, global }
    }
}

/// A directory's device and inode number.
type Inode = (u64, u64);

/// The project directory's watch and every watch of a walk.
type Added = (Option<i32>, Vec<(Inode, i32)>);

/// A project's watches, kept between snapshots.
pub struct Watch {
    inotify: OwnedFd,
    /// `/proc/self/mountinfo`, which polls as changed when anything is
    /// mounted or unmounted.
    mounts: OwnedFd,
    /// The project directory's watch and every watch of the last walk,
    /// by the directory's device and inode (a watch is the inode's, so a
    /// later walk that meets the inode again needs no new one).
    root: Option<i32>,
    live: Map<Inode, i32>,
    wds: Set<i32>,
    /// Whether every directory of the last walk was watched before it was
    /// listed (so its result stands until an event says otherwise).
    armed: bool,
}

/// Why notifications are off for the rest of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Off {
    /// inotify or `/proc` is not available.
    Unavailable,
    /// The project, or a directory mounted in it, is not on a local file
    /// system.
    NotLocal,
    /// The kernel's limit of watches (or of inotify instances) was hit.
    Limit,
}

impl Watch {
    /// Notifications for the project open as `project`, or why not.
    pub fn new(project: BorrowedFd<'_>) -> Result<Watch, Off> {
        if !hel_fs::local_file_system(project) {
            return Err(Off::NotLocal);
        }
        let inotify = match inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) {
            Ok(fd) => fd,
            Err(Errno::MFILE | Errno::NOSPC) => return Err(Off::Limit),
            Err(_) => return Err(Off::Unavailable),
        };
        let mounts = rustix::fs::open(
            "/proc/self/mountinfo",
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|_| Off::Unavailable)?;
        let w = Watch {
            inotify,
            mounts,
            root: None,
            live: Map::default(),
            wds: Set::default(),
            armed: false,
        };
        // The mount table as of now (a poll reports a change since the
        // last poll).
        w.mounts_changed();
        Ok(w)
    }

    /// Whether anything was mounted or unmounted since the last call.
    fn mounts_changed(&self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags};
        let mut fds = [PollFd::new(&self.mounts, PollFlags::PRI)];
        match poll(&mut fds, Some(&rustix::event::Timespec::default())) {
            Ok(0) => false,
            Ok(_) => !fds[0].revents().is_empty(),
            Err(_) => true,
        }
    }

    /// Read every event queued. Returns whether any may be a change to
    /// what the last walk saw (or could not be read): a doubt. A watch the
    /// kernel removed (its directory gone) is forgotten, so that a new
    /// directory given the same inode number is watched anew.
    fn drain(&mut self) -> bool {
        let mut gone = Vec::new();
        let (doubt, overflow) = self.read_events(&mut gone);
        if overflow {
            // Removals may have been lost with the events: no watch is
            // known by its inode any more, so the next walk asks the
            // kernel for each (it gives an existing watch back, or a new
            // one for a new directory that got a freed inode's number).
            self.live.clear();
            self.wds.clear();
            self.root = None;
        } else if !gone.is_empty() {
            self.live.retain(|_, wd| !gone.contains(wd));
            for wd in gone {
                self.wds.remove(&wd);
            }
        }
        doubt
    }

    /// Read the queue empty: whether any event may be a change, and
    /// whether the queue overflowed; the watches the kernel removed go to
    /// `gone`.
    fn read_events(&self, gone: &mut Vec<i32>) -> (bool, bool) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 8192];
        let mut reader = inotify::Reader::new(&self.inotify, &mut buf);
        let (mut doubt, mut overflow) = (false, false);
        // Bounded: a process making changes without pause could keep the
        // queue from ever running dry. Past the kernel's default queue
        // length, it is taken as an overflow (a full walk follows).
        const MOST: usize = 16_384;
        for _ in 0..MOST {
            let e = match reader.next() {
                Ok(e) => e,
                Err(Errno::AGAIN) => return (doubt, overflow),
                Err(Errno::INTR) => continue,
                // Unreadable: as if events were lost.
                Err(_) => return (true, true),
            };
            let flags = e.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                doubt = true;
                overflow = true;
                continue;
            }
            // A watch removed after a walk left it out.
            if !self.wds.contains(&e.wd()) {
                continue;
            }
            if flags.contains(ReadFlags::IGNORED) {
                gone.push(e.wd());
            }
            // `.hel` (the store writes there), `.git` and `.jj` of the
            // project itself are never walked.
            let skipped =
                Some(e.wd()) == self.root && e.file_name().is_some_and(|n| is_never(n.to_bytes()));
            doubt |= !skipped;
        }
        (true, true)
    }

    /// Whether the last walk's result still stands: it was armed and
    /// nothing has happened since that it could have missed; else why not.
    /// Reads the queue empty either way.
    pub fn unchanged(&mut self) -> Result<(), &'static str> {
        let events = self.drain();
        let mounts = self.mounts_changed();
        let why = if !self.armed {
            Err("the last walk was not watched whole")
        } else if events {
            Err("an event")
        } else if mounts {
            Err("a mount or unmount")
        } else {
            Ok(())
        };
        if why.is_err() {
            self.armed = false;
        }
        why
    }

    /// Start a walk: what is queued is about changes the walk sees anyway
    /// (each directory is watched again before it is listed).
    pub fn begin(&mut self) -> Walking<'_> {
        self.armed = false;
        let _ = self.drain();
        self.mounts_changed();
        Walking {
            inotify: self.inotify.as_fd(),
            live: &self.live,
            wds: &self.wds,
            added: Mutex::new((None, Vec::new())),
            failed: AtomicBool::new(false),
            limit: AtomicBool::new(false),
            not_local: AtomicBool::new(false),
        }
    }

    /// A walk ended: its watches are the ones kept (the others removed),
    /// and its result stands until an event when `sound` (every directory
    /// watched, nothing left unread for a reason that may pass). Returns
    /// [`Off::Limit`] when the kernel's limit was hit, [`Off::NotLocal`]
    /// when a directory is on a file system that is not local:
    /// notifications are then off for good (the watches are dropped with
    /// the instance).
    pub fn end(&mut self, walked: Walked, sound: bool) -> Result<(), Off> {
        if walked.limit {
            return Err(Off::Limit);
        }
        if walked.not_local {
            return Err(Off::NotLocal);
        }
        let live: Map<Inode, i32> = walked.watches.into_iter().collect();
        let new: Set<i32> = live.values().copied().collect();
        for wd in self.wds.difference(&new) {
            let _ = inotify::remove_watch(&self.inotify, *wd);
        }
        self.live = live;
        self.wds = new;
        self.root = walked.root;
        self.armed = sound && !walked.failed && walked.root.is_some();
        Ok(())
    }
}

/// The watches one walk adds, shared by its threads.
pub struct Walking<'a> {
    inotify: BorrowedFd<'a>,
    /// The watches of the last walk, by device and inode, and their set.
    live: &'a Map<Inode, i32>,
    wds: &'a Set<i32>,
    /// The project directory's watch, and every watch this walk has, by
    /// device and inode.
    added: Mutex<Added>,
    failed: AtomicBool,
    limit: AtomicBool,
    not_local: AtomicBool,
}

/// What [`Walking`] came to.
pub struct Walked {
    root: Option<i32>,
    watches: Vec<(Inode, i32)>,
    failed: bool,
    limit: bool,
    not_local: bool,
}

impl Walking<'_> {
    /// Watch the directory open as `dir` (whose `lstat` is `stat`; `root`
    /// when it is the project directory) before it is listed. A
    /// directory on another device than its parent must be on a local
    /// file system too.
    pub fn add(&self, dir: BorrowedFd<'_>, stat: &FileStat, parent_dev: u64, root: bool) {
        if self.failed.load(Ordering::Relaxed) {
            return;
        }
        if stat.dev != parent_dev && !hel_fs::local_file_system(dir) {
            self.not_local.store(true, Ordering::Relaxed);
            self.failed.store(true, Ordering::Relaxed);
            return;
        }
        let key = (stat.dev, stat.ino);
        // Watched since the last walk and not removed since (a removal is
        // an event, read before this walk began or doubting its result).
        let added = match self.live.get(&key) {
            Some(&wd) => Ok(wd),
            // A test stands in for the kernel's limit here.
            None if hel_fs::failpoint::hit("workspace-watch") => Err(Errno::NOSPC),
            // The magic link names the directory this descriptor has
            // open, whatever its path is now.
            None => inotify::add_watch(
                self.inotify,
                format!("/proc/self/fd/{}", dir.as_raw_fd()).as_str(),
                mask(),
            ),
        };
        match added {
            // The kernel's watch of another inode than the one known by
            // that number: the map is stale, nothing stands.
            Ok(wd) if self.live.get(&key) != Some(&wd) && self.wds.contains(&wd) => {
                self.failed.store(true, Ordering::Relaxed);
            }
            Ok(wd) => {
                let mut added = self.added.lock().unwrap_or_else(|p| p.into_inner());
                if root {
                    added.0 = Some(wd);
                }
                added.1.push((key, wd));
            }
            Err(e) => {
                if e == Errno::NOSPC {
                    self.limit.store(true, Ordering::Relaxed);
                }
                self.failed.store(true, Ordering::Relaxed);
            }
        }
    }

    pub fn done(self) -> Walked {
        let (root, watches) = self.added.into_inner().unwrap_or_else(|p| p.into_inner());
        Walked {
            root,
            watches,
            failed: self.failed.into_inner(),
            limit: self.limit.into_inner(),
            not_local: self.not_local.into_inner(),
        }
    }
}
