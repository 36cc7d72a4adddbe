//! Property tests of hel-store: vectors, commit cost, dedup, fork, log,
//! delete/gc, locks, corruption, a randomized model check, SIGKILL crash
//! tests and the concurrent gc stress test.
//!
//! The crash and stress tests re-run this test binary as child processes
//! (`child_*` tests, ignored unless `HEL_STORE_CHILD` is set).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hel_store::testing;
use hel_store::{
    canonical, CommitInput, Committed, Error, Leaf, Loaded, ObjectId, SessionId, SessionLease,
    SessionState, Store,
};
use serde_json::{json, Value};

/// A conversation as hel keeps it: the messages and, per message, where
/// the last checkpoint stores it (None for a new or changed message).
#[derive(Clone, Default)]
struct Conv {
    msgs: Vec<Value>,
    leaves: Vec<Option<Leaf>>,
}

impl Conv {
    fn from_loaded(l: &Loaded) -> Conv {
        Conv {
            msgs: l.messages.clone(),
            leaves: l.leaves.iter().copied().map(Some).collect(),
        }
    }
    fn push(&mut self, m: Value) {
        self.msgs.push(m);
        self.leaves.push(None);
    }
    fn extend(&mut self, ms: &[Value]) {
        for m in ms {
            self.push(m.clone());
        }
    }
    /// Replace `start..end` by `with` new messages.
    fn splice(&mut self, start: usize, end: usize, with: Vec<Value>) {
        let n = with.len();
        self.msgs.splice(start..end, with);
        self.leaves.splice(start..end, std::iter::repeat_n(None, n));
    }
    fn input(&self) -> CommitInput<'_> {
        input(&self.msgs, &self.leaves)
    }
    fn committed(&mut self, c: &Committed) {
        for (i, leaf) in c.new_leaves.iter().enumerate() {
            self.leaves[c.leaves_from + i] = Some(*leaf);
        }
    }
    fn commit(
        &mut self,
        store: &Store,
        lease: &SessionLease,
        state: &mut SessionState,
    ) -> Committed {
        let c = store.commit(lease, state, self.input()).unwrap();
        self.committed(&c);
        c
    }
}

fn input<'a>(messages: &'a [Value], leaves: &'a [Option<Leaf>]) -> CommitInput<'a> {
    CommitInput::new(
        hel_store::Record::Answer,
        messages,
        leaves,
        "/project",
        hel_store::SessionRecord::of(hel_store::RequestConfig::bare("test", "m")),
    )
    .instruction(
        messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or(""),
    )
    .why("test")
}

/// Commit `msgs` whole as a new session's first checkpoint.
fn commit_new(
    store: &Store,
    lease: &SessionLease,
    state: &mut SessionState,
    msgs: &[Value],
) -> Committed {
    let mut conv = Conv::default();
    conv.extend(msgs);
    conv.commit(store, lease, state)
}

/// The journal of `session` in the store at `root` (a `.hel`).
fn journal_path(root: &Path, session: &SessionId) -> PathBuf {
    root.join("packs/journals")
        .join(format!("{session}.journal"))
}

fn root(dir: &Path) -> PathBuf {
    dir.join(".hel")
}

fn msg(role: &str, text: impl Into<String>) -> Value {
    json!({"role": role, "content": text.into()})
}

/// A deterministic conversation of `n` messages for session tag `tag`.
fn conversation(tag: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| match i % 4 {
            0 => msg("user", format!("{tag} instruction {i}")),
            1 => json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{i}"), "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}),
            2 => json!({"role": "tool", "tool_call_id": format!("c{}", i - 1), "content": format!("{tag} output {i} {}", "x".repeat(i % 50))}),
            _ => msg("assistant", format!("{tag} answer {i}")),
        })
        .collect()
}

struct Rng(fastrand::Rng);
impl Rng {
    fn seeded() -> Rng {
        let seed = std::env::var("HEL_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| hel_store::time::now_ms() ^ std::process::id() as u64);
        eprintln!("seed {seed} (set HEL_TEST_SEED to repeat)");
        Rng(fastrand::Rng::with_seed(seed))
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0.u64(..n.max(1))
    }
}

fn commit_all(
    store: &Store,
    lease: &SessionLease,
    state: &mut SessionState,
    conv: &mut Conv,
    messages: &[Value],
    step: usize,
) -> Vec<ObjectId> {
    let mut ids = Vec::new();
    let mut end = conv.msgs.len();
    while end < messages.len() {
        let next = (end + step).min(messages.len());
        conv.extend(&messages[end..next]);
        end = next;
        ids.push(conv.commit(store, lease, state).id);
    }
    ids
}

#[test]
fn test_vectors_match_objects_spec() {
    let text = include_str!("../../../objects-spec/vectors.json");
    let doc: Value = serde_json::from_str(text).unwrap();
    let vectors = doc["vectors"].as_array().unwrap();
    assert!(vectors.len() >= 5);
    for v in vectors {
        let kind = v["kind"].as_str().unwrap();
        assert!(["blob", "list", "snapshot"].contains(&kind), "{kind}");
        let payload = if let Some(json) = v.get("json") {
            let bytes = canonical::to_vec(json);
            assert_eq!(
                std::str::from_utf8(&bytes).unwrap(),
                v["canonical"].as_str().unwrap(),
                "{}",
                v["name"]
            );
            bytes
        } else {
            let hex = v["payload_hex"].as_str().unwrap();
            (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect()
        };
        let (id, _) = testing::encode(kind, &payload);
        assert_eq!(id.to_hex(), v["id"].as_str().unwrap(), "{}", v["name"]);
        if kind == "snapshot" {
            // A snapshot a reader takes (its two times agreeing, say); one
            // of another schema would be refused.
            let schema = serde_json::from_slice::<Value>(&payload).unwrap()["schema_version"]
                .as_u64()
                .unwrap();
            assert_eq!(
                hel_store::parse::snapshot(&payload),
                schema == hel_store::SCHEMA_VERSION,
                "{}",
                v["name"]
            );
        }
    }
}

#[test]
fn store_dir_is_private_and_ignored() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let _lease = store.new_session().unwrap();
    let mode = fs::metadata(dir.path().join(".hel"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    assert_eq!(
        fs::read_to_string(dir.path().join(".hel/.gitignore")).unwrap(),
        "*\n"
    );
}

#[test]
fn commit_cost_is_new_content_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let all = conversation("s", 4004);
    let mut conv = Conv::default();
    commit_all(&store, &lease, &mut state, &mut conv, &all[..4000], 4);
    // Append 4 small messages to a 4,000-message session: one list node
    // holding them and one snapshot.
    conv.extend(&all[4000..]);
    let c = conv.commit(&store, &lease, &mut state);
    assert_eq!(c.objects_written, 2);
    let new_bytes: usize = all[4000..].iter().map(|m| canonical::to_vec(m).len()).sum();
    assert!(
        (c.bytes_written as usize) < new_bytes + 4096,
        "wrote {} bytes for {new_bytes} bytes of new messages",
        c.bytes_written
    );
    let back = store.load(&c.id).unwrap().messages;
    assert_eq!(back, all);
}

/// `n` bytes no compressor can shrink.
fn noise(seed: &str, n: usize) -> String {
    let mut bytes = vec![0u8; n / 2];
    blake3::Hasher::new()
        .update(seed.as_bytes())
        .finalize_xof()
        .fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn journal_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir.join(".hel/packs/journals"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".journal"))
                .map(|e| e.metadata().unwrap().len())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn large_content_is_stored_once_across_sessions_and_survives_its_first_owner() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let big = noise("shared", 100_000);
    let msgs = vec![
        msg("user", "same"),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "t", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "t", "content": big}),
    ];
    let mut sessions = Vec::new();
    for _ in 0..3 {
        let lease = store.new_session().unwrap();
        let c = commit_new(&store, &lease, &mut SessionState::default(), &msgs);
        sessions.push((lease.session().clone(), c.id));
    }
    // The large message is stored once; each session writes its small
    // objects (list node, config, cursors, snapshot) itself.
    assert!(
        journal_bytes(dir.path()) < 100_000 + 20_000,
        "{} bytes of journals",
        journal_bytes(dir.path())
    );
    // Once a session shares the large object of the first one's journal,
    // it depends on that journal anyway and shares its small ones too: each
    // later session writes only its snapshot.
    let _ = &sessions;
    let report = hel_store::fsck::fsck(&store).unwrap();
    assert_eq!(report.objects, 5 + 1 + 1, "{report:?}");
    // The first owner goes: what the others share moves to a sealed pack,
    // and only its own snapshot goes with it.
    let report = store.delete(&sessions[0].0, true).unwrap().unwrap();
    assert_eq!(report.objects_removed, 1, "{report:?}");
    assert_eq!(
        fs::read_dir(dir.path().join(".hel/packs"))
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".pack"))
            .count(),
        1
    );
    for (_, head) in &sessions[1..] {
        assert_eq!(store.load(head).unwrap().messages, msgs);
    }
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(fsck.is_sound() && fsck.unreachable == Some(0), "{fsck:?}");
}

#[test]
fn compaction_names_the_kept_tail_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut all = conversation("c", 200);
    all[170] = json!({"role": "tool", "tool_call_id": "c169", "content": "big ".repeat(10_000)}); // stored as a blob
    let mut conv = Conv::default();
    commit_all(&store, &lease, &mut state, &mut conv, &all, 4);
    // Compaction: [1..148) becomes one summary message (the tail starts
    // with a user message, as compaction's tail never starts with a result).
    conv.splice(
        1,
        148,
        vec![msg("user", "<compacted-summary>s</compacted-summary>")],
    );
    let compacted = conv.msgs.clone();
    let before = hel_store::fsck::fsck(&store).unwrap().objects;
    let c = conv.commit(&store, &lease, &mut state);
    // One list node (the summary inline, the tail as slices) and the snapshot.
    assert_eq!(c.objects_written, 2);
    assert_eq!(hel_store::fsck::fsck(&store).unwrap().objects, before + 2);
    let cp = store.checkpoint(&c.id).unwrap();
    let items = testing::node_items(&store, &cp.messages.root.unwrap());
    // Position 0 is carried too: a slice, the summary, then one slice per
    // node that held part of the tail.
    assert_eq!(items.len(), 2 + 13, "{items:?}");
    assert_eq!(items[1], 'm');
    assert_eq!(items.iter().filter(|c| **c == 's').count(), items.len() - 1);
    assert_eq!(store.load(&c.id).unwrap().messages, compacted);
    // The next commit after compaction appends as usual, and gc keeps the
    // sliced nodes (not their history) alive.
    conv.push(msg("user", "after"));
    let c2 = conv.commit(&store, &lease, &mut state);
    assert_eq!(c2.objects_written, 2);
    assert_eq!(store.load(&c2.id).unwrap().messages, conv.msgs);
    hel_store::gc::gc(&store, false).unwrap();
    assert_eq!(store.load(&c2.id).unwrap().messages, conv.msgs);
    assert!(hel_store::fsck::fsck(&store).unwrap().is_sound());
}

#[test]
fn a_carried_leaf_the_last_checkpoint_does_not_hold_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let a = store.new_session().unwrap();
    let b = store.new_session().unwrap();
    let (mut sa, mut sb) = (SessionState::default(), SessionState::default());
    let mut ca = Conv::default();
    ca.extend(&conversation("a", 4));
    ca.commit(&store, &a, &mut sa);
    let mut cb = Conv::default();
    cb.extend(&conversation("b", 4));
    let head_b = cb.commit(&store, &b, &mut sb).id;
    // b claims a message of a's checkpoint: a bookkeeping bug.
    cb.push(msg("user", "next"));
    cb.leaves[1] = ca.leaves[1];
    let err = store.commit(&b, &mut sb, cb.input()).unwrap_err();
    assert!(matches!(err, Error::Internal(_)), "{err}");
    assert!(err.to_string().contains("message 1"), "{err}");
    assert_eq!(store.head(b.session()).unwrap(), head_b);
    // Mismatched lengths too.
    let err = store
        .commit(&b, &mut sb, input(&cb.msgs, &cb.leaves[..2]))
        .unwrap_err();
    assert!(matches!(err, Error::Internal(_)), "{err}");
}

#[test]
fn spill_is_kept_by_blob_and_survives_forks() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let sid = lease.session().clone();
    hel_store::spill::write(
        &store,
        &lease,
        "out-1.txt",
        "spilled".repeat(1000).as_bytes(),
    )
    .unwrap();
    let name = format!(".hel/sessions/{sid}/spill/out-1.txt");
    let mut state = SessionState::default();
    let mut conv = Conv::default();
    conv.extend(&conversation("p", 4));
    let mut inp = conv.input();
    inp = inp.spill(vec![(name.clone(), "out-1.txt".into())]);
    let c = store.commit(&lease, &mut state, inp).unwrap();
    let (fork_lease, fork_id, _) = store.fork(&c.id).unwrap();
    drop(fork_lease);
    drop(lease);
    store.delete(&sid, true).unwrap();
    let loaded = store.load(&fork_id).unwrap();
    let entry = &loaded.state.spill()[&name];
    assert_eq!(
        hel_store::spill::read(&store, entry).unwrap(),
        "spilled".repeat(1000).as_bytes()
    );
    assert!(hel_store::fsck::fsck(&store).unwrap().is_sound());
}

/// Schema 3 (store format 6): the spill map is a blob of its own, written
/// once while nothing new spills, so a checkpoint costs what is new; the
/// next spill gives a new map holding the old entries too.
#[test]
fn the_spill_map_is_one_blob_until_something_new_spills() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let sid = lease.session().clone();
    let (mut state, mut conv) = (SessionState::default(), Conv::default());
    let mut maps = Vec::new();
    for k in 0..4 {
        conv.extend(&conversation(&format!("s{k}"), 4));
        let mut inp = conv.input();
        if k == 0 || k == 3 {
            let file = format!("out-{k}.txt");
            hel_store::spill::write(&store, &lease, &file, format!("spill {k}").as_bytes())
                .unwrap();
            inp = inp.spill(vec![(format!(".hel/sessions/{sid}/spill/{file}"), file)]);
        }
        let c = store.commit(&lease, &mut state, inp).unwrap();
        let cp = store.checkpoint(&c.id).unwrap();
        assert_eq!(cp.schema_version, 3);
        let hel_store::Spill::Blob(map) = cp.spill else {
            panic!("an inline map in schema 3: {:?}", cp.spill)
        };
        let entries = hel_store::spill::map(&store, &cp).unwrap();
        maps.push((map, entries.len(), c.objects_written));
    }
    assert_eq!(maps[0].0, maps[1].0);
    assert_eq!(maps[1].0, maps[2].0);
    assert_ne!(maps[2].0, maps[3].0);
    assert_eq!(maps.iter().map(|m| m.1).collect::<Vec<_>>(), [1, 1, 1, 2]);
    // The checkpoints between spills write a list node and a snapshot,
    // not the map again.
    assert_eq!((maps[1].2, maps[2].2), (2, 2), "{maps:?}");
    let report = hel_store::fsck::fsck(&store).unwrap();
    assert!(report.is_sound(), "{:?}", report.faults);
}

/// A spill map blob that is not a map of spill entries is a fault naming
/// the blob, for a load, fsck and gc alike (gc sweeps nothing).
#[test]
fn a_malformed_spill_map_is_a_fault_naming_its_blob() {
    for bad in [
        &b"[]"[..],
        b"{\"k\": {\"blob\": \"zz\", \"size\": 1}}",
        b"{\"\": {\"blob\": \"00\", \"size\": 1}}",
        b"not json",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let r = root(dir.path());
        let (_, planted) = planted_store_with_spill(
            dir.path(),
            &[msg("user", "x"), msg("assistant", "y")],
            json!({}),
        );
        let store = Store::open(dir.path()).unwrap();
        let old = store.checkpoint(&planted).unwrap();
        let (map, canonical) = testing::encode("blob", bad);
        testing::plant(&r, &canonical);
        let mut v = serde_json::to_value(&old).unwrap();
        v["schema_version"] = 3.into();
        v["record"] = "answer".into();
        v["spill"] = map.to_hex().into();
        let (snap, canonical) = testing::encode("snapshot", &canonical::to_vec(&v));
        testing::plant(&r, &canonical);
        testing::publish(&r, &old.session_id, &snap);
        let err = store.load(&snap).unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { id, .. } if *id == map),
            "{}: {err}",
            String::from_utf8_lossy(bad)
        );
        assert!(err.to_string().contains("spill map"), "{err}");
        let report = hel_store::fsck::fsck(&store).unwrap();
        assert!(!report.is_sound());
        assert!(
            report
                .faults
                .iter()
                .any(|f| f.to_string().contains(&map.to_hex())),
            "{:?}",
            report.faults
        );
        let gc = hel_store::gc::gc(&store, false);
        assert!(gc.is_err(), "{gc:?}");
    }
}

