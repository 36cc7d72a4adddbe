//! The operation log (objects-spec §8.3): one entry per operation that
//! changed which sessions exist, what they are called, whose they are or
//! where their refs point, other than an ordinary commit (delete,
//! undelete, rename, fork, import, pull, relocate, purge, gc, and an undo
//! of any of those). Each entry holds what reverts it: per session, the
//! ref, the name and the ownership before and after.
//!
//! The log is the directory `.hel/oplog/`, one file per entry, named
//! `<time_ms, 16 digits>-<op, 32 hex digits>` so that names sort in the
//! order the entries were made. An entry is written as a ref is: to a new
//! file under `tmp/`, synced, renamed into `oplog/`, and `oplog/` synced;
//! a crash leaves the entry whole or absent (and at most a `tmp/` file).
//! Nothing rewrites an entry; expired ones are unlinked.
//!
//! Every entry is read as hostile input: never through a link, at most
//! [`ENTRY_MAX`] bytes, parsed by the bounded JSON reader, every field
//! checked (its name agrees with its `op` and `time_ms`, no date in the
//! future, valid ids and names). One that is not an entry is a fault
//! naming its file ([`Error::BadOpLog`]): `hel fsck` reports it, gc refuses
//! while it is there (it may have named a checkpoint a revertible
//! operation needs), and no session is ever lost or changed for it.
//!
//! `hel op undo` (`opundo.rs`, above gc) reverts one operation after checking that
//! every session it touched is still as the operation left it; the undo
//! is itself an entry (kind `undo`, `undoes` naming the operation) whose
//! changes are the inverse ones, so it can be undone in turn. An undo
//! changes the store first and appends its entry last: one cut short by a
//! crash leaves sessions as they were or as the undo makes them, and
//! running the same undo again finds them reverted and only appends the
//! entry.
//!
//! Heads named by unexpired entries of revertible kinds are gc roots
//! (`opundo::roots`), so gc never reclaims what an undo needs. A purge's
//! entries are not roots (a purge exists to make what it removed go at
//! the next gc), nor a gc's (there is nothing to revert).

use serde::{Deserialize, Serialize};

use crate::odb::Odb;
use crate::{json, time, Error, ObjectId, Result, SessionId, Store};

/// The log's directory under `.hel/`.
pub const DIR: &str = "oplog";

/// The largest entry file read.
pub const ENTRY_MAX: u64 = 256 << 10;

/// The most entries read (the newest; older ones are left unread).
pub const ENTRIES_MAX: usize = 10_000;

/// The most sessions one entry names.
pub const CHANGES_MAX: usize = 1_000;

/// The longest `note`, in characters.
pub const NOTE_MAX: usize = 500;

/// How long an entry stays revertible (and keeps what it needs from gc)
/// by default: the trash's period.
pub const EXPIRY_MS: u64 = 30 * 24 * 3600 * 1000;

/// How far past this machine's clock an entry may be dated before it is
/// refused as dated in the future (clocks of machines sharing a store
/// differ a little; an entry a day ahead would never expire on time).
pub const FUTURE_SLACK_MS: u64 = 24 * 3600 * 1000;

/// The bounded parse's limits: every change's values, and a few more.
const LIMITS: json::Limits = json::Limits {
    max_values: (CHANGES_MAX as u64) * 16 + 64,
    max_depth: 5,
};

/// The format's one version.
const VERSION: u64 = 1;

/// What kind of operation an entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Delete,
    Undelete,
    Rename,
    Fork,
    Import,
    Pull,
    Relocate,
    Purge,
    Gc,
    Undo,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Delete => "delete",
            Kind::Undelete => "undelete",
            Kind::Rename => "rename",
            Kind::Fork => "fork",
            Kind::Import => "import",
            Kind::Pull => "pull",
            Kind::Relocate => "relocate",
            Kind::Purge => "purge",
            Kind::Gc => "gc",
            Kind::Undo => "undo",
        }
    }

    /// Do the heads its entries name stay gc roots until they expire?
    pub(crate) fn keeps(self) -> bool {
        !matches!(self, Kind::Purge | Kind::Gc)
    }
}

/// A value before and after an operation (`None`: there was none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Move<T> {
    pub after: Option<T>,
    pub before: Option<T>,
}

impl<T: PartialEq> Move<T> {
    pub fn new(before: Option<T>, after: Option<T>) -> Move<T> {
        Move { after, before }
    }

