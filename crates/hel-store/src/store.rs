//! [`Store`]: the API hel uses. It ties objects, lists, snapshots, refs and
//! locks together; each of those modules is the only one that knows its part
//! of the format.

use std::collections::BTreeMap;
use std::fs::{self, DirBuilder};
use std::io::ErrorKind;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::carry::Carried;
use crate::error::IoContext;
use crate::gc::GcReport;
use crate::layout::{check_session_id, Layout, STORE_DIR};
use crate::list::{Item, Node, Reader, INLINE_MAX};
use crate::lock::{self, SessionLease, StoreLock};
use crate::object::{self, Kind, Writer};
use crate::snapshot::{self, Checkpoint, MessagesRef, SpillEntry, Summary, SCHEMA_VERSION};
use crate::{canonical, refs, time, Error, ObjectId, Result};

/// The session store of one project (its `.hel/` directory).
#[derive(Clone, Debug)]
pub struct Store {
    layout: Layout,
}

/// What a writer knows of its session's last checkpoint, so that the next
/// commit writes only what is new. Obtained from [`Store::load`] or
/// [`SessionState::default`] for a new session, and updated by
/// [`Store::commit`].
#[derive(Clone, Debug, Default)]
pub struct SessionState {
    /// The checkpoint the session's ref names (the next commit's parent).
    pub head: Option<ObjectId>,
    checkpoints: u64,
    /// Where each message of the last committed list lives: the chain node
    /// that adds it and its index among that node's messages.
    locs: Vec<(ObjectId, u32)>,
    /// The committed list's nodes: (node id, list length after it).
    nodes: Vec<(ObjectId, usize)>,
    spill: BTreeMap<String, SpillEntry>,
}

/// A checkpoint read back whole by [`Store::load`].
#[derive(Debug, Clone)]
pub struct Loaded {
    pub checkpoint: Checkpoint,
    pub request_config: Value,
    pub cursors: Value,
    pub messages: Vec<Value>,
    pub state: SessionState,
}

impl SessionState {
    /// Spill files the last checkpoint keeps.
    pub fn spill(&self) -> &BTreeMap<String, SpillEntry> {
        &self.spill
    }
}

/// One checkpoint to commit.
#[derive(Debug, Clone)]
pub struct CommitInput<'a> {
    /// The whole conversation as it stands.
    pub messages: &'a [Value],
    /// The caller's promise of which messages equal messages of the last
    /// checkpoint: those are named where they are, not written again.
    pub carried: Carried,
    pub cwd: String,
    pub request_config: Value,
    pub meter: Value,
    pub cursors: Value,
    /// New spill files to keep: the path the conversation names → the file.
    pub new_spill: Vec<(String, PathBuf)>,
    /// First line of the last instruction.
    pub instruction: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Why the ref moves (recorded in the ref log).
    pub why: String,
}

/// The result of a commit.
#[derive(Debug, Clone)]
pub struct Committed {
    pub id: ObjectId,
    pub objects_written: u64,
    pub bytes_written: u64,
}

/// A session as listings show it.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub id: String,
    pub busy: bool,
    pub head: Option<ObjectId>,
    pub updated_ms: u64,
    pub checkpoints: u64,
    pub messages: u64,
    pub instruction: String,
}

impl Store {
    /// The store of the project at `project_dir` (its `.hel/`). Nothing is
    /// created until something is written.
    pub fn for_project(project_dir: &Path) -> Store {
        Store {
            layout: Layout::new(project_dir.join(STORE_DIR)),
        }
    }

