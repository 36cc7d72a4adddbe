//! Workloads, measurements and the report.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::carry::Carried;
use crate::measure::{disk_usage, median};
use serde::Serialize;
use serde_json::{json, Value};

use crate::packs::{self, Pass};
use crate::stores::{self, BenchStore, HelStore, Jsonl, Sqlite, WholeFile};
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
    /// Sessions of the listing workload (`hel sessions` against SQLite).
    pub list_sessions: usize,
    /// Messages of each of them (one checkpoint).
    pub list_messages: usize,
    /// Resume runs per measurement (the median is reported).
    pub probe_runs: usize,
    /// Warm runs of each listing (after one unmeasured run; median reported).
    pub list_runs: usize,
    /// Measure resume and listing in child processes (time and peak RSS);
    /// in this process otherwise (tests).
    pub probe_child: bool,
    /// The `hel` binary whose `hel sessions` the listing workload runs.
    pub hel: PathBuf,
    /// That binary, opened when the run starts ([`run_all`]): what the run
    /// executes, so that a build replacing `hel` meanwhile changes nothing.
    pub hel_pinned: Option<Arc<fs::File>>,
    /// What the search workload looks for in every stored message.
    pub needle: String,
    pub workdir: PathBuf,
    /// Run only this workload (all when None).
    pub only: Option<String>,
    /// Keep each workload's hel-store project under `workdir` (its path
    /// printed) for profiling afterwards.
    pub keep: bool,
    /// Size of the grow run on tmpfs (hel-store and SQLite only): the
    /// commit's CPU part, with syncs that cost nothing.
    pub tmpfs_grow: usize,
    /// Where that run's stores go (it is skipped unless this is a tmpfs).
    pub tmpfs_dir: PathBuf,
    /// The workspace workload's project (issue 14's figures against git);
    /// `files` 0 skips it.
    pub ws_files: usize,
    pub ws_dirs: usize,
    pub ws_restore_files: usize,
    pub ws_runs: usize,
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
            list_sessions: 1_000,
            list_messages: 8,
            probe_runs: 11,
            list_runs: 7,
            probe_child: true,
            hel: default_hel(),
            hel_pinned: None,
            needle: "4242".into(),
            tmpfs_grow: 1_000,
            tmpfs_dir: tmpfs_dir(&workdir),
            workdir,
            only: None,
            keep: false,
            ws_files: 7_000,
            ws_dirs: 700,
            ws_restore_files: 100,
            ws_runs: 5,
        }
    }

    pub fn full(workdir: PathBuf) -> Config {
        Config {
            grow: vec![100, 1_000, 5_000, 10_000, 100_000],
            whole_file_max: 5_000,
            fork_base: 10_000,
            compact_total: 20_000,
            many_sessions: 1_000,
            list_sessions: 10_000,
            tmpfs_grow: 10_000,
            ws_files: 70_000,
            ws_dirs: 7_000,
            ws_restore_files: 1_000,
            ws_runs: 7,
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
            list_sessions: 6,
            list_messages: 4,
            probe_runs: 1,
            list_runs: 1,
            probe_child: false,
            hel: default_hel(),
            hel_pinned: None,
            needle: "4".into(),
            tmpfs_grow: 20,
            tmpfs_dir: tmpfs_dir(&workdir),
            workdir,
            only: None,
            keep: false,
            // tests/workspace_smoke.rs runs the workspace benchmark.
            ws_files: 0,
            ws_dirs: 0,
            ws_restore_files: 0,
            ws_runs: 1,
        }
    }

    pub fn wants(&self, workload: &str) -> bool {
        self.only.as_deref().is_none_or(|o| o == workload)
    }
}

/// A directory of this process under `/dev/shm` (a tmpfs on Linux).
fn tmpfs_dir(workdir: &Path) -> PathBuf {
    let name = workdir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    Path::new("/dev/shm").join(format!("hel-bench-tmpfs-{}-{name}", std::process::id()))
}

/// Whether `dir`'s parent is a tmpfs (where an fsync writes nothing).
fn on_tmpfs(dir: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    dir.parent()
        .and_then(|p| rustix::fs::statfs(p).ok())
        // `f_type`'s integer type differs between targets.
        .is_some_and(|s| {
            #[allow(clippy::unnecessary_cast)]
            let t = s.f_type as i64;
            t == TMPFS_MAGIC
        })
}

/// Bytes this process has read so far through read(2) and its kin
/// (`rchar`), 0 where `/proc/self/io` is not there.
pub fn read_by_process() -> u64 {
    fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("rchar:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// What `f` returns, and the bytes this process read meanwhile.
fn counting_reads<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = read_by_process();
    let out = f();
    (out, read_by_process().saturating_sub(before))
}

/// A command running this very executable, the file this process runs
/// even when a build has replaced (or removed) it at its path since: a
/// probe by path would then fail ("No such file or directory") or run
/// another build. Linux's `/proc/self/exe`; the path elsewhere.
fn own_command() -> Command {
    let proc_exe = Path::new("/proc/self/exe");
    if proc_exe.exists() {
        return Command::new(proc_exe);
    }
    Command::new(std::env::current_exe().expect("own path"))
}

/// A command running `hel` as it was when the run started (the pinned
/// file, through `/proc/self/fd`), or by its path when it was not pinned.
fn hel_command(cfg: &Config) -> Command {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::process::CommandExt as _;
    match &cfg.hel_pinned {
        Some(f) if Path::new("/proc/self/fd").is_dir() => {
            let mut c = Command::new(format!("/proc/self/fd/{}", f.as_raw_fd()));
            c.arg0("hel");
            c
        }
        _ => Command::new(&cfg.hel),
    }
}

/// `hel` next to this executable (`cargo build --release -p hel` puts it
/// beside `hel-bench` in `target/release/`).
pub fn default_hel() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("hel")))
        .unwrap_or_else(|| PathBuf::from("hel"))
}

