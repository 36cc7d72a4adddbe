//! What of hel's environment never reaches what it starts: the one place
//! that decides which environment variables are secrets, and the
//! environment that commands (sandboxed or not) and stdio MCP servers
//! inherit. And the secrets of what tools give back: redacted to handles
//! before a result is anything but a value in memory, and put back in
//! place of their handles when a tool runs (see hel-secrets).
//!
//! A variable is withheld when its name marks it secret
//! ([`is_secret_name`]), when hel reads a credential from it
//! ([`CREDENTIAL_VARS`]), or when the user's config names it as where an
//! MCP server's bearer token or a header's value comes from
//! ([`Withheld::of`], fed by `mcp::withheld`). An MCP stdio server gets back exactly the variables
//! its own table of the user's config lists in `env_vars`; nothing gives
//! them back to commands.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::sync::Arc;

use hel_secrets::{Detector, Redactor, UnknownHandle, HANDLE_OPEN};
use serde_json::Value;

/// The variables hel itself reads credentials from, whatever the name
/// rules say: the model providers' API keys (see [`crate::config`]) and
/// the AWS credentials of S3 remotes (hel-remote reads every `AWS_*`
/// variable through `object_store`; these are the ones that hold
/// credentials).
pub(crate) const CREDENTIAL_VARS: &[&str] = &[
    "DEEPSEEK_API_KEY",
    "OPENAI_API_KEY",
    "HEL_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_TOKEN",
    "AWS_SSE_CUSTOMER_KEY_BASE64",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
];

/// The one rule of which names are secret: hel-secrets' (it decides
/// which environment values are redacted too).
pub use hel_secrets::is_secret_name;

/// The variables withheld from what hel starts beyond the name rules:
/// those the user's config names as the source of an MCP server's bearer
/// token or of a header's value (their names need not look secret).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Withheld {
    /// Upper-cased.
    names: BTreeSet<String>,
}

impl Withheld {
    /// The name rules, hel's own variables and `names` (what the config's
    /// MCP servers read credentials from).
    pub(crate) fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> Withheld {
        Withheld {
            names: names.into_iter().map(|v| v.to_ascii_uppercase()).collect(),
        }
    }

    /// Whether the variable `name` is kept from commands and MCP servers.
    pub(crate) fn holds(&self, name: &str) -> bool {
        is_secret_name(name)
            || CREDENTIAL_VARS.iter().any(|v| v.eq_ignore_ascii_case(name))
            || self.names.contains(&name.to_ascii_uppercase())
    }

    /// `env` without what is withheld, except the variables `given` names
    /// (an MCP server's `env_vars`, from the user's config). A name that is
    /// not UTF-8 is judged by its readable part.
    pub(crate) fn filter<I>(&self, env: I, given: &[String]) -> Vec<(OsString, OsString)>
    where
        I: IntoIterator<Item = (OsString, OsString)>,
    {
        env.into_iter()
            .filter(|(k, _)| {
                let name = k.to_string_lossy();
                !self.holds(&name) || given.iter().any(|g| g.as_str() == name)
            })
            .collect()
    }

    /// hel's own environment as what it starts inherits it: see
    /// [`Withheld::filter`].
    pub(crate) fn inherited(&self, given: &[String]) -> Vec<(OsString, OsString)> {
        self.filter(std::env::vars_os(), given)
    }
}

/// A run's redactor: gitleaks' rules and the values of hel's
/// environment that are withheld from what it starts (the name rules,
/// hel's credentials, the MCP servers' credential variables).
pub(crate) fn redactor(withheld: &Withheld) -> Redactor {
    let env = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| withheld.holds(k));
    Redactor::new(Arc::new(Detector::new(env)))
}

/// `message` with the secrets of its text `content` replaced by handles.
pub(crate) fn redact_content(secrets: &mut Redactor, mut message: Value) -> Value {
    if let Some(Value::String(text)) = message.get_mut("content") {
        if let Cow::Owned(redacted) = secrets.redact(text) {
            *text = redacted;
        }
    }
    message
}

