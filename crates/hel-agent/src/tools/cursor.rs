//! read_file cursors: opaque UUIDs naming where a read continues.

use std::collections::VecDeque;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

/// Cursors kept; the oldest is forgotten beyond this.
pub(crate) const CAPACITY: usize = 128;

pub(crate) use hel_store::{Cursor, Identity};

/// What the file of `meta` is now, to tell whether a cursor into it
/// still holds.
pub(crate) fn identity_of(meta: &Metadata) -> Identity {
    Identity::File {
        dev: meta.dev(),
        ino: meta.ino(),
        len: meta.len(),
        mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
        ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
    }
}

/// The most recent cursors, oldest first. Saved in every checkpoint (as
/// the session record's list, `session/record.rs`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CursorTable {
    cursors: VecDeque<Cursor>,
}

impl CursorTable {
    pub(crate) fn insert(&mut self, c: Cursor) {
        self.cursors.push_back(c);
        while self.cursors.len() > CAPACITY {
            self.cursors.pop_front();
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<&Cursor> {
        self.cursors.iter().find(|c| c.id == id)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cursors.len()
    }

    /// The cursors, oldest first, as a checkpoint keeps them.
    pub(crate) fn to_vec(&self) -> Vec<Cursor> {
        self.cursors.iter().cloned().collect()
    }

    /// The table of `saved` cursors (the newest [`CAPACITY`] of them).
    pub(crate) fn from_saved(saved: Vec<Cursor>) -> CursorTable {
        let mut t = CursorTable::default();
        for c in saved {
            t.insert(c);
        }
        t
    }
}
