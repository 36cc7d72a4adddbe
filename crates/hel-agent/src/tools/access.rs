//! Who may do what: the access modes, how each call came to run, and the
//! confirmation a write or command may need.

use serde::Serialize;

/// Which calls run without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only the reading tools are offered.
    ReadOnly,
    /// Writes and commands are confirmed through [`Confirm`].
    Confirm,
    /// Everything runs.
    Auto,
}

impl Access {
    /// Whether sandboxed commands may use the network when the user said
    /// nothing (`--network`, `--no-network`, `network = …`): not under
    /// `auto`, where nobody reads a command before it runs (a command
    /// that a prompt injection wrote could send what it can read
    /// anywhere); yes under `confirm`, where the user approves each one
    /// (and read-only runs none).
    pub fn network_by_default(self) -> bool {
        self != Access::Auto
    }
}

/// How a call came to run (or not), as record.json names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Auto,
    Confirmed,
    Denied,
    ReadOnly,
}

/// The answer to a confirmation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Yes,
    No,
    /// No, with the user's reason for the model.
    NoBecause(String),
    /// Nobody can be asked; the text says why.
    Unavailable(String),
    /// Not asked: the call cannot be shown whole (it does not fit the
    /// terminal); the text says why and what the model can do instead.
    Refused(String),
}

/// What a confirmation asks about. Everything in it comes from the model:
/// to be shown (escaped), never obeyed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The call in a few words: ``run `make` ``, `write_file src/a.rs`.
    pub summary: String,
    /// The tool the call is of.
    pub tool: super::args::ToolName,
    /// What it would do, line by line: the command in full, the lines a
    /// search_replace takes out (`-`) and puts in (`+`), the head of what
    /// a write_file writes (`+`) after its size.
    pub preview: Vec<String>,
    /// bash: the command (an "always" may allow exactly it).
    pub command: Option<String>,
    /// bash: the program a simple command runs (no `;`, `|`, `&`,
    /// redirection, `$(` or backquote): an "always" may allow every
    /// command of it.
    pub program: Option<String>,
    /// write_file, search_replace: the path written (an "always" allows
    /// this tool on exactly it).
    pub path: Option<String>,
    /// write_file, search_replace: the change as the call gives it, for
    /// a diff against the file.
    pub edit: Option<Edit>,
    /// The handles of secrets the call names (`‹secret:KIND:N›`): hel
    /// puts in their values when it runs (the question says so).
    pub secrets: Vec<String>,
}

/// An edit's change as its call gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// write_file: the whole new content.
    Write(String),
    /// search_replace: the text taken out and the text put in.
    Replace { search: String, replace: String },
}

/// Lines of new content a write_file's preview shows.
const HEAD_LINES: usize = 10;

/// Asks the user to allow a write or a command. It may block (it runs on
/// a blocking thread).
pub trait Confirm: Send + Sync {
    /// `request` is what would happen, such as ``run `make` `` or
    /// `write_file src/a.rs`; it comes from the model.
    fn ask(&self, request: &str) -> Answer;

    /// Ask about `request`, showing what it would do where that can be
    /// shown (the default asks with its summary only).
    fn confirm(&self, request: &Request) -> Answer {
        self.ask(&request.summary)
    }
}

impl Request {
    /// What `call` asks to be allowed.
    pub fn of(call: &super::args::Call) -> Request {
        use super::args::Call;
        let mut request = Request {
            summary: call.request(),
            tool: call.tool(),
            preview: Vec::new(),
            command: None,
            program: None,
            path: None,
            edit: None,
            secrets: Vec::new(),
        };
        match call {
            Call::Bash(a) => {
                // Split at newlines only: a carriage return stays in its
                // line, to be shown escaped.
                request.preview = a
                    .command
                    .split_terminator('\n')
                    .map(str::to_owned)
                    .collect();
                request.command = Some(a.command.clone());
                request.program = simple_program(&a.command).map(str::to_owned);
            }
            Call::WriteFile(a) => {
                request.path = Some(a.path.clone());
                request.edit = Some(Edit::Write(a.content.clone()));
                let lines = a.content.lines().count();
                request.preview.push(format!(
                    "{} {}, {} {}",
                    lines,
                    if lines == 1 { "line" } else { "lines" },
                    a.content.len(),
                    if a.content.len() == 1 {
                        "byte"
                    } else {
                        "bytes"
                    }
                ));
                request
                    .preview
                    .extend(a.content.lines().take(HEAD_LINES).map(|l| format!("+{l}")));
                if lines > HEAD_LINES {
                    request
                        .preview
                        .push(format!("… {} more lines", lines - HEAD_LINES));
                }
            }
            Call::SearchReplace(a) => {
                request.path = Some(a.path.clone());
                request.edit = Some(Edit::Replace {
                    search: a.search.clone(),
                    replace: a.replace.clone(),
                });
                request
                    .preview
                    .extend(a.search.split_terminator('\n').map(|l| format!("-{l}")));
                request
                    .preview
                    .extend(a.replace.split_terminator('\n').map(|l| format!("+{l}")));
            }
            Call::ReadFile(_) | Call::Glob(_) | Call::Grep(_) => {}
        }
        request
    }
}

/// The program a simple command runs: one line, none of `;`, `|`, `&`,
/// `<`, `>`, `$(`, a backquote or a leading variable assignment.
pub fn simple_program(command: &str) -> Option<&str> {
    let c = command.trim();
    if c.is_empty() || c.contains(['\n', ';', '|', '&', '<', '>', '`']) || c.contains("$(") {
        return None;
    }
    let first = c.split_whitespace().next()?;
    (!first.contains('=')).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_commands_have_a_program() {
        assert_eq!(simple_program("cargo test -p hel"), Some("cargo"));
        assert_eq!(simple_program("  ls "), Some("ls"));
        for not in [
            "make; rm -rf x",
            "a | b",
            "a && b",
            "echo > f",
            "cat < f",
            "echo $(id)",
            "echo `id`",
            "FOO=1 make",
            "a\nb",
            "",
        ] {
            assert_eq!(simple_program(not), None, "{not:?}");
        }
    }
}
