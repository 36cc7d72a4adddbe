//! The git directories that commands and the file tools may not write.
//!
//! git runs what a repository's git directory says outside the sandbox, at
//! the user's next `git commit` or `git status`: its hooks, and commands
//! its config names (`core.fsmonitor`, `core.hooksPath`, aliases, filters,
//! a pager). A `.git` file (a linked worktree, a submodule) and a git
//! directory's `commondir` say where that git directory is. So every git
//! directory found is read-only to commands (read-only bind mounts in the
//! sandbox's mount namespace: Landlock cannot carve a read-only part out of
//! a writable one) and to write_file and search_replace
//! (`ProjectDir::check_git` in paths.rs). `--allow-git-write` opens
//! them for commits but keeps [`KEPT`] read-only; a `.git` file is never
//! writable.
//!
//! The same walk finds every nested project's `.hel/` directory (any
//! depth, any case; not the project's own), which the sandbox hides as it
//! hides the project's own ([`Found::hidden`]).
//!
//! Found ([`find`]): every `.git` (directory, file or link) beneath the
//! project and the `--allow-write` directories, the git directory a `.git`
//! file or link leads to, each one's `commondir`, and any directory that is
//! itself a git directory (bare, or named otherwise); breadth first, within
//! [`MAX_ENTRIES`] directory entries and [`MAX_GIT_DIRS`] git directories.

use std::collections::{BTreeSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType};

use hel_sandbox::{FileId, GitMount, Hidden};

/// The name of a repository's git directory or of the file that points
/// to it.
pub(crate) const DOT_GIT: &str = ".git";

/// What stays read-only in a git directory even with `--allow-git-write`:
/// what git runs or takes its configuration from (`modules/` and
/// `worktrees/` hold the git directories of submodules and linked
/// worktrees, with their own config).
pub(crate) const KEPT: &[&str] = &[
    "config",
    "config.worktree",
    "hooks",
    "commondir",
    "modules",
    "worktrees",
];

/// A git directory without a `commondir` whose `config` or `hooks` is
/// missing stays wholly read-only even with `--allow-git-write`: a command
/// could otherwise create them.
const NEEDED: &[&str] = &["config", "hooks"];

/// Directory entries one search for git directories looks at, over all
/// roots (nested repositories further down are not found).
pub(crate) const MAX_ENTRIES: usize = 20_000;
/// Git directories one search protects at most.
pub(crate) const MAX_GIT_DIRS: usize = 64;
/// Nested projects' `.hel/` directories one search hides at most.
pub(crate) const MAX_STORES: usize = 64;
/// The largest `.git` file or `commondir` read.
const MAX_POINTER: u64 = 4096;

/// `.git`, compared without case (a case-folding file system opens
/// `.GIT` as `.git`).
pub(crate) fn is_git_name(name: &OsStr) -> bool {
    name.as_bytes().eq_ignore_ascii_case(DOT_GIT.as_bytes())
}

/// Whether `name` is one of [`KEPT`] (without case, as above).
pub(crate) fn is_kept(name: &OsStr) -> bool {
    KEPT.iter()
        .any(|k| name.as_bytes().eq_ignore_ascii_case(k.as_bytes()))
}

fn kind_at(dir: BorrowedFd<'_>, name: &str) -> Option<FileType> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| FileType::from_raw_mode(st.st_mode))
}

/// Whether the directory `dir` is a git directory, as git decides it: a
/// `HEAD`, and `objects/` and `refs/` or a `commondir` naming where they
/// are.
pub(crate) fn is_git_dir(dir: BorrowedFd<'_>) -> bool {
    looks_like_git_dir(|name| kind_at(dir, name))
}

fn looks_like_git_dir(kind: impl Fn(&str) -> Option<FileType>) -> bool {
    let head = matches!(
        kind("HEAD"),
        Some(FileType::RegularFile | FileType::Symlink)
    );
    let is = |name, want| kind(name) == Some(want);
    head && (is("objects", FileType::Directory) && is("refs", FileType::Directory)
        || is("commondir", FileType::RegularFile))
}

/// Whether a git directory without a `commondir` lacks what
/// `--allow-git-write` needs to keep read-only, or holds one of [`KEPT`]
/// as a symbolic link (a link cannot be bound read-only): it then stays
/// wholly read-only.
pub(crate) fn stays_read_only(dir: BorrowedFd<'_>) -> bool {
    let linked = KEPT
        .iter()
        .any(|k| kind_at(dir, k) == Some(FileType::Symlink));
    let own = kind_at(dir, "commondir").is_none();
    linked || own && NEEDED.iter().any(|n| kind_at(dir, n).is_none())
}

