//! Bounded readers and safe output: a 1 GB line through read_file and
//! grep, endless and oversized model responses, FIFOs, the instructions
//! file; escape sequences from outside on the terminal.

use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use serde_json::json;

fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string; mkfifo(3) only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// Run `cmd` to its end, failing the test if it takes longer than `limit`
/// (a hang must fail, not block the suite).
fn run_within(cmd: &mut Command, limit: Duration) -> Run {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => {
            let o = out.unwrap();
            Run {
                code: o.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            }
        }
        Err(_) => {
            // SAFETY: kill(2) of our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("hel did not finish within {limit:?}");
        }
    }
}

#[test]
fn a_one_gigabyte_line_is_read_and_searched_in_bounded_memory() {
    let p = Project::new();
    let size: u64 = 1 << 30;
    let f = std::fs::File::create(p.path().join("big.txt")).unwrap();
    // One line, no newline anywhere: text at the start, around the needle
    // in the middle and at the end; the rest a hole (read as NUL bytes,
    // which grep's binary check, on the first 8 KiB, does not see).
    let head = "한".repeat(64 * 1024 / 3);
    f.write_all_at(head.as_bytes(), 0).unwrap();
    f.set_len(size).unwrap();
    let mid = size / 2;
    let pad = "m".repeat(32 * 1024);
    f.write_all_at(format!("{pad}NEEDLE-42{pad}").as_bytes(), mid)
        .unwrap();
    f.write_all_at(b"THE-END", size - 7).unwrap();
    drop(f);
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("read_file", json!({"path": "big.txt"})),
            call("grep", json!({"pattern": "NEEDLE-[0-9]+"})),
            call("grep", json!({"pattern": "THE-END$", "path": "big.txt"})),
        ]},
        {"tool_calls": [call("read_file", json!({"cursor": "{{cursor}}"}))]},
        {"content": "done"},
    ]));
    let m = run_measured(p.hel(Some(&mock)).args(["-p", "x"]));
    eprintln!("peak RSS of hel over a 1 GiB line: {} KiB", m.max_rss_kib);
    assert_eq!(m.run.code, 0, "{}", m.run.stderr);
    assert!(m.max_rss_kib < 100 * 1024, "peak RSS {} KiB", m.max_rss_kib);
    let r = tool_results(&mock, 1);
    let (page, cursor) = r[0].rsplit_once('\n').unwrap();
    // 3,333 characters of 3 bytes: the page ends on a character boundary.
    assert_eq!(page.len(), 9_999);
    assert!(page.chars().all(|c| c == '한'));
    assert!(
        cursor.starts_with("[Read truncated. Continue with read_file({\"cursor\":\""),
        "{cursor}"
    );
    let found = &r[1];
    assert!(found.starts_with("big.txt:1:…m"), "{found}");
    assert!(found.contains("mNEEDLE-42m"), "{found}");
    assert!(
        found.contains("searched in overlapping windows")
            && found.contains(&format!("the match is at byte {} ", mid + 32 * 1024)),
        "{found}"
    );
    assert!(found.len() < 1_000, "{}", found.len());
    assert!(
        r[2].contains("THE-END") && r[2].starts_with("big.txt:1:"),
        "{}",
        r[2]
    );
    let next = &tool_results(&mock, 2)[3];
    let (page2, _) = next.rsplit_once('\n').unwrap();
    assert_eq!(page2.len(), 9_999);
    assert!(page2.chars().all(|c| c == '한'));
}

