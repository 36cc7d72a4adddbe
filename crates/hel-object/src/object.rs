//! Objects' codec, without I/O: kinds and caps, encode, compress, decode
//! and verify. Reading an object from where the object database finds it
//! is `read.rs`; writing one commit's new objects, `write.rs`; sealed
//! packs are written by `repack.rs`.
//!
//! Canonical bytes of an object are `"<kind> <len>\0"` followed by `len`
//! payload bytes; its id is BLAKE3 of those bytes, and the file holds them
//! compressed as one zstd frame. Reads verify the id, refuse a declared
//! length over the cap for what the object is used as before allocating
//! anything, bound decompression by the declared length, and name the
//! object and path in every error.

use std::cell::RefCell;

use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer, ResetDirective};

use std::path::PathBuf;

use crate::ObjectId;

/// Why an object's stored bytes are not the object they should be, or
/// could not be made. hel-store turns each into its `Error` variant of
/// the same name (`Compress` into its `Io`).
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("object {id} at {path} is corrupt: {reason}")]
    Corrupt {
        id: ObjectId,
        path: PathBuf,
        reason: String,
    },
    #[error("object {id} at {path} declares {size} bytes, over the {max} bytes a {what} may have")]
    TooLarge {
        id: ObjectId,
        path: PathBuf,
        size: u64,
        max: u64,
        what: &'static str,
    },
    #[error("object {id} at {path} has unknown kind {kind:?}")]
    UnknownKind {
        id: ObjectId,
        path: PathBuf,
        kind: String,
    },
    /// zstd failed to compress (it allocates: out of memory, say).
    #[error("(compressing object {id}): {source}")]
    Compress {
        id: ObjectId,
        #[source]
        source: std::io::Error,
    },
}

type Result<T, E = ObjectError> = std::result::Result<T, E>;

/// zstd level used for every object.
const LEVEL: i32 = 3;

const MIB: u64 = 1 << 20;

/// The most payload bytes an object may declare for one use of it. A
/// reader passes the cap of what it reads; a larger declared length is
/// refused before anything is allocated. (objects-spec §2.2, "Caps".)
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
    /// A checkpoint's spill map (schema 3): as much as the snapshot that
    /// held it inline before could.
    pub const SPILL_MAP: Cap = Cap {
        max: 4 * MIB,
        what: "spill map",
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
    /// Opaque bytes: one message's canonical JSON, one spill file, a
    /// checkpoint's request config, cursors or spill map, a workspace file.
    Blob,
    /// A node of a session's message list (canonical JSON).
    List,
    /// A checkpoint (canonical JSON).
    Snapshot,
    /// A directory of a workspace snapshot (binary, objects-spec §10).
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
    static DICT_COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
}

/// hel's zstd dictionary (objects-spec §2.2): trained on
/// the structure of snapshot objects and commit records (their keys,
/// their values' shapes, the phrases hel writes), which is most of what a
/// small snapshot's frame would otherwise spend. The spec gives its
/// BLAKE3; `hel-bench`'s `hel-dictionary` made it.
pub const DICTIONARY: &[u8] = include_bytes!("../../../objects-spec/dictionary-1.zdict");

/// The dictionary id frames compressed with [`DICTIONARY`] carry.
pub const DICTIONARY_ID: u32 = 0x6865_6c01;

/// The id of an object of `kind` with `payload` and its stored bytes (its
/// canonical bytes as one zstd frame). Any thread may call this.
pub fn compress(kind: Kind, payload: &[u8]) -> Result<(ObjectId, Vec<u8>)> {
    let (id, canonical) = encode(kind, payload);
    Ok((id, compress_canonical(kind, &id, &canonical)?))
}

/// The stored bytes of the object `id` of `kind` whose canonical bytes are
/// `canonical`: snapshots are compressed with [`DICTIONARY`] (a few
/// hundred bytes each, a third of them the keys the dictionary holds),
/// every other kind without it.
pub fn compress_canonical(kind: Kind, id: &ObjectId, canonical: &[u8]) -> Result<Vec<u8>> {
    let dictionary = kind == Kind::Snapshot;
    compress_frame(canonical, dictionary)
        .map_err(|source| ObjectError::Compress { id: *id, source })
}

