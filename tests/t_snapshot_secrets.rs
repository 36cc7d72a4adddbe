//! A file whose content holds a secret is not stored by the workspace
//! snapshots: a `.env` that no ignore rule covers, or one the model
//! wrote with a secret substituted for its handle, is recorded as a file
//! the snapshot did not read, so no byte of it is under `.hel/`, and undo
//! and restore leave it alone, saying why.

use serde_json::json;

use crate::common::*;
use crate::t_secrets::{held, leaks_under, values};

#[test]
fn a_file_holding_a_secret_is_never_stored_and_undo_leaves_it_alone() {
    let p = Project::new();
    let [id, secret, token] = values();
    let env =
        format!("AWS_ACCESS_KEY_ID={id}\nAWS_SECRET_ACCESS_KEY={secret}\nGITHUB_TOKEN={token}\n");
    // No .gitignore: the snapshots see `.env`.
    p.write(".env", &env);
    p.write("notes.txt", "v0\n");
    let (h_id, h_secret, h_token) = (
        "‹secret:aws-access-token:1›",
        "‹secret:aws-secret-access-key:2›",
        "‹secret:github-pat:3›",
    );
    let written = format!(
        "AWS_ACCESS_KEY_ID={h_id}\nAWS_SECRET_ACCESS_KEY={h_secret}\nGITHUB_TOKEN={h_token}\nREGION=eu-west-1\n"
    );
    let mock = Mock::start(json!([
        {"tool_calls": [call("read_file", json!({"path": ".env"}))]},
        {"tool_calls": [
            call("write_file", json!({"path": "notes.txt", "content": "v1\n"})),
            call("write_file", json!({"path": ".env", "content": written})),
        ]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "set the region"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let all = values();
    // The model wrote the values by handle: the file holds them.
    let env_now = format!("{env}REGION=eu-west-1\n");
    assert_eq!(p.read(".env"), env_now);
    assert_eq!(p.read("notes.txt"), "v1\n");
    // The user is told, once, why `.env` is not recorded.
    assert!(
        run.stderr
            .contains(".env (it holds a secret: not recorded)"),
        "{}",
        run.stderr
    );
    // Nor is any value shown: the diff of `.env`'s overwrite masks the
    // old lines it read from the file.
    assert_eq!(
        held(run.stderr.as_bytes(), &all),
        Vec::<&str>::new(),
        "{}",
        run.stderr
    );
    let sid = run.session();
    // Every object decompressed: neither value is under .hel/.
    assert_eq!(
        leaks_under(&p.path().join(".hel"), &all),
        Vec::<String>::new()
    );
    // The user edits `.env` between instructions: still not stored.
    let edited = format!("{env_now}# the user's line\n");
    p.write(".env", &edited);
    // What the session changed, and the files now against it: the
    // values are not shown.
    // (The files now differ from the session's last record at `.env`
    // alone: its size changed.)
    for (args, shown) in [
        (vec!["diff", sid.as_str()], "notes.txt"),
        (vec!["diff", sid.as_str(), "--worktree"], ".env"),
    ] {
        let d = p.run(None, &args);
        assert_eq!(d.code, 0, "{args:?}: {}", d.stderr);
        assert_eq!(
            held(d.stdout.as_bytes(), &all),
            Vec::<&str>::new(),
            "{args:?}"
        );
        assert!(d.stdout.contains(shown), "{args:?}: {}", d.stdout);
    }
    // Undo puts notes.txt back and leaves `.env` alone, saying why.
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert_eq!(p.read("notes.txt"), "v0\n");
    assert_eq!(p.read(".env"), edited);
    let line = "  left alone  .env: not read by the snapshot at the instruction's start: a file it saw but did not record (ignored, over the size limit or budget, unreadable, or holding a secret)";
    assert!(
        undo.stdout.lines().any(|l| l == line),
        "{line} in\n{}",
        undo.stdout
    );
    assert_eq!(held(undo.stdout.as_bytes(), &all), Vec::<&str>::new());
    // The undo's own snapshots (before-restore, restored) store no value
    // either, and the store is sound.
    assert_eq!(
        leaks_under(&p.path().join(".hel"), &all),
        Vec::<String>::new()
    );
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}\n{}", fsck.stdout, fsck.stderr);
}
