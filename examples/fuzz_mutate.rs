//! A standalone mutation fuzzer for the parsers that read user and storage data (the fallback
//! when `cargo fuzz` is not installed; the targets' properties live in `fuzz/common.rs`, shared
//! with the libFuzzer targets in `fuzz/fuzz_targets/`).
//!
//! ```text
//! cargo run --release --example fuzz_mutate -- TARGET SECONDS [SEED]
//! cargo run --release --example fuzz_mutate -- --write-seeds      # regenerates fuzz/seeds
//! ```
//! TARGET is one of `json`, `record`, `row`, `control`, `arrayrecord`, `names`, `claims`,
//! `render`, or `all`.
//! Each round takes a seed from `fuzz/seeds/TARGET/`, applies 1 to 8 random mutations (bit
//! flips, byte sets, interesting values, insertions, deletions, duplicated or spliced ranges,
//! extreme little-endian u64s, a decimal number replaced by one on the bound of a claim,
//! brackets nested up to 10,000 deep), and runs the target under `catch_unwind`. A panic, or a broken round-trip property, is a
//! finding: the input is saved to `fuzz/crashes/TARGET/` and the run exits nonzero. Inputs that
//! parse are added to the in-memory corpus, so later rounds mutate them too.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sdsfs::arrayrecord::{write_records, WriterOptions};
use sdsfs::format::json::Value;
use sdsfs::format::limits::RecordLimits;
use sdsfs::format::record::{encode, Record};

#[path = "../fuzz/common.rs"]
mod common;

use common::{run, sample_record, TARGETS};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const INTERESTING: [u8; 12] = [
    0, 1, 0x7f, 0x80, 0xff, b'"', b'{', b'[', b'\\', b'0', b'9', b'-',
];

/// Numbers that sit on the bounds of claims: the largest ordinal a mount can number (2^36 - 1)
/// and one past, the most records a 16 MiB budget can index (at 48 bytes each) and one past,
/// the edges of i64 and u64, a negative, a float, an exponent.
const INTERESTING_NUMBERS: [&str; 18] = [
    "0",
    "1",
    "2",
    "3",
    "-1",
    "68719476735",
    "68719476736",
    "349525",
    "349526",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1000000000000000",
    "3.0",
    "1e3",
    "100000",
];

fn mutate(rng: &mut StdRng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.gen_range(1..=8) {
        let len = out.len();
        match rng.gen_range(0..10) {
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
            8 if len > 0 => replace_number(rng, &mut out),
            9 => {
                // Nesting: `depth` brackets opened at one place and closed at a later one.
                let depth = [1, 8, 127, 128, 129, 10_000][rng.gen_range(0..6)];
                let a = rng.gen_range(0..=len);
                let b = rng.gen_range(a..=len);
                out.splice(b..b, std::iter::repeat_n(b']', depth));
                out.splice(a..a, std::iter::repeat_n(b'[', depth));
            }
            _ => {}
        }
    }
    out
}

