//! Snapshots against a real store: what is recorded, what a change costs,
//! what the stat cache spares, and what is left out.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use hel_store::tree::EntryKind;
use hel_store::{CommitInput, Record, SessionLease, SessionState, Store};
use hel_workspace::{Flat, Options, Prev, Snapshot, Workspace};
use serde_json::json;

struct Session {
    store: Store,
    lease: SessionLease,
    state: SessionState,
    last: Option<(hel_store::ObjectId, Flat)>,
}

impl Session {
    fn new(project: &Path) -> Session {
        let store = Store::open(project).unwrap();
        let lease = store.new_session().unwrap();
        Session {
            store,
            lease,
            state: SessionState::default(),
            last: None,
        }
    }

    /// Snapshot and commit a start record; returns the snapshot and what
    /// the commit wrote (objects, bytes).
    fn snap(&mut self, ws: &mut Workspace) -> (Snapshot, u64) {
        let mut txn = self.store.begin(&self.lease, &mut self.state).unwrap();
        let prev = self
            .last
            .as_ref()
            .map(|(tree, flat)| Prev { tree: *tree, flat });
        let snap = ws.snapshot(&mut txn, prev).unwrap();
        let (objects, _) = txn.written();
        txn.commit(CommitInput {
            messages: &[],
            leaves: &[],
            cwd: "/p".into(),
            request_config: json!({}),
            meter: json!(null),
            cursors: json!({}),
            new_spill: vec![],
            instruction: "i".into(),
            input_tokens: 0,
            output_tokens: 0,
            why: "test".into(),
            record: Record::Start,
            workspace: Some(hel_store::Workspace {
                tree: snap.tree,
                start: None,
                not_tracked: snap.not_tracked.len() as u64,
                restored: None,
            }),
        })
        .unwrap();
        self.last = Some((snap.tree, snap.flat.clone()));
        (snap, objects)
    }
}

/// Set a path's mtime well before now, so the stat cache may trust it.
fn age(path: &Path) {
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
    let f = fs::File::options().write(true).open(path).unwrap();
    f.set_modified(old).unwrap();
}

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, bytes).unwrap();
    age(&p);
}

fn kind(flat: &Flat, path: &str) -> Option<EntryKind> {
    flat.get(path.as_bytes()).map(|i| i.kind)
}

#[test]
fn records_files_links_modes_and_leaves_out_what_it_must() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", b"hello\n");
    write(root, "src/main.rs", b"fn main() {}\n");
    write(root, "run.sh", b"#!/bin/sh\n");
    fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o750)).unwrap();
    symlink("a.txt", root.join("link")).unwrap();
    symlink("/etc/passwd", root.join("outside")).unwrap();
    fs::create_dir(root.join("empty")).unwrap();
    write(root, ".gitignore", b"*.log\n");
    write(root, "debug.log", b"noise");
    write(root, "vendor/lib/.git/HEAD", b"ref: x\n");
    write(root, "vendor/lib/code.c", b"int x;\n");
    write(root, ".git/config", b"[core]\n");
    write(root, "big.bin", &vec![7u8; 5000]);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let mut s = Session::new(root);
    let mut ws = Workspace::open(
        &s.store,
        Options {
            max_file: 4096,
            budget: 1 << 20,
        },
    )
    .unwrap();
    let (snap, _) = s.snap(&mut ws);
    let f = &snap.flat;
    assert_eq!(kind(f, "a.txt"), Some(EntryKind::File));
    assert_eq!(f.get(b"run.sh").unwrap().mode, 0o750);
    assert_eq!(kind(f, "src"), Some(EntryKind::Dir));
    assert_eq!(kind(f, "empty"), Some(EntryKind::Dir));
    let link = f.get(b"outside").unwrap();
    assert_eq!((link.kind, link.size), (EntryKind::Symlink, 11));
    assert_eq!(s.store.read_blob(&link.id).unwrap(), b"/etc/passwd");
    assert_eq!(kind(f, "vendor/lib"), Some(EntryKind::Repository));
    assert_eq!(kind(f, "vendor/lib/code.c"), None);
    assert_eq!(kind(f, "debug.log"), None, "ignored by .gitignore");
    assert_eq!(kind(f, ".gitignore"), Some(EntryKind::File));
    assert_eq!(kind(f, ".git"), None);
    assert_eq!(kind(f, ".git/config"), None);
    assert!(!f.items.keys().any(|p| p.starts_with(b".hel")));
    assert_eq!(kind(f, "fifo"), None);
    assert_eq!(kind(f, "big.bin"), Some(EntryKind::NotTracked));
    assert_eq!(snap.not_tracked.len(), 1);
    // What was committed reads back as the same map.
    assert_eq!(&Flat::read(&s.store, &snap.tree).unwrap(), f);
    assert_eq!(
        s.store
            .read_blob(&f.get(b"src/main.rs").unwrap().id)
            .unwrap(),
        b"fn main() {}\n"
    );
    let fsck = s.store.fsck().unwrap();
    assert!(fsck.is_sound(), "{fsck:?}");
}

