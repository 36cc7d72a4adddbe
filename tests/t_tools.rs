//! Tools through the whole program: the sandbox, the boundary, spill and
//! cursors, timeouts, access modes.

use hel_e2e::*;
use serde_json::json;

fn tool_results(mock: &Mock, request: usize) -> Vec<String> {
    mock.messages(request)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn writes_outside_the_project_are_refused_by_tool_and_kernel() {
    let p = Project::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped.txt");
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("write_file", json!({"path": "../escaped.txt", "content": "x"})),
            call("write_file", json!({"path": target, "content": "x"})),
            call("bash", json!({"command": format!("echo x > {}", target.display())})),
            call("bash", json!({"command": "echo inside > inside.txt && echo $TMPDIR && touch $TMPDIR/t && echo tmp-ok"})),
        ]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = tool_results(&mock, 1);
    assert!(r[0].contains("outside the project"), "{}", r[0]);
    assert!(r[1].contains("outside the project"), "{}", r[1]);
    assert!(
        r[2].starts_with("exit=1") && r[2].contains("Permission denied"),
        "{}",
        r[2]
    );
    assert!(!target.exists());
    assert!(
        r[3].starts_with("exit=0") && r[3].contains("tmp-ok") && r[3].contains("hel-runs"),
        "{}",
        r[3]
    );
    assert_eq!(p.read("inside.txt"), "inside\n");
}

#[test]
fn bash_sees_nothing_of_the_store_and_file_tools_refuse_it() {
    let p = Project::new();
    // Another session's data in the store first.
    let mock = Mock::start(json!([{"content": "first"}]));
    assert_eq!(p.run(Some(&mock), &["-p", "x"]).code, 0);
    std::os::unix::fs::symlink("/etc/passwd", p.path().join("pw")).unwrap();
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("bash", json!({"command": "echo entries=$(find .hel -mindepth 1 | wc -l); cat .hel/refs/sessions/* 2>&1; echo x > .hel/evil"})),
            call("read_file", json!({"path": ".hel/.gitignore"})),
            call("read_file", json!({"path": "sub/../.hel/objects"})),
            call("read_file", json!({"path": "pw"})),
            call("glob", json!({"pattern": "**/*"})),
        ]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = tool_results(&mock, 1);
    // No spill yet: .hel/ is empty inside the sandbox.
    assert!(r[0].contains("entries=0\n"), "{}", r[0]);
    assert!(
        r[0].contains("No such file") && r[0].contains("Read-only file system"),
        "{}",
        r[0]
    );
    assert!(
        r[1].contains("refused") && r[2].contains("refused"),
        "{} / {}",
        r[1],
        r[2]
    );
    assert!(r[3].contains("outside the project"), "{}", r[3]);
    assert!(!r[4].contains(".hel"), "{}", r[4]);
    assert!(!p.path().join(".hel/evil").exists());
}

#[test]
fn oversized_output_is_spilled_and_read_back_with_cursors() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "seq 1 30000"}))]},
        {"tool_calls": [call("read_file", json!({"path": "{{spill}}"}))]},
        {"tool_calls": [call("read_file", json!({"cursor": "{{cursor}}"}))]},
        {"tool_calls": [call("bash", json!({"command": "cat {{spill}} | wc -c; echo x >> {{spill}} 2>&1"}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = tool_results(&mock, 4);
    assert!(r[0].starts_with("[Output too large"), "{}", &r[0][..200]);
    let spill = r[0]
        .lines()
        .find_map(|l| l.strip_prefix("spill: "))
        .unwrap()
        .to_owned();
    assert!(
        spill.starts_with(".hel/sessions/") && spill.contains("/spill/"),
        "{spill}"
    );
    assert!(r[0].len() < 5_000);
    let whole = String::from_utf8(spill_bytes(&p, &run.session())).unwrap();
    assert!(whole.starts_with("exit=0\nstdout:\n1\n2\n3\n"));
    let page1 = r[1].rsplit_once('\n').unwrap();
    assert!(
        page1
            .1
            .starts_with("[Read truncated. Continue with read_file({\"cursor\":\""),
        "{}",
        page1.1
    );
    assert!(page1.0.len() <= 10_000 && page1.0.len() > 9_900);
    let page2 = r[2].rsplit_once('\n').unwrap().0;
    assert_eq!(
        format!("{}\n{}", page1.0, page2),
        whole[..page1.0.len() + 1 + page2.len()]
    );
    // bash reads the session's spill, and cannot change it.
    assert!(r[3].contains(&format!("{}", whole.len())), "{}", r[3]);
    assert!(r[3].contains("Read-only file system"), "{}", r[3]);
}

#[test]
fn bash_timeout_kills_the_command_and_its_children() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "sleep 1000 & echo $! > bg.pid; sleep 1000"}))]},
        {"content": "done"},
    ]));
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "--bash-timeout", "1", "-p", "x"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(tool_results(&mock, 1)[0].starts_with("exit=timeout after 1s"));
    let pid: i32 = p.read("bg.pid").trim().parse().unwrap();
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Gone, or a zombie waiting for its reaper: not running.
    assert!(
        state.is_empty() || state.split_whitespace().nth(2) == Some("Z"),
        "{state}"
    );
}

