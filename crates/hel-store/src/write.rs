//! The writer of one commit's (or fork's) new objects into its session's
//! journal, deduplicating against what the object database holds.

use std::collections::{BTreeSet, HashSet};

use crate::lock::Shared;
use crate::object::{compress_canonical, encode, Cap, Kind};
use crate::odb::{Found, Odb};
use crate::{journal, pack, Error, ObjectId, Result, SessionId};

/// How small an object found in another session's journal may be and
/// still be written again rather than shared: sharing it would make this
/// session depend on that journal for a few bytes.
const SHARE_MIN: u64 = 4096;

/// How a writer may name an object already stored.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sharing {
    /// Messages, spill, snapshots: a copy verified once per process; in
    /// another session's journal only when large.
    Verified,
    /// Workspace files and trees: any copy where this session may name it,
    /// any size (a project's sessions share most files, and one dependency
    /// costs less than every small file stored again per session), not read
    /// back first (a snapshot of 70,000 files cannot decompress them all
    /// once per process). A forged copy under a file's name is caught when
    /// it is read, as every read verifies: a restore of that file fails
    /// naming the object, never writes other bytes, and fsck reports it.
    Workspace,
}

/// Writes the objects of one operation (a commit, a fork) into the
/// session's journal. It exists only under the shared store lock
/// ([`Shared`]), so gc cannot remove an object between "it already exists"
/// and the commit record that publishes what names it. New objects are
/// kept in memory and appended, with the commit record, by
/// [`Writer::commit`] in one write and one sync.
#[must_use = "call commit() to publish the objects"]
pub(crate) struct Writer<'a> {
    layout: &'a Odb,
    session: SessionId,
    /// New objects not yet staged in the journal: (id, stored bytes).
    pending: Vec<(ObjectId, Vec<u8>)>,
    pending_bytes: u64,
    /// Every object this writer wrote, staged or pending.
    pending_ids: HashSet<ObjectId>,
    /// Sessions whose journals hold objects this write names.
    pub deps: BTreeSet<SessionId>,
    /// Objects newly written by this writer.
    pub objects_written: u64,
    /// Compressed bytes newly written by this writer.
    pub bytes_written: u64,
}

impl<'a> Writer<'a> {
    /// A writer for `session` (whose lease the caller holds) that may share
    /// objects of the journals of `deps` without adding dependencies: the
    /// deps of its head, or of the first head a fork is about to publish.
    pub fn new(lock: &Shared<'a, Odb>, session: &SessionId, deps: &BTreeSet<SessionId>) -> Self {
        Writer {
            layout: lock.layout,
            session: session.clone(),
            pending: Vec::new(),
            pending_bytes: 0,
            pending_ids: HashSet::new(),
            deps: deps.clone(),
            objects_written: 0,
            bytes_written: 0,
        }
    }

    /// Store an object (unless it is stored, verified, where this session
    /// may name it) and return its id.
    pub fn put(&mut self, kind: Kind, payload: &[u8]) -> Result<ObjectId> {
        let (id, canonical) = encode(kind, payload);
        if self.has(&id)? {
            return Ok(id);
        }
        let stored = compress_canonical(kind, &id, &canonical)?;
        self.push(id, stored);
        Ok(id)
    }

    fn push(&mut self, id: ObjectId, stored: Vec<u8>) {
        self.objects_written += 1;
        self.bytes_written += stored.len() as u64 + pack::RECORD_HEADER;
        self.pending_bytes += stored.len() as u64;
        self.pending_ids.insert(id);
        self.pending.push((id, stored));
    }

    /// May what this write stores name `id`: written by it, or stored where
    /// this session may name it ([`Writer::can_share`])?
    pub fn has(&mut self, id: &ObjectId) -> Result<bool> {
        Ok(self.pending_ids.contains(id) || self.can_share(id)?)
    }

