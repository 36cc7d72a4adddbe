//! Commits: a transaction that writes a record's objects (workspace files
//! and trees, messages, spill) and one commit record into the session's
//! journal, durable with one `fdatasync`, then publishes them by moving
//! the session's ref (objects-spec §6.3): three syncs in all (journal,
//! new ref file, `refs/sessions/`).

use std::collections::BTreeMap;
use std::sync::MutexGuard;

use hel_object::session::EncodedRecord;
use serde_json::Value;

use crate::journal::{self, CommitPayload};
use crate::list::{Item, Leaf, PayloadWriter, INLINE_MAX, NODE_INLINE_BUDGET};
use crate::lock::{SessionLease, Shared};
use crate::object::{self, Cap, Kind};
use crate::odb::Odb;
use crate::snapshot::{
    spill_field, Checkpoint, MessagesRef, Record, Spill, SpillEntry, Summary, Workspace,
    SCHEMA_VERSION,
};
use crate::store::{clip, CommitInput, Committed, SessionState, Store, Warning};
use crate::tree::{self, Tree};
use crate::write::Writer;
use crate::{canonical, heads, time, Error, ObjectId, Result};

/// New objects kept in memory before they are appended to the journal
/// (unsynced; the commit's one sync makes them durable with the record).
const STAGE_BYTES: u64 = 8 << 20;

/// An object encoded and compressed, ready for [`Txn::put_encoded`]: made
/// by [`encode_blob`] on any thread, so that a snapshot compresses files
/// in parallel.
#[derive(Debug)]
pub struct Encoded {
    id: ObjectId,
    stored: Vec<u8>,
}

impl Encoded {
    pub fn id(&self) -> ObjectId {
        self.id
    }

    /// The compressed bytes it takes in a journal (its record's header
    /// aside).
    pub fn stored_len(&self) -> u64 {
        self.stored.len() as u64
    }
}

/// A blob of `bytes`, compressed.
pub fn encode_blob(bytes: &[u8]) -> Result<Encoded> {
    let (id, stored) = object::compress(Kind::Blob, bytes)?;
    Ok(Encoded { id, stored })
}

/// A checkpoint's spill map: path → blob.
type SpillMap = BTreeMap<String, SpillEntry>;

/// The list a commit wrote: its root, and what the state needs to follow.
struct NewList {
    root: Option<ObjectId>,
    /// The node written (None: the list is a prefix of the last one's).
    new_node: Option<ObjectId>,
    /// Nodes of the last checkpoint kept in the chain.
    reused: usize,
    /// Messages those nodes hold.
    base_end: usize,
    /// Messages in the list.
    len: usize,
}

/// A commit in progress on a session (see [`Store::begin`]). It holds the
/// shared store lock, so gc cannot remove an object between "it is stored"
/// and the commit record that publishes what names it, and the session's
/// journal. Dropping it publishes nothing.
#[must_use = "call commit() to publish what was written"]
pub struct Txn<'a> {
    store: &'a Store,
    lease: &'a SessionLease,
    state: &'a mut SessionState,
    layout: &'a Odb,
    journal: MutexGuard<'a, Option<journal::Writer>>,
    writer: Writer<'a>,
    warnings: Vec<Warning>,
    // Last: the lock outlives everything written under it.
    _lock: Shared<'a, Odb>,
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        // Whatever was appended unpublished is overwritten by the next
        // commit (and cut off by the next open).
        if let Some(j) = self.journal.as_mut() {
            j.discard_staged();
        }
    }
}

impl Store {
    /// Commit a checkpoint of the lease's session and move its ref: a
    /// [`Store::begin`] with nothing else written, then [`crate::Txn::commit`]
    /// (which refuses, before anything is written, what a load would
    /// refuse: [`crate::admit`]).
    pub fn commit(
        &self,
        lease: &SessionLease,
        state: &mut SessionState,
        input: CommitInput<'_>,
    ) -> Result<Committed> {
        self.begin(lease, state)?.commit(input)
    }

