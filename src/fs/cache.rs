//! Decoded records, cached so that reading the six views of one record decodes it once.
//!
//! Two kinds of entry:
//! - **in memory**: each field's tensor bytes, slices of the one decompressed payload, kept in
//!   an LRU bounded by the sum of payload sizes (`--cache-size`). Only the bytes are kept: the
//!   record's parsed metadata (the row's, checked against the payload's at decode) is in the
//!   record's tree, and a second parsed copy per cached record would cost more memory than
//!   the cache accounts for (about 5 KiB per record for a one-field IQ capture's row, 30% on
//!   top of its 16 KiB payload);
//! - **in a temporary file**: records larger than the in-memory threshold are streamed from
//!   the shard into an unnamed temporary file (decompressed and hash-checked on the way) and
//!   served from there with positional reads, so a 4 GiB field never sits in memory. A few such
//!   files are kept (LRU by count); an evicted file disappears when its last reader drops it.
//!
//! Decode-ahead: when reads move from record `n - 1` to record `n` (a scan in ordinal order),
//! background workers (one per core beyond the first, up to [`AHEAD_RECORDS`] and to
//! `--threads` minus one: see [`ahead_workers`]) decode the
//! records `n + 1 ..= n + AHEAD_RECORDS` that are neither cached nor being decoded, each
//! taking the next one and re-reading the scan's position after every record, while the
//! reader copies record `n` through the kernel; so with spare cores the next reads find their
//! records decoded, several decoded at once on machines with more cores, and no worker sits
//! idle waiting for each step's request.
//! Only in-memory records are decoded ahead, and only as many as fit in a quarter of the cache
//! together, and only within the shard being read: it is a bounded bet on the scan going on,
//! never a flood, and touches no shard the reader has not.
//! A scan of a `columns/` file ([`Window::COLUMNS`]) has a window in bytes instead,
//! [`COLUMN_AHEAD_BYTES`] of payloads (several of the kernel's 1 MiB reads, each covering many
//! records), still within a quarter of the cache, and it goes on into the next shard: the
//! column's next bytes are there, so its reader is about to open it. Its workers read rows
//! straight from the metadata shard, as nothing looks up a column record's tree. The worker gets each record's row
//! through the shared [`TreeCache`], so the lookups that follow find its tree built instead
//! of reading and parsing the row again (a third of the worker's time in a scan of 128 KiB
//! records). It is independent of any byte prefetch a storage backend does: it works on
//! decoded records.
//!
//! Concurrency: a per-ordinal in-flight lock makes concurrent first reads of one record wait
//! for a single decode instead of each decoding it; the cache maps are locked only briefly and
//! never across storage I/O or decompression.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::num::NonZeroUsize;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use bytes::Bytes;
use lru::LruCache;

use crate::budget::{Budget, Charge, Gates, Reclaim};
use crate::dataset::{Dataset, DatasetError, Held};
use crate::format::record::{self, RecordLayout, RecordMeta};
use crate::fs::error::FsError;
use crate::fs::log_limit;
use crate::fs::record_tree::{DatasetIds, RecordTree};
use crate::fs::spill::{self, FieldSink, Selected, SinkError, Taken, Wanted};
use crate::sync::lock;

/// A decoded record's tensor bytes, wherever they are held.
#[derive(Debug)]
pub enum RecordBytes {
    /// The whole record: tensor bytes by field name (slices of the payload, which stays
    /// charged to the memory budget while they live).
    Memory {
        fields: BTreeMap<String, Bytes>,
        _held: Held,
    },
    /// Fields of a record decoded field by field (a record above the in-memory threshold):
    /// those asked for, by name.
    Fields(BTreeMap<String, Arc<FieldBytes>>),
}

/// One field of a record decoded field by field.
#[derive(Debug)]
pub enum FieldBytes {
    /// In memory, charged to the memory budget (with the other fields of its decoding) while
    /// it lives.
    Memory { bytes: Bytes, _charge: Arc<Charge> },
    /// In a temporary file holding exactly its bytes from offset 0, charged to the spill
    /// budget (with the other files of its decoding) while it exists.
    File { file: Arc<File>, _disk: Arc<Charge> },
}

impl FieldBytes {
    /// Up to `len` bytes from `offset`.
    fn read(&self, offset: u64, len: usize) -> std::io::Result<Bytes> {
        match self {
            FieldBytes::Memory { bytes, .. } => Ok(slice_at(bytes, offset, len)),
            FieldBytes::File { file, .. } => {
                let field_len = file.metadata()?.len();
                let start = offset.min(field_len);
                let take = (len as u64).min(field_len - start) as usize;
                let mut buffer = vec![0u8; take];
                file.read_exact_at(&mut buffer, start)?;
                Ok(Bytes::from(buffer))
            }
        }
    }

    /// The bytes it holds in memory (what the memory LRU weighs it at).
    fn memory_bytes(&self) -> u64 {
        match self {
            FieldBytes::Memory { bytes, .. } => bytes.len() as u64,
            FieldBytes::File { .. } => 0,
        }
    }
}

/// Up to `len` bytes of `data` from `offset`.
fn slice_at(data: &Bytes, offset: u64, len: usize) -> Bytes {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(data.len());
    let end = start.saturating_add(len).min(data.len());
    data.slice(start..end)
}

impl RecordBytes {
    /// Up to `len` bytes of field `name`'s tensor starting at `offset`.
    pub fn read_field(&self, name: &str, offset: u64, len: usize) -> std::io::Result<Bytes> {
        match self {
            RecordBytes::Memory { fields, .. } => {
                let data = fields.get(name).ok_or_else(|| missing_field(name))?;
                Ok(slice_at(data, offset, len))
            }
            RecordBytes::Fields(fields) => fields
                .get(name)
                .ok_or_else(|| missing_field(name))?
                .read(offset, len),
        }
    }

    /// The file holding exactly field `name`'s tensor bytes from offset 0, if the field was
    /// decoded into a temporary file of its own.
    pub fn own_file(&self, name: &str) -> Option<&File> {
        match self {
            RecordBytes::Fields(fields) => match fields.get(name)?.as_ref() {
                FieldBytes::File { file, .. } => Some(file),
                FieldBytes::Memory { .. } => None,
            },
            RecordBytes::Memory { .. } => None,
        }
    }
}

fn missing_field(name: &str) -> std::io::Error {
    std::io::Error::other(format!("decoded record has no field {name:?}"))
}

