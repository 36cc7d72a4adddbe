//! Journals: each session's append-only pack (objects-spec §5.3).
//!
//! `packs/journals/<session>.journal` is a pack file (see `pack.rs`) that
//! only the session's lease holder appends to. A commit appends the
//! records of its new objects and then one **commit record** that names
//! the snapshot it publishes, in one write, and makes them durable with one
//! `fdatasync`; then it moves the session's ref (`refs.rs`). The commit
//! records are the ref's log: the head is the commit record publishing
//! what the ref names (the *ref's commit record*, its [`Rule`]), or the
//! one commit record past it (a crash between the sync and the ref's
//! rename, or a ref moved back by one: the two read alike, as published,
//! [`View::behind`]); past that there may be object records of a commit
//! that wrote no commit record and a torn tail, which readers ignore and
//! the lease holder cuts before it appends.
//!
//! `packs/journals/<session>.jidx` lists the journal's records (id,
//! offset, length, type), appended after each commit and never synced: a
//! hint that saves reading the journal to find its records. Readers check
//! what it says (entries must chain; the last commit record's check must
//! hold) and read the journal itself past its end.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::dir::{Dir, Kind};
use crate::error::IoContext;
use crate::pack::{self, FileKind, Frame, Place, RecordType, FILE_HEADER, RECORD_HEADER};
use crate::snapshot::Summary;
use crate::{failpoint, object, Error, ObjectId, Result, SessionId};

pub(crate) const JOURNAL_EXT: &str = "journal";
pub(crate) const JIDX_EXT: &str = "jidx";
/// A delete's marker beside the journal it is removing (objects-spec
/// §12.5): written and synced before the ref goes, so that a journal
/// without a ref is known to be a delete's leftover, never a lost ref.
pub(crate) const DELETED_EXT: &str = "deleted";
const JIDX_MAGIC: &[u8; 8] = b"HELJIDX\0";
const JIDX_HEADER: usize = 16;
const JIDX_ENTRY: usize = 48;
/// The most stored bytes a commit record may have.
pub(crate) const COMMIT_MAX: u64 = 64 << 10;
/// Sidecar entries read to find the head without loading the whole index.
const TAIL_ENTRIES: u64 = 64;
/// The most sidecar entries read: a hint never costs more memory than
/// this (48 MiB of entries), whatever size it claims; records past them
/// are found by reading the journal itself.
const SIDECAR_MAX_ENTRIES: u64 = 1 << 20;
/// Sidecar entries read and decoded at a time.
const SIDECAR_CHUNK: u64 = 4096;

/// What a commit record says (canonical JSON, objects-spec §5.2).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommitPayload {
    /// Sessions whose journals hold objects this session's history names.
    pub deps: BTreeSet<SessionId>,
    /// The head before this commit (null for a new session's first).
    pub parent: Option<ObjectId>,
    /// 1 for the journal's first commit record, then +1.
    pub seq: u64,
    pub session: SessionId,
    pub summary: Summary,
    pub time_ms: u64,
    /// Why the head moved (free text, for people).
    pub why: String,
}

/// A valid commit record: the snapshot it publishes and what it says.
#[derive(Debug, Clone)]
pub(crate) struct Commit {
    pub head: ObjectId,
    pub payload: CommitPayload,
}

/// One record of a journal, as its sidecar lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub id: ObjectId,
    pub offset: u64,
    /// The record's total length.
    pub len: u64,
    pub rtype: RecordType,
}

fn encode_entry(e: &Entry) -> [u8; JIDX_ENTRY] {
    let mut out = [0u8; JIDX_ENTRY];
    out[..32].copy_from_slice(e.id.as_bytes());
    out[32..40].copy_from_slice(&e.offset.to_le_bytes());
    out[40..47].copy_from_slice(&e.len.to_le_bytes()[..7]);
    out[47] = e.rtype as u8;
    out
}

fn decode_entry(b: &[u8]) -> Option<Entry> {
    let mut id = [0u8; 32];
    id.copy_from_slice(&b[..32]);
    let mut o = [0u8; 8];
    o.copy_from_slice(&b[32..40]);
    let mut l = [0u8; 8];
    l[..7].copy_from_slice(&b[40..47]);
    let rtype = match b[47] {
        1 => RecordType::Object,
        2 => RecordType::Commit,
        _ => return None,
    };
    Some(Entry {
        id: ObjectId::from_bytes(id),
        offset: u64::from_le_bytes(o),
        len: u64::from_le_bytes(l),
        rtype,
    })
}

fn jidx_header() -> [u8; JIDX_HEADER] {
    let mut h = [0u8; JIDX_HEADER];
    h[..8].copy_from_slice(JIDX_MAGIC);
    h[8..12].copy_from_slice(&1u32.to_le_bytes());
    h
}

pub(crate) fn journal_name(session: &SessionId) -> String {
    format!("{session}.{JOURNAL_EXT}")
}

pub(crate) fn jidx_name(session: &SessionId) -> String {
    format!("{session}.{JIDX_EXT}")
}

pub(crate) fn deleted_name(session: &SessionId) -> String {
    format!("{session}.{DELETED_EXT}")
}

/// Which commit record of a journal is its session's head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// The last commit record publishing the snapshot the
    /// session's ref names (`None`: the session has no ref, and nothing in
    /// the journal is published).
    Ref(Option<ObjectId>),
}

/// How much of a journal [`open`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The head only (listings): the sidecar's last entries when they hold
    /// it, then the journal past them.
    Head,
    /// Every committed record: the sidecar as far as it holds, then the
    /// journal past it.
    Full,
    /// Every record read from the journal itself, the sidecar ignored
    /// (fsck).
    Verify,
}

/// Why the bytes at a journal's offset are not an intact record, or a
/// commit record breaks a rule a writer keeps: what a [`Fault`] says.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordFault {
    #[error("the journal ends inside a record header")]
    HeaderCut,
    #[error(transparent)]
    Header(#[from] pack::HeaderError),
    #[error("the record of {id} declares {stored_len} stored bytes, past the end of the journal")]
    PastEnd { id: ObjectId, stored_len: u64 },
    #[error("the record of {id} declares {stored_len} stored bytes, over the {max} it may have")]
    OverMax {
        id: ObjectId,
        stored_len: u64,
        max: u64,
    },
    #[error("the check of the record of {0} does not match (torn or damaged)")]
    Check(ObjectId),
    #[error("the commit record's frame: {0}")]
    Frame(object::DecodeError),
    #[error("the commit record is not a commit payload: {0}")]
    NotPayload(serde_json::Error),
    #[error("the commit record is not in canonical form")]
    NotCanonical,
    #[error("a commit record of session {0} in this session's journal")]
    OtherSession(SessionId),
    #[error("the commit record's deps name its own session")]
    OwnDeps,
    #[error("the commit record's why is over {WHY_MAX} characters")]
    WhyTooLong,
    #[error("the journal's first commit record has seq {0}, not 1")]
    FirstSeq(u64),
    #[error("seq {seq} follows seq {prev}")]
    Seq { seq: u64, prev: u64 },
    #[error("parent {} where the commit record before publishes {expected}", .parent.map_or_else(|| "null".to_owned(), |p| p.to_hex()))]
    Parent {
        parent: Option<ObjectId>,
        expected: ObjectId,
    },
}

/// The first thing wrong with a journal: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fault {
    pub offset: u64,
    pub reason: String,
}

/// Where each object record of a journal is (offset, record length), by
/// id. Hashed by foldhash with a random seed per process: ids a sidecar
/// lists may be chosen to collide, which a seed the file cannot know
/// defeats, as std's SipHash does, at a fraction of its cost per 32-byte
/// id (a resume indexes every record of its journal).
pub(crate) type Places = HashMap<ObjectId, (u64, u64), foldhash::fast::RandomState>;

