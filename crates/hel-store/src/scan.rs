//! Scanning what a store holds: every distinct stored message, once.
//!
//! A search over every session reads each list node and each message blob
//! of the store one time, whatever number of checkpoints, sessions or
//! forks share it: content addressing makes "the same message" one object.
//!
//! Each object is decompressed (and verified against its id) once: the
//! records of each journal and pack are read newest first, so a list node
//! comes before the message blobs it names (a commit writes its blobs
//! before its node), and such a blob is scanned as it is read. A blob
//! that may be a message read before any node named it (a sealed pack's
//! order is gc's) is kept, within a bound, for the node; past the bound
//! it is read once more at the end.
//!
//! The files are shared out among a few threads, one per core: the
//! verification (BLAKE3) and the nodes' parse cost what a plain decode
//! does not, and a search waits on all of it.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::object::{self, Cap, Kind};
use crate::odb;
use crate::pack::Place;
use crate::{heads, ObjectId, Result, Store};

/// Records whose stored bytes are at most this long are decompressed
/// whole at once; a longer one first has its kind read from its first
/// block (less than decompressing a spill or a workspace file whole).
const DECODE_WHOLE: u64 = 64 << 10;

/// A list node as a scan reads it: exactly a node's keys, each inline
/// message's bytes borrowed, in one pass over the payload.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScanNode<'a> {
    #[allow(dead_code)]
    count: u64,
    #[serde(borrow)]
    items: Vec<ScanItem<'a>>,
    #[allow(dead_code)]
    prev: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct ScanItem<'a> {
    #[serde(borrow)]
    m: Option<&'a RawValue>,
    b: Option<ObjectId>,
}

/// The records of one journal or pack: the file, its path, and
/// (id, offset, record length) newest first.
struct Records {
    file: std::sync::Arc<File>,
    path: std::path::PathBuf,
    records: Vec<(ObjectId, u64, u64)>,
}

/// Every journal's and sealed pack's object records (an object's first
/// copy only).
fn all_records(layout: &odb::Odb) -> Result<Vec<Records>> {
    let mut files = Vec::new();
    for session in heads::list(layout)?.sessions {
        if let Some(v) = layout.index().journal(layout, &session)? {
            let v = v.read().unwrap_or_else(|p| p.into_inner());
            let records = v.objects.iter().map(|(id, (o, l))| (*id, *o, *l)).collect();
            files.push(Records {
                file: std::sync::Arc::clone(&v.file),
                path: v.path.clone(),
                records,
            });
        }
    }
    for p in layout.index().all_sealed(layout)? {
        let records = p
            .idx
            .entries
            .iter()
            .map(|e| (e.id, e.offset, e.len))
            .collect();
        files.push(Records {
            file: std::sync::Arc::clone(&p.file),
            path: p.path.clone(),
            records,
        });
    }
    // An object stored in more than one file is read from its first copy
    // in this order (journals, then packs, each newest record first),
    // whichever thread gets to which file first: so whether a damaged
    // copy is met does not depend on timing.
    let mut first = HashSet::new();
    for f in &mut files {
        f.records.sort_unstable_by_key(|r| std::cmp::Reverse(r.1));
        f.records.retain(|r| first.insert(r.0));
    }
    Ok(files)
}

/// What a scan has seen so far, shared by its threads under one lock
/// (held only to look up and note ids and to call `f`; reading,
/// decompressing, verifying and parsing happen outside it).
struct Scan<'f> {
    f: &'f mut (dyn FnMut(&[u8]) + Send),
    /// Objects read (each once).
    read: HashSet<ObjectId>,
    /// Message blobs named by the nodes read and not yet scanned.
    named: HashSet<ObjectId>,
    /// Message blobs scanned.
    scanned: HashSet<ObjectId>,
    /// Blobs read before any node named them that may be messages (they
    /// are JSON objects), kept verified in case a node read later does:
    /// at most [`PENDING_MAX`] bytes of them.
    pending: HashMap<ObjectId, Vec<u8>>,
    pending_bytes: u64,
}

/// Bytes of blobs a scan keeps for nodes it has not read yet (a sealed
/// pack's order is gc's, not the commits'); past it, such a blob is read
/// again when a node names it.
const PENDING_MAX: u64 = 64 << 20;

fn lock<'a, 'f>(state: &'a Mutex<Scan<'f>>) -> std::sync::MutexGuard<'a, Scan<'f>> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Scan<'_> {
    /// A node's items: its inline messages scanned, its blobs scanned
    /// when kept, else noted.
    fn node(&mut self, node: ScanNode<'_>) {
        for item in node.items {
            if let Some(m) = item.m {
                (self.f)(m.get().as_bytes());
            }
            if let Some(b) = item.b {
                if let Some(bytes) = self.pending.remove(&b) {
                    self.pending_bytes -= bytes.len() as u64;
                    self.scanned.insert(b);
                    (self.f)(&bytes);
                } else if !self.scanned.contains(&b) {
                    self.named.insert(b);
                }
            }
        }
    }

    /// A blob: scanned when a node named it, else kept if it may be one.
    fn blob(&mut self, id: &ObjectId, payload: Vec<u8>) {
        if self.named.remove(id) {
            self.scanned.insert(*id);
            (self.f)(&payload);
        } else if payload.first() == Some(&b'{')
            && self.pending_bytes + payload.len() as u64 <= PENDING_MAX
        {
            self.pending_bytes += payload.len() as u64;
            self.pending.insert(*id, payload);
        }
    }
}

