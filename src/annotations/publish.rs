//! Publishing annotation sets (profile section 6).
//!
//! The protocol has three steps, each safe to repeat:
//! 1. **Workers** ([`write_annotation_shard`]) encode one logical shard's rows as carrier
//!    records into an ArrayRecord object (`group_size:1`) at its content address, then create
//!    the shard's worker pointer create-only. The first pointer created for a logical shard id
//!    wins; a later worker finds it and adopts it instead of failing, so retried or duplicated
//!    workers converge on one object per shard.
//! 2. **The coordinator** ([`publish_set`]) follows pointers `shard-00000000`, `shard-00000001`,
//!    ... and requires them to tile every source ordinal densely, each record id equal to the
//!    source record's id at its ordinal, and each object's size equal to what its pointer says.
//!    Only then is the set root written (create-only), with the row counts by status in its
//!    metadata under [`ROW_COUNTS_KEY`](super::ROW_COUNTS_KEY).
//! 3. **The catalog swing** ([`commit_to_catalog`]): a new revision = the current one plus this
//!    set's entry (added or replaced), written create-only at its content address, then
//!    `annotations/catalog.json` is compare-and-swapped from the version just read. On a
//!    conflict everything is re-read and rebuilt (never a stale revision re-used), up to
//!    `catalog_retry_limit` retries, with a short randomised pause so racing writers spread out.
//!    Because each revision is derived from the one it replaces, no concurrently published set
//!    is ever lost. A transient failure of the swap itself (its response lost: it may have
//!    happened) is handled the same way, never by repeating the request: the catalog is
//!    re-read, and if it already holds this entry the publication is done.
//!
//! The publication id defaults to the profile's derivation from the set name and the source
//! snapshot id, so re-running the same publication writes the same bytes to the same paths and
//! succeeds. Rows that differ under the same publication id are refused (the pointers or set
//! root already hold other bytes) rather than silently adopted: pass another publication id.

use std::collections::BTreeMap;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::carrier::AnnotationRecord;
use super::read::{read_pointer, read_revision, ROW_COUNTS_KEY};
use super::{AnnotationError, AnnotationStatus};
use crate::arrayrecord::{ArrayRecordWriter, WriterOptions};
use crate::dataset::Dataset;
use crate::format::documents::ids::{
    annotation_object_path, default_publication_id, is_portable_id, logical_shard_id,
    revision_path, set_root_path, worker_pointer_path,
};
use crate::format::documents::{
    CatalogPointer, Reference, Revision, SetRoot, SetShard, WorkerPointer,
};
use crate::format::json::{Object, Value};
use crate::format::limits::RecordLimits;
use crate::format::path::RelPath;
use crate::format::record;
use crate::storage::{ErrorKind, StorageError};

/// How a set is published.
#[derive(Debug, Clone)]
pub struct AnnotationOptions {
    /// Rows per logical shard (default 10000).
    pub records_per_shard: u64,
    /// Compare-and-swap retries after the first attempt (default 8).
    pub catalog_retry_limit: u32,
    /// `None`: the profile's default, derived from the set name and source snapshot id.
    pub publication_id: Option<String>,
    /// ArrayRecord options of annotation objects; the layout requires `group_size:1`.
    pub writer_options: WriterOptions,
    pub record_limits: RecordLimits,
}

impl Default for AnnotationOptions {
    fn default() -> Self {
        AnnotationOptions {
            records_per_shard: 10_000,
            catalog_retry_limit: 8,
            publication_id: None,
            writer_options: WriterOptions::default(),
            record_limits: RecordLimits::default(),
        }
    }
}

impl AnnotationOptions {
    /// The publication id to use for set `name` of `dataset`.
    pub fn publication_id_for(
        &self,
        dataset: &Dataset,
        name: &str,
    ) -> Result<String, AnnotationError> {
        check_id("set name", name)?;
        let id = self
            .publication_id
            .clone()
            .unwrap_or_else(|| default_publication_id(name, &dataset.snapshot().snapshot_id));
        check_id("publication id", &id)?;
        Ok(id)
    }

    /// Ordinals of logical shard `index`: `[first, end)`; empty past the end.
    pub fn shard_range(&self, dataset: &Dataset, index: u64) -> std::ops::Range<u64> {
        let per = self.records_per_shard.max(1);
        let first = index.saturating_mul(per).min(dataset.len());
        first..first.saturating_add(per).min(dataset.len())
    }
}

