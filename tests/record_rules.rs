//! One test per rule: each bad record or payload is refused with the specific error.

mod record_support;

use bytes::Bytes;
use record_support::*;
use sdsfs::format::dtype::DType;
use sdsfs::format::json::{Object, Value};
use sdsfs::format::limits::RecordLimits;
use sdsfs::format::record::*;

fn limits() -> RecordLimits {
    RecordLimits::default()
}

fn encode_err(record: &Record) -> RecordError {
    encode(record, &limits()).unwrap_err()
}

fn decode_err(payload: Vec<u8>) -> RecordError {
    decode(Bytes::from(payload), &limits()).unwrap_err()
}

#[track_caller]
fn assert_rule(err: RecordError, expected: &str) {
    match &err {
        RecordError::Validation { rule, .. } | RecordError::Corrupt { rule, .. } => {
            assert_eq!(*rule, expected, "{err}")
        }
        other => panic!("expected rule {expected:?}, got {other:?}"),
    }
}

#[track_caller]
fn assert_limit(err: RecordError, expected: &str) {
    match err {
        RecordError::Limit { limit, value, max } => {
            assert_eq!(limit, expected);
            assert!(value > max);
        }
        other => panic!("expected limit {expected:?}, got {other:?}"),
    }
}

fn u8_field(shape: Vec<u64>) -> Field {
    let len = shape.iter().product::<u64>() as usize;
    Field::new(DType::U8, shape, vec![0u8; len]).unwrap()
}

// ----- validation on write --------------------------------------------------------------------

#[test]
fn id_must_be_nonempty() {
    let mut record = sample_record();
    record.id.clear();
    assert_rule(encode_err(&record), rule::ID_NONEMPTY);
}

#[test]
fn fields_must_be_nonempty() {
    assert_rule(encode_err(&Record::new("r")), rule::FIELDS_NONEMPTY);
}

#[test]
fn field_names_must_be_nonempty() {
    let record = Record::new("r").with_field("", u8_field(vec![1]));
    assert_rule(encode_err(&record), rule::FIELD_NAME_NONEMPTY);
}

#[test]
fn rank_must_equal_axes() {
    let record = Record::new("r").with_field("x", u8_field(vec![2]).with_axes(vec![]));
    assert_rule(encode_err(&record), rule::RANK_EQUALS_AXES);
    let zero_d = u8_field(vec![]).with_axes(vec![Axis::new("a", 1)]);
    assert_rule(
        encode_err(&Record::new("r").with_field("x", zero_d)),
        rule::RANK_EQUALS_AXES,
    );
}

#[test]
fn axis_length_must_equal_dimension() {
    let record =
        Record::new("r").with_field("x", u8_field(vec![2]).with_axes(vec![Axis::new("a", 3)]));
    assert_rule(encode_err(&record), rule::AXIS_LENGTH);
}

#[test]
fn axis_names_nonempty_and_unique() {
    let record =
        Record::new("r").with_field("x", u8_field(vec![2]).with_axes(vec![Axis::new("", 2)]));
    assert_rule(encode_err(&record), rule::AXIS_NAME_NONEMPTY);
    let dup = u8_field(vec![2, 2]).with_axes(vec![Axis::new("a", 2), Axis::new("a", 2)]);
    assert_rule(
        encode_err(&Record::new("r").with_field("x", dup)),
        rule::AXIS_NAME_UNIQUE,
    );
    // The same name in two different fields is fine.
    let ok = Record::new("r")
        .with_field("x", u8_field(vec![2]).with_axes(vec![Axis::new("a", 2)]))
        .with_field("y", u8_field(vec![3]).with_axes(vec![Axis::new("a", 3)]));
    encode(&ok, &limits()).unwrap();
}

