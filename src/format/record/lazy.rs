//! A metadata row kept as its text, its fields parsed one at a time when asked.
//!
//! Why: a row's typed model is several times the size of its text (a field of 282 bytes of
//! JSON is about 1.6 KB of model, and parsing it builds a tree of values larger than both), so a
//! record of thousands of fields held as a model needs ten times its row. Held as text with
//! the place of each field, it needs little more than the row; a field's model is made when a
//! file of that field is asked for, which costs microseconds.
//!
//! Reading a row this way is priced in two steps, so that a reader can charge a memory budget
//! before each: [`RowLayout::locating_price`] before the row's members are located (nothing is
//! parsed), [`RowLayout::parse_price`] before the layout is parsed and validated, one field at a
//! time, into a [`LazyRow`]. The verdict is the one [`RecordMeta::parse_row`] gives, with the
//! same rules and limits (the same validation code walks the fields,
//! [`FieldWalk`]); when a row breaks several rules, which one is
//! reported first may differ.

use std::ops::Range;

use super::error::{limit, RecordError};
use super::model::{FieldMeta, RecordMeta};
use super::row::FingerprintHasher;
use super::validate::{validate_parts, FieldVisit, FieldWalk, RecordParts};
use crate::format::json::{
    member_bytes_at_most, parse_bytes_at_most, text_heap_bytes, JsonError, JsonErrorKind,
    JsonLimits, Member, Object, ObjectText, Value,
};
use crate::format::limits::RecordLimits;

/// Depth of a top-level member's value, and of a field's value (inside `fields`).
const HEAD_DEPTH: usize = 2;
const FIELD_DEPTH: usize = 3;

fn json_error(source: JsonError) -> RecordError {
    RecordError::json_sized("metadata row", source, limit::METADATA_BYTES)
}

/// A row whose members are located, none parsed: what parsing it takes is known
/// ([`RowLayout::parse_price`]) before it runs.
pub struct RowLayout<'a> {
    doc: ObjectText<'a>,
    text: &'a [u8],
    limits: JsonLimits,
    /// The top-level members other than an object `fields`, in document order.
    head: Vec<Member>,
    /// The members of `fields` in name order, when it is an object.
    fields: Option<(Range<usize>, Vec<Member>)>,
}

impl<'a> RowLayout<'a> {
    /// The most [`RowLayout::locate`] holds beside the text: a member's place for every
    /// member of the row and of its top-level objects (`fields` among them), and keys too
    /// long to be kept inline.
    pub fn locating_price(text: &[u8]) -> u64 {
        member_bytes_at_most(text, 2)
    }

