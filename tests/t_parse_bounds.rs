//! Parsed size is bounded, not only bytes: what a model server or an MCP
//! server sends is refused past a count of JSON values (however few bytes
//! it takes), in memory measured from outside (the child's peak resident
//! set from `wait4`), and answers are laid out in time linear in them.

use crate::common::*;
use serde_json::json;

/// The peak memory every case here must stay under.
const PEAK_KIB: u64 = 256 * 1024;

/// 33 million zeros: 66 MB of reply, under the 64 MiB response limit.
const ZEROS: u64 = 33_000_000;

/// The one line of the instruction's error on stderr.
fn error_line(run: &Run) -> String {
    run.stderr
        .lines()
        .find(|l| l.starts_with("hel: instruction incomplete (error):"))
        .unwrap_or_else(|| panic!("no error line: {}", run.stderr))
        .to_owned()
}

#[test]
fn a_reply_of_millions_of_values_is_refused_in_bounded_memory() {
    let p = Project::new();
    // Whole (not streamed); streamed as one event of 66 MB, as one of
    // 16 MB, and spread over events that each hold fewer values than the
    // limit.
    let cases = [
        (
            json!({"zeros": ZEROS}),
            true,
            "refused (more than 2000000 JSON values",
        ),
        (
            json!({"zeros": ZEROS}),
            false,
            "a line of the event stream is longer than 16 MiB: refused",
        ),
        (
            json!({"zeros": 8_000_000}),
            false,
            "a stream event is refused (more than 2000000 JSON values",
        ),
        (
            json!({"zeros": ZEROS, "zeros_per_event": 1_500_000}),
            false,
            "the streamed response holds more than 2000000 JSON values: refused",
        ),
    ];
    for (step, whole, said) in cases {
        let mock = Mock::start(json!([step.clone()]));
        let mut cmd = p.hel(Some(&mock));
        if whole {
            cmd.arg("--no-stream");
        }
        let m = run_measured(cmd.args(["-p", "x"]));
        eprintln!("{step} (whole: {whole}): peak RSS {} KiB", m.max_rss_kib);
        assert_eq!(m.run.code, 1, "{step}: {}", m.run.stderr);
        let line = error_line(&m.run);
        assert!(line.contains(said), "{step}: {line}");
        assert!(
            m.max_rss_kib < PEAK_KIB,
            "{step}: peak RSS {} KiB",
            m.max_rss_kib
        );
        assert_eq!(mock.requests().len(), 1, "not retried");
    }
    // Under the limit, the extra field reaches the session as it came.
    for whole in [true, false] {
        let mock = Mock::start(json!([{"zeros": 1000, "zeros_per_event": 300}]));
        let mut cmd = p.hel(Some(&mock));
        if whole {
            cmd.arg("--no-stream");
        }
        let run = Run::from_cmd(cmd.args(["-p", "x"]));
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.stdout, "hi\n");
    }
}

/// `tests/mcp/hostile.py MODE` as server `name` of the user config: plain
/// JSON-RPC lines (no SDK), run by the system's python3.
fn hostile_config(p: &Project, servers: &[(&str, &str, &str)]) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp/hostile.py")
        .canonicalize()
        .unwrap();
    let mut text = String::new();
    for (name, mode, extra) in servers {
        text.push_str(&format!(
            "[mcp_servers.{name}]\ncommand = \"python3\"\nargs = [{:?}, {mode:?}]\n{extra}\n",
            script.display().to_string()
        ));
    }
    let dir = p.home.path().join(".config/hel");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

#[test]
fn an_mcp_tool_list_of_millions_of_values_is_refused_in_bounded_memory() {
    let p = Project::new();
    // 120 MB of `0,` in one tool's schema, on every page.
    hostile_config(&p, &[("huge", "huge-list", "")]);
    let m = run_measured(p.hel(None).args(["mcp", "list"]));
    eprintln!("huge-list: peak RSS {} KiB", m.max_rss_kib);
    assert_eq!(m.run.code, 1, "{}", m.run.stderr);
    assert!(
        m.run.stdout.contains(
            "failed: listing its tools failed: Mcp error: -32600: hel refused the server's answer: more than 2000000 JSON values"
        ),
        "{}",
        m.run.stdout
    );
    assert!(m.max_rss_kib < PEAK_KIB, "peak RSS {} KiB", m.max_rss_kib);

    // 12 pages, each under the limit of a message: what is kept of each
    // tool is bounded as its page arrives, not once the list is whole.
    // (A generous timeout: the pages are slow to read on a loaded machine.)
    hostile_config(&p, &[("paged", "many-pages", "startup_timeout_sec = 600")]);
    let m = run_measured(p.hel(None).args(["mcp", "list"]));
    eprintln!("many-pages: peak RSS {} KiB", m.max_rss_kib);
    assert_eq!(m.run.code, 0, "{}", m.run.stderr);
    assert!(
        m.run.stdout.contains("started, 0 tools"),
        "{}",
        m.run.stdout
    );
    for page in 1..=12 {
        assert!(
            m.run.stdout.contains(&format!(
                "MCP server `paged`: tool `t{page}` left out: its input schema is over 65536 bytes"
            )),
            "page {page}: {}",
            m.run.stdout
        );
    }
    assert!(m.max_rss_kib < PEAK_KIB, "peak RSS {} KiB", m.max_rss_kib);

    // A line that never ends: the start's timeout fires while it arrives.
    hostile_config(
        &p,
        &[("endless", "endless-list", "startup_timeout_sec = 2")],
    );
    let started = std::time::Instant::now();
    let m = run_measured(p.hel(None).args(["mcp", "list"]));
    eprintln!(
        "endless-list: peak RSS {} KiB, {:?}",
        m.max_rss_kib,
        started.elapsed()
    );
    assert_eq!(m.run.code, 1, "{}", m.run.stderr);
    assert!(
        m.run.stdout.contains("failed: did not start within 2s"),
        "{}",
        m.run.stdout
    );
    assert!(m.max_rss_kib < PEAK_KIB, "peak RSS {} KiB", m.max_rss_kib);
}

