//! The wire between hel and its sandbox init: one `SOCK_SEQPACKET` socket
//! pair, one short text message per packet (at most [`MAX_MESSAGE`] bytes),
//! descriptors passed with `SCM_RIGHTS`, and larger payloads (the init spec,
//! a command with its environment) in a memfd passed along.
//!
//! hel treats every report as untrusted input: bounded reads, and anything
//! malformed is an error value, never a panic.

use std::ffi::{OsStr, OsString};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};

/// Largest message in either direction.
pub const MAX_MESSAGE: usize = 1024;
/// Largest payload read from a memfd (a command line and its environment
/// are bounded by the kernel's argument limits far below this).
pub const MAX_BODY: u64 = 16 << 20;
/// Most descriptors one message carries.
pub const MAX_FDS: usize = 3;

/// Why a message could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtoError {
    #[error("a message is not UTF-8")]
    NotText,
    #[error("unknown message {0:?}")]
    Unknown(String),
    #[error("a message or its descriptors were cut off")]
    Truncated,
    #[error("a payload is larger than {MAX_BODY} bytes")]
    TooLarge,
    #[error("a payload is malformed: {0}")]
    Malformed(String),
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Code(i32),
    Signal(i32),
}

/// What the sandbox tells hel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// Namespaces, mounts and Landlock are in place.
    Ready,
    /// The sandbox cannot be built here; the text says what is missing.
    Unavailable(String),
    /// The last run request started this process (pid inside the sandbox).
    Started(i32),
    /// The last run request could not start.
    Failed(String),
    /// A started process ended.
    Exited(i32, Status),
    /// How many processes run in the sandbox besides its init (the answer
    /// to [`Request::Count`]).
    Count(u32),
}

/// What hel tells the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// With one memfd holding the JSON [`Spec`] (to the helper, once).
    Init,
    /// With a memfd holding a [`RunBody`], then stdout and stderr.
    Run,
    /// Kill the process group of a started process.
    Kill(i32),
    /// How many processes run in the sandbox (besides its init): what
    /// the commands started and left behind.
    Count,
    /// Kill every process in the sandbox but its init.
    KillAll,
}

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_MESSAGE / 2)
        .collect()
}

fn parse_pid(s: &str) -> Result<i32, ProtoError> {
    match s.parse::<i32>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(ProtoError::Unknown(s.to_owned())),
    }
}

impl Report {
    pub fn encode(&self) -> String {
        match self {
            Report::Ready => "ready".into(),
            Report::Unavailable(w) => format!("unavailable {}", one_line(w)),
            Report::Started(p) => format!("started {p}"),
            Report::Failed(w) => format!("failed {}", one_line(w)),
            Report::Exited(p, Status::Code(c)) => format!("exited {p} code {c}"),
            Report::Exited(p, Status::Signal(s)) => format!("exited {p} signal {s}"),
            Report::Count(n) => format!("count {n}"),
        }
    }

    pub fn parse(bytes: &[u8]) -> Result<Report, ProtoError> {
        let text = std::str::from_utf8(bytes).map_err(|_| ProtoError::NotText)?;
        let (word, rest) = text.split_once(' ').unwrap_or((text, ""));
        let unknown = || ProtoError::Unknown(text.chars().take(80).collect());
        match word {
            "ready" if rest.is_empty() => Ok(Report::Ready),
            "unavailable" => Ok(Report::Unavailable(one_line(rest))),
            "failed" => Ok(Report::Failed(one_line(rest))),
            "started" => Ok(Report::Started(parse_pid(rest).map_err(|_| unknown())?)),
            "count" => match rest.parse::<u32>() {
                Ok(n) if rest.bytes().all(|b| b.is_ascii_digit()) => Ok(Report::Count(n)),
                _ => Err(unknown()),
            },
            "exited" => {
                let mut it = rest.split(' ');
                let (Some(pid), Some(kind), Some(n), None) =
                    (it.next(), it.next(), it.next(), it.next())
                else {
                    return Err(unknown());
                };
                let pid = parse_pid(pid).map_err(|_| unknown())?;
                let n: i32 = n.parse().map_err(|_| unknown())?;
                match kind {
                    "code" if (0..=255).contains(&n) => Ok(Report::Exited(pid, Status::Code(n))),
                    "signal" if (1..=64).contains(&n) => Ok(Report::Exited(pid, Status::Signal(n))),
                    _ => Err(unknown()),
                }
            }
            _ => Err(unknown()),
        }
    }
}

impl Request {
    pub fn encode(&self) -> String {
        match self {
            Request::Init => "init".into(),
            Request::Run => "run".into(),
            Request::Kill(p) => format!("kill {p}"),
            Request::Count => "count".into(),
            Request::KillAll => "kill-all".into(),
        }
    }

