//! Answers on stdout, shown as they arrive when stdout is a terminal.

use std::cell::RefCell;
use std::io::{IsTerminal, Write};

use hel_agent::text::escape_text;
use hel_agent::{Event, Observer};

use super::markdown::Markdown;
use super::Stderr;
use crate::cli::Intro;

/// Renders a run's events as [`Stderr`] does and prints its answers
/// ([`Live::answer`]). When stdout is a terminal, each turn's text is
/// shown on stdout as it arrives: the model's reasoning as it streams,
/// set apart (marked `thinking:` at its start, dimmed when coloured), the
/// text of a response that goes on to call tools is then marked as the
/// model's working notes, and text of a response that breaks off is
/// followed by a line saying the answer is incomplete and was not saved.
/// Otherwise stdout carries only completed answers, byte for byte, after
/// they were saved (reasoning is not shown).
pub struct Live {
    out: RefCell<Box<dyn Write>>,
    err: RefCell<Box<dyn Write>>,
    terminal: bool,
    state: RefCell<Shown>,
    /// What the line after `session: <uuid>` says of the run.
    intro: RefCell<Option<Intro>>,
}

/// What is on the terminal of the current response.
#[derive(Default)]
struct Shown {
    /// Some of its text is shown.
    text: bool,
    /// The last line shown has no end yet.
    open: bool,
    /// A CR that ended the last piece, held back: with an LF next it is a
    /// line end, alone it is shown escaped.
    cr: bool,
    /// It completed as the answer, all shown.
    answer: bool,
    /// Its last line was ended early, for a note on stderr.
    ended: bool,
    /// Text of a line not complete yet (escaped), held until its end: a
    /// line is rendered as Markdown once it is whole. It holds no line
    /// end, so only what a piece adds is searched for one.
    pending: String,
    /// Bytes searched for a line end, over the response (the work of a
    /// long line arriving in many pieces is its length, not its square).
    searched: usize,
    /// The Markdown state of the response (None until its first text).
    md: Option<Markdown>,
    /// Its reasoning is being shown (ended by anything else).
    thinking: bool,
    /// The last line of the reasoning shown has no end yet.
    thinking_open: bool,
}

impl Default for Live {
    fn default() -> Live {
        Live::new()
    }
}

impl Live {
    /// On the process's stdout and stderr.
    pub fn new() -> Live {
        let terminal = std::io::stdout().is_terminal();
        Live::with(
            Box::new(std::io::stdout()),
            Box::new(std::io::stderr()),
            terminal,
        )
    }

    /// On `out` and `err`; `terminal`: `out` is a terminal.
    pub fn with(out: Box<dyn Write>, err: Box<dyn Write>, terminal: bool) -> Live {
        Live {
            out: RefCell::new(out),
            err: RefCell::new(err),
            terminal,
            state: RefCell::new(Shown::default()),
            intro: RefCell::new(None),
        }
    }

    /// Say `intro` of the run in the line after `session: <uuid>`.
    pub fn introduce(&self, intro: Intro) {
        *self.intro.borrow_mut() = Some(intro);
    }

    /// Print a completed (and saved) answer: on a terminal, escaped and
    /// rendered as Markdown, unless it was shown as it arrived (then its
    /// line is ended); elsewhere byte for byte. Either way followed by a
    /// newline, as the same answer not streamed would be.
    pub fn answer(&self, answer: &str) {
        let shown = std::mem::take(&mut *self.state.borrow_mut());
        let mut out = self.out.borrow_mut();
        // A closed stdout is no reason for a run to stop.
        let _ = match (self.terminal, shown.answer) {
            (true, true) if shown.ended => Ok(()),
            (true, true) => writeln!(out),
            (true, false) => {
                let mut text = markdown().whole(&escape_text(answer));
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                write!(out, "{text}")
            }
            (false, _) => writeln!(out, "{answer}"),
        };
        let _ = out.flush();
    }

