//! RFGen-style box labels, read from their field descriptors and converted to absolute terms
//! (SigMF annotations). Pure: no I/O, and nothing here trusts the numbers it is given.
//!
//! Why here: the box convention is part of what a record means (the frame a box's numbers are
//! in), not of how the mount shows it, so the conversions are testable alone and any layer
//! above may use them. The convention (`docs/MOUNT.md`, "Labels as SigMF annotations"):
//!
//! - `<prefix>/labels/boxes/extent`: float64 `(box, extent)`, columns `start_sample`,
//!   `duration_samples`, `low_freq_hz`, `high_freq_hz` (named by the extent axis's coordinate
//!   values when it has them, else in that order), the interval half-open;
//! - `<prefix>/labels/boxes/identity`: int32 `(box, attribute)`, columns `class_id`,
//!   `emitter_index`, with `class_names` (`{"<id>": "<name>"}`) in its metadata;
//! - the frame keys `frequency_frame`, `receiver_center_hz`, `time_frame`, `sample_rate_hz`
//!   in the extent's field metadata, at its top level or under its nested `metadata` key (the
//!   top level decides when both have a key).
//!
//! Frames understood: `frequency_frame` `receiver_center_offset` (edges are offsets from
//! `receiver_center_hz`, which must equal the receiver's `center_frequency_hz`) or `absolute`
//! (edges are RF Hz); `time_frame` `receiver_sample_index` (sample indices at the extent's
//! `sample_rate_hz`, counted from the receiver's first sample). A receiver at another rate gets
//! the box's interval scaled to its rate and widened to whole samples (start rounded down, end
//! rounded up). Anything else is unconvertible and never guessed.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::dtype::DType;
use super::json::{python_float_repr, write_string, Object, Value};
use super::record::FieldMeta;

/// Last segments of the box fields' names.
pub const EXTENT_NAME: &str = "labels/boxes/extent";
pub const IDENTITY_NAME: &str = "labels/boxes/identity";

/// More boxes than this in one record are not converted (a SigMF file of millions of
/// annotations helps nobody, and the claim comes from an untrusted row).
pub const MAX_BOXES: u64 = 100_000;

/// Longest text of a `u64` and of an `i32`.
const U64_TEXT: usize = 20;
const I32_TEXT: usize = 11;
/// Longest `repr` of a finite float64 (`-1.2345678901234567e-308`).
pub const F64_TEXT: usize = 24;
/// Largest value written as a sample index: above 2^53 a float64 no longer holds every
/// integer, so a larger index could not be what the labeller meant.
const MAX_SAMPLE: f64 = 9_007_199_254_740_992.0;

/// Why boxes, or one box, cannot be converted. The messages name the rule broken; the caller
/// adds the field and record.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LabelError {
    #[error("{0}")]
    Frame(String),
    #[error("{0}")]
    Shape(String),
    #[error("box {index}: {rule}")]
    Box { index: u64, rule: String },
}

fn frame_error(message: impl Into<String>) -> LabelError {
    LabelError::Frame(message.into())
}

/// The frequency frame of the box edges.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FrequencyFrame {
    /// Offsets from a receiver centred at `center_hz`.
    CenterOffset { center_hz: f64 },
    /// Absolute RF frequency.
    Absolute,
}

/// The frame the box numbers are in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxFrame {
    pub frequency: FrequencyFrame,
    /// Rate of the sample indices (`time_frame` `receiver_sample_index`).
    pub sample_rate_hz: f64,
}

/// `key` of field metadata: at its top level, else under its nested `metadata` object.
pub fn metadata_key<'a>(metadata: &'a Object, key: &str) -> Option<&'a Value> {
    metadata.get(key).or_else(|| {
        metadata
            .get("metadata")
            .and_then(Value::as_object)
            .and_then(|nested| nested.get(key))
    })
}

fn positive_finite(metadata: &Object, key: &str) -> Result<f64, LabelError> {
    let value = metadata_key(metadata, key).ok_or_else(|| frame_error(format!("no {key}")))?;
    match value.as_f64() {
        Some(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(frame_error(format!(
            "{key} is not a positive finite number"
        ))),
    }
}

fn frame_name<'a>(metadata: &'a Object, key: &str) -> Result<&'a str, LabelError> {
    metadata_key(metadata, key)
        .ok_or_else(|| frame_error(format!("no {key}")))?
        .as_str()
        .ok_or_else(|| frame_error(format!("{key} is not a string")))
}

