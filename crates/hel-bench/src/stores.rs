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
    /// Delete session `s`; with `collect`, also run the store's own
    /// collection step for it (hel-store: `Store::delete(id, true)`). The
    /// caller measures what came back on disk.
    fn delete(&mut self, s: usize, collect: bool);
    /// Collect garbage, if the store has such a step: its time (the caller
    /// measures what came back on disk).
    fn gc(&mut self) -> Option<Duration>;
    /// Find every stored message containing `needle`, as this store's
    /// search would (a fresh open of what is on disk); returns how many.
    fn search(&mut self, needle: &str) -> usize;
    /// Arguments for `hel-bench --probe` to resume session `s`.
    fn probe_args(&self, s: usize) -> Vec<String>;
    /// The instances end (before the store is measured at rest).
    fn close(&mut self) {}
    /// The instance working on session `s` ends, as when each of many
    /// sessions was made by a process of its own.
    fn end(&mut self, _s: usize) {}
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

// ------------------------------------------------------------ hel-store

/// The benchmark's sessions outgrow hel's default load limits.
pub fn no_limits() -> hel_store::Limits {
    hel_store::Limits {
        max_messages: u64::MAX,
        max_bytes: u64::MAX,
    }
}

/// A session the benchmark holds: its lease, state and leaves.
type LiveSession = (SessionLease, SessionState, Vec<Option<Leaf>>);

pub struct HelStore {
    pub project: PathBuf,
    pub store: Store,
    /// Per session: its lease, state and the leaves of its last commit,
    /// kept up to date as hel's conversation keeps them (new messages are
    /// `None` until committed), so a commit costs the benchmark what is new.
    sessions: Vec<Option<LiveSession>>,
    ids: Vec<SessionId>,
    checkpoints: Vec<Vec<ObjectId>>,
}

impl HelStore {
    pub fn new(project: &Path) -> HelStore {
        HelStore {
            project: project.to_owned(),
            store: Store::open_with(project, no_limits()).expect("open store"),
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
            hel_store::spill::write(&self.store, lease, name, bytes).expect("spill file");
            new_spill.push((
                format!(".hel/sessions/{}/spill/{name}", lease.session()),
                name.clone(),
            ));
        }
        // The workload says which messages are unchanged by position; the
        // store takes where each is stored. An append (the common case)
        // adds `None` for each new message, as hel's conversation does;
        // anything else is mapped message by message.
        let appended = carried.prefix_len() == last.len() && carried.runs().len() <= 1;
        if appended {
            last.resize(msgs.len(), None);
        } else {
            *last = (0..msgs.len())
                .map(|i| {
                    carried
                        .source(i)
                        .and_then(|o| last.get(o).copied().flatten())
                })
                .collect();
        }
        let leaves = &last[..];
        let c = self
            .store
            .commit(
                lease,
                state,
                CommitInput::new(
                    hel_store::Record::Answer,
                    msgs,
                    leaves,
                    &self.project.display().to_string(),
                    hel_store::SessionRecord {
                        config: hel_store::RequestConfig {
                            max_output_tokens: 8192,
                            ..hel_store::RequestConfig::bare("bench", "m")
                        },
                        meter: Some(hel_store::Observation {
                            messages_sent: msgs.len(),
                            prompt_tokens: 1000,
                            estimated: false,
                        }),
                        cursors: Vec::new(),
                    },
                )
                .instruction("bench")
                .usage(1000, 100)
                .why("bench")
                .spill(new_spill),
            )
            .expect("commit");
        self.checkpoints[s].push(c.id);
        last.truncate(c.leaves_from);
        last.extend(c.new_leaves.iter().copied().map(Some));
        // The spill working copy is the tool's write (hel writes it when the
        // output spills, before any commit); the commit writes the blob.
        c.bytes_written
    }

    fn fork(&mut self, s: usize, k: usize, _at: &[Value]) -> usize {
        let at = self.checkpoints[s][k];
        let (lease, first, _) = self.store.fork(&at).expect("fork");
        let loaded = self.store.load(&first).expect("load fork");
        self.ids.push(lease.session().clone());
        self.sessions.push(Some((
            lease,
            loaded.state,
            loaded.leaves.into_iter().map(Some).collect(),
        )));
        self.checkpoints.push(vec![first]);
        self.sessions.len() - 1
    }

    fn delete(&mut self, s: usize, collect: bool) {
        self.sessions[s] = None; // drops the lease
        self.store.delete(&self.ids[s], collect).expect("delete");
    }

