//! Objects: the one reader and the one writer of `.hel/objects/`.
//!
//! Canonical bytes of an object are `"<kind> <len>\0"` followed by `len`
//! payload bytes; its id is BLAKE3 of those bytes, and the file holds them
//! compressed as one zstd frame. Reads verify the id, bound decompression by
//! the declared length, and name the object and path in every error.

use std::cell::RefCell;
use std::collections::BTreeSet;

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer, ResetDirective};

use crate::error::IoContext;
use crate::layout::Layout;
use crate::{Error, ObjectId, Result};

/// Largest payload a reader accepts (spill files are the largest objects).
pub const MAX_PAYLOAD: u64 = 1 << 30;

/// zstd level used for every object.
const LEVEL: i32 = 3;

/// The kinds of object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Opaque bytes: one message's canonical JSON, or one spill file.
    Blob,
    /// A node of a session's message list (canonical JSON).
    List,
    /// A checkpoint (canonical JSON).
    Snapshot,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Blob => "blob",
            Kind::List => "list",
            Kind::Snapshot => "snapshot",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        match s {
            "blob" => Some(Kind::Blob),
            "list" => Some(Kind::List),
            "snapshot" => Some(Kind::Snapshot),
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

/// The id an object of `kind` with `payload` has, without building its
/// canonical bytes.
pub fn id_of(kind: Kind, payload: &[u8]) -> ObjectId {
    let mut h = blake3::Hasher::new();
    h.update(format!("{} {}\0", kind.name(), payload.len()).as_bytes());
    h.update(payload);
    ObjectId::from_bytes(*h.finalize().as_bytes())
}

/// Read and verify object `id`, returning its kind and payload.
pub fn read(layout: &Layout, id: &ObjectId) -> Result<(Kind, Vec<u8>)> {
    let path = layout.object_path(id);
    let data = match fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(Error::Missing { id: *id, path }),
        Err(e) => return Err(e).at(&path),
    };
    decode(id, &path, &data)
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
) -> std::result::Result<bool, String> {
    loop {
        let before = (*pos, input.pos());
        let mut buf = OutBuffer::around_pos(out, *pos);
        let hint = dctx.decompress_stream(&mut buf, input).map_err(|code| {
            format!(
                "cannot decompress: {}",
                zstd::zstd_safe::get_error_name(code)
            )
        })?;
        *pos = buf.pos();
        let full = *pos == buf.capacity();
        if hint == 0 {
            return Ok(true);
        }
        if full {
            return Ok(false);
        }
        if (*pos, input.pos()) == before {
            return Err("truncated".into());
        }
    }
}

/// A decompressed object: its header text (`<kind> <len>`) and payload.
struct Decompressed {
    header: Vec<u8>,
    payload: Vec<u8>,
}

/// Decompress an object file. Decompression is bounded by the length the
/// object's header declares: the header is decompressed first, then that
/// many payload bytes straight into the payload's buffer, and a frame that
/// holds more is corrupt.
fn decompress(data: &[u8]) -> std::result::Result<Decompressed, String> {
    DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = slot.get_or_insert_with(DCtx::create);
        dctx.reset(ResetDirective::SessionOnly)
            .map_err(|_| "cannot reset the decompressor".to_owned())?;
        let mut input = InBuffer::around(data);
        let mut head = [0u8; 33];
        let mut pos = 0;
        let mut ended = fill(dctx, &mut input, &mut head[..], &mut pos)?;
        let nul = head[..pos]
            .iter()
            .position(|&b| b == 0)
            .ok_or("malformed header")?;
        let len: u64 = std::str::from_utf8(&head[..nul])
            .ok()
            .and_then(|h| h.split_once(' '))
            .and_then(|(_, n)| n.parse().ok())
            .ok_or("malformed header")?;
        if len > MAX_PAYLOAD {
            return Err(format!("declared length {len} exceeds the limit"));
        }
        let len = len as usize;
        let already = &head[nul + 1..pos];
        if already.len() > len {
            return Err("data after the declared length".into());
        }
        let mut payload = Vec::with_capacity(len);
        payload.extend_from_slice(already);
        let mut at = payload.len();
        while !ended && at < len {
            ended = fill(dctx, &mut input, &mut payload, &mut at)?;
        }
        if at > len {
            return Err("data after the declared length".into());
        }
        if at < len {
            return Err(format!("truncated: {at} of {len} payload bytes"));
        }
        if !ended {
            // Full: the frame must end here.
            let mut extra = [0u8; 1];
            let mut p = 0;
            if !fill(dctx, &mut input, &mut extra[..], &mut p)? || p > 0 {
                return Err("data after the declared length".into());
            }
        }
        if input.pos() != data.len() {
            return Err("trailing bytes after the frame".into());
        }
        Ok(Decompressed {
            header: head[..nul].to_vec(),
            payload,
        })
    })
}