/// What a worker's shard write ended with.
#[derive(Debug, Clone)]
pub struct ShardOutcome {
    /// The winning pointer (this worker's own, or the one it adopted).
    pub pointer: WorkerPointer,
    pub pointer_path: RelPath,
    /// The object this worker wrote.
    pub own_object: RelPath,
    /// Whether an earlier pointer won and was adopted.
    pub adopted: bool,
}

/// What a publication committed.
#[derive(Debug, Clone)]
pub struct PublishedSet {
    pub name: String,
    pub publication_id: String,
    pub root_path: RelPath,
    /// The revision the catalog pointed at when this publication's swing succeeded.
    pub revision_path: RelPath,
    pub record_count: u64,
    pub shard_count: u64,
    pub row_counts: BTreeMap<AnnotationStatus, u64>,
    /// Compare-and-swap attempts made (1 when there was no conflict; 0 when the catalog
    /// already held exactly this set).
    pub catalog_attempts: u32,
}

fn check_id(what: &str, id: &str) -> Result<(), AnnotationError> {
    if is_portable_id(id) {
        Ok(())
    } else {
        Err(AnnotationError::refused(format!(
            "{what} {id:?} is not a portable identifier ([A-Za-z0-9][A-Za-z0-9._-]{{0,127}})"
        )))
    }
}

fn id_error(e: impl std::fmt::Display) -> AnnotationError {
    AnnotationError::refused(e.to_string())
}

/// Publishes a dense set in one process: `rows` must hold exactly one row per source ordinal,
/// in ordinal order. Writes every shard, then coordinates. Safe to re-run.
pub fn publish_annotations(
    dataset: &Dataset,
    name: &str,
    rows: &[AnnotationRecord],
    metadata: &Object,
    options: &AnnotationOptions,
) -> Result<PublishedSet, AnnotationError> {
    let publication_id = options.publication_id_for(dataset, name)?;
    if rows.len() as u64 != dataset.len() {
        return Err(AnnotationError::refused(format!(
            "set {name:?}: {} rows given but the dataset has {} records; a set is dense",
            rows.len(),
            dataset.len()
        )));
    }
    let per = options.records_per_shard.max(1);
    let shard_count = dataset.len().div_ceil(per);
    for index in 0..shard_count {
        let range = options.shard_range(dataset, index);
        let slice = rows
            .get(range.start as usize..range.end as usize)
            .unwrap_or_default();
        let outcome =
            write_annotation_shard(dataset, name, &publication_id, index, slice, options)?;
        if outcome.adopted && outcome.pointer.uri != outcome.own_object {
            return Err(AnnotationError::refused(format!(
                "set {name:?}, publication {publication_id:?}: {} was already published with \
                 different rows ({}); publish under another publication id",
                outcome.pointer.logical_shard_id,
                dataset.store().describe(&outcome.pointer_path)
            )));
        }
    }
    publish_set(dataset, name, &publication_id, metadata, options)
}

