//! `hel sessions search`: which sessions discussed something.

use hel_agent::text::escape_line;
use hel_store::search::SessionHits;
use hel_store::time::rfc3339;
use hel_store::{SessionId, Store};
use serde::Serialize;

use super::report::{print_json, say};
use super::sessions::{names_or_warn, when, WHEN_WIDTH};
use crate::cli::SearchArgs;
use crate::exit::{self, Exit, Usage};
use crate::render::{self, Shrink, Table};

/// Longest pattern accepted, in bytes.
const PATTERN_MAX: usize = 4096;

/// A session of `hel sessions search --json` (fields in the order the JSON
/// has).
#[derive(Serialize)]
struct Row<'a> {
    head: String,
    matches: Vec<MatchRow<'a>>,
    name: Option<&'a str>,
    session: &'a SessionId,
    updated: String,
}

#[derive(Serialize)]
struct MatchRow<'a> {
    checkpoint: String,
    excerpt: &'a str,
    index: usize,
    role: &'a str,
}

/// The pattern compiled within bounds: a pattern that would build a huge
/// automaton is refused, not run.
fn compile(pattern: &str, case_sensitive: bool) -> Result<regex::Regex, Exit> {
    if pattern.len() > PATTERN_MAX {
        return Err(Usage::PatternTooLong { max: PATTERN_MAX }.into());
    }
    regex::RegexBuilder::new(pattern)
        .case_insensitive(!case_sensitive)
        .size_limit(1 << 20)
        .dfa_size_limit(8 << 20)
        .nest_limit(64)
        .build()
        .map_err(|e| Usage::Pattern(e).into())
}

pub fn search(store: &Store, args: &SearchArgs, json_flag: bool) -> Result<u8, Exit> {
    let re = compile(&args.pattern, args.case_sensitive)?;
    let report = hel_store::search::search(store, &re, args.role.map(|r| r.name()))?;
    let names = if report.sessions.is_empty() {
        Default::default()
    } else {
        names_or_warn(store)
    };
    let name_of = |id: &SessionId| names.get(id).map(String::as_str);
    if args.json || json_flag {
        let rows: Vec<Row> = report
            .sessions
            .iter()
            .map(|s| Row {
                head: s.head.to_hex(),
                matches: s
                    .matches
                    .iter()
                    .map(|m| MatchRow {
                        checkpoint: m.checkpoint.to_hex(),
                        excerpt: &m.excerpt,
                        index: m.index,
                        role: &m.role,
                    })
                    .collect(),
                name: name_of(&s.session),
                session: &s.session,
                updated: rfc3339(s.updated_ms),
            })
            .collect();
        print_json(&rows);
    } else {
        let room = render::stdout_room();
        let name_width = report
            .sessions
            .iter()
            .filter_map(|s| name_of(&s.session))
            .map(|n| render::columns(&escape_line(n)))
            .max()
            .unwrap_or(1);
        let table = table(room, name_width);
        let now = hel_store::time::now_ms();
        for s in &report.sessions {
            say!("{}", line(&table, s, name_of(&s.session), now));
        }
    }
    let mut hints = Vec::new();
    for (session, e) in &report.errors {
        render::line(&format!(
            "hel: session {session} not searched: {}",
            exit::store_words(e)
        ));
        hints.extend_from_slice(exit::store_hints(e));
    }
    hints.sort();
    hints.dedup();
    render::hints(&hints);
    if report.sessions.is_empty() {
        if !args.json && !json_flag {
            render::line("hel: no message matches");
        }
        return Ok(1);
    }
    Ok(if report.errors.is_empty() { 0 } else { 1 })
}

/// The columns of the results for output `room` columns wide (None: not a
/// terminal, nothing cut): the short id, the name (`-` for none), when
/// the session was last saved, the checkpoint of the first match, its
/// role, then the excerpt. On a narrow terminal the checkpoint goes
/// first, then the time, then the name is cut to 12 and the role goes:
/// the excerpt is cut, never the id.
fn table(room: Option<usize>, name_width: usize) -> Table {
    Table::new(
        &[
            (8, false),
            (name_width, false),
            (WHEN_WIDTH, false),
            (12, false),
            (9, false),
        ],
        room,
        &[
            Shrink::Drop(3),
            Shrink::Drop(2),
            Shrink::Cut(1, 12),
            Shrink::Drop(4),
        ],
        20,
    )
}

/// A session's line: short id, name, when it was saved, the checkpoint
/// where its first matching message appeared, the role, an excerpt, and
/// how many more messages match; its columns aligned with every other
/// line's.
fn line(table: &Table, s: &SessionHits, name: Option<&str>, now: u64) -> String {
    let Some(first) = s.matches.first() else {
        return String::new();
    };
    let more = match s.matches.len() - 1 {
        0 => String::new(),
        n => format!("  (+{n} more)"),
    };
    table.row(
        &[
            &s.session.as_str()[..8],
            &escape_line(name.unwrap_or("-")),
            &when(s.updated_ms, now),
            &first.checkpoint.to_hex()[..12],
            // The role is stored text too (search does not load, so does
            // not validate, the messages it scans): never a raw newline.
            &escape_line(&first.role),
        ],
        &format!("{}{more}", escape_line(&first.excerpt)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hel_store::search::Found;
    use hel_store::ObjectId;

    #[test]
    fn a_stored_role_cannot_forge_lines() {
        let hit = SessionHits {
            session: "0badf00d-0000-4000-8000-000000000001".parse().unwrap(),
            updated_ms: 0,
            head: ObjectId::from_bytes([1; 32]),
            matches: vec![Found {
                checkpoint: ObjectId::from_bytes([2; 32]),
                index: 1,
                role: "user\n0badf00d  fake\u{1b}[2J".into(),
                excerpt: "hit".into(),
            }],
        };
        let shown = line(&table(None, 1), &hit, None, 0);
        assert!(!shown.contains(['\n', '\u{1b}']), "{shown:?}");
        assert!(shown.contains("user^J0badf00d  fake^[[2J"), "{shown:?}");
    }
}
