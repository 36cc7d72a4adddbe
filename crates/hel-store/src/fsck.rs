//! `fsck`: verify every object and everything the refs reach.

use std::collections::HashSet;
use std::fs;
use std::path::PathBuf;

use crate::gc::{mark, object_files};
use crate::{object, refs, Error, ObjectId, Result, Store};

/// What fsck found. Faults are `corrupt`, `missing` and `bad_refs`;
/// garbage (unreachable objects, leftover tmp files) is reported, not a fault.
#[derive(Debug, Default)]
pub struct FsckReport {
    pub objects: u64,
    pub bytes: u64,
    pub refs: u64,
    /// Objects that fail verification (or files under objects/ that are not
    /// named like objects), as one-line descriptions.
    pub corrupt: Vec<String>,
    /// Reachable objects that do not exist.
    pub missing: Vec<String>,
    pub bad_refs: Vec<String>,
    pub unreachable: u64,
    pub tmp_files: u64,
}

impl FsckReport {
    /// True when the store has no fault.
    pub fn is_sound(&self) -> bool {
        self.corrupt.is_empty() && self.missing.is_empty() && self.bad_refs.is_empty()
    }
}

impl Store {
    /// Check the whole store.
    pub fn fsck(&self) -> Result<FsckReport> {
        let mut report = FsckReport::default();
        if !self.exists() {
            return Ok(report);
        }
        let layout = self.layout();
        let mut present: HashSet<ObjectId> = HashSet::new();
        let mut broken: HashSet<ObjectId> = HashSet::new();
        for (path, id) in object_files(layout)? {
            report.objects += 1;
            report.bytes += fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let Some(id) = id else {
                report
                    .corrupt
                    .push(format!("{}: not named like an object", path.display()));
                continue;
            };
            present.insert(id);
            if let Err(e) = object::read(layout, &id) {
                report.corrupt.push(e.to_string());
                broken.insert(id);
            }
        }
        let mut roots = Vec::new();
        for session in refs::list(layout)? {
            report.refs += 1;
            match refs::read(layout, &session) {
                Ok(Some(head)) => roots.push(head),
                Ok(None) => {}
                Err(e) => report.bad_refs.push(e.to_string()),
            }
        }
        let mut missing: Vec<(ObjectId, PathBuf)> = Vec::new();
        let reachable = mark(layout, &roots, &mut |e| {
            if let Error::Missing { id, path } = e {
                missing.push((id, path));
            }
            // Corrupt objects were reported by the verification above.
            Ok(())
        })?;
        for id in &reachable {
            if !present.contains(id) && !missing.iter().any(|(m, _)| m == id) {
                missing.push((*id, layout.object_path(id)));
            }
        }
        missing.sort();
        report.missing = missing
            .into_iter()
            .map(|(id, path)| format!("object {id} is missing (expected at {})", path.display()))
            .collect();
        report.unreachable = present.iter().filter(|id| !reachable.contains(id)).count() as u64;
        report.tmp_files = fs::read_dir(layout.tmp_dir()).map_or(0, |d| d.count() as u64);
        Ok(report)
    }
}