/// A session's journal as a reader sees it: its committed records.
#[derive(Debug)]
pub(crate) struct View {
    pub session: SessionId,
    pub path: PathBuf,
    pub file: Arc<File>,
    /// The end of the last valid commit record (the file header's end if
    /// there is none).
    pub committed: u64,
    /// Object records within `committed`: id → (offset, record length).
    /// With a fault, also the intact object records before it (other
    /// sessions may name them; every read verifies the object).
    pub objects: Places,
    /// Every record of a type this hel knows within `committed`, in order.
    pub entries: Vec<Entry>,
    /// The last valid commit record.
    pub head: Option<Commit>,
    /// The record of the head's snapshot object (offset, record length),
    /// when the records read to find the head hold it (a listing reads the
    /// snapshot from there without indexing the whole journal).
    pub head_record: Option<(u64, u64)>,
    /// Whether the sidecar listed every committed record (else the writer
    /// rewrites it).
    pub sidecar_complete: bool,
    /// The journal's size when this view was read (another process may
    /// append after), or `None` for the view of this process's own writer,
    /// which is always current.
    pub seen_size: Option<u64>,
    /// What makes this journal something no writer and no crash leaves
    /// (objects-spec §5.4): the session's head is unknown, nothing is
    /// appended to the journal or cut from it, gc keeps it.
    pub fault: Option<Fault>,
    /// The first record of a type this hel does not know (offset, type):
    /// a newer hel wrote it. Readers skip it; this hel never appends.
    pub newer: Option<(u64, u8)>,
    /// The rule `head` and `committed` follow (for [`Rule::Ref`], the ref
    /// as it was read just before the journal).
    pub rule: Rule,
    /// Intact object records past `committed` (an unpublished commit, a
    /// journal without a ref): read by gc's copy, never shared by a writer.
    pub unpublished: Places,
    /// Intact object records after the last commit record, in file order
    /// (round records, objects of a commit that wrote no commit record):
    /// read by a resume as round records only; fsck and gc ignore them
    /// as every reader ignores what follows the committed part.
    pub tail: Vec<Entry>,
    /// The fault is the ref rule's (the ref and the journal disagree): a
    /// reader reads the ref again before it believes it.
    pub ref_fault: bool,
    /// What the ref names when it is one commit behind the journal: the
    /// snapshot of the commit record before the last, whose successor
    /// (`head`) is read as published (objects-spec §5.4, "One commit
    /// past the ref"). The lease holder moves the ref to `head` before
    /// anything else.
    pub behind: Option<ObjectId>,
    /// Where the scan met bytes that are not an intact record (a torn
    /// tail, or damage).
    torn_at: Option<u64>,
    /// The end of what the sidecar lists, as far as its entries chain: a
    /// writer notes records there only after its ref moved (and the move
    /// was synced), so they were published.
    listed_end: u64,
}

/// What the commit record before the one being read is, for its `seq`
/// and `parent` rules.
#[derive(Clone, Copy)]
enum Prev<'a> {
    /// None: this is the journal's first commit record.
    First,
    After(&'a Commit),
    /// Not read (a listing that starts at the sidecar's last entries).
    Unknown,
}

/// Parse a commit record's stored bytes and check every rule a writer
/// keeps (objects-spec §5.4): the commit payload in canonical form and
/// nothing else, of this session, not depending on itself, `why` within
/// 200 characters, `seq` one more than the previous commit record's (1 for
/// the first) and `parent` the previous commit record's snapshot. `Err`
/// says which rule is broken.
fn parse_commit(
    head: ObjectId,
    stored: &[u8],
    session: &SessionId,
    prev: Prev<'_>,
) -> std::result::Result<Commit, RecordFault> {
    let json = commit_json(stored)?;
    let payload: CommitPayload = serde_json::from_slice(&json).map_err(RecordFault::NotPayload)?;
    let canonical = serde_json::to_value(&payload).map(|v| crate::canonical::to_vec(&v));
    if canonical.as_deref().ok() != Some(&json[..]) {
        return Err(RecordFault::NotCanonical);
    }
    if payload.session != *session {
        return Err(RecordFault::OtherSession(payload.session));
    }
    if payload.deps.contains(session) {
        return Err(RecordFault::OwnDeps);
    }
    if payload.why.chars().count() > WHY_MAX {
        return Err(RecordFault::WhyTooLong);
    }
    match prev {
        Prev::First if payload.seq != 1 => {
            return Err(RecordFault::FirstSeq(payload.seq));
        }
        Prev::After(c) => {
            if c.payload.seq.checked_add(1) != Some(payload.seq) {
                return Err(RecordFault::Seq {
                    seq: payload.seq,
                    prev: c.payload.seq,
                });
            }
            if payload.parent != Some(c.head) {
                return Err(RecordFault::Parent {
                    parent: payload.parent,
                    expected: c.head,
                });
            }
        }
        Prev::First | Prev::Unknown => {}
    }
    Ok(Commit { head, payload })
}

/// The canonical JSON a commit record's stored bytes hold (objects-spec
/// §5.2): the bytes themselves when they are not a zstd frame (written so
/// when the frame would be over [`COMMIT_MAX`]), else the frame's content,
/// at most [`COMMIT_MAX`] bytes.
pub(crate) fn commit_json(
    stored: &[u8],
) -> std::result::Result<std::borrow::Cow<'_, [u8]>, RecordFault> {
    if !stored.starts_with(&ZSTD_MAGIC) {
        return Ok(std::borrow::Cow::Borrowed(stored));
    }
    object::decompress_frame(stored, COMMIT_MAX as usize)
        .map(std::borrow::Cow::Owned)
        .map_err(RecordFault::Frame)
}

/// The first bytes of every zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The stored bytes of a commit record whose canonical JSON is `json`: a
/// frame compressed with hel's dictionary (objects-spec §5.2), which
/// holds the keys and phrases every commit record repeats; the JSON
/// itself in the (never seen) case that the frame is over [`COMMIT_MAX`].
pub(crate) fn commit_stored(json: &[u8]) -> Result<Vec<u8>> {
    let stored = object::compress_frame(json, true)
        .map_err(|e| Error::Internal(format!("cannot compress a commit record: {e}")))?;
    Ok(match stored.len() as u64 > COMMIT_MAX {
        true => json.to_vec(),
        false => stored,
    })
}

/// The most characters a commit record's `why` may have.
pub(crate) const WHY_MAX: usize = 200;

/// What fsck says of the sidecar of `view` (a journal read whole, without
/// a fault, of `size` bytes): None when there is none, or when it lists
/// the committed records as they are (or a prefix of them: the sidecar is
/// appended after each commit and never synced, so a crash can leave it
/// short). A sidecar that is not one, that lists another record than the
/// journal holds at a place, or that lists more than the committed part
/// is damage: reported, never trusted (every reader checks what it takes
/// from it), and rewritten by the session's next commit.
pub(crate) fn sidecar_note(dir: &Dir, view: &View, size: u64) -> Option<String> {
    let name = jidx_name(&view.session);
    if !matches!(dir.kind_of(&name), Ok(Some(_))) {
        return None;
    }
    let path = dir.child_path(&name);
    let Some(listed) = read_sidecar(dir, &view.session, size, None) else {
        return Some(format!(
            "the sidecar {} is not a readable sidecar: readers read the journal instead, and the session's next commit rewrites it",
            path.display()
        ));
    };
    let wrong = listed
        .iter()
        .zip(&view.entries)
        .position(|(a, b)| a != b)
        .or((listed.len() > view.entries.len()).then_some(view.entries.len()))?;
    Some(format!(
        "the sidecar {} is damaged at entry {wrong} (it does not list the journal's records as they are): readers check what they take from it, and the session's next commit rewrites it",
        path.display()
    ))
}

