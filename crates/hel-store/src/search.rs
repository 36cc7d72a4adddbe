//! Search: a regular expression over the conversations of every session.
//!
//! For each session the conversation at its newest checkpoint is walked
//! (its list chain, slices resolved); each distinct stored message is
//! decompressed and scanned once however many checkpoints, sessions or
//! forks share it: an inline message with the node that holds it (each
//! node is read once), a large message as its blob (each blob once). A
//! message is then reported once per session whose conversation holds it,
//! with the checkpoint where it first appeared in that session's history
//! (the checkpoint whose commit stored it, possibly before a fork).
//!
//! The system prompt is not searched (every session has one), nor the
//! notes hel adds to a user message (lines `[hel: …]`). Everything
//! read is bounded as a load bounds it (objects' caps, the store's
//! [`crate::Limits`] on a conversation's length); a broken object is
//! reported against the session that names it, and the others are still
//! searched.
//!
//! The same walk takes any [`Matcher`] ([`Walk`]): the secrets scan of
//! `hel sessions scan` and of every way out walks a whole history (every
//! checkpoint's list back to the nodes an older one reached, each node
//! once) or only what a push sends.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;

use crate::list::{malformed, parse_item_as, ItemOf, RawNode};
use crate::object::{Cap, Kind};
use crate::odb::Odb;
use crate::{Error, ObjectId, Result, SessionId, Store};

/// Characters of the matching line an excerpt keeps at most.
pub const EXCERPT_MAX: usize = 160;

/// Items of list nodes kept read across sessions (a few hundred MB at
/// most). Past it the cache starts over: a hostile store can make a search
/// read nodes again, never hold more.
const CACHE_ITEMS: u64 = 4_000_000;

/// A message that matches.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The checkpoint where the message first appeared.
    pub checkpoint: ObjectId,
    /// Its position in the conversation at the session's newest checkpoint.
    pub index: usize,
    pub role: String,
    /// The line of the first match, cut to [`EXCERPT_MAX`] characters around
    /// it. Stored text: the caller escapes it before it reaches a terminal.
    pub excerpt: String,
}

/// A session whose conversation matches.
#[derive(Debug, Clone)]
pub struct SessionHits {
    pub session: SessionId,
    pub updated_ms: u64,
    /// Its newest checkpoint (whose conversation was searched).
    pub head: ObjectId,
    /// Every matching message, in conversation order.
    pub matches: Vec<Found>,
}

/// What a search found, and what it cost.
#[derive(Debug, Default)]
pub struct SearchReport {
    /// Sessions with a matching message, most recently updated first.
    pub sessions: Vec<SessionHits>,
    /// Sessions that could not be searched, and why.
    pub errors: Vec<(SessionId, Arc<Error>)>,
    /// Distinct stored messages parsed and scanned.
    pub messages_scanned: u64,
    /// List nodes and message blobs decompressed.
    pub nodes_read: u64,
    pub blobs_read: u64,
    /// Time spent reading, verifying and decompressing objects (each
    /// once): what the search costs beyond it is parsing and matching.
    pub read_time: std::time::Duration,
}

/// Where a message's bytes are: inline in a node (item index), or a blob.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Content {
    Inline(ObjectId, u32),
    Blob(ObjectId),
}

/// A message of a list: the node whose own items store it, and its bytes.
#[derive(Clone, Copy, Debug)]
struct Msg {
    origin: ObjectId,
    content: Content,
}

/// A node as read: its chain fields and its items, slices unresolved.
struct NodeParts {
    count: u64,
    prev: Option<ObjectId>,
    parts: Vec<Part>,
}

/// One item of a node.
enum Part {
    Own(Content),
    Slice(ObjectId, u64, u64),
}

/// Why resolving stopped: over the session's budget, or an error.
enum Budget {
    Over,
    Err(Error),
}

impl From<Error> for Budget {
    fn from(e: Error) -> Budget {
        Budget::Err(e)
    }
}

/// What a walk looks for in each stored message.
pub trait Matcher {
    /// What it finds in a message of `role` whose texts are `texts` (its
    /// content's strings or parts' `text`, then each tool call's function
    /// name and arguments): one string per thing found, none for nothing.
    fn check(&self, role: &str, texts: &[&str]) -> Vec<String>;
}

/// A message in which a [`Matcher`] found something.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The checkpoint where the message first appeared.
    pub checkpoint: ObjectId,
    /// Its position in the conversation of the checkpoint walked (for a
    /// history, of the checkpoint where it first appeared).
    pub index: usize,
    /// Stored text: the caller escapes it before it reaches a terminal.
    pub role: String,
    /// What the matcher found in it.
    pub found: Vec<String>,
}

/// What the matcher found in one message, before its checkpoint is known.
#[derive(Clone)]
struct Verdict {
    role: String,
    found: Vec<String>,
}

/// A checkpoint as a walk needs it: its list and its parents.
#[derive(Clone)]
struct Snap {
    root: Option<ObjectId>,
    count: u64,
    parents: Vec<ObjectId>,
}

/// The regular expression of a search: the first match of a message of
/// the searched role (never the system prompt), as an excerpt.
struct Pattern<'a> {
    re: &'a regex::Regex,
    role: Option<&'a str>,
}

