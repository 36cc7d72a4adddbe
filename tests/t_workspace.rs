//! Workspace checkpoints through the whole program: the scripted model
//! changes files with its tools, then `hel undo`, `hel restore` and `hel
//! diff` give back exactly the earlier bytes, modes and links, and leave
//! alone what the session does not own.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::*;
use serde_json::{json, Value};

/// Every path of the project outside `.hel` with what it is: a file's
/// bytes and mode, a link's target, a directory's mode.
fn fingerprint(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root)
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| e.file_name() != ".hel")
    {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(root).unwrap().display().to_string();
        let meta = fs::symlink_metadata(e.path()).unwrap();
        let what = if meta.file_type().is_symlink() {
            format!("link -> {}", fs::read_link(e.path()).unwrap().display())
        } else if meta.is_dir() {
            format!("dir {:o}", meta.permissions().mode() & 0o777)
        } else {
            format!(
                "file {:o} {:?}",
                meta.permissions().mode() & 0o777,
                String::from_utf8_lossy(&fs::read(e.path()).unwrap())
            )
        };
        out.insert(rel, what);
    }
    out
}

fn log(p: &Project, sid: &str) -> Vec<Value> {
    let run = p.run(None, &["sessions", "log", sid, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str::<Vec<Value>>(&run.stdout).unwrap()
}

fn seed(p: &Project) {
    p.write("a.txt", "one\n");
    p.write("b.txt", "bee\n");
    p.write("run.sh", "echo hi\n");
    p.write("dir/c.txt", "see\n");
    p.write("keep.txt", "unchanged\n");
}

/// The model's edits: write_file, then bash with sed -i, rm, mv, chmod +x,
/// ln -s and a new file.
fn edits() -> Value {
    json!([
        {"tool_calls": [
            call("write_file", json!({"path": "a.txt", "content": "changed by write_file\n"})),
            call("bash", json!({"command": "sed -i s/bee/BEE/ b.txt && rm dir/c.txt && mv a.txt moved.txt && chmod +x run.sh && ln -s b.txt link && mkdir -p new/deep && echo fresh > new/deep/f.txt"})),
        ]},
        {"content": "done"},
    ])
}

#[test]
fn undo_restore_and_diff_give_back_exact_bytes_modes_and_links() {
    let p = Project::new();
    seed(&p);
    let before = fingerprint(&p.path());
    let mock = Mock::start(edits());
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "edit things"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let after = fingerprint(&p.path());
    assert_eq!(after["moved.txt"], "file 644 \"changed by write_file\\n\"");
    assert_eq!(after["run.sh"], "file 755 \"echo hi\\n\"");
    assert_eq!(after["link"], "link -> b.txt");

    // The log shows the answer; its start is folded into it.
    let entries = log(&p, &sid);
    let records: Vec<&str> = entries
        .iter()
        .map(|e| e["record"].as_str().unwrap())
        .collect();
    assert_eq!(records, ["answer", "start"]);
    let answer = entries[0]["id"].as_str().unwrap().to_owned();
    let text = p.run(None, &["sessions", "log", &sid]);
    assert_eq!(text.stdout.lines().count(), 1, "{}", text.stdout);

    // diff: what the instruction changed.
    let diff = p.run(None, &["diff", &sid]);
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    for line in [
        "D a.txt",
        "A moved.txt",
        "M b.txt",
        "D dir/c.txt",
        "m run.sh",
        "A link",
        "A new/deep/f.txt",
    ] {
        assert!(
            diff.stdout.lines().any(|l| l == line),
            "{line} in\n{}",
            diff.stdout
        );
    }
    assert!(diff.stdout.contains("-bee\n+BEE\n"), "{}", diff.stdout);
    assert!(
        diff.stdout.contains("old mode 644\nnew mode 755"),
        "{}",
        diff.stdout
    );
    assert!(!diff.stdout.contains("keep.txt"));
    let json: Vec<Value> =
        serde_json::from_str(&p.run(None, &["diff", &sid, "--json"]).stdout).unwrap();
    let b = json.iter().find(|c| c["path"] == "b.txt").unwrap();
    assert_eq!(
        (
            b["status"].as_str(),
            b["added"].as_u64(),
            b["removed"].as_u64()
        ),
        (Some("modified"), Some(1), Some(1))
    );

    // undo: exactly the files as they were.
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert_eq!(fingerprint(&p.path()), before);
    assert!(
        undo.stdout.contains("before \"edit things\""),
        "{}",
        undo.stdout
    );

    // The log now shows the restore and what came before it.
    let entries = log(&p, &sid);
    let records: Vec<&str> = entries
        .iter()
        .map(|e| e["record"].as_str().unwrap())
        .collect();
    assert_eq!(records, ["restored", "before-restore", "answer", "start"]);
    let before_restore = entries[1]["id"].as_str().unwrap().to_owned();

    // diff against the files on disk: the answer's files differ again.
    let wt = p.run(
        None,
        &["diff", &sid, "--at", &answer[..12], "--worktree", "--stat"],
    );
    assert!(wt.stdout.contains("b.txt | +1 -1"), "{}", wt.stdout);

    // restore --at the answer: forward again, no conflict (the undo's
    // writes are the session's own).
    let fwd = p.run(None, &["restore", &sid, "--at", &answer[..12]]);
    assert_eq!(fwd.code, 0, "{}\n{}", fwd.stdout, fwd.stderr);
    assert_eq!(fingerprint(&p.path()), after);
    let none = p.run(None, &["diff", &sid, "--at", &answer[..12], "--worktree"]);
    assert_eq!(none.stdout.trim(), "no changes", "{}", none.stdout);

    // The start of the answer's instruction: back again.
    let back = p.run(None, &["restore", &sid, "--at", &answer[..12], "--before"]);
    assert_eq!(back.code, 0, "{}\n{}", back.stdout, back.stderr);
    assert_eq!(fingerprint(&p.path()), before);
    // And the undo can itself be undone by its before-restore record.
    let redo = p.run(None, &["restore", &sid, "--at", &before_restore[..12]]);
    assert_eq!(redo.code, 0, "{}\n{}", redo.stdout, redo.stderr);
    assert_eq!(fingerprint(&p.path()), after);

    // The next instruction tells the model what was restored.
    let mock2 = Mock::start(json!([{"content": "ok"}]));
    let next = p.run(Some(&mock2), &["resume", &sid, "-p", "what now"]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    let msgs = mock2.messages(0);
    let last = msgs.last().unwrap()["content"].as_str().unwrap();
    assert!(
        last.contains("restored") && last.contains("b.txt") && last.ends_with("what now"),
        "{last}"
    );
}

#[test]
fn a_second_undo_steps_back_one_more_instruction() {
    let p = Project::new();
    p.write("f.txt", "v0\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "f.txt", "content": "v1\n"}))]},
        {"content": "one"},
        {"tool_calls": [call("write_file", json!({"path": "f.txt", "content": "v2\n"}))]},
        {"content": "two"},
    ]));
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "-p", "first", "-p", "second"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    assert_eq!(p.read("f.txt"), "v2\n");
    let u1 = p.run(None, &["undo"]);
    assert_eq!(u1.code, 0, "{}\n{}", u1.stdout, u1.stderr);
    assert_eq!(p.read("f.txt"), "v1\n");
    let u2 = p.run(None, &["undo", &sid]);
    assert_eq!(u2.code, 0, "{}\n{}", u2.stdout, u2.stderr);
    assert_eq!(p.read("f.txt"), "v0\n");
    let u3 = p.run(None, &["undo", &sid]);
    assert_eq!(u3.code, 1);
    assert!(u3.stderr.contains("nothing to undo"), "{}", u3.stderr);
    assert_eq!(p.read("f.txt"), "v0\n");
}

#[test]
fn conflicts_untracked_ignored_and_nested_repositories_are_left_alone() {
    let p = Project::new();
    p.write(".gitignore", ".env\n");
    p.write("mine.txt", "agent will change\n");
    p.write("other.txt", "agent will change too\n");
    p.write("vendor/lib/.git/HEAD", "ref: refs/heads/main\n");
    p.write("vendor/lib/code.c", "int x;\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "echo agent > mine.txt && echo agent > other.txt && echo SECRET=2 > .env && echo changed > vendor/lib/code.c"}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "go"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let r = &mock.messages(1);
    assert!(
        r[r.len() - 1]["content"]
            .as_str()
            .unwrap()
            .starts_with("exit=0"),
        "{r:?}"
    );
    // The user edits one of the agent's files and makes a file of their own.
    p.write("other.txt", "the user's own edit\n");
    p.write("notes.txt", "untracked, the user's\n");
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 1, "a conflict is reported: {}", undo.stdout);
    assert!(
        undo.stdout
            .contains("left alone  other.txt: changed since the session recorded it"),
        "{}",
        undo.stdout
    );
    assert_eq!(p.read("mine.txt"), "agent will change\n");
    assert_eq!(p.read("other.txt"), "the user's own edit\n");
    assert_eq!(p.read("notes.txt"), "untracked, the user's\n");
    assert_eq!(
        p.read(".env"),
        "SECRET=2\n",
        "ignored files are never touched"
    );
    assert_eq!(
        p.read("vendor/lib/code.c"),
        "changed\n",
        "nested repositories are never touched"
    );
    // --force writes over the user's edit (after recording it).
    let forced = p.run(
        None,
        &[
            "restore",
            &sid,
            "--at",
            &log(&p, &sid)[2]["id"].as_str().unwrap()[..12],
            "--before",
            "--force",
        ],
    );
    assert_eq!(forced.code, 0, "{}\n{}", forced.stdout, forced.stderr);
    assert_eq!(p.read("other.txt"), "agent will change too\n");
    assert_eq!(p.read("notes.txt"), "untracked, the user's\n");
}

#[test]
fn a_restore_never_writes_through_a_symlinked_directory() {
    let p = Project::new();
    p.write("d/f.txt", "original\n");
    let outside = tempfile::tempdir().unwrap();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "echo agent > d/f.txt"}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "go"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    // The directory is swapped for a link to somewhere else, holding a file
    // of the same name and content.
    fs::write(outside.path().join("f.txt"), "agent\n").unwrap();
    fs::rename(p.path().join("d"), p.path().join("d.old")).unwrap();
    std::os::unix::fs::symlink(outside.path(), p.path().join("d")).unwrap();
    let undo = p.run(None, &["undo", &sid, "--force"]);
    assert_eq!(
        fs::read_to_string(outside.path().join("f.txt")).unwrap(),
        "agent\n"
    );
    assert!(
        undo.stdout.contains("d/f.txt"),
        "{}\n{}",
        undo.stdout,
        undo.stderr
    );
}

