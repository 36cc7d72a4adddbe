//! MCP servers as tools, through the official Rust SDK (`rmcp`): the
//! user config's `[mcp_servers.NAME]` tables, starting the servers (stdio
//! child processes or streamable-HTTP endpoints) in parallel with a
//! timeout, their tools offered as `mcp__<server>__<tool>`, a call run
//! with a timeout, and the servers stopped with the run.
//!
//! Everything a server sends is hostile: its messages are bounded in
//! bytes ([`MAX_MESSAGE`]) and, from a stdio server, in parsed size
//! before the SDK parses them ([`bounded`]: a message past a limit
//! becomes an error answer to the request it answers); its tool list is
//! bounded ([`MAX_TOOLS`], its pages too, and of each tool only a bounded
//! name, description and schema are kept as the pages arrive), and its
//! own read-only hints are ignored (only the config's `read_only_tools`
//! is believed).

mod bounded;
mod name;
mod process;
mod warning;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, PaginatedRequestParams,
};
use rmcp::service::RunningService;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde::Deserialize;
use serde_json::{json, Value};

pub(crate) use name::PREFIX;
pub(crate) use warning::MAX_TOOLS;
pub use warning::{McpWarning, StartError};

/// The largest message a server may send (one JSON-RPC line or HTTP
/// body): a larger one is dropped by the transport and its call times out.
/// A result under it that is too long for the conversation is spilled.
/// (A text result often comes twice in a message, as content and as
/// structured content: 128 MiB carries a 50 MB result.)
pub(crate) const MAX_MESSAGE: usize = 128 << 20;
/// Pages of a tool list read from one server.
const MAX_PAGES: usize = 32;
/// The largest input schema of a tool, serialized.
const MAX_SCHEMA: usize = 64 << 10;
/// The longest tool description kept.
const MAX_DESCRIPTION: usize = 4096;
/// Seconds a server has to start and list its tools, unless configured.
const STARTUP_TIMEOUT: u64 = 30;
/// Seconds a tool call may take, unless configured.
const TOOL_TIMEOUT: u64 = 120;

/// One `[mcp_servers.NAME]` table of the user config, as written.
#[derive(Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// A stdio server: the program, its arguments and extra environment.
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of hel's environment it gets although they are secrets
    /// (every other secret is kept from it: see `tools::secret`).
    #[serde(default)]
    pub env_vars: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// A streamable-HTTP server: its URL.
    pub url: Option<String>,
    /// The environment variable whose value is sent as a bearer token.
    pub bearer_token_env_var: Option<String>,
    /// Header name → the environment variable holding its value.
    #[serde(default)]
    pub env_http_headers: BTreeMap<String, String>,
    /// The tools that only read: offered under `--access read-only`, run
    /// without confirmation under `confirm`.
    #[serde(default)]
    pub read_only_tools: Vec<String>,
    pub startup_timeout_sec: Option<u64>,
    pub tool_timeout_sec: Option<u64>,
    /// `false` leaves the server out.
    pub enabled: Option<bool>,
}

/// How hel reaches a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        /// Secret variables of hel's environment it gets.
        env_vars: Vec<String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        bearer_env: Option<String>,
        /// Header name → environment variable.
        headers: BTreeMap<String, String>,
    },
}

/// A checked server entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    pub name: String,
    pub transport: Transport,
    pub read_only: BTreeSet<String>,
    pub startup_timeout: Duration,
    pub tool_timeout: Duration,
    pub enabled: bool,
}

/// A server entry the config cannot use.
#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    #[error("mcp_servers.{0}: a server name is 1 to {max} characters of A-Z a-z 0-9 _ - without `__`; rename the table", max = name::MAX_SERVER)]
    BadName(String),
    #[error("mcp_servers.{0}: give either `command` (a stdio server) or `url` (a streamable-HTTP server)")]
    Transport(String),
    #[error("mcp_servers.{name}: `{key}` is only for {kind} servers")]
    Misplaced {
        name: String,
        key: &'static str,
        kind: &'static str,
    },
    #[error("mcp_servers.{0}: url must start with http:// or https://")]
    NotHttp(String),
    #[error("mcp_servers.{0}: a timeout must be 1 second or more")]
    Timeout(String),
}

