//! Objects: their codec (encode, compress, decode and verify), reads of an
//! object wherever the object database finds it (a journal, a sealed pack,
//! a loose file under `.hel/objects/`), and the writer of one commit's new
//! objects into its session's journal. (Loose files are only read: format
//! 3 writes none but the stub of objects-spec §12.6, which `layout.rs`
//! places; sealed packs are written by `repack.rs`.)
//!
//! Canonical bytes of an object are `"<kind> <len>\0"` followed by `len`
//! payload bytes; its id is BLAKE3 of those bytes, and the file holds them
//! compressed as one zstd frame. Reads verify the id, refuse a declared
//! length over the cap for what the object is used as before allocating
//! anything, bound decompression by the declared length, and name the
//! object and path in every error.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashSet};

use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer, ResetDirective};

use crate::dir;
use crate::layout::{object_name, Layout};
use crate::lock::Shared;
use crate::odb::{self, Found};
use crate::{journal, pack, Error, ObjectId, Result, SessionId};

/// zstd level used for every object.
const LEVEL: i32 = 3;

const MIB: u64 = 1 << 20;

/// The most payload bytes an object may declare for one use of it. A
/// reader passes the cap of what it reads; a larger declared length is
/// refused before anything is allocated. (objects-spec §3, "Caps".)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cap {
    pub max: u64,
    pub what: &'static str,
}

impl Cap {
    pub const SNAPSHOT: Cap = Cap {
        max: 4 * MIB,
        what: "snapshot",
    };
    pub const LIST: Cap = Cap {
        max: 32 * MIB,
        what: "list node",
    };
    pub const CONFIG: Cap = Cap {
        max: MIB,
        what: "request config",
    };
    pub const CURSORS: Cap = Cap {
        max: MIB,
        what: "cursor table",
    };
    pub const MESSAGE: Cap = Cap {
        max: 64 * MIB,
        what: "message",
    };
    pub const SPILL: Cap = Cap {
        max: 64 * MIB,
        what: "spill file",
    };
    pub const TREE: Cap = Cap {
        max: 16 * MIB,
        what: "tree",
    };
    /// A file of a workspace snapshot (its size limit can be raised up to
    /// this).
    pub const FILE: Cap = Cap {
        max: 64 * MIB,
        what: "workspace file",
    };
    /// Any object, whatever it is used for (fsck, gc).
    pub const ANY: Cap = Cap {
        max: 64 * MIB,
        what: "object",
    };

    /// The cap of an object of `kind` whose use is not known.
    pub fn of_kind(kind: Kind) -> Cap {
        match kind {
            Kind::Snapshot => Cap::SNAPSHOT,
            Kind::List => Cap::LIST,
            Kind::Tree => Cap::TREE,
            Kind::Blob => Cap::ANY,
        }
    }
}

/// The kinds of object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Opaque bytes: one message's canonical JSON, or one spill file.
    Blob,
    /// A node of a session's message list (canonical JSON).
    List,
    /// A checkpoint (canonical JSON).
    Snapshot,
    /// A directory of a workspace snapshot (binary, objects-spec §13).
    Tree,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Blob => "blob",
            Kind::List => "list",
            Kind::Snapshot => "snapshot",
            Kind::Tree => "tree",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        match s {
            "blob" => Some(Kind::Blob),
            "list" => Some(Kind::List),
            "snapshot" => Some(Kind::Snapshot),
            "tree" => Some(Kind::Tree),
            _ => None,
        }
    }
}

/// The canonical bytes of an object and its id.
pub fn encode(kind: Kind, payload: &[u8]) -> (ObjectId, Vec<u8>) {
    let mut bytes = format!("{} {}\0", kind.name(), payload.len()).into_bytes();
    bytes.extend_from_slice(payload);
    (ObjectId::of_canonical(&bytes), bytes)
}

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
}

/// The id of an object of `kind` with `payload` and its stored bytes (its
/// canonical bytes as one zstd frame). Any thread may call this.
pub fn compress(kind: Kind, payload: &[u8]) -> Result<(ObjectId, Vec<u8>)> {
    let (id, canonical) = encode(kind, payload);
    Ok((id, compress_canonical(&id, &canonical)?))
}

