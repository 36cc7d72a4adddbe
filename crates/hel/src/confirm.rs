//! The `--access confirm` question, one place for both terminals it is
//! asked on (the prompt's editor, `/dev/tty` for piped runs): what the call
//! would do (the command in full; an edit's diff against the file, every
//! changed line with its number, after a write_file's size; an MCP call's
//! arguments as sent), then `[y/n/a/?]` until a valid answer.
//!
//! What you approve is what runs: the preview is wrapped to the terminal,
//! never cut, with every character that could hide or reorder text shown
//! as an escape ([`visible`]); a call that does not fit on the screen with
//! its question is not asked about but refused, the model told to split
//! it (a write_file's diff alone gives way), so the end of what runs is on
//! the screen when the user answers.
//! `a` allows the same again for the rest of this instance, in memory only
//! (never stored in a checkpoint): every call of the tool, or for bash this
//! exact command or, for a simple one, every command of its program.

use std::io::Write;
use std::sync::Mutex;

use hel_agent::{Answer, Edit, Request, ToolName};

use crate::render::tool::Before;

use crate::render::{char_columns, columns};

/// What `?` explains.
pub const EXPLAIN: &str = "\
hel:   y           run it
hel:   n [REASON]  do not; the reason, if any, goes to the model
hel:   a           allow it, and the same again until hel exits (bash: this
hel:               exact command, or every command of its program; an
hel:               edit: this tool on this path)
hel:   ?           this help; Ctrl-C says no and cancels the instruction";

/// What an "always" allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    Tool(ToolName),
    /// An edit of this path with this tool.
    Path(ToolName, String),
    Command(String),
    Program(String),
}

/// The "always" answers of this instance.
#[derive(Default)]
pub struct Rules(Mutex<Vec<Rule>>);

impl Rules {
    fn allows(&self, r: &Request) -> bool {
        let rules = match self.0.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        rules.iter().any(|rule| match rule {
            Rule::Tool(t) => *t == r.tool && r.tool != ToolName::Bash && r.path.is_none(),
            Rule::Path(t, p) => *t == r.tool && r.path.as_ref() == Some(p),
            Rule::Command(c) => r.command.as_ref() == Some(c),
            Rule::Program(p) => r.program.as_ref() == Some(p),
        })
    }

    fn add(&self, rule: Rule) {
        match self.0.lock() {
            Ok(mut g) => g.push(rule),
            Err(poisoned) => poisoned.into_inner().push(rule),
        }
    }
}

/// One line read in answer (or why there is none).
pub enum Reading {
    Line(String),
    /// Ctrl-D, or the end of the terminal's input.
    End,
    /// Ctrl-C: no, and the caller cancels the instruction.
    Cancel,
    Failed(String),
}

/// A line typed in answer to the question.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Yes,
    No(Option<String>),
    Always,
    Explain,
    Other,
}

fn parse(line: &str) -> Reply {
    let line = line.trim();
    let (word, rest) = match line.split_once(char::is_whitespace) {
        Some((w, r)) => (w, r.trim()),
        None => (line, ""),
    };
    match (word.to_ascii_lowercase().as_str(), rest) {
        ("y" | "yes", "") => Reply::Yes,
        ("n" | "no", "") => Reply::No(None),
        ("n" | "no", why) => Reply::No(Some(why.to_owned())),
        ("a" | "always", "") => Reply::Always,
        ("?" | "help", "") => Reply::Explain,
        _ => Reply::Other,
    }
}

/// Whether to colour what goes to the terminal (it is one).
fn colour() -> bool {
    crate::render::colour_for(true)
}

/// The terminal a question is asked on: its columns and rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Screen {
    pub width: usize,
    pub rows: usize,
}

impl Screen {
    /// What is assumed of a terminal that does not say its size.
    pub const DEFAULT: Screen = Screen {
        width: 80,
        rows: 24,
    };

    /// A terminal of `rows` and `cols` as it reports them (a zero is
    /// taken as not said).
    pub fn of(rows: usize, cols: usize) -> Screen {
        Screen {
            width: if cols > 0 { cols } else { 80 },
            rows: if rows > 0 { rows } else { 24 },
        }
    }

    /// The width lines are wrapped to: a terminal narrower than this is
    /// taken as this wide (its own wrapping then breaks the lines again).
    fn columns(self) -> usize {
        self.width.max(20)
    }
}

/// The first line of each previewed line, and the lines it goes on to
/// when it is wider than the terminal: a new line of a command and a
/// line wrapped to fit look different.
const LINE: &str = "hel: │ ";
const GOES_ON: &str = "hel: ┆ ";

/// A run of spaces at least this long inside a line is shown as `␠×N`
/// (it could push the rest of the line out of sight).
const SPACE_RUN: usize = 8;
/// Indentation (spaces a line starts with) at least this long is too.
const INDENT_RUN: usize = 40;

