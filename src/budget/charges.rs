//! [`Budget`] and its [`Charge`]s, on the primitives of `super::prim` (std's in the crate,
//! shuttle's in the model check `super::shuttle_check`, which builds this same file).
//!
//! Why charges are tagged with the work that made them: a charge that does not fit waits for
//! a release, and whether one can come is a question about who holds what. The budget keeps,
//! for every piece of work in flight ([`Work`]: a request served, background work), the bytes
//! it charged and still holds. A wait can end while some work that is not itself waiting
//! holds bytes (it gives them back, or hands them to a cache that can give them back, when
//! done). When everything charged is held by waiting work (this one included) or was left
//! charged by work that is over (kept by a structure: an index, a cache entry a reader holds
//! open), only a reader closing a file can give room back: the wait then fails after
//! [`STUCK_LIMIT`] without a release. The budget learns all of it from its own ledger and the
//! works' own state; nothing counts threads.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::prim::{
    current_work, interrupted, waiting, Arc, Condvar, Mutex, MutexGuard, Weak, Work,
};

/// How long a charge waits for in-flight work to release room before failing.
pub const WAIT_LIMIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);
/// How long a charge that no work in flight could make room for waits for a release from
/// elsewhere (a reader closing a file whose decoded record it held open) before failing.
pub const STUCK_LIMIT: Duration = Duration::from_secs(2);

/// A cache that can give memory back.
pub trait Reclaim: Send + Sync + std::fmt::Debug {
    /// Drops the least recently used entry; false when there is none.
    fn reclaim_one(&self) -> bool;
}

/// Why a charge was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error("{bytes} bytes are more than the whole {what} budget of {capacity} bytes")]
    TooLarge {
        what: &'static str,
        bytes: u64,
        capacity: u64,
    },
    #[error("interrupted while waiting for room in the {what} budget")]
    Interrupted { what: &'static str },
    #[error(
        "the {what} budget of {capacity} bytes stayed full for {} s (every byte in use by \
         other requests)", WAIT_LIMIT.as_secs()
    )]
    Exhausted { what: &'static str, capacity: u64 },
    #[error(
        "{bytes} bytes do not fit in the {what} budget of {capacity} bytes: {used} are held by \
         this request and by what is kept for the whole mount, and no other work in flight \
         would give any back (raise the budget)"
    )]
    Stuck {
        what: &'static str,
        bytes: u64,
        used: u64,
        capacity: u64,
    },
}

/// A budget of bytes.
pub struct Budget {
    what: &'static str,
    capacity: u64,
    ledger: Mutex<Ledger>,
    released: Condvar,
    reclaimers: Mutex<Vec<Weak<dyn Reclaim>>>,
    /// [`STUCK_LIMIT`] and [`WAIT_LIMIT`] (shorter in the model check).
    stuck_limit: Duration,
    wait_limit: Duration,
}

/// What is charged, and by whom.
#[derive(Default)]
struct Ledger {
    used: u64,
    /// Releases so far: a waiter sees from it whether anything was given back meanwhile.
    releases: u64,
    /// Charges sleeping on `released`: a release wakes them only when there are any (waking
    /// is a system call, and a record's read releases several charges).
    sleepers: usize,
    /// Bytes held by each work in flight, by [`Work::id`]. Works found over are dropped from
    /// it: what they left charged counts as kept (`used` less the rest).
    held: HashMap<u64, Holding>,
}

struct Holding {
    work: Weak<Work>,
    bytes: u64,
}

impl Ledger {
    /// Whether some work that is not waiting holds bytes: a wait for room can then end.
    /// Forgets the works that are over on the way.
    fn held_in_flight(&mut self) -> bool {
        let mut in_flight = false;
        self.held.retain(|_, holding| match holding.work.upgrade() {
            Some(work) => {
                in_flight |= !work.is_waiting();
                true
            }
            None => false,
        });
        in_flight
    }

    fn take(&mut self, bytes: u64, work: Option<&Arc<Work>>) {
        self.used = self.used.saturating_add(bytes);
        if let Some(work) = work {
            self.held
                .entry(work.id())
                .or_insert_with(|| Holding {
                    work: Arc::downgrade(work),
                    bytes: 0,
                })
                .bytes += bytes;
        }
    }

    fn give_back(&mut self, bytes: u64, work: Option<u64>) {
        self.used = self.used.saturating_sub(bytes);
        self.releases += 1;
        let Some(id) = work else { return };
        if let Some(holding) = self.held.get_mut(&id) {
            holding.bytes = holding.bytes.saturating_sub(bytes);
            if holding.bytes == 0 {
                self.held.remove(&id);
            }
        }
    }
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget")
            .field("what", &self.what)
            .field("capacity", &self.capacity)
            .field("used", &self.used())
            .finish()
    }
}

/// Bytes charged to a budget, given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<Budget>,
    bytes: u64,
    /// The work that made the charge ([`Work::id`]); none outside any work.
    work: Option<u64>,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.release(self.bytes, self.work);
    }
}

impl Charge {
    /// The bytes charged.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Gives back what is charged beyond `bytes` (a unit that turned out smaller than its
    /// bound).
    pub fn shrink_to(&mut self, bytes: u64) {
        if bytes < self.bytes {
            self.budget.release(self.bytes - bytes, self.work);
            self.bytes = bytes;
        }
    }
}

impl Budget {
    /// A budget of `capacity` bytes; `what` names it in messages ("memory", "spill").
    pub fn new(what: &'static str, capacity: u64) -> Arc<Budget> {
        Budget::with_limits(what, capacity, STUCK_LIMIT, WAIT_LIMIT)
    }

