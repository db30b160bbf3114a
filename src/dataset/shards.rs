//! Open shard readers, shared by all threads and kept in an LRU.
//!
//! Opening a shard costs one metadata request (its size, compared with the reference's
//! `stored_bytes`: a mismatch is a corruption error for that shard only) and two small reads
//! (postscript block and footer chunk). After that each record read is one ranged read of the
//! chunk that holds it. `record_indices` are checked against the shard's record count here,
//! the first moment the count is known.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use lru::LruCache;

use super::error::DatasetError;
use crate::arrayrecord::{ArrayRecordReader, ByteSource};
use crate::format::documents::{Reference, ShardEntry};
use crate::format::path::RelPath;
use crate::storage::{ObjectReader, ObjectStore};

/// The ArrayRecord layer reads through storage with positional reads.
impl ByteSource for ObjectReader {
    fn size(&self) -> std::io::Result<u64> {
        ObjectReader::size(self)
    }

    fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Bytes> {
        ObjectReader::read_at(self, offset, len)
    }
}

/// An open shard.
pub type ShardReader = ArrayRecordReader<ObjectReader>;

#[derive(Debug)]
pub(crate) struct ShardCache {
    open: Mutex<LruCache<RelPath, Arc<ShardReader>>>,
}

impl ShardCache {
    pub(crate) fn new(capacity: usize) -> ShardCache {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        ShardCache {
            open: Mutex::new(LruCache::new(capacity)),
        }
    }

    /// The open reader of the shard `reference` points at, checked against `entry`.
    pub(crate) fn reader(
        &self,
        store: &Arc<dyn ObjectStore>,
        reference: &Reference,
        entry: &ShardEntry,
    ) -> Result<Arc<ShardReader>, DatasetError> {
        if let Some(reader) = self.lock().get(&reference.path) {
            return Ok(reader.clone());
        }
        let reader = Arc::new(open_shard(store, reference, entry)?);
        self.lock().put(reference.path.clone(), reader.clone());
        Ok(reader)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<RelPath, Arc<ShardReader>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn open_shard(
    store: &Arc<dyn ObjectStore>,
    reference: &Reference,
    entry: &ShardEntry,
) -> Result<ShardReader, DatasetError> {
    let object = store.describe(&reference.path);
    let source = ObjectReader::open(store.clone(), reference.path.clone(), reference.generation)?;
    let size = source
        .size()
        .map_err(|e| DatasetError::io(object.clone(), e))?;
    if size != reference.stored_bytes {
        return Err(DatasetError::SizeMismatch {
            object,
            expected: reference.stored_bytes,
            actual: size,
        });
    }
    let reader =
        ArrayRecordReader::open(source, object.clone()).map_err(|source| DatasetError::Shard {
            object: object.clone(),
            source,
        })?;
    check_entry_fits(&reader, entry, &object)?;
    Ok(reader)
}

/// Every record the entry addresses must exist in the shard.
fn check_entry_fits(
    reader: &ShardReader,
    entry: &ShardEntry,
    object: &str,
) -> Result<(), DatasetError> {
    let len = reader.len();
    match &entry.record_indices {
        None if entry.record_count > len => Err(DatasetError::corrupt(
            object,
            format!(
                "the shard entry addresses {} records but the shard holds {len}",
                entry.record_count
            ),
        )),
        Some(indices) => match indices.iter().position(|i| *i >= len) {
            Some(k) => Err(DatasetError::corrupt(
                object,
                format!(
                    "record_indices[{k}] = {} is out of range: the shard holds {len} records",
                    indices[k]
                ),
            )),
            None => Ok(()),
        },
        None => Ok(()),
    }
}
