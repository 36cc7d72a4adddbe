//! How hel ends: the one place that turns failures into what the user is
//! told and an exit code (0 done; 1 incomplete, refused or failed; 2 bad
//! usage or configuration; 130 interrupted).
//!
//! Every failure reaches `main` as an [`Exit`]: the error itself (with its
//! source chain), its [`Kind`] (which decides the exit code) and its
//! [`Hint`]s. Library errors become one through the `From` impls below,
//! hel's own through the typed [`Usage`], [`Refusal`] and [`Failure`]
//! ([`own`]); none is built from a bare string. Hints are decided here
//! only: an error that says the store is damaged ([`Damage`]) sends the
//! user to `hel fsck`, whichever path brought it.

mod own;

use std::error::Error;
use std::fmt;

use hel_agent::{ProjectError, RestoreFilesError, SessionError, StartError};
use hel_remote::RemoteError;
use hel_workspace::flat::FlatError;
use hel_workspace::history::HistoryError;
use hel_workspace::restore::RestoreError;
use hel_workspace::snapshot::SnapshotError;
use hel_workspace::undo::UndoError;

pub use own::{Failure, Refusal, Usage};

/// A failure to report on stderr, with its exit code: one line for the
/// error, then one `hint: …` line per hint.
#[derive(Debug)]
pub struct Exit {
    kind: Kind,
    error: Box<dyn Error + Send + Sync>,
    hints: &'static [Hint],
}

/// What kind of failure ended hel: it decides the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Bad usage or configuration: exit 2.
    Usage,
    /// Refused, incomplete or failed: exit 1.
    Failed,
}

/// What to do about a failure, beyond what its own line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hint {
    /// The store is damaged: fsck lists every fault.
    Fsck,
}

impl fmt::Display for Hint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hint::Fsck => f.write_str("run `hel fsck` to see what is damaged"),
        }
    }
}

impl Exit {
    /// `error` ending hel as a failure of `kind`; its hints follow from
    /// what it says ([`Damage`]).
    pub fn new<E: Damage + Error + Send + Sync + 'static>(kind: Kind, error: E) -> Exit {
        Exit {
            kind,
            hints: hints(&error),
            error: Box::new(error),
        }
    }

    pub fn code(&self) -> u8 {
        match self.kind {
            Kind::Usage => 2,
            Kind::Failed => 1,
        }
    }

    pub fn hints(&self) -> &'static [Hint] {
        self.hints
    }
}

/// What to do about an error beyond its own words: the one place hints
/// are decided.
fn hints(e: &impl Damage) -> &'static [Hint] {
    if e.damaged() {
        &[Hint::Fsck]
    } else {
        &[]
    }
}

/// The error's own line (its hints are said apart, [`Exit::hints`]).
impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl Error for Exit {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.error.source()
    }
}

/// Whether an error says the store is damaged (then hel sends the user to
/// `hel fsck`): a corrupt, missing or malformed object, record, journal or
/// ref, or a snapshot no walk could have made.
pub trait Damage {
    fn damaged(&self) -> bool {
        false
    }
}

// hel's own failures never say the store is damaged.
impl Damage for Usage {}
impl Damage for Refusal {}
impl Damage for Failure {}

impl Damage for hel_store::Error {
    fn damaged(&self) -> bool {
        use hel_store::Error as E;
        match self {
            E::Corrupt { .. }
            | E::Missing { .. }
            | E::UnknownKind { .. }
            | E::WrongKind { .. }
            | E::TooLarge { .. }
            | E::Unexpected { .. }
            | E::FileTooLarge { .. }
            | E::BadRef { .. }
            | E::BadMessage { .. }
            | E::BrokenConversation { .. }
            | E::TreeTooLarge { .. }
            | E::DamagedRecord { .. }
            | E::JournalFault { .. }
            | E::RefsMissing { .. }
            | E::DependentsRecordMissing { .. }
            | E::RefUnloadable { .. }
            | E::BadOpLog { .. }
            | E::BadTrash { .. } => true,
            E::Name(n) => n.damaged(),
            // Not damage: the system, another instance, a newer hel or
            // the user's argument (each says what to do itself). Listed
            // whole, so that a new variant is decided here.
            E::Io { .. }
            | E::NewerSchema { .. }
            | E::InUse { .. }
            | E::NoSuchSession { .. }
            | E::NoCheckpoint { .. }
            | E::RefMoved { .. }
            | E::BadSessionId(_)
            | E::ConversationTooLarge { .. }
            | E::Refused { .. }
            | E::NewerJournal { .. }
            | E::NewerPack { .. }
            | E::NewerStore { .. }
            | E::OlderStore { .. }
            | E::UnknownFormat { .. }
            | E::FormatMissing { .. }
            | E::Upgrade(_)
            | E::CannotUndo { .. }
            | E::Trashed { .. }
            | E::NotInTrash { .. }
            | E::Pinned { .. }
            | E::TrashHolds { .. }
            | E::Internal(_) => false,
        }
    }
}

