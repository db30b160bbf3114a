//! Encode → decode round trips, layout ranges, zero-copy decoding and determinism.

mod record_support;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::SeedableRng;
use record_support::*;
use sdsfs::format::dtype::{DType, ALL_DTYPES};
use sdsfs::format::json::{JsonLimits, Object, Value};
use sdsfs::format::limits::RecordLimits;
use sdsfs::format::record::*;

fn round_trip(record: &Record) -> Record {
    let limits = RecordLimits::default();
    let payload = encode(record, &limits).unwrap();
    let decoded = decode(Bytes::from(payload), &limits).unwrap();
    assert_eq!(&decoded, record);
    decoded
}

#[test]
fn every_dtype_round_trips() {
    for dtype in ALL_DTYPES {
        let len = 3 * dtype.itemsize() as usize;
        let data: Vec<u8> = (0..len)
            .map(|i| {
                if dtype == DType::Bool {
                    (i % 2) as u8
                } else {
                    i as u8
                }
            })
            .collect();
        let record = Record::new("r").with_field("v", Field::new(dtype, vec![3], data).unwrap());
        let decoded = round_trip(&record);
        assert_eq!(decoded.fields["v"].meta.dtype, dtype);
    }
}

#[test]
fn empty_fields_round_trip() {
    let record = Record::new("r")
        .with_field(
            "empty",
            Field::new(DType::I32, vec![0], Vec::new()).unwrap(),
        )
        .with_field(
            "empty2",
            Field::new(DType::U8, vec![3, 0, 2], Vec::new()).unwrap(),
        )
        .with_field(
            "also_empty",
            Field::new(DType::C64, vec![0], Vec::new()).unwrap(),
        );
    let decoded = round_trip(&record);
    assert_eq!(decoded.fields["empty2"].data.len(), 0);
    assert_eq!(decoded.fields["empty"].meta.shape, vec![0]);
}

#[test]
fn zero_d_fields_are_refused_on_write_but_read() {
    let scalar = Field::new(DType::F64, vec![], 2.5f64.to_le_bytes().to_vec()).unwrap();
    let record = Record::new("r")
        .with_field("fine", Field::new(DType::U8, vec![1], vec![7]).unwrap())
        .with_field("scalar", scalar);
    let err = encode(&record, &RecordLimits::default()).unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, RecordError::Validation { rule, .. } if rule == rule::FIELD_RANK_NONZERO),
        "{message}"
    );
    assert!(message.contains("\"scalar\""), "{message}");
    assert!(message.contains("give it shape [1]"), "{message}");
    // A stored record holding a 0-d field (written by some other writer) is still shown.
    let descriptor = r#"{"fields":{"s":{"axes":[],"metadata":{},"tensor":"tensor_000000"}},"format":"signal-dataset.record","id":"r","metadata":{},"scene_id":null,"version":"0.1"}"#;
    let descriptor = Value::Object(
        sdsfs::format::json::parse_object(descriptor.as_bytes(), &JsonLimits::CONTROL).unwrap(),
    );
    let payload = assemble(
        &descriptor,
        vec![raw(
            "tensor_000000",
            "F64",
            &[],
            2.5f64.to_le_bytes().to_vec(),
        )],
    );
    let decoded = decode(Bytes::from(payload), &RecordLimits::default()).unwrap();
    assert!(decoded.fields["s"].meta.shape.is_empty());
    assert_eq!(decoded.fields["s"].data.as_ref(), 2.5f64.to_le_bytes());
}

#[test]
fn awkward_field_names_round_trip() {
    let mut record = Record::new("r");
    for name in [
        "é",
        "信号/x",
        "a//b",
        "/",
        "%",
        "%2F",
        "😀",
        "sp ace",
        "tensor_000003",
        "__sds_descriptor__",
        "\u{7f}\u{1}",
    ] {
        record = record.with_field(name, Field::new(DType::U8, vec![1], vec![9u8]).unwrap());
    }
    round_trip(&record);
}

