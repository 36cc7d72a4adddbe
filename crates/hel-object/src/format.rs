//! The store format's constants that every layer names: its version, the
//! store directory's name, the size of a ref file.

/// Name of the store directory inside a project.
pub const STORE_DIR: &str = ".hel";

/// The store format this build writes and the newest it reads: 6 is
/// format 5 with snapshots of schema 3, which name their spill map by a
/// blob (objects-spec §2.3). 5 is format 4 with snapshot objects and
/// commit records that may be zstd frames compressed with hel's
/// dictionary (objects-spec §2.2, §12.2). 4
/// is format 3 (format 2's packs and journals with each session's head in its
/// ref file, objects-spec §12) with who depends on whom recorded under
/// `refs/` and the store lock inside the directory `.store.lock`
/// (objects-spec §5.1, §10.2). A store of format 2 (heads in journals) or 1 (no
/// `format` file: loose objects and ref files only) is upgraded when it is
/// opened (see `upgrade.rs`); only the upgrade reads it by its own rules.
pub const FORMAT_VERSION: u64 = 6;

/// The most bytes a ref file may hold (64 hex digits and a newline).
pub const REF_MAX: u64 = 65;
