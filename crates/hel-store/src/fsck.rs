//! `fsck`: verify every object and everything the refs reach.
//!
//! The contract (objects-spec §9): the store is reported sound only when
//! every object file verifies, nothing but hel's own files sits where hel
//! keeps them, every ref names a snapshot, everything reachable reads and
//! validates exactly as a load validates it, and every session's newest
//! checkpoint loads whole. When anything is wrong, the faults are listed
//! (each naming the object or path) and no garbage is reported: what is
//! unreachable cannot be known while something reachable is unreadable.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;

use crate::dir::Kind as EntryKind;
use crate::gc::{mark, roots, Marked};
use crate::journal;
use crate::layout::{LEASE, SPILL};
use crate::object::{self, Cap, Kind};
use crate::odb::Odb;
use crate::oplog::FUTURE_SLACK_MS;
use crate::pack::{self, FileKind, RecordType, FILE_HEADER, RECORD_HEADER};
use crate::trashed::{self, now_ms};
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

/// What fsck has found so far: the report, the faults, and the objects
/// stored (each record verified) and those that failed verification.
struct Check<'a> {
    layout: &'a Odb,
    report: FsckReport,
    faults: Vec<Fault>,
    present: HashSet<ObjectId>,
    broken: HashSet<ObjectId>,
}

/// A snapshot's session and summary, by its id: what the journal's
/// commit records are checked against, without reading it again.
type Snapshots = HashMap<ObjectId, (SessionId, crate::snapshot::Summary)>;

impl<'a> Check<'a> {
    fn broken(&mut self, e: Error) {
        self.faults.push(Fault::Broken(e));
    }

    fn stray(&mut self, path: PathBuf, what: &'static str) {
        self.faults.push(Fault::Stray { path, what });
    }

    /// An object record that verified (`outcome` `Ok`) or did not.
    fn object(&mut self, id: ObjectId, outcome: std::result::Result<(), Error>) {
        self.report.objects += 1;
        self.present.insert(id);
        if let Err(e) = outcome {
            self.broken(e);
            self.broken.insert(id);
        }
    }

    /// Step 0: the store's own directories are directories (`false`:
    /// nothing further can be read safely).
    fn dirs_are_dirs(&mut self) -> bool {
        let layout = self.layout;
        for check in [
            layout.refs().map(|_| ()),
            layout.sessions().map(|_| ()),
            layout.tmp().map(|_| ()),
            layout.packs().map(|_| ()),
            layout.journals().map(|_| ()),
            layout.dependents_now().map(|_| ()),
            layout.recorded().map(|_| ()),
        ] {
            if let Err(e) = check {
                self.broken(e);
            }
        }
        self.faults.is_empty()
    }

    /// Step 1: every sealed pack (each record, its index, the pack's
    /// hash), and what else sits in `packs/`.
    fn packs(&mut self) -> Result<()> {
        let layout = self.layout;
        let Some(packs) = layout.packs()? else {
            return Ok(());
        };
        self.pack_strays(packs)?;
        let sealed = match layout.index().all_sealed(layout) {
            Ok(sealed) => sealed,
            Err(e) => {
                self.broken(e);
                Vec::new()
            }
        };
        for p in sealed {
            self.sealed(&p)?;
        }
        Ok(())
    }

    /// Entries of `packs/` that are not a pack, its index, or the
    /// journals' directory; an index without its pack is a note.
    fn pack_strays(&mut self, packs: &crate::dir::Dir) -> Result<()> {
        let stems = crate::odb::sealed_stems(packs)?;
        let lone = crate::odb::lone_indexes(packs)?;
        for name in &lone {
            self.report.notes.push(format!(
                "{}: an index without its pack (left by a repack or gc that was stopped; the next `hel gc` removes it)",
                packs.child_path(name).display()
            ));
        }
        let of_a_pack = |name: &str, ext: &str| {
            name.strip_suffix(ext)
                .is_some_and(|s| stems.iter().any(|t| t == s))
        };
        for e in packs.entries()? {
            let name = e.name.to_string_lossy().into_owned();
            let known = lone.contains(&name)
                || (e.kind == EntryKind::Dir && name == crate::layout::JOURNALS)
                || (e.kind == EntryKind::File
                    && (of_a_pack(&name, ".pack") || of_a_pack(&name, ".idx")));
            if !known {
                self.stray(
                    packs.child_path(&name),
                    if e.kind == EntryKind::File {
                        "file not named like a pack or its index"
                    } else {
                        e.kind.describe()
                    },
                );
            }
        }
        Ok(())
    }

