//! Every kind of secret end to end, in one session: one labelled example
//! of each of gitleaks' rules (tests/fixtures/secrets, see its
//! PROVENANCE.md), a value of the user's environment, a private key
//! block, a JWT, a URL with a password and a dotenv value. A tool reads
//! them (read_file and `cat`): no value is under `.hel/` (every object
//! decompressed), in a request to the model, the `--record` files, the
//! stream-json output, an export (md, json, bundle) or a remote (a
//! directory, and the loopback S3 server when there is one); the model
//! writes them back by handle and the files hold the values; a resume
//! sends handles only. And the bounds: a 64 MiB tool result is scanned in
//! bounded memory, and a handle hel does not hold is never substituted.

use std::io::{Read, Write};
use std::path::Path;

use serde_json::{json, Value};

use crate::common::*;
use crate::t_secrets::{held, leaks_in, leaks_under};

/// The environment variable whose value the session's text holds.
const ENV_NAME: &str = "DEPLOY_TOKEN";

/// The project's files and every value they hold (a private key's body
/// lines each count as one too: none of them may leak alone).
struct Corpus {
    files: Vec<(&'static str, String)>,
    values: Vec<String>,
    env_value: String,
}

/// A line-per-example file of gitleaks' labelled true positives, the
/// first of each rule (but gcp-service-account's, a marker with no
/// secret in it, the detector's one miss), and the other kinds in a
/// dotenv file, a PEM file and a text file. Made-up values are assembled
/// so that this file is not itself a finding.
fn corpus() -> Corpus {
    let detector = hel_secrets::Detector::new(Vec::<(String, String)>::new());
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/secrets/gitleaks-true-positives.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let mut rules: Vec<String> = Vec::new();
    let mut examples = String::new();
    let mut values = Vec::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let rule = v["rule"].as_str().unwrap().to_owned();
        if rule == "gcp-service-account" || rules.contains(&rule) {
            continue;
        }
        let example = v["text"].as_str().unwrap();
        let found = detector.detect(example);
        assert!(!found.is_empty(), "{rule}: {example}");
        values.extend(found.into_iter().map(|f| example[f.range].to_owned()));
        examples.push_str(example);
        examples.push_str("\n\n");
        rules.push(rule);
    }
    assert_eq!(rules.len(), 36, "{rules:?}");

    let env_value = format!("tulip-harbor-{}-quartz", 4417);
    let password = format!("Vq7Lr2x{}", "N9pKs4TzW");
    let dotenv = format!("Zr8Kq2Lm5{}", "Nw9Xt3Vb6Yc1Pd4");
    let env = format!(
        "# deploys with {env_value}\nDATABASE_URL=postgres://app:{password}@db.internal:5432/app\nSESSION_SECRET={dotenv}\nREGION=eu-west-1\n"
    );
    let body: Vec<String> = (0..24).map(key_line).collect();
    let pem = format!(
        "-----BEGIN RSA {k}-----\n{}\n-----END RSA {k}-----\n",
        body.join("\n"),
        k = "PRIVATE KEY"
    );
    let jwt = [
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
        "eyJzdWIiOiI0MjQyNDIiLCJuYW1lIjoiSGVsIFRlc3QiLCJpYXQiOjE3NjUxNTIwMDB9",
        "k3Vd9QmZ2xT7pL4sRw8YhN1cJbF6gE0aU5oI2yXqMvA",
    ]
    .join(".");
    let notes = format!("The service answers with a session token:\n{jwt}\nthen expires it.\n");
    values.extend([env_value.clone(), password, dotenv, jwt]);
    values.push(pem.trim_end().to_owned());
    values.extend(body);
    values.sort();
    values.dedup();
    Corpus {
        files: vec![
            (".env", env),
            ("key.pem", pem),
            ("notes.txt", notes),
            ("secrets.txt", examples),
        ],
        values,
        env_value,
    }
}

/// Line `i` of a made-up key body: 64 base64 characters (an LCG's).
fn key_line(i: u64) -> String {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..64)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            B64[(x >> 58) as usize] as char
        })
        .collect()
}

fn ok(run: &Run, what: &str) {
    assert_eq!(run.code, 0, "{what}: {}\n{}", run.stdout, run.stderr);
}

