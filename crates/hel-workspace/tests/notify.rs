//! Snapshots between which the project is watched (inotify): after every
//! kind of change the watched workspace records what a walk by a fresh
//! workspace records, and only a snapshot with nothing changed skips the
//! walk; a watch that cannot be added turns notifications off.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use hel_workspace::{Flat, Options, Prev, Scan, Workspace};

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

fn options(notify: bool) -> Options {
    Options {
        notify,
        ..Options::default()
    }
}

/// A snapshot by a workspace opened now with notifications off: what a
/// walk finds.
fn walked(
    store: &hel_store::Store,
    last: &(hel_store::ObjectId, Arc<Flat>),
) -> (hel_store::ObjectId, Arc<Flat>) {
    let mut fresh = Workspace::open(store, options(false)).unwrap();
    let prev = Prev {
        tree: last.0,
        flat: &last.1,
    };
    let s = fresh.snapshot(&mut Scan, Some(prev)).unwrap();
    (s.tree, s.flat)
}

type Change = (&'static str, Box<dyn Fn(&Path)>);

#[test]
fn every_change_between_watched_snapshots_is_seen_and_only_no_change_skips_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "top.txt", b"top\n");
    write(root, "a/b/c/deep.txt", b"deep one\n");
    write(root, "a/b/side.txt", b"side\n");
    write(root, "d/e/f.txt", b"f\n");
    write(root, ".gitignore", b"*.log\n");
    write(root, "d/keep.log", b"ignored\n");
    let store = hel_store::Store::open(root).unwrap();
    let mut ws = Workspace::open(&store, options(true)).unwrap();
    let first = ws.snapshot(&mut Scan, None).unwrap();
    assert_eq!(ws.watching(), Ok(false), "not watched at the first walk");
    let first = ws
        .snapshot(
            &mut Scan,
            Some(Prev {
                tree: first.tree,
                flat: &first.flat,
            }),
        )
        .unwrap();
    let mut last = (first.tree, first.flat);
    assert_eq!(ws.walks(), 2);
    assert_eq!(
        ws.watching(),
        Ok(true),
        "a local project is watched from the second walk on"
    );
    let changes: Vec<Change> = vec![
        (
            "a new file at the top",
            Box::new(|r| write(r, "new.txt", b"new\n")),
        ),
        // Same size, and the mtime put back: only the event tells.
        (
            "a deep file rewritten in place, its mtime set back",
            Box::new(|r| {
                let p = r.join("a/b/c/deep.txt");
                let old = fs::metadata(&p).unwrap().modified().unwrap();
                fs::write(&p, b"deep two\n").unwrap();
                fs::File::options()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .set_modified(old)
                    .unwrap();
            }),
        ),
        (
            "a file made executable",
            Box::new(|r| {
                fs::set_permissions(r.join("a/b/side.txt"), fs::Permissions::from_mode(0o755))
                    .unwrap()
            }),
        ),
        (
            "a directory's mode",
            Box::new(|r| {
                fs::set_permissions(r.join("d/e"), fs::Permissions::from_mode(0o700)).unwrap()
            }),
        ),
        (
            "new nested directories with a file",
            Box::new(|r| write(r, "a/n1/n2/n3/x.txt", b"x\n")),
        ),
        (
            "a new empty directory",
            Box::new(|r| fs::create_dir(r.join("d/empty")).unwrap()),
        ),
        (
            "a directory renamed",
            Box::new(|r| fs::rename(r.join("a/b"), r.join("a/renamed")).unwrap()),
        ),
        (
            "a file in the renamed directory (watched under its old path)",
            Box::new(|r| write(r, "a/renamed/c/later.txt", b"later\n")),
        ),
        (
            "a file removed",
            Box::new(|r| fs::remove_file(r.join("top.txt")).unwrap()),
        ),
        (
            "a symlink",
            Box::new(|r| symlink("new.txt", r.join("d/link")).unwrap()),
        ),
        (
            "the .gitignore rewritten to ignore .txt files",
            Box::new(|r| write(r, ".gitignore", b"*.log\n*.txt\n")),
        ),
        (
            "the .gitignore back",
            Box::new(|r| write(r, ".gitignore", b"*.log\n")),
        ),
        (
            "a directory that becomes a repository",
            Box::new(|r| fs::create_dir(r.join("d/e/.git")).unwrap()),
        ),
        (
            "and stops being one",
            Box::new(|r| fs::remove_dir(r.join("d/e/.git")).unwrap()),
        ),
        (
            "a directory removed whole",
            Box::new(|r| fs::remove_dir_all(r.join("a/n1")).unwrap()),
        ),
        (
            "a file truncated",
            Box::new(|r| {
                fs::File::options()
                    .write(true)
                    .truncate(true)
                    .open(r.join("d/e/f.txt"))
                    .unwrap();
            }),
        ),
        (
            ".git/info/exclude written (outside every watch)",
            Box::new(|r| write(r, ".git/info/exclude", b"new.txt\n")),
        ),
    ];
    for (what, change) in &changes {
        let walks = ws.walks();
        // Nothing changed: the last result, no walk.
        let same = ws
            .snapshot(
                &mut Scan,
                Some(Prev {
                    tree: last.0,
                    flat: &last.1,
                }),
            )
            .unwrap();
        assert_eq!(same.tree, last.0, "before {what}");
        // Only a mount or unmount elsewhere on the machine may cost a walk.
        if ws.walks() != walks {
            assert_eq!(
                ws.walked_because(),
                "a mount or unmount",
                "no walk with nothing changed (before {what})"
            );
        }
        change(root);
        let snap = ws
            .snapshot(
                &mut Scan,
                Some(Prev {
                    tree: last.0,
                    flat: &last.1,
                }),
            )
            .unwrap();
        assert_eq!(ws.walks(), walks + 1, "a walk after {what}");
        let want = walked(&store, &last);
        assert_eq!(snap.flat, want.1, "after {what}");
        assert_eq!(snap.tree, want.0, "after {what}");
        assert_ne!(snap.tree, last.0, "{what} is a change");
        last = (snap.tree, snap.flat);
    }
    // A change in an ignored file's content is no change to the snapshot
    // (a walk may or may not be taken; the result is the same).
    write(root, "d/keep.log", b"ignored, changed\n");
    let snap = ws
        .snapshot(
            &mut Scan,
            Some(Prev {
                tree: last.0,
                flat: &last.1,
            }),
        )
        .unwrap();
    assert_eq!(snap.tree, last.0);
    // Another previous snapshot than the last one's: a walk.
    let walks = ws.walks();
    let other = ws.snapshot(&mut Scan, None).unwrap();
    assert_eq!(ws.walks(), walks + 1);
    assert_eq!(other.tree, last.0);
}

