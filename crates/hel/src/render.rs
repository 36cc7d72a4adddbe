//! Events as lines on stderr: the agent's progress, tool activity and
//! warnings (stdout carries only answers and reports). [`live::Live`] also
//! shows a streamed answer on a terminal as it arrives.

pub mod live;
pub mod markdown;
pub mod replay;
pub mod tail;
pub mod tool;

use std::path::Path;

use hel_agent::text::escape_line;
use hel_agent::{Event, Found, Observer, Warning};

use crate::cli::Intro;
use crate::exit::{self, Exit, Hint};

/// Print a line on stderr. A closed stderr (say, piped into a program that
/// exited) is no reason for an agent run to stop, so errors are ignored.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `--color` as given (auto until set).
static COLOR: std::sync::OnceLock<crate::cli::ColorChoice> = std::sync::OnceLock::new();

/// Take `--color` (once, at the start).
pub fn set_color(choice: crate::cli::ColorChoice) {
    let _ = COLOR.set(choice);
}

/// Whether what goes to a stream that is (`terminal`) or is not a
/// terminal is coloured: `--color always` or `never`, else on a terminal
/// unless `NO_COLOR` is set (and not empty).
pub fn colour_for(terminal: bool) -> bool {
    use crate::cli::ColorChoice;
    match COLOR.get().copied().unwrap_or(ColorChoice::Auto) {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    }
}

/// Whether stderr's lines are coloured.
fn colour_stderr() -> bool {
    use std::io::IsTerminal;
    colour_for(std::io::stderr().is_terminal())
}