#[test]
fn reused_axis_id_needs_same_length_and_coordinate() {
    let length = Record::new("r")
        .with_field(
            "x",
            u8_field(vec![2]).with_axes(vec![Axis::new("a", 2).with_id("t")]),
        )
        .with_field(
            "y",
            u8_field(vec![3]).with_axes(vec![Axis::new("a", 3).with_id("t")]),
        );
    assert_rule(encode_err(&length), rule::AXIS_ID_CONSISTENT);
    let coordinate = Record::new("r")
        .with_field(
            "x",
            u8_field(vec![2]).with_axes(vec![Axis::new("a", 2).with_id("t")]),
        )
        .with_field(
            "y",
            u8_field(vec![2]).with_axes(vec![Axis::new("b", 2)
                .with_id("t")
                .with_coordinate(Coordinate::regular(0i64, 1i64))]),
        );
    assert_rule(encode_err(&coordinate), rule::AXIS_ID_CONSISTENT);
    // The library compares coordinates with Python's ==, where 1 == 1.0: they agree.
    let int_float = Record::new("r")
        .with_field(
            "x",
            u8_field(vec![2]).with_axes(vec![Axis::new("a", 2)
                .with_id("t")
                .with_coordinate(Coordinate::regular(0i64, 1i64))]),
        )
        .with_field(
            "y",
            u8_field(vec![2]).with_axes(vec![Axis::new("a", 2)
                .with_id("t")
                .with_coordinate(Coordinate::regular(0i64, 1.0))]),
        );
    encode(&int_float, &limits()).unwrap();
    encode(&sample_record(), &limits()).unwrap(); // "ch" reused consistently
}

fn with_coordinate(c: Coordinate) -> Record {
    Record::new("r").with_field(
        "x",
        u8_field(vec![2]).with_axes(vec![Axis::new("a", 2).with_coordinate(c)]),
    )
}

#[test]
fn coordinate_forms() {
    let values = Coordinate::from_values(vec![Value::Int(1)]);
    assert_rule(
        encode_err(&with_coordinate(values)),
        rule::COORDINATE_VALUES_LENGTH,
    );
    let mut both = Coordinate::from_values(vec![Value::Int(1), Value::Int(2)]);
    both.start = Some(Value::Int(0));
    both.step = Some(Value::Int(1));
    assert_rule(
        encode_err(&with_coordinate(both)),
        rule::COORDINATE_FORMS_EXCLUSIVE,
    );
    let mut with_start = Coordinate::from_values(vec![Value::Int(1), Value::Int(2)]);
    with_start.start = Some(Value::Int(0));
    assert_rule(
        encode_err(&with_coordinate(with_start)),
        rule::COORDINATE_FORMS_EXCLUSIVE,
    );
    let start_only = Coordinate {
        start: Some(Value::Int(0)),
        ..Coordinate::default()
    };
    assert_rule(
        encode_err(&with_coordinate(start_only)),
        rule::COORDINATE_START_STEP_TOGETHER,
    );
    let step_only = Coordinate {
        step: Some(Value::Float(0.5)),
        ..Coordinate::default()
    };
    assert_rule(
        encode_err(&with_coordinate(step_only)),
        rule::COORDINATE_START_STEP_TOGETHER,
    );
    for reference_and in [
        Coordinate::from_values(vec![Value::Int(1), Value::Int(2)]),
        Coordinate::regular(0i64, 1i64),
        Coordinate {
            step: Some(Value::Int(1)),
            ..Coordinate::default()
        },
    ] {
        // "x" resolves (the field's own name): only the combination is wrong.
        let combined = reference_and.with_reference("x");
        assert_rule(
            encode_err(&with_coordinate(combined)),
            rule::COORDINATE_FORMS_EXCLUSIVE,
        );
    }
    // An empty reference still counts as a form (the library tests `is not None`).
    let empty_and_values =
        Coordinate::from_values(vec![Value::Int(1), Value::Int(2)]).with_reference("");
    assert_rule(
        encode_err(&with_coordinate(empty_and_values)),
        rule::COORDINATE_FORMS_EXCLUSIVE,
    );
    // Unit and metadata alone are no form; start and step of any integer size are numbers.
    let bare = Coordinate::default()
        .with_unit("s")
        .with_metadata(obj(&[("k", Value::Null)]));
    encode(&with_coordinate(bare), &limits()).unwrap();
    let big = Value::integer("1180591620717411303424").unwrap();
    encode(
        &with_coordinate(Coordinate::regular(big.clone(), big)),
        &limits(),
    )
    .unwrap();
    let text = Coordinate::regular("0", 1i64);
    assert_rule(encode_err(&with_coordinate(text)), rule::COORDINATE_NUMBER);
    let boolean = Coordinate::regular(0i64, true);
    assert_rule(
        encode_err(&with_coordinate(boolean)),
        rule::COORDINATE_NUMBER,
    );
    let nan = Coordinate::regular(f64::NAN, 1.0);
    assert_rule(encode_err(&with_coordinate(nan)), rule::COORDINATE_NUMBER);
    let nan_value = Coordinate::from_values(vec![Value::Float(f64::INFINITY), Value::Int(1)]);
    assert_rule(
        encode_err(&with_coordinate(nan_value)),
        rule::METADATA_FINITE,
    );
}

