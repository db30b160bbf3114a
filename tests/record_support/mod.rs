//! Shared helpers for the record tests: sample records, and hand-assembled payloads for
//! feeding the reader inputs our writer would never produce.
#![allow(dead_code)]

use sdsfs::format::dtype::DType;
use sdsfs::format::json::{object_to_compact, parse_object, to_compact, JsonLimits, Object, Value};
use sdsfs::format::record::{Axis, Coordinate, Field, Record};

/// A small valid record with two fields, coordinates and metadata.
pub fn sample_record() -> Record {
    let iq = Field::new(DType::C64, vec![2, 3], vec![7u8; 48])
        .unwrap()
        .with_axes(vec![
            Axis::new("channel", 2).with_id("ch"),
            Axis::new("time", 3)
                .with_role("time")
                .with_coordinate(Coordinate::regular(0.0, 1e-6).with_unit("s")),
        ])
        .with_metadata(obj(&[("gain", Value::Float(1.5))]));
    let labels = Field::new(DType::U8, vec![2], vec![1u8, 0])
        .unwrap()
        .with_axes(vec![Axis::new("channel", 2).with_id("ch")]);
    Record::new("rec-1")
        .with_scene_id("scene-7")
        .with_metadata(obj(&[("snr", Value::Int(12))]))
        .with_field("iq", iq)
        .with_field("labels", labels)
}

pub fn obj(pairs: &[(&str, Value)]) -> Object {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), v.clone()))
        .collect()
}

/// One tensor for [`assemble`]: name, SafeTensors dtype name, shape, bytes.
pub struct RawTensor {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub data: Vec<u8>,
}

pub fn raw(name: &str, dtype: &str, shape: &[u64], data: Vec<u8>) -> RawTensor {
    RawTensor {
        name: name.into(),
        dtype: dtype.into(),
        shape: shape.to_vec(),
        data,
    }
}

/// The header object (offsets in list order) and data buffer for `tensors`.
pub fn header_and_data(tensors: &[RawTensor]) -> (Object, Vec<u8>) {
    let mut header = Object::new();
    let mut data = Vec::new();
    for t in tensors {
        let start = data.len() as u64;
        data.extend_from_slice(&t.data);
        let mut entry = Object::new();
        entry.insert("dtype".into(), Value::from(t.dtype.as_str()));
        let shape = t.shape.iter().map(|&d| Value::from(d)).collect();
        entry.insert("shape".into(), Value::Array(shape));
        let offsets = vec![Value::from(start), Value::from(data.len() as u64)];
        entry.insert("data_offsets".into(), Value::Array(offsets));
        header.insert(t.name.as_str().into(), Value::Object(entry));
    }
    (header, data)
}

/// `8-byte length | header JSON padded with spaces to 8 | data`.
pub fn frame(header: &Object, data: &[u8]) -> Vec<u8> {
    frame_text(&object_to_compact(header), data)
}

pub fn frame_text(header: &str, data: &[u8]) -> Vec<u8> {
    let mut text = header.as_bytes().to_vec();
    while text.len() % 8 != 0 {
        text.push(b' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend_from_slice(data);
    out
}

/// A payload of the descriptor (first in the data buffer) and `tensors`.
pub fn assemble(descriptor: &Value, tensors: Vec<RawTensor>) -> Vec<u8> {
    assemble_edited(descriptor, tensors, |_| {})
}

/// Like [`assemble`], letting `edit` change the header object before framing.
pub fn assemble_edited(
    descriptor: &Value,
    tensors: Vec<RawTensor>,
    edit: impl FnOnce(&mut Object),
) -> Vec<u8> {
    let text = to_compact(descriptor).into_bytes();
    let mut all = vec![raw("__sds_descriptor__", "U8", &[text.len() as u64], text)];
    all.extend(tensors);
    let (mut header, data) = header_and_data(&all);
    edit(&mut header);
    frame(&header, &data)
}

/// The descriptor of a one-field record `{"x": uint8[2]}` as a mutable value.
pub fn one_field_descriptor() -> Value {
    let text = r#"{"fields":{"x":{"axes":[{"coordinate":null,"id":null,"length":2,"metadata":{},"name":"n","role":null}],"metadata":{},"tensor":"tensor_000000"}},"format":"signal-dataset.record","id":"r","metadata":{},"scene_id":null,"version":"0.1"}"#;
    Value::Object(parse_object(text.as_bytes(), &JsonLimits::CONTROL).unwrap())
}

pub fn one_field_tensor() -> RawTensor {
    raw("tensor_000000", "U8", &[2], vec![1, 2])
}

/// Mutable access to a nested object member by path of keys.
pub fn at<'v>(value: &'v mut Value, path: &[&str]) -> &'v mut Value {
    let mut current = value;
    for key in path {
        let Value::Object(object) = current else {
            panic!("not an object at {key}")
        };
        current = object.get_mut(*key).unwrap();
    }
    current
}

/// Splits a payload into its header object and data buffer.
pub fn split(payload: &[u8]) -> (Object, Vec<u8>) {
    let n = u64::from_le_bytes(payload[..8].try_into().unwrap()) as usize;
    let header = parse_object(&payload[8..8 + n], &JsonLimits::CONTROL).unwrap();
    (header, payload[8 + n..].to_vec())
}

use rand::rngs::StdRng;
use rand::Rng;
use sdsfs::format::dtype::ALL_DTYPES;