/// Makes the process's memory follow the cache's accounting: call once, before the mount's
/// threads start.
///
/// glibc gives each thread that allocates its own arena (up to 8 per core). Decoded records
/// are allocated by whichever FUSE thread (or the decode-ahead thread) loads them and freed by
/// whichever evicts them, so every arena ends up holding freed blocks it cannot return, and the
/// daemon's peak RSS during a long scan with a 256 MiB cache was 435 MiB, far above the cache.
/// One arena reuses the blocks of evicted records for the next ones: 321 MiB in the same scan
/// (a 256 MiB cache plus the process's fixed ~60 MiB), at no measurable cost in throughput (the
/// allocator lock is taken a few times per record, the work per record is microseconds).
///
/// Blocks of [`LARGE_BLOCK`] and more are mapped on their own and unmapped when freed. glibc
/// maps large blocks by default, but raises that threshold to the size of each mapped block
/// freed (up to 32 MiB), after which records of a few MiB to 32 MiB live in the heap, where a
/// freed one stays resident until blocks of its size come again: 16 readers of distinct
/// 30 MiB records at a 128 MiB cache peaked at 308 MiB, 180 MiB with the threshold fixed
/// (setting it turns the raising off). Such blocks are fresh memory either way for a decoder
/// writing them once (`crate::memory` backs them with huge pages). A block just below the
/// threshold that decodes take and free again and again would still pile up in the heap: the
/// read-ahead's pieces were such blocks (45-85 MiB of heap in the same test) and are now
/// mappings of their own (`crate::memory::piece_buffer`): 92-112 MiB.
pub fn bound_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; M_ARENA_MAX with 1 and M_MMAP_THRESHOLD
    // with 4 MiB (below glibc's 32 MiB maximum on 64-bit) are valid settings.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE_BLOCK as libc::c_int);
    }
}

/// Allocations of at least this many bytes are mappings of their own (see [`bound_allocator`]).
pub const LARGE_BLOCK: usize = crate::memory::LARGE_BLOCK;

/// Cache sizing.
#[derive(Debug, Clone, Copy)]
pub struct CacheConfig {
    /// Bytes of decoded records kept in memory.
    pub memory_bytes: u64,
    /// Records larger than this are decoded field by field, each field read when asked for
    /// (large fields into temporary files), rather than whole in memory.
    pub file_threshold: u64,
    /// Temporary files (each one field's bytes) kept.
    pub files: usize,
    /// Disk the temporary files may take in all (`--spill-size`).
    pub spill_bytes: u64,
}

/// The smallest memory budget a mount takes (a smaller `--cache-size` is raised to it): room
/// for a manifest page, a row and its tree.
pub const MIN_CACHE_BYTES: u64 = 1 << 20;

/// The default disk budget for temporary files: 16 GiB.
pub const DEFAULT_SPILL_BYTES: u64 = 16 << 30;

impl CacheConfig {
    /// The default split for a `--cache-size` of `bytes` (at least [`MIN_CACHE_BYTES`]):
    /// records above a quarter of the cache are decoded field by field, so one large record
    /// cannot flush every other entry, and a record in memory (with its chunk while it is
    /// decoded) takes at most half of the memory budget.
    pub fn for_cache_size(bytes: u64) -> CacheConfig {
        let bytes = bytes.max(MIN_CACHE_BYTES);
        CacheConfig {
            memory_bytes: bytes,
            file_threshold: bytes / 4,
            files: 32,
            spill_bytes: DEFAULT_SPILL_BYTES,
        }
    }
}

/// What the memory LRU keeps: a record decoded whole, or one field of a record decoded field
/// by field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Unit {
    Record(u64),
    Field(u64, String),
}

#[derive(Debug, Clone)]
enum Kept {
    Record(Arc<RecordBytes>),
    Field(Arc<FieldBytes>),
}

#[derive(Debug)]
struct MemoryLru {
    entries: LruCache<Unit, Kept>,
    weights: HashMap<Unit, u64>,
    total: u64,
}

impl MemoryLru {
    /// Takes an entry that left `entries` out of the weights and their total.
    fn forget_weight(&mut self, unit: &Unit) {
        let weight = self.weights.remove(unit).unwrap_or(0);
        self.total = self.total.saturating_sub(weight);
    }
}

/// The decoded-record cache of one mount.
#[derive(Debug)]
pub struct RecordCache {
    config: CacheConfig,
    memory: Mutex<MemoryLru>,
    /// Fields in temporary files of their own, by record and field name.
    files: Mutex<LruCache<(u64, String), Arc<FieldBytes>>>,
    in_flight: Gates<u64>,
    counters: CacheCounters,
    /// Disk for temporary files (`--spill-size`), given back by evicting them.
    spill: Arc<Budget>,
    spill_reclaimer: Mutex<Option<Arc<SpillFiles>>>,
}

/// Gives the spill budget back by evicting the least recently used temporary file.
#[derive(Debug)]
struct SpillFiles(std::sync::Weak<RecordCache>);

impl Reclaim for SpillFiles {
    fn reclaim_one(&self) -> bool {
        let Some(cache) = self.0.upgrade() else {
            return false;
        };
        let evicted = lock(&cache.files).pop_lru();
        evicted.is_some()
    }
}

/// Hits, misses and decoded bytes of the record cache (for `sdsfs status`).
#[derive(Debug, Default)]
pub struct CacheCounters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    /// Payload bytes of the records loaded (read from storage and decoded).
    pub loaded_bytes: AtomicU64,
}

impl RecordCache {
    /// A cache with `config`'s sizes, giving its entries back when `memory` needs room.
    pub fn new(config: CacheConfig, memory: &Budget) -> Arc<RecordCache> {
        let cache = Arc::new(RecordCache::unregistered(config));
        memory.register(&cache);
        let files = Arc::new(SpillFiles(Arc::downgrade(&cache)));
        cache.spill.register(&files);
        // The spill budget holds the only strong reference it needs: the cache's own.
        *lock(&cache.spill_reclaimer) = Some(files);
        cache
    }

    /// The disk budget of temporary files.
    pub fn spill_budget(&self) -> &Arc<Budget> {
        &self.spill
    }

    fn unregistered(config: CacheConfig) -> RecordCache {
        RecordCache {
            config,
            memory: Mutex::new(MemoryLru {
                entries: LruCache::unbounded(),
                weights: HashMap::new(),
                total: 0,
            }),
            files: Mutex::new(LruCache::new(
                NonZeroUsize::new(config.files).unwrap_or(NonZeroUsize::MIN),
            )),
            in_flight: Gates::default(),
            counters: CacheCounters::default(),
            spill: Budget::new("spill", config.spill_bytes),
            spill_reclaimer: Mutex::new(None),
        }
    }

    /// Hit, miss and loaded-byte counters.
    pub fn counters(&self) -> &CacheCounters {
        &self.counters
    }

    /// The memory budget for decoded records.
    pub fn capacity_bytes(&self) -> u64 {
        self.config.memory_bytes
    }

