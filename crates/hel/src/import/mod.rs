//! `hel sessions import --from codex|claude|pi PATH`: conversations other
//! agents saved, made hel sessions of this project.
//!
//! A parser per format ([`codex`], [`claude`], [`pi`]) reads a session
//! file line by line into [`Item`]s; the [`Builder`] turns them into a
//! conversation in chat-completions form with the rules hel's own loop
//! follows (an answer is complete when it ends without tool calls; what an
//! incomplete one leaves is cut back to its finished tool rounds; a
//! compaction becomes the summary message hel's compaction makes) and
//! commits one checkpoint per completed answer through the store. What the
//! chat form has no place for goes into the checkpoint's import record
//! (objects-spec §13.1), never into a message.
//!
//! A file is read twice, a line at a time: the first reading ([`survey`])
//! checks every line and finds the conversation (for formats whose
//! records link to a parent), keeping per record only its ids and links;
//! the second imports what the first found. Tool calls the source left
//! without a result are answered [`NO_RESULT`].
//!
//! Everything in the files is hostile: lines are bounded, every record is
//! parsed with the bounded JSON parse into the types supported (others
//! are counted and skipped), ids are bounded, a malformed line refuses the
//! file with its line before anything is written, and nothing panics.

mod claude;
mod codex;
mod pi;
mod secrets;
mod source;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use hel_agent::{summary_message, Conversation};
use hel_store::{
    CommitInput, ImportRecord, ImportedMessage, Record, RequestConfig, SessionId, SessionLease,
    SessionRecord, SessionState, Store, IMPORT_RECORD_VERSION,
};
use serde_json::{json, Map, Value};

use crate::cli::ImportFrom;
use crate::exit::{Damage, Exit, Kind};
use crate::render;
use source::{Call, Found, Item, Meta, Parser};

/// A report line on stdout, made safe for a terminal: one line, whatever
/// a file name holds (a newline in it cannot forge another line).
fn say(text: &str) {
    println!("{}", hel_agent::text::escape_line(text));
}

/// The longest line read; a longer one is reported and skipped.
const MAX_LINE: usize = 64 << 20;

/// The most files one import reads from a directory, and how deep it
/// looks.
const MAX_FILES: usize = 10_000;
const MAX_DEPTH: usize = 8;

/// The result given to a tool call the source recorded no result for.
pub const NO_RESULT: &str = "no result was recorded";

/// The most bytes of an import record (a request config blob may hold 1
/// MiB): past it, thinking text is left out and only its size is kept.
const RECORD_BUDGET: usize = 768 << 10;

/// Why a file could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: {why}; nothing of the file is imported", path.display())]
    Malformed {
        path: PathBuf,
        line: usize,
        why: String,
    },
    #[error("{} holds no session file (*.jsonl)", .0.display())]
    NothingFound(PathBuf),
    #[error("{}: more than {MAX_FILES} session files; import a smaller directory", .0.display())]
    TooManyFiles(PathBuf),
    #[error("the conversation is over the load budget ({over}) at line {line}: the answers before it are imported, nothing from there on")]
    OverBudget {
        path: PathBuf,
        line: usize,
        over: hel_store::OverLimit,
    },
    #[error("cannot save the imported session of {}{}: {source}", path.display(), line.map(|l| format!(" (line {l})")).unwrap_or_default())]
    Store {
        path: PathBuf,
        /// The line of the message a load would refuse, when one is.
        line: Option<usize>,
        source: Box<hel_store::Error>,
    },
}

impl Damage for ImportError {
    fn damaged(&self) -> bool {
        matches!(self, ImportError::Store { source, .. } if source.damaged())
    }
}

impl From<ImportError> for Exit {
    fn from(e: ImportError) -> Exit {
        Exit::new(Kind::Failed, e)
    }
}

fn parser(from: ImportFrom) -> Box<dyn Parser> {
    match from {
        ImportFrom::Codex => Box::new(codex::Codex::default()),
        ImportFrom::Claude => Box::new(claude::Claude::default()),
        ImportFrom::Pi => Box::new(pi::Pi),
    }
}

/// `hel sessions import --from FORMAT PATH`: each session file at `path`
/// (a file, or the `*.jsonl` files of a directory) becomes a session.
/// Exit 0 when every file was read (those with no completed answer make no
/// session), 1 when one could not be.
pub fn import(store: &Store, project: &Path, from: ImportFrom, path: &Path) -> Result<u8, Exit> {
    let files = session_files(path)?;
    let mut failed = false;
    let mut added = Vec::new();
    for file in &files {
        match import_file(store, project, from, file) {
            Ok(report) => {
                if let Some(s) = &report.session {
                    if let Ok(head) = store.head(s) {
                        added.push(hel_store::oplog::Change::of(s).head(None, Some(head)));
                    }
                }
                report.print(file)
            }
            Err(e) => {
                failed = true;
                render::failure_line("", &e.into());
            }
        }
    }
    // One entry of the operation log for what the import added.
    if !added.is_empty() {
        let note = format!("imported from {}", path.display());
        let kind = hel_store::oplog::Kind::Import;
        if let Err(e) = hel_store::oplog::record(store, kind, added, &note) {
            render::line(&format!("hel: {}", hel_store::Warning::NotLogged(e)));
        }
    }
    Ok(if failed { 1 } else { 0 })
}

