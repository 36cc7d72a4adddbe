//! The trash: `hel sessions delete` moves a session there, gc keeps what
//! it reaches until it expires (age, size budget; never when pinned),
//! `hel sessions undelete` brings it back whole, `--now` deletes for good.
//! Crash safety (SIGKILL at each step), a gc racing deletes and undeletes,
//! and hostile trash entries.

use std::path::PathBuf;

use crate::common::*;
use serde_json::{json, Value};

fn json_out(run: &Run) -> Value {
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

fn ok(run: &Run) -> &str {
    assert_eq!(
        run.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    &run.stdout
}

fn sound(p: &Project) {
    let run = p.run(None, &["fsck"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("store is sound"), "{}", run.stdout);
}

/// A session that spilled (bash output) and changed a file (a workspace
/// snapshot), with `answers` more answers after.
fn spilled_session(p: &Project, what: &str) -> String {
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": format!("seq 1 20000; echo {what} > {what}.txt")}))]},
        {"content": "one"},
        {"content": "two"},
    ]));
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "-p", "first", "-p", "second"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.session()
}

/// A fork of `sid` at its oldest checkpoint, with one answer.
fn fork_of(p: &Project, sid: &str) -> String {
    let log = json_out(&p.run(None, &["sessions", "log", sid, "--json"]));
    let oldest = log.as_array().unwrap().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mock = Mock::start(json!([{"content": "forked"}]));
    let run = p.run(
        Some(&mock),
        &["resume", sid, "--at", &oldest[..12], "-p", "in the fork"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.session()
}

/// Everything that can be read of `sid`: its listing row, log, show
/// (conversation and spill map), the bytes of each spill blob and each
/// workspace tree its log names.
fn state(p: &Project, sid: &str) -> Value {
    let list = json_out(&p.run(None, &["sessions", "--json"]));
    let row = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == sid)
        .unwrap_or_else(|| panic!("{sid} not listed: {list}"))
        .clone();
    let log = json_out(&p.run(None, &["sessions", "log", sid, "--json", "--all"]));
    let show = json_out(&p.run(None, &["sessions", "show", sid, "--json"]));
    let store = hel_store::Store::open(&p.path()).unwrap();
    let mut blobs = Vec::new();
    if let Some(spill) = show["spill"].as_object() {
        for v in spill.values() {
            let id: hel_store::ObjectId = v["blob"].as_str().unwrap().parse().unwrap();
            let bytes = hel_store::testing::read_blob(&store, &id).unwrap();
            blobs.push(json!([id.to_hex(), bytes.len(), digest(&bytes)]));
        }
    }
    let mut trees = Vec::new();
    for e in log.as_array().unwrap() {
        for key in ["workspace", "workspace_start"] {
            if let Some(t) = e[key].as_str() {
                let id: hel_store::ObjectId = t.parse().unwrap();
                let tree = hel_store::workspace::read_tree(&store, &id).unwrap();
                trees.push(json!([t, format!("{:?}", tree.entries)]));
            }
        }
    }
    json!({"row": row, "log": log, "show": show, "blobs": blobs, "trees": trees})
}

fn trash(p: &Project) -> Vec<Value> {
    json_out(&p.run(None, &["sessions", "trash", "--json"]))
        .as_array()
        .unwrap()
        .clone()
}

fn listed(p: &Project) -> Vec<String> {
    json_out(&p.run(None, &["sessions", "--json"]))
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

fn journal(p: &Project, sid: &str) -> PathBuf {
    p.path()
        .join(".hel/packs/journals")
        .join(format!("{sid}.journal"))
}

#[test]
fn delete_gc_undelete_returns_the_session_whole_with_forks_both_ways() {
    let p = Project::new();
    let a = spilled_session(&p, "a");
    ok(&p.run(None, &["sessions", "rename", &a, "parent"]));
    let f = fork_of(&p, &a);
    ok(&p.run(None, &["sessions", "rename", &f, "child"]));
    let before_a = state(&p, &a);
    let before_f = state(&p, &f);
    assert!(!before_a["blobs"].as_array().unwrap().is_empty());
    assert!(!before_a["trees"].as_array().unwrap().is_empty());
    sound(&p);

    // The parent goes to the trash; gc keeps everything it reaches.
    let del = p.run(None, &["sessions", "delete", "parent"]);
    assert!(
        ok(&del).contains(&format!("moved session {a} to the trash"))
            && del.stdout.contains(&format!("`hel sessions undelete {a}`")),
        "{}",
        del.stdout
    );
    assert!(journal(&p, &a).exists());
    assert_eq!(listed(&p), vec![f.clone()]);
    let t = trash(&p);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0]["id"], a.as_str());
    assert_eq!(t[0]["name"], "parent");
    assert_eq!(t[0]["directory"], p.path().to_str().unwrap());
    assert_eq!(t[0]["head"], before_a["log"][0]["id"]);
    assert_eq!(t[0]["expires_now"], false);
    let kept = t[0]["bytes"].as_u64().unwrap();
    let on_disk = std::fs::metadata(journal(&p, &a)).unwrap().len()
        + std::fs::metadata(journal(&p, &a).with_extension("jidx"))
            .unwrap()
            .len();
    assert_eq!(kept, on_disk);
    eprintln!("a deleted session with a spilled output keeps {kept} bytes");
    assert!(t[0]["expires"].is_string());
    ok(&p.run(None, &["gc"]));
    sound(&p);
    // Not resumable, not shown: the error names the way back.
    let idle = Mock::start(json!([]));
    let run = p.run(Some(&idle), &["resume", &a, "-p", "x"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("`hel sessions undelete {a}`")),
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stderr.lines().filter(|l| l.contains("trash")).count(),
        1,
        "{}",
        run.stderr
    );
    // Nor shown, nor renamed.
    for args in [
        vec!["sessions", "show", a.as_str()],
        vec!["sessions", "rename", a.as_str(), "other"],
    ] {
        let run = p.run(None, &args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("is in the trash"),
            "{args:?}: {}",
            run.stderr
        );
    }
    // The listing says the trash's size and next expiry in one line.
    let list = p.run(None, &["sessions"]);
    let line: Vec<&str> = list
        .stderr
        .lines()
        .filter(|l| l.starts_with("hel: trash: "))
        .collect();
    assert_eq!(line.len(), 1, "{}", list.stderr);
    assert!(
        line[0].contains("1 session")
            && line[0].contains(&format!("the next to expire is {}", &a[..8])),
        "{}",
        line[0]
    );

    // The fork goes too; gc; both come back.
    ok(&p.run(None, &["sessions", "delete", &f]));
    assert!(listed(&p).is_empty());
    ok(&p.run(None, &["gc"]));
    sound(&p);
    let back = p.run(None, &["sessions", "undelete", "parent"]);
    assert!(
        ok(&back).contains(&format!("session {a} is back, named parent")),
        "{}",
        back.stdout
    );
    let back = p.run(None, &["sessions", "undelete", &f[..8]]);
    assert!(ok(&back).contains("named child"), "{}", back.stdout);
    sound(&p);
    assert_eq!(state(&p, &a), before_a);
    assert_eq!(state(&p, &f), before_f);
    assert!(trash(&p).is_empty());

    // The fork in the trash, its parent deleted for good: what the fork
    // needs of the parent's journal stays, and it comes back whole.
    ok(&p.run(None, &["sessions", "delete", &f]));
    let now = p.run(None, &["sessions", "delete", "--now", &a]);
    assert!(
        ok(&now).contains(&format!("deleted session {a} for good")),
        "{}",
        now.stdout
    );
    assert!(!journal(&p, &a).exists());
    ok(&p.run(None, &["gc"]));
    sound(&p);
    ok(&p.run(None, &["sessions", "undelete", &f]));
    assert_eq!(state(&p, &f), before_f);
    sound(&p);
    let run = p.run(None, &["sessions", "undelete", &a]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("not in the trash"), "{}", run.stderr);
}

