//! Snapshot objects: one per checkpoint.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ObjectId, SessionId};

/// The snapshot schema of the store format: the one this build reads and
/// writes (1 and 2 were pre-release schemas, refused as malformed).
pub const SCHEMA_VERSION: u64 = 3;

/// A snapshot object: one checkpoint. Everything a new process needs to
/// continue a session is here or named from here (messages, request config,
/// cursors, spill). hel-store's `Store::load` resolves it all.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    pub schema_version: u64,
    pub session_id: SessionId,
    /// The previous checkpoint; empty for a session's first, the forked
    /// checkpoint for a fork's first.
    pub parents: Vec<ObjectId>,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// The same instant, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// The project directory the session belongs to.
    pub cwd: String,
    /// Blob holding the request config (provider, model, params, output
    /// limit, toolset, compaction settings; opaque to the store). A blob, so
    /// that the same config is stored once for all checkpoints.
    pub request_config: ObjectId,
    /// The Meter (opaque to the store), or null.
    pub meter: Value,
    /// Blob holding the read_file cursors (opaque to the store).
    pub cursors: ObjectId,
    pub messages: MessagesRef,
    /// Spill path as the conversation names it → its blob: the blob
    /// holding that map, or `{}` when the map is empty.
    pub spill: Spill,
    pub summary: Summary,
    /// What this record is (always present: [`Checkpoint::parse`] refuses
    /// a snapshot without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<Record>,
    /// The project's files at this record, when snapshotted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
}

/// What a record of a session's history is (objects-spec §2.4, "record").
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Record {
    /// A completed answer: a checkpoint of the conversation.
    Answer,
    /// An instruction started: the workspace before the agent acted, so
    /// that an instruction that never completes can still be undone. The
    /// messages are the previous record's.
    Start,
    /// An instruction ended without an answer (interrupted, failed): the
    /// workspace it left. The messages are the previous record's.
    Interrupted,
    /// The workspace just before a restore or undo wrote anything, so that
    /// every restore can itself be undone.
    BeforeRestore,
    /// What a restore or undo wrote (the workspace after it).
    Restored,
    /// A fork's first record: the forked checkpoint, in a new session.
    Fork,
    /// The session continues in another project directory (`hel resume
    /// --relocate`): the previous record with the new `cwd`. The files are
    /// the previous record's, wherever they now are.
    Relocated,
}

impl Record {
    /// The record of `cp` (every checkpoint that parsed has one; one built
    /// without counts as an answer).
    pub fn of(cp: &Checkpoint) -> Record {
        cp.record.unwrap_or(Record::Answer)
    }

    /// The name objects-spec gives it.
    pub fn name(self) -> &'static str {
        match self {
            Record::Answer => "answer",
            Record::Start => "start",
            Record::Interrupted => "interrupted",
            Record::BeforeRestore => "before-restore",
            Record::Restored => "restored",
            Record::Fork => "fork",
            Record::Relocated => "relocated",
        }
    }
}

/// The workspace at a record.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Workspace {
    /// The project's root tree when this record was written (for an
    /// answer, when it completed).
    pub tree: ObjectId,
    /// For an answer or an interrupted instruction: the root tree when its
    /// instruction started. Otherwise null.
    pub start: Option<ObjectId>,
    /// Files `tree` lists as not tracked (over the size limit or budget):
    /// the snapshot is partial when this is not zero.
    pub not_tracked: u64,
    /// For a `restored` record: what was restored.
    pub restored: Option<Restored>,
}

/// What a restore or undo wrote.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Restored {
    /// The record whose files were put back.
    pub from: ObjectId,
    /// Its workspace at the instruction's start (`true`) or at the record
    /// (`false`).
    pub start: bool,
    /// Whether this was an undo (a following undo steps further back).
    pub undo: bool,
    /// Paths written or removed.
    pub count: u64,
    /// Paths left alone because they changed since the session recorded
    /// them.
    pub conflicts: u64,
    /// The first paths written or removed (at most [`RESTORED_PATHS_MAX`],
    /// for display and for the note the model gets; not UTF-8 safe names
    /// are shown lossily).
    pub paths: Vec<String>,
}

/// The most paths a restored record lists.
pub const RESTORED_PATHS_MAX: usize = 100;

/// The most bytes of one path a restored record lists.
const RESTORED_PATH_BYTES: usize = 4096;

