//! Locks. Both are `flock(2)` locks (std's `File::lock` family) held by a
//! value: dropping the value releases the lock; nothing needs an explicit
//! unlock to be correct.
//!
//! - [`SessionLease`]: exclusive, non-blocking, on `sessions/<id>/.active`,
//!   for the whole life of the instance that works on the session. Its
//!   descriptor is close-on-exec: no command hel runs can hold or drop it.
//! - [`Shared`] and [`Exclusive`] on `.store.lock/lock`. Writers of objects
//!   and refs (commit, fork, creating a session) hold it shared while they
//!   work, through a [`Shared`] value that the object writer and the ref
//!   mover require; resume, delete and gc hold it exclusive. gc therefore
//!   never runs while a commit is between "this object already exists" and
//!   "the ref that reaches it is moved", nor while a new session's
//!   directory exists without its lease. An upgrade to a next format
//!   holds it exclusively too (`upgrade.rs`).

use std::fs::{File, TryLockError};
use std::time::Duration;

use crate::error::IoContext;
use crate::layout::{Layout, DIR_MODE, LEASE, STORE_LOCK_FILE};
use crate::{Error, Result, SessionId};

/// Waits between attempts to take a lease that is held: a listing's probe
/// holds it for a moment, a running instance for good.
const LEASE_RETRIES_MS: [u64; 6] = [1, 2, 5, 10, 20, 40];

/// The right to write one session. At most one exists per session at a time
/// across all processes.
#[derive(Debug)]
#[must_use = "the session is released when the lease is dropped"]
pub struct SessionLease {
    session: SessionId,
    _file: File,
    /// Whether this lease wrote its holder's note (and so empties it when
    /// released): a lease gc takes for a moment writes none and leaves the
    /// file as it was, so that `gc --dry-run` writes nothing.
    noted: bool,
    /// The session's journal, opened for appending at its first commit.
    pub(crate) journal: std::sync::Mutex<Option<crate::journal::Writer>>,
}

impl SessionLease {
    /// Take the lease of `session`, creating its working directory when
    /// `create` is set (the caller holds the store lock, so gc cannot take
    /// the directory away before the lease holds it). Fails with
    /// [`Error::InUse`] if another instance holds it; a probe that holds it
    /// for a moment (see [`is_busy`]) only delays this a little.
    pub(crate) fn acquire(
        layout: &Layout,
        session: &SessionId,
        create: bool,
    ) -> Result<SessionLease> {
        let dir = if create {
            layout
                .sessions_create()?
                .sub_create(session.as_str(), DIR_MODE)?
        } else {
            layout
                .session_dir(session)?
                .ok_or_else(|| Error::NoSuchSession {
                    session: session.to_string(),
                })?
        };
        let file = dir.open_rw(LEASE, false)?;
        let mut waits = LEASE_RETRIES_MS.iter();
        loop {
            match file.try_lock() {
                Ok(()) => {
                    note_holder(&file);
                    return Ok(SessionLease {
                        session: session.clone(),
                        _file: file,
                        noted: true,
                        journal: std::sync::Mutex::new(None),
                    });
                }
                Err(TryLockError::WouldBlock) => match waits.next() {
                    Some(ms) => std::thread::sleep(Duration::from_millis(*ms)),
                    None => {
                        return Err(Error::InUse {
                            session: session.to_string(),
                            holder: holder(&file),
                        })
                    }
                },
                Err(TryLockError::Error(e)) => return Err(e).at(dir.child_path(LEASE)),
            }
        }
    }

    /// Take the lease of `session` if it is free this instant (gc, under
    /// the exclusive store lock: a session it cannot take is left alone).
    pub(crate) fn try_take(layout: &Layout, session: &SessionId) -> Result<SessionLease> {
        let dir = layout
            .session_dir(session)?
            .ok_or_else(|| Error::NoSuchSession {
                session: session.to_string(),
            })?;
        let file = dir.open_rw(LEASE, false)?;
        match file.try_lock() {
            Ok(()) => Ok(SessionLease {
                session: session.clone(),
                _file: file,
                noted: false,
                journal: std::sync::Mutex::new(None),
            }),
            Err(TryLockError::WouldBlock) => Err(Error::InUse {
                session: session.to_string(),
                holder: holder(&file),
            }),
            Err(TryLockError::Error(e)) => Err(e).at(dir.child_path(LEASE)),
        }
    }

    pub fn session(&self) -> &SessionId {
        &self.session
    }
}

impl Drop for SessionLease {
    /// Empty the note this lease wrote while the lock is still held (it
    /// is released when the file closes, after this): a session nobody
    /// holds costs no data block for it (4 KiB on most file systems, per
    /// closed session). Only a hint: a failure is ignored, and a note a
    /// killed holder leaves behind is read as before.
    fn drop(&mut self) {
        if self.noted {
            let _ = self._file.set_len(0);
        }
    }
}