    /// Locates the members of row `text` and of its `fields` object, parsing none of their
    /// values. Refused here: a text over the row limit or not UTF-8, a broken structure around
    /// the members, a key given twice, more fields than `max_fields`.
    pub fn locate(text: &'a [u8], limits: &RecordLimits) -> Result<RowLayout<'a>, RecordError> {
        let json_limits = limits.row_json();
        let doc = ObjectText::new(text, &json_limits).map_err(json_error)?;
        let mut head = doc.members(doc.whole()).map_err(json_error)?;
        refuse_twice(&mut head, doc.object_at(&doc.whole()))?;
        let fields_at = head
            .iter()
            .position(|m| m.key == "fields" && doc.slice(&m.value).first() == Some(&b'{'));
        let fields = match fields_at {
            Some(at) => {
                let span = head.remove(at).value;
                let count = doc.member_count(span.clone()).map_err(json_error)?;
                let max_fields = u64::try_from(limits.max_fields).unwrap_or(u64::MAX);
                RecordError::check_limit(limit::FIELDS, count as u64, max_fields)?;
                let mut members = doc.members(span.clone()).map_err(json_error)?;
                refuse_twice(&mut members, span.start)?;
                Some((span, members))
            }
            None => None,
        };
        Ok(RowLayout {
            doc,
            text,
            limits: json_limits,
            head,
            fields,
        })
    }

    /// The most [`RowLayout::parse`] holds beside the text and this layout, at one time: the
    /// row's copy, the head's values, and the fields' parses (each its tree of values and the
    /// model made from it, a model being at most twice the tree it is made from): all of them
    /// when they are held together for validation ([`HELD_TOGETHER`]), else the two largest
    /// (validation compares an axis with one of another field that shares its id).
    pub fn parse_price(&self) -> u64 {
        let price = |span: &Range<usize>| parse_bytes_at_most(self.doc.slice(span));
        let head: u64 = self.head.iter().map(|m| price(&m.value)).sum();
        let fields = self.field_prices();
        let parses = match fields.held_together() {
            true => fields.total,
            false => fields.largest.saturating_add(fields.second),
        };
        (self.text.len() as u64)
            .saturating_add(head)
            .saturating_add(parses.saturating_mul(3))
    }

    /// What the fields' parses are priced, together and the two largest.
    fn field_prices(&self) -> FieldPrices {
        let mut found = FieldPrices::default();
        for member in self.fields.iter().flat_map(|(_, members)| members) {
            let field = parse_bytes_at_most(self.doc.slice(&member.value));
            found.total = found.total.saturating_add(field);
            if field > found.largest {
                (found.largest, found.second) = (field, found.largest);
            } else {
                found.second = found.second.max(field);
            }
        }
        found
    }

    /// Parses the head, then checks every field (each parsed, checked and let go) with the
    /// rules and limits [`RecordMeta::parse_row`] applies; the row is kept as its text.
    pub fn parse(self, limits: &RecordLimits) -> Result<LazyRow, RecordError> {
        let (head, mut nodes) = self.parse_head()?;
        let hold = self.field_prices().held_together();
        let (fields_span, fields) = self.fields.unwrap_or_default();
        let head = RecordMeta::from_row_owned(head)?;
        let row = LazyRow {
            text: self.doc.text().into(),
            limits: self.limits,
            id: head.id,
            scene_id: head.scene_id,
            metadata: head.metadata,
            fields,
        };
        // Every field read as a whole row's read reads it, its values counted; kept for the
        // validation when they are small enough to be held together.
        if !fields_span.is_empty() {
            nodes = nodes.saturating_add(1);
        }
        let mut held = Vec::with_capacity(if hold { row.fields.len() } else { 0 });
        for index in 0..row.fields.len() {
            let (field, counted) = row.parse_field(index)?;
            nodes = nodes.saturating_add(counted);
            if nodes > self.limits.max_nodes {
                let limit = self.limits.max_nodes;
                let error = JsonError {
                    kind: JsonErrorKind::TooManyNodes { limit },
                    offset: fields_span.start,
                };
                return Err(json_error(error));
            }
            if hold {
                held.push(field);
            }
        }
        let held_fields = HeldFields { row: &row, held };
        let fields: &dyn FieldWalk = match hold {
            true => &held_fields,
            false => &row,
        };
        let parts = RecordParts {
            id: &row.id,
            metadata: &row.metadata,
            fields,
        };
        validate_parts(parts, limits, row.text.len())?;
        drop(held_fields);
        Ok(row)
    }

    /// The top-level object without the fields (an empty `fields` in their place), and the
    /// values it counted.
    fn parse_head(&self) -> Result<(Object, usize), RecordError> {
        let mut head = Object::new();
        let mut nodes = 1usize;
        for member in &self.head {
            let (value, counted) = self
                .doc
                .parse(member.value.clone(), HEAD_DEPTH)
                .map_err(json_error)?;
            nodes = nodes.saturating_add(counted);
            head.insert(member.key.clone(), value);
        }
        if self.fields.is_some() {
            head.insert("fields".into(), Value::Object(Object::new()));
        }
        Ok((head, nodes))
    }
}

/// How much of fields' parses a row's read holds together for validation, at most: rows
/// whose fields price within it (nearly all) are parsed once and checked as held; larger ones
/// are parsed again by each check, one field at a time (about eight times the work, in
/// exchange for memory that stays near the text).
pub const HELD_TOGETHER: u64 = 1 << 20;

/// What a row's fields' parses are priced.
#[derive(Default)]
struct FieldPrices {
    total: u64,
    largest: u64,
    second: u64,
}

impl FieldPrices {
    fn held_together(&self) -> bool {
        self.total <= HELD_TOGETHER
    }
}

/// A row's fields parsed once and held while the row is validated.
struct HeldFields<'a> {
    row: &'a LazyRow,
    held: Vec<FieldMeta>,
}

impl FieldWalk for HeldFields<'_> {
    fn count(&self) -> usize {
        self.held.len()
    }

    fn contains(&self, name: &str) -> bool {
        self.row.field_index(name).is_some()
    }

    fn each(&self, visit: &mut FieldVisit<'_>) -> Result<(), RecordError> {
        for (index, field) in self.held.iter().enumerate() {
            visit(index, self.row.field_name(index).unwrap_or_default(), field)?;
        }
        Ok(())
    }

    fn with_field(
        &self,
        index: usize,
        visit: &mut dyn FnMut(&FieldMeta) -> Result<(), RecordError>,
    ) -> Result<(), RecordError> {
        match self.held.get(index) {
            Some(field) => visit(field),
            None => Ok(()),
        }
    }
}

