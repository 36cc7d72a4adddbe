//! Round records (objects-spec §10.2, "Round records"): what an
//! instruction in progress has done so far, appended to its session's
//! journal past the committed part as blob records, without a sync and
//! without a commit record. They are no checkpoint and no record of the
//! session's history: readers ignore them as they ignore any record past
//! the committed part, the next commit of the session cuts them, and only
//! a resume of a session whose instruction was cut off (a crash) reads
//! them, to carry what that instruction did.

use crate::journal::{self, Mode, Rule};
use crate::lock::{SessionLease, Shared};
use crate::object::{compress_canonical, encode, Cap, Kind};
use crate::odb::Found;
use crate::pack::Place;
use crate::store::{SessionState, Store};
use crate::{refs, Error, ObjectId, Result, SessionId};

/// The most round records a resume reads.
pub const ROUNDS_MAX: usize = 10_000;
/// The most payload bytes of round records a resume reads, in all.
pub const ROUNDS_BYTES_MAX: u64 = 64 << 20;
/// The cap of one round record's payload.
pub const ROUND: Cap = Cap {
    max: Cap::MESSAGE.max,
    what: "round record",
};

/// Append `payload` as a round record of the lease's session: a blob
/// record past the journal's committed part, written without a sync
/// and published by nothing (objects-spec §10.2). The session's head
/// must be what `state` says and exist (a session without a
/// checkpoint has nothing a round could follow). A crash may lose the
/// last rounds appended; the next commit of the session cuts them all
/// (they are what that commit stores, or what an instruction that
/// ended without one leaves behind).
pub fn append(
    store: &Store,
    lease: &SessionLease,
    state: &SessionState,
    payload: &[u8],
) -> Result<()> {
    let Some(head) = state.head else {
        return Ok(());
    };
    if payload.len() as u64 > ROUND.max {
        return Err(Error::Internal("round record too large".into()));
    }
    let layout = store.layout_create()?;
    let _lock = Shared::take(layout)?;
    let mut slot = lease.journal.lock().unwrap_or_else(|p| p.into_inner());
    let journal = store.journal_writer(layout, lease, &mut slot)?;
    {
        let view = journal.view.read().unwrap_or_else(|p| p.into_inner());
        if view.head.as_ref().map(|c| c.head) != Some(head) {
            return Err(Error::RefMoved {
                session: lease.session().to_string(),
                expected: head.to_hex(),
                found: view
                    .head
                    .as_ref()
                    .map_or_else(|| "none".to_owned(), |c| c.head.to_hex()),
            });
        }
        let (id, _) = encode(Kind::Blob, payload);
        // An object has one record per journal: a round whose bytes
        // the journal holds already (it cannot: each names its base
        // and number) is not written again.
        if view.objects.contains_key(&id) {
            return Ok(());
        }
    }
    let (id, canonical) = encode(Kind::Blob, payload);
    let stored = compress_canonical(Kind::Blob, &id, &canonical)?;
    journal.stage(&[(id, stored)])
}

/// Cut the round records the lease's session appended since its last
/// commit (an instruction that ended without a record of its own: what
/// it did is in the conversation, and the next commit stores it).
pub fn discard(lease: &SessionLease) {
    let mut slot = lease.journal.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(j) = slot.as_mut() {
        j.discard_staged();
    }
}

/// The payloads of the round records that follow `head`, the
/// session's head, in its journal: the blob records that begin where
/// its committed part ends, one after another, in file order, at most
/// [`ROUNDS_MAX`] of them and [`ROUNDS_BYTES_MAX`] bytes. A record that
/// is not a blob, or does not read, ends them. None when the journal
/// has a fault or its head is not `head` (read as nothing: what the
/// payloads say is the reader's to check).
pub fn read(store: &Store, session: &SessionId, head: &ObjectId) -> Result<Vec<Vec<u8>>> {
    let Some(layout) = store.layout()? else {
        return Ok(Vec::new());
    };
    let Some(dir) = layout.journals()? else {
        return Ok(Vec::new());
    };
    let rule = Rule::Ref(refs::read(layout, session)?);
    let Some(view) = journal::open(dir, session, Mode::Full, rule)? else {
        return Ok(Vec::new());
    };
    if view.fault.is_some() || view.head.as_ref().map(|c| c.head) != Some(*head) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut at = view.committed;
    let mut bytes = 0u64;
    for &journal::Entry {
        id, offset, len, ..
    } in &view.tail
    {
        if offset != at || out.len() >= ROUNDS_MAX {
            break;
        }
        let found = Found {
            file: std::sync::Arc::clone(&view.file),
            place: Place {
                path: view.path.clone(),
                offset,
            },
            len,
        };
        let Ok(payload) = crate::read::of_kind_at(layout, &id, &found, Kind::Blob, ROUND) else {
            break;
        };
        bytes = bytes.saturating_add(payload.len() as u64);
        if bytes > ROUNDS_BYTES_MAX {
            break;
        }
        out.push(payload);
        at = offset + len;
    }
    Ok(out)
}
