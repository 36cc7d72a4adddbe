//! Message lists as the store reads them: bounded loads of a chain of
//! `list` nodes (the node format and its parsers are hel-object's
//! [`hel_object::list`], re-exported here), slices resolved with an
//! explicit stack, every message and node payload counted against
//! [`Limits`], each distinct node read once.

pub use hel_object::list::*;

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde_json::Value;

use crate::message;
use crate::object::{Cap, Kind};
use crate::odb::Odb;
use crate::{Error, ObjectId, Result};

fn corrupt(layout: &Odb, id: &ObjectId, reason: String) -> Error {
    Error::Corrupt {
        id: *id,
        path: layout.object_path(id),
        reason,
    }
}

/// Node `id` is not a node.
pub(crate) fn malformed(layout: &Odb, id: &ObjectId, e: NodeError) -> Error {
    corrupt(layout, id, format!("malformed list node: {e}"))
}

/// Read and parse node `id`'s shape.
pub(crate) fn read_shape(layout: &Odb, id: &ObjectId) -> Result<Shape> {
    let payload = crate::read::of_kind(layout, id, Kind::List, Cap::LIST)?;
    Shape::parse(&payload).map_err(|e| malformed(layout, id, e))
}

/// [`read_shape`] where `found` says the node is.
pub(crate) fn read_shape_at(
    layout: &Odb,
    id: &ObjectId,
    found: &crate::odb::Found,
) -> Result<Shape> {
    let payload = crate::read::of_kind_at(layout, id, found, Kind::List, Cap::LIST)?;
    Shape::parse(&payload).map_err(|e| malformed(layout, id, e))
}

/// The messages of one node's items, with their weights as prefix sums
/// (`weights[k]` is the weight of items `0..k`).
struct Expanded {
    messages: Vec<Value>,
    weights: Vec<u64>,
}

/// Counts what a load has built against its [`Limits`].
struct Budget {
    limits: Limits,
    messages: u64,
    bytes: u64,
    /// The checkpoint being loaded, for the error.
    checkpoint: ObjectId,
}

impl Budget {
    fn charge(&mut self, messages: u64, bytes: u64) -> Result<()> {
        self.messages += messages;
        self.bytes += bytes;
        match self.limits.over(self.messages, self.bytes) {
            Some((what, limit)) => Err(Error::ConversationTooLarge {
                checkpoint: self.checkpoint,
                what,
                limit,
            }),
            None => Ok(()),
        }
    }

    fn refund(&mut self, bytes: u64) {
        self.bytes = self.bytes.saturating_sub(bytes);
    }
}

/// A node being expanded: its payload, the ranges of its remaining items
/// (reversed, so the next one pops off the end), and what it has produced.
struct Frame {
    id: ObjectId,
    payload: Vec<u8>,
    /// The items not yet expanded, last first.
    items: Vec<Pending>,
    /// Index of the next item (for error messages).
    next: usize,
    /// A slice item to retry once the node it names is expanded.
    retry: Option<Item>,
    out: Expanded,
}

/// An item waiting in a frame: its bytes in the payload (parsed when its
/// turn comes, so a node of a million tiny items never becomes a million
/// values before the budget is asked), or already parsed (when the whole
/// node fits the budget many times over, which is one parse instead of
/// two).
enum Pending {
    Raw(usize, usize),
    Parsed(Item),
}

/// How much more memory than its JSON a parsed node may take: what a node
/// must fit in the budget this many times over to be parsed whole.
const PARSE_WHOLE_FACTOR: u64 = 24;

/// What a list read keeps of each message: the message itself for a load
/// ([`Messages`]), or only what the pairing of tool calls needs of it for
/// a check that must accept what a load accepts without holding the
/// conversation ([`Turns`], fsck). Either way every message is read,
/// validated and counted against the budget alike.
pub(crate) trait Keep {
    type Of;
    /// What is kept of one node's messages, in order.
    fn keep(messages: Vec<Value>) -> Vec<Self::Of>;
    /// [`message::check_pairing`] of the conversation kept.
    fn check_pairing(kept: &[Self::Of]) -> std::result::Result<(), message::PairingError>;
}

/// A load keeps the messages.
pub(crate) struct Messages;

impl Keep for Messages {
    type Of = Value;
    fn keep(messages: Vec<Value>) -> Vec<Value> {
        messages
    }
    fn check_pairing(kept: &[Value]) -> std::result::Result<(), message::PairingError> {
        message::check_pairing(kept)
    }
}

/// A check keeps each message's [`message::Turn`].
pub(crate) struct Turns;

impl Keep for Turns {
    type Of = message::Turn;
    fn keep(messages: Vec<Value>) -> Vec<message::Turn> {
        messages.iter().map(message::Turn::of).collect()
    }
    fn check_pairing(kept: &[message::Turn]) -> std::result::Result<(), message::PairingError> {
        let mut pairing = message::Pairing::default();
        for turn in kept {
            pairing.push(turn.as_ref())?;
        }
        pairing.finish()
    }
}

