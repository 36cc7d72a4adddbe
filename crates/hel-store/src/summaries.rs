//! The summary index `.hel/summaries` (objects-spec §5.9): what a listing
//! shows of each session, so that `hel sessions` reads each session's ref
//! and not its journal and snapshot.
//!
//! It is only a hint. An entry is keyed by its session, the snapshot the
//! ref names and the [`Stamp`]s of the ref file and of the journal, taken
//! before what the entry holds was read; it is used only while the ref
//! still names that snapshot and neither file has changed since (a commit
//! replaces the ref, any write to a journal changes its stamp). A
//! *settled* entry (both files' ctimes were [`SETTLE_MS`] older than the
//! listing that last read the ref and found the entry's snapshot, on a
//! file system that [`keeps change times`](hel_fs::Dir::keeps_change_times))
//! is used on the stamps alone, without reading the ref: any later change
//! of either file gives it a later ctime. A missing,
//! damaged (checksum, syntax, bounds) or stale entry is rebuilt from the
//! ref's commit record and snapshot, exactly as a listing without the index
//! reads them, and the file is rewritten (under `tmp/`, renamed over; never
//! synced). Nothing but a listing reads it: resume, log, fsck and gc read
//! the ref, the journal and the snapshot themselves.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::dir::Stamp;
use crate::layout::{Layout, SUMMARIES};
use crate::{Error, ObjectId, SessionId};
use std::sync::Arc;

/// The first line of the file.
const HEADER: &[u8] = b"hel-summaries 3\n";

/// How much older than a listing's start both files' ctimes must be for
/// the entry that listing checks to be settled: more than any local file
/// system's timestamp granularity (FAT's is 2 s, ext4's and tmpfs's a
/// clock tick), so that a change after the listing looked cannot be given
/// the ctime the entry holds.
const SETTLE_MS: i128 = 2_000;

/// The longest entry line (its checksum, JSON and newline): a commit
/// record's summary fits in 64 KiB and a snapshot's cwd in 4 KiB. A session
/// whose entry would be longer is listed without the index.
const ENTRY_MAX: usize = 72 << 10;

/// The largest index read (about 250,000 sessions of typical entries). A
/// larger file is taken as damaged, and not written again.
const FILE_MAX: u64 = 64 << 20;

/// Hex digits of an entry's checksum (the first 16 bytes of the BLAKE3 of
/// its JSON).
const CHECK_HEX: usize = 32;

/// One session's entry: the key, then what a listing shows. The fields
/// are in the order of their keys' bytes, so that serde_json's compact
/// output of an entry is its canonical JSON (section 3) with no detour
/// through a `Value` (a test holds the two equal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    checkpoints: u64,
    cwd: String,
    /// The first line of the session's first instruction ([`first_instruction`]).
    first: String,
    /// The snapshot the ref named.
    head: ObjectId,
    instruction: String,
    /// The journal's stamp (null: no journal).
    journal: Option<[u64; 4]>,
    messages: u64,
    /// At most one answer and no file changed ([`oldest`]).
    one_off: bool,
    /// The ref file's stamp.
    #[serde(rename = "ref")]
    ref_stamp: [u64; 4],
    session: SessionId,
    /// The stamps alone say the entry is fresh (see [`settled`]).
    settled: bool,
    time_ms: u64,
}

/// What [`Index::lookup`] read of a session, for [`Index::learn`].
struct Seen {
    session: SessionId,
    head: ObjectId,
    ref_stamp: Stamp,
    journal: Option<Stamp>,
    /// The stale entry's first instruction and checkpoints: a session's
    /// records only grow at its head, so its first instruction stays.
    first: Option<(String, u64)>,
}

/// What [`Index::probe`] took of one session.
#[derive(Debug, Default)]
pub(crate) struct Probe {
    /// The journal's stamp (inner `None`: no journal); `None` when it
    /// could not be taken.
    journal: Option<Option<Stamp>>,
    /// The ref file's stamp, taken only for a settled entry whose journal
    /// stamp is the one taken.
    settled_ref: Option<Stamp>,
}

