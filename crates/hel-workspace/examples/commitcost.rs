//! Where the time of a checkpoint commit goes with and without the
//! workspace field, with and without a walk before it (issue 24):
//! `cargo run --release -p hel-workspace --example commitcost -- PROJECT [ROUNDS]`.
use hel_store::{CommitInput, Record, SessionState, Store};
use hel_workspace::{Flat, Options, Prev, Workspace};
use std::time::{Duration, Instant};

fn input(ws: Option<hel_store::Workspace>) -> CommitInput<'static> {
    CommitInput::new(
        Record::Answer,
        &[],
        &[],
        "/p",
        hel_store::SessionRecord::of(hel_store::RequestConfig::bare("test", "")),
    )
    .instruction("i")
    .why("t")
    .spill(vec![])
    .workspace(ws)
}

/// This thread's time on a CPU and waiting for one (its schedstat).
fn sched() -> (Duration, Duration) {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let mut f = s.split(' ').map(|n| n.parse().unwrap_or(0));
    let on = f.next().unwrap_or(0);
    let waiting = f.next().unwrap_or(0);
    (Duration::from_nanos(on), Duration::from_nanos(waiting))
}

/// Keep every core busy for `d` (as a walk does), on this thread too.
fn spin(d: Duration) {
    let until = Instant::now() + d;
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(move || while Instant::now() < until {});
        }
        while Instant::now() < until {}
    });
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let root = std::path::PathBuf::from(args.next().expect("PROJECT"));
    let rounds: usize = args.next().map_or(9, |n| n.parse().expect("ROUNDS"));
    let notify = std::env::var_os("NOTIFY").is_some();
    let store = Store::open(&root).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let options = Options {
        budget: u64::MAX,
        notify,
        ..Options::default()
    };
    let mut ws = Workspace::open(&store, options).unwrap();
    let mut txn = store.begin(&lease, &mut state).unwrap();
    let snap = ws.snapshot(&mut txn, None).unwrap();
    let field = |tree| hel_store::Workspace {
        tree,
        start: Some(tree),
        not_tracked: 0,
        restored: None,
    };
    txn.commit(input(Some(field(snap.tree)))).unwrap();
    let last: (hel_store::ObjectId, std::sync::Arc<Flat>) = (snap.tree, snap.flat);
    const N: usize = 6;
    let mut times: [Vec<Duration>; N] = Default::default();
    let mut cpus: [Vec<Duration>; N] = Default::default();
    let mut waits: [Vec<Duration>; N] = Default::default();
    let mut extra = [(0u64, 0u64); N];
    let names = [
        "plain",
        "walk, then plain",
        "field, no walk",
        "walk, then field",
        "every core busy 1 s, then plain",
        "asleep 1 s, then plain",
    ];
    for _ in 0..rounds {
        let only: Option<usize> = std::env::var("ONLY").ok().and_then(|k| k.parse().ok());
        for (k, t) in times.iter_mut().enumerate() {
            if only.is_some_and(|o| o != k) {
                continue;
            }
            let (walk, with) = (k < 4 && k % 2 == 1, k == 2 || k == 3);
            let mut txn = store.begin(&lease, &mut state).unwrap();
            match k {
                4 => spin(Duration::from_secs(1)),
                5 => std::thread::sleep(Duration::from_secs(1)),
                _ => {}
            }
            if walk {
                let prev = Prev {
                    tree: last.0,
                    flat: &last.1,
                };
                let s = ws.snapshot(&mut txn, Some(prev)).unwrap();
                assert_eq!(s.tree, last.0);
            }
            let at = Instant::now();
            if std::env::var_os("HAS").is_some() && with {
                let h = Instant::now();
                txn.has(&last.0).unwrap();
                let a = h.elapsed();
                let h = Instant::now();
                txn.has(&last.0).unwrap();
                eprintln!("{}: has {:?} then {:?}", names[k], a, h.elapsed());
            }
            if std::env::var_os("MARK").is_some() {
                eprintln!("MARK {k}");
            }
            let (cpu0, wait0) = sched();
            let syncs0 = hel_fs::syncs();
            let c = txn.commit(input(with.then(|| field(last.0)))).unwrap();
            t.push(at.elapsed());
            if std::env::var_os("WINDOWS").is_some() {
                eprintln!("WINDOW {k} {:?} {:?}", at, Instant::now());
            }
            let (cpu1, wait1) = sched();
            cpus[k].push(cpu1 - cpu0);
            waits[k].push(wait1 - wait0);
            extra[k] = (hel_fs::syncs() - syncs0, c.bytes_written);
        }
    }
    for (k, (name, t)) in names.iter().zip(times).enumerate() {
        if t.is_empty() {
            continue;
        }
        println!(
            "{name}: median {:?} of {} (on a CPU {:?}, waiting for one {:?}; {} syncs, {} bytes written)",
            median(t.clone()),
            t.len(),
            median(cpus[k].clone()),
            median(waits[k].clone()),
            extra[k].0,
            extra[k].1
        );
    }
}
