//! The fuzz targets' properties, shared by the libFuzzer targets (`fuzz/fuzz_targets/*.rs`,
//! run with `cargo fuzz`) and the standalone mutation runner (`examples/fuzz_mutate.rs`), both
//! of which include this file by path. Each target must not panic on any input; beyond that,
//! [`run`] checks a round-trip property for inputs that parse and returns `Err` when it breaks.

use bytes::Bytes;
use sdsfs::arrayrecord::ArrayRecordReader;
use sdsfs::format::documents::{
    CatalogPointer, DatasetRoot, ManifestPage, Revision, SetRoot, Snapshot, WorkerPointer,
};
use sdsfs::format::json::{parse_value, to_compact};
use sdsfs::format::limits::{JsonLimits, RecordLimits};
use sdsfs::format::record::{decode, encode, validate, RecordMeta};
use sdsfs::fs::names::{decode_segment, encode_field_path, encode_segment, SegmentRole};

/// Every target, in the order `all` runs them.
#[allow(dead_code)]
pub const TARGETS: [&str; 6] = ["json", "record", "row", "control", "arrayrecord", "names"];

/// Runs one input; `Ok(true)` when it parsed, `Err` when a property broke.
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
        other => Err(format!("unknown target {other}")),
    }
}
