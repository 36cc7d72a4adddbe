//! Journals: each session's append-only pack (objects-spec §12.3).
//!
//! `packs/journals/<session>.journal` is a pack file (see `pack.rs`) that
//! only the session's lease holder appends to. A commit appends the
//! records of its new objects and then one **commit record** that names
//! the snapshot it publishes, in one write, and makes them durable with one
//! `fdatasync`: the session's ref rides in its journal. The session's head
//! is the last valid commit record; anything after it (a torn tail of a
//! commit that died) is ignored by readers and truncated by the next
//! writer before it appends.
//!
//! `packs/journals/<session>.jidx` lists the journal's records (id,
//! offset, length, type), appended after each commit and never synced: a
//! hint that saves reading the journal to find its records. Readers check
//! what it says (entries must chain; the last commit record's check must
//! hold) and read the journal itself past its end.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::dir::{Dir, Kind};
use crate::error::IoContext;
use crate::pack::{self, FileKind, Header, Place, RecordType, FILE_HEADER, RECORD_HEADER};
use crate::snapshot::Summary;
use crate::{failpoint, Error, ObjectId, Result, SessionId};

pub(crate) const JOURNAL_EXT: &str = "journal";
pub(crate) const JIDX_EXT: &str = "jidx";
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

/// What a commit record says (canonical JSON, objects-spec §12.3).
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
    pub objects: HashMap<ObjectId, (u64, u64)>,
    /// Every record within `committed`, in order.
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
}

