//! `hel sessions` (list), `hel sessions log`, `hel sessions delete`,
//! `hel sessions rename`, `hel sessions adopt`, the trash (`hel sessions
//! undelete`, `trash`, `pin`, `unpin`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use hel_agent::text::escape_line;
use hel_store::log::LogEntry;
use hel_store::time::rfc3339;
use hel_store::{Record, SessionId, SessionInfo, Store};
use serde::Serialize;

use super::report::{print_json, say};
use crate::exit::{self, Exit, Refusal};
use crate::render::{self, Shrink};

/// A row of `hel sessions --json` (fields in the order the JSON has).
#[derive(Serialize)]
struct SessionRow<'a> {
    broken: Option<String>,
    busy: bool,
    checkpoints: u64,
    /// Where its newest record was saved (null: not known).
    cwd: Option<&'a str>,
    /// The first line of its first instruction ("" when not known).
    first: &'a str,
    /// Its time is after the listing's: it never counts as the newest.
    future: bool,
    head: Option<String>,
    /// Saved in this project's directory: only such a session is ever
    /// chosen when none is named.
    here: bool,
    id: &'a SessionId,
    instruction: &'a str,
    messages: u64,
    name: Option<&'a str>,
    /// It arrived with a `.hel/` not made here: never chosen, pushed or
    /// undone unless named (`hel sessions adopt` makes it this project's).
    shipped: bool,
    updated: String,
}

/// A checkpoint of `hel sessions log --json` (fields in the order the
/// JSON has).
#[derive(Serialize)]
struct LogRow<'a> {
    fork_point: bool,
    id: String,
    input_tokens: u64,
    instruction: &'a str,
    messages: u64,
    output_tokens: u64,
    record: &'static str,
    session: &'a SessionId,
    time: &'a str,
    /// The workspace tree at the record, and at its instruction's start.
    workspace: Option<String>,
    workspace_start: Option<String>,
}

/// What `sessions log` says of a record besides its columns ("" for an
/// answer).
fn record_tag(e: &LogEntry, ended: bool) -> String {
    let ws = e.workspace.as_ref();
    let partial = match ws {
        Some(w) if w.not_tracked > 0 => format!(
            ", {} not tracked",
            render::count(w.not_tracked, "file", "files")
        ),
        _ => String::new(),
    };
    match e.record {
        Record::Answer if ws.is_none() => "[no file snapshot] ".into(),
        Record::Answer if partial.is_empty() => String::new(),
        Record::Answer => format!("[{}] ", &partial[2..]),
        Record::Start if ended => format!("[start{partial}] "),
        Record::Start => format!("[started, never ended: `hel undo` reverts it{partial}] "),
        Record::Interrupted => format!("[interrupted{partial}] "),
        Record::BeforeRestore => format!("[files before a restore{partial}] "),
        Record::Restored => match ws.and_then(|w| w.restored.as_ref()) {
            Some(r) => format!(
                "[{} {} to {} of {}{}] ",
                if r.undo { "undo: restored" } else { "restored" },
                render::count(r.count, "file", "files"),
                if r.start { "the start" } else { "the end" },
                &r.from.to_hex()[..12],
                if r.conflicts > 0 {
                    format!(
                        ", {} left alone",
                        render::count(r.conflicts, "conflict", "conflicts")
                    )
                } else {
                    String::new()
                }
            ),
            None => "[restored] ".into(),
        },
        Record::Fork => "[fork] ".into(),
        Record::Relocated => format!("[moved to {}] ", escape_line(&e.cwd)),
    }
}

/// A stored instruction for a listing, on one line: at most 60
/// characters, or on a terminal (`room`) whole, for the table to cut to
/// the width. A store that came with a repository may hold a newline
/// there, which would forge rows: every control character is shown
/// escaped.
pub(crate) fn one_line(instruction: &str, room: Option<usize>) -> String {
    match room {
        Some(_) => escape_line(instruction).into_owned(),
        None => escape_line(&instruction.chars().take(60).collect::<String>()).into_owned(),
    }
}

