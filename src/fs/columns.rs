//! `columns/`: every record's value of a field as one file, and every record's row as one
//! JSON line (`docs/MOUNT.md`, "Columns").
//!
//! Why: each file of `records/` costs a reader several FUSE round trips (a lookup per path
//! component, an open, reads, the ioctl Python's `open` sends), tens of microseconds each on a
//! virtual machine, whatever the daemon does. A bulk reader who opens one column file instead
//! pays them once: `np.load("columns/iq.npy", mmap_mode="r")[i:j]` reads records `i..j`.
//!
//! What a column is: a field that every record has, with one dtype and one rank. When every
//! record's shape is the same it is uniform (`.raw`, and `.npy` of shape `(records, *shape)`);
//! otherwise ragged (`.raw`, plus `.offsets.npy`, `records + 1` int64 byte offsets into the
//! `.raw`, and `.shapes.npy`, int64 of shape `(records, rank)`). Fields that are missing from
//! some record, or change dtype or rank, are left out; `README.txt` lists them with the
//! reason, and states the layout.
//!
//! The index ([`ColumnIndex`]) needs every metadata row, so it is built once, in the
//! background ([`super::background`]), on first use of `columns/`; it keeps only what sizes
//! and offsets need: a dtype and shape per uniform column, per record an end offset and a
//! shape for a ragged one, and the end of every record's JSON line. Those grow with the
//! record count, so they are charged to the memory budget as they grow, after a price check
//! of the claimed count. Every size under `columns/` comes from the index: `stat` reads no
//! data shard. Reads go to the records' own bytes through the decoded-record cache, so a
//! column's bytes are the records' files' bytes by construction; [`ColumnIndex::pieces`]
//! says which records a byte range of a column covers.

pub mod arrow;
pub mod label_sets;
pub mod labels;

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::error::FsError;
use super::log_limit::thousands;
use super::record_tree::{Builder, FileView, Node, TreeError};
use crate::budget::Charge;
use crate::dataset::{Dataset, StoredRow};
use crate::format::dtype::DType;
use crate::format::json::{object_to_compact, write_string};
use crate::format::npy;
use crate::format::record::{FieldMeta, RecordMeta};
use arrow::{Kind, Shape, Table, Values};
use labels::{LabelIndex, LABELS_ARROW_FILE, LABELS_FILE};

/// A file of `columns/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnView {
    /// Every record's bytes of the column, concatenated in ordinal order.
    Raw,
    /// A NumPy header of shape `(records, *shape)`, then the `.raw` bytes (uniform columns).
    Npy,
    /// `records + 1` int64 byte offsets into the `.raw` (ragged columns).
    Offsets,
    /// Every record's shape, int64 `(records, rank)` (ragged columns).
    Shapes,
    /// `columns/records.jsonl`.
    Lines,
    /// `columns/labels.jsonl` ([`labels`]).
    Labels,
    /// `columns/labels.arrow` ([`labels`], [`arrow`]).
    LabelsArrow,
    /// `columns/records.arrow` ([`arrow`]).
    RecordsArrow,
    /// `columns/README.txt`.
    Readme,
}

impl FileView for ColumnView {
    fn suffix(self) -> &'static str {
        match self {
            ColumnView::Raw => ".raw",
            ColumnView::Npy => ".npy",
            ColumnView::Offsets => ".offsets.npy",
            ColumnView::Shapes => ".shapes.npy",
            ColumnView::Lines
            | ColumnView::Labels
            | ColumnView::LabelsArrow
            | ColumnView::RecordsArrow
            | ColumnView::Readme => "",
        }
    }
}

/// The name of the JSON-lines file.
pub const LINES_FILE: &str = "records.jsonl";
/// The name of the file saying what the columns are and which fields are left out.
pub const README_FILE: &str = "README.txt";

/// How a column's records lie in its `.raw`.
#[derive(Debug)]
enum Layout {
    /// Every record has this shape, `record_bytes` each.
    Uniform { shape: Vec<u64>, record_bytes: u64 },
    /// Records of one rank: where each record's bytes end, and every shape, flat.
    Ragged {
        rank: usize,
        ends: Vec<u64>,
        shapes: Vec<u64>,
    },
}

/// One column: a field every record has with one dtype and rank.
#[derive(Debug)]
pub struct Column {
    /// The field's name in the records.
    pub name: String,
    pub dtype: DType,
    layout: Layout,
    /// The `.npy` header (uniform) or the `.offsets.npy` and `.shapes.npy` headers (ragged).
    headers: Vec<Vec<u8>>,
}