#[test]
fn endless_and_oversized_responses_end_incomplete_with_a_one_line_error() {
    let p = Project::new();
    let cases: [(serde_json::Value, Option<&str>, &str); 4] = [
        (json!({"endless": true}), None, "64 MiB"),
        (json!({"declared_length": 100_000_000u64}), None, "64 MiB"),
        (json!({"huge_content": 200_000_000u64}), None, "64 MiB"),
        (
            json!({"huge_content": 2_000_000, "chunked": true}),
            Some("1000000"),
            "1000000 bytes",
        ),
    ];
    for (step, limit, named) in cases {
        let mock = Mock::start(json!([step.clone()]));
        let mut cmd = p.hel(Some(&mock));
        if let Some(l) = limit {
            cmd.env("HEL_MAX_RESPONSE_BYTES", l);
        }
        let m = run_measured(cmd.args(["-p", "x"]));
        eprintln!("{step}: peak RSS {} KiB", m.max_rss_kib);
        assert_eq!(m.run.code, 1, "{step}: {}", m.run.stderr);
        let line = m
            .run
            .stderr
            .lines()
            .find(|l| l.starts_with("hel: instruction incomplete (error):"))
            .unwrap_or_else(|| panic!("{step}: {}", m.run.stderr));
        assert!(
            line.contains(&format!("larger than the limit of {named}"))
                && line.contains("HEL_MAX_RESPONSE_BYTES"),
            "{line}"
        );
        assert!(m.run.stdout.is_empty());
        assert!(m.max_rss_kib < 256 * 1024, "{step}: {} KiB", m.max_rss_kib);
        assert_eq!(mock.requests().len(), 1, "not retried");
    }
    // Under the limit, a large answer goes through whole.
    let mock = Mock::start(json!([{"huge_content": 500_000, "chunked": true}]));
    let run = Run::from_cmd(
        p.hel(Some(&mock))
            .env("HEL_MAX_RESPONSE_BYTES", "1000000")
            .args(["-p", "x"]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, format!("{}\n", "x".repeat(500_000)));
}

#[test]
fn fifos_in_the_project_do_not_hang_the_file_tools() {
    let p = Project::new();
    p.write("a.txt", "hello fifo\n");
    p.write("sub/b.txt", "hello b\n");
    mkfifo(&p.path().join("pipe"));
    // Ignore files are read by the walk: FIFOs there must not block it either.
    mkfifo(&p.path().join("sub/.gitignore"));
    mkfifo(&p.path().join(".ignore"));
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("read_file", json!({"path": "pipe"})),
            call("grep", json!({"pattern": "hello"})),
            call("glob", json!({"pattern": "**/*"})),
            call("read_file", json!({"path": "sub/.gitignore"})),
            call("grep", json!({"pattern": "x", "path": "pipe"})),
            call("search_replace", json!({"path": "pipe", "search": "a", "replace": "b"})),
            call("write_file", json!({"path": "pipe", "content": "x"})),
        ]},
        {"content": "done"},
    ]));
    let run = run_within(
        p.hel(Some(&mock)).args(["--access", "auto", "-p", "x"]),
        Duration::from_secs(60),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = tool_results(&mock, 1);
    assert!(
        r[0].contains("pipe is a FIFO, not a regular file: refused"),
        "{}",
        r[0]
    );
    assert_eq!(r[1], "a.txt:1:hello fifo\nsub/b.txt:1:hello b");
    assert_eq!(r[2], "a.txt\nsub/b.txt");
    assert!(r[3].contains("a FIFO"), "{}", r[3]);
    assert!(r[4].contains("a FIFO"), "{}", r[4]);
    assert!(
        r[5].contains("a FIFO") && r[6].contains("a FIFO"),
        "{} / {}",
        r[5],
        r[6]
    );
}

#[test]
fn the_instructions_file_is_capped_and_read_only_beneath_the_project() {
    let p = Project::new();
    let big = format!("FIRST-RULE\n{}\nLAST-RULE\n", "r".repeat(100 * 1024));
    p.write("HEL.md", &big);
    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("HEL.md is larger than 64 KiB; only its first 64 KiB are used"),
        "{}",
        run.stderr
    );
    let sys = mock.messages(0)[0]["content"].as_str().unwrap().to_owned();
    assert!(sys.contains("FIRST-RULE") && !sys.contains("LAST-RULE"));
    assert!(sys.len() < 70 * 1024);

    // A FIFO: a warning, no hang.
    std::fs::remove_file(p.path().join("HEL.md")).unwrap();
    mkfifo(&p.path().join("HEL.md"));
    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = run_within(
        p.hel(Some(&mock)).args(["-p", "x"]),
        Duration::from_secs(60),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot read HEL.md: it is a FIFO"),
        "{}",
        run.stderr
    );

    // A link outside the project: refused, its content never sent.
    let outside = Outside::new();
    std::fs::remove_file(p.path().join("HEL.md")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("precious.txt"), p.path().join("HEL.md"))
        .unwrap();
    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot read HEL.md") && run.stderr.contains("outside the project"),
        "{}",
        run.stderr
    );
    assert!(!mock.requests()[0].to_string().contains("do not touch"));
}

/// What a model can put in its text to take over a terminal.
const HOSTILE: &str =
    "\x1b[2J\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07 \u{202e}txt.exe\r overwritten \u{9b}31m";