    /// Sealed pack `p`: its hash, each record (listed by its index where
    /// it is, an object, decoding), as many records as its index lists.
    fn sealed(&mut self, p: &crate::odb::Sealed) -> Result<()> {
        let size = p.file.metadata().map(|m| m.len()).unwrap_or(0);
        self.report.bytes += size;
        if pack::hash_file(&p.file, &p.path)? != p.idx.pack_hash {
            self.broken(damaged_pack(
                p,
                "the pack's bytes do not hash to what its index says".into(),
            ));
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
            let (h, stored) = match pack::read_record(&p.file, &place, size, None) {
                Ok(read) => read,
                Err(e) => {
                    self.broken(e);
                    break;
                }
            };
            records += 1;
            match p.idx.find(&h.id) {
                Some(e) if e.offset == at && e.len == h.record_len() => {}
                _ => self.broken(pack::damaged(
                    &place,
                    Some(&h.id),
                    "the pack's index does not list this record here",
                )),
            }
            if h.rtype != RecordType::Object {
                self.report.objects += 1;
                self.present.insert(h.id);
                self.broken(pack::damaged(
                    &place,
                    Some(&h.id),
                    "a sealed pack holds objects only",
                ));
            } else {
                let outcome = decode_one(self.layout, &h.id, &place, &stored).0;
                self.object(h.id, outcome);
            }
            at += h.record_len();
        }
        if records != p.idx.entries.len() {
            self.broken(damaged_pack(
                p,
                format!(
                    "its index lists {} records, the pack holds {records}",
                    p.idx.entries.len()
                ),
            ));
        }
        Ok(())
    }

    /// Step 1, journals: each read from the journal itself (its sidecar
    /// ignored, objects-spec §5.4), its head the ref's commit record:
    /// every record intact, every commit record keeping the rules and
    /// agreeing with its snapshot, each object once, every object
    /// decoding, also those past the committed part; what follows the
    /// committed part a torn tail (a note: the next commit cuts it), a ref
    /// one commit behind a note (the commit past it is published), a
    /// journal without a ref a note (gc removes it). Sidecars must be
    /// regular files.
    fn journals(&mut self) -> Result<()> {
        let layout = self.layout;
        let Some(dir) = layout.journals()? else {
            return Ok(());
        };
        for e in dir.entries()? {
            let name = e.name.to_string_lossy().into_owned();
            if name.ends_with(&format!(".{}", journal::JIDX_EXT)) && e.kind != EntryKind::File {
                self.stray(dir.child_path(&name), e.kind.describe());
            }
        }
        for session in heads::journals(layout)? {
            let mut read = JournalRead::default();
            match read.open(layout, dir, &session) {
                Ok(Some(view)) => {
                    self.journal_state(dir, &session, &view);
                    self.journal_records(&session, &view, read);
                }
                Ok(None) => {}
                Err(e) => self.broken(e),
            }
        }
        Ok(())
    }

    /// What the journal `view` of `session` is as a whole: a fault, or
    /// notes (a sidecar that lags, no ref, an unfinished commit or round
    /// records).
    fn journal_state(&mut self, dir: &crate::dir::Dir, session: &SessionId, view: &journal::View) {
        let size = view.file.metadata().map(|m| m.len()).unwrap_or(0);
        self.report.bytes += size;
        if view.fault_error().is_none() {
            if let Some(note) = journal::sidecar_note(dir, view, size) {
                self.report.notes.push(note);
            }
        }
        if let (None, Some(from), Some(head)) = (view.fault_error(), view.behind, &view.head) {
            self.report.notes.push(format!(
                "the session's ref refs/sessions/{session} names snapshot {from}, one commit behind its journal {}, whose last commit record publishes {} (a crash between the journal's sync and the ref's move, or a ref moved back): read as published, and the session's next commit moves the ref",
                view.path.display(),
                head.head
            ));
        }
        match view.fault_error().or_else(|| view.newer_error()) {
            Some(e) => self.broken(e),
            None if view.rule == journal::Rule::Ref(None) => self.report.notes.push(format!(
                "the journal of session {session} has no ref: an unpublished first commit or an interrupted delete (`hel gc` removes it, once what other sessions need of it is copied)"
            )),
            None if size > view.committed => self.report.notes.push(format!(
                "the journal of session {session} has {} bytes of an unfinished commit, or of the round records of an instruction cut off, after offset {} (a resume carries the rounds; the next commit cuts them)",
                size - view.committed,
                view.committed
            )),
            None => {}
        }
    }

