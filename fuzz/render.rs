//! The `render` target: the mount's computed files (each IQ field's `.sigmf-meta` and
//! spectrogram, the record's preview and collection) drawn from arbitrary metadata values and
//! box tables. An input is a JSON object (so that the mutators' number replacements reach the
//! values that matter):
//!
//! ```text
//! {"receivers": 1..8, "samples": N, "step": S, "iq": {field metadata},
//!  "extent": {extent metadata}, "boxes": [[start, duration, low, high], ...],
//!  "names": {"<id>": "<name>"}, "ids": [[class, emitter], ...], "name_repeat": K}
//! ```
//!
//! Every key may be missing or of the wrong type. Strings `"nan"`, `"inf"` and `"-inf"` stand
//! for those floats anywhere in the two metadata objects and in the boxes (a row cannot hold
//! them, but values built in memory can). `step` puts a regular time coordinate in seconds on
//! each receiver's axis; `name_repeat` repeats the first class name (absurdly long names).
//!
//! Properties: nothing panics; every document and picture has exactly the size the layout
//! promises (what `stat` gives); a `.sigmf-meta` is JSON and within its cap (beyond what its
//! row's own texts take); a collection is JSON.

use bytes::Bytes;
use sdsfs::format::dtype::DType;
use sdsfs::format::json::{parse_value, Object, Value};
use sdsfs::format::limits::JsonLimits;
use sdsfs::format::record::{Axis, Coordinate, FieldMeta, RecordMeta};
use sdsfs::fs::error::FsError;
use sdsfs::fs::views::picture::{self, IqAxes};
use sdsfs::fs::views::sigmf::{
    self, BoxTensors, MetaLayout, MetaSource, NamesMemo, Provenance, Stream,
};

/// Receivers, boxes and name repeats at most (the cost of one input stays small).
const MAX_RECEIVERS: u64 = 8;
const MAX_FUZZ_BOXES: usize = 4096;
const MAX_REPEAT: u64 = 100_000;

const AT: Provenance = Provenance {
    dataset_id: "fuzz",
    snapshot_id: "s1",
    record_id: "r0",
    ordinal: 0,
};

/// Runs one input: `Ok(false)` when it is not a JSON object, `Err` when a property broke.
pub fn run(input: &[u8]) -> Result<bool, String> {
    let limits = JsonLimits::default();
    let Ok(Value::Object(spec)) = parse_value(input, &limits) else {
        return Ok(false);
    };
    let record = record_of(&spec);
    let boxes = box_rows(&spec);
    let ids = id_rows(&spec, boxes.len());
    let tensors = BoxTensors {
        extent: boxes
            .iter()
            .flatten()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        identity: Some(ids.iter().flatten().flat_map(|v| v.to_le_bytes()).collect()),
    };
    let read = samples_reader();
    let mut streams = Vec::new();
    let mut panel_boxes = Vec::new();
    for (name, field) in record.fields.iter().filter(|(n, _)| n.ends_with("/iq")) {
        let layout = MetaLayout::build(name, field, &record, &AT, &NamesMemo::default());
        let source = MetaSource {
            name,
            field,
            record: &record,
            at: &AT,
        };
        let meta = layout
            .render(Some(&tensors), source)
            .map_err(|e| format!("{name}: render failed: {e}"))?;
        if meta.len() as u64 != layout.len() {
            return Err(format!(
                "{name}: meta of {} bytes, {} promised",
                meta.len(),
                layout.len()
            ));
        }
        if layout.len() > sigmf::MAX_META_BYTES + layout.text_len() {
            return Err(format!(
                "{name}: meta of {} bytes beyond its cap",
                layout.len()
            ));
        }
        parse_value(&meta, &limits).map_err(|e| format!("{name}: meta is not JSON: {e}"))?;
        let shown = match layout.needs_tensors() {
            Some(plan) => sigmf::converted_boxes(plan, &tensors, 0, name)
                .map_err(|e| format!("{name}: boxes: {e}"))?,
            None => Vec::new(),
        };
        let png = picture::spectrogram_png(&record.id, name, &IqAxes::of(field), &shown, &read)
            .map_err(|e| format!("{name}: spectrogram: {e}"))?;
        if png.len() as u64 != picture::spectrogram_len() {
            return Err(format!("{name}: spectrogram of {} bytes", png.len()));
        }
        streams.push(Stream::hashed(name.clone(), &meta));
        panel_boxes.push(shown);
    }
    let panels = picture::preview_panels(&record);
    let png = picture::preview_png(
        &record.id,
        &|n| record.fields.get(n).cloned(),
        &panels,
        &panel_boxes,
        &read,
    )
    .map_err(|e| format!("preview: {e}"))?;
    if png.len() as u64 != picture::preview_len(panels.len()) {
        return Err(format!("preview of {} bytes", png.len()));
    }
    let collection = sigmf::collection("fuzz", &streams, 0);
    parse_value(&collection, &limits).map_err(|e| format!("collection is not JSON: {e}"))?;
    Ok(true)
}

