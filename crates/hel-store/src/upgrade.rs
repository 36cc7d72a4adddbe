//! The upgrade of a store an older hel wrote (format 1 to 5) to format 6
//! (objects-spec §10.1 to §10.4). Format 5 is format 4 with snapshot
//! objects and commit records that may be compressed with hel's zstd
//! dictionary, and format 6 is format 5 with snapshots of schema 3 (the
//! spill map in a blob of its own): every byte format 4 or 5 wrote is
//! valid format 6, so their upgrade (the last of the chain) only renames
//! `format`, under the same lock and lease rules as every step. It runs when this hel opens such
//! a store, before anything else reads it, and loses nothing: format 3 is
//! format 2's objects, journals, packs and names byte for byte, plus one
//! ref file per session naming the head the older format gave it; format
//! 4 is format 3 plus the records of who depends on whom
//! (`dependents.rs`), with its store lock inside the directory
//! `.store.lock`.
//!
//! The steps to format 3 are below; the upgrade to format 4 adds two. The
//! records of every session (`record_every_head`) are written, durable,
//! before the final rename, and after the `.sessions.lock` step,
//! `.store.lock`, the file format 3 locks, becomes a directory holding
//! that same file (a hard link) as `lock` and a note
//! ([`bar_format3_hels`]). Why that bars format-3 hels: every format-3
//! writer opens the file `.store.lock` before it writes and again for
//! every later write, and that open now fails ("Is a directory"). One
//! that opened the file before the swap and waits for its lock makes one
//! write once the upgrade ends, and it is still kept apart from every
//! format-4 writer because they lock the same inode; the session it may
//! publish has no `refs/recorded/` entry, so every delete reads its head.
//! A kill between the final rename and the swap leaves a store format-3
//! hels could still write: [`finish`] does the swap and writes every
//! head's records again.
//!
//! The steps to format 3:
//!
//! Under the store lock held exclusively, and refused while any session's
//! lease is held (an older hel at work would go on writing by its rules):
//!
//! 1. each session whose head is its journal's last commit record (format 2)
//!    gets its ref `refs/sessions/<uuid>` naming that head, moved as every
//!    ref moves ([`refs::publish`]: 65 bytes written under `tmp/`, synced,
//!    renamed over the ref, `refs/sessions/` synced); a ref that already
//!    names it is left alone, and a format-1 session's ref (its head
//!    already) is kept as it is;
//! 2. the stub of §12.6 is made to exist (a format-1 hel refuses the store);
//! 3. `format` is renamed to `hel-store-format 3` and `.hel/` synced (the
//!    final rename);
//! 4. `.sessions.lock`, the store lock of formats 1 and 2, becomes a
//!    directory ([`bar_older_hels`]), and `.hel/` is synced. Format 3's
//!    store lock is `.store.lock`.
//!
//! The upgrade holds both locks from before step 1 until after step 4:
//! `.store.lock` (format 3's, so no other hel of this format writes or
//! upgrades meanwhile) and then `.sessions.lock` (so no older hel is
//! between its lock and its writes). A format-3 open that finds
//! `.sessions.lock` not a directory (a kill between steps 3 and 4) does
//! step 4 under the same two locks ([`finish`]).
//!
//! Until the rename of step 3 the store is still of its old format, and
//! everything an older hel reads is as it was: a format-2 hel takes a
//! session's head from its journal whenever the journal has one, so the
//! refs of step 1 are never read by it. A kill anywhere leaves a store the
//! next open upgrades again from step 1, which is always safe (every step
//! writes what the old format already says). After the rename the store
//! is format 3: a format-2 hel refuses it before writing anything (its
//! `format` check), and a format-1 hel's readers meet the stub.
//!
//! Why step 4 keeps every older hel from writing. Every writer of formats
//! 1 and 2 opens `.sessions.lock` (`O_RDWR|O_CREAT`, no-follow) and locks
//! it before it writes anything under `.hel/` (what it creates before that,
//! the store's directories and `.gitignore`, a format-3 store already
//! has), and opens it again for every later write (each commit). Step 4
//! swaps the file for a directory with `renameat2(RENAME_EXCHANGE)`, so the
//! name is never absent: an older hel that opens it afterwards fails with
//! "Is a directory" and writes nothing. One that opened the file before
//! the swap either held its lock before the upgrade took it (the upgrade
//! waited for it to finish, in a store of the old format; if it took a
//! lease, the upgrade refuses) or is still waiting for the lock: that one
//! gets the old file's lock once the upgrade ends and makes the one write
//! it was starting (a new session's working directory, a resume's lease,
//! a format-1 delete of a ref), never a commit (a commit needs a lease,
//! which no older hel holds while the upgrade runs, and every later write
//! opens `.sessions.lock` again and fails). That window is the time
//! between the older hel's open and its lock while this upgrade holds
//! the lock; closing it would need the directory before the final rename,
//! which would stop older hels reading a store that is still theirs (a
//! format-2 hel locks it to read). Where the file system cannot swap, the
//! file is renamed away and the directory renamed in: an older hel that
//! creates the file in between is waited for (its lock taken) and the
//! step repeated.

