//! `hel __sandbox-init <hel pid>`: the sandbox every command of an
//! instance runs in. Two processes, both fresh `execve`s of hel with an
//! empty environment:
//!
//! - **A** (this entry point) checks that hel is its parent (it dies with
//!   the hel thread that started it: `PR_SET_PDEATHSIG`; hel started it in
//!   a session of its own, so nothing here has a controlling terminal, and
//!   with only the socket open beyond stdio), reads the spec,
//!   unshares user, mount and PID namespaces (a user namespace even as
//!   root, mapping its own uid and gid to themselves) and, unless the spec
//!   gives commands the network, a network namespace whose only interface
//!   is a loopback (brought up: commands can still talk to each other and
//!   to themselves, never to the host's 127.0.0.1 or beyond), makes every
//!   mount private, forks B and waits for it.
//! - **B** is PID 1 of the new PID namespace. It dies with A (death signal,
//!   plus a pipe whose end A holds, since `getppid()` is 0 across the
//!   namespace hop) and exits when hel's end of the socket closes; its end
//!   takes every command with it. It mounts a fresh `/proc` (hel's
//!   processes are not in it: fail closed if that mount is impossible), a
//!   private `/dev` (null, zero, full, random, urandom, tty and a devpts
//!   instance of its own: no terminal of the user's), covers every other
//!   proc, devpts and devtmpfs mount, covers `.hel/` with an empty
//!   read-only tmpfs showing only the session's spill directory
//!   (read-only), covers each nested project's `.hel/` the same way
//!   (empty, read-only), binds the git directories onto themselves, read-only
//!   (found by hel-agent's `tools::gitdirs`), restricts writes with Landlock
//!   (and signals with `LANDLOCK_SCOPE_SIGNAL` where the kernel has it),
//!   drops every capability for good, and then serves run and kill requests.
//!   Each command is `bash -c` in a new session, with only stdin, stdout and
//!   stderr open. B reaps every orphan.
//!
//! Reports go back on the socket (see [`crate::proto`]); when a step is
//! impossible here, the report is `unavailable <what>` and the exit 125.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Component, Path};
use std::process::Stdio;

use landlock::{
    path_beneath_rules, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    ABI,
};
use rustix::event::{PollFd, PollFlags};
use rustix::fs::{FileType, Mode};
use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::process::{Pid, Signal, WaitOptions};

use hel_object::format::STORE_DIR;

use crate::proto::{self, FileId, GitMount, Hidden, Report, Request, RunBody, Spec, Status};

// libc stays for what rustix does not offer a process that has a libc:
// fork (rustix's is for libc-free runtimes only), sigprocmask and
// signalfd, close_range, TMPFS_MAGIC, and the interface ioctls that bring
// up the loopback.

/// Why a step of building the sandbox failed; the helper reports it to
/// hel, which refuses commands with it.
#[derive(Debug, thiserror::Error)]
enum SetupError {
    /// A system call failed: what was tried, then the error.
    #[error("{what}: {source}")]
    Sys {
        what: String,
        source: std::io::Error,
    },
    /// A step failed, and why (in parentheses).
    #[error("{step} ({cause})")]
    Step {
        step: &'static str,
        cause: Box<SetupError>,
    },
    /// Something is not as it must be.
    #[error("{0}")]
    Refused(String),
}

/// A failed system call's error, saying what was tried.
fn sys<E: Into<std::io::Error>>(what: impl Into<String>) -> impl FnOnce(E) -> SetupError {
    move |e| SetupError::Sys {
        what: what.into(),
        source: e.into(),
    }
}

/// An error of a step, within a larger one.
fn step(step: &'static str) -> impl FnOnce(SetupError) -> SetupError {
    move |cause| SetupError::Step {
        step,
        cause: Box::new(cause),
    }
}

/// A step that failed with a system error, shown in parentheses.
fn failed<E: Into<std::io::Error>>(what: &'static str) -> impl FnOnce(E) -> SetupError {
    move |e| SetupError::Step {
        step: what,
        cause: Box::new(SetupError::Refused(e.into().to_string())),
    }
}

/// The descriptor of hel's socket in the helper.
pub const SOCKET_FD: i32 = 3;

/// The devices of the private `/dev`, bound from the real ones (those
/// missing here are left out). `tty` reaches only a terminal a command
/// opened itself: commands have no controlling terminal.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// What Landlock lets commands write in the private `/dev`: the devices
/// and the sandbox's own terminals (`ptmx` is a link into `pts`).
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/pts",
];