/// What a search found.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// Git directories, canonical.
    dirs: BTreeSet<PathBuf>,
    /// `.git` files, by canonical path.
    pointers: BTreeSet<PathBuf>,
    /// Nested projects' `.hel/` directories (any case; not the project's
    /// own), canonical: hidden from commands as the project's own is.
    stores: BTreeSet<PathBuf>,
    /// The search stopped at [`MAX_ENTRIES`] or [`MAX_GIT_DIRS`].
    pub truncated: bool,
}

/// The sandbox's bind mounts for the git directories in `roots` (the
/// directories commands may write, canonical; `project`'s `.hel/` is
/// skipped): [`find`], then [`Found::mounts`].
pub(crate) fn protected(roots: &[PathBuf], project: &Path, allow_writes: bool) -> Vec<GitMount> {
    find(roots, &project.join(hel_store::STORE_DIR)).mounts(allow_writes)
}

/// Search `roots` (canonical directories) for git directories, skipping
/// `store` (the project's `.hel/`). Never follows a symbolic link while
/// walking; what cannot be read is skipped. Bounded: see the module.
pub(crate) fn find(roots: &[PathBuf], store: &Path) -> Found {
    let mut found = Found::default();
    let mut budget = MAX_ENTRIES;
    let mut queue: VecDeque<PathBuf> = VecDeque::new();
    for root in roots {
        let Ok(fd) = hel_fs::at::open_dir_path(root) else {
            continue;
        };
        if is_git_dir(fd.as_fd()) {
            found.add_dir(root, store);
        } else {
            queue.push_back(root.clone());
        }
    }
    while let Some(dir) = queue.pop_front() {
        let Ok(fd) = hel_fs::at::open_dir_path(&dir) else {
            continue;
        };
        let Ok(list) = rustix::fs::Dir::read_from(&fd) else {
            continue;
        };
        let mut entries: Vec<(OsString, FileType)> = Vec::new();
        for e in list {
            let Ok(e) = e else { break };
            let name = OsStr::from_bytes(e.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            if budget == 0 {
                found.truncated = true;
                return found;
            }
            budget -= 1;
            let kind = match e.file_type() {
                FileType::Unknown => rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode)),
                k => k,
            };
            entries.push((name.to_owned(), kind));
        }
        let listed = |n: &str| entries.iter().find(|(e, _)| e == n).map(|(_, k)| *k);
        if looks_like_git_dir(listed) {
            // A bare repository, or a git directory not named `.git`.
            found.add_dir(&dir, store);
            continue;
        }
        for (name, kind) in entries {
            let path = dir.join(&name);
            if super::store_name::is_store_name(&name) {
                // Not entered: the project's own is hidden by the sandbox,
                // a nested project's is found here to be hidden too.
                let own = dir == store.parent().unwrap_or(store);
                if !own && kind == FileType::Directory {
                    found.add_store(path);
                }
                continue;
            }
            if is_git_name(&name) {
                found.add_dot_git(&path, kind, store);
            } else if kind == FileType::Directory {
                queue.push_back(path);
            }
        }
        if found.truncated {
            return found;
        }
    }
    found
}

/// The start of a small regular file (a `.git` file, a `commondir`),
/// without following a link or blocking on a FIFO.
fn read_small(path: &Path) -> Option<String> {
    let fd = hel_fs::at::open_read_path(path).ok()?;
    if !hel_fs::at::is_regular(&rustix::fs::fstat(&fd).ok()?) {
        return None;
    }
    let bytes = hel_fs::read_head(std::fs::File::from(fd), MAX_POINTER).ok()?;
    String::from_utf8(bytes).ok()
}

/// Where a path read from a file in `base` leads, canonical, if it is a
/// git directory.
fn git_dir_at(base: &Path, target: &str) -> Option<PathBuf> {
    let target = target.trim_end_matches(['\n', '\r']);
    if target.is_empty() || target.contains('\0') {
        return None;
    }
    let dir = base.join(target).canonicalize().ok()?;
    let fd = hel_fs::at::open_dir_path(&dir).ok()?;
    is_git_dir(fd.as_fd()).then_some(dir)
}

impl Found {
    /// A nested project's `.hel/`, within [`MAX_STORES`].
    fn add_store(&mut self, path: PathBuf) {
        if self.stores.len() >= MAX_STORES {
            self.truncated = true;
        } else {
            self.stores.insert(path);
        }
    }

    /// The nested projects' `.hel/` directories found, with the identity
    /// each has now (one gone since is left out), to be hidden.
    pub(crate) fn hidden(&self) -> Vec<Hidden> {
        self.stores
            .iter()
            .filter_map(|path| {
                let st = rustix::fs::lstat(path).ok()?;
                (FileType::from_raw_mode(st.st_mode) == FileType::Directory).then(|| Hidden {
                    path: path.clone(),
                    id: FileId {
                        dev: st.st_dev,
                        ino: st.st_ino,
                    },
                })
            })
            .collect()
    }

