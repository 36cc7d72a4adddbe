//! Saving under faults: a full disk, failures after a ref has moved (the
//! answer is published and said to be), and a project moved away under a
//! running hel (it keeps committing to the store it opened).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};

use crate::common::*;
use serde_json::{json, Value};

/// hel reading instructions on stdin, answering one line each.
struct Interactive {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<std::process::ChildStdout>,
}

impl Interactive {
    fn start(cmd: &mut std::process::Command) -> Interactive {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Interactive { child, stdin, out }
    }

    /// Send `q`; the answer line comes once it was committed (or not).
    fn ask(&mut self, q: &str) -> String {
        writeln!(self.stdin, "{q}").unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        line
    }

    /// End stdin and wait: exit code and stderr.
    fn finish(self) -> (i32, String) {
        drop(self.stdin);
        let o = self.child.wait_with_output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }
}

fn json_out(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

fn answers(n: usize) -> Value {
    Value::Array(
        (1..=n)
            .map(|i| json!({"content": format!("a{i}")}))
            .collect(),
    )
}

/// The answers' contents in session `sid`'s newest checkpoint.
fn contents(p: &Project, sid: &str) -> Vec<String> {
    let shown = json_out(&p.run(None, &["sessions", "show", sid, "--json"]));
    shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

fn session_of(stderr: &str) -> String {
    stderr
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("session: ")
        .to_owned()
}

#[test]
fn an_answer_that_could_not_be_saved_makes_p_exit_1_until_a_later_one_saves_it() {
    let p = Project::new();
    // The only answer's publishing sync fails: its text is on stdout, and
    // the exit code says a script cannot come back to it.
    let mock = Mock::start(answers(1));
    let run = Run::from_cmd(
        p.hel(Some(&mock))
            .args(["--no-workspace", "--output-format", "json", "-p", "q1"])
            .env("HEL_FAILPOINTS", "journal-sync@1"),
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("could not save a checkpoint"),
        "{}",
        run.stderr
    );
    let result: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(result["answer"], "a1", "{}", run.stdout);
    assert_eq!(result["exit"], 1, "{}", run.stdout);
    assert_eq!(result["checkpoint"], Value::Null, "{}", run.stdout);
    // Two instructions, the first unsaved: the second saves both, and the
    // run succeeds.
    let mock = Mock::start(answers(2));
    let run = Run::from_cmd(
        p.hel(Some(&mock))
            .args(["--no-workspace", "-p", "q1", "-p", "q2"])
            .env("HEL_FAILPOINTS", "journal-sync@1"),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "a1\na2\n");
    assert_eq!(
        run.stderr.matches("could not save a checkpoint").count(),
        1,
        "{}",
        run.stderr
    );
    assert_eq!(
        contents(&p, &session_of(&run.stderr)),
        ["q1", "a1", "q2", "a2"]
    );
}

#[test]
fn a_failed_publishing_sync_saves_nothing_and_the_next_answer_saves_everything() {
    let p = Project::new();
    let mock = Mock::start(answers(3));
    // The sync that would publish the second answer fails.
    // Without workspace records, every sync is an answer's.
    let mut hel = Interactive::start(
        p.hel(Some(&mock))
            .arg("--no-workspace")
            .env("HEL_FAILPOINTS", "journal-sync@2"),
    );
    assert_eq!(hel.ask("q1"), "a1\n");
    assert_eq!(hel.ask("q2"), "a2\n");
    assert_eq!(hel.ask("q3"), "a3\n");
    let (code, stderr) = hel.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stderr.matches("could not save a checkpoint").count(),
        1,
        "{stderr}"
    );
    let sid = session_of(&stderr);
    let log = p.run(None, &["sessions", "log", &sid]);
    assert_eq!(log.stdout.lines().count(), 2, "{}", log.stdout);
    assert_eq!(contents(&p, &sid), ["q1", "a1", "q2", "a2", "q3", "a3"]);
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
}

#[test]
fn a_failed_ref_rename_saves_nothing_and_the_next_answer_saves_everything() {
    let p = Project::new();
    let mock = Mock::start(answers(3));
    // The second answer's records are durable in the journal, but its ref
    // cannot be moved: it is not saved, and nothing of it stays behind.
    let mut hel = Interactive::start(
        p.hel(Some(&mock))
            .arg("--no-workspace")
            .env("HEL_FAILPOINTS", "ref-rename@2"),
    );
    assert_eq!(hel.ask("q1"), "a1\n");
    assert_eq!(hel.ask("q2"), "a2\n");
    assert_eq!(hel.ask("q3"), "a3\n");
    let (code, stderr) = hel.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stderr.matches("could not save a checkpoint").count(),
        1,
        "{stderr}"
    );
    let sid = session_of(&stderr);
    let log = p.run(None, &["sessions", "log", &sid]);
    assert_eq!(log.stdout.lines().count(), 2, "{}", log.stdout);
    assert_eq!(contents(&p, &sid), ["q1", "a1", "q2", "a2", "q3", "a3"]);
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
    assert!(!fsck.stdout.contains("did not publish"), "{}", fsck.stdout);
    assert_eq!(
        std::fs::read_dir(p.path().join(".hel/tmp"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn a_failed_sync_of_the_refs_directory_is_a_saved_answer_and_a_warning() {
    let p = Project::new();
    let mock = Mock::start(answers(2));
    // The rename published the first answer; only the directory's sync
    // after it fails: a warning that says it was saved.
    let mut hel = Interactive::start(
        p.hel(Some(&mock))
            .arg("--no-workspace")
            .env("HEL_FAILPOINTS", "ref-dir-sync@1"),
    );
    assert_eq!(hel.ask("q1"), "a1\n");
    assert_eq!(hel.ask("q2"), "a2\n");
    let (code, stderr) = hel.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stderr
            .matches(
                "the checkpoint was saved, but the directory of session refs could not be synced"
            )
            .count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("could not save"), "{stderr}");
    let sid = session_of(&stderr);
    let log = p.run(None, &["sessions", "log", &sid]);
    assert_eq!(log.stdout.lines().count(), 2, "{}", log.stdout);
    assert_eq!(contents(&p, &sid), ["q1", "a1", "q2", "a2"]);
}

/// A move whose directory sync failed may not survive a power loss: the
/// ref may come back naming the head before it. The answer was shown as
/// saved (with a warning) and its records are durable: the commit past the
/// ref reads as published (a note), never a fault, never a session one
/// answer shorter.
#[test]
fn a_move_whose_directory_sync_failed_may_revert_without_a_fault() {
    let p = Project::new();
    let mock = Mock::start(answers(2));
    let mut hel = Interactive::start(
        p.hel(Some(&mock))
            .arg("--no-workspace")
            .env("HEL_FAILPOINTS", "ref-dir-sync@2"),
    );
    assert_eq!(hel.ask("q1"), "a1\n");
    assert_eq!(hel.ask("q2"), "a2\n");
    let (code, stderr) = hel.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("could not be synced"), "{stderr}");
    let sid = session_of(&stderr);
    let log = json_out(&p.run(None, &["sessions", "log", &sid, "--json"]));
    let first = log[1]["id"].as_str().unwrap().to_owned();
    // The power loss: the second move is lost.
    std::fs::write(
        p.path().join(".hel/refs/sessions").join(&sid),
        format!("{first}\n"),
    )
    .unwrap();
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
    assert!(fsck.stdout.contains("one commit behind"), "{}", fsck.stdout);
    assert_eq!(contents(&p, &sid), ["q1", "a1", "q2", "a2"]);
}

#[test]
fn a_failure_after_the_commit_was_published_is_a_saved_answer() {
    let p = Project::new();
    let mock = Mock::start(answers(3));
    // The journal's sidecar cannot be written after the first answer is
    // published: it is only a hint, so nothing is lost or said.
    let mut hel = Interactive::start(p.hel(Some(&mock)).env("HEL_FAILPOINTS", "jidx@1"));
    assert_eq!(hel.ask("q1"), "a1\n");
    assert_eq!(hel.ask("q2"), "a2\n");
    assert_eq!(hel.ask("q3"), "a3\n");
    let (code, stderr) = hel.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !stderr.contains("could not save") && !stderr.contains("moved"),
        "every answer was saved: {stderr}"
    );
    let sid = session_of(&stderr);
    let log = p.run(None, &["sessions", "log", &sid]);
    assert_eq!(log.stdout.lines().count(), 3, "{}", log.stdout);
    assert_eq!(contents(&p, &sid), ["q1", "a1", "q2", "a2", "q3", "a3"]);
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
}

#[test]
fn a_sidecar_that_cannot_be_opened_does_not_lose_later_answers() {
    let p = Project::new();
    let mock = Mock::start(answers(3));
    let mut hel = Interactive::start(&mut p.hel(Some(&mock)));
    assert_eq!(hel.ask("q1"), "a1\n");
    let sid = p.run(None, &["sessions", "--json"]);
    let sid = json_out(&sid)[0]["id"].as_str().unwrap().to_owned();
    // A resumed instance finds the sidecar's name taken by a directory.
    hel.finish();
    let jidx = p
        .path()
        .join(".hel/packs/journals")
        .join(format!("{sid}.jidx"));
    std::fs::remove_file(&jidx).unwrap();
    std::fs::create_dir(&jidx).unwrap();
    let mut hel = Interactive::start(p.hel(Some(&mock)).args(["resume", &sid]));
    assert_eq!(hel.ask("q2"), "a2\n");
    std::fs::remove_dir(&jidx).unwrap();
    assert_eq!(hel.ask("q3"), "a3\n");
    let (code, stderr) = hel.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("could not save"), "{stderr}");
    let run = p.run(None, &["sessions", "log", &sid]);
    assert_eq!(run.stdout.lines().count(), 3, "{}", run.stdout);
    assert_eq!(contents(&p, &sid), ["q1", "a1", "q2", "a2", "q3", "a3"]);
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
}