    /// Show a piece of text as it arrived: each line once it is whole,
    /// rendered as Markdown.
    fn text(&self, piece: &str) {
        let mut s = self.state.borrow_mut();
        let mut text = String::with_capacity(piece.len() + 1);
        if std::mem::take(&mut s.cr) {
            text.push('\r');
        }
        text.push_str(piece);
        if text.ends_with('\r') {
            text.pop();
            s.cr = true;
        }
        if text.is_empty() {
            return;
        }
        let s = &mut *s;
        s.text = true;
        let mut at = s.pending.len();
        s.pending.push_str(&escape_text(&text));
        s.searched += s.pending.len() - at;
        let mut shown = String::new();
        let mut start = 0;
        while let Some(off) = s.pending[at..].find('\n') {
            let end = at + off;
            let md = s.md.get_or_insert_with(markdown);
            shown.push_str(&md.line(&s.pending[start..end]));
            start = end + 1;
            at = start;
        }
        s.pending.drain(..start);
        s.open = !s.pending.is_empty();
        let mut out = self.out.borrow_mut();
        let _ = write!(out, "{shown}");
        let _ = out.flush();
    }

    /// Show a piece of the model's reasoning as it arrives: marked at the
    /// start of a block of it, dimmed on a coloured terminal, escaped (CRs
    /// dropped: nothing may overwrite a line).
    fn reasoning(&self, piece: &str) {
        let text = piece.replace('\r', "");
        if text.is_empty() {
            return;
        }
        let colour = super::colour_for(true);
        let mut s = self.state.borrow_mut();
        let mut shown = String::new();
        if !s.thinking {
            if s.open || s.cr || !s.pending.is_empty() || s.md.as_ref().is_some_and(Markdown::holds)
            {
                // Text begun (or held until its block is complete):
                // shown, its line ended, before the reasoning.
                shown.push_str(&Self::held(&mut s, true));
                s.open = false;
            }
            shown.push_str(&super::paint(colour, "2;3", "thinking:"));
            shown.push(' ');
            s.thinking = true;
        }
        let safe = escape_text(&text);
        shown.push_str(&super::paint(colour, "2", &safe));
        s.thinking_open = !safe.ends_with('\n');
        let mut out = self.out.borrow_mut();
        let _ = write!(out, "{shown}");
        let _ = out.flush();
    }

    /// End the reasoning shown, if any: its last line, so what follows
    /// starts on a line of its own.
    fn end_thinking(&self) {
        let mut s = self.state.borrow_mut();
        if std::mem::take(&mut s.thinking) && std::mem::take(&mut s.thinking_open) {
            let mut out = self.out.borrow_mut();
            let _ = writeln!(out);
            let _ = out.flush();
        }
    }

    /// What is held back of the response (a line not ended, a table, a
    /// CR), rendered, its last line ended when `end` (else the caller
    /// ends it). Empty when nothing is held.
    fn held(s: &mut Shown, end: bool) -> String {
        if std::mem::take(&mut s.cr) {
            s.pending.push_str(&escape_text("\r"));
        }
        let rest = std::mem::take(&mut s.pending);
        let md = s.md.get_or_insert_with(markdown);
        let mut shown = String::new();
        if !rest.is_empty() {
            shown.push_str(&md.line(&rest));
        }
        // A table the last line ended (or was part of).
        shown.push_str(&md.flush());
        if !end && shown.ends_with('\n') {
            shown.pop();
        }
        shown
    }

    /// Show what is held back and end the open line.
    fn end_line(&self) {
        let mut s = self.state.borrow_mut();
        let mut out = self.out.borrow_mut();
        let shown = Self::held(&mut s, true);
        if !shown.is_empty() {
            let _ = write!(out, "{shown}");
            s.ended = true;
        }
        s.open = false;
        let _ = out.flush();
    }

    fn note(&self, text: &str) {
        let mut err = self.err.borrow_mut();
        let _ = writeln!(err, "{text}");
        let _ = err.flush();
    }
}