fn compress_canonical(id: &ObjectId, canonical: &[u8]) -> Result<Vec<u8>> {
    let failed = |e: std::io::Error| Error::Io {
        path: std::path::PathBuf::from(format!("(compressing object {id})")),
        source: e,
    };
    let stored = COMPRESSOR.with(|slot| -> std::io::Result<Vec<u8>> {
        let mut slot = slot.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Compressor::new(LEVEL)?);
        }
        match slot.as_mut() {
            Some(c) => c.compress(canonical),
            None => zstd::bulk::compress(canonical, LEVEL),
        }
    });
    stored.map_err(failed)
}

/// The id an object of `kind` with `payload` has, without building its
/// canonical bytes.
pub fn id_of(kind: Kind, payload: &[u8]) -> ObjectId {
    let mut h = blake3::Hasher::new();
    h.update(format!("{} {}\0", kind.name(), payload.len()).as_bytes());
    h.update(payload);
    ObjectId::from_bytes(*h.finalize().as_bytes())
}

/// The compressed size a file holding `cap` payload bytes can have: zstd's
/// worst case for incompressible data plus the header.
fn file_max(cap: Cap) -> u64 {
    cap.max + cap.max / 128 + 4096
}

/// Read and verify object `id` under `cap`, returning its kind and payload:
/// from the journal or pack that holds it, else from its loose file.
pub fn read(layout: &Layout, id: &ObjectId, cap: Cap) -> Result<(Kind, Vec<u8>)> {
    match layout.odb().locate(layout, id)? {
        Some(found) => read_at(layout, id, &found, cap),
        None => Err(Error::Missing {
            id: *id,
            path: layout.loose_path(id),
        }),
    }
}

/// Read and verify object `id` under `cap` where `found` says it is.
pub(crate) fn read_at(
    layout: &Layout,
    id: &ObjectId,
    found: &Found,
    cap: Cap,
) -> Result<(Kind, Vec<u8>)> {
    match found {
        Found::Record { file, place, len } => {
            let len = *len;
            let path = place.display_path();
            if len.saturating_sub(pack::RECORD_HEADER) > file_max(cap) {
                return Err(Error::TooLarge {
                    id: *id,
                    path,
                    size: len - pack::RECORD_HEADER,
                    max: cap.max,
                    what: cap.what,
                });
            }
            let record = odb::read_found(file, place, len, id, file_max(cap))?;
            decode(id, &path, &record[pack::RECORD_HEADER as usize..], cap)
                .map_err(|e| odb::explain_damage(e, &record, place, id))
        }
        Found::Loose => read_loose(layout, id, cap),
    }
}

/// Read and verify the loose file of object `id` under `cap`.
pub(crate) fn read_loose(layout: &Layout, id: &ObjectId, cap: Cap) -> Result<(Kind, Vec<u8>)> {
    let path = layout.loose_path(id);
    let (dir, name) = object_name(id);
    let file = match layout.objects()? {
        Some(objects) => objects.open_file2(&dir, &name)?,
        None => None,
    };
    let Some(file) = file else {
        return Err(Error::Missing { id: *id, path });
    };
    let data = match dir::read_bounded(file, file_max(cap), &path) {
        Ok(d) => d,
        Err(Error::FileTooLarge { size, .. }) => {
            return Err(Error::TooLarge {
                id: *id,
                path,
                size,
                max: cap.max,
                what: cap.what,
            })
        }
        Err(e) => return Err(e),
    };
    decode(id, &path, &data, cap)
}

