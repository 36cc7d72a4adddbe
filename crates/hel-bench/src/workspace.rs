//! Workspace snapshots against git on one generated project (issue 14's
//! performance targets): `hel-bench workspace`.
//!
//! A seeded generator writes a project (by default 70,000 files in 7,000
//! directories, about 850 MB, every file under the 1 MiB limit, a few
//! executables and symlinks, an ignored `build/` directory). The same
//! directory is a git repository (`.hel/` excluded in `.git/info/exclude`)
//! so both read the same files from the same page cache. hel's side calls
//! the hel-workspace library in this process, as the agent does; git's
//! side runs the `git` binary as processes, as a user does. Each figure is
//! a median of alternating runs, so a load spike costs both sides.

use std::collections::HashMap;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hel_store::{
    CommitInput, Leaf, ObjectId, Record, SessionLease, SessionState, Store, Workspace as Ws,
};
use hel_workspace::undo;
use hel_workspace::{Flat, Options, Prev, Workspace};
use serde::Serialize;
use serde_json::{json, Value};

use crate::measure::{disk_usage, median};
use crate::workload::{self, Rng};

/// The shape of the generated project and how often each figure is taken.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where the project is generated (removed first, and at the end
    /// unless `keep`).
    pub dir: PathBuf,
    pub files: usize,
    pub dirs: usize,
    pub seed: u64,
    /// Runs per figure (the median is reported; restores take
    /// `runs.div_ceil(3)`, each rewriting `restore_files` files).
    pub runs: usize,
    /// Files changed and then restored.
    pub restore_files: usize,
    pub keep: bool,
}

impl Config {
    /// Issue 14's tree: 70,000 files in 7,000 directories.
    pub fn full(dir: PathBuf) -> Config {
        Config {
            dir,
            files: 70_000,
            dirs: 7_000,
            seed: 14,
            runs: 7,
            restore_files: 1_000,
            keep: false,
        }
    }

