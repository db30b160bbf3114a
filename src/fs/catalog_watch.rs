//! The annotation catalog watcher: keeps the kernel's caches of the overlay fresh by telling
//! the kernel what changed, so the overlay's entries can be cached as long as the rest.
//!
//! Why: the overlay is the one mutable part of the tree, and it has a directory in every record
//! (`records/<n>/annotations`). Cached for the metadata TTL only, each of those directories
//! costs a `LOOKUP` (its entry expired) in every walk after the TTL: 10,000 requests in a walk of
//! 10,000 records, where the rest of the tree costs none. So while a watcher runs, the adapter
//! gives the overlay the immutable TTL, and the watcher re-reads the catalog once per metadata
//! TTL (one read of the catalog pointer while it is unchanged) and, when the sets shown change,
//! invalidates through `/dev/fuse` notifications what the kernel may hold:
//! - the attributes and cached listing of `annotations/` and of every `records/<n>/annotations`
//!   the kernel was given (recorded in [`KnownRecords`] by the adapter: at most one bit per
//!   record, so a million-record mount needs 125 KiB);
//! - the entries of the sets that disappeared or were published again under the same name, in
//!   each of those directories (which drops everything the kernel cached below them).
//!
//! A request answered from the old catalog while the new one was being read could put an old
//! entry back after the invalidation, so each change is invalidated twice, the second time one
//! tick later. A newly published set thus shows within one metadata TTL of its publication, as
//! without the watcher.

use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::inode::Ino;
use super::namespace::Namespace;
use super::overlay::Visible;

/// The ordinals whose `records/<n>/annotations` directory the kernel was given.
#[derive(Debug)]
pub struct KnownRecords {
    records: u64,
    words: Vec<AtomicU64>,
}