thread_local! {
    // A decompression context is costly to set up; reads reuse one per thread.
    static DCTX: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// Decompress into `out` (up to its capacity) until it is full or the
/// frame ends; returns whether the frame ended.
fn fill<C: zstd::zstd_safe::WriteBuf + ?Sized>(
    dctx: &mut DCtx<'static>,
    input: &mut InBuffer<'_>,
    out: &mut C,
    pos: &mut usize,
) -> std::result::Result<bool, DecodeError> {
    loop {
        let before = (*pos, input.pos());
        let mut buf = OutBuffer::around_pos(out, *pos);
        let hint = dctx
            .decompress_stream(&mut buf, input)
            .map_err(|code| DecodeError::Decompress(zstd::zstd_safe::get_error_name(code)))?;
        *pos = buf.pos();
        let full = *pos == buf.capacity();
        if hint == 0 {
            return Ok(true);
        }
        if full {
            return Ok(false);
        }
        if (*pos, input.pos()) == before {
            return Err(DecodeError::Truncated);
        }
    }
}

/// A decompressed object: its header text (`<kind> <len>`) and payload.
struct Decompressed {
    header: Vec<u8>,
    payload: Vec<u8>,
}

/// Why the bytes of an object file are not the object they should be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    /// zstd refused the frame (its error name).
    #[error("cannot decompress: {0}")]
    Decompress(&'static str),
    /// The frame ends before the header does.
    #[error("truncated")]
    Truncated,
    #[error("cannot reset the decompressor")]
    Reset,
    /// No NUL, or not `<kind> <length>` before it.
    #[error("malformed header")]
    MalformedHeader,
    #[error("data after the declared length")]
    DataAfterLength,
    #[error("truncated: {at} of {len} payload bytes")]
    TruncatedPayload { at: usize, len: usize },
    #[error("trailing bytes after the frame")]
    TrailingBytes,
    #[error("content does not match its id")]
    IdMismatch,
    #[error("header is not text")]
    HeaderNotText,
}

/// Why an object file could not be decompressed.
enum Undecodable {
    Corrupt(DecodeError),
    /// The header declares this many payload bytes, over the cap.
    OverCap(u64),
}

impl From<DecodeError> for Undecodable {
    fn from(e: DecodeError) -> Self {
        Undecodable::Corrupt(e)
    }
}

/// The length a header's `<len>` spells, when it is canonical: decimal
/// digits without a sign or leading zeros (`0` alone for an empty
/// payload). `05` or `+5` would give a second id to the content of `5`
/// (objects-spec §2.1), so they are malformed.
fn canonical_len(n: &str) -> Option<u64> {
    let digits = n.as_bytes();
    let canonical = !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && (digits[0] != b'0' || digits.len() == 1);
    if canonical {
        n.parse().ok()
    } else {
        None
    }
}

/// Decompress an object file. Decompression is bounded by the length the
/// object's header declares, which must be within `cap`: the header is
/// decompressed first, then that many payload bytes straight into the
/// payload's buffer, and a frame that holds more is corrupt.
fn decompress(data: &[u8], cap: u64) -> std::result::Result<Decompressed, Undecodable> {
    DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = slot.get_or_insert_with(DCtx::create);
        dctx.reset(ResetDirective::SessionOnly)
            .map_err(|_| DecodeError::Reset)?;
        let mut input = InBuffer::around(data);
        let mut head = [0u8; 33];
        let mut pos = 0;
        let mut ended = fill(dctx, &mut input, &mut head[..], &mut pos)?;
        let nul = head[..pos]
            .iter()
            .position(|&b| b == 0)
            .ok_or(DecodeError::MalformedHeader)?;
        let len = std::str::from_utf8(&head[..nul])
            .ok()
            .and_then(|h| h.split_once(' '))
            .and_then(|(_, n)| canonical_len(n))
            .ok_or(DecodeError::MalformedHeader)?;
        if len > cap {
            return Err(Undecodable::OverCap(len));
        }
        let len = len as usize;
        let already = &head[nul + 1..pos];
        if already.len() > len {
            return Err(DecodeError::DataAfterLength.into());
        }
        let mut payload = Vec::with_capacity(len);
        payload.extend_from_slice(already);
        let mut at = payload.len();
        while !ended && at < len {
            ended = fill(dctx, &mut input, &mut payload, &mut at)?;
        }
        if at > len {
            return Err(DecodeError::DataAfterLength.into());
        }
        if at < len {
            return Err(DecodeError::TruncatedPayload { at, len }.into());
        }
        if !ended {
            // Full: the frame must end here.
            let mut extra = [0u8; 1];
            let mut p = 0;
            if !fill(dctx, &mut input, &mut extra[..], &mut p)? || p > 0 {
                return Err(DecodeError::DataAfterLength.into());
            }
        }
        if input.pos() != data.len() {
            return Err(DecodeError::TrailingBytes.into());
        }
        Ok(Decompressed {
            header: head[..nul].to_vec(),
            payload,
        })
    })
}

