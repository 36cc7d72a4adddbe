//! Events as lines on stderr: the agent's progress, tool activity and
//! warnings (stdout carries only answers and reports). [`live::Live`] also
//! shows a streamed answer on a terminal as it arrives.

pub mod live;
pub mod markdown;
pub mod tail;

use std::path::Path;

use hel_agent::event::{Event, Observer, Warning};
use hel_agent::project::Found;
use hel_agent::terminal::escape_line;

use crate::exit::Exit;

/// Print a line on stderr. A closed stderr (say, piped into a program that
/// exited) is no reason for an agent run to stop, so errors are ignored.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `--color` as given (auto until set).
static COLOR: std::sync::OnceLock<crate::cli::ColorChoice> = std::sync::OnceLock::new();

/// Take `--color` (once, at the start).
pub fn set_color(choice: crate::cli::ColorChoice) {
    let _ = COLOR.set(choice);
}

/// Whether what goes to a stream that is (`terminal`) or is not a
/// terminal is coloured: `--color always` or `never`, else on a terminal
/// unless `NO_COLOR` is set (and not empty).
pub fn colour_for(terminal: bool) -> bool {
    use crate::cli::ColorChoice;
    match COLOR.get().copied().unwrap_or(ColorChoice::Auto) {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    }
}

/// Whether stderr's lines are coloured.
fn colour_stderr() -> bool {
    use std::io::IsTerminal;
    colour_for(std::io::stderr().is_terminal())
}

/// `text` in the SGR style `code` when `on`.
pub fn paint(on: bool, code: &str, text: &str) -> String {
    if on {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// One line of text from outside hel (names, arguments, paths, server
/// messages), made safe for a terminal; on a coloured terminal, hel's
/// progress is dimmed and warnings stand out.
pub fn line(text: &str) {
    let safe = escape_line(text);
    let code = if safe.starts_with("hel: warning") {
        "33"
    } else if safe.starts_with("hel: instruction incomplete") {
        "31"
    } else if safe.starts_with("hel:") {
        "2"
    } else {
        ""
    };
    if code.is_empty() {
        note!("{safe}");
    } else {
        note!("{}", paint(colour_stderr(), code, &safe));
    }
}

/// A line saying what failed, in red on a coloured terminal.
pub fn error(text: &str) {
    note!("{}", paint(colour_stderr(), "1;31", &escape_line(text)));
}

/// How much of a tool line's text (after a prefix of `prefix`
/// characters) is shown: what fits the terminal when stderr is one, else
/// 120 characters (a log's lines stay as they were).
fn tool_room(prefix: usize) -> usize {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        crate::confirm::width().saturating_sub(prefix + 1).max(20)
    } else {
        120
    }
}

/// Renders a run's events on stderr.
pub struct Stderr;

impl Observer for Stderr {
    fn event(&self, event: Event) {
        match event {
            Event::Session(Some(id)) => line(&format!("session: {id}")),
            Event::Session(None) => line("session: none"),
            Event::Project {
                root,
                found,
                instructions,
            } => {
                if let Some(text) = project_line(root.as_deref(), found, &instructions) {
                    line(&text)
                }
            }
            Event::SettingsChanged(diffs) => line(&format!(
                "hel: note: continuing with the current settings ({}); the saved ones stay in the checkpoint",
                diffs.join(", ")
            )),
            Event::ToolStarted {
                name, arguments, ..
            } => {
                let room = tool_room(6 + name.chars().count());
                line(&format!("hel: {name} {}", one_line(&arguments, room)))
            }
            // A denial is hel's own sentence: shown whole.
            Event::ToolFinished { content, ok: false, .. } if content.starts_with("denied: ") => {
                line(&format!("hel:   {}", one_line(&content, 400)))
            }
            Event::ToolFinished { content, .. } => line(&format!(
                "hel:   {}",
                one_line(&content, tool_room(7))
            )),
            Event::Retry { error, wait } => line(&format!(
                "hel: {error}; retrying in {:.1}s",
                wait.as_secs_f64()
            )),
            Event::Trimmed { under } => line(&format!(
                "hel: trimmed old tool results to stay under {under} tokens"
            )),
            Event::Compacting { messages } => line(&format!(
                "hel: compacting {messages} messages into a summary"
            )),
            Event::CompactionSkipped => line(
                "hel: the compaction summary is not smaller than what it would replace; keeping the conversation as is",
            ),
            Event::OutputLowered {
                configured,
                window,
                limit,
            } => line(&format!(
                "hel: note: the output limit of {configured} tokens (--max-output-tokens) does not fit the context window of {window} tokens (--context-window) with the conversation; each request asks for what fits ({limit} tokens now)"
            )),
            Event::CheckpointSaved { .. } => {}
            Event::Relocated {
                from,
                to,
                checkpoint,
            } => line(&format!(
                "hel: the session moved from {from} to {to} (recorded as checkpoint {})",
                &checkpoint.to_hex()[..12]
            )),
            // The answer's text is Live's to show.
            // The live view's (on a terminal, under the spinner).
            Event::ToolOutput(_) => {}
            Event::Waiting
            | Event::ResponseStarted
            | Event::TextDelta(_)
            | Event::ReasoningDelta(_)
            | Event::ResponseEnded { .. }
            | Event::Response { .. }
            | Event::ResponseIncomplete => {}
            Event::Warning(w) => line(&format!("hel: warning: {}", warning(&w))),
        }
    }
}

/// What a run says of itself in the line after `session: <uuid>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intro {
    /// The model requests go to.
    pub model: String,
    /// The access mode (`read-only`, `confirm`, `auto`).
    pub access: &'static str,
    /// The interactive prompt: its `/help` is named.
    pub help: bool,
}

/// `hel: project ROOT (why) · instructions A, B`: the project's root when
/// it is not where hel started, and the instructions files read; None
/// when there is neither.
pub fn project_line(root: Option<&Path>, found: Found, instructions: &[String]) -> Option<String> {
    start_line(None, root, found, instructions)
}

/// The line after `session: <uuid>`: `hel: model M · access A · project
/// ROOT (why) · instructions A, B · /help lists the commands`, each part
/// only where it applies (None: no part does).
pub fn start_line(
    intro: Option<&Intro>,
    root: Option<&Path>,
    found: Found,
    instructions: &[String],
) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(i) = intro {
        parts.push(format!("model {}", i.model));
        parts.push(format!("access {}", i.access));
    }
    if let Some(root) = root {
        parts.push(format!("project {} ({})", root.display(), found.why()));
    }
    if !instructions.is_empty() {
        parts.push(format!("instructions {}", instructions.join(", ")));
    }
    if intro.is_some_and(|i| i.help) {
        parts.push("/help lists the commands".to_owned());
    }
    (!parts.is_empty()).then(|| format!("hel: {}", parts.join(" · ")))
}

/// A warning in words; a store error in it reads as it would on exit.
fn warning(w: &Warning) -> String {
    match w {
        Warning::NoSession { store, error } => format!(
            "cannot create a session in {} ({}); this conversation will not be saved",
            store.display(),
            Exit::store(error)
        ),
        w => w.to_string(),
    }
}

/// `n` and the noun for it: `1 object`, `2 objects`, `0 objects`.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `s` on one line (newlines as spaces), cut to `max` characters.
fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}
