//! Per-record costs of reading a dataset, stage by stage (not a test; see docs/PERFORMANCE.md,
//! "Columns"): for the first 5,000 records of DATASET (a local directory), microseconds per
//! record of each stage, best of 3 rounds, and the heap allocations one record's stage makes.
//!
//! Usage: cargo run --release --example bench_stages -- DATASET
//!
//! Stages: `record_meta` (a row read from its shard and parsed), `parse_row` (the parse alone,
//! of the row's text), `read_payload` (a payload read, hash-checked and decompressed),
//! `parse_header` (its SafeTensors header), `parse_layout` (header and descriptor, joined and
//! checked), `fingerprint` (of a parsed row).

use std::alloc::{GlobalAlloc, Layout, System};
use std::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use sdsfs::dataset::{Dataset, OpenOptions};
use sdsfs::format::record::payload::{parse_header, parse_layout};
use sdsfs::format::record::RecordMeta;
use sdsfs::storage::LocalStore;

/// The system allocator, counting allocations.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const RECORDS: u64 = 5_000;
const ROUNDS: usize = 3;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Best-of-rounds microseconds per item of `stage` over `items`, and one item's allocations.
fn measure<T>(items: &[T], stage: impl Fn(&T) -> Result<()>) -> Result<(f64, u64)> {
    let first = items.first().ok_or("no records")?;
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    stage(first)?;
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    let mut best = f64::MAX;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for item in items {
            stage(item)?;
        }
        best = best.min(started.elapsed().as_secs_f64() * 1e6 / items.len() as f64);
    }
    Ok((best, allocations))
}

fn main() -> Result<()> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: bench_stages DATASET")?;
    let store = Arc::new(LocalStore::open(std::path::Path::new(&path))?);
    let dataset = Dataset::open(store, OpenOptions::default())?;
    let limits = dataset.options().record_limits;
    let ordinals: Vec<u64> = (0..dataset.len().min(RECORDS)).collect();
    let mut rows = Vec::new();
    let mut payloads: Vec<Bytes> = Vec::new();
    let mut metas = Vec::new();
    for &ordinal in &ordinals {
        let location = dataset.locate(ordinal)?;
        let meta = dataset.record_meta_at(&location)?;
        rows.push(meta.to_row_json().into_bytes());
        payloads.push(dataset.read_payload(&location)?.value);
        metas.push(meta);
    }
    let stages: Vec<(&str, (f64, u64))> = vec![
        (
            "record_meta",
            measure(&ordinals, |&o| {
                dataset.record_meta(o)?;
                Ok(())
            })?,
        ),
        (
            "parse_row",
            measure(&rows, |r| {
                RecordMeta::parse_row(r, &limits)?;
                Ok(())
            })?,
        ),
        (
            "read_payload",
            measure(&ordinals, |&o| {
                dataset.read_payload(&dataset.locate(o)?)?;
                Ok(())
            })?,
        ),
        (
            "parse_header",
            measure(&payloads, |p| {
                parse_header(p, &limits)?;
                Ok(())
            })?,
        ),
        (
            "parse_layout",
            measure(&payloads, |p| {
                parse_layout(p, &limits)?;
                Ok(())
            })?,
        ),
        (
            "fingerprint",
            measure(&metas, |m| {
                std::hint::black_box(m.fingerprint());
                Ok(())
            })?,
        ),
    ];
    println!(
        "{} records of {path}: row {} bytes, payload {} bytes",
        ordinals.len(),
        rows.first().map_or(0, Vec::len),
        payloads.first().map_or(0, Bytes::len)
    );
    println!("{:<14}{:>12}{:>14}", "stage", "us/record", "allocations");
    for (name, (micros, allocations)) in stages {
        println!("{name:<14}{micros:>12.2}{allocations:>14}");
    }
    Ok(())
}
