//! `hel sessions tree` and the prompt's `/tree`: a session's family (the
//! session, the sessions it was forked from, and every fork made from any
//! of them) as a tree of answers, newest first, its branches drawn as
//! `git log --graph` and jj's log draw them.
//!
//! The family is found by walking each session's history back from its
//! head, as `hel sessions log` walks one: every snapshot is read once, a
//! walk stops at a record another walk read and takes that walk's root,
//! and the family is the sessions whose walks end at the named session's
//! root. Walks are loops, never recursion, and read at most
//! [`RECORDS_MAX`] records in all. A deleted session's answers that a fork
//! of it was made after stay in the store (a delete keeps what another
//! session's history reaches): they appear on that fork's branch, the
//! newest marked `[deleted 1a2b3c4d]`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::path::Path;

use hel_agent::text::escape_line;
use hel_store::time::rfc3339;
use hel_store::{ObjectId, Record, SessionId, SessionInfo, Store};
use serde::Serialize;

use super::report::{print_json, say};
use super::sessions::{label, names_or_warn, one_line, when};
use crate::exit::{Exit, Refusal};
use crate::render::{self, Shrink, Table};

/// Records a tree reads at most: the family's, and those of every other
/// session of the store (whose walks say whether they belong to it).
const RECORDS_MAX: usize = 500_000;

/// Characters of an instruction a node keeps (a listing's first words).
const WORDS_MAX: usize = 200;

/// Columns a session's label takes at its head, at most.
const LABEL_MAX: usize = 30;

/// The glyph of the current position (the session named, or the prompt's).
const CURRENT: char = '@';
/// The glyph of each other session's newest answer (a deleted session's
/// newest answer still here is an answer like any other, and says so).
const HEAD: char = '●';
/// The glyph of every other answer.
const ANSWER: char = '○';

/// One answer of the family.
pub(crate) struct Node {
    pub id: ObjectId,
    /// The session that wrote it.
    pub session: SessionId,
    /// The answer before it (its index in [`Tree::nodes`]).
    pub parent: Option<usize>,
    pub time_ms: u64,
    /// The first words of its instruction's first line.
    pub instruction: String,
    /// Files its instruction changed, from its workspace record (None: it
    /// has no snapshot of its start, or the trees could not be read).
    pub files: Option<u64>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The sessions whose newest answer it is ([`Tree::members`]).
    pub heads: Vec<usize>,
    /// A session with a ref whose history holds it: the one a fork at it
    /// names (the writer may be deleted).
    pub via: SessionId,
}

/// A session of the family.
pub(crate) struct Member {
    pub id: SessionId,
    pub name: Option<String>,
    /// Its name, else its first instruction (as `hel sessions` shows it).
    pub label: String,
    /// Its newest answer (None: it has none).
    pub head: Option<usize>,
    /// Its ref is gone; its answers are here through a fork's history.
    pub deleted: bool,
}

/// A family, drawn newest first: every answer comes before the one it
/// follows.
pub(crate) struct Tree {
    pub nodes: Vec<Node>,
    pub members: Vec<Member>,
    /// The newest answer of the session named.
    pub current: Option<usize>,
    /// Sessions whose history could not be read: they may be forks of
    /// this family that the tree does not show.
    pub left_out: Vec<SessionId>,
}

/// What a walk keeps of one record.
struct Rec {
    /// The nearest answer at or before it.
    above: Option<ObjectId>,
    /// The record its history begins with (None: a walk through it failed).
    root: Option<ObjectId>,
    /// The walker ([`family`]'s list) that read it first.
    via: usize,
    answer: Option<Answer>,
}

/// What a node needs of an answer record.
struct Answer {
    session: SessionId,
    time_ms: u64,
    instruction: String,
    input_tokens: u64,
    output_tokens: u64,
    /// Its instruction's start and end trees.
    trees: Option<(ObjectId, ObjectId)>,
    /// The answer before it.
    parent: Option<ObjectId>,
}

