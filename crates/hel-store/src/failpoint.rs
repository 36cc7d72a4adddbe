//! Failpoints are hel-fs's (see [`hel_fs::failpoint`]); hel-store's
//! `failpoints` feature turns them on.

pub(crate) use hel_fs::failpoint::{error, hit};

/// Die by SIGKILL at `name` when it fires (the crash tests of the upgrade:
/// what a kill leaves at that exact moment).
pub(crate) fn kill(name: &str) {
    if hit(name) {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}
