//! The annotation documents (`docs/FORMAT.md`, annotations): the catalog pointer, revisions,
//! set roots and worker pointers, and the ids and paths they are stored under.
//!
//! Unlike the signal control graph these are **exact-key** documents, nested references
//! included: a missing key or an unknown one is refused. They are written by cooperating
//! workers and a coordinator racing on the same storage, so a key nobody understands is more
//! likely a bug or a foreign writer than a compatible addition, and silently dropping it on the
//! next catalog rewrite would lose data.
//!
//! Every document is written as compact deterministic JSON, byte for byte what the
//! `signal-dataset` library writes for the same content: that is what lets a revision be named
//! by the SHA-256 of its bytes, and two implementations publishing the same set converge on the
//! same objects. The library is not uniform about `generation`: the catalog pointer and the
//! revision entries always carry the key (`null`), while the object references inside a set
//! root omit it when there is none. [`AnnotationRef`] therefore has two writers.
//!
//! Annotation documents keep their own reference type rather than sharing the signal graph's:
//! their key policy (exact) and their `generation` rule differ, and the two evolve apart.

use std::collections::BTreeMap;
use std::fmt;

use sha2::{Digest, Sha256};

use super::ids::CATALOG_PATH;
use super::reference::Keys;
use super::{
    as_object, check_tiling, object, parse_json, req_items, value_text, DocumentError, Rule,
    RuleResult, Snapshot,
};
use crate::format::json::{object_to_compact, JsonLimits, Object, ObjectExt, Value};
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

/// True for the library's portable identifiers, `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`: set names,
/// publication ids, logical shard ids.
pub fn is_set_name(id: &str) -> bool {
    let mut bytes = id.bytes();
    id.len() <= 128
        && bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn check_set_name(key: &str, value: &str) -> RuleResult<()> {
    if is_set_name(value) {
        Ok(())
    } else {
        Err(Rule::new(format!(
            "{key} {value:?} is not a portable identifier ([A-Za-z0-9][A-Za-z0-9._-]{{0,127}})"
        )))
    }
}

fn check_nonempty(key: &str, value: &str) -> RuleResult<()> {
    if value.is_empty() {
        Err(Rule::new(format!("{key} must be a nonempty string")))
    } else {
        Ok(())
    }
}

fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
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
    exact(&doc, allowed)
        .and_then(|()| read(&doc))
        .map_err(|r| r.in_document(document))
}

/// Refuses unknown keys (missing ones are refused by the readers of each key).
fn exact(doc: &Object, allowed: &[&str]) -> RuleResult<()> {
    Keys::Exact.check(doc, allowed)
}

fn read_rel_path(doc: &Object, key: &str) -> RuleResult<RelPath> {
    RelPath::new(doc.req_str(key)?).map_err(|e| Rule::new(format!("{key}: {e}")))
}

/// `generation`: absent or `null` is no generation, else a nonnegative integer.
fn read_generation(doc: &Object) -> RuleResult<Option<u64>> {
    Ok(doc.opt_u64("generation")?)
}

fn generation_value(generation: Option<u64>) -> Value {
    generation.map_or(Value::Null, Value::from)
}

/// A reference inside an annotation document: `path`, `stored_bytes`, optional `generation`
/// (a 0.2.x writer on GCS recorded one; local and S3 stores refuse to honour it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AnnotationRef {
    /// Dataset-root-relative path of the object.
    pub path: RelPath,
    pub stored_bytes: u64,
    pub generation: Option<u64>,
}

impl AnnotationRef {
    /// A reference as a writer creates it: no generation.
    pub fn new(path: RelPath, stored_bytes: u64) -> AnnotationRef {
        AnnotationRef {
            path,
            stored_bytes,
            generation: None,
        }
    }

    fn from_value(value: &Value) -> RuleResult<AnnotationRef> {
        let doc = as_object(value, "a reference")?;
        exact(doc, &["generation", "path", "stored_bytes"])?;
        Ok(AnnotationRef {
            path: read_rel_path(doc, "path")?,
            stored_bytes: doc.req_u64("stored_bytes")?,
            generation: read_generation(doc)?,
        })
    }