/// Seconds the helper waits for hel's spec.
const SPEC_WAIT_SECS: i64 = 10;

/// The helper's entry point (process A): never returns.
pub fn helper_main(args: &[String]) -> ! {
    let Some(hel) = args
        .first()
        .and_then(|a| a.parse::<i32>().ok())
        .and_then(Pid::from_raw)
    else {
        std::process::exit(2)
    };
    // The death signal was armed before exec; if hel went away before
    // that, our parent is someone else now.
    if rustix::process::getppid() != Some(hel) {
        std::process::exit(1);
    }
    // SAFETY: fd 3 was set up by hel as this process's end of the socket;
    // nothing else in this fresh process refers to it.
    let is_socket = rustix::fs::fstat(unsafe { BorrowedFd::borrow_raw(SOCKET_FD) })
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Socket);
    if !is_socket {
        std::process::exit(1);
    }
    // SAFETY: as above; from here on this OwnedFd is its only owner.
    let sock = unsafe { OwnedFd::from_raw_fd(SOCKET_FD) };
    let _ = rustix::io::fcntl_setfd(&sock, rustix::io::FdFlags::CLOEXEC);
    // SAFETY: closes descriptors this process does not use; none is owned
    // by a Rust object (only 0-3 are, and they are kept).
    unsafe { libc::close_range(4, u32::MAX, 0) };

    let spec = match read_spec(&sock) {
        Ok(s) => s,
        Err(e) => fail(&sock, &format!("the sandbox could not read its spec: {e}")),
    };
    if let Err(e) = enter_namespaces(spec.network) {
        fail(&sock, &e.to_string());
    }
    let (alive_r, alive_w) = match rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC) {
        Ok(p) => p,
        Err(e) => fail(&sock, &sys("pipe")(e).to_string()),
    };
    // SAFETY: this process is single-threaded (a fresh exec that started no
    // thread), so the child may run any code.
    match unsafe { libc::fork() } {
        -1 => fail(
            &sock,
            &format!(
                "cannot start the namespace's init (fork: {})",
                std::io::Error::last_os_error()
            ),
        ),
        0 => {
            drop(alive_w);
            init_main(sock, alive_r, spec)
        }
        child => {
            drop(alive_r);
            drop(sock);
            let status = loop {
                match rustix::process::waitpid(Pid::from_raw(child), WaitOptions::empty()) {
                    Err(rustix::io::Errno::INTR) => continue,
                    Ok(Some((_, st))) => break st,
                    _ => std::process::exit(1),
                }
            };
            drop(alive_w);
            std::process::exit(status.exit_status().unwrap_or(1))
        }
    }
}

fn fail(sock: &OwnedFd, what: &str) -> ! {
    let _ = proto::send(
        sock.as_fd(),
        &Report::Unavailable(what.into()).encode(),
        &[],
    );
    std::process::exit(125)
}

fn wait_readable(fd: BorrowedFd<'_>, secs: i64) -> bool {
    let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
    let timeout = rustix::event::Timespec {
        tv_sec: secs,
        tv_nsec: 0,
    };
    matches!(rustix::event::poll(&mut fds, Some(&timeout)), Ok(n) if n > 0)
}

