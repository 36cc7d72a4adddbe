//! The file tools' boundary. hel opens the project directory once
//! ([`ProjectDir`], kept from start to exit) and every file tool resolves
//! paths beneath that descriptor, one component at a time, never through
//! the path from `/`:
//!
//! - The model's path is first normalized lexically, relative to the
//!   directory hel was started in (`..` and `.` removed; an absolute path
//!   must name the project's canonical path). Escaping the project is
//!   refused; a path naming `.hel/` (the root's, from wherever hel
//!   started) is [`Target::Store`] (only spill lookups may use it); a
//!   path with a `.hel` component further down (a nested project's store,
//!   any case) is refused, named or reached through a link.
//! - Directories are opened with `openat2(RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS)` relative to the project descriptor, or, where
//!   that meets a symbolic link or openat2 is missing (ENOSYS), by a walk
//!   opening each component with `O_NOFOLLOW`. A symbolic link is read from
//!   the descriptor that was opened (`readlinkat`) and spliced into the
//!   logical path, which is checked again: links inside the project are
//!   followed, links leading outside it or into `.hel/` are refused.
//! - The final component is looked at without following it (`statat`,
//!   then `O_NOFOLLOW`) and checked on the opened file (`fstat`): a regular
//!   file only, the same inode as resolved, opened non-blocking, so a FIFO
//!   or device never blocks (nor is opened) and a concurrent swap is
//!   detected.
//! - Writes go to a temporary file in the resolved directory, renamed over
//!   the target: a swap of the target to a symbolic link between check and
//!   rename replaces the link, never writes through it.
//!
//! What stays possible: a concurrent process may move a directory hel
//! already holds; hel then works inside that directory wherever it went,
//! which only a process allowed to write there could arrange.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use hel_store::STORE_DIR;
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, Stat};
use rustix::io::Errno;

use super::cancel::{Cancel, Cancelled};
use super::gitdirs;
use super::store_name::is_store_name;

/// Symbolic links followed in one resolution (the kernel's MAXSYMLINKS).
const MAX_LINKS: usize = 40;

/// The project directory, held open.
#[derive(Debug)]
pub(crate) struct ProjectDir {
    fd: OwnedFd,
    /// Canonical; for messages and to recognize absolute paths.
    path: PathBuf,
    /// Where relative paths start: the directory hel was started in, as
    /// components below the project (empty: the project itself).
    base: Vec<OsString>,
    /// Cleared when openat2 turns out to be unavailable (ENOSYS).
    openat2: AtomicBool,
    /// `--allow-git-write`: writes into git directories but
    /// [`gitdirs::KEPT`] (see [`ProjectDir::check_git`]).
    git_writes: bool,
}

/// Where a path leads.
#[derive(Debug)]
pub(crate) enum Target {
    /// Beneath the project and outside `.hel/`.
    Entry(Entry),
    /// A path the model gave under `.hel/` (relative to the project, `..`
    /// removed); only spill lookups may use it.
    Store(String),
}

/// A resolved place beneath the project.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The directory that holds it (for the project itself, the project).
    pub parent: OwnedFd,
    /// Its name in `parent`; None for the project directory itself.
    pub name: Option<OsString>,
    /// Its path relative to the project, symbolic links resolved.
    pub rel: PathBuf,
    /// What is there (never a symbolic link); None: nothing yet.
    pub stat: Option<Stat>,
}

/// A file opened for reading.
#[derive(Debug)]
pub(crate) enum Opened {
    File { file: File, entry: Entry },
    Store(String),
}

