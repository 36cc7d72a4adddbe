//! The store's view of hel-fs: its types, used as they are, and its errors
//! converted to the store's own [`Error`], whose messages say what to do
//! about a link or a special file found in `.hel/`. Every mechanism
//! (no-follow opens, kind checks, bounded reads, sync counting) is
//! hel-fs's; this module only converts.

use std::fs::File;
use std::path::Path;

pub(crate) use hel_fs::{Dir, Entry, Kind, Stamp};

use crate::{Error, Result};

impl From<hel_fs::Error> for Error {
    fn from(e: hel_fs::Error) -> Error {
        match e {
            hel_fs::Error::Io { path, source } => Error::Io { path, source },
            hel_fs::Error::Unexpected {
                path,
                found,
                expected,
            } => Error::Unexpected {
                path,
                found,
                expected,
            },
            hel_fs::Error::TooLarge { path, size, max } => Error::FileTooLarge { path, size, max },
        }
    }
}

/// See [`hel_fs::sync_file`].
pub(crate) fn sync_file(file: &File, path: &Path, data_only: bool) -> Result<()> {
    Ok(hel_fs::sync_file(file, path, data_only)?)
}
