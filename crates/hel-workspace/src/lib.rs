//! hel-workspace: the project's files in hel-store.
//!
//! A workspace snapshot records the project directory as tree objects
//! (objects-spec §10): one per directory, naming file blobs, symlink
//! targets and subtrees, so that unchanged directories keep their ids and a
//! snapshot costs what changed. [`snapshot`] walks the project (honouring
//! ignore files, never entering `.git`, `.hel`, `.jj` or a nested
//! repository) with a stat cache so that unchanged files are not read
//! again; [`flat`] reads a tree back as a map from path to entry; [`diff`]
//! compares two of those (or one and the files on disk); [`restore`]
//! writes files back under the rules that keep a user's own work safe;
//! [`watch`] keeps watching the project between the snapshots of one
//! process, so that one after which nothing changed needs no walk.
//!
//! Paths are bytes (a file name on Linux is not always UTF-8), relative to
//! the project, components joined by `/`.

pub mod attrib;
pub mod cache;
pub mod diff;
pub mod flat;
pub mod history;
pub mod restore;
pub mod snapshot;
pub mod stat;
pub mod undo;
pub mod walk;
pub mod watch;

pub use flat::{Flat, Item};
pub use snapshot::{Options, Prev, Scan, Sink, Snapshot, SnapshotError, Workspace};
pub use stat::FileStat;

/// A map keyed by what a project or `.hel/` holds (paths, the inodes a
/// cache file names): hashed with a random seed per process, so that keys
/// chosen to collide (a crafted cache, a cloned tree's names) cannot make
/// each lookup walk the others, as they can with a fixed hash.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// A set keyed as [`Map`] is.
pub(crate) type Set<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