    /// A tree small enough for the test suite.
    pub fn smoke(dir: PathBuf) -> Config {
        Config {
            dir,
            files: 150,
            dirs: 20,
            seed: 14,
            runs: 2,
            restore_files: 20,
            keep: false,
        }
    }
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`git {args}` failed: {why}")]
    Git { args: String, why: String },
    #[error(transparent)]
    Store(#[from] hel_store::Error),
    #[error(transparent)]
    Snapshot(#[from] hel_workspace::SnapshotError),
    #[error(transparent)]
    Flat(#[from] hel_workspace::flat::FlatError),
    #[error(transparent)]
    Undo(#[from] undo::UndoError),
    #[error(transparent)]
    History(#[from] hel_workspace::history::HistoryError),
    #[error("the benchmark's own check failed: {0}")]
    Check(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |source| BenchError::Io {
        path: path.to_owned(),
        source,
    }
}

/// What one run measured (times in ms, medians; sizes in bytes).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Results {
    pub files: usize,
    pub dirs: usize,
    pub symlinks: usize,
    pub ignored_files: usize,
    pub project_bytes: u64,
    pub git_version: String,
    /// First snapshot (every file hashed and compressed) and its commit;
    /// `git add -A` of the same files.
    pub first_snapshot_ms: f64,
    pub first_commit_ms: f64,
    pub first_git_add_ms: f64,
    pub first_new_bytes: u64,
    pub store_bytes: u64,
    /// Nothing changed: a snapshot with the workspace kept open (the
    /// agent's case between instructions: watched, so no walk); one from
    /// a fresh open (a new `hel` process: the stat cache read from disk,
    /// with the last snapshot's paths, checked against its tree); `git
    /// status`.
    pub nochange_snapshot_ms: f64,
    pub nochange_fresh_ms: f64,
    pub git_status_ms: f64,
    /// One file changed: the snapshot, and with its commit;
    /// `git add -A && git write-tree`.
    pub onefile_snapshot_ms: f64,
    pub onefile_commit_ms: f64,
    pub git_add_write_tree_ms: f64,
    /// Storage of a one-file change: what its record's commit wrote, less
    /// what the same record costs with nothing changed; the bound (the
    /// file's compressed size + 64 bytes per entry of each tree on its
    /// path); the trees' bytes per entry.
    pub onefile_new_bytes: u64,
    pub onefile_record_bytes: u64,
    pub onefile_bound_bytes: u64,
    pub onefile_tree_bytes_per_entry: f64,
    pub onefile_blob_stored_bytes: u64,
    /// The stat cache file and its bytes per file.
    pub cache_bytes: u64,
    pub cache_bytes_per_file: f64,
    /// Restore of `restore_files` changed files (`hel undo` of the
    /// instruction that changed them: its before-restore snapshot, the
    /// writes, the restored record), the before-restore snapshot alone;
    /// `git status` + `git checkout -- .` of the same change.
    pub restore_files: usize,
    pub restore_ms: f64,
    pub restore_snapshot_ms: f64,
    pub git_status_checkout_ms: f64,
    /// The same followed by one `syncfs` (the durability hel's restore
    /// gives), and one `syncfs` with nothing of the benchmark's to write.
    pub git_status_checkout_syncfs_ms: f64,
    pub idle_syncfs_ms: f64,
    pub restore_written: usize,
    pub restore_conflicts: usize,
    /// The store's part of a checkpoint commit (one exchange of four
    /// messages): without a workspace field, and with one whose trees are
    /// stored already (the walk excluded; it is the no-change figure).
    /// Both follow a snapshot through the same transaction (taken with
    /// the workspace kept open, as the agent takes it), so that they
    /// differ by the field alone.
    pub commit_plain_ms: f64,
    pub commit_with_workspace_ms: f64,
    /// Of those, the committing thread's time on a CPU (medians; the
    /// rest is waiting for the disk and for a CPU).
    pub commit_plain_cpu_ms: f64,
    pub commit_with_workspace_cpu_ms: f64,
    /// The commit with the field after a `sync` between the snapshot and
    /// the commit (what the walk left dirty written first), and the files
    /// those snapshots read.
    pub commit_with_workspace_synced_ms: f64,
    pub commit_files_read: u64,
    pub total_seconds: f64,
}

// ---------------------------------------------------------------------
// The generated project.

/// One generated file: its path, and which of its variants is on disk.
struct File {
    path: String,
    size: usize,
    exec: bool,
}

struct Project {
    root: PathBuf,
    files: Vec<File>,
    symlinks: usize,
    ignored: usize,
    bytes: u64,
    /// Code-like text every file's content is cut from.
    corpus: Vec<u8>,
}

/// A file size: 99 % log-uniform in 64 B–64 KiB, 1 % in 64 KiB–1 MiB
/// (about 12 KiB on average: 70,000 files come to about 850 MB).
fn file_size(rng: &mut Rng) -> usize {
    let (lo, hi) = if rng.u32(..100) == 0 {
        (65_536.0f64, 1_048_000.0f64)
    } else {
        (64.0, 65_536.0)
    };
    (lo * (hi / lo).powf(rng.f64())) as usize
}

impl Project {
    /// The bytes of `f` in its variant `v` (0: as generated): a first line
    /// naming the file and the variant, then text cut from the corpus at an
    /// offset the path decides, so every file and variant is distinct.
    fn content(&self, f: &File, v: u32) -> Vec<u8> {
        let mut out = format!("// {} v{v}\n", f.path).into_bytes();
        let h = blake3::hash(f.path.as_bytes());
        let mut at = u64::from_le_bytes(h.as_bytes()[..8].try_into().unwrap_or([0; 8])) as usize
            % self.corpus.len();
        while out.len() < f.size {
            let take = (f.size - out.len()).min(self.corpus.len() - at);
            out.extend_from_slice(&self.corpus[at..at + take]);
            at = 0;
        }
        out
    }

    fn write(&self, f: &File, v: u32) -> Result<(), BenchError> {
        let path = self.root.join(&f.path);
        fs::write(&path, self.content(f, v)).map_err(io(&path))
    }
}

/// Write the project: `dirs` directories as an 8-ary tree (depth 5 for
/// 7,000), `files` files spread over them at random, 1 % executable, one
/// symlink per 1,000 files, and a `build/` directory and `*.log` files
/// that `.gitignore` leaves out.
/// Write `bytes` to `path` with an mtime an hour back, as a project's
/// files are when an agent starts: a snapshot trusts its stat cache only
/// for files older than the walk that wrote it (the racy rule), and a
/// tiny generated project would otherwise be read again whole.
fn write_settled(path: &Path, bytes: &[u8]) -> Result<(), BenchError> {
    use std::io::Write;
    let mut f = fs::File::create(path).map_err(io(path))?;
    f.write_all(bytes).map_err(io(path))?;
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    f.set_modified(past).map_err(io(path))
}

fn generate(cfg: &Config) -> Result<Project, BenchError> {
    let root = cfg.dir.join("project");
    if root.exists() {
        fs::remove_dir_all(&root).map_err(io(&root))?;
    }
    let mut rng = workload::rng(cfg.seed);
    let corpus = workload::text(&mut rng, 4 << 20).into_bytes();
    let mut dirs = vec![String::new()];
    for i in 1..cfg.dirs.max(1) {
        let parent = &dirs[(i - 1) / 8];
        let name = format!("mod{}", i % 1000);
        dirs.push(if parent.is_empty() {
            name
        } else {
            format!("{parent}/{name}")
        });
    }
    for d in &dirs {
        let p = root.join(d);
        fs::create_dir_all(&p).map_err(io(&p))?;
    }
    let mut files = Vec::with_capacity(cfg.files);
    for k in 0..cfg.files {
        let d = &dirs[rng.usize(..dirs.len())];
        let ext = ["rs", "md", "json", "txt", "c", "py"][rng.usize(..6)];
        let name = format!("f{k}.{ext}");
        files.push(File {
            path: if d.is_empty() {
                name
            } else {
                format!("{d}/{name}")
            },
            size: file_size(&mut rng),
            exec: rng.u32(..100) == 0,
        });
    }
    let mut p = Project {
        root: root.clone(),
        files,
        symlinks: 0,
        ignored: 0,
        bytes: 0,
        corpus,
    };
    for f in &p.files {
        let bytes = p.content(f, 0);
        let path = root.join(&f.path);
        write_settled(&path, &bytes)?;
        p.bytes += bytes.len() as u64;
        if f.exec {
            let path = root.join(&f.path);
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).map_err(io(&path))?;
        }
    }
    for (k, f) in p.files.iter().enumerate().step_by(1000) {
        let name = format!("{}.link{k}", f.path);
        let target = f.path.rsplit('/').next().unwrap_or(&f.path).to_owned();
        let link = root.join(name);
        std::os::unix::fs::symlink(target, &link).map_err(io(&link))?;
        p.symlinks += 1;
    }
    let gi = root.join(".gitignore");
    write_settled(&gi, b"build/\n*.log\n")?;
    let build = root.join("build");
    fs::create_dir_all(&build).map_err(io(&build))?;
    for k in 0..(cfg.files / 100).max(1) {
        let path = build.join(format!("out{k}.o"));
        fs::write(&path, workload::text(&mut rng, 4096)).map_err(io(&path))?;
        p.ignored += 1;
    }
    for d in dirs.iter().step_by(50) {
        let path = root.join(d).join("debug.log");
        fs::write(&path, "log\n").map_err(io(&path))?;
        p.ignored += 1;
    }
    Ok(p)
}

// ---------------------------------------------------------------------
// git.

struct Git<'a> {
    root: &'a Path,
}

impl Git<'_> {
    fn command(&self) -> Command {
        let mut c = Command::new("git");
        // The user's configuration stays out of the comparison.
        c.current_dir(self.root)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    /// Run `git args`, returning how long it took.
    fn run(&self, args: &[&str]) -> Result<Duration, BenchError> {
        let fail = |why: String| BenchError::Git {
            args: args.join(" "),
            why,
        };
        let t = Instant::now();
        let out = self
            .command()
            .args(args)
            .output()
            .map_err(|e| fail(e.to_string()))?;
        let took = t.elapsed();
        if !out.status.success() {
            return Err(fail(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
        }
        Ok(took)
    }

    fn version(&self) -> String {
        Command::new("git")
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    }
}

// ---------------------------------------------------------------------
// hel's side: one session whose records carry the workspace.

struct Session {
    store: Store,
    lease: SessionLease,
    state: SessionState,
    conv: Conversation,
    /// The last snapshot's root tree and paths (the agent keeps them).
    last: Option<(ObjectId, std::sync::Arc<Flat>)>,
}

/// The session's messages, as hel's conversation keeps them.
struct Conversation {
    messages: Vec<Value>,
    leaves: Vec<Option<Leaf>>,
    rng: Rng,
}

impl Conversation {
    /// Commit an answer through `txn`: one exchange of four new messages,
    /// with `workspace` when given. Returns how long the commit took and
    /// what it wrote.
    fn answer(
        &mut self,
        txn: hel_store::Txn<'_>,
        workspace: Option<Ws>,
    ) -> Result<(Duration, u64), BenchError> {
        let k = self.messages.len();
        let r = &mut self.rng;
        let (a, b, c, d) = (
            r.usize(150..250),
            r.usize(700..1000),
            r.usize(1000..8000),
            r.usize(300..700),
        );
        self.messages.extend([
            json!({"role": "user", "content": workload::text(r, a)}),
            json!({"role": "assistant", "content": workload::text(r, b)}),
            json!({"role": "user", "content": workload::text(r, c)}),
            json!({"role": "assistant", "content": workload::text(r, d)}),
        ]);
        self.leaves.resize(self.messages.len(), None);
        let t = Instant::now();
        let c = txn.commit(
            CommitInput::new(
                Record::Answer,
                &self.messages,
                &self.leaves,
                "/bench",
                hel_store::SessionRecord::of(hel_store::RequestConfig::bare("bench", "m")),
            )
            .instruction(&format!("bench {k}"))
            .usage(1000, 100)
            .why("bench")
            .workspace(workspace),
        )?;
        let took = t.elapsed();
        self.leaves.truncate(c.leaves_from);
        self.leaves.extend(c.new_leaves.iter().copied().map(Some));
        Ok((took, c.bytes_written))
    }
}

fn ws(tree: ObjectId, start: Option<ObjectId>, not_tracked: usize) -> Ws {
    Ws {
        tree,
        start,
        not_tracked: not_tracked as u64,
        restored: None,
    }
}

/// Snapshot the project and commit it as `record` (a workspace record:
/// the head's messages kept). Returns the snapshot's time, the commit's
/// and the bytes the commit wrote.
fn record(
    s: &mut Session,
    w: &mut Workspace,
    record: Record,
    start: Option<ObjectId>,
) -> Result<(Duration, Duration, u64), BenchError> {
    let mut txn = s.store.begin(&s.lease, &mut s.state)?;
    let t = Instant::now();
    let prev = s
        .last
        .as_ref()
        .map(|(tree, flat)| Prev { tree: *tree, flat });
    let snap = w.snapshot(&mut txn, prev)?;
    let snap_took = t.elapsed();
    let t = Instant::now();
    let c = txn.commit_record(
        record,
        ws(snap.tree, start, snap.not_tracked.len()),
        "bench",
    )?;
    let commit_took = t.elapsed();
    s.last = Some((snap.tree, snap.flat));
    Ok((snap_took, commit_took, c.bytes_written))
}

/// This thread's time on a CPU so far (`CLOCK_THREAD_CPUTIME_ID`).
fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn med(v: &[Duration]) -> f64 {
    median(v.iter().map(|d| ms(*d)).collect())
}

/// Entries of each directory of `flat` (the root is `""`).
fn entries_per_dir(flat: &Flat) -> HashMap<Vec<u8>, usize> {
    let mut n: HashMap<Vec<u8>, usize> = HashMap::new();
    for path in flat.items.keys() {
        *n.entry(hel_workspace::flat::split(path).0.to_vec())
            .or_default() += 1;
    }
    n
}

/// The directories on `path`'s way, the root first.
fn ancestors(path: &str) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let parts: Vec<&str> = path.split('/').collect();
    for i in 1..parts.len() {
        out.push(parts[..i].join("/").into_bytes());
    }
    out
}

/// Run the benchmark; `progress` hears what is being measured.
pub fn run(cfg: &Config, mut progress: impl FnMut(&str)) -> Result<Results, BenchError> {
    let started = Instant::now();
    let runs = cfg.runs.max(1);
    fs::create_dir_all(&cfg.dir).map_err(io(&cfg.dir))?;
    progress(&format!(
        "generating {} files in {} directories under {}",
        cfg.files,
        cfg.dirs,
        cfg.dir.display()
    ));
    let p = generate(cfg)?;
    let root = p.root.clone();
    let git = Git { root: &root };
    let mut r = Results {
        files: p.files.len(),
        dirs: cfg.dirs,
        symlinks: p.symlinks,
        ignored_files: p.ignored,
        project_bytes: p.bytes,
        git_version: git.version(),
        restore_files: cfg.restore_files.min(p.files.len()),
        ..Results::default()
    };
    git.run(&["init", "-q"])?;
    for (k, v) in [
        ("user.name", "bench"),
        ("user.email", "bench@example.invalid"),
        // No automatic repack in the middle of a measurement.
        ("gc.auto", "0"),
    ] {
        git.run(&["config", k, v])?;
    }
    let exclude = root.join(".git/info/exclude");
    fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&exclude)
        .and_then(|mut f| f.write_all(b".hel/\n"))
        .map_err(io(&exclude))?;
    // What the generator wrote reaches the disk before anything is timed.
    rustix::fs::sync();

    // 1. First snapshot against the first `git add -A`.
    progress("first snapshot and first git add -A");
    r.first_git_add_ms = ms(git.run(&["add", "-A"])?);
    git.run(&["commit", "-q", "--no-verify", "-m", "base"])?;
    let store = Store::open_with(&root, crate::stores::no_limits())?;
    let lease = store.new_session()?;
    let mut s = Session {
        store,
        lease,
        state: SessionState::default(),
        conv: Conversation {
            messages: vec![workload::system()],
            leaves: vec![None],
            rng: workload::rng(cfg.seed + 1),
        },
        last: None,
    };
    let mut w = Workspace::open(
        &s.store,
        Options {
            max_file: 1 << 20,
            // The first snapshot stores the whole tree.
            budget: u64::MAX,
            ..Options::default()
        },
    )?;
    {
        let mut txn = s.store.begin(&s.lease, &mut s.state)?;
        let t = Instant::now();
        let snap = w.snapshot(&mut txn, None)?;
        r.first_snapshot_ms = ms(t.elapsed());
        r.first_new_bytes = snap.new_bytes;
        if !snap.not_tracked.is_empty() {
            return Err(BenchError::Check(format!(
                "{} files not tracked by the first snapshot",
                snap.not_tracked.len()
            )));
        }
        let tree = snap.tree;
        let tracked = snap
            .flat
            .items
            .values()
            .filter(|i| i.kind == hel_store::tree::EntryKind::File)
            .count();
        // The generated files and .gitignore; nothing ignored.
        if tracked != p.files.len() + 1 {
            return Err(BenchError::Check(format!(
                "the first snapshot holds {tracked} files, not {}",
                p.files.len() + 1
            )));
        }
        s.last = Some((tree, snap.flat));
        let (took, _) = s.conv.answer(txn, Some(ws(tree, None, 0)))?;
        r.first_commit_ms = ms(took);
    }
    w.options.budget = Options::default().budget;

    // 2. Nothing changed. Warm-up: racy files settle, git refreshes its
    // index.
    progress("no-change snapshot and git status");
    for _ in 0..2 {
        git.run(&["status", "--porcelain"])?;
        record(&mut s, &mut w, Record::Start, None)?;
    }
    let (mut hel, mut fresh, mut gs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        gs.push(git.run(&["status", "--porcelain"])?);
        let mut txn = s.store.begin(&s.lease, &mut s.state)?;
        let prev = s
            .last
            .as_ref()
            .map(|(tree, flat)| Prev { tree: *tree, flat });
        let t = Instant::now();
        let snap = w.snapshot(&mut txn, prev)?;
        hel.push(t.elapsed());
        if snap.files_read != 0 || Some(snap.tree) != s.last.as_ref().map(|l| l.0) {
            return Err(BenchError::Check(format!(
                "a snapshot with nothing changed read {} files",
                snap.files_read
            )));
        }
        drop(txn);
        let (took, files_read) = fresh_snapshot(&root, s.lease.session())?;
        fresh.push(took);
        if files_read != 0 {
            return Err(BenchError::Check(format!(
                "a fresh snapshot with nothing changed read {files_read} files"
            )));
        }
    }
    r.nochange_snapshot_ms = med(&hel);
    r.nochange_fresh_ms = med(&fresh);
    r.git_status_ms = med(&gs);
    let (_, _, record_bytes) = record(&mut s, &mut w, Record::Start, None)?;
    r.onefile_record_bytes = record_bytes;

    // 3. One file changed (a different one each run).
    progress("one-file change against git add -A && git write-tree");
    let (mut snaps, mut commits, mut gw, mut new_bytes) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut bounds = Vec::new();
    let mut per_entry = Vec::new();
    let mut blob_bytes = Vec::new();
    for k in 0..runs {
        let f = &p.files[(k * 7919 + 13) % p.files.len()];
        let bytes = p.content(f, 1);
        let path = root.join(&f.path);
        fs::write(&path, &bytes).map_err(io(&path))?;
        let t = Instant::now();
        git.run(&["add", "-A"])?;
        git.run(&["write-tree"])?;
        gw.push(t.elapsed());
        let (snap, commit, written) = record(&mut s, &mut w, Record::Start, None)?;
        snaps.push(snap);
        commits.push(snap + commit);
        let new = written.saturating_sub(record_bytes);
        new_bytes.push(new as f64);
        let blob = hel_store::encode_blob(&bytes)?.stored_len();
        let per_dir = s
            .last
            .as_ref()
            .map(|l| entries_per_dir(&l.1))
            .unwrap_or_default();
        let entries: usize = ancestors(&f.path)
            .iter()
            .map(|d| per_dir.get(d).copied().unwrap_or(0))
            .sum();
        bounds.push((blob + 64 * entries as u64) as f64);
        per_entry.push(new.saturating_sub(blob) as f64 / entries.max(1) as f64);
        blob_bytes.push(blob as f64);
    }
    r.onefile_snapshot_ms = med(&snaps);
    r.onefile_commit_ms = med(&commits);
    r.git_add_write_tree_ms = med(&gw);
    r.onefile_new_bytes = median(new_bytes) as u64;
    r.onefile_bound_bytes = median(bounds) as u64;
    r.onefile_tree_bytes_per_entry = median(per_entry);
    r.onefile_blob_stored_bytes = median(blob_bytes) as u64;
    let cache = root
        .join(".hel/workspace")
        .join(hel_workspace::cache::CACHE_FILE);
    r.cache_bytes = fs::metadata(&cache).map_err(io(&cache))?.len();
    r.cache_bytes_per_file = r.cache_bytes as f64 / (p.files.len() + p.symlinks) as f64;

    // 4. Restore of many changed files: an instruction changes them
    // (start and answer records around it), then `hel undo`; git gets the
    // same change and `git status` + `git checkout -- .`.
    progress("restore of changed files against git status + git checkout");
    git.run(&["add", "-A"])?;
    git.run(&["commit", "-q", "--no-verify", "-m", "one-file changes"])?;
    let n = r.restore_files;
    let (mut hel_r, mut hel_rs, mut git_r) = (Vec::new(), Vec::new(), Vec::new());
    let (mut git_sync, mut idle_sync) = (Vec::new(), Vec::new());
    for rep in 0..runs.div_ceil(3) {
        let chosen: Vec<&File> = (0..n)
            .map(|i| &p.files[(i * (p.files.len() / n).max(1) + rep) % p.files.len()])
            .collect();
        let variant = 10 + rep as u32;
        let (_, _, _) = record(&mut s, &mut w, Record::Start, None)?;
        let start = s.last.as_ref().map(|l| l.0);
        let before: Vec<Vec<u8>> = chosen
            .iter()
            .map(|f| fs::read(root.join(&f.path)).map_err(io(&root.join(&f.path))))
            .collect::<Result<_, _>>()?;
        for f in &chosen {
            p.write(f, variant)?;
        }
        // The change is on disk before anything is timed: a restore's
        // `syncfs` does not flush the benchmark's own writes.
        rustix::fs::sync();
        let mut txn = s.store.begin(&s.lease, &mut s.state)?;
        let prev = s
            .last
            .as_ref()
            .map(|(tree, flat)| Prev { tree: *tree, flat });
        let snap = w.snapshot(&mut txn, prev)?;
        let tree = snap.tree;
        s.last = Some((tree, snap.flat));
        s.conv.answer(txn, Some(ws(tree, start, 0)))?;
        let head = s
            .state
            .head
            .ok_or_else(|| BenchError::Check("no head".into()))?;
        let t = Instant::now();
        let (plan, _) = undo::undo_plan(&s.store, &head, false)?;
        let out = undo::go_back(&s.store, &s.lease, &mut s.state, &mut w, &plan)?;
        hel_r.push(t.elapsed());
        r.restore_written = out.written.len() + out.removed.len();
        r.restore_conflicts = out.conflicts.len();
        if r.restore_written != n || !out.conflicts.is_empty() {
            return Err(BenchError::Check(format!(
                "hel undo wrote {} files with {} conflicts; {n} were changed",
                r.restore_written,
                out.conflicts.len()
            )));
        }
        for (f, old) in chosen.iter().zip(&before) {
            let path = root.join(&f.path);
            if fs::read(&path).map_err(io(&path))? != *old {
                return Err(BenchError::Check(format!(
                    "{} is not what it was after hel undo",
                    f.path
                )));
            }
        }
        // The session's snapshots go on from what the restore left.
        s.last = None;
        let restored = out
            .restored
            .ok_or_else(|| BenchError::Check("hel undo recorded nothing".into()))?;
        let tree = hel_workspace::history::newest_tree(&s.store, &restored)?
            .ok_or_else(|| BenchError::Check("no tree after the restore".into()))?;
        s.last = Some((tree, std::sync::Arc::new(Flat::read(&s.store, &tree)?)));
        // A before-restore snapshot alone (the walk of a restore: the files
        // just written are racy and read again), not committed.
        let mut txn = s.store.begin(&s.lease, &mut s.state)?;
        let prev = s
            .last
            .as_ref()
            .map(|(tree, flat)| Prev { tree: *tree, flat });
        let t = Instant::now();
        let _ = w.snapshot_with_stats(&mut txn, prev)?;
        hel_rs.push(t.elapsed());
        drop(txn);
        for f in &chosen {
            p.write(f, variant)?;
        }
        rustix::fs::sync();
        let t = Instant::now();
        git.run(&["status", "--porcelain"])?;
        git.run(&["checkout", "--", "."])?;
        git_r.push(t.elapsed());
        // git does not make the checkout durable; hel's restore does
        // (syncfs): the same with one syncfs after it.
        let project = fs::File::open(&root).map_err(io(&root))?;
        let t = Instant::now();
        rustix::fs::syncfs(&project).map_err(|e| io(&root)(e.into()))?;
        git_sync.push(git_r[git_r.len() - 1] + t.elapsed());
        // What one syncfs costs on this shared disk with nothing of ours
        // to write.
        let t = Instant::now();
        rustix::fs::syncfs(&project).map_err(|e| io(&root)(e.into()))?;
        idle_sync.push(t.elapsed());
        for (f, old) in chosen.iter().zip(&before) {
            let path = root.join(&f.path);
            if fs::read(&path).map_err(io(&path))? != *old {
                return Err(BenchError::Check(format!(
                    "{} is not what it was after git checkout",
                    f.path
                )));
            }
        }
    }
    r.restore_ms = med(&hel_r);
    r.restore_snapshot_ms = med(&hel_rs);
    r.git_status_checkout_ms = med(&git_r);
    r.git_status_checkout_syncfs_ms = med(&git_sync);
    r.idle_syncfs_ms = med(&idle_sync);

    // 5. The store's part of a checkpoint commit, with and without the
    // workspace field (each after a snapshot, which is not timed).
    progress("checkpoint commits with and without the workspace");
    record(&mut s, &mut w, Record::Start, None)?;
    let (mut plain, mut with, mut synced) = (Vec::new(), Vec::new(), Vec::new());
    let (mut plain_cpu, mut with_cpu) = (Vec::new(), Vec::new());
    for k in 0..(runs * 3).max(11) {
        // Plain, with the field, with the field after a sync: in turn
        // first, so none always follows the same one (a commit right after
        // another's sync finds less of the other processes' writes to
        // flush with its own).
        let mut kinds = [0, 1, 2];
        kinds.rotate_left(k % 3);
        for kind in kinds {
            let field = kind > 0;
            let mut txn = s.store.begin(&s.lease, &mut s.state)?;
            let prev = s
                .last
                .as_ref()
                .map(|(tree, flat)| Prev { tree: *tree, flat });
            let snap = w.snapshot(&mut txn, prev)?;
            r.commit_files_read += snap.files_read;
            let tree = snap.tree;
            s.last = Some((tree, snap.flat));
            // The third kind: what the snapshot left dirty (the stat cache
            // when it was saved) is written first, so that the commit's
            // one sync does not carry it (ext4 in ordered mode writes a
            // file's new data blocks with the journal commit an fsync
            // forces).
            let sync_first = kind == 2;
            if sync_first {
                rustix::fs::sync();
            }
            let before = cpu_time();
            let took = s
                .conv
                .answer(txn, field.then(|| ws(tree, Some(tree), 0)))?
                .0;
            let cpu = cpu_time().saturating_sub(before);
            match (field, sync_first) {
                (false, _) => {
                    plain.push(took);
                    plain_cpu.push(cpu);
                }
                (true, true) => synced.push(took),
                (true, false) => {
                    with.push(took);
                    with_cpu.push(cpu);
                }
            }
        }
    }
    r.commit_plain_cpu_ms = med(&plain_cpu);
    r.commit_with_workspace_cpu_ms = med(&with_cpu);
    r.commit_with_workspace_synced_ms = med(&synced);
    r.commit_plain_ms = med(&plain);
    r.commit_with_workspace_ms = med(&with);
    let (apparent, _) = disk_usage(&root.join(".hel"));
    r.store_bytes = apparent;
    drop(w);
    drop(s);
    if !cfg.keep {
        fs::remove_dir_all(&root).map_err(io(&root))?;
    }
    r.total_seconds = started.elapsed().as_secs_f64();
    Ok(r)
}

/// `hel-bench --probe ws-fresh PROJECT`, for profiling: on a project that
/// `hel-bench workspace --keep` left, the no-change snapshot of a fresh
/// process exactly as the workload times it (the store opened, the newest
/// session's last tree and the stat cache read, the walk); returns
/// microseconds and the files it had to read (0 when nothing changed).
pub fn fresh_probe(root: &Path) -> Result<String, BenchError> {
    let session = Store::open_with(root, crate::stores::no_limits())?
        .sessions()?
        .into_iter()
        .max_by_key(|s| s.updated_ms)
        .ok_or_else(|| BenchError::Check("no session in the project".into()))?
        .id;
    let (took, files_read) = fresh_snapshot(root, &session)?;
    Ok(format!("{} {files_read}", took.as_micros()))
}

/// The no-change snapshot of a new process, timed: the store, `session`'s
/// newest tree, the stat cache and the last snapshot's paths read again,
/// then the walk. Returns its time and the files it had to read.
fn fresh_snapshot(
    root: &Path,
    session: &hel_store::SessionId,
) -> Result<(Duration, u64), BenchError> {
    let t = Instant::now();
    let store = Store::open_with(root, crate::stores::no_limits())?;
    let head = store.head(session)?;
    let tree = hel_workspace::history::newest_tree(&store, &head)?
        .ok_or_else(|| BenchError::Check("no tree in the session".into()))?;
    let mut w = Workspace::open(&store, Options::default())?;
    let flat = w.read_last(&store, &tree)?;
    let snap = w.snapshot(&mut hel_workspace::Scan, Some(Prev { tree, flat: &flat }))?;
    Ok((t.elapsed(), snap.files_read))
}

/// One line of the report: a figure, hel's, the yardstick's, the ratio and
/// the target.
fn line(out: &mut String, what: &str, hel: f64, base_what: &str, base: f64, target: f64) {
    let ratio = if base > 0.0 { hel / base } else { f64::NAN };
    let verdict = if ratio <= target { "met" } else { "**missed**" };
    out.push_str(&format!(
        "| {what} | {hel:.1} ms | {base_what} {base:.1} ms | {ratio:.2}× | ≤ {target}× | {verdict} |\n"
    ));
}

/// The results as markdown tables, with the targets.
pub fn table(r: &Results) -> String {
    let mut s = format!(
        "Project: {} files + {} symlinks in {} directories, {:.0} MB ({} ignored files); {}\n\n",
        r.files,
        r.symlinks,
        r.dirs,
        r.project_bytes as f64 / 1e6,
        r.ignored_files,
        r.git_version
    );
    s.push_str("| figure | hel | git | ratio | target | |\n|---|---|---|---|---|---|\n");
    line(
        &mut s,
        "snapshot, nothing changed (workspace open, watched by inotify)",
        r.nochange_snapshot_ms,
        "`git status`",
        r.git_status_ms,
        0.05,
    );
    line(
        &mut s,
        "snapshot, nothing changed (fresh process: store, cache with the last paths read)",
        r.nochange_fresh_ms,
        "`git status`",
        r.git_status_ms,
        1.0,
    );
    line(
        &mut s,
        "snapshot, one file changed",
        r.onefile_snapshot_ms,
        "`git add -A && git write-tree`",
        r.git_add_write_tree_ms,
        1.0,
    );
    line(
        &mut s,
        "snapshot + commit, one file changed",
        r.onefile_commit_ms,
        "`git add -A && git write-tree`",
        r.git_add_write_tree_ms,
        1.0,
    );
    line(
        &mut s,
        "first snapshot (everything hashed and compressed)",
        r.first_snapshot_ms,
        "`git add -A`",
        r.first_git_add_ms,
        1.0,
    );
    line(
        &mut s,
        &format!(
            "restore of {} changed files (`hel undo`, before-restore snapshot included)",
            r.restore_files
        ),
        r.restore_ms,
        "`git status` + `git checkout -- .`",
        r.git_status_checkout_ms,
        1.5,
    );
    line(
        &mut s,
        "the same restore",
        r.restore_ms,
        "`git status` + `git checkout -- .` + one `syncfs`",
        r.git_status_checkout_syncfs_ms,
        1.5,
    );
    line(
        &mut s,
        "checkpoint commit with the workspace field (walk excluded)",
        r.commit_with_workspace_ms,
        "commit without it",
        r.commit_plain_ms,
        1.2,
    );
    line(
        &mut s,
        "the same, what the walk left dirty synced first",
        r.commit_with_workspace_synced_ms,
        "commit without it",
        r.commit_plain_ms,
        1.2,
    );
    s.push_str(&format!(
        "\n| size | measured | target | |\n|---|---|---|---|\n\
         | new storage per one-file change | {} B (blob {} B stored, trees {:.1} B per entry) | ≤ {} B (compressed file + 64 B per entry of each tree on its path) | {} |\n\
         | stat cache | {:.1} B per file ({} B) | ≤ 100 B per file | {} |\n\
         | first snapshot | {} B of file content stored, store {} B | | |\n\
         | first commit | {:.1} ms after the snapshot | | |\n\
         | restore's before-restore snapshot alone | {:.1} ms | | |\n\
         | one `syncfs` with nothing of ours to write | {:.1} ms | | |\n\
         | a checkpoint commit's time on a CPU (with the field / without) | {:.1} / {:.1} ms | | |\n",
        r.onefile_new_bytes,
        r.onefile_blob_stored_bytes,
        r.onefile_tree_bytes_per_entry,
        r.onefile_bound_bytes,
        if r.onefile_new_bytes <= r.onefile_bound_bytes { "met" } else { "**missed**" },
        r.cache_bytes_per_file,
        r.cache_bytes,
        if r.cache_bytes_per_file <= 100.0 { "met" } else { "**missed**" },
        r.first_new_bytes,
        r.store_bytes,
        r.first_commit_ms,
        r.restore_snapshot_ms,
        r.idle_syncfs_ms,
        r.commit_with_workspace_cpu_ms,
        r.commit_plain_cpu_ms,
    ));
    s
}
