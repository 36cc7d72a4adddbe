//! Makes `objects-spec/dictionary-1.zdict`, the zstd dictionary of the
//! store format (objects-spec §2.2): trained on synthetic snapshot objects and
//! commit records, built from the key sets, value shapes and phrases the
//! spec gives them (§2.3, §12.3, §13.2) with random ids, session ids,
//! times, paths and instructions, so that it holds the structure every
//! store shares and nothing of any one store (no benchmark or user
//! content). The trainer is seeded: the same build makes the same file.
//!
//! ```text
//! cargo run --release -p hel-bench --bin hel-dictionary -- objects-spec/dictionary-1.zdict
//! ```
//!
//! The dictionary id is then set to hel's (bytes 4..8, `0x68656c01`,
//! "hel" and 1), which the frames it compresses carry.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// The id frames compressed with this dictionary carry.
const DICT_ID: u32 = 0x6865_6c01;
/// Its size: what holds the shared keys and phrases (larger did not make
/// the snapshots of a benchmark store smaller).
const DICT_SIZE: usize = 4096;
const SAMPLES: usize = 3000;

fn main() {
    let Some(out) = std::env::args().nth(1) else {
        eprintln!("usage: hel-dictionary OUT");
        std::process::exit(2);
    };
    let mut rng = fastrand::Rng::with_seed(0x68656c);
    let mut samples: Vec<Vec<u8>> = Vec::new();
    for _ in 0..SAMPLES {
        let s = Sample::new(&mut rng);
        let snapshot = canonical(&s.snapshot(&mut rng));
        let mut obj = format!("snapshot {}\0", snapshot.len()).into_bytes();
        obj.extend_from_slice(&snapshot);
        samples.push(obj);
        samples.push(canonical(&s.commit(&mut rng)));
    }
    let mut dict = match zstd::dict::from_samples(&samples, DICT_SIZE) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("cannot train: {e}");
            std::process::exit(1);
        }
    };
    dict[4..8].copy_from_slice(&DICT_ID.to_le_bytes());
    if let Err(e) = std::fs::write(&out, &dict) {
        eprintln!("cannot write {out}: {e}");
        std::process::exit(1);
    }
    println!(
        "{out}: {} bytes, blake3 {}",
        dict.len(),
        blake3::hash(&dict).to_hex()
    );
}