/// The resolved list of a checkpoint (what [`Keep`] keeps of each
/// message), and per node of its chain (oldest first) the node id and the
/// list length after it.
pub(crate) struct Resolved<T> {
    pub messages: Vec<T>,
    pub chain: Vec<(ObjectId, usize)>,
    /// What the read validated whole: every node it expanded (the chain's
    /// and the sliced ones, each with every message of its items) and
    /// every message blob those name (fsck checks no further).
    pub covered: Covered,
}

/// The nodes and message blobs a list read validated whole.
#[derive(Debug, Default)]
pub(crate) struct Covered {
    pub nodes: HashSet<ObjectId>,
    pub blobs: HashSet<ObjectId>,
}

/// Bytes the walker may hold ahead of the parse: chain nodes walked and
/// not yet taken ([`ChainPart::held`]), and message blobs decoded and not
/// yet taken, counted by their JSON (a blob the walker parsed takes a few
/// times that; it parses none over [`PARSE_AHEAD_MAX`]). It starts
/// nothing new while over this (one item always goes through when it
/// holds nothing), so a hostile chain of huge blobs costs at most this
/// and one object more.
const READ_AHEAD: u64 = 8 << 20;

/// The walker keeps at least this many bytes of walked nodes ahead of the
/// parse before it turns to decoding message blobs: the chain can only be
/// walked in order (each node names the next), so the parse must not run
/// out of nodes while the walker decodes blobs.
const NODES_AHEAD: u64 = 256 << 10;

/// The most message blobs of one node the walker decodes ahead (the rest
/// are read by the parse): a hint list is bounded whatever the node.
const BLOB_HINTS_MAX: usize = 4096;

/// How long the parse polls for the walker before it sleeps.
const POLL: std::time::Duration = std::time::Duration::from_micros(500);

/// The largest message blob the walker parses (a larger one it hands over
/// as bytes, parsed by the parse once the load's budget has taken it):
/// what the read-ahead holds is counted in bytes of JSON, which a parse
/// can make several times larger.
const PARSE_AHEAD_MAX: usize = 1 << 20;

/// A message blob the walker decoded (read, decompressed, verified): its
/// bytes, or (at most [`PARSE_AHEAD_MAX`]) parsed, with its length in bytes
/// (for the budget).
enum Decoded {
    Bytes(Vec<u8>),
    Parsed(u64, std::result::Result<Value, serde_json::Error>),
}

impl Decoded {
    /// Its length in bytes of JSON.
    fn len(&self) -> u64 {
        match self {
            Decoded::Bytes(b) => b.len() as u64,
            Decoded::Parsed(len, _) => *len,
        }
    }
}

/// Reads lists, expanding each sliced node once, within a budget.
pub(crate) struct Reader<'a> {
    layout: &'a Odb,
    budget: Budget,
    expanded: HashMap<ObjectId, Rc<Expanded>>,
    /// During a threaded read, what the walker shares with the parse.
    ahead: Option<std::sync::Arc<Ahead>>,
    /// Message blobs read and validated.
    blobs_read: HashSet<ObjectId>,
}

/// A chain node as the walk read it: its payload, what it took for its
/// `prev`, and the message blobs its items name (a hint, for decoding them
/// ahead).
struct ChainPart {
    id: ObjectId,
    payload: Vec<u8>,
    prev: Option<ObjectId>,
    blobs: Vec<ObjectId>,
}

impl ChainPart {
    /// What it holds, as the read-ahead counts it: its payload, its hints
    /// and what a node costs besides (so that a chain of tiny nodes is
    /// bounded by what they take, not only by their bytes).
    fn held(&self) -> u64 {
        const NODE_COST: u64 = 256;
        self.payload.len() as u64 + 32 * self.blobs.len() as u64 + NODE_COST
    }
}

/// The ids of a node's `{"b":"<id>"}` items, found by their canonical
/// bytes without parsing (a hint for reading ahead): each once, at most
/// [`BLOB_HINTS_MAX`].
fn blob_items(payload: &[u8]) -> Vec<ObjectId> {
    const KEY: &[u8] = b"{\"b\":\"";
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut at = 0;
    while let Some(k) = memchr::memmem::find(&payload[at..], KEY) {
        if out.len() >= BLOB_HINTS_MAX {
            break;
        }
        let start = at + k + KEY.len();
        if let Some(hex) = payload.get(start..start + 64) {
            if payload.get(start + 64..start + 66) == Some(b"\"}") {
                if let Some(id) = std::str::from_utf8(hex).ok().and_then(|h| h.parse().ok()) {
                    if seen.insert(id) {
                        out.push(id);
                    }
                }
            }
        }
        at = start;
    }
    out
}