impl Observer for Live {
    fn event(&self, event: Event) {
        if let Event::Project {
            root,
            found,
            instructions,
        } = &event
        {
            super::tool::set_root(root.as_deref());
            let intro = self.intro.borrow();
            if let Some(text) =
                super::start_line(intro.as_ref(), root.as_deref(), *found, instructions)
            {
                super::line(&text);
            }
            return;
        }
        if !self.terminal {
            return Stderr.event(event);
        }
        if let Event::ReasoningDelta(piece) = &event {
            return self.reasoning(piece);
        }
        self.end_thinking();
        match event {
            Event::ResponseStarted => *self.state.borrow_mut() = Shown::default(),
            Event::ToolOutput(_) => {}
            Event::TextDelta(piece) => self.text(&piece),
            Event::ResponseEnded { calls_tools } => {
                let shown = self.state.borrow().text;
                if calls_tools {
                    self.end_line();
                    if shown {
                        self.note("hel: (the model's working notes; it goes on with tools)");
                    }
                    *self.state.borrow_mut() = Shown::default();
                } else {
                    // The answer's last line: shown now, ended by
                    // [`Live::answer`].
                    let mut s = self.state.borrow_mut();
                    let rest = Self::held(&mut s, false);
                    if !rest.is_empty() {
                        let mut out = self.out.borrow_mut();
                        let _ = write!(out, "{rest}");
                        let _ = out.flush();
                    }
                    s.open = false;
                    s.answer = shown;
                }
            }
            Event::ResponseIncomplete => {
                let shown = self.state.borrow().text;
                self.end_line();
                if shown {
                    self.note("hel: the answer above is incomplete and was not saved");
                }
                *self.state.borrow_mut() = Shown::default();
            }
            other => {
                // A note never lands in the middle of a line of the answer.
                self.end_line();
                Stderr.event(other)
            }
        }
    }
}

