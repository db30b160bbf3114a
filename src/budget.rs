//! Byte budgets: one for the memory everything the mount keeps or decodes may take, one for
//! the disk its temporary files may take. A helper below every layer (it uses nothing else in
//! the crate), so the dataset layer (pages, chunks) and the mount (records, trees, indexes)
//! charge the same budget. It asks [`crate::interrupt`] whether a waiting requester gave up.
//!
//! Why one budget rather than a bound per cache: a hostile dataset chooses which part grows
//! (huge rows, huge pages, a huge chunk behind a tiny file, many at once), so bounds per cache
//! add up to far more than the operator gave, and a bound by entry count is no bound at all.
//! Every unit is charged before it is read or decoded, at what it will take at most (a
//! chunk's decoded size comes from the shard's index, a page's from its reference), and the
//! charge lives as long as the memory (it travels with the value, so an entry evicted from a
//! cache while a reader still holds it stays charged until the reader drops it).
//!
//! When a charge does not fit, the caches registered as [`Reclaim`]ers give back their least
//! recently used entries; when none has anything left to give (everything is in use by
//! in-flight requests), the charge waits for a release, looking at its requester's signals
//! (see [`crate::interrupt`]) and giving up after [`WAIT_LIMIT`]. A unit larger than the whole
//! budget is refused at once ([`BudgetError::TooLarge`]): it is never decoded.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

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
    used: Mutex<u64>,
    released: Condvar,
    /// Releases so far: a waiter sees from it whether anything was given back meanwhile.
    releases: std::sync::atomic::AtomicU64,
    /// Charges waiting on `released`: a release wakes them only when there are any (waking
    /// is a system call, and a record's read releases several charges).
    waiters: std::sync::atomic::AtomicUsize,
    reclaimers: Mutex<Vec<Weak<dyn Reclaim>>>,
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
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
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
            self.budget.release(self.bytes - bytes);
            self.bytes = bytes;
        }
    }
}

