//! Markdown of an answer shown on a terminal as it arrives: headings,
//! emphasis, strikethrough, inline code, links, lists (task lists too),
//! block quotes, rules, tables fitted to the width and code blocks with
//! syntax highlighting. Only what reaches a terminal is rendered: piped
//! or redirected, stdout stays the model's bytes. The text it is given is
//! already made safe for a terminal; what the parser makes of it (an
//! entity such as `&#x1b;` decodes to a control character) is escaped
//! again, so what it prints holds no control character but its own
//! styles.
//!
//! Parsing is pulldown-cmark's (CommonMark with GitHub's tables,
//! strikethrough and task lists); highlighting is syntect's, in 16 ANSI
//! colours (its theme's colours mapped to the nearest of the terminal's
//! own palette, so code stays readable on dark and light terminals); a
//! language syntect does not know is shown plain.
//!
//! Streaming: the text comes a line at a time ([`Markdown::line`]) and is
//! shown a block at a time, once the block is complete, so text still
//! appears as it streams while what is shown never has to change. The
//! lines not shown yet are held and parsed again when a line may complete
//! a block (a blank line, a heading or rule at the margin, a line that
//! ends a list) or when they have doubled since they were last parsed, so
//! each byte is parsed a few times at most; the top-level blocks before
//! the last one are complete (a later line can no longer change them) and
//! are shown; the last one is shown when it is complete too: a heading or
//! a rule at once, a paragraph, table or quote at the blank line after
//! it; a list, or a code block indented or inside another block, waits
//! for a block that is not part of it (a list's items may go on after a
//! blank line). A fenced code block that starts at the margin is shown a
//! line at a time as its lines come. What is held is bounded
//! ([`HELD_LINES`], [`HELD_BYTES`]): past that it is shown as it parses
//! then, so neither memory nor parsing again grows without bound.
//! [`Markdown::flush`] shows the rest at the end of the answer.
//!
//! Layout: every line fits the width, measured in display columns.
//! Paragraphs wrap at word boundaries (a word longer than the line is
//! cut); a line break in the text stays one, as GitHub shows comments;
//! tables shrink their columns and wrap their cells, and a table whose
//! columns cannot all fit is shown a row at a time, each cell under its
//! header's name; code lines longer than the width continue on the next
//! line. Top-level blocks are set apart by an empty line. Without colour
//! the layout is the same, with no escape sequence at all.

use std::ops::Range;
use std::sync::OnceLock;

use crate::render::{char_columns, columns};
use hel_agent::text::escape_line;
use pulldown_cmark::{
    Alignment, BlockQuoteKind, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd,
};
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, Theme, ThemeSet};
use syntect::parsing::SyntaxSet;

/// Lines held before they are shown whatever they parse as (a longer
/// table or list is then shown in parts).
pub const HELD_LINES: usize = 200;
/// Bytes held before they are shown whatever they parse as.
pub const HELD_BYTES: usize = 32 * 1024;
/// The narrowest width laid out for: narrower terminals get lines this
/// wide.
const MIN_WIDTH: usize = 20;
/// Code lines longer than this are shown without highlighting (its
/// regular expressions' time grows with the line).
const HIGHLIGHT_MAX_LINE: usize = 4096;
/// Bytes of one code block highlighted at most; the rest is plain.
const HIGHLIGHT_MAX_BLOCK: usize = 256 * 1024;
/// The narrowest a table's column is cut to (narrower, a table is shown
/// a row at a time).
const MIN_COLUMN: usize = 6;

/// The rendering state of one answer.
pub struct Markdown {
    /// Colours and bold (else only the layout).
    pub colour: bool,
    /// The terminal's width in columns.
    pub width: usize,
    /// Lines not shown yet, each ending in `\n`.
    held: String,
    /// How many lines `held` has.
    held_lines: usize,
    /// A fenced code block being shown a line at a time.
    code: Option<Fence>,
    /// Something is shown: the next block is set apart from it.
    shown: bool,
    /// The lines held are parsed again when they are this many, if no
    /// line completed a block before.
    next_parse: usize,
    /// The last line was blank.
    after_blank: bool,
    /// Bytes parsed to find where blocks end, all told.
    parsed: usize,
}

/// A fenced code block open at the margin.
struct Fence {
    /// Its fence's character (`` ` `` or `~`) and length.
    marker: char,
    len: usize,
    /// Its language's highlighter (None: plain).
    highlight: Option<Highlight>,
}

impl Markdown {
    pub fn new(colour: bool, width: usize) -> Markdown {
        Markdown {
            colour,
            width: width.max(MIN_WIDTH),
            held: String::new(),
            held_lines: 0,
            code: None,
            shown: false,
            next_parse: 1,
            after_blank: false,
            parsed: 0,
        }
    }

    /// One complete line (without its `\n`) as shown: the lines of the
    /// blocks it completes, each ending in `\n`, or nothing while they
    /// are held.
    pub fn line(&mut self, line: &str) -> String {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(fence) = &mut self.code {
            if closes(line, fence) {
                self.code = None;
                return String::new();
            }
            return code_line(self.colour, self.width, &mut fence.highlight, line);
        }
        if let Some((marker, len, info)) = opening(line) {
            if !self.continues_held(line) {
                let mut out = self.take_held(self.held.len());
                if self.shown {
                    out.push('\n');
                }
                self.shown = true;
                self.code = Some(Fence {
                    marker,
                    len,
                    highlight: if self.colour {
                        Highlight::new(info)
                    } else {
                        None
                    },
                });
                return out;
            }
        }
        self.held.push_str(line);
        self.held.push('\n');
        self.held_lines += 1;
        if self.held_lines >= HELD_LINES || self.held.len() >= HELD_BYTES {
            return self.take_held(self.held.len());
        }
        let blank = line.trim().is_empty();
        let after_blank = std::mem::replace(&mut self.after_blank, blank);
        if !self.due(line, blank, after_blank) {
            return String::new();
        }
        self.parsed += self.held.len();
        let done = complete(&self.held, blank);
        let shown = self.take_held(done);
        // Parsed again at twice the lines still held (or at a line that
        // may complete them): a block that keeps growing is parsed a
        // bounded number of times per line, not once per line.
        self.next_parse = (2 * self.held_lines).max(self.held_lines + 1);
        shown
    }