/// Lists at least this long are read on two threads (when a second one
/// can be started): a walker that walks the chain and decodes message
/// blobs ahead, and the parse, which expands the nodes in order and
/// decodes the blobs the walker has not reached. Below it a fresh
/// process's second thread costs more than it saves (a 201-message load:
/// 2.0–3.8 ms on two threads, 2.4 ms on one, issue 24); on a machine
/// whose cores are all busy it costs time at any length.
pub(crate) const THREADED_FROM: u64 = 500;

/// The walk of a chain backwards through `prev`: each node read,
/// decompressed and verified in turn.
struct Walk {
    next: Option<ObjectId>,
    seen: HashSet<ObjectId>,
    /// Find the message blobs each node names (for a walker to decode).
    hints: bool,
}

impl Walk {
    fn new(root: Option<ObjectId>, hints: bool) -> Walk {
        Walk {
            next: root,
            seen: HashSet::new(),
            hints,
        }
    }

    /// The next node of the chain (newest first), or None past the oldest.
    fn next(&mut self, layout: &Odb) -> Result<Option<ChainPart>> {
        let Some(id) = self.next else {
            return Ok(None);
        };
        if !self.seen.insert(id) {
            return Err(corrupt(
                layout,
                &id,
                "the chain leads back to this node".into(),
            ));
        }
        let payload = crate::read::of_kind(layout, &id, Kind::List, Cap::LIST)?;
        let next = prev_of(&payload).ok_or_else(|| malformed(layout, &id, NodeError::NoPrev))?;
        self.next = next;
        Ok(Some(ChainPart {
            id,
            blobs: match self.hints {
                true => blob_items(&payload),
                false => Vec::new(),
            },
            payload,
            prev: next,
        }))
    }
}

/// A message blob the walked nodes name, as the walker and the parse
/// share it.
enum Job {
    /// Nobody has started it.
    Queued,
    /// The walker is decoding it.
    Claimed,
    Done(Decoded),
    /// The walker could not read it: the parse reads it (and tells why).
    Failed,
}

/// What the walker and the parse of a threaded list read share, under one
/// lock.
#[derive(Default)]
struct AheadState {
    /// Nodes walked and not yet taken by the parse, in chain order, each
    /// with its place in it.
    nodes: std::collections::VecDeque<(u64, ChainPart)>,
    /// What `nodes` holds ([`ChainPart::held`]).
    nodes_bytes: u64,
    /// The walk's end: Ok past the oldest node, or what stopped it.
    walked: Option<Result<()>>,
    /// Each blob a walked node names, by the place of the first node
    /// naming it that is not yet parsed.
    jobs: HashMap<ObjectId, (u64, Job)>,
    /// The jobs in chain order: what the parse lets go of once it is past
    /// their node.
    order: std::collections::VecDeque<(u64, ObjectId)>,
    /// The queued jobs in chain order: the walker takes the last (the
    /// parse needs it last), the parse the ones of the node it is at.
    queued: Vec<(u64, ObjectId)>,
    /// Bytes held: `nodes_bytes` and every done job's JSON.
    bytes: u64,
    /// The parse has stopped (done, an error or a panic).
    stopped: bool,
    parse_waits: bool,
    walker_waits: bool,
}

impl AheadState {
    fn waits(&mut self, side: Side) -> &mut bool {
        match side {
            Side::Walker => &mut self.walker_waits,
            Side::Parse => &mut self.parse_waits,
        }
    }

    /// May the walker start something (at least one thing always can)?
    fn room(&self) -> bool {
        self.bytes < READ_AHEAD
    }

    /// Hand node `seq` over, and queue the blobs it names that no node
    /// before it (not yet parsed) names.
    fn push(&mut self, seq: u64, part: ChainPart) {
        for b in &part.blobs {
            if self.jobs.contains_key(b) {
                continue;
            }
            self.jobs.insert(*b, (seq, Job::Queued));
            self.order.push_back((seq, *b));
            self.queued.push((seq, *b));
        }
        let size = part.held();
        self.nodes_bytes += size;
        self.bytes += size;
        self.nodes.push_back((seq, part));
        // Entries of jobs the parse took or let go of stay in `queued`
        // until the walker pops them: dropped here once they are most of
        // it, so that it never outgrows the jobs alive.
        if self.queued.len() > 2 * self.jobs.len() + 64 {
            let jobs = &self.jobs;
            self.queued
                .retain(|(seq, b)| matches!(jobs.get(b), Some((s, Job::Queued)) if s == seq));
        }
    }

    /// The walker decoded blob `b` (None: could not read it) for node
    /// `seq`: kept unless the parse took it or let go of it meanwhile.
    fn finish(&mut self, b: &ObjectId, seq: u64, decoded: Option<Decoded>) -> bool {
        match self.jobs.get_mut(b) {
            Some((s, job @ (Job::Queued | Job::Claimed))) if *s == seq => {
                if let Some(d) = &decoded {
                    self.bytes += d.len();
                }
                *job = decoded.map_or(Job::Failed, Job::Done);
                true
            }
            _ => false,
        }
    }

