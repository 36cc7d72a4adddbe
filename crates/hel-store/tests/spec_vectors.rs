//! hel against the vectors objects-spec gives for a schema-3 snapshot with
//! its spill map blob (`vectors.json`) and for a journal whose commit
//! record is a zstd frame with hel's dictionary (`pack-vectors.json`,
//! `checkpoint`). The vectors are made by Python generators written from
//! the spec (`make_vectors.py`, `make_pack_vectors.py`); here hel must
//! read them: parse each object, take the spill map through its blob, read
//! the commit record's JSON out of its frame, and load and fsck a store
//! holding that journal.

use hel_object::object::{self, Kind, DICTIONARY_ID};
use hel_object::snapshot::{parse_spill_map, Checkpoint, Spill};
use hel_store::{ObjectId, SessionId, Store};
use serde_json::Value;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn vectors() -> Value {
    serde_json::from_str(include_str!("../../../objects-spec/vectors.json")).unwrap()
}

fn pack_vectors() -> Value {
    serde_json::from_str(include_str!("../../../objects-spec/pack-vectors.json")).unwrap()
}

/// The payload of the entry of `vectors.json` named `name`, and its id,
/// checked to be the id of that payload.
fn entry(doc: &Value, name: &str) -> (Vec<u8>, ObjectId) {
    let v = doc["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no vector {name:?}"));
    let payload = match v.get("canonical") {
        Some(c) => c.as_str().unwrap().as_bytes().to_vec(),
        None => hex(v["payload_hex"].as_str().unwrap()),
    };
    let kind = match v["kind"].as_str().unwrap() {
        "blob" => Kind::Blob,
        "snapshot" => Kind::Snapshot,
        "list" => Kind::List,
        other => panic!("kind {other}"),
    };
    let id: ObjectId = v["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(object::id_of(kind, &payload), id, "{name}");
    (payload, id)
}

#[test]
fn a_schema_3_snapshot_names_its_spill_map_by_a_blob() {
    let doc = vectors();
    let (file, file_id) = entry(&doc, "spill file blob");
    let (map, map_id) = entry(&doc, "spill map blob");
    let (snapshot, _) = entry(&doc, "snapshot naming its spill map blob");
    let cp = Checkpoint::parse(&snapshot).unwrap();
    assert_eq!(cp.schema_version, 3);
    assert_eq!(cp.spill, Spill::Blob(map_id));
    let entries = parse_spill_map(&map).unwrap();
    assert_eq!(entries.len(), 1);
    let (key, e) = entries.iter().next().unwrap();
    assert!(
        key.starts_with(".hel/sessions/") && key.ends_with(".txt"),
        "{key}"
    );
    assert_eq!((e.blob, e.size), (file_id, file.len() as u64));

    // Without a spill file, `spill` is `{}`, never a blob id.
    let (plain, _) = entry(&doc, "snapshot");
    let cp = Checkpoint::parse(&plain).unwrap();
    assert_eq!((cp.schema_version, cp.spill.blob()), (3, None));

    // A schema-3 snapshot holding its map inline is malformed, and so is a
    // map blob with an empty key.
    let mut inline: Value = serde_json::from_slice(&snapshot).unwrap();
    inline["spill"] = serde_json::from_slice(&map).unwrap();
    let bytes = hel_store::canonical::to_vec(&inline);
    assert!(Checkpoint::parse(&bytes).is_err());
    let mut empty_key: Value = serde_json::from_slice(&map).unwrap();
    let value = empty_key.as_object_mut().unwrap().remove(key).unwrap();
    empty_key[""] = value;
    assert!(parse_spill_map(&hel_store::canonical::to_vec(&empty_key)).is_err());
}

