//! Snapshots against a real store: what is recorded, what a change costs,
//! what the stat cache spares, and what is left out.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use hel_store::tree::EntryKind;
use hel_store::{CommitInput, Record, SessionLease, SessionState, Store};
use hel_workspace::snapshot::NotTracked;
use hel_workspace::{Flat, Options, Prev, Snapshot, Workspace};

struct Session {
    store: Store,
    lease: SessionLease,
    state: SessionState,
    last: Option<(hel_store::ObjectId, Arc<Flat>)>,
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
        txn.commit(start_record(snap.tree, snap.not_tracked.len() as u64))
            .unwrap();
        self.last = Some((snap.tree, snap.flat.clone()));
        (snap, objects)
    }
}

/// A start record of a test session whose files are `tree`.
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

/// Every directory `flat` records as a directory is listed whole: its
/// entries are exactly the names on disk (but `.git`, `.hel`, `.jj`).
fn assert_whole(root: &Path, flat: &Flat) {
    let mut dirs: Vec<Vec<u8>> = vec![Vec::new()];
    dirs.extend(
        flat.items
            .iter()
            .filter(|(_, i)| i.kind == EntryKind::Dir)
            .map(|(p, _)| p.clone()),
    );
    for dir in dirs {
        let on_disk = root.join(std::ffi::OsStr::from_bytes(&dir));
        let mut want: Vec<Vec<u8>> = fs::read_dir(&on_disk)
            .unwrap()
            .map(|e| e.unwrap().file_name().as_bytes().to_vec())
            .filter(|n| !hel_store::tree::is_never(n))
            .collect();
        want.sort();
        let prefix = if dir.is_empty() {
            Vec::new()
        } else {
            [dir.as_slice(), b"/"].concat()
        };
        let got: Vec<Vec<u8>> = flat
            .items
            .keys()
            .filter_map(|p| p.strip_prefix(prefix.as_slice()))
            .filter(|rest| !rest.is_empty() && !rest.contains(&b'/'))
            .map(<[u8]>::to_vec)
            .collect();
        assert_eq!(got, want, "directory {:?}", String::from_utf8_lossy(&dir));
    }
}

#[test]
fn records_files_links_modes_and_what_it_does_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", b"hello\n");
    write(root, "src/main.rs", b"fn main() {}\n");
    write(root, "run.sh", b"#!/bin/sh\n");
    fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o750)).unwrap();
    symlink("a.txt", root.join("link")).unwrap();
    symlink("/etc/passwd", root.join("outside")).unwrap();
    fs::create_dir(root.join("empty")).unwrap();
    write(root, ".gitignore", b"*.log\nbuild/\n");
    write(root, "debug.log", b"noise");
    write(root, "build/out.o", b"obj");
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
            ..Options::default()
        },
    )
    .unwrap();
    let (snap, _) = s.snap(&mut ws);
    let f: &Flat = &snap.flat;
    assert_eq!(kind(f, "a.txt"), Some(EntryKind::File));
    assert_eq!(f.get(b"run.sh").unwrap().mode, 0o750);
    assert_eq!(kind(f, "src"), Some(EntryKind::Dir));
    assert_eq!(kind(f, "empty"), Some(EntryKind::Dir));
    let link = f.get(b"outside").unwrap();
    assert_eq!((link.kind, link.size), (EntryKind::Symlink, 11));
    assert_eq!(
        hel_store::testing::read_blob(&s.store, &link.id).unwrap(),
        b"/etc/passwd"
    );
    assert_eq!(kind(f, "vendor/lib"), Some(EntryKind::Repository));
    assert_eq!(kind(f, "vendor/lib/code.c"), None);
    // Ignored paths are seen, not read: a file as kind 4, a directory as
    // kind 6, never entered.
    assert_eq!(kind(f, "debug.log"), Some(EntryKind::NotTracked));
    assert_eq!(f.get(b"debug.log").unwrap().size, 0);
    assert_eq!(kind(f, "build"), Some(EntryKind::NotTrackedDir));
    assert_eq!(kind(f, "build/out.o"), None);
    assert_eq!(kind(f, ".gitignore"), Some(EntryKind::File));
    assert_eq!(kind(f, ".git"), None);
    assert_eq!(kind(f, ".git/config"), None);
    assert!(!f.items.keys().any(|p| p.starts_with(b".hel")));
    // A FIFO is seen, never opened.
    assert_eq!(kind(f, "fifo"), Some(EntryKind::NotTracked));
    assert_eq!(kind(f, "big.bin"), Some(EntryKind::NotTracked));
    // Only what could not be recorded is told: not what was ignored.
    assert_eq!(
        snap.not_tracked,
        [(b"big.bin".to_vec(), NotTracked::TooLarge { size: 5000 })]
    );
    assert_whole(root, f);
    // What was committed reads back as the same map.
    assert_eq!(&Flat::read(&s.store, &snap.tree).unwrap(), f);
    assert_eq!(
        hel_store::testing::read_blob(&s.store, &f.get(b"src/main.rs").unwrap().id).unwrap(),
        b"fn main() {}\n"
    );
    let fsck = hel_store::fsck::fsck(&s.store).unwrap();
    assert!(fsck.is_sound(), "{fsck:?}");
}