#[test]
fn every_kind_of_secret_reaches_nothing_but_the_tools() {
    let c = corpus();
    let p = Project::new();
    for (name, text) in &c.files {
        p.write(name, text);
    }
    // The model reads every file (all with `cat`, each with read_file)
    // and writes each back by copying what it read, handles and all: the
    // newest result is the read it copies.
    let names: Vec<&str> = c.files.iter().map(|(n, _)| *n).collect();
    let mut script = vec![json!({"tool_calls": [
        call("bash", json!({"command": format!("cat {}", names.join(" "))})),
        call("read_file", json!({"path": names[0]})),
    ]})];
    for (i, name) in names.iter().enumerate() {
        let mut calls = vec![call(
            "write_file",
            json!({"path": format!("copy/{name}"), "content": "{{result}}"}),
        )];
        match names.get(i + 1) {
            Some(next) => calls.push(call("read_file", json!({"path": next}))),
            // A handle of a kind it read, numbered as none is.
            None => calls.push(call(
                "bash",
                json!({"command": "echo ‹secret:aws-access-token:999› > invented.txt"}),
            )),
        }
        script.push(json!({ "tool_calls": calls }));
    }
    script.push(json!({"content": "done"}));
    let mock = Mock::start(Value::Array(script));
    let rec = p.home.path().join("rec");
    let run = Run::from_cmd(p.hel(Some(&mock)).env(ENV_NAME, &c.env_value).args([
        "--access",
        "auto",
        "--record",
        rec.to_str().unwrap(),
        "--output-format",
        "stream-json",
        "-p",
        "copy the project's settings",
    ]));
    ok(&run, "the session");
    let all = &c.values;
    let none = Vec::<&str>::new();

    // The files written by handle hold the values, byte for byte.
    for (name, text) in &c.files {
        assert_eq!(&p.read(&format!("copy/{name}")), text, "copy/{name}");
    }
    // The model read handles only, in every request.
    let requests = mock.requests();
    assert_eq!(requests.len(), names.len() + 2);
    for (i, r) in requests.iter().enumerate() {
        let body = serde_json::to_vec(r).unwrap();
        assert_eq!(held(&body, all), none, "request {i}");
    }
    let first = tool_results(&mock, 1);
    assert!(first[0].starts_with("exit=0"), "{}", first[0]);
    let handles = hel_secrets::Redactor::handles_in(&first[0]).len();
    eprintln!("{} values, {handles} handles in the `cat`", c.values.len());
    assert!(handles >= 40, "{handles}: {}", first[0]);
    // The invented handle failed the call in one line; nothing ran.
    let last = tool_results(&mock, names.len() + 1);
    assert_eq!(
        last.last().unwrap(),
        "error: hel holds no secret for ‹secret:aws-access-token:999›: read the file or run the command it came from again, and use the handle that gives"
    );
    assert!(!p.path().join("invented.txt").exists());

    // stdout (stream-json), stderr, the record, the store.
    assert_eq!(held(run.stdout.as_bytes(), all), none, "stream-json");
    assert!(run.stdout.contains("‹secret:"), "{}", run.stdout);
    assert_eq!(held(run.stderr.as_bytes(), all), none, "stderr");
    let recorded = hel_store::testing::files_under(&rec);
    assert!(!recorded.is_empty());
    for (path, bytes) in recorded {
        assert_eq!(held(&bytes, all), none, "{}", path.display());
    }
    assert_eq!(
        leaks_under(&p.path().join(".hel"), all),
        Vec::<String>::new()
    );
    // hel's own scan agrees: nothing to find.
    let scan = p.run(None, &["sessions", "scan"]);
    ok(&scan, "scan");
    assert!(scan.stdout.starts_with("0 secrets"), "{}", scan.stdout);

    // Every export, refused nothing (there is nothing to refuse).
    let sid = run.session();
    for format in ["md", "json"] {
        let out = p.run(None, &["sessions", "export", &sid, "--format", format]);
        ok(&out, format);
        assert_eq!(held(out.stdout.as_bytes(), all), none, "{format}");
        assert!(out.stdout.contains("‹secret:"), "{format}");
    }
    let bundle = p.home.path().join("s.helbundle");
    let out = p.run(
        None,
        &[
            "sessions",
            "export",
            &sid,
            "--bundle",
            bundle.to_str().unwrap(),
        ],
    );
    ok(&out, "bundle");
    let (leaks, frames) = leaks_in("bundle", &std::fs::read(&bundle).unwrap(), all);
    assert_eq!(leaks, Vec::<String>::new());
    assert!(frames > 0, "the bundle's objects were read");

    // A resume sends the handles, never a value: it holds none.
    let again = Mock::start(json!([
        {"tool_calls": [call("write_file", json!({"path": "copy/again.txt", "content": "‹secret:session-secret:1›"}))]},
        {"content": "ok"},
    ]));
    let resumed = p.run(
        Some(&again),
        &["--access", "auto", "resume", &sid, "-p", "once more"],
    );
    ok(&resumed, "resume");
    let body = serde_json::to_vec(&again.requests()).unwrap();
    assert_eq!(held(&body, all), none, "the resumed requests");
    assert!(
        String::from_utf8_lossy(&body).contains("‹secret:"),
        "the handles are in the history sent"
    );
    let r = tool_results(&again, 1);
    let r = r.last().unwrap();
    assert!(
        r.starts_with("error: hel holds no secret for ‹secret:session-secret:1›"),
        "{r}"
    );
    assert!(!p.path().join("copy/again.txt").exists());

    // Pushed: to a directory, and to the loopback S3 server.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    ok(
        &p.run(None, &["remote", "add", "shared", &url]),
        "remote add",
    );
    let push = p.run(None, &["push", "--remote", "shared"]);
    ok(&push, "push");
    assert_eq!(leaks_under(dir.path(), all), Vec::<String>::new());
    if let Some(s3) = S3::from_env() {
        let prefix = format!("corpus-{}", std::process::id());
        let url = format!("s3://{}/{prefix}", s3.bucket);
        let add = Run::from_cmd(s3.env(&mut p.hel(None)).args([
            "remote",
            "add",
            "s3",
            &url,
            "--endpoint",
            &s3.endpoint,
            "--region",
            "us-east-1",
        ]));
        ok(&add, "remote add s3");
        let push = Run::from_cmd(s3.env(&mut p.hel(None)).args(["push", "--remote", "s3"]));
        ok(&push, "push s3");
        let keys = s3.list(&prefix);
        assert!(keys.len() > 2, "{keys:?}");
        let mut frames = 0;
        for key in keys {
            let (leaks, n) = leaks_in(&key, &s3.get(&key), all);
            assert_eq!(leaks, Vec::<String>::new());
            frames += n;
        }
        assert!(frames > 0, "the pack records were read");
    }
}

