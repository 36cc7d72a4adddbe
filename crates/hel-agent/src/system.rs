//! The system message: the execution environment and the project's
//! instructions (`HEL.md` and `AGENTS.md`). Nothing in it changes between
//! runs started in the same directory of a project (no date), so a resumed
//! session's prompt stays cacheable and the Meter rule can compare it.

use std::os::fd::AsFd;

use serde_json::{json, Value};

use crate::tools::args::ToolName;
use crate::tools::paths::{self, OpenError, PathError, ProjectDir, Target};

/// Bytes of project instructions used, all files together; the rest is
/// left out with a warning.
pub(crate) const CONTEXT_FILE_BYTES: usize = 64 << 10;

/// The instructions file read at the project's root (and its name for
/// `--context-file`'s default).
pub(crate) const HEL_MD: &str = "HEL.md";
/// The instructions file most agents read, at the root and in each
/// directory on the way down to where hel started.
pub const AGENTS_MD: &str = "AGENTS.md";

/// Which project instructions a run reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instructions {
    /// None (`--no-context-file`).
    None,
    /// `HEL.md` and `AGENTS.md` at the project's root, then `AGENTS.md`
    /// in each directory below it on the way down to where hel started,
    /// the nearest last (as Codex reads them); those that exist.
    Default,
    /// This one file (`--context-file NAME`), relative to where hel
    /// started.
    File(String),
}

/// Why an instructions file cannot be used.
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

/// Why an instructions file was left out or cut.
#[derive(Debug, thiserror::Error)]
pub enum ContextFileWarning {
    #[error("cannot read {name}: {error}; continuing without it")]
    Unreadable {
        name: String,
        error: ContextFileError,
    },
    #[error("{name} is larger than {kib} KiB; only its first {kib} KiB are used")]
    Cut { name: String, kib: usize },
    /// The files before it used up the budget they share.
    #[error("{name} does not fit in the {kib} KiB the project instructions share; {}", if *used == 0 { "it is left out".to_owned() } else { format!("only its first {used} bytes are used") })]
    OverBudget {
        name: String,
        kib: usize,
        used: usize,
    },
}

/// The system message and what went into it.
#[derive(Debug)]
pub(crate) struct System {
    pub message: Value,
    /// The instructions files read, in order: at the root by their path
    /// relative to it, `--context-file` as given.
    pub files: Vec<String>,
    pub warnings: Vec<ContextFileWarning>,
}

/// Build the system message for the project held by `project` (which
/// knows where hel started). The instructions files are opened beneath
/// the project like the file tools open files: regular files inside the
/// project and outside `.hel/`, never blocking; together their first
/// [`CONTEXT_FILE_BYTES`] are used. A file that exists but cannot be used
/// is left out with a warning.
pub(crate) fn build(
    project: &ProjectDir,
    instructions: &Instructions,
    tools: &[ToolName],
) -> System {
    let mut warnings = Vec::new();
    let root = project.path();
    let cwd = project.cwd();
    let mut text = format!(
        "You are hel, a coding agent working in a terminal on the project in the working directory.\n\
         \n\
         # Environment\n\
         - OS: {} ({})\n\
         - Shell: bash\n\
         - Working directory: {}\n",
        std::env::consts::OS,
        std::env::consts::ARCH,
        cwd.display()
    );
    let below = cwd != root;
    if below {
        text.push_str(&format!(
            "- Project root: {} (the working directory is inside it; .hel/ paths, such as spill files, are relative to the root)\n",
            root.display()
        ));
    }
    text.push_str("\n# Tool rules\n");
    if tools.is_empty() {
        text.push_str("- No tools are available in this run: answer from the conversation.\n");
    } else {
        let names: Vec<&str> = tools.iter().map(|t| t.as_str()).collect();
        text.push_str(&format!("- Tools: {}.\n", names.join(", ")));
        text.push_str(if below {
            "- Paths are relative to the working directory; files outside the project root, and .hel/, are off limits.\n"
        } else {
            "- Paths are relative to the working directory; files outside it, and .hel/, are off limits.\n"
        });
        text.push_str(
            "- read_file returns at most 10,000 bytes; continue a truncated read with the cursor it gives.\n\
             - Large tool outputs are saved to a spill file; page through it with read_file.\n\
             - bash runs in a sandbox: it may write only inside the project and its temporary directory.\n\
             - When the task is done, answer without calling a tool.\n",
        );
        if root.join(".git").exists() {
            text.push_str(if project.git_writes() {
                "- Commits work, but .git's config and hooks are read-only to bash and the file tools.\n"
            } else {
                "- .git is read-only to bash and the file tools: commits and git config are left to the user.\n"
            });
        }
    }
    let wanted: Vec<(String, bool)> = match instructions {
        Instructions::None => Vec::new(),
        Instructions::File(name) => vec![(name.clone(), false)],
        Instructions::Default => default_files(&project.cwd_in_root())
            .into_iter()
            .map(|n| (n, true))
            .collect(),
    };
    let mut files = Vec::new();
    let mut budget = CONTEXT_FILE_BYTES;
    for (name, in_root) in wanted {
        match context(project, &name, in_root, &mut budget, &mut warnings) {
            Ok(Some(rules)) => {
                text.push_str(&format!(
                    "\n# Project instructions ({name})\n{}",
                    rules.trim_end()
                ));
                text.push('\n');
                files.push(name);
            }
            Ok(None) => {}
            Err(error) => warnings.push(ContextFileWarning::Unreadable { name, error }),
        }
    }
    System {
        message: json!({"role": "system", "content": text}),
        files,
        warnings,
    }
}

