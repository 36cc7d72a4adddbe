//! What a resumed session shows before its prompt: the last few
//! exchanges of the earlier conversation (each instruction, a line per
//! tool call as the live view prints it when the call starts, and the
//! answer rendered as the live view renders answers), older ones counted
//! in one line. Only at the interactive prompt; `--quiet` or
//! `resume_replay = false` in the config turns it off.
//!
//! The messages come from the store, which may have come with a
//! repository: every line is escaped, and what is printed is bounded (a
//! few exchanges, a few lines of each instruction and answer, a few tool
//! lines).

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use super::{columns, fit, paint, tool};
use hel_agent::text::{count, escape_line, escape_text};

/// Exchanges (an instruction and what followed it) shown.
pub const EXCHANGES: usize = 3;

/// Lines of an instruction shown.
const INSTRUCTION_LINES: usize = 4;

/// Tool lines shown of one exchange before the rest are counted.
const CALLS: usize = 6;

/// Lines of an answer rendered, and shown of what that renders.
const ANSWER_LINES: usize = 12;

/// Characters of an answer rendered (its lines are cut to this as well).
const ANSWER_CHARS: usize = 8_000;

/// Characters of a tool call's arguments on its line.
const ARGUMENTS_MAX: usize = 200;

/// `--quiet` (or `resume_replay = false`) was given to this prompt.
static QUIET: AtomicBool = AtomicBool::new(false);

/// The prompt has started: on a session it resumed or forked
/// (`resumed`), and unless `quiet`, show where it was ([`show`]).
/// `quiet` holds for the prompt's later `/resume`s too.
pub fn after_start(run: &hel_agent::Run, resumed: bool, quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
    if resumed && !quiet {
        show(run);
    }
}

/// `/resume` went on in another session (`moved`): show where it was,
/// unless the prompt is quiet.
pub fn after_resume(run: &hel_agent::Run, moved: bool) {
    if moved && !QUIET.load(Ordering::Relaxed) {
        show(run);
    }
}

/// Print the last exchanges of `run`'s conversation on stderr, when
/// stderr is a terminal.
pub fn show(run: &hel_agent::Run) {
    let Some(width) = super::stderr_room() else {
        return;
    };
    for l in lines(run.messages(), width, super::colour_stderr()) {
        crate::note!("{l}");
    }
}

/// The lines a resume prints of `messages` (the conversation, the system
/// prompt first) on a terminal `width` columns wide; coloured when
/// `colour`. Nothing when no instruction was saved.
pub fn lines(messages: &[Value], width: usize, colour: bool) -> Vec<String> {
    let exchanges = exchanges(messages);
    let mut out = Vec::new();
    let shown = exchanges.len().min(EXCHANGES);
    let earlier = exchanges.len() - shown;
    if earlier > 0 {
        out.push(paint(
            colour,
            "2",
            &fit(
                &format!(
                    "hel: … {}; /show for the whole conversation",
                    count(
                        earlier as u64,
                        "earlier instruction",
                        "earlier instructions"
                    )
                ),
                width,
            ),
        ));
    }
    for ex in &exchanges[earlier..] {
        exchange(ex, width, colour, &mut out);
    }
    out
}

/// One instruction and the messages after it, up to the next.
struct Exchange<'a> {
    instruction: &'a Value,
    after: &'a [Value],
}

/// The conversation's exchanges, oldest first: each starts at a user
/// message (what comes before the first, the system prompt, is not one).
fn exchanges(messages: &[Value]) -> Vec<Exchange<'_>> {
    let starts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| role(m) == "user")
        .map(|(i, _)| i)
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let end = starts.get(k + 1).copied().unwrap_or(messages.len());
            Exchange {
                instruction: &messages[i],
                after: &messages[i + 1..end],
            }
        })
        .collect()
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// The text of a message's content: a string, or its text parts.
fn text_of(m: &Value) -> String {
    match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Whether `line` is one of hel's own notes (`[hel: …]`) in a user
/// message, not what the user typed.
fn is_note(line: &str) -> bool {
    let l = line.trim();
    l.starts_with("[hel: ") && l.ends_with(']')
}

/// Print one exchange into `out`.
fn exchange(ex: &Exchange, width: usize, colour: bool, out: &mut Vec<String>) {
    out.push(String::new());
    let text = text_of(ex.instruction);
    let (notes, said): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| is_note(l));
    let said: Vec<&str> = said
        .into_iter()
        .skip_while(|l| l.trim().is_empty())
        .collect();
    for note in notes {
        out.push(paint(colour, "2", &fit(&escape_line(note.trim()), width)));
    }
    for (k, l) in said.iter().take(INSTRUCTION_LINES).enumerate() {
        let lead = if k == 0 { "› " } else { "  " };
        out.push(paint(
            colour,
            "1",
            &fit(&format!("{lead}{}", escape_line(l)), width),
        ));
    }
    if said.len() > INSTRUCTION_LINES {
        out.push(paint(
            colour,
            "2",
            &fit(
                &format!(
                    "  … {}",
                    count(
                        (said.len() - INSTRUCTION_LINES) as u64,
                        "more line",
                        "more lines"
                    )
                ),
                width,
            ),
        ));
    }
    let mut calls = 0usize;
    let mut answer = None;
    for m in ex.after {
        if role(m) != "assistant" {
            continue;
        }
        for (name, arguments) in tool_calls(m) {
            calls += 1;
            if calls <= CALLS {
                out.push(paint(colour, "2", &call_line(name, arguments, width)));
            }
        }
        let text = text_of(m);
        if !text.trim().is_empty() {
            answer = Some(text);
        }
    }
    if calls > CALLS {
        out.push(paint(
            colour,
            "2",
            &fit(
                &format!(
                    "hel: … {}",
                    count((calls - CALLS) as u64, "more tool call", "more tool calls")
                ),
                width,
            ),
        ));
    }
    // An answer is the exchange's last assistant text after its last
    // tool call; an instruction cut off (interrupted, or the process
    // ended) has none.
    let answered = ex
        .after
        .last()
        .is_some_and(|m| role(m) == "assistant" && !text_of(m).trim().is_empty());
    match answer.filter(|_| answered) {
        Some(text) => out.extend(answer_lines(&text, width, colour)),
        None => out.push(paint(
            colour,
            "2",
            &fit("hel: (no answer was saved for this instruction)", width),
        )),
    }
}