/// A stretch of one record's field inside a read of a column's `.raw`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub ordinal: u64,
    /// Where the stretch starts within the record's field bytes.
    pub offset: u64,
    pub len: u64,
    /// Whether the stretch runs to the end of the record's field bytes.
    pub ends_record: bool,
}

/// What `columns/` shows, from every metadata row.
#[derive(Debug)]
pub struct ColumnIndex {
    records: u64,
    pub columns: Vec<Column>,
    /// Where each record's line of `records.jsonl` ends (empty when a row was unreadable).
    line_ends: Vec<u64>,
    /// Each record's row fingerprint ([`RecordMeta::fingerprint`]; empty when a row was
    /// unreadable): a column scan's decodes check payloads against them instead of reading
    /// and parsing every row again.
    fingerprints: Arc<[u64]>,
    /// The whole of `records.jsonl`, when it fits in [`LINES_TEXT_SHARE`] of the budget.
    lines_text: Option<Text>,
    /// Where the lines of `labels.jsonl` are.
    pub labels: Arc<LabelIndex>,
    /// Where the batches of `records.arrow` are.
    pub records_arrow: arrow::Layout,
    /// Where each batch of `records.arrow` ends: its last ordinal + 1 (a batch holds
    /// [`arrow::BATCH_ROWS`] records at most, fewer when their texts are long).
    record_batch_ends: Vec<u64>,
    pub readme: Vec<u8>,
    /// The tree of `columns/`: node 0 is `columns/` itself.
    pub nodes: Vec<Node<ColumnView>>,
    _charges: Vec<Charge>,
}

/// The text of `records.jsonl`, with its charges to the memory budget.
#[derive(Debug)]
struct Text {
    bytes: Vec<u8>,
    meter: Meter,
}

/// `records.jsonl` is kept whole when it takes at most this fraction of the memory budget
/// (1/16); a larger one is rebuilt from the rows a read covers. Kept, reading it whole costs
/// one copy per read instead of a row parsed per line.
const LINES_TEXT_SHARE: u64 = 16;

/// The least memory the index takes per record: the end of its JSON line and its row's
/// fingerprint.
pub const MIN_RECORD_BYTES: u64 = 16;
/// The index is charged to the memory budget in steps of this many bytes as it grows.
/// (64 KiB: a small fraction of the smallest budget, so a few meters at once fit in it.)
const CHARGE_STEP: u64 = 64 << 10;

impl Column {
    /// The size of one of the column's files.
    pub fn len(&self, view: ColumnView, records: u64) -> u64 {
        let header = |i: usize| self.headers.get(i).map_or(0, |h| h.len() as u64);
        match view {
            ColumnView::Raw => self.raw_len(records),
            ColumnView::Npy => header(0) + self.raw_len(records),
            ColumnView::Offsets => header(0) + (records + 1) * 8,
            ColumnView::Shapes => match &self.layout {
                Layout::Ragged { shapes, .. } => header(1) + shapes.len() as u64 * 8,
                Layout::Uniform { .. } => 0,
            },
            ColumnView::Lines
            | ColumnView::Labels
            | ColumnView::LabelsArrow
            | ColumnView::RecordsArrow
            | ColumnView::Readme => 0,
        }
    }

    /// The header of a `.npy`, `.offsets.npy` or `.shapes.npy` file.
    pub fn header(&self, view: ColumnView) -> &[u8] {
        let index = usize::from(view == ColumnView::Shapes);
        self.headers.get(index).map_or(&[], Vec::as_slice)
    }

    fn raw_len(&self, records: u64) -> u64 {
        match &self.layout {
            Layout::Uniform { record_bytes, .. } => record_bytes.saturating_mul(records),
            Layout::Ragged { ends, .. } => ends.last().copied().unwrap_or(0),
        }
    }

    /// Where record `ordinal`'s bytes start in the `.raw`.
    fn start_of(&self, ordinal: u64) -> u64 {
        match &self.layout {
            Layout::Uniform { record_bytes, .. } => record_bytes.saturating_mul(ordinal),
            Layout::Ragged { ends, .. } => match ordinal.checked_sub(1) {
                Some(previous) => ends.get(previous as usize).copied().unwrap_or(0),
                None => 0,
            },
        }
    }

