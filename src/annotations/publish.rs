//! Publishing annotation sets (`docs/FORMAT.md`, annotations), byte for byte as the
//! `signal-dataset` library publishes them.
//!
//! Two forms, as in the library:
//! - **Single process** ([`publish_annotations`]): every `records_per_shard` rows become one
//!   object named by SHA-256 of `"<publication_id>:<first_ordinal>:<content hash>"`; no worker
//!   pointers are written. Then the set root and the catalog swing.
//! - **Distributed**: workers ([`write_annotation_shard`]) write one logical shard each, its
//!   object named by the first 32 hex of SHA-256 of
//!   `"<name>:<publication_id>:<logical_shard_id>:<content hash>"`, then create its worker
//!   pointer create-only: the first pointer for a logical shard id wins and a later worker
//!   adopts it. The coordinator ([`publish_set`]) follows this project's logical shard ids
//!   (`shard-00000000`, `shard-00000001`, ...), requires them to tile every source ordinal with
//!   the source's record ids, checks each object's size, then writes the set root and swings
//!   the catalog. (The library's coordinator is handed its workers' pointers in memory; ours
//!   finds them by id, so a library worker that used the same ids is coordinated the same way.)
//!
//! Objects are addressed by content, not identity, so an identical retry resumes in place
//! while two workers racing one logical shard with different rows both succeed and the pointer
//! picks the winner.
//!
//! **The catalog swing** ([`commit_to_catalog`]): read the catalog pointer and its revision
//! (hash-checked), refuse if the set name is already catalogued with another root (a
//! publication never replaces or drops another set), write the new revision create-only at the
//! SHA-256 of its bytes, then replace `annotations/catalog.json` by compare-and-swap from the
//! version just read, or create it when there was none. On a conflict everything is re-read
//! and rebuilt, 8 attempts in all with a short randomised backoff. On local storage the swap
//! holds `annotations/.catalog.json.lock` (an exclusive `flock`), the same lock the library's
//! local store takes, so our writers and the library's exclude each other. A first catalog is
//! created with a create-only link, as the library creates it, so neither can overwrite the
//! other's first pointer either.
//!
//! The publication id defaults to the library's derivation from the snapshot id and set name,
//! so re-running the same publication writes the same bytes to the same paths and succeeds.

use std::collections::BTreeMap;
use std::time::Duration;

use super::carrier::AnnotationRecord;
use super::read::{read_catalog_state, read_worker_pointer};
use super::{AnnotationError, AnnotationStatus, Cause};
use crate::arrayrecord::{ArrayRecordReader, ArrayRecordWriter, WriterOptions};
use crate::dataset::Dataset;
use crate::format::documents::annotation::layout::{
    self, content_hash, default_publication_id, distributed_object_id, logical_shard_id,
    object_path, set_root_path, single_process_object_id, worker_pointer_path,
};
use crate::format::documents::annotation::{is_set_name, AnnotationRef};
use crate::format::documents::{CatalogPointer, SetRoot, SetShard, WorkerPointer};
use crate::format::json::{JsonLimits, Object};
use crate::format::limits::RecordLimits;
use crate::format::path::RelPath;
use crate::format::record;
use crate::storage::{ErrorKind, ObjectStore, StorageError};

/// How a set is published.
#[derive(Debug, Clone)]
pub struct AnnotationOptions {
    /// Rows per object (default 10000, the library's).
    pub records_per_shard: u64,
    /// Compare-and-swap attempts in all (default 8, the library's `catalog_retry_limit`).
    pub catalog_retry_limit: u32,
    /// `None`: the library's default, derived from the source snapshot id and the set name.
    pub publication_id: Option<String>,
    /// ArrayRecord options of annotation objects (default `group_size:1`). The library writes
    /// them with the options the dataset was opened with, so `sds annotate --writer-options`
    /// must name the same string for byte-identical objects.
    pub writer_options: WriterOptions,
    pub record_limits: RecordLimits,
    /// The dataset root as the caller addressed it (`/data/ds`, `gs://bucket/ds`): worker
    /// pointers record each object's location as this, `/`, and the object's path, as the
    /// library does. `None`: the store's own description of its root.
    pub root_location: Option<String>,
    /// Check each worker pointer against its object before committing (on by default): the
    /// object holds one carrier per record the pointer names, and its name is the id of those
    /// carriers. A pointer is a worker's claim; committing a wrong one loses or invents rows.
    pub verify_pointers: bool,
}