/// `path` as a restored record lists it: UTF-8 (lossy), cut to at most
/// 4096 bytes at a character boundary (a path of 4095 bytes that are not
/// UTF-8 reads as three times as many).
pub fn restored_path(path: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(path).into_owned();
    if text.len() > RESTORED_PATH_BYTES {
        let mut end = RESTORED_PATH_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// The root of a checkpoint's message list.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MessagesRef {
    /// Newest list node, `null` for an empty list.
    pub root: Option<ObjectId>,
    pub count: u64,
}

/// A checkpoint's spill map (objects-spec §2.4, `spill`): a blob of its
/// canonical JSON ([`spill_map_payload`]), or `{}` when it
/// is empty, so that the
/// map, which only grows within a session, is stored once while it does
/// not change instead of again in every checkpoint (at 50 spill files,
/// about 1 KB of every snapshot).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(untagged)]
pub enum Spill {
    /// The blob holding the map.
    Blob(ObjectId),
    /// `{}`: no spill file (a map with entries is refused: it is a blob).
    Inline(BTreeMap<String, SpillEntry>),
}

impl Spill {
    /// The blob holding the map, when the checkpoint names one.
    pub fn blob(&self) -> Option<ObjectId> {
        match self {
            Spill::Blob(id) => Some(*id),
            Spill::Inline(_) => None,
        }
    }
}

/// `map` as a checkpoint names it: `{}` when empty, else the
/// blob `put` stores its canonical JSON as ([`spill_map_payload`]).
pub fn spill_field<E>(
    map: &BTreeMap<String, SpillEntry>,
    put: impl FnOnce(&[u8]) -> std::result::Result<ObjectId, E>,
) -> std::result::Result<Spill, E> {
    if map.is_empty() {
        return Ok(Spill::Inline(BTreeMap::new()));
    }
    Ok(Spill::Blob(put(&spill_map_payload(map))?))
}

/// The canonical JSON of spill map `map`: the payload of its blob.
pub fn spill_map_payload(map: &BTreeMap<String, SpillEntry>) -> Vec<u8> {
    crate::canonical::to_vec(&serde_json::to_value(map).unwrap_or_default())
}

/// Parse and validate the payload of a spill map blob: an object of
/// spill entries, every key a non-empty string.
pub fn parse_spill_map(
    payload: &[u8],
) -> std::result::Result<BTreeMap<String, SpillEntry>, Invalid> {
    crate::canonical::no_repeated_key(payload).map_err(Invalid::Json)?;
    let map: BTreeMap<String, SpillEntry> =
        serde_json::from_slice(payload).map_err(Invalid::Json)?;
    if map.keys().any(String::is_empty) {
        return Err(Invalid::EmptySpillName);
    }
    Ok(map)
}

/// A spill file kept by a checkpoint.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SpillEntry {
    pub blob: ObjectId,
    pub size: u64,
}