/// Also for a spill blob over 1 MiB, of which fsck keeps only the length
/// while it runs.
#[test]
fn a_spill_entry_whose_size_is_not_its_blobs_is_refused_and_a_fault() {
    let big = "spilled".repeat(200_000);
    for (content, size, sound) in [
        ("spilled", 7u64, true),
        ("spilled", 8, false),
        ("spilled", 0, false),
        (&big[..], big.len() as u64, true),
        (&big[..], big.len() as u64 - 1, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (blob, canonical) = testing::encode("blob", content.as_bytes());
        testing::plant(&root(dir.path()), &canonical);
        let spill = json!({"k": {"blob": blob.to_hex(), "size": size}});
        let (_, head) = planted_store_with_spill(
            dir.path(),
            &[msg("user", "x"), msg("assistant", "y")],
            spill,
        );
        let store = Store::open(dir.path()).unwrap();
        let cp = store.checkpoint(&head).unwrap();
        let entry = hel_store::spill::map(&store, &cp).unwrap()["k"].clone();
        let report = hel_store::fsck::fsck(&store).unwrap();
        let faults: Vec<String> = report.faults.iter().map(|f| f.to_string()).collect();
        assert_eq!(report.is_sound(), sound, "size {size}: {faults:?}");
        if sound {
            assert_eq!(
                hel_store::spill::read(&store, &entry).unwrap(),
                content.as_bytes()
            );
            continue;
        }
        let err = hel_store::spill::read(&store, &entry).unwrap_err();
        let says = format!(
            "spill blob of {} bytes where a snapshot says {size}",
            content.len()
        );
        assert!(
            matches!(&err, Error::Corrupt { id, reason, .. } if *id == blob && *reason == says),
            "{err}"
        );
        assert!(faults.iter().any(|f| f.contains(&says)), "{faults:?}");
    }
}

/// A message blob over 1 MiB, whose bytes fsck does not keep while it
/// runs: the load that checks the conversation reads it again, and a
/// damaged byte in it is a fault naming it.
#[test]
fn fsck_loads_a_message_over_a_mebibyte_and_names_damage_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut msgs = conversation("x", 8);
    msgs[3] = msg("assistant", "long ".repeat(300_000));
    commit_new(&store, &lease, &mut state, &msgs);
    drop(lease);
    let report = hel_store::fsck::fsck(&store).unwrap();
    assert!(report.is_sound(), "{:?}", report.faults);
    assert_eq!(report.unreachable, Some(0));
    let (blob, _) = testing::encode("blob", &canonical::to_vec(&msgs[3]));
    let journal = journal_path(&root(dir.path()), &state_session(&store));
    let good = fs::read(&journal).unwrap();
    fs::write(&journal, with_stored_byte_flipped(&good, &blob, 30).1).unwrap();
    let fsck = hel_store::fsck::fsck(&Store::open(dir.path()).unwrap()).unwrap();
    let faults: Vec<String> = fsck.faults.iter().map(|f| f.to_string()).collect();
    assert!(
        !fsck.is_sound() && faults[0].contains(&blob.to_hex()),
        "{faults:?}"
    );
}

/// fsck checks each session's conversation without holding it (the
/// pairing of tool calls on what it needs of each message): a tool call
/// left without its result, in a list read on one thread and in one read
/// on two, is a fault naming the checkpoint, as the load that fails on it.
#[test]
fn fsck_names_a_tool_call_without_its_result_in_short_and_long_lists() {
    for (len, at) in [(40, 23), (2_600, 2_399)] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let lease = store.new_session().unwrap();
        let mut state = SessionState::default();
        let mut msgs = conversation("p", len);
        let good = commit_new(&store, &lease, &mut state, &msgs).id;
        let report = hel_store::fsck::fsck(&store).unwrap();
        assert!(report.is_sound(), "{len}: {:?}", report.faults);
        // Message `at` becomes a call nothing answers.
        msgs[at] = json!({"role": "assistant", "content": "",
            "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "read", "arguments": "{}"}}]});
        let head =
            hel_store::testing::unadmitted(|| commit_new(&store, &lease, &mut state, &msgs).id);
        drop(lease);
        assert_ne!(good, head);
        let err = store.load(&head).unwrap_err();
        assert!(matches!(err, Error::BrokenConversation { .. }), "{err}");
        let report = hel_store::fsck::fsck(&Store::open(dir.path()).unwrap()).unwrap();
        let faults: Vec<String> = report.faults.iter().map(|f| f.to_string()).collect();
        assert!(
            faults.len() == 1
                && faults[0].contains(&head.to_hex())
                && faults[0].contains("\"c1\" has no result before message"),
            "{len}: {faults:?}"
        );
    }
}

#[test]
fn fork_is_one_snapshot_and_log_marks_the_fork_point() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let all = conversation("f", 40);
    let ids = commit_all(&store, &lease, &mut state, &mut Conv::default(), &all, 4);
    let before = hel_store::fsck::fsck(&store).unwrap().objects;
    let (fork, first, _) = store.fork(&ids[4]).unwrap();
    assert_eq!(hel_store::fsck::fsck(&store).unwrap().objects, before + 1);
    let loaded = store.load(&first).unwrap();
    assert_eq!(loaded.messages, all[..20]);
    let mut fconv = Conv::from_loaded(&loaded);
    let mut fstate = loaded.state;
    fconv.push(msg("user", "fork only"));
    fconv.push(msg("assistant", "ok"));
    let c = fconv.commit(&store, &fork, &mut fstate);
    assert_eq!(
        c.objects_written, 2,
        "the fork's first commit writes what is new"
    );

    let log = hel_store::log::log(&store, fork.session()).unwrap();
    let got: Vec<ObjectId> = log.iter().map(|e| e.id).collect();
    let mut want = vec![c.id, first];
    want.extend(ids[..5].iter().rev());
    assert_eq!(got, want);
    assert!(log[2].fork_point && !log[1].fork_point && !log[3].fork_point);
    assert_eq!(log[0].instruction, "fork only");
    assert_eq!(log[0].messages, 22);
    // The original is untouched.
    assert_eq!(store.head(lease.session()).unwrap(), *ids.last().unwrap());
    assert_eq!(
        hel_store::log::log(&store, lease.session()).unwrap().len(),
        10
    );
}

#[test]
fn leases_exclude_and_release_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let sid = lease.session().clone();
    let mut state = SessionState::default();
    commit_new(&store, &lease, &mut state, &conversation("l", 4));
    assert!(
        matches!(store.resume(&sid), Err(Error::InUse { session, holder: Some(h) }) if session == sid.as_str() && h.starts_with(&format!("pid {} since ", std::process::id())))
    );
    assert!(matches!(store.delete(&sid, true), Err(Error::InUse { .. })));
    // The lock files as objects-spec §7 says: 0600, the store lock empty,
    // the lease one line naming its holder; what a reader shows of a lease
    // file is its first line's printable ASCII, at most 100 bytes of it.
    use std::os::unix::fs::PermissionsExt;
    let r = root(dir.path());
    let lease_file = testing::session_dir(&r, &sid).join(".active");
    for f in [&lease_file, &r.join(".store.lock/lock")] {
        assert_eq!(
            fs::metadata(f).unwrap().permissions().mode() & 0o777,
            0o600,
            "{f:?}"
        );
    }
    assert_eq!(fs::metadata(r.join(".store.lock/lock")).unwrap().len(), 0);
    let line = fs::read_to_string(&lease_file).unwrap();
    let since = line
        .strip_prefix(&format!("pid {} since ", std::process::id()))
        .and_then(|t| t.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("{line:?}"));
    assert_eq!(since.len(), 24, "{since:?}");
    fs::write(
        &lease_file,
        format!("pid 1 \x1b[2Jsince é {}\nsecond line", "x".repeat(200)),
    )
    .unwrap();
    match store.resume(&sid) {
        Err(Error::InUse {
            holder: Some(h), ..
        }) => {
            assert!(h.starts_with("pid 1 [2Jsince  xxx"), "{h:?}");
            assert!(h.len() < 100 && !h.contains("second"), "{h:?}");
        }
        other => panic!("{other:?}"),
    }
    let other = store.new_session().unwrap();
    commit_new(
        &store,
        &other,
        &mut SessionState::default(),
        &conversation("o", 4),
    );
    let infos = store.sessions().unwrap();
    assert!(infos.iter().find(|s| s.id == sid).unwrap().busy);
    drop(lease);
    // Released: the note is emptied (no block kept for a closed session),
    // the file stays, and the next holder writes its own.
    assert_eq!(fs::metadata(&lease_file).unwrap().len(), 0);
    let (again, head) = store.resume(&sid).unwrap();
    assert_eq!(Some(head), state.head);
    assert!(fs::read_to_string(&lease_file)
        .unwrap()
        .starts_with(&format!("pid {} since ", std::process::id())));
    drop(again);
    // A note a killed holder left stays as it is through gc, which takes
    // idle sessions' leases for a moment without writing one (and a dry
    // run writes nothing).
    let stale = "pid 1 since 2026-01-01T00:00:00.000Z\n";
    fs::write(&lease_file, stale).unwrap();
    hel_store::gc::gc(&store, true).unwrap();
    assert_eq!(fs::read_to_string(&lease_file).unwrap(), stale);
    hel_store::gc::gc(&store, false).unwrap();
    assert_eq!(fs::read_to_string(&lease_file).unwrap(), stale);
    assert!(matches!(
        "not-a-uuid".parse::<SessionId>(),
        Err(hel_store::BadSessionId(_))
    ));
}

#[test]
fn listing_never_makes_a_concurrent_resume_fail() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let sid = {
        let lease = store.new_session().unwrap();
        commit_new(
            &store,
            &lease,
            &mut SessionState::default(),
            &conversation("r", 4),
        );
        lease.session().clone()
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let list = store.sessions().unwrap();
                assert_eq!(list.len(), 1);
            }
        });
        for _ in 0..300 {
            let (lease, _) = store
                .resume(&sid)
                .expect("a listing's probe made resume fail");
            drop(lease);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}

#[test]
fn session_without_checkpoint_is_listed_while_busy_then_collected() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let sid = lease.session().clone();
    let infos = store.sessions().unwrap();
    assert_eq!((infos[0].busy, infos[0].checkpoints), (true, 0));
    assert!(matches!(
        hel_store::log::log(&store, &sid),
        Err(Error::NoCheckpoint { .. })
    ));
    assert!(matches!(store.head(&sid), Err(Error::NoCheckpoint { .. })));
    assert!(hel_store::gc::gc(&store, false)
        .unwrap()
        .sessions_removed
        .is_empty());
    drop(lease);
    // It never had a checkpoint: it does not exist.
    assert!(store.sessions().unwrap().is_empty());
    assert!(matches!(
        hel_store::log::log(&store, &sid),
        Err(Error::NoSuchSession { .. })
    ));
    assert!(matches!(
        store.resume(&sid),
        Err(Error::NoSuchSession { .. })
    ));
    assert_eq!(
        hel_store::gc::gc(&store, false).unwrap().sessions_removed,
        vec![sid.clone()]
    );
}

#[test]
fn delete_reclaims_the_journal_at_once_and_leaves_others_intact() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let a = store.new_session().unwrap();
    let b = store.new_session().unwrap();
    let shared = msg("user", "shared message");
    let mut ma = vec![shared.clone()];
    ma.extend(conversation("a", 8));
    let mut mb = vec![shared];
    mb.extend(conversation("b", 8));
    let (mut sa, mut sb) = (SessionState::default(), SessionState::default());
    commit_new(&store, &a, &mut sa, &ma);
    let hb = commit_new(&store, &b, &mut sb, &mb).id;
    let sid = a.session().clone();
    drop(a);
    let dry = hel_store::gc::gc(&store, true).unwrap();
    assert_eq!(dry.objects_removed, 0);
    let journal = dir
        .path()
        .join(".hel/packs/journals")
        .join(format!("{sid}.journal"));
    let size = fs::metadata(&journal).unwrap().len();
    let report = store.delete(&sid, true).unwrap().unwrap();
    // a's list node, config, cursors and snapshot, with its journal (no
    // spill map: it has no spill file).
    assert_eq!(report.objects_removed, 4, "{report:?}");
    assert_eq!(report.bytes_removed, size, "{report:?}");
    assert!(!journal.exists());
    assert!(!testing::session_dir(&root(dir.path()), &sid).exists());
    assert_eq!(store.load(&hb).unwrap().messages, mb);
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(fsck.is_sound() && fsck.unreachable == Some(0), "{fsck:?}");
}

/// The id of a lease's session; the lease is released.
fn id_of(lease: SessionLease) -> SessionId {
    lease.session().clone()
}

/// A fork of a checkpoint whose session was deleted (kept in a sealed pack
/// because a fork of it reaches it) still depends on the journals that
/// checkpoint names: deleting them later keeps what the new fork needs.
/// (`hel resume B --at X0` after `hel sessions delete X`, where B is a fork
/// of X0, X a fork of Y; then `hel sessions delete B` and `... Y`.)
#[test]
fn a_fork_of_a_deleted_sessions_checkpoint_keeps_what_it_reaches() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let y = store.new_session().unwrap();
    let msgs = conversation("y", 8);
    let y_head = commit_new(&store, &y, &mut SessionState::default(), &msgs).id;
    // X's first checkpoint names Y's list: X depends on Y.
    let (x, x0, _) = store.fork(&y_head).unwrap();
    // B depends on X and Y.
    let (b, _, _) = store.fork(&x0).unwrap();
    let (x, b, y) = (id_of(x), id_of(b), id_of(y));
    store.delete(&x, false).unwrap();
    // X0 now lives in a sealed pack; its messages are still Y's.
    let (c, c0, _) = store.fork(&x0).unwrap();
    store.delete(&b, false).unwrap();
    // Y goes: what the new fork reaches of it must be copied first.
    store.delete(&y, false).unwrap();
    assert_eq!(store.load(&c0).unwrap().messages, msgs);
    // A delete with dependents marks what they reach: where the lost
    // objects showed in the randomized test (`Missing` from this delete).
    let (d, d0, _) = store.fork(&c0).unwrap();
    drop(d);
    store.delete(&id_of(c), true).unwrap();
    assert_eq!(store.load(&d0).unwrap().messages, msgs);
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(fsck.is_sound() && fsck.unreachable == Some(0), "{fsck:?}");
}

#[test]
fn corruption_gives_typed_errors_naming_the_object() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let r = root(dir.path());
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut msgs = conversation("x", 8);
    msgs[3] = msg("assistant", "long ".repeat(5_000)); // stored as a blob
    let head = commit_new(&store, &lease, &mut state, &msgs).id;
    drop(lease);
    let (blob, _) = testing::encode("blob", &canonical::to_vec(&msgs[3]));
    let journal = journal_path(&r, &state_session(&store));
    let good = fs::read(&journal).unwrap();
    let (at, bad) = with_stored_byte_flipped(&good, &blob, 30);
    fs::write(&journal, &bad).unwrap();
    let fresh = Store::open(dir.path()).unwrap();
    match fresh.load(&head) {
        Err(Error::DamagedRecord {
            id: Some(id),
            pack,
            offset,
            ..
        }) => {
            assert_eq!((id, pack, offset), (blob, journal.clone(), at as u64 - 8))
        }
        other => panic!("{other:?}"),
    }
    let fsck = hel_store::fsck::fsck(&fresh).unwrap();
    assert!(
        !fsck.is_sound() && fsck.faults[0].to_string().contains(&blob.to_hex()),
        "{fsck:?}"
    );
    assert_eq!(
        fsck.unreachable, None,
        "no garbage is reported when faults exist"
    );
    // gc refuses to sweep on a store whose structure it cannot read (a
    // damaged snapshot) rather than guess.
    let at = good
        .windows(32)
        .rposition(|w| w == blob_bytes(&head))
        .unwrap();
    let mut bad = good.clone();
    // The head's snapshot record, not the commit record that names it too.
    let snap_at = good[..at]
        .windows(32)
        .rposition(|w| w == blob_bytes(&head))
        .unwrap_or(at);
    bad[snap_at + 32 + 16 + 10] ^= 1;
    fs::write(&journal, &bad).unwrap();
    let fresh = Store::open(dir.path()).unwrap();
    assert!(
        matches!(
            hel_store::gc::gc(&fresh, false),
            Err(Error::DamagedRecord { .. })
        ),
        "gc swept a store it cannot read"
    );
    fs::write(&journal, &good).unwrap();
    // A snapshot of a newer schema, bytes that are no object, and an
    // object stored nowhere are named.
    let (id, canon) = testing::encode(
        "snapshot",
        &canonical::to_vec(&json!({"schema_version": 99})),
    );
    testing::plant(&r, &canon);
    let fresh = Store::open(dir.path()).unwrap();
    assert!(matches!(
        fresh.checkpoint(&id),
        Err(Error::NewerSchema { found: 99, .. })
    ));
    let garbage = testing::plant(&r, b"garbage");
    let fresh = Store::open(dir.path()).unwrap();
    assert!(matches!(
        fresh.checkpoint(&garbage),
        Err(Error::Corrupt { .. })
    ));
    let absent = ObjectId::of_canonical(b"absent");
    assert!(matches!(
        fresh.checkpoint(&absent),
        Err(Error::Missing { .. })
    ));
    // A torn ref is reported, not read as empty.
    let old: SessionId = "0c9e6f1a-1b2c-4d3e-8f40-123456789abc".parse().unwrap();
    fs::write(testing::ref_path(&r, &old), "abc").unwrap();
    assert!(matches!(fresh.head(&old), Err(Error::BadRef { .. })));
}

