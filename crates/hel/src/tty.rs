//! Confirmations on the terminal: hel asks on `/dev/tty`, so that a run
//! whose stdin and stdout are pipes can still be confirmed, and a run with
//! no terminal at all denies.

use std::io::{BufRead, Write};

use hel_agent::terminal::escape_line;
use hel_agent::tools::{Answer, Confirm};

/// Asks `hel: allow <request>? [y/N]` on `/dev/tty`.
pub struct Tty;

impl Confirm for Tty {
    fn ask(&self, request: &str) -> Answer {
        let tty = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
        {
            Ok(t) => t,
            Err(e) => return Answer::Unavailable(format!("no terminal: {e}")),
        };
        let mut w = &tty;
        // The request names what the model chose: shown, never obeyed.
        if let Err(e) = write!(w, "hel: allow {}? [y/N] ", escape_line(request)) {
            return Answer::Unavailable(e.to_string());
        }
        let mut line = String::new();
        match std::io::BufReader::new(&tty).read_line(&mut line) {
            Ok(_) if matches!(line.trim(), "y" | "Y" | "yes") => Answer::Yes,
            Ok(_) => Answer::No,
            Err(e) => Answer::Unavailable(e.to_string()),
        }
    }
}