    pub(crate) fn inverse(self) -> Move<T> {
        Move {
            after: self.before,
            before: self.after,
        }
    }
}

/// What an operation did to one session. A `head` of `None` (before or
/// after) means the session did not exist then (never made, or in the
/// trash); `own` is whether it was the project's own (objects-spec §1.4).
/// Fields left `None` were not changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    pub head: Option<Move<ObjectId>>,
    pub name: Option<Move<String>>,
    pub own: Option<Move<bool>>,
    pub session: SessionId,
}

impl Change {
    /// A change of `session` with nothing changed yet.
    pub fn of(session: &SessionId) -> Change {
        Change {
            head: None,
            name: None,
            own: None,
            session: session.clone(),
        }
    }

    pub fn head(mut self, before: Option<ObjectId>, after: Option<ObjectId>) -> Change {
        self.head = Some(Move::new(before, after));
        self
    }

    pub fn name(mut self, before: Option<String>, after: Option<String>) -> Change {
        self.name = Some(Move::new(before, after));
        self
    }

    pub fn own(mut self, before: bool, after: bool) -> Change {
        self.own = Some(Move::new(Some(before), Some(after)));
        self
    }

    pub(crate) fn inverse(self) -> Change {
        Change {
            head: self.head.map(Move::inverse),
            name: self.name.map(Move::inverse),
            own: self.own.map(Move::inverse),
            session: self.session,
        }
    }

    /// Does reverting it move the session in or out of the trash?
    pub(crate) fn trashes(&self) -> bool {
        matches!(&self.head, Some(m) if m.before.is_none() != m.after.is_none())
    }
}

/// One entry of the log. Fields in the order of their keys' bytes, so
/// serde_json's compact output is canonical JSON (objects-spec §3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub changes: Vec<Change>,
    pub kind: Kind,
    /// What it did, for people (a gc: what it reclaimed).
    pub note: String,
    /// The operation's id: 32 lowercase hex digits.
    pub op: String,
    pub time_ms: u64,
    /// An undo's: the operation it reverted.
    pub undoes: Option<String>,
    pub version: u64,
}

impl Entry {
    /// When it stops being revertible, with expiry period `period_ms`.
    pub fn expires_ms(&self, period_ms: u64) -> u64 {
        self.time_ms.saturating_add(period_ms)
    }

    /// The file name it is stored under.
    pub(crate) fn file_name(&self) -> String {
        format!("{:016}-{}", self.time_ms, self.op)
    }
}

