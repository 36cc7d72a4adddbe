//! Pack files: many objects in one file (objects-spec §5).
//!
//! A pack file is a 16-byte header and a sequence of records. A record is a
//! 56-byte header and its stored bytes:
//!
//! ```text
//! 0   4  magic "HELR"
//! 4   1  type: 1 object, 2 commit
//! 5   3  zero
//! 8  32  id (object id; for a commit, the snapshot it publishes)
//! 40  8  stored length, little-endian
//! 48  8  check: the first 8 bytes of BLAKE3(header[0..48] ‖ stored)
//! ```
//!
//! An object record stores one zstd frame of the object's canonical
//! bytes; a commit record stores
//! canonical JSON (see `journal.rs`). The check covers the header, so a
//! torn or overwritten record is detected before its bytes are trusted;
//! the object's id is verified as well when it is decoded.
//!
//! A sealed pack (`pack-<hex>.pack`) holds object records only and has an
//! index (`pack-<hex>.idx`): ids sorted, with a fan-out table, so that
//! finding an object is one binary search. A journal is a session's
//! append-only pack (see `journal.rs`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::IoContext;
use crate::{Error, ObjectId, Result};

/// First bytes of every pack file.
pub(crate) const FILE_MAGIC: &[u8; 8] = b"HELPACK\0";
pub(crate) const FILE_VERSION: u32 = 1;
/// Pack file header: magic, version, kind.
pub(crate) const FILE_HEADER: u64 = 16;

/// What a pack file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileKind {
    Journal = 1,
    Sealed = 2,
}

pub(crate) const RECORD_MAGIC: &[u8; 4] = b"HELR";
pub(crate) const RECORD_HEADER: u64 = 56;

/// The type of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordType {
    Object = 1,
    Commit = 2,
}

/// A record's header, parsed and checked for shape (not yet for its check,
/// which needs the stored bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub rtype: RecordType,
    pub id: ObjectId,
    pub stored_len: u64,
    pub check: [u8; 8],
}

impl Header {
    /// The record's total length (header and stored bytes).
    pub fn record_len(&self) -> u64 {
        RECORD_HEADER + self.stored_len
    }
}

/// The header of a pack file of `kind`.
pub(crate) fn file_header(kind: FileKind) -> [u8; FILE_HEADER as usize] {
    let mut h = [0u8; FILE_HEADER as usize];
    h[..8].copy_from_slice(FILE_MAGIC);
    h[8..12].copy_from_slice(&FILE_VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(kind as u32).to_le_bytes());
    h
}

/// Why the first bytes of a pack or journal file are not the header
/// expected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FileHeaderError {
    /// Too short, or not the magic.
    #[error("not a pack file")]
    NotAPack,
    #[error("pack file of an unknown version")]
    UnknownVersion { version: u32 },
    /// A sealed pack where a journal was expected, or the other way.
    #[error("pack file of another kind")]
    OtherKind { kind: u32 },
}

/// Check a pack file's header: `Ok` when `bytes` start with the header
/// of a file of `kind` in this format version.
pub(crate) fn check_file_header(
    bytes: &[u8],
    kind: FileKind,
) -> std::result::Result<(), FileHeaderError> {
    if bytes.len() < FILE_HEADER as usize || &bytes[..8] != FILE_MAGIC {
        return Err(FileHeaderError::NotAPack);
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != FILE_VERSION {
        return Err(FileHeaderError::UnknownVersion { version });
    }
    let k = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    if k != kind as u32 {
        return Err(FileHeaderError::OtherKind { kind: k });
    }
    Ok(())
}

fn check_of(header48: &[u8], stored: &[u8]) -> [u8; 8] {
    let mut h = blake3::Hasher::new();
    h.update(header48);
    h.update(stored);
    let mut out = [0u8; 8];
    out.copy_from_slice(&h.finalize().as_bytes()[..8]);
    out
}

/// Whether a whole record (header and stored bytes) matches its check.
/// Readers that verify an object's id skip this on the fast path and ask it
/// only when decoding fails, to report a torn or damaged record as such.
pub(crate) fn check_matches(record: &[u8]) -> bool {
    record.len() >= RECORD_HEADER as usize
        && check_of(&record[..48], &record[RECORD_HEADER as usize..])[..] == record[48..56]
}

/// The bytes of a record.
pub(crate) fn encode_record(rtype: RecordType, id: &ObjectId, stored: &[u8]) -> Vec<u8> {
    encode_record_raw(rtype as u8, id, stored)
}

/// Why bytes are not a record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HeaderError {
    /// Fewer than [`RECORD_HEADER`] bytes.
    #[error("truncated record header")]
    Truncated,
    #[error("no record here (bad magic)")]
    BadMagic,
    #[error("unknown record type")]
    UnknownType { rtype: u8 },
    /// The reserved bytes are not zero.
    #[error("malformed record header")]
    Reserved,
}