/// The workloads, in the order they run.
pub const WORKLOADS: &[&str] = &[
    "grow",
    "tmpfs",
    "fork",
    "compact",
    "many",
    "list",
    "workspace",
];

/// One row of results: one store on one workload at one size. Serialized
/// as is into `--json`'s `results`; times in ms unless named otherwise,
/// sizes in bytes; `None` where the store or workload has no such figure.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Row {
    pub store: String,
    pub workload: String,
    /// Messages in the session (grow, fork base, compact) or sessions (many, list).
    pub n: usize,
    pub commits: usize,
    pub commit_p50_us: u64,
    pub commit_p99_us: u64,
    /// Mean bytes the store wrote per commit.
    pub bytes_per_commit: u64,
    /// Mean zstd size of the messages new in each commit (the yardstick per commit).
    pub new_compressed_per_commit: u64,
    /// p50 time of compressing each commit's new messages (their
    /// canonical JSON, each on its own) and new spill file with zstd at
    /// hel's level (3), one context reused: what the card's compression
    /// alone costs a commit, whatever the store.
    pub new_zstd_p50_us: u64,
    /// Resume in a fresh process: median of `resume_runs` runs.
    pub resume_ms: f64,
    pub resume_runs: usize,
    /// Peak RSS of the resuming process (the largest of the runs).
    pub resume_peak_rss_bytes: u64,
    /// Reading and parsing the same live messages from one flat JSON file
    /// in a fresh process (median of as many runs).
    pub flat_resume_ms: f64,
    pub live_messages: usize,
    /// Sizes at rest after the workload's commits (for many: before the deletes).
    pub apparent_bytes: u64,
    pub allocated_bytes: u64,
    /// hel-store only: apparent bytes of `.hel/packs` and `.hel/objects`
    /// (the store without spill working copies, session directories and locks).
    pub objects_bytes: Option<u64>,
    /// The yardstick: each distinct message and spill file zstd-compressed once on its own.
    pub unique_compressed_bytes: u64,
    /// Mean time of one fork.
    pub fork_ms: Option<f64>,
    /// many: deleting one session with its collection (`Store::delete(id,
    /// true)`): the median of [`DELETE_ONE_RUNS`] deletes (its bytes read
    /// and reclaimed are that delete's).
    pub delete_one_ms: Option<f64>,
    /// Allocated bytes that came back on disk.
    pub delete_one_reclaimed_bytes: Option<u64>,
    /// many: deleting half of the rest, collection deferred (total time).
    pub delete_half_ms: Option<f64>,
    pub delete_half_sessions: Option<usize>,
    pub delete_half_reclaimed_bytes: Option<u64>,
    /// many: the full collection after the deletes (hel-store `gc::gc`, SQLite `VACUUM`).
    pub gc_ms: Option<f64>,
    pub gc_reclaimed_bytes: Option<u64>,
    /// many, hel-store: reading the store's structure objects (snapshots,
    /// list nodes, trees) once after the gc, as `packs::structure_pass`
    /// does (median of 3): the gc's yardstick.
    pub structure_read_ms: Option<f64>,
    /// Bytes read (`rchar` of `/proc/self/io`: what read(2) and friends
    /// returned, page cache or not) by the hel-store gc, delete of one
    /// session, fsck, and their yardsticks' passes.
    pub gc_read_bytes: Option<u64>,
    pub structure_read_bytes: Option<u64>,
    pub delete_one_read_bytes: Option<u64>,
    pub fsck_read_bytes: Option<u64>,
    pub fsck_baseline_read_bytes: Option<u64>,
    /// many: allocated bytes after the deletes and the gc.
    pub after_gc_allocated_bytes: Option<u64>,
    /// many: finding every stored message containing `search_needle` (median of 3).
    pub search_ms: Option<f64>,
    pub search_needle: Option<String>,
    pub search_hits: Option<usize>,
    /// hel-store only: zstd-decoding every object the store holds once.
    pub search_decode_once_ms: Option<f64>,
    /// many, hel-store, with the `hel` binary: `hel sessions search` of the
    /// needle (every session's newest conversation) as a process in the
    /// project, warm (one unmeasured run, then the median of 3).
    pub sessions_search_ms: Option<f64>,
    pub fsck_ms: Option<f64>,
    /// Reading every pack record, checking it, zstd decoding, BLAKE3 of the
    /// canonical bytes and serde_json parsing of what is JSON (`packs::Pass::Verify`).
    pub fsck_baseline_ms: Option<f64>,
    /// list: listing every session as a process, warm (median).
    pub list_ms: Option<f64>,
    /// list, hel-store: `Store::sessions()` inside this process (median).
    pub list_in_process_ms: Option<f64>,
    pub note: Option<String>,
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
}

/// What a workload run measured, store-independent parts included.
struct Driver<'a> {
    store: &'a mut dyn BenchStore,
    times: Vec<Duration>,
    /// Per commit: zstd level 3 of what it adds ([`Row::new_zstd_p50_us`]).
    zstd_times: Vec<Duration>,
    zstd: zstd::bulk::Compressor<'static>,
    bytes: u64,
    new_compressed: u64,
    yard: Yardstick,
}