/// A long list (2,400 messages in 24 checkpoints, with a message blob of
/// over 1 MiB) reads back as committed, and damage to a node deep in its
/// chain or to a message blob it names is a fault naming that object.
#[test]
fn a_long_list_is_the_conversation_and_damage_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut msgs = conversation("t", 2_400);
    msgs[203] = msg("assistant", "long ".repeat(5_000)); // stored as a blob
    msgs[1_003] = msg("assistant", "huge ".repeat(250_000));
    let mut conv = Conv::default();
    let ids = commit_all(&store, &lease, &mut state, &mut conv, &msgs, 100);
    drop(lease);
    let head = *ids.last().unwrap();
    let fresh = Store::open(dir.path()).unwrap();
    assert_eq!(fresh.load(&head).unwrap().messages, msgs);
    let journal = journal_path(&root(dir.path()), &state_session(&store));
    let good = fs::read(&journal).unwrap();
    // The node the 5th checkpoint added (of 24): 19 nodes from the head.
    let node = fresh.checkpoint(&ids[4]).unwrap().messages.root.unwrap();
    let (blob, _) = testing::encode("blob", &canonical::to_vec(&msgs[203]));
    for damaged in [node, blob] {
        fs::write(&journal, with_stored_byte_flipped(&good, &damaged, 20).1).unwrap();
        let fresh = Store::open(dir.path()).unwrap();
        match fresh.load(&head) {
            Err(Error::DamagedRecord { id: Some(id), .. }) => assert_eq!(id, damaged),
            other => panic!("{other:?}"),
        }
    }
    fs::write(&journal, &good).unwrap();
    let fresh = Store::open(dir.path()).unwrap();
    assert_eq!(fresh.load(&head).unwrap().messages, msgs);
}

/// fsck of a journal large enough to be decoded on two threads: every
/// record is counted once, and a record whose check holds but whose
/// bytes are not its object's (rewritten with a check to match) is one
/// fault naming the object and its record's place.
#[test]
fn fsck_of_a_large_journal_decodes_every_record_and_names_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut rng = fastrand::Rng::with_seed(24);
    let msgs: Vec<Value> = (0..160)
        .map(|i| {
            let text: String = (0..2_600).map(|_| format!("{:x}", rng.u64(..))).collect();
            msg(if i % 2 == 0 { "user" } else { "assistant" }, text)
        })
        .collect();
    commit_new(&store, &lease, &mut SessionState::default(), &msgs);
    let session = lease.session().clone();
    drop(lease);
    let journal = journal_path(&root(dir.path()), &session);
    let good = fs::read(&journal).unwrap();
    assert!(good.len() > 2 << 20, "a journal of {} bytes", good.len());
    let sound = hel_store::fsck::fsck(&Store::open(dir.path()).unwrap()).unwrap();
    assert!(sound.is_sound(), "{sound:?}");
    assert!(sound.objects > 160, "{sound:?}");
    let (blob, _) = testing::encode("blob", &canonical::to_vec(&msgs[80]));
    assert_one_fault_when_flipped(dir.path(), &journal, &good, &blob, 300, &sound);
}

/// fsck of the store in `dir` whose journal `journal`, `good` when fsck
/// found it `sound`, has one stored byte of `id`'s record flipped (`byte`
/// bytes into it, the record's check rewritten to match): every object
/// counted as before, and one fault, naming the object and its record's
/// place, told once. The journal is left damaged.
fn assert_one_fault_when_flipped(
    dir: &Path,
    journal: &Path,
    good: &[u8],
    id: &ObjectId,
    byte: usize,
    sound: &hel_store::fsck::FsckReport,
) {
    let (start, bad) = with_stored_byte_flipped_and_checked(good, id, byte);
    fs::write(journal, &bad).unwrap();
    let report = hel_store::fsck::fsck(&Store::open(dir).unwrap()).unwrap();
    assert!(!report.is_sound());
    assert_eq!(report.objects, sound.objects, "{report:?}");
    let place = format!("{}@{}", journal.display(), start);
    assert!(
        matches!(&report.faults[..], [f] if f.to_string().contains(&id.to_hex()) && f.to_string().contains(&place)),
        "{:?}",
        report.faults
    );
}

/// fsck decodes a record of up to 16 MiB from the bytes its check read
/// (journal.rs `SEEN_MAX`), and a larger one by reading it again: spill
/// blobs on both sides of that size are counted once and sound, and one
/// whose bytes are not its object's (its record's check rewritten to
/// match) is one fault naming it, either way.
#[test]
fn fsck_decodes_records_on_both_sides_of_what_it_reads_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let sid = lease.session().clone();
    let mut rng = fastrand::Rng::with_seed(16);
    // Random bytes do not compress: each record is about as large.
    let sizes = [(3usize, 3 << 20), (17, 17 << 20)];
    let mut spills = Vec::new();
    let mut inp_spill = Vec::new();
    for (mib, len) in sizes {
        let bytes: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
        let file = format!("out-{mib}.bin");
        hel_store::spill::write(&store, &lease, &file, &bytes).unwrap();
        inp_spill.push((format!(".hel/sessions/{sid}/spill/{file}"), file));
        spills.push(testing::encode("blob", &bytes).0);
    }
    let mut state = SessionState::default();
    let mut conv = Conv::default();
    conv.extend(&conversation("s", 4));
    let mut inp = conv.input();
    inp = inp.spill(inp_spill);
    store.commit(&lease, &mut state, inp).unwrap();
    drop(lease);
    let sound = hel_store::fsck::fsck(&Store::open(dir.path()).unwrap()).unwrap();
    assert!(sound.is_sound(), "{sound:?}");
    let journal = journal_path(&root(dir.path()), &sid);
    let good = fs::read(&journal).unwrap();
    for blob in spills {
        assert_one_fault_when_flipped(dir.path(), &journal, &good, &blob, 1000, &sound);
    }
    fs::write(&journal, &good).unwrap();
}

/// The journal bytes `good` with one byte of the first record of `id`
/// flipped, `byte` bytes into what it stores, and where in `good` that
/// record's id is (in its header, followed by the stored length and the
/// record's check, 16 bytes, then the stored bytes).
fn with_stored_byte_flipped(good: &[u8], id: &ObjectId, byte: usize) -> (usize, Vec<u8>) {
    let at = good.windows(32).position(|w| w == blob_bytes(id)).unwrap();
    let mut bad = good.to_vec();
    bad[at + 32 + 16 + byte] ^= 1;
    (at, bad)
}

/// [`with_stored_byte_flipped`] with the record's check made to match
/// (so only decoding the object finds it wrong), and where the record
/// starts.
fn with_stored_byte_flipped_and_checked(
    good: &[u8],
    id: &ObjectId,
    byte: usize,
) -> (usize, Vec<u8>) {
    let (at, mut bad) = with_stored_byte_flipped(good, id, byte);
    let start = at - 8; // the record's header
    let len = u64::from_le_bytes(bad[start + 40..start + 48].try_into().unwrap()) as usize;
    let mut h = blake3::Hasher::new();
    h.update(&bad[start..start + 48]);
    h.update(&bad[start + 56..start + 56 + len]);
    let check = h.finalize();
    bad[start + 48..start + 56].copy_from_slice(&check.as_bytes()[..8]);
    (start, bad)
}

fn blob_bytes(id: &ObjectId) -> &[u8] {
    id.as_bytes()
}

fn state_session(store: &Store) -> SessionId {
    store.sessions().unwrap()[0].id.clone()
}

#[test]
fn randomized_operations_match_a_model() {
    let mut rng = Rng::seeded();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // Model: session id -> list of (checkpoint id, messages at it), oldest first.
    let mut model: BTreeMap<SessionId, Vec<(ObjectId, Vec<Value>)>> = BTreeMap::new();
    let mut live: BTreeMap<SessionId, (SessionLease, SessionState, Conv)> = BTreeMap::new();
    // Sessions in creation order, each with its creation number: the random
    // choices pick from this, never from the order of random session ids,
    // so a seed repeats a run.
    let mut order: Vec<(usize, SessionId)> = Vec::new();
    let mut created = 0;
    for step in 0..300 {
        match rng.below(10) {
            0..=5 if !order.is_empty() => {
                let (n, sid) = order[rng.below(order.len() as u64) as usize].clone();
                let (lease, state, conv) = live.get_mut(&sid).unwrap();
                let mut what = String::new();
                if rng.below(8) == 0 && conv.msgs.len() > 6 {
                    what += " compacted";
                    // A compaction: keep the first and the last few.
                    let len = conv.msgs.len();
                    conv.splice(
                        1,
                        len - 3,
                        vec![msg(
                            "user",
                            format!("<compacted-summary>{step}</compacted-summary>"),
                        )],
                    );
                }
                if rng.below(4) == 0 {
                    what += " large";
                    conv.push(msg("user", format!("{step} {}", "large ".repeat(3_000))));
                }
                if rng.below(6) == 0 && conv.msgs.len() > 2 {
                    // An edit in place (trimming an old result, say).
                    let i = 1 + rng.below(conv.msgs.len() as u64 - 1) as usize;
                    what += &format!(" edited {i}");
                    conv.msgs[i]["content"] = json!(format!("edited {step}"));
                    conv.leaves[i] = None;
                }
                for i in 0..=rng.below(5) {
                    conv.push(msg(
                        if i % 2 == 0 { "user" } else { "assistant" },
                        format!("m{} {}", rng.below(20), step),
                    ));
                }
                let c = conv.commit(&store, lease, state);
                eprintln!("{step}: commit s{n}{what}: {} messages", conv.msgs.len());
                model.get_mut(&sid).unwrap().push((c.id, conv.msgs.clone()));
            }
            6 if !order.is_empty() => {
                let (n, sid) = order[rng.below(order.len() as u64) as usize].clone();
                let hist = &model[&sid];
                let k = rng.below(hist.len() as u64) as usize;
                let (at, msgs) = hist[k].clone();
                let mut lineage: Vec<(ObjectId, Vec<Value>)> = hist
                    .iter()
                    .take_while(|(id, _)| *id != at)
                    .cloned()
                    .collect();
                lineage.push((at, msgs.clone()));
                let (lease, first, _) = store.fork(&at).unwrap();
                let loaded = store.load(&first).unwrap();
                assert_eq!(loaded.messages, msgs);
                lineage.push((first, msgs.clone()));
                let sid = lease.session().clone();
                eprintln!("{step}: s{created} = fork of checkpoint {k} of s{n}");
                model.insert(sid.clone(), lineage);
                let conv = Conv::from_loaded(&loaded);
                live.insert(sid.clone(), (lease, loaded.state, conv));
                order.push((created, sid));
                created += 1;
            }
            7 if !order.is_empty() => {
                let (n, sid) = order.remove(rng.below(order.len() as u64) as usize);
                let collect = rng.below(2) == 0;
                eprintln!("{step}: delete s{n} (collect: {collect})");
                live.remove(&sid);
                store.delete(&sid, collect).unwrap();
                model.remove(&sid);
            }
            8 => {
                eprintln!("{step}: gc");
                hel_store::gc::gc(&store, false).unwrap();
            }
            _ => {
                let lease = store.new_session().unwrap();
                let sid = lease.session().clone();
                let mut state = SessionState::default();
                let mut conv = Conv::default();
                conv.push(msg("system", "sys"));
                let c = conv.commit(&store, &lease, &mut state);
                eprintln!("{step}: s{created} = new session");
                model.insert(sid.clone(), vec![(c.id, conv.msgs.clone())]);
                live.insert(sid.clone(), (lease, state, conv));
                order.push((created, sid));
                created += 1;
            }
        }
    }
    hel_store::gc::gc(&store, false).unwrap();
    for (sid, hist) in &model {
        let log = hel_store::log::log(&store, sid).unwrap();
        let ids: Vec<ObjectId> = log.iter().rev().map(|e| e.id).collect();
        let want: Vec<ObjectId> = hist.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, want, "history of {sid}");
        for (id, msgs) in hist {
            assert_eq!(
                &store.load(id).unwrap().messages,
                msgs,
                "checkpoint {id} of {sid}"
            );
        }
    }
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(fsck.is_sound() && fsck.unreachable == Some(0), "{fsck:?}");
}

// ---------------------------------------------------------------- children

fn child(name: &str, dir: &Path, extra: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        name,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("HEL_STORE_CHILD", dir)
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd
}

/// Child: commit a deterministic conversation 4 messages at a time, forever,
/// printing "committed <count>" after each commit returns.
#[test]
#[ignore]
fn child_committer() {
    let Ok(dir) = std::env::var("HEL_STORE_CHILD") else {
        return;
    };
    let store = Store::open(Path::new(&dir)).unwrap();
    let sid: SessionId = std::env::var("HEL_SESSION").unwrap().parse().unwrap();
    let (lease, head) = store.resume(&sid).unwrap();
    let loaded = store.load(&head).unwrap();
    let mut conv = Conv::from_loaded(&loaded);
    let mut state = loaded.state;
    let all = conversation("k", 100_000);
    loop {
        let done = conv.msgs.len();
        conv.extend(&all[done..done + 4]);
        // A spill blob now and then, so kills also land in big writes.
        let mut inp = conv.input();
        if done.is_multiple_of(16) {
            let name = format!("spill-{done}-{}", std::process::id());
            hel_store::spill::write(
                &store,
                &lease,
                &name,
                format!("{done}").repeat(50_000).as_bytes(),
            )
            .unwrap();
            inp = inp.spill(vec![(name.clone(), name)]);
        }
        let c = store.commit(&lease, &mut state, inp).unwrap();
        conv.committed(&c);
        println!("committed {}", conv.msgs.len());
    }
}

fn crash_rounds(rounds: usize) {
    let mut rng = Rng::seeded();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let sid = {
        let lease = store.new_session().unwrap();
        commit_new(
            &store,
            &lease,
            &mut SessionState::default(),
            &conversation("k", 4),
        );
        lease.session().clone()
    };
    let all = conversation("k", 100_000);
    for round in 0..rounds {
        let mut proc = child(
            "child_committer",
            dir.path(),
            &[("HEL_SESSION", sid.to_string())],
        )
        .spawn()
        .unwrap();
        let mut lines = BufReader::new(proc.stdout.take().unwrap()).lines();
        let wait_for = 1 + rng.below(6);
        let mut last = 0usize;
        let mut seen = 0;
        while seen < wait_for {
            let line = lines.next().expect("child died").unwrap();
            if let Some(n) = line.strip_prefix("committed ") {
                last = n.parse().unwrap();
                seen += 1;
            }
        }
        // The kill lands somewhere inside a commit (or between two).
        // SAFETY: kill(2) on a child we spawned and have not yet reaped.
        unsafe { libc::kill(proc.id() as i32, libc::SIGKILL) };
        proc.wait().unwrap();
        // The child may have run ahead of our reading: what it printed
        // before it died is still in the pipe.
        for line in lines.map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("committed ") {
                last = n.parse().unwrap();
            }
        }
        let head = store.head(&sid).expect("ref survives");
        let msgs = store
            .load(&head)
            .unwrap_or_else(|e| panic!("round {round}: {e}"))
            .messages;
        assert!(
            msgs.len() == last || msgs.len() == last + 4,
            "round {round}: {} vs {last}",
            msgs.len()
        );
        assert_eq!(msgs[..], all[..msgs.len()]);
        let fsck = hel_store::fsck::fsck(&store).unwrap();
        assert!(fsck.is_sound(), "round {round}: {fsck:?}");
    }
    let report = hel_store::gc::gc(&store, false).unwrap();
    assert!(
        hel_store::fsck::fsck(&store).unwrap().is_sound(),
        "{report:?}"
    );
    assert_eq!(
        fs::read_dir(testing::tmp_dir(&root(dir.path())))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn sigkill_during_commits_never_tears_a_session() {
    crash_rounds(50);
}

#[test]
#[ignore]
fn sigkill_during_commits_long() {
    crash_rounds(500);
}

/// Child: start sessions that share content with every other writer,
/// commit a few checkpoints, delete some (gc deferred), fork now and then,
/// forever.
#[test]
#[ignore]
fn child_writer() {
    let Ok(dir) = std::env::var("HEL_STORE_CHILD") else {
        return;
    };
    let store = Store::open(Path::new(&dir)).unwrap();
    let mut n = 0u64;
    loop {
        let lease = store.new_session().unwrap();
        let mut state = SessionState::default();
        // The same messages in every writer: commits dedup against objects
        // another writer wrote, which that writer may be deleting right now.
        let msgs = conversation("shared", 12);
        let mut conv = Conv::default();
        let mut last = None;
        for end in [4, 8, 12] {
            conv.extend(&msgs[end - 4..end]);
            last = Some(conv.commit(&store, &lease, &mut state).id);
        }
        let sid = lease.session().clone();
        drop(lease);
        n += 1;
        if n.is_multiple_of(3) {
            // A fork of a checkpoint another gc may be about to judge.
            if let Some(at) = last {
                let (fork, _, _) = store.fork(&at).unwrap();
                let fid = fork.session().clone();
                drop(fork);
                store.delete(&fid, false).unwrap();
            }
        }
        if n.is_multiple_of(2) {
            store.delete(&sid, false).unwrap();
        }
        println!("cycle {n}");
    }
}

#[test]
fn gc_concurrent_with_commits_never_loses_an_object() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    drop(store.new_session().unwrap());
    let mut writers: Vec<_> = (0..3)
        .map(|_| child("child_writer", dir.path(), &[]).spawn().unwrap())
        .collect();
    let mut outs: Vec<_> = writers
        .iter_mut()
        .map(|w| BufReader::new(w.stdout.take().unwrap()).lines())
        .collect();
    for _ in 0..30 {
        hel_store::gc::gc(&store, false).unwrap();
        // Let every writer finish a cycle between collections.
        for out in &mut outs {
            while !out
                .next()
                .expect("writer died")
                .unwrap()
                .starts_with("cycle ")
            {}
        }
    }
    for w in &mut writers {
        w.kill().unwrap();
        w.wait().unwrap();
    }
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(fsck.is_sound(), "{fsck:?}");
    for s in store.sessions().unwrap() {
        if let Some(head) = s.head {
            let msgs = store.load(&head).unwrap().messages;
            assert_eq!(msgs, conversation("shared", msgs.len()));
        }
    }
}