/// The widest [`when`] (`yesterday 14:03`).
pub(crate) const WHEN_WIDTH: usize = 15;

/// A moment as people read it, in local time: `just now` (under a
/// minute), `12 min ago` (under an hour), `today 14:03`, `yesterday
/// 14:03`, `3 Dec 14:03` (this year), `3 Dec 2025` (before it). A moment
/// after `now` is shown as its date (`3 Dec 14:03`). `--json` keeps the
/// RFC 3339 time in UTC.
pub(crate) fn when(ms: u64, now: u64) -> String {
    let (Some(then), Some(today)) = (local(ms), local(now)) else {
        return rfc3339(ms);
    };
    let clock = format!("{:02}:{:02}", then.hour, then.min);
    if ms <= now {
        match (now - ms) / 1000 {
            0..60 => return "just now".into(),
            s @ 60..3600 => return format!("{} min ago", s / 60),
            _ => {}
        }
        if (then.year, then.yday) == (today.year, today.yday) {
            return format!("today {clock}");
        }
        let yesterday = local(now.saturating_sub(86_400_000));
        if yesterday.is_some_and(|y| (y.year, y.yday) == (then.year, then.yday)) {
            return format!("yesterday {clock}");
        }
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.get(then.month).copied().unwrap_or("?");
    if then.year == today.year {
        format!("{} {month} {clock}", then.day)
    } else {
        format!("{} {month} {}", then.day, then.year)
    }
}

/// A moment in local time (the `TZ` the C library reads).
struct Local {
    year: i32,
    yday: i32,
    month: usize,
    day: i32,
    hour: i32,
    min: i32,
}

fn local(ms: u64) -> Option<Local> {
    let t = libc::time_t::try_from(ms / 1000).ok()?;
    // SAFETY: `tm` is plain data, all zeroes a valid value; localtime_r
    // only reads `t` and writes `tm`, and is safe to call from threads.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let done = unsafe { libc::localtime_r(&t, &mut tm) };
    if done.is_null() {
        return None;
    }
    Some(Local {
        year: tm.tm_year + 1900,
        yday: tm.tm_yday,
        month: usize::try_from(tm.tm_mon).ok()?,
        day: tm.tm_mday,
        hour: tm.tm_hour,
        min: tm.tm_min,
    })
}

/// What a listing calls a session: its name, else the first line of its
/// first instruction (its last when the first is not known). Stored
/// text: escaped where it is shown.
pub(crate) fn label<'a>(s: &'a SessionInfo, name: Option<&'a str>) -> &'a str {
    match name {
        Some(n) => n,
        None if !s.first.is_empty() => &s.first,
        None => &s.instruction,
    }
}

/// The names of the store's sessions; a names file that cannot be read is
/// said on stderr and the listing goes on without names.
pub(super) fn names_or_warn(store: &Store) -> BTreeMap<SessionId, String> {
    hel_store::names::all(store).unwrap_or_else(|e| {
        render::line(&format!(
            "hel: warning: session names not shown: {}",
            exit::store_words(&e)
        ));
        render::hints(exit::store_hints(&e));
        BTreeMap::new()
    })
}

/// What `hel sessions` says of a session before its instruction ("" for
/// one of this project's own, of this directory, dated in the past): that
/// it is shipped, where it was saved when that is elsewhere, and a time in
/// the future. Such a session is never chosen when none is named.
fn where_tag(s: &SessionInfo, here: &str) -> String {
    let mut tag = String::new();
    if s.shipped {
        tag.push_str("[shipped] ");
    }
    if s.broken.is_none() && s.head.is_some() {
        match s.cwd.as_deref() {
            Some(cwd) if cwd == here => {}
            Some(cwd) => tag.push_str(&format!("[saved in {}] ", escape_line(cwd))),
            None => tag.push_str("[saved where: unknown] "),
        }
    }
    if s.future {
        tag.push_str("[dated in the future] ");
    }
    tag
}

pub fn list(store: &Store, project: &Path, as_json: bool) -> Result<u8, Exit> {
    let sessions = store.sessions()?;
    let names = names_or_warn(store);
    let name_of = |id: &SessionId| names.get(id).map(String::as_str);
    let here = hel_agent::recorded_cwd(project);
    if as_json {
        let rows: Vec<SessionRow> = sessions
            .iter()
            .map(|s| SessionRow {
                broken: s.broken.as_ref().map(|e| e.to_string()),
                busy: s.busy,
                checkpoints: s.checkpoints,
                cwd: s.cwd.as_deref(),
                first: &s.first,
                future: s.future,
                head: s.head.map(|h| h.to_hex()),
                here: s.cwd.as_deref() == Some(here.as_str()),
                id: &s.id,
                instruction: &s.instruction,
                messages: s.messages,
                name: name_of(&s.id),
                shipped: s.shipped,
                updated: rfc3339(s.updated_ms),
            })
            .collect();
        print_json(&rows);
        return Ok(0);
    }
    if sessions.is_empty() {
        say!("no sessions in this project");
        if let Some(line) = trash_line(store) {
            render::line(&line);
        }
        return Ok(0);
    }
    // On a terminal the messages are left out (`--json` has them); on a
    // narrow one the id shrinks to the 8 characters that name it as well,
    // then the checkpoints go, then the state: the label is cut, never
    // the id, and the time goes only when nothing else is left.
    let room = render::stdout_room();
    let mut columns = vec![(36, false), (WHEN_WIDTH, false), (6, false), (11, true)];
    if room.is_none() {
        columns.push((8, true));
    }
    let table = render::Table::new(
        &columns,
        room,
        &[
            Shrink::Prefix(0, 8),
            Shrink::Drop(3),
            Shrink::Drop(2),
            Shrink::Drop(1),
        ],
        13,
    );
    say!(
        "{}",
        table.row(
            &["SESSION", "UPDATED", "STATE", "CHECKPOINTS", "MESSAGES"],
            // The label's heading in words where there is room for them.
            if room.is_none_or(|r| r >= 60) {
                "NAME OR FIRST INSTRUCTION"
            } else {
                "LABEL"
            }
        )
    );
    let now = hel_store::time::now_ms();
    let mut broken = 0u64;
    let mut hints = Vec::new();
    let mut elsewhere = 0u64;
    let mut shipped = 0u64;
    // One write for many rows (10,000 sessions are 10,000 lines), flushed
    // before anything goes to stderr so that the two stay in order.
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    for s in &sessions {
        let state = match (&s.broken, s.busy) {
            (Some(_), _) => "broken",
            (None, true) => "busy",
            (None, false) => "idle",
        };
        let updated = if s.broken.is_some() {
            "?".to_owned()
        } else {
            when(s.updated_ms, now)
        };
        let tag = where_tag(s, &here);
        if s.shipped {
            shipped += 1;
        } else if !tag.is_empty() {
            elsewhere += 1;
        }
        let row = table.row(
            &[
                s.id.as_str(),
                &updated,
                state,
                &s.checkpoints.to_string(),
                &s.messages.to_string(),
            ],
            &format!("{tag}{}", one_line(label(s, name_of(&s.id)), room)),
        );
        let _ = writeln!(out, "{}", hel_agent::text::escape_text(&row));
        if let Some(why) = &s.broken {
            broken += 1;
            let _ = out.flush();
            render::line(&format!(
                "hel: session {}: {}",
                s.id,
                exit::store_words(why)
            ));
            hints.extend_from_slice(exit::store_hints(why));
        }
    }
    let _ = out.flush();
    drop(out);
    if elsewhere > 0 {
        render::line(&format!(
            "hel: {} saved in another directory or dated in the future: hel never chooses {} when no session is named (name one; `hel resume <SESSION> --relocate` continues one here)",
            render::count(elsewhere, "session was", "sessions were"),
            if elsewhere == 1 { "it" } else { "them" }
        ));
    }
    if shipped > 0 {
        render::line(&format!(
            "hel: {} with this .hel/, which was not made here (cloned, copied or moved with the project): hel never chooses, pushes or undoes {} unless named (if they are yours, `hel sessions adopt SESSION` or `hel sessions adopt --all` makes them this project's own)",
            render::count(shipped, "session arrived", "sessions arrived"),
            if shipped == 1 { "it" } else { "them" }
        ));
    }
    if let Some(line) = trash_line(store) {
        render::line(&line);
    }
    if broken > 0 {
        render::line(&format!(
            "hel: {} be read",
            render::count(broken, "session cannot", "sessions cannot")
        ));
        hints.sort();
        hints.dedup();
        render::hints(&hints);
    }
    Ok(0)
}

pub fn log(
    store: &Store,
    project: &Path,
    spec: &str,
    all: bool,
    as_json: bool,
) -> Result<u8, Exit> {
    let id = hel_agent::resolve_session(store, project, spec)?;
    let entries = hel_store::log::log(store, &id)?;
    if as_json {
        let rows: Vec<LogRow> = entries
            .iter()
            .map(|e| LogRow {
                fork_point: e.fork_point,
                id: e.id.to_hex(),
                input_tokens: e.input_tokens,
                instruction: &e.instruction,
                messages: e.messages,
                output_tokens: e.output_tokens,
                record: e.record.name(),
                session: &e.session_id,
                time: &e.time,
                workspace: e.workspace.as_ref().map(|w| w.tree.to_hex()),
                workspace_start: e
                    .workspace
                    .as_ref()
                    .and_then(|w| w.start)
                    .map(|t| t.to_hex()),
            })
            .collect();
        print_json(&rows);
        return Ok(0);
    }
    // The tokens column is as wide as its widest figures, never cut: on a
    // narrow terminal the id shrinks to 8 characters, then the messages
    // go, then the time, and the instruction is cut.
    let digits = |n: u64| n.to_string().len();
    let answers = entries.iter().filter(|e| e.record == Record::Answer);
    let in_w = answers
        .clone()
        .map(|e| digits(e.input_tokens))
        .max()
        .unwrap_or(1);
    let out_w = answers.map(|e| digits(e.output_tokens)).max().unwrap_or(1);
    let tokens_w = in_w + out_w + 8;
    let room = render::stdout_room();
    let table = render::Table::new(
        &[
            (12, false),
            (WHEN_WIDTH, false),
            (10, false),
            (tokens_w, false),
        ],
        room,
        &[Shrink::Prefix(0, 8), Shrink::Drop(2), Shrink::Drop(1)],
        24,
    );
    let now = hel_store::time::now_ms();
    for (k, e) in entries.iter().enumerate() {
        // An instruction's start is shown only when it never ended (or with
        // --all): its end record carries both snapshots.
        let ended = k > 0
            && matches!(entries[k - 1].record, Record::Answer | Record::Interrupted)
            && entries[k - 1].parent == Some(e.id);
        if e.record == Record::Start && ended && !all {
            continue;
        }
        if e.fork_point {
            say!(
                "{}",
                table.line(&format!(
                    "--- forked from session {} at checkpoint {} ---",
                    e.session_id,
                    &e.id.to_hex()[..12]
                ))
            );
        }
        // Tokens belong to answers; workspace records repeat the last.
        let tokens = if e.record == Record::Answer {
            format!(
                "{:>in_w$} in {:>out_w$} out",
                e.input_tokens, e.output_tokens
            )
        } else {
            String::new()
        };
        // "msg " keeps the column as wide as "msgs".
        let messages = format!(
            "{:>5} {}",
            e.messages,
            if e.messages == 1 { "msg " } else { "msgs" }
        );
        say!(
            "{}",
            table.row(
                &[
                    &e.id.to_hex()[..12],
                    &when(e.time_ms, now),
                    &messages,
                    &tokens
                ],
                &format!("{}{}", record_tag(e, ended), one_line(&e.instruction, room))
            )
        );
    }
    Ok(0)
}

/// Delete a session: to the trash (nothing asked: `hel sessions
/// undelete` brings it back), then gc, which also expires what retention
/// says. With `now`, for good (a session in the trash too); on a terminal
/// only after the user said yes to the question naming it (`yes` does not
/// ask; off a terminal `--now` alone deletes).
pub fn delete(store: &Store, project: &Path, spec: &str, now: bool, yes: bool) -> Result<u8, Exit> {
    let retention = crate::config::retention()?;
    let id = match hel_agent::resolve_session(store, project, spec) {
        Ok(id) => id,
        // Only --now takes a session in the trash.
        Err(e) if now => match in_trash(store, spec)? {
            Some(id) => id,
            None => return Err(e.into()),
        },
        Err(e) => return Err(e.into()),
    };
    if !now {
        let entry = match store.trash_session(&id) {
            // Nothing saved yet: nothing to keep.
            Err(hel_store::Error::NoCheckpoint { .. })
                if !hel_store::trash::is_trashed(store, &id)? =>
            {
                return delete_now(store, &id, yes)
            }
            other => other?,
        };
        let kept = match retention.expires_ms(&entry) {
            Some(at) => format!("kept until {}", when(at, hel_store::trash::now_ms())),
            None if entry.pinned => "pinned: kept until unpinned".to_owned(),
            None => "kept".to_owned(),
        };
        say!(
            "moved session {id} to the trash ({kept}, {}); `hel sessions undelete {id}` brings it back",
            size(entry.bytes)
        );
        collect(store, &retention, false)?;
        return Ok(0);
    }
    delete_now(store, &id, yes)
}

/// `hel sessions delete --now`.
fn delete_now(store: &Store, id: &SessionId, yes: bool) -> Result<u8, Exit> {
    if crate::tty::asks(yes) {
        let what = match hel_store::log::log(store, id) {
            Ok(log) => format!(
                "deleting session {id} for good and its {}",
                render::count(log.len() as u64, "record", "records")
            ),
            Err(_) => format!("deleting session {id} for good"),
        };
        match crate::tty::allow(&what) {
            Ok(true) => {}
            Ok(false) => {
                return Err(Refusal::DeleteDeclined {
                    session: id.clone(),
                }
                .into())
            }
            Err(why) => {
                return Err(Refusal::DeleteUnasked {
                    session: id.clone(),
                    why,
                }
                .into())
            }
        }
    }
    let report = store.delete_for_good(id)?;
    say!(
        "deleted session {id} for good; reclaimed {} ({})",
        render::count(report.objects_removed, "object", "objects"),
        render::count(report.bytes_removed, "byte", "bytes")
    );
    Ok(0)
}

/// The session of the trash `spec` names: a whole id, a unique id
/// prefix, or the name an entry recorded.
fn in_trash(store: &Store, spec: &str) -> Result<Option<SessionId>, Exit> {
    let entries = store.trash_entries()?;
    let lower = spec.to_ascii_lowercase();
    let by_name: Vec<&hel_store::TrashEntry> = entries
        .iter()
        .filter(|e| e.name.as_deref() == Some(spec))
        .collect();
    if by_name.len() == 1 {
        return Ok(Some(by_name[0].session.clone()));
    }
    let by_id: Vec<&hel_store::TrashEntry> = entries
        .iter()
        .filter(|e| !lower.is_empty() && e.session.as_str().starts_with(&lower))
        .collect();
    match by_id.len() {
        1 => Ok(Some(by_id[0].session.clone())),
        0 if by_name.is_empty() => Ok(None),
        _ => Err(Refusal::NoSuchSession {
            session: format!(
                "{spec} (it names {} sessions in the trash: give more of the id)",
                by_id.len().max(by_name.len())
            ),
        }
        .into()),
    }
}

/// `hel sessions undelete`.
pub fn undelete(store: &Store, spec: &str) -> Result<u8, Exit> {
    let Some(id) = in_trash(store, spec)? else {
        return Err(hel_store::Error::NotInTrash {
            session: spec.to_owned(),
        }
        .into());
    };
    let e = store.undelete_session(&id)?;
    match (&e.name, &e.name_taken_by) {
        (Some(name), Some(holder)) => say!(
            "session {id} is back, without its name {name}: session {holder} took it meanwhile (`hel sessions rename {id} NAME` names it)"
        ),
        (Some(name), None) => say!("session {id} is back, named {name}"),
        (None, _) => say!("session {id} is back"),
    }
    Ok(0)
}

/// A row of `hel sessions trash --json` (fields in the order the JSON has).
#[derive(Serialize)]
struct TrashRow<'a> {
    bytes: u64,
    deleted: String,
    directory: Option<&'a str>,
    /// When it expires by age (null: pinned, or kept by age forever).
    expires: Option<String>,
    /// It expires at the next gc (`why` says why).
    expires_now: bool,
    head: String,
    id: &'a SessionId,
    name: Option<&'a str>,
    pinned: bool,
    why: Option<&'static str>,
}

