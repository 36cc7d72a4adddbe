//! The resume-recall experiment against the mock model, end to end.

use std::process::Command;

use hel_e2e::*;

#[test]
fn session_resume_experiment_gives_3_0_3() {
    let out = tempfile::tempdir().unwrap();
    let evals = bin_dir().join("hel-evals");
    let spec = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tools/evals/session-resume.json"
    );
    let run = Command::new(&evals)
        .args(["run", spec, "--provider", "mock", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report = Command::new(&evals)
        .arg("report")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(report.status.success());
    let table = String::from_utf8(report.stdout).unwrap();
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
