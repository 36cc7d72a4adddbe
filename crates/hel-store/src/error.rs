use std::path::PathBuf;

use crate::format::{FORMAT_VERSION, REF_MAX};
use crate::id::BadSessionId;
use crate::message::{MessageError, PairingError};
use crate::{ObjectId, SessionId};

/// Every way a store operation can fail. Variants that concern an object
/// carry its id and the path it lives at, so a user can be told exactly what
/// is broken.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("object {id} at {path} is corrupt: {reason}")]
    Corrupt {
        id: ObjectId,
        path: PathBuf,
        reason: String,
    },
    #[error("object {id} is missing (expected at {path})")]
    Missing { id: ObjectId, path: PathBuf },
    #[error("object {id} at {path} has unknown kind {kind:?}")]
    UnknownKind {
        id: ObjectId,
        path: PathBuf,
        kind: String,
    },
    #[error("object {id} at {path} is a {found} where a {expected} was expected")]
    WrongKind {
        id: ObjectId,
        path: PathBuf,
        expected: &'static str,
        found: &'static str,
    },
    #[error("object {id} at {path} declares {size} bytes, over the {max} bytes a {what} may have")]
    TooLarge {
        id: ObjectId,
        path: PathBuf,
        size: u64,
        max: u64,
        what: &'static str,
    },
    #[error("snapshot {id} at {path} has schema_version {found}, this hel reads up to {supported}: upgrade hel")]
    NewerSchema {
        id: ObjectId,
        path: PathBuf,
        found: u64,
        supported: u64,
    },
    #[error("{path} is a {found} where a {expected} was expected: hel opens nothing through links or special files in .hel/ (remove it; `hel fsck` lists what is wrong)")]
    Unexpected {
        path: PathBuf,
        found: &'static str,
        expected: &'static str,
    },
    #[error("{path} holds {size} bytes, over the {max} bytes such a file may have")]
    FileTooLarge { path: PathBuf, size: u64, max: u64 },
    #[error("session {session} is in use by another hel instance{}", holder.as_ref().map(|h| format!(" ({h})")).unwrap_or_default())]
    InUse {
        session: String,
        /// Who holds it, as the lease file says (pid and since when).
        holder: Option<String>,
    },
    #[error("no session {session} in this store")]
    NoSuchSession { session: String },
    #[error("session {session} has no checkpoint yet")]
    NoCheckpoint { session: String },
    #[error("ref of session {session} at {path} is malformed: {reason}")]
    BadRef {
        session: String,
        path: PathBuf,
        #[source]
        reason: RefError,
    },
    #[error(
        "ref of session {session} moved (expected {expected}, found {found}): another writer?"
    )]
    RefMoved {
        session: String,
        expected: String,
        found: String,
    },
    #[error(transparent)]
    BadSessionId(#[from] BadSessionId),
    #[error("object {id} at {path} holds an invalid message (item {index}): {reason}")]
    BadMessage {
        id: ObjectId,
        path: PathBuf,
        index: usize,
        #[source]
        reason: MessageError,
    },
    #[error("checkpoint {checkpoint} holds a broken conversation: {reason}")]
    BrokenConversation {
        checkpoint: ObjectId,
        #[source]
        reason: PairingError,
    },
    #[error("checkpoint {checkpoint} holds more than {limit} {what}, over what hel loads (see docs/configuration.md, \"Limits\")")]
    ConversationTooLarge {
        checkpoint: ObjectId,
        what: &'static str,
        limit: u64,
    },
    /// A root tree that flattens to more than a reader takes
    /// (`tree::Extents`): refused before anything is flattened.
    #[error("tree {tree} flattens to more than {limit} {what}, over what hel reads (see docs/configuration.md, \"Limits\"); the store may be damaged or hostile")]
    TreeTooLarge {
        tree: ObjectId,
        what: &'static str,
        limit: u64,
    },
    #[error("record at {pack} offset {offset}{} is damaged: {reason}", id.map(|i| format!(" (object {i})")).unwrap_or_default())]
    DamagedRecord {
        pack: PathBuf,
        offset: u64,
        id: Option<ObjectId>,
        reason: String,
    },
    /// A journal that is not what a writer and a crash can leave: hel
    /// neither appends to it nor cuts it.
    #[error("{path} offset {offset}: {reason}; hel does not write to or cut a journal with a fault (`hel fsck` checks the whole store)")]
    JournalFault {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    /// A journal holding a record of a type this hel does not know: read
    /// as far as this hel knows, never appended to.
    #[error("{path} holds a record of type {rtype} at offset {offset}, written by a newer hel: upgrade hel (this hel reads the records it knows but does not write to this session)")]
    NewerJournal {
        path: PathBuf,
        offset: u64,
        rtype: u8,
    },
    /// `refs/sessions/` is gone while journals are there: every session's
    /// head is lost, and gc refuses (it would take every journal for an
    /// unpublished one).
    #[error("{path} is missing while the store has journals: every session's ref is gone (restore it from a backup; `hel gc` refuses until then)")]
    RefsMissing { path: PathBuf },
    /// A dependents record a recorded session's head needs (objects-spec
    /// §5.1): without it a delete of `dep` would not look at `session`.
    #[error("{path} is missing: session {session} names objects of session {dep}'s journal, and a delete of {dep} would not know (run `hel gc`, which writes it again, before deleting {dep})")]
    DependentsRecordMissing {
        path: PathBuf,
        session: String,
        dep: String,
    },
    /// A sealed pack holding a record of a type this hel does not know: gc
    /// neither rewrites nor removes it.
    #[error("{path} holds a record of type {rtype} at offset {offset}, written by a newer hel: upgrade hel (this hel does not rewrite or remove that pack)")]
    NewerPack {
        path: PathBuf,
        offset: u64,
        rtype: u8,
    },
    /// A session's ref names a checkpoint that does not load.
    #[error("the ref {path} names checkpoint {checkpoint}, which does not load: {source}")]
    RefUnloadable {
        path: PathBuf,
        checkpoint: ObjectId,
        #[source]
        source: Box<Error>,
    },
    /// A store of a newer format than [`FORMAT_VERSION`]: refused before
    /// anything is written.
    #[error("{} is a store of format {found}, written by a newer hel; this hel reads format {supported} only: upgrade hel", path.display())]
    NewerStore {
        path: PathBuf,
        found: u64,
        supported: u64,
    },
    /// A store of a format older than [`FORMAT_VERSION`], which only
    /// pre-release hels wrote: refused before anything is written.
    #[error("{} is a store of format {found}, written by a pre-release hel; this hel reads format {FORMAT_VERSION} only: move {} aside or delete it", path.display(), path.display())]
    OlderStore { path: PathBuf, found: u64 },
    /// A `format` file that names no format (`found`: its first
    /// characters, escaped): refused before anything is written.
    #[error("{} has a format file that names no store format (it says \"{found}\"); this hel reads format {FORMAT_VERSION} only: move {} aside or delete it", path.display(), path.display())]
    UnknownFormat { path: PathBuf, found: String },
    /// A store with no `format` file that holds `found`, a file only a
    /// store that was made holds: the file was lost (objects-spec §1.2).
    /// Refused before anything is written, never completed or upgraded.
    #[error("{}/format is missing, and the store holds {} (a store being made holds no such file): the format file was lost; if this store is of format {FORMAT_VERSION}, write \"hel-store-format {FORMAT_VERSION}\" and a newline to {}/format and run `hel fsck`, else move {} aside", path.display(), found.display(), path.display(), path.display())]
    FormatMissing { path: PathBuf, found: PathBuf },
    #[error(transparent)]
    Name(Box<NameError>),
    /// A store that could not be upgraded to the next format now.
    #[error(transparent)]
    Upgrade(Box<UpgradeError>),
    /// A checkpoint a load would refuse, refused before anything of it
    /// was written (`admit.rs`): `at` is the message that breaks it.
    #[error("not saved, since a load would refuse it: {reason}")]
    Refused { at: Option<usize>, reason: String },
    #[error("internal error: {0} (nothing was saved; please report this)")]
    Internal(String),
    /// A file of the operation log that is not an entry (objects-spec §8.3).
    #[error("operation log entry {path} is damaged: {reason} (`hel fsck` lists what is wrong; remove the file to go on)")]
    BadOpLog { path: PathBuf, reason: String },
    /// An undo refused before anything changed (oplog.rs).
    #[error("cannot undo operation {op}: {reason}")]
    CannotUndo { op: String, reason: String },
    /// A session in the trash (objects-spec §8): not listed, not resumed.
    #[error("session {session} is in the trash: `hel sessions undelete {session}` brings it back")]
    Trashed { session: String },
    #[error("session {session} is not in the trash (`hel sessions trash` lists what it holds)")]
    NotInTrash { session: String },
    #[error("session {trashed}, in the trash, holds the history the purge of {session} rewrites: delete it for good (`hel sessions delete --now {trashed}`), or undelete it, then purge again")]
    TrashHolds { session: String, trashed: String },
    #[error("session {session} is pinned: `hel sessions unpin {session}` first")]
    Pinned { session: String },
    /// A trash entry or pin that is not what hel writes (objects-spec §8).
    #[error("{path} is not a trash entry hel reads: {reason} (`hel fsck` checks the store)")]
    BadTrash { path: PathBuf, reason: String },
}

/// Why a session's ref is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("not text")]
    NotText,
    #[error("no trailing newline")]
    NoNewline,
    #[error("not a 64-digit hex object id")]
    NotAnId,
    /// The file holds more than a ref can.
    #[error("{size} bytes, a ref holds {REF_MAX}")]
    TooLarge { size: u64 },
    /// It names a checkpoint, and the session has no journal: no commit
    /// record publishes it. (Every session's journal is made by its first
    /// commit, before its ref.)
    #[error("names checkpoint {checkpoint}, and the session has no journal whose commit record publishes it")]
    NoJournal { checkpoint: Box<ObjectId> },
    /// It names a checkpoint that another session made (fsck). The id is
    /// boxed so that [`Error`] stays as small as it was.
    #[error("names checkpoint {checkpoint} of session {owner}")]
    OtherSession {
        checkpoint: Box<ObjectId>,
        owner: SessionId,
    },
}