#[test]
fn undoing_one_session_leaves_another_sessions_changes() {
    let p = Project::new();
    p.write("a.txt", "a0\n");
    p.write("b.txt", "b0\n");
    let ma = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "a.txt", "content": "a1\n"}))]},
        {"content": "a done"},
    ]));
    let ra = p.run(Some(&ma), &["--access", "auto", "-p", "session a"]);
    assert_eq!(ra.code, 0, "{}", ra.stderr);
    let mb = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "b.txt", "content": "b1\n"}))]},
        {"content": "b done"},
    ]));
    let rb = p.run(Some(&mb), &["--access", "auto", "-p", "session b"]);
    assert_eq!(rb.code, 0, "{}", rb.stderr);
    let undo = p.run(None, &["undo", &ra.session()]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert_eq!(p.read("a.txt"), "a0\n");
    assert_eq!(p.read("b.txt"), "b1\n", "session b's change stays");
}

#[test]
fn files_over_the_size_limit_are_not_tracked_and_said_once() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "head -c 4096 /dev/zero > big.bin && echo small > small.txt"}))]},
        {"content": "one"},
        {"content": "two"},
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--access",
            "auto",
            "--workspace-max-file",
            "1K",
            "-p",
            "make",
            "-p",
            "again",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    assert_eq!(
        run.stderr.matches("too large to snapshot").count(),
        1,
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("big.bin"), "{}", run.stderr);
    let text = p.run(None, &["sessions", "log", &sid]);
    assert!(
        text.stdout.contains("1 file not tracked"),
        "{}",
        text.stdout
    );
    // Undo of the first instruction (the second changed no file): small.txt
    // goes, big.bin (not tracked) stays.
    let undo = p.run(None, &["undo", &sid]);
    assert!(
        undo.stdout
            .contains("(skipped 1 instruction that changed no file)"),
        "{}",
        undo.stdout
    );
    assert!(!p.path().join("small.txt").exists(), "{}", undo.stdout);
    assert_eq!(fs::read(p.path().join("big.bin")).unwrap().len(), 4096);
    assert!(
        undo.stdout
            .contains("left alone  big.bin: not read by the snapshot ")
            && undo.stdout.contains(": a file it saw but did not record"),
        "{}",
        undo.stdout
    );
}

#[test]
fn an_instruction_killed_midway_can_be_undone() {
    let p = Project::new();
    p.write("f.txt", "before\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "echo during > f.txt && rm -f gone.txt && echo new > n.txt"}))]},
        {"endless": true},
    ]));
    let (mut child, sid) = p.spawn_session(Some(&mock), &["--access", "auto", "-p", "long job"]);
    // The second request means the tool ran; then the model stalls.
    while mock.requests().len() < 2 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(p.read("f.txt"), "during\n");
    let entries = log(&p, &sid);
    assert_eq!(entries[0]["record"], "start");
    let text = p.run(None, &["sessions", "log", &sid]);
    assert!(text.stdout.contains("never ended"), "{}", text.stdout);
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert_eq!(p.read("f.txt"), "before\n");
    assert!(!p.path().join("n.txt").exists());
}