/// A small tmpfs mounted for the test (tests run as root in CI); `None`
/// where mounting is not possible.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let target = std::ffi::CString::new(dir.path().display().to_string()).unwrap();
        let opts = std::ffi::CString::new(format!("size={size},mode=0700")).unwrap();
        let fstype = c"tmpfs";
        // SAFETY: mount(2) with valid C strings.
        let rc = unsafe {
            libc::mount(
                fstype.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        if rc != 0 {
            eprintln!(
                "skipped: cannot mount a tmpfs here ({})",
                std::io::Error::last_os_error()
            );
            return None;
        }
        Some(Tmpfs { dir })
    }

    fn path(&self) -> PathBuf {
        self.dir.path().to_owned()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let target = std::ffi::CString::new(self.dir.path().display().to_string()).unwrap();
        // SAFETY: umount2(2) of the tmpfs we mounted.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// Fill the file system of `dir` with one file until it is full.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![7u8; 64 * 1024];
    loop {
        if f.write_all(&block).is_err() || f.sync_all().is_err() {
            break;
        }
    }
    path
}

#[test]
fn a_full_disk_fails_the_save_and_the_next_answer_saves_everything() {
    let Some(fs) = Tmpfs::mount("4m") else { return };
    let project = fs.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let p = Project::new();
    // The second answer is large: its commit needs new blocks, which a
    // full disk refuses.
    let big: String = (0..40_000u64)
        .map(|i| format!("{:05}", i.wrapping_mul(7_919) % 99_991))
        .collect();
    let mock = Mock::start(json!([
        {"content": "a1"},
        {"content": format!("a2 {big}")},
        {"content": "a3"},
    ]));
    let mut hel = Interactive::start(p.hel_in(&project, Some(&mock)).arg("--no-workspace"));
    assert_eq!(hel.ask("q1"), "a1\n");
    let filler = fill(&fs.path());
    assert_eq!(hel.ask("q2"), format!("a2 {big}\n"));
    std::fs::remove_file(filler).unwrap();
    assert_eq!(hel.ask("q3"), "a3\n");
    let (code, stderr) = hel.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stderr.matches("could not save a checkpoint").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("No space left"), "{stderr}");
    let sid = stderr
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("session: ");
    let run = p.run_in(&project, &["sessions", "log", sid]);
    // q1's checkpoint, then q3's, which holds q2 too.
    assert_eq!(run.stdout.lines().count(), 2, "{}", run.stdout);
    let shown = p.run_in(&project, &["sessions", "show", sid, "--json"]);
    let shown = json_out(&shown);
    let contents: Vec<&str> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        contents[1..],
        ["q1", "a1", "q2", &format!("a2 {big}"), "q3", "a3"]
    );
    let fsck = p.run_in(&project, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
}