/// Sorts `members` (in document order) by key and refuses a key given twice where a whole
/// parse does: at the second key when it directly follows the first and every key so far
/// came in order, else at the object.
fn refuse_twice(members: &mut [Member], object_offset: usize) -> Result<(), RecordError> {
    let twice = |key: &str, offset| {
        let kind = JsonErrorKind::DuplicateKey(key.to_string());
        Err(json_error(JsonError { kind, offset }))
    };
    for pair in members.windows(2) {
        if pair[0].key == pair[1].key {
            return twice(&pair[1].key, pair[1].key_at);
        }
        if pair[0].key > pair[1].key {
            break;
        }
    }
    members.sort_by(|a, b| a.key.cmp(&b.key));
    match members.windows(2).find(|w| w[0].key == w[1].key) {
        Some(pair) => twice(&pair[0].key, object_offset),
        None => Ok(()),
    }
}

/// A valid metadata row kept as its text: its id, scene and metadata parsed, its fields
/// located by name and parsed when asked.
#[derive(Debug)]
pub struct LazyRow {
    /// The row, checked when it was read (UTF-8, within the row limit).
    text: Box<str>,
    limits: JsonLimits,
    pub id: String,
    pub scene_id: Option<String>,
    pub metadata: Object,
    /// The fields' names and the spans of their values in `text`, in name order.
    fields: Vec<Member>,
}

impl LazyRow {
    /// Reads `text` as a row, pricing nothing (for callers that hold no budget).
    pub fn parse(text: &[u8], limits: &RecordLimits) -> Result<LazyRow, RecordError> {
        RowLayout::locate(text, limits)?.parse(limits)
    }

    /// The row of a model already held: written in the row form and its fields located, not
    /// validated again (the model was).
    pub fn of_meta(meta: &RecordMeta) -> Result<LazyRow, RecordError> {
        let text = meta.to_row_json();
        let limits = JsonLimits {
            max_bytes: usize::MAX,
            max_depth: usize::MAX,
            max_nodes: usize::MAX,
        };
        let doc = ObjectText::of_str(&text, &limits);
        let head = doc.members(doc.whole()).map_err(json_error)?;
        let fields = match head.iter().find(|m| m.key == "fields") {
            Some(member) => doc.members(member.value.clone()).map_err(json_error)?,
            None => Vec::new(),
        };
        Ok(LazyRow {
            limits,
            id: meta.id.clone(),
            scene_id: meta.scene_id.clone(),
            metadata: meta.metadata.clone(),
            fields,
            text: text.into_boxed_str(),
        })
    }

    /// How many fields the row has.
    pub fn field_count(&self) -> usize {
        self.fields.len()
    }

    /// The name of field `index` (name order).
    pub fn field_name(&self, index: usize) -> Option<&str> {
        self.fields.get(index).map(|m| m.key.as_str())
    }

    /// The index of the field called `name`.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields
            .binary_search_by(|m| m.key.as_str().cmp(name))
            .ok()
    }

    /// The model of field `index`, parsed from the row.
    pub fn field(&self, index: usize) -> Result<FieldMeta, RecordError> {
        self.parse_field(index).map(|(field, _)| field)
    }

    fn parse_field(&self, index: usize) -> Result<(FieldMeta, usize), RecordError> {
        let Some(member) = self.fields.get(index) else {
            let detail = format!("the row has no field {index}");
            return Err(RecordError::validation(super::rule::KEY_TYPE, detail));
        };
        let doc = ObjectText::of_str(&self.text, &self.limits);
        let (value, nodes) = doc
            .parse(member.value.clone(), FIELD_DEPTH)
            .map_err(json_error)?;
        Ok((FieldMeta::from_row_field(&member.key, value)?, nodes))
    }

    /// The whole row's model (a copy: for what needs it whole, which is rare).
    pub fn to_meta(&self) -> Result<RecordMeta, RecordError> {
        let mut fields = std::collections::BTreeMap::new();
        for (index, member) in self.fields.iter().enumerate() {
            fields.insert(member.key.to_string(), self.field(index)?);
        }
        Ok(RecordMeta {
            id: self.id.clone(),
            scene_id: self.scene_id.clone(),
            metadata: self.metadata.clone(),
            fields,
        })
    }

    /// [`RecordMeta::fingerprint`] of the row, its fields parsed one at a time.
    pub fn fingerprint(&self) -> Result<u64, RecordError> {
        let mut hasher = FingerprintHasher::new(
            &self.id,
            self.scene_id.as_deref(),
            &self.metadata,
            self.fields.len(),
        );
        self.each(&mut |_, name, field| {
            hasher.field(name, field);
            Ok(())
        })?;
        Ok(hasher.finish())
    }

    /// What the row holds on the heap: its text, its head and its fields' places.
    pub fn heap_bytes(&self) -> u64 {
        let member = std::mem::size_of::<Member>() as u64;
        let long_keys: u64 = self
            .fields
            .iter()
            .filter(|m| m.key.is_heap_allocated())
            .map(|m| text_heap_bytes(m.key.len()))
            .sum();
        text_heap_bytes(self.text.len())
            + text_heap_bytes(self.id.len())
            + self
                .scene_id
                .as_ref()
                .map_or(0, |s| text_heap_bytes(s.len()))
            + self.metadata.heap_bytes()
            + self.fields.capacity() as u64 * member
            + long_keys
    }
}