#[test]
fn undo_refuses_a_busy_session_naming_its_holder() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "first"}, {"endless": true}]));
    let first = p.run(Some(&mock), &["-p", "one"]);
    let sid = first.session();
    let (mut child, _) = p.spawn_session(Some(&mock), &["resume", &sid, "-p", "two"]);
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 1);
    assert!(
        undo.stderr.contains(&format!(
            "in use by the hel instance with pid {} (pid {} since ",
            child.id(),
            child.id()
        )),
        "{}",
        undo.stderr
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_restore_killed_midway_leaves_every_file_old_or_new_and_its_record() {
    let p = Project::new();
    let n = 40;
    for i in 0..n {
        p.write(&format!("f{i:02}.txt"), &format!("old {i}\n"));
    }
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "for f in f*.txt; do echo new-$f > $f; done"}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "rewrite all"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let undo = p
        .hel(None)
        .env("HEL_FAILPOINTS", "restore-rename@15")
        .args(["undo", &sid])
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(undo.status.signal(), Some(9), "killed by the failpoint");
    let mut old = 0;
    for i in 0..n {
        let text = p.read(&format!("f{i:02}.txt"));
        if text == format!("old {i}\n") {
            old += 1;
        } else {
            assert_eq!(text, format!("new-f{i:02}.txt\n"), "never torn");
        }
    }
    assert_eq!(old, 14, "renames before the 15th landed");
    let entries = log(&p, &sid);
    assert_eq!(entries[0]["record"], "before-restore");
    // The undo can be finished: the partly restored files are the
    // session's own records' content, so --force is needed only for them.
    let again = p.run(None, &["undo", &sid, "--force"]);
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    for i in 0..n {
        assert_eq!(p.read(&format!("f{i:02}.txt")), format!("old {i}\n"));
    }
}

