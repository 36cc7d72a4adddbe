//! The live view of tool calls, through a real terminal at 80 and 40
//! columns against hel-mock: a write_file over a file shows the lines it
//! changes (numbered, `-` and `+`), a command's call line is its text and
//! the files it changed are named (`A name`) with their diffs when they
//! are small text, and `/last` shows the whole output the folded view
//! left out.

use serde_json::json;

use crate::common::*;
use crate::t_prompt::{all_fit, expect, screen_lines, spawn_with, type_in, PROMPT_END};

/// The index of the line `want` in `lines` (panics naming `what`).
fn at(lines: &[String], want: &str, what: &str) -> usize {
    lines
        .iter()
        .position(|l| l == want)
        .unwrap_or_else(|| panic!("{what}: no line {want:?} in {lines:#?}"))
}

/// A write_file over an existing file shows the changed line as `-` and
/// `+` with its number and a line of context; a command's call line is
/// the command; a file it creates is named `A made.txt`.
#[test]
fn a_write_shows_its_diff_and_a_command_its_text_and_new_files() {
    for cols in [80u16, 40] {
        let p = Project::new();
        p.write("calc.py", "def sub(a, b):\n    return a - b\n\n# end\n");
        let mock = Mock::start(json!([
            {"tool_calls": [call("write_file", json!({"path": "calc.py", "content": "def sub(a, b):\n    return a + b\n\n# end\n"}))]},
            {"tool_calls": [call("bash", json!({"command": "echo made > made.txt"}))]},
            {"content": "Done."},
        ]));
        let mut s = spawn_with(
            &p,
            Some(&mock),
            cols,
            &["--access", "auto", "-p", "fix it"],
            &[],
        );
        let seen = expect(&mut s, "Done.");
        s.exp_eof().unwrap();
        let lines = screen_lines(&seen);
        let what = format!("{cols} columns");
        let shown: Vec<String> = lines
            .iter()
            .filter(|l| !l.starts_with("session: "))
            .cloned()
            .collect();
        all_fit(&shown, cols as usize, &what);
        let write = at(&lines, "hel: write_file calc.py", &what);
        let minus = at(&lines, "  2 -    return a - b", &what);
        assert!(write < minus, "{what}: {lines:#?}");
        assert_eq!(at(&lines, "  1  def sub(a, b):", &what) + 1, minus);
        assert_eq!(at(&lines, "  2 +    return a + b", &what), minus + 1);
        assert!(
            !lines.iter().any(|l| l.contains("\"content\"")),
            "{lines:#?}"
        );
        let bash = at(&lines, "hel: bash echo made > made.txt", &what);
        assert!(minus < bash, "{what}: {lines:#?}");
        let made = at(&lines, "  A made.txt", &what);
        assert!(bash < made, "{what}: {lines:#?}");
        assert!(!lines
            .iter()
            .any(|l| l.contains("calc.py") && l.starts_with("  M ")));
        assert_eq!(p.read("made.txt"), "made\n");
    }
}

/// A command's output past its last lines is folded with a count that
/// points at `/last`; `/last` at the prompt shows the whole of it, the
/// lines left out included, stdout and stderr apart.
#[test]
fn last_shows_what_the_folded_view_left_out() {
    let command = "for i in $(seq 1 20); do echo \"out line $i\"; done; echo oops >&2; exit 3";
    for cols in [80u16, 40] {
        let p = Project::new();
        let mock = Mock::start(json!([
            {"tool_calls": [call("bash", json!({"command": command}))]},
            {"content": "Done."},
        ]));
        let mut s = spawn_with(&p, Some(&mock), cols, &["--access", "auto"], &[]);
        expect(&mut s, PROMPT_END);
        type_in(&mut s, "count\r");
        let seen = expect(&mut s, "Done.");
        expect(&mut s, PROMPT_END);
        let lines = screen_lines(&seen);
        let what = format!("{cols} columns");
        at(&lines, "hel:   exit 3", &what);
        at(&lines, "    out line 20", &what);
        at(&lines, "    … 14 earlier lines (/last shows all)", &what);
        assert!(
            !lines.iter().any(|l| l.contains("out line 3")),
            "{what}: {lines:#?}"
        );
        type_in(&mut s, "/last\r");
        let seen = expect(&mut s, PROMPT_END);
        let lines = screen_lines(&seen);
        let head = at(&lines, &format!("hel: bash {command}"), &what);
        assert_eq!(at(&lines, "exit 3", &what), head + 1);
        let out = at(&lines, "stdout:", &what);
        assert_eq!(at(&lines, "  out line 1", &what), out + 1);
        assert_eq!(at(&lines, "  out line 3", &what), out + 3);
        assert_eq!(at(&lines, "stderr:", &what), out + 21);
        assert_eq!(at(&lines, "  oops", &what), out + 22);
        type_in(&mut s, "/exit\r");
        s.exp_eof().unwrap();
    }
}

/// A command's changed files show their diffs as an edit's, under each
/// file's line: a line a command changed in a file an earlier
/// instruction wrote (`-` and `+`, numbered, with context), a file it
/// made (`+` lines); a binary file it changed only by name. Every line
/// fits the terminal.
#[test]
fn a_command_s_changed_files_show_their_diffs() {
    let sed = "sed -i 's/a - b/a + b/' calc.py";
    let made = "printf 'one\\ntwo\\n' > new.txt";
    for cols in [80u16, 40] {
        let p = Project::new();
        p.write("data.bin", "a\0b");
        let mock = Mock::start(json!([
            {"tool_calls": [call("write_file", json!({"path": "calc.py", "content": "def sub(a, b):\n    return a - b\n\n# end\n"}))]},
            {"content": "Written."},
            {"tool_calls": [call("bash", json!({"command": sed}))]},
            {"tool_calls": [call("bash", json!({"command": "printf 'c\\000d' > data.bin"}))]},
            {"tool_calls": [call("bash", json!({"command": made}))]},
            {"content": "Done."},
        ]));
        let mut s = spawn_with(&p, Some(&mock), cols, &["--access", "auto"], &[]);
        expect(&mut s, PROMPT_END);
        type_in(&mut s, "write it\r");
        expect(&mut s, "Written.");
        expect(&mut s, PROMPT_END);
        type_in(&mut s, "fix it\r");
        let seen = expect(&mut s, "Done.");
        expect(&mut s, PROMPT_END);
        type_in(&mut s, "/exit\r");
        s.exp_eof().unwrap();
        let lines = screen_lines(&seen);
        let what = format!("{cols} columns");
        all_fit(&lines, cols as usize, &what);
        let m = at(&lines, "  M calc.py", &what);
        assert_eq!(
            lines[m + 1..m + 4],
            [
                "    1  def sub(a, b):",
                "    2 -    return a - b",
                "    2 +    return a + b"
            ],
            "{what}: {lines:#?}"
        );
        let bin = at(&lines, "  M data.bin", &what);
        assert!(m < bin, "{what}: {lines:#?}");
        assert!(
            lines[bin + 1].starts_with("hel: bash "),
            "{what}: {lines:#?}"
        );
        let a = at(&lines, "  A new.txt", &what);
        assert!(bin < a, "{what}: {lines:#?}");
        assert_eq!(
            lines[a + 1..a + 3],
            ["    1 +one", "    2 +two"],
            "{what}: {lines:#?}"
        );
        assert_eq!(
            p.read("calc.py"),
            "def sub(a, b):\n    return a + b\n\n# end\n"
        );
    }
}
