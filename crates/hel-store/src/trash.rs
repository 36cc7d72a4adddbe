//! The trash (objects-spec §8): a deleted session's ref leaves
//! `refs/sessions/` for a trash entry (`trashed.rs`) that records when it
//! was deleted and what it was (head, name, directory). The session is no
//! longer listed, picked or resumed, and everything it reaches stays: gc
//! marks from trash entries as from refs. [`Store::undelete_session`]
//! brings it back whole (the same head, so the same checkpoints, spill
//! and workspace snapshots, and its journal, which its forks may share);
//! [`Store::delete_for_good`] and [`expire`] remove it as a delete always
//! did (what others need of its journal copied first).
//!
//! Retention ([`Retention`]): an entry expires once it is older than the
//! maximum age, or, when a store size budget is set, oldest first while
//! the store is over it. A pinned session (`pins/<uuid>`) never expires.
//!
//! Crash safety: a delete writes the entry (synced) before the ref goes;
//! an undelete publishes the ref before the entry goes. A crash in
//! between leaves both, read as listed: the session is never in neither
//! place. gc (under the store lock) settles such a pair: the name the
//! entry recorded given back when free, then the entry removed.

use crate::gc::GcReport;
use crate::lock::{Exclusive, SessionLease};
use crate::odb::Odb;
use crate::trashed::{self, Entry};
use crate::{heads, Error, ObjectId, Result, SessionId, Store};

pub use crate::trashed::{now_ms, DAY_MS, NOW_VAR};

/// What the trash holds of a deleted session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrashEntry {
    pub session: SessionId,
    /// The snapshot its ref named when it was deleted.
    pub head: ObjectId,
    /// Its name then.
    pub name: Option<String>,
    /// Its directory (the head checkpoint's `cwd`).
    pub directory: Option<String>,
    /// When it was deleted (milliseconds since the Unix epoch).
    pub deleted_ms: u64,
    /// Pinned: never expires.
    pub pinned: bool,
    /// The bytes of its journal and sidecar: the disk it keeps until it
    /// expires (what its forks share of it stays after).
    pub bytes: u64,
    /// After an undelete: the session holding the name it had, which it
    /// came back without.
    pub name_taken_by: Option<SessionId>,
}

/// How long the trash keeps what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// An entry older than this expires (`None`: never by age).
    pub max_age_ms: Option<u64>,
    /// When set: while the store holds more bytes than this, the oldest
    /// entries expire first.
    pub budget_bytes: Option<u64>,
}

/// The days a trash entry is kept by default.
pub const DEFAULT_DAYS: u64 = 30;

impl Default for Retention {
    fn default() -> Retention {
        Retention {
            max_age_ms: Some(DEFAULT_DAYS * DAY_MS),
            budget_bytes: None,
        }
    }
}

/// Why an entry expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Older than the maximum age.
    Age,
    /// The store was over its size budget (its bytes then).
    Budget { store_bytes: u64 },
}

/// An entry that expired (or, dry, would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    pub entry: TrashEntry,
    pub why: Why,
}

impl Retention {
    /// When `entry` expires by age (`None`: pinned, or no maximum age).
    pub fn expires_ms(&self, entry: &TrashEntry) -> Option<u64> {
        if entry.pinned {
            return None;
        }
        self.max_age_ms
            .map(|age| entry.deleted_ms.saturating_add(age))
    }
}

fn no_such(session: &SessionId) -> Error {
    Error::NoSuchSession {
        session: session.to_string(),
    }
}

fn public(layout: &Odb, e: Entry) -> Result<TrashEntry> {
    let pinned = trashed::pinned(layout, &e.session)?;
    let bytes = journal_bytes(layout, &e.session);
    Ok(TrashEntry {
        session: e.session,
        head: e.head,
        name: e.name,
        directory: e.directory,
        deleted_ms: e.deleted_ms,
        pinned,
        bytes,
        name_taken_by: None,
    })
}

/// The size of `session`'s journal and its sidecar (0 when it has
/// none): what its trash entry keeps on disk.
fn journal_bytes(layout: &Odb, session: &SessionId) -> u64 {
    let Ok(Some(dir)) = layout.journals() else {
        return 0;
    };
    [
        crate::journal::journal_name(session),
        crate::journal::jidx_name(session),
    ]
    .iter()
    .map(|name| match dir.open_file(name) {
        Ok(Some(f)) => f.metadata().map(|m| m.len()).unwrap_or(0),
        _ => 0,
    })
    .sum()
}

