//! The line editor (rustyline) on the terminal: the prompt's input and the
//! `--access confirm` question both go through it, one at a time.
//!
//! Keys: Enter sends; Alt-Enter inserts a newline; a paste (bracketed
//! paste) arrives whole, newlines included, as one instruction; Ctrl-C
//! clears a line being typed and, on the prompt's empty line, says how to
//! leave, and leaves when pressed again within a second; Ctrl-D on an
//! empty line leaves; Up and Down walk the history; Tab completes, and
//! lists the completions when there are several; Shift-Tab at the prompt
//! ends the read with [`Read::Cycle`] (the prompt changes the access mode
//! and reads again, the line as it was).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hel_agent::text::escape_line;
use hel_agent::{Answer, Confirm, Interrupter, Request};

use super::complete::Complete;
use crate::confirm::{self, Reading, Rules};
use rustyline::config::{Behavior, CompletionType, Config};
use rustyline::error::ReadlineError;
use rustyline::history::MemHistory;
use rustyline::{
    Cmd, ConditionalEventHandler, Event, EventContext, EventHandler, KeyCode, KeyEvent, Modifiers,
    Movement, RepeatCount,
};

type Line = rustyline::Editor<Complete, MemHistory>;

/// Two Ctrl-C on the prompt's empty line within this long leave.
const TWICE: Duration = Duration::from_secs(1);

/// What one read gave.
pub enum Read {
    Line(String),
    /// Ctrl-C on an empty line (at the prompt: the second within a
    /// second).
    CtrlC,
    /// Ctrl-D on an empty line.
    Eof,
    /// Shift-Tab at the prompt, with the line typed so far and the
    /// cursor's place in it.
    Cycle(String, usize),
    Failed(ReadlineError),
}

/// The editor; clones share it.
#[derive(Clone)]
pub struct Editor {
    line: Arc<Mutex<Line>>,
    ctrl_c: Arc<CtrlC>,
    /// The confirm question's "always" answers, for the life of the
    /// process (`/fork` keeps them; nothing stores them).
    rules: Arc<Rules>,
    /// Where Tab completion looks.
    complete: Complete,
}

/// Ctrl-C: clear the line if there is one, else interrupt; at the
/// prompt (`idle`), the first on an empty line only says how to leave.
/// Handled within one read, so a second press is never lost between two.
#[derive(Default)]
struct CtrlC {
    /// When the last Ctrl-C on the prompt's empty line came (None: not
    /// at the prompt, or none since it was shown).
    idle: Mutex<Option<Option<Instant>>>,
    /// The line and cursor when Shift-Tab ended the read.
    cycled: Mutex<Option<(String, usize)>>,
}

/// Shift-Tab: at the prompt, keep the line and end the read; elsewhere
/// (the confirm question) nothing.
struct Cycle(Arc<CtrlC>);

impl ConditionalEventHandler for Cycle {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext) -> Option<Cmd> {
        let idle = self.0.idle.lock().is_ok_and(|i| i.is_some());
        if !idle {
            return Some(Cmd::Noop);
        }
        if let Ok(mut c) = self.0.cycled.lock() {
            *c = Some((ctx.line().to_owned(), ctx.pos()));
        }
        Some(Cmd::Interrupt)
    }
}

impl ConditionalEventHandler for CtrlC {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext) -> Option<Cmd> {
        if !ctx.line().is_empty() {
            return Some(Cmd::Kill(Movement::WholeBuffer));
        }
        let mut idle = match self.idle.lock() {
            Ok(i) => i,
            Err(poisoned) => poisoned.into_inner(),
        };
        match &mut *idle {
            Some(last) if !last.is_some_and(|t| t.elapsed() < TWICE) => {
                *last = Some(Instant::now());
                // The terminal is raw here: each line ends with \r\n.
                let _ = write!(
                    std::io::stderr(),
                    "\r\nhel: press Ctrl-C again within a second to leave (or Ctrl-D, or /exit)\r\n"
                );
                Some(Cmd::Repaint)
            }
            _ => Some(Cmd::Interrupt),
        }
    }
}

impl Editor {
    /// An editor on the terminal (`/dev/tty`, so that the prompt never
    /// goes into a redirected stdout), holding `history` (oldest first).
    pub fn new(history: &[String]) -> Result<Editor, ReadlineError> {
        let config = Config::builder()
            .behavior(Behavior::PreferTerm)
            .auto_add_history(false)
            .max_history_size(super::history::KEEP)?
            .history_ignore_dups(true)?
            // Tab: one match completes; several are listed under the line.
            .completion_type(CompletionType::List)
            .completion_show_all_if_ambiguous(true)
            .build();
        let history_config = MemHistory::with_config(&config);
        let mut line = Line::with_history(config, history_config)?;
        let complete = Complete::default();
        line.set_helper(Some(complete.clone()));
        line.bind_sequence(
            KeyEvent(KeyCode::Enter, Modifiers::ALT),
            EventHandler::Simple(Cmd::Newline),
        );
        let ctrl_c = Arc::new(CtrlC::default());
        line.bind_sequence(
            KeyEvent::ctrl('C'),
            EventHandler::Conditional(Box::new(Shared(Arc::clone(&ctrl_c)))),
        );
        line.bind_sequence(
            KeyEvent(KeyCode::BackTab, Modifiers::NONE),
            EventHandler::Conditional(Box::new(Cycle(Arc::clone(&ctrl_c)))),
        );
        for entry in history {
            line.add_history_entry(entry.as_str())?;
        }
        Ok(Editor {
            line: Arc::new(Mutex::new(line)),
            ctrl_c,
            rules: Arc::default(),
            complete,
        })
    }

