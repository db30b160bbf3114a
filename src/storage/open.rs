//! Opening a store from a location string: a local directory path, a `file://` URL, or an
//! object-store location `s3://bucket/prefix` / `gs://bucket/prefix`.
//!
//! The one implementation both the command line (its `DATASET` arguments) and the dataset
//! layer (the absolute references of reference views) use, so that a location means the same
//! store whichever of them opens it.

use std::path::PathBuf;
use std::sync::Arc;

use super::{CloudOptions, CloudStore, Identity, LocalStore, ObjectStore, StorageError};

/// Whether `location` names an object store (`s3://`, `gs://`, any letter case).
pub fn is_object_store(location: &str) -> bool {
    location
        .split_once("://")
        .is_some_and(|(scheme, _)| matches!(scheme.to_ascii_lowercase().as_str(), "s3" | "gs"))
}

/// The local directory `location` names (a path, or `file:///abs` / `file://localhost/abs`
/// with `%XX` escapes decoded); the reason otherwise.
pub fn local_path(location: &str) -> Result<PathBuf, String> {
    let Some((scheme, rest)) = location.split_once("://") else {
        return Ok(PathBuf::from(location));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "file" => file_url_path(rest),
        "s3" | "gs" => Err(format!(
            "{scheme}:// is an object-store location, not a local directory"
        )),
        _ => Err(format!(
            "unknown URL scheme {scheme:?} (use a directory path, a file:// URL, s3://bucket/prefix or gs://bucket/prefix)"
        )),
    }
}

fn file_url_path(rest: &str) -> Result<PathBuf, String> {
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return Err("a file:// URL needs an absolute path (file:///data/ds)".into());
    }
    percent_decode(path)
        .map(PathBuf::from)
        .ok_or_else(|| "invalid %-escape in URL".to_string())
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The store `location` names. Local directories must exist; object-store locations are not
/// contacted until the first request.
pub fn open_location(
    location: &str,
    cloud: &CloudOptions,
) -> Result<Arc<dyn ObjectStore>, StorageError> {
    if is_object_store(location) {
        return Ok(Arc::new(CloudStore::open(location, cloud)?));
    }
    let root = local_path(location).map_err(|reason| StorageError::invalid(location, reason))?;
    Ok(Arc::new(LocalStore::open(&root)?))
}

/// The local directory `location` names, with its reads confined to what `reader` could read,
/// the walk to it included (see [`LocalStore::open_as`]).
pub fn open_local_as(
    location: &str,
    reader: Arc<Identity>,
) -> Result<Arc<dyn ObjectStore>, StorageError> {
    let root = local_path(location).map_err(|reason| StorageError::invalid(location, reason))?;
    Ok(Arc::new(LocalStore::open_as(&root, reader)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths() {
        assert_eq!(local_path("/a/b").unwrap(), PathBuf::from("/a/b"));
        assert_eq!(local_path("file:///a%20b").unwrap(), PathBuf::from("/a b"));
        assert_eq!(
            local_path("file://localhost/x").unwrap(),
            PathBuf::from("/x")
        );
        assert!(local_path("file://rel").is_err());
        assert!(local_path("file:///%zz").is_err());
        assert!(local_path("s3://b/p").unwrap_err().contains("object-store"));
        assert!(local_path("http://x/y").is_err());
    }
}
