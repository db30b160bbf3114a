//! Metadata shard rows (FORMAT.md section 3): one compact JSON document per data record, carrying
//! everything about the record except its tensor values, so listings and sizes never touch a
//! data shard. When a data record is decoded its descriptor must agree with its row; a
//! disagreement means one of the two shards is damaged, and is reported as corruption naming
//! the first thing that differs.
//!
//! A row's size is bounded by `max_metadata_bytes`, on write and on read, as the library's
//! `RecordMetadataCodec` bounds it (not by `max_descriptor_bytes`; both default to 16 MiB).

use super::error::{limit, RecordError};
use std::hash::{BuildHasher, Hash, Hasher};

use super::model::{FieldMeta, Record, RecordMeta};
use super::validate::validate_read;
use crate::format::json::{parse_object, to_compact, Object};
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
        let meta = RecordMeta::from_row_owned(object)?;
        validate_read(&meta, limits, bytes.len())?;
        Ok(meta)
    }
}

impl RecordMeta {
    /// A digest of everything [`check_row_agrees`] compares: metas that agree have equal
    /// fingerprints, and metas that differ have different ones but with a chance of 2^-64.
    ///
    /// Why: a decode checks its payload against the record's row, and the row must not be
    /// held (charged to the memory budget) while the decode waits for room for the payload;
    /// eight bytes found beforehand are enough for a check that passes, and only a failing
    /// one reads the row again to say what differs. It detects damage, not forgery (whoever
    /// writes both shards can make them agree), so a fast seeded hash (foldhash) serves.
    pub fn fingerprint(&self) -> u64 {
        fingerprint_of(
            &self.id,
            self.scene_id.as_deref(),
            &self.metadata,
            self.fields.iter(),
        )
    }
}

impl Record {
    /// [`RecordMeta::fingerprint`] of the record's meta, without building it.
    pub fn fingerprint(&self) -> u64 {
        let fields = self.fields.iter().map(|(name, field)| (name, &field.meta));
        fingerprint_of(&self.id, self.scene_id.as_deref(), &self.metadata, fields)
    }
}

/// [`RecordMeta::fingerprint`] of a row given in parts (fields in name order).
pub fn fingerprint_of<'a>(
    id: &str,
    scene_id: Option<&str>,
    metadata: &Object,
    fields: impl ExactSizeIterator<Item = (&'a String, &'a FieldMeta)>,
) -> u64 {
    let mut hasher = FingerprintHasher::new(id, scene_id, metadata, fields.len());
    for (name, field) in fields {
        hasher.field(name, field);
    }
    hasher.finish()
}

/// [`RecordMeta::fingerprint`] fed one field at a time (in name order), for rows whose fields
/// are not held together.
pub struct FingerprintHasher(foldhash::quality::FoldHasher<'static>);

impl FingerprintHasher {
    pub fn new(id: &str, scene_id: Option<&str>, metadata: &Object, fields: usize) -> Self {
        static SEED: std::sync::OnceLock<foldhash::quality::RandomState> =
            std::sync::OnceLock::new();
        let mut state = SEED.get_or_init(Default::default).build_hasher();
        id.hash(&mut state);
        scene_id.hash(&mut state);
        metadata.hash(&mut state);
        state.write_usize(fields);
        FingerprintHasher(state)
    }

    /// The next field. (Its name is hashed as a `String` is, so both ways agree.)
    pub fn field(&mut self, name: &str, field: &FieldMeta) {
        name.hash(&mut self.0);
        field.hash(&mut self.0);
    }

    pub fn finish(self) -> u64 {
        self.0.finish()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::limits::RecordLimits;

    fn row(text: &str) -> RecordMeta {
        RecordMeta::parse_row(text.as_bytes(), &RecordLimits::default()).unwrap()
    }

    const FIELD: &str = r#"{"dtype":"complex64","shape":[4],"axes":[{"name":"time","length":4,"coordinate":{"start":0.0,"step":0.5,"unit":"s"}}],"metadata":{"gain_db":-0.0}}"#;

    #[test]
    fn rows_that_agree_have_one_fingerprint_and_rows_that_differ_do_not() {
        let text = format!(
            r#"{{"id":"a","scene_id":null,"metadata":{{"n":1,"f":2.5}},"fields":{{"iq":{FIELD}}}}}"#
        );
        // The same row written otherwise: keys in another order, spaces, 0.0 for -0.0.
        let same = format!(
            r#"{{ "fields": {{"iq": {}}}, "metadata": {{"f": 2.5, "n": 1}}, "id": "a" }}"#,
            FIELD.replace("-0.0", "0.0")
        );
        let (a, b) = (row(&text), row(&same));
        assert!(check_row_agrees(&a, &b).is_ok());
        assert_eq!(a.fingerprint(), b.fingerprint());
        let edits = [
            ("\"n\":1", "\"n\":1.0"),
            ("\"id\":\"a\"", "\"id\":\"b\""),
            ("\"scene_id\":null", "\"scene_id\":\"s\""),
            ("\"unit\":\"s\"", "\"unit\":\"ms\""),
            ("\"step\":0.5", "\"step\":0.25"),
            ("\"name\":\"time\"", "\"name\":\"t\""),
            ("\"gain_db\":-0.0", "\"gain_db\":1.0"),
            ("complex64", "float32"),
        ];
        for (from, to) in edits {
            assert!(text.contains(from), "{from}");
            let other = row(&text.replacen(from, to, 1));
            assert!(check_row_agrees(&a, &other).is_err(), "{from} -> {to}");
            assert_ne!(a.fingerprint(), other.fingerprint(), "{from} -> {to}");
        }
    }
}
