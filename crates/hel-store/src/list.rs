//! The message list: a chain of `list` nodes, oldest first through `prev`.
//!
//! A node is canonical JSON `{"count": N, "items": [...], "prev": id|null}`.
//! Its items are appended to the messages of `prev`, and `count` is the
//! length of the whole list through this node. An item is one of
//! - `{"m": <message>}`: a message stored inline (canonical JSON under
//!   [`INLINE_MAX`] bytes), compressed together with the node;
//! - `{"b": <blob id>}`: a larger message stored as its own blob, shared by
//!   every list that holds it;
//! - `{"s": <list id>, "from": a, "to": b}`: messages `a..b` of the items of
//!   another node (its items only, not its `prev`), so a list rewritten by
//!   compaction names the kept messages where they already are.
//!
//! A commit writes one node holding what is new; a fork writes none; a
//! compaction writes one node of slices and the summary. Ids are content
//! hashes, so a node can never (directly or not) refer to itself.

use std::collections::HashMap;
use std::rc::Rc;

use serde_json::{json, Map, Value};

use crate::layout::Layout;
use crate::object::{self, Kind};
use crate::{Error, ObjectId, Result};

/// Messages whose canonical JSON is at least this long are stored as blobs.
pub const INLINE_MAX: usize = 16 * 1024;

/// One item of a node.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Inline(Value),
    Blob(ObjectId),
    Slice { node: ObjectId, from: u64, to: u64 },
}

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

    fn parse(payload: &[u8]) -> std::result::Result<Node, String> {
        let mut v: Value = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
        let obj = v.as_object_mut().ok_or("not an object")?;
        let count = obj.get("count").and_then(Value::as_u64).ok_or("no count")?;
        let prev = match obj.get("prev") {
            Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.parse().map_err(|_| "bad prev")?),
            _ => return Err("bad prev".into()),
        };
        let Some(Value::Array(raw)) = obj.remove("items") else {
            return Err("no items".into());
        };
        let mut items = Vec::with_capacity(raw.len());
        for it in raw {
            let Value::Object(mut m) = it else {
                return Err("bad item".into());
            };
            items.push(parse_item(&mut m)?);
        }
        Ok(Node { count, items, prev })
    }
}

fn parse_item(m: &mut Map<String, Value>) -> std::result::Result<Item, String> {
    if let Some(msg) = m.remove("m") {
        return Ok(Item::Inline(msg));
    }
    let id = |v: Option<&Value>| -> std::result::Result<ObjectId, String> {
        v.and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| "bad id in item".to_owned())
    };
    if m.contains_key("b") {
        return Ok(Item::Blob(id(m.get("b"))?));
    }
    let node = id(m.get("s"))?;
    let from = m.get("from").and_then(Value::as_u64).ok_or("bad slice")?;
    let to = m.get("to").and_then(Value::as_u64).ok_or("bad slice")?;
    if from >= to {
        return Err("empty slice".into());
    }
    Ok(Item::Slice { node, from, to })
}

/// Read node `id`.
pub fn read_node(layout: &Layout, id: &ObjectId) -> Result<Node> {
    let payload = object::read_kind(layout, id, Kind::List)?;
    Node::parse(&payload).map_err(|reason| Error::Corrupt {
        id: *id,
        path: layout.object_path(id),
        reason: format!("malformed list node: {reason}"),
    })
}

/// What a node names, read without building its messages (for gc and fsck).
#[derive(Debug, Default)]
pub struct Refs {
    pub prev: Option<ObjectId>,
    pub blobs: Vec<ObjectId>,
    pub sliced: Vec<ObjectId>,
}

#[derive(serde::Deserialize)]
struct RawRefs {
    prev: Option<ObjectId>,
    items: Vec<RawItem>,
}

// Unknown fields, the inline messages among them, are skipped unparsed.
#[derive(serde::Deserialize)]
struct RawItem {
    #[serde(default)]
    b: Option<ObjectId>,
    #[serde(default)]
    s: Option<ObjectId>,
}

/// The ids node `id` names (its `prev`, blobs and sliced nodes).
pub fn read_refs(layout: &Layout, id: &ObjectId) -> Result<Refs> {
    let payload = object::read_kind(layout, id, Kind::List)?;
    let raw: RawRefs = serde_json::from_slice(&payload).map_err(|e| Error::Corrupt {
        id: *id,
        path: layout.object_path(id),
        reason: format!("malformed list node: {e}"),
    })?;
    let mut refs = Refs {
        prev: raw.prev,
        ..Refs::default()
    };
    for item in raw.items {
        refs.blobs.extend(item.b);
        refs.sliced.extend(item.s);
    }
    Ok(refs)
}

/// A node of a chain and the list length after it.
pub type ChainEnd = (ObjectId, usize);

/// Reads lists, expanding each node's items once.
pub struct Reader<'a> {
    layout: &'a Layout,
    expanded: HashMap<ObjectId, Rc<Vec<Value>>>,
}

