//! The upgrade of a store an older hel wrote (format 1 or 2) to format 3
//! (objects-spec §10.1). It runs when this hel opens such a store, before
//! anything else reads it, and loses nothing: format 3 is format 2's
//! objects, journals, packs and names byte for byte, plus one ref file per
//! session naming the head the older format gave it.
//!
//! Under the store lock held exclusively, and refused while any session's
//! lease is held (an older hel at work would go on writing by its rules):
//!
//! 1. each session whose head is its journal's last commit record (format 2)
//!    gets its ref `refs/sessions/<uuid>` naming that head, moved as every
//!    ref moves ([`refs::publish`]: 65 bytes written under `tmp/`, synced,
//!    renamed over the ref, `refs/sessions/` synced); a ref that already
//!    names it is left alone, and a format-1 session's ref (its head
//!    already) is kept as it is;
//! 2. the stub of §12.6 is made to exist (a format-1 hel refuses the store);
//! 3. last, `format` is renamed to `hel-store-format 3` and `.hel/` synced.
//!
//! Until the rename of step 3 the store is still of its old format, and
//! everything an older hel reads is as it was: a format-2 hel takes a
//! session's head from its journal whenever the journal has one, so the
//! refs of step 1 are never read by it. A kill anywhere leaves a store the
//! next open upgrades again from step 1, which is always safe (every step
//! writes what the old format already says). After the rename the store
//! is format 3: a format-2 hel refuses it before writing anything, and a
//! format-1 hel meets the stub (objects-spec §10.1 says what it still
//! writes).

use std::path::PathBuf;

use crate::layout::{Layout, STUB_SESSION};
use crate::lock::Exclusive;
use crate::{heads, lock, refs, Error, Result, SessionId};

/// Why a store of an older format was not upgraded (it is left as it was:
/// a hel of its format still reads all of it).
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error("{} is a store of format {found}: this hel upgrades it to format {} before using it, which it cannot do while session {session} is in use{}; end the hel working on it (an older hel), then run this command again", store.display(), crate::FORMAT_VERSION, holder.as_ref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Busy {
        store: PathBuf,
        found: u64,
        session: SessionId,
        /// Who holds the lease, as its file says.
        holder: Option<String>,
    },
    #[error("cannot upgrade {} from store format {found} to {}: {source}; the store is left as format {found}, which a hel of that format still reads", store.display(), crate::FORMAT_VERSION)]
    Failed {
        store: PathBuf,
        found: u64,
        #[source]
        source: Error,
    },
}

/// Upgrade the store open as `layout`, whose `format` file said `found`
/// (1: none), to [`crate::FORMAT_VERSION`]. `Ok` when the store is of this
/// format now (another process may have upgraded it meanwhile); an error
/// leaves it of its old format, everything an older hel reads unchanged.
pub(crate) fn run(layout: &Layout, found: u64) -> Result<()> {
    let failed = |source: Error| -> Error {
        match source {
            Error::Upgrade(_) => source,
            source => Error::Upgrade(Box::new(UpgradeError::Failed {
                store: layout.root().path().to_owned(),
                found,
                source,
            })),
        }
    };
    let lock = Exclusive::take(layout).map_err(failed)?;
    // As the format file says now that no writer is at work.
    let found = layout.check_format()?;
    if found >= crate::FORMAT_VERSION {
        return Ok(());
    }
    upgrade(&lock, found).map_err(failed)
}

fn upgrade(lock: &Exclusive<'_>, found: u64) -> Result<()> {
    let layout = lock.layout;
    refuse_if_busy(layout, found)?;
    crate::failpoint::kill("upgrade-locked");
    for session in heads::list(layout)?.sessions {
        // The head by the old format's rule (a journal's fault is the
        // error: never a ref to an older head, never no ref).
        let head = match heads::read(layout, &session) {
            Ok(Some(head)) => head,
            Ok(None) => continue,
            // A format-1 session's ref that is not a ref is kept as it is:
            // the new format reads it as the old one did (a fault naming it).
            Err(Error::BadRef { .. }) => continue,
            Err(e) => return Err(e),
        };
        // A head that is not a journal's is the session's ref already.
        let current = refs::read(layout, &session)?;
        if head.commit.is_none() || current == Some(head.id) {
            continue;
        }
        // The one way refs move (tmp/, sync, rename, directory sync; no
        // lease is needed: no one holds one, and the exclusive lock keeps
        // it so). The move must be durable before `format` says 3.
        if let Some(e) = refs::publish(layout, &session, current, head.id)? {
            return Err(e);
        }
        crate::failpoint::kill("upgrade-ref");
    }
    crate::failpoint::kill("upgrade-refs");
    layout.ensure_stub()?;
    crate::failpoint::kill("upgrade-stub");
    layout.publish_format()
}

/// `Err` naming the first session whose lease is held.
fn refuse_if_busy(layout: &Layout, found: u64) -> Result<()> {
    let Some(dir) = layout.sessions()? else {
        return Ok(());
    };
    for e in dir.entries()? {
        let Some(Ok(session)) = e.name.to_str().map(str::parse::<SessionId>) else {
            continue;
        };
        if session.as_str() != STUB_SESSION && lock::is_busy(layout, &session)? {
            return Err(Error::Upgrade(Box::new(UpgradeError::Busy {
                store: layout.root().path().to_owned(),
                found,
                holder: lock::holder_of(layout, &session),
                session,
            })));
        }
    }
    Ok(())
}
