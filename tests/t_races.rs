//! The file tools' boundary under attack: names swapped between a file and
//! links outside the project or into `.hel/` while the model reads and
//! writes them, and every kind of link and path, through the whole program.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::common::*;
use serde_json::json;

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// Atomically exchange two names (renameat2 RENAME_EXCHANGE).
fn exchange(a: &Path, b: &Path) {
    let (a, b) = (c(a), c(b));
    // SAFETY: valid C strings; renameat2(2) only renames.
    unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
}

/// Until `stop`, make `flip` in turn a regular file, a link to `outside`,
/// a link to `store_file`, and a FIFO (each put in place by an atomic
/// rename), and exchange the directory `dir` with `dir_alt` (a link to a
/// directory outside).
fn flipper(
    project: PathBuf,
    outside: PathBuf,
    store_file: String,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let tmp = project.join(format!(".flip-{n}"));
            let _ = match n % 4 {
                0 => std::fs::write(&tmp, "inside\n"),
                1 => symlink(&outside, &tmp),
                2 => symlink(&store_file, &tmp),
                _ => {
                    let t = c(&tmp);
                    // SAFETY: a valid C string; mkfifo(3) only creates the node.
                    unsafe { libc::mkfifo(t.as_ptr(), 0o644) };
                    Ok(())
                }
            };
            let _ = std::fs::rename(&tmp, project.join("flip.txt"));
            exchange(&project.join("d"), &project.join("d-alt"));
        }
        n
    })
}

#[test]
fn swaps_during_hundreds_of_tool_calls_never_reach_outside_or_the_store() {
    let p = Project::new();
    // Another session's journal (where its head is) in the store.
    let mock = Mock::start(json!([{"content": "first"}]));
    let first = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let ref_rel = format!(".hel/packs/journals/{}.journal", first.session());
    let ref_before = std::fs::read(p.path().join(&ref_rel)).unwrap();
    let listed: serde_json::Value =
        serde_json::from_str(&p.run(None, &["sessions", "--json"]).stdout).unwrap();
    let ref_hex = listed[0]["head"].as_str().unwrap().to_owned();
    assert!(ref_hex.len() >= 32, "{listed}");

    let outside = Outside::new();
    let fingerprint = outside.fingerprint();
    p.write("flip.txt", "inside\n");
    p.write("d/precious.txt", "inside copy\n");
    symlink(outside.path(), p.path().join("d-alt")).unwrap();

    let mut calls = Vec::new();
    for _ in 0..40 {
        calls.extend([
            call("read_file", json!({"path": "flip.txt"})),
            call(
                "write_file",
                json!({"path": "flip.txt", "content": "inside\n"}),
            ),
            call(
                "search_replace",
                json!({"path": "flip.txt", "search": "do not touch", "replace": "TOUCHED"}),
            ),
            call(
                "search_replace",
                json!({"path": "flip.txt", "search": ref_hex, "replace": "0000"}),
            ),
            call("read_file", json!({"path": "d/precious.txt"})),
            call(
                "write_file",
                json!({"path": "d/new.txt", "content": "new\n"}),
            ),
            call(
                "search_replace",
                json!({"path": "d/precious.txt", "search": "touch", "replace": "TOUCH"}),
            ),
            call("grep", json!({"pattern": "touch|nor this", "path": "d"})),
            call("glob", json!({"pattern": "**/*.txt"})),
        ]);
    }
    let n_calls = calls.len();
    let mock = Mock::start(json!([{"tool_calls": calls}, {"content": "done"}]));
    let stop = Arc::new(AtomicBool::new(false));
    let flips = flipper(
        p.path(),
        outside.path().join("precious.txt"),
        ref_rel.clone(),
        stop.clone(),
    );
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    stop.store(true, Ordering::Relaxed);
    let flips = flips.join().unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);

    assert_eq!(outside.fingerprint(), fingerprint, "outside was written");
    assert!(
        std::fs::read(p.path().join(&ref_rel)).unwrap() == ref_before,
        "the other session's journal changed"
    );
    let results = tool_results(&mock, 1);
    assert_eq!(results.len(), n_calls);
    let (mut ok, mut refused) = (0, 0);
    for r in &results {
        for secret in ["do not touch", "nor this", "also.txt", &ref_hex] {
            assert!(!r.contains(secret), "a result shows {secret:?}: {r}");
        }
        if r == "inside\n" || r == "inside copy\n" {
            ok += 1;
        }
        if r.contains("outside the project") || r.contains(".hel/") || r.contains("FIFO") {
            refused += 1;
        }
    }
    eprintln!("{n_calls} calls during {flips} swaps: {ok} clean reads, {refused} refusals");
    assert!(
        flips > 100 && ok > 0 && refused > 0,
        "{flips} {ok} {refused}"
    );
}

