//! Where a store is: a local directory, or a prefix of an object-store bucket. Parsed once,
//! from a command-line argument, a mount option, a receipt or a reference, and then passed
//! down as a [`Location`]; this is the one place a location's scheme is read.
//!
//! Accepted forms: a directory path, a `file://` URL (`file:///abs` or
//! `file://localhost/abs`, `%XX` escapes decoded), `s3://bucket/prefix`, `gs://bucket/prefix`.
//! Schemes are matched in any letter case.

use std::path::PathBuf;
use std::sync::Arc;

use crate::format::path::split_scheme;

use super::{
    CloudOptions, CloudStore, CloudUrl, Identity, LocalStore, LocationError, ObjectStore,
    StorageError,
};

/// A parsed store location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local directory.
    Local(PathBuf),
    /// A bucket of an object store, and a key prefix in it.
    Cloud(CloudUrl),
}

/// Which store an object lives in, as far as credentials go: the local filesystem, or one
/// bucket of one service (`s3://bucket`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKey {
    Local,
    Bucket(String),
}

impl StoreKey {
    /// The store, for messages.
    pub fn describe(&self) -> &str {
        match self {
            StoreKey::Local => "the local filesystem",
            StoreKey::Bucket(bucket) => bucket,
        }
    }
}

impl Location {
    /// Parses a store location; the reason it names none otherwise.
    pub fn parse(text: &str) -> Result<Location, LocationError> {
        let Some((scheme, rest)) = split_scheme(text) else {
            return Ok(Location::Local(PathBuf::from(text)));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "file" => file_url_path(rest).map(Location::Local),
            "s3" | "gs" => CloudUrl::parse(text).map(Location::Cloud),
            _ => Err(LocationError::UnknownScheme(scheme.to_string())),
        }
    }

    /// Whether `text` names an object store (`s3://`, `gs://`, any letter case), without
    /// checking the rest.
    pub fn names_object_store(text: &str) -> bool {
        split_scheme(text).is_some_and(|(scheme, _)| {
            scheme.eq_ignore_ascii_case("s3") || scheme.eq_ignore_ascii_case("gs")
        })
    }

    /// Splits the location of one object into the location of the store to open and the
    /// object's path in it: `scheme://bucket` and the key for object stores, the directory and
    /// the file name for local paths.
    pub fn parse_object(text: &str) -> Result<(Location, String), LocationError> {
        if let Some((scheme, rest)) =
            split_scheme(text).filter(|_| Location::names_object_store(text))
        {
            let (bucket, key) = rest.split_once('/').ok_or(LocationError::BucketNotObject)?;
            let store = Location::parse(&format!("{scheme}://{bucket}"))?;
            return Ok((store, key.to_string()));
        }
        let path = Location::parse(text)?.local_path()?;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or(LocationError::NoFile)?;
        let dir = path.parent().ok_or(LocationError::NoFile)?;
        Ok((Location::Local(dir.to_path_buf()), name.to_string()))
    }

    /// The local directory, or why an object-store location is none.
    pub fn local_path(self) -> Result<PathBuf, LocationError> {
        match self {
            Location::Local(path) => Ok(path),
            Location::Cloud(url) => Err(LocationError::NotLocal(url.service.scheme())),
        }
    }

    pub fn is_local(&self) -> bool {
        matches!(self, Location::Local(_))
    }

