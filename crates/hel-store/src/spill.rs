//! A session's spill files (tool output too large for a message): written
//! under the session's working directory while it runs, stored as blobs by
//! the next commit, read back by their entry in the checkpoint.

use crate::layout::SPILL;
use crate::lock::SessionLease;
use crate::object::Cap;
use crate::snapshot::{Checkpoint, Spill, SpillEntry};
use crate::store::spill_of_size;
use crate::{Error, Result, SessionId, Store};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The path of `session`'s spill directory, as seen from the project
/// (conversations name spill files under it).
pub fn dir_path(store: &Store, session: &SessionId) -> PathBuf {
    store
        .root_path()
        .join(crate::layout::SESSIONS)
        .join(session.as_str())
        .join(SPILL)
}

/// Write a spill working copy `name` of the lease's session (a new file:
/// spill never changes once written).
pub fn write(store: &Store, lease: &SessionLease, name: &str, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = store.spill_dir(lease)?;
    let mut f = dir.create_new(name, 0o600)?;
    f.write_all(bytes).map_err(|source| Error::Io {
        path: dir.child_path(name),
        source,
    })
}

/// The spill working copy `name` of the lease's session, if present.
pub fn read_copy(store: &Store, lease: &SessionLease, name: &str) -> Result<Option<Vec<u8>>> {
    let dir = store.spill_dir(lease)?;
    Ok(dir.read_file(name, Cap::SPILL.max)?)
}

/// Remove the session's spill working copies (`sessions/<id>/spill/`):
/// they are a cache of the spill blobs, re-made at resume. hel calls
/// this when an instance ends; what was never committed goes with it.
pub fn clear(store: &Store, lease: &SessionLease) -> Result<()> {
    let Some(layout) = store.layout()? else {
        return Ok(());
    };
    if let Some(dir) = layout.session_dir(lease.session())? {
        dir.remove_tree(SPILL)?;
    }
    Ok(())
}

/// The spill map of checkpoint `cp` (of `store`): empty when it says
/// `{}`, else read from the blob that holds it, verified and validated.
pub fn map(store: &Store, cp: &Checkpoint) -> Result<BTreeMap<String, SpillEntry>> {
    match &cp.spill {
        Spill::Inline(map) => Ok(map.clone()),
        Spill::Blob(id) => crate::read::spill_map(store.layout_or_missing(id)?, cp),
    }
}

/// The bytes of the spill file `entry` names, verified, and as long as
/// `entry.size` says (objects-spec §2.4, `spill`).
pub fn read(store: &Store, entry: &SpillEntry) -> Result<Vec<u8>> {
    spill_of_size(
        store.layout_or_missing(&entry.blob)?,
        &entry.blob,
        entry.size,
    )
}
