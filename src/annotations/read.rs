//! Reading annotation sets: catalog pointer → revision → set roots → annotation objects.
//!
//! Every document is exact-key, and a revision's bytes must hash to its name. What a reader learns is reported per set: a broken
//! set root is that set's error, not the catalog's, so one bad publication never hides the
//! others. A broken catalog pointer or revision is the catalog's error.
//!
//! A set root is accepted only when it is where the layout puts it
//! (`annotations/sets/<name>/<publication-id>/root.json`), names the set it is catalogued
//! under, and annotates the dataset's own snapshot (same snapshot id and record count). A set
//! published for an earlier source is therefore reported as stale rather than shown against
//! records it does not describe.
//!
//! Records are read lazily: [`AnnotationSet::get`] opens the shard's object once (its size
//! checked against the reference, its record count against the shard's), reads one carrier,
//! decodes it, and checks source alignment: the carrier id must be the id of the source record
//! at that ordinal.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::carrier::AnnotationRecord;
use super::{AnnotationError, AnnotationStatus, Cause};
use crate::budget::BudgetError;
use crate::dataset::reader::read_control;
use crate::dataset::shards::ShardCache;
use crate::dataset::Dataset;
use crate::format::documents::annotation::layout::{catalog_path, set_root_path};
use crate::format::documents::annotation::AnnotationRef;
use crate::format::documents::{
    CatalogPointer, Reference, Revision, SetRoot, SetShard, WorkerPointer,
};
use crate::format::json::{JsonLimits, Object, Value};
use crate::format::path::RelPath;
use crate::format::record;
use crate::storage::{ObjectStore, StorageError, Version};

/// A set-root metadata key that earlier versions of this project wrote with the row counts by
/// status. Publishers no longer add it (the library's set roots hold exactly the caller's
/// metadata); a set root that carries it, or a caller who passes it, still has it read.
pub const ROW_COUNTS_KEY: &str = "sds.row_counts";

/// What the catalog holds, as read once.
#[derive(Debug)]
pub struct Catalog {
    /// Path of the current revision, `None` when no catalog exists yet.
    pub revision_path: Option<RelPath>,
    /// The catalog pointer's version as read, for compare-and-swap.
    pub version: Option<Version>,
    /// The catalog pointer's bytes as read (empty when absent): cheap change detection.
    pub pointer_bytes: Bytes,
    /// Every set of the revision, each with its own outcome.
    pub sets: BTreeMap<String, Result<Arc<AnnotationSet>, AnnotationError>>,
}

impl Catalog {
    /// The sound sets, by name.
    pub fn sound(&self) -> impl Iterator<Item = (&String, &Arc<AnnotationSet>)> {
        self.sets
            .iter()
            .filter_map(|(name, set)| set.as_ref().ok().map(|s| (name, s)))
    }
}

/// Reads the catalog pointer and its revision; `Ok` with no sets when the dataset has no
/// catalog. Set roots are read and checked, each into its own result.
pub fn read_catalog(dataset: &Dataset) -> Result<Catalog, AnnotationError> {
    let limits = dataset.options().control_limits;
    let store = dataset.store().as_ref();
    let Some((pointer, version, pointer_bytes)) = read_pointer_in(store, &limits)? else {
        return Ok(Catalog {
            revision_path: None,
            version: None,
            pointer_bytes: Bytes::new(),
            sets: BTreeMap::new(),
        });
    };
    // A revision is a control document of up to 64 MiB naming up to a million sets: one
    // larger than the whole memory budget is not read at all, and the text, its parse and the
    // sets' outcomes built from it are charged before the parse runs.
    let memory = dataset.memory();
    let over_budget = |e| AnnotationError::Object {
        object: store.describe(&pointer.revision.path),
        cause: Cause::Budget(e),
    };
    let within = memory.capacity().min(limits.max_bytes as u64);
    let bytes = match read_revision_bytes(store, &pointer, within) {
        Err(AnnotationError::Storage(StorageError::TooLarge { size, .. }))
            if within < limits.max_bytes as u64 && size <= limits.max_bytes as u64 =>
        {
            return Err(over_budget(BudgetError::TooLarge {
                what: "memory",
                bytes: size,
                capacity: memory.capacity(),
            }));
        }
        read => read?,
    };
    let _parsing = memory
        .charge(revision_parse_bytes(&bytes))
        .map_err(over_budget)?;
    let revision = parse_revision(store, &limits, &pointer, &bytes)?;
    drop(bytes);
    let sets = revision
        .sets
        .iter()
        .map(|(name, reference)| {
            let set = AnnotationSet::open(dataset, name, reference).map(Arc::new);
            (name.clone(), set)
        })
        .collect();
    Ok(Catalog {
        revision_path: Some(pointer.revision.path),
        version: Some(version),
        pointer_bytes,
        sets,
    })
}

