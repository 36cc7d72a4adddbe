//! The message list: a chain of `list` nodes, oldest first through `prev`.
//!
//! A node is canonical JSON `{"count": N, "items": [...], "prev": id|null}`
//! and nothing else. Its items are appended to the messages of `prev`, and
//! `count` is the length of the whole list through this node. An item is
//! exactly one of
//! - `{"m": <message>}`: a message stored inline (canonical JSON under
//!   [`INLINE_MAX`] bytes), compressed together with the node;
//! - `{"b": <blob id>}`: a larger message stored as its own blob, shared by
//!   every list that holds it;
//! - `{"s": <list id>, "from": a, "to": b}`, `a < b`: messages `a..b` of the
//!   items of another node (its items only, not its `prev`), so a list
//!   rewritten by compaction names the kept messages where they already are.
//!
//! A commit writes one node holding what is new; a fork writes none; a
//! compaction writes one node of slices and the summary. Ids are content
//! hashes, so a node can never (directly or not) refer to itself.
//!
//! Reading is bounded whatever the store holds: slices are resolved with an
//! explicit stack (no recursion as deep as the nesting), every message and
//! every node payload in memory is counted against [`Limits`], and each
//! distinct node is read once.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::message;
use crate::object::{Cap, Kind};
use crate::odb::Odb;
use crate::{Error, ObjectId, Result};

/// Messages whose canonical JSON is at least this long are stored as blobs.
pub const INLINE_MAX: usize = 16 * 1024;

/// Inline bytes a writer puts in one node before storing further messages
/// as blobs, so that a node stays far below [`Cap::LIST`].
pub(crate) const NODE_INLINE_BUDGET: usize = 8 << 20;

/// How much conversation one load may build (objects-spec §4, "Limits").
/// A conversation bigger than this cannot be sent to any model; a store
/// that describes one is refused before it can exhaust memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Messages in the list, and in the nodes its slices read.
    pub max_messages: u64,
    /// Memory the messages and node payloads may take, as
    /// [`message::weight`] counts it.
    pub max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_messages: 500_000,
            max_bytes: 128 << 20,
        }
    }
}

/// What a conversation would be over, were a message to join it: what a
/// load of it would refuse (objects-spec §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OverLimit {
    /// The message's canonical JSON is over what one message may hold
    /// ([`Cap::MESSAGE`]).
    #[error("a message of {size} bytes (at most {max})")]
    Message { size: u64, max: u64 },
    /// The conversation would hold more than `limit` `what` ("messages",
    /// "bytes of messages").
    #[error("more than {limit} {what}")]
    Conversation { what: &'static str, limit: u64 },
}

impl Limits {
    /// What `messages` messages weighing `bytes` ([`message::weight`])
    /// are over, as (what, limit), or None when they fit: the one test of
    /// a load's budget, and of a reply on receipt.
    fn over(&self, messages: u64, bytes: u64) -> Option<(&'static str, u64)> {
        if messages > self.max_messages {
            Some(("messages", self.max_messages))
        } else if bytes > self.max_bytes {
            Some(("bytes of messages", self.max_bytes))
        } else {
            None
        }
    }

    /// Whether `message` may join `conversation` and the result still load:
    /// the message within what one stored message may hold, and the
    /// messages of the whole counted as a load counts them (their number
    /// and [`message::weight`]) within these limits. A model's reply is
    /// checked with this before it joins the conversation, so that one
    /// reply can never make a session that cannot be loaded again.
    /// (Whether it is a valid message is [`message::validate`]'s to say.)
    pub fn admit(
        &self,
        conversation: &[Value],
        message: &Value,
    ) -> std::result::Result<(), OverLimit> {
        let size = crate::canonical::to_vec(message).len() as u64;
        if size > Cap::MESSAGE.max {
            return Err(OverLimit::Message {
                size,
                max: Cap::MESSAGE.max,
            });
        }
        let bytes = conversation
            .iter()
            .chain(std::iter::once(message))
            .fold(0u64, |sum, m| sum.saturating_add(message::weight(m)));
        match self.over(conversation.len() as u64 + 1, bytes) {
            Some((what, limit)) => Err(OverLimit::Conversation { what, limit }),
            None => Ok(()),
        }
    }
}

/// Where a message is stored: the node whose items hold it, and its index
/// among that node's (resolved) items. A conversation keeps each message's
/// leaf so the next commit can name unchanged messages where they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Leaf {
    pub(crate) node: ObjectId,
    pub(crate) index: u32,
}

