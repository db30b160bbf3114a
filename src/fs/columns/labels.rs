//! `columns/labels.jsonl`: one JSON line per label box that a `.sigmf-meta` under `records/`
//! draws from the records' own labels (`docs/MOUNT.md`, "Label tables").
//!
//! Why fixed-width lines: `stat` must give the file's size from the metadata rows alone, but
//! the box numbers are in the data shards. A row gives, for each IQ field with boxes, how many
//! there are (the extent's shape) and every text a line can hold but the numbers (ordinal, ids,
//! field name, the class names), so each box gets a line of the longest text it could take,
//! padded with spaces before its closing `}` (JSON whitespace). The index keeps one [`Group`]
//! per record field with boxes: where its lines start follows from the widths.
//!
//! Reading a stretch of the file decodes the records it covers (through the record cache) and
//! writes their lines: the boxes a field's `.sigmf-meta` shows, sorted as it sorts them
//! (`core:sample_start`, then count, then edges), then the boxes it leaves out (not finite,
//! empty, edges out of order), in table order, with nulls for their numbers.

use std::ops::Range;

use crate::format::json::{python_float_repr, write_string};
use crate::format::labels::{self, BoxRow};
use crate::format::record::RecordMeta;
use crate::fs::views::has_sigmf_pair;
use crate::fs::views::sigmf::{self, BoxPlan, NamesMemo};

/// The name of the table under `columns/`.
pub const LABELS_FILE: &str = "labels.jsonl";

/// Longest text of a `u64`.
const U64_TEXT: usize = 20;
/// The keys of a line, in order, with what follows each key's value.
const NUMBER_KEYS: [(&str, usize); 4] = [
    (",\"sample_start\":", U64_TEXT),
    (",\"sample_count\":", U64_TEXT),
    (",\"freq_lower_edge_hz\":", labels::F64_TEXT),
    (",\"freq_upper_edge_hz\":", labels::F64_TEXT),
];

/// One IQ field's boxes in the table: record `ordinal`'s field number `field` (in name
/// order, as the record's tree holds them), `count` lines of `width` bytes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    pub ordinal: u64,
    pub field: u32,
    pub count: u64,
    pub width: u32,
}

/// Bytes the index holds per group: the group and its end offset.
pub const GROUP_BYTES: u64 = std::mem::size_of::<Group>() as u64 + 8;

/// Where every group's lines are.
#[derive(Debug, Default)]
pub struct LabelIndex {
    groups: Vec<Group>,
    /// Where each group's lines end in the file.
    ends: Vec<u64>,
}

/// What every line of a group starts with: where the box is.
#[derive(Debug, Clone, Copy)]
pub struct LineHead<'a> {
    pub ordinal: u64,
    pub record_id: &'a str,
    pub scene_id: Option<&'a str>,
    pub field: &'a str,
}

impl LineHead<'_> {
    /// `{"ordinal":..,"record_id":..,"scene_id":..,"field":..,"set":null`.
    fn text(&self) -> String {
        let mut out = format!("{{\"ordinal\":{},\"record_id\":", self.ordinal);
        write_string(self.record_id, &mut out);
        out.push_str(",\"scene_id\":");
        match self.scene_id {
            Some(scene) => write_string(scene, &mut out),
            None => out.push_str("null"),
        }
        out.push_str(",\"field\":");
        write_string(self.field, &mut out);
        out.push_str(",\"set\":null");
        out
    }
}