/// The most reading a revision of `bytes`, parsing it and opening its sets takes: its text,
/// its strings again (the revision built from the values), the values
/// ([`crate::format::json::parse_bytes_at_most`], strings included), and an outcome for each set (an opened set
/// or an error naming its root: 512 bytes; a set takes at least 5 values: its name, its
/// reference and the reference's two keys, and a separator).
fn revision_parse_bytes(bytes: &[u8]) -> u64 {
    let sets = crate::format::json::values_at_most(bytes) / 5;
    (bytes.len() as u64)
        .saturating_mul(2)
        .saturating_add(crate::format::json::parse_bytes_at_most(bytes))
        .saturating_add(sets.saturating_mul(512))
}

/// The catalog as one publisher attempt reads it: all `None` when there is no catalog yet.
#[derive(Debug, Clone, Default)]
pub struct CatalogState {
    pub pointer: Option<CatalogPointer>,
    /// The pointer's version as read, the compare-and-swap precondition.
    pub version: Option<Version>,
    pub pointer_bytes: Bytes,
    /// The revision the pointer names, hash-checked, parsed and validated.
    pub revision: Option<Revision>,
}

/// Reads the catalog pointer of `store` and the revision it names.
pub fn read_catalog_state(
    store: &dyn ObjectStore,
    limits: &JsonLimits,
) -> Result<CatalogState, AnnotationError> {
    let Some((pointer, version, pointer_bytes)) = read_pointer_in(store, limits)? else {
        return Ok(CatalogState::default());
    };
    let revision = read_revision_in(store, limits, &pointer)?;
    Ok(CatalogState {
        pointer: Some(pointer),
        version: Some(version),
        pointer_bytes,
        revision: Some(revision),
    })
}

/// The catalog pointer, parsed, with its version and bytes; `None` when absent.
pub(crate) fn read_pointer(
    dataset: &Dataset,
) -> Result<Option<(CatalogPointer, Version, Bytes)>, AnnotationError> {
    read_pointer_in(dataset.store().as_ref(), &dataset.options().control_limits)
}

fn read_pointer_in(
    store: &dyn ObjectStore,
    limits: &JsonLimits,
) -> Result<Option<(CatalogPointer, Version, Bytes)>, AnnotationError> {
    let path = catalog_path()
        .map_err(|e| AnnotationError::corrupt(CatalogPointer::DOCUMENT, e.to_string()))?;
    let Some((bytes, version)) = store.read_versioned(&path)? else {
        return Ok(None);
    };
    if bytes.len() > limits.max_bytes {
        return Err(AnnotationError::corrupt(
            store.describe(&path),
            format!(
                "{} bytes exceed the control document limit of {}",
                bytes.len(),
                limits.max_bytes
            ),
        ));
    }
    let pointer = CatalogPointer::parse(&bytes, limits)
        .map_err(|e| e.with_document(store.describe(&path)))?;
    Ok(Some((pointer, version, bytes)))
}

/// The revision a catalog pointer names: its bytes must hash to its name, then it is parsed
/// and validated.
fn read_revision_in(
    store: &dyn ObjectStore,
    limits: &JsonLimits,
    pointer: &CatalogPointer,
) -> Result<Revision, AnnotationError> {
    let bytes = read_revision_bytes(store, pointer, limits.max_bytes as u64)?;
    parse_revision(store, limits, pointer, &bytes)
}

/// The bytes of the revision `pointer` names, refused beyond `max_bytes`.
fn read_revision_bytes(
    store: &dyn ObjectStore,
    pointer: &CatalogPointer,
    max_bytes: u64,
) -> Result<Bytes, AnnotationError> {
    let path = &pointer.revision.path;
    Ok(store.read_limited(path, pointer.revision.generation, max_bytes)?)
}