impl Default for AnnotationOptions {
    fn default() -> Self {
        AnnotationOptions {
            records_per_shard: 10_000,
            catalog_retry_limit: 8,
            publication_id: None,
            writer_options: WriterOptions::default(),
            record_limits: RecordLimits::default(),
            root_location: None,
            verify_pointers: true,
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
            .unwrap_or_else(|| default_publication_id(&dataset.snapshot().snapshot_id, name));
        check_id("publication id", &id)?;
        Ok(id)
    }

    /// The ordinals of logical shard `index`: `[index * N, (index + 1) * N)` clipped to the
    /// dataset.
    pub fn shard_range(&self, dataset: &Dataset, index: u64) -> std::ops::Range<u64> {
        let per = self.records_per_shard.max(1);
        let first = index.saturating_mul(per).min(dataset.len());
        first..first.saturating_add(per).min(dataset.len())
    }

    /// The dataset root's location as worker pointers record it (no trailing `/`).
    fn root_location(&self, store: &dyn ObjectStore) -> String {
        match &self.root_location {
            Some(location) => location.trim_end_matches('/').to_string(),
            None => store_root(store),
        }
    }
}

/// The store's description of its root, derived from its description of the catalog path.
fn store_root(store: &dyn ObjectStore) -> String {
    let Ok(catalog) = layout::catalog_path() else {
        return String::new();
    };
    let described = store.describe(&catalog);
    described
        .strip_suffix(catalog.as_str())
        .unwrap_or(&described)
        .trim_end_matches('/')
        .to_string()
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
    /// Rows by status, every status present (computed by the publisher; not stored).
    pub row_counts: BTreeMap<AnnotationStatus, u64>,
    /// Compare-and-swap attempts made (1 when there was no conflict; 0 when the catalog
    /// already held exactly this set).
    pub catalog_attempts: u32,
}

fn check_id(what: &str, id: &str) -> Result<(), AnnotationError> {
    if is_set_name(id) {
        Ok(())
    } else {
        Err(AnnotationError::refused(format!(
            "{what} {id:?} is not a portable identifier ([A-Za-z0-9][A-Za-z0-9._-]{{0,127}})"
        )))
    }
}

fn layout_error(e: layout::LayoutError) -> AnnotationError {
    AnnotationError::refused(e.to_string())
}

fn tally<'a>(
    statuses: impl IntoIterator<Item = &'a AnnotationStatus>,
) -> BTreeMap<AnnotationStatus, u64> {
    let mut counts: BTreeMap<AnnotationStatus, u64> = [
        (AnnotationStatus::Success, 0),
        (AnnotationStatus::Skipped, 0),
        (AnnotationStatus::Failed, 0),
    ]
    .into();
    for status in statuses {
        *counts.entry(*status).or_default() += 1;
    }
    counts
}

/// Publishes a dense set in one process: `rows` must hold exactly one row per source ordinal,
/// in ordinal order. Writes every object, the set root, and swings the catalog. Safe to
/// re-run; a set name the catalog already holds with another root is a collision error.
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
    let per = usize::try_from(options.records_per_shard.max(1)).unwrap_or(usize::MAX);
    let mut shards = Vec::new();
    for (index, chunk) in rows.chunks(per).enumerate() {
        let first = (index * per) as u64;
        let payloads = encode_rows(dataset, name, first, chunk, options)?;
        let hash = content_hash(payloads.iter().map(Vec::as_slice));
        let id = single_process_object_id(&publication_id, first, &hash);
        let path = object_path(name, &publication_id, &id).map_err(layout_error)?;
        let stored_bytes = write_object(dataset.store().as_ref(), &path, &payloads, options)?;
        shards.push(SetShard {
            first_ordinal: first,
            object: AnnotationRef::new(path, stored_bytes),
            record_count: chunk.len() as u64,
        });
    }
    let counts = tally(rows.iter().map(|r| &r.status));
    commit_set(
        dataset,
        name,
        &publication_id,
        shards,
        metadata,
        options,
        counts,
    )
}