impl LabelIndex {
    /// Bytes of the table.
    pub fn len(&self) -> u64 {
        self.ends.last().copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The groups a read of `size` bytes at `offset` covers, and where the read starts in
    /// the first one's lines.
    pub fn groups_at(&self, offset: u64, size: u64) -> (Range<usize>, u64) {
        let end = offset.saturating_add(size).min(self.len());
        if offset >= end {
            return (0..0, 0);
        }
        let first = self.ends.partition_point(|&e| e <= offset);
        let last = self.ends.partition_point(|&e| e < end);
        let start = first
            .checked_sub(1)
            .map_or(0, |previous| self.ends[previous]);
        (first..last + 1, offset - start)
    }

    pub fn group(&self, index: usize) -> Option<Group> {
        self.groups.get(index).copied()
    }

    /// Takes in record `ordinal`'s row: a group for each IQ field with boxes. Returns the
    /// bytes the index grew by ([`GROUP_BYTES`] a group).
    pub fn take(&mut self, ordinal: u64, meta: &RecordMeta) -> u64 {
        let names = NamesMemo::default();
        let before = self.groups.len();
        for (index, (name, field)) in meta.fields.iter().enumerate() {
            if !has_sigmf_pair(field) {
                continue;
            }
            // A plan that cannot be made shows no boxes in the `.sigmf-meta` (it is logged
            // when the record's tree is built): no line either.
            let Ok(Some(plan)) = sigmf::box_plan(name, field, meta, &names) else {
                continue;
            };
            if plan.count == 0 {
                continue;
            }
            let head = LineHead {
                ordinal,
                record_id: &meta.id,
                scene_id: meta.scene_id.as_deref(),
                field: name,
            };
            let width = line_width(&head, &plan);
            let (Ok(field), Ok(width)) = (u32::try_from(index), u32::try_from(width)) else {
                continue;
            };
            let end = self
                .len()
                .saturating_add(plan.count.saturating_mul(u64::from(width)));
            self.groups.push(Group {
                ordinal,
                field,
                count: plan.count,
                width,
            });
            self.ends.push(end);
        }
        (self.groups.len() - before) as u64 * GROUP_BYTES
    }
}

/// Bytes of every line of `head`'s boxes under `plan`: the longest line any of them can take.
pub fn line_width(head: &LineHead, plan: &BoxPlan) -> usize {
    let numbers: usize = NUMBER_KEYS
        .iter()
        .map(|(key, value)| key.len() + value)
        .sum();
    let label =
        ",\"label\":".len() + labels::max_label_json_len(&plan.names, plan.identity.is_some());
    head.text().len() + numbers + label + "}\n".len()
}

/// The lines of `head`'s boxes: `rows` (the table's boxes, `None` when they could not be
/// read: every number null) converted by `plan`, each padded to `width` bytes; exactly
/// `plan.count * width` bytes (a box of another count is not shown: the row said `count`).
pub fn write_lines(
    head: &LineHead,
    plan: &BoxPlan,
    rows: Option<&[BoxRow]>,
    count: u64,
    width: usize,
) -> Vec<u8> {
    let head_text = head.text();
    let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0).saturating_mul(width));
    let rows = rows.filter(|rows| rows.len() as u64 == count);
    let mut converted = Vec::new();
    let mut refused = Vec::new();
    for (index, row) in rows.unwrap_or_default().iter().enumerate() {
        match labels::convert_box(index as u64, row, &plan.conversion, &plan.names) {
            Ok(annotation) => converted.push(annotation),
            Err(_) => refused.push(labels::label_of(row.identity, &plan.names)),
        }
    }
    sigmf::sort_annotations(&mut converted);
    for annotation in &converted {
        let numbers = [
            annotation.sample_start.to_string(),
            annotation.sample_count.to_string(),
            python_float_repr(annotation.freq_lower_edge),
            python_float_repr(annotation.freq_upper_edge),
        ];
        let line = line(&head_text, Some(&numbers), annotation.label.as_deref());
        push_padded(&mut out, &line, width, &head_text);
    }
    for label in &refused {
        let line = line(&head_text, None, label.as_deref());
        push_padded(&mut out, &line, width, &head_text);
    }
    let unread = count.saturating_sub((converted.len() + refused.len()) as u64);
    for _ in 0..unread {
        let line = line(&head_text, None, None);
        push_padded(&mut out, &line, width, &head_text);
    }
    out
}

/// A line without its padding and closing: numbers (`None`: all null) and label.
fn line(head: &str, numbers: Option<&[String; 4]>, label: Option<&str>) -> String {
    let mut out = head.to_string();
    for (i, (key, _)) in NUMBER_KEYS.iter().enumerate() {
        out.push_str(key);
        out.push_str(numbers.map_or("null", |n| n[i].as_str()));
    }
    out.push_str(",\"label\":");
    match label {
        Some(label) => write_string(label, &mut out),
        None => out.push_str("null"),
    }
    out
}

