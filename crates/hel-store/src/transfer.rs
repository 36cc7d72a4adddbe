//! Moving a session between stores (remotes, objects-spec §12): the
//! objects one checkpoint reaches that another does not, as the bytes of a
//! sealed pack; a received pack verified record by record; and a received
//! head brought in as a new session, a fast-forward, or a fork, only after
//! everything it reaches validates as `fsck` would validate it.
//!
//! A received pack is as untrusted as a shipped `.hel/`: every record's
//! framing and check, every object's id (its bytes hashed again) and its
//! declared size are verified before anything is written, and the head's
//! whole history is marked and validated in this store before any head
//! moves. Objects that verified but belong to a head that then fails stay
//! unreachable in their pack until gc takes them.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use crate::heads;
use crate::journal::CommitPayload;
use crate::lock::{SessionLease, Shared};
use crate::object::{self, Cap, Kind};
use crate::odb::Odb;
use crate::pack::{self, FileKind, RecordType, FILE_HEADER, RECORD_HEADER};
use crate::write::Writer;
use crate::{gc, list, time, Error, ObjectId, Result, SessionId, Store};

/// The most objects one received pack may hold (a pack index's limit).
pub const PACK_OBJECTS_MAX: u64 = 1 << 20;

/// The most stored bytes one record may hold: the largest object a store
/// accepts, compressed as badly as zstd can.
const STORED_MAX: u64 = Cap::ANY.max + Cap::ANY.max / 128 + 4096;

/// The most bytes one remote-state file may hold.
const STATE_MAX: u64 = 8 << 20;

/// A pack made for sending: the bytes of a sealed pack (objects-spec
/// §12.1) and how many objects it holds.
#[derive(Debug)]
pub struct OutPack {
    pub bytes: Vec<u8>,
    pub objects: u64,
    /// The ids of the objects it holds, sorted.
    pub ids: Vec<ObjectId>,
}

/// The objects of a received pack, every one verified.
#[derive(Debug, Default)]
pub struct Received {
    records: Vec<(ObjectId, Vec<u8>)>,
}

impl Received {
    /// How many objects it holds.
    pub fn objects(&self) -> u64 {
        self.records.len() as u64
    }

    /// Does it hold `id`?
    pub fn holds(&self, id: &ObjectId) -> bool {
        self.records.iter().any(|(i, _)| i == id)
    }
}

/// What bringing a head in did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adopted {
    /// The local session already was at that head.
    UpToDate,
    /// The local session's history already holds that head (it is ahead).
    LocalAhead,
    /// A session new to this store.
    New,
    /// The local session moved forward from `from`.
    FastForward { from: ObjectId },
    /// Both sides had new checkpoints: the received line is the new
    /// session `session` (a fork of the received head); the local session
    /// is untouched.
    Forked { session: SessionId, head: ObjectId },
}

/// Sealed-pack bytes of `records`.
fn encode_pack(records: &[(ObjectId, Vec<u8>)]) -> Vec<u8> {
    let mut body = pack::file_header(FileKind::Sealed).to_vec();
    for (id, stored) in records {
        body.extend_from_slice(&pack::encode_record(RecordType::Object, id, stored));
    }
    body
}

/// Every snapshot `head`'s history holds (itself included), through all
/// parents; iterative, each read and validated.
fn history(layout: &Odb, head: &ObjectId) -> Result<HashSet<ObjectId>> {
    let mut seen = HashSet::new();
    let mut todo = vec![*head];
    while let Some(id) = todo.pop() {
        if !seen.insert(id) {
            continue;
        }
        todo.extend(crate::read::snapshot(layout, &id)?.parents);
    }
    Ok(seen)
}