/// `text` in the SGR style `code` when `on`.
pub fn paint(on: bool, code: &str, text: &str) -> String {
    if on {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// One line of text from outside hel (names, arguments, paths, server
/// messages), made safe for a terminal; on a coloured terminal, hel's
/// progress is dimmed and warnings stand out. On a terminal a line wider
/// than it is wrapped at spaces ([`wrap`]), so that no word is split.
pub fn line(text: &str) {
    let safe = escape_line(text);
    let code = if safe.starts_with("hel: warning") {
        "33"
    } else if safe.starts_with("hel: instruction incomplete") {
        "31"
    } else if safe.starts_with("hel:") {
        "2"
    } else {
        ""
    };
    let colour = !code.is_empty() && colour_stderr();
    for piece in on_stderr(&safe) {
        note!("{}", paint(colour, code, &piece));
    }
}

/// A line saying what failed, in red on a coloured terminal (wrapped as
/// [`line`] wraps).
pub fn error(text: &str) {
    let colour = colour_stderr();
    for piece in on_stderr(&escape_line(text)) {
        note!("{}", paint(colour, "1;31", &piece));
    }
}

/// A failure that ends hel: `hel: ERROR` in red ([`error`]), then a
/// `hint: …` line for each of its hints.
pub fn failure(e: &Exit) {
    error(&format!("hel: {e}"));
    hints(e.hints());
}

/// A failure a run goes on after, as a line of it: `hel: WHAT ERROR`
/// ([`line`]), then its hints.
pub fn failure_line(what: &str, e: &Exit) {
    line(&format!("hel: {what}{e}"));
    hints(e.hints());
}

/// One `hint: …` line for each hint.
pub fn hints(hints: &[Hint]) {
    for h in hints {
        line(&format!("hint: {h}"));
    }
}

/// `text` as the lines stderr shows: wrapped to a terminal's width, the
/// later lines indented; off a terminal the one line as it is.
fn on_stderr(text: &str) -> Vec<String> {
    match stderr_room() {
        Some(room) => wrap(text, room, "  "),
        None => vec![text.to_owned()],
    }
}

/// A tool line (`hel: read_file src/main.rs`, `hel:   ok …`): on a terminal,
/// the whole line cut to its width; else its text after `prefix` cut to
/// `max` characters (a log's lines stay as they were).
fn tool_line(prefix: &str, text: &str, max: usize) {
    let shown = match stderr_room() {
        Some(room) => fit(
            &format!("{prefix}{}", escape_line(&one_line(text, max))),
            room,
        ),
        None => format!("{prefix}{}", one_line(text, max)),
    };
    line(&shown)
}

/// Renders a run's events on stderr.
pub struct Stderr;

impl Observer for Stderr {
    fn event(&self, event: Event) {
        match event {
            // Scripts read this line: never wrapped, even on a terminal.
            Event::Session(Some(id)) => note!("session: {id}"),
            Event::Session(None) => note!("session: none"),
            Event::Project {
                root,
                found,
                instructions,
            } => {
                tool::set_root(root.as_deref());
                if let Some(text) = project_line(root.as_deref(), found, &instructions) {
                    line(&text)
                }
            }
            Event::SettingsChanged(diffs) => line(&format!(
                "hel: note: continuing with the current settings ({}); the saved ones stay in the checkpoint",
                diffs.join(", ")
            )),
            Event::ToolStarted {
                id,
                name,
                arguments,
            } => tool_line("", &tool::started(&id, &name, &arguments), 400),
            Event::FilesChanged(files) => tool::changed(files),
            // A denial is hel's own sentence: shown whole.
            Event::ToolFinished {
                name,
                content,
                ok: false,
                ..
            } if content.starts_with("denied: ") => {
                tool::ended(&name, &content);
                line(&format!("hel:   {}", one_line(&content, 400)))
            }
            Event::ToolFinished {
                id,
                name,
                content,
                ok,
                ..
            } => finished(&id, &name, &content, ok),
            Event::Retry {
                error,
                retry: hel_agent::Retry::Unstreamed,
                ..
            } => line(&format!("hel: {error}; asking again, not streamed")),
            Event::Retry {
                error,
                wait,
                retry: hel_agent::Retry::Attempt { n, of },
            } => line(&format!(
                "hel: {error}; retrying in {} ({n} of {of})",
                seconds(wait)
            )),
            Event::Trimmed { under } => line(&format!(
                "hel: trimmed old tool results to stay under {under} tokens"
            )),
            Event::Compacting { messages } => line(&format!(
                "hel: compacting {} into a summary",
                count(messages as u64, "message", "messages")
            )),
            Event::CompactionSkipped => line(
                "hel: the compaction summary is not smaller than what it would replace; keeping the conversation as is",
            ),
            Event::OutputLowered {
                configured,
                window,
                limit,
            } => line(&format!(
                "hel: note: the output limit of {configured} tokens (--max-output-tokens) does not fit the context window of {window} tokens (--context-window) with the conversation; each request asks for what fits ({limit} tokens now)"
            )),
            Event::CheckpointSaved { .. } => {}
            Event::Relocated {
                from,
                to,
                checkpoint,
            } => line(&format!(
                "hel: the session moved from {from} to {to} (recorded as checkpoint {})",
                &checkpoint.to_hex()[..12]
            )),
            // The answer's text is Live's to show.
            // The live view's (on a terminal, under the spinner).
            Event::ToolOutput(_) => {}
            Event::Waiting
            | Event::ResponseStarted
            | Event::TextDelta(_)
            | Event::ReasoningDelta(_)
            | Event::ResponseEnded { .. }
            | Event::Response { .. }
            | Event::ResponseIncomplete => {}
            // A hook that failed is a warning; a block is said; the rest
            // are stream-json's to report.
            Event::Hook(r) if r.failed() => line(&format!("hel: warning: {}", one_line(&r.to_string(), 400))),
            Event::Hook(r) if r.outcome == hel_agent::HookOutcome::Blocked => {
                line(&format!("hel:   {}", one_line(&r.to_string(), 400)))
            }
            Event::Hook(_) => {}
            Event::Warning(w) => {
                line(&format!("hel: warning: {}", warning(&w)));
                if let Warning::NoSession { error, .. } = &w {
                    hints(exit::store_hints(error));
                }
            }
        }
    }
}

/// A tool call's result: an edit's result line and its diff, a command's
/// exit status and its last lines, else the result on one line.
fn finished(id: &str, name: &str, content: &str, ok: bool) {
    let diff = tool::finished_edit(id);
    let files = tool::ended(name, content);
    let (room, colour) = (stderr_room(), colour_stderr());
    match tool::command(content).filter(|_| name == "bash") {
        Some((status, lines)) => {
            line(&format!("hel:   {status}"));
            print_tool(&lines, room, colour);
        }
        None => tool_line("hel:   ", content, 120),
    }
    if let (true, Some(diff)) = (ok, diff) {
        print_tool(&diff, room, colour);
    }
    print_tool(&files, room, colour);
}

/// Print `lines` on stderr: on a terminal (`room`) each cut to its width
/// and coloured when `colour`; else as they are.
fn print_tool(lines: &[tool::Shown], room: Option<usize>, colour: bool) {
    for l in lines {
        let code = match l {
            tool::Shown::Removed(_) => "31",
            tool::Shown::Added(_) => "32",
            tool::Shown::Plain(_) => "2",
            tool::Shown::Output(_) => "",
        };
        let text = cut(l.text(), room);
        note!("{}", paint(colour && !code.is_empty(), code, &text));
    }
}

/// `hel: project ROOT (why) · instructions A, B`: the project's root when
/// it is not where hel started, and the instructions files read; None
/// when there is neither.
pub fn project_line(root: Option<&Path>, found: Found, instructions: &[String]) -> Option<String> {
    start_line(None, root, found, instructions)
}

/// The line after `session: <uuid>`: `hel: model M · access A · project
/// ROOT (why) · instructions A, B · /help lists the commands`, each part
/// only where it applies (None: no part does).
pub fn start_line(
    intro: Option<&Intro>,
    root: Option<&Path>,
    found: Found,
    instructions: &[String],
) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(i) = intro {
        parts.push(format!("model {}", i.model));
        parts.push(format!("access {}", i.access));
    }
    if let Some(root) = root {
        parts.push(format!("project {} ({})", root.display(), found.why()));
    }
    if !instructions.is_empty() {
        parts.push(format!("instructions {}", instructions.join(", ")));
    }
    if intro.is_some_and(|i| i.help) {
        parts.push("/help lists the commands".to_owned());
    }
    (!parts.is_empty()).then(|| format!("hel: {}", parts.join(" · ")))
}

/// A warning in words; a store error in it reads as it would on exit.
fn warning(w: &Warning) -> String {
    match w {
        Warning::NoSession { store, error } => format!(
            "cannot create a session in {} ({}); this conversation will not be saved",
            store.display(),
            exit::store_words(error)
        ),
        w => w.to_string(),
    }
}

pub use hel_agent::text::count;

/// `s` on one line (newlines as spaces), cut to `max` characters.
fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

/// The width of the terminal stderr is, in columns (80 when it cannot be
/// told).
pub fn width() -> usize {
    term_width(&dialoguer::console::Term::stderr()).unwrap_or(80)
}

/// The width of the terminal stdout is (None: stdout is not a terminal,
/// and what goes there is left as it is: scripts read it).
pub fn stdout_room() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    Some(term_width(&dialoguer::console::Term::stdout()).unwrap_or(80))
}

