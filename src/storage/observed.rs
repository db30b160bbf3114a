//! The one way to wrap a store: [`Observed`] forwards every operation to the store it wraps
//! and reports each request, with its outcome, to a [`StoreObserver`] (a mount's statistics,
//! a test's call log). A method added to [`ObjectStore`] is forwarded here, once.
//!
//! A wrapper is either transparent ([`Observed::transparent`]: the wrapped store's local
//! capabilities, so a local store keeps reading straight into buffers, hard-linking and
//! confining reads) or opaque ([`Observed::opaque`]: no local capabilities, so every read is
//! a `read`/`read_range` request the observer sees, as through a remote store).

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::{
    CreateOutcome, Identity, LocalObject, LocalRange, Location, ObjectInfo, ObjectStore,
    StorageError, Version,
};
use crate::format::path::RelPath;

/// One kind of request a store serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOp {
    Read,
    ReadLimited,
    ReadRange,
    /// A range opened as a local file for a direct read (counted as read once opened).
    OpenLocalRange,
    Info,
    Create,
    CreateFromFile,
    AdoptFile,
    ReadVersioned,
    CompareAndSwap,
}

impl StoreOp {
    /// The operation's name: the trait method it stands for.
    pub fn name(self) -> &'static str {
        match self {
            StoreOp::Read => "read",
            StoreOp::ReadLimited => "read_limited",
            StoreOp::ReadRange => "read_range",
            StoreOp::OpenLocalRange => "open_local_range",
            StoreOp::Info => "info",
            StoreOp::Create => "create",
            StoreOp::CreateFromFile => "create_from_file",
            StoreOp::AdoptFile => "adopt_file",
            StoreOp::ReadVersioned => "read_versioned",
            StoreOp::CompareAndSwap => "compare_and_swap",
        }
    }
}

/// Told of every request an [`Observed`] store served: the operation, the object, and the
/// bytes it read (0 for requests that read no content) or the error.
pub trait StoreObserver: Send + Sync + std::fmt::Debug {
    /// `store` is the wrapped store (to describe `path` with).
    fn observe(
        &self,
        store: &dyn ObjectStore,
        op: StoreOp,
        path: &RelPath,
        outcome: Result<u64, &StorageError>,
    );
}

/// A store that forwards to another and reports every request to an observer.
#[derive(Debug)]
pub struct Observed<O> {
    inner: Arc<dyn ObjectStore>,
    observer: O,
    /// Whether the wrapped store's local capabilities show through.
    transparent: bool,
}

impl<O: StoreObserver> Observed<O> {
    /// A transparent wrapper: the wrapped store's local capabilities show through.
    pub fn transparent(inner: Arc<dyn ObjectStore>, observer: O) -> Self {
        Observed {
            inner,
            observer,
            transparent: true,
        }
    }

    /// An opaque wrapper: no local capabilities, so the trait's generic paths apply (reads
    /// through `read_range`, copies by reading and creating, no staging, no confinement).
    pub fn opaque(inner: Arc<dyn ObjectStore>, observer: O) -> Self {
        Observed {
            transparent: false,
            ..Observed::transparent(inner, observer)
        }
    }

    pub fn observer(&self) -> &O {
        &self.observer
    }

    pub fn inner(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }

    fn seen<T>(
        &self,
        op: StoreOp,
        path: &RelPath,
        result: Result<T, StorageError>,
        bytes: impl Fn(&T) -> u64,
    ) -> Result<T, StorageError> {
        let outcome = result.as_ref().map(&bytes);
        self.observer
            .observe(self.inner.as_ref(), op, path, outcome);
        result
    }
}

fn len(bytes: &Bytes) -> u64 {
    bytes.len() as u64
}

fn nothing<T>(_: &T) -> u64 {
    0
}

impl<O: StoreObserver> ObjectStore for Observed<O> {
    fn describe(&self, path: &RelPath) -> String {
        self.inner.describe(path)
    }

    fn read(&self, path: &RelPath, generation: Option<u64>) -> Result<Bytes, StorageError> {
        self.seen(StoreOp::Read, path, self.inner.read(path, generation), len)
    }

    fn read_limited(
        &self,
        path: &RelPath,
        generation: Option<u64>,
        max_bytes: u64,
    ) -> Result<Bytes, StorageError> {
        let result = self.inner.read_limited(path, generation, max_bytes);
        self.seen(StoreOp::ReadLimited, path, result, len)
    }

    fn read_range(
        &self,
        path: &RelPath,
        range: Range<u64>,
        generation: Option<u64>,
    ) -> Result<Bytes, StorageError> {
        let result = self.inner.read_range(path, range, generation);
        self.seen(StoreOp::ReadRange, path, result, len)
    }

    fn info(&self, path: &RelPath, generation: Option<u64>) -> Result<ObjectInfo, StorageError> {
        self.seen(
            StoreOp::Info,
            path,
            self.inner.info(path, generation),
            nothing,
        )
    }

    fn create(&self, path: &RelPath, data: &[u8]) -> Result<CreateOutcome, StorageError> {
        self.seen(
            StoreOp::Create,
            path,
            self.inner.create(path, data),
            nothing,
        )
    }

