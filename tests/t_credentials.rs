//! No credential reaches a command or an MCP server: what hel's environment
//! holds under a secret name, the variables hel reads credentials from and
//! those the config names for an MCP server's bearer token and headers are
//! kept from sandboxed and unconfined commands and from stdio servers
//! (a server gets back what its own `env_vars` lists); and under
//! `--access auto` commands have no network unless `--network` says so.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;

use crate::common::*;
use serde_json::json;

/// The Python with the `mcp` package (`HEL_TEST_MCP_PYTHON`, set by
/// tools/test); None, said, when `HEL_SKIP_MCP=1` leaves it out.
fn python() -> Option<String> {
    match std::env::var("HEL_TEST_MCP_PYTHON") {
        Ok(p) if !p.is_empty() => Some(p),
        _ if std::env::var_os("HEL_SKIP_MCP").is_some() => {
            eprintln!("skipped the MCP server part: HEL_SKIP_MCP is set");
            None
        }
        _ => panic!(
            "no Python with the mcp package: run the tests through tools/test, or set HEL_SKIP_MCP=1"
        ),
    }
}

fn config_file(p: &Project, text: &str) {
    let dir = p.home.path().join(".config/hel");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// Whether the sandbox refused the command (no user namespaces or
/// Landlock here): the reason, to be printed.
fn refused(result: &str) -> Option<&str> {
    result
        .starts_with("refused: the sandbox cannot run here")
        .then_some(result)
}

/// The secrets of the test: each name with a value no other run shares.
fn secrets() -> Vec<(&'static str, String)> {
    let u = std::process::id();
    [
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "GITHUB_TOKEN",
        "MY_SERVICE_PASSWORD",
        "HEL_API_KEY",
        // Named by the config as an HTTP server's bearer token and a
        // header's value: nothing in these names looks secret.
        "DOCS_BEARER_SOURCE",
        "DOCS_TEAM_HEADER",
        // Listed in the stdio server's own env_vars: it gets this one.
        "GIVEN_TOKEN",
    ]
    .iter()
    .map(|n| (*n, format!("value-of-{}-{u}", n.to_lowercase())))
    .collect()
}

#[test]
fn no_credential_reaches_a_command_or_a_stdio_server() {
    let py = python();
    let p = Project::new();
    let mut config = String::from(
        "[mcp_servers.docs]\nurl = \"https://mcp.example.invalid/mcp\"\n\
         bearer_token_env_var = \"DOCS_BEARER_SOURCE\"\n\
         env_http_headers = { \"X-Team\" = \"DOCS_TEAM_HEADER\" }\nenabled = false\n",
    );
    let names = [
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "MY_SERVICE_PASSWORD",
        "DOCS_BEARER_SOURCE",
        "DOCS_TEAM_HEADER",
        "GIVEN_TOKEN",
        "LANG",
        "SSH_AUTH_SOCK",
    ];
    let mut calls = vec![call("bash", json!({"command": "env"}))];
    if let Some(py) = &py {
        let server = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/mcp/server.py")
            .canonicalize()
            .unwrap();
        config.push_str(&format!(
            "[mcp_servers.s1]\ncommand = {py:?}\nargs = [{:?}]\nenv_vars = [\"GIVEN_TOKEN\"]\n",
            server.display().to_string()
        ));
        for n in names {
            calls.push(call("mcp__s1__env", json!({ "name": n })));
        }
    }
    config_file(&p, &config);
    let secrets = secrets();
    let path = std::env::var("PATH").unwrap_or_default();
    for mode in ["sandbox", "--no-sandbox"] {
        let mock = Mock::start(json!([{"tool_calls": calls}, {"content": "done"}]));
        let mut cmd = p.hel(Some(&mock));
        for (k, v) in &secrets {
            cmd.env(k, v);
        }
        cmd.env("LANG", "C.UTF-8")
            .env("SSH_AUTH_SOCK", "/run/agent.sock")
            .env(
                "PATH",
                format!("/opt/plain-entry-{}:{path}", std::process::id()),
            )
            .args(["--access", "auto", "-p", "x"]);
        if mode != "sandbox" {
            cmd.arg(mode);
        }
        let run = Run::from_cmd(&mut cmd);
        assert_eq!(run.code, 0, "{mode}: {}", run.stderr);
        let results = tool_results(&mock, 1);
        let env = &results[0];
        if let Some(why) = refused(env) {
            eprintln!("skipped the sandboxed command: {why}");
            continue;
        }
        assert!(env.starts_with("exit=0\nstdout:\n"), "{mode}: {env}");
        // What is not secret arrives.
        for plain in [
            "LANG=C.UTF-8\n",
            "SSH_AUTH_SOCK=/run/agent.sock\n",
            &format!("PATH=/opt/plain-entry-{}:", std::process::id()),
        ] {
            assert!(
                env.contains(plain),
                "{mode}: {plain} is missing from\n{env}"
            );
        }
        // No secret does: not in the tool result, nowhere in any request
        // the model server received.
        let bodies: String = mock.requests().iter().map(|r| r.to_string()).collect();
        for (name, value) in &secrets {
            assert!(
                !env.contains(&format!("{name}=")) && !env.contains(value.as_str()),
                "{mode}: {name} reached the command:\n{env}"
            );
            assert!(
                !bodies.contains(value.as_str()),
                "{mode}: {name}'s value reached a request"
            );
        }
        if py.is_some() {
            let got: Vec<(&str, &str)> = names
                .iter()
                .zip(&results[1..])
                .map(|(n, r)| (*n, r.as_str()))
                .collect();
            assert_eq!(
                got,
                [
                    ("AWS_SECRET_ACCESS_KEY", "unset"),
                    ("GITHUB_TOKEN", "unset"),
                    ("MY_SERVICE_PASSWORD", "unset"),
                    ("DOCS_BEARER_SOURCE", "unset"),
                    ("DOCS_TEAM_HEADER", "unset"),
                    ("GIVEN_TOKEN", "set"),
                    ("LANG", "set"),
                    ("SSH_AUTH_SOCK", "set"),
                ],
                "what the stdio server's environment holds"
            );
        }
    }
}

/// A listener of the test process on the host's loopback that accepts one
/// connection in the background and says whether one came.
fn listener() -> (u16, std::thread::JoinHandle<bool>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let accepted = std::thread::spawn(move || {
        l.set_nonblocking(false).unwrap();
        match l.accept() {
            Ok((mut c, _)) => {
                let mut buf = String::new();
                let _ = c.read_to_string(&mut buf);
                buf.contains("hello")
            }
            Err(_) => false,
        }
    });
    (port, accepted)
}

/// Connect to the host's loopback from a command; unblock the listener
/// afterwards whatever happened (the test process connects itself).
fn connect_from_a_command(p: &Project, port: u16, flags: &[&str]) -> (Run, String) {
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!(
            "exec 3<>/dev/tcp/127.0.0.1/{port} && echo hello >&3 && echo connected"
        )}))]},
        {"content": "done"},
    ]));
    let mut cmd = p.hel(Some(&mock));
    cmd.args(["--access", "auto", "-p", "x"]).args(flags);
    let run = Run::from_cmd(&mut cmd);
    let result = tool_results(&mock, 1).remove(0);
    (run, result)
}