    /// The store at `root`, the `.hel` directory itself.
    pub fn at(root: impl Into<PathBuf>) -> Store {
        Store {
            layout: Layout::new(root),
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Does the store directory exist?
    pub fn exists(&self) -> bool {
        self.layout.root().is_dir()
    }

    /// Create the store's directories (mode 0700) and `.gitignore` if absent.
    pub fn init(&self) -> Result<()> {
        let mut builder = DirBuilder::new();
        builder.recursive(true).mode(0o700);
        for dir in [
            self.layout.root().to_owned(),
            self.layout.objects_dir(),
            self.layout.refs_dir(),
            self.layout.logs_dir(),
            self.layout.sessions_dir(),
            self.layout.tmp_dir(),
        ] {
            builder.create(&dir).at(&dir)?;
        }
        let gi = self.layout.gitignore();
        if !gi.exists() {
            fs::write(&gi, "*\n").at(&gi)?;
        }
        Ok(())
    }

    /// Start a new session: a fresh id and its lease. It has no checkpoint
    /// until the first commit.
    pub fn new_session(&self) -> Result<SessionLease> {
        self.init()?;
        SessionLease::acquire(&self.layout, &uuid::Uuid::new_v4().to_string())
    }

    /// Take the lease of an existing session to continue it, returning its
    /// newest checkpoint. Refused if the session is in use, unknown, or has
    /// no checkpoint.
    pub fn resume(&self, session: &str) -> Result<(SessionLease, ObjectId)> {
        check_session_id(session)?;
        if !self.exists() {
            return Err(Error::NoSuchSession {
                session: session.to_owned(),
            });
        }
        let _guard = StoreLock::exclusive(&self.layout)?;
        let head = refs::read(&self.layout, session)?;
        let has_dir = self.layout.session_dir(session).is_dir();
        match head {
            None if has_dir => {
                if lock::is_busy(&self.layout, session) {
                    Err(Error::InUse {
                        session: session.to_owned(),
                    })
                } else {
                    Err(Error::NoCheckpoint {
                        session: session.to_owned(),
                    })
                }
            }
            None => Err(Error::NoSuchSession {
                session: session.to_owned(),
            }),
            Some(head) => Ok((SessionLease::acquire(&self.layout, session)?, head)),
        }
    }

    /// The checkpoint `session`'s ref names, if any.
    pub fn head(&self, session: &str) -> Result<Option<ObjectId>> {
        refs::read(&self.layout, session)
    }

    /// Read checkpoint `id` (verified).
    pub fn checkpoint(&self, id: &ObjectId) -> Result<Checkpoint> {
        snapshot::read(&self.layout, id)
    }

    /// Read checkpoint `id` whole, verifying every object: its messages,
    /// request config and cursors, and the state a writer needs to commit
    /// after it.
    pub fn load(&self, id: &ObjectId) -> Result<Loaded> {
        let cp = self.checkpoint(id)?;
        let json_blob = |blob: &ObjectId| -> Result<Value> {
            let bytes = object::read_kind(&self.layout, blob, Kind::Blob)?;
            serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
                id: *blob,
                path: self.layout.object_path(blob),
                reason: format!("not JSON: {e}"),
            })
        };
        let request_config = json_blob(&cp.request_config)?;
        let cursors = json_blob(&cp.cursors)?;
        let (messages, nodes) = Reader::new(&self.layout).read_list(cp.messages.root)?;
        if messages.len() as u64 != cp.messages.count {
            return Err(Error::Corrupt {
                id: *id,
                path: self.layout.object_path(id),
                reason: format!(
                    "snapshot says {} messages, its list holds {}",
                    cp.messages.count,
                    messages.len()
                ),
            });
        }
        let mut locs = Vec::with_capacity(messages.len());
        let mut start = 0;
        for (node, end) in &nodes {
            locs.extend((0..end - start).map(|k| (*node, k as u32)));
            start = *end;
        }
        let state = SessionState {
            head: Some(*id),
            checkpoints: cp.summary.checkpoints,
            locs,
            nodes,
            spill: cp.spill.clone(),
        };
        Ok(Loaded {
            checkpoint: cp,
            request_config,
            cursors,
            messages,
            state,
        })
    }