use crate::dir::{Dir, Kind};
use crate::error::IoContext;
use crate::format::FORMAT_VERSION;
use crate::layout::{
    Layout, DIR_MODE, FORMAT, OLDER_LOCK, OLDER_LOCK_NOTE, STORE_LOCK, STORE_LOCK_FILE,
    STORE_LOCK_NOTE, STUB_SESSION,
};
use crate::lock::{Exclusive, OlderLock};
use crate::odb::Odb;
use crate::{heads, lock, refs, Error, Result, SessionId};

pub use crate::error::UpgradeError;

/// The store of the project open as `project`, if it has one, upgraded
/// to this build's format if it is older ([`run`]), an interrupted
/// upgrade finished ([`finish`]).
pub(crate) fn open(project: &Dir) -> Result<Option<Odb>> {
    let Some(layout) = Layout::open(project)? else {
        return Ok(None);
    };
    let layout = Odb::new(layout);
    let found = layout.format();
    if found < FORMAT_VERSION {
        run(&layout, found)?;
    } else {
        finish(&layout)?;
    }
    Ok(Some(layout))
}

/// Create the store of `project` (mode 0700, `.gitignore` of `*`, and
/// its subdirectories) where absent, and open it.
pub(crate) fn create(project: &Dir) -> Result<Odb> {
    let layout = Odb::new(Layout::create(project)?);
    init(&layout)?;
    Ok(layout)
}

/// Make what a store holds where absent ([`Layout::init`]), its format
/// settled by [`write_format`].
pub(crate) fn init(layout: &Odb) -> Result<()> {
    layout.init(|| write_format(layout))
}

/// Record the store's format (once), after the stub ref that makes a
/// format-1 hel refuse this store and the directory at `.sessions.lock`
/// that keeps it from writing (objects-spec §12.6). In a format-3
/// store, either found missing is made again by a process's first write
/// (fsck reports a missing stub until then).
pub(crate) fn write_format(layout: &Odb) -> Result<()> {
    if layout.root().kind_of(FORMAT)?.is_some() {
        // A store another process made meanwhile (an older hel's,
        // even) is never written by an older format's rules: it is
        // upgraded first, as an open upgrades it.
        if layout.format() < FORMAT_VERSION {
            let found = layout.check_format()?;
            if found < FORMAT_VERSION {
                run(layout, found)?;
            }
        }
        layout.ensure_stub()?;
        return finish(layout);
    }
    layout.ensure_stub()?;
    finish(layout)?;
    layout.publish_format()
}

/// Upgrade the store open as `layout`, whose `format` file said `found`
/// (1: none), to [`crate::format::FORMAT_VERSION`]. `Ok` when the store is of this
/// format now (another process may have upgraded it meanwhile); an error
/// leaves it of its old format, everything an older hel reads unchanged.
pub(crate) fn run(layout: &Odb, found: u64) -> Result<()> {
    let failed = |source: Error| -> Error {
        match source {
            Error::Upgrade(_) => source,
            source => Error::Upgrade(Box::new(UpgradeError::Failed {
                store: layout.root().path().to_owned(),
                found,
                source,
            })),
        }
    };
    let lock = Exclusive::take(layout).map_err(failed)?;
    let older = OlderLock::take(&lock).map_err(failed)?;
    // As the format file says now that no writer is at work.
    let found = layout.check_format()?;
    if found < crate::format::FORMAT_VERSION {
        upgrade(&lock, found).map_err(failed)?;
    }
    bar_older_hels(layout, older)?;
    bar_format3_hels(layout).map(|_| ())
}

