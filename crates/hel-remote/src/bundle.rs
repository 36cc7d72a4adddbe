//! Bundles: one self-contained file holding a session's objects and its
//! ref, for mail, attachments and air-gapped machines (objects-spec §12.8).
//!
//! ```text
//! "HELBNDL\0" | version u32 LE (1) | manifest length u32 LE | manifest (JSON) | pack
//! ```
//!
//! The manifest is a remote ref (§15.2) whose `packs` holds the one
//! pack's BLAKE3 (hex); the pack is a sealed pack of everything the head
//! reaches. Importing verifies every record and object of the pack (a
//! tampered one is named by id and offset) and the pack's hash before any
//! object is written, and everything the head reaches before any session
//! is added.

use std::path::Path;

use hel_store::transfer::Adopted;
use hel_store::{json, SessionId, Store};

use crate::error::{RemoteError, Result};
use crate::remote::{RemoteRef, PACK_MAX, REF_FORMAT, REF_MAX};

const MAGIC: &[u8; 8] = b"HELBNDL\0";
const VERSION: u32 = 1;

fn bad(path: &Path, reason: impl Into<String>) -> RemoteError {
    RemoteError::Hostile {
        remote: "bundle".into(),
        key: path.display().to_string(),
        reason: reason.into(),
    }
}

fn io(path: &Path, source: std::io::Error) -> RemoteError {
    RemoteError::Io {
        remote: "bundle".into(),
        what: path.display().to_string(),
        source,
    }
}

/// Write `session`'s bundle to `path` (written aside, synced, renamed over
/// it, the directory synced: [`hel_fs::Dir::replace`]). Returns its size.
pub fn export(store: &Store, session: &SessionId, path: &Path) -> Result<u64> {
    let head = store.head(session)?;
    let pack = hel_store::transfer::pack_between(store, &head, None)?;
    let cp = store.checkpoint(&head)?;
    let manifest = RemoteRef {
        format: REF_FORMAT.into(),
        session: session.clone(),
        head,
        packs: vec![blake3::hash(&pack.bytes).to_hex().to_string()],
        summary: cp.summary,
        updated_ms: cp.created_at_ms,
    };
    let m = serde_json::to_vec(&manifest).unwrap_or_default();
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&(m.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&m);
    bytes.extend_from_slice(&pack.bytes);
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = format!(".hel-bundle-{}", uuid::Uuid::new_v4().simple());
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| bad(path, "not a file name"))?;
    let dir = hel_fs::Dir::open_path(dir).map_err(|e| io(path, e.into()))?;
    dir.replace(name, &bytes, 0o666, &dir, &tmp)
        .map_err(|e| io(path, e.into()))?;
    Ok(bytes.len() as u64)
}

/// Import the bundle at `path` (see the module doc for what is verified
/// first). Returns the session and what came of it.
pub fn import(store: &Store, path: &Path) -> Result<(SessionId, Adopted)> {
    // Not through a link, never blocking on a FIFO, bounded.
    let file = match hel_fs::at::open_read_path(path) {
        Ok(fd) => std::fs::File::from(fd),
        Err(rustix::io::Errno::LOOP) => return Err(bad(path, "not a regular file")),
        Err(e) => return Err(io(path, e.into())),
    };
    let meta = file.metadata().map_err(|e| io(path, e))?;
    if !meta.is_file() {
        return Err(bad(path, "not a regular file"));
    }
    let max = 16 + REF_MAX + PACK_MAX;
    let bytes = match hel_fs::read_bounded(&file, max, path) {
        Ok(b) => b,
        Err(hel_fs::Error::TooLarge { size, .. }) => {
            return Err(bad(
                path,
                format!("{size} bytes, over the {max} a bundle may have"),
            ))
        }
        Err(hel_fs::Error::Io { source, .. }) => return Err(io(path, source)),
        Err(e) => return Err(bad(path, e.to_string())),
    };
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(bad(path, "not a hel bundle"));
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != VERSION {
        return Err(bad(
            path,
            format!("a bundle of version {version}: upgrade hel"),
        ));
    }
    let mlen = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) as usize;
    if mlen as u64 > REF_MAX || 16 + mlen > bytes.len() {
        return Err(bad(path, "its manifest length is out of bounds"));
    }
    let manifest: RemoteRef = json::from_slice(&bytes[16..16 + mlen], json::Limits::MESSAGE)
        .map_err(|e| bad(path, format!("its manifest is not a hel manifest: {e}")))?;
    if manifest.format != REF_FORMAT || manifest.packs.len() != 1 {
        return Err(bad(path, "its manifest is not a hel manifest of one pack"));
    }
    let pack = &bytes[16 + mlen..];
    // Every record first: a tampered object is named by id and offset.
    let received = hel_store::transfer::receive_pack(pack, path)?;
    if blake3::hash(pack).to_hex().as_str() != manifest.packs[0] {
        return Err(bad(
            path,
            "its pack does not hash to what its manifest says (tampered or truncated)",
        ));
    }
    let adopted =
        hel_store::transfer::adopt(store, &manifest.session, &manifest.head, &[received])?;
    let from = match &adopted {
        hel_store::transfer::Adopted::New => Some(None),
        hel_store::transfer::Adopted::FastForward { from } => Some(Some(*from)),
        _ => None,
    };
    if let Some(from) = from {
        let kind = hel_store::oplog::Kind::Import;
        hel_store::oplog::record_adopted(store, kind, &manifest.session, from, manifest.head)?;
    }
    Ok((manifest.session, adopted))
}