/// The family of `session`, marking `session`'s newest answer as the
/// current position.
pub(crate) fn family(store: &Store, session: &SessionId) -> Result<Tree, Exit> {
    let head = store.head(session)?;
    let infos = store.sessions()?;
    let names = names_or_warn(store);
    // The session named first: what fails in its history is the error.
    let mut walkers: Vec<(SessionId, ObjectId, Option<&SessionInfo>)> = vec![(
        session.clone(),
        head,
        infos.iter().find(|s| s.id == *session),
    )];
    walkers.extend(
        infos
            .iter()
            .filter(|s| s.id != *session && s.broken.is_none())
            .filter_map(|s| Some((s.id.clone(), s.head?, Some(s)))),
    );
    let heads: Vec<ObjectId> = walkers.iter().map(|(_, h, _)| *h).collect();
    let (recs, failed) = walk(store, &heads)?;
    let family_root = recs.get(&head).and_then(|r| r.root);
    let in_family = |r: &Rec| r.root.is_some() && r.root == family_root;

    // The answers, newest first, each after every answer that follows it.
    let answers: Vec<(&ObjectId, &Rec)> = recs
        .iter()
        .filter(|(_, r)| r.answer.is_some() && in_family(r))
        .collect();
    let order = newest_first(&answers);
    let index: HashMap<ObjectId, usize> = order
        .iter()
        .enumerate()
        .map(|(k, &a)| (*answers[a].0, k))
        .collect();
    let mut nodes: Vec<Node> = order
        .iter()
        .filter_map(|&a| {
            let (id, r) = answers[a];
            let answer = r.answer.as_ref()?;
            Some(Node {
                id: *id,
                session: answer.session.clone(),
                parent: answer.parent.and_then(|p| index.get(&p).copied()),
                time_ms: answer.time_ms,
                instruction: answer.instruction.clone(),
                files: answer.trees.and_then(|(a, b)| files_changed(store, &a, &b)),
                input_tokens: answer.input_tokens,
                output_tokens: answer.output_tokens,
                heads: Vec::new(),
                via: walkers[r.via].0.clone(),
            })
        })
        .collect();

    // The sessions: those with a ref whose walk ended in the family, then
    // the writers of its answers that have none.
    let mut members: Vec<Member> = Vec::new();
    for (w, (id, head, info)) in walkers.iter().enumerate() {
        if failed.contains(&w) || !recs.get(head).is_some_and(in_family) {
            continue;
        }
        let name = names.get(id).cloned();
        let shown = match info {
            Some(s) => label(s, name.as_deref()).to_owned(),
            None => name.clone().unwrap_or_default(),
        };
        let at = recs
            .get(head)
            .and_then(|r| r.above)
            .and_then(|a| index.get(&a).copied());
        members.push(Member {
            id: id.clone(),
            name,
            label: shown,
            head: at,
            deleted: false,
        });
    }
    // A writer without a ref is deleted (one with a ref whose history
    // could not be read is only left out).
    let mut seen: HashSet<&SessionId> = infos.iter().map(|s| &s.id).collect();
    seen.insert(session);
    let mut deleted: Vec<(SessionId, usize)> = Vec::new();
    for (k, n) in nodes.iter().enumerate() {
        // Newest first: the first answer met of a session is its newest.
        if seen.insert(&n.session) {
            deleted.push((n.session.clone(), k));
        }
    }
    for (id, k) in deleted {
        members.push(Member {
            name: names.get(&id).cloned(),
            label: String::new(),
            id,
            head: Some(k),
            deleted: true,
        });
    }
    for (m, member) in members.iter().enumerate() {
        if let Some(k) = member.head {
            nodes[k].heads.push(m);
        }
    }
    let current = members
        .first()
        .filter(|m| m.id == *session)
        .and_then(|m| m.head);
    let left_out = failed
        .into_iter()
        .map(|w| walkers[w].0.clone())
        .collect::<Vec<_>>();
    Ok(Tree {
        nodes,
        members,
        current,
        left_out,
    })
}