/// Characters that show nothing or change the order or shape of what
/// follows: zero-width and joining characters, soft hyphen, byte order
/// mark, direction marks, embeddings, overrides and isolates, the
/// spaces that look like a space but are not one, line and paragraph
/// separators, fillers, variation selectors and tag characters. Each is
/// shown as `\u{…}` in a confirmed text.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{a0}' | '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{115f}' | '\u{1160}'
        | '\u{17b4}' | '\u{17b5}' | '\u{180b}'..='\u{180f}' | '\u{1680}'
        | '\u{2000}'..='\u{200f}' | '\u{2028}'..='\u{202f}' | '\u{205f}'..='\u{206f}'
        | '\u{2420}' // ␠ itself, so that a run of spaces cannot be faked
        | '\u{3000}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}' | '\u{ffa0}'
        | '\u{fff0}'..='\u{fffb}' | '\u{1d173}'..='\u{1d17a}' | '\u{e0000}'..='\u{e0fff}')
}

/// One piece of a confirmed line, kept whole when the line is wrapped:
/// a character as it is, or the visible text standing for one character
/// (an escape) or for a run of spaces (`␠×N`).
enum Piece {
    Char(char),
    Text(String),
}

impl Piece {
    /// The columns it is given on a line: at least one, so that no line
    /// holds more pieces than it has columns (a run of zero-width marks
    /// wraps like any text instead of piling up on one line).
    fn columns(&self) -> usize {
        match self {
            Piece::Char(c) => char_columns(*c).max(1),
            Piece::Text(t) => columns(t),
        }
    }

    fn push_to(&self, s: &mut String) {
        match self {
            Piece::Char(c) => s.push(*c),
            Piece::Text(t) => s.push_str(t),
        }
    }
}

/// `line` (one line of a confirmed text) as the pieces it is shown in,
/// one at a time: a character, or the visible escape of one (control
/// characters in caret notation, `^I`, `^M`, `^[`; C1 controls and every
/// [`invisible`] character as `\u{…}`), or a long run of spaces as `␠×N`.
struct Pieces<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    at_start: bool,
    /// Spaces of a short run still to give, one piece each.
    spaces: usize,
}

fn pieces(line: &str) -> Pieces<'_> {
    Pieces {
        chars: line.chars().peekable(),
        at_start: true,
        spaces: 0,
    }
}

impl Iterator for Pieces<'_> {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        if self.spaces > 0 {
            self.spaces -= 1;
            return Some(Piece::Char(' '));
        }
        let c = self.chars.next()?;
        let at_start = std::mem::replace(&mut self.at_start, false);
        Some(match c {
            ' ' => {
                let mut run = 1;
                while self.chars.next_if_eq(&' ').is_some() {
                    run += 1;
                }
                let long = if at_start { INDENT_RUN } else { SPACE_RUN };
                if run >= long {
                    Piece::Text(format!("␠×{run}"))
                } else {
                    self.spaces = run - 1;
                    Piece::Char(' ')
                }
            }
            '\u{0}'..='\u{1f}' => Piece::Text(format!("^{}", char::from(b'@' + c as u8))),
            '\u{7f}' => Piece::Text("^?".to_owned()),
            '\u{80}'..='\u{9f}' => Piece::Text(format!("\\u{{{:x}}}", c as u32)),
            c if invisible(c) => Piece::Text(format!("\\u{{{:x}}}", c as u32)),
            c => Piece::Char(c),
        })
    }
}

/// `line` as a confirm shows it on one line: every piece of it visible
/// ([`pieces`]).
pub fn visible(line: &str) -> String {
    let mut s = String::new();
    for p in pieces(line) {
        p.push_to(&mut s);
    }
    s
}

/// [`visible`] of `line` when it takes at most `max` columns; None (found
/// without going further) when it takes more.
fn visible_within(line: &str, max: usize) -> Option<String> {
    let mut s = String::new();
    let mut used = 0;
    for p in pieces(line) {
        used += p.columns();
        if used > max {
            return None;
        }
        p.push_to(&mut s);
    }
    Some(s)
}

