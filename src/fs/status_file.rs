//! The hidden status file `.sdsfs-status`: a fresh report at every path lookup, each one an
//! immutable file of its own.
//!
//! Why a new inode per lookup: the kernel may open files without asking the daemon (the
//! adapter answers `OPEN` with ENOSYS when the mount leaves opens to the kernel, see
//! [`super::fuse`]), and then caches every file's pages across opens. A report that changed
//! under one inode would be served stale from that cache, or, if its size changed between two
//! `read` calls of one reader, spliced from two reports. Instead the root's entry for the
//! status file has a zero TTL, so every path lookup of it reaches the daemon, which takes the
//! report then and gives it an inode number never used before. That file never changes: its
//! size is exact, any cache of it is correct, and a reader sees one consistent report however
//! it splits its reads, whether or not opens reach the daemon.
//!
//! Reports are dropped when the kernel forgets their inode, and at most `MAX_HELD` are held
//! in any case (an inode older than that reads as stale).
//!
//! Who may read it: a report holds absolute paths and the daemon's pid, the mounting user's
//! business only, and a mount with `allow_other` admits every user. The file is shown with
//! mode 0400 owned by the mounting user, but the mount does not use `default_permissions`
//! (the kernel checks no modes; the tree's modes are all read-only anyway), so the daemon
//! itself refuses any other user's lookup, attributes, open and read with EACCES
//! ([`StatusReader`]). Root is admitted as it would be by the mode.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use bytes::Bytes;

use super::inode::ADAPTER_INODES;
use crate::sync::lock;

/// The user who may read the status reports: the mounting user (the daemon's real uid and
/// gid, whatever owner `--uid`/`--gid` show for the tree), and root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusReader {
    pub uid: u32,
    pub gid: u32,
}

impl StatusReader {
    /// The user running this process.
    pub fn mounting_user() -> StatusReader {
        let (uid, gid) = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        StatusReader { uid, gid }
    }

    /// Whether a request from `uid` may see the status file.
    pub fn admits(&self, uid: u32) -> bool {
        uid == self.uid || uid == 0
    }
}

/// Reports held at most: more than the kernel keeps of a name whose entry expires at once.
const MAX_HELD: usize = 64;

/// One report: its JSON text, and when it was taken (the file's times).
#[derive(Debug, Clone)]
pub struct Report {
    pub text: Bytes,
    pub taken: SystemTime,
}

/// The reports handed out, by inode number.
#[derive(Debug, Default)]
pub struct StatusReports {
    issued: AtomicU64,
    held: Mutex<BTreeMap<u64, Report>>,
}

impl StatusReports {
    /// Whether `ino` is the number of a status report.
    pub fn is_report(ino: u64) -> bool {
        ino & ADAPTER_INODES == ADAPTER_INODES
    }

    /// Holds `text`, taken now, under a new inode number, which it returns.
    pub fn hold(&self, text: Bytes) -> u64 {
        let ino = ADAPTER_INODES | self.issued.fetch_add(1, Ordering::Relaxed);
        let report = Report {
            text,
            taken: SystemTime::now(),
        };
        let mut held = lock(&self.held);
        held.insert(ino, report);
        while held.len() > MAX_HELD {
            held.pop_first();
        }
        ino
    }

    /// The report of `ino`, if still held.
    pub fn get(&self, ino: u64) -> Option<Report> {
        lock(&self.held).get(&ino).cloned()
    }

    /// The kernel forgot `ino`: nothing will read it again.
    pub fn forget(&self, ino: u64) {
        lock(&self.held).remove(&ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::inode::Ino;

    #[test]
    fn every_report_gets_a_number_of_its_own_outside_the_tree() {
        let reports = StatusReports::default();
        let a = reports.hold(Bytes::from_static(b"one"));
        let b = reports.hold(Bytes::from_static(b"two"));
        assert_ne!(a, b);
        for ino in [a, b] {
            assert!(StatusReports::is_report(ino));
            assert_eq!(Ino::decode(ino), None, "{ino:#x} is a tree inode");
        }
        assert!(!StatusReports::is_report(Ino::Root.encode()));
        assert!(!StatusReports::is_report(Ino::RecordDir(5).encode()));
        assert_eq!(
            reports.get(a).map(|r| r.text),
            Some(Bytes::from_static(b"one"))
        );
        assert_eq!(
            reports.get(b).map(|r| r.text),
            Some(Bytes::from_static(b"two"))
        );
    }

    #[test]
    fn only_the_mounting_user_and_root_may_read_reports() {
        let reader = StatusReader {
            uid: 1000,
            gid: 1000,
        };
        assert!(reader.admits(1000));
        assert!(reader.admits(0));
        assert!(!reader.admits(65534));
        assert!(!reader.admits(1001));
    }

    #[test]
    fn forgotten_and_oldest_reports_are_dropped() {
        let reports = StatusReports::default();
        let first = reports.hold(Bytes::from_static(b"first"));
        let second = reports.hold(Bytes::from_static(b"second"));
        reports.forget(second);
        assert!(reports.get(second).is_none());
        assert!(reports.get(first).is_some());
        let mut last = 0;
        for _ in 0..MAX_HELD {
            last = reports.hold(Bytes::from_static(b"more"));
        }
        assert!(
            reports.get(first).is_none(),
            "the oldest goes past MAX_HELD"
        );
        assert!(reports.get(last).is_some());
        assert_eq!(lock(&reports.held).len(), MAX_HELD);
    }
}
