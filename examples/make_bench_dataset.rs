//! Builds the datasets of the mount benchmark (driven by `scripts/bench`).
//!
//! ```text
//! make_bench_dataset large OUT MIB [RAW]   one record "big" with one complex64 field `iq` of
//!                                          MIB MiB of pseudo-random (incompressible) samples;
//!                                          RAW, when given, receives the field's bytes as a
//!                                          plain local file
//! make_bench_dataset many OUT N [PER]      N small records `r<n>` (fields `iq`, complex64[4],
//!                                          and `snr_db`, float32[1]), scene `s<n/10>`,
//!                                          PER (default 10,000) records per shard, 10 shards
//!                                          per manifest page
//! make_bench_dataset noise OUT MIB [RAW]   like `large`, but the samples are Gaussian noise
//!                                          (complex64 of two N(0,1) floats: what a receiver
//!                                          records with no signal; zstd squeezes it ~8%)
//! make_bench_dataset scan OUT N SAMPLES    N records `r<n>` of one Gaussian complex64 field `iq`
//!                                          of SAMPLES samples, 1,000 records per shard
//! ```
//!
//! OUT must not exist or be an empty directory. Both publish through the library
//! (`write_shard`, `publish`) into a `LocalStore` with default shard options (ArrayRecord
//! `group_size:1`, zstd). Prints one JSON line describing what was published.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use sdsfs::dataset::{
    publish, write_shard, PublishOptions, PublishSummary, ShardOptions, ShardReceipt,
};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::{Object, Value};
use sdsfs::format::record::{Axis, Field, Record};
use sdsfs::storage::LocalStore;

const USAGE: &str =
    "usage: make_bench_dataset large|noise OUT MIB [RAW] | many OUT N [PER] | scan OUT N SAMPLES";
const RECORDS_PER_SHARD: u64 = 10_000;
const SHARDS_PER_MANIFEST: usize = 10;
const SAMPLE_RATE_HZ: i128 = 20_000_000;

type Error = Box<dyn std::error::Error>;

/// xorshift64*: fast, deterministic, and incompressible enough for zstd.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A standard normal float (Box-Muller on two uniforms; the sine half is dropped, which
    /// costs speed, not correctness).
    fn gauss(&mut self) -> f32 {
        let u1 = ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let u2 = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
    }

    /// `len` bytes (a multiple of 4) of little-endian N(0,1) float32 values.
    fn gauss_bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        for _ in 0..len / 4 {
            out.extend_from_slice(&self.gauss().to_le_bytes());
        }
        out
    }

    /// `len` bytes (a multiple of 8).
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        for _ in 0..len / 8 {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out
    }
}

fn time_metadata() -> Object {
    let mut block = Object::new();
    block.insert("kind".into(), Value::from("uniform"));
    block.insert("sample_rate_hz".into(), Value::Int(SAMPLE_RATE_HZ));
    let mut metadata = Object::new();
    metadata.insert("time_coordinates".into(), Value::Object(block));
    metadata
}

fn iq_field(samples: u64, data: Vec<u8>) -> Result<Field, Error> {
    Ok(Field::new(DType::C64, vec![samples], data)?
        .with_axes(vec![Axis::new("time", samples).with_role("time")])
        .with_metadata(time_metadata()))
}

fn store_at(out: &Path) -> Result<LocalStore, Error> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    if std::fs::read_dir(out)?.next().is_some() {
        return Err(format!("{} is not empty", out.display()).into());
    }
    Ok(LocalStore::open(out)?)
}

fn large(
    out: &Path,
    mib: u64,
    raw: Option<&Path>,
    noise: bool,
) -> Result<(PublishSummary, u64), Error> {
    let store = store_at(out)?;
    let bytes = mib.checked_mul(1 << 20).ok_or("MIB is too large")?;
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let data = if noise {
        rng.gauss_bytes(usize::try_from(bytes)?)
    } else {
        rng.bytes(usize::try_from(bytes)?)
    };
    if let Some(raw) = raw {
        let mut file = std::fs::File::create(raw).map_err(|e| format!("{}: {e}", raw.display()))?;
        file.write_all(&data)
            .map_err(|e| format!("{}: {e}", raw.display()))?;
    }
    let record = Record::new("big")
        .with_scene_id("s0")
        .with_field("iq", iq_field(bytes / 8, data)?);
    let receipt = write_shard(&store, [record], "w0", 0, &ShardOptions::default())?;
    let summary = publish(
        &store,
        &[receipt],
        &PublishOptions::new("bench-large", "snap-1"),
    )?;
    Ok((summary, bytes))
}

