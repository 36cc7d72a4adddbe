//! `hel undo`, `hel restore` and `hel diff`: the project's files as a
//! session's snapshots recorded them.

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use hel_agent::text::escape_line;
use hel_agent::{resolve_checkpoint, Project};
use hel_store::tree::EntryKind;
use hel_store::{Cap, ObjectId, SessionId, Store};
use hel_workspace::diff::{self, Status};
use hel_workspace::history;
use hel_workspace::undo::{self, Conflict, GoBack, Outcome};
use hel_workspace::{Flat, Item, Scan, Workspace};
use serde::Serialize;

use super::report::{here, print_json, project, say};
use crate::exit::{Exit, Failure, Refusal, Usage};
use crate::{render, tty};

/// The session hel chooses when none is named: the newest of this
/// project's own sessions of its directory nobody is working on
/// ([`hel_agent::default_session`]).
fn last_idle(store: &Store) -> Result<SessionId, Exit> {
    Ok(hel_agent::default_session(store, &project()?)?)
}

/// Refuse to write a shipped session's snapshots into the project's files
/// (`hel_store::identity`): a `.hel/` that came with the repository must
/// not be able to put its files in place of the user's, even named.
fn own(store: &Store, session: &SessionId, verb: &'static str) -> Result<(), Exit> {
    if hel_store::identity::origin(store)?.owns(session) {
        return Ok(());
    }
    Err(Refusal::Shipped {
        verb,
        session: session.clone(),
    }
    .into())
}

/// The checkpoint `at` names in `session`'s history, or its newest record
/// with a snapshot of the files.
fn checkpoint_of(store: &Store, session: &SessionId, at: Option<&str>) -> Result<ObjectId, Exit> {
    let log = hel_store::log::log(store, session)?;
    match at {
        Some(spec) => Ok(resolve_checkpoint(&log, spec)?),
        None => log
            .iter()
            .find(|e| e.workspace.is_some())
            .map(|e| e.id)
            .ok_or_else(|| {
                Refusal::NoSnapshots {
                    session: session.clone(),
                }
                .into()
            }),
    }
}

/// A path argument as a path of the project: relative to the current
/// directory (at or below the project's root) or absolute inside the
/// project, never above it.
fn project_path(project: &Project, arg: &Path) -> Result<Vec<u8>, Exit> {
    let rel = if arg.is_absolute() {
        arg.strip_prefix(&project.root)
            .map_err(|_| Usage::NotInProject {
                path: arg.to_owned(),
                root: project.root.clone(),
            })?
            .to_owned()
    } else {
        project.cwd_in_root().join(arg)
    };
    let mut parts: Vec<&[u8]> = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => parts.push(n.as_bytes()),
            Component::CurDir => {}
            Component::ParentDir if parts.pop().is_some() => {}
            _ => {
                return Err(Usage::OutsideProject {
                    path: arg.to_owned(),
                }
                .into())
            }
        }
    }
    if parts.is_empty() {
        return Ok(Vec::new());
    }
    Ok(parts.join(&b'/'))
}

/// A path for a line of text output: lossy UTF-8, with every control
/// character escaped, line breaks included ([`escape_line`]): a file name
/// the model chose cannot add lines of its own.
fn name(path: &[u8]) -> String {
    escape_line(&String::from_utf8_lossy(path)).into_owned()
}

/// `  left alone  PATH: why`: on a terminal (`room`) the reason wrapped
/// under the path.
fn left_alone(path: &[u8], c: &Conflict, room: Option<usize>) -> String {
    render::sentence(
        &format!(
            "  left alone  {}: {}",
            name(path),
            escape_line(&c.to_string())
        ),
        room,
        "    ",
    )
}

