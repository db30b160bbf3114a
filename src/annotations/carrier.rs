//! One annotation row and its carrier record (`docs/FORMAT.md`, annotations), encoded as the
//! `signal-dataset` library encodes it.
//!
//! A carrier is an ordinary record: its `id` is the source record's id, `scene_id` is null, and
//! its metadata is exactly `{"annotation": {"detail_status", "empty_fields", "provenance",
//! "source_index", "status", "values"}}`. A row with tensor fields carries them as the record's
//! fields; a row without carries one synthetic field, `__empty__` (a `uint8` tensor of shape
//! `[0]`, one axis `empty` of length 0), because a record must have at least one field. The
//! decoder drops it, so callers never see it; a row may therefore not use that name itself.
//!
//! Decoding is strict: the annotation object is exact-key, `source_index` must be the ordinal
//! the row was read for, and `empty_fields` must agree with the fields actually present.

use std::collections::BTreeMap;

use crate::format::dtype::DType;
use crate::format::json::{object_to_pretty, Object, Value};
use crate::format::record::{Axis, Field, FieldMeta, Record};

use super::{AnnotationError, AnnotationStatus, Cause};

/// The synthetic field of a carrier without tensor fields.
pub const EMPTY_FIELD: &str = "__empty__";

const KEYS: [&str; 6] = [
    "detail_status",
    "empty_fields",
    "provenance",
    "source_index",
    "status",
    "values",
];

/// One annotation row: the annotation of the source record at `source_index`.
#[derive(Debug, Clone, PartialEq)]
pub struct AnnotationRecord {
    pub source_record_id: String,
    pub source_index: u64,
    pub status: AnnotationStatus,
    pub values: Object,
    /// Tensor fields (never [`EMPTY_FIELD`]).
    pub fields: BTreeMap<String, Field>,
    pub provenance: Object,
    /// A nonempty string, or `None`.
    pub detail_status: Option<String>,
}

impl AnnotationRecord {
    /// A row with empty values and provenance, no fields and no detail.
    pub fn new(
        source_record_id: impl Into<String>,
        source_index: u64,
        status: AnnotationStatus,
    ) -> AnnotationRecord {
        AnnotationRecord {
            source_record_id: source_record_id.into(),
            source_index,
            status,
            values: Object::new(),
            fields: BTreeMap::new(),
            provenance: Object::new(),
            detail_status: None,
        }
    }

    /// Checks what a writer must not emit: an empty id, an empty `detail_status`, a field named
    /// `__empty__`. The refusal names the row's ordinal.
    pub fn check(&self) -> Result<(), AnnotationError> {
        let refuse = |rule: &str| {
            AnnotationError::refused(format!(
                "annotation row for source ordinal {}: {rule}",
                self.source_index
            ))
        };
        if self.source_record_id.is_empty() {
            return Err(refuse("source_record_id must be nonempty"));
        }
        if self.detail_status.as_deref() == Some("") {
            return Err(refuse("detail_status must be a nonempty string or null"));
        }
        if self.fields.contains_key(EMPTY_FIELD) {
            return Err(refuse(&format!(
                "field name {EMPTY_FIELD:?} is reserved for carriers without tensor fields"
            )));
        }
        Ok(())
    }

    /// The carrier record that stores this row.
    pub fn to_carrier(&self) -> Record {
        let empty = self.fields.is_empty();
        let annotation = Object::from([
            (
                "detail_status".into(),
                Value::from(self.detail_status.clone()),
            ),
            ("empty_fields".into(), Value::Bool(empty)),
            ("provenance".into(), Value::Object(self.provenance.clone())),
            ("source_index".into(), Value::from(self.source_index)),
            ("status".into(), Value::from(self.status.as_wire())),
            ("values".into(), Value::Object(self.values.clone())),
        ]);
        let mut record =
            Record::new(self.source_record_id.clone()).with_metadata(Object::from([(
                "annotation".into(),
                Value::Object(annotation),
            )]));
        if empty {
            record = record.with_field(EMPTY_FIELD, empty_field());
        } else {
            for (name, field) in &self.fields {
                record = record.with_field(name.clone(), field.clone());
            }
        }
        record
    }