#[test]
fn resume_at_a_checkpoint_with_restore_files_forks_and_brings_its_files_back() {
    let (p, sid, first) = two_edits();
    // diff --against: from the first answer to the second.
    let d = p.run(None, &["diff", &sid, "--against", &first[..12], "--stat"]);
    assert_eq!(
        d.stdout, "M f.txt | +1 -1\nA g.txt | +1 -0\n",
        "{}",
        d.stderr
    );
    let mock2 = Mock::start(json!([{"content": "forked"}]));
    let fork = p.run(
        Some(&mock2),
        &[
            "resume",
            &sid,
            "--at",
            &first[..12],
            "--restore-files",
            "-p",
            "go on",
        ],
    );
    assert_eq!(fork.code, 0, "{}", fork.stderr);
    assert!(
        fork.stderr
            .contains("restored the files of the forked checkpoint: 1 file written, 1 removed"),
        "{}",
        fork.stderr
    );
    assert_eq!(p.read("f.txt"), "v1\n");
    assert!(!p.path().join("g.txt").exists());
    // The fork's history holds the restore; the original session is as it was.
    let fsid = fork.session();
    assert_ne!(fsid, sid);
    let records: Vec<String> = log(&p, &fsid)
        .iter()
        .map(|e| e["record"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        &records[..5],
        ["answer", "start", "restored", "before-restore", "fork"]
    );
    assert_eq!(log(&p, &sid)[0]["instruction"], "second");
}

#[test]
fn an_instruction_that_fails_is_recorded_as_interrupted_and_can_be_undone() {
    let p = Project::new();
    p.write("f.txt", "before\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "f.txt", "content": "half done\n"}))]},
        {"status": 400, "body": "bad request"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "try"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let sid = run.session();
    let entries = log(&p, &sid);
    assert_eq!(entries[0]["record"], "interrupted");
    assert!(entries[0]["workspace_start"].is_string());
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert_eq!(p.read("f.txt"), "before\n");
}

/// The id of the newest record of kind `record` (and instruction, if
/// given) in `sid`'s log.
/// A project whose session made two instructions: the first writes f.txt
/// (v0 to v1), the second writes it again (v2) and creates g.txt. Returns
/// the project, the session and the first instruction's answer record.
fn two_edits() -> (Project, String, String) {
    let p = Project::new();
    p.write("f.txt", "v0\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "f.txt", "content": "v1\n"}))]},
        {"content": "one"},
        {"tool_calls": [call("bash", json!({"command": "echo v2 > f.txt && echo extra > g.txt"}))]},
        {"content": "two"},
    ]));
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "-p", "first", "-p", "second"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let first = record_id(&p, &sid, "answer", Some("first"));
    (p, sid, first)
}

fn record_id(p: &Project, sid: &str, record: &str, instruction: Option<&str>) -> String {
    log(p, sid)
        .into_iter()
        .find(|e| e["record"] == record && instruction.is_none_or(|i| e["instruction"] == i))
        .unwrap_or_else(|| panic!("no {record} record in {sid}"))["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

// The start snapshot lists the ignored secret.env and build/ (kinds 4 and
// 6), so undo knows it did not read them.
#[test]
fn undo_of_a_rewritten_gitignore_leaves_the_files_it_ignored() {
    let p = Project::new();
    p.write(".gitignore", "secret.env\nbuild/\n");
    p.write("secret.env", "KEY=the user's\n");
    p.write("build/out.o", "object\n");
    p.write("src.txt", "v0\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "printf 'other\\n' > .gitignore && echo v1 > src.txt"}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "tidy the ignores"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert_eq!(p.read(".gitignore"), "secret.env\nbuild/\n");
    assert_eq!(p.read("src.txt"), "v0\n");
    assert_eq!(p.read("secret.env"), "KEY=the user's\n");
    assert_eq!(p.read("build/out.o"), "object\n");
    for line in [
        "  left alone  build: not read by the snapshot at the instruction's start: a directory it did not list (ignored, unreadable, or past its budget), so nothing in it is touched",
        "  left alone  secret.env: not read by the snapshot at the instruction's start: a file it saw but did not record (ignored, over the size limit or budget, unreadable, or holding a secret)",
    ] {
        assert!(undo.stdout.lines().any(|l| l == line), "{line} in\n{}", undo.stdout);
    }
    assert!(!undo.stdout.contains("remove "), "{}", undo.stdout);
}

/// Ignored paths are not paths a snapshot could not record: no record of
/// the session counts them in `not_tracked` (objects-spec §10.2), the
/// restore's included, though its tree lists them as not tracked.
#[test]
fn a_restore_counts_no_ignored_path_as_not_tracked() {
    let p = Project::new();
    p.write(".gitignore", "secret.env\nbuild/\n");
    p.write("secret.env", "KEY=the user's\n");
    p.write("build/out.o", "object\n");
    p.write("src.txt", "v0\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "echo v1 > src.txt"}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "edit"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert_eq!(p.read("src.txt"), "v0\n");
    let store = hel_store::Store::open(&p.path()).unwrap();
    let mut records = Vec::new();
    for e in log(&p, &sid) {
        let cp = store
            .checkpoint(&e["id"].as_str().unwrap().parse().unwrap())
            .unwrap();
        let ws = cp.workspace.unwrap_or_else(|| panic!("no workspace: {e}"));
        assert_eq!(ws.not_tracked, 0, "{e}");
        records.push(e["record"].as_str().unwrap().to_owned());
    }
    assert_eq!(records, ["restored", "before-restore", "answer", "start"]);
}

/// A start record asks nothing yet: its tokens are 0, not the previous
/// instruction's (objects-spec §2.4, the summary of records that are not
/// answers).
#[test]
fn a_start_record_has_no_tokens_of_its_own() {
    let (p, sid, _) = two_edits();
    let entries = log(&p, &sid);
    let find = |record: &str, instruction: &str| {
        entries
            .iter()
            .find(|e| e["record"] == record && e["instruction"] == instruction)
            .unwrap_or_else(|| panic!("no {record} of {instruction}: {entries:?}"))
    };
    for instruction in ["first", "second"] {
        let answer = find("answer", instruction);
        assert!(answer["input_tokens"].as_u64().unwrap() > 0, "{answer}");
        let start = find("start", instruction);
        assert_eq!(
            (&start["input_tokens"], &start["output_tokens"]),
            (&json!(0), &json!(0)),
            "{start}"
        );
    }
}

/// Run `cmd` as `nobody` when this process is root (where mode 000 stays
/// readable); `Err` with why, when that cannot be done here (no such
/// user, or it cannot run the hel binary where it was built).
fn as_nobody(cmd: &mut std::process::Command) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    if !rustix::process::geteuid().is_root() {
        return Ok(()); // already unprivileged
    }
    let probe = std::process::Command::new(hel_bin())
        .arg("--version")
        .uid(65534)
        .gid(65534)
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => return Err(String::from_utf8_lossy(&o.stderr).into_owned()),
        Err(e) => return Err(e.to_string()),
    }
    cmd.uid(65534).gid(65534);
    Ok(())
}

/// Give `root` and everything under it to `nobody` (when root).
fn give_to_nobody(root: &Path) {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    for e in walkdir::WalkDir::new(root) {
        let e = e.unwrap();
        std::os::unix::fs::lchown(e.path(), Some(65534), Some(65534)).unwrap();
    }
}

// The start snapshot lists the unreadable directory as kind 6, so undo
// knows it did not read what is in it.
#[test]
fn undo_leaves_a_directory_the_start_snapshot_could_not_read() {
    let p = Project::new();
    p.write("locked/mine.txt", "the user's own\n");
    p.write("f.txt", "v0\n");
    give_to_nobody(p.dir.path());
    give_to_nobody(p.home.path());
    fs::set_permissions(p.path().join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "chmod 755 locked && echo v1 > f.txt"}))]},
        {"content": "done"},
    ]));
    let mut cmd = p.hel(Some(&mock));
    if let Err(why) = as_nobody(&mut cmd) {
        // As root a mode 000 directory stays readable: nothing to test.
        eprintln!("skipped: runs as root and cannot run hel as the user nobody ({why})");
        return;
    }
    let run = Run::from_cmd(cmd.args(["--access", "auto", "-p", "open it"]));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    assert_eq!(
        fs::metadata(p.path().join("locked"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o755
    );
    let mut cmd = p.hel(None);
    as_nobody(&mut cmd).expect("it ran as nobody before");
    let undo = Run::from_cmd(cmd.args(["undo", &sid]));
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert_eq!(p.read("f.txt"), "v0\n");
    assert_eq!(p.read("locked/mine.txt"), "the user's own\n");
    assert!(
        undo.stdout.lines().any(|l| l == "  left alone  locked: not read by the snapshot at the instruction's start: a directory it did not list (ignored, unreadable, or past its budget), so nothing in it is touched"),
        "{}",
        undo.stdout
    );
}

/// A session of two instructions ("first" changes early.txt, "second"
/// mine.txt and other.txt), then the user's own edit of other.txt and an
/// undo that refuses it.
fn refused_undo() -> (Project, String) {
    let p = Project::new();
    p.write("early.txt", "e0\n");
    p.write("mine.txt", "m0\n");
    p.write("other.txt", "o0\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "early.txt", "content": "e1\n"}))]},
        {"content": "one"},
        {"tool_calls": [call("bash", json!({"command": "echo agent > mine.txt && echo agent > other.txt"}))]},
        {"content": "two"},
    ]));
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "-p", "first", "-p", "second"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    p.write("other.txt", "the user's edit\n");
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 1, "{}\n{}", undo.stdout, undo.stderr);
    assert!(
        undo.stdout
            .contains("left alone  other.txt: changed since the session recorded it"),
        "{}",
        undo.stdout
    );
    assert_eq!(p.read("mine.txt"), "m0\n");
    assert_eq!(p.read("other.txt"), "the user's edit\n");
    (p, sid)
}

#[test]
fn a_refused_undo_keeps_its_step_and_force_applies_it() {
    let (p, sid) = refused_undo();
    let forced = p.run(None, &["undo", &sid, "--force"]);
    assert_eq!(forced.code, 0, "{}\n{}", forced.stdout, forced.stderr);
    assert!(
        forced.stdout.contains("before \"second\""),
        "{}",
        forced.stdout
    );
    assert_eq!(p.read("other.txt"), "o0\n");
    assert_eq!(p.read("early.txt"), "e1\n", "the step before is not undone");
    // Now the step is done: the next undo is the instruction before.
    let next = p.run(None, &["undo", &sid]);
    assert_eq!(next.code, 0, "{}\n{}", next.stdout, next.stderr);
    assert!(next.stdout.contains("before \"first\""), "{}", next.stdout);
    assert_eq!(p.read("early.txt"), "e0\n");
}

#[test]
fn a_refused_undo_keeps_its_step_until_the_conflict_is_fixed() {
    let (p, sid) = refused_undo();
    // Again, unfixed: still refused (the user's edit is not the session's
    // just because the last undo left it alone).
    let again = p.run(None, &["undo", &sid]);
    assert_eq!(again.code, 1, "{}\n{}", again.stdout, again.stderr);
    assert!(
        again.stdout.contains("before \"second\""),
        "{}",
        again.stdout
    );
    assert_eq!(p.read("other.txt"), "the user's edit\n");
    assert_eq!(p.read("early.txt"), "e1\n");
    // The user puts back what the agent left: the same step applies.
    p.write("other.txt", "agent\n");
    let fixed = p.run(None, &["undo", &sid]);
    assert_eq!(fixed.code, 0, "{}\n{}", fixed.stdout, fixed.stderr);
    assert!(
        fixed.stdout.contains("before \"second\""),
        "{}",
        fixed.stdout
    );
    assert_eq!(p.read("other.txt"), "o0\n");
    assert_eq!(p.read("early.txt"), "e1\n");
}