/// The index as one listing reads and rewrites it.
pub(crate) struct Index {
    /// Entries read from the file, by session.
    old: HashMap<SessionId, Entry>,
    /// Entries of the sessions listed so far (the file to write).
    new: Vec<Entry>,
    /// The file must be written: entries were missing, damaged, stale or
    /// of sessions no longer listed.
    dirty: bool,
    /// The stamps read by the last lookup that found no fresh entry.
    seen: Option<Seen>,
    /// The wall clock when this listing began, before any stamp was taken.
    start_ms: i128,
    /// The refs and journals are on a file system whose stamps may stand
    /// for content ([`hel_fs::Dir::keeps_change_times`]).
    local: bool,
}

/// A stamp's ctime in milliseconds (its seconds are a signed count).
fn ctime_ms(s: &Stamp) -> i128 {
    (s.0[2] as i64 as i128) * 1000 + (s.0[3] as i128) / 1_000_000
}

/// Whether an entry whose ref and journal had these stamps when a listing
/// that began at `start_ms` read them (and found the entry's snapshot in
/// the ref) may later be used on its stamps alone: both ctimes at least
/// [`SETTLE_MS`] before the listing began. A file changed after that
/// listing looked gets a ctime of its clock then, later than the one held;
/// one changed within the clock's granularity of the listing's look could
/// keep its ctime, so such an entry stays unsettled (its ref is read) until
/// a later listing finds it settled.
fn settled(start_ms: i128, ref_stamp: &Stamp, journal: Option<&Stamp>) -> bool {
    let old = |s: &Stamp| ctime_ms(s) + SETTLE_MS <= start_ms;
    old(ref_stamp) && journal.is_none_or(old)
}

impl Index {
    /// The index of `layout`'s store as its file holds it. A file that is
    /// absent, not a regular file, too large or without the header holds
    /// no entries; a damaged entry is left out. Never an error: it is a hint.
    pub fn load(layout: &Layout) -> Index {
        let mut index = Index {
            old: HashMap::new(),
            new: Vec::new(),
            dirty: false,
            seen: None,
            // Before any stamp this listing takes.
            start_ms: crate::time::now_ms() as i128,
            local: false,
        };
        let local = |d: crate::Result<Option<&crate::dir::Dir>>| match d {
            Ok(Some(d)) => d.keeps_change_times(),
            Ok(None) => true,
            Err(_) => false,
        };
        index.local = local(layout.refs()) && local(layout.journals());
        let bytes = match layout.root().read_file(SUMMARIES, FILE_MAX) {
            Ok(Some(b)) => b,
            Ok(None) | Err(_) => {
                index.dirty = true;
                return index;
            }
        };
        let (old, damaged) = parse(&bytes);
        index.old = old;
        index.dirty = damaged;
        index
    }

    /// The stamps a [`Index::lookup`] of `session` needs, taken now: the
    /// journal's, then (only when the entry is settled and the journal's
    /// stamp is the entry's) the ref file's. Only stats, and `&self`: a
    /// listing takes them for many sessions at once (`par.rs`).
    pub fn probe(&self, layout: &Layout, session: &SessionId) -> Probe {
        let mut probe = Probe::default();
        // The journal's stamp before the ref's: what is read after both
        // (here or by the listing) is at least as new as they are.
        let journal = match layout.journals() {
            Ok(Some(dir)) => match dir.stamp(&crate::journal::journal_name(session)) {
                Ok(s) => s,
                Err(_) => return probe,
            },
            Ok(None) => None,
            Err(_) => return probe,
        };
        probe.journal = Some(journal);
        if let Some(e) = self.old.get(session) {
            if self.local && e.settled && e.journal.map(Stamp) == journal {
                probe.settled_ref = crate::refs::stamp(layout, session).ok().flatten();
            }
        }
        probe
    }