/// Walks each head's history back once, in order, stopping at a record an
/// earlier walk read: every record read, and the walks that failed (the
/// first one's failure is the error).
fn walk(
    store: &Store,
    heads: &[ObjectId],
) -> Result<(HashMap<ObjectId, Rec>, HashSet<usize>), Exit> {
    let mut recs: HashMap<ObjectId, Rec> = HashMap::new();
    let mut failed: HashSet<usize> = HashSet::new();
    for (w, head) in heads.iter().enumerate() {
        // What the walk read, newest first: each record's id, parent and
        // (for an answer) what its node shows, no more (a checkpoint's
        // other fields are not kept while the walk goes on).
        let mut path: Vec<(ObjectId, Option<ObjectId>, Option<Answer>)> = Vec::new();
        let mut at = Some(*head);
        let root = loop {
            let Some(id) = at else {
                break path.last().map(|(id, ..)| *id);
            };
            if let Some(r) = recs.get(&id) {
                break r.root;
            }
            if recs.len() + path.len() >= RECORDS_MAX {
                return Err(Refusal::TreeTooLarge { max: RECORDS_MAX }.into());
            }
            match store.checkpoint(&id) {
                Ok(cp) => {
                    at = cp.parents.first().copied();
                    let answer = (Record::of(&cp) == Record::Answer).then(|| Answer {
                        instruction: cp.summary.instruction.chars().take(WORDS_MAX).collect(),
                        input_tokens: cp.summary.input_tokens,
                        output_tokens: cp.summary.output_tokens,
                        trees: cp
                            .workspace
                            .as_ref()
                            .and_then(|ws| ws.start.map(|s| (s, ws.tree))),
                        time_ms: cp.created_at_ms,
                        session: cp.session_id,
                        parent: None,
                    });
                    path.push((id, at, answer));
                }
                Err(e) if w == 0 => return Err(e.into()),
                Err(_) => break None,
            }
        };
        if root.is_none() {
            failed.insert(w);
        }
        // Oldest first: each record's parent is known before it.
        for (id, parent, mut answer) in path.into_iter().rev() {
            let before = parent.and_then(|p| recs.get(&p)).and_then(|r| r.above);
            if let Some(a) = answer.as_mut() {
                a.parent = before;
            }
            let above = if answer.is_some() { Some(id) } else { before };
            recs.insert(
                id,
                Rec {
                    above,
                    root,
                    via: w,
                    answer,
                },
            );
        }
    }
    Ok((recs, failed))
}

/// Indexes of `answers` newest first, each after every answer whose
/// parent it is (Kahn's order, the newest ready answer first: a hostile
/// store's dates cannot put a parent above its child).
fn newest_first(answers: &[(&ObjectId, &Rec)]) -> Vec<usize> {
    let at: HashMap<ObjectId, usize> = answers
        .iter()
        .enumerate()
        .map(|(k, (id, _))| (**id, k))
        .collect();
    let parent = |k: usize| {
        answers[k]
            .1
            .answer
            .as_ref()
            .and_then(|a| a.parent)
            .and_then(|p| at.get(&p).copied())
    };
    let mut children = vec![0usize; answers.len()];
    for k in 0..answers.len() {
        if let Some(p) = parent(k) {
            children[p] += 1;
        }
    }
    let key = |k: usize| {
        let time = answers[k].1.answer.as_ref().map_or(0, |a| a.time_ms);
        (time, Reverse(*answers[k].0), k)
    };
    let mut ready: BinaryHeap<_> = (0..answers.len())
        .filter(|&k| children[k] == 0)
        .map(key)
        .collect();
    let mut out = Vec::with_capacity(answers.len());
    while let Some((_, _, k)) = ready.pop() {
        out.push(k);
        if let Some(p) = parent(k) {
            children[p] -= 1;
            if children[p] == 0 {
                ready.push(key(p));
            }
        }
    }
    out
}

