//! Baseline (a) of workload 1 in `scripts/bench`: how fast can one process decompress the chunk
//! of a record with zstd, with nothing else in the way?
//!
//! ```text
//! bench_zstd DATASET ORDINAL REPEAT
//! ```
//!
//! Reads record ORDINAL's encoded payload through the library (the bytes the data shard's
//! chunk decompresses to), compresses them again with the parameters of the shard writer
//! (zstd 1.5.6, level 3, window log 20: the same frame the chunk holds, only without riegeli's
//! block headers), then times REPEAT one-shot decompressions (`ZSTD_decompressDCtx` with a
//! reused context) from memory into a preallocated buffer, and our own in-process read of the
//! record (`Dataset::read_payload`: shard read, block headers, hash check, decompression).
//! Prints one JSON line with the medians in seconds. No file I/O is timed in the zstd figure:
//! it is the ceiling for any reader of this chunk.
//!
//! Two reference points around it, for the analysis in docs/PERFORMANCE.md: the same
//! decompression into freshly allocated memory each time (`zstd_fresh_seconds`: what a
//! program that does not keep a faulted-in buffer around pays), and one `memcpy` of the
//! decompressed bytes into another faulted-in buffer (`copy_seconds`: the least a reader that
//! must verify the chunk before handing out any byte adds after decompression).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use sdsfs::dataset::{Dataset, OpenOptions};
use sdsfs::storage::LocalStore;

type Error = Box<dyn std::error::Error>;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn run(args: &[String]) -> Result<(), Error> {
    let [root, ordinal, repeat] = args else {
        return Err("usage: bench_zstd DATASET ORDINAL REPEAT".into());
    };
    let ordinal: u64 = ordinal.parse()?;
    let repeat: usize = repeat.parse::<usize>()?.max(1);
    let store = Arc::new(LocalStore::open(std::path::Path::new(root))?);
    let dataset = Dataset::open(store, OpenOptions::default())?;
    let location = dataset.locate(ordinal)?;
    let payload = dataset.read_payload(&location)?.value;

    let mut compressor = zstd::bulk::Compressor::new(3)?;
    compressor.set_parameter(zstd::zstd_safe::CParameter::WindowLog(20))?;
    let frame = compressor.compress(&payload)?;

    let mut decompressor = zstd::bulk::Decompressor::new()?;
    let mut out = vec![0u8; payload.len()];
    let mut zstd_times = Vec::new();
    for _ in 0..repeat {
        let t = Instant::now();
        let n = decompressor.decompress_to_buffer(&frame[..], &mut out[..])?;
        zstd_times.push(t.elapsed().as_secs_f64());
        if n != payload.len() || out[..] != payload[..] {
            return Err("the frame did not decompress to the payload".into());
        }
    }
    let mut fresh_times = Vec::new();
    for _ in 0..repeat {
        let t = Instant::now();
        let mut fresh = Vec::with_capacity(payload.len());
        decompressor.decompress_to_buffer(&frame[..], &mut fresh)?;
        fresh_times.push(t.elapsed().as_secs_f64());
        if fresh[..] != payload[..] {
            return Err("the frame did not decompress to the payload".into());
        }
    }
    let mut copy = vec![1u8; payload.len()];
    let mut copy_times = Vec::new();
    for _ in 0..repeat {
        let t = Instant::now();
        copy.copy_from_slice(&out);
        copy_times.push(t.elapsed().as_secs_f64());
        std::hint::black_box(&copy);
    }
    let mut ours = Vec::new();
    for _ in 0..repeat {
        let t = Instant::now();
        let again = dataset.read_payload(&location)?.value;
        ours.push(t.elapsed().as_secs_f64());
        if again.len() != payload.len() {
            return Err("read_payload returned a different length".into());
        }
    }
    println!(
        "{{\"payload_bytes\":{},\"frame_bytes\":{},\"zstd_seconds\":{:.6},\"zstd_fresh_seconds\":{:.6},\"copy_seconds\":{:.6},\"read_payload_seconds\":{:.6}}}",
        payload.len(),
        frame.len(),
        median(zstd_times),
        median(fresh_times),
        median(copy_times),
        median(ours)
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_zstd: {e}");
            ExitCode::FAILURE
        }
    }
}
