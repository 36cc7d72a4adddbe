//! Repeated no-change snapshots (for profiling).
use hel_workspace::{Options, Prev, Scan, Workspace};
fn main() {
    let root = std::path::PathBuf::from(std::env::args().nth(1).unwrap());
    let n: usize = std::env::args().nth(2).map_or(20, |s| s.parse().unwrap());
    let store = hel_store::Store::open(&root).unwrap();
    let mut ws = Workspace::open(&store, Options::default()).unwrap();
    let first = ws.snapshot(&mut Scan, None).unwrap();
    let t = std::time::Instant::now();
    for _ in 0..n {
        let s = ws
            .snapshot(
                &mut Scan,
                Some(Prev {
                    tree: first.tree,
                    flat: &first.flat,
                }),
            )
            .unwrap();
        assert_eq!(s.files_read, 0);
    }
    println!("per snapshot {:?}", t.elapsed() / n as u32);
}