#[test]
fn a_commit_record_framed_with_hels_dictionary_reads_as_its_json() {
    let doc = pack_vectors();
    let c = &doc["checkpoint"];
    let json = c["commit_json"].as_str().unwrap().as_bytes();
    let stored = hex(c["commit_stored_hex"].as_str().unwrap());
    assert_eq!(&stored[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
    assert_eq!(
        zstd::zstd_safe::get_dict_id_from_frame(&stored).map(|d| d.get()),
        Some(DICTIONARY_ID)
    );
    assert_eq!(object::decompress_frame(&stored, 64 << 10).unwrap(), json);
    // hel's own frame of the same JSON names the same dictionary and reads
    // back as the same bytes (its compressed bytes may differ).
    let ours = object::compress_frame(json, true).unwrap();
    assert_eq!(
        zstd::zstd_safe::get_dict_id_from_frame(&ours).map(|d| d.get()),
        Some(DICTIONARY_ID)
    );
    assert_eq!(object::decompress_frame(&ours, 64 << 10).unwrap(), json);
    // A frame declaring more than a commit record may hold is refused.
    assert!(object::decompress_frame(&stored, json.len() - 1).is_err());
}

#[test]
fn a_store_holding_the_vector_journal_loads_it_and_is_sound() {
    let doc = pack_vectors();
    let c = &doc["checkpoint"];
    let session: SessionId = doc["session"].as_str().unwrap().parse().unwrap();
    let head: ObjectId = c["head"].as_str().unwrap().parse().unwrap();
    // The objects decode from the journal's records as the vector says.
    for o in c["objects"].as_array().unwrap() {
        let id: ObjectId = o["id"].as_str().unwrap().parse().unwrap();
        let kind = o["kind"].as_str().unwrap();
        let payload = hex(o["payload_hex"].as_str().unwrap());
        let k = match kind {
            "blob" => Kind::Blob,
            "list" => Kind::List,
            _ => Kind::Snapshot,
        };
        assert_eq!(object::id_of(k, &payload), id, "{kind}");
    }
    for with_sidecar in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        // A store as hel makes it, then the vector's journal and ref in it.
        let store = Store::open(dir.path()).unwrap();
        drop(store.new_session_named(&session).unwrap());
        let root = dir.path().join(hel_store::STORE_DIR);
        let journals = root.join("packs/journals");
        std::fs::create_dir_all(&journals).unwrap();
        std::fs::write(
            journals.join(format!("{session}.journal")),
            hex(c["journal_hex"].as_str().unwrap()),
        )
        .unwrap();
        if with_sidecar {
            std::fs::write(
                journals.join(format!("{session}.jidx")),
                hex(c["jidx_hex"].as_str().unwrap()),
            )
            .unwrap();
        }
        std::fs::write(
            root.join("refs/sessions").join(session.as_str()),
            c["ref"].as_str().unwrap(),
        )
        .unwrap();

        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.head(&session).unwrap(), head);
        let loaded = store.load(&head).unwrap();
        let map_id: ObjectId = c["spill_map_id"].as_str().unwrap().parse().unwrap();
        assert_eq!(loaded.checkpoint.spill, Spill::Blob(map_id));
        let key = c["spill_key"].as_str().unwrap();
        assert_eq!(loaded.state.spill().len(), 1);
        let spilled = loaded.state.spill()[key].clone();
        let file = hex(c["objects"][0]["payload_hex"].as_str().unwrap());
        let file_id: ObjectId = c["objects"][0]["id"].as_str().unwrap().parse().unwrap();
        assert_eq!((spilled.blob, spilled.size), (file_id, file.len() as u64));
        assert_eq!(loaded.messages.len(), 2);
        assert_eq!(loaded.messages[0]["content"], "List the log");
        // The request config is the vector's blob (a minimal one, which
        // the typed record reads as no config of this hel's).
        let config = c["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| {
                String::from_utf8_lossy(&hex(o["payload_hex"].as_str().unwrap()))
                    .contains("\"provider\":\"openai\"")
            })
            .expect("the vector's request config");
        assert_eq!(
            loaded.checkpoint.request_config.to_string(),
            config["id"].as_str().unwrap()
        );

        let report = hel_store::fsck::fsck(&store).unwrap();
        let faults: Vec<String> = report.faults.iter().map(|f| f.to_string()).collect();
        assert!(faults.is_empty(), "{faults:?}");
        assert_eq!(report.unreachable, Some(0), "{:?}", report.notes);
        assert_eq!(report.refs, 1);
    }
}

/// `vectors.json`, `refused` and `unknown_kind` (section 2.1): the NUL
/// ending a header is within its first 33 bytes, else the header is
/// malformed; 32 bytes of text naming a kind no reader knows is an
/// unknown kind (a newer writer), not damage.
#[test]
fn a_header_ends_within_33_bytes_and_names_a_kind() {
    let doc = vectors();
    let decode = |v: &Value| {
        let canonical = hex(v["canonical_hex"].as_str().unwrap());
        let id: ObjectId = v["id"].as_str().unwrap().parse().unwrap();
        assert_eq!(ObjectId::of_canonical(&canonical), id, "{}", v["name"]);
        let stored = zstd::bulk::compress(&canonical, 3).unwrap();
        object::decode(
            &id,
            std::path::Path::new("vector"),
            &stored,
            object::Cap::ANY,
        )
        .unwrap_err()
        .to_string()
    };
    let refused = doc["refused"].as_array().unwrap();
    assert!(refused
        .iter()
        .any(|v| v["name"] == "no NUL within the first 33 bytes"));
    for v in refused {
        let e = decode(v);
        assert!(e.ends_with("malformed header"), "{}: {e}", v["name"]);
    }
    let unknown = doc["unknown_kind"].as_array().unwrap();
    assert!(!unknown.is_empty());
    for v in unknown {
        let e = decode(v);
        assert!(e.contains("unknown kind"), "{}: {e}", v["name"]);
    }
}

/// `vectors.json`, `repeated_keys` (section 3): a payload holding a key
/// twice in one object, at any depth, is malformed whatever its kind.
#[test]
fn a_payload_with_a_key_twice_is_malformed() {
    let doc = vectors();
    let all = doc["repeated_keys"].as_array().unwrap();
    assert!(all.len() >= 4);
    for v in all {
        let name = v["name"].as_str().unwrap();
        let (payload, _) = entry_in(v, name);
        let e = match v["kind"].as_str().unwrap() {
            "snapshot" => Checkpoint::parse(&payload).unwrap_err().to_string(),
            "list" => match hel_object::list::RawNode::parse(&payload) {
                Ok(_) => panic!("{name}: parsed"),
                Err(e) => e.to_string(),
            },
            "blob" => parse_spill_map(&payload).unwrap_err().to_string(),
            other => panic!("kind {other}"),
        };
        assert!(e.contains("a key repeated in one object"), "{name}: {e}");
    }
}

