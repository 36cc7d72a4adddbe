//! The three stores under test, behind one interface.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::carry::Carried;
use hel_store::{CommitInput, Leaf, ObjectId, SessionId, SessionLease, SessionState, Store};
use serde_json::{json, Value};

/// One store under test. Sessions are numbered by the order of creation.
pub trait BenchStore {
    fn name(&self) -> &'static str;
    fn create(&mut self) -> usize;
    /// Commit the conversation `msgs` of session `s`; `carried` says which
    /// messages are as last committed, `compacted` that history was
    /// rewritten. Returns bytes written.
    fn commit(
        &mut self,
        s: usize,
        msgs: &[Value],
        carried: &Carried,
        compacted: bool,
        spill: Option<&(String, Vec<u8>)>,
    ) -> u64;
    /// Fork session `s` at its checkpoint number `k`, whose conversation is `at`.
    fn fork(&mut self, s: usize, k: usize, at: &[Value]) -> usize;
    /// Delete session `s`; returns the bytes the delete itself reclaimed.
    fn delete(&mut self, s: usize, collect: bool) -> u64;
    /// Collect garbage, if the store has such a step: time and bytes reclaimed.
    fn gc(&mut self) -> Option<(Duration, u64)>;
    /// Arguments for `hel-bench --probe` to resume session `s`.
    fn probe_args(&self, s: usize) -> Vec<String>;
    /// The instances end (before the store is measured at rest).
    fn close(&mut self) {}
}

/// Apparent bytes of the files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

// ------------------------------------------------------------ hel-store

pub struct HelStore {
    pub project: PathBuf,
    pub store: Store,
    /// Per session: its lease, state and the leaves of its last commit.
    sessions: Vec<Option<(SessionLease, SessionState, Vec<Leaf>)>>,
    ids: Vec<SessionId>,
    checkpoints: Vec<Vec<ObjectId>>,
}

impl HelStore {
    pub fn new(project: &Path) -> HelStore {
        HelStore {
            project: project.to_owned(),
            store: Store::open_with(
                project,
                hel_store::Limits {
                    max_messages: u64::MAX,
                    max_bytes: u64::MAX,
                },
            )
            .expect("open store"),
            sessions: Vec::new(),
            ids: Vec::new(),
            checkpoints: Vec::new(),
        }
    }
}

impl BenchStore for HelStore {
    fn name(&self) -> &'static str {
        "hel-store"
    }

    fn create(&mut self) -> usize {
        let lease = self.store.new_session().expect("new session");
        self.ids.push(lease.session().clone());
        self.sessions
            .push(Some((lease, SessionState::default(), Vec::new())));
        self.checkpoints.push(Vec::new());
        self.sessions.len() - 1
    }

    fn commit(
        &mut self,
        s: usize,
        msgs: &[Value],
        carried: &Carried,
        _compacted: bool,
        spill: Option<&(String, Vec<u8>)>,
    ) -> u64 {
        let (lease, state, last) = self.sessions[s].as_mut().expect("live session");
        let mut new_spill = Vec::new();
        if let Some((name, bytes)) = spill {
            self.store
                .write_spill(lease, name, bytes)
                .expect("spill file");
            new_spill.push((
                format!(".hel/sessions/{}/spill/{name}", lease.session()),
                name.clone(),
            ));
        }
        // The workload says which messages are unchanged by position; the
        // store takes where each is stored.
        let leaves: Vec<Option<Leaf>> = (0..msgs.len())
            .map(|i| carried.source(i).and_then(|o| last.get(o).copied()))
            .collect();
        let c = self
            .store
            .commit(
                lease,
                state,
                CommitInput {
                    messages: msgs,
                    leaves: &leaves,
                    cwd: self.project.display().to_string(),
                    request_config: json!({"provider": "bench", "model": "m", "max_output_tokens": 8192}),
                    meter: json!({"observed": {"messages_sent": msgs.len(), "prompt_tokens": 1000}}),
                    cursors: json!([]),
                    new_spill,
                    instruction: "bench".into(),
                    input_tokens: 1000,
                    output_tokens: 100,
                    why: "bench".into(),
                    record: hel_store::Record::Answer,
                    workspace: None,
                },
            )
            .expect("commit");
        self.checkpoints[s].push(c.id);
        let mut now: Vec<Leaf> = leaves
            .iter()
            .take(c.leaves_from)
            .map(|l| l.expect("kept"))
            .collect();
        now.extend_from_slice(&c.new_leaves);
        *last = now;
        // The spill working copy is the tool's write (hel writes it when the
        // output spills, before any commit); the commit writes the blob.
        c.bytes_written
    }

    fn fork(&mut self, s: usize, k: usize, _at: &[Value]) -> usize {
        let at = self.checkpoints[s][k];
        let (lease, first, _) = self.store.fork(&at).expect("fork");
        let loaded = self.store.load(&first).expect("load fork");
        self.ids.push(lease.session().clone());
        self.sessions
            .push(Some((lease, loaded.state, loaded.leaves)));
        self.checkpoints.push(vec![first]);
        self.sessions.len() - 1
    }

    fn delete(&mut self, s: usize, collect: bool) -> u64 {
        self.sessions[s] = None; // drops the lease
        let before = dir_bytes(&self.project.join(".hel"));
        self.store.delete(&self.ids[s], collect).expect("delete");
        before.saturating_sub(dir_bytes(&self.project.join(".hel")))
    }

    fn gc(&mut self) -> Option<(Duration, u64)> {
        let t = Instant::now();
        let r = self.store.gc(false).expect("gc");
        Some((t.elapsed(), r.bytes_removed))
    }

    fn probe_args(&self, s: usize) -> Vec<String> {
        vec![
            "hel".into(),
            self.project.display().to_string(),
            self.ids[s].to_string(),
        ]
    }

    fn close(&mut self) {
        // As hel does when an instance ends: spill working copies are a
        // cache of the committed blobs.
        for (lease, _, _) in self.sessions.iter().flatten() {
            self.store.clear_spill(lease).expect("clear spill");
        }
    }
}

