//! Workloads, measurements and the report.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::carry::Carried;
use serde_json::{json, Value};

use crate::stores::{self, BenchStore, HelStore, Jsonl, WholeFile};
use crate::workload::{self, Rng};

/// Sizes and switches of one benchmark run.
#[derive(Debug, Clone)]
pub struct Config {
    pub grow: Vec<usize>,
    /// Largest grow size the whole-file store runs (it is quadratic).
    pub whole_file_max: usize,
    pub fork_base: usize,
    pub forks: usize,
    pub fork_continue: usize,
    pub compact_total: usize,
    pub compact_every: usize,
    pub compact_keep: usize,
    pub many_sessions: usize,
    pub many_messages: usize,
    /// Measure resume in a child process (time and peak RSS); in-process otherwise (tests).
    pub probe_child: bool,
    pub workdir: PathBuf,
    /// Run only this workload (all when None).
    pub only: Option<String>,
}

impl Config {
    pub fn quick(workdir: PathBuf) -> Config {
        Config {
            grow: vec![100, 1_000, 10_000],
            whole_file_max: 1_000,
            fork_base: 2_000,
            forks: 10,
            fork_continue: 100,
            compact_total: 10_000,
            compact_every: 2_000,
            compact_keep: 500,
            many_sessions: 100,
            many_messages: 200,
            probe_child: true,
            workdir,
            only: None,
        }
    }

    pub fn full(workdir: PathBuf) -> Config {
        Config {
            grow: vec![100, 1_000, 5_000, 10_000, 100_000],
            whole_file_max: 5_000,
            fork_base: 10_000,
            compact_total: 20_000,
            many_sessions: 1_000,
            ..Config::quick(workdir)
        }
    }

    /// Tiny sizes for the smoke test in `cargo test`.
    pub fn smoke(workdir: PathBuf) -> Config {
        Config {
            grow: vec![20, 40],
            whole_file_max: 40,
            fork_base: 40,
            forks: 2,
            fork_continue: 8,
            compact_total: 80,
            compact_every: 24,
            compact_keep: 8,
            many_sessions: 4,
            many_messages: 8,
            probe_child: false,
            workdir,
            only: None,
        }
    }
}

/// One row of results: one store on one workload at one size.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub store: String,
    pub workload: String,
    pub n: usize,
    pub commits: usize,
    pub commit_p50_us: u64,
    pub commit_p99_us: u64,
    pub bytes_per_commit: u64,
    /// Mean zstd size of the messages new in each commit (the yardstick per commit).
    pub new_compressed_per_commit: u64,
    pub resume_ms: f64,
    pub resume_peak_rss_bytes: u64,
    /// Reading and parsing the same live messages from one flat JSON file.
    pub flat_resume_ms: f64,
    pub live_messages: usize,
    pub apparent_bytes: u64,
    pub allocated_bytes: u64,
    /// hel-store only: apparent bytes of `.hel/objects` (the store without
    /// spill working copies, refs, logs and leases).
    pub objects_bytes: Option<u64>,
    pub unique_compressed_bytes: u64,
    pub fork_ms: Option<f64>,
    pub gc_ms: Option<f64>,
    pub gc_reclaimed_bytes: Option<u64>,
    pub fsck_ms: Option<f64>,
    /// Plain BLAKE3 + zstd decoding of the same object files.
    pub fsck_baseline_ms: Option<f64>,
    pub note: Option<String>,
}

impl Row {
    pub fn to_json(&self) -> Value {
        json!({
            "store": self.store, "workload": self.workload, "n": self.n, "commits": self.commits,
            "commit_p50_us": self.commit_p50_us, "commit_p99_us": self.commit_p99_us,
            "bytes_per_commit": self.bytes_per_commit, "new_compressed_per_commit": self.new_compressed_per_commit,
            "resume_ms": self.resume_ms, "resume_peak_rss_bytes": self.resume_peak_rss_bytes,
            "flat_resume_ms": self.flat_resume_ms, "live_messages": self.live_messages,
            "apparent_bytes": self.apparent_bytes, "allocated_bytes": self.allocated_bytes,
            "objects_bytes": self.objects_bytes,
            "unique_compressed_bytes": self.unique_compressed_bytes, "fork_ms": self.fork_ms,
            "gc_ms": self.gc_ms, "gc_reclaimed_bytes": self.gc_reclaimed_bytes,
            "fsck_ms": self.fsck_ms, "fsck_baseline_ms": self.fsck_baseline_ms, "note": self.note,
        })
    }
}

