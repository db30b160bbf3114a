//! Publication (profile section 5): workers write shard pairs, a coordinator commits them.
//!
//! Everything is create-only and content addressed, so:
//! - a worker re-running `write_shard` for the same records writes the same bytes to the same
//!   paths and succeeds (`AlreadyIdentical`);
//! - `publish` writes manifest pages, then the snapshot, then `root.json` last: a reader never
//!   sees a snapshot before every shard it references exists, and an interrupted publication
//!   converges to the same bytes when re-run with the same inputs;
//! - an existing object with different bytes is a collision error, never overwritten.
//!
//! Shards are written to temporary files (in the store's staging directory: for a local
//! store, beside the objects), hashed, then handed to storage with `adopt_file`, which links a
//! local shard into place instead of copying it; a shard never has to fit in memory.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::error::DatasetError;
use crate::arrayrecord::{ArrayRecordWriter, WriterOptions};
use crate::format::documents::ids::{
    data_shard_path, is_portable_id, manifest_path, metadata_shard_path, page_id, snapshot_path,
};
use crate::format::documents::{
    DatasetRoot, ManifestPage, ManifestRef, Reference, ShardEntry, Snapshot,
};
use crate::format::json::{self, Object, ObjectExt, Value};
use crate::format::limits::{JsonLimits, RecordLimits};
use crate::format::path::RelPath;
use crate::format::record::{self, Record};
use crate::storage::{ObjectStore, StorageError};

/// What a worker's `write_shard` reports to the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardReceipt {
    /// Dataset-relative path of the data shard.
    pub data_uri: String,
    /// Dataset-relative path of the metadata shard.
    pub metadata_uri: String,
    pub work_id: String,
    pub attempt: u64,
    pub record_count: u64,
    pub data_bytes: u64,
    pub metadata_bytes: u64,
    pub data_generation: Option<u64>,
    pub metadata_generation: Option<u64>,
}

/// How shards are encoded.
#[derive(Debug, Clone, Default)]
pub struct ShardOptions {
    /// ArrayRecord writer options; the layout requires `group_size:1` (the default).
    pub writer_options: WriterOptions,
    pub record_limits: RecordLimits,
}

/// How a publication is laid out.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    pub dataset_id: String,
    pub snapshot_id: String,
    /// When given, exactly these work ids must be present, and shards are ordered by them.
    pub expected_work_ids: Option<Vec<String>>,
    /// The publication's metadata, written to both the root and the snapshot.
    pub metadata: Object,
    /// At most this many shards per manifest page (default 10000).
    pub shards_per_manifest: usize,
}

impl PublishOptions {
    pub fn new(dataset_id: impl Into<String>, snapshot_id: impl Into<String>) -> PublishOptions {
        PublishOptions {
            dataset_id: dataset_id.into(),
            snapshot_id: snapshot_id.into(),
            expected_work_ids: None,
            metadata: Object::new(),
            shards_per_manifest: 10_000,
        }
    }
}

/// What a publication wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishSummary {
    pub record_count: u64,
    pub shard_count: u64,
    pub manifest_pages: u64,
    pub stored_bytes: u64,
}

/// A file being written, counting its bytes.
struct CountingFile {
    file: BufWriter<File>,
    len: u64,
}

impl Write for CountingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// SHA-256 (hex) of a finished file. Computed when the shard is stored rather than while it
/// is written, so that a writer encoding the next shard meanwhile does not pay for it.
fn sha256_of_file(path: &Path) -> Result<String, DatasetError> {
    let describe = || path.display().to_string();
    let mut file = File::open(path).map_err(|e| DatasetError::io(describe(), e))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(|e| DatasetError::io(describe(), e))?;
    Ok(hex::encode(hasher.finalize()))
}

/// One shard file under construction.
struct ShardFile {
    writer: ArrayRecordWriter<CountingFile>,
    path: std::path::PathBuf,
}