/// Checks `rows` against the source ordinals from `first` and encodes each as a carrier.
fn encode_rows(
    dataset: &Dataset,
    name: &str,
    first: u64,
    rows: &[AnnotationRecord],
    options: &AnnotationOptions,
) -> Result<Vec<Vec<u8>>, AnnotationError> {
    let mut payloads = Vec::with_capacity(rows.len());
    for (row, ordinal) in rows.iter().zip(first..) {
        if row.source_index != ordinal {
            return Err(AnnotationError::refused(format!(
                "set {name:?}: the row for ordinal {ordinal} has source_index {}",
                row.source_index
            )));
        }
        row.check()?;
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
    Ok(payloads)
}

/// Writes one annotation object create-only (an identical object already there is a resume);
/// returns its size.
fn write_object(
    store: &dyn ObjectStore,
    path: &RelPath,
    payloads: &[Vec<u8>],
    options: &AnnotationOptions,
) -> Result<u64, AnnotationError> {
    let bytes = encode_object(payloads, &options.writer_options).map_err(|source| {
        AnnotationError::Encode {
            object: store.describe(path),
            source,
        }
    })?;
    store.create(path, &bytes).map_err(|e| match e {
        StorageError::Collision { object } => AnnotationError::corrupt(
            object,
            "an annotation object already exists here with different bytes, though its name \
             is derived from its content",
        ),
        e => e.into(),
    })?;
    Ok(bytes.len() as u64)
}

fn encode_object(
    payloads: &[Vec<u8>],
    options: &WriterOptions,
) -> Result<Vec<u8>, crate::arrayrecord::Error> {
    let mut writer = ArrayRecordWriter::new(Vec::new(), *options)?;
    for payload in payloads {
        writer.write(payload)?;
    }
    writer.finish()
}

/// Worker step: writes logical shard `shard_index` of a distributed publication (its rows, in
/// ordinal order) and creates its worker pointer, adopting an earlier winner if there is one.
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
    let range = options.shard_range(dataset, shard_index);
    let shard_id = logical_shard_id(shard_index);
    if range.is_empty() || rows.len() as u64 != range.end - range.start {
        return Err(AnnotationError::refused(format!(
            "set {name:?}: {shard_id} covers ordinals [{}, {}) of the dataset's {} records \
             ({} rows per shard) but {} rows were given",
            range.start,
            range.end,
            dataset.len(),
            options.records_per_shard,
            rows.len()
        )));
    }
    let store = dataset.store();
    let payloads = encode_rows(dataset, name, range.start, rows, options)?;
    let hash = content_hash(payloads.iter().map(Vec::as_slice));
    let id = distributed_object_id(name, publication_id, &shard_id, &hash);
    let object = object_path(name, publication_id, &id).map_err(layout_error)?;
    let stored_bytes = write_object(store.as_ref(), &object, &payloads, options)?;
    let pointer = WorkerPointer {
        first_ordinal: range.start,
        generation: None,
        logical_shard_id: shard_id.clone(),
        name: name.to_string(),
        publication_id: publication_id.to_string(),
        record_ids: rows.iter().map(|r| r.source_record_id.clone()).collect(),
        source_snapshot_id: dataset.snapshot().snapshot_id.clone(),
        statuses: rows.iter().map(|r| r.status).collect(),
        stored_bytes,
        terminal_statuses: rows.iter().map(terminal_status).collect(),
        uri: format!("{}/{}", options.root_location(store.as_ref()), object),
    };
    let pointer_path =
        worker_pointer_path(name, publication_id, &shard_id).map_err(layout_error)?;
    let adopted = match store.create(&pointer_path, pointer.to_json().as_bytes()) {
        Ok(_) => None,
        Err(StorageError::Collision { .. }) => Some(read_worker_pointer(dataset, &pointer_path)?),
        Err(e) => return Err(e.into()),
    };
    Ok(ShardOutcome {
        adopted: adopted.is_some(),
        pointer: adopted.unwrap_or(pointer),
        pointer_path,
        own_object: object,
    })
}

/// The library's terminal status of a row: its `detail_status` when it has one.
fn terminal_status(row: &AnnotationRecord) -> String {
    row.detail_status
        .clone()
        .unwrap_or_else(|| row.status.as_wire().to_string())
}

