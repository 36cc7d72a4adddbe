//! The workspace benchmark keeps building and running on a tiny project:
//! no timing assertions, but its own checks (every file snapshotted, a
//! no-change snapshot reads nothing, `hel undo` and `git checkout` both
//! bring back exactly the earlier bytes) must hold.

use hel_bench::workspace::{self, Config};

#[test]
fn workspace_bench_runs_on_a_tiny_project() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::smoke(dir.path().join("ws"));
    let r = workspace::run(&cfg, |_| {}).expect("the workspace benchmark runs");
    assert_eq!(r.files, cfg.files);
    assert_eq!(r.restore_written, cfg.restore_files);
    assert_eq!(r.restore_conflicts, 0);
    // Every generated file's content (and .gitignore's) is stored once.
    assert!(r.first_new_bytes >= r.project_bytes && r.first_new_bytes < r.project_bytes + 100);
    assert!(r.onefile_new_bytes > 0 && r.cache_bytes > 0);
    let table = workspace::table(&r);
    assert!(table.contains("`git status`"), "{table}");
    assert!(
        !dir.path().join("ws/project").exists(),
        "the project is removed"
    );
}