/// The frame stated by the extent field's metadata.
pub fn box_frame(extent_metadata: &Object) -> Result<BoxFrame, LabelError> {
    let frequency = match frame_name(extent_metadata, "frequency_frame")? {
        "receiver_center_offset" => FrequencyFrame::CenterOffset {
            center_hz: positive_finite(extent_metadata, "receiver_center_hz")?,
        },
        "absolute" => FrequencyFrame::Absolute,
        other => {
            return Err(frame_error(format!(
                "frequency_frame {other:?} is not one the mount converts \
                 (receiver_center_offset, absolute)"
            )))
        }
    };
    match frame_name(extent_metadata, "time_frame")? {
        "receiver_sample_index" => {}
        other => {
            return Err(frame_error(format!(
                "time_frame {other:?} is not one the mount converts (receiver_sample_index)"
            )))
        }
    }
    Ok(BoxFrame {
        frequency,
        sample_rate_hz: positive_finite(extent_metadata, "sample_rate_hz")?,
    })
}

/// Where the four numbers of a box sit in a row of the extent tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtentColumns {
    pub start: usize,
    pub duration: usize,
    pub low: usize,
    pub high: usize,
    /// Numbers per row.
    pub width: usize,
}

/// Where `class_id` and `emitter_index` sit in a row of the identity tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdentityColumns {
    pub class_id: usize,
    pub emitter_index: usize,
    pub width: usize,
}

/// The box count and row width of a rank-2 tensor of `dtype` with at least `columns` columns.
fn box_table(field: &FieldMeta, dtype: DType, columns: u64) -> Result<(u64, usize), LabelError> {
    if field.dtype != dtype {
        return Err(LabelError::Shape(format!(
            "dtype is {}, not {}",
            field.dtype.numpy_name(),
            dtype.numpy_name()
        )));
    }
    let [count, width] = field.shape[..] else {
        return Err(LabelError::Shape(format!(
            "rank {}, not 2 (box, column)",
            field.shape.len()
        )));
    };
    if width < columns || width > 64 {
        return Err(LabelError::Shape(format!(
            "{width} columns, not {columns} to 64"
        )));
    }
    if count > MAX_BOXES {
        return Err(LabelError::Shape(format!(
            "{count} boxes, more than the {MAX_BOXES} converted"
        )));
    }
    Ok((count, width as usize))
}

/// Column names from the second axis's coordinate values, when every value is a string.
fn column_names(field: &FieldMeta) -> Option<Vec<&str>> {
    let values = field.axes.get(1)?.coordinate.as_ref()?.values.as_ref()?;
    values.iter().map(Value::as_str).collect()
}

/// Where the `wanted` columns sit in rows of `width` numbers (a named column past the row's
/// end, which a validated row cannot have, is refused rather than read out of bounds).
fn column_indices<const N: usize>(
    field: &FieldMeta,
    wanted: [&str; N],
    width: usize,
) -> Result<[usize; N], LabelError> {
    let Some(names) = column_names(field) else {
        return Ok(std::array::from_fn(|i| i));
    };
    let mut indices = [0usize; N];
    for (slot, name) in indices.iter_mut().zip(wanted) {
        *slot = names
            .iter()
            .position(|n| *n == name)
            .filter(|&index| index < width)
            .ok_or_else(|| LabelError::Shape(format!("no column named {name:?}")))?;
    }
    Ok(indices)
}

/// The box count and columns of an extent field.
pub fn extent_columns(field: &FieldMeta) -> Result<(u64, ExtentColumns), LabelError> {
    let (count, width) = box_table(field, DType::F64, 4)?;
    let [start, duration, low, high] = column_indices(field, write::EXTENT_COLUMNS, width)?;
    Ok((
        count,
        ExtentColumns {
            start,
            duration,
            low,
            high,
            width,
        },
    ))
}

/// The columns of an identity field holding `count` boxes.
pub fn identity_columns(field: &FieldMeta, count: u64) -> Result<IdentityColumns, LabelError> {
    let (boxes, width) = box_table(field, DType::I32, 2)?;
    if boxes != count {
        return Err(LabelError::Shape(format!(
            "{boxes} boxes, but the extent has {count}"
        )));
    }
    let [class_id, emitter_index] = column_indices(field, write::IDENTITY_COLUMNS, width)?;
    Ok(IdentityColumns {
        class_id,
        emitter_index,
        width,
    })
}

