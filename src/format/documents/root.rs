//! `root.json`: the dataset root, naming the one published snapshot (docs/FORMAT.md).
//!
//! Keys written: `dataset_id, format, layout_version, metadata, min_reader_version,
//! record_codec, shard_format, snapshot`, as the library writes them. On read `metadata` and
//! `min_reader_version` are optional and unknown keys are ignored; there is no `snapshot_id`
//! (the snapshot names itself). Check order, as the library's: `format`, `layout_version`, the
//! codec objects, `min_reader_version`, then the remaining keys.

use super::reference::{read_reference, Keys, Reference};
use super::version::{check_min_reader, VersionRefusal};
use super::{
    object, parse_json, require_identifier, require_layout, DocumentError, Rule, RuleResult,
    FORMAT_DATASET, LAYOUT_VERSION, RECORD_CODEC, SHARD_CONTAINER,
};
use crate::format::json::{object_to_pretty, JsonLimits, Object, ObjectExt, Value};

/// The `min_reader_version` every writer of this project emits, as the library does: the
/// oldest release that reads datasets without object generations.
pub const WRITTEN_MIN_READER_VERSION: &str = "0.3.0";

/// The parsed `root.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetRoot {
    /// Any nonempty string.
    pub dataset_id: String,
    /// The publication's metadata (`{}` when the key is absent).
    pub metadata: Object,
    /// The oldest reader release able to read the dataset, as written (already checked against
    /// [`crate::READER_VERSION`] when parsed); `None` when absent or `null`.
    pub min_reader_version: Option<String>,
    /// The snapshot; a dataset-relative path (the library joins it to the root).
    pub snapshot: Reference,
}

impl DatasetRoot {
    /// The name errors use when the caller did not supply one.
    pub const DOCUMENT: &'static str = "root.json";

    /// A root as a writer creates it: `min_reader_version` [`WRITTEN_MIN_READER_VERSION`].
    pub fn new(
        dataset_id: impl Into<String>,
        snapshot: Reference,
        metadata: Object,
    ) -> DatasetRoot {
        DatasetRoot {
            dataset_id: dataset_id.into(),
            metadata,
            min_reader_version: Some(WRITTEN_MIN_READER_VERSION.to_string()),
            snapshot,
        }
    }

    /// The same root asking readers to be at least release `version`.
    pub fn with_min_reader_version(mut self, version: impl Into<String>) -> DatasetRoot {
        self.min_reader_version = Some(version.into());
        self
    }

    /// Parses and shape-checks `root.json`, including the reader-version check against
    /// [`crate::READER_VERSION`].
    pub fn parse(bytes: &[u8], limits: &JsonLimits) -> Result<DatasetRoot, DocumentError> {
        Self::parse_for_reader(bytes, limits, crate::READER_VERSION)
    }

    /// [`DatasetRoot::parse`] for a reader of release `reader` (tests and tools).
    pub fn parse_for_reader(
        bytes: &[u8],
        limits: &JsonLimits,
        reader: &str,
    ) -> Result<DatasetRoot, DocumentError> {
        let doc = parse_json(bytes, limits, Self::DOCUMENT)?;
        let in_doc = |r: Rule| r.in_document(Self::DOCUMENT);
        require_identifier(&doc, "format", FORMAT_DATASET, "format").map_err(in_doc)?;
        require_layout(&doc).map_err(in_doc)?;
        check_codecs(&doc).map_err(in_doc)?;
        let min_reader_version = read_min_reader(&doc, reader)?;
        Self::from_object(&doc, min_reader_version).map_err(in_doc)
    }

    fn from_object(doc: &Object, min_reader_version: Option<String>) -> RuleResult<DatasetRoot> {
        let dataset_id = doc.req_str("dataset_id")?;
        if dataset_id.is_empty() {
            return Err(Rule::new("dataset_id must be a nonempty string"));
        }
        Ok(DatasetRoot {
            dataset_id: dataset_id.to_string(),
            metadata: read_metadata(doc)?,
            min_reader_version,
            snapshot: read_reference(doc, "snapshot", Keys::IgnoreUnknown)?,
        })
    }

