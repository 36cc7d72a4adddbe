//! `--access confirm` shows exactly what will run, through a real
//! terminal at 40 and 200 columns: a command whose harmful tail hides
//! behind spaces is shown whole before the question, a command taller
//! than the screen is refused (the model told to split it) and never
//! runs, invisible and direction characters are shown escaped, and an MCP
//! call is shown as the value the server receives, a repeated key
//! refused before any question with nothing sent.

use serde_json::json;

use crate::common::*;
use crate::t_mcp::{config_file, python, real};
use crate::t_prompt::{
    all_fit, bytes, exited_with, expect, screen_lines, spawn_with, type_in, PROMPT_END,
};

/// The question's end, whatever it asks.
const ASKED: &str = "[y/n/a/?] ";

/// What the preview lines (`hel: │ ` and the `hel: ┆ ` lines they go on
/// to) of `lines` say, joined: the text the user was shown.
fn previewed(lines: &[String]) -> String {
    let mut text = String::new();
    for l in lines {
        if let Some(rest) = l.strip_prefix("hel: │ ") {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(rest);
        } else if let Some(rest) = l.strip_prefix("hel: ┆ ") {
            text.push_str(rest);
        }
    }
    text
}

/// A command harmless for its first words, then 200 spaces, then
/// `; touch PWNED`: on 40 and on 200 columns the tail is on the screen
/// before the question, every line fits, nothing is cut with `…`; the
/// user says no and nothing runs.
#[test]
fn a_tail_hidden_behind_spaces_is_shown_before_the_question() {
    let command = format!(
        "echo running the unit tests{}; touch PWNED",
        " ".repeat(200)
    );
    for cols in [40u16, 200] {
        let p = Project::new();
        let mock = Mock::start(json!([
            {"tool_calls": [call("bash", json!({"command": command}))]},
            {"content": "Done."},
        ]));
        let mut s = spawn_with(&p, Some(&mock), cols, &["--access", "confirm"], &[]);
        expect(&mut s, PROMPT_END);
        type_in(&mut s, "run the tests\r");
        let seen = expect(&mut s, ASKED);
        let lines = screen_lines(&seen);
        let what = format!("{cols} columns");
        all_fit(&lines, cols as usize, &what);
        let shown = previewed(&lines);
        assert_eq!(
            shown, "echo running the unit tests␠×200; touch PWNED",
            "{what}: {lines:#?}"
        );
        // Neither the preview nor the question is cut.
        let asked = lines.iter().skip_while(|l| !l.starts_with("hel: │ "));
        assert!(
            asked.clone().count() >= 2 && asked.clone().all(|l| !l.contains('…')),
            "{what}: {lines:#?}"
        );
        type_in(&mut s, "n\r");
        expect(&mut s, "Done.");
        expect(&mut s, PROMPT_END);
        assert!(!p.dir.path().join("PWNED").exists(), "{what}");
        assert_eq!(
            tool_results(&mock, 1),
            ["denied: the user declined this call"],
            "{what}"
        );
        type_in(&mut s, "/exit\r");
        s.exp_eof().unwrap();
        exited_with(&s, 0);
    }
}

/// A command taller than the 40-row screen is not asked about: the
/// terminal says so, the model is told it was too long to confirm and to
/// split it, and it never runs.
#[test]
fn a_command_taller_than_the_screen_is_refused_not_run() {
    let mut lines: Vec<String> = (0..60).map(|i| format!("echo step {i}")).collect();
    lines.push("touch PWNED".into());
    let command = lines.join("\n");
    for cols in [40u16, 200] {
        let p = Project::new();
        let mock = Mock::start(json!([
            {"tool_calls": [call("bash", json!({"command": command}))]},
            {"content": "Done."},
        ]));
        let mut s = spawn_with(&p, Some(&mock), cols, &["--access", "confirm"], &[]);
        expect(&mut s, PROMPT_END);
        type_in(&mut s, "run the steps\r");
        let seen = expect(&mut s, "Done.");
        let shown = screen_lines(&seen);
        assert!(
            !seen.contains(&bytes(ASKED)),
            "{cols}: asked anyway: {shown:#?}"
        );
        let said = shown.join(" ");
        assert!(said.contains("hel: not asked: the command"), "{shown:#?}");
        all_fit(&shown, cols as usize, "the refusal");
        expect(&mut s, PROMPT_END);
        assert!(!p.dir.path().join("PWNED").exists());
        let results = tool_results(&mock, 1);
        assert_eq!(results.len(), 1);
        assert!(
            results[0].starts_with("denied: the call was not put to the user")
                && results[0].contains("40 rows")
                && results[0].contains("split it"),
            "{}",
            results[0]
        );
        type_in(&mut s, "/exit\r");
        s.exp_eof().unwrap();
        exited_with(&s, 0);
    }
}

