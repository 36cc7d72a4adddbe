use std::sync::Arc;

use super::*;

// Made-up values of real formats (assembled, so that this file is not
// itself a finding of scanners that read it).
fn aws_id() -> String {
    format!("AKIA{}", "QYLPMN5HHHFPZAM2")
}
fn aws_secret() -> String {
    format!("{}/{}", "wJalrXUtnFEMI/K7MDENG", "bPxRfiCYzKq8ZQhTq3Wx")
}
fn gh_token() -> String {
    format!("ghp_{}", "R8t3xQ9vLmN2pK7wZ4yB6cD1eF5gH0jA9sUq")
}

fn kinds(text: &str, d: &Detector) -> Vec<(String, String)> {
    d.detect(text)
        .into_iter()
        .map(|f| (f.kind, text[f.range].to_owned()))
        .collect()
}

#[test]
fn token_formats_and_assignments_are_found() {
    let d = Detector::new(Vec::<(String, String)>::new());
    let env = format!(
        "AWS_ACCESS_KEY_ID={}\nAWS_SECRET_ACCESS_KEY={}\nGITHUB_TOKEN={}\nDEBUG=true\n",
        aws_id(),
        aws_secret(),
        gh_token()
    );
    let found = kinds(&env, &d);
    let values: Vec<&str> = found.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(values, [aws_id(), aws_secret(), gh_token()], "{found:?}");
    assert_eq!(found[0].0, "aws-access-token");
    assert_eq!(found[2].0, "github-pat");
    // YAML, JSON, TOML and shell assignments of random-looking values.
    for text in [
        "db:\n  password: Xk29fPq81LzT\n",
        "{\"client_secret\": \"q8Z2mN5vB1xC7kL0\"}",
        "[auth]\napi_key = \"9f8e7d6c5b4a39281706\"\n",
        "export SMTP_PASS='h7G#kL2p!Qz9'\n",
    ] {
        assert_eq!(d.detect(text).len(), 1, "{text}: {:?}", kinds(text, &d));
    }
    // Not secrets: references, placeholders, words, code, plain names.
    for text in [
        "API_KEY=${API_KEY}\n",
        "password: changeme\n",
        "token = os.environ.get(\"TOKEN\")\n",
        "let key = SecretKey::from_bytes(&bytes);\n",
        "AWS_REGION=eu-west-1\n",
        "max_tokens: 4096\n",
        "password = <your-password-here>\n",
        "GITHUB_TOKEN=‹secret:github-pat:3›\n",
    ] {
        assert!(d.detect(text).is_empty(), "{text}: {:?}", kinds(text, &d));
    }
}

#[test]
fn environment_values_are_found_wherever_they_are() {
    // The caller chooses the variables; values too short to be a secret
    // and absolute paths are left out.
    let d = Detector::new([
        ("MY_SERVICE_PASSWORD", "correct horse battery"),
        ("SHORT_TOKEN", "abc"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "/home/someone/key.json"),
        ("OTHER", "plain value here"),
    ]);
    let text = "said: correct horse battery, at /home/someone/key.json abc; plain value here";
    let found = kinds(text, &d);
    assert_eq!(
        found,
        [
            (
                "my-service-password".to_owned(),
                "correct horse battery".to_owned()
            ),
            ("other".to_owned(), "plain value here".to_owned()),
        ]
    );
}

#[test]
fn a_secret_across_a_chunk_boundary_is_found_once() {
    let d = Detector::new(Vec::<(String, String)>::new());
    for at in [CHUNK - OVERLAP - 10, CHUNK - 10, CHUNK - 1, CHUNK + 5] {
        for newlines in [true, false] {
            let filler = if newlines { "ab cd ef\n" } else { "abcdefgh " };
            let mut text: String = filler.repeat(at / filler.len() + 1);
            text.truncate(at);
            text.push_str(&gh_token());
            text.push_str(&filler.repeat(CHUNK / filler.len()));
            let found = d.detect(&text);
            assert_eq!(found.len(), 1, "at {at}");
            assert_eq!(&text[found[0].range.clone()], gh_token());
        }
    }
}

