//! The user's config file: its precedence under flags and the environment,
//! `hel config`, refusals, and that nothing is read from the project.

use crate::common::*;
use serde_json::json;

fn config_file(p: &Project, text: &str) {
    let dir = p.home.path().join(".config/hel");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// `hel config`'s row for `key`: (value, source).
fn row(out: &str, key: &str) -> (String, String) {
    let line = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(key))
        .unwrap_or_else(|| panic!("no {key} in\n{out}"));
    let parts: Vec<&str> = line.split_whitespace().collect();
    (parts[1].to_owned(), parts[parts.len() - 1].to_owned())
}

#[test]
fn flags_then_environment_then_the_file_then_defaults() {
    let p = Project::new();
    config_file(
        &p,
        "model = \"from-file\"\naccess = \"auto\"\nmax_output_tokens = 1234\ncontext_window = 50000\n",
    );
    let run = p.run(None, &["config"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let file = p
        .home
        .path()
        .join(".config/hel/config.toml")
        .display()
        .to_string();
    assert_eq!(
        row(&run.stdout, "model"),
        ("from-file".into(), file.clone())
    );
    assert_eq!(row(&run.stdout, "access"), ("auto".into(), file.clone()));
    assert_eq!(
        row(&run.stdout, "max_output_tokens"),
        ("1234".into(), file.clone())
    );
    assert_eq!(row(&run.stdout, "stream").1, "default");
    // The environment beats the file, a flag beats both.
    let out = p
        .hel(None)
        .env("HEL_MODEL", "from-env")
        .args(["config", "--access", "read-only"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        row(&out, "model"),
        ("from-env".into(), "environment".into())
    );
    assert_eq!(row(&out, "access"), ("read-only".into(), "flag".into()));
    // A real run sends what the file says.
    let mock = Mock::start(json!([{"content": "ok"}]));
    let run = p.run(Some(&mock), &["-p", "hi"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let body = &mock.requests()[0];
    assert_eq!(body["max_tokens"], 1234);
    assert_eq!(
        body["model"], "mock-model",
        "--model on the command line wins"
    );
}

#[test]
fn keys_unknown_settings_and_broken_files_are_refused_naming_the_file() {
    let p = Project::new();
    for (text, says) in [
        (
            "api_key = \"sk-secret\"\n",
            "API keys are never read from the config file",
        ),
        ("modle = \"x\"\n", "unknown field `modle`"),
        ("access = \"everything\"\n", "unknown variant `everything`"),
        ("model = \n", "config.toml"),
    ] {
        config_file(&p, text);
        let run = p.run(None, &["config"]);
        assert_eq!(run.code, 2, "{text}: {}", run.stderr);
        assert!(
            run.stderr.contains(says) && run.stderr.contains("config.toml"),
            "{text}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("sk-secret"), "{}", run.stderr);
    }
}

#[test]
fn a_project_cannot_configure_hel() {
    let p = Project::new();
    // Everything a repository could ship to switch on auto access or
    // another server.
    for rel in [
        ".hel/config.toml",
        "hel.toml",
        ".config/hel/config.toml",
        "config.toml",
    ] {
        p.write(
            rel,
            "access = \"auto\"\nbase_url = \"http://127.0.0.1:9\"\n",
        );
    }
    let run = p.run(None, &["config"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        row(&run.stdout, "access"),
        ("confirm".into(), "default".into())
    );
    assert_eq!(row(&run.stdout, "base_url").1, "default");
}

#[test]
fn help_fits_the_command() {
    let p = Project::new();
    let sessions = p.run(None, &["sessions", "--help"]).stdout;
    for flag in ["--model", "--access", "--instruction", "--no-sandbox"] {
        assert!(
            !sessions.contains(flag),
            "{flag} in sessions --help:\n{sessions}"
        );
    }
    assert!(sessions.contains("Examples:"), "{sessions}");
    let resume = p.run(None, &["resume", "--help"]).stdout;
    for flag in ["--model", "--access", "--instruction", "--restore-files"] {
        assert!(resume.contains(flag), "{flag} missing from resume --help");
    }
    for cmd in ["gc", "fsck", "undo", "restore", "diff", "config"] {
        let help = p.run(None, &[cmd, "--help"]).stdout;
        assert!(
            help.contains("Example"),
            "{cmd} --help has no example:\n{help}"
        );
        assert!(
            !help.contains("--max-turns") || cmd == "config",
            "{cmd} --help lists run flags"
        );
    }
}