#[test]
fn gc_drops_spill_working_copies_of_idle_sessions_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let r = root(dir.path());
    let mut leases = Vec::new();
    for _ in 0..2 {
        let lease = store.new_session().unwrap();
        hel_store::spill::write(&store, &lease, "out.txt", b"spilled").unwrap();
        let mut conv = Conv::default();
        conv.extend(&conversation("w", 4));
        let mut inp = conv.input();
        inp = inp.spill(vec![("out.txt".into(), "out.txt".into())]);
        store
            .commit(&lease, &mut SessionState::default(), inp)
            .unwrap();
        leases.push(lease);
    }
    let idle = leases.remove(0);
    let idle_id = idle.session().clone();
    drop(idle);
    let report = hel_store::gc::gc(&store, false).unwrap();
    assert_eq!(report.spill_dirs_removed, 1);
    assert!(!testing::session_dir(&r, &idle_id).join("spill").exists());
    assert!(testing::session_dir(&r, leases[0].session())
        .join("spill/out.txt")
        .exists());
    // The blob is what the checkpoint keeps.
    let head = store.head(&idle_id).unwrap();
    let cp = store.checkpoint(&head).unwrap();
    let entry = hel_store::spill::map(&store, &cp).unwrap()["out.txt"].clone();
    assert_eq!(
        hel_store::testing::read_blob(&store, &entry.blob).unwrap(),
        b"spilled"
    );
    assert!(hel_store::fsck::fsck(&store).unwrap().is_sound());
}

#[test]
fn new_sessions_never_race_gc() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    drop(store.new_session().unwrap());
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                hel_store::gc::gc(&store, false).unwrap();
            }
        });
        for i in 0..50 {
            // Between its directory and its lease, gc must not take the
            // directory of a session that has no ref yet.
            let lease = store
                .new_session()
                .unwrap_or_else(|e| panic!("new session {i}: {e}"));
            hel_store::spill::write(&store, &lease, "s", b"spill")
                .unwrap_or_else(|e| panic!("session {i}'s directory went: {e}"));
            commit_new(
                &store,
                &lease,
                &mut SessionState::default(),
                &conversation("g", 4),
            );
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(store.sessions().unwrap().len(), 50);
    assert!(hel_store::fsck::fsck(&store).unwrap().is_sound());
}

#[test]
fn a_fork_racing_delete_and_gc_never_names_a_swept_base() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for i in 0..60 {
        let lease = store.new_session().unwrap();
        let base = commit_new(
            &store,
            &lease,
            &mut SessionState::default(),
            &conversation(&format!("race{i}"), 8),
        )
        .id;
        let sid = lease.session().clone();
        drop(lease);
        std::thread::scope(|s| {
            let fork = s.spawn(|| store.fork(&base));
            store.delete(&sid, true).unwrap();
            match fork.join().unwrap() {
                // The fork published first: its history keeps the base.
                Ok((lease, first, _)) => {
                    hel_store::gc::gc(&store, false).unwrap();
                    assert_eq!(store.load(&first).unwrap().messages.len(), 8);
                    assert_eq!(
                        hel_store::log::log(&store, lease.session()).unwrap().len(),
                        2
                    );
                }
                // The delete and its gc came first: the base is gone, and
                // the fork says so rather than naming it.
                Err(Error::Missing { id, .. }) => assert_eq!(id, base),
                Err(e) => panic!("round {i}: {e}"),
            }
        });
    }
    assert!(hel_store::fsck::fsck(&store).unwrap().is_sound());
}

#[test]
fn a_commit_costs_three_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut conv = Conv::default();
    let all = conversation("s", 400);
    // The first commit makes the journal (its name is made durable once).
    commit_all(&store, &lease, &mut state, &mut conv, &all[..4], 4);
    // Every later one: its objects and its commit record (one sync), then
    // the ref: its new file, and `refs/sessions/` after the rename.
    for chunk in all[4..].chunks(4).take(50) {
        let before = testing::syncs();
        conv.extend(chunk);
        conv.commit(&store, &lease, &mut state);
        assert_eq!(testing::syncs() - before, 3, "syncs per commit");
    }
    // With a large message and a spill file too, still one.
    hel_store::spill::write(&store, &lease, "big.txt", &vec![b'x'; 200_000]).unwrap();
    conv.push(msg("user", "y".repeat(50_000)));
    let mut inp = conv.input();
    inp = inp.spill(vec![("big".into(), "big.txt".into())]);
    let before = testing::syncs();
    let c = store.commit(&lease, &mut state, inp).unwrap();
    conv.committed(&c);
    assert_eq!(testing::syncs() - before, 3);
    // A fork: its first commit makes its journal (two more syncs for the
    // file and its name) and records that it depends on its base (the
    // record, and the base's directory of dependents made the first time)
    // and that it is recorded (objects-spec §6.2): a directory sync each;
    // its operation log entry (§8.7) the file and `oplog/`, and `.hel/`
    // when `oplog/` is made; then three per commit again.
    let before = testing::syncs();
    let (fork, first, _) = store.fork(&c.id).unwrap();
    assert!(testing::syncs() - before <= 11);
    let loaded = store.load(&first).unwrap();
    let mut fconv = Conv::from_loaded(&loaded);
    let mut fstate = loaded.state;
    fconv.push(msg("user", "fork"));
    let before = testing::syncs();
    fconv.commit(&store, &fork, &mut fstate);
    assert_eq!(testing::syncs() - before, 3);
}

/// Child: forever, make a session, fork it, delete the original (its
/// journal's objects the fork needs go to a sealed pack), and collect
/// (which merges the sealed packs), printing "round <n>" after each.
#[test]
#[ignore]
fn child_repacker() {
    let Ok(dir) = std::env::var("HEL_STORE_CHILD") else {
        return;
    };
    let store = Store::open(Path::new(&dir)).unwrap();
    let mut n = 0u64;
    loop {
        let lease = store.new_session().unwrap();
        let mut msgs = conversation(&format!("r{n}"), 8);
        msgs.push(msg("user", noise(&format!("r{n}"), 20_000)));
        let head = commit_new(&store, &lease, &mut SessionState::default(), &msgs).id;
        let sid = lease.session().clone();
        drop(lease);
        let (fork, _, _) = store.fork(&head).unwrap();
        drop(fork);
        store.delete(&sid, false).unwrap();
        hel_store::gc::gc(&store, false).unwrap();
        n += 1;
        println!("round {n}");
    }
}

#[test]
fn sigkill_during_gc_and_repack_never_loses_a_session() {
    let mut rng = Rng::seeded();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    drop(store.new_session().unwrap());
    for round in 0..15 {
        let mut proc = child("child_repacker", dir.path(), &[]).spawn().unwrap();
        let mut lines = BufReader::new(proc.stdout.take().unwrap()).lines();
        let mut rounds = 0;
        let want = 1 + rng.below(3);
        while rounds < want {
            let line = lines.next().expect("child died").unwrap();
            if line.starts_with("round ") {
                rounds += 1;
            }
        }
        // Somewhere inside a fork, a delete's copy or a gc's repack.
        std::thread::sleep(std::time::Duration::from_micros(rng.below(20_000)));
        // SAFETY: kill(2) on a child we spawned and have not yet reaped.
        unsafe { libc::kill(proc.id() as i32, libc::SIGKILL) };
        proc.wait().unwrap();
        let fresh = Store::open(dir.path()).unwrap();
        for s in fresh.sessions().unwrap() {
            let head = s.head.unwrap_or_else(|| panic!("round {round}: {s:?}"));
            let msgs = fresh
                .load(&head)
                .unwrap_or_else(|e| panic!("round {round}: {e}"))
                .messages;
            assert_eq!(msgs.len(), 9, "round {round}");
        }
        let fsck = hel_store::fsck::fsck(&fresh).unwrap();
        assert!(fsck.is_sound(), "round {round}: {fsck:?}");
    }
    let fresh = Store::open(dir.path()).unwrap();
    hel_store::gc::gc(&fresh, false).unwrap();
    let fsck = hel_store::fsck::fsck(&fresh).unwrap();
    assert!(fsck.is_sound() && fsck.unreachable == Some(0), "{fsck:?}");
    let packs = fs::read_dir(dir.path().join(".hel/packs"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".pack")
        })
        .count();
    assert_eq!(packs, 1, "gc merges sealed packs into one");
    assert_eq!(
        fs::read_dir(testing::tmp_dir(&root(dir.path())))
            .unwrap()
            .count(),
        0
    );
}

/// A repack killed between renaming its index and its pack into
/// `packs/` (or a gc killed between removing a pack and its index) leaves
/// an index alone: no reader sees it, fsck notes it without calling the
/// store damaged, and the next gc removes it.
#[test]
fn an_index_left_without_its_pack_is_a_note_and_gc_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut msgs = conversation("lone", 8);
    msgs.push(msg("user", noise("lone", 20_000)));
    let head = commit_new(&store, &lease, &mut SessionState::default(), &msgs).id;
    let sid = lease.session().clone();
    drop(lease);
    let (fork, _, _) = store.fork(&head).unwrap();
    let forked = fork.session().clone();
    drop(fork);
    // The delete copies what the fork needs into a sealed pack.
    store.delete(&sid, false).unwrap();
    let packs = dir.path().join(".hel/packs");
    let idx = fs::read_dir(&packs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "idx"))
        .expect("the delete wrote a sealed pack");
    let lone = packs.join(format!("pack-{}.idx", "0".repeat(32)));
    fs::copy(&idx, &lone).unwrap();

    let fresh = Store::open(dir.path()).unwrap();
    let fsck = hel_store::fsck::fsck(&fresh).unwrap();
    assert!(fsck.is_sound(), "{fsck:?}");
    assert_eq!(fsck.notes.len(), 1, "{fsck:?}");
    assert!(
        fsck.notes[0].contains(&*lone.to_string_lossy()) && fsck.notes[0].contains("hel gc"),
        "{fsck:?}"
    );
    let listed = fresh.sessions().unwrap();
    let s = listed.iter().find(|s| s.id == forked).unwrap();
    assert_eq!(fresh.load(&s.head.unwrap()).unwrap().messages.len(), 9);

    let report = hel_store::gc::gc(&fresh, true).unwrap();
    assert_eq!(report.tmp_files_removed, 1);
    assert!(lone.exists(), "a dry run removes nothing");
    let report = hel_store::gc::gc(&fresh, false).unwrap();
    assert_eq!(report.tmp_files_removed, 1);
    assert!(!lone.exists());
    let fsck = hel_store::fsck::fsck(&Store::open(dir.path()).unwrap()).unwrap();
    assert!(fsck.is_sound() && fsck.notes.is_empty(), "{fsck:?}");
}

#[test]
fn readers_without_a_lock_survive_concurrent_repacks() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    drop(store.new_session().unwrap());
    let mut proc = child("child_repacker", dir.path(), &[]).spawn().unwrap();
    let mut lines = BufReader::new(proc.stdout.take().unwrap()).lines();
    let mut reads = 0;
    let mut rounds = 0;
    while rounds < 30 {
        let line = lines.next().expect("child died").unwrap();
        if !line.starts_with("round ") {
            continue;
        }
        rounds += 1;
        // Every fork outlives its origin; read them all, while the child
        // deletes, copies and repacks, each time through a fresh process
        // state (a new Store) and through this one.
        for store in [Store::open(dir.path()).unwrap(), store.clone()] {
            for s in store.sessions().unwrap() {
                let Some(head) = s.head else { continue };
                match store.load(&head) {
                    Ok(l) => {
                        assert_eq!(l.messages.len(), 9);
                        reads += 1;
                    }
                    // The child's own session, deleted as we read it.
                    Err(Error::Missing { .. } | Error::NoSuchSession { .. })
                        if s.checkpoints == 1 => {}
                    Err(e) => {
                        let _ = proc.kill();
                        let _ = proc.wait();
                        let fresh = Store::open(dir.path()).unwrap();
                        let again = fresh.load(&head).map(|_| ());
                        let missing = match &e {
                            Error::Missing { id, .. } => testing::where_is(&fresh, id),
                            _ => String::new(),
                        };
                        panic!("round {rounds}: {e}; a fresh read after: {again:?}; it is at {missing}; head at {}", testing::where_is(&fresh, &head));
                    }
                }
            }
        }
    }
    proc.kill().unwrap();
    proc.wait().unwrap();
    assert!(reads > 30, "{reads}");
}

/// A session planted as a store could hold it (objects in a sealed pack,
/// a journal with one commit record, a ref). Returns the session and its
/// head.
fn planted_store(dir: &Path, msgs: &[Value]) -> (SessionId, ObjectId) {
    planted_store_with_spill(dir, msgs, json!({}))
}

/// [`planted_store`] whose snapshot has the spill map `spill`.
fn planted_store_with_spill(dir: &Path, msgs: &[Value], spill: Value) -> (SessionId, ObjectId) {
    let items: Vec<Value> = msgs.iter().map(|m| json!({"m": m})).collect();
    planted_session(
        dir,
        &[json!({"count": msgs.len(), "items": items, "prev": null})],
        spill,
    )
}

/// A crafted session whose list is `nodes`, oldest first (each node's
/// `prev` set to the one before unless it has one), and whose snapshot
/// has the spill map `spill` (stored as a blob when it has entries): its
/// id and its snapshot's.
fn planted_session(dir: &Path, nodes: &[Value], spill: Value) -> (SessionId, ObjectId) {
    let r = root(dir);
    let sid: SessionId = "0c9e6f1a-1b2c-4d3e-8f40-123456789abc".parse().unwrap();
    let plant = |kind: &str, payload: &[u8]| {
        let (_, canonical) = testing::encode(kind, payload);
        testing::plant(&r, &canonical)
    };
    let mut prev: Option<ObjectId> = None;
    let mut count = 0u64;
    for n in nodes {
        let mut n = n.clone();
        if n.get("prev").is_none() {
            n["prev"] = prev.map_or(Value::Null, |p| p.to_hex().into());
        }
        count = n["count"].as_u64().unwrap();
        prev = Some(plant("list", &canonical::to_vec(&n)));
    }
    let config = plant("blob", &canonical::to_vec(&json!({"model": "m"})));
    let cursors = plant("blob", b"[]");
    let spill = if spill.as_object().is_some_and(|m| m.is_empty()) {
        spill
    } else {
        plant("blob", &canonical::to_vec(&spill)).to_hex().into()
    };
    let snap = plant(
        "snapshot",
        &canonical::to_vec(&json!({
            "schema_version": 3, "session_id": sid.as_str(), "parents": [],
            "created_at": "1970-01-01T00:00:00.001Z", "created_at_ms": 1u64,
            "cwd": "/project", "request_config": config.to_hex(), "meter": null,
            "cursors": cursors.to_hex(), "record": "answer",
            "messages": {"root": prev.map(|p| p.to_hex()), "count": count}, "spill": spill,
            "summary": {"messages": count, "checkpoints": 1, "instruction": "old", "input_tokens": 0, "output_tokens": 0},
        })),
    );
    testing::publish(&r, &sid, &snap);
    (sid, snap)
}

#[test]
fn a_planted_session_reads_resumes_and_moves_into_one_pack() {
    let dir = tempfile::tempdir().unwrap();
    let msgs = conversation("old", 8);
    let (sid, head) = planted_store(dir.path(), &msgs);
    let store = Store::open(dir.path()).unwrap();
    let listed = store.sessions().unwrap();
    assert_eq!((listed.len(), listed[0].messages), (1, 8));
    assert_eq!(store.load(&head).unwrap().messages, msgs);
    let (lease, h) = store.resume(&sid).unwrap();
    assert_eq!(h, head);
    let loaded = store.load(&head).unwrap();
    let mut conv = Conv::from_loaded(&loaded);
    let mut state = loaded.state;
    conv.extend(&conversation("new", 4));
    let c = conv.commit(&store, &lease, &mut state);
    drop(lease);
    let r = root(dir.path());
    assert_eq!(
        fs::read_to_string(testing::ref_path(&r, &sid)).unwrap(),
        format!("{}\n", c.id)
    );
    assert_eq!(
        fs::read_to_string(r.join("format")).unwrap(),
        "hel-store-format 6\n"
    );
    assert_eq!(hel_store::log::log(&store, &sid).unwrap().len(), 2);
    // A repack moves what the session names of the planted pack into one.
    let report = hel_store::gc::repack(&store).unwrap();
    assert_eq!(report.packs_written, 1, "{report:?}");
    assert!(testing::planted_pack(&r).is_none());
    let fresh = Store::open(dir.path()).unwrap();
    assert_eq!(fresh.load(&c.id).unwrap().messages, conv.msgs);
    assert_eq!(fresh.load(&head).unwrap().messages, msgs);
    let fsck = hel_store::fsck::fsck(&fresh).unwrap();
    assert!(fsck.is_sound() && fsck.unreachable == Some(0), "{fsck:?}");
}

