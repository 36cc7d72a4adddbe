//! [`Dir`]: a directory held open, with the path it was reached by (for
//! messages only), and every open, create, rename and removal relative to
//! it.
//!
//! Nothing is opened by a path from `/`: every name is one component
//! opened relative to its directory's descriptor, never through a symbolic
//! link (`O_NOFOLLOW`, `openat2` with `RESOLVE_NO_SYMLINKS`), and what was
//! opened is checked to be what it should be (a regular file or a
//! directory) before it is read, written or locked. A FIFO never blocks an
//! open (`O_NONBLOCK`), a device is never read, and nothing is ever
//! deleted through a link: removing a link removes the link.
//!
//! Names handed to these functions are single path components that the
//! caller builds itself (object hex, session ids, fixed names); they are
//! checked all the same: a `/`, `..` or NUL in one is refused.

use std::ffi::OsString;
use std::fs::File;
use std::io::ErrorKind;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode};
use rustix::io::Errno;

use crate::{at, count_sync, Error, IoContext, Result};

/// Deepest directory tree [`Dir::remove_tree`] descends into. The store's
/// own trees are two levels deep; anything deeper was not made by hel.
const MAX_TREE_DEPTH: usize = 8;

/// An open directory inside (or being) the store, with the path it was
/// reached by (for messages only: nothing is ever opened by that path).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl AsFd for Dir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// What a directory entry is, without following it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other(&'static str),
}

impl Kind {
    /// The kind of a file of type `t`.
    pub fn of(t: FileType) -> Kind {
        match t {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            FileType::Fifo => Kind::Other("FIFO"),
            FileType::Socket => Kind::Other("socket"),
            FileType::CharacterDevice => Kind::Other("character device"),
            FileType::BlockDevice => Kind::Other("block device"),
            FileType::Unknown => Kind::Other("file of unknown type"),
        }
    }

    /// How a message names this kind.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::File => "regular file",
            Kind::Dir => "directory",
            Kind::Symlink => "symbolic link",
            Kind::Other(what) => what,
        }
    }
}

/// One entry of a directory listing.
#[derive(Debug)]
pub struct Entry {
    pub name: OsString,
    pub kind: Kind,
}

impl Entry {
    /// The name as UTF-8, if it is.
    pub fn name_str(&self) -> Option<&str> {
        self.name.to_str()
    }
}

/// One version of a file: its inode, size and change time. A file
/// replaced (by rename) or written gets a new stamp; the change time is one
/// that no `utimes` can set back. Only ever compared for equality.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stamp(pub [u64; 4]);

impl Stamp {
    // The fields' types differ between platforms and backends.
    #[allow(clippy::unnecessary_cast)]
    fn of(st: &rustix::fs::Stat) -> Stamp {
        // Bit patterns: only equality matters.
        Stamp([
            st.st_ino as u64,
            st.st_size as u64,
            st.st_ctime as u64,
            st.st_ctime_nsec as u64,
        ])
    }
}

/// A file being written under a temporary name ([`Dir::new_file`]), to be
/// renamed into place whole by [`NewFile::persist`]. Dropped before then
/// (an error on the way), it is removed.
#[derive(Debug)]
pub struct NewFile<'a> {
    dir: &'a Dir,
    name: String,
    file: File,
    persisted: bool,
}

impl NewFile<'_> {
    /// The open file, to write to (`&File` is `Write`).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Its path under its temporary name (for messages).
    pub fn path(&self) -> PathBuf {
        self.dir.child_path(&self.name)
    }

    /// Write all of `bytes` at the end of what was written.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        use std::io::Write;
        (&self.file).write_all(bytes).at(self.path())
    }

    /// Make what was written durable (`fsync`).
    pub fn sync(&self) -> Result<()> {
        crate::sync_file(&self.file, &self.path(), false)
    }

    /// Rename it over `name` in `to` (on the same file system), replacing
    /// what is there (a link there is replaced, never followed). Neither
    /// file nor directory is synced here: the caller syncs the file first
    /// ([`NewFile::sync`]) and `to` after ([`Dir::sync`]) when the
    /// replacement must survive a crash. On an error the file is removed.
    pub fn persist(mut self, to: &Dir, name: &str) -> Result<()> {
        self.dir.rename_to(&self.name, to, name)?;
        self.persisted = true;
        Ok(())
    }
}