impl ShardFile {
    fn create(dir: &Path, name: &str, options: &WriterOptions) -> Result<ShardFile, DatasetError> {
        let path = dir.join(name);
        let file =
            File::create(&path).map_err(|e| DatasetError::io(path.display().to_string(), e))?;
        let sink = CountingFile {
            file: BufWriter::with_capacity(1 << 20, file),
            len: 0,
        };
        let writer =
            ArrayRecordWriter::new(sink, *options).map_err(|source| DatasetError::Shard {
                object: path.display().to_string(),
                source,
            })?;
        Ok(ShardFile { writer, path })
    }

    fn write(&mut self, record: &[u8]) -> Result<(), DatasetError> {
        self.writer
            .write(record)
            .map_err(|source| DatasetError::Shard {
                object: self.path.display().to_string(),
                source,
            })
    }

    /// Finishes the file; returns its length and path.
    fn finish(self) -> Result<EncodedFile, DatasetError> {
        let mut sink = self.writer.finish().map_err(|source| DatasetError::Shard {
            object: self.path.display().to_string(),
            source,
        })?;
        sink.flush()
            .map_err(|e| DatasetError::io(self.path.display().to_string(), e))?;
        Ok(EncodedFile {
            bytes: sink.len,
            path: self.path,
        })
    }
}

/// Encodes `records` into a data shard and its aligned metadata shard, writes both create-only
/// at their content addresses, and returns the receipt.
pub fn write_shard<I>(
    store: &dyn ObjectStore,
    records: I,
    work_id: &str,
    attempt: u64,
    options: &ShardOptions,
) -> Result<ShardReceipt, DatasetError>
where
    I: IntoIterator<Item = Record>,
{
    encode_shard(store, records, work_id, attempt, options)?.store(store)
}

/// A shard pair encoded into temporary files and not stored yet: the first half of
/// [`write_shard`]. Storing hashes both files (their content addresses) and makes both objects
/// durable (fsync) before linking them into place, so a writer can encode its next shard on
/// one thread while this one is stored on another.
#[derive(Debug)]
pub struct EncodedShard {
    /// Holds both files; removed when the shard is dropped.
    _temp: tempfile::TempDir,
    data: EncodedFile,
    metadata: EncodedFile,
    work_id: String,
    attempt: u64,
    record_count: u64,
}

#[derive(Debug)]
struct EncodedFile {
    bytes: u64,
    path: std::path::PathBuf,
}

/// Encodes `records` into a data shard and its metadata shard in temporary files, placed where
/// `store` can adopt them without a copy ([`ObjectStore::staging_dir`]).
pub fn encode_shard<I>(
    store: &dyn ObjectStore,
    records: I,
    work_id: &str,
    attempt: u64,
    options: &ShardOptions,
) -> Result<EncodedShard, DatasetError>
where
    I: IntoIterator<Item = Record>,
{
    check_group_size(&options.writer_options)?;
    let temp = staging_temp_dir(store)?;
    let mut data = ShardFile::create(temp.path(), "data.arrayrecord", &options.writer_options)?;
    let mut metadata =
        ShardFile::create(temp.path(), "metadata.arrayrecord", &options.writer_options)?;
    let mut record_count = 0u64;
    for record in records {
        let (payload, meta) =
            record::encode_with_meta(&record, &options.record_limits).map_err(|source| {
                DatasetError::Record {
                    ordinal: record_count,
                    object: format!("work {work_id}"),
                    source,
                }
            })?;
        data.write(&payload)?;
        metadata.write(meta.to_row_json().as_bytes())?;
        record_count += 1;
    }
    Ok(EncodedShard {
        data: data.finish()?,
        metadata: metadata.finish()?,
        _temp: temp,
        work_id: work_id.to_string(),
        attempt,
        record_count,
    })
}

