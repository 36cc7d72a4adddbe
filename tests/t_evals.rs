//! The resume-recall experiment against the mock model, end to end: the
//! runner (in-process) drives the hel binary under test.

use crate::common::*;

#[test]
fn session_resume_experiment_gives_3_0_3() {
    let out = tempfile::tempdir().unwrap();
    let spec = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tools/evals/session-resume.json"
    );
    let runner = hel_evals::Runner { hel: hel_bin() };
    let mut runs = 0;
    hel_evals::run(
        &runner,
        std::path::Path::new(spec),
        hel_evals::Provider::Mock,
        out.path(),
        &mut |_| runs += 1,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs, 9);
    let table = hel_evals::report(out.path()).unwrap();
    let row = |name: &str| -> Vec<String> {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row {name}:\n{table}"));
        line.split('|')
            .map(|c| c.trim().to_owned())
            .filter(|c| !c.is_empty())
            .collect()
    };
    assert_eq!(row("continuous")[2], "3/3", "{table}");
    assert_eq!(row("restart")[2], "0/3", "{table}");
    assert_eq!(row("resume")[2], "3/3", "{table}");
    let all = row("all");
    assert_eq!(
        (all[1].as_str(), all[3].as_str(), all[4].as_str()),
        ("9", "18", "0"),
        "{table}"
    );
    // The records hold what the report says.
    let rec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("session-resume/resume/2/record.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rec["success"], true);
    assert_eq!(rec["processes"].as_array().unwrap().len(), 2);
    assert_eq!(
        rec["processes"][1]["session"],
        rec["processes"][0]["session"]
    );
    assert!(out
        .path()
        .join("session-resume/resume/2/processes/2/raw/requests.jsonl")
        .exists());
    let restart: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("session-resume/restart/2/record.json")).unwrap(),
    )
    .unwrap();
    assert_ne!(
        restart["processes"][1]["session"],
        restart["processes"][0]["session"]
    );
    assert_eq!(
        restart["identifier"], rec["identifier"],
        "one identifier per repetition"
    );
}
