//! The summary index (objects-spec §5.9): a listing uses an entry only
//! while the ref and journal it was read from are unchanged, rebuilds what
//! is missing, damaged or stale, and lists exactly what it lists without
//! the index.

use std::fs;
use std::path::{Path, PathBuf};

use hel_store::{CommitInput, SessionId, SessionLease, SessionState, Store};
use serde_json::{json, Value};

fn input<'a>(messages: &'a [Value], leaves: &'a [Option<hel_store::Leaf>]) -> CommitInput<'a> {
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
    .why("answer")
}

fn conversation(tag: &str, turns: usize) -> Vec<Value> {
    let mut out = Vec::new();
    for i in 0..turns {
        out.push(json!({"role": "user", "content": format!("{tag} instruction {i}")}));
        out.push(json!({"role": "assistant", "content": format!("{tag} answer {i}")}));
    }
    out
}

/// A new session with one checkpoint of `turns` turns; its lease dropped.
fn session(store: &Store, tag: &str, turns: usize) -> SessionId {
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let msgs = conversation(tag, turns);
    store
        .commit(&lease, &mut state, input(&msgs, &vec![None; msgs.len()]))
        .unwrap();
    lease.session().clone()
}

/// One more checkpoint of `sid` (resumed and released).
fn commit_more(store: &Store, sid: &SessionId, tag: &str, turns: usize) {
    let (lease, head) = store.resume(sid).unwrap();
    let mut state = store.load(&head).unwrap().state;
    let msgs = conversation(tag, turns);
    store
        .commit(&lease, &mut state, input(&msgs, &vec![None; msgs.len()]))
        .unwrap();
    drop::<SessionLease>(lease);
}

fn index_path(dir: &Path) -> PathBuf {
    dir.join(".hel/summaries")
}

/// The listing as text: one line per session, every field (the time of a
/// session without checkpoint is the listing's own, so left out).
fn listing(store: &Store) -> Vec<String> {
    store
        .sessions()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{} busy={} head={:?} updated={} checkpoints={} messages={} instruction={:?} cwd={:?} future={} broken={:?}",
                s.id,
                s.busy,
                s.head.map(|h| h.to_hex()),
                if s.head.is_some() { s.updated_ms } else { 0 },
                s.checkpoints,
                s.messages,
                s.instruction,
                s.cwd,
                s.future,
                s.broken.as_ref().map(|e| e.to_string()),
            )
        })
        .collect()
}

/// The listing with no index at all (removed before and after).
fn listing_without_index(dir: &Path, store: &Store) -> Vec<String> {
    let _ = fs::remove_file(index_path(dir));
    let out = listing(store);
    let _ = fs::remove_file(index_path(dir));
    out
}

/// The index file's entries: (checksum, entry JSON).
fn entries(dir: &Path) -> Vec<Value> {
    let text = fs::read_to_string(index_path(dir)).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("hel-summaries 3"));
    lines
        .map(|l| serde_json::from_str(&l[33..]).unwrap())
        .collect()
}

/// The index once every entry in it is settled (both its files' ctimes
/// two seconds before a listing began): until then a rebuild may write an
/// entry settled that the first listing wrote unsettled, and the bytes
/// differ by how long the machine took. Lists until they are, within a
/// deadline.
fn settled_index(dir: &Path, store: &Store) -> Vec<u8> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        listing(store);
        if entries(dir).iter().all(|e| e["settled"] == json!(true)) {
            return fs::read(index_path(dir)).unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the index's entries never settled"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Write `entries` as the index, each line with a right checksum (what a
/// hostile store, or a stale one, can hold).
fn write_entries(dir: &Path, entries: &[Value]) {
    let mut text = String::from("hel-summaries 3\n");
    for e in entries {
        let json = hel_store::canonical::to_vec(e);
        let check = blake3::hash(&json).to_hex().to_string();
        text.push_str(&check[..32]);
        text.push(' ');
        text.push_str(std::str::from_utf8(&json).unwrap());
        text.push('\n');
    }
    fs::write(index_path(dir), text).unwrap();
}

fn entry_of<'a>(entries: &'a mut [Value], sid: &SessionId) -> &'a mut Value {
    entries
        .iter_mut()
        .find(|e| e["session"] == sid.as_str())
        .unwrap()
}