/// Check what `head` reaches as fsck checks what a ref reaches (objects-spec
/// §8): every object present and verified, every snapshot, node and tree
/// valid, every root tree within the flattening limits (§4.1), every
/// message and JSON blob valid; the first fault is returned.
/// Gives the snapshots it reached.
fn verify_reach(layout: &Odb, head: &ObjectId) -> Result<Vec<ObjectId>> {
    let mut first: Option<Error> = None;
    let marked = gc::mark(layout, &[*head], &mut |e| {
        first.get_or_insert(e);
        Ok(())
    })?;
    if let Some(e) = first {
        return Err(e);
    }
    crate::read::check_roots(layout, &marked.workspace_roots, &mut |e| Err(e))?;
    let mut blobs: HashSet<ObjectId> = marked.message_blobs.clone();
    for node in marked.shapes.nodes.keys() {
        blobs.extend(list::validate_node_messages(layout, node)?);
    }
    for b in &blobs {
        list::validate_blob_message(layout, b)?;
    }
    for (blob, cap) in &marked.json_blobs {
        let bytes = crate::read::of_kind(layout, blob, Kind::Blob, *cap)?;
        crate::json::check(&bytes, crate::json::Limits::STORED).map_err(|e| Error::Corrupt {
            id: *blob,
            path: layout.object_path(blob),
            reason: format!("{} is not JSON: {e}", cap.what),
        })?;
    }
    // Everything else (spill and workspace blobs): present and verified.
    for id in &marked.reachable {
        crate::read::object(layout, id, Cap::ANY)?;
    }
    Ok(marked.snapshots)
}

fn check_key(key: &str) -> Result<()> {
    let ok = !key.is_empty()
        && key.len() <= 128
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::Internal(format!(
            "{key:?} is not a remote-state key"
        )))
    }
}

/// The objects `head` reaches that `base` (a checkpoint of this store,
/// in `head`'s history) does not, as a sealed pack, each verified as it
/// is read. With no `base`, everything `head` reaches.
pub fn pack_between(store: &Store, head: &ObjectId, base: Option<&ObjectId>) -> Result<OutPack> {
    let layout = store.layout_for_gc()?.ok_or_else(|| Error::Missing {
        id: *head,
        path: store.root_path(),
    })?;
    let _lock = Shared::take(layout)?;
    let mut abort = |e: Error| Err(e);
    let marked = gc::mark(layout, &[*head], &mut abort)?;
    // What the receiver would refuse is not sent.
    crate::read::check_roots(layout, &marked.workspace_roots, &mut abort)?;
    let want = marked.reachable;
    let have = match base {
        Some(b) => gc::mark(layout, &[*b], &mut abort)?.reachable,
        None => HashSet::new(),
    };
    let mut ids: Vec<ObjectId> = want.difference(&have).copied().collect();
    ids.sort();
    let mut records = Vec::with_capacity(ids.len());
    for id in &ids {
        let stored = crate::repack::stored_bytes(layout, id)?;
        records.push((*id, stored));
    }
    Ok(OutPack {
        objects: records.len() as u64,
        bytes: encode_pack(&records),
        ids,
    })
}

/// Verify the bytes of a sealed pack received from `source` (named in
/// every error): the file header, every record's framing and check,
/// every object's id and size (decoded whole, as a read would). Nothing
/// is written.
pub fn receive_pack(bytes: &[u8], source: &Path) -> Result<Received> {
    let damaged = |offset: u64, id: Option<ObjectId>, reason: String| Error::DamagedRecord {
        pack: source.to_owned(),
        offset,
        id,
        reason,
    };
    if bytes.len() < FILE_HEADER as usize {
        return Err(damaged(0, None, "too short to be a pack".into()));
    }
    pack::check_file_header(&bytes[..FILE_HEADER as usize], FileKind::Sealed)
        .map_err(|r| damaged(0, None, r.to_string()))?;
    let mut out = Received::default();
    let mut at = FILE_HEADER as usize;
    while at < bytes.len() {
        let off = at as u64;
        let h = pack::parse_header(&bytes[at..]).map_err(|r| damaged(off, None, r.to_string()))?;
        if h.rtype != RecordType::Object {
            return Err(damaged(off, Some(h.id), "not an object record".into()));
        }
        if h.stored_len > STORED_MAX {
            return Err(damaged(
                off,
                Some(h.id),
                format!(
                    "it declares {} stored bytes, over the {STORED_MAX} an object may have",
                    h.stored_len
                ),
            ));
        }
        let end = at + RECORD_HEADER as usize + h.stored_len as usize;
        if end > bytes.len() {
            return Err(damaged(off, Some(h.id), "the pack ends inside it".into()));
        }
        if !pack::check_matches(&bytes[at..end]) {
            return Err(damaged(
                off,
                Some(h.id),
                "its check does not match (torn or damaged)".into(),
            ));
        }
        if out.objects() >= PACK_OBJECTS_MAX {
            return Err(damaged(
                off,
                None,
                format!("more than {PACK_OBJECTS_MAX} objects"),
            ));
        }
        let stored = &bytes[at + RECORD_HEADER as usize..end];
        let mut place = source.as_os_str().to_owned();
        place.push(format!("@{off}"));
        object::decode(&h.id, Path::new(&place), stored, Cap::ANY)?;
        out.records.push((h.id, stored.to_vec()));
        at = end;
    }
    Ok(out)
}

