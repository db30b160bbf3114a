//! Publication (docs/FORMAT.md, publication): workers write shard pairs, a coordinator
//! commits them, exactly as the `signal-dataset` library does.
//!
//! - `write_shard(records, work_id, attempt)` writes the data shard and its aligned metadata
//!   shard create-only at `objects/{data,metadata}/<h:2>/<h>.arrayrecord`, where `h` is the
//!   SHA-256 hex of `"<work_id>:<attempt>"` (one name for both files, derived from the work, not
//!   the content). A re-run of the same attempt writes the same bytes and finds them already
//!   there (success); different bytes under that name are a collision error.
//! - The receipt is the library's `PublishedShard`: full locations of both objects, work id,
//!   attempt, record count, sizes and generations (null except on GCS). Its JSON form is the
//!   one the library's Python driver produces with `dataclasses.asdict`, key order free.
//! - `publish` keeps the highest attempt per work id, refuses missing, unexpected or duplicate
//!   expected work ids, orders shards by work id (string order), keeps empty shards, checks
//!   each shard's size with one metadata request and, by default, checks every receipt against
//!   its shards before writing anything ([`PublishOptions::verify_receipts`]), then writes
//!   manifest pages (at most `shards_per_manifest` entries each), the snapshot and `root.json`
//!   last, all create-only: an interrupted publication converges on the same bytes
//!   when re-run with the same inputs, and a reader never sees a root before its objects.
//!
//! Shards are written to temporary files (in the store's staging directory: for a local
//! store, beside the objects), then handed to storage with `adopt_file`, which links a local
//! shard into place instead of copying it; a shard never has to fit in memory.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::error::DatasetError;
use crate::arrayrecord::ByteSource;
use crate::arrayrecord::{ArrayRecordReader, ArrayRecordWriter, WriterOptions};
use crate::format::documents::ids::{
    data_shard_path, manifest_path, metadata_shard_path, reference_manifest_path, shard_id,
    snapshot_path,
};
use crate::format::documents::{
    DatasetRoot, ManifestPage, ManifestRef, ObjectRef, Reference, ShardEntry, Snapshot,
};
use crate::format::json::{self, Object, ObjectExt, Value};
use crate::format::limits::{JsonLimits, RecordLimits};
use crate::format::path::{is_absolute, RelPath};
use crate::format::record::{self, Record};
use crate::storage::{Location, ObjectStore, StorageError};

/// What a worker's `write_shard` reports to the coordinator: the library's `PublishedShard`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardReceipt {
    /// Full location of the data shard (`/abs/root/objects/data/...`, `gs://...`).
    pub data_uri: String,
    /// Full location of the metadata shard.
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
    /// ArrayRecord writer options (default `group_size:1`, zstd, as the library's).
    pub writer_options: WriterOptions,
    pub record_limits: RecordLimits,
}

/// Where a publication puts its manifest pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PageLayout {
    /// `manifests/<sha256(page id):2>/<page id>.json` (`publish`).
    #[default]
    Hashed,
    /// `manifests/<snapshot id:2 characters>/<page id>.json` (reference views).
    SnapshotPrefix,
}

/// How a publication is laid out.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// Any nonempty string.
    pub dataset_id: String,
    /// Any nonempty string that makes valid paths (`snapshots/<id>/snapshot.json`).
    pub snapshot_id: String,
    /// When given, exactly these work ids (no duplicates) must be present.
    pub expected_work_ids: Option<Vec<String>>,
    /// The publication's metadata, written to the root.
    pub metadata: Object,
    /// At most this many shards per manifest page (default 10,000).
    pub shards_per_manifest: usize,
    /// Check every receipt against its shards before writing anything (on by default): both
    /// objects are the ones its work id and attempt name (`sha256("<work_id>:<attempt>")`),
    /// and each holds the receipt's record count, read from the ArrayRecord file itself. A
    /// receipt is a worker's claim: committing a wrong count silently loses or invents
    /// records. Sizes are checked either way.
    pub verify_receipts: bool,
    pub page_layout: PageLayout,
}