#[test]
fn coordinate_reference_must_resolve() {
    let bad = with_coordinate(Coordinate::default().with_reference("nowhere"));
    assert_rule(encode_err(&bad), rule::COORDINATE_REFERENCE);
    // An empty reference resolves to nothing and is not checked, as in the library.
    encode(
        &with_coordinate(Coordinate::default().with_reference("")),
        &limits(),
    )
    .unwrap();
    encode(
        &with_coordinate(Coordinate::default().with_reference("x")),
        &limits(),
    )
    .unwrap();
    let by_id = Record::new("r").with_field(
        "x",
        u8_field(vec![2, 2]).with_axes(vec![
            Axis::new("a", 2).with_id("freq"),
            Axis::new("b", 2).with_coordinate(Coordinate::default().with_reference("freq")),
        ]),
    );
    encode(&by_id, &limits()).unwrap();
}

#[test]
fn metadata_must_be_finite() {
    let record =
        sample_record().with_metadata(obj(&[("x", Value::Array(vec![Value::Float(f64::NAN)]))]));
    assert_rule(encode_err(&record), rule::METADATA_FINITE);
    let mut record = sample_record();
    record.fields.get_mut("iq").unwrap().meta.axes[0].metadata =
        obj(&[("y", Value::Float(f64::NEG_INFINITY))]);
    assert_rule(encode_err(&record), rule::METADATA_FINITE);
}

#[test]
fn field_data_length_must_match() {
    assert_rule(
        Field::new(DType::F32, vec![3], vec![0u8; 11]).unwrap_err(),
        rule::FIELD_DATA_LENGTH,
    );
    let mut record = sample_record();
    record.fields.get_mut("labels").unwrap().data = Bytes::from_static(&[1, 2, 3]);
    assert_rule(encode_err(&record), rule::FIELD_DATA_LENGTH);
}

// ----- limits ---------------------------------------------------------------------------------

#[test]
fn limits_are_enforced_on_write() {
    let record = sample_record();
    let payload_len = encode(&record, &limits()).unwrap().len() as u64;
    let cases: Vec<(&str, RecordLimits)> = vec![
        (
            limit::FIELDS,
            RecordLimits {
                max_fields: 1,
                ..limits()
            },
        ),
        (
            limit::AXES_PER_FIELD,
            RecordLimits {
                max_axes_per_field: 1,
                ..limits()
            },
        ),
        (
            limit::TENSOR_BYTES,
            RecordLimits {
                max_tensor_bytes: 47,
                ..limits()
            },
        ),
        (
            limit::TOTAL_TENSOR_BYTES,
            RecordLimits {
                max_total_tensor_bytes: 49,
                ..limits()
            },
        ),
        (
            limit::METADATA_BYTES,
            RecordLimits {
                max_metadata_bytes: 20,
                ..limits()
            },
        ),
        (
            limit::DESCRIPTOR_BYTES,
            RecordLimits {
                max_descriptor_bytes: 200,
                ..limits()
            },
        ),
        (
            limit::ENCODED_RECORD_BYTES,
            RecordLimits {
                max_encoded_record_bytes: payload_len - 1,
                ..limits()
            },
        ),
        (
            limit::JSON_DEPTH,
            RecordLimits {
                max_json_depth: 5,
                ..limits()
            },
        ),
        (
            limit::JSON_NODES,
            RecordLimits {
                max_json_nodes: 20,
                ..limits()
            },
        ),
    ];
    for (name, custom) in cases {
        assert_limit(encode(&record, &custom).unwrap_err(), name);
    }
    let exact = RecordLimits {
        max_encoded_record_bytes: payload_len,
        max_tensor_bytes: 48,
        max_total_tensor_bytes: 50,
        ..limits()
    };
    encode(&record, &exact).unwrap();
    let values = with_coordinate(Coordinate::from_values(vec![Value::Int(1), Value::Int(2)]));
    let custom = RecordLimits {
        max_coordinate_values: 1,
        ..limits()
    };
    assert_limit(
        encode(&values, &custom).unwrap_err(),
        limit::COORDINATE_VALUES,
    );
}