/// Read object `id` and require it to be of `kind`.
pub fn read_kind(layout: &Layout, id: &ObjectId, kind: Kind) -> Result<Vec<u8>> {
    let (found, payload) = read(layout, id)?;
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

fn decode(id: &ObjectId, path: &Path, data: &[u8]) -> Result<(Kind, Vec<u8>)> {
    let corrupt = |reason: String| Error::Corrupt {
        id: *id,
        path: path.to_owned(),
        reason,
    };
    let Decompressed { header, payload } = decompress(data).map_err(corrupt)?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(&header);
    hasher.update(&[0]);
    hasher.update(&payload);
    if ObjectId::from_bytes(*hasher.finalize().as_bytes()) != *id {
        return Err(corrupt("content does not match its id".into()));
    }
    // The header parsed (its length matched) in decompress; the kind is checked last.
    let text = std::str::from_utf8(&header).map_err(|_| corrupt("header is not text".into()))?;
    let kind_name = text.split_once(' ').map_or(text, |(k, _)| k);
    match Kind::parse(kind_name) {
        Some(kind) => Ok((kind, payload)),
        None => Err(Error::UnknownKind {
            id: *id,
            path: path.to_owned(),
            kind: kind_name.to_owned(),
        }),
    }
}

/// Writes the objects of one operation (a commit, a fork). Each object is
/// written to `.hel/tmp`, fsynced and hard-linked to its final name (never
/// over an existing object: one that exists counts as written). The
/// directories that received names are fsynced once, by [`Writer::finish`],
/// which must succeed before anything refers to the objects from a ref.
#[must_use = "call finish() to make the objects durable"]
pub struct Writer<'a> {
    layout: &'a Layout,
    compressor: Option<zstd::bulk::Compressor<'static>>,
    dirty_dirs: BTreeSet<PathBuf>,
    /// Objects newly written by this writer.
    pub objects_written: u64,
    /// Compressed bytes newly written by this writer.
    pub bytes_written: u64,
}

impl<'a> Writer<'a> {
    pub fn new(layout: &'a Layout) -> Self {
        Writer {
            layout,
            compressor: None,
            dirty_dirs: BTreeSet::new(),
            objects_written: 0,
            bytes_written: 0,
        }
    }

    /// Store an object (if absent) and return its id.
    pub fn put(&mut self, kind: Kind, payload: &[u8]) -> Result<ObjectId> {
        let (id, canonical) = encode(kind, payload);
        let path = self.layout.object_path(&id);
        if path.exists() {
            return Ok(id);
        }
        if self.compressor.is_none() {
            self.compressor = Some(zstd::bulk::Compressor::new(LEVEL).at(&path)?);
        }
        let compressed = match self.compressor.as_mut() {
            Some(c) => c.compress(&canonical).at(&path)?,
            None => zstd::bulk::compress(&canonical, LEVEL).at(&path)?,
        };
        let tmp = self
            .layout
            .tmp_dir()
            .join(format!("obj-{}", uuid::Uuid::new_v4().simple()));
        let result = self.place(&tmp, &path, &id, &compressed);
        // The temp name never outlives the write, whatever happened.
        let _ = fs::remove_file(&tmp);
        result?;
        Ok(id)
    }