    /// The record whose bytes hold `.raw` offset `at` (at < the `.raw`'s length).
    fn record_at(&self, at: u64) -> u64 {
        match &self.layout {
            Layout::Uniform { record_bytes, .. } => at / (*record_bytes).max(1),
            // The first record ending after `at` (records of zero bytes end where they start).
            Layout::Ragged { ends, .. } => ends.partition_point(|&end| end <= at) as u64,
        }
    }

    /// The `.offsets.npy` values (after its header) from byte `offset`, up to `size` bytes.
    pub fn offsets_bytes(&self, records: u64, offset: u64, size: u64) -> Vec<u8> {
        let first = offset / 8;
        let last = (offset.saturating_add(size)).div_ceil(8).min(records + 1);
        let values: Vec<u8> = (first..last)
            .flat_map(|i| self.start_of(i).to_le_bytes())
            .collect();
        trim(values, offset - first * 8, size)
    }

    /// The `.shapes.npy` values (after its header) from byte `offset`, up to `size` bytes.
    pub fn shapes_bytes(&self, offset: u64, size: u64) -> Vec<u8> {
        let Layout::Ragged { shapes, .. } = &self.layout else {
            return Vec::new();
        };
        let first = offset / 8;
        let last = (offset.saturating_add(size))
            .div_ceil(8)
            .min(shapes.len() as u64);
        let values: Vec<u8> = (first..last)
            .flat_map(|i| shapes.get(i as usize).copied().unwrap_or(0).to_le_bytes())
            .collect();
        trim(values, offset - first * 8, size)
    }
}

/// `values` without its first `skip` bytes, at most `size` long.
fn trim(mut values: Vec<u8>, skip: u64, size: u64) -> Vec<u8> {
    values.drain(..(skip as usize).min(values.len()));
    values.truncate(size as usize);
    values
}