#[test]
fn a_fresh_entry_is_what_the_listing_shows_and_a_moved_ref_makes_it_stale() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let a = session(&store, "a", 1);
    let b = session(&store, "b", 2);
    let truth = listing(&store);
    // The listing wrote one entry per session, and the next one is the same.
    let mut es = entries(dir.path());
    assert_eq!(es.len(), 2, "{es:?}");
    assert_eq!(listing(&store), truth);
    let written = fs::read(index_path(dir.path())).unwrap();

    // A fresh entry is read instead of the journal: what it says is shown
    // (the observable that the index is used, and used whole).
    entry_of(&mut es, &a)["instruction"] = json!("FROM THE INDEX");
    write_entries(dir.path(), &es);
    let shown = listing(&store);
    assert!(
        shown
            .iter()
            .any(|l| l.starts_with(a.as_str()) && l.contains("FROM THE INDEX")),
        "{shown:?}"
    );

    // The same entry naming b's snapshot for a: not a's head, never shown.
    let b_head = entry_of(&mut es, &b)["head"].clone();
    entry_of(&mut es, &a)["head"] = b_head;
    write_entries(dir.path(), &es);
    assert_eq!(listing(&store), truth);
    // ... and rebuilt: the file is what the first listing wrote.
    assert_eq!(fs::read(index_path(dir.path())).unwrap(), written);

    // A lie keyed by a's head, then a commit moves a's ref: stale.
    let mut es = entries(dir.path());
    entry_of(&mut es, &a)["instruction"] = json!("FROM THE INDEX");
    write_entries(dir.path(), &es);
    commit_more(&store, &a, "a2", 3);
    let after = listing(&store);
    assert!(
        !after.iter().any(|l| l.contains("FROM THE INDEX")),
        "{after:?}"
    );
    assert!(
        after.iter().any(|l| l.contains("a2 instruction 2")),
        "{after:?}"
    );
    assert_eq!(after, listing_without_index(dir.path(), &store));
}

#[test]
fn a_journal_written_behind_the_index_is_read_again() {
    // A journal whose commit records change under an unchanged ref (as
    // one arriving with a repository may): the entry is stale.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let a = session(&store, "a", 1);
    let before = listing(&store);
    assert_eq!(entries(dir.path()).len(), 1);
    hel_store::testing::redate_journal(&dir.path().join(".hel"), &a, 4_102_444_800_000);
    let after = listing(&store);
    assert_ne!(after, before);
    assert!(after[0].contains("updated=4102444800000 "), "{after:?}");
    assert!(after[0].contains("future=true"), "{after:?}");
    assert_eq!(after, listing_without_index(dir.path(), &store));
}