/// Parse a record header (its first [`RECORD_HEADER`] bytes; more are
/// ignored). The check is returned, not verified.
pub(crate) fn parse_header(b: &[u8]) -> std::result::Result<Header, HeaderError> {
    if b.len() < RECORD_HEADER as usize {
        return Err(HeaderError::Truncated);
    }
    if &b[..4] != RECORD_MAGIC {
        return Err(HeaderError::BadMagic);
    }
    let rtype = match b[4] {
        1 => RecordType::Object,
        2 => RecordType::Commit,
        t => return Err(HeaderError::UnknownType { rtype: t }),
    };
    if b[5..8] != [0, 0, 0] {
        return Err(HeaderError::Reserved);
    }
    let mut id = [0u8; 32];
    id.copy_from_slice(&b[8..40]);
    let mut len = [0u8; 8];
    len.copy_from_slice(&b[40..48]);
    let mut check = [0u8; 8];
    check.copy_from_slice(&b[48..56]);
    Ok(Header {
        rtype,
        id: ObjectId::from_bytes(id),
        stored_len: u64::from_le_bytes(len),
        check,
    })
}

/// A record header as a journal scan frames it: any type byte (a newer
/// hel's record types frame like ours), the check not yet verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    /// The type byte: 1 object, 2 commit, anything else a type this hel
    /// does not know.
    pub rtype: u8,
    pub id: ObjectId,
    pub stored_len: u64,
    /// The header's first 48 bytes and its check.
    head48: [u8; 48],
    check: [u8; 8],
}

impl Frame {
    /// The record's total length (header and stored bytes).
    pub fn record_len(&self) -> u64 {
        RECORD_HEADER.saturating_add(self.stored_len)
    }

    /// Whether `stored` (the record's stored bytes) matches the check.
    pub fn checks(&self, stored: &[u8]) -> bool {
        check_of(&self.head48, stored) == self.check
    }
}

/// Frame a record header of any type: the magic and zero reserved bytes,
/// its type byte, id and stored length (the check is returned, not
/// verified).
pub(crate) fn parse_frame(b: &[u8]) -> std::result::Result<Frame, HeaderError> {
    if b.len() < RECORD_HEADER as usize {
        return Err(HeaderError::Truncated);
    }
    if &b[..4] != RECORD_MAGIC {
        return Err(HeaderError::BadMagic);
    }
    if b[5..8] != [0, 0, 0] {
        return Err(HeaderError::Reserved);
    }
    let mut head48 = [0u8; 48];
    head48.copy_from_slice(&b[..48]);
    let mut id = [0u8; 32];
    id.copy_from_slice(&b[8..40]);
    let mut len = [0u8; 8];
    len.copy_from_slice(&b[40..48]);
    let mut check = [0u8; 8];
    check.copy_from_slice(&b[48..56]);
    Ok(Frame {
        rtype: b[4],
        id: ObjectId::from_bytes(id),
        stored_len: u64::from_le_bytes(len),
        head48,
        check,
    })
}

