//! `hel mcp list`: the MCP servers of the config file, each started, its
//! tools listed under the names the model is offered, and stopped.
//! `hel mcp add` and `remove`: a `[mcp_servers.NAME]` table written into
//! (or taken out of) the user's config file, the rest of it kept as it
//! was, comments included.

use std::path::{Path, PathBuf};

use hel_agent::mcp::{self, ServerSpec, Transport};
use hel_agent::text::escape_line;
use serde_json::json;

use crate::exit::{Exit, Failure, Kind};

/// Why `hel mcp add` or `remove` changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum McpEdit {
    #[error("no place for the config file: set HOME (or XDG_CONFIG_HOME)")]
    NoPlace,
    #[error("{}: there is an MCP server `{name}` already (`hel mcp add --force` replaces it)", path.display())]
    Exists { name: String, path: PathBuf },
    #[error("{}: no MCP server `{name}` (`hel mcp list` lists them)", path.display())]
    Missing { name: String, path: PathBuf },
    #[error("--env {0}: give NAME=VALUE")]
    BadEnv(String),
    #[error("--env {0}: that names a secret, and hel keeps none in its config file: export it and list it in the server's env_vars (docs/mcp.md)")]
    SecretEnv(String),
    #[error("{}: {why}; edit it by hand (docs/mcp.md)", path.display())]
    Unusable { path: PathBuf, why: String },
}

impl crate::exit::Damage for McpEdit {}

fn usage(e: McpEdit) -> Exit {
    Exit::new(Kind::Usage, e)
}

/// The config file and its text, parsed for editing.
fn open() -> Result<(PathBuf, toml_edit::DocumentMut), Exit> {
    let path = crate::config::path().ok_or_else(|| usage(McpEdit::NoPlace))?;
    let text = crate::config::read_for_edit(&path)?;
    let doc = text.parse::<toml_edit::DocumentMut>().map_err(|e| {
        usage(McpEdit::Unusable {
            path: path.clone(),
            why: e.to_string().trim().replace('\n', " "),
        })
    })?;
    Ok((path, doc))
}

/// The `[mcp_servers]` table of `doc` (made, implicit, when absent).
fn servers<'d>(
    doc: &'d mut toml_edit::DocumentMut,
    path: &Path,
) -> Result<&'d mut toml_edit::Table, Exit> {
    let item = doc.entry("mcp_servers").or_insert_with(|| {
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        toml_edit::Item::Table(t)
    });
    item.as_table_mut().ok_or_else(|| {
        usage(McpEdit::Unusable {
            path: path.to_owned(),
            why: "its mcp_servers is not written as [mcp_servers.NAME] tables".into(),
        })
    })
}

/// `hel mcp add NAME [--env K=V]... -- COMMAND [ARGS...]`.
pub fn add(name: &str, env: &[String], command: &[String], force: bool) -> Result<u8, Exit> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| usage(McpEdit::BadEnv(String::new())))?;
    let mut vars = toml_edit::InlineTable::new();
    for e in env {
        let (k, v) = e
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| usage(McpEdit::BadEnv(e.clone())))?;
        if hel_agent::is_secret_name(k) {
            return Err(usage(McpEdit::SecretEnv(k.to_owned())));
        }
        vars.insert(k, v.into());
    }
    let mut table = toml_edit::Table::new();
    table.insert("command", toml_edit::value(program.as_str()));
    if !args.is_empty() {
        let list: toml_edit::Array = args.iter().map(String::as_str).collect();
        table.insert("args", toml_edit::value(list));
    }
    if !vars.is_empty() {
        table.insert("env", toml_edit::value(vars));
    }
    let (path, mut doc) = open()?;
    let list = servers(&mut doc, &path)?;
    if list.contains_key(name) && !force {
        return Err(usage(McpEdit::Exists {
            name: name.to_owned(),
            path,
        }));
    }
    list.insert(name, toml_edit::Item::Table(table.clone()));
    crate::config::write_servers(&path, &doc.to_string())?;
    // The entry as the file has it now.
    let mut shown = toml_edit::DocumentMut::new();
    let mut only = toml_edit::Table::new();
    only.set_implicit(true);
    only.insert(name, toml_edit::Item::Table(table));
    shown.insert("mcp_servers", toml_edit::Item::Table(only));
    println!("added to {}:", path.display());
    for l in shown.to_string().lines().filter(|l| !l.is_empty()) {
        println!("{}", escape_line(l));
    }
    println!(
        "its tools: hel mcp list · take it out: hel mcp remove {}",
        escape_line(name)
    );
    Ok(0)
}