#[test]
fn confirm_mode_without_a_terminal_denies_and_goes_on() {
    let p = Project::new();
    let rec = p.path().join("rec");
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "f.txt", "content": "x"})), call("read_file", json!({"path": "HEL.md"}))]},
        {"content": "ok"},
    ]));
    let run = p.run(Some(&mock), &["--record", rec.to_str().unwrap(), "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = tool_results(&mock, 1);
    assert!(
        r[0].starts_with("denied:") && r[0].contains("--access auto"),
        "{}",
        r[0]
    );
    assert!(!p.path().join("f.txt").exists());
    let calls = record(&rec)["tool_calls"].clone();
    assert_eq!(calls[0]["decision"], "denied");
    assert_eq!(calls[0]["ok"], false);
}

#[test]
fn read_only_offers_only_reading_tools() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = p.run(Some(&mock), &["--access", "read-only", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let names: Vec<String> = mock.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["read_file", "glob", "grep"]);
    let run = p.run(Some(&mock), &["--tools", "bash,teleport", "-p", "x"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("teleport"), "{}", run.stderr);
}

#[test]
fn api_keys_do_not_reach_commands() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "env | grep -c API_KEY; echo $TMPDIR"}))]},
        {"content": "ok"},
    ]));
    let run = Run::from_cmd(
        p.hel(Some(&mock))
            .env("HEL_API_KEY", "secret-1")
            .env("OTHER_API_KEY", "secret-2")
            .args(["--access", "auto", "-p", "x"]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = tool_results(&mock, 1);
    assert!(r[0].starts_with("exit=0\nstdout:\n0\n"), "{}", r[0]);
    assert!(!r[0].contains("secret"));
}

#[test]
fn a_new_instance_cleans_dead_instances_but_not_live_ones() {
    let p = Project::new();
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("hel-runs");
    let day = std::time::Duration::from_secs(24 * 3600);
    let make = |name: &str| {
        let dir = runs.join(name);
        std::fs::create_dir_all(dir.join("spill")).unwrap();
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        std::fs::write(dir.join("tmp/scratch"), "x").unwrap();
        let old = std::fs::File::create(dir.join("spill/old.txt")).unwrap();
        old.set_modified(std::time::SystemTime::now() - day - day)
            .unwrap();
        std::fs::write(dir.join("spill/new.txt"), "recent").unwrap();
        std::fs::File::create(dir.join(".active")).unwrap()
    };
    let _dead = make("dead");
    let live = make("live");
    live.lock().unwrap(); // an instance (or a child it started) still runs
    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = Run::from_cmd(
        p.hel(Some(&mock))
            .env("TMPDIR", tmp.path())
            .args(["-p", "x"]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !runs.join("dead/spill/old.txt").exists(),
        "old spill of a dead instance is removed"
    );
    assert!(
        runs.join("dead/spill/new.txt").exists(),
        "recent spill stays 24 hours"
    );
    assert!(
        !runs.join("dead/tmp").exists(),
        "a dead instance's tmp is removed"
    );
    for f in [
        "live/spill/old.txt",
        "live/spill/new.txt",
        "live/tmp/scratch",
    ] {
        assert!(runs.join(f).exists(), "{f} of a live instance is untouched");
    }
    // The run's own instance removed its tmp when it ended.
    let own: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "dead" && n != "live")
        .collect();
    assert!(own.is_empty(), "{own:?}");
}
