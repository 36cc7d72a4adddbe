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
    #[error("checkpoint {checkpoint} holds more than {limit} {what}, over what hel loads (see README, \"Limits\")")]
    ConversationTooLarge {
        checkpoint: ObjectId,
        what: &'static str,
        limit: u64,
    },
    /// A root tree that flattens to more than a reader takes
    /// (`tree::Extents`): refused before anything is flattened.
    #[error("tree {tree} flattens to more than {limit} {what}, over what hel reads (see README, \"Limits\"); the store may be damaged or hostile")]
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
    /// The stub of objects-spec §12.6 is not there: a format-1 hel would
    /// take this store's refs for its own.
    #[error("{path} is missing or not the stub: it is what makes an older hel refuse this store (remove what is there, if anything; the next commit writes it again)")]
    StubMissing { path: PathBuf },
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
    #[error(
        "the store at {path} has format {found}, this hel reads up to {supported}: upgrade hel"
    )]
    NewerStore {
        path: PathBuf,
        found: u64,
        supported: u64,
    },
    #[error(transparent)]
    Name(Box<NameError>),
    /// A store of an older format that could not be upgraded now.
    #[error(transparent)]
    Upgrade(Box<UpgradeError>),
    /// A checkpoint a load would refuse, refused before anything of it
    /// was written (`admit.rs`): `at` is the message that breaks it.
    #[error("not saved, since a load would refuse it: {reason}")]
    Refused { at: Option<usize>, reason: String },
    #[error("internal error: {0} (nothing was saved; please report this)")]
    Internal(String),
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

/// Why a store of an older format was not upgraded (it is left as it was:
/// a hel of its format still reads all of it).
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error("{} is a store of format {found}: this hel upgrades it to format {} before using it, which it cannot do while session {session} is in use{}; end the hel working on it (an older hel), then run this command again", store.display(), FORMAT_VERSION, holder.as_ref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Busy {
        store: PathBuf,
        found: u64,
        session: SessionId,
        /// Who holds the lease, as its file says.
        holder: Option<String>,
    },
    #[error("cannot upgrade {} from store format {found} to {}: {source}; the store is left as format {found}, which a hel of that format still reads", store.display(), FORMAT_VERSION)]
    Failed {
        store: PathBuf,
        found: u64,
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