    /// Every record of journal `view` (and those no ref publishes: gc
    /// copies from them): commit records agree with their snapshots,
    /// objects decode (taken from what `read` decoded while reading, else
    /// read again here: a record too large to be handed over).
    fn journal_records(
        &mut self,
        session: &SessionId,
        view: &journal::View,
        mut read: JournalRead,
    ) {
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
            if e.rtype == RecordType::Commit {
                let commit = match read.commits.remove(&e.offset) {
                    Some(c) => Ok(c),
                    None => view.read_commit(e.offset),
                };
                match commit {
                    Ok(c) => {
                        if let Some(why) =
                            commit_disagrees(self.layout, session, &c, &read.snapshots)
                        {
                            self.broken(Error::JournalFault {
                                path: view.path.clone(),
                                offset: e.offset,
                                reason: why,
                            });
                        }
                    }
                    Err(err) => self.broken(err),
                }
                continue;
            }
            let outcome = match read.decoded.remove(&e.offset) {
                Some(outcome) => outcome,
                None => match read.decode_again(self.layout, view, e) {
                    Ok(outcome) => outcome,
                    Err(err) => {
                        self.broken(err);
                        continue;
                    }
                },
            };
            self.object(e.id, outcome);
        }
    }
}

/// A fault of sealed pack `p` as a whole.
fn damaged_pack(p: &crate::odb::Sealed, reason: String) -> Error {
    Error::DamagedRecord {
        pack: p.path.clone(),
        offset: 0,
        id: None,
        reason,
    }
}

/// What the check of one journal read: each object record it read whole,
/// decoded there (which verifies its id) so it is read once, by offset
/// (a record handed over twice, the view read again, keeps its last
/// outcome); each commit record it parsed, by offset; the snapshots
/// decoded so far.
#[derive(Default)]
struct JournalRead {
    decoded: HashMap<u64, std::result::Result<(), Error>>,
    commits: HashMap<u64, journal::Commit>,
    snapshots: Snapshots,
}

impl JournalRead {
    /// Open `session`'s journal in `dir` by its ref, checking every
    /// record ([`journal::Mode::Verify`]) and decoding each object record
    /// as it is handed over.
    fn open(
        &mut self,
        layout: &Odb,
        dir: &crate::dir::Dir,
        session: &SessionId,
    ) -> Result<Option<journal::View>> {
        let path = dir.child_path(&journal::journal_name(session));
        let mut on_record = |e: &journal::Entry, record: journal::Checked<'_>| match record {
            journal::Checked::Object(stored) => {
                let place = pack::Place {
                    path: path.clone(),
                    offset: e.offset,
                };
                let outcome = decode_into(layout, &e.id, &place, &stored, &mut self.snapshots);
                self.decoded.insert(e.offset, outcome);
            }
            journal::Checked::Commit(c) => {
                self.commits.insert(e.offset, c.clone());
            }
        };
        let mut seen: journal::Seen<'_> = Some(&mut on_record);
        // A session in the trash: its entry's head (objects-spec §8.2).
        let by_ref = || -> Result<Option<ObjectId>> {
            Ok(refs::read(layout, session)?.or_else(|| crate::odb::published(layout, session)))
        };
        let first = by_ref()?;
        journal::open_by_ref_seeing(
            dir,
            session,
            journal::Mode::Verify,
            first,
            &by_ref,
            &mut seen,
        )
    }

    /// Read object record `e` of `view` again and decode it (which
    /// verifies its id) without hashing its record again: one too large
    /// to be handed over while the journal was checked.
    fn decode_again(
        &mut self,
        layout: &Odb,
        view: &journal::View,
        e: &journal::Entry,
    ) -> Result<std::result::Result<(), Error>> {
        let place = pack::Place {
            path: view.path.clone(),
            offset: e.offset,
        };
        let max = e.len.saturating_sub(RECORD_HEADER);
        let record = crate::odb::read_found(&view.file, &place, e.len, &e.id, max)?;
        Ok(decode_into(
            layout,
            &e.id,
            &place,
            &record[RECORD_HEADER as usize..],
            &mut self.snapshots,
        ))
    }
}

