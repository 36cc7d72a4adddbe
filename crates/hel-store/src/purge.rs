//! Purge: a session's history rewritten with every secret replaced by its
//! handle (objects-spec §8.3). Every record of the history becomes a new
//! snapshot holding the same messages, spill, workspace, names and
//! request config, but for the texts a [`Purger`] rewrites; every session
//! whose history holds a record that changed (the session's forks, and
//! theirs; a session it was forked from when the value is in the part
//! they share) moves onto the new history; then each moved session's
//! journal is written again holding only what some head still reaches, so
//! the objects holding the values are gone at once (the next `gc` takes
//! what sealed packs hold of them).
//!
//! Crash safety: the new objects are committed as any commit is (one
//! append, one sync, the ref's rename), the purged session last, so a
//! kill leaves each session on its old history or its new one, and the
//! purged session on its old one until every other moved; a journal is
//! rewritten aside, synced and renamed over the old one, which its ref
//! already names the head of. A purge interrupted between the two
//! (a head moved by a purge whose journal still holds the old records)
//! is finished by the next purge of any session.
//!
//! What a purge replaced is recorded under `.hel/remotes/purged-<uuid>`
//! (the old heads), so that the next push replaces the remote's ref
//! instead of refusing it as a divergence (objects-spec §12.4).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde_json::Value;

use crate::journal::{self, CommitPayload};
use crate::lock::{Exclusive, SessionLease, Shared};
use crate::object::{Cap, Kind};
use crate::odb::Odb;
use crate::pack::{self, FileKind, RecordType};
use crate::snapshot::{Checkpoint, Spill, SpillEntry, Summary, Workspace};
use crate::tree::{EntryKind, Tree};
use crate::write::Writer;
use crate::{heads, time, Error, ObjectId, Result, SessionId, Store};

/// What a purge replaces: the texts of messages, spill files and
/// instructions, and which workspace files hold a secret.
pub trait Purger {
    /// `text` with every secret replaced by its handle; `None` when it
    /// holds none.
    fn text(&mut self, text: &str) -> Option<String>;
    /// Does a workspace file's content (or a link's target) hold a secret?
    fn file(&mut self, bytes: &[u8]) -> bool;
}

/// A session a purge moved onto its new history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub session: SessionId,
    pub old: ObjectId,
    pub new: ObjectId,
}

/// What a purge did.
#[derive(Debug, Default)]
pub struct Purged {
    /// Every session moved, the purged one last.
    pub moved: Vec<Moved>,
    /// Stored messages rewritten (each distinct one once).
    pub messages: u64,
    /// Spill files rewritten.
    pub spill: u64,
    /// Workspace files (or link targets) now recorded as not tracked.
    pub files: u64,
    /// Journals written again (those of the moved sessions, and of
    /// sessions an interrupted purge had moved).
    pub journals: u64,
    /// The purge is done; what went wrong besides (its operation log
    /// entry could not be written).
    pub warnings: Vec<crate::Warning>,
}

/// The prefix of a purge's commit records' `why`.
const WHY: &str = "purge";

/// The marker of a session a purge moved whose journal is still to be
/// written again (`.hel/remotes/`, beside the purge records).
fn pending_key(session: &SessionId) -> String {
    format!("purging-{session}")
}

/// The sessions whose marker says a purge moved them and did not write
/// their journal again.
fn pending(layout: &Odb) -> Result<Vec<SessionId>> {
    let Some(dir) = layout.remotes()? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for e in dir.entries()? {
        let Some(name) = e.name_str() else { continue };
        if let Some(id) = name.strip_prefix("purging-") {
            if let Ok(id) = id.parse::<SessionId>() {
                out.push(id);
            }
        }
    }
    Ok(out)
}

/// The remote-state key recording what a purge replaced of `session`.
pub fn replaced_key(session: &SessionId) -> String {
    format!("purged-{session}")
}

