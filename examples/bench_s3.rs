//! The S3 benchmark driven by `scripts/bench-s3` (not a test): publishes a dataset to an S3
//! endpoint, then measures random record reads (our ranged reads vs downloading the whole
//! shard first, as the original Python library does) and a sequential scan with and without
//! read-ahead. Prints one `key value` line per figure.
//!
//! Usage: bench_s3 ENDPOINT URL RECORDS SHARDS RECORD_BYTES RANDOM_READS

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sdsfs::arrayrecord::ArrayRecordReader;
use sdsfs::dataset::{publish, write_shard, Dataset, OpenOptions, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::record::{Field, Record};
use sdsfs::fs::stats::{BackendCounters, MountStats, StoreCounter};
use sdsfs::storage::{CloudOptions, CloudStore, ObjectStore, RetryPolicy};

/// The bytes and requests counted since the last call (the library's counting store, the one
/// a mount reports in `sdsfs status`, counts every read and HEAD).
fn take(counters: &BackendCounters) -> (u64, u64) {
    (
        counters.bytes.swap(0, Ordering::SeqCst),
        counters.requests.swap(0, Ordering::SeqCst),
    )
}

fn record(serial: usize, bytes: usize) -> Record {
    let samples = (bytes / 8).max(1);
    let mut state = (serial as u64 * 0x9E37_79B9_7F4A_7C15) | 1;
    let data: Vec<u8> = (0..samples * 8)
        .map(|_| xorshift(&mut state) as u8)
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

    let stats = Arc::new(MountStats::default());
    let counter: Arc<dyn ObjectStore> =
        Arc::new(StoreCounter::wrap(store.clone(), "s3", stats.clone()));
    let counters = stats.backend("s3");
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
    take(&counters);
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let started = Instant::now();
    for _ in 0..picks {
        let ordinal = xorshift(&mut state) % records as u64;
        dataset.read_record(ordinal).expect("read");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (bytes, requests) = take(&counters);
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
            let bytes = store
                .read(reference.path.relative().expect("relative path"), None)
                .expect("whole shard");
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
        take(&counters);
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
        let (bytes, requests) = take(&counters);
        println!("{name}_s {elapsed:.3}");
        println!("{name}_mbps {:.2}", bytes as f64 / 1e6 / elapsed);
        println!("{name}_payload_mbps {:.2}", payload as f64 / 1e6 / elapsed);
        println!("{name}_rps {:.1}", records as f64 / elapsed);
        println!("{name}_requests {requests}");
    }
}
