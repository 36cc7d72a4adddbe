//! The one place that knows where things live under `.hel/`.
//!
//! ```text
//! .hel/.gitignore            "*"
//! .hel/.sessions.lock        store lock (see lock.rs)
//! .hel/objects/ab/cdef…      loose objects, fan-out by the first two hex digits
//! .hel/refs/sessions/<uuid>  a session's newest snapshot id
//! .hel/logs/sessions/<uuid>  the session's ref log
//! .hel/sessions/<uuid>/      .active lease and materialized spill/
//! .hel/tmp/                  files of writes in progress
//! ```

use std::path::{Path, PathBuf};

use crate::{Error, ObjectId};

/// Name of the store directory inside a project.
pub const STORE_DIR: &str = ".hel";

/// Paths of one store.
#[derive(Clone, Debug)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout of the store at `root` (the `.hel` directory itself).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Layout { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn gitignore(&self) -> PathBuf {
        self.root.join(".gitignore")
    }
    pub fn store_lock(&self) -> PathBuf {
        self.root.join(".sessions.lock")
    }
    pub fn objects_dir(&self) -> PathBuf {
        self.root.join("objects")
    }
    pub fn object_dir(&self, id: &ObjectId) -> PathBuf {
        self.objects_dir().join(&id.to_hex()[..2])
    }
    pub fn object_path(&self, id: &ObjectId) -> PathBuf {
        let hex = id.to_hex();
        self.objects_dir().join(&hex[..2]).join(&hex[2..])
    }
    pub fn refs_dir(&self) -> PathBuf {
        self.root.join("refs").join("sessions")
    }
    pub fn ref_path(&self, session: &str) -> PathBuf {
        self.refs_dir().join(session)
    }
    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs").join("sessions")
    }
    pub fn log_path(&self, session: &str) -> PathBuf {
        self.logs_dir().join(session)
    }
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }
    pub fn session_dir(&self, session: &str) -> PathBuf {
        self.sessions_dir().join(session)
    }
    pub fn lease_path(&self, session: &str) -> PathBuf {
        self.session_dir(session).join(".active")
    }
    pub fn spill_dir(&self, session: &str) -> PathBuf {
        self.session_dir(session).join("spill")
    }
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }
}

/// Check that `s` is a session id: a lowercase hyphenated UUID. Everything
/// that turns a session id into a path goes through this first, so `../x`
/// can never name a path outside the store.
pub fn check_session_id(s: &str) -> Result<(), Error> {
    let ok = s.len() == 36
        && s.bytes().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
        });
    if ok {
        Ok(())
    } else {
        Err(Error::BadSessionId(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids() {
        assert!(check_session_id("0c9e6f1a-1b2c-4d3e-8f40-123456789abc").is_ok());
        for bad in [
            "../x",
            "/etc",
            "0C9E6F1A-1B2C-4D3E-8F40-123456789ABC",
            "abcd",
            "",
        ] {
            assert!(check_session_id(bad).is_err(), "{bad}");
        }
    }
}
