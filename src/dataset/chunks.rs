//! Records read from shards in memory, charged to the memory budget, decoded once when
//! several readers want the same chunk.
//!
//! Why: a tiny shard can hold a chunk that decodes to hundreds of MiB (compression), and a
//! chunk holding many rows (`group_size` above 1) is decoded in whole for any one of them. Eight
//! `stat`s of eight rows of one such chunk decoded it eight times at once. Here a chunk is
//! charged at its decoded size plus its stored span (both from the shard's index, before any
//! read) and decoded by one reader at a time (a per-chunk gate); a chunk of several records is
//! then kept in a small LRU, so the readers waiting behind the gate, and the next rows of a
//! walk, take their record from it. A chunk of one record (`group_size` 1, what the library
//! writes) is that record: it is read without a gate, as the layers above already make
//! concurrent readers of one record or row wait for one decode. A chunk larger than the whole
//! budget is never decoded.
//!
//! A record handed out keeps its memory charged for as long as it lives ([`Held`]): its own
//! charge, or a share of its chunk's.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use lru::LruCache;

use super::error::DatasetError;
use super::shards::ShardReader;
use crate::budget::{Budget, Charge, Gates, Reclaim};
use crate::sync::lock;

/// Chunks of several records kept decoded.
const KEPT_CHUNKS: usize = 8;

/// A value with the memory it holds still charged.
#[derive(Debug)]
pub struct Charged<T> {
    pub value: T,
    pub held: Held,
}

/// What keeps a record's memory charged: its own charge or its chunk's.
#[derive(Debug)]
pub struct Held(HeldBy);

#[derive(Debug)]
enum HeldBy {
    Own(Charge),
    Chunk(Arc<DecodedChunk>),
}

impl Held {
    /// Bytes charged for this record (its chunk's whole charge when it shares one).
    pub fn bytes(&self) -> u64 {
        match &self.0 {
            HeldBy::Own(charge) => charge.bytes(),
            HeldBy::Chunk(chunk) => chunk.charge.bytes(),
        }
    }
}

#[derive(Debug)]
struct DecodedChunk {
    records: Vec<Bytes>,
    charge: Charge,
}

type ChunkKey = (String, u64);

/// The decoded chunks of one open dataset.
#[derive(Debug)]
pub(crate) struct ChunkCache {
    kept: Mutex<LruCache<ChunkKey, Arc<DecodedChunk>>>,
    decoding: Gates<ChunkKey>,
    memory: Arc<Budget>,
}

impl Reclaim for ChunkCache {
    fn reclaim_one(&self) -> bool {
        let evicted = lock(&self.kept).pop_lru();
        evicted.is_some()
    }
}

impl ChunkCache {
    pub(crate) fn new(memory: Arc<Budget>) -> Arc<ChunkCache> {
        let cache = Arc::new(ChunkCache {
            kept: Mutex::new(LruCache::new(
                NonZeroUsize::new(KEPT_CHUNKS).unwrap_or(NonZeroUsize::MIN),
            )),
            decoding: Gates::default(),
            memory,
        });
        cache.memory.register(&cache);
        cache
    }

    /// Physical record `index` of `shard`, decoded in memory and charged.
    pub(crate) fn record(
        &self,
        shard: &ShardReader,
        index: u64,
    ) -> Result<Charged<Bytes>, DatasetError> {
        let group = shard.group_size().max(1);
        // A chunk of one record is that record: nothing is kept for others to take, and the
        // layers above make concurrent readers of one record wait for one decode.
        if group == 1 {
            return self.decode(shard, index, group);
        }
        let key = (shard.name().to_string(), index / group);
        if let Some(hit) = self.kept_record(&key, shard, index) {
            return hit;
        }
        self.decoding
            .one_at_a_time(key.clone(), || match self.kept_record(&key, shard, index) {
                Some(hit) => hit,
                None => self.decode(shard, index, group),
            })
    }

    fn kept_record(
        &self,
        key: &ChunkKey,
        shard: &ShardReader,
        index: u64,
    ) -> Option<Result<Charged<Bytes>, DatasetError>> {
        let chunk = lock(&self.kept).get(key)?.clone();
        Some(record_of(chunk, shard, index))
    }

    fn decode(
        &self,
        shard: &ShardReader,
        index: u64,
        group: u64,
    ) -> Result<Charged<Bytes>, DatasetError> {
        let failed = |source| DatasetError::Shard {
            object: shard.name().to_string(),
            source,
        };
        let decoded = shard.chunk_decoded_len(index).map_err(failed)?;
        let span = shard.chunk_span(index).map_err(failed)?;
        let mut charge = self
            .memory
            .charge(decoded.saturating_add(span.end - span.start))
            .map_err(|source| DatasetError::Budget {
                object: format!("{} (chunk of record {index})", shard.name()),
                source,
            })?;
        if group == 1 {
            let record = shard.read(index).map_err(failed)?;
            charge.shrink_to(record.len() as u64);
            return Ok(Charged {
                value: record,
                held: Held(HeldBy::Own(charge)),
            });
        }
        let chunk_index = index / group;
        let records = shard.read_chunk(chunk_index).map_err(failed)?;
        charge.shrink_to(decoded);
        let chunk = Arc::new(DecodedChunk { records, charge });
        let key = (shard.name().to_string(), chunk_index);
        lock(&self.kept).put(key, chunk.clone());
        record_of(chunk, shard, index)
    }
}

/// Record `index` of `shard` from its decoded chunk.
fn record_of(
    chunk: Arc<DecodedChunk>,
    shard: &ShardReader,
    index: u64,
) -> Result<Charged<Bytes>, DatasetError> {
    let local = index % shard.group_size().max(1);
    let record = usize::try_from(local)
        .ok()
        .and_then(|local| chunk.records.get(local))
        .cloned()
        .ok_or_else(|| {
            DatasetError::corrupt(
                shard.name(),
                format!("record {index} missing from its chunk"),
            )
        })?;
    Ok(Charged {
        value: record,
        held: Held(HeldBy::Chunk(chunk)),
    })
}