impl FieldWalk for LazyRow {
    fn count(&self) -> usize {
        self.fields.len()
    }

    fn contains(&self, name: &str) -> bool {
        self.field_index(name).is_some()
    }

    fn each(&self, visit: &mut FieldVisit<'_>) -> Result<(), RecordError> {
        for (index, member) in self.fields.iter().enumerate() {
            visit(index, &member.key, &self.field(index)?)?;
        }
        Ok(())
    }

    fn with_field(
        &self,
        index: usize,
        visit: &mut dyn FnMut(&FieldMeta) -> Result<(), RecordError>,
    ) -> Result<(), RecordError> {
        match index < self.fields.len() {
            true => visit(&self.field(index)?),
            false => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELD: &str = r#"{"dtype":"complex64","shape":[4],"axes":[{"name":"time","length":4,"id":"t","coordinate":{"start":0.0,"step":0.5,"unit":"s"}}],"metadata":{"gain_db":-1.5}}"#;

    fn row_of(fields: &[(&str, &str)]) -> String {
        let fields: Vec<String> = fields
            .iter()
            .map(|(name, field)| format!("{name:?}:{field}"))
            .collect();
        format!(
            r#"{{"id":"r","scene_id":null,"metadata":{{"n":1}},"fields":{{{}}}}}"#,
            fields.join(",")
        )
    }

    /// The lazy read agrees with the whole read: same model, same fingerprint; each field
    /// given back as the whole read has it.
    #[test]
    fn a_lazy_row_reads_as_the_whole_row_does() {
        let other = FIELD.replace("gain_db", "gain");
        let text = row_of(&[("b", FIELD), ("a/x", &other), ("é", FIELD)]);
        let limits = RecordLimits::default();
        let whole = RecordMeta::parse_row(text.as_bytes(), &limits).unwrap();
        let lazy = LazyRow::parse(text.as_bytes(), &limits).unwrap();
        assert_eq!(lazy.to_meta().unwrap(), whole);
        assert_eq!(lazy.fingerprint().unwrap(), whole.fingerprint());
        assert_eq!(lazy.field_index("b"), Some(1));
        assert_eq!(lazy.field(1).unwrap(), whole.fields["b"]);
        assert_eq!(lazy.field_name(2), Some("é"));
    }

    /// Rows the whole read refuses, the lazy read refuses too (each breaks one rule).
    #[test]
    fn a_lazy_row_refuses_what_the_whole_row_refuses() {
        let limits = RecordLimits {
            max_fields: 3,
            ..RecordLimits::default()
        };
        let bad_length = FIELD.replace("\"length\":4", "\"length\":5");
        let other_step = FIELD.replace("0.5", "0.25");
        let dangling = FIELD.replace("\"start\":0.0,\"step\":0.5", "\"reference\":\"nowhere\"");
        let rows = [
            row_of(&[("a", &bad_length)]),
            row_of(&[("a", FIELD), ("b", &other_step)]),
            row_of(&[("a", &dangling)]),
            row_of(&[("a", FIELD), ("a", FIELD)]),
            row_of(&[("a", FIELD), ("b", FIELD), ("c", FIELD), ("d", FIELD)]),
            row_of(&[("a", "[1,,2]")]),
            row_of(&[("a", "7")]),
            row_of(&[]),
            r#"{"id":"r","fields":[]}"#.to_string(),
            r#"{"fields":{}}"#.to_string(),
            format!(r#"{{"id":"","fields":{{"a":{FIELD}}}}}"#),
            format!(r#"{{"id":"r","id":"s","fields":{{"a":{FIELD}}}}}"#),
        ];
        for text in rows {
            let whole = RecordMeta::parse_row(text.as_bytes(), &limits);
            let lazy = LazyRow::parse(text.as_bytes(), &limits);
            let whole = whole.expect_err(&text).to_string();
            let lazy = lazy.expect_err(&text).to_string();
            assert_eq!(lazy, whole, "{text}");
        }
    }

    /// What reading `text` lazily takes, measured by the counting allocator, against its
    /// prices: (located, locating price, peak, parse price, held, charged).
    fn measured(text: &str) -> [u64; 6] {
        let limits = RecordLimits::default();
        let before = crate::testing::allocated_now();
        crate::testing::reset_peak();
        let layout = RowLayout::locate(text.as_bytes(), &limits).unwrap();
        let located = crate::testing::allocated_now().saturating_sub(before);
        let price = layout.parse_price();
        let row = layout.parse(&limits).unwrap();
        let peak = crate::testing::peak_allocated().saturating_sub(before);
        let held = crate::testing::allocated_now().saturating_sub(before);
        let locating = RowLayout::locating_price(text.as_bytes());
        [located, locating, peak, price, held, row.heap_bytes()]
    }

    /// Checks that each step took no more than its price and the row holds no more than it
    /// is charged.
    fn within_prices(what: &str, text: &str) -> [u64; 6] {
        let found = measured(text);
        let [located, locating, peak, price, held, charged] = found;
        eprintln!(
            "{what}: row {} bytes, located {located} (priced {locating}), peak {peak} \
             (priced {}), held {held} (charged {charged})",
            text.len(),
            locating + price
        );
        assert!(located <= locating, "{what}: located");
        assert!(peak <= locating + price, "{what}: peak");
        assert!(held <= charged, "{what}: held");
        found
    }

    /// A row of 2,000 fields held lazily is its text and little more, where its model is
    /// several times that; the prices cover what locating and parsing take.
    #[test]
    fn a_wide_row_is_held_as_its_text_and_priced_above_what_it_takes() {
        let names: Vec<String> = (0..2_000).map(|i| format!("f{i:04}")).collect();
        let fields: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), FIELD)).collect();
        let text = row_of(&fields);
        let [.., charged] = within_prices("2,000 fields", &text);
        assert!(charged < 2 * text.len() as u64);
    }

    /// Shapes whose model is large for their text, each within its prices: a field of 128
    /// axes of one sample (an axis is 272 bytes of model for 30 of text), a coordinate of
    /// 200,000 one-digit values, 1,000 fields with names of 100 bytes, 500 fields sharing an
    /// axis id (validation parses two fields at once to compare them).
    #[test]
    fn rows_whose_model_is_large_for_their_text_stay_within_their_prices() {
        let axes: Vec<String> = (0..128)
            .map(|i| format!(r#"{{"name":"a{i}","length":1}}"#))
            .collect();
        let many_axes = format!(
            r#"{{"dtype":"uint8","shape":[{}],"axes":[{}],"metadata":{{}}}}"#,
            vec!["1"; 128].join(","),
            axes.join(",")
        );
        within_prices("128 axes", &row_of(&[("a", &many_axes)]));

        let values = vec!["7"; 200_000].join(",");
        let long_coordinate = format!(
            r#"{{"dtype":"uint8","shape":[200000],"axes":[{{"name":"t","length":200000,"coordinate":{{"values":[{values}]}}}}],"metadata":{{}}}}"#
        );
        within_prices("200,000 values", &row_of(&[("a", &long_coordinate)]));

        let names: Vec<String> = (0..1_000).map(|i| format!("{i:0100}")).collect();
        let fields: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), FIELD)).collect();
        within_prices("1,000 long names", &row_of(&fields));

        let names: Vec<String> = (0..500).map(|i| format!("f{i:03}")).collect();
        let fields: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), FIELD)).collect();
        let shared = row_of(&fields);
        assert!(LazyRow::parse(shared.as_bytes(), &RecordLimits::default()).is_ok());
        within_prices("500 fields sharing an axis id", &shared);
    }
}
