//! A `.hel/` that came with a repository is hostile input. Every test here
//! plants something in a store (links, special files, crafted objects) and
//! runs the real `hel` on it: each must end with a clear one-line error
//! naming the path or object and a non-zero exit (or, where the thing is
//! harmless, carry on), never follow a link out of the project (a watched
//! directory outside must stay exactly as it was), and stay within 256 MiB
//! of memory.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::common::*;
use hel_store::{testing, ObjectId};
use serde_json::{json, Value};

/// Peak memory any run against a hostile store may take.
const MAX_RSS_KIB: u64 = 256 * 1024;

/// A project whose store has one real session (made by a real run), and a
/// watched directory outside it.
struct Hostile {
    p: Project,
    outside: Outside,
    session: String,
}

impl Hostile {
    fn new() -> Hostile {
        let p = Project::new();
        let mock = Mock::start(json!([{"content": "first answer"}]));
        let run = p.run(Some(&mock), &["-p", "remember this"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let session = run.session();
        Hostile {
            p,
            outside: Outside::new(),
            session,
        }
    }

    fn root(&self) -> PathBuf {
        self.p.path().join(".hel")
    }

    fn sid(&self) -> hel_store::SessionId {
        self.session.parse().unwrap()
    }

    /// Run `hel args` (against `mock` when given), measured.
    fn run(&self, mock: Option<&Mock>, args: &[&str]) -> Run {
        let before = self.outside.fingerprint();
        let m = run_measured(self.p.hel(mock).args(args));
        assert!(
            m.max_rss_kib <= MAX_RSS_KIB,
            "hel {args:?} peaked at {} KiB\n{}",
            m.max_rss_kib,
            m.run.stderr
        );
        assert_eq!(
            self.outside.fingerprint(),
            before,
            "hel {args:?} touched a file outside the project\n{}",
            m.run.stderr
        );
        assert_no_panic(&m.run);
        eprintln!("peak {} KiB: hel {args:?}", m.max_rss_kib);
        m.run
    }

    /// Write a JSON blob; returns its id.
    fn blob(&self, v: &Value) -> ObjectId {
        self.raw("blob", &hel_store::canonical::to_vec(v))
    }

    fn raw(&self, kind: &str, payload: &[u8]) -> ObjectId {
        let (_, canonical) = testing::encode(kind, payload);
        testing::plant(&self.root(), &canonical)
    }

    fn list(&self, node: &Value) -> ObjectId {
        self.raw("list", &hel_store::canonical::to_vec(node))
    }

    /// A snapshot of session `sid` with list `root` of `count` messages,
    /// in this project.
    fn snapshot(&self, sid: &str, root: Option<ObjectId>, count: u64) -> ObjectId {
        self.snapshot_saying(sid, root, count, "forged")
    }

    fn snapshot_saying(
        &self,
        sid: &str,
        root: Option<ObjectId>,
        count: u64,
        instruction: &str,
    ) -> ObjectId {
        let snap = json!({
            "schema_version": 3,
            "session_id": sid,
            "parents": [],
            "created_at": "2026-11-30T00:53:20.000Z",
            "created_at_ms": 1796000000000u64,
            "cwd": self.p.path().display().to_string(),
            "request_config": self.blob(&json!({})).to_hex(),
            "meter": null,
            "cursors": self.blob(&json!([])).to_hex(),
            "messages": {"root": root.map(|r| r.to_hex()), "count": count},
            "spill": {},
            "record": "answer",
            "summary": {"messages": count, "checkpoints": 1, "instruction": instruction, "input_tokens": 0, "output_tokens": 0},
        });
        self.raw("snapshot", &hel_store::canonical::to_vec(&snap))
    }

    /// A new session `sid` whose head is `id`: its journal's one commit
    /// record and its ref name it.
    fn set_ref(&self, sid: &str, id: &ObjectId) {
        testing::publish(&self.root(), &sid.parse().unwrap(), id);
    }

    /// A forged session holding `messages` inline in one node.
    fn forge(&self, sid: &str, messages: &[Value]) -> ObjectId {
        let items: Vec<Value> = messages.iter().map(|m| json!({"m": m})).collect();
        let node = self.list(&json!({"count": messages.len(), "items": items, "prev": null}));
        let snap = self.snapshot(sid, Some(node), messages.len() as u64);
        self.set_ref(sid, &snap);
        snap
    }
}

const FORGED: &str = "0badf00d-0000-4000-8000-000000000001";

fn assert_no_panic(run: &Run) {
    assert!(
        !run.stderr.contains("panicked") && run.code != 101 && run.code != 134,
        "hel crashed (exit {}):\n{}",
        run.code,
        run.stderr
    );
}

/// One line of error on stderr, naming `what`, and exit 1.
fn assert_refused(run: &Run, what: &str) {
    assert_eq!(run.code, 1, "{}", run.stderr);
    let line = run
        .stderr
        .lines()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("no line names {what:?}:\n{}", run.stderr));
    assert!(line.starts_with("hel: "), "{line}");
}

fn system() -> Value {
    json!({"role": "system", "content": "s"})
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn replace_with_link(path: &Path, target: &Path) {
    if path.is_dir() {
        std::fs::remove_dir_all(path).unwrap();
    } else if path.exists() {
        std::fs::remove_file(path).unwrap();
    }
    symlink(target, path).unwrap();
}

#[test]
fn a_linked_store_directory_is_refused_by_every_command() {
    let h = Hostile::new();
    // The store is a link to a directory outside (that holds a store).
    std::fs::rename(h.root(), h.outside.path().join("real")).unwrap();
    let before = h.outside.fingerprint();
    symlink(h.outside.path().join("real"), h.root()).unwrap();
    let mock = Mock::start(json!([{"content": "never"}]));
    for args in [
        vec!["sessions"],
        vec!["sessions", "log", &h.session],
        vec!["gc"],
        vec!["fsck"],
        vec!["resume", &h.session, "-p", "x"],
        vec!["-p", "x"],
    ] {
        let run = h.run(Some(&mock), &args);
        assert_refused(&run, ".hel is a symbolic link");
    }
    assert_eq!(h.outside.fingerprint(), before);
    assert!(mock.requests().is_empty(), "nothing was sent to the model");
}

#[test]
fn a_linked_tmp_is_never_emptied_by_gc() {
    let h = Hostile::new();
    replace_with_link(&h.root().join("tmp"), &h.outside.path());
    let run = h.run(None, &["gc"]);
    assert_refused(&run, "tmp is a symbolic link");
    assert!(h.outside.path().join("precious.txt").exists());
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("tmp is a symbolic link"),
        "{}",
        run.stdout
    );
    // A new answer cannot be saved through it, and says so; nothing lands outside.
    let mock = Mock::start(json!([{"content": "answer"}]));
    let run = h.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.stdout, "answer\n");
    assert!(
        run.stderr.contains("will not be saved") && run.stderr.contains("tmp is a symbolic link"),
        "{}",
        run.stderr
    );
}