    /// Begin a commit on the lease's session, whose last checkpoint is what
    /// `state` says. Objects written through the [`Txn`] become durable and
    /// published only by [`Txn::commit`]; until then gc waits.
    pub fn begin<'a>(
        &'a self,
        lease: &'a SessionLease,
        state: &'a mut SessionState,
    ) -> Result<Txn<'a>> {
        if crate::failpoint::hit("commit") {
            return Err(Error::Io {
                path: self.root_path(),
                source: crate::failpoint::error("commit"),
            });
        }
        let mut warnings = Vec::new();
        self.check_project(&mut warnings);
        let layout = self.layout_create()?;
        let lock = Shared::take(layout)?;
        layout.index().forget_removed();
        let mut journal = lease.journal.lock().unwrap_or_else(|p| p.into_inner());
        self.journal_writer(layout, lease, &mut journal)?
            .discard_staged();
        // The lease makes this the only writer; still, never move a head
        // that is not where this state says it is.
        let current = heads::read(layout, lease.session())?.map(|h| h.id);
        if current != state.head {
            let show = |o: Option<ObjectId>| o.map_or("none".to_owned(), |i| i.to_hex());
            return Err(Error::RefMoved {
                session: lease.session().to_string(),
                expected: show(state.head),
                found: show(current),
            });
        }
        let writer = Writer::new(&lock, lease.session(), &state.deps);
        Ok(Txn {
            store: self,
            lease,
            state,
            layout,
            journal,
            writer,
            warnings,
            _lock: lock,
        })
    }
}

impl<'a> Txn<'a> {
    /// Is workspace object `id` (a file's blob, a tree) written by this
    /// commit or stored where this session may name it? A copy in another
    /// session's journal makes this session depend on that journal. An
    /// object this answers `true` for may be named by what this commit
    /// writes.
    pub fn has(&mut self, id: &ObjectId) -> Result<bool> {
        self.writer.has_for_workspace(id)
    }

    /// Store a blob (unless stored where this session may name it).
    pub fn put_blob(&mut self, bytes: &[u8]) -> Result<ObjectId> {
        let id = self.writer.put(Kind::Blob, bytes)?;
        self.stage()?;
        Ok(id)
    }

    /// Store an encoded blob of a workspace file (unless [`Txn::has`]).
    /// Returns whether it was written.
    pub fn put_encoded(&mut self, e: Encoded) -> Result<bool> {
        let written = self.writer.put_workspace(e.id, e.stored)?;
        self.stage()?;
        Ok(written)
    }

    /// Store a tree after checking it as a reader would (sorted, valid
    /// names and entries) and that every object it names is stored where
    /// this session may name it or was written by this commit.
    pub fn put_tree(&mut self, t: &Tree) -> Result<ObjectId> {
        for (k, e) in t.entries.iter().enumerate() {
            let bad = tree::bad_name(&e.name)
                .map(str::to_owned)
                .or_else(|| tree::check_entry(e).err().map(|why| why.to_string()))
                .or_else(|| {
                    (k > 0 && t.entries[k - 1].name >= e.name)
                        .then(|| "entries out of order or repeated".to_owned())
                });
            if let Some(why) = bad {
                return Err(Error::Internal(format!(
                    "tree entry {:?}: {why}",
                    String::from_utf8_lossy(&e.name)
                )));
            }
            if e.kind.has_object() && !self.writer.has_for_workspace(&e.id)? {
                return Err(Error::Internal(format!(
                    "tree entry {:?} names {}, which is not stored",
                    String::from_utf8_lossy(&e.name),
                    e.id
                )));
            }
        }
        let (id, stored) = object::compress(Kind::Tree, &t.to_payload())?;
        self.writer.put_workspace(id, stored)?;
        self.stage()?;
        Ok(id)
    }

    /// Objects and compressed bytes this commit has written so far.
    pub fn written(&self) -> (u64, u64) {
        (self.writer.objects_written, self.writer.bytes_written)
    }

    /// The store this commit writes to.
    pub fn store(&self) -> &Store {
        self.store
    }

    /// Append what is pending to the journal once it is large, so that a
    /// snapshot of many files never holds them all in memory.
    fn stage(&mut self) -> Result<()> {
        if self.writer.pending_bytes() < STAGE_BYTES {
            return Ok(());
        }
        let records = self.writer.take_pending();
        let journal = self
            .journal
            .as_mut()
            .ok_or_else(|| Error::Internal("journal writer not kept".into()))?;
        journal.stage(&records)
    }