/// Direction-changing and invisible characters in a command are shown
/// as escapes, at 40 and 200 columns.
#[test]
fn invisible_and_direction_characters_are_shown_escaped() {
    let command =
        "cat notes\u{202e}txt.exe\u{2066}x\u{2069} a\u{200b}b c\u{200f}d e\u{ad}f\u{feff} g\u{61c}h";
    for cols in [40u16, 200] {
        let p = Project::new();
        let mock = Mock::start(json!([
            {"tool_calls": [call("bash", json!({"command": command}))]},
            {"content": "Done."},
        ]));
        let mut s = spawn_with(&p, Some(&mock), cols, &["--access", "confirm"], &[]);
        expect(&mut s, PROMPT_END);
        type_in(&mut s, "look\r");
        let seen = expect(&mut s, ASKED);
        let lines = screen_lines(&seen);
        assert_eq!(
            previewed(&lines),
            "cat notes\\u{202e}txt.exe\\u{2066}x\\u{2069} a\\u{200b}b c\\u{200f}d e\\u{ad}f\\u{feff} g\\u{61c}h",
            "{cols}: {lines:#?}"
        );
        all_fit(&lines, cols as usize, "escapes");
        type_in(&mut s, "n\r");
        expect(&mut s, "Done.");
        expect(&mut s, PROMPT_END);
        type_in(&mut s, "/exit\r");
        s.exp_eof().unwrap();
        exited_with(&s, 0);
    }
}

/// An MCP call whose arguments hold a key twice is refused before any
/// question and the server receives nothing; the next call is shown as
/// the value the server receives, and that is what it writes.
#[test]
fn an_mcp_call_is_shown_as_sent_and_a_repeated_key_refused() {
    let Some(py) = python() else { return };
    for cols in [40u16, 200] {
        let p = Project::new();
        config_file(&p, &real(&py, &format!("cf{cols}"), ""));
        let tool = format!("mcp__cf{cols}__write");
        let notes = p.dir.path().join("notes.txt");
        let bashrc = p.home.path().join(".bashrc");
        let twice = format!(
            r#"{{"path": {}, "text": "export PATH=/tmp/evil:$PATH", "path": {}}}"#,
            json!(notes.display().to_string()),
            json!(bashrc.display().to_string())
        );
        let mock = Mock::start(json!([
            {"tool_calls": [{"name": tool, "arguments": twice}]},
            {"tool_calls": [call(&tool, json!({"path": notes.display().to_string(), "text": "hello\u{202e}"}))]},
            {"content": "Done."},
        ]));
        let mut s = spawn_with(&p, Some(&mock), cols, &["--access", "confirm"], &[]);
        expect(&mut s, PROMPT_END);
        type_in(&mut s, "write the notes\r");
        let seen = expect(&mut s, ASKED);
        let lines = screen_lines(&seen);
        // The first question is the second call's: the first call was
        // refused before any (what came before the question has none).
        assert!(!seen.contains(&bytes(ASKED)), "{lines:#?}");
        assert!(!notes.exists() && !bashrc.exists(), "the server wrote");
        let first = tool_results(&mock, 1);
        assert_eq!(first.len(), 1);
        assert!(
            first[0].contains("refused before anyone is asked")
                && first[0].contains("a key repeated"),
            "{}",
            first[0]
        );
        // The value sent, pretty, whole (the path wraps at 40 columns).
        let value = serde_json::to_string_pretty(
            &json!({"path": notes.display().to_string(), "text": "hello\u{202e}"}),
        )
        .unwrap()
        .replace('\u{202e}', "\\u{202e}");
        assert_eq!(previewed(&lines), value, "{cols}: {lines:#?}");
        all_fit(&lines, cols as usize, "the MCP call");
        assert!(
            lines
                .join(" ")
                .contains(&format!("hel: allow call {tool}?")),
            "{lines:#?}"
        );
        type_in(&mut s, "y\r");
        expect(&mut s, "Done.");
        expect(&mut s, PROMPT_END);
        assert_eq!(std::fs::read_to_string(&notes).unwrap(), "hello\u{202e}");
        assert!(!bashrc.exists());
        type_in(&mut s, "/exit\r");
        s.exp_eof().unwrap();
        exited_with(&s, 0);
    }
}