#[test]
fn a_project_moved_away_keeps_its_checkpoints_in_the_store_hel_opened() {
    let root = tempfile::tempdir().unwrap();
    let project = root.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let p = Project::new();
    let mock = Mock::start(answers(2));
    let mut hel = Interactive::start(&mut p.hel_in(&project, Some(&mock)));
    assert_eq!(hel.ask("q1"), "a1\n");
    // Something moves the project away and puts a fake one in its place.
    let moved = root.path().join("moved");
    std::fs::rename(&project, &moved).unwrap();
    std::fs::create_dir_all(project.join(".hel/packs/journals")).unwrap();
    std::fs::write(project.join(".hel/bait"), "fake store").unwrap();
    assert_eq!(hel.ask("q2"), "a2\n");
    let (code, stderr) = hel.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stderr.matches("no longer leads to the project").count(),
        1,
        "{stderr}"
    );
    // Both checkpoints are in the store that moved; the fake one is untouched.
    let sid = stderr
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("session: ");
    let run = p.run_in(&moved, &["sessions", "log", sid]);
    assert_eq!(run.stdout.lines().count(), 2, "{}", run.stdout);
    let fake: Vec<_> = std::fs::read_dir(project.join(".hel/packs/journals"))
        .unwrap()
        .collect();
    assert!(fake.is_empty());
    // The checkpoints keep the project directory hel started in.
    let shown = json_out(&p.run_in(&moved, &["sessions", "show", sid, "--json"]));
    assert_eq!(shown["cwd"], project.display().to_string());
}

