//! Selections of a dataset's records, published as a new dataset (`sds select`).
//!
//! Two ways, matching the library's `DatasetView.publish` and `materialize`:
//!
//! - [`select_view`], a **reference view**: nothing is copied or re-encoded. Each selected
//!   record becomes one shard entry of one record whose `data` / `metadata` references hold
//!   the *absolute* locations of the source's shards (an absolute path for a local source, a
//!   full `gs://` / `s3://` URI otherwise) and whose `record_indices` is `[physical index]`.
//!   Pages sit at `manifests/<first two characters of the snapshot id>/<page id>.json`, the root
//!   metadata is `{"reference_dataset": true}`, and the snapshot's `shard_count` is the number
//!   of records. Readers follow the absolute references (unless told not to).
//! - [`materialize`]: the selected records are read, decoded and re-written with
//!   `write_shard` into shards of at most `records_per_shard` records, work id `%012d` of each
//!   shard's first position in the selection, attempt 0, then published with no metadata.
//!
//! Both publish through the create-only commit of [`publish_entries`] / [`publish`], root
//! last, so an interrupted selection converges when re-run with the same arguments.
//!
//! Index specifications (`0:100,250,300:`) are parsed by [`parse_indices`]: comma-separated
//! ordinals and half-open ranges `A:B` with either end optional, checked against the record
//! count. The selection keeps the order given, repeated ordinals included (as the library does).

use super::error::DatasetError;
use super::publish::{
    publish, publish_entries, write_shard, PageLayout, PublishOptions, PublishSummary, ShardOptions,
};
use super::reader::Dataset;
use crate::format::documents::{ObjectRef, ShardEntry};
use crate::format::path::{AbsolutePath, ObjectPath};
use crate::storage::ObjectStore;

/// What a reference view publication did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewSummary {
    pub publication: PublishSummary,
}

/// Parses an index specification against a dataset of `record_count` records.
pub fn parse_indices(spec: &str, record_count: u64) -> Result<Vec<u64>, DatasetError> {
    let bad = |item: &str, why: String| {
        DatasetError::Publication(format!("index specification item {item:?}: {why}"))
    };
    let number = |item: &str, text: &str| -> Result<u64, DatasetError> {
        text.trim()
            .parse::<u64>()
            .map_err(|_| bad(item, format!("{text:?} is not a nonnegative integer")))
    };
    let mut out = Vec::new();
    for item in spec.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(bad(item, "empty item (use e.g. 0:100,250,300:)".into()));
        }
        match item.split_once(':') {
            None => {
                let ordinal = number(item, item)?;
                if ordinal >= record_count {
                    return Err(bad(
                        item,
                        format!("ordinal {ordinal} is out of range: the dataset has {record_count} records"),
                    ));
                }
                out.push(ordinal);
            }
            Some((start, stop)) => {
                let start = if start.trim().is_empty() {
                    0
                } else {
                    number(item, start)?
                };
                let stop = if stop.trim().is_empty() {
                    record_count
                } else {
                    number(item, stop)?
                };
                if start > stop || stop > record_count {
                    return Err(bad(
                        item,
                        format!("range {start}:{stop} is not within 0:{record_count}"),
                    ));
                }
                // The range is within the dataset's record count, but that count is a
                // document's claim: a selection that cannot be held is refused, not an abort.
                let len = usize::try_from(stop - start).unwrap_or(usize::MAX);
                out.try_reserve(len).map_err(|_| {
                    bad(
                        item,
                        format!("{len} ordinals are more than this machine can hold in memory"),
                    )
                })?;
                out.extend(start..stop);
            }
        }
    }
    Ok(out)
}

/// The absolute form of a source reference: kept when already absolute, else the source
/// store's full location of the object.
fn absolute(source: &Dataset, reference: &ObjectRef) -> Result<ObjectRef, DatasetError> {
    let path = match &reference.path {
        ObjectPath::Absolute(location) => location.clone(),
        ObjectPath::Relative(path) => {
            let text = source.describe(path);
            AbsolutePath::new(&text).ok_or_else(|| {
                DatasetError::Publication(format!(
                    "{text} is not an absolute location; open the source by an absolute path"
                ))
            })?
        }
    };
    // A new document records no generation, as every write path (the library's rule).
    Ok(ObjectRef::new(
        ObjectPath::Absolute(path),
        reference.stored_bytes,
    ))
}

/// Publishes `ordinals` of `source` as a reference view in `dest` (see the module docs).
/// `options.metadata` is replaced by `{"reference_dataset": true}` and pages use the
/// snapshot-prefix layout, as the library's `publish_reference` writes them.
pub fn select_view(
    source: &Dataset,
    ordinals: &[u64],
    dest: &dyn ObjectStore,
    options: &PublishOptions,
) -> Result<ViewSummary, DatasetError> {
    let mut entries = Vec::with_capacity(ordinals.len());
    for (position, &ordinal) in ordinals.iter().enumerate() {
        let location = source.locate(ordinal)?;
        let entry = location.entry().ok_or_else(|| {
            DatasetError::corrupt(
                source.page_name(location.page_index),
                format!("ordinal {ordinal}: no shard entry {}", location.shard_index),
            )
        })?;
        let mut view_entry = ShardEntry::new(
            position as u64,
            absolute(source, &entry.data)?,
            absolute(source, &entry.metadata)?,
            1,
        );
        view_entry.record_indices = Some(vec![location.physical_index]);
        entries.push(view_entry);
    }
    let mut options = options.clone();
    options.metadata = crate::format::json::Object::new();
    options.metadata.insert(
        "reference_dataset".into(),
        crate::format::json::Value::Bool(true),
    );
    options.page_layout = PageLayout::SnapshotPrefix;
    let publication = publish_entries(dest, entries, &options)?;
    Ok(ViewSummary { publication })
}

/// Re-encodes `ordinals` of `source` into new shards of at most `records_per_shard` records in
/// `dest` and publishes them (see the module docs).
pub fn materialize(
    source: &Dataset,
    ordinals: &[u64],
    dest: &dyn ObjectStore,
    options: &PublishOptions,
    records_per_shard: usize,
    shard_options: &ShardOptions,
) -> Result<PublishSummary, DatasetError> {
    let per_shard = records_per_shard.max(1);
    let mut receipts = Vec::new();
    for (index, chunk) in ordinals.chunks(per_shard).enumerate() {
        let records = chunk
            .iter()
            .map(|&ordinal| source.read_record(ordinal))
            .collect::<Result<Vec<_>, _>>()?;
        let work_id = format!("{:012}", index * per_shard);
        receipts.push(write_shard(dest, records, &work_id, 0, shard_options)?);
    }
    let mut options = options.clone();
    options.expected_work_ids = None;
    options.page_layout = PageLayout::Hashed;
    publish(dest, &receipts, &options)
}