    /// `session`'s listing row from its entry, when the entry is fresh: the
    /// journal's and the ref file's stamps (`probe`, taken by
    /// [`Index::probe`]) are the entry's, and the entry is settled or the
    /// ref names the entry's snapshot. `None` otherwise (also when the ref
    /// cannot be read: the listing then says why).
    pub fn lookup(
        &mut self,
        layout: &Layout,
        session: &SessionId,
        probe: Probe,
        busy: bool,
    ) -> Option<SessionInfo> {
        self.seen = None;
        let entry = self.old.remove(session);
        // Whatever becomes of it, the file no longer holds the same entries.
        let dropped = |index: &mut Index, had: bool| {
            index.dirty |= had;
            None
        };
        let Some(journal) = probe.journal else {
            return dropped(self, entry.is_some());
        };
        if let (Some(e), Some(s)) = (entry.as_ref(), probe.settled_ref) {
            // One stat, no read: a settled stamp is the file's content.
            if s == Stamp(e.ref_stamp) {
                return Some(self.keep(entry?, busy));
            }
        }
        let (head, ref_stamp) = match crate::refs::read_stamped(layout, session) {
            Ok(Some(h)) => h,
            Ok(None) | Err(_) => return dropped(self, entry.is_some()),
        };
        match entry {
            Some(mut e)
                if e.head == head
                    && Stamp(e.ref_stamp) == ref_stamp
                    && e.journal.map(Stamp) == journal =>
            {
                let now = self.local && settled(self.start_ms, &ref_stamp, journal.as_ref());
                if now != e.settled {
                    e.settled = now;
                    self.dirty = true;
                }
                Some(self.keep(e, busy))
            }
            stale => {
                self.dirty |= stale.is_some();
                self.seen = Some(Seen {
                    session: session.clone(),
                    head,
                    ref_stamp,
                    journal,
                    first: stale
                        .filter(|e| !e.first.is_empty())
                        .map(|e| (e.first, e.checkpoints)),
                });
                None
            }
        }
    }

    /// The row of fresh entry `e`, which the file to write keeps.
    fn keep(&mut self, e: Entry, busy: bool) -> SessionInfo {
        let info = SessionInfo {
            id: e.session.clone(),
            busy,
            head: Some(e.head),
            updated_ms: e.time_ms,
            checkpoints: e.checkpoints,
            messages: e.messages,
            instruction: e.instruction.clone(),
            first: e.first.clone(),
            one_off: e.one_off,
            cwd: Some(e.cwd.clone()),
            future: false,
            shipped: false,
            broken: None,
        };
        self.new.push(e);
        info
    }

    /// Keep `info`, the row the listing just read without the index for
    /// the session of the last [`Index::lookup`], as its entry: when it is
    /// of the snapshot that lookup saw and whole (readable, with a cwd).
    /// Its first instruction is filled in: the stale entry's, or read from
    /// the session's oldest records ([`first_instruction`]) once.
    pub fn learn(&mut self, layout: &crate::odb::Odb, info: &mut SessionInfo) {
        let seen = self.seen.take();
        let (Some(head), None) = (info.head, &info.broken) else {
            return;
        };
        let carried = seen
            .as_ref()
            .filter(|s| s.session == info.id)
            .and_then(|s| s.first.as_ref())
            .filter(|(_, checkpoints)| *checkpoints <= info.checkpoints)
            .map(|(first, _)| first.clone());
        // A session of one answer is walked again (a few records) to
        // learn whether it changed files; a longer one is no one-off.
        match carried {
            Some(first) if info.checkpoints > 1 => info.first = first,
            _ => {
                let walked = oldest(layout, &info.id, head);
                info.first = walked.first;
                info.one_off = info.checkpoints <= 1 && !walked.changed;
            }
        }
        let (Some(seen), Some(cwd)) = (seen, &info.cwd) else {
            return;
        };
        if seen.session != info.id || seen.head != head {
            return;
        }
        self.dirty = true;
        let settled = self.local && settled(self.start_ms, &seen.ref_stamp, seen.journal.as_ref());
        self.new.push(Entry {
            settled,
            session: seen.session,
            head,
            ref_stamp: seen.ref_stamp.0,
            journal: seen.journal.map(|s| s.0),
            time_ms: info.updated_ms,
            checkpoints: info.checkpoints,
            messages: info.messages,
            instruction: info.instruction.clone(),
            first: info.first.clone(),
            one_off: info.one_off,
            cwd: cwd.clone(),
        });
    }

    /// Rewrite the file when anything changed: every entry of a listed
    /// session, by rename from `tmp/`, not synced. A failure is ignored
    /// (the next listing rebuilds what is missing).
    pub fn save(mut self, layout: &Layout) {
        // Entries of sessions that were not listed (deleted) are dropped.
        if !self.dirty && self.old.is_empty() {
            return;
        }
        self.new.sort_by(|a, b| a.session.cmp(&b.session));
        let bytes = encode(&self.new);
        if bytes.len() as u64 > FILE_MAX {
            return;
        }
        let _ = write(layout, &bytes);
    }
}

