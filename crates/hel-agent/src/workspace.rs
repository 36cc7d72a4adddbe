//! The run's workspace snapshots: the project's files recorded when each
//! instruction starts and when it ends, so that `hel undo` and `hel
//! restore` can bring them back.

use hel_store::{ObjectId, Store, Txn};
use hel_workspace::{history, Flat, Options, Prev, Snapshot, SnapshotError, Workspace};

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

/// Snapshots of one project for one session, kept across its instructions.
pub struct Snapshots {
    workspace: Workspace,
    /// The last snapshot written (its root tree and paths), on which the
    /// next builds; read from the session's history at the first snapshot
    /// of a resumed session.
    last: Option<(ObjectId, Flat)>,
    loaded: bool,
    /// The tree the current instruction started with.
    pub start: Option<ObjectId>,
    /// Whether the user was told that snapshots are partial.
    pub told_partial: bool,
}

impl Snapshots {
    /// Snapshots of `store`'s project within `options`. Refused for `/`
    /// and the home directory.
    pub fn open(store: &Store, options: Options) -> Result<Snapshots, WorkspaceError> {
        Ok(Snapshots {
            workspace: Workspace::open(store, options)?,
            last: None,
            loaded: false,
            start: None,
            told_partial: false,
        })
    }

    /// Snapshot the project through `txn`, building on the session's last
    /// snapshot (`head` is the session's head when this process has taken
    /// none yet).
    pub fn take(
        &mut self,
        store: &Store,
        txn: &mut Txn<'_>,
        head: Option<ObjectId>,
    ) -> Result<Snapshot, WorkspaceError> {
        if !self.loaded {
            self.loaded = true;
            if let Some(head) = head {
                if let Some(tree) = history::newest_tree(store, &head)? {
                    self.last = Some((tree, Flat::read(store, &tree)?));
                }
            }
        }
        let prev = self
            .last
            .as_ref()
            .map(|(tree, flat)| Prev { tree: *tree, flat });
        let snap = self.workspace.snapshot(txn, prev)?;
        Ok(snap)
    }

    /// The workspace, for a restore.
    pub fn workspace_mut(&mut self) -> &mut Workspace {
        &mut self.workspace
    }

    /// Records were written elsewhere (a restore): the next snapshot reads
    /// what it builds on from the session's history again.
    pub fn forget(&mut self) {
        self.last = None;
        self.loaded = false;
    }

    /// The snapshot `snap` was committed: the next one builds on it.
    pub fn committed(&mut self, snap: Snapshot) {
        self.last = Some((snap.tree, snap.flat));
    }
}

/// The note the model gets at the next instruction after files were
/// restored by `hel undo` or `hel restore` (newest restore first in
/// `restores`), or None.
pub fn restored_note(restores: &[hel_store::Restored]) -> Option<String> {
    if restores.is_empty() {
        return None;
    }
    let mut paths: Vec<&str> = Vec::new();
    let mut count = 0;
    for r in restores.iter().rev() {
        count += r.count;
        for p in &r.paths {
            if !paths.contains(&p.as_str()) {
                paths.push(p);
            }
        }
    }
    if count == 0 {
        return None;
    }
    let shown = paths
        .iter()
        .take(20)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let more = if (paths.len() as u64) < count || paths.len() > 20 {
        " and others"
    } else {
        ""
    };
    Some(format!(
        "[hel: since your last answer the user restored {count} file(s) to an earlier state ({shown}{more}); read them again before relying on what you last saw.]"
    ))
}