/// `hel sessions trash`.
pub fn trash(store: &Store, as_json: bool) -> Result<u8, Exit> {
    let retention = crate::config::retention()?;
    let entries = store.trash_entries()?;
    let now = hel_store::trash::now_ms();
    let due = hel_store::trash::due(store, &retention, now)?;
    let why_of = |id: &SessionId| {
        due.iter()
            .find(|x| x.entry.session == *id)
            .map(|x| match x.why {
                hel_store::trash::Why::Age => "age",
                hel_store::trash::Why::Budget { .. } => "budget",
            })
    };
    if as_json {
        let rows: Vec<TrashRow> = entries
            .iter()
            .map(|e| TrashRow {
                bytes: e.bytes,
                deleted: rfc3339(e.deleted_ms),
                directory: e.directory.as_deref(),
                expires: retention.expires_ms(e).map(rfc3339),
                expires_now: why_of(&e.session).is_some(),
                head: e.head.to_hex(),
                id: &e.session,
                name: e.name.as_deref(),
                pinned: e.pinned,
                why: why_of(&e.session),
            })
            .collect();
        print_json(&rows);
        return Ok(0);
    }
    if entries.is_empty() {
        say!("the trash is empty");
        return Ok(0);
    }
    for e in &entries {
        let expires = match (why_of(&e.session), retention.expires_ms(e)) {
            (Some("budget"), _) => "at the next gc (the store is over its budget)".to_owned(),
            (Some(_), _) => "at the next gc".to_owned(),
            (None, Some(at)) => when(at, now),
            (None, None) if e.pinned => "never (pinned)".to_owned(),
            (None, None) => "never".to_owned(),
        };
        let label = match (&e.name, &e.directory) {
            (Some(n), _) => escape_line(n).into_owned(),
            (None, Some(d)) => escape_line(d).into_owned(),
            (None, None) => String::new(),
        };
        say!(
            "{}  deleted {}  expires {}  {}  {}",
            e.session,
            when(e.deleted_ms, now),
            expires,
            size(e.bytes),
            label
        );
    }
    say!(
        "{} ({}); {}",
        render::count(entries.len() as u64, "session", "sessions"),
        size(entries.iter().map(|e| e.bytes).sum()),
        policy(&retention)
    );
    Ok(0)
}