    /// The form of catalog revisions: `generation` always present (`null` when none).
    fn to_value_with_generation(&self) -> Value {
        Value::Object(object([
            ("generation", generation_value(self.generation)),
            ("path", self.path.as_str().into()),
            ("stored_bytes", self.stored_bytes.into()),
        ]))
    }

    /// The form of set roots: `generation` only when there is one.
    fn to_value_omitting_none(&self) -> Value {
        let mut doc = object([
            ("path", self.path.as_str().into()),
            ("stored_bytes", self.stored_bytes.into()),
        ]);
        if let Some(generation) = self.generation {
            doc.insert("generation".into(), generation.into());
        }
        Value::Object(doc)
    }
}

/// The catalog's reference to its current revision: `path` and `generation` (written `null`;
/// a reader also accepts the key missing), no `stored_bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RevisionRef {
    pub path: RelPath,
    pub generation: Option<u64>,
}

impl RevisionRef {
    /// The SHA-256 hex the revision's bytes must have: the file name without `.json`.
    pub fn digest(&self) -> &str {
        self.path
            .as_str()
            .trim_start_matches("annotations/catalogs/")
            .trim_end_matches(".json")
    }

    /// Checks `bytes` read from the revision against the hash in its name.
    pub fn check_bytes(&self, bytes: &[u8]) -> Result<(), DocumentError> {
        let actual = sha256_hex(bytes);
        if actual == self.digest() {
            return Ok(());
        }
        Err(DocumentError::rule(
            self.path.as_str(),
            format!(
                "the revision's SHA-256 is {actual}, not the {} its name promises",
                self.digest()
            ),
        ))
    }
}

/// `annotations/catalog.json`: `{"revision":{"generation":null,"path":...}}`.
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

    /// Parses a catalog pointer (exact keys; the revision path must be
    /// `annotations/catalogs/<64 hex>.json`).
    pub fn parse(bytes: &[u8], limits: &JsonLimits) -> Result<CatalogPointer, DocumentError> {
        parse_exact(bytes, limits, Self::DOCUMENT, &["revision"], |doc| {
            let revision = as_object(doc.required("revision")?, "revision")
                .and_then(read_revision_ref)
                .map_err(|r| r.at("revision"))?;
            Ok(CatalogPointer { revision })
        })
    }

    /// The exact bytes a writer publishes.
    pub fn to_json(&self) -> String {
        let revision = object([
            ("generation", generation_value(self.revision.generation)),
            ("path", self.revision.path.as_str().into()),
        ]);
        object_to_compact(&object([("revision", Value::Object(revision))]))
    }
}

fn read_revision_ref(doc: &Object) -> RuleResult<RevisionRef> {
    exact(doc, &["generation", "path"])?;
    let text = doc.req_str("path")?;
    let digest = text
        .strip_prefix("annotations/catalogs/")
        .and_then(|rest| rest.strip_suffix(".json"));
    if !digest.is_some_and(|d| is_hex(d, 64)) {
        return Err(Rule::new(format!(
            "path {text:?} is not annotations/catalogs/<sha256 hex>.json"
        )));
    }
    Ok(RevisionRef {
        path: read_rel_path(doc, "path")?,
        generation: read_generation(doc)?,
    })
}

/// An immutable catalog revision: set name → reference to the set's root.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Revision {
    pub sets: BTreeMap<String, AnnotationRef>,
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
                    AnnotationRef::from_value(value)
                        .map(|r| (name.to_string(), r))
                        .map_err(|r| r.at(&format!("sets[{name:?}]")))
                })
                .collect::<RuleResult<_>>()?;
            Ok(Revision { sets })
        })
    }

    /// Checks every set name and that each reference points at
    /// `annotations/sets/<name>/<publication id>/root.json`.
    pub fn validate(&self) -> Result<(), DocumentError> {
        self.sets
            .iter()
            .try_for_each(|(name, reference)| {
                check_set_name("set name", name)?;
                check_set_root_path(name, &reference.path)
                    .map_err(|r| r.at(&format!("sets[{name:?}]")))
            })
            .map_err(|r| r.in_document(Self::DOCUMENT))
    }

    /// The exact bytes a writer publishes (their SHA-256 names the revision object).
    pub fn to_json(&self) -> String {
        let sets = self
            .sets
            .iter()
            .map(|(name, r)| (name.as_str().into(), r.to_value_with_generation()))
            .collect();
        object_to_compact(&object([("sets", Value::Object(sets))]))
    }
}

