//! What every bash call shares, sandboxed or not: the environment it gets
//! and how its result reads.

use std::ffi::OsString;
use std::path::Path;

use hel_sandbox::Status;

use crate::tools::secret::Withheld;

/// hel's environment less what is withheld (every secret, see
/// [`crate::tools::secret`]), with the instance's tmp dir as `$TMPDIR`.
pub(super) fn command_env(tmp: &Path, withheld: &Withheld) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = withheld
        .inherited(&[])
        .into_iter()
        .filter(|(k, _)| !matches!(k.to_str(), Some("TMPDIR" | "TMP" | "TEMP")))
        .collect();
    for var in ["TMPDIR", "TMP", "TEMP"] {
        env.push((var.into(), tmp.as_os_str().to_owned()));
    }
    env
}

/// The result the model reads: the exit status, stdout, stderr.
pub(super) fn format_result(
    status: Option<Status>,
    timeout: u64,
    stdout: &str,
    stderr: &str,
) -> String {
    let exit = match status {
        Some(Status::Code(c)) => format!("exit={c}"),
        Some(Status::Signal(s)) => format!("exit=signal {s}"),
        None => format!("exit=timeout after {timeout}s"),
    };
    format!("{exit}\nstdout:\n{stdout}\nstderr:\n{stderr}")
}

/// The line added to a sandboxed command's result when commands have no
/// network and what it printed says a connection or a name lookup failed.
pub(super) const NETWORK_OFF: &str = "note: network is off for commands (they have a loopback of their own: nothing outside the sandbox is reachable, not even the host's 127.0.0.1); the user can allow it with --network";

/// What failing tools print when a name does not resolve or a connection
/// cannot be made (curl, git, pip, npm, cargo, ssh, getaddrinfo, errno
/// texts), lower case.
const NETWORK_FAILURES: &[&str] = &[
    "could not resolve",
    "name resolution",
    "name or service not known",
    "no address associated with hostname",
    "failed to lookup address",
    "nodename nor servname",
    "getaddrinfo",
    "dns error",
    "network is unreachable",
    "connection refused",
    "no route to host",
    "enotfound",
    "eai_again",
    "econnrefused",
    "enetunreach",
];

/// Whether a command's output says it failed for lack of network.
pub(super) fn mentions_network_failure(stdout: &str, stderr: &str) -> bool {
    // The tail is where errors are; bounded, so a huge output costs little.
    let tail = |s: &str| {
        let mut from = s.len().saturating_sub(64 << 10);
        while !s.is_char_boundary(from) {
            from += 1;
        }
        s[from..].to_ascii_lowercase()
    };
    let (out, err) = (tail(stdout), tail(stderr));
    NETWORK_FAILURES
        .iter()
        .any(|p| out.contains(p) || err.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_failures_are_recognised() {
        for (out, err) in [
            ("", "curl: (6) Could not resolve host: example.com"),
            ("", "ssh: Could not resolve hostname github.com: Temporary failure in name resolution"),
            ("", "bash: connect: Connection refused\nbash: line 1: /dev/tcp/127.0.0.1/5: Connection refused"),
            ("error: failed to lookup address information", ""),
            ("", "npm ERR! code ENOTFOUND"),
            ("", "connect: Network is unreachable"),
        ] {
            assert!(mentions_network_failure(out, err), "{out} {err}");
        }
        assert!(!mentions_network_failure(
            "test result: ok",
            "warning: unused"
        ));
        let big = format!("{}é Could not resolve host", "x".repeat(200_000));
        assert!(mentions_network_failure(&big, ""));
    }
}
