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

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use super::arrow::{self, Kind, Layout, Shape, Table, Values};

use crate::budget::Charge;
use crate::format::json::{python_float_repr, write_string};
use crate::format::labels::{self, BoxRow};
use crate::format::record::RecordMeta;
use crate::fs::overlay::VisibleSet;
use crate::fs::views::has_sigmf_pair;
use crate::fs::views::sigmf::{self, BoxPlan, NamesMemo};

/// The names of the tables under `columns/`.
pub const LABELS_FILE: &str = "labels.jsonl";
pub const LABELS_ARROW_FILE: &str = "labels.arrow";

/// The columns of both tables, in order (`labels.arrow`'s `label` a dictionary of the class
/// names every labelled field of the dataset declares).
pub fn table() -> Table {
    Table {
        columns: vec![
            ("ordinal", Kind::U64),
            ("record_id", Kind::Text),
            ("scene_id", Kind::Text),
            ("field", Kind::Text),
            ("set", Kind::Text),
            ("sample_start", Kind::U64),
            ("sample_count", Kind::U64),
            ("freq_lower_edge_hz", Kind::F64),
            ("freq_upper_edge_hz", Kind::F64),
            ("label", Kind::Index),
        ],
    }
}

/// Longest text of a `u64`.
const U64_TEXT: usize = 20;
/// The keys of a line, in order, with what follows each key's value.
const NUMBER_KEYS: [(&str, usize); 4] = [
    (",\"sample_start\":", U64_TEXT),
    (",\"sample_count\":", U64_TEXT),
    (",\"freq_lower_edge_hz\":", labels::F64_TEXT),
    (",\"freq_upper_edge_hz\":", labels::F64_TEXT),
];

/// One IQ field's boxes in the table: record `ordinal`'s field number `field` of the tree
/// that shows them (the record's own, `set` 0, or set number `set`'s carrier of the record,
/// counting from 1 in [`LabelIndex::sets`]), `count` lines of `width` bytes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    pub ordinal: u64,
    pub count: u64,
    pub field: u32,
    pub width: u32,
    pub set: u16,
}

/// Bytes the index holds per group: the group and its end offset.
pub const GROUP_BYTES: u64 = std::mem::size_of::<Group>() as u64 + 8;

/// Where every group's lines are, and the batches of `labels.arrow`.
#[derive(Debug, Default)]
pub struct LabelIndex {
    groups: Vec<Group>,
    /// Where each group's lines end in the file.
    ends: Vec<u64>,
    /// The class names of every labelled field, each once, in the order first met: the
    /// dictionary of `labels.arrow`'s `label` column.
    dictionary: Vec<Arc<str>>,
    dictionary_at: HashMap<Arc<str>, i32>,
    /// The batches of `labels.arrow` ([`arrow::BATCH_ROWS`] rows at most, a group's rows
    /// split across batches where they do not fit); the last one may still grow.
    batches: Vec<Batch>,
    /// The file's layout, once every row is in.
    pub arrow: Layout,
    /// Unique among the indexes of this process once finished: what is kept of a table
    /// between reads is kept for the index it came from (a new catalog makes a new one).
    pub serial: u64,
    /// The annotation sets whose boxes the table holds (none: the records' own only).
    pub sets: Vec<Arc<VisibleSet>>,
    /// The memory budget's charges for what the index holds, when it is not part of the
    /// columns' index (which holds their charges).
    charges: Vec<Charge>,
}

/// A batch of `labels.arrow`: the rows of `groups`, but the first `skip` rows of the first
/// group (in earlier batches), `shape.rows` of them.
#[derive(Debug)]
struct Batch {
    groups: Range<usize>,
    skip: u64,
    shape: Shape,
}

/// A field of a record whose boxes a `.sigmf-meta` shows, as the index takes it in: its
/// name, the tree and field number showing it (see [`Group`]) and its boxes' plan.
pub struct Shown<'a> {
    pub name: &'a str,
    pub set: u16,
    pub field: u32,
    pub plan: &'a BoxPlan,
}

/// A [`LineHead`] holding its texts (what a read takes from a record's tree).
#[derive(Debug, Clone)]
pub struct OwnedHead {
    pub ordinal: u64,
    pub record_id: String,
    pub scene_id: Option<String>,
    pub field: String,
    pub set: Option<Arc<str>>,
}

impl OwnedHead {
    pub fn head(&self) -> LineHead<'_> {
        LineHead {
            ordinal: self.ordinal,
            record_id: &self.record_id,
            scene_id: self.scene_id.as_deref(),
            field: &self.field,
            set: self.set.as_deref(),
        }
    }
}

