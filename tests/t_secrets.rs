//! Secrets read by tools reach nothing but the tools: the model, the
//! store, the record and stream-json see handles (`‹secret:KIND:N›`), and
//! a tool the model calls with a handle gets the value.

use std::path::Path;

use serde_json::json;

use crate::common::*;

// Made-up values of real formats, assembled so that this file is not
// itself a finding.
pub(crate) fn aws_id() -> String {
    format!("AKIA{}", "QYLPMN5HHHFPZAM2")
}
pub(crate) fn aws_secret() -> String {
    format!("{}/{}", "wJalrXUtnFEMI/K7MDENG", "bPxRfiCYzKq8ZQhTq3Wx")
}
pub(crate) fn gh_token() -> String {
    format!("ghp_{}", "R8t3xQ9vLmN2pK7wZ4yB6cD1eF5gH0jA9sUq")
}

pub(crate) fn values() -> [String; 3] {
    [aws_id(), aws_secret(), gh_token()]
}

/// Which of `values` `bytes` holds.
pub(crate) fn held<'a>(bytes: &[u8], values: &'a [String]) -> Vec<&'a str> {
    values
        .iter()
        .filter(|v| bytes.windows(v.len()).any(|w| w == v.as_bytes()))
        .map(String::as_str)
        .collect()
}

/// Every file under `dir` as it is and every zstd frame in it
/// decompressed (with hel's object dictionary or none): what holds any
/// of `values`, as "path: value".
pub(crate) fn leaks_under(dir: &Path, values: &[String]) -> Vec<String> {
    let mut leaks = Vec::new();
    let mut frames = 0;
    for (path, bytes) in hel_store::testing::files_under(dir) {
        let (found, n) = leaks_in(&path.display().to_string(), &bytes, values);
        frames += n;
        leaks.extend(found);
    }
    assert!(frames > 0, "no zstd frame under {}", dir.display());
    leaks
}

/// `bytes` (named `name`) as they are and every zstd frame in them
/// decompressed: what holds any of `values`, as "name: value", and how
/// many frames were read.
pub(crate) fn leaks_in(name: &str, bytes: &[u8], values: &[String]) -> (Vec<String>, usize) {
    const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    let mut frames = 0;
    let mut found = held(bytes, values);
    for at in 0..bytes.len().saturating_sub(3) {
        if bytes[at..at + 4] != MAGIC {
            continue;
        }
        let frame = &bytes[at..];
        let Ok(len) = zstd::zstd_safe::find_frame_compressed_size(frame) else {
            continue;
        };
        let frame = &frame[..len];
        let plain = zstd::bulk::Decompressor::new()
            .and_then(|mut d| d.decompress(frame, 256 << 20))
            .or_else(|_| {
                zstd::bulk::Decompressor::with_dictionary(hel_store::DICTIONARY)
                    .and_then(|mut d| d.decompress(frame, 256 << 20))
            });
        let plain = plain.unwrap_or_else(|e| panic!("{name}: a frame at {at}: {e}"));
        frames += 1;
        found.extend(held(&plain, values));
    }
    let leaks = found.into_iter().map(|v| format!("{name}: {v}")).collect();
    (leaks, frames)
}