/// Parse and check a commit record's stored bytes.
fn parse_commit(
    header: &Header,
    stored: &[u8],
    place: &Place,
    session: &SessionId,
) -> Result<Commit> {
    let payload: CommitPayload = serde_json::from_slice(stored).map_err(|e| {
        pack::damaged(
            place,
            Some(&header.id),
            format!("malformed commit record: {e}"),
        )
    })?;
    if payload.session != *session {
        return Err(pack::damaged(
            place,
            Some(&header.id),
            format!(
                "a commit record of session {} in this session's journal",
                payload.session
            ),
        ));
    }
    Ok(Commit {
        head: header.id,
        payload,
    })
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

/// Open `session`'s journal for reading, if it exists. With `full`, every
/// committed record is indexed; without, only the head is found (listings).
pub(crate) fn open(dir: &Dir, session: &SessionId, full: bool) -> Result<Option<View>> {
    let name = journal_name(session);
    let Some(file) = dir.open_file(&name)? else {
        return Ok(None);
    };
    let path = dir.child_path(&name);
    let size = file.metadata().at(&path)?.len();
    let mut fh = [0u8; FILE_HEADER as usize];
    if size < FILE_HEADER || file.read_exact_at(&mut fh, 0).is_err() {
        // Created, not yet written: no commit.
        return Ok(Some(View::empty(session, path, file)));
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
    let mut sidecar = read_sidecar(
        dir,
        session,
        size,
        if full { None } else { Some(TAIL_ENTRIES) },
    );
    if !full
        && sidecar
            .as_ref()
            .is_some_and(|es| !es.iter().any(|e| e.rtype == RecordType::Commit))
    {
        // One commit wrote more records than the tail holds.
        sidecar = read_sidecar(dir, session, size, None);
    }
    // Trust the sidecar's entries up to the last commit record that checks
    // out and that they chain to.
    let mut start = FILE_HEADER;
    if let Some(entries) = sidecar {
        let chain_from = entries.first().map_or(FILE_HEADER, |e| e.offset);
        let chained = if full {
            chain_from == FILE_HEADER
        } else {
            true
        };
        let mut expect = chain_from;
        let mut upto = 0;
        for (k, e) in entries.iter().enumerate() {
            if !chained
                || e.offset != expect
                || e.offset.checked_add(e.len).is_none_or(|end| end > size)
            {
                break;
            }
            expect = e.offset + e.len;
            if e.rtype == RecordType::Commit {
                upto = k + 1;
            }
        }
        // The last commit entry within the chain, checked.
        let mut k = upto;
        while k > 0 {
            let e = entries[k - 1];
            if e.rtype == RecordType::Commit {
                if let Ok(c) = view.read_commit(e.offset) {
                    view.head_record = record_of(&entries[..k - 1], &c.head);
                    view.head = Some(c);
                    view.committed = e.offset + e.len;
                    start = view.committed;
                    if full {
                        view.entries = entries[..k].to_vec();
                    }
                    break;
                }
            }
            k -= 1;
        }
    }
    // Past what the sidecar told: read the journal itself.
    view.sidecar_complete = true;
    let mut at = start;
    let mut pending: Vec<Entry> = Vec::new();
    while at + RECORD_HEADER <= size {
        let place = Place {
            path: view.path.clone(),
            offset: at,
        };
        let max = size - at - RECORD_HEADER;
        let Ok((h, stored)) =
            pack::read_record(&view.file, &place, max.min(pack_record_max()), None)
        else {
            break; // a torn or foreign tail: not committed
        };
        let entry = Entry {
            id: h.id,
            offset: at,
            len: h.record_len(),
            rtype: h.rtype,
        };
        pending.push(entry);
        at += h.record_len();
        if h.rtype == RecordType::Commit {
            match parse_commit(&h, &stored, &place, session) {
                Ok(c) => {
                    view.head_record = record_of(&pending, &c.head);
                    view.head = Some(c);
                    view.committed = at;
                    view.sidecar_complete = false;
                    if full {
                        view.entries.append(&mut pending);
                    } else {
                        pending.clear();
                    }
                }
                Err(_) => break,
            }
        }
    }
    if full && start == FILE_HEADER && !view.entries.is_empty() {
        view.sidecar_complete = false;
    }
    if full {
        for e in &view.entries {
            if e.rtype == RecordType::Object {
                view.objects.insert(e.id, (e.offset, e.len));
            }
        }
        view.head_record = view
            .head
            .as_ref()
            .and_then(|c| view.objects.get(&c.head).copied());
    }
    Ok(Some(view))
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
            objects: HashMap::new(),
            entries: Vec::new(),
            head: None,
            head_record: None,
            sidecar_complete: true,
            seen_size: None,
        }
    }

    /// Read and check the commit record at `offset`.
    pub fn read_commit(&self, offset: u64) -> Result<Commit> {
        let place = Place {
            path: self.path.clone(),
            offset,
        };
        let (h, stored) = pack::read_record(&self.file, &place, COMMIT_MAX, None)?;
        if h.rtype != RecordType::Commit {
            return Err(pack::damaged(&place, Some(&h.id), "not a commit record"));
        }
        parse_commit(&h, &stored, &place, &self.session)
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
    let path = tmp.child_path(&temp);
    let made = (|| {
        let mut f = tmp.create_new(&temp, 0o600)?;
        f.write_all(&pack::file_header(FileKind::Journal))
            .at(&path)?;
        crate::dir::sync_file(&f, &path, false)?;
        tmp.rename_to(&temp, dir, name)
    })();
    if made.is_err() {
        let _ = tmp.remove_file(&temp);
    }
    made?;
    dir.sync()
}

impl Writer {
    /// Open (creating when absent) `session`'s journal in `dir` to append
    /// to it; a new journal is made in `tmp` first ([`create`]). A torn
    /// tail past the last commit record is cut off, and the sidecar made
    /// to list exactly the committed records. The caller holds the
    /// session's lease and the shared store lock.
    pub fn open(dir: &Dir, tmp: &Dir, session: &SessionId) -> Result<Writer> {
        let name = journal_name(session);
        let fresh = match dir.kind_of(&name)? {
            None => true,
            // Shorter than its header, it holds no commit: an older hel
            // began it and ran out of space. Made again, whole.
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
        let view = open(dir, session, true)?.ok_or_else(|| Error::Io {
            path: dir.child_path(&name),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "journal vanished"),
        })?;
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

    /// Forget what was staged (the next commit writes over it).
    pub fn discard_staged(&mut self) {
        self.staged.clear();
        self.staged_len = 0;
    }

    /// Append `records` and a commit record publishing `head`, in one
    /// write, and make them durable with one sync. Returns the commit.
    pub fn commit(
        &mut self,
        records: &[(ObjectId, Vec<u8>)],
        head: ObjectId,
        payload: CommitPayload,
    ) -> Result<Commit> {
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
        let rec = pack::encode_record(RecordType::Commit, &head, &json);
        entries.push(Entry {
            id: head,
            offset: start + bytes.len() as u64,
            len: rec.len() as u64,
            rtype: RecordType::Commit,
        });
        bytes.extend_from_slice(&rec);
        let path = view.path.clone();
        let written = view
            .file
            .write_all_at(&bytes, start)
            .at(&path)
            .and_then(|()| sync_data(&view.file, &path));
        if let Err(e) = written {
            // Nothing was published: cut what may have landed.
            let _ = view.file.set_len(view.committed);
            return Err(e);
        }
        // Published. The sidecar is a hint: a failure to write it costs a
        // scan of the journal at the next open, nothing else.
        view.committed = start + bytes.len() as u64;
        let mut side = Vec::with_capacity(entries.len() * JIDX_ENTRY);
        for e in &entries {
            side.extend_from_slice(&encode_entry(e));
            if e.rtype == RecordType::Object {
                view.objects.insert(e.id, (e.offset, e.len));
            }
        }
        let at = (JIDX_HEADER + view.entries.len() * JIDX_ENTRY) as u64;
        let noted = match &self.sidecar {
            Some(f) if !failpoint::hit("jidx") => f.write_all_at(&side, at).is_ok(),
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
        Ok(commit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // What an older hel left on a full disk: the name, no header.
        std::fs::write(root.path().join("journals").join(journal_name(&sid)), b"").unwrap();
        let mut w = Writer::open(&journals, &tmp, &sid).unwrap();
        let head = ObjectId::from_bytes([7; 32]);
        w.commit(&[], head, payload(&sid)).unwrap();
        drop(w);
        let bytes = std::fs::read(root.path().join("journals").join(journal_name(&sid))).unwrap();
        assert_eq!(bytes[..16], pack::file_header(FileKind::Journal));
        let view = open(&journals, &sid, true).unwrap().unwrap();
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
        let mut w = Writer::open(&journals, &tmp, &sid).unwrap();
        let head = ObjectId::from_bytes([7; 32]);
        w.commit(&[], head, payload(&sid)).unwrap();
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
        let view = open(&journals, &sid, false).unwrap().unwrap();
        assert_eq!(view.head.unwrap().head, head);
    }
}