/// `line` shown whole on lines of at most `width` columns, pushed to
/// `out`: the first starts with `first`, the rest with `next`. A line is
/// broken after its last space when what follows fits the next line, else
/// where it is full; a piece ([`pieces`]) is never split. Nothing is cut
/// or left out: the lines' text after their starts is `line`'s pieces in
/// order. False (and `out` holding more than `limit` lines) as soon as
/// `out` would hold more than `limit`: the rest is not even looked at.
fn wrapped_into(
    out: &mut Vec<String>,
    line: &str,
    width: usize,
    (first, next): (&str, &str),
    limit: usize,
) -> bool {
    let mut start = first;
    // The pieces of the line being filled, and their columns.
    let mut current: Vec<Piece> = Vec::new();
    let mut used = 0;
    let text = |start: &str, pieces: &[Piece]| {
        let mut s = start.to_owned();
        for p in pieces {
            p.push_to(&mut s);
        }
        s
    };
    for piece in pieces(line) {
        let w = piece.columns();
        let room = width.saturating_sub(columns(start));
        if !current.is_empty() && used + w > room {
            // Break after the last space, if the rest fits a line.
            let cut = match current.iter().rposition(|p| matches!(p, Piece::Char(' '))) {
                Some(at) if at + 1 < current.len() => at + 1,
                _ => current.len(),
            };
            let mut rest = current.split_off(cut);
            let rest_w: usize = rest.iter().map(Piece::columns).sum();
            if rest_w + w > width.saturating_sub(columns(next)) {
                current.append(&mut rest);
            }
            out.push(text(start, &current));
            if out.len() > limit {
                return false;
            }
            start = next;
            used = rest_w * usize::from(!rest.is_empty());
            current = rest;
        }
        current.push(piece);
        used += w;
    }
    out.push(text(start, &current));
    out.len() <= limit
}

/// [`wrapped_into`] a new list, with no limit (for text known to be
/// short: hel's own words, what was already shown whole).
fn wrapped(line: &str, width: usize, first: &str, next: &str) -> Vec<String> {
    let mut out = Vec::new();
    wrapped_into(&mut out, line, width, (first, next), usize::MAX);
    out
}

