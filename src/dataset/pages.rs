//! Manifest pages, loaded lazily and kept in a small LRU (default 16 pages), and the mapping from
//! a logical ordinal to its shard entry and physical index.
//!
//! Why lazy: a snapshot of a million records may have hundreds of pages; mounting and `stat`
//! must not read them all. The snapshot's manifest references are sorted and tile the ordinal
//! range, so a binary search finds the page, and a second binary search inside the page finds
//! the shard entry: O(log) per lookup with at most one page read on a miss. The cache lock is
//! never held across storage I/O.
//!
//! Memory: a page's text is charged to the memory budget before it is read (its reference says
//! its size), its parse before the parse runs, priced from the text ([`parse_bound`]: the
//! parsed values of a page of small objects take three times the text), and once parsed it
//! keeps the charge of what it holds (measured, [`ManifestPage::held_bytes`]) for as long as it
//! lives (cache or reader). A page whose text or parse is larger than the whole budget is refused without
//! being read or parsed. Concurrent first reads of one
//! page wait for a single load (a per-page gate) instead of each loading it.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard};

use lru::LruCache;

use super::error::DatasetError;
use super::objects::Objects;
use crate::budget::{Budget, Charge, Gates, Reclaim};
use crate::format::documents::{ManifestPage, ManifestRef, ShardEntry, Snapshot};
use crate::format::limits::JsonLimits;
use crate::sync::lock;

/// Where one logical record lives.
#[derive(Debug, Clone)]
pub struct RecordLocation {
    pub ordinal: u64,
    /// Index of the manifest page in the snapshot.
    pub page_index: usize,
    /// The page, kept alive (and charged) for as long as the location is used.
    pub page: Arc<LoadedPage>,
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

/// A parsed page with its charge to the memory budget.
#[derive(Debug)]
pub struct LoadedPage {
    page: ManifestPage,
    /// What it holds ([`ManifestPage::held_bytes`]).
    _charge: Charge,
}

impl std::ops::Deref for LoadedPage {
    type Target = ManifestPage;
    fn deref(&self) -> &ManifestPage {
        &self.page
    }
}

/// The most parsing a page's `text` can take beside it: the parsed values
/// ([`crate::format::json::parse_bytes_at_most`]: a page of 100,000 shard entries prices at
/// about 120 MB for its 40 MB of text) and the page built from them while they are let go
/// ([`ManifestPage::parse`]: its entries' slots, within a quarter of the values).
fn parse_bound(text: &[u8]) -> u64 {
    let values = crate::format::json::parse_bytes_at_most(text);
    values.saturating_add(values / 4)
}

/// The page cache of one open dataset.
#[derive(Debug)]
pub(crate) struct PageCache {
    pages: Mutex<LruCache<usize, Arc<LoadedPage>>>,
    loading: Gates<usize>,
    /// Pages that failed for good (a defect of the page, not a storage fault), by index: the
    /// failure is answered again without reading the page again. Pages are immutable, so a
    /// defect stays; storage faults may pass and are never remembered.
    failed: Mutex<HashMap<usize, DatasetError>>,
    limits: JsonLimits,
    memory: Arc<Budget>,
}

impl Reclaim for PageCache {
    fn reclaim_one(&self) -> bool {
        // The entry is dropped after the lock: its charge goes back to the budget.
        let evicted = self.lock().pop_lru();
        evicted.is_some()
    }
}

impl PageCache {
    pub(crate) fn new(capacity: usize, limits: JsonLimits, memory: Arc<Budget>) -> Arc<PageCache> {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        let cache = Arc::new(PageCache {
            pages: Mutex::new(LruCache::new(capacity)),
            loading: Gates::default(),
            failed: Mutex::new(HashMap::new()),
            limits,
            memory,
        });
        cache.memory.register(&cache);
        cache
    }

    /// The validated page `index` of `snapshot`, from the cache or storage.
    pub(crate) fn page(
        &self,
        objects: &Objects,
        snapshot: &Snapshot,
        index: usize,
    ) -> Result<Arc<LoadedPage>, DatasetError> {
        if let Some(page) = self.lock().get(&index) {
            return Ok(page.clone());
        }
        if let Some(failure) = lock(&self.failed)
            .get(&index)
            .and_then(DatasetError::replay)
        {
            return Err(failure);
        }
        self.loading.one_at_a_time(index, || {
            // Bound first: a guard in the `match` scrutinee would live through `load`.
            let cached = self.lock().get(&index).cloned();
            let result = match cached {
                Some(page) => Ok(page),
                None => self.load(objects, snapshot, index),
            };
            if let Some(defect) = result.as_ref().err().and_then(DatasetError::replay) {
                lock(&self.failed).insert(index, defect);
            }
            result
        })
    }

    fn load(
        &self,
        objects: &Objects,
        snapshot: &Snapshot,
        index: usize,
    ) -> Result<Arc<LoadedPage>, DatasetError> {
        let reference = snapshot.manifests.get(index).ok_or_else(|| {
            DatasetError::corrupt("snapshot.json", format!("no manifest page {index}"))
        })?;
        let stored = reference.object.stored_bytes;
        let over_budget = |source| DatasetError::Budget {
            object: reference.object.path.to_string(),
            source,
        };
        // The text first (its size from the reference), then its parse, priced from the text
        // before it runs.
        let charge = self.memory.charge(stored).map_err(over_budget)?;
        let text = super::reader::read_object_control(objects, &reference.object, &self.limits)?;
        let mut parsing = self
            .memory
            .charge(parse_bound(&text))
            .map_err(over_budget)?;
        let page = parse_page(&text, reference, &self.limits)?;
        drop(text);
        // The page keeps what it holds (measured), the charges of its text and parse let go.
        drop(charge);
        let held = page.held_bytes();
        if held <= parsing.bytes() {
            parsing.shrink_to(held);
        } else {
            parsing = self.memory.charge(held).map_err(over_budget)?;
        }
        let page = Arc::new(LoadedPage {
            page,
            _charge: parsing,
        });
        self.lock().put(index, page.clone());
        Ok(page)
    }

    fn lock(&self) -> MutexGuard<'_, LruCache<usize, Arc<LoadedPage>>> {
        lock(&self.pages)
    }
}

/// Parses and checks the text of the page `reference` names.
fn parse_page(
    bytes: &[u8],
    reference: &ManifestRef,
    limits: &JsonLimits,
) -> Result<ManifestPage, DatasetError> {
    let path = &reference.object.path;
    let page = ManifestPage::parse(bytes, limits).map_err(|e| e.with_document(path.as_str()))?;
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
