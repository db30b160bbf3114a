//! [`Dataset`]: one published snapshot, opened from its `root.json`.
//!
//! Opening reads exactly two objects, `root.json` and the snapshot it references, and checks
//! both as the library does (formats, layout, codecs, `min_reader_version`, the snapshot's size
//! against its reference, tiling and sums of the manifest references). Nothing is ever listed.
//! Manifest pages, shards and metadata rows are read lazily, so their defects surface as
//! errors on the records they affect, never as a refused open.
//!
//! A root holding no `root.json` but an `sds.json` is the split-based 0.1 prototype; it is
//! refused with a message saying so (the library's behaviour).

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;

use super::chunks::{Charged, ChunkCache};
use super::error::DatasetError;
use super::objects::Objects;
use super::pages::{locate, PageCache, RecordLocation};
use super::shards::{check_in_shard, ShardCache, ShardReader};
use super::OpenOptions;
use crate::arrayrecord::RecordSink;
use crate::budget::Budget;
use crate::format::documents::{DatasetRoot, ObjectRef, Snapshot};
use crate::format::limits::JsonLimits;
use crate::format::path::{ObjectPath, RelPath};
use crate::format::record::{self, LazyRow, Record, RecordMeta, RowLayout};
use crate::storage::{ObjectStore, StorageError};

/// The object name of a dataset's root document.
pub const ROOT_JSON: &str = "root.json";

/// The root document of the split-based 0.1 prototype, refused with a message of its own.
pub const LEGACY_ROOT_JSON: &str = "sds.json";

/// An open dataset. Cheap to share (`Arc<Dataset>`) across threads; every method takes `&self`.
#[derive(Debug)]
pub struct Dataset {
    objects: Objects,
    options: OpenOptions,
    root: DatasetRoot,
    root_bytes: Bytes,
    root_modified: Option<SystemTime>,
    snapshot: Snapshot,
    snapshot_bytes: Bytes,
    pages: Arc<PageCache>,
    shards: Arc<ShardCache>,
    chunks: Arc<ChunkCache>,
}

/// Reads a control document below the root of `store` through its reference: size capped by
/// the control limits, and compared with the reference's `stored_bytes` (annotation
/// documents).
pub(crate) fn read_control(
    store: &dyn ObjectStore,
    reference: &crate::format::documents::Reference,
    limits: &JsonLimits,
) -> Result<Bytes, DatasetError> {
    read_checked(
        store,
        &reference.path,
        reference.generation,
        reference.stored_bytes,
        limits,
    )
}