/// A store of any format but this hel's (older, newer, none named) is
/// refused by every open with one line naming what it found and what to
/// do, and nothing in it is written.
#[test]
fn a_store_of_another_format_is_refused_by_name_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    drop(store.new_session().unwrap());
    let r = root(dir.path());
    assert_eq!(
        fs::read_to_string(r.join("format")).unwrap(),
        "hel-store-format 6\n"
    );
    let shown = r.display().to_string();
    for (format, said) in [
        (
            &b"hel-store-format 7\n"[..],
            format!("{shown} is a store of format 7, written by a newer hel; this hel reads format 6 only: upgrade hel"),
        ),
        (
            b"hel-store-format 3\n",
            format!("{shown} is a store of format 3, written by a pre-release hel; this hel reads format 6 only: move {shown} aside or delete it"),
        ),
        (
            b"hel-store-format 5\n",
            format!("{shown} is a store of format 5, written by a pre-release hel; this hel reads format 6 only: move {shown} aside or delete it"),
        ),
        (
            b"hel-store-format six\n",
            format!("{shown} has a format file that names no store format (it says \"hel-store-format six\\n\"); this hel reads format 6 only: move {shown} aside or delete it"),
        ),
        (
            b"hel-store-format 6",
            format!("{shown} has a format file that names no store format (it says \"hel-store-format 6\"); this hel reads format 6 only: move {shown} aside or delete it"),
        ),
    ] {
        fs::write(r.join("format"), format).unwrap();
        let before = hel_store::testing::files_under(&r);
        let err = Store::open(dir.path()).unwrap_err();
        assert_eq!(err.to_string(), said);
        assert!(!err.to_string().contains('\n'));
        assert_eq!(hel_store::testing::files_under(&r), before, "{said}");
    }
    // No format file, and loose objects: the first pre-release format.
    fs::remove_file(r.join("format")).unwrap();
    fs::create_dir_all(r.join("objects/ab")).unwrap();
    let before = hel_store::testing::files_under(&r);
    let err = Store::open(dir.path()).unwrap_err();
    assert!(matches!(err, Error::OlderStore { found: 1, .. }), "{err}");
    assert_eq!(hel_store::testing::files_under(&r), before);
    // A journal beside them, which no store of format 1 held: a store of a
    // later format that lost its file, named as such, never format 1 (nor,
    // without `objects/`, a store being made to complete).
    let journal = r
        .join("packs/journals")
        .join(format!("{}.journal", SessionId::new_random()));
    fs::write(&journal, b"").unwrap();
    for loose in [true, false] {
        if !loose {
            fs::remove_dir_all(r.join("objects")).unwrap();
        }
        let before = hel_store::testing::files_under(&r);
        let err = Store::open(dir.path()).unwrap_err();
        assert!(matches!(err, Error::FormatMissing { .. }), "{err}");
        assert!(
            err.to_string().starts_with(&format!(
                "{shown}/format is missing, and the store holds {}",
                journal.display()
            )),
            "{err}"
        );
        assert_eq!(hel_store::testing::files_under(&r), before);
    }
}

#[test]
fn a_scan_reads_each_distinct_message_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut msgs = conversation("scan", 20);
    msgs.push(msg("user", format!("needle {}", "big ".repeat(5_000)))); // a blob
    let c = commit_new(&store, &lease, &mut state, &msgs);
    // Two forks share everything; a second session says one thing again.
    let (f1, _, _) = store.fork(&c.id).unwrap();
    let (f2, _, _) = store.fork(&c.id).unwrap();
    drop((f1, f2));
    let other = store.new_session().unwrap();
    commit_new(
        &store,
        &other,
        &mut SessionState::default(),
        &[msg("user", "needle again")],
    );
    let mut seen = 0;
    let mut needles = 0;
    hel_store::scan::scan_messages(&store, &mut |bytes| {
        seen += 1;
        if bytes.windows(6).any(|w| w == b"needle") {
            needles += 1;
        }
    })
    .unwrap();
    assert_eq!(seen, 21 + 1);
    assert_eq!(needles, 2);
}

/// The scan's threads share the files out: a message blob said in every
/// session (stored once, in the first session's journal, and named from
/// the others'), blobs of each session's own, small messages inline in
/// each session's nodes, forks: every distinct stored message comes
/// exactly once, run after run. (A small message said in two sessions is
/// stored inline in each one's node, so it is two stored messages; none
/// is said twice here.)
#[test]
fn a_scan_on_several_threads_gives_each_distinct_message_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let shared_big = msg("user", format!("shared {}", "big ".repeat(5_000)));
    let mut distinct: HashMap<String, Value> = HashMap::new();
    let mut leases = Vec::new();
    let mut ids = Vec::new();
    for k in 0..12 {
        let lease = store.new_session().unwrap();
        let mut msgs: Vec<Value> = (0..12)
            .map(|i| msg("user", format!("s{k} says {i}")))
            .collect();
        msgs.push(shared_big.clone());
        msgs.push(msg("user", format!("own {k} {}", "big ".repeat(5_000))));
        let c = commit_new(&store, &lease, &mut SessionState::default(), &msgs);
        if k % 4 == 0 {
            let (f, _, _) = store.fork(&c.id).unwrap();
            drop(f);
        }
        for m in msgs {
            distinct.insert(m.to_string(), m);
        }
        ids.push(lease.session().clone());
        leases.push(lease);
    }
    drop(leases);
    let store = Store::open(dir.path()).unwrap();
    for _ in 0..10 {
        let mut seen: HashMap<String, usize> = HashMap::new();
        hel_store::scan::scan_messages(&store, &mut |bytes| {
            let v: Value = serde_json::from_slice(bytes).unwrap();
            *seen.entry(v.to_string()).or_default() += 1;
        })
        .unwrap();
        let twice: Vec<_> = seen.iter().filter(|(_, n)| **n != 1).collect();
        assert!(twice.is_empty(), "scanned more than once: {twice:?}");
        let mut got: Vec<&String> = seen.keys().collect();
        let mut want: Vec<&String> = distinct.keys().collect();
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }
    // A damaged byte in one session's blob: the scan fails naming it and
    // its journal, whichever thread read it.
    let own7 = msg("user", format!("own 7 {}", "big ".repeat(5_000)));
    let (blob, _) = testing::encode("blob", &canonical::to_vec(&own7));
    let journal = journal_path(&root(dir.path()), &ids[7]);
    let good = fs::read(&journal).unwrap();
    let (at, bad) = with_stored_byte_flipped(&good, &blob, 30);
    fs::write(&journal, &bad).unwrap();
    let store = Store::open(dir.path()).unwrap();
    match hel_store::scan::scan_messages(&store, &mut |_| {}) {
        Err(Error::DamagedRecord {
            id: Some(id),
            pack,
            offset,
            ..
        }) => assert_eq!((id, pack, offset), (blob, journal, at as u64 - 8)),
        other => panic!("{other:?}"),
    }
}

/// An object stored in two journals (two sessions' identical first list
/// node, each written in its own journal) is read from its first copy in
/// the scan's file order, whichever thread reaches which file first: with
/// one copy damaged (its record's check made to match), the scan fails
/// every time or succeeds every time, and it fails for exactly one of
/// the two copies.
#[test]
fn a_scan_of_an_object_stored_twice_reads_the_same_copy_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let sys = [msg("system", "said by both")];
    let mut journals = Vec::new();
    let mut node = None;
    for _ in 0..2 {
        let lease = store.new_session().unwrap();
        let c = commit_new(&store, &lease, &mut SessionState::default(), &sys);
        node = store.checkpoint(&c.id).unwrap().messages.root;
        journals.push(journal_path(&root(dir.path()), lease.session()));
    }
    // More sessions, so that the scan has files for two threads.
    for k in 0..6 {
        let lease = store.new_session().unwrap();
        commit_new(
            &store,
            &lease,
            &mut SessionState::default(),
            &conversation(&format!("more{k}"), 8),
        );
    }
    let node = node.unwrap();
    let mut fails = Vec::new();
    for journal in &journals {
        let good = fs::read(journal).unwrap();
        let (_, bad) = with_stored_byte_flipped_and_checked(&good, &node, 20);
        fs::write(journal, &bad).unwrap();
        let outcomes: Vec<bool> = (0..20)
            .map(|_| {
                let store = Store::open(dir.path()).unwrap();
                hel_store::scan::scan_messages(&store, &mut |_| {}).is_err()
            })
            .collect();
        assert!(outcomes.iter().all(|f| *f == outcomes[0]), "{outcomes:?}");
        fails.push(outcomes[0]);
        fs::write(journal, &good).unwrap();
    }
    assert_eq!(fails.iter().filter(|f| **f).count(), 1, "{fails:?}");
}

/// After a delete the objects a fork needs sit in a sealed pack in
/// gc's order, not the commits': a scan still gives every distinct message once, its big
/// message blob too.
#[test]
fn a_scan_of_a_sealed_pack_reads_each_distinct_message_once() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        let lease = store.new_session().unwrap();
        let mut msgs = conversation("scan", 20);
        msgs.push(msg("user", format!("needle {}", "big ".repeat(5_000)))); // a blob
        let c = commit_new(&store, &lease, &mut SessionState::default(), &msgs);
        let other = store.new_session().unwrap();
        commit_new(
            &store,
            &other,
            &mut SessionState::default(),
            &[msg("user", "needle again")],
        );
        // The delete copies what the fork needs into a sealed pack.
        let (fork, _, _) = store.fork(&c.id).unwrap();
        let sid = lease.session().clone();
        drop((lease, other, fork));
        store.delete(&sid, false).unwrap();
    }
    let packs: Vec<_> = std::fs::read_dir(dir.path().join(".hel/packs"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .collect();
    assert!(!packs.is_empty(), "gc sealed no pack");
    let store = Store::open(dir.path()).unwrap();
    let mut seen = 0;
    let mut needles = 0;
    hel_store::scan::scan_messages(&store, &mut |bytes| {
        seen += 1;
        if bytes.windows(6).any(|w| w == b"needle") {
            needles += 1;
        }
    })
    .unwrap();
    assert_eq!(seen, 21 + 1);
    assert_eq!(needles, 2);
}

/// A session that names an object where a sealed pack holds it (a new
/// process has not opened the journal that also holds a copy) must keep it
/// when gc and the other copy's session go: gc keeps every live object of a
/// pack in the pack it writes, whoever else holds a copy.
#[test]
fn an_object_shared_from_a_pack_survives_gc_and_the_deletion_of_another_copy() {
    let dir = tempfile::tempdir().unwrap();
    let sys = [msg("system", "sys")];
    let m_id = {
        let store = Store::open(dir.path()).unwrap();
        // K and M each hold their own copy of the small system message.
        let k = store.new_session().unwrap();
        let k_ckpt = commit_new(&store, &k, &mut SessionState::default(), &sys).id;
        let k_id = k.session().clone();
        let m = store.new_session().unwrap();
        commit_new(&store, &m, &mut SessionState::default(), &sys);
        let m_id = m.session().clone();
        drop((k, m));
        // A fork of K, then K's deletion: K's objects the fork needs move
        // into a sealed pack.
        let (f, _, _) = store.fork(&k_ckpt).unwrap();
        drop(f);
        store.delete(&k_id, false).unwrap();
        m_id
    };
    // A new process: J finds the message in the pack, not in M's journal.
    let j = {
        let store = Store::open(dir.path()).unwrap();
        let j = store.new_session().unwrap();
        let c = commit_new(&store, &j, &mut SessionState::default(), &sys);
        c.id
    };
    let store = Store::open(dir.path()).unwrap();
    hel_store::gc::gc(&store, false).unwrap();
    store.delete(&m_id, true).unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.load(&j).unwrap().messages, sys.to_vec());
}

// ------------------------------------------- journals: no silent shortening

/// A record of a pack file (objects-spec §5.1) whose type byte is
/// `rtype`, its check computed as the spec says.
fn record(rtype: u8, id: &[u8; 32], stored: &[u8]) -> Vec<u8> {
    let mut out = b"HELR".to_vec();
    out.push(rtype);
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(id);
    out.extend_from_slice(&(stored.len() as u64).to_le_bytes());
    let mut h = blake3::Hasher::new();
    h.update(&out);
    h.update(stored);
    out.extend_from_slice(&h.finalize().as_bytes()[..8]);
    out.extend_from_slice(stored);
    out
}

/// One record of a journal's bytes, as its header frames it.
struct Rec {
    at: usize,
    rtype: u8,
    id: [u8; 32],
    len: usize,
}

impl Rec {
    fn stored<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        &bytes[self.at + 56..self.at + self.len]
    }
}

/// The records of an intact journal's bytes, in order.
fn records(bytes: &[u8]) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut at = 16;
    while at + 56 <= bytes.len() {
        let stored = u64::from_le_bytes(bytes[at + 40..at + 48].try_into().unwrap()) as usize;
        out.push(Rec {
            at,
            rtype: bytes[at + 4],
            id: bytes[at + 8..at + 40].try_into().unwrap(),
            len: 56 + stored,
        });
        at += 56 + stored;
    }
    out
}

/// A session of three checkpoints whose lease is free: the store's
/// directory, the session, its heads and its journal's path.
fn three_checkpoints() -> (tempfile::TempDir, SessionId, Vec<ObjectId>, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut conv = Conv::default();
    let all = conversation("b", 12);
    let heads = commit_all(&store, &lease, &mut state, &mut conv, &all, 4);
    let sid = lease.session().clone();
    let journal = journal_path(&root(dir.path()), &sid);
    (dir, sid, heads, journal)
}

/// A damaged sidecar is reported by fsck (a note: it is a hint), never
/// trusted, and rewritten by the session's next resume; a short one (what
/// a crash before its append leaves) is no damage.
#[test]
fn fsck_reports_a_damaged_sidecar_and_the_next_commit_rewrites_it() {
    let (dir, sid, heads, journal) = three_checkpoints();
    let jidx = journal.with_extension("jidx");
    let good = fs::read(&jidx).unwrap();
    let sidecar_notes = |store: &Store| -> Vec<String> {
        let report = hel_store::fsck::fsck(store).unwrap();
        assert!(report.is_sound(), "{:?}", report.faults);
        report
            .notes
            .into_iter()
            .filter(|n| n.contains("sidecar"))
            .collect()
    };
    let store = Store::open(dir.path()).unwrap();
    assert!(sidecar_notes(&store).is_empty());
    // The second entry's offset (16-byte header, 48-byte entries, the
    // offset after the 32-byte id).
    let mut bad = good.clone();
    bad[16 + 48 + 32] ^= 0x01;
    fs::write(&jidx, &bad).unwrap();
    let notes = sidecar_notes(&store);
    assert!(
        notes.len() == 1 && notes[0].contains("damaged at entry 1"),
        "{notes:?}"
    );
    assert_eq!(store.sessions().unwrap().len(), 1);
    assert!(store.load(&heads[2]).is_ok());
    // A header that is not a sidecar's.
    let mut bad = good.clone();
    bad[0] ^= 0x01;
    fs::write(&jidx, &bad).unwrap();
    let notes = sidecar_notes(&store);
    assert!(
        notes.len() == 1 && notes[0].contains("not a readable sidecar"),
        "{notes:?}"
    );
    // Short (the last entry's append lost): no damage.
    fs::write(&jidx, &good[..good.len() - 48]).unwrap();
    assert!(sidecar_notes(&store).is_empty());
    // The session's next commit rewrites a damaged one.
    let mut bad = good.clone();
    bad[16 + 48 + 32] ^= 0x01;
    fs::write(&jidx, &bad).unwrap();
    let (lease, head) = store.resume(&sid).unwrap();
    let loaded = store.load(&head).unwrap();
    let mut conv = Conv::from_loaded(&loaded);
    let mut state = loaded.state;
    conv.extend(&conversation("b", 16)[12..]);
    conv.commit(&store, &lease, &mut state);
    drop(lease);
    let now = fs::read(&jidx).unwrap();
    assert_eq!(now[..good.len()], good[..], "rewritten, then appended to");
    assert!(sidecar_notes(&store).is_empty());
}

fn remove_sidecar(journal: &Path) {
    let _ = fs::remove_file(journal.with_extension("jidx"));
}

/// Everything that reads or writes `sid` treats its journal as having a
/// fault at `offset`: listed as broken, no head, no resume, an fsck fault,
/// no gc; and the journal is left exactly as it is. Each error names the
/// journal and the offset.
fn assert_fault(dir: &Path, sid: &SessionId, journal: &Path, offset: usize, what: &str) {
    let bytes = fs::read(journal).unwrap();
    let store = Store::open(dir).unwrap();
    let path = journal.display().to_string();
    let named = |e: &dyn std::fmt::Display| {
        let s = e.to_string();
        s.contains(&path) && s.contains(&format!("offset {offset}"))
    };
    let listed = store.sessions().unwrap();
    assert!(
        listed.len() == 1
            && listed[0].id == *sid
            && listed[0].broken.as_ref().is_some_and(|e| named(e)),
        "{what}: {listed:?}"
    );
    let e = store.head(sid).unwrap_err();
    assert!(named(&e), "{what}: {e}");
    let e = store.resume(sid).map(|_| ()).unwrap_err();
    assert!(named(&e), "{what}: {e}");
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(
        !fsck.is_sound() && fsck.faults.iter().any(|f| named(f)),
        "{what}: {fsck:?}"
    );
    let gc = hel_store::gc::gc(&store, false);
    assert!(gc.is_err(), "{what}: gc ran: {gc:?}");
    assert!(
        fs::read(journal).unwrap() == bytes,
        "{what}: journal changed"
    );
    assert!(store.knows(sid).unwrap(), "{what}");
}

