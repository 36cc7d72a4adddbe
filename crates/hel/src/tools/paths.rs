//! The file tools' boundary: every path is resolved (`..`, symlinks) and
//! must stay inside the project; `.hel/` is closed except for the spill the
//! current session holds (checked by the caller through [`Resolved::Store`]).

use std::path::{Component, Path, PathBuf};

/// Where a path leads.
#[derive(Debug, PartialEq)]
pub enum Resolved {
    /// A project file (absolute, symlinks resolved as far as it exists).
    File(PathBuf),
    /// A path under `.hel/`, given relative to the project with `..`
    /// removed; only spill lookups may use it.
    Store(String),
}

/// Resolve `path` (relative to `project`, or absolute) for reading or
/// writing. `project` must be canonical. Errors are messages for the model.
pub fn resolve(project: &Path, path: &str) -> Result<Resolved, String> {
    if path.is_empty() {
        return Err("empty path".into());
    }
    let joined = if Path::new(path).is_absolute() {
        PathBuf::from(path)
    } else {
        project.join(path)
    };
    // Lexical normalization first, so `.hel/../x` and `x/../.hel` are seen for what they are.
    let mut lexical = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    let store_dir = project.join(".hel");
    if lexical.starts_with(&store_dir) {
        let rel = lexical.strip_prefix(project).unwrap_or(&lexical);
        return Ok(Resolved::Store(rel.to_string_lossy().into_owned()));
    }
    // Resolve symlinks of the longest existing ancestor, keep the rest.
    let mut existing = lexical.clone();
    let mut rest = Vec::new();
    let real = loop {
        match existing.canonicalize() {
            Ok(r) => break r,
            Err(_) => match (
                existing.file_name().map(|n| n.to_owned()),
                existing.parent(),
            ) {
                (Some(name), Some(parent)) => {
                    rest.push(name);
                    existing = parent.to_owned();
                }
                _ => return Err(format!("cannot resolve {path}")),
            },
        }
    };
    let mut full = real;
    for name in rest.into_iter().rev() {
        full.push(name);
    }
    if !full.starts_with(project) {
        return Err(format!(
            "{path} is outside the project ({}): refused",
            project.display()
        ));
    }
    if full.starts_with(&store_dir) {
        return Err(format!(
            "{path} leads into .hel/, which tools may not use: refused"
        ));
    }
    Ok(Resolved::File(full))
}

/// `abs` relative to `project`, for messages and listings.
pub fn display(project: &Path, abs: &Path) -> String {
    abs.strip_prefix(project)
        .unwrap_or(abs)
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().canonicalize().unwrap();
        std::fs::create_dir(p.join("src")).unwrap();
        assert_eq!(
            resolve(&p, "src/a.rs").unwrap(),
            Resolved::File(p.join("src/a.rs"))
        );
        assert_eq!(
            resolve(&p, "new/dir/f").unwrap(),
            Resolved::File(p.join("new/dir/f"))
        );
        assert!(resolve(&p, "../x").unwrap_err().contains("outside"));
        assert!(resolve(&p, "/etc/passwd").unwrap_err().contains("outside"));
        assert_eq!(
            resolve(&p, "src/../.hel/objects").unwrap(),
            Resolved::Store(".hel/objects".into())
        );
        std::os::unix::fs::symlink("/etc", p.join("link")).unwrap();
        assert!(resolve(&p, "link/passwd").unwrap_err().contains("outside"));
        std::fs::create_dir(p.join(".hel")).unwrap();
        std::os::unix::fs::symlink(p.join(".hel"), p.join("h")).unwrap();
        assert!(resolve(&p, "h/refs").unwrap_err().contains(".hel"));
    }
}
