//! What hel-workspace reads of the store besides checkpoints: blobs and
//! trees by id (verified, under a cap), the extent of a root tree before it
//! is flattened, and the store's `workspace/` directory for its cache.

use crate::object::{Cap, Kind};
use std::path::PathBuf;

use crate::{ObjectId, Result, Store};

/// The bytes of blob `id` used as `cap` says (a workspace file:
/// [`Cap::FILE`]), verified.
pub fn read_blob(store: &Store, id: &ObjectId, cap: Cap) -> Result<Vec<u8>> {
    crate::read::of_kind(store.layout_or_missing(id)?, id, Kind::Blob, cap)
}

/// Read and validate tree `id` (a directory of a workspace snapshot).
pub fn read_tree(store: &Store, id: &ObjectId) -> Result<crate::tree::Tree> {
    crate::read::tree(store.layout_or_missing(id)?, id)
}

/// What root tree `root` flattens to, refused past the limits
/// ([`crate::tree::Extents::check`]): what a reader checks before it flattens a
/// snapshot.
pub fn tree_extent(store: &Store, root: &ObjectId) -> Result<crate::tree::Extent> {
    crate::tree::Extents::default().check(root, &mut |id| read_tree(store, id))
}

/// The directory `.hel/workspace/` (created when absent), opened
/// without following links, and its path. Workspace snapshots keep
/// their stat cache and a restore's temporary files there.
pub fn dir(store: &Store) -> Result<(std::os::fd::OwnedFd, PathBuf)> {
    let dir = store.layout_create()?.workspace_create()?;
    Ok((dir.dup_fd()?, dir.path().to_owned()))
}