impl KnownRecords {
    pub fn new(records: u64) -> KnownRecords {
        let words = usize::try_from(records.div_ceil(64)).unwrap_or(0);
        KnownRecords {
            records,
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Records that the kernel was given `records/<ordinal>/annotations`.
    pub fn mark(&self, ordinal: u64) {
        if ordinal >= self.records {
            return;
        }
        let Ok(word) = usize::try_from(ordinal / 64) else {
            return;
        };
        if let Some(word) = self.words.get(word) {
            word.fetch_or(1 << (ordinal % 64), Ordering::Relaxed);
        }
    }

    /// Every ordinal marked so far, in order.
    pub fn marked(&self) -> Vec<u64> {
        let mut out = Vec::new();
        for (index, word) in self.words.iter().enumerate() {
            let mut bits = word.load(Ordering::Relaxed);
            while bits != 0 {
                out.push(index as u64 * 64 + u64::from(bits.trailing_zeros()));
                bits &= bits - 1;
            }
        }
        out
    }
}

/// The names of the sets shown in `before` that `after` does not show, or shows with another
/// root: the entries to drop. (Sets that only appeared need no entry dropped: their names were
/// never cached, and the listings are invalidated anyway.)
pub fn dropped_sets(before: &Visible, after: &Visible) -> Vec<String> {
    before
        .sets
        .iter()
        .filter(|old| {
            after
                .by_name(&old.name)
                .is_none_or(|new| new.set.reference() != old.set.reference())
        })
        .map(|old| old.name.clone())
        .collect()
}

/// What the watcher needs of the kernel: `fuser::Notifier` in a mount, a recorder in tests.
pub trait Invalidate {
    /// Drops the attributes and cached data (for a directory, its listing) of `ino`.
    fn inode(&self, ino: u64) -> std::io::Result<()>;
    /// Drops the entry `name` of directory `parent`, and everything cached below it.
    fn entry(&self, parent: u64, name: &str) -> std::io::Result<()>;
}

impl Invalidate for fuser::Notifier {
    fn inode(&self, ino: u64) -> std::io::Result<()> {
        self.inval_inode(fuser::INodeNo(ino), 0, 0)
    }

    fn entry(&self, parent: u64, name: &str) -> std::io::Result<()> {
        self.inval_entry(fuser::INodeNo(parent), OsStr::new(name))
    }
}

/// Invalidates the overlay's directories the kernel may hold, and the `dropped` sets' entries
/// in them. An inode the kernel has forgotten answers ENOENT, which is not an error here; any
/// other failure (the mount is gone) is returned.
pub fn invalidate(
    kernel: &dyn Invalidate,
    known: &KnownRecords,
    dropped: &[String],
) -> std::io::Result<()> {
    let directories = std::iter::once(Ino::Annotations.encode()).chain(
        known
            .marked()
            .into_iter()
            .map(|o| Ino::RecordAnnotations(o).encode()),
    );
    for directory in directories {
        forgotten_is_fine(kernel.inode(directory))?;
        for name in dropped {
            forgotten_is_fine(kernel.entry(directory, name))?;
        }
    }
    Ok(())
}

fn forgotten_is_fine(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        other => other,
    }
}

/// Runs the watcher until the kernel refuses a notification (the mount is gone): every
/// metadata TTL, the catalog is re-read and a change invalidated (twice, see the module doc).
pub fn watch(namespace: Arc<Namespace>, known: Arc<KnownRecords>, kernel: Box<dyn Invalidate>) {
    let tick = namespace.metadata_ttl().max(Duration::from_millis(100));
    let mut shown = namespace.refresh_annotations();
    let mut repeat: Option<Vec<String>> = None;
    loop {
        std::thread::sleep(tick);
        let now = namespace.refresh_annotations();
        let mut dropped = repeat.take();
        if !Arc::ptr_eq(&shown, &now) {
            let names = dropped_sets(&shown, &now);
            tracing::info!(dropped = ?names, "annotation catalog changed: kernel caches invalidated");
            dropped = Some(names.clone());
            repeat = Some(names);
            shown = now;
        }
        if let Some(names) = dropped {
            if let Err(error) = invalidate(kernel.as_ref(), &known, &names) {
                tracing::debug!(%error, "catalog watcher stops: the kernel refused a notification");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn known_records_are_listed_in_order_once() {
        let known = KnownRecords::new(200);
        for ordinal in [130, 0, 63, 64, 130, 199] {
            known.mark(ordinal);
        }
        known.mark(200); // past the end: ignored
        assert_eq!(known.marked(), vec![0, 63, 64, 130, 199]);
    }

    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<String>>,
        forgotten: u64,
    }

    impl Invalidate for Recorder {
        fn inode(&self, ino: u64) -> std::io::Result<()> {
            self.calls.lock().unwrap().push(format!("inode {ino}"));
            if ino == self.forgotten {
                return Err(std::io::Error::from_raw_os_error(libc::ENOENT));
            }
            Ok(())
        }

        fn entry(&self, parent: u64, name: &str) -> std::io::Result<()> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("entry {parent} {name}"));
            Ok(())
        }
    }

    #[test]
    fn every_known_directory_and_its_dropped_entries_are_invalidated() {
        let known = KnownRecords::new(10);
        known.mark(7);
        known.mark(2);
        let two = Ino::RecordAnnotations(2).encode();
        let seven = Ino::RecordAnnotations(7).encode();
        let top = Ino::Annotations.encode();
        let kernel = Recorder {
            forgotten: two,
            ..Recorder::default()
        };
        invalidate(&kernel, &known, &["old".to_string()]).unwrap();
        assert_eq!(
            *kernel.calls.lock().unwrap(),
            vec![
                format!("inode {top}"),
                format!("entry {top} old"),
                format!("inode {two}"),
                format!("entry {two} old"),
                format!("inode {seven}"),
                format!("entry {seven} old"),
            ]
        );
    }

    #[test]
    fn a_refused_notification_stops_the_invalidation() {
        struct Gone;
        impl Invalidate for Gone {
            fn inode(&self, _: u64) -> std::io::Result<()> {
                Err(std::io::Error::from_raw_os_error(libc::ENOTCONN))
            }
            fn entry(&self, _: u64, _: &str) -> std::io::Result<()> {
                Ok(())
            }
        }
        let known = KnownRecords::new(1);
        assert!(invalidate(&Gone, &known, &[]).is_err());
    }
}