fn is_op(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `name`'s time and op, when it is an entry's file name.
fn parse_name(name: &str) -> Option<(u64, &str)> {
    let (t, op) = name.split_once('-')?;
    if t.len() != 16 || !t.bytes().all(|b| b.is_ascii_digit()) || !is_op(op) {
        return None;
    }
    Some((t.parse().ok()?, op))
}

/// Check an entry read from `file` (named `name`) as the format says.
fn check(entry: &Entry, name: &str, now_ms: u64) -> std::result::Result<(), String> {
    if entry.version != VERSION {
        return Err(format!(
            "version {}, this hel reads version {VERSION}",
            entry.version
        ));
    }
    if entry.file_name() != name {
        return Err("its name is not <time_ms>-<op> of what it holds".into());
    }
    if entry.time_ms > now_ms.saturating_add(FUTURE_SLACK_MS) {
        return Err(format!(
            "dated {} ({}), in the future",
            entry.time_ms,
            time::rfc3339(entry.time_ms.min(253_402_300_799_999))
        ));
    }
    if entry.changes.len() > CHANGES_MAX {
        return Err(format!("over {CHANGES_MAX} changes"));
    }
    if entry.note.chars().count() > NOTE_MAX {
        return Err(format!("a note over {NOTE_MAX} characters"));
    }
    match (&entry.kind, &entry.undoes) {
        (Kind::Undo, Some(op)) if is_op(op) && *op != entry.op => {}
        (Kind::Undo, _) => return Err("an undo that names no other operation".into()),
        (_, Some(_)) => return Err("undoes set on an entry that is no undo".into()),
        (_, None) => {}
    }
    let mut seen = std::collections::HashSet::new();
    for c in &entry.changes {
        if !seen.insert(&c.session) {
            return Err(format!("session {} named twice", c.session));
        }
        if matches!(&c.name, Some(n) if n.before.iter().chain(n.after.iter()).any(|n| n.len() > 64))
        {
            return Err(format!("session {}: a name over 64 bytes", c.session));
        }
        if matches!(&c.own, Some(m) if m.before.is_none() || m.after.is_none()) {
            return Err(format!("session {}: own is not two booleans", c.session));
        }
    }
    Ok(())
}

/// The log as read: its entries, oldest first, and the files that are not
/// entries (each a fault naming the file).
#[derive(Debug, Default)]
pub struct Log {
    pub entries: Vec<Entry>,
    pub damaged: Vec<Error>,
    /// Entry files left unread past [`ENTRIES_MAX`].
    pub unread: usize,
}

pub(crate) fn bad(layout: &Odb, name: &str, reason: impl Into<String>) -> Error {
    Error::BadOpLog {
        path: layout.root().path().join(DIR).join(name),
        reason: reason.into(),
    }
}

/// Read the log of the store open as `layout`.
pub(crate) fn read_log(layout: &Odb) -> Result<Log> {
    let mut log = Log::default();
    let dir = match layout.root().sub(DIR) {
        Ok(Some(d)) => d,
        Ok(None) => return Ok(log),
        Err(e) => {
            log.damaged.push(e.into());
            return Ok(log);
        }
    };
    let now = crate::trashed::now_ms();
    let mut names: Vec<String> = Vec::new();
    for e in dir.entries()? {
        match e.name_str() {
            Some(n) if parse_name(n).is_some() => names.push(n.to_owned()),
            _ => log.damaged.push(bad(
                layout,
                &e.name.to_string_lossy(),
                format!(
                    "a {} not named <16 digits>-<32 hex digits>",
                    e.kind.describe()
                ),
            )),
        }
    }
    names.sort();
    if names.len() > ENTRIES_MAX {
        log.unread = names.len() - ENTRIES_MAX;
        names.drain(..log.unread);
    }
    for name in names {
        let bytes = match dir.read_file(&name, ENTRY_MAX) {
            Ok(Some(b)) => b,
            Ok(None) => continue,
            Err(hel_fs::Error::TooLarge { size, max, .. }) => {
                log.damaged.push(bad(
                    layout,
                    &name,
                    format!("{size} bytes, over the {max} an entry may have"),
                ));
                continue;
            }
            Err(e) => {
                log.damaged.push(e.into());
                continue;
            }
        };
        let entry: Entry = match json::from_slice(&bytes, LIMITS) {
            Ok(e) => e,
            Err(e) => {
                log.damaged
                    .push(bad(layout, &name, format!("not an entry: {e}")));
                continue;
            }
        };
        match check(&entry, &name, now) {
            Ok(()) => log.entries.push(entry),
            Err(reason) => log.damaged.push(bad(layout, &name, reason)),
        }
    }
    Ok(log)
}

/// The log of `store`, oldest first.
pub fn log(store: &Store) -> Result<Log> {
    match store.layout_for_gc()? {
        Some(layout) => read_log(layout),
        None => Ok(Log::default()),
    }
}

/// Append an entry: written aside, synced, renamed into `oplog/`,
/// `oplog/` synced. Its time is after every entry's already there (ties
/// would leave "the last" undecided). Gives the entry written.
pub fn record(store: &Store, kind: Kind, changes: Vec<Change>, note: &str) -> Result<Entry> {
    append(store, kind, changes, note, None)
}

pub(crate) fn append(
    store: &Store,
    kind: Kind,
    mut changes: Vec<Change>,
    note: &str,
    undoes: Option<String>,
) -> Result<Entry> {
    let layout = store.layout_create()?;
    let dir = crate::trashed::made(layout, DIR)?;
    let now = crate::trashed::now_ms();
    let mut time_ms = now;
    let mut expired = Vec::new();
    for e in dir.entries()? {
        if let Some((t, _)) = e.name_str().and_then(parse_name) {
            if t <= now.saturating_add(FUTURE_SLACK_MS) && t >= time_ms {
                time_ms = t + 1;
            }
            // Expired long enough that no undo of it is shown (it stays
            // listed, marked expired, for as long again).
            if t.saturating_add(2 * EXPIRY_MS) <= now {
                expired.extend(e.name_str().map(str::to_owned));
            }
        }
    }
    // An unlink is whole or not done: one left by a crash goes next time;
    // one that fails (not a file: fsck names it) never stops an append.
    for name in expired {
        let _ = dir.remove_file(&name);
    }
    changes.truncate(CHANGES_MAX);
    let entry = Entry {
        changes,
        kind,
        note: note.chars().take(NOTE_MAX).collect(),
        op: uuid::Uuid::new_v4().simple().to_string(),
        time_ms,
        undoes,
        version: VERSION,
    };
    let mut bytes = serde_json::to_vec(&entry)
        .map_err(|e| Error::Internal(format!("operation log entry not encoded: {e}")))?;
    bytes.push(b'\n');
    let tmp = layout.tmp_create()?;
    let name = entry.file_name();
    let mut f = tmp.new_file(&format!("op-{}", entry.op), 0o600)?;
    f.write_all(&bytes)?;
    f.sync()?;
    crate::failpoint::kill("oplog-before-rename");
    f.persist(&dir, &name)?;
    dir.sync()?;
    crate::failpoint::kill("oplog-appended");
    Ok(entry)
}

/// Record a purge: for each session, the head it had and the head the
/// purge gave it. Revertible while the old heads are stored; they are no
/// gc roots (what a purge removed goes at the next gc).
pub fn record_purge(store: &Store, moved: &[(SessionId, ObjectId, ObjectId)]) -> Result<Entry> {
    let changes = moved
        .iter()
        .map(|(s, old, new)| Change::of(s).head(Some(*old), Some(*new)))
        .collect();
    record(
        store,
        Kind::Purge,
        changes,
        &format!("rewrote {} session(s) without their secrets", moved.len()),
    )
}

/// Record what a gc reclaimed: `sessions` (abandoned ones it removed),
/// and how many objects, bytes and journals of deleted sessions (nothing
/// when it reclaimed nothing).
pub(crate) fn record_gc(
    store: &Store,
    sessions: &[SessionId],
    objects: u64,
    bytes: u64,
    journals: u64,
) -> Result<()> {
    if objects == 0 && bytes == 0 && journals == 0 && sessions.is_empty() {
        return Ok(());
    }
    let changes = sessions
        .iter()
        .map(|s| Change::of(s).head(None, None))
        .collect();
    let note = format!(
        "reclaimed {objects} object(s), {bytes} byte(s), {journals} journal(s) of deleted sessions, {} abandoned session(s)",
        sessions.len()
    );
    record(store, Kind::Gc, changes, &note).map(|_| ())
}

thread_local! {
    /// Set while an undo moves sessions in or out of the trash: the undo's
    /// own entry records that, not a delete's or an undelete's.
    static UNDOING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f` as an undo's step (see [`UNDOING`]).
pub(crate) fn undoing<T>(f: impl FnOnce() -> T) -> T {
    UNDOING.with(|u| u.set(true));
    let out = f();
    UNDOING.with(|u| u.set(false));
    out
}

/// The trash's call once `session` (at `head`, named `name`) went to it
/// (`deleted`) or came back from it (with `name` given back): the
/// delete's or undelete's entry (none inside an undo, whose own entry
/// says it). The session is safe in the trash or listed either way: an
/// entry that cannot be written only takes `hel op undo` away, so it is
/// no failure of the delete or undelete.
pub(crate) fn trashed(
    store: &Store,
    session: &SessionId,
    head: ObjectId,
    name: Option<&str>,
    deleted: bool,
) {
    if UNDOING.with(|u| u.get()) {
        return;
    }
    let name = name.map(str::to_owned);
    let (kind, change) = if deleted {
        let c = Change::of(session).head(Some(head), None);
        (
            Kind::Delete,
            if name.is_some() {
                c.name(name, None)
            } else {
                c
            },
        )
    } else {
        let c = Change::of(session).head(None, Some(head));
        (
            Kind::Undelete,
            if name.is_some() {
                c.name(None, name)
            } else {
                c
            },
        )
    };
    let _ = record(store, kind, vec![change], "");
}

/// Record what a pull or a bundle import (`kind`) did to `session` when
/// it brought `head` in: a new session (`from` none) or its ref moved
/// forward from `from`. (A fork it made instead is the fork's entry.)
pub fn record_adopted(
    store: &Store,
    kind: Kind,
    session: &SessionId,
    from: Option<ObjectId>,
    head: ObjectId,
) -> Result<()> {
    record(
        store,
        kind,
        vec![Change::of(session).head(from, Some(head))],
        "",
    )
    .map(|_| ())
}