/// The files to read: `path` itself, or the `*.jsonl` files under it
/// (links not followed, sorted).
fn session_files(path: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let meta = std::fs::symlink_metadata(path).map_err(|source| ImportError::Read {
        path: path.to_owned(),
        source,
    })?;
    if !meta.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    // Breadth first with an explicit list: the depth is bounded, not the
    // stack's.
    let mut dirs = vec![(path.to_owned(), 0usize)];
    while let Some((dir, depth)) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|source| ImportError::Read {
            path: dir.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            let p = entry.path();
            let Ok(ft) = entry.file_type() else { continue };
            if ft.is_dir() && depth + 1 < MAX_DEPTH {
                dirs.push((p, depth + 1));
            } else if ft.is_file() && p.extension().is_some_and(|e| e == "jsonl") {
                if files.len() >= MAX_FILES {
                    return Err(ImportError::TooManyFiles(path.to_owned()));
                }
                files.push(p);
            }
        }
    }
    if files.is_empty() {
        return Err(ImportError::NothingFound(path.to_owned()));
    }
    files.sort();
    Ok(files)
}

/// What importing one file did.
struct Report {
    session: Option<SessionId>,
    name: Option<String>,
    name_taken: Option<String>,
    checkpoints: u64,
    messages: usize,
    skipped: BTreeMap<String, u64>,
    dropped: Vec<String>,
}

impl Report {
    fn print(&self, file: &Path) {
        for d in &self.dropped {
            render::line(&format!("hel: {}: {d}", file.display()));
        }
        if let Some(n) = &self.name_taken {
            render::line(&format!(
                "hel: {}: the name {n} is taken; the session is left unnamed",
                file.display()
            ));
        }
        let skipped = if self.skipped.is_empty() {
            String::new()
        } else {
            let parts: Vec<String> = self
                .skipped
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect();
            format!(" · skipped {}", parts.join(", "))
        };
        match &self.session {
            Some(id) => {
                let name = self
                    .name
                    .as_ref()
                    .map_or(String::new(), |n| format!(" ({n})"));
                say(&format!(
                    "{}: session {id}{name} · {}, {}{skipped}",
                    file.display(),
                    render::count(self.checkpoints, "checkpoint", "checkpoints"),
                    render::count(self.messages as u64, "message", "messages")
                ));
            }
            None => say(&format!(
                "{}: no completed answer, nothing imported{skipped}",
                file.display()
            )),
        }
    }
}

/// Open a session file: a regular file, not through a link, never a FIFO
/// or device that would block.
fn open_source(file: &Path) -> Result<std::fs::File, ImportError> {
    use std::os::unix::fs::OpenOptionsExt;
    let read_err = |source| ImportError::Read {
        path: file.to_owned(),
        source,
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(file)
        .map_err(read_err)?;
    if !f.metadata().map_err(read_err)?.is_file() {
        return Err(read_err(std::io::Error::other("not a regular file")));
    }
    Ok(f)
}

/// A line's bytes, or why it cannot be read.
type LineRead<'a> = Result<&'a [u8], String>;

/// A session file's lines, each bounded by [`MAX_LINE`].
struct Lines {
    reader: BufReader<std::fs::File>,
    buf: Vec<u8>,
    line: usize,
}

impl Lines {
    fn new(f: std::fs::File) -> Lines {
        Lines {
            reader: BufReader::new(f),
            buf: Vec::new(),
            line: 0,
        }
    }

    /// The next line that is not blank, without its line end: its
    /// number and its bytes, or why it cannot be read; None at the end.
    fn next(&mut self) -> std::io::Result<Option<(usize, LineRead<'_>)>> {
        let end = loop {
            self.buf.clear();
            self.line += 1;
            let n = (&mut self.reader)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut self.buf)?;
            if n == 0 {
                return Ok(None);
            }
            if self.buf.len() > MAX_LINE && !self.buf.ends_with(b"\n") {
                skip_line(&mut self.reader)?;
                return Ok(Some((
                    self.line,
                    Err(format!("longer than {} MiB", MAX_LINE >> 20)),
                )));
            }
            let mut end = self.buf.len();
            for b in [b'\n', b'\r'] {
                if end > 0 && self.buf[end - 1] == b {
                    end -= 1;
                }
            }
            if !self.buf[..end].iter().all(u8::is_ascii_whitespace) {
                break end;
            }
        };
        Ok(Some((self.line, Ok(&self.buf[..end]))))
    }
}

/// Where a line of a file with linked records stands (what the survey
/// decided): read it, or it is a message record off the conversation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Not a linked record, or on the conversation: the parser reads it.
    Read,
    /// A message record (or a compaction) of another branch.
    Branch,
    /// A sub-agent's record (a sidechain).
    Side,
    /// A record whose id an earlier record has.
    Repeated,
}

/// What a first reading of a file found: where each line stands, the line
/// of the last compaction, and how many records the conversation leaves
/// aside. Every line is parsed once here, so that a file with a line that
/// cannot be read is refused before anything is written.
#[derive(Default)]
struct Survey {
    /// The lines that are not read, in line order, with where they
    /// stand; every other line is read.
    aside_lines: Vec<(usize, Place)>,
    last_compaction: Option<usize>,
    /// Records left aside, by what they are.
    aside: BTreeMap<String, u64>,
}

/// The most linked records one file may hold: what the survey keeps of
/// each (its links, its id as a keyed hash) is bounded with them.
const MAX_RECORDS: usize = 2_000_000;

/// A linked record as the survey keeps it: links and a line, no content.
struct Node {
    line: usize,
    parent: Option<u32>,
    /// The nearest message record above it (walking through progress,
    /// hook and system records).
    anchor: Option<u32>,
    message: bool,
    boundary: bool,
    side: bool,
    group: Option<u64>,
    results_only: bool,
}

