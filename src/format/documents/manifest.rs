//! Manifest pages, `manifests/<xx>/<page-id>.json`, and their shard entries (docs/FORMAT.md).
//!
//! Page keys: exactly `first_ordinal, format, layout_version, record_count, shards` when
//! written; entry keys `data, first_ordinal, metadata, record_count` and, for views,
//! `record_indices`. Unknown keys are ignored on read. A page is checked against the snapshot's
//! reference to it ([`ManifestPage::validate_against`]), as the library does: same
//! `first_ordinal`, `record_count` and shard count, `stored_bytes` equal to the sum of the
//! entries' data and metadata sizes, and entries tiling the page's range.

use super::reference::{read_object_ref, ObjectRef};
use super::{
    as_count, as_object, check_tiling, checked_sum, object, parse_json, req_items,
    require_identifier, require_layout, DocumentError, ManifestRef, Rule, RuleResult,
    FORMAT_MANIFEST, LAYOUT_VERSION,
};
use crate::format::json::{object_to_pretty, JsonLimits, Object, ObjectExt, Value};

/// One aligned pair of data and metadata shards, covering a contiguous ordinal range.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardEntry {
    pub data: ObjectRef,
    pub first_ordinal: u64,
    pub metadata: ObjectRef,
    pub record_count: u64,
    /// When present, logical record `k` of the entry is physical record `record_indices[k]`
    /// of both shards (views).
    pub record_indices: Option<Vec<u64>>,
}

impl ShardEntry {
    /// An entry as a writer creates it: no `record_indices`.
    pub fn new(
        first_ordinal: u64,
        data: ObjectRef,
        metadata: ObjectRef,
        record_count: u64,
    ) -> ShardEntry {
        ShardEntry {
            data,
            first_ordinal,
            metadata,
            record_count,
            record_indices: None,
        }
    }

    /// `data.stored_bytes + metadata.stored_bytes`, `None` on overflow.
    pub fn stored_bytes(&self) -> Option<u64> {
        self.data
            .stored_bytes
            .checked_add(self.metadata.stored_bytes)
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
        let parsed = ShardEntry {
            data: read_object_ref(entry, "data")?,
            first_ordinal: entry.req_u64("first_ordinal")?,
            metadata: read_object_ref(entry, "metadata")?,
            record_count: entry.req_u64("record_count")?,
            record_indices: read_record_indices(entry)?,
        };
        parsed.check()?;
        Ok(parsed)
    }

    fn to_value(&self) -> Value {
        let mut entry = object([
            ("data", self.data.to_value()),
            ("first_ordinal", self.first_ordinal.into()),
            ("metadata", self.metadata.to_value()),
            ("record_count", self.record_count.into()),
        ]);
        if let Some(indices) = &self.record_indices {
            let items = indices.iter().map(|&i| Value::from(i)).collect();
            entry.insert("record_indices".into(), Value::Array(items));
        }
        Value::Object(entry)
    }

    /// `record_indices` (when present) has one index per record.
    fn check(&self) -> RuleResult<()> {
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
    pub record_count: u64,
    pub shards: Vec<ShardEntry>,
}

impl ManifestPage {
    /// The name errors use when the caller did not supply one.
    pub const DOCUMENT: &'static str = "manifest page";

    /// A page as a writer creates it, covering `shards` (which must tile a range starting at
    /// `first_ordinal`); `record_count` computed, then the page checked.
    pub fn from_shards(
        first_ordinal: u64,
        shards: Vec<ShardEntry>,
    ) -> Result<ManifestPage, DocumentError> {
        let in_doc = |r: Rule| r.in_document(Self::DOCUMENT);
        let record_count =
            checked_sum(shards.iter().map(|s| s.record_count), "record_count").map_err(in_doc)?;
        let page = ManifestPage {
            first_ordinal,
            record_count,
            shards,
        };
        page.check_own().map_err(in_doc)?;
        page.checked_shard_bytes().map_err(in_doc)?;
        Ok(page)
    }

