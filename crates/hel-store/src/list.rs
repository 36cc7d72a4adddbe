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

/// Bytes of chain nodes the walker may have handed over ahead of the
/// parser (one batch goes through whatever its size when nothing is in
/// flight); besides them, the walker holds the batch it is gathering, at
/// most [`BATCH_MAX`] and one node more.
const READ_AHEAD: u64 = 8 << 20;

/// The walker hands nodes over in batches of at least this many bytes
/// (nodes and their blobs as read), doubling up to [`BATCH_MAX`]: one
/// wake-up of the parser per batch rather than per node, which cost as
/// much as the overlap saved at 10,000 messages; small at first, so
/// that the parse starts soon.
const BATCH_FIRST: u64 = 64 << 10;
const BATCH_MAX: u64 = 1 << 20;

/// A count of bytes in flight between two threads, bounded: the producer
/// waits while it is over the bound (one item always goes through).
struct InFlight {
    bytes: std::sync::Mutex<u64>,
    freed: std::sync::Condvar,
}

impl InFlight {
    fn acquire(&self, n: u64) {
        let mut b = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        while *b > 0 && *b + n > READ_AHEAD {
            b = self.freed.wait(b).unwrap_or_else(|p| p.into_inner());
        }
        *b += n;
    }
    /// Bytes handed over and not yet taken.
    fn held(&self) -> u64 {
        *self.bytes.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn release(&self, n: u64) {
        let mut b = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        *b = b.saturating_sub(n);
        self.freed.notify_all();
    }
}

/// On drop, wakes a walker waiting for room, now that nobody reads.
struct Unblock<'a>(&'a InFlight);

impl Drop for Unblock<'_> {
    fn drop(&mut self) {
        self.0.release(u64::MAX);
    }
}

/// Reads lists, expanding each sliced node once, within a budget.
pub(crate) struct Reader<'a> {
    layout: &'a Odb,
    budget: Budget,
    expanded: HashMap<ObjectId, Rc<Expanded>>,
    /// Message blobs of the chain node being expanded, read ahead.
    prefetched: HashMap<ObjectId, Prefetched>,
    /// Message blobs read and validated.
    blobs_read: HashSet<ObjectId>,
}

/// A chain node as the walking thread hands it over: its payload, what it
/// took for its `prev`, the message blobs it names (read ahead), and the
/// bytes all that holds (a parsed blob counted by its bytes).
struct ChainPart {
    id: ObjectId,
    payload: Vec<u8>,
    prev: Option<ObjectId>,
    blobs: Vec<(ObjectId, Prefetched)>,
    size: u64,
}

/// A message blob read ahead: its verified bytes, or (when the walker was
/// ahead of the parse and the parse had work queued) already parsed, with
/// its length in bytes for the budget.
enum Prefetched {
    Bytes(Vec<u8>),
    Parsed(u64, std::result::Result<Value, serde_json::Error>),
}

/// The ids of a node's `{"b":"<id>"}` items, found by their canonical
/// bytes without parsing (a hint for reading ahead).
fn blob_items(payload: &[u8]) -> Vec<ObjectId> {
    const KEY: &[u8] = b"{\"b\":\"";
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(k) = memchr::memmem::find(&payload[at..], KEY) {
        let start = at + k + KEY.len();
        if let Some(hex) = payload.get(start..start + 64) {
            if payload.get(start + 64..start + 66) == Some(b"\"}") {
                if let Some(id) = std::str::from_utf8(hex).ok().and_then(|h| h.parse().ok()) {
                    out.push(id);
                }
            }
        }
        at = start;
    }
    out
}

/// Lists at least this long are read with the walk on a second thread,
/// overlapping decompression with parsing. Since the walker hands nodes
/// over in batches (one wake-up per batch, not per node) the crossover is
/// lower than the 2,000 first measured: on a quiet 2-core machine (resume
/// in process, `perf stat` means of 30 to 40 runs, alternating builds) the
/// thread takes a 1,001-message resume from 22.2 to 18.1 ms and a
/// 201-message one from 6.4 to 7.1 ms; 500 lies between the two and was
/// not measured itself. On a machine whose cores are all busy the thread
/// costs time instead (30 % at 10,000 messages, issue 24).
pub(crate) const THREADED_FROM: u64 = 500;

/// The walk of a chain backwards through `prev`: each node read,
/// decompressed and verified in turn, with the message blobs it names.
struct Walk {
    next: Option<ObjectId>,
    seen: HashSet<ObjectId>,
}

impl Walk {
    fn new(root: Option<ObjectId>) -> Walk {
        Walk {
            next: root,
            seen: HashSet::new(),
        }
    }