    fn create_from_file(&self, path: &RelPath, file: &Path) -> Result<CreateOutcome, StorageError> {
        let result = self.inner.create_from_file(path, file);
        self.seen(StoreOp::CreateFromFile, path, result, nothing)
    }

    fn adopt_file(&self, path: &RelPath, file: &Path) -> Result<CreateOutcome, StorageError> {
        if !self.transparent {
            return self.create_from_file(path, file);
        }
        let result = self.inner.adopt_file(path, file);
        self.seen(StoreOp::AdoptFile, path, result, nothing)
    }

    fn local_root(&self) -> Option<&Path> {
        self.inner.local_root().filter(|_| self.transparent)
    }

    fn open_local_range(
        &self,
        path: &RelPath,
        range: Range<u64>,
        generation: Option<u64>,
    ) -> Option<Result<LocalRange, StorageError>> {
        if !self.transparent {
            return None;
        }
        let total = range.end.saturating_sub(range.start);
        let result = self.inner.open_local_range(path, range, generation)?;
        Some(self.seen(StoreOp::OpenLocalRange, path, result, |_| total))
    }

    fn local_object(&self, path: &RelPath) -> Option<Result<LocalObject, StorageError>> {
        if !self.transparent {
            return None;
        }
        self.inner.local_object(path)
    }

    fn confine_to_owner_of(&self, path: &RelPath) -> Result<Option<Arc<Identity>>, StorageError> {
        if !self.transparent {
            return Ok(None);
        }
        self.inner.confine_to_owner_of(path)
    }

    fn location(&self) -> Location {
        self.inner.location()
    }

    fn read_versioned(&self, path: &RelPath) -> Result<Option<(Bytes, Version)>, StorageError> {
        let result = self.inner.read_versioned(path);
        self.seen(StoreOp::ReadVersioned, path, result, |v| {
            v.as_ref().map_or(0, |(b, _)| len(b))
        })
    }

    fn compare_and_swap(
        &self,
        path: &RelPath,
        data: &[u8],
        expected: Option<&Version>,
    ) -> Result<Version, StorageError> {
        let result = self.inner.compare_and_swap(path, data, expected);
        self.seen(StoreOp::CompareAndSwap, path, result, nothing)
    }

    fn supports_generations(&self) -> bool {
        self.inner.supports_generations()
    }

    fn persists_generations(&self) -> bool {
        self.inner.persists_generations()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::storage::{read_split, ErrorKind, LocalStore};

    #[derive(Debug, Default)]
    struct Log(Mutex<Vec<(&'static str, Outcome)>>);

    /// Bytes moved, or the failure's kind and object.
    type Outcome = Result<u64, (ErrorKind, String)>;

    impl StoreObserver for Log {
        fn observe(
            &self,
            _store: &dyn ObjectStore,
            op: StoreOp,
            _path: &RelPath,
            outcome: Result<u64, &StorageError>,
        ) {
            let outcome = outcome.map_err(|e| (e.kind(), e.object().to_string()));
            self.0.lock().unwrap().push((op.name(), outcome));
        }
    }

    fn split_twice(store: &Observed<Log>, path: &RelPath) -> (Vec<u8>, Vec<u8>) {
        let (mut a, mut b) = (Vec::with_capacity(8), Vec::with_capacity(8));
        read_split(
            store,
            path,
            1,
            &[(0, 2), (1, 3)],
            &mut [&mut a, &mut b],
            None,
        )
        .unwrap();
        (a, b)
    }

    #[test]
    fn transparent_wrappers_keep_local_capabilities_and_opaque_ones_hide_them() {
        let dir = tempfile::tempdir().unwrap();
        let local: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
        let path = RelPath::new("objects/x").unwrap();
        local.create(&path, b"abcdefgh").unwrap();

        let transparent = Observed::transparent(local.clone(), Log::default());
        assert_eq!(transparent.local_root(), Some(dir.path()));
        assert_eq!(
            split_twice(&transparent, &path),
            (b"bc".to_vec(), b"def".to_vec())
        );
        assert_eq!(
            *transparent.observer().0.lock().unwrap(),
            vec![("open_local_range", Ok(5))]
        );

        let opaque = Observed::opaque(local, Log::default());
        assert_eq!(opaque.local_root(), None);
        assert!(opaque.local_object(&path).is_none());
        assert_eq!(
            split_twice(&opaque, &path),
            (b"bc".to_vec(), b"def".to_vec())
        );
        assert_eq!(
            *opaque.observer().0.lock().unwrap(),
            vec![("read_range", Ok(5))]
        );
        assert!(opaque.location().is_local());
    }

    #[test]
    fn failed_requests_reach_the_observer() {
        let dir = tempfile::tempdir().unwrap();
        let local: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
        let store = Observed::transparent(local, Log::default());
        let missing = RelPath::new("missing").unwrap();
        assert!(store.read(&missing, None).is_err());
        let log = store.observer().0.lock().unwrap();
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].0, "read");
        assert!(
            log[0].1.as_ref().is_err_and(
                |(kind, object)| *kind == ErrorKind::NotFound && object.contains("missing")
            ),
            "{log:?}"
        );
    }
}