/// Canonical JSON of these values (objects-spec §3): serde_json's maps
/// are sorted, its output compact, and these values hold no floats.
fn canonical(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

fn hex(rng: &mut fastrand::Rng, n: usize) -> String {
    (0..n)
        .map(|_| char::from_digit(rng.u32(0..16), 16).unwrap_or('0'))
        .collect()
}

fn id(rng: &mut fastrand::Rng) -> String {
    hex(rng, 64)
}

fn uuid(rng: &mut fastrand::Rng) -> String {
    let variant = ['8', '9', 'a', 'b'][rng.usize(0..4)];
    format!(
        "{}-{}-4{}-{variant}{}-{}",
        hex(rng, 8),
        hex(rng, 4),
        hex(rng, 3),
        hex(rng, 3),
        hex(rng, 12)
    )
}

const WORDS: &[&str] = &[
    "fix", "the", "test", "add", "a", "in", "to", "of", "and", "build", "why", "does", "fail",
    "refactor", "parser", "error", "handling", "write", "read", "file", "function", "update",
    "README", "docs", "make", "it", "faster", "check", "this", "bug", "rename", "move", "module",
    "explain", "how", "works", "run", "tests", "clippy", "warnings", "CI", "config", "server",
];

fn words(rng: &mut fastrand::Rng, most: usize) -> String {
    let n = rng.usize(1..=most);
    (0..n)
        .map(|_| WORDS[rng.usize(0..WORDS.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// One checkpoint's shared facts, which its snapshot and its commit
/// record both carry.
struct Sample {
    session: String,
    record: &'static str,
    parent: Option<String>,
    time_ms: u64,
    instruction: String,
    messages: u64,
    checkpoints: u64,
    input_tokens: u64,
    output_tokens: u64,
    deps: Vec<String>,
    seq: u64,
}

impl Sample {
    fn new(rng: &mut fastrand::Rng) -> Sample {
        const RECORDS: &[&str] = &[
            "answer",
            "answer",
            "answer",
            "answer",
            "answer",
            "start",
            "start",
            "start",
            "interrupted",
            "fork",
            "before-restore",
            "restored",
            "relocated",
        ];
        let record = RECORDS[rng.usize(0..RECORDS.len())];
        let checkpoints = rng.u64(0..400);
        let deps = match rng.u32(0..10) {
            0..=6 => vec![],
            7 | 8 => vec![uuid(rng)],
            _ => {
                let mut d = vec![uuid(rng), uuid(rng)];
                d.sort();
                d
            }
        };
        Sample {
            session: uuid(rng),
            record,
            parent: (rng.u32(0..20) != 0).then(|| id(rng)),
            time_ms: rng.u64(1_700_000_000_000..1_900_000_000_000),
            instruction: words(rng, 13),
            messages: rng.u64(1..20_000),
            checkpoints,
            input_tokens: rng.u64(0..200_000),
            output_tokens: rng.u64(0..20_000),
            deps,
            seq: checkpoints * 2 + rng.u64(1..3),
        }
    }

    fn summary(&self) -> Value {
        json!({
            "checkpoints": self.checkpoints,
            "input_tokens": self.input_tokens,
            "instruction": self.instruction,
            "messages": self.messages,
            "output_tokens": self.output_tokens,
        })
    }

    fn snapshot(&self, rng: &mut fastrand::Rng) -> Value {
        const USERS: &[&str] = &["alice", "bob", "dev", "runner", "me", "user"];
        const PROJECTS: &[&str] = &["api", "web", "hel", "app", "server", "lib", "tools"];
        let user = USERS[rng.usize(0..USERS.len())];
        let project = PROJECTS[rng.usize(0..PROJECTS.len())];
        let cwd = match rng.u32(0..5) {
            0 => format!("/home/{user}/src/{project}"),
            1 => format!("/Users/{user}/code/{project}"),
            2 => format!("/tmp/tmp.{}/project", hex(rng, 10)),
            3 => format!("/work/{project}"),
            _ => format!("/home/{user}/{project}"),
        };
        let mut spill = BTreeMap::new();
        for n in 0..[0, 0, 1, 2, 3, 6][rng.usize(0..6)] {
            const TOOLS: &[&str] = &["bash", "grep", "read_file", "search", "glob"];
            let tool = TOOLS[rng.usize(0..TOOLS.len())];
            let key = format!(
                ".hel/sessions/{}/spill/{tool}-{}-{}.txt",
                self.session,
                n + 1,
                hex(rng, 8)
            );
            spill.insert(
                key,
                json!({"blob": id(rng), "size": rng.u64(2_000..2_000_000)}),
            );
        }
        let meter = match rng.u32(0..4) {
            0 => json!(null),
            1 => json!({"observed": null}),
            _ => json!({"observed": {
                "estimated": rng.u32(0..8) == 0,
                "messages_sent": self.messages,
                "prompt_tokens": self.input_tokens,
            }}),
        };
        let mut v = json!({
            "created_at": rfc3339(self.time_ms),
            "created_at_ms": self.time_ms,
            "cursors": id(rng),
            "cwd": cwd,
            "messages": {"count": self.messages, "root": id(rng)},
            "meter": meter,
            "parents": self.parent.iter().collect::<Vec<_>>(),
            "record": self.record,
            "request_config": id(rng),
            "schema_version": 2,
            "session_id": self.session,
            "spill": spill,
            "summary": self.summary(),
        });
        if rng.u32(0..4) != 0 || matches!(self.record, "start" | "before-restore" | "restored") {
            let start = matches!(self.record, "answer" | "interrupted" | "fork").then(|| id(rng));
            let restored = (self.record == "restored").then(|| {
                let paths: Vec<String> = (0..rng.usize(1..4))
                    .map(|_| format!("src/{}.rs", words(rng, 1)))
                    .collect();
                json!({
                    "conflicts": 0,
                    "count": paths.len(),
                    "from": id(rng),
                    "paths": paths,
                    "start": rng.bool(),
                    "undo": rng.bool(),
                })
            });
            let not_tracked = [0, 0, 0, 1, 12][rng.usize(0..5)];
            v["workspace"] = json!({
                "not_tracked": not_tracked,
                "restored": restored,
                "start": start,
                "tree": id(rng),
            });
        }
        v
    }

    fn commit(&self, rng: &mut fastrand::Rng) -> Value {
        let why = match self.record {
            "fork" => format!("fork from {}", id(rng)),
            _ if rng.u32(0..40) == 0 => "pull".to_owned(),
            r => format!("{r}: {}", self.instruction),
        };
        json!({
            "deps": self.deps,
            "parent": self.parent,
            "seq": self.seq,
            "session": self.session,
            "summary": self.summary(),
            "time_ms": self.time_ms,
            "why": why,
        })
    }
}