/// Why a path beneath the project could not be used. The messages are
/// for the model: they name the path as it gave it.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("empty path")]
    Empty,
    #[error("{path} is outside the project ({}): refused", project.display())]
    Outside { path: String, project: PathBuf },
    #[error("{path} leads outside the project ({}) through a symbolic link: refused", project.display())]
    LinkOutside { path: String, project: PathBuf },
    #[error("{path} leads into {STORE_DIR}/, which tools may not use: refused")]
    IntoStore { path: String },
    #[error("{path} is inside {STORE_DIR}/: refused")]
    InStore { path: String },
    /// A `.hel` component below the project's root: another project's
    /// session store, closed to tools as the root's is.
    #[error("{path} leads into a nested project's {STORE_DIR}/ (its session store), which tools may not use: refused")]
    NestedStore { path: String },
    #[error("{path} is in a git directory, which tools may not write (git runs what it holds outside the sandbox): refused; the user can allow commits with --allow-git-write")]
    InGit { path: String },
    #[error("{path} is git's configuration, hooks or the place of a git directory, which stay read-only even with --allow-git-write: refused")]
    GitKept { path: String },
    #[error("{path}: too many levels of symbolic links")]
    TooManyLinks { path: String },
    /// The project directory itself where a file was wanted; `then` says
    /// what to do instead.
    #[error("{path} is the project directory: {then}")]
    ProjectDir { path: String, then: &'static str },
    #[error("{path} is a directory: {then}")]
    Directory { path: String, then: &'static str },
    #[error("{path} is {kind}, not a regular file: refused")]
    NotRegular { path: String, kind: &'static str },
    #[error("{path} changed while it was being opened: try again")]
    Changed { path: String },
    #[error("{path}: cannot create a temporary file beside it: {source}")]
    TempFile {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

impl PathError {
    fn io(path: &str, e: impl Into<std::io::Error>) -> PathError {
        PathError::Io {
            path: path.to_owned(),
            source: e.into(),
        }
    }
}

/// Why a regular file could not be opened at a name.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// Something other than a regular file is there.
    NotRegular,
    /// The name changed between resolving and opening.
    Changed,
    Io(std::io::Error),
}

enum Walked {
    Dir(OwnedFd),
    /// Component `at` is a symbolic link to `target`.
    Link {
        at: usize,
        target: Vec<u8>,
    },
}

fn io(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

/// What kind of file a mode describes, for messages.
pub(crate) fn kind_name(st: &Stat) -> &'static str {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "of an unknown kind",
    }
}

pub(crate) fn is_regular(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
}

pub(crate) fn is_dir(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::Directory
}

fn join(comps: &[OsString]) -> PathBuf {
    comps.iter().collect()
}

/// Open the regular file `name` in `dir` for reading: never following a
/// symbolic link, never blocking (FIFOs, devices) and never opening
/// anything but a regular file. With `expect`, the opened file must be
/// that inode.
pub(crate) fn open_regular_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    expect: Option<&Stat>,
) -> Result<File, OpenError> {
    // A stat first, so a device is not even opened.
    let before =
        rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| OpenError::Io(io(e)))?;
    if !is_regular(&before) {
        return Err(if expect.is_some() {
            OpenError::Changed
        } else {
            OpenError::NotRegular
        });
    }
    let fd = hel_fs::at::open_read(dir, name).map_err(|e| match e {
        Errno::LOOP | Errno::NOENT => OpenError::Changed,
        e => OpenError::Io(io(e)),
    })?;
    let st = rfs::fstat(&fd).map_err(|e| OpenError::Io(io(e)))?;
    let want = expect.unwrap_or(&before);
    if !is_regular(&st) || st.st_dev != want.st_dev || st.st_ino != want.st_ino {
        return Err(OpenError::Changed);
    }
    Ok(File::from(fd))
}

impl ProjectDir {
    /// Open the project directory. `path` must be canonical.
    pub(crate) fn open(path: &Path) -> std::io::Result<ProjectDir> {
        let fd = hel_fs::at::open_dir_following(path).map_err(io)?;
        Ok(ProjectDir {
            fd,
            path: path.to_owned(),
            base: Vec::new(),
            openat2: AtomicBool::new(true),
            git_writes: false,
        })
    }

