//! `hel_store::purge`: a session's history rewritten by a [`Purger`], its
//! fork moved onto the new history (the purged session last), the old
//! records gone from every journal at once and from the store after gc;
//! a rewrite that a load would refuse writes nothing.

use std::path::Path;

use hel_store::purge::{Purged, Purger};
use hel_store::{CommitInput, Leaf, ObjectId, SessionId, SessionState, Store};
use serde_json::{json, Value};

const VALUE: &str = "hunter2-but-longer-Xq93";
const HANDLE: &str = "‹secret:test:1›";

/// Replaces `VALUE` (and, when `break_calls`, the role of every tool
/// result: a conversation a load refuses).
struct Replace {
    break_calls: bool,
}

impl Purger for Replace {
    fn text(&mut self, text: &str) -> Option<String> {
        if self.break_calls && text == "tool" {
            return Some("nobody".into());
        }
        text.contains(VALUE).then(|| text.replace(VALUE, HANDLE))
    }
    fn file(&mut self, bytes: &[u8]) -> bool {
        bytes.windows(VALUE.len()).any(|w| w == VALUE.as_bytes())
    }
}

fn turn(i: usize, text: &str) -> Vec<Value> {
    vec![
        json!({"role": "user", "content": format!("step {i}")}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("call-{i}"), "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": format!("call-{i}"), "content": text}),
        json!({"role": "assistant", "content": format!("done {i}")}),
    ]
}

/// Commit `msgs` (the whole conversation) after the conversation `done`
/// of the last checkpoint (its leaves).
fn commit(
    store: &Store,
    lease: &hel_store::SessionLease,
    state: &mut SessionState,
    msgs: &[Value],
    leaves: &mut Vec<Option<Leaf>>,
) -> ObjectId {
    leaves.resize(msgs.len(), None);
    let input = CommitInput::new(
        hel_store::Record::Answer,
        msgs,
        leaves,
        "/project",
        hel_store::SessionRecord::of(hel_store::RequestConfig::bare("test", "m")),
    )
    .instruction("step")
    .why("test");
    let c = store.commit(lease, state, input).unwrap();
    for (i, leaf) in c.new_leaves.iter().enumerate() {
        leaves[c.leaves_from + i] = Some(*leaf);
    }
    c.id
}

/// Which files under `dir` hold `VALUE`, every zstd frame decompressed.
fn holding(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for (path, bytes) in hel_store::testing::files_under(dir) {
        let mut texts = vec![bytes.clone()];
        for at in 0..bytes.len().saturating_sub(3) {
            if bytes[at..at + 4] != [0x28, 0xB5, 0x2F, 0xFD] {
                continue;
            }
            let frame = &bytes[at..];
            let Ok(len) = zstd::zstd_safe::find_frame_compressed_size(frame) else {
                continue;
            };
            let plain = zstd::bulk::Decompressor::new()
                .and_then(|mut d| d.decompress(&frame[..len], 64 << 20))
                .or_else(|_| {
                    zstd::bulk::Decompressor::with_dictionary(hel_store::DICTIONARY)
                        .and_then(|mut d| d.decompress(&frame[..len], 64 << 20))
                });
            if let Ok(p) = plain {
                texts.push(p);
            }
        }
        if texts
            .iter()
            .any(|t| t.windows(VALUE.len()).any(|w| w == VALUE.as_bytes()))
        {
            out.push(path.display().to_string());
        }
    }
    out
}

/// A session of three checkpoints holding `VALUE` (once in a message over
/// 16 KiB, stored as its own blob), and a fork of its second that went on.
fn two_sessions(store: &Store) -> (SessionId, SessionId, Vec<Value>, Vec<Value>) {
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut leaves = Vec::new();
    let mut msgs = turn(0, &format!("read {VALUE}"));
    commit(store, &lease, &mut state, &msgs, &mut leaves);
    msgs.extend(turn(1, &format!("{}{VALUE}", "x".repeat(20_000))));
    let second = commit(store, &lease, &mut state, &msgs, &mut leaves);
    msgs.extend(turn(2, "nothing"));
    commit(store, &lease, &mut state, &msgs, &mut leaves);
    let (fork, first, _) = store.fork(&second).unwrap();
    let loaded = store.load(&first).unwrap();
    let mut fstate = loaded.state;
    let mut fleaves: Vec<Option<Leaf>> = loaded.leaves.iter().copied().map(Some).collect();
    let mut fmsgs = loaded.messages.clone();
    fmsgs.extend(turn(3, &format!("again {VALUE}")));
    commit(store, &fork, &mut fstate, &fmsgs, &mut fleaves);
    (lease.session().clone(), fork.session().clone(), msgs, fmsgs)
}

fn replaced(msgs: &[Value]) -> Vec<Value> {
    let text = serde_json::to_string(msgs).unwrap().replace(VALUE, HANDLE);
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_purge_moves_the_session_and_its_fork_and_leaves_no_byte_of_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (session, fork, msgs, fmsgs) = two_sessions(&store);
    let root = dir.path().join(".hel");
    assert!(!holding(&root).is_empty());
    let old = store.head(&session).unwrap();
    let done: Purged =
        hel_store::purge::purge(&store, &session, &mut Replace { break_calls: false }).unwrap();
    let moved: Vec<&SessionId> = done.moved.iter().map(|m| &m.session).collect();
    assert_eq!(moved, [&fork, &session], "the purged session moves last");
    assert_eq!(done.moved[1].old, old);
    assert_eq!(done.moved[1].new, store.head(&session).unwrap());
    assert_eq!(done.journals, 2);
    // The journals were written again: nothing holds the value, before gc.
    assert_eq!(holding(&root), Vec::<String>::new());
    for (id, want) in [(&session, &msgs), (&fork, &fmsgs)] {
        let loaded = store.load(&store.head(id).unwrap()).unwrap();
        assert_eq!(loaded.messages, replaced(want));
        assert!(loaded.checkpoint.meter.is_null());
    }
    assert_eq!(hel_store::log::log(&store, &session).unwrap().len(), 3);
    assert!(hel_store::fsck::fsck(&store).unwrap().is_sound());
    hel_store::gc::gc(&store, false).unwrap();
    assert!(hel_store::fsck::fsck(&store).unwrap().is_sound());
    // The records the next push replaces on a remote.
    let recorded = hel_store::purge::replaced(&store, &session).unwrap();
    assert!(recorded.contains(&old));
    assert_eq!(recorded.len(), 3);
    // Again: nothing found, nothing moves.
    let again =
        hel_store::purge::purge(&store, &session, &mut Replace { break_calls: false }).unwrap();
    assert!(again.moved.is_empty() && again.journals == 0);
}

#[test]
fn a_rewrite_a_load_would_refuse_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (session, fork, _, _) = two_sessions(&store);
    let heads = (store.head(&session).unwrap(), store.head(&fork).unwrap());
    let files = hel_store::testing::files_under(&dir.path().join(".hel"));
    let e = hel_store::purge::purge(&store, &session, &mut Replace { break_calls: true });
    assert!(e.is_err(), "{e:?}");
    assert_eq!(
        (store.head(&session).unwrap(), store.head(&fork).unwrap()),
        heads
    );
    let mut after = hel_store::testing::files_under(&dir.path().join(".hel"));
    let mut before = files;
    after.retain(|(p, _)| !p.ends_with("summaries"));
    before.retain(|(p, _)| !p.ends_with("summaries"));
    after.sort();
    before.sort();
    assert_eq!(after.len(), before.len());
    assert!(after == before, "nothing written");
}
