//! The session picker of a bare `hel resume` on a terminal: this project's
//! sessions that can be continued, newest first, chosen with the arrow
//! keys and filtered by typing (a name, an id, words of the instruction).

use hel_agent::text::escape_line;
use hel_store::{SessionInfo, Store};

use super::report;
use super::sessions::{label, when, WHEN_WIDTH};
use crate::exit::{Exit, Failure, Refusal, Usage};
use crate::render::{Shrink, Table};

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
    let mut sessions: Vec<SessionInfo> = store
        .sessions()?
        .into_iter()
        .filter(|s| resumable(s, &here))
        .collect();
    // Newest first, one-offs (one answer, no file changed: a `-p`
    // question, say) after the rest.
    sessions.sort_by_key(|s| s.one_off);
    if sessions.is_empty() {
        return Err(Refusal::NothingToResume.into());
    }
    // The picker puts `> ` or two spaces before each row.
    let table = table(crate::render::width().saturating_sub(2));
    let now = hel_store::time::now_ms();
    let rows: Vec<String> = sessions
        .iter()
        .map(|s| row(&table, s, names.get(&s.id).map(String::as_str), now))
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

/// The picker's columns for `room` columns: the short id, the time and
/// the answers, then the label (cut to fit; on a narrow terminal the
/// answers go first, then the time, never the id).
fn table(room: usize) -> Table {
    Table::new(
        &[(8, false), (WHEN_WIDTH, false), (10, true)],
        Some(room),
        &[Shrink::Drop(2), Shrink::Drop(1)],
        11,
    )
}

/// `4da5b0e0  12 min ago          2 answers  fix-login`: one row, its
/// columns aligned with every other row's, cut to the table's width.
fn row(table: &Table, s: &SessionInfo, name: Option<&str>, now: u64) -> String {
    table.row(
        &[
            &s.id.as_str()[..8],
            &when(s.updated_ms, now),
            &crate::render::count(s.checkpoints, "answer", "answers"),
        ],
        &escape_line(label(s, name)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str, first: &str) -> SessionInfo {
        SessionInfo {
            id: id.parse().unwrap(),
            busy: false,
            head: None,
            updated_ms: 0,
            checkpoints: 12,
            messages: 3,
            instruction: "the last".into(),
            first: first.into(),
            one_off: false,
            cwd: None,
            future: false,
            shipped: false,
            broken: None,
        }
    }

    #[test]
    fn rows_line_up_and_keep_the_id() {
        let now = 10 * 86_400_000;
        let a = info(
            "0190e4a0-0000-7000-8000-000000000001",
            "fix the login \u{1b}[2J bug",
        );
        let b = info("0190e4a0-0000-7000-8000-000000000002", "");
        for room in [38, 78, 198] {
            let t = table(room);
            let ra = row(&t, &a, None, now);
            let rb = row(&t, &b, Some("名前"), now);
            assert!(crate::render::columns(&ra) <= room, "{ra:?}");
            assert!(ra.starts_with("0190e4a0  "), "{ra:?}");
            assert!(!ra.contains('\u{1b}'), "{ra:?}");
            // The labels start in the same column.
            let at = |r: &str, l: &str| crate::render::columns(&r[..r.find(l).unwrap()]);
            assert_eq!(at(&ra, "fix"), at(&rb, "名前"), "{ra:?} {rb:?}");
        }
        assert!(row(&table(198), &a, None, now).contains("12 answers"));
    }
}