impl Drop for NewFile<'_> {
    fn drop(&mut self) {
        if !self.persisted {
            let _ = self.dir.remove_file(&self.name);
        }
    }
}

fn io(e: Errno) -> std::io::Error {
    e.into()
}

/// Refuse names that are not one plain component.
fn check_name(name: &str) -> std::io::Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            format!("{name:?} is not a single path component"),
        ));
    }
    Ok(())
}

impl Dir {
    /// Open the directory at `path`, following links in `path` itself (it
    /// is the user's project directory, not something inside the store).
    pub fn open_path(path: &Path) -> Result<Dir> {
        let fd = at::open_dir_following(path).map_err(io).at(path)?;
        Ok(Dir {
            fd,
            path: path.to_owned(),
        })
    }

    /// A descriptor of this directory of the caller's own.
    pub fn dup_fd(&self) -> Result<std::os::fd::OwnedFd> {
        self.fd.as_fd().try_clone_to_owned().at(&self.path)
    }

    /// The path this directory was reached by (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Refuse `name` unless it is one plain component, with its path in
    /// the error (made only then: a listing checks 20,000 names).
    fn check_in(&self, name: &str) -> Result<()> {
        check_name(name).map_err(|source| Error::Io {
            path: self.child_path(name),
            source,
        })
    }

