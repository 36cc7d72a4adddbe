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

/// Reads lists, expanding each sliced node once, within a budget.
pub(crate) struct Reader<'a> {
    layout: &'a Odb,
    budget: Budget,
    expanded: HashMap<ObjectId, Rc<Expanded>>,
    /// Message blobs read and validated.
    blobs_read: HashSet<ObjectId>,
}

/// A chain node's id, the count it says, and what is kept of its messages.
type Part<T> = (ObjectId, u64, Vec<T>);

/// A chain node as the walk read it: its payload and what it took for its
/// `prev`.
struct ChainPart {
    id: ObjectId,
    payload: Vec<u8>,
    prev: Option<ObjectId>,
}

/// The walk of a chain backwards through `prev`: each node read,
/// decompressed and verified in turn.
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
            payload,
            prev: next,
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
        // before the parse.
        let bytes = crate::read::of_kind(self.layout, b, Kind::Blob, Cap::MESSAGE)?;
        let len = bytes.len() as u64;
        self.budget.charge(0, len)?;
        let parsed = hel_object::canonical::no_repeated_key(&bytes)
            .and_then(|()| serde_json::from_slice(&bytes))
            .map_err(|e| Error::BadMessage {
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
            let next = match frame.retry.take() {
                Some(item) => Some(item),
                None => self.next_item(&mut frame)?,
            };
            let Some(item) = next else {
                // This frame is done.
                self.budget.refund(frame.payload.len() as u64);
                let Some(parent) = stack.pop() else {
                    return Ok(frame.out);
                };
                in_progress.remove(&frame.id);
                let done = std::mem::replace(&mut frame, parent);
                self.expanded.insert(done.id, Rc::new(done.out));
                continue;
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
                        self.append_slice(&mut frame, &src, &node, from, to)?;
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

    /// The next item of `frame`, parsed; None when it has no more.
    fn next_item(&self, frame: &mut Frame) -> Result<Option<Item>> {
        match frame.items.pop() {
            None => Ok(None),
            Some(Pending::Parsed(item)) => Ok(Some(item)),
            Some(Pending::Raw(a, b)) => {
                parse_item(&frame.payload[a..b])
                    .map(Some)
                    .map_err(|reason| {
                        let index = frame.next;
                        malformed(self.layout, &frame.id, NodeError::Item { index, reason })
                    })
            }
        }
    }

    /// Append messages `from..to` of `src` (node `node`, expanded) to
    /// `frame`'s, counted against the budget.
    fn append_slice(
        &mut self,
        frame: &mut Frame,
        src: &Expanded,
        node: &ObjectId,
        from: u64,
        to: u64,
    ) -> Result<()> {
        let part = src
            .messages
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
        Ok(())
    }

    /// The whole list ending at `root`, which its snapshot says holds
    /// `count` messages: the chain walked backwards through `prev` (each
    /// node read, decompressed and verified in turn), each node parsed and
    /// expanded as the walk reaches it.
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
        // Newest first: (node, its count, its messages).
        let mut parts: Vec<Part<K::Of>> = Vec::new();
        let mut walk = Walk::new(root);
        while let Some(ChainPart { id, payload, prev }) = walk.next(self.layout)? {
            let (id, node_count, messages) = self.expand_chain_node(id, payload, prev)?;
            parts.push((id, node_count, K::keep(messages)));
        }
        self.join(parts, count)
    }

    /// The chain's nodes' messages (newest node first) joined oldest
    /// first, each node's count checked against what its chain holds.
    fn join<T>(&mut self, parts: Vec<Part<T>>, count: u64) -> Result<Resolved<T>> {
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

    /// Parse a chain node read by the walk and expand its items; `prev`
    /// is what the walk took for its `prev`, checked here.
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
    let m: Value = hel_object::canonical::no_repeated_key(&bytes)
        .and_then(|()| serde_json::from_slice(&bytes))
        .map_err(|e| Error::BadMessage {
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
