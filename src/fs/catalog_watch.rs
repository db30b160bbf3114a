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
//!   the kernel was given (recorded in [`KnownRecords`] by the adapter: one bit per record
//!   visited, in blocks allocated as records are visited, never sized from the record count);
//! - the entries of the sets that disappeared or were published again under the same name, in
//!   each of those directories (which drops everything the kernel cached below them).
//! - the attributes and pages of `columns/labels.jsonl` and `columns/labels.arrow`, whose rows
//!   include the shown sets' boxes.
//!
//! A request answered from the old catalog while the new one was being read could put an old
//! entry back after the invalidation, so each change is invalidated twice, the second time one
//! tick later. A newly published set thus shows within one metadata TTL of its publication, as
//! without the watcher.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::inode::Ino;
use super::namespace::Namespace;
use super::overlay::Visible;

/// The ordinals whose `records/<n>/annotations` directory the kernel was given, as a sparse
/// bitmap: blocks of [`BLOCK_ORDINALS`] bits allocated as records are visited, at most
/// [`MAX_BLOCKS`] of them (4 MiB, a walk of 33 million records in order). Nothing is sized
/// from the record count, which is a claim of the snapshot's. An ordinal that finds no room is
/// not tracked: the adapter gives that record's overlay entries the metadata TTL instead of
/// the immutable one, so they stay fresh without an invalidation.
#[derive(Debug)]
pub struct KnownRecords {
    records: u64,
    blocks: Mutex<BTreeMap<u64, Box<[u64; BLOCK_WORDS]>>>,
}

const BLOCK_WORDS: usize = 64;
/// Ordinals per block.
pub const BLOCK_ORDINALS: u64 = 64 * BLOCK_WORDS as u64;
/// Blocks kept at most.
pub const MAX_BLOCKS: usize = 8192;

impl KnownRecords {
    pub fn new(records: u64) -> KnownRecords {
        KnownRecords {
            records,
            blocks: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Box<[u64; BLOCK_WORDS]>>> {
        crate::sync::lock(&self.blocks)
    }

    /// Records that the kernel was given `records/<ordinal>/annotations`; false when the
    /// ordinal cannot be tracked (past the end, or no room left).
    pub fn mark(&self, ordinal: u64) -> bool {
        if ordinal >= self.records {
            return false;
        }
        let (block, word, bit) = split(ordinal);
        let mut blocks = self.lock();
        if !blocks.contains_key(&block) && blocks.len() >= MAX_BLOCKS {
            return false;
        }
        blocks
            .entry(block)
            .or_insert_with(|| Box::new([0; BLOCK_WORDS]))[word] |= bit;
        true
    }

    /// Whether `ordinal` was marked.
    pub fn contains(&self, ordinal: u64) -> bool {
        let (block, word, bit) = split(ordinal);
        self.lock()
            .get(&block)
            .is_some_and(|words| words[word] & bit != 0)
    }

    /// Every ordinal marked so far, in order.
    pub fn marked(&self) -> Vec<u64> {
        let mut out = Vec::new();
        for (block, words) in self.lock().iter() {
            for (index, word) in words.iter().enumerate() {
                let mut bits = *word;
                while bits != 0 {
                    out.push(
                        block * BLOCK_ORDINALS
                            + index as u64 * 64
                            + u64::from(bits.trailing_zeros()),
                    );
                    bits &= bits - 1;
                }
            }
        }
        out
    }
}

/// An ordinal's block, word within the block and bit within the word.
fn split(ordinal: u64) -> (u64, usize, u64) {
    let block = ordinal / BLOCK_ORDINALS;
    let within = ordinal % BLOCK_ORDINALS;
    (block, (within / 64) as usize, 1 << (within % 64))
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

/// Invalidates the overlay's directories the kernel may hold, the `dropped` sets' entries in
/// them, and the `tables` (files whose contents follow the catalog: the label tables of
/// `columns/`). An inode the kernel has forgotten answers ENOENT, which is not an error here;
/// any other failure (the mount is gone) is returned.
pub fn invalidate(
    kernel: &dyn Invalidate,
    known: &KnownRecords,
    dropped: &[String],
    tables: &[u64],
) -> std::io::Result<()> {
    for &table in tables {
        forgotten_is_fine(kernel.inode(table))?;
    }
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
    // Background work like every later tick: the read's charges (a revision's parse can be
    // hundreds of MiB) are then work in flight, which requests waiting for room wait for.
    let mut shown = crate::interrupt::background(|| namespace.refresh_annotations());
    let mut repeat: Option<Vec<String>> = None;
    loop {
        std::thread::sleep(tick);
        super::log_limit::flush();
        // A panic in a refresh skips that tick: a watcher gone would leave the kernel's
        // copy of the overlay (cached as immutable) stale for the life of the mount.
        let refreshed = super::panics::catch(|| {
            crate::interrupt::background(|| namespace.refresh_annotations())
        });
        let now = match refreshed {
            Ok(now) => now,
            Err(caught) => {
                tracing::error!(panic = %caught, "annotation catalog refresh panicked");
                continue;
            }
        };
        let mut dropped = repeat.take();
        if !Arc::ptr_eq(&shown, &now) {
            let names = dropped_sets(&shown, &now);
            // A count and the first name: up to 256 names of up to 255 bytes would make a line
            // of 64 KiB.
            tracing::info!(dropped = names.len(), first = ?names.first(), "annotation catalog changed: kernel caches invalidated");
            dropped = Some(names.clone());
            repeat = Some(names);
            shown = now;
        }
        if let Some(names) = dropped {
            let tables = namespace.label_table_inodes();
            if let Err(error) = invalidate(kernel.as_ref(), &known, &names, &tables) {
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
        assert!(!known.mark(200), "past the end: ignored");
        assert_eq!(known.marked(), vec![0, 63, 64, 130, 199]);
        assert!(known.contains(130) && !known.contains(131));
    }

    #[test]
    fn a_claimed_count_of_a_quadrillion_allocates_nothing_up_front_and_room_is_bounded() {
        let known = KnownRecords::new(1_000_000_000_000_000);
        assert!(known.mark(999_999_999_999_999));
        assert_eq!(known.marked(), vec![999_999_999_999_999]);
        // One ordinal in each of more blocks than are kept: the rest are refused.
        let tracked = (0..MAX_BLOCKS as u64 + 10)
            .filter(|block| known.mark(block * BLOCK_ORDINALS))
            .count();
        assert_eq!(
            tracked,
            MAX_BLOCKS - 1,
            "one block was taken by the first mark"
        );
        assert!(!known.contains((MAX_BLOCKS as u64 + 5) * BLOCK_ORDINALS));
        assert!(
            known.mark(1),
            "an ordinal of a block already kept still fits"
        );
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
        invalidate(&kernel, &known, &["old".to_string()], &[5]).unwrap();
        assert_eq!(
            *kernel.calls.lock().unwrap(),
            vec![
                "inode 5".to_string(),
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
        assert!(invalidate(&Gone, &known, &[], &[]).is_err());
    }
}
