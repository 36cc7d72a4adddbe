//! `fsck`: verify every object and everything the refs reach.
//!
//! The contract (objects-spec §8): the store is reported sound only when
//! every object file verifies, nothing but hel's own files sits where hel
//! keeps them, every ref names a snapshot, everything reachable reads and
//! validates exactly as a load validates it, and every session's newest
//! checkpoint loads whole. When anything is wrong, the faults are listed
//! (each naming the object or path) and no garbage is reported: what is
//! unreachable cannot be known while something reachable is unreadable.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;

use crate::dir::Kind as EntryKind;
use crate::gc::{mark, object_files, roots};
use crate::journal;
use crate::layout::{LEASE, SPILL};
use crate::object::{self, Cap, Kind};
use crate::odb::Odb;
use crate::pack::{self, FileKind, RecordType, FILE_HEADER, RECORD_HEADER};
use crate::{heads, list, refs, Error, ObjectId, Result, SessionId, Store};

/// One thing wrong with a store.
#[derive(Debug)]
pub enum Fault {
    /// An object, ref or session that fails to read or validate.
    Broken(Error),
    /// An entry hel did not make, where only its own files belong.
    Stray { path: PathBuf, what: &'static str },
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Broken(e) => write!(f, "{e}"),
            Fault::Stray { path, what } => {
                write!(
                    f,
                    "{}: a {what} where hel keeps only its own files",
                    path.display()
                )
            }
        }
    }
}

/// What fsck found.
#[derive(Debug, Default)]
pub struct FsckReport {
    pub objects: u64,
    pub bytes: u64,
    pub refs: u64,
    pub faults: Vec<Fault>,
    /// Observations that are not faults (a ref log that misses a move).
    pub notes: Vec<String>,
    /// Unreachable objects; `None` when faults make it unknowable.
    pub unreachable: Option<u64>,
    pub tmp_files: u64,
}

impl FsckReport {
    /// True when the store has no fault.
    pub fn is_sound(&self) -> bool {
        self.faults.is_empty()
    }
}