/// Records read at most looking for a session's first instruction.
const FIRST_WALK_MAX: usize = 100_000;

/// What [`oldest`] learned of a session's records.
pub(crate) struct Walked {
    /// The first line of its first instruction ("" when not known).
    pub first: String,
    /// A record of the session changed a file (its workspace's tree is
    /// not the one its instruction started from, or it restored files).
    pub changed: bool,
}

/// The first instruction of `session`, whose ref names `head`: the
/// instruction of its oldest record that has one, walking the records'
/// parents back (each snapshot read, verified), and whether any of its
/// records changed a file. A fork that has no instruction of its own yet
/// gives the one of the record it was forked at. `first` is "" when a
/// record cannot be read (a listing then shows the last instruction).
/// Done once per session: a listing keeps it in the session's entry, and
/// carries it to the next entry as the session's records grow.
pub(crate) fn oldest(layout: &crate::odb::Odb, session: &SessionId, head: ObjectId) -> Walked {
    let mut walked = Walked {
        first: String::new(),
        changed: false,
    };
    let mut next = Some(head);
    for _ in 0..FIRST_WALK_MAX {
        let Some(id) = next else { break };
        let Ok(cp) = crate::read::snapshot(layout, &id) else {
            walked.first = String::new();
            walked.changed = true;
            return walked;
        };
        if &cp.session_id != session {
            if walked.first.is_empty() {
                walked.first = cp.summary.instruction;
            }
            break;
        }
        if let Some(w) = &cp.workspace {
            walked.changed |= w.restored.is_some() || w.start.is_some_and(|s| s != w.tree);
        }
        if !cp.summary.instruction.is_empty() {
            walked.first = cp.summary.instruction;
        }
        next = cp.parents.first().copied();
    }
    walked
}

/// The file's bytes for `entries`.
fn encode(entries: &[Entry]) -> Vec<u8> {
    let mut out = HEADER.to_vec();
    for e in entries {
        let line = entry_line(e);
        if line.len() <= ENTRY_MAX {
            out.extend_from_slice(&line);
        }
    }
    out
}

/// One entry's line: the checksum of its canonical JSON, a space, the
/// JSON, a newline (canonical JSON never holds a raw newline).
fn entry_line(e: &Entry) -> Vec<u8> {
    let json = canonical(e);
    let mut line = checksum(&json).into_bytes();
    line.push(b' ');
    line.extend_from_slice(&json);
    line.push(b'\n');
    line
}

/// `e`'s canonical JSON (its fields are in canonical order).
fn canonical(e: &Entry) -> Vec<u8> {
    serde_json::to_vec(e).unwrap_or_default()
}

fn checksum(json: &[u8]) -> String {
    let hash = blake3::hash(json);
    let mut hex = hash.to_hex().to_string();
    hex.truncate(CHECK_HEX);
    hex
}

/// What fsck says of the index (nothing: absent, or sound): a damaged or
/// unreadable index, and each well-formed entry a listing would use as it
/// is (its stamps the files' now, and settled or naming what the ref
/// names) that says other than the ref's commit record and snapshot say
/// (objects-spec §5.9): a forged or damaged hint, shown by listings until
/// either file changes. Notes, never faults: the index is a hint, and
/// removing it is always safe. `row` reads a session's row as a listing
/// without the index reads it.
pub(crate) fn check(
    layout: &Layout,
    row: &dyn Fn(&SessionId) -> Option<SessionInfo>,
) -> Vec<String> {
    let path = layout.root().child_path(SUMMARIES);
    let bytes = match layout.root().read_file(SUMMARIES, FILE_MAX) {
        Ok(None) => return Vec::new(),
        Ok(Some(bytes)) => bytes,
        Err(e) => {
            return vec![format!(
                "the summary index cannot be read ({e}); it is not used, and the next listing replaces it"
            )]
        }
    };
    let (entries, damaged) = parse(&bytes);
    let mut notes = Vec::new();
    if damaged {
        notes.push(format!(
            "the summary index {} has damaged entries; they are not used, and the next listing rebuilds it",
            path.display()
        ));
    }
    let mut sessions: Vec<&SessionId> = entries.keys().collect();
    sessions.sort();
    for session in sessions {
        let e = &entries[session];
        if let Some(what) = disagrees(layout, e, row) {
            notes.push(format!(
                "the summary index {} says of session {session} {what}: a listing shows that until the session's ref or journal changes (remove the file; the next listing rebuilds it)",
                path.display()
            ));
        }
    }
    notes
}

