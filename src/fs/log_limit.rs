//! Repeated log lines, rate-limited with a count.
//!
//! Why: a hostile or damaged dataset can make every request fail the same way (every row of
//! ten billion claimed records unreadable, every chunk of a shard corrupt), and one log line per
//! failure lets a single `ls` or `find` write gigabytes of log. Each kind of line may appear
//! [`BURST`] times per [`WINDOW`]; the rest are counted, and the count is logged once, as "and
//! N more like this", when the next line of that kind is admitted or when [`flush`] runs (the
//! catalog watcher calls it every metadata TTL, so a count never waits for a new failure).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines of one kind logged per window.
pub const BURST: u32 = 10;
/// The window.
pub const WINDOW: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Window {
    started: Instant,
    logged: u32,
    suppressed: u64,
}

static WINDOWS: Mutex<Option<HashMap<&'static str, Window>>> = Mutex::new(None);

/// Whether a line of `kind` may be logged now. When lines of that kind were suppressed in a
/// window that has ended, their count is logged first.
pub fn admit(kind: &'static str) -> bool {
    admit_at(kind, Instant::now())
}

fn admit_at(kind: &'static str, now: Instant) -> bool {
    let mut guard = crate::sync::lock(&WINDOWS);
    let window = guard
        .get_or_insert_with(HashMap::new)
        .entry(kind)
        .or_insert(Window {
            started: now,
            logged: 0,
            suppressed: 0,
        });
    if now.duration_since(window.started) >= WINDOW {
        report_suppressed(kind, window.suppressed);
        *window = Window {
            started: now,
            logged: 0,
            suppressed: 0,
        };
    }
    if window.logged < BURST {
        window.logged += 1;
        true
    } else {
        window.suppressed += 1;
        false
    }
}

/// Logs the count of every kind whose window has ended with lines suppressed.
pub fn flush() {
    let now = Instant::now();
    let mut guard = crate::sync::lock(&WINDOWS);
    for (kind, window) in guard.get_or_insert_with(HashMap::new).iter_mut() {
        if now.duration_since(window.started) >= WINDOW && window.suppressed > 0 {
            report_suppressed(kind, window.suppressed);
            window.suppressed = 0;
        }
    }
}

fn report_suppressed(kind: &str, suppressed: u64) {
    if suppressed > 0 {
        tracing::warn!(
            kind,
            suppressed,
            "and {} more like this",
            thousands(suppressed)
        );
    }
}

/// `3412` as `3,412`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_admitted_then_lines_are_counted_until_the_window_ends() {
        let start = Instant::now();
        let kind = "test-burst";
        let admitted = (0..25).filter(|_| admit_at(kind, start)).count();
        assert_eq!(admitted, BURST as usize);
        assert!(admit_at(kind, start + WINDOW), "a new window admits again");
    }

    #[test]
    fn counts_read_with_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(3412), "3,412");
        assert_eq!(thousands(10_000_000_000), "10,000,000,000");
    }
}
