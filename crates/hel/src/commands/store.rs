//! `hel gc` and `hel fsck`.

use hel_store::Store;

use super::report::{project, say};
use crate::exit::Exit;
use crate::render::count;

pub fn gc(dry_run: bool, repack: bool) -> Result<u8, Exit> {
    let store = Store::open(&project()?)?;
    let retention = crate::config::retention()?;
    let r = if repack {
        super::sessions::collect(&store, &retention, false)?;
        hel_store::gc::repack(&store)?
    } else {
        super::sessions::collect(&store, &retention, dry_run)?
    };
    let verb = if dry_run {
        "would reclaim"
    } else {
        "reclaimed"
    };
    say!(
        "{verb} {} ({}), {}, {}, {}; {} kept",
        count(r.objects_removed, "object", "objects"),
        count(r.bytes_removed, "byte", "bytes"),
        count(r.tmp_files_removed, "temporary file", "temporary files"),
        count(
            r.sessions_removed.len() as u64,
            "abandoned session",
            "abandoned sessions"
        ),
        count(
            r.spill_dirs_removed,
            "spill working copy",
            "spill working copies"
        ),
        count(r.objects_kept, "object", "objects")
    );
    if r.packs_written > 0 || r.journals_removed > 0 {
        say!(
            "wrote {}; removed {} of deleted sessions",
            count(r.packs_written, "pack", "packs"),
            count(r.journals_removed, "journal", "journals")
        );
    }
    if let Some(line) = super::sessions::trash_line(&store) {
        say!("{}", line.trim_start_matches("hel: "));
    }
    Ok(0)
}

pub fn fsck() -> Result<u8, Exit> {
    let dir = project()?;
    let store = Store::open(&dir)?;
    if !store.exists() {
        // Nothing to check, and nothing wrong with nothing.
        say!(
            "no store here: {} does not exist, so there is nothing to check",
            dir.join(".hel").display()
        );
        return Ok(0);
    }
    let r = hel_store::fsck::fsck(&store)?;
    say!(
        "checked {} ({}) and {}",
        count(r.objects, "object", "objects"),
        count(r.bytes, "byte", "bytes"),
        count(r.refs, "ref", "refs")
    );
    for fault in &r.faults {
        say!("fault: {fault}");
    }
    for note in &r.notes {
        say!("note: {note}");
    }
    match r.unreachable {
        Some(n) => say!(
            "garbage: {}, {} (not faults; `hel gc` reclaims them)",
            count(n, "unreachable object", "unreachable objects"),
            count(r.tmp_files, "temporary file", "temporary files")
        ),
        None => say!("garbage: not counted while the store has faults (`hel gc` refuses until they are fixed)"),
    }
    if r.is_sound() {
        say!("store is sound");
        Ok(0)
    } else {
        say!(
            "store has {}",
            count(r.faults.len() as u64, "fault", "faults")
        );
        Ok(1)
    }
}