/// The kind stored bytes declare, from their first decompressed bytes only
/// (not verified: a scan uses it to skip what it does not need).
pub(crate) fn peek_kind(stored: &[u8]) -> Option<Kind> {
    DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = slot.get_or_insert_with(DCtx::create);
        dctx.reset(ResetDirective::SessionOnly).ok()?;
        let mut input = InBuffer::around(stored);
        let mut head = [0u8; 16];
        let mut pos = 0;
        fill(dctx, &mut input, &mut head[..], &mut pos).ok()?;
        let text = std::str::from_utf8(&head[..pos]).ok()?;
        Kind::parse(text.split(' ').next()?)
    })
}

/// Read object `id` under `cap` and require it to be of `kind`.
pub fn read_kind(layout: &Layout, id: &ObjectId, kind: Kind, cap: Cap) -> Result<Vec<u8>> {
    of_kind(layout, id, read(layout, id, cap)?, kind)
}

/// [`read_kind`] where `found` says the object is.
pub(crate) fn read_kind_at(
    layout: &Layout,
    id: &ObjectId,
    found: &Found,
    kind: Kind,
    cap: Cap,
) -> Result<Vec<u8>> {
    of_kind(layout, id, read_at(layout, id, found, cap)?, kind)
}

/// The payload of object `id`, read as `(found, payload)`, when it is of
/// `kind`.
fn of_kind(
    layout: &Layout,
    id: &ObjectId,
    (found, payload): (Kind, Vec<u8>),
    kind: Kind,
) -> Result<Vec<u8>> {
    if found != kind {
        return Err(Error::WrongKind {
            id: *id,
            path: layout.object_path(id),
            expected: kind.name(),
            found: found.name(),
        });
    }
    Ok(payload)
}

