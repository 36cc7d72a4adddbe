//! Whose a store's sessions are (objects-spec §1.4): made here, or
//! arrived from elsewhere with a clone, a copy or a move, and then
//! *shipped*: listed and readable, never chosen when no session is named,
//! never pushed unless named, never written into the project's files by
//! undo or restore. The file and its rules are `place.rs`; this is what
//! callers ask of a [`Store`].

use crate::{Result, SessionId, Store};

pub use crate::place::{Origin, Why};

/// Whose `store`'s sessions are (a project without a store: its own).
pub fn origin(store: &Store) -> Result<Origin> {
    match store.layout()? {
        Some(layout) => crate::place::origin_of(layout, store.project_dir()),
        None => Ok(Origin::Here {
            shipped: Default::default(),
        }),
    }
}

/// Make sessions of `store` its own: those of `only`, or every one; a
/// store not made here becomes this directory's (`hel sessions adopt`).
/// Gives how many sessions were shipped and are now its own.
pub fn adopt(store: &Store, only: Option<&[SessionId]>) -> Result<usize> {
    let Some(layout) = store.layout()? else {
        return Ok(0);
    };
    let before = crate::place::origin_of(layout, store.project_dir())?;
    let adopted = crate::place::adopt(layout, store.project_dir(), only)?;
    // The operation log: each session that became the project's own.
    let after = crate::place::origin_of(layout, store.project_dir())?;
    let changes: Vec<crate::oplog::Change> = store
        .session_ids(layout)?
        .iter()
        .filter(|s| !before.owns(s) && after.owns(s))
        .map(|s| crate::oplog::Change::of(s).own(false, true))
        .collect();
    if !changes.is_empty() {
        let note = format!("made {} session(s) this project's own", changes.len());
        crate::oplog::record(store, crate::oplog::Kind::Relocate, changes, &note)?;
    }
    Ok(adopted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::IDENTITY;
    use crate::place::{FILE_MAX, SHIPPED_MAX};
    use std::collections::BTreeSet;
    use std::path::Path;

    /// A store made in a new project directory, and that directory.
    fn made() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        drop(store.new_session().unwrap());
        (dir, store)
    }

    fn here(store: &Store) -> Origin {
        origin(&Store::open(store.project_path()).unwrap()).unwrap()
    }

    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let dest = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_tree(&e.path(), &dest);
            } else {
                std::fs::copy(e.path(), &dest).unwrap();
            }
        }
    }

    /// A session's ref file, planted (what `all_sessions` counts).
    fn plant_session(root: &Path) -> SessionId {
        let id = SessionId::new_random();
        std::fs::write(root.join("refs/sessions").join(id.as_str()), b"").unwrap();
        id
    }

    #[test]
    fn a_store_made_here_is_here_and_a_copy_or_a_move_is_not() {
        let (dir, store) = made();
        let root = dir.path().join(".hel");
        let text = std::fs::read_to_string(root.join(IDENTITY)).unwrap();
        assert!(text.starts_with("{\"born\":") && text.ends_with("\"version\":1}\n"));
        assert_eq!(
            here(&store),
            Origin::Here {
                shipped: BTreeSet::new()
            }
        );
        // The same bytes in another project: made elsewhere.
        let other = tempfile::tempdir().unwrap();
        copy_tree(&root, &other.path().join(".hel"));
        let copy = Store::open(other.path()).unwrap();
        assert_eq!(origin(&copy).unwrap(), Origin::Elsewhere(Why::Elsewhere));
        // The store directory moved into another project: the same.
        let moved = tempfile::tempdir().unwrap();
        std::fs::rename(&root, moved.path().join(".hel")).unwrap();
        let there = Store::open(moved.path()).unwrap();
        assert_eq!(origin(&there).unwrap(), Origin::Elsewhere(Why::Elsewhere));
        // The whole project moved (renamed): still its own.
        let renamed = dir.path().with_extension("renamed");
        std::fs::rename(moved.path().join(".hel"), &root).unwrap();
        std::fs::rename(dir.path(), &renamed).unwrap();
        let own = Store::open(&renamed).unwrap();
        assert!(origin(&own).unwrap().is_here());
        std::fs::rename(&renamed, dir.path()).unwrap();
    }

    #[test]
    fn a_hostile_identity_file_makes_a_store_from_elsewhere_never_an_error() {
        let (dir, store) = made();
        let root = dir.path().join(".hel");
        let good = std::fs::read(root.join(IDENTITY)).unwrap();
        let text = String::from_utf8(good.clone()).unwrap();
        let set = |bytes: &[u8]| {
            let _ = std::fs::remove_file(root.join(IDENTITY));
            std::fs::write(root.join(IDENTITY), bytes).unwrap();
        };
        let unreadable =
            |store: &Store| matches!(here(store), Origin::Elsewhere(Why::Unreadable(_)));
        // A repeated key (another reader could take the other value).
        set(text.replacen("{", "{\"version\":1,", 1).as_bytes());
        assert!(unreadable(&store));
        // Unknown fields, another version, a bad id.
        set(text.replacen("{", "{\"x\":1,", 1).as_bytes());
        assert!(unreadable(&store));
        set(text.replace("\"version\":1", "\"version\":2").as_bytes());
        assert!(unreadable(&store));
        // Past the parse's bound: more shipped ids than any take-over names.
        let ids = format!("\"{}\",", SessionId::new_random()).repeat(SHIPPED_MAX + 1);
        set(text
            .replace(
                "\"shipped\":[]",
                &format!("\"shipped\":[{}]", ids.trim_end_matches(',')),
            )
            .as_bytes());
        assert!(unreadable(&store));
        // Past the read's bound, refused before it is read.
        set(&vec![b' '; FILE_MAX as usize + 1]);
        assert!(unreadable(&store));
        // Garbage, and nesting past the depth.
        set(&b"[".repeat(10_000));
        assert!(unreadable(&store));
        // A link to the good file, and a FIFO (never blocks).
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("id"), &good).unwrap();
        std::fs::remove_file(root.join(IDENTITY)).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("id"), root.join(IDENTITY)).unwrap();
        assert!(unreadable(&store));
        std::fs::remove_file(root.join(IDENTITY)).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join(IDENTITY),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(unreadable(&store));
        // A forged birth time (or none, where the file system keeps one).
        let mut forged: serde_json::Value = serde_json::from_str(&text).unwrap();
        let kept = forged["born"].clone();
        forged["born"] = serde_json::json!([1, 2]);
        set(&serde_json::to_vec(&forged).unwrap());
        assert_eq!(here(&store), Origin::Elsewhere(Why::Elsewhere));
        if !kept.is_null() {
            forged["born"] = serde_json::Value::Null;
            set(&serde_json::to_vec(&forged).unwrap());
            assert_eq!(here(&store), Origin::Elsewhere(Why::Elsewhere));
        }
        // Gone: from elsewhere.
        std::fs::remove_file(root.join(IDENTITY)).unwrap();
        assert_eq!(here(&store), Origin::Elsewhere(Why::Missing));
        // The good file again: made here.
        set(&good);
        assert!(here(&store).is_here());
    }

    #[test]
    fn a_new_session_takes_over_a_store_from_elsewhere_and_adopt_makes_its_sessions_own() {
        let (dir, _) = made();
        let other = tempfile::tempdir().unwrap();
        let root = other.path().join(".hel");
        copy_tree(&dir.path().join(".hel"), &root);
        let (a, b) = (plant_session(&root), plant_session(&root));
        let store = Store::open(other.path()).unwrap();
        assert!(!origin(&store).unwrap().owns(&a));
        // A new session: the store is taken over, what it held shipped.
        let lease = store.new_session().unwrap();
        let now = origin(&store).unwrap();
        assert!(now.owns(lease.session()) && !now.owns(&a) && !now.owns(&b));
        // (and the working directory of the session made where it came from)
        assert!(matches!(&now, Origin::Here { shipped } if shipped.len() == 3));
        drop(lease);
        // Adopting one leaves the other shipped; adopting all, none.
        assert_eq!(adopt(&store, Some(std::slice::from_ref(&a))).unwrap(), 1);
        let now = origin(&store).unwrap();
        assert!(now.owns(&a) && !now.owns(&b));
        assert_eq!(adopt(&store, None).unwrap(), 2);
        assert!(origin(&store).unwrap().owns(&b));
        assert_eq!(adopt(&store, None).unwrap(), 0);
        // Nothing was left under tmp/.
        assert_eq!(std::fs::read_dir(root.join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn a_store_without_a_format_file_that_holds_sessions_gets_no_identity() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(".hel");
        std::fs::create_dir_all(root.join("refs/sessions")).unwrap();
        plant_session(&root);
        // Refused (objects-spec §1.2): never completed, and no identity
        // written into it.
        let e = Store::open(dir.path()).map(|_| ()).unwrap_err();
        assert!(matches!(e, crate::Error::FormatMissing { .. }), "{e:?}");
        assert!(!root.join("identity").exists());
        assert!(!root.join("format").exists());
    }
}
