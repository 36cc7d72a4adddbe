//! `hel-mock`: a scripted OpenAI-compatible chat-completions server on
//! 127.0.0.1 for hel's tests, evals and offline demo. The tests start it
//! in-process ([`Server::start`]); the `hel-mock` binary serves the same
//! from the command line:
//!
//! ```text
//! hel-mock [--port N] [--script FILE] [--log FILE] [--recall]
//! ```
//! The binary prints `listening on 127.0.0.1:<port>` on stdout once it
//! accepts connections. `GET …/models` lists [`Config::models`] (the
//! binary's `--models`, default `mock-model`) as an OpenAI-compatible
//! `{"object": "list", "data": [{"id": …}]}`, or answers 404 when there
//! are none. The server answers each `POST …/chat/completions`
//! with the next step of the script, keeps every request body it receives
//! ([`Server::requests`]) and appends each as one JSON line to the log
//! file, if any.
//!
//! A script is a JSON array of steps, used in order; each step is an object:
//! - `{"content": "text"}`: a final answer.
//! - `{"tool_calls": [{"name": "bash", "arguments": {...}}, ...], "content"?: "..."}`:
//!   tool calls (`arguments` may be an object, encoded for the wire, or a raw
//!   string sent as it is, to script invalid JSON). Call ids are `call_<n>`.
//! - `{"message": {...}}`: this exact assistant message (extra fields kept).
//! - `"finish_reason": "length"` on any of the above: a cut answer.
//! - `{"status": 500, "body"?: "...", "retry_after"?: "..."}`: an HTTP
//!   error (with that `Retry-After` header).
//! - `{"raw": "..."}`: this response body with status 200 (malformed JSON).
//! - `"delay_ms": N` on any step: wait that long before answering.
//! - `"match": "text"` on any step: the step is held back for the first
//!   request whose body contains the text (steps without it go in order).
//! - `{"recall": true}`: answer as `--recall` does (below).
//! - `"repeat": true` on any step: it is never used up (it answers every
//!   request that reaches it: a last answer for a demo that goes on).
//! - `{"endless": true}`: status 200 and a chunked body that never ends
//!   (the start of a JSON answer, then `a` forever) until the client
//!   hangs up.
//! - `{"huge_content": N, "chunked"?: true}`: a valid answer whose content
//!   is N bytes of `x`, streamed with its Content-Length (or chunked, with
//!   none).
//! - `{"zeros": N, "zeros_per_event"?: K}`: a valid answer whose message
//!   carries an extra field holding an array of N zeros (streamed: in one
//!   event, or K at most an event, each under a field of its own).
//! - `{"declared_length": N}`: headers declaring a Content-Length of N
//!   bytes, then a few bytes of body, held until the client hangs up.
//!
//!
//! A request with `"stream": true` gets its answer (a final answer, tool
//! calls, `message`, `recall`, `huge_content`, `endless`) as server-sent
//! events, as OpenAI-compatible servers stream: a first delta with the
//! role and every non-string field, then each string field in pieces of 16
//! characters, then each tool call (id, type and name, then its arguments
//! in pieces), a chunk with the finish reason, a usage chunk when
//! `stream_options.include_usage` asks for it, and `data: [DONE]`; one
//! body frame per event. Steps shape the stream with:
//! - `"piece": N`: N characters per piece.
//! - `"interleave": true`: the tool calls' pieces alternate (by `index`).
//! - `"keepalive": true`: an SSE comment (`: keep-alive`) before every event.
//! - `"frame_bytes": N`: body frames of N bytes, wherever the events end.
//! - `"cut_after": K`: the stream stops after K events (the body ends
//!   there: no finish reason, no `[DONE]`).
//! - `"stall_after": K`: after K events, only a keep-alive comment every
//!   100 ms, forever.
//! - `"no_stream": true`: one JSON body anyway (a server without streaming).
//! - `"usage": "final"`: the usage rides on the chunk with the finish
//!   reason, asked for or not; `"usage": "none"`: no usage anywhere,
//!   streamed or not (servers that ignore `stream_options.include_usage`).
//!
//! `"server": "llama-cpp-python"` on a step answers as that server (0.3.36,
//! `chatml-function-calling`) does, as hel met it: a request with tools
//! but no `tool_choice` gets no tool calls (its tools never reach the
//! model: the step's content instead), a request holding an assistant
//! message whose `content` is null or missing gets its HTTP 500
//! validation error, tool calls come with `content: null` and the
//! deprecated `function_call`, a stream has explicit nulls and never has
//! usage, and a streamed answer that calls tools (with `tool_choice:
//! "auto"`) is a stream that ends with no event at all (its "Automatic
//! streaming tool choice is not supported"); with `"stream_calls": true`
//! the call is streamed as it streams a call `tool_choice` names: its id,
//! type and whole name repeated in every chunk, with `function_call`.
//! With `"context_window": N` too, a request whose tokens (as the mock
//! counts them: body length / 4) and `max_tokens` exceed N gets its HTTP
//! 400 `context_length_exceeded`.
//!
//! In tool-call arguments, `{{spill}}` and `{{cursor}}` stand for the newest
//! spill path and read_file cursor in the messages of the request, and
//! `{{result}}` (within a JSON string) the newest tool result's content,
//! as a model would copy them from its context.
//!
//! When the script runs out the server answers HTTP 500 `script exhausted`.
//! With `--recall` and no script, every reply is computed from the request:
//! the newest identifier of the form `ID-` + hex digits found in the
//! messages it was sent (the last user message excluded when it asks), or
//! `UNKNOWN`. That measures what context a client really sent.
//!
//! `usage.prompt_tokens` is the request body's length / 4 and
//! `completion_tokens` the answer's length / 4 + 1, so they grow with size.

