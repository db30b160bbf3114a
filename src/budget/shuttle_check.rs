//! Model check of [`Budget`] and [`Gates`]: this module builds `charges.rs` and `gates.rs`
//! again on shuttle's locks and thread locals (its own `prim`), and shuttle runs each scenario
//! over thousands of schedules (random and PCT), failing on a broken assertion or a deadlock.
//!
//! Why a copy built beside the crate's instead of a feature: `cargo test --release
//! --all-targets` (CI) runs the library's tests with default features, so the check must
//! build and run there. shuttle's `Condvar::wait_timeout` never times out: a waiter wakes only
//! when notified, so a lost wake-up is a deadlock shuttle reports. The budgets here fail a
//! wait as soon as nothing in flight could end it (no stuck delay), and nothing is ever
//! interrupted.

// Built a second time on purpose (see above); what the crate uses of them and the scenarios
// do not is dead here.
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "charges.rs"]
mod charges;
#[allow(clippy::duplicate_mod)]
#[path = "gates.rs"]
mod gates;

use std::time::Duration;

use charges::{Budget, BudgetError, Charge, Reclaim};
use gates::Gates;
use shuttle::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use shuttle::sync::{Arc, Mutex};
use shuttle::thread;

/// shuttle's counterparts of the crate's `budget::prim`.
mod prim {
    use std::cell::RefCell;

    pub(super) use crate::interrupt::Work;
    pub(super) use shuttle::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

    shuttle::thread_local! {
        static WORK: RefCell<Option<Arc<Work>>> = const { RefCell::new(None) };
    }

    pub(super) fn current_work() -> Option<Arc<Work>> {
        WORK.with(|current| current.borrow().clone())
    }

    pub(super) fn waiting<T>(wait: impl FnOnce() -> T) -> T {
        match current_work() {
            Some(work) => work.waiting(wait),
            None => wait(),
        }
    }

    pub(super) fn interrupted() -> bool {
        false
    }

    /// Runs `work` as this model thread's work in flight (like `interrupt::serving`).
    pub(super) fn as_work<T>(work: impl FnOnce() -> T) -> T {
        WORK.with(|current| *current.borrow_mut() = Some(Work::new()));
        let result = work();
        WORK.with(|current| current.borrow_mut().take());
        result
    }
}

const ITERATIONS: usize = 3000;

/// Runs `scenario` under the random scheduler and under PCT (depth 3).
fn explore(scenario: fn()) {
    shuttle::check_random(scenario, ITERATIONS);
    shuttle::check_pct(scenario, ITERATIONS, 3);
}

fn budget(capacity: u64) -> std::sync::Arc<Budget> {
    Budget::with_limits(
        "memory",
        capacity,
        Duration::ZERO,
        Duration::from_secs(3600),
    )
}

/// Three threads want key 7 at once: one works at a time, the key is busy while any works,
/// and not once all are done. The old gate (removed by whoever finished, whether or not
/// others were queued on it) fails here.
#[test]
fn a_gate_lets_one_worker_at_a_time_and_is_busy_while_it_works() {
    explore(|| {
        let gates = Arc::new(Gates::<u64>::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let (gates, inside) = (gates.clone(), inside.clone());
                thread::spawn(move || {
                    gates.one_at_a_time(7, || {
                        assert_eq!(inside.fetch_add(1, SeqCst), 0, "two workers for key 7");
                        assert!(gates.busy(&7), "key 7 not busy while worked on");
                        thread::yield_now();
                        inside.fetch_sub(1, SeqCst);
                    })
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        assert!(!gates.busy(&7), "the gate outlived its work");
    });
}

/// A cache of charges, given back newest first.
#[derive(Debug, Default)]
struct Entries(Mutex<Vec<Charge>>);

impl Reclaim for Entries {
    fn reclaim_one(&self) -> bool {
        self.0.lock().unwrap().pop().is_some()
    }
}

/// Works that each charge, keep some in a cache and give the rest back: every charge is
/// served (a waiter sleeps only while a work at work holds bytes, whose release wakes it),
/// the budget is never exceeded, and what is given back is all that was charged.
#[test]
fn charges_within_the_budget_are_served_and_accounted() {
    explore(|| {
        let budget = budget(100);
        let cache = std::sync::Arc::new(Entries::default());
        budget.register(&cache);
        let works: Vec<_> = (0..3)
            .map(|_| {
                let (budget, cache) = (budget.clone(), cache.clone());
                thread::spawn(move || {
                    prim::as_work(|| {
                        let held = budget.charge(40).expect("40 of 100 always fit in the end");
                        assert!(budget.used() <= 100);
                        let kept = budget.charge(20).expect("so do 20 more");
                        assert!(budget.used() <= 100);
                        cache.0.lock().unwrap().push(kept);
                        drop(held);
                    })
                })
            })
            .collect();
        for work in works {
            work.join().unwrap();
        }
        let kept: u64 = cache.0.lock().unwrap().iter().map(Charge::bytes).sum();
        assert_eq!(budget.used(), kept);
        cache.0.lock().unwrap().clear();
        assert_eq!(budget.used(), 0);
    });
}

/// Two works each hold what the other waits for: neither can move. Their waits end (no
/// deadlock), at most one is served, and everything is given back.
#[test]
fn works_waiting_on_each_other_fail_instead_of_waiting_for_ever() {
    explore(|| {
        let budget = budget(100);
        let works: Vec<_> = (0..2)
            .map(|_| {
                let budget = budget.clone();
                thread::spawn(move || {
                    prim::as_work(|| {
                        let _held = budget.charge(45).unwrap();
                        match budget.charge(60) {
                            Ok(_) => true,
                            Err(BudgetError::Stuck { bytes: 60, .. }) => false,
                            Err(other) => panic!("{other:?}"),
                        }
                    })
                })
            })
            .collect();
        let served = works
            .into_iter()
            .map(|work| work.join().unwrap())
            .filter(|served| *served)
            .count();
        assert!(served <= 1);
        assert_eq!(budget.used(), 0);
    });
}

/// A charge made outside any work (kept for the whole mount) blocks a waiter that cannot be
/// helped by anything in flight: the wait fails rather than sleeping for ever, unless the
/// keeper gives its charge back first, and the waiter then is served.
#[test]
fn a_wait_blocked_by_what_is_kept_fails_or_is_served_after_a_release() {
    explore(|| {
        let budget = budget(100);
        let kept = budget.charge(70).unwrap();
        let waiter = {
            let budget = budget.clone();
            thread::spawn(move || prim::as_work(|| budget.charge(50).map(|c| c.bytes())))
        };
        drop(kept);
        match waiter.join().unwrap() {
            Ok(bytes) => assert_eq!(bytes, 50),
            Err(BudgetError::Stuck { used: 70, .. }) => {}
            Err(other) => panic!("{other:?}"),
        }
        assert_eq!(budget.used(), 0);
    });
}