/// What every line of a group starts with: where the box is.
#[derive(Debug, Clone, Copy)]
pub struct LineHead<'a> {
    pub ordinal: u64,
    pub record_id: &'a str,
    pub scene_id: Option<&'a str>,
    pub field: &'a str,
    /// The annotation set's name, `None` for the record's own labels.
    pub set: Option<&'a str>,
}

impl LineHead<'_> {
    /// `{"ordinal":..,"record_id":..,"scene_id":..,"field":..,"set":..`.
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
        out.push_str(",\"set\":");
        match self.set {
            Some(set) => write_string(set, &mut out),
            None => out.push_str("null"),
        }
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

    /// Where group `index`'s lines lie in the file.
    pub fn group_bytes(&self, index: usize) -> Option<Range<u64>> {
        let end = *self.ends.get(index)?;
        let start = index
            .checked_sub(1)
            .map_or(0, |previous| self.ends[previous]);
        Some(start..end)
    }

    /// The rows of `labels.arrow`'s batch `index`: its groups, the rows of the first one that
    /// belong to earlier batches, and its row count.
    pub fn batch_rows(&self, index: usize) -> Option<(Range<usize>, u64, usize)> {
        let batch = self.batches.get(index)?;
        Some((batch.groups.clone(), batch.skip, batch.shape.rows))
    }

    /// Where `label` is in the dictionary of `labels.arrow`.
    pub fn dictionary_index(&self, label: &str) -> Option<i32> {
        self.dictionary_at.get(label).copied()
    }

    /// Holds `charges`, the budget's charges for the index's memory, as long as it lives.
    pub fn keep_charges(&mut self, charges: Vec<Charge>) {
        self.charges = charges;
    }

    /// Lays out `labels.arrow` once every row is in.
    pub fn finish(&mut self) {
        static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        self.serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let shapes: Vec<Shape> = self.batches.iter().map(|b| b.shape.clone()).collect();
        self.arrow = Layout::new(&table(), &shapes, &self.dictionary);
    }

    /// Takes in the last group's `count` rows: into the last batch as far as they fit, the
    /// rest into new ones.
    fn add_to_batch(&mut self, head: &LineHead, count: u64) {
        let group = self.groups.len() - 1;
        let texts = [
            (1, head.record_id.len()),
            (2, head.scene_id.map_or(0, str::len)),
            (3, head.field.len()),
            (4, head.set.map_or(0, str::len)),
        ];
        let row_text = texts.iter().map(|(_, len)| len).sum();
        let mut placed = 0;
        while placed < count {
            let room = self.batches.last().map_or(0, |b| b.shape.room(row_text));
            if room == 0 {
                self.batches.push(Batch {
                    groups: group..group + 1,
                    skip: placed,
                    shape: Shape::empty(table().columns.len()),
                });
                continue;
            }
            let Some(batch) = self.batches.last_mut() else {
                return;
            };
            let rows = usize::try_from(count - placed).map_or(room, |left| left.min(room));
            batch.groups.end = group + 1;
            batch.shape.rows += rows;
            for (column, len) in texts {
                let bytes = &mut batch.shape.text_bytes[column];
                *bytes = bytes.saturating_add(len.saturating_mul(rows));
            }
            placed += rows as u64;
        }
    }

    /// Puts `plan`'s class names in the dictionary; returns the bytes it grew by.
    fn learn_names(&mut self, plan: &BoxPlan) -> u64 {
        let mut grown = 0;
        for name in plan.names.values() {
            if self.dictionary_at.contains_key(name) {
                continue;
            }
            let Ok(index) = i32::try_from(self.dictionary.len()) else {
                break;
            };
            self.dictionary.push(name.clone());
            self.dictionary_at.insert(name.clone(), index);
            grown += 64 + name.len() as u64;
        }
        grown
    }

    /// An index of the records' own labels and those of `sets` (set `k` is
    /// `sets[k - 1]`).
    pub fn with_sets(sets: Vec<Arc<VisibleSet>>) -> LabelIndex {
        LabelIndex {
            sets,
            ..LabelIndex::default()
        }
    }

    /// Takes in record `ordinal`'s row: a group for each IQ field with boxes. Returns the
    /// bytes the index grew by ([`GROUP_BYTES`] a group).
    pub fn take(&mut self, ordinal: u64, meta: &RecordMeta) -> u64 {
        let plans = own_plans(meta);
        let mut shown = own_shown(&plans);
        self.take_shown(ordinal, meta, &mut shown)
    }

    /// Takes in the fields of record `ordinal` (its row `meta`) that show boxes, its own and
    /// its sets': a group for each with boxes, sorted by field name, then set (own first).
    /// Returns the bytes the index grew by.
    pub fn take_shown(&mut self, ordinal: u64, meta: &RecordMeta, shown: &mut [Shown]) -> u64 {
        shown.sort_by(|a, b| (a.name, a.set).cmp(&(b.name, b.set)));
        let before = self.groups.len();
        let mut grown = 0;
        for shown in shown.iter().filter(|s| s.plan.count > 0) {
            let set = match usize::from(shown.set).checked_sub(1) {
                None => None,
                Some(k) => match self.sets.get(k) {
                    Some(set) => Some(set.name.clone()),
                    None => continue,
                },
            };
            let head = LineHead {
                ordinal,
                record_id: &meta.id,
                scene_id: meta.scene_id.as_deref(),
                field: shown.name,
                set: set.as_deref(),
            };
            let Ok(width) = u32::try_from(line_width(&head, shown.plan)) else {
                continue;
            };
            let count = shown.plan.count;
            let end = self
                .len()
                .saturating_add(count.saturating_mul(u64::from(width)));
            self.groups.push(Group {
                ordinal,
                count,
                field: shown.field,
                width,
                set: shown.set,
            });
            self.ends.push(end);
            self.add_to_batch(&head, count);
            grown += self.learn_names(shown.plan);
        }
        grown + (self.groups.len() - before) as u64 * GROUP_BYTES
    }
}

