//! Which directory is the project, found from anywhere inside it, as git
//! and jj find their roots: the nearest directory at or above where hel
//! starts that holds `.hel/` or `.git`, else where hel starts.
//!
//! The root decides a lot: the sandbox's write boundary, where `.hel/`
//! is, and what sessions record. So the walk up is careful:
//! - a `.hel` counts only as a directory of this user's own, looked at
//!   without following links (a link, a file, another user's directory
//!   are no marker, and the walk goes on past them);
//! - a `.git` of any kind (directory, file, link) is the top of a git work
//!   tree: the walk never goes above it;
//! - the walk never climbs to the home directory, to `/`, or past a
//!   directory other users may write to (such as `/tmp`): a stray
//!   `~/.hel` or `/tmp/.hel` would otherwise make the whole home or `/tmp`
//!   the sandbox's boundary. Started in one of them, hel takes it as is;
//! - a directory it cannot look into ends the walk (the start is taken).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use hel_store::STORE_DIR;

/// Where a run works: the project's root and where hel was started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The project's root, canonical: the sandbox's boundary, the home of
    /// `.hel/`, the directory sessions record.
    pub root: PathBuf,
    /// The directory hel was started in, canonical, at or below `root`
    /// (`root` itself when it was started outside `--project DIR`): bash
    /// starts there and the file tools take paths relative to it.
    pub cwd: PathBuf,
    /// Why `root` is the root.
    pub found: Found,
}

/// How the root was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Where hel started: it holds `.hel/` or `.git`, or nothing above
    /// does.
    Here,
    /// The nearest directory above that holds this user's `.hel/`.
    Store,
    /// The top of the git work tree hel started in (it holds `.git`).
    Git,
    /// `--project DIR`.
    Given,
}

/// Why the project cannot be decided.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error("cannot use the current directory: {0}")]
    CurrentDir(std::io::Error),
    #[error("--project {}: {source}", path.display())]
    Given {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--project {}: not a directory", .0.display())]
    NotADirectory(PathBuf),
}

impl Found {
    /// Why the root was chosen, in words.
    pub fn why(self) -> &'static str {
        match self {
            Found::Here => "where hel started",
            Found::Store => "the nearest directory above with a .hel/",
            Found::Git => "the top of the git work tree",
            Found::Given => "--project",
        }
    }
}

impl Project {
    /// The project of a run started in the current directory: `given`
    /// (`--project DIR`) when there is one, else the one found by walking
    /// up ([`discover`]).
    pub fn find(given: Option<&Path>) -> Result<Project, ProjectError> {
        let cwd = std::env::current_dir()
            .and_then(|d| d.canonicalize())
            .map_err(ProjectError::CurrentDir)?;
        let Some(dir) = given else {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|h| h.is_absolute())
                .and_then(|h| h.canonicalize().ok());
            return Ok(discover(
                &cwd,
                home.as_deref(),
                rustix::process::geteuid().as_raw(),
            ));
        };
        let root = dir.canonicalize().map_err(|source| ProjectError::Given {
            path: dir.to_owned(),
            source,
        })?;
        if !root.is_dir() {
            return Err(ProjectError::NotADirectory(dir.to_owned()));
        }
        let cwd = if cwd.starts_with(&root) {
            cwd
        } else {
            root.clone()
        };
        Ok(Project {
            root,
            cwd,
            found: Found::Given,
        })
    }

    /// A project that is exactly `dir` (canonical), started there.
    pub fn at(dir: &Path) -> Project {
        Project {
            root: dir.to_owned(),
            cwd: dir.to_owned(),
            found: Found::Here,
        }
    }

    /// Where hel started, relative to the root (empty at the root).
    pub fn cwd_in_root(&self) -> &Path {
        self.cwd.strip_prefix(&self.root).unwrap_or(Path::new(""))
    }
}

/// The project hel started in `start` (canonical) belongs to, for the user
/// `uid` whose home directory is `home`: see the module's rules.
pub(crate) fn discover(start: &Path, home: Option<&Path>, uid: u32) -> Project {
    for dir in start.ancestors() {
        let above = dir != start;
        if above && (Some(dir) == home || dir.parent().is_none() || shared(dir)) {
            break;
        }
        match marker(dir, uid) {
            Ok(None) => {}
            Ok(Some(found)) => {
                return Project {
                    root: dir.to_owned(),
                    cwd: start.to_owned(),
                    found: if above { found } else { Found::Here },
                }
            }
            Err(()) => break,
        }
    }
    Project::at(start)
}

