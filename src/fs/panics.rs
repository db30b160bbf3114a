//! Panics in the mount's threads: caught where a request or a background job starts, answered
//! (EIO, a failed build) and logged as one line.
//!
//! Why: a panic that unwinds out of a FUSE handler ends that fuser worker thread for good (fuser
//! 0.18 does not restart them), and once every worker is gone each file of the mount answers
//! ENOTCONN to every user; a panic in a background builder leaves its waiters waiting. One
//! defect found by one record must cost one request, not the mount.
//!
//! One line per panic: the process's panic hook ([`install_hook`]) hands the message and place
//! of a panic caught by [`catch`] to the catch site, which logs it with what it knows (the
//! operation, the inode's record and object); a panic elsewhere is logged by the hook itself.
//! The default hook (a multi-line message on stderr, outside the log's format and escaping) is
//! replaced. A panic's text may come from a dataset (a formatted value), so it is logged as a
//! field, which the daemon's log writer escapes like every other field (`daemon::log`).

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, PanicHookInfo};

thread_local! {
    /// Whether this thread runs inside [`catch`]: its panics are logged by the catch site.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    /// The last panic caught on this thread: its message and where it happened.
    static CAUGHT: RefCell<Option<Caught>> = const { RefCell::new(None) };
}

/// What a panic said, and where.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caught {
    pub message: String,
    pub location: String,
}

impl std::fmt::Display for Caught {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {}", self.message, self.location)
    }
}

/// Runs `work`; a panic in it is stopped here and returned (message and place) instead of
/// unwinding further. `work` is treated as unwind-safe: every structure it shares with other
/// threads takes over a lock poisoned by a panic (`crate::sync::lock`) and holds no
/// invariant across a panic that a later request relies on beyond what a failed request leaves.
pub fn catch<T>(work: impl FnOnce() -> T) -> Result<T, Caught> {
    let outer = CATCHING.with(|c| c.replace(true));
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(work));
    CATCHING.with(|c| c.set(outer));
    outcome.map_err(|payload| {
        CAUGHT
            .with(|c| c.borrow_mut().take())
            .unwrap_or_else(|| Caught {
                message: payload_text(payload.as_ref()),
                location: "(unknown)".into(),
            })
    })
}

/// Replaces the default panic hook: a panic inside [`catch`] is kept for its catch site to log;
/// any other is logged here, as one error line naming the thread.
pub fn install_hook() {
    std::panic::set_hook(Box::new(|info| {
        let caught = describe(info);
        if CATCHING.with(Cell::get) {
            CAUGHT.with(|c| *c.borrow_mut() = Some(caught));
            return;
        }
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        tracing::error!(thread = name, panic = %caught, "thread panicked");
    }));
}

fn describe(info: &PanicHookInfo<'_>) -> Caught {
    Caught {
        message: payload_text(info.payload()),
        location: info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_else(|| "(unknown)".into()),
    }
}

/// The text of a panic's payload (`panic!` with a literal or a formatted message).
fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "(a panic without a message)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_returned_with_its_message_and_work_that_ends_is_returned_as_is() {
        assert_eq!(catch(|| 7), Ok(7));
        let caught = catch(|| -> u8 { panic!("value {} too wide", 1e100) }).unwrap_err();
        assert_eq!(caught.message, format!("value {} too wide", 1e100));
        let nested = catch(|| catch(|| panic!("inner")).map_err(|c| c.message));
        assert_eq!(nested, Ok(Err("inner".to_string())));
    }
}
