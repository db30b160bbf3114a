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
use std::time::Duration;

/// How often a waiting request looks at its requester.
pub const POLL: Duration = Duration::from_millis(50);

thread_local! {
    /// The thread id of the process this thread is serving, if any.
    static REQUESTER: Cell<Option<u32>> = const { Cell::new(None) };
}

/// The requester has a signal pending: the request should end with EINTR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted: the requesting process has a signal pending")]
pub struct Interrupted;

/// Runs `work` on behalf of the thread `tid` (0: unknown, e.g. a requester in another pid
/// namespace, which is then never interrupted).
pub fn serving<T>(tid: u32, work: impl FnOnce() -> T) -> T {
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
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u32 }
    }
}