#[test]
fn one_flipped_bit_anywhere_before_the_end_is_a_fault_never_a_shorter_session() {
    let (dir, sid, heads, journal) = three_checkpoints();
    let good = fs::read(&journal).unwrap();
    let recs = records(&good);
    let first = &recs[0];
    let c1 = recs.iter().find(|r| r.rtype == 2).unwrap();
    let c2 = recs.iter().filter(|r| r.rtype == 2).nth(1).unwrap();
    let c3 = recs.iter().filter(|r| r.rtype == 2).nth(2).unwrap();
    for (what, at, offset) in [
        (
            "a stored byte of the first record",
            first.at + 56 + 3,
            first.at,
        ),
        ("the first record's length", first.at + 40, first.at),
        (
            "the first record's high length byte",
            first.at + 46,
            first.at,
        ),
        ("the first record's magic", first.at + 1, first.at),
        ("the first record's type", first.at + 4, first.at),
        ("the first commit record", c1.at + 56 + 5, c1.at),
        ("the second commit record", c2.at + 60, c2.at),
        // The ref names the last: its commit record is not a torn tail.
        ("the last commit record", c3.at + 60, c3.at),
    ] {
        for sidecar in [false, true] {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            fs::write(&journal, &bad).unwrap();
            if !sidecar {
                remove_sidecar(&journal);
            }
            // With the sidecar, a listing reads only the journal's end:
            // what it lists is checked where it is read (fsck, a load).
            if sidecar {
                let store = Store::open(dir.path()).unwrap();
                assert!(!hel_store::fsck::fsck(&store).unwrap().is_sound(), "{what}");
                assert!(store.load(&heads[2]).is_err(), "{what}");
                assert!(fs::read(&journal).unwrap() == bad, "{what}");
            } else {
                assert_fault(dir.path(), &sid, &journal, offset, what);
            }
        }
    }
    // What is intact before the fault still reads; the session can be
    // deleted, and its journal goes with it.
    let mut bad = good.clone();
    bad[c2.at + 60] ^= 0x10;
    fs::write(&journal, &bad).unwrap();
    remove_sidecar(&journal);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.load(&heads[0]).unwrap().messages.len(), 4);
    let kept = dir.path().join("kept.journal");
    fs::copy(&journal, &kept).unwrap();
    let ref_file = testing::ref_path(&root(dir.path()), &sid);
    let kept_ref = fs::read(&ref_file).unwrap();
    store.delete(&sid, false).unwrap();
    assert!(!journal.exists() && !ref_file.exists() && store.sessions().unwrap().is_empty());
    fs::rename(&kept, &journal).unwrap();
    fs::write(&ref_file, kept_ref).unwrap();
    // Whole again, it is the session it was.
    fs::write(&journal, &good).unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.head(&sid).unwrap(), heads[2]);
    assert_eq!(store.load(&heads[2]).unwrap().messages.len(), 12);
    assert!(hel_store::fsck::fsck(&store).unwrap().is_sound());
}

#[test]
fn a_record_of_a_newer_hel_is_read_past_and_never_cut() {
    let (dir, sid, heads, journal) = three_checkpoints();
    let good = fs::read(&journal).unwrap();
    let recs = records(&good);
    let c1 = recs.iter().find(|r| r.rtype == 2).unwrap();
    let end1 = c1.at + c1.len;
    let newer = record(3, &[9; 32], b"what a newer hel keeps here");
    for (what, bytes) in [
        (
            "in the middle",
            [&good[..end1], &newer, &good[end1..]].concat(),
        ),
        ("at the end", [&good[..], &newer[..]].concat()),
    ] {
        fs::write(&journal, &bytes).unwrap();
        remove_sidecar(&journal);
        let store = Store::open(dir.path()).unwrap();
        // What this hel knows reads on: the head is the last commit.
        assert_eq!(store.head(&sid).unwrap(), heads[2], "{what}");
        assert_eq!(store.load(&heads[2]).unwrap().messages.len(), 12);
        let listed = store.sessions().unwrap();
        assert!(
            listed[0].broken.is_none() && listed[0].head == Some(heads[2]),
            "{what}: {listed:?}"
        );
        // Continuing it is refused, naming the type: nothing is cut.
        let e = store.resume(&sid).map(|_| ()).unwrap_err().to_string();
        assert!(
            e.contains("type 3") && e.contains("upgrade hel") && e.contains(".journal"),
            "{what}: {e}"
        );
        // gc cannot know what such a record keeps alive.
        assert!(hel_store::gc::gc(&store, false).is_err(), "{what}");
        let fsck = hel_store::fsck::fsck(&store).unwrap();
        assert!(
            fsck.faults.iter().any(|f| f.to_string().contains("type 3")),
            "{what}: {fsck:?}"
        );
        assert!(
            fs::read(&journal).unwrap() == bytes,
            "{what}: journal changed"
        );
    }
}

#[test]
fn commit_records_that_break_a_writer_rule_are_faults() {
    let (dir, sid, heads, journal) = three_checkpoints();
    let good = fs::read(&journal).unwrap();
    let recs = records(&good);
    let commits: Vec<&Rec> = recs.iter().filter(|r| r.rtype == 2).collect();
    let other = SessionId::new_random();
    type Edit = Box<dyn Fn(&mut Value) -> Option<Vec<u8>>>;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "another session",
            Box::new(move |v| {
                v["session"] = json!(other.to_string());
                None
            }),
        ),
        ("not JSON", Box::new(|_| Some(b"{\"deps\": [".to_vec()))),
        (
            "seq",
            Box::new(|v| {
                v["seq"] = json!(7);
                None
            }),
        ),
        (
            "parent",
            Box::new(move |v| {
                v["parent"] = json!(heads[2].to_hex());
                None
            }),
        ),
        (
            "not canonical",
            Box::new(|v| Some(serde_json::to_vec_pretty(v).unwrap())),
        ),
        (
            "an unknown key",
            Box::new(|v| {
                v["x"] = json!(1);
                None
            }),
        ),
        (
            "deps naming itself",
            Box::new(|v| {
                v["deps"] = json!([v["session"].clone()]);
                None
            }),
        ),
        (
            "why too long",
            Box::new(|v| {
                v["why"] = json!("w".repeat(201));
                None
            }),
        ),
    ];
    for (k, c) in [commits[1], commits[2]].into_iter().enumerate() {
        for (what, edit) in &edits {
            let mut v: Value = commit_value(c.stored(&good));
            let stored = edit(&mut v).unwrap_or_else(|| canonical::to_vec(&v));
            let rec = record(2, &c.id, &stored);
            let bad = [&good[..c.at], &rec, &good[c.at + c.len..]].concat();
            fs::write(&journal, &bad).unwrap();
            remove_sidecar(&journal);
            assert_fault(
                dir.path(),
                &sid,
                &journal,
                c.at,
                &format!("{what} in commit record {}", k + 2),
            );
        }
    }
}

#[test]
fn an_object_twice_in_one_journal_is_a_fault() {
    let (dir, sid, _, journal) = three_checkpoints();
    let good = fs::read(&journal).unwrap();
    let recs = records(&good);
    let first = &recs[0];
    let c3 = recs.iter().filter(|r| r.rtype == 2).nth(2).unwrap();
    let copy = &good[first.at..first.at + first.len];
    let bad = [&good[..c3.at], copy, &good[c3.at..]].concat();
    fs::write(&journal, &bad).unwrap();
    remove_sidecar(&journal);
    assert_fault(dir.path(), &sid, &journal, c3.at, "a second copy");
}

#[test]
fn fsck_compares_each_commit_records_summary_with_its_snapshots() {
    let (dir, _, _, journal) = three_checkpoints();
    let good = fs::read(&journal).unwrap();
    let recs = records(&good);
    let c2 = recs.iter().filter(|r| r.rtype == 2).nth(1).unwrap();
    let mut v: Value = commit_value(c2.stored(&good));
    v["summary"]["messages"] = json!(99);
    let rec = record(2, &c2.id, &canonical::to_vec(&v));
    let bad = [&good[..c2.at], &rec, &good[c2.at + c2.len..]].concat();
    fs::write(&journal, &bad).unwrap();
    remove_sidecar(&journal);
    let fsck = hel_store::fsck::fsck(&Store::open(dir.path()).unwrap()).unwrap();
    assert!(
        !fsck.is_sound()
            && fsck.faults.iter().any(|f| {
                let s = f.to_string();
                s.contains("summary") && s.contains(&format!("offset {}", c2.at))
            }),
        "{fsck:?}"
    );
}

/// What a crash during the last append can leave is a torn tail: read as
/// not committed, reported as a note, cut by the next commit.
#[test]
fn a_torn_tail_is_what_a_crash_leaves_and_only_that_is_cut() {
    let (dir, sid, heads, journal) = three_checkpoints();
    let good = fs::read(&journal).unwrap();
    let recs = records(&good);
    let c2 = recs.iter().filter(|r| r.rtype == 2).nth(1).unwrap();
    let c3 = recs.iter().filter(|r| r.rtype == 2).nth(2).unwrap();
    let object = record(1, &[5; 32], &[7u8; 300]);
    let commit = record(2, &[6; 32], &[b'{'; 200]);
    let mut bad_last = good.clone();
    bad_last[c3.at + 60] ^= 1;
    for (what, bytes, head, sidecar) in [
        (
            "half a record header",
            [&good[..], &object[..30]].concat(),
            2,
            false,
        ),
        (
            "half a record",
            [&good[..], &object[..100]].concat(),
            2,
            true,
        ),
        (
            "an object record and half a commit record",
            [&good[..], &object, &commit[..120]].concat(),
            2,
            true,
        ),
        (
            "space that never got its bytes",
            [&good[..], &[0u8; 4096][..]].concat(),
            2,
            false,
        ),
        // A last commit record that does not check, the ref still naming
        // the one before: a commit torn before it published.
        ("a torn last commit record", bad_last.clone(), 1, false),
    ] {
        fs::write(&journal, &bytes).unwrap();
        fs::write(
            testing::ref_path(&root(dir.path()), &sid),
            format!("{}\n", heads[head]),
        )
        .unwrap();
        if !sidecar {
            remove_sidecar(&journal);
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.head(&sid).unwrap(), heads[head], "{what}");
        let fsck = hel_store::fsck::fsck(&store).unwrap();
        assert!(
            fsck.is_sound() && fsck.notes.iter().any(|n| n.contains("unfinished commit")),
            "{what}: {fsck:?}"
        );
        // The next commit cuts exactly the tail.
        let (lease, at) = store.resume(&sid).unwrap();
        let loaded = store.load(&at).unwrap();
        let mut conv = Conv::from_loaded(&loaded);
        let mut state = loaded.state;
        conv.push(msg("user", "after the crash"));
        let c = conv.commit(&store, &lease, &mut state);
        drop(lease);
        let after = fs::read(&journal).unwrap();
        let kept = if head == 2 {
            good.len()
        } else {
            c2.at + c2.len
        };
        assert!(
            after[..kept] == bytes[..kept],
            "{what}: the committed part changed"
        );
        let fresh = Store::open(dir.path()).unwrap();
        assert_eq!(fresh.head(&sid).unwrap(), c.id, "{what}");
        assert!(hel_store::fsck::fsck(&fresh).unwrap().is_sound(), "{what}");
        fs::write(&journal, &good).unwrap();
        remove_sidecar(&journal);
    }
    // With the sidecar, that last commit record was durable before the
    // sidecar listed it: not a torn write, a fault.
    let (dir, sid, _, journal) = three_checkpoints();
    let good = fs::read(&journal).unwrap();
    let c3 = records(&good)
        .into_iter()
        .filter(|r| r.rtype == 2)
        .nth(2)
        .unwrap();
    let mut bad_last = good.clone();
    bad_last[c3.at + 60] ^= 1;
    assert!(journal.with_extension("jidx").exists());
    fs::write(&journal, &bad_last).unwrap();
    assert_fault(
        dir.path(),
        &sid,
        &journal,
        c3.at,
        "a damaged last commit record the sidecar lists",
    );
}

/// A commit that staged records and was dropped leaves nothing after the
/// next commit's record (those bytes would read as records after it).
#[test]
fn an_abandoned_commit_leaves_no_records_after_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let first = commit_new(&store, &lease, &mut state, &conversation("a", 4));
    let mut rng = fastrand::Rng::with_seed(7);
    {
        let mut txn = store.begin(&lease, &mut state).unwrap();
        for _ in 0..3 {
            let noise: Vec<u8> = (0..5_000_000).map(|_| rng.u8(..)).collect();
            txn.put_blob(&noise).unwrap();
        }
        // Dropped: nothing published.
    }
    let loaded = store.load(&first.id).unwrap();
    let mut conv = Conv::from_loaded(&loaded);
    let mut state = loaded.state;
    conv.push(msg("user", "small"));
    let c = conv.commit(&store, &lease, &mut state);
    let sid = lease.session().clone();
    drop(lease);
    let journal = journal_path(&root(dir.path()), &sid);
    let bytes = fs::read(&journal).unwrap();
    let last = records(&bytes).pop().unwrap();
    assert_eq!((last.rtype, last.at + last.len), (2, bytes.len()));
    remove_sidecar(&journal);
    let fresh = Store::open(dir.path()).unwrap();
    assert_eq!(fresh.head(&sid).unwrap(), c.id);
    assert!(hel_store::fsck::fsck(&fresh).unwrap().is_sound());
}

// ------------------------------------------------ repack replaces, once

/// Bytes of every file under `.hel/packs` (sealed packs, indexes, journals).
fn packs_disk(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![root(dir).join("packs")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.len();
            }
        }
    }
    total
}

fn sealed_packs(dir: &Path) -> usize {
    fs::read_dir(root(dir).join("packs"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".pack")
        })
        .count()
}

#[test]
fn repeated_repacks_and_gcs_never_grow_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // Two sealed packs: twice, a session forked and then deleted (what the
    // fork needs of its journal goes to a sealed pack).
    let mut forks = Vec::new();
    for tag in ["p", "q"] {
        let lease = store.new_session().unwrap();
        let mut msgs = conversation(tag, 8);
        msgs.push(msg("user", noise(tag, 30_000)));
        let head = commit_new(&store, &lease, &mut SessionState::default(), &msgs).id;
        let sid = lease.session().clone();
        drop(lease);
        let (fork, first, _) = store.fork(&head).unwrap();
        drop(fork);
        store.delete(&sid, false).unwrap();
        forks.push((first, msgs));
    }
    assert_eq!(sealed_packs(dir.path()), 2);
    let check = |what: &str| {
        let fresh = Store::open(dir.path()).unwrap();
        for (first, msgs) in &forks {
            assert_eq!(&fresh.load(first).unwrap().messages, msgs, "{what}");
        }
        let fsck = hel_store::fsck::fsck(&fresh).unwrap();
        assert!(
            fsck.is_sound() && fsck.unreachable == Some(0),
            "{what}: {fsck:?}"
        );
        assert_eq!(sealed_packs(dir.path()), 1, "{what}");
    };
    let two = packs_disk(dir.path());
    hel_store::gc::gc(&store, false).unwrap();
    let merged = packs_disk(dir.path());
    check("the first gc");
    for k in 0..4 {
        hel_store::gc::gc(&store, false).unwrap();
        assert!(packs_disk(dir.path()) <= merged, "gc {}", k + 2);
        check("a later gc");
    }
    let mut sizes = Vec::new();
    for k in 0..5 {
        hel_store::gc::repack(&Store::open(dir.path()).unwrap()).unwrap();
        let now = packs_disk(dir.path());
        sizes.push(now);
        assert!(
            now <= merged,
            "repack {}: {now} bytes, {merged} after the first gc",
            k + 1
        );
        check("a repack");
    }
    // A second sealed pack holding the same objects (as a pull or a copy
    // may leave): one gc leaves one pack, and later ones change nothing.
    let packs = root(dir.path()).join("packs");
    let stem = fs::read_dir(&packs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find_map(|n| n.strip_suffix(".pack").map(str::to_owned))
        .unwrap();
    let copy = format!("pack-{}", "0".repeat(32));
    for ext in ["idx", "pack"] {
        fs::copy(
            packs.join(format!("{stem}.{ext}")),
            packs.join(format!("{copy}.{ext}")),
        )
        .unwrap();
    }
    assert_eq!(sealed_packs(dir.path()), 2);
    let mut gcs = Vec::new();
    for k in 0..5 {
        hel_store::gc::gc(&Store::open(dir.path()).unwrap(), false).unwrap();
        let now = packs_disk(dir.path());
        gcs.push(now);
        assert!(now <= merged, "gc {} after the copy: {now} bytes", k + 1);
        check("a gc after the copy");
    }
    eprintln!("packs/: {two} bytes with two sealed packs, {merged} after the first gc, after each of 5 repacks: {sizes:?}, after each of 5 gcs with a second copy of the pack: {gcs:?}");
}

/// The ref file of `sid` in the store of `dir`.
fn ref_file(dir: &Path, sid: &SessionId) -> PathBuf {
    testing::ref_path(&root(dir), sid)
}