const NAME_POOL: &[&str] = &[
    "iq",
    "a",
    "b/c",
    "a//b",
    "/lead",
    "trail/",
    "100%",
    "%2F",
    "é",
    "信号",
    "😀",
    "Z",
    "_",
    "~x",
    "tensor_000000",
    "__sds_descriptor__",
    "sp ace",
    "q\"uote",
    "back\\slash",
    "nl\n",
];

/// A random JSON value of bounded depth (floats, ints, strings, nesting).
pub fn random_json(rng: &mut StdRng, depth: u32) -> Value {
    match rng.gen_range(0..if depth == 0 { 5 } else { 7 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.gen()),
        2 if rng.gen_bool(0.2) => {
            // Integers past 64 bits, which the library writes digit for digit (2**70, ...).
            const BIG: &[&str] = &[
                "1180591620717411303424",
                "-1180591620717411303424",
                "18446744073709551616",
                "-9223372036854775809",
                "170141183460469231731687303715884105728",
                "1000000000000000000000000000000000000000000000000000000000000",
            ];
            Value::integer(BIG[rng.gen_range(0..BIG.len())]).unwrap()
        }
        2 => Value::Int(rng.gen::<i64>() as i128 >> rng.gen_range(0..60)),
        3 => Value::Float(random_float(rng)),
        4 => Value::from(NAME_POOL[rng.gen_range(0..NAME_POOL.len())]),
        5 => Value::Array(
            (0..rng.gen_range(0..3))
                .map(|_| random_json(rng, depth - 1))
                .collect(),
        ),
        _ => Value::Object(random_object(rng, depth - 1)),
    }
}

pub fn random_float(rng: &mut StdRng) -> f64 {
    match rng.gen_range(0..4) {
        0 => rng.gen_range(-1e3..1e3),
        1 => f64::from_bits(
            rng.gen::<u64>() & !(0x7ffu64 << 52) | (rng.gen_range(1u64..0x7fe) << 52),
        ),
        2 => rng.gen_range(-10i32..10) as f64 * 0.25,
        _ => 1e-7 * rng.gen_range(1..1000) as f64,
    }
}

pub fn random_object(rng: &mut StdRng, depth: u32) -> Object {
    (0..rng.gen_range(0..3))
        .map(|_| {
            let key = NAME_POOL[rng.gen_range(0..NAME_POOL.len())].into();
            (key, random_json(rng, depth))
        })
        .collect()
}

/// A coordinate value holding no object: the library reads objects there but its encoders
/// cannot write them back (it freezes coordinate values and then fails to serialise them).
fn coordinate_value(rng: &mut StdRng) -> Value {
    loop {
        let value = random_json(rng, 1);
        let holds_object = match &value {
            Value::Object(_) => true,
            Value::Array(items) => items.iter().any(|v| matches!(v, Value::Object(_))),
            _ => false,
        };
        if !holds_object {
            return value;
        }
    }
}

fn random_coordinate(rng: &mut StdRng, length: u64, field_names: &[String]) -> Coordinate {
    let mut c = match rng.gen_range(0..3) {
        0 => Coordinate::from_values((0..length).map(|_| coordinate_value(rng)).collect()),
        1 if rng.gen() => Coordinate::regular(Value::Int(rng.gen_range(-5..5)), Value::Int(2)),
        1 => Coordinate::regular(random_float(rng), random_float(rng)),
        _ => Coordinate::default(),
    };
    // A reference is a form of its own: only on a coordinate with no other form.
    if c.values.is_none() && c.start.is_none() && rng.gen_bool(0.5) {
        c.reference = Some(field_names[rng.gen_range(0..field_names.len())].clone());
    }
    if rng.gen_bool(0.4) {
        c.unit = Some("Hz".into());
    }
    c.metadata = random_object(rng, 1);
    c
}

/// A random valid record: 1–4 fields of any dtype, rank 1–3 (0-d is not writable), dims 0–4, every axis form.
pub fn random_record(rng: &mut StdRng, serial: usize) -> Record {
    let count = rng.gen_range(1..=4);
    let mut names: Vec<String> = (0..count)
        .map(|_| NAME_POOL[rng.gen_range(0..NAME_POOL.len())].to_string())
        .collect();
    names.sort();
    names.dedup();
    let mut record = Record::new(format!("rec-{serial}")).with_metadata(random_object(rng, 3));
    if rng.gen() {
        record.scene_id = Some(format!("scene-{}", serial % 7));
    }
    for (f, name) in names.iter().enumerate() {
        let dtype = ALL_DTYPES[rng.gen_range(0..ALL_DTYPES.len())];
        let shape: Vec<u64> = (0..rng.gen_range(1..=3))
            .map(|_| rng.gen_range(0..=4))
            .collect();
        let count: u64 = shape.iter().product();
        let len = (count * dtype.itemsize()) as usize;
        let data: Vec<u8> = if dtype == DType::Bool {
            (0..len).map(|_| rng.gen_range(0..2)).collect()
        } else {
            (0..len).map(|_| rng.gen()).collect()
        };
        let axes = shape
            .iter()
            .enumerate()
            .map(|(i, &length)| {
                let mut axis = Axis::new(format!("ax{i}"), length);
                if rng.gen() {
                    axis.role = Some("time".into());
                }
                if rng.gen_bool(0.3) {
                    axis.id = Some(format!("id-{f}-{i}"));
                }
                if rng.gen() {
                    axis.coordinate = Some(random_coordinate(rng, length, &names));
                }
                axis.metadata = random_object(rng, 1);
                axis
            })
            .collect();
        let field = Field::new(dtype, shape, data)
            .unwrap()
            .with_axes(axes)
            .with_metadata(random_object(rng, 2));
        record.fields.insert(name.clone(), field);
    }
    record
}
