//! Resolving the paths references carry to a store and an object in it.
//!
//! A relative path names an object below the dataset root, in the dataset's own store (which
//! confines it there). An absolute location (a reference view's pointer into another dataset)
//! is opened through the storage layer's one way of opening a location
//! ([`crate::storage::open_location`]), as a store of its own: for `s3://` / `gs://` the
//! bucket's top level, the key the object path; for a local path (or `file://` URL) the
//! object's directory, the file name the object path. Stores are opened once and kept.
//!
//! Following absolute references is a reach outside the dataset root by design (the library
//! does it); an operator can turn it off with [`AbsoluteReferences::Refuse`], and then every
//! such reference fails with an error naming it.
//!
//! **Confinement.** Whoever writes a dataset chooses its references, and whoever reads it (a
//! daemon running as root, often) may be able to read more than they can. So on a local
//! dataset, when this process is not the owner of `root.json` (and that owner is not root),
//! every local read is confined to what that owner could read
//! ([`LocalStore::confine_to_owner_of`](crate::storage::LocalStore::confine_to_owner_of)):
//! objects below the root (a file planted there by a hard link, or another user's file in a
//! shared tree, would otherwise be served) and absolute local references, whose walk is
//! checked from `/`. A refused object fails like any unreadable one, with a message naming the
//! owner and the rule, and nothing about the object itself. The root's own location is the
//! operator's choice and is not checked above the root.
//!
//! Object-store credentials belong to whoever runs the reader, not to the dataset's owner; no
//! identity can be checked there. [`AbsoluteReferences::FollowSameStore`] (mounts that admit
//! other users) therefore refuses every reference that leaves the dataset's own store: a local
//! dataset naming `s3://` / `gs://` objects, an object-store dataset naming another bucket or
//! a local path.
//!
//! Generations: a reference carrying one is read at exactly that generation on GCS; local and
//! S3 stores have none, so such a reference is refused there, as the library refuses it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::error::DatasetError;
use crate::format::path::{Location, ObjectPath, RelPath};
use crate::storage::{
    is_object_store, local_path, open_local_as, open_location, CloudOptions, Identity, ObjectStore,
    StorageError,
};

/// Opens the store of an absolute location.
pub trait LocationOpener: Send + Sync + std::fmt::Debug {
    fn open(&self, location: &str) -> Result<Arc<dyn ObjectStore>, StorageError>;
}

/// [`open_location`] with fixed object-store settings.
#[derive(Debug, Clone, Default)]
pub struct StorageOpener {
    pub cloud: CloudOptions,
}

impl LocationOpener for StorageOpener {
    fn open(&self, location: &str) -> Result<Arc<dyn ObjectStore>, StorageError> {
        open_location(location, &self.cloud)
    }
}

/// What a reader does with absolute references (reference views).
#[derive(Debug, Clone)]
pub enum AbsoluteReferences {
    /// Follow them, opening stores with this opener.
    Follow(Arc<dyn LocationOpener>),
    /// Follow those that stay in the dataset's own store (local paths from a local dataset,
    /// the same bucket of the same service from an object-store dataset) and refuse the
    /// others, naming the rule: for mounts that admit other users, since the reader's
    /// credentials are not theirs.
    FollowSameStore(Arc<dyn LocationOpener>),
    /// Refuse every one with an error naming it.
    Refuse,
}

impl Default for AbsoluteReferences {
    fn default() -> Self {
        AbsoluteReferences::Follow(Arc::new(StorageOpener {
            cloud: CloudOptions::from_env(),
        }))
    }
}

/// An object a reference names: its store, its path there, whether it was absolute.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub store: Arc<dyn ObjectStore>,
    pub path: RelPath,
    pub absolute: bool,
}

impl Resolved {
    /// The object's full location, for messages.
    pub fn describe(&self) -> String {
        self.store.describe(&self.path)
    }
}

/// Which store an object lives in, as far as credentials go: the local filesystem, or one
/// bucket of one service (`s3://bucket`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum StoreKey {
    Local,
    Bucket(String),
}

