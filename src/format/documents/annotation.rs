//! The annotation documents of section 6: the catalog pointer, revisions, set roots and worker
//! pointers.
//!
//! Unlike the signal control graph these are **exact-key** documents, nested references
//! included: a missing key or an unknown one is refused. They are written by cooperating
//! workers and a coordinator racing on the same storage, so a key nobody understands is more
//! likely a bug or a foreign writer than a compatible addition, and silently dropping it on the
//! next catalog rewrite would lose data.

use std::collections::BTreeMap;
use std::fmt;

use super::ids::{parse_logical_shard_id, CATALOG_PATH};
use super::reference::{read_path, Keys, Reference};
use super::{
    as_object, check_portable, check_tiling, object, parse_json, req_items, value_text,
    DocumentError, Rule, RuleResult, Snapshot,
};
use crate::format::json::{object_to_pretty, JsonLimits, Object, ObjectExt, Value};
use crate::format::path::RelPath;

/// The status of one annotated record, as written on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AnnotationStatus {
    Success,
    Skipped,
    Failed,
}

impl AnnotationStatus {
    /// The wire value: `success`, `skipped` or `failed`.
    pub fn as_wire(self) -> &'static str {
        match self {
            AnnotationStatus::Success => "success",
            AnnotationStatus::Skipped => "skipped",
            AnnotationStatus::Failed => "failed",
        }
    }

    /// The status a wire value names; anything else is `None`.
    pub fn from_wire(text: &str) -> Option<AnnotationStatus> {
        match text {
            "success" => Some(AnnotationStatus::Success),
            "skipped" => Some(AnnotationStatus::Skipped),
            "failed" => Some(AnnotationStatus::Failed),
            _ => None,
        }
    }

    fn from_value(value: &Value) -> RuleResult<AnnotationStatus> {
        value
            .as_str()
            .and_then(AnnotationStatus::from_wire)
            .ok_or_else(|| {
                Rule::new(format!(
                    "status {} is not one of \"success\", \"skipped\", \"failed\"",
                    value_text(value)
                ))
            })
    }
}

impl fmt::Display for AnnotationStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_wire())
    }
}

/// Parses an exact-key annotation document: JSON first, then `read` with errors attributed.
fn parse_exact<T>(
    bytes: &[u8],
    limits: &JsonLimits,
    document: &str,
    allowed: &[&str],
    read: impl FnOnce(&Object) -> RuleResult<T>,
) -> Result<T, DocumentError> {
    let doc = parse_json(bytes, limits, document)?;
    Keys::Exact
        .check(&doc, allowed)
        .and_then(|()| read(&doc))
        .map_err(|r| r.in_document(document))
}

/// The catalog's reference to its current revision: `path` and optional `generation`, no
/// `stored_bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RevisionRef {
    pub path: RelPath,
    pub generation: Option<u64>,
}

/// `annotations/catalog.json`: `{"revision": {"path": ..., "generation"?: ...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CatalogPointer {
    pub revision: RevisionRef,
}

impl CatalogPointer {
    /// The name errors use when the caller did not supply one.
    pub const DOCUMENT: &'static str = CATALOG_PATH;

    /// A pointer as a writer creates it: no generation.
    pub fn new(revision_path: RelPath) -> CatalogPointer {
        CatalogPointer {
            revision: RevisionRef {
                path: revision_path,
                generation: None,
            },
        }
    }

    /// Parses a catalog pointer (exact keys).
    pub fn parse(bytes: &[u8], limits: &JsonLimits) -> Result<CatalogPointer, DocumentError> {
        parse_exact(bytes, limits, Self::DOCUMENT, &["revision"], |doc| {
            let revision = as_object(doc.required("revision")?, "revision")
                .and_then(|r| {
                    Keys::Exact.check(r, &["path", "generation"])?;
                    Ok(RevisionRef {
                        path: read_path(r, "path")?,
                        generation: r.opt_u64("generation")?,
                    })
                })
                .map_err(|r| r.at("revision"))?;
            Ok(CatalogPointer { revision })
        })
    }

    /// The exact bytes a writer publishes.
    pub fn to_json(&self) -> String {
        let mut revision = object([("path", self.revision.path.as_str().into())]);
        if let Some(generation) = self.revision.generation {
            revision.insert("generation".into(), generation.into());
        }
        object_to_pretty(&object([("revision", Value::Object(revision))]))
    }
}

/// An immutable catalog revision: set name → reference to the set's root.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Revision {
    pub sets: BTreeMap<String, Reference>,
}

impl Revision {
    /// The name errors use when the caller did not supply one.
    pub const DOCUMENT: &'static str = "annotation revision";

    /// Parses a revision (exact keys, in the references too).
    pub fn parse(bytes: &[u8], limits: &JsonLimits) -> Result<Revision, DocumentError> {
        parse_exact(bytes, limits, Self::DOCUMENT, &["sets"], |doc| {
            let sets = doc
                .req_object("sets")?
                .iter()
                .map(|(name, value)| {
                    Reference::from_value(value, Keys::Exact)
                        .map(|r| (name.clone(), r))
                        .map_err(|r| r.at(&format!("sets[{name:?}]")))
                })
                .collect::<RuleResult<_>>()?;
            Ok(Revision { sets })
        })
    }

