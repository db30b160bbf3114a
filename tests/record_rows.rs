//! Metadata shard rows: exact bytes, round trips, lenient reading, and agreement checks.

mod record_support;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::SeedableRng;
use record_support::*;
use sdsfs::format::dtype::DType;
use sdsfs::format::json::Value;
use sdsfs::format::limits::RecordLimits;
use sdsfs::format::record::*;

fn limits() -> RecordLimits {
    RecordLimits::default()
}

#[test]
fn known_row_is_exact() {
    let record = Record::new("r1")
        .with_metadata(obj(&[("snr", Value::Float(3.5))]))
        .with_field(
            "x",
            Field::new(DType::U8, vec![2], vec![0, 1])
                .unwrap()
                .with_axes(vec![Axis::new("n", 2).with_role("time")]),
        );
    // Written by hand from FORMAT.md section 3.
    let expected = r#"{"fields":{"x":{"axes":[{"coordinate":null,"id":null,"length":2,"metadata":{},"name":"n","role":"time"}],"dtype":"|u1","metadata":{},"shape":[2]}},"id":"r1","metadata":{"snr":3.5},"scene_id":null}"#;
    assert_eq!(record.meta().to_row_json(), expected);
    assert_eq!(
        RecordMeta::parse_row(expected.as_bytes(), &limits()).unwrap(),
        record.meta()
    );
}

#[test]
fn rows_read_dtype_str_and_plain_names() {
    // Earlier writers of this project wrote `complex64`; the library writes `<c8`.
    for (spelling, dtype) in [
        ("<c8", DType::C64),
        ("complex64", DType::C64),
        ("|b1", DType::Bool),
        ("bool", DType::Bool),
        ("<i2", DType::I16),
        ("int16", DType::I16),
    ] {
        let row = format!(
            r#"{{"fields":{{"x":{{"axes":[{{"length":1,"name":"n"}}],"dtype":"{spelling}","shape":[1]}}}},"id":"r"}}"#
        );
        let meta = RecordMeta::parse_row(row.as_bytes(), &limits()).unwrap();
        assert_eq!(meta.fields["x"].dtype, dtype, "{spelling}");
        // Written back, always as `dtype.str`.
        assert!(meta
            .to_row_json()
            .contains(&format!("\"dtype\":\"{}\"", dtype.dtype_str())));
    }
}

#[test]
fn rows_round_trip() {
    let mut rng = StdRng::seed_from_u64(3);
    for serial in 0..200 {
        let meta = random_record(&mut rng, serial).meta();
        let row = meta.to_row_json();
        assert_eq!(
            RecordMeta::parse_row(row.as_bytes(), &limits()).unwrap(),
            meta
        );
    }
}

#[test]
fn rows_ignore_unknown_keys_and_are_validated() {
    let row = r#"{"fields":{"x":{"axes":[],"dtype":"float32","shape":[],"later":1}},"id":"r","new":true}"#;
    let meta = RecordMeta::parse_row(row.as_bytes(), &limits()).unwrap();
    assert_eq!(meta.scene_id, None);
    assert_eq!(meta.fields["x"].dtype, DType::F32);
    let bad_rank = r#"{"fields":{"x":{"axes":[],"dtype":"float32","shape":[2]}},"id":"r"}"#;
    assert!(matches!(
        RecordMeta::parse_row(bad_rank.as_bytes(), &limits()),
        Err(RecordError::Validation {
            rule: rule::RANK_EQUALS_AXES,
            ..
        })
    ));
    let bad_dtype = r#"{"fields":{"x":{"axes":[],"dtype":"complex128","shape":[]}},"id":"r"}"#;
    assert_eq!(
        RecordMeta::parse_row(bad_dtype.as_bytes(), &limits()),
        Err(RecordError::UnsupportedDtype("complex128".into()))
    );
    let no_dtype = r#"{"fields":{"x":{"axes":[],"shape":[]}},"id":"r"}"#;
    assert!(matches!(
        RecordMeta::parse_row(no_dtype.as_bytes(), &limits()),
        Err(RecordError::Validation {
            rule: rule::KEY_TYPE,
            ..
        })
    ));
    let duplicate = r#"{"id":"r","id":"s","fields":{}}"#;
    assert!(matches!(
        RecordMeta::parse_row(duplicate.as_bytes(), &limits()),
        Err(RecordError::Json { .. })
    ));
}

#[test]
fn decoded_record_agrees_with_its_row() {
    let record = sample_record();
    let payload = encode(&record, &limits()).unwrap();
    let decoded = decode(Bytes::from(payload), &limits()).unwrap();
    let row = RecordMeta::parse_row(record.meta().to_row_json().as_bytes(), &limits()).unwrap();
    check_row_agrees(&row, &decoded.meta()).unwrap();
}

#[track_caller]
fn assert_disagrees(edit: impl FnOnce(&mut RecordMeta), what: &str) {
    let decoded = sample_record().meta();
    let mut row = decoded.clone();
    edit(&mut row);
    let err = check_row_agrees(&row, &decoded).unwrap_err();
    assert!(err.is_corruption());
    match err {
        RecordError::RowMismatch { what: found, .. } => assert_eq!(found, what),
        other => panic!("expected a row mismatch, got {other:?}"),
    }
}

#[test]
fn each_kind_of_disagreement_is_detected() {
    assert_disagrees(|r| r.id = "other".into(), "id");
    assert_disagrees(|r| r.scene_id = None, "scene_id");
    assert_disagrees(
        |r| {
            let f = r.fields.remove("labels").unwrap();
            r.fields.insert("labels2".into(), f);
        },
        "field names",
    );
    assert_disagrees(|r| drop(r.fields.remove("labels")), "field names");
    assert_disagrees(
        |r| r.fields.get_mut("labels").unwrap().dtype = DType::I8,
        "dtype",
    );
    assert_disagrees(
        |r| r.fields.get_mut("labels").unwrap().shape = vec![3],
        "shape",
    );
    assert_disagrees(
        |r| r.fields.get_mut("iq").unwrap().axes[1].role = None,
        "axes",
    );
    assert_disagrees(
        |r| r.fields.get_mut("iq").unwrap().axes[1].coordinate = None,
        "axes",
    );
    assert_disagrees(
        |r| r.fields.get_mut("iq").unwrap().metadata.clear(),
        "metadata",
    );
    assert_disagrees(
        |r| {
            r.metadata.insert("snr".into(), Value::Float(12.0));
        },
        "metadata",
    );
}

#[test]
fn row_size_is_bounded_by_max_metadata_bytes() {
    let meta = sample_record().meta();
    let row = meta.to_row_json();
    let size = row.len() as u64;
    let at = |max_metadata_bytes| RecordLimits {
        max_metadata_bytes,
        // A descriptor bound below the row's size must not matter to rows.
        max_descriptor_bytes: 1,
        ..limits()
    };
    assert_eq!(meta.encode_row(&at(size)).unwrap(), row);
    RecordMeta::parse_row(row.as_bytes(), &at(size)).unwrap();
    for err in [
        meta.encode_row(&at(size - 1)).unwrap_err(),
        RecordMeta::parse_row(row.as_bytes(), &at(size - 1)).unwrap_err(),
    ] {
        assert!(
            matches!(err, RecordError::Limit { limit, .. } if limit == limit::METADATA_BYTES),
            "{err}"
        );
    }
}