    /// Whether the lines held are worth parsing again now that `line`
    /// (`blank`; `after_blank`: the line before it was) is added: it may
    /// complete a block, or the lines held have doubled since they were
    /// last parsed. A line that cannot complete one waits.
    fn due(&self, line: &str, blank: bool, after_blank: bool) -> bool {
        if self.held_lines >= self.next_parse {
            return true;
        }
        // An ATX heading or a rule at the margin ends any block before it.
        let hashes = line.chars().take_while(|c| *c == '#').count();
        let heading = (1..=6).contains(&hashes)
            && line[hashes..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace);
        let marks: Vec<char> = line.chars().filter(|c| !c.is_whitespace()).collect();
        let rule = marks.len() >= 3 && ['-', '*', '_'].iter().any(|m| marks.iter().all(|c| c == m));
        if heading || (rule && !line.starts_with(' ')) {
            return true;
        }
        let first = self
            .held
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let fence = first.trim_start().starts_with("```") || first.trim_start().starts_with("~~~");
        if list_item(first) || fence || first.starts_with("    ") || first.starts_with('\t') {
            // A list or code block goes on after a blank line; a line at
            // the margin after one that starts no item ends a list.
            !blank && after_blank && !line.starts_with([' ', '\t']) && !list_item(line)
        } else {
            // A blank line ends a paragraph, table or quote; a line of
            // `=` makes a paragraph a heading.
            blank || (!marks.is_empty() && marks.iter().all(|c| *c == '='))
        }
    }

    /// Whether lines are held, not shown yet.
    pub fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// `text` (made safe for a terminal) shown whole, as it is streamed
    /// a line at a time.
    pub fn whole(&mut self, text: &str) -> String {
        let mut out: String = text.lines().map(|l| self.line(l)).collect();
        out.push_str(&self.flush());
        out
    }

    /// What is held, shown; the state goes on (a code block still open
    /// stays open: a note between two lines of it does not end it).
    pub fn flush(&mut self) -> String {
        self.take_held(self.held.len())
    }

    /// Whether `line` (an opening fence at the margin) belongs to a block
    /// held, as the closing fence of an indented one.
    fn continues_held(&self, line: &str) -> bool {
        if self.held.trim().is_empty() {
            return false;
        }
        let text = format!("{}{line}\n", self.held);
        let at = self.held.len();
        blocks(&text)
            .iter()
            .any(|b| b.kind == Kind::Code && b.range.start < at && b.range.end > at)
    }

    /// The first `len` bytes held, shown (set apart from what was shown
    /// before); the rest stays held.
    fn take_held(&mut self, len: usize) -> String {
        if len == 0 {
            return String::new();
        }
        let text: String = self.held.drain(..len).collect();
        self.held_lines = self.held.matches('\n').count();
        let shown = render_blocks(self.colour, self.width, &text);
        if shown.is_empty() {
            return shown;
        }
        let gap = if std::mem::replace(&mut self.shown, true) {
            "\n"
        } else {
            ""
        };
        format!("{gap}{shown}")
    }
}

/// Whether `line` starts a list item: `-`, `*` or `+`, or a number of
/// up to 9 digits and `.` or `)`, then a space or nothing (up to 3
/// spaces before it).
fn list_item(line: &str) -> bool {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let after = if digits == 0 {
        rest.strip_prefix(['-', '*', '+'])
    } else if digits <= 9 {
        rest[digits..].strip_prefix(['.', ')'])
    } else {
        None
    };
    indent <= 3 && after.is_some_and(|a| a.is_empty() || a.starts_with([' ', '\t']))
}

/// An opening code fence at the margin: its character, length and info
/// string.
fn opening(line: &str) -> Option<(char, usize, &str)> {
    let marker = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = line.chars().take_while(|c| *c == marker).count();
    let info = line[len..].trim();
    // A backtick fence's info string has no backtick (else it is code).
    (len >= 3 && !(marker == '`' && info.contains('`'))).then_some((marker, len, info))
}

/// Whether `line` closes `fence`: up to 3 spaces, at least as many of
/// its character, nothing else.
fn closes(line: &str, fence: &Fence) -> bool {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    let len = rest.chars().take_while(|c| *c == fence.marker).count();
    indent <= 3 && len >= fence.len && rest[len..].trim().is_empty()
}

/// What a top-level block is, as far as knowing when it is complete
/// goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Complete at its own end: a heading, a rule.
    Closed,
    /// Complete at a blank line: a paragraph, table, quote, HTML.
    Blank,
    /// Goes on after a blank line: a list.
    List,
    /// A code block (fenced or indented).
    Code,
}

struct Block {
    range: Range<usize>,
    kind: Kind,
}

pub(crate) fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_GFM
}

/// The top-level blocks of `text`.
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    for (event, range) in Parser::new_ext(text, options()).into_offset_iter() {
        match event {
            Event::Start(tag) => {
                if depth == 0 {
                    let kind = match tag {
                        Tag::Heading { .. } => Kind::Closed,
                        Tag::List(_) => Kind::List,
                        Tag::CodeBlock(_) => Kind::Code,
                        _ => Kind::Blank,
                    };
                    out.push(Block { range, kind });
                }
                depth += 1;
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(Block {
                range,
                kind: Kind::Closed,
            }),
            _ => {}
        }
    }
    out
}

/// How much of `held` (whole lines; `blank`: its last is blank) is
/// complete blocks.
fn complete(held: &str, blank: bool) -> usize {
    let blocks = blocks(held);
    let Some(last) = blocks.last() else {
        // Only blank lines: nothing to show, nothing to keep.
        return if blank { held.len() } else { 0 };
    };
    let done = match last.kind {
        Kind::Closed => true,
        Kind::Blank => blank,
        Kind::List | Kind::Code => false,
    };
    if done {
        return held.len();
    }
    // The start of the last block's first line (its range starts after
    // the line's indent).
    let start = last.range.start.min(held.len());
    held[..start].rfind('\n').map_or(0, |i| i + 1)
}

/// How a piece of text is shown.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
struct Style {
    bold: bool,
    italic: bool,
    strike: bool,
    underline: bool,
    dim: bool,
    /// An ANSI foreground colour (30-37 or 90-97).
    fg: Option<u8>,
}

impl Style {
    /// Its SGR parameters (empty: none).
    fn sgr(&self) -> String {
        let mut codes: Vec<String> = Vec::new();
        for (on, code) in [
            (self.bold, "1"),
            (self.dim, "2"),
            (self.italic, "3"),
            (self.underline, "4"),
            (self.strike, "9"),
        ] {
            if on {
                codes.push(code.to_owned());
            }
        }
        if let Some(fg) = self.fg {
            codes.push(fg.to_string());
        }
        codes.join(";")
    }
}

/// Text in one style, on one line.
#[derive(Clone, Debug)]
struct Span {
    text: String,
    style: Style,
}

/// A line of spans and the columns it takes.
#[derive(Default, Clone)]
struct Line {
    spans: Vec<Span>,
    width: usize,
}

impl Line {
    fn push(&mut self, text: &str, style: Style) {
        if text.is_empty() {
            return;
        }
        self.width += columns(text);
        match self.spans.last_mut() {
            Some(last) if last.style == style => last.text.push_str(text),
            _ => self.spans.push(Span {
                text: text.to_owned(),
                style,
            }),
        }
    }