fn check_set_root_path(name: &str, path: &RelPath) -> RuleResult<()> {
    let parts: Vec<&str> = path.as_str().split('/').collect();
    let sound = matches!(
        parts.as_slice(),
        ["annotations", "sets", n, publication, "root.json"]
            if *n == name && is_set_name(publication)
    );
    if sound {
        Ok(())
    } else {
        Err(Rule::new(format!(
            "path {:?} is not annotations/sets/{name}/<publication id>/root.json",
            path.as_str()
        )))
    }
}

/// One shard of a published annotation set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SetShard {
    pub first_ordinal: u64,
    pub object: AnnotationRef,
    /// Always positive: writers leave empty shards out.
    pub record_count: u64,
}

impl SetShard {
    fn from_value(value: &Value) -> RuleResult<SetShard> {
        let shard = as_object(value, "a set shard")?;
        exact(shard, &["first_ordinal", "object", "record_count"])?;
        let record_count = shard.req_u64("record_count")?;
        if record_count == 0 {
            return Err(Rule::new("record_count must be positive, not 0"));
        }
        Ok(SetShard {
            first_ordinal: shard.req_u64("first_ordinal")?,
            object: AnnotationRef::from_value(shard.required("object")?)
                .map_err(|r| r.at("object"))?,
            record_count,
        })
    }

    fn to_value(&self) -> Value {
        Value::Object(object([
            ("first_ordinal", self.first_ordinal.into()),
            ("object", self.object.to_value_omitting_none()),
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
        check_set_name("name", &self.name)?;
        check_set_name("publication_id", &self.publication_id)?;
        // Any nonempty snapshot id: the library accepts ids that are not portable.
        check_nonempty("source_snapshot_id", &self.source_snapshot_id)?;
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
        self.validate_against(&snapshot.snapshot_id, snapshot.record_count)
    }

    /// Checks that the set annotates the snapshot `snapshot_id` of `record_count` records.
    pub fn validate_against(
        &self,
        snapshot_id: &str,
        record_count: u64,
    ) -> Result<(), DocumentError> {
        let refuse = |rule: String| Err(DocumentError::rule(Self::DOCUMENT, rule));
        if self.source_snapshot_id != snapshot_id {
            return refuse(format!(
                "source_snapshot_id {:?} is not the dataset's snapshot {snapshot_id:?}",
                self.source_snapshot_id
            ));
        }
        if self.record_count != record_count {
            return refuse(format!(
                "record_count {} differs from the source snapshot's {record_count}",
                self.record_count
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
        object_to_compact(&doc)
    }
}

/// A worker's create-only claim on one logical shard of a distributed set publication.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkerPointer {
    pub first_ordinal: u64,
    /// The object's generation where the backend has one; the key is always written.
    pub generation: Option<u64>,
    /// Any portable id the workers agree on (this project's workers use `shard-%08d`).
    pub logical_shard_id: String,
    pub name: String,
    pub publication_id: String,
    pub record_ids: Vec<String>,
    pub source_snapshot_id: String,
    /// What the object's rows carry, one per record id.
    pub statuses: Vec<AnnotationStatus>,
    pub stored_bytes: u64,
    /// What the worker settled on, one per record id: a row's `detail_status` when it has
    /// one, else its wire status.
    pub terminal_statuses: Vec<String>,
    /// The object's full location: the dataset root as the writer addressed it, `/`, and the
    /// object's relative path.
    pub uri: String,
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
                generation: read_generation(doc)?,
                logical_shard_id: doc.req_str("logical_shard_id")?.to_string(),
                name: doc.req_str("name")?.to_string(),
                publication_id: doc.req_str("publication_id")?.to_string(),
                record_ids: req_items(doc, "record_ids", read_nonempty)?,
                source_snapshot_id: doc.req_str("source_snapshot_id")?.to_string(),
                statuses: req_items(doc, "statuses", AnnotationStatus::from_value)?,
                stored_bytes: doc.req_u64("stored_bytes")?,
                terminal_statuses: req_items(doc, "terminal_statuses", read_nonempty)?,
                uri: doc.req_str("uri")?.to_string(),
            })
        })
    }

