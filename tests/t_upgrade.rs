//! The upgrade of stores older hels wrote (format 1 and 2) to format 3
//! (objects-spec §10.1): nothing is lost, a kill at any step leaves a
//! store the old hel still reads whole (before the final rename) and this
//! hel reads whole once it finishes the upgrade, a held lease stops it, and
//! what makes older hels refuse a format-3 store is as the vector says.
//!
//! The inputs are stores written by the older binaries themselves,
//! `tests/fixtures/store-format{1,2}.tar`, with their manifests (what the
//! old hel listed: sessions, names, heads, every record and what it keeps);
//! `tests/fixtures/make-stores.sh` regenerates them.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use hel_store::tree::EntryKind;
use hel_store::{ObjectId, SessionId, Store};
use serde_json::Value;

use crate::common::{Project, Run};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn manifest(format: u64) -> Value {
    let path = fixtures().join(format!("store-format{format}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A project holding the fixture store of `format`, as the old hel left it.
fn unpacked(format: u64) -> Project {
    let p = Project::new();
    let tar = fixtures().join(format!("store-format{format}.tar"));
    let out = Command::new("tar")
        .arg("-C")
        .arg(p.dir.path())
        .arg("-xf")
        .arg(&tar)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    p
}

fn store_dir(p: &Project) -> PathBuf {
    p.path().join(".hel")
}

fn format_file(p: &Project) -> Option<String> {
    std::fs::read_to_string(store_dir(p).join("format")).ok()
}

fn json(run: &crate::common::Run) -> Value {
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// Every file under `.hel/` a hel of `format` (1, 2 or 3) reads, with its
/// bytes: everything but `tmp/`, the refs the upgrade writes and the stub
/// it may add (`refs/`, `objects/` of the stub), the dependents records of
/// format 4 (`refs/dependents/`, `refs/recorded/`), and the locks.
fn old_readable(p: &Project, format: u64) -> BTreeMap<String, Vec<u8>> {
    let root = store_dir(p);
    let stub = stub_object_path();
    let mut out = BTreeMap::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let rel = path.strip_prefix(&root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                // `.sessions.lock` is a directory from the upgrade's last
                // step on: an older hel only ever opens it.
                if rel != "tmp"
                    && rel != ".sessions.lock"
                    && rel != ".store.lock"
                    && rel != "refs/dependents"
                    && rel != "refs/recorded"
                {
                    stack.push(path);
                }
                continue;
            }
            // `summaries` is format 3's listing hint (objects-spec
            // §12.9), written by the listings this test makes.
            let upgrade_writes = rel == "format"
                || rel == "summaries"
                || rel.ends_with(".lock")
                || (format == 2 && rel.starts_with("refs/sessions/"))
                || (format == 1 && rel.starts_with("refs/sessions/00000000-"))
                || (format == 1 && rel == stub);
            if !upgrade_writes {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The stub object's path under `.hel/`, as the vector names it.
fn stub_object_path() -> String {
    vector()["stub_object_path"].as_str().unwrap().to_owned()
}

fn vector() -> Value {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../objects-spec/format4-vectors.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Everything the manifest says the store holds, read back through this
/// hel: the listing (ids, names, heads, checkpoint counts), each session's
/// log (every record, in order), and each record loaded whole (every
/// message, every spill blob with its size, every file and directory of its
/// workspace snapshot), and the ref of every session naming its head.
fn holds_everything(p: &Project, m: &Value) {
    let list = json(&p.run(None, &["sessions", "--json"]));
    let listed: BTreeMap<String, &Value> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap().to_owned(), s))
        .collect();
    let sessions = m["sessions"].as_array().unwrap();
    assert_eq!(
        listed.keys().cloned().collect::<BTreeSet<_>>(),
        sessions
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect::<BTreeSet<_>>(),
        "the sessions listed"
    );
    // No older hel can take its store lock any more (objects-spec §12.6),
    // and every session says its dependencies are recorded (§5.3).
    for older in [".sessions.lock", ".store.lock"] {
        assert!(
            std::fs::symlink_metadata(store_dir(p).join(older))
                .unwrap()
                .is_dir(),
            "{older}"
        );
    }
    for s in sessions {
        let id = s["id"].as_str().unwrap();
        assert!(
            store_dir(p).join("refs/recorded").join(id).is_file(),
            "{id} is recorded"
        );
    }
    let store = Store::open(&p.path()).unwrap();
    let names = hel_store::names::all(&store).unwrap();
    for s in sessions {
        let id = s["id"].as_str().unwrap();
        let l = listed[id];
        assert_eq!(l["head"], s["head"], "{id}: head");
        assert_eq!(l["checkpoints"], s["checkpoints"], "{id}: checkpoints");
        assert_eq!(l["name"], s["name"], "{id}: name");
        let sid: SessionId = id.parse().unwrap();
        assert_eq!(
            names.get(&sid).map(String::as_str),
            s["name"].as_str(),
            "{id}: name in the library"
        );
        // The session's ref is its head.
        let r = std::fs::read_to_string(store_dir(p).join("refs/sessions").join(id)).unwrap();
        assert_eq!(r, format!("{}\n", s["head"].as_str().unwrap()), "{id}: ref");
        let log = json(&p.run(None, &["sessions", "log", id, "--all", "--json"]));
        let records = s["records"].as_array().unwrap();
        assert_eq!(
            log.as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].clone())
                .collect::<Vec<_>>(),
            records.iter().map(|r| r["id"].clone()).collect::<Vec<_>>(),
            "{id}: its records"
        );
        for r in records {
            record_whole(&store, r);
        }
    }
}

/// Record `r` of a manifest loads whole and as the old hel showed it. Ids
/// are content hashes and every read verifies them, so the same ids read
/// back are the same bytes.
fn record_whole(store: &Store, r: &Value) {
    let id: ObjectId = r["id"].as_str().unwrap().parse().unwrap();
    let loaded = store.load(&id).unwrap_or_else(|e| panic!("{id}: {e}"));
    assert_eq!(
        loaded.messages.len() as u64,
        r["messages"].as_u64().unwrap(),
        "{id}: messages"
    );
    let spill: BTreeMap<String, (String, u64)> = loaded
        .state
        .spill()
        .iter()
        .map(|(path, e)| (path.clone(), (e.blob.to_hex(), e.size)))
        .collect();
    let want: BTreeMap<String, (String, u64)> = r["spill"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, e)| {
            (
                path.clone(),
                (e[0].as_str().unwrap().to_owned(), e[1].as_u64().unwrap()),
            )
        })
        .collect();
    assert_eq!(spill, want, "{id}: spill");
    for e in loaded.state.spill().values() {
        let bytes = hel_store::testing::read_blob(store, &e.blob).unwrap();
        assert_eq!(
            (hel_store::blob_id(&bytes), bytes.len() as u64),
            (e.blob, e.size)
        );
    }
    let tree = loaded
        .checkpoint
        .workspace
        .as_ref()
        .map(|w| w.tree.to_hex());
    assert_eq!(tree.as_deref(), r["workspace"].as_str(), "{id}: workspace");
    if let Some(w) = &loaded.checkpoint.workspace {
        let mut trees = vec![w.tree];
        trees.extend(w.start);
        let mut read = 0;
        while let Some(t) = trees.pop() {
            read += 1;
            assert!(read < 10_000, "the fixture's trees are small");
            let read_tree = hel_store::workspace::read_tree(store, &t);
            for e in read_tree
                .unwrap_or_else(|e| panic!("{id}: tree {t} (of {:?}): {e}", w))
                .entries
            {
                match e.kind {
                    EntryKind::Dir => trees.push(e.id),
                    EntryKind::File | EntryKind::Symlink => {
                        let bytes = hel_store::testing::read_blob(store, &e.id).unwrap();
                        assert_eq!(hel_store::blob_id(&bytes), e.id);
                    }
                    _ => {}
                }
            }
        }
    }
}

fn upgraded_whole(format: u64) {
    let p = unpacked(format);
    let m = manifest(format);
    assert_eq!(format_file(&p), old_format_file(format));
    let before = old_readable(&p, format);
    use std::os::unix::fs::MetadataExt;
    let lock_ino = std::fs::metadata(store_dir(&p).join(".store.lock")).map(|m| m.ino());
    holds_everything(&p, &m);
    if format == 3 {
        // Format 4 locks the very file format 3 locked (objects-spec
        // §10.2): a format-3 hel that was waiting for it is kept apart.
        assert_eq!(
            std::fs::metadata(store_dir(&p).join(".store.lock/lock"))
                .unwrap()
                .ino(),
            *lock_ino.as_ref().unwrap()
        );
    }
    assert_eq!(format_file(&p).as_deref(), Some(CURRENT_FORMAT));
    // Nothing the old format had was changed: the upgrade only added refs
    // (format 2), the stub (format 1), the dependents records and the
    // format file.
    assert_eq!(old_readable(&p, format), before);
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
    assert!(fsck.stdout.contains("store is sound"), "{}", fsck.stdout);
    assert_eq!(
        std::fs::read_dir(store_dir(&p).join("tmp"))
            .unwrap()
            .count(),
        0
    );
}

/// What `format` says once the store is upgraded.
const CURRENT_FORMAT: &str = "hel-store-format 6\n";

/// What `format` says in a store of `format` (none in format 1).
fn old_format_file(format: u64) -> Option<String> {
    (format > 1).then(|| format!("hel-store-format {format}\n"))
}

/// Formats 5 and 6 add nothing to a format-4 store but the `format` file
/// (objects-spec §10.3, §10.4): every other byte is as format 4 wrote it, and
/// what this hel writes next (snapshots and commit records with hel's
/// dictionary) reads back with everything format 4 wrote.
#[test]
fn format4_store_upgrades_with_everything() {
    upgraded_whole(4);
    let p = unpacked(4);
    let m = manifest(4);
    holds_everything(&p, &m);
    let s = m["sessions"][0]["id"].as_str().unwrap().to_owned();
    let journal = store_dir(&p).join(format!("packs/journals/{s}.journal"));
    let before = std::fs::read(&journal).unwrap();
    let mock = crate::common::Mock::start(serde_json::json!([{"content": "after the upgrade"}]));
    let run = p.run(Some(&mock), &["resume", &s, "--relocate", "-p", "one more"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let after = std::fs::read(&journal).unwrap();
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "format 4's records are kept"
    );
    // The new commit record is a frame naming hel's dictionary.
    let dict_id = 0x6865_6c01u32.to_le_bytes();
    assert!(
        after[before.len()..]
            .windows(4)
            .any(|w| w == [0x28, 0xb5, 0x2f, 0xfd])
            && after[before.len()..].windows(4).any(|w| w == dict_id),
        "a dictionary frame after the old records"
    );
    let log = json(&p.run(None, &["sessions", "log", &s, "--json"]));
    let log = log.as_array().unwrap();
    assert_eq!(
        (log[0]["record"].as_str(), log[0]["instruction"].as_str()),
        (Some("answer"), Some("one more"))
    );
    let answers = log.iter().filter(|r| r["record"] == "answer").count() as u64;
    assert_eq!(
        answers,
        m["sessions"][0]["checkpoints"].as_u64().unwrap() + 1
    );
    for r in m["sessions"][0]["records"].as_array().unwrap() {
        assert!(
            log.iter().any(|l| l["id"] == r["id"]),
            "{} is kept",
            r["id"]
        );
    }
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
}

/// Format 6 adds nothing to a format-5 store but the `format` file
/// (objects-spec §10.4): the snapshots format 5 wrote keep their spill
/// maps inline (schema 2), and the next checkpoint names its map by a
/// blob (schema 3) that holds the same entries, spill files included.
#[test]
fn format5_store_upgrades_with_everything() {
    upgraded_whole(5);
    let p = unpacked(5);
    let m = manifest(5);
    holds_everything(&p, &m);
    // A session that spilled: its map carries over into schema 3.
    let (s, spill) = m["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| {
            let r = &s["records"][0];
            let spill = r["spill"].as_object().filter(|o| !o.is_empty())?;
            Some((s["id"].as_str().unwrap().to_owned(), spill.clone()))
        })
        .expect("a session whose head keeps a spill file");
    let mock = crate::common::Mock::start(serde_json::json!([{"content": "after the upgrade"}]));
    let run = p.run(Some(&mock), &["resume", &s, "--relocate", "-p", "one more"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let store = Store::open(p.dir.path()).unwrap();
    let head = store.head(&s.parse().unwrap()).unwrap();
    let cp = store.checkpoint(&head).unwrap();
    assert_eq!(cp.schema_version, 3);
    assert!(
        matches!(cp.spill, hel_store::Spill::Blob(_)),
        "{:?}",
        cp.spill
    );
    let map = hel_store::spill::map(&store, &cp).unwrap();
    let got: serde_json::Map<String, Value> = map
        .iter()
        .map(|(k, e)| (k.clone(), serde_json::json!([e.blob.to_hex(), e.size])))
        .collect();
    assert_eq!(got, spill);
    // Its old head, written by format 5, is schema 2 with the map inline.
    let old: hel_store::ObjectId = m["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == s.as_str())
        .and_then(|x| x["head"].as_str())
        .unwrap()
        .parse()
        .unwrap();
    let old = store.checkpoint(&old).unwrap();
    assert_eq!(old.schema_version, 2);
    assert!(matches!(old.spill, hel_store::Spill::Inline(_)));
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
}

#[test]
fn format3_store_upgrades_with_everything() {
    upgraded_whole(3);
}

#[test]
fn format2_store_upgrades_with_everything() {
    upgraded_whole(2);
}

#[test]
fn format1_store_upgrades_with_everything() {
    upgraded_whole(1);
}

/// The (fork, base) pairs of a manifest: a session whose log holds a
/// record of another (a fork holds its base's checkpoint).
fn forks_of(m: &Value) -> Vec<(String, String)> {
    let sessions = m["sessions"].as_array().unwrap();
    let ids = |s: &Value| -> BTreeSet<String> {
        s["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut out = Vec::new();
    for fork in sessions {
        for base in sessions {
            if fork["id"] != base["id"]
                && fork["records"].as_array().unwrap().len()
                    > base["records"].as_array().unwrap().len().min(1)
                && !ids(fork).is_disjoint(&ids(base))
                && !ids(base).is_superset(&ids(fork))
            {
                out.push((
                    fork["id"].as_str().unwrap().to_owned(),
                    base["id"].as_str().unwrap().to_owned(),
                ));
            }
        }
    }
    out
}

/// After the upgrade, a delete finds the forks of what it deletes from
/// the dependents records alone (objects-spec §5.3): every base of a fork
/// in the fixtures is deleted, one at a time, and each fork still loads
/// every record whole; fsck finds the store sound after each.
#[test]
fn deleting_a_base_after_the_upgrade_keeps_its_forks() {
    for format in [2, 3] {
        let m = manifest(format);
        let pairs = forks_of(&m);
        assert!(!pairs.is_empty(), "format {format}: the fixture has forks");
        for (fork, base) in &pairs {
            let p = unpacked(format);
            let run = p.run(None, &["sessions", "delete", base]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            let store = Store::open(&p.path()).unwrap();
            let s = m["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["id"] == fork.as_str())
                .unwrap();
            for r in s["records"].as_array().unwrap() {
                record_whole(&store, r);
            }
            let fsck = p.run(None, &["fsck"]);
            assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
            assert!(fsck.stdout.contains("store is sound"), "{}", fsck.stdout);
        }
    }
}

/// Where the upgrade can be killed, with how many times each point is
/// passed at most in the fixtures (one per ref written).
const KILL_POINTS: &[(&str, u32)] = &[
    ("upgrade-locked", 1),
    ("upgrade-ref", 5),
    ("upgrade-refs", 1),
    ("upgrade-dependents", 1),
    ("upgrade-stub", 1),
    ("upgrade-format-tmp", 1),
    ("upgrade-format", 1),
];

/// A SIGKILL at every step of the upgrade (each ref of it too): before
/// the final rename the store is still of its old format and everything
/// the old hel reads is byte for byte what it wrote (so it reads it all:
/// and with `HEL_OLD_HEL_<format>` set to the old binary, it is run and
/// must list every session); then this hel finishes the upgrade and reads
/// everything the manifest names.
fn killed_at_every_step(format: u64) {
    let m = manifest(format);
    let old = std::env::var_os(format!("HEL_OLD_HEL_{format}"));
    let mut killed = 0;
    for (point, times) in KILL_POINTS {
        for k in 1..=*times {
            let p = unpacked(format);
            let before = old_readable(&p, format);
            let run = p
                .hel(None)
                .args(["sessions"])
                .env("HEL_FAILPOINTS", format!("{point}@{k}"))
                .output()
                .unwrap();
            if run.status.success() {
                // The point is not passed that often here.
                continue;
            }
            assert_eq!(
                run.status.signal(),
                Some(9),
                "{point}@{k}: {}",
                String::from_utf8_lossy(&run.stderr)
            );
            killed += 1;
            let after_rename = *point == "upgrade-format";
            if !after_rename {
                assert_eq!(
                    format_file(&p),
                    old_format_file(format),
                    "{point}@{k}: still the old format"
                );
                assert_eq!(old_readable(&p, format), before, "{point}@{k}");
                // The old hel's store lock is still the file it locks.
                assert!(old_lock_is_file(&p, format), "{point}@{k}");
                if let Some(old) = &old {
                    old_hel_lists_all(&p, old, &m);
                }
            } else {
                assert_eq!(format_file(&p).as_deref(), Some(CURRENT_FORMAT));
                // Killed before its last steps: the next open does them.
                assert!(old_lock_is_file(&p, format), "{point}@{k}");
            }
            holds_everything(&p, &m);
            assert_eq!(format_file(&p).as_deref(), Some(CURRENT_FORMAT));
        }
    }
    // Every point fired at least once (formats 1 and 3 write no session
    // ref).
    let expected = if format == 2 { 5 + 6 } else { 6 };
    assert_eq!(killed, expected, "kills that landed");
}

/// Is the store lock of `format` (`.sessions.lock` of formats 1 and 2,
/// `.store.lock` of format 3) a regular file, one a hel of that format can
/// still lock?
fn old_lock_is_file(p: &Project, format: u64) -> bool {
    let name = match format {
        4 | 5 => ".store.lock/lock",
        3 => ".store.lock",
        _ => ".sessions.lock",
    };
    std::fs::symlink_metadata(store_dir(p).join(name))
        .map(|m| m.is_file())
        .unwrap_or(false)
}

/// The old binary lists every session of the manifest with its head.
fn old_hel_lists_all(p: &Project, old: &std::ffi::OsStr, m: &Value) {
    let out = Command::new(old)
        .current_dir(p.dir.path())
        .env_clear()
        .env("HOME", p.home.path())
        .args(["sessions", "--json"])
        .output()
        .unwrap();
    let list: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    for s in m["sessions"].as_array().unwrap() {
        assert!(
            list.as_array()
                .unwrap()
                .iter()
                .any(|l| l["id"] == s["id"] && l["head"] == s["head"]),
            "the old hel lists {}",
            s["id"]
        );
    }
}

#[test]
fn kill_at_every_step_of_a_format5_upgrade() {
    killed_at_every_step(5);
}

#[test]
fn kill_at_every_step_of_a_format4_upgrade() {
    killed_at_every_step(4);
}

#[test]
fn kill_at_every_step_of_a_format3_upgrade() {
    killed_at_every_step(3);
}

#[test]
fn kill_at_every_step_of_a_format2_upgrade() {
    killed_at_every_step(2);
}

#[test]
fn kill_at_every_step_of_a_format1_upgrade() {
    killed_at_every_step(1);
}

/// While a session's lease is held (an older hel at work on it), the
/// upgrade refuses in one line naming the session and what to do, and
/// writes nothing; once it is free, the upgrade runs.
#[test]
fn a_held_lease_stops_the_upgrade() {
    for format in [1, 2, 3] {
        let p = unpacked(format);
        let m = manifest(format);
        let busy = m["sessions"][1]["id"].as_str().unwrap().to_owned();
        let mut holder =
            LeaseHolder::take(&store_dir(&p).join("sessions").join(&busy).join(".active"));
        let mut listing_before = dir_listing(&store_dir(&p));
        listing_before.retain(|e| *e != (".store.lock".to_owned(), Vec::new()));
        let run = p.run(None, &["sessions"]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(
            run.stderr.contains(&format!("session {busy} is in use"))
                && run.stderr.contains(&format!("a store of format {format}"))
                && run.stderr.contains("then run this command again"),
            "{}",
            run.stderr
        );
        // Nothing written but format 3's store lock file, empty (a format-3
        // store has it already), which the upgrade takes before the older
        // hels' one.
        let mut after = dir_listing(&store_dir(&p));
        after.retain(|e| *e != (".store.lock".to_owned(), Vec::new()));
        assert_eq!(after, listing_before, "nothing written");
        // fsck checks it in place meanwhile, by the old format's rules.
        let fsck = p.run(None, &["fsck"]);
        assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
        assert!(
            fsck.stdout.starts_with(&format!(
                "note: this store of format {format} is not upgraded while session {busy} is in use"
            )) && fsck.stdout.contains("store is sound"),
            "{}",
            fsck.stdout
        );
        let mut after = dir_listing(&store_dir(&p));
        after.retain(|e| *e != (".store.lock".to_owned(), Vec::new()));
        assert_eq!(after, listing_before, "fsck wrote nothing");
        holder.release();
        holds_everything(&p, &m);
    }
}

/// A lease held by another process, as an older hel holds it. (Held by
/// this test process, its descriptor could live on for a moment in a child
/// another test forks, past the moment this test lets it go.)
struct LeaseHolder(std::process::Child);

impl LeaseHolder {
    /// Hold `lease` (its flock, exclusive) until [`LeaseHolder::release`].
    fn take(lease: &Path) -> LeaseHolder {
        use std::io::BufRead;
        let mut child = Command::new("python3")
            .args([
                "-c",
                "import fcntl, sys\n\
                 f = open(sys.argv[1], 'r+')\n\
                 fcntl.flock(f, fcntl.LOCK_EX)\n\
                 print('held', flush=True)\n\
                 sys.stdin.read()",
            ])
            .arg(lease)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "held\n");
        LeaseHolder(child)
    }

    /// Let the lease go: the holder exits, and its lock with it.
    fn release(&mut self) {
        drop(self.0.stdin.take());
        assert!(self.0.wait().unwrap().success());
    }
}

/// Every path under `dir` with its size and content (lease files' and
/// lock files' contents included).
fn dir_listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            if path.is_dir() {
                stack.push(path);
                out.push((rel, Vec::new()));
            } else {
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// What an older hel's writer does before it writes anything (objects-spec
/// §12.6): open its store lock for reading and writing, creating it.
fn older_hel_opens_its_lock(root: &Path, name: &str) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(root.join(name))
}

/// What makes older hels refuse a format-4 store, as
/// `objects-spec/format4-vectors.json` gives it: the `format` file a
/// format-2 or format-3 hel checks first (it names a format above theirs),
/// the stub a format-1 hel meets in `refs/sessions/` (a snapshot whose
/// schema_version is above 1), `.sessions.lock`, the store lock of formats
/// 1 and 2, and `.store.lock`, format 3's: directories that no writer of
/// theirs can open (format 4 locks `.store.lock/lock`). A fresh store and
/// ones upgraded from formats 1, 2 and 3 hold exactly these bytes.
#[test]
fn older_hels_refusal_vector() {
    let v = vector();
    let fresh = Project::new();
    // A fresh store: made by a first write (a name lookup does not make one).
    drop(Store::open(&fresh.path()).unwrap().new_session().unwrap());
    let upgraded1 = unpacked(1);
    let upgraded2 = unpacked(2);
    let upgraded3 = unpacked(3);
    for p in [&upgraded1, &upgraded2, &upgraded3] {
        let run = p.run(None, &["sessions"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    for p in [&fresh, &upgraded1, &upgraded2, &upgraded3] {
        // Format 3's store lock: a directory holding the note and format
        // 4's lock, which no format-3 writer can open.
        let root = store_dir(p);
        let old = v["format3_lock_path"].as_str().unwrap();
        assert_eq!(v["format3_lock_kind"], "directory");
        assert!(std::fs::symlink_metadata(root.join(old)).unwrap().is_dir());
        let entries: Vec<Value> = dir_listing(&root.join(old))
            .into_iter()
            .map(|(name, _)| Value::from(name))
            .collect();
        assert_eq!(Value::from(entries), v["format3_lock_entries"]);
        assert_eq!(
            std::fs::read_to_string(root.join(old).join("README")).unwrap(),
            v["format3_lock_note"].as_str().unwrap()
        );
        let e = older_hel_opens_its_lock(&root, old).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::IsADirectory, "{e}");
    }
    // (A store upgraded from format 3 keeps the note format 3 wrote in
    // `.sessions.lock`.)
    for p in [&fresh, &upgraded1, &upgraded2] {
        let root = store_dir(p);
        let older = v["older_lock_path"].as_str().unwrap();
        assert_eq!(v["older_lock_kind"], "directory");
        assert!(
            std::fs::symlink_metadata(root.join(older))
                .unwrap()
                .is_dir(),
            "{older} is a directory"
        );
        let entries: Vec<Value> = dir_listing(&root.join(older))
            .into_iter()
            .map(|(name, _)| Value::from(name))
            .collect();
        assert_eq!(Value::from(entries), v["older_lock_entries"]);
        assert_eq!(
            std::fs::read_to_string(root.join(older).join("README")).unwrap(),
            v["older_lock_note"].as_str().unwrap()
        );
        let e = older_hel_opens_its_lock(&root, older).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::IsADirectory, "{e}");
        let store_lock = v["store_lock_path"].as_str().unwrap();
        assert!(std::fs::symlink_metadata(root.join(store_lock))
            .unwrap()
            .is_file());
        assert_eq!(
            std::fs::read_to_string(root.join("format")).unwrap(),
            v["format_file"].as_str().unwrap()
        );
        assert_eq!(
            std::fs::read_to_string(root.join(v["stub_ref_path"].as_str().unwrap())).unwrap(),
            v["stub_ref"].as_str().unwrap()
        );
        let stored = std::fs::read(root.join(v["stub_object_path"].as_str().unwrap())).unwrap();
        let canonical = zstd::bulk::decompress(&stored, 1 << 16).unwrap();
        assert_eq!(
            hex(&canonical),
            v["stub_object_canonical_hex"].as_str().unwrap()
        );
    }
    // The vector holds together: the stub's id is the BLAKE3 of its
    // canonical bytes, the ref names it, its schema is one no format-1
    // reader knows, and the format file names a format above 2.
    let canonical = unhex(v["stub_object_canonical_hex"].as_str().unwrap());
    let id = blake3::hash(&canonical).to_hex().to_string();
    assert_eq!(v["stub_ref"].as_str().unwrap(), format!("{id}\n"));
    assert_eq!(
        v["stub_object_path"].as_str().unwrap(),
        format!("objects/{}/{}", &id[..2], &id[2..])
    );
    let nul = canonical.iter().position(|&b| b == 0).unwrap();
    assert!(canonical.starts_with(b"snapshot "));
    let payload: Value = serde_json::from_slice(&canonical[nul + 1..]).unwrap();
    assert!(payload["schema_version"].as_u64().unwrap() > 1);
    let n: u64 = v["format_file"]
        .as_str()
        .unwrap()
        .strip_prefix("hel-store-format ")
        .unwrap()
        .trim_end()
        .parse()
        .unwrap();
    assert!(n > 2);
}

/// Older hels write nothing into a format-6 store, fresh or upgraded from
/// any older format: with `HEL_OLD_HEL_1` to `HEL_OLD_HEL_5` naming the
/// binaries of formats 1 to 5
/// (tests/fixtures/README.md), a new session, a resume, a delete and a gc
/// by each leave every file and directory under `.hel/` as they were, bytes
/// and all. Hels of formats 2 to 5 refuse at their `format` check; a format-1 hel's writers fail to open their store lock,
/// `.sessions.lock`, a directory (its `-p` runs unsaved, saying so). Skipped,
/// saying so, when none of the variables is set (the vector test above checks
/// the directory in any case).
#[test]
fn older_hels_write_nothing_in_a_format6_store() {
    let olds: Vec<(u64, std::ffi::OsString)> = [1, 2, 3, 4, 5]
        .into_iter()
        .filter_map(|f| std::env::var_os(format!("HEL_OLD_HEL_{f}")).map(|b| (f, b)))
        .collect();
    if olds.is_empty() {
        eprintln!(
            "older_hels_write_nothing_in_a_format6_store skipped: set HEL_OLD_HEL_1 to HEL_OLD_HEL_5 to the hel binaries of formats 1 to 5"
        );
        return;
    }
    let fresh = Project::new();
    let mock = crate::common::Mock::start(serde_json::json!([{"content": "made"}]));
    let run = fresh.run(Some(&mock), &["-p", "hello"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let stores = [
        (fresh, run.session()),
        (unpacked(1), first_session(1)),
        (unpacked(2), first_session(2)),
        (unpacked(3), first_session(3)),
        (unpacked(4), first_session(4)),
        (unpacked(5), first_session(5)),
    ];
    for (p, _) in &stores[1..] {
        let run = p.run(None, &["sessions"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    for (format, old) in &olds {
        for (p, session) in &stores {
            let root = store_dir(p);
            let mock = crate::common::Mock::start(serde_json::json!([{"content": "old"}]));
            let commands: [&[&str]; 4] = [
                &["-p", "hello"],
                &["resume", session, "-p", "x"],
                &["sessions", "delete", session],
                &["gc"],
            ];
            for args in commands {
                let before = dir_listing(&root);
                let out = Command::new(old)
                    .current_dir(p.dir.path())
                    .env_clear()
                    .env("HOME", p.home.path())
                    .args(["--base-url", &mock.url, "--model", "mock-model"])
                    .args(args)
                    .stdin(std::process::Stdio::null())
                    .output()
                    .unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(
                    dir_listing(&root),
                    before,
                    "the format-{format} hel's {args:?} wrote into a format-5 store: {stderr}"
                );
                let said = match format {
                    2 => "has format 6, this hel reads up to 2: upgrade hel",
                    3 => "has format 6, this hel reads up to 3: upgrade hel",
                    4 => "has format 6, this hel reads up to 4: upgrade hel",
                    5 => "has format 6, this hel reads up to 5: upgrade hel",
                    _ => ".sessions.lock: Is a directory",
                };
                assert!(stderr.contains(said), "{args:?}: {stderr}");
                if args[0] == "-p" && *format == 1 {
                    assert!(stderr.contains("will not be saved"), "{stderr}");
                } else {
                    assert!(!out.status.success(), "{args:?}: {stderr}");
                }
            }
        }
    }
}

/// Where the file system cannot swap the older hels' lock file for the
/// directory in one step, the upgrade's last step renames the file away and
/// the directory in: the same directory, nothing left under `tmp/`.
#[test]
fn without_a_swap_the_older_lock_becomes_a_directory_by_two_renames() {
    let p = unpacked(2);
    assert!(old_lock_is_file(&p, 2));
    let run = Run::from_cmd(
        p.hel(None)
            .args(["sessions"])
            .env("HEL_FAILPOINTS", "older-lock-no-exchange"),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let root = store_dir(&p);
    assert_eq!(
        dir_listing(&root.join(".sessions.lock")),
        [(
            "README".to_owned(),
            vector()["older_lock_note"]
                .as_str()
                .unwrap()
                .as_bytes()
                .to_vec()
        )]
    );
    let e = older_hel_opens_its_lock(&root, ".sessions.lock").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::IsADirectory, "{e}");
    assert_eq!(std::fs::read_dir(root.join("tmp")).unwrap().count(), 0);
    holds_everything(&p, &manifest(2));
}

/// The first session of the fixture of `format`, as its manifest names it.
fn first_session(format: u64) -> String {
    manifest(format)["sessions"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// An upgrade redone after a kill writes what the journals say then, not
/// what an earlier run wrote: a format-2 hel may have committed meanwhile
/// (its journal's head moved on; its commit removed the session's ref).
#[test]
fn a_redone_upgrade_follows_the_journals() {
    let p = unpacked(2);
    let m = manifest(2);
    sessions_killed_at(&p, "upgrade-refs");
    assert_eq!(format_file(&p).as_deref(), Some("hel-store-format 2\n"));
    let refs = store_dir(&p).join("refs/sessions");
    // One ref older than its journal's head, one removed, as a format-2
    // hel's commits leave them.
    let sessions = m["sessions"].as_array().unwrap();
    let stale = &sessions[0];
    let older = stale["records"].as_array().unwrap().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(stale["head"].as_str().unwrap(), older);
    std::fs::write(
        refs.join(stale["id"].as_str().unwrap()),
        format!("{older}\n"),
    )
    .unwrap();
    std::fs::remove_file(refs.join(sessions[1]["id"].as_str().unwrap())).unwrap();
    holds_everything(&p, &m);
}

/// A format-2 journal with a fault (a damaged record before intact ones,
/// its sidecar gone) has no head this hel can tell: the upgrade refuses in
/// one line naming the journal, and the store stays format 2, everything a
/// format-2 hel reads as it was.
#[test]
fn a_damaged_journal_stops_the_upgrade() {
    let p = unpacked(2);
    let m = manifest(2);
    let most = m["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|s| s["records"].as_array().unwrap().len())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let journals = store_dir(&p).join("packs/journals");
    std::fs::remove_file(journals.join(format!("{most}.jidx"))).unwrap();
    let path = journals.join(format!("{most}.journal"));
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let before = old_readable(&p, 2);
    let run = p.run(None, &["sessions"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot upgrade")
            && run.stderr.contains(&format!("{most}.journal"))
            && run.stderr.contains("left as format 2"),
        "{}",
        run.stderr
    );
    assert_eq!(format_file(&p).as_deref(), Some("hel-store-format 2\n"));
    assert_eq!(old_readable(&p, 2), before);
    // `hel fsck`, where the refusal sends the user, checks the store in
    // place by format 2's rules: the fault, named, and nothing written.
    let listing = dir_listing(&store_dir(&p));
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 1, "{}{}", fsck.stdout, fsck.stderr);
    assert!(
        fsck.stdout.starts_with("note: this store of format 2 cannot be upgraded")
            && fsck
                .stdout
                .lines()
                .any(|l| l.starts_with("fault: ") && l.contains(&format!("{most}.journal offset "))),
        "{}",
        fsck.stdout
    );
    assert_eq!(dir_listing(&store_dir(&p)), listing, "fsck wrote nothing");
}

/// A format-3 store with a damaged journal is still upgraded (its refs
/// need no reading): the damaged session is left unrecorded, which makes
/// every delete read its head, and fsck names the fault as before.
#[test]
fn a_damaged_format3_journal_does_not_stop_the_upgrade() {
    let p = unpacked(3);
    let m = manifest(3);
    let (fork, base) = live_fork(&p, &m);
    let journals = store_dir(&p).join("packs/journals");
    std::fs::remove_file(journals.join(format!("{fork}.jidx"))).unwrap();
    let path = journals.join(format!("{fork}.journal"));
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let run = p.run(None, &["sessions"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(format_file(&p).as_deref(), Some(CURRENT_FORMAT));
    let recorded = store_dir(&p).join("refs/recorded");
    assert!(
        !recorded.join(&fork).exists(),
        "the damaged one is not recorded"
    );
    assert!(recorded.join(&base).exists());
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 1, "{}", fsck.stdout);
    assert!(
        fsck.stdout.contains(&format!("{fork}.journal")),
        "{}",
        fsck.stdout
    );
}

/// Killed after its final rename, before `.store.lock` became a
/// directory, a format-3 upgrade leaves a format-4 store a format-3 hel
/// that had it open could still commit to (without records): the next
/// open makes the directory and writes every head's records again.
#[test]
fn an_upgrade_killed_before_the_store_lock_moved_records_every_head_again() {
    let p = unpacked(3);
    let m = manifest(3);
    sessions_killed_at(&p, "upgrade-format");
    assert_eq!(format_file(&p).as_deref(), Some(CURRENT_FORMAT));
    assert!(old_lock_is_file(&p, 3));
    // What a format-3 commit since would leave: a dependency without its
    // record.
    let (fork, base) = live_fork(&p, &m);
    let record = store_dir(&p)
        .join("refs/dependents")
        .join(&base)
        .join(&fork);
    std::fs::remove_file(&record).unwrap();
    holds_everything(&p, &m);
    assert!(record.is_file(), "written again");
    let fsck = p.run(None, &["fsck"]);
    assert!(fsck.stdout.contains("store is sound"), "{}", fsck.stdout);
}

/// Without a swap, `.store.lock` becomes a directory by two renames, and
/// its `lock` is still the file format 3 locked (the same inode); nothing
/// is left under `tmp/`.
#[test]
fn without_a_swap_the_store_lock_keeps_its_file() {
    use std::os::unix::fs::MetadataExt;
    let p = unpacked(3);
    let root = store_dir(&p);
    let ino = std::fs::metadata(root.join(".store.lock")).unwrap().ino();
    let run = Run::from_cmd(
        p.hel(None)
            .args(["sessions"])
            .env("HEL_FAILPOINTS", "store-lock-no-exchange"),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        std::fs::metadata(root.join(".store.lock/lock"))
            .unwrap()
            .ino(),
        ino
    );
    let e = older_hel_opens_its_lock(&root, ".store.lock").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::IsADirectory, "{e}");
    assert_eq!(std::fs::read_dir(root.join("tmp")).unwrap().count(), 0);
    holds_everything(&p, &manifest(3));
}

/// Run `hel sessions` in `p` killed (SIGKILL) at failpoint `point`.
fn sessions_killed_at(p: &Project, point: &str) {
    let run = p
        .hel(None)
        .args(["sessions"])
        .env("HEL_FAILPOINTS", point)
        .output()
        .unwrap();
    assert_eq!(run.status.signal(), Some(9), "{point}");
}

/// A (fork, base) pair of the manifest `m` whose base still has a
/// journal in `p` (a dependency a delete of the base must look after).
fn live_fork(p: &Project, m: &Value) -> (String, String) {
    forks_of(m)
        .into_iter()
        .find(|(_, b)| {
            store_dir(p)
                .join("packs/journals")
                .join(format!("{b}.journal"))
                .exists()
        })
        .unwrap()
}