/// Whether the record framed by `frame` at `offset` of `file` matches its
/// check, reading its stored bytes a piece at a time (so a record of any
/// length costs a fixed amount of memory). A read that fails or ends
/// early is a record that does not check.
pub(crate) fn check_streaming(file: &File, offset: u64, frame: &Frame) -> bool {
    const PIECE: u64 = 1 << 20;
    let mut h = blake3::Hasher::new();
    h.update(&frame.head48);
    let mut buf = vec![0u8; PIECE.min(frame.stored_len) as usize];
    let mut done = 0u64;
    let start = offset.saturating_add(RECORD_HEADER);
    while done < frame.stored_len {
        let n = PIECE.min(frame.stored_len - done) as usize;
        if file
            .read_exact_at(&mut buf[..n], start.saturating_add(done))
            .is_err()
        {
            return false;
        }
        h.update(&buf[..n]);
        done += n as u64;
    }
    h.finalize().as_bytes()[..8] == frame.check
}

/// The bytes of a record whose type byte is `rtype` (a test's record of a
/// type this hel does not know, or a forged one).
pub(crate) fn encode_record_raw(rtype: u8, id: &ObjectId, stored: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_HEADER as usize + stored.len());
    out.extend_from_slice(RECORD_MAGIC);
    out.push(rtype);
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(&(stored.len() as u64).to_le_bytes());
    let check = check_of(&out[..48], stored);
    out.extend_from_slice(&check);
    out.extend_from_slice(stored);
    out
}

/// Where a record is: the pack file and the record's offset in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub path: PathBuf,
    pub offset: u64,
}

impl Place {
    /// How messages name the place: the pack's path and `@offset`.
    pub fn display_path(&self) -> PathBuf {
        let mut s = self.path.clone().into_os_string();
        s.push(format!("@{}", self.offset));
        PathBuf::from(s)
    }
}

/// A damaged record: named by its pack, offset and (when readable) id.
pub(crate) fn damaged(place: &Place, id: Option<&ObjectId>, reason: impl Into<String>) -> Error {
    Error::DamagedRecord {
        pack: place.path.clone(),
        offset: place.offset,
        id: id.copied(),
        reason: reason.into(),
    }
}

/// Read the record at `place` from `file` (at most `max` stored bytes):
/// its header and stored bytes, checked. `expect` is the id an index
/// promised, if any.
pub(crate) fn read_record(
    file: &File,
    place: &Place,
    max: u64,
    expect: Option<&ObjectId>,
) -> Result<(Header, Vec<u8>)> {
    let mut hb = [0u8; RECORD_HEADER as usize];
    file.read_exact_at(&mut hb, place.offset)
        .map_err(|e| damaged(place, expect, format!("cannot read its header: {e}")))?;
    let header = parse_header(&hb).map_err(|r| damaged(place, expect, r.to_string()))?;
    if let Some(want) = expect {
        if header.id != *want {
            return Err(damaged(
                place,
                Some(want),
                format!("the index says {want}, the record holds {}", header.id),
            ));
        }
    }
    if header.stored_len > max {
        return Err(damaged(
            place,
            Some(&header.id),
            format!(
                "it declares {} stored bytes, over the {max} it may have",
                header.stored_len
            ),
        ));
    }
    let mut stored = vec![0u8; header.stored_len as usize];
    file.read_exact_at(&mut stored, place.offset + RECORD_HEADER)
        .map_err(|e| damaged(place, Some(&header.id), format!("cannot read it: {e}")))?;
    if check_of(&hb[..48], &stored) != header.check {
        return Err(damaged(
            place,
            Some(&header.id),
            "its check does not match (torn or damaged)",
        ));
    }
    Ok((header, stored))
}

/// One entry of a sealed pack's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IdxEntry {
    pub id: ObjectId,
    pub offset: u64,
    /// The record's total length.
    pub len: u64,
}

pub(crate) const IDX_MAGIC: &[u8; 8] = b"HELIDX\0\0";
pub(crate) const IDX_VERSION: u32 = 1;
const IDX_ENTRY: usize = 48;