/// Longest class name shown, in bytes: a longer one is cut at a character boundary and ends
/// with [`SHORTENED`]. A box's annotation slot is as wide as the longest name can make it, so
/// one 20,000-character name would otherwise widen every slot of a 100,000-box document.
pub const MAX_CLASS_NAME_BYTES: usize = 256;
/// What ends a shortened class name.
pub const SHORTENED: &str = "\u{2026}";

/// The class names of a table, each held once and shared by every box that carries it.
pub type ClassNames = BTreeMap<i64, Arc<str>>;

/// `class_names` of the identity metadata: entries whose key is an integer and whose value is a
/// string (others are ignored; a class without a name is labelled by its id), each at most
/// [`MAX_CLASS_NAME_BYTES`] ([`shorten_name`]).
pub fn class_names(identity_metadata: &Object) -> ClassNames {
    let Some(names) = metadata_key(identity_metadata, "class_names").and_then(Value::as_object)
    else {
        return BTreeMap::new();
    };
    names
        .iter()
        .filter_map(|(id, name)| Some((id.parse().ok()?, shorten_name(name.as_str()?))))
        .collect()
}

/// `name`, or its first characters followed by [`SHORTENED`] when it is longer than
/// [`MAX_CLASS_NAME_BYTES`] (the result is never longer).
pub fn shorten_name(name: &str) -> Arc<str> {
    if name.len() <= MAX_CLASS_NAME_BYTES {
        return Arc::from(name);
    }
    let mut end = MAX_CLASS_NAME_BYTES - SHORTENED.len();
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    Arc::from(format!("{}{SHORTENED}", &name[..end]))
}

/// What a receiver states about its own frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReceiverFrame {
    pub center_hz: Option<f64>,
    pub sample_rate_hz: Option<f64>,
}

/// How a box becomes absolute for one receiver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conversion {
    /// Added to both edges.
    pub offset_hz: f64,
    /// Receiver rate over box rate.
    pub rate_ratio: f64,
}

/// Whether boxes in `frame` belong to a receiver, and how to convert them.
#[derive(Debug, Clone, PartialEq)]
pub enum Membership {
    Member(Conversion),
    /// The receiver is tuned elsewhere: the boxes are another receiver's.
    OtherReceiver,
    Unconvertible(String),
}

/// The receiver's membership in the boxes' frame.
pub fn membership(frame: &BoxFrame, receiver: &ReceiverFrame) -> Membership {
    let Some(rate) = receiver.sample_rate_hz else {
        return Membership::Unconvertible("the receiver states no sample rate".into());
    };
    let offset_hz = match frame.frequency {
        FrequencyFrame::Absolute => 0.0,
        FrequencyFrame::CenterOffset { center_hz } => match receiver.center_hz {
            None => {
                return Membership::Unconvertible(
                    "the receiver states no center_frequency_hz".into(),
                )
            }
            Some(center) if center == center_hz => center_hz,
            Some(_) => return Membership::OtherReceiver,
        },
    };
    let rate_ratio = rate / frame.sample_rate_hz;
    if !rate_ratio.is_finite() || rate_ratio <= 0.0 {
        return Membership::Unconvertible("the rates have no finite ratio".into());
    }
    Membership::Member(Conversion {
        offset_hz,
        rate_ratio,
    })
}

/// A centre frequency stated by field metadata (`center_frequency_hz`, top level or nested),
/// when it is a positive finite number.
pub fn center_frequency(metadata: &Object) -> Option<f64> {
    metadata_key(metadata, "center_frequency_hz")
        .and_then(Value::as_f64)
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// One box's numbers, as read from the tensors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxRow {
    pub start: f64,
    pub duration: f64,
    pub low_hz: f64,
    pub high_hz: f64,
    /// `(class_id, emitter_index)`, when the record has an identity field.
    pub identity: Option<(i32, i32)>,
}

/// A box in absolute terms, ready for SigMF.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    pub sample_start: u64,
    pub sample_count: u64,
    pub freq_lower_edge: f64,
    pub freq_upper_edge: f64,
    /// The class name (shared with every box of the class) or the class id.
    pub label: Option<Arc<str>>,
    pub comment: Option<String>,
}

fn box_rule(index: u64, rule: &str) -> LabelError {
    LabelError::Box {
        index,
        rule: rule.to_string(),
    }
}

