//! A standalone mutation fuzzer for the parsers that read user and storage data (the fallback
//! when `cargo fuzz` is not installed; the targets' properties live in `fuzz/common.rs`, shared
//! with the libFuzzer targets in `fuzz/fuzz_targets/`).
//!
//! ```text
//! cargo run --release --example fuzz_mutate -- TARGET SECONDS [SEED]
//! cargo run --release --example fuzz_mutate -- --write-seeds      # regenerates fuzz/seeds
//! ```
//! TARGET is one of `json`, `record`, `row`, `control`, `arrayrecord`, `names`, or `all`.
//! Each round takes a seed from `fuzz/seeds/TARGET/`, applies 1 to 8 random mutations (bit
//! flips, byte sets, interesting values, insertions, deletions, duplicated or spliced ranges),
//! and runs the target under `catch_unwind`. A panic, or a broken round-trip property, is a
//! finding: the input is saved to `fuzz/crashes/TARGET/` and the run exits nonzero. Inputs that
//! parse are added to the in-memory corpus, so later rounds mutate them too.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sdsfs::arrayrecord::{write_records, WriterOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::Value;
use sdsfs::format::limits::RecordLimits;
use sdsfs::format::record::{encode, Axis, Coordinate, Field, Record};

#[path = "../fuzz/common.rs"]
mod common;

use common::{run, TARGETS};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const INTERESTING: [u8; 12] = [
    0, 1, 0x7f, 0x80, 0xff, b'"', b'{', b'[', b'\\', b'0', b'9', b'-',
];

fn mutate(rng: &mut StdRng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.gen_range(1..=8) {
        let len = out.len();
        match rng.gen_range(0..8) {
            0 if len > 0 => {
                let i = rng.gen_range(0..len);
                out[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if len > 0 => {
                let i = rng.gen_range(0..len);
                out[i] = INTERESTING[rng.gen_range(0..INTERESTING.len())];
            }
            2 if len > 0 => {
                let i = rng.gen_range(0..len);
                out[i] = rng.gen();
            }
            3 => {
                let i = rng.gen_range(0..=len);
                let n = rng.gen_range(1..=16);
                let bytes: Vec<u8> = (0..n)
                    .map(|_| INTERESTING[rng.gen_range(0..INTERESTING.len())])
                    .collect();
                out.splice(i..i, bytes);
            }
            4 if len > 0 => {
                let a = rng.gen_range(0..len);
                let b = (a + rng.gen_range(1..=64)).min(len);
                out.drain(a..b);
            }
            5 if len > 0 => {
                let a = rng.gen_range(0..len);
                let b = (a + rng.gen_range(1..=64)).min(len);
                let copy = out[a..b].to_vec();
                let at = rng.gen_range(0..=len);
                out.splice(at..at, copy);
            }
            6 if !corpus.is_empty() => {
                let other = &corpus[rng.gen_range(0..corpus.len())];
                if !other.is_empty() {
                    let a = rng.gen_range(0..other.len());
                    let b = (a + rng.gen_range(1..=256)).min(other.len());
                    let at = rng.gen_range(0..=len);
                    out.splice(at..at, other[a..b].iter().copied());
                }
            }
            7 if len >= 8 => {
                // A little-endian u64 in the input set to an extreme.
                let i = rng.gen_range(0..=len - 8);
                let value: u64 = [u64::MAX, 1 << 40, 1 << 62, 0, 65536][rng.gen_range(0..5)];
                out[i..i + 8].copy_from_slice(&value.to_le_bytes());
            }
            _ => {}
        }
    }
    out
}

fn load_seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = repo().join("fuzz/seeds").join(target);
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    names.sort();
    names.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

fn fuzz(target: &str, seconds: u64, seed: u64) -> bool {
    let mut corpus = load_seeds(target);
    if corpus.is_empty() {
        eprintln!("{target}: no seeds in fuzz/seeds/{target} (run --write-seeds)");
        return false;
    }
    let seeds = corpus.len();
    let mut rng = StdRng::seed_from_u64(seed);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut runs, mut parsed, mut findings) = (0u64, 0u64, 0u64);
    let mut slowest = Duration::ZERO;
    while Instant::now() < deadline {
        let base = &corpus[rng.gen_range(0..corpus.len())];
        let input = mutate(&mut rng, base, &corpus);
        let started = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| run(target, &input)));
        slowest = slowest.max(started.elapsed());
        runs += 1;
        let failure = match outcome {
            Ok(Ok(true)) => {
                parsed += 1;
                if corpus.len() < 4096 && input.len() < (1 << 20) {
                    corpus.push(input.clone());
                }
                None
            }
            Ok(Ok(false)) => None,
            Ok(Err(message)) => Some(message),
            Err(_) => Some("panic".to_string()),
        };
        if let Some(message) = failure {
            findings += 1;
            let dir = repo().join("fuzz/crashes").join(target);
            let _ = std::fs::create_dir_all(&dir);
            let name = sdsfs::format::documents::ids::sha256_hex(&input);
            let _ = std::fs::write(dir.join(&name[..16]), &input);
            eprintln!("{target}: FINDING {message} (saved {})", &name[..16]);
            if findings >= 10 {
                break;
            }
        }
    }
    println!(
        "{target}: {runs} runs in {seconds} s from {seeds} seeds, {parsed} parsed, corpus {}, \
         slowest {:.1} ms, {findings} findings",
        corpus.len(),
        slowest.as_secs_f64() * 1000.0
    );
    findings == 0
}