/// What listings show without reading the messages.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub messages: u64,
    /// Answers in this record's first-parent history, itself included.
    /// Workspace records and forks do not count.
    pub checkpoints: u64,
    /// First line of the last user instruction.
    pub instruction: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Checkpoint {
    pub fn to_payload(&self) -> Vec<u8> {
        crate::canonical::to_vec(&serde_json::to_value(self).unwrap_or_default())
    }

    /// Parse and validate the payload of a snapshot (objects-spec §4.1,
    /// "Validation"): every key with its type and nothing else, schema
    /// [`SCHEMA_VERSION`], at most one parent, a spill map that is `{}` or
    /// a blob id (whose map [`parse_spill_map`] checks when it is read), a
    /// record, and a summary that agrees with the message count.
    pub fn parse(payload: &[u8]) -> std::result::Result<Checkpoint, Invalid> {
        // A key twice anywhere (`meter` included) is malformed: another
        // reader could take the other value under the same id.
        crate::canonical::no_repeated_key(payload).map_err(Invalid::Json)?;
        // Straight into the struct first: half the work of going through a
        // `Value`, and for a payload it takes the same checkpoint (a
        // duplicated key, which the `Value` keeps the last of, fails it).
        // Whatever it refuses goes the long way, which names the fault as
        // before: a newer schema before a key this build does not know.
        if let Ok(cp) = serde_json::from_slice::<Checkpoint>(payload) {
            cp.check()?;
            return Ok(cp);
        }
        Checkpoint::parse_via_value(payload)
    }

    /// [`Checkpoint::parse`] the long way: the schema version read first
    /// from a JSON value, then the struct from the value.
    fn parse_via_value(payload: &[u8]) -> std::result::Result<Checkpoint, Invalid> {
        let value: Value = serde_json::from_slice(payload).map_err(Invalid::Json)?;
        let found = value
            .get("schema_version")
            .and_then(Value::as_u64)
            .ok_or(Invalid::NoSchemaVersion)?;
        if found > SCHEMA_VERSION {
            return Err(Invalid::Newer(found));
        }
        if found < SCHEMA_VERSION {
            return Err(Invalid::Older(found));
        }
        let cp: Checkpoint = serde_json::from_value(value).map_err(Invalid::Json)?;
        cp.check()?;
        Ok(cp)
    }

    /// The checks [`Checkpoint::parse`] makes of a well-typed checkpoint:
    /// what a reader refuses once the JSON has its keys and types. A writer
    /// asks this of the checkpoint it built instead of parsing its payload
    /// back: that payload is serde's of this same struct, which always
    /// reads back as itself (`payload_reads_back_as_itself` tests every
    /// field and record), so these are the checks it could fail.
    pub fn check(&self) -> std::result::Result<(), Invalid> {
        let cp = self;
        if cp.schema_version > SCHEMA_VERSION {
            return Err(Invalid::Newer(cp.schema_version));
        }
        if cp.schema_version < SCHEMA_VERSION {
            return Err(Invalid::Older(cp.schema_version));
        }
        if cp.parents.len() > 1 {
            return Err(Invalid::Parents(cp.parents.len()));
        }
        if cp.cwd.is_empty() {
            return Err(Invalid::EmptyCwd);
        }
        // One instant, two spellings: they must agree, or listings (which
        // show one) and readers (which sort by the other) disagree.
        if cp.created_at_ms > crate::time::LAST_MS
            || cp.created_at != crate::time::rfc3339(cp.created_at_ms)
        {
            return Err(Invalid::CreatedAt);
        }
        if cp.summary.messages != cp.messages.count {
            return Err(Invalid::SummaryCount {
                summary: cp.summary.messages,
                list: cp.messages.count,
            });
        }
        if (cp.messages.count == 0) != cp.messages.root.is_none() {
            return Err(Invalid::Root);
        }
        match &cp.spill {
            Spill::Blob(_) => {}
            // No spill file: `{}`, not a blob id (32 bytes more in every
            // snapshot of the many sessions that never spill).
            Spill::Inline(map) if map.is_empty() => {}
            Spill::Inline(_) => return Err(Invalid::SpillForm),
        }
        Ok(check_record(cp)?)
    }
}

/// Why a checkpoint's `record` and `workspace` do not go together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("no record")]
    NoRecord,
    #[error("a workspace record without a workspace")]
    NoWorkspace,
    #[error("a start tree on a record that is not an instruction's end")]
    StartNotAtEnd,
    /// Too many, more than the count, out of order, or an empty or
    /// over-long path.
    #[error("a malformed list of restored paths")]
    BadRestoredPaths,
    #[error("a restored record that says nothing restored")]
    NothingRestored,
    #[error("restored paths on a record that is not a restore")]
    RestoredNotRestore,
}

/// What a checkpoint's `record` and `workspace` require of each other.
fn check_record(cp: &Checkpoint) -> std::result::Result<(), RecordError> {
    let Some(record) = cp.record else {
        return Err(RecordError::NoRecord);
    };
    let ws = cp.workspace.as_ref();
    let needs_workspace = matches!(
        record,
        Record::Start | Record::BeforeRestore | Record::Restored
    );
    if needs_workspace && ws.is_none() {
        return Err(RecordError::NoWorkspace);
    }
    if let Some(ws) = ws {
        let may_start = matches!(record, Record::Answer | Record::Interrupted | Record::Fork);
        if ws.start.is_some() && !may_start {
            return Err(RecordError::StartNotAtEnd);
        }
        match (&ws.restored, record) {
            (Some(r), Record::Restored) => {
                if r.paths.len() > RESTORED_PATHS_MAX
                    || r.paths.len() as u64 > r.count
                    || r.paths
                        .iter()
                        .any(|p| p.is_empty() || p.len() > RESTORED_PATH_BYTES)
                    || r.paths.windows(2).any(|w| w[0] > w[1])
                {
                    return Err(RecordError::BadRestoredPaths);
                }
            }
            (None, Record::Restored) => return Err(RecordError::NothingRestored),
            (Some(_), _) => return Err(RecordError::RestoredNotRestore),
            (None, _) => {}
        }
    }
    Ok(())
}

