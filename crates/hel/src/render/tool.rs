//! How a tool call reads in the live view: its call line in a short form
//! (a command's text, an edit's path), an edit as its file's diff, a
//! command as its exit status and its last lines and the files it
//! changed; the last result kept whole for `/last`. Everything here comes
//! from outside hel (the model's arguments, a file's text, a command's
//! output): each line is stripped or escaped before it is shown.

use std::sync::Mutex;

use hel_agent::text::{count, escape_line};
use hel_agent::{Edit, FileChange};

/// Diff lines shown of an edit before the rest is folded.
pub const DIFF_LINES: usize = 20;

/// Unchanged lines shown around each change of a diff.
pub const CONTEXT: usize = 2;

/// Lines shown of each of a command's streams.
pub const OUTPUT_LINES: usize = 6;

/// Files named of those a command changed before the rest is counted.
pub const CHANGED_FILES: usize = 10;

/// Files a command changed shown with their diffs, at most (hel-agent
/// sends the texts of no more).
pub const DIFFED_FILES: usize = 3;

/// Bytes of a file or an edit's text diffed: past this the edit is not
/// shown as a diff (its result line says what happened).
const DIFF_BYTES: usize = 1 << 20;

/// Bytes of a tool result kept for `/last`.
const LAST_BYTES: usize = 4 << 20;

/// What the live view holds between a call's start and its end.
#[derive(Default)]
struct Calls {
    /// The edit running: its call id, the change and the file before it.
    edit: Option<(String, Edit, Before)>,
    /// The files the running call changed ([`changed`]).
    changed: Vec<FileChange>,
    /// The last call that ended: its call line and its result.
    last: Option<(String, String)>,
    /// The call line of the call running, for `/last`.
    line: String,
}

static CALLS: Mutex<Calls> = Mutex::new(Calls {
    edit: None,
    changed: Vec::new(),
    last: None,
    line: String::new(),
});

/// Whether the calls run at the interactive prompt, where `/last` shows
/// a command's whole output ([`at_prompt`]); with -p no key is named.
static AT_PROMPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The calls from now on run at the interactive prompt.
pub fn at_prompt() {
    AT_PROMPT.store(true, std::sync::atomic::Ordering::Relaxed);
}

fn calls() -> std::sync::MutexGuard<'static, Calls> {
    CALLS.lock().unwrap_or_else(|e| e.into_inner())
}

/// One line of a diff or of a command's output, as shown.
#[derive(Debug, PartialEq, Eq)]
pub enum Shown {
    /// A removed line (red on a coloured terminal).
    Removed(String),
    /// An added line (green).
    Added(String),
    /// An unchanged line, a label or a count (dim).
    Plain(String),
    /// A line of output, as it is.
    Output(String),
}

impl Shown {
    /// Its text.
    pub fn text(&self) -> &str {
        match self {
            Shown::Removed(t) | Shown::Added(t) | Shown::Plain(t) | Shown::Output(t) => t,
        }
    }

    fn map(self, f: impl FnOnce(String) -> String) -> Shown {
        match self {
            Shown::Removed(t) => Shown::Removed(f(t)),
            Shown::Added(t) => Shown::Added(f(t)),
            Shown::Plain(t) => Shown::Plain(f(t)),
            Shown::Output(t) => Shown::Output(f(t)),
        }
    }
}

/// What an edited file held before the edit, as read for its diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// Nothing there: the edit makes the file.
    Missing,
    Text(String),
    /// Not shown as a diff, and why (`binary`, `too large to show as a
    /// diff`, …).
    Not(&'static str),
}

/// The project's root when it is not where hel runs, for [`before`].
static ROOT: Mutex<Option<std::path::PathBuf>> = Mutex::new(None);

/// The project's root (None: where hel runs): only files beneath it are
/// read for a diff.
pub fn set_root(root: Option<&std::path::Path>) {
    *ROOT.lock().unwrap_or_else(|e| e.into_inner()) = root.map(|r| r.to_owned());
}

