//! write_file and search_replace.

use serde_json::Value;

use super::paths::{self, Resolved};
use super::{arg_str, ToolCtx, ToolResult};

fn target(ctx: &ToolCtx, path: &str) -> Result<std::path::PathBuf, String> {
    match paths::resolve(&ctx.project, path)? {
        Resolved::File(p) => Ok(p),
        Resolved::Store(_) => Err(format!("{path} is inside .hel/: refused")),
    }
}

pub fn write_file(ctx: &mut ToolCtx, args: &Value) -> ToolResult {
    let run = || -> Result<String, String> {
        let path = arg_str(args, "path")?.ok_or("write_file needs a path")?;
        let content = arg_str(args, "content")?.ok_or("write_file needs content")?;
        let abs = target(ctx, path)?;
        if let Some(parent) = abs.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{path}: {e}"))?;
        }
        std::fs::write(&abs, content).map_err(|e| format!("{path}: {e}"))?;
        Ok(format!("wrote {} bytes to {path}", content.len()))
    };
    match run() {
        Ok(s) => ToolResult::ok(s),
        Err(e) => ToolResult::failed(format!("error: {e}")),
    }
}

pub fn search_replace(ctx: &mut ToolCtx, args: &Value) -> ToolResult {
    let run = || -> Result<String, String> {
        let path = arg_str(args, "path")?.ok_or("search_replace needs a path")?;
        let search = arg_str(args, "search")?.ok_or("search_replace needs search")?;
        let replace = arg_str(args, "replace")?.ok_or("search_replace needs replace")?;
        if search.is_empty() {
            return Err("search must not be empty".into());
        }
        let abs = target(ctx, path)?;
        let text = std::fs::read_to_string(&abs).map_err(|e| format!("{path}: {e}"))?;
        let count = text.matches(search).count();
        if count != 1 {
            return Err(format!(
                "no change: search text occurs {count} times in {path}; it must occur exactly once (add surrounding lines to make it unique)"
            ));
        }
        std::fs::write(&abs, text.replacen(search, replace, 1))
            .map_err(|e| format!("{path}: {e}"))?;
        Ok(format!("replaced 1 occurrence in {path}"))
    };
    match run() {
        Ok(s) => ToolResult::ok(s),
        Err(e) => ToolResult::failed(format!("error: {e}")),
    }
}
