//! Locks. Both are `flock(2)` locks (std's `File::lock` family) held by a value: dropping the value
//! releases the lock; nothing needs an explicit unlock to be correct.
//!
//! - [`SessionLease`]: exclusive, non-blocking, on `sessions/<id>/.active`,
//!   for the whole life of the instance that works on the session. A flock
//!   belongs to the open file description, so a child process that inherited
//!   the descriptor keeps the session busy while it lives.
//! - [`StoreLock`]: on `.sessions.lock`. Writers of objects and refs
//!   (commit, fork) hold it shared while they write; resume, delete and gc
//!   hold it exclusive. gc therefore never runs while a commit is between
//!   "this object already exists" and "the ref that reaches it is moved".

use std::fs::{self, File, OpenOptions, TryLockError};
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::Path;

use crate::error::IoContext;
use crate::layout::{check_session_id, Layout};
use crate::{Error, Result};

/// The right to write one session. At most one exists per session at a time
/// across all processes.
#[derive(Debug)]
#[must_use = "the session is released when the lease is dropped"]
pub struct SessionLease {
    session: String,
    file: File,
}

impl SessionLease {
    /// Take the lease of `session`, creating its working directory. Fails
    /// with [`Error::InUse`] at once if another instance holds it.
    pub fn acquire(layout: &Layout, session: &str) -> Result<SessionLease> {
        check_session_id(session)?;
        let dir = layout.session_dir(session);
        fs::create_dir_all(&dir).at(&dir)?;
        let path = layout.lease_path(session);
        let file = open_lock_file(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(SessionLease {
                session: session.to_owned(),
                file,
            }),
            Err(TryLockError::WouldBlock) => Err(Error::InUse {
                session: session.to_owned(),
            }),
            Err(TryLockError::Error(e)) => Err(e).at(&path),
        }
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    /// The locked descriptor, for a caller that wants child processes to
    /// inherit the lease (it must clear close-on-exec in the child).
    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// Open (creating, never truncating) a file that carries a lock.
fn open_lock_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .at(path)
}

/// Is `session` held by a live instance right now? A probe: it takes and
/// drops a shared lock, which never blocks anyone for longer than the call.
pub fn is_busy(layout: &Layout, session: &str) -> bool {
    let Ok(file) = File::open(layout.lease_path(session)) else {
        return false;
    };
    matches!(file.try_lock_shared(), Err(TryLockError::WouldBlock))
}

/// A hold on `.sessions.lock`, shared or exclusive (see the module doc).
#[derive(Debug)]
#[must_use = "the store lock is released when dropped"]
pub struct StoreLock {
    _file: File,
}

impl StoreLock {
    /// Block until the lock is held shared (writers of objects and refs).
    pub fn shared(layout: &Layout) -> Result<StoreLock> {
        Self::take(layout, false)
    }

    /// Block until the lock is held exclusively (resume, delete, gc).
    pub fn exclusive(layout: &Layout) -> Result<StoreLock> {
        Self::take(layout, true)
    }

    fn take(layout: &Layout, exclusive: bool) -> Result<StoreLock> {
        let path = layout.store_lock();
        let file = open_lock_file(&path)?;
        if exclusive {
            file.lock().at(&path)?;
        } else {
            file.lock_shared().at(&path)?;
        }
        Ok(StoreLock { _file: file })
    }
}
