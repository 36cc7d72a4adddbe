//! hel's side of the sandbox: start the init (from a thread that lives as
//! long as it, since the helper's death signal follows the thread that
//! spawned it), run commands in it, tear it down.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hel_object::format::STORE_DIR;
use rustix::process::{Pid, Signal};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::mpsc;

use crate::init::SOCKET_FD;
use crate::output::{Kept, Tap};
use crate::proto::{self, FileId, GitMount, Hidden, Report, Request, RunBody, Spec, Status};

/// How long the sandbox may take to get ready.
const READY_WAIT: Duration = Duration::from_secs(10);
/// How long output is still collected after bash exits.
const DRAIN: Duration = Duration::from_millis(200);
/// How long teardown waits for every process in the sandbox to be gone
/// before it kills the helper outright.
const TEARDOWN_WAIT: Duration = Duration::from_secs(3);
/// How often [`Sandbox::settle`] looks whether the processes are gone.
const SETTLE_POLL: Duration = Duration::from_millis(20);

/// What the sandbox must hide and show, as found on disk. A sandbox built
/// for one layout is rebuilt when the layout changes (say, `.hel/` appears).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub project: PathBuf,
    pub project_id: FileId,
    pub store: Option<FileId>,
    pub spill: Option<(Vec<String>, FileId)>,
    /// The bind mounts that keep git directories read-only.
    pub git: Vec<GitMount>,
    /// Nested projects' `.hel/` directories, hidden as the project's own.
    pub stores: Vec<Hidden>,
}

/// Why the sandbox cannot run here (commands are then refused with this
/// reason and the advice to use `--no-sandbox`).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A system call on hel's side failed.
    #[error("{what}: {source}")]
    Sys {
        what: String,
        source: std::io::Error,
    },
    #[error("{STORE_DIR} is not a plain directory ({0})")]
    Store(std::io::Error),
    /// The session's spill directory is not where hel keeps it.
    #[error("{0}")]
    Spill(&'static str),
    /// The helper said it cannot build the sandbox here, and why.
    #[error("{0}")]
    Unavailable(String),
    /// The helper did not start, went away or answered out of turn.
    #[error("{0}")]
    Helper(String),
    #[error("the sandbox did not get ready within {} s", READY_WAIT.as_secs())]
    NotReady,
}

/// A failed system call's error, saying what was tried.
fn sys<E: Into<std::io::Error>>(what: impl Into<String>) -> impl FnOnce(E) -> SandboxError {
    move |e| SandboxError::Sys {
        what: what.into(),
        source: e.into(),
    }
}

impl Layout {
    /// The project, its `.hel/` (a directory, never a link) and the
    /// session's spill directory below it, each opened without following
    /// links; `git`, the bind mounts over the git directories among what
    /// commands may write, and `stores`, the nested projects' `.hel/`
    /// directories there (both found by the caller).
    pub fn observe(
        project: &Path,
        spill_dir: Option<&Path>,
        git: Vec<GitMount>,
        stores: Vec<Hidden>,
    ) -> Result<Layout, SandboxError> {
        let dir = hel_fs::at::dir_handle_following(project)
            .map_err(sys(project.display().to_string()))?;
        let project_id = FileId::of(&dir).map_err(sys(project.display().to_string()))?;
        let store = match hel_fs::at::open_dir_handle(&dir, STORE_DIR) {
            Ok(fd) => Some(fd),
            Err(rustix::io::Errno::NOENT) => None,
            Err(e) => return Err(SandboxError::Store(e.into())),
        };
        let store_id = match &store {
            Some(fd) => Some(FileId::of(fd).map_err(sys(STORE_DIR))?),
            None => None,
        };
        let spill = match (spill_dir, &store) {
            (Some(d), Some(store)) => spill_below(project, d, store)?,
            _ => None,
        };
        Ok(Layout {
            project: project.to_owned(),
            project_id,
            store: store_id,
            spill,
            git,
            stores,
        })
    }
}