/// Paths that differ between an instruction's start and end trees (files,
/// links and what was not tracked; not directories), or None when the
/// trees cannot be read.
fn files_changed(store: &Store, start: &ObjectId, end: &ObjectId) -> Option<u64> {
    use hel_store::tree::EntryKind;
    let mut n = 0u64;
    let not_dir = |e: Option<&hel_store::tree::Entry>| e.is_some_and(|e| e.kind != EntryKind::Dir);
    hel_workspace::history::tree_diff(store, start, end, |_, a, b| {
        if not_dir(a) || not_dir(b) {
            n += 1;
        }
    })
    .ok()?;
    Some(n)
}

/// The graph before each node's line, in [`Tree::nodes`]' order: one lane
/// (two columns) per branch still open, `│` where it goes on, the node's
/// glyph in its own, and the branches that were forked at a node joining
/// it on its line (`○─╯`, crossing others with `┼`).
fn graph(tree: &Tree) -> Vec<String> {
    // The node each lane goes on to.
    let mut lanes: Vec<Option<usize>> = Vec::new();
    let mut out = Vec::with_capacity(tree.nodes.len());
    for (k, n) in tree.nodes.iter().enumerate() {
        let joining: Vec<usize> = (0..lanes.len()).filter(|&i| lanes[i] == Some(k)).collect();
        let col = match joining.first() {
            Some(&c) => c,
            None => lanes
                .iter()
                .position(Option::is_none)
                .unwrap_or(lanes.len()),
        };
        let last = joining.last().copied().unwrap_or(col);
        let glyph = if Some(k) == tree.current {
            CURRENT
        } else if n.heads.iter().any(|&m| !tree.members[m].deleted) {
            HEAD
        } else {
            ANSWER
        };
        let mut line = String::new();
        for i in 0..lanes.len().max(col + 1) {
            let open = lanes.get(i).copied().flatten().is_some();
            line.push(if i == col {
                glyph
            } else if i > col && i <= last {
                match (joining.contains(&i), i == last, open) {
                    (true, true, _) => '╯',
                    (true, false, _) => '┴',
                    (false, _, true) => '┼',
                    (false, _, false) => '─',
                }
            } else if open {
                '│'
            } else {
                ' '
            });
            line.push(if i >= col && i < last { '─' } else { ' ' });
        }
        for &i in &joining {
            lanes[i] = None;
        }
        if col == lanes.len() {
            lanes.push(None);
        }
        lanes[col] = n.parent;
        while lanes.last() == Some(&None) {
            lanes.pop();
        }
        out.push(line.trim_end().to_owned());
    }
    out
}

/// The tree's lines for output `room` columns wide (None: not a
/// terminal, nothing cut but the instruction, as `hel sessions log`).
/// Each line: the graph, the checkpoint's id (12 digits, 8 when narrow),
/// when, the files changed, the tokens, then the labels of the sessions
/// whose newest answer it is and its instruction; on a narrow terminal
/// the tokens go first, then the files, and the line is cut with `…`
/// (a graph wider than half the terminal too).
pub(crate) fn lines(tree: &Tree, room: Option<usize>, now: u64) -> Vec<String> {
    let graphs = graph(tree);
    // On a terminal the graph takes half the width at most: a wider one
    // (many branches open at once) is cut with `…`, so that every line
    // still shows its id.
    let graph_w = graphs.iter().map(|g| render::columns(g)).max().unwrap_or(1);
    let graph_w = match room {
        Some(room) => graph_w.min((room / 2).saturating_sub(2).max(3)),
        None => graph_w,
    };
    let whens: Vec<String> = tree.nodes.iter().map(|n| when(n.time_ms, now)).collect();
    let files: Vec<String> = tree
        .nodes
        .iter()
        .map(|n| match n.files {
            Some(f) => render::count(f, "file", "files"),
            None => String::new(),
        })
        .collect();
    let digits = |n: u64| n.to_string().len();
    let in_w = tree
        .nodes
        .iter()
        .map(|n| digits(n.input_tokens))
        .max()
        .unwrap_or(1);
    let out_w = tree
        .nodes
        .iter()
        .map(|n| digits(n.output_tokens))
        .max()
        .unwrap_or(1);
    let width = |cells: &[String]| cells.iter().map(|c| render::columns(c)).max().unwrap_or(0);
    let table = Table::new(
        &[
            (graph_w, false),
            (12, false),
            (width(&whens), false),
            (width(&files), true),
            (in_w + out_w + 8, true),
        ],
        room,
        &[
            Shrink::Prefix(1, 8),
            Shrink::Drop(4),
            Shrink::Drop(3),
            Shrink::Drop(2),
        ],
        12,
    );
    tree.nodes
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let tokens = format!(
                "{:>in_w$} in {:>out_w$} out",
                n.input_tokens, n.output_tokens
            );
            let mut text = String::new();
            for &m in &n.heads {
                text.push_str(&tag(&tree.members[m]));
            }
            text.push_str(&one_line(&n.instruction, room));
            table.row(
                &[
                    &graphs[k],
                    &n.id.to_hex()[..12],
                    &whens[k],
                    &files[k],
                    &tokens,
                ],
                &text,
            )
        })
        .collect()
}

