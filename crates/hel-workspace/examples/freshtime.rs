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
        let (dir, _) = hel_store::workspace::dir(&store).unwrap();
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
        if snap.tree != tree {
            println!("(the project changed since the cache was written)");
        }
        println!(
            "notify {notify}: store open {opened:?}, workspace open (cache read) {ws_open:?}, last paths {last:?}, walk {walk:?}, files read {}",
            snap.files_read
        );
    }
    // One file changed, the workspace kept open: with and without
    // notifications, alternating.
    let store = hel_store::Store::open(&root).unwrap();
    let (dir, _) = hel_store::workspace::dir(&store).unwrap();
    let tree = Cache::load(dir.as_fd())
        .root()
        .expect("a cache with a tree");
    let mut open = [true, false].map(|notify| {
        let mut ws = Workspace::open(
            &store,
            Options {
                notify,
                ..Options::default()
            },
        )
        .unwrap();
        let flat = ws.read_last(&store, &tree).unwrap();
        let s = ws
            .snapshot(&mut Scan, Some(Prev { tree, flat: &flat }))
            .unwrap();
        (ws, (s.tree, s.flat))
    });
    let file = root.join("freshtime-change.txt");
    for round in 0..6 {
        for (ws, last) in open.iter_mut() {
            std::fs::write(&file, format!("round {round}\n")).unwrap();
            let t = Instant::now();
            let s = ws
                .snapshot(
                    &mut Scan,
                    Some(Prev {
                        tree: last.0,
                        flat: &last.1,
                    }),
                )
                .unwrap();
            println!(
                "one file changed, notify {}: {:?}",
                ws.options.notify,
                t.elapsed()
            );
            *last = (s.tree, s.flat);
        }
    }
    let _ = std::fs::remove_file(&file);
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