    /// Checks ids, a nonempty record list, and one status of each kind per record id.
    pub fn validate(&self) -> Result<(), DocumentError> {
        self.check().map_err(|r| r.in_document(Self::DOCUMENT))
    }

    fn check(&self) -> RuleResult<()> {
        check_set_name("name", &self.name)?;
        check_set_name("publication_id", &self.publication_id)?;
        check_set_name("logical_shard_id", &self.logical_shard_id)?;
        check_nonempty("source_snapshot_id", &self.source_snapshot_id)?;
        check_nonempty("uri", &self.uri)?;
        let ids = self.record_ids.len();
        if ids == 0 {
            return Err(Rule::new(
                "record_ids is empty; a shard holds at least one record",
            ));
        }
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
        let strings =
            |list: &[String]| Value::Array(list.iter().map(|s| s.as_str().into()).collect());
        let statuses = Value::Array(self.statuses.iter().map(|s| s.as_wire().into()).collect());
        let doc = object([
            ("first_ordinal", self.first_ordinal.into()),
            ("generation", generation_value(self.generation)),
            ("logical_shard_id", self.logical_shard_id.as_str().into()),
            ("name", self.name.as_str().into()),
            ("publication_id", self.publication_id.as_str().into()),
            ("record_ids", strings(&self.record_ids)),
            (
                "source_snapshot_id",
                self.source_snapshot_id.as_str().into(),
            ),
            ("statuses", statuses),
            ("stored_bytes", self.stored_bytes.into()),
            ("terminal_statuses", strings(&self.terminal_statuses)),
            ("uri", self.uri.as_str().into()),
        ]);
        object_to_compact(&doc)
    }
}

/// A nonempty string element (record ids, terminal statuses).
fn read_nonempty(value: &Value) -> RuleResult<String> {
    match value.as_str() {
        Some(text) if !text.is_empty() => Ok(text.to_string()),
        Some(_) => Err(Rule::new("must be a nonempty string")),
        None => Err(Rule::new(format!(
            "must be a string, not {}",
            value.type_name()
        ))),
    }
}

/// The ids and paths of annotation publications, as the library derives them.
pub mod layout {
    use super::{is_hex, is_set_name, sha256_hex};
    use crate::format::path::RelPath;

    /// Why a path cannot be derived: an id that is not portable, a digest of the wrong form.
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    #[error("{what} {value:?} {rule}")]
    pub struct LayoutError {
        pub what: &'static str,
        pub value: String,
        pub rule: &'static str,
    }

    fn portable<'a>(what: &'static str, value: &'a str) -> Result<&'a str, LayoutError> {
        if is_set_name(value) {
            Ok(value)
        } else {
            Err(LayoutError {
                what,
                value: value.to_string(),
                rule: "is not a portable identifier ([A-Za-z0-9][A-Za-z0-9._-]{0,127})",
            })
        }
    }

    /// Every segment was checked to be a portable id or lowercase hex just before, so this
    /// cannot fail in practice; it stays fallible rather than panic.
    fn rel(text: String) -> Result<RelPath, LayoutError> {
        RelPath::new(text.clone()).map_err(|_| LayoutError {
            what: "annotation path",
            value: text,
            rule: "is not a valid relative path",
        })
    }

    /// The default publication id: the first 32 hex digits of SHA-256 of
    /// `"<snapshot_id>:<name>"`, so a re-run of the same publication converges.
    pub fn default_publication_id(snapshot_id: &str, name: &str) -> String {
        let mut id = sha256_hex(format!("{snapshot_id}:{name}").as_bytes());
        id.truncate(32);
        id
    }