/// Make sure older hels cannot write this store: the last steps of the
/// upgrade (`.sessions.lock` and `.store.lock` made directories), done
/// again here if a kill stopped the upgrade after its final rename (or,
/// for a fresh store, before its `format` file is written). Nothing is
/// written when both are directories already. When `.store.lock` was
/// still a file in a format-4 store, a format-3 hel that had the store
/// open may have committed since the kill without writing records: every
/// head's are written again before the lock is let go.
pub(crate) fn finish(layout: &Odb) -> Result<()> {
    let root = layout.root();
    if root.kind_of(OLDER_LOCK)? == Some(Kind::Dir) && layout.store_lock_dir()?.is_some() {
        return Ok(());
    }
    let lock = Exclusive::take(layout)?;
    let older = OlderLock::take(&lock)?;
    bar_older_hels(layout, older)?;
    if bar_format3_hels(layout)? && layout.records_dependents() {
        record_every_head(layout, FORMAT_VERSION)?;
    }
    drop(lock);
    Ok(())
}

/// Record every session's dependencies from its head (objects-spec
/// §10.2, step 3), under the store lock held exclusively. In a store of
/// `found` 3 or newer a head that does not read is left unrecorded (a
/// delete then reads it, and refuses while it does not read) rather than
/// refusing the whole store; in an older one it stops the upgrade, as
/// its refs step would.
fn record_every_head(layout: &Odb, found: u64) -> Result<()> {
    let mut with_deps = Vec::new();
    for session in heads::list(layout)?.sessions {
        match heads::read(layout, &session) {
            Ok(Some(head)) => with_deps.push((session, head.deps())),
            Ok(None) | Err(Error::BadRef { .. }) => {}
            Err(_) if found >= 3 => {}
            Err(e) => return Err(e),
        }
    }
    crate::dependents::record_all(layout, &with_deps)
}

/// Make `.store.lock`, the file format 3 locks, a directory holding that
/// file's inode as `lock` (format 4's store lock) and a note, and sync
/// `.hel/`; the caller holds the store lock exclusively (see the module
/// doc for why this keeps format-3 hels from writing and why a hel that
/// was waiting for the file is still excluded). True when it made the
/// directory; nothing is written when it is one already.
fn bar_format3_hels(layout: &Odb) -> Result<bool> {
    let root = layout.root();
    if layout.store_lock_dir()?.is_some() {
        root.sync()?;
        return Ok(false);
    }
    let tmp = layout.tmp_create()?;
    let dir = format!("store-lock-{}", uuid::Uuid::new_v4().simple());
    let d = make_note_dir(tmp, &dir, STORE_LOCK_NOTE, STORE_LOCK_NOTE_TEXT)?;
    // The file the caller locked, kept as the directory's `lock` from
    // here to the end whatever else happens at the name.
    let kept = match root.kind_of(STORE_LOCK)? {
        Some(Kind::File) => root
            .link_to(STORE_LOCK, &d, STORE_LOCK_FILE)
            .unwrap_or(false),
        _ => false,
    };
    if !kept {
        // No file to keep, or a file system without hard links: a hel
        // waiting for the old file takes the lock again (lock.rs).
        d.create_new(STORE_LOCK_FILE, 0o600)?;
    }
    d.sync()?;
    let lock_ino = d.stamp(STORE_LOCK_FILE)?.map(|s| s.0[0]);
    // Files made at `.store.lock` between two renames (no swap), locked
    // until the directory stands: their takers have finished.
    let mut waited: Vec<std::fs::File> = Vec::new();
    for _ in 0..BAR_ATTEMPTS {
        match root.kind_of(STORE_LOCK)? {
            Some(Kind::Dir) => break,
            Some(_) => {
                if !crate::failpoint::hit("store-lock-no-exchange")
                    && tmp.exchange(&dir, root, STORE_LOCK)?
                {
                    // `dir` in tmp/ is the old name of the lock file now.
                    tmp.remove_tree(&dir)?;
                    root.sync()?;
                    return Ok(true);
                }
                // Without a swap: the file goes first. One a hel made
                // since is waited for (its lock taken) and goes too; the
                // one kept in the directory stays the lock.
                if root.stamp(STORE_LOCK)?.map(|s| s.0[0]) != lock_ino {
                    let file = root.open_rw(STORE_LOCK, false)?;
                    file.lock().at(root.child_path(STORE_LOCK))?;
                    waited.push(file);
                }
                let away = format!("store-lock-{}", uuid::Uuid::new_v4().simple());
                root.rename_to(STORE_LOCK, tmp, &away)?;
                tmp.remove_tree(&away)?;
            }
            None => {}
        }
        match tmp.rename_to(&dir, root, STORE_LOCK) {
            Ok(()) => {
                root.sync()?;
                return Ok(true);
            }
            // A hel made the file again meanwhile: next try.
            Err(_) if root.kind_of(STORE_LOCK)?.is_some() => {}
            Err(e) => return Err(e.into()),
        }
    }
    if root.kind_of(STORE_LOCK)? == Some(Kind::Dir) {
        tmp.remove_tree(&dir)?;
        root.sync()?;
        return Ok(false);
    }
    Err(Error::Io {
        path: root.child_path(STORE_LOCK),
        source: std::io::Error::other(
            "another hel keeps making it a file again; end the other hel and run this command again",
        ),
    })
}

