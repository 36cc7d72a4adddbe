//! Run the detector over files as text and print each finding (path,
//! line, kind, its first characters) and a count: how the false-alarm
//! figures of docs/security.md were measured on other projects' trees.
//!
//! ```text
//! cargo run -p hel-secrets --example scan -- DIR_OR_FILE...
//! ```
//!
//! Files that are not UTF-8 text, and files over 4 MiB, are skipped; no
//! environment value is looked for (only the rules and assignments).

use std::path::Path;

use hel_secrets::Detector;

fn main() {
    let d = Detector::new(Vec::<(String, String)>::new());
    let (mut files, mut bytes, mut found) = (0u64, 0u64, 0u64);
    for root in std::env::args().skip(1) {
        for e in walkdir::WalkDir::new(&root)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
        {
            let path = e.path();
            if path.components().any(|c| c.as_os_str() == ".git") {
                continue;
            }
            if e.metadata().map_or(true, |m| m.len() > 4 << 20) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            files += 1;
            bytes += text.len() as u64;
            for f in d.detect(&text) {
                found += 1;
                let line = text[..f.range.start].matches('\n').count() + 1;
                let shown: String = text[f.range].chars().take(24).collect();
                println!("{}:{line}: {} {shown}…", rel(&root, path), f.kind);
            }
        }
    }
    println!("{files} files, {} KiB, {found} findings", bytes >> 10);
}

fn rel(root: &str, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}
