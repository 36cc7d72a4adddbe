//! Resume shows where you were, and sessions you can recognise: through
//! a real pseudo-terminal at 80 and 40 columns, against hel-mock.

use serde_json::{json, Value};

use crate::common::*;
use crate::t_prompt::{
    all_fit, exited_with, expect, screen_lines, spawn_with, type_in, PROMPT_END,
};

/// A session of four instructions, the third of which ran a command;
/// its id.
fn four_instructions(p: &Project) -> String {
    let mock = Mock::start(json!([
        {"content": "One."},
        {"content": "Two."},
        {"tool_calls": [call("bash", json!({"command": "echo checked"}))]},
        {"content": "Checked, **all good**."},
        {"content": "Four."},
    ]));
    let first = p.run(Some(&mock), &["-p", "first task"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let id = first.session();
    for text in ["second task", "run the check", "last task"] {
        let run = p.run(
            Some(&mock),
            &["--access", "auto", "resume", &id, "-p", text],
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    id
}

/// The screen of `hel ARGS` on a `cols`-column terminal up to its first
/// prompt, after which it is left with Ctrl-D.
fn until_prompt(p: &Project, cols: u16, args: &[&str]) -> Vec<String> {
    let mock = Mock::start(json!([]));
    let mut s = spawn_with(p, Some(&mock), cols, args, &[]);
    let seen = expect(&mut s, PROMPT_END);
    s.send_control('d').unwrap();
    s.exp_eof().unwrap();
    exited_with(&s, 0);
    screen_lines(&seen)
}

/// Where the line `want` is on `lines` (a panic naming them if absent).
fn at(lines: &[String], want: &str) -> usize {
    lines
        .iter()
        .position(|l| l == want)
        .unwrap_or_else(|| panic!("no line {want:?} in {lines:#?}"))
}

#[test]
fn a_resume_shows_the_last_exchanges_before_the_prompt() {
    let p = Project::new();
    let id = four_instructions(&p);
    for cols in [80u16, 40] {
        for args in [vec!["resume", id.as_str()], vec!["-c"]] {
            let lines = until_prompt(&p, cols, &args);
            let what = format!("{args:?} at {cols}");
            let shown: Vec<String> = lines
                .iter()
                .filter(|l| !l.starts_with("session: "))
                .cloned()
                .collect();
            all_fit(&shown, cols as usize, &what);
            // The oldest is counted, the last three shown in order, each
            // instruction, its tool line and its answer; then the prompt.
            let earlier = lines
                .iter()
                .position(|l| l.starts_with("hel: … 1 earlier instruction"))
                .unwrap_or_else(|| panic!("{what}: {lines:#?}"));
            assert!(!lines.iter().any(|l| l.contains("first task")), "{what}");
            let second = at(&lines, "› second task");
            let two = at(&lines, "Two.");
            let check = at(&lines, "› run the check");
            let tool = at(&lines, "hel: bash echo checked");
            let answer = at(&lines, "Checked, all good.");
            let last = at(&lines, "› last task");
            let four = at(&lines, "Four.");
            assert!(
                earlier < second
                    && second < two
                    && two < check
                    && check < tool
                    && tool < answer
                    && answer < last
                    && last < four,
                "{what}: {lines:#?}"
            );
            // What the terminal shows last is the prompt.
            let prompt = lines.iter().rposition(|l| !l.is_empty()).unwrap();
            assert!(prompt == four + 1, "{what}: {lines:#?}");
            assert!(
                lines[prompt].starts_with(&format!("hel {} · ", &id[..8])),
                "{what}: {lines:#?}"
            );
        }
        // --quiet, and the setting, show none of it.
        let quiet = until_prompt(&p, cols, &["resume", &id, "--quiet"]);
        assert!(!quiet.iter().any(|l| l.contains("last task")), "{quiet:#?}");
        assert!(!quiet.iter().any(|l| l.contains("Four.")), "{quiet:#?}");
    }
    let dir = p.home.path().join(".config/hel");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), "resume_replay = false\n").unwrap();
    let quiet = until_prompt(&p, 80, &["resume", &id]);
    assert!(!quiet.iter().any(|l| l.contains("last task")), "{quiet:#?}");
    let config = p.run(None, &["config"]);
    assert!(
        config
            .stdout
            .lines()
            .any(|l| l.starts_with("resume_replay") && l.contains("false")),
        "{}",
        config.stdout
    );
}

#[test]
fn slash_resume_shows_where_the_session_was() {
    let p = Project::new();
    let id = four_instructions(&p);
    let mock = Mock::start(json!([]));
    let mut s = spawn_with(&p, Some(&mock), 80, &[], &[]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, &format!("/resume {}\r", &id[..8]));
    let seen = expect(&mut s, &format!("hel {} · ", &id[..8]));
    let lines = screen_lines(&seen);
    assert!(
        at(&lines, "› last task") < at(&lines, "Four."),
        "{lines:#?}"
    );
    expect(&mut s, PROMPT_END);
    s.send_control('d').unwrap();
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// `hel sessions`: a session is labelled by its name or its first
/// instruction, dated in local relative time; `--json` keeps the ISO time.
#[test]
fn sessions_are_labelled_by_the_first_instruction() {
    let p = Project::new();
    let id = four_instructions(&p);
    let piped = p.run(None, &["sessions"]);
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    let row = piped
        .stdout
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{}", piped.stdout));
    assert!(row.ends_with("  first task"), "{row}");
    assert!(
        row.contains("just now") || row.contains(" min ago"),
        "{row}"
    );
    let rows: Value = serde_json::from_str(&p.run(None, &["sessions", "--json"]).stdout).unwrap();
    assert_eq!(rows[0]["first"], "first task");
    assert_eq!(rows[0]["instruction"], "last task");
    let updated = rows[0]["updated"].as_str().unwrap();
    let iso = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$").unwrap();
    assert!(iso.is_match(updated), "{updated}");
    // Listed again (from the summary index this time): the same label.
    let again = p.run(None, &["sessions"]);
    assert_eq!(again.stdout.lines().nth(1), Some(row), "{}", again.stdout);

    for cols in [80u16, 40] {
        let mut s = spawn_with(&p, None, cols, &["sessions"], &[]);
        let lines = screen_lines(&s.exp_eof().unwrap());
        exited_with(&s, 0);
        all_fit(&lines, cols as usize, "hel sessions");
        let row = lines
            .iter()
            .find(|l| l.starts_with(&id[..8]))
            .unwrap_or_else(|| panic!("{lines:#?}"));
        assert!(row.ends_with("first task"), "{cols}: {row}");
        assert!(
            row.contains("just now") || row.contains(" min ago"),
            "{cols}: {row}"
        );
    }

    // A name is the label.
    let run = p.run(None, &["sessions", "rename", &id, "calc-fix"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let named = p.run(None, &["sessions"]);
    let row = named.stdout.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(row.ends_with("  calc-fix"), "{row}");
}

/// The column where `text` starts on `line`, in characters.
fn column(line: &str, text: &str) -> usize {
    line[..line
        .find(text)
        .unwrap_or_else(|| panic!("{text:?} not in {line:?}"))]
        .chars()
        .count()
}

/// The picker's rows line up at 80 and 40 columns, ids whole, labels cut;
/// a session of one answer that changed no file comes after the others
/// however new it is.
#[test]
fn picker_rows_line_up_and_one_offs_come_last() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "notes.txt", "content": "x\n"}))]},
        {"content": "Wrote it."},
        {"content": "Again."},
        {"content": "A question answered."},
    ]));
    let long = "write the release notes for the next version and mention every change";
    let edit = p.run(Some(&mock), &["--access", "auto", "-p", long]);
    assert_eq!(edit.code, 0, "{}", edit.stderr);
    let edit = edit.session();
    let more = p.run(Some(&mock), &["resume", &edit, "-p", "again"]);
    assert_eq!(more.code, 0, "{}", more.stderr);
    let question = p.run(Some(&mock), &["-p", "what is this"]);
    assert_eq!(question.code, 0, "{}", question.stderr);
    let question = question.session();
    for cols in [80u16, 40] {
        let mut s = spawn_with(&p, Some(&mock), cols, &["resume"], &[]);
        expect(&mut s, "resume which session?");
        let mut seen = expect(&mut s, "what is");
        // (What was waited for is in neither part.)
        seen.push_str("what is");
        type_in(&mut s, "\x1b");
        seen.push_str(&expect(&mut s, "no session picked"));
        s.exp_eof().unwrap();
        let lines = screen_lines(&seen);
        let row = |id: &str| {
            lines
                .iter()
                .rfind(|l| l.contains(&id[..8]))
                .unwrap_or_else(|| panic!("{cols}: {lines:#?}"))
                .clone()
        };
        let (a, b) = (row(&edit), row(&question));
        all_fit(&[a.clone(), b.clone()], cols as usize, "picker");
        // The one-off is listed after the older session that edited.
        let pos = |r: &String| lines.iter().rposition(|l| l == r).unwrap();
        assert!(pos(&a) < pos(&b), "{cols}: {lines:#?}");
        assert_eq!(
            column(&a, &edit[..8]),
            column(&b, &question[..8]),
            "{a}\n{b}"
        );
        assert_eq!(column(&a, "write"), column(&b, "what"), "{cols}: {a}\n{b}");
        assert!(a.contains("min ago") || a.contains("just now"), "{a}");
        if cols == 80 {
            assert_eq!(column(&a, "2 answers"), column(&b, " 1 answer"), "{a}\n{b}");
        } else {
            assert!(a.ends_with('…'), "{a}");
        }
    }
}

