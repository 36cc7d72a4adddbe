//! The `--access confirm` question, one place for both terminals it is
//! asked on (the prompt's editor, `/dev/tty` for piped runs): what the call
//! would do (the command in full, the lines a search_replace changes, the
//! head and size of a write_file), then `[y/n/a/?]` until a valid answer.
//! `a` allows the same again for the rest of this instance, in memory only
//! (never stored in a checkpoint): every call of the tool, or for bash this
//! exact command or, for a simple one, every command of its program.

use std::io::Write;
use std::sync::Mutex;

use hel_agent::text::escape_line;
use hel_agent::{Answer, Request, ToolName};

use crate::render::columns;
/// The Markdown renderer (render/markdown.rs) cuts table cells with it.
pub use crate::render::fit;

/// What `?` explains.
pub const EXPLAIN: &str = "\
hel:   y           run it
hel:   n [REASON]  do not; the reason, if any, goes to the model
hel:   a           allow it, and the same again until hel exits (bash: this
hel:               exact command, or every command of its program)
hel:   ?           this help; Ctrl-C says no and cancels the instruction";

/// What an "always" allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    Tool(ToolName),
    Command(String),
    Program(String),
}

/// The "always" answers of this instance.
#[derive(Default)]
pub struct Rules(Mutex<Vec<Rule>>);

impl Rules {
    fn allows(&self, r: &Request) -> bool {
        let rules = match self.0.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        rules.iter().any(|rule| match rule {
            Rule::Tool(t) => *t == r.tool && r.tool != ToolName::Bash,
            Rule::Command(c) => r.command.as_ref() == Some(c),
            Rule::Program(p) => r.program.as_ref() == Some(p),
        })
    }

    fn add(&self, rule: Rule) {
        match self.0.lock() {
            Ok(mut g) => g.push(rule),
            Err(poisoned) => poisoned.into_inner().push(rule),
        }
    }
}

/// One line read in answer (or why there is none).
pub enum Reading {
    Line(String),
    /// Ctrl-D, or the end of the terminal's input.
    End,
    /// Ctrl-C: no, and the caller cancels the instruction.
    Cancel,
    Failed(String),
}

/// A line typed in answer to the question.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Yes,
    No(Option<String>),
    Always,
    Explain,
    Other,
}

fn parse(line: &str) -> Reply {
    let line = line.trim();
    let (word, rest) = match line.split_once(char::is_whitespace) {
        Some((w, r)) => (w, r.trim()),
        None => (line, ""),
    };
    match (word.to_ascii_lowercase().as_str(), rest) {
        ("y" | "yes", "") => Reply::Yes,
        ("n" | "no", "") => Reply::No(None),
        ("n" | "no", why) => Reply::No(Some(why.to_owned())),
        ("a" | "always", "") => Reply::Always,
        ("?" | "help", "") => Reply::Explain,
        _ => Reply::Other,
    }
}

/// Whether to colour what goes to the terminal (it is one).
fn colour() -> bool {
    crate::render::colour_for(true)
}

/// The preview lines as shown: escaped, cut to `width`, `-` red and `+`
/// green when `colour`.
fn preview(request: &Request, width: usize, colour: bool) -> Vec<String> {
    request
        .preview
        .iter()
        .map(|l| {
            let shown = fit(&format!("hel: │ {}", escape_line(l)), width);
            let code = match l.chars().next() {
                Some('-') if request.tool != ToolName::Bash => "31",
                Some('+') if request.tool != ToolName::Bash => "32",
                _ => "",
            };
            if colour && !code.is_empty() {
                format!("\x1b[{code}m{shown}\x1b[0m")
            } else {
                shown
            }
        })
        .collect()
}

