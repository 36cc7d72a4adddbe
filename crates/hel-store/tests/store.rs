//! Property tests of hel-store: vectors, commit cost, dedup, fork, log,
//! delete/gc, locks, corruption, a randomized model check, SIGKILL crash
//! tests and the concurrent gc stress test.
//!
//! The crash and stress tests re-run this test binary as child processes
//! (`child_*` tests, ignored unless `HEL_STORE_CHILD` is set).

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use hel_store::object::{self, Kind};
use hel_store::{
    canonical, Carried, Carry, CommitInput, Error, Loaded, ObjectId, SessionLease, SessionState,
    Store,
};
use serde_json::{json, Value};

fn input<'a>(messages: &'a [Value], unchanged: usize) -> CommitInput<'a> {
    CommitInput {
        messages,
        carried: Carried::prefix(unchanged),
        cwd: "/project".into(),
        request_config: json!({"model": "m"}),
        meter: Value::Null,
        cursors: json!([]),
        new_spill: Vec::new(),
        instruction: messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_owned(),
        input_tokens: 0,
        output_tokens: 0,
        why: "test".into(),
    }
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

struct Rng(u64);
impl Rng {
    fn seeded() -> Rng {
        let seed = std::env::var("HEL_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| hel_store::time::now_ms() ^ std::process::id() as u64);
        eprintln!("seed {seed} (set HEL_TEST_SEED to repeat)");
        Rng(seed | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn commit_all(
    store: &Store,
    lease: &SessionLease,
    state: &mut SessionState,
    messages: &[Value],
    step: usize,
) -> Vec<ObjectId> {
    let mut ids = Vec::new();
    let mut done = state.head.map_or(0, |_| 0);
    let mut end = 0;
    while end < messages.len() {
        end = (end + step).min(messages.len());
        let c = store
            .commit(lease, state, input(&messages[..end], done))
            .unwrap();
        done = end;
        ids.push(c.id);
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
        let kind = match v["kind"].as_str().unwrap() {
            "blob" => Kind::Blob,
            "list" => Kind::List,
            "snapshot" => Kind::Snapshot,
            k => panic!("unknown kind {k}"),
        };
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
        let (id, _) = object::encode(kind, &payload);
        assert_eq!(id.to_hex(), v["id"].as_str().unwrap(), "{}", v["name"]);
    }
}

#[test]
fn store_dir_is_private_and_ignored() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::for_project(dir.path());
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
    let store = Store::for_project(dir.path());
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let all = conversation("s", 4004);
    commit_all(&store, &lease, &mut state, &all[..4000], 4);
    // Append 4 small messages to a 4,000-message session: one list node
    // holding them and one snapshot.
    let c = store.commit(&lease, &mut state, input(&all, 4000)).unwrap();
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

#[test]
fn identical_content_is_stored_once_across_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::for_project(dir.path());
    let big = msg("tool", "y".repeat(100_000));
    let msgs = vec![msg("user", "same"), big.clone()];
    for _ in 0..3 {
        let lease = store.new_session().unwrap();
        let mut st = SessionState::default();
        store.commit(&lease, &mut st, input(&msgs, 0)).unwrap();
    }
    let (id, _) = object::encode(Kind::Blob, &canonical::to_vec(&big));
    assert!(store.layout().object_path(&id).exists());
    // Shared by all: the big message's blob, the list node (holding the
    // small message inline), the config and cursor blobs; 3 snapshots
    // (they differ by session id).
    let report = store.fsck().unwrap();
    assert_eq!(report.objects, 4 + 3, "{report:?}");
}

#[test]
fn compaction_names_the_kept_tail_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::for_project(dir.path());
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut all = conversation("c", 200);
    all[170] = msg("tool", "big ".repeat(10_000)); // stored as a blob
    commit_all(&store, &lease, &mut state, &all, 4);
    let mut compacted = vec![
        all[0].clone(),
        msg("user", "<compacted-summary>s</compacted-summary>"),
    ];
    compacted.extend_from_slice(&all[150..]);
    let mut inp = input(&compacted, 1);
    inp.carried = Carried::from_runs(vec![
        Carry {
            at: 0,
            from: 0,
            len: 1,
        },
        Carry {
            at: 2,
            from: 150,
            len: 50,
        },
    ]);
    let before = store.fsck().unwrap().objects;
    let c = store.commit(&lease, &mut state, inp).unwrap();
    // One list node (the summary inline, the tail as slices) and the snapshot.
    assert_eq!(c.objects_written, 2);
    assert_eq!(store.fsck().unwrap().objects, before + 2);
    let cp = store.checkpoint(&c.id).unwrap();
    let node = hel_store::list::read_node(store.layout(), &cp.messages.root.unwrap()).unwrap();
    // Position 0 is carried too: a slice, the summary, then one slice per
    // node that held part of the tail.
    assert_eq!(node.items.len(), 2 + 13, "{node:?}");
    assert!(
        matches!(&node.items[1], hel_store::list::Item::Inline(m) if m["content"] == "<compacted-summary>s</compacted-summary>")
    );
    let slices = node
        .items
        .iter()
        .filter(|i| matches!(i, hel_store::list::Item::Slice { .. }))
        .count();
    assert_eq!(slices, node.items.len() - 1);
    assert_eq!(store.load(&c.id).unwrap().messages, compacted);
    // The next commit after compaction appends as usual, and gc keeps the
    // sliced nodes (not their history) alive.
    let mut more = compacted.clone();
    more.push(msg("user", "after"));
    let c2 = store
        .commit(&lease, &mut state, input(&more, compacted.len()))
        .unwrap();
    assert_eq!(c2.objects_written, 2);
    assert_eq!(store.load(&c2.id).unwrap().messages, more);
    assert!(store.fsck().unwrap().is_sound());
}

#[test]
fn spill_is_kept_by_blob_and_survives_forks() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::for_project(dir.path());
    let lease = store.new_session().unwrap();
    let sid = lease.session().to_owned();
    let spill_path = store.layout().spill_dir(&sid).join("out-1.txt");
    fs::create_dir_all(spill_path.parent().unwrap()).unwrap();
    fs::write(&spill_path, "spilled".repeat(1000)).unwrap();
    let name = format!(".hel/sessions/{sid}/spill/out-1.txt");
    let mut state = SessionState::default();
    let msgs = conversation("p", 4);
    let mut inp = input(&msgs, 0);
    inp.new_spill = vec![(name.clone(), spill_path.clone())];
    let c = store.commit(&lease, &mut state, inp).unwrap();
    let (fork_lease, fork_id) = store.fork(&c.id).unwrap();
    drop(fork_lease);
    drop(lease);
    store.delete(&sid, true).unwrap();
    let cp = store.load(&fork_id).unwrap().checkpoint;
    let entry = &cp.spill[&name];
    assert_eq!(
        store.read_blob(&entry.blob).unwrap(),
        "spilled".repeat(1000).as_bytes()
    );
    assert!(store.fsck().unwrap().is_sound());
}

#[test]
fn fork_is_one_snapshot_and_log_marks_the_fork_point() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::for_project(dir.path());
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let all = conversation("f", 40);
    let ids = commit_all(&store, &lease, &mut state, &all, 4);
    let before = store.fsck().unwrap().objects;
    let (fork, first) = store.fork(&ids[4]).unwrap();
    assert_eq!(store.fsck().unwrap().objects, before + 1);
    let Loaded {
        messages: msgs,
        state: mut fstate,
        ..
    } = store.load(&first).unwrap();
    assert_eq!(msgs, all[..20]);
    let mut more = msgs.clone();
    more.push(msg("user", "fork only"));
    more.push(msg("assistant", "ok"));
    let c = store.commit(&fork, &mut fstate, input(&more, 20)).unwrap();