/// Read `file` once: check every line, and find the conversation. For a
/// format whose records link to a parent, the conversation is the chain
/// that ends at the last record that can end one (as the source resumes
/// it), found by walking parent links up from there (each record at most
/// once), with the records that chain leaves out but belongs to it: the
/// other parts of a response whose part is on it (Claude Code writes a
/// parallel tool call's part as a branch) and the records of tool results
/// that branch off it. Every other message record is of another branch;
/// a sub-agent's record is never part of it.
fn survey(file: &Path, from: ImportFrom) -> Result<Survey, ImportError> {
    let read_err = |source| ImportError::Read {
        path: file.to_owned(),
        source,
    };
    let malformed = |line, why| ImportError::Malformed {
        path: file.to_owned(),
        line,
        why,
    };
    let mut check = parser(from);
    let mut scratch = Found::default();
    let mut items = Vec::new();
    let mut lines = Lines::new(open_source(file)?);
    // Ids are kept as hashes keyed for this process (a file cannot make
    // two ids collide): 8 bytes each, whatever their length.
    use std::hash::BuildHasher;
    let keys = std::hash::RandomState::new();
    let hash = |s: &str| keys.hash_one(s);
    let mut ids: HashMap<u64, u32> = HashMap::new();
    let mut nodes: Vec<Node> = Vec::new();
    let mut leaf: Option<u32> = None;
    let mut repeated: Vec<usize> = Vec::new();
    let mut out = Survey::default();
    while let Some((line, text)) = lines.next().map_err(read_err)? {
        let text = text.map_err(|why| malformed(line, why))?;
        check
            .line(line, text, &mut scratch, &mut items)
            .map_err(|why| malformed(line, why))?;
        items.clear();
        if check.is_compaction(text) {
            out.last_compaction = Some(line);
        }
        let Some(link) = check.link(text).map_err(|why| malformed(line, why))? else {
            continue;
        };
        let id = hash(&link.id);
        if ids.contains_key(&id) {
            // A record written again (Claude Code copies records when a
            // session is resumed or forked): the first one stands.
            repeated.push(line);
            continue;
        }
        let at = nodes.len() as u32;
        if nodes.len() >= MAX_RECORDS {
            return Err(malformed(
                line,
                format!("more than {MAX_RECORDS} linked records, more than an import reads"),
            ));
        }
        let mut parent = link
            .parent
            .as_deref()
            .and_then(|p| ids.get(&hash(p)).copied());
        if parent.is_none() && link.after_previous {
            parent = leaf;
        }
        let anchor = parent.and_then(|p| {
            let n = &nodes[p as usize];
            if n.message {
                Some(p)
            } else {
                n.anchor
            }
        });
        let group = link.group.as_deref().map(hash);
        nodes.push(Node {
            line,
            parent,
            anchor,
            message: link.leaf || link.side,
            boundary: link.after_previous,
            side: link.side,
            group,
            results_only: link.results_only,
        });
        if link.leaf {
            leaf = Some(at);
        }
        ids.insert(id, at);
    }
    drop(ids);
    if nodes.is_empty() {
        return Ok(out);
    }
    for line in repeated {
        out.aside_lines.push((line, Place::Repeated));
        *out.aside.entry("repeated records".to_owned()).or_default() += 1;
    }
    let mut on = vec![false; nodes.len()];
    let mut at = leaf;
    while let Some(i) = at {
        if std::mem::replace(&mut on[i as usize], true) {
            break;
        }
        at = nodes[i as usize].parent;
    }
    let spine_groups: HashSet<u64> = nodes
        .iter()
        .zip(&on)
        .filter_map(|(n, &on)| on.then_some(n.group).flatten())
        .collect();
    for i in 0..nodes.len() {
        let n = &nodes[i];
        if on[i] || !n.message || n.side {
            continue;
        }
        let anchored = n.anchor.is_some_and(|a| on[a as usize]);
        if anchored && (n.results_only || n.group.is_some_and(|g| spine_groups.contains(&g))) {
            on[i] = true;
        }
    }
    for (n, on) in nodes.iter().zip(&on) {
        let (place, what) = if n.side {
            (Place::Side, "sub-agent records (sidechains)")
        } else if !on && (n.message || n.boundary) {
            (Place::Branch, "records of other branches")
        } else {
            continue;
        };
        out.aside_lines.push((n.line, place));
        *out.aside.entry(what.to_owned()).or_default() += 1;
    }
    out.aside_lines.sort_unstable_by_key(|(line, _)| *line);
    Ok(out)
}

fn import_file(
    store: &Store,
    project: &Path,
    from: ImportFrom,
    file: &Path,
) -> Result<Report, ImportError> {
    let read_err = |source| ImportError::Read {
        path: file.to_owned(),
        source,
    };
    let mut parser = parser(from);
    let survey = survey(file, from)?;
    let mut found = Found::default();
    if !survey.aside.is_empty() {
        // What the conversation leaves aside, for the import record.
        found.session.insert(
            "records_aside".into(),
            Value::Object(
                survey
                    .aside
                    .iter()
                    .map(|(k, n)| (k.clone(), json!(n)))
                    .collect(),
            ),
        );
    }
    let mut builder = Builder::new(store, project, from, file);
    let size = open_source(file)?.metadata().map_err(read_err)?.len();
    let budget = store.limits().max_bytes;
    if let (true, Some(line)) = (size > budget, survey.last_compaction) {
        // Whatever came before the last compaction would not load as one
        // conversation: the source itself resumes from there.
        builder.commit_after = line;
        builder.dropped.push(format!(
            "larger than the load budget ({} MiB): imported from its last compaction (line {line}) on",
            budget >> 20
        ));
    }
    let mut lines = Lines::new(open_source(file)?);
    let mut items = Vec::new();
    let mut aside = survey.aside_lines.iter().copied().peekable();
    while let Some((line, text)) = lines.next().map_err(read_err)? {
        // The survey read every line; one that now fails (the file
        // changed since) ends the import there, as a malformed line.
        let malformed = |why| ImportError::Malformed {
            path: file.to_owned(),
            line,
            why,
        };
        let text = text.map_err(malformed)?;
        let mut place = Place::Read;
        while let Some(&(at, p)) = aside.peek() {
            if at > line {
                break;
            }
            if at == line {
                place = p;
            }
            aside.next();
        }
        match place {
            Place::Read => parser
                .line(line, text, &mut found, &mut items)
                .map_err(malformed)?,
            Place::Branch => found.skip("records of other branches"),
            Place::Side => found.skip("sub-agent records (sidechains)"),
            Place::Repeated => found.skip("repeated records"),
        }
        if !builder.items(&mut items, &found)? {
            break;
        }
    }
    parser.finish(&mut found, &mut items);
    if builder.items(&mut items, &found)? {
        match builder.end(&found) {
            Err(e @ ImportError::OverBudget { .. }) => builder.dropped.push(e.to_string()),
            other => other?,
        }
    }
    let (name, name_taken) = match (&builder.session, &found.title) {
        (Some((lease, _)), Some(title)) => name_from_title(store, lease.session(), title),
        _ => (None, None),
    };
    Ok(Report {
        session: builder.session.as_ref().map(|(l, _)| l.session().clone()),
        name,
        name_taken,
        checkpoints: builder.checkpoints,
        messages: builder.committed_len,
        skipped: found.skipped,
        dropped: builder.dropped,
    })
}