    /// Without the spaces at its end.
    fn trim_end(mut self) -> Line {
        while let Some(last) = self.spans.last_mut() {
            let kept = last.text.trim_end().len();
            self.width -= columns(&last.text[kept..]);
            last.text.truncate(kept);
            if !last.text.is_empty() {
                break;
            }
            self.spans.pop();
        }
        self
    }

    /// As printed: styled when `colour`.
    fn show(&self, colour: bool) -> String {
        let mut out = String::new();
        for s in &self.spans {
            let sgr = s.style.sgr();
            if colour && !sgr.is_empty() {
                out.push_str(&format!("\x1b[{sgr}m{}\x1b[0m", s.text));
            } else {
                out.push_str(&s.text);
            }
        }
        out
    }
}

/// Inline content: spans, `None` for a line break.
type Inline = Vec<Option<Span>>;

/// `inline` laid out in lines of at most `room` columns, breaking at
/// spaces (a word may span several styles); a word longer than a line is
/// cut where the line ends.
fn wrap(inline: &Inline, room: usize) -> Vec<Line> {
    let room = room.max(2);
    let mut w = Wrap {
        room,
        lines: Vec::new(),
        cur: Line::default(),
        word: Line::default(),
        space: None,
    };
    for piece in inline {
        let Some(span) = piece else {
            w.place();
            w.lines.push(std::mem::take(&mut w.cur));
            w.space = None;
            continue;
        };
        // Words are taken whole (a run of characters at a time), so a
        // long word costs its length, not a step per character.
        let text = span.text.as_str();
        let mut word_start = None;
        for (i, c) in text.char_indices() {
            if c.is_whitespace() {
                if let Some(start) = word_start.take() {
                    w.word.push(&text[start..i], span.style);
                }
                w.place();
                if w.cur.width > 0 {
                    w.space = Some(span.style);
                }
            } else if word_start.is_none() {
                word_start = Some(i);
            }
        }
        if let Some(start) = word_start {
            w.word.push(&text[start..], span.style);
        }
    }
    w.place();
    if w.cur.width > 0 || w.lines.is_empty() {
        w.lines.push(w.cur);
    }
    w.lines
}

/// The state of [`wrap`].
struct Wrap {
    room: usize,
    lines: Vec<Line>,
    /// The line being filled.
    cur: Line,
    /// The word being read.
    word: Line,
    /// A space is due before the next word (none is shown at a line's
    /// end or start), in this style.
    space: Option<Style>,
}

impl Wrap {
    /// The word read, put on the line, or the next if it does not fit
    /// (cut if it fits on none).
    fn place(&mut self) {
        if self.word.spans.is_empty() {
            return;
        }
        let word = std::mem::take(&mut self.word);
        let space = self.space.take().filter(|_| self.cur.width > 0);
        let sp = usize::from(space.is_some());
        if self.cur.width + sp + word.width <= self.room {
            if let Some(st) = space {
                self.cur.push(" ", st);
            }
            for s in &word.spans {
                self.cur.push(&s.text, s.style);
            }
            return;
        }
        if self.cur.width > 0 {
            self.lines.push(std::mem::take(&mut self.cur));
        }
        // Cut where each line is full, a line's piece pushed at once.
        for s in &word.spans {
            let (mut start, mut run) = (0, 0);
            for (i, c) in s.text.char_indices() {
                let cw = char_columns(c);
                if self.cur.width + run + cw > self.room && self.cur.width + run > 0 {
                    self.cur.push(&s.text[start..i], s.style);
                    self.lines.push(std::mem::take(&mut self.cur));
                    (start, run) = (i, 0);
                }
                run += cw;
            }
            self.cur.push(&s.text[start..], s.style);
        }
    }
}

/// `spans` (one line of code) cut into lines of at most `room` columns.
fn cut(spans: &[Span], room: usize) -> Vec<Line> {
    let room = room.max(2);
    let mut lines = Vec::new();
    let mut cur = Line::default();
    for s in spans {
        for c in s.text.chars() {
            let cw = char_columns(c);
            if cur.width + cw > room && cur.width > 0 {
                lines.push(std::mem::take(&mut cur));
            }
            let mut b = [0u8; 4];
            cur.push(c.encode_utf8(&mut b), s.style);
        }
    }
    lines.push(cur);
    lines
}

/// A line of code as shown (without its fence): tabs as 4 spaces,
/// escaped, indented by 2, highlighted when there is a highlighter, cut
/// to `width`.
fn code_line(colour: bool, width: usize, highlight: &mut Option<Highlight>, line: &str) -> String {
    let mut out = String::new();
    for l in code_lines(width.saturating_sub(2), highlight, line) {
        out.push_str("  ");
        out.push_str(&l.trim_end().show(colour));
        out.push('\n');
    }
    out
}

/// The lines of one line of code in `room` columns.
fn code_lines(room: usize, highlight: &mut Option<Highlight>, line: &str) -> Vec<Line> {
    let text = escape_line(line.trim_end().replace('\t', "    ").as_str()).into_owned();
    let spans = highlight
        .as_mut()
        .and_then(|h| h.spans(&text))
        .unwrap_or_else(|| {
            // Plain from here on: a line not seen would leave the
            // highlighter's state wrong for the lines after it.
            *highlight = None;
            vec![Span {
                text: text.clone(),
                style: Style::default(),
            }]
        });
    cut(&spans, room)
}

/// The highlighting of one code block.
struct Highlight {
    lines: HighlightLines<'static>,
    /// Bytes it may still highlight: its time grows with the text.
    left: usize,
}

impl Highlight {
    /// A highlighter for the language an info string names (its first
    /// word: `rust`, `rs`, `python,ignore`); None when syntect does not
    /// know it.
    fn new(info: &str) -> Option<Highlight> {
        let lang = info.split([',', ' ', '\t', '{']).next().unwrap_or("");
        if lang.is_empty() {
            return None;
        }
        let syntax = syntaxes().find_syntax_by_token(lang)?;
        Some(Highlight {
            lines: HighlightLines::new(syntax, theme()?),
            left: HIGHLIGHT_MAX_BLOCK,
        })
    }

    /// The next line of the block (escaped), highlighted; None when it
    /// is too long, the block's budget is spent or syntect fails.
    fn spans(&mut self, text: &str) -> Option<Vec<Span>> {
        if text.len() > HIGHLIGHT_MAX_LINE || text.len() > self.left {
            return None;
        }
        self.left -= text.len();
        // The syntaxes are the ones for lines with their `\n`.
        let with_end = format!("{text}\n");
        let regions = self.lines.highlight_line(&with_end, syntaxes()).ok()?;
        Some(
            regions
                .into_iter()
                .map(|(st, piece)| Span {
                    text: piece.trim_end_matches('\n').to_owned(),
                    style: ansi(st),
                })
                .filter(|s| !s.text.is_empty())
                .collect(),
        )
    }
}

