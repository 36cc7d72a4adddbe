//! The system message: the execution environment and the project's
//! instructions file. Nothing in it changes between runs of the same project
//! (no date), so a resumed session's prompt stays cacheable and the Meter
//! rule can compare it.

use std::path::Path;

use serde_json::{json, Value};

/// Build the system message for `project`. `context_file` is the
/// instructions file to read (None: `--no-context-file`). A file that
/// exists but cannot be read is left out with a warning on stderr.
pub fn build(project: &Path, context_file: Option<&str>, tool_names: &[&str]) -> Value {
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
        project.display()
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
        let path = project.join(name);
        match std::fs::read_to_string(&path) {
            Ok(rules) => {
                text.push_str(&format!(
                    "\n# Project instructions ({name})\n{}",
                    rules.trim_end()
                ));
                text.push('\n');
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => crate::note!(
                "hel: warning: cannot read {}: {e}; continuing without it",
                path.display()
            ),
        }
    }
    json!({"role": "system", "content": text})
}