/// What the file at `path` (as the model names it: relative to where hel
/// runs) holds now, read for a diff: only beneath the project's root
/// (links followed: an edit outside it is refused anyway, and nothing
/// outside is shown), at most [`DIFF_BYTES`], only a regular file (a
/// FIFO or a device is never opened to block), only UTF-8 text.
pub fn before(path: &str) -> Before {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let real = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Before::Missing,
        Err(_) => return Before::Not("unreadable"),
    };
    let root = ROOT.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let root = root.or_else(|| std::env::current_dir().ok());
    let root = root.and_then(|r| std::fs::canonicalize(r).ok());
    if !root.is_some_and(|r| real.starts_with(r)) {
        return Before::Not("outside the project");
    }
    let path = real.as_path();
    let Ok(meta) = std::fs::metadata(path) else {
        return Before::Not("unreadable");
    };
    if !meta.is_file() {
        return Before::Not("not a regular file");
    }
    if meta.len() > DIFF_BYTES as u64 {
        return Before::Not("too large to show as a diff");
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    let Ok(file) = file else {
        return Before::Not("unreadable");
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Before::Not("not a regular file");
    }
    let mut bytes = Vec::new();
    if file
        .take(DIFF_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .is_err()
    {
        return Before::Not("unreadable");
    }
    if bytes.len() > DIFF_BYTES {
        return Before::Not("too large to show as a diff");
    }
    match String::from_utf8(bytes) {
        Ok(t) if !t.contains('\0') => Before::Text(masked(t)),
        _ => Before::Not("binary"),
    }
}

/// `text` (a file's content, read to be shown) with the secrets it holds
/// shown as `‹secret›`: a diff never puts a value on the screen.
fn masked(text: String) -> String {
    static DETECTOR: std::sync::OnceLock<hel_secrets::Detector> = std::sync::OnceLock::new();
    let detector = DETECTOR.get_or_init(hel_secrets::Detector::from_env);
    match detector.mask(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(m) => m,
    }
}

/// The texts an edit's diff compares (the file before and after, with
/// its line numbers: true), given what the file held before; for a
/// search_replace whose text is not in the file exactly once, its search
/// and replace texts (no line numbers: the call fails). Err: no diff,
/// and why.
pub fn texts(edit: &Edit, before: &Before) -> Result<(String, String, bool), &'static str> {
    let large = match edit {
        Edit::Write(content) => content.len() > DIFF_BYTES,
        Edit::Replace { search, replace } => search.len() + replace.len() > DIFF_BYTES,
    };
    if large {
        return Err("too large to show as a diff");
    }
    match (edit, before) {
        (_, Before::Not(why)) => match edit {
            Edit::Replace { search, replace } => Ok((search.clone(), replace.clone(), false)),
            Edit::Write(_) => Err(why),
        },
        (Edit::Write(content), Before::Missing) => Ok((String::new(), content.clone(), true)),
        (Edit::Write(content), Before::Text(old)) => Ok((old.clone(), content.clone(), true)),
        (Edit::Replace { search, replace }, Before::Text(old))
            if !search.is_empty() && old.matches(search.as_str()).nth(1).is_none() =>
        {
            match old.find(search.as_str()) {
                Some(_) => Ok((old.clone(), old.replacen(search.as_str(), replace, 1), true)),
                None => Ok((search.clone(), replace.clone(), false)),
            }
        }
        (Edit::Replace { search, replace }, _) => Ok((search.clone(), replace.clone(), false)),
    }
}

/// One line of a diff, its text as it is (not escaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    /// `-` removed, `+` added, ` ` unchanged, `⋮` changes far apart.
    pub tag: char,
    /// Its number in the file (the old file's for a removed line, the
    /// new one's else), as wide as the diff's widest.
    pub number: String,
    /// The line without its `\n` (a CR before it stays: a confirm
    /// shows it).
    pub text: String,
    /// A changed line that has no line end (the file's last).
    pub unended: bool,
}

impl DiffLine {
    /// What stands before its text: its number and its tag.
    pub fn head(&self) -> String {
        match (self.number.is_empty(), self.tag) {
            (_, '⋮') => format!("{}⋮", self.number),
            (true, tag) => tag.to_string(),
            (false, tag) => format!("{} {tag}", self.number),
        }
    }
}

