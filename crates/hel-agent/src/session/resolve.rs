//! Session and checkpoint arguments: a session's name, its UUID or a
//! unique prefix of at least 4 hex digits; a checkpoint as `hel sessions
//! log` prints it. A name always holds a character that is not a hex digit
//! or `-`, so the two kinds of argument cannot be confused.

use std::path::{Path, PathBuf};

use hel_store::log::LogEntry;
use hel_store::{Checkpoint, ObjectId, SessionId, Store};

/// Why a session could not be found or continued here.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A session argument that cannot name a session (bad usage).
    #[error("{0:?} is not a session id or name: give a session's name, its UUID or a prefix of at least 4 hex digits (`hel sessions` lists them)")]
    NotASessionId(String),
    /// A checkpoint argument that cannot name a checkpoint (bad usage).
    #[error("{0:?} is not a checkpoint id: give at least 4 hex digits as `hel sessions log` prints them")]
    NotACheckpointId(String),
    #[error("no session {spec} in {}; it belongs to the project at {}: run hel there", project.display(), owner.display())]
    InOtherProject {
        spec: String,
        project: PathBuf,
        owner: PathBuf,
    },
    #[error("no session matches {spec} in {} (`hel sessions` lists them)", project.display())]
    NoMatch { spec: String, project: PathBuf },
    #[error("{spec} is ambiguous: it matches {}; give more digits", list(matches.iter().map(SessionId::as_str)))]
    Ambiguous {
        spec: String,
        matches: Vec<SessionId>,
    },
    #[error("no checkpoint {0} in this session's log (`hel sessions log <SESSION>` lists them)")]
    NoCheckpoint(String),
    #[error("checkpoint {spec} is ambiguous: it matches {}", short_ids(matches))]
    AmbiguousCheckpoint {
        spec: String,
        matches: Vec<ObjectId>,
    },
    #[error("checkpoint belongs to session {found}, not {session}: the store is inconsistent (run `hel fsck`)")]
    OtherSession {
        found: SessionId,
        session: SessionId,
    },
    #[error("session {session} belongs to the project at {saved}, but this is {project}: run hel from {saved}, or, if the project moved here, continue it here with `hel resume {session} --relocate`")]
    OtherProject {
        session: SessionId,
        saved: String,
        project: String,
    },
    #[error(
        "no session of this project to choose (none yet, or all in use): `hel sessions` lists them"
    )]
    NoneResumable,
    /// Sessions there are, but none hel may choose on its own: each
    /// arrived with a `.hel/` not made here, was saved in another
    /// directory or is dated in the future.
    #[error("no session of {} to choose: {}; hel never picks such a session by default: name one (`hel sessions` lists them){}", project.display(), not_here(*shipped, *foreign, *future), ways(*shipped, *foreign))]
    NoneHere {
        project: PathBuf,
        /// Sessions that arrived with the store (hel_store::identity).
        shipped: usize,
        /// Sessions of this store's own saved in another directory.
        foreign: usize,
        /// Sessions of this directory dated in the future.
        future: usize,
    },
    #[error(transparent)]
    Store(#[from] hel_store::Error),
}

/// What [`SessionError::NoneHere`] found instead.
fn not_here(shipped: usize, foreign: usize, future: usize) -> String {
    let mut parts = Vec::new();
    if shipped > 0 {
        parts.push(format!(
            "{} that arrived with this .hel/, which was not made here (cloned, copied or moved with the project)",
            crate::terminal::count(shipped as u64, "session", "sessions")
        ));
    }
    if foreign > 0 {
        parts.push(format!(
            "{} in this store saved in another directory (a .hel/ that came with the repository?)",
            crate::terminal::count(foreign as u64, "session", "sessions")
        ));
    }
    if future > 0 {
        parts.push(format!(
            "{} dated in the future",
            crate::terminal::count(future as u64, "session", "sessions")
        ));
    }
    parts.join(", and ")
}

/// What else [`SessionError::NoneHere`] can do.
fn ways(shipped: usize, foreign: usize) -> String {
    let mut out = String::new();
    if foreign > 0 {
        out.push_str(", or continue one here with `hel resume <SESSION> --relocate`");
    }
    if shipped > 0 {
        out.push_str(", or, if they are yours, `hel sessions adopt --all`");
    }
    out
}

fn list<'a>(items: impl Iterator<Item = &'a str>) -> String {
    items.collect::<Vec<_>>().join(", ")
}