/// Why a name or the names file was refused.
#[derive(Debug, thiserror::Error)]
pub enum NameError {
    #[error("{name:?} is not a session name: {reason} (names are 1-64 letters, digits, '.', '_' or '-', with at least one character that is not a hex digit or '-')")]
    Invalid { name: String, reason: &'static str },
    #[error("the name {name:?} is taken by session {holder} (`hel sessions` lists names)")]
    Taken { name: String, holder: SessionId },
    #[error(
        "{path} line {line} is malformed: {reason} (fix or remove the file; `hel fsck` checks it)"
    )]
    Malformed {
        path: PathBuf,
        line: usize,
        reason: &'static str,
    },
}

/// Why a store was not upgraded to the next format (`upgrade.rs`; it is
/// left as it was).
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error("{} is a store of format {found}: this hel upgrades it to format {to} before using it, which it cannot do while session {session} is in use{}; end the hel working on it, then run this command again", store.display(), holder.as_ref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Busy {
        store: PathBuf,
        found: u64,
        to: u64,
        session: SessionId,
        /// Who holds the lease, as its file says.
        holder: Option<String>,
    },
    #[error("cannot upgrade {} from store format {found} to {to}: {source}; the store is left as format {found}", store.display())]
    Failed {
        store: PathBuf,
        found: u64,
        to: u64,
        #[source]
        source: Error,
    },
}

impl From<hel_object::object::ObjectError> for Error {
    fn from(e: hel_object::object::ObjectError) -> Error {
        use hel_object::object::ObjectError as O;
        match e {
            O::Corrupt { id, path, reason } => Error::Corrupt { id, path, reason },
            O::TooLarge {
                id,
                path,
                size,
                max,
                what,
            } => Error::TooLarge {
                id,
                path,
                size,
                max,
                what,
            },
            O::UnknownKind { id, path, kind } => Error::UnknownKind { id, path, kind },
            O::Compress { id, source } => Error::Io {
                path: PathBuf::from(format!("(compressing object {id})")),
                source,
            },
        }
    }
}

impl From<hel_object::tree::TreeTooLarge> for Error {
    fn from(e: hel_object::tree::TreeTooLarge) -> Error {
        Error::TreeTooLarge {
            tree: e.tree,
            what: e.what,
            limit: e.limit,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

// Every store call returns this by value, and other crates' errors wrap
// it: a reason that would grow it is boxed instead.
const _: () = assert!(std::mem::size_of::<Error>() <= 96);

/// Attach a path to an I/O result.
pub(crate) trait IoContext<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| Error::Io {
            path: path.into(),
            source,
        })
    }
}