/// Why a snapshot payload is not one this build reads: malformed (every
/// variant but [`Invalid::Newer`]), or of a newer schema.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    /// Not JSON, or a key missing, unknown or of the wrong type (serde's
    /// description).
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    #[error("no schema_version")]
    NoSchemaVersion,
    #[error("schema_version {0} is newer than this build")]
    Newer(u64),
    /// A schema older than [`SCHEMA_VERSION`] (0, or a pre-release one).
    #[error("schema_version {0}: this build reads schema {SCHEMA_VERSION} only (older schemas were pre-release)")]
    Older(u64),
    #[error("{0} parents, a checkpoint has at most one")]
    Parents(usize),
    #[error("empty cwd")]
    EmptyCwd,
    #[error("summary says {summary} messages, the list {list}")]
    SummaryCount { summary: u64, list: u64 },
    #[error("an empty list has no root, and only an empty one")]
    Root,
    #[error("a spill entry has an empty name")]
    EmptySpillName,
    /// A non-empty spill map inline (it is a blob id, or `{}` when empty).
    #[error("a spill map inline (it is a blob id, or {{}} when empty)")]
    SpillForm,
    #[error("created_at is not created_at_ms in RFC 3339 with milliseconds")]
    CreatedAt,
    #[error("{0}")]
    Record(#[from] RecordError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(s: &str) -> String {
        ObjectId::of_canonical(s.as_bytes()).to_hex()
    }

    /// A valid snapshot of `record` with `workspace` (null: none).
    fn snapshot(record: &str, workspace: Value) -> Value {
        let mut v = json!({
            "schema_version": 3,
            "session_id": "0c9e6f1a-1b2c-4d3e-8f40-123456789abc",
            "parents": [],
            "created_at": "2026-11-30T00:53:20.000Z",
            "created_at_ms": 1_796_000_000_000u64,
            "cwd": "/project",
            "request_config": id("c"),
            "meter": null,
            "cursors": id("k"),
            "messages": {"root": id("r"), "count": 2},
            "spill": {},
            "summary": {"messages": 2, "checkpoints": 1, "instruction": "i", "input_tokens": 0, "output_tokens": 0},
            "record": record,
        });
        if !workspace.is_null() {
            v["workspace"] = workspace;
        }
        v
    }

    fn parse(v: &Value) -> std::result::Result<Checkpoint, Invalid> {
        Checkpoint::parse(&crate::canonical::to_vec(v))
    }

    fn workspace(start: bool, restored: bool) -> Value {
        json!({
            "tree": id("t"),
            "start": if start { Value::from(id("s")) } else { Value::Null },
            "not_tracked": 0,
            "restored": if restored {
                json!({"from": id("f"), "start": true, "undo": true, "count": 2, "conflicts": 0, "paths": ["a", "b"]})
            } else {
                Value::Null
            },
        })
    }

    /// What `check` stands in for on the write side: a checkpoint's
    /// payload parses back as the same checkpoint, whatever fields it
    /// fills (a meter, spill, each record with its workspace fields).
    #[test]
    fn payload_reads_back_as_itself() {
        let mut all = vec![
            snapshot("answer", Value::Null),
            snapshot("answer", workspace(true, false)),
            snapshot("start", workspace(false, false)),
            snapshot("restored", workspace(false, true)),
        ];
        let mut v = snapshot("answer", workspace(true, false));
        v["meter"] = json!({"observed": {"n": 3, "f": 1.5, "s": "x\n\u{1}é"}, "a": [null, true]});
        v["spill"] = id("m").into();
        v["parents"] = json!([id("p")]);
        v["summary"]["instruction"] = "quote \" and \\ and 한".into();
        all.push(v);
        for v in all {
            let cp = parse(&v).unwrap();
            cp.check().unwrap();
            assert_eq!(cp.to_payload(), crate::canonical::to_vec(&v));
            assert_eq!(Checkpoint::parse(&cp.to_payload()).unwrap(), cp);
        }
    }

    /// A snapshot names its spill map by a blob id, or says `{}`; a map
    /// with entries inline is refused, as is a map blob with an entry that
    /// is not a spill entry or has an empty name. Pre-release schemas (1,
    /// 2) are refused.
    #[test]
    fn the_spill_map_is_a_blob_and_older_schemas_are_refused() {
        let mut three = snapshot("answer", Value::Null);
        three["spill"] = id("m").into();
        let cp = parse(&three).unwrap();
        assert!(matches!(cp.spill, Spill::Blob(_)));
        assert_eq!(cp.to_payload(), crate::canonical::to_vec(&three));
        // No spill file: `{}`; a map with entries only as a blob.
        three["spill"] = json!({});
        assert!(matches!(parse(&three).unwrap().spill, Spill::Inline(m) if m.is_empty()));
        three["spill"] = json!({"a": {"blob": id("b"), "size": 7}});
        assert!(matches!(parse(&three), Err(Invalid::SpillForm)));
        for older in [0, 1, 2] {
            let mut v = snapshot("answer", Value::Null);
            v["schema_version"] = older.into();
            assert!(
                matches!(parse(&v), Err(Invalid::Older(n)) if n == older),
                "{older}"
            );
        }
        let map = json!({"a/b": {"blob": id("b"), "size": 7}});
        let parsed = parse_spill_map(&crate::canonical::to_vec(&map)).unwrap();
        assert_eq!(spill_map_payload(&parsed), crate::canonical::to_vec(&map));
        for bad in [
            json!([]),
            json!({"": {"blob": id("b"), "size": 7}}),
            json!({"k": {"blob": id("b"), "size": 7, "x": 1}}),
            json!({"k": {"blob": "zz", "size": 7}}),
        ] {
            assert!(
                parse_spill_map(&crate::canonical::to_vec(&bad)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_straight_parse_takes_every_payload_as_the_parse_through_a_value() {
        let good = crate::canonical::to_vec(&snapshot("answer", workspace(true, false)));
        let text = String::from_utf8(good.clone()).unwrap();
        let mut payloads: Vec<Vec<u8>> = vec![good.clone()];
        // A duplicated key, first and last, at the top or inside `meter`
        // (which the struct keeps as a `Value`): refused, where the
        // `Value` alone would keep the last (objects-spec §3).
        for twice in [
            text.replacen("{", "{\"cwd\":\"/elsewhere\",", 1),
            text.replacen("{", "{\"cwd\":\"\",", 1),
            format!("{},\"cwd\":\"/last\"}}", &text[..text.len() - 1]),
            text.replacen("\"meter\":null", "\"meter\":{\"a\":1,\"a\":2}", 1),
        ] {
            assert!(twice.len() > text.len());
            let e = Checkpoint::parse(twice.as_bytes()).unwrap_err();
            assert!(
                e.to_string().contains("a key repeated in one object"),
                "{e}: {twice}"
            );
        }
        // A newer schema with a key this build does not know, and without.
        let mut v = snapshot("answer", Value::Null);
        v["schema_version"] = (SCHEMA_VERSION + 1).into();
        payloads.push(crate::canonical::to_vec(&v));
        v["from_the_future"] = true.into();
        payloads.push(crate::canonical::to_vec(&v));
        // Wrong types, a float for a count, schema 0, an empty cwd,
        // trailing bytes, not JSON, whitespace around it.
        for (key, bad) in [
            ("created_at_ms", json!("1")),
            ("created_at_ms", json!(1.0)),
            ("schema_version", json!(0)),
            ("schema_version", json!(-1)),
            ("cwd", json!("")),
            ("meter", json!({"deep": [[[1]]]})),
        ] {
            let mut v = snapshot("answer", Value::Null);
            v[key] = bad;
            payloads.push(crate::canonical::to_vec(&v));
        }
        payloads.push([&good[..], b" x"].concat());
        payloads.push(b"[]".to_vec());
        payloads.push(format!(" \n{text}\t").into_bytes());
        payloads.push(good[..good.len() / 2].to_vec());
        let mut taken = 0;
        for p in &payloads {
            let (a, b) = (Checkpoint::parse(p), Checkpoint::parse_via_value(p));
            taken += usize::from(a.is_ok());
            assert_eq!(
                format!("{a:?}"),
                format!("{b:?}"),
                "{}",
                String::from_utf8_lossy(p)
            );
        }
        assert!(taken >= 2, "only {taken} of the payloads parsed");
    }

    #[test]
    fn created_at_spells_created_at_ms() {
        parse(&snapshot("answer", Value::Null)).unwrap();
        for (at, ms) in [
            // The pack vector's old pair: 53 minutes apart.
            ("2026-11-30T00:00:00.000Z", 1_796_000_000_000u64),
            ("2026-11-30T00:53:20Z", 1_796_000_000_000),
            ("2026-11-30T00:53:20.000+00:00", 1_796_000_000_000),
            ("2026-11-30T00:53:20.000Z\nforged", 1_796_000_000_000),
            // After the year 9999, which RFC 3339 cannot write.
            ("9999-12-31T23:59:59.999Z", crate::time::LAST_MS + 1),
        ] {
            let mut v = snapshot("answer", Value::Null);
            v["created_at"] = at.into();
            v["created_at_ms"] = ms.into();
            assert!(matches!(parse(&v), Err(Invalid::CreatedAt)), "{at:?} {ms}");
        }
        let mut v = snapshot("answer", Value::Null);
        v["created_at"] = "9999-12-31T23:59:59.999Z".into();
        v["created_at_ms"] = crate::time::LAST_MS.into();
        parse(&v).unwrap();
    }

    /// Which records may have a workspace, a start tree and a restore
    /// (objects-spec §10.2, "Valid combinations").
    #[test]
    fn workspace_fields_go_with_their_records() {
        // (record, no workspace, workspace, with start, with restored,
        // with both)
        let table = [
            ("answer", true, true, true, false, false),
            ("interrupted", true, true, true, false, false),
            ("fork", true, true, true, false, false),
            ("relocated", true, true, false, false, false),
            ("start", false, true, false, false, false),
            ("before-restore", false, true, false, false, false),
            ("restored", false, false, false, true, false),
        ];
        for (record, none, plain, start, restored, both) in table {
            for (ws, valid) in [
                (Value::Null, none),
                (workspace(false, false), plain),
                (workspace(true, false), start),
                (workspace(false, true), restored),
                (workspace(true, true), both),
            ] {
                let got = parse(&snapshot(record, ws.clone()));
                assert_eq!(got.is_ok(), valid, "{record} with {ws}: {got:?}");
            }
        }
        // A snapshot always says what the record is.
        let mut v = snapshot("answer", Value::Null);
        v.as_object_mut().unwrap().remove("record");
        assert!(matches!(
            parse(&v),
            Err(Invalid::Record(RecordError::NoRecord))
        ));
    }

    #[test]
    fn restored_paths_are_sorted_within_the_count() {
        let with_paths = |paths: Value, count: u64| {
            let mut ws = workspace(false, true);
            ws["restored"]["paths"] = paths;
            ws["restored"]["count"] = count.into();
            parse(&snapshot("restored", ws))
        };
        with_paths(json!(["a", "b/c", "é"]), 3).unwrap();
        // A path of 4095 bytes that are not UTF-8 reads as 12,285 bytes:
        // listed whole, the record would not read back; cut, it does.
        let path = vec![0xffu8; 4095];
        let lossy = String::from_utf8_lossy(&path).into_owned();
        assert!(with_paths(json!([lossy]), 1).is_err());
        let shown = restored_path(&path);
        assert_eq!(shown.len(), 4095, "1365 replacement characters");
        assert!(lossy.starts_with(&shown));
        with_paths(json!([shown]), 1).unwrap();
        assert_eq!(restored_path(b"src/main.rs"), "src/main.rs");
        // Two names lossily the same (not UTF-8) show as one path twice.
        with_paths(json!(["\u{fffd}", "\u{fffd}"]), 2).unwrap();
        for (paths, count) in [
            (json!(["b", "a"]), 2),
            (json!(["a", "b"]), 1),
            (json!([""]), 1),
            (json!(["x".repeat(4097)]), 1),
            (json!(vec!["a"; RESTORED_PATHS_MAX + 1]), 1000),
        ] {
            assert!(
                matches!(
                    with_paths(paths.clone(), count),
                    Err(Invalid::Record(RecordError::BadRestoredPaths))
                ),
                "{paths}"
            );
        }
    }
}