/// A private temporary directory in the store's staging directory (a hidden
/// `.sds-staging-*` directory, removed with the shard; one left by a killed writer holds
/// nothing any document references), else in the system's.
fn staging_temp_dir(store: &dyn ObjectStore) -> Result<tempfile::TempDir, DatasetError> {
    let staged = store.staging_dir().and_then(|dir| {
        tempfile::Builder::new()
            .prefix(".sds-staging-")
            .tempdir_in(dir)
            .ok()
    });
    match staged {
        Some(temp) => Ok(temp),
        None => tempfile::tempdir().map_err(|e| DatasetError::io("temporary directory", e)),
    }
}

impl EncodedShard {
    /// Writes both shards create-only at their content addresses; the receipt.
    pub fn store(self, store: &dyn ObjectStore) -> Result<ShardReceipt, DatasetError> {
        let data_path = data_shard_path(&sha256_of_file(&self.data.path)?)
            .map_err(|e| DatasetError::Publication(e.to_string()))?;
        let metadata_path = metadata_shard_path(&sha256_of_file(&self.metadata.path)?)
            .map_err(|e| DatasetError::Publication(e.to_string()))?;
        store.adopt_file(&data_path, &self.data.path)?;
        store.adopt_file(&metadata_path, &self.metadata.path)?;
        let generation = |path: &RelPath| -> Result<Option<u64>, DatasetError> {
            Ok(if store.supports_generations() {
                store.info(path, None)?.version.generation
            } else {
                None
            })
        };
        Ok(ShardReceipt {
            data_generation: generation(&data_path)?,
            metadata_generation: generation(&metadata_path)?,
            data_uri: data_path.to_string(),
            metadata_uri: metadata_path.to_string(),
            work_id: self.work_id,
            attempt: self.attempt,
            record_count: self.record_count,
            data_bytes: self.data.bytes,
            metadata_bytes: self.metadata.bytes,
        })
    }
}

/// The layout requires `group_size:1` (each record its own chunk, profile section 4): readers
/// rely on it to size a record from the index and to read it with one ranged read, so a shard
/// written otherwise is refused before anything is written.
fn check_group_size(options: &WriterOptions) -> Result<(), DatasetError> {
    if options.group_size == 1 {
        return Ok(());
    }
    Err(DatasetError::Publication(format!(
        "shards must be written with group_size:1 (profile section 4), not group_size:{}",
        options.group_size
    )))
}

/// Commits shards as one immutable snapshot, writing `root.json` last. Safe to re-run.
pub fn publish(
    store: &dyn ObjectStore,
    receipts: &[ShardReceipt],
    options: &PublishOptions,
) -> Result<PublishSummary, DatasetError> {
    check_ids(options)?;
    let chosen = choose_receipts(receipts, options.expected_work_ids.as_deref())?;
    let entries = shard_entries(store, &chosen)?;
    publish_entries(store, entries, options)
}

/// The commit step of [`publish`], for callers that prepared their shard entries themselves
/// (lightweight views carry `record_indices` into shards that already exist): writes manifest
/// pages, the snapshot, then `root.json`, all create-only. `options.expected_work_ids` is not
/// used here. Each entry's `first_ordinal` is renumbered so that the entries tile the dataset in
/// the order given, and entries with no record are left out; the caller is responsible for
/// every referenced shard existing with its `stored_bytes` before calling.
pub fn publish_entries(
    store: &dyn ObjectStore,
    entries: Vec<ShardEntry>,
    options: &PublishOptions,
) -> Result<PublishSummary, DatasetError> {
    check_ids(options)?;
    let mut first_ordinal = 0u64;
    let mut entries: Vec<ShardEntry> = entries.into_iter().filter(|e| e.record_count > 0).collect();
    for entry in &mut entries {
        entry.first_ordinal = first_ordinal;
        first_ordinal = first_ordinal
            .checked_add(entry.record_count)
            .ok_or_else(|| DatasetError::Publication("record count overflows 64 bits".into()))?;
    }
    let per_page = options.shards_per_manifest.max(1);
    let mut manifests = Vec::new();
    let mut first_ordinal = 0u64;
    for (page_index, shards) in entries.chunks(per_page).enumerate() {
        let page = ManifestPage::from_shards(
            &options.snapshot_id,
            page_index as u64,
            first_ordinal,
            shards.to_vec(),
        )?;
        let path = manifest_path(&page_id(&options.snapshot_id, page_index as u64))
            .map_err(|e| DatasetError::Publication(e.to_string()))?;
        let reference = create_document(store, &path, page.to_json())?;
        first_ordinal = page.first_ordinal + page.record_count;
        manifests.push(ManifestRef::for_page(&page, reference));
    }
    let manifest_pages = manifests.len() as u64;
    let snapshot = Snapshot::from_manifests(
        options.dataset_id.clone(),
        options.snapshot_id.clone(),
        options.metadata.clone(),
        manifests,
    )?;
    let snapshot_ref = create_document(
        store,
        &snapshot_path(&options.snapshot_id)
            .map_err(|e| DatasetError::Publication(e.to_string()))?,
        snapshot.to_json(),
    )?;
    let root = DatasetRoot::new(
        options.dataset_id.clone(),
        options.snapshot_id.clone(),
        snapshot_ref,
        options.metadata.clone(),
    );
    create_document(
        store,
        &RelPath::new(super::reader::ROOT_JSON)?,
        root.to_json(),
    )?;
    Ok(PublishSummary {
        record_count: snapshot.record_count,
        shard_count: snapshot.shard_count,
        manifest_pages,
        stored_bytes: snapshot.stored_bytes,
    })
}

