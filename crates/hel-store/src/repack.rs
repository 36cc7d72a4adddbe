//! Writing sealed packs: what gc and delete copy live objects into
//! (objects-spec §12.4, §12.5), and what a pull's received objects land in
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
        Some(odb::Found::Record { len, .. }) => Ok(len),
        Some(odb::Found::Loose) => Ok(open_loose(layout, id)?
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len())),
        None => Err(Error::Missing {
            id: *id,
            path: layout.loose_path(id),
        }),
    }
}

/// The stored bytes of object `id` from wherever it is now, verified: a
/// repack must never give damaged bytes a fresh, valid record.
pub(crate) fn stored_bytes(layout: &Odb, id: &ObjectId) -> Result<Vec<u8>> {
    stored_bytes_from(layout, id).map(|(stored, _)| stored)
}

/// [`stored_bytes`] and the file they were read from (a pack, a journal
/// or a loose file), for errors about them.
pub(crate) fn stored_bytes_from(
    layout: &Odb,
    id: &ObjectId,
) -> Result<(Vec<u8>, std::path::PathBuf)> {
    let cap = crate::object::Cap::ANY;
    let max = cap.max + cap.max / 128 + 4096;
    match layout.index().locate(layout, id)? {
        Some(odb::Found::Record { file, place, len }) => {
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
        Some(odb::Found::Loose) => {
            let path = layout.loose_path(id);
            let file = open_loose(layout, id)?.ok_or_else(|| Error::Missing {
                id: *id,
                path: path.clone(),
            })?;
            let stored = crate::dir::read_bounded(file, max, &path)?;
            crate::object::decode(id, &path, &stored, cap)?;
            Ok((stored, path))
        }
        None => Err(Error::Missing {
            id: *id,
            path: layout.loose_path(id),
        }),
    }
}

/// The loose file of object `id`, opened without following links (None
/// when it cannot be opened).
fn open_loose(layout: &Odb, id: &ObjectId) -> Result<Option<std::fs::File>> {
    let (dir, name) = crate::layout::object_name(id);
    Ok(layout
        .objects()?
        .and_then(|o| o.sub(&dir).ok().flatten())
        .and_then(|d| d.open_file(&name).ok().flatten()))
}
