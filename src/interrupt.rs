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

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How often a waiting request looks at its requester.
pub const POLL: Duration = Duration::from_millis(50);

thread_local! {
    /// The thread id of the process this thread is serving, if any.
    static REQUESTER: Cell<Option<u32>> = const { Cell::new(None) };
    /// Whether this thread is counted in [`AT_WORK`].
    static AT_WORK_HERE: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread is counted in [`WAITING`].
    static WAITING_HERE: Cell<bool> = const { Cell::new(false) };
}

/// Threads at work that may hold budget charges and give them back when done: requests being
/// served ([`serving`]) and background work ([`background`]). A request waiting for room in a
/// budget uses it to tell a wait that can end (someone else will give memory back) from one
/// that cannot (what is held belongs to the waiting request itself or to structures kept for
/// the whole mount).
static AT_WORK: AtomicUsize = AtomicUsize::new(0);

/// Threads of [`AT_WORK`] waiting on one another ([`waiting`]): for room in a budget, for a
/// unit another thread is decoding, for an index another thread is building. They give nothing
/// back until something else moves.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// Counts the current thread in [`AT_WORK`] until dropped (once, however deeply nested).
struct AtWork {
    counted: bool,
}

impl AtWork {
    fn enter() -> AtWork {
        let counted = !AT_WORK_HERE.with(|here| here.replace(true));
        if counted {
            AT_WORK.fetch_add(1, Ordering::SeqCst);
        }
        AtWork { counted }
    }
}

impl Drop for AtWork {
    fn drop(&mut self) {
        if self.counted {
            AT_WORK.fetch_sub(1, Ordering::SeqCst);
            AT_WORK_HERE.with(|here| here.set(false));
        }
    }
}

/// Runs background `work` (decoding ahead, building an index, refreshing the catalog) counted
/// as work in flight.
pub fn background<T>(work: impl FnOnce() -> T) -> T {
    let _at_work = AtWork::enter();
    work()
}

/// Runs `wait` (a wait on other threads' work) with this thread, if it is at work, counted as
/// waiting.
pub fn waiting<T>(wait: impl FnOnce() -> T) -> T {
    if !AT_WORK_HERE.with(Cell::get) {
        return wait();
    }
    let counted = !WAITING_HERE.with(|here| here.replace(true));
    if counted {
        WAITING.fetch_add(1, Ordering::SeqCst);
    }
    let result = wait();
    if counted {
        WAITING.fetch_sub(1, Ordering::SeqCst);
        WAITING_HERE.with(|here| here.set(false));
    }
    result
}

/// Threads at work, other than the calling one, that are not waiting: those that can still
/// give memory back. Zero means a wait for room could never end.
pub fn others_at_work() -> usize {
    let here = usize::from(AT_WORK_HERE.with(Cell::get) && !WAITING_HERE.with(Cell::get));
    let waiting = WAITING.load(Ordering::SeqCst);
    AT_WORK
        .load(Ordering::SeqCst)
        .saturating_sub(waiting)
        .saturating_sub(here)
}

/// The requester has a signal pending: the request should end with EINTR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted: the requesting process has a signal pending")]
pub struct Interrupted;

/// Runs `work` on behalf of the thread `tid` (0: unknown, e.g. a requester in another pid
/// namespace, which is then never interrupted).
pub fn serving<T>(tid: u32, work: impl FnOnce() -> T) -> T {
    let _at_work = AtWork::enter();
    let previous = REQUESTER.with(|r| r.replace((tid != 0).then_some(tid)));
    let result = work();
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

    fn this_thread() -> u32 {
        nix::unistd::gettid().as_raw() as u32
    }
}
