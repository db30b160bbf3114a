//! The label tables with annotation sets: `columns/labels.jsonl` and `labels.arrow` hold the
//! boxes every `.sigmf-meta` under `records/` shows, the records' own and each shown set's
//! (`records/<n>/annotations/<set>/fields/...`), so while the catalog shows sets their index
//! is built by a pass of its own (`docs/MOUNT.md`, "Label tables").
//!
//! Why a pass of its own: a set's boxes are in its carriers, one SafeTensors payload per
//! record, whose shapes are known only by decoding them; the columns' pass reads metadata
//! rows only, and the catalog changes while the mount lives. So the records' own labels are
//! indexed with the columns (that index serves the tables while no set is shown), and each
//! catalog that shows sets gets this index, built in the background from every row and every
//! set's carrier of it, each decoded once. A carrier is laid out by the same code as the
//! overlay's (`overlay::carrier_tree`), so a line exists exactly where a `.sigmf-meta` shows
//! the box. A carrier that cannot be read, or whose id is not its record's, shows no files in
//! the overlay and has no line here (logged, a line per kind of failure a minute). A new
//! catalog starts a new build and stops the old one.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::labels::{own_plans, own_shown, LabelIndex, Shown};
use super::Meter;
use crate::dataset::Dataset;
use crate::format::record::RecordMeta;
use crate::fs::error::FsError;
use crate::fs::log_limit;
use crate::fs::overlay::{carrier_tree, VisibleSet};
use crate::fs::record_tree::RecordTree;

/// Builds the index of the records' own boxes and those of `sets` (in that order: set `k`
/// is `sets[k - 1]`), reading every row once and each set's carrier of it.
pub fn build(
    dataset: &Dataset,
    sets: Vec<Arc<VisibleSet>>,
    stop: &AtomicBool,
) -> Result<LabelIndex, FsError> {
    let mut index = LabelIndex::with_sets(sets);
    let mut meter = Meter::default();
    let end = dataset.for_each_stored_row(stop, |read| {
        let taken = read
            .map_err(|(ordinal, e)| FsError::in_record(ordinal, e))
            .and_then(|stored| {
                let ordinal = stored.ordinal();
                let meta = dataset
                    .parse_stored_row(&stored)
                    .map_err(|e| FsError::in_record(ordinal, e))?;
                let grown = take_record(dataset, &mut index, ordinal, &meta);
                meter.grow(dataset, ordinal, grown)
            });
        match taken {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    });
    match end {
        Some(e) => Err(FsError::at("columns/labels.jsonl with annotation sets", e)),
        None if stop.load(Ordering::Relaxed) => Err(FsError::failed(
            "the label tables' build stopped: the catalog changed or the mount is ending",
        )),
        None => {
            index.finish();
            index.keep_charges(meter.charges);
            Ok(index)
        }
    }
}

/// Takes in record `ordinal` (its row `meta`): its own boxes and each set's. Returns the
/// bytes the index grew by.
fn take_record(dataset: &Dataset, index: &mut LabelIndex, ordinal: u64, meta: &RecordMeta) -> u64 {
    let own = own_plans(meta);
    let trees: Vec<(u16, RecordTree)> = (1..)
        .zip(index.sets.iter())
        .filter_map(|(k, set)| Some((k, set_tree(dataset, set, ordinal, meta)?)))
        .collect();
    let mut shown = own_shown(&own);
    for (set, tree) in &trees {
        for (field, entry) in tree.fields.iter().enumerate() {
            let plan = entry.sigmf_meta.as_ref().and_then(|l| l.drawn_boxes());
            if let (Some(plan), Ok(field)) = (plan, u32::try_from(field)) {
                shown.push(Shown {
                    name: &entry.name,
                    set: *set,
                    field,
                    plan,
                });
            }
        }
    }
    index.take_shown(ordinal, meta, &mut shown)
}

/// The overlay's tree of `set`'s annotation of record `ordinal`, or `None` (logged) when the
/// overlay shows none of its files.
fn set_tree(
    dataset: &Dataset,
    set: &VisibleSet,
    ordinal: u64,
    meta: &RecordMeta,
) -> Option<RecordTree> {
    let in_set = format!("set {:?}", set.name);
    let tree = set
        .set
        .get_unaligned(dataset, ordinal)
        .map_err(|e| FsError::in_record_at(ordinal, &in_set, e))
        .and_then(|row| {
            if row.source_record_id != meta.id {
                return Err(FsError::record(
                    ordinal,
                    format!(
                        "{in_set}: carrier id {:?} is not the source record's id {:?}",
                        row.source_record_id, meta.id
                    ),
                ));
            }
            carrier_tree(dataset, &in_set, ordinal, &row, meta)
        });
    match tree {
        Ok(tree) => Some(tree),
        Err(e) => {
            if log_limit::admit("labels-sets") {
                tracing::warn!(ordinal, error = %e, "columns/labels.jsonl: an annotation set's boxes of a record have no line: its annotation is unreadable");
            }
            None
        }
    }
}