impl ColumnIndex {
    /// The record count the index was built for.
    /// Each record's row fingerprint, by ordinal (empty when a row was unreadable).
    pub fn fingerprints(&self) -> &Arc<[u64]> {
        &self.fingerprints
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    /// The whole of `records.jsonl`, if the index keeps it.
    pub fn lines_text(&self) -> Option<&[u8]> {
        self.lines_text.as_ref().map(|t| t.bytes.as_slice())
    }

    /// The length of `records.jsonl`.
    pub fn lines_len(&self) -> u64 {
        self.line_ends.last().copied().unwrap_or(0)
    }

    /// The ordinals of `records.arrow`'s batch `index`.
    pub fn record_batch(&self, index: usize) -> std::ops::Range<u64> {
        let end = self.record_batch_ends.get(index).copied().unwrap_or(0);
        let start = index
            .checked_sub(1)
            .and_then(|previous| self.record_batch_ends.get(previous))
            .copied()
            .unwrap_or(0);
        start..end.max(start)
    }

    /// The records whose lines of `records.jsonl` a read of `size` bytes at `offset` covers,
    /// and where the read starts in the first one's line.
    pub fn lines_at(&self, offset: u64, size: u64) -> (std::ops::Range<u64>, u64) {
        let end = offset.saturating_add(size).min(self.lines_len());
        if offset >= end {
            return (0..0, 0);
        }
        let first = self.line_ends.partition_point(|&e| e <= offset) as u64;
        let last = self.line_ends.partition_point(|&e| e < end) as u64;
        let start = match first.checked_sub(1) {
            Some(previous) => self.line_ends[previous as usize],
            None => 0,
        };
        (first..last + 1, offset - start)
    }

    /// The pieces of records a read of `size` bytes at `offset` of column `column`'s `.raw`
    /// covers, in order; records with no bytes are left out.
    pub fn pieces(&self, column: &Column, offset: u64, size: u64) -> Vec<Piece> {
        let end = offset
            .saturating_add(size)
            .min(column.raw_len(self.records));
        let mut pieces = Vec::new();
        let mut at = offset;
        while at < end {
            let ordinal = column.record_at(at);
            let start = column.start_of(ordinal);
            let next_start = column.start_of(ordinal + 1);
            let record_end = next_start.min(end);
            if ordinal >= self.records || record_end <= at {
                break;
            }
            pieces.push(Piece {
                ordinal,
                offset: at - start,
                len: record_end - at,
                ends_record: record_end == next_start,
            });
            at = record_end;
        }
        pieces
    }

    /// The size of node `node`'s file (0 for directories and unknown nodes).
    pub fn node_len(&self, node: u32) -> u64 {
        match self.nodes.get(node as usize) {
            Some(Node::File { field, view, .. }) => match view {
                ColumnView::Lines => self.lines_len(),
                ColumnView::Labels => self.labels.len(),
                ColumnView::LabelsArrow => self.labels.arrow.len(),
                ColumnView::RecordsArrow => self.records_arrow.len(),
                ColumnView::Readme => self.readme.len() as u64,
                _ => self
                    .columns
                    .get(*field as usize)
                    .map_or(0, |c| c.len(*view, self.records)),
            },
            _ => 0,
        }
    }
}

/// A record's line of `records.jsonl`: the keys of `record.json` but `fields`, compact, in
/// sorted order (the compact form of that object, written without copying the metadata).
pub fn record_line(meta: &RecordMeta, ordinal: u64) -> Vec<u8> {
    record_line_and_metadata(meta, ordinal).0
}

/// [`record_line`], and the length of its metadata's compact text.
fn record_line_and_metadata(meta: &RecordMeta, ordinal: u64) -> (Vec<u8>, usize) {
    let mut line = String::from("{\"id\":");
    write_string(&meta.id, &mut line);
    line.push_str(",\"metadata\":");
    let metadata = object_to_compact(&meta.metadata);
    line.push_str(&metadata);
    line.push_str(&format!(",\"ordinal\":{ordinal},\"scene_id\":"));
    match &meta.scene_id {
        Some(scene) => write_string(scene, &mut line),
        None => line.push_str("null"),
    }
    line.push_str("}\n");
    (line.into_bytes(), metadata.len())
}

/// The name of the Arrow twin of `records.jsonl`.
pub const RECORDS_ARROW_FILE: &str = "records.arrow";

/// The node numbers of `labels.jsonl` and `labels.arrow` in every index that has them (the
/// files are added first, in a fixed order, and checked when the index is built).
pub const LABELS_NODE: u32 = 3;
pub const LABELS_ARROW_NODE: u32 = 4;

/// The columns of `records.arrow`: `records.jsonl`'s keys, the metadata as its JSON text.
pub fn records_table() -> Table {
    Table {
        columns: vec![
            ("ordinal", Kind::U64),
            ("id", Kind::Text),
            ("scene_id", Kind::Text),
            ("metadata", Kind::Text),
        ],
    }
}

/// The columns of a batch of `records.arrow`, filled a record at a time.
#[derive(Debug, Default)]
pub struct RecordColumns {
    ordinal: Vec<Option<u64>>,
    id: Vec<Option<Arc<str>>>,
    scene_id: Vec<Option<Arc<str>>>,
    metadata: Vec<Option<Arc<str>>>,
}

impl RecordColumns {
    pub fn add(&mut self, ordinal: u64, meta: &RecordMeta) {
        self.ordinal.push(Some(ordinal));
        self.id.push(Some(Arc::from(meta.id.as_str())));
        self.scene_id.push(meta.scene_id.as_deref().map(Arc::from));
        self.metadata
            .push(Some(Arc::from(object_to_compact(&meta.metadata))));
    }