fn read_spec(sock: &OwnedFd) -> Result<Spec, SetupError> {
    let refused = |why: String| SetupError::Refused(why);
    if !wait_readable(sock.as_fd(), SPEC_WAIT_SECS) {
        return Err(refused("hel sent nothing".into()));
    }
    let msg = match proto::recv(sock.as_fd()) {
        Ok(Some(Ok(m))) => m,
        Ok(Some(Err(e))) => return Err(refused(e.to_string())),
        Ok(None) => std::process::exit(0),
        Err(e) => return Err(refused(e.to_string())),
    };
    if Request::parse(&msg.bytes) != Ok(Request::Init) || msg.fds.len() != 1 {
        return Err(refused("the first message is not the spec".into()));
    }
    let Some(body) = msg.fds.into_iter().next() else {
        return Err(refused("no spec".into()));
    };
    let bytes = proto::read_body(body).map_err(|e| refused(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| refused(e.to_string()))
}

fn enter_namespaces(network: bool) -> Result<(), SetupError> {
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    use rustix::thread::UnshareFlags as U;
    let (flags, what) = if network {
        (
            U::NEWUSER | U::NEWNS | U::NEWPID,
            "cannot create user, mount and PID namespaces",
        )
    } else {
        (
            U::NEWUSER | U::NEWNS | U::NEWPID | U::NEWNET,
            "cannot create user, mount, PID and network namespaces",
        )
    };
    // SAFETY: no FILES flag, and this process is single-threaded.
    unsafe { rustix::thread::unshare_unsafe(flags) }
        .map_err(sys("unshare"))
        .map_err(step(what))?;
    // Map ourselves to ourselves, so files keep their owners. A user
    // namespace even as root: commands then hold no capability outside it.
    match std::fs::write("/proc/self/setgroups", "deny") {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(sys("cannot write setgroups")(e))
        }
        _ => {}
    }
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))
        .map_err(sys("cannot map the user id"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
        .map_err(sys("cannot map the group id"))?;
    if !network {
        loopback_up().map_err(step("cannot bring up the sandbox's loopback"))?;
    }
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(sys("cannot make the mounts private"))
}

/// Bring up `lo` in the new network namespace (it starts down), as the
/// owner of the namespace's user namespace.
fn loopback_up() -> Result<(), SetupError> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let sock = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(sys("socket"))?;
    // SAFETY: an all-zero ifreq is valid (a C struct of integers, arrays
    // and a union of them).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq naming `lo`, and the ioctls read and
    // write only it.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) < 0 {
            return Err(sys("SIOCGIFFLAGS")(std::io::Error::last_os_error()));
        }
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS as _, &req) < 0 {
            return Err(sys("SIOCSIFFLAGS")(std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// Process B, PID 1 of the sandbox: set up, then serve. Never returns.
fn init_main(sock: OwnedFd, alive: OwnedFd, spec: Spec) -> ! {
    // Dies with A; and if A died before this, the pipe says so.
    let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
    if a_is_gone(&alive) {
        std::process::exit(1);
    }
    let sigchld = match setup(&spec) {
        Ok(fd) => fd,
        Err(e) => fail(&sock, &e.to_string()),
    };
    if proto::send(sock.as_fd(), &Report::Ready.encode(), &[]).is_err() {
        std::process::exit(1);
    }
    serve(&sock, &alive, &sigchld)
}

fn a_is_gone(alive: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(alive, PollFlags::IN)];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match rustix::event::poll(&mut fds, Some(&zero)) {
        Ok(n) => n > 0,
        Err(_) => true,
    }
}

/// Everything before serving; returns the SIGCHLD signalfd.
fn setup(spec: &Spec) -> Result<OwnedFd, SetupError> {
    // Nothing can attach to, or read the memory of, PID 1.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(sys("cannot make the sandbox undumpable"))?;
    let mounts = mount_proc()?;
    private_dev().map_err(step("cannot make a private /dev"))?;
    cover_elsewhere(&mounts)?;
    hide_store(spec).map_err(step("cannot hide .hel/"))?;
    hide_nested(&spec.stores).map_err(step("cannot hide a nested project's .hel/"))?;
    protect_git(&spec.git).map_err(step("cannot make the git directories read-only"))?;
    restrict(spec)?;
    drop_capabilities().map_err(step("cannot drop capabilities"))?;
    let _ = rustix::process::chdir("/");
    sigchld_fd().map_err(sys("signalfd"))
}

/// A fresh `/proc` for the new PID namespace; returns the mount table.
fn mount_proc() -> Result<String, SetupError> {
    let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    rustix::mount::mount("proc", "/proc", "proc", flags, None)
        .map_err(failed("cannot mount a private /proc"))?;
    std::fs::read_to_string("/proc/self/mountinfo").map_err(failed("cannot read the mount table"))
}

/// Cover every proc file system other than the new `/proc` (so that no
/// process outside the sandbox is visible) and every terminal or device
/// file system other than the private `/dev` (so that no terminal of the
/// user's is reachable by another path).
fn cover_elsewhere(mounts: &str) -> Result<(), SetupError> {
    let proc = mounts_elsewhere(mounts, &["proc"], "/proc");
    let dev = mounts_elsewhere(mounts, &["devpts", "devtmpfs"], "/dev");
    for target in proc.iter().chain(&dev) {
        cover(target).map_err(|e| {
            SetupError::Refused(format!("cannot cover the mount at {target} ({e})"))
        })?;
    }
    Ok(())
}

/// Hide what is mounted at `target`: an empty read-only tmpfs over a
/// directory, the private `/dev/null` (read-only) over anything else.
fn cover(target: &str) -> rustix::io::Result<()> {
    let hide = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC | MountFlags::RDONLY;
    let st = rustix::fs::stat(target)?;
    if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
        return rustix::mount::mount("tmpfs", target, "tmpfs", hide, None);
    }
    rustix::mount::mount_bind("/dev/null", target)?;
    rustix::mount::mount_remount(target, MountFlags::BIND | hide, "")
}

/// Mount points of file systems of the types `fstypes` other than `home`
/// (and what is beneath it, which the sandbox's own `home` hides).
fn mounts_elsewhere(mountinfo: &str, fstypes: &[&str], home: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if !right
            .split(' ')
            .next()
            .is_some_and(|t| fstypes.contains(&t))
        {
            continue;
        }
        let Some(point) = left.split(' ').nth(4) else {
            continue;
        };
        let point = unescape_octal(point);
        let beneath = point
            .strip_prefix(home)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        if !beneath && !out.contains(&point) {
            out.push(point);
        }
    }
    out
}