    /// The same, with relative paths taken from `cwd` (a directory below
    /// the project, as components: [`crate::project::Project::cwd_in_root`]).
    pub(crate) fn working_in(mut self, cwd: &Path) -> ProjectDir {
        self.base = cwd
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_owned()),
                _ => None,
            })
            .collect();
        self
    }

    /// `rel` (a path relative to the project, as [`Entry::rel`]) as the
    /// model names it: relative to the directory hel was started in.
    pub(crate) fn shown(&self, rel: &Path) -> String {
        let parts: Vec<&OsStr> = rel.iter().collect();
        let common = self
            .base
            .iter()
            .zip(&parts)
            .take_while(|(a, b)| a.as_os_str() == **b)
            .count();
        let mut out = PathBuf::new();
        for _ in common..self.base.len() {
            out.push("..");
        }
        for p in &parts[common..] {
            out.push(p);
        }
        if out.as_os_str().is_empty() {
            ".".into()
        } else {
            display(&out)
        }
    }

    /// The same, letting writes into git directories but
    /// [`gitdirs::KEPT`] through (`--allow-git-write`).
    pub(crate) fn allowing_git_writes(mut self, allow: bool) -> ProjectDir {
        self.git_writes = allow;
        self
    }

    /// Whether `--allow-git-write` is on.
    pub(crate) fn git_writes(&self) -> bool {
        self.git_writes
    }

    /// Refuse a write at `rel` (components below the project) that lands
    /// in a git directory: beneath a component named `.git` (which may not
    /// exist yet), or beneath any directory on the way that is one (the
    /// project included); a `.git` itself, file or directory, is never
    /// written. With `--allow-git-write` only [`gitdirs::KEPT`] is refused,
    /// and all of a git directory that [`gitdirs::stays_read_only`]; the
    /// outermost git directory on the way decides. The same rules as the
    /// sandbox's mounts (see [`gitdirs`]).
    pub(crate) fn check_git(&self, rel: &[OsString], path: &str) -> Result<(), PathError> {
        for i in 0..=rel.len() {
            let (at, below) = rel.split_at(i);
            let named = at.last().is_some_and(|n| gitdirs::is_git_name(n));
            let dir = match self.open_dirs(at, false) {
                Ok(Walked::Dir(fd)) => Some(fd),
                _ => None,
            };
            if !named && !dir.as_ref().is_some_and(|d| gitdirs::is_git_dir(d.as_fd())) {
                continue;
            }
            let path = path.to_owned();
            return match (below.first(), self.git_writes) {
                (Some(_), false) => Err(PathError::InGit { path }),
                (Some(first), true)
                    if !gitdirs::is_kept(first)
                        && dir.is_some_and(|d| !gitdirs::stays_read_only(d.as_fd())) =>
                {
                    Ok(())
                }
                _ => Err(PathError::GitKept { path }),
            };
        }
        Ok(())
    }

    /// The same, resolving only by the per-component walk (tests of the
    /// ENOSYS fallback).
    #[cfg(test)]
    pub(crate) fn open_without_openat2(path: &Path) -> std::io::Result<ProjectDir> {
        let d = Self::open(path)?;
        d.openat2.store(false, Ordering::Relaxed);
        Ok(d)
    }

    /// The project's root, canonical.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Where relative paths start (where hel was started), relative to
    /// the root.
    pub(crate) fn cwd_in_root(&self) -> PathBuf {
        join(&self.base)
    }

    /// Where relative paths start, as an absolute path.
    pub(crate) fn cwd(&self) -> PathBuf {
        let mut cwd = self.path.clone();
        cwd.extend(&self.base);
        cwd
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn outside(&self, path: &str) -> PathError {
        PathError::Outside {
            path: path.to_owned(),
            project: self.path.clone(),
        }
    }

    /// Strip the project's own path from absolute components.
    fn strip_project(&self, abs: Vec<OsString>) -> Option<Vec<OsString>> {
        let own: Vec<&OsStr> = self
            .path
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        if abs.len() < own.len() || abs.iter().zip(&own).any(|(a, b)| a.as_os_str() != *b) {
            return None;
        }
        Some(abs[own.len()..].to_vec())
    }

    /// `target` (a path as given, or a link's content) relative to the
    /// components `base`, lexically normalized. None when it escapes.
    fn lexical(&self, base: &[OsString], target: &Path) -> Option<Vec<OsString>> {
        let absolute = target.is_absolute();
        let mut out: Vec<OsString> = if absolute { Vec::new() } else { base.to_vec() };
        for c in target.components() {
            match c {
                Component::Normal(n) => out.push(n.to_owned()),
                Component::ParentDir => {
                    // `/..` is `/`; a relative path may not climb out.
                    if out.pop().is_none() && !absolute {
                        return None;
                    }
                }
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
        if absolute {
            self.strip_project(out)
        } else {
            Some(out)
        }
    }

    /// Resolve `path` (relative to the directory hel was started in, or
    /// absolute) beneath the project. Symbolic links are followed while
    /// they stay inside the project and out of `.hel/`; anything else is
    /// refused. With `create`, missing directories on the way are created
    /// (beneath the project).
    pub(crate) fn resolve(&self, path: &str, create: bool) -> Result<Target, PathError> {
        self.resolve_from(&self.base, path, create)
    }

    /// [`ProjectDir::resolve`] with `path` relative to the project's root
    /// (the project instructions).
    pub(crate) fn resolve_in_root(&self, path: &str) -> Result<Target, PathError> {
        self.resolve_from(&[], path, false)
    }

    fn resolve_from(
        &self,
        base: &[OsString],
        path: &str,
        create: bool,
    ) -> Result<Target, PathError> {
        if path.is_empty() {
            return Err(PathError::Empty);
        }
        // `.hel/…` names the root's store from any directory (the names
        // spill files have in the conversation).
        let from_root = self.lexical(&[], Path::new(path));
        if let Some(names) = from_root.filter(|l| l.first().is_some_and(|c| is_store_name(c))) {
            return Ok(Target::Store(join(&names).to_string_lossy().into_owned()));
        }
        let mut logical = self
            .lexical(base, Path::new(path))
            .ok_or_else(|| self.outside(path))?;
        if logical.first().is_some_and(|c| is_store_name(c)) {
            return Ok(Target::Store(join(&logical).to_string_lossy().into_owned()));
        }
        let mut links = 0;
        loop {
            if logical.first().is_some_and(|c| is_store_name(c)) {
                return Err(PathError::IntoStore {
                    path: path.to_owned(),
                });
            }
            // A nested project's store, named or reached through a link.
            if logical.iter().skip(1).any(|c| is_store_name(c)) {
                return Err(PathError::NestedStore {
                    path: path.to_owned(),
                });
            }
            let Some((name, dirs)) = logical.split_last() else {
                let st = rfs::fstat(&self.fd).map_err(|e| PathError::io(path, e))?;
                return Ok(Target::Entry(Entry {
                    parent: self.dup().map_err(|e| PathError::io(path, e))?,
                    name: None,
                    rel: PathBuf::new(),
                    stat: Some(st),
                }));
            };
            if create {
                // Before any directory on the way is made.
                self.check_git(&logical, path)?;
            }
            let (splice_at, target) = match self
                .open_dirs(dirs, create)
                .map_err(|e| PathError::io(path, e))?
            {
                Walked::Link { at, target } => (at, target),
                Walked::Dir(parent) => {
                    match rfs::statat(&parent, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                            let t = rfs::readlinkat(&parent, name.as_os_str(), Vec::new())
                                .map_err(|e| PathError::io(path, e))?;
                            (logical.len() - 1, t.into_bytes())
                        }
                        Ok(st) => {
                            return Ok(Target::Entry(Entry {
                                parent,
                                name: Some(name.clone()),
                                rel: join(&logical),
                                stat: Some(st),
                            }))
                        }
                        Err(Errno::NOENT) => {
                            return Ok(Target::Entry(Entry {
                                parent,
                                name: Some(name.clone()),
                                rel: join(&logical),
                                stat: None,
                            }))
                        }
                        Err(e) => return Err(PathError::io(path, e)),
                    }
                }
            };
            links += 1;
            if links > MAX_LINKS {
                return Err(PathError::TooManyLinks {
                    path: path.to_owned(),
                });
            }
            let target = Path::new(OsStr::from_bytes(&target));
            let mut next = self.lexical(&logical[..splice_at], target).ok_or_else(|| {
                PathError::LinkOutside {
                    path: path.to_owned(),
                    project: self.path.clone(),
                }
            })?;
            next.extend_from_slice(&logical[splice_at + 1..]);
            logical = next;
        }
    }

    /// [`ProjectDir::resolve`], refusing a path into `.hel/`.
    pub(crate) fn resolve_entry(&self, path: &str, create: bool) -> Result<Entry, PathError> {
        match self.resolve(path, create)? {
            Target::Entry(e) => Ok(e),
            Target::Store(_) => Err(PathError::InStore {
                path: path.to_owned(),
            }),
        }
    }

    fn dup(&self) -> std::io::Result<OwnedFd> {
        rustix::io::fcntl_dupfd_cloexec(&self.fd, 0).map_err(io)
    }

    /// Open the directory `dirs` (components below the project, no `..`),
    /// or report the first symbolic link on the way.
    fn open_dirs(&self, dirs: &[OsString], create: bool) -> Result<Walked, Errno> {
        if dirs.is_empty() {
            return rustix::io::fcntl_dupfd_cloexec(&self.fd, 0).map(Walked::Dir);
        }
        if self.openat2.load(Ordering::Relaxed) {
            match hel_fs::at::dir_handle_beneath(&self.fd, join(dirs)) {
                Ok(fd) => return Ok(Walked::Dir(fd)),
                Err(Errno::NOSYS) => self.openat2.store(false, Ordering::Relaxed),
                // A link on the way (ELOOP), a racing rename (EAGAIN), a
                // filter refusing the call (EPERM), a missing directory to
                // create: the walk finds out which.
                Err(Errno::LOOP | Errno::AGAIN | Errno::XDEV | Errno::PERM) => {}
                Err(Errno::NOENT) if create => {}
                Err(e) => return Err(e),
            }
        }
        self.walk(dirs, create)
    }

    /// Open each component with `O_NOFOLLOW` relative to the one before.
    fn walk(&self, dirs: &[OsString], create: bool) -> Result<Walked, Errno> {
        let mut cur = rustix::io::fcntl_dupfd_cloexec(&self.fd, 0)?;
        for (i, name) in dirs.iter().enumerate() {
            let mut made = false;
            loop {
                match hel_fs::at::open_handle(&cur, name.as_os_str()) {
                    Ok(fd) => {
                        let st = rfs::fstat(&fd)?;
                        match FileType::from_raw_mode(st.st_mode) {
                            FileType::Directory => {
                                cur = fd;
                                break;
                            }
                            FileType::Symlink => {
                                // The link that was opened, not whatever the name holds now.
                                let t = rfs::readlinkat(&fd, "", Vec::new())?;
                                return Ok(Walked::Link {
                                    at: i,
                                    target: t.into_bytes(),
                                });
                            }
                            _ => return Err(Errno::NOTDIR),
                        }
                    }
                    Err(Errno::NOENT) if create && !made => {
                        match rfs::mkdirat(&cur, name.as_os_str(), Mode::from(0o777)) {
                            Ok(()) | Err(Errno::EXIST) => made = true,
                            Err(e) => return Err(e),
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(Walked::Dir(cur))
    }

    /// Open `path` for reading: a regular file beneath the project (or a
    /// `.hel/` path for a spill lookup). Refuses directories, FIFOs,
    /// devices and sockets without blocking on them.
    pub(crate) fn open_file(&self, path: &str) -> Result<Opened, PathError> {
        let mut attempts = 0;
        loop {
            let entry = match self.resolve(path, false)? {
                Target::Store(s) => return Ok(Opened::Store(s)),
                Target::Entry(e) => e,
            };
            let (Some(name), Some(st)) = (&entry.name, &entry.stat) else {
                return Err(match entry.name {
                    None => PathError::ProjectDir {
                        path: path.to_owned(),
                        then: "use glob to list it",
                    },
                    Some(_) => PathError::io(path, Errno::NOENT),
                });
            };
            if is_dir(st) {
                return Err(PathError::Directory {
                    path: path.to_owned(),
                    then: "use glob to list it",
                });
            }
            if !is_regular(st) {
                return Err(PathError::NotRegular {
                    path: path.to_owned(),
                    kind: kind_name(st),
                });
            }
            match open_regular_at(entry.parent.as_fd(), name, Some(st)) {
                Ok(file) => return Ok(Opened::File { file, entry }),
                Err(OpenError::Changed) if attempts < 2 => attempts += 1,
                Err(OpenError::Changed | OpenError::NotRegular) => {
                    return Err(PathError::Changed {
                        path: path.to_owned(),
                    })
                }
                Err(OpenError::Io(e)) => return Err(PathError::io(path, e)),
            }
        }
    }

    /// Replace the file at `entry` whole: `fill` writes the new content to a
    /// temporary file in the same directory, which is then renamed over the
    /// name, so no reader ever sees a torn file and a name swapped to a
    /// symbolic link meanwhile is replaced, not written through. The
    /// existing file's permission bits (and owner, where hel may set it)
    /// are kept; a new file gets 0666 less the umask. Refuses directories
    /// and anything else that is not a regular file. The rename happens
    /// only while `cancel` is not cancelled: a cancelled write changes
    /// nothing.
    ///
    /// (A temporary file made by path, as tempfile does, could land
    /// outside the project if a directory on the way were swapped for a
    /// link: this one is made beneath the descriptor `entry` holds.)
    pub(crate) fn replace<E: From<PathError>>(
        &self,
        entry: &Entry,
        path: &str,
        cancel: &Cancel,
        fill: impl FnOnce(&File) -> Result<(), E>,
    ) -> Result<(), E> {
        let Some(name) = &entry.name else {
            return Err(PathError::ProjectDir {
                path: path.to_owned(),
                then: "refused",
            }
            .into());
        };
        let rel: Vec<OsString> = entry
            .rel
            .components()
            .map(|c| c.as_os_str().to_owned())
            .collect();
        self.check_git(&rel, path)?;
        if let Some(st) = &entry.stat {
            if is_dir(st) {
                return Err(PathError::Directory {
                    path: path.to_owned(),
                    then: "refused",
                }
                .into());
            }
            if !is_regular(st) {
                return Err(PathError::NotRegular {
                    path: path.to_owned(),
                    kind: kind_name(st),
                }
                .into());
            }
        }
        // The new file is written through hel-fs's one atomic-write
        // primitive, beneath the descriptor `entry` holds: created `O_EXCL`
        // (a link in its place fails the create), synced, renamed over the
        // name (a link there is replaced, never followed), the directory
        // synced; dropped on the way, it is removed.
        let Some(name) = name.to_str() else {
            return Err(PathError::io(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the file's name is not UTF-8: refused",
                ),
            )
            .into());
        };
        // `entry.parent` may be a path-only handle, which cannot be synced:
        // the directory it names, opened for real (a directory hel may
        // write but not read is written through the handle, unsynced).
        let (parent, synced) = match hel_fs::at::open_dir(&entry.parent, ".") {
            Ok(fd) => (fd, true),
            Err(Errno::ACCESS) => (
                entry
                    .parent
                    .try_clone()
                    .map_err(|e| PathError::io(path, e))?,
                false,
            ),
            Err(e) => return Err(PathError::io(path, e).into()),
        };
        // (Its path is for messages only.)
        let parent =
            hel_fs::Dir::from_fd(parent, entry.rel.parent().unwrap_or(&entry.rel).to_owned());
        let tmp = format!("{WRITE_TMP_PREFIX}{}.tmp", uuid::Uuid::new_v4().simple());
        let new = parent
            .new_file(&tmp, 0o666)
            .map_err(|e| PathError::TempFile {
                path: path.to_owned(),
                source: e.into(),
            })?;
        let file = new.file();
        if let Some(st) = &entry.stat {
            rfs::fchmod(file, Mode::from_raw_mode(st.st_mode & 0o777))
                .map_err(|e| PathError::io(path, e))?;
            // Keeping the owner only works for root; elsewhere the new
            // file is ours, as any editor's would be.
            if rustix::process::geteuid().is_root() {
                let _ = rfs::fchown(
                    file,
                    Some(rfs::Uid::from_raw(st.st_uid)),
                    Some(rfs::Gid::from_raw(st.st_gid)),
                );
            }
        }
        fill(file)?;
        new.sync().map_err(|e| PathError::io(path, e))?;
        cancel
            .commit(|| new.persist(&parent, name))
            .map_err(PathError::from)?
            .map_err(|e| PathError::io(path, e))?;
        if synced {
            parent.sync().map_err(|e| PathError::io(path, e))?;
        }
        Ok(())
    }
}

/// The name prefix of the temporary files writes go through.
pub(crate) const WRITE_TMP_PREFIX: &str = ".hel-write-";

/// `rel` for messages and listings.
pub(crate) fn display(rel: &Path) -> String {
    rel.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::symlink;
    use std::os::unix::fs::PermissionsExt;

    struct Fixture {
        _dir: tempfile::TempDir,
        _out: tempfile::TempDir,
        p: PathBuf,
        outside: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let p = dir.path().canonicalize().unwrap();
        let outside = out.path().canonicalize().unwrap();
        std::fs::write(outside.join("secret"), "OUTSIDE\n").unwrap();
        std::fs::create_dir_all(p.join(".hel/refs/sessions")).unwrap();
        std::fs::write(p.join(".hel/refs/sessions/s1"), "REF\n").unwrap();
        std::fs::create_dir(p.join("src")).unwrap();
        std::fs::write(p.join("src/a.rs"), "fn a() {}\n").unwrap();
        Fixture {
            _dir: dir,
            _out: out,
            p,
            outside,
        }
    }

    fn both(p: &Path) -> [ProjectDir; 2] {
        [
            ProjectDir::open(p).unwrap(),
            ProjectDir::open_without_openat2(p).unwrap(),
        ]
    }

    /// A refusal's message, for assertions on what it says.
    #[derive(Debug)]
    struct Refused(String);

    impl Refused {
        fn contains(&self, what: &str) -> bool {
            self.0.contains(what)
        }
    }

    impl std::fmt::Display for Refused {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl From<PathError> for Refused {
        fn from(e: PathError) -> Refused {
            Refused(e.to_string())
        }
    }

    /// The file's text, or why not.
    fn read(d: &ProjectDir, path: &str) -> Result<String, Refused> {
        match d.open_file(path)? {
            Opened::File { mut file, .. } => {
                let mut s = String::new();
                file.read_to_string(&mut s).unwrap();
                Ok(s)
            }
            Opened::Store(s) => Ok(format!("STORE {s}")),
        }
    }

    /// Write the file, or why not.
    fn write(d: &ProjectDir, path: &str, text: &str) -> Result<(), Refused> {
        let entry = match d.resolve(path, true)? {
            Target::Store(_) => return Err(Refused("store".into())),
            Target::Entry(e) => e,
        };
        d.replace(&entry, path, &Cancel::default(), |mut f| {
            f.write_all(text.as_bytes())
                .map_err(|e| PathError::io(path, e))
        })?;
        Ok(())
    }

    #[test]
    fn paths_start_where_hel_started_and_stay_in_the_root() {
        let f = fixture();
        let p = &f.p;
        std::fs::create_dir_all(p.join("src/deep")).unwrap();
        std::fs::write(p.join("src/deep/b.rs"), "fn b() {}\n").unwrap();
        std::fs::write(p.join("top.txt"), "top\n").unwrap();
        symlink("../top.txt", p.join("src/up")).unwrap();
        for d in both(p) {
            let d = d.working_in(Path::new("src"));
            assert_eq!(d.cwd(), p.join("src"));
            assert_eq!(read(&d, "a.rs").unwrap(), "fn a() {}\n");
            assert_eq!(read(&d, "../top.txt").unwrap(), "top\n");
            assert_eq!(read(&d, "up").unwrap(), "top\n");
            assert_eq!(
                read(&d, &p.join("top.txt").display().to_string()).unwrap(),
                "top\n"
            );
            assert!(read(&d, "../../x")
                .unwrap_err()
                .contains("outside the project"));
            // `.hel/` is the root's, from anywhere (spill names).
            assert_eq!(read(&d, ".hel/x").unwrap(), "STORE .hel/x");
            assert_eq!(read(&d, "../.hel/x").unwrap(), "STORE .hel/x");
            // Context files name the root's.
            match d.resolve_in_root("top.txt").unwrap() {
                Target::Entry(e) => assert_eq!(e.rel, Path::new("top.txt")),
                Target::Store(s) => panic!("{s}"),
            }
            write(&d, "deep/new.rs", "new").unwrap();
            assert_eq!(
                std::fs::read_to_string(p.join("src/deep/new.rs")).unwrap(),
                "new"
            );
            // Shown as the model names them: from where hel started.
            assert_eq!(d.shown(Path::new("src/deep/b.rs")), "deep/b.rs");
            assert_eq!(d.shown(Path::new("top.txt")), "../top.txt");
            assert_eq!(d.shown(Path::new("src")), ".");
            assert_eq!(d.shown(Path::new("srcx/a")), "../srcx/a");
        }
    }

    /// A nested project's `.hel/` is closed as the root's is: named from
    /// anywhere, in any case, or reached through a link, for reading and
    /// for writing (nothing is created on the way).
    #[test]
    fn nested_stores_are_refused() {
        let f = fixture();
        let p = &f.p;
        std::fs::create_dir_all(p.join("vendor/lib/.hel/refs")).unwrap();
        std::fs::write(p.join("vendor/lib/.hel/refs/s"), "NESTED\n").unwrap();
        symlink("vendor/lib/.hel", p.join("nested")).unwrap();
        symlink(".hel/refs/s", p.join("vendor/lib/ref")).unwrap();
        for d in both(p) {
            for bad in [
                "vendor/lib/.hel/refs/s",
                "vendor/lib/.HEL/refs/s",
                "./vendor/../vendor/lib/.hel/refs/s",
                "nested/refs/s",
                "vendor/lib/ref",
            ] {
                let e = read(&d, bad).unwrap_err();
                assert!(e.contains("a nested project's .hel/"), "{bad}: {e}");
                let e = write(&d, bad, "x").unwrap_err();
                assert!(e.contains("a nested project's .hel/"), "{bad}: {e}");
            }
            let e = write(&d, "src/.hel/new/x", "x").unwrap_err();
            assert!(e.contains("a nested project's .hel/"), "{e}");
            assert!(!p.join("src/.hel").exists());
            let d = d.working_in(Path::new("vendor/lib"));
            assert!(read(&d, "ref").unwrap_err().contains("nested project"));
        }
        assert_eq!(
            std::fs::read_to_string(p.join("vendor/lib/.hel/refs/s")).unwrap(),
            "NESTED\n"
        );
    }

    #[test]
    fn boundary_cases() {
        let f = fixture();
        let p = &f.p;
        symlink(&f.outside, p.join("out")).unwrap();
        symlink(f.outside.join("secret"), p.join("out-file")).unwrap();
        symlink("src", p.join("in")).unwrap();
        symlink(p.join("src/a.rs"), p.join("abs-in")).unwrap();
        symlink(".hel/refs/sessions/s1", p.join("ref")).unwrap();
        symlink(".HEL", p.join("ref2")).unwrap();
        symlink("src/../../x", p.join("climb")).unwrap();
        symlink("loop", p.join("loop")).unwrap();
        symlink(f.outside.join("new"), p.join("dangling-out")).unwrap();
        symlink(".hel/new", p.join("dangling-hel")).unwrap();
        symlink("src/new.rs", p.join("dangling-in")).unwrap();
        for d in both(p) {
            assert_eq!(read(&d, "src/a.rs").unwrap(), "fn a() {}\n");
            assert_eq!(read(&d, "./src/../src/a.rs").unwrap(), "fn a() {}\n");
            assert_eq!(
                read(&d, &p.join("src/a.rs").display().to_string()).unwrap(),
                "fn a() {}\n"
            );
            assert_eq!(read(&d, "in/a.rs").unwrap(), "fn a() {}\n");
            assert_eq!(read(&d, "abs-in").unwrap(), "fn a() {}\n");
            for bad in ["../x", "/etc/passwd", "src/../../x"] {
                assert!(
                    read(&d, bad).unwrap_err().contains("outside the project"),
                    "{bad}"
                );
            }
            for bad in ["out/secret", "out-file", "climb"] {
                let e = read(&d, bad).unwrap_err();
                assert!(e.contains("outside the project"), "{bad}: {e}");
            }
            for bad in ["ref", "ref2/refs/sessions/s1"] {
                assert!(read(&d, bad).unwrap_err().contains(".hel"), "{bad}");
            }
            assert_eq!(
                read(&d, "src/../.hel/refs/sessions/s1").unwrap(),
                "STORE .hel/refs/sessions/s1"
            );
            assert!(read(&d, "loop").unwrap_err().contains("too many levels"));
            assert!(read(&d, "src").unwrap_err().contains("is a directory"));
            assert!(read(&d, "nope").unwrap_err().contains("No such file"));
            // Writes: dangling links may not create anything outside or in .hel.
            assert!(write(&d, "dangling-out", "x")
                .unwrap_err()
                .contains("outside"));
            assert!(write(&d, "dangling-hel", "x").unwrap_err().contains(".hel"));
            assert!(write(&d, "out/new", "x").unwrap_err().contains("outside"));
            assert!(write(&d, "ref", "x").unwrap_err().contains(".hel"));
        }
        assert!(!f.outside.join("new").exists());
        assert!(!p.join(".hel/new").exists());
        assert_eq!(
            std::fs::read_to_string(p.join(".hel/refs/sessions/s1")).unwrap(),
            "REF\n"
        );
        let d = ProjectDir::open(p).unwrap();
        // A dangling link inside creates its target; the link stays.
        write(&d, "dangling-in", "new\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(p.join("src/new.rs")).unwrap(),
            "new\n"
        );
        assert!(p
            .join("dangling-in")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink());
        // A link to a file inside: written through, the link stays.
        write(&d, "abs-in", "changed\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(p.join("src/a.rs")).unwrap(),
            "changed\n"
        );
        assert!(p
            .join("abs-in")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink());
        // Directories are created beneath the project, through links inside.
        write(&d, "in/deep/er/f.txt", "x").unwrap();
        assert!(p.join("src/deep/er/f.txt").is_file());
        let d2 = ProjectDir::open_without_openat2(p).unwrap();
        write(&d2, "walk/made/f.txt", "y").unwrap();
        assert!(p.join("walk/made/f.txt").is_file());
        // The root itself is a directory, not a file.
        assert!(write(&d, ".", "x")
            .unwrap_err()
            .contains("project directory"));
    }

    #[test]
    fn writes_into_git_directories_are_refused_and_only_partly_allowed() {
        let f = fixture();
        let p = &f.p;
        let git_dir = |at: &Path| {
            for d in ["objects", "refs", "hooks", "info"] {
                std::fs::create_dir_all(at.join(d)).unwrap();
            }
            std::fs::write(at.join("HEAD"), "ref: refs/heads/main\n").unwrap();
            std::fs::write(at.join("config"), "[core]\n").unwrap();
        };
        git_dir(&p.join(".git"));
        git_dir(&p.join("fixtures/bare.git"));
        std::fs::write(p.join("src/.git"), "gitdir: ../.git\n").unwrap();
        symlink(".git", p.join("git-link")).unwrap();
        for allow in [false, true] {
            for d in both(p) {
                let d = d.allowing_git_writes(allow);
                // Never: what git runs or is pointed by, a .git itself.
                for path in [
                    ".git/config",
                    ".git/hooks/pre-commit",
                    ".GIT/Hooks/post-checkout",
                    ".git/modules/x/config",
                    ".git/commondir",
                    "git-link/hooks/pre-commit",
                    "fixtures/bare.git/config",
                    "src/.git",
                    "new/.git",
                    ".git",
                ] {
                    let e = write(&d, path, "evil").unwrap_err();
                    assert!(e.contains("refused") && e.contains("git"), "{path}: {e}");
                }
                // Elsewhere in a git directory: only with --allow-git-write.
                for path in [
                    ".git/info/exclude",
                    "fixtures/bare.git/refs/x",
                    "git-link/COMMIT_EDITMSG",
                ] {
                    let got = write(&d, path, "ok\n");
                    assert_eq!(got.is_ok(), allow, "{path}: {got:?}");
                    if !allow {
                        assert!(got.unwrap_err().contains("--allow-git-write"));
                    }
                }
                // A new repository's .git (no hooks yet) stays closed, and
                // a refused write made no directory on the way.
                assert!(write(&d, "new/.git/objects/x", "x").is_err());
                assert!(!p.join("new").exists() && !p.join(".git/hooks/x").exists());
                assert!(write(&d, ".git/hooks/x/y", "x").is_err());
                assert!(!p.join(".git/hooks/x").exists());
                // Outside git directories, writes go on.
                write(&d, "src/b.rs", "fn b() {}\n").unwrap();
            }
        }
        assert_eq!(
            std::fs::read_to_string(p.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!p.join(".git/hooks/pre-commit").exists());
        assert_eq!(
            std::fs::read_to_string(p.join("src/.git")).unwrap(),
            "gitdir: ../.git\n"
        );
    }

    #[test]
    fn writes_replace_whole_and_keep_the_mode() {
        let f = fixture();
        let p = &f.p;
        std::fs::write(p.join("run.sh"), "old").unwrap();
        std::fs::set_permissions(p.join("run.sh"), std::fs::Permissions::from_mode(0o751)).unwrap();
        let d = ProjectDir::open(p).unwrap();
        write(&d, "run.sh", "new").unwrap();
        let m = std::fs::metadata(p.join("run.sh")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o751);
        assert_eq!(std::fs::read_to_string(p.join("run.sh")).unwrap(), "new");
        // A failing fill leaves the old file and no temporary file.
        let Target::Entry(e) = d.resolve("run.sh", false).unwrap() else {
            panic!()
        };
        let failing = |_: &File| Err(PathError::Empty);
        assert!(d
            .replace(&e, "run.sh", &Cancel::default(), failing)
            .is_err());
        // A cancelled write leaves the old file and no temporary file.
        let cancelled = Cancel::default();
        cancelled.cancel();
        let r = d.replace(&e, "run.sh", &cancelled, |mut f: &File| {
            f.write_all(b"late").map_err(|e| PathError::io("run.sh", e))
        });
        assert!(matches!(r, Err(PathError::Cancelled(_))), "{r:?}");
        assert_eq!(std::fs::read_to_string(p.join("run.sh")).unwrap(), "new");
        let names: Vec<_> = std::fs::read_dir(p)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            !names
                .iter()
                .any(|n| n.to_string_lossy().contains(".hel-write-")),
            "{names:?}"
        );
    }

    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let f = fixture();
        let p = &f.p;
        rustix::fs::mknodat(
            rustix::fs::CWD,
            p.join("pipe").as_path(),
            FileType::Fifo,
            Mode::from(0o644),
            0,
        )
        .unwrap();
        symlink("/dev/zero", p.join("zero")).unwrap();
        let d = ProjectDir::open(p).unwrap();
        assert!(read(&d, "pipe").unwrap_err().contains("a FIFO"));
        assert!(write(&d, "pipe", "x").unwrap_err().contains("a FIFO"));
        assert!(read(&d, "zero").unwrap_err().contains("outside"));
    }

    /// A thread keeps swapping a name between a file, a link outside and a
    /// link into .hel/ (and a directory with a link to one outside) while
    /// the library reads and writes it: nothing outside or in .hel/ is ever
    /// read or written.
    #[test]
    fn swaps_never_redirect_reads_or_writes() {
        let f = fixture();
        let p = f.p.clone();
        std::fs::write(p.join("flip"), "inside\n").unwrap();
        std::fs::create_dir(p.join("d")).unwrap();
        std::fs::write(p.join("d/secret"), "inside\n").unwrap();
        symlink(&f.outside, p.join("d-alt")).unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flipper = {
            let (p, outside, stop) = (p.clone(), f.outside.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let tmp = p.join(format!(".flip-{n}"));
                    let _ = match n % 3 {
                        0 => std::fs::write(&tmp, "inside\n"),
                        1 => symlink(outside.join("secret"), &tmp),
                        _ => symlink(".hel/refs/sessions/s1", &tmp),
                    };
                    let _ = std::fs::rename(&tmp, p.join("flip"));
                    let _ = rfs::renameat_with(
                        rfs::CWD,
                        p.join("d").as_path(),
                        rfs::CWD,
                        p.join("d-alt").as_path(),
                        rfs::RenameFlags::EXCHANGE,
                    );
                }
                n
            })
        };
        let dirs = both(&p);
        let (mut ok_reads, mut ok_writes) = (0, 0);
        for i in 0..3000 {
            let d = &dirs[i % 2];
            for path in ["flip", "d/secret"] {
                if let Ok(s) = read(d, path) {
                    assert_eq!(s, "inside\n", "{path}");
                    ok_reads += 1;
                }
            }
            if write(d, "flip", "inside\n").is_ok() {
                ok_writes += 1;
            }
            let _ = write(d, "d/secret", "inside\n");
            let _ = write(d, "d/new", "inside\n");
        }
        stop.store(true, Ordering::Relaxed);
        let flips = flipper.join().unwrap();
        assert!(flips > 100, "{flips}");
        assert!(ok_reads > 0 && ok_writes > 0, "{ok_reads} {ok_writes}");
        assert_eq!(
            std::fs::read_to_string(f.outside.join("secret")).unwrap(),
            "OUTSIDE\n"
        );
        let outside: Vec<_> = std::fs::read_dir(&f.outside)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(outside, [OsString::from("secret")]);
        assert_eq!(
            std::fs::read_to_string(p.join(".hel/refs/sessions/s1")).unwrap(),
            "REF\n"
        );
        let hel: Vec<_> = std::fs::read_dir(p.join(".hel/refs/sessions"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(hel, [OsString::from("s1")]);
    }
}