/// What in `dir` makes it a project's root: a `.git` of any kind (said
/// first: a work tree's top is the root whatever else is there), or this
/// user's `.hel/` directory (never through a link). `Err`: `dir` cannot be
/// looked into.
fn marker(dir: &Path, uid: u32) -> Result<Option<Found>, ()> {
    match std::fs::symlink_metadata(dir.join(".git")) {
        Ok(_) => return Ok(Some(Found::Git)),
        Err(e) if missing(&e) => {}
        Err(_) => return Err(()),
    }
    match std::fs::symlink_metadata(dir.join(STORE_DIR)) {
        Ok(m) if m.file_type().is_dir() && m.uid() == uid => Ok(Some(Found::Store)),
        Ok(_) => Ok(None),
        Err(e) if missing(&e) => Ok(None),
        Err(_) => Err(()),
    }
}

fn missing(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// Whether other users may write to `dir` (`/tmp`, a shared directory),
/// or it cannot be looked at.
fn shared(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir).map_or(true, |m| m.mode() & 0o002 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn me() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    /// `top/a/b/c`, canonical, in a directory only this user may write.
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let top = t.path().canonicalize().unwrap().join("top");
        std::fs::create_dir_all(top.join("a/b/c")).unwrap();
        (t, top)
    }

    #[test]
    fn the_nearest_store_or_git_above_is_the_root() {
        let (_t, top) = tree();
        let c = top.join("a/b/c");
        // Nothing above: where hel started.
        assert_eq!(discover(&c, None, me()), Project::at(&c));
        std::fs::create_dir(top.join(".git")).unwrap();
        let p = discover(&c, None, me());
        assert_eq!((p.root.as_path(), p.found), (top.as_path(), Found::Git));
        assert_eq!(p.cwd, c);
        assert_eq!(p.cwd_in_root(), Path::new("a/b/c"));
        // A nearer .hel/ wins over the git top.
        std::fs::create_dir(top.join("a/.hel")).unwrap();
        let p = discover(&c, None, me());
        assert_eq!((p.root, p.found), (top.join("a"), Found::Store));
        // At the root itself: Here.
        assert_eq!(discover(&top, None, me()).found, Found::Here);
    }

    #[test]
    fn the_walk_stops_at_the_git_top_and_at_home() {
        let (_t, top) = tree();
        let c = top.join("a/b/c");
        std::fs::create_dir(top.join(".hel")).unwrap();
        // A .git file (a worktree or submodule) is a work tree's top: the
        // .hel/ above it is not this project's.
        std::fs::write(top.join("a/.git"), "gitdir: /elsewhere\n").unwrap();
        assert_eq!(discover(&c, None, me()).root, top.join("a"));
        std::fs::remove_file(top.join("a/.git")).unwrap();
        assert_eq!(discover(&c, None, me()).root, top);
        // The home directory is never climbed to.
        assert_eq!(discover(&c, Some(&top), me()), Project::at(&c));
        assert_eq!(discover(&c, Some(&top.join("a")), me()), Project::at(&c));
        // Started there, it is taken.
        assert_eq!(discover(&top, Some(&top), me()).root, top);
    }

    #[test]
    fn a_linked_or_foreign_store_is_no_marker() {
        let (_t, top) = tree();
        let c = top.join("a/b/c");
        let elsewhere = tempfile::tempdir().unwrap();
        symlink(elsewhere.path(), top.join("a/.hel")).unwrap();
        std::fs::write(top.join("a/b/.hel"), "not a directory").unwrap();
        assert_eq!(discover(&c, None, me()), Project::at(&c));
        std::fs::create_dir(top.join(".hel")).unwrap();
        assert_eq!(discover(&c, None, me()).root, top);
        // Owned by someone else (as far as the walk can tell: another uid).
        assert_eq!(discover(&c, None, me() + 1), Project::at(&c));
    }

    #[test]
    fn a_directory_others_may_write_ends_the_walk() {
        let (_t, top) = tree();
        let c = top.join("a/b/c");
        std::fs::create_dir(top.join(".hel")).unwrap();
        std::fs::set_permissions(top.join("a"), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(discover(&c, None, me()), Project::at(&c));
        // Started in it, it is taken.
        std::fs::create_dir(top.join("a/.git")).unwrap();
        assert_eq!(discover(&top.join("a"), None, me()).root, top.join("a"));
        std::fs::set_permissions(top.join("a"), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
