//! The names MCP tools are offered under: `mcp__<server>__<tool>`, made to
//! fit the chat API's function names (at most 64 characters of
//! `[A-Za-z0-9_-]`).

/// What every MCP tool's name starts with; no tool of hel's does.
pub(crate) const PREFIX: &str = "mcp__";

/// The longest function name the chat API takes.
pub(crate) const MAX_NAME: usize = 64;

/// The longest server name the config takes: room is left for the tool's.
pub(crate) const MAX_SERVER: usize = 32;

/// Whether `name` is usable as a server name: 1 to [`MAX_SERVER`]
/// characters of `[A-Za-z0-9_-]`, without `__` (which separates the parts
/// of a tool's name).
pub(crate) fn valid_server(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SERVER
        && name.bytes().all(allowed)
        && !name.contains("__")
}

fn allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// The name server `server`'s (valid) tool `tool` is offered under: every
/// character outside `[A-Za-z0-9_-]` becomes `_`, and the whole is cut to
/// [`MAX_NAME`] characters. Two tools may come out the same: the caller
/// refuses the second.
pub(crate) fn exposed(server: &str, tool: &str) -> String {
    let mut name = format!("{PREFIX}{server}__");
    for c in tool.chars() {
        if name.len() >= MAX_NAME {
            break;
        }
        name.push(if c.is_ascii() && allowed(c as u8) {
            c
        } else {
            '_'
        });
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_the_chat_api() {
        assert_eq!(exposed("files", "read"), "mcp__files__read");
        assert_eq!(exposed("files", "read.file/é"), "mcp__files__read_file__");
        let long = exposed("s", &"x".repeat(200));
        assert_eq!(long.len(), MAX_NAME);
        let widest = exposed(&"s".repeat(MAX_SERVER), "t");
        assert!(
            widest.len() <= MAX_NAME && widest.ends_with("__t"),
            "{widest}"
        );
        for n in [long, widest, exposed("a", "ünï cödé ✓")] {
            assert!(n.len() <= MAX_NAME && n.bytes().all(allowed), "{n}");
        }
    }

    #[test]
    fn server_names_are_checked() {
        assert!(valid_server("files-1_x"));
        for bad in ["", "a b", "a__b", "a.b", &"s".repeat(MAX_SERVER + 1)] {
            assert!(!valid_server(bad), "{bad:?}");
        }
    }
}