#[test]
fn a_damaged_or_missing_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let a = session(&store, "a", 1);
    let _b = session(&store, "b", 2);
    let truth = listing(&store);
    let good = settled_index(dir.path(), &store);
    let idx = index_path(dir.path());

    // One flipped bit in each place of an entry line: never shown, rebuilt.
    let first_entry = good.iter().position(|b| *b == b'\n').unwrap() + 1;
    let line_end = first_entry
        + good[first_entry..]
            .iter()
            .position(|b| *b == b'\n')
            .unwrap();
    for at in [
        first_entry,
        first_entry + 31,
        first_entry + 32,
        first_entry + 40,
        line_end - 2,
        line_end,
    ] {
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        fs::write(&idx, &bad).unwrap();
        // fsck reports the damaged hint (and stays sound: it is a hint).
        let report = hel_store::fsck::fsck(&store).unwrap();
        assert!(
            report
                .notes
                .iter()
                .any(|n| n.contains("summary index") && n.contains("damaged")),
            "flipped byte {at}: {:?}",
            report.notes
        );
        assert_eq!(listing(&store), truth, "flipped byte {at}");
        assert_eq!(fs::read(&idx).unwrap(), good, "flipped byte {at}: rebuilt");
        let notes = hel_store::fsck::fsck(&store).unwrap().notes;
        assert!(
            !notes.iter().any(|n| n.contains("summary index")),
            "rebuilt: {notes:?}"
        );
    }

    // Not canonical (a space in the JSON, checksum right), a second line
    // for one session, an unknown key, no header, garbage, empty, missing.
    let mut es = entries(dir.path());
    let mut extra = entry_of(&mut es, &a).clone();
    extra["instruction"] = json!("A SECOND ENTRY");
    let mut unknown = es.clone();
    unknown[0]["extra"] = json!(1);
    let mut twice = es.clone();
    twice.push(extra);
    for (what, bytes) in [
        ("two entries for one session", {
            write_entries(dir.path(), &twice);
            fs::read(&idx).unwrap()
        }),
        ("unknown key", {
            write_entries(dir.path(), &unknown);
            fs::read(&idx).unwrap()
        }),
        ("not canonical", {
            let json = serde_json::to_string_pretty(&es[0])
                .unwrap()
                .replace('\n', "");
            let check = blake3::hash(json.as_bytes()).to_hex().to_string();
            format!("hel-summaries 3\n{} {json}\n", &check[..32]).into_bytes()
        }),
        ("no header", good[first_entry..].to_vec()),
        ("garbage", vec![0xff; 5000]),
        ("empty", Vec::new()),
    ] {
        fs::write(&idx, &bytes).unwrap();
        let shown = listing(&store);
        assert_eq!(shown, truth, "{what}");
        assert_eq!(fs::read(&idx).unwrap(), good, "{what}: rebuilt");
    }
    fs::remove_file(&idx).unwrap();
    assert_eq!(listing(&store), truth, "missing");
    assert_eq!(fs::read(&idx).unwrap(), good, "missing: rebuilt");

    // Too large: ignored whole (never read into memory), and replaced.
    let f = fs::File::create(&idx).unwrap();
    f.set_len(65 << 20).unwrap();
    drop(f);
    assert_eq!(listing(&store), truth, "too large");
    assert_eq!(fs::read(&idx).unwrap(), good, "too large: replaced");

    // A link in its place is never followed: its target stays as it was,
    // and the link is replaced by the index.
    let target = dir.path().join("elsewhere");
    fs::write(&target, b"not the index\n").unwrap();
    fs::remove_file(&idx).unwrap();
    std::os::unix::fs::symlink(&target, &idx).unwrap();
    assert_eq!(listing(&store), truth, "link");
    assert_eq!(fs::read(&target).unwrap(), b"not the index\n");
    assert!(!fs::symlink_metadata(&idx).unwrap().file_type().is_symlink());
    assert_eq!(fs::read(&idx).unwrap(), good, "link: replaced");

    // A directory in its place: listed all the same (nothing written).
    fs::remove_file(&idx).unwrap();
    fs::create_dir(&idx).unwrap();
    assert_eq!(listing(&store), truth, "directory");
    assert!(idx.is_dir());
}

