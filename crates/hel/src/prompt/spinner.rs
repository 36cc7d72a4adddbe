//! A sign of life on stderr while the model has not said anything yet, or
//! while a tool runs: a spinner with what is awaited and the seconds
//! waited, on one line that is cleared when it stops. Nothing is drawn
//! when stderr is not a terminal.
//!
//! Whoever sees the first sign of an answer calls [`Spinner::stop`]: today
//! the prompt's observer, at the run's first event; with streaming, the
//! first delta.

use std::cell::RefCell;
use std::io::{IsTerminal, Write};
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK: Duration = Duration::from_millis(100);

/// The spinner of the instruction in progress, if one is drawn. Clones
/// share it (the prompt starts it, the observer stops it).
#[derive(Clone, Default)]
pub struct Spinner {
    task: Rc<RefCell<Option<JoinHandle<()>>>>,
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
        let since = Instant::now();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            for frame in FRAMES.iter().cycle() {
                tick.tick().await;
                let waited = since.elapsed().as_secs_f64();
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r{frame} {what} {waited:.1}s\x1b[K");
                let _ = err.flush();
            }
        });
        *self.task.borrow_mut() = Some(task);
    }

    /// Stop and clear the line. Does nothing when not drawing.
    pub fn stop(&self) {
        if let Some(task) = self.task.borrow_mut().take() {
            // The runtime has one thread: the task is between two draws.
            task.abort();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }
}