/// Coordinator step: requires worker pointers covering every source ordinal densely, writes the
/// set root, a new revision, and swings the catalog.
pub fn publish_set(
    dataset: &Dataset,
    name: &str,
    publication_id: &str,
    metadata: &Object,
    options: &AnnotationOptions,
) -> Result<PublishedSet, AnnotationError> {
    check_id("set name", name)?;
    check_id("publication id", publication_id)?;
    let root = options.root_location(dataset.store().as_ref());
    let mut shards = Vec::new();
    let mut statuses = Vec::new();
    let mut next = 0u64;
    while next < dataset.len() {
        let shard_id = logical_shard_id(shards.len() as u64);
        let path = worker_pointer_path(name, publication_id, &shard_id).map_err(layout_error)?;
        let pointer = match read_worker_pointer(dataset, &path) {
            Err(AnnotationError::Storage(e)) if e.is_not_found() => {
                return Err(AnnotationError::refused(format!(
                    "set {name:?}, publication {publication_id:?}: ordinals [{next}, {}) are \
                     not covered: no worker pointer for {shard_id} ({})",
                    dataset.len(),
                    dataset.store().describe(&path)
                )))
            }
            found => found?,
        };
        let described = dataset.store().describe(&path);
        let object = check_pointer(dataset, &pointer, name, publication_id, next, &root)
            .and_then(|object| {
                if options.verify_pointers {
                    check_pointer_object(dataset, &pointer, &object)
                        .map_err(|cause| cause.at(format!("worker pointer of {shard_id}")))?;
                }
                Ok(object)
            })
            .map_err(|cause| AnnotationError::Object {
                object: described,
                cause,
            })?;
        statuses.extend(pointer.statuses.iter().copied());
        let count = pointer.record_ids.len() as u64;
        shards.push(SetShard {
            first_ordinal: next,
            object: AnnotationRef::new(object, pointer.stored_bytes),
            record_count: count,
        });
        next += count;
    }
    let counts = tally(&statuses);
    commit_set(
        dataset,
        name,
        publication_id,
        shards,
        metadata,
        options,
        counts,
    )
}

/// Checks that a winning pointer belongs to this publication at `first_ordinal` and names the
/// source's records, and that its object is where and as large as it says; returns the
/// object's path.
fn check_pointer(
    dataset: &Dataset,
    pointer: &WorkerPointer,
    name: &str,
    publication_id: &str,
    first_ordinal: u64,
    root: &str,
) -> Result<RelPath, Cause> {
    let snapshot = &dataset.snapshot().snapshot_id;
    if pointer.name != name
        || pointer.publication_id != publication_id
        || &pointer.source_snapshot_id != snapshot
    {
        return Err(Cause::rule(format!(
            "the pointer is for set {:?}, publication {:?}, snapshot {:?}, not set {name:?}, \
             publication {publication_id:?}, snapshot {snapshot:?}",
            pointer.name, pointer.publication_id, pointer.source_snapshot_id
        )));
    }
    if pointer.first_ordinal != first_ordinal {
        return Err(Cause::rule(format!(
            "first_ordinal {} is not {first_ordinal}: the pointers do not tile the ordinals",
            pointer.first_ordinal
        )));
    }
    for (k, id) in pointer.record_ids.iter().enumerate() {
        let ordinal = first_ordinal.saturating_add(k as u64);
        if ordinal >= dataset.len() {
            return Err(Cause::rule(format!(
                "record_ids runs past the dataset's {} records",
                dataset.len()
            )));
        }
        let source = dataset.record_meta(ordinal)?;
        if &source.id != id {
            return Err(Cause::rule(format!(
                "record_ids[{k}] is {id:?} but the source record at ordinal {ordinal} is {:?}",
                source.id
            )));
        }
    }
    let object = pointer_object_path(&pointer.uri, root, name, publication_id)?;
    let info = dataset.store().info(&object, None)?;
    if info.size != pointer.stored_bytes {
        return Err(Cause::rule(format!(
            "its object {} is {} bytes, not the {} the pointer records",
            dataset.store().describe(&object),
            info.size,
            pointer.stored_bytes
        )));
    }
    Ok(object)
}