#[test]
fn an_mcp_result_of_millions_of_values_is_an_error_the_model_reads() {
    let p = Project::new();
    hostile_config(&p, &[("h", "huge-result", "")]);
    let mock = Mock::start(json!([
        {"tool_calls": [call("mcp__h__poke", json!({}))]},
        {"content": "done"},
    ]));
    let m = run_measured(p.hel(Some(&mock)).args(["--access", "auto", "-p", "x"]));
    eprintln!("huge-result: peak RSS {} KiB", m.max_rss_kib);
    assert_eq!(m.run.code, 0, "{}", m.run.stderr);
    assert_eq!(m.run.stdout, "done\n");
    let result = mock
        .messages(1)
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .unwrap();
    assert!(
        result.starts_with("error: MCP server `h`")
            && result.contains("hel refused the server's answer: more than 2000000 JSON values"),
        "{result}"
    );
    assert!(m.max_rss_kib < PEAK_KIB, "peak RSS {} KiB", m.max_rss_kib);
    // The instruction ended: the session is listed as complete.
    let run = p.run(None, &["sessions"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("never ended"), "{}", run.stdout);
}

/// A session forged in `p`'s store whose messages are a system message
/// and the message blob `payload` (raw bytes: a repeated key cannot be
/// written canonically); returns the session's id.
fn forge_with_blob(p: &Project, sid: &str, payload: &[u8]) {
    use hel_store::testing;
    let root = p.path().join(".hel");
    let plant = |kind: &str, payload: &[u8]| {
        let (_, canonical) = testing::encode(kind, payload);
        testing::plant(&root, &canonical)
    };
    let blob = |v: &serde_json::Value| plant("blob", &hel_store::canonical::to_vec(v));
    let message = plant("blob", payload);
    let system = json!({"role": "system", "content": "You are hel."});
    let node = json!({"count": 2, "items": [{"m": system}, {"b": message.to_hex()}], "prev": null});
    let node = plant("list", &hel_store::canonical::to_vec(&node));
    let snap = json!({
        "schema_version": 3,
        "session_id": sid,
        "parents": [],
        "created_at": "2026-11-30T00:53:20.000Z",
        "created_at_ms": 1796000000000u64,
        "cwd": p.path().display().to_string(),
        "request_config": blob(&json!({})).to_hex(),
        "meter": null,
        "cursors": blob(&json!([])).to_hex(),
        "messages": {"root": node.to_hex(), "count": 2},
        "spill": {},
        "record": "answer",
        "summary": {"messages": 2, "checkpoints": 1, "instruction": "forged", "input_tokens": 0, "output_tokens": 0},
    });
    let snap = plant("snapshot", &hel_store::canonical::to_vec(&snap));
    testing::publish(&root, &sid.parse().unwrap(), &snap);
}

#[test]
fn stored_json_with_a_repeated_key_or_millions_of_values_is_a_fault() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "first answer"}]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let twice = "0badf00d-0000-4000-8000-0000000000d1";
    forge_with_blob(&p, twice, br#"{"content":"a","content":"b","role":"user"}"#);
    let many = "0badf00d-0000-4000-8000-0000000000d2";
    let zeros = format!(
        r#"{{"content":"a","extra":[{}0],"role":"user"}}"#,
        "0,".repeat(2_100_000)
    );
    forge_with_blob(&p, many, zeros.as_bytes());
    for (sid, said) in [
        (twice, "a key repeated in one object"),
        (many, "more than 2000000 JSON values"),
    ] {
        let m = run_measured(p.hel(None).args(["sessions", "show", sid]));
        eprintln!("sessions show {sid}: peak RSS {} KiB", m.max_rss_kib);
        assert_eq!(m.run.code, 1, "{}", m.run.stderr);
        assert!(m.run.stderr.contains(said), "{sid}: {}", m.run.stderr);
        assert!(m.max_rss_kib < PEAK_KIB, "peak RSS {} KiB", m.max_rss_kib);
    }
    let run = p.run(None, &["fsck"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    for said in [
        "a key repeated in one object",
        "more than 2000000 JSON values",
    ] {
        assert!(run.stdout.contains(said), "{said}: {}", run.stdout);
    }
}
