//! The store format: a store of any format but this hel's (an older one,
//! which only pre-release hels wrote, a newer one, or a `format` file that
//! names none) is refused by every command with one line naming what was
//! found and what to do, a non-zero exit, and nothing written.

use serde_json::json;

use crate::common::{Mock, Project};

#[test]
fn a_store_of_another_format_is_refused_by_every_command_and_left_as_it_was() {
    let p = Project::new();
    let mock = Mock::start(json!([{"content": "first answer"}]));
    let run = p.run(Some(&mock), &["-p", "remember this"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let session = run.session();
    let root = p.path().join(".hel");
    let shown = root.display().to_string();
    let older = |n: u64| {
        format!("{shown} is a store of format {n}, written by a pre-release hel; this hel reads format 6 only: move {shown} aside or delete it")
    };
    for (format, said) in [
        ("hel-store-format 3\n", older(3)),
        ("hel-store-format 5\n", older(5)),
        (
            "hel-store-format 7\n",
            format!("{shown} is a store of format 7, written by a newer hel; this hel reads format 6 only: upgrade hel"),
        ),
        (
            "garbage\n",
            format!("{shown} has a format file that names no store format (it says \"garbage\\n\"); this hel reads format 6 only: move {shown} aside or delete it"),
        ),
    ] {
        std::fs::write(root.join("format"), format).unwrap();
        let before = hel_store::testing::files_under(&root);
        for args in [
            &["sessions"][..],
            &["fsck"],
            &["gc"],
            &["sessions", "log", &session],
            &["resume", &session, "-p", "again"],
            &["-p", "a new session"],
        ] {
            let run = p.run(Some(&mock), args);
            assert_eq!(run.code, 1, "hel {args:?}: {}{}", run.stdout, run.stderr);
            let lines: Vec<&str> = run.stderr.lines().filter(|l| l.contains(&said)).collect();
            assert_eq!(lines.len(), 1, "hel {args:?}: {}", run.stderr);
            assert_eq!(
                hel_store::testing::files_under(&root),
                before,
                "hel {args:?} wrote to a store of {format:?}"
            );
        }
    }
    // The format put back, the session is there as it was.
    std::fs::write(root.join("format"), "hel-store-format 6\n").unwrap();
    let run = p.run(None, &["sessions"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains(&session[..8]), "{}", run.stdout);
    assert_eq!(mock.requests().len(), 1, "no refused run asked the model");
}