/// The yardstick: compressed size of the unique content, each distinct
/// message (and spill file) compressed once on its own.
#[derive(Default)]
struct Yardstick {
    seen: HashSet<[u8; 32]>,
    bytes: u64,
}

impl Yardstick {
    /// Count `bytes` if new; returns its compressed size when new.
    fn add(&mut self, bytes: &[u8]) -> u64 {
        if !self.seen.insert(*blake3::hash(bytes).as_bytes()) {
            return 0;
        }
        let c = zstd::bulk::compress(bytes, 3).map_or(bytes.len(), |v| v.len()) as u64;
        self.bytes += c;
        c
    }
    fn message(&mut self, m: &Value) -> u64 {
        self.add(&hel_store::canonical::to_vec(m))
    }
}

/// What a workload run measured, store-independent parts included.
struct Driver<'a> {
    store: &'a mut dyn BenchStore,
    times: Vec<Duration>,
    bytes: u64,
    new_compressed: u64,
    yard: Yardstick,
}

impl<'a> Driver<'a> {
    fn new(store: &'a mut dyn BenchStore) -> Self {
        Driver {
            store,
            times: Vec::new(),
            bytes: 0,
            new_compressed: 0,
            yard: Yardstick::default(),
        }
    }

    fn commit(
        &mut self,
        s: usize,
        msgs: &[Value],
        carried: &Carried,
        compacted: bool,
        spill: Option<&(String, Vec<u8>)>,
    ) {
        for (i, m) in msgs.iter().enumerate() {
            if carried.source(i).is_none() {
                self.new_compressed += self.yard.message(m);
            }
        }
        if let Some((_, b)) = spill {
            self.new_compressed += self.yard.add(b);
        }
        let t = Instant::now();
        self.bytes += self.store.commit(s, msgs, carried, compacted, spill);
        self.times.push(t.elapsed());
    }

    /// Grow session `s` from `msgs` by `count` messages (exchanges of 4), one commit per exchange.
    fn grow(
        &mut self,
        s: usize,
        msgs: &mut Vec<Value>,
        count: usize,
        rng: &mut Rng,
        tag: &str,
        lens: &mut Vec<usize>,
    ) {
        for k in 0..count.div_ceil(4) {
            let ex = workload::exchange(rng, tag, k);
            let carried = Carried::prefix(msgs.len());
            msgs.extend(ex.messages);
            self.commit(s, msgs, &carried, false, ex.spill.as_ref());
            lens.push(msgs.len());
        }
    }
}

fn percentile(times: &[Duration], p: f64) -> u64 {
    if times.is_empty() {
        return 0;
    }
    let mut v: Vec<u64> = times.iter().map(|d| d.as_micros() as u64).collect();
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Sum of file lengths and of allocated blocks under `dir`.
pub fn disk_usage(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let (mut apparent, mut allocated) = (0, 0);
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                apparent += m.len();
                allocated += m.blocks() * 512;
            }
        }
    }
    (apparent, allocated)
}

/// Resume (time in ms, peak RSS in bytes, messages), in a child process or in this one.
fn probe(cfg: &Config, args: &[String]) -> (f64, u64, usize) {
    if !cfg.probe_child {
        let t = Instant::now();
        let msgs = stores::resume(args).expect("resume");
        return (t.elapsed().as_secs_f64() * 1000.0, 0, msgs.len());
    }
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .arg("--probe")
        .args(args)
        .output()
        .expect("probe");
    let text = String::from_utf8_lossy(&out.stdout);
    let f: Vec<&str> = text.split_whitespace().collect();
    assert!(
        out.status.success() && f.len() == 3,
        "probe failed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        f[0].parse::<f64>().unwrap_or(0.0) / 1000.0,
        f[2].parse().unwrap_or(0),
        f[1].parse().unwrap_or(0),
    )
}