/// A private `/dev`: an empty tmpfs holding only [`DEVICES`] (bound from
/// the real ones), a devpts instance of the sandbox's own where the kernel
/// allows one (else no terminal at all: commands do not need one) and the
/// usual links, then made read-only. The user's terminals (`/dev/pts/*`,
/// consoles) are not in it.
fn private_dev() -> Result<(), SetupError> {
    let mut real = Vec::new();
    for name in DEVICES {
        let path = format!("/dev/{name}");
        match hel_fs::at::open_handle(rustix::fs::CWD, path.as_str()) {
            Ok(fd) => {
                let st = rustix::fs::fstat(&fd).map_err(sys(path.as_str()))?;
                if FileType::from_raw_mode(st.st_mode) == FileType::CharacterDevice {
                    real.push((*name, fd));
                }
            }
            Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(sys(path)(e)),
        }
    }
    let opts = c"mode=0755,size=64k,nr_inodes=64";
    let flags = MountFlags::NOSUID | MountFlags::NOEXEC;
    rustix::mount::mount("tmpfs", "/dev", "tmpfs", flags, opts).map_err(sys("mount a tmpfs"))?;
    let dev = hel_fs::at::open_dir_handle(rustix::fs::CWD, "/dev").map_err(sys("/dev"))?;
    for (name, src) in &real {
        let node = hel_fs::at::create_new(&dev, *name, 0o666)
            .map_err(sys(format!("create /dev/{name}")))?;
        rustix::mount::mount_bind(fd_path(src).as_str(), fd_path(&node).as_str())
            .map_err(sys(format!("bind /dev/{name}")))?;
    }
    rustix::fs::mkdirat(&dev, "pts", Mode::from_raw_mode(0o755)).map_err(sys("mkdir pts"))?;
    let pts = hel_fs::at::open_dir_handle(&dev, "pts").map_err(sys("pts"))?;
    // `newinstance`: its terminals are only those opened in the sandbox.
    let own = rustix::mount::mount(
        "devpts",
        fd_path(&pts).as_str(),
        "devpts",
        flags,
        c"newinstance,ptmxmode=0666,mode=0620",
    );
    let mut links = vec![
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ];
    if own.is_ok() {
        links.push(("ptmx", "pts/ptmx"));
    }
    for (name, target) in links {
        rustix::fs::symlinkat(target, &dev, name).map_err(sys(format!("link /dev/{name}")))?;
    }
    rustix::mount::mount_remount(
        "/dev",
        MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        opts,
    )
    .map_err(sys("make /dev read-only"))
}

/// Undo mountinfo's `\040`-style escapes.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn fd_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

fn same(fd: &OwnedFd, want: FileId, what: &str) -> Result<(), SetupError> {
    match FileId::of(fd) {
        Ok(id) if id == want => Ok(()),
        Ok(_) => Err(SetupError::Refused(format!(
            "{what} changed while the sandbox started"
        ))),
        Err(e) => Err(sys(what)(e)),
    }
}