    /// The last queued job, now claimed.
    fn claim_last(&mut self) -> Option<(u64, ObjectId)> {
        while let Some((seq, b)) = self.queued.pop() {
            if let Some((s, job @ Job::Queued)) = self.jobs.get_mut(&b) {
                if *s == seq {
                    *job = Job::Claimed;
                    return Some((seq, b));
                }
            }
        }
        None
    }
}

/// The two sides of a threaded list read.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Walker,
    Parse,
}

/// [`AheadState`] and its condition variable.
#[derive(Default)]
struct Ahead {
    state: std::sync::Mutex<AheadState>,
    changed: std::sync::Condvar,
    /// Counts changes, for the parse's polling.
    changes: std::sync::atomic::AtomicU64,
}

impl Ahead {
    fn lock(&self) -> std::sync::MutexGuard<'_, AheadState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait for a change, saying so (a change wakes only a side that
    /// waits: a wake-up costs a system call). The parse first polls a
    /// while, yielding: a thread woken by the walker is put on the
    /// walker's core, where it takes the core from the walker while the
    /// other one idles; and where both share one core, a yield lets the
    /// walker run.
    fn wait<'g>(
        &'g self,
        mut st: std::sync::MutexGuard<'g, AheadState>,
        side: Side,
    ) -> std::sync::MutexGuard<'g, AheadState> {
        use std::sync::atomic::Ordering;
        if side == Side::Parse {
            let seen = self.changes.load(Ordering::Acquire);
            drop(st);
            let start = std::time::Instant::now();
            let mut polls = 0u32;
            loop {
                if self.changes.load(Ordering::Acquire) != seen {
                    return self.lock();
                }
                std::thread::yield_now();
                polls += 1;
                if polls.is_multiple_of(16) && start.elapsed() > POLL {
                    break;
                }
            }
            st = self.lock();
            if self.changes.load(Ordering::Acquire) != seen {
                return st;
            }
        }
        *st.waits(side) = true;
        let mut st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        *st.waits(side) = false;
        st
    }

    /// `side` changed something: wake the other side if it waits for it.
    fn tell(&self, st: &AheadState, side: Side) {
        self.changes
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        // The walker waits only for room, and is woken once half of it
        // is free.
        let wake = match side {
            Side::Walker => st.parse_waits,
            Side::Parse => st.walker_waits && st.bytes < READ_AHEAD / 2,
        };
        if wake {
            self.changed.notify_all();
        }
    }

    /// The walker's side: walk the chain from `root`, keeping
    /// [`NODES_AHEAD`] bytes of nodes ahead of the parse, and decode the
    /// blobs they name in the time left, last first; within
    /// [`READ_AHEAD`], until the parse stops.
    fn walk(&self, layout: &Odb, root: Option<ObjectId>) {
        if crate::failpoint::hit("list-walker") {
            let mut st = self.lock();
            st.walked = Some(Err(Error::Internal("failpoint list-walker".into())));
            self.tell(&st, Side::Walker);
            return;
        }
        // The failpoint makes the walker decode every blob before it
        // hands over its node, so that the parse takes each from it.
        let blobs_first = crate::failpoint::hit("list-walker-parse");
        let _ended = Ended(self);
        let mut walk = Walk::new(root, true);
        let mut seq = 0u64;
        let mut st = self.lock();
        loop {
            if st.stopped {
                return;
            }
            // Waiting only for room: the parse wakes it once half the
            // read-ahead is free (one wake-up per 4 MiB, not per node).
            if !st.room() {
                st = self.wait(st, Side::Walker);
                continue;
            }
            let walking = st.walked.is_none();
            let job = match walking && (blobs_first || st.nodes_bytes < NODES_AHEAD) {
                true => None,
                false => st.claim_last(),
            };
            if let Some((seq, b)) = job {
                drop(st);
                let job = decode(layout, &b);
                st = self.lock();
                if st.finish(&b, seq, job) {
                    self.tell(&st, Side::Walker);
                }
                continue;
            }
            if !walking {
                return;
            }
            drop(st);
            let walked = walk.next(layout);
            let mut decoded = Vec::new();
            if let (Ok(Some(part)), true) = (&walked, blobs_first) {
                decoded = part.blobs.iter().map(|b| (*b, decode(layout, b))).collect();
            }
            st = self.lock();
            match walked {
                Ok(Some(part)) => {
                    seq += 1;
                    st.push(seq, part);
                    for (b, job) in decoded {
                        st.finish(&b, seq, job);
                    }
                    if crate::failpoint::hit("list-walker-panic") {
                        drop(st);
                        panic!("failpoint list-walker-panic");
                    }
                }
                Ok(None) => st.walked = Some(Ok(())),
                Err(e) => st.walked = Some(Err(e)),
            }
            self.tell(&st, Side::Walker);
        }
    }

    /// The parse's side: the next walked node and its place, or the walk's
    /// end once every node it walked was taken.
    fn next_node(&self) -> std::result::Result<(u64, ChainPart), Result<()>> {
        let mut st = self.lock();
        loop {
            if let Some((seq, part)) = st.nodes.pop_front() {
                let size = part.held();
                st.nodes_bytes -= size;
                st.bytes -= size;
                self.tell(&st, Side::Parse);
                return Ok((seq, part));
            }
            if let Some(end) = st.walked.take() {
                // Nothing more is read: the walker is done too.
                st.stopped = true;
                return Err(end);
            }
            st = self.wait(st, Side::Parse);
        }
    }

    /// The parse's side: blob `b` as the walker decoded it, waiting while
    /// the walker decodes it; None when the parse is to read it itself
    /// (nobody started it: it is the parse's now; or the walker failed).
    fn take(&self, b: &ObjectId) -> Option<Decoded> {
        let mut st = self.lock();
        loop {
            match st.jobs.get(b) {
                Some((_, Job::Claimed)) => st = self.wait(st, Side::Parse),
                None => return None,
                Some(_) => {
                    let (_, job) = st.jobs.remove(b)?;
                    return match job {
                        Job::Done(d) => {
                            st.bytes -= d.len();
                            self.tell(&st, Side::Parse);
                            Some(d)
                        }
                        _ => None,
                    };
                }
            }
        }
    }

    /// The parse is past node `seq`: let go of the jobs of it and of the
    /// nodes before (a blob their items did not name after all).
    fn past(&self, seq: u64) {
        let mut st = self.lock();
        let mut freed = false;
        while st.order.front().is_some_and(|(s, _)| *s <= seq) {
            let Some((s, b)) = st.order.pop_front() else {
                break;
            };
            if st.jobs.get(&b).is_some_and(|(at, _)| *at == s) {
                if let Some((_, Job::Done(d))) = st.jobs.remove(&b) {
                    st.bytes -= d.len();
                    freed = true;
                }
            }
        }
        if freed {
            self.tell(&st, Side::Parse);
        }
    }

    /// The parse has stopped: the walker stops too.
    fn stop(&self) {
        self.lock().stopped = true;
        self.tell_all();
    }

    /// Wake whoever waits, polling or not (the lock held or just let go).
    fn tell_all(&self) {
        self.changes
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        self.changed.notify_all();
    }
}