/// The child side of a probe: resume, then print microseconds, messages and peak RSS.
pub fn probe_main(args: &[String]) -> i32 {
    let t = Instant::now();
    match stores::resume(args) {
        Ok(msgs) => {
            let us = t.elapsed().as_micros();
            let hwm = fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("VmHWM:"))
                        .and_then(|l| l.split_whitespace().nth(1))
                        .and_then(|k| k.parse::<u64>().ok())
                })
                .unwrap_or(0)
                * 1024;
            println!("{us} {} {hwm}", msgs.len());
            0
        }
        Err(e) => {
            eprintln!("probe: {e}");
            1
        }
    }
}

/// Time to resume the same live messages from one flat JSON file.
fn flat_reference(cfg: &Config, dir: &Path, msgs: &[Value]) -> f64 {
    let path = dir.join("flat-reference.json");
    fs::write(&path, serde_json::to_vec(msgs).expect("json")).expect("flat");
    let (ms, _, _) = probe(cfg, &["flat".into(), path.display().to_string()]);
    let _ = fs::remove_file(path);
    ms
}

fn fresh(cfg: &Config, name: &str) -> PathBuf {
    let dir = cfg.workdir.join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("workdir");
    dir
}

fn make_store(kind: &str, dir: &Path) -> Box<dyn BenchStore> {
    match kind {
        "hel-store" => Box::new(HelStore::new(dir)),
        "whole-file" => Box::new(WholeFile::new(&dir.join("whole"))),
        _ => Box::new(Jsonl::new(&dir.join("jsonl"))),
    }
}

pub const STORES: &[&str] = &["hel-store", "whole-file", "jsonl"];

#[allow(clippy::too_many_arguments)]
fn finish(
    cfg: &Config,
    d: Driver<'_>,
    kind: &str,
    workload: &str,
    n: usize,
    dir: &Path,
    probe_session: usize,
    live: &[Value],
) -> Row {
    d.store.close();
    let (resume_ms, rss, count) = probe(cfg, &d.store.probe_args(probe_session));
    assert_eq!(
        count,
        live.len(),
        "{kind} {workload} {n}: resumed {count} messages, expected {}",
        live.len()
    );
    let (apparent, allocated) = disk_usage(dir);
    let objects = dir.join(".hel/objects");
    let objects_bytes = objects.is_dir().then(|| disk_usage(&objects).0);
    let commits = d.times.len();
    Row {
        store: kind.to_owned(),
        workload: workload.to_owned(),
        n,
        commits,
        commit_p50_us: percentile(&d.times, 0.5),
        commit_p99_us: percentile(&d.times, 0.99),
        bytes_per_commit: d.bytes / commits.max(1) as u64,
        new_compressed_per_commit: d.new_compressed / commits.max(1) as u64,
        resume_ms,
        resume_peak_rss_bytes: rss,
        flat_resume_ms: 0.0,
        live_messages: live.len(),
        apparent_bytes: apparent,
        allocated_bytes: allocated,
        objects_bytes,
        unique_compressed_bytes: d.yard.bytes,
        ..Row::default()
    }
}

fn skipped(kind: &str, workload: &str, n: usize, why: &str) -> Row {
    Row {
        store: kind.into(),
        workload: workload.into(),
        n,
        note: Some(why.into()),
        ..Row::default()
    }
}

/// grow: one session to `n` messages.
fn grow(cfg: &Config, kind: &str, n: usize) -> Row {
    if kind == "whole-file" && n > cfg.whole_file_max {
        return skipped(kind, "grow", n, "not run (quadratic)");
    }
    let dir = fresh(cfg, &format!("grow-{kind}-{n}"));
    let mut store = make_store(kind, &dir);
    let mut d = Driver::new(store.as_mut());
    let s = d.store.create();
    let mut msgs = vec![workload::system()];
    d.commit(s, &msgs, &Carried::none(), false, None);
    let mut rng = Rng::new(1);
    d.grow(s, &mut msgs, n, &mut rng, "g", &mut Vec::new());
    let mut row = finish(cfg, d, kind, "grow", n, &dir, s, &msgs);
    row.flat_resume_ms = flat_reference(cfg, &cfg.workdir, &msgs);
    if kind == "hel-store" && Some(&n) == cfg.grow.last() {
        let store = hel_store::Store::open(&dir).expect("open store");
        let t = Instant::now();
        let report = store.fsck().expect("fsck");
        assert!(report.is_sound());
        row.fsck_ms = Some(t.elapsed().as_secs_f64() * 1000.0);
        row.fsck_baseline_ms = Some(decode_all(&store.root_path().join("objects")));
    }
    drop(store);
    let _ = fs::remove_dir_all(&dir);
    row
}