impl StoreKey {
    /// The store of an absolute location.
    fn of_location(location: &str) -> StoreKey {
        if !is_object_store(location) {
            return StoreKey::Local;
        }
        let (scheme, rest) = location.split_once("://").unwrap_or((location, ""));
        let bucket = rest.split('/').next().unwrap_or("");
        StoreKey::Bucket(format!("{}://{bucket}", scheme.to_ascii_lowercase()))
    }

    /// The store of a dataset's root (as its `root.json` is described).
    fn of_root(root: &dyn ObjectStore) -> StoreKey {
        if root.as_local().is_some() {
            return StoreKey::Local;
        }
        match RelPath::new(super::reader::ROOT_JSON) {
            Ok(path) => StoreKey::of_location(&root.describe(&path)),
            Err(_) => StoreKey::Bucket(String::new()),
        }
    }

    fn describe(&self) -> &str {
        match self {
            StoreKey::Local => "the local filesystem",
            StoreKey::Bucket(bucket) => bucket,
        }
    }
}

/// The dataset's store plus the stores absolute references opened.
#[derive(Debug)]
pub(crate) struct Objects {
    root: Arc<dyn ObjectStore>,
    policy: AbsoluteReferences,
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
    /// Whose permissions local reads are confined to (see the module docs), if anyone's.
    reader: Option<Arc<Identity>>,
    /// The store the dataset itself lives in.
    home: StoreKey,
}

impl Objects {
    /// The objects of a dataset in `root`, with no confinement of their own: for callers that
    /// refuse absolute references and read below a store already opened (or confined).
    pub(crate) fn new(root: Arc<dyn ObjectStore>, policy: AbsoluteReferences) -> Objects {
        let home = StoreKey::of_root(root.as_ref());
        Objects {
            root,
            policy,
            stores: Mutex::new(HashMap::new()),
            reader: None,
            home,
        }
    }

    /// The objects of the dataset whose `root.json` is at the root of `root`: on a local
    /// store, reads are from now on confined to what the owner of `root.json` could read
    /// (unless this process is that owner).
    pub(crate) fn open(
        root: Arc<dyn ObjectStore>,
        policy: AbsoluteReferences,
    ) -> Result<Objects, DatasetError> {
        let reader = match root.as_local() {
            Some(local) => {
                let root_json = RelPath::new(super::reader::ROOT_JSON)
                    .map_err(|e| DatasetError::corrupt(super::reader::ROOT_JSON, e.to_string()))?;
                local.confine_to_owner_of(&root_json)?
            }
            None => None,
        };
        Ok(Objects {
            reader,
            ..Objects::new(root, policy)
        })
    }

    pub(crate) fn root(&self) -> &Arc<dyn ObjectStore> {
        &self.root
    }

    /// The full location of `path`, for messages (no store is opened).
    pub(crate) fn describe(&self, path: &ObjectPath) -> String {
        match path {
            ObjectPath::Relative(path) => self.root.describe(path),
            ObjectPath::Absolute(location) => location.to_string(),
        }
    }

    /// The store and object `path` names, with `generation` checked to be readable there.
    pub(crate) fn resolve(
        &self,
        path: &ObjectPath,
        generation: Option<u64>,
    ) -> Result<Resolved, DatasetError> {
        let resolved = match path {
            ObjectPath::Relative(path) => Resolved {
                store: self.root.clone(),
                path: path.clone(),
                absolute: false,
            },
            ObjectPath::Absolute(location) => self.resolve_absolute(location)?,
        };
        if generation.is_some() && !has_generations(resolved.store.as_ref()) {
            return Err(DatasetError::corrupt(
                resolved.describe(),
                "the reference carries a generation, but only GCS objects have generations \
                 (local and S3 stores do not): the reference cannot be honoured",
            ));
        }
        Ok(resolved)
    }