#[test]
fn coordinate_values_limit_is_per_axis() {
    let axis = |name: &str| {
        Axis::new(name, 2)
            .with_coordinate(Coordinate::from_values(vec![Value::Int(1), Value::Int(2)]))
    };
    let record = Record::new("r").with_field(
        "x",
        u8_field(vec![2, 2]).with_axes(vec![axis("a"), axis("b")]),
    );
    let two = RecordLimits {
        max_coordinate_values: 2,
        ..limits()
    };
    encode(&record, &two).unwrap();
    let one = RecordLimits {
        max_coordinate_values: 1,
        ..limits()
    };
    assert_limit(encode(&record, &one).unwrap_err(), limit::COORDINATE_VALUES);
}

#[test]
fn metadata_size_is_measured_as_the_library_measures_it() {
    // Python's len(json.dumps(x, ensure_ascii=False).encode()): {"a": 1} is 8 bytes, each
    // empty metadata object 2, and the coordinate form {"values": null, "start": 0,
    // "step": 1, "reference": null, "unit": null} 72: 8 + 2 (field) + 2 (axis) + 72 + 2
    // (coordinate metadata) = 86.
    let record = Record::new("r")
        .with_metadata(obj(&[("a", Value::Int(1))]))
        .with_field(
            "x",
            u8_field(vec![2]).with_axes(vec![
                Axis::new("t", 2).with_coordinate(Coordinate::regular(0i64, 1i64))
            ]),
        );
    let at = |max_metadata_bytes| RecordLimits {
        max_metadata_bytes,
        ..limits()
    };
    encode(&record, &at(86)).unwrap();
    assert_limit(encode(&record, &at(85)).unwrap_err(), limit::METADATA_BYTES);
}

#[test]
fn limits_are_enforced_on_read() {
    let payload = encode(&sample_record(), &limits()).unwrap();
    let cases: Vec<(&str, RecordLimits)> = vec![
        (
            limit::FIELDS,
            RecordLimits {
                max_fields: 1,
                ..limits()
            },
        ),
        (
            limit::AXES_PER_FIELD,
            RecordLimits {
                max_axes_per_field: 1,
                ..limits()
            },
        ),
        (
            limit::TENSOR_BYTES,
            RecordLimits {
                max_tensor_bytes: 47,
                ..limits()
            },
        ),
        (
            limit::TOTAL_TENSOR_BYTES,
            RecordLimits {
                max_total_tensor_bytes: 49,
                ..limits()
            },
        ),
        (
            limit::METADATA_BYTES,
            RecordLimits {
                max_metadata_bytes: 20,
                ..limits()
            },
        ),
        (
            limit::DESCRIPTOR_BYTES,
            RecordLimits {
                max_descriptor_bytes: 400,
                ..limits()
            },
        ),
        (
            limit::ENCODED_RECORD_BYTES,
            RecordLimits {
                max_encoded_record_bytes: payload.len() as u64 - 1,
                ..limits()
            },
        ),
        (
            limit::JSON_DEPTH,
            RecordLimits {
                max_json_depth: 5,
                ..limits()
            },
        ),
        (
            limit::JSON_NODES,
            RecordLimits {
                max_json_nodes: 20,
                ..limits()
            },
        ),
        (
            limit::COORDINATE_VALUES,
            RecordLimits {
                max_coordinate_values: 0,
                ..limits()
            },
        ),
    ];
    let values = encode(
        &with_coordinate(Coordinate::from_values(vec![Value::Int(1), Value::Int(2)])),
        &limits(),
    )
    .unwrap();
    for (name, custom) in cases {
        let input = if name == limit::COORDINATE_VALUES {
            &values
        } else {
            &payload
        };
        assert_limit(
            decode(Bytes::from(input.clone()), &custom).unwrap_err(),
            name,
        );
    }
}