#[test]
fn every_coordinate_form_round_trips() {
    let axes = |c: Coordinate| vec![Axis::new("n", 2).with_coordinate(c)];
    let forms = [
        Coordinate::from_values(vec![Value::Int(1), Value::Float(2.5)]),
        Coordinate::from_values(vec![Value::from("a"), Value::Null]),
        Coordinate::regular(Value::Int(0), Value::Int(3)),
        Coordinate::regular(-0.5, 1e-6).with_unit("s"),
        Coordinate::default().with_reference("other"),
        Coordinate::default()
            .with_reference("shared-id")
            .with_metadata(obj(&[("k", Value::Float(0.1))])),
        Coordinate::default(),
    ];
    for coordinate in forms {
        let record = Record::new("r")
            .with_field(
                "f",
                Field::new(DType::U16, vec![2], vec![0u8; 4])
                    .unwrap()
                    .with_axes(axes(coordinate)),
            )
            .with_field(
                "other",
                Field::new(DType::U8, vec![2], vec![0u8; 2])
                    .unwrap()
                    .with_axes(vec![Axis::new("m", 2).with_id("shared-id")]),
            );
        round_trip(&record);
    }
}

#[test]
fn nested_metadata_with_floats_round_trips() {
    let mut inner = Object::new();
    inner.insert(
        "x".into(),
        Value::Array(vec![
            Value::Float(1e-7),
            Value::Float(-0.0),
            Value::Float(1e300),
            Value::Int(-5),
        ]),
    );
    inner.insert(
        "deep".into(),
        Value::Object(obj(&[
            ("y", Value::Float(0.30000000000000004)),
            ("z", Value::Bool(true)),
        ])),
    );
    let record = sample_record().with_metadata(obj(&[
        ("inner", Value::Object(inner)),
        ("big", Value::Int(u64::MAX as i128)),
        ("neg", Value::Int(i64::MIN as i128)),
    ]));
    let decoded = round_trip(&record);
    assert!(matches!(
        decoded.metadata["inner"].as_object().unwrap()["x"]
            .as_array()
            .unwrap()[0],
        Value::Float(_)
    ));
}

#[test]
fn random_records_round_trip() {
    let mut rng = StdRng::seed_from_u64(7);
    for serial in 0..300 {
        round_trip(&random_record(&mut rng, serial));
    }
}

#[test]
fn decode_shares_the_payload_buffer() {
    let payload = Bytes::from(encode(&sample_record(), &RecordLimits::default()).unwrap());
    let range = payload.as_ptr() as usize..payload.as_ptr() as usize + payload.len();
    let decoded = decode(payload.clone(), &RecordLimits::default()).unwrap();
    for field in decoded.fields.values() {
        assert!(
            range.contains(&(field.data.as_ptr() as usize)),
            "field data was copied"
        );
    }
}

#[test]
fn layout_ranges_locate_field_bytes() {
    let record = sample_record();
    let limits = RecordLimits::default();
    let payload = encode(&record, &limits).unwrap();
    let n = header_len(&payload[..8], &limits).unwrap();
    let header = parse_header(&payload[..8 + n as usize], &limits).unwrap();
    assert_eq!(header.total_len, payload.len() as u64);
    let d = header.descriptor_range();
    let layout =
        RecordLayout::from_parts(header, &payload[d.start as usize..d.end as usize], &limits)
            .unwrap();
    assert_eq!(layout.meta, record.meta());
    assert_eq!(layout.fields["iq"].tensor, "tensor_000000");
    assert_eq!(layout.fields["labels"].tensor, "tensor_000001");
    for (name, field) in &record.fields {
        let r = &layout.fields[name].range;
        assert_eq!(&payload[r.start as usize..r.end as usize], &field.data[..]);
    }
    // parse_layout on a prefix that stops before the descriptor says how much it needs.
    let short = &payload[..d.end as usize - 1];
    assert_eq!(
        parse_layout(short, &limits).unwrap_err(),
        RecordError::Truncated {
            needed: d.end,
            available: short.len() as u64
        }
    );
    assert_eq!(
        parse_layout(&payload[..d.end as usize], &limits)
            .unwrap()
            .meta,
        record.meta()
    );
    assert!(matches!(
        header_len(&payload[..7], &limits),
        Err(RecordError::Truncated { needed: 8, .. })
    ));
}