/// Every commit (a checkpoint, a fork's first) moves the
/// session's ref by renaming a new file over it: a new inode each time,
/// 65 bytes naming the new head, nothing left in `tmp/`.
#[test]
fn every_commit_moves_the_ref_by_rename() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let sid = lease.session().clone();
    let r = root(dir.path());
    assert_eq!(
        fs::read_to_string(r.join("format")).unwrap(),
        "hel-store-format 6\n"
    );
    let path = ref_file(dir.path(), &sid);
    assert!(
        !path.exists(),
        "a session has no ref before its first commit"
    );
    let check = |path: &Path, id: &ObjectId, inodes: &mut Vec<u64>| {
        let bytes = fs::read(path).unwrap();
        assert_eq!(bytes.len(), 65);
        assert_eq!(bytes, format!("{id}\n").into_bytes());
        // (A freed inode may be reused later: compare with the last.)
        let ino = fs::metadata(path).unwrap().ino();
        assert!(inodes.last() != Some(&ino), "the ref was written in place");
        inodes.push(ino);
        assert_eq!(fs::read_dir(r.join("tmp")).unwrap().count(), 0);
    };
    let mut inodes = Vec::new();
    let mut state = SessionState::default();
    let mut conv = Conv::default();
    for chunk in conversation("ref", 24).chunks(4) {
        conv.extend(chunk);
        let c = conv.commit(&store, &lease, &mut state);
        check(&path, &c.id, &mut inodes);
        assert_eq!(store.head(&sid).unwrap(), c.id);
    }
    let (fork, first, _) = store.fork(&state.head.unwrap()).unwrap();
    let fork_path = ref_file(dir.path(), fork.session());
    check(&fork_path, &first, &mut inodes);
    let loaded = store.load(&first).unwrap();
    let mut fconv = Conv::from_loaded(&loaded);
    let mut fstate = loaded.state;
    fconv.push(msg("user", "on the fork"));
    let c = fconv.commit(&store, &fork, &mut fstate);
    check(&fork_path, &c.id, &mut inodes);
    assert!(hel_store::fsck::fsck(&store).unwrap().is_sound());
}

/// A ref one commit behind its journal: a commit whose records are
/// durable but whose ref did not move (a crash or a failed rename between
/// the two), or a ref moved back by one (restored from a copy, the
/// sidecar gone with it). The two cannot be told apart, so both read the
/// same way: the commit past the ref is published (everything it names
/// was durable before the ref could move), fsck notes it, and the next
/// commit moves the ref to it and continues from it. Never a session one
/// answer shorter, never a published answer cut.
#[test]
fn a_ref_one_commit_behind_its_journal_reads_as_published_and_the_next_commit_moves_it() {
    let (dir, sid, heads, journal) = three_checkpoints();
    let good = fs::read(&journal).unwrap();
    let recs = records(&good);
    let c2 = recs.iter().filter(|r| r.rtype == 2).nth(1).unwrap();
    let end2 = c2.at + c2.len;
    fs::write(ref_file(dir.path(), &sid), format!("{}\n", heads[1])).unwrap();
    // The sidecar as a crash before the rename leaves it: noted only up to
    // the ref's commit record; then no sidecar at all (a ref moved back
    // with the sidecar removed, as a second implementation forged it).
    let listed = recs.iter().filter(|r| r.at < end2).count();
    let jidx = journal.with_extension("jidx");
    let side = fs::read(&jidx).unwrap();
    fs::write(&jidx, &side[..16 + 48 * listed]).unwrap();
    for sidecar in [true, false] {
        if !sidecar {
            remove_sidecar(&journal);
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.head(&sid).unwrap(), heads[2]);
        let listed = store.sessions().unwrap();
        assert!(
            listed.len() == 1 && listed[0].head == Some(heads[2]) && listed[0].messages == 12,
            "{listed:?}"
        );
        assert_eq!(hel_store::log::log(&store, &sid).unwrap().len(), 3);
        let fsck = hel_store::fsck::fsck(&store).unwrap();
        assert!(
            fsck.is_sound()
                && fsck.notes.iter().any(|n| n.contains("one commit behind")
                    && n.contains(&format!("refs/sessions/{sid}"))),
            "{fsck:?}"
        );
    }
    let store = Store::open(dir.path()).unwrap();
    let (lease, at) = store.resume(&sid).unwrap();
    assert_eq!(at, heads[2]);
    let loaded = store.load(&at).unwrap();
    let mut conv = Conv::from_loaded(&loaded);
    let mut state = loaded.state;
    conv.push(msg("user", "after the commit the ref was behind"));
    let c = conv.commit(&store, &lease, &mut state);
    drop(lease);
    let after = fs::read(&journal).unwrap();
    assert!(
        after[..good.len()] == good[..],
        "a published commit was cut"
    );
    let next = records(&after)
        .into_iter()
        .find(|r| r.at >= good.len() && r.rtype == 2)
        .unwrap();
    assert_eq!(next.id, *c.id.as_bytes());
    let payload: Value = commit_value(next.stored(&after));
    assert_eq!(payload["parent"], heads[2].to_hex());
    assert_eq!(payload["seq"], 4);
    let fresh = Store::open(dir.path()).unwrap();
    assert_eq!(fresh.head(&sid).unwrap(), c.id);
    assert_eq!(hel_store::log::log(&fresh, &sid).unwrap().len(), 4);
    let fsck = hel_store::fsck::fsck(&fresh).unwrap();
    assert!(fsck.is_sound() && fsck.notes.is_empty(), "{fsck:?}");
}

/// What a crash between a commit's sync and its rename leaves, with a torn
/// write of nothing after: the commit past the ref is read as published
/// by every reader, and gc keeps it.
#[test]
fn a_commit_past_the_ref_survives_gc() {
    let (dir, sid, heads, _journal) = three_checkpoints();
    fs::write(ref_file(dir.path(), &sid), format!("{}\n", heads[1])).unwrap();
    let store = Store::open(dir.path()).unwrap();
    hel_store::gc::gc(&store, false).unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.load(&heads[2]).unwrap().messages.len(), 12);
    assert!(hel_store::fsck::fsck(&store).unwrap().is_sound());
}

/// A ref older than its journal by more than one commit (restored from an
/// old copy) is no crash's doing: a fault naming the ref and the journal,
/// never the older session; nothing is cut.
#[test]
fn a_ref_restored_from_an_old_copy_is_a_fault() {
    let (dir, sid, heads, journal) = three_checkpoints();
    let good = fs::read(&journal).unwrap();
    let c3 = records(&good)
        .into_iter()
        .filter(|r| r.rtype == 2)
        .nth(2)
        .unwrap();
    let path = ref_file(dir.path(), &sid);
    fs::write(&path, format!("{}\n", heads[0])).unwrap();
    for sidecar in [true, false] {
        if !sidecar {
            remove_sidecar(&journal);
        }
        assert_fault(dir.path(), &sid, &journal, c3.at, "an old ref");
        let e = Store::open(dir.path())
            .unwrap()
            .head(&sid)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("refs/sessions/{sid}")), "{e}");
    }
    // A ref naming a snapshot its journal never published: the same.
    let other = {
        let store = Store::open(dir.path()).unwrap();
        let lease = store.new_session().unwrap();
        let mut state = SessionState::default();
        commit_new(&store, &lease, &mut state, &conversation("x", 4)).id
    };
    fs::write(&path, format!("{other}\n")).unwrap();
    let e = Store::open(dir.path())
        .unwrap()
        .head(&sid)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no intact commit record"), "{e}");
    assert!(fs::read(&journal).unwrap() == good);
    // Put back, it is the session it was.
    fs::write(&path, format!("{}\n", heads[2])).unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.head(&sid).unwrap(), heads[2]);
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(fsck.is_sound(), "{fsck:?}");
}

/// A journal no ref publishes (a delete interrupted after the ref went, a
/// first commit that never published) is no session: not listed, not
/// resumed. gc removes it, but only once what other refs reach of it is
/// copied into a sealed pack.
#[test]
fn a_journal_without_a_ref_is_no_session_and_gc_keeps_what_refs_reach() {
    let (dir, sid, heads, journal) = three_checkpoints();
    let store = Store::open(dir.path()).unwrap();
    let (fork, first, _) = store.fork(&heads[2]).unwrap();
    let fork_id = fork.session().clone();
    drop(fork);
    // A session that never published its first commit.
    let unpublished = {
        let lease = store.new_session().unwrap();
        let mut state = SessionState::default();
        commit_new(&store, &lease, &mut state, &conversation("u", 4));
        let id = lease.session().clone();
        fs::remove_file(ref_file(dir.path(), &id)).unwrap();
        id
    };
    // An interrupted delete of `sid`: its marker, then the ref gone.
    fs::write(journal.with_extension("deleted"), b"").unwrap();
    fs::remove_file(ref_file(dir.path(), &sid)).unwrap();
    let store = Store::open(dir.path()).unwrap();
    let listed: Vec<SessionId> = store
        .sessions()
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, vec![fork_id.clone()]);
    for gone in [&sid, &unpublished] {
        assert!(matches!(store.head(gone), Err(Error::NoSuchSession { .. })));
        assert!(store.resume(gone).is_err());
    }
    // The fork reads what it names from the journal without a ref.
    assert_eq!(store.load(&first).unwrap().messages.len(), 12);
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(
        fsck.is_sound()
            && fsck
                .notes
                .iter()
                .filter(|n| n.contains("has no ref"))
                .count()
                == 2,
        "{fsck:?}"
    );
    let report = hel_store::gc::gc(&store, false).unwrap();
    assert_eq!(report.journals_removed, 2, "{report:?}");
    assert!(!journal.exists());
    let fresh = Store::open(dir.path()).unwrap();
    assert_eq!(fresh.load(&first).unwrap().messages.len(), 12);
    assert_eq!(fresh.load(&heads[2]).unwrap().messages.len(), 12);
    let fsck = hel_store::fsck::fsck(&fresh).unwrap();
    assert!(fsck.is_sound() && fsck.notes.is_empty(), "{fsck:?}");
}

/// A journal without a ref that holds a record of a type this hel does not
/// know is never removed nor rewritten: gc refuses, naming it.
#[test]
fn a_journal_without_a_ref_holding_a_newer_record_is_kept() {
    let (dir, sid, _, journal) = three_checkpoints();
    let newer = record(3, &[9; 32], b"what a newer hel keeps here");
    let bytes = [fs::read(&journal).unwrap(), newer].concat();
    fs::write(&journal, &bytes).unwrap();
    // A delete interrupted after the ref's unlink.
    fs::write(journal.with_extension("deleted"), b"").unwrap();
    fs::remove_file(ref_file(dir.path(), &sid)).unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert!(store.sessions().unwrap().is_empty());
    let e = hel_store::gc::gc(&store, false).unwrap_err().to_string();
    assert!(e.contains("type 3") && e.contains("upgrade hel"), "{e}");
    assert!(fs::read(&journal).unwrap() == bytes, "journal changed");
}

/// Delete: the ref goes first (the session is gone from then on), the
/// journal after; a delete stopped in between leaves a journal without a
/// ref, which is no session and which gc removes.
#[test]
fn a_delete_removes_the_ref_before_the_journal() {
    let (dir, sid, heads, journal) = three_checkpoints();
    let store = Store::open(dir.path()).unwrap();
    let (fork, first, _) = store.fork(&heads[1]).unwrap();
    drop(fork);
    // What an interrupted delete leaves: the copy made, its marker
    // written, the ref gone.
    let saved = fs::read(&journal).unwrap();
    store.delete(&sid, false).unwrap();
    let marker = journal.with_extension("deleted");
    assert!(!ref_file(dir.path(), &sid).exists() && !journal.exists() && !marker.exists());
    fs::write(&journal, &saved).unwrap();
    fs::write(&marker, b"").unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.sessions().unwrap().len(), 1);
    assert!(matches!(store.head(&sid), Err(Error::NoSuchSession { .. })));
    hel_store::gc::gc(&store, false).unwrap();
    assert!(!journal.exists() && !marker.exists());
    let fresh = Store::open(dir.path()).unwrap();
    assert_eq!(fresh.load(&first).unwrap().messages.len(), 8);
    assert!(hel_store::fsck::fsck(&fresh).unwrap().is_sound());
}

/// A ref file lost (moved away, deleted by hand) is never taken for a
/// delete's leftover: a journal without a ref or a delete marker that holds
/// more than one commit is a fault naming the ref to restore, gc keeps it,
/// and putting the ref back brings the whole session back.
#[test]
fn a_lost_ref_is_a_fault_and_gc_keeps_its_journal() {
    let (dir, sid, heads, journal) = three_checkpoints();
    let r = ref_file(dir.path(), &sid);
    let saved_ref = fs::read(&r).unwrap();
    let saved = fs::read(&journal).unwrap();
    fs::remove_file(&r).unwrap();
    let store = Store::open(dir.path()).unwrap();
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(
        fsck.faults
            .iter()
            .any(|f| f.to_string().contains("the ref was lost")
                && f.to_string().contains(&heads[2].to_hex())),
        "{fsck:?}"
    );
    assert!(hel_store::gc::gc(&store, false).is_err());
    assert_eq!(fs::read(&journal).unwrap(), saved, "gc kept the journal");
    // Only a regular file is a delete's marker: a link in its place is not.
    let marker = journal.with_extension("deleted");
    std::os::unix::fs::symlink(&journal, &marker).unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert!(!hel_store::fsck::fsck(&store).unwrap().is_sound());
    assert!(hel_store::gc::gc(&store, false).is_err());
    assert_eq!(fs::read(&journal).unwrap(), saved, "gc kept the journal");
    fs::remove_file(&marker).unwrap();
    fs::write(&r, &saved_ref).unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.head(&sid).unwrap(), heads[2]);
    assert_eq!(store.load(&heads[2]).unwrap().messages.len(), 12);
    assert!(hel_store::fsck::fsck(&store).unwrap().is_sound());
}

/// A sealed pack holding a record of a type this hel does not know is
/// never rewritten or removed: gc and repack refuse, naming it, and the
/// objects it holds still read.
#[test]
fn a_sealed_pack_holding_a_newer_record_is_never_rewritten() {
    let (dir, sid, heads, _) = three_checkpoints();
    let store = Store::open(dir.path()).unwrap();
    let (fork, first, _) = store.fork(&heads[2]).unwrap();
    drop(fork);
    // The delete copies what the fork needs into a sealed pack.
    store.delete(&sid, false).unwrap();
    let packs: Vec<PathBuf> = fs::read_dir(root(dir.path()).join("packs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pack"))
        .collect();
    assert_eq!(packs.len(), 1);
    let newer = record(3, &[9; 32], b"what a newer hel keeps here");
    let bytes = [fs::read(&packs[0]).unwrap(), newer].concat();
    fs::write(&packs[0], &bytes).unwrap();
    let store = Store::open(dir.path()).unwrap();
    for e in [
        hel_store::gc::gc(&store, false).unwrap_err(),
        hel_store::gc::repack(&store).unwrap_err(),
    ] {
        let e = e.to_string();
        assert!(
            e.contains("type 3") && e.contains("upgrade hel") && e.contains(".pack"),
            "{e}"
        );
    }
    assert!(fs::read(&packs[0]).unwrap() == bytes, "the pack changed");
    assert_eq!(store.load(&first).unwrap().messages.len(), 12);
}

/// A ref whose checkpoint does not load (missing here) is a fault naming
/// the ref: without a journal, listed as broken; with its commit record,
/// fsck says which ref and why.
#[test]
fn a_ref_whose_checkpoint_does_not_load_is_a_fault_naming_the_ref() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    drop(store.new_session().unwrap());
    let sid = SessionId::new_random();
    let missing: ObjectId = "ab".repeat(32).parse().unwrap();
    let path = ref_file(dir.path(), &sid);
    fs::write(&path, format!("{missing}\n")).unwrap();
    let listed = Store::open(dir.path()).unwrap().sessions().unwrap();
    assert!(
        listed.len() == 1
            && listed[0]
                .broken
                .as_ref()
                .is_some_and(|e| e.to_string().contains(&path.display().to_string())),
        "{listed:?}"
    );
    testing::publish(&root(dir.path()), &sid, &missing);
    let store = Store::open(dir.path()).unwrap();
    let named = |s: &str| s.contains(&path.display().to_string()) && s.contains("does not load");
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(
        fsck.faults.iter().any(|f| named(&f.to_string())),
        "{fsck:?}"
    );
}

/// `refs/sessions/` gone (removed, or a backup restored without it): fsck
/// reports it and says gc refuses, so gc must refuse too, instead of
/// taking every journal for an unpublished one and removing it.
#[test]
fn gc_without_refs_removes_no_journal() {
    let (dir, sid, heads, journal) = three_checkpoints();
    let bytes = fs::read(&journal).unwrap();
    let refs = root(dir.path()).join("refs/sessions");
    let saved = dir.path().join("saved-refs");
    fs::rename(&refs, &saved).unwrap();
    let store = Store::open(dir.path()).unwrap();
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(
        fsck.faults
            .iter()
            .any(|f| f.to_string().contains("every session's ref is gone")),
        "{fsck:?}"
    );
    // Refused for the refs, or for the journal whose ref is gone.
    let e = hel_store::gc::gc(&store, false).unwrap_err();
    assert!(
        e.to_string().contains("every session's ref is gone")
            || e.to_string().contains("the ref was lost"),
        "{e}"
    );
    assert_eq!(fs::read(&journal).unwrap(), bytes, "gc removed the journal");
    // Put back, the session is whole.
    fs::rename(&saved, &refs).unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(Some(store.head(&sid).unwrap()), heads.last().copied());
}