/// The revision `pointer` names, from its `bytes`: they must hash to its name, then they are
/// parsed and validated.
fn parse_revision(
    store: &dyn ObjectStore,
    limits: &JsonLimits,
    pointer: &CatalogPointer,
    bytes: &[u8],
) -> Result<Revision, AnnotationError> {
    let name = store.describe(&pointer.revision.path);
    pointer
        .revision
        .check_bytes(bytes)
        .map_err(|e| e.with_document(name.clone()))?;
    let revision = Revision::parse(bytes, limits).map_err(|e| e.with_document(name.clone()))?;
    revision.validate().map_err(|e| e.with_document(name))?;
    Ok(revision)
}

/// A worker pointer, parsed and validated.
pub(crate) fn read_worker_pointer(
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

/// The dataset layer's reference for an annotation reference, to read it through the shared
/// size-checked reader, shard cache and verifier (the one place the two reference types meet).
pub(crate) fn shard_reference(object: &AnnotationRef) -> Reference {
    let mut reference = Reference::new(object.path.clone(), object.stored_bytes);
    reference.generation = object.generation;
    reference
}

/// One published annotation set of the open dataset.
#[derive(Debug)]
pub struct AnnotationSet {
    name: String,
    reference: AnnotationRef,
    root: SetRoot,
    root_bytes: Bytes,
    objects: Arc<ShardCache>,
}

impl AnnotationSet {
    /// Reads and checks the set root `reference` points at, for set `name` of `dataset`.
    pub fn open(
        dataset: &Dataset,
        name: &str,
        reference: &AnnotationRef,
    ) -> Result<AnnotationSet, AnnotationError> {
        let store = dataset.store();
        let limits = dataset.options().control_limits;
        let object = store.describe(&reference.path);
        let root_bytes = read_control(store.as_ref(), &shard_reference(reference), &limits)?;
        let root =
            SetRoot::parse(&root_bytes, &limits).map_err(|e| e.with_document(object.clone()))?;
        root.validate()
            .map_err(|e| e.with_document(object.clone()))?;
        if root.name != name {
            return Err(AnnotationError::corrupt(
                object,
                format!(
                    "set root names set {:?} but is catalogued as {name:?}",
                    root.name
                ),
            ));
        }
        let expected = set_root_path(name, &root.publication_id)
            .map_err(|e| AnnotationError::corrupt(object.clone(), e.to_string()))?;
        if expected != reference.path {
            return Err(AnnotationError::corrupt(
                object,
                format!(
                    "a set root of publication {:?} must be at {expected}",
                    root.publication_id
                ),
            ));
        }
        root.validate_against(&dataset.snapshot().snapshot_id, dataset.len())
            .map_err(|e| e.with_document(object))?;
        Ok(AnnotationSet {
            name: name.to_string(),
            reference: reference.clone(),
            root,
            root_bytes,
            // The set's object indexes are charged like the dataset's own shards'.
            objects: ShardCache::new(8, dataset.memory().clone()),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The catalog's reference to the set root.
    pub fn reference(&self) -> &AnnotationRef {
        &self.reference
    }

    pub fn root(&self) -> &SetRoot {
        &self.root
    }

    /// The set root document, byte for byte.
    pub fn root_bytes(&self) -> &Bytes {
        &self.root_bytes
    }

    pub fn publication_id(&self) -> &str {
        &self.root.publication_id
    }

    /// Number of rows: the source snapshot's record count.
    pub fn len(&self) -> u64 {
        self.root.record_count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row counts by status from the set root's metadata (`None`: not tallied).
    pub fn row_counts(&self) -> Option<BTreeMap<AnnotationStatus, u64>> {
        row_counts(&self.root.metadata)
    }

    /// The shard holding `ordinal` (binary search over the tiling).
    pub fn shard_of(&self, ordinal: u64) -> Option<&SetShard> {
        let shards = &self.root.shards;
        let index =
            shards.partition_point(|s| s.first_ordinal.saturating_add(s.record_count) <= ordinal);
        shards.get(index).filter(|s| {
            s.first_ordinal <= ordinal && ordinal < s.first_ordinal.saturating_add(s.record_count)
        })
    }

    /// The annotation of source ordinal `ordinal`, decoded and checked for alignment with the
    /// source record (one metadata row read of `dataset`).
    pub fn get(
        &self,
        dataset: &Dataset,
        ordinal: u64,
    ) -> Result<AnnotationRecord, AnnotationError> {
        let row = self.get_unaligned(dataset, ordinal)?;
        let source = dataset.record_meta(ordinal)?;
        if row.source_record_id != source.id {
            return Err(AnnotationError::corrupt(
                self.object_name(dataset, ordinal),
                format!(
                    "set {:?}, ordinal {ordinal}: carrier id {:?} is not the source record's id {:?}",
                    self.name, row.source_record_id, source.id
                ),
            ));
        }
        Ok(row)
    }

    /// The annotation of `ordinal` without the source alignment check (which costs a source
    /// metadata row); callers that already hold the source id compare it themselves.
    pub fn get_unaligned(
        &self,
        dataset: &Dataset,
        ordinal: u64,
    ) -> Result<AnnotationRecord, AnnotationError> {
        let shard = self.shard_of(ordinal).ok_or_else(|| {
            AnnotationError::corrupt(
                dataset.store().describe(&self.reference.path),
                format!(
                    "ordinal {ordinal} is outside the set's {} records",
                    self.len()
                ),
            )
        })?;
        let object = dataset.store().describe(&shard.object.path);
        let reader = self
            .objects
            .reader(dataset.store(), &shard_reference(&shard.object))?;
        if reader.len() != shard.record_count {
            return Err(AnnotationError::corrupt(
                object,
                format!(
                    "the object holds {} carrier records but the set root's shard at ordinal {} has {}",
                    reader.len(),
                    shard.first_ordinal,
                    shard.record_count
                ),
            ));
        }
        let index = ordinal - shard.first_ordinal;
        self.carrier(dataset, &reader, index, ordinal)
            .map_err(|cause| AnnotationError::Object {
                object,
                cause: cause.at(format!("set {:?}, ordinal {ordinal}", self.name)),
            })
    }

    /// Decodes carrier `index` of `reader`, the row at `ordinal`, under the memory budget.
    fn carrier(
        &self,
        dataset: &Dataset,
        reader: &crate::dataset::ShardReader,
        index: u64,
        ordinal: u64,
    ) -> Result<AnnotationRecord, Cause> {
        let _decoding = charge_decode(dataset, reader, index)?;
        let payload = reader.read(index)?;
        let carrier = record::decode(payload, &dataset.options().record_limits)?;
        AnnotationRecord::from_carrier(carrier, ordinal)
    }

    /// Every row in ordinal order, each checked for alignment.
    pub fn iter<'a>(
        &'a self,
        dataset: &'a Dataset,
    ) -> impl Iterator<Item = Result<AnnotationRecord, AnnotationError>> + 'a {
        (0..self.len()).map(move |ordinal| self.get(dataset, ordinal))
    }

    fn object_name(&self, dataset: &Dataset, ordinal: u64) -> String {
        let path = self
            .shard_of(ordinal)
            .map_or(&self.reference.path, |s| &s.object.path);
        dataset.store().describe(path)
    }
}

/// Row counts by status from set-root metadata: `metadata["sds.row_counts"]`, an object with
/// a nonnegative integer per wire status. `None` when absent or malformed.
pub fn row_counts(metadata: &Object) -> Option<BTreeMap<AnnotationStatus, u64>> {
    let Some(Value::Object(counts)) = metadata.get(ROW_COUNTS_KEY) else {
        return None;
    };
    counts
        .iter()
        .map(|(status, n)| Some((AnnotationStatus::from_wire(status)?, n.as_u64()?)))
        .collect()
}

/// Charges the memory budget for decoding carrier `index` of `reader` (its chunk's decoded size
/// and stored span, from the object's index), before it is read.
fn charge_decode(
    dataset: &Dataset,
    reader: &crate::dataset::ShardReader,
    index: u64,
) -> Result<crate::budget::Charge, Cause> {
    let decoded = reader.chunk_decoded_len(index)?;
    let span = reader.chunk_span(index)?;
    let charge = dataset
        .memory()
        .charge(decoded.saturating_add(span.end - span.start))?;
    Ok(charge)
}
