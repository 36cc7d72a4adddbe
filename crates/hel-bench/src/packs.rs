//! A plain reader of hel-store's pack files (objects-spec §5.1), written
//! from the spec for two yardsticks: fsck's (every record checked, decoded,
//! hashed and, where it is JSON, parsed once) and search's (every stored
//! object decompressed once). It trusts the files: it is a measure of the
//! least work, not a second store.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

const PACK_HEADER: usize = 16;
const RECORD_HEADER: usize = 56;

/// How much of the work per record a pass does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// zstd-decode every object record.
    Decode,
    /// Check each record's check (BLAKE3 of header and stored bytes),
    /// zstd-decode, BLAKE3 the canonical bytes, and parse with serde_json
    /// the payloads that are JSON: list nodes, snapshots, commit records and
    /// blobs that start with `{` or `[` (messages, request configs, cursors).
    Verify,
}

/// What a pass read.
#[derive(Debug, Default, Clone, Copy)]
pub struct PassReport {
    pub ms: f64,
    pub records: u64,
    pub stored_bytes: u64,
    pub canonical_bytes: u64,
    /// Bytes the timed part read from files (records with their headers).
    pub read_bytes: u64,
}

/// Where one structure object's record is: its file, offset and length.
struct At {
    file: usize,
    offset: u64,
    len: usize,
}

/// Every structure object of the store (what gc's mark reads: snapshots,
/// list nodes and workspace trees, objects-spec §8), read once: each
/// record's bytes read at its offset, its check checked, decoded, hashed,
/// and parsed (JSON for snapshots and list nodes; a walk of the entries
/// for trees). Which records are structure is found first by a pass that
/// is not timed; the time is that of the reads alone, in file order.
pub fn structure_pass(hel: &Path) -> PassReport {
    use std::os::unix::fs::FileExt as _;
    let (packs, loose) = files(hel);
    let mut dec = zstd::bulk::Decompressor::new().expect("zstd");
    let mut found = Vec::new();
    let mut loose_found = Vec::new();
    for (i, path) in packs.iter().enumerate() {
        let Ok(bytes) = fs::read(path) else { continue };
        let mut at = PACK_HEADER;
        while at + RECORD_HEADER <= bytes.len() && &bytes[at..at + 4] == b"HELR" {
            let header = &bytes[at..at + RECORD_HEADER];
            let len = u64::from_le_bytes(header[40..48].try_into().expect("8 bytes")) as usize;
            let end = at + RECORD_HEADER + len;
            if end > bytes.len() {
                break;
            }
            if header[4] == 1 && is_structure(&decode(&bytes[at + RECORD_HEADER..end], &mut dec)) {
                found.push(At {
                    file: i,
                    offset: at as u64,
                    len: RECORD_HEADER + len,
                });
            }
            at = end;
        }
    }
    for path in &loose {
        if fs::read(path).is_ok_and(|b| is_structure(&decode(&b, &mut dec))) {
            loose_found.push(path.clone());
        }
    }
    let t = Instant::now();
    let mut r = PassReport::default();
    let mut open: Option<(usize, fs::File)> = None;
    let mut buf = Vec::new();
    for a in &found {
        if open.as_ref().map(|o| o.0) != Some(a.file) {
            let Ok(f) = fs::File::open(&packs[a.file]) else {
                continue;
            };
            open = Some((a.file, f));
        }
        let Some((_, f)) = &open else { continue };
        buf.resize(a.len, 0);
        if f.read_exact_at(&mut buf, a.offset).is_err() {
            continue;
        }
        r.read_bytes += a.len as u64;
        let (header, stored) = buf.split_at(RECORD_HEADER);
        let mut h = blake3::Hasher::new();
        h.update(&header[..48]);
        h.update(stored);
        std::hint::black_box(h.finalize().as_bytes()[..8] == header[48..56]);
        structure(stored, &mut dec, &mut r);
        r.records += 1;
        r.stored_bytes += stored.len() as u64;
    }
    for path in &loose_found {
        if let Ok(stored) = fs::read(path) {
            r.read_bytes += stored.len() as u64;
            structure(&stored, &mut dec, &mut r);
            r.records += 1;
            r.stored_bytes += stored.len() as u64;
        }
    }
    r.ms = t.elapsed().as_secs_f64() * 1000.0;
    r
}

fn is_structure(canonical: &[u8]) -> bool {
    [&b"list "[..], b"snapshot ", b"tree "]
        .iter()
        .any(|k| canonical.starts_with(k))
}

/// Decode, hash and parse one structure object.
fn structure(stored: &[u8], dec: &mut zstd::bulk::Decompressor<'_>, r: &mut PassReport) {
    let canonical = decode(stored, dec);
    r.canonical_bytes += canonical.len() as u64;
    std::hint::black_box(blake3::hash(&canonical));
    let Some(nul) = canonical.iter().position(|b| *b == 0) else {
        return;
    };
    let payload = &canonical[nul + 1..];
    if canonical.starts_with(b"tree ") {
        // kind u8 | mode u16 | size u64 | id [32] | name length u16 | name
        let mut at = 0;
        let mut entries = 0u64;
        while at + 45 <= payload.len() {
            let name = u16::from_le_bytes([payload[at + 43], payload[at + 44]]) as usize;
            at += 45 + name;
            entries += 1;
        }
        std::hint::black_box(entries);
    } else {
        std::hint::black_box(serde_json::from_slice::<serde_json::Value>(payload).ok());
    }
}

