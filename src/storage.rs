//! Objects behind a trait (FORMAT.md sections 5 to 8): local directories ([`LocalStore`]) and
//! S3/GCS object stores ([`CloudStore`]).
//!
//! The SDS layout needs very little from storage, and this trait asks for exactly that:
//!
//! - whole, size-capped and ranged reads, optionally pinned to a *generation* (section 7);
//! - metadata (size, version) without downloading, so publication and shard opening can check
//!   `stored_bytes` with one stat or HEAD;
//! - **create-only** writes (section 5): succeed if the object is absent or already holds the
//!   same bytes (so an interrupted publication converges when re-run), fail with
//!   [`StorageError::Collision`] otherwise, and never expose a partial object;
//! - **compare-and-swap** on the one mutable object, `annotations/catalog.json` (section 6).
//!
//! There is deliberately no listing and no delete: membership is learned only by following
//! references (section 4), and nothing published is ever removed.
//!
//! Design choices:
//!
//! - The trait is synchronous. The readers that use it (the FUSE adapter, the ArrayRecord
//!   reader) are synchronous, and an `object_store` backend can wrap its own tokio runtime and
//!   `block_on` each call. `Send + Sync` lets one store be shared by FUSE worker threads.
//! - Every path is a [`RelPath`], validated once at the boundary, so no backend has to re-check
//!   for `..` or absolute paths; the local backend additionally refuses symlinks.
//! - A [`Version`] carries both a numeric generation and an ETag because the backends disagree:
//!   GCS preconditions need the generation, S3 the ETag, local storage uses the file's
//!   `st_mtime_ns` as its generation.

mod error;
mod local;
mod location;
pub mod object;
mod observed;
mod readahead;

use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;

use crate::format::path::RelPath;

pub use error::{ErrorKind, LocationError, StorageError};
pub use local::{Identity, LocalObject, LocalRange, LocalStore};
pub use location::{Location, StoreKey};
pub use object::{
    CloudOptions, CloudStore, CloudUrl, RetryPolicy, Service, DEFAULT_REQUEST_TIMEOUT,
};
pub use observed::{Observed, StoreObserver, StoreOp};
pub use readahead::ReadAhead;

/// Identity of one stored version of an object, for generation-pinned reads and
/// compare-and-swap.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    /// A numeric generation that increases with every replacement: the GCS object generation,
    /// or `st_mtime_ns` on local storage. `None` where the backend has none (S3).
    pub generation: Option<u64>,
    /// An opaque entity tag, where the backend has one.
    pub etag: Option<String>,
}

impl Version {
    /// Whether `current` is the version this expectation describes: every identity the
    /// expectation carries must agree. An expectation carrying neither identity matches
    /// nothing, so a caller can never swap blindly by accident.
    pub fn matches(&self, current: &Version) -> bool {
        let generation_ok = self.generation.is_none() || self.generation == current.generation;
        let etag_ok = self.etag.is_none() || self.etag == current.etag;
        let carries_identity = self.generation.is_some() || self.etag.is_some();
        carries_identity && generation_ok && etag_ok
    }
}

/// What a metadata request returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub size: u64,
    pub version: Version,
    pub modified: Option<SystemTime>,
}

/// How a create-only write succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOutcome {
    /// This call created the object.
    Created,
    /// The object already existed with exactly these bytes (a resumed or repeated write).
    AlreadyIdentical,
}

/// A place objects live, addressed by dataset-relative paths.
pub trait ObjectStore: Send + Sync + std::fmt::Debug {
    /// Human-readable location of an object for messages, e.g. `/data/ds/root.json` or
    /// `s3://b/p/root.json`.
    fn describe(&self, path: &RelPath) -> String;

    /// The whole object. For objects whose size is not already trusted, use
    /// [`read_limited`](ObjectStore::read_limited).
    fn read(&self, path: &RelPath, generation: Option<u64>) -> Result<Bytes, StorageError>;

    /// The whole object, refused with [`StorageError::TooLarge`] when it is larger than
    /// `max_bytes`. The size is checked before reading, and at most `max_bytes + 1` bytes are
    /// ever read, so an oversized object costs no memory in proportion to its size.
    fn read_limited(
        &self,
        path: &RelPath,
        generation: Option<u64>,
        max_bytes: u64,
    ) -> Result<Bytes, StorageError>;

    /// Exactly the bytes in `range`; a range reaching past the end is
    /// [`StorageError::OutOfRange`]. An empty range within the object returns no bytes.
    fn read_range(
        &self,
        path: &RelPath,
        range: Range<u64>,
        generation: Option<u64>,
    ) -> Result<Bytes, StorageError>;