/// The default instructions files, relative to the root, for hel started
/// in `cwd` (relative to the root): `HEL.md`, `AGENTS.md`, then
/// `AGENTS.md` in each directory down to `cwd`. A directory whose name is
/// not UTF-8 ends the list (no file below it can be named).
fn default_files(cwd: &std::path::Path) -> Vec<String> {
    let mut names = vec![HEL_MD.to_owned(), AGENTS_MD.to_owned()];
    let mut dir = String::new();
    for part in cwd.iter() {
        let Some(part) = part.to_str() else { break };
        dir.push_str(part);
        dir.push('/');
        names.push(format!("{dir}{AGENTS_MD}"));
    }
    names
}

/// An instructions file's text (None: there is none), relative to the
/// root (`in_root`) or to where hel started, cut to what is left of
/// `budget` at a character boundary with a warning.
fn context(
    project: &ProjectDir,
    name: &str,
    in_root: bool,
    budget: &mut usize,
    warnings: &mut Vec<ContextFileWarning>,
) -> Result<Option<String>, ContextFileError> {
    let target = if in_root {
        project.resolve_in_root(name)?
    } else {
        project.resolve(name, false)?
    };
    let entry = match target {
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
    // One byte over the budget tells that the file is longer.
    let mut bytes = hel_fs::read_head(file, *budget as u64 + 1)?;
    if bytes.len() > *budget {
        let mut cut = *budget;
        while cut > 0 && (bytes[cut] & 0xC0) == 0x80 {
            cut -= 1;
        }
        bytes.truncate(cut);
        let (name, kib) = (name.to_owned(), CONTEXT_FILE_BYTES >> 10);
        warnings.push(if *budget == CONTEXT_FILE_BYTES {
            ContextFileWarning::Cut { name, kib }
        } else {
            ContextFileWarning::OverBudget {
                name,
                kib,
                used: cut,
            }
        });
    }
    *budget -= bytes.len();
    if bytes.is_empty() && *budget == 0 {
        return Ok(None);
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| ContextFileError::NotText)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn text(s: &System) -> &str {
        s.message["content"].as_str().unwrap_or_default()
    }

    #[test]
    fn agents_files_are_read_from_the_root_down_within_one_budget() {
        assert_eq!(
            default_files(Path::new("a/b")),
            ["HEL.md", "AGENTS.md", "a/AGENTS.md", "a/b/AGENTS.md"]
        );
        assert_eq!(default_files(Path::new("")), ["HEL.md", "AGENTS.md"]);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(p.join("a/b")).unwrap();
        std::fs::write(p.join("AGENTS.md"), "root").unwrap();
        std::fs::write(p.join("a/b/AGENTS.md"), "b").unwrap();
        let d = ProjectDir::open(&p).unwrap().working_in(Path::new("a/b"));
        let s = build(&d, &Instructions::Default, &[]);
        assert_eq!(s.files, ["AGENTS.md", "a/b/AGENTS.md"]);
        assert!(s.warnings.is_empty());
        let t = text(&s);
        assert!(
            t.find("root").unwrap() < t.find("# Project instructions (a/b/AGENTS.md)\nb").unwrap()
        );
        // One budget for all: the last file is cut, then left out.
        let big = "x".repeat(CONTEXT_FILE_BYTES - 4);
        std::fs::write(p.join("HEL.md"), &big).unwrap();
        let s = build(&d, &Instructions::Default, &[]);
        assert_eq!(s.files, ["HEL.md", "AGENTS.md"]);
        let said: Vec<String> = s.warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(
            said,
            ["a/b/AGENTS.md does not fit in the 64 KiB the project instructions share; it is left out"]
        );
        std::fs::write(p.join("HEL.md"), "x".repeat(CONTEXT_FILE_BYTES - 2)).unwrap();
        let s = build(&d, &Instructions::Default, &[]);
        assert!(s.warnings[0]
            .to_string()
            .ends_with("only its first 2 bytes are used"));
        assert!(text(&s).contains("# Project instructions (AGENTS.md)\nro\n"));
        // --context-file: that file only, from where hel started.
        let s = build(&d, &Instructions::File("AGENTS.md".into()), &[]);
        assert_eq!(s.files, ["AGENTS.md"]);
        assert!(text(&s).contains("# Project instructions (AGENTS.md)\nb\n"));
        assert!(build(&d, &Instructions::None, &[]).files.is_empty());
    }
}