    /// Bytes of decoded records currently held in memory.
    pub fn memory_bytes(&self) -> u64 {
        lock(&self.memory).total
    }

    /// Whether a record whose payload is `payload_len` bytes is decoded field by field (its
    /// large fields into temporary files) rather than whole in memory.
    pub fn spills(&self, payload_len: u64) -> bool {
        payload_len > self.config.file_threshold
    }

    /// The decoded bytes of record `ordinal` with at least its fields `fields`: the whole
    /// record when it is small enough to be decoded in memory, else those fields alone
    /// (none decoded when `fields` is empty). The caller holds nothing charged to the memory
    /// budget while it may wait here for room (see [`TreeCache::row_fingerprint`]).
    pub fn get(
        &self,
        dataset: &Dataset,
        trees: &TreeCache,
        ordinal: u64,
        fields: &[String],
    ) -> Result<Arc<RecordBytes>, FsError> {
        if let Some(hit) = self.lookup(ordinal, fields) {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(hit);
        }
        self.in_flight
            .one_at_a_time(ordinal, || match self.lookup(ordinal, fields) {
                Some(hit) => {
                    self.counters.hits.fetch_add(1, Ordering::Relaxed);
                    Ok(hit)
                }
                None => {
                    self.counters.misses.fetch_add(1, Ordering::Relaxed);
                    self.load(dataset, trees, ordinal, fields)
                }
            })
    }

    /// Decodes the next record of the window ahead of `at` (the record a scan is reading):
    /// the first record after `at` within `window` that is not cached or being decoded,
    /// provided the window's payloads up to it fit in `window`'s bytes (at most a quarter of
    /// the cache). Returns whether one was decoded (so there may be more to do); a failure
    /// returns false, and is left for the read that needs the record to report. A record
    /// scan's rows come through `trees`, where the lookups that follow find them built; a
    /// column scan's straight from the metadata shard (nothing looks its tree up). `cursor`
    /// is where the worker's previous look ended (see [`WindowCursor`]).
    pub fn decode_next_ahead(
        &self,
        dataset: &Dataset,
        trees: &TreeCache,
        at: u64,
        window: Window,
        cursor: &mut WindowCursor,
    ) -> bool {
        let Ok(reading) = dataset.locate(at) else {
            return false;
        };
        let budget = window.bytes.min(self.config.memory_bytes / 4);
        let last = at
            .saturating_add(window.records)
            .min(dataset.len().saturating_sub(1));
        let Some((first, mut window_bytes)) = cursor.resume(dataset, at, window) else {
            return false;
        };
        for ordinal in first..=last {
            let Ok(location) = dataset.locate(ordinal) else {
                return false;
            };
            // A record scan stays within the shard the reader is in: it never opens a shard
            // nobody has asked for (it loses the window's decodes at each shard's start). A
            // column scan goes on into the next shard, which its reader's next reads cover.
            if !window.columns
                && (location.page_index, location.shard_index)
                    != (reading.page_index, reading.shard_index)
            {
                return false;
            }
            let Ok(claimed) = dataset.payload_len(&location) else {
                return false;
            };
            window_bytes = window_bytes.saturating_add(claimed);
            if self.spills(claimed) || window_bytes > budget {
                return false;
            }
            // Looked at: a later look starts after it.
            *cursor = WindowCursor {
                at,
                next: ordinal + 1,
                bytes: window_bytes,
                window: Some(window),
            };
            // A record being decoded by a read is skipped, not waited for: the worker then
            // decodes the next one beside it.
            if self.cached_or_busy(ordinal, &[]) {
                continue;
            }
            // A record that cannot be decoded ends this round: it stays uncached, so trying
            // again at once would read and fail on it in a loop until the scan moved.
            // A record scan's lookups that follow want the tree: build it first (and let it
            // go, so that the decode's wait for room holds nothing); the decode finds its row
            // there. A column scan's decode reads the row, building no tree.
            if !window.columns && trees.get(dataset, ordinal).is_err() {
                return false;
            }
            return self.get(dataset, trees, ordinal, &[]).is_ok();
        }
        false
    }

    /// Decodes record `ordinal` (at least its fields `fields`) unless it is cached or being
    /// decoded; returns whether it was neither (so the caller went on working instead of
    /// waiting), or the decode's failure.
    pub fn decode_if_idle(
        &self,
        dataset: &Dataset,
        trees: &TreeCache,
        ordinal: u64,
        fields: &[String],
    ) -> Result<bool, FsError> {
        if self.cached_or_busy(ordinal, fields) {
            return Ok(false);
        }
        self.get(dataset, trees, ordinal, fields).map(|_| true)
    }

    /// Drops record `ordinal` from memory: a scan has read it through, and will not again.
    pub fn let_go(&self, ordinal: u64) {
        let mut memory = lock(&self.memory);
        let unit = Unit::Record(ordinal);
        let Some(bytes) = memory.entries.pop(&unit) else {
            return;
        };
        memory.forget_weight(&unit);
        drop(memory);
        // Its charge goes back once the last reader drops it, outside the lock.
        drop(bytes);
    }

    /// Whether record `ordinal` (with `fields`) is cached or being decoded: nothing for a
    /// helper to do.
    fn cached_or_busy(&self, ordinal: u64, fields: &[String]) -> bool {
        self.lookup(ordinal, fields).is_some() || self.in_flight.busy(&ordinal)
    }

    /// Record `ordinal` decoded whole, or else its fields `fields` (all of them, and at least
    /// one) decoded field by field.
    fn lookup(&self, ordinal: u64, fields: &[String]) -> Option<Arc<RecordBytes>> {
        if let Some(Kept::Record(hit)) = lock(&self.memory).entries.get(&Unit::Record(ordinal)) {
            return Some(hit.clone());
        }
        let found = self.cached_fields(ordinal, fields);
        (!fields.is_empty() && found.len() == fields.len())
            .then(|| Arc::new(RecordBytes::Fields(found)))
    }

    /// Those of record `ordinal`'s fields `fields` that are kept, in memory or in files.
    fn cached_fields(&self, ordinal: u64, fields: &[String]) -> BTreeMap<String, Arc<FieldBytes>> {
        let mut found = BTreeMap::new();
        for name in fields {
            let in_memory = match lock(&self.memory)
                .entries
                .get(&Unit::Field(ordinal, name.clone()))
            {
                Some(Kept::Field(field)) => Some(field.clone()),
                _ => None,
            };
            let kept =
                in_memory.or_else(|| lock(&self.files).get(&(ordinal, name.clone())).cloned());
            if let Some(field) = kept {
                found.insert(name.clone(), field);
            }
        }
        found
    }