/// Box `index` in absolute terms for a receiver reached by `conversion`.
pub fn convert_box(
    index: u64,
    row: &BoxRow,
    conversion: &Conversion,
    names: &ClassNames,
) -> Result<Annotation, LabelError> {
    let numbers = [row.start, row.duration, row.low_hz, row.high_hz];
    if numbers.iter().any(|v| !v.is_finite()) {
        return Err(box_rule(index, "an extent is not a finite number"));
    }
    if row.start < 0.0 || row.duration <= 0.0 {
        return Err(box_rule(
            index,
            "start_sample is negative or duration_samples is not positive",
        ));
    }
    let first = (row.start * conversion.rate_ratio).floor();
    let end = ((row.start + row.duration) * conversion.rate_ratio).ceil();
    if end.is_nan() || end > MAX_SAMPLE || end <= first {
        return Err(box_rule(
            index,
            "the sample range is empty or ends beyond 2^53",
        ));
    }
    let (lower, upper) = (
        row.low_hz + conversion.offset_hz,
        row.high_hz + conversion.offset_hz,
    );
    if !lower.is_finite() || !upper.is_finite() || lower > upper {
        return Err(box_rule(
            index,
            "low_freq_hz is above high_freq_hz or an edge is not finite",
        ));
    }
    let label = label_of(row.identity, names);
    Ok(Annotation {
        sample_start: first as u64,
        sample_count: (end - first) as u64,
        freq_lower_edge: lower,
        freq_upper_edge: upper,
        label,
        comment: row.identity.map(|(_, emitter)| comment(emitter)),
    })
}

/// A box's label: its class's name in `names`; none without an identity
/// (`(class_id, emitter_index)`) or for a class without a name (the importers write -1 for
/// an annotation without a label, as ML tables often do). Not the id in decimal: a label
/// table's labels are a dictionary of the names the rows declare, which the ids in the data
/// could not extend.
pub fn label_of(identity: Option<(i32, i32)>, names: &ClassNames) -> Option<Arc<str>> {
    let (class, _) = identity?;
    names.get(&i64::from(class)).cloned()
}

/// The longest label text [`label_of`] can give with `names`, as a JSON string or `null`.
pub fn max_label_json_len(names: &ClassNames) -> usize {
    names
        .values()
        .map(|name| {
            let mut text = String::new();
            write_string(name, &mut text);
            text.len()
        })
        .fold("null".len(), usize::max)
}

fn comment(emitter_index: i32) -> String {
    format!("emitter {emitter_index}")
}

/// One annotation as compact JSON, keys sorted.
pub fn render_annotation(annotation: &Annotation) -> String {
    let mut out = String::from("{");
    if let Some(comment) = &annotation.comment {
        out.push_str("\"core:comment\":");
        write_string(comment, &mut out);
        out.push(',');
    }
    out.push_str("\"core:freq_lower_edge\":");
    out.push_str(&python_float_repr(annotation.freq_lower_edge));
    out.push_str(",\"core:freq_upper_edge\":");
    out.push_str(&python_float_repr(annotation.freq_upper_edge));
    if let Some(label) = &annotation.label {
        out.push_str(",\"core:label\":");
        write_string(label, &mut out);
    }
    out.push_str(",\"core:sample_count\":");
    out.push_str(&annotation.sample_count.to_string());
    out.push_str(",\"core:sample_start\":");
    out.push_str(&annotation.sample_start.to_string());
    out.push('}');
    out
}

/// The longest [`render_annotation`] text of any box, given the names a label may take:
/// every number at its longest text, the longest label (a name, or a class id), and the
/// comment of the longest emitter index.
pub fn max_annotation_len(names: &ClassNames, with_identity: bool) -> usize {
    let longest = Annotation {
        sample_start: u64::MAX,
        sample_count: u64::MAX,
        freq_lower_edge: 0.0,
        freq_upper_edge: 0.0,
        label: None,
        comment: None,
    };
    // Two floats rendered as "0.0" (3 characters) stand in for the longest float text.
    let mut len = render_annotation(&longest).len() + 2 * (F64_TEXT - 3);
    if with_identity {
        let label = names
            .values()
            .map(|name| json_string_len(name))
            .chain([I32_TEXT + 2])
            .max()
            .unwrap_or(0);
        len += ",\"core:label\":".len() + label;
        len += "\"core:comment\":,".len() + json_string_len(&comment(i32::MIN));
    }
    len.max(U64_TEXT)
}