/// Worker step: writes logical shard `shard_index` of a publication (its rows, in ordinal
/// order) and creates its worker pointer, adopting an earlier winner if there is one.
pub fn write_annotation_shard(
    dataset: &Dataset,
    name: &str,
    publication_id: &str,
    shard_index: u64,
    rows: &[AnnotationRecord],
    options: &AnnotationOptions,
) -> Result<ShardOutcome, AnnotationError> {
    check_id("set name", name)?;
    check_id("publication id", publication_id)?;
    if options.writer_options.group_size != 1 {
        return Err(AnnotationError::refused(
            "annotation objects must be written with group_size:1 (profile section 6)",
        ));
    }
    let range = options.shard_range(dataset, shard_index);
    let shard_id = logical_shard_id(shard_index);
    if range.is_empty() {
        return Err(AnnotationError::refused(format!(
            "set {name:?}: {shard_id} starts past the dataset's {} records ({} rows per shard)",
            dataset.len(),
            options.records_per_shard
        )));
    }
    if rows.len() as u64 != range.end - range.start {
        return Err(AnnotationError::refused(format!(
            "set {name:?}: {shard_id} covers ordinals [{}, {}) but {} rows were given",
            range.start,
            range.end,
            rows.len()
        )));
    }
    let mut payloads = Vec::with_capacity(rows.len());
    for (row, ordinal) in rows.iter().zip(range.clone()) {
        if row.source_index != ordinal {
            return Err(AnnotationError::refused(format!(
                "set {name:?}: {shard_id} row {} has source_index {} but must annotate ordinal {ordinal}",
                ordinal - range.start,
                row.source_index
            )));
        }
        row.check().map_err(AnnotationError::refused)?;
        let source = dataset.record_meta(ordinal)?;
        if source.id != row.source_record_id {
            return Err(AnnotationError::refused(format!(
                "set {name:?}: the row for ordinal {ordinal} names record {:?}, but the source \
                 record there is {:?}",
                row.source_record_id, source.id
            )));
        }
        let payload = record::encode(&row.to_carrier(), &options.record_limits).map_err(|e| {
            AnnotationError::refused(format!("set {name:?}: row for ordinal {ordinal}: {e}"))
        })?;
        payloads.push(payload);
    }
    let bytes = encode_object(&payloads, &options.writer_options)
        .map_err(|e| AnnotationError::refused(format!("set {name:?}: {shard_id}: {e}")))?;
    let store = dataset.store();
    let hash = hex::encode(Sha256::digest(&bytes));
    let object = annotation_object_path(name, publication_id, &hash).map_err(id_error)?;
    store.create(&object, &bytes)?;
    let generation = if store.supports_generations() {
        store.info(&object, None)?.version.generation
    } else {
        None
    };
    let statuses: Vec<AnnotationStatus> = rows.iter().map(|r| r.status).collect();
    let pointer = WorkerPointer {
        first_ordinal: range.start,
        generation,
        logical_shard_id: shard_id.clone(),
        name: name.to_string(),
        publication_id: publication_id.to_string(),
        record_ids: rows.iter().map(|r| r.source_record_id.clone()).collect(),
        source_snapshot_id: dataset.snapshot().snapshot_id.clone(),
        terminal_statuses: statuses.clone(),
        statuses,
        stored_bytes: bytes.len() as u64,
        uri: object.clone(),
    };
    let pointer_path = worker_pointer_path(name, publication_id, &shard_id).map_err(id_error)?;
    match store.create(&pointer_path, pointer.to_json().as_bytes()) {
        Ok(_) => Ok(ShardOutcome {
            pointer,
            pointer_path,
            own_object: object,
            adopted: false,
        }),
        Err(StorageError::Collision { .. }) => {
            let winner = read_worker_pointer(dataset, &pointer_path)?;
            check_pointer(
                dataset,
                &winner,
                name,
                publication_id,
                &shard_id,
                range.start,
            )
            .map_err(|detail| AnnotationError::corrupt(store.describe(&pointer_path), detail))?;
            Ok(ShardOutcome {
                pointer: winner,
                pointer_path,
                own_object: object,
                adopted: true,
            })
        }
        Err(e) => Err(e.into()),
    }
}

fn encode_object(payloads: &[Vec<u8>], options: &WriterOptions) -> Result<Vec<u8>, String> {
    let mut writer = ArrayRecordWriter::new(Vec::new(), *options).map_err(|e| e.to_string())?;
    for payload in payloads {
        writer.write(payload).map_err(|e| e.to_string())?;
    }
    writer.finish().map_err(|e| e.to_string())
}

fn read_worker_pointer(
    dataset: &Dataset,
    path: &RelPath,
) -> Result<WorkerPointer, AnnotationError> {
    let store = dataset.store();
    let limits = dataset.options().control_limits;
    let bytes = store.read_limited(path, None, limits.max_bytes as u64)?;
    let pointer =
        WorkerPointer::parse(&bytes, &limits).map_err(|e| e.with_document(store.describe(path)))?;
    pointer
        .validate()
        .map_err(|e| e.with_document(store.describe(path)))?;
    Ok(pointer)
}

