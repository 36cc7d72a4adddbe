//! What of hel's environment never reaches what it starts: the one place
//! that decides which environment variables are secrets, and the
//! environment that commands (sandboxed or not) and stdio MCP servers
//! inherit.
//!
//! A variable is withheld when its name marks it secret
//! ([`is_secret_name`]), when hel reads a credential from it
//! ([`CREDENTIAL_VARS`]), or when the user's config names it as where an
//! MCP server's bearer token or a header's value comes from
//! ([`Withheld::of`], fed by `mcp::withheld`). An MCP stdio server gets back exactly the variables
//! its own table of the user's config lists in `env_vars`; nothing gives
//! them back to commands.

use std::collections::BTreeSet;
use std::ffi::OsString;

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

/// Parts of a word that make a name secret wherever they occur in it.
const SECRET_PARTS: &[&str] = &["SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL"];

/// Whether the name of an environment variable marks its value as a
/// secret. The name is split into words at every character that is not an
/// ASCII letter or digit, case ignored; it is secret when a word
///
/// - contains SECRET, PASSWORD, PASSWD, PASSPHRASE or CREDENTIAL
///   (`CLIENT_SECRET`, `PGPASSWORD`, `GOOGLE_APPLICATION_CREDENTIALS`);
/// - ends in KEY or KEYS (`OPENAI_API_KEY`, `AWS_ACCESS_KEY_ID`, `apiKey`),
///   but not `KEYBOARD`, `KEYMAP`, `KEYRING`;
/// - ends in TOKEN (`GITHUB_TOKEN`, `GHTOKEN`), but not `TOKENS` (a count,
///   `MAX_TOKENS`) or `TOKENIZERS_PARALLELISM`;
/// - is PASS, CRED or CREDS (`SMTP_PASS`, `DB_CREDS`), or PWD in a longer
///   name (`MYSQL_PWD`; `PWD` and `OLDPWD` are directories);
/// - ends in AUTH (`NPM_CONFIG__AUTH`, `OAUTH_CLIENT`) or is AUTHORIZATION,
///   unless the name ends in SOCK: `SSH_AUTH_SOCK` is the path of a
///   socket, not a secret (and a command that did not get it could still
///   find the socket).
///
/// What is not secret by these rules: `XDG_*`, `SSH_ASKPASS`, `XAUTHORITY`,
/// `GIT_AUTHOR_NAME`, `BYPASS_*`.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> = upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let socket = words.last() == Some(&"SOCK");
    words.iter().any(|w| {
        SECRET_PARTS.iter().any(|p| w.contains(p))
            || w.ends_with("KEY")
            || w.ends_with("KEYS")
            || w.ends_with("TOKEN")
            || matches!(*w, "PASS" | "CRED" | "CREDS")
            || (*w == "PWD" && words.len() > 1)
            || ((w.ends_with("AUTH") || *w == "AUTHORIZATION") && !socket)
    })
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_recognised_and_look_alikes_are_not() {
        for secret in [
            "OPENAI_API_KEY",
            "DEEPSEEK_API_KEY",
            "HEL_API_KEY",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "github_token",
            "apiKey",
            "MY_SERVICE_PASSWORD",
            "PGPASSWORD",
            "MYSQL_PWD",
            "SMTP_PASS",
            "DB_PASSWD",
            "GPG_PASSPHRASE",
            "CLIENT_SECRET",
            "SECRETS",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "AWS_SHARED_CREDENTIALS_FILE",
            "DB_CREDS",
            "SSH_KEYS",
            "NPM_CONFIG__AUTH",
            "HTTP_AUTH",
            "OAUTH_CLIENT",
            "PROXY_AUTHORIZATION",
            "SIGNING-KEY",
            "STRIPE.SECRET",
        ] {
            assert!(is_secret_name(secret), "{secret} is a secret");
        }
        for plain in [
            "PATH",
            "HOME",
            "LANG",
            "PWD",
            "OLDPWD",
            "TERM",
            "KEYBOARD",
            "KEYMAP",
            "XKB_DEFAULT_LAYOUT",
            "GNOME_KEYRING_CONTROL",
            "XDG_RUNTIME_DIR",
            "XDG_SESSION_ID",
            "XDG_CONFIG_HOME",
            "SSH_AUTH_SOCK",
            "SSH_ASKPASS",
            "XAUTHORITY",
            "GIT_AUTHOR_NAME",
            "MAX_TOKENS",
            "TOKENIZERS_PARALLELISM",
            "BYPASS_CACHE",
            "COMPASS_HOME",
            "HEL_MODEL",
            "HEL_BASE_URL",
            "AWS_REGION",
            "AWS_PROFILE",
            "",
            "_",
        ] {
            assert!(!is_secret_name(plain), "{plain} is not a secret");
        }
    }

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