    pub fn encode(self) -> Vec<u8> {
        let values = [
            Values::U64(self.ordinal),
            Values::Text(self.id),
            Values::Text(self.scene_id),
            Values::Text(self.metadata),
        ];
        arrow::batch_bytes(&records_table(), &values)
    }
}

/// Refuses a record count whose least index the memory budget cannot hold.
pub fn price(dataset: &Dataset) -> Result<(), FsError> {
    let records = dataset.len();
    let least = records.saturating_mul(MIN_RECORD_BYTES);
    let limit = dataset.memory().capacity();
    if least > limit {
        return Err(FsError::failed(format!(
            "{}: record_count {} needs at least {} bytes of index for columns/, more than the \
             memory budget of {} bytes (--cache-size)",
            dataset.root().snapshot.path,
            thousands(records),
            thousands(least),
            thousands(limit)
        )));
    }
    Ok(())
}

/// A field while the rows are read: still a column candidate.
struct Candidate {
    dtype: DType,
    first_shape: Vec<u64>,
    record_bytes: u64,
    /// Set once a record's shape differs from the first: every record's end and shape.
    ragged: Option<(Vec<u64>, Vec<u64>)>,
}

/// The memory the index holds, charged to the budget a step at a time.
#[derive(Debug, Default)]
struct Meter {
    bytes: u64,
    charges: Vec<Charge>,
}

/// The columns being found, row by row.
struct Scan {
    candidates: Vec<(String, Candidate)>,
    left_out: Vec<(String, String)>,
    line_ends: Vec<u64>,
    fingerprints: Vec<u64>,
    lines_text: Option<Text>,
    labels: LabelIndex,
    /// The shapes of `records.arrow`'s batches; the last one may still grow.
    record_batches: Vec<Shape>,
    /// Where each of them ends (an ordinal).
    record_batch_ends: Vec<u64>,
    meter: Meter,
}

/// A row as the index takes it in, one at a time: the parsed row (the index keeps its
/// fields' dtypes and shapes), its line of `records.jsonl` (and its metadata's length in it)
/// and its fingerprint.
struct Row {
    meta: RecordMeta,
    line: Vec<u8>,
    metadata_len: usize,
    fingerprint: u64,
}

/// Why the index took no more rows.
enum End {
    /// Record `.0`'s row cannot be read: the index shows no column (see [`unreadable`]).
    Unreadable(u64, FsError),
    /// The index cannot go on (it outgrew the memory budget).
    Failed(FsError),
}

/// Reads every row and builds the index (see the module docs). The rows are read ahead on a
/// second thread while this one parses them ([`Dataset::for_each_stored_row`]).
pub fn build(dataset: &Dataset, stop: &AtomicBool) -> Result<ColumnIndex, FsError> {
    let records = dataset.len();
    let mut scan = Scan {
        candidates: Vec::new(),
        left_out: Vec::new(),
        line_ends: Vec::new(),
        fingerprints: Vec::new(),
        lines_text: Some(Text {
            bytes: Vec::new(),
            meter: Meter::default(),
        }),
        labels: LabelIndex::default(),
        record_batches: Vec::new(),
        record_batch_ends: Vec::new(),
        meter: Meter::default(),
    };
    let end = dataset.for_each_stored_row(stop, |read| {
        let (ordinal, row) = match read {
            Ok(stored) => (stored.ordinal(), read_row(dataset, &stored)),
            Err((ordinal, e)) => (ordinal, Err(e.into())),
        };
        match row.map(|row| scan.take(dataset, ordinal, row)) {
            Ok(Ok(())) => ControlFlow::Continue(()),
            Ok(Err(e)) => ControlFlow::Break(End::Failed(e)),
            Err(e) => ControlFlow::Break(End::Unreadable(ordinal, e)),
        }
    });
    match end {
        Some(End::Unreadable(ordinal, e)) => Ok(unreadable(
            records,
            ordinal,
            &e.to_string(),
            scan.meter.charges,
        )),
        Some(End::Failed(e)) => Err(e),
        None if stop.load(Ordering::Relaxed) => Err(FsError::failed("the mount is ending")),
        None => finish(records, scan).map_err(|e| FsError::at("columns/", e)),
    }
}

/// A stored row parsed into what the index takes in (see [`Row`]). Nothing is stripped: the
/// row is taken in and dropped before the next is parsed.
fn read_row(dataset: &Dataset, stored: &StoredRow) -> Result<Row, FsError> {
    let meta = dataset.parse_stored_row(stored)?;
    let (line, metadata_len) = record_line_and_metadata(&meta, stored.ordinal());
    let fingerprint = meta.fingerprint();
    Ok(Row {
        meta,
        line,
        metadata_len,
        fingerprint,
    })
}

impl Meter {
    /// Accounts for `bytes` more, charging the budget before they are allocated.
    fn grow(&mut self, dataset: &Dataset, ordinal: u64, bytes: u64) -> Result<(), FsError> {
        self.bytes = self.bytes.saturating_add(bytes);
        while self.bytes > self.charges.len() as u64 * CHARGE_STEP {
            let charge = dataset.memory().charge(CHARGE_STEP).map_err(|e| {
                let detail = format!(
                    "columns/: the index outgrew the memory budget at record {ordinal} of {} \
                     (--cache-size)",
                    thousands(dataset.len())
                );
                FsError::at(detail, e)
            })?;
            self.charges.push(charge);
        }
        Ok(())
    }
}

impl Scan {
    /// Takes in record `ordinal`'s row.
    fn take(&mut self, dataset: &Dataset, ordinal: u64, row: Row) -> Result<(), FsError> {
        self.meter.grow(dataset, ordinal, MIN_RECORD_BYTES)?;
        if ordinal == 0 {
            self.start(&row.meta);
        } else {
            self.step(dataset, ordinal, &row.meta)?;
        }
        self.add_line(dataset, &row.line);
        self.fingerprints.push(row.fingerprint);
        self.add_record_batch_row(&row);
        let grown = self.labels.take(ordinal, &row.meta);
        self.meter.grow(dataset, ordinal, grown)
    }

