//! The model knows what happened: a tool call interrupted by Ctrl-C stays
//! in the conversation with a result saying so (and what it printed), and
//! an instruction cut off by a crash (SIGKILL during its third call) is
//! carried by the resume: its user message, its finished calls with their
//! results, a result for the call that was running and a line saying the
//! process ended, before the next instruction. The round records that
//! make the second possible are no checkpoints: the log, fsck and undo see
//! the session as before.

use std::process::Stdio;

use serde_json::{json, Value};

use crate::common::*;
use crate::t_prompt::{expect, type_in, PROMPT_END};
use crate::t_sandbox::wait_until;

/// The messages of the mock's last request.
fn last_messages(mock: &Mock) -> Vec<Value> {
    mock.messages(mock.requests().len() - 1)
}

fn content(m: &Value) -> &str {
    m["content"].as_str().unwrap_or_default()
}

/// Ctrl-C while a command runs and has printed: the next request holds
/// the reply that called it, its result saying it was interrupted with
/// what it printed, a result for the call after it that never ran, and
/// then the next instruction.
#[test]
fn ctrl_c_keeps_the_interrupted_call_with_what_it_printed() {
    let p = Project::new();
    // The marker first, then more than any pipe or socket between the
    // command and hel holds: once `ready` exists, hel has read the marker.
    // It prints a token too: what an interrupted call printed is kept
    // with its secrets replaced by handles, as every result is.
    let token = format!("ghp_{}", "R8t3xQ9vLmN2pK7wZ4yB6cD1eF5gH0jA9sUq");
    let slow = &format!("echo printed-before-ctrl-c {token}; head -c 3000000 /dev/zero | tr '\\0' x; echo; touch ready; sleep 120");
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("bash", json!({"command": slow})),
            call("glob", json!({"pattern": "*"})),
        ]},
        {"content": "Understood."},
    ]));
    let mut cmd = std::process::Command::new(hel_bin());
    cmd.current_dir(p.dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p.home.path())
        .env("TERM", "xterm")
        .args(["--base-url", &mock.url, "--model", "mock-model"])
        .args(["--access", "auto"]);
    let mut s = rexpect::session::spawn_command(cmd, Some(30_000)).unwrap();
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "run the slow thing\r");
    wait_until("the command to print and signal", || {
        p.path().join("ready").exists()
    });
    s.send_control('c').unwrap();
    expect(&mut s, "hel: instruction incomplete (interrupted)");
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "what happened?\r");
    expect(&mut s, "Understood.");
    expect(&mut s, PROMPT_END);

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    let msgs = last_messages(&mock);
    assert_eq!(
        roles(&msgs),
        ["system", "user", "assistant", "tool", "tool", "user"],
        "{msgs:#?}"
    );
    assert_eq!(content(&msgs[1]), "run the slow thing");
    let calls = msgs[2]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["function"]["name"], "bash");
    // One result per call, in order.
    assert_eq!(msgs[3]["tool_call_id"], calls[0]["id"]);
    assert_eq!(msgs[4]["tool_call_id"], calls[1]["id"]);
    let stopped = content(&msgs[3]);
    assert!(
        stopped.starts_with("[hel: interrupted by the user (Ctrl-C) before this call finished"),
        "{stopped}"
    );
    assert!(stopped.contains("printed-before-ctrl-c"), "{stopped}");
    assert!(stopped.contains("‹secret:"), "{}", &stopped[..400]);
    // (The call's own arguments hold it: the model wrote it.)
    assert!(!stopped.contains(&token), "{}", &stopped[..400]);
    // Bounded as any large result is: spilled, its ends shown.
    assert!(stopped.contains("spill: "), "{}", &stopped[..400]);
    assert!(stopped.len() < 100_000, "{}", stopped.len());
    assert!(
        content(&msgs[4]).starts_with("[hel: not run:"),
        "{:?}",
        msgs[4]
    );
    assert_eq!(content(&msgs[5]), "what happened?");
    assert_calls_answered(&msgs);
    // Said no more than once: no note repeats the interrupted instruction.
    assert_eq!(
        msgs.iter()
            .filter(|m| content(m).contains("run the slow thing"))
            .count(),
        1
    );

    // The interrupted record keeps that conversation; a new process
    // resuming the session sends the same.
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    let sid = json_list(&p)[0]["id"].as_str().unwrap().to_owned();
    let mock2 = Mock::start(json!([{"content": "again"}]));
    let run = p.run(Some(&mock2), &["resume", &sid, "-p", "and now?"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let resumed = mock2.messages(0);
    assert_eq!(&resumed[..6], &msgs[..], "{resumed:#?}");
}

fn json_list(p: &Project) -> Value {
    let run = p.run(None, &["sessions", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap()
}

/// A session whose instruction "change f three times" was killed
/// (SIGKILL) during its third call, after the first changed f.txt from
/// v0 and the third changed it again; checked as the store shows it:
/// started, never ended, no answer and no round in the log, fsck sound.
fn crashed_session(p: &Project) -> String {
    p.write("f.txt", "v0\n");
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": "echo v1 > f.txt; echo first-done"}))]},
        {"tool_calls": [call("bash", json!({"command": "echo second-done"}))]},
        {"tool_calls": [call("bash", json!({"command": "echo v3 > f.txt; touch ready; sleep 120"}))]},
        {"content": "never"},
    ]));
    let mut hel = p
        .hel(Some(&mock))
        .args(["--access", "auto", "-p", "change f three times"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the third command to run", || {
        p.path().join("ready").exists()
    });
    hel.kill().unwrap(); // SIGKILL
    hel.wait().unwrap();
    assert_eq!(p.read("f.txt"), "v3\n");

    // What the store says of the session: the instruction started and
    // never ended; no answer, no round in the log.
    let list = json_list(p);
    let sid = list[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(list[0]["checkpoints"], 0, "{list}");
    let log = p.run(None, &["sessions", "log", &sid, "--json"]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    let log: Value = serde_json::from_str(&log.stdout).unwrap();
    let records: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["record"].as_str().unwrap())
        .collect();
    assert_eq!(records, ["start"], "{log}");
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}\n{}", fsck.stdout, fsck.stderr);
    assert!(fsck.stdout.contains("store is sound"), "{}", fsck.stdout);
    assert!(!fsck.stdout.contains("fault:"), "{}", fsck.stdout);
    sid
}

