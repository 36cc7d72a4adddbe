//! Why a snapshot could not be taken.

use hel_workspace::{history, SnapshotError};

/// Why a snapshot could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    History(#[from] history::HistoryError),
    #[error(transparent)]
    Flat(#[from] hel_workspace::flat::FlatError),
}