/// What decoding one object record gave: its outcome, and a snapshot's
/// session and summary.
type Decoded = (
    std::result::Result<(), Error>,
    Option<(ObjectId, (SessionId, crate::snapshot::Summary))>,
);

/// Decode the stored bytes of object record `id` at `place` (which
/// verifies the id) and keep what the memo of fsck keeps; a snapshot's
/// session and summary come back too.
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
fn decode_into(
    layout: &Odb,
    id: &ObjectId,
    place: &pack::Place,
    stored: &[u8],
    snapshots: &mut Snapshots,
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
    decoded: &Snapshots,
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

/// The heads fsck walks from: each session and the snapshot its ref names.
type Heads = [(SessionId, ObjectId)];

/// fsck's steps, in order: 0. the store's directories; 1. every record
/// of every pack and journal; 2. the refs and everything they reach;
/// 4 (first half). each head checked as a load checks it; 3. messages
/// and JSON blobs the loads did not cover, each once; 4. each head that
/// did not check loaded to tell why; then the store lock, the dependents
/// records, the working directories, names and `tmp/`.
fn fsck_with(store: &Store, layout: &Odb) -> Result<FsckReport> {
    let mut c = Check {
        layout,
        report: FsckReport::default(),
        faults: Vec::new(),
        present: HashSet::new(),
        broken: HashSet::new(),
    };
    if !c.dirs_are_dirs() {
        c.report.faults = c.faults;
        return Ok(c.report);
    }
    c.packs()?;
    c.journals()?;
    let mut record = |e: Error| -> Result<()> {
        c.faults.push(Fault::Broken(e));
        Ok(())
    };
    let rooted = roots(layout, &mut record)?;
    if let Err(e) = crate::gc::refs_present(layout) {
        c.broken(e);
    }
    let heads: Vec<(SessionId, ObjectId)> =
        rooted.iter().map(|(s, id, _)| (s.clone(), *id)).collect();
    let marked = c.walk(&heads)?;
    let (loaded, covered) = c.check_loads(store, &heads, &marked);
    c.messages(&marked, &covered);
    c.heads_load(store, &heads, &loaded);
    c.store_lock()?;
    let with_deps: Vec<(SessionId, BTreeSet<SessionId>)> =
        rooted.into_iter().map(|(s, _, d)| (s, d)).collect();
    c.dependents(&with_deps)?;
    c.sessions_and_names(store)?;
    trash_check(layout, &mut c.faults, &mut c.report.notes)?;
    let mut marked = marked;
    let oplog = crate::opundo::faults(layout, &mut marked.reachable, |ids| {
        Ok(mark(layout, ids, &mut |e| Err(e))?.reachable)
    })?;
    c.faults.extend(oplog.into_iter().map(Fault::Broken));
    Ok(c.finish(&marked))
}

impl Check<'_> {
    /// Step 2: a ref whose snapshot does not read is named as such (the
    /// walk would only name the object); then everything the heads
    /// reach, the files of every snapshot within what readers take, and
    /// every reachable object stored. Returns what the walk found.
    fn walk(&mut self, heads: &Heads) -> Result<Marked> {
        let layout = self.layout;
        let mut unreadable: HashSet<ObjectId> = HashSet::new();
        for (session, head) in heads {
            if let Err(e) = crate::read::snapshot(layout, head) {
                unreadable.insert(*head);
                self.broken(Error::RefUnloadable {
                    path: layout.ref_path(session.as_str()),
                    checkpoint: *head,
                    source: Box::new(e),
                });
            }
        }
        let (broken, faults) = (&self.broken, &mut self.faults);
        let mut record = |e: Error| -> Result<()> {
            // Objects that failed verification were reported above.
            let known = match &e {
                Error::Corrupt { id, .. } | Error::UnknownKind { id, .. } => {
                    broken.contains(id) || unreadable.contains(id)
                }
                Error::Missing { id, .. } | Error::NewerSchema { id, .. } => {
                    unreadable.contains(id)
                }
                _ => false,
            };
            if !known {
                faults.push(Fault::Broken(e));
            }
            Ok(())
        };
        self.report.refs = heads.len() as u64;
        let root_ids: Vec<ObjectId> = heads.iter().map(|(_, h)| *h).collect();
        let marked = mark(layout, &root_ids, &mut record)?;
        // Every snapshot's files flatten within what readers take, so
        // that a store called sound can always be diffed and restored.
        let extents = crate::read::check_roots(layout, &marked.workspace_roots, &mut record)?;
        self.not_tracked(&marked, &extents);
        for id in &marked.reachable {
            if !self.present.contains(id) && !unreadable.contains(id) {
                self.broken(Error::Missing {
                    id: *id,
                    path: layout.object_path(id),
                });
            }
        }
        Ok(marked)
    }

    /// A record cannot have failed to record more paths than its tree
    /// lists as not tracked (objects-spec §10.2, `not_tracked`).
    fn not_tracked(&mut self, marked: &Marked, extents: &crate::tree::Extents) {
        for (snapshot, tree, says) in &marked.not_tracked {
            if let Some(extent) = extents.known(tree) {
                if *says > extent.not_tracked {
                    self.broken(Error::Corrupt {
                        id: *snapshot,
                        path: self.layout.object_path(snapshot),
                        reason: format!(
                            "malformed snapshot: workspace.not_tracked is {says}, its tree has {} not-tracked entries",
                            extent.not_tracked
                        ),
                    });
                }
            }
        }
    }

    /// Step 4 (first half): with no fault so far, every session's newest
    /// checkpoint is checked as a load checks it, without holding its
    /// conversation (`Store::check_covering`, `Ok` exactly when a load
    /// is): that validates every node it expands and every message blob
    /// those name as step 3 would, so step 3 skips what a check that
    /// succeeded covered (one that fails is loaded in step 4, which tells
    /// why). Returns the heads that checked, with their owner, and what
    /// they covered.
    fn check_loads(
        &mut self,
        store: &Store,
        heads: &Heads,
        marked: &Marked,
    ) -> (HashMap<ObjectId, SessionId>, list::Covered) {
        let mut loaded: HashMap<ObjectId, SessionId> = HashMap::new();
        let mut covered = list::Covered::default();
        if !self.faults.is_empty() {
            return (loaded, covered);
        }
        let layout = self.layout;
        layout.memo_read_last(read_by_one_load(layout, heads, &marked.shapes));
        for (_, head) in heads {
            if let Ok((owner, c)) = store.check_covering(head) {
                loaded.insert(*head, owner);
                covered.nodes.extend(c.nodes);
                covered.blobs.extend(c.blobs);
            }
        }
        (loaded, covered)
    }

    /// Step 3: messages and JSON blobs, each once (those the loads did
    /// not cover), and every spill blob as long as the snapshots naming
    /// it say.
    fn messages(&mut self, marked: &Marked, covered: &list::Covered) {
        let layout = self.layout;
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
                Err(e) => self.broken(e),
            }
        }
        let readable = |c: &Check<'_>, b: &ObjectId| c.present.contains(b) && !c.broken.contains(b);
        for b in &blobs_to_check {
            if readable(self, b) && !covered.blobs.contains(b) {
                if let Err(e) = list::validate_blob_message(layout, b) {
                    self.broken(e);
                }
            }
        }
        for (blob, cap) in &marked.json_blobs {
            if !readable(self, blob) {
                continue;
            }
            let parsed = crate::read::of_kind(layout, blob, Kind::Blob, *cap).and_then(|bytes| {
                crate::json::check(&bytes, crate::json::Limits::STORED).map_err(|e| {
                    Error::Corrupt {
                        id: *blob,
                        path: layout.object_path(blob),
                        reason: format!("{} is not JSON: {e}", cap.what),
                    }
                })
            });
            if let Err(e) = parsed {
                self.broken(e);
            }
        }
        for (blob, size) in &marked.spill {
            if readable(self, blob) {
                if let Err(e) = crate::store::check_spill_size(layout, blob, *size) {
                    self.broken(e);
                }
            }
        }
        // A file's entry gives its blob's length, a symlink's its target's:
        // a restore refuses an entry that lies, so fsck names its tree.
        for ((blob, size), (tree, name)) in &marked.sized {
            if !readable(self, blob) {
                continue;
            }
            let len = match layout.memo_len(blob, Cap::FILE) {
                Some((Kind::Blob, len)) => len,
                _ => match crate::read::of_kind(layout, blob, Kind::Blob, Cap::FILE) {
                    Ok(bytes) => bytes.len() as u64,
                    Err(e) => {
                        self.broken(e);
                        continue;
                    }
                },
            };
            if len != *size {
                self.broken(Error::Corrupt {
                    id: *tree,
                    path: layout.object_path(tree),
                    reason: format!(
                        "malformed tree: entry \"{}\" says {size} bytes, its blob {blob} holds {len}",
                        String::from_utf8_lossy(name).escape_debug()
                    ),
                });
            }
        }
    }

    /// Step 4: with no fault so far, every session's newest checkpoint
    /// loads whole (pairing, limits): checked above, or loaded now to
    /// tell why not; and it is the session's own.
    fn heads_load(&mut self, store: &Store, heads: &Heads, loaded: &HashMap<ObjectId, SessionId>) {
        if !self.faults.is_empty() {
            return;
        }
        let layout = self.layout;
        for (session, head) in heads {
            let owner = match loaded.get(head) {
                Some(owner) => owner.clone(),
                None => match store.load(head) {
                    Ok(l) => l.checkpoint.session_id,
                    Err(e) => {
                        self.broken(Error::RefUnloadable {
                            path: layout.ref_path(session.as_str()),
                            checkpoint: *head,
                            source: Box::new(e),
                        });
                        continue;
                    }
                },
            };
            if owner != *session {
                self.broken(Error::BadRef {
                    session: session.to_string(),
                    path: layout.ref_path(session.as_str()),
                    reason: refs::RefError::OtherSession {
                        checkpoint: Box::new(*head),
                        owner,
                    },
                });
            }
        }
    }

    /// The store lock: a directory `.store.lock` holding the regular file
    /// `lock` (anything else there makes every write refuse).
    fn store_lock(&mut self) -> Result<()> {
        let root = self.layout.root();
        match self.layout.store_lock_dir() {
            Ok(Some(d)) => match d.kind_of(crate::layout::STORE_LOCK_FILE)? {
                Some(EntryKind::File) | None => {}
                Some(kind) => self.stray(
                    d.child_path(crate::layout::STORE_LOCK_FILE),
                    kind.describe(),
                ),
            },
            Ok(None) => {
                if let Some(kind) = root.kind_of(crate::layout::STORE_LOCK)? {
                    self.stray(root.child_path(crate::layout::STORE_LOCK), kind.describe());
                }
            }
            Err(e) => self.broken(e),
        }
        Ok(())
    }

    /// Every dependency of a recorded session is recorded: a delete reads
    /// only the heads these records name (dependents.rs).
    fn dependents(&mut self, with_deps: &[(SessionId, BTreeSet<SessionId>)]) -> Result<()> {
        let layout = self.layout;
        let journals: BTreeSet<SessionId> = heads::journals(layout)?.into_iter().collect();
        for (path, what) in crate::dependents::strays(layout)? {
            self.stray(path, what);
        }
        for m in crate::dependents::missing(layout, with_deps, &journals)? {
            self.broken(Error::DependentsRecordMissing {
                path: crate::dependents::path_of(layout, &m),
                session: m.session.to_string(),
                dep: m.dep.to_string(),
            });
        }
        Ok(())
    }

    /// Step 5: session working directories, names, the listing hint
    /// (reported when damaged, never a fault) and `tmp/`.
    fn sessions_and_names(&mut self, store: &Store) -> Result<()> {
        let layout = self.layout;
        sessions_dir_faults(layout, &mut self.faults)?;
        match crate::names::read(layout) {
            Ok(names) => {
                for (id, name) in names {
                    if !store.knows(&id)? {
                        self.report.notes.push(format!(
                            "the name {name:?} names session {id}, which does not exist (`hel gc` forgets it)"
                        ));
                    }
                }
            }
            Err(e) => self.broken(e),
        }
        self.report
            .notes
            .extend(crate::summaries::check(layout, &|s| {
                crate::store::listed(layout, s.clone(), false)
            }));
        self.report.tmp_files = match layout.tmp()? {
            Some(tmp) => tmp.entries()?.len() as u64,
            None => 0,
        };
        Ok(())
    }

    /// The report: unreachable objects counted when there is no fault,
    /// each fault once (a missing object may be reported both by the
    /// walk and above).
    fn finish(mut self, marked: &Marked) -> FsckReport {
        if self.faults.is_empty() {
            self.report.unreachable = Some(
                self.present
                    .iter()
                    .filter(|id| !marked.reachable.contains(id))
                    .count() as u64,
            );
        }
        let mut seen = HashSet::new();
        self.faults.retain(|f| seen.insert(f.to_string()));
        self.report.faults = self.faults;
        self.report
    }
}

