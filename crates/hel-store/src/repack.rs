//! Writing sealed packs: what gc and delete copy live objects into
//! (objects-spec §12.4, §12.5).
//!
//! A pack and its index are written under `tmp/`, fsynced, and renamed into
//! `packs/` (index first, then pack: a reader lists packs, so it never sees
//! a pack without its index), then `packs/` is fsynced. Only then are the
//! objects' old places removed, so a crash at any moment leaves every
//! object readable from its old place, its new one, or both; leftovers in
//! `tmp/` are removed by the next gc.

use std::io::Write;

use crate::error::IoContext;
use crate::layout::Layout;
use crate::lock::Exclusive;
use crate::odb;
use crate::pack::{self, FileKind, IdxEntry, RecordType};
use crate::{Error, ObjectId, Result};

/// Write `records` (object ids and their stored bytes, as a loose file or a
/// record holds them) as one sealed pack; returns its stem and its size.
/// Refuses before writing anything when the disk has no room for it.
pub(crate) fn write_sealed(
    layout: &Layout,
    _lock: &Exclusive<'_>,
    records: &[(ObjectId, Vec<u8>)],
) -> Result<(String, u64)> {
    write_pack(layout, records)
}

/// [`write_sealed`] for objects received from elsewhere (a pull): under the
/// shared lock, so that gc cannot run between the pack landing and the
/// head that names its objects; it only adds a pack, and a gc that comes
/// later treats it as any other.
pub(crate) fn write_sealed_shared(
    layout: &Layout,
    _lock: &crate::lock::Shared<'_>,
    records: &[(ObjectId, Vec<u8>)],
) -> Result<(String, u64)> {
    write_pack(layout, records)
}

fn write_pack(layout: &Layout, records: &[(ObjectId, Vec<u8>)]) -> Result<(String, u64)> {
    let packs = layout.packs_create()?;
    let tmp = layout.tmp_create()?;
    let need: u64 = records
        .iter()
        .map(|(_, s)| s.len() as u64 + pack::RECORD_HEADER + 48)
        .sum::<u64>()
        + 4096;
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
    let mut hasher = blake3::Hasher::new();
    let mut entries = Vec::with_capacity(records.len());
    let mut body = Vec::new();
    body.extend_from_slice(&pack::file_header(FileKind::Sealed));
    for (id, stored) in records {
        let rec = pack::encode_record(RecordType::Object, id, stored);
        entries.push(IdxEntry {
            id: *id,
            offset: body.len() as u64,
            len: rec.len() as u64,
        });
        body.extend_from_slice(&rec);
    }
    hasher.update(&body);
    let pack_hash = *hasher.finalize().as_bytes();
    let idx = pack::encode_idx(&mut entries, &pack_hash);
    let stem = format!("pack-{}", &blake3::hash(&idx).to_hex()[..32]);
    let (pack_name, idx_name) = odb::sealed_names(&stem);
    let tpack = format!("{}-{}", uuid::Uuid::new_v4().simple(), pack_name);
    let tidx = format!("{}-{}", uuid::Uuid::new_v4().simple(), idx_name);
    let written = (|| -> Result<()> {
        for (name, bytes) in [(&tidx, &idx), (&tpack, &body)] {
            let mut f = tmp.create_new(name, 0o600)?;
            f.write_all(bytes).at(tmp.child_path(name))?;
            crate::dir::sync_file(&f, &tmp.child_path(name), false)?;
        }
        tmp.rename_to(&tidx, packs, &idx_name)?;
        tmp.rename_to(&tpack, packs, &pack_name)?;
        packs.sync()
    })();
    if written.is_err() {
        let _ = tmp.remove_file(&tpack);
        let _ = tmp.remove_file(&tidx);
    }
    written?;
    Ok((stem, body.len() as u64))
}

/// The stored bytes of object `id` from wherever it is now, verified: a
/// repack must never give damaged bytes a fresh, valid record.
pub(crate) fn stored_bytes(layout: &Layout, id: &ObjectId) -> Result<Vec<u8>> {
    let cap = crate::object::Cap::ANY;
    let max = cap.max + cap.max / 128 + 4096;
    match layout.odb().locate(layout, id)? {
        Some(odb::Found::Record { file, place, len }) => {
            let mut record = odb::read_found(&file, &place, len, id, max)?;
            if !crate::pack::check_matches(&record) {
                return Err(crate::pack::damaged(
                    &place,
                    Some(id),
                    "its check does not match (torn or damaged)",
                ));
            }
            Ok(record.split_off(crate::pack::RECORD_HEADER as usize))
        }
        Some(odb::Found::Loose) => {
            let path = layout.loose_path(id);
            let (dir, name) = crate::layout::object_name(id);
            let file = layout
                .objects()?
                .and_then(|o| o.sub(&dir).ok().flatten())
                .and_then(|d| d.open_file(&name).ok().flatten())
                .ok_or_else(|| Error::Missing {
                    id: *id,
                    path: path.clone(),
                })?;
            let stored = crate::dir::read_bounded(file, max, &path)?;
            crate::object::decode(id, &path, &stored, cap)?;
            Ok(stored)
        }
        None => Err(Error::Missing {
            id: *id,
            path: layout.loose_path(id),
        }),
    }
}