/// The records (checkpoints) recorded as replaced by purges of `session`:
/// a remote ref whose head is one of them is replaced by the next push.
pub fn replaced(store: &Store, session: &SessionId) -> Result<BTreeSet<ObjectId>> {
    let Some(bytes) = crate::transfer::remote_state(store, &replaced_key(session))? else {
        return Ok(BTreeSet::new());
    };
    let v = crate::json::from_slice::<Value>(&bytes, crate::json::Limits::STORED).map_err(|e| {
        Error::Internal(format!(
            "the purge record of session {session} is not JSON: {e}"
        ))
    })?;
    let mut out = BTreeSet::new();
    if let Some(list) = v.get("replaced").and_then(Value::as_array) {
        for id in list {
            if let Some(id) = id.as_str().and_then(|s| s.parse().ok()) {
                out.insert(id);
            }
        }
    }
    Ok(out)
}

fn record_replaced(store: &Store, session: &SessionId, old: &[ObjectId]) -> Result<()> {
    // A damaged record is replaced: it only ever saves a refused push.
    let mut all = replaced(store, session).unwrap_or_default();
    all.extend(old.iter().copied());
    let list: Vec<String> = all.iter().map(ObjectId::to_hex).collect();
    let bytes = crate::canonical::to_vec(&serde_json::json!({
        "format": "hel-purged 1",
        "replaced": list,
    }));
    crate::transfer::set_remote_state(store, &replaced_key(session), &bytes)
}

/// A list node read: its count, `prev` and items.
type Parsed = (u64, Option<ObjectId>, Vec<hel_object::list::Item>);

/// The rewriting of records, memoised by old id: each node, blob, tree and
/// snapshot is rewritten once however many records name it.
struct Rewrite<'a> {
    layout: &'a Odb,
    purger: &'a mut dyn Purger,
    snapshots: HashMap<ObjectId, ObjectId>,
    nodes: HashMap<ObjectId, ObjectId>,
    blobs: HashMap<ObjectId, ObjectId>,
    spill_maps: HashMap<ObjectId, Spill>,
    spill_blobs: HashMap<ObjectId, (ObjectId, u64)>,
    /// A tree's new id and how many entries under it became not tracked.
    trees: HashMap<ObjectId, (ObjectId, u64)>,
    files: HashMap<ObjectId, bool>,
    /// The summary of each snapshot made.
    summaries: HashMap<ObjectId, Summary>,
    /// The objects made, in the order made (a record after what it names).
    new: Vec<(ObjectId, Kind, Vec<u8>)>,
    made: HashSet<ObjectId>,
    counts: Purged,
}