/// The lines of `old` changed into `new`, none folded. With `numbered`,
/// each change with [`CONTEXT`] unchanged lines around it and the line
/// numbers of the file, changes far apart set off by `⋮`; else every
/// line.
pub fn diff_lines(old: &str, new: &str, numbered: bool) -> Vec<DiffLine> {
    // Past the deadline the diff is not the shortest, still every change.
    let d = similar::TextDiff::configure()
        .timeout(std::time::Duration::from_secs(1))
        .diff_lines(old, new);
    let width = if numbered {
        (old.lines().count().max(new.lines().count()).max(1)).ilog10() as usize + 1
    } else {
        0
    };
    let line = |c: similar::Change<&str>| {
        let t = c.value();
        let ended = t.ends_with('\n');
        let t = t.strip_suffix('\n').unwrap_or(t);
        let (tag, number) = match c.tag() {
            similar::ChangeTag::Delete => ('-', c.old_index()),
            similar::ChangeTag::Insert => ('+', c.new_index()),
            similar::ChangeTag::Equal => (' ', c.new_index()),
        };
        DiffLine {
            tag,
            number: match number {
                Some(n) if numbered => format!("{:>width$}", n + 1),
                _ => String::new(),
            },
            text: t.to_owned(),
            unended: numbered && !ended && tag != ' ',
        }
    };
    if !numbered {
        return d.iter_all_changes().map(line).collect();
    }
    let mut lines = Vec::new();
    for (i, group) in d.grouped_ops(CONTEXT).iter().enumerate() {
        if i > 0 {
            lines.push(DiffLine {
                tag: '⋮',
                number: " ".repeat(width.saturating_sub(1)),
                text: String::new(),
                unended: false,
            });
        }
        for op in group {
            lines.extend(d.iter_changes(op).map(line));
        }
    }
    lines
}

/// [`diff_lines`] as the live view shows them: escaped, `-` lines
/// removed, `+` added, the rest plain.
pub fn diff(old: &str, new: &str, numbered: bool) -> Vec<Shown> {
    if old.len() > DIFF_BYTES || new.len() > DIFF_BYTES {
        return vec![Shown::Plain("(too large to show as a diff)".to_owned())];
    }
    diff_lines(old, new, numbered)
        .into_iter()
        .map(|l| {
            let end = if l.unended { "  (no line end)" } else { "" };
            let text = l.text.strip_suffix('\r').unwrap_or(&l.text);
            let t = format!("{}{}{end}", l.head(), escape_line(text));
            match l.tag {
                '-' => Shown::Removed(t),
                '+' => Shown::Added(t),
                _ => Shown::Plain(t),
            }
        })
        .collect()
}

/// `lines` with at most `max` of them, the rest counted
/// (`… 40 more lines`).
pub fn fold(mut lines: Vec<Shown>, max: usize) -> Vec<Shown> {
    if lines.len() > max {
        let more = lines.len() - max;
        lines.truncate(max);
        lines.push(Shown::Plain(format!(
            "… {}",
            count(more as u64, "more line", "more lines")
        )));
    }
    lines
}

/// The change a call of `name` with `arguments` makes, for an edit
/// (`write_file`, `search_replace`) whose arguments parse (with bounds),
/// and the path it names.
fn edit_of(name: &str, arguments: &str) -> Option<(String, Edit)> {
    if !matches!(name, "write_file" | "search_replace") || arguments.len() > 2 * DIFF_BYTES {
        return None;
    }
    let v = hel_store::json::parse(arguments.as_bytes(), hel_store::json::Limits::SMALL).ok()?;
    let text = |k: &str| v.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let path = text("path")?;
    let edit = match name {
        "write_file" => Edit::Write(text("content")?),
        _ => Edit::Replace {
            search: text("search")?,
            replace: text("replace")?,
        },
    };
    Some((path, edit))
}

/// A call in a few words, after its tool's name: a command's text, an
/// edit's or a read's path, a search's pattern (and where), any other
/// call's arguments as compact JSON. Not escaped yet.
pub fn call_words(name: &str, arguments: &str) -> String {
    let parsed = (arguments.len() <= 1 << 20)
        .then(|| hel_store::json::parse(arguments.as_bytes(), hel_store::json::Limits::SMALL).ok())
        .flatten();
    let Some(v) = parsed else {
        return arguments.to_owned();
    };
    let text = |k: &str| v.get(k).and_then(|v| v.as_str());
    let words = match name {
        // Each line of a command apart, on the one line.
        "bash" => text("command").map(|c| c.trim_end_matches('\n').replace('\n', " ⏎ ")),
        "write_file" | "search_replace" => text("path").map(str::to_owned),
        "read_file" => Some(text("path").or(text("cursor")).unwrap_or("").to_owned()),
        "glob" | "grep" => text("pattern").map(|p| match text("path") {
            Some(dir) => format!("{p} in {dir}"),
            None => p.to_owned(),
        }),
        _ => None,
    };
    words.unwrap_or_else(|| serde_json::to_string(&v).unwrap_or_else(|_| arguments.to_owned()))
}