/// Cover `.hel/` with an empty tmpfs that shows only the session's spill
/// directory, read-only. Every mount goes through a descriptor opened here
/// (each component without following links) and checked against the
/// identity hel saw, so no path in the project can redirect a mount.
fn hide_store(spec: &Spec) -> Result<(), SetupError> {
    let project = hel_fs::at::dir_handle_following(&spec.project)
        .map_err(sys(spec.project.display().to_string()))?;
    same(&project, spec.project_id, "the project directory")?;
    let Some(store_id) = spec.store else {
        return Ok(());
    };
    let store = hel_fs::at::open_dir_handle(&project, STORE_DIR).map_err(sys(STORE_DIR))?;
    same(&store, store_id, STORE_DIR)?;
    // Open the spill directory before the tmpfs covers it.
    let spill = match &spec.spill {
        Some((parts, id)) => Some((parts, open_spill(&store, parts, *id)?)),
        None => None,
    };
    let opts = c"mode=0755,size=64k,nr_inodes=64";
    let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    rustix::mount::mount("tmpfs", fd_path(&store).as_str(), "tmpfs", flags, opts)
        .map_err(sys("mount a tmpfs on .hel"))?;
    // Through the mount point, now: the tmpfs's root.
    let cover = hel_fs::at::open_dir_handle(&project, STORE_DIR).map_err(sys(STORE_DIR))?;
    let fs = rustix::fs::fstatfs(&cover).map_err(sys(STORE_DIR))?;
    // The type of f_type differs between architectures.
    #[allow(clippy::unnecessary_cast)]
    let is_tmpfs = fs.f_type as i64 == libc::TMPFS_MAGIC as i64;
    if !is_tmpfs || FileId::of(&cover).ok() == Some(store_id) {
        return Err(SetupError::Refused(
            "the tmpfs on .hel is not in place".into(),
        ));
    }
    if let Some((parts, src)) = spill {
        show_spill(&cover, parts, &src)?;
    }
    rustix::mount::mount_remount(
        fd_path(&cover).as_str(),
        MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        opts,
    )
    .map_err(sys("make the tmpfs on .hel read-only"))
}

/// Cover each nested project's `.hel/` (found by hel-agent's
/// `tools::gitdirs`) with an empty read-only tmpfs, as the project's own:
/// through a descriptor opened without following links and checked against
/// the identity hel saw. A mount point cannot be removed or renamed, and
/// nothing under it is visible.
fn hide_nested(stores: &[Hidden]) -> Result<(), SetupError> {
    let opts = c"mode=0755,size=4k,nr_inodes=4";
    let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC | MountFlags::RDONLY;
    for h in stores {
        let what = h.path.display().to_string();
        let (parent, target, name) = open_nofollow(&h.path)?;
        same(&target, h.id, &what)?;
        let st = rustix::fs::fstat(&target).map_err(sys(what.as_str()))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(SetupError::Refused(format!("{what} is not a directory")));
        }
        rustix::mount::mount("tmpfs", fd_path(&target).as_str(), "tmpfs", flags, opts)
            .map_err(sys(format!("mount a tmpfs on {what}")))?;
        // Through the mount point, now: the tmpfs's root.
        let cover = hel_fs::at::open_handle(&parent, name).map_err(sys(what.as_str()))?;
        let fs = rustix::fs::fstatfs(&cover).map_err(sys(what.as_str()))?;
        // The type of f_type differs between architectures.
        #[allow(clippy::unnecessary_cast)]
        let is_tmpfs = fs.f_type as i64 == libc::TMPFS_MAGIC as i64;
        if !is_tmpfs || FileId::of(&cover).ok() == Some(h.id) {
            return Err(SetupError::Refused(format!(
                "the tmpfs on {what} is not in place"
            )));
        }
    }
    Ok(())
}

/// The session's spill directory below the store, each component opened
/// without following links, checked against what hel saw.
fn open_spill(store: &OwnedFd, parts: &[String], id: FileId) -> Result<OwnedFd, SetupError> {
    if parts.is_empty()
        || parts
            .iter()
            .any(|p| p.is_empty() || p == "." || p == ".." || p.contains('/'))
    {
        return Err(SetupError::Refused("a malformed spill path".into()));
    }
    let mut dir = hel_fs::at::open_dir_handle(store, &parts[0]).map_err(sys("spill"))?;
    for p in &parts[1..] {
        dir = hel_fs::at::open_dir_handle(&dir, p).map_err(sys("spill"))?;
    }
    same(&dir, id, "the spill directory")?;
    Ok(dir)
}

