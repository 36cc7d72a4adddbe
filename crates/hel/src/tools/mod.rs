//! The tools the model can call, their JSON definitions, and the rules
//! around them (access modes, the project boundary, spill).

pub mod bash;
pub mod cursor;
pub mod edit;
pub mod paths;
pub mod read;
pub mod sandbox;
pub mod search;

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::cli::Access;
use crate::config::ConfigError;
use crate::spill::SpillStore;
use cursor::CursorTable;

/// The tools, in the order they are offered.
pub const ALL: &[&str] = &[
    "bash",
    "read_file",
    "write_file",
    "search_replace",
    "glob",
    "grep",
];
/// Tools that only read.
const READING: &[&str] = &["read_file", "glob", "grep"];

/// What one tool call produced.
#[derive(Debug, Clone)]
pub struct ToolResult {
    pub content: String,
    /// False only when the tool could not do its job (refused, timed out,
    /// failed to start, bad arguments). A command exiting non-zero is ok.
    pub ok: bool,
    /// `auto`, `confirmed`, `denied` or `read-only`.
    pub decision: &'static str,
}

impl ToolResult {
    pub fn ok(content: String) -> Self {
        ToolResult {
            content,
            ok: true,
            decision: "auto",
        }
    }
    pub fn failed(content: String) -> Self {
        ToolResult {
            content,
            ok: false,
            decision: "auto",
        }
    }
}

/// Everything the tools work with.
pub struct ToolCtx {
    /// The project directory, canonical.
    pub project: PathBuf,
    /// The project directory held open: the file tools resolve beneath it.
    pub project_dir: paths::ProjectDir,
    pub access: Access,
    pub bash_timeout: u64,
    pub sandbox: bool,
    pub allow_write: Vec<PathBuf>,
    /// The instance's tmp dir.
    pub tmp: PathBuf,
    /// The sandbox bash commands run in (started at the first call).
    pub commands: bash::Commands,
    pub cursors: CursorTable,
    pub spill: SpillStore,
}

/// The selected tools.
#[derive(Debug, Clone, PartialEq)]
pub struct Toolset {
    pub names: Vec<&'static str>,
}

impl Toolset {
    /// Parse `--tools` (None: all) under an access mode (read-only offers
    /// only the reading tools).
    pub fn select(spec: Option<&str>, access: Access) -> Result<Toolset, ConfigError> {
        let mut names: Vec<&'static str> = match spec.map(str::trim) {
            None | Some("all") => ALL.to_vec(),
            Some("none") | Some("") => Vec::new(),
            Some(list) => {
                let mut v = Vec::new();
                for n in list.split(',').map(str::trim) {
                    let known = ALL.iter().find(|t| **t == n).ok_or_else(|| {
                        ConfigError(format!(
                            "unknown tool {n:?} in --tools: choose from {} (or none)",
                            ALL.join(", ")
                        ))
                    })?;
                    if !v.contains(known) {
                        v.push(*known);
                    }
                }
                v
            }
        };
        if access == Access::ReadOnly {
            names.retain(|n| READING.contains(n));
        }
        Ok(Toolset { names })
    }

    /// The JSON definitions sent with each request.
    pub fn definitions(&self) -> Vec<Value> {
        self.names.iter().map(|n| definition(n)).collect()
    }
}

fn definition(name: &str) -> Value {
    let (desc, props, required): (&str, Value, Vec<&str>) = match name {
        "bash" => (
            "Run a bash command in the project directory (sandboxed: writes only inside the project and $TMPDIR). Returns exit=<code>, stdout and stderr.",
            json!({"command": {"type": "string", "description": "The command line"}}),
            vec!["command"],
        ),
        "read_file" => (
            "Read a UTF-8 text file (at most 10,000 bytes per call). When more remains, the result ends with a cursor to continue; pass only that cursor to continue.",
            json!({
                "path": {"type": "string", "description": "File path relative to the project"},
                "start_line": {"type": "integer", "description": "First line to read, from 1"},
                "max_lines": {"type": "integer", "description": "Lines to read"},
                "cursor": {"type": "string", "description": "Continue a truncated read"}
            }),
            vec![],
        ),
        "write_file" => (
            "Create or overwrite a file with the given content.",
            json!({"path": {"type": "string"}, "content": {"type": "string"}}),
            vec!["path", "content"],
        ),
        "search_replace" => (
            "Replace the one occurrence of `search` in a file with `replace`. Nothing changes unless `search` occurs exactly once.",
            json!({"path": {"type": "string"}, "search": {"type": "string"}, "replace": {"type": "string"}}),
            vec!["path", "search", "replace"],
        ),
        "glob" => (
            "List files matching a glob pattern (such as **/*.rs), one per line, sorted.",
            json!({"pattern": {"type": "string"}, "path": {"type": "string", "description": "Directory to search (default: the project)"}}),
            vec!["pattern"],
        ),
        _ => (
            "Search file contents with a regular expression; prints path:line:text per match, sorted by path.",
            json!({
                "pattern": {"type": "string", "description": "Regular expression"},
                "path": {"type": "string", "description": "Directory to search (default: the project)"},
                "include": {"type": "string", "description": "Only files matching this glob, such as *.rs"}
            }),
            vec!["pattern"],
        ),
    };
    json!({
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {"type": "object", "properties": props, "required": required},
        }
    })
}