    fn place(&mut self, tmp: &Path, path: &Path, id: &ObjectId, data: &[u8]) -> Result<()> {
        let mut f = File::create(tmp).at(tmp)?;
        f.write_all(data).at(tmp)?;
        f.sync_all().at(tmp)?;
        drop(f);
        let dir = self.layout.object_dir(id);
        match fs::create_dir(&dir) {
            Ok(()) => {
                self.dirty_dirs.insert(self.layout.objects_dir());
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).at(&dir),
        }
        match fs::hard_link(tmp, path) {
            Ok(()) => {
                self.objects_written += 1;
                self.bytes_written += data.len() as u64;
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).at(path),
        }
        self.dirty_dirs.insert(dir);
        Ok(())
    }

    /// Make the new names durable (fsync every directory that got one).
    pub fn finish(self) -> Result<()> {
        for dir in &self.dirty_dirs {
            sync_dir(dir)?;
        }
        Ok(())
    }
}

/// fsync a directory, making the names in it durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Layout) {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path().join(".hel"));
        fs::create_dir_all(layout.objects_dir()).unwrap();
        fs::create_dir_all(layout.tmp_dir()).unwrap();
        (dir, layout)
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
        let mut w = Writer::new(&layout);
        let a = w.put(Kind::Blob, b"hello").unwrap();
        let b = w.put(Kind::Blob, b"hello").unwrap();
        assert_eq!(a, b);
        assert_eq!(w.objects_written, 1);
        w.finish().unwrap();
        assert_eq!(read(&layout, &a).unwrap(), (Kind::Blob, b"hello".to_vec()));
        assert!(matches!(
            read_kind(&layout, &a, Kind::List),
            Err(Error::WrongKind { .. })
        ));
        assert_eq!(fs::read_dir(layout.tmp_dir()).unwrap().count(), 0);
    }

    #[test]
    fn corruption_is_reported_with_id_and_path() {
        let (_d, layout) = store();
        let mut w = Writer::new(&layout);
        let id = w.put(Kind::Blob, &vec![7u8; 10_000]).unwrap();
        w.finish().unwrap();
        let path = layout.object_path(&id);
        let good = fs::read(&path).unwrap();

        // Flipped byte.
        let mut bad = good.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        fs::write(&path, &bad).unwrap();
        let err = read(&layout, &id).unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { id: i, path: p, .. } if *i == id && *p == path),
            "{err}"
        );

        // Truncated.
        fs::write(&path, &good[..good.len() - 3]).unwrap();
        assert!(matches!(read(&layout, &id), Err(Error::Corrupt { .. })));

        // Another object's content under this name.
        let (_, other) = encode(Kind::Blob, b"other");
        fs::write(&path, zstd::bulk::compress(&other, 3).unwrap()).unwrap();
        let err = read(&layout, &id).unwrap_err();
        assert!(err.to_string().contains("does not match its id"), "{err}");

        // Deleted.
        fs::remove_file(&path).unwrap();
        assert!(matches!(read(&layout, &id), Err(Error::Missing { .. })));
    }

    #[test]
    fn unknown_kind_and_bomb_are_typed_errors() {
        let (_d, layout) = store();
        let canonical = b"tree 2\0hi".to_vec();
        let id = ObjectId::of_canonical(&canonical);
        fs::create_dir_all(layout.object_dir(&id)).unwrap();
        let path = layout.object_path(&id);
        fs::write(&path, zstd::bulk::compress(&canonical, 3).unwrap()).unwrap();
        assert!(
            matches!(read(&layout, &id), Err(Error::UnknownKind { kind, .. }) if kind == "tree")
        );

        // Declares 5 bytes, decompresses to 1 MB: stops at the declared size.
        let mut bomb = b"blob 5\0".to_vec();
        bomb.extend(vec![0u8; 1 << 20]);
        let id = ObjectId::of_canonical(&bomb);
        fs::create_dir_all(layout.object_dir(&id)).unwrap();
        fs::write(
            layout.object_path(&id),
            zstd::bulk::compress(&bomb, 3).unwrap(),
        )
        .unwrap();
        let err = read(&layout, &id).unwrap_err();
        assert!(
            err.to_string().contains("data after the declared length"),
            "{err}"
        );
    }
}