impl<'a> Driver<'a> {
    fn new(store: &'a mut dyn BenchStore) -> Self {
        Driver {
            store,
            times: Vec::new(),
            zstd_times: Vec::new(),
            zstd: zstd::bulk::Compressor::new(3).expect("a zstd context"),
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
        let mut new: Vec<Vec<u8>> = msgs
            .iter()
            .enumerate()
            .filter(|(i, _)| carried.source(*i).is_none())
            .map(|(_, m)| hel_store::canonical::to_vec(m))
            .collect();
        new.extend(spill.map(|(_, b)| b.clone()));
        let t = Instant::now();
        for bytes in &new {
            std::hint::black_box(self.zstd.compress(bytes).expect("zstd"));
        }
        self.zstd_times.push(t.elapsed());
        for bytes in &new {
            self.new_compressed += self.yard.add(bytes);
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One resume: time in ms, peak RSS in bytes, messages; in a child process
/// or in this one.
fn probe_once(cfg: &Config, args: &[String]) -> (f64, u64, usize) {
    if !cfg.probe_child {
        let t = Instant::now();
        let msgs = stores::resume(args).expect("resume");
        return (ms(t.elapsed()), 0, msgs.len());
    }
    let out = own_command()
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

/// Resume `cfg.probe_runs` times: the median time, the largest peak RSS,
/// and the messages resumed.
fn probe(cfg: &Config, args: &[String]) -> (f64, u64, usize) {
    let runs: Vec<(f64, u64, usize)> = (0..cfg.probe_runs.max(1))
        .map(|_| probe_once(cfg, args))
        .collect();
    (
        median(runs.iter().map(|r| r.0).collect()),
        runs.iter().map(|r| r.1).max().unwrap_or(0),
        runs[0].2,
    )
}

/// The child side of a probe: resume, then print microseconds, messages
/// and peak RSS; or, for `sqlite-list DB`, print the SQLite listing; for
/// `scan PROJECT NEEDLE`, time hel-store's scan of every message; for
/// `fsck PROJECT` and `verify PROJECT`, time fsck and its yardstick; for
/// `ws-fresh PROJECT`, a fresh process's no-change workspace snapshot.
pub fn probe_main(args: &[String]) -> i32 {
    if let [kind, db] = args {
        if kind == "sqlite-list" {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            return match stores::list_sqlite(Path::new(db), &mut out) {
                Ok(_) => 0,
                Err(e) => {
                    eprintln!("probe: {e}");
                    1
                }
            };
        }
    }
    if let [kind, project] = args {
        // For profiling fsck and its yardstick on a kept grow store
        // (`--keep`), as the grow workload times them: prints microseconds.
        // (Any other pair, `flat PATH` say, is a resume.)
        let project = Path::new(project);
        let t = Instant::now();
        let done = match kind.as_str() {
            "fsck" => Some(
                hel_store::Store::open_with(project, stores::no_limits())
                    .and_then(|store| hel_store::fsck::fsck(&store))
                    .map_err(|e| e.to_string())
                    .and_then(|r| {
                        r.is_sound()
                            .then_some(())
                            .ok_or_else(|| format!("{:?}", r.faults))
                    }),
            ),
            "ws-fresh" => {
                return probe_said(
                    crate::workspace::fresh_probe(project).map_err(|e| e.to_string()),
                )
            }
            "verify" => {
                packs::pass(&project.join(hel_store::STORE_DIR), Pass::Verify);
                Some(Ok(()))
            }
            _ => None,
        };
        if let Some(done) = done {
            return probe_said(done.map(|()| t.elapsed().as_micros().to_string()));
        }
    }
    if let [kind, project, needle] = args {
        if kind == "scan" {
            // For profiling the search workload's scan on a kept store
            // (`--keep`): prints microseconds and matching messages.
            return probe_said(
                stores::scan(Path::new(project), needle).map(|(us, hits)| format!("{us} {hits}")),
            );
        }
    }
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

/// A probe's line on stdout, or its error on stderr: its exit code.
fn probe_said(said: Result<String, String>) -> i32 {
    match said {
        Ok(line) => {
            println!("{line}");
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
    fresh_in(&cfg.workdir, name)
}

fn fresh_in(base: &Path, name: &str) -> PathBuf {
    let dir = base.join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("workdir");
    dir
}

fn make_store(kind: &str, dir: &Path) -> Box<dyn BenchStore> {
    match kind {
        "hel-store" => Box::new(HelStore::new(dir)),
        "whole-file" => Box::new(WholeFile::new(&dir.join("whole"))),
        "sqlite" => Box::new(Sqlite::new(&dir.join("sqlite"))),
        _ => Box::new(Jsonl::new(&dir.join("jsonl"))),
    }
}

pub const STORES: &[&str] = &["hel-store", "sqlite", "jsonl", "whole-file"];

/// The instances end; the store is measured at rest and `probe_session`
/// resumed in fresh processes.
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
    let (apparent, allocated) = disk_usage(dir);
    let hel = dir.join(".hel");
    let objects_bytes = hel
        .is_dir()
        .then(|| disk_usage(&hel.join("packs")).0 + disk_usage(&hel.join("objects")).0);
    let (resume_ms, rss, count) = probe(cfg, &d.store.probe_args(probe_session));
    assert_eq!(
        count,
        live.len(),
        "{kind} {workload} {n}: resumed {count} messages, expected {}",
        live.len()
    );
    let commits = d.times.len();
    Row {
        store: kind.to_owned(),
        workload: workload.to_owned(),
        n,
        commits,
        commit_p50_us: percentile(&d.times, 0.5),
        commit_p99_us: percentile(&d.times, 0.99),
        new_zstd_p50_us: percentile(&d.zstd_times, 0.5),
        bytes_per_commit: d.bytes / commits.max(1) as u64,
        new_compressed_per_commit: d.new_compressed / commits.max(1) as u64,
        resume_ms,
        resume_runs: cfg.probe_runs.max(1),
        resume_peak_rss_bytes: rss,
        flat_resume_ms: flat_reference(cfg, &cfg.workdir, live),
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
    grow_in(cfg, kind, n, &cfg.workdir, "grow")
}

/// tmpfs: grow on a tmpfs, hel-store and SQLite only (the commit's CPU
/// part: an fsync there writes nothing).
fn tmpfs(cfg: &Config, kind: &str) -> Row {
    let n = cfg.tmpfs_grow;
    if kind != "hel-store" && kind != "sqlite" {
        return skipped(kind, "tmpfs", n, "not measured");
    }
    if !on_tmpfs(&cfg.tmpfs_dir) {
        return skipped(kind, "tmpfs", n, "not run (no tmpfs at /dev/shm)");
    }
    let row = grow_in(cfg, kind, n, &cfg.tmpfs_dir, "tmpfs");
    // What `--keep` kept there (its path printed) stays, in memory.
    if !cfg.keep {
        let _ = fs::remove_dir_all(&cfg.tmpfs_dir);
    }
    row
}

fn grow_in(cfg: &Config, kind: &str, n: usize, base: &Path, workload: &str) -> Row {
    if kind == "whole-file" && n > cfg.whole_file_max {
        return skipped(kind, workload, n, "not run (quadratic)");
    }
    let dir = fresh_in(base, &format!("{workload}-{kind}-{n}"));
    let mut store = make_store(kind, &dir);
    let mut d = Driver::new(store.as_mut());
    let s = d.store.create();
    let mut msgs = vec![workload::system()];
    d.commit(s, &msgs, &Carried::none(), false, None);
    let mut rng = workload::rng(1);
    d.grow(s, &mut msgs, n, &mut rng, "g", &mut Vec::new());
    let mut row = finish(cfg, d, kind, workload, n, &dir, s, &msgs);
    if kind == "hel-store" && workload == "grow" && Some(&n) == cfg.grow.last() {
        let store = hel_store::Store::open_with(&dir, stores::no_limits()).expect("open store");
        let t = Instant::now();
        let (report, read) = counting_reads(|| hel_store::fsck::fsck(&store).expect("fsck"));
        assert!(report.is_sound(), "{:?}", report.faults);
        row.fsck_ms = Some(ms(t.elapsed()));
        row.fsck_read_bytes = Some(read);
        let (pass, read) = counting_reads(|| {
            packs::pass(
                &store.project_path().join(hel_store::STORE_DIR),
                Pass::Verify,
            )
        });
        row.fsck_baseline_ms = Some(pass.ms);
        row.fsck_baseline_read_bytes = Some(read);
    }
    drop(store);
    done_with(cfg, kind, &dir);
    row
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
    let mut rng = workload::rng(2);
    d.grow(s, &mut msgs, n, &mut rng, "base", &mut lens);
    let mut fork_time = Duration::ZERO;
    let mut last = (s, msgs.clone());
    for f in 0..cfg.forks {
        let k = rng.usize(..lens.len());
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
    row.fork_ms = Some(ms(fork_time) / cfg.forks.max(1) as f64);
    drop(store);
    done_with(cfg, kind, &dir);
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
    let mut rng = workload::rng(3);
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
    let row = finish(cfg, d, kind, "compact", n, &dir, s, &msgs);
    drop(store);
    done_with(cfg, kind, &dir);
    row
}

/// Allocated bytes under `dir` that `f` gave back, and its time.
fn reclaimed(dir: &Path, f: impl FnOnce()) -> (f64, u64) {
    let before = disk_usage(dir).1;
    let t = Instant::now();
    f();
    let took = ms(t.elapsed());
    (took, before.saturating_sub(disk_usage(dir).1))
}

/// Deletes of one session (with its collection) of which the many
/// workload reports the median.
const DELETE_ONE_RUNS: usize = 5;

/// many: many sessions; a few deleted one by one with their collection
/// (the median reported), then half of the rest with collection
/// deferred, then one full collection; then a search of every stored
/// message.
fn many(cfg: &Config, kind: &str) -> Row {
    let n = cfg.many_sessions;
    if kind == "whole-file" && cfg.many_sessions * cfg.many_messages > 100 * cfg.whole_file_max {
        return skipped(kind, "many", n, "not run (quadratic)");
    }
    let dir = fresh(cfg, &format!("many-{kind}"));
    let mut store = make_store(kind, &dir);
    let mut d = Driver::new(store.as_mut());
    let mut rng = workload::rng(4);
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
    let (keep, live) = sessions[1].clone();
    let mut row = finish(cfg, d, kind, "many", n, &dir, keep, &live);
    let st = store.as_mut();
    // One delete is one sample of a few syncs, which this disk moves by
    // milliseconds: the median of a few, each of a session outside the
    // half deleted next (odd indices from the end; session 1 is `keep`).
    let mut ones: Vec<(f64, u64, u64)> = (0..DELETE_ONE_RUNS)
        .map(|k| n.saturating_sub(1 + 2 * k))
        .filter(|&i| i > 1 && i % 2 == 1)
        .map(|i| {
            let ((t, b), read) =
                counting_reads(|| reclaimed(&dir, || st.delete(sessions[i].0, true)));
            (t, b, read)
        })
        .collect();
    ones.sort_by(|a, b| a.0.total_cmp(&b.0));
    if let Some(&(t, b, read)) = ones.get(ones.len() / 2) {
        row.delete_one_ms = Some(t);
        row.delete_one_read_bytes = (kind == "hel-store").then_some(read);
        row.delete_one_reclaimed_bytes = Some(b);
    }
    let half: Vec<usize> = sessions.iter().skip(2).step_by(2).map(|s| s.0).collect();
    let (t, b) = reclaimed(&dir, || {
        for s in &half {
            st.delete(*s, false);
        }
    });
    row.delete_half_ms = Some(t);
    row.delete_half_sessions = Some(half.len());
    row.delete_half_reclaimed_bytes = Some(b);
    let mut gc_time = None;
    let ((_, b), read) = counting_reads(|| reclaimed(&dir, || gc_time = st.gc()));
    if kind == "hel-store" {
        row.gc_read_bytes = Some(read);
    }
    if let Some(t) = gc_time {
        row.gc_ms = Some(ms(t));
        row.gc_reclaimed_bytes = Some(b);
    }
    row.after_gc_allocated_bytes = Some(disk_usage(&dir).1);
    if kind == "hel-store" {
        // The pass's timed part reads only the structure records; the
        // untimed search for them reads every file first.
        let passes: Vec<packs::PassReport> = (0..3)
            .map(|_| packs::structure_pass(&dir.join(".hel")))
            .collect();
        row.structure_read_ms = Some(median(passes.iter().map(|p| p.ms).collect()));
        row.structure_read_bytes = passes.first().map(|p| p.read_bytes);
    }
    st.close();
    let mut hits = 0;
    let times: Vec<f64> = (0..3)
        .map(|_| {
            let t = Instant::now();
            hits = st.search(&cfg.needle);
            ms(t.elapsed())
        })
        .collect();
    row.search_ms = Some(median(times));
    row.search_hits = Some(hits);
    row.search_needle = Some(cfg.needle.clone());
    if kind == "hel-store" {
        let times = (0..3)
            .map(|_| packs::pass(&dir.join(".hel"), Pass::Decode).ms)
            .collect();
        row.search_decode_once_ms = Some(median(times));
        if cfg.probe_child && cfg.hel_pinned.is_some() {
            row.sessions_search_ms = Some(sessions_search(cfg, &dir));
        }
    }
    drop(store);
    done_with(cfg, kind, &dir);
    row
}

/// `hel sessions search` of the needle in the project `dir`, as a process:
/// warm (one unmeasured run), the median of 3 in ms.
fn sessions_search(cfg: &Config, dir: &Path) -> f64 {
    // The needle as a regular expression that matches it literally.
    let pattern: String = cfg
        .needle
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == ' ' {
                c.to_string()
            } else {
                format!("\\x{{{:x}}}", c as u32)
            }
        })
        .collect();
    let once = || {
        let t = Instant::now();
        let out = hel_command(cfg)
            .args(["sessions", "search", &pattern])
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", cfg.hel.display()));
        // Exit 1: nothing matched; anything else is a failure.
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "hel sessions search failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        ms(t.elapsed())
    };
    once();
    median((0..3).map(|_| once()).collect())
}

/// list: many small sessions, listed as a person does: `hel sessions` (the
/// real binary, as a process) against a process reading the same summary
/// rows from SQLite. Only these two stores.
fn list(cfg: &Config, kind: &str) -> Row {
    let n = cfg.list_sessions;
    if kind != "hel-store" && kind != "sqlite" {
        return skipped(kind, "list", n, "not measured");
    }
    let dir = fresh(cfg, &format!("list-{kind}"));
    let mut store = make_store(kind, &dir);
    let mut d = Driver::new(store.as_mut());
    let mut rng = workload::rng(5);
    let mut last = (0, Vec::new());
    for i in 0..n {
        let s = d.store.create();
        let mut msgs = vec![workload::system()];
        for k in 0..cfg.list_messages.div_ceil(4) {
            msgs.extend(workload::exchange(&mut rng, &format!("l{i}"), k).messages);
        }
        d.commit(s, &msgs, &Carried::none(), false, None);
        d.store.end(s);
        last = (s, msgs);
    }
    let mut row = finish(cfg, d, kind, "list", n, &dir, last.0, &last.1);
    drop(store); // every session idle, as after the instances ended
    let listing = |first: bool| -> f64 {
        let t = Instant::now();
        let listed = match (kind, cfg.probe_child) {
            ("hel-store", true) => {
                let out = hel_command(cfg)
                    .arg("sessions")
                    .current_dir(&dir)
                    .stdin(std::process::Stdio::null())
                    .output()
                    .unwrap_or_else(|e| panic!("{}: {e}", cfg.hel.display()));
                assert!(
                    out.status.success(),
                    "hel sessions failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                // A header line, then one per session.
                out.stdout
                    .split(|b| *b == b'\n')
                    .filter(|l| !l.is_empty())
                    .count()
                    - 1
            }
            ("hel-store", false) => {
                let store = hel_store::Store::open(&dir).expect("open");
                store.sessions().expect("sessions").len()
            }
            (_, true) => {
                let db = dir.join("sqlite/sessions.db");
                let out = own_command()
                    .args(["--probe", "sqlite-list"])
                    .arg(&db)
                    .output()
                    .expect("probe");
                assert!(out.status.success(), "sqlite listing failed");
                out.stdout
                    .split(|b| *b == b'\n')
                    .filter(|l| !l.is_empty())
                    .count()
                    - 1
            }
            (_, false) => {
                stores::list_sqlite(&dir.join("sqlite/sessions.db"), &mut std::io::sink())
                    .expect("list")
            }
        };
        let took = ms(t.elapsed());
        if !first {
            assert_eq!(listed, n, "{kind}: listed {listed} sessions, expected {n}");
        }
        took
    };
    listing(true); // warm the page cache and the binary
    row.list_ms = Some(median(
        (0..cfg.list_runs.max(1)).map(|_| listing(false)).collect(),
    ));
    if kind == "hel-store" {
        let store = hel_store::Store::open(&dir).expect("open");
        let times = (0..cfg.list_runs.max(1))
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(store.sessions().expect("sessions"));
                ms(t.elapsed())
            })
            .collect();
        row.list_in_process_ms = Some(median(times));
    }
    done_with(cfg, kind, &dir);
    row
}

/// Remove a workload's project, or keep it (`--keep`, hel-store's only)
/// and say where.
fn done_with(cfg: &Config, kind: &str, dir: &Path) {
    if cfg.keep && kind == "hel-store" {
        eprintln!("kept: {}", dir.display());
    } else {
        let _ = fs::remove_dir_all(dir);
    }
}

/// A workload: runs one store.
type Workload = fn(&Config, &str) -> Row;

/// Run every workload for every store. `progress` sees each row as it is done.
pub fn run_all(cfg: &Config, mut progress: impl FnMut(&Row)) -> Vec<Row> {
    fs::create_dir_all(&cfg.workdir).expect("workdir");
    let mut pinned = cfg.clone();
    if cfg.probe_child && pinned.hel_pinned.is_none() {
        pinned.hel_pinned = fs::File::open(&cfg.hel).ok().map(Arc::new);
    }
    let cfg = &pinned;
    let mut rows = Vec::new();
    let mut push = |r: Row| {
        progress(&r);
        rows.push(r);
    };
    if cfg.wants("grow") {
        for &n in &cfg.grow {
            for kind in STORES {
                push(grow(cfg, kind, n));
            }
        }
    }
    let others: [(&str, Workload); 5] = [
        ("tmpfs", tmpfs),
        ("fork", fork),
        ("compact", compact),
        ("many", many),
        ("list", list),
    ];
    for (name, workload) in others {
        if cfg.wants(name) {
            for kind in STORES {
                let row = workload(cfg, kind);
                if row.note.as_deref() != Some("not measured") {
                    push(row);
                }
            }
        }
    }
    rows
}

fn mb(b: u64) -> String {
    format!("{:.1}", b as f64 / 1_048_576.0)
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_default()
}

/// The results as a markdown table: commits, resume and sizes.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| workload | n | store | commits | commit p50 µs | commit p99 µs | bytes/commit | new zstd/commit | resume ms (median) | flat JSON ms | resume peak RSS MB | apparent MB | allocated MB | unique zstd MB | allocated / unique | notes |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        if let Some(note) = r.note.as_ref().filter(|_| r.commits == 0) {
            s.push_str(&format!(
                "| {} | {} | {} | | | | | | | | | | | | | {note} |\n",
                r.workload, r.n, r.store
            ));
            continue;
        }
        let mut notes = Vec::new();
        if let Some(f) = r.fork_ms {
            notes.push(format!("fork {f:.2} ms"));
        }
        if let Some(o) = r.objects_bytes {
            notes.push(format!("packs {} MB", mb(o)));
        }
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {} | {} | {} | {} | {:.2} | {} |\n",
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
            r.allocated_bytes as f64 / r.unique_compressed_bytes.max(1) as f64,
            notes.join("; ")
        ));
    }
    s
}

/// The operations beyond commit and resume, one row per store: deletes,
/// gc, search (many), listing (list), fsck (the largest grow).
pub fn ops_table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| store | delete 1 ms (MB back) | delete half: n, ms (MB back) | gc ms (MB back) | allocated after MB | search ms (hits) | decode all once ms | list n | list ms (process, warm) | list in process ms | fsck ms | fsck yardstick ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for store in STORES {
        let find = |w: &str| {
            rows.iter()
                .find(|r| r.store == *store && r.workload == w && r.commits > 0)
        };
        let many = find("many");
        let list = find("list");
        let fsck = rows
            .iter()
            .find(|r| r.store == *store && r.fsck_ms.is_some());
        if many.is_none() && list.is_none() && fsck.is_none() {
            continue;
        }
        let m = |f: &dyn Fn(&Row) -> Option<String>| many.and_then(f).unwrap_or_default();
        s.push_str(&format!(
            "| {store} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            m(&|r| r
                .delete_one_ms
                .map(|t| format!("{t:.1} ({})", mb(r.delete_one_reclaimed_bytes.unwrap_or(0))))),
            m(&|r| r.delete_half_ms.map(|t| format!(
                "{}, {t:.0} ({})",
                r.delete_half_sessions.unwrap_or(0),
                mb(r.delete_half_reclaimed_bytes.unwrap_or(0))
            ))),
            m(&|r| r
                .gc_ms
                .map(|t| format!("{t:.0} ({})", mb(r.gc_reclaimed_bytes.unwrap_or(0))))),
            m(&|r| r.after_gc_allocated_bytes.map(mb)),
            m(&|r| r
                .search_ms
                .map(|t| format!("{t:.0} ({})", r.search_hits.unwrap_or(0)))),
            m(&|r| r.search_decode_once_ms.map(|t| format!("{t:.0}"))),
            opt(list, |r| r.n.to_string()),
            opt(list.and_then(|r| r.list_ms), |t| format!("{t:.1}")),
            opt(list.and_then(|r| r.list_in_process_ms), |t| format!(
                "{t:.1}"
            )),
            opt(fsck.and_then(|r| r.fsck_ms), |t| format!("{t:.0}")),
            opt(fsck.and_then(|r| r.fsck_baseline_ms), |t| format!("{t:.0}")),
        ));
    }
    s
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "MISSED"
    }
}