/// A ref copied from another session (no journal of its own) names a
/// checkpoint of that session: resume and fsck refuse it, and the listing
/// shows it broken, never as a second copy of the other session.
#[test]
fn a_ref_naming_another_sessions_checkpoint_is_listed_broken() {
    let (dir, sid, heads, _) = three_checkpoints();
    let other = SessionId::new_random();
    let path = ref_file(dir.path(), &other);
    fs::write(&path, format!("{}\n", heads[2])).unwrap();
    let store = Store::open(dir.path()).unwrap();
    let listed = store.sessions().unwrap();
    let row = |s: &SessionId| listed.iter().find(|i| i.id == *s).unwrap();
    assert!(row(&sid).broken.is_none(), "{listed:?}");
    let broken = row(&other).broken.as_ref().map(|e| e.to_string());
    assert!(
        broken.as_ref().is_some_and(
            |e| e.contains(&path.display().to_string()) && e.contains("has no journal")
        ),
        "{listed:?}"
    );
    // The summary index learns nothing of it: listed again, still broken.
    let listed = Store::open(dir.path()).unwrap().sessions().unwrap();
    assert!(
        listed.iter().any(|i| i.id == other && i.broken.is_some()),
        "{listed:?}"
    );
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(!fsck.is_sound(), "{fsck:?}");
}

/// A ref moved back by one commit (restored from a copy made between two
/// commits) while the sidecar lists the commit after it: that commit was
/// published, and it is read so (a commit past the ref always is), never
/// an unpublished commit the next commit cuts (the session silently one
/// checkpoint shorter).
#[test]
fn a_ref_moved_back_one_commit_behind_its_sidecar_reads_whole() {
    let (dir, sid, heads, journal) = three_checkpoints();
    let good = fs::read(&journal).unwrap();
    fs::write(ref_file(dir.path(), &sid), format!("{}\n", heads[1])).unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.head(&sid).unwrap(), heads[2]);
    let listed = store.sessions().unwrap();
    assert!(
        listed.len() == 1 && listed[0].head == Some(heads[2]) && listed[0].checkpoints == 3,
        "{listed:?}"
    );
    let fsck = hel_store::fsck::fsck(&store).unwrap();
    assert!(
        fsck.is_sound() && fsck.notes.iter().any(|n| n.contains("one commit behind")),
        "{fsck:?}"
    );
    assert!(hel_store::gc::gc(&store, false).is_ok());
    assert!(fs::read(&journal).unwrap() == good, "nothing was cut");
}

/// The store records who depends on whom (objects-spec §6.2): a fork's
/// first head comes after `refs/dependents/<base>/<fork>` and
/// `refs/recorded/<fork>`, and a delete reads only the heads those
/// records name, plus every session that is not recorded at all (its
/// records lost). Both kinds of fork keep every message when their base is
/// deleted, and the deleted session's records go with it.
#[test]
fn a_delete_finds_forks_by_their_records_and_unrecorded_sessions_by_their_heads() {
    let (dir, sid, heads, _) = three_checkpoints();
    let store = Store::open(dir.path()).unwrap();
    let r = root(dir.path());
    let (lease1, h1, _) = store.fork(&heads[1]).unwrap();
    let (lease2, h2, _) = store.fork(&heads[2]).unwrap();
    let (f1, f2) = (lease1.session().clone(), lease2.session().clone());
    drop((lease1, lease2));
    let deps = r.join("refs/dependents").join(sid.as_str());
    for f in [&f1, &f2] {
        assert!(
            deps.join(f.as_str()).is_file(),
            "{f} recorded as a dependent"
        );
        assert!(r.join("refs/recorded").join(f.as_str()).is_file());
    }
    assert!(r.join("refs/recorded").join(sid.as_str()).is_file());
    let before = [
        store.load(&h1).unwrap().messages,
        store.load(&h2).unwrap().messages,
    ];
    // The second fork with its records lost.
    fs::remove_file(deps.join(f2.as_str())).unwrap();
    fs::remove_file(r.join("refs/recorded").join(f2.as_str())).unwrap();
    let report = hel_store::fsck::fsck(&store).unwrap();
    assert!(report.is_sound(), "{:?}", report.faults);
    store.delete(&sid, true).unwrap();
    let fresh = Store::open(dir.path()).unwrap();
    assert_eq!(
        [
            fresh.load(&h1).unwrap().messages,
            fresh.load(&h2).unwrap().messages
        ],
        before
    );
    assert!(!deps.exists(), "its dependents' records went with it");
    assert!(!r.join("refs/recorded").join(sid.as_str()).exists());
    let report = hel_store::fsck::fsck(&fresh).unwrap();
    assert!(report.is_sound(), "{:?}", report.faults);
}

/// A dependents record a recorded session needs and lacks is a fault
/// naming it (a delete of the base would not look at the fork); gc writes
/// it again, after which the delete keeps the fork whole. Records of a
/// session without a head (a first commit a crash stopped after writing
/// them) are removed by gc.
#[test]
fn a_missing_dependents_record_is_a_fault_that_gc_mends() {
    let (dir, sid, heads, _) = three_checkpoints();
    let store = Store::open(dir.path()).unwrap();
    let r = root(dir.path());
    let (lease, head, _) = store.fork(&heads[2]).unwrap();
    let fork = lease.session().clone();
    drop(lease);
    let record = r
        .join("refs/dependents")
        .join(sid.as_str())
        .join(fork.as_str());
    fs::remove_file(&record).unwrap();
    // What a fork killed between its records and its ref leaves.
    let ghost = SessionId::new_random();
    let ghost_dir = r.join("refs/dependents").join(sid.as_str());
    fs::write(ghost_dir.join(ghost.as_str()), "").unwrap();
    fs::write(r.join("refs/recorded").join(ghost.as_str()), "").unwrap();
    let report = hel_store::fsck::fsck(&store).unwrap();
    let faults: Vec<String> = report.faults.iter().map(|f| f.to_string()).collect();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(
        faults[0].starts_with(&format!("{} is missing", record.display()))
            && faults[0].contains("run `hel gc`"),
        "{faults:?}"
    );
    hel_store::gc::gc(&store, false).unwrap();
    assert!(record.is_file());
    assert!(!ghost_dir.join(ghost.as_str()).exists());
    assert!(!r.join("refs/recorded").join(ghost.as_str()).exists());
    let report = hel_store::fsck::fsck(&store).unwrap();
    assert!(report.is_sound(), "{:?}", report.faults);
    let before = store.load(&head).unwrap().messages;
    store.delete(&sid, true).unwrap();
    let fresh = Store::open(dir.path()).unwrap();
    assert_eq!(fresh.load(&head).unwrap().messages, before);
}

/// A commit writes the record of every dependency whose journal is there
/// and whose record is not, whether or not its previous head listed it (a
/// delete of that dependency removed its records, and a session of its id
/// may come back, by a pull, with a journal this one then shares from).
#[test]
fn a_commit_writes_a_missing_record_of_a_dependency_its_head_already_had() {
    let (dir, sid, heads, _) = three_checkpoints();
    let store = Store::open(dir.path()).unwrap();
    let r = root(dir.path());
    let (lease, first, _) = store.fork(&heads[2]).unwrap();
    let record = r
        .join("refs/dependents")
        .join(sid.as_str())
        .join(lease.session().as_str());
    fs::remove_file(&record).unwrap();
    let loaded = store.load(&first).unwrap();
    let mut conv = Conv::from_loaded(&loaded);
    let mut state = loaded.state;
    conv.push(msg("user", "on the fork"));
    let head = conv.commit(&store, &lease, &mut state).id;
    assert!(record.is_file(), "written again before the head moved");
    drop(lease);
    let before = store.load(&head).unwrap().messages;
    store.delete(&sid, true).unwrap();
    let fresh = Store::open(dir.path()).unwrap();
    assert_eq!(fresh.load(&head).unwrap().messages, before);
}

/// Records that are gone, or something else where they belong, make
/// every delete read every head (objects-spec §6.2): a commit never makes
/// `refs/dependents/` again (a fork made meanwhile would leave it holding
/// only its own record), and only gc does, after taking back every
/// session's `refs/recorded/` entry. Both forks survive the delete of
/// their base either way.
#[test]
fn records_removed_or_replaced_make_deletes_read_every_head() {
    use std::os::unix::fs::symlink;
    for replace in [false, true] {
        let (dir, sid, heads, _) = three_checkpoints();
        let store = Store::open(dir.path()).unwrap();
        let r = root(dir.path());
        let (l1, h1, _) = store.fork(&heads[2]).unwrap();
        drop(l1);
        let top = r.join("refs/dependents");
        fs::remove_dir_all(&top).unwrap();
        if replace {
            // What stands there instead: a link to a copy of nothing.
            symlink(dir.path(), &top).unwrap();
        }
        // A fork made meanwhile does not make the directory again.
        let (l2, h2, _) = store.fork(&heads[1]).unwrap();
        drop(l2);
        assert_eq!(fs::symlink_metadata(&top).is_ok(), replace);
        let before = [
            store.load(&h1).unwrap().messages,
            store.load(&h2).unwrap().messages,
        ];
        store.delete(&sid, false).unwrap();
        let fresh = Store::open(dir.path()).unwrap();
        assert_eq!(
            [
                fresh.load(&h1).unwrap().messages,
                fresh.load(&h2).unwrap().messages
            ],
            before
        );
        // gc makes the records again, every session's, and fsck agrees.
        hel_store::gc::gc(&fresh, false).unwrap();
        assert!(fs::symlink_metadata(&top).unwrap().is_dir());
        let report = hel_store::fsck::fsck(&fresh).unwrap();
        assert!(report.is_sound(), "{:?}", report.faults);
    }
}

/// Something other than a directory at `refs/dependents/<base>` makes the
/// base's delete read every head (no refusal telling the user to remove
/// it, after which the delete would trust that nothing depends on the
/// base), and a commit that cannot write its record there takes the
/// session's `refs/recorded/` entry back.
#[test]
fn a_file_where_a_base_records_its_dependents_makes_its_delete_read_every_head() {
    let (dir, sid, heads, _) = three_checkpoints();
    let store = Store::open(dir.path()).unwrap();
    let r = root(dir.path());
    let base_dir = r.join("refs/dependents").join(sid.as_str());
    fs::create_dir_all(r.join("refs/dependents")).unwrap();
    fs::write(&base_dir, "not a directory").unwrap();
    let (lease, head, _) = store.fork(&heads[2]).unwrap();
    assert!(
        !r.join("refs/recorded")
            .join(lease.session().as_str())
            .exists(),
        "its record could not be written: not recorded"
    );
    drop(lease);
    let before = store.load(&head).unwrap().messages;
    store.delete(&sid, false).unwrap();
    let fresh = Store::open(dir.path()).unwrap();
    assert_eq!(fresh.load(&head).unwrap().messages, before);
}

fn describe(e: &Error) -> String {
    match e {
        Error::BadMessage { id, index, .. } => format!("BadMessage {id} item {index}"),
        Error::Missing { id, .. } => format!("Missing {id}"),
        Error::ConversationTooLarge { what, .. } => format!("ConversationTooLarge {what}"),
        Error::DamagedRecord { id, .. } => format!("DamagedRecord {id:?}"),
        other => format!("other: {other}"),
    }
}

/// A list whose head node holds a message that is not one and whose
/// `prev` names an object that is nowhere: the load names the bad message
/// (the first fault in the chain), however long the list.
#[test]
fn a_fault_in_a_node_is_named_before_a_later_walk_error() {
    let nowhere = ObjectId::of_canonical(b"blob 7\0nowhere");
    let mut seen = Vec::new();
    for n in [1_000usize, 2_400] {
        let dir = tempfile::tempdir().unwrap();
        let mut items: Vec<Value> = conversation("t", n)
            .into_iter()
            .map(|m| json!({"m": m}))
            .collect();
        items[n - 5] = json!({"m": {"content": "no role"}});
        let (_, head) = planted_session(
            dir.path(),
            &[json!({"count": n, "items": items, "prev": nowhere.to_hex()})],
            json!({}),
        );
        let store = Store::open(dir.path()).unwrap();
        let e = store.load(&head).unwrap_err();
        seen.push(describe(&e).split(' ').next().unwrap().to_owned());
    }
    assert_eq!(seen, ["BadMessage", "BadMessage"]);
}

/// A 2,400-message session opened with a byte limit its conversation is
/// over, with a node further down its chain damaged: the limit, met
/// first, is what every load reports.
#[test]
fn a_limit_error_is_named_before_a_damaged_node_further_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let msgs = conversation("t", 2_400);
    let mut conv = Conv::default();
    let ids = commit_all(&store, &lease, &mut state, &mut conv, &msgs, 100);
    drop(lease);
    let head = *ids.last().unwrap();
    let journal = journal_path(&root(dir.path()), &state_session(&store));
    let good = fs::read(&journal).unwrap();
    let node = store
        .checkpoint(&ids[ids.len() - 3])
        .unwrap()
        .messages
        .root
        .unwrap();
    fs::write(&journal, with_stored_byte_flipped(&good, &node, 20).1).unwrap();
    let limits = hel_store::Limits {
        max_messages: 500_000,
        max_bytes: 4_000,
    };
    let mut tally = BTreeMap::new();
    for _ in 0..20 {
        let fresh = Store::open_with(dir.path(), limits).unwrap();
        let e = fresh.load(&head).unwrap_err();
        *tally.entry(describe(&e)).or_insert(0) += 1;
    }
    assert_eq!(
        tally.len(),
        1,
        "the same store, different errors: {tally:?}"
    );
    assert!(
        tally
            .keys()
            .next()
            .unwrap()
            .starts_with("ConversationTooLarge"),
        "{tally:?}"
    );
}

/// The JSON of a commit record's stored bytes: the bytes themselves, or
/// (what this hel writes, objects-spec §5.2) a frame with hel's
/// dictionary holding them.
fn commit_value(stored: &[u8]) -> Value {
    let json = if stored.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        assert_eq!(
            zstd::zstd_safe::get_dict_id_from_frame(stored).map(|d| d.get()),
            Some(hel_store::DICTIONARY_ID)
        );
        zstd::bulk::Decompressor::with_dictionary(hel_store::DICTIONARY)
            .unwrap()
            .decompress(stored, 64 << 10)
            .unwrap()
    } else {
        stored.to_vec()
    };
    serde_json::from_slice(&json).unwrap()
}

/// Round records (objects-spec §10.2): appended past the committed part
/// without a commit record, read back in order (by another process too)
/// while the head is the one they follow, no checkpoint and no fault, and
/// cut by the session's next commit.
#[test]
fn round_records_follow_the_head_until_the_next_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let lease = store.new_session().unwrap();
    let sid = lease.session().clone();
    let mut state = SessionState::default();
    // No head yet: nothing for a round to follow.
    hel_store::rounds::append(&store, &lease, &state, b"nothing").unwrap();
    let mut conv = Conv::default();
    conv.extend(&[msg("system", "s"), msg("user", "hi"), msg("assistant", "a")]);
    let first = conv.commit(&store, &lease, &mut state);
    let size = fs::metadata(journal_path(&root(dir.path()), &sid))
        .unwrap()
        .len();
    hel_store::rounds::append(&store, &lease, &state, b"one").unwrap();
    hel_store::rounds::append(&store, &lease, &state, b"two").unwrap();
    assert!(
        fs::metadata(journal_path(&root(dir.path()), &sid))
            .unwrap()
            .len()
            > size
    );
    let want = vec![b"one".to_vec(), b"two".to_vec()];
    assert_eq!(
        hel_store::rounds::read(&store, &sid, &first.id).unwrap(),
        want
    );
    let other = Store::open(dir.path()).unwrap();
    assert_eq!(
        hel_store::rounds::read(&other, &sid, &first.id).unwrap(),
        want
    );
    // Not the head's: nothing.
    let elsewhere = ObjectId::of_canonical(b"x");
    assert!(hel_store::rounds::read(&other, &sid, &elsewhere)
        .unwrap()
        .is_empty());
    // Nothing else sees them: the head, the summary and the log are the
    // commit's; fsck is sound and notes them.
    assert_eq!(other.head(&sid).unwrap(), first.id);
    let listed = other.sessions().unwrap();
    assert_eq!(listed[0].checkpoints, 1);
    assert_eq!(hel_store::log::log(&other, &sid).unwrap().len(), 1);
    let fsck = hel_store::fsck::fsck(&other).unwrap();
    assert!(
        fsck.is_sound() && fsck.notes.iter().any(|n| n.contains("round records")),
        "{fsck:?}"
    );
    // The next commit cuts them.
    conv.extend(&[msg("user", "more"), msg("assistant", "b")]);
    let second = conv.commit(&store, &lease, &mut state);
    assert!(hel_store::rounds::read(&store, &sid, &second.id)
        .unwrap()
        .is_empty());
    assert!(
        hel_store::rounds::read(&Store::open(dir.path()).unwrap(), &sid, &second.id)
            .unwrap()
            .is_empty()
    );
    let fsck = hel_store::fsck::fsck(&Store::open(dir.path()).unwrap()).unwrap();
    assert!(fsck.is_sound() && fsck.notes.is_empty(), "{fsck:?}");
    // Cut without a commit too (an instruction that ended without one).
    hel_store::rounds::append(&store, &lease, &state, b"three").unwrap();
    hel_store::rounds::discard(&lease);
    assert!(hel_store::rounds::read(&store, &sid, &second.id)
        .unwrap()
        .is_empty());
}