impl PublishOptions {
    pub fn new(dataset_id: impl Into<String>, snapshot_id: impl Into<String>) -> PublishOptions {
        PublishOptions {
            dataset_id: dataset_id.into(),
            snapshot_id: snapshot_id.into(),
            expected_work_ids: None,
            metadata: Object::new(),
            shards_per_manifest: 10_000,
            verify_receipts: true,
            page_layout: PageLayout::Hashed,
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

/// A file being written, counting and hashing its bytes (the hash identifies the content for
/// callers that derive ids from it, such as `sds create`; shard names do not use it).
struct CountingFile {
    file: BufWriter<File>,
    len: u64,
    hasher: Sha256,
}

impl Write for CountingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.len += n as u64;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
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
            hasher: Sha256::new(),
        };
        let writer = ArrayRecordWriter::new(sink, *options)
            .map_err(|source| DatasetError::Shard {
                object: path.display().to_string(),
                source,
            })?
            .spool_in(dir.to_path_buf());
        Ok(ShardFile { writer, path })
    }

    /// Appends one record whose bytes are the concatenation of `pieces`.
    fn write(&mut self, pieces: &[&[u8]]) -> Result<(), DatasetError> {
        self.writer
            .write_pieces(pieces)
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
            sha256: hex::encode(sink.hasher.finalize()),
            path: self.path,
        })
    }
}

/// Encodes `records` into a data shard and its aligned metadata shard, writes both create-only
/// at the paths of `work_id` and `attempt`, and returns the receipt.
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
/// [`write_shard`]. Storing makes both objects durable before linking them into place, so a
/// writer can encode its next shard on one thread while this one is stored on another.
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
    sha256: String,
    path: std::path::PathBuf,
}