fn sample_record(serial: usize) -> Record {
    let n = 4 + serial as u64;
    let data: Vec<u8> = (0..n * 8).map(|b| (b as u8).wrapping_mul(31)).collect();
    let iq = Field::new(DType::C64, vec![n], data)
        .expect("field")
        .with_axes(vec![Axis::new("time", n)
            .with_id("t")
            .with_coordinate(Coordinate::regular(0.0, 1e-6).with_unit("s"))]);
    let label = Field::new(DType::I16, vec![2, 2], vec![1, 0, 2, 0, 3, 0, 4, 0])
        .expect("field")
        .with_axes(vec![Axis::new("a", 2), Axis::new("b", 2)]);
    let mut metadata = sdsfs::format::json::Object::new();
    metadata.insert("snr_db".into(), Value::Float(1.5));
    metadata.insert("tags".into(), Value::Array(vec!["rf".into(), "ü".into()]));
    Record::new(format!("seed-{serial}"))
        .with_metadata(metadata)
        .with_scene_id("scene")
        .with_field("rx/iq", iq)
        .with_field("label", label)
}

fn write_seeds() -> Result<(), String> {
    use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
    use sdsfs::storage::LocalStore;
    let root = repo().join("fuzz/seeds");
    let put = |target: &str, name: &str, bytes: &[u8]| -> Result<(), String> {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::write(dir.join(name), bytes).map_err(|e| e.to_string())
    };
    let limits = RecordLimits::default();
    let records: Vec<Record> = (0..3).map(sample_record).collect();
    let mut payloads = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let payload = encode(record, &limits).map_err(|e| e.to_string())?;
        put("record", &format!("record-{i}"), &payload)?;
        put(
            "row",
            &format!("row-{i}"),
            record.meta().to_row_json().as_bytes(),
        )?;
        payloads.push(payload);
    }
    for (name, options) in [
        ("zstd", ""),
        ("plain", "uncompressed"),
        ("grouped", "group_size:2"),
    ] {
        let options = WriterOptions::parse(options).map_err(|e| e.to_string())?;
        let file = write_records(options, payloads.clone()).map_err(|e| e.to_string())?;
        put("arrayrecord", &format!("{name}.arrayrecord"), &file)?;
    }
    // Control documents from a real publication.
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let store = LocalStore::open(dir.path()).map_err(|e| e.to_string())?;
    let receipt = write_shard(&store, records, "w0", 0, &ShardOptions::default())
        .map_err(|e| e.to_string())?;
    publish(
        &store,
        &[receipt],
        &PublishOptions::new("ds-seed", "snap-seed"),
    )
    .map_err(|e| e.to_string())?;
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| e.to_string())? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
                let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
                let name = name.unwrap_or_default();
                put("control", &name, &bytes)?;
                put("json", &name, &bytes)?;
            }
        }
    }
    let annotation_docs: [(&str, &str); 3] = [
        ("catalog.json", "{\n  \"revision\": {\n    \"path\": \"annotations/catalogs/00.json\"\n  }\n}\n"),
        ("revision.json", "{\n  \"sets\": {\n    \"labels\": {\n      \"path\": \"annotations/sets/labels/p/root.json\",\n      \"stored_bytes\": 10\n    }\n  }\n}\n"),
        ("set-root.json", "{\n  \"metadata\": {},\n  \"name\": \"labels\",\n  \"publication_id\": \"p\",\n  \"record_count\": 1,\n  \"shards\": [\n    {\n      \"first_ordinal\": 0,\n      \"object\": {\n        \"path\": \"annotations/sets/labels/p/objects/00/00.arrayrecord\",\n        \"stored_bytes\": 5\n      },\n      \"record_count\": 1\n    }\n  ],\n  \"source_snapshot_id\": \"snap-seed\"\n}\n"),
    ];
    for (name, text) in annotation_docs {
        put("control", name, text.as_bytes())?;
    }
    put("json", "numbers.json", b"{\"a\":[1,-0.0,1e-05,1.2345678901234568e+17,18446744073709551615,-9223372036854775808,5e-324],\"b\":\"\\u00e9\\n\\u2028\"}")?;
    for (i, name) in [
        "rx/iq",
        "a//b",
        ".",
        "..",
        "x.raw/y",
        "100%",
        "nul\0byte",
        "\u{e9}t\u{e9}",
        "",
    ]
    .iter()
    .enumerate()
    {
        put("names", &format!("name-{i}"), name.as_bytes())?;
    }
    put("names", "long", "é".repeat(200).as_bytes())?;
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--write-seeds") {
        if let Err(e) = write_seeds() {
            eprintln!("cannot write seeds: {e}");
            std::process::exit(2);
        }
        println!("seeds written to {}", repo().join("fuzz/seeds").display());
        return;
    }
    let (Some(target), Some(seconds)) = (args.first(), args.get(1)) else {
        eprintln!("usage: fuzz_mutate TARGET|all SECONDS [SEED] | --write-seeds");
        std::process::exit(2);
    };
    let seconds: u64 = seconds.parse().unwrap_or(10);
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    // Findings are reported, not printed by the default hook for every panic.
    std::panic::set_hook(Box::new(|_| {}));
    let targets: Vec<&str> = if target == "all" {
        TARGETS.to_vec()
    } else {
        vec![target.as_str()]
    };
    let mut ok = true;
    for target in targets {
        ok &= fuzz(target, seconds, seed);
    }
    std::process::exit(if ok { 0 } else { 1 });
}