#[test]
fn huge_shapes_are_refused_from_the_header_alone() {
    // 10^12 elements: refused as a tensor-bytes limit before anything is read or allocated.
    let (header, _) =
        header_and_data(&[raw("tensor_000000", "U8", &[1_000_000, 1_000_000], vec![])]);
    let err = parse_header(&frame(&header, &[]), &limits()).unwrap_err();
    assert_limit(err, limit::TENSOR_BYTES);
    // A shape product that overflows u64.
    let (header, _) = header_and_data(&[raw("tensor_000000", "C64", &[u64::MAX, 3], vec![])]);
    assert_limit(
        parse_header(&frame(&header, &[]), &limits()).unwrap_err(),
        limit::TENSOR_BYTES,
    );
    // A header length beyond the descriptor limit is refused from the first 8 bytes.
    let first8 = (1u64 << 40).to_le_bytes();
    assert_limit(
        header_len(&first8, &limits()).unwrap_err(),
        limit::DESCRIPTOR_BYTES,
    );
    // Rank beyond the axes limit.
    let (header, _) = header_and_data(&[raw("t", "U8", &[1; 200], vec![0])]);
    assert_limit(
        parse_header(&frame(&header, &[0]), &limits()).unwrap_err(),
        limit::AXES_PER_FIELD,
    );
}

// ----- decoding rules ------------------------------------------------------------------------

#[test]
fn hand_assembled_payload_decodes() {
    let record = decode(
        Bytes::from(assemble(&one_field_descriptor(), vec![one_field_tensor()])),
        &limits(),
    )
    .unwrap();
    assert_eq!(record.id, "r");
    assert_eq!(&record.fields["x"].data[..], &[1, 2]);
}

#[test]
fn header_metadata_is_tolerated_and_ignored() {
    let plain = decode(
        Bytes::from(assemble(&one_field_descriptor(), vec![one_field_tensor()])),
        &limits(),
    )
    .unwrap();
    let payload = assemble_edited(&one_field_descriptor(), vec![one_field_tensor()], |h| {
        h.insert(
            "__metadata__".into(),
            Value::Object(obj(&[("k", Value::from("v"))])),
        );
    });
    assert_eq!(decode(Bytes::from(payload), &limits()).unwrap(), plain);
    // One field and the descriptor fit max_fields 1: __metadata__ is not a tensor.
    let payload = assemble_edited(&one_field_descriptor(), vec![one_field_tensor()], |h| {
        h.insert("__metadata__".into(), Value::Object(Object::new()));
    });
    let one = RecordLimits {
        max_fields: 1,
        ..limits()
    };
    decode(Bytes::from(payload), &one).unwrap();
    // Not an object of strings: what SafeTensors itself refuses.
    for bad in [Value::Int(1), Value::Object(obj(&[("k", Value::Int(1))]))] {
        let payload = assemble_edited(&one_field_descriptor(), vec![one_field_tensor()], |h| {
            h.insert("__metadata__".into(), bad);
        });
        assert_rule(decode_err(payload), rule::HEADER_METADATA);
    }
}

#[test]
fn descriptor_must_be_present_and_u8_rank_1() {
    let (header, data) = header_and_data(&[one_field_tensor()]);
    assert_rule(decode_err(frame(&header, &data)), rule::DESCRIPTOR_MISSING);
    let text = sdsfs::format::json::to_compact(&one_field_descriptor()).into_bytes();
    let n = text.len() as u64;
    for (dtype, shape) in [("I8", vec![n]), ("U8", vec![1, n]), ("U8", vec![])] {
        let shape = if shape.is_empty() { vec![] } else { shape };
        let data = if shape.is_empty() {
            vec![b'{']
        } else {
            text.clone()
        };
        let (header, data) = header_and_data(&[
            raw("__sds_descriptor__", dtype, &shape, data),
            one_field_tensor(),
        ]);
        assert_rule(decode_err(frame(&header, &data)), rule::DESCRIPTOR_TENSOR);
    }
}

#[test]
fn duplicate_header_keys_are_refused() {
    let payload = assemble(&one_field_descriptor(), vec![one_field_tensor()]);
    let (header, data) = split(&payload);
    let text = sdsfs::format::json::object_to_compact(&header);
    let entry = sdsfs::format::json::to_compact(&header["tensor_000000"]);
    let doubled = text.replacen('{', &format!("{{\"tensor_000000\":{entry},"), 1);
    let err = decode_err(frame_text(&doubled, &data));
    assert!(matches!(err, RecordError::Json { .. }), "{err:?}");
}