#[test]
fn one_undo_passes_over_instructions_that_changed_no_file() {
    let p = Project::new();
    p.write("f.txt", "v0\n");
    let mut script = vec![
        json!({"tool_calls": [call("write_file", json!({"path": "f.txt", "content": "v1\n"}))]}),
        json!({"content": "edited"}),
    ];
    let mut args = vec!["--access", "auto", "-p", "the edit"];
    for _ in 0..5 {
        script.push(json!({"content": "nothing to do"}));
        args.extend(["-p", "a question"]);
    }
    let mock = Mock::start(Value::Array(script));
    let run = p.run(Some(&mock), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let records = log(&p, &sid).len();
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert_eq!(p.read("f.txt"), "v0\n");
    assert_eq!(
        undo.stdout.lines().next(),
        Some(
            format!(
                "undo in session {sid}: the files as they were before \"the edit\" (skipped 5 instructions that changed no file)"
            )
            .as_str()
        ),
        "{}",
        undo.stdout
    );
    assert_eq!(undo.stdout.matches("skipped").count(), 1, "{}", undo.stdout);
    assert_eq!(
        log(&p, &sid).len(),
        records + 2,
        "one before-restore, one restored"
    );
}

#[test]
fn undo_at_a_fork_names_the_session_it_was_forked_from() {
    let p = Project::new();
    p.write("f.txt", "v0\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "f.txt", "content": "v1\n"}))]},
        {"content": "one"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "first"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let answer = record_id(&p, &sid, "answer", None);
    let mock2 = Mock::start(json!([{"content": "just talk"}]));
    let fork = p.run(
        Some(&mock2),
        &["resume", &sid, "--at", &answer[..12], "-p", "in the fork"],
    );
    assert_eq!(fork.code, 0, "{}", fork.stderr);
    let fsid = fork.session();
    let first = record_id(&p, &fsid, "fork", None);
    // The newest session is the fork.
    let undo = p.run(None, &["undo"]);
    assert_eq!(undo.code, 1, "{}\n{}", undo.stdout, undo.stderr);
    assert_eq!(
        undo.stderr.trim_end(),
        format!(
            "hel: nothing to undo: the session begins at a fork of checkpoint {} of session {sid}: run `hel undo {sid}` there (skipped 1 instruction that changed no file)",
            &answer[..12]
        )
    );
    // The checkpoint picked is named, not the fork's own record.
    assert!(!undo.stderr.contains(&first[..12]), "{}", undo.stderr);
    assert_eq!(p.read("f.txt"), "v1\n");
}

#[test]
fn restore_files_of_a_checkpoint_from_before_a_relocation() {
    let (p, sid, first) = two_edits();
    // The project moves; the session is continued in the new place.
    let outer = tempfile::tempdir().unwrap();
    let moved = outer.path().join("moved");
    fs::rename(p.dir.path(), &moved).unwrap();
    // Not yet relocated: a fork here is refused as a resume is, and makes
    // no session.
    let mock0 = Mock::start(json!([{"content": "never"}]));
    let early = Run::from_cmd(p.hel_in(&moved, Some(&mock0)).args([
        "resume",
        &sid,
        "--at",
        &first[..12],
        "-p",
        "too soon",
    ]));
    assert_eq!(early.code, 1, "{}", early.stderr);
    assert!(
        early.stderr.contains(&format!(
            "session {sid} belongs to the project at {}",
            p.dir.path().display()
        )) && early
            .stderr
            .contains(&format!("hel resume {sid} --relocate")),
        "{}",
        early.stderr
    );
    assert!(mock0.requests().is_empty());
    let sessions = Run::from_cmd(p.hel_in(&moved, None).args(["sessions", "--json"]));
    let listed: Vec<Value> = serde_json::from_str(&sessions.stdout).unwrap();
    assert_eq!(listed.len(), 1, "{}", sessions.stdout);
    let mock2 = Mock::start(json!([{"content": "here now"}]));
    let here = Run::from_cmd(p.hel_in(&moved, Some(&mock2)).args([
        "resume",
        &sid,
        "--relocate",
        "-p",
        "moved",
    ]));
    assert_eq!(here.code, 0, "{}", here.stderr);
    // Forking the checkpoint from before the move, with its files.
    let mock3 = Mock::start(json!([{"content": "forked"}]));
    let fork = Run::from_cmd(p.hel_in(&moved, Some(&mock3)).args([
        "resume",
        &sid,
        "--at",
        &first[..12],
        "--restore-files",
        "-p",
        "go on",
    ]));
    assert_eq!(fork.code, 0, "{}", fork.stderr);
    assert_eq!(fs::read_to_string(moved.join("f.txt")).unwrap(), "v1\n");
    assert!(!moved.join("g.txt").exists());
    assert_eq!(mock3.requests().len(), 1, "the fork ran");
}

#[test]
fn a_file_name_with_a_newline_is_one_escaped_line() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "printf 'x\\n' > \"$(printf 'evil\\nA forged')\""}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "make it"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    assert!(p.path().join("evil\nA forged").exists());
    let stat = p.run(None, &["diff", &sid, "--stat"]);
    assert_eq!(stat.stdout, "A evil^JA forged | +1 -0\n", "{}", stat.stderr);
    let full = p.run(None, &["diff", &sid]);
    assert!(
        full.stdout.lines().any(|l| l == "+++ b/evil^JA forged"),
        "{}",
        full.stdout
    );
    assert!(
        !full.stdout.lines().any(|l| l.starts_with("A forged")),
        "{}",
        full.stdout
    );
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert!(
        undo.stdout
            .lines()
            .any(|l| l == "  remove    evil^JA forged"),
        "{}",
        undo.stdout
    );
    assert!(
        !undo.stdout.lines().any(|l| l.starts_with("A forged")),
        "{}",
        undo.stdout
    );
    assert!(!p.path().join("evil\nA forged").exists());
}

/// `hel` with `args` on a fresh pseudo-terminal in project `p`.
fn on_a_terminal(p: &Project, args: &[&str]) -> rexpect::session::PtySession {
    let mut cmd = std::process::Command::new(hel_bin());
    cmd.current_dir(p.dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p.home.path())
        .env("TERM", "xterm")
        .args(args);
    rexpect::session::spawn_command(cmd, Some(30_000)).unwrap()
}

/// Wait for `text` on the terminal; what came before it.
fn expect(s: &mut rexpect::session::PtySession, text: &str) -> String {
    s.exp_string(text)
        .unwrap_or_else(|e| panic!("waiting for {text:?}: {e}"))
}

/// Wait for the end of the process on the terminal: its exit code, and
/// what it printed from now on.
fn ended(mut s: rexpect::session::PtySession) -> (i32, String) {
    use rexpect::process::wait::WaitStatus;
    let rest = s.exp_eof().unwrap();
    match s.process.wait().unwrap() {
        WaitStatus::Exited(_, c) => (c, rest),
        other => panic!("hel ended as {other:?}"),
    }
}

/// A session of one instruction that writes f.txt and makes `new`.
fn one_edit(p: &Project, new: &str) -> String {
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!("echo agent > f.txt && echo new > {new}")}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "edit"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.session()
}