/// One verified object: a node is parsed (outside the lock), then its
/// inline messages are scanned and its blobs noted; a blob a node named
/// is scanned.
fn object(
    state: &Mutex<Scan<'_>>,
    layout: &odb::Odb,
    id: &ObjectId,
    kind: Kind,
    payload: Vec<u8>,
) -> Result<()> {
    match kind {
        Kind::List if payload.len() as u64 > Cap::LIST.max => Err(crate::Error::TooLarge {
            id: *id,
            path: layout.object_path(id),
            size: payload.len() as u64,
            max: Cap::LIST.max,
            what: Cap::LIST.what,
        }),
        Kind::List => {
            let node: ScanNode<'_> = serde_json::from_slice(&payload)
                .map_err(|e| crate::list::malformed(layout, id, crate::list::NodeError::Json(e)))?;
            lock(state).node(node);
            Ok(())
        }
        Kind::Blob => {
            lock(state).blob(id, payload);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether stored bytes declare a kind other than a list node's (`false`
/// when no kind can be read from them).
fn not_a_node(stored: &[u8]) -> bool {
    matches!(object::peek_kind(stored), Some(kind) if kind != Kind::List)
}

/// Scan the records of `file` not read yet (by this thread or another),
/// newest first; stops early once `stop` is set (another thread failed).
fn scan_file(
    layout: &odb::Odb,
    file: &Records,
    state: &Mutex<Scan<'_>>,
    stop: &AtomicBool,
) -> Result<()> {
    let max = object::file_max(Cap::LIST).max(object::file_max(Cap::MESSAGE));
    for (id, offset, len) in &file.records {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let named = {
            let mut s = lock(state);
            if !s.read.insert(*id) {
                continue;
            }
            s.named.contains(id)
        };
        let place = Place {
            path: file.path.clone(),
            offset: *offset,
        };
        let stored_len = len.saturating_sub(crate::pack::RECORD_HEADER);
        if stored_len > max {
            continue; // larger than any node or message
        }
        let record = odb::read_found(&file.file, &place, *len, id, max)?;
        let stored = &record[crate::pack::RECORD_HEADER as usize..];
        // A long record not named as a message: its kind first, from
        // its first block alone (one whose kind cannot be read is decoded,
        // and its fault told).
        if stored_len > DECODE_WHOLE && !named && not_a_node(stored) {
            continue;
        }
        let (kind, payload) = match object::decode(id, &place.display_path(), stored, Cap::ANY) {
            Ok(decoded) => decoded,
            // What declares another kind than a node's and is not a
            // message blob named so far is no concern of a scan (were a
            // node to name it later, it is read again at the end, and its
            // fault told there). What declares no kind at all may be a
            // node: its fault is told.
            Err(_) if !lock(state).named.contains(id) && not_a_node(stored) => continue,
            Err(e) => return Err(odb::explain_damage(e.into(), &record, &place, id)),
        };
        object(state, layout, id, kind, payload)?;
    }
    Ok(())
}

/// Sets its flag when dropped by a panicking thread.
struct StopOnPanic<'a>(&'a AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// Call `f` with the canonical JSON bytes of every distinct message
/// the store holds (inline in list nodes, and message blobs), each
/// once, in no particular order: the store's files are read on a few
/// threads (one per core, [`crate::par::threads`]), and `f` is called from them
/// one call at a time. Objects are verified as they are read. On a fault
/// the scan stops and gives one (naming its file), not always the first
/// in any order.
pub fn scan_messages(store: &Store, f: &mut (dyn FnMut(&[u8]) + Send)) -> Result<()> {
    let Some(layout) = store.layout_for_gc()? else {
        return Ok(());
    };
    let files = all_records(layout)?;
    let state = Mutex::new(Scan {
        f,
        read: HashSet::new(),
        named: HashSet::new(),
        scanned: HashSet::new(),
        pending: HashMap::new(),
        pending_bytes: 0,
    });
    // Each thread takes the next file not taken: journals differ in size.
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let work = || -> Result<()> {
        // A panic in `f` (or in the scan) stops the other threads too; it
        // is passed on when they are joined.
        let _stop_on_panic = StopOnPanic(&stop);
        while let Some(file) = files.get(next.fetch_add(1, Ordering::Relaxed)) {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if let Err(e) = scan_file(layout, file, &state, &stop) {
                stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
        Ok(())
    };
    let threads = crate::par::threads().min(files.len());
    if threads <= 1 {
        work()?;
    } else {
        let workers = vec![(); threads];
        for outcome in crate::par::parts(&workers, threads, |_| work()) {
            outcome?;
        }
    }
    // Blobs read before a node named them.
    let mut scan = lock(&state);
    let rest: Vec<ObjectId> = scan.named.drain().collect();
    for b in rest {
        let bytes = crate::read::of_kind(layout, &b, Kind::Blob, Cap::MESSAGE)?;
        (scan.f)(&bytes);
    }
    Ok(())
}