/// Read the sidecar's entries (all it may hold, or the last `tail` of
/// them) for a journal of `journal_size` bytes. Bounded whatever the file
/// says: no more entries than records of at least a header's length fit
/// in the journal, never more than [`SIDECAR_MAX_ENTRIES`], read a chunk
/// at a time, stopping at the first entry that is not one (a torn or
/// zeroed end) or cannot be read. `None` when there is no usable sidecar
/// (absent, not a regular file, unreadable, not a sidecar).
fn read_sidecar(
    dir: &Dir,
    session: &SessionId,
    journal_size: u64,
    tail: Option<u64>,
) -> Option<Vec<Entry>> {
    let name = jidx_name(session);
    // Only a hint: one that is not a readable regular file is no sidecar.
    let Ok(Some(file)) = dir.open_file(&name) else {
        return None;
    };
    let Ok(meta) = file.metadata() else {
        return None;
    };
    let len = meta.len();
    if len < JIDX_HEADER as u64 {
        return None;
    }
    let mut head = [0u8; JIDX_HEADER];
    if file.read_exact_at(&mut head, 0).is_err() || &head[..8] != JIDX_MAGIC {
        return None;
    }
    let fits = journal_size.saturating_sub(FILE_HEADER) / RECORD_HEADER;
    let count = ((len - JIDX_HEADER as u64) / JIDX_ENTRY as u64)
        .min(fits)
        .min(SIDECAR_MAX_ENTRIES);
    let first = match tail {
        Some(t) => count.saturating_sub(t),
        None => 0,
    };
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut at = first;
    'read: while at < count {
        let n = (count - at).min(SIDECAR_CHUNK);
        buf.resize(n as usize * JIDX_ENTRY, 0);
        if file
            .read_exact_at(&mut buf, JIDX_HEADER as u64 + at * JIDX_ENTRY as u64)
            .is_err()
        {
            break;
        }
        for chunk in buf.chunks_exact(JIDX_ENTRY) {
            match decode_entry(chunk) {
                // A record is at least its header: an entry that says less
                // never chains, and would let a lie list one offset forever.
                Some(e) if e.len >= RECORD_HEADER => out.push(e),
                _ => break 'read,
            }
        }
        at += n;
    }
    Some(out)
}

/// [`open`] by the ref rule, the ref (`first`) read just before the
/// journal: read again by `read_ref` (a few times) while they disagree,
/// since a writer may have appended and moved the ref in between.
pub(crate) fn open_by_ref(
    dir: &Dir,
    session: &SessionId,
    mode: Mode,
    first: Option<ObjectId>,
    read_ref: &dyn Fn() -> Result<Option<ObjectId>>,
) -> Result<Option<View>> {
    open_by_ref_seeing(dir, session, mode, first, read_ref, &mut None)
}

/// What [`Mode::Verify`] hands over of each record it checked: its entry
/// and, for an object record, its stored bytes (those of at most
/// [`SEEN_MAX`] stored bytes, handed over; larger ones are checked
/// streaming and not kept), for a commit record the commit as parsed and checked, so that
/// fsck decodes neither again. A record may be handed over more than once
/// (a view read again while the ref moved) and may turn out to be past the
/// view's committed part: the caller goes by the view, and by the last
/// handing of an offset.
pub(crate) type Seen<'a> = Option<&'a mut dyn FnMut(&Entry, Checked<'_>)>;

/// A record handed to [`Seen`].
pub(crate) enum Checked<'a> {
    /// An object record's stored bytes (not yet decoded), handed over.
    Object(Vec<u8>),
    /// A commit record that keeps every rule of [`View::read_commit`] and
    /// those that need the commit record before it.
    Commit(&'a Commit),
}

/// The largest stored record [`Seen`] is handed (read whole, once, and
/// decoded from those bytes; a larger one is checked streaming and read
/// again to be decoded). 16 MiB holds every spill blob of up to about
/// 48 MB of text whole, and bounds what fsck's decoding queue holds at
/// a few times that.
pub(crate) const SEEN_MAX: u64 = 16 << 20;

/// [`open_by_ref`], handing every object record it checks to `seen`.
pub(crate) fn open_by_ref_seeing(
    dir: &Dir,
    session: &SessionId,
    mode: Mode,
    first: Option<ObjectId>,
    read_ref: &dyn Fn() -> Result<Option<ObjectId>>,
    seen: &mut Seen<'_>,
) -> Result<Option<View>> {
    let mut r = first;
    let mut tries = 0;
    loop {
        let view = open_seeing(dir, session, mode, Rule::Ref(r), seen)?;
        match &view {
            Some(v) if v.ref_fault && tries < 8 => {
                let again = read_ref()?;
                if again == r {
                    return Ok(view);
                }
                r = again;
                tries += 1;
            }
            _ => return Ok(view),
        }
    }
}

/// Open `session`'s journal for reading, if it exists, reading as much as
/// `mode` says, its head chosen by `rule`. A journal that is not what a
/// writer and a crash leave is still opened: its view says where the fault
/// is ([`View::fault`]) and holds the records before it.
pub(crate) fn open(dir: &Dir, session: &SessionId, mode: Mode, rule: Rule) -> Result<Option<View>> {
    open_seeing(dir, session, mode, rule, &mut None)
}

/// [`open`], handing each object record it checks to `seen` (see [`Seen`]).
pub(crate) fn open_seeing(
    dir: &Dir,
    session: &SessionId,
    mode: Mode,
    rule: Rule,
    seen: &mut Seen<'_>,
) -> Result<Option<View>> {
    let name = journal_name(session);
    let Some(file) = dir.open_file(&name)? else {
        return Ok(None);
    };
    let path = dir.child_path(&name);
    let size = file.metadata().at(&path)?.len();
    let mut fh = [0u8; FILE_HEADER as usize];
    if size < FILE_HEADER || file.read_exact_at(&mut fh, 0).is_err() {
        // Created, not yet written: no commit.
        let mut view = View::empty(session, path, file);
        view.rule = rule;
        return Ok(Some(view));
    }
    pack::check_file_header(&fh, FileKind::Journal).map_err(|r| {
        pack::damaged(
            &Place {
                path: path.clone(),
                offset: 0,
            },
            None,
            r.to_string(),
        )
    })?;
    let mut view = View::empty(session, path, file);
    view.seen_size = Some(size);
    view.rule = rule;
    let (start, durable) = from_sidecar(dir, &mut view, size, mode);
    view.listed_end = durable;
    // Past what the sidecar told: read the journal itself.
    view.sidecar_complete = true;
    scan(&mut view, start, size, mode, durable, seen);
    if mode != Mode::Head && start == FILE_HEADER && !view.entries.is_empty() {
        view.sidecar_complete = false;
    }
    if mode != Mode::Head {
        view.head_record = view
            .head
            .as_ref()
            .and_then(|c| view.objects.get(&c.head).copied());
    }
    let Rule::Ref(r) = rule;
    if view.fault.is_none() {
        if mode == Mode::Head {
            // The tail read holds the ref's commit record only when it
            // is the last one: else the journal is read whole.
            if r.is_none() || view.head.as_ref().map(|c| c.head) != r {
                return open(dir, session, Mode::Full, rule);
            }
        } else {
            let deleted =
                r.is_none() && matches!(dir.kind_of(&deleted_name(session)), Ok(Some(Kind::File)));
            cut_at_ref(&mut view, r, deleted);
        }
    }
    Ok(Some(view))
}

/// Make `view` (every committed record read) follow the ref rule for a
/// ref naming `r`: its committed part ends after the ref's commit record
/// (the last commit record publishing `r`; nothing for a journal without a
/// ref), or after the one commit record past it, which is published
/// ([`View::behind`], objects-spec §5.4); object records after that (a
/// commit that wrote no commit record) are kept aside
/// ([`View::unpublished`]). Anything else is a fault naming the journal
/// and the offset, never an older head: two or more commit records past
/// the ref's (a ref older than its journal), records past the committed
/// part that the sidecar lists (published), or a ref no intact commit
/// record publishes.
fn cut_at_ref(view: &mut View, r: Option<ObjectId>, deleted: bool) {
    let commits: Vec<usize> = view
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.rtype == RecordType::Commit)
        .map(|(k, _)| k)
        .collect();
    let keep = match r {
        // Without a ref, one commit record is what a crash in a session's
        // first commit leaves, and a delete marks its journal before its
        // ref goes: more, unmarked, is a session whose ref was lost.
        None if commits.len() >= 2 && !deleted => {
            let last = view.entries[commits[commits.len() - 1]].id;
            view.set_fault(
                view.entries[commits[1]].offset,
                format!(
                    "the journal holds {} published commits but the session has no ref refs/sessions/{}: the ref was lost (restore it holding {last} and a newline), or remove the journal to give the session up",
                    commits.len(),
                    view.session
                ),
            );
            view.ref_fault = true;
            return;
        }
        None => 0,
        Some(id) => match commits.iter().rposition(|&k| view.entries[k].id == id) {
            Some(p) => {
                if let Some(&second) = commits.get(p + 2) {
                    let offset = view.entries[second].offset;
                    view.set_fault(
                        offset,
                        format!(
                            "a second commit record after the one publishing {id}, which the session's ref refs/sessions/{} names: no crash leaves that (is the ref older than its journal, restored from an old copy?)",
                            view.session
                        ),
                    );
                    view.ref_fault = true;
                    return;
                }
                match commits.get(p + 1) {
                    // One commit past the ref: its records were durable
                    // before the ref could move, and everything it needs
                    // before that (section 6.3), so it is read as
                    // published whether the ref never moved (a crash
                    // between the journal's sync and the rename) or was
                    // moved back; the lease holder moves the ref to it.
                    // Neither reads as a session one answer shorter.
                    Some(&next) => {
                        view.behind = Some(id);
                        next + 1
                    }
                    None => commits[p] + 1,
                }
            }
            None => {
                let offset = view.torn_at.unwrap_or(view.committed);
                view.set_fault(
                    offset,
                    format!(
                        "the session's ref refs/sessions/{} names snapshot {id}, which no intact commit record of this journal publishes (damaged, or a ref that does not belong to this journal)",
                        view.session
                    ),
                );
                view.ref_fault = true;
                return;
            }
        },
    };
    if keep == view.entries.len() {
        return;
    }
    let end = keep.checked_sub(1).map_or(FILE_HEADER, |k| {
        view.entries[k].offset + view.entries[k].len
    });
    if let Some(id) = r {
        if view.listed_end > end {
            // What follows was published (the sidecar lists it): a ref
            // moved back, never a commit that did not publish.
            view.set_fault(
                end,
                format!(
                    "the sidecar lists records up to offset {}, past the commit record publishing {id}, which the session's ref refs/sessions/{} names: those were published, so the ref is older than its journal (restored from an old copy?)",
                    view.listed_end, view.session
                ),
            );
            view.ref_fault = true;
            return;
        }
    }
    let tail = view.entries.split_off(keep);
    for e in tail.iter().filter(|e| e.rtype == RecordType::Object) {
        view.objects.remove(&e.id);
        view.unpublished.insert(e.id, (e.offset, e.len));
    }
    view.committed = view
        .entries
        .last()
        .map_or(FILE_HEADER, |e| e.offset + e.len);
    view.head = match view.entries.last() {
        Some(e) => match view.read_commit(e.offset) {
            Ok(c) => Some(c),
            Err(err) => {
                view.set_fault(e.offset, err.to_string());
                return;
            }
        },
        None => None,
    };
    view.head_record = view
        .head
        .as_ref()
        .and_then(|c| record_of(&view.entries, &c.head));
}