/// The width of the terminal stderr is (None: stderr is not a terminal).
pub fn stderr_room() -> Option<usize> {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal().then(width)
}

fn term_width(term: &dialoguer::console::Term) -> Option<usize> {
    match term.size_checked() {
        Some((_, cols)) if cols > 0 => Some(cols as usize),
        _ => None,
    }
}

/// The columns `text` takes on a terminal: two for a wide (East Asian,
/// emoji) character, none for a combining mark or a control character.
pub fn columns(text: &str) -> usize {
    text.chars().map(char_columns).sum()
}

/// The columns `c` takes ([`columns`] of a string is the sum of its
/// characters', so that a line cut character by character is measured
/// the same way everywhere).
pub fn char_columns(c: char) -> usize {
    use unicode_width::UnicodeWidthChar;
    c.width().unwrap_or(0)
}

/// `text` cut to at most `width` columns ([`columns`]), ending in `…`
/// where it was cut: the one way hel shortens a line to fit.
pub fn fit(text: &str, width: usize) -> String {
    if columns(text) <= width {
        return text.to_owned();
    }
    let room = width.saturating_sub(1);
    let mut used = 0;
    let mut cut = String::new();
    for c in text.chars() {
        let w = char_columns(c);
        if used + w > room {
            break;
        }
        used += w;
        cut.push(c);
    }
    if width > 0 {
        cut.push('…');
    }
    cut
}

/// `text` as lines of at most `width` columns, broken at spaces; lines
/// after the first start with `indent`, and a word too long for a line
/// is broken where the line ends. What a sentence becomes on a narrow
/// terminal: every character of it is still there. (A width under the
/// indent's and two is taken as that.)
pub fn wrap(text: &str, width: usize, indent: &str) -> Vec<String> {
    let indent_w = columns(indent);
    let width = width.max(indent_w + 2);
    if columns(text) <= width {
        return vec![text.to_owned()];
    }
    let body = text.trim_start_matches(' ');
    let lead = text.len() - body.len();
    let mut lines = Vec::new();
    let mut current = text[..lead].to_owned();
    // Columns used on this line, and where its text starts.
    let (mut used, mut start) = (lead, lead);
    for word in body.split(' ') {
        if used > start && used + 1 + columns(word) > width {
            lines.push(std::mem::replace(&mut current, indent.to_owned()));
            (used, start) = (indent_w, indent_w);
        }
        if used > start {
            current.push(' ');
            used += 1;
        }
        for c in word.chars() {
            let w = char_columns(c);
            if used > start && used + w > width {
                lines.push(std::mem::replace(&mut current, indent.to_owned()));
                (used, start) = (indent_w, indent_w);
            }
            current.push(c);
            used += w;
        }
    }
    lines.push(current);
    lines
}

