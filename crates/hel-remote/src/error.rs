//! The errors of remote operations: each names the remote (and the key or
//! session) it is about. None holds a credential: URLs with credentials are
//! refused before anything is built from them.

use std::path::PathBuf;

/// What went wrong with a remote.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The object store refused or failed a request.
    #[error("remote {remote}: {source}")]
    Store {
        remote: String,
        #[source]
        source: object_store::Error,
    },
    /// The local store failed (or refused what was received).
    #[error(transparent)]
    Local(#[from] hel_store::Error),
    #[error("{url:?} is not a remote URL: {reason}")]
    BadUrl { url: String, reason: &'static str },
    #[error("{name:?} is not a remote name: use letters, digits, '-' and '_' (at most 64)")]
    BadName { name: String },
    #[error("remote config {path}: {reason}")]
    Config { path: PathBuf, reason: String },
    #[error("no remote named {name:?}: `hel remote list` shows them, `hel remote add NAME URL` adds one")]
    NoRemote { name: String },
    #[error("a remote named {name:?} exists already (`hel remote remove {name}` first)")]
    Exists { name: String },
    /// The backend does not honour conditional writes.
    #[error("remote {remote} does not honour conditional writes ({what}); hel refuses to push session refs there, since two machines pushing one session could lose checkpoints: use a store with If-None-Match/If-Match on PUT (AWS S3, R2, MinIO, Ceph RGW)")]
    NoConditionalWrites { remote: String, what: &'static str },
    /// Something on the remote is not what hel writes there.
    #[error("remote {remote}: {key}: {reason}")]
    Hostile {
        remote: String,
        key: String,
        reason: String,
    },
    /// Both sides have checkpoints the other lacks.
    #[error("session {session} diverged on remote {remote}: it has checkpoints this project lacks; `hel pull --remote {remote} {session}` brings the remote's line in as a new session (this one is untouched); continue there, or keep this line and push it as a new session with `hel resume {session} --at <checkpoint>` then `hel push`")]
    Diverged { remote: String, session: String },
    /// The remote holds a history of the session that a purge here replaced.
    #[error("session {session} on remote {remote} is the history `hel sessions purge` replaced here: not pulled; `hel push --remote {remote} {session}` replaces it there")]
    Purged { remote: String, session: String },
    #[error(
        "remote {remote} has no session {session} (`hel sessions --remote {remote}` lists them)"
    )]
    NoRemoteSession { remote: String, session: String },
    /// A push whose ref would come too long after its data (remote gc could have taken the data).
    #[error("push of session {session} to {remote} took more than {secs}s between its data and its ref; nothing was published: run `hel push` again")]
    TooSlow {
        remote: String,
        session: String,
        secs: u64,
    },
    #[error("remote {remote}: {what}")]
    Io {
        remote: String,
        what: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = RemoteError> = std::result::Result<T, E>;