#[test]
fn descriptor_is_compact_deterministic_json_with_every_key() {
    let record =
        Record::new("r").with_field("x", Field::new(DType::U8, vec![2], vec![1, 2]).unwrap());
    let payload = encode(&record, &RecordLimits::default()).unwrap();
    let (header, data) = split(&payload);
    let expected = r#"{"fields":{"x":{"axes":[{"coordinate":null,"id":null,"length":2,"metadata":{},"name":"dim_0","role":null}],"metadata":{},"tensor":"tensor_000000"}},"format":"signal-dataset.record","id":"r","metadata":{},"scene_id":null,"version":"0.1"}"#;
    let entry = header["__sds_descriptor__"].as_object().unwrap();
    let offsets = entry["data_offsets"].as_array().unwrap();
    let (s, e) = (
        offsets[0].as_u64().unwrap() as usize,
        offsets[1].as_u64().unwrap() as usize,
    );
    assert_eq!(std::str::from_utf8(&data[s..e]).unwrap(), expected);
    assert!(!header.contains_key("__metadata__"));
    // Deterministic: same record, same bytes; header padded to 8 with spaces.
    assert_eq!(payload, encode(&record, &RecordLimits::default()).unwrap());
    let n = u64::from_le_bytes(payload[..8].try_into().unwrap()) as usize;
    assert_eq!(n % 8, 0);
}

#[test]
fn encode_matches_the_safetensors_crate_reader() {
    let mut rng = StdRng::seed_from_u64(11);
    for serial in 0..50 {
        let record = random_record(&mut rng, serial);
        let payload = encode(&record, &RecordLimits::default()).unwrap();
        let st = safetensors::SafeTensors::deserialize(&payload).unwrap();
        for (index, field) in record.fields.values().enumerate() {
            let view = st.tensor(&tensor_key(index)).unwrap();
            assert_eq!(view.data(), &field.data[..]);
            let shape: Vec<u64> = view.shape().iter().map(|&d| d as u64).collect();
            assert_eq!(shape, field.meta.shape);
        }
    }
}

#[test]
fn reader_accepts_other_tensor_orders_and_padding() {
    // Tensors in name order rather than alignment order, header padded with newlines/tabs.
    let (header, data) = header_and_data(&[
        raw(
            "__sds_descriptor__",
            "U8",
            &[to_len(&one_field_descriptor())],
            desc_bytes(&one_field_descriptor()),
        ),
        one_field_tensor(),
    ]);
    let text = sdsfs::format::json::object_to_compact(&header) + "\n\t \r";
    let mut payload = (text.len() as u64).to_le_bytes().to_vec();
    payload.extend_from_slice(text.as_bytes());
    payload.extend_from_slice(&data);
    let record = decode(Bytes::from(payload), &RecordLimits::default()).unwrap();
    assert_eq!(&record.fields["x"].data[..], &[1, 2]);
}

fn desc_bytes(v: &Value) -> Vec<u8> {
    sdsfs::format::json::to_compact(v).into_bytes()
}

fn to_len(v: &Value) -> u64 {
    desc_bytes(v).len() as u64
}

#[test]
fn field_json_views() {
    let record = sample_record();
    let iq = &record.fields["iq"].meta;
    let value = iq.to_json("iq");
    let object = value.as_object().unwrap();
    assert_eq!(
        object.keys().collect::<Vec<_>>(),
        ["axes", "dtype", "metadata", "name", "shape"]
    );
    assert_eq!(object["dtype"], Value::from("<c8"));
    assert_eq!(FieldMeta::from_row_value(&value, "view").unwrap(), *iq);
    for axis in &iq.axes {
        assert_eq!(&Axis::from_json(&axis.to_json(), "axis").unwrap(), axis);
    }
    let c = Coordinate::regular(1i64, 2.5)
        .with_reference("x")
        .with_unit("Hz");
    assert_eq!(Coordinate::from_json(&c.to_json(), "c").unwrap(), c);
}