/// A project whose `.env` holds an AWS key pair and a GitHub token (and,
/// as projects do, ignores it: a file that is not ignored is recorded by
/// the workspace snapshots as it is). The model reads it with read_file
/// and `cat`, then writes a copy by handle, uses one in a command and
/// invents one; the user's instruction names the AWS key id too.
#[test]
fn secrets_read_by_tools_reach_nothing_but_the_tools() {
    let p = Project::new();
    let [id, secret, token] = values();
    let env =
        format!("AWS_ACCESS_KEY_ID={id}\nAWS_SECRET_ACCESS_KEY={secret}\nGITHUB_TOKEN={token}\n");
    p.write(".env", &env);
    p.write(".gitignore", ".env*\n");
    let (h_id, h_secret, h_token) = (
        "‹secret:aws-access-token:1›",
        "‹secret:aws-secret-access-key:2›",
        "‹secret:github-pat:3›",
    );
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("read_file", json!({"path": ".env"})),
            call("bash", json!({"command": "cat .env"})),
        ]},
        {"tool_calls": [
            call("write_file", json!({"path": ".env.copy", "content": format!("{h_secret}\n{h_token}\n")})),
            call("bash", json!({"command": format!("printf %s {h_token} | wc -c; echo {h_token}")})),
            call("bash", json!({"command": "echo ‹secret:github-pat:9›"})),
        ]},
        {"content": "done"},
    ]));
    let rec = p.path().join(".env.rec");
    let run = p.run(
        Some(&mock),
        &[
            "--access",
            "auto",
            "--record",
            rec.to_str().unwrap(),
            "--output-format",
            "stream-json",
            "-p",
            &format!("is {id} in .env?"),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let all = values();
    // The model: the user's message and both reads by handle, the same
    // value always by the same handle.
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    for (i, r) in requests.iter().enumerate() {
        let body = serde_json::to_vec(r).unwrap();
        assert_eq!(held(&body, &all), Vec::<&str>::new(), "request {i}");
    }
    let user = &mock.messages(0)[1];
    assert_eq!(user["content"], format!("is {h_id} in .env?"));
    let redacted = format!(
        "AWS_ACCESS_KEY_ID={h_id}\nAWS_SECRET_ACCESS_KEY={h_secret}\nGITHUB_TOKEN={h_token}\n"
    );
    let r = tool_results(&mock, 1);
    assert_eq!(r[0], redacted);
    assert!(
        r[1].starts_with("exit=0") && r[1].contains(&redacted),
        "{}",
        r[1]
    );
    // By handle: the file holds the values, the command got the value
    // (its length, 40) and printed it, which came back as the handle; an
    // invented handle fails the call in one line.
    assert_eq!(p.read(".env.copy"), format!("{secret}\n{token}\n"));
    let r = tool_results(&mock, 2);
    assert_eq!(r.len(), 5);
    assert!(r[3].contains("40\n") && r[3].contains(h_token), "{}", r[3]);
    assert_eq!(
        r[4],
        "error: hel holds no secret for ‹secret:github-pat:9›: read the file or run the command it came from again, and use the handle that gives"
    );
    // stdout (stream-json), stderr, the record and the store.
    assert_eq!(
        held(run.stdout.as_bytes(), &all),
        Vec::<&str>::new(),
        "{}",
        run.stdout
    );
    assert_eq!(held(run.stderr.as_bytes(), &all), Vec::<&str>::new());
    assert!(run.stdout.contains(h_token), "{}", run.stdout);
    for (path, bytes) in hel_store::testing::files_under(&rec) {
        assert_eq!(held(&bytes, &all), Vec::<&str>::new(), "{}", path.display());
    }
    assert_eq!(
        leaks_under(&p.path().join(".hel"), &all),
        Vec::<String>::new()
    );
    // What the session shows and exports: handles.
    let session = run.session();
    for args in [
        vec!["sessions", "show", &session],
        vec!["sessions", "export", &session],
    ] {
        let out = p.run(None, &args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert_eq!(
            held(out.stdout.as_bytes(), &all),
            Vec::<&str>::new(),
            "{args:?}"
        );
    }
}

/// A resumed session holds no value (they are in the memory of the run
/// that read them): its handles fail until the source is read again.
#[test]
fn a_resumed_session_must_read_its_secrets_again() {
    let p = Project::new();
    p.write(".env", &format!("GITHUB_TOKEN={}\n", gh_token()));
    p.write(".gitignore", ".env*\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("read_file", json!({"path": ".env"}))]},
        {"content": "read"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "read .env"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let session = run.session();
    assert_eq!(
        tool_results(&mock, 1)[0],
        "GITHUB_TOKEN=‹secret:github-pat:1›\n"
    );
    let mock = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": ".env.copy", "content": "‹secret:github-pat:1›"}))]},
        {"tool_calls": [call("read_file", json!({"path": ".env"}))]},
        {"tool_calls": [call("write_file", json!({"path": ".env.copy", "content": "‹secret:github-pat:1›"}))]},
        {"content": "done"},
    ]));
    let run = p.run(
        Some(&mock),
        &["--access", "auto", "resume", &session, "-p", "copy it"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let last = |i| tool_results(&mock, i).last().cloned().unwrap();
    assert!(
        last(1).starts_with("error: hel holds no secret for ‹secret:github-pat:1›"),
        "{}",
        last(1)
    );
    assert_eq!(last(2), "GITHUB_TOKEN=‹secret:github-pat:1›\n");
    assert_eq!(p.read(".env.copy"), gh_token());
}

/// `--access confirm` on a terminal: a call that uses a secret by handle
/// is shown with the handle, a line saying hel puts in the value, and
/// never the value; allowed, it runs with the value.
#[test]
fn the_confirm_question_shows_the_handle_and_says_a_secret_goes_in() {
    use crate::t_prompt::{exited_with, expect, screen_lines, spawn_with, type_in, PROMPT_END};
    let p = Project::new();
    p.write(".env", &format!("GITHUB_TOKEN={}\n", gh_token()));
    p.write(".gitignore", ".env*\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("read_file", json!({"path": ".env"}))]},
        {"tool_calls": [call("bash", json!({"command": "printf %s ‹secret:github-pat:1› | wc -c"}))]},
        {"content": "Done."},
    ]));
    let mut s = spawn_with(&p, Some(&mock), 100, &["--access", "confirm"], &[]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "count it\r");
    let seen = expect(&mut s, "[y/n/a/?] ");
    let lines = screen_lines(&seen);
    let screen = lines.join("\n");
    assert!(
        screen.contains(
            "hel: ‹secret:github-pat:1› stands for a secret: hel puts in its value when this runs"
        ),
        "{screen}"
    );
    assert!(
        screen.contains("printf %s ‹secret:github-pat:1› | wc -c"),
        "{screen}"
    );
    assert!(!screen.contains(&gh_token()), "{screen}");
    type_in(&mut s, "y\r");
    expect(&mut s, "Done.");
    expect(&mut s, PROMPT_END);
    let r = tool_results(&mock, 2);
    assert!(r.last().unwrap().contains("40"), "{r:?}");
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// A session imported from another agent brings its secrets in as
/// handles: an instruction, an answer and a tool call's arguments that
/// held them are stored with handles, and no object holds a value.
#[test]
fn an_imported_session_brings_its_secrets_in_as_handles() {
    let p = Project::new();
    let [_, secret, token] = values();
    let user = json!({"role": "user", "content": format!("use {token}")});
    let call = json!({"role": "assistant", "content": [
        {"type": "toolCall", "id": "t1", "name": "bash",
         "arguments": {"command": format!("export AWS_SECRET_ACCESS_KEY={secret}")}}
    ], "stopReason": "toolUse"});
    let answer = json!({"role": "assistant", "content": [
        {"type": "text", "text": format!("done with {token}")}
    ], "stopReason": "stop"});
    let lines = [
        json!({"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/x"}),
        json!({"type": "message", "id": "a1", "parentId": null, "message": user}),
        json!({"type": "message", "id": "a2", "parentId": "a1", "message": call}),
        json!({"type": "message", "id": "a3", "parentId": "a2", "message": answer}),
    ];
    let file = p.path().join("pi.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let run = p.run(
        None,
        &["sessions", "import", "--from", "pi", file.to_str().unwrap()],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let id = run
        .stdout
        .split("session ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session in {}", run.stdout))
        .to_owned();
    std::fs::remove_file(&file).unwrap();
    let all = values();
    assert_eq!(
        leaks_under(&p.path().join(".hel"), &all),
        Vec::<String>::new()
    );
    let shown = p.run(None, &["sessions", "show", &id, "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert_eq!(held(shown.stdout.as_bytes(), &all), Vec::<&str>::new());
    for handle in [
        "use ‹secret:github-pat:1›",
        "export AWS_SECRET_ACCESS_KEY=‹secret:aws-secret-access-key:2›",
        "done with ‹secret:github-pat:1›",
    ] {
        assert!(shown.stdout.contains(handle), "{handle}: {}", shown.stdout);
    }
}

/// The project's instructions file is text from outside too: the system
/// message holds its secrets as handles.
#[test]
fn a_secret_in_agents_md_reaches_the_model_as_a_handle() {
    let p = Project::new();
    p.write(
        "AGENTS.md",
        &format!("Deploy with the token {}.\n", gh_token()),
    );
    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = p.run(Some(&mock), &["-p", "deploy"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let system = mock.messages(0)[0]["content"].as_str().unwrap().to_owned();
    assert!(
        system.contains("Deploy with the token ‹secret:github-pat:1›."),
        "{system}"
    );
    let body = serde_json::to_vec(&mock.requests()).unwrap();
    assert_eq!(held(&body, &values()), Vec::<&str>::new());
}