#[test]
fn a_rewritten_gitignore_turns_not_tracked_paths_into_tracked_ones() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".gitignore", b"secret.env\nbuild/\n");
    write(root, "secret.env", b"KEY=1\n");
    write(root, "build/out.o", b"obj");
    let mut s = Session::new(root);
    let mut ws = Workspace::open(&s.store, Options::default()).unwrap();
    let (before, _) = s.snap(&mut ws);
    // The start of an instruction knows these paths exist: an undo can
    // never take them for the instruction's own.
    assert_eq!(
        kind(&before.flat, "secret.env"),
        Some(EntryKind::NotTracked)
    );
    assert_eq!(kind(&before.flat, "build"), Some(EntryKind::NotTrackedDir));
    write(root, ".gitignore", b"");
    let (after, _) = s.snap(&mut ws);
    assert_eq!(kind(&after.flat, "secret.env"), Some(EntryKind::File));
    assert_eq!(kind(&after.flat, "build"), Some(EntryKind::Dir));
    assert_eq!(kind(&after.flat, "build/out.o"), Some(EntryKind::File));
    assert_whole(root, &after.flat);
    assert_eq!(&Flat::read(&s.store, &after.tree).unwrap(), &*after.flat);
    let changed: Vec<String> = hel_workspace::diff::changes(&before.flat, &after.flat)
        .iter()
        .map(|c| format!("{} {}", String::from_utf8_lossy(&c.path), c.status.as_str()))
        .collect();
    assert_eq!(
        changed,
        [
            ".gitignore modified",
            "build type_changed",
            "build/out.o added",
            "secret.env modified"
        ]
    );
}

