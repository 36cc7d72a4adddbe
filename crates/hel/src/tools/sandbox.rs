//! The sandbox for `bash` (Linux). hel starts each command through itself
//! (`hel __sandbox -- <command>`): that fresh, single-threaded process
//! 1. enters a private mount namespace (with a user namespace when not root),
//! 2. covers `.hel/` with an empty tmpfs holding only the path down to the
//!    current session's spill directory, binds that directory back
//!    read-only, and makes the tmpfs read-only,
//! 3. applies Landlock so that writes are allowed only beneath the project,
//!    the instance tmp dir, `--allow-write` directories and a few device
//!    files (mounts first: a Landlock-restricted process can no longer
//!    change mounts),
//! 4. execs `bash -c <command>`.
//!
//! Reads stay open where the system needs them, and so does the network.
//! When a step is not possible here, the helper prints a line starting
//! with [`UNAVAILABLE`] and exits 125; the bash tool turns that into a
//! refusal that names what is missing and `--no-sandbox`.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, ABI,
};
use serde::{Deserialize, Serialize};

/// First words of the helper's report when it cannot confine a command.
pub const UNAVAILABLE: &str = "hel-sandbox-unavailable:";

/// The environment variable carrying the [`Spec`] to the helper.
pub const SPEC_VAR: &str = "HEL_SANDBOX_SPEC";

/// What the helper needs to know.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Spec {
    pub project: PathBuf,
    /// The directories commands may write beneath.
    pub writable: Vec<PathBuf>,
    /// The current session's spill directory, shown read-only.
    pub spill_dir: Option<PathBuf>,
}

/// Device files commands may write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/random",
    "/dev/urandom",
];

/// The helper's entry point: never returns.
pub fn helper_main(args: &[String]) -> ! {
    let command = match args {
        [dash, cmd] if dash == "--" => cmd.clone(),
        _ => fail("usage: hel __sandbox -- COMMAND"),
    };
    let spec: Spec = match std::env::var(SPEC_VAR)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
    {
        Some(s) => s,
        None => fail(&format!("{SPEC_VAR} is missing or malformed")),
    };
    std::env::remove_var(SPEC_VAR);
    if let Err(e) = enter_namespace() {
        fail(&format!("cannot create a private mount namespace ({e})"));
    }
    if let Err(e) = hide_store(&spec) {
        fail(&format!("cannot hide .hel/ ({e})"));
    }
    if let Err(e) = restrict_writes(&spec) {
        fail(&format!("Landlock is not available ({e})"));
    }
    let err = exec_bash(&command);
    fail(&format!("cannot run bash: {err}"))
}

fn fail(what: &str) -> ! {
    crate::note!("{UNAVAILABLE} {what}");
    std::process::exit(125)
}

fn cstr(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| format!("{} has a NUL byte", p.display()))
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn enter_namespace() -> Result<(), String> {
    // SAFETY: plain syscalls on this single-threaded process's own state.
    unsafe {
        let uid = libc::geteuid();
        let gid = libc::getegid();
        if uid == 0 {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(os_err("unshare"));
            }
        } else {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                return Err(os_err("unshare(user+mount)"));
            }
            // Map ourselves to ourselves so files keep their owners.
            let _ = std::fs::write("/proc/self/setgroups", "deny");
            std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))
                .map_err(|e| format!("uid_map: {e}"))?;
            std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
                .map_err(|e| format!("gid_map: {e}"))?;
        }
        let root = CString::new("/").unwrap_or_default();
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(os_err("make / private"));
        }
    }
    Ok(())
}

fn hide_store(spec: &Spec) -> Result<(), String> {
    let hel = spec.project.join(".hel");
    if !hel.is_dir() {
        return Ok(());
    }
    let hel_c = cstr(&hel)?;
    // Hold the spill directory open before it disappears under the tmpfs.
    let spill_fd = match &spec.spill_dir {
        Some(dir) if dir.is_dir() => {
            let c = cstr(dir)?;
            // SAFETY: open(2) with a valid C string.
            let fd = unsafe {
                libc::open(
                    c.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                )
            };
            if fd < 0 {
                return Err(os_err("open spill dir"));
            }
            Some((fd, dir.clone()))
        }
        _ => None,
    };
    let tmpfs = CString::new("tmpfs").unwrap_or_default();
    let opts = CString::new("mode=0755,size=64k").unwrap_or_default();
    // SAFETY: mount(2) with valid C strings.
    unsafe {
        if libc::mount(
            tmpfs.as_ptr(),
            hel_c.as_ptr(),
            tmpfs.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            opts.as_ptr().cast(),
        ) != 0
        {
            return Err(os_err("mount tmpfs on .hel"));
        }
    }
    if let Some((fd, dir)) = spill_fd {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let src = CString::new(format!("/proc/self/fd/{fd}")).unwrap_or_default();
        let dst = cstr(&dir)?;
        // SAFETY: mount(2) with valid C strings; fd is open.
        unsafe {
            if libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
            {
                return Err(os_err("bind spill dir"));
            }
            let flags = libc::MS_REMOUNT
                | libc::MS_BIND
                | libc::MS_RDONLY
                | libc::MS_NOSUID
                | libc::MS_NODEV;
            if libc::mount(
                std::ptr::null(),
                dst.as_ptr(),
                std::ptr::null(),
                flags,
                std::ptr::null(),
            ) != 0
            {
                return Err(os_err("make spill dir read-only"));
            }
            libc::close(fd);
        }
    }
    // SAFETY: as above.
    unsafe {
        let flags = libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
        if libc::mount(
            tmpfs.as_ptr(),
            hel_c.as_ptr(),
            tmpfs.as_ptr(),
            flags,
            opts.as_ptr().cast(),
        ) != 0
        {
            return Err(os_err("make .hel tmpfs read-only"));
        }
    }
    Ok(())
}

fn restrict_writes(spec: &Spec) -> Result<(), String> {
    let abi = ABI::V5;
    let handled = AccessFs::from_write(abi);
    let devices: Vec<&Path> = DEVICES
        .iter()
        .map(Path::new)
        .filter(|p| p.exists())
        .collect();
    let status = Ruleset::default()
        .handle_access(handled)
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(&spec.writable, handled)))
        .and_then(|r| r.add_rules(path_beneath_rules(&devices, handled)))
        .and_then(|r| r.restrict_self())
        .map_err(|e| e.to_string())?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("the kernel does not enforce it".into());
    }
    Ok(())
}

fn exec_bash(command: &str) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    std::process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .exec()
}
