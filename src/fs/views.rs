//! The views of a field as files, all derived from the metadata row alone so that their sizes
//! are known without touching a data shard:
//! - `.raw`: the tensor's bytes, little-endian, C order;
//! - `.json`: the field descriptor `{"axes","dtype","metadata","name","shape"}`;
//! - `.npy`: a NumPy header ([`crate::format::npy`]) followed by the tensor's bytes;
//! - `.sigmf-data` / `.sigmf-meta`: for complex64 fields of rank 1 and length at least 1, the
//!   same bytes as `.raw` and a SigMF metadata file describing them, with the record's label
//!   boxes as annotations ([`sigmf`]);
//! - `.spectrogram.png`: beside every SigMF pair, a waterfall picture of the field with the
//!   same boxes drawn and named ([`picture`], which also draws a record's `preview.png`).

pub mod picture;
pub mod sigmf;

use crate::format::dtype::DType;
use crate::format::json::{self, Object, Value};
use crate::format::record::{FieldMeta, RecordMeta};

/// One file view of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    Raw,
    Json,
    Npy,
    SigmfData,
    SigmfMeta,
    Spectrogram,
}

impl View {
    /// The file-name suffix of this view.
    pub fn suffix(self) -> &'static str {
        match self {
            View::Raw => ".raw",
            View::Json => ".json",
            View::Npy => ".npy",
            View::SigmfData => ".sigmf-data",
            View::SigmfMeta => ".sigmf-meta",
            View::Spectrogram => ".spectrogram.png",
        }
    }

    /// Views whose content is the tensor's bytes (after an optional header).
    pub fn needs_tensor(self) -> bool {
        matches!(self, View::Raw | View::Npy | View::SigmfData)
    }
}

/// The views a field has, in listing order.
pub fn views_of(field: &FieldMeta) -> Vec<View> {
    let mut views = vec![View::Json, View::Npy, View::Raw];
    if has_sigmf_pair(field) {
        views.push(View::SigmfData);
        views.push(View::SigmfMeta);
        views.push(View::Spectrogram);
    }
    views
}

/// Complex64 of rank 1 with at least one sample.
pub fn has_sigmf_pair(field: &FieldMeta) -> bool {
    field.dtype == DType::C64 && field.shape.len() == 1 && field.shape[0] >= 1
}

/// The `.json` view: pretty deterministic JSON.
pub fn field_json(name: &str, field: &FieldMeta) -> Vec<u8> {
    json::to_pretty(&field.to_json(name)).into_bytes()
}

/// `record.json`: the metadata row plus the ordinal, pretty.
pub fn record_json(meta: &RecordMeta, ordinal: u64) -> Vec<u8> {
    let head = RecordHead {
        id: &meta.id,
        scene_id: meta.scene_id.as_deref(),
        metadata: &meta.metadata,
        ordinal,
    };
    let fields = meta
        .fields
        .iter()
        .map(|(name, field)| Ok::<_, std::convert::Infallible>((name, field.to_row_value())));
    match record_json_of(head, fields) {
        Ok(text) => text,
        Err(never) => match never {},
    }
}

/// A row's parts beside its fields, and the record's ordinal.
#[derive(Clone, Copy)]
pub struct RecordHead<'a> {
    pub id: &'a str,
    pub scene_id: Option<&'a str>,
    pub metadata: &'a Object,
    pub ordinal: u64,
}

/// [`record_json`] of a row given in parts: `fields` in name order, each in its row form, as
/// they are made (a row kept as text parses them one at a time). Each is written and let go,
/// so only the text is ever whole: the document as one tree of values was several times the
/// row for a record of thousands of fields.
pub fn record_json_of<K: AsRef<str>, E>(
    head: RecordHead<'_>,
    fields: impl IntoIterator<Item = Result<(K, Value), E>>,
) -> Result<Vec<u8>, E> {
    let mut out = String::new();
    let mut doc = json::PrettyObject::open(&mut out, 0);
    let mut listed = doc.nested("fields");
    for field in fields {
        let (name, value) = field?;
        listed.member(name.as_ref(), &value);
    }
    listed.close();
    doc.member("id", &Value::from(head.id));
    doc.object("metadata", head.metadata);
    doc.member("ordinal", &Value::from(head.ordinal));
    doc.member("scene_id", &Value::from(head.scene_id));
    doc.close();
    out.push('\n');
    Ok(out.into_bytes())
}

/// The sample rate: the field's `time_coordinates` block when it is `uniform` with a
/// `sample_rate_hz`, else a regular coordinate in seconds on the field's axis (1/step). The
/// first source that exists decides; a value that is not positive and finite gives none.
pub fn sample_rate(field: &FieldMeta) -> Option<f64> {
    let rate = match uniform_time_block_rate(&field.metadata) {
        Some(rate) => rate,
        None => 1.0 / seconds_step(field)?,
    };
    (rate.is_finite() && rate > 0.0).then_some(rate)
}

fn uniform_time_block_rate(metadata: &Object) -> Option<f64> {
    let block = metadata.get("time_coordinates")?.as_object()?;
    if block.get("kind")?.as_str()? != "uniform" {
        return None;
    }
    Some(block.get("sample_rate_hz")?.as_f64().unwrap_or(f64::NAN))
}

fn seconds_step(field: &FieldMeta) -> Option<f64> {
    let coordinate = field.axes.first()?.coordinate.as_ref()?;
    if coordinate.unit.as_deref() != Some("s") || coordinate.start.is_none() {
        return None;
    }
    Some(coordinate.step.as_ref()?.as_f64().unwrap_or(f64::NAN))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::record::{Axis, Coordinate};

    fn iq(len: u64) -> FieldMeta {
        let mut field = FieldMeta::new(DType::C64, vec![len]);
        field.axes = vec![Axis::new("time", len)];
        field
    }

    fn rate_block(kind: &str, rate: Value) -> Object {
        let mut block = Object::new();
        block.insert("kind".into(), Value::from(kind));
        block.insert("sample_rate_hz".into(), rate);
        let mut metadata = Object::new();
        metadata.insert("time_coordinates".into(), Value::Object(block));
        metadata
    }

    #[test]
    fn sigmf_pair_only_for_rank_one_complex64() {
        assert!(has_sigmf_pair(&iq(1)));
        assert!(!has_sigmf_pair(&iq(0)));
        assert!(!has_sigmf_pair(&FieldMeta::new(DType::C64, vec![2, 3])));
        assert!(!has_sigmf_pair(&FieldMeta::new(DType::F32, vec![8])));
        assert_eq!(views_of(&iq(4)).len(), 6);
    }

    #[test]
    fn sample_rate_sources_in_order() {
        let mut field = iq(10);
        assert_eq!(sample_rate(&field), None);
        field.axes[0].coordinate = Some(Coordinate::regular(0.0, 1e-6).with_unit("s"));
        assert_eq!(sample_rate(&field), Some(1.0 / 1e-6));
        field.metadata = rate_block("uniform", Value::Int(2_000_000));
        assert_eq!(sample_rate(&field), Some(2e6));
        // The block decides even when its value is unusable.
        field.metadata = rate_block("uniform", Value::Float(-1.0));
        assert_eq!(sample_rate(&field), None);
        // A non-uniform block does not decide; the coordinate does.
        field.metadata = rate_block("explicit", Value::Float(5.0));
        assert_eq!(sample_rate(&field), Some(1e6));
        field.axes[0].coordinate = Some(Coordinate::regular(0.0, 1e-3).with_unit("ms"));
        assert_eq!(sample_rate(&field), None);
    }
}