/// One control document, size capped and compared with `stored_bytes`.
fn read_checked(
    store: &dyn ObjectStore,
    path: &RelPath,
    generation: Option<u64>,
    stored_bytes: u64,
    limits: &JsonLimits,
) -> Result<Bytes, DatasetError> {
    let bytes = store.read_limited(path, generation, limits.max_bytes as u64)?;
    if bytes.len() as u64 != stored_bytes {
        return Err(DatasetError::SizeMismatch {
            object: store.describe(path),
            expected: stored_bytes,
            actual: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// [`read_control`] for a control-graph reference (the snapshot, a manifest page).
///
/// Only shard references may be absolute (a reference view names another dataset's shards); a
/// control document is always read below the dataset's root, as the library reads it through
/// the root's own store. An absolute one is refused naming it, so that a document cannot pull
/// the rest of the graph from outside the root.
pub(crate) fn read_object_control(
    objects: &Objects,
    reference: &ObjectRef,
    limits: &JsonLimits,
) -> Result<Bytes, DatasetError> {
    if let ObjectPath::Absolute(location) = &reference.path {
        return Err(DatasetError::corrupt(
            location.as_str(),
            "a control document's reference must be relative to the dataset root (only shard \
             references of reference views may be absolute)",
        ));
    }
    let resolved = objects.resolve(&reference.path, reference.generation)?;
    read_checked(
        resolved.store.as_ref(),
        &resolved.path,
        reference.generation,
        reference.stored_bytes,
        limits,
    )
}

/// The full location of `root.json`, for messages.
fn root_name(objects: &Objects) -> String {
    RelPath::new(ROOT_JSON).map_or_else(|_| ROOT_JSON.to_string(), |p| objects.root().describe(&p))
}

/// Reads `root.json`; when it is missing but `sds.json` exists, the refusal of the prototype.
fn read_root(
    store: &dyn ObjectStore,
    limits: &JsonLimits,
) -> Result<(Bytes, Option<SystemTime>), DatasetError> {
    let root_path =
        RelPath::new(ROOT_JSON).map_err(|e| DatasetError::corrupt(ROOT_JSON, e.to_string()))?;
    let info = match store.info(&root_path, None) {
        Ok(info) => info,
        Err(StorageError::NotFound { object }) => {
            let legacy = RelPath::new(LEGACY_ROOT_JSON)
                .map_err(|e| DatasetError::corrupt(LEGACY_ROOT_JSON, e.to_string()))?;
            if store.info(&legacy, None).is_ok() {
                return Err(DatasetError::corrupt(
                    store.describe(&legacy),
                    "this is the split-based 0.1 prototype, which is unsupported (no root.json); \
                     publish a new dataset",
                ));
            }
            return Err(StorageError::NotFound { object }.into());
        }
        Err(e) => return Err(e.into()),
    };
    let bytes = store.read_limited(&root_path, None, limits.max_bytes as u64)?;
    Ok((bytes, info.modified))
}

impl Dataset {
    /// Opens the dataset whose `root.json` is at the root of `store`.
    pub fn open(
        store: Arc<dyn ObjectStore>,
        options: OpenOptions,
    ) -> Result<Dataset, DatasetError> {
        let limits = options.control_limits;
        let (root_bytes, root_modified) = read_root(store.as_ref(), &limits)?;
        let root = DatasetRoot::parse(&root_bytes, &limits)?;
        let objects = Objects::open(store, options.absolute_references.clone())?;
        let snapshot_ref = ObjectRef {
            path: ObjectPath::Relative(root.snapshot.path.clone()),
            stored_bytes: root.snapshot.stored_bytes,
            generation: root.snapshot.generation,
        };
        // A generation the store cannot honour is a defect of the reference, so it is reported
        // against root.json, the document holding it, not against the snapshot it names.
        objects
            .resolve(&snapshot_ref.path, snapshot_ref.generation)
            .map_err(|e| DatasetError::corrupt(root_name(&objects), format!("snapshot: {e}")))?;
        let snapshot_bytes = read_object_control(&objects, &snapshot_ref, &limits)?;
        let snapshot_name = root.snapshot.path.as_str();
        let snapshot = Snapshot::parse(&snapshot_bytes, &limits)
            .map_err(|e| e.with_document(snapshot_name))?;
        snapshot
            .validate()
            .map_err(|e| e.with_document(snapshot_name))?;
        Ok(Dataset {
            pages: PageCache::new(options.manifest_cache_pages, limits, options.memory.clone()),
            shards: ShardCache::new(options.open_shards, options.memory.clone()),
            chunks: ChunkCache::new(options.memory.clone()),
            objects,
            options,
            root,
            root_bytes,
            root_modified,
            snapshot,
            snapshot_bytes,
        })
    }

    /// The same dataset charging `memory` for its pages and decoded chunks (the mount's
    /// budget, shared with its caches). Call before the first read.
    pub fn with_memory_budget(mut self, memory: Arc<Budget>) -> Dataset {
        let limits = self.options.control_limits;
        self.pages = PageCache::new(self.options.manifest_cache_pages, limits, memory.clone());
        self.chunks = ChunkCache::new(memory.clone());
        self.shards = ShardCache::new(self.options.open_shards, memory.clone());
        self.options.memory = memory;
        self
    }

    /// The memory budget pages and chunks are charged to.
    pub fn memory(&self) -> &Arc<Budget> {
        &self.options.memory
    }

    pub(crate) fn objects(&self) -> &Objects {
        &self.objects
    }

    /// The store and object a reference's path names (absolute references open a store of
    /// their own, or are refused by [`crate::dataset::AbsoluteReferences::Refuse`]).
    pub fn resolve(&self, path: &ObjectPath) -> Result<super::Resolved, DatasetError> {
        self.objects.resolve(path, None)
    }

    /// The full location of a reference's path, for messages.
    pub fn describe_object(&self, path: &ObjectPath) -> String {
        self.objects.describe(path)
    }

    /// The dataset's own store (its root).
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        self.objects.root()
    }

    pub fn options(&self) -> &OpenOptions {
        &self.options
    }

    pub fn root(&self) -> &DatasetRoot {
        &self.root
    }

    /// `root.json` byte for byte.
    pub fn root_bytes(&self) -> &Bytes {
        &self.root_bytes
    }

    /// The modification time storage reports for `root.json`.
    pub fn root_modified(&self) -> Option<SystemTime> {
        self.root_modified
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The snapshot document byte for byte.
    pub fn snapshot_bytes(&self) -> &Bytes {
        &self.snapshot_bytes
    }

    /// Number of records (logical ordinals `0..len`).
    pub fn len(&self) -> u64 {
        self.snapshot.record_count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where `ordinal` lives: page, shard entry, physical index. Reads at most one page.
    pub fn locate(&self, ordinal: u64) -> Result<RecordLocation, DatasetError> {
        locate(&self.pages, &self.objects, &self.snapshot, ordinal)
    }

    /// The open data shard holding `location`, which is checked to hold its physical index.
    pub fn data_shard(&self, location: &RecordLocation) -> Result<Arc<ShardReader>, DatasetError> {
        let entry = self.entry(location)?;
        let shard = self.shards.reader_for(&self.objects, &entry.data)?;
        check_in_shard(&shard, location)?;
        Ok(shard)
    }

    /// The open metadata shard holding `location`, which is checked to hold its physical index.
    pub fn metadata_shard(
        &self,
        location: &RecordLocation,
    ) -> Result<Arc<ShardReader>, DatasetError> {
        let entry = self.entry(location)?;
        let shard = self.shards.reader_for(&self.objects, &entry.metadata)?;
        check_in_shard(&shard, location)?;
        Ok(shard)
    }

    fn entry<'a>(
        &self,
        location: &'a RecordLocation,
    ) -> Result<&'a crate::format::documents::ShardEntry, DatasetError> {
        location.entry().ok_or_else(|| {
            DatasetError::corrupt(
                self.page_name(location.page_index),
                format!("no shard entry {}", location.shard_index),
            )
        })
    }

    /// The metadata row of `ordinal`: everything but the tensor values, without touching the
    /// data shard.
    pub fn record_meta(&self, ordinal: u64) -> Result<RecordMeta, DatasetError> {
        let location = self.locate(ordinal)?;
        self.record_meta_at(&location)
    }

    /// The metadata row at a known location.
    ///
    /// A row read holds its text while its parse is charged: when the parse does not fit at
    /// once, the text is let go and room for both is waited for holding nothing (requests
    /// that each held a row while waiting for room to parse it would keep that room from one
    /// another), then the row is read again into the room made.
    pub fn record_meta_at(&self, location: &RecordLocation) -> Result<RecordMeta, DatasetError> {
        let row = self.stored_row(location)?;
        let parse = row_parse_bytes(&row.text.value);
        if let Some(parsing) = self.options.memory.try_charge(parse) {
            return self.parse_charged_row(&row, parsing);
        }
        let room = self.wait_for_room(row, parse)?;
        let row = self.stored_row(location)?;
        self.parse_charged_row(&row, room)
    }

    /// The metadata row of `ordinal` kept as its text, its fields parsed when asked
    /// ([`LazyRow`]: what a record's file tree holds). Its reading is charged in two steps,
    /// locating the row's members ([`RowLayout::locating_price`]) and then parsing and
    /// checking them ([`RowLayout::parse_price`]), each as small as the row's text and its
    /// largest fields make it; the charges end when the row is returned (the caller charges
    /// what it keeps). When a step does not fit at once, everything is let go and room for
    /// the row and the steps is waited for holding nothing, as [`Dataset::record_meta_at`] does.
    pub fn lazy_row(&self, ordinal: u64) -> Result<LazyRow, DatasetError> {
        let location = self.locate(ordinal)?;
        let limits = &self.options.record_limits;
        let memory = &self.options.memory;
        // Room waited for holding nothing, for the next attempt's steps.
        let mut room: Option<crate::budget::Charge> = None;
        loop {
            let row = self.stored_row(&location)?;
            let text = &row.text.value;
            let failed = |source| DatasetError::Record {
                ordinal: row.ordinal,
                object: row.shard.name().to_string(),
                source,
            };
            let locating_price = RowLayout::locating_price(text);
            let locating = match room.is_some() {
                true => None,
                false => memory.try_charge(locating_price),
            };
            if room.is_none() && locating.is_none() {
                room = Some(self.wait_for_room(row, locating_price)?);
                continue;
            }
            let layout = RowLayout::locate(text, limits).map_err(failed)?;
            let parse_price = layout.parse_price();
            let covered = room
                .as_ref()
                .is_some_and(|r| r.bytes() >= locating_price.saturating_add(parse_price));
            let parsing = match covered {
                true => None,
                false => memory.try_charge(parse_price),
            };
            if !covered && parsing.is_none() {
                drop((layout, locating, room.take()));
                let steps = locating_price.saturating_add(parse_price);
                room = Some(self.wait_for_room(row, steps)?);
                continue;
            }
            return layout.parse(limits).map_err(failed);
        }
    }

    /// Lets `row` go and waits, holding nothing, for room for it and `steps` bytes more; the
    /// room is then shrunk to `steps` (the row is read again into the rest).
    fn wait_for_room(
        &self,
        row: StoredRow,
        steps: u64,
    ) -> Result<crate::budget::Charge, DatasetError> {
        let both = steps.saturating_add(row.held_bytes());
        let object = format!("{} (row of record {})", row.shard.name(), row.ordinal);
        drop(row);
        let mut room = self
            .options
            .memory
            .charge(both)
            .map_err(|source| DatasetError::Budget { object, source })?;
        room.shrink_to(steps);
        Ok(room)
    }

    /// The metadata row at a known location as stored, not yet parsed (charged while it
    /// lives): reading rows and parsing them can then happen on different threads.
    pub fn stored_row(&self, location: &RecordLocation) -> Result<StoredRow, DatasetError> {
        let shard = self.metadata_shard(location)?;
        let text = self.read_chunk(&shard, location.physical_index)?;
        Ok(StoredRow {
            ordinal: location.ordinal,
            shard,
            text,
        })
    }

    /// Parses and checks a row [`Dataset::stored_row`] read.
    pub fn parse_stored_row(&self, row: &StoredRow) -> Result<RecordMeta, DatasetError> {
        // Parsing builds a tree of values beside the text: charged while it runs.
        let parsing = self
            .options
            .memory
            .charge(row_parse_bytes(&row.text.value))
            .map_err(|source| DatasetError::Budget {
                object: format!("{} (row of record {})", row.shard.name(), row.ordinal),
                source,
            })?;
        self.parse_charged_row(row, parsing)
    }

    /// Parses and checks `row`, its parse charged by `_parsing` (given back when done).
    fn parse_charged_row(
        &self,
        row: &StoredRow,
        _parsing: crate::budget::Charge,
    ) -> Result<RecordMeta, DatasetError> {
        let (text, shard) = (&row.text.value, &row.shard);
        RecordMeta::parse_row(text, &self.options.record_limits).map_err(|source| {
            DatasetError::Record {
                ordinal: row.ordinal,
                object: shard.name().to_string(),
                source,
            }
        })
    }

    /// The encoded record (SafeTensors payload) of `ordinal`, held in memory (and charged to
    /// the memory budget while it lives).
    pub fn read_payload(&self, location: &RecordLocation) -> Result<Charged<Bytes>, DatasetError> {
        let shard = self.data_shard(location)?;
        self.read_chunk(&shard, location.physical_index)
    }

    /// Physical record `index` of `shard` (charged, its chunk decoded once for concurrent
    /// readers: [`ChunkCache`]), then read-ahead of the next chunks when the reads of this
    /// shard are sequential.
    fn read_chunk(&self, shard: &ShardReader, index: u64) -> Result<Charged<Bytes>, DatasetError> {
        let record = self.chunks.record(shard, index)?;
        self.read_ahead(shard, index);
        Ok(record)
    }

    /// Streams the encoded record of `location` into `sink` without holding it in memory;
    /// returns its length. On error the sink holds garbage and must be discarded. (Any
    /// `Write` is a sink through [`WriteSink`](crate::arrayrecord::WriteSink).)
    pub fn read_payload_into(
        &self,
        location: &RecordLocation,
        sink: &mut dyn RecordSink,
    ) -> Result<u64, DatasetError> {
        let shard = self.data_shard(location)?;
        let len = shard
            .read_into_sink(location.physical_index, sink)
            .map_err(shard_failure(&shard))?;
        self.read_ahead(&shard, location.physical_index);
        Ok(len)
    }

    /// Read-ahead for sequential scans on object stores: when record `physical` directly
    /// follows the previous read of this shard, the chunks of the next
    /// [`read_ahead_chunks`](OpenOptions::read_ahead_chunks) groups are fetched in the
    /// background (bounded, see [`crate::storage::ReadAhead`]). Called after the record's own
    /// read, which has consumed (and freed) its prefetched chunk, so a steady scan keeps
    /// `read_ahead_chunks` chunks ahead without evicting one it is about to read. Random access
    /// never prefetches.
    fn read_ahead(&self, shard: &ShardReader, physical: u64) {
        let chunks = self.options.read_ahead_chunks as u64;
        if chunks == 0 || self.store().local_root().is_some() {
            return;
        }
        let source = shard.source();
        if !source.read_ahead().follows_previous(physical) {
            return;
        }
        let group = shard.group_size().max(1);
        let chunk = physical / group;
        for k in 1..=chunks {
            let first = (chunk + k).saturating_mul(group);
            if first >= shard.len() {
                break;
            }
            if let Ok(span) = shard.chunk_span(first) {
                source.prefetch(span);
            }
        }
    }

    /// The most memory streaming the record at `location` takes besides its sink's buffers
    /// (see [`crate::arrayrecord::ArrayRecordReader::stream_working_set`]).
    pub fn stream_working_set(&self, location: &RecordLocation) -> Result<u64, DatasetError> {
        let shard = self.data_shard(location)?;
        shard
            .stream_working_set(location.physical_index)
            .map_err(shard_failure(&shard))
    }

    /// Decoded size of the record at `location` (from the shard index; no data read).
    pub fn payload_len(&self, location: &RecordLocation) -> Result<u64, DatasetError> {
        let shard = self.data_shard(location)?;
        shard
            .chunk_decoded_len(location.physical_index)
            .map_err(shard_failure(&shard))
    }

    /// Reads and decodes record `ordinal`, checking that its descriptor agrees with its
    /// metadata row (a disagreement is a corruption error for this record).
    pub fn read_record(&self, ordinal: u64) -> Result<Record, DatasetError> {
        let location = self.locate(ordinal)?;
        let row = self.record_meta_at(&location)?;
        let payload = self.read_payload(&location)?.value;
        let object = self.objects.describe(&self.entry(&location)?.data.path);
        let record_error = |source| DatasetError::Record {
            ordinal,
            object: object.clone(),
            source,
        };
        let record = record::decode(payload, &self.options.record_limits).map_err(record_error)?;
        record::check_row_agrees(&row, &record.meta()).map_err(record_error)?;
        Ok(record)
    }

    /// Iterates over every record in ordinal order.
    pub fn iter_records(&self) -> impl Iterator<Item = Result<Record, DatasetError>> + '_ {
        (0..self.len()).map(|ordinal| self.read_record(ordinal))
    }

    /// Iterates over every metadata row in ordinal order.
    pub fn iter_record_meta(&self) -> impl Iterator<Item = Result<RecordMeta, DatasetError>> + '_ {
        (0..self.len()).map(|ordinal| self.record_meta(ordinal))
    }

    /// Where records `start..stop` live, as contiguous runs within shards, for callers that
    /// fetch the bytes themselves. Reads the manifest pages covering the range (cached).
    pub fn read_instructions(
        &self,
        start: u64,
        stop: u64,
        metadata: bool,
    ) -> Result<Vec<ReadInstruction>, DatasetError> {
        let stop = stop.min(self.len());
        let mut instructions: Vec<ReadInstruction> = Vec::new();
        let mut ordinal = start;
        while ordinal < stop {
            let location = self.locate(ordinal)?;
            let entry = self.entry(&location)?;
            let reference = if metadata {
                &entry.metadata
            } else {
                &entry.data
            };
            let entry_end = entry
                .first_ordinal
                .saturating_add(entry.record_count)
                .min(stop);
            for ord in ordinal..entry_end {
                let k = ord - entry.first_ordinal;
                let physical = entry.physical_index(k).ok_or_else(|| {
                    DatasetError::corrupt(
                        self.page_name(location.page_index),
                        format!("no physical index for ordinal {ord}"),
                    )
                })?;
                push_instruction(
                    &mut instructions,
                    self.objects.describe(&reference.path),
                    physical,
                    ord,
                    shard_len_at_least(entry),
                );
            }
            ordinal = entry_end.max(ordinal + 1);
        }
        Ok(instructions)
    }

    /// Storage error helper for callers that hold a `RelPath`.
    pub fn describe(&self, path: &RelPath) -> String {
        self.store().describe(path)
    }

    /// The path of manifest page `index`, for messages.
    pub fn page_name(&self, index: usize) -> String {
        self.snapshot.manifests.get(index).map_or_else(
            || format!("manifest page {index}"),
            |m| m.object.path.to_string(),
        )
    }
}

/// A metadata row as stored ([`Dataset::stored_row`]).
pub struct StoredRow {
    ordinal: u64,
    shard: Arc<ShardReader>,
    text: Charged<Bytes>,
}

impl StoredRow {
    /// The record whose row this is.
    pub fn ordinal(&self) -> u64 {
        self.ordinal
    }

    /// Bytes charged for it while it lives.
    pub fn held_bytes(&self) -> u64 {
        self.text.held.bytes()
    }
}

/// The most parsing a metadata row takes beside its text: the parsed values, strings included
/// ([`crate::format::json::parse_bytes_at_most`]), and the compact text validation measures
/// the row by (within the text's size).
fn row_parse_bytes(row: &[u8]) -> u64 {
    (row.len() as u64).saturating_add(crate::format::json::parse_bytes_at_most(row))
}

/// The error of a failed read of `shard`, naming it.
fn shard_failure(shard: &ShardReader) -> impl Fn(crate::arrayrecord::Error) -> DatasetError + '_ {
    |source| DatasetError::Shard {
        object: shard.name().to_string(),
        source,
    }
}