/// The (name, arguments) of each tool call of an assistant message.
fn tool_calls(m: &Value) -> Vec<(&str, &str)> {
    let Some(calls) = m.get("tool_calls").and_then(Value::as_array) else {
        return Vec::new();
    };
    calls
        .iter()
        .map(|c| {
            let f = |k: &str| {
                c.get("function")
                    .and_then(|f| f.get(k))
                    .and_then(Value::as_str)
                    .unwrap_or("")
            };
            (f("name"), f("arguments"))
        })
        .collect()
}

/// A tool call's line as the live view prints it when the call starts:
/// `hel: search_replace calc.py` for an edit, else `hel: NAME ARGUMENTS`
/// on one line; cut to the width.
fn call_line(name: &str, arguments: &str, width: usize) -> String {
    // The live view's words for the call (a path, a command), never its
    // start hook: that reads the file as it is now for a diff.
    let words: String = tool::call_words(name, arguments).chars().take(ARGUMENTS_MAX).collect();
    let text = format!("hel: {name} {words}");
    fit(&escape_line(&text), width)
}

/// An answer rendered as the live view renders one (Markdown, escaped),
/// its first [`ANSWER_LINES`] lines, then a count of the rest.
fn answer_lines(text: &str, width: usize, colour: bool) -> Vec<String> {
    let all: Vec<&str> = text.lines().collect();
    let mut source = String::new();
    for l in all.iter().take(ANSWER_LINES) {
        if source.len() >= ANSWER_CHARS {
            break;
        }
        let room = ANSWER_CHARS - source.len();
        source.extend(l.chars().take(room));
        source.push('\n');
    }
    let rendered = super::markdown::Markdown::new(colour, width).whole(&escape_text(&source));
    let mut out: Vec<String> = rendered
        .lines()
        .map(|l| {
            // Markdown fits its lines; one without colour is cut again.
            if colour || columns(l) <= width {
                l.to_owned()
            } else {
                fit(l, width)
            }
        })
        .collect();
    let hidden = all.len().saturating_sub(ANSWER_LINES);
    let extra = out.len().saturating_sub(ANSWER_LINES);
    out.truncate(ANSWER_LINES);
    if hidden + extra > 0 {
        out.push(paint(
            colour,
            "2",
            &fit(
                &format!(
                    "… {} (/show for all of it)",
                    count((hidden + extra) as u64, "more line", "more lines")
                ),
                width,
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn convo(n: usize) -> Vec<Value> {
        let mut m = vec![json!({"role": "system", "content": "sys"})];
        for i in 0..n {
            m.push(json!({"role": "user", "content": format!("instruction {i}")}));
            m.push(json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": format!("c{i}"), "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\u{1b}[2J\"}"}}
            ]}));
            m.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "a\nb"}));
            m.push(json!({"role": "assistant", "content": format!("answer **{i}**")}));
        }
        m
    }

    #[test]
    fn the_last_three_exchanges_and_a_count_of_the_rest() {
        let shown = lines(&convo(5), 40, false);
        assert_eq!(shown[0], "hel: … 2 earlier instructions; /show fo…");
        let text = shown.join("\n");
        assert!(!text.contains("instruction 1"), "{text}");
        for i in 2..5 {
            assert!(text.contains(&format!("› instruction {i}")), "{text}");
            assert!(text.contains(&format!("answer {i}")), "{text}");
        }
        assert!(
            text.contains("hel: bash {\"command\":\"ls^[[2J\"}"),
            "{text}"
        );
        assert!(shown.iter().all(|l| columns(l) <= 40), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
    }

    #[test]
    fn an_edit_reads_as_its_path_and_a_cut_off_instruction_says_so() {
        let m = vec![
            json!({"role": "user", "content": "[hel: the instruction before was interrupted]\nfix it\nplease"}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "e1", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\":\"calc.py\",\"content\":\"x\"}"}}
            ]}),
            json!({"role": "tool", "tool_call_id": "e1", "content": "interrupted"}),
        ];
        let text = lines(&m, 80, false).join("\n");
        assert!(text.contains("hel: write_file calc.py"), "{text}");
        assert!(text.contains("› fix it\n  please"), "{text}");
        assert!(
            text.contains("[hel: the instruction before was interrupted]"),
            "{text}"
        );
        assert!(text.contains("no answer was saved"), "{text}");
        assert!(lines(&m[..0], 80, false).is_empty());
    }

    #[test]
    fn long_answers_and_instructions_are_bounded() {
        let long = (0..500)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let m = vec![
            json!({"role": "user", "content": long}),
            json!({"role": "assistant", "content": long}),
        ];
        let shown = lines(&m, 80, false);
        assert!(shown.len() < 25, "{shown:?}");
        assert!(
            shown.iter().any(|l| l.contains("496 more lines")),
            "{shown:?}"
        );
        assert!(
            shown.iter().any(|l| l.contains("488 more lines")),
            "{shown:?}"
        );
    }
}
