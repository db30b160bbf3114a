//! `sds select SOURCE DEST --indices SPEC [--scene ID ...] --dataset-id D --snapshot-id S
//! [--materialize]`: a selection of records published as a new dataset.
//!
//! The selection is the `--indices` ordinals in the order given, then the records of every
//! `--scene` (found from the metadata rows, never a data shard) in ordinal order, each ordinal
//! kept once. By default it is published as a reference view pointing at the source's shards
//! by absolute location (nothing copied); `--materialize` re-encodes into new shards. The
//! library side is [`crate::dataset::view`].

use std::collections::BTreeSet;

use crate::cli::location::{self, open_dataset};
use crate::dataset::{
    dedup_in_order, materialize, parse_indices, select_view, Dataset, PublishOptions, ShardOptions,
};

/// What to select and how to publish it.
#[derive(Debug, Clone)]
pub struct Selection {
    pub indices: Option<String>,
    pub scenes: Vec<String>,
    pub materialize: bool,
    pub records_per_shard: usize,
    /// How materialized shards are written.
    pub shard: ShardOptions,
}

/// The ordinals a selection names in `dataset`.
pub fn ordinals(dataset: &Dataset, selection: &Selection) -> Result<Vec<u64>, String> {
    let mut chosen = match &selection.indices {
        Some(spec) => parse_indices(spec, dataset.len()).map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    if !selection.scenes.is_empty() {
        let scenes: BTreeSet<&str> = selection.scenes.iter().map(String::as_str).collect();
        for ordinal in 0..dataset.len() {
            let row = dataset.record_meta(ordinal).map_err(|e| {
                format!(
                    "cannot read the metadata row of record {ordinal}: {}",
                    location::describe(&e, dataset.store().as_ref())
                )
            })?;
            if row.scene_id.as_deref().is_some_and(|s| scenes.contains(s)) {
                chosen.push(ordinal);
            }
        }
    }
    Ok(dedup_in_order(chosen))
}

/// Runs `sds select`: returns the summary line.
pub fn run(
    source: &str,
    dest: &str,
    selection: &Selection,
    options: &PublishOptions,
) -> Result<String, String> {
    if selection.indices.is_none() && selection.scenes.is_empty() {
        return Err("nothing selected: give --indices SPEC and/or --scene ID".into());
    }
    let dataset = open_dataset(source).map_err(|e| e.0)?;
    let chosen = ordinals(&dataset, selection)?;
    let store = super::distributed::writable_root(dest)?;
    let describe = |e: crate::dataset::DatasetError| location::describe(&e, store.as_ref());
    if selection.materialize {
        let summary = materialize(
            &dataset,
            &chosen,
            store.as_ref(),
            options,
            selection.records_per_shard,
            &selection.shard,
        )
        .map_err(describe)?;
        Ok(format!(
            "materialized {} records of {source} into {dest}: {} new shards, {} manifest pages, {} bytes\n",
            summary.record_count, summary.shard_count, summary.manifest_pages, summary.stored_bytes
        ))
    } else {
        let summary = select_view(&dataset, &chosen, store.as_ref(), options).map_err(describe)?;
        Ok(format!(
            "published a reference view of {} records of {source} in {dest}: {} shard entries, {} manifest pages\n",
            summary.publication.record_count,
            summary.publication.shard_count,
            summary.publication.manifest_pages
        ))
    }
}