    /// Commit the record `input` describes and move the session's head.
    /// Writes only what is new: one list node (new small messages inline,
    /// carried ones as slices of the nodes that hold them), blobs of new
    /// large messages and spill, and the snapshot; all are durable with
    /// what was written through this transaction before the head moves.
    ///
    /// Refused before anything of it is written when a load would refuse
    /// the checkpoint ([`crate::admit`]). On error the previous checkpoint
    /// is untouched and the state unchanged. Once the head has moved the
    /// checkpoint is published and the state follows it, whatever fails
    /// after (returned as warnings).
    pub fn commit(mut self, input: CommitInput<'_>) -> Result<Committed> {
        let encoded = input.record.encode();
        let keep = self.kept_prefix(input.leaves);
        let weights = crate::admit::commit(
            self.store.limits(),
            self.state,
            input.messages,
            input.leaves,
            keep,
            &encoded,
        )?;
        self.check_workspace(input.workspace.as_ref())?;
        let list = self.write_list(input.messages, input.leaves, keep)?;
        let (spill_map, spill) = self.write_spill(&input.new_spill)?;
        let spill_blob = spill.blob();
        let why = input.reason();
        let cp = self.checkpoint(input, encoded, list.root, spill)?;
        let published = self.publish(cp, &why)?;
        Ok(self.follow(published, list, (spill_map, spill_blob), weights))
    }

    /// How many messages from the start are still where the last
    /// checkpoint has them (a comparison per message, no lookups: the
    /// state's leaves are that checkpoint's).
    fn kept_prefix(&self, leaves: &[Option<Leaf>]) -> usize {
        leaves
            .iter()
            .zip(&self.state.locs)
            .take_while(|(a, b)| a.as_ref() == Some(*b))
            .count()
    }

    /// Every tree a workspace names is stored where this commit may name it.
    fn check_workspace(&mut self, workspace: Option<&Workspace>) -> Result<()> {
        let Some(ws) = workspace else {
            return Ok(());
        };
        for t in std::iter::once(&ws.tree).chain(&ws.start) {
            if !self.writer.has_for_workspace(t)? {
                return Err(Error::Internal(format!(
                    "the workspace names tree {t}, which is not stored"
                )));
            }
        }
        Ok(())
    }

    /// Write the list: every committed node that ends within the kept
    /// prefix is reused, the rest goes in one new node, item by item (each
    /// new message's canonical JSON, made to choose inline or blob, copied
    /// in as it is; carried messages in a row of one node make one slice).
    fn write_list(
        &mut self,
        messages: &[Value],
        leaves: &[Option<Leaf>],
        keep: usize,
    ) -> Result<NewList> {
        // The state is only read here and updated in place once the head
        // has moved: no per-commit copy of anything as long as the session.
        let state = &*self.state;
        let reused = state.nodes.partition_point(|(_, end)| *end <= keep);
        let base = state.nodes[..reused].last().copied();
        let base_end = base.map_or(0, |(_, e)| e);
        let mut node = PayloadWriter::new(messages.len() as u64);
        let mut slice: Option<(ObjectId, u64, u64)> = None;
        let flush = |node: &mut PayloadWriter, slice: &mut Option<(ObjectId, u64, u64)>| {
            if let Some((n, from, to)) = slice.take() {
                node.item(&Item::Slice { node: n, from, to });
            }
        };
        let mut inline_bytes = 0usize;
        for (i, m) in messages.iter().enumerate().skip(base_end) {
            if let Some(Leaf { node: n, index }) = leaves[i] {
                let k = u64::from(index);
                match &mut slice {
                    Some((sn, _, to)) if *sn == n && *to == k => *to += 1,
                    _ => {
                        flush(&mut node, &mut slice);
                        slice = Some((n, k, k + 1));
                    }
                }
                continue;
            }
            flush(&mut node, &mut slice);
            let bytes = canonical::to_vec(m);
            if bytes.len() >= INLINE_MAX || inline_bytes + bytes.len() > NODE_INLINE_BUDGET {
                node.item(&Item::Blob(self.writer.put(Kind::Blob, &bytes)?));
            } else {
                inline_bytes += bytes.len();
                node.inline(&bytes);
            }
        }
        flush(&mut node, &mut slice);
        let new_node = if node.items() == 0 {
            None
        } else {
            let prev = base.map(|(id, _)| id);
            Some(self.writer.put(Kind::List, &node.finish(prev))?)
        };
        Ok(NewList {
            root: new_node.or(base.map(|(id, _)| id)),
            new_node,
            reused,
            base_end,
            len: messages.len(),
        })
    }

