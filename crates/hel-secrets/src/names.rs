//! Which names mark a value as secret: the one rule hel uses for the
//! environment it withholds from commands, the environment values it
//! redacts, and the assignments it recognises in text.

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

/// The words whose presence in a text may make [`is_secret_name`] true of
/// a name in it (lower case): the prefilter of assignments.
pub(crate) const NAME_WORDS: &[&str] = &[
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "pass",
    "cred",
    "pwd",
    "auth",
];

/// A name as a handle's kind: lower case, `_` and `.` as `-`, at most 40
/// characters of `[a-z0-9-]`.
pub(crate) fn kind_of_name(name: &str) -> String {
    let mut kind: String = name
        .chars()
        .filter_map(|c| match c {
            'a'..='z' | '0'..='9' => Some(c),
            'A'..='Z' => Some(c.to_ascii_lowercase()),
            '_' | '.' | '-' => Some('-'),
            _ => None,
        })
        .take(40)
        .collect();
    while kind.ends_with('-') {
        kind.pop();
    }
    while kind.starts_with('-') {
        kind.remove(0);
    }
    if kind.is_empty() {
        kind.push_str("secret");
    }
    kind
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
            let upper = secret.to_ascii_lowercase();
            assert!(
                NAME_WORDS.iter().any(|w| upper.contains(w)),
                "{secret}: the prefilter passes it"
            );
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
    fn kinds_are_short_and_plain() {
        assert_eq!(
            kind_of_name("AWS_SECRET_ACCESS_KEY"),
            "aws-secret-access-key"
        );
        assert_eq!(kind_of_name("_x.Y_"), "x-y");
        assert_eq!(kind_of_name("‹›:"), "secret");
        assert!(kind_of_name(&"A".repeat(100)).len() <= 40);
    }
}
