//! Every command the documents show runs as written: the command lines of
//! README.md and docs/*.md are read at test time and each `hel …` line is
//! parsed with hel's own clap definition ([`Cli`]), each `cargo … -p X`
//! must name a package of the workspace, and each `cargo run -p X` must
//! resolve to one binary of X.
//!
//! A command line is a line of a fenced code block that is either
//! `$ COMMAND` (a transcript: the lines without `$ ` are output), or, in a
//! block marked `sh`, `bash` or `shell` (a script), any line. COMMAND is
//! split as a shell would (quotes, backslashes), up to the first
//! unquoted `|`, `;`, `&`, `<`, `>` or `#` comment; leading `NAME=value`
//! assignments are passed over. A line ending with `\` goes on on the
//! next.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::Parser;

use crate::cli::Cli;

/// The repository's root.
fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// A command a document shows, with where it shows it.
#[derive(Debug)]
struct Shown {
    place: String,
    words: Vec<String>,
}

/// The command lines of one Markdown document (`name` is for messages).
fn commands_of(name: &str, text: &str) -> Result<Vec<Shown>, String> {
    let mut out = Vec::new();
    let mut fence: Option<(String, String)> = None; // (marker, language)
    let mut pending: Option<(usize, String)> = None; // a line ending with `\`
    for (k, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_start();
        match &fence {
            None => {
                for marker in ["```", "~~~"] {
                    if let Some(info) = trimmed.strip_prefix(marker) {
                        let lang = info.trim_start_matches(['`', '~']).trim();
                        let lang = lang.split([' ', ',', '{']).next().unwrap_or("");
                        fence = Some((marker.to_string(), lang.to_ascii_lowercase()));
                        break;
                    }
                }
                continue;
            }
            Some((marker, _)) if trimmed.trim_end().starts_with(marker.as_str()) => {
                if let Some((at, _)) = pending.take() {
                    return Err(format!(
                        "{name}:{at}: a command ends with `\\` at its block's end"
                    ));
                }
                fence = None;
                continue;
            }
            Some(_) => {}
        }
        let lang = fence.as_ref().map(|(_, l)| l.as_str()).unwrap_or("");
        let (start, line) = match pending.take() {
            Some((at, before)) => (at, format!("{before} {}", raw.trim())),
            None => (k + 1, raw.trim().to_string()),
        };
        if let Some(cont) = line.strip_suffix('\\') {
            pending = Some((start, cont.trim_end().to_string()));
            continue;
        }
        let script = matches!(lang, "sh" | "bash" | "shell");
        let command = match line.strip_prefix("$ ") {
            Some(c) => c,
            None if script => line.as_str(),
            None => continue,
        };
        let place = format!("{name}:{start}");
        let mut words = split(command).map_err(|e| format!("{place}: {e}: {command}"))?;
        let assignments = words.iter().take_while(|w| is_assignment(w)).count();
        words.drain(..assignments);
        if matches!(words.first().map(String::as_str), Some("hel" | "cargo")) {
            out.push(Shown { place, words });
        }
    }
    if fence.is_some() {
        return Err(format!("{name}: a code block is not closed"));
    }
    Ok(out)
}