/// Bring `head` in as `session`'s head, with the objects of `received`
/// (verified by [`receive_pack`]). The objects land first, as one
/// sealed pack; then everything `head` reaches is validated in this
/// store (see [`verify_reach`]) and the head must be a checkpoint of
/// `session`; only then does anything move: a session new here gets
/// `head`; a local session whose head `head`'s history holds moves
/// forward; one whose history holds `head` is left (it is ahead); when
/// both have checkpoints the other lacks, `head` is forked into a new
/// session and the local one is untouched. Refused while the session is
/// in use ([`Error::InUse`]) when it would move.
pub fn adopt(
    store: &Store,
    session: &SessionId,
    head: &ObjectId,
    received: &[Received],
) -> Result<Adopted> {
    let layout = store.layout_create()?;
    // A store not made here is taken over first (place.rs): what a
    // pull brings in is the project's own.
    crate::place::claim(layout, store.project_dir(), None)?;
    let lock = Shared::take(layout)?;
    layout.index().forget_removed();
    // A session in the trash has no ref: taken as new, its ref would be
    // published beside the entry and the trashed history lost at the
    // next gc.
    if heads::read(layout, session)?.is_none() && crate::trashed::has_any(layout, session)? {
        return Err(Error::Trashed {
            session: session.to_string(),
        });
    }
    let records: Vec<(ObjectId, Vec<u8>)> = received
        .iter()
        .flat_map(|r| r.records.iter().cloned())
        .collect();
    let cp = admit(store, layout, session, head, &records)?;
    if !records.is_empty() {
        crate::repack::write_sealed_shared(layout, &lock, &records)?;
    }
    let local = heads::read(layout, session)?;
    let (parent, seq, deps) = match &local {
        None => (None, 1, BTreeSet::new()),
        Some(l) if l.id == *head => return Ok(Adopted::UpToDate),
        Some(l) => {
            if history(layout, head)?.contains(&l.id) {
                (Some(l.id), l.seq() + 1, l.deps())
            } else if history(layout, &l.id)?.contains(head) {
                return Ok(Adopted::LocalAhead);
            } else {
                drop(lock);
                let (lease, id, _) = store.fork(head)?;
                return Ok(Adopted::Forked {
                    session: lease.session().clone(),
                    head: id,
                });
            }
        }
    };
    let lease = SessionLease::acquire(layout, session, true)?;
    // The lease is ours: the head cannot move under us from here.
    let now_head = heads::read(layout, session)?.map(|h| h.id);
    if now_head != parent {
        return Err(Error::RefMoved {
            session: session.to_string(),
            expected: parent.map_or("none".into(), |p| p.to_hex()),
            found: now_head.map_or("none".into(), |p| p.to_hex()),
        });
    }
    let mut slot = lease.journal.lock().unwrap_or_else(|p| p.into_inner());
    let journal = store.journal_writer(layout, &lease, &mut slot)?;
    let mut writer = Writer::new(&lock, session, &deps);
    let payload = CommitPayload {
        deps: writer.deps.clone(),
        parent,
        seq,
        session: session.clone(),
        summary: cp.summary.clone(),
        time_ms: time::now_ms(),
        why: "pull".into(),
    };
    let (_, told) = writer.commit(journal, *head, payload, || {
        crate::commit::move_ref(layout, session, parent, *head)
    })?;
    drop(slot);
    // A ref moved whose directory sync failed is not reported by a
    // pull (it never was).
    drop(told);
    Ok(match parent {
        None => Adopted::New,
        Some(from) => Adopted::FastForward { from },
    })
}

