//! Reading objects from wherever the object database finds them (a
//! journal or a sealed pack), verified by
//! the codec (`object.rs`), and the objects a reader takes whole: snapshots
//! and trees, validated.

use crate::object::{decode, file_max, Cap, Kind};
use crate::odb::{self, Found, Odb};
use crate::snapshot::{Checkpoint, Invalid, Spill, SpillEntry, SCHEMA_VERSION};
use crate::tree::{Extents, Tree};
use crate::{pack, Error, ObjectId, Result};

/// Read and verify object `id` under `cap`, returning its kind and payload:
/// from the journal or pack that holds it.
pub(crate) fn object(layout: &Odb, id: &ObjectId, cap: Cap) -> Result<(Kind, Vec<u8>)> {
    if let Some(kept) = layout.memo_get(id, cap) {
        return Ok(kept);
    }
    if let Some(received) = layout.incoming_get(id, cap) {
        return received;
    }
    match layout.index().locate(layout, id)? {
        Some(found) => read_at(id, &found, cap),
        None => Err(Error::Missing {
            id: *id,
            path: layout.packs_path(),
        }),
    }
}

/// Read and verify object `id` under `cap` where `found` says it is.
pub(crate) fn object_at(
    layout: &Odb,
    id: &ObjectId,
    found: &Found,
    cap: Cap,
) -> Result<(Kind, Vec<u8>)> {
    if let Some(kept) = layout.memo_get(id, cap) {
        return Ok(kept);
    }
    read_at(id, found, cap)
}

/// [`object_at`] past the memo of fsck: what `found` holds, read and
/// verified.
fn read_at(id: &ObjectId, found: &Found, cap: Cap) -> Result<(Kind, Vec<u8>)> {
    let Found { file, place, len } = found;
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
        .map_err(|e| odb::explain_damage(e.into(), &record, place, id))
}

/// Read object `id` under `cap` and require it to be of `kind`.
pub(crate) fn of_kind(layout: &Odb, id: &ObjectId, kind: Kind, cap: Cap) -> Result<Vec<u8>> {
    check_kind(layout, id, object(layout, id, cap)?, kind)
}

/// [`of_kind`] where `found` says the object is.
pub(crate) fn of_kind_at(
    layout: &Odb,
    id: &ObjectId,
    found: &Found,
    kind: Kind,
    cap: Cap,
) -> Result<Vec<u8>> {
    check_kind(layout, id, object_at(layout, id, found, cap)?, kind)
}

/// The payload of object `id`, read as `(found, payload)`, when it is of
/// `kind`.
fn check_kind(
    layout: &Odb,
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

/// Read and validate snapshot `id`.
pub(crate) fn snapshot(layout: &Odb, id: &ObjectId) -> Result<Checkpoint> {
    if let Some(cp) = layout.memo_snapshot(id) {
        return Ok(cp);
    }
    let payload = of_kind(layout, id, Kind::Snapshot, Cap::SNAPSHOT)?;
    validated_snapshot(layout, id, &payload)
}

/// [`snapshot`] where `found` says the snapshot is.
pub(crate) fn snapshot_at(layout: &Odb, id: &ObjectId, found: &Found) -> Result<Checkpoint> {
    if let Some(cp) = layout.memo_snapshot(id) {
        return Ok(cp);
    }
    let payload = of_kind_at(layout, id, found, Kind::Snapshot, Cap::SNAPSHOT)?;
    validated_snapshot(layout, id, &payload)
}

/// Snapshot `id` from its payload, validated.
fn validated_snapshot(layout: &Odb, id: &ObjectId, payload: &[u8]) -> Result<Checkpoint> {
    Checkpoint::parse(payload).map_err(|e| match e {
        Invalid::Newer(found) => Error::NewerSchema {
            id: *id,
            path: layout.object_path(id),
            found,
            supported: SCHEMA_VERSION,
        },
        malformed => Error::Corrupt {
            id: *id,
            path: layout.object_path(id),
            reason: format!("malformed snapshot: {malformed}"),
        },
    })
}

/// The spill map of checkpoint `cp`: empty when it says `{}`, else read
/// from its blob, verified and validated.
pub(crate) fn spill_map(
    layout: &Odb,
    cp: &Checkpoint,
) -> Result<std::collections::BTreeMap<String, SpillEntry>> {
    spill_map_at(layout, cp, None)
}

/// [`spill_map`], where `found` (when known) says the map's blob is.
pub(crate) fn spill_map_at(
    layout: &Odb,
    cp: &Checkpoint,
    found: Option<&Found>,
) -> Result<std::collections::BTreeMap<String, SpillEntry>> {
    let id = match &cp.spill {
        Spill::Inline(map) => return Ok(map.clone()),
        Spill::Blob(id) => id,
    };
    let kind = crate::object::Kind::Blob;
    let payload = match found {
        Some(found) => of_kind_at(layout, id, found, kind, Cap::SPILL_MAP)?,
        None => of_kind(layout, id, kind, Cap::SPILL_MAP)?,
    };
    crate::snapshot::parse_spill_map(&payload).map_err(|e| Error::Corrupt {
        id: *id,
        path: layout.object_path(id),
        reason: format!("malformed spill map: {e}"),
    })
}

/// Read and validate tree `id`.
pub(crate) fn tree(layout: &Odb, id: &ObjectId) -> Result<Tree> {
    let payload = of_kind(layout, id, Kind::Tree, Cap::TREE)?;
    parsed_tree(layout, id, &payload)
}

/// [`tree`] where `found` says the tree is.
pub(crate) fn tree_at(layout: &Odb, id: &ObjectId, found: &Found) -> Result<Tree> {
    let payload = of_kind_at(layout, id, found, Kind::Tree, Cap::TREE)?;
    parsed_tree(layout, id, &payload)
}

fn parsed_tree(layout: &Odb, id: &ObjectId, payload: &[u8]) -> Result<Tree> {
    Tree::parse(payload).map_err(|reason| Error::Corrupt {
        id: *id,
        path: layout.object_path(id),
        reason: format!("malformed tree: {reason}"),
    })
}

/// Check that every root tree in `roots` is within the limits, as
/// [`Extents::check`] does, reading trees from `layout`; each fault goes
/// to `on_error` (fsck goes on past it, the others stop at the first).
pub(crate) fn check_roots(
    layout: &Odb,
    roots: &[ObjectId],
    on_error: &mut dyn FnMut(Error) -> Result<()>,
) -> Result<Extents> {
    let mut extents = Extents::default();
    let mut seen = std::collections::HashSet::new();
    for root in roots {
        if !seen.insert(*root) {
            continue;
        }
        if let Err(e) = extents.check(root, &mut |id| tree(layout, id)) {
            on_error(e)?;
        }
    }
    Ok(extents)
}