/// Reads a pointer's object: it must hold one carrier per record id (and status) the pointer
/// names, and be named by the distributed id of those carriers
/// (`sha256("<name>:<publication_id>:<logical_shard_id>:<content hash>")`, 32 hex digits).
fn check_pointer_object(
    dataset: &Dataset,
    pointer: &WorkerPointer,
    object: &RelPath,
) -> Result<(), Cause> {
    let described = dataset.store().describe(object);
    let source = crate::storage::ObjectReader::open(dataset.store().clone(), object.clone(), None)?;
    let reader = ArrayRecordReader::open(source, described.clone())?;
    let claimed = pointer.record_ids.len() as u64;
    for (key, count) in [
        ("statuses", pointer.statuses.len()),
        ("terminal_statuses", pointer.terminal_statuses.len()),
    ] {
        if count as u64 != claimed {
            return Err(Cause::rule(format!(
                "{key} has {count} entries but record_ids has {claimed} (the pointer is checked \
                 against its object unless --no-verify-receipts is given)"
            )));
        }
    }
    if reader.len() != claimed {
        return Err(Cause::rule(format!(
            "its object {described} holds {} carriers but the pointer names {claimed} records \
             (the pointer is checked against its object unless --no-verify-receipts is given)",
            reader.len()
        )));
    }
    let payloads = (0..reader.len())
        .map(|k| reader.read(k))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Cause::from(e).at(format!("its object {described}")))?;
    let hash = content_hash(payloads.iter().map(|p| p.as_ref()));
    let id = distributed_object_id(
        &pointer.name,
        &pointer.publication_id,
        &pointer.logical_shard_id,
        &hash,
    );
    let leaf = object.as_str().rsplit('/').next().unwrap_or_default();
    if leaf.strip_suffix(".arrayrecord") != Some(id.as_str()) {
        return Err(Cause::rule(format!(
            "its object {described} is not the one its carriers name: objects/{}/{id}.arrayrecord \
             (the pointer is checked against its object unless --no-verify-receipts is given)",
            &id[..2]
        )));
    }
    Ok(())
}

/// The dataset-relative path of a pointer's `uri`, which must lie in the publication's
/// `objects/` prefix with the shape the distributed ids give
/// (`objects/<2 hex>/<32 hex>.arrayrecord`). The uri is the writer's root location plus the
/// path; when that root was spelled differently from ours (a relative path, a `file://` URL),
/// the publication prefix is found in it instead: it names this same publication.
fn pointer_object_path(
    uri: &str,
    root: &str,
    name: &str,
    publication_id: &str,
) -> Result<RelPath, Cause> {
    let prefix = format!("annotations/sets/{name}/{publication_id}/objects/");
    let relative = uri
        .strip_prefix(root)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|rest| rest.starts_with(&prefix))
        .or_else(|| {
            uri.rfind(&format!("/{prefix}"))
                .and_then(|at| uri.get(at + 1..))
        })
        .ok_or_else(|| {
            Cause::rule(format!(
                "uri {uri:?} is outside the publication's prefix {prefix}"
            ))
        })?;
    let parts: Vec<&str> = relative.split('/').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    let shaped = matches!(parts.as_slice(), [_, _, _, _, "objects", dir, leaf]
        if hex(dir, 2) && leaf.strip_suffix(".arrayrecord").is_some_and(|id| hex(id, 32)));
    if !shaped {
        return Err(Cause::rule(format!(
            "uri {uri:?} is not {prefix}<xx>/<32 hex digits>.arrayrecord"
        )));
    }
    RelPath::new(relative).map_err(|e| Cause::rule(format!("uri {uri:?}: {e}")))
}

/// Writes the set root (create-only; identical bytes already there is a resume) and swings the
/// catalog to a revision holding it.
fn commit_set(
    dataset: &Dataset,
    name: &str,
    publication_id: &str,
    shards: Vec<SetShard>,
    metadata: &Object,
    options: &AnnotationOptions,
    row_counts: BTreeMap<AnnotationStatus, u64>,
) -> Result<PublishedSet, AnnotationError> {
    let store = dataset.store();
    let shard_count = shards.len() as u64;
    let root = SetRoot {
        metadata: metadata.clone(),
        name: name.to_string(),
        publication_id: publication_id.to_string(),
        record_count: dataset.len(),
        shards,
        source_snapshot_id: dataset.snapshot().snapshot_id.clone(),
    };
    root.validate()?;
    let root_path = set_root_path(name, publication_id).map_err(layout_error)?;
    let root_json = root.to_json();
    store
        .create(&root_path, root_json.as_bytes())
        .map_err(|e| match e {
            StorageError::Collision { object } => AnnotationError::Collision(format!(
                "annotation set {name:?} already exists: {object} holds a different set root \
                 (other rows or metadata under publication id {publication_id:?}); publish under \
                 another name"
            )),
            e => e.into(),
        })?;
    let reference = AnnotationRef::new(root_path.clone(), root_json.len() as u64);
    let limits = dataset.options().control_limits;
    let (revision_path, catalog_attempts) = commit_to_catalog(
        store.as_ref(),
        &limits,
        name,
        &reference,
        options.catalog_retry_limit,
    )?;
    Ok(PublishedSet {
        name: name.to_string(),
        publication_id: publication_id.to_string(),
        root_path,
        revision_path,
        record_count: dataset.len(),
        shard_count,
        row_counts,
        catalog_attempts,
    })
}

