//! objects-spec/workspace-vectors.json, made from the spec by an
//! independent implementation: trees and the workspace fields of a
//! snapshot must be the same bytes, and read back the same.

use hel_store::tree::{EntryKind, Tree};
use hel_store::{blob_id, tree_id, ObjectId};
use serde_json::Value;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn doc() -> Value {
    serde_json::from_str(include_str!("../../../objects-spec/workspace-vectors.json")).unwrap()
}

#[test]
fn trees_and_blobs_are_the_specified_bytes_and_ids() {
    let doc = doc();
    for (_, b) in doc["blobs"].as_object().unwrap() {
        let bytes = hex(b["bytes_hex"].as_str().unwrap());
        assert_eq!(blob_id(&bytes).to_hex(), b["id"].as_str().unwrap());
    }
    for t in doc["trees"].as_array().unwrap() {
        let payload = hex(t["payload_hex"].as_str().unwrap());
        let tree = Tree::parse(&payload).unwrap();
        // Written again: the same bytes, the same id.
        assert_eq!(tree.to_payload(), payload);
        assert_eq!(tree_id(&tree).to_hex(), t["id"].as_str().unwrap());
    }
    let root = Tree::parse(&hex(doc["trees"][1]["payload_hex"].as_str().unwrap())).unwrap();
    let kinds: Vec<(String, EntryKind, u16)> = root
        .entries
        .iter()
        .map(|e| {
            (
                String::from_utf8_lossy(&e.name).into_owned(),
                e.kind,
                e.mode,
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("big.bin".into(), EntryKind::NotTracked, 0),
            ("café\u{fffd}".into(), EntryKind::File, 0o600),
            ("link".into(), EntryKind::Symlink, 0),
            ("run.sh".into(), EntryKind::File, 0o755),
            ("src".into(), EntryKind::Dir, 0o755),
            ("vendor".into(), EntryKind::Repository, 0),
        ]
    );
    assert_eq!(root.entries[0].size, 5_000_000);
    assert_eq!(root.entries[0].id, ObjectId::ZERO);
}

#[test]
fn the_workspace_field_of_a_snapshot_is_canonical_json() {
    let doc = doc();
    let expected = doc["snapshot_workspace"]["canonical"].as_str().unwrap();
    let ws: hel_store::Workspace = serde_json::from_str(expected).unwrap();
    let ours = hel_store::canonical::to_vec(&serde_json::to_value(&ws).unwrap());
    assert_eq!(String::from_utf8(ours).unwrap(), expected);
}
