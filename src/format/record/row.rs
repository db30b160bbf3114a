//! Metadata shard rows (FORMAT.md section 3): one compact JSON document per data record, carrying
//! everything about the record except its tensor values, so listings and sizes never touch a
//! data shard. When a data record is decoded its descriptor must agree with its row; a
//! disagreement means one of the two shards is damaged, and is reported as corruption naming
//! the first thing that differs.
//!
//! A row's size is bounded by `max_metadata_bytes`, on write and on read, as the library's
//! `RecordMetadataCodec` bounds it (not by `max_descriptor_bytes`; both default to 16 MiB).

use super::error::{limit, RecordError};
use super::model::{FieldMeta, RecordMeta};
use super::validate::validate;
use crate::format::json::{parse_object, to_compact};
use crate::format::limits::RecordLimits;

impl RecordMeta {
    /// The row as compact deterministic JSON: `{"fields","id","metadata","scene_id"}`.
    pub fn to_row_json(&self) -> String {
        to_compact(&self.to_row_value())
    }

    /// [`RecordMeta::to_row_json`], refused when the row exceeds `max_metadata_bytes` (what a
    /// metadata-shard writer calls: the library refuses to write, and to read, a larger row).
    pub fn encode_row(&self, limits: &RecordLimits) -> Result<String, RecordError> {
        let row = self.to_row_json();
        let size = u64::try_from(row.len()).unwrap_or(u64::MAX);
        RecordError::check_limit(limit::METADATA_BYTES, size, limits.max_metadata_bytes)?;
        Ok(row)
    }

    /// Parses and validates a row (unknown keys are ignored).
    pub fn parse_row(bytes: &[u8], limits: &RecordLimits) -> Result<RecordMeta, RecordError> {
        let object = parse_object(bytes, &limits.row_json())
            .map_err(|e| RecordError::json_sized("metadata row", e, limit::METADATA_BYTES))?;
        let meta = RecordMeta::from_row_object(&object)?;
        validate(&meta, limits)?;
        Ok(meta)
    }
}

fn mismatch(what: &'static str, detail: String) -> Result<(), RecordError> {
    Err(RecordError::RowMismatch { what, detail })
}

/// Checks that a metadata row and a decoded record describe the same record.
pub fn check_row_agrees(row: &RecordMeta, decoded: &RecordMeta) -> Result<(), RecordError> {
    if row.id != decoded.id {
        return mismatch("id", format!("row {:?}, record {:?}", row.id, decoded.id));
    }
    if row.scene_id != decoded.scene_id {
        let detail = format!("row {:?}, record {:?}", row.scene_id, decoded.scene_id);
        return mismatch("scene_id", detail);
    }
    let row_names: Vec<&String> = row.fields.keys().collect();
    let decoded_names: Vec<&String> = decoded.fields.keys().collect();
    if row_names != decoded_names {
        let detail = format!("row {row_names:?}, record {decoded_names:?}");
        return mismatch("field names", detail);
    }
    for ((name, row_field), decoded_field) in row.fields.iter().zip(decoded.fields.values()) {
        check_field_agrees(name, row_field, decoded_field)?;
    }
    if row.metadata != decoded.metadata {
        return mismatch("metadata", "record metadata differs".to_string());
    }
    Ok(())
}

fn check_field_agrees(name: &str, row: &FieldMeta, decoded: &FieldMeta) -> Result<(), RecordError> {
    if row.dtype != decoded.dtype {
        let detail = format!(
            "field {name:?}: row {}, record {}",
            row.dtype, decoded.dtype
        );
        return mismatch("dtype", detail);
    }
    if row.shape != decoded.shape {
        let detail = format!(
            "field {name:?}: row {:?}, record {:?}",
            row.shape, decoded.shape
        );
        return mismatch("shape", detail);
    }
    if row.axes != decoded.axes {
        return mismatch("axes", format!("field {name:?}: axes differ"));
    }
    if row.metadata != decoded.metadata {
        return mismatch("metadata", format!("field {name:?}: metadata differs"));
    }
    Ok(())
}