/// Decode the bytes of an object file that should hold `id`.
pub(crate) fn decode(
    id: &ObjectId,
    path: &std::path::Path,
    data: &[u8],
    cap: Cap,
) -> Result<(Kind, Vec<u8>)> {
    let corrupt = |e: DecodeError| Error::Corrupt {
        id: *id,
        path: path.to_owned(),
        reason: e.to_string(),
    };
    let Decompressed { header, payload } = match decompress(data, cap.max) {
        Ok(d) => d,
        Err(Undecodable::Corrupt(reason)) => return Err(corrupt(reason)),
        Err(Undecodable::OverCap(size)) => {
            return Err(Error::TooLarge {
                id: *id,
                path: path.to_owned(),
                size,
                max: cap.max,
                what: cap.what,
            })
        }
    };
    let mut hasher = blake3::Hasher::new();
    hasher.update(&header);
    hasher.update(&[0]);
    hasher.update(&payload);
    if ObjectId::from_bytes(*hasher.finalize().as_bytes()) != *id {
        return Err(corrupt(DecodeError::IdMismatch));
    }
    // The header parsed (its length matched) in decompress; the kind is checked last.
    let text = std::str::from_utf8(&header).map_err(|_| corrupt(DecodeError::HeaderNotText))?;
    let kind_name = text.split_once(' ').map_or(text, |(k, _)| k);
    match Kind::parse(kind_name) {
        Some(kind) => Ok((kind, payload)),
        None => Err(Error::UnknownKind {
            id: *id,
            path: path.to_owned(),
            kind: kind_name.chars().take(40).collect(),
        }),
    }
}

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
    layout: &'a Layout,
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
    /// objects of the journals of `deps` without adding dependencies.
    pub fn new(lock: &Shared<'a>, session: &SessionId, deps: &BTreeSet<SessionId>) -> Self {
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
        let stored = compress_canonical(&id, &canonical)?;
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
    /// sealed pack or a loose file, or another session's journal when the
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
        let found = self.layout.odb().locate_open(self.layout, id)?;
        let owner = match &found {
            None => return Ok(false),
            Some(Found::Loose) => None,
            Some(Found::Record { len, .. }) => {
                match self.layout.odb().journal_of(id, &self.session) {
                    Some(s) if s != self.session && !self.deps.contains(&s) => {
                        if *len < SHARE_MIN && sharing == Sharing::Verified {
                            return Ok(false);
                        }
                        Some(s)
                    }
                    _ => None,
                }
            }
        };
        if sharing == Sharing::Verified && !self.layout.is_verified(id) {
            if read(self.layout, id, Cap::ANY).is_err() {
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
        let commit = journal.commit(&self.pending, head, payload, publish)?;
        self.pending.clear();
        self.pending_bytes = 0;
        for id in self.pending_ids.drain() {
            self.layout.set_verified(id);
        }
        Ok(commit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dir::Dir;
    use std::fs;

    fn store() -> (tempfile::TempDir, Layout) {
        let dir = tempfile::tempdir().unwrap();
        let project = Dir::open_path(dir.path()).unwrap();
        let layout = Layout::create(&project).unwrap();
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
    fn put_all(layout: &Layout, objects: &[(Kind, &[u8])]) -> (Vec<ObjectId>, u64) {
        let lock = Shared::take(layout).unwrap();
        let sid = SessionId::new_random();
        let mut jw = journal::Writer::open(
            layout.journals_create().unwrap(),
            layout.tmp_create().unwrap(),
            &sid,
            journal::Rule::LastCommit,
        )
        .unwrap();
        layout.odb().adopt(std::sync::Arc::clone(&jw.view));
        let mut w = Writer::new(&lock, &sid, &BTreeSet::new());
        let ids: Vec<ObjectId> = objects.iter().map(|(k, p)| w.put(*k, p).unwrap()).collect();
        let written = w.objects_written;
        w.commit(&mut jw, ids[0], payload(&sid), || Ok(None))
            .unwrap();
        (ids, written)
    }

    /// Write `canonical` compressed under its own id, as a hostile store would.
    fn plant(layout: &Layout, canonical: &[u8]) -> ObjectId {
        let id = ObjectId::of_canonical(canonical);
        let path = layout.loose_path(&id);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, zstd::bulk::compress(canonical, 3).unwrap()).unwrap();
        id
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

    #[test]
    fn loose_corruption_is_reported_with_id_and_path() {
        let (_d, layout) = store();
        let (_, canonical) = encode(Kind::Blob, &vec![7u8; 10_000]);
        let id = plant(&layout, &canonical);
        let path = layout.loose_path(&id);
        let good = fs::read(&path).unwrap();

        // Flipped byte.
        let mut bad = good.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        fs::write(&path, &bad).unwrap();
        let err = read(&layout, &id, Cap::ANY).unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { id: i, path: p, .. } if *i == id && *p == path),
            "{err}"
        );

        // Truncated.
        fs::write(&path, &good[..good.len() - 3]).unwrap();
        assert!(matches!(
            read(&layout, &id, Cap::ANY),
            Err(Error::Corrupt { .. })
        ));

        // Another object's content under this name.
        let (_, other) = encode(Kind::Blob, b"other");
        fs::write(&path, zstd::bulk::compress(&other, 3).unwrap()).unwrap();
        let err = read(&layout, &id, Cap::ANY).unwrap_err();
        assert!(err.to_string().contains("does not match its id"), "{err}");

        // A link in its place.
        fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &path).unwrap();
        let err = read(&layout, &id, Cap::ANY).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");

        // Deleted.
        fs::remove_file(&path).unwrap();
        assert!(matches!(
            read(&layout, &id, Cap::ANY),
            Err(Error::Missing { .. })
        ));
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