/// `[fix-login] `: what a session's newest answer says of it (escaped).
fn tag(m: &Member) -> String {
    if m.deleted {
        return format!("[deleted {}] ", &m.id.as_str()[..8]);
    }
    let label = if m.label.is_empty() {
        &m.id.as_str()[..8]
    } else {
        m.label.as_str()
    };
    format!("[{}] ", render::fit(&escape_line(label), LABEL_MAX))
}

/// What `--json` prints.
#[derive(Serialize)]
struct TreeJson<'a> {
    /// The newest answer of the session named.
    current: Option<String>,
    edges: Vec<EdgeJson>,
    /// Sessions whose history could not be read (they may be forks of the
    /// family the tree does not show).
    left_out: &'a [SessionId],
    nodes: Vec<NodeJson<'a>>,
    sessions: Vec<SessionJson<'a>>,
}

#[derive(Serialize)]
struct EdgeJson {
    child: String,
    parent: String,
}

#[derive(Serialize)]
struct NodeJson<'a> {
    files: Option<u64>,
    /// The sessions whose newest answer it is.
    heads: Vec<&'a SessionId>,
    id: String,
    input_tokens: u64,
    instruction: &'a str,
    output_tokens: u64,
    parent: Option<String>,
    session: &'a SessionId,
    time: String,
}

#[derive(Serialize)]
struct SessionJson<'a> {
    deleted: bool,
    head: Option<String>,
    id: &'a SessionId,
    label: &'a str,
    name: Option<&'a str>,
}

fn json(tree: &Tree) -> TreeJson<'_> {
    let hex = |k: usize| tree.nodes[k].id.to_hex();
    TreeJson {
        current: tree.current.map(hex),
        edges: tree
            .nodes
            .iter()
            .filter_map(|n| {
                Some(EdgeJson {
                    child: n.id.to_hex(),
                    parent: hex(n.parent?),
                })
            })
            .collect(),
        left_out: &tree.left_out,
        nodes: tree
            .nodes
            .iter()
            .map(|n| NodeJson {
                files: n.files,
                heads: n.heads.iter().map(|&m| &tree.members[m].id).collect(),
                id: n.id.to_hex(),
                input_tokens: n.input_tokens,
                instruction: &n.instruction,
                output_tokens: n.output_tokens,
                parent: n.parent.map(hex),
                session: &n.session,
                time: rfc3339(n.time_ms),
            })
            .collect(),
        sessions: tree
            .members
            .iter()
            .map(|m| SessionJson {
                deleted: m.deleted,
                head: m.head.map(hex),
                id: &m.id,
                label: &m.label,
                name: m.name.as_deref(),
            })
            .collect(),
    }
}