    /// The path of `name` in this directory, for messages.
    pub fn child_path(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// What `name` is, without following it; `None` when absent.
    pub fn kind_of(&self, name: &str) -> Result<Option<Kind>> {
        self.check_in(name)?;
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Kind::of(FileType::from_raw_mode(st.st_mode)))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(io(e)).at(self.child_path(name)),
        }
    }

    /// Explain a failed no-follow open of `name` that was meant to find an
    /// `expected` thing: a link or special file is named as such.
    fn refused(&self, name: &str, expected: Kind, e: Errno) -> Error {
        let path = self.child_path(name);
        if matches!(e, Errno::LOOP | Errno::NOTDIR | Errno::NXIO | Errno::ISDIR) {
            if let Ok(Some(found)) = self.kind_of(name) {
                if found != expected {
                    return Error::Unexpected {
                        path,
                        found: found.describe(),
                        expected: expected.describe(),
                    };
                }
            }
        }
        Error::Io {
            path,
            source: io(e),
        }
    }

    /// The subdirectory `name`, or `None` when absent. A link or anything
    /// else in its place is refused.
    pub fn sub(&self, name: &str) -> Result<Option<Dir>> {
        self.check_in(name)?;
        match at::open_dir(&self.fd, name) {
            Ok(fd) => Ok(Some(Dir {
                fd,
                path: self.child_path(name),
            })),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(self.refused(name, Kind::Dir, e)),
        }
    }

    /// The subdirectory `name`, created (with `mode`) when absent.
    pub fn sub_create(&self, name: &str, mode: u32) -> Result<Dir> {
        self.check_in(name)?;
        match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(io(e)).at(self.child_path(name)),
        }
        self.sub(name)?.ok_or_else(|| Error::Io {
            path: self.child_path(name),
            source: std::io::Error::new(ErrorKind::NotFound, "vanished right after mkdir"),
        })
    }

    /// Check what `fd` (just opened as `name`) is: a regular file, or a
    /// refusal naming what it is instead.
    fn require_file(&self, name: &str, fd: OwnedFd) -> Result<(File, rustix::fs::Stat)> {
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::Io {
            path: self.child_path(name),
            source: io(e),
        })?;
        let kind = Kind::of(FileType::from_raw_mode(st.st_mode));
        if kind != Kind::File {
            return Err(Error::Unexpected {
                path: self.child_path(name),
                found: kind.describe(),
                expected: Kind::File.describe(),
            });
        }
        Ok((File::from(fd), st))
    }

    /// Open the regular file `name` for reading; `None` when absent.
    pub fn open_file(&self, name: &str) -> Result<Option<File>> {
        Ok(self.open_file_stat(name)?.map(|(file, _)| file))
    }

    /// [`Dir::open_file`], with what `fstat` said of the file opened.
    fn open_file_stat(&self, name: &str) -> Result<Option<(File, rustix::fs::Stat)>> {
        self.check_in(name)?;
        match at::open_read(&self.fd, name) {
            Ok(fd) => self.require_file(name, fd).map(Some),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(self.refused(name, Kind::File, e)),
        }
    }

    /// Open the regular file at `dir/name` (two components, as objects
    /// are laid out) for reading, in one `openat2` that refuses links in
    /// either component; `None` when absent.
    pub fn open_file2(&self, dir: &str, name: &str) -> Result<Option<File>> {
        self.check_in(dir)?;
        check_name(name).map_err(|e| Error::Io {
            path: self.child_path(dir).join(name),
            source: e,
        })?;
        let rel = format!("{dir}/{name}");
        match at::read_beneath(&self.fd, &rel) {
            Ok(fd) => self.require_file(&rel, fd).map(|(file, _)| Some(file)),
            Err(Errno::NOENT) => Ok(None),
            Err(Errno::NOSYS) | Err(Errno::AGAIN) => match self.sub(dir)? {
                Some(sub) => sub.open_file(name),
                None => Ok(None),
            },
            Err(Errno::LOOP) | Err(Errno::NOTDIR) | Err(Errno::XDEV) => match self.sub(dir)? {
                // The first component was the link: `sub` names it.
                Some(sub) => sub.open_file(name),
                None => Ok(None),
            },
            Err(e) => Err(io(e)).at(self.child_path(&rel)),
        }
    }

    /// Read the regular file `name` whole (refusing one over `max` bytes
    /// before reading it) with its [`Stamp`], taken before the bytes were
    /// read; `None` when absent. Bytes written after that are not read.
    pub fn read_file_stamped(&self, name: &str, max: u64) -> Result<Option<(Vec<u8>, Stamp)>> {
        let Some((file, st)) = self.open_file_stat(name)? else {
            return Ok(None);
        };
        let bytes = crate::read_sized(&file, st.st_size as u64, max, &self.child_path(name))?;
        Ok(Some((bytes, Stamp::of(&st))))
    }

    /// The [`Stamp`] of `name` (not followed); `None` when absent.
    pub fn stamp(&self, name: &str) -> Result<Option<Stamp>> {
        self.check_in(name)?;
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Stamp::of(&st))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(io(e)).at(self.child_path(name)),
        }
    }

    /// Read the regular file `name` whole, refusing one over `max` bytes
    /// before reading it; `None` when absent.
    pub fn read_file(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
        let Some((file, st)) = self.open_file_stat(name)? else {
            return Ok(None);
        };
        crate::read_sized(&file, st.st_size as u64, max, &self.child_path(name)).map(Some)
    }

    /// Replace `name` in this directory by a file holding `bytes`, with
    /// permission bits `mode` (less the umask), atomically and durably:
    /// written to the new file `tmp_name` in `tmp` (which must be on the
    /// same file system), synced, renamed over `name` (a link there is
    /// replaced, never followed), then this directory synced. A crash
    /// leaves the old file or the new one, whole. On an error the
    /// temporary file is removed and `name` is as it was (or, when only
    /// the last sync failed, already replaced). [`Dir::new_file`] for a
    /// caller that writes as it goes or syncs otherwise.
    pub fn replace(
        &self,
        name: &str,
        bytes: &[u8],
        mode: u32,
        tmp: &Dir,
        tmp_name: &str,
    ) -> Result<()> {
        let mut f = tmp.new_file(tmp_name, mode)?;
        f.write_all(bytes)?;
        f.sync()?;
        f.persist(self, name)?;
        self.sync()
    }

    /// Create the new file `tmp_name` in this directory (`O_EXCL`), with
    /// permission bits `mode` (less the umask), to be renamed into place
    /// whole by [`NewFile::persist`]; removed if dropped before. The one
    /// way hel writes a file that must appear complete or not at all.
    pub fn new_file(&self, tmp_name: &str, mode: u32) -> Result<NewFile<'_>> {
        let file = self.create_new(tmp_name, mode)?;
        Ok(NewFile {
            dir: self,
            name: tmp_name.to_owned(),
            file,
            persisted: false,
        })
    }

    /// A directory opened by the caller (`fd` must be a directory), named
    /// `path` in messages.
    pub fn from_fd(fd: OwnedFd, path: PathBuf) -> Dir {
        Dir { fd, path }
    }

    /// Create the regular file `name`, which must not exist (`O_EXCL`: a
    /// link in its place fails the create instead of being followed).
    pub fn create_new(&self, name: &str, mode: u32) -> Result<File> {
        self.check_in(name)?;
        at::create_new(&self.fd, name, mode)
            .map(File::from)
            .map_err(io)
            .at(self.child_path(name))
    }

    /// Open (creating when absent, never truncating) the regular file
    /// `name` for read and write: lock files and logs.
    pub fn open_rw(&self, name: &str, append: bool) -> Result<File> {
        self.check_in(name)?;
        match at::open_rw(&self.fd, name, append) {
            Ok(fd) => self.require_file(name, fd).map(|(file, _)| file),
            Err(e) => Err(self.refused(name, Kind::File, e)),
        }
    }

    /// Hard-link `from` (in this directory) as `to_name` in `to`, never
    /// replacing anything: false when `to_name` already exists.
    pub fn link_to(&self, from: &str, to: &Dir, to_name: &str) -> Result<bool> {
        self.check_in(from)?;
        to.check_in(to_name)?;
        match rustix::fs::linkat(&self.fd, from, &to.fd, to_name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::EXIST) => Ok(false),
            Err(e) => Err(io(e)).at(to.child_path(to_name)),
        }
    }

    /// Rename `from` (in this directory) to `to_name` in `to`, replacing
    /// what is there (a link there is replaced, never followed).
    pub fn rename_to(&self, from: &str, to: &Dir, to_name: &str) -> Result<()> {
        self.check_in(from)?;
        to.check_in(to_name)?;
        rustix::fs::renameat(&self.fd, from, &to.fd, to_name)
            .map_err(io)
            .at(to.child_path(to_name))
    }

    /// Swap `from` (in this directory) and `to_name` in `to` in one step
    /// (`renameat2(RENAME_EXCHANGE)`: both must exist, of any kinds; at no
    /// moment is either name absent). `Ok(false)` when the file system
    /// cannot do it (the caller falls back to two renames).
    pub fn exchange(&self, from: &str, to: &Dir, to_name: &str) -> Result<bool> {
        self.check_in(from)?;
        to.check_in(to_name)?;
        match rustix::fs::renameat_with(
            &self.fd,
            from,
            &to.fd,
            to_name,
            rustix::fs::RenameFlags::EXCHANGE,
        ) {
            Ok(()) => Ok(true),
            Err(Errno::INVAL) | Err(Errno::NOSYS) | Err(Errno::OPNOTSUPP) => Ok(false),
            Err(e) => Err(io(e)).at(to.child_path(to_name)),
        }
    }

    /// Remove the non-directory `name` (a link is removed, not followed);
    /// false when absent.
    pub fn remove_file(&self, name: &str) -> Result<bool> {
        self.check_in(name)?;
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(io(e)).at(self.child_path(name)),
        }
    }

    /// Remove `name` and, when it is a directory, everything in it, without
    /// following any link (a link is removed as a link). Refuses trees
    /// deeper than hel makes. Returns the number of files removed.
    pub fn remove_tree(&self, name: &str) -> Result<u64> {
        match self.kind_of(name)? {
            None => Ok(0),
            Some(Kind::Dir) => {
                let Some(sub) = self.sub(name)? else {
                    return Ok(0);
                };
                let removed = sub.empty_tree(0)?;
                match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
                    Ok(()) | Err(Errno::NOENT) => Ok(removed),
                    Err(e) => Err(io(e)).at(self.child_path(name)),
                }
            }
            Some(_) => Ok(u64::from(self.remove_file(name)?)),
        }
    }

    fn empty_tree(&self, depth: usize) -> Result<u64> {
        if depth >= MAX_TREE_DEPTH {
            return Err(Error::Io {
                path: self.path.clone(),
                source: std::io::Error::other("directory tree deeper than hel makes: not removed"),
            });
        }
        let mut removed = 0;
        for e in self.entries()? {
            let Some(name) = e.name_str() else {
                return Err(Error::Io {
                    path: self.path.clone(),
                    source: std::io::Error::other("an entry's name is not UTF-8: not removed"),
                });
            };
            if e.kind == Kind::Dir {
                if let Some(sub) = self.sub(name)? {
                    removed += sub.empty_tree(depth + 1)?;
                }
                match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(e) => return Err(io(e)).at(self.child_path(name)),
                }
            } else if self.remove_file(name)? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// The entries of this directory (without `.` and `..`), each with
    /// what it is (never followed).
    pub fn entries(&self) -> Result<Vec<Entry>> {
        let mut dir = rustix::fs::Dir::read_from(&self.fd)
            .map_err(io)
            .at(&self.path)?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(io).at(&self.path)?;
            let bytes = entry.file_name().to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            let name = OsString::from_vec(bytes.to_vec());
            let kind = match entry.file_type() {
                FileType::Unknown => {
                    match rustix::fs::statat(&self.fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                    {
                        Ok(st) => Kind::of(FileType::from_raw_mode(st.st_mode)),
                        Err(Errno::NOENT) => continue,
                        Err(e) => return Err(io(e)).at(self.path.join(&name)),
                    }
                }
                t => Kind::of(t),
            };
            out.push(Entry { name, kind });
        }
        Ok(out)
    }

    /// Make the names in this directory durable.
    pub fn sync(&self) -> Result<()> {
        count_sync();
        rustix::fs::fsync(&self.fd).map_err(io).at(&self.path)
    }

    /// Free bytes on this directory's file system, when it says.
    pub fn free_space(&self) -> Option<u64> {
        let st = rustix::fs::fstatvfs(&self.fd).ok()?;
        Some(st.f_bavail.saturating_mul(st.f_frsize))
    }

    /// Does this directory's file system keep honest change times: a
    /// local Linux file system ([`crate::local_file_system`]), whose
    /// ctime every change of a file moves to the kernel's clock. Only such
    /// a file system's [`Stamp`]s may stand for a file's content.
    pub fn keeps_change_times(&self) -> bool {
        crate::local_file_system(&self.fd)
    }

    /// Device and inode of this directory.
    pub fn identity(&self) -> Result<(u64, u64)> {
        let st = rustix::fs::fstat(&self.fd).map_err(io).at(&self.path)?;
        Ok((st.st_dev, st.st_ino))
    }

    /// When this directory was made (seconds, nanoseconds), if its file
    /// system keeps birth times (`statx`'s `STATX_BTIME`); `None` if not.
    pub fn birth_time(&self) -> Result<Option<(i64, u32)>> {
        use rustix::fs::{statx, StatxFlags};
        match statx(&self.fd, "", AtFlags::EMPTY_PATH, StatxFlags::BTIME) {
            Ok(st) if StatxFlags::from_bits_retain(st.stx_mask).contains(StatxFlags::BTIME) => {
                Ok(Some((st.stx_btime.tv_sec, st.stx_btime.tv_nsec)))
            }
            Ok(_) | Err(Errno::NOSYS) => Ok(None),
            Err(e) => Err(io(e)).at(&self.path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Dir) {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let dir = Dir::open_path(d.path()).unwrap();
        (d, outside, dir)
    }

    #[test]
    fn links_and_special_files_are_refused() {
        let (d, outside, dir) = setup();
        symlink(outside.path(), d.path().join("ldir")).unwrap();
        symlink(outside.path().join("secret"), d.path().join("lfile")).unwrap();
        symlink("/dev/zero", d.path().join("zero")).unwrap();
        rustix::fs::mknodat(
            &dir.fd,
            "fifo",
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let err = dir.sub("ldir").unwrap_err().to_string();
        assert!(
            err.contains("symbolic link") && err.contains("ldir"),
            "{err}"
        );
        let err = dir.open_file("lfile").unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert!(dir.read_file("zero", 100).is_err());
        // A FIFO is refused without blocking (a blocking open would never
        // return: the deadline fails the test instead).
        let (tx, rx) = std::sync::mpsc::channel();
        let fifo_dir = Dir::open_path(d.path()).unwrap();
        std::thread::spawn(move || {
            let read = fifo_dir
                .open_file("fifo")
                .map(|_| ())
                .map_err(|e| e.to_string());
            let rw = fifo_dir.open_rw("fifo", false).is_err();
            let _ = tx.send((read, rw));
        });
        let (read, rw_refused) = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("opening a FIFO blocked");
        let err = read.unwrap_err();
        assert!(err.contains("FIFO"), "{err}");
        assert!(rw_refused);
        assert!(dir.open_rw("lfile", true).is_err());
        // A directory where a lock file goes is named as such.
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let err = dir.open_rw("sub", false).unwrap_err().to_string();
        assert!(err.contains("is a directory where"), "{err}");
        assert!(dir.create_new("lfile", 0o600).is_err());
        // Through a linked first component.
        let err = dir.open_file2("ldir", "secret").unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        // Removing a link removes the link.
        assert_eq!(dir.remove_tree("ldir").unwrap(), 1);
        assert!(outside.path().join("secret").exists());
        assert!(dir.open_file("absent").unwrap().is_none());
        assert!(dir.sub("../x").is_err());
    }

    #[test]
    fn replace_is_whole_and_never_through_a_link() {
        let (d, outside, dir) = setup();
        let tmp = dir.sub_create("tmp", 0o700).unwrap();
        dir.replace("f", b"one", 0o600, &tmp, "t1").unwrap();
        assert_eq!(std::fs::read(d.path().join("f")).unwrap(), b"one");
        // A link where the file goes is replaced, not written through.
        symlink(outside.path().join("secret"), d.path().join("l")).unwrap();
        dir.replace("l", b"two", 0o600, &tmp, "t2").unwrap();
        assert_eq!(std::fs::read(d.path().join("l")).unwrap(), b"two");
        assert!(!d.path().join("l").is_symlink());
        assert_eq!(std::fs::read(outside.path().join("secret")).unwrap(), b"s");
        // A temporary name taken (here by a link) fails before anything
        // is written; the file is as it was.
        symlink(outside.path().join("secret"), d.path().join("tmp/t3")).unwrap();
        assert!(dir.replace("f", b"three", 0o600, &tmp, "t3").is_err());
        assert_eq!(std::fs::read(d.path().join("f")).unwrap(), b"one");
        assert_eq!(std::fs::read(outside.path().join("secret")).unwrap(), b"s");
        assert_eq!(
            tmp.entries().unwrap().len(),
            1,
            "only the planted link is left"
        );
    }

    #[test]
    fn a_new_file_is_removed_unless_persisted() {
        let (d, _outside, dir) = setup();
        let tmp = dir.sub_create("tmp", 0o700).unwrap();
        // Written, then dropped (an error on the way): gone, nothing moved.
        let mut f = tmp.new_file("t1", 0o600).unwrap();
        f.write_all(b"half").unwrap();
        assert_eq!(f.path(), d.path().join("tmp/t1"));
        drop(f);
        assert!(tmp.entries().unwrap().is_empty());
        assert!(!d.path().join("f").exists());
        // Written as it goes, persisted over what is there.
        std::fs::write(d.path().join("f"), b"old").unwrap();
        let mut f = tmp.new_file("t2", 0o600).unwrap();
        f.write_all(b"new ").unwrap();
        f.write_all(b"bytes").unwrap();
        f.sync().unwrap();
        f.persist(&dir, "f").unwrap();
        assert_eq!(std::fs::read(d.path().join("f")).unwrap(), b"new bytes");
        assert!(tmp.entries().unwrap().is_empty());
        // A rename that fails (into a directory held by a directory) leaves
        // the target as it was and removes the temporary file.
        std::fs::create_dir_all(d.path().join("full/x")).unwrap();
        let mut f = tmp.new_file("t3", 0o600).unwrap();
        f.write_all(b"z").unwrap();
        assert!(f.persist(&dir, "full").is_err());
        assert!(d.path().join("full/x").is_dir());
        assert!(tmp.entries().unwrap().is_empty());
    }

    #[test]
    fn trees_are_removed_without_following_links() {
        let (d, outside, dir) = setup();
        std::fs::create_dir_all(d.path().join("t/a/b")).unwrap();
        std::fs::write(d.path().join("t/a/b/f"), "x").unwrap();
        symlink(outside.path(), d.path().join("t/a/out")).unwrap();
        assert_eq!(dir.remove_tree("t").unwrap(), 2);
        assert!(!d.path().join("t").exists());
        assert!(outside.path().join("secret").exists());
    }

    #[test]
    fn bounded_reads() {
        let (d, _o, dir) = setup();
        std::fs::write(d.path().join("f"), vec![1u8; 100]).unwrap();
        assert_eq!(dir.read_file("f", 100).unwrap().unwrap().len(), 100);
        assert!(matches!(
            dir.read_file("f", 99),
            Err(Error::TooLarge { size: 100, .. })
        ));
    }
}
