//! MCP servers as tools: a real server made with the official Python SDK
//! (tests/mcp/server.py, over stdio and streamable HTTP) and hostile ones
//! (tests/mcp/hostile.py): the tools in the requests, calls and their
//! results, spill, access modes, timeouts, what a checkpoint records, a
//! resume with a server gone, and no process left behind.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};

/// The Python with the `mcp` package that tools/test installs
/// (`HEL_TEST_MCP_PYTHON`); None (the test is skipped) only when
/// `HEL_SKIP_MCP=1` says so.
pub(crate) fn python() -> Option<String> {
    match std::env::var("HEL_TEST_MCP_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ if std::env::var_os("HEL_SKIP_MCP").is_some() => {
            eprintln!("skipped: HEL_SKIP_MCP is set and no Python with the mcp package was given");
            None
        }
        _ => panic!(
            "no Python with the mcp package: run the tests through tools/test (it installs one), or set HEL_SKIP_MCP=1 to skip this test"
        ),
    }
}

fn script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp")
        .join(name)
        .canonicalize()
        .unwrap()
        .display()
        .to_string()
}

pub(crate) fn config_file(p: &Project, text: &str) {
    let dir = p.home.path().join(".config/hel");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// A `[mcp_servers.NAME]` table for the real server over stdio.
pub(crate) fn real(py: &str, name: &str, extra: &str) -> String {
    format!(
        "[mcp_servers.{name}]\ncommand = {py:?}\nargs = [{:?}]\n{extra}\n",
        script("server.py")
    )
}

/// A table for a hostile server in `mode`.
fn hostile(py: &str, name: &str, mode: &str, extra: &str) -> String {
    format!(
        "[mcp_servers.{name}]\ncommand = {py:?}\nargs = [{:?}, {mode:?}]\n{extra}\n",
        script("hostile.py")
    )
}

/// The function names of request `i`'s tools.
fn offered(mock: &Mock, i: usize) -> Vec<String> {
    mock.requests()[i]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|d| d["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The request config the session's newest checkpoint records.
fn saved_config(p: &Project, session: &str) -> Value {
    let store = hel_store::Store::open(&p.path()).unwrap();
    let head = store.head(&session.parse().unwrap()).unwrap();
    serde_json::to_value(store.load(&head).unwrap().record.config).unwrap()
}

/// Wait (at most 10 s) until process `pid` is gone or a zombie nobody
/// reaped yet; false if it still runs then.
fn ended(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) => {
                let state = stat.rsplit_once(')').map(|(_, r)| r.trim_start());
                if state.is_some_and(|s| s.starts_with('Z') || s.starts_with('X')) {
                    return true;
                }
            }
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server's log, where its stderr goes.
fn log_of(server: &str) -> PathBuf {
    std::env::temp_dir()
        .join(format!("hel-runs-{}", rustix::process::geteuid().as_raw()))
        .join("mcp-logs")
        .join(format!("mcp-{server}.log"))
}

#[test]
fn a_real_servers_tools_are_offered_called_and_only_its_name_saved() {
    let Some(py) = python() else { return };
    let p = Project::new();
    config_file(
        &p,
        &real(
            &py,
            "real1",
            "env = { NAMED_API_KEY = \"named-value-5c1\" }\nread_only_tools = [\"echo\"]",
        ),
    );
    let canary = p.home.path().join("canary");
    std::fs::write(&canary, "x").unwrap();
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("mcp__real1__add", json!({"a": 2, "b": 3})),
            call("mcp__real1__env", json!({"name": "HEL_API_KEY"})),
            call("mcp__real1__env", json!({"name": "OTHER_API_KEY"})),
            call("mcp__real1__env", json!({"name": "NAMED_API_KEY"})),
            call("mcp__real1__fds", json!({})),
            call("mcp__real1__pid", json!({})),
        ]},
        {"content": "done"},
    ]));
    // hel started with a descriptor it did not open (9, not close-on-exec)
    // and API keys in its environment.
    let mut cmd = Command::new("bash");
    cmd.current_dir(p.dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p.home.path())
        .env("HEL_API_KEY", "hel-key-value")
        .env("OTHER_API_KEY", "other-key-value")
        .args(["-c", "exec 9<\"$0\"; exec \"$@\""])
        .arg(&canary)
        .arg(hel_bin())
        .args(["--base-url", &mock.url, "--model", "mock-model"])
        .args(["--access", "auto", "-p", "x"])
        .stdin(std::process::Stdio::null());
    let run = Run::from_cmd(&mut cmd);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let tools = mock.requests()[0]["tools"].as_array().unwrap().clone();
    let add = tools
        .iter()
        .find(|t| t["function"]["name"] == "mcp__real1__add")
        .unwrap_or_else(|| panic!("no MCP tool in {tools:?}"));
    assert_eq!(
        add["function"]["parameters"]["properties"]["a"]["type"],
        "integer"
    );
    assert!(add["function"]["description"]
        .as_str()
        .unwrap()
        .contains("Add two integers"));
    assert!(offered(&mock, 0).contains(&"bash".to_owned()));
    let r = tool_results(&mock, 1);
    assert_eq!(r[0], "5");
    assert_eq!(r[1], "unset", "hel's key does not reach the server");
    assert_eq!(r[2], "unset", "no API key does");
    assert_eq!(r[3], "set", "a key the config names does");
    let fds: Vec<&str> = r[4].lines().collect();
    assert!(
        !r[4].contains(&*canary.display().to_string()) && !r[4].contains(".hel"),
        "descriptors the server inherited: {fds:?}"
    );
    let pid: u32 = r[5].parse().unwrap();
    assert!(
        ended(pid),
        "the server (pid {pid}) still runs after hel exited"
    );
    let log = std::fs::read_to_string(log_of("real1")).unwrap();
    assert!(log.contains("hel-test server starting"), "{log}");
    assert!(!run.stderr.contains("hel-test server starting"));
    let config = saved_config(&p, &run.session());
    assert_eq!(config["mcp_servers"], json!(["real1"]));
    let text = config.to_string();
    for secret in ["named-value-5c1", &script("server.py"), &py] {
        assert!(!text.contains(secret), "the checkpoint records {secret}");
    }
}

