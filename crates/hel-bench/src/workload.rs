//! Deterministic, seeded conversations shaped like real coding sessions:
//! user messages ~200 B, assistant messages ~1 KB with a tool call, tool
//! results 1–50 KB (log-uniform) and, rarely, a spill of 1–5 MB.

use serde_json::{json, Value};

/// xorshift64*: small, fast, deterministic.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
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
        let w = WORDS[rng.below(WORDS.len() as u64) as usize];
        s.push_str(w);
        match rng.below(12) {
            0 => s.push('\n'),
            1 => s.push_str(&format!(" {} ", rng.below(10_000))),
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
    let n = 150 + rng.below(100) as usize;
    let user = json!({"role": "user", "content": text(rng, n)});
    let args = json!({"command": text(rng, 60)}).to_string();
    let n = 700 + rng.below(300) as usize;
    let body = text(rng, n);
    let assistant = json!({
        "role": "assistant",
        "content": body,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "bash", "arguments": args}}],
    });
    // Log-uniform 1–50 KB.
    let size = (1024.0 * 50f64.powf(rng.unit())) as usize;
    let mut spill = None;
    let result = if rng.below(500) == 0 {
        let big = 1_000_000 + rng.below(4_000_000) as usize;
        let bytes = text(rng, big).into_bytes();
        let name = format!("spill-{tag}-{k}.txt");
        let head = String::from_utf8_lossy(&bytes[..2000]).into_owned();
        spill = Some((name.clone(), bytes));
        format!("[Output too large]\nspill: .hel/sessions/x/spill/{name}\n{head}")
    } else {
        text(rng, size)
    };
    let tool = json!({"role": "tool", "tool_call_id": call_id, "content": result});
    let n = 300 + rng.below(400) as usize;
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