/// The spill directory `dir` below the store `store` of `project`: its
/// path components and identity, or None while it does not exist.
fn spill_below(
    project: &Path,
    dir: &Path,
    store: &OwnedFd,
) -> Result<Option<(Vec<String>, FileId)>, SandboxError> {
    let rel = dir
        .strip_prefix(project.join(STORE_DIR))
        .map_err(|_| SandboxError::Spill("the spill directory is not below .hel"))?;
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(s) => parts.push(
                s.to_str()
                    .ok_or(SandboxError::Spill("the spill path is not UTF-8"))?
                    .to_owned(),
            ),
            _ => return Err(SandboxError::Spill("a malformed spill path")),
        }
    }
    let mut fd = store.try_clone().map_err(sys("the spill directory"))?;
    for p in &parts {
        match hel_fs::at::open_dir_handle(&fd, p) {
            Ok(next) => fd = next,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => return Err(sys("the spill directory")(e)),
        }
    }
    if parts.is_empty() {
        return Ok(None);
    }
    let id = FileId::of(&fd).map_err(sys("the spill directory"))?;
    Ok(Some((parts, id)))
}

/// Why a command did not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The sandbox refused to start it (such as a missing directory).
    #[error("{0}")]
    Failed(String),
    /// The sandbox is gone or said something it should not have.
    #[error("{0}")]
    Lost(String),
}

/// What [`Sandbox::settle`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// Some process was still running at the first look.
    pub waited: bool,
    /// How many were still running at the time limit, and killed.
    pub killed: u32,
}

/// What a command produced.
pub struct Outcome {
    /// None: killed at the time limit.
    pub status: Option<Status>,
    pub stdout: String,
    pub stderr: String,
}

enum Event {
    Report(Report),
    Gone(String),
}

/// A running sandbox: one per instance, started at the first bash call.
pub struct Sandbox {
    sock: Arc<OwnedFd>,
    events: mpsc::UnboundedReceiver<Event>,
    thread: Option<std::thread::JoinHandle<()>>,
    done: Option<std::sync::mpsc::Receiver<()>>,
    /// A pidfd of the helper, to kill it if it does not end by itself.
    helper: Option<OwnedFd>,
    /// Run requests whose reply nobody waits for any more (their call was
    /// interrupted): their command is killed as soon as it is reported.
    abandoned: Arc<AtomicUsize>,
    lost: Option<String>,
    pub layout: Layout,
}

impl Sandbox {
    /// Start the sandbox for `layout` with these writable directories,
    /// on hel's network or (`network` false) on a loopback of its own.
    /// The error says why it cannot run here.
    pub async fn start(
        layout: Layout,
        writable: Vec<PathBuf>,
        network: bool,
    ) -> Result<Sandbox, SandboxError> {
        let spec = Spec {
            network,
            project: layout.project.clone(),
            project_id: layout.project_id,
            store: layout.store,
            spill: layout.spill.clone(),
            writable,
            git: layout.git.clone(),
            stores: layout.stores.clone(),
        };
        let spec = serde_json::to_vec(&spec).map_err(sys("the sandbox spec"))?;
        let (ours, theirs) = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .map_err(sys("socketpair"))?;
        // Far from 0-2, which the spawn rewires before our pre_exec runs.
        let theirs = rustix::io::fcntl_dupfd_cloexec(&theirs, 10).map_err(sys("dup"))?;
        let ours = Arc::new(ours);
        let (tx, events) = mpsc::unbounded_channel();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let (done_tx, done) = std::sync::mpsc::channel();
        let sock = ours.clone();
        let thread = std::thread::Builder::new()
            .name("hel-sandbox".into())
            .spawn(move || {
                supervise(sock, theirs, tx, started_tx);
                let _ = done_tx.send(());
            })
            .map_err(sys("cannot start the sandbox thread"))?;
        let mut sb = Sandbox {
            sock: ours,
            events,
            thread: Some(thread),
            done: Some(done),
            helper: None,
            abandoned: Arc::new(AtomicUsize::new(0)),
            lost: None,
            layout,
        };
        match started_rx.await {
            Ok(Ok(pidfd)) => sb.helper = pidfd,
            Ok(Err(e)) => return Err(sys("cannot start the sandbox helper")(e)),
            Err(_) => return Err(SandboxError::Helper("the sandbox thread ended".into())),
        }
        let body = proto::body(&spec).map_err(sys("memfd"))?;
        proto::send(sb.sock.as_fd(), &Request::Init.encode(), &[body.as_fd()])
            .map_err(sys("cannot reach the sandbox helper"))?;
        match tokio::time::timeout(READY_WAIT, sb.events.recv()).await {
            Ok(Some(Event::Report(Report::Ready))) => Ok(sb),
            Ok(Some(Event::Report(Report::Unavailable(what)))) => {
                Err(SandboxError::Unavailable(what))
            }
            Ok(Some(Event::Report(r))) => Err(SandboxError::Helper(format!(
                "the sandbox answered {:?} before it was ready",
                r.encode()
            ))),
            Ok(Some(Event::Gone(why))) => Err(SandboxError::Helper(why)),
            Ok(None) => Err(SandboxError::Helper("the sandbox helper went away".into())),
            Err(_) => Err(SandboxError::NotReady),
        }
    }

