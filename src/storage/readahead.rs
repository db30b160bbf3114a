//! Background prefetching of byte ranges of one object, for sequential scans over object
//! stores.
//!
//! The mechanism lives here, the policy with the caller: [`ObjectReader::prefetch`] fetches a
//! range on a background thread into a small buffer, and a later
//! [`ObjectReader::read_at`](super::ObjectReader::read_at) inside that range is served from it
//! (waiting for the fetch when it is still under way, so the range is never requested twice).
//! The dataset layer decides what to prefetch (the next chunks, once it sees record `i + 1`
//! read after record `i`), see `dataset::reader`.
//!
//! Bounds: a reader keeps at most [`SLOTS`] ranges of at most [`SLOT_BYTES`] each, and all
//! readers of the process together hold at most [`TOTAL_BYTES`] of prefetched data; a prefetch
//! that would exceed a bound is skipped, never waited for. A range is dropped as soon as a read
//! has consumed its end (a scan moves on) or when a newer prefetch needs its slot. A failed
//! prefetch is forgotten: the read that wanted it issues its own request, under the store's
//! retry policy, and reports its own error.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use bytes::Bytes;

use super::ObjectReader;

/// Ranges one reader holds or fetches at once.
pub const SLOTS: usize = 2;
/// Largest range prefetched.
pub const SLOT_BYTES: u64 = 8 << 20;
/// Prefetched bytes held by the whole process.
pub const TOTAL_BYTES: u64 = 64 << 20;

static HELD: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
enum State {
    Pending,
    Ready(Bytes),
}

#[derive(Debug)]
struct Slot {
    range: Range<u64>,
    state: State,
    /// Insertion order, to evict the oldest slot first.
    serial: u64,
}

/// The prefetch buffer of one object, shared by the clones of its [`ObjectReader`].
#[derive(Debug, Default)]
pub struct ReadAhead {
    slots: Mutex<Vec<Slot>>,
    done: Condvar,
    serial: AtomicU64,
    /// The last access key noted, plus one (0: none yet).
    last_key: AtomicU64,
}

impl ReadAhead {
    fn lock(&self) -> MutexGuard<'_, Vec<Slot>> {
        crate::sync::lock(&self.slots)
    }

    /// Notes an access to `key` (a record index, for the dataset layer) and says whether it
    /// directly follows the previous access (`key == previous + 1`).
    pub fn follows_previous(&self, key: u64) -> bool {
        let previous = self.last_key.swap(key.saturating_add(1), Ordering::Relaxed);
        previous != 0 && previous == key
    }

    /// Reserves a slot for `range` unless it is covered already or a bound forbids it.
    fn reserve(&self, range: &Range<u64>) -> bool {
        let len = range.end - range.start;
        if len == 0 || len > SLOT_BYTES {
            return false;
        }
        let mut slots = self.lock();
        if slots
            .iter()
            .any(|s| s.range.start <= range.start && range.end <= s.range.end)
        {
            return false;
        }
        if slots.len() >= SLOTS {
            // Evict the oldest finished slot; in-flight fetches are never cancelled.
            let oldest = slots
                .iter()
                .enumerate()
                .filter(|(_, s)| matches!(s.state, State::Ready(_)))
                .min_by_key(|(_, s)| s.serial)
                .map(|(i, _)| i);
            match oldest {
                Some(i) => release(slots.swap_remove(i)),
                None => return false,
            }
        }
        if HELD.fetch_add(len, Ordering::SeqCst) + len > TOTAL_BYTES {
            HELD.fetch_sub(len, Ordering::SeqCst);
            return false;
        }
        slots.push(Slot {
            range: range.clone(),
            state: State::Pending,
            serial: self.serial.fetch_add(1, Ordering::Relaxed),
        });
        true
    }

    /// Stores the outcome of the fetch of `range` (a failure frees the slot).
    fn complete(&self, range: &Range<u64>, bytes: Option<Bytes>) {
        let mut slots = self.lock();
        if let Some(i) = slots
            .iter()
            .position(|s| s.range == *range && matches!(s.state, State::Pending))
        {
            match bytes {
                Some(bytes) if bytes.len() as u64 == range.end - range.start => {
                    slots[i].state = State::Ready(bytes)
                }
                _ => release(slots.swap_remove(i)),
            }
        }
        self.done.notify_all();
    }

    /// The bytes `[offset, end)` when a slot covers them, waiting for a fetch in flight; a
    /// slot whose end has been read is dropped.
    pub(super) fn take(&self, offset: u64, end: u64) -> Option<Bytes> {
        let mut slots = self.lock();
        loop {
            let i = slots
                .iter()
                .position(|s| s.range.start <= offset && end <= s.range.end)?;
            match &slots[i].state {
                State::Pending => {
                    slots = self.done.wait(slots).unwrap_or_else(|e| e.into_inner());
                }
                State::Ready(bytes) => {
                    let start = (offset - slots[i].range.start) as usize;
                    let piece = bytes.slice(start..start + (end - offset) as usize);
                    if end == slots[i].range.end {
                        release(slots.swap_remove(i));
                    }
                    return Some(piece);
                }
            }
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        let slots = std::mem::take(&mut *self.lock());
        slots.into_iter().for_each(release);
    }
}

/// Returns a slot's reservation to the process-wide budget.
fn release(slot: Slot) {
    HELD.fetch_sub(slot.range.end - slot.range.start, Ordering::SeqCst);
}

impl ObjectReader {
    /// Fetches `range` in the background so that a later read inside it is served from
    /// memory. Skipped when the range is already held or fetched, or a bound is reached.
    pub fn prefetch(&self, range: Range<u64>) {
        if range.end > self.size || !self.ahead.reserve(&range) {
            return;
        }
        let reader = self.clone();
        let reserved = range.clone();
        let spawned = std::thread::Builder::new()
            .name("sds-prefetch".into())
            .spawn(move || {
                let bytes = reader
                    .store
                    .read_range(&reader.path, range.clone(), reader.generation);
                if let Err(err) = &bytes {
                    tracing::debug!("prefetch of {} failed: {err}", reader.describe());
                }
                reader.ahead.complete(&range, bytes.ok());
            });
        if spawned.is_err() {
            self.ahead.complete(&reserved, None);
        }
    }

    /// The prefetch state shared by this reader's clones.
    pub fn read_ahead(&self) -> &Arc<ReadAhead> {
        &self.ahead
    }
}