    /// Store the new spill files and the spill field of the snapshot; the
    /// new map when it changed. The map changes only with a new spill:
    /// otherwise it is the head's, named by the head's blob (no copy, no
    /// serialization).
    fn write_spill(&mut self, new_spill: &[(String, String)]) -> Result<(Option<SpillMap>, Spill)> {
        let mut map = None;
        if !new_spill.is_empty() {
            let map = map.insert(self.state.spill.clone());
            let dir = self.store.spill_dir(self.lease)?;
            for (key, file) in new_spill {
                let bytes = dir
                    .read_file(file, Cap::SPILL.max)?
                    .ok_or_else(|| Error::Io {
                        path: dir.child_path(file),
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "spill working copy vanished",
                        ),
                    })?;
                let blob = self.writer.put(Kind::Blob, &bytes)?;
                let size = bytes.len() as u64;
                map.insert(key.clone(), SpillEntry { blob, size });
            }
        }
        // Stored once while no spill is added: the next checkpoints name
        // the same blob.
        let writer = &mut self.writer;
        let field = match (&map, self.state.spill_blob) {
            (None, Some(id)) => Spill::Blob(id),
            (m, _) => spill_field(m.as_ref().unwrap_or(&self.state.spill), |bytes| {
                writer.put(Kind::Blob, bytes)
            })?,
        };
        Ok((map, field))
    }

    /// The snapshot of `input`, its record's blobs stored.
    fn checkpoint(
        &mut self,
        input: CommitInput<'_>,
        encoded: EncodedRecord,
        root: Option<ObjectId>,
        spill: Spill,
    ) -> Result<Checkpoint> {
        let request_config = self.writer.put(Kind::Blob, &encoded.config)?;
        let cursors = self.writer.put(Kind::Blob, &encoded.cursors)?;
        let count = input.messages.len() as u64;
        let answer = u64::from(input.kind == Record::Answer);
        let now = time::now_ms();
        Ok(Checkpoint {
            schema_version: SCHEMA_VERSION,
            session_id: self.lease.session().clone(),
            parents: self.state.head.into_iter().collect(),
            created_at: time::rfc3339(now),
            created_at_ms: now,
            cwd: input.cwd,
            request_config,
            meter: encoded.meter,
            cursors,
            messages: MessagesRef { root, count },
            spill,
            summary: Summary {
                messages: count,
                checkpoints: self.state.checkpoints + answer,
                instruction: clip(&crate::first_line(&input.instruction), 1000),
                input_tokens: input.input_tokens,
                output_tokens: input.output_tokens,
            },
            record: Some(input.kind),
            workspace: input.workspace,
        })
    }

    /// The head has moved to `published`: the state follows it (the list's
    /// nodes and leaves, the spill map, the weights).
    fn follow(
        &mut self,
        published: Committed,
        list: NewList,
        (spill, spill_blob): (Option<SpillMap>, Option<ObjectId>),
        weights: Vec<u64>,
    ) -> Committed {
        let state = &mut *self.state;
        for (node, _) in state.nodes.drain(list.reused..) {
            state.node_len.remove(&node);
        }
        state.locs.truncate(list.base_end);
        let mut new_leaves = Vec::new();
        if let Some(node_id) = list.new_node {
            state.nodes.push((node_id, list.len));
            state.node_len.insert(node_id, list.len - list.base_end);
            new_leaves.extend((0..list.len - list.base_end).map(|k| Leaf {
                node: node_id,
                index: k as u32,
            }));
            state.locs.extend_from_slice(&new_leaves);
        }
        if let Some(map) = spill {
            state.spill = map;
        }
        state.spill_blob = spill_blob;
        state.weights = weights;
        Committed {
            leaves_from: list.base_end,
            new_leaves,
            ..published
        }
    }

    /// Write snapshot `cp` (checked as a reader would check it) and the
    /// commit record publishing it with everything this transaction wrote,
    /// in one sync; then the state's head follows.
    fn publish(&mut self, cp: Checkpoint, why: &str) -> Result<Committed> {
        // What a reader would refuse is never written: `check` is every
        // check `Checkpoint::parse` makes past serde, and serde's payload of
        // a `Checkpoint` always reads back as it (hel-object's
        // `payload_reads_back_as_itself`), so the payload is not parsed back.
        cp.check()
            .map_err(|e| Error::Internal(format!("the checkpoint would not read back: {e}")))?;
        let payload = cp.to_payload();
        if payload.len() as u64 > Cap::SNAPSHOT.max {
            return Err(Error::Refused {
                at: None,
                reason: format!(
                    "its snapshot takes {} bytes, over the {} a load reads",
                    payload.len(),
                    Cap::SNAPSHOT.max
                ),
            });
        }
        let id = self.writer.put(Kind::Snapshot, &payload)?;
        let (objects_written, bytes_written) =
            (self.writer.objects_written, self.writer.bytes_written);
        let deps = self.writer.deps.clone();
        let record = CommitPayload {
            deps: deps.clone(),
            parent: self.state.head,
            seq: self.state.seq + 1,
            session: self.lease.session().clone(),
            summary: cp.summary.clone(),
            time_ms: cp.created_at_ms,
            why: clip(why, journal::WHY_MAX),
        };
        let journal = self
            .journal
            .as_mut()
            .ok_or_else(|| Error::Internal("journal writer not kept".into()))?;
        let (layout, session, parent) = (self.layout, self.lease.session(), self.state.head);
        let (_, told) = self.writer.commit(journal, id, record, || {
            move_ref(layout, session, parent, id)
        })?;
        // Published: the state follows the head.
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.extend(told.map(Warning::RefNotSynced));
        let state = &mut *self.state;
        state.head = Some(id);
        state.seq += 1;
        state.deps = deps;
        state.checkpoints = cp.summary.checkpoints;
        Ok(Committed {
            id,
            objects_written,
            bytes_written,
            leaves_from: 0,
            new_leaves: Vec::new(),
            warnings,
        })
    }
}