/// What retention is in force, in words.
fn policy(r: &hel_store::trash::Retention) -> String {
    let age = match r.max_age_ms {
        Some(ms) => format!(
            "entries expire {} after their delete",
            render::count(ms / hel_store::trash::DAY_MS, "day", "days")
        ),
        None => "entries never expire by age".to_owned(),
    };
    match r.budget_bytes {
        Some(b) => format!(
            "{age}, and oldest first while the store is over {}",
            size(b)
        ),
        None => age,
    }
}

/// `hel sessions pin` and `unpin`.
pub fn pin(store: &Store, project: &Path, spec: &str, on: bool) -> Result<u8, Exit> {
    let id = match hel_agent::resolve_session(store, project, spec) {
        Ok(id) if !hel_store::trash::is_trashed(store, &id)? => id,
        other => match in_trash(store, spec)? {
            Some(id) => id,
            None => other?,
        },
    };
    if on {
        hel_store::trash::pin(store, &id)?;
        say!("session {id} is pinned: it never expires (`hel sessions unpin {id}` lets it)");
    } else {
        hel_store::trash::unpin(store, &id)?;
        say!("session {id} is not pinned");
    }
    Ok(0)
}

/// What a delete and `hel gc` do after it: expire what retention says
/// (each said), then gc. With `dry_run`, only say.
pub(crate) fn collect(
    store: &Store,
    retention: &hel_store::trash::Retention,
    dry_run: bool,
) -> Result<hel_store::gc::GcReport, Exit> {
    let expired = hel_store::trash::expire(store, retention, dry_run)?;
    let now = hel_store::trash::now_ms();
    for x in &expired {
        let why = match x.why {
            hel_store::trash::Why::Age => policy(&hel_store::trash::Retention {
                budget_bytes: None,
                ..*retention
            })
            .replace("entries expire", "older than")
            .replace(" after their delete", ""),
            hel_store::trash::Why::Budget { store_bytes } => {
                format!("the store held {}, over its budget", size(store_bytes))
            }
        };
        say!(
            "{} session {}{} from the trash (deleted {}): {why}",
            if dry_run { "would expire" } else { "expired" },
            x.entry.session,
            x.entry
                .name
                .as_ref()
                .map(|n| format!(" ({})", escape_line(n)))
                .unwrap_or_default(),
            when(x.entry.deleted_ms, now)
        );
    }
    let report = hel_store::gc::gc(store, dry_run)?;
    Ok(report)
}

