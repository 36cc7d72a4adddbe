//! What an agent run does alike at the interactive prompt
//! ([`crate::prompt`]) and with instructions from `-p` or stdin
//! ([`crate::chat`]): restoring a fork's files, forwarding Ctrl-C, and the
//! line of an instruction that did not complete.

use hel_agent::{Incomplete, Interrupter, Run};

use crate::exit::Exit;
use crate::render;

/// `hel: instruction incomplete (timeout): …`: how an instruction ended
/// that did not complete, and why (an interrupt needs no second word).
pub fn incomplete_line(why: &Incomplete) -> String {
    match why {
        Incomplete::Interrupted => "hel: instruction incomplete (interrupted)".to_owned(),
        why => format!(
            "hel: instruction incomplete ({}): {why}",
            why.termination().name()
        ),
    }
}

/// Restore the files of the checkpoint a new fork starts from
/// (`--restore-files`, with its `--force`), and say what was done.
pub fn restore_forked(run: &mut Run, force: bool) -> Result<(), Exit> {
    let out = run.restore_forked_files(force)?;
    render::line(&format!(
        "hel: restored the files of the forked checkpoint: {} written, {} removed, {} left alone",
        render::count(out.written.len() as u64, "file", "files"),
        out.removed.len(),
        out.conflicts.len()
    ));
    for (p, why) in &out.conflicts {
        render::line(&format!(
            "hel:   left alone {}: {why}",
            String::from_utf8_lossy(p)
        ));
    }
    Ok(())
}

/// From now on Ctrl-C (SIGINT) no longer ends the process: each one is an
/// interrupt, which cancels what the run is doing.
pub fn forward_ctrl_c(interrupter: Interrupter) {
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            interrupter.interrupt();
        }
    });
}
