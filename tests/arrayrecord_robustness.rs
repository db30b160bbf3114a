//! Mutation-based robustness: thousands of corrupted files fed to open/read/read_into/verify
//! must never panic, and damage to one data chunk only affects that chunk's records.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sdsfs::arrayrecord::{
    riegeli_hash, write_records, ArrayRecordReader, Error, ReaderLimits, WriterOptions,
};

fn sample_files() -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(7);
    let mut files = Vec::new();
    for options in [
        "",
        "group_size:3,uncompressed",
        "group_size:2,brotli",
        "snappy",
        "pad_to_block_boundary:true,group_size:2",
    ] {
        let records: Vec<Vec<u8>> = (0..12)
            .map(|i| {
                let len = [0, 5, 300, 5000, 70_000][i % 5];
                (0..len)
                    .map(|j| if i % 2 == 0 { (j % 7) as u8 } else { rng.gen() })
                    .collect()
            })
            .collect();
        files.push(write_records(WriterOptions::parse(options).unwrap(), &records).unwrap());
    }
    files
}

/// Exercises every entry point; any error is fine, a panic is not.
fn exercise(file: Vec<u8>) {
    let limits = ReaderLimits {
        max_in_memory_record_bytes: 16 << 20,
        max_streamed_record_bytes: 16 << 20,
        max_zstd_window_log: 27,
    };
    let source = Bytes::from(file);
    let _ = sdsfs::arrayrecord::walk_chunks(&source, "w")
        .take(64)
        .count();
    let Ok(reader) = ArrayRecordReader::open_with_limits(source, "fuzz", limits) else {
        return;
    };
    let _ = reader.verify_all();
    let n = reader.len().min(40);
    for i in 0..n {
        let _ = reader.read(i);
        let mut sink = Vec::new();
        let _ = reader.read_into(i, &mut sink);
        let _ = reader.chunk_span(i);
    }
    let _ = reader.read_chunk(0);
    let _ = reader.read(u64::MAX);
}

fn mutate(rng: &mut StdRng, file: &[u8]) -> Vec<u8> {
    let mut f = file.to_vec();
    match rng.gen_range(0..6) {
        0 => {
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(0..f.len());
                f[i] ^= 1 << rng.gen_range(0..8);
            }
        }
        1 => f.truncate(rng.gen_range(0..f.len())),
        2 => {
            let i = rng.gen_range(0..f.len());
            for _ in 0..rng.gen_range(1..30) {
                f.insert(i, rng.gen());
            }
        }
        3 => {
            // Random 8 bytes in the first block (chunk headers and the footer live there).
            let i = rng.gen_range(0..f.len().min(65536) - 8);
            f[i..i + 8].copy_from_slice(&rng.gen::<u64>().to_le_bytes());
        }
        4 => {
            let i = rng.gen_range(0..f.len());
            f.drain(i..(i + rng.gen_range(1..100)).min(f.len()));
        }
        _ => {
            // Flip a byte in the postscript block.
            let len = f.len();
            let i = rng.gen_range(len - 65536..len - 65536 + 200);
            f[i] = rng.gen();
        }
    }
    f
}

#[test]
fn thousands_of_mutants_never_panic() {
    let files = sample_files();
    let mut rng = StdRng::seed_from_u64(0xbad5eed);
    for round in 0..3000 {
        let base = &files[round % files.len()];
        let mutant = mutate(&mut rng, base);
        let result = catch_unwind(AssertUnwindSafe(|| exercise(mutant)));
        assert!(result.is_ok(), "panic on mutant {round}");
    }
}

/// Builds a 64-byte-aligned chunk header with a valid hash, to make hostile files whose
/// header checks pass.
fn valid_header(
    chunk_type: u8,
    data_size: u64,
    data_hash: u64,
    num_records: u64,
    decoded: u64,
) -> [u8; 40] {
    let mut h = [0u8; 40];
    h[8..16].copy_from_slice(&data_size.to_le_bytes());
    h[16..24].copy_from_slice(&data_hash.to_le_bytes());
    h[24..32].copy_from_slice(&(u64::from(chunk_type) | (num_records << 8)).to_le_bytes());
    h[32..40].copy_from_slice(&decoded.to_le_bytes());
    let hash = riegeli_hash(&h[8..40]);
    h[..8].copy_from_slice(&hash.to_le_bytes());
    h
}