/// SIGKILL during an instruction's third tool call: the resume's first
/// request carries the instruction's text, the two finished calls and
/// their results, a result for the third saying the process ended, and a
/// line saying so, before the new instruction. Saved with the next
/// answer; the session's log and summary count answers only.
#[test]
fn a_crash_mid_instruction_is_carried_by_the_resume() {
    let p = Project::new();
    let sid = crashed_session(&p);
    // The resume carries the cut-off instruction.
    let mock2 = Mock::start(json!([{"content": "I see what happened."}]));
    let run = p.run(Some(&mock2), &["resume", &sid, "-p", "carry on"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("the session's last instruction was cut off"),
        "{}",
        run.stderr
    );
    let msgs = mock2.messages(0);
    assert_eq!(
        roles(&msgs),
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "user",
            "user"
        ],
        "{msgs:#?}"
    );
    assert_eq!(content(&msgs[1]), "change f three times");
    assert!(content(&msgs[3]).contains("first-done"), "{:?}", msgs[3]);
    assert!(content(&msgs[5]).contains("second-done"), "{:?}", msgs[5]);
    assert_eq!(
        msgs[6]["tool_calls"][0]["function"]["arguments"],
        json!({"command": "echo v3 > f.txt; touch ready; sleep 120"}).to_string()
    );
    assert_eq!(msgs[7]["tool_call_id"], msgs[6]["tool_calls"][0]["id"]);
    assert!(
        content(&msgs[7]).starts_with("[hel: no result: the hel process ended"),
        "{:?}",
        msgs[7]
    );
    assert!(
        content(&msgs[8]).starts_with(
            "[hel: the hel process ended (killed or crashed) before the instruction above finished"
        ),
        "{:?}",
        msgs[8]
    );
    assert_eq!(content(&msgs[9]), "carry on");
    assert_calls_answered(&msgs);

    // Saved with the resumed instruction's answer: one checkpoint, and
    // the log still lists records, not rounds.
    let list = json_list(&p);
    assert_eq!(list[0]["checkpoints"], 1, "{list}");
    let log = p.run(None, &["sessions", "log", &sid]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert!(log.stdout.contains("carry on"), "{}", log.stdout);
    assert!(!log.stdout.contains("round"), "{}", log.stdout);
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}\n{}", fsck.stdout, fsck.stderr);

    // A second resume sends the same conversation (saved, not carried
    // again).
    let mock3 = Mock::start(json!([{"content": "ok"}]));
    let run = p.run(Some(&mock3), &["resume", &sid, "-p", "third"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("cut off"), "{}", run.stderr);
    let again = mock3.messages(0);
    assert_eq!(&again[..msgs.len()], &msgs[..]);
}

/// The round records change nothing of what undo finds: the instruction
/// that started and never ended, whose files it puts back.
#[test]
fn undo_after_a_crash_reverts_the_cut_off_instruction() {
    let p = Project::new();
    let sid = crashed_session(&p);
    let undo = p.run(None, &["undo", &sid]);
    assert_eq!(undo.code, 0, "{}\n{}", undo.stdout, undo.stderr);
    assert!(
        undo.stdout.contains("before \"change f three times\""),
        "{}",
        undo.stdout
    );
    assert_eq!(p.read("f.txt"), "v0\n", "{}", undo.stdout);
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}\n{}", fsck.stdout, fsck.stderr);
    assert!(!fsck.stdout.contains("fault:"), "{}", fsck.stdout);
}

/// Round records are read as untrusted: one forged after the genuine ones
/// (a result for a call nobody made, then a reply carrying text from
/// nowhere) is not carried, nor anything after it, and what came before
/// it is carried as it was written.
#[test]
fn a_forged_round_record_is_not_carried() {
    let p = Project::new();
    let sid = crashed_session(&p);
    let head = std::fs::read_to_string(p.path().join(".hel/refs/sessions").join(&sid))
        .unwrap()
        .trim()
        .to_owned();
    let journal = p
        .path()
        .join(".hel/packs/journals")
        .join(format!("{sid}.journal"));
    let mut bytes = std::fs::read(&journal).unwrap();
    for (seq, messages) in [
        (
            5,
            json!([{"role": "tool", "tool_call_id": "nobody-made-this", "content": "forged result"}]),
        ),
        (6, json!([{"role": "assistant", "content": "forged text"}])),
    ] {
        let payload = json!({"hel_round": 1, "base": head, "seq": seq, "messages": messages});
        bytes.extend(hel_store::testing::blob_record(
            payload.to_string().as_bytes(),
        ));
    }
    std::fs::write(&journal, &bytes).unwrap();

    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = p.run(Some(&mock), &["resume", &sid, "-p", "carry on"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let msgs = mock.messages(0);
    assert!(
        !serde_json::to_string(&msgs).unwrap().contains("forged"),
        "{msgs:#?}"
    );
    assert_eq!(msgs.len(), 10, "{msgs:#?}");
    assert!(content(&msgs[7]).starts_with("[hel: no result: the hel process ended"));
    assert_calls_answered(&msgs);
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}\n{}", fsck.stdout, fsck.stderr);
}