/// `hel sessions search`: aligned columns, the excerpt cut (never the id)
/// at 40 columns.
#[test]
fn search_results_line_up() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "The parser needs a fix."},
        {"content": "The parser is fine, the lexer is not, and here is a long explanation of why."},
    ]));
    let a = p.run(Some(&mock), &["-p", "look at the parser"]).session();
    let b = p
        .run(Some(&mock), &["-p", "and the parser again"])
        .session();
    let run = p.run(None, &["sessions", "rename", &a, "parsing-work"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for cols in [80u16, 200, 40] {
        let mut s = spawn_with(&p, None, cols, &["sessions", "search", "PARSER"], &[]);
        let lines = screen_lines(&s.exp_eof().unwrap());
        exited_with(&s, 0);
        all_fit(&lines, cols as usize, "search");
        let find = |id: &str| {
            lines
                .iter()
                .find(|l| l.starts_with(&id[..8]))
                .unwrap_or_else(|| panic!("{cols}: {lines:#?}"))
                .clone()
        };
        let (ra, rb) = (find(&a), find(&b));
        assert_eq!(
            column(&ra, "look"),
            column(&rb, "and the"),
            "{cols}:\n{ra}\n{rb}"
        );
        assert_eq!(column(&ra, &a[..8]), 0, "{ra}");
        if cols >= 80 {
            assert!(
                ra.contains("parsing-work") && rb.contains(" - "),
                "{ra}\n{rb}"
            );
            assert!(ra.contains("min ago") || ra.contains("just now"), "{ra}");
        }
    }
}

/// `hel sessions log` on a 40-column terminal keeps its token figures
/// whole and cuts the instruction.
#[test]
fn sessions_log_keeps_its_token_figures_whole() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "Done."}]));
    let long = "rename the configuration option everywhere in the project";
    let run = p.run(Some(&mock), &["-p", long]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run.session();
    let rows: Value =
        serde_json::from_str(&p.run(None, &["sessions", "log", &id, "--json"]).stdout).unwrap();
    let tokens = format!(
        "{} in {} out",
        rows[0]["input_tokens"], rows[0]["output_tokens"]
    );
    for cols in [80u16, 40] {
        let mut s = spawn_with(&p, None, cols, &["sessions", "log", &id], &[]);
        let lines = screen_lines(&s.exp_eof().unwrap());
        exited_with(&s, 0);
        all_fit(&lines, cols as usize, "sessions log");
        let row = lines
            .iter()
            .find(|l| l.contains(" in "))
            .unwrap_or_else(|| panic!("{cols}: {lines:#?}"));
        assert!(row.contains(&tokens), "{cols}: {tokens} in {row}");
        assert!(row.contains("rename"), "{cols}: {row}");
        if cols == 40 {
            assert!(row.ends_with('…'), "{row}");
        }
    }
}