fn check_ids(options: &PublishOptions) -> Result<(), DatasetError> {
    for (what, id) in [
        ("dataset_id", &options.dataset_id),
        ("snapshot_id", &options.snapshot_id),
    ] {
        if !is_portable_id(id) {
            return Err(DatasetError::Publication(format!(
                "{what} {id:?} is not a portable id ([A-Za-z0-9][A-Za-z0-9._-]{{0,127}})"
            )));
        }
    }
    Ok(())
}

/// One receipt per work id (the lowest attempt), checked against the expected ids and put in
/// their order (else in the order first given).
fn choose_receipts<'a>(
    receipts: &'a [ShardReceipt],
    expected: Option<&[String]>,
) -> Result<Vec<&'a ShardReceipt>, DatasetError> {
    let mut by_work: BTreeMap<&str, &ShardReceipt> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for receipt in receipts {
        match by_work.get(receipt.work_id.as_str()) {
            Some(kept) if kept.attempt <= receipt.attempt => {}
            Some(_) => {
                by_work.insert(&receipt.work_id, receipt);
            }
            None => {
                order.push(&receipt.work_id);
                by_work.insert(&receipt.work_id, receipt);
            }
        }
    }
    let Some(expected) = expected else {
        return Ok(order
            .iter()
            .filter_map(|w| by_work.get(w).copied())
            .collect());
    };
    let expected_set: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
    if expected_set.len() != expected.len() {
        return Err(DatasetError::Publication(
            "expected work ids contain duplicates".into(),
        ));
    }
    let missing: Vec<&str> = expected_set
        .iter()
        .filter(|w| !by_work.contains_key(*w))
        .copied()
        .collect();
    let unexpected: Vec<&str> = by_work
        .keys()
        .filter(|w| !expected_set.contains(*w))
        .copied()
        .collect();
    if !missing.is_empty() || !unexpected.is_empty() {
        return Err(DatasetError::Publication(format!(
            "receipts do not match the expected work ids: missing {missing:?}, unexpected {unexpected:?}"
        )));
    }
    Ok(expected
        .iter()
        .filter_map(|w| by_work.get(w.as_str()).copied())
        .collect())
}