fn assert_neutral(stderr: &str) {
    for bad in ['\x1b', '\x07', '\u{202e}', '\u{9b}'] {
        assert!(!stderr.contains(bad), "{bad:?} reached stderr: {stderr:?}");
    }
    assert!(
        !stderr.contains('\r'),
        "a lone CR reached stderr: {stderr:?}"
    );
}

#[test]
fn escape_sequences_from_outside_are_neutralized_on_the_terminal() {
    let p = Project::new();
    p.write("evil.txt", &format!("{HOSTILE}\n"));
    let answer = format!("done {HOSTILE}\r\nend");
    let mock = Mock::start(json!([
        {"tool_calls": [
            call("read_file", json!({"path": "evil.txt"})),
            // Raw arguments (invalid JSON) are printed in the note as they came.
            {"name": "grep", "arguments": format!("{{\"pattern\":\"{HOSTILE}")},
            call("bash", json!({"command": "printf '\\033]0;from-bash\\007\\033[31mred\\n'"})),
        ]},
        {"content": answer},
    ]));
    let out = Command::new(hel_bin())
        .current_dir(p.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p.home.path())
        .args([
            "--base-url",
            &mock.url,
            "--model",
            "m",
            "--access",
            "auto",
            "--no-sandbox",
        ])
        .args(["-p", "x"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // Piped stdout: the answer byte for byte.
    assert_eq!(out.stdout, format!("{answer}\n").into_bytes());
    assert_neutral(&stderr);
    assert!(
        stderr.contains(
            "hel:   ^[[2J^[]0;pwned^G^[]52;c;ZXZpbA==^G \\u{202e}txt.exe^M overwritten \\u{9b}31m"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("hel: grep {\"pattern\":\"^[[2J"),
        "{stderr}"
    );
    // A command's last lines: its escape sequences stripped whole.
    assert!(stderr.contains("\n    red\n"), "{stderr}");
    assert!(!stderr.contains("from-bash^G"), "{stderr}");
    // The model still gets the file as it is.
    assert_eq!(tool_results(&mock, 1)[0], format!("{HOSTILE}\n"));

    // Server text in errors.
    let body = json!({"error": {"message": format!("bad {HOSTILE}")}}).to_string();
    let mock = Mock::start(json!([{"status": 400, "body": body}]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_neutral(&run.stderr);
    assert!(run.stderr.contains("HTTP 400: bad ^[[2J"), "{}", run.stderr);
    let mock = Mock::start(json!([{"status": 503, "body": body}, {"content": "ok"}]));
    let run = p.run(Some(&mock), &["-p", "x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_neutral(&run.stderr);
    assert!(run.stderr.contains("retrying"), "{}", run.stderr);
}

#[test]
fn answers_on_a_terminal_show_escapes_instead_of_obeying_them() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": format!("line one\n{HOSTILE}\nlast\ttab")}]));
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty(3) fills in two descriptors; no name or settings asked for.
    let got = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(got, 0);
    // SAFETY: both descriptors were just opened for us and are owned here only.
    let (master, slave) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::fs::File::from_raw_fd(master),
            std::os::fd::OwnedFd::from_raw_fd(slave),
        )
    };
    let mut child = {
        let mut cmd = p.hel(Some(&mock));
        cmd.args(["-p", "x"])
            .stdout(Stdio::from(slave))
            .stderr(Stdio::piped());
        cmd.spawn().unwrap()
        // The command, holding our copy of the terminal's slave side, is
        // dropped here, so reading the master ends when hel exits.
    };
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut m = master;
        let mut buf = [0u8; 4096];
        // EIO once the last slave descriptor is closed.
        while let Ok(n) = m.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    });
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0), "{stderr}");
    let shown = String::from_utf8(reader.join().unwrap()).unwrap();
    // The terminal turns each \n into \r\n (onlcr).
    let shown = shown.replace("\r\n", "\n");
    assert_neutral(&shown);
    // The answer is laid out as Markdown there: the tab in running text
    // is a space, as any whitespace between words.
    assert_eq!(
        shown,
        "line one\n^[[2J^[]0;pwned^G^[]52;c;ZXZpbA==^G \\u{202e}txt.exe^M overwritten \\u{9b}31m\nlast tab\n"
    );
    let _ = std::io::stderr().flush();
}