impl Damage for hel_store::NameError {
    fn damaged(&self) -> bool {
        matches!(self, hel_store::NameError::Malformed { .. })
    }
}

impl Damage for SessionError {
    fn damaged(&self) -> bool {
        match self {
            SessionError::OtherSession { .. } => true,
            SessionError::Store(e) => e.damaged(),
            _ => false,
        }
    }
}

impl Damage for StartError {
    fn damaged(&self) -> bool {
        match self {
            StartError::Store(e) => e.damaged(),
            StartError::Session(e) => e.damaged(),
            StartError::Workspace(e) => e.damaged(),
            _ => false,
        }
    }
}

impl Damage for hel_agent::WorkspaceError {
    fn damaged(&self) -> bool {
        use hel_agent::WorkspaceError as W;
        match self {
            W::Snapshot(e) => e.damaged(),
            W::History(e) => e.damaged(),
            W::Flat(e) => e.damaged(),
        }
    }
}

impl Damage for SnapshotError {
    fn damaged(&self) -> bool {
        matches!(self, SnapshotError::Store(e) if e.damaged())
    }
}

impl Damage for HistoryError {
    fn damaged(&self) -> bool {
        match self {
            HistoryError::Store(e) => e.damaged(),
            HistoryError::TooDeep(_) => true,
            _ => false,
        }
    }
}

impl Damage for FlatError {
    fn damaged(&self) -> bool {
        match self {
            FlatError::Store(e) => e.damaged(),
            FlatError::TooDeep { .. } | FlatError::PathTooLong { .. } => true,
        }
    }
}

impl Damage for RestoreError {
    fn damaged(&self) -> bool {
        match self {
            RestoreError::Workspace(e) | RestoreError::Blob { source: e, .. } => e.damaged(),
            RestoreError::SizeMismatch { .. } | RestoreError::BadTarget { .. } => true,
            RestoreError::Temp { .. } | RestoreError::NotDurable { .. } => false,
        }
    }
}

impl Damage for UndoError {
    fn damaged(&self) -> bool {
        match self {
            UndoError::Store(e) => e.damaged(),
            UndoError::History(e) => e.damaged(),
            UndoError::Snapshot(e) => e.damaged(),
            UndoError::Flat(e) => e.damaged(),
            UndoError::Restore(e) => e.damaged(),
            UndoError::Trees(_)
            | UndoError::NoCheckpoint
            | UndoError::NoStart(_)
            | UndoError::OtherRunning(_) => false,
        }
    }
}

impl Damage for RestoreFilesError {
    fn damaged(&self) -> bool {
        match self {
            RestoreFilesError::Store(e) => e.damaged(),
            RestoreFilesError::Undo(e) => e.damaged(),
            RestoreFilesError::Off
            | RestoreFilesError::NotAFork
            | RestoreFilesError::Shipped(_) => false,
        }
    }
}

impl Damage for RemoteError {
    fn damaged(&self) -> bool {
        // What a remote holds is checked as it is received: only the local
        // store is fsck's.
        matches!(self, RemoteError::Local(e) if e.damaged())
    }
}

impl From<hel_store::Error> for Exit {
    fn from(e: hel_store::Error) -> Exit {
        use hel_store::Error as E;
        let kind = match &e {
            E::BadSessionId(_) => Kind::Usage,
            E::Name(n) if matches!(**n, hel_store::NameError::Invalid { .. }) => Kind::Usage,
            _ => Kind::Failed,
        };
        match Refusal::of_store(&e) {
            Some(refusal) => Exit::new(kind, refusal),
            None => Exit::new(kind, e),
        }
    }
}

/// A store error in the words hel says it in (as [`Exit`] would), for a
/// line that goes on after it; its hints are [`store_hints`].
pub fn store_words(e: &hel_store::Error) -> String {
    match Refusal::of_store(e) {
        Some(refusal) => refusal.to_string(),
        None => e.to_string(),
    }
}

/// The hints of a store error said in a line of its own
/// ([`store_words`]).
pub fn store_hints(e: &hel_store::Error) -> &'static [Hint] {
    hints(e)
}

impl From<hel_store::NameError> for Exit {
    fn from(e: hel_store::NameError) -> Exit {
        let kind = match e {
            hel_store::NameError::Invalid { .. } => Kind::Usage,
            _ => Kind::Failed,
        };
        Exit::new(kind, e)
    }
}

impl From<StartError> for Exit {
    fn from(e: StartError) -> Exit {
        match e {
            StartError::Config(_) | StartError::AllowWrite(_) => Exit::new(Kind::Usage, e),
            StartError::Store(e) => e.into(),
            StartError::Session(e) => e.into(),
            StartError::Project(e) => e.into(),
            e => Exit::new(Kind::Failed, e),
        }
    }
}