#[test]
fn hostile_sizes_with_valid_hashes_are_refused_without_allocation() {
    let file = write_records(
        WriterOptions::default(),
        [b"abc".to_vec(), b"defg".to_vec()],
    )
    .unwrap();
    // Data chunk 0 (at 64) claims a 1 TB payload, 2^50 records, then a 1 TB decoded size.
    for (size, records, decoded) in [(1u64 << 40, 1, 3), (10, 1 << 50, 3), (28, 1, 1 << 40)] {
        let mut f = file.clone();
        f[64..104].copy_from_slice(&valid_header(b'r', size, 0, records, decoded));
        let r = ArrayRecordReader::open(Bytes::from(f), "hostile").unwrap();
        let err = r.read(0).unwrap_err();
        assert!(
            matches!(err, Error::Corrupt { .. } | Error::Limit { .. }),
            "{err}"
        );
        assert!(r.read_into(0, &mut Vec::new()).is_err());
        assert!(r.verify_all().is_err());
        assert_eq!(&r.read(1).unwrap()[..], b"defg");
    }
    // A footer offset pointing past the end.
    let mut f = file.clone();
    let ps = f.len() - 65536 + 24 + 40 + 2; // first postscript record's footer_offset varint
    f[ps] = 0xff;
    assert!(ArrayRecordReader::open(Bytes::from(f), "ps").is_err());
}

#[test]
fn a_flipped_data_byte_breaks_only_its_chunk() {
    let records: Vec<Vec<u8>> = (0..6).map(|i| vec![b'a' + i as u8; 1000]).collect();
    for options in ["uncompressed", "", "group_size:2"] {
        let opts = WriterOptions::parse(options).unwrap();
        let file = write_records(opts, &records).unwrap();
        let clean = ArrayRecordReader::open(Bytes::from(file.clone()), "clean").unwrap();
        let victim = 2u64;
        let span = clean.chunk_span(victim).unwrap();
        let mut f = file.clone();
        f[(span.start + 40 + 10) as usize] ^= 0x10; // inside the payload
        let r = ArrayRecordReader::open(Bytes::from(f), "objects/data/ab/x.arrayrecord").unwrap();
        let err = r.read(victim).unwrap_err();
        assert!(err.is_corrupt(), "{options}: {err}");
        let msg = err.to_string();
        assert!(
            msg.contains("objects/data/ab/x.arrayrecord")
                && msg.contains(&format!("offset {}", span.start))
                && msg.contains("data hash mismatch"),
            "{msg}"
        );
        assert!(r
            .read_into(victim, &mut Vec::new())
            .unwrap_err()
            .is_corrupt());
        assert!(r.verify_all().is_err());
        for i in 0..6u64 {
            if r.chunk_span(i).unwrap() != span {
                assert_eq!(
                    r.read(i).unwrap(),
                    records[i as usize],
                    "{options}: record {i}"
                );
            }
        }
    }
}

#[test]
fn streaming_a_large_record_matches_and_detects_corruption() {
    let big: Vec<u8> = (0..20_000_000u32).map(|i| (i / 7) as u8).collect();
    for options in ["uncompressed", "", "brotli:1", "snappy"] {
        let file = write_records(WriterOptions::parse(options).unwrap(), [&big[..], b"x"]).unwrap();
        let r = ArrayRecordReader::open(Bytes::from(file.clone()), "big").unwrap();
        let mut out = Vec::new();
        assert_eq!(r.read_into(0, &mut out).unwrap(), big.len() as u64);
        assert!(
            out.len() == big.len() && out == big,
            "{options}: streamed record differs (len {})",
            out.len()
        );
        let limited = ArrayRecordReader::open_with_limits(
            Bytes::from(file.clone()),
            "big",
            ReaderLimits {
                max_in_memory_record_bytes: 1 << 20,
                ..ReaderLimits::default()
            },
        )
        .unwrap();
        assert!(matches!(limited.read(0), Err(Error::Limit { .. })));
        let span = r.chunk_span(0).unwrap();
        let mut f = file;
        // Inside the payload: just after the chunk header, or mid-chunk for a big one.
        let at = (span.start + 50).max((span.start + span.end) / 2 - 1000) as usize;
        f[at] ^= 0x40;
        if let Ok(r) = ArrayRecordReader::open(Bytes::from(f), "big") {
            assert!(r.read_into(0, &mut Vec::new()).is_err(), "{options}");
        }
    }
}

#[test]
fn large_records_inside_a_shared_chunk_stream_exactly() {
    // A compressible and an incompressible large record (the latter spans more than two
    // read-ahead pieces), each between small ones in one zstd chunk: the streamed record is
    // cut out of the decoded segments at its offset.
    let mut rng = StdRng::seed_from_u64(7);
    let noisy: Vec<u8> = (0..12_000_000).map(|_| rng.gen()).collect();
    let smooth: Vec<u8> = (0..6_000_000u32).map(|i| (i / 5) as u8).collect();
    for big in [&noisy, &smooth] {
        let records: [&[u8]; 3] = [b"head", big, b"tail"];
        let options = WriterOptions::parse("group_size:3").unwrap();
        let file = write_records(options, records).unwrap();
        let r = ArrayRecordReader::open(Bytes::from(file), "shared").unwrap();
        assert_eq!(r.num_chunks(), 1);
        for (i, want) in records.iter().enumerate() {
            let mut out = Vec::new();
            assert_eq!(r.read_into(i as u64, &mut out).unwrap(), want.len() as u64);
            assert!(out == *want, "record {i} of {} bytes differs", big.len());
        }
    }
}
