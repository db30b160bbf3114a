//! Open shard readers, shared by all threads and kept in an LRU.
//!
//! Opening a shard costs one metadata request (its size, compared with the reference's
//! `stored_bytes` once per shard: a mismatch is a corruption error for that shard only; not
//! for absolute references, which name another dataset's objects, as in the library) and two
//! small reads (postscript block and footer chunk). After that each record read is one ranged read of the
//! chunk that holds it.
//!
//! A shard may be shared by several entries (views with `record_indices`), so a reader is keyed
//! by its path alone and checked against nothing entry-specific when opened. Whether a record's
//! physical index exists is checked per record ([`check_in_shard`]): an out-of-range
//! `record_indices` entry must fail only the records it addresses, not every record of the
//! shard, and a check done once at open would be skipped for every other entry sharing it.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use lru::LruCache;

use super::error::DatasetError;
use super::objects::{AbsoluteReferences, Objects};
use super::pages::RecordLocation;
use crate::arrayrecord::{ArrayRecordReader, ByteSource};
use crate::budget::{Budget, Charge, Reclaim};
use crate::format::documents::{ObjectRef, Reference};
use crate::format::path::ObjectPath;
use crate::storage::{ObjectReader, ObjectStore};

/// The ArrayRecord layer reads through storage with positional reads.
impl ByteSource for ObjectReader {
    fn size(&self) -> std::io::Result<u64> {
        ObjectReader::size(self)
    }

    fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Bytes> {
        ObjectReader::read_at(self, offset, len)
    }

    fn read_split(
        &self,
        offset: u64,
        parts: &[(usize, usize)],
        outs: &mut [&mut Vec<u8>],
    ) -> std::io::Result<()> {
        ObjectReader::read_split(self, offset, parts, outs)
    }
}

/// An open shard.
pub type ShardReader = ArrayRecordReader<ObjectReader>;

/// Open readers, each with the charge of the index it keeps.
#[derive(Debug)]
pub(crate) struct ShardCache {
    open: Mutex<LruCache<ObjectPath, (Arc<ShardReader>, Charge)>>,
    memory: Arc<Budget>,
}

impl Reclaim for ShardCache {
    fn reclaim_one(&self) -> bool {
        let evicted = self.lock().pop_lru();
        evicted.is_some()
    }
}

impl ShardCache {
    /// At most `capacity` open readers, their indexes charged to `memory`.
    pub(crate) fn new(capacity: usize, memory: Arc<Budget>) -> Arc<ShardCache> {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        let cache = Arc::new(ShardCache {
            open: Mutex::new(LruCache::new(capacity)),
            memory,
        });
        cache.memory.register(&cache);
        cache
    }

    /// The open reader of the shard `reference` points at (its size checked on first open).
    pub(crate) fn reader(
        &self,
        store: &Arc<dyn ObjectStore>,
        reference: &Reference,
    ) -> Result<Arc<ShardReader>, DatasetError> {
        let objects = Objects::new(store.clone(), AbsoluteReferences::Refuse);
        let reference = ObjectRef {
            path: ObjectPath::Relative(reference.path.clone()),
            stored_bytes: reference.stored_bytes,
            generation: reference.generation,
        };
        self.reader_for(&objects, &reference)
    }

    /// The open reader of the shard a control-graph reference points at.
    pub(crate) fn reader_for(
        &self,
        objects: &Objects,
        reference: &ObjectRef,
    ) -> Result<Arc<ShardReader>, DatasetError> {
        if let Some((reader, _)) = self.lock().get(&reference.path) {
            return Ok(reader.clone());
        }
        let reader = Arc::new(open_shard(objects, reference)?);
        let charge =
            self.memory
                .charge(reader.index_bytes())
                .map_err(|source| DatasetError::Budget {
                    object: format!("{} (its chunk index)", reader.name()),
                    source,
                })?;
        self.lock()
            .put(reference.path.clone(), (reader.clone(), charge));
        Ok(reader)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<ObjectPath, (Arc<ShardReader>, Charge)>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn open_shard(objects: &Objects, reference: &ObjectRef) -> Result<ShardReader, DatasetError> {
    let resolved = objects.resolve(&reference.path, reference.generation)?;
    let object = resolved.describe();
    let source = ObjectReader::open(resolved.store, resolved.path, reference.generation)?;
    let size = source
        .size()
        .map_err(|e| DatasetError::io(object.clone(), e))?;
    if !resolved.absolute && size != reference.stored_bytes {
        return Err(DatasetError::SizeMismatch {
            object,
            expected: reference.stored_bytes,
            actual: size,
        });
    }
    ArrayRecordReader::open(source, object.clone())
        .map_err(|source| DatasetError::Shard { object, source })
}

/// Checks that the record at `location` exists in `shard`, naming the ordinal and, for a view,
/// the `record_indices` entry that points past the end. Done per record rather than once per
/// shard so that one bad index fails only the records it addresses (FORMAT.md section 4).
pub(crate) fn check_in_shard(
    shard: &ShardReader,
    location: &RecordLocation,
) -> Result<(), DatasetError> {
    let len = shard.len();
    let physical = location.physical_index;
    if physical < len {
        return Ok(());
    }
    let ordinal = location.ordinal;
    let k = location.index_in_entry;
    let how = match location.entry().and_then(|e| e.record_indices.as_ref()) {
        Some(_) => format!("record_indices[{k}] = {physical} is out of range"),
        None => format!("the shard entry addresses record {physical}, which is out of range"),
    };
    Err(DatasetError::corrupt(
        shard.name(),
        format!("ordinal {ordinal}: {how}: the shard holds {len} records"),
    ))
}