/// fsck's checks of the trash and the pins (objects-spec §15): each
/// entry's date (not in the future), that its head is its session's own
/// checkpoint, an entry beside a ref (a note: gc settles it); pins that
/// are empty regular files named by a session that is listed or in the
/// trash (else a note: gc removes it). What the entries' heads reach is
/// checked with the refs' (`gc::roots`), and so are the entries
/// themselves.
fn trash_check(
    layout: &Odb,
    faults: &mut Vec<crate::fsck::Fault>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let now = now_ms();
    // A trash/ that cannot be listed is reported by gc's roots.
    let listed = trashed::list(layout)
        .map(|l| l.sessions)
        .unwrap_or_default();
    for session in listed {
        let Ok(Some(entry)) = trashed::read(layout, &session) else {
            continue;
        };
        let path = trashed::path(layout, &session);
        if crate::refs::read(layout, &session).ok().flatten().is_some() {
            notes.push(format!(
                "{} is the trash entry of session {session}, which has a ref: a delete or an undelete that stopped half way (the session is listed; `hel gc` removes the entry)",
                path.display()
            ));
            continue;
        }
        if entry.deleted_ms > now.saturating_add(FUTURE_SLACK_MS) {
            faults.push(Fault::Broken(Error::BadTrash {
                path: path.clone(),
                reason: format!(
                    "it is dated in the future ({}), so it would never expire (write the time of the delete, or remove the entry to give the session up)",
                    entry.deleted_ms
                ),
            }));
        }
        if let Ok(Some(head)) = heads::read_trashed(layout, &session) {
            if let Err(e) = heads::owned(layout, &session, &head) {
                faults.push(Fault::Broken(Error::BadTrash {
                    path,
                    reason: e.to_string(),
                }));
            }
        }
    }
    let pins = match trashed::list_pins(layout) {
        Ok(p) => p,
        Err(e) => {
            faults.push(Fault::Broken(e));
            return Ok(());
        }
    };
    for (path, what) in pins.strays {
        faults.push(Fault::Stray { path, what });
    }
    for session in pins.sessions {
        match trashed::pinned(layout, &session) {
            Err(e) => faults.push(Fault::Broken(e)),
            Ok(_) => {
                let listed = crate::refs::read(layout, &session).ok().flatten().is_some();
                if !listed && !trashed::has_any(layout, &session)? {
                    notes.push(format!(
                        "session {session} is pinned but is neither listed nor in the trash (`hel gc` removes the pin)"
                    ));
                }
            }
        }
    }
    Ok(())
}