    /// Size and version without reading the content.
    fn info(&self, path: &RelPath, generation: Option<u64>) -> Result<ObjectInfo, StorageError>;

    /// Create-only: succeeds if absent ([`CreateOutcome::Created`]) or if the existing object
    /// has identical bytes ([`CreateOutcome::AlreadyIdentical`]); a different existing object
    /// is [`StorageError::Collision`]. Never leaves a partial object visible under `path`.
    fn create(&self, path: &RelPath, data: &[u8]) -> Result<CreateOutcome, StorageError>;

    /// Same as [`create`](ObjectStore::create), streaming a local file's contents (large
    /// shards); compares by content, streamed, when the target exists.
    fn create_from_file(&self, path: &RelPath, file: &Path) -> Result<CreateOutcome, StorageError>;

    /// Same as [`create_from_file`](ObjectStore::create_from_file) for a file the caller gives
    /// up: the store may take the file itself over instead of copying its bytes (a local store
    /// hard-links it into place when it lies on the same filesystem, see
    /// [`local_root`](ObjectStore::local_root)). The caller must not change the file
    /// afterwards; removing its name is fine.
    fn adopt_file(&self, path: &RelPath, file: &Path) -> Result<CreateOutcome, StorageError> {
        self.create_from_file(path, file)
    }

    /// The local directory the store keeps its objects in, as files, when it is one: writers
    /// stage files they will hand to [`adopt_file`](ObjectStore::adopt_file) there so that
    /// adopting them costs no copy (same filesystem), and sequential scans skip read-ahead.
    /// `None` for remote stores, which upload from anywhere.
    fn local_root(&self) -> Option<&Path> {
        None
    }

    /// `range` of the object as an open local file, checked as [`read_range`] checks it, when
    /// the store keeps its objects in local files: lets a reader read straight into its
    /// buffers ([`read_split`]). `None` for stores that only read ranges.
    ///
    /// [`read_range`]: ObjectStore::read_range
    fn open_local_range(
        &self,
        _path: &RelPath,
        _range: Range<u64>,
        _generation: Option<u64>,
    ) -> Option<Result<LocalRange, StorageError>> {
        None
    }

    /// The object as a local file with the directory it is linked in, checked as a read, when
    /// the store keeps its objects in local files: lets another local store hard-link it
    /// ([`copy_from`](ObjectStore::copy_from)). `None` for other stores.
    fn local_object(&self, _path: &RelPath) -> Option<Result<LocalObject, StorageError>> {
        None
    }

    /// Confines every later read to what the owner of `path` could read, when this process is
    /// not that owner (see [`LocalStore::confine_to_owner_of`]); returns whose permissions
    /// apply. Stores without local owners (object stores) have no one to confine to: `None`.
    fn confine_to_owner_of(&self, _path: &RelPath) -> Result<Option<Arc<Identity>>, StorageError> {
        Ok(None)
    }

    /// Where the store's root is: what [`describe`](ObjectStore::describe) prefixes every
    /// object with, and which store (local filesystem, one bucket) it is.
    fn location(&self) -> Location;

    /// Current bytes and version of a mutable object, read consistently, or `None` when absent.
    fn read_versioned(&self, path: &RelPath) -> Result<Option<(Bytes, Version)>, StorageError>;

    /// Replaces `path` only if its current version matches `expected` (`None`: it must not
    /// exist), returning the new version. A mismatch is [`StorageError::PreconditionFailed`].
    fn compare_and_swap(
        &self,
        path: &RelPath,
        data: &[u8],
        expected: Option<&Version>,
    ) -> Result<Version, StorageError>;

    /// Whether reads can be pinned to a numeric generation.
    fn supports_generations(&self) -> bool;

    /// Whether the store's generations outlive the process and mean the same to every reader
    /// (GCS object generations), so they are worth recording in documents. A local store's
    /// `st_mtime_ns` generations serve its own compare-and-swap and pinning only.
    fn persists_generations(&self) -> bool {
        false
    }

    /// Create-only copy of `src` in `src_store` to `dst` in this store, with the semantics of
    /// [`create`](ObjectStore::create): an identical existing `dst` is
    /// [`CreateOutcome::AlreadyIdentical`], a different one [`StorageError::Collision`].
    ///
    /// The default reads the whole source into memory and creates it. Backends override it
    /// with something cheaper (hard links, server-side copies); the result must be
    /// indistinguishable to readers.
    fn copy_from(
        &self,
        src_store: &dyn ObjectStore,
        src: &RelPath,
        dst: &RelPath,
    ) -> Result<CreateOutcome, StorageError> {
        let bytes = src_store.read(src, None)?;
        self.create(dst, &bytes)
    }
}

