//! Resolving the paths references carry to a store and an object in it.
//!
//! A relative path names an object below the dataset root, in the dataset's own store (which
//! confines it there). An absolute location (a reference view's pointer into another dataset)
//! is parsed once into a [`Location`] and opened as a store of its own: for `s3://` / `gs://` the
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
use crate::format::path::{self, ObjectPath, RelPath};
use crate::storage::{CloudOptions, Identity, Location, ObjectStore, StorageError, StoreKey};

/// Opens the store of an absolute location.
pub trait LocationOpener: Send + Sync + std::fmt::Debug {
    /// Opens `location`; local reads confined to what `reader` could read when given.
    fn open(
        &self,
        location: &Location,
        reader: Option<Arc<Identity>>,
    ) -> Result<Arc<dyn ObjectStore>, StorageError>;
}

/// [`Location::open`] with fixed object-store settings.
#[derive(Debug, Clone, Default)]
pub struct StorageOpener {
    pub cloud: CloudOptions,
}

impl LocationOpener for StorageOpener {
    fn open(
        &self,
        location: &Location,
        reader: Option<Arc<Identity>>,
    ) -> Result<Arc<dyn ObjectStore>, StorageError> {
        match reader {
            Some(reader) => location.open_as(&self.cloud, reader),
            None => location.open(&self.cloud),
        }
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
        let home = root.location().store_key();
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
        let root_json = RelPath::new(super::reader::ROOT_JSON)
            .map_err(|e| DatasetError::corrupt(super::reader::ROOT_JSON, e.to_string()))?;
        let reader = root.confine_to_owner_of(&root_json)?;
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
        if generation.is_some() && !resolved.store.persists_generations() {
            return Err(DatasetError::corrupt(
                resolved.describe(),
                "the reference carries a generation, but only GCS objects have generations \
                 (local and S3 stores do not): the reference cannot be honoured",
            ));
        }
        Ok(resolved)
    }

    fn resolve_absolute(&self, location: &path::AbsolutePath) -> Result<Resolved, DatasetError> {
        let bad = |why: String| DatasetError::corrupt(location.as_str(), why);
        let (store_location, name) =
            Location::parse_object(location.as_str()).map_err(|e| bad(e.to_string()))?;
        let opener = match &self.policy {
            AbsoluteReferences::Follow(opener) => opener,
            AbsoluteReferences::FollowSameStore(opener) => {
                self.check_same_store(location, &store_location)?;
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
        let path = RelPath::new(name).map_err(|e| bad(e.to_string()))?;
        let store = self.store(opener.as_ref(), &store_location)?;
        Ok(Resolved {
            store,
            path,
            absolute: true,
        })
    }

    /// Refuses a reference that leaves the dataset's own store.
    fn check_same_store(
        &self,
        location: &path::AbsolutePath,
        store: &Location,
    ) -> Result<(), DatasetError> {
        let target = store.store_key();
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
        location: &Location,
    ) -> Result<Arc<dyn ObjectStore>, DatasetError> {
        let key = location.to_string();
        if let Some(store) = self.lock().get(&key) {
            return Ok(store.clone());
        }
        // Opened outside the lock: a local open touches the filesystem. Two threads opening
        // the same location both succeed; the second insert replaces an equivalent store.
        let store = opener.open(location, self.reader.clone())?;
        self.lock().insert(key, store.clone());
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<dyn ObjectStore>>> {
        self.stores.lock().unwrap_or_else(|e| e.into_inner())
    }
}