impl Store {
    /// Move `session` to the trash: its trash entry written (synced), then
    /// its ref removed (synced), then its name and working directory (a
    /// spill cache). Refused while the session is in use, when it has no
    /// checkpoint (nothing to keep: [`Store::delete`] removes it) or when
    /// its head does not read.
    pub fn trash_session(&self, session: &SessionId) -> Result<TrashEntry> {
        let layout = self.layout()?.ok_or_else(|| no_such(session))?;
        let lock = Exclusive::take(layout)?;
        let Some(head) = heads::read(layout, session)? else {
            if trashed::read(layout, session)?.is_some() {
                return Err(Error::Trashed {
                    session: session.to_string(),
                });
            }
            if crate::lock::is_busy(layout, session)? {
                return Err(Error::InUse {
                    session: session.to_string(),
                    holder: crate::lock::holder_of(layout, session),
                });
            }
            if layout.session_dir(session)?.is_some() {
                return Err(Error::NoCheckpoint {
                    session: session.to_string(),
                });
            }
            return Err(no_such(session));
        };
        heads::owned(layout, session, &head)?;
        let lease = SessionLease::acquire(lock.layout, session, true)?;
        let cp = heads::checkpoint(layout, session, &head)?;
        // The ref as it is (a journal one commit past it reads the same
        // by it: objects-spec §5.4).
        let at = crate::refs::read(layout, session)?.ok_or_else(|| no_such(session))?;
        let name = crate::names::read(layout)?.get(session).cloned();
        let entry = Entry {
            version: trashed::ENTRY_VERSION,
            session: session.clone(),
            head: at,
            deleted_ms: now_ms(),
            name,
            directory: Some(cp.cwd.clone()).filter(|d| d.len() <= trashed::DIRECTORY_MAX),
        };
        trashed::write(layout, &entry)?;
        crate::failpoint::kill("trash-after-entry");
        crate::refs::remove(layout, session)?;
        crate::failpoint::kill("trash-after-ref");
        crate::names::remove(layout, session)?;
        if let Some(sessions) = layout.sessions()? {
            sessions.remove_tree(session.as_str())?;
        }
        drop(lease);
        drop(lock);
        let out = public(layout, entry)?;
        crate::oplog::trashed(self, session, out.head, out.name.as_deref(), true);
        Ok(out)
    }

    /// Bring `session` back from the trash: its ref published again
    /// naming the head it had (so every checkpoint, spill blob and
    /// workspace snapshot it reached), its name given back when no other
    /// session took it meanwhile (else it comes back unnamed:
    /// [`TrashEntry::name_taken_by`]), then its trash entry removed. Its
    /// pin, if any, stays.
    pub fn undelete_session(&self, session: &SessionId) -> Result<TrashEntry> {
        let layout = self.layout()?.ok_or_else(|| Error::NotInTrash {
            session: session.to_string(),
        })?;
        let lock = Exclusive::take(layout)?;
        let entry = trashed::read(layout, session)?.ok_or_else(|| Error::NotInTrash {
            session: session.to_string(),
        })?;
        if crate::refs::read(layout, session)?.is_none() {
            let head = heads::read_trashed(layout, session)?.ok_or_else(|| Error::BadTrash {
                path: trashed::path(layout, session),
                reason: format!(
                    "session {session} has no journal that publishes {}",
                    entry.head
                ),
            })?;
            heads::owned(layout, session, &head).map_err(|e| Error::BadTrash {
                path: trashed::path(layout, session),
                reason: e.to_string(),
            })?;
            let lease = SessionLease::acquire(lock.layout, session, true)?;
            // A failed sync of refs/sessions/ after the rename is only a
            // warning there: the ref moved.
            let _ = crate::refs::publish(layout, session, None, entry.head)?;
            crate::failpoint::kill("undelete-after-ref");
            drop(lease);
        }
        let taken = crate::gc::settle_trash(layout, &entry)?;
        drop(lock);
        let mut out = public(layout, entry)?;
        out.name_taken_by = taken;
        let back = out.name.as_deref().filter(|_| out.name_taken_by.is_none());
        crate::oplog::trashed(self, session, out.head, back, false);
        Ok(out)
    }