    fn full(&mut self) -> bool {
        if self.dirs.len() + self.pointers.len() >= MAX_GIT_DIRS {
            self.truncated = true;
        }
        self.truncated
    }

    /// A git directory, and the one its `commondir` names.
    fn add_dir(&mut self, dir: &Path, store: &Path) {
        if dir.starts_with(store) || self.dirs.contains(dir) || self.full() {
            return;
        }
        self.dirs.insert(dir.to_owned());
        let common = read_small(&dir.join("commondir"))
            .and_then(|t| git_dir_at(dir, t.lines().next().unwrap_or("")));
        if let Some(c) = common {
            if !c.starts_with(store) && !self.full() {
                self.dirs.insert(c);
            }
        }
    }

    /// A `.git` entry at `path`: a git directory, a file naming one
    /// (`gitdir: <path>`), or a link to one.
    fn add_dot_git(&mut self, path: &Path, kind: FileType, store: &Path) {
        let parent = path.parent().unwrap_or(path);
        match kind {
            FileType::Directory => self.add_dir(path, store),
            FileType::RegularFile => {
                if self.full() {
                    return;
                }
                self.pointers.insert(path.to_owned());
                let target = read_small(path).and_then(|t| {
                    let first = t.lines().next()?.to_owned();
                    let rest = first.strip_prefix("gitdir:")?.trim_start().to_owned();
                    git_dir_at(parent, &rest)
                });
                if let Some(dir) = target {
                    self.add_dir(&dir, store);
                }
            }
            FileType::Symlink => {
                // The link itself cannot be bound; where it leads can.
                if let Some(dir) = path.canonicalize().ok().and_then(|d| git_dir_at(&d, ".")) {
                    self.add_dir(&dir, store);
                }
            }
            _ => {}
        }
    }

