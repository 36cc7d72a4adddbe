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

use crate::event::{FileChange, Warning};
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
    /// What the current instruction's own calls changed, from its start
    /// record on.
    calls: Option<Calls>,
}

/// What an instruction's calls changed (objects-spec §10.6): the project
/// is scanned (nothing stored) right before and after each call that may
/// change files; what differs between the two is the instruction's. From
/// a command that left processes running (or a call cut short) on,
/// everything up to the end snapshot is.
struct Calls {
    /// The files when the instruction started.
    start: Arc<Flat>,
    /// Paths its calls changed.
    owned: std::collections::BTreeSet<Vec<u8>>,
    /// The last scan, on which the next builds.
    last: (ObjectId, Arc<Flat>),
    /// The scan before the call running now.
    before: Option<Arc<Flat>>,
    /// Everything that changed since this scan is the instruction's.
    open: Option<Arc<Flat>>,
    /// A scan failed: the end snapshot is recorded whole.
    whole: bool,
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
            calls: None,
        })
    }

    /// Find secrets with the run's detector: a file holding one is not
    /// stored.
    pub(crate) fn with_secrets(mut self, secrets: Arc<hel_secrets::Detector>) -> Snapshots {
        self.workspace.set_secrets(secrets);
        self
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

    /// The instruction's start snapshot was committed (the last one):
    /// from now on its calls are followed.
    pub(crate) fn follow_calls(&mut self) {
        self.calls = self.last.as_ref().map(|(tree, flat)| Calls {
            start: Arc::clone(flat),
            owned: Default::default(),
            last: (*tree, Arc::clone(flat)),
            before: None,
            open: None,
            whole: false,
        });
    }

    /// Scan the project (nothing stored), building on the last scan.
    fn scan(workspace: &mut Workspace, calls: &mut Calls) -> Option<Arc<Flat>> {
        let prev = Prev {
            tree: calls.last.0,
            flat: &calls.last.1,
        };
        match workspace.snapshot(&mut hel_workspace::Scan, Some(prev)) {
            Ok(s) => {
                calls.last = (s.tree, Arc::clone(&s.flat));
                Some(s.flat)
            }
            Err(_) => {
                // The end snapshot says what went wrong, if it does again.
                calls.whole = true;
                None
            }
        }
    }

    /// A call that may change files is about to run.
    pub(crate) fn before_call(&mut self) {
        let Some(calls) = self.calls.as_mut() else {
            return;
        };
        if calls.whole || calls.open.is_some() {
            return;
        }
        calls.before = Self::scan(&mut self.workspace, calls);
    }

    /// The call ended; `left`: it left processes running. Returns the
    /// files (not directories) the call changed, each with `A`, `M` or
    /// `D` (none known when processes were left or a scan failed); the
    /// first [`DIFFED`] of the first [`LOOKED`] that are small text on
    /// both sides with their texts, each side read from `store` (the
    /// session's) when it holds it, the new one else from the file now
    /// when it still holds what the scan saw. A side that cannot be read
    /// (not stored, damaged, changed since) means no texts, never an error.
    pub(crate) fn after_call(&mut self, left: bool, store: Option<&Store>) -> Vec<FileChange> {
        let Some(calls) = self.calls.as_mut() else {
            return Vec::new();
        };
        if calls.whole || calls.open.is_some() {
            return Vec::new();
        }
        let Some(before) = calls.before.take() else {
            return Vec::new();
        };
        if left {
            calls.open = Some(before);
            return Vec::new();
        }
        let Some(after) = Self::scan(&mut self.workspace, calls) else {
            return Vec::new();
        };
        let mut changed = std::collections::BTreeSet::new();
        hel_workspace::attrib::changed_between(&before, &after, &mut changed);
        let file = |i: Option<&hel_workspace::Item>| i.is_some_and(|i| i.kind != EntryKind::Dir);
        let mut diffed = 0;
        let shown = changed
            .iter()
            .filter_map(|p| {
                let (old, new) = (before.get(p), after.get(p));
                let kind = match (file(old), file(new)) {
                    (false, false) => return None,
                    (false, true) => 'A',
                    (true, false) => 'D',
                    (true, true) => 'M',
                };
                Some((p, kind, old, new))
            })
            .enumerate()
            .map(|(n, (p, kind, old, new))| {
                let texts = (n < LOOKED && diffed < DIFFED)
                    .then(|| {
                        let old = text(store, None, p, old.filter(|_| kind != 'A'))?;
                        let project = Some(self.workspace.project_fd());
                        let new = text(store, project, p, new.filter(|_| kind != 'D'))?;
                        (old != new).then_some((old, new))
                    })
                    .flatten();
                diffed += usize::from(texts.is_some());
                FileChange {
                    kind,
                    path: String::from_utf8_lossy(p).into_owned(),
                    texts,
                }
            })
            .collect();
        calls.owned.append(&mut changed);
        shown
    }

    /// The instruction's end snapshot `end` (not committed yet) as its
    /// own: what changed between its calls (the user's edits, another
    /// session's) is given back to what its start held there. The new
    /// trees go to `sink`. Followed calls end here.
    pub(crate) fn own_end(
        &mut self,
        sink: &mut dyn hel_workspace::Sink,
        end: &mut Snapshot,
    ) -> Result<(), WorkspaceError> {
        let Some(mut calls) = self.calls.take() else {
            return Ok(());
        };
        if calls.whole {
            return Ok(());
        }
        // A call cut short (Ctrl-C) never said it ended.
        if let Some(before) = calls.before.take() {
            calls.open.get_or_insert(before);
        }
        if let Some(open) = &calls.open {
            hel_workspace::attrib::changed_between(open, &end.flat, &mut calls.owned);
        }
        hel_workspace::attrib::own_end(sink, &calls.start, end, &calls.owned)?;
        Ok(())
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

/// Files a call changed shown as a diff, at most.
const DIFFED: usize = 3;

/// Of the files a call changed, those looked at for a diff (the first
/// ones, as the live view names them).
const LOOKED: usize = 10;

/// The most bytes of either side of a command's file diff.
const DIFF_BYTES: u64 = 256 << 10;

/// The text of the file `item` at `path` for a diff: empty when there
/// is none (`item` None); else only a regular file of at most
/// [`DIFF_BYTES`] of UTF-8 text without NUL, read from `store` (verified)
/// or else, with `project`, from the file now beneath it (never through a
/// link) when it holds the same content. None when it cannot be had.
fn text(
    store: Option<&Store>,
    project: Option<std::os::fd::BorrowedFd<'_>>,
    path: &[u8],
    item: Option<&hel_workspace::Item>,
) -> Option<String> {
    let Some(item) = item else {
        return Some(String::new());
    };
    if item.kind != EntryKind::File || item.size > DIFF_BYTES {
        return None;
    }
    let cap = hel_store::Cap {
        max: DIFF_BYTES,
        what: "file diffed",
    };
    let stored = store.and_then(|s| hel_store::workspace::read_blob(s, &item.id, cap).ok());
    let bytes = match stored {
        Some(b) => b,
        None => {
            let (dir, name) = hel_workspace::flat::split(path);
            let dir = hel_fs::at::open_dir_beneath(project?, dir).ok()?;
            let (fd, _) = hel_fs::at::open_regular(&dir, name).ok()??;
            let b = hel_fs::read_head(std::fs::File::from(fd), DIFF_BYTES + 1).ok()?;
            (hel_store::blob_id(&b) == item.id).then_some(b)?
        }
    };
    if bytes.len() as u64 > DIFF_BYTES || bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
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
        NotTracked::HoldsSecret => "it holds a secret: not recorded".into(),
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

    /// The files of `flat` as `path: content` lines, for comparison.
    fn paths(flat: &Flat) -> Vec<String> {
        flat.items
            .iter()
            .filter(|(_, i)| i.kind == EntryKind::File)
            .map(|(p, _)| String::from_utf8_lossy(p).into_owned())
            .collect()
    }

    #[test]
    fn an_instructions_end_holds_what_its_calls_changed_not_what_changed_between_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("old.txt"), "old\n").unwrap();
        let store = Store::open(root).unwrap();
        let options = Options {
            notify: false,
            ..Options::default()
        };
        let mut snaps = Snapshots::open(&store, options).unwrap();
        let scan = |snaps: &mut Snapshots| {
            snaps
                .workspace_mut()
                .snapshot(&mut hel_workspace::Scan, None)
                .unwrap()
        };
        let start = scan(&mut snaps);
        snaps.committed(start);
        snaps.follow_calls();
        // Between calls: the user's (or another session's).
        std::fs::write(root.join("theirs.txt"), "theirs\n").unwrap();
        std::fs::write(root.join("old.txt"), "changed by them\n").unwrap();
        // A call.
        snaps.before_call();
        std::fs::create_dir(root.join("new")).unwrap();
        std::fs::write(root.join("new/mine.txt"), "mine\n").unwrap();
        std::fs::write(root.join("bin.dat"), b"a\0b").unwrap();
        std::fs::write(root.join("theirs.txt"), "mine now\n").unwrap();
        let change = |kind, path: &str, texts: Option<(&str, &str)>| FileChange {
            kind,
            path: path.into(),
            texts: texts.map(|(a, b)| (a.into(), b.into())),
        };
        // A new text file has its text; a binary one none; one whose old
        // content was never stored (the scans store nothing) none.
        assert_eq!(
            snaps.after_call(false, Some(&store)),
            [
                change('A', "bin.dat", None),
                change('A', "new/mine.txt", Some(("", "mine\n"))),
                change('M', "theirs.txt", None),
            ]
        );
        // After the last call.
        std::fs::write(root.join("late.txt"), "late\n").unwrap();
        let mut end = scan(&mut snaps);
        snaps.own_end(&mut hel_workspace::Scan, &mut end).unwrap();
        assert_eq!(
            paths(&end.flat),
            ["bin.dat", "new/mine.txt", "old.txt", "theirs.txt"]
        );
        let old = end.flat.get(b"old.txt").unwrap();
        assert_eq!(old.id, hel_store::blob_id(b"old\n"));

        // A command that leaves a process running: from its call on,
        // everything is the instruction's.
        let start = scan(&mut snaps);
        snaps.committed(start);
        snaps.follow_calls();
        std::fs::write(root.join("between.txt"), "theirs\n").unwrap();
        snaps.before_call();
        assert!(snaps.after_call(true, Some(&store)).is_empty());
        std::fs::write(root.join("background.txt"), "bg\n").unwrap();
        let mut end = scan(&mut snaps);
        snaps.own_end(&mut hel_workspace::Scan, &mut end).unwrap();
        let got = paths(&end.flat);
        assert!(got.contains(&"background.txt".to_owned()), "{got:?}");
        assert!(!got.contains(&"between.txt".to_owned()), "{got:?}");
        assert!(got.contains(&"late.txt".to_owned()), "{got:?}");
    }

    #[test]
    fn a_file_s_text_is_read_bounded_and_verified_and_none_when_it_cannot_be() {
        use hel_store::testing;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let store = Store::open(root).unwrap();
        let store_root = root.join(hel_store::STORE_DIR);
        let file = |id, size| Item {
            kind: EntryKind::File,
            mode: 0o644,
            size,
            id,
        };
        let project = std::fs::File::open(root).unwrap();
        let project = Some(std::os::fd::AsFd::as_fd(&project));
        // Stored: its text, whatever the file holds now.
        let (was, canonical) = testing::encode("blob", b"was\n");
        assert_eq!(was, hel_store::blob_id(b"was\n"));
        testing::plant(&store_root, &canonical);
        std::fs::write(root.join("f.txt"), "now\n").unwrap();
        let item = file(was, 4);
        assert_eq!(
            text(Some(&store), None, b"f.txt", Some(&item)).as_deref(),
            Some("was\n")
        );
        // Absent: empty.
        assert_eq!(text(None, None, b"f.txt", None).as_deref(), Some(""));
        // A record that is not what its name promises: none, no error.
        let (bad, _) = testing::encode("blob", b"other\n");
        testing::plant_stored(&store_root, &bad, b"garbage");
        assert_ne!(testing::where_is(&store, &bad), "nowhere");
        assert_eq!(
            text(Some(&store), None, b"f.txt", Some(&file(bad, 6))),
            None
        );
        // Not stored: the file now, only when it holds what was scanned.
        let now = file(hel_store::blob_id(b"now\n"), 4);
        assert_eq!(
            text(Some(&store), project, b"f.txt", Some(&now)).as_deref(),
            Some("now\n")
        );
        assert_eq!(text(Some(&store), None, b"f.txt", Some(&now)), None);
        assert_eq!(
            text(Some(&store), project, b"f.txt", Some(&file(bad, 4))),
            None
        );
        // Never through a link, never past the bound, never binary.
        std::os::unix::fs::symlink(root, root.join("up")).unwrap();
        assert_eq!(text(None, project, b"up/f.txt", Some(&now)), None);
        let big = vec![b'a'; DIFF_BYTES as usize + 1];
        std::fs::write(root.join("big"), &big).unwrap();
        // (Its scan said it was small: the read is bounded anyway.)
        let item = file(hel_store::blob_id(&big), 4);
        assert_eq!(text(None, project, b"big", Some(&item)), None);
        std::fs::write(root.join("bin"), b"a\0b").unwrap();
        let item = file(hel_store::blob_id(b"a\0b"), 3);
        assert_eq!(text(None, project, b"bin", Some(&item)), None);
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