/// The syntaxes syntect ships, loaded once when first needed.
pub(crate) fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

/// The theme whose colours are mapped to ANSI ones: its colours are
/// strongly set apart by hue, its comments grey.
pub(crate) fn theme() -> Option<&'static Theme> {
    static THEME: OnceLock<Option<Theme>> = OnceLock::new();
    THEME
        .get_or_init(|| ThemeSet::load_defaults().themes.remove("InspiredGitHub"))
        .as_ref()
}

/// A theme style as an ANSI one: the nearest of the 6 colours of the
/// terminal's palette by hue, grey as the terminal's own text, dark grey
/// (comments) dimmed; bold and italic kept.
fn ansi(st: syntect::highlighting::Style) -> Style {
    let c = st.foreground;
    let (r, g, b) = (c.r as f32 / 255.0, c.g as f32 / 255.0, c.b as f32 / 255.0);
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let sat = if max > 0.0 { (max - min) / max } else { 0.0 };
    let mut style = Style {
        bold: st.font_style.contains(FontStyle::BOLD),
        italic: st.font_style.contains(FontStyle::ITALIC),
        ..Style::default()
    };
    if sat < 0.2 {
        // Grey: comments are mid grey, text near black.
        style.dim = max > 0.35 && max < 0.8;
        return style;
    }
    let d = max - min;
    let hue = if max == r {
        60.0 * (((g - b) / d).rem_euclid(6.0))
    } else if max == g {
        60.0 * ((b - r) / d + 2.0)
    } else {
        60.0 * ((r - g) / d + 4.0)
    };
    style.fg = Some(match hue {
        h if !(20.0..330.0).contains(&h) => 31,
        h if h < 70.0 => 33,
        h if h < 165.0 => 32,
        h if h < 200.0 => 36,
        h if h < 255.0 => 34,
        _ => 35,
    });
    style
}

/// A container a block is in, for its lines' prefix.
enum Container {
    Quote,
    List {
        /// The next item's number (None: bullets).
        next: Option<u64>,
        /// Its items are set apart by an empty line.
        loose: bool,
    },
    Item {
        /// Its marker (`• `, `2. `).
        marker: String,
        /// The marker is not shown yet (it goes on the item's first
        /// line).
        pending: bool,
    },
}

/// A table being read.
struct Table {
    align: Vec<Alignment>,
    /// Its rows (the first one the header), each a list of cells.
    rows: Vec<Vec<Inline>>,
}

/// One rendering of complete blocks.
struct Render {
    colour: bool,
    width: usize,
    out: Vec<String>,
    stack: Vec<Container>,
    /// Lists in `stack` (counted as they open and close: an item's
    /// marker depends on it, and a walk of the stack per item would cost
    /// the depth squared).
    lists: usize,
    inline: Inline,
    /// Styles open on inline text (bold, italic, ...), innermost last.
    styles: Vec<Style>,
    /// An empty line goes before the next block.
    gap: bool,
    table: Option<Table>,
    /// A code block's language (Some while inside one) and its text.
    code: Option<(String, String)>,
    /// Links open: their destinations (shown after their text) and where
    /// their text starts in the inline content it goes to.
    links: Vec<(String, usize)>,
}

