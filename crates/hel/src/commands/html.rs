//! `hel sessions export --format html`: one self-contained page of a
//! session for people to read in a browser, offline.
//!
//! The conversation is the transcripts' walk ([`transcript::walk`]) cut
//! into one section per answer (by the message counts its checkpoints
//! record), with the answer's tokens and the diff of the files its
//! instruction changed (`hel diff --at`'s, [`workspace::instruction_diff`]).
//! The session's forks (and theirs) follow as sections of the same page,
//! linked both ways with the answer they were forked at.
//!
//! Everything in the page comes from outside the process: every text is
//! shown as text. Control characters become visible escapes
//! ([`escape_text`]), then `& < > " '` entities; Markdown is rendered by a
//! writer of our own over pulldown-cmark's events that makes no element
//! from raw HTML (shown as text), no link (its target is shown as text
//! after it) and no image: the only `href`s are the page's own `#`
//! anchors, there is no `src` at all. The page has no script; its
//! Content-Security-Policy forbids scripts and every load, its style is
//! inline.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use hel_agent::text::escape_text;
use hel_secrets::Detector;
use hel_store::log::LogEntry;
use hel_store::{ObjectId, Record, SessionId, Store};
use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};
use serde_json::Value;
use syntect::easy::HighlightLines;

use super::transcript::{self, Part};
use super::workspace::{self, FileDiff};
use crate::exit::Exit;
use crate::render::markdown as md;

/// Bytes of one tool result, or of one call's arguments, the page shows
/// (the rest is counted).
const RESULT_MAX: usize = 64 * 1024;
/// Bytes of the diffs of one answer the page shows.
const DIFF_MAX: usize = 256 * 1024;
/// Bytes of one code block that are highlighted (a longer one is plain).
const HIGHLIGHT_MAX: usize = 64 * 1024;
/// Characters of a line that is highlighted.
const HIGHLIGHT_LINE_MAX: usize = 2000;
/// Forks shown (the first found; each one's conversation is held until
/// the page is written).
const FORKS_MAX: usize = 100;
/// Records walked back from a session's head to find where it was forked.
const FORK_WALK_MAX: usize = 100_000;

/// The policy of the page: nothing may load or run; only the page's own
/// inline style applies.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; \
script-src 'none'; connect-src 'none'; font-src 'none'; media-src 'none'; \
object-src 'none'; frame-src 'none'; form-action 'none'; base-uri 'none'";

