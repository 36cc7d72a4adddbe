//! hel-workspace: the project's files in hel-store.
//!
//! A workspace snapshot records the project directory as tree objects
//! (objects-spec §13): one per directory, naming file blobs, symlink
//! targets and subtrees, so that unchanged directories keep their ids and a
//! snapshot costs what changed. [`snapshot`] walks the project (honouring
//! ignore files, never entering `.git`, `.hel`, `.jj` or a nested
//! repository) with a stat cache so that unchanged files are not read
//! again; [`flat`] reads a tree back as a map from path to entry; [`diff`]
//! compares two of those (or one and the files on disk); [`restore`]
//! writes files back under the rules that keep a user's own work safe.
//!
//! Paths are bytes (a file name on Linux is not always UTF-8), relative to
//! the project, components joined by `/`.

pub mod diff;
pub mod flat;
pub mod restore;

pub use flat::{Flat, Item};
pub mod stat;

pub use stat::FileStat;