impl Rewrite<'_> {
    fn put(&mut self, kind: Kind, payload: Vec<u8>) -> ObjectId {
        let id = crate::object::id_of(kind, &payload);
        if self.made.insert(id) {
            self.new.push((id, kind, payload));
        }
        id
    }

    /// Every string of `v` rewritten; whether any was.
    fn value(&mut self, v: &mut Value) -> bool {
        match v {
            Value::String(s) => match self.purger.text(s) {
                Some(t) if t != *s => {
                    *s = t;
                    true
                }
                _ => false,
            },
            Value::Array(a) => a.iter_mut().fold(false, |c, x| self.value(x) | c),
            Value::Object(o) => o.values_mut().fold(false, |c, x| self.value(x) | c),
            _ => false,
        }
    }

    fn message_blob(&mut self, id: &ObjectId) -> Result<ObjectId> {
        if let Some(n) = self.blobs.get(id) {
            return Ok(*n);
        }
        let bytes = crate::read::of_kind(self.layout, id, Kind::Blob, Cap::MESSAGE)?;
        let mut m: Value = crate::json::from_slice(&bytes, crate::json::Limits::MESSAGE)
            .map_err(|e| Error::Internal(format!("message blob {id} is not JSON: {e}")))?;
        let out = if self.value(&mut m) {
            self.counts.messages += 1;
            self.put(Kind::Blob, crate::canonical::to_vec(&m))
        } else {
            *id
        };
        self.blobs.insert(*id, out);
        Ok(out)
    }

    fn node(&mut self, id: &ObjectId) -> Result<ObjectId> {
        if let Some(n) = self.nodes.get(id) {
            return Ok(*n);
        }
        // Iterative over `prev` and slices: a hostile store nests them
        // deep. A node is rewritten once all it names is.
        let mut stack = vec![*id];
        let mut parsed: HashMap<ObjectId, Parsed> = HashMap::new();
        while let Some(top) = stack.last().copied() {
            if self.nodes.contains_key(&top) {
                stack.pop();
                continue;
            }
            if let std::collections::hash_map::Entry::Vacant(slot) = parsed.entry(top) {
                let payload = crate::read::of_kind(self.layout, &top, Kind::List, Cap::LIST)?;
                let (raw, items) = hel_object::list::parse_whole(&payload)
                    .map_err(|e| crate::list::malformed(self.layout, &top, e))?;
                slot.insert((raw.count, raw.prev, items));
                if stack.len() > 1 << 20 {
                    return Err(Error::Internal(format!("list node {top} nests too deep")));
                }
            }
            let (_, prev, items) = &parsed[&top];
            let mut wait: Vec<ObjectId> = Vec::new();
            if let Some(p) = prev {
                if !self.nodes.contains_key(p) {
                    wait.push(*p);
                }
            }
            for it in items {
                if let hel_object::list::Item::Slice { node, .. } = it {
                    if !self.nodes.contains_key(node) {
                        wait.push(*node);
                    }
                }
            }
            if let Some(w) = wait.into_iter().find(|w| !stack.contains(w)) {
                stack.push(w);
                continue;
            }
            stack.pop();
            let (count, prev, items) = parsed.remove(&top).unwrap_or_default();
            let mut changed = false;
            let mut out = Vec::with_capacity(items.len());
            for it in items {
                out.push(match it {
                    hel_object::list::Item::Inline(mut m) => {
                        if self.value(&mut m) {
                            self.counts.messages += 1;
                            changed = true;
                        }
                        hel_object::list::Item::Inline(m)
                    }
                    hel_object::list::Item::Blob(b) => {
                        let n = self.message_blob(&b)?;
                        changed |= n != b;
                        hel_object::list::Item::Blob(n)
                    }
                    hel_object::list::Item::Slice { node, from, to } => {
                        // A slice of a node in progress (a loop) keeps its id.
                        let n = self.nodes.get(&node).copied().unwrap_or(node);
                        changed |= n != node;
                        hel_object::list::Item::Slice { node: n, from, to }
                    }
                });
            }
            let new_prev = prev.map(|p| self.nodes.get(&p).copied().unwrap_or(p));
            changed |= new_prev != prev;
            let new_id = if changed {
                let node = hel_object::list::Node {
                    count,
                    items: out,
                    prev: new_prev,
                };
                self.put(Kind::List, node.to_payload())
            } else {
                top
            };
            self.nodes.insert(top, new_id);
        }
        Ok(self.nodes.get(id).copied().unwrap_or(*id))
    }

    fn spill_blob(&mut self, e: &SpillEntry) -> Result<(ObjectId, u64)> {
        if let Some(n) = self.spill_blobs.get(&e.blob) {
            return Ok(*n);
        }
        let bytes = crate::read::of_kind(self.layout, &e.blob, Kind::Blob, Cap::SPILL)?;
        let new = match std::str::from_utf8(&bytes) {
            Ok(text) => self.purger.text(text).map(String::into_bytes),
            Err(_) => self.purger.file(&bytes).then(|| {
                b"[hel: this spilled output held a secret; a purge removed it]\n".to_vec()
            }),
        };
        let out = match new {
            Some(b) if b != bytes => {
                self.counts.spill += 1;
                let size = b.len() as u64;
                (self.put(Kind::Blob, b), size)
            }
            _ => (e.blob, e.size),
        };
        self.spill_blobs.insert(e.blob, out);
        Ok(out)
    }

    fn spill(&mut self, cp: &Checkpoint) -> Result<Spill> {
        let Some(blob) = cp.spill.blob() else {
            return Ok(cp.spill.clone());
        };
        if let Some(s) = self.spill_maps.get(&blob) {
            return Ok(s.clone());
        }
        let map = crate::read::spill_map(self.layout, cp)?;
        let mut out = BTreeMap::new();
        let mut changed = false;
        for (k, e) in &map {
            let (b, size) = self.spill_blob(e)?;
            changed |= b != e.blob;
            out.insert(k.clone(), SpillEntry { blob: b, size });
        }
        let s = if changed {
            let payload = crate::snapshot::spill_map_payload(&out);
            Spill::Blob(self.put(Kind::Blob, payload))
        } else {
            cp.spill.clone()
        };
        self.spill_maps.insert(blob, s.clone());
        Ok(s)
    }

    fn holds(&mut self, blob: &ObjectId) -> Result<bool> {
        if let Some(v) = self.files.get(blob) {
            return Ok(*v);
        }
        let bytes = crate::read::of_kind(self.layout, blob, Kind::Blob, Cap::FILE)?;
        let v = self.purger.file(&bytes);
        self.files.insert(*blob, v);
        Ok(v)
    }

    /// Tree `id` with every file holding a secret made not tracked (kind 4,
    /// its length kept), and how many became so.
    fn tree(&mut self, id: &ObjectId, depth: u32) -> Result<(ObjectId, u64)> {
        if let Some(t) = self.trees.get(id) {
            return Ok(*t);
        }
        if depth > 256 {
            return Err(Error::Internal(format!("tree {id} nests too deep")));
        }
        let tree = crate::read::tree(self.layout, id)?;
        let mut out = Tree {
            entries: Vec::with_capacity(tree.entries.len()),
        };
        let mut changed = false;
        let mut untracked = 0;
        for mut e in tree.entries {
            match e.kind {
                EntryKind::File | EntryKind::Symlink if self.holds(&e.id)? => {
                    e.kind = EntryKind::NotTracked;
                    e.id = ObjectId::ZERO;
                    e.mode = 0;
                    untracked += 1;
                    changed = true;
                    self.counts.files += 1;
                }
                EntryKind::Dir => {
                    let (n, u) = self.tree(&e.id, depth + 1)?;
                    changed |= n != e.id;
                    untracked += u;
                    e.id = n;
                }
                _ => {}
            }
            out.entries.push(e);
        }
        let new = if changed {
            self.put(Kind::Tree, out.to_payload())
        } else {
            *id
        };
        self.trees.insert(*id, (new, untracked));
        Ok((new, untracked))
    }

    fn workspace(&mut self, w: &Workspace) -> Result<Workspace> {
        let (tree, untracked) = self.tree(&w.tree, 0)?;
        let start = match &w.start {
            Some(s) => Some(self.tree(s, 0)?.0),
            None => None,
        };
        Ok(Workspace {
            tree,
            start,
            not_tracked: w.not_tracked + untracked,
            restored: w.restored.clone(),
        })
    }

    /// The new id of snapshot `head` and of every record of its history.
    fn history(&mut self, head: &ObjectId) -> Result<ObjectId> {
        let mut chain = Vec::new();
        let mut at = Some(*head);
        while let Some(id) = at {
            if self.snapshots.contains_key(&id) {
                break;
            }
            let cp = crate::read::snapshot(self.layout, &id)?;
            at = cp.parents.first().copied();
            chain.push((id, cp));
        }
        for (id, cp) in chain.into_iter().rev() {
            let new = self.snapshot(cp)?;
            self.snapshots.insert(id, new);
        }
        Ok(self.snapshots.get(head).copied().unwrap_or(*head))
    }

    fn snapshot(&mut self, cp: Checkpoint) -> Result<ObjectId> {
        let mut new = cp.clone();
        new.parents = cp
            .parents
            .iter()
            .map(|p| self.snapshots.get(p).copied().unwrap_or(*p))
            .collect();
        new.messages.root = match &cp.messages.root {
            Some(r) => Some(self.node(r)?),
            None => None,
        };
        new.spill = self.spill(&cp)?;
        if let Some(t) = self.purger.text(&cp.summary.instruction) {
            new.summary = Summary {
                instruction: t,
                ..cp.summary.clone()
            };
        }
        new.workspace = match &cp.workspace {
            Some(w) => Some(self.workspace(w)?),
            None => None,
        };
        if new == cp {
            return Ok(self.id_of(&cp));
        }
        // The meter counted the tokens of the old texts: the next request
        // is estimated anew.
        new.meter = Value::Null;
        let id = self.put(Kind::Snapshot, new.to_payload());
        self.summaries.insert(id, new.summary);
        Ok(id)
    }

    fn id_of(&self, cp: &Checkpoint) -> ObjectId {
        crate::object::id_of(Kind::Snapshot, &cp.to_payload())
    }
}