/// Checkpoint ids as `hel sessions log` prints them.
fn short_ids(ids: &[ObjectId]) -> String {
    ids.iter()
        .map(|id| id.to_hex()[..12].to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Check the shape of a session argument: a name ([`hel_store::check_name`]),
/// a UUID or a prefix of at least 4 hex digits (hyphens allowed).
pub fn check_session_arg(spec: &str) -> Result<(), SessionError> {
    if hel_store::looks_like_name(spec) {
        return Ok(());
    }
    let hex = spec.chars().filter(|c| *c != '-').count();
    let ok =
        hex >= 4 && spec.len() <= 36 && spec.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(SessionError::NotASessionId(spec.to_owned()))
    }
}

/// Resolve a session argument to one session id of `store`.
pub fn resolve(store: &Store, project: &Path, spec: &str) -> Result<SessionId, SessionError> {
    check_session_arg(spec)?;
    if hel_store::looks_like_name(spec) {
        return match hel_store::names::session_named(store, spec)? {
            Some(id) => Ok(id),
            None => Err(SessionError::NoMatch {
                spec: spec.to_owned(),
                project: project.to_owned(),
            }),
        };
    }
    let spec = spec.to_ascii_lowercase();
    // A whole id names its session whatever is there, so that what is
    // wrong with it (a link, a FIFO) is reported as such.
    if let Ok(id) = spec.parse::<SessionId>() {
        if store.knows(&id)? {
            return Ok(id);
        }
    }
    let mut matches = hel_store::names::sessions_matching(store, &spec)?;
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => {
            // Run from inside a project that holds it? Say where.
            for dir in project.ancestors().skip(1) {
                let Ok(other) = Store::open(dir) else {
                    continue;
                };
                if other.exists()
                    && hel_store::names::sessions_matching(&other, &spec)
                        .is_ok_and(|m| !m.is_empty())
                {
                    return Err(SessionError::InOtherProject {
                        spec,
                        project: project.to_owned(),
                        owner: dir.to_owned(),
                    });
                }
            }
            Err(SessionError::NoMatch {
                spec,
                project: project.to_owned(),
            })
        }
        _ => Err(SessionError::Ambiguous { spec, matches }),
    }
}

/// The project directory as checkpoints record it (and as resume compares
/// it): the canonical path, as a string.
pub fn recorded_cwd(project: &Path) -> String {
    project.to_string_lossy().into_owned()
}

/// The session a command works on when none is named (`hel undo`): the
/// newest, as `hel sessions` orders them, that nobody is working on, that
/// has a checkpoint that can be read, that is the project's own (not
/// shipped: `hel_store::identity`), and whose newest record was saved in
/// `project`. A shipped session (one that came in a repository's `.hel/`),
/// one saved in another directory or one dated in the future is never
/// chosen: naming it is the only way to use it.
pub fn default_session(store: &Store, project: &Path) -> Result<SessionId, SessionError> {
    newest(store, project, false)
}

/// The session `hel resume --last` and `hel --continue` go on with: as
/// [`default_session`], among the sessions with at least one answer (one
/// the model never answered holds no conversation to continue).
pub(crate) fn last_session(store: &Store, project: &Path) -> Result<SessionId, SessionError> {
    newest(store, project, true)
}

fn newest(store: &Store, project: &Path, answered: bool) -> Result<SessionId, SessionError> {
    let here = recorded_cwd(project);
    let (mut shipped, mut foreign, mut future) = (0, 0, 0);
    for s in store.sessions()? {
        if s.busy || s.head.is_none() || s.broken.is_some() || (answered && s.checkpoints == 0) {
            continue;
        }
        if s.shipped {
            shipped += 1;
        } else if s.cwd.as_deref() != Some(here.as_str()) {
            foreign += 1;
        } else if s.future {
            future += 1;
        } else {
            return Ok(s.id);
        }
    }
    if shipped + foreign + future == 0 {
        return Err(SessionError::NoneResumable);
    }
    Err(SessionError::NoneHere {
        project: project.to_owned(),
        shipped,
        foreign,
        future,
    })
}

/// Resolve a checkpoint argument among the checkpoints of `log`.
pub fn resolve_checkpoint(log: &[LogEntry], spec: &str) -> Result<ObjectId, SessionError> {
    if spec.len() < 4 || !spec.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(SessionError::NotACheckpointId(spec.to_owned()));
    }
    let spec = spec.to_ascii_lowercase();
    let found: Vec<ObjectId> = log
        .iter()
        .filter(|e| e.id.to_hex().starts_with(&spec))
        .map(|e| e.id)
        .collect();
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(SessionError::NoCheckpoint(spec)),
        _ => Err(SessionError::AmbiguousCheckpoint {
            spec,
            matches: found,
        }),
    }
}

/// Refuse a checkpoint that may not be continued here: another session's,
/// or saved in another directory. (What it holds was validated when it was
/// loaded: a broken conversation never gets this far.)
pub(crate) fn verify(
    cp: &Checkpoint,
    session: &SessionId,
    project: &str,
) -> Result<(), SessionError> {
    if cp.session_id != *session {
        return Err(SessionError::OtherSession {
            found: cp.session_id.clone(),
            session: session.clone(),
        });
    }
    if cp.cwd != project {
        return Err(SessionError::OtherProject {
            session: session.clone(),
            saved: cp.cwd.clone(),
            project: project.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_args() {
        assert!(check_session_arg("0c9e").is_ok());
        assert!(check_session_arg("0c9e6f1a-1b2c-4d3e-8f40-123456789abc").is_ok());
        assert!(check_session_arg("fix-login").is_ok());
        for bad in ["../x", "/tmp/x", "abc", "zz zz", "-x", ""] {
            assert!(
                matches!(check_session_arg(bad), Err(SessionError::NotASessionId(_))),
                "{bad}"
            );
        }
    }
}