/// How often [`bar_older_hels`] tries again when, without a swap, an older
/// hel made `.sessions.lock` a file again between its two renames.
const BAR_ATTEMPTS: usize = 8;

/// Replace `.sessions.lock` (held exclusively as `older`, or absent) by a
/// directory holding a note, and sync `.hel/` (see the module doc for why
/// this keeps older hels from writing).
fn bar_older_hels(layout: &Odb, mut older: OlderLock) -> Result<()> {
    let root = layout.root();
    let tmp = layout.tmp_create()?;
    let dir = format!("older-lock-{}", uuid::Uuid::new_v4().simple());
    for _ in 0..BAR_ATTEMPTS {
        match root.kind_of(OLDER_LOCK)? {
            Some(Kind::Dir) => {
                tmp.remove_tree(&dir)?;
                return Ok(root.sync()?);
            }
            Some(Kind::File) if older.file.is_none() => {
                // Made again by an older hel since the last attempt: wait
                // until it has done the write it took the lock for.
                let file = root.open_rw(OLDER_LOCK, false)?;
                file.lock().at(root.child_path(OLDER_LOCK))?;
                older.file = Some(file);
                continue;
            }
            _ => {}
        }
        if tmp.kind_of(&dir)?.is_none() {
            make_note_dir(tmp, &dir, OLDER_LOCK_NOTE, OLDER_LOCK_NOTE_TEXT)?;
        }
        let swapped = match root.kind_of(OLDER_LOCK)? {
            // The failpoint plays a file system that cannot swap.
            Some(_) if !crate::failpoint::hit("older-lock-no-exchange") => {
                tmp.exchange(&dir, root, OLDER_LOCK)?
            }
            _ => false,
        };
        if swapped {
            // `dir` in tmp/ is the old lock file now.
            tmp.remove_tree(&dir)?;
            return Ok(root.sync()?);
        }
        if root.kind_of(OLDER_LOCK)?.is_some() {
            let away = format!("older-lock-{}", uuid::Uuid::new_v4().simple());
            root.rename_to(OLDER_LOCK, tmp, &away)?;
            tmp.remove_tree(&away)?;
        }
        older.file = None;
        match tmp.rename_to(&dir, root, OLDER_LOCK) {
            Ok(()) => return Ok(root.sync()?),
            // An older hel made the file again meanwhile: next try.
            Err(_) if root.kind_of(OLDER_LOCK)?.is_some() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Io {
        path: root.child_path(OLDER_LOCK),
        source: std::io::Error::other(
            "an older hel keeps making it a file again; end the older hel and run this command again",
        ),
    })
}

/// A directory that stands at a lock's name, made under `tmp/` as
/// `name`, with a note (`note`, saying `text`) on why.
fn make_note_dir(tmp: &crate::dir::Dir, name: &str, note: &str, text: &str) -> Result<Dir> {
    use std::io::Write;
    let d = tmp.sub_create(name, DIR_MODE)?;
    let mut f = d.create_new(note, 0o600)?;
    f.write_all(text.as_bytes()).map_err(|source| Error::Io {
        path: d.child_path(note),
        source,
    })?;
    Ok(d)
}

/// What `.sessions.lock/README` says (objects-spec §12.6).
pub(crate) const OLDER_LOCK_NOTE_TEXT: &str = "This store has format 3 or newer. Formats 1 and 2 kept their store lock in a file here; it is a directory so that a hel too old for this store fails before writing anything: upgrade hel.\n";

/// What `.store.lock/README` says (objects-spec §12.6).
pub(crate) const STORE_LOCK_NOTE_TEXT: &str = "This store has format 4 or newer. Format 3 locked a file here; formats 4 and newer lock the file `lock` in this directory (the same file), so that a format-3 hel fails before writing anything: upgrade hel.\n";

fn upgrade(lock: &Exclusive<'_, Odb>, found: u64) -> Result<()> {
    let layout = lock.layout;
    refuse_if_busy(layout, found)?;
    crate::failpoint::kill("upgrade-locked");
    // A format-3 store has its refs: its upgrade only adds records.
    let sessions = if found < 3 {
        heads::list(layout)?.sessions
    } else {
        Vec::new()
    };
    for session in sessions {
        // The head by the old format's rule (a journal's fault is the
        // error: never a ref to an older head, never no ref).
        let head = match heads::read(layout, &session) {
            Ok(Some(head)) => head,
            Ok(None) => continue,
            // A format-1 session's ref that is not a ref is kept as it is:
            // the new format reads it as the old one did (a fault naming it).
            Err(Error::BadRef { .. }) => continue,
            Err(e) => return Err(e),
        };
        // A head that is not a journal's is the session's ref already.
        let current = refs::read(layout, &session)?;
        if head.commit.is_none() || current == Some(head.id) {
            continue;
        }
        // The one way refs move (tmp/, sync, rename, directory sync; no
        // lease is needed: no one holds one, and the exclusive lock keeps
        // it so). The move must be durable before `format` says 3.
        if let Some(e) = refs::publish(layout, &session, current, head.id)? {
            return Err(e);
        }
        crate::failpoint::kill("upgrade-ref");
    }
    crate::failpoint::kill("upgrade-refs");
    // Format 4: every session's dependencies recorded (dependents.rs),
    // durable before `format` says 4 or newer. Written again from the
    // heads by an upgrade redone after a kill; a format-3 hel that writes
    // meanwhile reads nothing of them. A format-4 or 5 store has them:
    // formats 5 and 6 only add ways to write new objects (frames
    // compressed with hel's dictionary, schema-3 snapshots), which
    // nothing already stored needs to become (objects-spec §10.3, §10.4).
    if found < 4 {
        record_every_head(layout, found)?;
    }
    crate::failpoint::kill("upgrade-dependents");
    layout.ensure_stub()?;
    crate::failpoint::kill("upgrade-stub");
    layout.publish_format()
}

/// `Err` naming the first session whose lease is held.
fn refuse_if_busy(layout: &Odb, found: u64) -> Result<()> {
    let Some(dir) = layout.sessions()? else {
        return Ok(());
    };
    for e in dir.entries()? {
        let Some(Ok(session)) = e.name.to_str().map(str::parse::<SessionId>) else {
            continue;
        };
        if session.as_str() != STUB_SESSION && lock::is_busy(layout, &session)? {
            return Err(Error::Upgrade(Box::new(UpgradeError::Busy {
                store: layout.root().path().to_owned(),
                found,
                holder: lock::holder_of(layout, &session),
                session,
            })));
        }
    }
    Ok(())
}