impl ServerSpec {
    /// Check the config's tables (in name order).
    pub fn from_config(
        servers: &BTreeMap<String, ServerConfig>,
    ) -> Result<Vec<ServerSpec>, McpConfigError> {
        servers.iter().map(|(n, c)| ServerSpec::one(n, c)).collect()
    }

    fn one(name: &str, c: &ServerConfig) -> Result<ServerSpec, McpConfigError> {
        if !name::valid_server(name) {
            return Err(McpConfigError::BadName(name.to_owned()));
        }
        let misplaced = |key, kind| McpConfigError::Misplaced {
            name: name.to_owned(),
            key,
            kind,
        };
        let transport = match (&c.command, &c.url) {
            (Some(command), None) => {
                if c.bearer_token_env_var.is_some() {
                    return Err(misplaced("bearer_token_env_var", "streamable-HTTP"));
                }
                if !c.env_http_headers.is_empty() {
                    return Err(misplaced("env_http_headers", "streamable-HTTP"));
                }
                Transport::Stdio {
                    command: command.clone(),
                    args: c.args.clone(),
                    env: c.env.clone(),
                    env_vars: c.env_vars.clone(),
                    cwd: c.cwd.clone(),
                }
            }
            (None, Some(url)) => {
                if !c.args.is_empty()
                    || !c.env.is_empty()
                    || !c.env_vars.is_empty()
                    || c.cwd.is_some()
                {
                    return Err(misplaced("args, env, env_vars and cwd", "stdio"));
                }
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(McpConfigError::NotHttp(name.to_owned()));
                }
                Transport::Http {
                    url: url.clone(),
                    bearer_env: c.bearer_token_env_var.clone(),
                    headers: c.env_http_headers.clone(),
                }
            }
            _ => return Err(McpConfigError::Transport(name.to_owned())),
        };
        let secs = |v: Option<u64>, default| match v {
            Some(0) => Err(McpConfigError::Timeout(name.to_owned())),
            v => Ok(Duration::from_secs(v.unwrap_or(default))),
        };
        Ok(ServerSpec {
            name: name.to_owned(),
            transport,
            read_only: c.read_only_tools.iter().cloned().collect(),
            startup_timeout: secs(c.startup_timeout_sec, STARTUP_TIMEOUT)?,
            tool_timeout: secs(c.tool_timeout_sec, TOOL_TIMEOUT)?,
            enabled: c.enabled.unwrap_or(true),
        })
    }
}

/// One tool of a server, as offered to the model.
#[derive(Debug, Clone)]
pub struct Tool {
    /// `mcp__<server>__<tool>`.
    pub exposed: String,
    /// The server's own name for it.
    pub remote: String,
    /// Listed in `read_only_tools`.
    pub read_only: bool,
    pub description: String,
    /// The chat API's function definition.
    pub definition: Value,
}

/// The longest tool name taken (the protocol allows 128 characters).
const MAX_TOOL_NAME: usize = 256;

/// A tool as listed, cut to what hel keeps of it: every page of a list
/// may hold a message's worth of schema, and only this much of each is
/// held until the list is complete.
struct Listed {
    /// The server's name for it (cut, when refused for its length).
    name: String,
    /// At most [`MAX_DESCRIPTION`] characters.
    description: String,
    /// Its input schema, or why the tool is refused.
    schema: Result<Value, String>,
}

impl Listed {
    fn new(t: rmcp::model::Tool) -> Listed {
        let description: String = t
            .description
            .as_deref()
            .unwrap_or("")
            .chars()
            .take(MAX_DESCRIPTION)
            .collect();
        let name = t.name.to_string();
        if name.len() > MAX_TOOL_NAME {
            let cut: String = name.chars().take(64).collect();
            return Listed {
                name: format!("{cut}…"),
                description,
                schema: Err(format!("its name is over {MAX_TOOL_NAME} bytes")),
            };
        }
        // Measured without writing it out, and copied only when it fits.
        let mut size = Counted(0);
        let fits =
            serde_json::to_writer(&mut size, &*t.input_schema).is_ok() && size.0 <= MAX_SCHEMA;
        let schema = if fits {
            Ok(Value::Object((*t.input_schema).clone()))
        } else {
            Err(format!("its input schema is over {MAX_SCHEMA} bytes"))
        };
        Listed {
            name,
            description,
            schema,
        }
    }
}