/// Replaces the first decimal number at or after a random position with one of
/// [`INTERESTING_NUMBERS`] (counts, ordinals and sizes in JSON documents).
fn replace_number(rng: &mut StdRng, out: &mut Vec<u8>) {
    let from = rng.gen_range(0..out.len());
    let Some(start) = out[from..].iter().position(u8::is_ascii_digit) else {
        return;
    };
    let mut start = from + start;
    if start > 0 && out[start - 1] == b'-' {
        start -= 1;
    }
    let digits = out[start + 1..]
        .iter()
        .take_while(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        .count();
    let number = INTERESTING_NUMBERS[rng.gen_range(0..INTERESTING_NUMBERS.len())];
    out.splice(start..start + 1 + digits, number.bytes());
}

/// The most the in-memory corpus holds, so that the process's resident set stays what the
/// targets make it (`claims` bounds it; its inputs hold 128 KiB shards).
const CORPUS_BYTES: usize = 32 << 20;

fn load_seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = repo().join("fuzz/seeds").join(target);
    // `finding-*` files reproduce known defects (`--replay` them); fuzzing starts elsewhere.
    let known_finding = |p: &PathBuf| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("finding-"))
    };
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    names.retain(|p| !known_finding(p));
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
    let mut corpus_bytes: usize = corpus.iter().map(Vec::len).sum();
    let mut rng = StdRng::seed_from_u64(seed);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut runs, mut parsed, mut findings) = (0u64, 0u64, 0u64);
    let mut slowest = Duration::ZERO;
    while Instant::now() < deadline {
        let base = &corpus[rng.gen_range(0..corpus.len())];
        let input = mutate(&mut rng, base, &corpus);
        let started = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| run(target, &input)));
        let took = started.elapsed();
        if took > slowest {
            slowest = took;
            // Kept for a look (`--replay`) in fuzz/slowest/ (ignored by git; not in
            // fuzz/corpus/, which libFuzzer would start from).
            let dir = repo().join("fuzz/slowest").join(target);
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(dir.join("slowest"), &input);
        }
        runs += 1;
        let failure = match outcome {
            Ok(Ok(true)) => {
                parsed += 1;
                if corpus.len() < 4096
                    && input.len() < (1 << 20)
                    && corpus_bytes + input.len() <= CORPUS_BYTES
                {
                    corpus_bytes += input.len();
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
    for (name, input) in claims_seeds()? {
        put("claims", &name, &input)?;
    }
    for (name, input) in common::render::seeds() {
        put("render", &name, &input)?;
    }
    Ok(())
}

/// Inputs of the `claims` target (see `fuzz/claims.rs`): the objects as published, and edits
/// of the counts, ordinals, indices and sizes they claim, and of their nesting.
fn claims_seeds() -> Result<Vec<(String, Vec<u8>)>, String> {
    use common::claims::{base, input_of, parse_document};
    let base = base()?;
    let bytes = |name: &str| {
        base.bytes_of(name)
            .map(<[u8]>::to_vec)
            .ok_or(format!("base: no {name}"))
    };
    let doc = |name: &str| {
        base.bytes_of(name)
            .and_then(parse_document)
            .map(Value::Object)
            .ok_or(format!("base: {name} does not parse"))
    };
    let mut seeds = Vec::new();
    let mut seed = |name: &str, replacements: &[(&str, &[u8])]| {
        seeds.push((name.to_string(), input_of(replacements)));
    };
    for name in ["snapshot", "page1", "meta1", "data1", "data0"] {
        seed(&format!("{name}-as-published"), &[(name, &bytes(name)?)]);
    }
    // Record counts, consistent from the snapshot down to the shard entry of page 1 (whose
    // shard holds 5 records): beyond what a mount numbers, at its edge, beyond what the
    // budget can index, within it.
    for (label, total) in [
        ("1e15", 1_000_000_000_000_000u64),
        ("2p36-plus-1", (1 << 36) + 1),
        ("2p36", 1 << 36),
        ("349526", 349_526),
        ("300k", 300_000),
    ] {
        let (snapshot, page) = claim_records(doc("snapshot")?, doc("page1")?, total, None)?;
        seed(
            &format!("record-count-{label}"),
            &[("snapshot", &snapshot), ("page1", &page)],
        );
    }
    // A regression (see docs/RELIABILITY.md, "Fuzzing"): page 1 unreadable (no
    // `layout_version`) under a snapshot claiming 349,000 records, which the index's price
    // admits: building `by-id/` read the page again for every one of its ordinals until failed
    // pages were remembered.
    let (snapshot, page) = claim_records(doc("snapshot")?, doc("page1")?, 349_000, None)?;
    let page = String::from_utf8_lossy(&page).replace("  \"layout_version\": \"0.1\",\n", "");
    seed(
        "regression-by-id-reads-a-broken-page-once-per-ordinal",
        &[("snapshot", &snapshot), ("page1", page.as_bytes())],
    );
    // 5,000 valid records: every one a record of the shard by `record_indices`.
    let indices: Vec<Value> = (0..5_000).map(|i| Value::Int(i % 5)).collect();
    let (snapshot, page) = claim_records(doc("snapshot")?, doc("page1")?, 5_003, Some(indices))?;
    seed(
        "record-indices-5k-valid",
        &[("snapshot", &snapshot), ("page1", &page)],
    );
    let edits: [(&str, &str, &[&str], Value); 9] = [
        (
            "shard-count-1e12",
            "snapshot",
            &["shard_count"],
            Value::Int(1_000_000_000_000),
        ),
        (
            "manifest-shard-count-1e12",
            "snapshot",
            &["manifests", "1", "shard_count"],
            Value::Int(999_999_999_999),
        ),
        (
            "first-ordinal-u64-max",
            "page1",
            &["first_ordinal"],
            Value::Int(u64::MAX.into()),
        ),
        (
            "entry-first-ordinal-negative",
            "page1",
            &["shards", "0", "first_ordinal"],
            Value::Int(-1),
        ),
        (
            "record-indices-far",
            "page1",
            &["shards", "0", "record_indices"],
            Value::Array([0, 1, 2, 3, 1_000_000_000_000_000].map(Value::Int).to_vec()),
        ),
        (
            "record-indices-repeated",
            "page1",
            &["shards", "0", "record_indices"],
            Value::Array(vec![Value::Int(4); 5]),
        ),
        (
            "stored-bytes-1e15",
            "page0",
            &["shards", "0", "data", "stored_bytes"],
            Value::Int(1_000_000_000_000_000),
        ),
        (
            "snapshot-stored-bytes-u64-max",
            "snapshot",
            &["stored_bytes"],
            Value::Int(u64::MAX.into()),
        ),
        ("page-nesting-120", "page0", &["x"], nested(120)),
    ];
    for (label, name, path, value) in edits {
        let mut edited = doc(name)?;
        set(&mut edited, path, value)?;
        seed(label, &[(name, &text(&edited))]);
    }
    let mut deep = doc("page0")?;
    set(&mut deep, &["x"], Value::Null)?;
    let deep = String::from_utf8_lossy(&text(&deep))
        .replace("null", &("[".repeat(10_000) + &"]".repeat(10_000)));
    seed("page-nesting-10000", &[("page0", deep.as_bytes())]);
    Ok(seeds)
}

/// The snapshot and page 1 claiming `total` records in all (page 0 holds 3), with
/// `record_indices` on page 1's entry when given.
fn claim_records(
    mut snapshot: Value,
    mut page: Value,
    total: u64,
    indices: Option<Vec<Value>>,
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let on_page = Value::Int((total - 3).into());
    set(&mut snapshot, &["record_count"], Value::Int(total.into()))?;
    set(
        &mut snapshot,
        &["manifests", "1", "record_count"],
        on_page.clone(),
    )?;
    set(&mut page, &["record_count"], on_page.clone())?;
    set(&mut page, &["shards", "0", "record_count"], on_page)?;
    if let Some(indices) = indices {
        set(
            &mut page,
            &["shards", "0", "record_indices"],
            Value::Array(indices),
        )?;
    }
    Ok((text(&snapshot), text(&page)))
}

/// Arrays nested `depth` deep.
fn nested(depth: usize) -> Value {
    (0..depth).fold(Value::Int(0), |inner, _| Value::Array(vec![inner]))
}

/// Sets the value at `path` (object keys, array positions), adding a missing last key.
fn set(document: &mut Value, path: &[&str], value: Value) -> Result<(), String> {
    let (last, parents) = path.split_last().ok_or("empty path")?;
    let mut node = document;
    for key in parents {
        node = match node {
            Value::Object(object) => object.get_mut(*key),
            Value::Array(array) => key.parse::<usize>().ok().and_then(|i| array.get_mut(i)),
            _ => None,
        }
        .ok_or(format!("no {key} on the way to {path:?}"))?;
    }
    match node {
        Value::Object(object) => {
            object.insert((*last).into(), value);
            Ok(())
        }
        _ => Err(format!("{path:?} is not in an object")),
    }
}

/// A document's text as the library writes it.
fn text(document: &Value) -> Vec<u8> {
    let mut text = sdsfs::format::json::to_pretty(document);
    text.push('\n');
    text.into_bytes()
}

/// Runs `target` once on each file (a finding or a seed), printing its outcome and time (and,
/// for `claims` with `FUZZ_LOG` set, the log of a second run's steps).
fn replay(target: &str, files: &[String]) -> bool {
    let mut ok = true;
    for file in files {
        let Ok(input) = std::fs::read(file) else {
            eprintln!("{file}: cannot read");
            ok = false;
            continue;
        };
        let started = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| run(target, &input)));
        let took = started.elapsed().as_secs_f64() * 1000.0;
        let shown = match outcome {
            Ok(Ok(true)) => "parsed".to_string(),
            Ok(Ok(false)) => "refused".to_string(),
            Ok(Err(message)) => format!("FINDING {message}"),
            Err(_) => "FINDING panic".to_string(),
        };
        ok &= shown.starts_with("parsed") || shown.starts_with("refused");
        println!("{file}: {shown} ({took:.1} ms)");
        if target == "claims" && std::env::var_os("FUZZ_LOG").is_some() {
            for line in common::claims::run_logged(&input).1 {
                println!("    {line}");
            }
        }
    }
    ok
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
    if args.get(1).map(String::as_str) == Some("--replay") {
        let ok = replay(&args[0], &args[2..]);
        std::process::exit(if ok { 0 } else { 1 });
    }
    let (Some(target), Some(seconds)) = (args.first(), args.get(1)) else {
        eprintln!(
            "usage: fuzz_mutate TARGET|all SECONDS [SEED] | TARGET --replay FILE... | --write-seeds"
        );
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