    /// The next node of the chain (newest first), or None past the oldest;
    /// with `parse`, its message blobs parsed too.
    fn next(&mut self, layout: &Odb, parse: bool) -> Result<Option<ChainPart>> {
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
        // Read (and verify) the node's message blobs here too, so the
        // parse only parses. A hint: the node is checked when it is
        // parsed, and a blob this could not read is read (and its error
        // told) there. Each blob once, and no more than READ_AHEAD bytes
        // of them: a hostile node naming one huge blob a million times
        // must not become a million copies here.
        let mut blobs = Vec::new();
        let mut seen = HashSet::new();
        let mut size = payload.len() as u64;
        for b in blob_items(&payload) {
            if size >= READ_AHEAD {
                break;
            }
            if !seen.insert(b) {
                continue;
            }
            if let Ok(bytes) = crate::read::of_kind(layout, &b, Kind::Blob, Cap::MESSAGE) {
                size += bytes.len() as u64;
                let blob = match parse {
                    true => Prefetched::Parsed(bytes.len() as u64, serde_json::from_slice(&bytes)),
                    false => Prefetched::Bytes(bytes),
                };
                blobs.push((b, blob));
            }
        }
        Ok(Some(ChainPart {
            id,
            payload,
            prev: next,
            blobs,
            size,
        }))
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
            prefetched: HashMap::new(),
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
        let blob = match self.prefetched.remove(b) {
            Some(blob) => blob,
            None => Prefetched::Bytes(crate::read::of_kind(
                self.layout,
                b,
                Kind::Blob,
                Cap::MESSAGE,
            )?),
        };
        let (len, parsed) = match blob {
            Prefetched::Parsed(len, parsed) => {
                self.budget.charge(0, len)?;
                (len, parsed)
            }
            Prefetched::Bytes(bytes) => {
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
        // A short list is walked and parsed on this thread (handing each
        // node to another costs more than it saves), and so is a long one
        // when no second thread is to be had (a process or container limit).
        if !(count >= THREADED_FROM && self.read_threaded::<K>(root, &mut parts)?) {
            let mut walk = Walk::new(root);
            while let Some(part) = walk.next(layout, false)? {
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
            id,
            payload,
            prev,
            blobs,
            size: _,
        } = part;
        self.prefetched.extend(blobs);
        let part = self.expand_chain_node(id, payload, prev);
        self.prefetched.clear();
        part.map(|(id, count, messages)| (id, count, K::keep(messages)))
    }

    /// [`Reader::read_list`]'s walk on a second thread, never more than
    /// [`READ_AHEAD`] bytes ahead of the parse on this one; `false`, having
    /// read nothing, when no thread could be started.
    fn read_threaded<K: Keep>(
        &mut self,
        root: Option<ObjectId>,
        parts: &mut Vec<(ObjectId, u64, Vec<K::Of>)>,
    ) -> Result<bool> {
        let layout = self.layout;
        let in_flight = InFlight {
            bytes: std::sync::Mutex::new(0),
            freed: std::sync::Condvar::new(),
        };
        std::thread::scope(|scope| -> Result<bool> {
            let in_flight = &in_flight;
            // Made before the channel, so that, were the parse to panic,
            // the receiver goes first and then a walker waiting for room
            // is woken to find it gone (not left waiting, the scope with it).
            let unblock = Unblock(in_flight);
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<ChainPart>>(16);
            let walker = crate::par::spawn_scoped(scope, move || -> Result<()> {
                if crate::failpoint::hit("list-walker") {
                    return Err(Error::Internal("failpoint list-walker".into()));
                }
                let mut walk = Walk::new(root);
                let mut batch = Vec::new();
                let mut bytes = 0;
                let mut target = BATCH_FIRST;
                // Counted in flight when handed over, so that a walker
                // waiting for room holds nothing the parse waits for.
                let send = |batch: Vec<ChainPart>, bytes: u64| {
                    in_flight.acquire(bytes);
                    tx.send(batch).is_ok()
                };
                loop {
                    // When the parse has a batch or more waiting, it is
                    // the slower side: the walker parses the blobs too
                    // (the failpoint makes it always do so, for tests).
                    let parse =
                        in_flight.held() >= BATCH_MAX || crate::failpoint::hit("list-walker-parse");
                    let part = match walk.next(layout, parse) {
                        Ok(Some(part)) => part,
                        Ok(None) => break,
                        Err(e) => {
                            // The nodes before the one it failed on are
                            // parsed first (their error comes first).
                            send(batch, bytes);
                            return Err(e);
                        }
                    };
                    bytes += part.size;
                    batch.push(part);
                    if bytes >= target {
                        if !send(std::mem::take(&mut batch), bytes) {
                            return Ok(()); // the reader stopped on an error
                        }
                        bytes = 0;
                        target = (target * 2).min(BATCH_MAX);
                    }
                }
                if !batch.is_empty() {
                    send(batch, bytes);
                }
                Ok(())
            });
            let Ok(walker) = walker else {
                return Ok(false);
            };
            let mut parsed = Ok(());
            'batches: for batch in rx.iter() {
                for part in batch {
                    let size = part.size;
                    let part = self.take_part::<K>(part);
                    in_flight.release(size);
                    match part {
                        Ok(part) => parts.push(part),
                        Err(e) => {
                            parsed = Err(e);
                            break 'batches;
                        }
                    }
                }
            }
            drop(rx);
            drop(unblock);
            let walked = walker
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            // The walker reads ahead, so a node it failed on comes after
            // any the parse failed on: the parse's error first, as on one
            // thread; else the walk's (a missing node, say) stopped it.
            parsed.and(walked).map(|()| true)
        })
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