#[test]
fn links_in_session_paths_are_refused_and_never_followed() {
    let h = Hostile::new();
    let sid = h.sid();
    let sdir = testing::session_dir(&h.root(), &sid);
    let mock = Mock::start(json!([{"content": "a"}, {"content": "b"}, {"content": "c"}]));
    // The session's working directory is a link.
    std::fs::create_dir_all(&sdir).unwrap();
    replace_with_link(&sdir, &h.outside.path());
    let run = h.run(Some(&mock), &["resume", &h.session, "-p", "x"]);
    assert_refused(&run, "is a symbolic link");
    let run = h.run(None, &["sessions", "delete", &h.session]);
    assert_refused(&run, "is a symbolic link");
    std::fs::remove_file(&sdir).unwrap();
    // Its lease file is a link.
    std::fs::create_dir_all(&sdir).unwrap();
    symlink(h.outside.path().join("precious.txt"), sdir.join(".active")).unwrap();
    let run = h.run(Some(&mock), &["resume", &h.session, "-p", "x"]);
    assert_refused(&run, ".active is a symbolic link");
    std::fs::remove_file(sdir.join(".active")).unwrap();
    // Its spill directory is a link: a result that spills cannot be saved
    // through it (the result is cut instead, and said so), nothing lands
    // outside, and at the end the link goes, not what it points at.
    symlink(h.outside.path(), sdir.join("spill")).unwrap();
    h.p.write("many.txt", &"a line to find\n".repeat(50));
    let spilling = Mock::start(json!([
        {"tool_calls": [call("grep", json!({"pattern": "line", "path": "many.txt"}))]},
        {"content": "done"},
    ]));
    let m = run_measured(
        h.p.hel(Some(&spilling))
            .env("HEL_SPILL_CHARS", "100")
            .args(["resume", &h.session, "-p", "find"]),
    );
    assert_eq!(m.run.code, 0, "{}", m.run.stderr);
    assert!(
        m.run.stderr.contains("cannot write spill file") && m.run.stderr.contains("symbolic link"),
        "{}",
        m.run.stderr
    );
    assert!(!sdir.join("spill").exists() && h.outside.path().join("precious.txt").exists());
    // The store lock is a link: writes are refused.
    let lock = h.root().join(".store.lock");
    replace_with_link(&lock, &h.outside.path().join("precious.txt"));
    let run = h.run(Some(&mock), &["resume", &h.session, "-p", "x"]);
    assert_refused(&run, ".store.lock is a symbolic link");
    std::fs::remove_file(&lock).unwrap();
}