impl<'a> Reader<'a> {
    pub fn new(layout: &'a Layout) -> Self {
        Reader {
            layout,
            expanded: HashMap::new(),
        }
    }

    /// The messages node `id` adds (its items, slices and blobs resolved).
    pub fn expand(&mut self, id: &ObjectId) -> Result<Rc<Vec<Value>>> {
        if let Some(v) = self.expanded.get(id) {
            return Ok(Rc::clone(v));
        }
        let node = read_node(self.layout, id)?;
        let v = Rc::new(self.expand_items(id, node.items)?);
        self.expanded.insert(*id, Rc::clone(&v));
        Ok(v)
    }

    fn expand_items(&mut self, id: &ObjectId, items: Vec<Item>) -> Result<Vec<Value>> {
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Item::Inline(m) => out.push(m),
                Item::Blob(b) => {
                    let bytes = object::read_kind(self.layout, &b, Kind::Blob)?;
                    out.push(serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
                        id: b,
                        path: self.layout.object_path(&b),
                        reason: format!("message is not JSON: {e}"),
                    })?);
                }
                Item::Slice { node, from, to } => {
                    let src = self.expand(&node)?;
                    let part =
                        src.get(from as usize..to as usize)
                            .ok_or_else(|| Error::Corrupt {
                                id: *id,
                                path: self.layout.object_path(id),
                                reason: format!(
                                    "slice {from}..{to} of {node} which holds {}",
                                    src.len()
                                ),
                            })?;
                    out.extend_from_slice(part);
                }
            }
        }
        Ok(out)
    }

    /// The whole list ending at `root`: the messages, and per node of the
    /// chain (oldest first) its id and the list length after it.
    ///
    /// The chain is walked backwards through `prev`, which needs each node
    /// read, decompressed and verified in turn; parsing and expanding the
    /// nodes runs beside that walk, on this thread, while a second thread
    /// walks.
    pub fn read_list(&mut self, root: Option<ObjectId>) -> Result<(Vec<Value>, Vec<ChainEnd>)> {
        let layout = self.layout;
        // Newest first: (node, its count, its messages).
        let mut parts: Vec<(ObjectId, u64, Vec<Value>)> = Vec::new();
        std::thread::scope(|scope| -> Result<()> {
            let (tx, rx) =
                std::sync::mpsc::sync_channel::<(ObjectId, Vec<u8>, Option<ObjectId>)>(256);
            let walker = scope.spawn(move || -> Result<()> {
                let mut next = root;
                while let Some(id) = next {
                    let payload = object::read_kind(layout, &id, Kind::List)?;
                    next = prev_of(&payload).ok_or_else(|| Error::Corrupt {
                        id,
                        path: layout.object_path(&id),
                        reason: "malformed list node: no prev".into(),
                    })?;
                    if tx.send((id, payload, next)).is_err() {
                        break; // the reader stopped on an error
                    }
                }
                Ok(())
            });
            let mut parsed = Ok(());
            for (id, payload, prev) in rx.iter() {
                match self.expand_payload(&id, &payload, prev) {
                    Ok(part) => parts.push(part),
                    Err(e) => {
                        parsed = Err(e);
                        break;
                    }
                }
            }
            drop(rx);
            let walked = walker
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            parsed.and(walked)
        })?;
        let mut messages = Vec::with_capacity(parts.first().map_or(0, |p| p.1 as usize));
        let mut ends = Vec::with_capacity(parts.len());
        for (id, count, part) in parts.into_iter().rev() {
            messages.extend(part);
            if messages.len() as u64 != count {
                return Err(Error::Corrupt {
                    id,
                    path: self.layout.object_path(&id),
                    reason: format!(
                        "list node says {count} messages, its chain holds {}",
                        messages.len()
                    ),
                });
            }
            ends.push((id, messages.len()));
        }
        Ok((messages, ends))
    }

    /// Parse a chain node read by the walker and expand its items; `prev`
    /// is what the walker took for its `prev`, checked here.
    fn expand_payload(
        &mut self,
        id: &ObjectId,
        payload: &[u8],
        prev: Option<ObjectId>,
    ) -> Result<(ObjectId, u64, Vec<Value>)> {
        let node = Node::parse(payload).map_err(|reason| Error::Corrupt {
            id: *id,
            path: self.layout.object_path(id),
            reason: format!("malformed list node: {reason}"),
        })?;
        if node.prev != prev {
            return Err(Error::Corrupt {
                id: *id,
                path: self.layout.object_path(id),
                reason: "malformed list node: prev is not its last key".into(),
            });
        }
        // Chain nodes are read once: expand without keeping a copy.
        let items = match self.expanded.get(id) {
            Some(v) => v.to_vec(),
            None => self.expand_items(id, node.items)?,
        };
        Ok((*id, node.count, items))
    }
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