    fn load(
        &self,
        dataset: &Dataset,
        trees: &TreeCache,
        ordinal: u64,
        fields: &[String],
    ) -> Result<Arc<RecordBytes>, FsError> {
        let location = dataset.locate(ordinal)?;
        let claimed = dataset.payload_len(&location)?;
        self.counters
            .loaded_bytes
            .fetch_add(claimed, Ordering::Relaxed);
        if self.spills(claimed) {
            if let Some(bytes) = self.load_fields(dataset, trees, &location, claimed, fields)? {
                return Ok(bytes);
            }
        }
        let expected = trees.row_fingerprint(dataset, ordinal)?;
        let payload = dataset.read_payload(&location)?;
        let weight = payload.value.len() as u64;
        let record = decode_checked(dataset, trees, ordinal, payload.value, expected)?;
        let fields = record
            .fields
            .into_iter()
            .map(|(name, field)| (name, field.data))
            .collect();
        let bytes = Arc::new(RecordBytes::Memory {
            fields,
            _held: payload.held,
        });
        self.insert_memory(Unit::Record(ordinal), Kept::Record(bytes.clone()), weight);
        Ok(bytes)
    }

    /// Fields `names` of the large record at `location` (`claimed` bytes), those not kept
    /// decoded now (see [`crate::fs::spill`]). `None` when decoding them would take more
    /// memory than the whole budget while the record itself fits in it (a small budget's
    /// large-ish records): the record is decoded whole in memory instead. A record that fits
    /// neither way is refused by the charges.
    fn load_fields(
        &self,
        dataset: &Dataset,
        trees: &TreeCache,
        location: &crate::dataset::RecordLocation,
        claimed: u64,
        names: &[String],
    ) -> Result<Option<Arc<RecordBytes>>, FsError> {
        let mut fields = self.cached_fields(location.ordinal, names);
        let missing: Vec<String> = names
            .iter()
            .filter(|name| !fields.contains_key(*name))
            .cloned()
            .collect();
        if !missing.is_empty() {
            let working_set = dataset.stream_working_set(location)?;
            let plan = FieldPlan::of(dataset, trees, location.ordinal, &missing)?;
            let memory = working_set.saturating_add(plan.sink_memory(spill::HEADER_ALLOWANCE));
            let capacity = dataset.memory().capacity();
            if memory > capacity && claimed <= capacity {
                return Ok(None);
            }
            fields.extend(self.decode_fields(dataset, trees, location, plan, working_set)?);
        }
        Ok(Some(Arc::new(RecordBytes::Fields(fields))))
    }

    /// Decodes `plan`'s fields, again when the first pass finds the header larger than its
    /// allowance or the fields in other tensors than FORMAT.md assigns (see
    /// [`crate::fs::spill`]); keeps them (memory fields in the memory LRU, files in theirs).
    fn decode_fields(
        &self,
        dataset: &Dataset,
        trees: &TreeCache,
        location: &crate::dataset::RecordLocation,
        mut plan: FieldPlan,
        working_set: u64,
    ) -> Result<BTreeMap<String, Arc<FieldBytes>>, FsError> {
        let ordinal = location.ordinal;
        let mut allowance = spill::HEADER_ALLOWANCE;
        // A pass for each way the first can fall short, and the one that then succeeds.
        for _ in 0..3 {
            let charges = self.charge_fields(dataset, ordinal, &plan, working_set, allowance)?;
            match decode_pass(dataset, trees, location, &plan, allowance, charges)? {
                Pass::Decoded(fields) => {
                    self.keep_fields(ordinal, &fields);
                    return Ok(fields);
                }
                Pass::HeaderNeeds(bytes) => allowance = bytes,
                Pass::KeysAre(wanted) => plan.wanted = wanted,
            }
        }
        Err(FsError::record(
            ordinal,
            "its fields could not be located in three decodings",
        ))
    }

    /// Charges a decoding of `plan`'s fields: their files to the spill budget, and to the
    /// memory budget the decoder's `working_set`, the header `allowance` and the fields kept
    /// in memory, all before a byte is decoded. When the memory budget is full the decoding
    /// waits for others to end.
    fn charge_fields(
        &self,
        dataset: &Dataset,
        ordinal: u64,
        plan: &FieldPlan,
        working_set: u64,
        allowance: u64,
    ) -> Result<PassCharges, FsError> {
        let disk = match plan.file_bytes() {
            0 => None,
            bytes => Some(self.spill.charge(bytes).map_err(|e| {
                FsError::in_record_at(ordinal, "temporary files (--spill-size)", e)
            })?),
        };
        let bytes = working_set.saturating_add(plan.sink_memory(allowance));
        let memory = charge_memory(dataset, ordinal, bytes, "decoding its fields")?;
        Ok(PassCharges { disk, memory })
    }

    /// Keeps decoded fields: in memory, weighed at their bytes, or in files.
    fn keep_fields(&self, ordinal: u64, fields: &BTreeMap<String, Arc<FieldBytes>>) {
        for (name, field) in fields {
            match field.as_ref() {
                FieldBytes::Memory { .. } => {
                    let unit = Unit::Field(ordinal, name.clone());
                    let weight = field.memory_bytes();
                    self.insert_memory(unit, Kept::Field(field.clone()), weight);
                }
                FieldBytes::File { .. } => {
                    lock(&self.files).put((ordinal, name.clone()), field.clone());
                }
            }
        }
    }

    fn insert_memory(&self, unit: Unit, kept: Kept, weight: u64) {
        let mut memory = lock(&self.memory);
        memory.entries.put(unit.clone(), kept);
        memory.weights.insert(unit, weight);
        memory.total += weight;
        while memory.total > self.config.memory_bytes && memory.entries.len() > 1 {
            let Some((evicted, _)) = memory.entries.pop_lru() else {
                break;
            };
            memory.forget_weight(&evicted);
        }
    }
}

/// Under memory pressure, decoded records and fields in memory go first (least recently
/// used).
impl Reclaim for RecordCache {
    fn reclaim_one(&self) -> bool {
        let mut memory = lock(&self.memory);
        let Some((evicted, kept)) = memory.entries.pop_lru() else {
            return false;
        };
        memory.forget_weight(&evicted);
        drop(memory);
        // Its charge goes back once the last reader drops it, outside the lock.
        drop(kept);
        true
    }
}

/// The fields a decoding keeps, and the row fingerprint it checks the record against.
struct FieldPlan {
    expected: u64,
    wanted: Vec<Wanted>,
}