/// One item of a node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item {
    Inline(Value),
    Blob(ObjectId),
    Slice { node: ObjectId, from: u64, to: u64 },
}

/// One node of the chain.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub count: u64,
    pub items: Vec<Item>,
    pub prev: Option<ObjectId>,
}

impl Node {
    /// Canonical payload.
    pub fn to_payload(&self) -> Vec<u8> {
        let items: Vec<Value> = self
            .items
            .iter()
            .map(|i| match i {
                Item::Inline(m) => json!({"m": m}),
                Item::Blob(id) => json!({"b": id.to_hex()}),
                Item::Slice { node, from, to } => {
                    json!({"s": node.to_hex(), "from": from, "to": to})
                }
            })
            .collect();
        crate::canonical::to_vec(&json!({
            "count": self.count,
            "items": items,
            "prev": self.prev.map(|p| p.to_hex()),
        }))
    }
}

/// Why a list node's payload is not a node. Its `Display` is what follows
/// "malformed list node: " in the error that names the node.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NodeError {
    /// Not JSON, or not exactly the keys `count`, `items`, `prev` with
    /// their types (serde's description, with line and column).
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    /// Item `index` (counted in the node's own items) is malformed.
    #[error("item {index}: {reason}")]
    Item {
        index: usize,
        #[source]
        reason: ItemError,
    },
    /// The payload does not end with a `prev` (read before parsing).
    #[error("no prev")]
    NoPrev,
    /// The `prev` read from the payload's end is not the one it holds.
    #[error("prev is not its last key")]
    PrevNotLast,
}

/// Why one item of a list node is not exactly one of the three forms.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ItemError {
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    #[error("an item is not an object")]
    NotAnObject,
    #[error("bad id in item")]
    BadId,
    /// A slice whose `from` or `to` is not an unsigned integer.
    #[error("bad slice")]
    BadSlice,
    /// A slice with `from >= to`.
    #[error("empty slice")]
    EmptySlice,
    #[error("an item is exactly one of {{m}}, {{b}}, {{s, from, to}}")]
    NotOneForm,
}

/// A node's payload split into its parts without building any message:
/// `count`, `prev`, and the byte range of each item in the payload. Exactly
/// the keys `count`, `items`, `prev`; the items are parsed one at a time by
/// [`parse_item`], so a node with a million tiny items costs a million
/// ranges, not a million messages, before the budget is asked.
pub(crate) struct RawNode {
    pub count: u64,
    pub prev: Option<ObjectId>,
    pub items: Vec<(usize, usize)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNodeDe<'a> {
    count: u64,
    #[serde(borrow)]
    items: Vec<&'a RawValue>,
    prev: Prev,
}

impl RawNode {
    /// Split `payload` into its parts; `Err` when it is not JSON with
    /// exactly a node's keys (the items themselves are not looked at).
    pub fn parse(payload: &[u8]) -> std::result::Result<RawNode, NodeError> {
        let de: RawNodeDe<'_> = serde_json::from_slice(payload).map_err(NodeError::Json)?;
        let base = payload.as_ptr() as usize;
        let items = de
            .items
            .iter()
            .map(|raw| {
                let start = raw.get().as_ptr() as usize - base;
                (start, start + raw.get().len())
            })
            .collect();
        Ok(RawNode {
            count: de.count,
            prev: de.prev.0,
            items,
        })
    }
}

/// Parse one item's JSON: exactly one of the three forms.
pub(crate) fn parse_item(raw: &[u8]) -> std::result::Result<Item, ItemError> {
    let v: Value = serde_json::from_slice(raw).map_err(ItemError::Json)?;
    item_of(v)
}

/// Parse a node payload whole: its parts (as [`RawNode::parse`] gives them,
/// item ranges empty) and its items. Accepts exactly what [`RawNode::parse`]
/// and [`parse_item`] accept.
fn parse_whole(payload: &[u8]) -> std::result::Result<(RawNode, Vec<Item>), NodeError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Whole {
        count: u64,
        items: Vec<Value>,
        prev: Prev,
    }
    let w: Whole = serde_json::from_slice(payload).map_err(NodeError::Json)?;
    let items = w
        .items
        .into_iter()
        .enumerate()
        .map(|(index, v)| item_of(v).map_err(|reason| NodeError::Item { index, reason }))
        .collect::<std::result::Result<Vec<Item>, NodeError>>()?;
    Ok((
        RawNode {
            count: w.count,
            prev: w.prev.0,
            items: Vec::new(),
        },
        items,
    ))
}

