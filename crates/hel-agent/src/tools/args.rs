//! The tools' names, arguments and definitions: what the model may call
//! and with what. Each tool's argument struct and its JSON schema are
//! side by side here; a test checks that they name the same fields.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A tool, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolName {
    Bash,
    ReadFile,
    WriteFile,
    SearchReplace,
    Glob,
    Grep,
}

impl ToolName {
    /// Every tool, in the order they are offered.
    pub const ALL: [ToolName; 6] = [
        ToolName::Bash,
        ToolName::ReadFile,
        ToolName::WriteFile,
        ToolName::SearchReplace,
        ToolName::Glob,
        ToolName::Grep,
    ];

    /// The name the model calls it by.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::Bash => "bash",
            ToolName::ReadFile => "read_file",
            ToolName::WriteFile => "write_file",
            ToolName::SearchReplace => "search_replace",
            ToolName::Glob => "glob",
            ToolName::Grep => "grep",
        }
    }

    pub fn parse(name: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Tools that only read (offered in read-only mode, never confirmed).
    pub fn only_reads(self) -> bool {
        matches!(self, ToolName::ReadFile | ToolName::Glob | ToolName::Grep)
    }

    /// The JSON definition sent with each request.
    pub fn definition(self) -> Value {
        let (desc, props, required): (&str, Value, &[&str]) = match self {
            ToolName::Bash => (
                "Run a bash command in the project directory (sandboxed: writes only inside the project and $TMPDIR). Returns exit=<code>, stdout and stderr.",
                json!({"command": {"type": "string", "description": "The command line"}}),
                &["command"],
            ),
            ToolName::ReadFile => (
                "Read a UTF-8 text file (at most 10,000 bytes per call). When more remains, the result ends with a cursor to continue; pass only that cursor to continue.",
                json!({
                    "path": {"type": "string", "description": "File path relative to the project"},
                    "start_line": {"type": "integer", "description": "First line to read, from 1"},
                    "max_lines": {"type": "integer", "description": "Lines to read"},
                    "cursor": {"type": "string", "description": "Continue a truncated read"}
                }),
                &[],
            ),
            ToolName::WriteFile => (
                "Create or overwrite a file with the given content.",
                json!({"path": {"type": "string"}, "content": {"type": "string"}}),
                &["path", "content"],
            ),
            ToolName::SearchReplace => (
                "Replace the one occurrence of `search` in a file with `replace`. Nothing changes unless `search` occurs exactly once.",
                json!({"path": {"type": "string"}, "search": {"type": "string"}, "replace": {"type": "string"}}),
                &["path", "search", "replace"],
            ),
            ToolName::Glob => (
                "List files matching a glob pattern (such as **/*.rs), one per line, sorted.",
                json!({"pattern": {"type": "string"}, "path": {"type": "string", "description": "Directory to search (default: the project)"}}),
                &["pattern"],
            ),
            ToolName::Grep => (
                "Search file contents with a regular expression; prints path:line:text per match, sorted by path.",
                json!({
                    "pattern": {"type": "string", "description": "Regular expression"},
                    "path": {"type": "string", "description": "Directory to search (default: the project)"},
                    "include": {"type": "string", "description": "Only files matching this glob, such as *.rs"}
                }),
                &["pattern"],
            ),
        };
        json!({
            "type": "function",
            "function": {
                "name": self.as_str(),
                "description": desc,
                "parameters": {"type": "object", "properties": props, "required": required},
            }
        })
    }
}

// Optional fields are `Option`s (JSON null counts as absent); fields the
// model did not declare are ignored, as models sometimes add some.

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct BashArgs {
    pub command: String,
}