#[test]
fn undo_asks_on_a_terminal_before_removing_and_yes_or_a_pipe_does_not() {
    let p = Project::new();
    p.write("f.txt", "v0\n");
    let sid = one_edit(&p, "new.txt");
    // No: nothing is written.
    let mut s = on_a_terminal(&p, &["undo", &sid]);
    let plan = expect(&mut s, "hel: allow undo to remove new.txt? [y/N] ");
    assert!(plan.contains("  restore   f.txt"), "{plan}");
    assert!(plan.contains("  remove    new.txt"), "{plan}");
    s.send_line("n").unwrap();
    let (code, rest) = ended(s);
    assert_eq!(code, 1, "{rest}");
    assert!(
        rest.contains("hel: undo not made: the answer was no; nothing was written"),
        "{rest}"
    );
    assert_eq!(p.read("f.txt"), "agent\n");
    assert_eq!(p.read("new.txt"), "new\n");
    // Yes: the same step is undone.
    let mut s = on_a_terminal(&p, &["undo", &sid]);
    expect(&mut s, "hel: allow undo to remove new.txt? [y/N] ");
    s.send_line("y").unwrap();
    let (code, rest) = ended(s);
    assert_eq!(code, 0, "{rest}");
    assert!(
        rest.contains("1 file restored, 1 removed, 0 left alone"),
        "{rest}"
    );
    assert_eq!(p.read("f.txt"), "v0\n");
    assert!(!p.path().join("new.txt").exists());

    // --yes on a terminal: no question.
    let sid = one_edit(&p, "two.txt");
    let s = on_a_terminal(&p, &["undo", &sid, "--yes"]);
    let (code, out) = ended(s);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("[y/N]"), "{out}");
    assert!(!p.path().join("two.txt").exists());

    // Off a terminal (a pipe, no terminal at all): no question either.
    let sid = one_edit(&p, "three.txt");
    let piped = p.run(None, &["undo", &sid]);
    assert_eq!(piped.code, 0, "{}\n{}", piped.stdout, piped.stderr);
    assert!(
        piped.stdout.contains("  remove    three.txt"),
        "{}",
        piped.stdout
    );
    assert!(!p.path().join("three.txt").exists());
}

#[test]
fn sessions_delete_asks_on_a_terminal() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "one"}, {"content": "two"}, {"content": "three"}]));
    let a = p.run(Some(&mock), &["-p", "one"]).session();
    let b = p.run(Some(&mock), &["-p", "two"]).session();
    // Only a delete for good asks (one to the trash can be undone).
    let mut s = on_a_terminal(&p, &["sessions", "delete", "--now", &a]);
    expect(
        &mut s,
        &format!("hel: allow deleting session {a} for good and its "),
    );
    expect(&mut s, "? [y/N] ");
    s.send_line("n").unwrap();
    let (code, rest) = ended(s);
    assert_eq!(code, 1, "{rest}");
    assert!(rest.contains(&format!("session {a} not deleted")), "{rest}");
    assert_eq!(p.run(None, &["sessions", "log", &a]).code, 0);
    let mut s = on_a_terminal(&p, &["sessions", "delete", "--now", &a]);
    expect(&mut s, "? [y/N] ");
    s.send_line("y").unwrap();
    assert_eq!(ended(s).0, 0);
    assert_ne!(p.run(None, &["sessions", "log", &a]).code, 0);
    let (code, out) = ended(on_a_terminal(
        &p,
        &["sessions", "delete", "--now", &b, "--yes"],
    ));
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("[y/N]"), "{out}");
    assert_ne!(p.run(None, &["sessions", "log", &b]).code, 0);
    // To the trash: nothing asked.
    let c = p.run(Some(&mock), &["-p", "three"]).session();
    let (code, out) = ended(on_a_terminal(&p, &["sessions", "delete", &c]));
    assert_eq!(code, 0, "{out}");
    assert!(
        !out.contains("[y/N]") && out.contains("to the trash"),
        "{out}"
    );
}

/// What the user changes between two instructions is theirs, whatever
/// later undos do: the agent removes a directory, the user puts a file in
/// its place, a later instruction changes nothing, and undoing the agent's
/// instruction leaves the user's file (before: the directory came back
/// over it). And an undo that brought back the user's change does not make
/// it the session's: the agent writes f, the user chmods d, the agent
/// chmods d back; the first undo restores the user's mode, the second
/// undo (of the write) leaves d's mode alone.
#[test]
fn undo_never_reverts_what_the_user_changed_between_instructions() {
    let p = Project::new();
    p.write("a/ign", "w7\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "rm -rf a"}))]},
        {"content": "removed"},
        {"content": "nothing to do"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "remove a"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    p.write("a", "the user's file\n");
    let again = p.run(Some(&mock), &["resume", &sid, "-p", "a question"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let undo = p.run(None, &["undo", &sid, "--json"]);
    assert_eq!(p.read("a"), "the user's file\n", "{}", undo.stdout);
    let out: Value = serde_json::from_str(&undo.stdout).unwrap();
    assert_eq!(out["conflicts"][0]["path"], "a", "{}", undo.stdout);
    assert_eq!(out["conflicts"][0]["kind"], "changed", "{}", undo.stdout);
    assert_eq!(undo.code, 1, "a path refused as the user's: exit 1");

    let p = Project::new();
    std::fs::create_dir(p.path().join("d")).unwrap();
    let d = p.path().join("d");
    let mode = |m| std::fs::set_permissions(&d, std::fs::Permissions::from_mode(m)).unwrap();
    mode(0o755);
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "f.txt", "content": "v1\n"}))]},
        {"content": "wrote"},
        {"tool_calls": [call("bash", json!({"command": "chmod 755 d"}))]},
        {"content": "opened d"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "write f"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    mode(0o700);
    let again = p.run(
        Some(&mock),
        &["resume", &sid, "--access", "auto", "-p", "open d"],
    );
    assert_eq!(again.code, 0, "{}", again.stderr);
    let first = p.run(None, &["undo", &sid]);
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    let perm = || std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
    assert_eq!(perm(), 0o700, "the first undo puts back the user's mode");
    let second = p.run(None, &["undo", &sid, "--json"]);
    assert_eq!(perm(), 0o700, "{}", second.stdout);
    assert!(!p.path().join("f.txt").exists(), "{}", second.stdout);
    let out: Value = serde_json::from_str(&second.stdout).unwrap();
    assert_eq!(out["conflicts"][0]["path"], "d", "{}", second.stdout);
    assert_eq!(out["conflicts"][0]["kind"], "changed", "{}", second.stdout);
}