impl Matcher for Pattern<'_> {
    fn check(&self, role: &str, texts: &[&str]) -> Vec<String> {
        if role == "system" || self.role.is_some_and(|r| r != role) {
            return Vec::new();
        }
        texts
            .iter()
            .find_map(|t| {
                let mut from = 0;
                while from <= t.len() {
                    let hit = self.re.find_at(t, from)?;
                    match note_end(t, hit.start()) {
                        // Past the note's line: each line is looked at once.
                        Some(end) => from = end + 1,
                        None => return Some(excerpt(t, hit.start(), hit.end())),
                    }
                }
                None
            })
            .into_iter()
            .collect()
    }
}

struct Scan<'a> {
    layout: &'a Odb,
    matcher: &'a dyn Matcher,
    max_messages: u64,
    /// Nodes read so far, kept across sessions (forks share them) while
    /// they hold at most [`CACHE_ITEMS`] items in all.
    nodes: HashMap<ObjectId, Rc<NodeParts>>,
    cached_items: u64,
    /// Per stored message: whether it matches. Inline messages' verdicts
    /// go with their node's cache entry.
    verdicts: HashMap<Content, Option<Verdict>>,
    /// Snapshots read (for first appearances and histories).
    snapshots: HashMap<ObjectId, Snap>,
    /// When set, only what these objects store is checked (what a push
    /// sends): a node outside it is read for its chain, its messages
    /// not checked.
    only: Option<HashSet<ObjectId>>,
    report: SearchReport,
}