/// A help text (lines of `  NAME   what it does`, the second column at
/// `column`) on stderr: on a terminal each line wrapped to its width, the
/// later lines of an indented line under the second column, of any other
/// two spaces in.
pub fn help(text: &str, column: usize) {
    for l in text.lines() {
        match stderr_room() {
            Some(room) => {
                for piece in wrap(l, room, &help_indent(l, column)) {
                    note!("{piece}");
                }
            }
            None => note!("{l}"),
        }
    }
}

/// The indent of a help line's later lines when wrapped.
fn help_indent(line: &str, column: usize) -> String {
    " ".repeat(if line.starts_with("  ") { column } else { 2 })
}

/// A sentence for a report: on a terminal (`room`) wrapped at spaces to
/// its width, later lines starting with `indent`; else as it is.
pub fn sentence(text: &str, room: Option<usize>, indent: &str) -> String {
    match room {
        Some(room) => wrap(text, room, indent).join("\n"),
        None => text.to_owned(),
    }
}

/// A line of a list (a path, a preview): on a terminal (`room`) cut to
/// its width; else as it is.
pub fn cut(text: &str, room: Option<usize>) -> String {
    match room {
        Some(room) => fit(text, room),
        None => text.to_owned(),
    }
}

/// How a [`Table`] gives up room on a narrow terminal, one step at a time.
#[derive(Debug, Clone, Copy)]
pub enum Shrink {
    /// Leave column `i` out.
    Drop(usize),
    /// Show the first `w` characters of column `i`'s cells (an id's prefix
    /// still names it), without `…`.
    Prefix(usize, usize),
    /// Cut column `i`'s cells to `w` columns with `…`.
    Cut(usize, usize),
}

/// A table of fixed columns and a last column of free text, fitted to a
/// terminal: the steps of `shrink` are taken in turn until the text has
/// `min_text` columns, and each row is then cut to the width ([`fit`]).
/// Off a terminal (no room) every column stays and no row is cut, so the
/// output is the same bytes as always.
#[derive(Debug, Clone)]
pub struct Table {
    /// Each column's width (None: left out) and alignment.
    columns: Vec<(Option<usize>, bool)>,
    /// Cut to a prefix (true) or with `…`, when narrowed.
    prefix: Vec<bool>,
    room: Option<usize>,
}

impl Table {
    /// Columns `(width, right_aligned)`, for output `room` columns wide.
    pub fn new(
        columns: &[(usize, bool)],
        room: Option<usize>,
        shrink: &[Shrink],
        min_text: usize,
    ) -> Table {
        let mut t = Table {
            columns: columns.iter().map(|&(w, r)| (Some(w), r)).collect(),
            prefix: vec![false; columns.len()],
            room,
        };
        let Some(room) = room else { return t };
        let used =
            |t: &Table| -> usize { t.columns.iter().filter_map(|c| c.0).map(|w| w + 2).sum() };
        for step in shrink {
            if used(&t) + min_text <= room {
                break;
            }
            match *step {
                Shrink::Drop(i) => t.columns[i].0 = None,
                Shrink::Prefix(i, w) | Shrink::Cut(i, w) => {
                    if let Some(c) = t.columns[i].0.as_mut() {
                        *c = (*c).min(w);
                    }
                    t.prefix[i] = matches!(step, Shrink::Prefix(..));
                }
            }
        }
        t
    }

    /// A row: the cells of the columns shown, padded to their widths, two
    /// spaces apart, then `text`; on a terminal, cut to its width. Cells
    /// and text must be escaped already.
    pub fn row(&self, cells: &[&str], text: &str) -> String {
        let mut out = String::new();
        for (cell, (&(width, right), &prefix)) in
            cells.iter().zip(self.columns.iter().zip(&self.prefix))
        {
            let Some(width) = width else { continue };
            let cell = match self.room {
                Some(_) if prefix => cell.chars().take(width).collect(),
                Some(_) => fit(cell, width),
                None => (*cell).to_owned(),
            };
            if right {
                out.push_str(&format!("{cell:>width$}  "));
            } else {
                out.push_str(&format!("{cell:<width$}  "));
            }
        }
        out.push_str(text);
        match self.room {
            Some(room) => fit(&out, room),
            None => out,
        }
    }

    /// A whole line (a heading between rows) as the table shows it: cut
    /// to the width on a terminal.
    pub fn line(&self, text: &str) -> String {
        match self.room {
            Some(room) => fit(text, room),
            None => text.to_owned(),
        }
    }
}