/// What entry `e` says that its session's ref, commit record and
/// snapshot do not, when a listing would use it as it is; `None` when it
/// agrees, or is stale (a listing rebuilds it), or its session cannot be
/// read (fsck reports that itself).
fn disagrees(
    layout: &Layout,
    e: &Entry,
    row: &dyn Fn(&SessionId) -> Option<SessionInfo>,
) -> Option<String> {
    let journal = match layout.journals() {
        Ok(Some(dir)) => dir.stamp(&crate::journal::journal_name(&e.session)).ok()?,
        Ok(None) => None,
        Err(_) => return None,
    };
    let (head, ref_stamp) = crate::refs::read_stamped(layout, &e.session).ok()??;
    if journal.map(|s| s.0) != e.journal || ref_stamp.0 != e.ref_stamp {
        return None;
    }
    if !e.settled && head != e.head {
        return None;
    }
    let row = row(&e.session)?;
    if row.broken.is_some() {
        return None;
    }
    let show = |what: &str, says: String, is: String| {
        Some(format!(
            "{what} {says}, where its ref and commit record say {is}"
        ))
    };
    let head = row.head?;
    if head != e.head {
        return show("the head", e.head.to_hex(), head.to_hex());
    }
    if row.checkpoints != e.checkpoints {
        return show(
            "checkpoints",
            e.checkpoints.to_string(),
            row.checkpoints.to_string(),
        );
    }
    if row.messages != e.messages {
        return show("messages", e.messages.to_string(), row.messages.to_string());
    }
    if row.updated_ms != e.time_ms {
        return show("time_ms", e.time_ms.to_string(), row.updated_ms.to_string());
    }
    if row.instruction != e.instruction {
        return show(
            "the instruction",
            format!("{:?}", e.instruction),
            format!("{:?}", row.instruction),
        );
    }
    if row.cwd.as_deref() != Some(e.cwd.as_str()) {
        return show(
            "the cwd",
            format!("{:?}", e.cwd),
            format!("{:?}", row.cwd.unwrap_or_default()),
        );
    }
    None
}

/// The entries of an index file, and whether anything in it was damaged:
/// no header (then no entries), a line that is too long, fails its
/// checksum, is not an entry's canonical JSON, or names a session an
/// earlier line named (both are dropped).
fn parse(bytes: &[u8]) -> (HashMap<SessionId, Entry>, bool) {
    let mut out = HashMap::new();
    let Some(body) = bytes.strip_prefix(HEADER) else {
        return (out, true);
    };
    let mut damaged = false;
    let mut twice = Vec::new();
    // Each line is checked and parsed on its own (a BLAKE3, a parse and a
    // serialization back), so a long index is parsed on a few threads.
    let lines: Vec<&[u8]> = body.split_inclusive(|b| *b == b'\n').collect();
    for entry in crate::par::map(&lines, |line| parse_line(line)) {
        match entry {
            Some(e) => {
                if out.contains_key(&e.session) {
                    twice.push(e.session.clone());
                } else {
                    out.insert(e.session.clone(), e);
                }
            }
            None => damaged = true,
        }
    }
    for s in twice {
        out.remove(&s);
        damaged = true;
    }
    (out, damaged)
}

fn parse_line(line: &[u8]) -> Option<Entry> {
    if line.len() > ENTRY_MAX {
        return None;
    }
    let line = line.strip_suffix(b"\n")?;
    let (check, rest) = (line.get(..CHECK_HEX)?, line.get(CHECK_HEX..)?);
    let json = rest.strip_prefix(b" ")?;
    if check != &blake3::hash(json).to_hex().as_bytes()[..CHECK_HEX] {
        return None;
    }
    let e: Entry = serde_json::from_slice(json).ok()?;
    // Only the bytes this hel writes: one entry, one spelling.
    (canonical(&e) == json).then_some(e)
}