#[test]
fn findings_are_on_character_boundaries() {
    let d = Detector::new([("X_TOKEN", "é-secret-é")]);
    let text = "aé-secret-éb";
    let found = d.detect(text);
    assert_eq!(found.len(), 1);
    assert_eq!(&text[found[0].range.clone()], "é-secret-é");
}

#[test]
fn the_same_value_gets_the_same_handle_and_back() {
    let d = Arc::new(Detector::new([("GITHUB_TOKEN", gh_token())]));
    let mut r = Redactor::new(d);
    let text = format!(
        "GITHUB_TOKEN={}\nAWS_SECRET_ACCESS_KEY={}\nagain {}\n",
        gh_token(),
        aws_secret(),
        gh_token()
    );
    let red = r.redact(&text).into_owned();
    assert_eq!(
        red,
        "GITHUB_TOKEN=‹secret:github-token:1›\nAWS_SECRET_ACCESS_KEY=‹secret:aws-secret-access-key:2›\nagain ‹secret:github-token:1›\n"
    );
    assert_eq!(r.len(), 2);
    // Redacting what is redacted changes nothing; a value held is found
    // even where no rule would find it.
    assert_eq!(r.redact(&red), red);
    let bare = format!("x{}x", aws_secret());
    assert_eq!(r.redact(&bare), "x‹secret:aws-secret-access-key:2›x");
    // Neither shows a value when debugged.
    assert_eq!(format!("{r:?}"), "Redactor { values: 2, .. }");
    assert!(!format!("{:?}", r.detector()).contains(&gh_token()));
    // Back: the values; an invented handle is refused, naming it.
    assert_eq!(r.substitute(&red).unwrap(), text);
    let invented = "echo ‹secret:github-token:7›";
    let e = r.substitute(invented).unwrap_err();
    assert_eq!(e.0, "‹secret:github-token:7›");
    assert!(e.to_string().contains("read the file or run the command"));
    // Other shapes are not handles: left as they are.
    for plain in ["‹secret:›", "‹secret:UPPER:1›", "‹secret:x:›", "no handle"] {
        assert_eq!(r.substitute(plain).unwrap(), plain);
    }
    assert_eq!(
        Redactor::handles_in(&red),
        [
            "‹secret:github-token:1›",
            "‹secret:aws-secret-access-key:2›",
            "‹secret:github-token:1›"
        ]
    );
}

#[test]
fn private_key_blocks_and_urls_with_passwords() {
    let d = Detector::new(Vec::<(String, String)>::new());
    let body: String = (0..20)
        .map(|i| format!("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC{i:02}x7\n"))
        .collect();
    let pem = format!("-----BEGIN PRIVATE KEY-----\n{body}-----END PRIVATE KEY-----\n");
    let found = kinds(&pem, &d);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "private-key");
}

/// The scan's cost: a 16 MiB text of code-like lines with keywords in
/// every chunk. Prints MiB/s (no threshold: the figure is for the
/// record).
#[test]
fn scan_cost_per_mib() {
    let d = Detector::new([("GITHUB_TOKEN", gh_token())]);
    let line = "let token_count = config.max_tokens + key.len(); // password check\n";
    let mut text = line.repeat((16 << 20) / line.len());
    text.push_str(&gh_token());
    let t = std::time::Instant::now();
    let found = d.detect(&text);
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(found.len(), 1);
    eprintln!(
        "scanned {} MiB in {secs:.2} s: {:.1} MiB/s",
        text.len() >> 20,
        (text.len() as f64 / (1 << 20) as f64) / secs
    );
}