/// Take what the sidecar says of `view`'s journal (`size` bytes) as far as
/// it holds: its entries as far as they chain (from the file header's end
/// unless only the head is wanted), up to the last commit entry, whose
/// record must check, name what the entry names and keep the rules
/// (`seq` one per commit entry, `parent` the commit entry before). Returns
/// where the journal itself must be read from (after that commit record,
/// or from the file header's end when the sidecar does not hold: it is a
/// hint), and where the records it lists end: the sidecar is written
/// after its commit's sync returned, so what it lists was durable, and a
/// record there that does not check is damage, never a torn write.
/// [`Mode::Verify`] takes nothing from it but that end.
fn from_sidecar(dir: &Dir, view: &mut View, size: u64, mode: Mode) -> (u64, u64) {
    let session = view.session.clone();
    let whole = mode != Mode::Head;
    let mut sidecar = read_sidecar(
        dir,
        &session,
        size,
        if whole { None } else { Some(TAIL_ENTRIES) },
    );
    if !whole
        && sidecar
            .as_ref()
            .is_some_and(|es| !es.iter().any(|e| e.rtype == RecordType::Commit))
    {
        // One commit wrote more records than the tail holds.
        sidecar = read_sidecar(dir, &session, size, None);
    }
    let Some(mut entries) = sidecar else {
        return (FILE_HEADER, FILE_HEADER);
    };
    let chain_from = entries.first().map_or(FILE_HEADER, |e| e.offset);
    if whole && chain_from != FILE_HEADER {
        return (FILE_HEADER, FILE_HEADER);
    }
    let mut expect = chain_from;
    let mut upto = 0;
    for (k, e) in entries.iter().enumerate() {
        if e.offset != expect || e.offset.checked_add(e.len).is_none_or(|end| end > size) {
            break;
        }
        expect = e.offset + e.len;
        if e.rtype == RecordType::Commit {
            upto = k + 1;
        }
    }
    let durable = expect;
    if upto == 0 || mode == Mode::Verify {
        return (FILE_HEADER, durable);
    }
    let full = mode == Mode::Full;
    let listed = &entries[..upto];
    let last = listed[upto - 1];
    let commits: Vec<&Entry> = listed
        .iter()
        .filter(|e| e.rtype == RecordType::Commit)
        .collect();
    let Ok(c) = view.read_commit(last.offset) else {
        return (FILE_HEADER, durable);
    };
    let before = commits.len().checked_sub(2).map(|k| commits[k].id);
    let holds = c.head == last.id
        && (!full || c.payload.seq == commits.len() as u64)
        && before.is_none_or(|b| c.payload.parent == Some(b));
    if !holds {
        return (FILE_HEADER, durable);
    }
    let head_record = record_of(&listed[..upto - 1], &c.head);
    if full {
        let mut objects = Places::with_capacity_and_hasher(listed.len(), Default::default());
        for e in listed.iter().filter(|e| e.rtype == RecordType::Object) {
            if objects.insert(e.id, (e.offset, e.len)).is_some() {
                // Twice in one journal: the journal itself says where.
                return (FILE_HEADER, durable);
            }
        }
        view.objects = objects;
        // What the sidecar listed past the last commit record is not the
        // view's: the rest is kept, not copied.
        entries.truncate(upto);
        view.entries = entries;
    }
    view.head_record = head_record;
    view.head = Some(c);
    view.committed = last.offset + last.len;
    (view.committed, durable)
}