    /// [`Budget::new`] whose waits fail after `stuck_limit` (nothing in flight) and
    /// `wait_limit` (in any case).
    pub(crate) fn with_limits(
        what: &'static str,
        capacity: u64,
        stuck_limit: Duration,
        wait_limit: Duration,
    ) -> Arc<Budget> {
        Arc::new(Budget {
            what,
            capacity,
            ledger: Mutex::new(Ledger::default()),
            released: Condvar::new(),
            reclaimers: Mutex::new(Vec::new()),
            stuck_limit,
            wait_limit,
        })
    }

    /// A budget that never refuses (library use, `sds` commands).
    pub fn unlimited(what: &'static str) -> Arc<Budget> {
        Budget::new(what, u64::MAX)
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn used(&self) -> u64 {
        self.lock().used
    }

    fn lock(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a cache that gives memory back when a charge does not fit (held weakly: a
    /// dropped cache is skipped, and forgotten at the next registration, so caches made anew
    /// on every catalog refresh do not pile up).
    pub fn register<R: Reclaim + 'static>(&self, cache: &Arc<R>) {
        let cache: Arc<dyn Reclaim> = cache.clone();
        let mut reclaimers = self.reclaimers.lock().unwrap_or_else(|e| e.into_inner());
        reclaimers.retain(|registered| registered.strong_count() > 0);
        reclaimers.push(Arc::downgrade(&cache));
    }

    fn release(&self, bytes: u64, work: Option<u64>) {
        let mut ledger = self.lock();
        ledger.give_back(bytes, work);
        // A sleeper counts itself while holding the lock, before it sleeps: one that this
        // release could help was counted before the lock was ours.
        let wake = ledger.sleepers > 0;
        drop(ledger);
        if wake {
            self.released.notify_all();
        }
    }

    /// Charges `bytes`, reclaiming cache entries and then waiting for in-flight work as
    /// needed; the wait ends when the requester this thread serves is interrupted.
    pub fn charge(self: &Arc<Self>, bytes: u64) -> Result<Charge, BudgetError> {
        if bytes > self.capacity {
            return Err(BudgetError::TooLarge {
                what: self.what,
                bytes,
                capacity: self.capacity,
            });
        }
        if let Some(charge) = self.try_charge(bytes) {
            return Ok(charge);
        }
        // From here on this work waits on others: what it holds cannot be given back until
        // it moves on, which other waits for room must know.
        waiting(|| self.wait_for_room(bytes))
    }

    /// [`Budget::charge`] once reclaiming alone did not make room: waits for releases, ending
    /// on an interrupt, after the wait limit, or after the stuck limit without a release
    /// when no work in flight holds anything it could give back.
    fn wait_for_room(self: &Arc<Self>, bytes: u64) -> Result<Charge, BudgetError> {
        let started = Instant::now();
        // Since when no work in flight could make room, and the releases seen then.
        let mut stuck: Option<(Instant, u64)> = None;
        loop {
            if let Some(charge) = self.try_charge(bytes) {
                return Ok(charge);
            }
            if interrupted() {
                return Err(BudgetError::Interrupted { what: self.what });
            }
            if started.elapsed() > self.wait_limit {
                return Err(BudgetError::Exhausted {
                    what: self.what,
                    capacity: self.capacity,
                });
            }
            let mut ledger = self.lock();
            if ledger.used.saturating_add(bytes) <= self.capacity {
                continue;
            }
            let seen = ledger.releases;
            stuck = match stuck {
                _ if ledger.held_in_flight() => None,
                Some((since, before)) if before == seen => Some((since, before)),
                _ => Some((Instant::now(), seen)),
            };
            if stuck.is_some_and(|(since, _)| since.elapsed() >= self.stuck_limit) {
                return Err(BudgetError::Stuck {
                    what: self.what,
                    bytes,
                    used: ledger.used,
                    capacity: self.capacity,
                });
            }
            ledger.sleepers += 1;
            let mut ledger = self
                .released
                .wait_timeout(ledger, POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            ledger.sleepers -= 1;
        }
    }

    /// Charges `bytes` if they fit after reclaiming, without waiting (optional work such as
    /// decoding ahead of a scan).
    pub fn try_charge(self: &Arc<Self>, bytes: u64) -> Option<Charge> {
        let work = current_work();
        loop {
            if let Some(charge) = self.try_take(bytes, work.as_ref()) {
                return Some(charge);
            }
            if bytes > self.capacity || !self.reclaim_one() {
                return None;
            }
        }
    }

    fn try_take(self: &Arc<Self>, bytes: u64, work: Option<&Arc<Work>>) -> Option<Charge> {
        let mut ledger = self.lock();
        if ledger.used.saturating_add(bytes) > self.capacity {
            return None;
        }
        ledger.take(bytes, work);
        Some(Charge {
            budget: self.clone(),
            bytes,
            work: work.map(|work| work.id()),
        })
    }

    /// Asks the registered caches, the most recently registered first (a mount registers its
    /// decoded records last: they go before rows, chunks and manifest pages), to drop one
    /// entry; false if none could.
    fn reclaim_one(&self) -> bool {
        let reclaimers: Vec<Arc<dyn Reclaim>> = self
            .reclaimers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .rev()
            .filter_map(Weak::upgrade)
            .collect();
        reclaimers.iter().any(|cache| cache.reclaim_one())
    }
}