impl FieldPlan {
    /// Fields `names` of record `ordinal`, in the tensors FORMAT.md assigns them and of the
    /// lengths its row gives (its tree's when kept, else read from the metadata shard and
    /// let go: the charges that follow may wait for room).
    fn of(
        dataset: &Dataset,
        trees: &TreeCache,
        ordinal: u64,
        names: &[String],
    ) -> Result<FieldPlan, FsError> {
        let row = trees.row(dataset, ordinal)?;
        let expected = row
            .fingerprint()
            .map_err(|e| record_error(dataset, ordinal, e))?;
        let wanted = names
            .iter()
            .map(|name| {
                let (index, field) = row
                    .field(name)
                    .ok_or_else(|| FsError::record(ordinal, format!("no field {name:?}")))?;
                let len = field
                    .byte_len()
                    .map_err(|e| record_error(dataset, ordinal, e))?;
                Ok(Wanted::new(name.clone(), record::tensor_key(index), len))
            })
            .collect::<Result<Vec<_>, FsError>>()?;
        Ok(FieldPlan { expected, wanted })
    }

    /// Bytes of the fields kept in memory.
    fn memory_fields(&self) -> u64 {
        self.wanted
            .iter()
            .filter(|w| !w.to_file)
            .fold(0u64, |sum, w| sum.saturating_add(w.len))
    }

    /// Bytes of the fields written to files.
    fn file_bytes(&self) -> u64 {
        self.wanted
            .iter()
            .filter(|w| w.to_file)
            .fold(0u64, |sum, w| sum.saturating_add(w.len))
    }

    /// The most the sink of a decoding takes ([`spill::sink_memory`]).
    fn sink_memory(&self, allowance: u64) -> u64 {
        let any_file = self.wanted.iter().any(|w| w.to_file);
        spill::sink_memory(self.memory_fields(), any_file, allowance)
    }
}

/// What one decoding of fields holds charged while it runs.
struct PassCharges {
    disk: Option<Charge>,
    memory: Charge,
}

/// How one decoding of fields ended.
enum Pass {
    Decoded(BTreeMap<String, Arc<FieldBytes>>),
    /// The header and descriptor need this many bytes (more than were charged).
    HeaderNeeds(u64),
    /// The descriptor put the fields in these tensors, not in those FORMAT.md assigns.
    KeysAre(Vec<Wanted>),
}

/// Streams the payload of the record at `location` through a [`FieldSink`] keeping `plan`'s
/// fields, then checks the record as a decoding of it whole would: its length against its
/// header, its descriptor (with the header) against the record rules and against its row.
/// The chunk's hashes and block headers are checked by the stream, to its end.
fn decode_pass(
    dataset: &Dataset,
    trees: &TreeCache,
    location: &crate::dataset::RecordLocation,
    plan: &FieldPlan,
    allowance: u64,
    charges: PassCharges,
) -> Result<Pass, FsError> {
    let ordinal = location.ordinal;
    let limits = &dataset.options().record_limits;
    let mut sink = FieldSink::new(limits, &plan.wanted, allowance);
    let streamed = dataset.read_payload_into(location, &mut sink);
    if let Some(bytes) = sink.needs() {
        return Ok(Pass::HeaderNeeds(bytes));
    }
    let written = streamed?;
    let Selected {
        header,
        descriptor,
        kept,
        ..
    } = sink.finish().map_err(|e| match e {
        SinkError::Io(e) => FsError::in_record_at(ordinal, "temporary file", e),
        SinkError::Record(e) => record_error(dataset, ordinal, e),
    })?;
    if header.total_len != written {
        return Err(FsError::record(
            ordinal,
            format!(
                "payload is {written} bytes but its header describes {}",
                header.total_len
            ),
        ));
    }
    let layout = RecordLayout::from_parts(header, &descriptor, limits)
        .map_err(|e| record_error(dataset, ordinal, e))?;
    if layout.meta.fingerprint() != plan.expected {
        explain_disagreement(dataset, trees, ordinal, &layout.meta)?;
    }
    let located =
        plan.wanted
            .iter()
            .map(|wanted| {
                let field = layout.fields.get(&wanted.name).ok_or_else(|| {
                    FsError::record(ordinal, format!("no field {:?}", wanted.name))
                })?;
                Ok(Wanted {
                    tensor: field.tensor.clone(),
                    ..wanted.clone()
                })
            })
            .collect::<Result<Vec<_>, FsError>>()?;
    if located != plan.wanted {
        return Ok(Pass::KeysAre(located));
    }
    fields_of(ordinal, plan, kept, charges).map(Pass::Decoded)
}

/// The decoded fields of `plan` from what the sink kept, sharing the charges of their
/// decoding: the memory charge shrunk to the fields kept in memory, the disk charge.
fn fields_of(
    ordinal: u64,
    plan: &FieldPlan,
    mut kept: BTreeMap<String, Taken>,
    charges: PassCharges,
) -> Result<BTreeMap<String, Arc<FieldBytes>>, FsError> {
    let PassCharges { disk, mut memory } = charges;
    memory.shrink_to(plan.memory_fields());
    let memory = Arc::new(memory);
    let disk = disk.map(Arc::new);
    let mut fields = BTreeMap::new();
    for wanted in &plan.wanted {
        let not_kept = || FsError::record(ordinal, format!("field {:?} not kept", wanted.name));
        let field = match (kept.remove(&wanted.tensor).ok_or_else(not_kept)?, &disk) {
            (Taken::Memory(bytes), _) => FieldBytes::Memory {
                bytes: Bytes::from(bytes),
                _charge: memory.clone(),
            },
            (Taken::File(file), Some(disk)) => FieldBytes::File {
                file,
                _disk: disk.clone(),
            },
            (Taken::File(_), None) => return Err(not_kept()),
        };
        fields.insert(wanted.name.clone(), Arc::new(field));
    }
    Ok(fields)
}

fn record_error(dataset: &Dataset, ordinal: u64, source: record::RecordError) -> FsError {
    let object = dataset
        .locate(ordinal)
        .ok()
        .and_then(|l| l.entry().map(|e| dataset.describe_object(&e.data.path)))
        .unwrap_or_default();
    FsError::from(DatasetError::Record {
        ordinal,
        object,
        source,
    })
}

fn decode_checked(
    dataset: &Dataset,
    trees: &TreeCache,
    ordinal: u64,
    payload: Bytes,
    expected: u64,
) -> Result<record::Record, FsError> {
    let limits = &dataset.options().record_limits;
    let record = record::decode(payload, limits).map_err(|e| record_error(dataset, ordinal, e))?;
    if record.fingerprint() != expected {
        explain_disagreement(dataset, trees, ordinal, &record.meta())?;
    }
    Ok(record)
}

/// The error saying how a decoded record's `meta` differs from its row, once their
/// fingerprints differ (the row is read again for it; `Ok` if they agree after all).
fn explain_disagreement(
    dataset: &Dataset,
    trees: &TreeCache,
    ordinal: u64,
    meta: &RecordMeta,
) -> Result<(), FsError> {
    let row = trees
        .row(dataset, ordinal)?
        .into_meta()
        .map_err(|e| record_error(dataset, ordinal, e))?;
    record::check_row_agrees(&row, meta).map_err(|e| record_error(dataset, ordinal, e))
}

