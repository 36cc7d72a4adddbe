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
//!
//! It also knows the instruction in progress: where its user message is
//! and up to where it is complete (the user message, then each finished
//! tool round), so that an instruction that ends incomplete is cut back to
//! its last completed point wherever compaction moved it.

use hel_store::{Committed, Leaf};
use serde_json::{json, Value};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    messages: Vec<Value>,
    leaves: Vec<Option<Leaf>>,
    open: Option<Open>,
}

/// The instruction in progress.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Open {
    /// Where its user message is; None once compaction summarized it.
    start: Option<usize>,
    /// The end of its completed prefix.
    complete: usize,
}

/// The text of a message's content: a string, or the text parts of an
/// array of parts (what a reader shows of it).
pub fn content_text(m: &Value) -> String {
    match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn role(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
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

    /// How many of the messages are settled: all of them, or, while an
    /// instruction is open, those before its user message (what a record
    /// written in the middle of an instruction stores).
    pub fn settled_len(&self) -> usize {
        match self.open {
            Some(Open { start: Some(s), .. }) => s,
            _ => self.len(),
        }
    }

    /// The instruction in progress, from its user message on, and where
    /// that message is (None: no instruction is open, or compaction
    /// summarized its user message).
    pub fn open_messages(&self) -> Option<(usize, &[Value])> {
        let start = self.open?.start?;
        Some((start, self.messages.get(start..)?))
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Append a message (an answer, a tool result).
    pub fn push(&mut self, m: Value) {
        self.messages.push(m);
        self.leaves.push(None);
    }

    /// Start an instruction: append its user message. An instruction still
    /// open is taken as complete.
    pub fn begin_instruction(&mut self, text: &str) {
        self.push(json!({"role": "user", "content": text}));
        self.open = Some(Open {
            start: Some(self.len() - 1),
            complete: self.len(),
        });
    }

    /// Everything so far belongs to the instruction's completed part (a
    /// tool round finished).
    pub fn round_finished(&mut self) {
        let len = self.len();
        if let Some(open) = &mut self.open {
            open.complete = len;
        }
    }

    /// The instruction completed: all of it stays.
    pub fn finish_instruction(&mut self) {
        self.open = None;
    }

    /// The instruction ended incomplete: keep its completed part, every
    /// finished tool round with its user message, or nothing of it when no
    /// round finished. Returns whether its user message is gone with it.
    pub fn abandon_instruction(&mut self) -> bool {
        let Some(Open { start, complete }) = self.open.take() else {
            return false;
        };
        let (keep, gone) = match start {
            Some(s) if complete <= s + 1 => (s, true),
            _ => (complete, false),
        };
        self.messages.truncate(keep);
        self.leaves.truncate(keep);
        gone
    }

    /// Change message `i` in place (it is then a new message to the store).
    pub fn edit(&mut self, i: usize, change: impl FnOnce(&mut Value)) {
        if let Some(m) = self.messages.get_mut(i) {
            change(m);
            self.leaves[i] = None;
        }
    }

    /// Replace messages `start..end` by the one message `summary`
    /// (compaction). The instruction in progress follows: the summary
    /// counts as completed when part of the span was.
    pub fn summarize(&mut self, start: usize, end: usize, summary: Value) {
        let end = end.min(self.len());
        if start >= end {
            return;
        }
        self.messages.splice(start..end, [summary]);
        self.leaves.splice(start..end, [None]);
        let moved = |i: usize| i - end + start + 1;
        if let Some(open) = &mut self.open {
            open.start = open.start.filter(|&s| s < start || s >= end).map(|s| {
                if s >= end {
                    moved(s)
                } else {
                    s
                }
            });
            open.complete = if open.complete >= end {
                moved(open.complete)
            } else if open.complete > start {
                start + 1
            } else {
                open.complete
            };
        }
    }

    /// Make `system` the first message: replace a system message in front,
    /// or insert it. Returns whether anything changed.
    pub fn set_system(&mut self, system: Value) -> bool {
        match self.messages.first() {
            Some(m) if role(m) == Some("system") => {
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
                if let Some(open) = &mut self.open {
                    open.start = open.start.map(|s| s + 1);
                    open.complete += 1;
                }
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
        Conversation {
            messages,
            leaves,
            open: None,
        }
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
        Conversation {
            messages,
            leaves,
            open: None,
        }
    }
}