/// An item from its parsed JSON.
fn item_of(v: Value) -> std::result::Result<Item, ItemError> {
    let Value::Object(mut m) = v else {
        return Err(ItemError::NotAnObject);
    };
    let id = |v: Option<&Value>| -> std::result::Result<ObjectId, ItemError> {
        v.and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .ok_or(ItemError::BadId)
    };
    match m.len() {
        1 if m.contains_key("m") => Ok(Item::Inline(m.remove("m").unwrap_or(Value::Null))),
        1 if m.contains_key("b") => Ok(Item::Blob(id(m.get("b"))?)),
        3 if m.contains_key("s") => {
            let node = id(m.get("s"))?;
            let from = m
                .get("from")
                .and_then(Value::as_u64)
                .ok_or(ItemError::BadSlice)?;
            let to = m
                .get("to")
                .and_then(Value::as_u64)
                .ok_or(ItemError::BadSlice)?;
            if from >= to {
                return Err(ItemError::EmptySlice);
            }
            Ok(Item::Slice { node, from, to })
        }
        _ => Err(ItemError::NotOneForm),
    }
}

/// The shape of a node, read without building its inline messages (gc and
/// fsck). Accepts exactly what [`RawNode::parse`] and [`parse_item`] accept, but for the content
/// of inline messages, which [`message::validate`] judges.
#[derive(Debug, Default, Clone)]
pub(crate) struct Shape {
    pub count: u64,
    pub prev: Option<ObjectId>,
    /// Messages the items resolve to.
    pub items_len: u64,
    pub blobs: Vec<ObjectId>,
    /// (node, from, to) of each slice.
    pub slices: Vec<(ObjectId, u64, u64)>,
}

/// `prev`, which must be present (null or an id).
struct Prev(Option<ObjectId>);

impl<'de> Deserialize<'de> for Prev {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Option::<ObjectId>::deserialize(d).map(Prev)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShape {
    count: u64,
    items: Vec<RawItem>,
    prev: Prev,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawItem {
    #[serde(default)]
    m: Option<IgnoredAny>,
    #[serde(default)]
    b: Option<ObjectId>,
    #[serde(default)]
    s: Option<ObjectId>,
    #[serde(default)]
    from: Option<u64>,
    #[serde(default)]
    to: Option<u64>,
}

impl Shape {
    /// The shape of `payload`; `Err` exactly when [`RawNode::parse`] or
    /// [`parse_item`] of an item would refuse it.
    pub fn parse(payload: &[u8]) -> std::result::Result<Shape, NodeError> {
        let raw: RawShape = serde_json::from_slice(payload).map_err(NodeError::Json)?;
        let mut shape = Shape {
            count: raw.count,
            prev: raw.prev.0,
            ..Shape::default()
        };
        for (index, it) in raw.items.into_iter().enumerate() {
            let refuse = |reason| NodeError::Item { index, reason };
            match (it.m, it.b, it.s, it.from, it.to) {
                (Some(_), None, None, None, None) => shape.items_len += 1,
                (None, Some(b), None, None, None) => {
                    shape.items_len += 1;
                    shape.blobs.push(b);
                }
                (None, None, Some(s), Some(from), Some(to)) if from < to => {
                    shape.items_len += to - from;
                    shape.slices.push((s, from, to));
                }
                (None, None, Some(_), Some(_), Some(_)) => {
                    return Err(refuse(ItemError::EmptySlice))
                }
                _ => return Err(refuse(ItemError::NotOneForm)),
            }
        }
        Ok(shape)
    }
}

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

/// The resolved list of a checkpoint, and per node of its chain (oldest
/// first) the node id and the list length after it.
pub(crate) struct Resolved {
    pub messages: Vec<Value>,
    pub chain: Vec<(ObjectId, usize)>,
}

/// Bytes of chain nodes the walker may have read ahead of the parser.
const READ_AHEAD: u64 = 8 << 20;

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
    fn release(&self, n: u64) {
        let mut b = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        *b = b.saturating_sub(n);
        self.freed.notify_all();
    }
}

/// Reads lists, expanding each sliced node once, within a budget.
pub(crate) struct Reader<'a> {
    layout: &'a Odb,
    budget: Budget,
    expanded: HashMap<ObjectId, Rc<Expanded>>,
    /// Message blobs of the chain node being expanded, read ahead.
    prefetched: HashMap<ObjectId, Vec<u8>>,
}