fn json_string_len(text: &str) -> usize {
    let mut out = String::new();
    write_string(text, &mut out);
    out.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::json::Value;

    fn metadata(pairs: &[(&str, Value)]) -> Object {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), v.clone()))
            .collect()
    }

    fn offset_frame() -> Object {
        metadata(&[
            ("frequency_frame", "receiver_center_offset".into()),
            ("receiver_center_hz", Value::Float(2.4e9)),
            ("time_frame", "receiver_sample_index".into()),
            ("sample_rate_hz", Value::Float(1e6)),
        ])
    }

    #[test]
    fn frame_keys_at_top_level_or_nested() {
        let top = box_frame(&offset_frame()).unwrap();
        assert_eq!(
            top.frequency,
            FrequencyFrame::CenterOffset { center_hz: 2.4e9 }
        );
        assert_eq!(top.sample_rate_hz, 1e6);
        let nested = metadata(&[("metadata", Value::Object(offset_frame()))]);
        assert_eq!(box_frame(&nested).unwrap(), top);
        let mut unknown = offset_frame();
        unknown.insert("frequency_frame".into(), "baseband".into());
        assert!(matches!(box_frame(&unknown), Err(LabelError::Frame(m)) if m.contains("baseband")));
        let mut no_rate = offset_frame();
        no_rate.remove("sample_rate_hz");
        assert_eq!(
            box_frame(&no_rate),
            Err(LabelError::Frame("no sample_rate_hz".into()))
        );
        let mut zero_center = offset_frame();
        zero_center.insert("receiver_center_hz".into(), Value::Int(0));
        assert!(box_frame(&zero_center).is_err());
    }

    #[test]
    fn membership_by_centre_and_rate() {
        let frame = box_frame(&offset_frame()).unwrap();
        let rx = |center, rate| ReceiverFrame {
            center_hz: center,
            sample_rate_hz: rate,
        };
        assert_eq!(
            membership(&frame, &rx(Some(2.4e9), Some(2e6))),
            Membership::Member(Conversion {
                offset_hz: 2.4e9,
                rate_ratio: 2.0
            })
        );
        assert_eq!(
            membership(&frame, &rx(Some(2.5e9), Some(1e6))),
            Membership::OtherReceiver
        );
        assert!(matches!(
            membership(&frame, &rx(None, Some(1e6))),
            Membership::Unconvertible(_)
        ));
        assert!(matches!(
            membership(&frame, &rx(Some(2.4e9), None)),
            Membership::Unconvertible(_)
        ));
    }

    #[test]
    fn boxes_become_absolute_and_widen_to_whole_samples() {
        let names = BTreeMap::from([(1, Arc::from("qpsk"))]);
        let row = BoxRow {
            start: 2000.0,
            duration: 9000.0,
            low_hz: 82_500.0,
            high_hz: 217_500.0,
            identity: Some((1, 0)),
        };
        let same = Conversion {
            offset_hz: 2.4e9,
            rate_ratio: 1.0,
        };
        let a = convert_box(0, &row, &same, &names).unwrap();
        assert_eq!((a.sample_start, a.sample_count), (2000, 9000));
        assert_eq!(
            (a.freq_lower_edge, a.freq_upper_edge),
            (2_400_082_500.0, 2_400_217_500.0)
        );
        assert_eq!(a.label.as_deref(), Some("qpsk"));
        assert_eq!(a.comment.as_deref(), Some("emitter 0"));
        let third = Conversion {
            offset_hz: 0.0,
            rate_ratio: 1.0 / 3.0,
        };
        let b = convert_box(
            0,
            &BoxRow {
                identity: Some((7, 2)),
                ..row
            },
            &third,
            &names,
        )
        .unwrap();
        // [2000/3, 11000/3) widened: 666 up to 3667.
        assert_eq!((b.sample_start, b.sample_count), (666, 3001));
        assert_eq!(b.label, None, "class 7 has no name");
    }

    #[test]
    fn hostile_boxes_are_refused() {
        let names = BTreeMap::new();
        let conversion = Conversion {
            offset_hz: 0.0,
            rate_ratio: 1.0,
        };
        let good = BoxRow {
            start: 0.0,
            duration: 1.0,
            low_hz: 0.0,
            high_hz: 1.0,
            identity: None,
        };
        let bad = [
            BoxRow {
                start: f64::NAN,
                ..good
            },
            BoxRow {
                duration: -5.0,
                ..good
            },
            BoxRow {
                duration: 0.0,
                ..good
            },
            BoxRow {
                start: -1.0,
                ..good
            },
            BoxRow {
                high_hz: f64::INFINITY,
                ..good
            },
            BoxRow {
                low_hz: 2.0,
                ..good
            },
            BoxRow {
                start: 1e300,
                ..good
            },
        ];
        for row in bad {
            assert!(
                convert_box(3, &row, &conversion, &names).is_err(),
                "{row:?}"
            );
        }
        let huge = Conversion {
            offset_hz: f64::MAX,
            rate_ratio: 1.0,
        };
        assert!(convert_box(
            0,
            &BoxRow {
                high_hz: f64::MAX,
                ..good
            },
            &huge,
            &names
        )
        .is_err());
    }

    #[test]
    fn rendering_is_sorted_json_within_the_maximum() {
        let names = BTreeMap::from([(1, Arc::from("q\"psk"))]);
        let a = Annotation {
            sample_start: 5,
            sample_count: 10,
            freq_lower_edge: -1.5,
            freq_upper_edge: 2e20,
            label: Some("q\"psk".into()),
            comment: Some("emitter 3".into()),
        };
        assert_eq!(
            render_annotation(&a),
            "{\"core:comment\":\"emitter 3\",\"core:freq_lower_edge\":-1.5,\
             \"core:freq_upper_edge\":2e+20,\"core:label\":\"q\\\"psk\",\
             \"core:sample_count\":10,\"core:sample_start\":5}"
        );
        let worst = Annotation {
            sample_start: u64::MAX,
            sample_count: u64::MAX,
            freq_lower_edge: -1.2345678901234567e-308,
            freq_upper_edge: -2.2250738585072014e-308,
            label: Some("-2147483648".into()),
            comment: Some(comment(i32::MIN)),
        };
        assert_eq!(python_float_repr(worst.freq_lower_edge).len(), F64_TEXT);
        assert_eq!(
            render_annotation(&worst).len(),
            max_annotation_len(&BTreeMap::new(), true)
        );
        assert!(max_annotation_len(&names, true) >= render_annotation(&a).len());
        let bare = Annotation {
            label: None,
            comment: None,
            ..worst
        };
        assert_eq!(
            render_annotation(&bare).len(),
            max_annotation_len(&names, false)
        );
    }

    #[test]
    fn box_tables_check_dtype_rank_and_count() {
        let mut extent = FieldMeta::new(DType::F64, vec![2, 4]);
        assert_eq!(extent_columns(&extent).unwrap().0, 2);
        extent.shape = vec![MAX_BOXES + 1, 4];
        assert!(extent_columns(&extent).is_err());
        extent.shape = vec![2, 3];
        assert!(extent_columns(&extent).is_err());
        extent.shape = vec![8];
        assert!(extent_columns(&extent).is_err());
        let identity = FieldMeta::new(DType::I32, vec![3, 2]);
        assert!(identity_columns(&identity, 2).is_err());
        assert!(identity_columns(&identity, 3).is_ok());
        let wrong = FieldMeta::new(DType::F32, vec![3, 2]);
        assert!(identity_columns(&wrong, 3).is_err());
    }

    #[test]
    fn class_names_ignore_odd_entries() {
        let mut names = Object::new();
        names.insert("1".into(), "qpsk".into());
        names.insert("x".into(), "bad key".into());
        names.insert("2".into(), Value::Int(5));
        let meta = metadata(&[("class_names", Value::Object(names))]);
        assert_eq!(class_names(&meta), BTreeMap::from([(1, Arc::from("qpsk"))]));
    }

    #[test]
    fn long_class_names_are_shortened_with_a_marker() {
        assert_eq!(&*shorten_name("qpsk"), "qpsk");
        let exact = "a".repeat(MAX_CLASS_NAME_BYTES);
        assert_eq!(&*shorten_name(&exact), exact.as_str());
        // 20,000 two-byte characters: cut at a character boundary, 256 bytes at most, by hand
        // 253 bytes of text less the half character, then the 3-byte ellipsis.
        let long = shorten_name(&"é".repeat(20_000));
        assert_eq!(long.len(), 252 + 3);
        assert!(long.ends_with('\u{2026}'));
        assert!(long.starts_with("éé"));
    }
}