#[test]
fn an_undeleted_session_whose_name_was_taken_comes_back_unnamed() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "1"}, {"content": "2"}]));
    let a = p.run(Some(&mock), &["-p", "one"]).session();
    ok(&p.run(None, &["sessions", "rename", &a, "work"]));
    ok(&p.run(None, &["sessions", "delete", "work"]));
    let b = p.run(Some(&mock), &["-p", "two"]).session();
    ok(&p.run(None, &["sessions", "rename", &b, "work"]));
    let back = p.run(None, &["sessions", "undelete", &a]);
    assert!(
        ok(&back).contains(&format!(
            "session {a} is back, without its name work: session {b} took it meanwhile"
        )),
        "{}",
        back.stdout
    );
    let list = json_out(&p.run(None, &["sessions", "--json"]));
    let name_of = |id: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()["name"]
            .clone()
    };
    assert_eq!(name_of(&a), Value::Null);
    assert_eq!(name_of(&b), "work");
    sound(&p);
}

/// `hel` with the trash's clock at `days` after now.
fn later(p: &Project, days: u64, args: &[&str]) -> Run {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let at = now + days * 24 * 3600 * 1000;
    let out = p
        .hel(None)
        .env("HEL_TEST_NOW_MS", at.to_string())
        .args(args)
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn config(p: &Project, text: &str) {
    let dir = p.home.path().join(".config/hel");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

#[test]
fn entries_expire_by_age_and_pinned_ones_never() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "1"}, {"content": "2"}, {"content": "3"}]));
    let a = p.run(Some(&mock), &["-p", "one"]).session();
    let b = p.run(Some(&mock), &["-p", "two"]).session();
    let c = p.run(Some(&mock), &["-p", "three"]).session();
    ok(&p.run(None, &["sessions", "pin", &b]));
    for s in [&a, &b] {
        ok(&p.run(None, &["sessions", "delete", s]));
    }
    // 29 days on: nothing expires; the trash says when each will.
    let run = later(&p, 29, &["gc"]);
    assert!(!ok(&run).contains("expired"), "{}", run.stdout);
    let run = later(&p, 29, &["sessions", "trash"]);
    assert!(ok(&run).contains("never (pinned)"), "{}", run.stdout);
    assert_eq!(trash(&p).len(), 2);
    // 31 days on: a dry run says what would go, gc says what went.
    let run = later(&p, 31, &["sessions", "trash", "--json"]);
    let rows: Value = serde_json::from_str(ok(&run)).unwrap();
    let due: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["expires_now"] == true)
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(due, vec![a.as_str()]);
    let dry = later(&p, 31, &["gc", "--dry-run"]);
    assert!(
        ok(&dry).contains(&format!("would expire session {a} from the trash")),
        "{}",
        dry.stdout
    );
    assert_eq!(trash(&p).len(), 2);
    let run = later(&p, 31, &["gc"]);
    assert!(
        ok(&run).contains(&format!("expired session {a} from the trash"))
            && run.stdout.contains("older than 30 days"),
        "{}",
        run.stdout
    );
    assert!(!journal(&p, &a).exists());
    sound(&p);
    let t = trash(&p);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0]["id"], b.as_str());
    assert_eq!(t[0]["pinned"], true);
    // A thousand days on, the pinned one is still there; unpinned, it goes.
    ok(&later(&p, 1000, &["gc"]));
    assert_eq!(trash(&p).len(), 1);
    ok(&p.run(None, &["sessions", "unpin", &b]));
    let run = later(&p, 1000, &["gc"]);
    assert!(
        ok(&run).contains(&format!("expired session {b}")),
        "{}",
        run.stdout
    );
    assert!(trash(&p).is_empty());
    assert_eq!(listed(&p), vec![c.clone()]);
    sound(&p);
    // A shorter period from the user's config file.
    config(&p, "trash_days = 2\n");
    ok(&p.run(None, &["sessions", "delete", &c]));
    assert!(!ok(&later(&p, 1, &["gc"])).contains("expired"));
    let run = later(&p, 3, &["gc"]);
    assert!(
        ok(&run).contains(&format!("expired session {c}"))
            && run.stdout.contains("older than 2 days"),
        "{}",
        run.stdout
    );
    sound(&p);
}

