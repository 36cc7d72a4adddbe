//! Provider resolution and the request config: what a run sends and to whom.

use serde_json::{json, Value};

/// A provider preset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    Deepseek,
    Openai,
}

/// What the user chose about the model server (flags and environment).
#[derive(Clone, Debug, Default)]
pub struct ProviderChoice {
    /// An explicit preset (`--provider`).
    pub provider: Option<Provider>,
    /// `--base-url` / `HEL_BASE_URL`.
    pub base_url: Option<String>,
    /// `--model` / `HEL_MODEL`.
    pub model: Option<String>,
    /// The output limit per request, in tokens.
    pub max_output_tokens: u64,
}

/// A configuration problem: reported before anything starts.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("base URL {0:?} is not an http(s) URL: pass --base-url http://host:port")]
    NotHttp(String),
    #[error("no model for the {0} provider: pass --model NAME or set HEL_MODEL")]
    NoModel(&'static str),
    #[error("{var} is not set: export your {provider} API key as {var} (or use --base-url for another server)")]
    NoKey {
        var: &'static str,
        provider: &'static str,
    },
    #[error("unknown tool {name:?} in --tools: choose from {known} (or none)")]
    UnknownTool { name: String, known: String },
    #[error("--keep-recent ({keep_recent}) must be smaller than --compact-at ({compact_at})")]
    KeepRecent { keep_recent: u64, compact_at: u64 },
}

/// Everything that shapes a model request except the messages: a part of
/// the session record, stored in every checkpoint (the key is not part of
/// it).
pub(crate) use hel_store::RequestConfig;

/// The resolved endpoint: config plus the key, which is never stored.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub config: RequestConfig,
    pub api_key: Option<String>,
}

/// The key of a server that is not a preset's (`--base-url`), if any.
const HEL_API_KEY: &str = "HEL_API_KEY";

/// The environment variable a provider's API key is read from.
pub(crate) fn key_var(provider: &str) -> &'static str {
    match provider {
        "deepseek" => "DEEPSEEK_API_KEY",
        "openai" => "OPENAI_API_KEY",
        _ => HEL_API_KEY,
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Resolve the provider from flags and environment (see README, "Providers").
pub fn resolve(args: &ProviderChoice) -> Result<Endpoint, ConfigError> {
    let (provider, base, key_var, default_model, field) = match args.provider {
        Some(Provider::Deepseek) => (
            "deepseek",
            "https://api.deepseek.com",
            Some("DEEPSEEK_API_KEY"),
            Some("deepseek-v4-flash"),
            "max_tokens",
        ),
        Some(Provider::Openai) => (
            "openai",
            "https://api.openai.com/v1",
            Some("OPENAI_API_KEY"),
            None,
            "max_completion_tokens",
        ),
        None if args.base_url.is_some() => ("compatible", "", None, None, "max_tokens"),
        None => (
            "deepseek",
            "https://api.deepseek.com",
            Some("DEEPSEEK_API_KEY"),
            Some("deepseek-v4-flash"),
            "max_tokens",
        ),
    };
    let base_url = args.base_url.clone().unwrap_or_else(|| base.to_owned());
    let base_url = base_url.trim_end_matches('/').to_owned();
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(ConfigError::NotHttp(base_url));
    }
    let model = match (&args.model, default_model) {
        (Some(m), _) if provider == "deepseek" && m == "deepseek-flash" => {
            "deepseek-v4-flash".to_owned()
        }
        (Some(m), _) => m.clone(),
        (None, Some(d)) => d.to_owned(),
        (None, None) => return Err(ConfigError::NoModel(provider)),
    };
    let api_key = match key_var {
        Some(var) => Some(env(var).ok_or(ConfigError::NoKey { var, provider })?),
        None => env(HEL_API_KEY),
    };
    Ok(Endpoint {
        config: RequestConfig {
            provider: provider.to_owned(),
            base_url,
            model,
            params: json!({}),
            max_output_tokens: args.max_output_tokens,
            output_limit_field: field.to_owned(),
            tools: Vec::new(),
            compaction: Value::Null,
            mcp_servers: Vec::new(),
            import: None,
        },
        api_key,
    })
}

/// The one place a request body is built: `config`'s model and params,
/// `messages`, the tool definitions when `tools`, and `max_output` as the
/// output limit (the configured one, or less where the window has no room
/// for it).
pub(crate) fn request_body(
    config: &RequestConfig,
    messages: &[Value],
    tools: bool,
    max_output: u64,
) -> Value {
    let mut body = json!({
        "model": config.model,
        "messages": messages,
    });
    if let Value::Object(params) = &config.params {
        for (k, v) in params {
            body[k] = v.clone();
        }
    }
    body[&config.output_limit_field] = json!(max_output);
    if tools && !config.tools.is_empty() {
        body["tools"] = Value::Array(config.tools.clone());
    }
    body
}