#[test]
fn a_watch_that_cannot_be_added_turns_notifications_off() {
    const TEST: &str = "a_watch_that_cannot_be_added_turns_notifications_off";
    if std::env::var_os("HEL_TEST_CHILD").as_deref() != Some(TEST.as_ref()) {
        // The third directory watched hits the kernel's limit.
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env("HEL_TEST_CHILD", TEST)
            .env("HEL_FAILPOINTS", "workspace-watch@3")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 passed"), "{text}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for k in 0..4 {
        write(root, &format!("d{k}/f"), b"f\n");
    }
    let store = hel_store::Store::open(root).unwrap();
    let mut ws = Workspace::open(&store, options(true)).unwrap();
    let first = ws.snapshot(&mut Scan, None).unwrap();
    let first = ws
        .snapshot(
            &mut Scan,
            Some(Prev {
                tree: first.tree,
                flat: &first.flat,
            }),
        )
        .unwrap();
    assert_eq!(
        ws.watching(),
        Err(hel_workspace::watch::Off::Limit),
        "past the limit, notifications are off"
    );
    let mut last = (first.tree, first.flat);
    // Every snapshot walks, and sees what changed.
    for k in 0..3 {
        let walks = ws.walks();
        write(
            root,
            &format!("d{k}/f"),
            format!("changed {k}\n").as_bytes(),
        );
        let snap = ws
            .snapshot(
                &mut Scan,
                Some(Prev {
                    tree: last.0,
                    flat: &last.1,
                }),
            )
            .unwrap();
        assert_eq!(ws.walks(), walks + 1);
        assert_eq!((snap.tree, snap.flat.clone()), walked(&store, &last));
        assert_ne!(snap.tree, last.0);
        last = (snap.tree, snap.flat);
        let again = ws
            .snapshot(
                &mut Scan,
                Some(Prev {
                    tree: last.0,
                    flat: &last.1,
                }),
            )
            .unwrap();
        assert_eq!(ws.walks(), walks + 2, "no result stands without watches");
        assert_eq!(again.tree, last.0);
    }
}

/// More events than the kernel queues (16,384 by default): the overflow
/// is a doubt, the walk after it sees everything, its watches are asked
/// for again (removals may have been lost with the events), and the next
/// change, in a directory made after the overflow, is seen too.
#[test]
fn a_queue_overflow_costs_a_walk_and_watching_goes_on() {
    let max: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "d/f", b"f\n");
    write(root, "old/g", b"g\n");
    let store = hel_store::Store::open(root).unwrap();
    let mut ws = Workspace::open(&store, options(true)).unwrap();
    let s = ws.snapshot(&mut Scan, None).unwrap();
    let s = ws
        .snapshot(
            &mut Scan,
            Some(Prev {
                tree: s.tree,
                flat: &s.flat,
            }),
        )
        .unwrap();
    let mut last = (s.tree, s.flat);
    assert_eq!(ws.watching(), Ok(true));
    // Each file: created, written, closed: three events.
    for k in 0..max / 3 + 100 {
        fs::write(root.join(format!("d/n{k}")), b"x").unwrap();
    }
    fs::remove_dir_all(root.join("old")).unwrap();
    write(root, "new/h", b"h\n");
    let walks = ws.walks();
    let snap = ws
        .snapshot(
            &mut Scan,
            Some(Prev {
                tree: last.0,
                flat: &last.1,
            }),
        )
        .unwrap();
    assert_eq!(ws.walks(), walks + 1);
    assert_eq!((snap.tree, snap.flat.clone()), walked(&store, &last));
    last = (snap.tree, snap.flat);
    let same = ws
        .snapshot(
            &mut Scan,
            Some(Prev {
                tree: last.0,
                flat: &last.1,
            }),
        )
        .unwrap();
    assert_eq!(same.tree, last.0);
    if ws.walks() != walks + 1 {
        assert_eq!(ws.walked_because(), "a mount or unmount");
    }
    write(root, "new/h", b"changed\n");
    let snap = ws
        .snapshot(
            &mut Scan,
            Some(Prev {
                tree: last.0,
                flat: &last.1,
            }),
        )
        .unwrap();
    assert_eq!((snap.tree, snap.flat.clone()), walked(&store, &last));
    assert_ne!(snap.tree, last.0);
}