impl From<ProjectError> for Exit {
    fn from(e: ProjectError) -> Exit {
        match e {
            ProjectError::CurrentDir(_) => Exit::new(Kind::Failed, e),
            ProjectError::Given { .. } | ProjectError::NotADirectory(_) => {
                Exit::new(Kind::Usage, e)
            }
        }
    }
}

impl Damage for ProjectError {}

impl From<SessionError> for Exit {
    fn from(e: SessionError) -> Exit {
        match e {
            SessionError::NotASessionId(_) | SessionError::NotACheckpointId(_) => {
                Exit::new(Kind::Usage, e)
            }
            SessionError::Store(e) => e.into(),
            e => Exit::new(Kind::Failed, e),
        }
    }
}

impl From<UndoError> for Exit {
    fn from(e: UndoError) -> Exit {
        match e {
            UndoError::Store(e) | UndoError::History(HistoryError::Store(e)) => e.into(),
            e => Exit::new(Kind::Failed, e),
        }
    }
}

impl From<RestoreFilesError> for Exit {
    fn from(e: RestoreFilesError) -> Exit {
        Exit::new(Kind::Failed, e)
    }
}

impl From<SnapshotError> for Exit {
    fn from(e: SnapshotError) -> Exit {
        Exit::new(Kind::Failed, e)
    }
}

impl From<FlatError> for Exit {
    fn from(e: FlatError) -> Exit {
        Exit::new(Kind::Failed, e)
    }
}

impl From<RemoteError> for Exit {
    fn from(e: RemoteError) -> Exit {
        match e {
            RemoteError::Local(e) => e.into(),
            RemoteError::BadUrl { .. }
            | RemoteError::BadName { .. }
            | RemoteError::Config { .. }
            | RemoteError::NoRemote { .. } => Exit::new(Kind::Usage, e),
            e => Exit::new(Kind::Failed, e),
        }
    }
}

impl From<Usage> for Exit {
    fn from(e: Usage) -> Exit {
        Exit::new(Kind::Usage, e)
    }
}

impl From<Refusal> for Exit {
    fn from(e: Refusal) -> Exit {
        Exit::new(Kind::Failed, e)
    }
}

impl From<Failure> for Exit {
    fn from(e: Failure) -> Exit {
        Exit::new(Kind::Failed, e)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn bad_arguments_are_usage_errors() {
        for bad in ["../x", "/tmp/x", "abc", "zz zz", ""] {
            let e = hel_agent::check_session_arg(bad).unwrap_err();
            assert_eq!(Exit::from(e).code(), 2, "{bad}");
        }
        let e = hel_agent::resolve_checkpoint(&[], "xyz").unwrap_err();
        assert_eq!(Exit::from(e).code(), 2);
        let e = hel_agent::resolve_checkpoint(&[], "abcd").unwrap_err();
        assert_eq!(Exit::from(e).code(), 1);
    }

    /// A damaged store sends the user to fsck on every path it reaches
    /// them by: on its own, inside a session, a run's start, an undo, a
    /// remote; a store that is only busy does not.
    #[test]
    fn a_store_fault_carries_the_fsck_hint_whatever_wraps_it() {
        let fault = || hel_store::Error::JournalFault {
            path: PathBuf::from("/p/x.journal"),
            offset: 16,
            reason: "bad checksum".into(),
        };
        let exits = [
            Exit::from(fault()),
            Exit::from(SessionError::Store(fault())),
            Exit::from(StartError::Store(fault())),
            Exit::from(StartError::Workspace(hel_agent::WorkspaceError::Flat(
                FlatError::Store(fault()),
            ))),
            Exit::from(UndoError::History(HistoryError::Store(fault()))),
            Exit::from(UndoError::Restore(RestoreError::Blob {
                path: PathBuf::from("a"),
                source: fault(),
            })),
            Exit::from(RemoteError::Local(fault())),
            Exit::from(RestoreFilesError::Store(fault())),
        ];
        for exit in exits {
            assert_eq!(exit.code(), 1, "{exit}");
            assert_eq!(exit.hints(), [Hint::Fsck], "{exit}");
            assert!(
                exit.to_string().contains("/p/x.journal offset 16"),
                "{exit}"
            );
            assert!(!exit.to_string().contains('\n'), "{exit}");
        }
        let busy = Exit::from(hel_store::Error::InUse {
            session: "s".into(),
            holder: None,
        });
        assert!(busy.hints().is_empty());
        assert_eq!(
            busy.to_string(),
            "session s is in use by another hel instance: leave hel there (Ctrl-D or /exit), then run this again"
        );
    }

    #[test]
    fn hel_s_own_failures_keep_their_exit_codes() {
        assert_eq!(Exit::from(Usage::AtWithLast).code(), 2);
        assert_eq!(Exit::from(Refusal::NonePicked).code(), 1);
        let e = Exit::from(Failure::Runtime(std::io::Error::other("no")));
        assert_eq!(e.code(), 1);
        assert_eq!(e.to_string(), "cannot start the async runtime: no");
        assert!(e.hints().is_empty());
    }
}