#[test]
fn under_auto_commands_have_no_network_unless_allowed() {
    let p = Project::new();
    let hint = "network is off for commands";

    // Off by default under auto: the host's 127.0.0.1 is not the
    // sandbox's; the result says why it failed.
    let (port, accepted) = listener();
    let (run, r) = connect_from_a_command(&p, port, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    if let Some(why) = refused(&r) {
        eprintln!("skipped: {why}");
        return;
    }
    assert!(!r.contains("connected"), "{r}");
    assert!(r.contains("Connection refused"), "{r}");
    assert!(
        r.trim_end()
            .ends_with("the user can allow it with --network"),
        "{r}"
    );
    assert!(r.contains(hint), "{r}");
    // Unblock the listener: nothing reached it.
    drop(std::net::TcpStream::connect(("127.0.0.1", port)).unwrap());
    assert!(!accepted.join().unwrap(), "the command reached the host");

    // --network: the same command reaches it, and no hint.
    let (port, accepted) = listener();
    let (run, r) = connect_from_a_command(&p, port, &["--network"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(r.starts_with("exit=0\nstdout:\nconnected\n"), "{r}");
    assert!(!r.contains(hint), "{r}");
    assert!(accepted.join().unwrap(), "the listener got no hello");

    // `hel config` says what a run would use, and why.
    let network = |args: &[&str]| {
        let shown = p.run(None, args);
        assert_eq!(shown.code, 0, "{}", shown.stderr);
        let row = shown.stdout.lines().find(|l| l.starts_with("network "));
        row.unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        network(&["--access", "auto", "config"]),
        "false (under access auto) default"
    );
    assert_eq!(network(&["config"]), "true (under access confirm) default");
    // Given on both sides of the subcommand, the one after it wins.
    assert_eq!(
        network(&["--network", "config", "--no-network"]),
        "false flag"
    );
    assert_eq!(
        network(&["--no-network", "config", "--network"]),
        "true flag"
    );

    // The config's `network = true` too; `--no-network` wins over it.
    config_file(&p, "network = true\n");
    let shown = p.run(None, &["config"]);
    let row = shown
        .stdout
        .lines()
        .find(|l| l.starts_with("network "))
        .unwrap_or_default();
    assert!(
        row.contains(" true ") && row.ends_with("config.toml"),
        "{}",
        shown.stdout
    );
    let (port, accepted) = listener();
    let (_, r) = connect_from_a_command(&p, port, &[]);
    assert!(r.contains("connected"), "{r}");
    assert!(accepted.join().unwrap());
    let (port, accepted) = listener();
    let (_, r) = connect_from_a_command(&p, port, &["--no-network"]);
    assert!(r.contains(hint), "{r}");
    drop(std::net::TcpStream::connect(("127.0.0.1", port)).unwrap());
    assert!(!accepted.join().unwrap());
}