/// A contiguous run of records within one shard object (as TFDS and ArrayRecord name them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadInstruction {
    /// Location of the shard object.
    pub filename: String,
    /// Index of the first record to take, within the shard.
    pub skip: u64,
    /// How many records to take.
    pub take: u64,
    /// Records the shard holds, as far as the manifest tells without I/O: the entry's
    /// `record_count`, or for a view (`record_indices`) the smallest shard its indices fit in
    /// when that is larger. `skip + take` never exceeds it.
    pub examples_in_shard: u64,
    /// Ordinal of the first record in the dataset's numbering.
    pub first_ordinal: u64,
}

/// The fewest records the entry's shard can hold: a plain entry addresses all of it, a view
/// addresses its highest index (read instructions do no I/O, so the shard itself is not asked).
fn shard_len_at_least(entry: &crate::format::documents::ShardEntry) -> u64 {
    let highest = entry
        .record_indices
        .as_ref()
        .and_then(|indices| indices.iter().max())
        .map_or(0, |&i| i.saturating_add(1));
    entry.record_count.max(highest)
}

/// Extends the last instruction when `physical` continues it, else starts a new one (entries
/// with `record_indices` may jump around within a shard).
fn push_instruction(
    instructions: &mut Vec<ReadInstruction>,
    filename: String,
    physical: u64,
    ordinal: u64,
    examples_in_shard: u64,
) {
    if let Some(last) = instructions.last_mut() {
        let continues = last.filename == filename
            && last.skip.saturating_add(last.take) == physical
            && last.first_ordinal.saturating_add(last.take) == ordinal;
        if continues {
            last.take += 1;
            return;
        }
    }
    instructions.push(ReadInstruction {
        filename,
        skip: physical,
        take: 1,
        examples_in_shard,
        first_ordinal: ordinal,
    });
}

impl From<crate::format::path::PathError> for DatasetError {
    fn from(e: crate::format::path::PathError) -> Self {
        DatasetError::Storage(StorageError::invalid(e.path.clone(), e.to_string()))
    }
}