/// `hel mcp remove NAME`.
pub fn remove(name: &str) -> Result<u8, Exit> {
    let (path, mut doc) = open()?;
    if servers(&mut doc, &path)?.remove(name).is_none() {
        return Err(usage(McpEdit::Missing {
            name: name.to_owned(),
            path,
        }));
    }
    crate::config::write_servers(&path, &doc.to_string())?;
    println!(
        "removed MCP server {} from {}",
        escape_line(name),
        path.display()
    );
    Ok(0)
}

/// Start every configured server (as a run would), print what each offers,
/// stop them all. Exit 1 when an enabled server did not start.
pub fn list(specs: Vec<ServerSpec>, json_out: bool) -> Result<u8, Exit> {
    let probe = mcp::probe(&specs).map_err(Failure::Mcp)?;
    let log_dir = &probe.log_dir;
    let mut rows = Vec::new();
    for spec in &specs {
        let (kind, target) = match &spec.transport {
            Transport::Stdio { command, args, .. } => ("stdio", {
                let mut s = command.clone();
                for a in args {
                    s.push(' ');
                    s.push_str(a);
                }
                s
            }),
            Transport::Http { url, .. } => ("http", url.clone()),
        };
        let server = probe.servers.iter().find(|(name, _)| *name == spec.name);
        let failed = probe.failed.iter().find(|(n, _)| *n == spec.name);
        let status = match (spec.enabled, server, failed) {
            (false, _, _) => "disabled".to_owned(),
            (true, Some((_, tools)), _) => format!(
                "started, {}",
                crate::render::count(tools.len() as u64, "tool", "tools")
            ),
            (true, None, Some((_, e @ mcp::StartError::Spawn { .. }))) => format!("failed: {e}"),
            (true, None, Some((_, e))) => match spec.transport {
                Transport::Stdio { .. } => format!(
                    "failed: {e} (its stderr: {})",
                    mcp::log_path(log_dir, &spec.name).display()
                ),
                Transport::Http { .. } => format!("failed: {e}"),
            },
            (true, None, None) => "failed".to_owned(),
        };
        let tools: Vec<&mcp::Tool> = server.map(|(_, t)| t.iter().collect()).unwrap_or_default();
        rows.push((spec, kind, target, status, tools));
    }
    let warnings: Vec<String> = probe
        .warnings
        .iter()
        .filter(|w| !matches!(w, mcp::McpWarning::NotStarted { .. }))
        .map(|w| w.to_string())
        .collect();
    if json_out {
        let servers: Vec<_> = rows
            .iter()
            .map(|(spec, kind, target, status, tools)| {
                json!({
                    "name": spec.name,
                    "transport": kind,
                    "target": target,
                    "status": status,
                    "tools": tools.iter().map(|t| json!({
                        "name": t.exposed,
                        "server_name": t.remote,
                        "read_only": t.read_only,
                        "description": t.description,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        println!("{}", json!({"servers": servers, "warnings": warnings}));
    } else if rows.is_empty() {
        println!(
            "no MCP servers: add [mcp_servers.NAME] tables to the config file (see the README)"
        );
    } else {
        for (spec, kind, target, status, tools) in &rows {
            println!(
                "{}  {kind}  {}  {}",
                spec.name,
                escape_line(target),
                escape_line(status)
            );
            for t in tools {
                let first_line = t.description.lines().next().unwrap_or("");
                println!(
                    "  {}{}  {}",
                    t.exposed,
                    if t.read_only { " (read-only)" } else { "" },
                    escape_line(first_line)
                );
            }
        }
        for w in &warnings {
            println!("warning: {}", escape_line(w));
        }
    }
    let code = u8::from(rows.iter().any(|(spec, _, _, _, _)| {
        spec.enabled && !probe.servers.iter().any(|(name, _)| *name == spec.name)
    }));
    Ok(code)
}
