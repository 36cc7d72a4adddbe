//! Secrets already in a store (a session stored before redaction existed)
//! are listed by `hel sessions scan` and refused at every way out: `hel
//! push`, `hel sessions export` (md, json, bundle) send nothing unless
//! --allow-secrets is given; a pull or a bundle import that brings such a
//! session in says so. No output ever shows the value.

use std::path::Path;

use hel_store::{CommitInput, Leaf, Record, RequestConfig, SessionRecord, SessionState, Store};
use serde_json::{json, Value};

use crate::common::*;

// A made-up value of a real format, assembled so that this file is not
// itself a finding.
fn gh_token() -> String {
    format!("ghp_{}", "R8t3xQ9vLmN2pK7wZ4yB6cD1eF5gH0jA9sUq")
}

fn commit(
    store: &Store,
    lease: &hel_store::SessionLease,
    state: &mut SessionState,
    p: &Project,
    msgs: &[Value],
    leaves: &[Option<Leaf>],
) -> hel_store::Committed {
    let input = CommitInput::new(
        Record::Answer,
        msgs,
        leaves,
        &p.path().display().to_string(),
        SessionRecord::of(RequestConfig::bare("test", "")),
    )
    .instruction("read .env")
    .why("test")
    .spill(vec![]);
    store.commit(lease, state, input).unwrap()
}

/// A session of `p`'s store as one stored before redaction: its second
/// checkpoint adds a tool result holding the token (message 5) and an
/// answer naming it only by handle.
fn seeded(p: &Project) -> Seeded {
    let store = Store::open(&p.path()).unwrap();
    let lease = store.new_session().unwrap();
    let mut state = SessionState::default();
    let mut msgs = vec![
        json!({"role": "system", "content": "You are hel."}),
        json!({"role": "user", "content": "hi"}),
        json!({"role": "assistant", "content": "Hello."}),
    ];
    let c1 = commit(&store, &lease, &mut state, p, &msgs, &[None, None, None]);
    let mut leaves: Vec<Option<Leaf>> = c1.new_leaves.iter().copied().map(Some).collect();
    msgs.extend([
        json!({"role": "user", "content": "read .env"}),
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "bash", "arguments": "{\"command\":\"cat .env\"}"}}
        ]}),
        json!({"role": "tool", "tool_call_id": "c1",
            "content": format!("GITHUB_TOKEN={}\n", gh_token())}),
        json!({"role": "assistant",
            "content": "It sets GITHUB_TOKEN=‹secret:github-pat:1›."}),
    ]);
    leaves.extend([None, None, None, None]);
    let c2 = commit(&store, &lease, &mut state, p, &msgs, &leaves);
    leaves.truncate(c2.leaves_from);
    leaves.extend(c2.new_leaves.iter().copied().map(Some));
    Seeded {
        sid: lease.session().to_string(),
        cp: c2.id.to_hex(),
        store,
        lease,
        state,
        msgs,
        leaves,
    }
}

/// The seeded session: its id, the checkpoint whose message holds the
/// token, and what goes on from it (the session stays leased while it is
/// kept).
struct Seeded {
    sid: String,
    cp: String,
    store: Store,
    lease: hel_store::SessionLease,
    state: SessionState,
    msgs: Vec<Value>,
    leaves: Vec<Option<Leaf>>,
}

/// The seeded session's id and checkpoint, the session let go.
fn seeded_ids(p: &Project) -> (String, String) {
    let s = seeded(p);
    (s.sid, s.cp)
}

/// Every file under `dir`, by path relative to it.
fn files(dir: &Path) -> Vec<String> {
    hel_store::testing::files_under(dir)
        .into_iter()
        .map(|(p, _)| p.strip_prefix(dir).unwrap().display().to_string())
        .collect()
}

fn no_value(run: &Run) {
    let token = gh_token();
    assert!(
        !run.stdout.contains(&token) && !run.stderr.contains(&token),
        "stdout: {}\nstderr: {}",
        run.stdout,
        run.stderr
    );
}

/// The refusal: a line naming the session, checkpoint, message and kind,
/// and a last line saying what sends it anyway.
fn refused(run: &Run, sid: &str, cp: &str) {
    assert_ne!(run.code, 0, "{}", run.stderr);
    no_value(run);
    let line = run
        .stderr
        .lines()
        .find(|l| l.contains("github-pat"))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        line.contains(&sid[..8]) && line.contains(&cp[..12]) && line.contains("message 5"),
        "{line}"
    );
    let last = run.stderr.lines().last().unwrap_or("");
    assert!(last.contains("--allow-secrets"), "{}", run.stderr);
}

