//! Shard planning, parallel shard writing and publication: the engine behind `sds create`.
//!
//! Determinism: shard boundaries come from the records' planned payload sizes and the options
//! only ([`plan_shards`]); each shard's bytes depend only on its records. Work ids are what the
//! library's `DatasetView.materialize` uses, `%012d` of each shard's first record position,
//! attempt 0: zero-padded so that publication's work-id (string) order is the shard order, and
//! the same scheme as a materialized view, so one rule names every shard this project writes
//! from a sequence of records. Workers (`--jobs`) take whole shards from a shared counter, so
//! the number of threads changes only how fast the same bytes appear.
//!
//! Ids: a `dataset_id` or `snapshot_id` not given is derived from the content. Both come from
//! SHA-256 of the compact JSON `{"dataset_id", "metadata", "shards": [[SHA-256 of the data
//! shard, SHA-256 of the metadata shard, record count], ...]}` (shard names derive from work
//! ids, not content, so the bytes are hashed as they are written): `sds-<16 hex>` for the
//! dataset (computed with `dataset_id` null) and `snap-<16 hex>` for the snapshot. The same
//! inputs and options therefore give the same ids, and different content different ids.
//!
//! A record that fails to load stops the import before anything is published; shards already
//! written stay behind as unreferenced objects (harmless: nothing references them, and a re-run
//! with the same inputs writes the same bytes under the same names).

use std::cell::RefCell;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::allowance::LoadAllowance;
use super::{ImportError, RecordSource, Sources};
use crate::arrayrecord::WriterOptions;
use crate::dataset::{
    encode_shard, publish, DatasetError, EncodedShard, PublishOptions, PublishSummary,
};
use crate::dataset::{ShardOptions, ShardReceipt};
use crate::format::json::{to_compact, Object, Value};
use crate::storage::{LocalStore, ObjectStore};

/// How `create` lays out and writes a dataset.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Derived from the content when `None`.
    pub dataset_id: Option<String>,
    /// Derived from the content when `None`.
    pub snapshot_id: Option<String>,
    /// A new shard starts when a shard holds this many records.
    pub records_per_shard: usize,
    /// A new shard starts when the next record's tensor bytes would take a shard over this
    /// (a larger record gets a shard of its own).
    pub max_shard_bytes: u64,
    /// Worker threads encoding and compressing shards.
    pub jobs: usize,
    pub writer_options: WriterOptions,
    pub shards_per_manifest: usize,
    /// The publication's metadata (root and snapshot).
    pub metadata: Object,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions {
            dataset_id: None,
            snapshot_id: None,
            records_per_shard: 1000,
            max_shard_bytes: 1 << 30,
            jobs: 1,
            writer_options: WriterOptions::default(),
            shards_per_manifest: 10_000,
            metadata: Object::new(),
        }
    }
}

/// What `create` published.
#[derive(Debug, Clone)]
pub struct CreateSummary {
    pub dataset_id: String,
    pub snapshot_id: String,
    pub published: PublishSummary,
    /// Tensor bytes of all records.
    pub payload_bytes: u64,
}

/// Told about each record as it is loaded, from worker threads.
pub trait Progress: Sync {
    fn record_loaded(&self, payload_bytes: u64);
}

impl Progress for () {
    fn record_loaded(&self, _: u64) {}
}

/// The local directory `out` as the store [`create`] writes into (created if missing).
pub fn open_output(out: &Path) -> Result<Arc<dyn ObjectStore>, ImportError> {
    std::fs::create_dir_all(out).map_err(|e| ImportError::io(out, e))?;
    Ok(Arc::new(LocalStore::open(out).map_err(DatasetError::from)?))
}

/// Writes every record of `sources` into shards and publishes them as one dataset in `store`.
pub fn create(
    store: &dyn ObjectStore,
    sources: &Sources,
    options: &CreateOptions,
    progress: &dyn Progress,
) -> Result<CreateSummary, ImportError> {
    check_options(options)?;
    let sizes: Vec<u64> = sources.iter().map(|s| s.payload_bytes()).collect();
    let plan = plan_shards(&sizes, options.records_per_shard, options.max_shard_bytes);
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let allowance = LoadAllowance::for_largest(largest);
    let written = write_all(store, sources, &plan, options, &allowance, progress)?;
    let dataset_id = match &options.dataset_id {
        Some(id) => id.clone(),
        None => format!("sds-{}", content_digest(None, &options.metadata, &written)),
    };
    let snapshot_id = match &options.snapshot_id {
        Some(id) => id.clone(),
        None => format!(
            "snap-{}",
            content_digest(Some(&dataset_id), &options.metadata, &written)
        ),
    };
    let receipts: Vec<ShardReceipt> = written.into_iter().map(|(r, _)| r).collect();
    let mut publish_options = PublishOptions::new(dataset_id.clone(), snapshot_id.clone());
    publish_options.metadata = options.metadata.clone();
    publish_options.shards_per_manifest = options.shards_per_manifest;
    publish_options.expected_work_ids = Some(receipts.iter().map(|r| r.work_id.clone()).collect());
    let published = publish(store, &receipts, &publish_options)?;
    Ok(CreateSummary {
        dataset_id,
        snapshot_id,
        published,
        payload_bytes: sizes.iter().fold(0, |a, b| a.saturating_add(*b)),
    })
}