/// The Markdown state of a response on stdout's terminal.
fn markdown() -> Markdown {
    let width = match dialoguer::console::Term::stdout().size_checked() {
        Some((_, cols)) if cols > 0 => cols as usize,
        _ => 80,
    };
    Markdown::new(super::colour_for(true), width)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[derive(Clone, Default)]
    struct Buf(Rc<RefCell<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Buf {
        fn text(&self) -> String {
            String::from_utf8(self.0.borrow().clone()).unwrap()
        }
    }

    /// `s` without SGR sequences.
    fn plain(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                chars.by_ref().find(|d| *d == 'm');
            } else {
                out.push(c);
            }
        }
        out
    }

    fn make(terminal: bool) -> (Live, Buf, Buf) {
        let (out, err) = (Buf::default(), Buf::default());
        let live = Live::with(Box::new(out.clone()), Box::new(err.clone()), terminal);
        (live, out, err)
    }

    fn stream(live: &Live, pieces: &[&str]) {
        live.event(Event::ResponseStarted);
        for p in pieces {
            live.event(Event::TextDelta((*p).to_owned()));
        }
    }

    #[test]
    fn a_terminal_sees_the_answer_arrive_and_the_same_bytes_as_unstreamed() {
        let (live, out, err) = make(true);
        stream(&live, &["Let me look", "."]);
        live.event(Event::ResponseEnded { calls_tools: true });
        stream(&live, &["Done\r", "\nok\x1b[2J\r"]);
        live.event(Event::ResponseEnded { calls_tools: false });
        // Saving it may be said before it is printed: one line end still.
        live.event(Event::CheckpointSaved {
            id: hel_store::ObjectId::from_bytes([0; 32]),
        });
        live.answer("Done\r\nok\x1b[2J\r");
        assert_eq!(out.text(), "Let me look.\nDone\nok^[[2J^M\n");
        assert_eq!(
            err.text(),
            "hel: (the model's working notes; it goes on with tools)\n"
        );
        // A table that ends the answer is held to its end, then fitted.
        let (live, out, _) = make(true);
        stream(&live, &["| a | bb |\n|---|", "---|\n| ccc | d |"]);
        live.event(Event::ResponseEnded { calls_tools: false });
        live.answer("| a | bb |\n|---|---|\n| ccc | d |");
        let shown = plain(&out.text());
        assert!(shown.ends_with("ccc │ d\n"), "{shown:?}");
        assert!(shown.contains("a   │ bb"), "{shown:?}");
        // Not streamed: the answer printed whole, escaped and rendered.
        let (live, out, _) = make(true);
        live.event(Event::ResponseStarted);
        live.event(Event::ResponseEnded { calls_tools: false });
        live.answer("## T\na\x1b");
        assert_eq!(plain(&out.text()), "T\n\na^[\n");
        let (live, out, _) = make(true);
        live.answer("");
        assert_eq!(out.text(), "\n");
    }

    /// A one-word answer of 5 MB arriving 16 bytes at a time: each byte
    /// is searched for a line end once (it was searched again with every
    /// piece after it: 5 MB did not finish in a minute), and the word is
    /// shown whole, cut at the width.
    #[test]
    fn a_long_line_in_many_pieces_costs_its_length() {
        let (live, out, _) = make(true);
        let word = "w".repeat(5 << 20);
        live.event(Event::ResponseStarted);
        for piece in word.as_bytes().chunks(16) {
            live.event(Event::TextDelta(String::from_utf8(piece.to_vec()).unwrap()));
        }
        assert_eq!(live.state.borrow().searched, word.len());
        live.event(Event::ResponseEnded { calls_tools: false });
        live.answer(&word);
        let shown = out.text();
        let width = markdown().width;
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), word.len().div_ceil(width));
        assert!(lines
            .iter()
            .all(|l| l.len() <= width && l.bytes().all(|b| b == b'w')));
        assert_eq!(lines.concat(), word);
        // Many lines in one piece: each searched once too.
        let (live, out, _) = make(true);
        let text = "a\n".repeat(100_000);
        stream(&live, &[&text]);
        assert_eq!(live.state.borrow().searched, text.len());
        live.event(Event::ResponseEnded { calls_tools: false });
        assert_eq!(plain(&out.text()).matches('a').count(), 100_000);
    }

    #[test]
    fn reasoning_is_set_apart_on_a_terminal_only() {
        let (live, out, _) = make(true);
        live.event(Event::ResponseStarted);
        for p in ["Check", " the\nfile\x1b[2J\r"] {
            live.event(Event::ReasoningDelta(p.to_owned()));
        }
        live.event(Event::TextDelta("Done\n".to_owned()));
        live.event(Event::ReasoningDelta("late\n".to_owned()));
        live.event(Event::ResponseEnded { calls_tools: false });
        live.answer("Done");
        let colour = crate::render::colour_for(true);
        let dim = |t: &str| crate::render::paint(colour, "2", t);
        let mark = crate::render::paint(colour, "2;3", "thinking:");
        assert_eq!(
            out.text(),
            format!(
                "{mark} {}{}\nDone\n{mark} {}\n",
                dim("Check"),
                dim(" the\nfile^[[2J"),
                dim("late\n")
            )
        );
        // Piped: no reasoning, the answer's bytes only.
        let (live, out, err) = make(false);
        live.event(Event::ResponseStarted);
        live.event(Event::ReasoningDelta("hmm".to_owned()));
        live.event(Event::ResponseEnded { calls_tools: false });
        live.answer("Done");
        assert_eq!(out.text(), "Done\n");
        assert_eq!(err.text(), "");
    }

    #[test]
    fn text_of_a_broken_response_is_marked_not_saved() {
        let (live, out, err) = make(true);
        stream(&live, &["half an ans"]);
        live.event(Event::ResponseIncomplete);
        assert_eq!(out.text(), "half an ans\n");
        assert_eq!(
            err.text(),
            "hel: the answer above is incomplete and was not saved\n"
        );
    }

    #[test]
    fn a_pipe_gets_only_completed_answers_byte_for_byte() {
        let (live, out, _) = make(false);
        stream(&live, &["partial"]);
        live.event(Event::ResponseIncomplete);
        stream(&live, &["a\x1b"]);
        live.event(Event::ResponseEnded { calls_tools: false });
        assert_eq!(out.text(), "");
        live.answer("a\x1b");
        assert_eq!(out.text(), "a\x1b\n");
    }
}