#[test]
fn tensor_entries_have_exactly_three_keys() {
    let payload = assemble_edited(&one_field_descriptor(), vec![one_field_tensor()], |h| {
        let Value::Object(e) = h.get_mut("tensor_000000").unwrap() else {
            panic!()
        };
        e.insert("extra".into(), Value::Null);
    });
    assert_rule(decode_err(payload), rule::HEADER_ENTRY);
    let payload = assemble_edited(&one_field_descriptor(), vec![one_field_tensor()], |h| {
        let Value::Object(e) = h.get_mut("tensor_000000").unwrap() else {
            panic!()
        };
        e.remove("shape");
    });
    assert_rule(decode_err(payload), rule::HEADER_ENTRY);
    let payload = assemble_edited(&one_field_descriptor(), vec![one_field_tensor()], |h| {
        h.insert("tensor_000000".into(), Value::Int(3));
    });
    assert_rule(decode_err(payload), rule::HEADER_ENTRY);
    let payload = assemble_edited(&one_field_descriptor(), vec![one_field_tensor()], |h| {
        let Value::Object(e) = h.get_mut("tensor_000000").unwrap() else {
            panic!()
        };
        e.insert("shape".into(), Value::Array(vec![Value::Float(2.0)]));
    });
    assert_rule(decode_err(payload), rule::HEADER_ENTRY);
}

#[test]
fn unknown_dtypes_are_refused() {
    for name in ["BF16", "F8_E4M3", "C128", "u8", "OBJECT"] {
        let mut tensor = one_field_tensor();
        tensor.dtype = name.into();
        let err = decode_err(assemble(&one_field_descriptor(), vec![tensor]));
        assert_eq!(err, RecordError::UnsupportedDtype(name.into()));
    }
}

fn set_offsets(h: &mut Object, name: &str, start: u64, end: u64) {
    let Value::Object(e) = h.get_mut(name).unwrap() else {
        panic!()
    };
    e.insert(
        "data_offsets".into(),
        Value::Array(vec![Value::from(start), Value::from(end)]),
    );
}

#[test]
fn data_offsets_must_match_shape() {
    let d = sdsfs::format::json::to_compact(&one_field_descriptor()).len() as u64;
    let payload = assemble_edited(&one_field_descriptor(), vec![one_field_tensor()], |h| {
        set_offsets(h, "tensor_000000", d, d + 1)
    });
    assert_rule(decode_err(payload), rule::DATA_OFFSETS);
    let payload = assemble_edited(&one_field_descriptor(), vec![one_field_tensor()], |h| {
        set_offsets(h, "tensor_000000", d + 2, d)
    });
    assert_rule(decode_err(payload), rule::DATA_OFFSETS);
    let payload = assemble_edited(&one_field_descriptor(), vec![one_field_tensor()], |h| {
        let Value::Object(e) = h.get_mut("tensor_000000").unwrap() else {
            panic!()
        };
        e.insert("data_offsets".into(), Value::Array(vec![Value::from(d)]));
    });
    assert_rule(decode_err(payload), rule::DATA_OFFSETS);
}

#[test]
fn data_must_be_covered_without_gap_or_overlap() {
    let d = sdsfs::format::json::to_compact(&one_field_descriptor()).len() as u64;
    // Gap: the field starts one byte after the descriptor ends (and the buffer grows by one).
    let mut gapped = assemble_edited(&one_field_descriptor(), vec![one_field_tensor()], |h| {
        set_offsets(h, "tensor_000000", d + 1, d + 3)
    });
    gapped.push(0);
    assert_rule(decode_err(gapped), rule::DATA_COVERAGE);
    // Overlap: the field reuses the descriptor's last byte.
    let overlapping = assemble_edited(&one_field_descriptor(), vec![one_field_tensor()], |h| {
        set_offsets(h, "tensor_000000", d - 1, d + 1)
    });
    assert_rule(decode_err(overlapping), rule::DATA_COVERAGE);
    // Gap at the start of the buffer.
    let desc = one_field_descriptor();
    let n = sdsfs::format::json::to_compact(&desc).len() as u64;
    let leading = assemble_edited(&desc, vec![one_field_tensor()], |h| {
        set_offsets(h, "__sds_descriptor__", 2, 2 + n);
        set_offsets(h, "tensor_000000", 2 + n, 4 + n);
    });
    let mut leading = leading;
    leading.extend_from_slice(&[0, 0]);
    assert_rule(decode_err(leading), rule::DATA_COVERAGE);
}