/// Read the records of `view`'s journal from `start` (a record boundary
/// after which nothing is known) to its end, `size`, by the rules of
/// objects-spec §5.4: every record intact and of a type this hel knows
/// or skips, every commit record keeping the rules, each object once
/// (among what the view indexes and what is read here). The bytes after
/// the last intact record are a torn tail only when no intact record
/// begins anywhere in them and they start at or after `durable` (the end
/// of what the sidecar lists); anything else is the view's fault.
fn scan(view: &mut View, start: u64, size: u64, mode: Mode, durable: u64, hand: &mut Seen<'_>) {
    let mut at = start;
    let mut pending: Vec<Entry> = Vec::new();
    // Every object record read here, and where.
    let mut seen: HashMap<ObjectId, u64> = HashMap::new();
    let keep = hand.is_some();
    let file = Arc::clone(&view.file);
    let mut ahead = Ahead::new(&file, size);
    while at < size {
        let (frame, stored) = match frame_at(&mut ahead, at, size, keep) {
            Ok(f) => f,
            Err(why) => {
                view.torn_at = Some(at);
                match later_record(&view.file, at + 1, size) {
                    Later::None if at < durable => view.set_fault(
                        at,
                        format!("{why}, and the sidecar lists records up to offset {durable}, which were durable: damage, not a torn write"),
                    ),
                    // What a crash during the last append leaves.
                    Later::None => {}
                    Later::At(x) => view.set_fault(
                        at,
                        format!("{why}, and an intact record follows at offset {x}: no crash leaves that"),
                    ),
                    Later::Undecided => view.set_fault(
                        at,
                        format!("{why}, and what follows holds too many record headers to tell it from a torn write"),
                    ),
                }
                break;
            }
        };
        let len = frame.record_len();
        match frame.rtype {
            t if t == RecordType::Object as u8 => {
                let first = view
                    .objects
                    .get(&frame.id)
                    .map(|(o, _)| *o)
                    .or_else(|| seen.get(&frame.id).copied());
                if let Some(first) = first {
                    view.set_fault(
                        at,
                        format!(
                            "object {} a second time in this journal (first at offset {first})",
                            frame.id
                        ),
                    );
                    break;
                }
                seen.insert(frame.id, at);
                let entry = Entry {
                    id: frame.id,
                    offset: at,
                    len,
                    rtype: RecordType::Object,
                };
                if let Some(hand) = hand.as_mut() {
                    if frame.stored_len <= SEEN_MAX {
                        hand(&entry, Checked::Object(stored));
                    }
                }
                pending.push(entry);
            }
            t if t == RecordType::Commit as u8 => {
                let prev = view.head.as_ref().map_or(Prev::First, Prev::After);
                let c = match parse_commit(frame.id, &stored, &view.session, prev) {
                    Ok(c) => c,
                    Err(why) => {
                        view.set_fault(at, why.to_string());
                        break;
                    }
                };
                let entry = Entry {
                    id: frame.id,
                    offset: at,
                    len,
                    rtype: RecordType::Commit,
                };
                if let Some(hand) = hand.as_mut() {
                    hand(&entry, Checked::Commit(&c));
                }
                pending.push(entry);
                view.head_record = record_of(&pending, &c.head);
                view.head = Some(c);
                view.committed = at + len;
                view.sidecar_complete = false;
                if mode == Mode::Head {
                    pending.clear();
                } else {
                    for e in &pending {
                        if e.rtype == RecordType::Object {
                            view.objects.insert(e.id, (e.offset, e.len));
                        }
                    }
                    view.entries.append(&mut pending);
                }
            }
            // A newer hel's record: framed and checked like ours, skipped.
            t => {
                if view.newer.is_none() {
                    view.newer = Some((at, t));
                }
            }
        }
        at += len;
    }
    if view.fault.is_some() && mode != Mode::Head {
        for e in pending.iter().filter(|e| e.rtype == RecordType::Object) {
            view.objects.entry(e.id).or_insert((e.offset, e.len));
        }
    } else if mode != Mode::Head {
        // Object records after the last commit record (a commit that
        // wrote none, round records): never published; only a resume
        // reads them, as round records.
        view.tail = pending
            .iter()
            .filter(|e| e.rtype == RecordType::Object)
            .copied()
            .collect();
    }
}

/// A journal's bytes up to the size a scan goes to, read a piece at a
/// time: one `pread` per piece where a record took two (its header, then
/// its bytes). A read the piece cannot serve goes to the file as before.
struct Ahead<'a> {
    file: &'a File,
    size: u64,
    start: u64,
    buf: Vec<u8>,
}

impl<'a> Ahead<'a> {
    /// What one read ahead takes, at most.
    const PIECE: u64 = 256 << 10;

