//! The project found from anywhere inside it: the nearest directory at or
//! above where hel starts that holds `.hel/` or `.git` (never above a git
//! work tree's top, never through a link), its instructions files
//! (`HEL.md`, `AGENTS.md` on the way down), bash and the file tools
//! working from where hel started, and `--project`.

use std::path::Path;

use crate::common::*;
use serde_json::json;

/// The system message of request `i`.
fn system(mock: &Mock, i: usize) -> String {
    mock.messages(i)[0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The second line on stderr (the first is `session: …`).
fn second_line(run: &Run) -> &str {
    run.stderr.lines().nth(1).unwrap_or("")
}

fn run_in(p: &Project, dir: &Path, mock: &Mock, args: &[&str]) -> Run {
    Run::from_cmd(p.hel_in(dir, Some(mock)).args(args))
}

#[test]
fn from_a_subdirectory_of_a_git_work_tree_the_root_is_the_project() {
    let p = Project::new();
    let root = p.path();
    std::fs::create_dir(root.join(".git")).unwrap();
    p.write("HEL.md", "RULE FROM HEL.md");
    p.write("AGENTS.md", "RULE FROM AGENTS.md");
    p.write("sub/AGENTS.md", "RULE FROM sub/AGENTS.md");
    p.write("sub/deeper/AGENTS.md", "RULE FROM BELOW");
    p.write("other/AGENTS.md", "RULE FROM ELSEWHERE");
    p.write("sub/x.txt", "in sub\n");
    p.write("sub/deeper/y.txt", "deeper\n");
    p.write("lib.txt", "at the root\n");
    let sub = root.join("sub");
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("read_file", json!({"path": "x.txt"})),
            call("read_file", json!({"path": "../lib.txt"})),
            call("glob", json!({"pattern": "**/*.txt"})),
            call("grep", json!({"pattern": "deeper"})),
            call("bash", json!({"command": "pwd; echo made > by-bash.txt"})),
            call("write_file", json!({"path": "w.txt", "content": "written"})),
        ]},
        {"content": "first answer"},
        {"content": "second answer"},
    ]));
    let run = run_in(&p, &sub, &mock, &["--access", "auto", "-p", "first"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The store is the root's; nothing is made where hel started.
    assert!(root.join(".hel").is_dir());
    assert!(!sub.join(".hel").exists());
    assert_eq!(
        second_line(&run),
        format!(
            "hel: model mock-model · access auto · project {} (the top of the git work tree) · instructions HEL.md, AGENTS.md, sub/AGENTS.md",
            root.display()
        ),
        "{}",
        run.stderr
    );
    // Instructions: the root's HEL.md and AGENTS.md, then the AGENTS.md on
    // the way down, nearest last; none below or beside.
    let sys = system(&mock, 0);
    let at = |s: &str| sys.find(s).unwrap_or_else(|| panic!("no {s:?} in {sys}"));
    assert!(at("RULE FROM HEL.md") < at("RULE FROM AGENTS.md"));
    assert!(at("RULE FROM AGENTS.md") < at("# Project instructions (sub/AGENTS.md)"));
    assert!(at("# Project instructions (sub/AGENTS.md)") < at("RULE FROM sub/AGENTS.md"));
    assert!(!sys.contains("RULE FROM BELOW") && !sys.contains("RULE FROM ELSEWHERE"));
    assert!(sys.contains(&format!("- Working directory: {}\n", sub.display())));
    assert!(sys.contains(&format!("- Project root: {}", root.display())));
    // Tools work from where hel started, within the root's boundary.
    let m = mock.messages(1);
    let result = |i: usize| m[3 + i]["content"].as_str().unwrap_or_default().to_owned();
    assert!(result(0).contains("in sub"), "{}", result(0));
    assert!(result(1).contains("at the root"), "{}", result(1));
    assert_eq!(result(2), "deeper/y.txt\nx.txt");
    assert_eq!(result(3), "deeper/y.txt:1:deeper");
    assert!(
        result(4).contains(&sub.display().to_string()),
        "{}",
        result(4)
    );
    assert_eq!(p.read("sub/by-bash.txt"), "made\n");
    assert_eq!(p.read("sub/w.txt"), "written");

    // `hel restore` takes paths from where it runs, too.
    let sid = run.session();
    let restored = Run::from_cmd(
        p.hel_in(&sub, None)
            .args(["restore", &sid, "--before", "w.txt"]),
    );
    assert_eq!(restored.code, 0, "{}", restored.stderr);
    assert!(!sub.join("w.txt").exists() && sub.join("by-bash.txt").exists());

    // From further down the same project: the session is this project's,
    // resumed by --last, listed as saved here.
    let deeper = sub.join("deeper");
    let listed = Run::from_cmd(p.hel_in(&deeper, None).args(["sessions"]));
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.contains(&sid) && !listed.stdout.contains("[saved in"));
    assert_eq!(
        listed.stderr,
        format!(
            "hel: project {} (the top of the git work tree)\n",
            root.display()
        )
    );
    let again = run_in(&p, &deeper, &mock, &["resume", "--last", "-p", "second"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.session(), sid);
    assert!(mock
        .messages(2)
        .iter()
        .any(|m| m["content"] == "first answer"));
    // Now sub/deeper/AGENTS.md is on the way down, nearest last.
    let sys = system(&mock, 2);
    assert!(
        sys.find("RULE FROM sub/AGENTS.md").unwrap() < sys.find("RULE FROM BELOW").unwrap(),
        "{sys}"
    );
    assert!(!deeper.join(".hel").exists() && !sub.join(".hel").exists());
}

#[test]
fn a_store_above_is_the_project_and_its_sessions_resume_from_below() {
    let p = Project::new();
    let root = p.path();
    let mock = Mock::start(json!([{"content": "a1"}, {"content": "a2"}]));
    let sid = p.run(Some(&mock), &["-p", "remember ID-51"]).session();
    std::fs::create_dir(root.join("sub")).unwrap();
    let run = run_in(
        &p,
        &root.join("sub"),
        &mock,
        &["resume", &sid, "-p", "again"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.session(), sid);
    assert_eq!(
        second_line(&run),
        format!(
            "hel: model mock-model · access confirm · project {} (the nearest directory above with a .hel/)",
            root.display()
        )
    );
    assert!(mock
        .messages(1)
        .iter()
        .any(|m| m["content"] == "remember ID-51"));
    assert!(!root.join("sub/.hel").exists());
}

#[test]
fn the_walk_stops_at_the_git_top_and_never_follows_a_linked_store() {
    let p = Project::new();
    let outer = p.path();
    let mock = Mock::start(json!([{"content": "a"}, {"content": "b"}, {"content": "c"}]));
    // A store above a repository is not the repository's.
    assert_eq!(p.run(Some(&mock), &["-p", "outer"]).code, 0);
    let before = std::fs::read_dir(outer.join(".hel/refs/sessions"))
        .map(|d| d.count())
        .unwrap_or(0);
    std::fs::create_dir_all(outer.join("repo/.git")).unwrap();
    std::fs::create_dir_all(outer.join("repo/sub")).unwrap();
    let run = run_in(&p, &outer.join("repo/sub"), &mock, &["-p", "inner"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(outer.join("repo/.hel").is_dir() && !outer.join("repo/sub/.hel").exists());
    let after = std::fs::read_dir(outer.join(".hel/refs/sessions"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(before, after);

    // Nothing above but a link named .hel: not followed, not a project;
    // hel stays where it started and says nothing of a project.
    let q = Project::new();
    let elsewhere = Outside::new();
    let before = elsewhere.fingerprint();
    std::fs::create_dir(q.path().join("sub")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), q.path().join(".hel")).unwrap();
    let run = run_in(&q, &q.path().join("sub"), &mock, &["-p", "plain"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(q.path().join("sub/.hel").is_dir());
    assert_eq!(elsewhere.fingerprint(), before);
    assert!(!run.stderr.contains(" project "), "{}", run.stderr);
}

#[test]
fn project_flag_overrides_and_context_file_selects_one_file() {
    let p = Project::new();
    let root = p.path();
    std::fs::create_dir(root.join(".git")).unwrap();
    p.write("AGENTS.md", "ROOT AGENTS");
    p.write("sub/AGENTS.md", "SUB AGENTS");
    p.write("sub/HEL.md", "SUB HEL");
    let sub = root.join("sub");
    let mock = Mock::start(json!([{"content": "a"}, {"content": "b"}, {"content": "c"}]));
    // --project: this directory is the root, whatever is above.
    let run = run_in(&p, &sub, &mock, &["--project", ".", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(sub.join(".hel").is_dir() && !root.join(".hel").exists());
    assert_eq!(
        second_line(&run),
        "hel: model mock-model · access confirm · instructions HEL.md, AGENTS.md"
    );
    let sys = system(&mock, 0);
    assert!(sys.contains("SUB HEL") && sys.contains("SUB AGENTS") && !sys.contains("ROOT AGENTS"));
    std::fs::remove_dir_all(sub.join(".hel")).unwrap();

    // --context-file: that one file, relative to where hel started.
    let run = run_in(&p, &sub, &mock, &["--context-file", "AGENTS.md", "-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        second_line(&run).ends_with("· instructions AGENTS.md"),
        "{}",
        run.stderr
    );
    let sys = system(&mock, 1);
    assert!(sys.contains("SUB AGENTS") && !sys.contains("ROOT AGENTS") && !sys.contains("SUB HEL"));
    let run = run_in(&p, &sub, &mock, &["--no-context-file", "-p", "x"]);
    assert!(
        !second_line(&run).contains("instructions"),
        "{}",
        run.stderr
    );
    assert!(!system(&mock, 2).contains("AGENTS"));

    // A --project that is not a directory is bad usage, said in one line.
    let run = run_in(&p, &sub, &mock, &["--project", "AGENTS.md", "sessions"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains("--project AGENTS.md"), "{}", run.stderr);
}