impl Scan<'_> {
    /// Forget what was read once it holds more than [`CACHE_ITEMS`].
    fn trim(&mut self) {
        if self.cached_items > CACHE_ITEMS {
            self.nodes.clear();
            self.verdicts.retain(|c, _| matches!(c, Content::Blob(_)));
            self.cached_items = 0;
        }
    }

    /// Checkpoint `id` as read (from the cache, or read now).
    fn snap(&mut self, id: &ObjectId) -> Result<Snap> {
        if let Some(s) = self.snapshots.get(id) {
            return Ok(s.clone());
        }
        let t = std::time::Instant::now();
        let cp = crate::read::snapshot(self.layout, id)?;
        self.report.read_time += t.elapsed();
        let s = Snap {
            root: cp.messages.root,
            count: cp.messages.count,
            parents: cp.parents.clone(),
        };
        self.snapshots.insert(*id, s.clone());
        Ok(s)
    }

    /// The messages of the conversation at checkpoint `head` in which the
    /// matcher finds something.
    fn session(&mut self, head: &ObjectId) -> Result<Vec<Hit>> {
        self.trim();
        let cp = self.snap(head)?;
        let msgs = self.conversation(head, cp.root, cp.count)?;
        let mut found = Vec::new();
        for (index, m) in msgs.iter().enumerate() {
            if let Some(v) = self.verdict(m.content)? {
                found.push((index, m.origin, v));
            }
        }
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let first = self.first_appearances(head)?;
        Ok(found
            .into_iter()
            .map(|(index, origin, v)| Hit {
                checkpoint: first.get(&origin).copied().unwrap_or(*head),
                index,
                role: v.role,
                found: v.found,
            })
            .collect())
    }

    /// The messages of every checkpoint of the history of `head` (through
    /// every parent) in which the matcher finds something: each distinct
    /// stored message once, at the oldest checkpoint whose conversation
    /// holds it.
    fn history(&mut self, head: &ObjectId) -> Result<Vec<Hit>> {
        let only = |s: &Self, id: &ObjectId| s.only.as_ref().is_none_or(|o| o.contains(id));
        self.trim();
        // Parents before children, with an explicit stack (a history is
        // as long as the store says, never the call stack).
        let mut order = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![(*head, false)];
        while let Some((id, expanded)) = stack.pop() {
            if expanded {
                order.push(id);
                continue;
            }
            // A checkpoint not sent is on the remote, and so is its history.
            if !seen.insert(id) || !only(self, &id) {
                continue;
            }
            let snap = self.snap(&id)?;
            stack.push((id, true));
            for p in snap.parents.iter().rev() {
                if !seen.contains(p) {
                    stack.push((*p, false));
                }
            }
        }
        // Each checkpoint's list is walked back from its last node to the
        // first node an older checkpoint's list already reached: a
        // history costs its distinct nodes, not its checkpoints times
        // their conversations. A node not sent is on the remote, and so
        // is every node before it.
        let limit = self.max_messages;
        let mut scanned: HashSet<Content> = HashSet::new();
        let mut walked: HashSet<ObjectId> = HashSet::new();
        let mut hits: Vec<(usize, Hit)> = Vec::new();
        for (ordinal, cp) in order.into_iter().enumerate() {
            let snap = self.snap(&cp)?;
            if snap.count > limit {
                return Err(Error::ConversationTooLarge {
                    checkpoint: cp,
                    what: "messages",
                    limit,
                });
            }
            let mut next = snap.root;
            let mut expect = snap.count;
            while let Some(id) = next {
                if !only(self, &id) || !walked.insert(id) {
                    break;
                }
                // The node's items with its slices resolved, within the
                // budget a load of one conversation has.
                let mut memo = HashMap::new();
                let mut budget = limit.saturating_mul(2);
                let too_large = || Error::ConversationTooLarge {
                    checkpoint: cp,
                    what: "messages",
                    limit,
                };
                let (items, prev) =
                    self.list_node(&id, &mut memo, &mut budget, &mut expect, too_large)?;
                for (k, m) in items.iter().enumerate() {
                    let stored_in = match m.content {
                        Content::Inline(node, _) => node,
                        Content::Blob(b) => b,
                    };
                    if !only(self, &stored_in) || !scanned.insert(m.content) {
                        continue;
                    }
                    if let Some(v) = self.verdict(m.content)? {
                        hits.push((
                            ordinal,
                            Hit {
                                checkpoint: cp,
                                index: (expect as usize).saturating_add(k),
                                role: v.role,
                                found: v.found,
                            },
                        ));
                    }
                }
                next = prev;
            }
        }
        hits.sort_by_key(|(ordinal, h)| (*ordinal, h.index));
        Ok(hits.into_iter().map(|(_, h)| h).collect())
    }

    /// The messages of the list `root` (of `count` messages), oldest first.
    fn conversation(
        &mut self,
        checkpoint: &ObjectId,
        root: Option<ObjectId>,
        count: u64,
    ) -> Result<Vec<Msg>> {
        let limit = self.max_messages;
        let too_large = || Error::ConversationTooLarge {
            checkpoint: *checkpoint,
            what: "messages",
            limit,
        };
        if count > self.max_messages {
            return Err(too_large());
        }
        // This session's nodes with their slices resolved; every item
        // they hold counts against the budget, as a load counts them.
        let mut memo: HashMap<ObjectId, Rc<Vec<Msg>>> = HashMap::new();
        let mut budget = self.max_messages.saturating_mul(2);
        let mut parts: Vec<Rc<Vec<Msg>>> = Vec::new();
        let mut next = root;
        let mut expect = count;
        let mut seen = HashSet::new();
        while let Some(id) = next {
            if !seen.insert(id) {
                return Err(self.corrupt(&id, "the chain leads back to this node"));
            }
            let (items, prev) =
                self.list_node(&id, &mut memo, &mut budget, &mut expect, too_large)?;
            next = prev;
            parts.push(items);
        }
        if expect != 0 {
            return Err(Error::Corrupt {
                id: *checkpoint,
                path: self.layout.object_path(checkpoint),
                reason: format!("snapshot says {count} messages, its list holds fewer"),
            });
        }
        Ok(parts.iter().rev().flat_map(|p| p.iter().copied()).collect())
    }

    /// Node `id` of a list that has `expect` messages up to its end: its
    /// items with their slices resolved (within `budget`; past it, the
    /// error `too_large` makes), checked against the count it records,
    /// and the node before it. `expect` becomes the count before it.
    fn list_node(
        &mut self,
        id: &ObjectId,
        memo: &mut HashMap<ObjectId, Rc<Vec<Msg>>>,
        budget: &mut u64,
        expect: &mut u64,
        too_large: impl Fn() -> Error,
    ) -> Result<(Rc<Vec<Msg>>, Option<ObjectId>)> {
        let items = self.resolve(id, memo, budget).map_err(|e| match e {
            Budget::Over => too_large(),
            Budget::Err(e) => e,
        })?;
        let node = self.node(id)?;
        let len = items.len() as u64;
        if node.count != *expect || len > *expect {
            return Err(self.corrupt(id, "its count does not match the list it ends"));
        }
        *expect -= len;
        Ok((items, node.prev))
    }

    fn corrupt(&self, id: &ObjectId, reason: &str) -> Error {
        Error::Corrupt {
            id: *id,
            path: self.layout.object_path(id),
            reason: reason.to_owned(),
        }
    }

    /// Node `id` as read (from the cache, or read now).
    fn node(&mut self, id: &ObjectId) -> Result<Rc<NodeParts>> {
        if let Some(n) = self.nodes.get(id) {
            return Ok(Rc::clone(n));
        }
        let n = Rc::new(self.read_node(id)?);
        self.cached_items += n.parts.len() as u64;
        self.nodes.insert(*id, Rc::clone(&n));
        Ok(n)
    }

    /// The items of node `id` with its slices resolved (and those of every
    /// node they name, with an explicit stack: nesting is as deep as the
    /// store says, never the call stack), each node once per session.
    fn resolve(
        &mut self,
        id: &ObjectId,
        memo: &mut HashMap<ObjectId, Rc<Vec<Msg>>>,
        budget: &mut u64,
    ) -> std::result::Result<Rc<Vec<Msg>>, Budget> {
        let mut stack = vec![*id];
        let mut open: HashSet<ObjectId> = HashSet::new();
        while let Some(&top) = stack.last() {
            if memo.contains_key(&top) {
                stack.pop();
                continue;
            }
            open.insert(top);
            let node = self.node(&top)?;
            let waiting: Vec<ObjectId> = node
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Slice(s, _, _) if !memo.contains_key(s) => Some(*s),
                    _ => None,
                })
                .collect();
            if !waiting.is_empty() {
                for s in waiting {
                    if open.contains(&s) {
                        return Err(self.corrupt(&top, "its slices lead back to itself").into());
                    }
                    stack.push(s);
                }
                continue;
            }
            let mut items = Vec::new();
            for p in &node.parts {
                match p {
                    Part::Own(content) => items.push(Msg {
                        origin: top,
                        content: *content,
                    }),
                    Part::Slice(s, from, to) => {
                        let of = &memo[s];
                        let range = usize::try_from(*from)
                            .ok()
                            .zip(usize::try_from(*to).ok())
                            .filter(|(_, t)| *t <= of.len());
                        let Some((from, to)) = range else {
                            return Err(self.corrupt(&top, "a slice reaches past its node").into());
                        };
                        if (to - from) as u64 > *budget {
                            return Err(Budget::Over);
                        }
                        items.extend_from_slice(&of[from..to]);
                    }
                }
            }
            *budget = budget.checked_sub(items.len() as u64).ok_or(Budget::Over)?;
            open.remove(&top);
            memo.insert(top, Rc::new(items));
            stack.pop();
        }
        memo.get(id)
            .cloned()
            .ok_or_else(|| Error::Internal("resolved node not kept".into()).into())
    }

    /// Read node `id`: its count, prev and items; its inline messages are
    /// scanned now, while the node is in memory.
    fn read_node(&mut self, id: &ObjectId) -> Result<NodeParts> {
        let t = std::time::Instant::now();
        let payload = crate::read::of_kind(self.layout, id, Kind::List, Cap::LIST)?;
        self.report.read_time += t.elapsed();
        self.report.nodes_read += 1;
        let raw = RawNode::parse(&payload).map_err(|e| malformed(self.layout, id, e))?;
        if raw.items.len() as u64 > self.max_messages {
            return Err(self.corrupt(id, "it holds more items than hel loads"));
        }
        let mut parts = Vec::with_capacity(raw.items.len());
        for (index, (a, b)) in raw.items.iter().enumerate() {
            let item = parse_item_as::<view::Message>(&payload[*a..*b]).map_err(|reason| {
                malformed(
                    self.layout,
                    id,
                    crate::list::NodeError::Item { index, reason },
                )
            })?;
            parts.push(match item {
                ItemOf::Inline(m) => {
                    let content = Content::Inline(*id, index as u32);
                    if self.only.as_ref().is_none_or(|o| o.contains(id)) {
                        self.report.messages_scanned += 1;
                        let v = self.scan(&m);
                        self.verdicts.insert(content, v);
                    }
                    Part::Own(content)
                }
                ItemOf::Blob(b) => Part::Own(Content::Blob(b)),
                ItemOf::Slice { node, from, to } => Part::Slice(node, from, to),
            });
        }
        Ok(NodeParts {
            count: raw.count,
            prev: raw.prev,
            parts,
        })
    }

    /// Does the message at `content` match? Each blob is read once.
    fn verdict(&mut self, content: Content) -> Result<Option<Verdict>> {
        if let Some(v) = self.verdicts.get(&content) {
            return Ok(v.clone());
        }
        let b = match content {
            Content::Blob(b) => b,
            // Read before without being checked (outside what a push
            // sent then): read it again, checked.
            Content::Inline(node, _) => {
                if self.nodes.remove(&node).is_none() {
                    return Err(Error::Internal("inline message not scanned".into()));
                }
                let n = Rc::new(self.read_node(&node)?);
                self.nodes.insert(node, n);
                return match self.verdicts.get(&content) {
                    Some(v) => Ok(v.clone()),
                    None => Err(Error::Internal("inline message not scanned".into())),
                };
            }
        };
        let t = std::time::Instant::now();
        let bytes = crate::read::of_kind(self.layout, &b, Kind::Blob, Cap::MESSAGE)?;
        self.report.read_time += t.elapsed();
        self.report.blobs_read += 1;
        let m: view::Message = serde_json::from_slice(&bytes).map_err(|e| Error::BadMessage {
            id: b,
            path: self.layout.object_path(&b),
            index: 0,
            reason: crate::message::MessageError::NotJson(e),
        })?;
        self.report.messages_scanned += 1;
        let v = self.scan(&m);
        self.verdicts.insert(content, v.clone());
        Ok(v)
    }

    /// What the matcher finds in `m` (None: nothing, or no role).
    fn scan(&self, m: &view::Message<'_>) -> Option<Verdict> {
        let role = m.role.as_deref()?;
        let texts: Vec<&str> = m.content.iter().chain(&m.calls).map(|t| &**t).collect();
        let found = self.matcher.check(role, &texts);
        (!found.is_empty()).then(|| Verdict {
            role: role.to_owned(),
            found,
        })
    }

    /// For the history of checkpoint `head` (through fork points), the
    /// oldest checkpoint whose list ends with each node: where the
    /// messages that node stores first appeared.
    fn first_appearances(&mut self, head: &ObjectId) -> Result<HashMap<ObjectId, ObjectId>> {
        let mut first = HashMap::new();
        let mut next = Some(*head);
        let mut seen = HashSet::new();
        while let Some(id) = next {
            if !seen.insert(id) {
                break;
            }
            let snap = self.snap(&id)?;
            let (root, parent) = (snap.root, snap.parents.first().copied());
            // Walking back: the last one seen is the oldest.
            if let Some(r) = root {
                first.insert(r, id);
            }
            next = parent;
        }
        Ok(first)
    }
}