    fn new(file: &'a File, size: u64) -> Ahead<'a> {
        Ahead {
            file,
            size,
            start: 0,
            buf: Vec::new(),
        }
    }

    /// Fill `out` with the bytes at `at`, as `File::read_exact_at` does.
    fn read_exact_at(&mut self, out: &mut [u8], at: u64) -> std::io::Result<()> {
        let len = out.len() as u64;
        if !self.holds(at, len) && len < Self::PIECE && at < self.size {
            let n = Self::PIECE.min(self.size - at) as usize;
            self.buf.resize(n, 0);
            if self.file.read_exact_at(&mut self.buf, at).is_ok() {
                self.start = at;
            } else {
                // Shorter than when the scan began: read as asked.
                self.buf.clear();
            }
        }
        if self.holds(at, len) {
            let from = (at - self.start) as usize;
            out.copy_from_slice(&self.buf[from..from + out.len()]);
            return Ok(());
        }
        self.file.read_exact_at(out, at)
    }

    fn holds(&self, at: u64, len: u64) -> bool {
        at >= self.start && at + len <= self.start + self.buf.len() as u64
    }
}

/// The intact record at `at` of a journal of `size` bytes: its frame and,
/// for a commit record, its stored bytes (for an object record too, of at
/// most [`SEEN_MAX`] stored bytes, when `keep`: read whole once, where
/// others are checked streaming). `Err` says why there is none: a header
/// cut short or malformed, a length past the end of the journal or over
/// what the type may have, a check that does not hold.
fn frame_at(
    ahead: &mut Ahead<'_>,
    at: u64,
    size: u64,
    keep: bool,
) -> std::result::Result<(Frame, Vec<u8>), RecordFault> {
    let mut hb = [0u8; RECORD_HEADER as usize];
    if size - at < RECORD_HEADER || ahead.read_exact_at(&mut hb, at).is_err() {
        return Err(RecordFault::HeaderCut);
    }
    let frame = pack::parse_frame(&hb)?;
    if frame.record_len() > size - at {
        return Err(RecordFault::PastEnd {
            id: frame.id,
            stored_len: frame.stored_len,
        });
    }
    let max = match frame.rtype {
        t if t == RecordType::Object as u8 => pack_record_max(),
        t if t == RecordType::Commit as u8 => COMMIT_MAX,
        _ => u64::MAX,
    };
    if frame.stored_len > max {
        return Err(RecordFault::OverMax {
            id: frame.id,
            stored_len: frame.stored_len,
            max,
        });
    }
    let whole = frame.rtype == RecordType::Commit as u8
        || (keep && frame.rtype == RecordType::Object as u8 && frame.stored_len <= SEEN_MAX);
    if whole {
        let mut stored = vec![0u8; frame.stored_len as usize];
        if ahead
            .read_exact_at(&mut stored, at + RECORD_HEADER)
            .is_err()
            || !frame.checks(&stored)
        {
            return Err(RecordFault::Check(frame.id));
        }
        return Ok((frame, stored));
    }
    if !pack::check_streaming(ahead.file, at, &frame) {
        return Err(RecordFault::Check(frame.id));
    }
    Ok((frame, Vec::new()))
}

/// What [`later_record`] found.
#[derive(Debug, PartialEq, Eq)]
enum Later {
    None,
    /// An intact record begins at this offset.
    At(u64),
    /// Too many candidates to check within bounds: not provably a tail.
    Undecided,
}

/// Record headers checked by one [`later_record`], and stored bytes hashed
/// for them: a hostile tail of headers cannot make a read cost more.
const LATER_CANDIDATES: u32 = 256;
const LATER_HASHED: u64 = 256 << 20;

/// Whether an intact record (its magic, zero reserved bytes, a length
/// within the file and a check that holds; any type) begins anywhere in
/// `from..size` of `file`. Reads the bytes once, a piece at a time.
fn later_record(file: &File, from: u64, size: u64) -> Later {
    const PIECE: u64 = 1 << 20;
    let mut buf = vec![0u8; (PIECE + 3).min(size.saturating_sub(from)) as usize];
    let (mut candidates, mut hashed) = (0u32, 0u64);
    let mut at = from;
    while at < size {
        let n = (PIECE + 3).min(size - at) as usize;
        if file.read_exact_at(&mut buf[..n], at).is_err() {
            return Later::Undecided;
        }
        for k in memchr::memmem::find_iter(&buf[..n], pack::RECORD_MAGIC) {
            let x = at + k as u64;
            let mut hb = [0u8; RECORD_HEADER as usize];
            if size - x < RECORD_HEADER || file.read_exact_at(&mut hb, x).is_err() {
                continue;
            }
            let Ok(frame) = pack::parse_frame(&hb) else {
                continue;
            };
            if frame.record_len() > size - x {
                continue;
            }
            candidates += 1;
            hashed = hashed.saturating_add(frame.stored_len);
            if candidates > LATER_CANDIDATES || hashed > LATER_HASHED {
                return Later::Undecided;
            }
            if pack::check_streaming(file, x, &frame) {
                return Later::At(x);
            }
        }
        if at + n as u64 >= size {
            break;
        }
        // Overlap by three bytes: a magic across two pieces is found.
        at += n as u64 - 3;
    }
    Later::None
}

/// The object record of `id` among `entries`, newest first: (offset,
/// record length).
fn record_of(entries: &[Entry], id: &ObjectId) -> Option<(u64, u64)> {
    entries
        .iter()
        .rev()
        .find(|e| e.rtype == RecordType::Object && e.id == *id)
        .map(|e| (e.offset, e.len))
}

/// The largest record a journal may hold: an object under the largest cap.
fn pack_record_max() -> u64 {
    let cap = crate::object::Cap::ANY;
    cap.max + cap.max / 128 + 4096
}

impl View {
    fn empty(session: &SessionId, path: PathBuf, file: File) -> View {
        View {
            session: session.clone(),
            path,
            file: Arc::new(file),
            committed: FILE_HEADER,
            objects: Places::default(),
            entries: Vec::new(),
            head: None,
            head_record: None,
            sidecar_complete: true,
            seen_size: None,
            fault: None,
            newer: None,
            rule: Rule::Ref(None),
            unpublished: Places::default(),
            tail: Vec::new(),
            behind: None,
            ref_fault: false,
            torn_at: None,
            listed_end: FILE_HEADER,
        }
    }

    fn set_fault(&mut self, offset: u64, reason: String) {
        self.fault = Some(Fault { offset, reason });
    }

    /// The journal's fault as an error naming the file and offset.
    pub fn fault_error(&self) -> Option<Error> {
        self.fault.as_ref().map(|f| Error::JournalFault {
            path: self.path.clone(),
            offset: f.offset,
            reason: f.reason.clone(),
        })
    }

    /// The journal's first record of an unknown type, as an error.
    pub fn newer_error(&self) -> Option<Error> {
        self.newer.map(|(offset, rtype)| Error::NewerJournal {
            path: self.path.clone(),
            offset,
            rtype,
        })
    }

    /// `Ok` when this hel may append to the journal: it has no fault and
    /// no record of a type this hel does not know.
    pub fn writable(&self) -> Result<()> {
        match self.fault_error().or_else(|| self.newer_error()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Read the commit record at `offset` and check it as a commit record
    /// whose predecessor is not known (its `seq` and `parent` are checked
    /// by the reads that see the records before it).
    pub fn read_commit(&self, offset: u64) -> Result<Commit> {
        let place = Place {
            path: self.path.clone(),
            offset,
        };
        let (h, stored) = pack::read_record(&self.file, &place, COMMIT_MAX, None)?;
        if h.rtype != RecordType::Commit {
            return Err(pack::damaged(&place, Some(&h.id), "not a commit record"));
        }
        parse_commit(h.id, &stored, &self.session, Prev::Unknown).map_err(|reason| {
            Error::JournalFault {
                path: self.path.clone(),
                offset,
                reason: reason.to_string(),
            }
        })
    }
}

/// The appending side of a journal, held by the session's lease holder.
/// Its view is shared with the process's object database, so what it
/// appends is readable at once.
#[derive(Debug)]
pub(crate) struct Writer {
    pub view: Arc<RwLock<View>>,
    /// The sidecar, when it could be opened (it is only a hint).
    sidecar: Option<File>,
    /// Records appended past the committed end by [`Writer::stage`], not
    /// yet published (the next commit record publishes them).
    staged: Vec<Entry>,
    staged_len: u64,
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Another process may write the journal from now on: readers of
        // this view check its size again before trusting it.
        let mut view = self.view.write().unwrap_or_else(|p| p.into_inner());
        view.seen_size = Some(view.file.metadata().map(|m| m.len()).unwrap_or(0));
    }
}

fn sync_data(file: &File, path: &std::path::Path) -> Result<()> {
    if failpoint::hit("journal-sync") {
        return Err(failpoint::error("journal-sync")).at(path);
    }
    crate::dir::sync_file(file, path, true)
}

/// Make journal `name` in `dir`: its header written and synced under a
/// temporary name in `tmp`, renamed into place, and `dir` synced. So a
/// journal never exists without its header: a full disk or a crash leaves
/// at most a file in `tmp` (which gc removes), and readers, fsck and gc
/// see either no journal or an empty one.
fn create(dir: &Dir, tmp: &Dir, name: &str) -> Result<()> {
    let temp = format!("journal-{}", uuid::Uuid::new_v4().simple());
    let header = pack::file_header(FileKind::Journal);
    Ok(dir.replace(name, &header, 0o600, tmp, &temp)?)
}

impl Writer {
    /// Open (creating when absent) `session`'s journal in `dir` to append
    /// to it, its head chosen by `rule`; a new journal is made in `tmp`
    /// first ([`create`]). What follows the head's commit record (a torn
    /// tail, object records without their commit record) is cut off, and
    /// the sidecar made to list exactly the committed records. A ref one
    /// commit behind is left to the caller ([`View::behind`]), who moves
    /// it. The caller holds the session's lease and the shared store lock.
    pub fn open(dir: &Dir, tmp: &Dir, session: &SessionId, rule: Rule) -> Result<Writer> {
        let name = journal_name(session);
        let fresh = match dir.kind_of(&name)? {
            None => true,
            // Shorter than its header, it holds no commit (a writer that
            // ran out of space while making it). Made again, whole.
            Some(Kind::File) => dir
                .open_file(&name)?
                .map(|f| f.metadata().at(dir.child_path(&name)))
                .transpose()?
                .is_none_or(|m| m.len() < FILE_HEADER),
            // Anything else is refused by the read below, naming it.
            Some(_) => false,
        };
        if fresh {
            create(dir, tmp, &name)?;
        }
        let view = open(dir, session, Mode::Full, rule)?.ok_or_else(|| Error::Io {
            path: dir.child_path(&name),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "journal vanished"),
        })?;
        // Only a torn tail is ever cut: a journal with a fault, or with
        // records of a newer hel, is left exactly as it is.
        view.writable()?;
        // Appends go through a writable descriptor of the same file.
        let file = dir.open_rw(&name, false)?;
        let size = file.metadata().at(&view.path)?.len();
        if size > view.committed {
            file.set_len(view.committed).at(&view.path)?;
            sync_data(&file, &view.path)?;
        }
        // The sidecar is a hint: one that cannot be opened or written costs
        // readers a scan of the journal, never a commit.
        let jidx = jidx_name(session);
        let sidecar = dir.open_rw(&jidx, false).ok().filter(|sidecar| {
            let listed = sidecar.metadata().map(|m| m.len()).unwrap_or(0);
            let want = (JIDX_HEADER + view.entries.len() * JIDX_ENTRY) as u64;
            if view.sidecar_complete && listed == want {
                return true;
            }
            let mut bytes = jidx_header().to_vec();
            for e in &view.entries {
                bytes.extend_from_slice(&encode_entry(e));
            }
            sidecar.set_len(0).is_ok() && sidecar.write_all_at(&bytes, 0).is_ok()
        });
        let mut view = view;
        view.file = Arc::new(file);
        view.seen_size = None;
        view.unpublished.clear();
        view.tail.clear();
        Ok(Writer {
            view: Arc::new(RwLock::new(view)),
            sidecar,
            staged: Vec::new(),
            staged_len: 0,
        })
    }

