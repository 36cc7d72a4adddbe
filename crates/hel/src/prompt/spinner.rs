//! A sign of life on stderr while the model has not said anything yet, or
//! while a tool runs: a spinner with what is awaited and the seconds
//! waited, on one line that is cleared when it stops. Nothing is drawn
//! when stderr is not a terminal.
//!
//! While bash runs, the last lines of its output are drawn under the
//! spinner ([`Spinner::feed`]), dimmed, and cleared with it, so the
//! scrollback keeps only hel's own tool lines.
//!
//! Whoever sees the first sign of an answer calls [`Spinner::stop`]: today
//! the prompt's observer, at the run's first event; with streaming, the
//! first delta.

use std::cell::RefCell;
use std::io::{IsTerminal, Write};
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::render::tail::{Tail, LINES};

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK: Duration = Duration::from_millis(100);

/// The spinner of the instruction in progress, if one is drawn. Clones
/// share it (the prompt starts it, the observer stops it).
#[derive(Clone, Default)]
pub struct Spinner {
    task: Rc<RefCell<Option<JoinHandle<()>>>>,
    /// The running command's output, drawn under the spinner.
    tail: Arc<Mutex<Tail>>,
}

/// The tail, whole even if a draw panicked while holding it.
fn held(tail: &Mutex<Tail>) -> MutexGuard<'_, Tail> {
    tail.lock().unwrap_or_else(|e| e.into_inner())
}

/// One frame: the spinner's line, then `tail`'s lines (dimmed when
/// `colour`), each cut to `width` with a column to spare (a line that
/// wrapped would break the redraw), the rest of the screen cleared, and
/// the cursor back at the start of the spinner's line.
fn frame(line: &str, tail: &[String], colour: bool, width: usize) -> String {
    let line = crate::render::fit(line, width.saturating_sub(1).max(2));
    let mut s = format!("\r{line}\x1b[K");
    for l in tail {
        let l = crate::render::fit(l, width.saturating_sub(3).max(2));
        s.push('\n');
        s.push_str(&crate::render::paint(colour, "2", &format!("  {l}")));
    }
    if !tail.is_empty() {
        s.push_str(&format!("\x1b[J\x1b[{}A\r", tail.len()));
    }
    s
}

impl Spinner {
    /// Start drawing (again), if stderr is a terminal.
    pub fn start(&self) {
        self.start_for("waiting for the model".to_owned());
    }

    /// Start drawing `what` is awaited (again), if stderr is a terminal.
    pub fn start_for(&self, what: String) {
        self.stop();
        if !std::io::stderr().is_terminal() {
            return;
        }
        *held(&self.tail) = Tail::default();
        let tail = self.tail.clone();
        let colour = crate::render::colour_for(true);
        let since = Instant::now();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            for spin in FRAMES.iter().cycle() {
                tick.tick().await;
                let waited = since.elapsed().as_secs_f64();
                let width = crate::render::width();
                let lines = held(&tail).lines(LINES, width.saturating_sub(3));
                let shown = frame(
                    &format!("{spin} {what} {waited:.1}s"),
                    &lines,
                    colour,
                    width,
                );
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "{shown}");
                let _ = err.flush();
            }
        });
        *self.task.borrow_mut() = Some(task);
    }

    /// Whether the spinner is drawn.
    pub fn drawing(&self) -> bool {
        self.task.borrow().is_some()
    }

    /// Take in what the running command printed, drawn under the spinner
    /// at its next frame. Nothing is held when it is not drawn.
    pub fn feed(&self, data: &[u8]) {
        if self.drawing() {
            held(&self.tail).push(data);
        }
    }

    /// Stop and clear the line. Does nothing when not drawing.
    pub fn stop(&self) {
        if let Some(task) = self.task.borrow_mut().take() {
            // The runtime has one thread: the task is between two draws.
            task.abort();
            *held(&self.tail) = Tail::default();
            let mut err = std::io::stderr().lock();
            // The line and the tail under it.
            let _ = write!(err, "\r\x1b[J");
            let _ = err.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_draws_the_tail_under_the_line_and_comes_back() {
        assert_eq!(frame("⠋ x 0.1s", &[], true, 80), "\r⠋ x 0.1s\x1b[K");
        assert_eq!(
            frame("⠋ running mcp__server__a_long_tool 3.2s", &[], true, 12),
            "\r⠋ running …\x1b[K"
        );
        let tail = ["ab".to_owned(), "abcdefghij".to_owned()];
        assert_eq!(
            frame("⠋ x", &tail, false, 10),
            "\r⠋ x\x1b[K\n  ab\n  abcdef…\x1b[J\x1b[2A\r"
        );
        assert_eq!(
            frame("⠋ x", &tail[..1], true, 10),
            "\r⠋ x\x1b[K\n\x1b[2m  ab\x1b[0m\x1b[J\x1b[1A\r"
        );
    }
}
