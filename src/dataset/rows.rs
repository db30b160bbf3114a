//! Every metadata row in ordinal order, read ahead on a second thread while the caller takes
//! them ([`Dataset::for_each_stored_row`]), for the mount's indexes, which need every row.
//!
//! Why a reader and a taker rather than several threads each reading and parsing: reading a
//! row (its chunk read, hash-checked and decompressed) costs about as much as parsing it, and
//! parsing allocates dozens of small values a row; several threads doing both spent their time
//! waiting on the allocator's lock (the mount runs one malloc arena to keep its memory near
//! its budget) and were no faster than one. The reader allocates little.
//!
//! Bounds: rows travel in blocks of at most [`ROWS_PER_BLOCK`] rows and a sixteenth of the
//! memory budget, each row charged while it lives; [`BLOCKS_AHEAD`] block waits while the
//! caller takes another. A block of large rows therefore never fills the budget by itself.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};

use super::error::DatasetError;
use super::reader::{Dataset, StoredRow};

/// Rows in a block at most.
const ROWS_PER_BLOCK: usize = 512;
/// Blocks read and waiting for the caller at most.
const BLOCKS_AHEAD: usize = 1;

/// One row as read: the row, or why record `.0`'s row could not be read.
pub type RowRead = Result<StoredRow, (u64, DatasetError)>;

impl Dataset {
    /// Calls `each` with every record's row in ordinal order, read ahead on a second thread,
    /// until `each` breaks (its value is returned) or `stop` is set (`None`, as at the end).
    /// A row that cannot be read is passed as its ordinal and error, and the rows after it
    /// still come.
    pub fn for_each_stored_row<B>(
        &self,
        stop: &AtomicBool,
        mut each: impl FnMut(RowRead) -> ControlFlow<B>,
    ) -> Option<B> {
        std::thread::scope(|scope| {
            let (blocks, read) = sync_channel(BLOCKS_AHEAD);
            scope.spawn(move || self.read_row_blocks(stop, blocks));
            for block in read {
                for row in block {
                    if stop.load(Ordering::Relaxed) {
                        return None;
                    }
                    if let ControlFlow::Break(value) = each(row) {
                        return Some(value);
                    }
                }
            }
            None
        })
    }

    /// Reads every row and sends them in blocks, until the taker stops taking or `stop`.
    fn read_row_blocks(&self, stop: &AtomicBool, blocks: SyncSender<Vec<RowRead>>) {
        let block_bytes = self.memory().capacity() / 16;
        let mut ordinal = 0;
        while ordinal < self.len() && !stop.load(Ordering::Relaxed) {
            let mut block = Vec::with_capacity(ROWS_PER_BLOCK);
            let mut bytes = 0u64;
            while ordinal < self.len()
                && block.len() < ROWS_PER_BLOCK
                && bytes < block_bytes
                && !stop.load(Ordering::Relaxed)
            {
                let row = self
                    .locate(ordinal)
                    .and_then(|location| self.stored_row(&location))
                    .map_err(|e| (ordinal, e));
                if let Ok(stored) = &row {
                    bytes = bytes.saturating_add(stored.held_bytes());
                }
                block.push(row);
                ordinal += 1;
            }
            if blocks.send(block).is_err() {
                return;
            }
        }
    }
}