/// A page cut through a secret: found whole in the page and what is
/// around it, its part in the page becomes the whole value's handle.
#[test]
fn a_secret_a_page_edge_cuts_is_redacted_in_each_page() {
    let key = private_key();
    let text = format!("a line\n{key}\nlast line\n");
    // Pages cut in the key's body, line-wise as read_file does.
    let cut = text.find(&key).unwrap() + key.len() / 2;
    let cut = cut + text[cut..].find('\n').unwrap() + 1;
    let mut r = Redactor::default();
    let first = r.redact_part(&text, 0..cut);
    let second = r.redact_part(&text, cut..text.len());
    assert_eq!(first, "a line\n‹secret:private-key:1›");
    assert_eq!(second, "‹secret:private-key:1›\nlast line\n");
    // Alone, neither half is a finding: this is what the context is for.
    let mut alone = Redactor::default();
    assert_eq!(alone.redact(&text[cut..]), &text[cut..]);
    // What lies wholly outside the part is not given a handle.
    let mut r = Redactor::default();
    let before = format!("{}\n", gh_token());
    let text = format!("{before}plain\n");
    assert_eq!(r.redact_part(&text, before.len()..text.len()), "plain\n");
    assert!(r.is_empty());
    // The value is the whole key: substituted back whole.
    let mut r = Redactor::default();
    let text = format!("a line\n{key}\nlast line\n");
    let half = r.redact_part(&text, cut..text.len());
    assert!(half.starts_with("‹secret:private-key:1›"), "{half}");
    assert_eq!(r.substitute("‹secret:private-key:1›").unwrap(), key);
}

/// A made-up RSA private key block (not a key), assembled so that this
/// file is not itself a finding.
fn private_key() -> String {
    let body: String = (0..20)
        .map(|i| format!("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC{i:02}x7\n"))
        .collect();
    format!(
        "-----BEGIN RSA {k}-----\n{body}-----END RSA {k}-----",
        k = "PRIVATE KEY"
    )
}

#[test]
fn passwords_in_urls_and_what_is_not_one() {
    let d = Detector::new(Vec::<(String, String)>::new());
    let found = |text: &str| -> Vec<String> {
        kinds(text, &d)
            .into_iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect()
    };
    // Assembled, so that this file is not itself a finding.
    let (a, b) = ("Vq7Lr2xN9pKs", "hunter2hunter2");
    assert_eq!(
        found(&format!("DATABASE_URL=postgres://app:{a}@db:5432/app\n")),
        [format!("url-password {a}")]
    );
    assert_eq!(
        found(&format!("git clone https://bot:{b}@git.example.org/r.git")),
        [format!("url-password {b}")]
    );
    for text in [
        "https://user:password@host/",
        "postgres://postgres:postgres@localhost/db",
        "https://u:${DB_PASSWORD}@host",
        "redis://:short@cache:6379",
        "https://github.com/owner/repo",
        "mailto:someone@example.org",
        "https://user:<your-password>@host",
        "http://host:8080@x",
    ] {
        assert_eq!(found(text), Vec::<String>::new(), "{text}");
    }
}

/// The first lines of a key (`head key.pem`, an output cut by its limit)
/// are a finding: the header and the body after it.
#[test]
fn a_private_key_block_cut_short_is_found() {
    let d = Detector::new(Vec::<(String, String)>::new());
    let key = private_key();
    let cut = &key[..key.len() / 2];
    let text = format!("$ head key.pem\n{cut}");
    let found = kinds(&text, &d);
    assert_eq!(found, [("private-key".to_owned(), cut.to_owned())]);
    // Whole, it is one finding, to its end line.
    let text = format!("{key}\nthen more\n");
    assert_eq!(kinds(&text, &d), [("private-key".to_owned(), key.clone())]);
    // A header alone (a document naming the format) is not.
    let text = format!("-----BEGIN RSA {}-----\nis how it starts\n", "PRIVATE KEY");
    assert!(d.detect(&text).is_empty());
}
