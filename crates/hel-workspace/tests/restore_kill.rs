//! A restore killed with SIGKILL at its K-th rename leaves every file with
//! its old or its new content, whole, and temporaries only in
//! `.hel/workspace/tmp/`; the next restore finishes the job and removes
//! them.
//!
//! The test re-runs this test binary as a child (`child`, which does
//! nothing unless `HEL_RESTORE_KILL_CHILD` names a project) with
//! `HEL_FAILPOINTS=restore-rename@K`: the restore kills its own process
//! right before its K-th rename.

use std::collections::BTreeSet;
use std::fs;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

use hel_store::tree::EntryKind;
use hel_store::{CommitInput, SessionState, Store};
use hel_workspace::restore::{apply, Change};
use hel_workspace::{FileStat, Item};

const CHILD: &str = "HEL_RESTORE_KILL_CHILD";
const FILES: usize = 50;
const OLD_MODE: u32 = 0o644;

fn rel(i: usize) -> String {
    format!("d{}/f{i:02}", i % 5)
}

/// Old and new contents differ in bytes and length.
fn old(i: usize) -> Vec<u8> {
    format!("old {i}\n").repeat(i * 37 + 1).into_bytes()
}

fn new(i: usize) -> Vec<u8> {
    format!("NEW content of file {i}\n")
        .repeat(i * 53 + 2)
        .into_bytes()
}

fn new_mode(i: usize) -> u16 {
    if i.is_multiple_of(2) {
        0o600
    } else {
        0o755
    }
}

/// Every file from what is on disk now to its new content.
fn plan(project: &Path) -> Vec<Change> {
    let fd = fs::File::open(project).unwrap();
    (0..FILES)
        .map(|i| {
            let path = rel(i).into_bytes();
            let stat = FileStat::at(fd.as_fd(), &path).unwrap();
            let bytes = fs::read(project.join(rel(i))).unwrap();
            let item = |bytes: &[u8], mode| Item {
                kind: EntryKind::File,
                mode,
                size: bytes.len() as u64,
                id: hel_store::blob_id(bytes),
            };
            Change {
                path,
                now: Some(item(&bytes, stat.perm())),
                stat: Some(stat),
                target: Some(item(&new(i), new_mode(i))),
            }
        })
        .collect()
}

/// A project holding the old files, and a store holding the new ones.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..FILES {
        let p = dir.path().join(rel(i));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, old(i)).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(OLD_MODE)).unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut txn = store.begin(&lease, &mut state).unwrap();
    for i in 0..FILES {
        assert_eq!(txn.put_blob(&new(i)).unwrap(), hel_store::blob_id(&new(i)));
    }
    txn.commit(
        CommitInput::new(
            hel_store::Record::Answer,
            &[],
            &[],
            "/project",
            hel_store::SessionRecord::of(hel_store::RequestConfig::bare("test", "m")),
        )
        .why("test"),
    )
    .unwrap();
    dir
}

/// Every path under `dir` (relative), not entering `.hel`.
fn walk(dir: &Path, under: &str, out: &mut BTreeSet<String>) {
    for e in fs::read_dir(dir.join(under)).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let rel = if under.is_empty() {
            name.clone()
        } else {
            format!("{under}/{name}")
        };
        if rel == ".hel" {
            continue;
        }
        out.insert(rel.clone());
        if e.file_type().unwrap().is_dir() {
            walk(dir, &rel, out);
        }
    }
}

fn temps(project: &Path) -> Vec<String> {
    fs::read_dir(project.join(".hel/workspace/tmp"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// Check every file is whole, old or new; return which are new.
fn check(project: &Path) -> Vec<usize> {
    let mut expect = BTreeSet::new();
    for i in 0..FILES {
        expect.insert(rel(i));
        expect.insert(format!("d{}", i % 5));
    }
    let mut found = BTreeSet::new();
    walk(project, "", &mut found);
    assert_eq!(found, expect, "a stray or missing path in the project");
    let mut new_ones = Vec::new();
    for i in 0..FILES {
        let p = project.join(rel(i));
        let bytes = fs::read(&p).unwrap();
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        if bytes == new(i) {
            assert_eq!(mode, u32::from(new_mode(i)), "{}", rel(i));
            new_ones.push(i);
        } else {
            assert!(bytes == old(i), "{} is torn: {} bytes", rel(i), bytes.len());
            assert_eq!(mode, OLD_MODE, "{}", rel(i));
        }
    }
    new_ones
}

#[test]
fn child() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let dir = Path::new(&dir);
    let store = Store::open(dir).unwrap();
    let project = fs::File::open(dir).unwrap();
    let a = apply(project.as_fd(), &store, &plan(dir)).unwrap();
    assert_eq!(a.done.len(), FILES);
}

#[test]
fn sigkill_at_any_rename_leaves_every_file_old_or_new() {
    let exe = std::env::current_exe().unwrap();
    for k in [1, 2, 17, FILES, FILES + 1] {
        let dir = project();
        let status = Command::new(&exe)
            .args(["--exact", "child", "--nocapture", "--test-threads=1"])
            .env(CHILD, dir.path())
            .env("HEL_FAILPOINTS", format!("restore-rename@{k}"))
            .status()
            .unwrap();
        let renamed = (k - 1).min(FILES);
        if k <= FILES {
            assert_eq!(status.signal(), Some(9), "k={k}: {status:?}");
        } else {
            assert!(status.success(), "k={k}: {status:?}");
        }
        // Renames go in path order (all files are equally deep): exactly
        // the first k-1 are new.
        let mut order: Vec<usize> = (0..FILES).collect();
        order.sort_by_key(|&i| rel(i));
        let mut expect_new = order[..renamed].to_vec();
        expect_new.sort();
        assert_eq!(check(dir.path()), expect_new, "k={k}");
        // Every temporary not yet renamed is left in tmp, nowhere else.
        assert_eq!(temps(dir.path()).len(), FILES - renamed, "k={k}");
        assert!(temps(dir.path()).iter().all(|n| n.starts_with("restore-")));

        // The next restore finishes, and removes the dead one's temporaries.
        let store = Store::open(dir.path()).unwrap();
        let project = fs::File::open(dir.path()).unwrap();
        let a = apply(project.as_fd(), &store, &plan(dir.path())).unwrap();
        assert_eq!(a.done.len(), FILES - renamed, "k={k}");
        assert!(a.skipped.is_empty(), "k={k}: {:?}", a.skipped);
        assert_eq!(check(dir.path()), (0..FILES).collect::<Vec<_>>(), "k={k}");
        assert_eq!(temps(dir.path()), Vec::<String>::new(), "k={k}");
    }
}