/// Read past the rest of an overlong line.
fn skip_line(reader: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        if let Some(i) = buf.iter().position(|b| *b == b'\n') {
            reader.consume(i + 1);
            return Ok(());
        }
        let n = buf.len();
        reader.consume(n);
    }
}

/// Name the session after `title` when that name is valid and free.
/// Returns the name given, or the name that was taken.
fn name_from_title(store: &Store, id: &SessionId, title: &str) -> (Option<String>, Option<String>) {
    let Some(name) = slug(title) else {
        return (None, None);
    };
    match hel_store::names::session_named(store, &name) {
        Ok(Some(_)) => (None, Some(name)),
        Ok(None) => match hel_store::names::rename(store, id, &name) {
            Ok(()) => (Some(name), None),
            Err(_) => (None, Some(name)),
        },
        Err(_) => (None, None),
    }
}

/// A session name made of a title: its words joined with `-`, letters
/// and digits only, at most 48 characters; None when nothing of it is
/// left or the result is not a valid name.
fn slug(title: &str) -> Option<String> {
    let mut out = String::new();
    for word in title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if out.len() + word.len() + 1 > 48 {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word.to_ascii_lowercase());
    }
    hel_store::check_name(&out).is_ok().then_some(out)
}

/// Turns items into a conversation and commits its completed answers.
struct Builder<'a> {
    store: &'a Store,
    from: ImportFrom,
    file: &'a Path,
    cwd: String,
    conversation: Conversation,
    /// Per message of the conversation, where it came from.
    metas: Vec<Meta>,
    /// The calls of the last assistant message still without a result.
    open: Vec<String>,
    /// Whether an instruction is in progress (a user message since the
    /// last completed answer).
    in_instruction: bool,
    /// The conversation's length at the last checkpoint.
    committed_len: usize,
    /// Messages from this index on are new since the last checkpoint (for
    /// the import record).
    new_from: usize,
    instruction: String,
    usage: (u64, u64),
    session: Option<(SessionLease, SessionState)>,
    checkpoints: u64,
    dropped: Vec<String>,
    /// Answers up to this line are not saved as checkpoints (a source
    /// over the load budget is imported from its last compaction on).
    commit_after: usize,
    /// Bytes of JSON the conversation holds in memory (bounded: see
    /// [`Builder::bounded`]).
    held: u64,
    /// Tool calls answered [`NO_RESULT`].
    synthetic: u64,
    /// The id of every tool call the conversation took in.
    seen_calls: HashSet<String>,
    /// The checkpoint about to be made ends without an answer (the
    /// source's last instruction had none).
    unanswered: bool,
    /// The file's secrets and their handles.
    secrets: hel_secrets::Redactor,
}