    let log = store.log(fork.session()).unwrap();
    let got: Vec<ObjectId> = log.iter().map(|e| e.id).collect();
    let mut want = vec![c.id, first];
    want.extend(ids[..5].iter().rev());
    assert_eq!(got, want);
    assert!(log[2].fork_point && !log[1].fork_point && !log[3].fork_point);
    assert_eq!(log[0].instruction, "fork only");
    assert_eq!(log[0].messages, 22);
    // The original is untouched.
    assert_eq!(store.head(lease.session()).unwrap(), ids.last().copied());
    assert_eq!(store.log(lease.session()).unwrap().len(), 10);
}

#[test]
fn leases_exclude_and_release_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::for_project(dir.path());
    let lease = store.new_session().unwrap();
    let sid = lease.session().to_owned();
    let mut state = SessionState::default();
    store
        .commit(&lease, &mut state, input(&conversation("l", 4), 0))
        .unwrap();
    assert!(matches!(store.resume(&sid), Err(Error::InUse { session }) if session == sid));
    assert!(matches!(store.delete(&sid, true), Err(Error::InUse { .. })));
    let other = store.new_session().unwrap();
    store
        .commit(
            &other,
            &mut SessionState::default(),
            input(&conversation("o", 4), 0),
        )
        .unwrap();
    let infos = store.sessions().unwrap();
    assert!(infos.iter().find(|s| s.id == sid).unwrap().busy);
    drop(lease);
    let (_again, head) = store.resume(&sid).unwrap();
    assert_eq!(Some(head), state.head);
    assert!(matches!(
        store.resume("not-a-uuid"),
        Err(Error::BadSessionId(_))
    ));
}

