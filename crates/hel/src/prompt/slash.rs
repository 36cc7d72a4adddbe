//! The prompt's slash commands: a one-line entry whose first word is one
//! of [`HELP`]'s. Anything else, a line starting with a space included, is
//! an instruction for the model.

/// A slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slash {
    Help,
    Sessions,
    Log,
    Show,
    /// The last tool result whole, through the pager.
    Last,
    /// Continue in a fork of this session, from a checkpoint (None: the
    /// newest).
    Fork(Option<String>),
    Compact,
    /// Send the next requests to this model (None: list the server's).
    Model(Option<String>),
    /// Change the access mode (None: show it and the choices).
    Access(Option<String>),
    /// Name this session (`hel sessions rename`).
    Rename(String),
    /// Ask the model to look at the project and write (or improve)
    /// `AGENTS.md`.
    Init,
    /// Send the last instruction again when it got no answer.
    Retry,
    /// `hel undo` of this session.
    Undo,
    /// `hel diff` of this session's newest instruction.
    Diff,
    /// Pick a checkpoint of this session and go on from it in a fork.
    Rewind,
    /// Draw this session's family of forks (`hel sessions tree`) and go
    /// on from an answer picked in it, in a fork.
    Tree,
    /// Pick another session of the project (or the one named) and go on
    /// in it.
    Resume(Option<String>),
    Exit,
}

/// Every command's name, for Tab completion (each one [`parse`] knows).
pub const NAMES: &[&str] = &[
    "/access",
    "/compact",
    "/diff",
    "/exit",
    "/fork",
    "/help",
    "/init",
    "/last",
    "/log",
    "/model",
    "/quit",
    "/rename",
    "/resume",
    "/retry",
    "/rewind",
    "/sessions",
    "/show",
    "/tree",
    "/undo",
];

/// Where [`HELP`]'s second column starts.
pub const HELP_COLUMN: usize = 21;