    /// The sandbox's bind mounts for what was found, each parent before
    /// what is inside it: every git directory and `.git` file read-only;
    /// with `allow_writes`, a git directory is bound writable onto itself
    /// (so it cannot be moved or replaced) with [`KEPT`] read-only inside,
    /// unless it [`stays_read_only`].
    pub(crate) fn mounts(&self, allow_writes: bool) -> Vec<GitMount> {
        let mut all: Vec<(&PathBuf, bool)> = self
            .dirs
            .iter()
            .map(|d| (d, true))
            .chain(self.pointers.iter().map(|p| (p, false)))
            .collect();
        all.sort();
        let mut out: Vec<GitMount> = Vec::new();
        let push = |out: &mut Vec<GitMount>, path: PathBuf, read_only: bool| {
            let Ok(st) = rustix::fs::lstat(&path) else {
                return false;
            };
            let id = FileId {
                dev: st.st_dev,
                ino: st.st_ino,
            };
            out.push(GitMount {
                path,
                id,
                read_only,
            });
            true
        };
        for (path, is_dir) in all {
            if out.iter().any(|m| m.read_only && path.starts_with(&m.path)) {
                continue;
            }
            let open = is_dir
                && allow_writes
                && hel_fs::at::open_dir_path(path).is_ok_and(|fd| !stays_read_only(fd.as_fd()));
            if !open {
                push(&mut out, path.clone(), true);
                continue;
            }
            if !push(&mut out, path.clone(), false) {
                continue;
            }
            for k in KEPT {
                let inner = path.join(k);
                if rustix::fs::lstat(&inner).is_ok() {
                    push(&mut out, inner, true);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A git directory by hand: what git checks, plus config and hooks.
    fn git_dir(at: &Path) {
        for d in ["objects", "refs", "hooks"] {
            fs::create_dir_all(at.join(d)).unwrap();
        }
        fs::write(at.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::write(at.join("config"), "[core]\n").unwrap();
    }

    fn shown(mounts: &[GitMount], base: &Path) -> Vec<String> {
        mounts
            .iter()
            .map(|m| {
                let rel = m.path.strip_prefix(base).unwrap().display().to_string();
                format!("{rel} {}", if m.read_only { "ro" } else { "rw" })
            })
            .collect()
    }

    #[test]
    fn every_git_directory_and_git_file_is_found_and_bound_parents_first() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().canonicalize().unwrap();
        let project = base.join("p");
        git_dir(&project.join(".git"));
        git_dir(&project.join(".git/modules/sub"));
        git_dir(&project.join("vendor/lib/.git"));
        // A bare repository, and a git directory not named .git.
        git_dir(&project.join("fixtures/bare.git"));
        // A submodule's .git file, and a linked worktree's whose git
        // directory (elsewhere) names its common directory.
        fs::create_dir_all(project.join("sub")).unwrap();
        fs::write(project.join("sub/.git"), "gitdir: ../.git/modules/sub\n").unwrap();
        let main = base.join("main/.git");
        git_dir(&main);
        let wt = main.join("worktrees/wt");
        fs::create_dir_all(&wt).unwrap();
        fs::write(wt.join("HEAD"), "ref: refs/heads/wt\n").unwrap();
        fs::write(wt.join("commondir"), "../..\n").unwrap();
        fs::create_dir_all(project.join("linked")).unwrap();
        fs::write(
            project.join("linked/.git"),
            format!("gitdir: {}\n", wt.display()),
        )
        .unwrap();
        // Not git directories: .hel/ is skipped, a lone HEAD is nothing, a
        // .git file leading nowhere is still bound.
        git_dir(&project.join(".hel/x/.git"));
        fs::create_dir_all(project.join("docs")).unwrap();
        fs::write(project.join("docs/HEAD"), "").unwrap();
        fs::write(project.join("docs/.git"), "gitdir: /nonexistent\n").unwrap();

        let found = find(std::slice::from_ref(&project), &project.join(".hel"));
        assert!(!found.truncated);
        assert_eq!(
            shown(&found.mounts(false), &base),
            [
                "main/.git ro",
                "p/.git ro",
                "p/docs/.git ro",
                "p/fixtures/bare.git ro",
                "p/linked/.git ro",
                "p/sub/.git ro",
                "p/vendor/lib/.git ro",
            ]
        );
        // Open to commits: each git directory bound onto itself, what git
        // runs or is pointed by kept read-only; a worktree's git directory
        // lies in the read-only worktrees/ of its common one.
        assert_eq!(
            shown(&found.mounts(true), &base),
            [
                "main/.git rw",
                "main/.git/config ro",
                "main/.git/hooks ro",
                "main/.git/worktrees ro",
                "p/.git rw",
                "p/.git/config ro",
                "p/.git/hooks ro",
                "p/.git/modules ro",
                "p/docs/.git ro",
                "p/fixtures/bare.git rw",
                "p/fixtures/bare.git/config ro",
                "p/fixtures/bare.git/hooks ro",
                "p/linked/.git ro",
                "p/sub/.git ro",
                "p/vendor/lib/.git rw",
                "p/vendor/lib/.git/config ro",
                "p/vendor/lib/.git/hooks ro",
            ]
        );
        // Without hooks (a command could create them) or with a kept name
        // that is a link, a git directory stays read-only.
        fs::remove_dir(project.join("vendor/lib/.git/hooks")).unwrap();
        std::os::unix::fs::symlink("config", project.join("fixtures/bare.git/commondir")).unwrap();
        let found = find(std::slice::from_ref(&project), &project.join(".hel"));
        let open = shown(&found.mounts(true), &base);
        assert!(
            open.contains(&"p/vendor/lib/.git ro".to_owned()),
            "{open:?}"
        );
        assert!(
            open.contains(&"p/fixtures/bare.git ro".to_owned()),
            "{open:?}"
        );
    }

    #[test]
    fn nested_stores_are_found_at_any_depth_and_not_entered() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().canonicalize().unwrap();
        let project = base.join("p");
        let other = base.join("allowed");
        for d in [
            ".hel/sessions",
            "vendor/lib/.hel/sessions",
            "a/b/c/d/.HEL",
            "src",
        ] {
            fs::create_dir_all(project.join(d)).unwrap();
        }
        fs::create_dir_all(other.join(".hel")).unwrap();
        // Inside a nested store: not entered, so not found.
        git_dir(&project.join("vendor/lib/.hel/sessions/.git"));
        // A file or a link named .hel is no store to hide.
        fs::write(project.join("src/.hel"), "").unwrap();
        std::os::unix::fs::symlink("../vendor", project.join("a/.hel")).unwrap();
        let found = find(&[project.clone(), other.clone()], &project.join(".hel"));
        let hidden: Vec<String> = found
            .hidden()
            .iter()
            .map(|h| h.path.strip_prefix(&base).unwrap().display().to_string())
            .collect();
        assert_eq!(
            hidden,
            ["allowed/.hel", "p/a/b/c/d/.HEL", "p/vendor/lib/.hel"]
        );
        assert!(found.mounts(false).is_empty());
    }

    #[test]
    fn the_search_is_bounded() {
        let t = tempfile::tempdir().unwrap();
        let project = t.path().canonicalize().unwrap();
        for i in 0..MAX_GIT_DIRS + 5 {
            git_dir(&project.join(format!("r{i}/.git")));
        }
        let found = find(std::slice::from_ref(&project), &project.join(".hel"));
        assert!(found.truncated);
        assert_eq!(found.mounts(false).len(), MAX_GIT_DIRS);
    }
}