/// A workspace walk that can start no thread (the `thread-spawn`
/// failpoint stands for a process or container limit) is a warning that
/// names why, not a panic and not an empty snapshot (which an undo would
/// read as every file gone): the answer is still given and saved, marked
/// as one that cannot be undone.
#[test]
fn a_walk_that_can_start_no_thread_is_a_clear_error_not_a_panic() {
    let p = Project::new();
    p.write("keep.txt", "the user's\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "echo new > made.txt"}))]},
        {"content": "done"},
    ]));
    let run = Run::from_cmd(
        p.hel(Some(&mock))
            .env("HEL_FAILPOINTS", "thread-spawn")
            .args(["--access", "auto", "-p", "make a file"]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("no thread could be started to walk it); this checkpoint cannot be undone"),
        "{}",
        run.stderr
    );
    assert_eq!(p.read("made.txt"), "new\n");
    assert_eq!(p.read("keep.txt"), "the user's\n");
}

/// A project where one instruction made four of its files what a snapshot
/// does not read: Makefile a FIFO, data.txt emptied and grown past what
/// the snapshot tracks (64 MiB, sparse), secret.txt ignored then
/// rewritten, build/ ignored then replaced. The start snapshot holds each
/// one's content.
fn made_unreadable() -> (Project, String) {
    let p = Project::new();
    p.write("Makefile", "all:\n\techo build\n");
    p.write("data.txt", "data\n");
    p.write("secret.txt", "the start's\n");
    p.write("build/out.o", "object\n");
    p.write("build/sub/deep.o", "deep\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "rm Makefile && mkfifo Makefile && : > data.txt && truncate -s 65M data.txt && printf 'secret.txt\\nbuild/\\n' > .gitignore && echo agent > secret.txt && rm -rf build && mkdir build && echo agent > build/out.o"}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "break things"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = &mock.messages(1);
    let result = r[r.len() - 1]["content"].as_str().unwrap();
    assert!(result.starts_with("exit=0"), "{result}");
    let meta = fs::symlink_metadata(p.path().join("Makefile")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()));
    (p, run.session())
}

fn start_content_is_back(p: &Project, out: &Run) {
    let shown = format!("{}\n{}", out.stdout, out.stderr);
    assert!(
        fs::symlink_metadata(p.path().join("Makefile"))
            .unwrap()
            .is_file(),
        "{shown}"
    );
    assert_eq!(p.read("Makefile"), "all:\n\techo build\n", "{shown}");
    assert_eq!(p.read("data.txt"), "data\n", "{shown}");
    assert_eq!(p.read("secret.txt"), "the start's\n", "{shown}");
    assert_eq!(p.read("build/out.o"), "object\n", "{shown}");
    assert_eq!(p.read("build/sub/deep.o"), "deep\n", "{shown}");
    assert!(!p.path().join(".gitignore").exists(), "{shown}");
    for path in ["Makefile", "data.txt", "secret.txt", "build/out.o"] {
        assert!(
            out.stdout
                .lines()
                .any(|l| l == format!("  restore   {path}")),
            "{path} in\n{shown}"
        );
    }
}

// The end snapshot records that it did not read them (kinds 4 and 6); the
// start snapshot is the proof of what to put back.
#[test]
fn undo_puts_back_what_the_agent_made_special_oversized_or_ignored() {
    let (p, sid) = made_unreadable();
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    start_content_is_back(&p, &undo);
}

#[test]
fn restore_before_puts_them_back_and_what_changed_since_needs_force() {
    let (p, sid) = made_unreadable();
    // Grown again since the instruction: not what its end recorded.
    let f = fs::File::options()
        .write(true)
        .open(p.path().join("data.txt"))
        .unwrap();
    f.set_len(66 << 20).unwrap();
    let answer = record_id(&p, &sid, "answer", None);
    let plain = p.run(None, &["restore", &sid, "--at", &answer[..12], "--before"]);
    assert_eq!(plain.code, 1, "{}\n{}", plain.stdout, plain.stderr);
    assert!(
        plain
            .stdout
            .contains("left alone  data.txt: changed since the session recorded it"),
        "{}",
        plain.stdout
    );
    assert_eq!(
        fs::metadata(p.path().join("data.txt")).unwrap().len(),
        66 << 20
    );
    assert_eq!(p.read("Makefile"), "all:\n\techo build\n");
    let forced = p.run(
        None,
        &[
            "restore",
            &sid,
            "--at",
            &answer[..12],
            "--before",
            "--force",
        ],
    );
    assert_eq!(forced.code, 0, "{}\n{}", forced.stdout, forced.stderr);
    assert_eq!(p.read("data.txt"), "data\n");
    assert!(
        forced.stdout.lines().any(|l| l == "  restore   data.txt"),
        "{}",
        forced.stdout
    );
}

// A file that only became ignored is not touched; one the user changed
// after the instruction, which no snapshot read since its start, is left
// alone even forced (nothing shows the session made it), and said.
#[test]
fn undo_leaves_what_only_became_ignored_or_changed_after_unread() {
    let p = Project::new();
    p.write("kept.log", "the user's\n");
    p.write("edited.cfg", "v0\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "printf '*.log\\nedited.cfg\\n' > .gitignore && echo agent > edited.cfg"}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "ignore"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let ino =
        |rel: &str| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p.path().join(rel)).unwrap());
    let kept = ino("kept.log");
    file_clock_caught_up(p.home.path());
    p.write("edited.cfg", "the user's edit\n");
    let undo = p.run(None, &["undo", &sid, "--force"]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert!(!p.path().join(".gitignore").exists(), "{}", undo.stdout);
    assert_eq!(p.read("kept.log"), "the user's\n");
    assert_eq!(ino("kept.log"), kept, "not rewritten");
    assert!(!undo.stdout.contains("kept.log"), "{}", undo.stdout);
    assert_eq!(p.read("edited.cfg"), "the user's edit\n");
    assert!(
        undo.stdout.lines().any(|l| l == "  left alone  edited.cfg: not read by the snapshot the session last recorded, and changed since: nothing shows the session made what is there, so it is left alone, forced or not"),
        "{}",
        undo.stdout
    );
}

