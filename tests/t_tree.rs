//! `hel sessions tree` and the prompt's `/tree` on a family with forks of
//! forks and a deleted middle session: `main` answers a1 and a2; `middle`
//! is forked from it at a1 and answers b1 and b2; `leaf` is forked from
//! `middle` at b1 and answers c1; `main` answers a3; then `middle` is
//! deleted. Its b1 stays (leaf's history reaches it) and is drawn on
//! leaf's branch, marked deleted; its b2 went with it.

use serde_json::{json, Value};

use crate::common::*;
use crate::t_prompt::{all_fit, expect, screen_lines, spawn_with, type_in, PROMPT_END};

/// The family, and each answer's checkpoint id by its instruction.
struct Family {
    p: Project,
    main: String,
    leaf: String,
    middle: String,
    /// The tree as `--json` gives it (of `leaf`).
    json: Value,
}

impl Family {
    /// The checkpoint id of the answer to `instruction`.
    fn id(&self, instruction: &str) -> String {
        self.json["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["instruction"] == instruction)
            .unwrap_or_else(|| panic!("no node {instruction}: {:#}", self.json))["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

fn write(path: &str, text: &str) -> Value {
    json!({"tool_calls": [call("write_file", json!({"path": path, "content": text}))]})
}

fn ok(run: &Run) {
    assert_eq!(
        run.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
}

fn family() -> Family {
    let p = Project::new();
    let mock = Mock::start(json!([
        write("a.txt", "a1\n"), {"content": "A1"},
        {"content": "A2"},
        write("b.txt", "b1\n"), {"content": "B1"},
        {"content": "B2"},
        write("c.txt", "c1\n"), {"content": "C1"},
        write("a.txt", "a3\n"), {"content": "A3"},
    ]));
    let auto = ["--access", "auto"];
    let run = p.run(Some(&mock), &[&auto[..], &["-p", "a1 write a"]].concat());
    ok(&run);
    let main = run.session();
    ok(&p.run(Some(&mock), &["resume", &main, "-p", "a2 just talk"]));
    let log = |s: &str| -> Vec<Value> {
        let run = p.run(None, &["sessions", "log", s, "--json"]);
        ok(&run);
        serde_json::from_str(&run.stdout).unwrap()
    };
    let answer = |s: &str, instruction: &str| -> String {
        log(s)
            .into_iter()
            .find(|e| e["record"] == "answer" && e["instruction"] == instruction)
            .unwrap()["id"]
            .as_str()
            .unwrap()[..12]
            .to_owned()
    };
    let a1 = answer(&main, "a1 write a");
    let run = p.run(
        Some(&mock),
        &[
            &auto[..],
            &["resume", &main, "--at", &a1, "-p", "b1 write b"],
        ]
        .concat(),
    );
    ok(&run);
    let middle = run.session();
    ok(&p.run(Some(&mock), &["resume", &middle, "-p", "b2 gone"]));
    let b1 = answer(&middle, "b1 write b");
    let run = p.run(
        Some(&mock),
        &[
            &auto[..],
            &["resume", &middle, "--at", &b1, "-p", "c1 write c"],
        ]
        .concat(),
    );
    ok(&run);
    let leaf = run.session();
    ok(&p.run(
        Some(&mock),
        &[&auto[..], &["resume", &main, "-p", "a3 write a again"]].concat(),
    ));
    ok(&p.run(None, &["sessions", "rename", &main, "main"]));
    ok(&p.run(None, &["sessions", "rename", &leaf, "leaf"]));
    ok(&p.run(None, &["sessions", "rename", &middle, "middle"]));
    ok(&p.run(None, &["sessions", "delete", &middle, "--yes"]));
    let run = p.run(None, &["sessions", "tree", "leaf", "--json"]);
    ok(&run);
    let json = serde_json::from_str(&run.stdout).unwrap();
    Family {
        p,
        main,
        leaf,
        middle,
        json,
    }
}

/// `hel sessions tree ARGS` on a terminal `cols` wide: its lines.
fn tree_at(p: &Project, cols: u16, args: &[&str]) -> Vec<String> {
    let mut s = spawn_with(p, None, cols, &[&["sessions", "tree"], args].concat(), &[]);
    let seen = s.exp_eof().unwrap();
    let mut lines = screen_lines(&seen);
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines
}

/// The tree as JSON: every answer of the family once (b2 went with its
/// session), newest first, with its session, parent, files and tokens;
/// the edges; each session's newest answer; the deleted one said so.
#[test]
fn the_tree_of_a_family_with_a_deleted_middle_session_as_json() {
    let f = family();
    let j = &f.json;
    let nodes = j["nodes"].as_array().unwrap();
    let order: Vec<&str> = nodes
        .iter()
        .map(|n| n["instruction"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        [
            "a3 write a again",
            "c1 write c",
            "b1 write b",
            "a2 just talk",
            "a1 write a"
        ],
        "{j:#}"
    );
    let field = |k: &str| -> Vec<Value> { nodes.iter().map(|n| n[k].clone()).collect() };
    assert_eq!(
        field("files"),
        [json!(1), json!(1), json!(1), json!(0), json!(1)]
    );
    assert_eq!(
        field("session"),
        [&f.main, &f.leaf, &f.middle, &f.main, &f.main].map(|s| json!(s))
    );
    let (a3, c1, b1, a2, a1) = (
        f.id("a3 write a again"),
        f.id("c1 write c"),
        f.id("b1 write b"),
        f.id("a2 just talk"),
        f.id("a1 write a"),
    );
    assert_eq!(
        field("parent"),
        [json!(a2), json!(b1), json!(a1), json!(a1), Value::Null]
    );
    assert_eq!(
        field("heads"),
        [
            json!([f.main]),
            json!([f.leaf]),
            json!([f.middle]),
            json!([]),
            json!([])
        ]
    );
    for n in nodes {
        assert!(n["input_tokens"].as_u64().unwrap() > 0, "{n:#}");
        assert!(n["time"].as_str().unwrap().ends_with('Z'), "{n:#}");
    }
    assert_eq!(j["current"], json!(c1));
    let mut edges: Vec<(String, String)> = j["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["parent"].as_str().unwrap().to_owned(),
                e["child"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    edges.sort();
    let mut want = vec![
        (a2.clone(), a3.clone()),
        (b1.clone(), c1.clone()),
        (a1.clone(), b1.clone()),
        (a1.clone(), a2.clone()),
    ];
    want.sort();
    assert_eq!(edges, want);
    assert_eq!(
        j["sessions"],
        json!([
            {"deleted": false, "head": c1, "id": f.leaf, "label": "leaf", "name": "leaf"},
            {"deleted": false, "head": a3, "id": f.main, "label": "main", "name": "main"},
            {"deleted": true, "head": b1, "id": f.middle, "label": "", "name": null},
        ])
    );
    assert_eq!(j["left_out"], json!([]));
    // Whichever member is named, the family is the same; the current
    // position is that session's newest answer.
    let run = f.p.run(None, &["sessions", "tree", "main", "--json"]);
    ok(&run);
    let of_main: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(of_main["nodes"], j["nodes"]);
    assert_eq!(of_main["current"], json!(a3));
}

/// The tree as text at 80 and 40 columns: the graph (main's branch on
/// the left, leaf's joining it at a1 through the deleted session's b1),
/// the checkpoint, when, files and tokens, the labels at each session's
/// newest answer; at 40 columns the tokens and files go and lines are
/// cut with `…`.
#[test]
fn the_tree_as_text_at_80_and_40_columns() {
    let f = family();
    let nodes = f.json["nodes"].as_array().unwrap();
    let tokens: Vec<String> = {
        let w = |k: &str| {
            nodes
                .iter()
                .map(|n| n[k].as_u64().unwrap().to_string().len())
                .max()
                .unwrap()
        };
        let (iw, ow) = (w("input_tokens"), w("output_tokens"));
        nodes
            .iter()
            .map(|n| {
                format!(
                    "{:>iw$} in {:>ow$} out",
                    n["input_tokens"].as_u64().unwrap(),
                    n["output_tokens"].as_u64().unwrap()
                )
            })
            .collect()
    };
    let short = |k: usize, n: usize| nodes[k]["id"].as_str().unwrap()[..n].to_owned();
    let graph = ["●", "│ @", "│ ○", "○ │", "○─╯"];
    let files = ["1 file", "1 file", "1 file", "0 files", "1 file"];
    let text = [
        "[main] a3 write a again".to_owned(),
        "[leaf] c1 write c".to_owned(),
        format!("[deleted {}] b1 write b", &f.middle[..8]),
        "a2 just talk".to_owned(),
        "a1 write a".to_owned(),
    ];
    let cut = |line: String, cols: usize| match line.chars().count() {
        n if n <= cols => line,
        _ => line.chars().take(cols - 1).collect::<String>() + "…",
    };
    let wide: Vec<String> = (0..5)
        .map(|k| {
            cut(
                format!(
                    "{:<3}  {}  just now  {:>7}  {}  {}",
                    graph[k],
                    short(k, 12),
                    files[k],
                    tokens[k],
                    text[k]
                ),
                80,
            )
        })
        .collect();
    assert_eq!(tree_at(&f.p, 80, &["leaf"]), wide);
    let narrow: Vec<String> = (0..5)
        .map(|k| {
            cut(
                format!("{:<3}  {}  just now  {}", graph[k], short(k, 8), text[k]),
                40,
            )
        })
        .collect();
    let seen = tree_at(&f.p, 40, &["leaf"]);
    all_fit(&seen, 40, "the tree");
    assert_eq!(seen, narrow);
    assert!(
        seen[2].starts_with(&format!("│ ○  {}  just now  [deleted", short(2, 8))),
        "{seen:#?}"
    );
}

/// `/tree` at the prompt draws the family and continues from the answer
/// picked, in a fork: first main's a2, its files put back; then the
/// deleted session's b1, reached through leaf's history (its files
/// cannot be put back: said, and not asked). Each next request holds the
/// conversation up to the answer picked only.
#[test]
fn tree_at_the_prompt_continues_from_a_picked_answer() {
    let f = family();
    let mock = Mock::start(json!([{"content": "From a2."}, {"content": "From b1."}]));
    let (a2, b1) = (f.id("a2 just talk"), f.id("b1 write b"));
    let mut s = spawn_with(&f.p, Some(&mock), 80, &["resume", "main"], &[]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/tree\r");
    let seen = expect(
        &mut s,
        "continue from which answer? its id (Enter: stay here) ",
    );
    let lines = screen_lines(&seen);
    all_fit(&lines, 80, "/tree");
    let drawn: Vec<&str> = lines
        .iter()
        .filter(|l| l.contains("  just now  "))
        .map(|l| l.split("  ").next().unwrap())
        .collect();
    // At the prompt of main, main's newest answer is the current one.
    assert_eq!(drawn, ["@", "│ ●", "│ ○", "○ │", "○─╯"], "{lines:#?}");
    type_in(&mut s, &format!("{}\r", &a2[..8]));
    expect(
        &mut s,
        "also make the project's files as they were there? [y/N] ",
    );
    type_in(&mut s, "y\r");
    expect(&mut s, "session: ");
    let fork: String = expect(&mut s, "\n").trim().to_owned();
    assert!(![&f.main, &f.leaf, &f.middle].contains(&&fork), "{fork}");
    expect(&mut s, "restored the files of the forked checkpoint");
    expect(&mut s, PROMPT_END);
    assert_eq!(f.p.read("a.txt"), "a1\n");
    type_in(&mut s, "go on\r");
    expect(&mut s, "From a2.");
    expect(&mut s, PROMPT_END);
    let users = |i: usize| -> Vec<String> {
        mock.messages(i)
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect()
    };
    let sent = users(0);
    assert_eq!(sent.len(), 3, "{sent:#?}");
    assert_eq!(sent[..2], ["a1 write a", "a2 just talk"]);
    assert!(sent[2].ends_with("\n\ngo on"), "{sent:#?}");

    // Now from b1, whose session is gone.
    type_in(&mut s, "/tree\r");
    expect(&mut s, "continue from which answer?");
    type_in(&mut s, &format!("{}\r", &b1[..8]));
    expect(&mut s, "that answer's session was deleted");
    expect(&mut s, "session: ");
    let second: String = expect(&mut s, "\n").trim().to_owned();
    assert_ne!(second, fork);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "and from here\r");
    expect(&mut s, "From b1.");
    expect(&mut s, PROMPT_END);
    assert_eq!(users(1), ["a1 write a", "b1 write b", "and from here"]);
    // The forks are of the family now: their answers follow a2 and b1.
    let run = f.p.run(None, &["sessions", "tree", &second, "--json"]);
    ok(&run);
    let j: Value = serde_json::from_str(&run.stdout).unwrap();
    let parent_of = |instruction: &str| {
        j["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["instruction"] == instruction)
            .unwrap()["parent"]
            .clone()
    };
    assert_eq!(parent_of("and from here"), json!(b1));
    assert_eq!(parent_of("go on"), json!(a2));
    assert_eq!(j["nodes"].as_array().unwrap().len(), 7, "{j:#}");
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
}

/// How long `hel sessions tree` takes to draw a family of 1,000 answers
/// over 50 sessions (one and 49 forks of it and of each other, at
/// answers spread over the family), each answer with the workspace
/// snapshot of the file it changed. Built through the store's API (a
/// thousand runs of hel would take minutes), then drawn as text and as
/// JSON five times each: the fastest of each is printed. No threshold:
/// `cargo test -p hel --test e2e --release -- --ignored --nocapture tree_drawing_time`.
#[test]
#[ignore = "a measurement: prints the time to draw 1,000 answers over 50 forks"]
fn tree_drawing_time_for_1000_answers_over_50_forks() {
    use hel_store::tree::{Entry, EntryKind, Tree};
    use hel_store::{
        CommitInput, Leaf, ObjectId, Record, RequestConfig, SessionRecord, SessionState, Store,
        Workspace,
    };

    const SESSIONS: usize = 50;
    const PER_SESSION: usize = 20;
    let p = Project::new();
    let store = Store::open(&p.path()).unwrap();
    let cwd = p.path().display().to_string();
    let system = json!({"role": "system", "content": "s"});
    // Every answer: its conversation and root tree.
    let mut answers: Vec<(ObjectId, Vec<Value>, ObjectId)> = Vec::new();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut sessions = Vec::new();
    for s in 0..SESSIONS {
        let (lease, mut state, mut msgs, mut root) = if s == 0 {
            (
                store.new_session().unwrap(),
                SessionState::default(),
                vec![system.clone()],
                None,
            )
        } else {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let (at, msgs, root) = answers[(seed % answers.len() as u64) as usize].clone();
            let (lease, _, _) = store.fork(&at).unwrap();
            let state = store.record_state(&lease).unwrap();
            (lease, state, msgs, Some(root))
        };
        let mut leaves: Vec<Option<Leaf>> = vec![None; msgs.len()];
        for k in 0..PER_SESSION {
            let instruction = format!("session {s} instruction {k}: change f{s}.txt");
            msgs.push(json!({"role": "user", "content": instruction}));
            msgs.push(json!({"role": "assistant", "content": format!("changed f{s}.txt to {k}")}));
            leaves.extend([None, None]);
            let mut txn = store.begin(&lease, &mut state).unwrap();
            let start = match root {
                Some(r) => r,
                None => txn
                    .put_tree(&Tree {
                        entries: Vec::new(),
                    })
                    .unwrap(),
            };
            let mut entries = match root {
                Some(r) => hel_store::workspace::read_tree(&store, &r).unwrap().entries,
                None => Vec::new(),
            };
            let content = format!("{k}\n");
            let blob = txn.put_blob(content.as_bytes()).unwrap();
            let name = format!("f{s}.txt").into_bytes();
            entries.retain(|e| e.name != name);
            entries.push(Entry {
                name,
                kind: EntryKind::File,
                mode: 0o644,
                size: content.len() as u64,
                id: blob,
            });
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            let tree = txn.put_tree(&Tree { entries }).unwrap();
            let input = CommitInput::new(
                Record::Answer,
                &msgs,
                &leaves,
                &cwd,
                SessionRecord::of(RequestConfig::bare("test", "m")),
            )
            .instruction(&instruction)
            .usage(1000 + k as u64, 50)
            .workspace(Some(Workspace {
                tree,
                start: Some(start),
                not_tracked: 0,
                restored: None,
            }));
            let done = txn.commit(input).unwrap();
            leaves.truncate(done.leaves_from);
            leaves.extend(done.new_leaves.into_iter().map(Some));
            root = Some(tree);
            answers.push((done.id, msgs.clone(), tree));
        }
        sessions.push(lease.session().to_string());
        drop(lease);
    }
    let fastest = |args: &[&str]| -> (std::time::Duration, String) {
        let mut best = std::time::Duration::MAX;
        let mut out = String::new();
        for _ in 0..5 {
            let t = std::time::Instant::now();
            let run = p.run(None, args);
            best = best.min(t.elapsed());
            ok(&run);
            out = run.stdout;
        }
        (best, out)
    };
    let last = sessions.last().unwrap();
    let (text, drawn) = fastest(&["sessions", "tree", last]);
    assert_eq!(drawn.lines().count(), SESSIONS * PER_SESSION, "{drawn}");
    let (json_time, json) = fastest(&["sessions", "tree", last, "--json"]);
    let j: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(j["nodes"].as_array().unwrap().len(), SESSIONS * PER_SESSION);
    assert_eq!(j["sessions"].as_array().unwrap().len(), SESSIONS);
    assert!(j["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["files"] == 1));
    let widest = drawn
        .lines()
        .map(|l| l.split("  ").next().unwrap().chars().count())
        .max();
    println!(
        "hel sessions tree, {} answers over {SESSIONS} sessions: text {:.1} ms, --json {:.1} ms (whole process, fastest of 5); widest graph {:?} columns",
        SESSIONS * PER_SESSION,
        text.as_secs_f64() * 1e3,
        json_time.as_secs_f64() * 1e3,
        widest
    );
}