/// A call starting: its line (`hel: bash cargo test -q`, `hel:
/// write_file calc.py`; not escaped yet). An edit's file is read as it
/// is now, for its diff when it ends.
pub fn started(id: &str, name: &str, arguments: &str) -> String {
    let edit = edit_of(name, arguments).map(|(path, edit)| {
        let before = before(&path);
        (id.to_owned(), edit, before)
    });
    let line = format!("hel: {name} {}", call_words(name, arguments));
    let mut c = calls();
    c.edit = edit;
    c.changed.clear();
    c.line = line.clone();
    line
}

/// The files the running call changed (`A`, `M`, `D`, a path and maybe
/// its texts), shown when it ends.
pub fn changed(mut files: Vec<FileChange>) {
    for f in &mut files {
        f.texts = f.texts.take().map(|(old, new)| (masked(old), masked(new)));
    }
    calls().changed = files;
}

/// The call `id` of `name` ended with `content`: kept as the last result
/// (for `/last`); the files it changed, one line each (`A path`), the
/// first [`CHANGED_FILES`] then how many more, unless it was an edit
/// (its diff says it); under each of the first [`DIFFED_FILES`] whose
/// texts are known, its diff as an edit's (numbered, folded after
/// [`DIFF_LINES`]).
pub fn ended(name: &str, content: &str) -> Vec<Shown> {
    let mut c = calls();
    let mut kept = content.to_owned();
    if kept.len() > LAST_BYTES {
        let mut end = LAST_BYTES;
        while !kept.is_char_boundary(end) {
            end -= 1;
        }
        kept.truncate(end);
    }
    let line = std::mem::take(&mut c.line);
    c.last = Some((line, kept));
    let files = std::mem::take(&mut c.changed);
    if matches!(name, "write_file" | "search_replace") {
        return Vec::new();
    }
    let mut lines: Vec<Shown> = Vec::new();
    let mut diffed = 0;
    for f in files.iter().take(CHANGED_FILES) {
        lines.push(Shown::Plain(format!(
            "  {} {}",
            f.kind,
            escape_line(&f.path)
        )));
        if let Some((old, new)) = f.texts.as_ref().filter(|_| diffed < DIFFED_FILES) {
            diffed += 1;
            let shown = fold(diff(old, new, true), DIFF_LINES);
            lines.extend(shown.into_iter().map(|l| l.map(|t| format!("    {t}"))));
        }
    }
    if files.len() > CHANGED_FILES {
        lines.push(Shown::Plain(format!(
            "  … {}",
            count(
                (files.len() - CHANGED_FILES) as u64,
                "more file",
                "more files"
            )
        )));
    }
    lines
}

/// The diff of the edit `id` that ended well, if it was one (taken: asked
/// once): the file's changed lines with their numbers, folded after
/// [`DIFF_LINES`].
pub fn finished_edit(id: &str) -> Option<Vec<Shown>> {
    let (eid, edit, before) = calls().edit.take()?;
    if eid != id {
        return None;
    }
    let lines = match texts(&edit, &before) {
        Ok((old, new, true)) if old == new => vec![Shown::Plain("(the file is as it was)".into())],
        Ok((old, new, numbered)) => fold(diff(&old, &new, numbered), DIFF_LINES),
        Err(why) => vec![Shown::Plain(format!("({why}: no diff shown)"))],
    };
    Some(
        lines
            .into_iter()
            .map(|l| l.map(|t| format!("  {t}")))
            .collect(),
    )
}