/// A bash call whose arguments hold `command` twice runs neither, in any
/// access mode: the model is told the key is repeated.
#[test]
fn a_bash_call_with_a_repeated_key_runs_nothing() {
    for access in ["auto", "confirm"] {
        let p = Project::new();
        let mock = Mock::start(json!([
            {"tool_calls": [{"name": "bash", "arguments": r#"{"command": "echo running the tests", "command": "touch PWNED"}"#}]},
            {"content": "Done."},
        ]));
        let run = p.run(Some(&mock), &["--access", access, "-p", "x"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(!p.dir.path().join("PWNED").exists(), "{access}");
        let results = tool_results(&mock, 1);
        assert!(
            results.len() == 1 && results[0].contains("a key repeated in one object"),
            "{access}: {results:?}"
        );
    }
}

/// At the prompt with stderr sent to a file, what is asked about is still
/// shown on the terminal before the question.
#[test]
fn the_preview_is_on_the_terminal_when_stderr_goes_elsewhere() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "echo shown; touch PWNED"}))]},
        {"content": "Done."},
    ]));
    let log = p.home.path().join("stderr.log");
    let mut cmd = std::process::Command::new("sh");
    cmd.current_dir(p.dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p.home.path())
        .env("TERM", "xterm")
        .arg("-c")
        .arg("stty cols 80 rows 40 && exec \"$0\" \"$@\" 2>\"$HEL_TEST_LOG\"")
        .env("HEL_TEST_LOG", &log)
        .arg(hel_bin())
        .args(["--base-url", &mock.url, "--model", "mock-model"])
        .args(["--access", "confirm"]);
    let mut s = rexpect::session::spawn_command(cmd, Some(30_000)).unwrap();
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "run it\r");
    let seen = expect(&mut s, ASKED);
    let lines = screen_lines(&seen);
    assert_eq!(previewed(&lines), "echo shown; touch PWNED", "{lines:#?}");
    type_in(&mut s, "n\r");
    expect(&mut s, PROMPT_END);
    assert!(!p.dir.path().join("PWNED").exists());
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// A piped run asks on /dev/tty, wrapped to that terminal's width (here
/// 40 columns, while stderr goes elsewhere): the hidden tail is shown.
#[test]
fn a_piped_run_asks_on_the_terminal_at_its_width() {
    let command = format!(
        "echo running the unit tests{}; touch PWNED",
        " ".repeat(200)
    );
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": command}))]},
        {"content": "Done."},
    ]));
    let mut cmd = std::process::Command::new("sh");
    cmd.current_dir(p.dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p.home.path())
        .env("TERM", "xterm")
        .arg("-c")
        .arg("stty cols 40 rows 40 && exec \"$0\" \"$@\" </dev/null 2>/dev/null")
        .arg(hel_bin())
        .args(["--base-url", &mock.url, "--model", "mock-model"])
        .args(["--access", "confirm", "-p", "run the tests"]);
    let mut s = rexpect::session::spawn_command(cmd, Some(30_000)).unwrap();
    let seen = expect(&mut s, ASKED);
    let lines = screen_lines(&seen);
    all_fit(&lines, 40, "/dev/tty");
    assert_eq!(
        previewed(&lines),
        "echo running the unit tests␠×200; touch PWNED",
        "{lines:#?}"
    );
    type_in(&mut s, "n\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
    assert!(!p.dir.path().join("PWNED").exists());
    assert_eq!(
        tool_results(&mock, 1),
        ["denied: the user declined this call"]
    );
}

