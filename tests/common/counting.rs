//! An `ObjectStore` decorator that records every object read, so tests can assert what an
//! operation cost (which documents, pages and shards it touched).
#![allow(dead_code)]

use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use sdsfs::format::path::RelPath;
use sdsfs::storage::{CreateOutcome, ObjectInfo, ObjectStore, StorageError, Version};

#[derive(Debug)]
pub struct CountingStore {
    pub inner: Arc<dyn ObjectStore>,
    /// Every read: (operation, path).
    pub log: Mutex<Vec<(&'static str, String)>>,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Arc<CountingStore> {
        Arc::new(CountingStore {
            inner,
            log: Mutex::new(Vec::new()),
        })
    }

    fn note(&self, op: &'static str, path: &RelPath) {
        self.log.lock().unwrap().push((op, path.to_string()));
    }

    /// Paths touched since the last call (any operation), then clears the log.
    pub fn take(&self) -> Vec<(&'static str, String)> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    /// Paths touched since the last call, without the operation names.
    pub fn take_paths(&self) -> Vec<String> {
        self.take().into_iter().map(|(_, p)| p).collect()
    }
}

impl ObjectStore for CountingStore {
    fn describe(&self, path: &RelPath) -> String {
        self.inner.describe(path)
    }
    fn read(&self, path: &RelPath, generation: Option<u64>) -> Result<Bytes, StorageError> {
        self.note("read", path);
        self.inner.read(path, generation)
    }
    fn read_limited(
        &self,
        path: &RelPath,
        generation: Option<u64>,
        max: u64,
    ) -> Result<Bytes, StorageError> {
        self.note("read", path);
        self.inner.read_limited(path, generation, max)
    }
    fn read_range(
        &self,
        path: &RelPath,
        range: Range<u64>,
        generation: Option<u64>,
    ) -> Result<Bytes, StorageError> {
        self.note("read_range", path);
        self.inner.read_range(path, range, generation)
    }
    fn info(&self, path: &RelPath, generation: Option<u64>) -> Result<ObjectInfo, StorageError> {
        self.note("info", path);
        self.inner.info(path, generation)
    }
    fn create(&self, path: &RelPath, data: &[u8]) -> Result<CreateOutcome, StorageError> {
        self.inner.create(path, data)
    }
    fn create_from_file(&self, path: &RelPath, file: &Path) -> Result<CreateOutcome, StorageError> {
        self.inner.create_from_file(path, file)
    }
    fn read_versioned(&self, path: &RelPath) -> Result<Option<(Bytes, Version)>, StorageError> {
        self.note("read", path);
        self.inner.read_versioned(path)
    }
    fn compare_and_swap(
        &self,
        path: &RelPath,
        data: &[u8],
        expected: Option<&Version>,
    ) -> Result<Version, StorageError> {
        self.inner.compare_and_swap(path, data, expected)
    }
    fn supports_generations(&self) -> bool {
        self.inner.supports_generations()
    }
}
