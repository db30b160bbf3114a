//! Capped, jittered exponential backoff for idempotent storage calls.
//!
//! Only calls that can be repeated without changing their meaning go through [`RetryPolicy::run`]:
//! reads, HEADs, and create-only writes (a repeated create either creates the object or finds
//! it and compares its bytes, so a retry after a lost response converges). Compare-and-swap is
//! never retried here: a swap whose response was lost would be reported as a precondition
//! failure on the retry, and the caller, who re-reads on conflict anyway, is better placed to
//! decide.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use crate::storage::{ErrorKind, StorageError};

/// How often and how patiently transient failures are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, the first included; 1 disables retrying.
    pub attempts: u32,
    /// Delay ceiling before the first retry; doubles with every further retry.
    pub base: Duration,
    /// Upper bound of any single delay.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The default policy, adjusted by `SDS_RETRY_ATTEMPTS`, `SDS_RETRY_BASE_MS` and
    /// `SDS_RETRY_CAP_MS` where set to a number (anything else is ignored).
    pub fn from_env() -> RetryPolicy {
        let number = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let mut policy = RetryPolicy::default();
        if let Some(attempts) = number("SDS_RETRY_ATTEMPTS") {
            policy.attempts = u32::try_from(attempts.max(1)).unwrap_or(u32::MAX);
        }
        if let Some(ms) = number("SDS_RETRY_BASE_MS") {
            policy.base = Duration::from_millis(ms);
        }
        if let Some(ms) = number("SDS_RETRY_CAP_MS") {
            policy.cap = Duration::from_millis(ms);
        }
        policy
    }

    /// The ceiling of the delay before retry number `retry` (0 for the first retry):
    /// `min(cap, base * 2^retry)`.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A delay drawn uniformly from the upper half of [`ceiling`](RetryPolicy::ceiling)
    /// ("equal jitter"): clients that failed together spread out, yet every wait is at least
    /// half the nominal backoff.
    pub fn delay(&self, retry: u32) -> Duration {
        let ceiling = self.ceiling(retry);
        let half = ceiling / 2;
        let spread = u64::try_from((ceiling - half).as_nanos()).unwrap_or(u64::MAX);
        let jitter = if spread == 0 {
            0
        } else {
            random_u64() % spread
        };
        half + Duration::from_nanos(jitter)
    }

    /// Runs `op` until it succeeds, fails with a non-transient error, or the attempts are
    /// used up; `on_retry` hears about every failure that is retried.
    pub fn run<T>(
        &self,
        mut op: impl FnMut() -> Result<T, StorageError>,
        mut on_retry: impl FnMut(u32, &StorageError, Duration),
    ) -> Result<T, StorageError> {
        let attempts = self.attempts.max(1);
        let mut retry = 0;
        loop {
            match op() {
                Err(err) if err.kind() == ErrorKind::Transient && retry + 1 < attempts => {
                    let delay = self.delay(retry);
                    on_retry(retry + 1, &err, delay);
                    std::thread::sleep(delay);
                    retry += 1;
                }
                result => return result,
            }
        }
    }
}

/// A random number from the standard library's per-instance hash keys (no extra dependency;
/// jitter needs spread, not cryptographic quality).
pub(super) fn random_u64() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64)
            .unwrap_or(0),
    );
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    fn transient() -> StorageError {
        StorageError::io("x", io::Error::from(io::ErrorKind::TimedOut))
    }

    #[test]
    fn ceilings_double_and_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.ceiling(0), Duration::from_secs(1));
        assert_eq!(policy.ceiling(1), Duration::from_secs(2));
        assert_eq!(policy.ceiling(5), Duration::from_secs(32));
        assert_eq!(policy.ceiling(6), Duration::from_secs(60));
        assert_eq!(policy.ceiling(200), Duration::from_secs(60));
        for retry in 0..10 {
            let d = policy.delay(retry);
            assert!(d >= policy.ceiling(retry) / 2 && d <= policy.ceiling(retry));
        }
    }

    #[test]
    fn retries_transient_only_and_stops_after_the_attempts() {
        let policy = RetryPolicy {
            attempts: 5,
            base: Duration::from_micros(10),
            cap: Duration::from_micros(50),
        };
        let mut calls = 0;
        let result: Result<(), _> = policy.run(
            || {
                calls += 1;
                Err(transient())
            },
            |_, _, _| {},
        );
        assert!(result.is_err());
        assert_eq!(calls, 5);

        let mut calls = 0;
        let result: Result<(), _> = policy.run(
            || {
                calls += 1;
                Err(StorageError::NotFound { object: "x".into() })
            },
            |_, _, _| {},
        );
        assert!(result.unwrap_err().is_not_found());
        assert_eq!(calls, 1);

        let mut calls = 0;
        let result = policy.run(
            || {
                calls += 1;
                if calls < 3 {
                    Err(transient())
                } else {
                    Ok(calls)
                }
            },
            |_, _, _| {},
        );
        assert_eq!(result.unwrap(), 3);
    }
}