/// Strays in `sessions/`: anything but directories named by session ids,
/// holding a lease file and a spill directory of regular files.
fn sessions_dir_faults(layout: &Odb, faults: &mut Vec<Fault>) -> Result<()> {
    let Some(sessions) = layout.sessions()? else {
        return Ok(());
    };
    for e in sessions.entries()? {
        let name = e.name.to_string_lossy().into_owned();
        let path = sessions.child_path(&name);
        let is_id = name.parse::<SessionId>().is_ok();
        if e.kind != EntryKind::Dir || !is_id {
            let what = if e.kind == EntryKind::Dir {
                "directory not named by a session id"
            } else {
                e.kind.describe()
            };
            faults.push(Fault::Stray { path, what });
            continue;
        }
        let Some(dir) = sessions.sub(&name)? else {
            continue;
        };
        for inner in dir.entries()? {
            let iname = inner.name.to_string_lossy().into_owned();
            let ok = (iname == LEASE && inner.kind == EntryKind::File)
                || (iname == SPILL && inner.kind == EntryKind::Dir);
            if !ok {
                faults.push(Fault::Stray {
                    path: dir.child_path(&iname),
                    what: inner.kind.describe(),
                });
                continue;
            }
            if iname == SPILL {
                if let Some(spill) = dir.sub(SPILL)? {
                    for f in spill.entries()? {
                        if f.kind != EntryKind::File {
                            faults.push(Fault::Stray {
                                path: spill.child_path(&f.name.to_string_lossy()),
                                what: f.kind.describe(),
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Check every sealed pack (each record, its index, the pack's hash) and
/// every journal (each committed record; an unfinished tail is noted), and
/// what else sits in `packs/`.
fn packs_faults(
    layout: &Odb,
    report: &mut FsckReport,
    faults: &mut Vec<Fault>,
    present: &mut HashSet<ObjectId>,
    broken: &mut HashSet<ObjectId>,
) -> Result<()> {
    if let Some(packs) = layout.packs()? {
        let stems = crate::odb::sealed_stems(packs)?;
        let lone = crate::odb::lone_indexes(packs)?;
        for name in &lone {
            report.notes.push(format!(
                "{}: an index without its pack (left by a repack or gc that was stopped; the next `hel gc` removes it)",
                packs.child_path(name).display()
            ));
        }
        for e in packs.entries()? {
            let name = e.name.to_string_lossy().into_owned();
            let known = lone.contains(&name)
                || (e.kind == EntryKind::Dir && name == crate::layout::JOURNALS)
                || (e.kind == EntryKind::File
                    && (name
                        .strip_suffix(".pack")
                        .is_some_and(|s| stems.iter().any(|t| t == s))
                        || name
                            .strip_suffix(".idx")
                            .is_some_and(|s| stems.iter().any(|t| t == s))));
            if !known {
                faults.push(Fault::Stray {
                    path: packs.child_path(&name),
                    what: if e.kind == EntryKind::File {
                        "file not named like a pack or its index"
                    } else {
                        e.kind.describe()
                    },
                });
            }
        }
        for p in layout.index().all_sealed(layout).or_else(|e| {
            faults.push(Fault::Broken(e));
            Ok::<_, Error>(Vec::new())
        })? {
            let size = p.file.metadata().map(|m| m.len()).unwrap_or(0);
            report.bytes += size;
            if pack::hash_file(&p.file, &p.path)? != p.idx.pack_hash {
                faults.push(Fault::Broken(Error::DamagedRecord {
                    pack: p.path.clone(),
                    offset: 0,
                    id: None,
                    reason: "the pack's bytes do not hash to what its index says".into(),
                }));
            }
            let mut at = FILE_HEADER;
            let mut records = 0usize;
            let mut fh = [0u8; FILE_HEADER as usize];
            use std::os::unix::fs::FileExt;
            if p.file.read_exact_at(&mut fh, 0).is_err()
                || pack::check_file_header(&fh, FileKind::Sealed).is_err()
            {
                at = size;
            }
            while at < size {
                let place = pack::Place {
                    path: p.path.clone(),
                    offset: at,
                };
                match pack::read_record(&p.file, &place, size, None) {
                    Ok((h, stored)) => {
                        records += 1;
                        report.objects += 1;
                        present.insert(h.id);
                        match p.idx.find(&h.id) {
                            Some(e) if e.offset == at && e.len == h.record_len() => {}
                            _ => faults.push(Fault::Broken(pack::damaged(
                                &place,
                                Some(&h.id),
                                "the pack's index does not list this record here",
                            ))),
                        }
                        if h.rtype != RecordType::Object {
                            faults.push(Fault::Broken(pack::damaged(
                                &place,
                                Some(&h.id),
                                "a sealed pack holds objects only",
                            )));
                        } else {
                            match object::decode(&h.id, &place.display_path(), &stored, Cap::ANY) {
                                Ok((kind, payload)) => {
                                    layout.memo_put(&h.id, kind, stored.len() as u64, payload, None)
                                }
                                Err(e) => {
                                    faults.push(Fault::Broken(e.into()));
                                    broken.insert(h.id);
                                }
                            }
                        }
                        at += h.record_len();
                    }
                    Err(e) => {
                        faults.push(Fault::Broken(e));
                        break;
                    }
                }
            }
            if records != p.idx.entries.len() {
                faults.push(Fault::Broken(Error::DamagedRecord {
                    pack: p.path.clone(),
                    offset: 0,
                    id: None,
                    reason: format!(
                        "its index lists {} records, the pack holds {records}",
                        p.idx.entries.len()
                    ),
                }));
            }
        }
    }
    journal_faults(layout, report, faults, present, broken)
}

/// Check every journal read from the journal itself (its sidecar ignored,
/// objects-spec §12.3), its head chosen by the store's rule (in format 3,
/// the ref's commit record): every record intact, every commit record
/// keeping the rules and agreeing with its snapshot, each object once,
/// every object decoding, also those past the committed part; what
/// follows the committed part a torn tail or one unpublished commit (a
/// note: the next commit cuts it), a journal without a ref a note (gc
/// removes it). Sidecars must be regular files.
fn journal_faults(
    layout: &Odb,
    report: &mut FsckReport,
    faults: &mut Vec<Fault>,
    present: &mut HashSet<ObjectId>,
    broken: &mut HashSet<ObjectId>,
) -> Result<()> {
    let Some(dir) = layout.journals()? else {
        return Ok(());
    };
    for e in dir.entries()? {
        let name = e.name.to_string_lossy().into_owned();
        if name.ends_with(&format!(".{}", journal::JIDX_EXT)) && e.kind != EntryKind::File {
            faults.push(Fault::Stray {
                path: dir.child_path(&name),
                what: e.kind.describe(),
            });
        }
    }
    let by_ref = layout.heads_are_refs();
    for session in heads::journals(layout)? {
        // The snapshots of this journal decoded so far: (session, summary).
        let mut snapshots = HashMap::new();
        // Every object record the journal's check read whole, decoded
        // there (which verifies its id) so it is read once: by offset,
        // its kind, or why it does not decode.
        // (With the order it was handed over in.)
        let mut decoded: HashMap<u64, (u64, std::result::Result<(), Error>)> = HashMap::new();
        // Every commit record the check parsed, by offset.
        let mut commits: HashMap<u64, journal::Commit> = HashMap::new();
        let path = dir.child_path(&journal::journal_name(&session));
        // A large journal's records are decoded (decompressed, hashed,
        // a snapshot parsed) on a second thread while this one goes on
        // reading and checking them: the decode is most of an fsck.
        let threaded = crate::par::threads() > 1
            && std::fs::symlink_metadata(&path).is_ok_and(|m| m.len() >= DECODE_ASIDE_FROM);
        let opened = std::thread::scope(|scope| {
            let (to_worker, queue) = std::sync::mpsc::sync_channel::<Batch>(DECODE_QUEUE);
            let (done_tx, done) = std::sync::mpsc::channel::<Vec<(u64, u64, Decoded)>>();
            let worker = threaded
                .then(|| {
                    let path = &path;
                    crate::par::spawn_scoped(scope, move || {
                        for batch in queue {
                            if done_tx.send(decode_batch(layout, path, batch)).is_err() {
                                break;
                            }
                        }
                    })
                    .ok()
                })
                .flatten();
            let to_worker = worker.as_ref().map(|_| to_worker);
            // A record handed over twice (the view read again) keeps the
            // outcome of its last handing, whichever thread decoded it.
            let mut take = |results: Vec<(u64, u64, Decoded)>| {
                for (seq, offset, (outcome, snapshot)) in results {
                    if let Some((id, of)) = snapshot {
                        snapshots.insert(id, of);
                    }
                    match decoded.get(&offset) {
                        Some((later, _)) if *later > seq => {}
                        _ => {
                            decoded.insert(offset, (seq, outcome));
                        }
                    }
                }
            };
            let mut batch: Batch = Vec::new();
            let mut batch_bytes = 0;
            let mut seq = 0u64;
            // Hand the batch to the decoding thread, or decode it here when
            // that thread is behind (or there is none): both cores decode.
            let hand = |batch: Batch, take: &mut dyn FnMut(Vec<(u64, u64, Decoded)>)| {
                let batch = match &to_worker {
                    Some(tx) => match tx.try_send(batch) {
                        Ok(()) => None,
                        Err(std::sync::mpsc::TrySendError::Full(b))
                        | Err(std::sync::mpsc::TrySendError::Disconnected(b)) => Some(b),
                    },
                    None => Some(batch),
                };
                if let Some(batch) = batch {
                    take(decode_batch(layout, &path, batch));
                }
                for results in done.try_iter() {
                    take(results);
                }
            };
            let mut on_record = |e: &journal::Entry, record: journal::Checked<'_>| match record {
                journal::Checked::Object(stored) => {
                    seq += 1;
                    batch_bytes += stored.len();
                    batch.push((seq, *e, stored));
                    if batch_bytes >= DECODE_BATCH {
                        batch_bytes = 0;
                        hand(std::mem::take(&mut batch), &mut take);
                    }
                }
                journal::Checked::Commit(c) => {
                    commits.insert(e.offset, c.clone());
                }
            };
            let mut seen: journal::Seen<'_> = Some(&mut on_record);
            let opened = if by_ref {
                refs::read(layout, &session).and_then(|first| {
                    journal::open_by_ref_seeing(
                        dir,
                        &session,
                        journal::Mode::Verify,
                        first,
                        &|| refs::read(layout, &session),
                        &mut seen,
                    )
                })
            } else {
                journal::open_seeing(
                    dir,
                    &session,
                    journal::Mode::Verify,
                    journal::Rule::LastCommit,
                    &mut seen,
                )
            };
            if !batch.is_empty() {
                take(decode_batch(layout, &path, batch));
            }
            drop(to_worker);
            if let Some(worker) = worker {
                worker
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p));
            }
            for results in done.iter() {
                take(results);
            }
            opened
        });
        let view = match opened {
            Ok(Some(v)) => v,
            Ok(None) => continue,
            Err(e) => {
                faults.push(Fault::Broken(e));
                continue;
            }
        };
        let size = view.file.metadata().map(|m| m.len()).unwrap_or(0);
        report.bytes += size;
        if view.fault_error().is_none() {
            if let Some(note) = journal::sidecar_note(dir, &view, size) {
                report.notes.push(note);
            }
        }
        match view.fault_error().or_else(|| view.newer_error()) {
            Some(e) => faults.push(Fault::Broken(e)),
            None if view.rule == journal::Rule::Ref(None) => report.notes.push(format!(
                "the journal of session {session} has no ref: an unpublished first commit or an interrupted delete (`hel gc` removes it, once what other sessions need of it is copied)"
            )),
            None if size > view.committed => report.notes.push(format!(
                "the journal of session {session} has {} bytes of an unfinished commit (or one that did not publish) after offset {} (the next commit cuts them)",
                size - view.committed,
                view.committed
            )),
            None => {}
        }
        // The records no ref publishes are checked too: gc copies from them.
        let aside = view
            .unpublished
            .iter()
            .map(|(id, (offset, len))| journal::Entry {
                id: *id,
                offset: *offset,
                len: *len,
                rtype: RecordType::Object,
            });
        let all: Vec<journal::Entry> = view.entries.iter().copied().chain(aside).collect();
        for e in &all {
            let place = pack::Place {
                path: view.path.clone(),
                offset: e.offset,
            };
            if e.rtype == RecordType::Commit {
                let commit = match commits.remove(&e.offset) {
                    Some(c) => Ok(c),
                    None => view.read_commit(e.offset),
                };
                match commit {
                    Ok(c) => {
                        if let Some(why) = commit_disagrees(layout, &session, &c, &snapshots) {
                            faults.push(Fault::Broken(Error::JournalFault {
                                path: view.path.clone(),
                                offset: e.offset,
                                reason: why,
                            }));
                        }
                    }
                    Err(err) => faults.push(Fault::Broken(err)),
                }
                continue;
            }
            // The check above read every record, and decoded those it
            // read whole; a larger one is read again here and decoded
            // (which verifies its id) without hashing its record again.
            let outcome = match decoded.remove(&e.offset) {
                Some((_, outcome)) => Some(outcome),
                None => {
                    let max = e.len.saturating_sub(RECORD_HEADER);
                    match crate::odb::read_found(&view.file, &place, e.len, &e.id, max) {
                        Ok(record) => Some(decode_record(
                            layout,
                            &e.id,
                            &place,
                            &record[RECORD_HEADER as usize..],
                            &mut snapshots,
                        )),
                        Err(err) => {
                            faults.push(Fault::Broken(err));
                            None
                        }
                    }
                }
            };
            if let Some(outcome) = outcome {
                report.objects += 1;
                present.insert(e.id);
                if let Err(err) = outcome {
                    faults.push(Fault::Broken(err));
                    broken.insert(e.id);
                }
            }
        }
    }
    Ok(())
}

/// Journals at least this large are decoded on a second thread (on a
/// machine of more than one core); below it, starting one costs about
/// what it saves. (The size is a hint, read without following a link:
/// the journal itself is opened as every read opens it.)
const DECODE_ASIDE_FROM: u64 = 1 << 20;

/// Batches handed to the decoding thread and not yet taken.
const DECODE_QUEUE: usize = 4;

/// Stored bytes of records handed over at once (one wake-up each).
const DECODE_BATCH: usize = 256 << 10;

/// Object records to decode: the order each was handed over in, its
/// entry, its stored bytes.
type Batch = Vec<(u64, journal::Entry, Vec<u8>)>;

/// [`decode_one`] of each record of `batch`, of the journal at `path`.
fn decode_batch(layout: &Odb, path: &std::path::Path, batch: Batch) -> Vec<(u64, u64, Decoded)> {
    batch
        .into_iter()
        .map(|(seq, e, stored)| {
            let place = pack::Place {
                path: path.to_path_buf(),
                offset: e.offset,
            };
            (seq, e.offset, decode_one(layout, &e.id, &place, &stored))
        })
        .collect()
}

/// What decoding one object record gave: its outcome, and a snapshot's
/// session and summary.
type Decoded = (
    std::result::Result<(), Error>,
    Option<(ObjectId, (SessionId, crate::snapshot::Summary))>,
);

/// Decode the stored bytes of object record `id` at `place` (which
/// verifies the id) and keep what the memo of fsck keeps; a snapshot's
/// session and summary come back too (what the journal's commit records
/// are checked against, without reading it again). Any thread may call it.
fn decode_one(layout: &Odb, id: &ObjectId, place: &pack::Place, stored: &[u8]) -> Decoded {
    let (kind, payload) = match object::decode(id, &place.display_path(), stored, Cap::ANY) {
        Ok(decoded) => decoded,
        Err(e) => return (Err(e.into()), None),
    };
    let mut parsed = None;
    let mut snapshot = None;
    if kind == Kind::Snapshot && payload.len() as u64 <= Cap::SNAPSHOT.max {
        if let Ok(cp) = crate::snapshot::Checkpoint::parse(&payload) {
            snapshot = Some((*id, (cp.session_id.clone(), cp.summary.clone())));
            parsed = Some(cp);
        }
    }
    layout.memo_put(id, kind, stored.len() as u64, payload, parsed);
    (Ok(()), snapshot)
}

/// [`decode_one`], noting the snapshot in `snapshots`.
fn decode_record(
    layout: &Odb,
    id: &ObjectId,
    place: &pack::Place,
    stored: &[u8],
    snapshots: &mut HashMap<ObjectId, (SessionId, crate::snapshot::Summary)>,
) -> std::result::Result<(), Error> {
    let (outcome, snapshot) = decode_one(layout, id, place, stored);
    if let Some((id, of)) = snapshot {
        snapshots.insert(id, of);
    }
    outcome
}

/// What a commit record `c` of `session` says that its snapshot does not:
/// its summary (listings show the commit record's), its session. `None`
/// when they agree, or when the snapshot cannot be read (the walk from the
/// heads reports that).
fn commit_disagrees(
    layout: &Odb,
    session: &SessionId,
    c: &journal::Commit,
    decoded: &HashMap<ObjectId, (SessionId, crate::snapshot::Summary)>,
) -> Option<String> {
    let read;
    let (cp_session, cp_summary) = match decoded.get(&c.head) {
        Some((s, summary)) => (s, summary),
        None => {
            read = crate::read::snapshot(layout, &c.head).ok()?;
            (&read.session_id, &read.summary)
        }
    };
    if *cp_summary != c.payload.summary {
        return Some(format!(
            "the commit record's summary ({}) is not its snapshot {}'s ({})",
            serde_json::to_string(&c.payload.summary).unwrap_or_default(),
            c.head,
            serde_json::to_string(cp_summary).unwrap_or_default()
        ));
    }
    // (A commit record's parent is the journal's previous head, not always
    // a parent of its snapshot: a pull publishes a snapshot whose history
    // came from elsewhere.)
    (cp_session != session).then(|| {
        format!(
            "the commit record publishes snapshot {} of session {}",
            c.head, cp_session
        )
    })
}

/// The list nodes and message blobs that the loads of step 4 will read
/// in one load only: those of one head's list and no other's (by the
/// shapes the walk read; an object the walk did not read is not here).
/// The load that reads one takes it from the memo rather than a copy, so
/// what the memo holds shrinks as the conversations are built; a shared
/// one stays for the next load.
fn read_by_one_load(
    layout: &Odb,
    heads: &[(SessionId, ObjectId)],
    shapes: &list::Shapes,
) -> HashSet<ObjectId> {
    let mut loads: HashMap<ObjectId, u32> = HashMap::new();
    // Each head as often as step 4 loads it (two refs on one snapshot:
    // its list is loaded twice).
    for (_, head) in heads {
        let Some(root) = crate::read::snapshot(layout, head)
            .ok()
            .and_then(|cp| cp.messages.root)
        else {
            continue;
        };
        // One head's list, each object once: a work list, not recursion
        // (a chain's depth is the store's to choose).
        let mut seen = HashSet::new();
        let mut todo = vec![root];
        while let Some(node) = todo.pop() {
            if !seen.insert(node) {
                continue;
            }
            let Some(shape) = shapes.nodes.get(&node) else {
                continue;
            };
            *loads.entry(node).or_default() += 1;
            for b in &shape.blobs {
                if seen.insert(*b) {
                    *loads.entry(*b).or_default() += 1;
                }
            }
            todo.extend(shape.prev);
            todo.extend(shape.slices.iter().map(|(src, _, _)| *src));
        }
    }
    loads
        .into_iter()
        .filter(|(_, n)| *n == 1)
        .map(|(id, _)| id)
        .collect()
}

/// Keeps the objects fsck's first pass decodes while it runs (see
/// [`Odb::set_memo`]): each record is then read, decompressed and hashed
/// once, however often the walk and the loads after it take it.
struct Memo<'a>(&'a Odb);

impl<'a> Memo<'a> {
    fn on(layout: &'a Odb) -> Memo<'a> {
        layout.set_memo(true);
        Memo(layout)
    }
}

impl Drop for Memo<'_> {
    fn drop(&mut self) {
        self.0.set_memo(false);
    }
}

/// Check the whole store (see the module doc for what "sound" means).
pub fn fsck(store: &Store) -> Result<FsckReport> {
    let Some(layout) = store.layout_for_gc()? else {
        return Ok(FsckReport::default());
    };
    let _memo = Memo::on(layout);
    fsck_with(store, layout)
}

fn fsck_with(store: &Store, layout: &Odb) -> Result<FsckReport> {
    let mut report = FsckReport::default();
    let mut faults: Vec<Fault> = Vec::new();
    // 0. The store's own directories are directories.
    for check in [
        layout.objects().map(|_| ()),
        layout.refs().map(|_| ()),
        layout.logs().map(|_| ()),
        layout.sessions().map(|_| ()),
        layout.tmp().map(|_| ()),
        layout.packs().map(|_| ()),
        layout.journals().map(|_| ()),
        layout.dependents_now().map(|_| ()),
        layout.recorded().map(|_| ()),
    ] {
        if let Err(e) = check {
            faults.push(Fault::Broken(e));
        }
    }
    if !faults.is_empty() {
        // Nothing further can be read safely.
        report.faults = faults;
        return Ok(report);
    }
    // 1. Every object file, and nothing else under objects/.
    let files = object_files(layout)?;
    for (path, what) in files.strays {
        faults.push(Fault::Stray { path, what });
    }
    let mut present: HashSet<ObjectId> = HashSet::new();
    let mut broken: HashSet<ObjectId> = HashSet::new();
    let stub = crate::layout::stub_object();
    for (id, _, _) in &files.objects {
        if *id == stub {
            // Store machinery for older readers (objects-spec §12.6).
            continue;
        }
        report.objects += 1;
        let path = layout.loose_path(id);
        let stored = std::fs::symlink_metadata(&path).map_or(0, |m| m.len());
        report.bytes += stored;
        present.insert(*id);
        match crate::read::loose(layout, id, Cap::ANY) {
            Ok((kind, payload)) => layout.memo_put(id, kind, stored, payload, None),
            Err(e) => {
                faults.push(Fault::Broken(e));
                broken.insert(*id);
            }
        }
    }
    // Sealed packs and journals: every record, and the indexes.
    packs_faults(layout, &mut report, &mut faults, &mut present, &mut broken)?;
    // 2. Refs, and everything they reach.
    let mut record = |e: Error| -> Result<()> {
        faults.push(Fault::Broken(e));
        Ok(())
    };
    let rooted = roots(layout, &mut record)?;
    let heads: Vec<(SessionId, ObjectId)> =
        rooted.iter().map(|(s, id, _)| (s.clone(), *id)).collect();
    // A ref whose snapshot does not read is named as such (the walk
    // below would only name the object).
    let mut unreadable: HashSet<ObjectId> = HashSet::new();
    for (session, head) in &heads {
        if let Err(e) = crate::read::snapshot(layout, head) {
            unreadable.insert(*head);
            faults.push(Fault::Broken(Error::RefUnloadable {
                path: layout.ref_path(session.as_str()),
                checkpoint: *head,
                source: Box::new(e),
            }));
        }
    }
    let mut record = |e: Error| -> Result<()> {
        // Objects that failed verification were reported above.
        let known = match &e {
            Error::Corrupt { id, .. } | Error::UnknownKind { id, .. } => {
                broken.contains(id) || unreadable.contains(id)
            }
            Error::Missing { id, .. } | Error::NewerSchema { id, .. } => unreadable.contains(id),
            _ => false,
        };
        if !known {
            faults.push(Fault::Broken(e));
        }
        Ok(())
    };
    report.refs = heads.len() as u64;
    let root_ids: Vec<ObjectId> = heads.iter().map(|(_, h)| *h).collect();
    let marked = mark(layout, &root_ids, &mut record)?;
    // Every snapshot's files flatten within what readers take, so that
    // a store called sound can always be diffed and restored.
    let extents = crate::read::check_roots(layout, &marked.workspace_roots, &mut record)?;
    // A record cannot have failed to record more paths than its tree
    // lists as not tracked (objects-spec §13.2, `not_tracked`).
    for (snapshot, tree, says) in &marked.not_tracked {
        if let Some(extent) = extents.known(tree) {
            if *says > extent.not_tracked {
                faults.push(Fault::Broken(Error::Corrupt {
                    id: *snapshot,
                    path: layout.object_path(snapshot),
                    reason: format!(
                        "malformed snapshot: workspace.not_tracked is {says}, its tree has {} not-tracked entries",
                        extent.not_tracked
                    ),
                }));
            }
        }
    }
    for id in &marked.reachable {
        if !present.contains(id) && !unreadable.contains(id) {
            faults.push(Fault::Broken(Error::Missing {
                id: *id,
                path: layout.object_path(id),
            }));
        }
    }
    // 4 (first half). Every session's newest checkpoint is checked as a
    // load checks it, without holding its conversation
    // (`Store::check_covering`, `Ok` exactly when a load is): that
    // validates every node it expands and every message blob those name
    // as step 3 would, so step 3 skips what a check that succeeded
    // covered (one that fails is loaded in step 4, which tells why).
    let mut loaded: HashMap<ObjectId, SessionId> = HashMap::new();
    let mut covered = list::Covered::default();
    if faults.is_empty() {
        layout.memo_read_last(read_by_one_load(layout, &heads, &marked.shapes));
        for (_, head) in &heads {
            if let Ok((owner, c)) = store.check_covering(head) {
                loaded.insert(*head, owner);
                covered.nodes.extend(c.nodes);
                covered.blobs.extend(c.blobs);
            }
        }
    }
    // 3. Messages and JSON blobs, each once.
    let mut blobs_to_check: HashSet<ObjectId> = marked
        .message_blobs
        .difference(&covered.blobs)
        .copied()
        .collect();
    for node in marked.shapes.nodes.keys() {
        if covered.nodes.contains(node) {
            continue;
        }
        match list::validate_node_messages(layout, node) {
            Ok(blobs) => blobs_to_check.extend(blobs),
            Err(e) => faults.push(Fault::Broken(e)),
        }
    }
    for b in &blobs_to_check {
        if present.contains(b) && !broken.contains(b) && !covered.blobs.contains(b) {
            if let Err(e) = list::validate_blob_message(layout, b) {
                faults.push(Fault::Broken(e));
            }
        }
    }
    for (blob, cap) in &marked.json_blobs {
        if !present.contains(blob) || broken.contains(blob) {
            continue;
        }
        let parsed = crate::read::of_kind(layout, blob, Kind::Blob, *cap).and_then(|bytes| {
            serde_json::from_slice::<serde_json::Value>(&bytes).map_err(|e| Error::Corrupt {
                id: *blob,
                path: layout.object_path(blob),
                reason: format!("{} is not JSON: {e}", cap.what),
            })
        });
        if let Err(e) = parsed {
            faults.push(Fault::Broken(e));
        }
    }
    // Every spill blob is as long as the snapshots naming it say.
    for (blob, size) in &marked.spill {
        if !present.contains(blob) || broken.contains(blob) {
            continue;
        }
        if let Err(e) = crate::store::check_spill_size(layout, blob, *size) {
            faults.push(Fault::Broken(e));
        }
    }
    // 4. Every session's newest checkpoint loads whole (pairing, limits).
    let clean = faults.is_empty();
    for (session, head) in &heads {
        if clean {
            // Loaded whole above, or loaded now to tell why not.
            let owner = match loaded.get(head) {
                Some(owner) => Some(owner.clone()),
                None => match store.load(head) {
                    Err(e) => {
                        faults.push(Fault::Broken(Error::RefUnloadable {
                            path: layout.ref_path(session.as_str()),
                            checkpoint: *head,
                            source: Box::new(e),
                        }));
                        None
                    }
                    Ok(l) => Some(l.checkpoint.session_id),
                },
            };
            if let Some(owner) = owner {
                if owner != *session {
                    faults.push(Fault::Broken(Error::BadRef {
                        session: session.to_string(),
                        path: layout.ref_path(session.as_str()),
                        reason: refs::RefError::OtherSession {
                            checkpoint: Box::new(*head),
                            owner,
                        },
                    }));
                }
            }
        }
        // In format 3 the journal is the log once there is one: the
        // ref log a format-1 hel kept stops where it starts.
        let journaled = layout.heads_are_refs()
            && match layout.journals()? {
                Some(d) => d.kind_of(&journal::journal_name(session))?.is_some(),
                None => false,
            };
        if journaled {
            continue;
        }
        if let Ok(Some(logged)) = refs::last_logged(layout, session) {
            if logged != *head {
                report.notes.push(format!(
                    "the ref log of session {session} misses its last move (logged {}, ref {})",
                    &logged.to_hex()[..12],
                    &head.to_hex()[..12]
                ));
            }
        }
    }
    // The stub that makes a format-1 hel refuse this store.
    if layout.heads_are_refs() {
        if let Some(e) = crate::refs::stub_missing(layout)? {
            faults.push(Fault::Broken(e));
        }
    }
    // Every dependency of a recorded session is recorded (format 4): a
    // delete reads only the heads these records name.
    if layout.records_dependents() {
        // The store lock: a regular file inside the directory
        // `.store.lock` (where anything else makes every write refuse).
        let root = layout.root();
        match layout.store_lock_dir() {
            Ok(Some(d)) => match d.kind_of(crate::layout::STORE_LOCK_FILE)? {
                Some(crate::dir::Kind::File) | None => {}
                Some(kind) => faults.push(Fault::Stray {
                    path: d.child_path(crate::layout::STORE_LOCK_FILE),
                    what: kind.describe(),
                }),
            },
            Ok(None) => {
                if let Some(kind) = root.kind_of(crate::layout::STORE_LOCK)? {
                    if kind != crate::dir::Kind::File {
                        faults.push(Fault::Stray {
                            path: root.child_path(crate::layout::STORE_LOCK),
                            what: kind.describe(),
                        });
                    }
                }
            }
            Err(e) => faults.push(Fault::Broken(e)),
        }
        let with_deps: Vec<(SessionId, std::collections::BTreeSet<SessionId>)> = rooted
            .iter()
            .map(|(s, _, d)| (s.clone(), d.clone()))
            .collect();
        let journals: std::collections::BTreeSet<SessionId> =
            heads::journals(layout)?.into_iter().collect();
        for (path, what) in crate::dependents::strays(layout)? {
            faults.push(Fault::Stray { path, what });
        }
        for m in crate::dependents::missing(layout, &with_deps, &journals)? {
            faults.push(Fault::Broken(Error::DependentsRecordMissing {
                path: crate::dependents::path_of(layout, &m),
                session: m.session.to_string(),
                dep: m.dep.to_string(),
            }));
        }
    }
    // 5. Session working directories, names and tmp/.
    sessions_dir_faults(layout, &mut faults)?;
    match crate::names::read(layout) {
        Ok(names) => {
            for (id, name) in names {
                if !store.knows(&id)? {
                    report.notes.push(format!(
                        "the name {name:?} names session {id}, which does not exist (`hel gc` forgets it)"
                    ));
                }
            }
        }
        Err(e) => faults.push(Fault::Broken(e)),
    }
    // The listing hint: reported when damaged, never a fault.
    if let Some(note) = crate::summaries::check(layout) {
        report.notes.push(note);
    }
    report.tmp_files = match layout.tmp()? {
        Some(tmp) => tmp.entries()?.len() as u64,
        None => 0,
    };
    if faults.is_empty() {
        report.unreachable = Some(
            present
                .iter()
                .filter(|id| !marked.reachable.contains(id))
                .count() as u64,
        );
    }
    // A missing object may be reported both by the walk and above.
    let mut seen = HashSet::new();
    faults.retain(|f| seen.insert(f.to_string()));
    report.faults = faults;
    Ok(report)
}

/// The store of `project_dir` as it is, not upgraded, for
/// [`fsck`] of a store of an older format that [`Store::open`]
/// refused to upgrade (a journal with a fault, a lease held): it is
/// checked by its own format's rules, and nothing is written.
pub fn open_in_place(project_dir: &std::path::Path) -> Result<Store> {
    let project = crate::dir::Dir::open_path(project_dir)?;
    let layout = crate::layout::Layout::open_in_place(&project)?.map(Odb::new);
    Ok(Store::with(project, layout, crate::Limits::default()))
}
