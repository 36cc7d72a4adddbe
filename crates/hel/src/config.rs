//! The user's settings: flags, then the environment, then the config file
//! `$XDG_CONFIG_HOME/hel/config.toml` (default `~/.config/hel/config.toml`),
//! then the defaults.
//!
//! Nothing is ever read from the project directory: a cloned repository
//! must not be able to switch on `--access auto` or point hel at another
//! server. API keys are never read from the file (a key in it is refused,
//! so it is not left lying there believed to work).

use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::ArgMatches;
use serde::Deserialize;

use crate::cli::{Access, ProviderName, RunArgs};
use crate::exit::{Exit, Usage};

/// The largest config file read.
const MAX_BYTES: u64 = 64 * 1024;

/// The config file's keys (all optional).
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct File {
    provider: Option<ProviderName>,
    model: Option<String>,
    base_url: Option<String>,
    access: Option<Access>,
    context_window: Option<u64>,
    max_output_tokens: Option<u64>,
    /// `false` turns compaction off.
    compaction: Option<bool>,
    compact_at: Option<u64>,
    keep_recent: Option<u64>,
    stream: Option<bool>,
    /// `--allow-git-write`.
    allow_git_write: Option<bool>,
    /// `--network` (true) or `--no-network` (false).
    network: Option<bool>,
    /// `false`: `--quiet` (a resume at the prompt shows nothing of the
    /// earlier conversation).
    resume_replay: Option<bool>,
    /// Days a deleted session stays in the trash (default 30; 0: until
    /// the next gc). The user's file only: nothing in a project changes it.
    trash_days: Option<u64>,
    /// A size the store should stay under: once over it, trash entries
    /// expire oldest first ("20G"; default: none).
    store_budget: Option<ByteSize>,
    /// MCP servers whose tools are offered (`[mcp_servers.NAME]`).
    #[serde(default)]
    mcp_servers: std::collections::BTreeMap<String, hel_agent::mcp::ServerConfig>,
}

/// A size in the config file: bytes, or a number with K, M, G or T
/// (powers of 1024).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ByteSize, D::Error> {
        let text = String::deserialize(d)?;
        parse_size(&text).map(ByteSize).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{text:?} is not a size (bytes, or a number with K, M, G or T: \"20G\")"
            ))
        })
    }
}

/// `"123"`, `"64K"`, `"20G"`… (powers of 1024), at most 2^64 - 1 bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last()? {
        (k, 'K' | 'k') => (&t[..k], 10),
        (k, 'M' | 'm') => (&t[..k], 20),
        (k, 'G' | 'g') => (&t[..k], 30),
        (k, 'T' | 't') => (&t[..k], 40),
        _ => (t, 0),
    };
    if digits.is_empty() || digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

/// How long the trash keeps deleted sessions: `trash_days` and
/// `store_budget` of the user's config file (never the project's), else
/// 30 days and no budget.
pub fn retention() -> Result<hel_store::trash::Retention, Exit> {
    let file = load()?.map(|(_, f)| f).unwrap_or_default();
    let days = file.trash_days.unwrap_or(hel_store::trash::DEFAULT_DAYS);
    Ok(hel_store::trash::Retention {
        max_age_ms: Some(days.saturating_mul(hel_store::trash::DAY_MS)),
        budget_bytes: file.store_budget.map(|b| b.0),
    })
}

/// `$XDG_CONFIG_HOME` (when absolute, as the XDG spec requires) or
/// `$HOME/.config`.
pub fn config_home() -> Option<PathBuf> {
    xdg("XDG_CONFIG_HOME", ".config")
}

fn xdg(var: &str, fallback: &str) -> Option<PathBuf> {
    match std::env::var_os(var).map(PathBuf::from) {
        Some(p) if p.is_absolute() => Some(p),
        _ => std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .map(|h| h.join(fallback)),
    }
}

/// Where the config file is.
pub fn path() -> Option<PathBuf> {
    config_home().map(|d| d.join("hel").join("config.toml"))
}