/// The record chain (first parents) of `head`, `head` first.
fn chain(layout: &Odb, head: &ObjectId) -> Result<Vec<ObjectId>> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut at = Some(*head);
    while let Some(id) = at {
        if !seen.insert(id) {
            break;
        }
        out.push(id);
        at = crate::read::snapshot(layout, &id)?.parents.first().copied();
    }
    Ok(out)
}

/// Each new head loads as a load would take it (messages, pairing,
/// limits, record), with the `new` objects read as if stored, before
/// anything is written: a purge never publishes what a resume refuses.
fn admit(
    store: &Store,
    layout: &Odb,
    new: &[(ObjectId, Kind, Vec<u8>)],
    heads: &[ObjectId],
) -> Result<()> {
    let mut records = Vec::with_capacity(new.len());
    for (id, kind, payload) in new {
        let (_, canonical) = crate::object::encode(*kind, payload);
        records.push((
            *id,
            crate::object::compress_canonical(*kind, id, &canonical)?,
        ));
    }
    let _incoming = layout.receive(&records);
    for n in heads {
        store.check_covering(n)?;
    }
    Ok(())
}

/// Purge `session`: rewrite its history with what `purger` replaces, and
/// move every session whose history holds a record that changed onto the
/// new history (the purged session last). Returns, for every session it
/// moved, its old and its new head. Nothing is written when nothing
/// changes (but a purge an earlier one left unfinished is finished).
/// Refused, before anything is written, while a session to move is in use.
pub fn purge(store: &Store, session: &SessionId, purger: &mut dyn Purger) -> Result<Purged> {
    let no_such = || Error::NoSuchSession {
        session: session.to_string(),
    };
    let layout = store.layout()?.ok_or_else(no_such)?;
    let mut out = {
        let lock = Shared::take(layout)?;
        layout.index().forget_removed();
        let head = heads::read(layout, session)?.ok_or_else(no_such)?;
        let mut rw = Rewrite {
            layout,
            purger,
            snapshots: HashMap::new(),
            nodes: HashMap::new(),
            blobs: HashMap::new(),
            spill_maps: HashMap::new(),
            spill_blobs: HashMap::new(),
            trees: HashMap::new(),
            files: HashMap::new(),
            summaries: HashMap::new(),
            new: Vec::new(),
            made: HashSet::new(),
            counts: Purged::default(),
        };
        let new_head = rw.history(&head.id)?;
        if new_head == head.id {
            drop(lock);
            let journals = finish(store, layout, &[])?;
            if journals > 0 {
                drop_summaries(layout);
            }
            return Ok(Purged {
                journals,
                ..Purged::default()
            });
        }
        let changed: HashSet<ObjectId> = rw
            .snapshots
            .iter()
            .filter(|(o, n)| o != n)
            .map(|(o, _)| *o)
            .collect();
        no_trash_holds(store, layout, session, &changed)?;
        // Every other session whose history holds a changed record.
        let mut moves: Vec<(SessionId, heads::Head, ObjectId)> = Vec::new();
        for other in heads::list(layout)?.sessions {
            if other == *session {
                continue;
            }
            let Some(h) = heads::read(layout, &other)? else {
                continue;
            };
            if chain(layout, &h.id)?.iter().any(|id| changed.contains(id)) {
                let n = rw.history(&h.id)?;
                moves.push((other, h, n));
            }
        }
        moves.push((session.clone(), head, new_head));
        let heads_new: Vec<ObjectId> = moves.iter().map(|(_, _, n)| *n).collect();
        admit(store, layout, &rw.new, &heads_new)?;
        // The leases first: a session in use is refused before anything
        // is written, and no head moves under us from here.
        let mut leases = Vec::new();
        for (s, h, _) in &moves {
            let lease = SessionLease::acquire(layout, s, true)?;
            let now = heads::read(layout, s)?.map(|h| h.id);
            if now != Some(h.id) {
                return Err(Error::RefMoved {
                    session: s.to_string(),
                    expected: h.id.to_hex(),
                    found: now.map_or("none".into(), |p| p.to_hex()),
                });
            }
            leases.push(lease);
        }
        // What the next push must replace, and that the session's journal
        // is to be written again, durable before any head moves.
        for (s, h, _) in &moves {
            // Every record that changed: a remote may hold any of them
            // as its head (pushed before later checkpoints were made).
            let old: Vec<ObjectId> = chain(layout, &h.id)?
                .into_iter()
                .filter(|id| rw.snapshots.get(id).is_some_and(|n| n != id))
                .collect();
            record_replaced(store, s, &old)?;
            crate::transfer::set_remote_state(store, &pending_key(s), b"")?;
        }
        drop_stat_cache(layout)?;
        let Rewrite {
            new,
            counts,
            summaries,
            ..
        } = rw;
        let mut purged = counts;
        let found = purged.messages + purged.spill + purged.files;
        for ((s, h, n), lease) in moves.iter().zip(&leases) {
            let mut slot = lease.journal.lock().unwrap_or_else(|p| p.into_inner());
            let journal = store.journal_writer(layout, lease, &mut slot)?;
            let mut writer = Writer::new(&lock, s, &h.deps());
            for (_, kind, payload) in &new {
                writer.put(*kind, payload)?;
            }
            let summary = summaries
                .get(n)
                .cloned()
                .ok_or_else(|| Error::Internal(format!("purged head {n} not made")))?;
            let payload = CommitPayload {
                deps: writer.deps.clone(),
                parent: Some(h.id),
                seq: h.seq() + 1,
                session: s.clone(),
                summary,
                time_ms: time::now_ms(),
                why: format!("{WHY}: {found} texts or files holding secrets replaced"),
            };
            let (_, told) = writer.commit(journal, *n, payload, || {
                crate::commit::move_ref(layout, s, Some(h.id), *n)
            })?;
            drop(told);
            // The journal writer goes now: its journal is replaced below.
            *slot = None;
            crate::failpoint::kill("purge-moved");
            purged.moved.push(Moved {
                session: s.clone(),
                old: h.id,
                new: *n,
            });
        }
        drop(lock);
        let moved: Vec<SessionId> = moves.iter().map(|(s, _, _)| s.clone()).collect();
        purged.journals = finish_holding(store, layout, &moved, leases)?;
        purged
    };
    drop_summaries(layout);
    out.moved.sort_by_key(|m| m.session == *session);
    log(store, &mut out);
    Ok(out)
}

