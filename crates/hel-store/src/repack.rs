//! Writing sealed packs: what gc and delete copy live objects into
//! (objects-spec §5.6, §5.8), and what a pull's received objects land in
//! (`transfer.rs`).
//!
//! A pack and its index are written under `tmp/`, fsynced, and renamed into
//! `packs/` (index first, then pack: a reader lists packs, so it never sees
//! a pack without its index), then `packs/` is fsynced. Only then are the
//! objects' old places removed, so a crash at any moment leaves every
//! object readable from its old place, its new one, or both; leftovers in
//! `tmp/` are removed by the next gc.

use std::io::Write;

use crate::error::IoContext;
use crate::lock::Exclusive;
use crate::odb;
use crate::odb::Odb;
use crate::pack::{self, FileKind, IdxEntry, RecordType};
use crate::{Error, ObjectId, Result};

/// Copy the objects `ids` from wherever they are now (each read back and
/// verified, [`stored_bytes`]) into one new sealed pack; returns its stem
/// and its size. One object is in memory at a time, however large the
/// store. Refuses before writing anything when the disk has no room for it.
pub(crate) fn write_sealed(
    layout: &Odb,
    _lock: &Exclusive<'_, Odb>,
    ids: &[ObjectId],
) -> Result<(String, u64)> {
    let mut need = 0u64;
    for id in ids {
        need += stored_len(layout, id)?;
    }
    write_pack(layout, need, ids.len(), |i| {
        Ok((ids[i], stored_bytes(layout, &ids[i])?))
    })
}

/// Write `records` (object ids and their stored bytes) received from
/// elsewhere (a pull) as one sealed pack: under the shared lock, so that
/// gc cannot run between the pack landing and the head that names its
/// objects; it only adds a pack, and a gc that comes later treats it as
/// any other.
pub(crate) fn write_sealed_shared(
    layout: &Odb,
    _lock: &crate::lock::Shared<'_, Odb>,
    records: &[(ObjectId, Vec<u8>)],
) -> Result<(String, u64)> {
    let need = records.iter().map(|(_, s)| s.len() as u64).sum();
    write_pack(layout, need, records.len(), |i| {
        Ok((records[i].0, records[i].1.clone()))
    })
}

/// Write `count` records, the `i`th from `next(i)`, as a sealed pack:
/// the pack is streamed to `tmp/` (hashed on the way), then its index is
/// written, both are synced and renamed into `packs/`, index first.
/// `stored` is about what the records hold, for the free-space check.
fn write_pack(
    layout: &Odb,
    stored: u64,
    count: usize,
    mut next: impl FnMut(usize) -> Result<(ObjectId, Vec<u8>)>,
) -> Result<(String, u64)> {
    let packs = layout.packs_create()?;
    let tmp = layout.tmp_create()?;
    let need = stored + count as u64 * (pack::RECORD_HEADER + 48) + 4096;
    if let Some(free) = tmp.free_space() {
        if free < need {
            return Err(Error::Io {
                path: packs.path().to_owned(),
                source: std::io::Error::other(format!(
                    "gc needs {need} bytes free to rewrite what is live, the disk has {free}: free some space and run `hel gc` again"
                )),
            });
        }
    }
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    // Each temporary file is gone on any error before its rename (dropped).
    let tpack = tmp.new_file(&format!("{nonce}-pack"), 0o600)?;
    let ppath = tpack.path();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, tpack.file());
    let mut hasher = blake3::Hasher::new();
    let mut entries = Vec::with_capacity(count);
    let header = pack::file_header(FileKind::Sealed);
    out.write_all(&header).at(&ppath)?;
    hasher.update(&header);
    let mut offset = header.len() as u64;
    for i in 0..count {
        let (id, stored) = next(i)?;
        let rec = pack::encode_record(RecordType::Object, &id, &stored);
        entries.push(IdxEntry {
            id,
            offset,
            len: rec.len() as u64,
        });
        out.write_all(&rec).at(&ppath)?;
        hasher.update(&rec);
        offset += rec.len() as u64;
    }
    out.flush().at(&ppath)?;
    drop(out);
    tpack.sync()?;
    let pack_hash = *hasher.finalize().as_bytes();
    let idx = pack::encode_idx(&mut entries, &pack_hash);
    let stem = format!("pack-{}", &blake3::hash(&idx).to_hex()[..32]);
    let (pack_name, idx_name) = odb::sealed_names(&stem);
    let mut tidx = tmp.new_file(&format!("{nonce}-idx"), 0o600)?;
    tidx.write_all(&idx)?;
    tidx.sync()?;
    tidx.persist(packs, &idx_name)?;
    tpack.persist(packs, &pack_name)?;
    packs.sync()?;
    Ok((stem, offset))
}

/// About how many bytes object `id` takes where it is stored now (for
/// the free-space check before a copy).
fn stored_len(layout: &Odb, id: &ObjectId) -> Result<u64> {
    match layout.index().locate(layout, id)? {
        Some(odb::Found { len, .. }) => Ok(len),
        None => Err(Error::Missing {
            id: *id,
            path: layout.packs_path(),
        }),
    }
}

