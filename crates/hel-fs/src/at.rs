//! The opens themselves, on a raw descriptor and a name, for callers that
//! tell the errors apart themselves and hold no path at hand (the
//! workspace walk and restore, the file tools, the CLI's own files). The
//! flags of every open of an untrusted file are here and nowhere else;
//! [`crate::Dir`] uses them too.
//!
//! What every function promises, but where its doc says otherwise: a
//! symbolic link as the last component is never followed (an open fails
//! with `ELOOP`, or `ENOTDIR` with `O_DIRECTORY` on some kernels; a
//! handle names the link itself), a FIFO never blocks an open for reading
//! (`O_NONBLOCK`), a terminal never becomes the controlling one
//! (`O_NOCTTY`), and no descriptor survives an `exec` (`O_CLOEXEC`). The
//! `*_path` functions take a whole path and follow links in all but its
//! last component; the `*_following` ones follow every link and exist
//! only for paths the user named. Errors are the errno, unchanged unless
//! a function says otherwise.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;
use rustix::path::Arg;

/// A directory, for listing it or opening names in it.
pub const DIR: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// A file, for reading.
pub const READ: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// A file that must not exist yet (`O_EXCL`: a link in its place fails the
/// create instead of being followed), for writing.
pub const CREATE_NEW: OFlags = OFlags::WRONLY
    .union(OFlags::CREATE)
    .union(OFlags::EXCL)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// A handle (`O_PATH`): names a file without opening it for reading or
/// writing; the link itself when the name is a link.
const HANDLE: OFlags = OFlags::PATH.union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// How [`read_beneath`] and [`dir_handle_beneath`] resolve: no link in any
/// component, nothing outside the directory.
const BENEATH: ResolveFlags = ResolveFlags::NO_SYMLINKS
    .union(ResolveFlags::BENEATH)
    .union(ResolveFlags::NO_MAGICLINKS);

/// A file created when absent, never truncated, for reading and writing.
const RW: OFlags = OFlags::RDWR
    .union(OFlags::CREATE)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// The directory `name` in `dir`, not through a link.
pub fn open_dir(dir: impl AsFd, name: impl Arg) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(dir, name, DIR, Mode::empty())
}

/// `name` in `dir` opened for reading, not through a link, without
/// blocking; whatever it is (check it with `fstat`, or use
/// [`open_regular`]).
pub fn open_read(dir: impl AsFd, name: impl Arg) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(dir, name, READ, Mode::empty())
}

/// `name` in `dir` opened for reading as [`open_read`] does, with its
/// `fstat`; `None` when the opened file is not a regular file.
pub fn open_regular(dir: impl AsFd, name: impl Arg) -> Result<Option<(OwnedFd, Stat)>, Errno> {
    let fd = open_read(dir, name)?;
    let st = rustix::fs::fstat(&fd)?;
    Ok(is_regular(&st).then_some((fd, st)))
}

/// Create the file `name` in `dir` (with permission bits `mode`, less the
/// umask), which must not exist: `EEXIST` when anything, a link included,
/// is there.
pub fn create_new(dir: impl AsFd, name: impl Arg, mode: u32) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(dir, name, CREATE_NEW, Mode::from_raw_mode(mode))
}

/// Open `name` in `dir` for reading and writing, created (mode 0600) when
/// absent, never truncated, appending when `append`; whatever it is (the
/// caller checks it with `fstat`).
pub fn open_rw(dir: impl AsFd, name: impl Arg, append: bool) -> Result<OwnedFd, Errno> {
    let flags = if append { RW | OFlags::APPEND } else { RW };
    rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o600))
}

/// The `lstat` of `name` in `dir` (a link is described, not followed);
/// `None` when absent.
pub fn lstat(dir: impl AsFd, name: impl Arg) -> Result<Option<Stat>, Errno> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A handle (`O_PATH`) of `name` in `dir`: the link itself when `name` is
/// a link (check with `fstat`; `readlinkat(fd, "")` reads it). For
/// `fstat`, `readlinkat`, mount points and further opens relative to it;
/// it cannot be read or written.
pub fn open_handle(dir: impl AsFd, name: impl Arg) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(dir, name, HANDLE, Mode::empty())
}

/// A handle (`O_PATH`) of the directory `name` in `dir`, not through a
/// link: for mount points and further opens relative to it.
pub fn open_dir_handle(dir: impl AsFd, name: impl Arg) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(dir, name, HANDLE | OFlags::DIRECTORY, Mode::empty())
}

/// The file `rel` (a relative path, maybe of several components) beneath
/// `dir`, opened for reading as [`open_read`] does, in one `openat2` that
/// refuses a link in any component and any escape from `dir`. `ELOOP` or
/// `EXDEV` when one was met, `ENOSYS` where `openat2` is missing,
/// `EAGAIN` when a rename raced it: the caller then goes one component at
/// a time to find out which.
pub fn read_beneath(dir: impl AsFd, rel: impl Arg) -> Result<OwnedFd, Errno> {
    rustix::fs::openat2(dir, rel, READ, Mode::empty(), BENEATH)
}