/// The record: `receivers` IQ fields `p/rx<k>/iq` and the box fields, from the spec.
fn record_of(spec: &Object) -> RecordMeta {
    let receivers = spec.get("receivers").and_then(Value::as_u64).unwrap_or(1);
    let samples = spec.get("samples").and_then(Value::as_u64).unwrap_or(1000);
    let step = spec.get("step").and_then(number);
    let iq_metadata = spec.get("iq").map(with_floats).and_then(into_object);
    let mut record = RecordMeta::new("r0");
    for k in 0..receivers.min(MAX_RECEIVERS) {
        let mut field = FieldMeta::new(DType::C64, vec![samples]);
        let mut axis = Axis::new("time", samples);
        if let Some(step) = step {
            axis =
                axis.with_coordinate(Coordinate::regular(0.0, Value::Float(step)).with_unit("s"));
        }
        field.axes = vec![axis];
        field.metadata = iq_metadata.clone().unwrap_or_default();
        record.fields.insert(format!("p/rx{k}/iq"), field);
    }
    let count = box_rows(spec).len() as u64;
    let mut extent = FieldMeta::new(DType::F64, vec![count, 4]);
    extent.metadata = spec
        .get("extent")
        .map(with_floats)
        .and_then(into_object)
        .unwrap_or_default();
    record.fields.insert("p/labels/boxes/extent".into(), extent);
    let mut identity = FieldMeta::new(DType::I32, vec![count, 2]);
    let mut names = spec
        .get("names")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let repeat = spec.get("name_repeat").and_then(Value::as_u64).unwrap_or(1);
    if let Some((_, Value::String(first))) = names.iter_mut().next() {
        *first = first.repeat(repeat.clamp(1, MAX_REPEAT) as usize);
    }
    identity
        .metadata
        .insert("class_names".into(), Value::Object(names));
    record
        .fields
        .insert("p/labels/boxes/identity".into(), identity);
    record
}

/// The boxes: four numbers per row (missing or odd entries as 0).
fn box_rows(spec: &Object) -> Vec<[f64; 4]> {
    let Some(rows) = spec.get("boxes").and_then(Value::as_array) else {
        return Vec::new();
    };
    rows.iter()
        .take(MAX_FUZZ_BOXES)
        .map(|row| {
            let values = row.as_array().unwrap_or(&[]);
            std::array::from_fn(|i| values.get(i).and_then(number).unwrap_or(0.0))
        })
        .collect()
}

/// `count` identity rows, from `ids` (missing ones are class 1, emitter 0).
fn id_rows(spec: &Object, count: usize) -> Vec<[i32; 2]> {
    let rows = spec.get("ids").and_then(Value::as_array);
    (0..count)
        .map(|i| {
            let row = rows.and_then(|r| r.get(i)).and_then(Value::as_array);
            let at = |j: usize| {
                row.and_then(|r| r.get(j))
                    .and_then(Value::as_i64)
                    .map_or(i32::from(j == 0), |v| v as i32)
            };
            [at(0), at(1)]
        })
        .collect()
}

/// A number, or one of the strings standing for a non-finite float.
fn number(value: &Value) -> Option<f64> {
    match value.as_str() {
        Some("nan") => Some(f64::NAN),
        Some("inf") => Some(f64::INFINITY),
        Some("-inf") => Some(f64::NEG_INFINITY),
        _ => value.as_f64(),
    }
}