#[test]
fn scan_lists_a_stored_secret_by_kind_and_place_never_its_value() {
    let p = Project::new();
    let (sid, cp) = seeded_ids(&p);
    let run = p.run(None, &["sessions", "scan"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    no_value(&run);
    // One finding: the handle in the answer is not one.
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    let want = format!("{}  {}  message 5  tool  github-pat", &sid[..8], &cp[..12]);
    assert_eq!(lines[0], want);
    assert!(
        lines[1].starts_with("1 secret in 1 session"),
        "{}",
        lines[1]
    );

    let run = p.run(None, &["sessions", "scan", &sid[..8], "--json"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    no_value(&run);
    let found: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        found,
        json!([{"checkpoint": cp, "index": 5, "kind": "github-pat", "role": "tool", "session": sid}])
    );

    // A clean project finds nothing and says so.
    let clean = Project::new();
    let mock = Mock::start(json!([{"content": "hello"}]));
    assert_eq!(clean.run(Some(&mock), &["-p", "hi"]).code, 0);
    let run = clean.run(None, &["sessions", "scan"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.starts_with("0 secrets in 0 sessions"),
        "{}",
        run.stdout
    );
}

#[test]
fn export_refuses_a_session_holding_a_secret_unless_allowed() {
    let p = Project::new();
    let (sid, cp) = seeded_ids(&p);
    for format in ["md", "json"] {
        let run = p.run(None, &["sessions", "export", &sid, "--format", format]);
        refused(&run, &sid, &cp);
        assert_eq!(run.stdout, "", "nothing is written");
    }
    let bundle = p.home.path().join("s.helbundle");
    let b = bundle.to_str().unwrap();
    let run = p.run(None, &["sessions", "export", &sid, "--bundle", b]);
    refused(&run, &sid, &cp);
    assert!(!bundle.exists());

    // An export of a checkpoint before the secret came in is clean.
    let first = p.run(None, &["sessions", "log", &sid, "--json"]);
    let log: Value = serde_json::from_str(&first.stdout).unwrap();
    let older: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["checkpoint"].as_str().or(e["id"].as_str()))
        .filter(|c| *c != cp)
        .collect();
    assert_eq!(older.len(), 1, "{log}");
    let run = p.run(None, &["sessions", "export", &sid, "--at", older[0]]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let run = p.run(None, &["sessions", "export", &sid, "--allow-secrets"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(&gh_token()),
        "what is stored is written"
    );
    let run = p.run(
        None,
        &["sessions", "export", &sid, "--bundle", b, "--allow-secrets"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(bundle.exists());

    // Imported into another project: it comes in, and says it holds one.
    let other = Project::new();
    let run = other.run(None, &["sessions", "import", b]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    no_value(&run);
    assert!(
        run.stderr
            .contains(&format!("session {sid} holds 1 secret"))
            && run.stderr.contains("hel sessions scan"),
        "{}",
        run.stderr
    );
}

#[test]
fn push_sends_nothing_of_a_session_holding_a_secret_unless_allowed() {
    let p = Project::new();
    let mut seed = seeded(&p);
    let (sid, cp) = (seed.sid.clone(), seed.cp.clone());
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    let run = p.run(None, &["remote", "add", "shared", &url]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let before = files(remote.path());

    let run = p.run(None, &["push"]);
    refused(&run, &sid, &cp);
    assert_eq!(files(remote.path()), before, "nothing was sent");
    assert!(!run.stdout.contains("pushed"), "{}", run.stdout);

    let run = p.run(None, &["push", "--allow-secrets"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(&format!("{sid}: pushed to shared")),
        "{}",
        run.stdout
    );

    // What the remote holds is not scanned again: a clean checkpoint on
    // top is pushed without --allow-secrets.
    seed.msgs.push(json!({"role": "user", "content": "thanks"}));
    seed.msgs
        .push(json!({"role": "assistant", "content": "You are welcome."}));
    seed.leaves.extend([None, None]);
    commit(
        &seed.store,
        &seed.lease,
        &mut seed.state,
        &p,
        &seed.msgs,
        &seed.leaves,
    );
    drop(seed);
    let run = p.run(None, &["push"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("pushed to shared"), "{}", run.stdout);

    // Pulled into another project: it comes in, and says it holds one.
    let other = Project::new();
    let run = other.run(None, &["remote", "add", "shared", &url]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = other.run(None, &["pull"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    no_value(&run);
    assert!(
        run.stderr
            .contains(&format!("session {sid} holds 1 secret"))
            && run.stderr.contains("hel sessions scan"),
        "{}",
        run.stderr
    );
    let run = other.run(None, &["sessions", "scan"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("github-pat"), "{}", run.stdout);
}