fn row<'a>(rows: &'a [Row], store: &str, workload: &str, n: usize) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.store == store && r.workload == workload && r.n == n && r.commits > 0)
}

/// hel-store's targets (issue 13), as ratios measured in this run.
pub fn targets(rows: &[Row]) -> String {
    let hel: Vec<&Row> = rows
        .iter()
        .filter(|r| r.store == "hel-store" && r.commits > 0 && r.workload != "tmpfs")
        .collect();
    let mut s = String::new();
    let ratio = |a: f64, b: f64| a / b.max(1e-9);
    // Commit p50 against the JSONL append, at every grow size.
    for r in hel.iter().filter(|r| r.workload == "grow") {
        if let Some(j) = row(rows, "jsonl", "grow", r.n) {
            let x = ratio(r.commit_p50_us as f64, j.commit_p50_us as f64);
            s.push_str(&format!(
                "- commit p50, grow n={}: {} µs vs JSONL {} µs: {x:.2}× (target ≤ 1.3×: {})\n",
                r.n,
                r.commit_p50_us,
                j.commit_p50_us,
                verdict(x <= 1.3)
            ));
        }
    }
    // Resume against JSONL, the flat file and SQLite.
    for r in &hel {
        let j = row(rows, "jsonl", &r.workload, r.n);
        let q = row(rows, "sqlite", &r.workload, r.n);
        let mut parts = Vec::new();
        // The ratio targets hold for 1,000 to 100,000 live messages.
        let in_range = (1_000..=100_001).contains(&r.live_messages);
        if let Some(j) = j {
            let x = ratio(r.resume_ms, j.resume_ms);
            parts.push(if in_range {
                format!("{x:.2}× JSONL (≤ 1.2×: {})", verdict(x <= 1.2))
            } else {
                format!("{x:.2}× JSONL")
            });
        }
        let x = ratio(r.resume_ms, r.flat_resume_ms);
        parts.push(if in_range {
            format!("{x:.2}× flat JSON (≤ 1.2×: {})", verdict(x <= 1.2))
        } else {
            format!("{x:.2}× flat JSON")
        });
        if let Some(q) = q {
            let x = ratio(r.resume_ms, q.resume_ms);
            parts.push(format!("{x:.2}× SQLite (≤ 1×: {})", verdict(x <= 1.0)));
        }
        if r.live_messages <= 1_001 {
            parts.push(format!(
                "{:.1} ms (< 5 ms: {})",
                r.resume_ms,
                verdict(r.resume_ms < 5.0)
            ));
        }
        if let Some(j) = j {
            let x = ratio(
                r.resume_peak_rss_bytes as f64,
                j.resume_peak_rss_bytes as f64,
            );
            parts.push(format!(
                "peak RSS {x:.2}× JSONL's (≤ 1×: {})",
                verdict(x <= 1.0)
            ));
        }
        s.push_str(&format!(
            "- resume, {} n={} ({} live): {} ms: {}\n",
            r.workload,
            r.n,
            r.live_messages,
            format_args!("{:.1}", r.resume_ms),
            parts.join(", ")
        ));
    }
    // Allocated bytes against the unique compressed content.
    for r in rows
        .iter()
        .filter(|r| r.commits > 0 && r.workload != "list" && r.workload != "tmpfs")
    {
        if r.workload == "grow"
            && Some(r.n)
                != rows
                    .iter()
                    .filter(|x| x.workload == "grow")
                    .map(|x| x.n)
                    .max()
        {
            continue;
        }
        let x = ratio(r.allocated_bytes as f64, r.unique_compressed_bytes as f64);
        s.push_str(&format!(
            "- allocated / unique zstd, {} n={}, {}: {} MB / {} MB = {x:.2}×{}\n",
            r.workload,
            r.n,
            r.store,
            mb(r.allocated_bytes),
            mb(r.unique_compressed_bytes),
            if r.store == "hel-store" {
                format!(" (target ≤ 1.1×: {})", verdict(x <= 1.1))
            } else {
                String::new()
            }
        ));
    }
    for r in &hel {
        if let Some(t) = r.delete_one_ms {
            s.push_str(&format!(
                "- delete one session of {} (with its gc, median of {DELETE_ONE_RUNS}): {t:.1} ms (≤ 200 ms: {})\n",
                r.n,
                verdict(t <= 200.0)
            ));
        }
        if let Some(t) = r.gc_ms {
            s.push_str(&format!(
                "- full gc of the {}-session store after deleting {}: {t:.0} ms (≤ 1,500 ms: {})\n",
                r.n,
                r.delete_half_sessions.unwrap_or(0) + DELETE_ONE_RUNS,
                verdict(t <= 1500.0)
            ));
        }
        if let (Some(f), Some(b)) = (r.fsck_ms, r.fsck_baseline_ms) {
            let x = ratio(f, b);
            s.push_str(&format!(
                "- fsck of grow n={}: {f:.0} ms vs read + check + zstd + BLAKE3 + JSON parse {b:.0} ms: {x:.2}× (≤ 1.3×: {})\n",
                r.n,
                verdict(x <= 1.3)
            ));
        }
        if let Some(t) = r.list_ms {
            let q = row(rows, "sqlite", "list", r.n).and_then(|q| q.list_ms);
            s.push_str(&format!(
                "- `hel sessions` with {} sessions, warm: {t:.1} ms (≤ 200 ms: {}){}\n",
                r.n,
                verdict(t <= 200.0),
                q.map(|q| format!("; SQLite rows {q:.1} ms ({:.1}×)", ratio(t, q)))
                    .unwrap_or_default()
            ));
        }
        if let Some(t) = r.sessions_search_ms {
            s.push_str(&format!(
                "- `hel sessions search` of the {}-session many store (newest conversations, as a process, warm): {t:.0} ms\n",
                r.n
            ));
        }
        if let (Some(t), Some(y)) = (r.search_ms, r.search_decode_once_ms) {
            s.push_str(&format!(
                "- search of the many store: {t:.0} ms, {:.2}× decoding its objects once ({y:.0} ms)\n",
                ratio(t, y)
            ));
        }
    }
    s
}