#[test]
fn session_without_checkpoint_is_listed_then_collected() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::for_project(dir.path());
    let lease = store.new_session().unwrap();
    let sid = lease.session().to_owned();
    let infos = store.sessions().unwrap();
    assert_eq!((infos[0].busy, infos[0].checkpoints), (true, 0));
    assert!(store.gc(false).unwrap().sessions_removed.is_empty());
    drop(lease);
    assert!(matches!(
        store.resume(&sid),
        Err(Error::NoCheckpoint { .. })
    ));
    assert_eq!(store.gc(false).unwrap().sessions_removed, vec![sid.clone()]);
    assert!(matches!(
        store.resume(&sid),
        Err(Error::NoSuchSession { .. })
    ));
}

#[test]
fn delete_and_gc_reclaim_unshared_objects_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::for_project(dir.path());
    let a = store.new_session().unwrap();
    let b = store.new_session().unwrap();
    let shared = msg("user", "shared message");
    let mut ma = vec![shared.clone()];
    ma.extend(conversation("a", 8));
    let mut mb = vec![shared];
    mb.extend(conversation("b", 8));
    let (mut sa, mut sb) = (SessionState::default(), SessionState::default());
    store.commit(&a, &mut sa, input(&ma, 0)).unwrap();
    let hb = store.commit(&b, &mut sb, input(&mb, 0)).unwrap().id;
    let sid = a.session().to_owned();
    drop(a);
    let dry = store.gc(true).unwrap();
    assert_eq!(dry.objects_removed, 0);
    let report = store.delete(&sid, true).unwrap().unwrap();
    // a's list node (its messages are inline) and its snapshot.
    assert_eq!(report.objects_removed, 2, "{report:?}");
    assert!(report.bytes_removed > 0);
    assert!(!store.layout().session_dir(&sid).exists());
    assert!(!store.layout().ref_path(&sid).exists());
    assert_eq!(store.load(&hb).unwrap().messages, mb);
    let fsck = store.fsck().unwrap();
    assert!(fsck.is_sound() && fsck.unreachable == 0, "{fsck:?}");
}

