//! The store format's constants that every layer names: its version, the
//! store directory's name, the size of a ref file.

/// Name of the store directory inside a project.
pub const STORE_DIR: &str = ".hel";

/// The store format, the one this build reads and writes (objects-spec).
/// Earlier numbers were pre-release layouts that no released hel reads: a
/// store of any other format is refused when it is opened.
pub const FORMAT_VERSION: u64 = 6;

/// The most bytes a ref file may hold (64 hex digits and a newline).
pub const REF_MAX: u64 = 65;
