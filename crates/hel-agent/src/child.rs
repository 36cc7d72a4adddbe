//! What a child process hel starts for the user's configuration (an MCP
//! server, a hook) gets between fork and exec: a session and process group
//! of its own (no controlling terminal; a stop ends the group whole),
//! nothing but stdin, stdout and stderr across the exec, and SIGKILL when
//! hel dies (a SIGKILL of hel runs no cleanup of hel's).

/// Run in `pre_exec`: only async-signal-safe system calls.
pub(crate) fn isolate() -> std::io::Result<()> {
    rustix::process::setsid()?;
    // SAFETY: plain system calls on this process's own descriptors and
    // settings, async-signal-safe.
    unsafe {
        libc::close_range(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC as libc::c_int);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    Ok(())
}