/// Checks that a pointer belongs where it was found.
fn check_pointer(
    dataset: &Dataset,
    pointer: &WorkerPointer,
    name: &str,
    publication_id: &str,
    shard_id: &str,
    first_ordinal: u64,
) -> Result<(), String> {
    let snapshot = &dataset.snapshot().snapshot_id;
    let checks = [
        (
            pointer.name == name,
            format!("name {:?} is not {name:?}", pointer.name),
        ),
        (
            pointer.publication_id == publication_id,
            format!(
                "publication_id {:?} is not {publication_id:?}",
                pointer.publication_id
            ),
        ),
        (
            pointer.logical_shard_id == shard_id,
            format!(
                "logical_shard_id {:?} is not {shard_id:?}",
                pointer.logical_shard_id
            ),
        ),
        (
            &pointer.source_snapshot_id == snapshot,
            format!(
                "source_snapshot_id {:?} is not the dataset's snapshot {snapshot:?}",
                pointer.source_snapshot_id
            ),
        ),
        (
            pointer.first_ordinal == first_ordinal,
            format!(
                "first_ordinal {} is not {first_ordinal}: the pointers do not tile the ordinals",
                pointer.first_ordinal
            ),
        ),
        (
            !pointer.record_ids.is_empty(),
            "record_ids is empty; a shard holds at least one record".to_string(),
        ),
    ];
    match checks.into_iter().find(|(ok, _)| !ok) {
        Some((_, problem)) => Err(problem),
        None => Ok(()),
    }
}

/// Coordinator step: requires worker pointers covering every source ordinal densely, writes the
/// set root (row counts in its metadata), a new revision, and swings the catalog.
pub fn publish_set(
    dataset: &Dataset,
    name: &str,
    publication_id: &str,
    metadata: &Object,
    options: &AnnotationOptions,
) -> Result<PublishedSet, AnnotationError> {
    check_id("set name", name)?;
    check_id("publication id", publication_id)?;
    let store = dataset.store();
    let total = dataset.len();
    let mut shards = Vec::new();
    let mut counts: BTreeMap<AnnotationStatus, u64> = [
        (AnnotationStatus::Success, 0),
        (AnnotationStatus::Skipped, 0),
        (AnnotationStatus::Failed, 0),
    ]
    .into();
    let mut next = 0u64;
    while next < total {
        let shard_id = logical_shard_id(shards.len() as u64);
        let path = worker_pointer_path(name, publication_id, &shard_id).map_err(id_error)?;
        let pointer = match read_worker_pointer(dataset, &path) {
            Ok(pointer) => pointer,
            Err(AnnotationError::Storage(e)) if e.is_not_found() => {
                return Err(AnnotationError::refused(format!(
                    "set {name:?}, publication {publication_id:?}: ordinals [{next}, {total}) are \
                     not covered: no worker pointer for {shard_id} ({})",
                    store.describe(&path)
                )))
            }
            Err(e) => return Err(e),
        };
        let object = store.describe(&path);
        check_pointer(dataset, &pointer, name, publication_id, &shard_id, next)
            .map_err(|detail| AnnotationError::corrupt(object.clone(), detail))?;
        let count = pointer.record_ids.len() as u64;
        if next + count > total {
            return Err(AnnotationError::corrupt(
                object,
                format!(
                    "covers ordinals [{next}, {}) past the dataset's {total} records",
                    next + count
                ),
            ));
        }
        for (k, id) in pointer.record_ids.iter().enumerate() {
            let ordinal = next + k as u64;
            let source = dataset.record_meta(ordinal)?;
            if &source.id != id {
                return Err(AnnotationError::corrupt(
                    object,
                    format!("record_ids[{k}] is {id:?} but the source record at ordinal {ordinal} is {:?}", source.id),
                ));
            }
        }
        let info = store.info(&pointer.uri, None)?;
        if info.size != pointer.stored_bytes {
            return Err(AnnotationError::corrupt(
                store.describe(&pointer.uri),
                format!(
                    "size {} differs from the {} bytes its worker pointer records",
                    info.size, pointer.stored_bytes
                ),
            ));
        }
        for status in &pointer.statuses {
            *counts.entry(*status).or_default() += 1;
        }
        shards.push(SetShard {
            first_ordinal: next,
            object: Reference::new(pointer.uri.clone(), pointer.stored_bytes),
            record_count: count,
        });
        next += count;
    }
    let mut metadata = metadata.clone();
    let tally: Object = counts
        .iter()
        .map(|(status, n)| (status.as_wire().to_string(), Value::from(*n)))
        .collect();
    metadata.insert(ROW_COUNTS_KEY.to_string(), Value::Object(tally));
    let shard_count = shards.len() as u64;
    let root = SetRoot {
        metadata,
        name: name.to_string(),
        publication_id: publication_id.to_string(),
        record_count: total,
        shards,
        source_snapshot_id: dataset.snapshot().snapshot_id.clone(),
    };
    root.validate()?;
    let root_path = set_root_path(name, publication_id).map_err(id_error)?;
    let root_json = root.to_json();
    store
        .create(&root_path, root_json.as_bytes())
        .map_err(|e| match e {
            StorageError::Collision { object } => AnnotationError::refused(format!(
            "{object} already holds a different set root (other rows or metadata under the same \
             publication id); publish under another publication id"
        )),
            e => e.into(),
        })?;
    let reference = Reference::new(root_path.clone(), root_json.len() as u64);
    let (revision_path, catalog_attempts) =
        commit_to_catalog(dataset, name, &reference, options.catalog_retry_limit)?;
    Ok(PublishedSet {
        name: name.to_string(),
        publication_id: publication_id.to_string(),
        root_path,
        revision_path,
        record_count: total,
        shard_count,
        row_counts: counts,
        catalog_attempts,
    })
}