/// Ask about `request` on a terminal `width` columns wide: its preview on
/// `out`, then the question through `read` (which shows the question and
/// reads a line) until a valid answer. A call an earlier "always" allowed
/// is allowed at once, saying so.
pub fn ask(
    request: &Request,
    rules: &Rules,
    width: usize,
    out: &mut dyn Write,
    read: &mut dyn FnMut(&str) -> Reading,
) -> Answer {
    // The request names what the model chose: shown, never obeyed.
    // Cut to fit the question on one line: the preview shows it whole.
    let summary = fit(
        &escape_line(&request.summary),
        width.saturating_sub(columns("hel: allowed  (you said always)")),
    );
    if rules.allows(request) {
        let _ = writeln!(out, "hel: allowed {summary} (you said always)");
        return Answer::Yes;
    }
    for line in preview(request, width, colour()) {
        let _ = writeln!(out, "{line}");
    }
    let question = format!("hel: allow {summary}? [y/n/a/?] ");
    loop {
        let line = match read(&question) {
            Reading::Line(l) => l,
            Reading::End | Reading::Cancel => return Answer::No,
            Reading::Failed(why) => return Answer::Unavailable(why),
        };
        match parse(&line) {
            Reply::Yes => return Answer::Yes,
            Reply::No(None) => return Answer::No,
            Reply::No(Some(why)) => return Answer::NoBecause(why),
            Reply::Explain => {
                for l in EXPLAIN.lines() {
                    say(out, l, width, "hel:               ");
                }
            }
            Reply::Other => say(
                out,
                "hel: answer y, n (or n and a reason), a or ?",
                width,
                "hel:   ",
            ),
            Reply::Always => match always(request, width, out, read) {
                Some(rule) => {
                    rules.add(rule);
                    return Answer::Yes;
                }
                None => return Answer::No,
            },
        }
    }
}

/// `line` on `out`, wrapped to `width` ([`crate::render::wrap`]), its
/// later lines starting with `indent`.
fn say(out: &mut dyn Write, line: &str, width: usize, indent: &str) {
    for piece in crate::render::wrap(line, width, indent) {
        let _ = writeln!(out, "{piece}");
    }
}

/// What an "always" allows: for bash, this exact command or (a simple
/// command) every command of its program, as the user chooses; else the
/// tool. None: the user gave up (Ctrl-C, Ctrl-D).
fn always(
    request: &Request,
    width: usize,
    out: &mut dyn Write,
    read: &mut dyn FnMut(&str) -> Reading,
) -> Option<Rule> {
    let Some(command) = &request.command else {
        return Some(Rule::Tool(request.tool));
    };
    let Some(program) = &request.program else {
        return Some(Rule::Command(command.clone()));
    };
    let question = always_question(&escape_line(program), width);
    loop {
        match read(&question) {
            Reading::Line(l) => match l.trim() {
                "c" => return Some(Rule::Command(command.clone())),
                "p" => return Some(Rule::Program(program.clone())),
                _ => {
                    let _ = writeln!(out, "hel: answer c or p");
                }
            },
            _ => return None,
        }
    }
}

