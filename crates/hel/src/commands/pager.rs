//! Long text for a person: through `$PAGER` (default `less`) when stdout is
//! a terminal and the text does not fit on it; printed as is otherwise.

use std::io::{IsTerminal, Write};
use std::process::{Command, Stdio};

/// Rows of the terminal on stdout, when it says.
fn terminal_rows() -> Option<usize> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct it is given.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_row > 0).then_some(usize::from(ws.ws_row))
}

/// The pager command: `$PAGER`, `less` when unset; none when it is empty
/// or `cat`.
fn pager() -> Option<String> {
    match std::env::var("PAGER") {
        Ok(p) if p.trim().is_empty() || p.trim() == "cat" => None,
        Ok(p) => Some(p),
        Err(_) => Some("less".into()),
    }
}

/// Show `text` (already safe for a terminal) on stdout, paged when long.
pub fn show(text: &str) {
    let out = std::io::stdout();
    if out.is_terminal() {
        let rows = terminal_rows().unwrap_or(24);
        if text.lines().count() >= rows {
            if let Some(cmd) = pager() {
                if page(&cmd, text) {
                    return;
                }
            }
        }
    }
    let mut out = out.lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Run `cmd` (as the shell reads it, like git does with `$PAGER`) with
/// `text` on its stdin; false when it could not be started.
fn page(cmd: &str, text: &str) -> bool {
    let mut command = Command::new("sh");
    command.arg("-c").arg(cmd).stdin(Stdio::piped());
    if std::env::var_os("LESS").is_none() {
        // Colours through, and no pager for what fits on one screen.
        command.env("LESS", "FRX");
    }
    let Ok(mut child) = command.spawn() else {
        return false;
    };
    // A reader that quits early must not kill hel with SIGPIPE (the store
    // reports restore its default): the write just fails.
    // SAFETY: setting a signal disposition; hel runs no other thread here.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    if let Some(mut stdin) = child.stdin.take() {
        // The reader quitting early is not an error.
        let _ = stdin.write_all(text.as_bytes());
    }
    let _ = child.wait();
    true
}
