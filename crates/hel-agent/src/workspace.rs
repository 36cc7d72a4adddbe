//! The run's workspace snapshots: the project's files recorded when each
//! instruction starts and when it ends, so that `hel undo` and `hel
//! restore` can bring them back.

pub(crate) mod error;

use std::collections::HashSet;
use std::sync::Arc;

use hel_store::tree::EntryKind;
use hel_store::{ObjectId, Store, Txn};
use hel_workspace::snapshot::NotTracked;
use hel_workspace::{history, Flat, Options, Prev, Snapshot, Workspace};

use crate::event::Warning;
pub use error::WorkspaceError;

/// Paths a warning names before it says how many more there are.
const NAMED: usize = 5;

/// Snapshots of one project for one session, kept across its instructions.
pub(crate) struct Snapshots {
    workspace: Workspace,
    /// The last snapshot written (its root tree and paths), on which the
    /// next builds; read from the session's history at the first snapshot
    /// of a resumed session.
    last: Option<(ObjectId, Arc<Flat>)>,
    loaded: bool,
    /// The tree the current instruction started with.
    pub start: Option<ObjectId>,
    /// The paths a snapshot could not record that the user was told of.
    told: HashSet<Vec<u8>>,
}

impl Snapshots {
    /// Snapshots of `store`'s project within `options`. Refused for `/`
    /// and the home directory.
    pub(crate) fn open(store: &Store, options: Options) -> Result<Snapshots, WorkspaceError> {
        Ok(Snapshots {
            workspace: Workspace::open(store, options)?,
            last: None,
            loaded: false,
            start: None,
            told: HashSet::new(),
        })
    }

    /// Read the session's last snapshot (of `head`'s history) now, on
    /// which the next builds: a resumed session whose files cannot be read
    /// back (a tree over what hel reads, a damaged store) is refused
    /// before any instruction instead of failing at each.
    pub(crate) fn resume_from(
        &mut self,
        store: &Store,
        head: &ObjectId,
    ) -> Result<(), WorkspaceError> {
        self.loaded = true;
        self.last = match history::newest_tree(store, head)? {
            Some(tree) => Some((tree, Arc::new(self.workspace.read_last(store, &tree)?))),
            None => None,
        };
        Ok(())
    }

