//! The S3 benchmark driven by `scripts/bench-s3` (not a test): publishes a dataset to an S3
//! endpoint, then measures random record reads (our ranged reads vs downloading the whole
//! shard first, as the original Python library does) and a sequential scan with and without
//! read-ahead. Prints one `key value` line per figure.
//!
//! Usage: bench_s3 ENDPOINT URL RECORDS SHARDS RECORD_BYTES RANDOM_READS

use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sdsfs::arrayrecord::ArrayRecordReader;
use sdsfs::dataset::{publish, write_shard, Dataset, OpenOptions, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::path::RelPath;
use sdsfs::format::record::{Field, Record};
use sdsfs::storage::{
    CloudOptions, CloudStore, CreateOutcome, ObjectInfo, ObjectStore, RetryPolicy, StorageError,
    Version,
};

/// Counts the bytes and requests of content reads.
#[derive(Debug)]
struct Counter {
    inner: Arc<dyn ObjectStore>,
    bytes: AtomicU64,
    requests: AtomicU64,
}

impl Counter {
    fn take(&self) -> (u64, u64) {
        (
            self.bytes.swap(0, Ordering::SeqCst),
            self.requests.swap(0, Ordering::SeqCst),
        )
    }
    fn count(&self, r: Result<Bytes, StorageError>) -> Result<Bytes, StorageError> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        if let Ok(b) = &r {
            self.bytes.fetch_add(b.len() as u64, Ordering::SeqCst);
        }
        r
    }
}

impl ObjectStore for Counter {
    fn describe(&self, path: &RelPath) -> String {
        self.inner.describe(path)
    }
    fn read(&self, path: &RelPath, generation: Option<u64>) -> Result<Bytes, StorageError> {
        self.count(self.inner.read(path, generation))
    }
    fn read_limited(
        &self,
        path: &RelPath,
        generation: Option<u64>,
        max: u64,
    ) -> Result<Bytes, StorageError> {
        self.count(self.inner.read_limited(path, generation, max))
    }
    fn read_range(
        &self,
        path: &RelPath,
        range: Range<u64>,
        generation: Option<u64>,
    ) -> Result<Bytes, StorageError> {
        self.count(self.inner.read_range(path, range, generation))
    }
    fn info(&self, path: &RelPath, generation: Option<u64>) -> Result<ObjectInfo, StorageError> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.inner.info(path, generation)
    }
    fn create(&self, path: &RelPath, data: &[u8]) -> Result<CreateOutcome, StorageError> {
        self.inner.create(path, data)
    }
    fn create_from_file(&self, path: &RelPath, file: &Path) -> Result<CreateOutcome, StorageError> {
        self.inner.create_from_file(path, file)
    }
    fn read_versioned(&self, path: &RelPath) -> Result<Option<(Bytes, Version)>, StorageError> {
        self.inner.read_versioned(path)
    }
    fn compare_and_swap(
        &self,
        path: &RelPath,
        data: &[u8],
        expected: Option<&Version>,
    ) -> Result<Version, StorageError> {
        self.inner.compare_and_swap(path, data, expected)
    }
    fn supports_generations(&self) -> bool {
        self.inner.supports_generations()
    }
}

