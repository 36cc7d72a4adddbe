//! What of hel's environment never reaches what it starts.

/// Environment variables that never reach a command (nor an MCP server,
/// unless its config names them): API keys.
pub(crate) fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.ends_with("_API_KEY") || n == "HEL_API_KEY"
}
