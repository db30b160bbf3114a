//! `root.json`: the dataset root, naming the one published snapshot (sections 4 and 8).
//!
//! Check order on read: `format` first (a document of another kind says nothing else useful),
//! then `min_reader_version`, then everything else. The version comes before the layout and the
//! other keys on purpose: a dataset written for a newer reader may differ in ways this reader
//! cannot predict, and "needs reader 0.3" is the message that tells the user what to do.

use super::reference::{read_reference, Keys, Reference};
use super::version::{check_min_reader, VersionRefusal};
use super::{
    check_portable, object, parse_json, require_identifier, require_layout, DocumentError, Rule,
    RuleResult, Snapshot, FORMAT_DATASET, LAYOUT_VERSION,
};
use crate::format::json::{object_to_pretty, JsonLimits, Object, ObjectExt, Value};

/// The parsed `root.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetRoot {
    pub dataset_id: String,
    /// The publication's metadata (the snapshot carries the same object).
    pub metadata: Object,
    /// The oldest reader release able to read the dataset, as written (already checked against
    /// [`crate::READER_VERSION`] when parsed).
    pub min_reader_version: Option<String>,
    pub snapshot: Reference,
    pub snapshot_id: String,
}

impl DatasetRoot {
    /// The name errors use when the caller did not supply one.
    pub const DOCUMENT: &'static str = "root.json";

    /// A root as a writer creates it: no `min_reader_version`.
    pub fn new(
        dataset_id: impl Into<String>,
        snapshot_id: impl Into<String>,
        snapshot: Reference,
        metadata: Object,
    ) -> DatasetRoot {
        DatasetRoot {
            dataset_id: dataset_id.into(),
            metadata,
            min_reader_version: None,
            snapshot,
            snapshot_id: snapshot_id.into(),
        }
    }

    /// The same root asking readers to be at least release `version`.
    pub fn with_min_reader_version(mut self, version: impl Into<String>) -> DatasetRoot {
        self.min_reader_version = Some(version.into());
        self
    }

    /// Parses and shape-checks `root.json`, including the reader-version check of section 8
    /// against [`crate::READER_VERSION`].
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
        let min_reader_version = read_min_reader(&doc, reader)?;
        Self::from_object(&doc, min_reader_version).map_err(in_doc)
    }

    fn from_object(doc: &Object, min_reader_version: Option<String>) -> RuleResult<DatasetRoot> {
        require_layout(doc)?;
        Ok(DatasetRoot {
            dataset_id: doc.req_str("dataset_id")?.to_string(),
            metadata: doc.req_object("metadata")?.clone(),
            min_reader_version,
            snapshot: read_reference(doc, "snapshot", Keys::IgnoreUnknown)?,
            snapshot_id: doc.req_str("snapshot_id")?.to_string(),
        })
    }

    /// Checks the root's own identifiers.
    pub fn validate(&self) -> Result<(), DocumentError> {
        self.check_ids().map_err(|r| r.in_document(Self::DOCUMENT))
    }

    fn check_ids(&self) -> RuleResult<()> {
        check_portable("dataset_id", &self.dataset_id)?;
        check_portable("snapshot_id", &self.snapshot_id)
    }

    /// Checks that `snapshot`, read through [`DatasetRoot::snapshot`], is the one this root
    /// names: same `snapshot_id` and `dataset_id`.
    ///
    /// The reference's path is deliberately *not* required to be
    /// `snapshots/<snapshot-id>/snapshot.json`: readers follow references (writers always use
    /// that path), and the id checks already tie the snapshot to the root.
    pub fn validate_snapshot(&self, snapshot: &Snapshot) -> Result<(), DocumentError> {
        let refuse = |key: &str, root: &str, found: &str| {
            Err(DocumentError::rule(
                Self::DOCUMENT,
                format!("{key} {root:?} does not match the snapshot's {key} {found:?}"),
            ))
        };
        if snapshot.snapshot_id != self.snapshot_id {
            return refuse("snapshot_id", &self.snapshot_id, &snapshot.snapshot_id);
        }
        if snapshot.dataset_id != self.dataset_id {
            return refuse("dataset_id", &self.dataset_id, &snapshot.dataset_id);
        }
        Ok(())
    }

    /// The exact bytes a writer publishes.
    pub fn to_json(&self) -> String {
        let mut doc = object([
            ("dataset_id", self.dataset_id.as_str().into()),
            ("format", FORMAT_DATASET.into()),
            ("layout_version", LAYOUT_VERSION.into()),
            ("metadata", Value::Object(self.metadata.clone())),
            ("snapshot", self.snapshot.to_value()),
            ("snapshot_id", self.snapshot_id.as_str().into()),
        ]);
        if let Some(version) = &self.min_reader_version {
            doc.insert("min_reader_version".into(), version.as_str().into());
        }
        object_to_pretty(&doc)
    }
}

/// Reads and checks the optional `min_reader_version` (a string when present; `null` and
/// numbers are refused because the value is a dotted release *string*).
fn read_min_reader(doc: &Object, reader: &str) -> Result<Option<String>, DocumentError> {
    let Some(value) = doc.get("min_reader_version") else {
        return Ok(None);
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
            format!(
                "min_reader_version {required:?} is not a dotted release number (\\d+(\\.\\d+)*)"
            ),
        )),
    }
}