/// `line`, spaces, `}` and a newline: `width` bytes. A line that would not fit (never, by
/// [`line_width`]) is written with nulls instead, which always fits.
fn push_padded(out: &mut Vec<u8>, line: &str, width: usize, head: &str) {
    let start = out.len();
    let text = if line.len() + 2 <= width {
        line.to_string()
    } else {
        self::line(head, None, None)
    };
    out.extend_from_slice(text.as_bytes());
    out.resize(start + width.saturating_sub(2).max(text.len()), b' ');
    out.extend_from_slice(b"}\n");
    out.truncate(start + width);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::format::json::{parse_object, JsonLimits, Value};
    use crate::format::labels::{ClassNames, Conversion, ExtentColumns, IdentityColumns};

    fn plan(count: u64, names: &[(i64, &str)]) -> BoxPlan {
        let names: ClassNames = names.iter().map(|(k, v)| (*k, Arc::from(*v))).collect();
        BoxPlan {
            extent_field: "labels/boxes/extent".into(),
            columns: ExtentColumns {
                start: 0,
                duration: 1,
                low: 2,
                high: 3,
                width: 4,
            },
            identity: Some((
                "labels/boxes/identity".into(),
                IdentityColumns {
                    class_id: 0,
                    emitter_index: 1,
                    width: 2,
                },
            )),
            names: Arc::new(names),
            conversion: Conversion {
                offset_hz: 1e9,
                rate_ratio: 2.0,
            },
            count,
            slots: count,
            slot_width: 0,
        }
    }

    fn boxed(start: f64, duration: f64, class: i32) -> BoxRow {
        BoxRow {
            start,
            duration,
            low_hz: -5.0,
            high_hz: 5.0,
            identity: Some((class, 0)),
        }
    }

    const HEAD: LineHead = LineHead {
        ordinal: 7,
        record_id: "r\"7",
        scene_id: None,
        field: "p/rx0/iq",
    };

    fn parsed(bytes: &[u8], width: usize) -> Vec<crate::format::json::Object> {
        assert_eq!(bytes.len() % width, 0);
        bytes
            .chunks(width)
            .map(|line| {
                assert_eq!(&line[line.len() - 2..], b"}\n");
                parse_object(line, &JsonLimits::CONTROL).unwrap()
            })
            .collect()
    }

    #[test]
    fn lines_are_sorted_padded_and_null_where_the_meta_leaves_a_box_out() {
        let plan = plan(4, &[(1, "burst"), (2, "a much longer class name")]);
        let width = line_width(&HEAD, &plan);
        let rows = [
            boxed(50.0, 10.0, 1),
            boxed(f64::NAN, 1.0, 2),
            boxed(10.0, 5.0, 9),
            boxed(20.0, 1.0, -1),
        ];
        let bytes = write_lines(&HEAD, &plan, Some(&rows), 4, width);
        assert_eq!(bytes.len(), 4 * width);
        let lines = parsed(&bytes, width);
        let starts: Vec<Value> = lines.iter().map(|l| l["sample_start"].clone()).collect();
        assert_eq!(
            starts,
            [
                Value::from(20u64),
                Value::from(40u64),
                Value::from(100u64),
                Value::Null
            ]
        );
        assert_eq!(lines[0]["label"], Value::from("9"));
        assert_eq!(
            lines[1]["label"],
            Value::Null,
            "-1 without a name: unlabeled"
        );
        assert_eq!(lines[2]["label"], Value::from("burst"));
        assert_eq!(lines[2]["freq_lower_edge_hz"], Value::Float(1e9 - 5.0));
        assert_eq!(lines[2]["sample_count"], Value::from(20u64));
        assert_eq!(lines[3]["label"], Value::from("a much longer class name"));
        assert_eq!(lines[3]["freq_upper_edge_hz"], Value::Null);
        let keys: Vec<&str> = lines[0].iter().map(|(k, _)| k.as_str()).collect();
        let mut want = [
            "ordinal",
            "record_id",
            "scene_id",
            "field",
            "set",
            "sample_start",
            "sample_count",
            "freq_lower_edge_hz",
            "freq_upper_edge_hz",
            "label",
        ];
        want.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(lines[0]["record_id"], Value::from("r\"7"));
    }

    #[test]
    fn the_longest_values_fit_and_unread_boxes_are_null() {
        let plan = plan(2, &[]);
        let width = line_width(&HEAD, &plan);
        // The longest numbers: a start near 2^53 at twice the rate, the longest float repr.
        let mut longest = boxed(4.0e15, 1.0, i32::MIN);
        longest.low_hz = -1.2345678901234567e-300;
        longest.high_hz = 1.2345678901234567e-300;
        let bytes = write_lines(&HEAD, &plan, Some(&[longest, longest]), 2, width);
        let lines = parsed(&bytes, width);
        assert_eq!(
            lines[0]["sample_start"],
            Value::from(8_000_000_000_000_000u64)
        );
        assert_eq!(lines[0]["label"], Value::Null);
        // Boxes that could not be read, or a table of another count: every number null.
        for rows in [None, Some(&[longest][..])] {
            let bytes = write_lines(&HEAD, &plan, rows, 2, width);
            let lines = parsed(&bytes, width);
            assert!(lines.iter().all(|l| l["sample_start"] == Value::Null));
        }
    }

    #[test]
    fn groups_are_found_by_offset() {
        let mut index = LabelIndex::default();
        for (ordinal, count, width) in [(0, 2, 10), (3, 1, 20)] {
            index.groups.push(Group {
                ordinal,
                field: 0,
                count,
                width,
            });
            let end = index.len() + count * u64::from(width);
            index.ends.push(end);
        }
        assert_eq!(index.len(), 40);
        assert_eq!(index.groups_at(0, 5), (0..1, 0));
        assert_eq!(index.groups_at(19, 2), (0..2, 19));
        assert_eq!(index.groups_at(20, 100), (1..2, 0));
        assert_eq!(index.groups_at(40, 1), (0..0, 0));
    }
}