// ------------------------------------------------------------ whole file

/// The whole conversation re-serialized to one JSON file per session at
/// every checkpoint (temp file, fsync, rename, directory fsync). Spill files
/// are written once beside it.
pub struct WholeFile {
    dir: PathBuf,
    sessions: usize,
}

impl WholeFile {
    pub fn new(dir: &Path) -> WholeFile {
        fs::create_dir_all(dir).expect("dir");
        WholeFile {
            dir: dir.to_owned(),
            sessions: 0,
        }
    }
    fn path(&self, s: usize) -> PathBuf {
        self.dir.join(format!("session-{s}.json"))
    }
    fn write_snapshot(&self, s: usize, msgs: &[Value]) -> u64 {
        let bytes = serde_json::to_vec(msgs).expect("serialize");
        let tmp = self.dir.join(format!(".session-{s}.tmp"));
        let mut f = File::create(&tmp).expect("tmp");
        f.write_all(&bytes).expect("write");
        f.sync_all().expect("fsync");
        fs::rename(&tmp, self.path(s)).expect("rename");
        sync_dir(&self.dir);
        bytes.len() as u64
    }
}

fn write_spill(dir: &Path, spill: Option<&(String, Vec<u8>)>) -> u64 {
    let Some((name, bytes)) = spill else { return 0 };
    let path = dir.join(name);
    let mut f = File::create(&path).expect("spill");
    f.write_all(bytes).expect("spill");
    f.sync_all().expect("fsync");
    bytes.len() as u64
}

impl BenchStore for WholeFile {
    fn name(&self) -> &'static str {
        "whole-file"
    }
    fn create(&mut self) -> usize {
        self.sessions += 1;
        self.sessions - 1
    }
    fn commit(
        &mut self,
        s: usize,
        msgs: &[Value],
        _carried: &Carried,
        _compacted: bool,
        spill: Option<&(String, Vec<u8>)>,
    ) -> u64 {
        write_spill(&self.dir, spill) + self.write_snapshot(s, msgs)
    }
    fn fork(&mut self, _s: usize, _k: usize, at: &[Value]) -> usize {
        let n = self.create();
        self.write_snapshot(n, at);
        n
    }
    fn delete(&mut self, s: usize, _collect: bool) -> u64 {
        let size = fs::metadata(self.path(s)).map_or(0, |m| m.len());
        let _ = fs::remove_file(self.path(s));
        size
    }
    fn gc(&mut self) -> Option<(Duration, u64)> {
        None
    }
    fn probe_args(&self, s: usize) -> Vec<String> {
        vec!["flat".into(), self.path(s).display().to_string()]
    }
}

// ------------------------------------------------------------ JSONL

