//! `snapshots/<snapshot-id>/snapshot.json` and its manifest references (docs/FORMAT.md).
//!
//! The snapshot is the index of a dataset: ordered manifest references, each covering a
//! contiguous ordinal range, plus totals that must agree with the references. Keys: exactly
//! `format, layout_version, manifests, record_count, shard_count, snapshot_id, stored_bytes`
//! when written; unknown keys ignored on read. [`Snapshot::parse`] checks shape;
//! [`Snapshot::validate`] checks what the library checks (the references tile
//! `[0, record_count)`, the sums of `shard_count` and `stored_bytes` equal the snapshot's),
//! which is what lets a reader map an ordinal to a page by binary search without opening every
//! page.

use super::reference::{read_object_ref, ObjectRef};
use super::{
    as_object, check_sum, check_tiling, checked_sum, object, parse_json, req_items,
    require_identifier, require_layout, DocumentError, ManifestPage, Rule, RuleResult,
    FORMAT_SNAPSHOT, LAYOUT_VERSION,
};
use crate::format::json::{object_to_pretty, JsonLimits, Object, ObjectExt, Value};

/// A snapshot's reference to one manifest page, with the page's totals.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ManifestRef {
    /// The first snapshot ordinal the page covers.
    pub first_ordinal: u64,
    /// The page document itself (its size is the page's own byte size).
    pub object: ObjectRef,
    pub record_count: u64,
    pub shard_count: u64,
    /// The sum of the page's shard `stored_bytes` (not the page document's size).
    pub stored_bytes: u64,
}

impl ManifestRef {
    /// The reference a writer records for `page`, published as `object`.
    pub fn for_page(page: &ManifestPage, object: ObjectRef) -> ManifestRef {
        ManifestRef {
            first_ordinal: page.first_ordinal,
            object,
            record_count: page.record_count,
            shard_count: page.shards.len() as u64,
            stored_bytes: page.shard_bytes(),
        }
    }

    /// The end (exclusive) of the covered ordinal range, `None` on overflow.
    pub fn end_ordinal(&self) -> Option<u64> {
        self.first_ordinal.checked_add(self.record_count)
    }

    fn from_value(value: &Value) -> RuleResult<ManifestRef> {
        let entry = as_object(value, "a manifest reference")?;
        Ok(ManifestRef {
            first_ordinal: entry.req_u64("first_ordinal")?,
            object: read_object_ref(entry, "object")?,
            record_count: entry.req_u64("record_count")?,
            shard_count: entry.req_u64("shard_count")?,
            stored_bytes: entry.req_u64("stored_bytes")?,
        })
    }

    fn to_value(&self) -> Value {
        Value::Object(object([
            ("first_ordinal", self.first_ordinal.into()),
            ("object", self.object.to_value()),
            ("record_count", self.record_count.into()),
            ("shard_count", self.shard_count.into()),
            ("stored_bytes", self.stored_bytes.into()),
        ]))
    }
}

/// The parsed snapshot document.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub manifests: Vec<ManifestRef>,
    pub record_count: u64,
    pub shard_count: u64,
    pub snapshot_id: String,
    pub stored_bytes: u64,
}

impl Snapshot {
    /// The name errors use when the caller did not supply one.
    pub const DOCUMENT: &'static str = "snapshot.json";

    /// A snapshot as a writer creates it: totals computed from `manifests`, then validated.
    pub fn from_manifests(
        snapshot_id: impl Into<String>,
        manifests: Vec<ManifestRef>,
    ) -> Result<Snapshot, DocumentError> {
        let in_doc = |r: Rule| r.in_document(Self::DOCUMENT);
        let sum = |f: fn(&ManifestRef) -> u64, what| {
            checked_sum(manifests.iter().map(f), what).map_err(in_doc)
        };
        let snapshot = Snapshot {
            record_count: sum(|m| m.record_count, "record_count")?,
            shard_count: sum(|m| m.shard_count, "shard_count")?,
            stored_bytes: sum(|m| m.stored_bytes, "stored_bytes")?,
            manifests,
            snapshot_id: snapshot_id.into(),
        };
        snapshot.validate()?;
        Ok(snapshot)
    }

    /// Parses and shape-checks a snapshot document.
    pub fn parse(bytes: &[u8], limits: &JsonLimits) -> Result<Snapshot, DocumentError> {
        let doc = parse_json(bytes, limits, Self::DOCUMENT)?;
        Self::from_object(&doc).map_err(|r| r.in_document(Self::DOCUMENT))
    }

    fn from_object(doc: &Object) -> RuleResult<Snapshot> {
        require_identifier(doc, "format", FORMAT_SNAPSHOT, "format")?;
        require_layout(doc)?;
        let snapshot_id = doc.req_str("snapshot_id")?;
        if snapshot_id.is_empty() {
            return Err(Rule::new("snapshot_id must be a nonempty string"));
        }
        Ok(Snapshot {
            manifests: req_items(doc, "manifests", ManifestRef::from_value)?,
            record_count: doc.req_u64("record_count")?,
            shard_count: doc.req_u64("shard_count")?,
            snapshot_id: snapshot_id.to_string(),
            stored_bytes: doc.req_u64("stored_bytes")?,
        })
    }

    /// Checks the rules that relate the snapshot's numbers, as the library does: the manifest
    /// references tile `[0, record_count)` in order, and the sums of `shard_count` and
    /// `stored_bytes` over them equal the snapshot's (the `record_count` sum follows from the
    /// tiling). Pages of zero records are allowed (a publication of empty shards has them).
    pub fn validate(&self) -> Result<(), DocumentError> {
        self.check().map_err(|r| r.in_document(Self::DOCUMENT))
    }

    fn check(&self) -> RuleResult<()> {
        check_tiling(
            self.manifests
                .iter()
                .map(|m| (m.first_ordinal, m.record_count)),
            0,
            self.record_count,
            "manifest references",
        )?;
        let shards = checked_sum(self.manifests.iter().map(|m| m.shard_count), "shard_count")?;
        check_sum(self.shard_count, shards, "shard_count", "manifests")?;
        let bytes = checked_sum(
            self.manifests.iter().map(|m| m.stored_bytes),
            "stored_bytes",
        )?;
        check_sum(self.stored_bytes, bytes, "stored_bytes", "manifests")
    }

    /// The index of the manifest reference covering `ordinal` (binary search; assumes a
    /// validated snapshot), or `None` past the end.
    pub fn manifest_for(&self, ordinal: u64) -> Option<usize> {
        if ordinal >= self.record_count {
            return None;
        }
        let after = self
            .manifests
            .partition_point(|m| m.first_ordinal <= ordinal);
        let index = after.checked_sub(1)?;
        let candidate = self.manifests.get(index)?;
        (ordinal < candidate.end_ordinal()?).then_some(index)
    }

    /// The exact bytes a writer publishes.
    pub fn to_json(&self) -> String {
        let doc = object([
            ("format", FORMAT_SNAPSHOT.into()),
            ("layout_version", LAYOUT_VERSION.into()),
            (
                "manifests",
                Value::Array(self.manifests.iter().map(ManifestRef::to_value).collect()),
            ),
            ("record_count", self.record_count.into()),
            ("shard_count", self.shard_count.into()),
            ("snapshot_id", self.snapshot_id.as_str().into()),
            ("stored_bytes", self.stored_bytes.into()),
        ]);
        object_to_pretty(&doc)
    }
}