/// Plain BLAKE3 + zstd decoding of every file under `dir`, in ms.
fn decode_all(dir: &Path) -> f64 {
    let t = Instant::now();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = fs::read(&p) {
                let plain = zstd::stream::decode_all(&bytes[..]).unwrap_or_default();
                std::hint::black_box(blake3::hash(&plain));
            }
        }
    }
    t.elapsed().as_secs_f64() * 1000.0
}

/// fork: a base session forked at random checkpoints, each fork continued.
fn fork(cfg: &Config, kind: &str) -> Row {
    let n = cfg.fork_base;
    if kind == "whole-file" && n > cfg.whole_file_max {
        return skipped(kind, "fork", n, "not run (quadratic)");
    }
    let dir = fresh(cfg, &format!("fork-{kind}"));
    let mut store = make_store(kind, &dir);
    let mut d = Driver::new(store.as_mut());
    let s = d.store.create();
    let mut msgs = vec![workload::system()];
    d.commit(s, &msgs, &Carried::none(), false, None);
    let mut lens = vec![1];
    let mut rng = Rng::new(2);
    d.grow(s, &mut msgs, n, &mut rng, "base", &mut lens);
    let mut fork_time = Duration::ZERO;
    let mut last = (s, msgs.clone());
    for f in 0..cfg.forks {
        let k = rng.below(lens.len() as u64) as usize;
        let mut fmsgs = msgs[..lens[k]].to_vec();
        let t = Instant::now();
        let fs_ = d.store.fork(s, k, &fmsgs);
        fork_time += t.elapsed();
        d.grow(
            fs_,
            &mut fmsgs,
            cfg.fork_continue,
            &mut rng,
            &format!("fork{f}"),
            &mut Vec::new(),
        );
        last = (fs_, fmsgs);
    }
    let mut row = finish(cfg, d, kind, "fork", n, &dir, last.0, &last.1);
    row.fork_ms = Some(fork_time.as_secs_f64() * 1000.0 / cfg.forks.max(1) as f64);
    row.flat_resume_ms = flat_reference(cfg, &cfg.workdir, &last.1);
    drop(store);
    let _ = fs::remove_dir_all(&dir);
    row
}

/// compact: one session compacted every `compact_every` messages, keeping a tail.
fn compact(cfg: &Config, kind: &str) -> Row {
    let n = cfg.compact_total;
    let live_max = cfg.compact_every + cfg.compact_keep;
    if kind == "whole-file" && live_max > cfg.whole_file_max * 3 {
        return skipped(kind, "compact", n, "not run (quadratic)");
    }
    let dir = fresh(cfg, &format!("compact-{kind}"));
    let mut store = make_store(kind, &dir);
    let mut d = Driver::new(store.as_mut());
    let s = d.store.create();
    let mut msgs = vec![workload::system()];
    d.commit(s, &msgs, &Carried::none(), false, None);
    let mut rng = Rng::new(3);
    let mut since = 0;
    for k in 0..n.div_ceil(4) {
        let ex = workload::exchange(&mut rng, "c", k);
        let mut carried = Carried::prefix(msgs.len());
        let mut compacted = false;
        if since >= cfg.compact_every {
            let len = msgs.len();
            carried.splice(1, len - cfg.compact_keep, 1);
            let tail = msgs.split_off(len - cfg.compact_keep);
            msgs.truncate(1);
            msgs.push(json!({"role": "user", "content": format!("<compacted-summary>\n{}\n</compacted-summary>", workload::text(&mut rng, 2000))}));
            msgs.extend(tail);
            compacted = true;
            since = 0;
        }
        msgs.extend(ex.messages);
        since += 4;
        d.commit(s, &msgs, &carried, compacted, ex.spill.as_ref());
    }
    let mut row = finish(cfg, d, kind, "compact", n, &dir, s, &msgs);
    row.flat_resume_ms = flat_reference(cfg, &cfg.workdir, &msgs);
    drop(store);
    let _ = fs::remove_dir_all(&dir);
    row
}