/// Blob `b` read as a message blob (and parsed, up to
/// [`PARSE_AHEAD_MAX`]), or None when it cannot be read.
fn decode(layout: &Odb, b: &ObjectId) -> Option<Decoded> {
    let bytes = crate::read::of_kind(layout, b, Kind::Blob, Cap::MESSAGE).ok()?;
    Some(match bytes.len() <= PARSE_AHEAD_MAX {
        true => Decoded::Parsed(bytes.len() as u64, serde_json::from_slice(&bytes)),
        false => Decoded::Bytes(bytes),
    })
}

/// On drop, the walker has ended: should it end otherwise than by
/// returning (a panic), the parse is told, not left waiting for it.
struct Ended<'a>(&'a Ahead);

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        if st.walked.is_none() {
            st.walked = Some(Err(Error::Internal("the list walker stopped".into())));
        }
        for (_, job) in st.jobs.values_mut() {
            if matches!(job, Job::Claimed) {
                *job = Job::Failed;
            }
        }
        self.0.tell_all();
    }
}

/// On drop, stops the walker (the parse may end early, or panic).
struct Stop<'a>(&'a Ahead);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

impl<'a> Reader<'a> {
    pub fn new(layout: &'a Odb, limits: Limits, checkpoint: ObjectId) -> Self {
        Reader {
            layout,
            budget: Budget {
                limits,
                messages: 0,
                bytes: 0,
                checkpoint,
            },
            expanded: HashMap::new(),
            ahead: None,
            blobs_read: HashSet::new(),
        }
    }

    /// A leaf message of node `id` (item `index`): validated, weighed.
    fn leaf(&mut self, id: &ObjectId, index: usize, m: &Value) -> Result<u64> {
        message::validate(m).map_err(|reason| Error::BadMessage {
            id: *id,
            path: self.layout.object_path(id),
            index,
            reason,
        })?;
        let w = message::weight(m);
        self.budget.charge(1, w)?;
        Ok(w)
    }

    /// Read blob `b` as a message.
    fn blob_message(&mut self, b: &ObjectId) -> Result<Value> {
        // The blob's bytes are in memory while it is parsed: charged
        // before the parse here, and for one the walker parsed (within its
        // read-ahead bound) as if it were parsed here.
        let (len, parsed) = match self.ahead.as_ref().and_then(|a| a.take(b)) {
            Some(Decoded::Parsed(len, parsed)) => {
                self.budget.charge(0, len)?;
                (len, parsed)
            }
            taken => {
                let bytes = match taken {
                    Some(Decoded::Bytes(bytes)) => bytes,
                    _ => crate::read::of_kind(self.layout, b, Kind::Blob, Cap::MESSAGE)?,
                };
                let len = bytes.len() as u64;
                self.budget.charge(0, len)?;
                (len, serde_json::from_slice(&bytes))
            }
        };
        let parsed = parsed.map_err(|e| Error::BadMessage {
            id: *b,
            path: self.layout.object_path(b),
            index: 0,
            reason: message::MessageError::NotJson(e),
        });
        self.budget.refund(len);
        parsed
    }

