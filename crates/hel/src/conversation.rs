//! The conversation: the messages the model will be sent next, and for each
//! one where the session's last checkpoint stores it (its [`Leaf`]), so the
//! next commit names unchanged messages where they are instead of writing
//! them again.
//!
//! The messages can only be changed through the methods here, and each one
//! keeps the bookkeeping right by construction: a message that is new or
//! changed has no leaf; a message moved within the list keeps its own. The
//! store checks every leaf it is handed against the checkpoint before a
//! commit, so a bookkeeping slip is refused rather than saved.

use hel_store::{Committed, Leaf};
use serde_json::Value;

#[derive(Debug, Clone, Default)]
pub struct Conversation {
    messages: Vec<Value>,
    leaves: Vec<Option<Leaf>>,
}

impl Conversation {
    pub fn new() -> Conversation {
        Conversation::default()
    }

    /// What the model will be sent next.
    pub fn messages(&self) -> &[Value] {
        &self.messages
    }

    /// Per message, where the last checkpoint stores it (None: not stored
    /// there as it is now).
    pub fn leaves(&self) -> &[Option<Leaf>] {
        &self.leaves
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Append a new message.
    pub fn push(&mut self, m: Value) {
        self.messages.push(m);
        self.leaves.push(None);
    }

    /// Keep the first `len` messages (an incomplete instruction is cut back
    /// to its last completed point).
    pub fn truncate(&mut self, len: usize) {
        self.messages.truncate(len);
        self.leaves.truncate(len);
    }

    /// Change message `i` in place (it is then a new message to the store).
    pub fn edit(&mut self, i: usize, change: impl FnOnce(&mut Value)) {
        if let Some(m) = self.messages.get_mut(i) {
            change(m);
            self.leaves[i] = None;
        }
    }

    /// Replace messages `start..end` by `with` (compaction's summary).
    pub fn splice(&mut self, start: usize, end: usize, with: Vec<Value>) {
        let n = with.len();
        self.messages.splice(start..end, with);
        self.leaves.splice(start..end, std::iter::repeat_n(None, n));
    }

    /// Make `system` the first message: replace a system message in front,
    /// or insert it. Returns whether anything changed.
    pub fn set_system(&mut self, system: Value) -> bool {
        match self.messages.first() {
            Some(m) if m.get("role").and_then(Value::as_str) == Some("system") => {
                if *m == system {
                    return false;
                }
                self.messages[0] = system;
                self.leaves[0] = None;
                true
            }
            _ => {
                self.messages.insert(0, system);
                self.leaves.insert(0, None);
                true
            }
        }
    }

    /// The conversation of a loaded checkpoint, every message where the
    /// checkpoint stores it.
    pub fn restored(messages: Vec<Value>, leaves: &[Leaf]) -> Conversation {
        let leaves = if leaves.len() == messages.len() {
            leaves.iter().copied().map(Some).collect()
        } else {
            vec![None; messages.len()]
        };
        Conversation { messages, leaves }
    }

    /// Take in what a commit stored: the messages it wrote anew now have
    /// their leaves.
    pub fn committed(&mut self, c: &Committed) {
        for (k, leaf) in c.new_leaves.iter().enumerate() {
            if let Some(slot) = self.leaves.get_mut(c.leaves_from + k) {
                *slot = Some(*leaf);
            }
        }
    }
}

impl From<Vec<Value>> for Conversation {
    /// A conversation of messages none of which is stored yet.
    fn from(messages: Vec<Value>) -> Conversation {
        let leaves = vec![None; messages.len()];
        Conversation { messages, leaves }
    }
}