/// Write who holds the lease into its file, for the message another
/// instance shows when it is refused. Only a hint: a failure is ignored.
fn note_holder(file: &File) {
    use std::os::unix::fs::FileExt;
    let who = format!(
        "pid {} since {}\n",
        std::process::id(),
        crate::time::rfc3339(crate::time::now_ms())
    );
    if file.set_len(0).is_ok() {
        let _ = file.write_all_at(who.as_bytes(), 0);
    }
}

/// Who holds a lease, as its file says (untrusted: at most 100 printable
/// ASCII characters of its first line).
fn holder(file: &File) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 100];
    let n = file.read_at(&mut buf, 0).ok()?;
    let line: String = buf[..n]
        .split(|&c| c == b'\n')
        .next()?
        .iter()
        .map(|&c| c as char)
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .collect();
    (!line.is_empty()).then_some(line)
}

/// Is `session` held by a live instance right now? A probe: it takes and
/// drops a shared lock, which delays a concurrent [`SessionLease::acquire`]
/// by a moment at most and never makes it fail.
pub(crate) fn is_busy(layout: &Layout, session: &SessionId) -> Result<bool> {
    let Some(sessions) = layout.sessions()? else {
        return Ok(false);
    };
    // One open for both components (a listing probes every session).
    let Some(file) = sessions.open_file2(session.as_str(), LEASE)? else {
        return Ok(false);
    };
    Ok(matches!(
        file.try_lock_shared(),
        Err(TryLockError::WouldBlock)
    ))
}

/// Who holds `session`'s lease, as its file says (a hint for messages;
/// None: no file, or nothing readable in it).
pub(crate) fn holder_of(layout: &Layout, session: &SessionId) -> Option<String> {
    let file = layout.session_dir(session).ok()??.open_file(LEASE).ok()??;
    holder(&file)
}

/// The store lock held shared: the only way to write objects, move refs and
/// create sessions (see the module doc). `L` is what it was taken through
/// (the layout, or the object database over it), handed back as `layout`.
#[derive(Debug)]
#[must_use = "the store lock is released when dropped"]
pub(crate) struct Shared<'a, L: AsRef<Layout> = Layout> {
    pub layout: &'a L,
    _file: File,
}

/// The store lock held exclusively: resume, delete, gc.
#[derive(Debug)]
#[must_use = "the store lock is released when dropped"]
pub(crate) struct Exclusive<'a, L: AsRef<Layout> = Layout> {
    pub layout: &'a L,
    _file: File,
}

/// Take the store lock, `.store.lock/lock` (both made when absent), with
/// `lock` (shared or exclusive, blocking or not): `None` when a
/// non-blocking attempt found it held.
fn take_store_lock(
    layout: &Layout,
    lock: impl Fn(&File) -> std::result::Result<bool, std::io::Error>,
) -> Result<Option<File>> {
    let dir = layout.store_lock_dir_create()?;
    let file = dir.open_rw(STORE_LOCK_FILE, false)?;
    if !lock(&file).at(dir.child_path(STORE_LOCK_FILE))? {
        return Ok(None);
    }
    Ok(Some(file))
}

impl<'a, L: AsRef<Layout>> Shared<'a, L> {
    /// Block until the store lock is held shared.
    pub fn take(through: &'a L) -> Result<Shared<'a, L>> {
        let layout = through.as_ref();
        let file = take_store_lock(layout, |f| f.lock_shared().map(|()| true))?
            .ok_or_else(|| Error::Internal("a blocking lock was not taken".into()))?;
        layout.lock_taken();
        Ok(Shared {
            layout: through,
            _file: file,
        })
    }
}

impl<'a, L: AsRef<Layout>> Exclusive<'a, L> {
    /// The store lock held exclusively if no one holds it right now.
    pub fn try_take(through: &'a L) -> Result<Option<Exclusive<'a, L>>> {
        let layout = through.as_ref();
        let taken = take_store_lock(layout, |f| match f.try_lock() {
            Ok(()) => Ok(true),
            Err(TryLockError::WouldBlock) => Ok(false),
            Err(TryLockError::Error(e)) => Err(e),
        })?;
        Ok(taken.map(|file| {
            layout.lock_taken();
            Exclusive {
                layout: through,
                _file: file,
            }
        }))
    }

    /// Block until the store lock is held exclusively.
    pub fn take(through: &'a L) -> Result<Exclusive<'a, L>> {
        let layout = through.as_ref();
        let file = take_store_lock(layout, |f| f.lock().map(|()| true))?
            .ok_or_else(|| Error::Internal("a blocking lock was not taken".into()))?;
        layout.lock_taken();
        Ok(Exclusive {
            layout: through,
            _file: file,
        })
    }
}

impl<L: AsRef<Layout>> Drop for Shared<'_, L> {
    fn drop(&mut self) {
        self.layout.as_ref().lock_released();
    }
}

impl<L: AsRef<Layout>> Drop for Exclusive<'_, L> {
    fn drop(&mut self) {
        self.layout.as_ref().lock_released();
    }
}