    /// A frame for node `id` with `payload` (already counted against the
    /// budget), its items split out.
    fn frame(&mut self, id: ObjectId, payload: Vec<u8>) -> Result<(Frame, RawNode)> {
        let bytes_left = self
            .budget
            .limits
            .max_bytes
            .saturating_sub(self.budget.bytes);
        let whole = (payload.len() as u64).saturating_mul(PARSE_WHOLE_FACTOR) <= bytes_left;
        let (raw, mut items) = if whole {
            let (raw, parsed) =
                parse_whole(&payload).map_err(|e| malformed(self.layout, &id, e))?;
            (
                raw,
                parsed.into_iter().map(Pending::Parsed).collect::<Vec<_>>(),
            )
        } else {
            let raw = RawNode::parse(&payload).map_err(|e| malformed(self.layout, &id, e))?;
            let items = raw
                .items
                .iter()
                .map(|(a, b)| Pending::Raw(*a, *b))
                .collect();
            (raw, items)
        };
        let left = self
            .budget
            .limits
            .max_messages
            .saturating_sub(self.budget.messages);
        if items.len() as u64 > left {
            return Err(Error::ConversationTooLarge {
                checkpoint: self.budget.checkpoint,
                what: "messages",
                limit: self.budget.limits.max_messages,
            });
        }
        items.reverse();
        let frame = Frame {
            id,
            payload,
            items,
            next: 0,
            retry: None,
            out: Expanded {
                messages: Vec::new(),
                weights: vec![0],
            },
        };
        Ok((frame, raw))
    }

    /// Expand node `root` (whose payload is counted) into its messages,
    /// expanding the nodes it slices first: iteratively, each once, each
    /// kept for later slices.
    fn expand(&mut self, root: Frame) -> Result<Expanded> {
        let mut frame = root;
        let mut stack: Vec<Frame> = Vec::new();
        let mut in_progress: HashSet<ObjectId> = HashSet::new();
        in_progress.insert(frame.id);
        loop {
            let item = match frame.retry.take() {
                Some(item) => item,
                None => {
                    let Some(pending) = frame.items.pop() else {
                        // This frame is done.
                        self.budget.refund(frame.payload.len() as u64);
                        match stack.pop() {
                            None => return Ok(frame.out),
                            Some(parent) => {
                                in_progress.remove(&frame.id);
                                let done = std::mem::replace(&mut frame, parent);
                                self.expanded.insert(done.id, Rc::new(done.out));
                                continue;
                            }
                        }
                    };
                    match pending {
                        Pending::Parsed(item) => item,
                        Pending::Raw(a, b) => {
                            parse_item(&frame.payload[a..b]).map_err(|reason| {
                                let index = frame.next;
                                malformed(self.layout, &frame.id, NodeError::Item { index, reason })
                            })?
                        }
                    }
                }
            };
            let index = frame.next;
            match item {
                Item::Inline(m) => {
                    let w = self.leaf(&frame.id, index, &m)?;
                    push(&mut frame.out, m, w);
                }
                Item::Blob(b) => {
                    let m = self.blob_message(&b)?;
                    let w = self.leaf(&b, 0, &m)?;
                    self.blobs_read.insert(b);
                    push(&mut frame.out, m, w);
                }
                Item::Slice { node, from, to } => {
                    if let Some(src) = self.expanded.get(&node).cloned() {
                        let part =
                            src.messages
                                .get(from as usize..to as usize)
                                .ok_or_else(|| {
                                    corrupt(
                                        self.layout,
                                        &frame.id,
                                        format!(
                                            "slice {from}..{to} of {node}, which holds {}",
                                            src.messages.len()
                                        ),
                                    )
                                })?;
                        let (wf, wt) = (src.weights[from as usize], src.weights[to as usize]);
                        self.budget.charge(to - from, wt - wf)?;
                        let base = *frame.out.weights.last().unwrap_or(&0);
                        frame.out.messages.extend_from_slice(part);
                        frame.out.weights.extend(
                            src.weights[from as usize + 1..=to as usize]
                                .iter()
                                .map(|x| base + x - wf),
                        );
                    } else {
                        if in_progress.contains(&node) {
                            return Err(corrupt(
                                self.layout,
                                &frame.id,
                                format!("slices of {node} lead back to it"),
                            ));
                        }
                        // Expand the sliced node first, then retry this item.
                        frame.retry = Some(Item::Slice { node, from, to });
                        let payload =
                            crate::read::of_kind(self.layout, &node, Kind::List, Cap::LIST)?;
                        self.budget.charge(0, payload.len() as u64)?;
                        let (child, _) = self.frame(node, payload)?;
                        in_progress.insert(node);
                        stack.push(std::mem::replace(&mut frame, child));
                        continue;
                    }
                }
            }
            frame.next += 1;
        }
    }