fn record(serial: usize, bytes: usize) -> Record {
    let samples = (bytes / 8).max(1);
    let mut state = (serial as u64 * 0x9E37_79B9_7F4A_7C15) | 1;
    let data: Vec<u8> = (0..samples * 8)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let iq = Field::new(DType::C64, vec![samples as u64], data).expect("field");
    Record::new(format!("capture-{serial:06}")).with_field("iq", iq)
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn arg(args: &[String], i: usize) -> usize {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("argument {i} must be a number"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    assert!(
        args.len() == 7,
        "usage: bench_s3 ENDPOINT URL RECORDS SHARDS RECORD_BYTES RANDOM_READS"
    );
    let (endpoint, url) = (&args[1], &args[2]);
    let (records, shards, record_bytes, picks) =
        (arg(&args, 3), arg(&args, 4), arg(&args, 5), arg(&args, 6));
    let options = CloudOptions {
        retry: RetryPolicy {
            attempts: 8,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(200),
        },
        endpoint: Some(endpoint.clone()),
        region: Some("us-east-1".into()),
        allow_http: Some(true),
        access_key_id: Some("test".into()),
        secret_access_key: Some("test".into()),
        ..CloudOptions::default()
    };
    let store: Arc<dyn ObjectStore> = Arc::new(CloudStore::open(url, &options).expect("store"));

    let started = Instant::now();
    let per_shard = records.div_ceil(shards);
    let mut receipts = Vec::new();
    for s in 0..shards {
        let serials = s * per_shard..((s + 1) * per_shard).min(records);
        let batch = serials.map(|i| record(i, record_bytes));
        let receipt = write_shard(
            store.as_ref(),
            batch,
            &format!("w{s:03}"),
            0,
            &ShardOptions::default(),
        )
        .expect("write_shard");
        receipts.push(receipt);
    }
    publish(
        store.as_ref(),
        &receipts,
        &PublishOptions::new("bench", "snap-1"),
    )
    .expect("publish");
    let data_bytes: u64 = receipts.iter().map(|r| r.data_bytes).sum();
    println!("publish_s {:.2}", started.elapsed().as_secs_f64());
    println!("records {records}");
    println!("shards {shards}");
    println!("data_bytes {data_bytes}");
    let metadata_bytes: u64 = receipts.iter().map(|r| r.metadata_bytes).sum();
    println!("metadata_bytes {metadata_bytes}");

    let counter = Arc::new(Counter {
        inner: store.clone(),
        bytes: AtomicU64::new(0),
        requests: AtomicU64::new(0),
    });
    let open = |read_ahead: usize| {
        let options = OpenOptions {
            read_ahead_chunks: read_ahead,
            ..OpenOptions::default()
        };
        Dataset::open(counter.clone(), options).expect("open")
    };

    // Random reads with every shard already open (footers cached): the steady state.
    let dataset = open(2);
    for s in 0..shards {
        dataset.read_record((s * per_shard) as u64).expect("read");
    }
    counter.take();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let started = Instant::now();
    for _ in 0..picks {
        let ordinal = xorshift(&mut state) % records as u64;
        dataset.read_record(ordinal).expect("read");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (bytes, requests) = counter.take();
    println!("random_ms {:.3}", 1e3 * elapsed / picks as f64);
    println!("random_bytes {}", bytes / picks as u64);
    println!("random_requests {:.2}", requests as f64 / picks as f64);

    // What the original library does: download the whole data and metadata shards, then read
    // the record from the local copy.
    let whole_picks = picks.min(20);
    let started = Instant::now();
    let mut whole_bytes = 0u64;
    for _ in 0..whole_picks {
        let ordinal = xorshift(&mut state) % records as u64;
        let location = dataset.locate(ordinal).expect("locate");
        let entry = location.entry().expect("entry");
        for (reference, is_data) in [(&entry.data, true), (&entry.metadata, false)] {
            let bytes = store.read(&reference.path, None).expect("whole shard");
            whole_bytes += bytes.len() as u64;
            let reader = ArrayRecordReader::open(bytes, "whole").expect("open shard");
            let record = reader.read(location.physical_index).expect("record");
            assert!(!is_data || !record.is_empty());
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!("whole_ms {:.3}", 1e3 * elapsed / whole_picks as f64);
    println!("whole_bytes {}", whole_bytes / whole_picks as u64);

    // Sequential scans of every record, fresh datasets, without and with read-ahead.
    for (name, read_ahead) in [("scan_plain", 0usize), ("scan_ahead", 2)] {
        let dataset = open(read_ahead);
        counter.take();
        let started = Instant::now();
        let mut payload = 0u64;
        for ordinal in 0..records as u64 {
            let record = dataset.read_record(ordinal).expect("scan");
            payload += record
                .fields
                .values()
                .map(|f| f.data.len() as u64)
                .sum::<u64>();
        }
        let elapsed = started.elapsed().as_secs_f64();
        let (bytes, requests) = counter.take();
        println!("{name}_s {elapsed:.3}");
        println!("{name}_mbps {:.2}", bytes as f64 / 1e6 / elapsed);
        println!("{name}_payload_mbps {:.2}", payload as f64 / 1e6 / elapsed);
        println!("{name}_rps {:.1}", records as f64 / elapsed);
        println!("{name}_requests {requests}");
    }
}
