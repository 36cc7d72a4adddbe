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

/// Whether a command about to remove the user's files or data asks first
/// (`hel undo`, `hel restore`, `hel sessions delete`): unless `yes`, when
/// stdin and stderr are a terminal. Off a terminal it goes on unasked, so
/// that scripts keep working.
pub fn asks(yes: bool) -> bool {
    use std::io::IsTerminal;
    !yes && std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Ask `hel: allow <request>? [y/N]` on the terminal ([`Tty`]): `Ok` with
/// whether the answer was yes, `Err` with why nobody could be asked.
pub fn allow(request: &str) -> Result<bool, String> {
    match Tty.ask(request) {
        Answer::Yes => Ok(true),
        Answer::No => Ok(false),
        Answer::Unavailable(why) => Err(why),
    }
}
