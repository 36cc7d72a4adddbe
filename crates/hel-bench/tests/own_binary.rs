//! A run survives its own binary being replaced or removed at its path (as
//! a `cargo build` in the same target directory does): every probe runs the
//! file this process runs. The quick run panicked with "probe: No such
//! file or directory" when a build replaced `hel-bench` beside it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_run_whose_binary_is_removed_meanwhile_still_probes() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("hel-bench");
    std::fs::copy(env!("CARGO_BIN_EXE_hel-bench"), &exe).unwrap();
    let child = Command::new(&exe)
        .args(["--smoke", "--only", "grow"])
        .env("TMPDIR", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the child runs the copy, the copy goes: every resume probe it
    // starts from now on must still find its binary.
    let proc_exe = format!("/proc/{}/exe", child.id());
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_link(&proc_exe).ok().as_deref() != Some(Path::new(&exe)) {
        assert!(
            Instant::now() < deadline,
            "the child never ran {}",
            exe.display()
        );
        std::thread::yield_now();
    }
    std::fs::remove_file(&exe).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the run failed:\n{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Both grow sizes of every store resumed in a child and were checked.
    assert!(
        stdout.contains("| grow | 40 | hel-store |") && stdout.contains("| grow | 40 | sqlite |"),
        "{stdout}"
    );
}