pub fn check_options(options: &CreateOptions) -> Result<(), ImportError> {
    for (flag, id) in [
        ("--dataset-id", &options.dataset_id),
        ("--snapshot-id", &options.snapshot_id),
    ] {
        if id.as_deref() == Some("") {
            return Err(ImportError::Option(format!(
                "{flag} must be a nonempty string"
            )));
        }
    }
    if options.records_per_shard == 0 || options.max_shard_bytes == 0 {
        return Err(ImportError::Option(
            "--records-per-shard and --max-shard-bytes must be at least 1".into(),
        ));
    }
    Ok(())
}

/// Consecutive record ranges, one per shard: a shard closes before the record that would take
/// it past `max_records` records or `max_bytes` tensor bytes; every shard holds at least one.
pub fn plan_shards(sizes: &[u64], max_records: usize, max_bytes: u64) -> Vec<Range<usize>> {
    let mut shards = Vec::new();
    let (mut first, mut bytes) = (0usize, 0u64);
    for (index, &size) in sizes.iter().enumerate() {
        let full = index - first >= max_records || bytes.saturating_add(size) > max_bytes;
        if index > first && full {
            shards.push(first..index);
            (first, bytes) = (index, 0);
        }
        bytes = bytes.saturating_add(size);
    }
    if first < sizes.len() {
        shards.push(first..sizes.len());
    }
    shards
}

/// The work id of the shard whose first record is at `first` (see the module docs).
fn work_id(first: usize) -> String {
    format!("{first:012}")
}

/// A stored shard: its receipt and [`EncodedShard::content_sha256`].
type Written = (ShardReceipt, String);

type Slot = Mutex<Option<Result<Written, ImportError>>>;

/// Writes every planned shard on `options.jobs` threads; receipts in shard order, or the error
/// of the first failing shard.
///
/// The jobs encode shards (load, compress: CPU); as many more threads store them (hash, copy
/// into place, fsync, link: much of it waiting on the disk), so a job goes on to its next
/// shard while the previous one becomes durable. At most one encoded shard waits to be stored
/// per job.
fn write_all(
    store: &dyn ObjectStore,
    sources: &Sources,
    plan: &[Range<usize>],
    options: &CreateOptions,
    allowance: &LoadAllowance,
    progress: &dyn Progress,
) -> Result<Vec<Written>, ImportError> {
    let slots: Vec<Slot> = plan.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let shard_options = ShardOptions {
        writer_options: options.writer_options,
        ..ShardOptions::default()
    };
    let threads = options.jobs.clamp(1, plan.len().max(1));
    let (to_store, encoded) = sync_channel::<(usize, EncodedShard)>(threads);
    let finish = |index: usize, result: Result<Written, ImportError>| {
        if result.is_err() {
            stop.store(true, Ordering::SeqCst);
        }
        if let Ok(mut slot) = slots[index].lock() {
            *slot = Some(result);
        }
    };
    let worker = |to_store: SyncSender<(usize, EncodedShard)>| loop {
        let index = next.fetch_add(1, Ordering::SeqCst);
        if index >= plan.len() || stop.load(Ordering::SeqCst) {
            return;
        }
        let range = plan[index].clone();
        let shard = ShardWork {
            store,
            work_id: &work_id(range.start),
            attempt: 0,
            options: &shard_options,
        };
        match load_and_encode(&sources[range], &shard, allowance, progress, &stop) {
            Ok(shard) => {
                if to_store.send((index, shard)).is_err() {
                    return;
                }
            }
            Err(e) => finish(index, Err(e)),
        }
    };
    let encoded = Mutex::new(encoded);
    std::thread::scope(|scope| {
        let storer = || loop {
            // The lock is held only to take the next shard, never while storing one.
            let next_shard = match encoded.lock() {
                Ok(queue) => queue.recv(),
                Err(_) => return,
            };
            let Ok((index, shard)) = next_shard else {
                return;
            };
            if !stop.load(Ordering::SeqCst) {
                let content = shard.content_sha256();
                let stored = shard.store(store).map_err(ImportError::from);
                finish(index, stored.map(|receipt| (receipt, content)));
            }
        };
        for _ in 0..threads {
            scope.spawn(storer);
        }
        if threads == 1 {
            // On the calling thread: its allocations come from the main heap, which grows in
            // large steps, where another thread's arena grows a page at a time (an `mprotect`
            // each; 17,000 in a 10,000-record run when the records were read on a thread).
            worker(to_store);
        } else {
            for _ in 0..threads {
                let to_store = to_store.clone();
                scope.spawn(move || worker(to_store));
            }
            drop(to_store);
        }
    });
    collect(slots)
}