    /// Compressed bytes pending in memory.
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }

    /// Take the objects pending in memory (to stage them in the journal);
    /// they still count as written by this writer.
    pub fn take_pending(&mut self) -> Vec<(ObjectId, Vec<u8>)> {
        self.pending_bytes = 0;
        std::mem::take(&mut self.pending)
    }

    /// May this write name `id` where it is already stored? Only a stored
    /// copy that verifies (once per process: a store that came with the
    /// repository could hold a corrupt file under the name of content every
    /// session writes), in this session's journal or one it depends on, a
    /// sealed pack, or another session's journal when the
    /// object is large enough to be worth a dependency.
    fn can_share(&mut self, id: &ObjectId) -> Result<bool> {
        self.can_share_as(id, Sharing::Verified)
    }

    /// [`Writer::can_share`] for workspace objects: see [`Sharing::Workspace`].
    pub fn has_for_workspace(&mut self, id: &ObjectId) -> Result<bool> {
        Ok(self.pending_ids.contains(id) || self.can_share_as(id, Sharing::Workspace)?)
    }

    /// Store the compressed bytes of workspace object `id` (unless
    /// [`Writer::has_for_workspace`]). Returns whether they were written.
    pub fn put_workspace(&mut self, id: ObjectId, stored: Vec<u8>) -> Result<bool> {
        if self.has_for_workspace(&id)? {
            return Ok(false);
        }
        self.push(id, stored);
        Ok(true)
    }

    fn can_share_as(&mut self, id: &ObjectId, sharing: Sharing) -> Result<bool> {
        let found = self.layout.index().locate_open(self.layout, id)?;
        let owner = match &found {
            None => return Ok(false),
            Some(Found { len, .. }) => match self.layout.index().journal_of(id, &self.session) {
                Some(s) if s != self.session && !self.deps.contains(&s) => {
                    if *len < SHARE_MIN && sharing == Sharing::Verified {
                        return Ok(false);
                    }
                    Some(s)
                }
                _ => None,
            },
        };
        if sharing == Sharing::Verified && !self.layout.is_verified(id) {
            if crate::read::object(self.layout, id, Cap::ANY).is_err() {
                // Not the content its name promises: write ours.
                return Ok(false);
            }
            self.layout.set_verified(*id);
        }
        if let Some(s) = owner {
            self.deps.insert(s);
        }
        Ok(true)
    }

    /// Append the new objects and a commit record publishing `head` to the
    /// session's journal, durable with one sync, then `publish` (the ref's
    /// move). Nothing is published on error.
    pub fn commit(
        &mut self,
        journal: &mut journal::Writer,
        head: ObjectId,
        payload: journal::CommitPayload,
        publish: impl FnOnce() -> Result<Option<Error>>,
    ) -> Result<(journal::Commit, Option<Error>)> {
        // Durable before the ref can publish a head that names them:
        // every dependency whose journal is there and whose record is
        // not (the previous head's may be gone: a delete of that
        // dependency removed them, and a session of its id came back
        // since), and with a session's first head, that they are
        // recorded.
        let first = payload.parent.is_none();
        if crate::dependents::record(self.layout, &self.session, &payload.deps, first)? {
            crate::failpoint::kill("dependents-recorded");
        }
        let commit = journal.commit(&self.pending, head, payload, publish)?;
        self.pending.clear();
        self.pending_bytes = 0;
        for id in self.pending_ids.drain() {
            self.layout.set_verified(id);
        }
        Ok(commit)
    }
}

/// The id `tree` has as an object.
pub fn tree_id(tree: &crate::tree::Tree) -> ObjectId {
    tree_payload_id(&tree.to_payload())
}

/// The id of the tree whose payload is `payload` (entries written with
/// [`crate::tree::push_entry`]).
pub fn tree_payload_id(payload: &[u8]) -> ObjectId {
    crate::object::id_of(Kind::Tree, payload)
}

/// The id a blob holding `bytes` has (spill files are named by it).
pub fn blob_id(bytes: &[u8]) -> ObjectId {
    crate::object::id_of(Kind::Blob, bytes)
}

#[cfg(test)]
mod tests {
    //! The writer's dedup and the reads of what it wrote (and of what a
    //! hostile store plants).
    use super::*;
    use crate::dir::Dir;
    use crate::object::id_of;
    use crate::read::{object as read, of_kind as read_kind};

    fn store() -> (tempfile::TempDir, Odb) {
        let dir = tempfile::tempdir().unwrap();
        let project = Dir::open_path(dir.path()).unwrap();
        let layout = crate::upgrade::create(&project).unwrap();
        (dir, layout)
    }

    fn payload(session: &SessionId) -> journal::CommitPayload {
        journal::CommitPayload {
            deps: BTreeSet::new(),
            parent: None,
            seq: 1,
            session: session.clone(),
            summary: crate::Summary::default(),
            time_ms: 0,
            why: "test".into(),
        }
    }

    /// Write objects through a journal, as a commit does.
    fn put_all(layout: &Odb, objects: &[(Kind, &[u8])]) -> (Vec<ObjectId>, u64) {
        let lock = Shared::take(layout).unwrap();
        let sid = SessionId::new_random();
        let mut jw = journal::Writer::open(
            layout.journals_create().unwrap(),
            layout.tmp_create().unwrap(),
            &sid,
            journal::Rule::Ref(None),
        )
        .unwrap();
        layout.index().adopt(std::sync::Arc::clone(&jw.view));
        let mut w = Writer::new(&lock, &sid, &BTreeSet::new());
        let ids: Vec<ObjectId> = objects.iter().map(|(k, p)| w.put(*k, p).unwrap()).collect();
        let written = w.objects_written;
        w.commit(&mut jw, ids[0], payload(&sid), || Ok(None))
            .unwrap();
        (ids, written)
    }