/// A writer that only counts what it is given.
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A server that started, with its tools.
pub(crate) struct Server {
    pub name: String,
    pub tools: Vec<Tool>,
    tool_timeout: Duration,
    service: Option<RunningService<RoleClient, ClientConfig>>,
    process: Option<process::Process>,
}

/// What a start of the configured servers gave.
pub(crate) struct Started {
    pub servers: Vec<Server>,
    /// The servers that did not start, each with why.
    pub failed: Vec<(String, StartError)>,
    pub warnings: Vec<McpWarning>,
}

/// Why a tool call has no result (the model reads it).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error("the server was stopped")]
    Stopped,
    #[error("MCP server `{server}` did not answer within {secs}s")]
    Timeout { server: String, secs: u64 },
    #[error("MCP server `{server}`: {message}")]
    Server { server: String, message: String },
}

/// What [`probe`] found: every enabled server started (as a run would),
/// its tools listed, and stopped again.
pub struct Probe {
    /// The servers that started: each name with its tools.
    pub servers: Vec<(String, Vec<Tool>)>,
    /// The servers that did not start, each with why.
    pub failed: Vec<(String, StartError)>,
    pub warnings: Vec<McpWarning>,
    /// Where the servers' logs are (`mcp-logs/` under the instance runtime root).
    pub log_dir: PathBuf,
}

/// Why [`probe`] could not start anything.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot start an instance: {0}")]
    Instance(#[source] crate::instance::InstanceError),
}

/// Start every enabled server of `specs` as a run would (within this
/// process's instance, which makes the runtime root the logs go under),
/// list their tools, and stop them all.
pub fn probe(specs: &[ServerSpec]) -> Result<Probe, ProbeError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ProbeError::Runtime)?;
    let instance = crate::instance::Instance::start().map_err(ProbeError::Instance)?;
    let log_dir = log_dir();
    let withheld = withheld(specs);
    let mut started = runtime.block_on(start_all(specs, &log_dir, &withheld));
    for s in &mut started.servers {
        s.stop();
    }
    let servers = started
        .servers
        .drain(..)
        .map(|s| (s.name.clone(), s.tools.clone()))
        .collect();
    let Started {
        failed, warnings, ..
    } = started;
    runtime.shutdown_timeout(Duration::from_millis(500));
    instance.finish();
    Ok(Probe {
        servers,
        failed,
        warnings,
        log_dir,
    })
}

/// What is kept from commands and stdio servers (see `tools::secret`),
/// with the variables `specs` (every server of the config, enabled or
/// not) read a bearer token or a header's value from.
pub(crate) fn withheld(specs: &[ServerSpec]) -> crate::tools::secret::Withheld {
    crate::tools::secret::Withheld::of(specs.iter().flat_map(|s| {
        match &s.transport {
            Transport::Http {
                bearer_env,
                headers,
                ..
            } => bearer_env
                .iter()
                .chain(headers.values())
                .map(String::as_str)
                .collect(),
            Transport::Stdio { .. } => Vec::new(),
        }
    }))
}

/// Where the servers' logs are: `mcp-logs/` under this user's private
/// instance runtime root (see [`crate::instance`]).
pub(crate) fn log_dir() -> PathBuf {
    crate::instance::runtime_root().join("mcp-logs")
}

/// Where server `name`'s stderr goes: `<dir>/mcp-<name>.log`.
pub fn log_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("mcp-{name}.log"))
}

