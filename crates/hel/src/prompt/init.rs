//! `/init`: a starter `AGENTS.md` at the project's root, sketched from its
//! top-level layout (directory names, build files), written only after
//! the user says yes and never over anything already there.

use std::io::Write;
use std::path::Path;

/// Entries of the root looked at; a larger directory is sketched from
/// the first ones.
const MAX_ENTRIES: usize = 1000;
/// Directories listed in the starter.
const MAX_DIRS: usize = 20;

/// Build files, and the commands they suggest.
const BUILD_FILES: &[(&str, &str)] = &[
    ("Cargo.toml", "`cargo build`, `cargo test`"),
    ("package.json", "`npm install`, `npm test`"),
    ("pyproject.toml", "`pip install -e .`, `pytest`"),
    ("go.mod", "`go build ./...`, `go test ./...`"),
    ("CMakeLists.txt", "`cmake -B build`, `cmake --build build`"),
    ("Makefile", "`make`"),
    ("pom.xml", "`mvn package`"),
    ("build.gradle", "`gradle build`"),
    ("build.gradle.kts", "`gradle build`"),
    ("Gemfile", "`bundle install`"),
];

/// The starter text for the project at `root`.
pub fn starter(root: &Path) -> std::io::Result<String> {
    let mut dirs = Vec::new();
    let mut builds = Vec::new();
    for entry in std::fs::read_dir(root)?.take(MAX_ENTRIES) {
        let entry = entry?;
        // The names are the repository's: only plain ones go into a file
        // every agent will read.
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if name.starts_with('.') || name.chars().any(|c| c.is_control() || c == '`') {
            continue;
        }
        // Not through links: what is here, as it is.
        let kind = entry.file_type()?;
        if kind.is_dir() {
            dirs.push(name);
        } else if kind.is_file() {
            if let Some((file, commands)) = BUILD_FILES.iter().find(|(f, _)| *f == name) {
                builds.push(format!("- {commands} ({file})"));
            }
        }
    }
    dirs.sort();
    builds.sort();
    let mut layout: Vec<String> = dirs
        .iter()
        .take(MAX_DIRS)
        .map(|d| format!("- `{d}/`: "))
        .collect();
    if dirs.len() > MAX_DIRS {
        layout.push(format!(
            "- … and {} more directories",
            dirs.len() - MAX_DIRS
        ));
    }
    if layout.is_empty() {
        layout.push("- (the main directories and what is in them)".into());
    }
    if builds.is_empty() {
        builds.push("- (how to build, test and check a change)".into());
    }
    Ok(format!(
        "# AGENTS.md\n\
         \n\
         Instructions for coding agents working on this project (hel, Codex,\n\
         OpenCode and others read this file). Keep it short and true.\n\
         \n\
         ## Layout\n\
         \n\
         {}\n\
         \n\
         ## Build and test\n\
         \n\
         {}\n\
         \n\
         ## Conventions\n\
         \n\
         - (the code style, what to run before a change is done, what not to touch)\n",
        layout.join("\n"),
        builds.join("\n")
    ))
}

/// Write `text` to a new file `path`: refused if anything (a link
/// included) is already there.
pub fn write(path: &Path, text: &str) -> std::io::Result<()> {
    let mut file = std::fs::File::from(hel_fs::at::create_new(rustix::fs::CWD, path, 0o644)?);
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_names_directories_and_build_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        for d in ["src", "tests", ".git", "bad\nname"] {
            std::fs::create_dir(p.join(d)).unwrap();
        }
        std::fs::write(p.join("Cargo.toml"), "").unwrap();
        std::fs::write(p.join("README.md"), "").unwrap();
        std::os::unix::fs::symlink("src", p.join("linked")).unwrap();
        let text = starter(p).unwrap();
        assert!(
            text.contains("## Layout\n\n- `src/`: \n- `tests/`: \n\n"),
            "{text}"
        );
        assert!(
            text.contains("- `cargo build`, `cargo test` (Cargo.toml)"),
            "{text}"
        );
        assert!(!text.contains(".git") && !text.contains("bad") && !text.contains("linked"));
        let empty = tempfile::tempdir().unwrap();
        assert!(starter(empty.path()).unwrap().contains("(how to build"));
        // Never over what is there.
        write(&p.join("AGENTS.md"), "one").unwrap();
        assert!(write(&p.join("AGENTS.md"), "two").is_err());
        std::os::unix::fs::symlink("elsewhere", p.join("L")).unwrap();
        assert!(write(&p.join("L"), "x").is_err());
        assert!(!p.join("elsewhere").exists());
        assert_eq!(std::fs::read_to_string(p.join("AGENTS.md")).unwrap(), "one");
    }
}