#[test]
fn a_change_costs_its_blob_and_the_trees_on_its_path_and_the_cache_spares_reads() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for d in 0..5 {
        for k in 0..20 {
            write(
                root,
                &format!("d{d}/sub/f{k}.txt"),
                format!("{d} {k}\n").as_bytes(),
            );
        }
    }
    let mut s = Session::new(root);
    let mut ws = Workspace::open(&s.store, Options::default()).unwrap();
    let (first, _) = s.snap(&mut ws);
    assert_eq!(first.files_read, 100);
    // Nothing changed: nothing read, nothing written, the same tree.
    let (again, objects) = s.snap(&mut ws);
    assert_eq!((again.files_read, objects), (0, 0));
    assert_eq!(again.tree, first.tree);
    // One file: its blob and the trees root, d3, d3/sub.
    write(root, "d3/sub/f7.txt", b"changed\n");
    let (third, objects) = s.snap(&mut ws);
    assert_eq!(third.files_read, 1);
    assert_eq!(objects, 4);
    assert_ne!(third.tree, first.tree);
    // A new process (a fresh cache load) trusts the same files.
    let mut ws2 = Workspace::open(&s.store, Options::default()).unwrap();
    let (fourth, objects) = s.snap(&mut ws2);
    assert_eq!(
        (fourth.files_read, objects, fourth.tree),
        (0, 0, third.tree)
    );
    // Content changed with size and mtime put back: the ctime tells.
    let p = root.join("d1/sub/f2.txt");
    let before = fs::metadata(&p).unwrap().modified().unwrap();
    fs::write(&p, b"1 X\n").unwrap();
    fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(before)
        .unwrap();
    let (fifth, _) = s.snap(&mut ws2);
    assert_eq!(fifth.files_read, 1);
    let id = fifth.flat.get(b"d1/sub/f2.txt").unwrap().id;
    assert_eq!(s.store.read_blob(&id).unwrap(), b"1 X\n");
}

#[test]
fn budget_and_size_limit_leave_new_files_untracked_but_never_a_tracked_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "small.txt", b"s");
    write(root, "grows.txt", &[1u8; 100]);
    let mut s = Session::new(root);
    let options = Options {
        max_file: 1000,
        budget: 3000,
    };
    let mut ws = Workspace::open(&s.store, options).unwrap();
    s.snap(&mut ws);
    // A tracked file grows past the limit: still tracked.
    write(root, "grows.txt", &vec![2u8; 2000]);
    // New files: one too large, two within the limit but past the budget
    // together.
    write(root, "huge.bin", &vec![3u8; 5000]);
    write(root, "n1.bin", &vec![4u8; 900]);
    write(root, "n2.bin", &vec![5u8; 900]);
    let (snap, _) = s.snap(&mut ws);
    let f = &snap.flat;
    assert_eq!(kind(f, "grows.txt"), Some(EntryKind::File));
    assert_eq!(f.get(b"grows.txt").unwrap().size, 2000);
    assert_eq!(kind(f, "huge.bin"), Some(EntryKind::NotTracked));
    assert_eq!(f.get(b"huge.bin").unwrap().size, 5000);
    let over: Vec<_> = ["n1.bin", "n2.bin"]
        .iter()
        .filter(|p| kind(f, p) == Some(EntryKind::NotTracked))
        .collect();
    assert_eq!(over.len(), 1, "2000 + 900 fit in 3000, the second 900 not");
    assert_eq!(snap.not_tracked.len(), 2);
    assert!(snap.new_bytes <= 3000);
}
