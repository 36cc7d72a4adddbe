//! What every bash call shares, sandboxed or not: the environment it gets
//! and how its result reads.

use std::ffi::OsString;
use std::path::Path;

use hel_sandbox::Status;

use crate::tools::secret::is_secret;

/// hel's environment without keys, with the instance's tmp dir as `$TMPDIR`.
pub(super) fn command_env(tmp: &Path) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !k.to_str().is_some_and(is_secret))
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