/// Start every enabled server in `specs` at once, each within its startup
/// timeout; a server that fails is left out (in `failed`, and said in a
/// warning naming its log under `log_dir`). A stdio server's environment
/// is hel's less what `withheld` keeps.
pub(crate) async fn start_all(
    specs: &[ServerSpec],
    log_dir: &Path,
    withheld: &crate::tools::secret::Withheld,
) -> Started {
    let enabled: Vec<&ServerSpec> = specs.iter().filter(|s| s.enabled).collect();
    {
        use std::os::unix::fs::DirBuilderExt;
        // A failure shows as each stdio server's failure to open its log.
        let _ = std::fs::DirBuilder::new().mode(0o700).create(log_dir);
    }
    let starts = enabled.iter().map(|spec| async move {
        let log = log_path(log_dir, &spec.name);
        let secs = spec.startup_timeout.as_secs();
        match tokio::time::timeout(spec.startup_timeout, start_one(spec, log, withheld)).await {
            Ok(r) => r,
            // Dropping the start stops its process.
            Err(_) => Err(StartError::Timeout(secs)),
        }
    });
    let results = futures_util::future::join_all(starts).await;
    let mut started = Started {
        servers: Vec::new(),
        failed: Vec::new(),
        warnings: Vec::new(),
    };
    for (spec, r) in enabled.into_iter().zip(results) {
        match r {
            Ok((server, warnings)) => {
                started.servers.push(server);
                started.warnings.extend(warnings);
            }
            Err(error) => {
                let ran = matches!(spec.transport, Transport::Stdio { .. })
                    && !matches!(error, StartError::Spawn { .. });
                started.warnings.push(McpWarning::NotStarted {
                    server: spec.name.clone(),
                    error: error.clone(),
                    log: ran.then(|| log_path(log_dir, &spec.name)),
                });
                started.failed.push((spec.name.clone(), error));
            }
        }
    }
    started
}

async fn start_one(
    spec: &ServerSpec,
    log: PathBuf,
    withheld: &crate::tools::secret::Withheld,
) -> Result<(Server, Vec<McpWarning>), StartError> {
    let (service, process) = match &spec.transport {
        Transport::Stdio {
            command,
            args,
            env,
            env_vars,
            cwd,
        } => {
            let launch = process::Launch {
                command,
                args,
                env,
                env_vars,
                withheld,
                cwd: cwd.as_deref(),
                log,
            };
            let (process, stdout, stdin) =
                process::spawn(&launch).map_err(|e| StartError::Spawn {
                    command: command.clone(),
                    error: e.to_string(),
                })?;
            let stdout =
                bounded::Bounded::new(stdout, MAX_MESSAGE, hel_store::json::Limits::MESSAGE);
            // The line's end is not counted by `Bounded`.
            let transport =
                AsyncRwTransport::new(stdout, stdin).with_max_line_length(MAX_MESSAGE + 2);
            // The process is held while the handshake runs: a timeout that
            // drops this future stops it.
            let mut process = Some(process);
            let service = client().serve(transport).await.map_err(|e| {
                if let Some(p) = process.as_mut() {
                    p.stop(false);
                }
                StartError::Handshake(e.to_string())
            })?;
            (service, process)
        }
        Transport::Http {
            url,
            bearer_env,
            headers,
        } => {
            let transport = http_transport(url, bearer_env.as_deref(), headers)?;
            let service = client()
                .serve(transport)
                .await
                .map_err(|e| StartError::Handshake(e.to_string()))?;
            (service, None)
        }
    };
    let mut server = Server {
        name: spec.name.clone(),
        tools: Vec::new(),
        tool_timeout: spec.tool_timeout,
        service: Some(service),
        process,
    };
    let listed = server.list().await?;
    let warnings = server.take_tools(spec, listed);
    Ok((server, warnings))
}

/// What hel tells a server of itself: its name and version, and no
/// capabilities (no sampling, roots or elicitation: a server cannot ask
/// the model or the user anything through hel).
fn client() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("hel", env!("CARGO_PKG_VERSION")),
    )
}

/// The streamable-HTTP transport to `url`, with the headers the config
/// names read from the environment.
fn http_transport(
    url: &str,
    bearer_env: Option<&str>,
    headers: &BTreeMap<String, String>,
) -> Result<StreamableHttpClientTransport<reqwest_mcp::Client>, StartError> {
    use reqwest_mcp::header::{HeaderName, HeaderValue};
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| StartError::NoVariable(name.to_owned()))
    };
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(v) = bearer_env {
        config.auth_header = Some(var(v)?);
    }
    for (header, v) in headers {
        let name = HeaderName::from_bytes(header.as_bytes())
            .map_err(|_| StartError::Http(format!("bad header name {header:?}")))?;
        let value = HeaderValue::from_str(&var(v)?)
            .map_err(|_| StartError::Http(format!("the value of {v} is not a header value")))?;
        config.custom_headers.insert(name, value);
    }
    config.max_sse_event_size = MAX_MESSAGE;
    config.max_json_response_size = MAX_MESSAGE;
    // reqwest 0.13 without a provider of its own panics on build unless
    // one is installed; an error here means one already is.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest_mcp::Client::builder()
        .pool_max_idle_per_host(0)
        // A redirect would carry the headers to wherever it points.
        .redirect(reqwest_mcp::redirect::Policy::none())
        .build()
        .map_err(|e| StartError::Http(e.to_string()))?;
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