    /// Kept for callers of the earlier API: every rule of the root is checked by `parse`.
    pub fn validate(&self) -> Result<(), DocumentError> {
        Ok(())
    }

    /// The exact bytes a writer publishes.
    pub fn to_json(&self) -> String {
        let codec = |name: &str| Value::Object(object([("name", name.into())]));
        let mut doc = object([
            ("dataset_id", self.dataset_id.as_str().into()),
            ("format", FORMAT_DATASET.into()),
            ("layout_version", LAYOUT_VERSION.into()),
            ("metadata", Value::Object(self.metadata.clone())),
            ("record_codec", codec(RECORD_CODEC)),
            ("shard_format", codec(SHARD_CONTAINER)),
            ("snapshot", self.snapshot.to_value()),
        ]);
        if let Some(version) = &self.min_reader_version {
            doc.insert("min_reader_version".into(), version.as_str().into());
        }
        object_to_pretty(&doc)
    }
}

/// `record_codec` and `shard_format` must equal `{"name": "safetensors"}` and
/// `{"name": "array_record"}` exactly (the library compares the whole objects). A root with a
/// `snapshot_id` and no `record_codec` is the dialect early sdsfs pre-releases wrote; it gets
/// a message saying so, since "unsupported record codec" alone would not tell the user why.
fn check_codecs(doc: &Object) -> RuleResult<()> {
    if doc.get("record_codec").is_none() && doc.get("snapshot_id").is_some() {
        return Err(Rule::new(
            "unsupported record codec: the root has snapshot_id and no record_codec, the \
             dialect of sdsfs pre-releases, which the signal-dataset library never wrote; \
             publish the dataset again with this release",
        ));
    }
    for (key, name) in [
        ("record_codec", RECORD_CODEC),
        ("shard_format", SHARD_CONTAINER),
    ] {
        let expected = Value::Object(object([("name", name.into())]));
        if doc.get(key) != Some(&expected) {
            let what = if key == "record_codec" {
                "record codec"
            } else {
                "shard format"
            };
            return Err(Rule::new(format!(
                "unsupported {what}: {key} must be {{\"name\": \"{name}\"}}"
            )));
        }
    }
    Ok(())
}

/// Reads and checks the optional `min_reader_version` (a string when present; `null` and
/// numbers are refused because the value is a dotted release *string*).
fn read_min_reader(doc: &Object, reader: &str) -> Result<Option<String>, DocumentError> {
    let value = match doc.get("min_reader_version") {
        None | Some(Value::Null) => return Ok(None),
        Some(value) => value,
    };
    let document = DatasetRoot::DOCUMENT;
    let Some(required) = value.as_str() else {
        return Err(DocumentError::rule(
            document,
            format!(
                "min_reader_version must be a dotted release string, not {}",
                value.type_name()
            ),
        ));
    };
    match check_min_reader(required, reader) {
        Ok(()) => Ok(Some(required.to_string())),
        Err(VersionRefusal::Newer) => Err(DocumentError::ReaderTooOld {
            document: document.to_string(),
            required: required.to_string(),
            reader: reader.to_string(),
        }),
        Err(VersionRefusal::Unparseable) => Err(DocumentError::rule(
            document,
            format!("min_reader_version {required:?} does not start with a release number"),
        )),
    }
}

/// The root's `metadata`: an object, or absent. The library then reads it as
/// `frozen_mapping(value or {})`, so every falsy JSON value (`null`, `[]`, `""`, `0`, `false`)
/// is an empty mapping there, and is read as one here; any other non-object is refused.
fn read_metadata(doc: &Object) -> RuleResult<Object> {
    match doc.get("metadata") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(Object::new()),
        Some(Value::Object(metadata)) => Ok(metadata.clone()),
        Some(Value::Array(items)) if items.is_empty() => Ok(Object::new()),
        Some(Value::String(text)) if text.is_empty() => Ok(Object::new()),
        Some(Value::Int(0)) => Ok(Object::new()),
        Some(Value::Float(zero)) if *zero == 0.0 => Ok(Object::new()),
        Some(other) => Err(Rule::new(format!(
            "metadata must be an object, not {}",
            other.type_name()
        ))),
    }
}