    /// The whole list ending at `root`, which its snapshot says holds
    /// `count` messages.
    ///
    /// The chain is walked backwards through `prev`, which needs each node
    /// read, decompressed and verified in turn, and each node is parsed and
    /// expanded as the walk reaches it; for a list of [`THREADED_FROM`]
    /// messages or more the walk runs on a second thread when one can be
    /// started (never more than [`READ_AHEAD`] bytes ahead of the parse on
    /// this one), with the same result and the same first error.
    pub fn read_list<K: Keep>(
        &mut self,
        root: Option<ObjectId>,
        count: u64,
    ) -> Result<Resolved<K::Of>> {
        if count > self.budget.limits.max_messages {
            return Err(Error::ConversationTooLarge {
                checkpoint: self.budget.checkpoint,
                what: "messages",
                limit: self.budget.limits.max_messages,
            });
        }
        let layout = self.layout;
        // Newest first: (node, its count, its messages).
        let mut parts: Vec<(ObjectId, u64, Vec<K::Of>)> = Vec::new();
        // A short list is walked and parsed on this thread (a second one
        // costs more than it saves), and so is a long one when no second
        // thread is to be had (a process or container limit).
        if !(count >= THREADED_FROM && self.read_threaded::<K>(root, &mut parts)?) {
            let mut walk = Walk::new(root, false);
            while let Some(part) = walk.next(layout)? {
                parts.push(self.take_part::<K>(part)?);
            }
        }
        let mut messages = Vec::with_capacity(count as usize);
        let mut chain = Vec::with_capacity(parts.len());
        for (id, node_count, part) in parts.into_iter().rev() {
            messages.extend(part);
            if messages.len() as u64 != node_count {
                return Err(corrupt(
                    self.layout,
                    &id,
                    format!(
                        "list node says {node_count} messages, its chain holds {}",
                        messages.len()
                    ),
                ));
            }
            chain.push((id, messages.len()));
        }
        let covered = Covered {
            nodes: chain
                .iter()
                .map(|(id, _)| *id)
                .chain(self.expanded.keys().copied())
                .collect(),
            blobs: std::mem::take(&mut self.blobs_read),
        };
        Ok(Resolved {
            messages,
            chain,
            covered,
        })
    }

    /// Expand one chain node as the walk handed it over.
    fn take_part<K: Keep>(&mut self, part: ChainPart) -> Result<(ObjectId, u64, Vec<K::Of>)> {
        let ChainPart {
            id, payload, prev, ..
        } = part;
        self.expand_chain_node(id, payload, prev)
            .map(|(id, count, messages)| (id, count, K::keep(messages)))
    }

    /// [`Reader::read_list`] on two threads: the walk on a second one (the
    /// walker, [`Ahead::walk`]), which also decodes the message blobs the
    /// walked nodes name, last first, while the parse on this one expands
    /// the nodes in order and decodes the blobs the walker has not reached;
    /// `false`, having read nothing, when no thread could be started.
    fn read_threaded<K: Keep>(
        &mut self,
        root: Option<ObjectId>,
        parts: &mut Vec<(ObjectId, u64, Vec<K::Of>)>,
    ) -> Result<bool> {
        let layout = self.layout;
        let ahead = std::sync::Arc::new(Ahead::default());
        let read = std::thread::scope(|scope| -> Result<bool> {
            let shared = &*ahead;
            // Made before the walker starts: were the parse to stop early
            // (an error, a panic), the walker is told and the scope ends.
            let stop = Stop(shared);
            let Ok(walker) = crate::par::spawn_scoped(scope, move || shared.walk(layout, root))
            else {
                return Ok(false);
            };
            self.ahead = Some(std::sync::Arc::clone(&ahead));
            // The walker reads ahead, so a node it failed on comes after
            // any the parse failed on: the parse's error first, as on one
            // thread; else the walk's (a missing node, say) stopped it.
            let read = loop {
                match shared.next_node() {
                    Ok((seq, part)) => {
                        let part = self.take_part::<K>(part);
                        shared.past(seq);
                        match part {
                            Ok(part) => parts.push(part),
                            Err(e) => break Err(e),
                        }
                    }
                    Err(end) => break end,
                }
            };
            drop(stop);
            walker
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            read.map(|()| true)
        });
        self.ahead = None;
        read
    }

