//! Objects' codec, without I/O: kinds and caps, encode, compress, decode
//! and verify. Reading an object from where the object database finds it
//! is `read.rs`; writing one commit's new objects, `write.rs`. (Loose
//! files are only read: format 3 writes none but the stub of objects-spec
//! §12.6, which `layout.rs` places; sealed packs are written by
//! `repack.rs`.)
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

pub fn compress_canonical(id: &ObjectId, canonical: &[u8]) -> Result<Vec<u8>> {
    let failed = |source: std::io::Error| ObjectError::Compress { id: *id, source };
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
pub fn file_max(cap: Cap) -> u64 {
    cap.max + cap.max / 128 + 4096
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
#[derive(Debug, PartialEq)]
struct Decompressed {
    header: Vec<u8>,
    payload: Vec<u8>,
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
    DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = slot.get_or_insert_with(DCtx::create);
        match decompress_whole(dctx, data, cap) {
            Some(done) => done,
            None => decompress_streaming(dctx, data, cap),
        }
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
    Ok(Decompressed {
        header: head[..nul].to_vec(),
        payload,
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
    let header = out[..nul].to_vec();
    out.drain(..=nul);
    Ok(Decompressed {
        header,
        payload: out,
    })
}

/// The kind stored bytes declare, from their first decompressed bytes only
/// (not verified: a scan uses it to skip what it does not need).
pub fn peek_kind(stored: &[u8]) -> Option<Kind> {
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
    let Decompressed { header, payload } = match decompress(data, cap.max) {
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