impl<'a> Builder<'a> {
    fn new(store: &'a Store, project: &Path, from: ImportFrom, file: &'a Path) -> Builder<'a> {
        // The system message is rebuilt from hel's environment on resume;
        // this one says where the conversation came from until then.
        let system = json!({
            "role": "system",
            "content": format!("A conversation imported from {}.", from.name()),
        });
        Builder {
            store,
            from,
            file,
            cwd: hel_agent::recorded_cwd(project),
            conversation: Conversation::from(vec![system]),
            metas: vec![Meta::default()],
            open: Vec::new(),
            in_instruction: false,
            committed_len: 1,
            new_from: 1,
            instruction: String::new(),
            usage: (0, 0),
            session: None,
            checkpoints: 0,
            dropped: Vec::new(),
            commit_after: 0,
            held: 0,
            synthetic: 0,
            seen_calls: HashSet::new(),
            unanswered: false,
            secrets: hel_secrets::Redactor::default(),
        }
    }

    /// The last message is a completed answer: a model message without
    /// tool calls.
    fn answered(&self) -> bool {
        self.in_instruction
            && self.conversation.messages().last().is_some_and(|m| {
                m["role"] == "assistant"
                    && m.get("tool_calls")
                        .and_then(Value::as_array)
                        .is_none_or(|c| c.is_empty())
            })
    }

    fn push(&mut self, message: Value, meta: Meta) {
        self.held = self.held.saturating_add(json_len(&message));
        self.conversation.push(message);
        self.metas.push(meta);
    }

    /// Recount what the conversation holds (after it lost messages).
    fn recount(&mut self) {
        self.held = self.conversation.messages().iter().map(json_len).sum();
    }

    /// A conversation held in memory stays within twice the load budget
    /// (a source's compaction may yet shrink it; past that, no answer of
    /// it could be saved anyway): past it the import of the file ends at
    /// line `line`.
    fn bounded(&self, line: usize) -> Result<(), ImportError> {
        let limits = self.store.limits();
        let (what, limit) =
            if self.conversation.len() as u64 > limits.max_messages.saturating_mul(2) {
                ("messages", limits.max_messages)
            } else if self.held > limits.max_bytes.saturating_mul(2) {
                ("bytes of messages", limits.max_bytes)
            } else {
                return Ok(());
            };
        Err(ImportError::OverBudget {
            path: self.file.to_owned(),
            line,
            over: hel_store::OverLimit::Conversation { what, limit },
        })
    }

    /// Take in `items` (drained). False: the conversation went over the
    /// load budget, which ends the import of the file there (what was
    /// saved stays, and the report says why it ends).
    fn items(&mut self, items: &mut Vec<Item>, found: &Found) -> Result<bool, ImportError> {
        for item in items.drain(..) {
            match self.item(item, found) {
                Ok(()) => {}
                Err(e @ ImportError::OverBudget { .. }) => {
                    self.dropped.push(e.to_string());
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    fn item(&mut self, mut item: Item, found: &Found) -> Result<(), ImportError> {
        // What the source holds of secrets comes in as handles.
        secrets::redact(&mut self.secrets, &mut item);
        let line = match &item {
            Item::User { meta, .. }
            | Item::Assistant { meta, .. }
            | Item::ToolResult { meta, .. }
            | Item::Compaction { meta, .. } => meta.line,
            Item::Usage { .. } => 0,
        };
        self.take(item, found)?;
        self.bounded(line)
    }

    fn take(&mut self, item: Item, found: &Found) -> Result<(), ImportError> {
        match item {
            Item::User { text, meta } => {
                if self.answered() {
                    self.checkpoint(found, meta.line)?;
                } else {
                    // An instruction the source left without an answer
                    // (interrupted, or a prompt sent on top of it) stays
                    // as it is: the next one continues it, as the source's
                    // own model saw it.
                    self.close_open(meta.line);
                }
                self.instruction = hel_store::first_line(&text);
                self.held = self.held.saturating_add(text.len() as u64);
                self.conversation.begin_instruction(&text);
                self.metas.push(meta);
                self.in_instruction = true;
            }
            Item::Assistant {
                text,
                calls,
                merge,
                across_results,
                complete,
                meta,
            } => {
                if !complete {
                    self.dropped.push(format!(
                        "line {}: a response that did not complete was left out",
                        meta.line
                    ));
                    return Ok(());
                }
                if let Some((i, o)) = meta.usage {
                    self.usage.0 = self.usage.0.saturating_add(i);
                    self.usage.1 = self.usage.1.saturating_add(o);
                }
                // A call id names one call: a call whose id the
                // conversation already holds (a record the source wrote
                // twice) or without one is left out, and said.
                let mut calls = calls;
                let before = calls.len();
                calls.retain(|c| !c.id.is_empty() && self.seen_calls.insert(c.id.clone()));
                if calls.len() < before {
                    self.dropped.push(format!(
                        "line {}: {} with an id the conversation already holds, or none, left out",
                        meta.line,
                        render::count((before - calls.len()) as u64, "tool call", "tool calls")
                    ));
                }
                // The response this record is a part of: the last model
                // message, with only tool results after it.
                let messages = self.conversation.messages();
                let response = match across_results {
                    true => messages.iter().rposition(|m| m["role"] != "tool"),
                    false => messages.len().checked_sub(1),
                }
                .filter(|&i| messages[i]["role"] == "assistant");
                if let (true, Some(i)) = (merge, response) {
                    self.extend(i, text, &calls, meta);
                } else {
                    self.close_open(meta.line);
                    let mut m = json!({"role": "assistant", "content": text});
                    if !calls.is_empty() {
                        m["tool_calls"] = calls_json(&calls);
                    }
                    self.open = calls.into_iter().map(|c| c.id).collect();
                    self.push(m, meta);
                }
            }
            Item::ToolResult {
                call_id,
                content,
                meta,
            } => {
                let Some(at) = self.open.iter().position(|c| *c == call_id) else {
                    self.dropped.push(format!(
                        "line {}: a tool result for a call the conversation does not hold was left out",
                        meta.line
                    ));
                    return Ok(());
                };
                self.open.remove(at);
                self.push(
                    json!({"role": "tool", "tool_call_id": call_id, "content": content}),
                    meta,
                );
                if self.open.is_empty() {
                    self.conversation.round_finished();
                }
            }
            Item::Usage { input, output } => {
                self.usage.0 = self.usage.0.saturating_add(input);
                self.usage.1 = self.usage.1.saturating_add(output);
                if let Some(m) = self.metas.last_mut() {
                    m.fields.insert(
                        "usage".into(),
                        json!({"input_tokens": input, "output_tokens": output}),
                    );
                }
            }
            Item::Compaction {
                summary,
                keep_from,
                meta,
            } => {
                // The answer before it is a checkpoint of its own; so is
                // an instruction the compaction cut in the middle (the
                // source compacts between two calls of the model), saved
                // as it stands, so that every message of the source is in
                // some checkpoint before the summary replaces it.
                if self.answered() {
                    self.checkpoint(found, meta.line)?;
                } else if self.conversation.len() > self.committed_len {
                    self.close_open(meta.line);
                    let open = self.in_instruction;
                    self.checkpoint(found, meta.line)?;
                    self.in_instruction = open;
                }
                self.compact(&summary, keep_from.as_deref(), meta);
            }
        }
        Ok(())
    }

    /// Add text and calls to model message `i` (only tool results follow
    /// it: the calls added are answered after them).
    fn extend(&mut self, i: usize, text: Option<String>, calls: &[Call], meta: Meta) {
        let added = text.as_ref().map_or(0, |t| t.len())
            + calls
                .iter()
                .map(|c| c.id.len() + c.name.len() + c.arguments.len())
                .sum::<usize>();
        self.held = self.held.saturating_add(added as u64);
        self.conversation.edit(i, |m| {
            if let Some(t) = text {
                m["content"] = match m["content"].as_str() {
                    Some(old) if !old.is_empty() => Value::String(format!("{old}\n{t}")),
                    _ => Value::String(t),
                };
            }
            if !calls.is_empty() {
                let mut all = m["tool_calls"].as_array().cloned().unwrap_or_default();
                if let Value::Array(new) = calls_json(calls) {
                    all.extend(new);
                }
                m["tool_calls"] = Value::Array(all);
            }
        });
        self.open.extend(calls.iter().map(|c| c.id.clone()));
        let last = &mut self.metas[i];
        // One message of several records: each record's fields are kept.
        let earlier = std::mem::take(&mut last.fields);
        let parts = match earlier.get("parts") {
            Some(Value::Array(p)) => p.clone(),
            _ => vec![Value::Object(earlier)],
        };
        let mut parts = parts;
        parts.push(Value::Object(meta.fields));
        last.fields.insert("parts".into(), Value::Array(parts));
    }

    /// Tool calls the source recorded no result for (the session was
    /// interrupted or crashed while they ran, or the file ends there) are
    /// answered "no result was recorded", marked as such in the import
    /// record, so that the conversation pairs every call as a load
    /// requires and the model, resumed, knows the call's outcome is
    /// unknown.
    fn close_open(&mut self, line: usize) {
        if self.open.is_empty() {
            return;
        }
        let open = std::mem::take(&mut self.open);
        for id in &open {
            let mut meta = Meta::at(line);
            meta.set("synthetic", Some(Value::Bool(true)));
            self.push(
                json!({"role": "tool", "tool_call_id": id, "content": NO_RESULT}),
                meta,
            );
        }
        self.conversation.round_finished();
        self.synthetic += open.len() as u64;
        self.dropped.push(format!(
            "before line {line}: {} without a recorded result answered \"{NO_RESULT}\"",
            render::count(open.len() as u64, "tool call", "tool calls")
        ));
    }

    /// The source's compaction: the messages before the kept ones become
    /// one summary message, as hel's compaction makes it.
    fn compact(&mut self, summary: &str, keep_from: Option<&str>, meta: Meta) {
        let messages = self.conversation.messages();
        let mut end = keep_from
            .and_then(|id| {
                self.metas
                    .iter()
                    .position(|m| m.fields.get("id").and_then(Value::as_str) == Some(id))
            })
            .unwrap_or(messages.len());
        // The kept tail never starts with a tool result.
        while end < messages.len() && messages[end]["role"] == "tool" {
            end += 1;
        }
        if end <= 1 {
            // Nothing before the kept messages: nothing to summarize.
            return;
        }
        // Calls whose results would be summarized away are closed.
        if end >= messages.len() {
            self.open.clear();
        }
        let mut m = meta;
        m.fields.insert("compaction".into(), Value::Bool(true));
        self.conversation
            .summarize(1, end, summary_message(summary));
        let removed = end - 1;
        self.metas.splice(1..end, [m]);
        self.recount();
        // Where the last checkpoint's end is now (as Conversation moves
        // an instruction's completed point).
        let c = self.committed_len;
        self.committed_len = if c >= end {
            c - removed + 1
        } else if c > 1 {
            2
        } else {
            c
        };
        // The summary is new, and the kept messages are named again.
        self.new_from = 1;
    }

    /// Commit the conversation as it stands (the answer was known
    /// complete at line `line`): one checkpoint, its import record naming
    /// what is new since the last one.
    fn checkpoint(&mut self, found: &Found, line: usize) -> Result<(), ImportError> {
        if line <= self.commit_after {
            // Before the last compaction of a source too large to load:
            // the conversation goes on, its answers unsaved.
            self.conversation.finish_instruction();
            self.committed_len = self.conversation.len();
            self.new_from = self.committed_len;
            self.usage = (0, 0);
            self.in_instruction = false;
            return Ok(());
        }
        // Nothing is saved that a load would refuse.
        if let Some((last, before)) = self.conversation.messages().split_last() {
            let at = self.metas.last().map_or(line, |m| m.line);
            self.store
                .limits()
                .admit(before, last)
                .map_err(|over| ImportError::OverBudget {
                    path: self.file.to_owned(),
                    line: at,
                    over,
                })?;
        }
        // A session is taken only for a conversation a load would accept
        // (each checkpoint after is admitted again by its commit, before
        // anything of it is written).
        if self.session.is_none() {
            hel_store::admit::conversation(self.store.limits(), self.conversation.messages())
                .map_err(|e| self.store_error(e))?;
            let lease = self.store.new_session().map_err(|e| self.store_error(e))?;
            self.session = Some((lease, SessionState::default()));
        }
        let config = RequestConfig::imported(
            self.from.name(),
            found.model.as_deref().unwrap_or_default(),
            self.import_record(found),
        );
        let input = CommitInput::new(
            Record::Answer,
            self.conversation.messages(),
            self.conversation.leaves(),
            &self.cwd,
            SessionRecord::of(config),
        )
        .instruction(&self.instruction)
        .usage(self.usage.0, self.usage.1)
        .why(format!("import from {}", self.from.name()));
        let Some((lease, state)) = self.session.as_mut() else {
            return Ok(());
        };
        let committed = match self.store.commit(lease, state, input) {
            Ok(c) => c,
            Err(e) => return Err(self.store_error(e)),
        };
        for w in &committed.warnings {
            render::line(&format!("hel: warning: {w}"));
        }
        self.conversation.committed(&committed);
        self.conversation.finish_instruction();
        self.checkpoints += 1;
        self.committed_len = self.conversation.len();
        self.new_from = self.committed_len;
        self.usage = (0, 0);
        self.in_instruction = false;
        Ok(())
    }

    /// A store error of this file; one that names a message the load
    /// would refuse says the line it came from.
    fn store_error(&self, source: hel_store::Error) -> ImportError {
        let line = match &source {
            hel_store::Error::Refused { at: Some(i), .. } => self.metas.get(*i).map(|m| m.line),
            _ => None,
        };
        ImportError::Store {
            path: self.file.to_owned(),
            line,
            source: Box::new(source),
        }
    }

    /// The import record of the checkpoint about to be made (objects-spec
    /// §16), within [`RECORD_BUDGET`].
    fn import_record(&self, found: &Found) -> ImportRecord {
        let messages = (self.new_from..self.conversation.len())
            .filter_map(|i| {
                let m = self.metas.get(i)?;
                (!m.fields.is_empty()).then(|| ImportedMessage {
                    index: i,
                    line: m.line,
                    source: m.fields.clone(),
                })
            })
            .collect();
        let mut session = found.session.clone();
        if self.unanswered {
            session.insert("last_instruction_unanswered".into(), Value::Bool(true));
        }
        let mut record = ImportRecord {
            version: IMPORT_RECORD_VERSION,
            from: self.from.name().to_owned(),
            file: self.file.display().to_string(),
            session,
            messages,
            cut: None,
        };
        if record.stored_len() > RECORD_BUDGET {
            for m in &mut record.messages {
                drop_thinking(&mut m.source);
            }
            drop_thinking(&mut record.session);
        }
        if record.stored_len() > RECORD_BUDGET {
            record.messages.clear();
            record.cut = Some("the per-message fields were over the record's budget".into());
        }
        record
    }

    /// The file ended: commit a completed last answer; what follows the
    /// last one is dropped and said.
    fn end(&mut self, found: &Found) -> Result<(), ImportError> {
        if self.answered() {
            return self.checkpoint(found, usize::MAX);
        }
        let tail = self.conversation.len().saturating_sub(self.committed_len);
        if tail == 0 {
            return Ok(());
        }
        // The source's last instruction has no answer (interrupted, or the
        // file was copied while it ran): the conversation is saved as it
        // stands, its import record saying so, rather than lost.
        let line = self.metas.get(self.committed_len).map_or(0, |m| m.line);
        let last = self.metas.last().map_or(0, |m| m.line);
        self.close_open(last);
        self.unanswered = true;
        self.checkpoint(found, usize::MAX)?;
        self.dropped.push(format!(
            "the last instruction (from line {line} on) has no answer: saved as it stands"
        ));
        Ok(())
    }
}

/// Thinking text replaced by its size, everywhere in `fields`.
fn drop_thinking(fields: &mut Map<String, Value>) {
    if let Some(t) = fields.get_mut("thinking") {
        let chars = serde_json::to_string(t).map_or(0, |s| s.len());
        *t = json!({"left_out": true, "bytes": chars});
    }
    let mut stack: Vec<&mut Value> = fields.values_mut().collect();
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                if let Some(t) = map.get_mut("thinking") {
                    let chars = serde_json::to_string(t).map_or(0, |s| s.len());
                    *t = json!({"left_out": true, "bytes": chars});
                }
                stack.extend(map.values_mut());
            }
            Value::Array(a) => stack.extend(a.iter_mut()),
            _ => {}
        }
    }
}