/// The last tool result whole, for `/last`: its call line, then for a
/// command its exit status and each stream apart under its label, else
/// the result; escape sequences and control characters stripped. None
/// before any call ended.
pub fn last() -> Option<String> {
    let c = calls();
    let (line, content) = c.last.as_ref()?;
    let mut out = format!("{}\n", strip(line));
    let lines = |text: &str, indent: &str, out: &mut String| {
        for l in text.split('\n') {
            let l = l.strip_suffix('\r').unwrap_or(l);
            out.push_str(indent);
            out.push_str(&strip(l.rsplit('\r').next().unwrap_or(l)));
            out.push('\n');
        }
    };
    match split_command(content) {
        Some((status, stdout, stderr)) => {
            out.push_str(&format!("exit {}\n", strip(status)));
            for (label, text) in [("stdout:", stdout), ("stderr:", stderr)] {
                let text = text.strip_suffix('\n').unwrap_or(text);
                if text.is_empty() {
                    out.push_str(&format!("{label} (nothing)\n"));
                } else {
                    out.push_str(&format!("{label}\n"));
                    lines(text, "  ", &mut out);
                }
            }
        }
        None => lines(content, "", &mut out),
    }
    Some(out)
}

/// A bash result (`exit=N\nstdout:\n…\nstderr:\n…`) as its status and
/// its two streams; None when it is not shaped so.
fn split_command(content: &str) -> Option<(&str, &str, &str)> {
    let (first, rest) = content.split_once('\n')?;
    let status = first.strip_prefix("exit=")?;
    let rest = rest.strip_prefix("stdout:\n")?;
    let (out, err) = match rest.split_once("\nstderr:\n") {
        Some(parts) => parts,
        None => (rest.strip_suffix("\nstderr:").unwrap_or(rest), ""),
    };
    Some((status, out, err))
}

/// A bash result as its status line (`exit N`) and the last lines of
/// each stream, stderr under a label of its own; None when it is not
/// shaped so.
pub fn command(content: &str) -> Option<(String, Vec<Shown>)> {
    let (status, out, err) = split_command(content)?;
    let mut lines = Vec::new();
    for (label, text) in [("stdout:", out), ("stderr:", err)] {
        let (earlier, last) = last_lines(text, OUTPUT_LINES);
        if last.is_empty() {
            continue;
        }
        lines.push(Shown::Plain(format!("  {label}")));
        if earlier > 0 {
            // `/last` is the prompt's; with -p, `hel sessions show`.
            let all = match AT_PROMPT.load(std::sync::atomic::Ordering::Relaxed) {
                true => " (/last shows all)",
                false => "",
            };
            lines.push(Shown::Plain(format!(
                "    … {}{all}",
                count(earlier as u64, "earlier line", "earlier lines")
            )));
        }
        lines.extend(last.into_iter().map(|l| Shown::Output(format!("    {l}"))));
    }
    Some((format!("exit {}", strip(status)), lines))
}

/// The last `n` lines of `text` with something to show, stripped (a line
/// redrawn with CR shows what it was last redrawn to), and how many such
/// lines came before them.
fn last_lines(text: &str, n: usize) -> (usize, Vec<String>) {
    let all: Vec<String> = text
        .split('\n')
        .map(|l| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            strip(l.rsplit('\r').next().unwrap_or(l))
        })
        .filter(|l| !l.trim().is_empty())
        .collect();
    let earlier = all.len().saturating_sub(n);
    (earlier, all.into_iter().skip(earlier).collect())
}

/// `text` without escape sequences (CSI, OSC, DCS and the like, whole)
/// and without any other control character or bidi override; a tab is a
/// space.
pub fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\t' => out.push(' '),
            // ESC [ … final, or CSI (U+009B) … final.
            '\u{1b}' if chars.peek() == Some(&'[') => {
                chars.next();
                skip_csi(&mut chars);
            }
            '\u{9b}' => skip_csi(&mut chars),
            // OSC, DCS, SOS, PM, APC: up to BEL or ST (ESC \ or U+009C).
            '\u{1b}' if matches!(chars.peek(), Some(']' | 'P' | 'X' | '^' | '_')) => {
                chars.next();
                skip_string(&mut chars);
            }
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            // Any other escape: ESC and the character after it.
            '\u{1b}' => {
                chars.next();
            }
            '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => {}
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            c => out.push(c),
        }
    }
    out
}