// A directory that only became ignored (the agent edited `.gitignore`),
// then moved away by the user, is not brought back by undo, forced or
// not, whether the user moved it right after the instruction or before
// another one: nothing shows the session changed it.
#[test]
fn undo_does_not_bring_back_what_only_became_ignored_and_the_user_moved() {
    for later in [false, true] {
        let p = Project::new();
        p.write("tmp/a", "v4\n");
        let mut replies = vec![
            json!({"tool_calls": [call("bash", json!({"command": "printf '*.log\\ntmp/\\n' > .gitignore && echo one > step1.txt"}))]}),
            json!({"content": "done"}),
        ];
        if later {
            replies.push(json!({"tool_calls": [call("write_file", json!({"path": "step2.txt", "content": "two\n"}))]}));
            replies.push(json!({"content": "done"}));
        }
        let mock = Mock::start(Value::Array(replies));
        let run = p.run(Some(&mock), &["--access", "auto", "-p", "ignore"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let sid = run.session();
        fs::create_dir(p.path().join("c.log")).unwrap();
        fs::rename(p.path().join("tmp"), p.path().join("c.log/c.log")).unwrap();
        if later {
            let again = p.run(
                Some(&mock),
                &["--access", "auto", "resume", &sid, "-p", "two"],
            );
            assert_eq!(again.code, 0, "{}", again.stderr);
            let undo = p.run(None, &["undo", &sid]);
            assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
            assert!(!p.path().join("step2.txt").exists(), "{}", undo.stdout);
        }
        let undo = p.run(None, &["undo", &sid, "--force"]);
        assert!(
            !p.path().join("tmp").exists(),
            "{later}: {}{}",
            undo.stdout,
            undo.stderr
        );
        assert!(!undo.stdout.contains("restore   tmp"), "{}", undo.stdout);
        assert!(
            undo.stdout
                .lines()
                .any(|l| l.starts_with("  left alone  tmp: not read by the snapshot")),
            "{}",
            undo.stdout
        );
        assert_eq!(p.read("c.log/c.log/a"), "v4\n");
        assert!(!p.path().join(".gitignore").exists(), "{}", undo.stdout);
        assert!(!p.path().join("step1.txt").exists(), "{}", undo.stdout);
    }
}

/// A session that made new.txt and sub/deep/x.txt, both then deleted by
/// the user; returns the project, the session and the answer record.
fn made_then_deleted() -> (Project, String, String) {
    let p = Project::new();
    p.write("keep.txt", "k\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "mkdir -p sub/deep && echo deep > sub/deep/x.txt && echo made by the agent > new.txt"}))]},
        {"content": "made"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "make them"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let cp = record_id(&p, &sid, "answer", Some("make them"));
    fs::remove_file(p.path().join("new.txt")).unwrap();
    fs::remove_dir_all(p.path().join("sub")).unwrap();
    (p, sid, cp)
}

#[test]
fn restore_force_of_a_path_the_user_deleted_brings_it_back() {
    let (p, sid, cp) = made_then_deleted();
    let records = log(&p, &sid).len();
    // Not forced: the session did not change it after the checkpoint, so
    // it is left, and the output says why, with a failure.
    let plain = p.run(None, &["restore", &sid, "--at", &cp, "new.txt"]);
    assert_eq!(plain.code, 1, "{}\n{}", plain.stdout, plain.stderr);
    assert!(
        plain
            .stdout
            .contains("untouched   new.txt: changed since it was as at checkpoint")
            && plain.stdout.contains("--force brings it back"),
        "{}",
        plain.stdout
    );
    assert!(!p.path().join("new.txt").exists());
    assert_eq!(
        log(&p, &sid).len(),
        records,
        "nothing written, nothing recorded"
    );
    // Forced: the path comes back with its content, and so does a file
    // whose directories went too.
    let forced = p.run(
        None,
        &[
            "restore",
            &sid,
            "--at",
            &cp,
            "--force",
            "new.txt",
            "sub/deep/x.txt",
        ],
    );
    assert_eq!(forced.code, 0, "{}\n{}", forced.stdout, forced.stderr);
    assert!(
        forced.stdout.contains("restore   new.txt"),
        "{}",
        forced.stdout
    );
    assert!(
        forced.stdout.contains("restore   sub/deep/x.txt")
            && forced
                .stdout
                .contains("4 files restored, 0 removed, 0 left alone"),
        "{}",
        forced.stdout
    );
    assert_eq!(p.read("new.txt"), "made by the agent\n");
    assert_eq!(p.read("sub/deep/x.txt"), "deep\n");
    assert_eq!(p.read("keep.txt"), "k\n");
    assert_eq!(log(&p, &sid).len(), records + 2);
    // Again: already as asked, nothing recorded, not a failure.
    let again = p.run(None, &["restore", &sid, "--at", &cp, "--force", "new.txt"]);
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert!(
        again
            .stdout
            .contains("untouched   new.txt: already as it was at checkpoint")
            && again.stdout.contains("nothing to do, nothing recorded"),
        "{}",
        again.stdout
    );
    assert_eq!(log(&p, &sid).len(), records + 2);
    // A path neither the checkpoint nor the files hold is named as such,
    // and fails; so does one the user made that the checkpoint lacks
    // (never removed).
    p.write("mine.txt", "the user's\n");
    let none = p.run(
        None,
        &[
            "restore",
            &sid,
            "--at",
            &cp,
            "--force",
            "--json",
            "nowhere.txt",
            "mine.txt",
        ],
    );
    assert_eq!(none.code, 1, "{}\n{}", none.stdout, none.stderr);
    let v: Value = serde_json::from_str(&none.stdout).unwrap();
    assert_eq!(v["before"], Value::Null, "{v}");
    assert_eq!(v["restored"], Value::Null, "{v}");
    let named = v["named"].as_array().unwrap();
    assert_eq!(named.len(), 2, "{v}");
    assert_eq!(named[0]["path"], "nowhere.txt");
    assert!(
        named[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("not in the files, nor"),
        "{v}"
    );
    assert_eq!(named[1]["path"], "mine.txt");
    assert!(
        named[1]["reason"].as_str().unwrap().contains("not removed"),
        "{v}"
    );
    assert_eq!(p.read("mine.txt"), "the user's\n");
    assert_eq!(log(&p, &sid).len(), records + 2);
}

#[test]
fn a_restore_or_undo_that_changes_nothing_records_nothing() {
    let (p, sid, _) = two_edits();
    let last = record_id(&p, &sid, "answer", Some("second"));
    let records = log(&p, &sid).len();
    let same = p.run(None, &["restore", &sid, "--at", &last]);
    assert_eq!(same.code, 0, "{}\n{}", same.stdout, same.stderr);
    assert!(
        same.stdout
            .contains("0 files restored, 0 removed, 0 left alone: nothing to do, nothing recorded"),
        "{}",
        same.stdout
    );
    assert_eq!(log(&p, &sid).len(), records);
    // An undo refused again changes nothing and records nothing: its step
    // stays current.
    let (p, sid) = refused_undo();
    let records = log(&p, &sid).len();
    let again = p.run(None, &["undo", &sid]);
    assert_eq!(again.code, 1, "{}\n{}", again.stdout, again.stderr);
    assert!(
        again.stdout.contains("nothing recorded"),
        "{}",
        again.stdout
    );
    assert_eq!(log(&p, &sid).len(), records);
}
