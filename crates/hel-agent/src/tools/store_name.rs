//! The store directory's name, as the tools meet it in a project (the
//! boundary, the search walk and the git directory scan all skip it).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use hel_store::STORE_DIR;

/// The store directory's name, compared without case so a case-folding
/// file system cannot reach it as `.HEL`.
pub(crate) fn is_store_name(name: &OsStr) -> bool {
    name.as_bytes().eq_ignore_ascii_case(STORE_DIR.as_bytes())
}
