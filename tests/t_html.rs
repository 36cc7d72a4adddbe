//! `hel sessions export --format html`: the page opened in a real browser
//! (headless Chromium, the network off) shows the conversation, a tool
//! call, the diff of a changed file and a fork's section, and runs
//! nothing a message holds; the file itself loads nothing and escapes
//! everything; a secret in a fork refuses the export; the size of the
//! page of a 200-message session.
//!
//! tools/test installs Chromium (Debian's `chromium`). Without it the
//! browser test fails, unless `HEL_SKIP_BROWSER=1` says to skip it (for
//! local runs).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use hel_store::{CommitInput, Leaf, Record, RequestConfig, SessionRecord, Store};
use serde_json::{json, Value};

use crate::common::*;

/// The browser tools/test installs; None (the test is skipped) only when
/// `HEL_SKIP_BROWSER=1` says so.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    if std::env::var_os("HEL_SKIP_BROWSER").is_some() {
        eprintln!("skipped the browser part: HEL_SKIP_BROWSER is set and no chromium was found");
        return None;
    }
    panic!(
        "no chromium on PATH: run the tests through tools/test (it installs it), or set HEL_SKIP_BROWSER=1 to skip the browser part"
    )
}

/// The DOM of `page` after headless Chromium loaded it, every network
/// request sent to a closed port of 127.0.0.1 (a page that tried to load
/// anything would find nothing). The browser is stopped with its process
/// group if it has not finished after a bound.
fn dump_dom(browser: &Path, page: &Path) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()));
    // Chromium's sandbox refuses to run as root (a CI container).
    if rustix::process::geteuid().is_root() {
        cmd.arg("--no-sandbox");
    }
    cmd.arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .env("HOME", profile.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(300)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
            panic!("chromium did not finish loading the page");
        }
    };
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && dom.contains("</html>"),
        "chromium: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    dom
}

/// Every tag of serialized HTML (text's `<` is `&lt;` there): its name
/// and its attributes' names and values.
fn tags(html: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        let end = rest[at..].find('>').map(|e| at + e).unwrap_or(rest.len());
        let inner = &rest[at + 1..end];
        rest = &rest[(end + 1).min(rest.len())..];
        if inner.starts_with('/') || inner.starts_with('!') {
            continue;
        }
        let name: String = inner
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '/')
            .collect();
        let mut attrs = Vec::new();
        let mut a = inner[name.len()..].trim_start();
        while !a.is_empty() && a != "/" {
            let key: String = a
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '=')
                .collect();
            a = a[key.len()..].trim_start();
            let mut value = String::new();
            if let Some(v) = a.strip_prefix('=') {
                let v = v.trim_start();
                if let Some(q) = v.strip_prefix('"') {
                    let close = q.find('"').unwrap_or(q.len());
                    value = q[..close].to_owned();
                    a = q[(close + 1).min(q.len())..].trim_start();
                } else {
                    let close = v.find(char::is_whitespace).unwrap_or(v.len());
                    value = v[..close].to_owned();
                    a = v[close..].trim_start();
                }
            }
            attrs.push((key.to_ascii_lowercase(), value));
        }
        out.push((name.to_ascii_lowercase(), attrs));
    }
    out
}

/// What a page (the file, or the DOM a browser made of it) must never
/// hold: an element that runs or loads anything, an event handler, a
/// link out of the page.
fn runs_and_loads_nothing(html: &str) {
    for (name, attrs) in tags(html) {
        assert!(
            [
                "html",
                "head",
                "meta",
                "title",
                "style",
                "body",
                "header",
                "h1",
                "h2",
                "h3",
                "h4",
                "h5",
                "h6",
                "dl",
                "dt",
                "dd",
                "nav",
                "main",
                "section",
                "div",
                "p",
                "a",
                "span",
                "strong",
                "em",
                "del",
                "code",
                "pre",
                "details",
                "summary",
                "ul",
                "ol",
                "li",
                "blockquote",
                "hr",
                "br",
                "table",
                "thead",
                "tbody",
                "tr",
                "th",
                "td",
            ]
            .contains(&name.as_str()),
            "element <{name}> in the page"
        );
        for (key, value) in attrs {
            assert!(!key.starts_with("on"), "<{name} {key}=…> in the page");
            assert!(key != "src" && key != "srcset", "<{name} {key}=…>");
            if key == "href" {
                assert!(value.starts_with('#'), "<{name} href={value:?}>");
            }
            if key == "style" {
                panic!("<{name} style=…>: style is the page's own only");
            }
        }
    }
}