    /// Reads a carrier stored at source ordinal `ordinal`; the error is the broken rule.
    /// Alignment with the source record's id is the caller's check (it needs the source row).
    pub fn from_carrier(record: Record, ordinal: u64) -> Result<AnnotationRecord, Cause> {
        if let Some(scene) = &record.scene_id {
            return Err(Cause::rule(format!(
                "carrier scene_id must be null, not {scene:?}"
            )));
        }
        let mut metadata = record.metadata;
        let annotation = match (metadata.remove("annotation"), metadata.keys().next()) {
            (_, Some(extra)) => {
                return Err(Cause::rule(format!(
                    "carrier metadata must hold exactly the key \"annotation\"; found {extra:?}"
                )))
            }
            (Some(Value::Object(a)), None) => a,
            (Some(_), None) => {
                return Err(Cause::rule(
                    "carrier metadata \"annotation\" must be an object",
                ))
            }
            (None, None) => {
                return Err(Cause::rule("carrier metadata lacks the key \"annotation\""))
            }
        };
        if let Some(key) = annotation.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(Cause::rule(format!("annotation has unknown key {key:?}")));
        }
        if let Some(key) = KEYS.iter().find(|k| !annotation.contains_key(**k)) {
            return Err(Cause::rule(format!("annotation lacks the key {key:?}")));
        }
        let get = |key: &str| annotation.get(key).unwrap_or(&Value::Null);
        let source_index = get("source_index")
            .as_u64()
            .ok_or_else(|| Cause::rule("annotation source_index must be a nonnegative integer"))?;
        if source_index != ordinal {
            return Err(Cause::rule(format!(
                "annotation source_index {source_index} is not the ordinal {ordinal} it is stored at"
            )));
        }
        let status = get("status")
            .as_str()
            .and_then(AnnotationStatus::from_wire)
            .ok_or_else(|| {
                Cause::rule("annotation status must be \"success\", \"skipped\" or \"failed\"")
            })?;
        let object = |key: &str| match get(key) {
            Value::Object(o) => Ok(o.clone()),
            _ => Err(Cause::rule(format!(
                "annotation {key} must be a JSON object"
            ))),
        };
        let detail_status = match get("detail_status") {
            Value::Null => None,
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            _ => {
                return Err(Cause::rule(
                    "annotation detail_status must be a nonempty string or null",
                ))
            }
        };
        let Value::Bool(empty_fields) = get("empty_fields") else {
            return Err(Cause::rule("annotation empty_fields must be a boolean"));
        };
        let mut fields = record.fields;
        if *empty_fields {
            let empty = fields.remove(EMPTY_FIELD);
            let sound = empty.as_ref().is_some_and(is_empty_field);
            if !sound || !fields.is_empty() {
                return Err(Cause::rule(format!(
                    "empty_fields is true, so the carrier must hold exactly one field {EMPTY_FIELD:?} \
                     (uint8, shape [0], one axis \"empty\")"
                )));
            }
        } else if fields.contains_key(EMPTY_FIELD) {
            return Err(Cause::rule(format!(
                "empty_fields is false, but the carrier holds {EMPTY_FIELD:?}"
            )));
        }
        Ok(AnnotationRecord {
            source_record_id: record.id,
            source_index,
            status,
            values: object("values")?,
            fields,
            provenance: object("provenance")?,
            detail_status,
        })
    }

    /// `annotation.json` of the mount: pretty deterministic JSON with the keys
    /// `detail_status`, `provenance`, `set`, `source_index`, `source_record_id`, `status`,
    /// `values`.
    pub fn to_annotation_json(&self, set: &str) -> String {
        object_to_pretty(&Object::from([
            (
                "detail_status".into(),
                Value::from(self.detail_status.clone()),
            ),
            ("provenance".into(), Value::Object(self.provenance.clone())),
            ("set".into(), Value::from(set)),
            ("source_index".into(), Value::from(self.source_index)),
            (
                "source_record_id".into(),
                Value::from(self.source_record_id.as_str()),
            ),
            ("status".into(), Value::from(self.status.as_wire())),
            ("values".into(), Value::Object(self.values.clone())),
        ]))
    }
}

fn empty_field() -> Field {
    Field {
        meta: FieldMeta {
            dtype: DType::U8,
            shape: vec![0],
            axes: vec![Axis::new("empty", 0)],
            metadata: Object::new(),
        },
        data: bytes::Bytes::new(),
    }
}

fn is_empty_field(field: &Field) -> bool {
    let meta = &field.meta;
    meta.dtype == DType::U8
        && meta.shape == [0]
        && meta.axes.len() == 1
        && meta
            .axes
            .first()
            .is_some_and(|a| a.name == "empty" && a.length == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_carrier_round_trips_and_drops_the_synthetic_field() {
        let mut row = AnnotationRecord::new("rec-3", 3, AnnotationStatus::Failed);
        row.detail_status = Some("timeout".into());
        row.values.insert("snr".into(), Value::Float(1.5));
        let carrier = row.to_carrier();
        assert!(carrier.fields.contains_key(EMPTY_FIELD));
        let back = AnnotationRecord::from_carrier(carrier.clone(), 3).unwrap();
        assert_eq!(back, row);
        let misplaced = AnnotationRecord::from_carrier(carrier, 4).unwrap_err();
        assert!(
            misplaced.to_string().contains("source_index 3"),
            "{misplaced}"
        );
    }

    #[test]
    fn unknown_and_missing_keys_are_refused() {
        let row = AnnotationRecord::new("r", 0, AnnotationStatus::Success);
        let mut carrier = row.to_carrier();
        if let Some(Value::Object(a)) = carrier.metadata.get_mut("annotation") {
            a.insert("extra".into(), Value::Null);
        }
        let e = AnnotationRecord::from_carrier(carrier, 0).unwrap_err();
        assert!(e.to_string().contains("unknown key \"extra\""), "{e}");
        let mut carrier = row.to_carrier();
        if let Some(Value::Object(a)) = carrier.metadata.get_mut("annotation") {
            a.remove("provenance");
        }
        let e = AnnotationRecord::from_carrier(carrier, 0).unwrap_err();
        assert!(
            e.to_string().contains("lacks the key \"provenance\""),
            "{e}"
        );
    }
}