#[test]
fn empty_directories_made_between_snapshots_in_any_position() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a/f.txt", b"f");
    write(root, "g.txt", b"g");
    let mut s = Session::new(root);
    let mut ws = Workspace::open(&s.store, Options::default()).unwrap();
    s.snap(&mut ws);
    // During an instruction: an empty directory at the top, one inside a
    // directory, empty ones nested in a new one, a file replaced by one.
    for d in ["e", "a/e", "n/m/o", "n/p"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::remove_file(root.join("g.txt")).unwrap();
    fs::create_dir(root.join("g.txt")).unwrap();
    let (second, _) = s.snap(&mut ws);
    for d in ["e", "a/e", "n", "n/m", "n/m/o", "n/p", "g.txt"] {
        assert_eq!(kind(&second.flat, d), Some(EntryKind::Dir), "{d}");
    }
    assert_eq!(&Flat::read(&s.store, &second.tree).unwrap(), &*second.flat);
    // Every later snapshot works: in this process, and in a new one that
    // builds on what the store holds (a resume).
    let (third, objects) = s.snap(&mut ws);
    assert_eq!((third.tree, objects), (second.tree, 0));
    fs::create_dir(root.join("n/m/o/deeper")).unwrap();
    let mut ws2 = Workspace::open(&s.store, Options::default()).unwrap();
    s.last = Some((
        third.tree,
        Arc::new(Flat::read(&s.store, &third.tree).unwrap()),
    ));
    let (fourth, _) = s.snap(&mut ws2);
    assert_eq!(kind(&fourth.flat, "n/m/o/deeper"), Some(EntryKind::Dir));
    assert_eq!(&Flat::read(&s.store, &fourth.tree).unwrap(), &*fourth.flat);
    let fsck = hel_store::fsck::fsck(&s.store).unwrap();
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
    assert_eq!(
        hel_store::testing::read_blob(&s.store, &id).unwrap(),
        b"1 X\n"
    );
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
        ..Options::default()
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
    let f: &Flat = &snap.flat;
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

/// The environment variable that makes this test binary, run again, do a
/// test's work in a process of its own (a lowered descriptor limit, a
/// failpoint, another user).
const CHILD: &str = "HEL_SNAPSHOT_TEST_CHILD";

/// Run test `test` of this binary again in a child process with `env`
/// (and `CHILD` set to `test`), as `user` (uid, gid) when given; its
/// output when it passed. `None` when the child cannot be started as that
/// user.
fn in_child(test: &str, env: &[(&str, &str)], user: Option<(u32, u32)>) -> Option<String> {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        .env_remove("HEL_FAILPOINTS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some((uid, gid)) = user {
        // std drops the supplementary groups too (setgroups(0)) when root.
        cmd.uid(uid).gid(gid);
    }
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) if user.is_some() => {
            eprintln!("cannot start a child as uid {user:?}: {e}");
            return None;
        }
        Err(e) => panic!("cannot run {test} in a child: {e}"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{test} failed in its child:\n{text}");
    assert!(
        text.contains("1 passed"),
        "{test} did not run in its child:\n{text}"
    );
    Some(text)
}

fn is_child(test: &str) -> bool {
    std::env::var(CHILD).is_ok_and(|c| c == test)
}

/// Descriptors this process has open now.
fn open_fds() -> usize {
    fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

#[test]
fn two_thousand_sibling_directories_under_a_limit_of_64_descriptors() {
    const TEST: &str = "two_thousand_sibling_directories_under_a_limit_of_64_descriptors";
    if !is_child(TEST) {
        let out = in_child(TEST, &[], None).unwrap_or_default();
        for line in out
            .lines()
            .filter_map(|l| l.find("descriptors:").map(|k| &l[k..]))
        {
            println!("{line}");
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for k in 0..2000 {
        write(root, &format!("d{k:04}/f.txt"), format!("{k}\n").as_bytes());
    }
    // Nested too, so that directories wait with their parents open.
    for k in 0..40 {
        write(root, &format!("deep/{}/f.txt", "n/".repeat(k)), b"x");
    }
    rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: Some(64),
            maximum: Some(64),
        },
    )
    .unwrap();
    let mut s = Session::new(root);
    let mut ws = Workspace::open(&s.store, Options::default()).unwrap();
    let base = open_fds();
    // Count descriptors while the walk runs.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (snap, peak) = std::thread::scope(|sc| {
        let sampler = sc.spawn(|| {
            let mut peak = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(open_fds());
            }
            peak
        });
        let snap = s.snap(&mut ws).0;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (snap, sampler.join().unwrap())
    });
    let f: &Flat = &snap.flat;
    for k in 0..2000 {
        assert_eq!(
            kind(f, &format!("d{k:04}")),
            Some(EntryKind::Dir),
            "d{k:04}"
        );
        assert_eq!(kind(f, &format!("d{k:04}/f.txt")), Some(EntryKind::File));
    }
    assert_eq!(
        kind(f, &format!("deep/{}f.txt", "n/".repeat(39))),
        Some(EntryKind::File)
    );
    assert!(snap.not_tracked.is_empty(), "{:?}", &snap.not_tracked[..3]);
    assert_whole(root, f);
    // The walk's own: shared directories, and three a thread (its
    // directory, the listing, a file), the caller's thread included; the
    // sampler's listing of /proc/self/fd is one more.
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    let bound = hel_workspace::walk::SHARED_FDS + 3 * (threads + 1) + 1;
    println!("descriptors: {base} before the walk, at most {peak} during it (bound {bound} over)");
    assert!(
        peak <= base + bound,
        "{peak} descriptors open, {base} before"
    );
}