#[test]
fn over_the_size_budget_the_oldest_expire_first_but_not_pinned_ones() {
    let p = Project::new();
    let a = spilled_session(&p, "a");
    let b = spilled_session(&p, "b");
    let c = spilled_session(&p, "c");
    let keep = spilled_session(&p, "keep");
    ok(&p.run(None, &["sessions", "pin", &a]));
    for s in [&a, &b, &c] {
        ok(&p.run(None, &["sessions", "delete", s]));
    }
    assert_eq!(trash(&p).len(), 3);
    // A budget of what the store holds less a little: the oldest unpinned
    // entry (b) goes, c stays.
    // What the store holds: every file of packs/ and packs/journals/.
    let bytes = |s: &str| std::fs::metadata(journal(&p, s)).unwrap().len();
    let mut total = 0;
    for dir in [".hel/packs", ".hel/packs/journals"] {
        for e in std::fs::read_dir(p.path().join(dir)).unwrap() {
            let m = e.unwrap().metadata().unwrap();
            if m.is_file() {
                total += m.len();
            }
        }
    }
    let budget = total - bytes(&b) / 2;
    config(&p, &format!("store_budget = \"{budget}\"\n"));
    let t = trash(&p);
    let now: Vec<&str> = t
        .iter()
        .filter(|r| r["expires_now"] == true)
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(now, vec![b.as_str()]);
    assert!(t.iter().all(|r| r["why"] != "age"));
    let run = p.run(None, &["gc"]);
    assert!(
        ok(&run).contains(&format!("expired session {b} from the trash"))
            && run.stdout.contains("over its budget"),
        "{}",
        run.stdout
    );
    let left: Vec<String> = trash(&p)
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(left.len(), 2);
    assert!(left.contains(&a) && left.contains(&c));
    // A budget nothing meets: every unpinned entry goes, the pinned one
    // and the listed session stay.
    config(&p, "store_budget = \"1\"\n");
    let run = p.run(None, &["gc"]);
    assert!(
        ok(&run).contains(&format!("expired session {c}")),
        "{}",
        run.stdout
    );
    let left = trash(&p);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["id"], a.as_str());
    assert_eq!(listed(&p), vec![keep]);
    sound(&p);
    ok(&p.run(None, &["sessions", "undelete", &a]));
    sound(&p);
}