/// The payload and id of vector `v` (named `name`), the id checked.
fn entry_in(v: &Value, name: &str) -> (Vec<u8>, ObjectId) {
    let payload = hex(v["payload_hex"].as_str().unwrap());
    let kind = match v["kind"].as_str().unwrap() {
        "blob" => Kind::Blob,
        "snapshot" => Kind::Snapshot,
        "list" => Kind::List,
        other => panic!("kind {other}"),
    };
    let id: ObjectId = v["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(object::id_of(kind, &payload), id, "{name}");
    (payload, id)
}

/// `workspace-vectors.json`, `depth` (section 10.1): a root tree holding
/// 255 levels of directories is read; one holding a directory at level
/// 256, though that directory is empty, is over the limit.
#[test]
fn a_root_tree_holds_at_most_255_levels_of_directories() {
    use hel_object::tree::{Entry, EntryKind, Extents, Tree, TreeTooLarge};
    use std::collections::HashMap;
    let doc: Value =
        serde_json::from_str(include_str!("../../../objects-spec/workspace-vectors.json")).unwrap();
    for (case, accepted) in [("accepted", true), ("refused", false)] {
        let levels = doc["depth"][case]["levels"].as_u64().unwrap();
        let want: ObjectId = doc["depth"][case]["root"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        // The chain as the vector's rule builds it, deepest first.
        let mut trees: HashMap<ObjectId, Tree> = HashMap::new();
        let mut below = Tree::default();
        let mut id = object::id_of(Kind::Tree, &below.to_payload());
        trees.insert(id, below.clone());
        for _ in 0..levels {
            below = Tree {
                entries: vec![Entry {
                    name: b"d".to_vec(),
                    kind: EntryKind::Dir,
                    mode: 0o755,
                    size: 0,
                    id,
                }],
            };
            id = object::id_of(Kind::Tree, &below.to_payload());
            trees.insert(id, below.clone());
        }
        assert_eq!(id, want, "{case}: the chain's root");
        let got = Extents::default().check(&id, &mut |t: &ObjectId| {
            Ok::<Tree, TreeTooLarge>(trees[t].clone())
        });
        match (got, accepted) {
            (Ok(extent), true) => assert_eq!(extent.levels, levels),
            (Err(e), false) => {
                assert_eq!((e.what, e.limit), ("levels of directories", 255), "{case}")
            }
            (got, _) => panic!("{case}: {got:?}"),
        }
    }
}

/// `pack-vectors.json`, `torn_tail` (section 5.4): after the checkpoint
/// journal, record headers whose checks fail are a torn tail while a
/// reader checks at most 256 candidates past the first (a note; the
/// session reads whole), and a fault from the 257th on.
#[test]
fn a_torn_tail_is_proved_within_256_candidates() {
    let doc = pack_vectors();
    let c = &doc["checkpoint"];
    let t = &doc["torn_tail"];
    let session: SessionId = doc["session"].as_str().unwrap().parse().unwrap();
    let head: ObjectId = c["head"].as_str().unwrap().parse().unwrap();
    let header = hex(t["header_hex"].as_str().unwrap());
    for (copies, torn) in [
        (t["proved"].as_u64().unwrap(), true),
        (t["undecided"].as_u64().unwrap(), false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        drop(store.new_session_named(&session).unwrap());
        let root = dir.path().join(hel_store::STORE_DIR);
        let journals = root.join("packs/journals");
        std::fs::create_dir_all(&journals).unwrap();
        let mut journal = hex(c["journal_hex"].as_str().unwrap());
        let end = journal.len();
        for _ in 0..copies {
            journal.extend_from_slice(&header);
        }
        std::fs::write(journals.join(format!("{session}.journal")), &journal).unwrap();
        std::fs::write(
            journals.join(format!("{session}.jidx")),
            hex(c["jidx_hex"].as_str().unwrap()),
        )
        .unwrap();
        std::fs::write(
            root.join("refs/sessions").join(session.as_str()),
            c["ref"].as_str().unwrap(),
        )
        .unwrap();
        let store = Store::open(dir.path()).unwrap();
        let fsck = hel_store::fsck::fsck(&store).unwrap();
        if torn {
            assert_eq!(store.head(&session).unwrap(), head);
            assert!(
                fsck.is_sound()
                    && fsck.notes.iter().any(|n| n.contains("unfinished commit")
                        && n.contains(&format!("after offset {end}"))),
                "{copies}: {fsck:?}"
            );
        } else {
            assert!(
                fsck.faults.iter().any(|f| {
                    let f = f.to_string();
                    f.contains(&format!("offset {end}"))
                        && f.contains("too many record headers to tell it from a torn write")
                }),
                "{copies}: {fsck:?}"
            );
        }
    }
}
