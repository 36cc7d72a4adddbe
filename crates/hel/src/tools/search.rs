//! glob and grep, over the project's files as ripgrep's `ignore` walker
//! sees them (.gitignore honoured, `.git` and `.hel` skipped).

use std::io::Read;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use regex::Regex;
use serde_json::Value;

use super::paths::{self, Resolved};
use super::{arg_str, ToolCtx, ToolResult};

pub const MAX_MATCHES: usize = 100;
pub const MAX_BYTES: usize = 10_000;

/// Files under `root` in path order, skipping `.git`, `.hel` and ignored files.
fn files(project: &Path, root: &Path) -> Vec<PathBuf> {
    let store = project.join(".hel");
    let mut out: Vec<PathBuf> = ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .filter_entry(move |e| {
            let name = e.file_name();
            !(name == ".git" || e.path() == store || name == ".hel")
        })
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| e.into_path())
        .collect();
    out.sort();
    out
}

fn root(ctx: &ToolCtx, args: &Value) -> Result<PathBuf, String> {
    match arg_str(args, "path")? {
        None => Ok(ctx.project.clone()),
        Some(p) => match paths::resolve(&ctx.project, p)? {
            Resolved::File(abs) if abs.exists() => Ok(abs),
            Resolved::File(_) => Err(format!("{p} does not exist")),
            Resolved::Store(_) => Err(format!("{p} is inside .hel/: refused")),
        },
    }
}

fn glob_matcher(pattern: &str) -> Result<GlobMatcher, String> {
    Glob::new(pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("bad glob pattern {pattern:?}: {e}"))
}

/// Collects result lines under the caps.
struct Capped {
    lines: Vec<String>,
    bytes: usize,
    hidden: usize,
}

impl Capped {
    fn new() -> Self {
        Capped {
            lines: Vec::new(),
            bytes: 0,
            hidden: 0,
        }
    }
    fn push(&mut self, line: String) {
        if self.hidden > 0
            || self.lines.len() >= MAX_MATCHES
            || self.bytes + line.len() + 1 > MAX_BYTES
        {
            self.hidden += 1;
        } else {
            self.bytes += line.len() + 1;
            self.lines.push(line);
        }
    }
    fn finish(self, empty: &str) -> String {
        if self.lines.is_empty() && self.hidden == 0 {
            return empty.to_owned();
        }
        let mut s = self.lines.join("\n");
        if self.hidden > 0 {
            s.push_str(&format!("\n[{} more matches not shown]", self.hidden));
        }
        s
    }
}

pub fn glob(ctx: &mut ToolCtx, args: &Value) -> ToolResult {
    let run = || -> Result<String, String> {
        let pattern = arg_str(args, "pattern")?.ok_or("glob needs a pattern")?;
        let m = glob_matcher(pattern)?;
        let root = root(ctx, args)?;
        let mut out = Capped::new();
        for f in files(&ctx.project, &root) {
            let rel_root = f.strip_prefix(&root).unwrap_or(&f);
            let rel = paths::display(&ctx.project, &f);
            if m.is_match(rel_root) || m.is_match(&rel) {
                out.push(rel);
            }
        }
        Ok(out.finish("no files match"))
    };
    match run() {
        Ok(s) => ToolResult::ok(s),
        Err(e) => ToolResult::failed(format!("error: {e}")),
    }
}

pub fn grep(ctx: &mut ToolCtx, args: &Value) -> ToolResult {
    let run = || -> Result<String, String> {
        let pattern = arg_str(args, "pattern")?.ok_or("grep needs a pattern")?;
        let re = Regex::new(pattern).map_err(|e| format!("bad regex: {e}"))?;
        let include = arg_str(args, "include")?.map(glob_matcher).transpose()?;
        let root = root(ctx, args)?;
        let mut out = Capped::new();
        for f in files(&ctx.project, &root) {
            if let Some(inc) = &include {
                let name = f.file_name().map(Path::new).unwrap_or(&f);
                let rel = paths::display(&ctx.project, &f);
                if !(inc.is_match(name) || inc.is_match(&rel)) {
                    continue;
                }
            }
            let mut bytes = Vec::new();
            if std::fs::File::open(&f)
                .and_then(|mut h| h.read_to_end(&mut bytes))
                .is_err()
            {
                continue;
            }
            if bytes[..bytes.len().min(8192)].contains(&0) {
                continue; // binary
            }
            let text = String::from_utf8_lossy(&bytes);
            let rel = paths::display(&ctx.project, &f);
            for (i, line) in text.lines().enumerate() {
                if re.is_match(line) {
                    let shown: String = line.chars().take(500).collect();
                    out.push(format!("{rel}:{}:{shown}", i + 1));
                }
            }
        }
        Ok(out.finish("no matches"))
    };
    match run() {
        Ok(s) => ToolResult::ok(s),
        Err(e) => ToolResult::failed(format!("error: {e}")),
    }
}