#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
pub struct ReadArgs {
    pub path: Option<String>,
    pub start_line: Option<u64>,
    pub max_lines: Option<u64>,
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct WriteArgs {
    pub path: String,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct SearchReplaceArgs {
    pub path: String,
    pub search: String,
    pub replace: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct GlobArgs {
    pub pattern: String,
    pub path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct GrepArgs {
    pub pattern: String,
    pub path: Option<String>,
    pub include: Option<String>,
}

/// A tool call with its arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Bash(BashArgs),
    ReadFile(ReadArgs),
    WriteFile(WriteArgs),
    SearchReplace(SearchReplaceArgs),
    Glob(GlobArgs),
    Grep(GrepArgs),
}

/// Why a call's arguments cannot be used (the model reads this).
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error("the arguments of {tool} are not a JSON object: {raw:?}")]
    NotObject { tool: &'static str, raw: String },
    /// Well-formed JSON that repeats a key in an object, or is past the
    /// bounds of a message: refused before anyone is asked, since two
    /// readers of a repeated key can see two different calls.
    #[error("the arguments of {tool} are refused before anyone is asked: {source}")]
    Refused {
        tool: &'static str,
        source: hel_store::json::JsonError,
    },
    #[error("bad arguments for {tool}: {source}")]
    Invalid {
        tool: &'static str,
        source: serde_json::Error,
    },
}

/// The raw arguments of a call to `tool` (empty means `{}`) as the one
/// JSON object they are, through the bounded parse that refuses a key
/// repeated at any depth: what is shown to be confirmed and what runs are
/// then both this one value.
pub(crate) fn parse_object(
    tool: &'static str,
    raw: &str,
) -> Result<serde_json::Map<String, Value>, ArgsError> {
    let text = if raw.trim().is_empty() { "{}" } else { raw };
    match hel_store::json::parse(text.as_bytes(), hel_store::json::Limits::MESSAGE) {
        Ok(Value::Object(m)) => Ok(m),
        Err(source) if source.is_limit() => Err(ArgsError::Refused { tool, source }),
        _ => Err(ArgsError::NotObject {
            tool,
            raw: raw.to_owned(),
        }),
    }
}

impl Call {
    /// Parse the raw arguments of a call to `tool` (empty means `{}`),
    /// with [`parse_object`].
    pub fn parse(tool: ToolName, raw: &str) -> Result<Call, ArgsError> {
        let value = Value::Object(parse_object(tool.as_str(), raw)?);
        fn typed<T: serde::de::DeserializeOwned>(tool: ToolName, v: Value) -> Result<T, ArgsError> {
            serde_json::from_value(v).map_err(|source| ArgsError::Invalid {
                tool: tool.as_str(),
                source,
            })
        }
        Ok(match tool {
            ToolName::Bash => Call::Bash(typed(tool, value)?),
            ToolName::ReadFile => Call::ReadFile(typed(tool, value)?),
            ToolName::WriteFile => Call::WriteFile(typed(tool, value)?),
            ToolName::SearchReplace => Call::SearchReplace(typed(tool, value)?),
            ToolName::Glob => Call::Glob(typed(tool, value)?),
            ToolName::Grep => Call::Grep(typed(tool, value)?),
        })
    }

    pub fn tool(&self) -> ToolName {
        match self {
            Call::Bash(_) => ToolName::Bash,
            Call::ReadFile(_) => ToolName::ReadFile,
            Call::WriteFile(_) => ToolName::WriteFile,
            Call::SearchReplace(_) => ToolName::SearchReplace,
            Call::Glob(_) => ToolName::Glob,
            Call::Grep(_) => ToolName::Grep,
        }
    }

    /// What the user is asked to allow (writes and commands).
    pub fn request(&self) -> String {
        let path = match self {
            Call::Bash(a) => return format!("run `{}`", a.command),
            Call::WriteFile(a) => a.path.as_str(),
            Call::SearchReplace(a) => a.path.as_str(),
            Call::ReadFile(a) => a.path.as_deref().unwrap_or(""),
            Call::Glob(a) => a.path.as_deref().unwrap_or(""),
            Call::Grep(a) => a.path.as_deref().unwrap_or(""),
        };
        format!("{} {path}", self.tool().as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn properties(tool: ToolName) -> (Vec<String>, Vec<String>) {
        let d = tool.definition();
        let params = &d["function"]["parameters"];
        let mut props: Vec<String> = params["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        props.sort();
        let mut required: Vec<String> = params["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_owned())
            .collect();
        required.sort();
        (props, required)
    }

    /// The schema and the struct name the same fields, and the schema's
    /// required fields are exactly those a call cannot go without.
    #[test]
    fn schemas_match_the_argument_structs() {
        let full = |tool| {
            let (props, _) = properties(tool);
            let mut v = serde_json::Map::new();
            for p in &props {
                let sample = match p.as_str() {
                    "start_line" | "max_lines" => json!(1),
                    _ => json!("x"),
                };
                v.insert(p.clone(), sample);
            }
            Value::Object(v)
        };
        for tool in ToolName::ALL {
            assert_eq!(ToolName::parse(tool.as_str()), Some(tool));
            let (props, required) = properties(tool);
            let call = Call::parse(tool, &full(tool).to_string()).unwrap();
            assert_eq!(call.tool(), tool);
            let back = match &call {
                Call::Bash(a) => serde_json::to_value(a),
                Call::ReadFile(a) => serde_json::to_value(a),
                Call::WriteFile(a) => serde_json::to_value(a),
                Call::SearchReplace(a) => serde_json::to_value(a),
                Call::Glob(a) => serde_json::to_value(a),
                Call::Grep(a) => serde_json::to_value(a),
            }
            .unwrap();
            let mut fields: Vec<String> = back.as_object().unwrap().keys().cloned().collect();
            fields.sort();
            assert_eq!(fields, props, "{tool:?}");
            for r in &props {
                let mut without = full(tool);
                without.as_object_mut().unwrap().remove(r);
                let ok = Call::parse(tool, &without.to_string()).is_ok();
                assert_eq!(ok, !required.contains(r), "{tool:?} without {r}");
            }
        }
    }

    #[test]
    fn arguments_are_typed() {
        assert!(matches!(
            Call::parse(ToolName::ReadFile, ""),
            Ok(Call::ReadFile(ReadArgs { path: None, .. }))
        ));
        assert!(matches!(
            Call::parse(ToolName::ReadFile, r#"{"path": null, "extra": 1}"#),
            Ok(Call::ReadFile(ReadArgs { path: None, .. }))
        ));
        for (tool, raw) in [
            (ToolName::Bash, "[\"ls\"]"),
            (ToolName::Bash, "{not json"),
            (ToolName::Glob, "\"*\""),
        ] {
            let e = Call::parse(tool, raw).unwrap_err().to_string();
            assert!(e.contains("not a JSON object"), "{e}");
        }
        // A key twice, at the top or deeper: refused, whatever the tool,
        // before anything reads either value.
        for (tool, raw) in [
            (
                ToolName::Bash,
                r#"{"command": "ls", "command": "rm -rf ~"}"#,
            ),
            (
                ToolName::WriteFile,
                r#"{"path": "notes.txt", "content": "x", "path": "/home/ada/.bashrc"}"#,
            ),
            (
                ToolName::Grep,
                r#"{"pattern": "x", "extra": {"a": 1, "a": 2}}"#,
            ),
        ] {
            let e = Call::parse(tool, raw).unwrap_err();
            assert!(matches!(e, ArgsError::Refused { .. }), "{e}");
            assert!(e.to_string().contains("a key repeated"), "{e}");
        }
        let m = parse_object("mcp__s__write", r#"{"a": {"b": 1}, "c": [1, {"b": 2}]}"#).unwrap();
        assert_eq!(m.len(), 2);
        assert!(parse_object("x", r#"{"a": [{"b": 1, "b": 1}]}"#).is_err());
        for (tool, raw) in [
            (ToolName::Bash, "{}"),
            (ToolName::ReadFile, r#"{"start_line": -1}"#),
            (ToolName::ReadFile, r#"{"path": 5}"#),
        ] {
            let e = Call::parse(tool, raw).unwrap_err().to_string();
            assert!(e.starts_with("bad arguments for "), "{e}");
        }
    }
}