/// A chain node as the walking thread hands it over: its payload, what it
/// took for its `prev`, the message blobs it names (read ahead), and the
/// bytes all that holds.
struct ChainPart {
    id: ObjectId,
    payload: Vec<u8>,
    prev: Option<ObjectId>,
    blobs: Vec<(ObjectId, Vec<u8>)>,
    size: u64,
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
        let bytes = match self.prefetched.remove(b) {
            Some(bytes) => bytes,
            None => crate::read::of_kind(self.layout, b, Kind::Blob, Cap::MESSAGE)?,
        };
        // The blob's bytes are in memory while it is parsed.
        self.budget.charge(0, bytes.len() as u64)?;
        let parsed = serde_json::from_slice(&bytes).map_err(|e| Error::BadMessage {
            id: *b,
            path: self.layout.object_path(b),
            index: 0,
            reason: message::MessageError::NotJson(e),
        });
        self.budget.refund(bytes.len() as u64);
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
    /// read, decompressed and verified in turn; parsing and expanding the
    /// nodes runs beside that walk, on this thread, while a second thread
    /// walks (never more than [`READ_AHEAD`] bytes ahead).
    pub fn read_list(&mut self, root: Option<ObjectId>, count: u64) -> Result<Resolved> {
        if count > self.budget.limits.max_messages {
            return Err(Error::ConversationTooLarge {
                checkpoint: self.budget.checkpoint,
                what: "messages",
                limit: self.budget.limits.max_messages,
            });
        }
        let layout = self.layout;
        let in_flight = InFlight {
            bytes: std::sync::Mutex::new(0),
            freed: std::sync::Condvar::new(),
        };
        // Newest first: (node, its count, its messages).
        let mut parts: Vec<(ObjectId, u64, Vec<Value>)> = Vec::new();
        std::thread::scope(|scope| -> Result<()> {
            let (tx, rx) = std::sync::mpsc::sync_channel::<ChainPart>(256);
            let in_flight = &in_flight;
            let walker = scope.spawn(move || -> Result<()> {
                let mut next = root;
                let mut seen = HashSet::new();
                while let Some(id) = next {
                    if !seen.insert(id) {
                        return Err(corrupt(
                            layout,
                            &id,
                            "the chain leads back to this node".into(),
                        ));
                    }
                    let payload = crate::read::of_kind(layout, &id, Kind::List, Cap::LIST)?;
                    next = prev_of(&payload)
                        .ok_or_else(|| malformed(layout, &id, NodeError::NoPrev))?;
                    // Read (and verify) the node's message blobs here too,
                    // so the parsing thread only parses. A hint: the node
                    // is checked when it is parsed, and a blob this could
                    // not read is read (and its error told) there.
                    // Each blob once, and no more than READ_AHEAD bytes of
                    // them: a hostile node naming one huge blob a million
                    // times must not become a million copies here.
                    let mut blobs = Vec::new();
                    let mut seen = std::collections::HashSet::new();
                    let mut size = payload.len() as u64;
                    for b in blob_items(&payload) {
                        if size >= READ_AHEAD {
                            break;
                        }
                        if !seen.insert(b) {
                            continue;
                        }
                        if let Ok(bytes) =
                            crate::read::of_kind(layout, &b, Kind::Blob, Cap::MESSAGE)
                        {
                            size += bytes.len() as u64;
                            blobs.push((b, bytes));
                        }
                    }
                    in_flight.acquire(size);
                    let part = ChainPart {
                        id,
                        payload,
                        prev: next,
                        blobs,
                        size,
                    };
                    if tx.send(part).is_err() {
                        break; // the reader stopped on an error
                    }
                }
                Ok(())
            });
            let mut parsed = Ok(());
            for ChainPart {
                id,
                payload,
                prev,
                blobs,
                size,
            } in rx.iter()
            {
                self.prefetched.extend(blobs);
                let part = self.expand_chain_node(id, payload, prev);
                self.prefetched.clear();
                in_flight.release(size);
                match part {
                    Ok(part) => parts.push(part),
                    Err(e) => {
                        parsed = Err(e);
                        break;
                    }
                }
            }
            drop(rx);
            // Unblock a walker waiting for room, now that nobody reads.
            in_flight.release(u64::MAX);
            let walked = walker
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            // A walk error (a missing node, say) is what stopped the parse.
            walked.and(parsed)
        })?;
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
        Ok(Resolved { messages, chain })
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