/// Say on stderr which sessions could not be read.
fn warn_left_out(tree: &Tree) {
    if tree.left_out.is_empty() {
        return;
    }
    render::line(&format!(
        "hel: warning: {} could not be read and may be forks this tree does not show: {}",
        render::count(tree.left_out.len() as u64, "session", "sessions"),
        tree.left_out
            .iter()
            .map(SessionId::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    ));
}

/// `hel sessions tree`.
pub fn tree(store: &Store, project: &Path, spec: &str, as_json: bool) -> Result<u8, Exit> {
    let id = hel_agent::resolve_session(store, project, spec)?;
    let tree = family(store, &id)?;
    if as_json {
        print_json(&json(&tree));
        warn_left_out(&tree);
        return Ok(0);
    }
    if tree.nodes.is_empty() {
        say!("session {id} has no answer yet");
    }
    let shown = lines(&tree, render::stdout_room(), hel_store::time::now_ms());
    {
        use std::io::Write;
        let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
        for l in &shown {
            let _ = writeln!(out, "{}", hel_agent::text::escape_text(l));
        }
    }
    warn_left_out(&tree);
    Ok(0)
}

/// The answer `/tree` picked.
pub(crate) struct Picked {
    /// A session whose history holds it (what `Start::Fork` names).
    pub session: String,
    /// Its whole checkpoint id.
    pub at: String,
    /// Its session was deleted: its files cannot be put back (a restore
    /// compares with what that session recorded last).
    pub deleted: bool,
}

/// The prompt's `/tree`: draw the family of `session` (the prompt's) on
/// the terminal, then `ask` which answer to continue from. None when the
/// user gave none (or one that is not in the tree, which is said).
pub(crate) fn pick(
    root: &Path,
    session: &str,
    ask: impl FnOnce(&str) -> Option<String>,
) -> Result<Option<Picked>, Exit> {
    let store = Store::open(root)?;
    let id = hel_agent::resolve_session(&store, root, session)?;
    let tree = family(&store, &id)?;
    if tree.nodes.is_empty() {
        return Err(Refusal::NoAnswerYet.into());
    }
    let room = render::width();
    for l in lines(&tree, Some(room), hel_store::time::now_ms()) {
        say!("{}", hel_agent::text::escape_text(&l));
    }
    warn_left_out(&tree);
    let Some(answer) = ask("hel: continue from which answer? its id (Enter: stay here) ") else {
        return Ok(None);
    };
    let spec = answer.trim().to_ascii_lowercase();
    if spec.is_empty() {
        return Ok(None);
    }
    if spec.len() < 4 || !spec.chars().all(|c| c.is_ascii_hexdigit()) {
        render::line(&format!(
            "hel: {} is no answer's id (4 or more of the hex digits the tree shows); the session goes on where it was",
            escape_line(&spec)
        ));
        return Ok(None);
    }
    let found: Vec<&Node> = tree
        .nodes
        .iter()
        .filter(|n| n.id.to_hex().starts_with(&spec))
        .collect();
    match found.as_slice() {
        [n] => Ok(Some(Picked {
            session: n.via.to_string(),
            at: n.id.to_hex(),
            deleted: tree.members.iter().any(|m| m.deleted && m.id == n.session),
        })),
        [] => {
            render::line(&format!(
                "hel: no answer {spec} in this tree; the session goes on where it was"
            ));
            Ok(None)
        }
        _ => {
            render::line(&format!(
                "hel: {spec} names more than one answer: give more digits; the session goes on where it was"
            ));
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> ObjectId {
        ObjectId::from_bytes([n; 32])
    }

    fn node(n: u8, parent: Option<usize>, heads: Vec<usize>) -> Node {
        Node {
            id: id(n),
            session: "0190e4a0-0000-7000-8000-000000000001".parse().unwrap(),
            parent,
            time_ms: 0,
            instruction: format!("instruction {n}"),
            files: Some(1),
            input_tokens: 10,
            output_tokens: 2,
            heads,
            via: "0190e4a0-0000-7000-8000-000000000001".parse().unwrap(),
        }
    }

    fn member(n: u8) -> Member {
        Member {
            id: format!("0190e4a0-0000-7000-8000-0000000000{n:02}")
                .parse()
                .unwrap(),
            name: None,
            label: format!("session {n}"),
            head: None,
            deleted: false,
        }
    }

    fn tree(nodes: Vec<Node>) -> Tree {
        Tree {
            nodes,
            members: (0..3).map(member).collect(),
            current: Some(0),
            left_out: Vec::new(),
        }
    }

    #[test]
    fn branches_join_the_answer_they_were_forked_at() {
        // A fork made at answer 3 with one answer of its own (1), while
        // the session went on (2, then 0).
        let t = tree(vec![
            node(5, Some(2), vec![0]),
            node(4, Some(3), vec![1]),
            node(3, Some(3), vec![]),
            node(2, Some(4), vec![]),
            node(1, None, vec![]),
        ]);
        assert_eq!(graph(&t), ["@", "│ ●", "○ │", "○─╯", "○"]);
        // Two forks: one at 3 crossing the lane of one at 4.
        let t = tree(vec![
            node(5, Some(3), vec![0]),
            node(4, Some(4), vec![1]),
            node(3, Some(3), vec![2]),
            node(2, Some(4), vec![]),
            node(1, None, vec![]),
        ]);
        assert_eq!(graph(&t), ["@", "│ ●", "│ │ ●", "○─┼─╯", "○─╯"]);
        // A branch that starts below a join opens a lane again.
        let t = tree(vec![
            node(6, Some(2), vec![0]),
            node(5, Some(2), vec![1]),
            node(4, Some(4), vec![]),
            node(3, Some(4), vec![2]),
            node(2, None, vec![]),
        ]);
        assert_eq!(graph(&t), ["@", "│ ●", "○─╯", "│ ●", "○─╯"]);
    }

    #[test]
    fn lines_fit_40_and_200_columns_and_keep_the_id() {
        // Twenty forks of the root, each one answer, all still open while
        // the root's own answers are drawn: a graph 40 columns wide.
        let mut nodes: Vec<Node> = (0..20).map(|k| node(100 + k, Some(20), vec![])).collect();
        nodes.push(node(1, None, vec![]));
        nodes[0].heads = vec![0];
        nodes[3].instruction = "fix the \u{1b}[2J login bug with 한국어 words".into();
        let t = Tree {
            nodes,
            members: vec![Member {
                id: "0190e4a0-0000-7000-8000-000000000001".parse().unwrap(),
                name: None,
                label: "a label \u{7} long enough to be cut at thirty columns".into(),
                head: Some(0),
                deleted: false,
            }],
            current: Some(0),
            left_out: Vec::new(),
        };
        let graphs = graph(&t);
        assert_eq!(graphs[20], format!("○{}╯", "─┴".repeat(18) + "─"));
        for room in [40, 200] {
            let shown = lines(&t, Some(room), 0);
            assert_eq!(shown.len(), 21);
            for (k, l) in shown.iter().enumerate() {
                assert!(render::columns(l) <= room, "{room}: {l:?}");
                assert!(!l.contains('\u{1b}') && !l.contains('\u{7}'), "{l:?}");
                let shown_graph = l.split("  ").next().unwrap();
                match room {
                    200 => assert!(l.starts_with(&graphs[k]), "{l:?}"),
                    _ => assert!(
                        render::columns(shown_graph) <= 18
                            && (shown_graph == graphs[k] || shown_graph.ends_with('…')),
                        "{l:?}"
                    ),
                }
                assert!(l.contains(&t.nodes[k].id.to_hex()[..8]), "{l:?}");
            }
            if room == 200 {
                let id = &t.nodes[3].id.to_hex()[..12];
                assert!(
                    shown[3].contains(id) && shown[3].ends_with("words"),
                    "{:?}",
                    shown[3]
                );
                assert!(
                    shown[0].contains("[a label ^G long enough to be …] instruction 100"),
                    "{:?}",
                    shown[0]
                );
            } else {
                assert!(
                    shown[20].starts_with("○─┴─┴─┴─┴─┴─┴─┴─┴…  "),
                    "{:?}",
                    shown[20]
                );
            }
        }
    }
}
