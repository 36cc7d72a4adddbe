//! Failpoints: named places where a test can make the store fail as a full
//! disk or a yanked directory would, at an exact moment no real fault can
//! be timed to. They exist only when hel-fs is built with the
//! `failpoints` feature (hel-store's feature of that name turns it on: the
//! test build, `tools/test`); in any other build [`hit`] is a constant
//! `false`.
//!
//! `HEL_FAILPOINTS` is a comma-separated list of `name` (fail every time),
//! `name*N` (fail the first N times in this process) or `name@N` (fail
//! the Nth time only).

/// Should the failpoint `name` fail now?
#[cfg(feature = "failpoints")]
pub fn hit(name: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static HITS: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);
    let Ok(spec) = std::env::var("HEL_FAILPOINTS") else {
        return false;
    };
    for item in spec.split(',') {
        let (n, rule) = if let Some((n, t)) = item.split_once('*') {
            (n, t.parse::<u64>().ok().map(|t| (t, false)))
        } else if let Some((n, k)) = item.split_once('@') {
            (n, k.parse::<u64>().ok().map(|k| (k, true)))
        } else {
            (item, None)
        };
        if n != name {
            continue;
        }
        let Some((k, exact)) = rule else { return true };
        let mut guard = match HITS.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let count = guard
            .get_or_insert_with(HashMap::new)
            .entry(name.to_owned())
            .or_insert(0);
        *count += 1;
        return if exact { *count == k } else { *count <= k };
    }
    false
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &str) -> bool {
    false
}

/// Die by SIGKILL at `name` when it fires: the crash tests' way to see
/// what a kill leaves at that exact moment (an upgrade, a push).
pub fn kill(name: &str) {
    if hit(name) {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// An error for a failpoint that fired.
pub fn error(name: &str) -> std::io::Error {
    std::io::Error::other(format!("failpoint {name}"))
}