/// A command printing 64 MiB, a secret at its start, middle and end: the
/// result is the first part that the output limit keeps, scanned whole,
/// in bounded memory; no value is stored or sent. A handle hel does not
/// hold (one it never gave, one of another run) is never substituted.
#[test]
fn a_64_mib_result_is_scanned_in_bounded_memory_and_invented_handles_fail() {
    let token = format!("ghp_{}", "R8t3xQ9vLmN2pK7wZ4yB6cD1eF5gH0jA9sUq");
    let key = format!("{}/{}", "wJalrXUtnFEMI/K7MDENG", "bPxRfiCYzKq8ZQhTq3Wx");
    let id = format!("AKIA{}", "QYLPMN5HHHFPZAM2");
    let all = [token.clone(), key.clone(), id.clone()];
    // The command holds the values rot13'd (the model's own text is
    // stored as it wrote it): they exist only in the command's output.
    let half = "yes 'lorem ipsum dolor sit amet, consectetur adipiscing' | head -c 33554432";
    let command = format!(
        "r() {{ echo \"$1\" | tr 'A-Za-z' 'N-ZA-Mn-za-m'; }}; echo \"GITHUB_TOKEN=$(r {})\"; {half}; echo; echo \"AWS_SECRET_ACCESS_KEY=$(r {})\"; {half}; echo; echo \"id $(r {})\"",
        rot13(&token),
        rot13(&key),
        rot13(&id)
    );
    let p = Project::new();
    let mock = Mock::start(json!([
        {"tool_calls": [call("bash", json!({"command": command}))]},
        {"tool_calls": [
            call("bash", json!({"command": "echo ‹secret:aws-access-token:9› > invented.txt"})),
            call("write_file", json!({"path": "invented.txt", "content": "‹secret:github-pat:2›"})),
        ]},
        {"content": "done"},
    ]));
    let m = run_measured(
        p.hel(Some(&mock))
            .args(["--access", "auto", "-p", "print it"]),
    );
    eprintln!(
        "peak RSS of hel over a 64 MiB result: {} KiB",
        m.max_rss_kib
    );
    ok(&m.run, "the session");
    // The output limit keeps 8 MiB (about 75 MiB at the peak, measured):
    // the 64 MiB held whole twice, as text and as its scan's copy, would
    // pass this.
    assert!(m.max_rss_kib < 128 * 1024, "peak RSS {} KiB", m.max_rss_kib);
    // Too large for the conversation, the result is spilled (redacted):
    // the model is shown its start.
    let r = tool_results(&mock, 1);
    assert!(
        r[0].contains("exit=0") && r[0].contains("GITHUB_TOKEN=‹secret:github-pat:1›"),
        "{}",
        &r[0][..r[0].len().min(400)]
    );
    for (i, req) in mock.requests().iter().enumerate() {
        let body = serde_json::to_vec(req).unwrap();
        assert_eq!(held(&body, &all), Vec::<&str>::new(), "request {i}");
    }
    assert_eq!(
        leaks_under(&p.path().join(".hel"), &all),
        Vec::<String>::new()
    );
    // Invented: a kind and number hel never gave; one of another run
    // (github-pat:2 is not this run's): each call fails in the one line,
    // and nothing was run or written.
    let r = tool_results(&mock, 2);
    let r = &r[r.len() - 2..];
    for (result, handle) in r
        .iter()
        .zip(["‹secret:aws-access-token:9›", "‹secret:github-pat:2›"])
    {
        assert_eq!(
            result,
            &format!("error: hel holds no secret for {handle}: read the file or run the command it came from again, and use the handle that gives")
        );
    }
    assert!(!p.path().join("invented.txt").exists());
}