impl Server {
    fn service(&self) -> Result<&RunningService<RoleClient, ClientConfig>, CallError> {
        self.service.as_ref().ok_or(CallError::Stopped)
    }

    /// The server's tools, at most [`MAX_TOOLS`] (+1, to tell that there
    /// were more) over at most [`MAX_PAGES`] pages, each cut to what is
    /// kept of it as its page arrives ([`Listed::new`]).
    async fn list(&self) -> Result<Vec<Listed>, StartError> {
        let service = self
            .service()
            .map_err(|e| StartError::ListTools(e.to_string()))?;
        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_PAGES {
            let page = service
                .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
                .await
                .map_err(|e| StartError::ListTools(e.to_string()))?;
            let room = (MAX_TOOLS + 1).saturating_sub(tools.len());
            tools.extend(page.tools.into_iter().take(room).map(Listed::new));
            cursor = page.next_cursor;
            if cursor.is_none() || tools.len() > MAX_TOOLS {
                break;
            }
        }
        Ok(tools)
    }

    /// Take the listed tools under their offered names: sorted by the
    /// server's names, a name taken twice refused, and one whose schema is
    /// not a JSON object or too large refused.
    fn take_tools(&mut self, spec: &ServerSpec, listed: Vec<Listed>) -> Vec<McpWarning> {
        let mut warnings = Vec::new();
        let mut listed = listed;
        if listed.len() > MAX_TOOLS {
            listed.truncate(MAX_TOOLS);
            warnings.push(McpWarning::TooManyTools(self.name.clone()));
        }
        listed.sort_by(|a, b| a.name.cmp(&b.name));
        let mut taken: BTreeMap<String, String> = BTreeMap::new();
        for t in listed {
            let remote = t.name;
            let schema = match t.schema {
                Ok(schema) => schema,
                Err(why) => {
                    warnings.push(McpWarning::ToolRefused {
                        server: self.name.clone(),
                        tool: remote,
                        why,
                    });
                    continue;
                }
            };
            let exposed = name::exposed(&self.name, &remote);
            if let Some(first) = taken.get(&exposed) {
                warnings.push(McpWarning::Collision {
                    server: self.name.clone(),
                    first: first.clone(),
                    second: remote,
                    name: exposed,
                });
                continue;
            }
            let description = t.description;
            let definition = json!({
                "type": "function",
                "function": {
                    "name": exposed,
                    "description": format!("(MCP server {}) {description}", self.name),
                    "parameters": schema,
                }
            });
            taken.insert(exposed.clone(), remote.clone());
            self.tools.push(Tool {
                exposed,
                read_only: spec.read_only.contains(&remote),
                remote,
                description,
                definition,
            });
        }
        warnings
    }