/// Read the config file, if there is one. A file that cannot be read or
/// parsed is a usage error naming it.
pub fn load() -> Result<Option<(PathBuf, File)>, Exit> {
    let Some(path) = path() else { return Ok(None) };
    let bytes = match read_bounded(&path) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(source) => return Err(Usage::ConfigUnreadable { path, source }.into()),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return Err(Usage::ConfigNotUtf8 { path }.into());
    };
    let file = parse(&path, &text)?;
    Ok(Some((path, file)))
}

/// The config file `path` holding `text`, checked as hel reads it.
fn parse(path: &Path, text: &str) -> Result<File, Exit> {
    let path = path.to_owned();
    let value: toml::Table = match toml::from_str(text) {
        Ok(v) => v,
        Err(source) => return Err(Usage::ConfigSyntax { path, source }.into()),
    };
    // The one rule of what names a secret (the environment's too).
    if let Some(key) = value.keys().find(|key| hel_agent::is_secret_name(key)) {
        let key = key.clone();
        return Err(Usage::ConfigKey { path, key }.into());
    }
    match File::deserialize(value) {
        Ok(file) => Ok(file),
        Err(source) => Err(Usage::ConfigKeys { path, source }.into()),
    }
}

/// The config file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}", path.display())]
pub struct ConfigWrite {
    path: PathBuf,
    source: std::io::Error,
}

impl crate::exit::Damage for ConfigWrite {}

/// `hel mcp add` and `remove`: the config file's text (empty when there
/// is none yet), to be edited and given to [`write_servers`].
pub fn read_for_edit(path: &Path) -> Result<String, Exit> {
    let bytes = match read_bounded(path) {
        Ok(b) => b.unwrap_or_default(),
        Err(source) => {
            let path = path.to_owned();
            return Err(Usage::ConfigUnreadable { path, source }.into());
        }
    };
    String::from_utf8(bytes).map_err(|_| {
        let path = path.to_owned();
        Usage::ConfigNotUtf8 { path }.into()
    })
}

/// Replace the config file at `path` by `text` once it reads as a config
/// file whose MCP servers are right: atomically (written aside, synced,
/// renamed over it), its permission bits kept. A link is followed: the
/// file it points to (in a dotfiles repository) is replaced.
pub fn write_servers(path: &Path, text: &str) -> Result<(), Exit> {
    mcp_servers(path, &parse(path, text)?)?;
    let failed = |source: std::io::Error| {
        let path = path.to_owned();
        Exit::new(crate::exit::Kind::Failed, ConfigWrite { path, source })
    };
    let real = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !path.is_symlink() => path.to_owned(),
        Err(e) => return Err(failed(e)),
    };
    let (Some(dir), Some(name)) = (real.parent(), real.file_name().and_then(|n| n.to_str())) else {
        return Err(failed(std::io::Error::other("not a file path")));
    };
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(failed)?;
    let mode = std::fs::metadata(&real).map_or(0o600, |m| m.permissions().mode() & 0o777);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let aside = format!(".{name}.{}-{nanos}.tmp", std::process::id());
    let io = |e: hel_fs::Error| failed(std::io::Error::other(e.to_string()));
    let d = hel_fs::Dir::open_path(dir).map_err(io)?;
    d.replace(name, text.as_bytes(), mode, &d, &aside)
        .map_err(io)
}

/// The config file's MCP servers, checked.
fn mcp_servers(path: &Path, f: &File) -> Result<Vec<hel_agent::mcp::ServerSpec>, Exit> {
    hel_agent::mcp::ServerSpec::from_config(&f.mcp_servers).map_err(|source| {
        Usage::McpServers {
            path: path.to_owned(),
            source,
        }
        .into()
    })
}

