//! The system message: the execution environment and the project's
//! instructions file. Nothing in it changes between runs of the same project
//! (no date), so a resumed session's prompt stays cacheable and the Meter
//! rule can compare it.

use std::io::Read;
use std::os::fd::AsFd;

use serde_json::{json, Value};

use crate::tools::args::ToolName;
use crate::tools::paths::{self, OpenError, PathError, ProjectDir, Target};

/// Bytes of the instructions file used; the rest is left out with a warning.
pub const CONTEXT_FILE_BYTES: usize = 64 << 10;

/// Why the instructions file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ContextFileError {
    #[error("it is inside {}/", hel_store::STORE_DIR)]
    InStore,
    #[error("it is the project directory")]
    ProjectDir,
    #[error("it is {0}")]
    NotRegular(&'static str),
    #[error("it changed while it was being opened")]
    Changed,
    #[error("it is not UTF-8 text")]
    NotText,
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Why the instructions file was left out or cut.
#[derive(Debug, thiserror::Error)]
pub enum ContextFileWarning {
    #[error("cannot read {name}: {error}; continuing without it")]
    Unreadable {
        name: String,
        error: ContextFileError,
    },
    #[error("{name} is larger than {kib} KiB; only its first {kib} KiB are used")]
    Cut { name: String, kib: usize },
}

/// Build the system message for the project. `context_file` is the
/// instructions file to read (None: `--no-context-file`), opened beneath
/// the project like the file tools open files: a regular file inside the
/// project and outside `.hel/`, never blocking; its first
/// [`CONTEXT_FILE_BYTES`] are used. A file that exists but cannot be used
/// is left out with a warning.
pub fn build(
    project: &ProjectDir,
    context_file: Option<&str>,
    tools: &[ToolName],
) -> (Value, Vec<ContextFileWarning>) {
    let mut warnings = Vec::new();
    let mut text = format!(
        "You are hel, a coding agent working in a terminal on the project in the working directory.\n\
         \n\
         # Environment\n\
         - OS: {} ({})\n\
         - Shell: bash\n\
         - Working directory: {}\n\
         \n\
         # Tool rules\n",
        std::env::consts::OS,
        std::env::consts::ARCH,
        project.path().display()
    );
    if tools.is_empty() {
        text.push_str("- No tools are available in this run: answer from the conversation.\n");
    } else {
        let names: Vec<&str> = tools.iter().map(|t| t.as_str()).collect();
        text.push_str(&format!("- Tools: {}.\n", names.join(", ")));
        text.push_str(
            "- Paths are relative to the working directory; files outside it, and .hel/, are off limits.\n\
             - read_file returns at most 10,000 bytes; continue a truncated read with the cursor it gives.\n\
             - Large tool outputs are saved to a spill file; page through it with read_file.\n\
             - bash runs in a sandbox: it may write only inside the project and its temporary directory.\n\
             - When the task is done, answer without calling a tool.\n",
        );
        if project.path().join(".git").exists() {
            text.push_str(if project.git_writes() {
                "- Commits work, but .git's config and hooks are read-only to bash and the file tools.\n"
            } else {
                "- .git is read-only to bash and the file tools: commits and git config are left to the user.\n"
            });
        }
    }
    if let Some(name) = context_file {
        match context(project, name, &mut warnings) {
            Ok(Some(rules)) => {
                text.push_str(&format!(
                    "\n# Project instructions ({name})\n{}",
                    rules.trim_end()
                ));
                text.push('\n');
            }
            Ok(None) => {}
            Err(error) => warnings.push(ContextFileWarning::Unreadable {
                name: name.to_owned(),
                error,
            }),
        }
    }
    (json!({"role": "system", "content": text}), warnings)
}

/// The instructions file's text (None: there is none), cut to
/// [`CONTEXT_FILE_BYTES`] at a character boundary with a warning.
fn context(
    project: &ProjectDir,
    name: &str,
    warnings: &mut Vec<ContextFileWarning>,
) -> Result<Option<String>, ContextFileError> {
    let entry = match project.resolve(name, false)? {
        Target::Entry(e) => e,
        Target::Store(_) => return Err(ContextFileError::InStore),
    };
    let (Some(file_name), Some(st)) = (&entry.name, &entry.stat) else {
        return match entry.name {
            None => Err(ContextFileError::ProjectDir),
            Some(_) => Ok(None),
        };
    };
    if !paths::is_regular(st) {
        return Err(ContextFileError::NotRegular(paths::kind_name(st)));
    }
    let file =
        paths::open_regular_at(entry.parent.as_fd(), file_name, Some(st)).map_err(|e| match e {
            OpenError::Io(e) => ContextFileError::Io(e),
            _ => ContextFileError::Changed,
        })?;
    let mut bytes = Vec::new();
    file.take(CONTEXT_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > CONTEXT_FILE_BYTES {
        let mut cut = CONTEXT_FILE_BYTES;
        while cut > 0 && (bytes[cut] & 0xC0) == 0x80 {
            cut -= 1;
        }
        bytes.truncate(cut);
        warnings.push(ContextFileWarning::Cut {
            name: name.to_owned(),
            kib: CONTEXT_FILE_BYTES >> 10,
        });
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| ContextFileError::NotText)
}