#[test]
fn a_50_mb_result_is_spilled_not_sent() {
    let Some(py) = python() else { return };
    let p = Project::new();
    config_file(&p, &real(&py, "big1", ""));
    let mock = Mock::start(json!([
        {"tool_calls": [call("mcp__big1__big", json!({"megabytes": 50}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = tool_results(&mock, 1);
    assert!(
        r[0].starts_with("[Output too large"),
        "{}",
        r[0].chars().take(200).collect::<String>()
    );
    assert!(r[0].len() < 5_000, "{} bytes sent", r[0].len());
    let body = serde_json::to_string(&mock.requests()[1]).unwrap();
    assert!(body.len() < 100_000, "the request is {} bytes", body.len());
    let whole = spill_bytes(&p, &run.session());
    assert!(whole.len() >= 50_000_000, "{} bytes spilled", whole.len());
    assert!(whole.starts_with(b"BEGIN\n") && whole.ends_with(b"END"));
}

#[test]
fn access_modes_trust_the_config_not_the_servers_hints() {
    let Some(py) = python() else { return };
    let p = Project::new();
    config_file(
        &p,
        &format!(
            "{}{}",
            real(&py, "ro1", "read_only_tools = [\"echo\"]"),
            // Its one tool says readOnlyHint: true; the config lists none.
            hostile(&py, "hint1", "exit", "")
        ),
    );
    let calls = json!([
        {"tool_calls": [
            call("mcp__ro1__echo", json!({"text": "hi"})),
            call("mcp__ro1__add", json!({"a": 1, "b": 1})),
            call("mcp__hint1__poke", json!({})),
        ]},
        {"content": "done"},
    ]);
    // Read-only: only the listed tool is offered, and only it runs.
    let mock = Mock::start(calls.clone());
    let run = p.run(Some(&mock), &["--access", "read-only", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let names = offered(&mock, 0);
    assert!(names.contains(&"mcp__ro1__echo".to_owned()), "{names:?}");
    assert!(!names
        .iter()
        .any(|n| n == "mcp__ro1__add" || n == "mcp__hint1__poke"));
    let r = tool_results(&mock, 1);
    assert_eq!(r[0], "hi");
    assert!(r[1].contains("unknown tool"), "{}", r[1]);
    assert!(r[2].contains("unknown tool"), "{}", r[2]);
    // Confirm, with nobody to ask: the listed tool runs, the rest are
    // denied (the hostile one would have exited).
    let mock = Mock::start(calls);
    let run = p.run(Some(&mock), &["--access", "confirm", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(offered(&mock, 0).contains(&"mcp__ro1__add".to_owned()));
    let r = tool_results(&mock, 1);
    assert_eq!(r[0], "hi");
    assert!(
        r[1].starts_with("denied: nobody could be asked"),
        "{}",
        r[1]
    );
    assert!(
        r[2].starts_with("denied: nobody could be asked"),
        "{}",
        r[2]
    );
}

#[test]
fn hostile_servers_are_bounded_reported_and_stopped() {
    let Some(py) = python() else { return };
    let p = Project::new();
    let pids = p.home.path().join("pids");
    let env = format!(
        "env = {{ HOSTILE_PIDS = {:?} }}\n",
        pids.display().to_string()
    );
    let timeout = "tool_timeout_sec = 2\n";
    config_file(
        &p,
        &[
            hostile(&py, "slow1", "slow", &format!("{env}{timeout}")),
            hostile(&py, "exit1", "exit", &env),
            hostile(&py, "malformed1", "malformed", &format!("{env}{timeout}")),
            hostile(
                &py,
                "badinit1",
                "bad-init",
                &format!("{env}startup_timeout_sec = 2"),
            ),
            hostile(
                &py,
                "noinit1",
                "no-init",
                &format!("{env}startup_timeout_sec = 2"),
            ),
            "[mcp_servers.missing1]\ncommand = \"/nonexistent/mcp-server\"\n".to_owned(),
        ]
        .concat(),
    );
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("mcp__slow1__poke", json!({})),
            call("mcp__exit1__poke", json!({})),
            call("mcp__exit1__poke", json!({})),
            call("mcp__malformed1__poke", json!({})),
            call("mcp__slow1__poke", json!([1, 2])),
        ]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for (server, why) in [
        ("badinit1", "did not start within 2s"),
        ("noinit1", "did not start within 2s"),
        ("missing1", "cannot start `/nonexistent/mcp-server`"),
    ] {
        assert!(
            run.stderr
                .contains(&format!("MCP server `{server}` left out: {why}")),
            "{server}: {}",
            run.stderr
        );
    }
    let names = offered(&mock, 0);
    for n in [
        "mcp__slow1__poke",
        "mcp__exit1__poke",
        "mcp__malformed1__poke",
    ] {
        assert!(names.contains(&n.to_owned()), "{n} in {names:?}");
    }
    assert!(!names
        .iter()
        .any(|n| n.contains("init1") || n.contains("missing1")));
    let r = tool_results(&mock, 1);
    assert!(
        r[0].contains("`slow1` did not answer within 2s"),
        "{}",
        r[0]
    );
    assert!(r[1].starts_with("error: MCP server `exit1`"), "{}", r[1]);
    assert!(r[2].starts_with("error: MCP server `exit1`"), "{}", r[2]);
    // The line that is not JSON is passed over; the answer that is not a
    // result is an error the model reads.
    assert!(
        r[3].starts_with("error: MCP server `malformed1`"),
        "{}",
        r[3]
    );
    assert!(r[4].contains("not a JSON object"), "{}", r[4]);
    // Every server process, and the child the slow one left running, is
    // gone (they ignore SIGTERM).
    let all: Vec<u32> = std::fs::read_to_string(&pids)
        .unwrap()
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(all.len(), 6, "{all:?}");
    for pid in all {
        assert!(ended(pid), "process {pid} was left running");
    }
}

#[test]
fn a_resumed_session_says_which_server_is_gone() {
    let Some(py) = python() else { return };
    let p = Project::new();
    config_file(
        &p,
        &format!("{}{}", real(&py, "keep1", ""), real(&py, "gone1", "")),
    );
    let mock = Mock::start(json!([
        {"tool_calls": [call("mcp__gone1__add", json!({"a": 1, "b": 2}))]},
        {"content": "first"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    assert_eq!(tool_results(&mock, 1), ["3"]);
    assert_eq!(
        saved_config(&p, &sid)["mcp_servers"],
        json!(["gone1", "keep1"])
    );
    config_file(&p, &real(&py, "keep1", ""));
    let mock = Mock::start(json!([{"content": "second"}]));
    let run = p.run(Some(&mock), &["resume", &sid, "-p", "y"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("this session used MCP server `gone1`, which is not running now"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("toolset changed"), "{}", run.stderr);
    let names = offered(&mock, 0);
    assert!(names.contains(&"mcp__keep1__add".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("mcp__gone1__")));
    assert_eq!(saved_config(&p, &sid)["mcp_servers"], json!(["keep1"]));
    // The same servers again: the toolset is compared once their tools are
    // known, so it has not changed and the saved Meter is kept (Meter
    // rule 4, the MCP definitions in the signature).
    let rec = p.home.path().join("rec");
    let mock = Mock::start(json!([{"content": "third"}]));
    let run = p.run(
        Some(&mock),
        &["resume", &sid, "--record", rec.to_str().unwrap(), "-p", "z"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("toolset changed"), "{}", run.stderr);
    assert!(!run.stderr.contains("not running now"), "{}", run.stderr);
    assert_eq!(record(&rec)["meter_restored"], true);
}

/// The real server over streamable HTTP, started by the test on a free
/// loopback port.
struct HttpServer {
    child: std::process::Child,
    url: String,
}

impl HttpServer {
    fn start(py: &str) -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(py)
            .arg(script("server.py"))
            .args(["http", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Ready when it accepts connections.
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(child.try_wait().unwrap().is_none(), "the HTTP server died");
            assert!(Instant::now() < deadline, "the HTTP server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_streamable_http_server_works_and_its_url_is_not_saved() {
    let Some(py) = python() else { return };
    let server = HttpServer::start(&py);
    let p = Project::new();
    config_file(
        &p,
        &format!(
            "[mcp_servers.web1]\nurl = {:?}\nbearer_token_env_var = \"WEB1_TOKEN\"\n",
            server.url
        ),
    );
    let mock = Mock::start(json!([
        {"tool_calls": [call("mcp__web1__add", json!({"a": 20, "b": 22}))]},
        {"content": "done"},
    ]));
    let run = Run::from_cmd(
        p.hel(Some(&mock))
            .env("WEB1_TOKEN", "token-value-77")
            .args(["--access", "auto", "-p", "x"]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(tool_results(&mock, 1), ["42"]);
    let config = saved_config(&p, &run.session());
    assert_eq!(config["mcp_servers"], json!(["web1"]));
    let text = config.to_string();
    assert!(!text.contains(&server.url) && !text.contains("token-value-77"));
}

#[test]
fn mcp_list_shows_servers_tools_and_failures() {
    let Some(py) = python() else { return };
    let p = Project::new();
    config_file(
        &p,
        &format!(
            "{}{}",
            real(&py, "list1", "read_only_tools = [\"echo\"]"),
            "[mcp_servers.missing2]\ncommand = \"/nonexistent/mcp-server\"\n"
        ),
    );
    let run = p.run(None, &["mcp", "list"]);
    assert_eq!(run.code, 1, "a server did not start: {}", run.stderr);
    assert!(run.stdout.contains("list1  stdio"), "{}", run.stdout);
    assert!(run.stdout.contains("started, 7 tools"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("  mcp__list1__echo (read-only)  Say the text back."),
        "{}",
        run.stdout
    );
    assert!(run
        .stdout
        .contains("missing2  stdio  /nonexistent/mcp-server  failed: cannot start"));
    let run = p.run(None, &["mcp", "list", "--json"]);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["servers"][0]["tools"].as_array().unwrap().len(), 7);
}

#[test]
fn bad_server_tables_are_refused_with_the_name() {
    let p = Project::new();
    for (text, says) in [
        (
            "[mcp_servers.\"a b\"]\ncommand = \"x\"\n",
            "mcp_servers.a b: a server name is",
        ),
        (
            "[mcp_servers.both]\ncommand = \"x\"\nurl = \"http://h\"\n",
            "mcp_servers.both: give either `command`",
        ),
        (
            "[mcp_servers.web]\nurl = \"ftp://h\"\n",
            "mcp_servers.web: url must start with http",
        ),
        (
            "[mcp_servers.typo]\ncommand = \"x\"\nagrs = []\n",
            "unknown field `agrs`",
        ),
    ] {
        config_file(&p, text);
        let run = p.run(None, &["mcp", "list"]);
        assert_eq!(run.code, 2, "{text}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{text}: {}", run.stderr);
    }
}

#[test]
fn ctrl_c_while_servers_start_stops_them_and_exits_130() {
    let Some(py) = python() else { return };
    let p = Project::new();
    let pids = p.home.path().join("pids");
    config_file(
        &p,
        &hostile(
            &py,
            "noinit2",
            "no-init",
            &format!(
                "env = {{ HOSTILE_PIDS = {:?} }}\nstartup_timeout_sec = 60",
                pids.display().to_string()
            ),
        ),
    );
    let mock = Mock::start(json!([{"content": "never asked"}]));
    let child = p
        .hel(Some(&mock))
        .args(["-p", "x"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Ready when the server runs (and waits for a handshake it will not
    // answer).
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid: u32 = loop {
        let text = std::fs::read_to_string(&pids).unwrap_or_default();
        if let Some(pid) = text.split_whitespace().next() {
            break pid.parse().unwrap();
        }
        assert!(Instant::now() < deadline, "the server never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(mock.requests().is_empty(), "no request after the interrupt");
    assert!(
        ended(pid),
        "the starting server (pid {pid}) was left running"
    );
}
