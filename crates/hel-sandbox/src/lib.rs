//! The sandbox for `bash` (Linux): commands run where they cannot see or
//! touch hel.
//!
//! Each instance has one sandbox, started at its first bash call and ended
//! with the instance: `hel __sandbox-init` (`init.rs`) builds a user, mount
//! and PID namespace whose PID 1 it is, hides `.hel/`, applies Landlock,
//! drops every capability and then runs each command on request from hel
//! (`host.rs`) over a socket (`proto.rs`). hel's processes are not in that
//! PID namespace, so no command can read their environment or memory or
//! signal them; when hel ends, or is killed, the namespace and everything a
//! command started in it go too. Commands inherit no descriptor but
//! stdin, stdout and stderr (the session lease, the instance lock and the
//! store's files stay with hel), have no controlling terminal and see a
//! private `/dev` without the user's terminals.
//!
//! Reads stay open where the system needs them. The network is hel's, or
//! (when the caller says so) a network namespace with only a loopback.
//! When a step is not possible here, bash is refused with the reason and
//! `--no-sandbox`.
//!
//! The face: [`helper_main`] (the helper's entry point, for the binary),
//! [`Commands`] and [`Sandbox`] with what a command needs ([`Layout`],
//! [`RunBody`], [`Kept`] and [`Tap`] for its output), and
//! [`check_allow_write`] for `--allow-write`. Nothing here knows the
//! agent: the git directories to protect are found by the caller and
//! handed over as [`GitMount`]s, and live output goes to a [`Tap`].

mod host;
mod init;
mod output;
mod proto;

pub use host::{Layout, Outcome, RunError, Sandbox, SandboxError, Settled};
pub use init::helper_main;
pub use output::{Kept, Tap};
pub use proto::{FileId, GitMount, Hidden, RunBody, Status};

/// The instance's sandbox, started at the first bash call; None until
/// then, and after it stopped.
#[derive(Default)]
pub struct Commands(pub Option<Sandbox>);

impl Commands {
    /// End the sandbox and every process in it (at the instance's end).
    pub fn shutdown(&mut self) {
        if let Some(mut s) = self.0.take() {
            s.shutdown();
        }
    }
}

use std::path::{Path, PathBuf};

use hel_object::format::STORE_DIR;

/// Why an `--allow-write` directory is refused (bad usage).
#[derive(Debug, thiserror::Error)]
pub enum AllowWriteError {
    #[error("--allow-write {}: {source}", dir.display())]
    Unusable {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("--allow-write {}: not a directory", dir.display())]
    NotDir { dir: PathBuf },
    #[error("--allow-write {}: refused: {hazard}", dir.display())]
    Refused { dir: PathBuf, hazard: Hazard },
}

/// What a command allowed to write a directory could do to hel.
#[derive(Debug, thiserror::Error)]
pub enum Hazard {
    #[error("the project is inside it (commands could move the project or its {STORE_DIR}/ away)")]
    HoldsProject,
    #[error("it is in {STORE_DIR}/, the session store")]
    InStore,
    #[error("it holds hel's instance directories ({})", .0.display())]
    HoldsRuntime(PathBuf),
}

/// The `--allow-write` directories, canonical; refused: one that does not
/// exist or that would let a command move the project, its `.hel/` store
/// or hel's instance directories away (the project or an ancestor of it,
/// anything in `.hel/`, an ancestor of the instance runtime root or
/// anything inside it).
pub fn check_allow_write(
    dirs: &[PathBuf],
    project: &Path,
    runtime_root: &Path,
) -> Result<Vec<PathBuf>, AllowWriteError> {
    let root = canonical_root(runtime_root);
    let store = project.join(STORE_DIR);
    let mut out = Vec::new();
    for d in dirs {
        let c = d
            .canonicalize()
            .map_err(|source| AllowWriteError::Unusable {
                dir: d.clone(),
                source,
            })?;
        if !c.is_dir() {
            return Err(AllowWriteError::NotDir { dir: d.clone() });
        }
        let hazard = if project.starts_with(&c) {
            Some(Hazard::HoldsProject)
        } else if c.starts_with(&store) {
            Some(Hazard::InStore)
        } else if root.starts_with(&c) || c.starts_with(&root) {
            Some(Hazard::HoldsRuntime(root.clone()))
        } else {
            None
        };
        if let Some(hazard) = hazard {
            return Err(AllowWriteError::Refused {
                dir: d.clone(),
                hazard,
            });
        }
        out.push(c);
    }
    Ok(out)
}

/// The runtime root with its existing part resolved (it may not exist yet).
fn canonical_root(root: &Path) -> PathBuf {
    if let Ok(c) = root.canonicalize() {
        return c;
    }
    match (root.parent(), root.file_name()) {
        (Some(parent), Some(name)) => canonical_root(parent).join(name),
        _ => root.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_write_refuses_what_could_move_the_project_store_or_runtime() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().canonicalize().unwrap();
        let project = base.join("work/project");
        let store = project.join(".hel/sessions");
        let root = base.join("tmp/hel-runs-1");
        let other = base.join("elsewhere");
        for d in [&store, &root.join("abc"), &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        let check = |d: &Path| check_allow_write(&[d.to_owned()], &project, &root);
        assert_eq!(check(&other).unwrap(), vec![other.clone()]);
        for bad in [
            project.clone(),
            base.join("work"),
            base.clone(),
            PathBuf::from("/"),
            project.join(".hel"),
            store.clone(),
            base.join("tmp"),
            root.clone(),
            root.join("abc"),
            base.join("missing"),
        ] {
            let e = check(&bad).unwrap_err().to_string();
            assert!(e.starts_with("--allow-write ") && !e.contains('\n'), "{e}");
        }
        // Through a link, too.
        let link = base.join("link");
        std::os::unix::fs::symlink(base.join("work"), &link).unwrap();
        assert!(check(&link)
            .unwrap_err()
            .to_string()
            .contains("project is inside it"));
    }
}
