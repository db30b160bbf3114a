//! Manifest pages, loaded lazily and kept in a small LRU (default 16 pages), and the mapping from
//! a logical ordinal to its shard entry and physical index.
//!
//! Why lazy: a snapshot of a million records may have hundreds of pages; mounting and `stat`
//! must not read them all. The snapshot's manifest references are sorted and tile the ordinal
//! range, so a binary search finds the page, and a second binary search inside the page finds
//! the shard entry: O(log) per lookup with at most one page read on a miss. The cache lock is
//! never held across storage I/O; two threads missing the same page may both read it, which is
//! harmless because pages are immutable.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::error::DatasetError;
use super::objects::Objects;
use crate::format::documents::{ManifestPage, ShardEntry, Snapshot};
use crate::format::limits::JsonLimits;

/// Where one logical record lives.
#[derive(Debug, Clone)]
pub struct RecordLocation {
    pub ordinal: u64,
    /// Index of the manifest page in the snapshot.
    pub page_index: usize,
    /// The page, kept alive for as long as the location is used.
    pub page: Arc<ManifestPage>,
    /// Index of the shard entry within the page.
    pub shard_index: usize,
    /// Index of the record within the shard entry (`ordinal - entry.first_ordinal`).
    pub index_in_entry: u64,
    /// The record's physical index in both the data and the metadata shard.
    pub physical_index: u64,
}

impl RecordLocation {
    /// The shard entry holding the record.
    pub fn entry(&self) -> Option<&ShardEntry> {
        self.page.shards.get(self.shard_index)
    }
}

/// The page cache of one open dataset.
#[derive(Debug)]
pub(crate) struct PageCache {
    pages: Mutex<LruCache<usize, Arc<ManifestPage>>>,
    limits: JsonLimits,
}

impl PageCache {
    pub(crate) fn new(capacity: usize, limits: JsonLimits) -> PageCache {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        PageCache {
            pages: Mutex::new(LruCache::new(capacity)),
            limits,
        }
    }

    /// The validated page `index` of `snapshot`, from the cache or storage.
    pub(crate) fn page(
        &self,
        objects: &Objects,
        snapshot: &Snapshot,
        index: usize,
    ) -> Result<Arc<ManifestPage>, DatasetError> {
        if let Some(page) = self.lock().get(&index) {
            return Ok(page.clone());
        }
        let page = Arc::new(load_page(objects, snapshot, index, &self.limits)?);
        self.lock().put(index, page.clone());
        Ok(page)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<usize, Arc<ManifestPage>>> {
        // A panic while holding this lock cannot leave the LRU inconsistent in a way that
        // matters (entries are immutable), so a poisoned lock is simply taken over.
        self.pages.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Reads, parses and checks page `index` against the snapshot's reference to it.
pub(crate) fn load_page(
    objects: &Objects,
    snapshot: &Snapshot,
    index: usize,
    limits: &JsonLimits,
) -> Result<ManifestPage, DatasetError> {
    let reference = snapshot.manifests.get(index).ok_or_else(|| {
        DatasetError::corrupt("snapshot.json", format!("no manifest page {index}"))
    })?;
    let path = &reference.object.path;
    let bytes = super::reader::read_object_control(objects, &reference.object, limits)?;
    let page = ManifestPage::parse(&bytes, limits).map_err(|e| e.with_document(path.as_str()))?;
    page.validate_against(reference)
        .map_err(|e| e.with_document(path.as_str()))?;
    Ok(page)
}

/// Locates `ordinal` (which must be below the snapshot's record count).
pub(crate) fn locate(
    cache: &PageCache,
    objects: &Objects,
    snapshot: &Snapshot,
    ordinal: u64,
) -> Result<RecordLocation, DatasetError> {
    let page_index = snapshot
        .manifest_for(ordinal)
        .ok_or(DatasetError::OutOfRange {
            ordinal,
            record_count: snapshot.record_count,
        })?;
    let page = cache.page(objects, snapshot, page_index)?;
    let object = snapshot
        .manifests
        .get(page_index)
        .map(|m| m.object.path.to_string())
        .unwrap_or_default();
    let no_entry =
        || DatasetError::corrupt(&object, format!("no shard entry holds ordinal {ordinal}"));
    let shard_index = page.shard_for(ordinal).ok_or_else(no_entry)?;
    let entry = page.shards.get(shard_index).ok_or_else(no_entry)?;
    let index_in_entry = ordinal - entry.first_ordinal;
    let physical_index = entry.physical_index(index_in_entry).ok_or_else(|| {
        DatasetError::corrupt(
            &object,
            format!("shard entry {shard_index} has no record_indices entry {index_in_entry}"),
        )
    })?;
    Ok(RecordLocation {
        ordinal,
        page_index,
        page,
        shard_index,
        index_in_entry,
        physical_index,
    })
}
