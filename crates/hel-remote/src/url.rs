//! Remote URLs: `s3://bucket/prefix` and `file:///absolute/path`. A URL
//! with credentials in it (`user:secret@`) is refused: credentials come
//! from the environment and AWS's own files, never from hel's config.

use std::path::PathBuf;

use crate::error::{RemoteError, Result};

/// Where a remote is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// An S3 bucket and a key prefix (no leading or trailing `/`; may be
    /// empty).
    S3 { bucket: String, prefix: String },
    /// A directory (absolute).
    Dir { path: PathBuf },
}

fn bad(url: &str, reason: &'static str) -> RemoteError {
    RemoteError::BadUrl {
        url: redact(url),
        reason,
    }
}

/// `url` with anything between `://` and `@` hidden, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(a)) if a > s => format!("{}://…{}", &url[..s], &url[a..]),
        _ => url.to_owned(),
    }
}

fn check_segments(url: &str, path: &str) -> Result<()> {
    for seg in path.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(bad(url, "empty, '.' or '..' path segments are not allowed"));
        }
        if seg.chars().any(|c| c.is_control() || c == '\\') {
            return Err(bad(url, "control characters and '\\' are not allowed"));
        }
    }
    Ok(())
}

/// Parse a remote URL.
pub fn parse(url: &str) -> Result<Location> {
    if url.contains('?') || url.contains('#') {
        return Err(bad(url, "queries and fragments are not allowed"));
    }
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.contains('@') || bucket.contains(':') {
            return Err(bad(
                url,
                "credentials in a URL are refused: use the AWS environment variables or ~/.aws/credentials",
            ));
        }
        let ok = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
        if !ok {
            return Err(bad(url, "the bucket name is not a valid S3 bucket name"));
        }
        let prefix = prefix.trim_end_matches('/');
        if !prefix.is_empty() {
            check_segments(url, prefix)?;
        }
        return Ok(Location::S3 {
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        });
    }
    if let Some(rest) = url.strip_prefix("file://") {
        if !rest.starts_with('/') {
            return Err(bad(url, "use file:///absolute/path (no host)"));
        }
        let path = rest.trim_end_matches('/');
        if path.is_empty() {
            return Err(bad(url, "the root directory cannot be a remote"));
        }
        check_segments(url, &path[1..])?;
        return Ok(Location::Dir {
            path: PathBuf::from(path),
        });
    }
    Err(bad(url, "use s3://bucket/prefix or file:///path"))
}

/// Check an `--endpoint` URL: http(s), no credentials.
pub fn check_endpoint(endpoint: &str) -> Result<()> {
    let rest = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
        .ok_or_else(|| bad(endpoint, "an endpoint is an http:// or https:// URL"))?;
    let authority = rest.split('/').next().unwrap_or("");
    if authority.contains('@') {
        return Err(bad(
            endpoint,
            "credentials in a URL are refused: use the AWS environment variables or ~/.aws/credentials",
        ));
    }
    if authority.is_empty() {
        return Err(bad(endpoint, "the endpoint has no host"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse("s3://my-bucket/team/hel/").unwrap(),
            Location::S3 {
                bucket: "my-bucket".into(),
                prefix: "team/hel".into()
            }
        );
        assert_eq!(
            parse("file:///srv/hel").unwrap(),
            Location::Dir {
                path: "/srv/hel".into()
            }
        );
        for bad in [
            "s3://AKIA:secret@bucket/x",
            "s3://b/x",
            "s3://bucket/a/../b",
            "file://host/x",
            "file:///",
            "http://x",
            "s3://bucket/x?y=1",
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(!e.contains("secret"), "{e}");
        }
        assert!(check_endpoint("http://127.0.0.1:9000").is_ok());
        let e = check_endpoint("http://k:secret@127.0.0.1:9000")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("secret"), "{e}");
    }
}