fn small_record(n: u64, rng: &mut XorShift) -> Result<Record, Error> {
    let snr = (n % 40) as f32 * 0.5;
    let mut metadata = Object::new();
    metadata.insert("index".into(), Value::from(n));
    Ok(Record::new(format!("r{n}"))
        .with_scene_id(format!("s{}", n / 10))
        .with_metadata(metadata)
        .with_field("iq", iq_field(4, rng.bytes(32))?)
        .with_field(
            "snr_db",
            Field::new(DType::F32, vec![1], snr.to_le_bytes().to_vec())?,
        ))
}

fn many(out: &Path, count: u64, per_shard: u64) -> Result<(PublishSummary, u64), Error> {
    let store = store_at(out)?;
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    let receipts = write_in_shards(&store, count, per_shard.max(1), |n| {
        small_record(n, &mut rng)
    })?;
    let mut options = PublishOptions::new("bench-many", "snap-1");
    options.shards_per_manifest = SHARDS_PER_MANIFEST;
    let summary = publish(&store, &receipts, &options)?;
    Ok((summary, count * (32 + 4)))
}

const SCAN_RECORDS_PER_SHARD: u64 = 1_000;

/// Writes records `0..count`, made by `make`, in shards of `per_shard` (work id `w<k>` for
/// shard `k`).
fn write_in_shards(
    store: &LocalStore,
    count: u64,
    per_shard: u64,
    mut make: impl FnMut(u64) -> Result<Record, Error>,
) -> Result<Vec<ShardReceipt>, Error> {
    let mut receipts = Vec::new();
    let mut first = 0u64;
    while first < count {
        let end = (first + per_shard).min(count);
        let records: Vec<Record> = (first..end).map(&mut make).collect::<Result<_, _>>()?;
        let work = format!("w{}", first / per_shard);
        receipts.push(write_shard(
            store,
            records,
            &work,
            0,
            &ShardOptions::default(),
        )?);
        first = end;
    }
    Ok(receipts)
}

fn scan(out: &Path, count: u64, samples: u64) -> Result<(PublishSummary, u64), Error> {
    let store = store_at(out)?;
    let mut rng = XorShift(0x853c_49e6_748f_ea9b);
    let len = usize::try_from(samples.checked_mul(8).ok_or("SAMPLES is too large")?)?;
    let receipts = write_in_shards(&store, count, SCAN_RECORDS_PER_SHARD, |n| {
        Ok(Record::new(format!("r{n}"))
            .with_scene_id(format!("s{}", n / 10))
            .with_field("iq", iq_field(samples, rng.gauss_bytes(len))?))
    })?;
    let summary = publish(
        &store,
        &receipts,
        &PublishOptions::new("bench-scan", "snap-1"),
    )?;
    Ok((summary, count * len as u64))
}

fn run(args: &[String]) -> Result<(), Error> {
    let number = |s: &String| -> Result<u64, Error> {
        s.parse::<u64>()
            .map_err(|_| format!("{s:?} is not a number; {USAGE}").into())
    };
    let started = Instant::now();
    let (summary, tensor_bytes) = match args {
        [kind, out, mib] if kind == "large" || kind == "noise" => {
            large(Path::new(out), number(mib)?, None, kind == "noise")?
        }
        [kind, out, mib, raw] if kind == "large" || kind == "noise" => large(
            Path::new(out),
            number(mib)?,
            Some(&PathBuf::from(raw)),
            kind == "noise",
        )?,
        [kind, out, n, samples] if kind == "scan" => {
            scan(Path::new(out), number(n)?, number(samples)?)?
        }
        [kind, out, n] if kind == "many" => many(Path::new(out), number(n)?, RECORDS_PER_SHARD)?,
        [kind, out, n, per] if kind == "many" => many(Path::new(out), number(n)?, number(per)?)?,
        _ => return Err(USAGE.into()),
    };
    println!(
        "{{\"records\":{},\"shards\":{},\"manifest_pages\":{},\"stored_bytes\":{},\"tensor_bytes\":{},\"seconds\":{:.3}}}",
        summary.record_count,
        summary.shard_count,
        summary.manifest_pages,
        summary.stored_bytes,
        tensor_bytes,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("make_bench_dataset: {e}");
            ExitCode::FAILURE
        }
    }
}