mod body;
mod llama;
mod reply;
mod script;
mod sse;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::sync::oneshot;

use body::MockBody;
pub use script::Step;

/// What a server serves.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The steps, used in order (see the crate docs).
    pub steps: Vec<Step>,
    /// A file every request body is appended to, one per line.
    pub log: Option<PathBuf>,
    /// Answer as `--recall` does when the script has no step left.
    pub recall: bool,
    /// The models `GET …/models` lists (none: that answers 404, as a
    /// server without the endpoint does).
    pub models: Vec<String>,
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum MockError {
    #[error("{}: {source}", path.display())]
    Script {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: the script must be a JSON array of steps ({source})", path.display())]
    ScriptFormat {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{}: {source}", path.display())]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("bind: {0}")]
    Bind(std::io::Error),
    #[error("cannot start the server: {0}")]
    Runtime(std::io::Error),
}

impl Config {
    /// The steps of the script file at `path` (a JSON array).
    pub fn read_script(path: &Path) -> Result<Vec<Step>, MockError> {
        let text = std::fs::read_to_string(path).map_err(|source| MockError::Script {
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| MockError::ScriptFormat {
            path: path.to_owned(),
            source,
        })
    }

    /// A config from a script given as JSON (tests).
    pub fn from_json(script: &Value) -> Result<Config, serde_json::Error> {
        Ok(Config {
            steps: serde_json::from_value(script.clone())?,
            ..Config::default()
        })
    }
}

/// What the server's connections share.
struct State {
    script: script::Script,
    /// Every request body received, in order.
    requests: Vec<Bytes>,
    /// When each request's body had arrived.
    times: Vec<std::time::Instant>,
    log: Option<std::fs::File>,
    recall: bool,
    models: Vec<String>,
}

/// A running server on 127.0.0.1. Dropping it stops it.
pub struct Server {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Serve `config` on 127.0.0.1:`port` (0: any free port), from a
    /// thread of its own.
    pub fn start(port: u16, config: Config) -> Result<Server, MockError> {
        let log = match &config.log {
            Some(p) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|source| MockError::Log {
                        path: p.clone(),
                        source,
                    })?,
            ),
            None => None,
        };
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).map_err(MockError::Bind)?;
        listener.set_nonblocking(true).map_err(MockError::Bind)?;
        let addr = listener.local_addr().map_err(MockError::Bind)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(MockError::Runtime)?;
        let state = Arc::new(Mutex::new(State {
            script: script::Script::new(config.steps),
            requests: Vec::new(),
            times: Vec::new(),
            log,
            recall: config.recall,
            models: config.models,
        }));
        let (stop, stopped) = oneshot::channel();
        let shared = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name("hel-mock".into())
            .spawn(move || runtime.block_on(accept(listener, shared, stopped)))
            .map_err(MockError::Runtime)?;
        Ok(Server {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`: the base URL to give a client.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request body received so far, in order, parsed (`null` for
    /// one that is not JSON).
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.state)
            .requests
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap_or(Value::Null))
            .collect()
    }

    /// When each request received so far had arrived, in order.
    pub fn request_times(&self) -> Vec<std::time::Instant> {
        lock(&self.state).times.clone()
    }

    /// Serve until the process ends.
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Accept connections until told to stop; then every connection ends with
/// the runtime.
async fn accept(
    listener: std::net::TcpListener,
    state: Arc<Mutex<State>>,
    mut stop: oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        let stream = tokio::select! {
            _ = &mut stop => return,
            conn = listener.accept() => match conn {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let service = service_fn(move |req| respond(req, Arc::clone(&state)));
            // One request per connection, as a plain `connection: close`.
            let _ = http1::Builder::new()
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The answer to one request: the next step of the script.
async fn respond(
    req: Request<Incoming>,
    state: Arc<Mutex<State>>,
) -> Result<Response<MockBody>, hyper::Error> {
    let chat = req.uri().path().ends_with("/chat/completions");
    let models = req.method() == hyper::Method::GET && req.uri().path().ends_with("/models");
    let body = req.into_body().collect().await?.to_bytes();
    if models {
        let listed = lock(&state).models.clone();
        if !listed.is_empty() {
            let data: Vec<Value> = listed
                .iter()
                .map(|id| serde_json::json!({"id": id, "object": "model", "owned_by": "hel-mock"}))
                .collect();
            let body = serde_json::json!({"object": "list", "data": data}).to_string();
            return Ok(body::json(StatusCode::OK, body));
        }
    }
    if !chat {
        return Ok(body::json(
            StatusCode::NOT_FOUND,
            "{\"error\":{\"message\":\"not found\"}}".into(),
        ));
    }
    let (step, n) = {
        let mut s = lock(&state);
        if let Some(log) = s.log.as_mut() {
            use std::io::Write;
            let _ = writeln!(log, "{}", String::from_utf8_lossy(&body));
        }
        s.requests.push(body.clone());
        s.times.push(std::time::Instant::now());
        let n = s.requests.len() as u64;
        let text = String::from_utf8_lossy(&body);
        let step = s.script.next(&text).or_else(|| s.recall.then(Step::recall));
        (step, n)
    };
    let Some(step) = step else {
        return Ok(body::json(
            StatusCode::INTERNAL_SERVER_ERROR,
            "{\"error\":{\"message\":\"script exhausted\"}}".into(),
        ));
    };
    if let Some(ms) = step.delay_ms {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Ok(reply::answer(&step, &request, body.len(), n))
}