    fn gc(&mut self) -> Option<Duration> {
        let t = Instant::now();
        hel_store::gc::gc(&self.store, false).expect("gc");
        Some(t.elapsed())
    }

    fn search(&mut self, needle: &str) -> usize {
        scan(&self.project, needle).expect("scan").1
    }

    fn probe_args(&self, s: usize) -> Vec<String> {
        vec![
            "hel".into(),
            self.project.display().to_string(),
            self.ids[s].to_string(),
        ]
    }

    /// The lease goes, and the store is opened anew: one process making
    /// thousands of sessions would otherwise keep every journal it wrote
    /// open (hel-store's object database caches each journal's view, with
    /// its descriptor, for the life of the `Store`).
    fn end(&mut self, s: usize) {
        if let Some((lease, _, _)) = self.sessions[s].take() {
            hel_store::spill::clear(&self.store, &lease).expect("clear spill");
        }
        self.store = Store::open_with(&self.project, no_limits()).expect("open store");
    }

    fn close(&mut self) {
        // As hel does when an instance ends: spill working copies are a
        // cache of the committed blobs, and the lease goes.
        for slot in &mut self.sessions {
            if let Some((lease, _, _)) = slot.take() {
                hel_store::spill::clear(&self.store, &lease).expect("clear spill");
            }
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
    fn delete(&mut self, s: usize, _collect: bool) {
        let _ = fs::remove_file(self.path(s));
    }
    fn gc(&mut self) -> Option<Duration> {
        None
    }
    fn probe_args(&self, s: usize) -> Vec<String> {
        vec!["flat".into(), self.path(s).display().to_string()]
    }
    /// Parse each file's array into raw messages and search each.
    fn search(&mut self, needle: &str) -> usize {
        let finder = memchr::memmem::Finder::new(needle.as_bytes());
        let mut found = 0;
        for s in 0..self.sessions {
            let Ok(bytes) = fs::read(self.path(s)) else {
                continue;
            };
            let msgs: Vec<&serde_json::value::RawValue> =
                serde_json::from_slice(&bytes).expect("session file");
            found += msgs
                .iter()
                .filter(|m| finder.find(m.get().as_bytes()).is_some())
                .count();
        }
        found
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
    fn delete(&mut self, s: usize, _collect: bool) {
        let _ = fs::remove_file(self.path(s));
    }
    fn gc(&mut self) -> Option<Duration> {
        None
    }
    fn probe_args(&self, s: usize) -> Vec<String> {
        vec!["jsonl".into(), self.path(s).display().to_string()]
    }
    /// Every line of every log is a message (or a compaction's replacement
    /// history, which repeats messages: searched as it is stored).
    fn search(&mut self, needle: &str) -> usize {
        let finder = memchr::memmem::Finder::new(needle.as_bytes());
        let mut found = 0;
        for s in 0..self.offsets.len() {
            let Ok(bytes) = fs::read(self.path(s)) else {
                continue;
            };
            found += bytes
                .split(|b| *b == b'\n')
                .filter(|l| finder.find(l).is_some())
                .count();
        }
        found
    }
}

// ------------------------------------------------------------ SQLite

/// The store of agents that moved from JSON files to SQLite (OpenCode's
/// session/message tables are the model): one database per project in WAL
/// mode with `synchronous=FULL`, one transaction per checkpoint.
///
/// Schema (see [`SQLITE_SCHEMA`]): a `sessions` row per session holding
/// what a listing shows (title, updated, message and checkpoint counts);
/// a `messages` row per message, its JSON in `body`, ordered within the
/// session by `ord`; a `checkpoints` row per checkpoint (time, message
/// count, the last message row it covers).
///
/// - A commit inserts the new messages' rows, a checkpoint row and updates
///   the session row, in one transaction (one WAL append and fsync).
/// - A compaction does not delete: the rows it replaces get `compacted` =
///   the checkpoint that replaced them (NULL while live), so the history
///   stays, as it does in the JSONL log, and the summary row is inserted
///   with an `ord` between the system message and the kept tail.
/// - A fork **copies** its base's live rows at the forked checkpoint into
///   new rows of the new session, as OpenCode's `Session.fork` does: each
///   session's rows are its own, so deleting one is a `DELETE ... WHERE
///   session = ?` with no reference counting, and resume is one indexed
///   range read. (Sharing rows between sessions would need a join table
///   and reference counts on delete, which such agents do not carry.)
/// - Delete is the three `DELETE`s and a WAL checkpoint; the freed pages
///   stay in the file (the default `auto_vacuum=NONE`) until `VACUUM`,
///   which is this store's "gc".
/// - Spill files are written beside the database, as for the other
///   baselines.
pub struct Sqlite {
    dir: PathBuf,
    conn: rusqlite::Connection,
    /// Per session: its live rows (rowid, ord) in conversation order, and
    /// the number of checkpoints written.
    live: Vec<SqlSession>,
    /// Last rowid of each checkpoint, per session.
    marks: Vec<Vec<i64>>,
}

#[derive(Default, Clone)]
struct SqlSession {
    rows: Vec<(i64, f64)>,
    checkpoints: i64,
}

/// The SQLite baseline's schema.
pub const SQLITE_SCHEMA: &str = "
CREATE TABLE sessions(
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    created INTEGER NOT NULL,
    updated INTEGER NOT NULL,
    message_count INTEGER NOT NULL,
    checkpoints INTEGER NOT NULL,
    parent INTEGER,
    parent_checkpoint INTEGER
);
CREATE INDEX sessions_by_updated ON sessions(updated);
CREATE TABLE messages(
    id INTEGER PRIMARY KEY,
    session INTEGER NOT NULL,
    ord REAL NOT NULL,
    compacted INTEGER,
    body TEXT NOT NULL
);
CREATE INDEX messages_by_session ON messages(session, ord);
CREATE TABLE checkpoints(
    session INTEGER NOT NULL,
    n INTEGER NOT NULL,
    time INTEGER NOT NULL,
    message_count INTEGER NOT NULL,
    last_message INTEGER NOT NULL,
    PRIMARY KEY(session, n)
) WITHOUT ROWID;
";

/// Open the benchmark's SQLite database as an agent does.
pub fn sqlite_open(path: &Path) -> rusqlite::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.busy_timeout(Duration::from_secs(5))?;
    Ok(conn)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Bytes this thread has passed to write(2) so far (`wchar`).
fn written_by_thread() -> u64 {
    fs::read_to_string("/proc/thread-self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("wchar:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

impl Sqlite {
    pub fn new(dir: &Path) -> Sqlite {
        fs::create_dir_all(dir).expect("dir");
        let conn = sqlite_open(&dir.join("sessions.db")).expect("open sqlite");
        conn.execute_batch(SQLITE_SCHEMA).expect("schema");
        Sqlite {
            dir: dir.to_owned(),
            conn,
            live: Vec::new(),
            marks: Vec::new(),
        }
    }

    pub fn db_path(&self) -> PathBuf {
        self.dir.join("sessions.db")
    }

    fn new_session_row(&mut self, parent: Option<(usize, usize)>) -> usize {
        let s = self.live.len();
        let now = now_ms();
        self.conn
            .execute(
                "INSERT INTO sessions(id, title, created, updated, message_count, checkpoints, parent, parent_checkpoint)
                 VALUES (?1, '', ?2, ?2, 0, 0, ?3, ?4)",
                rusqlite::params![s as i64, now, parent.map(|p| p.0 as i64), parent.map(|p| p.1 as i64)],
            )
            .expect("session row");
        self.live.push(SqlSession::default());
        self.marks.push(Vec::new());
        s
    }

    /// The checkpoint row and the session row of a commit, inside its transaction.
    fn close_checkpoint(
        tx: &rusqlite::Transaction<'_>,
        s: usize,
        sess: &mut SqlSession,
        marks: &mut Vec<i64>,
        title: &str,
    ) {
        let last = sess.rows.iter().map(|r| r.0).max().unwrap_or(0);
        let last = last.max(marks.last().copied().unwrap_or(0));
        let now = now_ms();
        tx.prepare_cached(
            "INSERT INTO checkpoints(session, n, time, message_count, last_message) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut st| {
            st.execute(rusqlite::params![
                s as i64,
                sess.checkpoints,
                now,
                sess.rows.len() as i64,
                last
            ])
        })
        .expect("checkpoint row");
        sess.checkpoints += 1;
        tx.prepare_cached(
            "UPDATE sessions SET title = ?2, updated = ?3, message_count = ?4, checkpoints = ?5 WHERE id = ?1",
        )
        .and_then(|mut st| {
            st.execute(rusqlite::params![
                s as i64,
                title,
                now,
                sess.rows.len() as i64,
                sess.checkpoints
            ])
        })
        .expect("session row");
        marks.push(last);
    }
}

impl BenchStore for Sqlite {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn create(&mut self) -> usize {
        self.new_session_row(None)
    }

    fn commit(
        &mut self,
        s: usize,
        msgs: &[Value],
        carried: &Carried,
        _compacted: bool,
        spill: Option<&(String, Vec<u8>)>,
    ) -> u64 {
        let before = written_by_thread();
        write_spill(&self.dir, spill);
        let sess = &mut self.live[s];
        let k = sess.checkpoints;
        let tx = self.conn.transaction().expect("begin");
        let insert = |tx: &rusqlite::Transaction<'_>, m: &Value, ord: f64| -> i64 {
            let body = serde_json::to_string(m).expect("json");
            tx.prepare_cached(
                "INSERT INTO messages(session, ord, compacted, body) VALUES (?1, ?2, NULL, ?3)",
            )
            .and_then(|mut st| st.execute(rusqlite::params![s as i64, ord, body]))
            .expect("insert message");
            tx.last_insert_rowid()
        };
        if carried.prefix_len() == sess.rows.len() && carried.runs().len() <= 1 {
            // An append, as an agent does it: insert what is new.
            for m in &msgs[sess.rows.len()..] {
                let ord = sess.rows.last().map_or(0.0, |r| r.1 + 1.0);
                let id = insert(&tx, m, ord);
                sess.rows.push((id, ord));
            }
        } else {
            // Which old rows stay, and where.
            let sources: Vec<Option<usize>> = (0..msgs.len()).map(|i| carried.source(i)).collect();
            let mut kept = vec![false; sess.rows.len()];
            for o in sources.iter().flatten() {
                if let Some(k) = kept.get_mut(*o) {
                    *k = true;
                }
            }
            {
                let mut gone = tx
                    .prepare_cached("UPDATE messages SET compacted = ?2 WHERE id = ?1")
                    .expect("prepare");
                for (i, keep) in kept.iter().enumerate() {
                    if !keep {
                        gone.execute(rusqlite::params![sess.rows[i].0, k])
                            .expect("compact row");
                    }
                }
            }
            let mut rows = Vec::with_capacity(msgs.len());
            for (i, m) in msgs.iter().enumerate() {
                if let Some(o) = sources[i].filter(|o| *o < sess.rows.len()) {
                    rows.push(sess.rows[o]);
                    continue;
                }
                // Between the row before and the next kept row, or after the last.
                let prev = rows.last().map_or(-1.0, |r: &(i64, f64)| r.1);
                let next = sources[i + 1..]
                    .iter()
                    .flatten()
                    .find_map(|o| sess.rows.get(*o).map(|r| r.1));
                let ord = match next {
                    Some(n) => (prev + n) / 2.0,
                    None => prev + 1.0,
                };
                rows.push((insert(&tx, m, ord), ord));
            }
            sess.rows = rows;
        }
        let title = msgs
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .map(|t| {
                t.lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(100)
                    .collect::<String>()
            })
            .unwrap_or_default();
        Sqlite::close_checkpoint(&tx, s, sess, &mut self.marks[s], &title);
        tx.commit().expect("commit");
        written_by_thread().saturating_sub(before)
    }

    fn fork(&mut self, s: usize, k: usize, at: &[Value]) -> usize {
        let n = self.new_session_row(Some((s, k)));
        let last = self.marks[s][k];
        let tx = self.conn.transaction().expect("begin");
        tx.execute(
            "INSERT INTO messages(session, ord, compacted, body)
             SELECT ?1, row_number() OVER (ORDER BY ord) - 1, NULL, body FROM messages
             WHERE session = ?2 AND id <= ?3 AND (compacted IS NULL OR compacted > ?4)
             ORDER BY ord",
            rusqlite::params![n as i64, s as i64, last, k as i64],
        )
        .expect("copy rows");
        let rows: Vec<(i64, f64)> = tx
            .prepare("SELECT id, ord FROM messages WHERE session = ?1 ORDER BY ord")
            .and_then(|mut st| {
                st.query_map([n as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect()
            })
            .expect("fork rows");
        assert_eq!(rows.len(), at.len(), "fork copies the live rows");
        let mut sess = SqlSession {
            rows,
            checkpoints: 0,
        };
        let title: String = tx
            .query_row(
                "SELECT title FROM sessions WHERE id = ?1",
                [s as i64],
                |r| r.get(0),
            )
            .expect("title");
        Sqlite::close_checkpoint(&tx, n, &mut sess, &mut self.marks[n], &title);
        tx.commit().expect("commit");
        self.live[n] = sess;
        n
    }

    fn delete(&mut self, s: usize, _collect: bool) {
        let tx = self.conn.transaction().expect("begin");
        for table in [
            "DELETE FROM messages WHERE session = ?1",
            "DELETE FROM checkpoints WHERE session = ?1",
            "DELETE FROM sessions WHERE id = ?1",
        ] {
            tx.execute(table, [s as i64]).expect("delete");
        }
        tx.commit().expect("commit");
        self.live[s] = SqlSession::default();
        self.checkpoint_wal();
    }

    fn gc(&mut self) -> Option<Duration> {
        let t = Instant::now();
        self.conn.execute_batch("VACUUM").expect("vacuum");
        self.checkpoint_wal();
        Some(t.elapsed())
    }

    fn probe_args(&self, s: usize) -> Vec<String> {
        vec![
            "sqlite".into(),
            self.db_path().display().to_string(),
            s.to_string(),
        ]
    }

    fn close(&mut self) {
        self.checkpoint_wal();
    }

    fn search(&mut self, needle: &str) -> usize {
        let conn = rusqlite::Connection::open(self.db_path()).expect("open");
        conn.prepare("SELECT session, id FROM messages WHERE instr(body, ?1) > 0")
            .and_then(|mut st| {
                st.query_map([needle], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .expect("search")
            .len()
    }
}

impl Sqlite {
    /// Move the WAL into the database and truncate it.
    fn checkpoint_wal(&self) {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .expect("wal checkpoint");
    }
}

/// hel-store's search of `project` for `needle`, as the search workload
/// times it: microseconds and the messages that hold it.
pub fn scan(project: &Path, needle: &str) -> Result<(u128, usize), String> {
    let t = Instant::now();
    let store = Store::open_with(project, no_limits()).map_err(|e| e.to_string())?;
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let mut found = 0;
    hel_store::scan::scan_messages(&store, &mut |m| {
        if finder.find(m).is_some() {
            found += 1;
        }
    })
    .map_err(|e| e.to_string())?;
    Ok((t.elapsed().as_micros(), found))
}

/// Resume as each store does it; returns the live messages.
pub fn resume(args: &[String]) -> Result<Vec<Value>, String> {
    match args {
        [kind, project, session] if kind == "hel" => {
            let store =
                Store::open_with(Path::new(project), no_limits()).map_err(|e| e.to_string())?;
            let session: SessionId = session
                .parse()
                .map_err(|e: hel_store::BadSessionId| e.to_string())?;
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
        [kind, db, session] if kind == "sqlite" => {
            let session: i64 = session.parse().map_err(|_| "bad session".to_owned())?;
            let conn = sqlite_open(Path::new(db)).map_err(|e| e.to_string())?;
            let mut st = conn
                .prepare(
                    "SELECT body FROM messages WHERE session = ?1 AND compacted IS NULL ORDER BY ord",
                )
                .map_err(|e| e.to_string())?;
            let mut rows = st.query([session]).map_err(|e| e.to_string())?;
            let mut msgs = Vec::new();
            while let Some(row) = rows.next().map_err(|e| e.to_string())? {
                let body = row.get_ref(0).map_err(|e| e.to_string())?;
                let text = body.as_str().map_err(|e| e.to_string())?;
                msgs.push(serde_json::from_str(text).map_err(|e| e.to_string())?);
            }
            Ok(msgs)
        }
        _ => Err(format!("bad probe arguments {args:?}")),
    }
}

/// What `hel sessions` shows, read from the SQLite store's `sessions`
/// rows, most recently updated first, written to `out`; returns the
/// number of sessions.
pub fn list_sqlite(db: &Path, out: &mut dyn Write) -> rusqlite::Result<usize> {
    let conn = sqlite_open(db)?;
    let mut st = conn
        .prepare(
            "SELECT id, updated, checkpoints, message_count, title FROM sessions ORDER BY updated DESC, id",
        )
        ?;
    let mut rows = st.query([])?;
    let _ = writeln!(
        out,
        "{:<36}  {:<24}  {:>11}  {:>8}  INSTRUCTION",
        "SESSION", "UPDATED", "CHECKPOINTS", "MESSAGES"
    );
    let mut n = 0;
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let updated: i64 = row.get(1)?;
        let checkpoints: i64 = row.get(2)?;
        let messages: i64 = row.get(3)?;
        let title = row.get_ref(4)?;
        let title = title.as_str()?;
        let _ = writeln!(
            out,
            "{id:<36}  {:<24}  {checkpoints:>11}  {messages:>8}  {title}",
            hel_store::time::rfc3339(updated as u64)
        );
        n += 1;
    }
    let _ = out.flush();
    Ok(n)
}