/// `NAME=value`, as a shell takes it before a command.
fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// The words of a command line, split as a shell splits them, up to the
/// first unquoted operator or comment.
fn split(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '|' | ';' | '&' | '<' | '>' => {
                // `2>/dev/null`: the digits are the redirection's, not a word.
                if in_word && !(matches!(c, '<' | '>') && word.chars().all(|d| d.is_ascii_digit()))
                {
                    words.push(std::mem::take(&mut word));
                }
                return Ok(words);
            }
            '#' if !in_word => return Ok(words),
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(q) => word.push(q),
                        None => return Err("an unclosed single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => word.push(e),
                            Some(e) => {
                                word.push('\\');
                                word.push(e);
                            }
                            None => return Err("an unclosed double quote".into()),
                        },
                        Some(q) => word.push(q),
                        None => return Err("an unclosed double quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(e) => word.push(e),
                    None => return Err("a backslash at the end".into()),
                }
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// Why `hel` would refuse these words (None: they parse).
fn hel_error(words: &[String]) -> Option<String> {
    match Cli::try_parse_from(words) {
        // `hel sesions` parses as an instruction: in a document, a
        // one-word instruction is a misspelt command.
        Ok(Cli {
            prompt: Some(p), ..
        }) if !p.contains(char::is_whitespace) => Some(format!(
            "error: {p:?} is not a command (an instruction of one word?)"
        )),
        Ok(_) => None,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => None,
        Err(e) => Some(e.to_string().lines().next().unwrap_or("").to_string()),
    }
}

/// A package of the workspace: its manifest's text and its directory.
struct Package {
    manifest: toml::Table,
    dir: PathBuf,
}

/// The workspace's packages by name.
fn packages(root: &Path) -> BTreeMap<String, Package> {
    let read = |p: &Path| -> toml::Table {
        let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let top = read(&root.join("Cargo.toml"));
    let members = top["workspace"]["members"]
        .as_array()
        .expect("workspace.members");
    let mut out = BTreeMap::new();
    for m in members {
        let dir = root.join(m.as_str().expect("a member is a path"));
        let manifest = read(&dir.join("Cargo.toml"));
        let name = manifest["package"]["name"]
            .as_str()
            .expect("package.name")
            .to_string();
        out.insert(name, Package { manifest, dir });
    }
    out
}

/// The binary targets of a package, as Cargo finds them: `[[bin]]`,
/// `src/main.rs` (named for the package), `src/bin/NAME.rs` and
/// `src/bin/NAME/main.rs`.
fn binaries(p: &Package) -> Vec<String> {
    let mut bins: Vec<String> = p
        .manifest
        .get("bin")
        .and_then(|b| b.as_array())
        .into_iter()
        .flatten()
        .filter_map(|b| b.get("name").and_then(|n| n.as_str()).map(String::from))
        .collect();
    if p.dir.join("src/main.rs").is_file() {
        bins.push(p.manifest["package"]["name"].as_str().unwrap_or("").into());
    }
    if let Ok(entries) = std::fs::read_dir(p.dir.join("src/bin")) {
        for e in entries.flatten() {
            let path = e.path();
            let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            if path.extension().is_some_and(|x| x == "rs") || path.join("main.rs").is_file() {
                bins.push(name.to_string());
            }
        }
    }
    bins.sort();
    bins.dedup();
    bins
}

/// Which binary `cargo run` runs, given the package's binaries, its
/// `default-run` and the `--bin` asked for; or why it cannot run one.
fn run_target(
    bins: &[String],
    default_run: Option<&str>,
    bin: Option<&str>,
) -> Result<String, String> {
    let chosen = match (bin, default_run, bins) {
        (Some(b), _, _) => b,
        (None, Some(d), _) => d,
        (None, None, [only]) => only,
        (None, None, []) => return Err("the package has no binary".into()),
        (None, None, _) => {
            return Err(format!(
                "could not determine which binary to run ({}): no --bin and no default-run",
                bins.join(", ")
            ))
        }
    };
    if bins.iter().any(|b| b == chosen) {
        Ok(chosen.to_string())
    } else {
        Err(format!("no binary {chosen} (it has {})", bins.join(", ")))
    }
}

/// Why a `cargo` command line would not do what it shows (None: it would).
fn cargo_error(
    words: &[String],
    packages: &BTreeMap<String, Package>,
    root: &Path,
) -> Option<String> {
    let args: Vec<&str> = words[1..]
        .iter()
        .map(String::as_str)
        .take_while(|w| *w != "--")
        .collect();
    let sub = args
        .iter()
        .find(|w| !w.starts_with('-'))
        .copied()
        .unwrap_or("");
    let value = |flags: &[&str]| -> Option<&str> {
        args.iter().enumerate().find_map(|(k, w)| {
            flags.iter().find_map(|f| {
                if w == f {
                    args.get(k + 1).copied()
                } else {
                    w.strip_prefix(f).and_then(|v| v.strip_prefix('='))
                }
            })
        })
    };
    if sub == "install" {
        let path = value(&["--path"])?;
        return (!root.join(path).join("Cargo.toml").is_file())
            .then(|| format!("--path {path}: no Cargo.toml there"));
    }
    let package = value(&["-p", "--package"]);
    let p = match package {
        Some(name) => match packages.get(name) {
            Some(p) => p,
            None => return Some(format!("no package {name} in the workspace")),
        },
        None if sub == "run" => {
            return Some("`cargo run` in this workspace needs -p PACKAGE".into())
        }
        None => return None,
    };
    if sub != "run" {
        return None;
    }
    let default_run = p.manifest["package"]
        .get("default-run")
        .and_then(|d| d.as_str());
    run_target(&binaries(p), default_run, value(&["--bin"])).err()
}

/// What is wrong with the commands of these documents, one line each.
fn faults(documents: &[(String, String)]) -> Vec<String> {
    let root = root();
    let packages = packages(&root);
    let mut faults = Vec::new();
    for (name, text) in documents {
        let shown = match commands_of(name, text) {
            Ok(s) => s,
            Err(e) => {
                faults.push(e);
                continue;
            }
        };
        for Shown { place, words } in shown {
            let fault = if words[0] == "hel" {
                hel_error(&words)
            } else {
                cargo_error(&words, &packages, &root)
            };
            if let Some(f) = fault {
                faults.push(format!("{place}: `{}`: {f}", words.join(" ")));
            }
        }
    }
    faults
}

/// README.md and every docs/*.md.
fn documents() -> Vec<(String, String)> {
    let root = root();
    let mut names = vec!["README.md".to_string()];
    let mut pages: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ holds the guide")
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    pages.sort();
    names.extend(pages);
    names
        .into_iter()
        .map(|n| {
            let text =
                std::fs::read_to_string(root.join(&n)).unwrap_or_else(|e| panic!("{n}: {e}"));
            (n, text)
        })
        .collect()
}

#[test]
fn every_command_the_documents_show_runs_as_written() {
    let docs = documents();
    assert!(
        docs.iter().any(|(n, _)| n == "docs/README.md"),
        "docs/README.md (the guide's index) is missing"
    );
    let counted: usize = docs
        .iter()
        .map(|(n, t)| commands_of(n, t).map(|c| c.len()).unwrap_or(0))
        .sum();
    // The README alone shows more than this: finding none means the
    // extraction broke, not that every command is right.
    assert!(
        counted >= 20,
        "only {counted} commands found in the documents"
    );
    let faults = faults(&docs);
    assert!(
        faults.is_empty(),
        "commands in the documents that do not run as written:\n{}",
        faults.join("\n")
    );
}

#[test]
fn a_wrong_command_in_a_document_is_found() {
    let doc = "text `hel nothing` is not a block\n\
               ```sh\n\
               hel -p \"fine\"   # a comment\n\
               hel sesions\n\
               HEL_MODEL=m hel resume 4da5 --no-such-flag\n\
               hel sessions export 4da5 --format md > out.md\n\
               cargo run --release -p hel-bench -- --quick\n\
               cargo run -p hel-no-such-crate\n\
               cargo run -p hel-bench --bin hel-nothing\n\
               ```\n\
               ```\n\
               hel 4da5 · 1% › a prompt line, not a command\n\
               $ hel gc --dry-run --repack\n\
               $ hel diff 4da5 \\\n\
                 --stat --json\n\
               ```\n";
    let faults = faults(&[("doc.md".into(), doc.into())]);
    let places: Vec<&str> = faults
        .iter()
        .map(|f| f.split(": ").next().unwrap_or(""))
        .collect();
    assert_eq!(
        places,
        [
            "doc.md:4",
            "doc.md:5",
            "doc.md:8",
            "doc.md:9",
            "doc.md:13",
            "doc.md:14"
        ],
        "{faults:#?}"
    );
}

#[test]
fn cargo_run_needs_one_binary_or_a_default() {
    let two = ["hel-bench".to_string(), "hel-dictionary".to_string()];
    assert!(run_target(&two, None, None)
        .unwrap_err()
        .contains("could not determine"));
    assert_eq!(
        run_target(&two, Some("hel-bench"), None).unwrap(),
        "hel-bench"
    );
    assert_eq!(
        run_target(&two, Some("hel-bench"), Some("hel-dictionary")).unwrap(),
        "hel-dictionary"
    );
    assert!(run_target(&two, Some("hel-nothing"), None).is_err());
    assert_eq!(run_target(&two[..1], None, None).unwrap(), "hel-bench");
}

#[test]
fn command_lines_split_as_a_shell_splits_them() {
    let s = |l: &str| split(l).unwrap();
    assert_eq!(
        s(r#"hel -p "a \"b\" c" 'd e'"#),
        ["hel", "-p", "a \"b\" c", "d e"]
    );
    assert_eq!(
        s("hel sessions --json | jq . # x"),
        ["hel", "sessions", "--json"]
    );
    assert_eq!(s("hel fsck 2>/dev/null"), ["hel", "fsck"]);
    assert_eq!(s(r"hel a\ b"), ["hel", "a b"]);
    assert!(split("hel -p \"open").is_err());
}
