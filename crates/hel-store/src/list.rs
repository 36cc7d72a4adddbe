//! The message list: a chain of `list` nodes, newest last.
//!
//! A node is canonical JSON `{"count": N, "items": [blob ids…], "prev": id|null}`:
//! `items` are the message blobs this node adds after the messages of
//! `prev`, and `count` is the length of the whole list up to and including
//! this node. Appending k messages writes one node of k ids, whatever the
//! list's length; a rewrite of history (compaction) starts a new chain whose
//! first node names the kept messages' existing blobs, so nothing is copied
//! and reading never walks history that the list no longer holds.

use serde::{Deserialize, Serialize};

use crate::layout::Layout;
use crate::object::{self, Kind};
use crate::{Error, ObjectId, Result};

/// One node of the chain.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub count: u64,
    pub items: Vec<ObjectId>,
    pub prev: Option<ObjectId>,
}

impl Node {
    pub fn to_payload(&self) -> Vec<u8> {
        // Serializing a plain struct to a Value cannot fail.
        crate::canonical::to_vec(&serde_json::to_value(self).unwrap_or_default())
    }
}

/// Read node `id`.
pub fn read_node(layout: &Layout, id: &ObjectId) -> Result<Node> {
    let payload = object::read_kind(layout, id, Kind::List)?;
    serde_json::from_slice(&payload).map_err(|e| Error::Corrupt {
        id: *id,
        path: layout.object_path(id),
        reason: format!("malformed list node: {e}"),
    })
}

/// The chain ending at `root`, oldest node first, each with its id.
/// Verifies that every node's count adds up.
pub fn read_chain(layout: &Layout, root: Option<ObjectId>) -> Result<Vec<(ObjectId, Node)>> {
    let mut chain = Vec::new();
    let mut next = root;
    while let Some(id) = next {
        let node = read_node(layout, &id)?;
        next = node.prev;
        chain.push((id, node));
    }
    chain.reverse();
    let mut count = 0u64;
    for (id, node) in &chain {
        count += node.items.len() as u64;
        if node.count != count {
            return Err(Error::Corrupt {
                id: *id,
                path: layout.object_path(id),
                reason: format!(
                    "list node says {} messages, its chain holds {count}",
                    node.count
                ),
            });
        }
    }
    Ok(chain)
}