#[test]
fn a_session_begun_on_a_full_disk_leaves_a_sound_store() {
    let Some(fs) = Tmpfs::mount("4m") else { return };
    let project = fs.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let p = Project::new();
    let mock = Mock::start(answers(3));
    // A store exists; then the disk fills up.
    let run = Run::from_cmd(
        p.hel_in(&project, Some(&mock))
            .args(["--no-workspace", "-p", "q1"]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let filler = fill(&fs.path());
    // A new session's first answer cannot be saved; the disk has room
    // again for its second.
    let mut hel = Interactive::start(p.hel_in(&project, Some(&mock)).arg("--no-workspace"));
    assert_eq!(hel.ask("q2"), "a2\n");
    std::fs::remove_file(filler).unwrap();
    assert_eq!(hel.ask("q3"), "a3\n");
    let (code, stderr) = hel.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stderr.matches("could not save a checkpoint").count(),
        1,
        "{stderr}"
    );
    let sid = session_of(&stderr);
    let fsck = p.run_in(&project, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
    assert!(fsck.stdout.contains("store is sound"), "{}", fsck.stdout);
    let shown = json_out(&p.run_in(&project, &["sessions", "show", &sid, "--json"]));
    let contents: Vec<&str> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(contents, ["q2", "a2", "q3", "a3"]);
    let gc = p.run_in(&project, &["gc"]);
    assert_eq!(gc.code, 0, "{}", gc.stderr);
    let tmp = project.join(".hel/tmp");
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .map(|d| d.collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(p.run_in(&project, &["fsck"]).code, 0);
}

/// A fork killed after its dependents records (objects-spec §6.2) and
/// before its ref leaves no session: the records it wrote only make a
/// later delete read one more head, and gc removes them. The base stays
/// whole and can still be deleted.
#[test]
fn a_fork_killed_after_its_dependents_records_leaves_no_session_and_gc_removes_them() {
    use std::os::unix::process::ExitStatusExt;
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "one"}, {"content": "forked"}]));
    let run = p.run(Some(&mock), &["--no-workspace", "-p", "first"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sid = run.session();
    let log = p.run(None, &["sessions", "log", &sid, "--json"]);
    let log: Value = serde_json::from_str(&log.stdout).unwrap();
    let first = log[0]["id"].as_str().unwrap()[..12].to_owned();
    let out = p
        .hel(Some(&mock))
        .args([
            "resume",
            &sid,
            "--at",
            &first,
            "--no-workspace",
            "-p",
            "fork",
        ])
        .env("HEL_FAILPOINTS", "dependents-recorded@1")
        .output()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(9),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refs = p.path().join(".hel/refs");
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .map(|r| {
                r.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let listed = p.run(None, &["sessions", "--json"]);
    let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let ghosts = names(&refs.join("dependents").join(&sid));
    assert_eq!(ghosts.len(), 1, "the killed fork's record of its base");
    assert_eq!(names(&refs.join("recorded")).len(), 2);
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
    let gc = p.run(None, &["gc"]);
    assert_eq!(gc.code, 0, "{}", gc.stderr);
    assert!(names(&refs.join("dependents").join(&sid)).is_empty());
    assert_eq!(names(&refs.join("recorded")), [sid.as_str()]);
    let fsck = p.run(None, &["fsck"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
    assert!(fsck.stdout.contains("store is sound"), "{}", fsck.stdout);
    let del = p.run(None, &["sessions", "delete", &sid]);
    assert_eq!(del.code, 0, "{}", del.stderr);
}