    /// Append object records past the committed end without a sync and
    /// without publishing them: the next [`Writer::commit`] publishes them
    /// with its record and its one sync. Until then they are a tail that
    /// readers ignore and the next open cuts off.
    pub fn stage(&mut self, records: &[(ObjectId, Vec<u8>)]) -> Result<()> {
        let view = self.view.read().unwrap_or_else(|p| p.into_inner());
        let start = view.committed + self.staged_len;
        let mut bytes = Vec::new();
        let mut entries = Vec::with_capacity(records.len());
        for (id, stored) in records {
            let rec = pack::encode_record(RecordType::Object, id, stored);
            entries.push(Entry {
                id: *id,
                offset: start + bytes.len() as u64,
                len: rec.len() as u64,
                rtype: RecordType::Object,
            });
            bytes.extend_from_slice(&rec);
        }
        if let Err(e) = view.file.write_all_at(&bytes, start).at(&view.path) {
            let _ = view.file.set_len(view.committed);
            drop(view);
            self.discard_staged();
            return Err(e);
        }
        self.staged_len += bytes.len() as u64;
        self.staged.extend(entries);
        Ok(())
    }

    /// Forget what was staged, and cut it off: records left past the
    /// committed end would follow the next, shorter commit.
    pub fn discard_staged(&mut self) {
        if self.staged_len > 0 {
            let view = self.view.read().unwrap_or_else(|p| p.into_inner());
            // Best effort: the next commit cuts whatever is past its end.
            let _ = view.file.set_len(view.committed);
        }
        self.staged.clear();
        self.staged_len = 0;
    }

    /// Append `records` and a commit record publishing `head`, in one
    /// write, make them durable with one sync, then call `publish` (which
    /// moves the session's ref). If any of it fails
    /// nothing is published and what was appended is cut off. Returns the
    /// commit and what `publish` returned: `Some` when the ref moved but
    /// its directory sync failed (then the records are not noted in the
    /// sidecar, which lists only moves that were synced).
    pub fn commit(
        &mut self,
        records: &[(ObjectId, Vec<u8>)],
        head: ObjectId,
        payload: CommitPayload,
        publish: impl FnOnce() -> Result<Option<Error>>,
    ) -> Result<(Commit, Option<Error>)> {
        let mut view = self.view.write().unwrap_or_else(|p| p.into_inner());
        let start = view.committed + self.staged_len;
        let mut bytes = Vec::new();
        let mut entries = std::mem::take(&mut self.staged);
        entries.reserve(records.len() + 1);
        self.staged_len = 0;
        for (id, stored) in records {
            let rec = pack::encode_record(RecordType::Object, id, stored);
            entries.push(Entry {
                id: *id,
                offset: start + bytes.len() as u64,
                len: rec.len() as u64,
                rtype: RecordType::Object,
            });
            bytes.extend_from_slice(&rec);
        }
        let json = crate::canonical::to_vec(
            &serde_json::to_value(&payload)
                .map_err(|e| Error::Internal(format!("cannot encode a commit record: {e}")))?,
        );
        if json.len() as u64 > COMMIT_MAX {
            return Err(Error::Internal("commit record too large".into()));
        }
        let stored = commit_stored(&json)?;
        let rec = pack::encode_record(RecordType::Commit, &head, &stored);
        entries.push(Entry {
            id: head,
            offset: start + bytes.len() as u64,
            len: rec.len() as u64,
            rtype: RecordType::Commit,
        });
        bytes.extend_from_slice(&rec);
        let path = view.path.clone();
        let end = start + bytes.len() as u64;
        // Nothing may follow the commit record: bytes a failed or
        // abandoned write left past it would read as records after it.
        let written = view
            .file
            .write_all_at(&bytes, start)
            .and_then(|()| match view.file.metadata()?.len() > end {
                true => view.file.set_len(end),
                false => Ok(()),
            })
            .at(&path)
            .and_then(|()| sync_data(&view.file, &path))
            .and_then(|()| publish());
        let told = match written {
            Ok(t) => t,
            Err(e) => {
                // Not published: cut what may have landed (a crash
                // before the cut leaves one commit past the ref, durable,
                // which readers read as published and the next writer
                // publishes).
                let _ = view.file.set_len(view.committed);
                return Err(e);
            }
        };
        // Published. The sidecar is a hint: a failure to write it costs a
        // scan of the journal at the next open, nothing else.
        view.committed = end;
        view.rule = Rule::Ref(Some(head));
        let mut side = Vec::with_capacity(entries.len() * JIDX_ENTRY);
        for e in &entries {
            side.extend_from_slice(&encode_entry(e));
            if e.rtype == RecordType::Object {
                view.objects.insert(e.id, (e.offset, e.len));
            }
        }
        let at = (JIDX_HEADER + view.entries.len() * JIDX_ENTRY) as u64;
        // Only a move whose directory sync returned is noted: what the
        // sidecar lists, readers take as published (a ref behind it is a
        // fault), and a move not synced may revert.
        let noted = match &self.sidecar {
            Some(f) if told.is_none() && !failpoint::hit("jidx") => {
                f.write_all_at(&side, at).is_ok()
            }
            _ => false,
        };
        if !noted {
            // Readers will find these records by reading the journal; the
            // sidecar is not used again by this writer.
            self.sidecar = None;
        }
        view.entries.extend_from_slice(&entries);
        let commit = Commit { head, payload };
        view.head = Some(commit.clone());
        view.head_record = record_of(&entries, &head);
        Ok((commit, told))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every read through the pieces is the file's bytes, or the file's
    /// own error: across a piece's end, longer than a piece, at the end,
    /// and when the file is shorter than the scan's size.
    #[test]
    fn reads_ahead_are_the_files_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let piece = Ahead::PIECE as usize;
        let bytes: Vec<u8> = (0..piece * 3 + 77).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        let size = bytes.len() as u64;
        let mut ahead = Ahead::new(&file, size);
        for (at, len) in [
            (0, 56),
            (56, 1000),
            (piece - 10, 56),
            (piece + 5, piece + 9),
            (3, 2),
            (bytes.len() - 56, 56),
            (bytes.len() - 1, 1),
        ] {
            let mut out = vec![0u8; len];
            ahead.read_exact_at(&mut out, at as u64).unwrap();
            assert_eq!(out, bytes[at..at + len], "{at} {len}");
        }
        let mut out = vec![0u8; 10];
        assert!(ahead.read_exact_at(&mut out, size - 5).is_err());
        // Cut shorter than the scan's size: what is there still reads, the
        // rest fails as a read of the file does.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(1000)
            .unwrap();
        let mut ahead = Ahead::new(&file, size);
        let mut out = vec![0u8; 56];
        ahead.read_exact_at(&mut out, 900).unwrap();
        assert_eq!(out, bytes[900..956]);
        assert!(ahead.read_exact_at(&mut out, 990).is_err());
    }