/// `bytes` as one zstd frame that declares its content size, with
/// [`DICTIONARY`] or without one.
pub fn compress_frame(bytes: &[u8], dictionary: bool) -> std::io::Result<Vec<u8>> {
    let key = if dictionary {
        &DICT_COMPRESSOR
    } else {
        &COMPRESSOR
    };
    key.with(|cell| {
        let mut slot = cell.borrow_mut();
        let c = match &mut *slot {
            Some(c) => c,
            empty @ None => empty.insert(match dictionary {
                true => zstd::bulk::Compressor::with_dictionary(LEVEL, DICTIONARY)?,
                false => zstd::bulk::Compressor::new(LEVEL)?,
            }),
        };
        c.compress(bytes)
    })
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
pub fn file_max(cap: Cap) -> u64 {
    cap.max + cap.max / 128 + 4096
}

thread_local! {
    // A decompression context is costly to set up; reads reuse one per
    // thread, and one with the dictionary loaded for frames that use it.
    static DCTX: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
    static DICT_DCTX: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// Whether the frame `data` begins with uses [`DICTIONARY`]: `Ok(false)`
/// for one that names no dictionary (or is no frame: decompressing it
/// says why), an error for one that names another dictionary (objects-spec
/// §2.2: a reader knows hel's only).
fn frame_dictionary(data: &[u8]) -> std::result::Result<bool, DecodeError> {
    match zstd::zstd_safe::get_dict_id_from_frame(data).map(|d| d.get()) {
        None => Ok(false),
        Some(DICTIONARY_ID) => Ok(true),
        Some(other) => Err(DecodeError::UnknownDictionary(other)),
    }
}

/// Run `f` with this thread's decompression context for the frame `data`
/// begins with: the one with [`DICTIONARY`] loaded when the frame names
/// it (a frame naming no dictionary is never decoded with it: its first
/// block would start from the dictionary's state).
fn with_dctx<R>(
    data: &[u8],
    f: impl FnOnce(&mut DCtx<'static>) -> std::result::Result<R, Undecodable>,
) -> std::result::Result<R, Undecodable> {
    let dictionary = frame_dictionary(data)?;
    let key = if dictionary { &DICT_DCTX } else { &DCTX };
    key.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = match &mut *slot {
            Some(dctx) => dctx,
            empty @ None => {
                let mut dctx = DCtx::create();
                if dictionary {
                    dctx.load_dictionary(DICTIONARY)
                        .map_err(|_| DecodeError::Reset)?;
                }
                empty.insert(dctx)
            }
        };
        f(dctx)
    })
}

/// Decompress `data`, one whole zstd frame that declares its content size
/// (at most `max` bytes) and uses [`DICTIONARY`] or no dictionary, into
/// exactly that many bytes. For frames that are not objects (a commit
/// record's, objects-spec §5.2); `Err` says why it is not one.
pub fn decompress_frame(data: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    let size = match zstd::zstd_safe::get_frame_content_size(data) {
        Ok(Some(size)) => size,
        Ok(None) => return Err(DecodeError::NoContentSize),
        Err(_) => return Err(DecodeError::Decompress("not a zstd frame")),
    };
    if size > max as u64 {
        return Err(DecodeError::FrameOverMax { size, max });
    }
    if zstd::zstd_safe::find_frame_compressed_size(data).ok() != Some(data.len()) {
        return Err(DecodeError::TrailingBytes);
    }
    let out = with_dctx(data, |dctx| {
        let mut out: Vec<u8> = Vec::with_capacity(size as usize);
        dctx.decompress(&mut out, data).map_err(|code| {
            Undecodable::Corrupt(DecodeError::Decompress(zstd::zstd_safe::get_error_name(
                code,
            )))
        })?;
        Ok(out)
    });
    match out {
        Ok(out) if out.len() as u64 == size => Ok(out),
        Ok(out) => Err(DecodeError::TruncatedPayload {
            at: out.len(),
            len: size as usize,
        }),
        Err(Undecodable::Corrupt(e)) => Err(e),
        Err(Undecodable::OverCap(size)) => Err(DecodeError::FrameOverMax { size, max }),
    }
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

/// A decompressed object: its header text (`<kind> <len>`), payload, and
/// the BLAKE3 of its canonical bytes (header, NUL, payload), taken where
/// they lie in one buffer: BLAKE3 hashes a contiguous input's chunks side
/// by side, which a header fed first would stop (about 1.7× faster for
/// the 6–60 KB of a message or a list node).
#[derive(Debug, PartialEq)]
struct Decompressed {
    header: Vec<u8>,
    payload: Vec<u8>,
    hash: ObjectId,
}

/// Why the bytes of an object file are not the object they should be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
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
    /// The frame names a dictionary other than hel's.
    #[error("compressed with an unknown dictionary (id {0:#x})")]
    UnknownDictionary(u32),
    /// A frame that must declare its content size does not.
    #[error("the frame does not declare its size")]
    NoContentSize,
    #[error("the frame declares {size} bytes, over the {max} it may hold")]
    FrameOverMax { size: u64, max: usize },
}

/// Why an object file could not be decompressed.
#[derive(Debug, PartialEq)]
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
///
/// A frame of at most [`WHOLE_MAX`] bytes that declares its content size
/// (every frame hel writes), within the longest header and `cap` payload
/// bytes, and is all of `data`, is decompressed in one call into a buffer
/// of exactly that size ([`decompress_whole`]): zstd refuses a frame that
/// would write past it or holds other than it declares. A frame that
/// holds more than its header declares is then decompressed whole before
/// it is refused, which [`WHOLE_MAX`] bounds. One call is faster than
/// streaming through a 33-byte header buffer, which sends the first
/// block through zstd's window buffer (decoding 20,000 message frames
/// of 0.2 to 4 KB took 11 % less, best of 7). Any other frame is
/// streamed. Both ways refuse the same frames with the same faults (a
/// test compares them).
fn decompress(data: &[u8], cap: u64) -> std::result::Result<Decompressed, Undecodable> {
    with_dctx(data, |dctx| match decompress_whole(dctx, data, cap) {
        Some(done) => done,
        None => decompress_streaming(dctx, data, cap),
    })
}

/// Where the NUL ending the header is in `first` (the first decompressed
/// bytes, at most [`HEADER_MAX`]), and the payload length the header
/// declares, which must be within `cap`.
fn header_of(first: &[u8], cap: u64) -> std::result::Result<(usize, u64), Undecodable> {
    let nul = first
        .iter()
        .position(|&b| b == 0)
        .ok_or(DecodeError::MalformedHeader)?;
    let len = std::str::from_utf8(&first[..nul])
        .ok()
        .and_then(|h| h.split_once(' '))
        .and_then(|(_, n)| canonical_len(n))
        .ok_or(DecodeError::MalformedHeader)?;
    if len > cap {
        return Err(Undecodable::OverCap(len));
    }
    Ok((nul, len))
}

/// [`decompress`] by streaming: the header first, then the payload it
/// declares straight into the payload's buffer.
fn decompress_streaming(
    dctx: &mut DCtx<'static>,
    data: &[u8],
    cap: u64,
) -> std::result::Result<Decompressed, Undecodable> {
    dctx.reset(ResetDirective::SessionOnly)
        .map_err(|_| DecodeError::Reset)?;
    let mut input = InBuffer::around(data);
    let mut head = [0u8; HEADER_MAX];
    let mut pos = 0;
    let mut ended = fill(dctx, &mut input, &mut head[..], &mut pos)?;
    let (nul, len) = header_of(&head[..pos], cap)?;
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
    // Over a mebibyte: the header's misalignment costs one chunk of many.
    let mut hasher = blake3::Hasher::new();
    hasher.update(&head[..=nul]);
    hasher.update(&payload);
    Ok(Decompressed {
        header: head[..nul].to_vec(),
        payload,
        hash: ObjectId::from_bytes(*hasher.finalize().as_bytes()),
    })
}

/// The longest header: a kind, a space, 20 digits and the NUL (what the
/// streaming path reads before it looks for the NUL).
const HEADER_MAX: usize = 33;

/// The largest content a frame may declare to be decompressed in one
/// call: what a frame that lies about its header's length can make a
/// reader decompress before it is refused.
const WHOLE_MAX: u64 = 1 << 20;

/// [`decompress`] in one call, for a frame that declares its content size
/// within the longest header and `cap`, and spans all of `data`; `None`
/// for any other frame (the caller streams it).
fn decompress_whole(
    dctx: &mut DCtx<'static>,
    data: &[u8],
    cap: u64,
) -> Option<std::result::Result<Decompressed, Undecodable>> {
    let size = zstd::zstd_safe::get_frame_content_size(data).ok()??;
    if size > WHOLE_MAX
        || size > cap.saturating_add(HEADER_MAX as u64)
        || zstd::zstd_safe::find_frame_compressed_size(data).ok()? != data.len()
    {
        return None;
    }
    Some(decompress_into(dctx, data, size, cap))
}

/// [`decompress_whole`]'s one call into a buffer of exactly `size` bytes
/// (at most [`WHOLE_MAX`]), then the checks streaming makes on the result.
fn decompress_into(
    dctx: &mut DCtx<'static>,
    data: &[u8],
    size: u64,
    cap: u64,
) -> std::result::Result<Decompressed, Undecodable> {
    let mut out: Vec<u8> = Vec::with_capacity(size.min(WHOLE_MAX) as usize);
    dctx.decompress(&mut out, data)
        .map_err(|code| DecodeError::Decompress(zstd::zstd_safe::get_error_name(code)))?;
    if out.len() as u64 != size {
        return Err(DecodeError::TruncatedPayload {
            at: out.len(),
            len: size as usize,
        }
        .into());
    }
    let (nul, len) = header_of(&out[..out.len().min(HEADER_MAX)], cap)?;
    let at = out.len() - nul - 1;
    match (at as u64).cmp(&len) {
        std::cmp::Ordering::Greater => return Err(DecodeError::DataAfterLength.into()),
        std::cmp::Ordering::Less => {
            return Err(DecodeError::TruncatedPayload {
                at,
                len: len as usize,
            }
            .into())
        }
        std::cmp::Ordering::Equal => {}
    }
    let hash = ObjectId::of_canonical(&out);
    let header = out[..nul].to_vec();
    out.drain(..=nul);
    Ok(Decompressed {
        header,
        payload: out,
        hash,
    })
}

/// The kind stored bytes declare, from their first decompressed bytes only
/// (not verified: a scan uses it to skip what it does not need).
pub fn peek_kind(stored: &[u8]) -> Option<Kind> {
    with_dctx(stored, |dctx| {
        dctx.reset(ResetDirective::SessionOnly)
            .map_err(|_| DecodeError::Reset)?;
        let mut input = InBuffer::around(stored);
        let mut head = [0u8; 16];
        let mut pos = 0;
        fill(dctx, &mut input, &mut head[..], &mut pos)?;
        Ok(std::str::from_utf8(&head[..pos])
            .ok()
            .and_then(|text| Kind::parse(text.split(' ').next()?)))
    })
    .ok()
    .flatten()
}

/// Decode the bytes of an object file that should hold `id`.
pub fn decode(
    id: &ObjectId,
    path: &std::path::Path,
    data: &[u8],
    cap: Cap,
) -> Result<(Kind, Vec<u8>)> {
    let corrupt = |e: DecodeError| ObjectError::Corrupt {
        id: *id,
        path: path.to_owned(),
        reason: e.to_string(),
    };
    let Decompressed {
        header,
        payload,
        hash,
    } = match decompress(data, cap.max) {
        Ok(d) => d,
        Err(Undecodable::Corrupt(reason)) => return Err(corrupt(reason)),
        Err(Undecodable::OverCap(size)) => {
            return Err(ObjectError::TooLarge {
                id: *id,
                path: path.to_owned(),
                size,
                max: cap.max,
                what: cap.what,
            })
        }
    };
    if hash != *id {
        return Err(corrupt(DecodeError::IdMismatch));
    }
    // The header parsed (its length matched) in decompress; the kind is checked last.
    let text = std::str::from_utf8(&header).map_err(|_| corrupt(DecodeError::HeaderNotText))?;
    let kind_name = text.split_once(' ').map_or(text, |(k, _)| k);
    match Kind::parse(kind_name) {
        Some(kind) => Ok((kind, payload)),
        None => Err(ObjectError::UnknownKind {
            id: *id,
            path: path.to_owned(),
            kind: kind_name.chars().take(40).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dictionary is the file objects-spec §2.2 names, with hel's id.
    #[test]
    fn the_dictionary_is_the_one_the_spec_names() {
        assert_eq!(
            blake3::hash(DICTIONARY).to_hex().as_str(),
            "2f5cb93c76bb5e75f42ad4356fdca5d37f17d3bedb659c420cad54270cccc4c9"
        );
        assert_eq!(&DICTIONARY[4..8], &DICTIONARY_ID.to_le_bytes());
    }

    fn snapshot_payload() -> Vec<u8> {
        br#"{"created_at":"2026-12-02T03:58:40.150Z","created_at_ms":1796183920150,"cwd":"/tmp/p","record":"answer","schema_version":2,"summary":{"checkpoints":1,"input_tokens":820,"instruction":"fix the test","messages":3,"output_tokens":13}}"#.to_vec()
    }

    #[test]
    fn snapshots_use_the_dictionary_and_every_frame_decodes_with_its_own() {
        let p = snapshot_payload();
        let (id, stored) = compress(Kind::Snapshot, &p).unwrap();
        assert_eq!(frame_dictionary(&stored), Ok(true));
        let plain = zstd::bulk::compress(&encode(Kind::Snapshot, &p).1, 3).unwrap();
        assert!(
            stored.len() < plain.len(),
            "{} {}",
            stored.len(),
            plain.len()
        );
        // Other kinds do not; both kinds of frame decode, in any order on
        // one thread (each with its own context).
        let (bid, blob) = compress(Kind::Blob, b"hello").unwrap();
        assert_eq!(frame_dictionary(&blob), Ok(false));
        let path = std::path::Path::new("x");
        for _ in 0..2 {
            assert_eq!(
                decode(&id, path, &stored, Cap::ANY).unwrap(),
                (Kind::Snapshot, p.clone())
            );
            assert_eq!(
                decode(&id, path, &plain, Cap::ANY).unwrap(),
                (Kind::Snapshot, p.clone())
            );
            assert_eq!(decode(&bid, path, &blob, Cap::ANY).unwrap().1, b"hello");
        }
        assert_eq!(peek_kind(&stored), Some(Kind::Snapshot));
        // Streaming (a frame without its content size) with the dictionary.
        let mut enc = zstd::stream::Encoder::with_dictionary(Vec::new(), 3, DICTIONARY).unwrap();
        std::io::Write::write_all(&mut enc, &encode(Kind::Snapshot, &p).1).unwrap();
        let streamed = enc.finish().unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&streamed).unwrap(),
            None
        );
        assert_eq!(decode(&id, path, &streamed, Cap::ANY).unwrap().1, p);
        // Past the one-call bound too (a snapshot may hold 4 MiB).
        let big: Vec<u8> = (0..(2u32 << 20)).map(|i| b'a' + (i % 23) as u8).collect();
        let (big_id, big_stored) = compress(Kind::Snapshot, &big).unwrap();
        assert_eq!(frame_dictionary(&big_stored), Ok(true));
        assert_eq!(decode(&big_id, path, &big_stored, Cap::ANY).unwrap().1, big);
    }

    #[test]
    fn a_frame_naming_another_dictionary_is_corrupt() {
        let p = snapshot_payload();
        let (id, canonical) = encode(Kind::Snapshot, &p);
        let mut other = DICTIONARY.to_vec();
        other[4..8].copy_from_slice(&0x1234_5678u32.to_le_bytes());
        let stored = zstd::bulk::Compressor::with_dictionary(3, &other)
            .unwrap()
            .compress(&canonical)
            .unwrap();
        let e = decode(&id, std::path::Path::new("obj"), &stored, Cap::ANY).unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, ObjectError::Corrupt { .. })
                && text.contains("unknown dictionary (id 0x12345678)")
                && text.contains("obj"),
            "{text}"
        );
        assert_eq!(peek_kind(&stored), None);
        assert_eq!(
            decompress_frame(&stored, 1 << 16),
            Err(DecodeError::UnknownDictionary(0x1234_5678))
        );
    }

    #[test]
    fn bare_frames_must_declare_a_size_within_the_bound_and_be_whole() {
        let json = br#"{"a":1}"#;
        let framed = compress_frame(json, true).unwrap();
        assert_eq!(decompress_frame(&framed, 64).unwrap(), json);
        assert_eq!(
            decompress_frame(&framed, 3),
            Err(DecodeError::FrameOverMax { size: 7, max: 3 })
        );
        let mut trailing = framed.clone();
        trailing.push(0);
        assert_eq!(
            decompress_frame(&trailing, 64),
            Err(DecodeError::TrailingBytes)
        );
        let streamed = zstd::stream::encode_all(&json[..], 3).unwrap();
        assert_eq!(
            decompress_frame(&streamed, 64),
            Err(DecodeError::NoContentSize)
        );
        assert!(decompress_frame(b"{\"a\":1}", 64).is_err());
    }

    /// The fault a decompression gave, zstd's own error names aside (the
    /// one-call and streaming APIs word the same refusal differently).
    fn class(
        r: std::result::Result<Decompressed, Undecodable>,
    ) -> std::result::Result<Decompressed, Undecodable> {
        match r {
            Err(Undecodable::Corrupt(DecodeError::Decompress(_))) => {
                Err(Undecodable::Corrupt(DecodeError::Decompress("zstd")))
            }
            other => other,
        }
    }

    /// Both decoders check the id against the whole canonical bytes, the
    /// header included: small objects (one call) and ones over
    /// [`WHOLE_MAX`] (streamed), with the kind, the payload or the id
    /// different from what was stored.
    #[test]
    fn decode_checks_the_id_against_header_and_payload() {
        let path = std::path::Path::new("x");
        for len in [1_000usize, 3_000, 70_000, WHOLE_MAX as usize + 5_000] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let (id, stored) = compress(Kind::Blob, &payload).unwrap();
            assert_eq!(
                decode(&id, path, &stored, Cap::ANY).unwrap(),
                (Kind::Blob, payload.clone()),
                "{len}"
            );
            // The same payload stored as another kind, or one byte of it
            // changed, is not this id.
            let (_, as_list) = compress(Kind::List, &payload).unwrap();
            let mut changed = payload.clone();
            changed[len / 2] ^= 1;
            let (_, other) = compress(Kind::Blob, &changed).unwrap();
            for (what, bytes, want) in [
                ("kind", &as_list, &id),
                ("payload", &other, &id),
                ("id", &stored, &id_of(Kind::Blob, &changed)),
            ] {
                match decode(want, path, bytes, Cap::ANY) {
                    Err(ObjectError::Corrupt { reason, .. }) => {
                        assert_eq!(reason, DecodeError::IdMismatch.to_string(), "{len} {what}")
                    }
                    other => panic!("{len} {what}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn one_call_and_streaming_agree_on_every_frame() {
        let mut contents: Vec<Vec<u8>> = vec![
            b"blob 5\0hello".to_vec(),
            b"blob 0\0".to_vec(),
            b"blob 5\0hel".to_vec(),
            b"blob 5\0hello, and more".to_vec(),
            b"blob 05\0hello".to_vec(),
            b"blob5\0hello".to_vec(),
            b"a header of more than thirty-three bytes and no NUL".to_vec(),
            b"\0".to_vec(),
            Vec::new(),
        ];
        let mut bomb = b"blob 5\0".to_vec();
        bomb.extend(vec![0u8; 64 << 10]);
        contents.push(bomb);
        let mut big = b"list 300000\0".to_vec();
        big.extend(vec![b' '; 300_000]);
        contents.push(big);
        let mut over = b"list 2000000\0".to_vec();
        over.extend(vec![b' '; 2_000_000]);
        contents.push(over);
        // (frame, whether it is for the one call: None where its damage decides)
        let mut frames: Vec<(Vec<u8>, Option<bool>)> = Vec::new();
        for c in &contents {
            // With its content size (as hel writes), without it (a
            // stream), with a checksum, and with bytes or a frame after.
            let sized = zstd::bulk::compress(c, 3).unwrap();
            frames.push((sized.clone(), Some(c.len() as u64 <= WHOLE_MAX)));
            frames.push((
                zstd::stream::encode_all(&c[..], 3).unwrap(),
                (!c.is_empty()).then_some(false),
            ));
            let mut ck = zstd::bulk::Compressor::new(3).unwrap();
            ck.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))
                .unwrap();
            frames.push((ck.compress(c).unwrap(), Some(c.len() as u64 <= WHOLE_MAX)));
            let mut trailing = sized.clone();
            trailing.extend_from_slice(b"xx");
            frames.push((trailing, Some(false)));
            let mut two = sized.clone();
            two.extend_from_slice(&zstd::bulk::compress(b"blob 1\0x", 3).unwrap());
            frames.push((two, Some(false)));
            let mut cut = sized.clone();
            cut.truncate(sized.len() / 2);
            frames.push((cut, None));
            let mut flipped = sized;
            let last = flipped.len() - 1;
            flipped[last] ^= 0x5a;
            frames.push((flipped, None));
        }
        frames.push((b"not a zstd frame".to_vec(), Some(false)));
        let mut dctx = DCtx::create();
        let mut whole = 0;
        for (k, (data, fits)) in frames.iter().enumerate() {
            for cap in [0, 4, 5, 10, 1 << 10, 1 << 20, 4 << 20, u64::MAX] {
                let streamed = class(decompress_streaming(&mut dctx, data, cap));
                let size = zstd::zstd_safe::get_frame_content_size(data)
                    .ok()
                    .flatten()
                    .unwrap_or(u64::MAX);
                let expected = fits.map(|f| f && size <= cap.saturating_add(HEADER_MAX as u64));
                match decompress_whole(&mut dctx, data, cap) {
                    Some(r) => {
                        assert_ne!(
                            expected,
                            Some(false),
                            "frame {k}, cap {cap}: not for the one call"
                        );
                        whole += 1;
                        assert_eq!(class(r), streamed, "frame {k}, cap {cap}");
                    }
                    None => assert_ne!(
                        expected,
                        Some(true),
                        "frame {k}, cap {cap}: for the one call"
                    ),
                }
            }
        }
        // The one call was taken, and for intact and refused frames both.
        assert!(whole > 100, "{whole}");
        // A frame that holds more than its header says is refused the
        // same way in one call.
        let mut bomb = b"blob 5\0".to_vec();
        bomb.extend(vec![0u8; 64 << 10]);
        let frame = zstd::bulk::compress(&bomb, 3).unwrap();
        assert_eq!(
            decompress_whole(&mut dctx, &frame, u64::MAX),
            Some(Err(Undecodable::Corrupt(DecodeError::DataAfterLength)))
        );
    }
}