/// An index long enough to be parsed on a few threads (64 lines and
/// more) drops what a short one drops, whichever line it is on: a second
/// entry for a session (both go), a line that fails its checksum.
#[test]
fn a_long_index_drops_a_repeated_and_a_damaged_entry_wherever_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let sids: Vec<SessionId> = (0..70)
        .map(|i| session(&store, &format!("s{i}"), 1))
        .collect();
    let truth = listing(&store);
    let good = settled_index(dir.path(), &store);
    assert_eq!(entries(dir.path()).len(), 70);
    assert_eq!(listing(&store), truth, "the index as written");
    // A second entry for the 50th session, last; the first listing with it
    // must not show it (nor the first entry) and rebuilds the index.
    let mut es = entries(dir.path());
    let mut extra = entry_of(&mut es, &sids[50]).clone();
    extra["instruction"] = json!("A SECOND ENTRY");
    es.push(extra);
    write_entries(dir.path(), &es);
    assert_eq!(listing(&store), truth, "two entries for one session");
    assert_eq!(fs::read(index_path(dir.path())).unwrap(), good, "rebuilt");
    // A flipped byte in the 60th entry's JSON.
    let mut bad = good.clone();
    let line = bad
        .split(|b| *b == b'\n')
        .take(60)
        .map(|l| l.len() + 1)
        .sum::<usize>();
    bad[line + 40] ^= 0x01;
    fs::write(index_path(dir.path()), &bad).unwrap();
    let report = hel_store::fsck::fsck(&store).unwrap();
    assert!(
        report.notes.iter().any(|n| n.contains("damaged")),
        "{:?}",
        report.notes
    );
    assert_eq!(listing(&store), truth, "a damaged 60th entry");
    assert_eq!(fs::read(index_path(dir.path())).unwrap(), good, "rebuilt");
}

#[test]
fn the_listing_with_the_index_is_the_listing_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let a = session(&store, "a", 1);
    let b = session(&store, "b", 3);
    commit_more(&store, &b, "b2", 4);
    let a_head = store.head(&a).unwrap();
    let (fork_lease, _, _) = store.fork(&a_head).unwrap();
    let forked = fork_lease.session().clone();
    drop(fork_lease);
    let deleted = session(&store, "d", 1);
    let broken = session(&store, "x", 1);
    // Busy, no checkpoint yet; busy with one.
    let starting = store.new_session().unwrap();
    let (working, _) = store.resume(&b).unwrap();

    let truth = listing_without_index(dir.path(), &store);
    assert_eq!(listing(&store), truth, "building the index");
    assert_eq!(listing(&store), truth, "from the index");
    assert_eq!(
        entries(dir.path()).len(),
        5,
        "one per readable session with a checkpoint"
    );

    // Changes the index has not seen: a delete, a ref made garbage, a new
    // commit, the busy session idle again.
    store.delete(&deleted, true).unwrap();
    fs::write(
        hel_store::testing::ref_path(&dir.path().join(".hel"), &broken),
        b"garbage\n",
    )
    .unwrap();
    commit_more(&store, &forked, "f", 2);
    drop(working);
    let now = listing(&store);
    assert_eq!(now, listing_without_index(dir.path(), &store));
    assert!(
        now.iter()
            .any(|l| l.starts_with(broken.as_str()) && l.contains("broken=Some")),
        "{now:?}"
    );
    assert!(
        !now.iter().any(|l| l.starts_with(deleted.as_str())),
        "{now:?}"
    );
    let _ = listing(&store);
    let sessions: Vec<Value> = entries(dir.path())
        .iter()
        .map(|e| e["session"].clone())
        .collect();
    assert_eq!(sessions.len(), 3, "{sessions:?}");
    assert!(
        !sessions.contains(&json!(deleted.as_str())) && !sessions.contains(&json!(broken.as_str()))
    );
    drop(starting);
}

/// `path`'s stamp as the index writes it: inode, size, ctime (not followed).
fn stamp_of(path: &Path) -> [u64; 4] {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(path).unwrap();
    [m.ino(), m.size(), m.ctime() as u64, m.ctime_nsec() as u64]
}

/// Copy the directory tree `from` to `to` (new files: new inodes, ctimes).
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            fs::copy(e.path(), &dest).unwrap();
        }
    }
}

