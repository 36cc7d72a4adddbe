//! The operation log: `hel op log [--json]` after each kind of session
//! operation, `hel op undo` of each and of an undo, hostile entries, and
//! a SIGKILL at each step of an undo.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;

fn ok(run: &Run) -> &str {
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    &run.stdout
}

fn json_of(run: &Run) -> Value {
    serde_json::from_str(ok(run)).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// `hel op log --json`.
fn ops(p: &Project) -> Vec<Value> {
    json_of(&p.run(None, &["op", "log", "--json"]))
        .as_array()
        .unwrap()
        .clone()
}

fn last(p: &Project) -> Value {
    ops(p).last().cloned().expect("an entry")
}

/// The listing's row of `id` (None: not listed).
fn listed(p: &Project, id: &str) -> Option<Value> {
    json_of(&p.run(None, &["sessions", "--json"]))
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .cloned()
}

fn sound(p: &Project) {
    let run = p.run(None, &["fsck"]);
    assert!(
        run.code == 0 && run.stdout.contains("store is sound"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
}

fn undo(p: &Project, op: Option<&str>) -> Value {
    let mut args = vec!["op", "undo", "--json"];
    args.extend(op);
    json_of(&p.run(None, &args))
}

fn answers(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"content": format!("answer {i}")}))
            .collect(),
    )
}