/// The purge's operation log entry; a failure to write it is a warning.
fn log(store: &Store, out: &mut Purged) {
    if !out.moved.is_empty() {
        let moved: Vec<_> = out
            .moved
            .iter()
            .map(|m| (m.session.clone(), m.old, m.new))
            .collect();
        if let Err(e) = crate::oplog::record_purge(store, &moved) {
            out.warnings.push(crate::Warning::NotLogged(e));
        }
    }
}

/// A session in the trash keeps its history as it is: refused when one
/// holds a record the purge changes (it would keep the values reachable).
fn no_trash_holds(
    store: &Store,
    layout: &Odb,
    session: &SessionId,
    changed: &HashSet<ObjectId>,
) -> Result<()> {
    for t in store.trash_entries()? {
        if chain(layout, &t.head)?
            .iter()
            .any(|id| changed.contains(id))
        {
            return Err(Error::TrashHolds {
                session: session.to_string(),
                trashed: t.session.to_string(),
            });
        }
    }
    Ok(())
}

/// Finish what purges moved: every session whose head a purge published
/// whose journal still holds what came before (also one an interrupted
/// purge left). `moved`: sessions the caller already holds the leases of.
fn finish(store: &Store, layout: &Odb, moved: &[SessionId]) -> Result<u64> {
    finish_holding(store, layout, moved, Vec::new())
}