const HOSTILE: &str = "Done. <script>document.title='pwned'</script> \
<img src=x onerror=document.title=1> [click me](javascript:document.title=2) \
\u{1b}]0;osc-title\u{7} and `code`.\n\n```rust\nfn main() { println!(\"<b>hi</b>\"); }\n```\n";

/// A session that writes a file, answers with a hostile message, and a
/// fork of it with an answer of its own: its id, and the page's path.
fn session_with_a_fork(p: &Project) -> (String, PathBuf) {
    let mock = Mock::start(json!([
        {"content": "Writing it.", "tool_calls": [call("write_file", json!({"path": "hello.txt", "content": "hello from the diff line\n"}))]},
        {"content": HOSTILE},
        {"content": "A forked answer."},
        {"content": "A sibling's answer."},
    ]));
    let run = p.run(
        Some(&mock),
        &[
            "--access",
            "auto",
            "-p",
            "write the greeting file <img src=x onerror=document.title=3>",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let log: Value =
        serde_json::from_str(&p.run(None, &["sessions", "log", &sid, "--json"]).stdout).unwrap();
    let answer = log
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["record"] == "answer")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let fork = p.run(
        Some(&mock),
        &[
            "resume",
            &sid,
            "--at",
            &answer[..12],
            "-p",
            "a forked question",
        ],
    );
    assert_eq!(fork.code, 0, "{}", fork.stderr);
    assert_ne!(fork.session(), sid);
    // A second fork at the same answer: the first fork's sibling, not its
    // fork.
    let sibling = p.run(
        Some(&mock),
        &[
            "resume",
            &sid,
            "--at",
            &answer[..12],
            "-p",
            "a sibling question",
        ],
    );
    assert_eq!(sibling.code, 0, "{}", sibling.stderr);
    let of_fork = p.run(
        None,
        &["sessions", "export", &fork.session(), "--format", "html"],
    );
    assert_eq!(of_fork.code, 0, "{}", of_fork.stderr);
    assert!(of_fork.stdout.contains("a forked question"));
    assert!(!of_fork.stdout.contains("a sibling question"));
    assert!(!of_fork.stdout.contains("class=\"fork\""));
    let page = p.path().join("page.html");
    let export = p.run(
        None,
        &[
            "sessions",
            "export",
            &sid[..8],
            "--format",
            "html",
            "-o",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(export.code, 0, "{}", export.stderr);
    assert_eq!(export.stdout, "");
    (sid, page)
}

#[test]
fn the_page_in_a_browser_shows_the_session_and_runs_nothing_of_it() {
    let p = Project::new();
    let (sid, page) = session_with_a_fork(&p);
    let html = std::fs::read_to_string(&page).unwrap();

    // The file: self-contained, a policy forbidding scripts and loads,
    // every text escaped, no terminal control.
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    let csp = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';";
    assert!(html.contains(csp), "{html}");
    assert!(html.contains("script-src 'none'"), "{html}");
    // The check sees what it must refuse.
    for bad in [
        "<p><img src=x></p>",
        "<p onclick=\"x\">",
        "<a href=\"javascript:x\">",
        "<script>x</script>",
    ] {
        assert!(std::panic::catch_unwind(|| runs_and_loads_nothing(bad)).is_err());
    }
    runs_and_loads_nothing(&html);
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "{html}"
    );
    assert!(
        html.contains("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;"),
        "{html}"
    );
    assert!(html.contains("&lt;img src=x onerror=document.title=1&gt;"));
    assert!(html.contains("(javascript:document.title=2)"), "{html}");
    assert!(html.contains("^[]0;osc-title^G"), "{html}");
    assert!(!html.bytes().any(|b| b < 0x20 && b != b'\n'), "{html}");
    // Tokens per answer, the diff, the fork linked both ways.
    assert!(html.contains(" tokens in · "), "{html}");
    assert!(html.contains("<span class=\"add\">+hello from the diff line\n</span>"));
    assert!(html.contains("<a href=\"#f1\">fork "), "{html}");
    assert!(
        html.contains("<section class=\"fork\" id=\"f1\">"),
        "{html}"
    );
    assert!(html.contains("Forked from <a href=\"#a1\">"), "{html}");
    assert!(html.contains("a forked question") && html.contains("A forked answer."));
    assert!(
        html.contains("<section class=\"fork\" id=\"f2\">"),
        "{html}"
    );
    assert!(
        html.contains("Forked here: <a href=\"#f1\">fork "),
        "{html}"
    );
    assert!(html.contains("a sibling question"), "{html}");
    // Small: the style and the colours of the code, nothing more.
    assert!(html.len() < 32 * 1024, "{} bytes", html.len());

    let Some(browser) = chromium() else { return };
    let dom = dump_dom(&browser, &page);
    // What the page shows.
    assert!(dom.contains("write the greeting file"), "{dom}");
    assert!(dom.contains("write_file"), "{dom}");
    assert!(dom.contains("+hello from the diff line"), "{dom}");
    assert!(dom.contains("a forked question"), "{dom}");
    // The hostile message is text: no element of it, the title a script
    // would have changed is the page's own, the escape shown.
    assert!(tags(&dom).iter().any(|(name, _)| name == "details"));
    runs_and_loads_nothing(&dom);
    assert!(
        dom.contains(&format!("<title>hel session {}</title>", &sid[..8])),
        "{dom}"
    );
    assert!(
        dom.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;"),
        "{dom}"
    );
    assert!(dom.contains("&lt;img src=x onerror=document.title=1&gt;"));
    assert!(dom.contains("&lt;img src=x onerror=document.title=3&gt;"));
    assert!(dom.contains("(javascript:document.title=2)"), "{dom}");
    assert!(dom.contains("^[]0;osc-title^G"), "{dom}");
    assert!(!dom.contains('\u{1b}'), "{dom}");
}

// A made-up value of a real format, assembled so that this file is not
// itself a finding.
fn gh_token() -> String {
    format!("ghp_{}", "R8t3xQ9vLmN2pK7wZ4yB6cD1eF5gH0jA9sUq")
}

/// A line of a recorded file that the detector of the export calls a
/// secret (here a value of the environment the session did not have) is
/// masked in the page's diff, unless --allow-secrets.
#[test]
fn a_secret_in_a_diff_is_masked() {
    let p = Project::new();
    let value = "correcthorsebatterystaple42";
    p.write("notes.txt", &format!("alpha\nmagic word {value}\ngamma\n"));
    let mock = Mock::start(json!([
        {"tool_calls": [call("search_replace", json!({"path": "notes.txt", "search": "gamma", "replace": "delta"}))]},
        {"content": "Replaced."},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "gamma to delta"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let export = |allow: bool| {
        let mut cmd = p.hel(None);
        cmd.env("DEPLOY_TOKEN", value)
            .args(["sessions", "export", &sid, "--format", "html"]);
        if allow {
            cmd.arg("--allow-secrets");
        }
        Run::from_cmd(&mut cmd)
    };
    let masked = export(false);
    assert_eq!(masked.code, 0, "{}", masked.stderr);
    assert!(masked.stdout.contains("+delta"), "{}", masked.stdout);
    assert!(
        masked.stdout.contains(" magic word ‹secret›"),
        "{}",
        masked.stdout
    );
    assert!(!masked.stdout.contains(value), "{}", masked.stdout);
    let allowed = export(true);
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
    assert!(allowed.stdout.contains(&format!(" magic word {value}")));
}

#[test]
fn a_secret_in_a_fork_refuses_the_page_unless_allowed() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "Hello."}]));
    let run = p.run(Some(&mock), &["-p", "hi"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    // A fork stored before redaction: its answer holds the token.
    let store = Store::open(&p.path()).unwrap();
    let head = store.head(&sid.parse().unwrap()).unwrap();
    let mut msgs = store.load(&head).unwrap().messages;
    let (lease, _, _) = store.fork(&head).unwrap();
    let mut state = store.record_state(&lease).unwrap();
    msgs.push(json!({"role": "user", "content": "the token?"}));
    msgs.push(json!({"role": "assistant", "content": format!("It is {}.", gh_token())}));
    let leaves: Vec<Option<Leaf>> = vec![None; msgs.len()];
    let input = CommitInput::new(
        Record::Answer,
        &msgs,
        &leaves,
        &p.path().display().to_string(),
        SessionRecord::of(RequestConfig::bare("test", "")),
    )
    .instruction("the token?")
    .why("test")
    .spill(vec![]);
    store.commit(&lease, &mut state, input).unwrap();
    let fork = lease.session().to_string();
    drop(lease);

    let page = p.path().join("page.html");
    let out = page.to_str().unwrap();
    let refused = p.run(
        None,
        &["sessions", "export", &sid, "--format", "html", "-o", out],
    );
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(!page.exists());
    let line = refused.stderr.lines().find(|l| l.contains("github-pat"));
    assert!(
        line.is_some_and(|l| l.contains(&fork[..8])),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains(&gh_token()), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--allow-secrets"),
        "{}",
        refused.stderr
    );
    let allowed = p.run(
        None,
        &[
            "sessions",
            "export",
            &sid,
            "--format",
            "html",
            "-o",
            out,
            "--allow-secrets",
        ],
    );
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(&gh_token()) && html.contains("id=\"f1\""),
        "{html}"
    );
}

/// The size of the page of a session of 200 messages and more: ten
/// instructions of nine file writes each and a Markdown answer with code.
#[test]
fn the_page_of_a_200_message_session() {
    let p = Project::new();
    let mut script = Vec::new();
    let mut args: Vec<String> = vec!["--access".into(), "auto".into()];
    for i in 0..10 {
        for j in 0..9 {
            let content: String = (0..20)
                .map(|k| format!("line {k} of file {i}.{j}\n"))
                .collect();
            script.push(json!({"tool_calls": [call("write_file", json!({"path": format!("src/f{i}_{j}.txt"), "content": content}))]}));
        }
        script.push(json!({"content": format!(
            "Instruction {i} is done: **nine files** written.\n\n```rust\nfn answer_{i}() -> u32 {{ {i} }}\n```\n\n- one\n- two\n"
        )}));
        args.push("-p".into());
        args.push(format!("write the nine files of step {i}"));
    }
    let mock = Mock::start(Value::Array(script));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = p.run(Some(&mock), &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let messages = p.run(None, &["sessions", "export", &sid, "--format", "json"]);
    let messages: Vec<Value> = serde_json::from_str(&messages.stdout).unwrap();
    assert!(messages.len() >= 200, "{}", messages.len());
    let page = p.run(None, &["sessions", "export", &sid, "--format", "html"]);
    assert_eq!(page.code, 0, "{}", page.stderr);
    let html = &page.stdout;
    assert_eq!(html.matches("<section class=\"answer\"").count(), 10);
    assert_eq!(html.matches("<details class=\"tool\">").count(), 90);
    assert_eq!(html.matches("<div class=\"file\">A src/f").count(), 90);
    runs_and_loads_nothing(html);
    eprintln!(
        "the page of a {}-message session: {} bytes",
        messages.len(),
        html.len()
    );
    assert!(html.len() < 1024 * 1024, "{} bytes", html.len());
}