fn collect(slots: Vec<Slot>) -> Result<Vec<Written>, ImportError> {
    let mut receipts = Vec::with_capacity(slots.len());
    for slot in slots {
        match slot.into_inner().ok().flatten() {
            Some(result) => receipts.push(result?),
            None => {
                return Err(ImportError::Option(
                    "an earlier shard failed (see above); nothing was published".into(),
                ))
            }
        }
    }
    Ok(receipts)
}

/// Writes every record of `sources`, in order, as one shard pair of a distributed publication
/// (`sds write-shard` with importer inputs): records are loaded one at a time while the shard
/// is written, so memory stays bounded by one record. The first record that fails to load
/// stops the shard and is the error: no receipt, so nothing can publish the partial shard (its
/// objects may stay behind unreferenced, like those of a killed worker).
pub fn write_sources_shard(
    store: &dyn ObjectStore,
    sources: &[Box<dyn RecordSource>],
    work_id: &str,
    attempt: u64,
    options: &ShardOptions,
    progress: &dyn Progress,
) -> Result<ShardReceipt, ImportError> {
    let shard = ShardWork {
        store,
        work_id,
        attempt,
        options,
    };
    // One job: its records are loaded one at a time anyway.
    let allowance = LoadAllowance::for_largest(u64::MAX);
    let encoded = load_and_encode(
        sources,
        &shard,
        &allowance,
        progress,
        &AtomicBool::new(false),
    )?;
    Ok(encoded.store(store)?)
}

/// Identity and options of one shard to write.
struct ShardWork<'a> {
    /// Where the shard will be stored (its files are staged where it can adopt them).
    store: &'a dyn ObjectStore,
    work_id: &'a str,
    attempt: u64,
    options: &'a ShardOptions,
}

/// Loads the records of one shard lazily, each within `allowance` while it is loaded, and
/// encodes the shard.
fn load_and_encode(
    sources: &[Box<dyn RecordSource>],
    shard: &ShardWork<'_>,
    allowance: &LoadAllowance,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<EncodedShard, ImportError> {
    let failure: RefCell<Option<ImportError>> = RefCell::new(None);
    // The bytes of the record being written; the writer has dropped it when it asks for the
    // next one.
    let mut held = None;
    let records = sources.iter().map_while(|source| {
        held = None;
        if stop.load(Ordering::Relaxed) {
            failure.replace(Some(ImportError::Option(
                "stopped: another shard failed".into(),
            )));
            return None;
        }
        held = Some(allowance.take(source.payload_bytes()));
        match source.load() {
            Ok(record) => {
                progress.record_loaded(source.payload_bytes());
                Some(record)
            }
            Err(e) => {
                failure.replace(Some(e));
                None
            }
        }
    });
    let encoded = encode_shard(
        shard.store,
        records,
        shard.work_id,
        shard.attempt,
        shard.options,
    );
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    Ok(encoded?)
}

/// 16 hex digits of SHA-256 over the publication's content (see the module docs).
fn content_digest(dataset_id: Option<&str>, metadata: &Object, written: &[Written]) -> String {
    let shards = written
        .iter()
        .map(|(r, content)| {
            let (data, metadata) = content.split_once(':').unwrap_or((content, ""));
            Value::Array(vec![
                Value::from(data),
                Value::from(metadata),
                Value::from(r.record_count),
            ])
        })
        .collect();
    let mut doc = Object::new();
    doc.insert(
        "dataset_id".into(),
        dataset_id.map_or(Value::Null, Value::from),
    );
    doc.insert("metadata".into(), Value::Object(metadata.clone()));
    doc.insert("shards".into(), Value::Array(shards));
    hex::encode(Sha256::digest(to_compact(&Value::Object(doc)).as_bytes()))[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::plan_shards;

    #[test]
    fn shard_plans() {
        assert_eq!(
            plan_shards(&[1, 1, 1, 1, 1], 2, 100),
            vec![0..2, 2..4, 4..5]
        );
        assert_eq!(
            plan_shards(&[60, 60, 30, 200, 1], 10, 100),
            vec![0..1, 1..3, 3..4, 4..5]
        );
        assert!(plan_shards(&[], 2, 100).is_empty());
    }
}
