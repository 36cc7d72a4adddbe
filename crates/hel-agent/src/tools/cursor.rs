//! read_file cursors: opaque UUIDs naming where a read continues.

use std::collections::VecDeque;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

use serde::{Deserialize, Serialize};

/// Cursors kept; the oldest is forgotten beyond this.
pub const CAPACITY: usize = 128;

/// What a file was when a cursor into it was handed out.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Identity {
    /// A project file.
    File {
        dev: u64,
        ino: u64,
        len: u64,
        mtime_ns: i64,
        ctime_ns: i64,
    },
    /// A spill file, identified by its blob id: stable across processes
    /// and copies, since spill never changes once written.
    Spill { blob: String },
}

impl Identity {
    pub fn of(meta: &Metadata) -> Identity {
        Identity::File {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
        }
    }
}

/// Where a read continues.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Cursor {
    pub id: String,
    /// The path as the model gave it (relative to the project for project files).
    pub path: String,
    pub offset: u64,
    /// Lines left in the requested range (None: to the end of the file).
    pub lines_left: Option<u64>,
    pub identity: Identity,
}

/// The most recent cursors, oldest first. Saved in every checkpoint.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(transparent)]
pub struct CursorTable {
    cursors: VecDeque<Cursor>,
}

impl CursorTable {
    pub fn insert(&mut self, c: Cursor) {
        self.cursors.push_back(c);
        while self.cursors.len() > CAPACITY {
            self.cursors.pop_front();
        }
    }

    pub fn get(&self, id: &str) -> Option<&Cursor> {
        self.cursors.iter().find(|c| c.id == id)
    }

    pub fn len(&self) -> usize {
        self.cursors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cursors.is_empty()
    }
}
