//! A file (or a link's target) whose content holds a secret is not
//! stored: the snapshot records it as not tracked (kind 4) with its size,
//! and tells why.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;

use hel_secrets::Detector;
use hel_store::tree::EntryKind;
use hel_store::{CommitInput, Record, SessionState, Store};
use hel_workspace::snapshot::NotTracked;
use hel_workspace::{Options, Prev, Workspace};

/// A GitHub token of the real format, assembled so that this file holds
/// none.
fn token() -> String {
    format!("ghp_{}", "R8t3xQ9vLmN2pK7wZ4yB6cD1eF5gH0jA9sUq")
}

fn start_record(tree: hel_store::ObjectId, not_tracked: u64) -> CommitInput<'static> {
    CommitInput::new(
        Record::Start,
        &[],
        &[],
        "/p",
        hel_store::SessionRecord::of(hel_store::RequestConfig::bare("test", "")),
    )
    .instruction("i")
    .why("test")
    .spill(vec![])
    .workspace(Some(hel_store::Workspace {
        tree,
        start: None,
        not_tracked,
        restored: None,
    }))
}

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    fs::write(root.join(rel), bytes).unwrap();
}

#[test]
fn files_holding_a_secret_are_not_tracked_and_never_stored() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let env_value = "q7Vt2LmZ9xRw4KpN8sYb";
    let dotenv = format!("GITHUB_TOKEN={}\n", token());
    let mut binary = b"\x00\x01\x02SQLite".to_vec();
    binary.extend_from_slice(format!("\x00{}\x00", token()).as_bytes());
    binary.extend_from_slice(b"\xff\xfe");
    let plain = format!("the deploy key is {env_value}\n");
    write(root, ".env", dotenv.as_bytes());
    write(root, "cache.db", &binary);
    write(root, "notes.txt", plain.as_bytes());
    write(root, "a.txt", b"nothing secret here\n");
    symlink(token(), root.join("link")).unwrap();
    let store = Store::open(root).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let options = Options {
        notify: false,
        ..Options::default()
    };
    let mut ws = Workspace::open(&store, options).unwrap();
    // The session's detector knows an environment value no rule does.
    ws.set_secrets(Arc::new(Detector::new([("DEPLOY_KEY", env_value)])));
    let mut txn = store.begin(&lease, &mut state).unwrap();
    let snap = ws.snapshot(&mut txn, None).unwrap();
    txn.commit(start_record(snap.tree, snap.not_tracked.len() as u64))
        .unwrap();
    let mut told: Vec<_> = snap.not_tracked.clone();
    told.sort_by(|a, b| a.0.cmp(&b.0));
    let held = |p: &str| (p.as_bytes().to_vec(), NotTracked::HoldsSecret);
    assert_eq!(
        told,
        [
            held(".env"),
            held("cache.db"),
            held("link"),
            held("notes.txt")
        ]
    );
    for (path, content) in [
        (".env", dotenv.as_bytes()),
        ("cache.db", &binary[..]),
        ("link", token().as_bytes()),
        ("notes.txt", plain.as_bytes()),
    ] {
        let item = snap.flat.get(path.as_bytes()).unwrap();
        assert_eq!(
            (item.kind, item.size, item.id),
            (
                EntryKind::NotTracked,
                content.len() as u64,
                hel_store::ObjectId::ZERO
            ),
            "{path}"
        );
        let id = hel_store::blob_id(content);
        assert!(
            hel_store::testing::read_blob(&store, &id).is_err(),
            "{path} is stored"
        );
    }
    let a = snap.flat.get(b"a.txt".as_slice()).unwrap();
    assert_eq!(a.kind, EntryKind::File);
    assert_eq!(
        hel_store::testing::read_blob(&store, &a.id).unwrap(),
        b"nothing secret here\n"
    );
    // Again, nothing changed: the same tree. Then `.env` holds no secret
    // any more: it is stored.
    let prev = (snap.tree, snap.flat);
    let mut txn = store.begin(&lease, &mut state).unwrap();
    let again = ws
        .snapshot(
            &mut txn,
            Some(Prev {
                tree: prev.0,
                flat: &prev.1,
            }),
        )
        .unwrap();
    assert_eq!(again.tree, prev.0);
    drop(txn);
    write(root, ".env", b"GITHUB_TOKEN=\n");
    let mut txn = store.begin(&lease, &mut state).unwrap();
    let after = ws
        .snapshot(
            &mut txn,
            Some(Prev {
                tree: prev.0,
                flat: &prev.1,
            }),
        )
        .unwrap();
    txn.commit(start_record(after.tree, after.not_tracked.len() as u64))
        .unwrap();
    let env = after.flat.get(b".env".as_slice()).unwrap();
    assert_eq!(env.kind, EntryKind::File);
    assert_eq!(
        hel_store::testing::read_blob(&store, &env.id).unwrap(),
        b"GITHUB_TOKEN=\n"
    );
    assert_eq!(after.not_tracked.len(), 3);
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(fsck.is_sound(), "{fsck:?}");
}
