//! Hooks of the user's config: each event's payload, a blocking
//! `pre_tool`, a hook that hangs, a hook that leaves a child behind, what
//! a hook's process gets, and that a project cannot add one.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};

/// The user's config file, `text` in it.
fn config_file(p: &Project, text: &str) {
    let dir = p.home.path().join(".config/hel");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// An executable shell script `name` in `dir`, holding `body`.
fn script_in(dir: &Path, name: &str, body: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A script beside the user's config (never in the project).
fn script(p: &Project, name: &str, body: &str) -> PathBuf {
    script_in(&p.home.path().join("bin"), name, body)
}

/// Where the hooks of a test write.
fn out(p: &Project) -> PathBuf {
    let dir = p.home.path().join("out");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A `[[hooks]]` table.
fn hook(event: &str, command: &[&str], timeout_secs: u64) -> String {
    let command: Vec<String> = command.iter().map(|c| format!("{c:?}")).collect();
    format!(
        "[[hooks]]\nevent = \"{event}\"\ncommand = [{}]\ntimeout_secs = {timeout_secs}\n",
        command.join(", ")
    )
}

/// The JSON lines of a file (none when it is absent).
fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The stream-json events of `kind` on a run's stdout.
fn events(stdout: &str, kind: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == kind)
        .collect()
}

const EVENTS: [&str; 6] = [
    "session_start",
    "pre_tool",
    "post_tool",
    "checkpoint",
    "pre_compact",
    "session_end",
];

/// Every event's hook writes its payload to `out/EVENT.jsonl`.
fn dump_all(p: &Project) -> PathBuf {
    let dir = out(p);
    let dump = script(p, "dump", &format!("cat >> {}/\"$1\".jsonl", dir.display()));
    let text: String = EVENTS
        .iter()
        .map(|e| hook(e, &[dump.to_str().unwrap(), e], 10))
        .collect();
    config_file(p, &text);
    dir
}

#[test]
fn each_event_gives_its_payload_on_stdin() {
    let p = Project::new();
    let dir = dump_all(&p);
    // Compaction as in t_compaction: a small threshold, tool output over it.
    let mock = Mock::start(json!([
        {"match": "You compact a coding agent", "content": "Goal: the steps. ID-deadbeef42."},
        {"content": "ok"},
        {"tool_calls": [call("bash", json!({"command": "seq 1 6000"}))]},
        {"content": "done two"},
        {"tool_calls": [call("bash", json!({"command": "seq 6001 12000"}))]},
        {"content": "done three"},
        {"content": "done four"},
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--access",
            "auto",
            "--compact-at",
            "4100",
            "--keep-recent",
            "2000",
            "--output-format",
            "stream-json",
            "-p",
            "Remember ID-deadbeef42.",
            "-p",
            "step two",
            "-p",
            "step three",
            "-p",
            "step four",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let project = p.path().display().to_string();
    let common = |v: &Value, event: &str| {
        assert_eq!(v["event"], event, "{v}");
        assert_eq!(v["session"], sid.as_str(), "{v}");
        assert_eq!(v["project"], project.as_str(), "{v}");
    };
    let start = lines(&dir.join("session_start.jsonl"));
    assert_eq!(start.len(), 1, "once a run: {start:?}");
    common(&start[0], "session_start");
    assert_eq!(start[0]["source"], "new");
    assert_eq!(start[0]["checkpoint"], Value::Null);

    let pre = lines(&dir.join("pre_tool.jsonl"));
    assert_eq!(pre.len(), 2, "{pre:?}");
    common(&pre[0], "pre_tool");
    assert_eq!(pre[0]["tool"], "bash");
    assert_eq!(pre[0]["arguments"]["command"], "seq 1 6000");
    assert!(!pre[0]["id"].as_str().unwrap().is_empty());
    let post = lines(&dir.join("post_tool.jsonl"));
    assert_eq!(post.len(), 2, "{post:?}");
    common(&post[0], "post_tool");
    assert_eq!(post[0]["tool"], "bash");
    assert_eq!(post[0]["id"], pre[0]["id"]);
    assert_eq!(post[0]["arguments"]["command"], "seq 1 6000");
    assert_eq!(post[0]["ok"], true);
    let result = post[0]["result"].as_str().unwrap();
    assert!(result.contains("1\n2\n3\n"), "{result}");
    assert_eq!(result.chars().count(), 2000);
    assert!(post[0]["result_chars"].as_u64().unwrap() > 2000);
    assert_eq!(post[0]["result_cut"], true);

    // One checkpoint payload per answer, naming what stream-json names.
    let saved: Vec<Value> = events(&run.stdout, "checkpoint")
        .iter()
        .map(|e| e["id"].clone())
        .collect();
    assert_eq!(saved.len(), 4);
    let checkpoints = lines(&dir.join("checkpoint.jsonl"));
    common(&checkpoints[0], "checkpoint");
    let named: Vec<Value> = checkpoints
        .iter()
        .map(|c| c["checkpoint"].clone())
        .collect();
    assert_eq!(named, saved);

    let compact = lines(&dir.join("pre_compact.jsonl"));
    assert!(!compact.is_empty(), "no pre_compact payload");
    common(&compact[0], "pre_compact");
    assert!(compact[0]["messages"].as_u64().unwrap() > 0);
    assert!(mock.requests().iter().any(|r| r["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .starts_with("You compact")));

    let end = lines(&dir.join("session_end.jsonl"));
    assert_eq!(end.len(), 1, "{end:?}");
    common(&end[0], "session_end");
    assert_eq!(end[0]["checkpoint"], saved[3]);

    // stream-json reports each hook's outcome.
    let hooks = events(&run.stdout, "hook");
    let ran = 1 + pre.len() + post.len() + checkpoints.len() + compact.len() + end.len();
    assert_eq!(hooks.len(), ran, "{hooks:?}");
    assert!(hooks.iter().all(|h| h["outcome"] == "ok" && h["exit"] == 0));
    assert_eq!(hooks[0]["event"], "session_start");
    assert_eq!(
        hooks[0]["command"],
        dir.parent().unwrap().join("bin/dump").display().to_string()
    );

    // A resumed session says so, from its newest checkpoint; a fork is a
    // new session.
    let mock = Mock::start(json!([{"content": "again"}, {"content": "forked"}]));
    let run = p.run(Some(&mock), &["resume", &sid, "-p", "more"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let start = lines(&dir.join("session_start.jsonl"));
    assert_eq!(start[1]["source"], "resumed");
    assert_eq!(start[1]["session"], sid.as_str());
    assert_eq!(start[1]["checkpoint"], saved[3]);
    let first = saved[0].as_str().unwrap();
    let run = p.run(
        Some(&mock),
        &["resume", &sid, "--at", &first[..12], "-p", "other"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let start = lines(&dir.join("session_start.jsonl"));
    assert_eq!(start[2]["source"], "forked");
    assert_eq!(start[2]["session"], run.session().as_str());
    assert_ne!(start[2]["session"], sid.as_str());
}

#[test]
fn a_pre_tool_hook_exiting_2_blocks_the_call_with_its_stderr() {
    let p = Project::new();
    let token = format!("ghp_{}", "R8t3xQ9vLmN2pK7wZ4yB6cD1eF5gH0jA9sUq");
    let check = script(
        &p,
        "check-tool",
        &format!(
            "if grep -q '\"tool\":\"write_file\"'; then echo 'no writes outside review (token {token})' >&2; exit 2; fi"
        ),
    );
    config_file(&p, &hook("pre_tool", &[check.to_str().unwrap()], 10));
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("write_file", json!({"path": "blocked.txt", "content": "x"})),
            call("bash", json!({"command": "echo ran > ran.txt"})),
        ]},
        {"content": "done"},
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--access",
            "auto",
            "--output-format",
            "stream-json",
            "-p",
            "x",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let results = tool_results(&mock, 1);
    // The hook's stderr is the result, its secret as a handle.
    assert_eq!(
        results[0],
        "no writes outside review (token ‹secret:github-pat:1›)"
    );
    assert!(
        !p.path().join("blocked.txt").exists(),
        "the blocked call ran"
    );
    // The hook let the next call through.
    assert_eq!(p.read("ran.txt"), "ran\n");
    let hooks = events(&run.stdout, "hook");
    let outcomes: Vec<&str> = hooks
        .iter()
        .map(|h| h["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["blocked", "ok"]);
    assert_eq!(hooks[0]["exit"], 2);
    assert!(!run.stdout.contains(&token) && !run.stderr.contains(&token));
    assert!(run.stderr.contains("blocked the call"), "{}", run.stderr);
}

#[test]
fn a_hook_past_its_time_limit_is_stopped_and_the_run_goes_on() {
    let p = Project::new();
    let dir = out(&p);
    let hang = script(
        &p,
        "hang",
        &format!("sleep 1000 & echo $! > {}/sleep.pid; wait", dir.display()),
    );
    config_file(&p, &hook("pre_tool", &[hang.to_str().unwrap()], 1));
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "echo ran > ran.txt"}))]},
        {"content": "done"},
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--access",
            "auto",
            "--output-format",
            "stream-json",
            "-p",
            "x",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Not a block: the call ran.
    assert_eq!(p.read("ran.txt"), "ran\n");
    assert!(
        run.stderr.contains(&format!(
            "hel: warning: pre_tool hook {} did not finish within 1 s and was stopped with what it started; hel goes on",
            hang.display()
        )),
        "{}",
        run.stderr
    );
    let hooks = events(&run.stdout, "hook");
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0]["outcome"], "timeout");
    assert_eq!(hooks[0]["exit"], Value::Null);
    assert_gone(&dir.join("sleep.pid"));
}

/// The process whose pid `file` holds (a `sleep 1000`) ends: absent, a
/// zombie, or another program, within a deadline that only a survivor
/// reaches.
fn assert_gone(file: &Path) {
    let pid = std::fs::read_to_string(file).unwrap().trim().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let zombie = stat
            .rsplit_once(") ")
            .is_some_and(|(_, r)| r.starts_with('Z'));
        if stat.is_empty() || zombie || !cmdline.starts_with(b"sleep\0") {
            return;
        }
        if Instant::now() > deadline {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid])
                .status();
            panic!("the hook's child {pid} outlived it");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn what_a_hook_starts_does_not_outlive_it() {
    let p = Project::new();
    let dir = out(&p);
    let leave = script(
        &p,
        "leave",
        &format!("sleep 1000 & echo $! > {}/child.pid", dir.display()),
    );
    config_file(&p, &hook("session_start", &[leave.to_str().unwrap()], 10));
    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = p.run(Some(&mock), &["--output-format", "stream-json", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(events(&run.stdout, "hook")[0]["outcome"], "ok");
    assert_gone(&dir.join("child.pid"));
}

#[test]
fn a_hook_gets_no_api_key_and_no_descriptor_of_hels() {
    let p = Project::new();
    let dir = out(&p);
    let env = script(
        &p,
        "env",
        &format!(
            "env > {d}/env; ls -l /proc/$$/fd > {d}/fds",
            d = dir.display()
        ),
    );
    config_file(&p, &hook("session_start", &[env.to_str().unwrap()], 10));
    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = Run::from_cmd(
        p.hel(Some(&mock))
            .env("HEL_API_KEY", "hel-key-value-1234")
            .env("DEEPSEEK_API_KEY", "deepseek-key-value-5678")
            .env("MY_SERVICE_TOKEN", "token-value-9012")
            .env("HOOK_PLAIN", "plain-value")
            .args(["-p", "x"]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let dumped = std::fs::read_to_string(dir.join("env")).unwrap();
    assert!(dumped.contains("HOOK_PLAIN=plain-value"), "{dumped}");
    for gone in [
        "HEL_API_KEY",
        "hel-key-value",
        "DEEPSEEK_API_KEY",
        "deepseek-key-value",
        "MY_SERVICE_TOKEN",
        "token-value",
    ] {
        assert!(
            !dumped.contains(gone),
            "{gone} in the hook's env:\n{dumped}"
        );
    }
    // The shell running the hook holds its stdio pipes (and a copy of
    // stdout it saved while `>` redirected it), its script and the file
    // it writes: no socket, store file, event or epoll descriptor of
    // hel's.
    let fds = std::fs::read_to_string(dir.join("fds")).unwrap();
    let targets: Vec<&str> = fds
        .lines()
        .filter_map(|l| l.split_once(" -> "))
        .map(|(_, t)| t)
        .collect();
    let mut pipes = std::collections::BTreeSet::new();
    for target in &targets {
        let file = dir.join("fds");
        if *target != env.to_str().unwrap() && *target != file.to_str().unwrap() {
            assert!(
                target.starts_with("pipe:["),
                "{target} crossed into the hook:\n{fds}"
            );
            pipes.insert(*target);
        }
    }
    assert_eq!(pipes.len(), 3, "stdin, stdout and stderr:\n{fds}");
}

#[test]
fn nothing_in_a_project_adds_a_hook() {
    let p = Project::new();
    let dir = out(&p);
    // The user's own hook runs.
    let mine = script(&p, "mine", &format!("echo mine >> {}/ran", dir.display()));
    config_file(&p, &hook("session_start", &[mine.to_str().unwrap()], 10));
    let mock = Mock::start(json!([{"content": "ok"}, {"content": "ok"}]));
    assert_eq!(p.run(Some(&mock), &["-p", "x"]).code, 0);
    // A cloned repository ships config files and hook scripts everywhere
    // hel or another agent might look.
    let theirs = script_in(
        &p.path().join(".hel/hooks"),
        "session_start",
        &format!("echo theirs >> {}/ran", dir.display()),
    );
    let table: String = EVENTS
        .iter()
        .map(|e| hook(e, &[theirs.to_str().unwrap()], 10))
        .collect();
    for file in [
        ".hel/config.toml",
        ".hel/hooks.toml",
        "hel.toml",
        ".hel.toml",
        ".config/hel/config.toml",
    ] {
        p.write(file, &table);
    }
    script_in(
        &p.path(),
        "hook.sh",
        &format!("echo theirs >> {}/ran", dir.display()),
    );
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // XDG_CONFIG_HOME pointing into the project is the user's own act;
    // a project cannot set it. Without it, hel reads the user's file only.
    let ran = std::fs::read_to_string(dir.join("ran")).unwrap();
    assert_eq!(ran, "mine\nmine\n");
}

#[test]
fn a_hook_table_hel_cannot_run_is_refused_naming_the_file() {
    let p = Project::new();
    for (text, says) in [
        (
            hook("pre_tool", &["./hooks/check"], 10),
            "is a relative path",
        ),
        (hook("pre_tool", &[], 10), "a hook's command is empty"),
        (
            hook("pre_tool", &["/bin/true"], 0),
            "not between 1 and 3600",
        ),
        (
            hook("on_save", &["/bin/true"], 10),
            "unknown variant `on_save`",
        ),
    ] {
        config_file(&p, &text);
        let run = p.run(None, &["config"]);
        assert_eq!(run.code, 2, "{text}: {}", run.stderr);
        assert!(run.stderr.contains("config.toml"), "{}", run.stderr);
        assert!(run.stderr.contains(says), "{text}: {}", run.stderr);
    }
}

#[test]
fn the_prompt_warns_of_a_failing_hook_in_one_line_and_goes_on() {
    use crate::t_prompt::{exited_with, expect, spawn_with, type_in, PROMPT_END};
    let p = Project::new();
    let check = script(&p, "check", "echo policy server down >&2; exit 1");
    config_file(&p, &hook("pre_tool", &[check.to_str().unwrap()], 10));
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "echo ran > ran.txt"}))]},
        {"content": "All done."},
    ]));
    let mut s = spawn_with(&p, Some(&mock), 200, &["--access", "auto"], &[]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "go\r");
    expect(
        &mut s,
        &format!(
            "hel: warning: pre_tool hook {} failed (exit status 1); hel goes on: policy server down",
            check.display()
        ),
    );
    expect(&mut s, "All done.");
    expect(&mut s, PROMPT_END);
    assert_eq!(p.read("ran.txt"), "ran\n");
    type_in(&mut s, "/quit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}