/// many: many sessions, half deleted with gc deferred, then one gc.
fn many(cfg: &Config, kind: &str) -> Row {
    let n = cfg.many_sessions;
    if kind == "whole-file" && cfg.many_sessions * cfg.many_messages > 100 * cfg.whole_file_max {
        return skipped(kind, "many", n, "not run (quadratic)");
    }
    let dir = fresh(cfg, &format!("many-{kind}"));
    let mut store = make_store(kind, &dir);
    let mut d = Driver::new(store.as_mut());
    let mut rng = Rng::new(4);
    let mut sessions = Vec::new();
    for i in 0..n {
        let s = d.store.create();
        let mut msgs = vec![workload::system()];
        d.commit(s, &msgs, &Carried::none(), false, None);
        d.grow(
            s,
            &mut msgs,
            cfg.many_messages,
            &mut rng,
            &format!("m{i}"),
            &mut Vec::new(),
        );
        sessions.push((s, msgs));
    }
    let mut deleted_bytes = 0;
    for (s, _) in sessions.iter().step_by(2) {
        deleted_bytes += d.store.delete(*s, false);
    }
    let gc = d.store.gc().map(|(t, b)| (t, b + deleted_bytes));
    let (keep, live) = sessions[1].clone();
    let mut row = finish(cfg, d, kind, "many", n, &dir, keep, &live);
    if let Some((t, bytes)) = gc {
        row.gc_ms = Some(t.as_secs_f64() * 1000.0);
        row.gc_reclaimed_bytes = Some(bytes);
    }
    row.flat_resume_ms = flat_reference(cfg, &cfg.workdir, &live);
    drop(store);
    let _ = fs::remove_dir_all(&dir);
    row
}

/// A workload other than grow: runs one store.
type Workload = fn(&Config, &str) -> Row;

/// Run every workload for every store. `progress` sees each row as it is done.
pub fn run_all(cfg: &Config, mut progress: impl FnMut(&Row)) -> Vec<Row> {
    fs::create_dir_all(&cfg.workdir).expect("workdir");
    let mut rows = Vec::new();
    let mut push = |r: Row| {
        progress(&r);
        rows.push(r);
    };
    let wanted = |w: &str| cfg.only.as_deref().is_none_or(|o| o == w);
    if wanted("grow") {
        for &n in &cfg.grow {
            for kind in STORES {
                push(grow(cfg, kind, n));
            }
        }
    }
    let others: [(&str, Workload); 3] = [("fork", fork), ("compact", compact), ("many", many)];
    for (name, workload) in others {
        if wanted(name) {
            for kind in STORES {
                push(workload(cfg, kind));
            }
        }
    }
    rows
}

fn mb(b: u64) -> String {
    format!("{:.1}", b as f64 / 1_048_576.0)
}

