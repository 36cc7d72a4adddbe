//! Conversations for people: the transcript `hel sessions show` prints,
//! the Markdown `hel sessions export --format md` writes, and the walk
//! they and the HTML page (html.rs) share ([`walk`]). Stored text is
//! hostile: every control character in it is escaped before it is shown
//! ([`escape_text`], [`escape_line`]); the only escape sequences printed
//! are the colours added here.

use std::collections::HashMap;
use std::fmt::Write as _;

use hel_agent::content_text;
use hel_agent::text::{escape_line, escape_text};
use serde_json::Value;

/// Lines of a tool result a transcript shows.
const RESULT_LINES: usize = 6;
/// Characters of one shown line of a tool result.
const RESULT_LINE_MAX: usize = 200;
/// Characters of a tool call's arguments shown on its line.
const ARGUMENTS_MAX: usize = 100;

/// How the transcript is printed.
#[derive(Clone, Copy)]
pub struct Style {
    /// ANSI colours (a terminal, and `NO_COLOR` not set).
    pub color: bool,
}

impl Style {
    /// Colours when stdout is a terminal and `NO_COLOR` is unset or empty
    /// (<https://no-color.org>).
    pub fn for_stdout() -> Style {
        use std::io::IsTerminal;
        Style {
            color: crate::render::colour_for(std::io::stdout().is_terminal()),
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("?")
}

/// A tool call of an assistant message.
pub(super) struct Call<'a> {
    pub id: &'a str,
    pub name: &'a str,
    /// JSON text, as the model wrote it.
    pub arguments: &'a str,
}

/// The tool calls of an assistant message.
fn tool_calls(m: &Value) -> Vec<Call<'_>> {
    m.get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|c| {
                    let f = |k: &str| {
                        c.pointer(&format!("/function/{k}"))
                            .and_then(Value::as_str)
                            .unwrap_or("")
                    };
                    Call {
                        id: c.get("id").and_then(Value::as_str).unwrap_or(""),
                        name: f("name"),
                        arguments: f("arguments"),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One message of a conversation as every transcript shows it (terminal,
/// Markdown, HTML): nothing in it is escaped yet.
pub(super) enum Part<'a> {
    /// The system prompt.
    System(String),
    /// An instruction, an answer (its text and its tool calls), or a
    /// message of another role.
    Message {
        role: &'a str,
        body: String,
        calls: Vec<Call<'a>>,
    },
    /// A tool's result: the id and name of the call it answers ("?" when
    /// no call before it has that id).
    Result {
        id: &'a str,
        name: &'a str,
        body: String,
    },
}

/// The conversation's messages in order, each with its position, as
/// [`Part`]s: the one walk the transcripts share.
pub(super) fn walk(messages: &[Value]) -> impl Iterator<Item = (usize, Part<'_>)> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    messages.iter().enumerate().map(move |(k, m)| {
        let body = content_text(m);
        let part = match role(m) {
            "system" => Part::System(body),
            "tool" => {
                let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
                let name = names.get(id).copied().unwrap_or("?");
                Part::Result { id, name, body }
            }
            role => {
                let calls = tool_calls(m);
                for c in &calls {
                    names.insert(c.id, c.name);
                }
                Part::Message { role, body, calls }
            }
        };
        (k, part)
    })
}

/// `s` on one line (whitespace runs as one space), cut to `max` characters.
fn abbreviate(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

/// The conversation for a person to read on a terminal: a header per
/// message, instructions and answers in full, each tool call on one line
/// with its arguments abbreviated, tool results cut to a few lines with a
/// count of what was cut. The system prompt is only counted.
pub fn text(messages: &[Value], style: Style) -> String {
    let mut out = String::new();
    let header = |label: &str, code: &str| style.paint(code, &format!("── {label} ──"));
    for (_, part) in walk(messages) {
        match part {
            Part::System(body) => {
                let note = format!(
                    "── system prompt: {}, not shown (--json or export shows it) ──",
                    crate::render::count(body.lines().count() as u64, "line", "lines")
                );
                let _ = writeln!(out, "{}\n", style.paint("2", &note));
            }
            Part::Result { name, body, .. } => {
                let label = format!("{} result", escape_line(name));
                let _ = writeln!(out, "{}", header(&label, "33"));
                let lines: Vec<&str> = body.lines().collect();
                for line in lines.iter().take(RESULT_LINES) {
                    let shown: String = line.chars().take(RESULT_LINE_MAX).collect();
                    let cut = if shown.len() < line.len() { "…" } else { "" };
                    let _ = writeln!(out, "{}{cut}", escape_line(&shown));
                }
                if lines.len() > RESULT_LINES {
                    let rest = &lines[RESULT_LINES..];
                    let bytes: usize = rest.iter().map(|l| l.len() + 1).sum();
                    let note = format!(
                        "… {} ({}) cut",
                        crate::render::count(rest.len() as u64, "more line", "more lines"),
                        crate::render::count(bytes as u64, "byte", "bytes")
                    );
                    let _ = writeln!(out, "{}", style.paint("2", &note));
                }
                out.push('\n');
            }
            Part::Message { role, body, calls } => {
                let code = if role == "user" { "1;36" } else { "1;32" };
                let _ = writeln!(out, "{}", header(&escape_line(role), code));
                if !body.trim().is_empty() {
                    let _ = writeln!(out, "{}", escape_text(body.trim_end()));
                }
                for c in calls {
                    let line = format!(
                        "→ {} {}",
                        escape_line(c.name),
                        escape_line(&abbreviate(c.arguments, ARGUMENTS_MAX))
                    );
                    let _ = writeln!(out, "{}", style.paint("35", &line));
                }
                out.push('\n');
            }
        }
    }
    out
}

/// A fence of backticks longer than any run of them in `text`.
fn fence(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

/// `text` in a fenced block.
fn fenced(out: &mut String, lang: &str, text: &str) {
    let f = fence(text);
    let _ = writeln!(out, "{f}{lang}\n{}\n{f}\n", escape_text(text.trim_end()));
}

/// The conversation as Markdown, for sharing: everything in full (the
/// system prompt folded away), tool calls' arguments and tool results in
/// fenced blocks. Control characters are escaped as for a terminal: the
/// file may well be printed on one.
pub fn markdown(title: &str, facts: &[(&str, String)], messages: &[Value]) -> String {
    let mut out = format!("# {}\n\n", escape_line(title));
    for (k, v) in facts {
        let _ = writeln!(out, "- {k}: {}", escape_line(v));
    }
    out.push('\n');
    for (_, part) in walk(messages) {
        match part {
            Part::System(body) => {
                out.push_str("<details><summary>System prompt</summary>\n\n");
                fenced(&mut out, "text", &body);
                out.push_str("</details>\n\n");
            }
            Part::Result { name, body, .. } => {
                let _ = writeln!(out, "### Tool result: `{}`\n", escape_line(name));
                fenced(&mut out, "text", &body);
            }
            Part::Message { role, body, calls } => {
                let heading = match role {
                    "user" => "User".to_owned(),
                    "assistant" => "Assistant".to_owned(),
                    other => escape_line(other).into_owned(),
                };
                let _ = writeln!(out, "## {heading}\n");
                if !body.trim().is_empty() {
                    let _ = writeln!(out, "{}\n", escape_text(body.trim()));
                }
                for c in calls {
                    let _ = writeln!(out, "Tool call `{}`:\n", escape_line(c.name));
                    fenced(&mut out, "json", &pretty_arguments(c.arguments));
                }
            }
        }
    }
    out
}

/// A tool call's arguments (JSON text) shown pretty when they parse.
pub(super) fn pretty_arguments(args: &str) -> String {
    serde_json::from_str::<Value>(args)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| args.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conversation() -> Vec<Value> {
        let output: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        vec![
            json!({"role": "system", "content": "you are hel\nbe brief"}),
            json!({"role": "user", "content": "list the files"}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": format!("{{\"command\": \"ls {}\"}}", "x".repeat(300))}}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": output}),
            json!({"role": "assistant", "content": "There are 20 lines.\nSecond line of the answer with ``` fences."}),
        ]
    }

    #[test]
    fn text_abbreviates_tools_and_keeps_the_answer() {
        let t = text(&conversation(), Style { color: false });
        assert!(t.contains("── user ──\nlist the files\n"), "{t}");
        assert!(t.contains("system prompt: 2 lines"), "{t}");
        assert!(!t.contains("you are hel"), "{t}");
        let call = t.lines().find(|l| l.starts_with("→ bash ")).unwrap();
        assert!(call.ends_with('…') && call.chars().count() < 120, "{call}");
        assert!(t.contains("── bash result ──\nline 1\n"), "{t}");
        assert!(t.contains("line 6\n… 14 more lines"), "{t}");
        assert!(!t.contains("line 7\n"), "{t}");
        assert!(t.contains("There are 20 lines.\nSecond line of the answer"));
        assert!(!t.contains('\x1b'));
        let colored = text(&conversation(), Style { color: true });
        assert!(colored.contains("\x1b[1;36m── user ──\x1b[0m"), "{colored}");
    }

    #[test]
    fn markdown_fences_outlast_the_content() {
        let md = markdown("t", &[("Session", "s".into())], &conversation());
        assert!(md.starts_with("# t\n\n- Session: s\n"), "{md}");
        assert!(md.contains("## User\n\nlist the files\n"), "{md}");
        assert!(
            md.contains("Tool call `bash`:\n\n```json\n{\n  \"command\""),
            "{md}"
        );
        assert!(
            md.contains("### Tool result: `bash`\n\n```text\nline 1\n"),
            "{md}"
        );
        assert!(md.contains("line 20\n```\n"), "{md}");
        assert_eq!(fence("a ``` b ```` c"), "`````");
        let evil = vec![json!({"role": "user", "content": "\u{1b}[2Jx"})];
        assert!(!markdown("t", &[], &evil).contains('\u{1b}'));
    }
}