/// A tool call's arguments (JSON) with every handle in their strings
/// replaced by its value: None when they hold no handle; the error names
/// the first handle `secrets` holds no value of. Arguments that are not
/// JSON are left to the tool to refuse.
pub(crate) fn with_values(secrets: &Redactor, raw: &str) -> Result<Option<String>, UnknownHandle> {
    // The model may write the opening `‹` escaped.
    if !raw.contains(HANDLE_OPEN) && !raw.contains("\\u2039") {
        return Ok(None);
    }
    let Ok(mut args) = hel_store::json::parse(raw.as_bytes(), hel_store::json::Limits::MESSAGE)
    else {
        return Ok(None);
    };
    let mut changed = false;
    substitute(secrets, &mut args, &mut changed)?;
    Ok(changed.then(|| args.to_string()))
}

fn substitute(secrets: &Redactor, v: &mut Value, changed: &mut bool) -> Result<(), UnknownHandle> {
    match v {
        Value::String(s) => {
            if let Cow::Owned(new) = secrets.substitute(s)? {
                *s = new;
                *changed = true;
            }
        }
        Value::Array(a) => {
            for v in a {
                substitute(secrets, v, changed)?;
            }
        }
        Value::Object(o) => {
            for v in o.values_mut() {
                substitute(secrets, v, changed)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Tell the confirm question of a call the handles hel replaces by their
/// values (`raw`: the arguments as the model wrote them).
pub(crate) fn note(request: &mut super::access::Request, raw: &str) {
    for h in Redactor::handles_in(raw) {
        if !request.secrets.iter().any(|s| s == h) {
            request.secrets.push(h.to_owned());
        }
    }
}

/// `data` (a piece of a command's output, shown live) with what
/// `detector` finds masked as `‹secret›`, found in `before` (what was
/// shown just before it) and `data`: a secret that the edge between two
/// pieces cuts is masked in the second. (The first has shown its start,
/// too little to match: the live view is a glimpse of the last line, the
/// result is redacted whole.)
pub(crate) fn mask(detector: &Detector, before: &[u8], data: &[u8]) -> Vec<u8> {
    let before = String::from_utf8_lossy(before);
    let text = format!("{before}{}", String::from_utf8_lossy(data));
    let found: Vec<_> = detector
        .detect(&text)
        .into_iter()
        .filter(|f| f.range.end > before.len())
        .collect();
    if found.is_empty() {
        return data.to_vec();
    }
    let mut out = Vec::with_capacity(data.len());
    let mut at = before.len();
    for f in found {
        out.extend_from_slice(&text.as_bytes()[at..f.range.start.max(at)]);
        out.extend_from_slice("‹secret›".as_bytes());
        at = f.range.end;
    }
    out.extend_from_slice(&text.as_bytes()[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_withheld_and_what_a_server_is_given() {
        let w = Withheld::of(["DOCS_BEARER_VAR", "docs_team"]);
        let env: Vec<(OsString, OsString)> = [
            ("LANG", "C.UTF-8"),
            ("PATH", "/usr/bin"),
            ("DOCS_BEARER_VAR", "b"),
            ("DOCS_TEAM", "t"),
            ("GITHUB_TOKEN", "g"),
            ("AWS_SECRET_ACCESS_KEY", "a"),
            ("AWS_REGION", "eu-west-1"),
            ("MY_SERVICE_PASSWORD", "p"),
        ]
        .iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        let names = |kept: Vec<(OsString, OsString)>| -> Vec<String> {
            kept.into_iter()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            names(w.filter(env.clone(), &[])),
            ["LANG", "PATH", "AWS_REGION"]
        );
        // What a server's own `env_vars` lists, it gets (that one only).
        assert_eq!(
            names(w.filter(env.clone(), &["GITHUB_TOKEN".into()])),
            ["LANG", "PATH", "GITHUB_TOKEN", "AWS_REGION"]
        );
        // Without the config, only the name rules and hel's own.
        assert_eq!(
            names(Withheld::of([]).filter(env, &[])),
            ["LANG", "PATH", "DOCS_BEARER_VAR", "DOCS_TEAM", "AWS_REGION"]
        );
        // A name that is not UTF-8 is judged by what can be read of it.
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(b"X_\xffTOKEN".to_vec());
        assert!(w.filter([(odd, "v".into())], &[]).is_empty());
    }

    #[test]
    fn every_provider_key_is_a_credential_variable() {
        for provider in ["deepseek", "openai", "compatible"] {
            let var = crate::config::key_var(provider);
            assert!(CREDENTIAL_VARS.contains(&var), "{var}");
        }
    }
}

#[cfg(test)]
mod handles {
    use super::*;

    fn held() -> (Redactor, String) {
        let mut r = Redactor::default();
        let token = format!("ghp_{}", "R8t3xQ9vLmN2pK7wZ4yB6cD1eF5gH0jA9sUq");
        let red = r.redact(&format!("t={token}")).into_owned();
        assert_eq!(red, "t=‹secret:github-pat:1›");
        (r, token)
    }

    #[test]
    fn handles_in_arguments_become_values() {
        let (r, token) = held();
        assert_eq!(with_values(&r, r#"{"command":"ls"}"#).unwrap(), None);
        let args = r#"{"command":"curl -H 'x: ‹secret:github-pat:1›'"}"#;
        let v = with_values(&r, args).unwrap().unwrap();
        let v: Value = serde_json::from_str(&v).unwrap();
        assert_eq!(v["command"], format!("curl -H 'x: {token}'"));
        // Escaped as JSON may escape it; nested in arrays and objects.
        let args = r#"{"a":[{"b":"\u2039secret:github-pat:1\u203a"}]}"#;
        let v: Value = serde_json::from_str(&with_values(&r, args).unwrap().unwrap()).unwrap();
        assert_eq!(v["a"][0]["b"], token.as_str());
        // An invented handle fails, naming it.
        let e = with_values(&r, r#"{"command":"echo ‹secret:github-pat:2›"}"#).unwrap_err();
        assert_eq!(e.0, "‹secret:github-pat:2›");
    }

    #[test]
    fn the_question_says_a_secret_goes_in() {
        let (_, token) = held();
        let raw = r#"{"command":"echo ‹secret:github-pat:1› ‹secret:github-pat:1›"}"#;
        use crate::tools::access::Request;
        use crate::tools::args::{Call, ToolName};
        let call = Call::parse(ToolName::Bash, raw).unwrap();
        let mut request = Request::of(&call);
        note(&mut request, raw);
        assert_eq!(request.secrets, ["‹secret:github-pat:1›"]);
        assert!(!request.preview.concat().contains(&token));
    }

    #[test]
    fn live_output_is_masked() {
        let d = Detector::new(Vec::<(String, String)>::new());
        let token = format!("ghp_{}", "R8t3xQ9vLmN2pK7wZ4yB6cD1eF5gH0jA9sUq");
        let out = mask(&d, b"", format!("GITHUB_TOKEN={token}\n").as_bytes());
        assert_eq!(String::from_utf8(out).unwrap(), "GITHUB_TOKEN=‹secret›\n");
        assert_eq!(mask(&d, b"", b"plain \xff"), b"plain \xff");
        // Cut by the edge between two pieces: masked in the second.
        let line = format!("x GITHUB_TOKEN={token} y\n");
        let (first, second) = line.split_at(22);
        assert_eq!(mask(&d, b"", first.as_bytes()), first.as_bytes());
        let out = mask(&d, first.as_bytes(), second.as_bytes());
        assert_eq!(String::from_utf8(out).unwrap(), "‹secret› y\n");
    }
}