/// The file at `path`, at most [`MAX_BYTES`], never a FIFO or device;
/// `None` when there is none.
fn read_bounded(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    // The user's own file: a link (to a dotfiles repository) is followed.
    let file = match hel_fs::at::open_read_following(path) {
        Ok(fd) => std::fs::File::from(fd),
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    match hel_fs::read_to_bound(file, 0, MAX_BYTES, path) {
        Ok(out) => Ok(Some(out)),
        Err(hel_fs::Error::TooLarge { .. }) => Err(std::io::Error::other("over 64 KiB")),
        Err(hel_fs::Error::Io { source, .. }) => Err(source),
        Err(e) => Err(std::io::Error::other(e.to_string())),
    }
}

/// Where a setting came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Flag,
    Env,
    File(PathBuf),
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag => f.write_str("flag"),
            Source::Env => f.write_str("environment"),
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Default => f.write_str("default"),
        }
    }
}

/// Where `id` was given in `matches`, if it was.
fn given(matches: Option<&ArgMatches>, id: &str) -> Option<Source> {
    match matches?.value_source(id)? {
        ValueSource::CommandLine => Some(Source::Flag),
        ValueSource::EnvVariable => Some(Source::Env),
        _ => None,
    }
}

/// The run flags in force, and where each setting came from.
pub struct Settings {
    pub run: RunArgs,
    pub sources: Vec<(&'static str, Source)>,
}

/// Merge the run flags given before a subcommand (`top`), after it
/// (`sub`), the config file and the defaults: for each setting, the first
/// that has it.
pub fn settings(
    top: &RunArgs,
    top_m: &ArgMatches,
    sub: Option<(&RunArgs, &ArgMatches)>,
) -> Result<Settings, Exit> {
    let file = load()?;
    let mut run = sub.map_or_else(|| top.clone(), |(r, _)| r.clone());
    let sub_m = sub.map(|(_, m)| m);
    let mut sources = Vec::new();
    // Every run flag: after the subcommand wins, then before it.
    macro_rules! merge {
        ($($field:ident),* $(,)?) => {$(
            let id = stringify!($field);
            let from = given(sub_m, id).or_else(|| {
                given(Some(top_m), id).inspect(|_| run.$field = top.$field.clone())
            });
            if let Some(src) = from {
                sources.push((id, src));
            }
        )*};
    }
    merge!(
        instructions,
        model,
        base_url,
        provider,
        max_output_tokens,
        request_timeout,
        max_turns,
        record,
        access,
        tools,
        bash_timeout,
        allow_write,
        no_sandbox,
        network,
        no_network,
        allow_git_write,
        context_file,
        no_context_file,
        compact_at,
        keep_recent,
        no_compaction,
        context_window,
        no_workspace,
        workspace_max_file,
        workspace_budget,
        no_stream,
        output_format,
        include_partial,
        quiet,
    );
    // `--network` on one side of the subcommand, `--no-network` on the
    // other: the one after it wins, as for every flag.
    if run.network && run.no_network {
        if given(sub_m, "no_network").is_some() {
            run.network = false;
        } else {
            run.no_network = false;
        }
    }
    let set = |id: &str, sources: &[(&'static str, Source)]| sources.iter().any(|(k, _)| *k == id);
    // The config file fills what no flag or variable set.
    if let Some((path, f)) = file {
        run.mcp = mcp_servers(&path, &f)?;
        let src = Source::File(path);
        macro_rules! fill {
            ($field:ident, $value:expr, $id:literal) => {
                if let Some(v) = $value {
                    if !set($id, &sources) {
                        run.$field = v;
                        sources.push(($id, src.clone()));
                    }
                }
            };
        }
        fill!(provider, f.provider.map(Some), "provider");
        fill!(model, f.model.map(Some), "model");
        fill!(base_url, f.base_url.map(Some), "base_url");
        fill!(access, f.access, "access");
        fill!(context_window, f.context_window.map(Some), "context_window");
        fill!(max_output_tokens, f.max_output_tokens, "max_output_tokens");
        if !set("compact_at", &sources)
            && !set("keep_recent", &sources)
            && !set("no_compaction", &sources)
        {
            fill!(compact_at, f.compact_at.map(Some), "compact_at");
            fill!(keep_recent, f.keep_recent.map(Some), "keep_recent");
            fill!(no_compaction, f.compaction.map(|on| !on), "no_compaction");
        }
        fill!(no_stream, f.stream.map(|on| !on), "no_stream");
        fill!(allow_git_write, f.allow_git_write, "allow_git_write");
        fill!(quiet, f.resume_replay.map(|on| !on), "quiet");
        if !set("network", &sources) && !set("no_network", &sources) {
            fill!(network, f.network.filter(|on| *on), "network");
            fill!(
                no_network,
                f.network.filter(|on| !on).map(|_| true),
                "no_network"
            );
        }
    }
    if run.compact_at.is_some() != run.keep_recent.is_some() {
        return Err(Usage::CompactAtAlone.into());
    }
    Ok(Settings { run, sources })
}

/// `hel config`: the effective settings and where each came from.
pub fn print(settings: &Settings) {
    let src = |id: &str| {
        settings
            .sources
            .iter()
            .find(|(k, _)| *k == id)
            .map_or(Source::Default, |(_, s)| s.clone())
    };
    let r = &settings.run;
    let provider = match (r.provider, &r.base_url) {
        (Some(ProviderName::Deepseek), _) | (None, None) => "deepseek",
        (Some(ProviderName::Openai), _) => "openai",
        (None, Some(_)) => "compatible",
    };
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "(provider's)".into());
    let compaction = match (r.no_compaction, r.compact_at, r.keep_recent) {
        (true, _, _) => "off".to_owned(),
        (false, Some(a), Some(k)) => format!("at {a} tokens, keeping {k}"),
        _ => "default (by context window)".to_owned(),
    };
    let access = r.access.name();
    let rows: Vec<(&str, String, Source)> = vec![
        ("provider", provider.into(), src("provider")),
        ("model", opt(&r.model), src("model")),
        ("base_url", opt(&r.base_url), src("base_url")),
        ("access", access.into(), src("access")),
        (
            "context_window",
            r.context_window
                .map_or("(provider's)".into(), |w| w.to_string()),
            src("context_window"),
        ),
        (
            "max_output_tokens",
            r.max_output_tokens.to_string(),
            src("max_output_tokens"),
        ),
        (
            "compaction",
            compaction,
            src("compact_at").clone().min_source(src("no_compaction")),
        ),
        ("stream", (!r.no_stream).to_string(), src("no_stream")),
        ("resume_replay", (!r.quiet).to_string(), src("quiet")),
        (
            "allow_git_write",
            r.allow_git_write.to_string(),
            src("allow_git_write"),
        ),
        (
            "network",
            match (r.network_on(), r.network || r.no_network) {
                (on, true) => on.to_string(),
                (on, false) => format!("{on} (under access {access})"),
            },
            src("network").min_source(src("no_network")),
        ),
    ];
    for (k, v, s) in rows {
        println!("{k:<18} {:<32} {s}", hel_agent::text::escape_line(&v));
    }
    if let Some(w) = r.context_window {
        let planned = hel_agent::planned_output(w, r.max_output_tokens);
        if planned < r.max_output_tokens {
            println!(
                "\nnote: max_output_tokens ({}) is more than a quarter of context_window ({w}): each request asks for what fits in the window, and compaction plans for {planned} (README, Context budget)",
                r.max_output_tokens
            );
        }
    }
    match path() {
        Some(p) => println!(
            "\nconfig file: {}{}",
            p.display(),
            if p.exists() { "" } else { " (none)" }
        ),
        None => println!("\nconfig file: none (no HOME)"),
    }
}

trait MinSource {
    fn min_source(self, other: Source) -> Source;
}

impl MinSource for Source {
    /// The more specific of two sources.
    fn min_source(self, other: Source) -> Source {
        if self == Source::Default {
            other
        } else {
            self
        }
    }
}