/// A string argument, or an error message if present but not a string.
pub fn arg_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("argument {key} must be a string")),
    }
}

/// A non-negative integer argument.
pub fn arg_u64(args: &Value, key: &str) -> Result<Option<u64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("argument {key} must be a non-negative integer")),
    }
}

/// Run one tool call. Never fails: every problem is a result the model reads.
pub async fn execute(
    ctx: &mut ToolCtx,
    toolset: &Toolset,
    name: &str,
    raw_args: &str,
) -> ToolResult {
    let Some(&tool) = toolset.names.iter().find(|n| **n == name) else {
        let offered = if toolset.names.is_empty() {
            "none".to_owned()
        } else {
            toolset.names.join(", ")
        };
        return ToolResult::failed(format!(
            "error: unknown tool {name:?}; the tools are: {offered}"
        ));
    };
    let args: Value = match serde_json::from_str(if raw_args.trim().is_empty() {
        "{}"
    } else {
        raw_args
    }) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return ToolResult::failed(format!(
                "error: the arguments of {name} are not a JSON object: {raw_args:?}"
            ))
        }
    };
    let mut decision = "auto";
    if !READING.contains(&tool) && ctx.access == Access::Confirm {
        let what = match tool {
            "bash" => format!(
                "run `{}`",
                args.get("command").and_then(Value::as_str).unwrap_or("")
            ),
            _ => format!(
                "{tool} {}",
                args.get("path").and_then(Value::as_str).unwrap_or("")
            ),
        };
        match confirm(&what).await {
            Ok(true) => decision = "confirmed",
            Ok(false) => {
                return ToolResult {
                    content: "denied: the user declined this call".into(),
                    ok: false,
                    decision: "denied",
                };
            }
            Err(why) => {
                return ToolResult {
                    content: format!("denied: cannot ask for confirmation ({why}); the user can run hel with --access auto to allow writes and commands"),
                    ok: false,
                    decision: "denied",
                };
            }
        }
    }
    let mut result = match tool {
        "bash" => bash::run(ctx, &args).await,
        "read_file" => read::run(ctx, &args),
        "write_file" => edit::write_file(ctx, &args),
        "search_replace" => edit::search_replace(ctx, &args),
        "glob" => search::glob(ctx, &args),
        _ => search::grep(ctx, &args),
    };
    result.decision = decision;
    if tool != "read_file" {
        result.content = ctx.spill.maybe_spill(tool, result.content);
    }
    result
}

