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
//! Here are the node's format, its parsers (whole, [`RawNode`] and
//! [`parse_item`], or by [`Shape`], which agree on what they refuse) and
//! the [`Limits`] a load counts against; hel-store's `list` module reads
//! lists with them, bounded whatever the store holds.

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::message;
use crate::object::Cap;
use crate::ObjectId;

/// Messages whose canonical JSON is at least this long are stored as blobs.
pub const INLINE_MAX: usize = 16 * 1024;

/// Inline bytes a writer puts in one node before storing further messages
/// as blobs, so that a node stays far below [`Cap::LIST`].
pub const NODE_INLINE_BUDGET: usize = 8 << 20;

/// How much conversation one load may build (objects-spec §4.2, "Limits").
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
/// load of it would refuse (objects-spec §4.2).
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
    pub fn over(&self, messages: u64, bytes: u64) -> Option<(&'static str, u64)> {
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
    pub node: ObjectId,
    pub index: u32,
}

/// One item of a node, its inline message as `M`: a JSON value ([`Item`]),
/// or another reading of it ([`parse_item_as`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ItemOf<M> {
    Inline(M),
    Blob(ObjectId),
    Slice { node: ObjectId, from: u64, to: u64 },
}

/// One item of a node, its inline message parsed.
pub type Item = ItemOf<Value>;

/// One node of the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub count: u64,
    pub items: Vec<Item>,
    pub prev: Option<ObjectId>,
}

impl Node {
    /// Canonical payload.
    pub fn to_payload(&self) -> Vec<u8> {
        let mut w = PayloadWriter::new(self.count);
        for item in &self.items {
            w.item(item);
        }
        w.finish(self.prev)
    }
}

/// A node's canonical payload written item by item, straight into one
/// buffer: no [`Node`] and no copy of its messages as JSON values. A commit
/// appends each new message as the canonical JSON it made anyway (to
/// choose inline or blob). Keys in canonical order: `count`, `items`,
/// `prev`; a slice's `from`, `s`, `to`.
pub struct PayloadWriter {
    out: Vec<u8>,
    items: usize,
}

impl PayloadWriter {
    /// A node of `count` messages through it, with no items yet.
    pub fn new(count: u64) -> PayloadWriter {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(b"{\"count\":");
        push_u64(&mut out, count);
        out.extend_from_slice(b",\"items\":[");
        PayloadWriter { out, items: 0 }
    }

    /// Items written so far.
    pub fn items(&self) -> usize {
        self.items
    }

    fn next(&mut self) {
        if self.items > 0 {
            self.out.push(b',');
        }
        self.items += 1;
    }

    /// An inline message given as its canonical JSON (the caller's
    /// promise: `canonical::to_vec` of a valid message).
    pub fn inline(&mut self, message: &[u8]) {
        self.next();
        self.out.extend_from_slice(b"{\"m\":");
        self.out.extend_from_slice(message);
        self.out.push(b'}');
    }

    pub fn item(&mut self, item: &Item) {
        match item {
            Item::Inline(m) => {
                self.next();
                self.out.extend_from_slice(b"{\"m\":");
                crate::canonical::write(m, &mut self.out);
                self.out.push(b'}');
            }
            Item::Blob(id) => {
                self.next();
                self.out.extend_from_slice(b"{\"b\":");
                push_id(&mut self.out, id);
                self.out.push(b'}');
            }
            Item::Slice { node, from, to } => {
                self.next();
                self.out.extend_from_slice(b"{\"from\":");
                push_u64(&mut self.out, *from);
                self.out.extend_from_slice(b",\"s\":");
                push_id(&mut self.out, node);
                self.out.extend_from_slice(b",\"to\":");
                push_u64(&mut self.out, *to);
                self.out.push(b'}');
            }
        }
    }

    /// The payload, with `prev` last.
    pub fn finish(mut self, prev: Option<ObjectId>) -> Vec<u8> {
        self.out.extend_from_slice(b"],\"prev\":");
        match prev {
            Some(p) => push_id(&mut self.out, &p),
            None => self.out.extend_from_slice(b"null"),
        }
        self.out.push(b'}');
        self.out
    }
}

fn push_u64(out: &mut Vec<u8>, n: u64) {
    use std::io::Write;
    // Decimal, as serde_json prints a u64; writing into a Vec cannot fail.
    let _ = write!(out, "{n}");
}

/// An id as a JSON string: lowercase hex, which needs no escape.
fn push_id(out: &mut Vec<u8>, id: &ObjectId) {
    out.push(b'"');
    id.push_hex(out);
    out.push(b'"');
}

