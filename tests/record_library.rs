//! Randomized interop with the format owner's record codec (`signal_dataset.record` of the
//! library, run through `tests/python/record_tool.py` in `$SDS_TEST_PYTHON`):
//! - the library encodes records of many shapes, dtypes, axes, coordinates and metadata (big
//!   integers, non-ASCII text) with their metadata rows; we decode each record and re-encode it
//!   to the same bytes, parse each row and re-serialise it to the same bytes, and write the same
//!   row for the decoded record;
//! - we encode random records and rows; the library decodes each record and re-encodes it to
//!   our bytes, and reads each row back to our bytes.
//!
//! The test fails, never skips, when the interpreter or the library is missing.

mod common;
mod record_support;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::SeedableRng;
use record_support::random_record;
use sdsfs::format::limits::RecordLimits;
use sdsfs::format::record::{check_row_agrees, decode, encode, RecordMeta};

/// Records per direction; `SDS_INTEROP_RECORDS` raises it for a longer hunt.
fn records() -> usize {
    std::env::var("SDS_INTEROP_RECORDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300)
}

fn frame(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn frames(mut data: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let (length, rest) = data.split_at(8);
        let length = u64::from_le_bytes(length.try_into().unwrap()) as usize;
        out.push(rest[..length].to_vec());
        data = &rest[length..];
    }
    out
}

#[test]
fn library_records_and_rows_round_trip_through_ours() {
    let limits = RecordLimits::default();
    let count = records();
    let output = common::run_python("record_tool.py", &["encode", "7", &count.to_string()], b"");
    let parts = frames(&output);
    assert_eq!(
        parts.len(),
        2 * count,
        "the library returned a different count"
    );
    let mut big_ints = 0;
    for (i, pair) in parts.chunks(2).enumerate() {
        let (payload, row) = (&pair[0], &pair[1]);
        let record = decode(Bytes::from(payload.clone()), &limits)
            .unwrap_or_else(|e| panic!("library record {i}: {e}"));
        let again = encode(&record, &limits).unwrap();
        assert!(
            &again == payload,
            "record {i} re-encoded differently:\n ours    {}\n library {}",
            String::from_utf8_lossy(&again),
            String::from_utf8_lossy(payload)
        );
        let parsed =
            RecordMeta::parse_row(row, &limits).unwrap_or_else(|e| panic!("library row {i}: {e}"));
        assert_eq!(
            parsed.to_row_json().as_bytes(),
            row.as_slice(),
            "row {i} re-serialised"
        );
        let ours = record.meta().to_row_json();
        assert_eq!(ours.as_bytes(), row.as_slice(), "our row of record {i}");
        check_row_agrees(&parsed, &record.meta()).unwrap();
        if std::str::from_utf8(row)
            .unwrap()
            .contains("1180591620717411303424")
        {
            big_ints += 1;
        }
    }
    // The generator's big integers did reach us (2**70 among them).
    assert!(big_ints > 0, "no record carried 2**70");
}

#[test]
fn our_records_and_rows_are_the_librarys_bytes() {
    let limits = RecordLimits::default();
    let mut rng = StdRng::seed_from_u64(0x11b);
    let mut input = Vec::new();
    let count = records();
    for serial in 0..count {
        let record = random_record(&mut rng, serial);
        frame(&mut input, &encode(&record, &limits).unwrap());
        frame(&mut input, record.meta().to_row_json().as_bytes());
    }
    let output = common::run_python("record_tool.py", &["check"], &input);
    let lines: Vec<&str> = std::str::from_utf8(&output).unwrap().lines().collect();
    assert_eq!(lines.len(), count, "the library checked a different count");
    let expected = r#"{"record": true, "row": true, "row_of_record": true, "error": null}"#;
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(*line, expected, "record {i}");
    }
}