fn finish_holding(
    store: &Store,
    layout: &Odb,
    moved: &[SessionId],
    mut leases: Vec<SessionLease>,
) -> Result<u64> {
    let lock = Exclusive::take(layout)?;
    layout.index().forget_removed();
    // Sessions an interrupted purge moved: those whose marker is still
    // there.
    let mut todo: Vec<SessionId> = moved.to_vec();
    for s in pending(layout)? {
        if todo.contains(&s) || heads::read_light(layout, &s)?.is_none() {
            continue;
        }
        match SessionLease::acquire(lock.layout, &s, true) {
            Ok(l) => {
                leases.push(l);
                todo.push(s);
            }
            // In use: the next purge finishes it.
            Err(Error::InUse { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    if todo.is_empty() {
        return Ok(0);
    }
    let roots = crate::gc::roots(layout, &mut |e| Err(e))?;
    let heads_now: Vec<ObjectId> = roots.iter().map(|(_, id, _)| *id).collect();
    let live = crate::gc::mark(layout, &heads_now, &mut |e| Err(e))?.reachable;
    let mut done = 0;
    for s in &todo {
        rewrite_journal(layout, s, &live)?;
        crate::transfer::remove_remote_state(store, &pending_key(s))?;
        crate::failpoint::kill("purge-journal");
        done += 1;
        // Working copies of spill files are a cache of what the old
        // history held.
        if let Some(dir) = layout.session_dir(s)? {
            let _ = dir.remove_tree("spill");
        }
    }
    drop_stat_cache(layout)?;
    layout.index().forget_removed();
    drop(leases);
    drop(lock);
    Ok(done)
}

/// Listings carry a session's first instruction from entry to entry of
/// the summary index (objects-spec §5.9): it is rebuilt from the new
/// heads. A hint: one that cannot be removed is stale at worst.
fn drop_summaries(layout: &Odb) {
    let _ = layout.root().remove_file(crate::layout::SUMMARIES);
}

/// The stat cache vouches for files by the blobs the old history held: a
/// snapshot trusting it would name a file purged here again. It is a hint
/// (objects-spec §10.4); the next snapshot reads every file.
fn drop_stat_cache(layout: &Odb) -> Result<()> {
    if let Some(ws) = layout.root().sub(crate::layout::WORKSPACE)? {
        ws.remove_file("cache")?;
    }
    Ok(())
}

/// Write `session`'s journal again: its objects that `live` holds, and one
/// commit record (the journal's first) publishing the head its ref names.
/// Written aside, synced, renamed over the old one; the sidecar goes
/// first (a journal without one is read whole).
fn rewrite_journal(layout: &Odb, session: &SessionId, live: &HashSet<ObjectId>) -> Result<()> {
    let head = heads::read(layout, session)?.ok_or_else(|| Error::NoSuchSession {
        session: session.to_string(),
    })?;
    let Some(view) = layout.index().journal(layout, session)? else {
        return Ok(());
    };
    let mut keep: Vec<ObjectId> = {
        let v = view.read().unwrap_or_else(|p| p.into_inner());
        v.objects
            .keys()
            .filter(|id| live.contains(id))
            .copied()
            .collect()
    };
    keep.sort();
    let mut bytes = pack::file_header(FileKind::Journal).to_vec();
    for id in &keep {
        let stored = crate::repack::stored_bytes(layout, id)?;
        bytes.extend_from_slice(&pack::encode_record(RecordType::Object, id, &stored));
    }
    let payload = CommitPayload {
        parent: None,
        seq: 1,
        ..head.commit.clone()
    };
    let json = crate::canonical::to_vec(
        &serde_json::to_value(&payload)
            .map_err(|e| Error::Internal(format!("cannot encode a commit record: {e}")))?,
    );
    let stored = journal::commit_stored(&json)?;
    bytes.extend_from_slice(&pack::encode_record(RecordType::Commit, &head.id, &stored));
    let dir = layout.journals_create()?;
    let tmp = layout.tmp_create()?;
    dir.remove_file(&journal::jidx_name(session))?;
    let temp = format!("purge-{}", uuid::Uuid::new_v4().simple());
    dir.replace(&journal::journal_name(session), &bytes, 0o600, tmp, &temp)?;
    drop(view);
    Ok(())
}