    /// Complete session names from the store at `root`, and paths from
    /// `cwd` (where hel started).
    pub fn complete_in(&self, root: &std::path::Path, cwd: &std::path::Path) {
        let place = Some((root.to_owned(), cwd.to_owned()));
        match self.complete.place.lock() {
            Ok(mut p) => *p = place,
            Err(poisoned) => *poisoned.into_inner() = place,
        }
    }

    /// Read the prompt's next entry, starting from `initial` (the line
    /// and the cursor's place): a first Ctrl-C on the empty line says how
    /// to leave, a second within a second is [`Read::CtrlC`].
    pub fn read_entry(&self, prompt: &str, initial: (&str, usize)) -> Read {
        self.set_idle(Some(None));
        let (line, pos) = initial;
        let pos = (0..=pos.min(line.len()))
            .rev()
            .find(|p| line.is_char_boundary(*p))
            .unwrap_or(0);
        let read = self.read_from(prompt, (&line[..pos], &line[pos..]));
        self.set_idle(None);
        let cycled = self.ctrl_c.cycled.lock().ok().and_then(|mut c| c.take());
        match (read, cycled) {
            (Read::CtrlC, Some((line, pos))) => Read::Cycle(line, pos),
            (read, _) => read,
        }
    }

    fn set_idle(&self, to: Option<Option<Instant>>) {
        match self.ctrl_c.idle.lock() {
            Ok(mut i) => *i = to,
            Err(poisoned) => *poisoned.into_inner() = to,
        }
    }

    /// Read one answer after `prompt` (Ctrl-C on the empty line is
    /// [`Read::CtrlC`] at once).
    pub fn read(&self, prompt: &str) -> Read {
        self.read_from(prompt, ("", ""))
    }

    fn read_from(&self, prompt: &str, initial: (&str, &str)) -> Read {
        let mut line = match self.line.lock() {
            Ok(l) => l,
            Err(poisoned) => poisoned.into_inner(),
        };
        match line.readline_with_initial(prompt, initial) {
            Ok(text) => Read::Line(text),
            Err(ReadlineError::Interrupted) => Read::CtrlC,
            Err(ReadlineError::Eof) => Read::Eof,
            Err(e) => Read::Failed(e),
        }
    }

    /// Offer `entry` to Up and Down from now on.
    pub fn remember(&self, entry: &str) {
        if let Ok(mut line) = self.line.lock() {
            let _ = line.add_history_entry(entry);
        }
    }
}

/// The handler rustyline holds, sharing the editor's state.
struct Shared(Arc<CtrlC>);

impl ConditionalEventHandler for Shared {
    fn handle(&self, e: &Event, n: RepeatCount, p: bool, ctx: &EventContext) -> Option<Cmd> {
        self.0.handle(e, n, p, ctx)
    }
}

/// The `--access confirm` question, asked through the editor. Ctrl-C
/// there answers no and cancels the instruction (in the editor's raw mode
/// Ctrl-C is a key, not a signal).
pub struct Ask {
    pub editor: Editor,
    pub interrupter: Interrupter,
}

impl Confirm for Ask {
    fn confirm(&self, request: &Request) -> Answer {
        use std::io::IsTerminal;
        let rules = &self.editor.rules;
        // What is asked about is shown on the terminal: on stderr, or, when
        // that goes elsewhere, on /dev/tty.
        let mut out: Box<dyn Write> = if std::io::stderr().is_terminal() {
            Box::new(std::io::stderr())
        } else {
            match std::fs::OpenOptions::new().write(true).open("/dev/tty") {
                Ok(tty) => Box::new(tty),
                Err(e) => return Answer::Unavailable(format!("no terminal: {e}")),
            }
        };
        let screen = crate::tty::screen(&std::io::stderr())
            .or_else(|| crate::tty::screen(&std::io::stdin()))
            .unwrap_or(confirm::Screen::DEFAULT);
        confirm::ask(request, rules, screen, &mut out, &mut |question| match self
            .editor
            .read(question)
        {
            Read::Line(l) => Reading::Line(l),
            Read::Eof | Read::Cycle(..) => Reading::End,
            Read::CtrlC => {
                self.interrupter.interrupt();
                Reading::Cancel
            }
            Read::Failed(e) => Reading::Failed(e.to_string()),
        })
    }

    fn ask(&self, request: &str) -> Answer {
        // The request names what the model chose: shown, never obeyed.
        let question = format!("hel: allow {}? [y/N] ", escape_line(request));
        match self.editor.read(&question) {
            Read::Line(l) if matches!(l.trim(), "y" | "Y" | "yes") => Answer::Yes,
            Read::Line(_) | Read::Eof | Read::Cycle(..) => Answer::No,
            Read::CtrlC => {
                self.interrupter.interrupt();
                Answer::No
            }
            Read::Failed(e) => Answer::Unavailable(e.to_string()),
        }
    }
}