/// The admission check of a pull, before anything is written: with the
/// received `records` read as if stored, everything `head` reaches is
/// valid ([`verify_reach`]), `head` is a checkpoint of `session`, and each
/// received checkpoint loads as [`Store::load`] would load it (its
/// messages, their pairing, the limits, its record). Gives `head`.
fn admit(
    store: &Store,
    layout: &Odb,
    session: &SessionId,
    head: &ObjectId,
    records: &[(ObjectId, Vec<u8>)],
) -> Result<crate::snapshot::Checkpoint> {
    let _incoming = layout.receive(records);
    let snapshots = verify_reach(layout, head)?;
    let cp = crate::read::snapshot(layout, head)?;
    if cp.session_id != *session {
        return Err(Error::BadRef {
            session: session.to_string(),
            path: Path::new("(received)").to_owned(),
            reason: crate::RefError::OtherSession {
                checkpoint: Box::new(*head),
                owner: cp.session_id,
            },
        });
    }
    // Checkpoints already here were admitted when they came. Their lists
    // share nodes: each received object is decoded once for them all (the
    // memo, bounded), not once per checkpoint, which made a pull of a
    // long session quadratic in its checkpoints.
    let received: HashSet<&ObjectId> = records.iter().map(|(id, _)| id).collect();
    struct MemoOff<'a>(&'a Odb);
    impl Drop for MemoOff<'_> {
        fn drop(&mut self) {
            self.0.set_memo(false);
        }
    }
    layout.set_memo(true);
    let _off = MemoOff(layout);
    for id in snapshots.iter().filter(|id| received.contains(id)) {
        store.check_covering(id)?;
    }
    Ok(cp)
}

/// Does `head`'s history (itself included) hold checkpoint `other`?
pub fn history_holds(store: &Store, head: &ObjectId, other: &ObjectId) -> Result<bool> {
    let layout = store.layout_for_gc()?.ok_or_else(|| Error::Missing {
        id: *head,
        path: store.root_path(),
    })?;
    Ok(history(layout, head)?.contains(other))
}

/// Is object `id` in this store (anywhere)?
pub fn has_object(store: &Store, id: &ObjectId) -> Result<bool> {
    match store.layout_for_gc()? {
        Some(layout) => Ok(layout.index().locate(layout, id)?.is_some()),
        None => Ok(false),
    }
}

/// What this store last recorded under `key` (a remote's state, opaque
/// here): `None` when nothing is. `key` is lowercase letters, digits
/// and `-` (at most 128).
pub fn remote_state(store: &Store, key: &str) -> Result<Option<Vec<u8>>> {
    check_key(key)?;
    let Some(layout) = store.layout_for_gc()? else {
        return Ok(None);
    };
    match layout.remotes()? {
        Some(dir) => Ok(dir.read_file(key, STATE_MAX)?),
        None => Ok(None),
    }
}

/// Record `bytes` under `key`, replacing what was there: written aside,
/// synced and renamed, so a crash leaves the old state or the new.
pub fn set_remote_state(store: &Store, key: &str, bytes: &[u8]) -> Result<()> {
    check_key(key)?;
    let layout = store.layout_create()?;
    let dir = layout.remotes_create()?;
    let tmp = format!(".{key}.{}", uuid::Uuid::new_v4().simple());
    Ok(dir.replace(key, bytes, 0o600, dir, &tmp)?)
}

/// Forget what is recorded under `key`.
pub fn remove_remote_state(store: &Store, key: &str) -> Result<()> {
    check_key(key)?;
    if let Some(layout) = store.layout_for_gc()? {
        if let Some(dir) = layout.remotes()? {
            dir.remove_file(key)?;
            dir.sync()?;
        }
    }
    Ok(())
}
