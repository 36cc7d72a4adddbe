//! The session picker of a bare `hel resume` on a terminal: this project's
//! sessions that can be continued, newest first, chosen with the arrow
//! keys and filtered by typing (a name, an id, words of the instruction).

use std::collections::BTreeMap;

use hel_agent::text::escape_line;
use hel_store::{SessionId, SessionInfo, Store};

use super::report;
use crate::exit::{Exit, Failure, Refusal, Usage};

/// The session a bare `hel resume` continues: picked on the terminal (as
/// its id), or a usage error off one, with nothing to pick, or when the
/// user cancels.
pub fn session_to_resume() -> Result<String, Exit> {
    if !crate::tty::asks(false) {
        return Err(Usage::ResumeNeedsSession.into());
    }
    let project = report::project()?;
    let store = Store::open(&project)?;
    let here = hel_agent::recorded_cwd(&project);
    let names = super::sessions::names_or_warn(&store);
    let sessions: Vec<SessionInfo> = store
        .sessions()?
        .into_iter()
        .filter(|s| resumable(s, &here))
        .collect();
    if sessions.is_empty() {
        return Err(Refusal::NothingToResume.into());
    }
    let width = crate::render::width();
    let now = hel_store::time::now_ms();
    let rows: Vec<String> = sessions
        .iter()
        .map(|s| row(s, &names, now, width.saturating_sub(4)))
        .collect();
    let picked = dialoguer::FuzzySelect::new()
        .with_prompt("resume which session? (type to filter, Enter to pick, Esc to cancel)")
        .items(&rows)
        .default(0)
        .max_length(10)
        .interact_opt()
        .map_err(Failure::Picker)?;
    match picked {
        Some(i) => Ok(sessions[i].id.to_string()),
        None => Err(Refusal::NonePicked.into()),
    }
}

/// A session `hel resume` may pick: the project's own (not shipped), of
/// this directory, answered, readable and not in use.
fn resumable(s: &SessionInfo, here: &str) -> bool {
    !s.busy
        && !s.shipped
        && s.broken.is_none()
        && s.head.is_some()
        && s.checkpoints > 0
        && !s.future
        && s.cwd.as_deref() == Some(here)
}

/// `fix-login  4da5b0e0  3m ago  2 answers  add a test for …`, cut to
/// `width` characters.
fn row(s: &SessionInfo, names: &BTreeMap<SessionId, String>, now: u64, width: usize) -> String {
    let name = names
        .get(&s.id)
        .map(|n| format!("{n}  "))
        .unwrap_or_default();
    let text = format!(
        "{name}{}  {}  {}  {}",
        &s.id.as_str()[..8],
        ago(now.saturating_sub(s.updated_ms)),
        crate::render::count(s.checkpoints, "answer", "answers"),
        s.instruction
    );
    crate::render::fit(&escape_line(&text), width)
}

/// How long ago, for people: `40s ago`, `3m ago`, `5h ago`, `2d ago`.
fn ago(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s ago"),
        60..3600 => format!("{}m ago", s / 60),
        3600..86_400 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read() {
        assert_eq!(ago(3_000), "3s ago");
        assert_eq!(ago(185_000), "3m ago");
        assert_eq!(ago(3 * 86_400_000), "3d ago");
    }
}
