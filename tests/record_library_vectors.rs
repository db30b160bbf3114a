//! The format owner's golden vectors: `V01_RECORD` and `V01_METADATA` of the library's
//! `tests/test_compatibility_contract.py` (identical in every release 0.2.0..0.4.0), extracted
//! into `fixtures/normative/library-v01-*` by `fixtures/normative/extract_library_vectors.py`.
//! The library asserts that it decodes and re-encodes both to the same bytes; so must we.

use std::path::PathBuf;

use bytes::Bytes;
use sdsfs::format::dtype::DType;
use sdsfs::format::json::{Object, Value};
use sdsfs::format::limits::RecordLimits;
use sdsfs::format::record::{check_row_agrees, decode, encode, Axis, RecordMeta};

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/normative")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn library_record_decodes_and_reencodes_to_the_same_bytes() {
    let golden = fixture("library-v01-record.safetensors");
    let limits = RecordLimits::default();
    let record = decode(Bytes::from(golden.clone()), &limits).unwrap();
    // What the library's own test asserts about it.
    assert_eq!(record.id, "golden");
    assert_eq!(record.scene_id, None);
    let mut kind = Object::new();
    kind.insert("kind".into(), Value::from("fixture"));
    assert_eq!(record.metadata, kind);
    let signal = &record.fields["signal"];
    assert_eq!(signal.meta.dtype, DType::F32);
    assert_eq!(signal.meta.shape, vec![3]);
    assert_eq!(signal.meta.axes, vec![Axis::new("time", 3)]);
    let samples: Vec<f32> = signal
        .data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(samples, [1.0, 2.0, 3.0]);
    assert_eq!(encode(&record, &limits).unwrap(), golden);
}

#[test]
fn library_metadata_row_parses_and_reserialises_to_the_same_bytes() {
    let golden = fixture("library-v01-metadata.json");
    let row = RecordMeta::parse_row(&golden, &RecordLimits::default()).unwrap();
    assert_eq!(row.to_row_json().as_bytes(), golden.as_slice());
    assert_eq!(row.fields["signal"].dtype, DType::F32);
    // The row is the golden record's row: ours, written from the decoded record, is the same.
    let record = decode(
        Bytes::from(fixture("library-v01-record.safetensors")),
        &RecordLimits::default(),
    )
    .unwrap();
    assert_eq!(record.meta().to_row_json().as_bytes(), golden.as_slice());
    check_row_agrees(&row, &record.meta()).unwrap();
}
