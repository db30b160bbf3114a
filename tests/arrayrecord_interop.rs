//! Interoperability with the reference implementation (PyPI `array-record` 0.8.6), driven
//! through `tests/python/arrayrecord_tool.py` in one batch per test (Python startup is slow).
//!
//! The Python interpreter is `$SDS_TEST_PYTHON` (default `<repo>/.venv/bin/python`). A missing
//! interpreter or module is a test failure, not a skip: interop is the contract.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sdsfs::arrayrecord::{ArrayRecordReader, ArrayRecordWriter, WriterOptions};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    let py = std::env::var_os("SDS_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv/bin/python"));
    assert!(
        py.exists(),
        "reference Python {} not found: run scripts/setup-test-env or set SDS_TEST_PYTHON",
        py.display()
    );
    let probe = Command::new(&py)
        .args(["-c", "import array_record.python.array_record_module"])
        .output()
        .unwrap();
    assert!(
        probe.status.success(),
        "{} cannot import array_record (pip install array-record==0.8.6): {}",
        py.display(),
        String::from_utf8_lossy(&probe.stderr)
    );
    py
}

fn write_lp(path: &Path, records: &[Vec<u8>]) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for r in records {
        f.write_all(&(r.len() as u64).to_le_bytes()).unwrap();
        f.write_all(r).unwrap();
    }
    f.flush().unwrap();
}

fn read_lp(path: &Path) -> Vec<Vec<u8>> {
    let mut data = Vec::new();
    std::fs::File::open(path)
        .unwrap()
        .read_to_end(&mut data)
        .unwrap();
    let mut out = Vec::new();
    let mut rest = &data[..];
    while !rest.is_empty() {
        let n = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
        out.push(rest[8..8 + n].to_vec());
        rest = &rest[8 + n..];
    }
    out
}

/// One interop case: options and records.
struct Case {
    options: String,
    records: Vec<Vec<u8>>,
}