/// The [`own_plans`] as the index takes them in.
pub fn own_shown<'a>(plans: &'a [(u32, &'a str, BoxPlan)]) -> Vec<Shown<'a>> {
    plans
        .iter()
        .map(|(field, name, plan)| Shown {
            name,
            set: 0,
            field: *field,
            plan,
        })
        .collect()
}

/// The plans of the boxes `meta`'s own fields show, with each field's number and name. A
/// plan that cannot be made shows no boxes in the `.sigmf-meta` (it is logged when the
/// record's tree is built): no line either.
pub fn own_plans(meta: &RecordMeta) -> Vec<(u32, &str, BoxPlan)> {
    let names = NamesMemo::default();
    let mut plans = Vec::new();
    for (index, (name, field)) in meta.fields.iter().enumerate() {
        if !has_sigmf_pair(field) {
            continue;
        }
        let (Ok(Some(plan)), Ok(index)) = (
            sigmf::box_plan(name, field, meta, &names),
            u32::try_from(index),
        ) else {
            continue;
        };
        plans.push((index, name.as_str(), plan));
    }
    plans
}

/// Bytes of every line of `head`'s boxes under `plan`: the longest line any of them can take.
pub fn line_width(head: &LineHead, plan: &BoxPlan) -> usize {
    let numbers: usize = NUMBER_KEYS
        .iter()
        .map(|(key, value)| key.len() + value)
        .sum();
    let label = ",\"label\":".len() + labels::max_label_json_len(&plan.names);
    head.text().len() + numbers + label + "}\n".len()
}

/// A group's rows as the tables show them, with what each of its lines starts with.
#[derive(Debug)]
pub struct GroupRows {
    pub head: OwnedHead,
    pub rows: Vec<TableRow>,
}

impl GroupRows {
    /// Bytes it holds (its rows; the labels are the plan's, shared).
    pub fn heap_bytes(&self) -> u64 {
        let head = self.head.record_id.len()
            + self.head.scene_id.as_ref().map_or(0, String::len)
            + self.head.field.len();
        (self.rows.len() * std::mem::size_of::<TableRow>() + head) as u64
    }
}

/// One box of the tables: its numbers in the receiver's terms (`None`: the `.sigmf-meta`
/// leaves it out, or it could not be read) and its label.
#[derive(Debug, Clone, PartialEq)]
pub struct TableRow {
    pub numbers: Option<(u64, u64, f64, f64)>,
    pub label: Option<Arc<str>>,
}

/// The table rows of a field's boxes: `rows` (the table's boxes, `None` when they could not
/// be read) converted by `plan`, sorted as the `.sigmf-meta` sorts them, then the boxes it
/// leaves out in table order; exactly `count` rows (a table of another count is not shown:
/// the row said `count`).
pub fn table_rows(plan: &BoxPlan, rows: Option<&[BoxRow]>, count: u64) -> Vec<TableRow> {
    let rows = rows.filter(|rows| rows.len() as u64 == count);
    let mut converted = Vec::new();
    let mut refused = Vec::new();
    for (index, row) in rows.unwrap_or_default().iter().enumerate() {
        match labels::convert_box(index as u64, row, &plan.conversion, &plan.names) {
            Ok(annotation) => converted.push(annotation),
            Err(_) => refused.push(TableRow {
                numbers: None,
                label: labels::label_of(row.identity, &plan.names),
            }),
        }
    }
    sigmf::sort_annotations(&mut converted);
    let mut out: Vec<TableRow> = converted
        .into_iter()
        .map(|a| TableRow {
            numbers: Some((
                a.sample_start,
                a.sample_count,
                a.freq_lower_edge,
                a.freq_upper_edge,
            )),
            label: a.label,
        })
        .collect();
    out.extend(refused);
    let unread = usize::try_from(count)
        .unwrap_or(0)
        .saturating_sub(out.len());
    out.extend((0..unread).map(|_| TableRow {
        numbers: None,
        label: None,
    }));
    out
}

/// The lines of `head`'s boxes (their [`table_rows`]), each padded to `width` bytes.
pub fn write_lines(head: &LineHead, rows: &[TableRow], width: usize) -> Vec<u8> {
    let head_text = head.text();
    let mut out = Vec::with_capacity(rows.len().saturating_mul(width));
    for row in rows {
        let numbers = row.numbers.map(|(start, count, lower, upper)| {
            [
                start.to_string(),
                count.to_string(),
                python_float_repr(lower),
                python_float_repr(upper),
            ]
        });
        let line = line(&head_text, numbers.as_ref(), row.label.as_deref());
        push_padded(&mut out, &line, width, &head_text);
    }
    out
}

/// The columns of a batch of `labels.arrow`, filled one group at a time.
#[derive(Debug, Default)]
pub struct BatchColumns {
    ordinal: Vec<Option<u64>>,
    record_id: Vec<Option<Arc<str>>>,
    scene_id: Vec<Option<Arc<str>>>,
    field: Vec<Option<Arc<str>>>,
    set: Vec<Option<Arc<str>>>,
    start: Vec<Option<u64>>,
    count: Vec<Option<u64>>,
    lower: Vec<Option<f64>>,
    upper: Vec<Option<f64>>,
    label: Vec<Option<i32>>,
}

impl BatchColumns {
    /// Adds a group's rows.
    pub fn add(&mut self, head: &LineHead, rows: &[TableRow], index: &LabelIndex) {
        let id: Arc<str> = Arc::from(head.record_id);
        let scene: Option<Arc<str>> = head.scene_id.map(Arc::from);
        let field: Arc<str> = Arc::from(head.field);
        let set: Option<Arc<str>> = head.set.map(Arc::from);
        for row in rows {
            self.ordinal.push(Some(head.ordinal));
            self.record_id.push(Some(id.clone()));
            self.scene_id.push(scene.clone());
            self.field.push(Some(field.clone()));
            self.set.push(set.clone());
            self.start.push(row.numbers.map(|n| n.0));
            self.count.push(row.numbers.map(|n| n.1));
            self.lower.push(row.numbers.map(|n| n.2));
            self.upper.push(row.numbers.map(|n| n.3));
            let label = row.label.as_deref().and_then(|l| index.dictionary_index(l));
            self.label.push(label);
        }
    }

    /// The batch's message.
    pub fn encode(self) -> Vec<u8> {
        let values = [
            Values::U64(self.ordinal),
            Values::Text(self.record_id),
            Values::Text(self.scene_id),
            Values::Text(self.field),
            Values::Text(self.set),
            Values::U64(self.start),
            Values::U64(self.count),
            Values::F64(self.lower),
            Values::F64(self.upper),
            Values::Index(self.label),
        ];
        arrow::batch_bytes(&table(), &values)
    }
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
        set: None,
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
        let bytes = write_lines(&HEAD, &table_rows(&plan, Some(&rows), 4), width);
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
        assert_eq!(
            lines[0]["label"],
            Value::Null,
            "class 9 has no name: unlabeled"
        );
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
        let bytes = write_lines(
            &HEAD,
            &table_rows(&plan, Some(&[longest, longest]), 2),
            width,
        );
        let lines = parsed(&bytes, width);
        assert_eq!(
            lines[0]["sample_start"],
            Value::from(8_000_000_000_000_000u64)
        );
        assert_eq!(lines[0]["label"], Value::Null);
        // Boxes that could not be read, or a table of another count: every number null.
        for rows in [None, Some(&[longest][..])] {
            let bytes = write_lines(&HEAD, &table_rows(&plan, rows, 2), width);
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
                count,
                field: 0,
                width,
                set: 0,
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