/// Charges `bytes` of what decoding record `ordinal`'s fields takes (`what`) to the memory
/// budget.
fn charge_memory(
    dataset: &Dataset,
    ordinal: u64,
    bytes: u64,
    what: &str,
) -> Result<Charge, FsError> {
    dataset.memory().charge(bytes).map_err(|e| {
        let detail = format!("{what} (--cache-size)");
        FsError::in_record_at(ordinal, detail, e)
    })
}

/// Record trees (metadata rows parsed and laid out as files), shared by the FUSE threads and
/// the decode-ahead worker: in a scan the worker reads and parses the next record's row once,
/// for its decoding, and the lookups of that record find the tree built.
///
/// Each tree is charged to the memory budget at [`tree_bytes`] for as long as it lives, and
/// concurrent misses of one record wait for a single build (a per-record gate).
#[derive(Debug)]
pub struct TreeCache {
    trees: Mutex<LruCache<u64, Arc<CachedTree>>>,
    /// Every record's row fingerprint, by ordinal, once an index that read every row (that
    /// of `columns/`) has them: a decode then reads no row.
    fingerprints: OnceLock<Arc<[u64]>>,
    building: Gates<u64>,
    memory: Arc<Budget>,
}

/// A record tree with its charge to the memory budget.
#[derive(Debug)]
pub struct CachedTree {
    tree: RecordTree,
    /// Its row's [`RecordMeta::fingerprint`], which decodes check payloads against (found
    /// on the first decode: a walk decodes nothing).
    fingerprint: OnceLock<u64>,
    _charge: Charge,
}

impl CachedTree {
    /// Its row's fingerprint, found once.
    fn row_fingerprint(&self) -> Result<u64, record::RecordError> {
        if let Some(&known) = self.fingerprint.get() {
            return Ok(known);
        }
        let found = self.tree.fingerprint()?;
        Ok(*self.fingerprint.get_or_init(|| found))
    }
}

impl std::ops::Deref for CachedTree {
    type Target = RecordTree;
    fn deref(&self) -> &RecordTree {
        &self.tree
    }
}

/// A record's row, kept in its tree or read ([`TreeCache::row`]).
#[derive(Debug)]
enum Row {
    Tree(Arc<CachedTree>),
    Read(RecordMeta),
}

impl Row {
    /// Its [`RecordMeta::fingerprint`] (a kept tree's, found once).
    fn fingerprint(&self) -> Result<u64, record::RecordError> {
        match self {
            Row::Tree(tree) => tree.row_fingerprint(),
            Row::Read(meta) => Ok(meta.fingerprint()),
        }
    }

    /// The field called `name`, with its index in name order.
    fn field(&self, name: &str) -> Option<(usize, std::borrow::Cow<'_, record::FieldMeta>)> {
        match self {
            Row::Tree(tree) => {
                // The own fields are in name order, their index the tensor key's.
                let index = tree.row.field_index(name)?;
                Some((index, tree.field_meta_at(index)?))
            }
            Row::Read(meta) => meta
                .fields
                .iter()
                .enumerate()
                .find_map(|(index, (key, field))| {
                    (key == name).then_some((index, std::borrow::Cow::Borrowed(field)))
                }),
        }
    }

    /// The row whole (a copy when it is a tree's).
    fn into_meta(self) -> Result<RecordMeta, record::RecordError> {
        match self {
            Row::Tree(tree) => tree.record_meta(),
            Row::Read(meta) => Ok(meta),
        }
    }
}

/// What a tree keeps on the heap, measured: the row's model, its fields' names and SigMF
/// layouts, and its nodes.
pub fn tree_bytes(tree: &RecordTree) -> u64 {
    use crate::format::json::text_heap_bytes;
    use std::mem::size_of;
    let fields: u64 = tree
        .fields
        .iter()
        .map(crate::fs::record_tree::FieldEntry::heap_bytes)
        .sum();
    // Class names are shared by the fields their boxes label: counted once each.
    let mut names_seen = std::collections::HashSet::new();
    let class_names: u64 = tree
        .fields
        .iter()
        .filter_map(|f| f.sigmf_meta.as_ref()?.boxes.as_ref())
        .filter(|plan| names_seen.insert(std::sync::Arc::as_ptr(&plan.names)))
        .map(|plan| {
            let names: u64 = plan
                .names
                .values()
                .map(|n| text_heap_bytes(n.len()) + 16)
                .sum();
            names + plan.names.len() as u64 * 48
        })
        .sum();
    let node_names: u64 = tree
        .nodes
        .iter()
        .map(crate::fs::record_tree::Node::heap_bytes)
        .sum();
    let slots = tree.fields.capacity() * size_of::<crate::fs::record_tree::FieldEntry>()
        + tree.nodes.capacity() * size_of::<crate::fs::record_tree::Node>();
    let lists: u64 = tree
        .clashes
        .iter()
        .chain(tree.preview_panels.iter().map(|(name, _)| name))
        .map(|text| text_heap_bytes(text.capacity()) + 32)
        .sum::<u64>()
        + tree
            .sigmf_streams
            .iter()
            .filter(|(path, _)| path.is_heap_allocated())
            .map(|(path, _)| text_heap_bytes(path.len()))
            .sum::<u64>();
    let slots =
        slots + tree.sigmf_streams.capacity() * size_of::<(compact_str::CompactString, u32)>();
    tree.row.heap_bytes() + fields + class_names + node_names + slots as u64 + lists + 1024
}

impl Reclaim for TreeCache {
    fn reclaim_one(&self) -> bool {
        let evicted = lock(&self.trees).pop_lru();
        evicted.is_some()
    }
}

