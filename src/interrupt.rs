//! Requests that wait, ended by the requester's signals. A helper below every layer (it uses
//! nothing else in the crate): the mount's adapter says whom a thread serves, and whatever waits
//! on its behalf (a memory budget, an index build) asks.
//!
//! Why not `FUSE_INTERRUPT`: `fuser` 0.18 answers it with ENOSYS (upstream cberner/fuser#14),
//! after which the kernel never sends it again, and a request the daemon has taken must then be
//! answered before the process that made it can die: Ctrl-C, `timeout` and even SIGTERM leave
//! it in D state until the reply. So no request may work or wait for long without looking at
//! its requester. The kernel tells the daemon who asked (the thread id in every request
//! header); `/proc/<tid>/status` tells whether that thread has a signal pending that it does
//! not block. That is the condition under which the kernel itself would interrupt the wait
//! (and a fatal signal is always pending that way: the kernel queues SIGKILL to every thread of
//! a process a fatal signal is killing), so a request that watches it ends when the kernel
//! would have asked it to.
//!
//! The adapter runs each request inside [`serving`]; core code that may wait (a listing
//! waiting for an index built from every row, a decode waiting for memory) calls
//! [`check`] now and then, which fails with [`Interrupted`] once the requester has a signal
//! pending. Outside a request (tests, `sds` commands) there is no requester and nothing is
//! ever interrupted.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often a waiting request looks at its requester.
pub const POLL: Duration = Duration::from_millis(50);

thread_local! {
    /// The thread id of the process this thread is serving, if any.
    static REQUESTER: Cell<Option<u32>> = const { Cell::new(None) };
    /// The work this thread is doing, if any.
    static WORK: RefCell<Option<Arc<Work>>> = const { RefCell::new(None) };
}

/// One piece of work in flight: a request served ([`serving`]) or background work
/// ([`background`]). A budget tags each charge with the work that made it, and learns from the
/// work whether it is waiting on others (so what it holds cannot be given back until it moves
/// on) and whether it is over (so what it made and left charged is kept by some structure).
/// That is all a budget needs to tell a wait for room that can end from one that cannot; no
/// count of threads has to be maintained by anyone.
#[derive(Debug)]
pub struct Work {
    id: u64,
    /// Waits under way ([`waiting`]), nested or not.
    waits: AtomicUsize,
}

impl Work {
    /// A new piece of work, not waiting.
    pub fn new() -> Arc<Work> {
        /// Only a source of distinct ids (an address could be reused by a later work).
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Arc::new(Work {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            waits: AtomicUsize::new(0),
        })
    }

    /// Distinct for every work of the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether the work is waiting on others' work.
    pub fn is_waiting(&self) -> bool {
        self.waits.load(Ordering::SeqCst) > 0
    }

    /// Runs `wait` with the work counted as waiting (also when `wait` panics).
    pub fn waiting<T>(&self, wait: impl FnOnce() -> T) -> T {
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.waits.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waits);
        wait()
    }
}

/// Runs `work` as the current thread's work: a new [`Work`] unless the thread is doing one
/// already (nested scopes are one work), forgotten afterwards (also on a panic).
fn as_work<T>(work: impl FnOnce() -> T) -> T {
    struct Forget;
    impl Drop for Forget {
        fn drop(&mut self) {
            WORK.with(|current| current.borrow_mut().take());
        }
    }
    if current_work().is_some() {
        return work();
    }
    WORK.with(|current| *current.borrow_mut() = Some(Work::new()));
    let _forget = Forget;
    work()
}

/// The work this thread is doing, if any (outside [`serving`] and [`background`]: none, and
/// what the thread charges counts as kept, like a structure made for the whole mount).
pub fn current_work() -> Option<Arc<Work>> {
    WORK.with(|current| current.borrow().clone())
}

/// Runs background `work` (decoding ahead, building an index, refreshing the catalog) as work
/// in flight.
pub fn background<T>(work: impl FnOnce() -> T) -> T {
    as_work(work)
}