#[test]
fn corruption_gives_typed_errors_naming_the_object() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::for_project(dir.path());
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut msgs = conversation("x", 8);
    msgs[3] = msg("assistant", "long ".repeat(5_000)); // stored as a blob
    let head = store
        .commit(&lease, &mut state, input(&msgs, 0))
        .unwrap()
        .id;
    let (blob, _) = object::encode(Kind::Blob, &canonical::to_vec(&msgs[3]));
    let path = store.layout().object_path(&blob);
    let good = fs::read(&path).unwrap();
    let mut bad = good.clone();
    let last = bad.len() - 5;
    bad[last] ^= 1;
    fs::write(&path, &bad).unwrap();
    match store.load(&head) {
        Err(Error::Corrupt { id, path: p, .. }) => assert_eq!((id, p), (blob, path.clone())),
        other => panic!("{other:?}"),
    }
    let fsck = store.fsck().unwrap();
    assert!(
        !fsck.is_sound() && fsck.corrupt[0].contains(&blob.to_hex()),
        "{fsck:?}"
    );
    fs::remove_file(&path).unwrap();
    assert!(matches!(store.load(&head), Err(Error::Missing { id, .. }) if id == blob));
    assert!(store.fsck().unwrap().missing[0].contains(&blob.to_hex()));
    // gc refuses to sweep on a broken store rather than guess.
    fs::write(&path, &good).unwrap();
    let snap_path = store.layout().object_path(&head);
    fs::write(&snap_path, b"garbage").unwrap();
    assert!(matches!(store.gc(false), Err(Error::Corrupt { .. })));
    // A newer schema is its own error.
    let newer = json!({"schema_version": 99});
    let (id, canon) = object::encode(Kind::Snapshot, &canonical::to_vec(&newer));
    fs::create_dir_all(store.layout().object_dir(&id)).unwrap();
    fs::write(store.layout().object_path(&id), zstd_compress(&canon)).unwrap();
    assert!(matches!(
        store.checkpoint(&id),
        Err(Error::NewerSchema { found: 99, .. })
    ));
    // A torn ref is reported, not read as empty.
    fs::write(store.layout().ref_path(lease.session()), "abc").unwrap();
    assert!(matches!(
        store.head(lease.session()),
        Err(Error::BadRef { .. })
    ));
}

fn zstd_compress(bytes: &[u8]) -> Vec<u8> {
    // Objects are plain zstd frames; level 1 is as valid as any.
    let mut enc = Vec::new();
    let mut w = zstd_frame::Encoder(&mut enc);
    w.write(bytes);
    enc
}

mod zstd_frame {
    /// The smallest valid zstd frame writer: one raw (uncompressed) block.
    pub struct Encoder<'a>(pub &'a mut Vec<u8>);
    impl Encoder<'_> {
        pub fn write(&mut self, data: &[u8]) {
            assert!(data.len() < 1 << 20);
            let out = &mut *self.0;
            out.extend_from_slice(&[0x28, 0xB5, 0x2F, 0xFD]); // magic
            out.push(0x00); // frame header: no checksum, window descriptor follows
            out.push(0x58); // window 2^(10+11) = 2 MiB
            let header = ((data.len() as u32) << 3) | 1; // last block, raw
            out.extend_from_slice(&header.to_le_bytes()[..3]);
            out.extend_from_slice(data);
        }
    }
}