    fn resolve_absolute(&self, location: &Location) -> Result<Resolved, DatasetError> {
        let opener = match &self.policy {
            AbsoluteReferences::Follow(opener) => opener,
            AbsoluteReferences::FollowSameStore(opener) => {
                self.check_same_store(location)?;
                opener
            }
            AbsoluteReferences::Refuse => {
                return Err(DatasetError::Refused {
                    object: location.as_str().to_string(),
                    detail: "absolute reference refused: following absolute references is \
                             turned off (--no-absolute-references)"
                        .to_string(),
                })
            }
        };
        let bad = |why: String| DatasetError::corrupt(location.as_str(), why);
        let (store_location, name) = split_location(location).map_err(bad)?;
        let path = RelPath::new(name).map_err(|e| bad(e.to_string()))?;
        let store = self.store(opener.as_ref(), &store_location)?;
        Ok(Resolved {
            store,
            path,
            absolute: true,
        })
    }

    /// Refuses a reference that leaves the dataset's own store.
    fn check_same_store(&self, location: &Location) -> Result<(), DatasetError> {
        let target = StoreKey::of_location(location.as_str());
        if target == self.home {
            return Ok(());
        }
        Err(DatasetError::Refused {
            object: location.as_str().to_string(),
            detail: format!(
                "cross-store reference refused: the dataset lives in {} and this reference \
                 leaves it for {}; the mount admits other users (allow_other), and the daemon's \
                 credentials are not theirs (allow with --cross-store-references or \
                 -o cross_store_references)",
                self.home.describe(),
                target.describe()
            ),
        })
    }

    fn store(
        &self,
        opener: &dyn LocationOpener,
        location: &str,
    ) -> Result<Arc<dyn ObjectStore>, DatasetError> {
        if let Some(store) = self.lock().get(location) {
            return Ok(store.clone());
        }
        // Opened outside the lock: a local open touches the filesystem. Two threads opening
        // the same location both succeed; the second insert replaces an equivalent store.
        let store = match &self.reader {
            Some(reader) if !is_object_store(location) => open_local_as(location, reader.clone())?,
            _ => opener.open(location)?,
        };
        self.lock().insert(location.to_string(), store.clone());
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<dyn ObjectStore>>> {
        self.stores.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Local stores report mtime "generations" for their own compare-and-swap, but a persisted
/// generation only ever meant a GCS object generation.
fn has_generations(store: &dyn ObjectStore) -> bool {
    store.as_local().is_none() && store.supports_generations()
}

/// Splits an absolute location into the location of the store to open and the object's
/// path in it: `scheme://bucket` + key for object stores, directory + file name for local
/// paths.
fn split_location(location: &Location) -> Result<(String, String), String> {
    let text = location.as_str();
    if let Some((scheme, rest)) = text.split_once("://") {
        if scheme != "file" {
            let (bucket, key) = rest
                .split_once('/')
                .ok_or_else(|| "the location names a bucket, not an object".to_string())?;
            return Ok((format!("{scheme}://{bucket}"), key.to_string()));
        }
    }
    let path = local_path(text)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| "the location names no file".to_string())?
        .to_string();
    let dir = path
        .parent()
        .map(|p| p.display().to_string())
        .ok_or_else(|| "the location names no file".to_string())?;
    Ok((dir, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Result<(String, String), String> {
        split_location(&Location::new(text).unwrap())
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
        let bucket = |b: &str| StoreKey::Bucket(b.to_string());
        assert_eq!(StoreKey::of_location("/d/x.arrayrecord"), StoreKey::Local);
        assert_eq!(StoreKey::of_location("file:///d/x"), StoreKey::Local);
        assert_eq!(StoreKey::of_location("s3://b/p/x"), bucket("s3://b"));
        assert_eq!(StoreKey::of_location("S3://b/p/x"), bucket("s3://b"));
        assert_ne!(StoreKey::of_location("gs://b/p/x"), bucket("s3://b"));
        assert_ne!(StoreKey::of_location("s3://other/p"), bucket("s3://b"));
    }
}