/// What a preview shows, line by line: each line's colour (SGR code,
/// empty for none), what stands before its text (hel's own: the line
/// number and `-` or `+` of a diff) and its text.
type PreviewLine = (&'static str, String, String);

/// An edit's preview: its diff against the file as it is now, every
/// changed line (none folded), after a write_file's size; None when the
/// file cannot be shown so (not text, too large: the request's own
/// preview is shown).
fn edit_preview(request: &Request) -> Option<Vec<PreviewLine>> {
    use crate::render::tool;
    let (edit, path) = (request.edit.as_ref()?, request.path.as_ref()?);
    let before = tool::before(path);
    let (old, new, numbered) = tool::texts(edit, &before).ok()?;
    let mut lines = Vec::new();
    match edit {
        Edit::Write(content) => {
            let size = request.preview.first().cloned().unwrap_or_default();
            let was = match &before {
                Before::Text(old) => format!(
                    ", over {}",
                    crate::render::count(old.lines().count() as u64, "line", "lines")
                ),
                _ => ", a new file".to_owned(),
            };
            lines.push(("", String::new(), format!("{size}{was}")));
            if numbered && old == *content {
                lines.push(("", String::new(), "(the same as the file now)".into()));
            }
        }
        Edit::Replace { .. } if !numbered => {
            let why = match &before {
                Before::Text(_) => "not once in the file",
                Before::Missing => "no such file",
                Before::Not(why) => why,
            };
            lines.push((
                "",
                String::new(),
                format!("({why}: the text taken out and put in)"),
            ))
        }
        Edit::Replace { .. } => {}
    }
    for l in tool::diff_lines(&old, &new, numbered) {
        let code = match l.tag {
            '-' => "31",
            '+' => "32",
            _ => "",
        };
        let mut text = l.text.clone();
        if l.unended {
            text.push_str("  (no line end)");
        }
        lines.push((code, l.head(), text));
    }
    Some(lines)
}

/// The preview's lines: an edit's diff, else the request's own preview
/// (`-` red and `+` green but for a command).
fn preview_lines(request: &Request) -> Vec<PreviewLine> {
    if let Some(lines) = edit_preview(request) {
        return lines;
    }
    request
        .preview
        .iter()
        .map(|l| {
            let code = match l.chars().next() {
                Some('-') if request.tool != ToolName::Bash => "31",
                Some('+') if request.tool != ToolName::Bash => "32",
                _ => "",
            };
            (code, String::new(), l.clone())
        })
        .collect()
}

/// The preview lines as shown: escaped, wrapped to `width`, never cut;
/// `-` red and `+` green when `colour`. False with the lines when there
/// are more than `limit` (not all of them made).
fn preview(request: &Request, width: usize, colour: bool, limit: usize) -> (Vec<String>, bool) {
    let mut shown = Vec::new();
    for (code, head, text) in preview_lines(request) {
        let from = shown.len();
        let first = format!("{LINE}{head}");
        let whole = wrapped_into(&mut shown, &text, width, (&first, GOES_ON), limit);
        if colour && !code.is_empty() {
            for piece in &mut shown[from..] {
                *piece = format!("\x1b[{code}m{piece}\x1b[0m");
            }
        }
        if !whole {
            return (shown, false);
        }
    }
    (shown, true)
}

/// The question about `request` on a terminal `width` wide: the lines to
/// show before it and the question itself (one line). The summary is in
/// the question when it fits there whole; else a command's question
/// points at the preview above it, and any other call's summary is shown
/// wrapped above a bare question. None when that takes more than `limit`
/// lines.
fn question(request: &Request, width: usize, limit: usize) -> Option<(Vec<String>, String)> {
    let choices = choices(request);
    let frame = columns(&format!("hel: allow ? {choices} "));
    if let Some(summary) = visible_within(&request.summary, width.saturating_sub(frame)) {
        return Some((Vec::new(), format!("hel: allow {summary}? {choices} ")));
    }
    if request.command.is_some() && request.summary.starts_with("run ") {
        return Some((
            Vec::new(),
            format!("hel: allow the command above? {choices} "),
        ));
    }
    let mut before = Vec::new();
    let text = format!("allow {}?", request.summary);
    wrapped_into(
        &mut before,
        &text,
        width,
        ("hel: ", "hel:   "),
        limit.saturating_sub(1),
    )
    .then(|| (before, format!("hel: {choices} ")))
}

/// The answers a question offers: for an edit, that `a` is for its path
/// only (named when it is short).
fn choices(request: &Request) -> String {
    match &request.path {
        Some(path) => match visible_within(path, 32) {
            Some(p) => format!("[y/n/a = always for {p}/?]"),
            None => "[y/n/a = always for this path/?]".into(),
        },
        None => "[y/n/a/?]".into(),
    }
}

/// What the model is told when a call cannot be shown whole on the
/// terminal of `rows` rows.
fn too_long(rows: usize) -> String {
    format!(
        "the call was not put to the user: shown whole it takes more lines than the {rows} rows of the user's terminal, and hel asks only about what it can show whole; split it into shorter calls"
    )
}

/// Ask about `request` on `screen`: its preview on `out`, whole, then the
/// question through `read` (which shows the question and reads a line)
/// until a valid answer. A call an earlier "always" allowed is allowed at
/// once, saying so. A preview taller than the screen (with the question)
/// is not asked about: the answer is [`Answer::Refused`], the model told
/// to split the call; only a write_file's diff gives way, shown as far as
/// it fits.
pub fn ask(
    request: &Request,
    rules: &Rules,
    screen: Screen,
    out: &mut dyn Write,
    read: &mut dyn FnMut(&str) -> Reading,
) -> Answer {
    let width = screen.columns();
    // A terminal narrower than the lines wraps each again: fewer of them
    // fit on its screen.
    let screen = Screen {
        rows: screen.rows / width.div_ceil(screen.width.max(1)),
        ..screen
    };
    // The request names what the model chose: shown, never obeyed.
    if rules.allows(request) {
        // Said, not asked: as much as fits the screen.
        let mut said = Vec::new();
        let line = format!("allowed {} (you said always)", request.summary);
        if !wrapped_into(&mut said, &line, width, ("hel: ", "hel:   "), screen.rows) {
            said.truncate(screen.rows.saturating_sub(1));
            said.push("hel:   … (allowed by an always answer: too long to show here)".into());
        }
        for l in said {
            let _ = writeln!(out, "{l}");
        }
        return Answer::Yes;
    }
    let noun = if request.summary.starts_with("run ") {
        "command"
    } else {
        "call"
    };
    let refuse = |out: &mut dyn Write| {
        let rows = screen.rows;
        say(
            out,
            &format!(
                "hel: not asked: the {noun} shown whole takes more than the terminal's {rows} rows; the model is told to split it"
            ),
            width,
            "hel:   ",
        );
        Answer::Refused(too_long(rows))
    };
    let Some((before, question)) = question(request, width, screen.rows) else {
        return refuse(out);
    };
    let secrets = !request.secrets.is_empty();
    let room = screen
        .rows
        .saturating_sub(before.len() + 1 + usize::from(secrets));
    let (mut lines, whole) = preview(request, width, colour(), room);
    if !whole {
        if request.tool != ToolName::WriteFile {
            return refuse(out);
        }
        // Its size, then its diff (or head) as far as it fits.
        lines.truncate(room.saturating_sub(1).max(1));
        lines.push(format!(
            "{GOES_ON}… the rest of the change does not fit the terminal"
        ));
    }
    if secrets {
        let line = format!(
            "hel: {} stands for a secret: hel puts in its value when this runs",
            request.secrets.join(", ")
        );
        say(out, &line, width, "hel:   ");
    }
    for line in lines.iter().chain(&before) {
        let _ = writeln!(out, "{line}");
    }
    loop {
        let line = match read(&question) {
            Reading::Line(l) => l,
            Reading::End | Reading::Cancel => return Answer::No,
            Reading::Failed(why) => return Answer::Unavailable(why),
        };
        match parse(&line) {
            Reply::Yes => return Answer::Yes,
            Reply::No(None) => return Answer::No,
            Reply::No(Some(why)) => return Answer::NoBecause(why),
            Reply::Explain => {
                for l in EXPLAIN.lines() {
                    say(out, l, width, "hel:               ");
                }
            }
            Reply::Other => say(
                out,
                "hel: answer y, n (or n and a reason), a or ?",
                width,
                "hel:   ",
            ),
            Reply::Always => match always(request, width, out, read) {
                Some(rule) => {
                    rules.add(rule);
                    return Answer::Yes;
                }
                None => return Answer::No,
            },
        }
    }
}

/// `line` on `out`, wrapped to `width` ([`crate::render::wrap`]), its
/// later lines starting with `indent`.
fn say(out: &mut dyn Write, line: &str, width: usize, indent: &str) {
    for piece in crate::render::wrap(line, width, indent) {
        let _ = writeln!(out, "{piece}");
    }
}

/// What an "always" allows: for an edit, this tool on this path; for
/// bash, this exact command or (a simple command) every command of its
/// program, as the user chooses; else the tool. None: the user gave up (Ctrl-C, Ctrl-D).
fn always(
    request: &Request,
    width: usize,
    out: &mut dyn Write,
    read: &mut dyn FnMut(&str) -> Reading,
) -> Option<Rule> {
    if let Some(path) = &request.path {
        return Some(Rule::Path(request.tool, path.clone()));
    }
    let Some(command) = &request.command else {
        return Some(Rule::Tool(request.tool));
    };
    let Some(program) = &request.program else {
        return Some(Rule::Command(command.clone()));
    };
    let (before, question) = always_question(&visible(program), width);
    for line in &before {
        let _ = writeln!(out, "{line}");
    }
    loop {
        match read(&question) {
            Reading::Line(l) => match l.trim() {
                "c" => return Some(Rule::Command(command.clone())),
                "p" => return Some(Rule::Program(program.clone())),
                _ => {
                    let _ = writeln!(out, "hel: answer c or p");
                }
            },
            _ => return None,
        }
    }
}

/// The question of an "always" for bash on a terminal `width` wide: on
/// one line when it fits with the program's whole name (in long or short
/// words), else the long words wrapped above a bare `[c/p]`. The
/// program's name is never cut.
fn always_question(program: &str, width: usize) -> (Vec<String>, String) {
    let long = format!("always allow [c] exactly this command, or [p] every `{program}` command?");
    let short = format!("hel: always [c] this command or [p] every `{program}`? [c/p] ");
    let one = format!("hel: {long} [c/p] ");
    for q in [one, short] {
        if columns(&q) <= width {
            return (Vec::new(), q);
        }
    }
    (
        wrapped(&long, width, "hel: ", "hel:   "),
        "hel: [c/p] ".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tool: ToolName, preview: &[&str], command: Option<&str>) -> Request {
        Request {
            summary: "s".into(),
            tool,
            preview: preview.iter().map(|s| s.to_string()).collect(),
            command: command.map(str::to_owned),
            program: command
                .and_then(hel_agent::simple_program)
                .map(str::to_owned),
            path: None,
            edit: None,
            secrets: Vec::new(),
        }
    }

    /// Run `ask` with `lines` typed in turn; what was shown, and the answer.
    fn run(r: &Request, rules: &Rules, lines: &[&str]) -> (String, Answer) {
        let mut out = Vec::new();
        let mut typed = lines.iter();
        let answer = ask(
            r,
            rules,
            Screen {
                width: 40,
                rows: 40,
            },
            &mut out,
            &mut |_question| match typed.next() {
                Some(l) => Reading::Line(l.to_string()),
                None => Reading::End,
            },
        );
        (String::from_utf8(out).unwrap(), answer)
    }

    #[test]
    fn answers_and_asking_again() {
        let rules = Rules::default();
        let w = request(ToolName::WriteFile, &["1 line, 3 bytes", "+hi"], None);
        assert_eq!(run(&w, &rules, &["y"]).1, Answer::Yes);
        assert_eq!(run(&w, &rules, &["n"]).1, Answer::No);
        assert_eq!(
            run(&w, &rules, &["n  not that file "]).1,
            Answer::NoBecause("not that file".into())
        );
        let (shown, answer) = run(&w, &rules, &["?", "maybe", "", "y"]);
        assert_eq!(answer, Answer::Yes);
        assert!(shown.contains("n [REASON]"), "{shown}");
        assert_eq!(shown.matches("hel: answer y, n").count(), 2, "{shown}");
        assert!(shown.starts_with("hel: │ 1 line, 3 bytes\n"), "{shown}");
        // On 40 columns the help and the reminder are wrapped to them.
        for l in shown.lines() {
            assert!(crate::render::columns(l) <= 40, "{l:?}");
        }
        // Always: the tool from now on, without asking.
        assert_eq!(run(&w, &rules, &["a"]).1, Answer::Yes);
        let (shown, answer) = run(&w, &rules, &[]);
        assert_eq!(answer, Answer::Yes);
        assert_eq!(shown, "hel: allowed s (you said always)\n");
    }

    #[test]
    fn always_for_an_edit_is_its_path() {
        let rules = Rules::default();
        let edit = |tool, path: &str| Request {
            path: Some(path.into()),
            ..request(tool, &["+x"], None)
        };
        let notes = edit(ToolName::WriteFile, "notes.txt");
        let mut asked = Vec::new();
        let mut typed = ["a"].into_iter();
        let answer = ask(&notes, &rules, Screen::DEFAULT, &mut Vec::new(), &mut |q| {
            asked.push(q.to_owned());
            typed
                .next()
                .map_or(Reading::End, |l| Reading::Line(l.into()))
        });
        assert_eq!(answer, Answer::Yes);
        assert_eq!(asked, ["hel: allow s? [y/n/a = always for notes.txt/?] "]);
        assert_eq!(run(&notes, &rules, &[]).1, Answer::Yes, "allowed again");
        for other in [
            edit(ToolName::WriteFile, "other.txt"),
            edit(ToolName::SearchReplace, "notes.txt"),
        ] {
            assert_eq!(run(&other, &rules, &[]).1, Answer::No, "{other:?}");
        }
    }

    #[test]
    fn always_for_bash_is_the_command_or_its_program() {
        let rules = Rules::default();
        let test = request(ToolName::Bash, &["cargo test"], Some("cargo test"));
        let build = request(ToolName::Bash, &["cargo build"], Some("cargo build"));
        let rm = request(ToolName::Bash, &["rm -rf x"], Some("rm -rf x"));
        assert_eq!(run(&test, &rules, &["a", "x", "c"]).1, Answer::Yes);
        assert_eq!(run(&test, &rules, &[]).1, Answer::Yes);
        assert_eq!(run(&build, &rules, &[]).1, Answer::No, "only that command");
        assert_eq!(run(&build, &rules, &["a", "p"]).1, Answer::Yes);
        assert_eq!(run(&build, &rules, &[]).1, Answer::Yes);
        assert_eq!(
            run(
                &request(ToolName::Bash, &[], Some("cargo fmt")),
                &rules,
                &[]
            )
            .1,
            Answer::Yes
        );
        assert_eq!(run(&rm, &rules, &[]).1, Answer::No);
        // Not a simple command: "always" is this exact command.
        let chain = request(ToolName::Bash, &[], Some("cargo test; rm -rf /"));
        assert_eq!(run(&chain, &rules, &["a"]).1, Answer::Yes);
        assert_eq!(run(&chain, &rules, &[]).1, Answer::Yes);
    }

    #[test]
    fn the_always_question_fits_the_width_and_never_cuts_the_program() {
        let program = "a-program-with-a-very-long-name";
        for width in [20, 40, 60, 80, 120] {
            let (before, q) = always_question(program, width);
            for l in before.iter().chain([&q]) {
                assert!(columns(l) <= width.max(13), "{width}: {l:?}");
            }
            assert!(q.ends_with("[c/p] "), "{q:?}");
            let all: String = before
                .iter()
                .chain([&q])
                .map(|l| l.trim_start_matches("hel:"))
                .collect();
            assert!(!all.contains('…'), "{all:?}");
            let joined: String = all.split_whitespace().collect();
            assert!(joined.contains(&format!("every`{program}`")), "{all:?}");
        }
        assert!(always_question("cargo", 80)
            .1
            .contains("every `cargo` command"));
    }

    /// Every character of `text` is visible: nothing invisible, no
    /// control or direction character left, and a run of spaces counted.
    #[test]
    fn confirmed_text_is_escaped_visibly() {
        assert_eq!(visible("cargo test -p hel"), "cargo test -p hel");
        assert_eq!(visible("a\tb\rc\x1b[2Jd\x7f"), "a^Ib^Mc^[[2Jd^?");
        for (c, shown) in [
            ('\u{202e}', "\\u{202e}"),
            ('\u{2066}', "\\u{2066}"),
            ('\u{2069}', "\\u{2069}"),
            ('\u{200e}', "\\u{200e}"),
            ('\u{200f}', "\\u{200f}"),
            ('\u{61c}', "\\u{61c}"),
            ('\u{200b}', "\\u{200b}"),
            ('\u{200d}', "\\u{200d}"),
            ('\u{ad}', "\\u{ad}"),
            ('\u{feff}', "\\u{feff}"),
            ('\u{2060}', "\\u{2060}"),
            ('\u{a0}', "\\u{a0}"),
            ('\u{2028}', "\\u{2028}"),
            ('\u{e0041}', "\\u{e0041}"),
            ('\u{9b}', "\\u{9b}"),
            ('␠', "\\u{2420}"),
        ] {
            assert_eq!(visible(&format!("x{c}y")), format!("x{shown}y"), "{c:?}");
        }
        // Everything the terminal's own escape escapes is escaped here.
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            let one = c.to_string();
            if hel_agent::text::escape_line(&one) != one {
                assert_ne!(visible(&one), one, "{c:?}");
            }
        }
        // Ordinary text of other scripts stays as it is.
        assert_eq!(visible("é 한 ü"), "é 한 ü");
        // A long run of spaces is counted; a short one and indentation
        // (up to 40) stay.
        let hidden = format!("echo tests{}; touch PWNED", " ".repeat(60));
        assert_eq!(visible(&hidden), "echo tests␠×60; touch PWNED");
        assert_eq!(visible("a       b"), "a       b");
        assert_eq!(visible("        indented"), "        indented");
        assert_eq!(visible(&format!("{}x", " ".repeat(45))), "␠×45x");
    }

    /// A preview line is wrapped whole to the width (escapes never split,
    /// later pieces marked as going on); nothing is cut.
    #[test]
    fn previews_are_wrapped_never_cut() {
        let r = request(
            ToolName::SearchReplace,
            &["-old line that is much longer than forty columns", "+new"],
            None,
        );
        let (lines, whole) = preview(&r, 40, false, usize::MAX);
        assert!(whole);
        assert_eq!(
            lines,
            [
                "hel: │ -old line that is much longer ",
                "hel: ┆ than forty columns",
                "hel: │ +new",
            ]
        );
        assert_eq!(
            preview(&r, 40, true, usize::MAX).0[2],
            "\x1b[32mhel: │ +new\x1b[0m"
        );
        let l = "\u{202e}".repeat(30);
        for width in [20, 40, 200] {
            let lines = wrapped(&l, width, LINE, GOES_ON);
            for line in &lines {
                assert!(columns(line) <= width.max(16), "{width}: {line:?}");
            }
            let body: String = lines
                .iter()
                .map(|x| &x[LINE.len()..])
                .collect::<Vec<_>>()
                .concat();
            assert_eq!(body, "\\u{202e}".repeat(30), "{width}");
        }
    }

    /// The hidden tail of a command is on screen, in the preview, when
    /// the question is asked, on a narrow and on a wide terminal.
    #[test]
    fn the_whole_command_is_shown_before_the_question() {
        let command = format!(
            "echo running the unit tests{}; touch PWNED",
            " ".repeat(200)
        );
        let r = bash(&command);
        for width in [40, 200] {
            let screen = Screen { width, rows: 40 };
            let mut out = Vec::new();
            let mut asked = Vec::new();
            let answer = ask(&r, &Rules::default(), screen, &mut out, &mut |q| {
                asked.push(q.to_owned());
                Reading::Line("n".into())
            });
            assert_eq!(answer, Answer::No);
            let shown = String::from_utf8(out).unwrap();
            assert!(shown.contains("; touch PWNED"), "{width}: {shown}");
            assert!(shown.contains("␠×200"), "{width}: {shown}");
            for l in shown.lines().chain(asked.iter().map(String::as_str)) {
                assert!(columns(l) <= width, "{width}: {l:?}");
                assert!(!l.contains('…'), "{width}: {l:?}");
            }
            if width == 40 {
                assert_eq!(asked, ["hel: allow the command above? [y/n/a/?] "]);
            }
        }
    }

    /// A call taller than the screen is not asked about: refused, with a
    /// reason for the model; a write_file's head gives way instead.
    #[test]
    fn a_call_taller_than_the_screen_is_refused() {
        let lines: Vec<String> = (0..30).map(|i| format!("echo {i}")).collect();
        let command = lines.join("\n");
        let r = bash(&command);
        let mut out = Vec::new();
        let answer = ask(
            &r,
            &Rules::default(),
            Screen {
                width: 80,
                rows: 24,
            },
            &mut out,
            &mut |_| panic!("asked"),
        );
        match answer {
            Answer::Refused(why) => {
                assert!(why.contains("split it"), "{why}");
                assert!(why.contains("24 rows"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        let shown = String::from_utf8(out).unwrap();
        assert!(shown.starts_with("hel: not asked: the command"), "{shown}");
        // 30 lines and the question fit 31 rows.
        let (_, answer) = {
            let mut out = Vec::new();
            let a = ask(
                &r,
                &Rules::default(),
                Screen {
                    width: 80,
                    rows: 31,
                },
                &mut out,
                &mut |_| Reading::Line("y".into()),
            );
            (out, a)
        };
        assert_eq!(answer, Answer::Yes);
        // A write_file's head is cut to the screen, saying so.
        let w = request(ToolName::WriteFile, &[&"+x".repeat(400), "+y", "+z"], None);
        let mut out = Vec::new();
        let screen = Screen {
            width: 40,
            rows: 10,
        };
        assert_eq!(
            ask(&w, &Rules::default(), screen, &mut out, &mut |_| {
                Reading::Line("y".into())
            }),
            Answer::Yes
        );
        let shown = String::from_utf8(out).unwrap();
        assert_eq!(shown.lines().count(), 9, "{shown}");
        assert!(shown.ends_with("does not fit the terminal\n"), "{shown}");
    }

    /// An edit's question shows its diff against the file, CRs visible;
    /// one taller than the screen: a search_replace is refused, a
    /// write_file's diff gives way with a note.
    #[test]
    fn an_edit_is_asked_about_as_its_diff() {
        use crate::render::tool;
        let _turn = tool::tests::TURN.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        tool::set_root(Some(dir.path()));
        let file = dir.path().join("a.txt");
        let old: String = (1..=60).map(|i| format!("line {i}\r\n")).collect();
        std::fs::write(&file, &old).unwrap();
        let path = file.to_str().unwrap().to_owned();
        let edit = |tool: ToolName, edit: Edit| Request {
            summary: "s".into(),
            tool,
            preview: vec!["size".into()],
            command: None,
            program: None,
            path: Some(path.clone()),
            edit: Some(edit),
            secrets: Vec::new(),
        };
        let one = edit(
            ToolName::SearchReplace,
            Edit::Replace {
                search: "line 30\r\n".into(),
                replace: "line thirty\n".into(),
            },
        );
        let (lines, whole) = preview(&one, 40, false, usize::MAX);
        assert!(whole);
        assert_eq!(
            lines,
            [
                "hel: │ 28  line 28^M",
                "hel: │ 29  line 29^M",
                "hel: │ 30 -line 30^M",
                "hel: │ 30 +line thirty",
                "hel: │ 31  line 31^M",
                "hel: │ 32  line 32^M",
            ]
        );
        // Every line changed: 120 lines of diff on a 40-row screen.
        let all = old.replace("line", "LINE");
        let (shown, answer) = run(
            &edit(ToolName::WriteFile, Edit::Write(all.clone())),
            &Rules::default(),
            &["y"],
        );
        assert_eq!(answer, Answer::Yes);
        assert!(
            shown.starts_with("hel: │ size, over 60 lines\n") && shown.contains("│  1 -line 1^M"),
            "{shown}"
        );
        assert!(
            shown.contains("\nhel: ┆ … the rest of the change does not fit the terminal\n"),
            "{shown}"
        );
        let replace = Edit::Replace {
            search: old.clone(),
            replace: all,
        };
        let (shown, answer) = run(
            &edit(ToolName::SearchReplace, replace),
            &Rules::default(),
            &["y"],
        );
        assert!(matches!(answer, Answer::Refused(_)), "{shown}");
        tool::set_root(None);
    }

    /// A bash call's request as hel-agent makes it.
    fn bash(command: &str) -> Request {
        Request {
            summary: format!("run `{command}`"),
            tool: ToolName::Bash,
            preview: command.split_terminator('\n').map(str::to_owned).collect(),
            command: Some(command.to_owned()),
            program: hel_agent::simple_program(command).map(str::to_owned),
            path: None,
            edit: None,
            secrets: Vec::new(),
        }
    }

    /// A command of megabytes is refused after making no more lines than
    /// the screen has, and a huge summary never becomes a question.
    #[test]
    fn a_huge_call_is_refused_without_rendering_it_all() {
        let screen = Screen {
            width: 80,
            rows: 24,
        };
        for command in [
            "x".repeat(10 << 20),
            "\u{200b}".repeat(1 << 20),
            format!("ls{}", "\u{301}".repeat(1 << 20)),
        ] {
            let r = bash(&command);
            let (lines, whole) = preview(&r, 80, false, 23);
            assert!(!whole && lines.len() == 24, "{}", lines.len());
            let mut out = Vec::new();
            let answer = ask(&r, &Rules::default(), screen, &mut out, &mut |_| {
                panic!("asked")
            });
            assert!(matches!(answer, Answer::Refused(_)), "{answer:?}");
        }
        // A path too long for the screen: not asked either.
        let w = request(ToolName::WriteFile, &["1 line, 1 byte"], None);
        let w = Request {
            summary: format!("write_file {}", "d/".repeat(1 << 20)),
            ..w
        };
        let answer = ask(&w, &Rules::default(), screen, &mut Vec::new(), &mut |_| {
            panic!("asked")
        });
        assert!(matches!(answer, Answer::Refused(_)), "{answer:?}");
    }
}