impl TreeCache {
    /// A cache of at most `capacity` trees (at least one), charged to `memory`.
    pub fn new(capacity: usize, memory: Arc<Budget>) -> Arc<TreeCache> {
        let cache = Arc::new(TreeCache {
            trees: Mutex::new(LruCache::new(
                NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN),
            )),
            building: Gates::default(),
            fingerprints: OnceLock::new(),
            memory,
        });
        cache.memory.register(&cache);
        cache
    }

    /// The fingerprint of record `ordinal`'s row ([`RecordMeta::fingerprint`]), which a
    /// decode checks the payload against: its tree's when the tree is kept, else from the row
    /// read from the metadata shard and let go (building no tree).
    ///
    /// Why a decode finds this before it reads the payload, rather than being handed the tree
    /// its request found: a request must hold nothing charged to the memory budget while it
    /// waits there for room. Requests that each held their record's tree (or row) while
    /// waiting for room for a large payload kept between them the room it needed, and no
    /// release could come, as each waited for the others: with 32 readers and a budget of a
    /// little more than one payload, trees of a few KiB each were enough. Eight bytes are
    /// held instead.
    pub fn row_fingerprint(&self, dataset: &Dataset, ordinal: u64) -> Result<u64, FsError> {
        let kept = lock(&self.trees).peek(&ordinal).cloned();
        if let Some(tree) = kept {
            return tree
                .row_fingerprint()
                .map_err(|e| record_error(dataset, ordinal, e));
        }
        let known = self.fingerprints.get();
        if let Some(&fingerprint) = known.and_then(|all| all.get(ordinal as usize)) {
            return Ok(fingerprint);
        }
        Ok(dataset.record_meta(ordinal)?.fingerprint())
    }

    /// Takes every record's row fingerprint (`all[ordinal]`, from rows the caller read), for
    /// the decodes that follow; the first table given is kept.
    pub fn know_fingerprints(&self, all: &Arc<[u64]>) {
        if self.fingerprints.get().is_none() && !all.is_empty() {
            let _ = self.fingerprints.set(all.clone());
        }
    }

    /// Record `ordinal`'s row (its tree's when kept), to say what a payload disagrees with.
    fn row(&self, dataset: &Dataset, ordinal: u64) -> Result<Row, FsError> {
        if let Some(tree) = lock(&self.trees).peek(&ordinal) {
            return Ok(Row::Tree(tree.clone()));
        }
        Ok(Row::Read(dataset.record_meta(ordinal)?))
    }

    /// The tree of record `ordinal`, built from its row on a miss.
    pub fn get(&self, dataset: &Dataset, ordinal: u64) -> Result<Arc<CachedTree>, FsError> {
        if let Some(tree) = lock(&self.trees).get(&ordinal) {
            return Ok(tree.clone());
        }
        self.building.one_at_a_time(ordinal, || {
            let cached = lock(&self.trees).get(&ordinal).cloned();
            match cached {
                Some(tree) => Ok(tree),
                None => self.build(dataset, ordinal),
            }
        })
    }

    fn build(&self, dataset: &Dataset, ordinal: u64) -> Result<Arc<CachedTree>, FsError> {
        let row = dataset.lazy_row(ordinal)?;
        let ids = DatasetIds {
            dataset_id: &dataset.root().dataset_id,
            snapshot_id: &dataset.snapshot().snapshot_id,
        };
        let tree = RecordTree::build_from_row(ordinal, row, ids)
            .map_err(|source| FsError::in_record(ordinal, source))?;
        let charge = self.memory.charge(tree_bytes(&tree)).map_err(|source| {
            FsError::in_record_at(ordinal, "its file tree (--cache-size)", source)
        })?;
        for clash in &tree.clashes {
            if log_limit::admit("path-clash") {
                tracing::warn!(ordinal, path = %clash, "field path clashes with another and is not shown");
            }
        }
        let tree = Arc::new(CachedTree {
            fingerprint: OnceLock::new(),
            tree,
            _charge: charge,
        });
        lock(&self.trees).put(ordinal, tree.clone());
        Ok(tree)
    }
}

/// Where a decode-ahead worker's last look through the window ended: the records after the
/// scan's position up to `next` were cached or being decoded then, and their payloads take
/// `bytes`. The next look starts there instead of at the window's start, less the records
/// the scan has moved past since: looking through a column scan's window of hundreds of
/// records again for every record decoded cost more than the decodes' own bookkeeping.
#[derive(Debug, Default, Clone, Copy)]
pub struct WindowCursor {
    at: u64,
    next: u64,
    bytes: u64,
    window: Option<Window>,
}

impl WindowCursor {
    /// Where a look at the window of a scan at `at` starts, and the payload bytes before that;
    /// `None` when a record's length cannot be read.
    fn resume(&mut self, dataset: &Dataset, at: u64, window: Window) -> Option<(u64, u64)> {
        let continues = self.window == Some(window) && self.at <= at && at < self.next;
        if !continues {
            *self = WindowCursor::default();
            return Some((at.saturating_add(1), 0));
        }
        // The records the scan has moved past have left the window.
        let mut bytes = self.bytes;
        for gone in self.at.saturating_add(1)..=at {
            let location = dataset.locate(gone).ok()?;
            bytes = bytes.saturating_sub(dataset.payload_len(&location).ok()?);
        }
        Some((self.next, bytes))
    }
}

/// How many records past the one a scan is reading the workers keep decoded (fewer when
/// their payloads would fill more than a quarter of the cache). One was not enough: the
/// worker waited for each step's request while the reader was busy with the kernel, and with
/// a single record ahead there is nothing for a second worker to do.
pub const AHEAD_RECORDS: u64 = 4;

/// How far past a column scan's position the workers keep records decoded: a few of the
/// kernel's largest reads (1 MiB each, see `fuse::MAX_READ`), so while the reader serves one
/// read the records of the next ones are decoded on the other cores. Bounded, like every
/// window, by a quarter of the cache.
pub const COLUMN_AHEAD_BYTES: u64 = 8 << 20;

/// The stretch after a scan's position that the workers keep decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// At most this many records past the position.
    pub records: u64,
    /// At most this many payload bytes (and never more than a quarter of the cache).
    pub bytes: u64,
    /// A scan of a `columns/` file: it crosses shards, and reads rows without trees.
    pub columns: bool,
}

impl Window {
    /// The window of a scan of records' own files: [`AHEAD_RECORDS`] records.
    pub const RECORDS: Window = Window {
        records: AHEAD_RECORDS,
        bytes: u64::MAX,
        columns: false,
    };
    /// The window of a scan of a column: [`COLUMN_AHEAD_BYTES`] of payloads.
    pub const COLUMNS: Window = Window {
        records: u64::MAX,
        bytes: COLUMN_AHEAD_BYTES,
        columns: true,
    };
}