/// Complex-IQ-like samples: compressible but not trivially so.
fn iq_like(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut phase: f32 = 0.0;
    let step: f32 = rng.gen_range(0.01..0.3);
    while out.len() < len {
        phase += step;
        let noise: i16 = rng.gen_range(-3..=3);
        let i = (phase.cos() * 2000.0) as i16 + noise;
        out.extend_from_slice(&i.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn record(rng: &mut StdRng, max_large: usize) -> Vec<u8> {
    let len = match rng.gen_range(0..10) {
        0..=3 => rng.gen_range(0..100),
        4..=6 => rng.gen_range(100..10_000),
        7..=8 => rng.gen_range(10_000..100_000).min(max_large),
        _ => rng.gen_range(0..=max_large),
    };
    match rng.gen_range(0..3) {
        0 => (0..len).map(|_| rng.gen()).collect(),
        1 => iq_like(rng, len),
        _ => b"riegeli array record "
            .iter()
            .copied()
            .cycle()
            .take(len)
            .collect(),
    }
}

fn random_case(rng: &mut StdRng, options: String, count: usize) -> Case {
    // Slow compressors get small records to keep the suite fast.
    let slow = ["zstd:19", "brotli:9", "window_log:26"];
    let max_large = if options.contains("brotli:11") {
        50_000
    } else if slow.iter().any(|s| options.contains(s)) {
        200_000
    } else {
        2 << 20
    };
    let records = (0..count).map(|_| record(rng, max_large)).collect();
    Case { options, records }
}

/// Writes every case with us (to a file, through `std::fs::File`) and with the reference,
/// reads each file with the other implementation, and compares records and bytes.
fn run_cases(cases: &[Case], tag: &str) {
    let py = python();
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let started = std::time::Instant::now();
        let ours = dir.path().join(format!("{i}.ours.arrayrecord"));
        let options = WriterOptions::parse(&case.options).unwrap();
        let mut w = ArrayRecordWriter::new(std::fs::File::create(&ours).unwrap(), options).unwrap();
        for (k, r) in case.records.iter().enumerate() {
            // Every third record arrives in three pieces cut anywhere, as a record encoder
            // hands over a header and its tensors: the bytes must not change.
            if k % 3 == 2 {
                let (a, b) = (r.len() / 3, r.len() - r.len() / 7);
                w.write_pieces(&[&r[..a], &r[a..b], &r[b..]]).unwrap();
            } else {
                w.write(r).unwrap();
            }
        }
        w.finish().unwrap().sync_all().unwrap();
        let bytes: usize = case.records.iter().map(Vec::len).sum();
        eprintln!(
            "{tag} case {i}: {:?}, {} records, {bytes} bytes, written in {:?}",
            case.options,
            case.records.len(),
            started.elapsed()
        );
        let input = dir.path().join(format!("{i}.in"));
        write_lp(&input, &case.records);
        jobs.push(serde_json::json!({"op": "write", "out": dir.path().join(format!("{i}.ref.arrayrecord")), "options": case.options, "records": input}));
        jobs.push(serde_json::json!({"op": "read", "file": ours, "records": dir.path().join(format!("{i}.back"))}));
    }
    let jobs_path = dir.path().join("jobs.json");
    std::fs::write(&jobs_path, serde_json::to_vec(&jobs).unwrap()).unwrap();
    let out = Command::new(&py)
        .arg(repo().join("tests/python/arrayrecord_tool.py"))
        .arg("batch")
        .arg(&jobs_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "reference tool failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut differing = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let what = format!(
            "{tag} case {i} ({:?}, {} records)",
            case.options,
            case.records.len()
        );
        // The reference reads our file exactly.
        let back = read_lp(&dir.path().join(format!("{i}.back")));
        assert!(
            back == case.records,
            "{what}: reference reader disagrees with our writer"
        );
        // We read the reference's file exactly (from a File source).
        let ref_path = dir.path().join(format!("{i}.ref.arrayrecord"));
        let reader =
            ArrayRecordReader::open(std::fs::File::open(&ref_path).unwrap(), what.clone()).unwrap();
        assert_eq!(reader.len(), case.records.len() as u64, "{what}");
        // Chunk by chunk (a record read decodes its whole chunk), plus one single-record read.
        let read: Vec<_> = (0..reader.num_chunks())
            .flat_map(|k| reader.read_chunk(k).unwrap())
            .collect();
        assert!(read == case.records, "{what}: our reader disagrees");
        if let Some(last) = case.records.last() {
            let at = case.records.len() as u64 - 1;
            assert!(reader.read(at).unwrap() == last[..], "{what}: record {at}");
        }
        reader.verify_all().unwrap();
        // And the bytes are the reference's.
        let ours = std::fs::read(dir.path().join(format!("{i}.ours.arrayrecord"))).unwrap();
        let theirs = std::fs::read(&ref_path).unwrap();
        if ours != theirs {
            differing.push(what);
        }
    }
    assert!(
        differing.is_empty(),
        "bytes differ from the reference for {} of {} cases: {differing:#?}",
        differing.len(),
        cases.len()
    );
}

const COMPRESSIONS: [&str; 13] = [
    "",
    "zstd:1",
    "zstd:19",
    "brotli",
    "brotli:9",
    "snappy",
    "uncompressed",
    "pad_to_block_boundary:true",
    "brotli:0",
    "brotli:1",
    "brotli:4,window_log:26",
    "snappy:2",
    "brotli:11,window_log:16",
];
const GROUP_SIZES: [u32; 5] = [1, 2, 5, 13, 300];

#[test]
fn every_compression_and_group_size_interoperates() {
    let mut rng = StdRng::seed_from_u64(0x5d5f5);
    let mut cases = Vec::new();
    for (c, compression) in COMPRESSIONS.iter().enumerate() {
        for (g, group) in GROUP_SIZES.iter().enumerate() {
            // Every group size with default zstd and uncompressed; a rotating subset otherwise.
            if c >= 1 && c != 6 && (g + c) % 2 == 1 {
                continue;
            }
            let options = format!("{compression},group_size:{group}");
            let count = rng.gen_range(0..30) + if *group == 300 { 300 } else { 0 };
            cases.push(random_case(&mut rng, options, count));
        }
    }
    // Boundary cases of the zstd one-shot/streamed rule and the empty file.
    cases.push(Case {
        options: "group_size:2".into(),
        records: vec![vec![1; 2048], vec![2; 2048]],
    });
    cases.push(Case {
        options: "".into(),
        records: vec![vec![3; 4096]],
    });
    cases.push(Case {
        options: "group_size:5000".into(),
        records: (0..4088).map(|i| vec![i as u8; i % 100]).collect(),
    });
    cases.push(Case {
        options: "group_size:5000".into(),
        records: (0..4089).map(|i| vec![i as u8; i % 100]).collect(),
    });
    cases.push(Case {
        options: "".into(),
        records: vec![],
    });
    cases.push(Case {
        options: "window_log:24,zstd:5".into(),
        records: vec![vec![9; 300_000]],
    });
    // Records whose chunks are larger than the writer's in-memory spool (4 MiB), alone or
    // in a group, streamed in pieces or not.
    let large = iq_like(&mut rng, 6 << 20);
    for options in ["", "uncompressed", "snappy", "group_size:2"] {
        cases.push(Case {
            options: options.into(),
            records: vec![vec![1; 10], large.clone(), large.clone(), vec![2; 10]],
        });
    }
    run_cases(&cases, "fixed");
}

#[test]
fn randomized_round_trips_both_ways() {
    let seed = std::env::var("SDS_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20250101u64);
    eprintln!("randomized interop seed {seed} (set SDS_TEST_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);
    let cases: Vec<Case> = (0..16)
        .map(|_| {
            let compression = COMPRESSIONS[rng.gen_range(0..COMPRESSIONS.len())];
            let group = GROUP_SIZES[rng.gen_range(0..GROUP_SIZES.len())];
            let pad = if rng.gen_bool(0.2) {
                ",pad_to_block_boundary:true"
            } else {
                ""
            };
            let count = rng.gen_range(0..40);
            random_case(
                &mut rng,
                format!("{compression},group_size:{group}{pad}"),
                count,
            )
        })
        .collect();
    run_cases(&cases, "random");
}
