//! Byte budgets: one for the memory everything the mount keeps or decodes may take, one for
//! the disk its temporary files may take. A helper below every layer (it uses nothing else in
//! the crate), so the dataset layer (pages, chunks) and the mount (records, trees, indexes)
//! charge the same budget. It asks [`crate::interrupt`] whether a waiting requester gave up, and
//! which work (a request, background work) a charge is made by and whether that work waits.
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
//! (see [`crate::interrupt`]) and giving up after [`WAIT_LIMIT`], or after [`STUCK_LIMIT`]
//! without a release when nothing it could wait for is in flight (see `charges`). A unit
//! larger than the whole budget is refused at once ([`BudgetError::TooLarge`]): it is never
//! decoded.
//!
//! The budget and its gates are built on the primitives of `prim` below, so that the model
//! check (`shuttle_check`, run by `cargo test --lib`) builds the very same files on
//! shuttle's primitives and explores their interleavings.

// Also built on shuttle's primitives by `shuttle_check`.
#[allow(clippy::duplicate_mod)]
mod charges;
#[allow(clippy::duplicate_mod)]
mod gates;
#[cfg(test)]
mod shuttle_check;

pub use charges::{Budget, BudgetError, Charge, Reclaim, STUCK_LIMIT, WAIT_LIMIT};
pub use gates::Gates;

/// What `charges` and `gates` are built on: std's locks, and this thread's work and requester
/// from [`crate::interrupt`]. `shuttle_check` has its own `prim` of shuttle's.
mod prim {
    pub(super) use crate::interrupt::{current_work, waiting, Work};
    pub(super) use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

    /// Whether the requester this thread serves has a signal pending.
    pub(super) fn interrupted() -> bool {
        crate::interrupt::check().is_err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

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
            std::thread::sleep(STUCK_LIMIT + Duration::from_millis(200));
            drop(held);
            waiter.join().unwrap()
        });
        assert_eq!(
            waited,
            Ok(50),
            "work in flight held the room: no stuck verdict"
        );
        let _held = budget.charge(80).unwrap();
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

    /// A request's wait for room that only its own holdings (and what is kept) block.
    fn blocked_by_own_holdings(budget: &Arc<Budget>) -> (Result<Charge, BudgetError>, Duration) {
        crate::interrupt::serving(0, || {
            let _own = budget.charge(80).unwrap();
            let started = std::time::Instant::now();
            (budget.charge(50), started.elapsed())
        })
    }

    #[test]
    fn a_charge_that_only_its_own_holdings_block_fails_soon() {
        let budget = Budget::new("memory", 100);
        let (refused, waited) = blocked_by_own_holdings(&budget);
        assert_eq!(
            refused.unwrap_err(),
            BudgetError::Stuck {
                what: "memory",
                bytes: 50,
                used: 80,
                capacity: 100
            }
        );
        assert!(
            waited >= STUCK_LIMIT && waited < STUCK_LIMIT * 2,
            "{waited:?}"
        );
    }

    /// Work elsewhere that holds nothing of this budget cannot make room in it: the verdict
    /// is the budget's own (a count of threads at work kept such a wait for WAIT_LIMIT).
    #[test]
    fn work_that_holds_nothing_of_the_budget_does_not_keep_a_wait_going() {
        let _elsewhere = AtWorkElsewhere::start();
        let budget = Budget::new("memory", 100);
        let (refused, waited) = blocked_by_own_holdings(&budget);
        assert!(
            matches!(refused, Err(BudgetError::Stuck { used: 80, .. })),
            "{refused:?}"
        );
        assert!(waited < STUCK_LIMIT * 2, "{waited:?}");
    }

    /// What a work left charged when it ended (kept by a structure) is not work in flight.
    #[test]
    fn charges_left_by_finished_work_count_as_kept() {
        let budget = Budget::new("memory", 100);
        let kept = crate::interrupt::background(|| budget.charge(60).unwrap());
        let started = std::time::Instant::now();
        let refused = crate::interrupt::serving(0, || budget.charge(50));
        assert!(
            matches!(refused, Err(BudgetError::Stuck { used: 60, .. })),
            "{refused:?}"
        );
        assert!(started.elapsed() < STUCK_LIMIT * 2);
        drop(kept);
        assert_eq!(budget.used(), 0);
    }

    /// Two works that each hold room the other waits for: neither can move, so the waits
    /// end (one fails and gives its room back to the other, or both fail).
    #[test]
    fn works_waiting_on_each_other_do_not_wait_for_ever() {
        let budget = Budget::new("memory", 100);
        let started = std::time::Instant::now();
        let outcomes: Vec<bool> = std::thread::scope(|scope| {
            let both: Vec<_> = (0..2)
                .map(|_| {
                    scope.spawn(|| {
                        crate::interrupt::background(|| {
                            let _held = budget.charge(45).unwrap();
                            std::thread::sleep(Duration::from_millis(100));
                            budget.charge(60).is_ok()
                        })
                    })
                })
                .collect();
            both.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert!(
            outcomes.iter().filter(|ok| **ok).count() <= 1,
            "{outcomes:?}"
        );
        assert!(
            started.elapsed() < STUCK_LIMIT * 3,
            "{:?}",
            started.elapsed()
        );
        assert_eq!(budget.used(), 0);
    }

    /// The interleaving of the gate's old race: a first worker holds the gate, a second
    /// queues on it, the first finishes; while the second works, a newcomer arrives. Only one
    /// may work at a time, and the key is busy as long as any of them works.
    #[test]
    fn a_gate_runs_one_worker_at_a_time_through_its_hand_over() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        use std::sync::mpsc::channel;
        let gates: Gates<u64> = Gates::default();
        let (inside, most_inside, busy_seen_false) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        let worker = |entered: std::sync::mpsc::Sender<()>, go: std::sync::mpsc::Receiver<()>| {
            gates.one_at_a_time(7, || {
                most_inside.fetch_max(inside.fetch_add(1, SeqCst) + 1, SeqCst);
                let _ = entered.send(());
                let _ = go.recv();
                if !gates.busy(&7) {
                    busy_seen_false.fetch_add(1, SeqCst);
                }
                inside.fetch_sub(1, SeqCst);
            })
        };
        let settle = || std::thread::sleep(Duration::from_millis(100));
        std::thread::scope(|scope| {
            let start = || {
                let (entered_tx, entered) = channel();
                let (go, go_rx) = channel();
                scope.spawn(move || worker(entered_tx, go_rx));
                (entered, go)
            };
            let first = start();
            first.0.recv().unwrap();
            let second = start();
            settle(); // queued on the first's gate
            first.1.send(()).unwrap();
            second.0.recv().unwrap();
            let newcomer = start();
            settle(); // queued behind the second (or, on the old gate, working beside it)
            second.1.send(()).unwrap();
            newcomer.0.recv().unwrap();
            settle(); // the second is gone (and, on the old gate, took the newcomer's entry)
            newcomer.1.send(()).unwrap();
        });
        assert_eq!(most_inside.into_inner(), 1, "workers at once for one key");
        assert_eq!(
            busy_seen_false.into_inner(),
            0,
            "busy() said no while one worked"
        );
        assert!(!gates.busy(&7), "the gate is gone once its work is done");
    }
}