/// Whether byte `at` of `text` is on a line of hel's own (`[hel: …]`, a
/// note hel adds to a user message, such as that the instruction before
/// was interrupted): not what the user or the model said.
/// Where that line ends (None: not a note).
fn note_end(text: &str, at: usize) -> Option<usize> {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let line = text[start..end].trim();
    (line.starts_with("[hel: ") && line.ends_with(']')).then_some(end)
}

/// A message's searched text read in the pass that parses it: no JSON
/// value is built, and a string is copied only when it holds an escape.
/// It reads what a JSON value of the message gives for the same keys (a
/// key given twice counts as its last, as in a value), and takes any JSON
/// where a value would: what is not an object has no role. One difference:
/// what it passes over is skipped without serde_json's nesting limit (128),
/// so a message nested deeper than that (which no hel writes, and which a
/// load and fsck refuse) is searched rather than reported.
mod view {
    use std::borrow::Cow;
    use std::fmt;

    use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

    /// A message: its role when that is a string, and its searched texts.
    #[derive(Default)]
    pub(super) struct Message<'a> {
        pub role: Option<Cow<'a, str>>,
        /// The content's string, or its parts' `text` strings.
        pub content: Vec<Cow<'a, str>>,
        /// Each tool call's function `name` and `arguments` strings.
        pub calls: Vec<Cow<'a, str>>,
    }

    /// What one visitor makes of a JSON value: `on_str`, `on_seq` and
    /// `on_map` for what it reads, the default for any other value.
    trait Read<'a>: Sized + Default {
        fn on_str(_: Cow<'a, str>) -> Self {
            Self::default()
        }
        fn on_seq<A: SeqAccess<'a>>(mut seq: A) -> Result<Self, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Self::default())
        }
        fn on_map<A: MapAccess<'a>>(mut map: A) -> Result<Self, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Self::default())
        }
    }

    struct Any<T>(std::marker::PhantomData<T>);

    impl<'a, T: Read<'a>> Visitor<'a> for Any<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, _: bool) -> Result<T, E> {
            Ok(T::default())
        }
        fn visit_i64<E>(self, _: i64) -> Result<T, E> {
            Ok(T::default())
        }
        fn visit_u64<E>(self, _: u64) -> Result<T, E> {
            Ok(T::default())
        }
        fn visit_f64<E>(self, _: f64) -> Result<T, E> {
            Ok(T::default())
        }
        fn visit_unit<E>(self) -> Result<T, E> {
            Ok(T::default())
        }
        fn visit_borrowed_str<E>(self, s: &'a str) -> Result<T, E> {
            Ok(T::on_str(Cow::Borrowed(s)))
        }
        fn visit_str<E>(self, s: &str) -> Result<T, E> {
            Ok(T::on_str(Cow::Owned(s.to_owned())))
        }
        fn visit_string<E>(self, s: String) -> Result<T, E> {
            Ok(T::on_str(Cow::Owned(s)))
        }
        fn visit_seq<A: SeqAccess<'a>>(self, seq: A) -> Result<T, A::Error> {
            T::on_seq(seq)
        }
        fn visit_map<A: MapAccess<'a>>(self, map: A) -> Result<T, A::Error> {
            T::on_map(map)
        }
    }

    fn any<'a, D: Deserializer<'a>, T: Read<'a>>(d: D) -> Result<T, D::Error> {
        d.deserialize_any(Any(std::marker::PhantomData))
    }

    /// Implements `Deserialize` through [`Read`].
    macro_rules! read_any {
        ($($t:ident),*) => {$(
            impl<'a> Deserialize<'a> for $t<'a> {
                fn deserialize<D: Deserializer<'a>>(d: D) -> Result<Self, D::Error> {
                    any(d)
                }
            }
        )*};
    }
    read_any!(Message, Str, Texts, Part, Calls, Call, Function);

    /// A string, if the value is one.
    #[derive(Default)]
    struct Str<'a>(Option<Cow<'a, str>>);
    impl<'a> Read<'a> for Str<'a> {
        fn on_str(s: Cow<'a, str>) -> Self {
            Str(Some(s))
        }
    }

    /// A key, as a value's map holds it (escapes resolved).
    struct Key<'a>(Cow<'a, str>);
    impl<'a> Deserialize<'a> for Key<'a> {
        fn deserialize<D: Deserializer<'a>>(d: D) -> Result<Self, D::Error> {
            let s: Str<'a> = any(d)?;
            Ok(Key(s.0.unwrap_or_default()))
        }
    }

    impl<'a> Read<'a> for Message<'a> {
        fn on_map<A: MapAccess<'a>>(mut map: A) -> Result<Self, A::Error> {
            let mut m = Message::default();
            while let Some(Key(k)) = map.next_key()? {
                match &*k {
                    "role" => m.role = map.next_value::<Str<'a>>()?.0,
                    "content" => m.content = map.next_value::<Texts<'a>>()?.0,
                    "tool_calls" => m.calls = map.next_value::<Calls<'a>>()?.0,
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(m)
        }
    }

    /// A content: its string, or the `text` strings of its parts.
    #[derive(Default)]
    struct Texts<'a>(Vec<Cow<'a, str>>);
    impl<'a> Read<'a> for Texts<'a> {
        fn on_str(s: Cow<'a, str>) -> Self {
            Texts(vec![s])
        }
        fn on_seq<A: SeqAccess<'a>>(mut seq: A) -> Result<Self, A::Error> {
            let mut out = Vec::new();
            while let Some(Part(t)) = seq.next_element()? {
                out.extend(t);
            }
            Ok(Texts(out))
        }
    }

    /// A content part's `text`, if it is a string.
    #[derive(Default)]
    struct Part<'a>(Option<Cow<'a, str>>);
    impl<'a> Read<'a> for Part<'a> {
        fn on_map<A: MapAccess<'a>>(map: A) -> Result<Self, A::Error> {
            Ok(Part(last_of::<_, Str<'a>>(map, "text")?.and_then(|s| s.0)))
        }
    }

    /// The value of `key` in `map` read as `T` (the last, if it is given
    /// twice); every other value is passed over.
    fn last_of<'a, A: MapAccess<'a>, T: Deserialize<'a>>(
        mut map: A,
        key: &str,
    ) -> Result<Option<T>, A::Error> {
        let mut found = None;
        while let Some(Key(k)) = map.next_key()? {
            if k == key {
                found = Some(map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    /// Tool calls: each one's function `name` and `arguments` strings.
    #[derive(Default)]
    struct Calls<'a>(Vec<Cow<'a, str>>);
    impl<'a> Read<'a> for Calls<'a> {
        fn on_seq<A: SeqAccess<'a>>(mut seq: A) -> Result<Self, A::Error> {
            let mut out = Vec::new();
            while let Some(Call(f)) = seq.next_element()? {
                out.extend(f.name);
                out.extend(f.arguments);
            }
            Ok(Calls(out))
        }
    }

    /// A tool call's `function`.
    #[derive(Default)]
    struct Call<'a>(Function<'a>);
    impl<'a> Read<'a> for Call<'a> {
        fn on_map<A: MapAccess<'a>>(map: A) -> Result<Self, A::Error> {
            Ok(Call(last_of(map, "function")?.unwrap_or_default()))
        }
    }

    #[derive(Default)]
    struct Function<'a> {
        name: Option<Cow<'a, str>>,
        arguments: Option<Cow<'a, str>>,
    }
    impl<'a> Read<'a> for Function<'a> {
        fn on_map<A: MapAccess<'a>>(mut map: A) -> Result<Self, A::Error> {
            let mut f = Function::default();
            while let Some(Key(k)) = map.next_key()? {
                match &*k {
                    "name" => f.name = map.next_value::<Str<'a>>()?.0,
                    "arguments" => f.arguments = map.next_value::<Str<'a>>()?.0,
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(f)
        }
    }
}