/// Bind the spill directory `src`, read-only, at `parts` below `cover`
/// (the tmpfs on `.hel/`, still writable).
fn show_spill(cover: &OwnedFd, parts: &[String], src: &OwnedFd) -> Result<(), SetupError> {
    let mut parent = cover.try_clone().map_err(sys("dup"))?;
    let Some((last, above)) = parts.split_last() else {
        return Err(SetupError::Refused("a malformed spill path".into()));
    };
    for p in above {
        rustix::fs::mkdirat(&parent, p.as_str(), Mode::from_raw_mode(0o755))
            .map_err(sys(format!("mkdir {p}")))?;
        parent = hel_fs::at::open_dir_handle(&parent, p).map_err(sys(p.as_str()))?;
    }
    rustix::fs::mkdirat(&parent, last.as_str(), Mode::from_raw_mode(0o755))
        .map_err(sys(format!("mkdir {last}")))?;
    let target = hel_fs::at::open_dir_handle(&parent, last).map_err(sys(last.as_str()))?;
    rustix::mount::mount_bind(fd_path(src).as_str(), fd_path(&target).as_str())
        .map_err(sys("bind the spill directory"))?;
    // Through the new mount point: the bind's root.
    let bound = hel_fs::at::open_dir_handle(&parent, last).map_err(sys(last.as_str()))?;
    rustix::mount::mount_remount(
        fd_path(&bound).as_str(),
        MountFlags::BIND
            | MountFlags::RDONLY
            | MountFlags::NOSUID
            | MountFlags::NODEV
            | MountFlags::NOEXEC,
        "",
    )
    .map_err(sys("make the spill directory read-only"))
}

/// `path` (absolute, canonical) opened without following any link: its
/// parent directory and itself (both `O_PATH`), and its last name.
fn open_nofollow(path: &Path) -> Result<(OwnedFd, OwnedFd, &OsStr), SetupError> {
    let bad = || SetupError::Refused(format!("{} is not a canonical path", path.display()));
    let mut names = Vec::new();
    for c in path.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(n) => names.push(n),
            _ => return Err(bad()),
        }
    }
    let (last, dirs) = names.split_last().ok_or_else(bad)?;
    let what = || path.display().to_string();
    let mut dir = hel_fs::at::open_dir_handle(rustix::fs::CWD, "/").map_err(sys("/"))?;
    for d in dirs {
        dir = hel_fs::at::open_dir_handle(&dir, *d).map_err(sys(what()))?;
    }
    let target = hel_fs::at::open_handle(&dir, *last).map_err(sys(what()))?;
    Ok((dir, target, last))
}

/// Bind each of hel's git mounts onto itself, read-only where it says
/// (found by hel-agent's `tools::gitdirs`), through descriptors opened without
/// following links and checked against the identity hel saw. Recursive
/// binds: what is mounted beneath (the cover of `.hel/`) stays in place.
fn protect_git(mounts: &[GitMount]) -> Result<(), SetupError> {
    for m in mounts {
        let what = m.path.display().to_string();
        let (parent, target, name) = open_nofollow(&m.path)?;
        same(&target, m.id, &what)?;
        let st = rustix::fs::fstat(&target).map_err(sys(what.as_str()))?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
            return Err(SetupError::Refused(format!("{what} is a symbolic link")));
        }
        rustix::mount::mount_bind_recursive(fd_path(&target).as_str(), fd_path(&target).as_str())
            .map_err(sys(format!("bind {what}")))?;
        if m.read_only {
            // Through the mount point, now: the bind's root.
            let top = hel_fs::at::open_handle(&parent, name).map_err(sys(what.as_str()))?;
            remount_read_only(&top).map_err(sys(format!("make {what} read-only")))?;
        }
    }
    Ok(())
}

/// Make the bind mount whose root `fd` is read-only, keeping the flags it
/// has (inside a user namespace they cannot be cleared, only added to).
fn remount_read_only(fd: &OwnedFd) -> rustix::io::Result<()> {
    use rustix::fs::StatVfsMountFlags as V;
    let have = rustix::fs::fstatvfs(fd)?.f_flag;
    let mut flags = MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV;
    for (v, m) in [
        (V::NOEXEC, MountFlags::NOEXEC),
        (V::NOATIME, MountFlags::NOATIME),
        (V::NODIRATIME, MountFlags::NODIRATIME),
        (V::RELATIME, MountFlags::RELATIME),
    ] {
        if have.contains(v) {
            flags |= m;
        }
    }
    if !have.intersects(V::NOATIME | V::RELATIME) {
        flags |= MountFlags::STRICTATIME;
    }
    rustix::mount::mount_remount(fd_path(fd).as_str(), flags, "")
}

