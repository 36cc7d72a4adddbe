//! The tools the model can call, and the rules around them (access modes
//! and confirmation, the project boundary, spill, cancellation).

pub(crate) mod access;
pub(crate) mod args;
pub(crate) mod bash;
pub(crate) mod cancel;
pub(crate) mod context;
pub(crate) mod cursor;
pub(crate) mod edit;
pub(crate) mod gitdirs;
pub(crate) mod output;
pub(crate) mod paths;
pub(crate) mod read;
pub(crate) mod search;
pub(crate) mod secret;
pub(crate) mod store_name;

use std::sync::Arc;

use serde_json::Value;

use crate::config::ConfigError;
pub use access::{Access, Answer, Confirm, Decision, Edit, Request};
pub(crate) use args::Call;
pub use args::ToolName;
pub(crate) use context::{ToolCtx, ToolResult};

/// The selected tools: hel's own, and the MCP servers' offered beside
/// them once the servers start.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Toolset {
    names: Vec<ToolName>,
    /// The MCP tools offered (`mcp__<server>__<tool>`).
    mcp: Vec<String>,
}

impl Toolset {
    /// Parse `--tools` (None: all) under an access mode (read-only offers
    /// only the reading tools).
    pub(crate) fn select(spec: Option<&str>, access: Access) -> Result<Toolset, ConfigError> {
        let mut names: Vec<ToolName> = match spec.map(str::trim) {
            None | Some("all") => ToolName::ALL.to_vec(),
            Some("none") | Some("") => Vec::new(),
            Some(list) => {
                let mut v = Vec::new();
                for n in list.split(',').map(str::trim) {
                    let known = ToolName::parse(n).ok_or_else(|| ConfigError::UnknownTool {
                        name: n.to_owned(),
                        known: ToolName::ALL.map(ToolName::as_str).join(", "),
                    })?;
                    if !v.contains(&known) {
                        v.push(known);
                    }
                }
                v
            }
        };
        if access == Access::ReadOnly {
            names.retain(|n| n.only_reads());
        }
        Ok(Toolset {
            names,
            mcp: Vec::new(),
        })
    }

    /// Offer MCP tools too.
    pub(crate) fn add_mcp(&mut self, names: impl IntoIterator<Item = String>) {
        self.mcp.extend(names);
    }

    pub(crate) fn names(&self) -> &[ToolName] {
        &self.names
    }

    pub(crate) fn contains(&self, tool: ToolName) -> bool {
        self.names.contains(&tool)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.names.is_empty() && self.mcp.is_empty()
    }

    /// The JSON definitions sent with each request.
    pub(crate) fn definitions(&self) -> Vec<Value> {
        self.names.iter().map(|n| n.definition()).collect()
    }
}

/// Run one tool call. Never fails: every problem is a result the model
/// reads. Dropping the future cancels the call (see [`cancel`]).
///
/// A handle of a secret in the arguments is replaced by its value when
/// the tool runs (what is confirmed shows the handle); a handle hel holds
/// no value of fails the call. The result's secrets are replaced by their
/// handles before it is spilled or returned: nothing after this sees them.
pub(crate) async fn execute(
    ctx: &mut ToolCtx,
    toolset: &Toolset,
    name: &str,
    raw_args: &str,
) -> ToolResult {
    let with_values = match secret::with_values(&ctx.secrets, raw_args) {
        Ok(v) => v,
        Err(unknown) => return ToolResult::failed(unknown.to_string()),
    };
    let mut result = run_call(ctx, toolset, name, raw_args, with_values.as_deref()).await;
    result.content = ctx.secrets.redact(&result.content).into_owned();
    // read_file pages itself; everything else may be spilled.
    if ToolName::parse(name) != Some(ToolName::ReadFile) {
        let (content, warning) = ctx.spill.maybe_spill(name, result.content);
        result.content = content;
        if let Some(w) = warning {
            ctx.observer.warn(w.into());
        }
    }
    result
}

