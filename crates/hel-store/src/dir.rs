//! The store's view of hel-fs: [`hel_fs::Dir`] with errors in the store's
//! own [`Error`], whose messages say what to do about a link or a special
//! file found in `.hel/`. Every mechanism (no-follow opens, kind checks,
//! bounded reads, sync counting) is hel-fs's; this module only converts.

use std::fs::File;
use std::path::{Path, PathBuf};

pub(crate) use hel_fs::{Entry, Kind, Stamp};

use crate::{Error, Result};

impl From<hel_fs::Error> for Error {
    fn from(e: hel_fs::Error) -> Error {
        match e {
            hel_fs::Error::Io { path, source } => Error::Io { path, source },
            hel_fs::Error::Unexpected {
                path,
                found,
                expected,
            } => Error::Unexpected {
                path,
                found,
                expected,
            },
            hel_fs::Error::TooLarge { path, size, max } => Error::FileTooLarge { path, size, max },
        }
    }
}

/// An open directory inside (or being) the store: [`hel_fs::Dir`], its
/// errors as the store's.
#[derive(Debug)]
pub(crate) struct Dir(hel_fs::Dir);

impl Dir {
    /// See [`hel_fs::Dir::open_path`].
    pub fn open_path(path: &Path) -> Result<Dir> {
        Ok(Dir(hel_fs::Dir::open_path(path)?))
    }
    pub fn dup_fd(&self) -> Result<std::os::fd::OwnedFd> {
        Ok(self.0.dup_fd()?)
    }
    pub fn path(&self) -> &Path {
        self.0.path()
    }
    pub fn child_path(&self, name: &str) -> PathBuf {
        self.0.child_path(name)
    }
    pub fn kind_of(&self, name: &str) -> Result<Option<Kind>> {
        Ok(self.0.kind_of(name)?)
    }
    pub fn sub(&self, name: &str) -> Result<Option<Dir>> {
        Ok(self.0.sub(name)?.map(Dir))
    }
    pub fn sub_create(&self, name: &str, mode: u32) -> Result<Dir> {
        Ok(Dir(self.0.sub_create(name, mode)?))
    }
    pub fn open_file(&self, name: &str) -> Result<Option<File>> {
        Ok(self.0.open_file(name)?)
    }
    pub fn open_file2(&self, dir: &str, name: &str) -> Result<Option<File>> {
        Ok(self.0.open_file2(dir, name)?)
    }
    pub fn read_file(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.0.read_file(name, max)?)
    }
    /// See [`hel_fs::Dir::read_file_stamped`].
    pub fn read_file_stamped(&self, name: &str, max: u64) -> Result<Option<(Vec<u8>, Stamp)>> {
        Ok(self.0.read_file_stamped(name, max)?)
    }
    /// See [`hel_fs::Dir::stamp`].
    pub fn stamp(&self, name: &str) -> Result<Option<Stamp>> {
        Ok(self.0.stamp(name)?)
    }
    pub fn replace(
        &self,
        name: &str,
        bytes: &[u8],
        mode: u32,
        tmp: &Dir,
        tmp_name: &str,
    ) -> Result<()> {
        Ok(self.0.replace(name, bytes, mode, &tmp.0, tmp_name)?)
    }
    pub fn create_new(&self, name: &str, mode: u32) -> Result<File> {
        Ok(self.0.create_new(name, mode)?)
    }
    pub fn open_rw(&self, name: &str, append: bool) -> Result<File> {
        Ok(self.0.open_rw(name, append)?)
    }
    pub fn rename_to(&self, from: &str, to: &Dir, to_name: &str) -> Result<()> {
        Ok(self.0.rename_to(from, &to.0, to_name)?)
    }
    pub fn remove_file(&self, name: &str) -> Result<bool> {
        Ok(self.0.remove_file(name)?)
    }
    pub fn remove_tree(&self, name: &str) -> Result<u64> {
        Ok(self.0.remove_tree(name)?)
    }
    pub fn entries(&self) -> Result<Vec<Entry>> {
        Ok(self.0.entries()?)
    }
    pub fn sync(&self) -> Result<()> {
        Ok(self.0.sync()?)
    }
    pub fn free_space(&self) -> Option<u64> {
        self.0.free_space()
    }
    pub fn identity(&self) -> Result<(u64, u64)> {
        Ok(self.0.identity()?)
    }
    /// See [`hel_fs::Dir::keeps_change_times`].
    pub fn keeps_change_times(&self) -> bool {
        self.0.keeps_change_times()
    }
}

/// See [`hel_fs::sync_file`].
pub(crate) fn sync_file(file: &File, path: &Path, data_only: bool) -> Result<()> {
    Ok(hel_fs::sync_file(file, path, data_only)?)
}