#[test]
fn unreadable_directories_and_files_are_not_tracked_never_left_out() {
    const TEST: &str = "unreadable_directories_and_files_are_not_tracked_never_left_out";
    let Ok(project) = std::env::var("HEL_TEST_PROJECT") else {
        // The parent: a project with a directory of mode 000, one that can
        // be listed but not entered (0o600) and a file of mode 000. Root
        // reads them all, so the walk runs as nobody.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "ok.txt", b"ok");
        write(root, "secret/file", b"mine");
        write(root, "noexec/file", b"mine too");
        write(root, "locked.txt", b"small");
        fs::set_permissions(root.join("secret"), fs::Permissions::from_mode(0o000)).unwrap();
        fs::set_permissions(root.join("noexec"), fs::Permissions::from_mode(0o600)).unwrap();
        fs::set_permissions(root.join("locked.txt"), fs::Permissions::from_mode(0o000)).unwrap();
        let env = [("HEL_TEST_PROJECT", root.to_str().unwrap())];
        let euid = rustix::process::geteuid();
        let ran = if euid.is_root() {
            let nobody = (65534, 65534);
            for p in [
                root,
                &root.join("ok.txt"),
                &root.join("secret"),
                &root.join("noexec"),
            ] {
                std::os::unix::fs::lchown(p, Some(nobody.0), Some(nobody.1)).unwrap();
            }
            for p in ["secret/file", "noexec/file", "locked.txt"] {
                std::os::unix::fs::lchown(root.join(p), Some(nobody.0), Some(nobody.1)).unwrap();
            }
            let out = in_child(TEST, &env, Some(nobody));
            if out.is_some() {
                println!("ran as nobody (65534)");
            }
            out
        } else {
            in_child(TEST, &env, None)
        };
        if ran.is_none() {
            eprintln!(
                "SKIPPED {TEST}: running as root, and a child cannot drop to nobody (65534) here, \
                 so mode 000 would not keep anything unreadable"
            );
        }
        // Give the parent back what it may remove.
        for p in ["secret", "noexec", "locked.txt"] {
            let _ = fs::set_permissions(root.join(p), fs::Permissions::from_mode(0o700));
        }
        return;
    };
    if !is_child(TEST) {
        return;
    }
    let root = Path::new(&project);
    let mut s = Session::new(root);
    let mut ws = Workspace::open(&s.store, Options::default()).unwrap();
    let (snap, _) = s.snap(&mut ws);
    let f: &Flat = &snap.flat;
    assert_eq!(kind(f, "ok.txt"), Some(EntryKind::File));
    assert_eq!(kind(f, "secret"), Some(EntryKind::NotTrackedDir));
    assert_eq!(kind(f, "secret/file"), None);
    assert_eq!(kind(f, "noexec"), Some(EntryKind::NotTrackedDir));
    assert_eq!(kind(f, "noexec/file"), None);
    assert_eq!(kind(f, "locked.txt"), Some(EntryKind::NotTracked));
    let mut told: Vec<(&[u8], bool)> = snap
        .not_tracked
        .iter()
        .map(|(p, why)| (p.as_slice(), matches!(why, NotTracked::Unreadable(_))))
        .collect();
    told.sort();
    assert_eq!(
        told,
        [
            (&b"locked.txt"[..], true),
            (&b"noexec"[..], true),
            (&b"secret"[..], true)
        ],
        "{:?}",
        snap.not_tracked
    );
    assert_eq!(&Flat::read(&s.store, &snap.tree).unwrap(), f);
}

#[test]
fn a_listing_that_fails_part_way_is_a_directory_not_read_never_a_partial_one() {
    const TEST: &str = "a_listing_that_fails_part_way_is_a_directory_not_read_never_a_partial_one";
    if !is_child(TEST) {
        // The second directory listed is `d` (the project's own is the
        // first): its listing fails after its first entry.
        in_child(TEST, &[("HEL_FAILPOINTS", "walk-readdir@2")], None);
        // At the project directory itself the snapshot fails whole.
        in_child(
            "a_listing_of_the_project_that_fails_fails_the_snapshot",
            &[("HEL_FAILPOINTS", "walk-readdir@1")],
            None,
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "top.txt", b"t");
    for k in 0..5 {
        write(root, &format!("d/f{k}"), b"x");
    }
    let mut s = Session::new(root);
    let mut ws = Workspace::open(&s.store, Options::default()).unwrap();
    let (snap, _) = s.snap(&mut ws);
    let f: &Flat = &snap.flat;
    assert_eq!(kind(f, "top.txt"), Some(EntryKind::File));
    assert_eq!(kind(f, "d"), Some(EntryKind::NotTrackedDir));
    assert!(
        !f.items.keys().any(|p| p.starts_with(b"d/")),
        "{:?}",
        f.items.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        snap.not_tracked,
        [(
            b"d".to_vec(),
            NotTracked::Unreadable("failpoint walk-readdir".into())
        )]
    );
    assert_eq!(&Flat::read(&s.store, &snap.tree).unwrap(), f);
}

#[test]
fn a_listing_of_the_project_that_fails_fails_the_snapshot() {
    if !is_child("a_listing_of_the_project_that_fails_fails_the_snapshot") {
        return; // run by the test above, in a child
    }
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "top.txt", b"t");
    let s = Session::new(dir.path());
    let mut ws = Workspace::open(&s.store, Options::default()).unwrap();
    let e = ws.snapshot(&mut hel_workspace::Scan, None).unwrap_err();
    assert!(e.to_string().contains("failpoint walk-readdir"), "{e}");
}

