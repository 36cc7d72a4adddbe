//! The user's remotes: `remotes.toml` in hel's config directory
//! (`$XDG_CONFIG_HOME/hel/`), never in a project or `.hel/`, so that a
//! cloned repository cannot make hel upload a transcript anywhere.
//!
//! ```toml
//! [remote.team]
//! url = "s3://bucket/prefix"
//! endpoint = "http://127.0.0.1:9000"   # optional: MinIO, R2, Ceph, …
//! region = "eu-west-1"                 # optional
//! ```
//!
//! It holds no credentials, and hel writes none there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{RemoteError, Result};

/// The most bytes the file may hold.
const CONFIG_MAX: u64 = 1 << 20;

/// One remote.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteConfig {
    pub url: String,
    pub endpoint: Option<String>,
    pub region: Option<String>,
}

/// The file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Remotes {
    #[serde(default)]
    pub remote: BTreeMap<String, RemoteConfig>,
}

/// Check a remote's name.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(RemoteError::BadName { name: name.into() })
    }
}

impl Remotes {
    /// Read `path` (no file: no remotes).
    pub fn load(path: &Path) -> Result<Remotes> {
        let bad = |reason: String| RemoteError::Config {
            path: path.to_owned(),
            reason,
        };
        // Not through a link, never blocking on a FIFO, at most CONFIG_MAX.
        let fd = match hel_fs::at::open_read_path(path) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(Remotes::default()),
            Err(rustix::io::Errno::LOOP) => return Err(bad("not a regular file".into())),
            Err(e) => return Err(bad(std::io::Error::from(e).to_string())),
        };
        let file = std::fs::File::from(fd);
        let meta = file.metadata().map_err(|e| bad(e.to_string()))?;
        if !meta.is_file() {
            return Err(bad("not a regular file".into()));
        }
        let bytes = match hel_fs::read_bounded(&file, CONFIG_MAX, path) {
            Ok(b) => b,
            Err(hel_fs::Error::TooLarge { .. }) => {
                return Err(bad(format!("over {CONFIG_MAX} bytes")))
            }
            Err(hel_fs::Error::Io { source, .. }) => return Err(bad(source.to_string())),
            Err(e) => return Err(bad(e.to_string())),
        };
        let text = String::from_utf8(bytes).map_err(|e| bad(e.to_string()))?;
        let remotes: Remotes = toml::from_str(&text).map_err(|e| bad(e.message().to_owned()))?;
        for (name, r) in &remotes.remote {
            check_name(name)?;
            crate::url::parse(&r.url)?;
            if let Some(e) = &r.endpoint {
                crate::url::check_endpoint(e)?;
            }
        }
        Ok(remotes)
    }

    /// Write to `path`: aside, synced, renamed, directory synced.
    pub fn save(&self, path: &Path) -> Result<()> {
        let io = |e: std::io::Error| RemoteError::Config {
            path: path.to_owned(),
            reason: e.to_string(),
        };
        let mut text =
            String::from("# hel remotes (`hel remote add|list|remove`); no credentials here\n");
        let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
        for (name, r) in &self.remote {
            text.push_str(&format!("\n[remote.{name}]\nurl = {}\n", quote(&r.url)));
            if let Some(e) = &r.endpoint {
                text.push_str(&format!("endpoint = {}\n", quote(e)));
            }
            if let Some(g) = &r.region {
                text.push_str(&format!("region = {}\n", quote(g)));
            }
        }
        let dir = path
            .parent()
            .map(Path::to_owned)
            .unwrap_or_else(|| PathBuf::from("."));
        std::fs::create_dir_all(&dir).map_err(io)?;
        let tmp = format!(".remotes.toml.{}", uuid::Uuid::new_v4().simple());
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| io(std::io::Error::other("not a file name")))?;
        let dir = hel_fs::Dir::open_path(&dir).map_err(|e| io(e.into()))?;
        dir.replace(name, text.as_bytes(), 0o666, &dir, &tmp)
            .map_err(|e| io(e.into()))
    }

    /// The remote named `name`.
    pub fn get(&self, name: &str) -> Result<&RemoteConfig> {
        self.remote.get(name).ok_or_else(|| RemoteError::NoRemote {
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hel/remotes.toml");
        assert_eq!(Remotes::load(&path).unwrap(), Remotes::default());
        let mut r = Remotes::default();
        r.remote.insert(
            "team".into(),
            RemoteConfig {
                url: "s3://bucket/p\"q".into(),
                endpoint: Some("http://127.0.0.1:9000".into()),
                region: None,
            },
        );
        r.save(&path).unwrap();
        assert_eq!(Remotes::load(&path).unwrap(), r);
        std::fs::write(&path, "[remote.x]\nurl = \"s3://bucket\"\nsecret = \"k\"\n").unwrap();
        assert!(Remotes::load(&path).is_err());
    }
}
