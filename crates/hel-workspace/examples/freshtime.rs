//! The steps of a new process's snapshot with nothing changed, timed
//! (issue 24): `cargo run --release -p hel-workspace --example freshtime -- PROJECT`.
use hel_workspace::{cache::Cache, Options, Prev, Scan, Workspace};
use std::os::fd::AsFd;
use std::time::Instant;

fn main() {
    let root = std::path::PathBuf::from(std::env::args().nth(1).expect("PROJECT"));
    for notify in [false, true, false, true] {
        let t = Instant::now();
        let store = hel_store::Store::open(&root).unwrap();
        let opened = t.elapsed();
        let (dir, _) = store.workspace_dir().unwrap();
        let tree = Cache::load(dir.as_fd())
            .root()
            .expect("a cache with a tree");
        let t = Instant::now();
        let mut ws = Workspace::open(
            &store,
            Options {
                notify,
                ..Options::default()
            },
        )
        .unwrap();
        let ws_open = t.elapsed();
        let t = Instant::now();
        let flat = ws.read_last(&store, &tree).unwrap();
        let last = t.elapsed();
        let t = Instant::now();
        let snap = ws
            .snapshot(&mut Scan, Some(Prev { tree, flat: &flat }))
            .unwrap();
        let walk = t.elapsed();
        assert_eq!(snap.tree, tree);
        println!(
            "notify {notify}: store open {opened:?}, workspace open (cache read) {ws_open:?}, last paths {last:?}, walk {walk:?}, files read {}",
            snap.files_read
        );
    }
    let t = Instant::now();
    let out = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&root)
        .output()
        .unwrap();
    println!(
        "git status {:?} ({} bytes out)",
        t.elapsed(),
        out.stdout.len()
    );
}