    /// Call tool `remote` with `arguments`, within the tool timeout: the
    /// result's text (`Err`: why there is none, for the model to read).
    async fn call(
        &self,
        remote: &str,
        arguments: Option<serde_json::Map<String, Value>>,
    ) -> Result<(String, bool), CallError> {
        let service = self.service()?;
        let mut params = CallToolRequestParams::new(remote.to_owned());
        params.arguments = arguments;
        let secs = self.tool_timeout.as_secs();
        // Dropping the request on timeout tells the server it is cancelled.
        let result = tokio::time::timeout(self.tool_timeout, service.call_tool(params))
            .await
            .map_err(|_| CallError::Timeout {
                server: self.name.clone(),
                secs,
            })?
            .map_err(|e| CallError::Server {
                server: self.name.clone(),
                message: e.to_string(),
            })?;
        let is_error = result.is_error.unwrap_or(false);
        let mut text = String::new();
        for block in &result.content {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&block_text(
                &serde_json::to_value(block).unwrap_or_default(),
            ));
        }
        if result.content.is_empty() {
            if let Some(s) = &result.structured_content {
                text = s.to_string();
            }
        }
        Ok((text, !is_error))
    }

    /// Stop the server (a stdio server's process group with it).
    pub(crate) fn stop(&mut self) {
        if let Some(service) = self.service.take() {
            // Ends the service's task; its transport closes with it.
            service.cancellation_token().cancel();
            drop(service);
        }
        if let Some(mut p) = self.process.take() {
            p.stop(true);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One content block as the model reads it: text as it is; what is not
/// text is named, not sent.
fn block_text(block: &Value) -> String {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    match kind {
        "text" => block
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        "resource" => {
            let r = block.get("resource").cloned().unwrap_or_default();
            match r.get("text").and_then(Value::as_str) {
                Some(t) => t.to_owned(),
                None => format!(
                    "[resource {} not shown: not text]",
                    r.get("uri").and_then(Value::as_str).unwrap_or("?")
                ),
            }
        }
        "resource_link" => format!(
            "[resource link: {}]",
            block.get("uri").and_then(Value::as_str).unwrap_or("?")
        ),
        other => format!(
            "[{other} content ({}) not shown]",
            block.get("mimeType").and_then(Value::as_str).unwrap_or("?")
        ),
    }
}

/// The MCP tools of a run: nothing until the servers start (at the run's
/// first instruction), then the servers that started.
#[derive(Default)]
pub(crate) struct Tools {
    servers: Vec<Server>,
}

impl Tools {
    pub(crate) fn new(servers: Vec<Server>) -> Tools {
        Tools { servers }
    }

    /// The tool offered as `exposed`, and its server.
    pub(crate) fn find(&self, exposed: &str) -> Option<(&Server, &Tool)> {
        self.servers.iter().find_map(|s| {
            s.tools
                .iter()
                .find(|t| t.exposed == exposed)
                .map(|t| (s, t))
        })
    }

    pub(crate) fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// Stop every server (at the run's end).
    pub(crate) fn shutdown(&mut self) {
        for s in &mut self.servers {
            s.stop();
        }
    }
}

/// The model's raw arguments of an MCP tool's call, parsed once with the
/// bounded parse ([`crate::tools::args::parse_object`]: a key repeated at
/// any depth is refused): None when there are none. What the user
/// confirms and what the server receives are both this one value.
pub(crate) fn arguments(
    raw_args: &str,
) -> Result<Option<serde_json::Map<String, Value>>, crate::tools::args::ArgsError> {
    if raw_args.trim().is_empty() {
        return Ok(None);
    }
    crate::tools::args::parse_object("the MCP tool", raw_args).map(Some)
}

/// Run a call of `tool` on `server` with `arguments` (from [`arguments`]):
/// they are sent as they are, the value the confirmation showed.
pub(crate) async fn call(
    server: &Server,
    tool: &Tool,
    arguments: Option<serde_json::Map<String, Value>>,
) -> Result<(String, bool), CallError> {
    server.call(&tool.remote, arguments).await
}

/// What confirmation shows of a call: the tool, and its arguments as the
/// value the server will receive (pretty JSON, every line of it).
///
/// It is asked as a command is: the call in full is the preview, and an
/// "always" allows exactly this call (this tool with these arguments),
/// never the tool whatever its arguments, since a server's tool can do
/// anything.
pub(crate) fn request(
    tool: &Tool,
    arguments: &Option<serde_json::Map<String, Value>>,
) -> crate::tools::access::Request {
    let value = arguments.clone().map_or(Value::Null, Value::Object);
    let pretty = match arguments {
        None => "(no arguments)".to_owned(),
        Some(_) => serde_json::to_string_pretty(&value).unwrap_or_default(),
    };
    let summary = format!("call {}", tool.exposed);
    let preview = pretty.split('\n').map(str::to_owned).collect();
    crate::tools::access::Request {
        summary: summary.clone(),
        tool: crate::tools::args::ToolName::Bash,
        preview,
        command: Some(format!("{summary} {value}")),
        program: None,
        path: None,
        edit: None,
        secrets: Vec::new(),
    }
}

/// The server names a checkpoint records.
pub(crate) fn names(tools: &Tools) -> Vec<String> {
    tools.servers.iter().map(|s| s.name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn one(c: ServerConfig) -> Result<ServerSpec, McpConfigError> {
        ServerSpec::from_config(&BTreeMap::from([("s".to_owned(), c)])).map(|mut v| v.remove(0))
    }

    #[test]
    fn tables_are_checked() {
        let stdio = ServerConfig {
            command: Some("srv".into()),
            ..Default::default()
        };
        let spec = one(stdio.clone()).unwrap();
        assert_eq!(spec.startup_timeout, Duration::from_secs(STARTUP_TIMEOUT));
        assert!(spec.enabled);
        let both = ServerConfig {
            url: Some("http://h/mcp".into()),
            ..stdio.clone()
        };
        assert!(matches!(one(both), Err(McpConfigError::Transport(_))));
        let headers_on_stdio = ServerConfig {
            bearer_token_env_var: Some("T".into()),
            ..stdio.clone()
        };
        assert!(matches!(
            one(headers_on_stdio),
            Err(McpConfigError::Misplaced { .. })
        ));
        let zero = ServerConfig {
            tool_timeout_sec: Some(0),
            ..stdio
        };
        assert!(matches!(one(zero), Err(McpConfigError::Timeout(_))));
        let ftp = ServerConfig {
            url: Some("ftp://h".into()),
            ..Default::default()
        };
        assert!(matches!(one(ftp), Err(McpConfigError::NotHttp(_))));
    }

    /// Tools as a server lists them, taken under the config `spec`.
    fn take(spec: &ServerSpec, listed: Vec<rmcp::model::Tool>) -> (Server, Vec<McpWarning>) {
        let mut server = Server {
            name: spec.name.clone(),
            tools: Vec::new(),
            tool_timeout: spec.tool_timeout,
            service: None,
            process: None,
        };
        let warnings = server.take_tools(spec, listed.into_iter().map(Listed::new).collect());
        (server, warnings)
    }

    #[test]
    fn colliding_names_and_huge_schemas_are_refused_and_hints_ignored() {
        let mut spec = one(ServerConfig {
            command: Some("srv".into()),
            read_only_tools: vec!["a.b".into()],
            ..Default::default()
        })
        .unwrap();
        spec.name = "s".into();
        let schema = |v: Value| match v {
            Value::Object(m) => Arc::new(m),
            _ => unreachable!(),
        };
        let small = schema(json!({"type": "object"}));
        let huge = schema(json!({"type": "object", "description": "x".repeat(MAX_SCHEMA)}));
        let mut hinted = rmcp::model::Tool::new("w", "says it only reads", small.clone());
        hinted.annotations = Some(rmcp::model::ToolAnnotations::new().read_only(true));
        let listed = vec![
            rmcp::model::Tool::new("a_b", "second in order", small.clone()),
            rmcp::model::Tool::new("a.b", "first in order", small.clone()),
            rmcp::model::Tool::new("big", "too large", huge),
            hinted,
        ];
        let (server, warnings) = take(&spec, listed);
        let names: Vec<(&str, &str, bool)> = server
            .tools
            .iter()
            .map(|t| (t.exposed.as_str(), t.remote.as_str(), t.read_only))
            .collect();
        assert_eq!(
            names,
            [("mcp__s__a_b", "a.b", true), ("mcp__s__w", "w", false)]
        );
        let said: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(
            said[0].contains("tools `a.b` and `a_b` both become `mcp__s__a_b`"),
            "{}",
            said[0]
        );
        assert!(
            said[1].contains("`big` left out: its input schema is over"),
            "{}",
            said[1]
        );
        assert_eq!(
            server.tools[0].definition["function"]["name"],
            "mcp__s__a_b"
        );
    }

    #[test]
    fn content_that_is_not_text_is_named_not_sent() {
        assert_eq!(block_text(&json!({"type": "text", "text": "hi"})), "hi");
        let image = block_text(&json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}));
        assert_eq!(image, "[image content (image/png) not shown]");
        let blob = block_text(
            &json!({"type": "resource", "resource": {"uri": "file:///x", "blob": "AAAA"}}),
        );
        assert!(blob.contains("file:///x") && !blob.contains("AAAA"));
    }
}
