//! How many bytes of records the jobs of `sds create` hold loaded at once.
//!
//! Why: each job loads a shard's records one at a time, whole (an array file is one buffer), so
//! with `--jobs N` and one large record per shard, N records sit in memory together: two jobs
//! importing 1 GiB captures held 2 GiB. The promise is a peak of 1.5x the largest record plus a
//! constant whatever `--jobs` says, so a job takes its record's bytes from one allowance of
//! 1.5x the largest record before loading it and gives them back when the record is written.
//! A record fits alone whatever its size (the allowance is at least the largest record), so
//! waiting always ends: the jobs holding bytes are writing, not waiting. Small records (the
//! common case) load side by side as before.

use std::sync::{Condvar, Mutex};

use crate::sync::lock;

/// Bytes of loaded records shared by the jobs.
#[derive(Debug)]
pub(crate) struct LoadAllowance {
    capacity: u64,
    loaded: Mutex<u64>,
    room: Condvar,
}

/// A loaded record's bytes, given back when dropped (after the record is written).
#[derive(Debug)]
pub(crate) struct Loaded<'a> {
    allowance: &'a LoadAllowance,
    bytes: u64,
}

impl LoadAllowance {
    /// An allowance for records of at most `largest` bytes: 1.5x that.
    pub(crate) fn for_largest(largest: u64) -> LoadAllowance {
        LoadAllowance::new(largest.saturating_add(largest / 2))
    }

    fn new(capacity: u64) -> LoadAllowance {
        LoadAllowance {
            capacity,
            loaded: Mutex::new(0),
            room: Condvar::new(),
        }
    }

    /// Takes `bytes` (the record's size as its source states it), waiting while other jobs'
    /// records leave no room; with none loaded elsewhere it never waits.
    pub(crate) fn take(&self, bytes: u64) -> Loaded<'_> {
        let bytes = bytes.min(self.capacity);
        let mut loaded = lock(&self.loaded);
        while *loaded > 0 && loaded.saturating_add(bytes) > self.capacity {
            loaded = self.room.wait(loaded).unwrap_or_else(|e| e.into_inner());
        }
        *loaded += bytes;
        Loaded {
            allowance: self,
            bytes,
        }
    }
}

impl Drop for Loaded<'_> {
    fn drop(&mut self) {
        let mut loaded = lock(&self.allowance.loaded);
        *loaded = loaded.saturating_sub(self.bytes);
        drop(loaded);
        self.allowance.room.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    /// Four jobs loading records of 100, 60, 60 and 60 bytes under an allowance for a largest
    /// of 100 (150 bytes): never more than 150 loaded at once, and the largest loads alone
    /// when it must.
    #[test]
    fn loaded_bytes_stay_within_the_allowance_and_every_record_loads() {
        let allowance = LoadAllowance::for_largest(100);
        let loaded_now = AtomicU64::new(0);
        let most = AtomicU64::new(0);
        std::thread::scope(|scope| {
            for bytes in [100, 60, 60, 60] {
                let (allowance, loaded_now, most) = (&allowance, &loaded_now, &most);
                scope.spawn(move || {
                    for _ in 0..20 {
                        let _held = allowance.take(bytes);
                        let now = loaded_now.fetch_add(bytes, Ordering::SeqCst) + bytes;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(1));
                        loaded_now.fetch_sub(bytes, Ordering::SeqCst);
                    }
                });
            }
        });
        let most = most.into_inner();
        assert!(most <= 150, "{most} bytes loaded at once");
        assert!(most >= 120, "two records of 60 fit side by side ({most})");
        assert_eq!(*lock(&allowance.loaded), 0);
    }

    #[test]
    fn a_record_larger_than_the_allowance_loads_alone() {
        let allowance = LoadAllowance::for_largest(10);
        let held = allowance.take(1000);
        assert_eq!(*lock(&allowance.loaded), 15);
        drop(held);
        assert_eq!(*lock(&allowance.loaded), 0);
    }
}