    /// Parse a chain node read by the walker and expand its items; `prev`
    /// is what the walker took for its `prev`, checked here.
    fn expand_chain_node(
        &mut self,
        id: ObjectId,
        payload: Vec<u8>,
        prev: Option<ObjectId>,
    ) -> Result<(ObjectId, u64, Vec<Value>)> {
        if let Some(v) = self.expanded.get(&id) {
            // Sliced before, so expanded (and counted) already.
            let raw = RawNode::parse(&payload).map_err(|e| malformed(self.layout, &id, e))?;
            let v = Rc::clone(v);
            self.budget
                .charge(v.messages.len() as u64, *v.weights.last().unwrap_or(&0))?;
            return Ok((id, raw.count, v.messages.clone()));
        }
        self.budget.charge(0, payload.len() as u64)?;
        let (frame, raw) = self.frame(id, payload)?;
        if raw.prev != prev {
            return Err(malformed(self.layout, &id, NodeError::PrevNotLast));
        }
        let out = self.expand(frame)?;
        Ok((id, raw.count, out.messages))
    }
}

fn push(out: &mut Expanded, m: Value, w: u64) {
    let base = *out.weights.last().unwrap_or(&0);
    out.messages.push(m);
    out.weights.push(base + w);
}

/// The `prev` of a node's canonical JSON without parsing it: `prev` is its
/// last key, so the payload ends `"prev":null}` or `"prev":"<id>"}`.
/// (The full parse checks that it was read right.)
fn prev_of(payload: &[u8]) -> Option<Option<ObjectId>> {
    if payload.ends_with(b"\"prev\":null}") {
        return Some(None);
    }
    let tail = payload.strip_suffix(b"\"}")?;
    let hex = tail.get(tail.len().checked_sub(64)?..)?;
    let key = tail.get(..tail.len() - 64)?;
    if !key.ends_with(b"\"prev\":\"") {
        return None;
    }
    std::str::from_utf8(hex).ok()?.parse().ok().map(Some)
}

/// What the structural walk (gc's mark, fsck) learned of the nodes it read:
/// each node's shape, so that counts and slice bounds can be checked
/// without building messages.
#[derive(Default)]
pub(crate) struct Shapes {
    pub nodes: HashMap<ObjectId, Shape>,
}

impl Shapes {
    /// Check what the shapes say against each other: slices within the
    /// items of the nodes they name, and each chain node's count equal to
    /// its `prev`'s count plus its items. Nodes whose shape is unknown (not
    /// read: missing or corrupt, reported elsewhere) are skipped.
    pub fn check(&self, layout: &Odb, on_error: &mut dyn FnMut(Error) -> Result<()>) -> Result<()> {
        let mut ids: Vec<&ObjectId> = self.nodes.keys().collect();
        ids.sort();
        for id in ids {
            let shape = &self.nodes[id];
            for (src, from, to) in &shape.slices {
                if let Some(s) = self.nodes.get(src) {
                    if *to > s.items_len {
                        on_error(corrupt(
                            layout,
                            id,
                            format!("slice {from}..{to} of {src}, which holds {}", s.items_len),
                        ))?;
                    }
                }
            }
            let before = match shape.prev {
                None => Some(0),
                Some(p) => self.nodes.get(&p).map(|s| s.count),
            };
            if let Some(before) = before {
                if before.checked_add(shape.items_len) != Some(shape.count) {
                    on_error(corrupt(
                        layout,
                        id,
                        format!(
                            "list node says {} messages, its chain holds {}",
                            shape.count,
                            before.saturating_add(shape.items_len)
                        ),
                    ))?;
                }
            }
        }
        Ok(())
    }
}

/// Validate every inline message of node `id` (fsck); returns the blob
/// ids its items name, to be checked as messages.
pub(crate) fn validate_node_messages(layout: &Odb, id: &ObjectId) -> Result<Vec<ObjectId>> {
    let payload = crate::read::of_kind(layout, id, Kind::List, Cap::LIST)?;
    let raw = RawNode::parse(&payload).map_err(|e| malformed(layout, id, e))?;
    let mut blobs = Vec::new();
    for (index, (a, b)) in raw.items.iter().enumerate() {
        let item = parse_item(&payload[*a..*b])
            .map_err(|reason| malformed(layout, id, NodeError::Item { index, reason }))?;
        match item {
            Item::Inline(m) => message::validate(&m).map_err(|reason| Error::BadMessage {
                id: *id,
                path: layout.object_path(id),
                index,
                reason,
            })?,
            Item::Blob(b) => blobs.push(b),
            Item::Slice { .. } => {}
        }
    }
    Ok(blobs)
}

/// Check blob `b` as a stored message.
pub(crate) fn validate_blob_message(layout: &Odb, b: &ObjectId) -> Result<()> {
    let bytes = crate::read::of_kind(layout, b, Kind::Blob, Cap::MESSAGE)?;
    let m: Value = serde_json::from_slice(&bytes).map_err(|e| Error::BadMessage {
        id: *b,
        path: layout.object_path(b),
        index: 0,
        reason: message::MessageError::NotJson(e),
    })?;
    message::validate(&m).map_err(|reason| Error::BadMessage {
        id: *b,
        path: layout.object_path(b),
        index: 0,
        reason,
    })
}