/// Shard entries for the chosen receipts, each shard's size checked with a metadata request;
/// empty shards are left out.
fn shard_entries(
    store: &dyn ObjectStore,
    receipts: &[&ShardReceipt],
) -> Result<Vec<ShardEntry>, DatasetError> {
    let mut entries = Vec::new();
    let mut first_ordinal = 0u64;
    for receipt in receipts.iter().filter(|r| r.record_count > 0) {
        let data = checked_reference(
            store,
            &receipt.data_uri,
            receipt.data_bytes,
            &receipt.work_id,
        )?;
        let metadata = checked_reference(
            store,
            &receipt.metadata_uri,
            receipt.metadata_bytes,
            &receipt.work_id,
        )?;
        entries.push(ShardEntry::new(
            first_ordinal,
            data,
            metadata,
            receipt.record_count,
        )?);
        first_ordinal = first_ordinal
            .checked_add(receipt.record_count)
            .ok_or_else(|| DatasetError::Publication("record count overflows 64 bits".into()))?;
    }
    Ok(entries)
}

fn checked_reference(
    store: &dyn ObjectStore,
    uri: &str,
    expected_bytes: u64,
    work_id: &str,
) -> Result<Reference, DatasetError> {
    let path = RelPath::new(uri)?;
    let info = store.info(&path, None)?;
    if info.size != expected_bytes {
        return Err(DatasetError::Publication(format!(
            "work {work_id}: {} has {} bytes but its receipt says {expected_bytes}",
            store.describe(&path),
            info.size
        )));
    }
    Ok(Reference::new(path, expected_bytes))
}

/// Writes a control document create-only and returns the reference to it.
fn create_document(
    store: &dyn ObjectStore,
    path: &RelPath,
    text: String,
) -> Result<Reference, DatasetError> {
    match store.create(path, text.as_bytes()) {
        Ok(_) => Ok(Reference::new(path.clone(), text.len() as u64)),
        Err(StorageError::Collision { object }) => Err(DatasetError::Publication(format!(
            "{object} already exists with different bytes: a different publication used this dataset root or snapshot id"
        ))),
        Err(e) => Err(e.into()),
    }
}

impl ShardReceipt {
    /// The receipt as compact deterministic JSON (what `sds write-shard` prints).
    pub fn to_json(&self) -> String {
        let mut doc = Object::new();
        doc.insert("attempt".into(), Value::from(self.attempt));
        doc.insert("data_bytes".into(), Value::from(self.data_bytes));
        doc.insert("data_uri".into(), Value::from(self.data_uri.as_str()));
        doc.insert("metadata_bytes".into(), Value::from(self.metadata_bytes));
        doc.insert(
            "metadata_uri".into(),
            Value::from(self.metadata_uri.as_str()),
        );
        doc.insert("record_count".into(), Value::from(self.record_count));
        doc.insert("work_id".into(), Value::from(self.work_id.as_str()));
        if let Some(g) = self.data_generation {
            doc.insert("data_generation".into(), Value::from(g));
        }
        if let Some(g) = self.metadata_generation {
            doc.insert("metadata_generation".into(), Value::from(g));
        }
        json::object_to_compact(&doc)
    }

    /// Reads a receipt printed by [`ShardReceipt::to_json`].
    pub fn parse(bytes: &[u8]) -> Result<ShardReceipt, DatasetError> {
        let bad = |e: String| DatasetError::Publication(format!("invalid receipt: {e}"));
        let doc =
            json::parse_object(bytes, &JsonLimits::CONTROL).map_err(|e| bad(e.to_string()))?;
        let get_u64 = |key: &str| doc.req_u64(key).map_err(|e| bad(e.to_string()));
        let get_str = |key: &str| {
            doc.req_str(key)
                .map(str::to_string)
                .map_err(|e| bad(e.to_string()))
        };
        Ok(ShardReceipt {
            data_uri: get_str("data_uri")?,
            metadata_uri: get_str("metadata_uri")?,
            work_id: get_str("work_id")?,
            attempt: get_u64("attempt")?,
            record_count: get_u64("record_count")?,
            data_bytes: get_u64("data_bytes")?,
            metadata_bytes: get_u64("metadata_bytes")?,
            data_generation: doc
                .opt_u64("data_generation")
                .map_err(|e| bad(e.to_string()))?,
            metadata_generation: doc
                .opt_u64("metadata_generation")
                .map_err(|e| bad(e.to_string()))?,
        })
    }
}