    pub fn parse(bytes: &[u8]) -> Result<Request, ProtoError> {
        let text = std::str::from_utf8(bytes).map_err(|_| ProtoError::NotText)?;
        match text.split_once(' ') {
            None if text == "init" => Ok(Request::Init),
            None if text == "run" => Ok(Request::Run),
            None if text == "count" => Ok(Request::Count),
            None if text == "kill-all" => Ok(Request::KillAll),
            Some(("kill", pid)) => Ok(Request::Kill(parse_pid(pid)?)),
            _ => Err(ProtoError::Unknown(text.chars().take(80).collect())),
        }
    }
}

/// A file's identity, to check that a path opened inside the sandbox's
/// mount namespace is the very directory hel meant.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    pub fn of(fd: impl AsFd) -> std::io::Result<FileId> {
        let st = rustix::fs::fstat(fd)?;
        Ok(FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        })
    }
}

/// What the sandbox init is built from (sent once, as JSON in a memfd).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The project directory (canonical) and its identity.
    pub project: PathBuf,
    pub project_id: FileId,
    /// `<project>/.hel`, when it exists: covered by an empty tmpfs.
    pub store: Option<FileId>,
    /// The current session's spill directory below `.hel/` (path
    /// components and identity), shown read-only.
    pub spill: Option<(Vec<String>, FileId)>,
    /// Directories commands may write beneath.
    pub writable: Vec<PathBuf>,
    /// Bind mounts over git directories (found by hel-agent's `tools::gitdirs`),
    /// each parent before what is inside it.
    pub git: Vec<GitMount>,
    /// Commands share hel's network; false: a network namespace of their
    /// own with only a loopback.
    pub network: bool,
    /// Nested projects' `.hel/` directories, each covered by an empty
    /// read-only tmpfs as the project's own is.
    pub stores: Vec<Hidden>,
}

/// A directory hidden from commands (a nested project's `.hel/`): its
/// canonical path and the identity hel saw.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Hidden {
    pub path: PathBuf,
    pub id: FileId,
}

/// One bind mount of a path onto itself: a git directory or `.git` file
/// (canonical, and the identity hel saw), read-only or writable (then it
/// cannot be moved or replaced while the sandbox lives).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct GitMount {
    pub path: PathBuf,
    pub id: FileId,
    pub read_only: bool,
}

/// One command to run: its working directory, text and environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunBody {
    pub cwd: PathBuf,
    pub command: String,
    pub env: Vec<(OsString, OsString)>,
}

impl RunBody {
    /// `cwd NUL command NUL (name=value NUL)*`. Fails on a NUL inside a field.
    pub fn encode(&self) -> Result<Vec<u8>, ProtoError> {
        let mut out = Vec::new();
        let mut field = |b: &[u8]| -> Result<(), ProtoError> {
            if b.contains(&0) {
                return Err(ProtoError::Malformed("a NUL byte inside a field".into()));
            }
            out.extend_from_slice(b);
            out.push(0);
            Ok(())
        };
        field(self.cwd.as_os_str().as_bytes())?;
        field(self.command.as_bytes())?;
        for (k, v) in &self.env {
            if k.is_empty() || k.as_bytes().contains(&b'=') {
                return Err(ProtoError::Malformed("a bad environment name".into()));
            }
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            field(&kv)?;
        }
        Ok(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<RunBody, ProtoError> {
        let body = bytes
            .strip_suffix(&[0])
            .ok_or_else(|| ProtoError::Malformed("no final NUL".into()))?;
        let mut fields = body.split(|b| *b == 0);
        let cwd = fields
            .next()
            .filter(|c| c.starts_with(b"/"))
            .ok_or_else(|| ProtoError::Malformed("no absolute working directory".into()))?;
        let command = fields
            .next()
            .ok_or_else(|| ProtoError::Malformed("no command".into()))?;
        let command = std::str::from_utf8(command)
            .map_err(|_| ProtoError::Malformed("the command is not UTF-8".into()))?;
        let mut env = Vec::new();
        for f in fields {
            let eq = f
                .iter()
                .position(|b| *b == b'=')
                .filter(|i| *i > 0)
                .ok_or_else(|| ProtoError::Malformed("an environment entry has no name".into()))?;
            env.push((
                OsStr::from_bytes(&f[..eq]).to_owned(),
                OsStr::from_bytes(&f[eq + 1..]).to_owned(),
            ));
        }
        Ok(RunBody {
            cwd: PathBuf::from(OsString::from_vec(cwd.to_vec())),
            command: command.to_owned(),
            env,
        })
    }
}

/// Send one message with descriptors. Never blocks (a full socket is an
/// error: the peer is not reading) and never raises SIGPIPE.
pub fn send(sock: BorrowedFd<'_>, msg: &str, fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other(
            "too many descriptors for one message",
        ));
    }
    let n = rustix::net::sendmsg(
        sock,
        &[IoSlice::new(msg.as_bytes())],
        &mut control,
        SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
    )?;
    if n != msg.len() {
        return Err(std::io::Error::other("a message was cut off"));
    }
    Ok(())
}