/// Encodes `records` into a data shard and its metadata shard in temporary files, placed where
/// `store` can adopt them without a copy ([`ObjectStore::local_root`]).
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
    let temp = staging_temp_dir(store)?;
    let mut data = ShardFile::create(temp.path(), "data.arrayrecord", &options.writer_options)?;
    let mut metadata =
        ShardFile::create(temp.path(), "metadata.arrayrecord", &options.writer_options)?;
    let mut record_count = 0u64;
    for record in records {
        let (payload, meta) =
            record::encode_pieces(&record, &options.record_limits).map_err(|source| {
                DatasetError::Record {
                    ordinal: record_count,
                    object: format!("work {work_id}"),
                    source,
                }
            })?;
        // The pieces borrow the record's tensor bytes and the writer streams them to the
        // compressor: a large record is held once, plus the writer's constant spool.
        data.write(&payload.pieces())?;
        drop(payload);
        drop(record);
        metadata.write(&[meta.to_row_json().as_bytes()])?;
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
    let staged = store.local_root().and_then(|dir| {
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
    /// SHA-256 hex of the data shard and of the metadata shard, `data:metadata`: what the
    /// shard pair holds, independent of where it is stored and of its name.
    pub fn content_sha256(&self) -> String {
        format!("{}:{}", self.data.sha256, self.metadata.sha256)
    }

    /// Writes both shards create-only at the paths of the work id and attempt; the receipt.
    pub fn store(self, store: &dyn ObjectStore) -> Result<ShardReceipt, DatasetError> {
        let id = shard_id(&self.work_id, self.attempt);
        let bad_id =
            |e: crate::format::documents::IdError| DatasetError::Publication(e.to_string());
        let data_path = data_shard_path(&id).map_err(bad_id)?;
        let metadata_path = metadata_shard_path(&id).map_err(bad_id)?;
        for (path, file) in [
            (&data_path, &self.data.path),
            (&metadata_path, &self.metadata.path),
        ] {
            adopt(store, path, file, &self.work_id, self.attempt)?;
        }
        let generation = |path: &RelPath| -> Result<Option<u64>, DatasetError> {
            Ok(if store.persists_generations() {
                store.info(path, None)?.version.generation
            } else {
                None
            })
        };
        Ok(ShardReceipt {
            data_generation: generation(&data_path)?,
            metadata_generation: generation(&metadata_path)?,
            data_uri: store.describe(&data_path),
            metadata_uri: store.describe(&metadata_path),
            work_id: self.work_id,
            attempt: self.attempt,
            record_count: self.record_count,
            data_bytes: self.data.bytes,
            metadata_bytes: self.metadata.bytes,
        })
    }
}

/// Stores one shard file create-only; a different object already under the name is the
/// collision of two producers using the same work id and attempt.
fn adopt(
    store: &dyn ObjectStore,
    path: &RelPath,
    file: &Path,
    work_id: &str,
    attempt: u64,
) -> Result<(), DatasetError> {
    match store.adopt_file(path, file) {
        Ok(_) => Ok(()),
        Err(StorageError::Collision { object }) => Err(DatasetError::Publication(format!(
            "{object} already exists with different bytes: work {work_id:?} attempt {attempt} \
             was written before with other records or writer options (use a new attempt number)"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Commits shards as one immutable snapshot, writing `root.json` last. Safe to re-run.
pub fn publish(
    store: &dyn ObjectStore,
    receipts: &[ShardReceipt],
    options: &PublishOptions,
) -> Result<PublishSummary, DatasetError> {
    check_ids(options)?;
    let chosen = choose_receipts(receipts, options.expected_work_ids.as_deref())?;
    let entries = shard_entries(store, &chosen, options.verify_receipts)?;
    publish_entries(store, entries, options)
}

/// The commit step of [`publish`], for callers that prepared their shard entries themselves
/// (reference views carry `record_indices` and absolute references): writes manifest pages
/// (laid out by `options.page_layout`), the snapshot, then `root.json`, all create-only.
/// `options.expected_work_ids` is not used here. The entries must tile `[0, n)` in order; the
/// caller is responsible for every referenced shard existing with its `stored_bytes`.
pub fn publish_entries(
    store: &dyn ObjectStore,
    entries: Vec<ShardEntry>,
    options: &PublishOptions,
) -> Result<PublishSummary, DatasetError> {
    check_ids(options)?;
    let bad_id = |e: crate::format::documents::IdError| DatasetError::Publication(e.to_string());
    let per_page = options.shards_per_manifest.max(1);
    let mut manifests = Vec::new();
    let mut first_ordinal = 0u64;
    for (page_index, shards) in entries.chunks(per_page).enumerate() {
        let page = ManifestPage::from_shards(first_ordinal, shards.to_vec())?;
        let index = page_index as u64;
        let path = match options.page_layout {
            PageLayout::Hashed => manifest_path(&options.snapshot_id, index),
            PageLayout::SnapshotPrefix => reference_manifest_path(&options.snapshot_id, index),
        }
        .map_err(bad_id)?;
        let reference = create_document(store, &path, page.to_json())?;
        first_ordinal = page
            .end_ordinal()
            .ok_or_else(|| DatasetError::Publication("record count overflows 64 bits".into()))?;
        manifests.push(ManifestRef::for_page(
            &page,
            ObjectRef::new(reference.path, reference.stored_bytes),
        ));
    }
    let manifest_pages = manifests.len() as u64;
    let snapshot = Snapshot::from_manifests(options.snapshot_id.clone(), manifests)?;
    let snapshot_ref = create_document(
        store,
        &snapshot_path(&options.snapshot_id).map_err(bad_id)?,
        snapshot.to_json(),
    )?;
    let root = DatasetRoot::new(
        options.dataset_id.clone(),
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

/// Both ids must be nonempty (the library's only rule); the snapshot id must also make valid
/// paths, which [`snapshot_path`] checks.
fn check_ids(options: &PublishOptions) -> Result<(), DatasetError> {
    if options.dataset_id.is_empty() {
        return Err(DatasetError::Publication(
            "dataset_id must be a nonempty string".into(),
        ));
    }
    snapshot_path(&options.snapshot_id)
        .map(|_| ())
        .map_err(|e| DatasetError::Publication(format!("snapshot_id: {e}")))
}

/// One receipt per work id (the highest attempt), ordered by work id, checked against the
/// expected ids when given.
fn choose_receipts<'a>(
    receipts: &'a [ShardReceipt],
    expected: Option<&[String]>,
) -> Result<Vec<&'a ShardReceipt>, DatasetError> {
    let mut by_work: BTreeMap<&str, &ShardReceipt> = BTreeMap::new();
    for receipt in receipts {
        if receipt.work_id.is_empty() {
            return Err(DatasetError::Publication(
                "a receipt has an empty work_id".into(),
            ));
        }
        let keep = by_work
            .get(receipt.work_id.as_str())
            .is_none_or(|kept| receipt.attempt > kept.attempt);
        if keep {
            by_work.insert(&receipt.work_id, receipt);
        }
    }
    if let Some(expected) = expected {
        check_expected(&by_work, expected)?;
    }
    Ok(by_work.into_values().collect())
}

fn check_expected(
    by_work: &BTreeMap<&str, &ShardReceipt>,
    expected: &[String],
) -> Result<(), DatasetError> {
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
    if !missing.is_empty() {
        return Err(DatasetError::Publication(format!(
            "missing work ids: {missing:?}"
        )));
    }
    let unexpected: Vec<&str> = by_work
        .keys()
        .filter(|w| !expected_set.contains(*w))
        .copied()
        .collect();
    if !unexpected.is_empty() {
        return Err(DatasetError::Publication(format!(
            "unexpected work ids: {unexpected:?}"
        )));
    }
    Ok(())
}

/// Shard entries for the chosen receipts, in order, empty shards included; each shard's size
/// checked with a metadata request (and, with `verify`, its name and record count).
fn shard_entries(
    store: &dyn ObjectStore,
    receipts: &[&ShardReceipt],
    verify: bool,
) -> Result<Vec<ShardEntry>, DatasetError> {
    let mut entries = Vec::new();
    let mut first_ordinal = 0u64;
    for receipt in receipts {
        if verify {
            check_shard_names(store, receipt)?;
        }
        let check = |uri: &str, bytes, generation| {
            checked_reference(store, receipt, uri, bytes, generation, verify)
        };
        let data = check(
            &receipt.data_uri,
            receipt.data_bytes,
            receipt.data_generation,
        )?;
        let metadata = check(
            &receipt.metadata_uri,
            receipt.metadata_bytes,
            receipt.metadata_generation,
        )?;
        entries.push(ShardEntry::new(
            first_ordinal,
            ObjectRef::new(data.path, data.stored_bytes),
            ObjectRef::new(metadata.path, metadata.stored_bytes),
            receipt.record_count,
        ));
        first_ordinal = first_ordinal
            .checked_add(receipt.record_count)
            .ok_or_else(|| DatasetError::Publication("record count overflows 64 bits".into()))?;
    }
    Ok(entries)
}

/// The dataset-relative path of a receipt's location: a full location must lie below the
/// store's root (the library's `relative_uri`); a relative path is taken as it is.
pub fn relative_location(store: &dyn ObjectStore, uri: &str) -> Result<RelPath, DatasetError> {
    if !is_absolute(uri) {
        return Ok(RelPath::new(uri)?);
    }
    // The store spells its root as the prefix of every object it describes.
    let root = store.location().object_prefix();
    let local_uri = match Location::parse(uri) {
        Ok(Location::Local(path)) => Some(path.display().to_string()),
        _ => None,
    };
    let text = local_uri.as_deref().unwrap_or(uri);
    match text.strip_prefix(root.as_str()) {
        Some(rest) => Ok(RelPath::new(rest)?),
        None => Err(DatasetError::Publication(format!(
            "{uri} is outside the dataset root {}",
            root.trim_end_matches('/')
        ))),
    }
}

fn checked_reference(
    store: &dyn ObjectStore,
    receipt: &ShardReceipt,
    uri: &str,
    expected_bytes: u64,
    generation: Option<u64>,
    count_records: bool,
) -> Result<Reference, DatasetError> {
    let work_id = &receipt.work_id;
    let path = relative_location(store, uri)?;
    let info = store.info(&path, generation.filter(|_| store.persists_generations()))?;
    if info.size != expected_bytes {
        return Err(DatasetError::Publication(format!(
            "work {work_id}: {} has {} bytes but its receipt says {expected_bytes}",
            store.describe(&path),
            info.size
        )));
    }
    if count_records {
        let object = store.describe(&path);
        let size = info.size;
        let source = BorrowedObject {
            store,
            path: &path,
            size,
        };
        let reader = ArrayRecordReader::open(source, object.clone()).map_err(|source| {
            DatasetError::Shard {
                object: object.clone(),
                source,
            }
        })?;
        if reader.len() != receipt.record_count {
            return Err(refused_receipt(
                receipt,
                format!(
                    "{object} holds {} records but the receipt says record_count {}",
                    reader.len(),
                    receipt.record_count
                ),
            ));
        }
    }
    Ok(Reference::new(path, expected_bytes))
}

/// The refusal of a receipt that does not describe its shards.
fn refused_receipt(receipt: &ShardReceipt, problem: String) -> DatasetError {
    DatasetError::Publication(format!(
        "receipt of work {:?} attempt {}: {problem}; nothing was published (receipts are \
         checked against their shards unless --no-verify-receipts is given)",
        receipt.work_id, receipt.attempt
    ))
}

/// Both of a receipt's objects must be the shard pair its work id and attempt name: a receipt
/// naming another work's shard would publish that shard twice, or one nobody wrote for it.
fn check_shard_names(store: &dyn ObjectStore, receipt: &ShardReceipt) -> Result<(), DatasetError> {
    let id = shard_id(&receipt.work_id, receipt.attempt);
    let bad_id = |e: crate::format::documents::IdError| DatasetError::Publication(e.to_string());
    let expected = [
        (
            "data_uri",
            &receipt.data_uri,
            data_shard_path(&id).map_err(bad_id)?,
        ),
        (
            "metadata_uri",
            &receipt.metadata_uri,
            metadata_shard_path(&id).map_err(bad_id)?,
        ),
    ];
    for (key, uri, path) in expected {
        if relative_location(store, uri)? != path {
            return Err(refused_receipt(
                receipt,
                format!(
                    "{key} {uri} is not {path}, the shard its work id and attempt name \
                     (sha256(\"<work_id>:<attempt>\"))"
                ),
            ));
        }
    }
    Ok(())
}

/// An object read through a borrowed store (counting a shard's records at publication).
struct BorrowedObject<'a> {
    store: &'a dyn ObjectStore,
    path: &'a RelPath,
    size: u64,
}

impl ByteSource for BorrowedObject<'_> {
    fn size(&self) -> std::io::Result<u64> {
        Ok(self.size)
    }

    fn read_at(&self, offset: u64, len: usize) -> std::io::Result<bytes::Bytes> {
        let end = offset.saturating_add(len as u64);
        Ok(self.store.read_range(self.path, offset..end, None)?)
    }
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
    /// The receipt as compact deterministic JSON with every `PublishedShard` field (what
    /// `sds write-shard` prints; generations `null` when absent).
    pub fn to_json(&self) -> String {
        let generation = |g: Option<u64>| g.map_or(Value::Null, Value::from);
        let mut doc = Object::new();
        doc.insert("attempt".into(), Value::from(self.attempt));
        doc.insert("data_bytes".into(), Value::from(self.data_bytes));
        doc.insert("data_generation".into(), generation(self.data_generation));
        doc.insert("data_uri".into(), Value::from(self.data_uri.as_str()));
        doc.insert("metadata_bytes".into(), Value::from(self.metadata_bytes));
        doc.insert(
            "metadata_generation".into(),
            generation(self.metadata_generation),
        );
        doc.insert(
            "metadata_uri".into(),
            Value::from(self.metadata_uri.as_str()),
        );
        doc.insert("record_count".into(), Value::from(self.record_count));
        doc.insert("work_id".into(), Value::from(self.work_id.as_str()));
        json::object_to_compact(&doc)
    }

    /// Reads a receipt: ours, or the library's `PublishedShard` as `json.dumps(asdict(shard))`
    /// writes it (any key order and spacing; generations optional or `null`).
    pub fn parse(bytes: &[u8]) -> Result<ShardReceipt, DatasetError> {
        let bad = |e: String| DatasetError::Publication(format!("invalid receipt: {e}"));
        let doc =
            json::parse_object(bytes, &JsonLimits::CONTROL).map_err(|e| bad(e.to_string()))?;
        let get_u64 = |key: &str| doc.req_u64(key).map_err(|e| bad(e.to_string()));
        let get_str = |key: &str| match doc.req_str(key) {
            Ok("") => Err(bad(format!("{key} must be a nonempty string"))),
            Ok(text) => Ok(text.to_string()),
            Err(e) => Err(bad(e.to_string())),
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
