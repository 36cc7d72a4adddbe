//! Tools through the whole program: the sandbox, the boundary, spill and
//! cursors, timeouts, access modes.

use crate::common::*;
use serde_json::json;

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
    // No spill yet: inside the sandbox .hel/ holds only the (empty) path
    // down to this session's spill directory.
    assert!(r[0].contains("entries=3\n"), "{}", r[0]);
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
fn bash_timeout_kills_the_command_and_its_process_group() {
    let p = Project::new();
    // The marker is split in the command text, so that only the sleeps
    // themselves carry it on their command lines.
    let n = std::process::id();
    let mark = format!("1000.{n}7");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!("N={n}; N=${{N}}7; sleep 1000.$N & echo started; sleep 1000.$N")}))]},
        {"tool_calls": [call("bash", json!({"command": format!("N={n}; N=${{N}}7; for i in $(seq 250); do pgrep -f \"^sleep 1000.$N\" >/dev/null || {{ echo gone; break; }}; sleep 0.02; done")}))]},
        {"content": "done"},
    ]));
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "--bash-timeout", "1", "-p", "x"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = tool_results(&mock, 2);
    // What the command wrote before its time ran out is kept.
    assert!(
        r[0].starts_with("exit=timeout after 1s\nstdout:\nstarted\n"),
        "{}",
        r[0]
    );
    // Inside the sandbox, before the instance ended, the group was gone.
    assert!(r[1].starts_with("exit=0\nstdout:\ngone\n"), "{}", r[1]);
    assert!(crate::t_sandbox::processes_with(&mark).is_empty());
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
    // SAFETY: geteuid(2) cannot fail.
    let uid = unsafe { libc::geteuid() };
    let runs = tmp.path().join(format!("hel-runs-{uid}"));
    let day = std::time::Duration::from_secs(24 * 3600);
    let (dead, live) = (
        "00000000-0000-4000-8000-00000000dead",
        "00000000-0000-4000-8000-0000000011fe",
    );
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
    let _dead = make(dead);
    let live_lock = make(live);
    live_lock.lock().unwrap(); // an instance still runs
                               // A start that crashed long ago, an empty instance directory, and a
                               // start in progress right now.
    let long_ago = std::time::SystemTime::now() - day;
    let crashed = runs.join(".new-00000000-0000-4000-8000-0000000c0a5e");
    let empty = runs.join("00000000-0000-4000-8000-00000000e3b7");
    let starting = runs.join(".new-00000000-0000-4000-8000-000000005a57");
    for d in [&crashed, &empty, &starting] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::File::create(crashed.join(".active")).unwrap();
    for d in [&crashed, &empty] {
        std::fs::File::open(d)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
    }
    std::fs::set_permissions(&runs, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = Run::from_cmd(
        p.hel(Some(&mock))
            .env("TMPDIR", tmp.path())
            .args(["-p", "x"]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let at = |rel: &str| runs.join(rel);
    assert!(
        !at(&format!("{dead}/spill/old.txt")).exists(),
        "old spill of a dead instance is removed"
    );
    assert!(
        at(&format!("{dead}/spill/new.txt")).exists(),
        "recent spill stays 24 hours"
    );
    assert!(
        !at(&format!("{dead}/tmp")).exists(),
        "a dead instance's tmp is removed"
    );
    for f in ["spill/old.txt", "spill/new.txt", "tmp/scratch"] {
        assert!(
            at(&format!("{live}/{f}")).exists(),
            "{f} of a live instance is untouched"
        );
    }
    assert!(!crashed.exists(), "a crashed start is removed");
    assert!(!empty.exists(), "an empty instance directory is removed");
    assert!(starting.exists(), "a start in progress is left alone");
    // The root is private again.
    let mode = std::fs::metadata(&runs).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o700
    );
    // The run's own instance removed its directory when it ended.
    let own: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != dead && n != live && !n.starts_with(".new-"))
        .collect();
    assert!(own.is_empty(), "{own:?}");
}

#[test]
fn a_runtime_root_that_is_a_link_or_someone_elses_is_refused() {
    let p = Project::new();
    let tmp = tempfile::tempdir().unwrap();
    // SAFETY: geteuid(2) cannot fail.
    let uid = unsafe { libc::geteuid() };
    let runs = tmp.path().join(format!("hel-runs-{uid}"));
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &runs).unwrap();
    let mock = Mock::start(json!([{"content": "ok"}]));
    let hel = |mock: &Mock| {
        Run::from_cmd(
            p.hel(Some(mock))
                .env("TMPDIR", tmp.path())
                .args(["-p", "x"]),
        )
    };
    let run = hel(&mock);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot create the instance directory")
            && run.stderr.contains("symbolic link"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    if uid == 0 {
        std::fs::remove_file(&runs).unwrap();
        std::fs::create_dir(&runs).unwrap();
        std::os::unix::fs::chown(&runs, Some(65534), Some(65534)).unwrap();
        let run = hel(&mock);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.stderr.contains("belongs to uid 65534"),
            "{}",
            run.stderr
        );
    }
    assert!(mock.requests().is_empty());
}