/// The writers' side of the convention: the box fields as every writer of this crate makes
/// them (the importers and the demo), in the spelling the mount reads (and the library's
/// RFGen datasets use).
pub mod write {
    use super::super::dtype::DType;
    use super::super::json::{Object, Value};
    use super::super::record::{Axis, Coordinate, Field, RecordError};

    /// The extent's columns, in order.
    pub const EXTENT_COLUMNS: [&str; 4] = [
        "start_sample",
        "duration_samples",
        "low_freq_hz",
        "high_freq_hz",
    ];
    /// The identity's columns, in order.
    pub const IDENTITY_COLUMNS: [&str; 2] = ["class_id", "emitter_index"];

    /// One box: where it is (sample indices and Hz, in the frame of its extent field) and what.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct LabelBox {
        pub start_sample: f64,
        pub duration_samples: f64,
        pub low_freq_hz: f64,
        pub high_freq_hz: f64,
        pub class_id: i32,
        pub emitter_index: i32,
    }

    /// The frame a writer's boxes are in.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub enum WrittenFrame {
        /// Edges in RF Hz, sample indices at `sample_rate_hz`.
        Absolute { sample_rate_hz: f64 },
        /// Edges as offsets from `center_hz`, sample indices at `sample_rate_hz`.
        CenterOffset { center_hz: f64, sample_rate_hz: f64 },
    }

    impl WrittenFrame {
        /// The frame keys, as the extent field's metadata holds them.
        pub fn metadata(&self) -> Object {
            let mut keys = Object::new();
            let rate = match *self {
                WrittenFrame::Absolute { sample_rate_hz } => {
                    keys.insert("frequency_frame".into(), Value::from("absolute"));
                    sample_rate_hz
                }
                WrittenFrame::CenterOffset {
                    center_hz,
                    sample_rate_hz,
                } => {
                    keys.insert(
                        "frequency_frame".into(),
                        Value::from("receiver_center_offset"),
                    );
                    keys.insert("receiver_center_hz".into(), Value::Float(center_hz));
                    sample_rate_hz
                }
            };
            keys.insert("time_frame".into(), Value::from("receiver_sample_index"));
            keys.insert("sample_rate_hz".into(), Value::Float(rate));
            keys
        }
    }

    fn box_axis(count: u64) -> Axis {
        Axis::new("box", count).with_role("box").with_id("box")
    }

    fn columns_axis(name: &str, columns: &[&str]) -> Axis {
        let names = columns.iter().map(|c| Value::from(*c)).collect();
        Axis::new(name, columns.len() as u64)
            .with_role("column")
            .with_coordinate(Coordinate::from_values(names))
    }

    /// `labels/boxes/extent`: float64 `(box, extent)` of `boxes`, with `metadata` (the frame
    /// keys, [`WrittenFrame::metadata`], at its top level or under a nested `metadata` key).
    pub fn extent_field(boxes: &[LabelBox], metadata: Object) -> Result<Field, RecordError> {
        let bytes: Vec<u8> = boxes
            .iter()
            .flat_map(|b| {
                [
                    b.start_sample,
                    b.duration_samples,
                    b.low_freq_hz,
                    b.high_freq_hz,
                ]
            })
            .flat_map(f64::to_le_bytes)
            .collect();
        let count = boxes.len() as u64;
        Ok(Field::new(DType::F64, vec![count, 4], bytes)?
            .with_axes(vec![
                box_axis(count),
                columns_axis("extent", &EXTENT_COLUMNS),
            ])
            .with_metadata(metadata))
    }

    /// `labels/boxes/identity`: int32 `(box, attribute)` of `boxes`, with `class_names`
    /// (`{"<id>": "<name>"}`) in its metadata.
    pub fn identity_field(boxes: &[LabelBox], class_names: Object) -> Result<Field, RecordError> {
        let bytes: Vec<u8> = boxes
            .iter()
            .flat_map(|b| [b.class_id, b.emitter_index])
            .flat_map(i32::to_le_bytes)
            .collect();
        let count = boxes.len() as u64;
        let mut metadata = Object::new();
        metadata.insert("class_names".into(), Value::Object(class_names));
        Ok(Field::new(DType::I32, vec![count, 2], bytes)?
            .with_axes(vec![
                box_axis(count),
                columns_axis("attribute", &IDENTITY_COLUMNS),
            ])
            .with_metadata(metadata))
    }
}