    /// The backend's name in statistics: `local`, `s3`, `gcs`.
    pub fn backend(&self) -> &'static str {
        match self {
            Location::Local(_) => "local",
            Location::Cloud(url) => match url.service {
                super::Service::S3 => "s3",
                super::Service::Gcs => "gcs",
            },
        }
    }

    /// The store as far as credentials go.
    pub fn store_key(&self) -> StoreKey {
        match self {
            Location::Local(_) => StoreKey::Local,
            Location::Cloud(url) => {
                StoreKey::Bucket(format!("{}://{}", url.service.scheme(), url.bucket))
            }
        }
    }

    /// What the store's [`describe`](ObjectStore::describe) puts before a relative path.
    pub fn object_prefix(&self) -> String {
        let text = self.to_string();
        if text.ends_with('/') {
            text
        } else {
            format!("{text}/")
        }
    }

    /// Opens the store. A local directory must exist; an object store is not contacted until
    /// the first request.
    pub fn open(&self, cloud: &CloudOptions) -> Result<Arc<dyn ObjectStore>, StorageError> {
        Ok(match self {
            Location::Local(root) => Arc::new(LocalStore::open(root)?),
            Location::Cloud(url) => Arc::new(CloudStore::open_url(url.clone(), cloud)?),
        })
    }

    /// Opens the store with its local reads confined to what `reader` could read, the walk to
    /// it included (see [`LocalStore::open_as`]); object stores open as [`open`](Self::open).
    pub fn open_as(
        &self,
        cloud: &CloudOptions,
        reader: Arc<Identity>,
    ) -> Result<Arc<dyn ObjectStore>, StorageError> {
        match self {
            Location::Local(root) => Ok(Arc::new(LocalStore::open_as(root, reader)?)),
            Location::Cloud(_) => self.open(cloud),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Local(path) => write!(f, "{}", path.display()),
            Location::Cloud(url) => write!(f, "{url}"),
        }
    }
}

fn file_url_path(rest: &str) -> Result<PathBuf, LocationError> {
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return Err(LocationError::RelativeFileUrl);
    }
    percent_decode(path)
        .map(PathBuf::from)
        .ok_or(LocationError::InvalidEscape)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn local(text: &str) -> Result<PathBuf, LocationError> {
        Location::parse(text)?.local_path()
    }

    #[test]
    fn local_paths() {
        assert_eq!(local("/a/b").unwrap(), PathBuf::from("/a/b"));
        assert_eq!(local("file:///a%20b").unwrap(), PathBuf::from("/a b"));
        assert_eq!(local("FILE:///a").unwrap(), PathBuf::from("/a"));
        assert_eq!(local("file://localhost/x").unwrap(), PathBuf::from("/x"));
        assert!(local("file://rel").is_err());
        assert!(local("file:///%zz").is_err());
        assert!(local("s3://b/p")
            .unwrap_err()
            .to_string()
            .contains("object-store"));
        assert!(local("http://x/y").is_err());
    }

    #[test]
    fn object_stores_in_any_letter_case() {
        assert!(Location::names_object_store("S3://b/p") && Location::names_object_store("gs://b"));
        assert!(!Location::names_object_store("file:///x") && !Location::names_object_store("/x"));
        let parsed = Location::parse("GS://b/p").unwrap();
        assert_eq!(parsed.backend(), "gcs");
        assert_eq!(parsed.store_key(), StoreKey::Bucket("gs://b".into()));
        assert_eq!(parsed.object_prefix(), "gs://b/p/");
        assert_eq!(Location::parse("/d").unwrap().object_prefix(), "/d/");
    }

    fn split(text: &str) -> Result<(String, String), LocationError> {
        Location::parse_object(text).map(|(store, name)| (store.to_string(), name))
    }

    #[test]
    fn splits_locations_into_store_and_object() {
        assert_eq!(
            split("gs://b/p/objects/data/ab/x.arrayrecord").unwrap(),
            ("gs://b".into(), "p/objects/data/ab/x.arrayrecord".into())
        );
        assert_eq!(
            split("/d/objects/x.arrayrecord").unwrap(),
            ("/d/objects".into(), "x.arrayrecord".into())
        );
        assert_eq!(
            split("file:///d/a%20b.arrayrecord").unwrap(),
            ("/d".into(), "a b.arrayrecord".into())
        );
        assert!(split("s3://bucket").is_err());
        assert!(split("/").is_err());
    }

    #[test]
    fn stores_are_the_local_filesystem_or_one_bucket_of_one_service() {
        let key = |text: &str| Location::parse_object(text).unwrap().0.store_key();
        let bucket = |b: &str| StoreKey::Bucket(b.to_string());
        assert_eq!(key("/d/x.arrayrecord"), StoreKey::Local);
        assert_eq!(key("file:///d/x"), StoreKey::Local);
        assert_eq!(key("s3://b/p/x"), bucket("s3://b"));
        assert_eq!(key("S3://b/p/x"), bucket("s3://b"));
        assert_ne!(key("gs://b/p/x"), bucket("s3://b"));
        assert_ne!(key("s3://other/p"), bucket("s3://b"));
    }
}