/// Facts about this machine for the JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu: Option<String>,
    pub cores: usize,
    pub memory_kib: Option<u64>,
    pub kernel: Option<String>,
    pub os: &'static str,
    /// The work two busy threads did against one ([`two_threads`]) when
    /// the run started and when it ended: 2.0 where two cores were free,
    /// 1.0 where the second thread got no core of its own.
    pub two_threads: Option<[f64; 2]>,
}

impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}, {} cores, {} GiB, Linux {}",
            self.cpu.as_deref().unwrap_or("?"),
            self.cores,
            self.memory_kib.unwrap_or(0) / 1_048_576,
            self.kernel.as_deref().unwrap_or("?"),
        )?;
        if let Some([start, end]) = self.two_threads {
            write!(
                f,
                "; two busy threads did {start:.2}× one thread's work at the start, {end:.2}× at the end"
            )?;
        }
        Ok(())
    }
}

pub fn machine() -> Machine {
    let cpu = fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
    });
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_owned());
    let memory_kib = fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|m| m.parse().ok())
    });
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory_kib,
        kernel,
        os: std::env::consts::OS,
        two_threads: None,
    }
}

/// How much work two threads that only compute do together, against one
/// alone, now: the median of five tries of about 30 ms each, the work
/// being what the store's reads do most (zstd decompression of hel's own
/// objects and BLAKE3). A virtual machine's second core may be the first
/// one's hyperthread, shared with other guests, or packed onto the first
/// by its scheduler; the store's reads on two threads (resume, fsck,
/// search) gain only what this says.
pub fn two_threads() -> f64 {
    fn spin() -> Duration {
        let mut rng = workload::rng(2);
        let text = workload::text(&mut rng, 64 << 10);
        let frame = zstd::bulk::compress(text.as_bytes(), 3).expect("zstd");
        let t = Instant::now();
        for _ in 0..200 {
            let out = zstd::bulk::decompress(&frame, text.len()).expect("zstd");
            std::hint::black_box(blake3::hash(&out));
        }
        t.elapsed()
    }
    let tries = (0..5)
        .map(|_| {
            let one = spin();
            let t = Instant::now();
            // A thread that cannot be started did no work.
            let threads = std::thread::scope(|s| {
                let second = std::thread::Builder::new().spawn_scoped(s, spin);
                spin();
                1.0 + f64::from(u8::from(second.is_ok_and(|h| h.join().is_ok())))
            });
            threads * one.as_secs_f64() / t.elapsed().as_secs_f64().max(1e-9)
        })
        .collect();
    median(tries)
}

/// The `--json` document.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub machine: Machine,
    pub mode: &'a str,
    pub total_seconds: f64,
    pub results: &'a [Row],
    /// The workspace workload's figures, when it ran.
    pub workspace: Option<&'a crate::workspace::Results>,
}

/// The workspace workload: issue 14's figures against git on a generated
/// project of `cfg.ws_files` files under the work directory (None when
/// not wanted; an error when it could not run).
pub fn workspace(
    cfg: &Config,
    progress: impl FnMut(&str),
) -> Option<Result<crate::workspace::Results, crate::workspace::BenchError>> {
    if !cfg.wants("workspace") || cfg.ws_files == 0 {
        return None;
    }
    let ws = crate::workspace::Config {
        files: cfg.ws_files,
        dirs: cfg.ws_dirs,
        restore_files: cfg.ws_restore_files,
        runs: cfg.ws_runs,
        ..crate::workspace::Config::full(cfg.workdir.join("workspace"))
    };
    Some(crate::workspace::run(&ws, progress))
}