    /// Takes in a record's line of `records.jsonl`: its end, and its text while the whole
    /// text fits its share of the budget (it is dropped, charges and all, once it does not).
    fn add_line(&mut self, dataset: &Dataset, line: &[u8]) {
        let end = self.line_ends.last().copied().unwrap_or(0) + line.len() as u64;
        self.line_ends.push(end);
        let share = dataset.memory().capacity() / LINES_TEXT_SHARE;
        let Some(text) = &mut self.lines_text else {
            return;
        };
        // Priced at twice the line: a growing vector may hold twice what it uses.
        let fits = end <= share && text.meter.grow(dataset, 0, 2 * line.len() as u64).is_ok();
        match fits {
            true => text.bytes.extend_from_slice(line),
            false => self.lines_text = None,
        }
    }

    /// Takes a row into the shape of `records.arrow`'s last batch (a new one when it is
    /// full).
    fn add_record_batch_row(&mut self, row: &Row) {
        let texts = [
            row.meta.id.len(),
            row.meta.scene_id.as_deref().map_or(0, str::len),
            row.metadata_len,
        ];
        let row_text = texts.iter().fold(0usize, |a, &b| a.saturating_add(b));
        let full = self
            .record_batches
            .last()
            .is_none_or(|shape| shape.room(row_text) == 0);
        if full {
            self.record_batches
                .push(Shape::empty(records_table().columns.len()));
            self.record_batch_ends
                .push(self.record_batch_ends.last().copied().unwrap_or(0));
        }
        let (Some(shape), Some(end)) = (
            self.record_batches.last_mut(),
            self.record_batch_ends.last_mut(),
        ) else {
            return;
        };
        shape.rows += 1;
        *end += 1;
        for (column, len) in texts.into_iter().enumerate() {
            shape.text_bytes[column + 1] = shape.text_bytes[column + 1].saturating_add(len);
        }
    }

    /// The first row's fields are the candidates.
    fn start(&mut self, meta: &RecordMeta) {
        for (name, field) in &meta.fields {
            match field.byte_len() {
                Ok(record_bytes) => self.candidates.push((
                    name.clone(),
                    Candidate {
                        dtype: field.dtype,
                        first_shape: field.shape.clone(),
                        record_bytes,
                        ragged: None,
                    },
                )),
                Err(e) => self.left_out.push((name.clone(), format!("record 0: {e}"))),
            }
        }
    }

    /// Checks every candidate against record `ordinal`'s row.
    fn step(&mut self, dataset: &Dataset, ordinal: u64, meta: &RecordMeta) -> Result<(), FsError> {
        let mut dropped = Vec::new();
        for (name, candidate) in &mut self.candidates {
            let no_column = match meta.fields.get(name) {
                None => Some(format!("missing from record {ordinal}")),
                Some(field) => candidate.no_column(ordinal, field),
            };
            match no_column {
                None => {
                    let growth = candidate.growth(ordinal, &meta.fields[name]);
                    self.meter.grow(dataset, ordinal, growth)?;
                    candidate.add(ordinal, &meta.fields[name]);
                }
                Some(why) => dropped.push((name.clone(), why)),
            }
        }
        self.candidates
            .retain(|(name, _)| !dropped.iter().any(|(gone, _)| gone == name));
        self.left_out.extend(dropped);
        let known = |name: &String| {
            self.candidates.iter().any(|(n, _)| n == name)
                || self.left_out.iter().any(|(n, _)| n == name)
        };
        let extra: Vec<String> = meta.fields.keys().filter(|n| !known(n)).cloned().collect();
        for name in extra {
            let why = match ordinal {
                1 => "missing from record 0".to_string(),
                _ => format!("missing from records 0 to {}", ordinal - 1),
            };
            self.left_out.push((name, why));
        }
        Ok(())
    }
}

/// Bytes a ragged column holds per record of rank `rank`, priced at twice their size (a
/// growing vector may hold twice what it uses).
fn ragged_bytes(rank: usize) -> u64 {
    2 * 8 * (1 + rank as u64)
}

impl Candidate {
    /// Why record `ordinal`'s field makes this no column, if it does.
    fn no_column(&self, ordinal: u64, field: &FieldMeta) -> Option<String> {
        if field.dtype != self.dtype {
            return Some(format!(
                "dtype changes at record {ordinal}: {} before, {} there",
                self.dtype.numpy_name(),
                field.dtype.numpy_name()
            ));
        }
        if field.shape.len() != self.first_shape.len() {
            return Some(format!(
                "rank changes at record {ordinal}: {} before, {} there",
                self.first_shape.len(),
                field.shape.len()
            ));
        }
        field
            .byte_len()
            .err()
            .map(|e| format!("record {ordinal}: {e}"))
    }