/// The length of a message's JSON.
fn json_len(m: &Value) -> u64 {
    serde_json::to_string(m).map_or(0, |s| s.len() as u64)
}

fn calls_json(calls: &[Call]) -> Value {
    Value::Array(
        calls
            .iter()
            .map(|c| {
                json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An import's checkpoint that a load would refuse (here a tool call
    /// whose result never came, as a transcript the importer misread
    /// could leave) is refused before anything is written, naming its
    /// line: the first takes no session, a later one adds nothing.
    #[test]
    fn an_import_a_load_would_refuse_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rollout.jsonl");
        let store = Store::open(dir.path()).unwrap();
        let found = Found::default();
        let user = |text: &str, line| Item::User {
            text: text.into(),
            meta: Meta::at(line),
        };
        let answer = |text: &str, line| Item::Assistant {
            text: Some(text.into()),
            calls: Vec::new(),
            merge: false,
            across_results: false,
            complete: true,
            meta: Meta::at(line),
        };
        let unanswered = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        ]});
        // The answer at line 11 comes while the call of line 10 is open.
        let refused = |b: &mut Builder<'_>| {
            b.push(unanswered.clone(), Meta::at(10));
            b.take(answer("done", 11), &found).unwrap();
            b.end(&found).unwrap_err().to_string()
        };
        // The first checkpoint: no session is taken.
        let mut b = Builder::new(&store, dir.path(), ImportFrom::Codex, &file);
        b.take(user("again", 9), &found).unwrap();
        let err = refused(&mut b);
        assert!(
            err.contains("(line 11)") && err.contains("tool call \"c1\" has no result"),
            "{err}"
        );
        assert!(b.session.is_none());
        assert!(
            !dir.path().join(".hel").exists(),
            "{:?}",
            hel_store::testing::files_under(dir.path())
        );
        // After a checkpoint: the next one adds nothing.
        let mut b = Builder::new(&store, dir.path(), ImportFrom::Codex, &file);
        b.take(user("first", 1), &found).unwrap();
        b.take(answer("one", 2), &found).unwrap();
        b.take(user("again", 9), &found).unwrap();
        assert_eq!(b.checkpoints, 1);
        let before = hel_store::testing::files_under(dir.path());
        let err = refused(&mut b);
        assert!(err.contains("(line 11)"), "{err}");
        assert_eq!(b.checkpoints, 1);
        assert_eq!(hel_store::testing::files_under(dir.path()), before);
    }

    /// A source over the load budget is imported from its last
    /// compaction on: the answers before it make no checkpoint.
    #[test]
    fn a_source_over_the_load_budget_starts_at_its_last_compaction() {
        let dir = tempfile::tempdir().unwrap();
        // Three long answers, a compaction, one short answer.
        let msg = |role: &str, kind: &str, text: &str| {
            json!({"type": "response_item", "payload": {"type": "message", "role": role,
                "content": [{"type": kind, "text": text}]}})
            .to_string()
        };
        let long = "x".repeat(40_000);
        let mut lines = Vec::new();
        for i in 0..3 {
            lines.push(msg("user", "input_text", &format!("question {i}")));
            lines.push(msg("assistant", "output_text", &long));
        }
        lines.push(
            json!({"type": "compacted", "payload": {"message": "three answers"}}).to_string(),
        );
        lines.push(msg("user", "input_text", "last question"));
        lines.push(msg("assistant", "output_text", "last answer"));
        let file = dir.path().join("rollout.jsonl");
        std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        let limits = hel_store::Limits {
            max_messages: 1000,
            max_bytes: 100_000,
        };
        let store = Store::open_with(dir.path(), limits).unwrap();
        let report = import_file(&store, dir.path(), ImportFrom::Codex, &file).unwrap();
        assert_eq!(report.checkpoints, 1);
        assert!(
            report.dropped[0].contains("imported from its last compaction (line 7) on"),
            "{:?}",
            report.dropped
        );
        let id = report.session.unwrap();
        let loaded = store.load(&store.head(&id).unwrap()).unwrap();
        let texts: Vec<&str> = loaded.messages[1..]
            .iter()
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(
            texts,
            [
                "<compacted-summary>\nthree answers\n</compacted-summary>",
                "last question",
                "last answer"
            ]
        );
        // Over the budget with no compaction after: the answers before
        // the one that goes over it are imported, and the report says so.
        let dir = tempfile::tempdir().unwrap();
        let limits = hel_store::Limits {
            max_messages: 1000,
            max_bytes: 100_000,
        };
        let store = Store::open_with(dir.path(), limits).unwrap();
        let plain = dir.path().join("plain.jsonl");
        std::fs::write(&plain, lines[..6].join("\n") + "\n").unwrap();
        let report = import_file(&store, dir.path(), ImportFrom::Codex, &plain).unwrap();
        assert_eq!(report.checkpoints, 2, "{:?}", report.dropped);
        assert!(
            report
                .dropped
                .iter()
                .any(|d| d.contains("over the load budget") && d.contains("at line 6")),
            "{:?}",
            report.dropped
        );
        let id = report.session.unwrap();
        assert_eq!(
            store
                .load(&store.head(&id).unwrap())
                .unwrap()
                .messages
                .len(),
            5
        );
        // An instruction that grows past twice the budget without an
        // answer is not held in memory to its end: the import stops there.
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_with(dir.path(), limits).unwrap();
        let mut big = vec![msg("user", "input_text", "read them all")];
        for i in 0..20 {
            big.push(
                json!({"type": "response_item", "payload": {"type": "function_call",
                "name": "shell", "arguments": "{}", "call_id": format!("c{i}")}})
                .to_string(),
            );
        }
        for i in 0..20 {
            big.push(
                json!({"type": "response_item", "payload": {"type": "function_call_output",
                "call_id": format!("c{i}"), "output": long}})
                .to_string(),
            );
        }
        let big_file = dir.path().join("big.jsonl");
        std::fs::write(&big_file, big.join("\n") + "\n").unwrap();
        let report = import_file(&store, dir.path(), ImportFrom::Codex, &big_file).unwrap();
        assert!(report.session.is_none());
        assert!(
            report
                .dropped
                .iter()
                .any(|d| d.contains("over the load budget") && d.contains("at line 26")),
            "{:?}",
            report.dropped
        );
        // Within the budget, every answer is a checkpoint.
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let report = import_file(&store, dir.path(), ImportFrom::Codex, &file).unwrap();
        assert_eq!(report.checkpoints, 4);
    }

    /// Newer Codex compactions carry the history that replaces the old
    /// one: its text is the summary; one with no text at all is refused.
    #[test]
    fn a_codex_replacement_history_is_the_summary() {
        let mut p = codex::Codex::default();
        let mut found = Found::default();
        let mut out = Vec::new();
        let line = json!({"type": "compacted", "payload": {"message": "", "replacement_history": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>x</environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the bug"}]},
            {"type": "compaction_summary", "encrypted_content": "..."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "we found it in parse.rs"}]},
        ]}});
        p.line(3, line.to_string().as_bytes(), &mut found, &mut out)
            .unwrap();
        let Some(Item::Compaction { summary, .. }) = out.pop() else {
            panic!("no compaction");
        };
        assert_eq!(summary, "fix the bug\n\nwe found it in parse.rs");
        let empty = json!({"type": "compacted", "payload": {"message": " "}}).to_string();
        let e = p
            .line(4, empty.as_bytes(), &mut found, &mut out)
            .unwrap_err();
        assert!(e.contains("no summary"), "{e}");
    }

    #[test]
    fn slugs_are_names_or_nothing() {
        assert_eq!(
            slug("Fix the login bug!").as_deref(),
            Some("fix-the-login-bug")
        );
        assert_eq!(slug("   "), None);
        assert_eq!(slug("deadbeef"), None);
        assert!(slug(&"word ".repeat(40)).unwrap().len() <= 48);
    }
}