/// [`execute`] but for secrets: `with_values`, the arguments with the
/// values of their handles (None: they hold none).
async fn run_call(
    ctx: &mut ToolCtx,
    toolset: &Toolset,
    name: &str,
    raw_args: &str,
    with_values: Option<&str>,
) -> ToolResult {
    if name.starts_with(crate::mcp::PREFIX) && toolset.mcp.iter().any(|n| n == name) {
        return execute_mcp(ctx, name, raw_args, with_values).await;
    }
    let Some(tool) = ToolName::parse(name).filter(|t| toolset.contains(*t)) else {
        let offered = if toolset.is_empty() {
            "none".to_owned()
        } else {
            toolset
                .names
                .iter()
                .map(|t| t.as_str())
                .chain(toolset.mcp.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return ToolResult::failed(format!(
            "error: unknown tool {name:?}; the tools are: {offered}"
        ));
    };
    let call = match Call::parse(tool, raw_args) {
        Ok(c) => c,
        Err(e) => return ToolResult::failed(format!("error: {e}")),
    };
    let mut decision = Decision::Auto;
    // A run started read-only offers no such tool; one switched to
    // read-only at the prompt still does, and this refuses it.
    if !tool.only_reads() && ctx.access == Access::ReadOnly {
        return ToolResult {
            content: "denied: the user switched to read-only access: only reading tools run".into(),
            ok: false,
            decision: Decision::ReadOnly,
        };
    }
    if !tool.only_reads() && ctx.access == Access::Confirm {
        let mut request = Request::of(&call);
        if with_values.is_some() {
            secret::note(&mut request, raw_args);
        }
        let answer = confirm(&ctx.confirm, request).await;
        match declined(
            answer,
            "with --access auto hel runs writes and commands without asking",
        ) {
            Some(denied) => return denied,
            None => decision = Decision::Confirmed,
        }
    }
    let call = match with_values.map(|v| Call::parse(tool, v)) {
        None => call,
        Some(Ok(c)) => c,
        Some(Err(e)) => return ToolResult::failed(format!("error: {e}")),
    };
    let mut result = match call {
        Call::Bash(a) => bash::run(ctx, a).await,
        Call::ReadFile(a) => read::run(ctx, a).await,
        Call::WriteFile(a) => edit::write_file(ctx, a).await,
        Call::SearchReplace(a) => edit::search_replace(ctx, a).await,
        Call::Glob(a) => search::glob(ctx, a).await,
        Call::Grep(a) => search::grep(ctx, a).await,
    };
    result.decision = decision;
    result
}

/// Run a call of an MCP tool: confirmed like bash (unless the config lists
/// it as read-only: a server's own hints are not believed), within its
/// timeout, its result spilled like any tool's.
async fn execute_mcp(
    ctx: &mut ToolCtx,
    name: &str,
    raw_args: &str,
    with_values: Option<&str>,
) -> ToolResult {
    let Some((server, tool)) = ctx.mcp.find(name) else {
        return ToolResult::failed(format!("error: the MCP tool {name:?} is not running"));
    };
    let mut decision = Decision::Auto;
    // Read-only mode offers only the read-only tools; this is the second
    // lock on that door.
    if !tool.read_only && ctx.access == Access::ReadOnly {
        return ToolResult {
            content:
                "denied: read-only mode runs only the MCP tools the config lists in read_only_tools"
                    .into(),
            ok: false,
            decision: Decision::ReadOnly,
        };
    }
    // Parsed once, before any question: what is confirmed is what is sent.
    let arguments = match crate::mcp::arguments(raw_args) {
        Ok(a) => a,
        Err(e) => return ToolResult::failed(format!("error: {e}")),
    };
    if !tool.read_only && ctx.access == Access::Confirm {
        let mut request = crate::mcp::request(tool, &arguments);
        if with_values.is_some() {
            secret::note(&mut request, raw_args);
        }
        let answer = confirm(&ctx.confirm, request).await;
        match declined(answer, "the user can run hel with --access auto, or list the tool in read_only_tools of its server's config") {
            Some(denied) => return denied,
            None => decision = Decision::Confirmed,
        }
    }
    let arguments = match with_values.map(crate::mcp::arguments) {
        None => arguments,
        Some(Ok(a)) => a,
        Some(Err(e)) => return ToolResult::failed(format!("error: {e}")),
    };
    let mut result = match crate::mcp::call(server, tool, arguments).await {
        Ok((text, true)) => ToolResult::ok(text),
        Ok((text, false)) => ToolResult::failed(format!("error (from the MCP server): {text}")),
        Err(e) => ToolResult::failed(format!("error: {e}")),
    };
    result.decision = decision;
    result
}

/// What the model is told when `answer` does not allow the call (None: it
/// does); `otherwise` says what the user can do when nobody could be asked.
fn declined(answer: Answer, otherwise: &str) -> Option<ToolResult> {
    let content = match answer {
        Answer::Yes => return None,
        Answer::No => "denied: the user declined this call".to_owned(),
        Answer::NoBecause(why) => format!("denied: the user declined this call: {why}"),
        Answer::Refused(why) => format!("denied: {why}"),
        Answer::Unavailable(why) => {
            format!("denied: nobody could be asked to allow it ({why}); {otherwise}")
        }
    };
    Some(ToolResult {
        content,
        ok: false,
        decision: Decision::Denied,
    })
}

/// Ask on a blocking thread (a terminal prompt blocks).
async fn confirm(confirm: &Arc<dyn Confirm>, request: Request) -> Answer {
    let confirm = Arc::clone(confirm);
    tokio::task::spawn_blocking(move || confirm.confirm(&request))
        .await
        .unwrap_or_else(|e| Answer::Unavailable(e.to_string()))
}

#[cfg(test)]
pub(crate) mod testing {
    use std::rc::Rc;

    use super::cursor::CursorTable;
    use super::*;
    use crate::spill::SpillStore;

    /// A tool context over a temporary project.
    pub(crate) fn ctx() -> (tempfile::TempDir, ToolCtx) {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().canonicalize().unwrap();
        let ctx = ToolCtx {
            project_dir: Arc::new(paths::ProjectDir::open(&project).unwrap()),
            spill: SpillStore::for_instance(&project.join("..").join("spill-unused")),
            cwd: project.clone(),
            project,
            access: Access::Auto,
            bash_timeout: 5,
            sandbox: false,
            network: true,
            withheld: Default::default(),
            secrets: Default::default(),
            allow_write: Vec::new(),
            allow_git_write: false,
            tmp: std::env::temp_dir(),
            commands: Default::default(),
            cursors: CursorTable::default(),
            confirm: Arc::new(Refuse),
            observer: Rc::new(crate::event::Ignore),
            mcp: Default::default(),
        };
        (dir, ctx)
    }

    /// Nobody to ask.
    struct Refuse;

    impl Confirm for Refuse {
        fn ask(&self, _: &str) -> Answer {
            Answer::Unavailable("a test".into())
        }
    }

    /// Run one call of any tool to its end, as the agent would.
    pub(crate) fn call(ctx: &mut ToolCtx, tool: &str, args: Value) -> ToolResult {
        let all = Toolset::select(None, Access::Auto).unwrap();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(execute(ctx, &all, tool, &args.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{call, ctx};
    use super::*;
    use serde_json::json;

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
        let r1 = call(&mut c, "read_file", json!({"path": "big.txt"}));
        assert!(r1.ok);
        let cur = cursor_of(&r1.content);
        let r2 = call(&mut c, "read_file", json!({"cursor": cur}));
        let body1 = r1.content.rsplit_once('\n').unwrap().0;
        assert!(
            r2.content
                .starts_with(&text[body1.len() + 1..body1.len() + 20]),
            "{}",
            &r2.content[..40]
        );
        // The same cursor works again while the file is unchanged.
        let again = call(&mut c, "read_file", json!({"cursor": cur})).content;
        assert!(
            again.rsplit_once('\n').unwrap().0 == r2.content.rsplit_once('\n').unwrap().0,
            "re-reading a cursor differs"
        );
        // A range: lines 10..=12.
        assert_eq!(
            call(
                &mut c,
                "read_file",
                json!({"path": "big.txt", "start_line": 10, "max_lines": 3})
            )
            .content,
            "line 10\nline 11\nline 12\n"
        );
        write(&c, "big.txt", &text.replace("line 2999", "LINE 2999"));
        let r3 = call(&mut c, "read_file", json!({"cursor": cur}));
        assert!(
            !r3.ok && r3.content.contains("changed") && r3.content.contains("read it again"),
            "{}",
            r3.content
        );
        let mixed = call(
            &mut c,
            "read_file",
            json!({"cursor": cur, "path": "big.txt"}),
        );
        assert!(!mixed.ok && mixed.content.contains("either a cursor"));
        std::fs::write(c.project.join("bin"), [0u8, 159, 146, 150]).unwrap();
        assert!(call(&mut c, "read_file", json!({"path": "bin"}))
            .content
            .contains("binary"));
    }

    #[test]
    fn cursor_table_keeps_the_newest_128() {
        let (_d, mut c) = ctx();
        write(&c, "f", &"x\n".repeat(20_000));
        let first = cursor_of(&call(&mut c, "read_file", json!({"path": "f"})).content);
        for _ in 0..128 {
            call(&mut c, "read_file", json!({"path": "f"}));
        }
        assert_eq!(c.cursors.len(), cursor::CAPACITY);
        assert!(call(&mut c, "read_file", json!({"cursor": first}))
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
            call(&mut c, "glob", json!({"pattern": "**/*.rs"})).content,
            "a/x.rs\nb.rs"
        );
        assert_eq!(
            call(&mut c, "grep", json!({"pattern": "^fn"})).content,
            "a/x.rs:1:fn x() {}\na/x.rs:2:fn y() {}\nb.rs:1:fn main() {}"
        );
        assert_eq!(
            call(&mut c, "grep", json!({"pattern": "fn", "include": "b.*"})).content,
            "b.rs:1:fn main() {}"
        );
        assert_eq!(
            call(&mut c, "grep", json!({"pattern": "fn", "path": "a"}))
                .content
                .lines()
                .count(),
            2
        );
        write(&c, "many.txt", &"match\n".repeat(250));
        let r = call(&mut c, "grep", json!({"pattern": "match"})).content;
        assert_eq!(r.lines().count(), 101);
        assert_eq!(r.lines().last().unwrap(), "[150 more matches not shown]");
        write(&c, "wide.txt", &format!("{}\n", "w".repeat(400)).repeat(60));
        let r = call(&mut c, "grep", json!({"pattern": "w", "path": "wide.txt"})).content;
        assert!(r.len() <= search::MAX_BYTES + 40, "{}", r.len());
        assert!(r.ends_with("more matches not shown]"));
        assert!(!call(&mut c, "grep", json!({"pattern": "("})).ok);
    }

    #[test]
    fn search_replace_requires_exactly_one_occurrence() {
        let (_d, mut c) = ctx();
        write(&c, "f.txt", "a b a");
        let r = call(
            &mut c,
            "search_replace",
            json!({"path": "f.txt", "search": "a", "replace": "z"}),
        );
        assert!(
            !r.ok && r.content.contains("occurs 2 times"),
            "{}",
            r.content
        );
        let r = call(
            &mut c,
            "search_replace",
            json!({"path": "f.txt", "search": "q", "replace": "z"}),
        );
        assert!(r.content.contains("occurs 0 times"));
        assert_eq!(
            std::fs::read_to_string(c.project.join("f.txt")).unwrap(),
            "a b a"
        );
        let r = call(
            &mut c,
            "search_replace",
            json!({"path": "f.txt", "search": "b", "replace": "한"}),
        );
        assert!(r.ok);
        assert_eq!(
            std::fs::read_to_string(c.project.join("f.txt")).unwrap(),
            "a 한 a"
        );
        let r = call(
            &mut c,
            "write_file",
            json!({"path": "new/deep/f.txt", "content": "x"}),
        );
        assert!(r.ok && c.project.join("new/deep/f.txt").exists());
        assert!(
            !call(
                &mut c,
                "write_file",
                json!({"path": ".hel/x", "content": "x"})
            )
            .ok
        );
    }
}