/// Ask on /dev/tty; Err when there is no terminal.
async fn confirm(what: &str) -> Result<bool, String> {
    let what = what.chars().take(300).collect::<String>();
    tokio::task::spawn_blocking(move || {
        use std::io::{BufRead, Write};
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .map_err(|e| format!("no terminal: {e}"))?;
        let mut w = &tty;
        let what = crate::terminal::escape_line(&what);
        write!(w, "hel: allow {what}? [y/N] ").map_err(|e| e.to_string())?;
        let mut line = String::new();
        std::io::BufReader::new(&tty)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        Ok(matches!(line.trim(), "y" | "Y" | "yes"))
    })
    .await
    .map_err(|e| e.to_string())?
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A tool context over a temporary project.
    pub fn ctx() -> (tempfile::TempDir, ToolCtx) {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().canonicalize().unwrap();
        let ctx = ToolCtx {
            project_dir: paths::ProjectDir::open(&project).unwrap(),
            spill: SpillStore::for_instance(&project.join("..").join("spill-unused")),
            project,
            access: Access::Auto,
            bash_timeout: 5,
            sandbox: false,
            allow_write: Vec::new(),
            tmp: std::env::temp_dir(),
            commands: Default::default(),
            cursors: CursorTable::default(),
        };
        (dir, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::ctx;
    use super::*;

    fn write(ctx: &ToolCtx, rel: &str, text: &str) {
        let p = ctx.project.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn cursor_of(text: &str) -> String {
        let last = text.lines().last().unwrap();
        last.split('"').nth(3).unwrap().to_owned()
    }

    #[test]
    fn cursor_continues_and_is_refused_after_a_change() {
        let (_d, mut c) = ctx();
        let text: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
        write(&c, "big.txt", &text);
        let r1 = read::run(&mut c, &json!({"path": "big.txt"}));
        assert!(r1.ok);
        let cur = cursor_of(&r1.content);
        let r2 = read::run(&mut c, &json!({"cursor": cur}));
        let body1 = r1.content.rsplit_once('\n').unwrap().0;
        assert!(
            r2.content
                .starts_with(&text[body1.len() + 1..body1.len() + 20]),
            "{}",
            &r2.content[..40]
        );
        // The same cursor works again while the file is unchanged.
        let again = read::run(&mut c, &json!({"cursor": cur})).content;
        assert!(
            again.rsplit_once('\n').unwrap().0 == r2.content.rsplit_once('\n').unwrap().0,
            "re-reading a cursor differs"
        );
        // A range: lines 10..=12.
        assert_eq!(
            read::run(
                &mut c,
                &json!({"path": "big.txt", "start_line": 10, "max_lines": 3})
            )
            .content,
            "line 10\nline 11\nline 12\n"
        );
        write(&c, "big.txt", &text.replace("line 2999", "LINE 2999"));
        let r3 = read::run(&mut c, &json!({"cursor": cur}));
        assert!(
            !r3.ok && r3.content.contains("changed") && r3.content.contains("read it again"),
            "{}",
            r3.content
        );
        let mixed = read::run(&mut c, &json!({"cursor": cur, "path": "big.txt"}));
        assert!(!mixed.ok && mixed.content.contains("either a cursor"));
        std::fs::write(c.project.join("bin"), [0u8, 159, 146, 150]).unwrap();
        assert!(read::run(&mut c, &json!({"path": "bin"}))
            .content
            .contains("binary"));
    }

    #[test]
    fn cursor_table_keeps_the_newest_128() {
        let (_d, mut c) = ctx();
        write(&c, "f", &"x\n".repeat(20_000));
        let first = cursor_of(&read::run(&mut c, &json!({"path": "f"})).content);
        for _ in 0..128 {
            read::run(&mut c, &json!({"path": "f"}));
        }
        assert_eq!(c.cursors.len(), cursor::CAPACITY);
        assert!(read::run(&mut c, &json!({"cursor": first}))
            .content
            .contains("unknown cursor"));
    }

    #[test]
    fn search_sorts_skips_ignored_and_caps() {
        let (_d, mut c) = ctx();
        write(&c, ".gitignore", "target/\n*.log\n");
        write(&c, "b.rs", "fn main() {}\n");
        write(&c, "a/x.rs", "fn x() {}\nfn y() {}\n");
        write(&c, "target/t.rs", "fn ignored() {}\n");
        write(&c, "app.log", "fn log() {}\n");
        write(&c, ".hel/objects/zz", "fn secret() {}\n");
        write(&c, ".git/config", "fn git() {}\n");
        assert_eq!(
            search::glob(&mut c, &json!({"pattern": "**/*.rs"})).content,
            "a/x.rs\nb.rs"
        );
        assert_eq!(
            search::grep(&mut c, &json!({"pattern": "^fn"})).content,
            "a/x.rs:1:fn x() {}\na/x.rs:2:fn y() {}\nb.rs:1:fn main() {}"
        );
        assert_eq!(
            search::grep(&mut c, &json!({"pattern": "fn", "include": "b.*"})).content,
            "b.rs:1:fn main() {}"
        );
        assert_eq!(
            search::grep(&mut c, &json!({"pattern": "fn", "path": "a"}))
                .content
                .lines()
                .count(),
            2
        );
        write(&c, "many.txt", &"match\n".repeat(250));
        let r = search::grep(&mut c, &json!({"pattern": "match"})).content;
        assert_eq!(r.lines().count(), 101);
        assert_eq!(r.lines().last().unwrap(), "[150 more matches not shown]");
        write(&c, "wide.txt", &format!("{}\n", "w".repeat(400)).repeat(60));
        let r = search::grep(&mut c, &json!({"pattern": "w", "path": "wide.txt"})).content;
        assert!(r.len() <= search::MAX_BYTES + 40, "{}", r.len());
        assert!(r.ends_with("more matches not shown]"));
        assert!(!search::grep(&mut c, &json!({"pattern": "("})).ok);
    }

    #[test]
    fn search_replace_requires_exactly_one_occurrence() {
        let (_d, mut c) = ctx();
        write(&c, "f.txt", "a b a");
        let r = edit::search_replace(
            &mut c,
            &json!({"path": "f.txt", "search": "a", "replace": "z"}),
        );
        assert!(
            !r.ok && r.content.contains("occurs 2 times"),
            "{}",
            r.content
        );
        let r = edit::search_replace(
            &mut c,
            &json!({"path": "f.txt", "search": "q", "replace": "z"}),
        );
        assert!(r.content.contains("occurs 0 times"));
        assert_eq!(
            std::fs::read_to_string(c.project.join("f.txt")).unwrap(),
            "a b a"
        );
        let r = edit::search_replace(
            &mut c,
            &json!({"path": "f.txt", "search": "b", "replace": "한"}),
        );
        assert!(r.ok);
        assert_eq!(
            std::fs::read_to_string(c.project.join("f.txt")).unwrap(),
            "a 한 a"
        );
        let r = edit::write_file(&mut c, &json!({"path": "new/deep/f.txt", "content": "x"}));
        assert!(r.ok && c.project.join("new/deep/f.txt").exists());
        assert!(!edit::write_file(&mut c, &json!({"path": ".hel/x", "content": "x"})).ok);
    }
}
