//! `hel-mock`: a scripted OpenAI-compatible chat-completions server on
//! 127.0.0.1 for hel's tests, evals and offline demo.
//!
//! ```text
//! hel-mock [--port N] [--script FILE] [--log FILE] [--recall]
//! ```
//! It prints `listening on 127.0.0.1:<port>` on stdout once it accepts
//! connections (tests wait for that line), then answers each
//! `POST …/chat/completions` with the next step of the script, and appends
//! every request body it receives as one JSON line to the `--log` file.
//!
//! A script is a JSON array of steps, used in order; each step is an object:
//! - `{"content": "text"}`: a final answer.
//! - `{"tool_calls": [{"name": "bash", "arguments": {...}}, ...], "content"?: "..."}`:
//!   tool calls (`arguments` may be an object, encoded for the wire, or a raw
//!   string sent as it is, to script invalid JSON). Call ids are `call_<n>`.
//! - `{"message": {...}}`: this exact assistant message (extra fields kept).
//! - `"finish_reason": "length"` on any of the above: a cut answer.
//! - `{"status": 500, "body"?: "..."}`: an HTTP error.
//! - `{"raw": "..."}`: this response body with status 200 (malformed JSON).
//! - `"delay_ms": N` on any step: wait that long before answering.
//! - `"match": "text"` on any step: the step is held back for the first
//!   request whose body contains the text (steps without it go in order).
//! - `{"recall": true}`: answer as `--recall` does (below).
//! - `{"endless": true}`: status 200 and a chunked body that never ends
//!   (the start of a JSON answer, then `a` forever) until the client
//!   hangs up.
//! - `{"huge_content": N, "chunked"?: true}`: a valid answer whose content
//!   is N bytes of `x`, streamed with its Content-Length (or chunked, with
//!   none).
//! - `{"declared_length": N}`: headers declaring a Content-Length of N
//!   bytes, then a few bytes of body, held until the client hangs up.
//!
//! In tool-call arguments, `{{spill}}` and `{{cursor}}` stand for the newest
//! spill path and read_file cursor in the messages of the request, as a
//! model would copy them from its context.
//!
//! When the script runs out the server answers HTTP 500 `script exhausted`.
//! With `--recall` and no script, every reply is computed from the request:
//! the newest identifier of the form `ID-` + hex digits found in the
//! messages it was sent (the last user message excluded when it asks), or
//! `UNKNOWN`. That measures what context a client really sent.
//!
//! `usage.prompt_tokens` is the request body's length / 4 and
//! `completion_tokens` the answer's length / 4 + 1, so they grow with size.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

struct State {
    steps: Vec<Value>,
    /// Which steps have been used.
    used: Vec<bool>,
    calls: u64,
    log: Option<std::fs::File>,
    recall: bool,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("hel-mock: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let mut port = 0u16;
    let mut script: Option<String> = None;
    let mut log: Option<String> = None;
    let mut recall = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--port" => {
                port = value("--port")?
                    .parse()
                    .map_err(|_| "--port takes a number")?
            }
            "--script" => script = Some(value("--script")?),
            "--log" => log = Some(value("--log")?),
            "--recall" => recall = true,
            "-h" | "--help" => {
                println!("usage: hel-mock [--port N] [--script FILE] [--log FILE] [--recall]\nA scripted OpenAI-compatible model server; see the crate docs for the script format.");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    let steps = match &script {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
            match serde_json::from_str(&text) {
                Ok(Value::Array(a)) => a,
                _ => return Err(format!("{path}: the script must be a JSON array of steps")),
            }
        }
        None => Vec::new(),
    };
    let log = match &log {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| format!("{p}: {e}"))?,
        ),
        None => None,
    };
    let listener = TcpListener::bind(("127.0.0.1", port)).map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("listening on {addr}");
    let _ = std::io::stdout().flush();
    let state = Arc::new(Mutex::new(State {
        used: vec![false; steps.len()],
        steps,
        calls: 0,
        log,
        recall,
    }));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let state = Arc::clone(&state);
        std::thread::spawn(move || {
            let _ = serve(stream, &state);
        });
    }
    Ok(())
}

fn serve(stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    if !path.ends_with("/chat/completions") {
        return respond(&stream, 404, "{\"error\":{\"message\":\"not found\"}}");
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let step = {
        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(log) = s.log.as_mut() {
            let _ = writeln!(log, "{}", String::from_utf8_lossy(&body));
        }
        s.calls += 1;
        let text = String::from_utf8_lossy(&body);
        // A step with "match" answers the first request containing its text;
        // the other steps answer the remaining requests in order.
        let matched = (0..s.steps.len()).find(|&i| {
            !s.used[i]
                && s.steps[i]
                    .get("match")
                    .and_then(Value::as_str)
                    .is_some_and(|m| text.contains(m))
        });
        let next = matched.or_else(|| {
            (0..s.steps.len()).find(|&i| !s.used[i] && s.steps[i].get("match").is_none())
        });
        let step = if let Some(i) = next {
            s.used[i] = true;
            Some(s.steps[i].clone())
        } else if s.recall {
            Some(json!({"recall": true}))
        } else {
            None
        };
        step.map(|st| (st, s.calls))
    };
    let Some((step, n)) = step else {
        return respond(
            &stream,
            500,
            "{\"error\":{\"message\":\"script exhausted\"}}",
        );
    };
    if let Some(ms) = step.get("delay_ms").and_then(Value::as_u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }
    if let Some(status) = step.get("status").and_then(Value::as_u64) {
        let body = step
            .get("body")
            .and_then(Value::as_str)
            .unwrap_or("{\"error\":{\"message\":\"scripted error\"}}");
        return respond(&stream, status as u16, body);
    }
    if let Some(raw) = step.get("raw").and_then(Value::as_str) {
        return respond(&stream, 200, raw);
    }
    if step.get("endless").and_then(Value::as_bool) == Some(true) {
        return endless(&stream);
    }
    if let Some(n) = step.get("huge_content").and_then(Value::as_u64) {
        let chunked = step.get("chunked").and_then(Value::as_bool) == Some(true);
        return huge(&stream, n, chunked);
    }
    if let Some(n) = step.get("declared_length").and_then(Value::as_u64) {
        write!(
            &stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {n}\r\nconnection: close\r\n\r\n{{\"choices\""
        )?;
        (&stream).flush()?;
        // Held until the client hangs up (a read returns 0 or fails).
        let _ = (&stream).read(&mut [0u8; 1]);
        return Ok(());
    }
    let message = build_message(&step, &request, n);
    let content_len = serde_json::to_string(&message).map_or(0, |s| s.len());
    let reply = json!({
        "id": format!("mock-{n}"),
        "object": "chat.completion",
        "model": request.get("model").cloned().unwrap_or(json!("mock")),
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": step.get("finish_reason").cloned().unwrap_or_else(|| json!(
                if message.get("tool_calls").is_some() { "tool_calls" } else { "stop" })),
        }],
        "usage": {
            "prompt_tokens": body.len() / 4,
            "completion_tokens": content_len / 4 + 1,
            "total_tokens": body.len() / 4 + content_len / 4 + 1,
        },
    });
    respond(&stream, 200, &reply.to_string())
}