/// The question of an "always" for bash, on one line of `width` columns:
/// the program's name gives way first (cut with `…`), then the wording.
fn always_question(program: &str, width: usize) -> String {
    let long = |p: &str| {
        format!("hel: always allow [c] exactly this command, or [p] every `{p}` command? [c/p] ")
    };
    let short = |p: &str| format!("hel: always [c] this command or [p] every `{p}`? [c/p] ");
    for shape in [&long as &dyn Fn(&str) -> String, &short] {
        let room = width.saturating_sub(columns(&shape("")));
        if room >= columns(program).min(8) {
            return shape(&fit(program, room));
        }
    }
    "always [c/p] ".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tool: ToolName, preview: &[&str], command: Option<&str>) -> Request {
        Request {
            summary: "s".into(),
            tool,
            preview: preview.iter().map(|s| s.to_string()).collect(),
            command: command.map(str::to_owned),
            program: command
                .and_then(hel_agent::simple_program)
                .map(str::to_owned),
        }
    }

    /// Run `ask` with `lines` typed in turn; what was shown, and the answer.
    fn run(r: &Request, rules: &Rules, lines: &[&str]) -> (String, Answer) {
        let mut out = Vec::new();
        let mut typed = lines.iter();
        let answer = ask(
            r,
            rules,
            40,
            &mut out,
            &mut |_question| match typed.next() {
                Some(l) => Reading::Line(l.to_string()),
                None => Reading::End,
            },
        );
        (String::from_utf8(out).unwrap(), answer)
    }

    #[test]
    fn answers_and_asking_again() {
        let rules = Rules::default();
        let w = request(ToolName::WriteFile, &["1 line, 3 bytes", "+hi"], None);
        assert_eq!(run(&w, &rules, &["y"]).1, Answer::Yes);
        assert_eq!(run(&w, &rules, &["n"]).1, Answer::No);
        assert_eq!(
            run(&w, &rules, &["n  not that file "]).1,
            Answer::NoBecause("not that file".into())
        );
        let (shown, answer) = run(&w, &rules, &["?", "maybe", "", "y"]);
        assert_eq!(answer, Answer::Yes);
        assert!(shown.contains("n [REASON]"), "{shown}");
        assert_eq!(shown.matches("hel: answer y, n").count(), 2, "{shown}");
        assert!(shown.starts_with("hel: │ 1 line, 3 bytes\n"), "{shown}");
        // On 40 columns the help and the reminder are wrapped to them.
        for l in shown.lines() {
            assert!(crate::render::columns(l) <= 40, "{l:?}");
        }
        // Always: the tool from now on, without asking.
        assert_eq!(run(&w, &rules, &["a"]).1, Answer::Yes);
        let (shown, answer) = run(&w, &rules, &[]);
        assert_eq!(answer, Answer::Yes);
        assert_eq!(shown, "hel: allowed s (you said always)\n");
    }

    #[test]
    fn always_for_bash_is_the_command_or_its_program() {
        let rules = Rules::default();
        let test = request(ToolName::Bash, &["cargo test"], Some("cargo test"));
        let build = request(ToolName::Bash, &["cargo build"], Some("cargo build"));
        let rm = request(ToolName::Bash, &["rm -rf x"], Some("rm -rf x"));
        assert_eq!(run(&test, &rules, &["a", "x", "c"]).1, Answer::Yes);
        assert_eq!(run(&test, &rules, &[]).1, Answer::Yes);
        assert_eq!(run(&build, &rules, &[]).1, Answer::No, "only that command");
        assert_eq!(run(&build, &rules, &["a", "p"]).1, Answer::Yes);
        assert_eq!(run(&build, &rules, &[]).1, Answer::Yes);
        assert_eq!(
            run(
                &request(ToolName::Bash, &[], Some("cargo fmt")),
                &rules,
                &[]
            )
            .1,
            Answer::Yes
        );
        assert_eq!(run(&rm, &rules, &[]).1, Answer::No);
        // Not a simple command: "always" is this exact command.
        let chain = request(ToolName::Bash, &[], Some("cargo test; rm -rf /"));
        assert_eq!(run(&chain, &rules, &["a"]).1, Answer::Yes);
        assert_eq!(run(&chain, &rules, &[]).1, Answer::Yes);
    }

    #[test]
    fn the_always_question_fits_the_width() {
        let program = "a-program-with-a-very-long-name";
        for width in [20, 40, 60, 80, 120] {
            let q = always_question(program, width);
            assert!(columns(&q) <= width.max(13), "{width}: {q:?}");
            assert!(q.ends_with("[c/p] "), "{q:?}");
        }
        assert!(always_question("cargo", 80).contains("every `cargo` command"));
        assert!(always_question(program, 60).contains('…'));
    }

    #[test]
    fn previews_fit_the_width() {
        let r = request(
            ToolName::SearchReplace,
            &["-old line that is much longer than forty columns", "+new"],
            None,
        );
        let lines = preview(&r, 40, false);
        assert_eq!(lines[0].chars().count(), 40);
        assert!(lines[0].ends_with('…'));
        assert_eq!(lines[1], "hel: │ +new");
        assert_eq!(preview(&r, 40, true)[1], "\x1b[32mhel: │ +new\x1b[0m");
    }
}