#[test]
fn file_tools_follow_links_inside_and_refuse_the_rest() {
    let p = Project::new();
    let outside = Outside::new();
    let fingerprint = outside.fingerprint();
    let root = p.path();
    p.write("src/a.txt", "alpha\n");
    p.write("run.sh", "echo old\n");
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o751)).unwrap();
    std::fs::create_dir_all(root.join(".hel")).unwrap();
    std::fs::write(root.join(".hel/secret"), "STORE\n").unwrap();
    symlink("src/a.txt", root.join("rel-in")).unwrap();
    symlink(root.join("src"), root.join("abs-dir-in")).unwrap();
    symlink(outside.path().join("precious.txt"), root.join("out")).unwrap();
    symlink(outside.path(), root.join("out-dir")).unwrap();
    symlink(".hel/secret", root.join("store")).unwrap();
    symlink(outside.path().join("made.txt"), root.join("dangling-out")).unwrap();
    symlink(".hel/made", root.join("dangling-store")).unwrap();
    symlink("src/made.txt", root.join("dangling-in")).unwrap();
    let abs_inside = root.join("src/a.txt").display().to_string();
    let abs_outside = outside.path().join("precious.txt").display().to_string();
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("read_file", json!({"path": "rel-in"})),
            call("read_file", json!({"path": "abs-dir-in/a.txt"})),
            call("read_file", json!({"path": abs_inside})),
            call("read_file", json!({"path": abs_outside})),
            call("read_file", json!({"path": "src/../../x"})),
            call("read_file", json!({"path": "out"})),
            call("read_file", json!({"path": "out-dir/sub/also.txt"})),
            call("read_file", json!({"path": "store"})),
            call("write_file", json!({"path": "rel-in", "content": "through the link\n"})),
            call("write_file", json!({"path": "out", "content": "x"})),
            call("write_file", json!({"path": "out-dir/new.txt", "content": "x"})),
            call("write_file", json!({"path": "store", "content": "x"})),
            call("write_file", json!({"path": "dangling-out", "content": "x"})),
            call("write_file", json!({"path": "dangling-store", "content": "x"})),
            call("write_file", json!({"path": "dangling-in", "content": "made\n"})),
            call("write_file", json!({"path": "new/deep/f.txt", "content": "deep\n"})),
            call("write_file", json!({"path": "run.sh", "content": "echo new\n"})),
            call("search_replace", json!({"path": "out", "search": "do not touch", "replace": "x"})),
            call("grep", json!({"pattern": ".", "path": "out-dir"})),
            call("glob", json!({"pattern": "**/*", "path": "store"})),
        ]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = tool_results(&mock, 1);
    assert_eq!(r[0], "alpha\n");
    assert_eq!(r[1], "alpha\n");
    assert_eq!(r[2], "alpha\n");
    for (i, what) in [
        (3, "outside the project"),
        (4, "outside the project"),
        (5, "outside the project"),
        (6, "outside the project"),
        (7, "leads into .hel/"),
    ] {
        assert!(
            r[i].contains(what) && r[i].contains("refused"),
            "{i}: {}",
            r[i]
        );
    }
    assert_eq!(r[8], "wrote 17 bytes to rel-in");
    assert_eq!(p.read("src/a.txt"), "through the link\n");
    assert!(root
        .join("rel-in")
        .symlink_metadata()
        .unwrap()
        .file_type()
        .is_symlink());
    for i in [9, 10, 12, 17, 18] {
        assert!(r[i].contains("outside the project"), "{i}: {}", r[i]);
    }
    for i in [11, 13] {
        assert!(r[i].contains(".hel/"), "{i}: {}", r[i]);
    }
    assert!(r[19].contains(".hel/"), "{}", r[19]);
    assert_eq!(p.read("src/made.txt"), "made\n");
    assert_eq!(p.read("new/deep/f.txt"), "deep\n");
    assert_eq!(p.read("run.sh"), "echo new\n");
    let mode = std::fs::metadata(root.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o751);
    assert_eq!(outside.fingerprint(), fingerprint);
    assert_eq!(p.read(".hel/secret"), "STORE\n");
    assert!(!root.join(".hel/made").exists());
}
