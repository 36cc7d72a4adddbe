//! Why a run could not start.

use std::path::PathBuf;

use crate::client::RequestError;
use crate::config::ConfigError;
use crate::instance::InstanceError;
use crate::project::ProjectError;
use crate::session::SessionError;
use hel_sandbox::AllowWriteError;

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Project(#[from] ProjectError),
    #[error(transparent)]
    Client(RequestError),
    #[error(transparent)]
    AllowWrite(#[from] AllowWriteError),
    #[error("cannot create the instance directory: {0}")]
    Instance(#[from] InstanceError),
    #[error(transparent)]
    Store(#[from] hel_store::Error),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("cannot write the record to {}: {source}", dir.display())]
    Record {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the project directory: {0}")]
    ProjectDir(std::io::Error),
    /// The resumed session's last snapshot of the files cannot be read
    /// back.
    #[error("{0} (--no-workspace resumes without snapshots of the files)")]
    Workspace(crate::workspace::WorkspaceError),
}

/// Why `--restore-files` could not restore the files of a fork.
#[derive(Debug, thiserror::Error)]
pub enum RestoreFilesError {
    #[error(
        "--restore-files needs workspace snapshots, which are off (--no-workspace, or no session)"
    )]
    Off,
    #[error("--restore-files: this session does not start at a fork with a snapshot of the files")]
    NotAFork,
    #[error("--restore-files not made: session {0} arrived with this .hel/, which was not made here (cloned, copied or moved with the project), and hel never writes a shipped session's snapshots into the project's files; `hel sessions adopt {0}` makes it this project's own if you made it")]
    Shipped(hel_store::SessionId),
    #[error(transparent)]
    Store(#[from] hel_store::Error),
    #[error(transparent)]
    Undo(#[from] hel_workspace::undo::UndoError),
}