#[test]
fn payload_length_must_match() {
    let mut longer = assemble(&one_field_descriptor(), vec![one_field_tensor()]);
    longer.push(0);
    assert_rule(decode_err(longer), rule::PAYLOAD_LENGTH);
    let mut shorter = assemble(&one_field_descriptor(), vec![one_field_tensor()]);
    shorter.pop();
    // The descriptor comes first in this payload, so the layout parses; the data do not fit.
    assert_rule(decode_err(shorter), rule::PAYLOAD_LENGTH);
    let payload = assemble(&one_field_descriptor(), vec![one_field_tensor()]);
    assert!(matches!(
        decode_err(payload[..20].to_vec()),
        RecordError::Truncated { .. }
    ));
    assert!(matches!(
        decode_err(payload[..5].to_vec()),
        RecordError::Truncated { needed: 8, .. }
    ));
}

#[test]
fn every_tensor_must_belong_to_a_field() {
    let extra = raw("tensor_000001", "U8", &[1], vec![5]);
    let err = decode_err(assemble(
        &one_field_descriptor(),
        vec![one_field_tensor(), extra],
    ));
    assert_rule(err, rule::UNMAPPED_TENSOR);
}

#[test]
fn every_field_must_find_its_tensor() {
    let mut desc = one_field_descriptor();
    *at(&mut desc, &["fields", "x", "tensor"]) = Value::from("tensor_000009");
    assert_rule(
        decode_err(assemble(&desc, vec![one_field_tensor()])),
        rule::FIELD_TENSOR_MISSING,
    );
    *at(&mut desc, &["fields", "x", "tensor"]) = Value::from("__sds_descriptor__");
    assert_rule(
        decode_err(assemble(&desc, vec![one_field_tensor()])),
        rule::FIELD_TENSOR_MISSING,
    );
    // Two fields claiming one tensor.
    let mut desc = one_field_descriptor();
    let x = at(&mut desc, &["fields", "x"]).clone();
    let Value::Object(fields) = at(&mut desc, &["fields"]) else {
        panic!()
    };
    fields.insert("y".into(), x);
    assert_rule(
        decode_err(assemble(&desc, vec![one_field_tensor()])),
        rule::FIELD_TENSOR_SHARED,
    );
}

#[test]
fn tensor_keys_need_not_follow_the_writer_numbering() {
    // Reader decision: any one-to-one mapping is accepted; only the writer assigns tensor_%06d.
    let mut desc = one_field_descriptor();
    *at(&mut desc, &["fields", "x", "tensor"]) = Value::from("other");
    let mut tensor = one_field_tensor();
    tensor.name = "other".into();
    decode(Bytes::from(assemble(&desc, vec![tensor])), &limits()).unwrap();
}

#[test]
fn descriptor_format_and_version_are_checked() {
    let mut desc = one_field_descriptor();
    *at(&mut desc, &["format"]) = Value::from("signal-dataset.other");
    let err = decode_err(assemble(&desc, vec![one_field_tensor()]));
    assert_eq!(
        err,
        RecordError::UnsupportedFormat("signal-dataset.other".into())
    );
    let mut desc = one_field_descriptor();
    *at(&mut desc, &["version"]) = Value::from("0.2");
    let err = decode_err(assemble(&desc, vec![one_field_tensor()]));
    assert_eq!(err, RecordError::UnsupportedVersion("0.2".into()));
    let mut desc = one_field_descriptor();
    *at(&mut desc, &["version"]) = Value::Float(0.1);
    assert!(matches!(
        decode_err(assemble(&desc, vec![one_field_tensor()])),
        RecordError::UnsupportedVersion(_)
    ));
    let Value::Object(o) = &mut desc else {
        panic!()
    };
    o.remove("version");
    assert!(matches!(
        decode_err(assemble(&desc, vec![one_field_tensor()])),
        RecordError::UnsupportedVersion(_)
    ));
}