/// A wait as people read it: `4 s`, `0.5 s`.
fn seconds(wait: std::time::Duration) -> String {
    let s = wait.as_secs_f64();
    if wait.subsec_millis() == 0 {
        format!("{} s", wait.as_secs())
    } else {
        format!("{s:.1} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_counts_display_columns() {
        assert_eq!(fit("abcdef", 6), "abcdef");
        assert_eq!(fit("abcdefg", 6), "abcde…");
        // Wide characters take two columns, a combining mark none.
        assert_eq!(fit("한국어한국어", 7), "한국어…");
        assert_eq!(columns(&fit("한국어한국어", 6)), 5);
        assert_eq!(
            fit("e\u{301}e\u{301}e\u{301}", 3),
            "e\u{301}e\u{301}e\u{301}"
        );
        assert_eq!(fit("x", 0), "");
        for w in 1..30 {
            let cut = fit("hel: read_file {\"path\":\"文字/é/long.txt\"}", w);
            assert!(columns(&cut) <= w, "{w}: {cut}");
        }
    }

    #[test]
    fn wrap_breaks_at_spaces_and_keeps_every_word() {
        let text = "hel: cannot reach the model server at http://hel-test.invalid:1/v1: the host name does not resolve";
        let lines = wrap(text, 40, "  ");
        assert!(lines.iter().all(|l| columns(l) <= 40), "{lines:?}");
        assert_eq!(lines[0], "hel: cannot reach the model server at");
        assert_eq!(lines[1], "  http://hel-test.invalid:1/v1: the host");
        let words: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
        assert_eq!(words, text.split(' ').collect::<Vec<_>>());
        assert_eq!(wrap("short", 40, "  "), ["short"]);
        assert_eq!(wrap("  two  spaces", 40, "  "), ["  two  spaces"]);
        assert_eq!(
            wrap("  lead words here", 12, "    "),
            ["  lead words", "    here"]
        );
        // A word longer than a line is broken where the line ends.
        assert_eq!(wrap("a bcdefghij", 6, " "), ["a", " bcdef", " ghij"]);
        assert_eq!(wrap("한국어한국어", 7, ""), ["한국어", "한국어"]);
        for w in 4..50 {
            for l in wrap(text, w, "  ") {
                assert!(columns(&l) <= w, "{w}: {l:?}");
            }
        }
    }

    #[test]
    fn help_lines_wrap_under_their_second_column() {
        let l = "  /fork [CHECKPOINT] continue in a new session forked from a checkpoint of";
        assert_eq!(
            wrap(l, 40, &help_indent(l, 21)),
            [
                "  /fork [CHECKPOINT] continue in a new",
                "                     session forked from",
                "                     a checkpoint of",
            ]
        );
        assert_eq!(help_indent("Keys: Enter sends", 21).len(), 2);
    }

    #[test]
    fn tables_shrink_on_a_terminal_and_stay_as_they_were_off_one() {
        let cols = [(12, false), (24, false), (5, true), (4, false)];
        let shrink = [
            Shrink::Drop(3),
            Shrink::Prefix(1, 16),
            Shrink::Drop(2),
            Shrink::Drop(1),
        ];
        let cells = ["0123456789ab", "2026-11-30T08:14:14.144Z", "11", "x"];
        let text = "Fix the TODO in src/greet.py and then everything else that is there";
        let piped = Table::new(&cols, None, &shrink, 30).row(&cells, text);
        assert_eq!(
            piped,
            format!("0123456789ab  2026-11-30T08:14:14.144Z     11  x     {text}")
        );
        let t80 = Table::new(&cols, Some(80), &shrink, 30).row(&cells, text);
        assert_eq!(
            t80,
            "0123456789ab  2026-11-30T08:14:14.144Z     11  Fix the TODO in src/greet.py and…"
        );
        assert_eq!(columns(&t80), 80);
        let t40 = Table::new(&cols, Some(40), &shrink, 30).row(&cells, text);
        assert_eq!(t40, "0123456789ab  Fix the TODO in src/greet…");
        let t62 = Table::new(&cols, Some(62), &shrink, 30).row(&cells, text);
        assert_eq!(
            t62,
            "0123456789ab  2026-11-30T08:14  Fix the TODO in src/greet.py …"
        );
    }

    #[test]
    fn counts_read_as_words() {
        assert_eq!(count(1u64, "file", "files"), "1 file");
        assert_eq!(count(0u64, "file", "files"), "0 files");
        assert_eq!(count(2u64, "file", "files"), "2 files");
    }
}