fn rot13(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'a'..='z' => (((c as u8 - b'a') + 13) % 26 + b'a') as char,
            'A'..='Z' => (((c as u8 - b'A') + 13) % 26 + b'A') as char,
            c => c,
        })
        .collect()
}

/// The loopback S3 server tools/test starts (see t_remote.rs), read with
/// plain HTTP (moto does not check signatures): None, and the remote part of
/// the test skipped, when `HEL_SKIP_S3` is set and there is none.
struct S3 {
    endpoint: String,
    bucket: String,
}

impl S3 {
    fn from_env() -> Option<S3> {
        match std::env::var("HEL_TEST_S3_ENDPOINT") {
            Ok(endpoint) => Some(S3 {
                endpoint,
                bucket: std::env::var("HEL_TEST_S3_BUCKET").unwrap_or_else(|_| "hel-test".into()),
            }),
            Err(_) if std::env::var_os("HEL_SKIP_S3").is_some() => {
                eprintln!("skipped the S3 push: HEL_SKIP_S3 is set and no loopback S3 server was started");
                None
            }
            Err(_) => panic!(
                "no loopback S3 server: run the tests through tools/test (it starts one), or set HEL_SKIP_S3=1 to skip this test"
            ),
        }
    }

    /// `cmd` with the server's credentials.
    fn env<'a>(&self, cmd: &'a mut std::process::Command) -> &'a mut std::process::Command {
        for k in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"] {
            if let Ok(v) = std::env::var(k) {
                cmd.env(k, v);
            }
        }
        cmd
    }

    /// The keys under `prefix`.
    fn list(&self, prefix: &str) -> Vec<String> {
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut path = format!("/{}?list-type=2&prefix={}", self.bucket, escape(prefix));
            if let Some(t) = &token {
                path.push_str(&format!("&continuation-token={}", escape(t)));
            }
            let body = String::from_utf8(self.http(&path)).unwrap();
            keys.extend(tags(&body, "Key").into_iter().map(unescape_xml));
            token = tags(&body, "NextContinuationToken")
                .into_iter()
                .next()
                .map(unescape_xml);
            if token.is_none() {
                return keys;
            }
        }
    }

    fn get(&self, key: &str) -> Vec<u8> {
        self.http(&format!("/{}/{}", self.bucket, escape_path(key)))
    }

    /// A GET of `path`: the body of a 200 answer.
    fn http(&self, path: &str) -> Vec<u8> {
        let host = self
            .endpoint
            .trim_start_matches("http://")
            .trim_end_matches('/');
        let mut s = std::net::TcpStream::connect(host).unwrap();
        // The server checks whose a request is, not its signature: a
        // request unsigned is anonymous, and may not read the objects.
        let user = std::env::var("AWS_ACCESS_KEY_ID").unwrap_or_else(|_| "hel-test".into());
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: AWS4-HMAC-SHA256 Credential={user}/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        let at = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&all[..at]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{path}: {head}");
        let body = &all[at + 4..];
        if head.contains("transfer-encoding: chunked") {
            dechunk(body)
        } else {
            body.to_vec()
        }
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = std::str::from_utf8(&b[..eol]).unwrap();
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[eol + 2 + size + 2..];
    }
}

