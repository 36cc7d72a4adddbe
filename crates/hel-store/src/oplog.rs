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
//! `hel op undo` ([`undo`]) reverts one operation after checking that
//! every session it touched is still as the operation left it; the undo
//! is itself an entry (kind `undo`, `undoes` naming the operation) whose
//! changes are the inverse ones, so it can be undone in turn. An undo
//! changes the store first and appends its entry last: one cut short by a
//! crash leaves sessions as they were or as the undo makes them, and
//! running the same undo again finds them reverted and only appends the
//! entry.
//!
//! Heads named by unexpired entries of revertible kinds are gc roots
//! ([`roots`]), so gc never reclaims what an undo needs. A purge's
//! entries are not roots (a purge exists to make what it removed go at
//! the next gc), nor a gc's (there is nothing to revert).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::journal::CommitPayload;
use crate::layout::DIR_MODE;
use crate::lock::{SessionLease, Shared};
use crate::odb::Odb;
use crate::write::Writer;
use crate::{heads, json, time, Error, ObjectId, Result, SessionId, Store};

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
    fn keeps(self) -> bool {
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

    fn inverse(self) -> Move<T> {
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

    fn inverse(self) -> Change {
        Change {
            head: self.head.map(Move::inverse),
            name: self.name.map(Move::inverse),
            own: self.own.map(Move::inverse),
            session: self.session,
        }
    }

    /// Does reverting it move the session in or out of the trash?
    fn trashes(&self) -> bool {
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
    fn file_name(&self) -> String {
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
        if let Some(n) = &c.name {
            for name in n.before.iter().chain(n.after.iter()) {
                crate::check_name(name)
                    .map_err(|_| format!("{name:?} (session {}) is not a name", c.session))?;
            }
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

fn bad(layout: &Odb, name: &str, reason: impl Into<String>) -> Error {
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

fn append(
    store: &Store,
    kind: Kind,
    mut changes: Vec<Change>,
    note: &str,
    undoes: Option<String>,
) -> Result<Entry> {
    let layout = store.layout_create()?;
    let dir = match layout.root().sub(DIR)? {
        Some(d) => d,
        None => {
            let d = layout.root().sub_create(DIR, DIR_MODE)?;
            layout.root().sync()?;
            d
        }
    };
    let now = crate::trashed::now_ms();
    let mut time_ms = now;
    for e in dir.entries()? {
        if let Some((t, _)) = e.name_str().and_then(parse_name) {
            if t <= now.saturating_add(FUTURE_SLACK_MS) && t >= time_ms {
                time_ms = t + 1;
            }
        }
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

/// The checkpoints unexpired entries of revertible kinds name (gc's extra
/// roots): those stored, each read as a snapshot of the session the entry
/// names. An entry that is not one, or that names a checkpoint of another
/// session, is the error: gc then refuses, as it does for a ref it
/// cannot read.
pub(crate) fn roots(layout: &Odb) -> Result<Vec<ObjectId>> {
    let log = read_log(layout)?;
    if let Some(e) = log.damaged.into_iter().next() {
        return Err(e);
    }
    let now = crate::trashed::now_ms();
    let mut out = Vec::new();
    for entry in log.entries {
        if !entry.kind.keeps() || entry.expires_ms(EXPIRY_MS) <= now {
            continue;
        }
        for c in &entry.changes {
            let Some(m) = &c.head else { continue };
            for id in m.before.iter().chain(m.after.iter()) {
                if layout.index().locate(layout, id)?.is_none() {
                    continue;
                }
                let cp = crate::read::snapshot(layout, id)
                    .map_err(|e| bad(layout, &entry.file_name(), format!("it names {id}: {e}")))?;
                if cp.session_id != c.session {
                    return Err(bad(
                        layout,
                        &entry.file_name(),
                        format!(
                            "it names checkpoint {id} of session {} as session {}'s",
                            cp.session_id, c.session
                        ),
                    ));
                }
                out.push(*id);
            }
        }
    }
    Ok(out)
}

/// fsck's check of the log: each file that is not an entry, and each
/// entry naming a checkpoint of another session, is a fault.
pub(crate) fn faults(layout: &Odb) -> Result<Vec<Error>> {
    let log = read_log(layout)?;
    if !log.damaged.is_empty() {
        return Ok(log.damaged);
    }
    Ok(roots(layout).err().into_iter().collect())
}

/// What [`undo`] did: the entry it reverted and the entry it appended.
#[derive(Debug)]
pub struct Undone {
    pub undid: Entry,
    pub entry: Entry,
}

/// The entry `spec` names: a prefix of at least 4 hex digits of an op
/// id, or (`None`) the newest entry that is not a gc's.
fn find<'a>(log: &'a Log, spec: Option<&str>) -> Result<&'a Entry> {
    let refuse = |op: &str, reason: String| Error::CannotUndo {
        op: op.to_owned(),
        reason,
    };
    match spec {
        None => log
            .entries
            .iter()
            .rev()
            .find(|e| e.kind != Kind::Gc)
            .ok_or_else(|| refuse("(last)", "the operation log is empty".into())),
        Some(p) => {
            if p.len() < 4 || !p.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                return Err(refuse(
                    p,
                    "name an operation by 4 or more hex digits of its id (`hel op log` lists them)"
                        .into(),
                ));
            }
            let found: Vec<&Entry> = log.entries.iter().filter(|e| e.op.starts_with(p)).collect();
            match found.as_slice() {
                [one] => Ok(one),
                [] => Err(refuse(p, "no such operation in the log".into())),
                _ => Err(refuse(p, "more than one operation starts so".into())),
            }
        }
    }
}

/// The state one session is in now, as far as a change says anything.
struct Now {
    head: Option<ObjectId>,
    name: Option<String>,
    own: bool,
}

/// Revert one operation (`spec`: see [`find`]). Refused, before anything
/// changes, when the log has a damaged entry, when the operation expired,
/// was a gc, was undone already, or when a session it touched changed
/// since; then every change is reverted (what is reverted already is
/// left) and the undo's entry appended.
pub fn undo(store: &Store, spec: Option<&str>) -> Result<Undone> {
    let layout = store.layout_for_gc()?.ok_or_else(|| Error::CannotUndo {
        op: spec.unwrap_or("(last)").to_owned(),
        reason: "this project has no store".into(),
    })?;
    let log = read_log(layout)?;
    if let Some(e) = log.damaged.into_iter().next() {
        return Err(e);
    }
    let log = Log {
        entries: log.entries,
        ..Log::default()
    };
    let entry = find(&log, spec)?.clone();
    let refuse = |reason: String| Error::CannotUndo {
        op: entry.op.clone(),
        reason,
    };
    if entry.kind == Kind::Gc {
        return Err(refuse(
            "a gc cannot be undone: what it reclaimed is gone (and nothing it reclaimed was still needed)".into(),
        ));
    }
    if entry.kind != Kind::Purge && entry.expires_ms(EXPIRY_MS) <= crate::trashed::now_ms() {
        return Err(refuse(
            "it expired: what it needs may have been reclaimed by gc".into(),
        ));
    }
    if let Some(later) = log
        .entries
        .iter()
        .find(|e| e.undoes.as_deref() == Some(entry.op.as_str()))
    {
        return Err(refuse(format!(
            "it was undone already by operation {} (undo that one to redo it)",
            &later.op[..12]
        )));
    }
    let origin = crate::place::origin_of(layout, store.project_dir())?;
    let names = crate::names::read(layout)?;
    // Check every change first: nothing moves unless all can.
    let mut todo = Vec::new();
    for c in &entry.changes {
        let now = Now {
            head: heads::read(layout, &c.session)?.map(|h| h.id),
            name: names.get(&c.session).cloned(),
            own: origin.owns(&c.session),
        };
        todo.push((c.clone(), plan(store, layout, c, &now).map_err(refuse)?));
    }
    for (c, steps) in &todo {
        for step in steps {
            apply(store, layout, c, step, &entry)?;
        }
    }
    crate::failpoint::kill("oplog-undo-applied");
    let inverse: Vec<Change> = entry.changes.iter().cloned().map(Change::inverse).collect();
    let note = format!("undid {} {}", entry.kind.as_str(), &entry.op[..12]);
    let new = append(store, Kind::Undo, inverse, &note, Some(entry.op.clone()))?;
    Ok(Undone {
        undid: entry,
        entry: new,
    })
}

/// One step of reverting a change.
#[derive(Debug)]
enum Step {
    /// Move the session (at `from`) to the trash.
    Trash,
    /// Bring the session back from the trash.
    Untrash,
    /// Move its ref from `from` back to `to`.
    Head { from: ObjectId, to: ObjectId },
    /// Give it its name back (or none).
    Name(Option<String>),
    /// Make it shipped again (`false`) or its own (`true`).
    Own(bool),
}

/// The steps that revert `c`, given the session's state now (none for
/// what is reverted already); `Err` when it changed since otherwise.
fn plan(
    store: &Store,
    layout: &Odb,
    c: &Change,
    now: &Now,
) -> std::result::Result<Vec<Step>, String> {
    let s = &c.session;
    let mut steps = Vec::new();
    let show =
        |o: &Option<ObjectId>| o.map_or_else(|| "none".to_owned(), |i| i.to_hex()[..12].to_owned());
    if let Some(m) = &c.head {
        match (m.before, m.after) {
            (None, None) => {}
            (None, Some(a)) => {
                if now.head == Some(a) {
                    steps.push(Step::Trash);
                } else if now.head.is_some() {
                    return Err(format!(
                        "session {s} moved since (its head is {}, the operation left {})",
                        show(&now.head),
                        show(&Some(a))
                    ));
                }
            }
            (Some(b), None) => match now.head {
                None if !crate::trashed::has_any(layout, s).map_err(|e| e.to_string())? => {
                    return Err(format!(
                        "session {s} is no longer in the trash (deleted for good, or expired)"
                    ))
                }
                None => steps.push(Step::Untrash),
                Some(h) if h == b => {}
                Some(h) => {
                    return Err(format!(
                        "session {s} exists again with another head ({})",
                        show(&Some(h))
                    ))
                }
            },
            (Some(b), Some(a)) => {
                if now.head == Some(a) {
                    // The checkpoint to go back to must be stored and the
                    // session's own.
                    let layout_ok = layout
                        .index()
                        .locate(layout, &b)
                        .map_err(|e| e.to_string())?
                        .is_some();
                    if !layout_ok {
                        return Err(format!(
                            "checkpoint {} of session {s} is gone (reclaimed by gc)",
                            show(&Some(b))
                        ));
                    }
                    let cp = store.checkpoint(&b).map_err(|e| e.to_string())?;
                    if cp.session_id != *s {
                        return Err(format!(
                            "the log names checkpoint {} of session {} as session {s}'s",
                            show(&Some(b)),
                            cp.session_id
                        ));
                    }
                    steps.push(Step::Head { from: a, to: b });
                } else if now.head != Some(b) {
                    return Err(format!(
                        "session {s} moved since (its head is {}, the operation left {})",
                        show(&now.head),
                        show(&Some(a))
                    ));
                }
            }
        }
    }
    // A session going to or coming from the trash takes its name along.
    if let (Some(m), false) = (&c.name, c.trashes()) {
        if now.name == m.after && m.before != m.after {
            steps.push(Step::Name(m.before.clone()));
        } else if now.name != m.before {
            return Err(format!(
                "session {s} was renamed since (it is {:?}, the operation left {:?})",
                now.name, m.after
            ));
        }
    }
    if let Some(Move {
        before: Some(b),
        after: Some(a),
    }) = &c.own
    {
        if now.own == *a && a != b {
            steps.push(Step::Own(*b));
        }
    }
    Ok(steps)
}

fn apply(store: &Store, layout: &Odb, c: &Change, step: &Step, entry: &Entry) -> Result<()> {
    let s = &c.session;
    let why = format!("op undo {}", &entry.op[..12]);
    match step {
        Step::Trash => trash(store, s),
        Step::Untrash => untrash(store, s),
        Step::Head { from, to } => move_head(store, layout, s, *from, *to, &why),
        Step::Name(name) => crate::names::update(layout, |names| {
            if let Some(n) = name {
                if let Some((holder, _)) = names.iter().find(|(h, v)| *h != s && *v == n) {
                    if store.knows(holder)? {
                        return Err(Error::Name(Box::new(crate::NameError::Taken {
                            name: n.clone(),
                            holder: holder.clone(),
                        })));
                    }
                }
                names.retain(|h, v| h == s || v != n);
                names.insert(s.clone(), n.clone());
            } else {
                names.remove(s);
            }
            Ok(true)
        }),
        Step::Own(true) => {
            crate::place::adopt(layout, store.project_dir(), Some(std::slice::from_ref(s)))
                .map(|_| ())
        }
        Step::Own(false) => crate::place::ship(layout, store.project_dir(), s),
    }
}

thread_local! {
    /// Set while an undo moves sessions in or out of the trash: the undo's
    /// own entry records that, not a delete's or an undelete's.
    static UNDOING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f` as an undo's step (see [`UNDOING`]).
fn undoing<T>(f: impl FnOnce() -> T) -> T {
    UNDOING.with(|u| u.set(true));
    let out = f();
    UNDOING.with(|u| u.set(false));
    out
}

/// Move `session` to the trash (an undo of what added it).
fn trash(store: &Store, session: &SessionId) -> Result<()> {
    undoing(|| store.trash_session(session)).map(|_| ())
}

/// Bring `session` back from the trash (an undo of a delete).
fn untrash(store: &Store, session: &SessionId) -> Result<()> {
    undoing(|| store.undelete_session(session)).map(|_| ())
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

/// Move `session`'s ref from `from` back to `to` (a checkpoint of its
/// own, stored): a commit record publishing `to` again, as a pull
/// publishes a head (objects-spec §5.2), under the session's lease and
/// the store lock held shared.
fn move_head(
    store: &Store,
    layout: &Odb,
    session: &SessionId,
    from: ObjectId,
    to: ObjectId,
    why: &str,
) -> Result<()> {
    let lock = Shared::take(layout)?;
    layout.index().forget_removed();
    let lease = SessionLease::acquire(layout, session, true)?;
    let head = heads::read(layout, session)?.ok_or_else(|| Error::NoSuchSession {
        session: session.to_string(),
    })?;
    if head.id != from {
        return Err(Error::RefMoved {
            session: session.to_string(),
            expected: from.to_hex(),
            found: head.id.to_hex(),
        });
    }
    store.check_covering(&to)?;
    let cp = crate::read::snapshot(layout, &to)?;
    let deps = head.deps();
    let mut slot = lease.journal.lock().unwrap_or_else(|p| p.into_inner());
    let journal = store.journal_writer(layout, &lease, &mut slot)?;
    let mut writer = Writer::new(&lock, session, &deps);
    let payload = CommitPayload {
        deps: writer.deps.clone(),
        parent: Some(from),
        seq: head.seq() + 1,
        session: session.clone(),
        summary: cp.summary.clone(),
        time_ms: crate::trashed::now_ms(),
        why: why.to_owned(),
    };
    crate::failpoint::kill("oplog-undo-head");
    let (_, told) = writer.commit(journal, to, payload, || {
        crate::commit::move_ref(layout, session, Some(from), to)
    })?;
    drop(told);
    Ok(())
}

/// Where a path inside the log lives, for messages.
pub fn dir_path(store: &Store) -> PathBuf {
    store.project_path().join(crate::STORE_DIR).join(DIR)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Record;
    use crate::{CommitInput, SessionLease, SessionState};
    use serde_json::{json, Value};

    fn commit(
        store: &Store,
        lease: &SessionLease,
        st: &mut SessionState,
        msgs: &[Value],
    ) -> ObjectId {
        let leaves = vec![None; msgs.len()];
        store
            .commit(
                lease,
                st,
                CommitInput::new(
                    Record::Answer,
                    msgs,
                    &leaves,
                    "/p",
                    crate::SessionRecord::of(crate::RequestConfig::bare("test", "")),
                )
                .instruction("i"),
            )
            .unwrap()
            .id
    }

    /// A session with two checkpoints: (store dir, store, session, first, second).
    fn two() -> (tempfile::TempDir, Store, SessionId, ObjectId, ObjectId) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let lease = store.new_session().unwrap();
        let mut st = SessionState::default();
        let mut msgs = vec![
            json!({"role": "user", "content": "one"}),
            json!({"role": "assistant", "content": "a"}),
        ];
        let c1 = commit(&store, &lease, &mut st, &msgs);
        msgs.push(json!({"role": "user", "content": "two"}));
        msgs.push(json!({"role": "assistant", "content": "b"}));
        let c2 = commit(&store, &lease, &mut st, &msgs);
        let id = lease.session().clone();
        drop(lease);
        (dir, store, id, c1, c2)
    }

    fn sound(store: &Store) {
        let r = crate::fsck::fsck(store).unwrap();
        assert!(
            r.is_sound(),
            "{:?}",
            r.faults.iter().map(|f| f.to_string()).collect::<Vec<_>>()
        );
    }

    fn kinds(store: &Store) -> Vec<Kind> {
        log(store).unwrap().entries.iter().map(|e| e.kind).collect()
    }

    #[test]
    fn a_rename_is_undone_and_its_undo_too() {
        let (_d, store, id, _, _) = two();
        crate::names::rename(&store, &id, "first").unwrap();
        crate::names::rename(&store, &id, "second").unwrap();
        assert_eq!(kinds(&store), [Kind::Rename, Kind::Rename]);
        let done = undo(&store, None).unwrap();
        assert_eq!(done.undid.kind, Kind::Rename);
        assert_eq!(
            crate::names::name_of(&store, &id).unwrap().as_deref(),
            Some("first")
        );
        // Undone once only; its undo redoes it.
        let again = undo(&store, Some(&done.undid.op[..8])).unwrap_err();
        assert!(again.to_string().contains("undone already"), "{again}");
        undo(&store, None).unwrap();
        assert_eq!(
            crate::names::name_of(&store, &id).unwrap().as_deref(),
            Some("second")
        );
        // A rename since makes the first undo refuse, changing nothing.
        crate::names::rename(&store, &id, "third").unwrap();
        let first = log(&store).unwrap().entries[0].op.clone();
        let e = undo(&store, Some(&first)).unwrap_err();
        assert!(e.to_string().contains("renamed since"), "{e}");
        assert_eq!(
            crate::names::name_of(&store, &id).unwrap().as_deref(),
            Some("third")
        );
        sound(&store);
    }

    #[test]
    fn a_head_move_is_undone_by_a_commit_record_and_redone() {
        let (_d, store, id, c1, c2) = two();
        record(
            &store,
            Kind::Pull,
            vec![Change::of(&id).head(Some(c1), Some(c2))],
            "",
        )
        .unwrap();
        undo(&store, None).unwrap();
        assert_eq!(store.head(&id).unwrap(), c1);
        sound(&store);
        // The checkpoint left behind stays: gc keeps it for the redo.
        crate::gc::gc(&store, false).unwrap();
        undo(&store, None).unwrap();
        assert_eq!(store.head(&id).unwrap(), c2);
        sound(&store);
        assert_eq!(kinds(&store), [Kind::Pull, Kind::Undo, Kind::Undo]);
    }

    #[test]
    fn a_fork_is_undone_to_the_trash_and_back_and_a_delete_is_undeleted() {
        let (_d, store, id, c1, _) = two();
        crate::names::rename(&store, &id, "work").unwrap();
        let (lease, head, _) = store.fork(&c1).unwrap();
        let fork = lease.session().clone();
        drop(lease);
        assert_eq!(kinds(&store), [Kind::Rename, Kind::Fork]);
        undo(&store, None).unwrap();
        assert!(store.head(&fork).is_err());
        assert!(store
            .trash_entries()
            .unwrap()
            .iter()
            .any(|e| e.session == fork));
        sound(&store);
        undo(&store, None).unwrap();
        assert_eq!(store.head(&fork).unwrap(), head);
        // A delete (to the trash) is one entry; its undo brings the
        // session back with its name.
        store.trash_session(&id).unwrap();
        assert_eq!(
            log(&store).unwrap().entries.last().unwrap().kind,
            Kind::Delete
        );
        crate::gc::gc(&store, false).unwrap();
        undo(&store, None).unwrap();
        assert!(store.head(&id).is_ok());
        assert_eq!(
            crate::names::name_of(&store, &id).unwrap().as_deref(),
            Some("work")
        );
        sound(&store);
        // An undelete is one too, undone to the trash.
        store.trash_session(&id).unwrap();
        store.undelete_session(&id).unwrap();
        assert_eq!(
            log(&store).unwrap().entries.last().unwrap().kind,
            Kind::Undelete
        );
        undo(&store, None).unwrap();
        assert!(store.head(&id).is_err());
        // (fsck of a session in the trash is the trash's: checked once it knows them)
    }

    #[test]
    fn hostile_entries_are_faults_naming_their_file_and_gc_refuses() {
        let (d, store, id, c1, c2) = two();
        record(
            &store,
            Kind::Pull,
            vec![Change::of(&id).head(Some(c1), Some(c2))],
            "",
        )
        .unwrap();
        let dir = d.path().join(".hel").join(DIR);
        let good = std::fs::read_dir(&dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let other = SessionId::new_random();
        let entry = |changes: Vec<Change>, op: &str, time_ms: u64| Entry {
            changes,
            kind: Kind::Pull,
            note: String::new(),
            op: op.repeat(32),
            time_ms,
            undoes: None,
            version: 1,
        };
        let now = crate::trashed::now_ms();
        let far = now + 10 * FUTURE_SLACK_MS;
        // Another session's checkpoints as this one's: it reads, but gc,
        // fsck and an undo refuse it.
        let stolen = entry(
            vec![Change::of(&other).head(Some(c1), Some(c2))],
            "b",
            now - 1000,
        );
        std::fs::write(
            dir.join(stolen.file_name()),
            serde_json::to_vec(&stolen).unwrap(),
        )
        .unwrap();
        let f = crate::fsck::fsck(&store).unwrap();
        assert!(f
            .faults
            .iter()
            .any(|f| f.to_string().contains(&stolen.file_name())));
        assert!(crate::gc::gc(&store, false)
            .unwrap_err()
            .to_string()
            .contains("as session"));
        let e = undo(&store, Some("bbbb")).unwrap_err().to_string();
        assert!(
            e.contains("no such session") || e.contains("moved since"),
            "{e}"
        );
        std::fs::remove_file(dir.join(stolen.file_name())).unwrap();
        let future = entry(vec![], "a", far);
        let cases: Vec<(String, Vec<u8>, &str)> = vec![
            (
                future.file_name(),
                serde_json::to_vec(&future).unwrap(),
                "in the future",
            ),
            // Past the size cap.
            (
                format!("{:016}-{}", 2, "c".repeat(32)),
                vec![b' '; ENTRY_MAX as usize + 1],
                "over the",
            ),
            // Not JSON, deep.
            (
                format!("{:016}-{}", 3, "d".repeat(32)),
                b"[".repeat(100_000),
                "not an entry",
            ),
            // Named for another entry than it holds.
            (
                format!("{:016}-{}", 5, "f".repeat(32)),
                std::fs::read(&good).unwrap(),
                "its name",
            ),
        ];
        for (name, bytes, says) in cases {
            std::fs::write(dir.join(&name), &bytes).unwrap();
            let l = log(&store).unwrap();
            assert_eq!(l.damaged.len(), 1, "{name}");
            let e = l.damaged[0].to_string();
            assert!(e.contains(&name) && e.contains(says), "{e}");
            let f = crate::fsck::fsck(&store).unwrap();
            assert!(
                f.faults.iter().any(|f| f.to_string().contains(&name)),
                "{name}"
            );
            assert!(crate::gc::gc(&store, false).is_err());
            assert!(undo(&store, None).is_err());
            assert_eq!(store.head(&id).unwrap(), c2, "nothing moved");
            std::fs::remove_file(dir.join(&name)).unwrap();
        }
        // A link, even to a good entry.
        let link = dir.join(format!("{:016}-{}", 4, "e".repeat(32)));
        std::os::unix::fs::symlink(&good, &link).unwrap();
        let l = log(&store).unwrap();
        assert_eq!(l.damaged.len(), 1);
        assert!(crate::gc::gc(&store, false).is_err());
        std::fs::remove_file(&link).unwrap();
        sound(&store);
        crate::gc::gc(&store, false).unwrap();
    }

    #[test]
    fn expired_entries_are_no_roots_and_are_not_undone() {
        let (_d, store, id, c1, c2) = two();
        record(
            &store,
            Kind::Pull,
            vec![Change::of(&id).head(Some(c1), Some(c2))],
            "",
        )
        .unwrap();
        let layout = store.layout_for_gc().unwrap().unwrap();
        assert_eq!(roots(layout).unwrap(), vec![c1, c2]);
        let e = log(&store).unwrap().entries[0].clone();
        assert_eq!(e.expires_ms(EXPIRY_MS), e.time_ms + EXPIRY_MS);
    }
}
