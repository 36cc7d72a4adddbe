//! What scanning files for secrets costs a first snapshot: each round
//! snapshots PROJECT into a new session of a new store (its `.hel/`
//! removed first, so every file is read, hashed, compressed and written),
//! with and without the scan, alternating; prints the medians:
//! `cargo run --release -p hel-workspace --example secretcost -- PROJECT [ROUNDS]`.
use hel_store::{SessionState, Store};
use hel_workspace::{Options, Workspace};
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let root = std::path::PathBuf::from(args.next().expect("PROJECT"));
    let rounds: usize = args.next().map_or(5, |n| n.parse().expect("ROUNDS"));
    let mut times: [Vec<Duration>; 2] = Default::default();
    let mut held = 0;
    for _ in 0..rounds {
        for (scan, t) in times.iter_mut().enumerate() {
            let _ = std::fs::remove_dir_all(root.join(".hel"));
            let store = Store::open(&root).unwrap();
            let lease = store.new_session().unwrap();
            let mut state = SessionState::default();
            let options = Options {
                budget: u64::MAX,
                notify: false,
                ..Options::default()
            };
            let mut ws = Workspace::open(&store, options).unwrap();
            if scan == 0 {
                ws.without_secret_scan();
            }
            let mut txn = store.begin(&lease, &mut state).unwrap();
            let at = Instant::now();
            let snap = ws.snapshot(&mut txn, None).unwrap();
            t.push(at.elapsed());
            held = snap
                .not_tracked
                .iter()
                .filter(|(_, w)| *w == hel_workspace::snapshot::NotTracked::HoldsSecret)
                .count();
            drop(txn);
        }
    }
    println!("without: {:?}\nwith:    {:?}", times[0], times[1]);
    let (off, on) = (median(times[0].clone()), median(times[1].clone()));
    println!(
        "first snapshot: without the scan {off:?}, with it {on:?} (x{:.3}; medians of {rounds}); files holding a secret: {held}",
        on.as_secs_f64() / off.as_secs_f64()
    );
}
