//! `by-id/` and `by-scene/`: indexes that need every metadata row, built once, in the
//! background, within a memory limit.
//!
//! Why in the background: building reads one row per record, which takes minutes for millions
//! of records and forever for a snapshot that claims ten billion. A request that did it would
//! hold its requester in D state the whole time (see [`crate::interrupt`]). So the first
//! request that needs the indexes starts one builder thread and waits for it, looking at its
//! requester every [`interrupt::POLL`]: Ctrl-C ends the `ls` at once, and the build goes on,
//! so the next `ls` finds it further along or done.
//!
//! Why a limit: the indexes hold an entry per record. Before reading anything, the record
//! count the snapshot claims is priced at the least an entry can take ([`MIN_ENTRY_BYTES`]);
//! a claim the limit cannot hold is refused at once, and a build whose entries outgrow the
//! limit stops. Either way the failure is kept and reported (EIO, one log line naming the count
//! and the limit) on every later use, and the rest of the tree is unaffected.
//!
//! Memory: ids as one sorted `Vec<(name, ordinal)>` and scenes as a sorted `Vec<(name,
//! ordinals)>`, searched by bisection; a scene link's parent scene comes from its record's row,
//! so there is no per-record reverse map.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::log_limit::{self, thousands};
use super::names::encode_entry;
use crate::budget::Charge;
use crate::dataset::Dataset;
use crate::interrupt::{self, Interrupted};

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

/// The indexes are charged to the memory budget in steps of this many bytes as they grow.
pub const CHARGE_STEP: u64 = 1 << 20;

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

/// Why the indexes cannot be had.
#[derive(Debug, Clone, thiserror::Error)]
pub enum IndexError {
    #[error(transparent)]
    Interrupted(#[from] Interrupted),
    /// Refused or failed for good (the message says why, naming the count and the limit).
    #[error("{0}")]
    Unavailable(String),
}

#[derive(Debug)]
enum State {
    NotStarted,
    Building,
    Ready(Arc<Indexes>),
    Failed(String),
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// Set when the mount's core goes away: the builder stops.
    stop: AtomicBool,
}

/// The indexes of one mount.
#[derive(Debug)]
pub struct RowIndexes {
    shared: Arc<Shared>,
}

impl Drop for RowIndexes {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

impl Default for RowIndexes {
    fn default() -> Self {
        RowIndexes::new()
    }
}

impl RowIndexes {
    /// Indexes charged to their dataset's memory budget.
    pub fn new() -> RowIndexes {
        RowIndexes {
            shared: Arc::new(Shared {
                state: Mutex::new(State::NotStarted),
                changed: Condvar::new(),
                stop: AtomicBool::new(false),
            }),
        }
    }

    /// The indexes, building them first (in the background) if needed; waits for the build,
    /// ending early when the requester is interrupted.
    pub fn get(&self, dataset: &Arc<Dataset>) -> Result<Arc<Indexes>, IndexError> {
        let mut state = self.lock();
        loop {
            match &*state {
                State::Ready(indexes) => return Ok(indexes.clone()),
                State::Failed(why) => return Err(IndexError::Unavailable(why.clone())),
                State::NotStarted => {
                    *state = match self.start(dataset) {
                        Ok(()) => State::Building,
                        Err(why) => {
                            tracing::error!(error = %why, "by-id/ and by-scene/ unavailable");
                            State::Failed(why)
                        }
                    };
                }
                State::Building => {
                    interrupt::check()?;
                    state = self
                        .shared
                        .changed
                        .wait_timeout(state, interrupt::POLL)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Prices the claim, then starts the builder thread.
    fn start(&self, dataset: &Arc<Dataset>) -> Result<(), String> {
        let records = dataset.len();
        let least = records.saturating_mul(MIN_ENTRY_BYTES);
        let limit = dataset.memory().capacity();
        if least > limit {
            return Err(format!(
                "{}: record_count {} needs at least {} bytes of index for by-id/ and by-scene/, \
                 more than the memory budget of {} bytes (--cache-size)",
                snapshot_name(dataset),
                thousands(records),
                thousands(least),
                thousands(limit)
            ));
        }
        tracing::info!(
            records,
            "building by-id/ and by-scene/ from every metadata row"
        );
        let (shared, dataset) = (self.shared.clone(), dataset.clone());
        std::thread::Builder::new()
            .name("sdsfs-index".into())
            .spawn(move || {
                let outcome = build(&dataset, &shared.stop);
                let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
                *state = match outcome {
                    Ok(indexes) => State::Ready(Arc::new(indexes)),
                    Err(why) => {
                        tracing::error!(error = %why, "by-id/ and by-scene/ unavailable");
                        State::Failed(why)
                    }
                };
                shared.changed.notify_all();
            })
            .map(|_| ())
            .map_err(|e| format!("cannot start the index builder: {e}"))
    }
}

fn snapshot_name(dataset: &Dataset) -> String {
    dataset.root().snapshot.path.to_string()
}

/// Reads every row; unreadable rows are left out (logged, rate-limited).
fn build(dataset: &Dataset, stop: &AtomicBool) -> Result<Indexes, String> {
    let mut ids: Vec<(String, u64)> = Vec::new();
    let mut scenes: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut bytes = 0u64;
    let mut charges: Vec<Charge> = Vec::new();
    for ordinal in 0..dataset.len() {
        if stop.load(Ordering::Relaxed) {
            return Err("the mount is ending".into());
        }
        let meta = match dataset.record_meta(ordinal) {
            Ok(meta) => meta,
            Err(e) => {
                if log_limit::admit("index-row") {
                    tracing::warn!(ordinal, error = %e, "record left out of by-id/ and by-scene/");
                }
                continue;
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
            let charge = dataset.memory().charge(CHARGE_STEP).map_err(|e| {
                format!(
                    "by-id/ and by-scene/: the index outgrew the memory budget at record \
                     {ordinal} of {}: {e} (--cache-size)",
                    thousands(dataset.len())
                )
            })?;
            charges.push(charge);
        }
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