/// The results as a markdown table.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| workload | n | store | commits | commit p50 µs | commit p99 µs | bytes/commit | new zstd/commit | resume ms | flat JSON ms | resume peak RSS MB | apparent MB | allocated MB | unique zstd MB | notes |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        if let Some(note) = r.note.as_ref().filter(|_| r.commits == 0) {
            s.push_str(&format!(
                "| {} | {} | {} | | | | | | | | | | | | {note} |\n",
                r.workload, r.n, r.store
            ));
            continue;
        }
        let mut notes = Vec::new();
        if let Some(f) = r.fork_ms {
            notes.push(format!("fork {f:.2} ms"));
        }
        if let (Some(g), Some(b)) = (r.gc_ms, r.gc_reclaimed_bytes) {
            notes.push(format!("gc {g:.0} ms, {} MB reclaimed", mb(b)));
        }
        if let (Some(f), Some(b)) = (r.fsck_ms, r.fsck_baseline_ms) {
            notes.push(format!("fsck {f:.0} ms vs decode+hash {b:.0} ms"));
        }
        if let Some(o) = r.objects_bytes {
            notes.push(format!("objects {} MB", mb(o)));
        }
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {} | {} | {} | {} | {} |\n",
            r.workload,
            r.n,
            r.store,
            r.commits,
            r.commit_p50_us,
            r.commit_p99_us,
            r.bytes_per_commit,
            r.new_compressed_per_commit,
            r.resume_ms,
            r.flat_resume_ms,
            mb(r.resume_peak_rss_bytes),
            mb(r.apparent_bytes),
            mb(r.allocated_bytes),
            mb(r.unique_compressed_bytes),
            notes.join("; ")
        ));
    }
    s
}

/// hel-store's targets, as ratios measured in this run.
pub fn targets(rows: &[Row]) -> String {
    let hel: Vec<&Row> = rows
        .iter()
        .filter(|r| r.store == "hel-store" && r.commits > 0)
        .collect();
    let grow: Vec<&&Row> = hel.iter().filter(|r| r.workload == "grow").collect();
    let mut s = String::new();
    if let (Some(small), Some(big)) = (grow.first(), grow.last()) {
        let ratio = big.commit_p50_us as f64 / small.commit_p50_us.max(1) as f64;
        s.push_str(&format!(
            "- commit p50 at n={} / at n={}: {ratio:.2}× (target ≤ 2×)\n",
            big.n, small.n
        ));
    }
    for r in &hel {
        let bound = 2 * r.new_compressed_per_commit + 4096;
        s.push_str(&format!(
            "- {} n={}: bytes/commit {} vs 2×new zstd + 4 KiB = {bound} ({})\n",
            r.workload,
            r.n,
            r.bytes_per_commit,
            if r.bytes_per_commit <= bound {
                "met"
            } else {
                "missed"
            }
        ));
    }
    for r in &hel {
        s.push_str(&format!(
            "- {} n={}: resume {:.1} ms vs flat JSON {:.1} ms: {:.2}× (target ≤ 1.5×)\n",
            r.workload,
            r.n,
            r.resume_ms,
            r.flat_resume_ms,
            r.resume_ms / r.flat_resume_ms.max(0.001)
        ));
    }
    for r in hel
        .iter()
        .filter(|r| r.workload == "fork" || r.workload == "compact")
    {
        let u = r.unique_compressed_bytes.max(1) as f64;
        s.push_str(&format!(
            "- {}: objects {} MB vs unique zstd {} MB: {:.2}× (target ≤ 1.2×); all of .hel at rest {} MB ({:.2}×); allocated {} MB ({:.2}×)\n",
            r.workload,
            mb(r.objects_bytes.unwrap_or(0)),
            mb(r.unique_compressed_bytes),
            r.objects_bytes.unwrap_or(0) as f64 / u,
            mb(r.apparent_bytes),
            r.apparent_bytes as f64 / u,
            mb(r.allocated_bytes),
            r.allocated_bytes as f64 / u
        ));
    }
    for r in &hel {
        if let Some(g) = r.gc_ms {
            s.push_str(&format!(
                "- many: gc of {} sessions' store: {g:.0} ms (target: a few seconds)\n",
                r.n
            ));
        }
        if let (Some(f), Some(b)) = (r.fsck_ms, r.fsck_baseline_ms) {
            s.push_str(&format!("- fsck {f:.0} ms vs plain BLAKE3 + zstd decoding {b:.0} ms: {:.2}× (target ≤ 2×)\n", f / b.max(0.001)));
        }
    }
    s
}

/// Facts about this machine for the JSON report.
pub fn machine() -> Value {
    let cpu = fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
    });
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_owned());
    let mem = fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .next()
            .map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_owned())
    });
    json!({
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "memory_kib": mem.and_then(|m| m.parse::<u64>().ok()),
        "kernel": kernel,
        "os": std::env::consts::OS,
    })
}