    /// Snapshot the project through `txn`, building on the session's last
    /// snapshot (`head` is the session's head when this process has taken
    /// none yet).
    pub(crate) fn take(
        &mut self,
        store: &Store,
        txn: &mut Txn<'_>,
        head: Option<ObjectId>,
    ) -> Result<Snapshot, WorkspaceError> {
        if !self.loaded {
            self.loaded = true;
            if let Some(head) = head {
                if let Some(tree) = history::newest_tree(store, &head)? {
                    self.last = Some((tree, Arc::new(self.workspace.read_last(store, &tree)?)));
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
    pub(crate) fn workspace_mut(&mut self) -> &mut Workspace {
        &mut self.workspace
    }

    /// Records were written elsewhere (a restore): the next snapshot reads
    /// what it builds on from the session's history again.
    pub(crate) fn forget(&mut self) {
        self.last = None;
        self.loaded = false;
    }

    /// The snapshot `snap` was committed: the next one builds on it.
    pub(crate) fn committed(&mut self, snap: Snapshot) {
        self.last = Some((snap.tree, snap.flat));
    }

    /// The one warning naming the paths `snap` could not record (the
    /// first few, each with why, then how many more), when it holds one
    /// this run has not told of yet; `None` otherwise. Paths not read on
    /// purpose (ignored, special files) are never named.
    pub(crate) fn tell(&mut self, snap: &Snapshot) -> Option<Warning> {
        let mut new = false;
        for (path, _) in &snap.not_tracked {
            new |= self.told.insert(path.clone());
        }
        if !new {
            return None;
        }
        let first = snap
            .not_tracked
            .iter()
            .take(NAMED)
            .map(|(path, why)| {
                let dir = snap
                    .flat
                    .get(path)
                    .is_some_and(|i| i.kind == EntryKind::NotTrackedDir);
                let slash = if dir { "/" } else { "" };
                format!("{}{slash} ({})", String::from_utf8_lossy(path), reason(why))
            })
            .collect();
        Some(Warning::WorkspacePartial {
            count: snap.not_tracked.len(),
            first,
        })
    }
}

/// Why a path was not recorded, in words (with what to do when there is
/// something to do).
fn reason(why: &NotTracked) -> String {
    use hel_store::tree::{FLAT_BYTES_MAX, FLAT_PATHS_MAX};
    match why {
        NotTracked::TooLarge { size } => {
            format!("{size} bytes, too large to snapshot: raise --workspace-max-file to track it")
        }
        NotTracked::OverBudget { size } => format!(
            "{size} bytes, past this snapshot's budget of new content: raise --workspace-budget"
        ),
        NotTracked::Unreadable(e) => format!("unreadable: {e}"),
        NotTracked::PastPaths => format!(
            "past the {FLAT_PATHS_MAX} paths or {} MiB of paths a snapshot records",
            FLAT_BYTES_MAX >> 20
        ),
        NotTracked::Unrecordable(what) => format!("it holds {what}, which no snapshot can"),
        NotTracked::Changed => "it changed while the snapshot was taken".into(),
    }
}

/// The note the model gets at the next instruction after files were
/// restored by `hel undo` or `hel restore` (newest restore first in
/// `restores`), or None.
pub(crate) fn restored_note(restores: &[hel_store::Restored]) -> Option<String> {
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
        "[hel: since your last answer the user restored {} to an earlier state ({shown}{more}); read {} again before relying on what you last saw.]",
        crate::terminal::count(count, "file", "files"),
        if count == 1 { "it" } else { "them" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hel_workspace::Item;

    fn snapshot(not_tracked: Vec<(&str, NotTracked)>, dirs: &[&str]) -> Snapshot {
        let mut flat = Flat::default();
        for d in dirs {
            flat.items.insert(
                d.as_bytes().to_vec(),
                Item {
                    kind: EntryKind::NotTrackedDir,
                    mode: 0,
                    size: 0,
                    id: ObjectId::ZERO,
                },
            );
        }
        Snapshot {
            tree: ObjectId::ZERO,
            flat: Arc::new(flat),
            stats: Default::default(),
            not_tracked: not_tracked
                .into_iter()
                .map(|(p, why)| (p.as_bytes().to_vec(), why))
                .collect(),
            repositories: Vec::new(),
            files_read: 0,
            new_bytes: 0,
        }
    }

    fn told(w: Option<Warning>) -> String {
        w.map(|w| w.to_string()).unwrap_or_default()
    }

    #[test]
    fn the_warning_says_why_each_path_was_not_recorded_and_only_news() {
        let store_dir = tempfile::tempdir().unwrap();
        let store = Store::open(store_dir.path()).unwrap();
        let mut snaps = Snapshots::open(&store, Options::default()).unwrap();
        let small = snapshot(
            vec![(
                "notes.txt",
                NotTracked::Unreadable("Permission denied (os error 13)".into()),
            )],
            &[],
        );
        let text = told(snaps.tell(&small));
        assert_eq!(
            text,
            "1 path could not be snapshotted, so undo does not track it: notes.txt (unreadable: Permission denied (os error 13))"
        );
        assert!(!text.contains("too large"), "{text}");
        // Told once: the same path again says nothing.
        assert!(snaps.tell(&small).is_none());
        let many = snapshot(
            vec![
                ("big.bin", NotTracked::TooLarge { size: 4096 }),
                (
                    "locked",
                    NotTracked::Unreadable("Permission denied (os error 13)".into()),
                ),
                ("n1.bin", NotTracked::OverBudget { size: 900 }),
                ("vendor", NotTracked::PastPaths),
                ("deep", NotTracked::Unrecordable("a path over 4095 bytes")),
                ("notes.txt", NotTracked::Changed),
                ("x1", NotTracked::Changed),
            ],
            &["locked", "vendor", "deep"],
        );
        let text = told(snaps.tell(&many));
        assert_eq!(
            text,
            "7 paths could not be snapshotted, so undo does not track them: \
             big.bin (4096 bytes, too large to snapshot: raise --workspace-max-file to track it); \
             locked/ (unreadable: Permission denied (os error 13)); \
             n1.bin (900 bytes, past this snapshot's budget of new content: raise --workspace-budget); \
             vendor/ (past the 1000000 paths or 128 MiB of paths a snapshot records); \
             deep/ (it holds a path over 4095 bytes, which no snapshot can); and 2 more"
        );
    }
}