#[test]
fn past_the_path_budget_directories_are_not_read_and_the_rest_is_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for d in 0..10 {
        for k in 0..10 {
            write(root, &format!("d{d}/f{k}"), b"x");
        }
    }
    let mut s = Session::new(root);
    let mut ws = Workspace::open(&s.store, Options::default()).unwrap();
    ws.limit_paths(45, 1 << 20);
    let (snap, _) = s.snap(&mut ws);
    let f: &Flat = &snap.flat;
    assert!(f.items.len() <= 45, "{}", f.items.len());
    // The 10 directories are recorded, 3 of them listed (10 + 3 × 10).
    let listed = (0..10)
        .filter(|d| kind(f, &format!("d{d}")) == Some(EntryKind::Dir))
        .count();
    let not_read = (0..10)
        .filter(|d| kind(f, &format!("d{d}")) == Some(EntryKind::NotTrackedDir))
        .count();
    assert_eq!((listed, not_read), (3, 7));
    assert_eq!(snap.not_tracked.len(), 7);
    assert!(snap
        .not_tracked
        .iter()
        .all(|(_, why)| *why == NotTracked::PastPaths));
    assert_whole(root, f);
    assert_eq!(&Flat::read(&s.store, &snap.tree).unwrap(), f);
    // A byte budget works the same way: 10 names of 2 bytes, one
    // directory's 10 paths of 5 bytes.
    ws.limit_paths(1000, 20 + 50);
    s.last = None;
    let (snap, _) = s.snap(&mut ws);
    let listed = (0..10)
        .filter(|d| kind(&snap.flat, &format!("d{d}")) == Some(EntryKind::Dir))
        .count();
    assert_eq!(listed, 1);
    assert_whole(root, &snap.flat);
}

/// A diff of two trees (what undo reads of every record after its target)
/// is bounded like a flattening: a tree naming one subtree a thousand
/// times on each of three levels (10^9 paths in four small trees) is
/// refused naming it, after reading at most what one tree may flatten to.
#[test]
fn a_diff_against_a_tree_bomb_is_refused_naming_the_tree() {
    use hel_store::tree::{Entry, Tree};
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::new(dir.path());
    let mut txn = s.store.begin(&s.lease, &mut s.state).unwrap();
    let blob = txn.put_blob(b"x").unwrap();
    let file = Entry {
        name: b"f".to_vec(),
        kind: EntryKind::File,
        mode: 0o644,
        size: 1,
        id: blob,
    };
    let mut level = txn
        .put_tree(&Tree {
            entries: vec![file],
        })
        .unwrap();
    for _ in 0..3 {
        let mut t = Tree::default();
        for k in 0..1000 {
            t.entries.push(Entry {
                name: format!("d{k:04}").into_bytes(),
                kind: EntryKind::Dir,
                mode: 0o755,
                size: 0,
                id: level,
            });
        }
        level = txn.put_tree(&t).unwrap();
    }
    let empty = txn.put_tree(&Tree::default()).unwrap();
    txn.commit(start_record(level, 0)).unwrap();
    let mut paths = 0u64;
    let err = hel_workspace::history::tree_diff(&s.store, &empty, &level, |_, _, _| paths += 1)
        .unwrap_err();
    assert!(
        matches!(&err, hel_workspace::history::HistoryError::Store(hel_store::Error::TreeTooLarge { tree, .. }) if *tree == level),
        "{err}"
    );
    assert!(err.to_string().contains(&level.to_string()), "{err}");
    assert!(paths <= hel_store::tree::FLAT_PATHS_MAX, "{paths}");
}

/// `not_tracked` counts over the whole tree, and fsck refuses a record
/// that says more than its tree lists as not tracked (objects-spec §10.2).
#[test]
fn fsck_refuses_a_record_counting_more_not_tracked_paths_than_its_tree_has() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "deep/er/huge.bin", &vec![3u8; 5000]);
    write(root, "small.txt", b"x");
    let options = Options {
        max_file: 1000,
        budget: 3000,
        ..Options::default()
    };
    let mut s = Session::new(root);
    let mut ws = Workspace::open(&s.store, options).unwrap();
    let (snap, _) = s.snap(&mut ws);
    // Not at the root: the count is of the whole tree.
    assert_eq!(snap.not_tracked.len(), 1);
    assert!(hel_store::fsck::fsck(&s.store).unwrap().is_sound());
    let txn = s.store.begin(&s.lease, &mut s.state).unwrap();
    let lie = txn.commit(start_record(snap.tree, 2)).unwrap().id;
    let report = hel_store::fsck::fsck(&s.store).unwrap();
    let faults: Vec<String> = report.faults.iter().map(|f| f.to_string()).collect();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(
        faults[0].contains(&lie.to_hex())
            && faults[0].contains("workspace.not_tracked is 2, its tree has 1 not-tracked entries"),
        "{faults:?}"
    );
}
