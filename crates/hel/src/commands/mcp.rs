//! `hel mcp list`: the MCP servers of the config file, each started, its
//! tools listed under the names the model is offered, and stopped.

use hel_agent::mcp::{self, ServerSpec, Transport};
use hel_agent::text::escape_line;
use serde_json::json;

use crate::exit::{Exit, Failure};

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