/// The line of `text` holding the match `start..end`, cut to
/// [`EXCERPT_MAX`] characters around it (`…` where cut), trimmed.
fn excerpt(text: &str, start: usize, end: usize) -> String {
    let line_start = text[..start].rfind('\n').map_or(0, |k| k + 1);
    let line_end = text[start..].find('\n').map_or(text.len(), |k| start + k);
    let end = end.min(line_end).max(start);
    let before: Vec<char> = text[line_start..start].chars().collect();
    let hit: Vec<char> = text[start..end].chars().collect();
    let after: Vec<char> = text[end..line_end].chars().collect();
    // Some context before the match, the match, then what fits after.
    let lead = before.len().min(EXCERPT_MAX / 3);
    let hit_len = hit.len().min(EXCERPT_MAX - lead);
    let tail = after.len().min(EXCERPT_MAX - lead - hit_len);
    let mut out = String::new();
    if lead < before.len() {
        out.push('…');
    }
    out.extend(&before[before.len() - lead..]);
    out.extend(&hit[..hit_len]);
    out.extend(&after[..tail]);
    if hit_len < hit.len() || tail < after.len() {
        out.push('…');
    }
    out.trim().to_owned()
}

/// Search the conversation at every session's newest checkpoint for
/// messages (of `role`, when given; never the system prompt) whose text
/// (content, or a tool call's name and arguments) `re` matches. See the
/// module doc for what is read and what is reported.
pub fn search(store: &Store, re: &regex::Regex, role: Option<&str>) -> Result<SearchReport> {
    let Some(layout) = store.layout_for_gc()? else {
        return Ok(SearchReport::default());
    };
    let pattern = Pattern { re, role };
    let mut scan = Scan {
        layout,
        matcher: &pattern,
        max_messages: store.limits().max_messages,
        nodes: HashMap::new(),
        cached_items: 0,
        verdicts: HashMap::new(),
        snapshots: HashMap::new(),
        only: None,
        report: SearchReport::default(),
    };
    for info in store.sessions()? {
        if let Some(e) = info.broken {
            scan.report.errors.push((info.id, e));
            continue;
        }
        let Some(head) = info.head else { continue };
        match scan.session(&head) {
            Ok(matches) if matches.is_empty() => {}
            Ok(hits) => scan.report.sessions.push(SessionHits {
                session: info.id,
                updated_ms: info.updated_ms,
                head,
                matches: hits
                    .into_iter()
                    .map(|h| Found {
                        checkpoint: h.checkpoint,
                        index: h.index,
                        role: h.role,
                        excerpt: h.found.into_iter().next().unwrap_or_default(),
                    })
                    .collect(),
            }),
            Err(e) => scan.report.errors.push((info.id, Arc::new(e))),
        }
    }
    Ok(scan.report)
}