/// `a` to a write_file allows that path, as the question says: a later
/// write of it is allowed without asking, a write of another path asks
/// again.
#[test]
fn always_for_a_write_is_for_its_path_only() {
    let p = Project::new();
    let write = |path: &str, content: &str| json!({"tool_calls": [call("write_file", json!({"path": path, "content": content}))]});
    let mock = Mock::start(json!([
        write("notes.txt", "one\n"),
        write("notes.txt", "two\n"),
        write("other.txt", "three\n"),
        {"content": "Done."},
    ]));
    let mut s = spawn_with(&p, Some(&mock), 80, &["--access", "confirm"], &[]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "take notes\r");
    expect(
        &mut s,
        "hel: allow write_file notes.txt? [y/n/a = always for notes.txt/?] ",
    );
    type_in(&mut s, "a\r");
    expect(&mut s, "allowed write_file notes.txt (you said always)");
    expect(
        &mut s,
        "hel: allow write_file other.txt? [y/n/a = always for other.txt/?] ",
    );
    type_in(&mut s, "n\r");
    expect(&mut s, "Done.");
    expect(&mut s, PROMPT_END);
    assert_eq!(p.read("notes.txt"), "two\n");
    assert!(!p.dir.path().join("other.txt").exists());
    let results = tool_results(&mock, 3);
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[2], "denied: the user declined this call");
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// An edit's confirm shows its diff against the file, at 80 and 40
/// columns: a search_replace's line as `-` and `+` with its number in the
/// file, a write_file over a file the line it changes (not its head),
/// every line fitting the terminal; what is approved is what is written.
#[test]
fn an_edit_s_confirm_shows_its_diff_against_the_file() {
    for cols in [80u16, 40] {
        let p = Project::new();
        p.write("calc.py", "def sub(a, b):\n    return a - b\n\n# end\n");
        let mock = Mock::start(json!([
            {"tool_calls": [call("search_replace", json!({"path": "calc.py", "search": "    return a - b", "replace": "    return a + b"}))]},
            {"tool_calls": [call("write_file", json!({"path": "calc.py", "content": "def sub(a, b):\n    return a + b\n\n# the end\n"}))]},
            {"content": "Done."},
        ]));
        let mut s = spawn_with(&p, Some(&mock), cols, &["--access", "confirm"], &[]);
        expect(&mut s, PROMPT_END);
        type_in(&mut s, "fix it\r");
        let what = format!("{cols} columns");
        let seen = expect(&mut s, "/?] ");
        let lines = screen_lines(&seen);
        all_fit(&lines, cols as usize, &what);
        assert_eq!(
            previewed(&lines),
            "1  def sub(a, b):\n2 -    return a - b\n2 +    return a + b\n3  \n4  # end",
            "{what}: {lines:#?}"
        );
        type_in(&mut s, "y\r");
        let seen = expect(&mut s, "/?] ");
        let lines = screen_lines(&seen);
        all_fit(&lines, cols as usize, &what);
        assert_eq!(
            previewed(&lines),
            "4 lines, 43 bytes, over 4 lines\n2      return a + b\n3  \n4 -# end\n4 +# the end",
            "{what}: {lines:#?}"
        );
        type_in(&mut s, "y\r");
        expect(&mut s, "Done.");
        expect(&mut s, PROMPT_END);
        assert_eq!(
            p.read("calc.py"),
            "def sub(a, b):\n    return a + b\n\n# the end\n"
        );
        type_in(&mut s, "/exit\r");
        s.exp_eof().unwrap();
        exited_with(&s, 0);
    }
}