    /// Checks that every set name is a portable identifier.
    pub fn validate(&self) -> Result<(), DocumentError> {
        self.sets
            .keys()
            .try_for_each(|name| check_portable("set name", name))
            .map_err(|r| r.in_document(Self::DOCUMENT))
    }

    /// The exact bytes a writer publishes (their SHA-256 names the revision object).
    pub fn to_json(&self) -> String {
        let sets = self
            .sets
            .iter()
            .map(|(name, r)| (name.clone(), r.to_value()))
            .collect();
        object_to_pretty(&object([("sets", Value::Object(sets))]))
    }
}

/// One shard of a published annotation set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SetShard {
    pub first_ordinal: u64,
    pub object: Reference,
    /// Always positive: writers leave empty shards out.
    pub record_count: u64,
}

impl SetShard {
    fn from_value(value: &Value) -> RuleResult<SetShard> {
        let shard = as_object(value, "a set shard")?;
        Keys::Exact.check(shard, &["first_ordinal", "object", "record_count"])?;
        let record_count = shard.req_u64("record_count")?;
        if record_count == 0 {
            return Err(Rule::new("record_count must be positive, not 0"));
        }
        Ok(SetShard {
            first_ordinal: shard.req_u64("first_ordinal")?,
            object: Reference::from_value(shard.required("object")?, Keys::Exact)
                .map_err(|r| r.at("object"))?,
            record_count,
        })
    }

    fn to_value(&self) -> Value {
        Value::Object(object([
            ("first_ordinal", self.first_ordinal.into()),
            ("object", self.object.to_value()),
            ("record_count", self.record_count.into()),
        ]))
    }
}

/// `annotations/sets/<name>/<publication-id>/root.json`: one published annotation set.
#[derive(Debug, Clone, PartialEq)]
pub struct SetRoot {
    pub metadata: Object,
    pub name: String,
    pub publication_id: String,
    pub record_count: u64,
    pub shards: Vec<SetShard>,
    pub source_snapshot_id: String,
}

impl SetRoot {
    /// The name errors use when the caller did not supply one.
    pub const DOCUMENT: &'static str = "annotation set root";

    const KEYS: &'static [&'static str] = &[
        "metadata",
        "name",
        "publication_id",
        "record_count",
        "shards",
        "source_snapshot_id",
    ];

    /// Parses a set root (exact keys, in shards and references too).
    pub fn parse(bytes: &[u8], limits: &JsonLimits) -> Result<SetRoot, DocumentError> {
        parse_exact(bytes, limits, Self::DOCUMENT, Self::KEYS, |doc| {
            Ok(SetRoot {
                metadata: doc.req_object("metadata")?.clone(),
                name: doc.req_str("name")?.to_string(),
                publication_id: doc.req_str("publication_id")?.to_string(),
                record_count: doc.req_u64("record_count")?,
                shards: req_items(doc, "shards", SetShard::from_value)?,
                source_snapshot_id: doc.req_str("source_snapshot_id")?.to_string(),
            })
        })
    }

    /// Checks ids and that the shards tile `[0, record_count)` in order with no gap.
    pub fn validate(&self) -> Result<(), DocumentError> {
        self.check().map_err(|r| r.in_document(Self::DOCUMENT))
    }

    fn check(&self) -> RuleResult<()> {
        check_portable("name", &self.name)?;
        check_portable("publication_id", &self.publication_id)?;
        check_portable("source_snapshot_id", &self.source_snapshot_id)?;
        if let Some(i) = self.shards.iter().position(|s| s.record_count == 0) {
            return Err(
                Rule::new("record_count must be positive, not 0").at(&format!("shards[{i}]"))
            );
        }
        check_tiling(
            self.shards
                .iter()
                .map(|s| (s.first_ordinal, s.record_count)),
            0,
            self.record_count,
            "set shards",
        )
    }

    /// Checks that the set annotates `snapshot`: same snapshot id, same record count.
    pub fn validate_against_snapshot(&self, snapshot: &Snapshot) -> Result<(), DocumentError> {
        let refuse = |rule: String| Err(DocumentError::rule(Self::DOCUMENT, rule));
        if self.source_snapshot_id != snapshot.snapshot_id {
            return refuse(format!(
                "source_snapshot_id {:?} is not the dataset's snapshot {:?}",
                self.source_snapshot_id, snapshot.snapshot_id
            ));
        }
        if self.record_count != snapshot.record_count {
            return refuse(format!(
                "record_count {} differs from the source snapshot's {}",
                self.record_count, snapshot.record_count
            ));
        }
        Ok(())
    }

    /// The exact bytes a writer publishes.
    pub fn to_json(&self) -> String {
        let doc = object([
            ("metadata", Value::Object(self.metadata.clone())),
            ("name", self.name.as_str().into()),
            ("publication_id", self.publication_id.as_str().into()),
            ("record_count", self.record_count.into()),
            (
                "shards",
                Value::Array(self.shards.iter().map(SetShard::to_value).collect()),
            ),
            (
                "source_snapshot_id",
                self.source_snapshot_id.as_str().into(),
            ),
        ]);
        object_to_pretty(&doc)
    }
}