#[test]
fn descriptor_reading_is_lenient() {
    // Unknown keys at every level ignored; optional keys missing read as null / {}.
    let text = r#"{"fields":{"x":{"axes":[{"length":2,"name":"n","future":1}],"tensor":"tensor_000000","new":[]}},"format":"signal-dataset.record","id":"r","version":"0.1","extra":{"a":1}}"#;
    let desc = Value::Object(
        sdsfs::format::json::parse_object(
            text.as_bytes(),
            &sdsfs::format::json::JsonLimits::CONTROL,
        )
        .unwrap(),
    );
    let record = decode(
        Bytes::from(assemble(&desc, vec![one_field_tensor()])),
        &limits(),
    )
    .unwrap();
    assert_eq!(record.scene_id, None);
    assert!(record.metadata.is_empty());
    assert_eq!(record.fields["x"].meta.axes, vec![Axis::new("n", 2)]);
}

#[test]
fn descriptor_keys_are_type_checked() {
    let edits: Vec<(&[&str], Value)> = vec![
        (&["id"], Value::Int(3)),
        (&["scene_id"], Value::Int(3)),
        (&["metadata"], Value::Array(vec![])),
        (&["fields"], Value::Array(vec![])),
        (&["fields", "x", "tensor"], Value::Null),
        (&["fields", "x", "axes"], Value::Null),
        (&["fields", "x", "metadata"], Value::from("m")),
    ];
    for (path, value) in edits {
        let mut desc = one_field_descriptor();
        *at(&mut desc, path) = value;
        assert_rule(
            decode_err(assemble(&desc, vec![one_field_tensor()])),
            rule::KEY_TYPE,
        );
    }
    let axis_edits = [
        ("length", Value::Bool(true)),
        ("length", Value::Float(2.0)),
        ("length", Value::Int(-2)),
        ("name", Value::Null),
        ("role", Value::Int(1)),
        ("coordinate", Value::Array(vec![])),
    ];
    for (key, value) in axis_edits {
        let mut desc = one_field_descriptor();
        let Value::Array(axes) = at(&mut desc, &["fields", "x", "axes"]) else {
            panic!()
        };
        let Value::Object(axis) = &mut axes[0] else {
            panic!()
        };
        axis.insert(key.into(), value);
        assert_rule(
            decode_err(assemble(&desc, vec![one_field_tensor()])),
            rule::KEY_TYPE,
        );
    }
}

#[test]
fn descriptor_validation_runs_on_read() {
    let mut desc = one_field_descriptor();
    *at(&mut desc, &["id"]) = Value::from("");
    assert_rule(
        decode_err(assemble(&desc, vec![one_field_tensor()])),
        rule::ID_NONEMPTY,
    );
    let mut desc = one_field_descriptor();
    let Value::Array(axes) = at(&mut desc, &["fields", "x", "axes"]) else {
        panic!()
    };
    let Value::Object(axis) = &mut axes[0] else {
        panic!()
    };
    axis.insert("length".into(), Value::Int(3));
    assert_rule(
        decode_err(assemble(&desc, vec![one_field_tensor()])),
        rule::AXIS_LENGTH,
    );
    let mut desc = one_field_descriptor();
    *at(&mut desc, &["fields", "x", "axes"]) = Value::Array(vec![]);
    assert_rule(
        decode_err(assemble(&desc, vec![one_field_tensor()])),
        rule::RANK_EQUALS_AXES,
    );
    let mut desc = one_field_descriptor();
    let Value::Array(axes) = at(&mut desc, &["fields", "x", "axes"]) else {
        panic!()
    };
    let Value::Object(axis) = &mut axes[0] else {
        panic!()
    };
    axis.insert(
        "coordinate".into(),
        Value::Object(obj(&[("start", Value::Int(0))])),
    );
    assert_rule(
        decode_err(assemble(&desc, vec![one_field_tensor()])),
        rule::COORDINATE_START_STEP_TOGETHER,
    );
}

#[test]
fn descriptor_json_must_be_strict() {
    for bad in [
        &b"{\"a\":1,\"a\":2}"[..],
        b"{\"x\":NaN}",
        b"[1]",
        b"\xff",
        b"{\"x\":1e999}",
    ] {
        let (header, data) = header_and_data(&[
            raw(
                "__sds_descriptor__",
                "U8",
                &[bad.len() as u64],
                bad.to_vec(),
            ),
            one_field_tensor(),
        ]);
        let err = decode_err(frame(&header, &data));
        assert!(
            matches!(
                err,
                RecordError::Json {
                    context: "record descriptor",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
