//! Manifest pages, `manifests/<xx>/<page-id>.json`, and their shard entries (section 4).
//!
//! A page can only be fully checked against the snapshot's reference to it (the page repeats
//! the reference's range and totals, so that a page read on its own is still self-describing),
//! hence [`ManifestPage::validate_against`] takes that reference, the snapshot id and the page's
//! index. Errors from it are attributed to the page's canonical path, which is what a user
//! would look for on storage.

use super::ids::{manifest_path, page_id};
use super::reference::{read_reference, Keys, Reference};
use super::{
    as_count, as_object, check_sum, check_tiling, checked_sum, object, parse_json, req_items,
    require_identifier, require_layout, DocumentError, ManifestRef, Rule, RuleResult,
    FORMAT_MANIFEST, LAYOUT_VERSION,
};
use crate::format::json::{object_to_pretty, JsonLimits, Object, ObjectExt, Value};

/// One aligned pair of data and metadata shards, covering a contiguous ordinal range.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardEntry {
    pub data: Reference,
    pub first_ordinal: u64,
    pub metadata: Reference,
    pub record_count: u64,
    /// When present, logical record `k` of the entry is physical record `record_indices[k]`
    /// of both shards (lightweight views).
    pub record_indices: Option<Vec<u64>>,
    /// `data.stored_bytes + metadata.stored_bytes`.
    pub stored_bytes: u64,
}

impl ShardEntry {
    /// An entry as a writer creates it: no `record_indices`, `stored_bytes` computed.
    pub fn new(
        first_ordinal: u64,
        data: Reference,
        metadata: Reference,
        record_count: u64,
    ) -> Result<ShardEntry, DocumentError> {
        let stored_bytes = data
            .stored_bytes
            .checked_add(metadata.stored_bytes)
            .ok_or_else(|| {
                DocumentError::rule(
                    ManifestPage::DOCUMENT,
                    "shard stored_bytes overflow 64 bits",
                )
            })?;
        Ok(ShardEntry {
            data,
            first_ordinal,
            metadata,
            record_count,
            record_indices: None,
            stored_bytes,
        })
    }

    /// The physical index (in both shards) of the entry's logical record `k`, `None` when `k`
    /// is out of range.
    pub fn physical_index(&self, k: u64) -> Option<u64> {
        if k >= self.record_count {
            return None;
        }
        match &self.record_indices {
            None => Some(k),
            Some(indices) => indices.get(usize::try_from(k).ok()?).copied(),
        }
    }

    fn from_value(value: &Value) -> RuleResult<ShardEntry> {
        let entry = as_object(value, "a shard entry")?;
        Ok(ShardEntry {
            data: read_reference(entry, "data", Keys::IgnoreUnknown)?,
            first_ordinal: entry.req_u64("first_ordinal")?,
            metadata: read_reference(entry, "metadata", Keys::IgnoreUnknown)?,
            record_count: entry.req_u64("record_count")?,
            record_indices: read_record_indices(entry)?,
            stored_bytes: entry.req_u64("stored_bytes")?,
        })
    }

    fn to_value(&self) -> Value {
        let mut entry = object([
            ("data", self.data.to_value()),
            ("first_ordinal", self.first_ordinal.into()),
            ("metadata", self.metadata.to_value()),
            ("record_count", self.record_count.into()),
            ("stored_bytes", self.stored_bytes.into()),
        ]);
        if let Some(indices) = &self.record_indices {
            let items = indices.iter().map(|&i| Value::from(i)).collect();
            entry.insert("record_indices".into(), Value::Array(items));
        }
        Value::Object(entry)
    }

    /// The entry-local rules: its size is the sum of its shards', and `record_indices` (when
    /// present) has one index per record.
    fn check(&self) -> RuleResult<()> {
        let parts = self
            .data
            .stored_bytes
            .checked_add(self.metadata.stored_bytes)
            .ok_or_else(|| Rule::new("data + metadata stored_bytes overflow 64 bits"))?;
        check_sum(
            self.stored_bytes,
            parts,
            "stored_bytes",
            "data and metadata",
        )?;
        if let Some(indices) = &self.record_indices {
            if indices.len() as u64 != self.record_count {
                return Err(Rule::new(format!(
                    "record_indices has {} entries but record_count is {}",
                    indices.len(),
                    self.record_count
                )));
            }
        }
        Ok(())
    }
}

/// `record_indices`: optional; `null` reads as absent (it carries no view).
fn read_record_indices(entry: &Object) -> RuleResult<Option<Vec<u64>>> {
    match entry.get("record_indices") {
        None | Some(Value::Null) => Ok(None),
        Some(_) => req_items(entry, "record_indices", as_count).map(Some),
    }
}

/// The parsed manifest page.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ManifestPage {
    pub first_ordinal: u64,
    pub page_id: String,
    pub record_count: u64,
    pub shards: Vec<ShardEntry>,
    pub snapshot_id: String,
    /// The sum of the shard entries' `stored_bytes`.
    pub stored_bytes: u64,
}

impl ManifestPage {
    /// The name errors use when the caller did not supply one.
    pub const DOCUMENT: &'static str = "manifest page";

    /// Page `page_index` of snapshot `snapshot_id` as a writer creates it, covering `shards`
    /// (which must tile a range starting at `first_ordinal`); totals computed, then checked.
    pub fn from_shards(
        snapshot_id: &str,
        page_index: u64,
        first_ordinal: u64,
        shards: Vec<ShardEntry>,
    ) -> Result<ManifestPage, DocumentError> {
        let id = page_id(snapshot_id, page_index);
        let in_doc = |r: Rule| r.in_document(&Self::document_for(&id));
        let record_count =
            checked_sum(shards.iter().map(|s| s.record_count), "record_count").map_err(in_doc)?;
        let stored_bytes =
            checked_sum(shards.iter().map(|s| s.stored_bytes), "stored_bytes").map_err(in_doc)?;
        let page = ManifestPage {
            first_ordinal,
            page_id: id.clone(),
            record_count,
            shards,
            snapshot_id: snapshot_id.to_string(),
            stored_bytes,
        };
        page.check_own().map_err(in_doc)?;
        Ok(page)
    }