/// The stored bytes of object `id` from wherever it is now, verified: a
/// repack must never give damaged bytes a fresh, valid record.
pub(crate) fn stored_bytes(layout: &Odb, id: &ObjectId) -> Result<Vec<u8>> {
    stored_bytes_from(layout, id).map(|(stored, _)| stored)
}

/// [`stored_bytes`] and the file they were read from (a pack or a
/// journal), for errors about them.
pub(crate) fn stored_bytes_from(
    layout: &Odb,
    id: &ObjectId,
) -> Result<(Vec<u8>, std::path::PathBuf)> {
    let cap = crate::object::Cap::ANY;
    let max = cap.max + cap.max / 128 + 4096;
    match layout.index().locate(layout, id)? {
        Some(odb::Found { file, place, len }) => {
            let mut record = odb::read_found(&file, &place, len, id, max)?;
            if !crate::pack::check_matches(&record) {
                return Err(crate::pack::damaged(
                    &place,
                    Some(id),
                    "its check does not match (torn or damaged)",
                ));
            }
            Ok((
                record.split_off(crate::pack::RECORD_HEADER as usize),
                place.path.clone(),
            ))
        }
        None => Err(Error::Missing {
            id: *id,
            path: layout.packs_path(),
        }),
    }
}

/// For tests that build hostile stores: add the object whose canonical
/// bytes are `canonical` (zstd-compressed, not checked) to the store at
/// `store_root` ([`plant_stored`]); returns its id.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn plant(store_root: &std::path::Path, canonical: &[u8]) -> ObjectId {
    let id = ObjectId::of_canonical(canonical);
    let stored = zstd::bulk::compress(canonical, 3).unwrap_or_default();
    plant_stored(store_root, &id, &stored);
    id
}

/// The sealed pack the planting helpers keep their records in, as its
/// stem `pack-planted-<hex>`, if the store at `store_root` has one.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn planted_stem(store_root: &std::path::Path) -> Option<String> {
    std::fs::read_dir(store_root.join(crate::layout::PACKS))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .find_map(|n| {
            n.strip_suffix(".pack")
                .filter(|s| s.starts_with("pack-planted-"))
                .map(str::to_owned)
        })
}

/// The records of the planted pack of the store at `store_root`: each
/// object's id and stored bytes, in the pack's order.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn planted(store_root: &std::path::Path) -> Vec<(ObjectId, Vec<u8>)> {
    let Some(stem) = planted_stem(store_root) else {
        return Vec::new();
    };
    let packs = store_root.join(crate::layout::PACKS);
    let (pack_name, idx_name) = odb::sealed_names(&stem);
    let bytes = std::fs::read(packs.join(&pack_name)).unwrap_or_default();
    let idx = std::fs::read(packs.join(&idx_name)).unwrap_or_default();
    let mut entries = pack::Idx::parse(&idx)
        .map(|i| i.entries)
        .unwrap_or_default();
    entries.sort_by_key(|e| e.offset);
    entries
        .into_iter()
        .filter_map(|e| {
            let start = (e.offset + pack::RECORD_HEADER) as usize;
            let rec = bytes.get(start..(e.offset + e.len) as usize)?;
            Some((e.id, rec.to_vec()))
        })
        .collect()
}

/// Add a record of `stored` under `id` (whatever the bytes are) to the
/// sealed pack `pack-planted-<hex>` of the store at `store_root`,
/// rewritten under a new name with every record it held (one pack,
/// however many objects are planted). Plain file writes: no lock, no
/// sync.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn plant_stored(store_root: &std::path::Path, id: &ObjectId, stored: &[u8]) {
    plant_records(store_root, vec![(*id, stored.to_vec())]);
}

/// [`plant_stored`] of every record of `new` at once (one rewrite of the
/// pack, however many there are).
#[cfg(any(test, feature = "testing"))]
pub(crate) fn plant_records(store_root: &std::path::Path, new: Vec<(ObjectId, Vec<u8>)>) {
    let packs = store_root.join(crate::layout::PACKS);
    let _ = std::fs::create_dir_all(&packs);
    let old = planted_stem(store_root);
    let mut records = planted(store_root);
    let ids: std::collections::HashSet<ObjectId> = new.iter().map(|(i, _)| *i).collect();
    records.retain(|(i, _)| !ids.contains(i));
    records.extend(new);
    let mut out = pack::file_header(FileKind::Sealed).to_vec();
    let mut entries = Vec::new();
    for (id, stored) in &records {
        let rec = pack::encode_record(RecordType::Object, id, stored);
        entries.push(IdxEntry {
            id: *id,
            offset: out.len() as u64,
            len: rec.len() as u64,
        });
        out.extend_from_slice(&rec);
    }
    let idx = pack::encode_idx(&mut entries, blake3::hash(&out).as_bytes());
    let stem = format!("pack-planted-{}", &blake3::hash(&idx).to_hex()[..32]);
    let (pack_name, idx_name) = odb::sealed_names(&stem);
    let _ = std::fs::write(packs.join(&idx_name), &idx);
    let _ = std::fs::write(packs.join(&pack_name), &out);
    if let Some(stem) = old.filter(|o| *o != stem) {
        let (pack_name, idx_name) = odb::sealed_names(&stem);
        let _ = std::fs::remove_file(packs.join(pack_name));
        let _ = std::fs::remove_file(packs.join(idx_name));
    }
}