#[test]
fn a_rename_a_fork_and_their_undos_are_logged_and_reverted() {
    let p = Project::new();
    let mock = Mock::start(answers(3));
    let a = p.run(Some(&mock), &["-p", "first"]).session();
    assert_eq!(
        ok(&p.run(None, &["op", "log"])).trim(),
        "the operation log is empty"
    );
    ok(&p.run(None, &["sessions", "rename", &a, "work"]));
    let e = last(&p);
    assert_eq!(e["kind"], "rename");
    assert_eq!(e["changes"][0]["session"], a.as_str());
    assert_eq!(
        e["changes"][0]["name"],
        json!({"before": null, "after": "work"})
    );
    assert_eq!(e["revertible"], true);
    let text = p.run(None, &["op", "log"]);
    assert!(ok(&text).contains("rename"), "{}", text.stdout);
    assert!(
        text.stdout.contains("name (none) -> work"),
        "{}",
        text.stdout
    );
    // Undone: the old name (none) back; the undo is an entry of its own.
    let u = undo(&p, None);
    assert_eq!(u["undid"], e["op"]);
    assert_eq!(listed(&p, &a).unwrap()["name"], Value::Null);
    let log = ops(&p);
    assert_eq!(log.len(), 2);
    assert_eq!(log[1]["kind"], "undo");
    assert_eq!(log[1]["undoes"], e["op"]);
    assert_eq!(log[0]["undone_by"], log[1]["op"]);
    assert_eq!(log[0]["revertible"], false);
    let text = ok(&p.run(None, &["op", "log"])).to_owned();
    assert!(text.contains("undone by"), "{text}");
    // Undone once only; undoing the undo renames again.
    let op0 = log[0]["op"].as_str().unwrap();
    let again = p.run(None, &["op", "undo", &op0[..8]]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(again.stderr.contains("undone already"), "{}", again.stderr);
    ok(&p.run(None, &["op", "undo"]));
    assert_eq!(listed(&p, &a).unwrap()["name"], "work");
    sound(&p);

    // A fork (`hel resume --at`) is an entry; its undo moves the fork to
    // the trash, later checkpoints and all, and the undo of that brings it back.
    let log = json_of(&p.run(None, &["sessions", "log", &a, "--json"]));
    let at = log[0]["id"].as_str().unwrap().to_owned();
    let run = p.run(
        Some(&mock),
        &["resume", &a, "--at", &at[..12], "-p", "more"],
    );
    let fork = run.session();
    assert_ne!(fork, a);
    let e = last(&p);
    assert_eq!(e["kind"], "fork");
    assert_eq!(e["changes"][0]["session"], fork.as_str());
    assert_eq!(e["changes"][0]["head"]["before"], Value::Null);
    let head = listed(&p, &fork).unwrap()["head"].clone();
    undo(&p, None);
    assert!(listed(&p, &fork).is_none());
    assert!(listed(&p, &a).is_some());
    sound(&p);
    let u = undo(&p, None);
    assert_eq!(u["kind"], "undo");
    assert_eq!(listed(&p, &fork).unwrap()["head"], head);
    sound(&p);
}

/// A bundle of `session` as it is now, written to `path`.
fn bundle(p: &Project, session: &str, path: &Path) {
    let arg = path.to_str().unwrap();
    ok(&p.run(None, &["sessions", "export", session, "--bundle", arg]));
}

#[test]
fn an_import_that_moved_a_session_forward_is_undone_to_the_head_it_replaced() {
    let (p, q) = (Project::new(), Project::new());
    let mock = Mock::start(answers(2));
    let s = p.run(Some(&mock), &["-p", "first"]).session();
    let out = tempfile::tempdir().unwrap();
    let (b1, b2) = (
        out.path().join("one.helbundle"),
        out.path().join("two.helbundle"),
    );
    bundle(&p, &s, &b1);
    ok(&p.run(Some(&mock), &["resume", &s, "-p", "second"]));
    bundle(&p, &s, &b2);
    let h2 = listed(&p, &s).unwrap()["head"].clone();

    ok(&q.run(None, &["sessions", "import", b1.to_str().unwrap()]));
    let h1 = listed(&q, &s).unwrap()["head"].clone();
    let e = last(&q);
    assert_eq!(e["kind"], "import");
    assert_eq!(
        e["changes"][0]["head"],
        json!({"before": null, "after": h1})
    );
    ok(&q.run(None, &["sessions", "import", b2.to_str().unwrap()]));
    let e = last(&q);
    assert_eq!(e["changes"][0]["head"], json!({"before": h1, "after": h2}));
    // Undone: the ref it replaced, by a commit (fsck sound); gc keeps the
    // newer head for the redo.
    undo(&q, None);
    assert_eq!(listed(&q, &s).unwrap()["head"], h1);
    sound(&q);
    ok(&q.run(None, &["gc"]));
    undo(&q, None);
    assert_eq!(listed(&q, &s).unwrap()["head"], h2);
    sound(&q);
    // The first import, undone once the session moved on since it: the
    // session goes to the trash, whatever it holds now.
    let first = ops(&q)[0]["op"].as_str().unwrap().to_owned();
    undo(&q, Some(&first[..6]));
    assert!(listed(&q, &s).is_none());
    sound(&q);
    // The gc merged the two imports' packs: it says what it reclaimed,
    // and cannot be undone (the default undo passes over it).
    let log = ops(&q);
    let kinds: Vec<Value> = log.iter().map(|e| e["kind"].clone()).collect();
    assert_eq!(
        kinds,
        ["import", "import", "undo", "gc", "undo", "undo"].map(Value::from)
    );
    assert!(log[3]["note"].as_str().unwrap().starts_with("reclaimed"));
    assert_eq!(log[3]["revertible"], false);
    let gc = log[3]["op"].as_str().unwrap();
    let refused = q.run(None, &["op", "undo", gc]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("a gc cannot be undone"),
        "{}",
        refused.stderr
    );
}

#[test]
fn a_delete_and_an_undelete_are_undone_through_the_trash() {
    let p = Project::new();
    let mock = Mock::start(answers(2));
    let a = p.run(Some(&mock), &["-p", "first"]).session();
    let b = p.run(Some(&mock), &["-p", "second"]).session();
    ok(&p.run(None, &["sessions", "rename", &a, "work"]));
    let head = listed(&p, &a).unwrap()["head"].clone();
    ok(&p.run(None, &["sessions", "delete", &a]));
    assert!(listed(&p, &a).is_none());
    let e = ops(&p).into_iter().rfind(|e| e["kind"] != "gc").unwrap();
    assert_eq!(e["kind"], "delete");
    assert_eq!(
        e["changes"][0]["head"],
        json!({"before": head, "after": null})
    );
    assert_eq!(
        e["changes"][0]["name"],
        json!({"before": "work", "after": null})
    );
    // The default undo passes over the gc the delete ran.
    let u = undo(&p, None);
    assert_eq!(u["undid"], e["op"]);
    assert_eq!(listed(&p, &a).unwrap()["head"], head);
    assert_eq!(listed(&p, &a).unwrap()["name"], "work");
    sound(&p);
    // And the undo of that undo deletes it again.
    undo(&p, None);
    assert!(listed(&p, &a).is_none());
    sound(&p);
    ok(&p.run(None, &["sessions", "undelete", &a]));
    assert_eq!(last(&p)["kind"], "undelete");
    undo(&p, None);
    assert!(listed(&p, &a).is_none());
    assert!(listed(&p, &b).is_some());
    sound(&p);
    let text = ok(&p.run(None, &["op", "log"])).to_owned();
    assert!(
        text.contains("delete") && text.contains("undelete"),
        "{text}"
    );
}

#[test]
fn an_import_from_another_agent_is_undone_to_the_trash() {
    let p = Project::new();
    let file = format!(
        "{}/../../tests/fixtures/import/claude/sdk-session.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    ok(&p.run(None, &["sessions", "import", "--from", "claude", &file]));
    let e = last(&p);
    assert_eq!(e["kind"], "import");
    let s = e["changes"][0]["session"].as_str().unwrap().to_owned();
    assert!(listed(&p, &s).is_some());
    undo(&p, Some(e["op"].as_str().unwrap()));
    assert!(listed(&p, &s).is_none());
    sound(&p);
    undo(&p, None);
    assert!(listed(&p, &s).is_some());
    sound(&p);
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

#[test]
fn an_adoption_is_undone_to_shipped() {
    let (p, q) = (Project::new(), Project::new());
    let mock = Mock::start(answers(1));
    let s = p.run(Some(&mock), &["-p", "first"]).session();
    copy_tree(&p.path().join(".hel"), &q.path().join(".hel"));
    assert_eq!(listed(&q, &s).unwrap()["shipped"], true);
    ok(&q.run(None, &["sessions", "adopt", "--all"]));
    assert_eq!(listed(&q, &s).unwrap()["shipped"], false);
    let e = last(&q);
    assert_eq!(e["kind"], "relocate");
    assert_eq!(
        e["changes"][0]["own"],
        json!({"before": false, "after": true})
    );
    undo(&q, None);
    assert_eq!(listed(&q, &s).unwrap()["shipped"], true);
    undo(&q, None);
    assert_eq!(listed(&q, &s).unwrap()["shipped"], false);
    sound(&q);
}

fn entry_files(p: &Project) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(p.path().join(".hel/oplog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn a_hostile_entry_is_a_fault_naming_its_file_and_nothing_is_lost() {
    let p = Project::new();
    let mock = Mock::start(answers(2));
    let a = p.run(Some(&mock), &["-p", "first"]).session();
    let b = p.run(Some(&mock), &["-p", "second"]).session();
    ok(&p.run(None, &["sessions", "rename", &a, "work"]));
    let good = entry_files(&p)[0].clone();
    let dir = good.parent().unwrap().to_owned();
    let text = std::fs::read_to_string(&good).unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let future = now_ms + 400 * 24 * 3600 * 1000;
    let op = "f".repeat(32);
    let b_head = listed(&p, &b).unwrap()["head"].as_str().unwrap().to_owned();
    let a_head = listed(&p, &a).unwrap()["head"].as_str().unwrap().to_owned();
    // (file name, bytes, what the fault says)
    let hostile: Vec<(String, Vec<u8>, &str)> = vec![
        (
            format!("{future:016}-{op}"),
            format!(
                r#"{{"changes":[],"kind":"rename","note":"","op":"{op}","time_ms":{future},"undoes":null,"version":1}}"#
            )
            .into_bytes(),
            "in the future",
        ),
        (
            format!("{:016}-{}", 1, "e".repeat(32)),
            vec![b'{'; 300 << 10],
            "over the",
        ),
        // The newest entry (a second ahead, not a future date): the one
        // `op undo` takes, whatever the rename's entry's time.
        (
            format!("{:016}-{}", now_ms + 1000, "d".repeat(32)),
            format!(
                r#"{{"changes":[{{"head":{{"after":"{b_head}","before":"{a_head}"}},"name":null,"own":null,"session":"{a}"}}],"kind":"pull","note":"","op":"{}","time_ms":{},"undoes":null,"version":1}}"#,
                "d".repeat(32),
                now_ms + 1000
            )
            .into_bytes(),
            "as session",
        ),
    ];
    for (name, bytes, says) in hostile {
        std::fs::write(dir.join(&name), &bytes).unwrap();
        let f = p.run(None, &["fsck"]);
        assert_eq!(f.code, 1, "{name}: {}", f.stdout);
        assert!(
            f.stdout.contains(&name) && f.stdout.contains(says),
            "{name}: {}",
            f.stdout
        );
        let gc = p.run(None, &["gc"]);
        assert_ne!(gc.code, 0, "{name}: gc went on");
        let u = p.run(None, &["op", "undo"]);
        assert_ne!(u.code, 0, "{name}: {}", u.stdout);
        // Nothing moved or went.
        assert_eq!(listed(&p, &a).unwrap()["name"], "work");
        assert_eq!(listed(&p, &a).unwrap()["head"], a_head.as_str());
        assert!(listed(&p, &b).is_some());
        std::fs::remove_file(dir.join(&name)).unwrap();
    }
    // A link (here to the good entry, under another entry's name).
    let link = dir.join(format!("{:016}-{}", 2, "c".repeat(32)));
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let log = p.run(None, &["op", "log"]);
    assert_eq!(log.code, 1);
    assert!(log.stderr.contains("fault:"), "{}", log.stderr);
    assert!(log.stdout.contains("rename"), "{}", log.stdout);
    assert!(p.run(None, &["fsck"]).stdout.contains("symbolic link"));
    std::fs::remove_file(&link).unwrap();
    assert_eq!(std::fs::read_to_string(&good).unwrap(), text);
    sound(&p);
    ok(&p.run(None, &["op", "undo"]));
    assert_eq!(listed(&p, &a).unwrap()["name"], Value::Null);
}

#[test]
fn a_sigkill_at_each_step_of_an_undo_leaves_the_log_and_the_refs_consistent() {
    if !hel_store::testing::failpoints() {
        return;
    }
    let p = Project::new();
    let mock = Mock::start(answers(2));
    let s = p.run(Some(&mock), &["-p", "first"]).session();
    let out = tempfile::tempdir().unwrap();
    let b1 = out.path().join("one.helbundle");
    bundle(&p, &s, &b1);
    ok(&p.run(Some(&mock), &["resume", &s, "-p", "second"]));
    let b2 = out.path().join("two.helbundle");
    bundle(&p, &s, &b2);
    for point in [
        "oplog-undo-head",
        "ref-rename",
        "oplog-undo-applied",
        "oplog-before-rename",
        "oplog-appended",
    ] {
        let q = Project::new();
        ok(&q.run(None, &["sessions", "import", b1.to_str().unwrap()]));
        let h1 = listed(&q, &s).unwrap()["head"].clone();
        ok(&q.run(None, &["sessions", "import", b2.to_str().unwrap()]));
        let h2 = listed(&q, &s).unwrap()["head"].clone();
        let mut cmd = q.hel(None);
        cmd.args(["op", "undo"]).env("HEL_FAILPOINTS", point);
        let killed = Run::from_cmd(&mut cmd);
        assert_ne!(killed.code, 0, "{point}: {}", killed.stdout);
        // Sound, and the session at one head or the other, never lost.
        sound(&q);
        let head = listed(&q, &s).unwrap()["head"].clone();
        assert!(head == h1 || head == h2, "{point}: {head}");
        let log = ops(&q);
        let undone = log.last().unwrap()["kind"] == "undo";
        // The undo's entry is there only when the ref moved.
        assert!(!undone || head == h1, "{point}");
        if !undone {
            // Run again: finished (the ref moved already or not).
            let u = undo(&q, None);
            assert_eq!(u["kind"], "import", "{point}");
        }
        assert_eq!(listed(&q, &s).unwrap()["head"], h1, "{point}");
        assert_eq!(last(&q)["kind"], "undo", "{point}");
        sound(&q);
    }
}

#[test]
fn a_pull_is_undone_to_the_ref_it_replaced_and_a_new_one_to_the_trash() {
    let (p, q) = (Project::new(), Project::new());
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    // One HOME (one remotes.toml) for both projects.
    let in_q = |args: &[&str]| Run::from_cmd(q.hel(None).env("HOME", p.home.path()).args(args));
    ok(&p.run(None, &["remote", "add", "shared", &url]));
    let mock = Mock::start(answers(2));
    let s = p.run(Some(&mock), &["-p", "first"]).session();
    ok(&p.run(None, &["push", &s]));
    ok(&in_q(&["pull", &s]));
    let h1 = listed(&q, &s).unwrap()["head"].clone();
    let e = last(&q);
    assert_eq!(e["kind"], "pull");
    assert_eq!(
        e["changes"][0]["head"],
        json!({"before": null, "after": h1})
    );
    ok(&p.run(Some(&mock), &["resume", &s, "-p", "second"]));
    ok(&p.run(None, &["push", &s]));
    ok(&in_q(&["pull", &s]));
    let h2 = listed(&q, &s).unwrap()["head"].clone();
    assert_ne!(h1, h2);
    let e = last(&q);
    assert_eq!(e["kind"], "pull");
    assert_eq!(e["changes"][0]["head"], json!({"before": h1, "after": h2}));
    undo(&q, None);
    assert_eq!(listed(&q, &s).unwrap()["head"], h1);
    sound(&q);
    undo(&q, None);
    assert_eq!(listed(&q, &s).unwrap()["head"], h2);
    let first = ops(&q)[0]["op"].as_str().unwrap().to_owned();
    undo(&q, Some(&first));
    assert!(listed(&q, &s).is_none());
    sound(&q);
}
