//! The summary index `.hel/summaries` (objects-spec §12.9): what a listing
//! shows of each session, so that `hel sessions` reads each session's ref
//! and not its journal and snapshot.
//!
//! It is only a hint. An entry is keyed by its session, the snapshot the
//! ref names and the [`Stamp`]s of the ref file and of the journal, taken
//! before what the entry holds was read; it is used only while the ref
//! still names that snapshot and neither file has changed since (a commit
//! replaces the ref, any write to a journal changes its stamp). A missing,
//! damaged (checksum, syntax, bounds) or stale entry is rebuilt from the
//! ref's commit record and snapshot, exactly as a listing without the index
//! reads them, and the file is rewritten (under `tmp/`, renamed over; never
//! synced). Nothing but a listing reads it: resume, log, fsck and gc read
//! the ref, the journal and the snapshot themselves. Only format-3 stores
//! have one (their heads are refs).

use std::collections::HashMap;
use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::dir::Stamp;
use crate::layout::{Layout, SUMMARIES};
use crate::store::SessionInfo;
use crate::{ObjectId, SessionId};

/// The first line of the file.
const HEADER: &[u8] = b"hel-summaries 1\n";

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

/// One session's entry: the key, then what a listing shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    session: SessionId,
    /// The snapshot the ref named.
    head: ObjectId,
    /// The ref file's stamp.
    #[serde(rename = "ref")]
    ref_stamp: [u64; 4],
    /// The journal's stamp (null: no journal, a format-1 session's ref).
    journal: Option<[u64; 4]>,
    time_ms: u64,
    checkpoints: u64,
    messages: u64,
    instruction: String,
    cwd: String,
}

/// What [`Index::lookup`] read of a session, for [`Index::learn`].
struct Seen {
    session: SessionId,
    head: ObjectId,
    ref_stamp: Stamp,
    journal: Option<Stamp>,
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
    /// False for stores whose heads are not refs (format 2 and older).
    enabled: bool,
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
            enabled: layout.heads_are_refs(),
        };
        if !index.enabled {
            return index;
        }
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

    /// `session`'s listing row from its entry, when the entry is fresh: the
    /// ref names the entry's snapshot and neither the ref file nor the
    /// journal changed since it was made. `None` otherwise (also when the
    /// ref cannot be read: the listing then says why).
    pub fn lookup(
        &mut self,
        layout: &Layout,
        session: &SessionId,
        busy: bool,
    ) -> Option<SessionInfo> {
        self.seen = None;
        if !self.enabled {
            return None;
        }
        // The journal's stamp before the ref's: what is read after both
        // (here or by the listing) is at least as new as they are.
        let journal = match layout.journals() {
            Ok(Some(dir)) => dir.stamp(&crate::journal::journal_name(session)).ok()?,
            Ok(None) => None,
            Err(_) => return None,
        };
        let (head, ref_stamp) = crate::refs::read_stamped(layout, session).ok()??;
        let entry = self.old.remove(session);
        match entry {
            Some(e)
                if e.head == head
                    && Stamp(e.ref_stamp) == ref_stamp
                    && e.journal.map(Stamp) == journal =>
            {
                let info = SessionInfo {
                    id: session.clone(),
                    busy,
                    head: Some(head),
                    updated_ms: e.time_ms,
                    checkpoints: e.checkpoints,
                    messages: e.messages,
                    instruction: e.instruction.clone(),
                    cwd: Some(e.cwd.clone()),
                    future: false,
                    broken: None,
                };
                self.new.push(e);
                Some(info)
            }
            stale => {
                self.dirty |= stale.is_some();
                self.seen = Some(Seen {
                    session: session.clone(),
                    head,
                    ref_stamp,
                    journal,
                });
                None
            }
        }
    }

    /// Keep `info`, the row the listing just read without the index for
    /// the session of the last [`Index::lookup`], as its entry: when it is
    /// of the snapshot that lookup saw and whole (readable, with a cwd).
    pub fn learn(&mut self, info: &SessionInfo) {
        let Some(seen) = self.seen.take() else {
            return;
        };
        let (Some(head), None, Some(cwd)) = (info.head, &info.broken, &info.cwd) else {
            return;
        };
        if seen.session != info.id || seen.head != head {
            return;
        }
        self.dirty = true;
        self.new.push(Entry {
            session: seen.session,
            head,
            ref_stamp: seen.ref_stamp.0,
            journal: seen.journal.map(|s| s.0),
            time_ms: info.updated_ms,
            checkpoints: info.checkpoints,
            messages: info.messages,
            instruction: info.instruction.clone(),
            cwd: cwd.clone(),
        });
    }

    /// Rewrite the file when anything changed: every entry of a listed
    /// session, by rename from `tmp/`, not synced. A failure is ignored
    /// (the next listing rebuilds what is missing).
    pub fn save(mut self, layout: &Layout) {
        // Entries of sessions that were not listed (deleted) are dropped.
        if !self.enabled || (!self.dirty && self.old.is_empty()) {
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

fn canonical(e: &Entry) -> Vec<u8> {
    crate::canonical::to_vec(&serde_json::to_value(e).unwrap_or_default())
}

fn checksum(json: &[u8]) -> String {
    let hash = blake3::hash(json);
    let mut hex = hash.to_hex().to_string();
    hex.truncate(CHECK_HEX);
    hex
}

/// What fsck says of the index (None: absent, or sound): a damaged or
/// unreadable index is reported, never trusted, and the next listing
/// rebuilds it. Only format-3 stores have one.
pub(crate) fn check(layout: &Layout) -> Option<String> {
    if !layout.heads_are_refs() {
        return None;
    }
    let path = layout.root().child_path(SUMMARIES);
    match layout.root().read_file(SUMMARIES, FILE_MAX) {
        Ok(None) => None,
        Ok(Some(bytes)) => parse(&bytes).1.then(|| {
            format!(
                "the summary index {} has damaged entries; they are not used, and the next listing rebuilds it",
                path.display()
            )
        }),
        Err(e) => Some(format!(
            "the summary index cannot be read ({e}); it is not used, and the next listing replaces it"
        )),
    }
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
    for line in body.split_inclusive(|b| *b == b'\n') {
        match parse_line(line) {
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
    if check != checksum(json).as_bytes() {
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
    let written = (|| {
        let mut f = tmp.create_new(&name, 0o600)?;
        f.write_all(bytes).map_err(|source| crate::Error::Io {
            path: tmp.child_path(&name),
            source,
        })?;
        tmp.rename_to(&name, layout.root(), SUMMARIES)
    })();
    if written.is_err() {
        let _ = tmp.remove_file(&name);
    }
    written
}