fn tags<'a>(xml: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    xml.split(&open)
        .skip(1)
        .filter_map(|s| s.split(&close).next())
        .collect()
}

fn unescape_xml(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

fn escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn escape_path(s: &str) -> String {
    s.split('/').map(escape).collect::<Vec<_>>().join("/")
}

/// A secret cut by an edge: a private key across two read_file pages is
/// a handle in both (each page is scanned with what is around it), and
/// one the output limit cuts (the kept 8 MiB end inside it) is a handle
/// too (a key's first lines are a finding). No line of it is stored or
/// sent.
#[test]
fn a_key_cut_by_a_page_or_the_output_limit_is_redacted() {
    let body: Vec<String> = (100..124).map(key_line).collect();
    let key = format!(
        "-----BEGIN RSA {k}-----\n{}\n-----END RSA {k}-----\n",
        body.join("\n"),
        k = "PRIVATE KEY"
    );
    // The first page (10,000 bytes, whole lines) ends inside the key.
    let filler = "lorem ipsum dolor sit amet, consectetur adipiscing elit.\n".repeat(165);
    assert!(filler.len() < 10_000 && filler.len() + key.len() > 10_000);
    let p = Project::new();
    p.write("big.txt", &format!("{filler}{key}the end\n"));
    p.write("key.pem", &key);
    // 8 MiB less 600 bytes of filler, then the key: the output limit
    // (8 MiB) keeps its first 600 bytes.
    let cut = "head -c 8388008 /dev/zero | tr '\\0' 'x'; cat key.pem";
    let mock = Mock::start(json!([
        {"tool_calls": [call("read_file", json!({"path": "big.txt"}))]},
        {"tool_calls": [call("read_file", json!({"cursor": "{{cursor}}"}))]},
        {"tool_calls": [call("bash", json!({"command": cut}))]},
        {"content": "done"},
    ]));
    let run = p.run(Some(&mock), &["--access", "auto", "-p", "read big.txt"]);
    ok(&run, "the session");
    let r = tool_results(&mock, 2);
    let (first, second) = (&r[0], &r[1]);
    let handle = "‹secret:private-key:1›";
    assert!(
        first.contains(&format!("{handle}\n[Read truncated.")),
        "{}",
        &first[first.len().saturating_sub(300)..]
    );
    assert!(
        second.starts_with(&format!("{handle}\nthe end")),
        "{second}"
    );
    let r = tool_results(&mock, 3);
    assert!(
        r[2].contains("not kept"),
        "{}",
        &r[2][..r[2].len().min(600)]
    );
    let mut all = body;
    all.push(key.trim_end().to_owned());
    let none = Vec::<&str>::new();
    for (i, req) in mock.requests().iter().enumerate() {
        let body = serde_json::to_vec(req).unwrap();
        assert_eq!(held(&body, &all), none, "request {i}");
    }
    assert_eq!(
        leaks_under(&p.path().join(".hel"), &all),
        Vec::<String>::new()
    );
}