/// Landlock for the whole namespace: writes only beneath the writable
/// directories and a few devices; where the kernel has it (ABI 6), no
/// signal to a process outside the sandbox.
fn restrict(spec: &Spec) -> Result<(), SetupError> {
    let abi = ABI::V5;
    let handled = AccessFs::from_write(abi);
    let devices: Vec<&Path> = WRITABLE_DEVICES
        .iter()
        .map(Path::new)
        .filter(|p| p.exists())
        .collect();
    let status = Ruleset::default()
        .handle_access(handled)
        // Best effort: dropped by kernels without scopes.
        .and_then(|r| r.scope(Scope::Signal))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(&spec.writable, handled)))
        .and_then(|r| r.add_rules(path_beneath_rules(&devices, handled)))
        .and_then(|r| r.restrict_self())
        .map_err(|e| SetupError::Refused(format!("Landlock is not available ({e})")))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(SetupError::Refused(
            "Landlock is not available (the kernel does not enforce it)".into(),
        ));
    }
    Ok(())
}

/// No capability, now or after any exec: uid 0 inside the namespace does
/// not regain them (`SECBIT_NOROOT`, locked), the bounding and ambient sets
/// are empty. (`no_new_privs` is already set by Landlock.)
fn drop_capabilities() -> Result<(), SetupError> {
    use rustix::thread::{CapabilitiesSecureBits as B, CapabilitySet, CapabilitySets};
    let bits = B::NO_ROOT
        | B::NO_ROOT_LOCKED
        | B::NO_SETUID_FIXUP
        | B::NO_SETUID_FIXUP_LOCKED
        | B::KEEP_CAPS_LOCKED
        | B::NO_CAP_AMBIENT_RAISE
        | B::NO_CAP_AMBIENT_RAISE_LOCKED;
    rustix::thread::set_capabilities_secure_bits(bits).map_err(sys("securebits"))?;
    rustix::thread::clear_ambient_capability_set().map_err(sys("ambient"))?;
    for cap in 0..64 {
        let one = CapabilitySet::from_bits_retain(1 << cap);
        match rustix::thread::remove_capability_from_bounding_set(one) {
            Ok(()) => {}
            // Past the last capability this kernel knows.
            Err(rustix::io::Errno::INVAL) => break,
            Err(e) => return Err(sys("bounding set")(e)),
        }
    }
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, none).map_err(sys("capset"))?;
    let now = rustix::thread::capabilities(None).map_err(sys("capget"))?;
    if !(now.effective.is_empty() && now.permitted.is_empty() && now.inheritable.is_empty()) {
        return Err(SetupError::Refused("capabilities remain".into()));
    }
    Ok(())
}

fn sigchld_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise the set they are given.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        set
    }
}

/// Block SIGCHLD and read it from a descriptor instead.
fn sigchld_fd() -> std::io::Result<OwnedFd> {
    let set = sigchld_set();
    // SAFETY: single-threaded; valid set pointer.
    if unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: valid set pointer; a new descriptor is returned or -1.
    let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn serve(sock: &OwnedFd, alive: &OwnedFd, sigchld: &OwnedFd) -> ! {
    let mut started: HashSet<i32> = HashSet::new();
    loop {
        let mut fds = [
            PollFd::new(sock, PollFlags::IN),
            PollFd::new(sigchld, PollFlags::IN),
            PollFd::new(alive, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => std::process::exit(1),
        }
        let (sock_ev, chld_ev, alive_ev) = (fds[0].revents(), fds[1].revents(), fds[2].revents());
        if !alive_ev.is_empty() {
            std::process::exit(0); // A is gone: so is hel
        }
        if !chld_ev.is_empty() {
            let mut buf = [0u8; 1024];
            while matches!(rustix::io::read(sigchld, &mut buf), Ok(n) if n > 0) {}
            reap(sock, &mut started);
        }
        if !sock_ev.is_empty() {
            match proto::recv(sock.as_fd()) {
                Ok(Some(Ok(msg))) => handle(sock, msg, &mut started),
                Ok(Some(Err(e))) => {
                    let _ = proto::send(sock.as_fd(), &Report::Failed(e.to_string()).encode(), &[]);
                }
                // hel's end closed: hel is finishing or gone.
                Ok(None) | Err(_) => std::process::exit(0),
            }
        }
    }
}

fn reap(sock: &OwnedFd, started: &mut HashSet<i32>) {
    loop {
        // Any child (`waitpid(-1)`): orphans are ours too.
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, st))) => {
                let pid = pid.as_raw_nonzero().get();
                if started.remove(&pid) {
                    let status = match (st.exit_status(), st.terminating_signal()) {
                        (Some(c), _) => Status::Code(c),
                        (None, Some(s)) => Status::Signal(s),
                        _ => continue,
                    };
                    let _ = proto::send(sock.as_fd(), &Report::Exited(pid, status).encode(), &[]);
                }
            }
            Err(rustix::io::Errno::INTR) => continue,
            _ => return,
        }
    }
}