    /// Parses and shape-checks a manifest page; its entries must tile its range.
    ///
    /// Memory: each entry's parsed JSON is let go as soon as the entry is built from it, so
    /// the parse takes at most its values ([`crate::format::json::parse_bytes_at_most`]) and
    /// the entries' slots ([`ManifestPage::ENTRY_BYTES`] each, a quarter of the 512 bytes of
    /// slots the eight members of an entry's JSON take at least).
    pub fn parse(bytes: &[u8], limits: &JsonLimits) -> Result<ManifestPage, DocumentError> {
        let doc = parse_json(bytes, limits, Self::DOCUMENT)?;
        Self::from_object(doc).map_err(|r| r.in_document(Self::DOCUMENT))
    }

    /// Bytes of one shard entry's own slot in a page.
    pub const ENTRY_BYTES: u64 = std::mem::size_of::<ShardEntry>() as u64;

    fn from_object(mut doc: Object) -> RuleResult<ManifestPage> {
        require_identifier(&doc, "format", FORMAT_MANIFEST, "format")?;
        require_layout(&doc)?;
        doc.req_array("shards")?;
        let items = match doc.remove("shards") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        let mut shards = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let entry = ShardEntry::from_value(&item).map_err(|r| r.at(&format!("shards[{i}]")))?;
            shards.push(entry);
        }
        let page = ManifestPage {
            first_ordinal: doc.req_u64("first_ordinal")?,
            record_count: doc.req_u64("record_count")?,
            shards,
        };
        page.check_own()?;
        Ok(page)
    }

    /// The heap memory the parsed page holds: its entries' slots, their paths and record
    /// indices, and an allocation's overhead for each.
    pub fn held_bytes(&self) -> u64 {
        use crate::format::json::ALLOCATION;
        let path = |r: &ObjectRef| r.path.as_str().len() as u64 + ALLOCATION;
        let entries: u64 = self
            .shards
            .iter()
            .map(|entry| {
                let indices = entry
                    .record_indices
                    .as_ref()
                    .map_or(0, |i| i.capacity() as u64 * 8 + ALLOCATION);
                path(&entry.data) + path(&entry.metadata) + indices
            })
            .sum();
        (self.shards.capacity() as u64 * Self::ENTRY_BYTES + ALLOCATION).saturating_add(entries)
    }

    /// The end (exclusive) of the covered ordinal range, `None` on overflow.
    pub fn end_ordinal(&self) -> Option<u64> {
        self.first_ordinal.checked_add(self.record_count)
    }

    /// The sum of the entries' data and metadata sizes (saturating; see
    /// [`ManifestPage::validate_against`] for the checked form).
    pub fn shard_bytes(&self) -> u64 {
        self.checked_shard_bytes().unwrap_or(u64::MAX)
    }

    fn checked_shard_bytes(&self) -> RuleResult<u64> {
        let sizes = self
            .shards
            .iter()
            .map(|s| {
                s.stored_bytes()
                    .ok_or_else(|| Rule::new("shard sizes overflow 64 bits"))
            })
            .collect::<RuleResult<Vec<u64>>>()?;
        checked_sum(sizes, "shard stored_bytes")
    }

    /// Checks the page against the snapshot's reference to it: same range, same shard count,
    /// and the reference's `stored_bytes` equal to the sum of the entries' sizes.
    pub fn validate_against(&self, reference: &ManifestRef) -> Result<(), DocumentError> {
        self.check_reference(reference)
            .map_err(|r| r.in_document(reference.object.path.as_str()))
    }

    fn check_reference(&self, reference: &ManifestRef) -> RuleResult<()> {
        let pairs = [
            ("first_ordinal", self.first_ordinal, reference.first_ordinal),
            ("record_count", self.record_count, reference.record_count),
            (
                "shard count",
                self.shards.len() as u64,
                reference.shard_count,
            ),
            (
                "the sum of its shards' stored_bytes",
                self.checked_shard_bytes()?,
                reference.stored_bytes,
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

    /// The rule a page satisfies on its own: entries tile the page range.
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
        )
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
            ("record_count", self.record_count.into()),
            (
                "shards",
                Value::Array(self.shards.iter().map(ShardEntry::to_value).collect()),
            ),
        ]);
        object_to_pretty(&doc)
    }
}