/// A path for JSON output (which escapes control characters itself).
fn lossy(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

/// `hel undo`/`hel restore` as JSON.
#[derive(Serialize)]
struct Report {
    /// The records written (`null` when nothing was to be done and
    /// nothing recorded).
    before: Option<String>,
    conflicts: Vec<ConflictRow>,
    /// Paths named that nothing above speaks of, and why.
    named: Vec<NamedRow>,
    not_durable: Option<String>,
    removed: Vec<String>,
    restored: Option<String>,
    session: String,
    /// Instructions that changed no file, passed over by an undo.
    skipped: usize,
    written: Vec<String>,
}

#[derive(Serialize)]
struct ConflictRow {
    path: String,
    /// `changed`: changed since the session recorded it (`--force` writes
    /// it; the undo's step stays current); `not_read`: no snapshot read it
    /// (left alone always, not a failure); `other_session`: another
    /// session changed it while this one's instruction ran (left alone
    /// always, not a failure); `skipped`: the write could not be made.
    kind: &'static str,
    reason: String,
}

#[derive(Serialize)]
struct NamedRow {
    path: String,
    /// Whether it is already as asked (not a failure).
    as_asked: bool,
    reason: String,
}

/// What a restore is, for its output.
struct Intent {
    /// "undo" or "restore".
    verb: &'static str,
    /// The first line of the text output.
    header: String,
    /// Instructions that changed no file, passed over by an undo.
    skipped: usize,
}

/// Take the session's lease (refused while an instance works on it,
/// naming it), plan the restore `make` gives, say what it will restore,
/// remove and leave alone, ask before removing anything when
/// [`tty::asks`], then write, and report.
///
/// The plan is made after the `before-restore` record is committed, and
/// against it; a "no" then writes nothing and leaves only that record,
/// as a restore killed before it wrote does, which every reader of the
/// history passes over (the next undo targets the same instruction). So
/// a restore that writes has always recorded the files as they were
/// first. A path that changes while the question waits is left alone by
/// the writes, which check each path again right before touching it.
fn perform(
    store: &Store,
    session: &SessionId,
    options: hel_workspace::Options,
    yes: bool,
    json: bool,
    make: impl FnOnce(&ObjectId) -> Result<(GoBack, Intent), Exit>,
) -> Result<u8, Exit> {
    let (lease, head) = store.resume(session)?;
    let (go, intent) = make(&head)?;
    let mut ws = Workspace::open(store, options)?;
    let mut state = store.record_state(&lease)?;
    let prepared = undo::prepare(store, &lease, &mut state, &mut ws, &go)?;
    if !json {
        let room = render::stdout_room();
        say!("{}", render::sentence(&intent.header, room, "  "));
        for p in prepared.writes() {
            say!("{}", render::cut(&format!("  restore   {}", name(p)), room));
        }
        for p in prepared.removals() {
            say!("{}", render::cut(&format!("  remove    {}", name(p)), room));
        }
        for (p, c) in &prepared.conflicts {
            say!("{}", left_alone(p, c, room));
        }
        for (p, why) in &prepared.named {
            say!(
                "{}",
                render::sentence(
                    &format!(
                        "  untouched   {}: {}",
                        name(p),
                        escape_line(&why.to_string())
                    ),
                    room,
                    "    ",
                )
            );
        }
    }
    let removals: Vec<&[u8]> = prepared.removals().collect();
    if !removals.is_empty() && tty::asks(yes) {
        let mut list: Vec<String> = removals.iter().take(3).map(|p| name(p)).collect();
        if removals.len() > 3 {
            list.push(format!("{} more", removals.len() - 3));
        }
        let request = format!("{} to remove {}", intent.verb, list.join(", "));
        let verb = intent.verb;
        match tty::allow(&request) {
            Ok(true) => {}
            Ok(false) => return Err(Refusal::ChangeDeclined { verb }.into()),
            Err(why) => return Err(Refusal::ChangeUnasked { verb, why }.into()),
        }
    }
    let planned = prepared.conflicts.len();
    let out = undo::finish(store, &lease, &mut state, &mut ws, &go, prepared)?;
    Ok(report(session, &intent, &out, planned, json))
}

/// Print what a restore did (after its plan, or as JSON); the exit code:
/// 1 when a path was refused or could not be written, or a path named was
/// not brought back (unless already as asked), 0 when everything left
/// alone is what no snapshot read or another session's work.
fn report(session: &SessionId, intent: &Intent, out: &Outcome, planned: usize, json: bool) -> u8 {
    if json {
        print_json(&Report {
            before: out.before.map(|b| b.to_hex()),
            conflicts: out
                .conflicts
                .iter()
                .map(|(p, c)| ConflictRow {
                    path: lossy(p),
                    kind: match c {
                        _ if c.refused() => "changed",
                        Conflict::NotRead { .. } | Conflict::ChangedUnread => "not_read",
                        Conflict::OtherSession(_) => "other_session",
                        _ => "skipped",
                    },
                    reason: c.to_string(),
                })
                .collect(),
            named: out
                .named
                .iter()
                .map(|(p, why)| NamedRow {
                    path: lossy(p),
                    as_asked: why.as_asked(),
                    reason: why.to_string(),
                })
                .collect(),
            not_durable: out.not_durable.clone(),
            removed: out.removed.iter().map(|p| lossy(p)).collect(),
            restored: out.restored.map(|r| r.to_hex()),
            session: session.to_string(),
            skipped: intent.skipped,
            written: out.written.iter().map(|p| lossy(p)).collect(),
        });
    } else {
        let room = render::stdout_room();
        // What the writes could not do, beyond the plan.
        for (p, c) in out.conflicts.iter().skip(planned) {
            say!("{}", left_alone(p, c, room));
        }
        let back = match out.before {
            Some(before) => format!(
                ". To take this back: hel restore {} --at {}",
                session,
                &before.to_hex()[..12]
            ),
            None => ": nothing to do, nothing recorded".to_owned(),
        };
        let summary = format!(
            "{} restored, {} removed, {} left alone{}{back}",
            render::count(out.written.len() as u64, "file", "files"),
            out.removed.len(),
            out.conflicts.len(),
            if out.conflicts.iter().any(|(_, c)| *c == Conflict::Changed) {
                " (--force writes files changed since the session recorded them)"
            } else {
                ""
            },
        );
        say!("{}", render::sentence(&summary, room, "  "));
        if let Some(why) = &out.not_durable {
            say!(
                "{}",
                render::sentence(
                    &format!("warning: the restored files may not survive a power loss: {why}"),
                    room,
                    "  "
                )
            );
        }
    }
    let failed = out.conflicts.iter().any(|(_, c)| {
        !matches!(
            c,
            Conflict::NotRead { .. } | Conflict::ChangedUnread | Conflict::OtherSession(_)
        )
    });
    u8::from(failed || out.named.iter().any(|(_, why)| !why.as_asked()))
}

pub fn undo(
    spec: Option<String>,
    force: bool,
    yes: bool,
    json: bool,
    options: hel_workspace::Options,
) -> Result<u8, Exit> {
    let project = project()?;
    let store = Store::open(&project)?;
    let session = match spec {
        Some(s) => hel_agent::resolve_session(&store, &project, &s)?,
        None => last_idle(&store)?,
    };
    own(&store, &session, "undo")?;
    perform(&store, &session, options, yes, json, |head| {
        let (plan, i) = undo::undo_plan(&store, head, force)?;
        let header = format!(
            "undo in session {session}: the files as they were before \"{}\"{}",
            escape_line(&i.instruction.chars().take(60).collect::<String>()),
            history::skipped_note(i.skipped)
        );
        Ok((
            plan,
            Intent {
                verb: "undo",
                header,
                skipped: i.skipped,
            },
        ))
    })
}

/// `hel restore`'s arguments.
pub struct RestoreArgs {
    pub session: String,
    pub at: Option<String>,
    pub before: bool,
    pub paths: Vec<PathBuf>,
    pub force: bool,
    pub yes: bool,
    pub json: bool,
}

pub fn restore(args: RestoreArgs, options: hel_workspace::Options) -> Result<u8, Exit> {
    let project = project()?;
    let store = Store::open(&project)?;
    let session = hel_agent::resolve_session(&store, &project, &args.session)?;
    own(&store, &session, "restore")?;
    let checkpoint = checkpoint_of(&store, &session, args.at.as_deref())?;
    let paths = args
        .paths
        .iter()
        .map(|p| project_path(here()?, p))
        .collect::<Result<Vec<_>, _>>()?;
    let at = &checkpoint.to_hex()[..12];
    let header = if args.before {
        format!("restore in session {session}: the files as they were when the instruction of checkpoint {at} started")
    } else {
        format!("restore in session {session}: the files as they were at checkpoint {at}")
    };
    perform(&store, &session, options, args.yes, args.json, |head| {
        let plan = undo::restore_plan(
            &store,
            head,
            &checkpoint,
            args.before,
            paths.into_iter().filter(|p| !p.is_empty()).collect(),
            args.force,
        )?;
        Ok((
            plan,
            Intent {
                verb: "restore",
                header,
                skipped: 0,
            },
        ))
    })
}

/// A unified diff as printed: on a coloured terminal, removed lines red,
/// added ones green, hunk headers cyan.
fn coloured(diff: &str) -> String {
    use std::io::IsTerminal;
    if !crate::render::colour_for(std::io::stdout().is_terminal()) {
        return diff.to_owned();
    }
    let mut out = String::with_capacity(diff.len() + diff.len() / 8);
    for line in diff.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let code = if body.starts_with("+++") || body.starts_with("---") {
            "1"
        } else if body.starts_with('+') {
            "32"
        } else if body.starts_with('-') {
            "31"
        } else if body.starts_with("@@") {
            "36"
        } else {
            ""
        };
        if code.is_empty() {
            out.push_str(line);
        } else {
            out.push_str(&crate::render::paint(true, code, body));
            out.push_str(end);
        }
    }
    out
}