/// A worker's create-only claim on one logical shard of a set publication.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkerPointer {
    pub first_ordinal: u64,
    /// The object's generation where the backend has one; the key is always written.
    pub generation: Option<u64>,
    pub logical_shard_id: String,
    pub name: String,
    pub publication_id: String,
    pub record_ids: Vec<String>,
    pub source_snapshot_id: String,
    /// What the object's rows carry, one per record id.
    pub statuses: Vec<AnnotationStatus>,
    pub stored_bytes: u64,
    /// What the worker settled on after its own retries, one per record id.
    pub terminal_statuses: Vec<AnnotationStatus>,
    /// Dataset-root-relative path of the annotation object.
    pub uri: RelPath,
}

impl WorkerPointer {
    /// The name errors use when the caller did not supply one.
    pub const DOCUMENT: &'static str = "worker pointer";

    const KEYS: &'static [&'static str] = &[
        "first_ordinal",
        "generation",
        "logical_shard_id",
        "name",
        "publication_id",
        "record_ids",
        "source_snapshot_id",
        "statuses",
        "stored_bytes",
        "terminal_statuses",
        "uri",
    ];

    /// Parses a worker pointer (exact keys; `generation` must be present, an integer or null).
    pub fn parse(bytes: &[u8], limits: &JsonLimits) -> Result<WorkerPointer, DocumentError> {
        parse_exact(bytes, limits, Self::DOCUMENT, Self::KEYS, |doc| {
            doc.required("generation")?;
            Ok(WorkerPointer {
                first_ordinal: doc.req_u64("first_ordinal")?,
                generation: doc.opt_u64("generation")?,
                logical_shard_id: doc.req_str("logical_shard_id")?.to_string(),
                name: doc.req_str("name")?.to_string(),
                publication_id: doc.req_str("publication_id")?.to_string(),
                record_ids: req_items(doc, "record_ids", read_record_id)?,
                source_snapshot_id: doc.req_str("source_snapshot_id")?.to_string(),
                statuses: req_items(doc, "statuses", AnnotationStatus::from_value)?,
                stored_bytes: doc.req_u64("stored_bytes")?,
                terminal_statuses: req_items(
                    doc,
                    "terminal_statuses",
                    AnnotationStatus::from_value,
                )?,
                uri: read_path(doc, "uri")?,
            })
        })
    }

    /// Checks ids, the logical shard id's `shard-%08d` form, and one status of each kind per
    /// record id.
    pub fn validate(&self) -> Result<(), DocumentError> {
        self.check().map_err(|r| r.in_document(Self::DOCUMENT))
    }

    fn check(&self) -> RuleResult<()> {
        check_portable("name", &self.name)?;
        check_portable("publication_id", &self.publication_id)?;
        check_portable("source_snapshot_id", &self.source_snapshot_id)?;
        if parse_logical_shard_id(&self.logical_shard_id).is_none() {
            return Err(Rule::new(format!(
                "logical_shard_id {:?} is not of the form shard-%08d",
                self.logical_shard_id
            )));
        }
        let ids = self.record_ids.len();
        for (key, len) in [
            ("statuses", self.statuses.len()),
            ("terminal_statuses", self.terminal_statuses.len()),
        ] {
            if len != ids {
                return Err(Rule::new(format!(
                    "{key} has {len} entries but record_ids has {ids}"
                )));
            }
        }
        Ok(())
    }

    /// The exact bytes a writer publishes.
    pub fn to_json(&self) -> String {
        let statuses = |list: &[AnnotationStatus]| {
            Value::Array(list.iter().map(|s| s.as_wire().into()).collect())
        };
        let doc = object([
            ("first_ordinal", self.first_ordinal.into()),
            ("generation", self.generation.into()),
            ("logical_shard_id", self.logical_shard_id.as_str().into()),
            ("name", self.name.as_str().into()),
            ("publication_id", self.publication_id.as_str().into()),
            (
                "record_ids",
                Value::Array(
                    self.record_ids
                        .iter()
                        .map(|id| id.as_str().into())
                        .collect(),
                ),
            ),
            (
                "source_snapshot_id",
                self.source_snapshot_id.as_str().into(),
            ),
            ("statuses", statuses(&self.statuses)),
            ("stored_bytes", self.stored_bytes.into()),
            ("terminal_statuses", statuses(&self.terminal_statuses)),
            ("uri", self.uri.as_str().into()),
        ]);
        object_to_pretty(&doc)
    }
}

/// A record id: any nonempty string.
fn read_record_id(value: &Value) -> RuleResult<String> {
    match value.as_str() {
        Some(id) if !id.is_empty() => Ok(id.to_string()),
        Some(_) => Err(Rule::new("record id must be a nonempty string")),
        None => Err(Rule::new(format!(
            "record id must be a string, not {}",
            value.type_name()
        ))),
    }
}
