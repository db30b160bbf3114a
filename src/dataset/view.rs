//! Selections of a dataset's records, published as a new dataset (`sds select`).
//!
//! Two ways, matching the reference library's `DatasetView.publish` and `materialize`:
//!
//! - [`select_view`], a **lightweight view**: no record is re-encoded. The shard objects the
//!   selected records live in appear under the destination at the *same* content-addressed
//!   paths, by [`ObjectStore::copy_from`] (a hard link between local roots, a server-side copy
//!   in a bucket), and each manifest entry carries `record_indices` mapping its logical records
//!   to physical ones. Consecutive selected records that live in the same shard pair share one
//!   entry, so a contiguous selection costs one entry per source shard.
//! - [`materialize`]: the selected records are read, decoded, re-encoded with `write_shard`
//!   into new compact shards and published like any dataset. Costs a full read and write, but
//!   the result no longer shares anything with the source.
//!
//! Both publish through the create-only commit of [`publish_entries`] / [`publish`], shards
//! first and `root.json` last, so an interrupted selection converges when re-run with the same
//! arguments. The destination keeps the source's shard paths, so the same content address
//! always names the same bytes in every dataset.
//!
//! Index specifications (`0:100,250,300:`) are parsed by [`parse_indices`]: comma-separated
//! ordinals and half-open ranges `A:B` with either end optional, checked against the record
//! count. The selection keeps the order given; a repeated ordinal is kept once (first place).

use std::collections::BTreeSet;

use super::error::DatasetError;
use super::publish::{
    publish, publish_entries, write_shard, PublishOptions, PublishSummary, ShardOptions,
};
use super::reader::Dataset;
use crate::format::documents::{Reference, ShardEntry};
use crate::format::path::RelPath;
use crate::storage::{CreateOutcome, ObjectStore};

/// What a lightweight view publication did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewSummary {
    pub publication: PublishSummary,
    /// Shard objects this call linked or copied into the destination.
    pub objects_created: u64,
    /// Shard objects already present with identical bytes (a resumed run).
    pub objects_present: u64,
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
                out.extend(start..stop);
            }
        }
    }
    Ok(out)
}

/// Removes repeated ordinals, keeping each one's first place.
pub fn dedup_in_order(ordinals: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let mut seen = BTreeSet::new();
    ordinals.into_iter().filter(|o| seen.insert(*o)).collect()
}

/// Publishes `ordinals` of `source` as a lightweight view in `dest` (see the module docs).
pub fn select_view(
    source: &Dataset,
    ordinals: &[u64],
    dest: &dyn ObjectStore,
    options: &PublishOptions,
) -> Result<ViewSummary, DatasetError> {
    let mut entries: Vec<ShardEntry> = Vec::new();
    let mut indices: Vec<Vec<u64>> = Vec::new();
    for &ordinal in ordinals {
        let location = source.locate(ordinal)?;
        // Opening both shards checks their sizes and that the physical index exists, so a view
        // never publishes a reference to a record its source cannot serve.
        source.data_shard(&location)?;
        source.metadata_shard(&location)?;
        let entry = location.entry().ok_or_else(|| {
            DatasetError::corrupt(
                location.page.page_id.clone(),
                format!("ordinal {ordinal}: no shard entry {}", location.shard_index),
            )
        })?;
        let physical = location.physical_index;
        let same_pair = entries.last().is_some_and(|last| {
            last.data.path == entry.data.path && last.metadata.path == entry.metadata.path
        });
        match (same_pair, indices.last_mut()) {
            (true, Some(run)) => run.push(physical),
            _ => {
                entries.push(ShardEntry::new(
                    0,
                    Reference::new(entry.data.path.clone(), entry.data.stored_bytes),
                    Reference::new(entry.metadata.path.clone(), entry.metadata.stored_bytes),
                    0,
                )?);
                indices.push(vec![physical]);
            }
        }
    }
    let mut objects_created = 0u64;
    let mut objects_present = 0u64;
    let mut copied: BTreeSet<RelPath> = BTreeSet::new();
    for entry in &entries {
        for reference in [&entry.data, &entry.metadata] {
            if !copied.insert(reference.path.clone()) {
                continue;
            }
            match dest.copy_from(source.store().as_ref(), &reference.path, &reference.path)? {
                CreateOutcome::Created => objects_created += 1,
                CreateOutcome::AlreadyIdentical => objects_present += 1,
            }
        }
    }
    for (entry, run) in entries.iter_mut().zip(indices) {
        entry.record_count = run.len() as u64;
        entry.record_indices = Some(run);
    }
    let publication = publish_entries(dest, entries, options)?;
    Ok(ViewSummary {
        publication,
        objects_created,
        objects_present,
    })
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
    let mut receipts = Vec::new();
    for (index, chunk) in ordinals.chunks(records_per_shard.max(1)).enumerate() {
        let records = chunk
            .iter()
            .map(|&ordinal| source.read_record(ordinal))
            .collect::<Result<Vec<_>, _>>()?;
        let work_id = format!("materialize-{index:08}");
        receipts.push(write_shard(dest, records, &work_id, 0, shard_options)?);
    }
    let mut options = options.clone();
    options.expected_work_ids = None;
    publish(dest, &receipts, &options)
}