/// A handle (`O_PATH`) of the directory `rel` beneath `dir`, resolved as
/// [`read_beneath`] resolves (same errors).
pub fn dir_handle_beneath(dir: impl AsFd, rel: impl Arg) -> Result<OwnedFd, Errno> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::openat2(dir, rel, flags, Mode::empty(), BENEATH)
}

/// Whether `st` describes a regular file.
pub fn is_regular(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
}

/// The directory `rel` (relative, `/`-separated, maybe empty: `dir`
/// itself, as a new descriptor) beneath `dir`, opened one component at a
/// time, never through a link. A component that is a link fails with
/// `ELOOP`, one that is something else but a directory with `ENOTDIR`
/// (whatever the kernel said: the component is looked at again), one that
/// is absent (or vanished meanwhile) with `ENOENT`.
pub fn open_dir_beneath(dir: impl AsFd, rel: &[u8]) -> Result<OwnedFd, Errno> {
    let mut cur = open_dir(dir, ".")?;
    if rel.is_empty() {
        return Ok(cur);
    }
    for name in rel.split(|&c| c == b'/') {
        cur = match open_dir(&cur, name) {
            Ok(fd) => fd,
            // O_NOFOLLOW refuses a link with ELOOP, but with O_DIRECTORY
            // some kernels say ENOTDIR: tell the two apart by lstat.
            Err(e @ (Errno::LOOP | Errno::NOTDIR)) => {
                return Err(match lstat(&cur, name) {
                    Ok(Some(st)) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                        Errno::LOOP
                    }
                    Ok(Some(_)) => Errno::NOTDIR,
                    // Gone since the open failed.
                    Ok(None) => Errno::NOENT,
                    Err(_) => e,
                });
            }
            Err(e) => return Err(e),
        };
    }
    Ok(cur)
}

/// The directory at `path`, following links in all but its last component
/// (a path the user gave, or one hel built under a directory it trusts).
pub fn open_dir_path(path: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::open(path, DIR, Mode::empty())
}

/// The file at `path` opened for reading as [`open_read`] does, following
/// links in all but its last component.
pub fn open_read_path(path: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::open(path, READ, Mode::empty())
}

/// The directory at `path`, following links, the last component's too:
/// only for a directory the user named (the project, `--cwd`), never for
/// one found inside a project or a store.
pub fn open_dir_following(path: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::open(path, DIR.difference(OFlags::NOFOLLOW), Mode::empty())
}

/// A handle (`O_PATH`) of the directory at `path`, following links as
/// [`open_dir_following`] does.
pub fn dir_handle_following(path: &Path) -> Result<OwnedFd, Errno> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::open(path, flags, Mode::empty())
}

/// The file at `path` opened for reading without blocking, following
/// links, the last component's too: only for a file the user keeps for
/// hel (a config file linked from a dotfiles repository), never for one
/// in a project or a store.
pub fn open_read_following(path: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::open(path, READ.difference(OFlags::NOFOLLOW), Mode::empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_are_refused_and_fifos_do_not_block() {
        let d = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("secret"), "s").unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::fs::write(d.path().join("a/f"), "f").unwrap();
        symlink(out.path(), d.path().join("a/ldir")).unwrap();
        symlink(out.path().join("secret"), d.path().join("a/lfile")).unwrap();
        let root = open_dir_path(d.path()).unwrap();
        rustix::fs::mknodat(&root, "fifo", FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();

        assert!(open_dir_beneath(&root, b"a/b").is_ok());
        assert!(open_dir_beneath(&root, b"").is_ok());
        assert_eq!(open_dir_beneath(&root, b"a/ldir").unwrap_err(), Errno::LOOP);
        assert_eq!(
            open_dir_beneath(&root, b"a/f/x").unwrap_err(),
            Errno::NOTDIR
        );
        assert_eq!(
            open_dir_beneath(&root, b"a/nope").unwrap_err(),
            Errno::NOENT
        );
        let a = open_dir(&root, "a").unwrap();
        assert_eq!(open_read(&a, "lfile").unwrap_err(), Errno::LOOP);
        assert!(open_regular(&a, "f").unwrap().is_some());
        assert!(open_regular(&a, "b").unwrap().is_none());
        assert_eq!(create_new(&a, "lfile", 0o600).unwrap_err(), Errno::EXIST);
        assert!(open_rw(&a, "lfile", true).is_err());
        assert!(open_dir_path(&d.path().join("a/ldir")).is_err());
        assert!(open_read_path(&d.path().join("a/lfile")).is_err());
        // Opening a FIFO with no writer returns at once (a blocking open
        // would never return), and it is no regular file.
        let fifo = d.path().join("fifo");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let root = open_dir_path(fifo.parent().unwrap()).unwrap();
            let regular = open_regular(&root, "fifo").map(|o| o.is_some());
            let by_path = open_read_path(&fifo).is_ok();
            let _ = tx.send((regular, by_path));
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(30));
        assert_eq!(
            got,
            Ok((Ok(false), true)),
            "opening a FIFO blocked or failed"
        );
        assert!(lstat(&root, "absent").unwrap().is_none());
        assert!(lstat(&a, "lfile").unwrap().is_some());
        assert_eq!(std::fs::read(out.path().join("secret")).unwrap(), b"s");
    }
}
