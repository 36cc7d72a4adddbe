//! Property tests: the decoders of untrusted bytes (object files, list
//! nodes, snapshots, refs) on random and on mutated valid inputs never
//! panic, and never allocate more than a bound set by the input and the
//! cap (a counting allocator measures every case).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use hel_store::{canonical, parse, testing, Cap, ObjectId};
use proptest::prelude::*;
use serde_json::json;

/// Counts live and peak bytes allocated by each thread (tests run in
/// parallel threads; a property runs its cases one at a time).
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only adds bookkeeping in
// const-initialized thread-locals (which never allocate).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let _ = LIVE.try_with(|l| {
                l.set(l.get() + layout.size() as isize);
                let _ = PEAK.try_with(|p| p.set(p.get().max(l.get())));
            });
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        let _ = LIVE.try_with(|l| l.set(l.get() - layout.size() as isize));
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Bytes this thread allocated at the peak of `f`, above what was live before.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    (out, (PEAK.with(Cell::get) - base).max(0) as usize)
}

const SMALL: Cap = Cap {
    max: 1 << 20,
    what: "test object",
};

fn node_payload() -> Vec<u8> {
    canonical::to_vec(&json!({
        "count": 3,
        "items": [
            {"m": {"role": "system", "content": "s"}},
            {"b": ObjectId::of_canonical(b"x").to_hex()},
            {"s": ObjectId::of_canonical(b"y").to_hex(), "from": 0, "to": 1},
        ],
        "prev": ObjectId::of_canonical(b"z").to_hex(),
    }))
}

fn snapshot_payload() -> Vec<u8> {
    let id = ObjectId::of_canonical(b"c").to_hex();
    canonical::to_vec(&json!({
        "schema_version": 3,
        "session_id": "0c9e6f1a-1b2c-4d3e-8f40-123456789abc",
        "parents": [],
        "created_at": "1970-01-01T00:00:00.001Z",
        "created_at_ms": 1u64,
        "cwd": "/p",
        "request_config": id,
        "meter": null,
        "cursors": id,
        "messages": {"root": id, "count": 2},
        "spill": id,
        "record": "answer",
        "summary": {"messages": 2, "checkpoints": 1, "instruction": "i", "input_tokens": 0, "output_tokens": 0},
    }))
}

/// Random edits of `base`: byte flips, insertions, deletions, truncation.
fn mutated(base: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = base.len();
    prop::collection::vec((0..4u8, 0..len.max(1), any::<u8>()), 1..8).prop_map(move |edits| {
        let mut b = base.clone();
        for (op, at, byte) in edits {
            let at = at.min(b.len());
            match op {
                0 if at < b.len() => b[at] ^= byte | 1,
                1 => b.insert(at, byte),
                2 if at < b.len() => {
                    b.remove(at);
                }
                _ => b.truncate(at),
            }
        }
        b
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn object_files_of_random_bytes(data in prop::collection::vec(any::<u8>(), 0..4096)) {
        let id = ObjectId::of_canonical(&data);
        let (ok, peak) = peak_of(|| parse::object(&id, &data, SMALL));
        prop_assert!(!ok);
        prop_assert!(peak <= 2 * SMALL.max as usize + (64 << 10), "peak {peak}");
    }

    #[test]
    fn mutated_object_files(data in mutated(zstd::bulk::compress(&testing::encode("list", &node_payload()).1, 3).unwrap())) {
        let (id, _) = testing::encode("list", &node_payload());
        let (_, peak) = peak_of(|| parse::object(&id, &data, SMALL));
        prop_assert!(peak <= 2 * SMALL.max as usize + (64 << 10), "peak {peak}");
    }

    #[test]
    fn object_files_declaring_huge_lengths(len in 0u64..u64::MAX, tail in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut canonical = format!("blob {len}\0").into_bytes();
        canonical.extend(&tail);
        let data = zstd::bulk::compress(&canonical, 1).unwrap();
        let id = ObjectId::of_canonical(&canonical);
        let (_, peak) = peak_of(|| parse::object(&id, &data, SMALL));
        prop_assert!(peak <= 2 * SMALL.max as usize + (64 << 10), "peak {peak}");
    }

    #[test]
    fn list_nodes(data in prop_oneof![prop::collection::vec(any::<u8>(), 0..2048), mutated(node_payload())]) {
        let ((full, shape), peak) = peak_of(|| parse::list_node(&data));
        // The full parse and the shape agree on what is a node.
        if full { prop_assert!(shape, "{}", String::from_utf8_lossy(&data)); }
        prop_assert!(peak <= 64 * data.len() + (64 << 10), "peak {peak} for {} bytes", data.len());
    }

    #[test]
    fn snapshots(data in prop_oneof![prop::collection::vec(any::<u8>(), 0..2048), mutated(snapshot_payload())]) {
        let (_, peak) = peak_of(|| parse::snapshot(&data));
        prop_assert!(peak <= 64 * data.len() + (64 << 10), "peak {peak} for {} bytes", data.len());
    }

    #[test]
    fn refs(data in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..100),
        mutated(format!("{}\n", ObjectId::of_canonical(b"r")).into_bytes()),
    ]) {
        let _ = parse::ref_file(&data);
    }
}

#[test]
fn the_valid_inputs_parse() {
    assert_eq!(parse::list_node(&node_payload()), (true, true));
    assert!(parse::snapshot(&snapshot_payload()));
    let (id, canonical) = testing::encode("list", &node_payload());
    let data = zstd::bulk::compress(&canonical, 3).unwrap();
    assert!(parse::object(&id, &data, SMALL));
    assert!(parse::ref_file(format!("{id}\n").as_bytes()).is_ok());
}