/// Why a list node's payload is not a node. Its `Display` is what follows
/// "malformed list node: " in the error that names the node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
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
pub enum ItemError {
    #[error("{0}")]
    Json(#[source] serde_json::Error),
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
pub struct RawNode {
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
        // Its inline messages included: no object holds a key twice.
        crate::canonical::no_repeated_key(payload).map_err(NodeError::Json)?;
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
pub fn parse_item(raw: &[u8]) -> std::result::Result<Item, ItemError> {
    parse_item_as(raw)
}

/// [`parse_item`] with the inline message read as `M` (in the same pass:
/// search reads it as a borrowed view of its text). Accepts exactly what
/// [`parse_item`] accepts when `M` takes any JSON value.
pub fn parse_item_as<'a, M: Deserialize<'a>>(
    raw: &'a [u8],
) -> std::result::Result<ItemOf<M>, ItemError> {
    let de: ItemDe<M> = serde_json::from_slice(raw).map_err(ItemError::Json)?;
    de.item()
}

/// An item as serde reads it, straight into its parts: a message is built
/// once (as `M`), without an object around it to take it out of.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "M: Deserialize<'de>"))]
struct ItemDe<M = Value> {
    /// `Some(Null)` for `"m": null` (which validation refuses as a
    /// message), `None` when there is no `m`.
    #[serde(default = "absent", deserialize_with = "present")]
    m: Option<M>,
    #[serde(default, deserialize_with = "present")]
    b: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    s: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    from: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    to: Option<Value>,
}

/// A key that is present, whatever its value (null included).
pub fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> std::result::Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A key that is absent.
fn absent<T>() -> Option<T> {
    None
}

impl<M> ItemDe<M> {
    /// Exactly one of the three forms.
    fn item(self) -> std::result::Result<ItemOf<M>, ItemError> {
        let id = |v: &Value| -> std::result::Result<ObjectId, ItemError> {
            v.as_str()
                .and_then(|s| s.parse().ok())
                .ok_or(ItemError::BadId)
        };
        match (self.m, self.b, self.s, self.from, self.to) {
            (Some(m), None, None, None, None) => Ok(ItemOf::Inline(m)),
            (None, Some(b), None, None, None) => Ok(ItemOf::Blob(id(&b)?)),
            (None, None, Some(s), Some(from), Some(to)) => {
                let node = id(&s)?;
                let from = from.as_u64().ok_or(ItemError::BadSlice)?;
                let to = to.as_u64().ok_or(ItemError::BadSlice)?;
                if from >= to {
                    return Err(ItemError::EmptySlice);
                }
                Ok(ItemOf::Slice { node, from, to })
            }
            _ => Err(ItemError::NotOneForm),
        }
    }
}

/// Parse a node payload whole: its parts (as [`RawNode::parse`] gives them,
/// item ranges empty) and its items. Accepts exactly what [`RawNode::parse`]
/// and [`parse_item`] accept.
pub fn parse_whole(payload: &[u8]) -> std::result::Result<(RawNode, Vec<Item>), NodeError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Whole {
        count: u64,
        items: Vec<ItemDe>,
        prev: Prev,
    }
    let w: Whole = serde_json::from_slice(payload).map_err(NodeError::Json)?;
    let items = w
        .items
        .into_iter()
        .enumerate()
        .map(|(index, de)| {
            de.item()
                .map_err(|reason| NodeError::Item { index, reason })
        })
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

/// The shape of a node, read without building its inline messages (gc and
/// fsck). Accepts exactly what [`RawNode::parse`] and [`parse_item`] accept, but for the content
/// of inline messages, which [`message::validate`] judges.
#[derive(Debug, Default, Clone)]
pub struct Shape {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A node's payload as canonical JSON of the node built as a value:
    /// what the direct writer must spell byte for byte.
    fn via_value(n: &Node) -> Vec<u8> {
        let items: Vec<Value> = n
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
            "count": n.count,
            "items": items,
            "prev": n.prev.map(|p| p.to_hex()),
        }))
    }

    #[test]
    fn written_payload_is_canonical_json_of_the_node() {
        let a = ObjectId::of_canonical(b"blob 1\0a");
        let b = ObjectId::of_canonical(b"list 0\0");
        let m = json!({"role": "user", "content": "x\n\"é\u{1}", "z": [1, -2.5, null, true]});
        for prev in [None, Some(b)] {
            for items in [
                vec![],
                vec![Item::Inline(m.clone())],
                vec![
                    Item::Slice {
                        node: a,
                        from: 0,
                        to: u64::MAX,
                    },
                    Item::Inline(m.clone()),
                    Item::Blob(a),
                    Item::Inline(json!({})),
                ],
            ] {
                let n = Node {
                    count: 12_345,
                    items,
                    prev,
                };
                assert_eq!(n.to_payload(), via_value(&n));
            }
        }
        // An inline message given as its canonical bytes is the same item.
        let mut w = PayloadWriter::new(1);
        w.inline(&crate::canonical::to_vec(&m));
        assert_eq!(w.items(), 1);
        let n = Node {
            count: 1,
            items: vec![Item::Inline(m)],
            prev: None,
        };
        assert_eq!(w.finish(None), n.to_payload());
    }

    /// objects-spec/vectors.json's list nodes, parsed and written again,
    /// are their canonical bytes.
    #[test]
    fn list_vectors_write_back_exactly() {
        let doc: Value =
            serde_json::from_str(include_str!("../../../objects-spec/vectors.json")).unwrap();
        let mut seen = 0;
        for v in doc["vectors"].as_array().unwrap() {
            if v["kind"] != "list" {
                continue;
            }
            let canonical = v["canonical"].as_str().unwrap().as_bytes();
            let (raw, items) = parse_whole(canonical).unwrap();
            let n = Node {
                count: raw.count,
                items,
                prev: raw.prev,
            };
            assert_eq!(n.to_payload(), canonical, "{}", v["name"]);
            seen += 1;
        }
        assert!(seen >= 2);
    }
}