#[test]
fn delete_now_asks_on_a_terminal_only_and_a_pinned_session_is_refused() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "1"}]));
    let a = p.run(Some(&mock), &["-p", "one"]).session();
    ok(&p.run(None, &["sessions", "pin", &a]));
    let run = p.run(None, &["sessions", "delete", "--now", &a]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains(&format!("`hel sessions unpin {a}` first")),
        "{}",
        run.stderr
    );
    ok(&p.run(None, &["sessions", "delete", &a]));
    // In the trash and pinned: --now still refuses.
    assert_eq!(p.run(None, &["sessions", "delete", "--now", &a]).code, 1);
    ok(&p.run(None, &["sessions", "unpin", &a]));
    // Off a terminal --now alone deletes for good (a session in the trash too).
    let run = p.run(None, &["sessions", "delete", "--now", &a[..8]]);
    assert!(ok(&run).contains("for good"), "{}", run.stdout);
    assert!(trash(&p).is_empty());
    assert!(!journal(&p, &a).exists());
    sound(&p);
}

/// What a SIGKILL at `point` during `args` leaves: the session listed or
/// in the trash (never lost), and a sound store once gc has run.
fn killed_at(point: &str, args: &[&str], p: &Project) -> Run {
    let out = p
        .hel(None)
        .env("HEL_FAILPOINTS", point)
        .args(args)
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn listed_or_trashed(p: &Project, sid: &str) -> (bool, bool) {
    let l = listed(p).iter().any(|s| s == sid);
    let t = trash(p).iter().any(|r| r["id"] == sid);
    (l, t)
}

#[test]
fn a_sigkill_anywhere_in_delete_undelete_or_gc_loses_nothing() {
    let cases: &[(&str, &str)] = &[
        ("delete", "trash-entry-write"),
        ("delete", "trash-after-entry"),
        ("delete", "trash-after-ref"),
        ("undelete", "undelete-after-ref"),
        ("undelete", "undelete-after-name"),
        ("gc", "gc-after-new-pack"),
        ("gc", "gc-after-packs"),
        ("expire", "remove-journal"),
    ];
    for (what, point) in cases {
        let p = Project::new();
        // a is a fork of o, f a fork of a; o deleted for good leaves what
        // a and f need of it in a sealed pack, which gc --repack rewrites.
        let o = spilled_session(&p, "o");
        let a = fork_of(&p, &o);
        ok(&p.run(None, &["sessions", "rename", &a, "kept"]));
        let f = fork_of(&p, &a);
        ok(&p.run(None, &["sessions", "delete", "--now", &o]));
        let before = state(&p, &a);
        let before_f = state(&p, &f);
        let run = match *what {
            "delete" => killed_at(point, &["sessions", "delete", &a], &p),
            "undelete" => {
                ok(&p.run(None, &["sessions", "delete", &a]));
                killed_at(point, &["sessions", "undelete", &a], &p)
            }
            "gc" => {
                ok(&p.run(None, &["sessions", "delete", &a]));
                killed_at(point, &["gc", "--repack"], &p)
            }
            _ => {
                // The fork is pinned: only its parent expires.
                ok(&p.run(None, &["sessions", "pin", &f]));
                ok(&p.run(None, &["sessions", "delete", &f]));
                ok(&p.run(None, &["sessions", "delete", &a]));
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis() as u64;
                let out = p
                    .hel(None)
                    .env("HEL_FAILPOINTS", point)
                    .env("HEL_TEST_NOW_MS", (now + 40 * 24 * 3600 * 1000).to_string())
                    .args(["gc", "--repack"])
                    .output()
                    .unwrap();
                Run {
                    code: out.status.code().unwrap_or(-1),
                    stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                }
            }
        };
        assert_eq!(
            run.code, -1,
            "{what} at {point} was not killed: {}",
            run.stderr
        );
        let gc = p.run(None, &["gc"]);
        assert_eq!(gc.code, 0, "{what} at {point}: {}", gc.stderr);
        sound(&p);
        if *what == "expire" {
            // The parent expired (or is still in the trash); its fork
            // lost nothing either way.
            ok(&p.run(None, &["sessions", "undelete", &f]));
            assert_eq!(state(&p, &f), before_f, "{what} at {point}");
            sound(&p);
            continue;
        }
        let (l, t) = listed_or_trashed(&p, &a);
        assert!(l || t, "{what} at {point}: session lost");
        assert!(!(l && t), "{what} at {point}: listed and in the trash");
        if t {
            ok(&p.run(None, &["sessions", "undelete", &a]));
        }
        assert_eq!(state(&p, &a), before, "{what} at {point}");
        assert_eq!(state(&p, &f), before_f, "{what} at {point}");
        sound(&p);
    }
}

#[test]
fn gc_racing_deletes_and_undeletes_in_two_processes_loses_nothing() {
    let p = Project::new();
    let mut sessions = Vec::new();
    for k in 0..3 {
        sessions.push(spilled_session(&p, &format!("s{k}")));
    }
    let f = fork_of(&p, &sessions[0]);
    sessions.push(f);
    let before: Vec<Value> = sessions.iter().map(|s| state(&p, s)).collect();
    // One process deletes and undeletes every session in turn, the other
    // runs gc over and over until the first is done.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let runner = {
        let done = std::sync::Arc::clone(&done);
        let dir = p.dir.path().to_owned();
        let home = p.home.path().to_owned();
        std::thread::spawn(move || {
            let mut runs = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) || runs == 0 {
                let out = std::process::Command::new(hel_bin())
                    .current_dir(&dir)
                    .env_clear()
                    .env("PATH", std::env::var("PATH").unwrap_or_default())
                    .env("HOME", &home)
                    .arg("gc")
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                runs += 1;
            }
            runs
        })
    };
    for _ in 0..3 {
        for s in &sessions {
            ok(&p.run(None, &["sessions", "delete", s]));
        }
        for s in &sessions {
            ok(&p.run(None, &["sessions", "undelete", s]));
        }
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(runner.join().unwrap() > 0);
    for (s, b) in sessions.iter().zip(&before) {
        assert_eq!(&state(&p, s), b);
    }
    assert!(trash(&p).is_empty());
    sound(&p);
}