impl Budget {
    /// A budget of `capacity` bytes; `what` names it in messages ("memory", "spill").
    pub fn new(what: &'static str, capacity: u64) -> Arc<Budget> {
        Arc::new(Budget {
            what,
            capacity,
            used: Mutex::new(0),
            released: Condvar::new(),
            releases: std::sync::atomic::AtomicU64::new(0),
            waiters: std::sync::atomic::AtomicUsize::new(0),
            reclaimers: Mutex::new(Vec::new()),
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
        *self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, u64> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
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

    fn release(&self, bytes: u64) {
        let mut used = self.lock();
        *used = used.saturating_sub(bytes);
        self.releases
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        drop(used);
        // A waiter counts itself while holding the lock, before it checks for room and
        // sleeps: one that this release could help was counted before the lock was ours.
        if self.waiters.load(std::sync::atomic::Ordering::SeqCst) > 0 {
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
        // From here on this thread waits on others: it counts as waiting throughout, so that
        // threads polling for room do not look like work that could give memory back.
        crate::interrupt::waiting(|| self.wait_for_room(bytes))
    }

    /// [`Budget::charge`] once reclaiming alone did not make room: waits for releases, ending
    /// on an interrupt, after [`WAIT_LIMIT`], or after [`STUCK_LIMIT`] without a release when
    /// no work in flight could give any back.
    fn wait_for_room(self: &Arc<Self>, bytes: u64) -> Result<Charge, BudgetError> {
        let started = Instant::now();
        // Since when no work in flight could make room, and the releases seen then.
        let mut stuck: Option<(Instant, u64)> = None;
        loop {
            if let Some(charge) = self.try_charge(bytes) {
                return Ok(charge);
            }
            // Work in flight elsewhere gives memory back, and so does a reader closing a file
            // whose record it held open. Without either for STUCK_LIMIT, waiting cannot end:
            // what is held belongs to waiting requests or to structures kept for the mount.
            let releases = self.releases.load(std::sync::atomic::Ordering::SeqCst);
            stuck = match stuck {
                _ if crate::interrupt::others_at_work() > 0 => None,
                Some((since, seen)) if seen == releases => Some((since, seen)),
                _ => Some((Instant::now(), releases)),
            };
            if stuck.is_some_and(|(since, _)| since.elapsed() > STUCK_LIMIT) {
                return Err(BudgetError::Stuck {
                    what: self.what,
                    bytes,
                    used: self.used(),
                    capacity: self.capacity,
                });
            }
            if crate::interrupt::check().is_err() {
                return Err(BudgetError::Interrupted { what: self.what });
            }
            if started.elapsed() > WAIT_LIMIT {
                return Err(BudgetError::Exhausted {
                    what: self.what,
                    capacity: self.capacity,
                });
            }
            let used = self.lock();
            if used.saturating_add(bytes) > self.capacity {
                use std::sync::atomic::Ordering::SeqCst;
                self.waiters.fetch_add(1, SeqCst);
                drop(
                    self.released
                        .wait_timeout(used, POLL)
                        .unwrap_or_else(|e| e.into_inner()),
                );
                self.waiters.fetch_sub(1, SeqCst);
            }
        }
    }

    /// Charges `bytes` if they fit after reclaiming, without waiting (optional work such as
    /// decoding ahead of a scan).
    pub fn try_charge(self: &Arc<Self>, bytes: u64) -> Option<Charge> {
        loop {
            if let Some(charge) = self.try_take(bytes) {
                return Some(charge);
            }
            if bytes > self.capacity || !self.reclaim_one() {
                return None;
            }
        }
    }

    fn try_take(self: &Arc<Self>, bytes: u64) -> Option<Charge> {
        let mut used = self.lock();
        if used.saturating_add(bytes) > self.capacity {
            return None;
        }
        *used += bytes;
        Some(Charge {
            budget: self.clone(),
            bytes,
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

/// Per-unit gates: concurrent first reads of one unit (a page, a chunk, a row, a record) wait
/// for a single decode, charged once, instead of each decoding it.
#[derive(Debug)]
pub struct Gates<K> {
    open: Mutex<HashMap<K, Arc<Mutex<()>>>>,
}

impl<K: Hash + Eq + Clone> Default for Gates<K> {
    fn default() -> Self {
        Gates {
            open: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq + Clone> Gates<K> {
    fn lock(&self) -> MutexGuard<'_, HashMap<K, Arc<Mutex<()>>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `work` for `key` while no other thread runs work for the same key. `work` should
    /// first look for what a previous holder produced (the caller's cache).
    pub fn one_at_a_time<R>(&self, key: K, work: impl FnOnce() -> R) -> R {
        let gate = self.lock().entry(key.clone()).or_default().clone();
        let only_worker =
            crate::interrupt::waiting(|| gate.lock().unwrap_or_else(|e| e.into_inner()));
        let result = work();
        drop(only_worker);
        self.lock().remove(&key);
        result
    }

    /// Whether work for `key` is under way.
    pub fn busy(&self, key: &K) -> bool {
        self.lock().contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_given_back_on_drop_and_shrink() {
        let budget = Budget::new("memory", 100);
        let mut a = budget.charge(60).unwrap();
        assert_eq!(budget.used(), 60);
        assert!(budget.try_charge(50).is_none());
        a.shrink_to(40);
        let b = budget.try_charge(50).unwrap();
        assert_eq!(budget.used(), 90);
        drop((a, b));
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_unit_larger_than_the_budget_is_refused_at_once() {
        let budget = Budget::new("memory", 100);
        let refused = budget.charge(101).unwrap_err();
        assert_eq!(
            refused,
            BudgetError::TooLarge {
                what: "memory",
                bytes: 101,
                capacity: 100
            }
        );
    }

    #[derive(Debug)]
    struct Entries(Mutex<Vec<Charge>>);
    impl Reclaim for Entries {
        fn reclaim_one(&self) -> bool {
            let mut entries = self.0.lock().unwrap();
            if entries.is_empty() {
                return false;
            }
            entries.remove(0);
            true
        }
    }

    #[test]
    fn caches_give_back_entries_to_make_room() {
        let budget = Budget::new("memory", 100);
        let cache = Arc::new(Entries(Mutex::new(Vec::new())));
        budget.register(&cache);
        for _ in 0..4 {
            let charge = budget.charge(25).unwrap();
            cache.0.lock().unwrap().push(charge);
        }
        let big = budget.charge(60).unwrap();
        assert_eq!(cache.0.lock().unwrap().len(), 1, "three entries reclaimed");
        assert_eq!(budget.used(), 85);
        drop(big);
    }

    #[test]
    fn a_charge_waits_for_in_flight_work_and_can_be_interrupted() {
        let budget = Budget::new("memory", 100);
        // This thread is work in flight holding 80 bytes, then giving them back.
        let waited = crate::interrupt::background(|| {
            let held = budget.charge(80).unwrap();
            let waiter = {
                let budget = budget.clone();
                std::thread::spawn(move || budget.charge(50).map(|c| c.bytes()))
            };
            std::thread::sleep(Duration::from_millis(120));
            drop(held);
            waiter.join().unwrap()
        });
        assert_eq!(waited, Ok(50));
        let _held = budget.charge(80).unwrap();
        let _elsewhere = AtWorkElsewhere::start();
        // A requester that is gone counts as interrupted.
        let refused = crate::interrupt::serving(u32::MAX - 1, || budget.charge(50));
        assert_eq!(
            refused.unwrap_err(),
            BudgetError::Interrupted { what: "memory" }
        );
    }

    /// Another thread at work (that holds nothing) until dropped.
    struct AtWorkElsewhere {
        stop: std::sync::mpsc::Sender<()>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl AtWorkElsewhere {
        fn start() -> AtWorkElsewhere {
            let (stop, stopped) = std::sync::mpsc::channel::<()>();
            let (ready, started) = std::sync::mpsc::channel::<()>();
            let thread = std::thread::spawn(move || {
                crate::interrupt::background(|| {
                    ready.send(()).unwrap();
                    let _ = stopped.recv();
                })
            });
            started.recv().unwrap();
            AtWorkElsewhere {
                stop,
                thread: Some(thread),
            }
        }
    }

    impl Drop for AtWorkElsewhere {
        fn drop(&mut self) {
            let _ = self.stop.send(());
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }

    #[test]
    fn a_charge_that_only_its_own_holdings_block_fails_soon() {
        let budget = Budget::new("memory", 100);
        let _own = budget.charge(80).unwrap();
        let started = std::time::Instant::now();
        let refused = crate::interrupt::serving(0, || budget.charge(50));
        assert_eq!(
            refused.unwrap_err(),
            BudgetError::Stuck {
                what: "memory",
                bytes: 50,
                used: 80,
                capacity: 100
            }
        );
        // Other tests of this process may be at work meanwhile; the refusal waits for them only.
        let waited = started.elapsed();
        assert!(
            waited >= STUCK_LIMIT && waited < WAIT_LIMIT / 2,
            "{waited:?}"
        );
    }

    #[test]
    fn gates_let_one_worker_run_per_key_and_others_find_its_result() {
        let gates: Gates<u64> = Gates::default();
        let decoded = Mutex::new(None::<u64>);
        let decodes = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    gates.one_at_a_time(7, || {
                        let mut slot = decoded.lock().unwrap();
                        if slot.is_none() {
                            decodes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(20));
                            *slot = Some(49);
                        }
                    })
                });
            }
        });
        assert_eq!(decodes.into_inner(), 1);
        assert!(!gates.busy(&7), "the gate is gone once its work is done");
    }
}
