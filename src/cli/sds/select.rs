//! `sds select SOURCE DEST --indices SPEC [--scene ID ...] --dataset-id D --snapshot-id S
//! [--materialize]`: a selection of records published as a new dataset.
//!
//! The selection is the `--indices` ordinals in the order given, repeats included (as the
//! library's `Dataset.select` keeps them), then the records of every `--scene` (found from the
//! metadata rows, never a data shard) in ordinal order that `--indices` did not already name. By default it is published as a reference view pointing at the source's shards
//! by absolute location (nothing copied); `--materialize` re-encodes into new shards. The
//! library side is [`crate::dataset::view`].
//!
//! Either way the source's annotation sets follow the selection, as the library's
//! `DatasetView.publish` / `materialize` re-publish them: each sound set is published again on
//! the new dataset under the same name and set metadata, row `k` being the source row of the
//! `k`-th selected record (its `source_index` renumbered), with the library's default options.

use std::collections::BTreeSet;

use crate::annotations::{self, AnnotationOptions, AnnotationRecord};
use crate::cli::location::{self, StoreArgs};
use crate::cli::CliError;
use crate::dataset::{
    materialize, parse_indices, select_view, Dataset, PublishOptions, ShardOptions,
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
pub fn ordinals(dataset: &Dataset, selection: &Selection) -> Result<Vec<u64>, CliError> {
    let mut chosen = match &selection.indices {
        Some(spec) => parse_indices(spec, dataset.len()).map_err(|e| {
            format!(
                "--indices {spec:?} of a dataset of {} records: {e}",
                dataset.len()
            )
        })?,
        None => Vec::new(),
    };
    if !selection.scenes.is_empty() {
        let scenes: BTreeSet<&str> = selection.scenes.iter().map(String::as_str).collect();
        let named: BTreeSet<u64> = chosen.iter().copied().collect();
        for ordinal in 0..dataset.len() {
            let row = dataset.record_meta(ordinal).map_err(|e| {
                format!(
                    "cannot read the metadata row of record {ordinal}: {}",
                    location::describe(&e, dataset.store().as_ref())
                )
            })?;
            let in_scene = row.scene_id.as_deref().is_some_and(|s| scenes.contains(s));
            if in_scene && !named.contains(&ordinal) {
                chosen.push(ordinal);
            }
        }
    }
    Ok(chosen)
}

/// Runs `sds select`: returns the summary line.
pub fn run(
    args: &StoreArgs,
    source: &str,
    dest: &str,
    selection: &Selection,
    options: &PublishOptions,
) -> Result<String, CliError> {
    if selection.indices.is_none() && selection.scenes.is_empty() {
        return Err("nothing selected: give --indices SPEC and/or --scene ID".into());
    }
    let dataset = args.open_dataset(source).map_err(CliError::from)?;
    let chosen = ordinals(&dataset, selection)?;
    let store = super::distributed::writable_root(args, dest)?;
    let describe = |e: crate::dataset::DatasetError| location::describe(&e, store.as_ref());
    let published = if selection.materialize {
        let summary = materialize(
            &dataset,
            &chosen,
            store.as_ref(),
            options,
            selection.records_per_shard,
            &selection.shard,
        )
        .map_err(describe)?;
        format!(
            "materialized {} records of {source} into {dest}: {} new shards, {} manifest pages, {} bytes\n",
            summary.record_count, summary.shard_count, summary.manifest_pages, summary.stored_bytes
        )
    } else {
        let summary = select_view(&dataset, &chosen, store.as_ref(), options).map_err(describe)?;
        format!(
            "published a reference view of {} records of {source} in {dest}: {} shard entries, {} manifest pages\n",
            summary.publication.record_count,
            summary.publication.shard_count,
            summary.publication.manifest_pages
        )
    };
    let sets = republish_annotations(args, &dataset, &chosen, dest)?;
    Ok(match sets {
        0 => published,
        n => format!("{published}re-published {n} annotation sets for the selection\n"),
    })
}

/// Publishes every sound annotation set of `source` again on the dataset just published at
/// `dest`, projected onto `chosen`; returns how many. A set the source cannot read is an error
/// naming it: a view silently missing its labels is worse than no view.
fn republish_annotations(
    args: &StoreArgs,
    source: &Dataset,
    chosen: &[u64],
    dest: &str,
) -> Result<usize, CliError> {
    let catalog = annotations::read_catalog(source).map_err(CliError::failed(
        "cannot read the annotation catalog of the source",
    ))?;
    if catalog.sets.is_empty() {
        return Ok(0);
    }
    let view = args.open_dataset(dest).map_err(CliError::from)?;
    let options = AnnotationOptions {
        root_location: Some(dest.to_string()),
        ..AnnotationOptions::default()
    };
    let mut count = 0;
    for (name, set) in &catalog.sets {
        let set = set.as_ref().map_err(|e| {
            CliError::from(format!(
                "annotation set {name:?} of the source is unreadable: {e}"
            ))
        })?;
        let rows = chosen
            .iter()
            .enumerate()
            .map(|(k, &ordinal)| {
                set.get(source, ordinal).map(|row| AnnotationRecord {
                    source_index: k as u64,
                    ..row
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(CliError::failed(format!("annotation set {name:?}")))?;
        annotations::publish_annotations(&view, name, &rows, &set.root().metadata, &options)
            .map_err(CliError::failed(format!(
                "re-publishing annotation set {name:?} on {dest}"
            )))?;
        count += 1;
    }
    Ok(count)
}