    /// Parses and shape-checks a manifest page.
    pub fn parse(bytes: &[u8], limits: &JsonLimits) -> Result<ManifestPage, DocumentError> {
        let doc = parse_json(bytes, limits, Self::DOCUMENT)?;
        Self::from_object(&doc).map_err(|r| r.in_document(Self::DOCUMENT))
    }

    fn from_object(doc: &Object) -> RuleResult<ManifestPage> {
        require_identifier(doc, "format", FORMAT_MANIFEST, "format")?;
        require_layout(doc)?;
        Ok(ManifestPage {
            first_ordinal: doc.req_u64("first_ordinal")?,
            page_id: doc.req_str("page_id")?.to_string(),
            record_count: doc.req_u64("record_count")?,
            shards: req_items(doc, "shards", ShardEntry::from_value)?,
            snapshot_id: doc.req_str("snapshot_id")?.to_string(),
            stored_bytes: doc.req_u64("stored_bytes")?,
        })
    }

    /// The end (exclusive) of the covered ordinal range, `None` on overflow.
    pub fn end_ordinal(&self) -> Option<u64> {
        self.first_ordinal.checked_add(self.record_count)
    }

    /// Checks the page against the snapshot's reference to it: it is page `page_index` of
    /// snapshot `snapshot_id` (ids equal), it repeats the reference's range and totals, its
    /// shard entries tile its range, and every size is the sum of its parts.
    pub fn validate_against(
        &self,
        reference: &ManifestRef,
        snapshot_id: &str,
        page_index: u64,
    ) -> Result<(), DocumentError> {
        let expected_id = page_id(snapshot_id, page_index);
        self.check_identity(snapshot_id, &expected_id)
            .and_then(|()| self.check_reference(reference))
            .and_then(|()| self.check_own())
            .map_err(|r| r.in_document(&Self::document_for(&expected_id)))
    }

    /// The canonical path of page `page_id`, or the generic name when the id cannot be one.
    fn document_for(page_id: &str) -> String {
        manifest_path(page_id).map_or_else(|_| Self::DOCUMENT.to_string(), |p| p.to_string())
    }

    fn check_identity(&self, snapshot_id: &str, expected_id: &str) -> RuleResult<()> {
        if self.snapshot_id != snapshot_id {
            return Err(Rule::new(format!(
                "snapshot_id {:?} is not the snapshot's {snapshot_id:?}",
                self.snapshot_id
            )));
        }
        if self.page_id != expected_id {
            return Err(Rule::new(format!(
                "page_id {:?} is not the expected {expected_id:?}",
                self.page_id
            )));
        }
        Ok(())
    }

    fn check_reference(&self, reference: &ManifestRef) -> RuleResult<()> {
        let pairs = [
            ("first_ordinal", self.first_ordinal, reference.first_ordinal),
            ("record_count", self.record_count, reference.record_count),
            ("stored_bytes", self.stored_bytes, reference.stored_bytes),
            (
                "shard count",
                self.shards.len() as u64,
                reference.shard_count,
            ),
        ];
        for (key, page, snapshot) in pairs {
            if page != snapshot {
                return Err(Rule::new(format!(
                    "{key} is {page} but the snapshot's manifest reference says {snapshot}"
                )));
            }
        }
        Ok(())
    }

    /// The rules a page satisfies on its own: entries tile the page range, sizes add up.
    fn check_own(&self) -> RuleResult<()> {
        let end = self
            .end_ordinal()
            .ok_or_else(|| Rule::new("first_ordinal + record_count overflows 64 bits"))?;
        check_tiling(
            self.shards
                .iter()
                .map(|s| (s.first_ordinal, s.record_count)),
            self.first_ordinal,
            end,
            "shard entries",
        )?;
        for (i, shard) in self.shards.iter().enumerate() {
            shard.check().map_err(|r| r.at(&format!("shards[{i}]")))?;
        }
        let bytes = checked_sum(self.shards.iter().map(|s| s.stored_bytes), "stored_bytes")?;
        check_sum(self.stored_bytes, bytes, "stored_bytes", "shard entries")
    }

    /// The index of the shard entry covering `ordinal` (binary search; assumes a validated
    /// page), or `None` outside the page.
    pub fn shard_for(&self, ordinal: u64) -> Option<usize> {
        if ordinal < self.first_ordinal || ordinal >= self.end_ordinal()? {
            return None;
        }
        let after = self.shards.partition_point(|s| s.first_ordinal <= ordinal);
        let index = after.checked_sub(1)?;
        let shard = self.shards.get(index)?;
        (ordinal < shard.first_ordinal.checked_add(shard.record_count)?).then_some(index)
    }

    /// The exact bytes a writer publishes.
    pub fn to_json(&self) -> String {
        let doc = object([
            ("first_ordinal", self.first_ordinal.into()),
            ("format", FORMAT_MANIFEST.into()),
            ("layout_version", LAYOUT_VERSION.into()),
            ("page_id", self.page_id.as_str().into()),
            ("record_count", self.record_count.into()),
            (
                "shards",
                Value::Array(self.shards.iter().map(ShardEntry::to_value).collect()),
            ),
            ("snapshot_id", self.snapshot_id.as_str().into()),
            ("stored_bytes", self.stored_bytes.into()),
        ]);
        object_to_pretty(&doc)
    }
}