impl Txn<'_> {
    /// Commit a workspace record (before-restore, restored, start,
    /// interrupted) that keeps everything else of the session's head: its
    /// messages, request config, cursors, meter and spill. For a process
    /// that has not loaded the conversation (`hel undo`, `hel restore`).
    /// The session must have a head.
    pub fn commit_record(
        self,
        record: crate::snapshot::Record,
        workspace: crate::snapshot::Workspace,
        why: &str,
    ) -> Result<Committed> {
        self.follow_head(record, |cp| {
            cp.workspace = Some(workspace);
            why.to_owned()
        })
    }

    /// Commit a `relocated` record: the session's head with `cwd` as its
    /// project directory, everything else kept (the messages, the spill,
    /// the workspace it recorded). History keeps the old path in the
    /// records before. The session must have a head.
    pub fn relocate(self, cwd: &str) -> Result<Committed> {
        self.follow_head(crate::snapshot::Record::Relocated, |cp| {
            let why = format!("relocated from {}", clip(&cp.cwd, 150));
            cp.cwd = cwd.to_owned();
            if let Some(w) = &mut cp.workspace {
                w.start = None;
                w.restored = None;
            }
            why
        })
    }

    /// Commit `record` as a copy of the session's head (its messages
    /// stay where they are) that `edit` changes and says why of.
    fn follow_head(
        mut self,
        record: crate::snapshot::Record,
        edit: impl FnOnce(&mut Checkpoint) -> String,
    ) -> Result<Committed> {
        let head = self.state.head.ok_or_else(|| {
            Error::Internal(format!(
                "a {} record needs a checkpoint to follow",
                record.name()
            ))
        })?;
        let base = crate::read::snapshot(self.layout, &head)?;
        let now = time::now_ms();
        let mut cp = Checkpoint {
            schema_version: SCHEMA_VERSION,
            parents: vec![head],
            created_at: time::rfc3339(now),
            created_at_ms: now,
            summary: Summary {
                checkpoints: self.state.checkpoints,
                ..base.summary.clone()
            },
            record: Some(record),
            ..base
        };
        let why = edit(&mut cp);
        let mut done = self.publish(cp, &why)?;
        // The messages are the head's: all stay where they are.
        done.leaves_from = self.state.locs.len();
        Ok(done)
    }
}

/// Publish `new` as `session`'s head after `expected`, once what it
/// reaches is durable: move the ref ([`crate::refs::publish`];
/// `Ok(Some(e))`: moved, its directory not synced).
pub(crate) fn move_ref(
    layout: &Odb,
    session: &crate::SessionId,
    expected: Option<ObjectId>,
    new: ObjectId,
) -> Result<Option<Error>> {
    crate::refs::publish(layout, session, expected, new)
}
