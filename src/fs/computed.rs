//! The files the mount computes (SigMF metas and collections, pictures) rendered once and kept
//! while they are read.
//!
//! Why: a reader takes a file in many reads (`cat` asks for 128 KiB at a time), and each read
//! would otherwise render the whole document again: a 16 MiB `.sigmf-meta` read sequentially
//! was rendered 128 times. So a file is rendered once, charged to the memory budget at its exact
//! size (the size `stat` gave: a file larger than the whole budget is refused before rendering;
//! the charge is taken once the render is done, see [`ComputedCache::get`]), and the bytes are
//! kept, charged, in a small LRU that gives them back like any other cache of the mount
//! ([`Reclaim`]). Concurrent first reads of one file wait for a single render (a file manager
//! drawing thumbnails of a directory). A render that gives another size than `stat` promised
//! is an error, never served.
//!
//! A collection names each recording's `.sigmf-meta` by its SHA-512: those hashes are kept
//! too (64 bytes each, at most [`KEPT_HASHES`]), so a collection made again after its bytes
//! were given back does not render every meta again.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use lru::LruCache;

use crate::budget::{Budget, Charge, Gates, Reclaim};
use crate::fs::error::FsError;
use crate::sync::lock;

/// SHA-512s of `.sigmf-meta`s kept for collections (about 100 bytes each with the map's own).
pub const KEPT_HASHES: usize = 16_384;

/// A SHA-512.
pub type Sha512 = [u8; 64];

/// The SHA-512 of `bytes`.
pub fn sha512(bytes: &[u8]) -> Sha512 {
    use sha2::Digest;
    sha2::Sha512::digest(bytes).into()
}

/// Rendered computed files by inode, and the metas' hashes.
#[derive(Debug)]
pub struct ComputedCache {
    kept: Mutex<LruCache<u64, (Bytes, Charge)>>,
    hashes: Mutex<LruCache<u64, Sha512>>,
    rendering: Gates<u64>,
    memory: Arc<Budget>,
    renders: AtomicU64,
}

impl Reclaim for ComputedCache {
    fn reclaim_one(&self) -> bool {
        let evicted = lock(&self.kept).pop_lru();
        evicted.is_some()
    }
}

impl ComputedCache {
    /// An empty cache charged to `memory` (its files are given back before the mount's other
    /// entries: it registers after them).
    pub fn new(memory: Arc<Budget>) -> Arc<ComputedCache> {
        let hashes = NonZeroUsize::new(KEPT_HASHES).unwrap_or(NonZeroUsize::MIN);
        let cache = Arc::new(ComputedCache {
            kept: Mutex::new(LruCache::unbounded()),
            hashes: Mutex::new(LruCache::new(hashes)),
            rendering: Gates::default(),
            memory,
            renders: AtomicU64::new(0),
        });
        cache.memory.register(&cache);
        cache
    }

    /// Files rendered so far.
    pub fn renders(&self) -> u64 {
        self.renders.load(Ordering::Relaxed)
    }

    /// Files kept now, and their bytes.
    pub fn kept_files(&self) -> (u64, u64) {
        let kept = lock(&self.kept);
        let bytes = kept.iter().map(|(_, (file, _))| file.len() as u64).sum();
        (kept.len() as u64, bytes)
    }

    /// File `ino`, rendered by `render` unless kept; `len` gives its size as `stat` does. A
    /// size above the whole budget is refused before rendering; otherwise the rendered bytes
    /// are charged at that size once rendered (waiting for room as any charge does).
    pub fn get(
        &self,
        ino: u64,
        len: impl FnOnce() -> Result<u64, FsError>,
        render: impl FnOnce() -> Result<Vec<u8>, FsError>,
    ) -> Result<Bytes, FsError> {
        if let Some(bytes) = self.kept(ino) {
            return Ok(bytes);
        }
        self.rendering.one_at_a_time(ino, || {
            if let Some(bytes) = self.kept(ino) {
                return Ok(bytes);
            }
            let len = len()?;
            if len > self.memory.capacity() {
                // Refused without rendering: the charge below could never be granted.
                let refused = self.memory.charge(len).map(drop);
                refused.map_err(|e| FsError::at("keeping a computed file (--cache-size)", e))?;
            }
            // Rendered first, charged after: a render decodes the fields it shows, and a
            // decode may wait for room; holding this file's charge through that wait would be
            // this request holding bytes while it waits, which the budget counts as a wait no
            // one can end (many readers of pictures under a small budget each held one and all
            // failed as stuck). So a request holds nothing charged while it may wait, and the
            // rendered bytes (at most the file's cap, one render per file at once) are
            // uncharged only until their charge is granted.
            self.renders.fetch_add(1, Ordering::Relaxed);
            let bytes = Bytes::from(render()?);
            if bytes.len() as u64 != len {
                return Err(FsError::failed(format!(
                    "computed file of {} bytes, {len} expected",
                    bytes.len()
                )));
            }
            let charge = self
                .memory
                .charge(len)
                .map_err(|e| FsError::at("keeping a computed file (--cache-size)", e))?;
            lock(&self.kept).put(ino, (bytes.clone(), charge));
            Ok(bytes)
        })
    }

    fn kept(&self, ino: u64) -> Option<Bytes> {
        lock(&self.kept).get(&ino).map(|(bytes, _)| bytes.clone())
    }

    /// The kept SHA-512 of file `ino`, if any.
    pub fn hash(&self, ino: u64) -> Option<Sha512> {
        lock(&self.hashes).get(&ino).copied()
    }

    /// Keeps the SHA-512 of file `ino`.
    pub fn keep_hash(&self, ino: u64, hash: Sha512) {
        lock(&self.hashes).put(ino, hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_rendered_once_charged_and_given_back() {
        let budget = Budget::new("memory", 1000);
        let cache = ComputedCache::new(budget.clone());
        for _ in 0..3 {
            let bytes = cache.get(7, || Ok(400), || Ok(vec![1; 400])).unwrap();
            assert_eq!(bytes.len(), 400);
        }
        assert_eq!(cache.renders(), 1);
        assert_eq!(budget.used(), 400);
        // Another file that needs room: the first is given back.
        cache.get(8, || Ok(700), || Ok(vec![2; 700])).unwrap();
        assert_eq!(budget.used(), 700);
        // A render of the wrong size is an error and keeps nothing.
        assert!(cache.get(9, || Ok(10), || Ok(vec![0; 11])).is_err());
        assert_eq!(budget.used(), 700);
        // More than the whole budget is refused before rendering.
        let rendered = std::cell::Cell::new(false);
        let refused = cache.get(
            10,
            || Ok(2000),
            || {
                rendered.set(true);
                Ok(Vec::new())
            },
        );
        assert!(refused.is_err() && !rendered.get());
    }

    #[test]
    fn hashes_are_kept_apart_from_the_bytes() {
        let cache = ComputedCache::new(Budget::new("memory", 10));
        assert_eq!(cache.hash(3), None);
        cache.keep_hash(3, [9; 64]);
        assert_eq!(cache.hash(3), Some([9; 64]));
    }
}