/// Every pack and journal file under `.hel/packs/`, and loose objects.
fn files(hel: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut packs = Vec::new();
    for dir in [hel.join("packs"), hel.join("packs/journals")] {
        for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("pack" | "journal")
            ) {
                packs.push(p);
            }
        }
    }
    let mut loose = Vec::new();
    for fan in fs::read_dir(hel.join("objects"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for e in fs::read_dir(fan.path()).into_iter().flatten().flatten() {
            loose.push(e.path());
        }
    }
    (packs, loose)
}

thread_local! {
    static DICT_DEC: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Decode one frame: with hel's dictionary when it names it (snapshots
/// and commit records), else with `dec`.
fn decode(stored: &[u8], dec: &mut zstd::bulk::Decompressor<'_>) -> Vec<u8> {
    if zstd::zstd_safe::get_dict_id_from_frame(stored).map(|d| d.get())
        == Some(hel_store::DICTIONARY_ID)
    {
        return DICT_DEC.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                *slot = zstd::bulk::Decompressor::with_dictionary(hel_store::DICTIONARY).ok();
            }
            match (
                slot.as_mut(),
                zstd::zstd_safe::get_frame_content_size(stored),
            ) {
                (Some(d), Ok(Some(n))) => d.decompress(stored, n as usize).unwrap_or_default(),
                _ => Vec::new(),
            }
        });
    }
    match zstd::zstd_safe::get_frame_content_size(stored) {
        Ok(Some(n)) => dec
            .decompress(stored, n as usize)
            .unwrap_or_else(|_| zstd::stream::decode_all(stored).unwrap_or_default()),
        _ => zstd::stream::decode_all(stored).unwrap_or_default(),
    }
}

/// The canonical bytes' payload when it is JSON worth parsing.
fn json_payload(canonical: &[u8]) -> Option<&[u8]> {
    let nul = canonical.iter().position(|b| *b == 0)?;
    let (head, payload) = (&canonical[..nul], &canonical[nul + 1..]);
    let json = head.starts_with(b"list ")
        || head.starts_with(b"snapshot ")
        || (head.starts_with(b"blob ") && matches!(payload.first(), Some(b'{' | b'[')));
    json.then_some(payload)
}

fn object(stored: &[u8], pass: Pass, dec: &mut zstd::bulk::Decompressor<'_>, r: &mut PassReport) {
    let canonical = decode(stored, dec);
    r.canonical_bytes += canonical.len() as u64;
    if pass == Pass::Verify {
        std::hint::black_box(blake3::hash(&canonical));
        if let Some(p) = json_payload(&canonical) {
            std::hint::black_box(serde_json::from_slice::<serde_json::Value>(p).ok());
        }
    }
    std::hint::black_box(&canonical);
}

/// Read every record of every pack and journal of the store `hel` (a
/// `.hel` directory), and every loose object, doing `pass` on each.
pub fn pass(hel: &Path, pass: Pass) -> PassReport {
    let t = Instant::now();
    let mut r = PassReport::default();
    let mut dec = zstd::bulk::Decompressor::new().expect("zstd");
    let (packs, loose) = files(hel);
    for path in packs {
        let Ok(bytes) = fs::read(&path) else { continue };
        let mut at = PACK_HEADER;
        while at + RECORD_HEADER <= bytes.len() && &bytes[at..at + 4] == b"HELR" {
            let header = &bytes[at..at + RECORD_HEADER];
            let kind = header[4];
            let len = u64::from_le_bytes(header[40..48].try_into().expect("8 bytes")) as usize;
            let end = at + RECORD_HEADER + len;
            if end > bytes.len() {
                break; // an unfinished tail
            }
            let stored = &bytes[at + RECORD_HEADER..end];
            if pass == Pass::Verify {
                let mut h = blake3::Hasher::new();
                h.update(&header[..48]);
                h.update(stored);
                std::hint::black_box(h.finalize().as_bytes()[..8] == header[48..56]);
            }
            match kind {
                1 => object(stored, pass, &mut dec, &mut r),
                _ if pass == Pass::Verify => {
                    // A commit record: canonical JSON, or its frame.
                    let json = match stored.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
                        true => std::borrow::Cow::Owned(decode(stored, &mut dec)),
                        false => std::borrow::Cow::Borrowed(stored),
                    };
                    std::hint::black_box(serde_json::from_slice::<serde_json::Value>(&json).ok());
                }
                _ => {}
            }
            r.records += 1;
            r.stored_bytes += len as u64;
            at = end;
        }
    }
    for path in loose {
        if let Ok(stored) = fs::read(&path) {
            object(&stored, pass, &mut dec, &mut r);
            r.records += 1;
            r.stored_bytes += stored.len() as u64;
        }
    }
    r.ms = t.elapsed().as_secs_f64() * 1000.0;
    r
}