/// `text` (complete blocks) rendered, each line ending in `\n`.
fn render_blocks(colour: bool, width: usize, text: &str) -> String {
    let mut r = Render {
        colour,
        width,
        out: Vec::new(),
        stack: Vec::new(),
        lists: 0,
        inline: Vec::new(),
        styles: Vec::new(),
        gap: false,
        table: None,
        code: None,
        links: Vec::new(),
    };
    for event in Parser::new_ext(text, options()) {
        r.event(event);
    }
    r.end_inline();
    let mut out = String::new();
    for l in r.out {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

impl Render {
    /// The style inline text gets now (each entry of `styles` is the
    /// style with every one open, so this costs no walk of them).
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    /// Text from the parser, made safe again (an entity may have made a
    /// control character) and added to the inline content.
    fn text(&mut self, text: &str, style: Style) {
        let text = text.replace('\t', " ");
        let safe = escape_line(&text);
        let span = Span {
            text: safe.into_owned(),
            style,
        };
        if let Some(sink) = self.sink() {
            sink.push(Some(span));
        }
    }

    /// Where inline content goes now: the table cell being read, else
    /// the block's inline content.
    fn sink(&mut self) -> Option<&mut Inline> {
        match &mut self.table {
            Some(t) => t.rows.last_mut().and_then(|r| r.last_mut()),
            None => Some(&mut self.inline),
        }
    }

    fn line_break(&mut self) {
        // A table cell is one line: its breaks are spaces.
        let piece = self.table.as_ref().map(|_| Span {
            text: " ".into(),
            style: Style::default(),
        });
        if let Some(sink) = self.sink() {
            sink.push(piece);
        }
    }

    /// The prefix of the next line: the quotes' bars and the items'
    /// markers or indents, to at most half the width (deeper nesting is
    /// not indented further, nor looked at: a line costs no more than
    /// the width, however deep). `take`: the line is content (an item's
    /// marker is shown on it), not an empty line between blocks.
    fn prefix(&mut self, take: bool) -> Line {
        let mut line = Line::default();
        let max = self.width / 2;
        // The narrowest a container shows is 2 columns: past this none fits.
        let full = max.saturating_sub(1);
        let bar = Style {
            dim: true,
            ..Style::default()
        };
        for c in &mut self.stack {
            let (text, style) = match c {
                Container::Quote => ("│ ".to_owned(), bar),
                Container::List { .. } => continue,
                Container::Item { marker, pending } => {
                    if take && *pending {
                        *pending = false;
                        (marker.clone(), Style::default())
                    } else {
                        (" ".repeat(columns(marker)), Style::default())
                    }
                }
            };
            if line.width + columns(&text) <= max {
                line.push(&text, style);
            }
            if line.width >= full {
                break;
            }
        }
        line
    }

    /// Columns left after the prefix.
    fn room(&self) -> usize {
        let mut w = 0;
        for c in &self.stack {
            let add = match c {
                Container::Quote => 2,
                Container::List { .. } => 0,
                Container::Item { marker, .. } => columns(marker),
            };
            if w + add <= self.width / 2 {
                w += add;
            }
            if w + 1 >= self.width / 2 {
                break;
            }
        }
        self.width - w
    }

    /// Put out a line of content.
    fn emit(&mut self, content: &Line) {
        let mut line = self.prefix(true);
        for s in &content.spans {
            line.push(&s.text, s.style);
        }
        self.out.push(line.trim_end().show(self.colour));
    }

    /// Before a block: the empty line that sets it apart, if one is due.
    fn start_block(&mut self) {
        self.end_inline();
        if std::mem::take(&mut self.gap) && !self.out.is_empty() {
            self.gap_line();
        }
    }

    /// An empty line between blocks (with the quotes' bars).
    fn gap_line(&mut self) {
        let line = self.prefix(false).trim_end().show(self.colour);
        self.out.push(line);
    }

    /// The inline content so far as lines (a tight list item's text, a
    /// paragraph's).
    fn end_inline(&mut self) {
        if self.inline.is_empty() {
            return;
        }
        let inline = std::mem::take(&mut self.inline);
        for l in wrap(&inline, self.room()) {
            self.emit(&l);
        }
    }

    /// Open `style`, on top of those open.
    fn push_style(&mut self, style: Style) {
        let s = self.style();
        self.styles.push(Style {
            bold: s.bold | style.bold,
            italic: s.italic | style.italic,
            strike: s.strike | style.strike,
            underline: s.underline | style.underline,
            dim: s.dim | style.dim,
            fg: style.fg.or(s.fg),
        });
    }

    fn event(&mut self, event: Event) {
        if let Some((_, code)) = &mut self.code {
            match event {
                Event::Text(t) => code.push_str(&t),
                Event::End(TagEnd::CodeBlock) => self.end_code(),
                _ => {}
            }
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t, self.style()),
            Event::Code(t) => {
                let mut st = self.style();
                st.fg = Some(36);
                self.text(&t, st);
            }
            Event::InlineMath(t) | Event::DisplayMath(t) => self.text(&t, self.style()),
            Event::Html(t) | Event::InlineHtml(t) => {
                // Shown as written, its lines kept.
                for piece in t.split_inclusive('\n') {
                    self.text(piece.trim_end_matches('\n'), self.style());
                    if piece.ends_with('\n') {
                        self.line_break();
                    }
                }
            }
            Event::FootnoteReference(t) => self.text(&format!("[^{t}]"), self.style()),
            Event::SoftBreak | Event::HardBreak => self.line_break(),
            Event::Rule => {
                self.start_block();
                let room = self.room();
                let rule = Line {
                    spans: vec![Span {
                        text: "─".repeat(room),
                        style: Style {
                            dim: true,
                            ..Style::default()
                        },
                    }],
                    width: room,
                };
                self.emit(&rule);
                self.gap = true;
            }
            Event::TaskListMarker(done) => {
                self.text(if done { "[x] " } else { "[ ] " }, Style::default())
            }
        }
    }

    fn start(&mut self, tag: Tag) {
        match tag {
            Tag::Paragraph => {
                // In an item of a list, a paragraph makes the list loose.
                if let Some(Container::Item { .. }) = self.stack.last() {
                    let list = self.stack.len().checked_sub(2);
                    if let Some(Container::List { loose, .. }) =
                        list.and_then(|n| self.stack.get_mut(n))
                    {
                        *loose = true;
                    }
                }
                self.start_block();
            }
            Tag::Heading { level, .. } => {
                self.start_block();
                self.push_style(Style {
                    bold: true,
                    underline: matches!(level, HeadingLevel::H1 | HeadingLevel::H2),
                    ..Style::default()
                });
            }
            Tag::BlockQuote(kind) => {
                self.start_block();
                self.stack.push(Container::Quote);
                // GitHub's `> [!NOTE]`: its kind, named on the first line.
                if let Some(kind) = kind {
                    let name = match kind {
                        BlockQuoteKind::Note => "Note",
                        BlockQuoteKind::Tip => "Tip",
                        BlockQuoteKind::Important => "Important",
                        BlockQuoteKind::Warning => "Warning",
                        BlockQuoteKind::Caution => "Caution",
                    };
                    let bold = Style {
                        bold: true,
                        ..Style::default()
                    };
                    let mut line = Line::default();
                    line.push(name, bold);
                    self.emit(&line);
                }
            }
            Tag::CodeBlock(kind) => {
                self.start_block();
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::HtmlBlock => self.start_block(),
            Tag::List(first) => {
                self.start_block();
                self.stack.push(Container::List {
                    next: first,
                    loose: false,
                });
                self.lists += 1;
            }
            Tag::Item => {
                self.end_inline();
                let depth = self.lists;
                let mut marker = "• ".to_owned();
                if let Some(Container::List { next, loose }) = self.stack.last_mut() {
                    if let Some(n) = next {
                        marker = format!("{n}. ");
                        *n = n.saturating_add(1);
                    } else {
                        marker = format!("{} ", ["•", "◦", "▪"][(depth.max(1) - 1) % 3]);
                    }
                    self.gap = *loose;
                }
                if std::mem::take(&mut self.gap) && !self.out.is_empty() {
                    self.gap_line();
                }
                self.stack.push(Container::Item {
                    marker,
                    pending: true,
                });
            }
            Tag::Table(align) => {
                self.start_block();
                self.table = Some(Table {
                    align,
                    rows: Vec::new(),
                });
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(t) = &mut self.table {
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(row) = self.table.as_mut().and_then(|t| t.rows.last_mut()) {
                    row.push(Vec::new());
                }
            }
            Tag::Emphasis => self.push_style(Style {
                italic: true,
                ..Style::default()
            }),
            Tag::Strong => self.push_style(Style {
                bold: true,
                ..Style::default()
            }),
            Tag::Strikethrough => self.push_style(Style {
                strike: true,
                ..Style::default()
            }),
            Tag::Superscript | Tag::Subscript => self.push_style(Style::default()),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                let at = self.sink().map_or(0, |s| s.len());
                self.links.push((dest_url.to_string(), at));
                self.push_style(Style {
                    underline: true,
                    fg: Some(34),
                    ..Style::default()
                });
            }
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => self.start_block(),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock => {
                self.end_inline();
                self.gap = true;
            }
            TagEnd::Heading(_) => {
                self.end_inline();
                self.styles.pop();
                self.gap = true;
            }
            TagEnd::BlockQuote(_) => {
                self.end_inline();
                self.stack.pop();
                self.gap = true;
            }
            TagEnd::CodeBlock => self.end_code(),
            TagEnd::List(_) => {
                self.end_inline();
                if let Some(Container::List { .. }) = self.stack.pop() {
                    self.lists -= 1;
                }
                self.gap = true;
            }
            TagEnd::Item => {
                self.end_inline();
                if let Some(Container::Item { pending: true, .. }) = self.stack.last() {
                    // An empty item: its marker alone.
                    self.emit(&Line::default());
                }
                self.stack.pop();
                self.gap = false;
            }
            TagEnd::Table => {
                if let Some(t) = self.table.take() {
                    self.table_lines(&t);
                }
                self.gap = true;
            }
            TagEnd::TableHead | TagEnd::TableRow | TagEnd::TableCell => {}
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript => {
                self.styles.pop();
            }
            TagEnd::Link | TagEnd::Image => {
                self.styles.pop();
                if let Some((url, at)) = self.links.pop() {
                    self.link_target(&url, at);
                }
            }
            TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => {
                self.end_inline();
                self.gap = true;
            }
        }
    }

    /// After a link's text (from `at` in the inline content): its
    /// destination, unless the text is it or it is within the page.
    fn link_target(&mut self, url: &str, at: usize) {
        let shown: String = self
            .sink()
            .map(|s| {
                s.iter()
                    .skip(at)
                    .flatten()
                    .map(|s| s.text.as_str())
                    .collect()
            })
            .unwrap_or_default();
        if url.is_empty() || url.starts_with('#') || shown == url || shown == escape_line(url) {
            return;
        }
        let dim = Style {
            dim: true,
            ..Style::default()
        };
        self.text(&format!(" ({url})"), dim);
    }

    /// A code block the parser gave whole (indented, or fenced inside a
    /// list or quote).
    fn end_code(&mut self) {
        let Some((lang, code)) = self.code.take() else {
            return;
        };
        let mut highlight = if self.colour {
            Highlight::new(&lang)
        } else {
            None
        };
        let room = self.room().saturating_sub(2);
        for line in code.lines() {
            for l in code_lines(room, &mut highlight, line) {
                let mut shown = Line::default();
                shown.push("  ", Style::default());
                for s in &l.spans {
                    shown.push(&s.text, s.style);
                }
                self.emit(&shown);
            }
        }
        self.gap = true;
    }

    /// A table's lines: its columns as wide as their widest cell, shrunk
    /// to fit the width (cells wrap); if the columns cannot each be
    /// [`MIN_COLUMN`] wide (or their widest cell's width, when less), a
    /// row at a time, each cell under its header's name.
    fn table_lines(&mut self, t: &Table) {
        let columns = t.rows.iter().map(Vec::len).max().unwrap_or(0);
        if columns == 0 {
            return;
        }
        let room = self.room();
        let sep = 3 * (columns - 1);
        let natural: Vec<usize> = (0..columns)
            .map(|k| {
                t.rows
                    .iter()
                    .filter_map(|r| r.get(k))
                    .map(inline_width)
                    .max()
                    .unwrap_or(0)
                    .max(1)
            })
            .collect();
        let least: usize = natural.iter().map(|n| (*n).min(MIN_COLUMN)).sum();
        if room < sep + least {
            return self.table_rows(t, columns);
        }
        let widths = fit_columns(&natural, room - sep);
        let bar = Style {
            dim: true,
            ..Style::default()
        };
        let bold = Style {
            bold: true,
            ..Style::default()
        };
        for (n, row) in t.rows.iter().enumerate() {
            let cells: Vec<Vec<Line>> = (0..columns)
                .map(|k| match row.get(k) {
                    Some(cell) if n == 0 => wrap(&restyle(cell, bold), widths[k]),
                    Some(cell) => wrap(cell, widths[k]),
                    None => vec![Line::default()],
                })
                .collect();
            let height = cells.iter().map(Vec::len).max().unwrap_or(1);
            for i in 0..height {
                let mut line = Line::default();
                for (k, cell) in cells.iter().enumerate() {
                    if k > 0 {
                        line.push(" │ ", bar);
                    }
                    let part = cell.get(i).cloned().unwrap_or_default();
                    let pad = widths[k].saturating_sub(part.width);
                    let (left, right) = match t.align.get(k) {
                        Some(Alignment::Right) => (pad, 0),
                        Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                        _ => (0, pad),
                    };
                    line.push(&" ".repeat(left), Style::default());
                    for s in &part.spans {
                        line.push(&s.text, s.style);
                    }
                    line.push(&" ".repeat(right), Style::default());
                }
                self.emit(&line);
            }
            if n == 0 && t.rows.len() > 1 {
                let mut line = Line::default();
                for (k, w) in widths.iter().enumerate() {
                    if k > 0 {
                        line.push("─┼─", bar);
                    }
                    line.push(&"─".repeat(*w), bar);
                }
                self.emit(&line);
            }
        }
    }

    /// A table too wide for its columns: each row as its cells, each
    /// under its header's name, rows set apart by an empty line.
    fn table_rows(&mut self, t: &Table, columns: usize) {
        let room = self.room();
        let header = t.rows.first();
        let bold = Style {
            bold: true,
            ..Style::default()
        };
        if t.rows.len() == 1 {
            for cell in &t.rows[0] {
                for l in wrap(&restyle(cell, bold), room) {
                    self.emit(&l);
                }
            }
        }
        for (n, row) in t.rows.iter().enumerate().skip(1) {
            if n > 1 {
                self.emit(&Line::default());
            }
            for k in 0..columns {
                let mut inline: Inline = Vec::new();
                if let Some(h) = header.and_then(|h| h.get(k)) {
                    inline.extend(restyle(h, bold));
                    inline.push(Some(Span {
                        text: ": ".into(),
                        style: bold,
                    }));
                }
                if let Some(cell) = row.get(k) {
                    inline.extend(cell.iter().cloned());
                }
                for l in wrap(&inline, room) {
                    self.emit(&l);
                }
            }
        }
    }
}

/// `cell` with `style` added to each span.
fn restyle(cell: &Inline, style: Style) -> Inline {
    cell.iter()
        .map(|s| {
            s.as_ref().map(|s| Span {
                text: s.text.clone(),
                style: Style {
                    bold: s.style.bold || style.bold,
                    ..s.style
                },
            })
        })
        .collect()
}

/// Columns `inline` takes on one line.
fn inline_width(inline: &Inline) -> usize {
    inline.iter().flatten().map(|s| columns(&s.text)).sum()
}

/// Column widths that fit `room` columns: as `natural` when they fit;
/// else the widest are cut to a common width, as wide as the room
/// allows (at least 1 each fits, the caller makes sure).
pub(crate) fn fit_columns(natural: &[usize], room: usize) -> Vec<usize> {
    if natural.iter().sum::<usize>() <= room {
        return natural.to_vec();
    }
    let used = |cap: usize| natural.iter().map(|n| (*n).min(cap)).sum::<usize>();
    // The widest common cap that fits, by bisection: used() grows with it.
    let (mut lo, mut hi) = (1usize, natural.iter().copied().max().unwrap_or(1));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if used(mid) <= room {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut widths: Vec<usize> = natural.iter().map(|n| (*n).min(lo)).collect();
    // What is left goes a column at a time to those that were cut.
    let mut left = room.saturating_sub(widths.iter().sum());
    for (w, n) in widths.iter_mut().zip(natural) {
        if left > 0 && *w < *n {
            *w += 1;
            left -= 1;
        }
    }
    widths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(colour: bool, width: usize, text: &str) -> String {
        Markdown::new(colour, width).whole(text)
    }

    /// `s` without SGR sequences.
    fn plain(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for d in chars.by_ref() {
                    if d == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    /// Every line of `shown` fits `width` display columns, and without
    /// colour there is no escape at all.
    fn fits(shown: &str, width: usize) {
        for line in shown.lines() {
            assert!(
                unicode_width::UnicodeWidthStr::width(plain(line).as_str()) <= width,
                "wider than {width}: {line:?}\n{shown}"
            );
        }
    }

    #[test]
    fn each_element_renders_without_its_marks() {
        let text = "# Title\n## Overview\nThis is **tiny**, *small*, ~~gone~~ and `a.rs`.\n\n- one\n- two\n  - inner\n\n1. first\n2. second\n\n- [x] done\n- [ ] todo\n\n> said\n> twice\n\n---\n\nSee [the docs](https://x.test/d) or <https://x.test>.";
        assert_eq!(
            render(false, 40, text),
            "Title\n\nOverview\n\nThis is tiny, small, gone and a.rs.\n\n• one\n• two\n  ◦ inner\n\n1. first\n2. second\n\n• [x] done\n• [ ] todo\n\n│ said\n│ twice\n\n────────────────────────────────────────\n\nSee the docs (https://x.test/d) or\nhttps://x.test.\n"
        );
        // Coloured: the same text, each part in its style.
        let coloured = render(true, 40, text);
        assert_eq!(plain(&coloured), render(false, 40, text));
        for styled in [
            "\x1b[1;4mTitle\x1b[0m",
            "\x1b[1mtiny\x1b[0m",
            "\x1b[3msmall\x1b[0m",
            "\x1b[9mgone\x1b[0m",
            "\x1b[36ma.rs\x1b[0m",
            "\x1b[2m│ \x1b[0msaid",
            "\x1b[4;34mthe docs\x1b[0m",
        ] {
            assert!(coloured.contains(styled), "{styled:?} in {coloured:?}");
        }
        // Loose list items are set apart; numbering keeps its start.
        assert_eq!(render(false, 40, "3. a\n\n4. b\n"), "3. a\n\n4. b\n");
        // HTML as written, its lines kept; GitHub's alerts named.
        assert_eq!(
            render(false, 40, "<div>\nhi\n</div>\n\n> [!WARNING]\n> careful"),
            "<div>\nhi\n</div>\n\n│ Warning\n│ careful\n"
        );
        // A lone marker stays as written; a line break stays one.
        assert_eq!(
            render(false, 80, "2 * 3 = 6, a ** b\nnext"),
            "2 * 3 = 6, a ** b\nnext\n"
        );
    }

    #[test]
    fn code_blocks_are_highlighted_when_coloured_and_plain_otherwise() {
        let text = "```rust\nfn main() {\n\tlet x = \"s\"; // note\n}\n```\nafter";
        assert_eq!(
            render(false, 40, text),
            "  fn main() {\n      let x = \"s\"; // note\n  }\n\nafter\n"
        );
        let coloured = render(true, 40, text);
        assert_eq!(plain(&coloured), render(false, 40, text));
        // Keywords, names, strings and comments each have their style,
        // in the terminal's own 16 colours.
        for styled in [
            "\x1b[1;31mfn\x1b[0m",
            "\x1b[1;35mmain\x1b[0m",
            "\x1b[34m\"s\"\x1b[0m",
            "\x1b[2;3m// note\x1b[0m",
        ] {
            assert!(coloured.contains(styled), "{styled:?} in {coloured:?}");
        }
        // A line too long to highlight: it and the rest of the block
        // plain.
        let long = format!(
            "```rust\nlet a = 1;\n// {}\nlet b = 2;\n```",
            "x".repeat(HIGHLIGHT_MAX_LINE)
        );
        let shown = render(true, 40, &long);
        assert!(shown.starts_with("  \x1b[1;31mlet\x1b[0m a"), "{shown:?}");
        assert!(shown.ends_with("\n  let b = 2;\n"), "{shown:?}");
        // Unknown language, or an indented block: plain even in colour.
        let unknown = render(true, 40, "```nosuchlang\nlet x = 1;\n```");
        assert_eq!(unknown, "  let x = 1;\n");
        assert_eq!(render(true, 40, "    let x = 1;"), "  let x = 1;\n");
        // Inside a list: laid out under the item.
        assert_eq!(
            render(false, 40, "- item\n\n  ```\n  code\n  ```"),
            "• item\n\n    code\n"
        );
    }

    #[test]
    fn what_the_parser_decodes_is_escaped_again() {
        let shown = render(true, 40, "a &#x1b;[2J b &#x9b;31m `&#x1b;` \u{202e}");
        assert!(
            !shown.contains("\x1b[2J") && !shown.contains('\u{9b}'),
            "{shown:?}"
        );
        assert!(shown.contains("^[[2J"), "{shown:?}");
        assert!(!shown.contains('\u{202e}'), "{shown:?}");
        for c in plain(&shown).chars() {
            assert!(!c.is_control() || c == '\n', "{c:?} in {shown:?}");
        }
    }

    #[test]
    fn tables_long_words_and_lines_fit_every_width() {
        let table = "| change | why | where |\n|---|:-:|--:|\n| renamed the port variable everywhere in the code base | clearer for readers | src/config/network/listener.rs |\n| x | y | z |";
        let long = "A paragraph with a verylongidentifierthatcannotpossiblyfitinanarrowterminalwindow and some words after it, 한국어 텍스트도 있습니다 넓은 문자.";
        let code = "```\nlet s = \"a string literal that is much longer than any of the widths tested here\";\n```";
        let quote = "> - a quoted list item whose text runs longer than the narrowest width";
        for width in [20, 40, 80] {
            for colour in [false, true] {
                for text in [table, long, code, quote] {
                    let shown = render(colour, width, text);
                    fits(&shown, width);
                    if !colour {
                        assert!(!shown.contains('\x1b'), "{shown:?}");
                    } else {
                        assert_eq!(plain(&shown), render(false, width, text));
                    }
                }
            }
        }
        // Wide enough: columns as wide as their widest cell.
        let small = "| a | bb |\n|---|---|\n| ccc | d |";
        assert_eq!(render(false, 80, small), "a   │ bb\n────┼───\nccc │ d\n");
        // At 40 the columns shrink and the cells wrap at words.
        let shown = render(false, 40, table);
        assert!(shown.contains("renamed"), "{shown}");
        assert!(!shown.contains('|'), "{shown}");
        assert!(
            shown.lines().all(|l| l.contains('│') || l.contains('┼')),
            "{shown}"
        );
        assert!(shown.lines().count() > 4, "the cells wrapped: {shown}");
        // At 20, three columns cannot fit: a row at a time.
        let shown = render(false, 20, table);
        assert!(shown.starts_with("change: renamed the\n"), "{shown}");
        assert!(shown.contains("\nwhere: z\n"), "{shown}");
        // A long word is cut at the width.
        let shown = render(false, 20, "verylongidentifierthatcannotfit");
        assert_eq!(shown, "verylongidentifierth\natcannotfit\n");
    }

    #[test]
    fn a_table_right_after_a_paragraph_is_one() {
        let text = "This is **tiny**.\n| change | why |\n|---|---|\n| port | clearer |";
        assert_eq!(
            render(false, 80, text),
            "This is tiny.\n\nchange │ why\n───────┼────────\nport   │ clearer\n"
        );
    }

    #[test]
    fn deep_nesting_and_long_blocks_are_shown_within_the_width() {
        let quotes = format!("{} deep", ">".repeat(5000));
        let lists: String = (0..300)
            .map(|i| format!("{}- n\n", "  ".repeat(i)))
            .collect();
        let brackets = format!("{}x{}", "[".repeat(5000), "*".repeat(5000));
        // Blocks that keep growing, line by line: each byte is parsed
        // again a few times at most, not once per line after it.
        let loose = "- a\n\n".repeat(10_000);
        let lazy = "- a\nplain\n===\n".repeat(5_000);
        let marks = format!("para\n{}", "#x\n=b\n".repeat(10_000));
        let fence = format!("  ```\n{}", "code\n\n".repeat(10_000));
        let rows = format!("| a | b |\n|---|---|\n{}", "| c | d |\n".repeat(10_000));
        for text in [quotes, lists, brackets, loose, lazy, rows, marks, fence] {
            for width in [20, 80] {
                let mut md = Markdown::new(false, width);
                let shown = md.whole(&text);
                fits(&shown, width);
                assert!(!shown.is_empty());
                assert!(
                    md.parsed <= 3 * text.len(),
                    "{} bytes parsed for {}",
                    md.parsed,
                    text.len()
                );
            }
        }
    }

    /// A word of 5 MB and lists 3,000 deep: shown whole, within the
    /// width (the layout's work per line is bounded by the width, per
    /// word by its length).
    #[test]
    fn a_huge_word_and_a_list_3000_deep_are_laid_out_whole() {
        let word = "w".repeat(5 << 20);
        let shown = render(false, 80, &word);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), word.len().div_ceil(80));
        assert!(lines.iter().all(|l| l.len() <= 80));
        assert_eq!(lines.concat(), word);
        // Styled, across two styles.
        let shown = render(
            true,
            80,
            &format!("**{}**{}", &word[..1 << 20], &word[..1 << 20]),
        );
        assert_eq!(plain(&shown).lines().map(str::len).sum::<usize>(), 2 << 20);
        fits(&shown, 80);

        let one_line = format!("{}n\n", "- ".repeat(3000));
        let indented: String = (0..3000)
            .map(|i| format!("{}- n{i}\n", "  ".repeat(i)))
            .collect();
        let quoted = format!("{}n\n", "> ".repeat(3000));
        // (The indented list is longer than what is held: past that it is
        // shown in parts, the later ones as indented code.)
        for (text, ns, one) in [
            (one_line, 1, true),
            (indented, 3000, false),
            (quoted, 1, true),
        ] {
            // (9 MB of indents: laid out at one width only.)
            let widths: &[usize] = if one { &[20, 80] } else { &[80] };
            for &width in widths {
                let shown = render(false, width, &text);
                fits(&shown, width);
                assert_eq!(shown.matches('n').count(), ns, "{shown}");
                if one {
                    // Nesting past half the width is not indented further.
                    let marks = [' ', '•', '◦', '▪', '│'];
                    let line = shown.lines().find(|l| l.ends_with('n')).unwrap();
                    let indent =
                        line.chars().count() - line.trim_start_matches(marks).chars().count();
                    assert!(indent <= width / 2 && indent >= width / 2 - 2, "{line:?}");
                }
            }
        }
    }

    /// The styles open cost nothing per piece of text: 3,000 nested
    /// emphases, each with text.
    #[test]
    fn deep_emphasis_is_shown_whole() {
        let text = format!("{}x{}", "*a _b ".repeat(1500), "_ a*".repeat(1500));
        let shown = render(false, 80, &text);
        fits(&shown, 80);
        assert_eq!(shown.matches('a').count(), 3000, "{shown}");
    }

    #[test]
    fn columns_shrink_to_the_room() {
        assert_eq!(fit_columns(&[5, 3], 10), vec![5, 3]);
        assert_eq!(fit_columns(&[30, 3, 30], 20), vec![9, 3, 8]);
        assert_eq!(fit_columns(&[100, 100], 10), vec![5, 5]);
        let w = fit_columns(&[1_000_000, 7, 2], 40);
        assert_eq!(w.iter().sum::<usize>(), 40);
        assert_eq!(&w[1..], &[7, 2]);
    }

    #[test]
    fn a_stream_shows_each_block_once_it_is_complete() {
        let mut md = Markdown::new(false, 40);
        // A heading is complete at once.
        assert_eq!(md.line("## Plan"), "Plan\n");
        // A paragraph waits for its blank line (or the next block).
        assert_eq!(md.line("First we look."), "");
        assert_eq!(md.line(""), "\nFirst we look.\n");
        // A table waits for its end.
        assert_eq!(md.line("| a | b |"), "");
        assert_eq!(md.line("|---|---|"), "");
        assert_eq!(md.line("| 1 | 2 |"), "");
        assert_eq!(md.line(""), "\na │ b\n──┼──\n1 │ 2\n");
        // A code block at the margin is shown a line at a time.
        assert_eq!(md.line("```rust"), "\n");
        assert_eq!(md.line("let a = 1;"), "  let a = 1;\n");
        assert_eq!(md.line("```"), "");
        // What a note in between shows leaves a code block open.
        assert_eq!(md.line("```"), "\n");
        assert_eq!(md.flush(), "");
        assert_eq!(md.line("# in code"), "  # in code\n");
        assert_eq!(md.line("```"), "");
        // A list waits for a block that is not part of it.
        assert_eq!(md.line("- one"), "");
        assert_eq!(md.line(""), "");
        assert_eq!(md.line("- two"), "");
        assert_eq!(md.line("Then"), "");
        assert_eq!(md.line(""), "");
        // (`Then` goes on the item before it, lazily.)
        assert_eq!(md.line("# End"), "\n• one\n\n• two\n  Then\n\nEnd\n");
        assert_eq!(md.flush(), "");
        // What is held is bounded: past it, shown as it parses then.
        let mut md = Markdown::new(false, 40);
        let mut shown = String::new();
        for _ in 0..HELD_LINES - 1 {
            shown.push_str(&md.line("- item"));
        }
        assert_eq!(shown, "");
        assert_eq!(md.line("- item").lines().count(), HELD_LINES);
        assert_eq!(md.flush(), "");
    }
}
