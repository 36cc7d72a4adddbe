//! Parsed size is bounded, not only bytes: what a model server or an MCP
//! server sends is refused past a count of JSON values (however few bytes
//! it takes), in memory measured from outside (the child's peak resident
//! set from `wait4`), and answers are laid out in time linear in them.

use crate::common::*;
use serde_json::json;

/// The peak memory every case here must stay under.
const PEAK_KIB: u64 = 256 * 1024;

/// 33 million zeros: 66 MB of reply, under the 64 MiB response limit.
const ZEROS: u64 = 33_000_000;

/// The one line of the instruction's error on stderr.
fn error_line(run: &Run) -> String {
    run.stderr
        .lines()
        .find(|l| l.starts_with("hel: instruction incomplete (error):"))
        .unwrap_or_else(|| panic!("no error line: {}", run.stderr))
        .to_owned()
}

#[test]
fn a_reply_of_millions_of_values_is_refused_in_bounded_memory() {
    let p = Project::new();
    // Whole (not streamed); streamed as one event of 66 MB, as one of
    // 16 MB, and spread over events that each hold fewer values than the
    // limit.
    let cases = [
        (
            json!({"zeros": ZEROS}),
            true,
            "refused (more than 2000000 JSON values",
        ),
        (
            json!({"zeros": ZEROS}),
            false,
            "a line of the event stream is longer than 16 MiB: refused",
        ),
        (
            json!({"zeros": 8_000_000}),
            false,
            "a stream event is refused (more than 2000000 JSON values",
        ),
        (
            json!({"zeros": ZEROS, "zeros_per_event": 1_500_000}),
            false,
            "the streamed response holds more than 2000000 JSON values: refused",
        ),
    ];
    for (step, whole, said) in cases {
        let mock = Mock::start(json!([step.clone()]));
        let mut cmd = p.hel(Some(&mock));
        if whole {
            cmd.arg("--no-stream");
        }
        let m = run_measured(cmd.args(["-p", "x"]));
        eprintln!("{step} (whole: {whole}): peak RSS {} KiB", m.max_rss_kib);
        assert_eq!(m.run.code, 1, "{step}: {}", m.run.stderr);
        let line = error_line(&m.run);
        assert!(line.contains(said), "{step}: {line}");
        assert!(
            m.max_rss_kib < PEAK_KIB,
            "{step}: peak RSS {} KiB",
            m.max_rss_kib
        );
        assert_eq!(mock.requests().len(), 1, "not retried");
    }
    // Under the limit, the extra field reaches the session as it came.
    for whole in [true, false] {
        let mock = Mock::start(json!([{"zeros": 1000, "zeros_per_event": 300}]));
        let mut cmd = p.hel(Some(&mock));
        if whole {
            cmd.arg("--no-stream");
        }
        let run = Run::from_cmd(cmd.args(["-p", "x"]));
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.stdout, "hi\n");
    }
}