/// Decode-ahead workers for a mount of `threads` serving threads (`--threads`): none with one
/// thread (each read then decodes what it reads, and nothing else); otherwise one per core
/// beyond the first (the reader and the FUSE threads need one), with the serving thread no
/// more than `threads` in all, at least one (on one core it still overlaps storage waits),
/// at most [`AHEAD_RECORDS`].
pub fn ahead_workers(threads: usize) -> usize {
    if threads <= 1 {
        return 0;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores
        .min(threads)
        .saturating_sub(1)
        .clamp(1, AHEAD_RECORDS as usize)
}

/// The decode-ahead of one mount (see the module documentation).
#[derive(Debug)]
pub struct DecodeAhead {
    /// The ordinal of the last tensor read (`u64::MAX - 1` before any: no successor).
    last: AtomicU64,
    /// What the workers share: the window's position and their wake-ups.
    shared: Arc<AheadShared>,
    /// Set once the workers are started, by the first sequential step.
    started: OnceLock<()>,
    /// How many workers start then ([`ahead_workers`]); none: no decode-ahead.
    workers: usize,
}

#[derive(Debug, Default)]
struct AheadShared {
    /// The record a scan (reads stepping from `n - 1` to `n`) is at: the window's start.
    scan_at: AtomicU64,
    /// Whether that scan reads a column (its window is [`Window::COLUMNS`]).
    columns: std::sync::atomic::AtomicBool,
    /// Bumped by every step (and by the mount's end); the workers wait for it to change.
    steps: Mutex<AheadSignal>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct AheadSignal {
    steps: u64,
    stop: bool,
}

impl DecodeAhead {
    /// The decode-ahead of a mount, with `workers` threads once a scan starts.
    pub fn new(workers: usize) -> Self {
        DecodeAhead {
            last: AtomicU64::new(u64::MAX - 1),
            shared: Arc::default(),
            started: OnceLock::new(),
            workers,
        }
    }
}

impl Drop for DecodeAhead {
    fn drop(&mut self) {
        lock(&self.shared.steps).stop = true;
        self.shared.wake.notify_all();
    }
}

impl DecodeAhead {
    /// Remembers `ordinal` as the last record read without moving the window: a read that
    /// must not decode ahead, but that a following read may continue.
    pub fn note_read(&self, ordinal: u64) {
        self.last.store(ordinal, Ordering::Relaxed);
    }

    /// Called after each tensor read of record `ordinal` through its own files: on a step
    /// from `ordinal - 1`, moves the window ([`Window::RECORDS`]) to `ordinal` and wakes the
    /// workers (each reads the window's position again after every record it decodes).
    pub fn after_read(
        &self,
        cache: &Arc<RecordCache>,
        trees: &Arc<TreeCache>,
        dataset: &Arc<Dataset>,
        ordinal: u64,
    ) {
        self.step(cache, trees, dataset, ordinal, Window::RECORDS);
    }

    /// [`DecodeAhead::after_read`] with the window `window` ([`Window::COLUMNS`] for a read
    /// of a column).
    pub fn step(
        &self,
        cache: &Arc<RecordCache>,
        trees: &Arc<TreeCache>,
        dataset: &Arc<Dataset>,
        ordinal: u64,
        window: Window,
    ) {
        let previous = self.last.swap(ordinal, Ordering::Relaxed);
        if self.workers == 0
            || previous.wrapping_add(1) != ordinal
            || ordinal.saturating_add(1) >= dataset.len()
        {
            return;
        }
        self.shared.scan_at.store(ordinal, Ordering::Relaxed);
        self.shared.columns.store(window.columns, Ordering::Relaxed);
        self.started.get_or_init(|| {
            for _ in 0..self.workers {
                spawn_worker(cache, trees, dataset, &self.shared);
            }
        });
        lock(&self.shared.steps).steps += 1;
        self.shared.wake.notify_all();
    }
}

/// One thread keeping the window ahead of the scan decoded; it ends with the mount.
fn spawn_worker(
    cache: &Arc<RecordCache>,
    trees: &Arc<TreeCache>,
    dataset: &Arc<Dataset>,
    shared: &Arc<AheadShared>,
) {
    let (cache, trees, dataset, shared) = (
        cache.clone(),
        trees.clone(),
        dataset.clone(),
        shared.clone(),
    );
    let spawned = std::thread::Builder::new()
        .name("sdsfs-ahead".into())
        .spawn(move || {
            let mut seen = 0;
            let mut cursor = WindowCursor::default();
            loop {
                {
                    let mut signal = lock(&shared.steps);
                    while signal.steps == seen && !signal.stop {
                        signal = shared.wake.wait(signal).unwrap_or_else(|e| e.into_inner());
                    }
                    if signal.stop {
                        return;
                    }
                    seen = signal.steps;
                }
                let window = || match shared.columns.load(Ordering::Relaxed) {
                    true => Window::COLUMNS,
                    false => Window::RECORDS,
                };
                let at = || shared.scan_at.load(Ordering::Relaxed);
                // A panic decoding ahead costs that decode: the worker keeps serving the
                // scan (the reader decodes what the worker did not).
                let decoded = super::panics::catch(|| {
                    crate::interrupt::background(|| {
                        while cache.decode_next_ahead(&dataset, &trees, at(), window(), &mut cursor)
                        {
                        }
                    })
                });
                if let Err(caught) = decoded {
                    tracing::error!(panic = %caught, "decoding ahead panicked");
                }
            }
        });
    if let Err(e) = spawned {
        // Fewer workers (or none): reads then decode their records themselves.
        tracing::warn!(error = %e, "cannot start a decode-ahead thread");
    }
}

#[cfg(test)]
mod tree_bytes_tests {
    use super::tree_bytes;
    use crate::format::dtype::DType;
    use crate::format::json::{Object, Value};
    use crate::format::record::{Axis, Coordinate, Field, Record};
    use crate::fs::record_tree::{DatasetIds, RecordTree};

    /// A record of `fields` complex64 fields of one sample each, with a time axis and a
    /// sample rate (what makes a SigMF pair): a row of many small objects.
    fn wide_record(fields: usize) -> Record {
        let block: Object = [
            ("kind".into(), Value::from("uniform")),
            ("sample_rate_hz".into(), Value::Int(1_000_000)),
        ]
        .into();
        let metadata: Object = [("time_coordinates".into(), Value::Object(block))].into();
        (0..fields).fold(Record::new("wide"), |record, f| {
            let field = Field::new(DType::C64, vec![1], vec![0; 8])
                .unwrap()
                .with_axes(vec![Axis::new("time", 1)
                    .with_role("time")
                    .with_coordinate(Coordinate::regular(0.0, 1e-6).with_unit("s"))])
                .with_metadata(metadata.clone());
            record.with_field(format!("f{f:04}"), field)
        })
    }

    /// The charge of a tree is at least what building it from its row's model allocates,
    /// and not far above it (what fits the budget is served).
    #[test]
    fn a_tree_is_charged_what_it_holds() {
        let ids = DatasetIds {
            dataset_id: "ds",
            snapshot_id: "snap",
        };
        for fields in [1, 2_000] {
            let record = wide_record(fields);
            let before = crate::testing::allocated_now();
            let tree = RecordTree::build(0, record.meta(), ids).unwrap();
            let held = crate::testing::allocated_now() as i64 - before as i64;
            let charged = tree_bytes(&tree);
            eprintln!("{fields} fields: held {held} charged {charged}");
            assert!(
                held <= charged as i64,
                "{fields} fields: holds {held}, charged {charged}"
            );
        }
    }
}