    /// What the trash holds, oldest first. A trash entry that does not
    /// read is the error (naming its file: `hel fsck` reports them all).
    /// Entries of sessions that are listed again (an undelete that
    /// stopped before its entry went) are not the trash's.
    pub fn trash_entries(&self) -> Result<Vec<TrashEntry>> {
        let Some(layout) = self.layout()? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for session in trashed::list(layout)?.sessions {
            let Some(e) = trashed::read(layout, &session)? else {
                continue;
            };
            if crate::refs::read(layout, &session).ok().flatten().is_some() {
                continue;
            }
            out.push(public(layout, e)?);
        }
        out.sort_by(|a, b| {
            a.deleted_ms
                .cmp(&b.deleted_ms)
                .then(a.session.cmp(&b.session))
        });
        Ok(out)
    }

    /// Remove `session` for good, listed or in the trash: what other
    /// sessions need of its journal is copied first, then it goes (see
    /// [`Store::delete`]), then gc. Refused while it is pinned.
    pub fn delete_for_good(&self, session: &SessionId) -> Result<GcReport> {
        let layout = self.layout()?.ok_or_else(|| no_such(session))?;
        if trashed::pinned(layout, session)? {
            return Err(Error::Pinned {
                session: session.to_string(),
            });
        }
        Ok(self.delete(session, true)?.unwrap_or_default())
    }
}

/// Pin `session` (listed or in the trash): it never expires.
pub fn pin(store: &Store, session: &SessionId) -> Result<()> {
    let layout = store.layout()?.ok_or_else(|| no_such(session))?;
    let _lock = crate::lock::Shared::take(layout)?;
    if heads::read_light(layout, session)?.is_none() && trashed::read(layout, session)?.is_none() {
        return Err(no_such(session));
    }
    trashed::pin(layout, session)
}

/// Unpin `session`.
pub fn unpin(store: &Store, session: &SessionId) -> Result<()> {
    let layout = store.layout()?.ok_or_else(|| no_such(session))?;
    let _lock = crate::lock::Shared::take(layout)?;
    trashed::unpin(layout, session)
}

/// Is `session` in the trash (its entry there, and no ref)? What a
/// resume by id asks to say so rather than "no such session".
pub fn is_trashed(store: &Store, session: &SessionId) -> Result<bool> {
    let Some(layout) = store.layout()? else {
        return Ok(false);
    };
    Ok(crate::refs::read(layout, session)?.is_none() && trashed::has_any(layout, session)?)
}

/// The bytes the store holds in its packs and journals.
pub fn store_bytes(store: &Store) -> Result<u64> {
    let Some(layout) = store.layout()? else {
        return Ok(0);
    };
    let mut total = 0u64;
    for dir in [layout.packs()?, layout.journals()?].into_iter().flatten() {
        for e in dir.entries()? {
            if e.kind != crate::dir::Kind::File {
                continue;
            }
            let Some(name) = e.name_str() else { continue };
            if let Ok(Some(f)) = dir.open_file(name) {
                total += f.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    Ok(total)
}

/// The entries `retention` expires at `now` (oldest first): those older
/// than the maximum age, then, while the store would still be over the
/// budget, the oldest of the rest. Pinned entries never.
pub fn due(store: &Store, retention: &Retention, now: u64) -> Result<Vec<Expired>> {
    let entries = store.trash_entries()?;
    let mut out = Vec::new();
    let mut rest = Vec::new();
    for e in entries {
        match retention.expires_ms(&e) {
            Some(at) if at <= now => out.push(Expired {
                entry: e,
                why: Why::Age,
            }),
            _ => rest.push(e),
        }
    }
    if let Some(budget) = retention.budget_bytes {
        let mut size = store_bytes(store)?;
        size = size.saturating_sub(out.iter().map(|x| x.entry.bytes).sum::<u64>());
        for e in rest.into_iter().filter(|e| !e.pinned) {
            if size <= budget {
                break;
            }
            let store_bytes = size;
            size = size.saturating_sub(e.bytes);
            out.push(Expired {
                entry: e,
                why: Why::Budget { store_bytes },
            });
        }
    }
    Ok(out)
}

/// Remove for good what `retention` expires now (see [`due`]); with
/// `dry_run`, only say what. Each one goes as [`Store::delete`] removes
/// a session (without gc: the caller's gc follows).
pub fn expire(store: &Store, retention: &Retention, dry_run: bool) -> Result<Vec<Expired>> {
    let due = due(store, retention, now_ms())?;
    if dry_run {
        return Ok(due);
    }
    let mut out = Vec::new();
    for x in due {
        // Pinned or undeleted since it was judged (the store lock taken
        // by the delete decides): stays.
        if store
            .delete_as(&x.entry.session, false, Some(x.entry.deleted_ms))?
            .0
        {
            out.push(x);
        }
    }
    Ok(out)
}
