//! hel-remote: sessions across machines. Push and pull a project's
//! sessions to any S3-compatible object store (conditional writes for the
//! refs) or a shared directory, list and delete remote sessions, and
//! collect remote garbage. The remote layout is objects-spec §12; what is
//! sent and verified is hel-store's (`hel_store::transfer`).
//!
//! The remote is as untrusted as a shipped `.hel/`: every read is bounded,
//! every pack hashed against its name and every object against its id,
//! and a received head is validated whole before any local head moves.

pub mod backend;
pub mod bundle;
pub mod config;
pub mod error;
pub mod remote;
pub mod url;

pub use config::{RemoteConfig, Remotes};
pub use error::{RemoteError, Result};
pub use remote::{GcReport, Listed, Pulled, Pushed, Remote, RemoteRef};
