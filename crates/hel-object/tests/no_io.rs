//! hel-object is the store's layer without I/O (issue 21, "Layers"): its
//! sources name no file API and none of the crates that do file I/O, and
//! its manifest depends on none of them.

use std::path::Path;

/// What a source doing file I/O names (as code: comments are skipped).
/// Any use of `std::fs` (its `File` included) names `fs::`.
const FORBIDDEN: &[&str] = &[
    "hel_fs",
    "rustix",
    "fs::",
    "OpenOptions",
    "read_dir",
    "std::os::",
    "std::net",
    "std::process",
    "libc",
];

#[test]
fn sources_name_no_file_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in FORBIDDEN {
                if code.contains(word) {
                    found.push(format!("{}:{}: {word}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(files >= 6, "read {files} files of {}", src.display());
    assert!(
        found.is_empty(),
        "file I/O in hel-object:\n{}",
        found.join("\n")
    );
}

#[test]
fn manifest_depends_on_no_io_crate() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    for dep in ["hel-fs", "rustix", "hel-store", "libc"] {
        assert!(
            !manifest
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{dep} "))
                    || l.trim_start().starts_with(&format!("{dep}."))),
            "hel-object depends on {dep}"
        );
    }
}