/// An append-only log per session: one line per new message, fsynced per
/// checkpoint; a compaction appends the replacement history; a fork copies
/// the log up to the forked checkpoint; resume reads the whole log.
pub struct Jsonl {
    dir: PathBuf,
    /// Per session: log length after each checkpoint, and messages logged.
    offsets: Vec<Vec<u64>>,
    logged: Vec<usize>,
}

impl Jsonl {
    pub fn new(dir: &Path) -> Jsonl {
        fs::create_dir_all(dir).expect("dir");
        Jsonl {
            dir: dir.to_owned(),
            offsets: Vec::new(),
            logged: Vec::new(),
        }
    }
    fn path(&self, s: usize) -> PathBuf {
        self.dir.join(format!("session-{s}.jsonl"))
    }
}

impl BenchStore for Jsonl {
    fn name(&self) -> &'static str {
        "jsonl"
    }
    fn create(&mut self) -> usize {
        self.offsets.push(Vec::new());
        self.logged.push(0);
        File::create(
            self.dir
                .join(format!("session-{}.jsonl", self.offsets.len() - 1)),
        )
        .expect("log");
        self.offsets.len() - 1
    }
    fn commit(
        &mut self,
        s: usize,
        msgs: &[Value],
        _carried: &Carried,
        compacted: bool,
        spill: Option<&(String, Vec<u8>)>,
    ) -> u64 {
        let mut out = Vec::new();
        if compacted {
            out.extend(
                serde_json::to_vec(&json!({"type": "compacted", "replacement": msgs}))
                    .expect("json"),
            );
            out.push(b'\n');
        } else {
            for m in &msgs[self.logged[s]..] {
                out.extend(
                    serde_json::to_vec(&json!({"type": "message", "message": m})).expect("json"),
                );
                out.push(b'\n');
            }
        }
        self.logged[s] = msgs.len();
        let mut f = OpenOptions::new()
            .append(true)
            .open(self.path(s))
            .expect("open log");
        f.write_all(&out).expect("append");
        f.sync_data().expect("fsync");
        let end = f.metadata().map(|m| m.len()).unwrap_or(0);
        self.offsets[s].push(end);
        write_spill(&self.dir, spill) + out.len() as u64
    }
    fn fork(&mut self, s: usize, k: usize, at: &[Value]) -> usize {
        let n = self.create();
        let bytes = fs::read(self.path(s)).expect("read log");
        let end = self.offsets[s][k] as usize;
        let mut f = File::create(self.path(n)).expect("fork log");
        f.write_all(&bytes[..end]).expect("copy");
        f.sync_all().expect("fsync");
        self.offsets[n].push(end as u64);
        self.logged[n] = at.len();
        n
    }
    fn delete(&mut self, s: usize, _collect: bool) -> u64 {
        let size = fs::metadata(self.path(s)).map_or(0, |m| m.len());
        let _ = fs::remove_file(self.path(s));
        size
    }
    fn gc(&mut self) -> Option<(Duration, u64)> {
        None
    }
    fn probe_args(&self, s: usize) -> Vec<String> {
        vec!["jsonl".into(), self.path(s).display().to_string()]
    }
}

/// Resume as each store does it; returns the live messages.
pub fn resume(args: &[String]) -> Result<Vec<Value>, String> {
    match args {
        [kind, project, session] if kind == "hel" => {
            let store = Store::open_with(
                Path::new(project),
                hel_store::Limits {
                    max_messages: u64::MAX,
                    max_bytes: u64::MAX,
                },
            )
            .map_err(|e| e.to_string())?;
            let session: SessionId = session
                .parse()
                .map_err(|e: hel_store::Error| e.to_string())?;
            let head = store.head(&session).map_err(|e| e.to_string())?;
            Ok(store.load(&head).map_err(|e| e.to_string())?.messages)
        }
        [kind, path] if kind == "flat" => {
            let bytes = fs::read(path).map_err(|e| e.to_string())?;
            serde_json::from_slice(&bytes).map_err(|e| e.to_string())
        }
        [kind, path] if kind == "jsonl" => {
            let text = fs::read_to_string(path).map_err(|e| e.to_string())?;
            let mut msgs = Vec::new();
            for line in text.lines() {
                let mut v: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
                if v["type"] == "compacted" {
                    msgs = match v["replacement"].take() {
                        Value::Array(a) => a,
                        _ => return Err("bad compaction record".into()),
                    };
                } else {
                    msgs.push(v["message"].take());
                }
            }
            Ok(msgs)
        }
        _ => Err(format!("bad probe arguments {args:?}")),
    }
}