/// Adds set `name` → `reference` to the catalog of `store`: a new revision derived from the
/// current one, then a compare-and-swap of `annotations/catalog.json` (a create when there is
/// none), re-reading everything on a conflict, `attempt_limit` attempts in all. Returns the
/// revision committed and the attempts made (0 when the catalog already held exactly this
/// entry). A name the catalog holds with another reference is [`AnnotationError::Collision`].
pub fn commit_to_catalog(
    store: &dyn ObjectStore,
    limits: &JsonLimits,
    name: &str,
    reference: &AnnotationRef,
    attempt_limit: u32,
) -> Result<(RelPath, u32), AnnotationError> {
    let catalog = layout::catalog_path().map_err(layout_error)?;
    let attempt_limit = attempt_limit.max(1);
    for attempt in 1..=attempt_limit {
        let state = read_catalog_state(store, limits)?;
        let mut revision = state.revision.clone().unwrap_or_default();
        match revision.sets.get(name) {
            Some(existing) if existing == reference => {
                if let Some(pointer) = &state.pointer {
                    return Ok((pointer.revision.path.clone(), 0));
                }
            }
            Some(existing) => {
                return Err(AnnotationError::Collision(format!(
                    "annotation set {name:?} already exists in {} (its root is {}); a \
                     publication never replaces another set: publish under another name",
                    store.describe(&catalog),
                    existing.path
                )))
            }
            None => {}
        }
        revision.sets.insert(name.to_string(), reference.clone());
        let revision_json = revision.to_json();
        let path = layout::revision_path(revision_json.as_bytes()).map_err(layout_error)?;
        store.create(&path, revision_json.as_bytes())?;
        let pointer_json = CatalogPointer::new(path.clone()).to_json();
        let swung = match &state.version {
            Some(version) => store
                .compare_and_swap(&catalog, pointer_json.as_bytes(), Some(version))
                .map(|_| ()),
            // Created the way the library creates a first catalog: create-only, so neither
            // implementation can overwrite the other's first pointer.
            None => match store.create(&catalog, pointer_json.as_bytes()) {
                Ok(_) => Ok(()),
                Err(StorageError::Collision { object }) => {
                    Err(StorageError::PreconditionFailed { object })
                }
                Err(e) => Err(e),
            },
        };
        match swung {
            Ok(()) => return Ok((path, attempt)),
            Err(StorageError::PreconditionFailed { .. }) if attempt < attempt_limit => {}
            Err(StorageError::PreconditionFailed { object }) => {
                return Err(AnnotationError::Contention {
                    object,
                    attempts: attempt,
                })
            }
            // The swap may or may not have happened (a lost response): never repeat it
            // blindly. The next attempt re-reads the catalog, finds the entry if the swap went
            // through, and otherwise derives a new revision from what it reads.
            Err(e) if e.kind() == ErrorKind::Transient && attempt < attempt_limit => {
                tracing::warn!("{e}; re-reading the catalog before trying again");
            }
            Err(e) => return Err(e.into()),
        }
        std::thread::sleep(backoff(attempt));
    }
    Err(AnnotationError::Contention {
        object: store.describe(&catalog),
        attempts: attempt_limit,
    })
}

/// The pause before retry `attempt`: exponential from 10 ms, capped at 500 ms (the library's
/// contention schedule), randomised so racing writers do not collide again in lockstep (no RNG
/// dependency: the clock's nanoseconds and the process id are enough).
fn backoff(attempt: u32) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = u64::from(nanos) ^ (u64::from(std::process::id()) << 17);
    let ceiling = (10u64 << attempt.min(6)).min(500);
    Duration::from_millis(1 + seed % ceiling)
}

/// The logical shards needed to publish every ordinal of `dataset`.
pub fn shard_count(dataset: &Dataset, options: &AnnotationOptions) -> u64 {
    dataset.len().div_ceil(options.records_per_shard.max(1))
}