    /// Why the sandbox is known to be gone, after handling what it
    /// reported since the last call.
    pub fn lost(&mut self) -> Option<String> {
        while self.lost.is_none() {
            match self.events.try_recv() {
                Ok(ev) => {
                    if let Err(RunError::Lost(why)) = self.on_event(ev, &mut None) {
                        self.lost = Some(why);
                    }
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    self.lost = Some("the sandbox is gone".into());
                }
            }
        }
        self.lost.clone()
    }

    /// Handle one event while a call waits for `pid` (None: not started
    /// yet, or no call). `Ok(Some(status))`: that call's command ended.
    fn on_event(&mut self, ev: Event, pid: &mut Option<i32>) -> Result<Option<Status>, RunError> {
        let report = match ev {
            Event::Gone(why) => return Err(RunError::Lost(why)),
            Event::Report(r) => r,
        };
        let abandoned = self.abandoned.load(Ordering::SeqCst);
        match report {
            Report::Started(p) if abandoned > 0 => {
                self.abandoned.fetch_sub(1, Ordering::SeqCst);
                let _ = proto::send(self.sock.as_fd(), &Request::Kill(p).encode(), &[]);
                Ok(None)
            }
            Report::Failed(_) if abandoned > 0 => {
                self.abandoned.fetch_sub(1, Ordering::SeqCst);
                Ok(None)
            }
            Report::Started(p) if pid.is_none() => {
                *pid = Some(p);
                Ok(None)
            }
            Report::Failed(why) if pid.is_none() => Err(RunError::Failed(why)),
            Report::Exited(p, st) if Some(p) == *pid => Ok(Some(st)),
            // A command of an earlier call that was killed at its time limit.
            Report::Exited(..) => Ok(None),
            r => Err(RunError::Lost(format!(
                "the sandbox answered out of turn ({:?})",
                r.encode()
            ))),
        }
    }

    /// Run one command. Ends when bash exits (plus a short drain of its
    /// output) or at `limit`, when its process group is killed. Output
    /// arriving later (from processes it left in the background) is read
    /// and discarded until they end, so they never die of a closed pipe.
    /// What it prints is also sent to `tap` as it arrives.
    pub async fn run(
        &mut self,
        body: &RunBody,
        limit: Duration,
        tap: Option<Tap>,
    ) -> Result<Outcome, RunError> {
        if let Some(why) = self.lost() {
            return Err(RunError::Lost(why));
        }
        let (mut output, mut guard) = self.send_run(body)?;
        output.so.tap = tap.clone();
        output.se.tap = tap;
        let waited = tokio::time::timeout(limit, async {
            loop {
                tokio::select! {
                    ev = self.events.recv() => {
                        let ev = ev.unwrap_or_else(|| Event::Gone("the sandbox is gone".into()));
                        if let Some(st) = self.on_event(ev, &mut guard.pid)? {
                            return Ok(st);
                        }
                    }
                    _ = output.read_some() => {}
                }
            }
        })
        .await;
        let status = match waited {
            Ok(Ok(st)) => {
                guard.finished = true;
                Some(st)
            }
            Ok(Err(e)) => {
                if let RunError::Lost(why) = &e {
                    self.lost = Some(why.clone());
                }
                guard.finished = matches!(e, RunError::Failed(_));
                return Err(e);
            }
            Err(_) => {
                guard.kill();
                None
            }
        };
        let (stdout, stderr) = output.finish().await;
        Ok(Outcome {
            status,
            stdout,
            stderr,
        })
    }