/// Adds or replaces set `name` → `reference` in the catalog: a new revision derived from the
/// current one, then a compare-and-swap of `annotations/catalog.json`, re-reading everything on
/// a conflict, at most `retry_limit` retries. Returns the revision committed and the attempts
/// made (0 when the catalog already held exactly this entry).
pub fn commit_to_catalog(
    dataset: &Dataset,
    name: &str,
    reference: &Reference,
    retry_limit: u32,
) -> Result<(RelPath, u32), AnnotationError> {
    let store = dataset.store();
    let catalog = crate::format::documents::ids::catalog_path().map_err(id_error)?;
    let mut attempts = 0u32;
    loop {
        let current = read_pointer(dataset)?;
        let mut revision = match &current {
            Some((pointer, _, _)) => read_revision(dataset, pointer)?,
            None => Revision::default(),
        };
        if let Some((pointer, _, _)) = &current {
            if revision.sets.get(name) == Some(reference) {
                return Ok((pointer.revision.path.clone(), attempts));
            }
        }
        revision.sets.insert(name.to_string(), reference.clone());
        let revision_json = revision.to_json();
        let path = revision_path(&hex::encode(Sha256::digest(revision_json.as_bytes())))
            .map_err(id_error)?;
        store.create(&path, revision_json.as_bytes())?;
        let pointer_json = CatalogPointer::new(path.clone()).to_json();
        attempts += 1;
        let expected = current.as_ref().map(|(_, version, _)| version);
        match store.compare_and_swap(&catalog, pointer_json.as_bytes(), expected) {
            Ok(_) => return Ok((path, attempts)),
            Err(StorageError::PreconditionFailed { .. }) if attempts <= retry_limit => {
                std::thread::sleep(backoff(attempts));
            }
            Err(StorageError::PreconditionFailed { object }) => {
                return Err(AnnotationError::Contention { object, attempts })
            }
            // The swap may or may not have happened (a lost response): never repeat it
            // blindly. The loop re-reads the catalog, finds the entry if the swap went
            // through, and otherwise derives a new revision from what it reads.
            Err(e) if e.kind() == ErrorKind::Transient && attempts <= retry_limit => {
                tracing::warn!("{e}; re-reading the catalog before trying again");
                std::thread::sleep(backoff(attempts));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// A short pause before retry `attempt`, randomised so racing writers do not collide again in
/// lockstep (no RNG dependency: the clock's nanoseconds and the process id are enough).
fn backoff(attempt: u32) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = u64::from(nanos) ^ (u64::from(std::process::id()) << 17);
    let spread = 5 + 5 * u64::from(attempt.min(8));
    Duration::from_millis(1 + seed % spread)
}

/// The shards needed to publish every ordinal of `dataset`.
pub fn shard_count(dataset: &Dataset, options: &AnnotationOptions) -> u64 {
    dataset.len().div_ceil(options.records_per_shard.max(1))
}