#[test]
fn hostile_trash_entries_are_faults_or_refused_with_bounded_memory() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "1"}, {"content": "2"}]));
    let a = p.run(Some(&mock), &["-p", "one"]).session();
    let b = p.run(Some(&mock), &["-p", "two"]).session();
    ok(&p.run(None, &["sessions", "delete", &a]));
    let entry = p.path().join(".hel/trash").join(&a);
    let good = std::fs::read(&entry).unwrap();
    let fsck_fault = |p: &Project, needle: &str| {
        let run = p.run(None, &["fsck"]);
        assert_eq!(run.code, 1, "{}", run.stdout);
        assert!(run.stdout.contains(needle), "{}", run.stdout);
        // gc refuses (it cannot know what the entry's session needs),
        // and keeps the journal.
        let gc = p.run(None, &["gc"]);
        assert_ne!(gc.code, 0, "{}", gc.stdout);
        assert!(journal(p, &a).exists());
    };
    // A link in its place.
    std::fs::remove_file(&entry).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", &entry).unwrap();
    fsck_fault(&p, &format!("trash/{a}"));
    let run = p.run(None, &["sessions", "undelete", &a]);
    assert_ne!(run.code, 0);
    std::fs::remove_file(&entry).unwrap();
    // A huge file: refused at its size, never read whole.
    let f = std::fs::File::create(&entry).unwrap();
    f.set_len(8 << 30).unwrap();
    drop(f);
    fsck_fault(&p, "over the 16384 a trash entry may hold");
    let m = run_measured(p.hel(None).args(["sessions", "trash"]));
    assert_ne!(m.run.code, 0);
    assert!(m.max_rss_kib < 200 << 10, "{} KiB", m.max_rss_kib);
    std::fs::remove_file(&entry).unwrap();
    // Another session's ref: an entry that names another session, or a
    // head that is another session's.
    let mut v: Value = serde_json::from_slice(&good).unwrap();
    v["session"] = json!(b);
    std::fs::write(&entry, serde_json::to_vec(&v).unwrap()).unwrap();
    fsck_fault(&p, "not the one of its file name");
    let mut v: Value = serde_json::from_slice(&good).unwrap();
    let b_head = json_out(&p.run(None, &["sessions", "log", &b, "--json"]))[0]["id"].clone();
    v["head"] = b_head;
    std::fs::write(&entry, serde_json::to_vec(&v).unwrap()).unwrap();
    let run = p.run(None, &["fsck"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_eq!(p.run(None, &["sessions", "undelete", &a]).code, 1);
    assert!(listed(&p).contains(&b) && !listed(&p).contains(&a));
    // A date in the future: a fault, and it never expires for it.
    let mut v: Value = serde_json::from_slice(&good).unwrap();
    v["deleted_ms"] = json!(u64::MAX / 2);
    std::fs::write(&entry, serde_json::to_vec(&v).unwrap()).unwrap();
    let run = p.run(None, &["fsck"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("dated in the future"), "{}", run.stdout);
    let run = later(&p, 100_000, &["gc"]);
    assert!(!run.stdout.contains("expired"), "{}", run.stdout);
    assert!(journal(&p, &a).exists());
    // Deep JSON and repeated keys: refused by the bounded parse.
    std::fs::write(&entry, format!("{}{}", "[".repeat(5000), "]".repeat(5000))).unwrap();
    fsck_fault(&p, &format!("trash/{a}"));
    let dup = String::from_utf8(good.clone()).unwrap().replacen(
        '{',
        &format!("{{\"session\":\"{a}\","),
        1,
    );
    std::fs::write(&entry, dup).unwrap();
    fsck_fault(&p, &format!("trash/{a}"));
    // trash/ itself a link (to a directory holding a good entry): never
    // followed; a fault, gc refuses, nothing is lost.
    std::fs::write(&entry, &good).unwrap();
    let trash_dir = p.path().join(".hel/trash");
    let elsewhere = p.home.path().join("trash-elsewhere");
    std::fs::rename(&trash_dir, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &trash_dir).unwrap();
    fsck_fault(&p, ".hel/trash");
    let list = p.run(None, &["sessions"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stderr.contains("the trash cannot be read"),
        "{}",
        list.stderr
    );
    std::fs::remove_file(&trash_dir).unwrap();
    std::fs::rename(&elsewhere, &trash_dir).unwrap();
    // Put back, it undeletes.
    std::fs::write(&entry, &good).unwrap();
    ok(&p.run(None, &["sessions", "undelete", &a]));
    sound(&p);
}

fn digest(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// A fork made at an answer of a session now in the trash puts the
/// project's files back as they were there (`--restore-files`): the
/// trash entry's head says what the origin last recorded, so a file the
/// origin wrote after that answer is removed and one another session
/// wrote is left alone.
#[test]
fn a_fork_at_an_answer_of_a_trashed_session_restores_its_files() {
    let p = Project::new();
    let write = |path: &str, text: &str| json!({"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": text}}]});
    let mock = Mock::start(json!([
        write("a.txt", "a1\n"), {"content": "A1"},
        write("b.txt", "b1\n"), {"content": "B1"},
        write("c.txt", "c1\n"), {"content": "C1"},
        {"content": "D"},
    ]));
    let auto = ["--access", "auto"];
    let run = p.run(Some(&mock), &[&auto[..], &["-p", "a1"]].concat());
    ok(&run);
    let origin = run.session();
    ok(&p.run(
        Some(&mock),
        &[&auto[..], &["resume", &origin, "-p", "b1"]].concat(),
    ));
    let answer = |instruction: &str| -> String {
        let log = json_out(&p.run(None, &["sessions", "log", &origin, "--json"]));
        log.as_array()
            .unwrap()
            .iter()
            .find(|e| e["record"] == "answer" && e["instruction"] == instruction)
            .unwrap()["id"]
            .as_str()
            .unwrap()[..12]
            .to_owned()
    };
    let (a1, b1) = (answer("a1"), answer("b1"));
    let run = p.run(
        Some(&mock),
        &[&auto[..], &["resume", &origin, "--at", &b1, "-p", "c1"]].concat(),
    );
    ok(&run);
    let fork = run.session();
    ok(&p.run(None, &["sessions", "delete", &origin]));
    let run = p.run(
        Some(&mock),
        &[
            &auto[..],
            &["resume", &fork, "--at", &a1, "--restore-files", "-p", "d"],
        ]
        .concat(),
    );
    ok(&run);
    assert!(
        run.stderr
            .contains("restored the files of the forked checkpoint"),
        "{}",
        run.stderr
    );
    assert_eq!(p.read("a.txt"), "a1\n");
    assert!(
        !p.path().join("b.txt").exists(),
        "the origin's later file stays"
    );
    assert_eq!(p.read("c.txt"), "c1\n");
    sound(&p);
}