/// The bytes of the index of a pack whose bytes hash to `pack_hash`, for
/// `entries` (sorted here).
///
/// ```text
/// magic "HELIDX\0\0" | version u32 | count u32
/// fan-out: 256 × u32, the number of ids whose first byte is ≤ i
/// count × { id[32] | offset u64 | record length u64 }, by id
/// BLAKE3 of the pack file [32] | BLAKE3 of all the bytes above [32]
/// ```
pub(crate) fn encode_idx(entries: &mut [IdxEntry], pack_hash: &[u8; 32]) -> Vec<u8> {
    entries.sort_by_key(|e| e.id);
    let mut out = Vec::with_capacity(16 + 1024 + entries.len() * IDX_ENTRY + 64);
    out.extend_from_slice(IDX_MAGIC);
    out.extend_from_slice(&IDX_VERSION.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    let mut fan = [0u32; 256];
    for e in entries.iter() {
        fan[e.id.as_bytes()[0] as usize] += 1;
    }
    let mut total = 0u32;
    for f in fan.iter_mut() {
        total += *f;
        *f = total;
    }
    for f in fan {
        out.extend_from_slice(&f.to_le_bytes());
    }
    for e in entries.iter() {
        out.extend_from_slice(e.id.as_bytes());
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(&e.len.to_le_bytes());
    }
    out.extend_from_slice(pack_hash);
    let all = *blake3::hash(&out).as_bytes();
    out.extend_from_slice(&all);
    out
}

/// Why bytes are not a sealed pack's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum IdxError {
    /// Shorter than an empty index, or not the magic.
    #[error("not a pack index")]
    NotAnIndex,
    #[error("pack index of an unknown version")]
    UnknownVersion { version: u32 },
    /// The entry count does not fit this machine's address space.
    #[error("bad count")]
    BadCount { count: u32 },
    #[error("index of {count} entries should hold {expected} bytes, holds {found}")]
    WrongLength {
        count: usize,
        expected: usize,
        found: usize,
    },
    #[error("the index's checksum does not match")]
    Checksum,
    /// Not non-decreasing, or not ending at the entry count.
    #[error("the fan-out table is inconsistent")]
    FanOut,
    /// Entry `entry`'s id is not above the one before it.
    #[error("ids are not sorted")]
    Unsorted { entry: usize },
    /// Entry `entry` is outside the fan-out range of its first byte.
    #[error("the fan-out table does not match the ids")]
    FanOutMismatch { entry: usize },
}

/// A sealed pack's index, read whole and checked.
#[derive(Debug)]
pub(crate) struct Idx {
    pub entries: Vec<IdxEntry>,
    fan: [u32; 256],
    pub pack_hash: [u8; 32],
}