/// The one line `hel sessions` and `hel gc` say of the trash (none when
/// it is empty): its size, and what expires next.
pub(crate) fn trash_line(store: &Store) -> Option<String> {
    let entries = match store.trash_entries() {
        Ok(e) => e,
        Err(e) => {
            return Some(format!(
                "hel: the trash cannot be read: {}",
                exit::store_words(&e)
            ))
        }
    };
    if entries.is_empty() {
        return None;
    }
    let retention = crate::config::retention().ok()?;
    let now = hel_store::trash::now_ms();
    let next = entries
        .iter()
        .filter_map(|e| retention.expires_ms(e).map(|at| (at, e)))
        .min_by_key(|(at, _)| *at);
    let next = match next {
        Some((at, e)) => format!(
            "the next to expire is {} on {}",
            &e.session.as_str()[..8],
            if at <= now {
                "the next gc".to_owned()
            } else {
                when(at, now)
            }
        ),
        None => "none expires (pinned)".to_owned(),
    };
    Some(format!(
        "hel: trash: {} ({}), {next} (`hel sessions trash` lists them)",
        render::count(entries.len() as u64, "session", "sessions"),
        size(entries.iter().map(|e| e.bytes).sum()),
    ))
}

/// Bytes as people read them: `512 B`, `12.3 KiB`, `4.0 MiB`.
pub(crate) fn size(b: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut k = 0;
    while v >= 1024.0 && k + 1 < UNITS.len() {
        v /= 1024.0;
        k += 1;
    }
    format!("{v:.1} {}", UNITS[k])
}

pub fn rename(store: &Store, project: &Path, spec: &str, name: &str) -> Result<u8, Exit> {
    hel_store::check_name(name)?;
    let id = hel_agent::resolve_session(store, project, spec)?;
    hel_store::names::rename(store, &id, name)?;
    say!("session {id} is named {name}");
    Ok(0)
}

/// `hel sessions adopt`: make `specs` (or every session, `all`) this
/// project's own (`hel_store::identity::adopt`).
pub fn adopt(store: &Store, project: &Path, specs: &[String], all: bool) -> Result<u8, Exit> {
    let only = if all {
        None
    } else {
        Some(
            specs
                .iter()
                .map(|s| hel_agent::resolve_session(store, project, s))
                .collect::<Result<Vec<_>, _>>()?,
        )
    };
    let adopted = hel_store::identity::adopt(store, only.as_deref())?;
    if adopted == 0 {
        say!("nothing to adopt: every session named is this project's own");
    } else {
        say!(
            "adopted {}: hel treats {} as this project's own",
            render::count(adopted as u64, "session", "sessions"),
            if adopted == 1 { "it" } else { "them" }
        );
    }
    Ok(0)
}