#[test]
fn links_in_journals_packs_and_objects_are_never_followed() {
    let h = Hostile::new();
    let journals = h.root().join("packs/journals");
    let journal = journals.join(format!("{}.journal", h.session));
    let jidx = journals.join(format!("{}.jidx", h.session));
    // The sidecar is a link to a device and then to a file outside: it is
    // only a hint, so the session reads (from its journal) and takes new
    // answers, and nothing outside is touched.
    replace_with_link(&jidx, Path::new("/dev/zero"));
    let mock = Mock::start(json!([{"content": "a"}, {"content": "b"}]));
    let run = h.run(Some(&mock), &["resume", &h.session, "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    replace_with_link(&jidx, &h.outside.path().join("precious.txt"));
    let run = h.run(Some(&mock), &["resume", &h.session, "-p", "y"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = h.run(None, &["sessions", "log", &h.session]);
    assert_eq!(run.stdout.lines().count(), 3, "{}", run.stdout);
    // The journal itself is a link to a journal outside: refused, named.
    let away = h.outside.path().join("away.journal");
    std::fs::rename(&journal, &away).unwrap();
    symlink(&away, &journal).unwrap();
    let before = h.outside.fingerprint();
    for args in [
        vec!["sessions", "log", h.session.as_str()],
        vec!["sessions", "show", h.session.as_str()],
        vec!["resume", h.session.as_str(), "-p", "z"],
        vec!["gc"],
    ] {
        let run = h.run(Some(&mock), &args);
        assert_refused(&run, ".journal is a symbolic link");
    }
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains(".journal is a symbolic link"),
        "{}",
        run.stdout
    );
    std::fs::remove_file(&journal).unwrap();
    std::fs::rename(&away, &journal).unwrap();
    // packs/journals and packs themselves as links: refused, named.
    let moved = h.outside.path().join("journals");
    std::fs::rename(&journals, &moved).unwrap();
    symlink(&moved, &journals).unwrap();
    let run = h.run(None, &["sessions", "show", &h.session]);
    assert_refused(&run, "journals is a symbolic link");
    // A new session is made at the model's first answer: refused then.
    let answers = Mock::start(json!([{"content": "new"}]));
    let run = h.run(Some(&answers), &["-p", "new"]);
    assert!(
        run.stderr.contains("journals is a symbolic link"),
        "{}",
        run.stderr
    );
    std::fs::remove_file(&journals).unwrap();
    std::fs::rename(&moved, &journals).unwrap();
    // A sealed pack as a link, and a stray file beside it: fsck names
    // them; nothing is followed.
    let (_, canonical) = testing::encode("blob", b"planted");
    testing::plant(&h.root(), &canonical);
    let pack = testing::planted_pack(&h.root()).unwrap();
    let away = h.outside.path().join("away.pack");
    std::fs::rename(&pack, &away).unwrap();
    symlink(&away, &pack).unwrap();
    std::fs::write(h.root().join("packs/stray"), "x").unwrap();
    let before_fsck = h.outside.fingerprint();
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains("symbolic link") && run.stdout.contains("stray"),
        "{}",
        run.stdout
    );
    let run = h.run(None, &["sessions", "show", &h.session]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(h.outside.fingerprint(), before_fsck);
    let _ = before;
}

#[test]
fn damaged_and_lying_journals_are_refused_within_bounded_memory() {
    let h = Hostile::new();
    let journal = h
        .root()
        .join("packs/journals")
        .join(format!("{}.journal", h.session));
    let good = std::fs::read(&journal).unwrap();
    // A flipped byte in the middle of a record: named by pack and offset.
    let mut bad = good.clone();
    let mid = good.len() / 3;
    bad[mid] ^= 0x40;
    std::fs::write(&journal, &bad).unwrap();
    let run = h.run(None, &["sessions", "show", &h.session]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains(".journal"), "{}", run.stderr);
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("offset"), "{}", run.stdout);
    // A record that declares an enormous length, and one whose commit
    // claims another session: refused without reading what they claim.
    let mut huge = good.clone();
    huge.extend_from_slice(b"HELR\x01\0\0\0");
    huge.extend_from_slice(&[7u8; 32]);
    huge.extend_from_slice(&(1u64 << 60).to_le_bytes());
    huge.extend_from_slice(&[0u8; 8]);
    std::fs::write(&journal, &huge).unwrap();
    let run = h.run(None, &["sessions", "show", &h.session]);
    assert_eq!(run.code, 0, "a torn tail is not committed: {}", run.stderr);
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(run.stdout.contains("unfinished commit"), "{}", run.stdout);
    // The sidecar lies: every entry points at offset 16.
    std::fs::write(&journal, &good).unwrap();
    let jidx = journal.with_extension("jidx");
    let mut lies = std::fs::read(&jidx).unwrap();
    for entry in lies[16..].chunks_mut(48) {
        if entry.len() == 48 {
            entry[32..40].copy_from_slice(&16u64.to_le_bytes());
        }
    }
    std::fs::write(&jidx, &lies).unwrap();
    let run = h.run(None, &["sessions", "show", &h.session]);
    assert_eq!(
        run.code, 0,
        "the journal itself is the truth: {}",
        run.stderr
    );
    assert!(run.stdout.contains("first answer"), "{}", run.stdout);
    // A journal that is a FIFO.
    std::fs::remove_file(&journal).unwrap();
    let c = std::ffi::CString::new(journal.display().to_string()).unwrap();
    // SAFETY: mkfifo(3) with a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let run = h.run(None, &["sessions", "log", &h.session]);
    assert_refused(&run, "FIFO");
    let run = h.run(None, &["sessions"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn special_files_as_refs_never_hang_or_exhaust_memory() {
    let h = Hostile::new();
    let refs = h.root().join("refs/sessions");
    let fifo = "0badf00d-0000-4000-8000-00000000f1f0";
    let zero = "0badf00d-0000-4000-8000-0000000000ee";
    let outside = "0badf00d-0000-4000-8000-0000000000aa";
    let c = std::ffi::CString::new(refs.join(fifo).display().to_string()).unwrap();
    // SAFETY: mkfifo(3) with a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    symlink("/dev/zero", refs.join(zero)).unwrap();
    symlink(h.outside.path().join("precious.txt"), refs.join(outside)).unwrap();
    std::fs::write(refs.join("not-a-session"), "x").unwrap();
    // Listing goes on: the real session is listed; the rest are not refs.
    let run = h.run(None, &["sessions"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains(&h.session), "{}", run.stdout);
    for (sid, what) in [
        (fifo, "FIFO"),
        (zero, "symbolic link"),
        (outside, "symbolic link"),
    ] {
        let run = h.run(None, &["sessions", "log", sid]);
        assert_refused(&run, what);
    }
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 1);
    for what in ["FIFO", "not-a-session"] {
        assert!(run.stdout.contains(what), "{}", run.stdout);
    }
    let run = h.run(None, &["gc"]);
    assert_refused(&run, "session ref");
}

#[test]
fn non_messages_are_never_sent_to_the_model() {
    let h = Hostile::new();
    let mock = Mock::start(json!([{"content": "never"}]));
    for (i, bad) in [
        json!(42),
        json!(null),
        json!({"role": "banana", "content": "x"}),
        json!({"role": "user", "content": 7}),
        json!({"role": "tool", "content": "no call id"}),
        json!({"role": "assistant", "tool_calls": "many"}),
    ]
    .into_iter()
    .enumerate()
    {
        let sid = format!("0badf00d-0000-4000-8000-00000000000{i}");
        h.forge(&sid, &[system(), user("hi"), bad.clone()]);
        let run = h.run(Some(&mock), &["resume", &sid, "-p", "go on"]);
        assert_refused(&run, "invalid message");
        let run = h.run(None, &["sessions", "show", &sid]);
        assert_refused(&run, "invalid message");
    }
    // Tool calls without results are refused the same way.
    let sid = "0badf00d-0000-4000-8000-0000000000c1";
    h.forge(
        sid,
        &[
            system(),
            user("hi"),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}),
        ],
    );
    let run = h.run(Some(&mock), &["resume", sid, "-p", "go on"]);
    assert_refused(&run, "broken conversation");
    assert!(mock.requests().is_empty(), "a broken conversation was sent");
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains("invalid message") && run.stdout.contains("not counted"),
        "{}",
        run.stdout
    );
}

#[test]
fn deep_slices_resolve_without_recursion() {
    let h = Hostile::new();
    // Planted at once: the chain is long.
    let mut nodes = Vec::new();
    let (mut node, canonical) = testing::encode(
        "list",
        &hel_store::canonical::to_vec(
            &json!({"count": 2, "items": [{"m": system()}, {"m": user("deep")}], "prev": null}),
        ),
    );
    nodes.push(canonical);
    for _ in 0..20_000 {
        let (id, canonical) = testing::encode(
            "list",
            &hel_store::canonical::to_vec(
                &json!({"count": 2, "items": [{"s": node.to_hex(), "from": 0, "to": 2}], "prev": null}),
            ),
        );
        nodes.push(canonical);
        node = id;
    }
    testing::plant_all(&h.root(), &nodes);
    let snap = h.snapshot(FORGED, Some(node), 2);
    h.set_ref(FORGED, &snap);
    let run = h.run(None, &["sessions", "show", FORGED]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("deep"), "{}", run.stdout);
    let mock = Mock::start(json!([{"content": "resumed"}]));
    let run = h.run(Some(&mock), &["resume", FORGED, "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(mock.messages(0)[1]["content"], "deep");
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
}

#[test]
fn slice_bombs_are_refused_within_bounded_memory() {
    let h = Hostile::new();
    let big = user(&"b".repeat(1000));
    let base = h.list(&json!({"count": 2, "items": [{"m": system()}, {"m": big}], "prev": null}));
    // Each level repeats the one before a thousand times.
    let mut node = base;
    let mut items_len = 2u64;
    for _ in 0..3 {
        let items: Vec<Value> = (0..1000)
            .map(|_| json!({"s": node.to_hex(), "from": 0, "to": items_len}))
            .collect();
        items_len *= 1000;
        node = h.list(&json!({"count": items_len, "items": items, "prev": null}));
    }
    let store_bytes: u64 = walk_size(&h.root().join("packs"));
    assert!(
        store_bytes < 200_000,
        "the bomb is small: {store_bytes} bytes"
    );
    // The snapshot lies about the count, so nothing refuses it early.
    let snap = h.snapshot(FORGED, Some(node), 2);
    h.set_ref(FORGED, &snap);
    let run = h.run(None, &["sessions", "show", FORGED]);
    assert_refused(&run, "over what hel loads");
    let mock = Mock::start(json!([{"content": "never"}]));
    let run = h.run(Some(&mock), &["resume", FORGED, "-p", "x"]);
    assert_refused(&run, "over what hel loads");
    // One blob named a million times in one node passes a count of nodes.
    let blob = h.blob(&user(&"z".repeat(20_000)));
    let items: Vec<Value> = (0..400_000).map(|_| json!({"b": blob.to_hex()})).collect();
    let node = h.list(&json!({"count": 400_000, "items": items, "prev": null}));
    let snap = h.snapshot(FORGED, Some(node), 400_000);
    h.set_ref(FORGED, &snap);
    let run = h.run(None, &["sessions", "show", FORGED, "--json"]);
    assert_refused(&run, "over what hel loads");
    // fsck names it; gc keeps working through its structure.
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("over what hel loads"), "{}", run.stdout);
    assert_eq!(mock.requests().len(), 0);
}

fn walk_size(dir: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let m = e.metadata().unwrap();
        n += if m.is_dir() {
            walk_size(&e.path())
        } else {
            m.len()
        };
    }
    n
}

#[test]
fn wrong_kinds_bad_counts_and_bad_snapshots_are_faults_everywhere() {
    let h = Hostile::new();
    let node =
        h.list(&json!({"count": 2, "items": [{"m": system()}, {"m": user("x")}], "prev": null}));
    let blob = h.blob(&json!({"not": "a snapshot"}));
    let cases: Vec<(&str, ObjectId, &str)> = vec![
        (
            "0badf00d-0000-4000-8000-0000000000b1",
            blob,
            "is a blob where a snapshot",
        ),
        (
            "0badf00d-0000-4000-8000-0000000000b2",
            node,
            "is a list where a snapshot",
        ),
        (
            "0badf00d-0000-4000-8000-0000000000b3",
            h.raw("snapshot", b"not json"),
            "malformed snapshot",
        ),
        (
            "0badf00d-0000-4000-8000-0000000000b4",
            h.raw("snapshot", br#"{"schema_version":1}"#),
            "malformed snapshot",
        ),
        (
            "0badf00d-0000-4000-8000-0000000000b5",
            h.raw("snapshot", br#"{"schema_version":4}"#),
            "upgrade hel",
        ),
        (
            "0badf00d-0000-4000-8000-0000000000b6",
            {
                let n = h.list(&json!({"count": 5, "items": [{"m": system()}, {"m": user("x")}], "prev": null}));
                h.snapshot("0badf00d-0000-4000-8000-0000000000b6", Some(n), 5)
            },
            "list node says 5 messages",
        ),
        (
            "0badf00d-0000-4000-8000-0000000000b7",
            {
                let n = h.list(&json!({"count": 9, "items": [{"s": node.to_hex(), "from": 0, "to": 9}], "prev": null}));
                h.snapshot("0badf00d-0000-4000-8000-0000000000b7", Some(n), 9)
            },
            "slice 0..9",
        ),
    ];
    for (sid, id, what) in &cases {
        h.set_ref(sid, id);
        let run = h.run(None, &["sessions", "show", sid]);
        assert_refused(&run, what);
        let run = h.run(None, &["fsck"]);
        assert_eq!(run.code, 1, "{sid}: {}", run.stdout);
        assert!(run.stdout.contains(what), "{sid}: {}", run.stdout);
        assert!(
            !run.stdout.contains("unreachable objects"),
            "{}",
            run.stdout
        );
        let run = h.run(None, &["gc"]);
        assert_eq!(
            run.code, 1,
            "gc swept a store it cannot read: {}",
            run.stdout
        );
        std::fs::remove_file(testing::ref_path(&h.root(), &sid.parse().unwrap())).unwrap();
    }
    // The real session survived all of it.
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let run = h.run(None, &["sessions", "show", &h.session]);
    assert!(run.stdout.contains("first answer"), "{}", run.stdout);
}

#[test]
fn stored_text_cannot_drive_the_terminal() {
    let h = Hostile::new();
    let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}gnp.exe\r";
    let node = h.list(&json!({"count": 3, "items": [
        {"m": system()},
        {"m": user(evil)},
        {"m": {"role": "assistant", "content": evil}},
    ], "prev": null}));
    let snap = h.snapshot_saying(FORGED, Some(node), 3, evil);
    h.set_ref(FORGED, &snap);
    for args in [
        vec!["sessions"],
        vec!["sessions", "log", FORGED],
        vec!["sessions", "show", FORGED],
    ] {
        let run = h.run(None, &args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}', '\r'] {
            assert!(
                !run.stdout.contains(bad) && !run.stderr.contains(bad),
                "{args:?} printed {bad:?}: {:?}",
                run.stdout
            );
        }
        assert!(run.stdout.contains("^["), "{args:?}: {}", run.stdout);
    }
    // JSON stays exact (its escapes are JSON's), and C1 controls and bidi
    // overrides, which JSON need not escape, are escaped too.
    for args in [
        vec!["sessions", "show", FORGED, "--json"],
        vec!["sessions", "export", FORGED, "--format", "json"],
        vec!["sessions", "--json"],
        vec!["sessions", "search", "gnp", "--json"],
    ] {
        let run = h.run(None, &args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        for bad in ['\u{1b}', '\u{9b}', '\u{202e}', '\r'] {
            assert!(!run.stdout.contains(bad), "{args:?}: {:?}", run.stdout);
        }
        let v: Value = serde_json::from_str(&run.stdout).unwrap();
        let content = match args[1] {
            "show" => &v["messages"][1]["content"],
            "export" => &v[1]["content"],
            "--json" => {
                let rows = v.as_array().unwrap();
                &rows.iter().find(|r| r["id"] == FORGED).unwrap()["instruction"]
            }
            _ => &v[0]["matches"][0]["excerpt"],
        };
        assert!(
            content.as_str().unwrap().contains("\u{9b}31m\u{202e}gnp"),
            "{args:?}: {content}"
        );
    }
}

#[test]
fn a_planted_corrupt_object_is_never_deduplicated_against() {
    let h = Hostile::new();
    // Every checkpoint stores its cursor table; the first one's is `[]`.
    // A repository ships garbage under that object's name in a pack.
    let (id, _) = testing::encode("blob", b"[]");
    testing::plant_stored(&h.root(), &id, b"not what the name promises");
    let mock = Mock::start(json!([{"content": "saved"}, {"content": "also saved"}]));
    let run = h.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let run = h.run(None, &["sessions", "show", &sid]);
    assert_eq!(run.code, 0, "the new checkpoint reads back: {}", run.stderr);
    // fsck names the planted record; a repack rewrites what is live from
    // the copies that verify, and the planted pack goes.
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains(&id.to_hex()), "{}", run.stdout);
    let run = h.run(None, &["gc", "--repack"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let run = h.run(Some(&mock), &["-p", "y"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let run = h.run(None, &["sessions", "show", &sid]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn search_names_broken_objects_and_escapes_what_it_prints() {
    let h = Hostile::new();
    let evil = "remember \u{1b}]0;pwned\u{7}this";
    h.forge(FORGED, &[system(), user(evil)]);
    // A session whose message blob is missing: named, the others searched.
    let missing = ObjectId::from_bytes([7; 32]);
    let node = h.list(
        &json!({"count": 2, "items": [{"m": system()}, {"b": missing.to_hex()}], "prev": null}),
    );
    let broken = "0badf00d-0000-4000-8000-0000000000c1";
    h.set_ref(broken, &h.snapshot(broken, Some(node), 2));
    let run = h.run(None, &["sessions", "search", "remember"]);
    assert_eq!(
        run.code, 1,
        "a session could not be searched: {}",
        run.stderr
    );
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert!(
        run.stdout.contains("remember ^[]0;pwned^Gthis"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains('\u{1b}') && !run.stdout.contains('\u{7}'));
    assert!(
        run.stderr
            .contains(&format!("session {broken} not searched"))
            && run.stderr.contains(&missing.to_hex()),
        "{}",
        run.stderr
    );
}

#[test]
fn a_stored_instruction_cannot_forge_rows_of_a_listing() {
    let h = Hostile::new();
    let forged_row = "0badf00d-0000-4000-8000-0000000000ff  -  idle";
    let node = h.list(&json!({"count": 1, "items": [{"m": system()}], "prev": null}));
    let snap = h.snapshot_saying(FORGED, Some(node), 1, &format!("x\n{forged_row}"));
    h.set_ref(FORGED, &snap);
    for args in [vec!["sessions"], vec!["sessions", "log", FORGED]] {
        let run = h.run(None, &args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert!(
            run.stdout.contains(&format!("x^J{forged_row}")),
            "{args:?}: {}",
            run.stdout
        );
        assert!(
            !run.stdout.lines().any(|l| l.starts_with(forged_row)),
            "{args:?}: {}",
            run.stdout
        );
    }
}

// Sessions, their sidecars and what listings print of them (h/pick).

#[test]
fn a_sparse_huge_sidecar_is_read_within_bounded_memory() {
    let h = Hostile::new();
    let jidx = h
        .root()
        .join("packs/journals")
        .join(format!("{}.jidx", h.session));
    // 3 GiB that take no room on disk: the real entries, then zeros.
    let f = std::fs::OpenOptions::new().write(true).open(&jidx).unwrap();
    f.set_len(3 << 30).unwrap();
    drop(f);
    let run = h.run(None, &["sessions"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains(&h.session), "{}", run.stdout);
    for args in [
        vec!["sessions", "log", &h.session],
        vec!["sessions", "show", &h.session],
    ] {
        let run = h.run(None, &args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    }
    assert!(h
        .run(None, &["sessions", "show", &h.session])
        .stdout
        .contains("first answer"));
    // The writer lists the records anew, and the session goes on.
    let mock = Mock::start(json!([{"content": "second answer"}]));
    let run = h.run(Some(&mock), &["resume", &h.session, "-p", "more"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "second answer\n");
    assert!(std::fs::metadata(&jidx).unwrap().len() < 1 << 20);
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
}

#[test]
fn a_stored_directory_cannot_forge_lines_of_a_listing_or_a_show() {
    let h = Hostile::new();
    let forged_row = "0badf00d-0000-4000-8000-0000000000ff  -  idle";
    let cwd = format!("/elsewhere\n{forged_row}");
    let node = h.list(&json!({"count": 1, "items": [{"m": system()}], "prev": null}));
    let snap = json!({
        "schema_version": 3,
        "session_id": FORGED,
        "parents": [],
        // (A forged `created_at` is refused with the snapshot: it must
        // spell `created_at_ms`, objects-spec §2.4.)
        "created_at": "2026-11-30T00:53:20.000Z",
        "created_at_ms": 1796000000000u64,
        "cwd": cwd,
        "request_config": h.blob(&json!({})).to_hex(),
        "meter": null,
        "cursors": h.blob(&json!([])).to_hex(),
        "messages": {"root": node.to_hex(), "count": 1},
        "spill": {},
        "record": "answer",
        "summary": {"messages": 1, "checkpoints": 1, "instruction": "x", "input_tokens": 0, "output_tokens": 0},
    });
    let snap = h.raw("snapshot", &hel_store::canonical::to_vec(&snap));
    h.set_ref(FORGED, &snap);
    let run = h.run(None, &["sessions"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains(&format!("[saved in /elsewhere^J{forged_row}]")),
        "{}",
        run.stdout
    );
    let run = h.run(None, &["sessions", "show", FORGED]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains(&format!("cwd /elsewhere^J{forged_row}")),
        "{}",
        run.stdout
    );
    for out in [
        h.run(None, &["sessions"]).stdout,
        h.run(None, &["sessions", "show", FORGED]).stdout,
    ] {
        assert!(!out.lines().any(|l| l.starts_with(forged_row)), "{out}");
    }
}

/// A tree payload (objects-spec §10.1) of `entries`: (name, kind, id),
/// given in name order; files get mode 644 and size 1.
fn tree_payload(entries: &[(String, u8, ObjectId)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, kind, id) in entries {
        out.push(*kind);
        let (mode, size): (u16, u64) = if *kind == 1 { (0o644, 1) } else { (0, 0) };
        out.extend_from_slice(&mode.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
    }
    out
}

/// The bytes of a bundle (objects-spec §12.8) of session `sid` at `head`
/// holding the planted objects `ids` of `store_root`, as a hostile sender
/// would make it.
fn craft_bundle(store_root: &Path, sid: &str, head: &ObjectId, ids: &[ObjectId]) -> Vec<u8> {
    let mut pack = b"HELPACK\0".to_vec();
    pack.extend_from_slice(&1u32.to_le_bytes());
    pack.extend_from_slice(&2u32.to_le_bytes());
    for id in ids {
        let stored = testing::planted_bytes(store_root, id).unwrap();
        let mut header = b"HELR\x01\0\0\0".to_vec();
        header.extend_from_slice(id.as_bytes());
        header.extend_from_slice(&(stored.len() as u64).to_le_bytes());
        let check = ObjectId::of_canonical(&[header.as_slice(), &stored].concat());
        header.extend_from_slice(&check.as_bytes()[..8]);
        pack.extend_from_slice(&header);
        pack.extend_from_slice(&stored);
    }
    let manifest = serde_json::to_vec(&json!({
        "format": "hel-remote-ref 1",
        "session": sid,
        "head": head.to_hex(),
        "packs": [ObjectId::of_canonical(&pack).to_hex()],
        "summary": {"messages": 3, "checkpoints": 1, "instruction": "bomb", "input_tokens": 0, "output_tokens": 0},
        "updated_ms": 0,
    }))
    .unwrap();
    let mut bundle = b"HELBNDL\0".to_vec();
    bundle.extend_from_slice(&1u32.to_le_bytes());
    bundle.extend_from_slice(&(manifest.len() as u32).to_le_bytes());
    bundle.extend_from_slice(&manifest);
    bundle.extend_from_slice(&pack);
    bundle
}

#[test]
fn a_tree_bomb_is_refused_by_every_reader_naming_the_tree() {
    let h = Hostile::new();
    // One subtree of 1,000 files named 1,000 times at each of three
    // levels: 10^12 paths from a few hundred kilobytes.
    let blob = h.raw("blob", b"x");
    let files: Vec<(String, u8, ObjectId)> =
        (0..1000).map(|k| (format!("f{k:03}"), 1, blob)).collect();
    let mut trees = vec![h.raw("tree", &tree_payload(&files))];
    for _ in 0..3 {
        let below = *trees.last().unwrap();
        let dirs: Vec<(String, u8, ObjectId)> =
            (0..1000).map(|k| (format!("d{k:03}"), 3, below)).collect();
        trees.push(h.raw("tree", &tree_payload(&dirs)));
    }
    let bomb = *trees.last().unwrap();
    // The instruction's start: one file (so that it changed something).
    let start = h.raw("tree", &tree_payload(&[("f000".into(), 1, blob)]));
    let store_bytes = walk_size(&h.root().join("packs"));
    assert!(
        store_bytes < 400_000,
        "the bomb is small: {store_bytes} bytes"
    );
    let messages = [
        system(),
        user("x"),
        json!({"role": "assistant", "content": "y"}),
    ];
    let items: Vec<Value> = messages.iter().map(|m| json!({"m": m})).collect();
    let node = h.list(&json!({"count": 3, "items": items, "prev": null}));
    let config = h.blob(&json!({}));
    let cursors = h.blob(&json!([]));
    let snap = json!({
        "schema_version": 3,
        "session_id": FORGED,
        "parents": [],
        "created_at": "2026-11-30T00:53:20.000Z",
        "created_at_ms": 1796000000000u64,
        "cwd": h.p.path().display().to_string(),
        "request_config": config.to_hex(),
        "meter": null,
        "cursors": cursors.to_hex(),
        "messages": {"root": node.to_hex(), "count": 3},
        "spill": {},
        "summary": {"messages": 3, "checkpoints": 1, "instruction": "bomb", "input_tokens": 0, "output_tokens": 0},
        "record": "answer",
        "workspace": {"tree": bomb.to_hex(), "start": start.to_hex(), "not_tracked": 0, "restored": null},
    });
    let snap = h.raw("snapshot", &hel_store::canonical::to_vec(&snap));
    h.set_ref(FORGED, &snap);
    let tree = bomb.to_hex();
    for args in [
        vec!["diff", FORGED],
        vec!["diff", FORGED, "--worktree"],
        vec!["undo", FORGED],
        vec!["restore", FORGED, "--at", &snap.to_hex()[..12]],
    ] {
        let run = h.run(None, &args);
        eprintln!("{}", run.stderr.trim_end());
        assert_refused(&run, &tree);
        assert!(
            run.stderr.contains("over what hel reads"),
            "{args:?}: {}",
            run.stderr
        );
    }
    let mock = Mock::start(json!([{"content": "never"}]));
    let run = h.run(Some(&mock), &["resume", FORGED, "-p", "go on"]);
    assert_refused(&run, &tree);
    assert_eq!(mock.requests().len(), 0);
    // fsck names it; a store fsck calls sound is one every reader takes.
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains(&tree) && run.stdout.contains("over what hel reads"),
        "{}",
        run.stdout
    );
    // It is not exported, and a bundle crafted to hold it is not imported.
    let out = tempfile::tempdir().unwrap();
    let bundle = out.path().join("bomb.helbundle");
    let run = h.run(
        None,
        &[
            "sessions",
            "export",
            FORGED,
            "--bundle",
            bundle.to_str().unwrap(),
        ],
    );
    assert_refused(&run, &tree);
    assert!(!bundle.exists());
    let mut ids = vec![snap, node, config, cursors, blob, start];
    ids.extend(&trees);
    std::fs::write(&bundle, craft_bundle(&h.root(), FORGED, &snap, &ids)).unwrap();
    let other = Project::new();
    let m = run_measured(
        other
            .hel(None)
            .args(["sessions", "import", bundle.to_str().unwrap()]),
    );
    assert!(
        m.max_rss_kib <= MAX_RSS_KIB,
        "import peaked at {} KiB",
        m.max_rss_kib
    );
    assert_no_panic(&m.run);
    assert_refused(&m.run, &tree);
    let run = run_measured(other.hel(None).args(["sessions", "list"])).run;
    assert!(!run.stdout.contains(FORGED), "{}", run.stdout);
    // The real session is untouched by all of it.
    std::fs::remove_file(testing::ref_path(&h.root(), &FORGED.parse().unwrap())).unwrap();
    let run = h.run(None, &["sessions", "show", &h.session]);
    assert!(run.stdout.contains("first answer"), "{}", run.stdout);
}

// One flipped bit, a newer hel's record: a journal is never cut short
// (h/journal).

#[test]
fn one_flipped_bit_or_a_newer_record_never_shortens_a_session() {
    let h = Hostile::new();
    for answer in ["second answer", "third answer"] {
        let mock = Mock::start(json!([{ "content": answer }]));
        let run = h.run(Some(&mock), &["resume", &h.session, "-p", "more"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let run = h.run(None, &["sessions", "rename", &h.session, "keeper"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let journal = h
        .root()
        .join("packs/journals")
        .join(format!("{}.journal", h.session));
    let jidx = journal.with_extension("jidx");
    let names = h.root().join("names");
    let good = std::fs::read(&journal).unwrap();
    // One bit of the first record's stored bytes, and no sidecar (it is
    // never synced: a crash can lose it).
    let mut bad = good.clone();
    bad[16 + 56 + 3] ^= 0x08;
    std::fs::write(&journal, &bad).unwrap();
    std::fs::remove_file(&jidx).unwrap();
    let path = journal.display().to_string();
    let names_fault = |text: &str| text.contains(&path) && text.contains("offset 16");
    // Listed, as broken, with the fault.
    let run = h.run(None, &["sessions"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let row = run
        .stdout
        .lines()
        .find(|l| l.starts_with(&h.session))
        .unwrap_or_else(|| panic!("the session is not listed:\n{}", run.stdout));
    assert!(row.contains("keeper") && row.contains("broken"), "{row}");
    assert!(names_fault(&run.stderr), "{}", run.stderr);
    // fsck names the file and the offset.
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("fault: ") && names_fault(l)),
        "{}",
        run.stdout
    );
    // gc keeps the journal and the name.
    let run = h.run(None, &["gc"]);
    assert_refused(&run, "offset 16");
    assert!(
        std::fs::read(&journal).unwrap() == bad,
        "gc changed the journal"
    );
    assert!(std::fs::read_to_string(&names).unwrap().contains("keeper"));
    // A resume refuses before asking the model, naming the file, the
    // offset and fsck; the journal is not cut.
    let mock = Mock::start(json!([{ "content": "never asked" }]));
    let run = h.run(Some(&mock), &["resume", "keeper", "-p", "more"]);
    assert_refused(&run, "offset 16");
    assert!(
        names_fault(&run.stderr) && run.stderr.contains("hel fsck"),
        "{}",
        run.stderr
    );
    assert!(mock.requests().is_empty());
    assert!(
        std::fs::read(&journal).unwrap() == bad,
        "resume changed the journal"
    );
    // Whole again: the three checkpoints are all there.
    std::fs::write(&journal, &good).unwrap();
    let run = h.run(None, &["sessions", "show", "keeper"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("third answer"), "{}", run.stdout);
    let run = h.run(None, &["fsck"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    // A record of a type this hel does not know, after the first commit
    // record: read past, never cut; the session is not continued.
    let first_commit = {
        let mut at = 16;
        loop {
            let len = 56 + u64::from_le_bytes(good[at + 40..at + 48].try_into().unwrap()) as usize;
            if good[at + 4] == 2 {
                break at + len;
            }
            at += len;
        }
    };
    let newer = testing::record(7, &ObjectId::from_bytes([1; 32]), b"from a newer hel");
    let with_newer = [&good[..first_commit], &newer, &good[first_commit..]].concat();
    std::fs::write(&journal, &with_newer).unwrap();
    let _ = std::fs::remove_file(&jidx);
    let run = h.run(None, &["sessions", "show", "keeper"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("third answer"), "{}", run.stdout);
    let mock = Mock::start(json!([{ "content": "never asked" }]));
    let run = h.run(Some(&mock), &["resume", "keeper", "-p", "more"]);
    assert_refused(&run, "type 7");
    assert!(run.stderr.contains("upgrade hel"), "{}", run.stderr);
    assert!(mock.requests().is_empty());
    let run = h.run(None, &["gc"]);
    assert_refused(&run, "type 7");
    assert!(
        std::fs::read(&journal).unwrap() == with_newer,
        "the journal was changed"
    );
}

/// A store fault reaches the user with the hint that sends them to fsck,
/// on a line of its own right after the error's, whichever command met it;
/// the error's line is as it was and nothing is asked of the model.
#[test]
fn a_store_fault_says_how_to_see_the_damage() {
    let h = Hostile::new();
    let journal = h
        .root()
        .join("packs/journals")
        .join(format!("{}.journal", h.session));
    let mut bad = std::fs::read(&journal).unwrap();
    bad[16 + 56 + 3] ^= 0x08;
    std::fs::write(&journal, &bad).unwrap();
    std::fs::remove_file(journal.with_extension("jidx")).unwrap();
    let path = journal.display().to_string();
    let mock = Mock::start(json!([{ "content": "never asked" }]));
    for args in [
        vec!["resume", h.session.as_str(), "-p", "more"],
        vec!["sessions", "log", h.session.as_str()],
    ] {
        let run = h.run(Some(&mock), &args);
        assert_refused(&run, "offset 16");
        let lines: Vec<&str> = run.stderr.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("hel: ") && l.contains(&path) && l.contains("offset 16"))
            .unwrap_or_else(|| panic!("{args:?}: no line names the fault:\n{}", run.stderr));
        assert_eq!(
            lines.get(at + 1).copied(),
            Some("hint: run `hel fsck` to see what is damaged"),
            "{args:?}:\n{}",
            run.stderr
        );
        assert_eq!(lines.len(), at + 2, "{args:?}:\n{}", run.stderr);
    }
    // Listed as broken: the fault, and the hint once after the list.
    let run = h.run(None, &["sessions"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains(&path) && run.stderr.contains("offset 16"),
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stderr.lines().last(),
        Some("hint: run `hel fsck` to see what is damaged"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stderr.matches("hint: ").count(), 1, "{}", run.stderr);
    assert!(mock.requests().is_empty());
    assert!(std::fs::read(&journal).unwrap() == bad);
}

/// `.hel/identity` (where the store was made) as a FIFO, a link to a file
/// outside, a link to `/dev/zero`, a file past its read bound or one that
/// forges another store's: no command hangs, follows it or grows, and the
/// store counts as made elsewhere (its sessions shipped: listed, never
/// undone or continued by default), never as an error.
#[test]
fn a_hostile_identity_makes_the_store_shipped_and_never_hangs() {
    let h = Hostile::new();
    let identity = h.root().join("identity");
    let good = std::fs::read(&identity).unwrap();
    let other = Project::new();
    let run = other.run(Some(&Mock::start(json!([{"content": "a"}]))), &["-p", "q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let forged = std::fs::read(other.path().join(".hel/identity")).unwrap();
    type Plant<'a> = (&'a str, &'a dyn Fn(&Path));
    let plant: [Plant; 5] = [
        ("a FIFO", &|p: &Path| {
            let c = std::ffi::CString::new(p.display().to_string()).unwrap();
            // SAFETY: mkfifo(3) with a valid path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }),
        ("a link outside", &|p: &Path| {
            std::fs::write(h.outside.path().join("identity"), &good).unwrap();
            symlink(h.outside.path().join("identity"), p).unwrap();
        }),
        ("a link to /dev/zero", &|p: &Path| {
            symlink("/dev/zero", p).unwrap()
        }),
        ("64 MiB", &|p: &Path| {
            std::fs::File::create(p).unwrap().set_len(64 << 20).unwrap();
        }),
        ("another store's", &|p: &Path| {
            std::fs::write(p, &forged).unwrap()
        }),
    ];
    for (what, plant) in plant {
        std::fs::remove_file(&identity).unwrap();
        plant(&identity);
        let run = h.run(None, &["sessions", "--json"]);
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        let rows: Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(rows[0]["id"], h.session.as_str(), "{what}");
        assert_eq!(rows[0]["shipped"], true, "{what}");
        let run = h.run(None, &["undo"]);
        assert_refused(&run, "arrived with this .hel/");
        let run = h.run(None, &["fsck"]);
        assert_eq!(run.code, 0, "{what}: {}{}", run.stdout, run.stderr);
    }
    // The file hel wrote, back: the store is this project's again.
    std::fs::remove_file(&identity).unwrap();
    std::fs::write(&identity, &good).unwrap();
    let run = h.run(None, &["sessions", "--json"]);
    let rows: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(rows[0]["shipped"], false, "{}", run.stdout);
}

// What a second implementation of the store, written from objects-spec
// alone, found hel silent on: each case forged byte-wise as it forged it,
// then read by fsck, show, log and a commit.

/// `hel sessions log <sid> --json`, newest first.
fn log_ids(h: &Hostile, sid: &str) -> Vec<String> {
    let run = h.run(None, &["sessions", "log", sid, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A ref moved back one commit with its sidecar removed reads exactly as
/// a commit whose ref never moved: both keep the commit past the ref (its
/// records were durable before the ref could move). Before, the session
/// read one answer shorter, fsck said sound without a word, and the next
/// commit cut the published answer.
#[test]
fn a_ref_moved_back_one_commit_without_its_sidecar_keeps_every_answer() {
    let h = Hostile::new();
    let mock = Mock::start(json!([{"content": "second answer"}, {"content": "third answer"}]));
    let run = h.run(Some(&mock), &["resume", &h.session, "-p", "again"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Newest first: with workspace snapshots, each instruction is a
    // start record and an answer.
    let ids = log_ids(&h, &h.session);
    assert!(ids.len() >= 2, "{ids:?}");
    let journal = h
        .root()
        .join("packs/journals")
        .join(format!("{}.journal", h.session));
    std::fs::write(
        testing::ref_path(&h.root(), &h.sid()),
        format!("{}\n", ids[1]),
    )
    .unwrap();
    std::fs::remove_file(journal.with_extension("jidx")).unwrap();
    let published = std::fs::read(&journal).unwrap();
    let show = h.run(None, &["sessions", "show", &h.session]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(show.stdout.contains("second answer"), "{}", show.stdout);
    assert_eq!(log_ids(&h, &h.session), ids);
    let fsck = h.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
    let note = fsck
        .stdout
        .lines()
        .find(|l| l.starts_with("note: ") && l.contains("one commit behind"))
        .unwrap_or_else(|| panic!("no note:\n{}", fsck.stdout));
    assert!(
        note.contains(&format!("refs/sessions/{}", h.session)),
        "{note}"
    );
    // The next commit continues from the answer the ref was behind.
    let run = h.run(Some(&mock), &["resume", &h.session, "-p", "once more"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let after = std::fs::read(&journal).unwrap();
    assert!(
        after[..published.len()] == published[..],
        "a published answer was cut"
    );
    let now = log_ids(&h, &h.session);
    assert!(now.len() > ids.len(), "{now:?}");
    assert_eq!(now[now.len() - ids.len()..], ids[..]);
    let fsck = h.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
    assert!(!fsck.stdout.contains("note: "), "{}", fsck.stdout);
}

/// A store whose `format` file is lost but that holds a journal is no
/// store being made (that holds empty directories only): every command,
/// fsck too, refuses it naming the missing file and what the store holds,
/// and writes nothing (before, the file was written again silently).
#[test]
fn a_store_that_lost_its_format_file_is_refused_naming_it() {
    let h = Hostile::new();
    std::fs::remove_file(h.root().join("format")).unwrap();
    let before = testing::files_under(&h.root());
    let mock = Mock::start(json!([{"content": "never"}]));
    for args in [
        vec!["fsck"],
        vec!["sessions"],
        vec!["sessions", "show", h.session.as_str()],
        vec!["gc"],
        vec!["-p", "x"],
    ] {
        let run = h.run(Some(&mock), &args);
        assert_refused(&run, &format!("{}/format is missing", h.root().display()));
        assert!(
            run.stderr.contains("packs/journals/"),
            "{args:?}: {}",
            run.stderr
        );
        assert_eq!(testing::files_under(&h.root()), before, "{args:?} wrote");
    }
    assert!(mock.requests().is_empty());
    // Written back, the store is whole.
    std::fs::write(h.root().join("format"), "hel-store-format 6\n").unwrap();
    assert_eq!(h.run(None, &["fsck"]).code, 0);
}

/// A snapshot holding a key twice (another reader could take the other
/// value under the same id): malformed, named by fsck and refused by show.
/// Before, fsck said sound and hel read the last value.
#[test]
fn a_snapshot_with_a_repeated_key_is_malformed() {
    let h = Hostile::new();
    let node = two_messages(&h);
    let canonical =
        String::from_utf8(hel_store::canonical::to_vec(&snapshot_json(&h, node, None))).unwrap();
    // The same snapshot with a second `cwd` first, and with a `meter`
    // whose object holds a key twice.
    for twice in [
        canonical.replacen('{', "{\"cwd\":\"/elsewhere\",", 1),
        canonical.replacen("\"meter\":null", "\"meter\":{\"a\":1,\"a\":2}", 1),
    ] {
        assert!(twice.len() > canonical.len());
        let id = h.raw("snapshot", twice.as_bytes());
        h.set_ref(FORGED, &id);
        let fsck = h.run(None, &["fsck"]);
        assert_eq!(fsck.code, 1, "{}", fsck.stdout);
        assert!(
            fsck.stdout
                .lines()
                .any(|l| l.contains(&id.to_hex()) && l.contains("a key repeated in one object")),
            "{}",
            fsck.stdout
        );
        let show = h.run(None, &["sessions", "show", FORGED]);
        assert_refused(&show, "a key repeated in one object");
    }
}

/// A list node of a system and a user message.
fn two_messages(h: &Hostile) -> ObjectId {
    h.list(&json!({"count": 2, "items": [{"m": system()}, {"m": user("hi")}], "prev": null}))
}

/// An answer record of session [`FORGED`] whose list is `node` (two
/// messages), with `workspace` when given.
fn snapshot_json(h: &Hostile, node: ObjectId, workspace: Option<Value>) -> Value {
    let mut snap = json!({
        "schema_version": 3,
        "session_id": FORGED,
        "parents": [],
        "created_at": "2026-11-30T00:53:20.000Z",
        "created_at_ms": 1796000000000u64,
        "cwd": h.p.path().display().to_string(),
        "request_config": h.blob(&json!({})).to_hex(),
        "meter": null,
        "cursors": h.blob(&json!([])).to_hex(),
        "messages": {"root": node.to_hex(), "count": 2},
        "spill": {},
        "record": "answer",
        "summary": {"messages": 2, "checkpoints": 1, "instruction": "i", "input_tokens": 0, "output_tokens": 0},
    });
    if let Some(w) = workspace {
        snap["workspace"] = w;
    }
    snap
}

/// The bytes of one tree entry (objects-spec §10.1).
fn tree_entry(kind: u8, mode: u16, size: u64, id: &ObjectId, name: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&mode.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name);
    out
}

/// A tree whose file entry gives another size than its blob's length:
/// a fault naming the tree and the entry (a restore refuses it too).
/// Before, fsck said sound.
#[test]
fn a_tree_entry_whose_size_is_not_its_blobs_length_is_a_fault() {
    let h = Hostile::new();
    let blob = h.raw("blob", b"hello");
    let node = two_messages(&h);
    for (size, sound) in [(5u64, true), (999, false)] {
        let tree = h.raw("tree", &tree_entry(1, 0o644, size, &blob, b"a.txt"));
        let workspace =
            json!({"tree": tree.to_hex(), "start": null, "not_tracked": 0, "restored": null});
        let snap = snapshot_json(&h, node, Some(workspace));
        let id = h.raw("snapshot", &hel_store::canonical::to_vec(&snap));
        h.set_ref(FORGED, &id);
        let fsck = h.run(None, &["fsck"]);
        if sound {
            assert_eq!(fsck.code, 0, "{}", fsck.stdout);
            continue;
        }
        assert_eq!(fsck.code, 1, "{}", fsck.stdout);
        let fault = fsck
            .stdout
            .lines()
            .find(|l| l.starts_with("fault: ") && l.contains(&tree.to_hex()))
            .unwrap_or_else(|| panic!("no fault names the tree:\n{}", fsck.stdout));
        assert!(
            fault.contains("entry \"a.txt\" says 999 bytes") && fault.contains("holds 5"),
            "{fault}"
        );
    }
}

/// A ref naming a checkpoint of another session (copied from it): show
/// and log refuse it naming the ref, as fsck and the listing do. Before,
/// both handed out the other session's history as this one's.
#[test]
fn a_ref_naming_another_sessions_checkpoint_is_refused_by_show_and_log() {
    let h = Hostile::new();
    let ids = log_ids(&h, &h.session);
    let head: ObjectId = ids[0].parse().unwrap();
    h.set_ref(FORGED, &head);
    for args in [
        vec!["sessions", "show", FORGED],
        vec!["sessions", "log", FORGED],
    ] {
        let run = h.run(None, &args);
        assert_refused(&run, &format!("refs/sessions/{FORGED}"));
        assert!(
            run.stderr
                .contains(&format!("names checkpoint {head} of session {}", h.session)),
            "{args:?}: {}",
            run.stderr
        );
    }
    let fsck = h.run(None, &["fsck"]);
    assert_eq!(fsck.code, 1, "{}", fsck.stdout);
}

/// `hel fsck` where there is no store: one line saying so, exit 0, and
/// still no store. Before, it printed both "not counted while the store
/// has faults" and "store is sound".
#[test]
fn fsck_without_a_store_says_so_in_one_line() {
    let p = Project::new();
    let run = p.run(None, &["fsck"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        format!(
            "no store here: {} does not exist, so there is nothing to check\n",
            p.path().join(".hel").display()
        )
    );
    assert!(!p.path().join(".hel").exists());
}

/// A summary-index entry forged with a valid checksum and the files'
/// stamps: a listing shows it (the index is a hint trusted on its stamps),
/// and fsck notes that it is not what the ref's commit record says,
/// naming the file. Before, fsck said sound without a word.
#[test]
fn a_forged_summary_entry_is_noted_by_fsck() {
    let h = Hostile::new();
    assert_eq!(h.run(None, &["sessions"]).code, 0);
    let path = h.root().join("summaries");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 2, "{text}");
    let json = lines[1][33..].replace("\"checkpoints\":1,", "\"checkpoints\":99,");
    assert_ne!(json, lines[1][33..]);
    let check = ObjectId::of_canonical(json.as_bytes()).to_hex();
    lines[1] = format!("{} {json}", &check[..32]);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let listed = h.run(None, &["sessions", "--json"]);
    let v: Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(v[0]["checkpoints"], 99, "{}", listed.stdout);
    let fsck = h.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
    let note = fsck
        .stdout
        .lines()
        .find(|l| l.starts_with("note: ") && l.contains("summary index"))
        .unwrap_or_else(|| panic!("no note:\n{}", fsck.stdout));
    assert!(
        note.contains(&path.display().to_string())
            && note.contains(&h.session)
            && note.contains("checkpoints 99")
            && note.contains("say 1"),
        "{note}"
    );
}