impl Idx {
    /// Parse index bytes: every entry, checked against the checksum,
    /// the fan-out table and each other; `Err` names the first fault.
    pub fn parse(b: &[u8]) -> std::result::Result<Idx, IdxError> {
        if b.len() < 16 + 1024 + 64 || &b[..8] != IDX_MAGIC {
            return Err(IdxError::NotAnIndex);
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let version = u32_at(8);
        if version != IDX_VERSION {
            return Err(IdxError::UnknownVersion { version });
        }
        let raw_count = u32_at(12);
        let count = raw_count as usize;
        let body = count
            .checked_mul(IDX_ENTRY)
            .and_then(|n| n.checked_add(16 + 1024))
            .ok_or(IdxError::BadCount { count: raw_count })?;
        if Some(b.len()) != body.checked_add(64) {
            return Err(IdxError::WrongLength {
                count,
                expected: body.saturating_add(64),
                found: b.len(),
            });
        }
        if blake3::hash(&b[..body + 32]).as_bytes() != &b[body + 32..] {
            return Err(IdxError::Checksum);
        }
        let mut fan = [0u32; 256];
        for (i, f) in fan.iter_mut().enumerate() {
            *f = u32_at(16 + 4 * i);
        }
        if fan.windows(2).any(|w| w[0] > w[1]) || fan[255] as usize != count {
            return Err(IdxError::FanOut);
        }
        let mut entries = Vec::with_capacity(count);
        for k in 0..count {
            let at = 16 + 1024 + k * IDX_ENTRY;
            let mut id = [0u8; 32];
            id.copy_from_slice(&b[at..at + 32]);
            let mut o = [0u8; 8];
            o.copy_from_slice(&b[at + 32..at + 40]);
            let mut l = [0u8; 8];
            l.copy_from_slice(&b[at + 40..at + 48]);
            entries.push(IdxEntry {
                id: ObjectId::from_bytes(id),
                offset: u64::from_le_bytes(o),
                len: u64::from_le_bytes(l),
            });
        }
        if let Some(k) = entries.windows(2).position(|w| w[0].id >= w[1].id) {
            return Err(IdxError::Unsorted { entry: k + 1 });
        }
        for (k, e) in entries.iter().enumerate() {
            let first = e.id.as_bytes()[0] as usize;
            let lo = if first == 0 {
                0
            } else {
                fan[first - 1] as usize
            };
            if k < lo || k >= fan[first] as usize {
                return Err(IdxError::FanOutMismatch { entry: k });
            }
        }
        let mut pack_hash = [0u8; 32];
        pack_hash.copy_from_slice(&b[body..body + 32]);
        Ok(Idx {
            entries,
            fan,
            pack_hash,
        })
    }

    /// The entry of `id`, by the fan-out table and a binary search.
    pub fn find(&self, id: &ObjectId) -> Option<&IdxEntry> {
        let first = id.as_bytes()[0] as usize;
        let lo = if first == 0 {
            0
        } else {
            self.fan[first - 1] as usize
        };
        let hi = self.fan[first] as usize;
        let slice = self.entries.get(lo..hi)?;
        slice
            .binary_search_by(|e| e.id.cmp(id))
            .ok()
            .map(|k| &slice[k])
    }
}

/// Read a whole file of at most `max` bytes.
pub(crate) fn read_all(file: &File, max: u64, path: &Path) -> Result<Vec<u8>> {
    Ok(hel_fs::read_bounded(file, max, path)?)
}

/// BLAKE3 of a whole file, read in pieces.
pub(crate) fn hash_file(file: &File, path: &Path) -> Result<[u8; 32]> {
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let n = file.read_at(&mut buf, at).at(path)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(*h.finalize().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_detect_damage() {
        let id = ObjectId::of_canonical(b"x");
        let rec = encode_record(RecordType::Object, &id, b"stored bytes");
        let h = parse_header(&rec).unwrap();
        assert_eq!((h.rtype, h.id, h.stored_len), (RecordType::Object, id, 12));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p");
        let mut bytes = file_header(FileKind::Journal).to_vec();
        bytes.extend_from_slice(&rec);
        std::fs::write(&path, &bytes).unwrap();
        let f = File::open(&path).unwrap();
        let place = Place {
            path: path.clone(),
            offset: FILE_HEADER,
        };
        let (_, stored) = read_record(&f, &place, 100, Some(&id)).unwrap();
        assert_eq!(stored, b"stored bytes");
        // A flipped stored byte, a flipped length, a lying index.
        for at in [bytes.len() - 1, FILE_HEADER as usize + 41] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            std::fs::write(&path, &bad).unwrap();
            let f = File::open(&path).unwrap();
            let err = read_record(&f, &place, 1 << 20, Some(&id)).unwrap_err();
            assert!(
                err.to_string().contains(&format!("offset {FILE_HEADER}")),
                "{err}"
            );
        }
        let other = ObjectId::of_canonical(b"y");
        std::fs::write(&path, &bytes).unwrap();
        let f = File::open(&path).unwrap();
        assert!(read_record(&f, &place, 100, Some(&other)).is_err());
        assert!(read_record(&f, &place, 5, Some(&id)).is_err());
    }

    #[test]
    fn idx_round_trip_and_lookup() {
        let mut entries: Vec<IdxEntry> = (0..1000u64)
            .map(|k| IdxEntry {
                id: ObjectId::of_canonical(&k.to_le_bytes()),
                offset: 16 + k * 100,
                len: 100,
            })
            .collect();
        let bytes = encode_idx(&mut entries, &[7; 32]);
        let idx = Idx::parse(&bytes).unwrap();
        for k in [0u64, 1, 500, 999] {
            let id = ObjectId::of_canonical(&k.to_le_bytes());
            assert_eq!(idx.find(&id).unwrap().offset, 16 + k * 100);
        }
        assert!(idx.find(&ObjectId::of_canonical(b"absent")).is_none());
        let mut bad = bytes.clone();
        bad[2000] ^= 1;
        assert!(Idx::parse(&bad).is_err());
        assert!(Idx::parse(&bytes[..bytes.len() - 1]).is_err());
    }
}