/// Write the index file: a new file under `tmp/`, renamed over.
fn write(layout: &Layout, bytes: &[u8]) -> crate::Result<()> {
    let tmp = layout.tmp_create()?;
    let name = format!("summaries-{}", uuid::Uuid::new_v4().simple());
    let mut f = tmp.new_file(&name, 0o600)?;
    f.write_all(bytes)?;
    Ok(f.persist(layout.root(), SUMMARIES)?)
}

/// A session as listings show it.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub id: SessionId,
    pub busy: bool,
    pub head: Option<ObjectId>,
    pub updated_ms: u64,
    pub checkpoints: u64,
    pub messages: u64,
    pub instruction: String,
    /// The first line of its first instruction ("" when not known: the
    /// listing then shows `instruction`). See [`first_instruction`].
    pub first: String,
    /// It has at most one answer and none of its records changed a file
    /// (a `-p` question, say): the picker lists it last.
    pub one_off: bool,
    /// The project directory its newest record was saved in (None: no
    /// checkpoint, or one that could not be read). A session whose
    /// directory is not the project's came from elsewhere (a `.hel/` that
    /// arrived with a repository, say).
    pub cwd: Option<String>,
    /// `updated_ms` is after the time of the listing: no record made here
    /// is, so it orders as the oldest (see [`crate::Store::sessions`]).
    pub future: bool,
    /// It arrived with a `.hel/` that was not made here (cloned, copied,
    /// moved from elsewhere; `crate::identity`): listed and readable, never
    /// chosen, pushed or restored from unless named or adopted.
    pub shipped: bool,
    /// Why the session's head or checkpoint could not be read, if it
    /// could not (shared, so that a listing stays cheap to clone).
    pub broken: Option<Arc<Error>>,
}

impl SessionInfo {
    pub(crate) fn broken(
        id: SessionId,
        busy: bool,
        head: Option<ObjectId>,
        e: Error,
    ) -> SessionInfo {
        SessionInfo {
            id,
            busy,
            head,
            updated_ms: 0,
            checkpoints: 0,
            messages: 0,
            instruction: String::new(),
            first: String::new(),
            one_off: false,
            cwd: None,
            future: false,
            shipped: false,
            broken: Some(Arc::new(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64, nanos: u64) -> Stamp {
        Stamp([7, 65, secs as u64, nanos])
    }

    #[test]
    fn an_entry_serializes_to_its_canonical_json() {
        let e = Entry {
            checkpoints: u64::MAX,
            cwd: "/p\u{7f}\u{1}\"\\é\u{2028}".into(),
            head: ObjectId::from_bytes([3; 32]),
            instruction: "tab\tnl\n\u{0}😀".into(),
            first: "\u{1b}[2J".into(),
            one_off: true,
            journal: None,
            messages: 0,
            ref_stamp: [u64::MAX, 65, 1, 2],
            session: "0190e4a0-0000-7000-8000-000000000001".parse().unwrap(),
            settled: true,
            time_ms: 12,
        };
        let via_value = crate::canonical::to_vec(&serde_json::to_value(&e).unwrap());
        assert_eq!(canonical(&e), via_value);
        let e = Entry {
            journal: Some([1, 2, 3, 4]),
            settled: false,
            ..e
        };
        let via_value = crate::canonical::to_vec(&serde_json::to_value(&e).unwrap());
        assert_eq!(canonical(&e), via_value);
    }

    #[test]
    fn settled_means_both_ctimes_at_least_two_seconds_before_the_start() {
        let start = 1_000_000_000_000i128; // ms
        let s = 1_000_000_000i64; // the start's second
        assert!(settled(start, &at(s - 2, 0), None));
        assert!(!settled(start, &at(s - 2, 1_000_000), None), "1,999 ms");
        assert!(!settled(start, &at(s, 0), None));
        assert!(!settled(start, &at(s + 5, 0), None), "from the future");
        assert!(settled(start, &at(s - 10, 0), Some(&at(s - 3, 0))));
        assert!(
            !settled(start, &at(s - 10, 0), Some(&at(s - 1, 0))),
            "a journal changed lately"
        );
        // Before 1970: negative seconds.
        assert!(settled(start, &at(-5, 0), None));
        assert!(!settled(-10_000, &at(-5, 0), None));
    }
}