fn handle(sock: &OwnedFd, msg: proto::Received, started: &mut HashSet<i32>) {
    let reply = match Request::parse(&msg.bytes) {
        Ok(Request::Run) => match spawn(msg.fds) {
            Ok(pid) => {
                started.insert(pid);
                Report::Started(pid)
            }
            Err(e) => Report::Failed(e.to_string()),
        },
        Ok(Request::Kill(pid)) => {
            if started.contains(&pid) {
                if let Some(p) = Pid::from_raw(pid) {
                    // The command leads its own process group.
                    let _ = rustix::process::kill_process_group(p, Signal::KILL);
                }
            }
            return;
        }
        Ok(Request::Count) => {
            // What already ended is reaped first: only the living count.
            reap(sock, started);
            Report::Count(living())
        }
        Ok(Request::KillAll) => {
            // From the namespace's init, -1 is every process of the
            // namespace but the init itself.
            // SAFETY: kill(2) with a constant signal.
            unsafe { libc::kill(-1, libc::SIGKILL) };
            return;
        }
        Ok(Request::Init) => Report::Failed("already initialised".into()),
        Err(e) => Report::Failed(e.to_string()),
    };
    let _ = proto::send(sock.as_fd(), &reply.encode(), &[]);
}

/// How many processes of the namespace live besides this init: the
/// numeric entries of its own `/proc` (mounted for the namespace), but 1.
/// When `/proc` cannot be listed, as many as can be: hel then waits its
/// time limit and kills them all, never taking "none" for an answer.
fn living() -> u32 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return u32::MAX;
    };
    let mut n: u32 = 0;
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid != 1 {
            n = n.saturating_add(1);
        }
    }
    n
}

/// Start one command: `bash -c` in a new session, stdout and stderr the
/// given pipes, stdin /dev/null, no other descriptor.
fn spawn(fds: Vec<OwnedFd>) -> Result<i32, SetupError> {
    use std::os::unix::process::CommandExt;
    let [body, out, err]: [OwnedFd; 3] = fds
        .try_into()
        .map_err(|_| SetupError::Refused("a run request needs three descriptors".into()))?;
    let body = proto::read_body(body)
        .and_then(|b| RunBody::decode(&b))
        .map_err(|e| SetupError::Refused(e.to_string()))?;
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c")
        .arg(&body.command)
        .env_clear()
        .envs(body.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&body.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err));
    // SAFETY: only async-signal-safe system calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            // Own session and process group: a timeout kills the group.
            rustix::process::setsid()?;
            let none = std::mem::zeroed::<libc::sigset_t>();
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            // Nothing but stdin, stdout and stderr crosses the exec.
            libc::close_range(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC as libc::c_int);
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(sys("cannot run bash"))?;
    // Reaped by the SIGCHLD loop, not by std.
    Ok(child.id() as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_elsewhere_are_found_and_unescaped() {
        let info = "\
22 1 0:21 / /proc rw,nosuid - proc proc rw
23 22 0:22 / /proc/sys/fs/binfmt_misc rw - binfmt_misc x rw
40 1 0:21 / /srv/old\\040proc rw - proc proc rw
41 1 0:30 / /tmp rw - tmpfs tmpfs rw
50 22 0:40 / /proc rw - proc proc rw
";
        assert_eq!(
            mounts_elsewhere(info, &["proc"], "/proc"),
            vec!["/srv/old proc".to_owned()]
        );
        let info = "\
24 1 0:5 / /dev rw - devtmpfs udev rw
25 24 0:23 / /dev/pts rw - devpts devpts rw
26 1 0:24 / /devices rw - devtmpfs udev rw
27 1 0:23 /3 /srv/chroot/console rw - devpts devpts rw
28 1 0:5 / /srv/chroot/dev rw - devtmpfs udev rw
";
        assert_eq!(
            mounts_elsewhere(info, &["devpts", "devtmpfs"], "/dev"),
            vec!["/devices", "/srv/chroot/console", "/srv/chroot/dev"]
        );
    }
}
