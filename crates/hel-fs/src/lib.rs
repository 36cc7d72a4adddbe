//! hel-fs: the one place where hel opens files it does not trust.
//!
//! Everything hel reads from a project or from `.hel/` may have been put
//! there by someone else: a symbolic link pointing out of the project, a
//! FIFO that blocks whoever opens it, a device, a file far larger than any
//! hel writes. This crate holds the mechanisms that make such files
//! harmless, so that the store, the workspace snapshots, the file tools
//! and the CLI share them instead of keeping copies:
//!
//! - [`Dir`]: a directory held open with the path it was reached by, and
//!   every open, create, rename and removal relative to it, never through
//!   a link, each checked to be the kind it should be; errors are
//!   [`Error`]s naming the path.
//! - [`at`]: the same opens on a raw descriptor and a name, returning the
//!   errno, for callers that tell the errors apart themselves and hold no
//!   path (the workspace walk, restore, the file tools). The open flags
//!   live there and nowhere else.
//! - Bounded reads: [`read_bounded`] and [`read_to_bound`] refuse a file
//!   over a limit (naming it), [`read_head`] reads at most a limit and
//!   leaves the rest unread.
//! - Syncs, counted per thread ([`sync_file`], [`Dir::sync`], [`syncs`]),
//!   and test-only [`failpoint`]s.
//!
//! Linux only (`openat2`, `O_PATH`); where `openat2` is missing the same
//! guarantees come from opening one component at a time.

pub mod at;
mod dir;
pub mod failpoint;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

pub use dir::{Dir, Entry, Kind, NewFile, Stamp};

/// Whether `fd` is on a local Linux file system (ext2/3/4, XFS, Btrfs,
/// tmpfs, F2FS, ZFS, bcachefs): one whose `stat` is never served from a
/// cache another machine's writes bypass and whose changes this kernel
/// makes itself (so it sees them, and sends their notifications). Network
/// and FUSE file systems are not on the list; neither is anything but
/// Linux.
pub fn local_file_system(fd: impl std::os::fd::AsFd) -> bool {
    const LOCAL: [i64; 7] = [
        0xEF53,      // ext2, ext3, ext4
        0x5846_5342, // XFS
        0x9123_683E, // Btrfs
        0x0102_1994, // tmpfs
        0xF2F5_2010, // F2FS
        0x2FC1_2FC1, // ZFS
        0xCA45_1A4E, // bcachefs
    ];
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // The type of f_type differs between architectures.
        #[allow(clippy::unnecessary_cast)]
        rustix::fs::fstatfs(fd)
            .map(|st| LOCAL.contains(&(st.f_type as i64)))
            .unwrap_or(false)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = (LOCAL, fd);
        false
    }
}

/// Every way an operation of this crate can fail, with the path it was
/// about (the path is for messages: nothing is ever opened by it).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The system call failed (including a name that is not one path
    /// component: `InvalidInput`).
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// What is at `path` is not the kind asked for: a link, a FIFO, a
    /// device, a directory where a file should be, or the reverse.
    #[error("{path} is a {found} where a {expected} was expected")]
    Unexpected {
        path: PathBuf,
        found: &'static str,
        expected: &'static str,
    },
    /// A bounded read met a file over its bound (`size` is what was seen:
    /// the file's size, or what was read before the read stopped).
    #[error("{path} holds {size} bytes, over the {max} bytes such a file may have")]
    TooLarge { path: PathBuf, size: u64, max: u64 },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// For callers whose errors are `std::io::Error` and name the path
/// themselves: an [`Error::Io`] is its source, unchanged (same kind, no
/// path); the others are `Other` errors with this crate's message.
impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        match e {
            Error::Io { source, .. } => source,
            e => std::io::Error::other(e.to_string()),
        }
    }
}

/// Attach a path to an I/O result.
pub(crate) trait IoContext<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| Error::Io {
            path: path.into(),
            source,
        })
    }
}

thread_local! {
    /// Every fsync and fdatasync made through this crate on this thread.
    static SYNCS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

pub(crate) fn count_sync() {
    SYNCS.with(|c| c.set(c.get() + 1));
}

/// Every fsync and fdatasync this thread has made through this crate
/// ([`sync_file`], [`Dir::sync`]): tests count what a commit costs.
pub fn syncs() -> u64 {
    SYNCS.with(std::cell::Cell::get)
}

/// Make `file`'s bytes (and, unless `data_only`, all its metadata)
/// durable; `path` names it in the error.
pub fn sync_file(file: &File, path: &Path, data_only: bool) -> Result<()> {
    count_sync();
    if data_only {
        file.sync_data().at(path)
    } else {
        file.sync_all().at(path)
    }
}

/// Read `file` whole, refusing more than `max` bytes: checked against its
/// size first (nothing is read then), and again while reading, in case it
/// grows. [`Error::TooLarge`] names `path`.
pub fn read_bounded(file: &File, max: u64, path: &Path) -> Result<Vec<u8>> {
    read_sized(file, file.metadata().at(path)?.len(), max, path)
}

/// [`read_bounded`] of a file that `fstat` said is `len` bytes long.
pub(crate) fn read_sized(file: &File, len: u64, max: u64, path: &Path) -> Result<Vec<u8>> {
    if len > max {
        return Err(Error::TooLarge {
            path: path.to_owned(),
            size: len,
            max,
        });
    }
    read_to_bound(file, len, max, path)
}

/// Read `src` to its end, refusing more than `max` bytes: at most `max` + 1
/// bytes are ever read. `size` is what the caller's `fstat` said, used
/// only to size the buffer (never beyond `max`). [`Error::TooLarge`] names
/// `path`.
pub fn read_to_bound(src: impl Read, size: u64, max: u64, path: &Path) -> Result<Vec<u8>> {
    let cap = usize::try_from(size.min(max)).unwrap_or(0);
    let mut buf = Vec::with_capacity(cap);
    src.take(max.saturating_add(1))
        .read_to_end(&mut buf)
        .at(path)?;
    if buf.len() as u64 > max {
        return Err(Error::TooLarge {
            path: path.to_owned(),
            size: buf.len() as u64,
            max,
        });
    }
    Ok(buf)
}

/// The first `max` bytes of `src` (all of it when shorter); the rest is
/// never read. For files of which only a head is used (ignore files,
/// pointers), where a longer file is not an error.
pub fn read_head(src: impl Read, max: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    src.take(max).read_to_end(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_reads_name_the_path() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, vec![7u8; 10]).unwrap();
        let open = || File::open(&p).unwrap();
        assert_eq!(read_bounded(&open(), 10, &p).unwrap().len(), 10);
        let err = read_bounded(&open(), 9, &p).unwrap_err();
        assert!(
            matches!(
                err,
                Error::TooLarge {
                    size: 10,
                    max: 9,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains(&p.display().to_string()), "{err}");
        // A size that lies (a file that grew after its fstat) is caught
        // while reading.
        let err = read_to_bound(open(), 0, 9, &p).unwrap_err();
        assert!(matches!(err, Error::TooLarge { size: 10, .. }), "{err:?}");
        assert_eq!(read_head(open(), 4).unwrap(), vec![7u8; 4]);
        assert_eq!(read_head(open(), 40).unwrap().len(), 10);
    }
}
