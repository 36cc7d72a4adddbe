//! The system message: the execution environment and the project's
//! instructions file. Nothing in it changes between runs of the same project
//! (no date), so a resumed session's prompt stays cacheable and the Meter
//! rule can compare it.

use std::io::Read;

use serde_json::{json, Value};

use std::os::fd::AsFd;

use crate::tools::paths::{self, OpenError, ProjectDir, Target};

/// Bytes of the instructions file used; the rest is left out with a warning.
pub const CONTEXT_FILE_BYTES: usize = 64 << 10;

/// Build the system message for the project. `context_file` is the
/// instructions file to read (None: `--no-context-file`), opened beneath
/// the project like the file tools open files: a regular file inside the
/// project and outside `.hel/`, never blocking; its first
/// [`CONTEXT_FILE_BYTES`] are used. A file that exists but cannot be used
/// is left out with a warning on stderr.
pub fn build(project: &ProjectDir, context_file: Option<&str>, tool_names: &[&str]) -> Value {
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
    if tool_names.is_empty() {
        text.push_str("- No tools are available in this run: answer from the conversation.\n");
    } else {
        text.push_str(&format!("- Tools: {}.\n", tool_names.join(", ")));
        text.push_str(
            "- Paths are relative to the working directory; files outside it, and .hel/, are off limits.\n\
             - read_file returns at most 10,000 bytes; continue a truncated read with the cursor it gives.\n\
             - Large tool outputs are saved to a spill file; page through it with read_file.\n\
             - bash runs in a sandbox: it may write only inside the project and its temporary directory.\n\
             - When the task is done, answer without calling a tool.\n",
        );
    }
    if let Some(name) = context_file {
        match context(project, name) {
            Ok(Some(rules)) => {
                text.push_str(&format!(
                    "\n# Project instructions ({name})\n{}",
                    rules.trim_end()
                ));
                text.push('\n');
            }
            Ok(None) => {}
            Err(e) => crate::note!(
                "hel: warning: cannot read {}: {}; continuing without it",
                crate::terminal::escape_line(name),
                crate::terminal::escape_line(&e)
            ),
        }
    }
    json!({"role": "system", "content": text})
}

/// The instructions file's text (None: there is none), cut to
/// [`CONTEXT_FILE_BYTES`] at a character boundary with a warning.
fn context(project: &ProjectDir, name: &str) -> Result<Option<String>, String> {
    let entry = match project.resolve(name, false)? {
        Target::Entry(e) => e,
        Target::Store(_) => return Err("it is inside .hel/".into()),
    };
    let (Some(file_name), Some(st)) = (&entry.name, &entry.stat) else {
        return match entry.name {
            None => Err("it is the project directory".into()),
            Some(_) => Ok(None),
        };
    };
    if !paths::is_regular(st) {
        return Err(format!("it is {}", paths::kind_name(st)));
    }
    let file =
        paths::open_regular_at(entry.parent.as_fd(), file_name, Some(st)).map_err(|e| match e {
            OpenError::Io(e) => e.to_string(),
            _ => "it changed while it was being opened".to_owned(),
        })?;
    let mut bytes = Vec::new();
    file.take(CONTEXT_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() > CONTEXT_FILE_BYTES {
        let mut cut = CONTEXT_FILE_BYTES;
        while cut > 0 && (bytes[cut] & 0xC0) == 0x80 {
            cut -= 1;
        }
        bytes.truncate(cut);
        crate::note!(
            "hel: warning: {} is larger than {} KiB; only its first {} KiB are used",
            crate::terminal::escape_line(name),
            CONTEXT_FILE_BYTES >> 10,
            CONTEXT_FILE_BYTES >> 10
        );
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "it is not UTF-8 text".to_owned())
}
