//! Deterministic, seeded conversations shaped like real coding sessions:
//! user messages ~200 B, assistant messages ~1 KB with a tool call, tool
//! results 1–50 KB (log-uniform) and, rarely, a spill of 1–5 MB.

use serde_json::{json, Value};

/// The workloads' random numbers: fastrand's generator, always seeded, so
/// every run draws the same conversations.
pub use fastrand::Rng;

/// A generator seeded with `seed`.
pub fn rng(seed: u64) -> Rng {
    Rng::with_seed(seed)
}

const WORDS: &[&str] = &[
    "fn",
    "let",
    "mut",
    "self",
    "impl",
    "struct",
    "pub",
    "use",
    "crate",
    "return",
    "match",
    "Some",
    "None",
    "Ok",
    "Err",
    "String",
    "Vec",
    "u64",
    "usize",
    "&str",
    "if",
    "else",
    "for",
    "in",
    "while",
    "loop",
    "break",
    "=>",
    "->",
    "::",
    "{",
    "}",
    "(",
    ")",
    "path",
    "file",
    "read",
    "write",
    "config",
    "server",
    "port",
    "request",
    "response",
    "error",
    "handler",
    "test",
    "assert_eq!",
    "the",
    "a",
    "to",
    "of",
    "and",
    "is",
    "this",
    "that",
    "function",
    "module",
    "line",
    "value",
    "field",
    "type",
    "error:",
    "warning:",
    "src/main.rs",
    "src/lib.rs",
    "Cargo.toml",
    "tests/api.rs",
    "// TODO",
    "#[derive(Debug)]",
    "println!",
    "unwrap()",
    "clone()",
];

/// `len` bytes of code-like text.
pub fn text(rng: &mut Rng, len: usize) -> String {
    let mut s = String::with_capacity(len + 16);
    while s.len() < len {
        let w = WORDS[rng.usize(..WORDS.len())];
        s.push_str(w);
        match rng.u32(..12) {
            0 => s.push('\n'),
            1 => s.push_str(&format!(" {} ", rng.u32(..10_000))),
            _ => s.push(' '),
        }
    }
    s.truncate(len);
    s
}

/// One exchange of four messages (user, assistant with a tool call, tool
/// result, assistant answer), and its spill bytes if the result spilled.
pub struct Exchange {
    pub messages: Vec<Value>,
    pub spill: Option<(String, Vec<u8>)>,
}

/// The `k`-th exchange of a conversation drawn from `rng`.
pub fn exchange(rng: &mut Rng, tag: &str, k: usize) -> Exchange {
    let call_id = format!("call_{tag}_{k}");
    let n = rng.usize(150..250);
    let user = json!({"role": "user", "content": text(rng, n)});
    let args = json!({"command": text(rng, 60)}).to_string();
    let n = rng.usize(700..1000);
    let body = text(rng, n);
    let assistant = json!({
        "role": "assistant",
        "content": body,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "bash", "arguments": args}}],
    });
    // Log-uniform 1–50 KB.
    let size = (1024.0 * 50f64.powf(rng.f64())) as usize;
    let mut spill = None;
    let result = if rng.u32(..500) == 0 {
        let big = rng.usize(1_000_000..5_000_000);
        let bytes = text(rng, big).into_bytes();
        let name = format!("spill-{tag}-{k}.txt");
        let head = String::from_utf8_lossy(&bytes[..2000]).into_owned();
        spill = Some((name.clone(), bytes));
        format!("[Output too large]\nspill: .hel/sessions/x/spill/{name}\n{head}")
    } else {
        text(rng, size)
    };
    let tool = json!({"role": "tool", "tool_call_id": call_id, "content": result});
    let n = rng.usize(300..700);
    let answer = json!({"role": "assistant", "content": text(rng, n)});
    Exchange {
        messages: vec![user, assistant, tool, answer],
        spill,
    }
}

/// The system message every conversation starts with.
pub fn system() -> Value {
    json!({"role": "system", "content": "You are hel, a coding agent. Environment: linux, bash, /home/user/project."})
}