/// A walk of stored conversations for what a [`Matcher`] finds. What it
/// reads is shared across the sessions and checkpoints it walks (forks and
/// checkpoints share nodes): each node and message blob is decompressed
/// once, each distinct stored message checked once. Bounded as
/// [`search`] is.
pub struct Walk<'a> {
    scan: Option<Scan<'a>>,
}

impl<'a> Walk<'a> {
    pub fn new(store: &'a Store, matcher: &'a dyn Matcher) -> Result<Walk<'a>> {
        let scan = store.layout_for_gc()?.map(|layout| Scan {
            layout,
            matcher,
            max_messages: store.limits().max_messages,
            nodes: HashMap::new(),
            cached_items: 0,
            verdicts: HashMap::new(),
            snapshots: HashMap::new(),
            only: None,
            report: SearchReport::default(),
        });
        Ok(Walk { scan })
    }

    /// The messages of the conversation at checkpoint `at` in which the
    /// matcher finds something (each with the checkpoint of its history
    /// where it first appeared), in conversation order.
    pub fn conversation(&mut self, at: &ObjectId) -> Result<Vec<Hit>> {
        match &mut self.scan {
            Some(s) => s.session(at),
            None => Ok(Vec::new()),
        }
    }

    /// The messages of every checkpoint of the history of `head` (every
    /// parent, through fork points: what a push or a bundle of it holds)
    /// in which the matcher finds something, oldest checkpoint first.
    pub fn history(&mut self, head: &ObjectId) -> Result<Vec<Hit>> {
        match &mut self.scan {
            Some(s) => s.history(head),
            None => Ok(Vec::new()),
        }
    }

    /// As [`Walk::history`], only what the objects `sent` store (what a
    /// push of `head` sends: the objects the remote lacks): the cost is
    /// that of what is sent, and of reading the chain of the lists it
    /// extends.
    pub fn history_sent(&mut self, head: &ObjectId, sent: &[ObjectId]) -> Result<Vec<Hit>> {
        let Some(s) = &mut self.scan else {
            return Ok(Vec::new());
        };
        s.only = Some(sent.iter().copied().collect());
        let hits = s.history(head);
        s.only = None;
        hits
    }

    /// What it read so far: distinct messages checked, list nodes and
    /// message blobs decompressed.
    pub fn cost(&self) -> (u64, u64, u64) {
        self.scan.as_ref().map_or((0, 0, 0), |s| {
            (
                s.report.messages_scanned,
                s.report.nodes_read,
                s.report.blobs_read,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CommitInput, Leaf, Record, SessionLease, SessionState};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// What the search reads of a message, from its JSON value: the plain
    /// model the view is held to.
    fn from_value(m: &Value) -> Option<(String, Vec<String>)> {
        let role = m.get("role").and_then(Value::as_str)?;
        let mut texts: Vec<&str> = Vec::new();
        match m.get("content") {
            Some(Value::String(s)) => texts.push(s),
            Some(Value::Array(parts)) => texts.extend(
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str)),
            ),
            _ => {}
        }
        if let Some(Value::Array(calls)) = m.get("tool_calls") {
            for c in calls {
                for key in ["name", "arguments"] {
                    if let Some(s) = c.get("function").and_then(|f| f.get(key)) {
                        texts.extend(s.as_str());
                    }
                }
            }
        }
        Some((
            role.to_owned(),
            texts.into_iter().map(str::to_owned).collect(),
        ))
    }

    fn from_view(json: &[u8]) -> Option<Option<(String, Vec<String>)>> {
        let m: view::Message = serde_json::from_slice(json).ok()?;
        Some(m.role.map(|r| {
            let texts = m.content.iter().chain(&m.calls).map(|t| t.to_string());
            (r.into_owned(), texts.collect())
        }))
    }

    /// JSON text of messages and of what is not quite one: the keys the
    /// view reads (also spelled with escapes, also twice), values of every
    /// type, strings with escapes.
    fn json_text() -> impl Strategy<Value = String> {
        let key = prop::sample::select(vec![
            "role",
            "content",
            "tool_calls",
            "text",
            "function",
            "name",
            "arguments",
            "type",
            "r\\u006fle",
            "t\\u0065xt",
            "x",
        ])
        .prop_map(|k| format!("\"{k}\""));
        let string = prop::sample::select(vec![
            "\"user\"",
            "\"system\"",
            "\"needle\"",
            "\"a\\nneedle \\\"q\\\"\"",
            "\"\\u00e9t\\u00e9\"",
            "\"\"",
            "\"\u{1F600} needle\"",
        ])
        .prop_map(str::to_owned);
        let leaf = prop_oneof![
            string,
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("-1.5e3".to_owned()),
            Just("42".to_owned()),
        ];
        leaf.prop_recursive(4, 40, 5, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec((key.clone(), inner), 0..6).prop_map(|kv| {
                    let body: Vec<String> =
                        kv.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                    format!("{{{}}}", body.join(" , "))
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The view reads every message as its JSON value does: the same
        /// role and texts in the same order, and it refuses exactly what is
        /// not JSON.
        #[test]
        fn the_view_reads_what_the_value_holds(text in json_text()) {
            let value: Option<Value> = serde_json::from_str(&text).ok();
            let view = from_view(text.as_bytes());
            prop_assert_eq!(value.is_some(), view.is_some(), "{}", text);
            if let (Some(v), Some(w)) = (value, view) {
                prop_assert_eq!(from_value(&v), w, "{}", text);
            }
        }
    }

    fn commit(
        store: &Store,
        lease: &SessionLease,
        state: &mut SessionState,
        msgs: &[Value],
        leaves: &[Option<Leaf>],
    ) -> crate::Committed {
        store
            .commit(
                lease,
                state,
                CommitInput::new(
                    Record::Answer,
                    msgs,
                    leaves,
                    "/p",
                    crate::SessionRecord::of(crate::RequestConfig::bare("test", "")),
                )
                .instruction("i")
                .why("test"),
            )
            .unwrap()
    }

    #[test]
    fn each_stored_message_is_scanned_once_and_reported_once_per_session() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let big = format!("the needle in a big one {}", "z".repeat(crate::INLINE_MAX));
        // Session A: two checkpoints; the needle arrives in the first.
        let a = store.new_session().unwrap();
        let mut st = SessionState::default();
        let mut msgs = vec![
            json!({"role": "system", "content": "needle in the system prompt"}),
            json!({"role": "user", "content": "find the needle"}),
            json!({"role": "assistant", "content": big}),
        ];
        let c1 = commit(&store, &a, &mut st, &msgs, &[None, None, None]);
        let mut leaves: Vec<Option<Leaf>> = c1.new_leaves.iter().copied().map(Some).collect();
        msgs.push(json!({"role": "user", "content": "something else"}));
        leaves.push(None);
        let c2 = commit(&store, &a, &mut st, &msgs, &leaves);
        // A fork of A's newest checkpoint, and an unrelated session B.
        let (_fork, _, _) = store.fork(&c2.id).unwrap();
        let b = store.new_session().unwrap();
        let mut st_b = SessionState::default();
        commit(
            &store,
            &b,
            &mut st_b,
            &[
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": "x", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
                ]}),
                json!({"role": "tool", "tool_call_id": "x", "content": "no\nneedle here\n"}),
            ],
            &[None, None],
        );
        let re = regex::Regex::new("needle").unwrap();
        let report = search(&store, &re, None).unwrap();
        assert!(report.errors.is_empty());
        assert_eq!(report.sessions.len(), 3);
        // 4 messages in A (the fork shares them all), 2 in B: 6, each once.
        assert_eq!(report.messages_scanned, 6);
        assert_eq!(report.blobs_read, 1);
        for s in &report.sessions {
            if s.session == *b.session() {
                assert_eq!(s.matches.len(), 1);
                assert_eq!(s.matches[0].excerpt, "needle here");
                continue;
            }
            // A and its fork: the user message and the answer, both first
            // seen at A's first checkpoint; never the system prompt.
            let got: Vec<(usize, &str, ObjectId)> = s
                .matches
                .iter()
                .map(|f| (f.index, f.role.as_str(), f.checkpoint))
                .collect();
            assert_eq!(got, vec![(1, "user", c1.id), (2, "assistant", c1.id)]);
        }
        let only_tool = search(&store, &re, Some("tool")).unwrap();
        assert_eq!(only_tool.sessions.len(), 1);
        assert_eq!(only_tool.sessions[0].session, *b.session());
    }

    /// Finds "needle" in any message, the system prompt included.
    struct Needle;
    impl Matcher for Needle {
        fn check(&self, _role: &str, texts: &[&str]) -> Vec<String> {
            texts
                .iter()
                .filter(|t| t.contains("needle"))
                .map(|_| "needle".to_owned())
                .collect()
        }
    }

    #[test]
    fn a_history_walk_checks_every_checkpoints_messages_once_and_a_sent_walk_only_what_is_sent() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = store.new_session().unwrap();
        let mut st = SessionState::default();
        let mut msgs = vec![
            json!({"role": "system", "content": "s"}),
            json!({"role": "user", "content": "a needle"}),
            json!({"role": "assistant", "content": "ok"}),
        ];
        let c1 = commit(&store, &a, &mut st, &msgs, &[None, None, None]);
        let mut leaves: Vec<Option<Leaf>> = c1.new_leaves.iter().copied().map(Some).collect();
        msgs.push(json!({"role": "user", "content": "more"}));
        msgs.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "bash", "arguments": "{\"needle\":1}"}}
        ]}));
        msgs.push(json!({"role": "tool", "tool_call_id": "x", "content": "done"}));
        leaves.extend([None, None, None]);
        let c2 = commit(&store, &a, &mut st, &msgs, &leaves);
        // The third checkpoint's conversation starts over (as a compaction
        // does): the first checkpoints' messages are only in its history.
        let c3 = commit(
            &store,
            &a,
            &mut st,
            &[
                json!({"role": "system", "content": "s"}),
                json!({"role": "user", "content": "clean"}),
            ],
            &[None, None],
        );
        let mut walk = Walk::new(&store, &Needle).unwrap();
        assert!(walk.conversation(&c3.id).unwrap().is_empty());
        let got: Vec<(ObjectId, usize, String)> = walk
            .history(&c3.id)
            .unwrap()
            .into_iter()
            .map(|h| (h.checkpoint, h.index, h.role))
            .collect();
        assert_eq!(
            got,
            vec![
                (c1.id, 1, "user".to_owned()),
                (c2.id, 4, "assistant".to_owned())
            ]
        );
        // What a push of c2 on top of c1 sends: only the second needle.
        let sent = crate::transfer::pack_between(&store, &c2.id, Some(&c1.id)).unwrap();
        let mut walk = Walk::new(&store, &Needle).unwrap();
        let got: Vec<(ObjectId, usize)> = walk
            .history_sent(&c2.id, &sent.ids)
            .unwrap()
            .into_iter()
            .map(|h| (h.checkpoint, h.index))
            .collect();
        assert_eq!(got, vec![(c2.id, 4)]);
        // Then the whole history, with the nodes already read unchecked.
        assert_eq!(walk.history(&c2.id).unwrap().len(), 2);
    }

    #[test]
    fn excerpts_are_one_bounded_line() {
        assert_eq!(excerpt("a\n  find me here \nb", 4, 8), "find me here");
        let long = format!("{}needle{}", "x".repeat(500), "y".repeat(500));
        let e = excerpt(&long, 500, 506);
        assert!(e.contains("needle") && e.starts_with('…') && e.ends_with('…'));
        assert!(e.chars().count() <= EXCERPT_MAX + 2);
        let wide = "é".repeat(300);
        assert!(excerpt(&wide, 200, 202).chars().count() <= EXCERPT_MAX + 2);
    }
}