#[test]
fn file_tools_write_no_git_directory_and_with_allow_git_write_no_config_or_hooks() {
    use crate::t_sandbox::git;
    for allow in [false, true] {
        let p = Project::new();
        git(&p.path(), &["init", "-q"]);
        std::fs::create_dir_all(p.path().join("sub")).unwrap();
        p.write("sub/.git", "gitdir: ../.git\n");
        std::os::unix::fs::symlink(".git", p.path().join("g")).unwrap();
        let config = p.read(".git/config");
        let mock = Mock::start(json!([
            {"tool_calls": [
                call("write_file", json!({"path": ".git/hooks/pre-commit", "content": "evil"})),
                call("search_replace", json!({"path": ".git/config", "search": "[core]", "replace": "[core]\n\tfsmonitor = evil"})),
                call("write_file", json!({"path": "g/hooks/post-checkout", "content": "evil"})),
                call("write_file", json!({"path": "sub/.git", "content": "gitdir: /tmp/evil\n"})),
                call("write_file", json!({"path": "fresh/.git/hooks/pre-commit", "content": "evil"})),
                call("write_file", json!({"path": ".git/info/exclude", "content": "*.log\n"})),
                call("write_file", json!({"path": "ok.txt", "content": "ok\n"})),
            ]},
            {"content": "done"},
        ]));
        let mut args = vec!["--access", "auto", "-p", "x"];
        if allow {
            args.insert(0, "--allow-git-write");
        }
        let run = p.run(Some(&mock), &args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let r = tool_results(&mock, 1);
        let kept = "which stay read-only even with --allow-git-write: refused";
        let closed = "is in a git directory, which tools may not write";
        for (i, what) in r.iter().enumerate().take(5) {
            let want = if allow || i == 3 { kept } else { closed };
            assert!(
                what.starts_with("error: ") && what.contains(want),
                "{allow} {i}: {what}"
            );
        }
        assert_eq!(r[5].starts_with("wrote "), allow, "{}", r[5]);
        assert!(r[6].starts_with("wrote "), "{}", r[6]);
        assert!(!p.path().join(".git/hooks/pre-commit").exists());
        assert!(!p.path().join(".git/hooks/post-checkout").exists());
        assert!(!p.path().join("fresh").exists());
        assert_eq!(p.read(".git/config"), config);
        assert_eq!(p.read("sub/.git"), "gitdir: ../.git\n");
    }
}

/// Every file under `dir` (links not followed) with its bytes, and every
/// directory.
fn bytes_under(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).min_depth(1) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
        let bytes = if e.file_type().is_file() {
            std::fs::read(e.path()).unwrap()
        } else {
            format!("{:?}", e.file_type()).into_bytes()
        };
        out.insert(rel, bytes);
    }
    out
}

/// A nested project's `.hel/` (its only session) is closed to the outer
/// project's tools and commands as the outer project's own is: not read,
/// not listed, not written, not removed; byte for byte as it was.
#[test]
fn a_nested_projects_store_is_closed_to_tools_and_commands() {
    let p = Project::new();
    p.write("vendor/lib/code.c", "int x;\n");
    let lib = p.path().join("vendor/lib");
    let mock = Mock::start(json!([{"content": "the nested project's own"}]));
    let nested = Run::from_cmd(p.hel_in(&lib, Some(&mock)).args(["-p", "inner"]));
    assert_eq!(nested.code, 0, "{}", nested.stderr);
    let inner = nested.session();
    let store = lib.join(".hel");
    let before = bytes_under(&store);
    assert!(before.contains_key("format"), "{before:?}");
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("read_file", json!({"path": "vendor/lib/.hel/format"})),
            call("read_file", json!({"path": "vendor/lib/.HEL/format"})),
            call("grep", json!({"pattern": ".", "path": "vendor/lib/.hel"})),
            call("glob", json!({"pattern": "**/*"})),
            call("search_replace", json!({"path": "vendor/lib/.hel/format", "search": "6", "replace": "7"})),
            call("write_file", json!({"path": "vendor/lib/.hel/format", "content": "x"})),
            call("write_file", json!({"path": "vendor/lib/.hel/new/evil", "content": "x"})),
            call("bash", json!({"command": "echo entries=$(find vendor/lib/.hel -mindepth 1 | wc -l); cat vendor/lib/.hel/format; rm -rf vendor/lib/.hel; echo rm=$?; mv vendor/lib/.hel vendor/lib/moved; echo mv=$?; echo x > vendor/lib/.hel/evil; echo end"})),
        ]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        p.path().join(".hel").is_dir(),
        "the outer project's own store"
    );
    let r = tool_results(&mock, 1);
    for (i, what) in r.iter().enumerate().take(7) {
        if i == 3 {
            continue;
        }
        assert!(
            what.contains("a nested project's .hel/") && what.contains("refused"),
            "{i}: {what}"
        );
    }
    assert!(r[3].contains("vendor/lib/code.c"), "{}", r[3]);
    assert!(!r[3].contains(".hel"), "{}", r[3]);
    let bash = &r[7];
    assert!(bash.contains("entries=0\n"), "{bash}");
    assert!(bash.contains("rm=1\n") && bash.contains("mv=1\n"), "{bash}");
    assert!(bash.contains("Read-only file system"), "{bash}");
    assert!(bash.contains("end"), "{bash}");
    assert!(!lib.join("moved").exists());
    assert_eq!(bytes_under(&store), before);
    // The nested project's session is still there, and still its own.
    let list = Run::from_cmd(p.hel_in(&lib, None).args(["sessions", "list"]));
    assert!(
        list.stdout.contains(&inner[..8]),
        "{}\n{}",
        list.stdout,
        list.stderr
    );
}