fn build_message(step: &Value, request: &Value, n: u64) -> Value {
    if let Some(m) = step.get("message") {
        return m.clone();
    }
    if step.get("recall").and_then(Value::as_bool) == Some(true) {
        return json!({"role": "assistant", "content": recall(request)});
    }
    let mut msg = json!({"role": "assistant", "content": step.get("content").cloned().unwrap_or(Value::Null)});
    if let Some(calls) = step.get("tool_calls").and_then(Value::as_array) {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let args = match c.get("arguments") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => "{}".to_owned(),
                };
                let args = fill_placeholders(&args, request);
                json!({
                    "id": c.get("id").cloned().unwrap_or_else(|| json!(format!("call_{n}_{i}"))),
                    "type": "function",
                    "function": {"name": c.get("name").cloned().unwrap_or(json!("")), "arguments": args},
                })
            })
            .collect();
        msg["tool_calls"] = Value::Array(calls);
    }
    msg
}

/// Replace `{{spill}}` and `{{cursor}}` in tool-call arguments with the
/// newest spill path and read_file cursor found in the request's messages,
/// as a model would copy them from its context.
fn fill_placeholders(args: &str, request: &Value) -> String {
    if !args.contains("{{") {
        return args.to_owned();
    }
    let mut spill = String::new();
    let mut cursor = String::new();
    for m in request
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = m.get("content").and_then(Value::as_str).unwrap_or("");
        for line in text.lines() {
            if let Some(p) = line.strip_prefix("spill: ") {
                spill = p.trim().to_owned();
            }
            if let Some(rest) =
                line.strip_prefix("[Read truncated. Continue with read_file({\"cursor\":\"")
            {
                cursor = rest.split('"').next().unwrap_or("").to_owned();
            }
        }
    }
    args.replace("{{spill}}", &spill)
        .replace("{{cursor}}", &cursor)
}

/// The newest `ID-<hex>` token in the messages before the last one.
fn recall(request: &Value) -> String {
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return "UNKNOWN".into();
    };
    let earlier = &messages[..messages.len().saturating_sub(1)];
    for m in earlier.iter().rev() {
        let text = m.get("content").and_then(Value::as_str).unwrap_or("");
        if let Some(id) = find_id(text) {
            return id;
        }
    }
    "UNKNOWN".into()
}

fn find_id(text: &str) -> Option<String> {
    let mut found = None;
    let mut rest = text;
    while let Some(pos) = rest.find("ID-") {
        let tail = &rest[pos + 3..];
        let hex: String = tail.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
        if hex.len() >= 8 {
            found = Some(format!("ID-{hex}"));
        }
        rest = &rest[pos + 3..];
    }
    found
}

/// The start of a JSON answer, then `a` forever, chunked, until the client
/// hangs up (the write fails).
fn endless(mut stream: &TcpStream) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    )?;
    let head = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":""#;
    write_chunk(stream, head)?;
    let block = vec![b'a'; 64 * 1024];
    loop {
        write_chunk(stream, &block)?;
    }
}

fn write_chunk(mut stream: &TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    write!(stream, "{:x}\r\n", bytes.len())?;
    stream.write_all(bytes)?;
    stream.write_all(b"\r\n")
}

/// A valid answer whose content is `n` bytes of `x`, streamed.
fn huge(mut stream: &TcpStream, n: u64, chunked: bool) -> std::io::Result<()> {
    let head = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":""#;
    let tail = br#""},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#;
    if chunked {
        write!(stream, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")?;
    } else {
        let len = head.len() as u64 + n + tail.len() as u64;
        write!(stream, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n")?;
    }
    let mut send = |bytes: &[u8]| {
        if chunked {
            write_chunk(stream, bytes)
        } else {
            stream.write_all(bytes)
        }
    };
    send(head)?;
    let block = vec![b'x'; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let k = left.min(block.len() as u64) as usize;
        send(&block[..k])?;
        left -= k as u64;
    }
    send(tail)?;
    if chunked {
        stream.write_all(b"0\r\n\r\n")?;
    }
    stream.flush()
}

fn respond(mut stream: &TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        429 => "Too Many Requests",
        _ => "Error",
    };
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}
