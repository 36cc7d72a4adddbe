//! Opening a remote's object store: S3 (any S3-compatible server) through
//! `object_store`'s client, or a local directory through
//! [`LockedDir`]. Nothing here logs or stores a credential.

use std::fmt;
use std::ops::Range;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use crate::config::RemoteConfig;
use crate::error::{RemoteError, Result};
use crate::url::{self, Location};

/// An open object store and the key prefix hel's keys go under.
pub struct Backend {
    pub store: Arc<dyn ObjectStore>,
    pub prefix: String,
}

/// Open the store `config` names. A directory remote is created when
/// `create` is set (remote add), and must exist otherwise.
pub fn open(name: &str, config: &RemoteConfig, create: bool) -> Result<Backend> {
    let store_err = |source| RemoteError::Store {
        remote: name.to_owned(),
        source,
    };
    match url::parse(&config.url)? {
        Location::Dir { path } => {
            if create {
                std::fs::create_dir_all(&path).map_err(|source| RemoteError::Io {
                    remote: name.to_owned(),
                    what: format!("cannot create {}", path.display()),
                    source,
                })?;
            }
            let local = LocalFileSystem::new_with_prefix(&path).map_err(store_err)?;
            Ok(Backend {
                store: Arc::new(LockedDir::new(local, path)),
                prefix: String::new(),
            })
        }
        Location::S3 { bucket, prefix } => {
            let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
            if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
                if let Some(c) = aws_profile_credentials() {
                    b = b
                        .with_access_key_id(c.key_id)
                        .with_secret_access_key(c.secret);
                    if let Some(t) = c.token {
                        b = b.with_token(t);
                    }
                }
            }
            let region = config
                .region
                .clone()
                .or_else(|| std::env::var("AWS_REGION").ok())
                .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
                .or_else(aws_profile_region);
            if let Some(r) = region {
                b = b.with_region(r);
            }
            if let Some(e) = &config.endpoint {
                url::check_endpoint(e)?;
                b = b.with_endpoint(e).with_allow_http(e.starts_with("http://"));
            }
            let s3 = b.build().map_err(store_err)?;
            Ok(Backend {
                store: Arc::new(s3),
                prefix,
            })
        }
    }
}

struct Credentials {
    key_id: String,
    secret: String,
    token: Option<String>,
}

fn aws_file(var: &str, name: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".aws").join(name)))
}

/// The keys of `[section]` in an INI file of AWS's (at most 1 MiB).
fn ini_section(path: &FsPath, section: &str) -> Option<Vec<(String, String)>> {
    // The user's own file: a link is followed; a FIFO does not block.
    let file = std::fs::File::from(hel_fs::at::open_read_following(path).ok()?);
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let bytes = hel_fs::read_bounded(&file, 1 << 20, path).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = h.trim() == section;
            continue;
        }
        if inside {
            if let Some((k, v)) = line.split_once('=') {
                out.push((k.trim().to_owned(), v.trim().to_owned()));
            }
        }
    }
    Some(out)
}

fn profile() -> String {
    std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into())
}

/// Static credentials of the AWS profile (`AWS_PROFILE`, default
/// `default`) from the shared credentials file.
fn aws_profile_credentials() -> Option<Credentials> {
    let path = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials")?;
    let keys = ini_section(&path, &profile())?;
    let get = |k: &str| keys.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    Some(Credentials {
        key_id: get("aws_access_key_id")?,
        secret: get("aws_secret_access_key")?,
        token: get("aws_session_token"),
    })
}

/// The region of the AWS profile from the shared config file.
fn aws_profile_region() -> Option<String> {
    let path = aws_file("AWS_CONFIG_FILE", "config")?;
    let p = profile();
    let section = if p == "default" {
        p
    } else {
        format!("profile {p}")
    };
    let keys = ini_section(&path, &section)?;
    keys.into_iter()
        .find(|(n, _)| n == "region")
        .map(|(_, v)| v)
}

/// A local directory as an object store with compare-and-swap:
/// `object_store`'s local backend makes create-only puts atomic (a hard
/// link) but has no `PutMode::Update`; here an update holds an exclusive
/// lock on `.hel-remote.lock` in the directory while it compares the
/// current ETag and replaces the file (itself an atomic rename). Every
/// hel that writes refs there takes the same lock, so updates are atomic
/// among them (on a local or a lock-honouring network file system).
#[derive(Debug)]
pub struct LockedDir {
    inner: LocalFileSystem,
    root: PathBuf,
}

impl LockedDir {
    pub fn new(inner: LocalFileSystem, root: PathBuf) -> Self {
        LockedDir { inner, root }
    }

    async fn lock(&self) -> object_store::Result<std::fs::File> {
        let path = self.root.join(".hel-remote.lock");
        tokio::task::spawn_blocking(move || {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)?;
            f.lock()?;
            Ok::<_, std::io::Error>(f)
        })
        .await
        .map_err(|e| object_store::Error::Generic {
            store: "LockedDir",
            source: Box::new(e),
        })?
        .map_err(|e| object_store::Error::Generic {
            store: "LockedDir",
            source: Box::new(e),
        })
    }
}

impl fmt::Display for LockedDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockedDir({})", self.root.display())
    }
}

#[async_trait]
impl ObjectStore for LockedDir {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let PutMode::Update(version) = &opts.mode else {
            return self.inner.put_opts(location, payload, opts).await;
        };
        let _guard = self.lock().await?;
        let current = match self.inner.head(location).await {
            Ok(m) => m.e_tag,
            Err(object_store::Error::NotFound { path, source }) => {
                return Err(object_store::Error::Precondition { path, source })
            }
            Err(e) => return Err(e),
        };
        if current.is_none() || current != version.e_tag {
            return Err(object_store::Error::Precondition {
                path: location.to_string(),
                source: "the object's ETag is not the one given".into(),
            });
        }
        let opts = PutOptions {
            mode: PutMode::Overwrite,
            ..opts
        };
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_range(
        &self,
        location: &Path,
        range: Range<u64>,
    ) -> object_store::Result<bytes::Bytes> {
        self.inner.get_range(location, range).await
    }

    async fn head(&self, location: &Path) -> object_store::Result<ObjectMeta> {
        self.inner.head(location).await
    }

    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        let _guard = self.lock().await?;
        self.inner.delete(location).await
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy(from, to).await
    }

    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy_if_not_exists(from, to).await
    }
}