/// One received message and the descriptors that came with it.
pub struct Received {
    pub bytes: Vec<u8>,
    pub fds: Vec<OwnedFd>,
}

/// Receive one message (blocking unless the socket is non-blocking).
/// `Ok(None)` is the end: the peer is gone. Descriptors arrive close-on-exec.
pub fn recv(sock: BorrowedFd<'_>) -> std::io::Result<Option<Result<Received, ProtoError>>> {
    let mut buf = [0u8; MAX_MESSAGE];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        match rustix::net::recvmsg(
            sock,
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            r => break r?,
        }
    };
    let mut fds = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(it) = msg {
            fds.extend(it);
        }
    }
    if got.bytes == 0 && fds.is_empty() {
        return Ok(None);
    }
    if got
        .flags
        .intersects(ReturnFlags::TRUNC | ReturnFlags::CTRUNC)
        || got.bytes > MAX_MESSAGE
    {
        return Ok(Some(Err(ProtoError::Truncated)));
    }
    Ok(Some(Ok(Received {
        bytes: buf[..got.bytes].to_vec(),
        fds,
    })))
}

/// A memfd holding `bytes`, to pass along with a message.
pub fn body(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    use std::io::Write;
    let fd = rustix::fs::memfd_create("hel-sandbox", rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut f = std::fs::File::from(fd);
    f.write_all(bytes)?;
    Ok(f.into())
}

/// Read a payload memfd from its start, at most [`MAX_BODY`] bytes.
pub fn read_body(fd: OwnedFd) -> Result<Vec<u8>, ProtoError> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::from(fd);
    let len = f
        .metadata()
        .map_err(|e| ProtoError::Malformed(e.to_string()))?
        .len();
    if len > MAX_BODY {
        return Err(ProtoError::TooLarge);
    }
    let mut out = vec![0u8; len as usize];
    f.read_exact_at(&mut out, 0)
        .map_err(|e| ProtoError::Malformed(e.to_string()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip_and_garbage_is_an_error() {
        for r in [
            Report::Ready,
            Report::Unavailable("no user namespaces (EPERM)".into()),
            Report::Started(7),
            Report::Failed("cannot run bash".into()),
            Report::Exited(7, Status::Code(0)),
            Report::Exited(9, Status::Signal(9)),
            Report::Count(0),
            Report::Count(12),
        ] {
            assert_eq!(Report::parse(r.encode().as_bytes()), Ok(r));
        }
        for bad in [
            &b"started"[..],
            b"started -1",
            b"started 0",
            b"started 12x",
            b"exited 3 code",
            b"exited 3 code 300",
            b"exited 3 signal 0",
            b"exited 3 weird 1",
            b"exited 3 code 1 extra",
            b"count",
            b"count -1",
            b"count +3",
            b"count 99999999999",
            b"ready now",
            b"\xff\xfe",
            b"",
            b"hello",
        ] {
            assert!(
                Report::parse(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let multi = Report::Failed("a\nb".into()).encode();
        assert!(!multi.contains('\n'));
    }

    #[test]
    fn requests_round_trip() {
        for r in [
            Request::Init,
            Request::Run,
            Request::Kill(42),
            Request::Count,
            Request::KillAll,
        ] {
            assert_eq!(Request::parse(r.encode().as_bytes()), Ok(r));
        }
        assert!(Request::parse(b"kill -1").is_err());
        assert!(Request::parse(b"kill 0").is_err());
        assert!(Request::parse(b"run now").is_err());
    }

    #[test]
    fn run_bodies_round_trip_and_refuse_nul() {
        let b = RunBody {
            cwd: "/p".into(),
            command: "echo 'a=b'; printf '%s' \"$X\"".into(),
            env: vec![
                ("X".into(), "1=2".into()),
                ("EMPTY".into(), "".into()),
                (OsString::from_vec(b"N\xff".to_vec()), "v".into()),
            ],
        };
        assert_eq!(RunBody::decode(&b.encode().unwrap()), Ok(b.clone()));
        let mut nul = b.clone();
        nul.command = "a\0b".into();
        assert!(nul.encode().is_err());
        assert!(RunBody::decode(b"relative\0cmd\0").is_err());
        assert!(RunBody::decode(b"/p\0cmd\0=x\0").is_err());
        assert!(RunBody::decode(b"/p\0cmd").is_err());
    }
}
