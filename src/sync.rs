//! Locking that survives a panic elsewhere.
//!
//! Why poisoned locks are taken over: every structure behind these mutexes (caches, counters,
//! maps of immutable entries) stays consistent between statements, so a panic in one request
//! must not turn every later request into another panic. The mount stays up instead.

use std::sync::{Mutex, MutexGuard};

/// `mutex`, locked, whether or not a holder panicked.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
