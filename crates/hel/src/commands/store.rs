//! `hel gc` and `hel fsck`.

use hel_store::{Store, UpgradeError};

use super::report::{project, say};
use crate::exit::Exit;

pub fn gc(dry_run: bool, repack: bool) -> Result<u8, Exit> {
    let store = Store::open(&project()?)?;
    let r = if repack {
        store.repack()?
    } else {
        store.gc(dry_run)?
    };
    let verb = if dry_run {
        "would reclaim"
    } else {
        "reclaimed"
    };
    say!(
        "{verb} {} objects ({} bytes), {} temporary files, {} abandoned sessions, {} spill working copies; {} objects kept",
        r.objects_removed,
        r.bytes_removed,
        r.tmp_files_removed,
        r.sessions_removed.len(),
        r.spill_dirs_removed,
        r.objects_kept
    );
    if r.packs_written > 0 || r.journals_removed > 0 {
        say!(
            "wrote {} pack(s); removed {} journal(s) of deleted sessions",
            r.packs_written,
            r.journals_removed
        );
    }
    Ok(0)
}

pub fn fsck() -> Result<u8, Exit> {
    let dir = project()?;
    let store = match Store::open(&dir) {
        Ok(store) => store,
        // A store the upgrade refused is checked as it is, by its own
        // format's rules: the refusal sends the user here.
        Err(hel_store::Error::Upgrade(why)) => {
            let store = Store::open_in_place(&dir)?;
            let found = store.format();
            match *why {
                UpgradeError::Busy { session, .. } => say!(
                    "note: this store of format {found} is not upgraded while session {session} is in use; checked in place by format {found}'s rules"
                ),
                UpgradeError::Failed { .. } => say!(
                    "note: this store of format {found} cannot be upgraded to format 3 until its faults are fixed; checked in place by format {found}'s rules"
                ),
            }
            store
        }
        Err(e) => return Err(e.into()),
    };
    let r = store.fsck()?;
    say!(
        "checked {} objects ({} bytes) and {} refs",
        r.objects,
        r.bytes,
        r.refs
    );
    for fault in &r.faults {
        say!("fault: {fault}");
    }
    for note in &r.notes {
        say!("note: {note}");
    }
    match r.unreachable {
        Some(n) => say!(
            "garbage: {n} unreachable objects, {} temporary files (not faults; `hel gc` reclaims them)",
            r.tmp_files
        ),
        None => say!("garbage: not counted while the store has faults (`hel gc` refuses until they are fixed)"),
    }
    if r.is_sound() {
        say!("store is sound");
        Ok(0)
    } else {
        say!("store has {} faults", r.faults.len());
        Ok(1)
    }
}