    /// Write `canonical` compressed under its own id, as a hostile store would.
    fn plant(layout: &Odb, canonical: &[u8]) -> ObjectId {
        crate::repack::plant(layout.root().path(), canonical)
    }

    #[test]
    fn id_of_matches_encode() {
        for payload in [&b""[..], b"hello", &[0u8; 5000]] {
            assert_eq!(id_of(Kind::Blob, payload), encode(Kind::Blob, payload).0);
        }
    }

    #[test]
    fn write_read_round_trip_and_dedup() {
        let (_d, layout) = store();
        let (ids, written) = put_all(&layout, &[(Kind::Blob, b"hello"), (Kind::Blob, b"hello")]);
        assert_eq!(ids[0], ids[1]);
        assert_eq!(written, 1);
        assert_eq!(
            read(&layout, &ids[0], Cap::ANY).unwrap(),
            (Kind::Blob, b"hello".to_vec())
        );
        assert!(matches!(
            read_kind(&layout, &ids[0], Kind::List, Cap::LIST),
            Err(Error::WrongKind { .. })
        ));
        // Written again by another session: a small object is written
        // again (sharing it would make a dependency for a few bytes), a
        // large one is shared.
        let (_, again) = put_all(&layout, &[(Kind::Blob, b"hello")]);
        assert_eq!(again, 1);
        // Incompressible, so its stored copy is worth sharing.
        let mut big = vec![0u8; 100_000];
        blake3::Hasher::new().finalize_xof().fill(&mut big);
        let (_, first) = put_all(&layout, &[(Kind::Blob, &big)]);
        let (_, second) = put_all(&layout, &[(Kind::Blob, &big)]);
        assert_eq!((first, second), (1, 0));
    }

    /// objects-spec/vectors.json, `refused`: a header whose length is not
    /// canonical is malformed, though its bytes hash to an id (one content,
    /// two ids otherwise).
    #[test]
    fn headers_that_are_not_canonical_are_refused() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../../objects-spec/vectors.json")).unwrap();
        let refused = doc["refused"].as_array().unwrap();
        assert!(refused.len() >= 3);
        let (_d, layout) = store();
        for v in refused {
            let hex = v["canonical_hex"].as_str().unwrap();
            let canonical: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            let id = plant(&layout, &canonical);
            assert_eq!(id.to_hex(), v["id"].as_str().unwrap(), "{}", v["name"]);
            let err = read(&layout, &id, Cap::ANY).unwrap_err();
            assert!(
                matches!(&err, Error::Corrupt { reason, .. } if reason == "malformed header"),
                "{}: {err}",
                v["name"]
            );
        }
        // The canonical spelling of the same content reads.
        let id = plant(&layout, b"blob 5\0hello");
        assert_eq!(
            read(&layout, &id, Cap::ANY).unwrap(),
            (Kind::Blob, b"hello".to_vec())
        );
        let id = plant(&layout, b"blob 0\0");
        assert_eq!(
            read(&layout, &id, Cap::ANY).unwrap(),
            (Kind::Blob, Vec::new())
        );
    }

    #[test]
    fn unknown_kind_bombs_and_caps_are_typed_errors() {
        let (_d, layout) = store();
        let id = plant(&layout, b"twig 2\0hi");
        assert!(
            matches!(read(&layout, &id, Cap::ANY), Err(Error::UnknownKind { kind, .. }) if kind == "twig")
        );

        // Declares 5 bytes, decompresses to 1 MB: stops at the declared size.
        let mut bomb = b"blob 5\0".to_vec();
        bomb.extend(vec![0u8; 1 << 20]);
        let id = plant(&layout, &bomb);
        let err = read(&layout, &id, Cap::ANY).unwrap_err();
        assert!(
            err.to_string().contains("data after the declared length"),
            "{err}"
        );

        // Declares more than the cap of its use: refused before allocating.
        let mut big = b"list 2000000\0".to_vec();
        big.extend(vec![b' '; 2_000_000]);
        let id = plant(&layout, &big);
        let err = read(&layout, &id, Cap::CONFIG).unwrap_err();
        assert!(
            matches!(err, Error::TooLarge { size: 2_000_000, max, what: "request config", .. } if max == Cap::CONFIG.max),
            "{err}"
        );
        assert!(read(&layout, &id, Cap::LIST).is_ok());
    }
}
