//! `by-id/` and `by-scene/`: indexes that need every metadata row, built once, in the
//! background ([`super::background`]), within a memory limit.
//!
//! The limit: the indexes hold an entry per record. Before reading anything, the record
//! count the snapshot claims is priced at the least an entry can take ([`MIN_ENTRY_BYTES`]);
//! a claim the limit cannot hold is refused at once, and a build whose entries outgrow the
//! limit stops.
//!
//! Memory: ids as one sorted `Vec<(name, ordinal)>` and scenes as a sorted `Vec<(name,
//! ordinals)>`, searched by bisection; a scene link's parent scene comes from its record's row,
//! so there is no per-record reverse map.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::background::Background;
use super::error::FsError;
use super::log_limit::{self, thousands};
use crate::budget::Charge;
use crate::dataset::Dataset;
use crate::format::names::encode_entry;

/// The least memory one record's entries can take: an id entry (a `String` and an ordinal,
/// 32 bytes, plus at least 8 bytes of name) and a scene ordinal (8 bytes).
pub const MIN_ENTRY_BYTES: u64 = 48;

/// What the indexes hold.
#[derive(Debug, Default)]
pub struct Indexes {
    /// Encoded id -> lowest ordinal carrying it, sorted by name.
    pub ids: Vec<(String, u64)>,
    /// Encoded scene id -> its ordinals in order, sorted by name.
    pub scenes: Vec<(String, Vec<u64>)>,
    /// Their memory, charged to the mount's budget in steps of [`CHARGE_STEP`].
    _charges: Vec<Charge>,
}

/// The indexes are charged to the memory budget in steps of this many bytes as they grow: a
/// small fraction of the smallest budget ([`crate::fs::cache::MIN_CACHE_BYTES`]), so that
/// an index of a few records does not take a whole small budget from the records' reads.
pub const CHARGE_STEP: u64 = 64 << 10;

impl Indexes {
    /// The ordinal `by-id/<name>` points at.
    pub fn id(&self, name: &str) -> Option<u64> {
        let at = self
            .ids
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()?;
        self.ids.get(at).map(|(_, ordinal)| *ordinal)
    }

    /// The index of scene `name` in [`Indexes::scenes`].
    pub fn scene(&self, name: &str) -> Option<usize> {
        self.scenes
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
    }
}

/// The indexes of one mount.
#[derive(Debug)]
pub struct RowIndexes(Background<Indexes>);

impl Default for RowIndexes {
    fn default() -> Self {
        RowIndexes::new()
    }
}

impl RowIndexes {
    pub fn new() -> RowIndexes {
        RowIndexes(Background::new("by-id/ and by-scene/"))
    }

    /// The indexes, building them first (in the background) if needed; waits for the build,
    /// ending early when the requester is interrupted.
    pub fn get(&self, dataset: &Arc<Dataset>) -> Result<Arc<Indexes>, FsError> {
        self.0.get(dataset, price, build)
    }
}

/// Refuses a record count whose least index the memory budget cannot hold.
fn price(dataset: &Dataset) -> Result<(), FsError> {
    let records = dataset.len();
    let least = records.saturating_mul(MIN_ENTRY_BYTES);
    let limit = dataset.memory().capacity();
    if least > limit {
        return Err(FsError::failed(format!(
            "{}: record_count {} needs at least {} bytes of index for by-id/ and by-scene/, \
             more than the memory budget of {} bytes (--cache-size)",
            snapshot_name(dataset),
            thousands(records),
            thousands(least),
            thousands(limit)
        )));
    }
    Ok(())
}

fn snapshot_name(dataset: &Dataset) -> String {
    dataset.root().snapshot.path.to_string()
}

/// Reads every row (read ahead on a second thread: [`Dataset::for_each_stored_row`]);
/// unreadable rows are left out (logged, rate-limited).
fn build(dataset: &Dataset, stop: &AtomicBool) -> Result<Indexes, FsError> {
    let mut ids: Vec<(String, u64)> = Vec::new();
    let mut scenes: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut bytes = 0u64;
    let mut charges: Vec<Charge> = Vec::new();
    let failed = dataset.for_each_stored_row(stop, |read| {
        let parsed = read.and_then(|stored| {
            let ordinal = stored.ordinal();
            dataset
                .parse_stored_row(&stored)
                .map(|meta| (ordinal, meta))
                .map_err(|e| (ordinal, e))
        });
        let (ordinal, meta) = match parsed {
            Ok(parsed) => parsed,
            Err((ordinal, e)) => {
                if log_limit::admit("index-row") {
                    tracing::warn!(ordinal, error = %e, "record left out of by-id/ and by-scene/");
                }
                return ControlFlow::Continue(());
            }
        };
        let id = encode_entry(&meta.id);
        bytes += 32 + id.len() as u64;
        ids.push((id, ordinal));
        if let Some(scene) = meta.scene_id {
            let name = encode_entry(&scene);
            bytes += 8;
            match scenes.get_mut(&name) {
                Some(ordinals) => ordinals.push(ordinal),
                None => {
                    bytes += 64 + name.len() as u64;
                    scenes.insert(name, vec![ordinal]);
                }
            }
        }
        while bytes > charges.len() as u64 * CHARGE_STEP {
            match dataset.memory().charge(CHARGE_STEP) {
                Ok(charge) => charges.push(charge),
                Err(e) => {
                    let detail = format!(
                        "by-id/ and by-scene/: the index outgrew the memory budget at record \
                         {ordinal} of {} (--cache-size)",
                        thousands(dataset.len())
                    );
                    return ControlFlow::Break(FsError::at(detail, e));
                }
            }
        }
        ControlFlow::Continue(())
    });
    if let Some(e) = failed {
        return Err(e);
    }
    if stop.load(Ordering::Relaxed) {
        return Err(FsError::failed("the mount is ending"));
    }
    // Stable sort: for a name carried by several records, the lowest ordinal comes first.
    ids.sort_by(|a, b| a.0.cmp(&b.0));
    ids.dedup_by(|later, first| later.0 == first.0);
    ids.shrink_to_fit();
    Ok(Indexes {
        ids,
        scenes: scenes.into_iter().collect(),
        _charges: charges,
    })
}