pub const HELP: &str = "\
Commands:
  /help              this list
  /sessions          the project's sessions
  /log               this session's checkpoints
  /show              this session's conversation
  /last              the last tool result whole (a command's whole output)
  /fork [CHECKPOINT] continue in a new session forked from a checkpoint of
                     this one (default: the newest); the files stay as they are
  /rewind            pick a checkpoint of this session and continue from it
                     in a fork, its files restored if you say so
  /tree              this session and its forks as a tree of answers; pick
                     one to continue from in a fork (files as for /rewind)
  /undo              put back the files as they were before the last
                     instruction that changed any (as `hel undo`)
  /diff              what the last instruction changed (as `hel diff`)
  /resume [SESSION]  continue another session of this project (none: pick)
  /retry             send the last instruction again (when it got no answer)
  /compact           summarize the older part of the conversation now
  /model [NAME]      send the next requests to model NAME (none: list the
                     server's models)
  /access [MODE]     ask before writes and commands (confirm), or not (auto),
                     or run only reading tools (read-only); none: show it
  /rename NAME       name this session (any command then takes the name)
  /init              have the model look at the project and write AGENTS.md
  /exit              leave (also Ctrl-D, or Ctrl-C twice within a second)
@PATH in an instruction sends that file's content with it (at most 64 KiB).
Keys: Enter sends, Alt-Enter starts a new line, a paste is sent whole;
Tab completes commands, session names after /resume, and @paths (and
lists them when there are several); Shift-Tab cycles the access mode;
Ctrl-C cancels a running instruction (your next message carries it, or
/retry sends it again); Up and Down walk the history.
A line starting with a space is always sent to the model.";

/// The command `entry` is, if it is one; `Err` says what is wrong with a
/// command's words.
pub fn parse(entry: &str) -> Option<Result<Slash, String>> {
    if !entry.starts_with('/') || entry.trim_end().contains('\n') {
        return None;
    }
    let mut words = entry.split_whitespace();
    let name = words.next()?;
    let args: Vec<&str> = words.collect();
    let none = |cmd: Slash| match args.as_slice() {
        [] => Ok(cmd),
        _ => Err(format!("{name} takes no arguments")),
    };
    Some(match name {
        "/help" => none(Slash::Help),
        "/sessions" => none(Slash::Sessions),
        "/log" => none(Slash::Log),
        "/show" => none(Slash::Show),
        "/last" => none(Slash::Last),
        "/compact" => none(Slash::Compact),
        "/init" => none(Slash::Init),
        "/retry" => none(Slash::Retry),
        "/undo" => none(Slash::Undo),
        "/diff" => none(Slash::Diff),
        "/rewind" => none(Slash::Rewind),
        "/tree" => none(Slash::Tree),
        "/resume" => match args.as_slice() {
            [] => Ok(Slash::Resume(None)),
            [s] => Ok(Slash::Resume(Some((*s).to_owned()))),
            _ => Err("/resume takes one SESSION at most".into()),
        },
        "/exit" | "/quit" => none(Slash::Exit),
        "/fork" => match args.as_slice() {
            [] => Ok(Slash::Fork(None)),
            [at] => Ok(Slash::Fork(Some((*at).to_owned()))),
            _ => Err("/fork takes one CHECKPOINT at most".into()),
        },
        "/model" => match args.as_slice() {
            [] => Ok(Slash::Model(None)),
            [model] => Ok(Slash::Model(Some((*model).to_owned()))),
            _ => Err("/model takes one model NAME, such as /model deepseek-v4-flash".into()),
        },
        "/access" => match args.as_slice() {
            [] => Ok(Slash::Access(None)),
            [mode] => Ok(Slash::Access(Some((*mode).to_owned()))),
            _ => Err("/access takes one MODE: read-only, confirm or auto".into()),
        },
        "/rename" => match args.as_slice() {
            [new] => Ok(Slash::Rename((*new).to_owned())),
            _ => Err("/rename takes one NAME, such as /rename fix-login".into()),
        },
        _ => Err(format!(
            "no command {name} (/help lists them); to send this to the model, start the line with a space"
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_a_command() {
        for name in NAMES {
            assert!(
                !matches!(parse(name), Some(Err(e)) if e.starts_with("no command")),
                "{name}"
            );
        }
    }

    #[test]
    fn commands_and_instructions() {
        assert_eq!(parse("/help"), Some(Ok(Slash::Help)));
        assert_eq!(
            parse("/fork  3f2a "),
            Some(Ok(Slash::Fork(Some("3f2a".into()))))
        );
        assert_eq!(
            parse("/model m1"),
            Some(Ok(Slash::Model(Some("m1".into()))))
        );
        assert_eq!(parse("/model"), Some(Ok(Slash::Model(None))));
        assert!(matches!(parse("/model a b"), Some(Err(e)) if e.contains("deepseek-v4-flash")));
        assert_eq!(
            parse("/rename fix-login"),
            Some(Ok(Slash::Rename("fix-login".into())))
        );
        assert!(matches!(parse("/rename a b"), Some(Err(_))));
        assert!(matches!(parse("/log x"), Some(Err(_))));
        assert_eq!(parse("/init"), Some(Ok(Slash::Init)));
        assert_eq!(
            parse("/access auto"),
            Some(Ok(Slash::Access(Some("auto".into()))))
        );
        assert_eq!(parse("/access"), Some(Ok(Slash::Access(None))));
        assert_eq!(parse("/retry"), Some(Ok(Slash::Retry)));
        assert_eq!(parse("/undo"), Some(Ok(Slash::Undo)));
        assert_eq!(parse("/rewind"), Some(Ok(Slash::Rewind)));
        assert_eq!(parse("/tree"), Some(Ok(Slash::Tree)));
        assert!(matches!(parse("/tree x"), Some(Err(_))));
        assert_eq!(
            parse("/resume fix-login"),
            Some(Ok(Slash::Resume(Some("fix-login".into()))))
        );
        assert!(matches!(parse("/diff x"), Some(Err(_))));
        assert!(matches!(parse("/init now"), Some(Err(_))));
        assert!(matches!(parse("/etc/passwd?"), Some(Err(e)) if e.contains("space")));
        assert_eq!(parse(" /etc/passwd?"), None);
        assert_eq!(parse("/help\nmore"), None);
        assert_eq!(parse("hello"), None);
    }
}