/// Runs `wait` (a wait on other threads' work: for room in a budget, for a unit another
/// thread is decoding, for an index another thread is building) with this thread's work, if
/// any, counted as waiting: it gives nothing back until something else moves.
pub fn waiting<T>(wait: impl FnOnce() -> T) -> T {
    match current_work() {
        Some(work) => work.waiting(wait),
        None => wait(),
    }
}

/// The requester has a signal pending: the request should end with EINTR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted: the requesting process has a signal pending")]
pub struct Interrupted;

/// Runs `work` on behalf of the thread `tid` (0: unknown, e.g. a requester in another pid
/// namespace, which is then never interrupted).
pub fn serving<T>(tid: u32, work: impl FnOnce() -> T) -> T {
    let previous = REQUESTER.with(|r| r.replace((tid != 0).then_some(tid)));
    let result = as_work(work);
    REQUESTER.with(|r| r.set(previous));
    result
}

/// Fails once the requester this thread serves has an unblocked signal pending (or is gone).
pub fn check() -> Result<(), Interrupted> {
    match REQUESTER.with(Cell::get) {
        Some(tid) if signal_pending(tid) => Err(Interrupted),
        _ => Ok(()),
    }
}

/// Whether thread `tid` has a pending signal it does not block, or no longer exists.
fn signal_pending(tid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{tid}/status")) {
        Ok(status) => pending_unblocked(&status),
        Err(_) => true,
    }
}

/// From the text of `/proc/<tid>/status`: (thread-pending | process-pending) & !blocked.
fn pending_unblocked(status: &str) -> bool {
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .unwrap_or(0)
    };
    (mask("SigPnd:") | mask("ShdPnd:")) & !mask("SigBlk:") != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(pending: &str, shared: &str, blocked: &str) -> String {
        format!("Name:\tls\nSigPnd:\t{pending}\nShdPnd:\t{shared}\nSigBlk:\t{blocked}\n")
    }

    #[test]
    fn only_an_unblocked_pending_signal_counts() {
        let none = "0000000000000000";
        // SIGINT is bit 1 (signal 2), SIGKILL bit 8 (signal 9).
        assert!(!pending_unblocked(&status(none, none, none)));
        assert!(pending_unblocked(&status("0000000000000100", none, none)));
        assert!(pending_unblocked(&status(none, "0000000000000002", none)));
        assert!(!pending_unblocked(&status(
            none,
            "0000000000000002",
            "0000000000000002"
        )));
    }

    #[test]
    fn a_thread_without_a_requester_or_with_a_calm_one_is_not_interrupted() {
        assert_eq!(check(), Ok(()));
        let me = this_thread();
        assert_eq!(serving(me, check), Ok(()));
        // A thread id that cannot exist: the requester is gone.
        assert_eq!(serving(u32::MAX - 1, check), Err(Interrupted));
        assert_eq!(
            check(),
            Ok(()),
            "the requester is forgotten after the request"
        );
    }

    #[test]
    fn nested_scopes_are_one_work_that_waits_while_a_wait_runs_and_ends_with_the_scope() {
        assert!(current_work().is_none(), "no work outside a scope");
        let work = background(|| {
            let outer = current_work().expect("a work in a scope");
            let inner = serving(0, || current_work().expect("still one"));
            assert!(
                Arc::ptr_eq(&outer, &inner),
                "a nested scope is the same work"
            );
            assert!(!outer.is_waiting());
            waiting(|| assert!(outer.is_waiting()));
            assert!(!outer.is_waiting(), "waiting only while the wait runs");
            Arc::downgrade(&outer)
        });
        assert!(work.upgrade().is_none(), "the work is over with its scope");
        assert!(current_work().is_none());
        let (first, second) = (serving(0, current_work), serving(0, current_work));
        assert_ne!(
            first.map(|w| w.id()),
            second.map(|w| w.id()),
            "a work per request"
        );
    }

    fn this_thread() -> u32 {
        nix::unistd::gettid().as_raw() as u32
    }
}
