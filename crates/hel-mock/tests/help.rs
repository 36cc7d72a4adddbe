//! `hel-mock --help` says what a script is: its keys and an example.

#[test]
fn help_documents_the_script_format() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hel-mock"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for key in [
        "\"content\"",
        "\"tool_calls\"",
        "\"arguments\"",
        "\"message\"",
        "\"status\"",
        "\"retry_after\"",
        "\"raw\"",
        "\"recall\"",
        "\"match\"",
        "\"delay_ms\"",
        "\"finish_reason\"",
        "\"no_stream\"",
        "Example script:",
        "--models",
        "script exhausted",
    ] {
        assert!(help.contains(key), "{key} missing from:\n{help}");
    }
    assert!(!help.contains("see the crate docs for the script format"));
}

/// The example script in the help is a script the server takes.
#[test]
fn the_help_example_is_a_valid_script() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hel-mock"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let start = help.find("Example script:").unwrap();
    let text = &help[start..];
    let json = &text[text.find('[').unwrap()..=text.find("\n  ]").unwrap() + 3];
    let script: serde_json::Value = serde_json::from_str(json).unwrap();
    hel_mock::Config::from_json(&script).unwrap();
}