/// Positional reads of one object, for the ArrayRecord reader's byte source.
///
/// The size is learned once, at open. When the store has generations the reader pins the
/// generation it saw at open, so a replaced object fails loudly with
/// [`StorageError::GenerationMismatch`] instead of mixing bytes of two versions.
#[derive(Debug, Clone)]
pub struct ObjectReader {
    store: Arc<dyn ObjectStore>,
    path: RelPath,
    generation: Option<u64>,
    size: u64,
    /// Prefetched ranges (see [`ObjectReader::prefetch`]), shared by clones.
    ahead: Arc<ReadAhead>,
}

impl ObjectReader {
    /// Opens `path`, at `generation` when given, with one metadata request.
    pub fn open(
        store: Arc<dyn ObjectStore>,
        path: RelPath,
        generation: Option<u64>,
    ) -> Result<ObjectReader, StorageError> {
        let info = store.info(&path, generation)?;
        let generation = match generation {
            Some(pinned) => Some(pinned),
            None if store.supports_generations() => info.version.generation,
            None => None,
        };
        Ok(ObjectReader {
            store,
            path,
            generation,
            size: info.size,
            ahead: Arc::default(),
        })
    }

    pub fn path(&self) -> &RelPath {
        &self.path
    }

    /// The generation every read is pinned to, if any.
    pub fn generation(&self) -> Option<u64> {
        self.generation
    }

    /// Human-readable location of the object, for messages.
    pub fn describe(&self) -> String {
        self.store.describe(&self.path)
    }

    /// The object's size as seen at open.
    pub fn size(&self) -> io::Result<u64> {
        Ok(self.size)
    }

    /// Exactly `len` bytes at `offset`; reading past the end is `UnexpectedEof`.
    pub fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let end = u64::try_from(len)
            .ok()
            .and_then(|len| offset.checked_add(len))
            .ok_or_else(|| {
                io::Error::from(StorageError::invalid(
                    self.describe(),
                    format!("read of {len} bytes at offset {offset} overflows"),
                ))
            })?;
        if let Some(bytes) = self.ahead.take(offset, end) {
            return Ok(bytes);
        }
        Ok(self
            .store
            .read_range(&self.path, offset..end, self.generation)?)
    }

    /// Consecutive bytes at `offset`, appended part by part (see [`read_split`]).
    pub fn read_split(
        &self,
        offset: u64,
        parts: &[(usize, usize)],
        outs: &mut [&mut Vec<u8>],
    ) -> io::Result<()> {
        let total = crate::memory::split_len(parts);
        if let Some(bytes) = self.ahead.take(offset, offset.saturating_add(total)) {
            return crate::memory::split_into(&bytes, parts, outs);
        }
        Ok(read_split(
            self.store.as_ref(),
            &self.path,
            offset,
            parts,
            outs,
            self.generation,
        )?)
    }
}

/// [`ObjectStore::read_range`] from `offset`, appended part by part to the caller's buffers
/// (see [`ByteSource::read_split`](crate::arrayrecord::ByteSource)): each `(out, len)` of
/// `parts` sends the next `len` bytes to the end of `outs[out]`. A store that keeps objects in
/// local files is read straight into them (`preadv`); any other is read with `read_range` and
/// the parts copied out.
pub fn read_split(
    store: &dyn ObjectStore,
    path: &RelPath,
    offset: u64,
    parts: &[(usize, usize)],
    outs: &mut [&mut Vec<u8>],
    generation: Option<u64>,
) -> Result<(), StorageError> {
    let end = offset.saturating_add(crate::memory::split_len(parts));
    if let Some(opened) = store.open_local_range(path, offset..end, generation) {
        return opened?.read_split(offset, parts, outs);
    }
    let bytes = store.read_range(path, offset..end, generation)?;
    crate::memory::split_into(&bytes, parts, outs)
        .map_err(|e| StorageError::io(store.describe(path), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(generation: Option<u64>, etag: Option<&str>) -> Version {
        Version {
            generation,
            etag: etag.map(str::to_string),
        }
    }

    #[test]
    fn version_matching_compares_what_the_expectation_carries() {
        let current = version(Some(7), Some("e7"));
        assert!(version(Some(7), Some("e7")).matches(&current));
        assert!(version(Some(7), None).matches(&current));
        assert!(version(None, Some("e7")).matches(&current));
        assert!(!version(Some(6), None).matches(&current));
        assert!(!version(Some(7), Some("e6")).matches(&current));
        assert!(!version(None, None).matches(&current));
    }
}