/// Skip a CSI's parameters and its final byte (`@`–`~`).
fn skip_csi(chars: &mut impl Iterator<Item = char>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            break;
        }
    }
}

/// Skip a control string up to its end (BEL, ST or ESC \).
fn skip_string(chars: &mut std::iter::Peekable<impl Iterator<Item = char>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => break,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                break;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The live view's state is one for the process: its tests take turns.
    pub(crate) static TURN: Mutex<()> = Mutex::new(());

    fn texts(lines: &[Shown]) -> Vec<&str> {
        lines.iter().map(Shown::text).collect()
    }

    #[test]
    fn an_edit_shows_its_file_and_diff_escaped_and_folded() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        set_root(Some(dir.path()));
        let calc = dir.path().join("calc.py");
        let head: String = (1..=10).map(|i| format!("# {i}\n")).collect();
        std::fs::write(&calc, format!("{head}def add(a, b):\n    return a - b\n")).unwrap();
        let path = calc.to_str().unwrap();
        let args = serde_json::json!({"path": path, "search": "    return a - b", "replace": "    return a + b\u{1b}[2J"}).to_string();
        assert_eq!(
            started("c1", "search_replace", &args),
            format!("hel: search_replace {path}")
        );
        let d = finished_edit("c1").unwrap();
        assert_eq!(
            texts(&d),
            [
                "  10  # 10",
                "  11  def add(a, b):",
                "  12 -    return a - b",
                "  12 +    return a + b^[[2J"
            ]
        );
        assert!(matches!(d[2], Shown::Removed(_)) && matches!(d[3], Shown::Added(_)));
        // Asked once; another tool has no diff, and its call line is short.
        assert!(finished_edit("c1").is_none());
        assert_eq!(
            started("c2", "bash", r#"{"command":"cargo test -q"}"#),
            "hel: bash cargo test -q"
        );
        assert!(finished_edit("c2").is_none());
        assert_eq!(
            started("c8", "bash", r#"{"command":"cd src\nmake\n"}"#),
            "hel: bash cd src ⏎ make"
        );
        assert_eq!(
            started("c4", "mcp__calc__add", "{\n \"a\": 2,\n \"b\": 40\n}"),
            r#"hel: mcp__calc__add {"a":2,"b":40}"#
        );
        assert_eq!(
            started("c5", "grep", r#"{"pattern":"TODO","path":"src"}"#),
            "hel: grep TODO in src"
        );
        // A write over the file: the changed lines, numbered, changes far
        // apart set off.
        let new = head.replace("# 2\n", "# two\n") + "def add(a, b):\n    return a - b\n";
        let args = serde_json::json!({"path": path, "content": new}).to_string();
        started("c6", "write_file", &args);
        assert_eq!(
            texts(&finished_edit("c6").unwrap()),
            [
                "   1  # 1",
                "   2 -# 2",
                "   2 +# two",
                "   3  # 3",
                "   4  # 4"
            ]
        );
        // A long new file is folded with a count.
        let content: String = (0..50).map(|i| format!("line {i}\n")).collect();
        let d = fold(diff("", &content, true), DIFF_LINES);
        assert_eq!(d.len(), DIFF_LINES + 1);
        assert_eq!(texts(&d)[0], " 1 +line 0");
        assert_eq!(texts(&d)[DIFF_LINES], "… 30 more lines");
        // Changes far apart, and a last line without its end.
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new = old.replacen("3\n", "three\n", 1) + "21";
        assert_eq!(
            texts(&diff(&old, &new, true)),
            [
                " 1  1",
                " 2  2",
                " 3 -3",
                " 3 +three",
                " 4  4",
                " 5  5",
                " ⋮",
                "19  19",
                "20  20",
                "21 +21  (no line end)"
            ]
        );
        // A CR before a line end: not shown in the live view, kept for
        // a confirm (a change of line ends is a change).
        assert_eq!(texts(&diff("a\r\n", "b\r\n", true)), ["1 -a", "1 +b"]);
        assert_eq!(diff_lines("a\r\n", "a\n", true)[0].text, "a\r");
        // Text not once in the file: the search and replace texts.
        let args =
            serde_json::json!({"path": path, "search": "nowhere", "replace": "x"}).to_string();
        started("c7", "search_replace", &args);
        assert_eq!(texts(&finished_edit("c7").unwrap()), ["  -nowhere", "  +x"]);
        // A file that is not text, or outside the project, has no diff.
        assert_eq!(before("/etc/hostname"), Before::Not("outside the project"));
        std::fs::write(&calc, b"\0\x01").unwrap();
        assert_eq!(before(path), Before::Not("binary"));
        assert_eq!(
            before(dir.path().join("none").to_str().unwrap()),
            Before::Missing
        );
        assert_eq!(
            before(dir.path().to_str().unwrap()),
            Before::Not("not a regular file")
        );
        // Arguments that do not parse (a repeated key) show no diff.
        started(
            "c3",
            "write_file",
            r#"{"path":"a","path":"b","content":""}"#,
        );
        assert!(finished_edit("c3").is_none());
    }

    #[test]
    fn a_command_s_changed_files_and_its_whole_result_for_last() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        started("b1", "bash", r#"{"command":"make"}"#);
        let file = |kind, path: String, texts: Option<(&str, &str)>| FileChange {
            kind,
            path,
            texts: texts.map(|(a, b)| (a.to_owned(), b.to_owned())),
        };
        changed(
            (0..12)
                .map(|i| file('A', format!("out/{i}\x1b"), None))
                .collect(),
        );
        let content = "exit=1\nstdout:\nbuilt\x1b[31m!\nstderr:\nfailed\n";
        let files = ended("bash", content);
        assert_eq!(texts(&files)[0], "  A out/0^[");
        assert_eq!(texts(&files)[10], "  … 2 more files");
        assert_eq!(
            last().unwrap(),
            "hel: bash make\nexit 1\nstdout:\n  built!\nstderr:\n  failed\n"
        );
        started("b2", "write_file", r#"{"path":"x","content":""}"#);
        changed(vec![file('A', "x".into(), Some(("", "x\n")))]);
        assert!(ended("write_file", "wrote 0 bytes to x").is_empty());
        assert_eq!(last().unwrap(), "hel: write_file x\nwrote 0 bytes to x\n");
        // A command's files with their texts: each diff under its line,
        // escaped and folded, at most three diffed.
        started("b3", "bash", r#"{"command":"sed -i s/a/b/ f"}"#);
        let long: String = (0..30).map(|i| format!("{i}\n")).collect();
        changed(vec![
            file('M', "f".into(), Some(("a\n", "b\x1b[2J\n"))),
            file('M', "g.bin".into(), None),
            file('A', "long".into(), Some(("", &long))),
            file('D', "old".into(), Some(("gone\n", ""))),
            file('A', "more".into(), Some(("", "4\n"))),
        ]);
        let lines = ended("bash", "exit=0\nstdout:\n\nstderr:\n");
        let t = texts(&lines);
        assert_eq!(
            t[..5],
            [
                "  M f",
                "    1 -a",
                "    1 +b^[[2J",
                "  M g.bin",
                "  A long"
            ]
        );
        assert!(matches!(lines[1], Shown::Removed(_)) && matches!(lines[2], Shown::Added(_)));
        assert_eq!(t[5], "     1 +0");
        assert_eq!(t[5 + DIFF_LINES], "    … 10 more lines");
        assert_eq!(t[6 + DIFF_LINES..], ["  D old", "    1 -gone", "  A more"]);
    }

    #[test]
    fn a_command_shows_its_status_and_last_lines_apart() {
        let stderr: String = (1..=9).map(|i| format!("err {i}\n")).collect();
        let content =
            format!("exit=1\nstdout:\nok\x1b]0;t\x07 \n\nstderr:\n{stderr}AssertionError\n");
        let (status, lines) = command(&content).unwrap();
        assert_eq!(status, "exit 1");
        assert_eq!(
            texts(&lines),
            [
                "  stdout:",
                "    ok ",
                "  stderr:",
                "    … 4 earlier lines",
                "    err 5",
                "    err 6",
                "    err 7",
                "    err 8",
                "    err 9",
                "    AssertionError",
            ]
        );
        let (status, lines) = command("exit=0\nstdout:\n\nstderr:\n").unwrap();
        assert_eq!((status.as_str(), lines.len()), ("exit 0", 0));
        assert!(command("denied: no").is_none());
    }
}