/// A file's unified diff with its two header lines (`--- a/PATH`, `+++
/// b/PATH`) cut to the terminal's width (`room`); its changed lines stay
/// whole.
fn fit_headers(diff: &str, room: Option<usize>) -> String {
    let Some(room) = room else {
        return diff.to_owned();
    };
    let mut out = String::with_capacity(diff.len());
    for (k, line) in diff.split_inclusive('\n').enumerate() {
        let header = k < 2 && (line.starts_with("--- ") || line.starts_with("+++ "));
        match line.strip_suffix('\n') {
            Some(body) if header => {
                out.push_str(&render::fit(body, room));
                out.push('\n');
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// Where one side of a diff reads content from.
enum Side<'a> {
    Store(&'a Store),
    Disk(&'a Workspace),
}

impl Side<'_> {
    /// The content of `item` at `path` (a file's bytes, a link's target),
    /// or None when it has none to show.
    fn content(&self, path: &[u8], item: Option<&Item>) -> Result<Option<Vec<u8>>, Exit> {
        let Some(item) = item else { return Ok(None) };
        if !matches!(item.kind, EntryKind::File | EntryKind::Symlink) {
            return Ok(None);
        }
        match self {
            Side::Store(store) => Ok(Some(hel_store::workspace::read_blob(
                store,
                &item.id,
                Cap::FILE,
            )?)),
            Side::Disk(ws) => ws
                .read_current(path, item.kind)
                .map(Some)
                .map_err(|source| {
                    Failure::ReadFile {
                        path: name(path),
                        source,
                    }
                    .into()
                }),
        }
    }
}

/// The files when the session's own first instruction started (the
/// oldest record of its own with a snapshot; a fork's history before it
/// is not its change). None: the session recorded no files of its own.
fn session_start(store: &Store, session: &SessionId) -> Result<Option<ObjectId>, Exit> {
    let log = hel_store::log::log(store, session)?;
    Ok(log
        .iter()
        .rev()
        .filter(|e| e.session_id == *session)
        .find_map(|e| e.workspace.as_ref().map(|w| w.start.unwrap_or(w.tree))))
}

pub fn diff(args: crate::cli::DiffArgs) -> Result<u8, Exit> {
    let crate::cli::DiffArgs {
        session,
        last,
        at,
        against,
        worktree,
        stat,
        json,
    } = args;
    let project = project()?;
    let store = Store::open(&project)?;
    let session = match session {
        Some(spec) => hel_agent::resolve_session(&store, &project, &spec)?,
        None => last_idle(&store)?,
    };
    let whole = !last && at.is_none() && against.is_none() && !worktree;
    let at = checkpoint_of(&store, &session, at.as_deref())?;
    let cp = store.checkpoint(&at)?;
    let ws = cp
        .workspace
        .as_ref()
        .ok_or(Refusal::NoSnapshot { checkpoint: at })?;
    let at_flat = Flat::read(&store, &ws.tree)?;
    let mut disk = if worktree {
        Some(Workspace::open(&store, hel_workspace::Options::default())?)
    } else {
        None
    };
    let (old, new, on_disk) = if let Some(other) = against {
        let other = resolve_checkpoint(&hel_store::log::log(&store, &session)?, &other)?;
        let ocp = store.checkpoint(&other)?;
        let tree = ocp
            .workspace
            .map(|w| w.tree)
            .ok_or(Refusal::NoSnapshot { checkpoint: other })?;
        let old = Flat::read(&store, &tree)?;
        (old, at_flat, false)
    } else if let Some(disk) = disk.as_mut() {
        let now = disk.snapshot(
            &mut Scan,
            Some(hel_workspace::Prev {
                tree: ws.tree,
                flat: &at_flat,
            }),
        )?;
        (at_flat, std::sync::Arc::unwrap_or_clone(now.flat), true)
    } else if whole {
        // What the session changed: from its first instruction's start.
        let start = session_start(&store, &session)?.unwrap_or(ws.tree);
        (Flat::read(&store, &start)?, at_flat, false)
    } else {
        // What the checkpoint's instruction changed.
        let start = instruction_start(&store, &at, &cp, ws)?;
        let old = Flat::read(&store, &start)?;
        (old, at_flat, false)
    };
    let old_side = Side::Store(&store);
    let new_side = match (on_disk, &disk) {
        (true, Some(w)) => Side::Disk(w),
        _ => Side::Store(&store),
    };
    let changes = diff::changes(&old, &new);
    let room = render::stdout_room();
    let mut rows = Vec::new();
    for c in &changes {
        let a = old_side.content(&c.path, c.old.as_ref())?;
        let b = new_side.content(&c.path, c.new.as_ref())?;
        if json {
            let lines = diff::line_stat(a.as_deref(), b.as_deref());
            let binary = a.iter().chain(&b).any(|x| diff::is_binary(x));
            rows.push(diff::to_json(c, lines, binary));
            continue;
        }
        let name = name(&c.path);
        if stat {
            let counts = match diff::line_stat(a.as_deref(), b.as_deref()) {
                Some(l) => format!("+{} -{}", l.added, l.removed),
                None => "binary".into(),
            };
            // On a terminal the name gives way, not the counts.
            let shown = match room {
                Some(r) => render::fit(&name, r.saturating_sub(5 + render::columns(&counts))),
                None => name,
            };
            say!("{} {shown} | {counts}", letter(c.status));
            continue;
        }
        say!(
            "{}",
            render::cut(&format!("{} {name}", letter(c.status)), room)
        );
        if c.status == Status::ModeChanged {
            let m = |i: &Option<Item>| i.map(|i| format!("{:o}", i.mode)).unwrap_or_default();
            say!("old mode {}\nnew mode {}", m(&c.old), m(&c.new));
        }
        if a.is_none() && b.is_none() {
            continue;
        }
        match unified(&name, a.as_deref(), b.as_deref()) {
            Some(text) => print!("{}", coloured(&fit_headers(&text, room))),
            None => say!("Binary files a/{name} and b/{name} differ"),
        }
    }
    if json {
        print_json(&rows);
    } else if changes.is_empty() {
        say!("no changes");
    }
    Ok(0)
}

/// The files when the instruction of checkpoint `at` (`cp`, its snapshot
/// `ws`) started: its start snapshot, or the newest one before it.
fn instruction_start(
    store: &Store,
    at: &ObjectId,
    cp: &hel_store::Checkpoint,
    ws: &hel_store::Workspace,
) -> Result<ObjectId, Exit> {
    match ws.start {
        Some(s) => Ok(s),
        None => cp
            .parents
            .first()
            .and_then(|p| hel_workspace::history::newest_tree(store, p).ok().flatten())
            .ok_or_else(|| Refusal::NoEarlierSnapshot { checkpoint: *at }.into()),
    }
}

/// A file's unified diff as `hel diff` prints it (3 lines of context,
/// every control character escaped, the headers naming `name`, already
/// escaped); None when either side is binary. An empty string: no line
/// differs (a mode change).
fn unified(name: &str, a: Option<&[u8]>, b: Option<&[u8]>) -> Option<String> {
    diff::unified(name.as_bytes(), a, b, 3)
        .map(|text| hel_agent::text::escape_text(&text).into_owned())
}

/// One file a checkpoint's instruction changed, as `hel diff --at` shows
/// it.
pub(super) struct FileDiff {
    /// `A`, `M`, `D`, `T` or `m` (as `hel diff`'s lines).
    pub letter: char,
    /// The path, every control character escaped.
    pub name: String,
    /// Its unified diff ([`unified`]), None when binary or when neither
    /// side has content (a directory, a repository).
    pub text: Option<String>,
    pub binary: bool,
}

/// What the instruction of checkpoint `at` changed, file by file (what
/// `hel diff --at` prints); None when it has no snapshot of the files, or
/// none from before it to compare with.
pub(super) fn instruction_diff(
    store: &Store,
    at: &ObjectId,
) -> Result<Option<Vec<FileDiff>>, Exit> {
    let cp = store.checkpoint(at)?;
    let Some(ws) = cp.workspace.as_ref() else {
        return Ok(None);
    };
    let start = match instruction_start(store, at, &cp, ws) {
        Ok(s) => s,
        Err(_) => return Ok(None),
    };
    let old = Flat::read(store, &start)?;
    let new = Flat::read(store, &ws.tree)?;
    let side = Side::Store(store);
    let mut out = Vec::new();
    for c in diff::changes(&old, &new) {
        let a = side.content(&c.path, c.old.as_ref())?;
        let b = side.content(&c.path, c.new.as_ref())?;
        let name = name(&c.path);
        let text = if a.is_none() && b.is_none() {
            None
        } else {
            unified(&name, a.as_deref(), b.as_deref())
        };
        out.push(FileDiff {
            letter: letter(c.status),
            binary: text.is_none() && (a.is_some() || b.is_some()),
            name,
            text,
        });
    }
    Ok(Some(out))
}

fn letter(s: Status) -> char {
    match s {
        Status::Added => 'A',
        Status::Modified => 'M',
        Status::Deleted => 'D',
        Status::TypeChanged => 'T',
        Status::ModeChanged => 'm',
    }
}