#[test]
fn a_ref_rewritten_in_place_is_read_again_even_when_its_entry_is_settled() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let a = session(&store, "a", 1);
    let first = store.head(&a).unwrap();
    commit_more(&store, &a, "a2", 2);
    let _ = listing(&store);
    let ref_file = hel_store::testing::ref_path(&dir.path().join(".hel"), &a);

    // A settled entry is used on its stamps alone: one naming a's first
    // checkpoint with a made-up instruction is shown (the ref is not read).
    let mut es = entries(dir.path());
    assert_eq!(entry_of(&mut es, &a)["ref"], json!(stamp_of(&ref_file)));
    entry_of(&mut es, &a)["settled"] = json!(true);
    entry_of(&mut es, &a)["head"] = json!(first.to_hex());
    entry_of(&mut es, &a)["instruction"] = json!("FROM THE INDEX");
    write_entries(dir.path(), &es);
    let shown = listing(&store);
    assert!(shown[0].contains("FROM THE INDEX"), "{shown:?}");

    // The ref rewritten in place with as many bytes (what it held, as a
    // tool that is not hel may write it; a's first checkpoint would read
    // as a's second, which its journal holds one commit past it): the
    // same inode and size, but the write moved the ctime, so the stamp is
    // not the entry's.
    write_entries(dir.path(), &es);
    let before = stamp_of(&ref_file);
    let head = store.head(&a).unwrap();
    assert_ne!(head, first);
    fs::write(&ref_file, format!("{head}\n")).unwrap();
    let after = stamp_of(&ref_file);
    assert_eq!((after[0], after[1]), (before[0], before[1]), "in place");
    assert_ne!(after, before, "a write moves the ctime");
    let now = listing(&store);
    assert!(!now[0].contains("FROM THE INDEX"), "{now:?}");
    assert!(now[0].contains(&head.to_hex()), "{now:?}");
    assert_eq!(now, listing_without_index(dir.path(), &store));
}

#[test]
fn an_unsettled_entry_is_checked_against_the_ref_even_when_the_stamps_match() {
    // What a rewrite within one tick of the ctime clock looks like: the
    // entry's stamps are the ref's, but the ref holds another checkpoint.
    // Only a settled entry (both ctimes older than the listing that made
    // it, by more than the clock's granularity) is trusted on its stamps.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let a = session(&store, "a", 1);
    let first = store.head(&a).unwrap();
    commit_more(&store, &a, "a2", 2);
    let truth = listing(&store);
    let mut es = entries(dir.path());
    entry_of(&mut es, &a)["settled"] = json!(false);
    entry_of(&mut es, &a)["head"] = json!(first.to_hex());
    entry_of(&mut es, &a)["instruction"] = json!("FROM THE INDEX");
    write_entries(dir.path(), &es);
    assert_eq!(listing(&store), truth);
    assert_eq!(listing(&store), listing_without_index(dir.path(), &store));
}

#[test]
fn a_copied_store_never_uses_the_entries_it_arrived_with() {
    // A `.hel/` arriving with a clone or a copy: every file is new (new
    // inodes and ctimes), so even settled entries are stale.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let a = session(&store, "a", 1);
    let b = session(&store, "b", 2);
    let _ = listing(&store);
    let mut es = entries(dir.path());
    for sid in [&a, &b] {
        entry_of(&mut es, sid)["settled"] = json!(true);
        entry_of(&mut es, sid)["instruction"] = json!("FROM THE INDEX");
    }
    write_entries(dir.path(), &es);
    let copy = tempfile::tempdir().unwrap();
    copy_tree(&dir.path().join(".hel"), &copy.path().join(".hel"));
    let copied = Store::open(copy.path()).unwrap();
    let shown = listing(&copied);
    assert!(
        !shown.iter().any(|l| l.contains("FROM THE INDEX")),
        "{shown:?}"
    );
    assert_eq!(shown.len(), 2);
    assert_eq!(shown, listing_without_index(copy.path(), &copied));
}