const STYLE: &str = "\
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1f2328;background:#fff}
header dl{display:grid;grid-template-columns:max-content 1fr;gap:0 1rem;color:#59636e}
header dd{margin:0;font-family:ui-monospace,monospace;overflow-wrap:anywhere}
section.answer,section.open{border-top:1px solid #d1d9e0;margin-top:1.5rem;padding-top:.5rem}
section.fork{border-left:4px solid #8250df;padding-left:1rem;margin-top:2.5rem}
h2{font-size:1.05rem;margin:.5rem 0}
h2 .meta,.meta{color:#59636e;font-weight:normal;font-size:.85rem}
.msg{margin:.75rem 0;padding:.25rem .75rem;border-radius:6px}
.msg>.role{font-weight:600;font-size:.8rem;text-transform:uppercase;color:#59636e}
.user{background:#ddf4ff}
.assistant{background:#f6f8fa}
.other{background:#fff8c5}
pre{background:#f6f8fa;padding:.5rem;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere;font:13px/1.4 ui-monospace,monospace}
code{font-family:ui-monospace,monospace;font-size:.9em}
details{margin:.4rem 0;border:1px solid #d1d9e0;border-radius:6px;padding:.2rem .6rem}
summary{cursor:pointer;overflow-wrap:anywhere}
.tool summary code{color:#59636e}
.url,.raw{color:#59636e}
.cut{color:#59636e;font-style:italic}
.diff .add{background:#dafbe1}
.diff .del{background:#ffebe9}
.diff .hunk{color:#0969da}
.diff .file{font-weight:600}
nav.forks{margin:.5rem 0}
table{border-collapse:collapse}
td,th{border:1px solid #d1d9e0;padding:.2rem .5rem}
blockquote{border-left:3px solid #d1d9e0;margin-left:0;padding-left:1rem;color:#59636e}
";

/// `text` into `out` for HTML: control characters (and bidi overrides)
/// as visible escapes, then the five characters HTML gives a meaning.
fn esc(out: &mut String, text: &str) {
    entities(out, &escape_text(text));
}

/// `text` into `out` with the five characters HTML gives a meaning as
/// entities (nothing else changed: `text` is escaped already).
fn entities(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

fn escaped(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    esc(&mut s, text);
    s
}

/// A fork of the exported session (or of one of its forks) the page
/// shows as a section.
pub(super) struct Fork {
    pub session: SessionId,
    pub head: ObjectId,
    /// The checkpoint it was forked at.
    base: ObjectId,
    /// Its own records (not the history it was forked from), oldest first.
    own: Vec<LogEntry>,
    /// Its conversation at its head.
    messages: Vec<Value>,
}

/// Where `session` (whose head is `head`) was forked from, and its own
/// records' ids: None when it was not forked, or when its history cannot
/// be read (it is then left out).
fn fork_base(
    store: &Store,
    session: &SessionId,
    head: ObjectId,
) -> Option<(ObjectId, Vec<ObjectId>)> {
    let mut own = Vec::new();
    let mut at = head;
    for _ in 0..FORK_WALK_MAX {
        let cp = store.checkpoint(&at).ok()?;
        if cp.session_id != *session {
            return Some((at, own));
        }
        own.push(at);
        at = *cp.parents.first()?;
    }
    None
}

/// The forks of `session` made at its records in `shown` (its history up
/// to the exported checkpoint), and the forks of those, oldest first. A
/// fork made at a record of the history `session` was itself forked from
/// is that history's, not `session`'s: not shown.
pub(super) fn forks(
    store: &Store,
    session: &SessionId,
    shown: &[LogEntry],
) -> Result<Vec<Fork>, Exit> {
    let mut known: HashSet<ObjectId> = shown
        .iter()
        .filter(|e| e.session_id == *session)
        .map(|e| e.id)
        .collect();
    let mut candidates = Vec::new();
    for info in store.sessions()? {
        let Some(head) = info.head else { continue };
        if info.id == *session || info.broken.is_some() {
            continue;
        }
        if let Some((base, own)) = fork_base(store, &info.id, head) {
            candidates.push((info.id, head, base, own));
        }
    }
    let mut out: Vec<Fork> = Vec::new();
    loop {
        let before = out.len();
        let mut k = 0;
        while k < candidates.len() && out.len() < FORKS_MAX {
            if known.contains(&candidates[k].2) {
                let (id, head, base, own_ids) = candidates.swap_remove(k);
                // A fork that does not load is left out, said (the page is
                // the session's: a damaged fork does not stop it).
                let read = hel_store::log::log(store, &id).and_then(|log| {
                    let loaded = store.load(&head)?;
                    Ok((log, loaded.messages))
                });
                let (log, messages) = match read {
                    Ok(r) => r,
                    Err(e) => {
                        crate::render::line(&format!(
                            "hel: warning: fork {id} left out of the page: {}",
                            crate::exit::store_words(&e)
                        ));
                        continue;
                    }
                };
                known.extend(own_ids);
                let mut own: Vec<LogEntry> =
                    log.into_iter().take_while(|e| e.session_id == id).collect();
                own.reverse();
                out.push(Fork {
                    session: id,
                    head,
                    base,
                    own,
                    messages,
                });
            } else {
                k += 1;
            }
        }
        if out.len() == before {
            break;
        }
    }
    if candidates.iter().any(|c| known.contains(&c.2)) {
        crate::render::line(&format!(
            "hel: warning: the page shows the first {FORKS_MAX} forks of the session, not the others"
        ));
    }
    out.sort_by_key(|f| f.own.first().map(|e| e.time_ms).unwrap_or(0));
    Ok(out)
}

/// The page's facts and options.
pub(super) struct Page<'a> {
    pub title: &'a str,
    pub facts: &'a [(&'a str, String)],
    /// Masks what looks like a secret in the files' diffs (None: they are
    /// shown as stored, `--allow-secrets`).
    pub mask: Option<&'a Detector>,
}

/// Colours of highlighted code, as classes: one per colour used.
#[derive(Default)]
struct Colours {
    classes: HashMap<(u8, u8, u8), usize>,
}

impl Colours {
    fn class(&mut self, c: syntect::highlighting::Color) -> usize {
        let n = self.classes.len();
        *self.classes.entry((c.r, c.g, c.b)).or_insert(n)
    }

    fn css(&self) -> String {
        let mut rules: Vec<(usize, (u8, u8, u8))> =
            self.classes.iter().map(|(c, k)| (*k, *c)).collect();
        rules.sort();
        let mut s = String::new();
        for (k, (r, g, b)) in rules {
            let _ = writeln!(s, ".c{k}{{color:#{r:02x}{g:02x}{b:02x}}}");
        }
        s
    }
}

/// The writer of the page's body.
struct Writer<'a> {
    out: String,
    colours: Colours,
    mask: Option<&'a Detector>,
}

/// One history on the page: the exported session's, or a fork's own.
struct Line<'a> {
    /// The anchor prefix of its sections (`a`, `f1a`...).
    prefix: String,
    entries: &'a [LogEntry],
    messages: &'a [Value],
    /// The first message that is its own (a fork's: after its base's).
    from: usize,
    /// The session the line is of (records of another are marked).
    session: &'a SessionId,
}

/// The answers of a line and where each ends in its messages, oldest
/// first: going back from the newest, while the counts fall and stay
/// within `from..=len`. An answer from before a compaction (an older
/// answer whose count is not below the newer one's) ends the walk: the
/// messages it ended at are not in the conversation any more, and what
/// the compaction left opens the first section.
fn answers(entries: &[LogEntry], from: usize, len: usize) -> Vec<(&LogEntry, usize)> {
    let mut kept = Vec::new();
    let mut limit = len + 1;
    for e in entries.iter().rev() {
        if e.record != Record::Answer {
            continue;
        }
        let m = usize::try_from(e.messages).unwrap_or(usize::MAX);
        if m >= limit {
            if kept.is_empty() {
                continue;
            }
            // A compaction lies between: the answers before it are not
            // in the messages any more.
            break;
        }
        if m <= from {
            break;
        }
        kept.push((e, m));
        limit = m;
    }
    kept.reverse();
    kept
}

impl Writer<'_> {
    fn push(&mut self, s: &str) {
        self.out.push_str(s);
    }

    fn text(&mut self, s: &str) {
        esc(&mut self.out, s);
    }

    /// Markdown as HTML: see the module's doc for what it never makes.
    fn markdown(&mut self, text: &str) {
        let mut links: Vec<String> = Vec::new();
        let mut code: Option<(String, String)> = None;
        let mut table_head = false;
        for event in Parser::new_ext(text, md::options()) {
            if let Some((_, body)) = code.as_mut() {
                match event {
                    Event::Text(t) => {
                        body.push_str(&t);
                        continue;
                    }
                    Event::End(TagEnd::CodeBlock) => {}
                    _ => continue,
                }
            }
            match event {
                Event::Start(tag) => match tag {
                    Tag::Paragraph => self.push("<p>"),
                    Tag::Heading { level, .. } => {
                        let n = (level as usize + 2).min(6);
                        let _ = write!(self.out, "<h{n}>");
                    }
                    Tag::BlockQuote(_) => self.push("<blockquote>"),
                    Tag::CodeBlock(kind) => {
                        let lang = match kind {
                            CodeBlockKind::Fenced(info) => info.to_string(),
                            CodeBlockKind::Indented => String::new(),
                        };
                        code = Some((lang, String::new()));
                    }
                    Tag::HtmlBlock => self.push("<pre class=\"raw\">"),
                    Tag::List(Some(n)) => {
                        let _ = write!(self.out, "<ol start=\"{n}\">");
                    }
                    Tag::List(None) => self.push("<ul>"),
                    Tag::Item => self.push("<li>"),
                    Tag::FootnoteDefinition(label) => {
                        self.push("<div class=\"footnote\">[^");
                        self.text(&label);
                        self.push("]: ");
                    }
                    Tag::Table(_) => self.push("<table>"),
                    Tag::TableHead => {
                        table_head = true;
                        self.push("<thead><tr>");
                    }
                    Tag::TableRow => self.push("<tr>"),
                    Tag::TableCell => self.push(if table_head { "<th>" } else { "<td>" }),
                    Tag::Emphasis => self.push("<em>"),
                    Tag::Strong => self.push("<strong>"),
                    Tag::Strikethrough => self.push("<del>"),
                    Tag::Link { dest_url, .. } => {
                        links.push(dest_url.to_string());
                        self.push("<span class=\"link\">");
                    }
                    Tag::Image { dest_url, .. } => {
                        links.push(dest_url.to_string());
                        self.push("<span class=\"image\">[image: ");
                    }
                    _ => {}
                },
                Event::End(tag) => match tag {
                    TagEnd::Paragraph => self.push("</p>\n"),
                    TagEnd::Heading(level) => {
                        let n = (level as usize + 2).min(6);
                        let _ = writeln!(self.out, "</h{n}>");
                    }
                    TagEnd::BlockQuote(_) => self.push("</blockquote>\n"),
                    TagEnd::CodeBlock => {
                        if let Some((lang, body)) = code.take() {
                            self.code(&lang, &body);
                        }
                    }
                    TagEnd::HtmlBlock => self.push("</pre>\n"),
                    TagEnd::List(true) => self.push("</ol>\n"),
                    TagEnd::List(false) => self.push("</ul>\n"),
                    TagEnd::Item => self.push("</li>\n"),
                    TagEnd::FootnoteDefinition => self.push("</div>\n"),
                    TagEnd::Table => self.push("</tbody></table>\n"),
                    TagEnd::TableHead => {
                        table_head = false;
                        self.push("</tr></thead><tbody>\n");
                    }
                    TagEnd::TableRow => self.push("</tr>\n"),
                    TagEnd::TableCell => self.push(if table_head { "</th>" } else { "</td>" }),
                    TagEnd::Emphasis => self.push("</em>"),
                    TagEnd::Strong => self.push("</strong>"),
                    TagEnd::Strikethrough => self.push("</del>"),
                    TagEnd::Link => {
                        let url = links.pop().unwrap_or_default();
                        self.push("</span> <span class=\"url\">(");
                        self.text(&url);
                        self.push(")</span>");
                    }
                    TagEnd::Image => {
                        let url = links.pop().unwrap_or_default();
                        self.push(" (");
                        self.text(&url);
                        self.push(")]</span>");
                    }
                    _ => {}
                },
                Event::Text(t) => self.text(&t),
                Event::Code(t) | Event::InlineMath(t) | Event::DisplayMath(t) => {
                    self.push("<code>");
                    self.text(&t);
                    self.push("</code>");
                }
                // Raw HTML is text like any other.
                Event::Html(t) | Event::InlineHtml(t) => self.text(&t),
                Event::FootnoteReference(label) => {
                    self.push("[^");
                    self.text(&label);
                    self.push("]");
                }
                Event::SoftBreak => self.push("\n"),
                Event::HardBreak => self.push("<br>\n"),
                Event::Rule => self.push("<hr>\n"),
                Event::TaskListMarker(done) => self.push(if done { "[x] " } else { "[ ] " }),
            }
        }
        // A block left open (the text ended inside it) still shows.
        if let Some((lang, body)) = code.take() {
            self.code(&lang, &body);
        }
    }

    /// A code block, highlighted when syntect knows its language and it
    /// is not too long.
    fn code(&mut self, info: &str, body: &str) {
        self.push("<pre><code>");
        let body = escape_text(body.strip_suffix('\n').unwrap_or(body));
        let lang = info.split([',', ' ', '\t', '{']).next().unwrap_or("");
        let highlighter = (!lang.is_empty() && body.len() <= HIGHLIGHT_MAX)
            .then(|| md::syntaxes().find_syntax_by_token(lang))
            .flatten()
            .zip(md::theme())
            .map(|(syntax, theme)| HighlightLines::new(syntax, theme));
        match highlighter {
            Some(mut h) => {
                // Pieces of one colour in a row share one span.
                let mut open: Option<usize> = None;
                for line in body.split_inclusive('\n') {
                    let regions = if line.len() <= HIGHLIGHT_LINE_MAX {
                        h.highlight_line(line, md::syntaxes()).ok()
                    } else {
                        None
                    };
                    match regions {
                        Some(regions) => {
                            for (style, piece) in regions {
                                let k = self.colours.class(style.foreground);
                                if open != Some(k) {
                                    if open.is_some() {
                                        self.push("</span>");
                                    }
                                    let _ = write!(self.out, "<span class=\"c{k}\">");
                                    open = Some(k);
                                }
                                // Already escaped for control characters.
                                self.entities(piece);
                            }
                        }
                        None => {
                            if open.take().is_some() {
                                self.push("</span>");
                            }
                            self.entities(line);
                        }
                    }
                }
                if open.is_some() {
                    self.push("</span>");
                }
            }
            None => self.entities(&body),
        }
        self.push("</code></pre>\n");
    }

    /// `text` with no control character left (already through
    /// [`escape_text`]) with HTML's five characters as entities.
    fn entities(&mut self, text: &str) {
        entities(&mut self.out, text);
    }

    /// Text in a `<pre>`, cut at `max` bytes with a count of the rest.
    fn pre(&mut self, text: &str, max: usize) {
        self.push("<pre>");
        let mut end = text.len().min(max);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.text(&text[..end]);
        self.push("</pre>\n");
        if end < text.len() {
            let _ = writeln!(
                self.out,
                "<p class=\"cut\">… {} more not shown (hel sessions export --format md has it whole)</p>",
                crate::render::count((text.len() - end) as u64, "byte", "bytes")
            );
        }
    }

    /// A tool call and its result (when the conversation has it), folded.
    fn call(&mut self, c: &transcript::Call<'_>, result: Option<&str>) {
        self.push("<details class=\"tool\"><summary>tool call <strong>");
        self.text(c.name);
        self.push("</strong> <code>");
        let flat = c.arguments.split_whitespace().collect::<Vec<_>>().join(" ");
        let short: String = flat.chars().take(100).collect();
        self.text(&short);
        if short.len() < flat.len() {
            self.push("…");
        }
        self.push("</code></summary>\n");
        // Arguments are cut as results are (a file written whole is in
        // the diff below as well).
        let arguments = transcript::pretty_arguments(c.arguments);
        if arguments.len() > RESULT_MAX {
            self.pre(&arguments, RESULT_MAX);
        } else {
            self.code("json", &arguments);
        }
        match result {
            Some(r) => {
                self.push("<div class=\"meta\">result</div>\n");
                self.pre(r, RESULT_MAX);
            }
            None => self.push("<p class=\"meta\">no result recorded</p>\n"),
        }
        self.push("</details>\n");
    }

    /// The messages `range` of a line, the tool results inside their calls.
    fn messages(&mut self, messages: &[Value], range: std::ops::Range<usize>) {
        let parts: Vec<(usize, Part<'_>)> = transcript::walk(messages)
            .skip(range.start)
            .take(range.len())
            .collect();
        // Each call's result: the first one after it with its id (ids
        // may be used again in later rounds).
        let mut results: HashMap<&str, std::collections::VecDeque<usize>> = HashMap::new();
        for (k, (_, p)) in parts.iter().enumerate() {
            if let Part::Result { id, .. } = p {
                if !id.is_empty() {
                    results.entry(id).or_default().push_back(k);
                }
            }
        }
        let mut placed: HashSet<usize> = HashSet::new();
        for (k, (_, p)) in parts.iter().enumerate() {
            match p {
                Part::System(body) => {
                    self.push("<details class=\"system\"><summary>System prompt</summary>\n");
                    self.pre(body, usize::MAX);
                    self.push("</details>\n");
                }
                Part::Message { role, body, calls } => {
                    let class = match *role {
                        "user" => "user",
                        "assistant" => "assistant",
                        _ => "other",
                    };
                    let _ = write!(self.out, "<div class=\"msg {class}\"><div class=\"role\">");
                    self.text(role);
                    self.push("</div>\n");
                    if !body.trim().is_empty() {
                        self.markdown(body);
                    }
                    for c in calls {
                        let mut result = None;
                        if let Some(queue) = results.get_mut(c.id) {
                            while queue.front().is_some_and(|&r| r < k) {
                                queue.pop_front();
                            }
                            if let Some(r) = queue.pop_front() {
                                placed.insert(r);
                                if let Part::Result { body, .. } = &parts[r].1 {
                                    result = Some(body.as_str());
                                }
                            }
                        }
                        self.call(c, result);
                    }
                    self.push("</div>\n");
                }
                Part::Result { name, body, .. } => {
                    if placed.contains(&k) {
                        continue;
                    }
                    self.push("<details class=\"tool\"><summary>tool result <strong>");
                    self.text(name);
                    self.push("</strong></summary>\n");
                    self.pre(body, RESULT_MAX);
                    self.push("</details>\n");
                }
            }
        }
    }

    /// The files the instruction of `answer` changed, as `hel diff --at`
    /// shows them.
    fn diff(&mut self, store: &Store, answer: &ObjectId) -> Result<(), Exit> {
        // Files that cannot be read are said in their place: the page is
        // the conversation's first.
        let files = match workspace::instruction_diff(store, answer) {
            Ok(Some(files)) => files,
            Ok(None) => return Ok(()),
            Err(e) => {
                self.push("<p class=\"cut\">the files' changes could not be read: ");
                self.text(&e.to_string());
                self.push("</p>\n");
                crate::render::line(&format!(
                    "hel: warning: the changes of checkpoint {} are not on the page: {e}",
                    &answer.to_hex()[..12]
                ));
                return Ok(());
            }
        };
        if files.is_empty() {
            self.push("<p class=\"meta\">no file changed</p>\n");
            return Ok(());
        }
        let _ = writeln!(
            self.out,
            "<details class=\"diff\" open><summary>{} changed</summary>",
            crate::render::count(files.len() as u64, "file", "files")
        );
        let mut left = DIFF_MAX;
        for FileDiff {
            letter,
            name,
            text,
            binary,
        } in &files
        {
            let _ = write!(self.out, "<div class=\"file\">{letter} ");
            // The name is escaped for control characters already.
            self.entities(name);
            self.push("</div>\n");
            if *binary {
                self.push("<p class=\"meta\">binary</p>\n");
            }
            let Some(text) = text else { continue };
            if text.is_empty() {
                continue;
            }
            if text.len() > left {
                // `hel diff` takes the session that wrote the answer.
                let session = store.checkpoint(answer).map_or("SESSION".to_owned(), |c| {
                    c.session_id.as_str()[..8].to_owned()
                });
                let _ = writeln!(
                    self.out,
                    "<p class=\"cut\">diff not shown: {} (hel diff {session} --at {} shows it)</p>",
                    crate::render::count(text.len() as u64, "byte", "bytes"),
                    &answer.to_hex()[..12]
                );
                continue;
            }
            left -= text.len();
            let text = match self.mask {
                Some(d) => d.mask(text),
                None => std::borrow::Cow::Borrowed(text.as_str()),
            };
            self.push("<pre class=\"diff\">");
            for (k, line) in text.split_inclusive('\n').enumerate() {
                let class = if k < 2 && (line.starts_with("--- ") || line.starts_with("+++ ")) {
                    "file"
                } else if line.starts_with('+') {
                    "add"
                } else if line.starts_with('-') {
                    "del"
                } else if line.starts_with("@@") {
                    "hunk"
                } else {
                    ""
                };
                if class.is_empty() {
                    self.entities(line);
                } else {
                    let _ = write!(self.out, "<span class=\"{class}\">");
                    self.entities(line);
                    self.push("</span>");
                }
            }
            self.push("</pre>\n");
        }
        self.push("</details>\n");
        Ok(())
    }

    /// The sections of one line: one per answer, and one for messages
    /// after the last answer. `anchors` gets the anchor of each of its
    /// records (the section of the answer at or before it); `forks_at`
    /// names the forks made at each record, linked from its section.
    fn line(
        &mut self,
        store: &Store,
        line: &Line<'_>,
        anchors: &mut HashMap<ObjectId, String>,
        forks_at: &HashMap<ObjectId, Vec<(String, String)>>,
    ) -> Result<(), Exit> {
        let len = line.messages.len();
        let answers = answers(line.entries, line.from, len);
        let open = answers.last().map_or(line.from, |(_, end)| *end) < len;
        let sections = answers.len() + usize::from(open);
        // Each section's records, for the forks made at them.
        let mut members: Vec<Vec<ObjectId>> = vec![Vec::new(); sections.max(1)];
        let mut k = 0usize;
        for e in line.entries {
            if answers.get(k).is_some_and(|(a, _)| a.id == e.id) {
                k += 1;
            }
            let section = k.saturating_sub(1);
            members[section].push(e.id);
            anchors.insert(e.id, format!("{}{}", line.prefix, section + 1));
        }
        let mut start = line.from;
        for (n, (e, end)) in answers.iter().enumerate() {
            let anchor = format!("{}{}", line.prefix, n + 1);
            let _ = write!(
                self.out,
                "<section class=\"answer\" id=\"{anchor}\"><h2><a href=\"#{anchor}\">Answer {}</a> <span class=\"meta\">",
                n + 1
            );
            self.text(&e.time);
            let _ = write!(
                self.out,
                " · {} tokens in · {} out · checkpoint {}",
                e.input_tokens,
                e.output_tokens,
                &e.id.to_hex()[..12]
            );
            if e.session_id != *line.session {
                let _ = write!(self.out, " · session {}", &e.session_id.as_str()[..8]);
            }
            self.push("</span></h2>\n");
            self.messages(line.messages, start..*end);
            if e.workspace.is_some() {
                self.diff(store, &e.id)?;
            }
            self.fork_links(&members[n], forks_at);
            self.push("</section>\n");
            start = *end;
        }
        if open {
            let anchor = format!("{}{}", line.prefix, answers.len() + 1);
            let _ = writeln!(
                self.out,
                "<section class=\"open\" id=\"{anchor}\"><h2>Not answered <span class=\"meta\">(interrupted, or the answer was not saved)</span></h2>"
            );
            self.messages(line.messages, start..len);
        }
        if open || sections == 0 {
            self.fork_links(&members[sections.saturating_sub(1)], forks_at);
        }
        if open {
            self.push("</section>\n");
        }
        Ok(())
    }

    /// Links to the forks made at `records`.
    fn fork_links(
        &mut self,
        records: &[ObjectId],
        forks_at: &HashMap<ObjectId, Vec<(String, String)>>,
    ) {
        let links: Vec<&(String, String)> = records
            .iter()
            .filter_map(|r| forks_at.get(r))
            .flatten()
            .collect();
        if links.is_empty() {
            return;
        }
        self.push("<nav class=\"forks\">Forked here: ");
        for (k, (target, label)) in links.into_iter().enumerate() {
            if k > 0 {
                self.push(", ");
            }
            let _ = write!(self.out, "<a href=\"#{target}\">");
            self.entities(label);
            self.push("</a>");
        }
        self.push("</nav>\n");
    }
}

/// The page: the exported conversation (`messages`, its records
/// `entries` oldest first), then each fork of `forks` as a section of its
/// own.
pub(super) fn page(
    store: &Store,
    session: &SessionId,
    entries: &[LogEntry],
    messages: &[Value],
    forks: &[Fork],
    page: &Page<'_>,
) -> Result<String, Exit> {
    let mut w = Writer {
        out: String::new(),
        colours: Colours::default(),
        mask: page.mask,
    };
    // Each fork's anchor and label, and where it was made.
    let names = hel_store::names::all(store).unwrap_or_default();
    let label = |s: &SessionId| match names.get(s) {
        Some(n) => escape_text(n).into_owned(),
        None => s.as_str()[..8].to_owned(),
    };
    let mut forks_at: HashMap<ObjectId, Vec<(String, String)>> = HashMap::new();
    for (k, f) in forks.iter().enumerate() {
        forks_at
            .entry(f.base)
            .or_default()
            .push((format!("f{}", k + 1), format!("fork {}", label(&f.session))));
    }
    let mut anchors: HashMap<ObjectId, String> = HashMap::new();
    let main = Line {
        prefix: "a".into(),
        entries,
        messages,
        from: 0,
        session,
    };
    w.line(store, &main, &mut anchors, &forks_at)?;
    for (k, f) in forks.iter().enumerate() {
        let from = store
            .checkpoint(&f.base)
            .map(|cp| cp.summary.messages)
            .ok()
            .and_then(|m| usize::try_from(m).ok())
            .unwrap_or(0)
            .min(f.messages.len());
        let id = format!("f{}", k + 1);
        let _ = write!(
            w.out,
            "<section class=\"fork\" id=\"{id}\"><h2><a href=\"#{id}\">Fork "
        );
        w.entities(&label(&f.session));
        let _ = write!(w.out, "</a> <span class=\"meta\">session {}", f.session);
        w.push("</span></h2>\n<p class=\"meta\">Forked from ");
        match anchors.get(&f.base) {
            Some(a) => {
                let _ = write!(
                    w.out,
                    "<a href=\"#{a}\">checkpoint {}</a>",
                    &f.base.to_hex()[..12]
                );
            }
            None => {
                let _ = write!(w.out, "checkpoint {}", &f.base.to_hex()[..12]);
            }
        }
        w.push("; the conversation before it is the one above.</p>\n");
        let line = Line {
            prefix: format!("{id}a"),
            entries: &f.own,
            messages: &f.messages,
            from,
            session: &f.session,
        };
        w.line(store, &line, &mut anchors, &forks_at)?;
        w.push("</section>\n");
    }
    let mut html = String::with_capacity(w.out.len() + 8192);
    html.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    let _ = writeln!(
        html,
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
    );
    html.push_str("<meta name=\"referrer\" content=\"no-referrer\">\n");
    html.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    html.push_str("<title>");
    esc(&mut html, page.title);
    html.push_str("</title>\n<style>\n");
    html.push_str(STYLE);
    html.push_str(&w.colours.css());
    html.push_str("</style>\n</head>\n<body>\n<header><h1>");
    esc(&mut html, page.title);
    html.push_str("</h1>\n<dl>\n");
    for (k, v) in page.facts {
        let _ = write!(html, "<dt>{}</dt><dd>", escaped(k));
        esc(&mut html, v);
        html.push_str("</dd>\n");
    }
    html.push_str("</dl>\n");
    if !forks.is_empty() {
        html.push_str("<nav class=\"forks\">Forks: ");
        for (k, f) in forks.iter().enumerate() {
            if k > 0 {
                html.push_str(", ");
            }
            let _ = write!(html, "<a href=\"#f{}\">", k + 1);
            esc(&mut html, &label(&f.session));
            html.push_str("</a>");
        }
        html.push_str("</nav>\n");
    }
    html.push_str("</header>\n<main>\n");
    html.push_str(&w.out);
    html.push_str("</main>\n</body>\n</html>\n");
    Ok(html)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(text: &str) -> String {
        let mut w = Writer {
            out: String::new(),
            colours: Colours::default(),
            mask: None,
        };
        w.markdown(text);
        w.out
    }

    #[test]
    fn markdown_makes_no_element_from_the_text() {
        let h = rendered(
            "hi <script>alert(1)</script> <img src=x onerror=alert(2)>\n\n\
             <div onclick=\"x\">block</div>\n\n[click](javascript:alert(3)) ![i](http://example.com/i.png)\n\n\
             \u{1b}]8;;http://evil\u{7}osc\u{1b}]8;;\u{7} `code`\n\n```rust\nfn main() { let s = \"<b>\"; }\n```\n",
        );
        for bad in [
            "<script",
            "<img",
            "<div",
            "href=\"javascript",
            "src=\"",
            "<a ",
            "onerror=\"",
        ] {
            assert!(!h.contains(bad), "{bad} in {h}");
        }
        assert!(h.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{h}");
        assert!(h.contains("(javascript:alert(3))"), "{h}");
        assert!(h.contains("^[]8;;http://evil^Gosc"), "{h}");
        assert!(!h.contains('\u{1b}') && !h.contains('\u{7}'), "{h}");
        assert!(h.contains("<code>code</code>"), "{h}");
        // Highlighted: the string has a class of its own.
        assert!(h.contains("<span class=\"c"), "{h}");
        assert!(h.contains("&quot;&lt;b&gt;&quot;"), "{h}");
    }

    #[test]
    fn a_long_text_is_cut_on_a_character_with_a_count() {
        let mut w = Writer {
            out: String::new(),
            colours: Colours::default(),
            mask: None,
        };
        w.pre("ab€<d", 3);
        assert!(w.out.starts_with("<pre>ab</pre>\n"), "{}", w.out);
        assert!(w.out.contains("… 5 bytes more not shown"), "{}", w.out);
    }

    #[test]
    fn each_call_gets_the_result_after_it_when_ids_are_used_again() {
        let call = |args: &str| {
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": args}}]})
        };
        let result = |text: &str| serde_json::json!({"role": "tool", "tool_call_id": "call_0", "content": text});
        let messages = [
            call("{\"command\":\"first\"}"),
            result("FIRST OUT"),
            call("{\"command\":\"second\"}"),
            result("SECOND OUT"),
        ];
        let mut w = Writer {
            out: String::new(),
            colours: Colours::default(),
            mask: None,
        };
        w.messages(&messages, 0..4);
        let first = w.out.find("first").unwrap();
        let first_out = w.out.find("FIRST OUT").unwrap();
        let second = w.out.find("second").unwrap();
        let second_out = w.out.find("SECOND OUT").unwrap();
        assert!(
            first < first_out && first_out < second && second < second_out,
            "{}",
            w.out
        );
        assert_eq!(w.out.matches("OUT").count(), 2, "{}", w.out);
        assert!(!w.out.contains("tool result"), "{}", w.out);
    }

    fn entry(n: u8, record: Record, messages: u64) -> LogEntry {
        LogEntry {
            id: ObjectId::from_bytes([n; 32]),
            session_id: SessionId::new_random(),
            time_ms: 0,
            time: String::new(),
            messages,
            instruction: String::new(),
            input_tokens: 0,
            output_tokens: 0,
            fork_point: false,
            record,
            workspace: None,
            parent: None,
            cwd: String::new(),
        }
    }

    #[test]
    fn answers_follow_rising_message_counts() {
        assert!(answers(&[], 0, 3).is_empty());
        let e = [
            entry(1, Record::Answer, 3),
            entry(2, Record::Start, 3),
            entry(3, Record::Answer, 7),
            entry(4, Record::Answer, 11),
            // A compaction: the conversation is 4 messages from here on.
            entry(5, Record::Answer, 4),
            entry(6, Record::Answer, 6),
        ];
        let ends = |from, len| -> Vec<(u8, usize)> {
            answers(&e, from, len)
                .iter()
                .map(|(a, m)| (a.id.as_bytes()[0], *m))
                .collect()
        };
        assert_eq!(ends(0, 6), [(5, 4), (6, 6)]);
        // Up to the third answer (before the compaction), and a fork's
        // part: only what follows `from`.
        assert_eq!(answers(&e[..4], 0, 11).len(), 3);
        assert_eq!(
            answers(&e[..4], 3, 11)
                .iter()
                .map(|(_, m)| *m)
                .collect::<Vec<_>>(),
            [7, 11]
        );
    }
}