    fn payload(session: &SessionId) -> CommitPayload {
        CommitPayload {
            deps: BTreeSet::new(),
            parent: None,
            seq: 1,
            session: session.clone(),
            summary: Summary::default(),
            time_ms: 0,
            why: "test".into(),
        }
    }

    fn dirs() -> (tempfile::TempDir, Dir, Dir) {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("journals")).unwrap();
        std::fs::create_dir(root.path().join("tmp")).unwrap();
        let journals = Dir::open_path(&root.path().join("journals")).unwrap();
        let tmp = Dir::open_path(&root.path().join("tmp")).unwrap();
        (root, journals, tmp)
    }

    #[test]
    fn a_journal_is_made_with_its_header_and_one_without_is_made_again() {
        let (root, journals, tmp) = dirs();
        let sid = SessionId::new_random();
        // What a full disk may leave: the name, no header.
        std::fs::write(root.path().join("journals").join(journal_name(&sid)), b"").unwrap();
        let mut w = Writer::open(&journals, &tmp, &sid, Rule::Ref(None)).unwrap();
        let head = ObjectId::from_bytes([7; 32]);
        w.commit(&[], head, payload(&sid), || Ok(None)).unwrap();
        drop(w);
        let bytes = std::fs::read(root.path().join("journals").join(journal_name(&sid))).unwrap();
        assert_eq!(bytes[..16], pack::file_header(FileKind::Journal));
        let view = open(&journals, &sid, Mode::Full, Rule::Ref(Some(head)))
            .unwrap()
            .unwrap();
        assert_eq!(view.head.unwrap().head, head);
        // Nothing is left aside.
        assert_eq!(
            std::fs::read_dir(root.path().join("tmp")).unwrap().count(),
            0
        );
    }

    #[test]
    fn a_sidecar_is_read_within_what_its_journal_can_hold() {
        let (root, journals, tmp) = dirs();
        let sid = SessionId::new_random();
        let mut w = Writer::open(&journals, &tmp, &sid, Rule::Ref(None)).unwrap();
        let head = ObjectId::from_bytes([7; 32]);
        w.commit(&[], head, payload(&sid), || Ok(None)).unwrap();
        drop(w);
        let jpath = root.path().join("journals").join(journal_name(&sid));
        let size = std::fs::metadata(&jpath).unwrap().len();
        let side = root.path().join("journals").join(jidx_name(&sid));
        assert_eq!(read_sidecar(&journals, &sid, size, None).unwrap().len(), 1);
        // Entries that say a record is shorter than its header never count:
        // they would chain at one offset forever.
        let mut lies = jidx_header().to_vec();
        for _ in 0..1000 {
            lies.extend_from_slice(&encode_entry(&Entry {
                id: head,
                offset: FILE_HEADER,
                len: 0,
                rtype: RecordType::Object,
            }));
        }
        std::fs::write(&side, &lies).unwrap();
        assert!(read_sidecar(&journals, &sid, size, None)
            .unwrap()
            .is_empty());
        // Valid-looking entries past what the journal can hold are not read.
        let mut many = jidx_header().to_vec();
        for k in 0..1000u64 {
            many.extend_from_slice(&encode_entry(&Entry {
                id: head,
                offset: FILE_HEADER + k * RECORD_HEADER,
                len: RECORD_HEADER,
                rtype: RecordType::Object,
            }));
        }
        std::fs::write(&side, &many).unwrap();
        let fits = (size - FILE_HEADER) / RECORD_HEADER;
        assert_eq!(
            read_sidecar(&journals, &sid, size, None).unwrap().len() as u64,
            fits
        );
        // The journal itself is the truth.
        let view = open(&journals, &sid, Mode::Head, Rule::Ref(Some(head)))
            .unwrap()
            .unwrap();
        assert_eq!(view.head.unwrap().head, head);
    }

    /// A journal with one commit record, written as a commit writes it.
    fn committed(journals: &Dir, tmp: &Dir, sid: &SessionId) -> ObjectId {
        let mut w = Writer::open(journals, tmp, sid, Rule::Ref(None)).unwrap();
        let head = ObjectId::from_bytes([7; 32]);
        let object = ObjectId::from_bytes([8; 32]);
        w.commit(&[(object, vec![1u8; 100])], head, payload(sid), || Ok(None))
            .unwrap();
        head
    }

    #[test]
    fn a_writer_never_opens_a_journal_with_a_fault_or_a_newer_record() {
        let (root, journals, tmp) = dirs();
        let sid = SessionId::new_random();
        committed(&journals, &tmp, &sid);
        let path = root.path().join("journals").join(journal_name(&sid));
        let good = std::fs::read(&path).unwrap();
        let newer = pack::encode_record_raw(9, &ObjectId::from_bytes([3; 32]), b"newer");
        let mut damaged = good.clone();
        damaged[FILE_HEADER as usize + 60] ^= 1;
        for (bytes, want) in [
            ([&good[..], &newer[..]].concat(), "type 9"),
            (damaged, "offset 16"),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            let _ = std::fs::remove_file(root.path().join("journals").join(jidx_name(&sid)));
            let e = Writer::open(&journals, &tmp, &sid, Rule::Ref(None))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
            assert!(std::fs::read(&path).unwrap() == bytes, "{want}: written to");
        }
    }

    #[test]
    fn a_tail_of_record_headers_costs_a_bounded_read_and_is_a_fault() {
        let (root, journals, tmp) = dirs();
        let sid = SessionId::new_random();
        let head = committed(&journals, &tmp, &sid);
        let path = root.path().join("journals").join(journal_name(&sid));
        let mut bytes = std::fs::read(&path).unwrap();
        // Headers that each claim the rest of the file, none of which checks.
        let n = 2000u64;
        for k in 0..n {
            let mut h = pack::encode_record_raw(1, &ObjectId::from_bytes([4; 32]), &[]);
            h[40..48].copy_from_slice(&((n - k) * 56 - 56).to_le_bytes());
            bytes.extend_from_slice(&h[..56]);
        }
        std::fs::write(&path, &bytes).unwrap();
        for mode in [Mode::Head, Mode::Full, Mode::Verify] {
            let view = open(&journals, &sid, mode, Rule::Ref(Some(head)))
                .unwrap()
                .unwrap();
            let fault = view.fault.clone().unwrap();
            assert!(
                fault.reason.contains("too many record headers"),
                "{fault:?}"
            );
            assert_eq!(view.head.map(|c| c.head), Some(head));
        }
    }
}
