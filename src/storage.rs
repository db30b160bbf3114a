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
pub mod object;
mod open;
mod readahead;

use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;

use crate::format::path::RelPath;

pub use error::{ErrorKind, StorageError};
pub use local::{Identity, LocalStore};
pub use object::{CloudOptions, CloudStore, CloudUrl, RetryPolicy, Service};
pub use open::{is_object_store, local_path, open_local_as, open_location};
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

    /// [`read_range`](ObjectStore::read_range) from `offset`, appended part by part to the
    /// caller's buffers (see [`ByteSource::read_split`](crate::arrayrecord::ByteSource)):
    /// each `(out, len)` of `parts` sends the next `len` bytes to the end of `outs[out]`. A
    /// local store reads straight into them (`preadv`); the default copies from `read_range`.
    fn read_range_split(
        &self,
        path: &RelPath,
        offset: u64,
        parts: &[(usize, usize)],
        outs: &mut [&mut Vec<u8>],
        generation: Option<u64>,
    ) -> Result<(), StorageError> {
        let total = crate::arrayrecord::split_len(parts);
        let end = offset.saturating_add(total);
        let bytes = self.read_range(path, offset..end, generation)?;
        crate::arrayrecord::split_into(&bytes, parts, outs)
            .map_err(|e| StorageError::io(self.describe(path), e))
    }

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
    /// [`staging_dir`](ObjectStore::staging_dir)). The caller must not change the file
    /// afterwards; removing its name is fine.
    fn adopt_file(&self, path: &RelPath, file: &Path) -> Result<CreateOutcome, StorageError> {
        self.create_from_file(path, file)
    }

    /// Where a writer should put files it will hand to [`adopt_file`](ObjectStore::adopt_file)
    /// so that adopting them costs no copy: for a local store, its root (same filesystem);
    /// `None` (the system's temporary directory will do) for remote stores, which upload
    /// either way.
    fn staging_dir(&self) -> Option<&Path> {
        None
    }

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

    /// This store as a local directory, when it is one: lets [`copy_from`](ObjectStore::copy_from)
    /// hard-link between two local roots. Other backends keep the default `None`.
    fn as_local(&self) -> Option<&LocalStore> {
        None
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

    /// Consecutive bytes at `offset`, appended part by part (see
    /// [`ObjectStore::read_range_split`]).
    pub fn read_split(
        &self,
        offset: u64,
        parts: &[(usize, usize)],
        outs: &mut [&mut Vec<u8>],
    ) -> io::Result<()> {
        let total = crate::arrayrecord::split_len(parts);
        if let Some(bytes) = self.ahead.take(offset, offset.saturating_add(total)) {
            return crate::arrayrecord::split_into(&bytes, parts, outs);
        }
        Ok(self
            .store
            .read_range_split(&self.path, offset, parts, outs, self.generation)?)
    }
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