/// `value` with the strings standing for non-finite floats made floats, at any depth.
fn with_floats(value: &Value) -> Value {
    match value {
        Value::String(_) => number(value).map_or_else(|| value.clone(), Value::Float),
        Value::Array(items) => Value::Array(items.iter().map(with_floats).collect()),
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(k, v)| (k.clone(), with_floats(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn into_object(value: Value) -> Option<Object> {
    match value {
        Value::Object(object) => Some(object),
        _ => None,
    }
}

/// Samples for any field: a tone with a NaN and an infinity now and then.
fn samples_reader() -> impl Fn(&str, u64, usize) -> Result<Bytes, FsError> {
    |_, offset, len| {
        let first = offset / 8;
        let samples = (0..len as u64 / 8).flat_map(move |i| {
            let n = first.wrapping_add(i);
            let v = match n % 97 {
                0 => f32::NAN,
                1 => f32::INFINITY,
                _ => (n as f32 * 0.1).sin(),
            };
            [v.to_le_bytes(), (-v).to_le_bytes()].concat()
        });
        Ok(Bytes::from(samples.collect::<Vec<u8>>()))
    }
}

/// The committed seeds (`fuzz/seeds/render/`, written by `fuzz_mutate --write-seeds`): an
/// ordinary record, then the values careless producers and importers wrote.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let iq = |rate: &str, center: &str| {
        format!(
            "{{\"time_coordinates\":{{\"kind\":\"uniform\",\"sample_rate_hz\":{rate}}},\
             \"center_frequency_hz\":{center}}}"
        )
    };
    let offset = "{\"frequency_frame\":\"receiver_center_offset\",\"receiver_center_hz\":1e9,\
                  \"time_frame\":\"receiver_sample_index\",\"sample_rate_hz\":1e6}";
    let absolute = |rate: &str| {
        format!(
            "{{\"frequency_frame\":\"absolute\",\"time_frame\":\"receiver_sample_index\",\
             \"sample_rate_hz\":{rate}}}"
        )
    };
    let good = "[[10,20,-1000,1000],[50,5,0,10]]";
    let hostile =
        "[[0,10,-1e300,1e300],[\"nan\",1,0,1],[\"inf\",1,0,1],[1e300,1e300,-1e300,1e300],\
                   [0,1,\"nan\",\"inf\"],[5,5,1e-300,2e-300],[-1e300,\"-inf\",-1.7e308,1.7e308]]";
    let many: Vec<String> = (0..MAX_FUZZ_BOXES)
        .map(|i| format!("[{i},1,-1,1]"))
        .collect();
    let many = format!("[{}]", many.join(","));
    let spec = |receivers: u64, extra: &str, iq: &str, extent: &str, boxes: &str| {
        format!(
            "{{\"receivers\":{receivers},\"samples\":1000,{extra}\"iq\":{iq},\"extent\":{extent},\
             \"boxes\":{boxes},\"names\":{{\"1\":\"burst\"}},\"ids\":[[1,0],[2,1]]}}"
        )
    };
    let step = "{\"center_frequency_hz\":2.4e9}";
    let huge = "\"samples\":2305843009213693951,";
    let long = "\"name_repeat\":100000,";
    // (name, receivers, extra keys, rate, centre, extent frame, boxes); a rate of "" means
    // the field states none (`step` gives it).
    let table: [(&str, u64, &str, &str, &str, String, &str); 12] = [
        ("ordinary", 1, "", "1e6", "1e9", offset.into(), good),
        (
            "centre-1e100",
            1,
            "",
            "1e6",
            "1e100",
            absolute("1e6"),
            hostile,
        ),
        (
            "rate-1e300",
            1,
            "",
            "1e300",
            "2.4e9",
            absolute("1e300"),
            hostile,
        ),
        (
            "step-1e-300",
            1,
            "\"step\":1e-300,",
            "",
            "",
            absolute("1e300"),
            hostile,
        ),
        (
            "rate-1.7e308",
            1,
            "",
            "1.7e308",
            "1.7e308",
            absolute("1.7e308"),
            hostile,
        ),
        (
            "rate-5e-324",
            1,
            "",
            "5e-324",
            "1",
            absolute("5e-324"),
            hostile,
        ),
        (
            "nan-metadata",
            2,
            "",
            "\"nan\"",
            "\"inf\"",
            absolute("\"nan\""),
            hostile,
        ),
        (
            "inf-rate",
            1,
            "",
            "\"inf\"",
            "\"-inf\"",
            absolute("\"-inf\""),
            good,
        ),
        ("empty-table", 1, "", "1e6", "1e9", offset.into(), "[]"),
        ("samples-2p61", 1, huge, "1e6", "1e9", offset.into(), good),
        (
            "eight-receivers",
            8,
            "",
            "1e6",
            "1e9",
            absolute("1e6"),
            good,
        ),
        (
            "many-boxes-long-name",
            1,
            long,
            "1e6",
            "1e9",
            absolute("1e6"),
            &many,
        ),
    ];
    let cases = table.map(|(name, receivers, extra, rate, center, extent, boxes)| {
        let metadata = if rate.is_empty() {
            step.to_string()
        } else {
            iq(rate, center)
        };
        let text = spec(receivers, extra, &metadata, &extent, boxes);
        // A key given twice keeps the last: the huge sample count replaces the 1000.
        (
            name,
            text.replace("\"samples\":1000,\"samples\"", "\"samples\""),
        )
    });
    cases
        .into_iter()
        .map(|(name, text)| (name.to_string(), text.into_bytes()))
        .collect()
}
