//! The fuzz targets' properties, shared by the libFuzzer targets (`fuzz/fuzz_targets/*.rs`,
//! run with `cargo fuzz`) and the standalone mutation runner (`examples/fuzz_mutate.rs`), both
//! of which include this file by path. Each target must not panic on any input; beyond that,
//! [`run`] checks a round-trip property for inputs that parse and returns `Err` when it breaks.

use bytes::Bytes;
use sdsfs::arrayrecord::ArrayRecordReader;
use sdsfs::format::documents::{
    CatalogPointer, DatasetRoot, ManifestPage, Revision, SetRoot, Snapshot, WorkerPointer,
};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::{parse_value, to_compact, Value};
use sdsfs::format::limits::{JsonLimits, RecordLimits};
use sdsfs::format::names::{decode_segment, encode_field_path, encode_segment, SegmentRole};
use sdsfs::format::record::{
    decode, encode, validate, Axis, Coordinate, Field, Record, RecordMeta,
};

#[allow(dead_code)]
#[path = "claims.rs"]
pub mod claims;

#[allow(dead_code)]
#[path = "render.rs"]
pub mod render;

/// Every target, in the order `all` runs them.
#[allow(dead_code)]
pub const TARGETS: [&str; 8] = [
    "json",
    "record",
    "row",
    "control",
    "arrayrecord",
    "names",
    "claims",
    "render",
];

/// The committed seeds of `target` (`fuzz/seeds/<target>/`), sorted, without the `finding-*`
/// ones (they reproduce known defects, docs/RELIABILITY.md "Fuzzing", and are not expected to
/// pass until those are fixed).
#[allow(dead_code)]
pub fn seed_names(target: &str) -> Vec<String> {
    let dir = format!("{}/fuzz/seeds/{target}", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names.retain(|n| !n.starts_with("finding-"));
    names
}

/// Runs one input; `Ok(true)` when it parsed, `Err` when a property broke.
#[allow(dead_code)]
pub fn run(target: &str, input: &[u8]) -> Result<bool, String> {
    let json_limits = JsonLimits::default();
    let record_limits = RecordLimits::default();
    match target {
        "json" => match parse_value(input, &json_limits) {
            Ok(value) => {
                let text = to_compact(&value);
                let again = parse_value(text.as_bytes(), &json_limits)
                    .map_err(|e| format!("compact output does not parse: {e}"))?;
                if to_compact(&again) != text {
                    return Err("compact JSON does not round-trip".into());
                }
                Ok(true)
            }
            Err(_) => Ok(false),
        },
        "record" => match decode(Bytes::copy_from_slice(input), &record_limits) {
            Ok(record) => {
                validate(&record.meta(), &record_limits)
                    .map_err(|e| format!("decoded record breaks a rule: {e}"))?;
                let encoded = encode(&record, &record_limits)
                    .map_err(|e| format!("decoded record does not encode: {e}"))?;
                let again = decode(Bytes::from(encoded), &record_limits)
                    .map_err(|e| format!("re-encoded record does not decode: {e}"))?;
                if again.meta() != record.meta() {
                    return Err("record does not round-trip".into());
                }
                Ok(true)
            }
            Err(_) => Ok(false),
        },
        "row" => match RecordMeta::parse_row(input, &record_limits) {
            Ok(meta) => {
                let again = RecordMeta::parse_row(meta.to_row_json().as_bytes(), &record_limits)
                    .map_err(|e| format!("written row does not parse: {e}"))?;
                if again != meta {
                    return Err("row does not round-trip".into());
                }
                Ok(true)
            }
            Err(_) => Ok(false),
        },
        "control" => {
            let l = &json_limits;
            let parsed = [
                DatasetRoot::parse(input, l).is_ok(),
                Snapshot::parse(input, l).is_ok(),
                ManifestPage::parse(input, l).is_ok(),
                CatalogPointer::parse(input, l).is_ok(),
                Revision::parse(input, l).is_ok(),
                SetRoot::parse(input, l).is_ok(),
                WorkerPointer::parse(input, l).is_ok(),
            ];
            Ok(parsed.iter().any(|&p| p))
        }
        "arrayrecord" => match ArrayRecordReader::open(Bytes::copy_from_slice(input), "fuzz") {
            Ok(reader) => {
                for index in 0..reader.len().min(64) {
                    let _ = reader.read(index);
                }
                let _ = reader.read(reader.len());
                Ok(true)
            }
            Err(_) => Ok(false),
        },
        "names" => {
            let text = String::from_utf8_lossy(input).into_owned();
            // Field-name segments never hold `/` (names are split on it first); entries may.
            let segment = text.replace('/', "_");
            for role in [
                SegmentRole::Directory,
                SegmentRole::Leaf,
                SegmentRole::Entry,
            ] {
                let text = if role == SegmentRole::Entry {
                    &text
                } else {
                    &segment
                };
                let encoded = encode_segment(text, role);
                if encoded.is_empty() || encoded == "." || encoded == ".." {
                    return Err(format!("segment encodes to {encoded:?}"));
                }
                if encoded.contains('/') || encoded.contains('\0') {
                    return Err(format!("encoded segment {encoded:?} is not a file name"));
                }
                if encoded.len() > 255 {
                    return Err(format!("encoded segment is {} bytes", encoded.len()));
                }
                if !encoded.contains("%~")
                    && role != SegmentRole::Entry
                    && decode_segment(&encoded).as_deref() != Some(text.as_str())
                {
                    return Err(format!("{text:?} -> {encoded:?} does not decode back"));
                }
            }
            for segment in encode_field_path(&text) {
                if segment.is_empty() || segment == "." || segment == ".." || segment.contains('/')
                {
                    return Err(format!("field path segment {segment:?}"));
                }
            }
            Ok(true)
        }
        "claims" => claims::run(input),
        "render" => render::run(input),
        other => Err(format!("unknown target {other}")),
    }
}

/// A small record (`serial` picks its size and id): a complex IQ capture with a time axis,
/// a 2x2 label, row metadata and a scene, as the seeds and the `claims` dataset hold them.
#[allow(dead_code)]
pub fn sample_record(serial: usize) -> Record {
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