    /// How many processes run in the sandbox now besides its init: what
    /// the commands left behind (in the background, detached, or still
    /// being torn down).
    pub async fn remaining(&mut self) -> Result<u32, RunError> {
        if let Some(why) = self.lost() {
            return Err(RunError::Lost(why));
        }
        if let Err(e) = proto::send(self.sock.as_fd(), &Request::Count.encode(), &[]) {
            let why = format!("cannot reach the sandbox: {e}");
            self.lost = Some(why.clone());
            return Err(RunError::Lost(why));
        }
        let answer = tokio::time::timeout(READY_WAIT, async {
            loop {
                let ev = self.events.recv().await;
                let ev = ev.unwrap_or_else(|| Event::Gone("the sandbox is gone".into()));
                if let Event::Report(Report::Count(n)) = ev {
                    return Ok(n);
                }
                self.on_event(ev, &mut None)?;
            }
        })
        .await;
        let lost = |why: String, me: &mut Sandbox| {
            me.lost = Some(why.clone());
            Err(RunError::Lost(why))
        };
        match answer {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(RunError::Lost(why))) => lost(why, self),
            Ok(Err(e)) => Err(e),
            Err(_) => lost(
                format!(
                    "the sandbox did not answer within {} s",
                    READY_WAIT.as_secs()
                ),
                self,
            ),
        }
    }

    /// Wait until no process is left in the sandbox, at most `limit`
    /// (`waiting` hears how many there are when the first look finds
    /// some), then kill what remains and wait until it is gone. When this
    /// returns `Ok`, nothing a command started runs any more.
    pub async fn settle(
        &mut self,
        limit: Duration,
        mut waiting: impl FnMut(u32),
    ) -> Result<Settled, RunError> {
        let start = tokio::time::Instant::now();
        let deadline = start + limit;
        let mut first = true;
        let mut left;
        loop {
            left = self.remaining().await?;
            if left == 0 {
                return Ok(Settled {
                    waited: !first,
                    killed: 0,
                });
            }
            if first {
                waiting(left);
                first = false;
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                break;
            }
            tokio::time::sleep(SETTLE_POLL.min(deadline - now)).await;
        }
        self.kill_all()?;
        let until = tokio::time::Instant::now() + TEARDOWN_WAIT;
        loop {
            if self.remaining().await? == 0 {
                return Ok(Settled {
                    waited: true,
                    killed: left,
                });
            }
            if tokio::time::Instant::now() >= until {
                let why = format!(
                    "processes of the sandbox did not end within {} s of being killed",
                    TEARDOWN_WAIT.as_secs()
                );
                self.lost = Some(why.clone());
                return Err(RunError::Lost(why));
            }
            tokio::time::sleep(SETTLE_POLL).await;
        }
    }

    /// Kill every process in the sandbox but its init, now.
    pub fn kill_all(&mut self) -> Result<(), RunError> {
        if let Err(e) = proto::send(self.sock.as_fd(), &Request::KillAll.encode(), &[]) {
            let why = format!("cannot reach the sandbox: {e}");
            self.lost = Some(why.clone());
            return Err(RunError::Lost(why));
        }
        Ok(())
    }

    /// Ask the sandbox to run `body`, with new pipes for its output.
    fn send_run(&mut self, body: &RunBody) -> Result<(Output, CallGuard), RunError> {
        let encoded = body.encode().map_err(|e| RunError::Failed(e.to_string()))?;
        let sys = |what: &str, e: std::io::Error| RunError::Failed(format!("{what}: {e}"));
        let memfd = proto::body(&encoded).map_err(|e| sys("memfd", e))?;
        let pipe_flags = rustix::pipe::PipeFlags::CLOEXEC;
        let (out_r, out_w) =
            rustix::pipe::pipe_with(pipe_flags).map_err(|e| sys("pipe", e.into()))?;
        let (err_r, err_w) =
            rustix::pipe::pipe_with(pipe_flags).map_err(|e| sys("pipe", e.into()))?;
        let output = Output {
            out: pipe::Receiver::from_owned_fd(out_r).map_err(|e| sys("pipe", e))?,
            err: pipe::Receiver::from_owned_fd(err_r).map_err(|e| sys("pipe", e))?,
            so: Kept::default(),
            se: Kept::default(),
        };
        let mut guard = CallGuard {
            sock: self.sock.clone(),
            abandoned: self.abandoned.clone(),
            pid: None,
            sent: false,
            finished: false,
        };
        if let Err(e) = proto::send(
            self.sock.as_fd(),
            &Request::Run.encode(),
            &[memfd.as_fd(), out_w.as_fd(), err_w.as_fd()],
        ) {
            let why = format!("cannot reach the sandbox: {e}");
            self.lost = Some(why.clone());
            return Err(RunError::Lost(why));
        }
        guard.sent = true;
        // Only the command holds the write ends now (dropped on return):
        // EOF means it is done.
        Ok((output, guard))
    }

    /// End the sandbox: every process in it is gone when this returns
    /// (or, if it did not end within a few seconds, its helper is killed,
    /// which takes the namespace down with it).
    pub fn shutdown(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        // The init exits when its socket reaches EOF; as PID 1 its end
        // kills and reaps every process in the namespace.
        let _ = rustix::net::shutdown(&*self.sock, rustix::net::Shutdown::Both);
        let ended = self
            .done
            .take()
            .is_some_and(|d| d.recv_timeout(TEARDOWN_WAIT).is_ok());
        if !ended {
            if let Some(p) = &self.helper {
                let _ = rustix::process::pidfd_send_signal(p, Signal::KILL);
            }
        }
        let _ = thread.join();
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Kills a call's command if the call ends early (time limit, or the call
/// is dropped at Ctrl-C).
struct CallGuard {
    sock: Arc<OwnedFd>,
    abandoned: Arc<AtomicUsize>,
    pid: Option<i32>,
    sent: bool,
    finished: bool,
}

impl CallGuard {
    fn kill(&mut self) {
        if self.finished || !self.sent {
            return;
        }
        self.finished = true;
        match self.pid {
            Some(p) => {
                let _ = proto::send(self.sock.as_fd(), &Request::Kill(p).encode(), &[]);
            }
            None => {
                self.abandoned.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A command's stdout and stderr, read as they come.
struct Output {
    out: pipe::Receiver,
    err: pipe::Receiver,
    so: Kept,
    se: Kept,
}

impl Output {
    fn done(&self) -> bool {
        self.so.eof && self.se.eof
    }

    /// Read from whichever stream has something (cancel-safe); never
    /// returns once both have ended.
    async fn read_some(&mut self) {
        if self.done() {
            return std::future::pending().await;
        }
        tokio::select! {
            _ = self.so.fill(&mut self.out), if !self.so.eof => {}
            _ = self.se.fill(&mut self.err), if !self.se.eof => {}
        }
    }

    /// What was kept of each stream, after reading on for [`DRAIN`] at
    /// most; what comes later is read and dropped in the background.
    async fn finish(mut self) -> (String, String) {
        let deadline = tokio::time::Instant::now() + DRAIN;
        while !self.done() {
            tokio::select! {
                _ = self.read_some() => {}
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        let texts = (self.so.text(), self.se.text());
        if !self.done() {
            tokio::spawn(discard(self.out, self.err, self.so.eof, self.se.eof));
        }
        texts
    }
}

/// Read and drop what background processes still write, until they end.
async fn discard(
    mut out: pipe::Receiver,
    mut err: pipe::Receiver,
    mut o_eof: bool,
    mut e_eof: bool,
) {
    let mut a = vec![0u8; 16 * 1024];
    let mut b = vec![0u8; 16 * 1024];
    while !(o_eof && e_eof) {
        tokio::select! {
            r = out.read(&mut a), if !o_eof => o_eof = !matches!(r, Ok(n) if n > 0),
            r = err.read(&mut b), if !e_eof => e_eof = !matches!(r, Ok(n) if n > 0),
        }
    }
}

/// Start `hel __sandbox-init` with `theirs` as its fd 3. Must run on the
/// thread that lives as long as the helper (its death signal follows the
/// thread that spawned it).
fn spawn_helper(theirs: &OwnedFd) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let me = rustix::process::getpid();
    // This very binary (even if its file was replaced since), named hel.
    let mut cmd = std::process::Command::new("/proc/self/exe");
    cmd.arg0("hel")
        .arg("__sandbox-init")
        .arg(me.as_raw_nonzero().to_string())
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let raw = theirs.as_raw_fd();
    // SAFETY: only async-signal-safe system calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            // hel may have died before the death signal was armed.
            if rustix::process::getppid() != Some(me) {
                return Err(std::io::Error::other("hel is gone"));
            }
            // A session of its own: no controlling terminal for anything in
            // the sandbox, and not hel's process group (Ctrl-C is hel's).
            rustix::process::setsid()?;
            // The socket becomes fd 3, the only descriptor beyond stdio.
            // (libc: rustix's dup2 wants the target as an OwnedFd, which
            // fd 3 is not here, and rustix has no close_range.)
            if libc::dup2(raw, SOCKET_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close_range(
                SOCKET_FD as u32 + 1,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC as libc::c_int,
            );
            Ok(())
        });
    }
    cmd.spawn()
}

/// The sandbox thread: spawn the helper, forward its reports, and wait
/// for it; it lives exactly as long as the helper, whose death signal
/// follows this thread.
fn supervise(
    sock: Arc<OwnedFd>,
    theirs: OwnedFd,
    tx: mpsc::UnboundedSender<Event>,
    started: tokio::sync::oneshot::Sender<std::io::Result<Option<OwnedFd>>>,
) {
    let spawned = spawn_helper(&theirs);
    drop(theirs);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    let pidfd = rustix::process::pidfd_open(
        Pid::from_child(&child),
        rustix::process::PidfdFlags::empty(),
    )
    .ok();
    let _ = started.send(Ok(pidfd));
    let trouble = loop {
        match proto::recv(sock.as_fd()) {
            Ok(None) => break None,
            Err(e) => break Some(format!("the sandbox socket failed: {e}")),
            Ok(Some(Err(e))) => break Some(format!("the sandbox sent a bad message ({e})")),
            Ok(Some(Ok(m))) if !m.fds.is_empty() => {
                break Some("the sandbox sent descriptors".into())
            }
            Ok(Some(Ok(m))) => match Report::parse(&m.bytes) {
                Ok(r) => {
                    if tx.send(Event::Report(r)).is_err() {
                        break None;
                    }
                }
                Err(e) => break Some(format!("the sandbox sent a bad message ({e})")),
            },
        }
    };
    if trouble.is_some() {
        // A sandbox that talks nonsense is not trusted any further.
        let _ = child.kill();
    }
    let status = child.wait();
    let why = trouble.unwrap_or_else(|| match status {
        Ok(s) => format!("the sandbox ended ({s})"),
        Err(e) => format!("the sandbox ended ({e})"),
    });
    let _ = tx.send(Event::Gone(why));
}