    /// The content hash of an object's carriers: SHA-256 over, for each payload in order, its
    /// length as a u64 little-endian followed by its bytes.
    pub fn content_hash<'a>(payloads: impl IntoIterator<Item = &'a [u8]>) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        for payload in payloads {
            hash.update((payload.len() as u64).to_le_bytes());
            hash.update(payload);
        }
        hex::encode(hash.finalize())
    }

    /// A single-process publication's object id: SHA-256 hex of
    /// `"<publication_id>:<first_ordinal>:<content hash>"`.
    pub fn single_process_object_id(
        publication_id: &str,
        first_ordinal: u64,
        content_hash: &str,
    ) -> String {
        sha256_hex(format!("{publication_id}:{first_ordinal}:{content_hash}").as_bytes())
    }

    /// A distributed publication's object id: the first 32 hex digits of SHA-256 of
    /// `"<name>:<publication_id>:<logical_shard_id>:<content hash>"`.
    pub fn distributed_object_id(
        name: &str,
        publication_id: &str,
        logical_shard_id: &str,
        content_hash: &str,
    ) -> String {
        let text = format!("{name}:{publication_id}:{logical_shard_id}:{content_hash}");
        let mut id = sha256_hex(text.as_bytes());
        id.truncate(32);
        id
    }

    fn set_dir(name: &str, publication_id: &str) -> Result<String, LayoutError> {
        Ok(format!(
            "annotations/sets/{}/{}",
            portable("set name", name)?,
            portable("publication id", publication_id)?
        ))
    }

    /// `annotations/sets/<name>/<publication-id>/root.json`.
    pub fn set_root_path(name: &str, publication_id: &str) -> Result<RelPath, LayoutError> {
        rel(format!("{}/root.json", set_dir(name, publication_id)?))
    }

    /// `annotations/sets/<name>/<publication-id>/objects/<xx>/<object id>.arrayrecord`; the id
    /// is 64 (single process) or 32 (distributed) lowercase hex digits.
    pub fn object_path(
        name: &str,
        publication_id: &str,
        object_id: &str,
    ) -> Result<RelPath, LayoutError> {
        if !(is_hex(object_id, 64) || is_hex(object_id, 32)) {
            return Err(LayoutError {
                what: "annotation object id",
                value: object_id.to_string(),
                rule: "is not 32 or 64 lowercase hex digits",
            });
        }
        let dir = set_dir(name, publication_id)?;
        let prefix = object_id.get(..2).unwrap_or_default();
        rel(format!("{dir}/objects/{prefix}/{object_id}.arrayrecord"))
    }

    /// `annotations/sets/<name>/<publication-id>/shards/<xx>/<sha256 of logical shard id>.json`.
    pub fn worker_pointer_path(
        name: &str,
        publication_id: &str,
        logical_shard_id: &str,
    ) -> Result<RelPath, LayoutError> {
        let dir = set_dir(name, publication_id)?;
        portable("logical shard id", logical_shard_id)?;
        let hash = sha256_hex(logical_shard_id.as_bytes());
        let prefix = hash.get(..2).unwrap_or_default();
        rel(format!("{dir}/shards/{prefix}/{hash}.json"))
    }

    /// `annotations/catalogs/<sha256 of the revision bytes>.json`.
    pub fn revision_path(revision_bytes: &[u8]) -> Result<RelPath, LayoutError> {
        rel(format!(
            "annotations/catalogs/{}.json",
            sha256_hex(revision_bytes)
        ))
    }

    /// `annotations/catalog.json`.
    pub fn catalog_path() -> Result<RelPath, LayoutError> {
        rel(super::CATALOG_PATH.to_string())
    }

    /// This project's logical shard ids: `shard-%08d` of the shard's index.
    pub fn logical_shard_id(index: u64) -> String {
        format!("shard-{index:08}")
    }

    /// Whether `name` is a valid set name (a portable identifier).
    pub fn check_set_name(what: &'static str, name: &str) -> Result<(), LayoutError> {
        portable(what, name).map(|_| ())
    }
}
