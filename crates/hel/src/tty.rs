//! Confirmations on the terminal: hel asks on `/dev/tty`, so that a run
//! whose stdin and stdout are pipes can still be confirmed, and a run with
//! no terminal at all denies.

use std::io::{BufRead, Write};

use hel_agent::text::escape_line;
use hel_agent::{Answer, Confirm, Request};

use crate::confirm::{self, Reading, Rules, Screen};

/// Asks on `/dev/tty`: `hel: allow <request>? [y/N]` for the store
/// commands, the confirm question ([`confirm`]) for a run's calls.
#[derive(Default)]
pub struct Tty {
    /// The confirm question's "always" answers, for this process only.
    rules: Rules,
}

impl Confirm for Tty {
    fn confirm(&self, request: &Request) -> Answer {
        let tty = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
        {
            Ok(t) => t,
            Err(e) => return Answer::Unavailable(format!("no terminal: {e}")),
        };
        let mut input = std::io::BufReader::new(&tty);
        let mut out = &tty;
        // The size of the terminal asked on, which stderr may not be.
        let screen = screen(&tty).unwrap_or(Screen::DEFAULT);
        confirm::ask(request, &self.rules, screen, &mut out, &mut |question| {
            let mut w = &tty;
            if let Err(e) = write!(w, "{question}") {
                return Reading::Failed(e.to_string());
            }
            let mut line = String::new();
            match input.read_line(&mut line) {
                Ok(0) => Reading::End,
                Ok(_) => Reading::Line(line),
                Err(e) => Reading::Failed(e.to_string()),
            }
        })
    }

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

/// The size of the terminal `fd` is (None: it is not one, or does not
/// say).
pub fn screen(fd: &impl std::os::fd::AsRawFd) -> Option<Screen> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct it is given;
    // the descriptor is borrowed for the call.
    let ok = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_row > 0 && ws.ws_col > 0)
        .then(|| Screen::of(usize::from(ws.ws_row), usize::from(ws.ws_col)))
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
    match Tty::default().ask(request) {
        Answer::Yes => Ok(true),
        Answer::No | Answer::NoBecause(_) | Answer::Refused(_) => Ok(false),
        Answer::Unavailable(why) => Err(why),
    }
}