    /// Remove the session's spill working copies (`sessions/<id>/spill/`):
    /// they are a cache of the spill blobs, re-made at resume. hel calls
    /// this when an instance ends; what was never committed goes with it.
    pub fn clear_spill(&self, lease: &SessionLease) -> Result<()> {
        let dir = self.layout.spill_dir(lease.session());
        match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).at(&dir),
        }
    }

    /// The bytes of blob `id` (a spill file), verified.
    pub fn read_blob(&self, id: &ObjectId) -> Result<Vec<u8>> {
        object::read_kind(&self.layout, id, Kind::Blob)
    }

    /// Commit a checkpoint of the lease's session and move its ref. Writes
    /// only what is new: one list node (new small messages inline, carried
    /// ones as slices of the nodes that hold them), blobs of new large
    /// messages and spill, and the snapshot; all are durable before the ref
    /// moves.
    /// On error the previous checkpoint is untouched and `state` unchanged.
    pub fn commit(
        &self,
        lease: &SessionLease,
        state: &mut SessionState,
        input: CommitInput<'_>,
    ) -> Result<Committed> {
        // No init here: the lease came from new_session, resume or fork,
        // which made the store; a commit only does the commit's work.
        let _guard = StoreLock::shared(&self.layout)?;
        let mut writer = Writer::new(&self.layout);
        let messages = input.messages;
        let keep = input
            .carried
            .prefix_len()
            .min(state.locs.len())
            .min(messages.len());
        // Reuse every committed node that ends within the carried prefix.
        // (The state is only read here and updated in place once the ref
        // has moved: no per-commit copy of anything as long as the session.)
        let reused = state.nodes.partition_point(|(_, end)| *end <= keep);
        let base = state.nodes[..reused].last().copied();
        let base_end = base.map_or(0, |(_, e)| e);
        let mut items: Vec<Item> = Vec::new();
        for (i, m) in messages.iter().enumerate().skip(base_end) {
            let carried = input
                .carried
                .source(i)
                .and_then(|o| state.locs.get(o))
                .copied();
            if let Some((node, k)) = carried {
                let k = k as u64;
                if let Some(Item::Slice { node: n, to, .. }) = items.last_mut() {
                    if *n == node && *to == k {
                        *to += 1;
                        continue;
                    }
                }
                items.push(Item::Slice {
                    node,
                    from: k,
                    to: k + 1,
                });
                continue;
            }
            let bytes = canonical::to_vec(m);
            if bytes.len() >= INLINE_MAX {
                items.push(Item::Blob(writer.put(Kind::Blob, &bytes)?));
            } else {
                items.push(Item::Inline(m.clone()));
            }
        }
        let new_node = if items.is_empty() {
            None
        } else {
            let node = Node {
                count: messages.len() as u64,
                items,
                prev: base.map(|(id, _)| id),
            };
            Some(writer.put(Kind::List, &node.to_payload())?)
        };
        let root = new_node.or(base.map(|(id, _)| id));
        let request_config = writer.put(Kind::Blob, &canonical::to_vec(&input.request_config))?;
        let cursors = writer.put(Kind::Blob, &canonical::to_vec(&input.cursors))?;
        let mut spill = state.spill.clone();
        for (name, path) in &input.new_spill {
            let bytes = fs::read(path).at(path)?;
            let blob = writer.put(Kind::Blob, &bytes)?;
            spill.insert(
                name.clone(),
                SpillEntry {
                    blob,
                    size: bytes.len() as u64,
                },
            );
        }
        let now = time::now_ms();
        let cp = Checkpoint {
            schema_version: SCHEMA_VERSION,
            session_id: lease.session().to_owned(),
            parents: state.head.into_iter().collect(),
            created_at: time::rfc3339(now),
            created_at_ms: now,
            cwd: input.cwd,
            request_config,
            meter: input.meter,
            cursors,
            messages: MessagesRef {
                root,
                count: messages.len() as u64,
            },
            spill: spill.clone(),
            summary: Summary {
                messages: messages.len() as u64,
                checkpoints: state.checkpoints + 1,
                instruction: first_line(&input.instruction),
                input_tokens: input.input_tokens,
                output_tokens: input.output_tokens,
            },
        };
        let id = writer.put(Kind::Snapshot, &cp.to_payload())?;
        let (objects_written, bytes_written) = (writer.objects_written, writer.bytes_written);
        writer.finish()?;
        refs::update(&self.layout, lease.session(), state.head, id, &input.why)?;
        state.head = Some(id);
        state.checkpoints = cp.summary.checkpoints;
        state.nodes.truncate(reused);
        state.locs.truncate(base_end);
        if let Some(node_id) = new_node {
            state.nodes.push((node_id, messages.len()));
            state
                .locs
                .extend((0..messages.len() - base_end).map(|k| (node_id, k as u32)));
        }
        state.spill = spill;
        Ok(Committed {
            id,
            objects_written,
            bytes_written,
        })
    }

    /// Fork checkpoint `at` into a new session: one new snapshot that names
    /// `at` as its parent and reuses its message list and spill map. Returns
    /// the new session's lease and its first checkpoint.
    pub fn fork(&self, at: &ObjectId) -> Result<(SessionLease, ObjectId)> {
        let base = self.checkpoint(at)?;
        let lease = self.new_session()?;
        let _guard = StoreLock::shared(&self.layout)?;
        let now = time::now_ms();
        let cp = Checkpoint {
            session_id: lease.session().to_owned(),
            parents: vec![*at],
            created_at: time::rfc3339(now),
            created_at_ms: now,
            summary: Summary {
                checkpoints: base.summary.checkpoints + 1,
                ..base.summary.clone()
            },
            schema_version: SCHEMA_VERSION,
            ..base
        };
        let mut writer = Writer::new(&self.layout);
        let id = writer.put(Kind::Snapshot, &cp.to_payload())?;
        writer.finish()?;
        refs::update(
            &self.layout,
            lease.session(),
            None,
            id,
            &format!("fork from {at}"),
        )?;
        Ok((lease, id))
    }

    /// Delete `session`: its ref, ref log and working directory. Refused
    /// while the session is in use. Objects are reclaimed by gc, run here
    /// when `collect` is set (deferred otherwise, for batch deletes).
    pub fn delete(&self, session: &str, collect: bool) -> Result<Option<GcReport>> {
        check_session_id(session)?;
        {
            let _guard = StoreLock::exclusive(&self.layout)?;
            let known = refs::read(&self.layout, session)?.is_some()
                || self.layout.session_dir(session).is_dir();
            if !known {
                return Err(Error::NoSuchSession {
                    session: session.to_owned(),
                });
            }
            let lease = SessionLease::acquire(&self.layout, session)?;
            refs::remove(&self.layout, session)?;
            let dir = self.layout.session_dir(session);
            // The lease file goes with the directory; the lock is dropped after.
            fs::remove_dir_all(&dir).at(&dir)?;
            drop(lease);
        }
        if collect {
            Ok(Some(self.gc(false)?))
        } else {
            Ok(None)
        }
    }

    /// All sessions of this store, most recently updated first.
    pub fn sessions(&self) -> Result<Vec<SessionInfo>> {
        let ids = self.session_ids()?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let busy = lock::is_busy(&self.layout, &id);
            let head = refs::read(&self.layout, &id)?;
            let info = match head {
                Some(h) => {
                    let cp = self.checkpoint(&h)?;
                    SessionInfo {
                        id,
                        busy,
                        head,
                        updated_ms: cp.created_at_ms,
                        checkpoints: cp.summary.checkpoints,
                        messages: cp.summary.messages,
                        instruction: cp.summary.instruction,
                    }
                }
                None => {
                    // A session without a checkpoint: shown while it runs;
                    // garbage for gc once its lease is free.
                    let updated_ms = fs::metadata(self.layout.lease_path(&id))
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map_or(0, |d| d.as_millis() as u64);
                    SessionInfo {
                        id,
                        busy,
                        head,
                        updated_ms,
                        checkpoints: 0,
                        messages: 0,
                        instruction: String::new(),
                    }
                }
            };
            out.push(info);
        }
        out.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    /// The sessions whose id starts with `prefix` (lowercase hex and `-`).
    pub fn sessions_matching(&self, prefix: &str) -> Result<Vec<String>> {
        let mut ids = self.session_ids()?;
        ids.retain(|id| id.starts_with(prefix));
        Ok(ids)
    }

    /// The ids of all sessions: those with a ref and those with only a
    /// working directory (started, no checkpoint yet), sorted.
    fn session_ids(&self) -> Result<Vec<String>> {
        let mut ids = refs::list(&self.layout)?;
        let dir = self.layout.sessions_dir();
        match fs::read_dir(&dir) {
            Ok(entries) => {
                for e in entries.flatten() {
                    if let Some(name) = e.file_name().to_str() {
                        if check_session_id(name).is_ok() {
                            ids.push(name.to_owned());
                        }
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e).at(&dir),
        }
        ids.sort();
        ids.dedup();
        Ok(ids)
    }
}

/// The first line of `text`, trimmed.
pub fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").trim().to_owned()
}