#[test]
fn randomized_operations_match_a_model() {
    let mut rng = Rng::seeded();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::for_project(dir.path());
    // Model: session id -> list of (checkpoint id, messages at it), oldest first.
    let mut model: BTreeMap<String, Vec<(ObjectId, Vec<Value>)>> = BTreeMap::new();
    let mut live: BTreeMap<String, (SessionLease, SessionState, Vec<Value>)> = BTreeMap::new();
    for step in 0..300 {
        match rng.below(10) {
            0..=5 if !live.is_empty() => {
                let k = rng.below(live.len() as u64) as usize;
                let sid = live.keys().nth(k).unwrap().clone();
                let (lease, state, msgs) = live.get_mut(&sid).unwrap();
                let mut carried = Carried::prefix(msgs.len());
                if rng.below(8) == 0 && msgs.len() > 6 {
                    // A compaction: keep the first and the last few.
                    let len = msgs.len();
                    let tail = msgs.split_off(len - 3);
                    msgs.truncate(1);
                    msgs.push(msg(
                        "user",
                        format!("<compacted-summary>{step}</compacted-summary>"),
                    ));
                    msgs.extend(tail);
                    carried.splice(1, len - 3, 1);
                }
                if rng.below(4) == 0 {
                    msgs.push(msg("tool", format!("{step} {}", "large ".repeat(3_000))));
                }
                for i in 0..=rng.below(5) {
                    msgs.push(msg(
                        if i % 2 == 0 { "user" } else { "assistant" },
                        format!("m{} {}", rng.below(20), step),
                    ));
                }
                let mut inp = input(msgs, 0);
                inp.carried = carried;
                let c = store.commit(lease, state, inp).unwrap();
                model.get_mut(&sid).unwrap().push((c.id, msgs.clone()));
            }
            6 if !model.is_empty() => {
                let sid = model
                    .keys()
                    .nth(rng.below(model.len() as u64) as usize)
                    .unwrap()
                    .clone();
                let hist = &model[&sid];
                let (at, msgs) = hist[rng.below(hist.len() as u64) as usize].clone();
                let mut lineage: Vec<(ObjectId, Vec<Value>)> = hist
                    .iter()
                    .take_while(|(id, _)| *id != at)
                    .cloned()
                    .collect();
                lineage.push((at, msgs.clone()));
                let (lease, first) = store.fork(&at).unwrap();
                let Loaded {
                    messages: back,
                    state,
                    ..
                } = store.load(&first).unwrap();
                assert_eq!(back, msgs);
                lineage.push((first, msgs.clone()));
                let sid = lease.session().to_owned();
                model.insert(sid.clone(), lineage);
                live.insert(sid, (lease, state, msgs));
            }
            7 if !model.is_empty() => {
                let sid = model
                    .keys()
                    .nth(rng.below(model.len() as u64) as usize)
                    .unwrap()
                    .clone();
                live.remove(&sid);
                store.delete(&sid, rng.below(2) == 0).unwrap();
                model.remove(&sid);
            }
            8 => {
                store.gc(false).unwrap();
            }
            _ => {
                let lease = store.new_session().unwrap();
                let msgs = vec![msg("system", "sys")];
                let sid = lease.session().to_owned();
                let mut state = SessionState::default();
                let c = store.commit(&lease, &mut state, input(&msgs, 0)).unwrap();
                model.insert(sid.clone(), vec![(c.id, msgs.clone())]);
                live.insert(sid, (lease, state, msgs));
            }
        }
    }
    store.gc(false).unwrap();
    for (sid, hist) in &model {
        let log = store.log(sid).unwrap();
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
    let fsck = store.fsck().unwrap();
    assert!(fsck.is_sound() && fsck.unreachable == 0, "{fsck:?}");
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
    let store = Store::for_project(Path::new(&dir));
    let sid = std::env::var("HEL_SESSION").unwrap();
    let (lease, head) = store.resume(&sid).unwrap();
    let Loaded {
        messages: mut msgs,
        mut state,
        ..
    } = store.load(&head).unwrap();
    let all = conversation("k", 100_000);
    loop {
        let done = msgs.len();
        msgs.extend_from_slice(&all[done..done + 4]);
        // A spill blob now and then, so kills also land in big writes.
        let mut inp = input(&msgs, done);
        let spill = std::env::temp_dir().join(format!("hel-crash-spill-{}", std::process::id()));
        if done.is_multiple_of(16) {
            fs::write(&spill, format!("{done}").repeat(50_000)).unwrap();
            inp.new_spill = vec![(format!("spill-{done}"), spill.clone())];
        }
        store.commit(&lease, &mut state, inp).unwrap();
        println!("committed {}", msgs.len());
    }
}

fn crash_rounds(rounds: usize) {
    let mut rng = Rng::seeded();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::for_project(dir.path());
    let sid = {
        let lease = store.new_session().unwrap();
        let all = conversation("k", 4);
        store
            .commit(&lease, &mut SessionState::default(), input(&all, 0))
            .unwrap();
        lease.session().to_owned()
    };
    let all = conversation("k", 100_000);
    for round in 0..rounds {
        let mut proc = child(
            "child_committer",
            dir.path(),
            &[("HEL_SESSION", sid.clone())],
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
        let head = store.head(&sid).unwrap().expect("ref survives");
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
        let fsck = store.fsck().unwrap();
        assert!(fsck.is_sound(), "round {round}: {fsck:?}");
    }
    let report = store.gc(false).unwrap();
    assert!(store.fsck().unwrap().is_sound(), "{report:?}");
    assert_eq!(fs::read_dir(store.layout().tmp_dir()).unwrap().count(), 0);
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
/// commit a few checkpoints, delete some (gc deferred), forever.
#[test]
#[ignore]
fn child_writer() {
    let Ok(dir) = std::env::var("HEL_STORE_CHILD") else {
        return;
    };
    let store = Store::for_project(Path::new(&dir));
    let mut n = 0u64;
    loop {
        let lease = store.new_session().unwrap();
        let mut state = SessionState::default();
        // The same messages in every writer: commits dedup against objects
        // another writer wrote, which that writer may be deleting right now.
        let msgs = conversation("shared", 12);
        for end in [4, 8, 12] {
            store
                .commit(&lease, &mut state, input(&msgs[..end], end - 4))
                .unwrap();
        }
        let sid = lease.session().to_owned();
        drop(lease);
        n += 1;
        if n.is_multiple_of(2) {
            store.delete(&sid, false).unwrap();
        }
        println!("cycle {n}");
    }
}

#[test]
fn gc_concurrent_with_commits_never_loses_an_object() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::for_project(dir.path());
    store.init().unwrap();
    let mut writers: Vec<_> = (0..3)
        .map(|_| child("child_writer", dir.path(), &[]).spawn().unwrap())
        .collect();
    let mut outs: Vec<_> = writers
        .iter_mut()
        .map(|w| BufReader::new(w.stdout.take().unwrap()).lines())
        .collect();
    for _ in 0..30 {
        store.gc(false).unwrap();
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
    let fsck = store.fsck().unwrap();
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
    let store = Store::for_project(dir.path());
    let mut leases = Vec::new();
    for _ in 0..2 {
        let lease = store.new_session().unwrap();
        let spill_dir = store.layout().spill_dir(lease.session());
        fs::create_dir_all(&spill_dir).unwrap();
        fs::write(spill_dir.join("out.txt"), "spilled").unwrap();
        let msgs = conversation("w", 4);
        let mut inp = input(&msgs, 0);
        inp.new_spill = vec![("out.txt".into(), spill_dir.join("out.txt"))];
        store
            .commit(&lease, &mut SessionState::default(), inp)
            .unwrap();
        leases.push(lease);
    }
    let idle = leases.remove(0);
    let idle_id = idle.session().to_owned();
    drop(idle);
    let report = store.gc(false).unwrap();
    assert_eq!(report.spill_dirs_removed, 1);
    assert!(!store.layout().spill_dir(&idle_id).exists());
    assert!(store
        .layout()
        .spill_dir(leases[0].session())
        .join("out.txt")
        .exists());
    // The blob is what the checkpoint keeps.
    let head = store.head(&idle_id).unwrap().unwrap();
    let entry = store.checkpoint(&head).unwrap().spill["out.txt"].clone();
    assert_eq!(store.read_blob(&entry.blob).unwrap(), b"spilled");
    assert!(store.fsck().unwrap().is_sound());
}