    /// The memory taking record `ordinal`'s field in will add.
    fn growth(&self, ordinal: u64, field: &FieldMeta) -> u64 {
        let per_record = ragged_bytes(self.first_shape.len());
        match self.ragged {
            Some(_) => per_record,
            None if field.shape != self.first_shape => per_record.saturating_mul(ordinal + 1),
            None => 0,
        }
    }

    /// Takes in record `ordinal`'s field (already checked, its memory charged).
    fn add(&mut self, ordinal: u64, field: &FieldMeta) {
        if self.ragged.is_none() && field.shape != self.first_shape {
            // Until now every record had the first shape: their ends and shapes follow.
            let ends = (1..=ordinal).map(|i| i * self.record_bytes).collect();
            let shapes = self.first_shape.repeat(ordinal as usize);
            self.ragged = Some((ends, shapes));
        }
        if let Some((ends, shapes)) = &mut self.ragged {
            let end = ends.last().copied().unwrap_or(0);
            ends.push(end.saturating_add(field.byte_len().unwrap_or(0)));
            shapes.extend_from_slice(&field.shape);
        }
    }
}

/// An index with no columns and no lines: a row could not be read.
fn unreadable(records: u64, ordinal: u64, error: &str, charges: Vec<Charge>) -> ColumnIndex {
    tracing::warn!(
        ordinal,
        error,
        "columns/ shows no column: a metadata row is unreadable"
    );
    let readme = format!(
        "{}\n\nNo column is shown: record {ordinal}'s metadata row cannot be read ({error}), and \
         columns need every row.\n",
        README_HEAD.trim_end()
    );
    let mut builder = Builder::default();
    let _ = builder.add_files(u32::MAX, README_FILE, [ColumnView::Readme]);
    let (nodes, _) = builder.finish();
    ColumnIndex {
        records,
        columns: Vec::new(),
        line_ends: Vec::new(),
        fingerprints: Arc::from(Vec::new()),
        lines_text: None,
        labels: Arc::default(),
        records_arrow: arrow::Layout::default(),
        record_batch_ends: Vec::new(),
        readme: readme.into_bytes(),
        nodes,
        _charges: charges,
    }
}

fn finish(records: u64, mut scan: Scan) -> Result<ColumnIndex, TreeError> {
    scan.labels.finish();
    let mut builder = Builder::default();
    builder.add_files(u32::MAX, README_FILE, [ColumnView::Readme])?;
    builder.add_files(u32::MAX - 1, LINES_FILE, [ColumnView::Lines])?;
    builder.add_files(u32::MAX - 2, LABELS_FILE, [ColumnView::Labels])?;
    builder.add_files(u32::MAX - 3, LABELS_ARROW_FILE, [ColumnView::LabelsArrow])?;
    builder.add_files(u32::MAX - 4, RECORDS_ARROW_FILE, [ColumnView::RecordsArrow])?;
    let mut columns = Vec::with_capacity(scan.candidates.len());
    for (name, candidate) in scan.candidates {
        let column = column(name, candidate, records);
        let views = match column.layout {
            Layout::Uniform { .. } => vec![ColumnView::Npy, ColumnView::Raw],
            Layout::Ragged { .. } => {
                vec![ColumnView::Offsets, ColumnView::Raw, ColumnView::Shapes]
            }
        };
        builder.add_files(columns.len() as u32, &column.name, views)?;
        columns.push(column);
    }
    let (nodes, clashes) = builder.finish();
    let node_is = |node: u32, view| matches!(nodes.get(node as usize), Some(Node::File { view: v, .. }) if *v == view);
    if !node_is(LABELS_NODE, ColumnView::Labels)
        || !node_is(LABELS_ARROW_NODE, ColumnView::LabelsArrow)
    {
        return Err(TreeError::Field {
            name: LABELS_FILE.to_string(),
            detail: "the label tables are not where the mount expects them".to_string(),
        });
    }
    let mut left_out = scan.left_out;
    left_out.extend(clashes.into_iter().map(|path| {
        (
            path,
            "its path clashes with another file of columns/".to_string(),
        )
    }));
    Ok(ColumnIndex {
        records,
        readme: readme(&columns, &left_out).into_bytes(),
        columns,
        line_ends: scan.line_ends,
        fingerprints: Arc::from(scan.fingerprints),
        lines_text: scan.lines_text,
        labels: Arc::new(scan.labels),
        records_arrow: arrow::Layout::new(&records_table(), &scan.record_batches, &[]),
        record_batch_ends: scan.record_batch_ends,
        nodes,
        _charges: scan.meter.charges,
    })
}

fn column(name: String, candidate: Candidate, records: u64) -> Column {
    let dtype = candidate.dtype;
    match candidate.ragged {
        None => {
            let mut shape = vec![records];
            shape.extend_from_slice(&candidate.first_shape);
            Column {
                name,
                dtype,
                headers: vec![npy::encode_header(dtype, &shape)],
                layout: Layout::Uniform {
                    shape: candidate.first_shape,
                    record_bytes: candidate.record_bytes,
                },
            }
        }
        Some((ends, shapes)) => {
            let rank = candidate.first_shape.len();
            Column {
                name,
                dtype,
                headers: vec![
                    npy::encode_header(DType::I64, &[records + 1]),
                    npy::encode_header(DType::I64, &[records, rank as u64]),
                ],
                layout: Layout::Ragged { rank, ends, shapes },
            }
        }
    }
}

const README_HEAD: &str = "\
columns/: every record's value of a field as one file, in ordinal order.

A field that every record has, with one dtype and one rank, is a column:
- <field>.raw: every record's bytes of the field, concatenated in ordinal order
  (the bytes of records/<n>/fields/<field>.raw, one after the other);
- uniform columns (every record has the same shape): <field>.npy, one array of
  shape (records, *shape), e.g. numpy.load(path, mmap_mode=\"r\")[i:j];
- ragged columns: <field>.offsets.npy, int64, records + 1 byte offsets into the
  .raw (record n is raw[offsets[n]:offsets[n+1]]), and <field>.shapes.npy, int64
  of shape (records, rank).
records.jsonl: one JSON line per record with the keys of record.json but
\"fields\" (id, metadata, ordinal, scene_id).
labels.jsonl: one JSON line per label box a .sigmf-meta under records/ shows,
the record's own and each annotation set's, in ordinal, field, set (own first)
and sample_start order; keys ordinal, record_id, scene_id, field (the IQ
field), set (the set's name, null: the record's own), sample_start,
sample_count, freq_lower_edge_hz, freq_upper_edge_hz
(the receiver's samples, absolute Hz: the annotation's core: values) and label
(null without one); a box the .sigmf-meta leaves out has null numbers. Lines
are padded with spaces to a fixed width per field.
labels.arrow: the same rows and columns as an Arrow IPC file (label a
dictionary of class names), e.g. pyarrow.ipc.open_file(pyarrow.memory_map(p)),
polars.read_ipc(p, memory_map=True), pandas.read_feather(p).
records.arrow: records.jsonl's rows and keys as an Arrow IPC file (metadata
as its JSON text).
";

fn readme(columns: &[Column], left_out: &[(String, String)]) -> String {
    let mut text = README_HEAD.to_string();
    text.push_str("\nColumns:\n");
    if columns.is_empty() {
        text.push_str("- none\n");
    }
    for column in columns {
        let shape = match &column.layout {
            Layout::Uniform { shape, .. } => format!("{shape:?}"),
            Layout::Ragged { rank, .. } => format!("ragged, rank {rank}"),
        };
        text.push_str(&format!(
            "- {}: {} {shape}\n",
            column.name,
            column.dtype.numpy_name()
        ));
    }
    text.push_str("\nLeft out:\n");
    if left_out.is_empty() {
        text.push_str("- none\n");
    }
    for (name, why) in left_out {
        text.push_str(&format!("- {name}: {why}\n"));
    }
    text
}
