//! Events as lines on stderr: the agent's progress, tool activity and
//! warnings (stdout carries only answers and reports). [`live::Live`] also
//! shows a streamed answer on a terminal as it arrives.

pub mod live;

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

/// One line of text from outside hel (names, arguments, paths, server
/// messages), made safe for a terminal.
pub fn line(text: &str) {
    note!("{}", escape_line(text));
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
            Event::ToolStarted { name, arguments } => {
                line(&format!("hel: {name} {}", one_line(&arguments, 120)))
            }
            // A denial is hel's own sentence: shown whole.
            Event::ToolFinished { content, ok: false, .. } if content.starts_with("denied: ") => {
                line(&format!("hel:   {}", one_line(&content, 400)))
            }
            Event::ToolFinished { content, .. } => {
                line(&format!("hel:   {}", one_line(&content, 120)))
            }
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
            Event::Waiting
            | Event::ResponseStarted
            | Event::TextDelta(_)
            | Event::ResponseEnded { .. }
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
