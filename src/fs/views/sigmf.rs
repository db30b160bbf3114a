//! The SigMF documents of a record: each IQ field's `.sigmf-meta` (with its label boxes as
//! annotations) and the collections tying a record's or a scene's recordings together.
//!
//! Why fixed-width slots: `stat` must give a `.sigmf-meta`'s exact size from the metadata row
//! alone, but the box numbers are in the data shard. The row gives the box count (the extent's
//! shape) and everything a box's text can hold (the longest number texts, the class names), so
//! each box gets a slot of the longest text any box could have, filled on read and padded with
//! JSON whitespace. Present annotations fill the first slots, sorted by `core:sample_start` as
//! SigMF requires; a box that cannot be converted leaves a slot of spaces (and a log line). A
//! collection's size is fixed the same way: a SHA-512 is always 128 hex digits.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use sha2::{Digest, Sha512};

use super::sample_rate;
use crate::format::json::{self, Object, Value};
use crate::format::labels::{
    self, Annotation, BoxRow, ClassNames, Conversion, ExtentColumns, IdentityColumns, LabelError,
    Membership, ReceiverFrame,
};
use crate::format::record::{FieldMeta, LazyRow, RecordMeta};
use crate::format::sigmf::{Origin, LAYOUT_KEYS};
use crate::fs::error::FsError;
use crate::fs::log_limit;
use crate::interrupt;

/// The extension namespace the documents declare for the record's identity.
pub const NAMESPACE: &str = "sdsfs";
const NAMESPACE_VERSION: &str = "1.0.0";
const SIGMF_VERSION: &str = "1.2.0";
/// What precedes each annotation in its slot (a comma may follow it).
const SLOT_LEAD: &str = "\n    ";
/// A SHA-512 in hex.
const HASH_HEX: usize = 128;
/// Largest `.sigmf-meta` with boxes, in bytes: the slots beyond it are left out (the document's
/// global says how many, `sdsfs:annotations_left_out`). 16 MiB holds about 60,000 boxes with
/// class names of ordinary length (a slot is about 280 bytes), more than a person or a viewer
/// reads in one file, and it is what a read renders and keeps charged to the memory budget
/// (the default `--cache-size` of 1 GiB holds 64 of them).
pub const MAX_META_BYTES: u64 = 16 << 20;
/// Room kept for the note a cut document's global carries.
const NOTE_RESERVE: u64 = 512;
/// Boxes converted or written between two looks at whether the requester was interrupted
/// (a look reads `/proc`; a box takes well under a microsecond).
const INTERRUPT_EVERY: u64 = 4096;

/// Where a record sits: what a document's `global` (or `collection`) names.
#[derive(Debug, Clone, Copy)]
pub struct Provenance<'a> {
    pub dataset_id: &'a str,
    pub snapshot_id: &'a str,
    pub record_id: &'a str,
    pub ordinal: u64,
}

/// Where a receiver's boxes are and how they become absolute: all from the row.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxPlan {
    pub extent_field: String,
    pub columns: ExtentColumns,
    pub identity: Option<(String, IdentityColumns)>,
    /// Shared by every field labelled by the same identity field.
    pub names: Arc<ClassNames>,
    pub conversion: Conversion,
    /// Boxes in the table.
    pub count: u64,
    /// Slots of the document: the boxes that fit in [`MAX_META_BYTES`] (at most `count`).
    pub slots: u64,
    /// Bytes of one slot.
    pub slot_width: u64,
}

/// The fields of a record, found by name: where a field's `.sigmf-meta` looks for its labels
/// (a row's [`RecordMeta`], a kept row, or a tree holding one).
pub trait FieldsOf {
    fn field_named(&self, name: &str) -> Option<FieldRef<'_>>;
}

/// A field found by [`FieldsOf::field_named`]: borrowed from a model held whole, or parsed
/// from a kept row (and shared while a tree is built: [`RowFields`]).
pub enum FieldRef<'a> {
    Borrowed(&'a FieldMeta),
    Parsed(Rc<FieldMeta>),
}

impl std::ops::Deref for FieldRef<'_> {
    type Target = FieldMeta;

    fn deref(&self) -> &FieldMeta {
        match self {
            FieldRef::Borrowed(field) => field,
            FieldRef::Parsed(field) => field,
        }
    }
}

impl FieldsOf for RecordMeta {
    fn field_named(&self, name: &str) -> Option<FieldRef<'_>> {
        self.fields.get(name).map(FieldRef::Borrowed)
    }
}

/// A kept row's fields, found by name while its tree is built: the last few found are kept,
/// as thousands of fields under one labels prefix look up the same extent and identity fields
/// (parsing an identity field of many class names for each would be quadratic).
pub struct RowFields<'a> {
    row: &'a LazyRow,
    recent: RefCell<Vec<(usize, Rc<FieldMeta>)>>,
}

/// How many looked-up fields [`RowFields`] keeps: an extent and an identity field, twice.
const RECENT_FIELDS: usize = 4;

impl<'a> RowFields<'a> {
    pub fn new(row: &'a LazyRow) -> RowFields<'a> {
        RowFields {
            row,
            recent: RefCell::new(Vec::with_capacity(RECENT_FIELDS)),
        }
    }

    /// Whether the row has a field called `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.row.field_index(name).is_some()
    }
}

impl FieldsOf for RowFields<'_> {
    fn field_named(&self, name: &str) -> Option<FieldRef<'_>> {
        let index = self.row.field_index(name)?;
        let mut recent = self.recent.borrow_mut();
        if let Some((_, field)) = recent.iter().find(|(at, _)| *at == index) {
            return Some(FieldRef::Parsed(field.clone()));
        }
        let field = Rc::new(self.row.field(index).ok()?);
        if recent.len() == RECENT_FIELDS {
            recent.remove(0);
        }
        recent.push((index, field.clone()));
        Some(FieldRef::Parsed(field))
    }
}

/// The class names of each identity field, read once per tree however many fields its boxes
/// label, with their longest annotation text ([`labels::max_annotation_len`]): names from a
/// row of many megabytes, shared by thousands of fields, are one copy and one scan.
#[derive(Default)]
pub struct NamesMemo(RefCell<HashMap<String, (Arc<ClassNames>, usize)>>);

impl NamesMemo {
    fn of(&self, identity_name: &str, identity: &FieldMeta) -> (Arc<ClassNames>, usize) {
        if let Some(known) = self.0.borrow().get(identity_name) {
            return known.clone();
        }
        let names = labels::class_names(&identity.metadata);
        let text = labels::max_annotation_len(&names, true);
        let named = (Arc::new(names), text);
        self.0
            .borrow_mut()
            .insert(identity_name.to_string(), named.clone());
        named
    }
}

/// Where a `.sigmf-meta` is written from: its field, the record whose labels it shows, and
/// where the record sits.
#[derive(Clone, Copy)]
pub struct MetaSource<'a> {
    pub name: &'a str,
    pub field: &'a FieldMeta,
    pub record: &'a dyn FieldsOf,
    pub at: &'a Provenance<'a>,
}

/// A `.sigmf-meta` whose size is known before its boxes are read. Its text around the boxes
/// is written again when the document is rendered (from the same row, so the same text): a
/// record of thousands of IQ fields would otherwise keep a document's worth of text for each.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaLayout {
    /// Bytes of the document up to and including `"annotations": [` (and the imported
    /// annotations, when it shows them).
    prefix_len: u64,
    /// Bytes from the closing `]` of the annotations on.
    suffix_len: u64,
    metadata_only: bool,
    /// The annotations of the SigMF document the field was imported from, when the document
    /// shows them instead of its boxes' slots ([`crate::format::sigmf`]).
    imported: Option<Shown>,
    /// Boxed: most fields have none, and a record of thousands of fields keeps a layout for
    /// each.
    pub boxes: Option<Box<BoxPlan>>,
}

/// The tensors of a receiver's boxes, as read from the record.
pub struct BoxTensors {
    pub extent: Bytes,
    pub identity: Option<Bytes>,
}

/// How many of a field's imported annotations its document shows: the first `shown` by
/// sample start, of `total`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Shown {
    shown: u64,
    total: u64,
}

/// A document's text around its annotations.
struct Texts {
    prefix: Vec<u8>,
    suffix: Vec<u8>,
}

impl MetaLayout {
    /// The layout of field `name`'s `.sigmf-meta` in record `record` (the caller checked that
    /// the field has a SigMF pair). Boxes that cannot be placed are logged and left out.
    pub fn build(
        name: &str,
        field: &FieldMeta,
        record: &dyn FieldsOf,
        at: &Provenance,
        names: &NamesMemo,
    ) -> MetaLayout {
        let source = MetaSource {
            name,
            field,
            record,
            at,
        };
        MetaLayout::build_with(source, false, names)
    }

    /// A metadata-only document (`core:metadata_only`, no `.sigmf-data` beside it) for field
    /// `name` of the source record, carrying the boxes of `labels` (an annotation set's
    /// carrier); `None` when `labels` has no boxes for that field.
    pub fn build_from_labels(
        name: &str,
        field: &FieldMeta,
        labels: &dyn FieldsOf,
        at: &Provenance,
        names: &NamesMemo,
    ) -> Option<MetaLayout> {
        extent_field_for(name, labels)?;
        let source = MetaSource {
            name,
            field,
            record: labels,
            at,
        };
        let layout = MetaLayout::build_with(source, true, names);
        layout.boxes.is_some().then_some(layout)
    }

    fn build_with(source: MetaSource, metadata_only: bool, names: &NamesMemo) -> MetaLayout {
        let mut boxes = match box_plan(source.name, source.field, source.record, names) {
            Ok(plan) => plan,
            Err(why) => {
                log_left_out(source.at.ordinal, source.name, &why.to_string());
                None
            }
        };
        let origin = match Origin::of_field(&source.field.metadata) {
            Ok(origin) => origin,
            Err(why) => {
                log_origin_ignored(source.at.ordinal, source.name, &why.to_string());
                None
            }
        };
        // The room in the cap beside the document's other text and its note.
        let room = || {
            let text = document_text(source, metadata_only, origin.as_ref(), None);
            MAX_META_BYTES.saturating_sub(text.len() as u64 + NOTE_RESERVE)
        };
        let imported = match origin.as_ref().filter(|_| !metadata_only) {
            Some(origin) => Some(imported_that_fit(origin, room())),
            None => {
                if let Some(plan) = boxes.as_mut() {
                    plan.slots = plan.count.min(room() / plan.slot_width.max(1));
                }
                None
            }
        };
        let mut layout = MetaLayout {
            prefix_len: 0,
            suffix_len: 0,
            metadata_only,
            imported,
            boxes: boxes.map(Box::new),
        };
        let texts = layout.texts(source);
        layout.prefix_len = texts.prefix.len() as u64;
        layout.suffix_len = texts.suffix.len() as u64;
        layout
    }

    /// The annotations left out of the document by its size cap, if any.
    fn cut(&self) -> Option<Cut> {
        let (shown, total) = match (&self.imported, &self.boxes) {
            (Some(imported), _) => (imported.shown, imported.total),
            (None, Some(plan)) => (plan.slots, plan.count),
            (None, None) => return None,
        };
        (shown < total).then(|| Cut {
            shown,
            left_out: total - shown,
        })
    }

    /// The document's text around its slots, written from `source`: with imported
    /// annotations, the prefix ends with them.
    fn texts(&self, source: MetaSource) -> Texts {
        // The field's metadata was read when the layout was built (its error logged then).
        let origin = Origin::of_field(&source.field.metadata).ok().flatten();
        let text = document_text(source, self.metadata_only, origin.as_ref(), self.cut());
        let marker = "\"annotations\": [";
        let split = text.find(marker).map_or(0, |i| i + marker.len());
        let (prefix, suffix) = text.split_at(split);
        let mut prefix = prefix.to_string();
        if let (Some(origin), Some(imported)) = (&origin, &self.imported) {
            write_imported(&mut prefix, origin, imported.shown);
        }
        Texts {
            prefix: prefix.into_bytes(),
            suffix: format!("\n  {}", suffix.trim_start()).into_bytes(),
        }
    }

    /// The document's exact size (never 0).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u64 {
        let slots = self.document_slots().map_or(0, |b| b.slots * b.slot_width);
        self.prefix_len + slots + self.suffix_len
    }

    /// The box plan whose slots the document has: none when it shows imported annotations.
    fn document_slots(&self) -> Option<&BoxPlan> {
        self.boxes.as_deref().filter(|_| self.imported.is_none())
    }

    /// Bytes of the document's text around its annotations.
    pub fn text_len(&self) -> u64 {
        self.prefix_len + self.suffix_len
    }

    /// Bytes the layout holds beside its slot: its plan and the plan's field names (its class
    /// names are shared, [`NamesMemo`], and counted once by whoever holds them).
    pub fn held_bytes(&self) -> u64 {
        self.boxes.as_ref().map_or(0, |plan| {
            let identity = plan.identity.as_ref().map_or(0, |(name, _)| name.len());
            json::text_heap_bytes(std::mem::size_of::<BoxPlan>())
                + json::text_heap_bytes(plan.extent_field.len())
                + json::text_heap_bytes(identity)
        })
    }

    /// The box tensors the document needs, if it has boxes in slots.
    pub fn needs_tensors(&self) -> Option<&BoxPlan> {
        self.document_slots().filter(|b| b.count > 0)
    }

    /// The boxes drawn for the field (its pictures), if it has any: those of its slots, or,
    /// when the document shows imported annotations, the boxes made from them.
    pub fn drawn_boxes(&self) -> Option<&BoxPlan> {
        self.boxes.as_deref().filter(|b| b.count > 0)
    }

    /// The document written from `source` (what the layout was built from), with the boxes
    /// read from `tensors` (`None` when it has none); exactly [`MetaLayout::len`] bytes. Ends
    /// with [`FsError::Interrupted`] when the requester is.
    pub fn render(
        &self,
        tensors: Option<&BoxTensors>,
        source: MetaSource,
    ) -> Result<Vec<u8>, FsError> {
        let len = usize::try_from(self.len()).map_err(|_| FsError::failed("document too large"))?;
        let texts = self.texts(source);
        if (texts.prefix.len() as u64, texts.suffix.len() as u64)
            != (self.prefix_len, self.suffix_len)
        {
            return Err(FsError::failed(
                "a .sigmf-meta's text changed since its size was given",
            ));
        }
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&texts.prefix);
        if let Some(plan) = self.needs_tensors() {
            let converted = match tensors {
                Some(tensors) => converted_boxes(plan, tensors, source.at.ordinal, source.name)?,
                None => Vec::new(),
            };
            write_slots(&mut out, plan, &converted)?;
        }
        out.extend_from_slice(&texts.suffix);
        Ok(out)
    }
}

/// The whole document without its annotations (pretty JSON).
fn document_text(
    source: MetaSource,
    metadata_only: bool,
    origin: Option<&Origin>,
    cut: Option<Cut>,
) -> String {
    let at = DocumentAt {
        name: source.name,
        field: source.field,
        at: source.at,
        origin,
    };
    json::object_to_pretty(&meta_document(at, metadata_only, cut))
}

/// How many of `origin`'s annotations fit in `room` bytes, as [`write_imported`] writes them.
fn imported_that_fit(origin: &Origin, room: u64) -> Shown {
    let mut used = 0u64;
    let mut shown = 0u64;
    for (_, annotation) in &origin.annotations {
        used = used.saturating_add(imported_len(annotation));
        if used > room {
            break;
        }
        shown += 1;
    }
    Shown {
        shown,
        total: origin.annotations.len() as u64,
    }
}

/// Bytes [`write_imported`] writes for one annotation (a comma counted for each).
fn imported_len(annotation: &Object) -> u64 {
    (SLOT_LEAD.len() + json::object_to_compact(annotation).len() + 1) as u64
}

/// The first `shown` of `origin`'s annotations (sorted by sample start), each on its own line
/// after a comma but the first, as the slots are written.
fn write_imported(out: &mut String, origin: &Origin, shown: u64) {
    for (index, (_, annotation)) in origin.annotations.iter().enumerate() {
        if index as u64 >= shown {
            break;
        }
        if index > 0 {
            out.push(',');
        }
        out.push_str(SLOT_LEAD);
        out.push_str(&json::object_to_compact(annotation));
    }
}

/// Why a field's boxes are left out of its `.sigmf-meta` (logged, never an error of the file).
#[derive(Debug, thiserror::Error)]
pub enum LeftOut {
    /// A labels field breaks a rule of the box labels.
    #[error("{field}: {source}")]
    Label {
        field: String,
        #[source]
        source: LabelError,
    },
    /// The boxes' frame cannot be put in the receiver's terms.
    #[error("{field}: {why}")]
    Unconvertible { field: String, why: String },
    #[error("too many boxes")]
    TooMany,
    #[error("the box table's size overflows")]
    Overflow,
    #[error("{got} bytes where the shape needs {want}")]
    WrongSize { got: usize, want: usize },
}

fn log_left_out(ordinal: u64, field: &str, why: &str) {
    if log_limit::admit("sigmf-labels") {
        tracing::warn!(ordinal, field, "labels left out of the .sigmf-meta: {why}");
    }
}

fn log_origin_ignored(ordinal: u64, field: &str, why: &str) {
    if log_limit::admit("sigmf-origin") {
        tracing::warn!(
            ordinal,
            field,
            "imported SigMF document not shown in the .sigmf-meta: {why}"
        );
    }
}

/// Annotations of `converted` (sorted) in the plan's slots: the first [`BoxPlan::slots`]
/// that fit, each after a comma but the first, the rest of every slot spaces.
fn write_slots(out: &mut Vec<u8>, plan: &BoxPlan, converted: &[Annotation]) -> Result<(), FsError> {
    let width = usize::try_from(plan.slot_width).map_err(|_| FsError::failed("slot too wide"))?;
    let fits = width.saturating_sub(SLOT_LEAD.len() + 1);
    let mut shown = converted
        .iter()
        .map(labels::render_annotation)
        .filter(|text| text.len() <= fits);
    let mut filled = 0u64;
    for slot in 0..plan.slots {
        if slot % INTERRUPT_EVERY == 0 {
            interrupt::check()?;
        }
        let start = out.len();
        if let Some(text) = shown.next() {
            if filled > 0 {
                out.push(b',');
            }
            out.extend_from_slice(SLOT_LEAD.as_bytes());
            out.extend_from_slice(text.as_bytes());
            filled += 1;
        }
        out.resize(start + width, b' ');
    }
    Ok(())
}

/// Every convertible box in absolute terms, sorted by sample start (what the `.sigmf-meta`
/// and the pictures show); boxes left out are logged once per call. Ends early when the
/// requester is interrupted.
pub fn converted_boxes(
    plan: &BoxPlan,
    tensors: &BoxTensors,
    ordinal: u64,
    name: &str,
) -> Result<Vec<Annotation>, FsError> {
    let rows = match box_rows(plan, tensors) {
        Ok(rows) => rows,
        Err(why) => {
            log_left_out(ordinal, name, &format!("{}: {why}", plan.extent_field));
            return Ok(Vec::new());
        }
    };
    let mut converted: Vec<Annotation> = Vec::with_capacity(rows.len());
    let mut refused = 0usize;
    let mut first_refused: Option<LabelError> = None;
    for (index, row) in rows.iter().enumerate() {
        if index as u64 % INTERRUPT_EVERY == 0 {
            interrupt::check()?;
        }
        match labels::convert_box(index as u64, row, &plan.conversion, &plan.names) {
            Ok(annotation) => converted.push(annotation),
            Err(e) => {
                refused += 1;
                first_refused.get_or_insert(e);
            }
        }
    }
    // One line per document, not per box: a table of a million NaNs is one problem.
    if let Some(first) = first_refused {
        let why = format!(
            "{}: {refused} of {} boxes left out, the first: {first}",
            plan.extent_field,
            rows.len()
        );
        log_left_out(ordinal, name, &why);
    }
    sort_annotations(&mut converted);
    Ok(converted)
}

/// Sorts annotations as a `.sigmf-meta` lists them: by `core:sample_start`, then count, lower
/// and upper edge (stably).
pub fn sort_annotations(annotations: &mut [Annotation]) {
    annotations.sort_by(|a, b| {
        (a.sample_start, a.sample_count)
            .cmp(&(b.sample_start, b.sample_count))
            .then(a.freq_lower_edge.total_cmp(&b.freq_lower_edge))
            .then(a.freq_upper_edge.total_cmp(&b.freq_upper_edge))
    });
}

/// The boxes' numbers from their tensors' little-endian bytes.
pub fn box_rows(plan: &BoxPlan, tensors: &BoxTensors) -> Result<Vec<BoxRow>, LeftOut> {
    let columns = plan.columns;
    let count = usize::try_from(plan.count).map_err(|_| LeftOut::TooMany)?;
    let extent = numbers(&tensors.extent, count, columns.width, f64::from_le_bytes)?;
    let identity = match (&plan.identity, &tensors.identity) {
        (Some((_, cols)), Some(bytes)) => Some((
            numbers(bytes, count, cols.width, i32::from_le_bytes)?,
            *cols,
        )),
        _ => None,
    };
    Ok((0..count)
        .map(|i| {
            let row = &extent[i * columns.width..(i + 1) * columns.width];
            BoxRow {
                start: row[columns.start],
                duration: row[columns.duration],
                low_hz: row[columns.low],
                high_hz: row[columns.high],
                identity: identity.as_ref().map(|(values, cols)| {
                    let ids = &values[i * cols.width..(i + 1) * cols.width];
                    (ids[cols.class_id], ids[cols.emitter_index])
                }),
            }
        })
        .collect())
}

/// `rows * width` little-endian numbers of `N` bytes each, or why the bytes do not hold them.
fn numbers<T, const N: usize>(
    bytes: &[u8],
    rows: usize,
    width: usize,
    from_le: fn([u8; N]) -> T,
) -> Result<Vec<T>, LeftOut> {
    let want = rows
        .checked_mul(width)
        .and_then(|n| n.checked_mul(N))
        .ok_or(LeftOut::Overflow)?;
    if bytes.len() != want {
        return Err(LeftOut::WrongSize {
            got: bytes.len(),
            want,
        });
    }
    Ok(bytes
        .chunks_exact(N)
        .map(|chunk| from_le(chunk.try_into().unwrap_or([0; N])))
        .collect())
}

/// The extent field whose boxes a field named `name` gets: `<prefix>/labels/boxes/extent` for
/// the longest proper prefix of `name` (in whole segments) that has one, the empty prefix
/// (`labels/boxes/extent` at the top level) last.
fn extent_field_for<'a>(
    name: &str,
    record: &'a dyn FieldsOf,
) -> Option<(String, FieldRef<'a>, String)> {
    let mut prefix = name;
    while let Some(cut) = prefix.rfind('/') {
        prefix = &prefix[..cut];
        let candidate = format!("{prefix}/{}", labels::EXTENT_NAME);
        if let Some(extent) = record.field_named(&candidate) {
            return Some((
                candidate,
                extent,
                format!("{prefix}/{}", labels::IDENTITY_NAME),
            ));
        }
    }
    // The empty prefix: the record's top-level labels (what the importers write beside a
    // top-level `iq`).
    let extent = record.field_named(labels::EXTENT_NAME)?;
    Some((
        labels::EXTENT_NAME.to_string(),
        extent,
        labels::IDENTITY_NAME.to_string(),
    ))
}

/// The boxes field `name` gets, `Ok(None)` when it gets none (no labels, or another
/// receiver's), or why its labels cannot be converted.
pub fn box_plan(
    name: &str,
    field: &FieldMeta,
    record: &dyn FieldsOf,
    names: &NamesMemo,
) -> Result<Option<BoxPlan>, LeftOut> {
    let Some((extent_name, extent, identity_name)) = extent_field_for(name, record) else {
        return Ok(None);
    };
    let in_field = |source: LabelError, field: &str| LeftOut::Label {
        field: field.to_string(),
        source,
    };
    let frame = labels::box_frame(&extent.metadata).map_err(|e| in_field(e, &extent_name))?;
    let (count, columns) =
        labels::extent_columns(&extent).map_err(|e| in_field(e, &extent_name))?;
    let receiver = ReceiverFrame {
        center_hz: labels::center_frequency(&field.metadata),
        sample_rate_hz: sample_rate(field),
    };
    let conversion = match labels::membership(&frame, &receiver) {
        Membership::Member(conversion) => conversion,
        Membership::OtherReceiver => return Ok(None),
        Membership::Unconvertible(why) => {
            return Err(LeftOut::Unconvertible {
                field: extent_name.clone(),
                why,
            })
        }
    };
    let identity = match record.field_named(&identity_name) {
        Some(meta) => Some((
            labels::identity_columns(&meta, count).map_err(|e| in_field(e, &identity_name))?,
            names.of(&identity_name, &meta),
        )),
        None => None,
    };
    let (names, text) = match &identity {
        Some((_, named)) => named.clone(),
        None => (
            Arc::default(),
            labels::max_annotation_len(&ClassNames::new(), false),
        ),
    };
    Ok(Some(BoxPlan {
        extent_field: extent_name.clone(),
        columns,
        identity: identity.map(|(cols, _)| (identity_name, cols)),
        names,
        conversion,
        count,
        slots: count,
        slot_width: (SLOT_LEAD.len() + text + 1) as u64,
    }))
}

/// `core:extensions`: those of `imported` (an imported document's, when it is an array of
/// objects) but any declaring the mount's namespace, then the mount's.
fn extensions(imported: Option<Value>) -> Value {
    let mut declared: Vec<Value> = match imported {
        Some(Value::Array(items)) if items.iter().all(|item| item.as_object().is_some()) => items,
        _ => Vec::new(),
    };
    declared.retain(|item| {
        let name = item.as_object().and_then(|o| o.get("name"));
        name.and_then(Value::as_str) != Some(NAMESPACE)
    });
    let mut extension = Object::new();
    extension.insert("name".into(), Value::from(NAMESPACE));
    extension.insert("optional".into(), Value::Bool(true));
    extension.insert("version".into(), Value::from(NAMESPACE_VERSION));
    declared.push(Value::Object(extension));
    Value::Array(declared)
}

fn description(name: &str, at: &Provenance) -> String {
    format!(
        "{name} of record {} (ordinal {}) of dataset {}, snapshot {}",
        at.record_id, at.ordinal, at.dataset_id, at.snapshot_id
    )
}

/// Boxes of a table beyond what fits in [`MAX_META_BYTES`]: the first `shown` by sample start
/// get slots, `left_out` do not.
#[derive(Debug, Clone, Copy)]
struct Cut {
    shown: u64,
    left_out: u64,
}

/// What a document is written from: its field, where the record sits, and the SigMF
/// document the field was imported from, if any.
#[derive(Clone, Copy)]
struct DocumentAt<'a> {
    name: &'a str,
    field: &'a FieldMeta,
    at: &'a Provenance<'a>,
    origin: Option<&'a Origin<'a>>,
}

/// The document with no annotations (they are spliced in by [`MetaLayout`]); with `cut`, its
/// global says how many annotations were left out and why. A field imported from SigMF gets
/// its input's global keys (but the layout's, which the mount's files decide) and captures.
fn meta_document(doc: DocumentAt, metadata_only: bool, cut: Option<Cut>) -> Object {
    let mut global = match doc.origin {
        Some(origin) => imported_global(origin.global),
        None => Object::new(),
    };
    if let Some(cut) = cut {
        global.insert(
            format!("{NAMESPACE}:annotations_left_out").into(),
            Value::from(cut.left_out),
        );
        let note = format!(
            "only the first {} annotations by sample start are shown: the other {} do not fit \
             in the {MAX_META_BYTES}-byte limit of a .sigmf-meta",
            cut.shown, cut.left_out
        );
        global.insert(format!("{NAMESPACE}:note").into(), Value::from(note));
    }
    if metadata_only {
        global.insert("core:metadata_only".into(), Value::Bool(true));
    }
    // The mount's `.sigmf-data` is always the field's complex64 samples.
    global.insert("core:datatype".into(), Value::from("cf32_le"));
    if !global.contains_key("core:description") {
        let description = description(doc.name, doc.at);
        global.insert("core:description".into(), Value::from(description));
    }
    let extensions = extensions(global.remove("core:extensions"));
    global.insert("core:extensions".into(), extensions);
    if let Some(rate) = sample_rate(doc.field).filter(|_| !global.contains_key("core:sample_rate"))
    {
        global.insert("core:sample_rate".into(), Value::Float(rate));
    }
    if !global.contains_key("core:version") {
        global.insert("core:version".into(), Value::from(SIGMF_VERSION));
    }
    insert_provenance(&mut global, doc.name, doc.at);
    let captures = match doc.origin.filter(|o| !o.captures.is_empty()) {
        Some(origin) => origin
            .captures
            .iter()
            .map(|c| Value::Object((*c).clone()))
            .collect(),
        None => vec![Value::Object(own_capture(doc.field))],
    };
    let mut document = Object::new();
    document.insert("annotations".into(), Value::Array(Vec::new()));
    document.insert("captures".into(), Value::Array(captures));
    document.insert("global".into(), Value::Object(global));
    document
}

/// An imported document's global without the keys the mount decides: the layout's and its
/// own namespace's.
fn imported_global(global: &Object) -> Object {
    let mut out = global.clone();
    for key in LAYOUT_KEYS {
        out.remove(key);
    }
    let own: Vec<String> = out
        .iter()
        .map(|(key, _)| key.as_str())
        .filter(|key| key.starts_with(&format!("{NAMESPACE}:")))
        .map(str::to_string)
        .collect();
    for key in own {
        out.remove(&key);
    }
    out
}

/// Where the record sits, in the mount's namespace.
fn insert_provenance(global: &mut Object, name: &str, at: &Provenance) {
    let keys = [
        ("dataset", Value::from(at.dataset_id)),
        ("field", Value::from(name)),
        ("ordinal", Value::from(at.ordinal)),
        ("record_id", Value::from(at.record_id)),
        ("snapshot", Value::from(at.snapshot_id)),
    ];
    for (key, value) in keys {
        global.insert(format!("{NAMESPACE}:{key}").into(), value);
    }
}

/// The capture the mount writes for a field of its own: at sample 0, with the field's
/// centre frequency and start time when its metadata gives them.
fn own_capture(field: &FieldMeta) -> Object {
    let mut capture = Object::new();
    capture.insert("core:sample_start".into(), Value::from(0u64));
    if let Some(center) = labels::center_frequency(&field.metadata) {
        capture.insert("core:frequency".into(), Value::Float(center));
    }
    if let Some(datetime) = datetime(&field.metadata) {
        capture.insert("core:datetime".into(), Value::from(datetime));
    }
    capture
}

/// The capture's absolute start time: a `datetime` key of the field metadata (top level or
/// nested), when it is an RFC 3339 UTC timestamp as SigMF writes them
/// (`YYYY-MM-DDTHH:MM:SS[.fraction]Z`). Scene times (`origin_s`) are not absolute.
fn datetime(metadata: &Object) -> Option<&str> {
    let text = labels::metadata_key(metadata, "datetime")?.as_str()?;
    is_utc_timestamp(text).then_some(text)
}

fn is_utc_timestamp(text: &str) -> bool {
    let bytes = text.as_bytes();
    let pattern = b"dddd-dd-ddTdd:dd:dd";
    if bytes.len() < pattern.len() + 1 || bytes.last() != Some(&b'Z') {
        return false;
    }
    let head_ok = pattern.iter().zip(bytes).all(|(p, b)| match p {
        b'd' => b.is_ascii_digit(),
        other => other == b,
    });
    let tail = &bytes[pattern.len()..bytes.len() - 1];
    let fraction_ok = tail.is_empty()
        || (tail.len() >= 2 && tail[0] == b'.' && tail[1..].iter().all(u8::is_ascii_digit));
    head_ok && fraction_ok
}

/// One recording of a collection: its base name relative to the collection file, and the
/// SHA-512 of its `.sigmf-meta` once known.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    pub name: String,
    pub meta_sha512: Option<String>,
}

impl Stream {
    pub fn hashed(name: String, meta: &[u8]) -> Stream {
        Stream {
            name,
            meta_sha512: Some(hex::encode(Sha512::digest(meta))),
        }
    }
}

/// Largest `.sigmf-collection`, in bytes, and most bytes of `.sigmf-meta`s one hashes: the
/// recordings beyond either are left out (the collection says how many,
/// `sdsfs:streams_left_out`). A collection's first read renders and hashes every meta it
/// lists, so the second cap bounds that work (16 metas at their cap, about 2 s) as the first
/// bounds its size; both hold a record's or scene's recordings of ordinary size many times.
pub const MAX_COLLECTION_BYTES: u64 = 16 << 20;
pub const MAX_COLLECTION_META_BYTES: u64 = 256 << 20;

/// Bytes of a collection's entry for a stream, beyond its name's JSON text (hash, keys,
/// indentation): by hand from [`collection`]'s pretty form, with room to spare.
const STREAM_ENTRY_BYTES: u64 = HASH_HEX as u64 + 64;
/// Bytes of a collection beside its description and entries (keys, the note of a cut one).
const COLLECTION_RESERVE: u64 = 4 << 10;

/// How many of `streams` (each its name and its `.sigmf-meta`'s size, in order) the collection
/// of `description` lists: the first ones within [`MAX_COLLECTION_BYTES`] and
/// [`MAX_COLLECTION_META_BYTES`].
pub fn listed(description: &str, streams: &[(&str, u64)]) -> usize {
    let mut text = COLLECTION_RESERVE + json_text_len(description);
    let mut metas = 0u64;
    for (index, (name, meta_len)) in streams.iter().enumerate() {
        text = text.saturating_add(json_text_len(name) + STREAM_ENTRY_BYTES);
        metas = metas.saturating_add(*meta_len);
        if text > MAX_COLLECTION_BYTES || metas > MAX_COLLECTION_META_BYTES {
            return index;
        }
    }
    streams.len()
}

fn json_text_len(text: &str) -> u64 {
    let mut out = String::new();
    json::write_string(text, &mut out);
    out.len() as u64
}

/// A `.sigmf-collection`; with unhashed streams, a document of the same size (the hash of a
/// stream is always 128 hex digits). `left_out` recordings beyond its caps are counted in it.
pub fn collection(description: &str, streams: &[Stream], left_out: u64) -> Vec<u8> {
    let streams: Vec<Value> = streams
        .iter()
        .map(|stream| {
            let mut entry = Object::new();
            let hash = stream
                .meta_sha512
                .clone()
                .unwrap_or_else(|| "0".repeat(HASH_HEX));
            entry.insert("hash".into(), Value::from(hash));
            entry.insert("name".into(), Value::from(stream.name.as_str()));
            Value::Object(entry)
        })
        .collect();
    let mut body = Object::new();
    body.insert("core:description".into(), Value::from(description));
    if left_out > 0 {
        body.insert("core:extensions".into(), extensions(None));
    }
    body.insert("core:streams".into(), Value::Array(streams));
    body.insert("core:version".into(), Value::from(SIGMF_VERSION));
    if left_out > 0 {
        let note = format!(
            "{left_out} recordings are not listed: a collection lists at most \
             {MAX_COLLECTION_BYTES} bytes of entries and {MAX_COLLECTION_META_BYTES} bytes of \
             .sigmf-meta files"
        );
        body.insert(format!("{NAMESPACE}:note").into(), Value::from(note));
        body.insert(
            format!("{NAMESPACE}:streams_left_out").into(),
            Value::from(left_out),
        );
    }
    let mut doc = Object::new();
    doc.insert("collection".into(), Value::Object(body));
    json::object_to_pretty(&doc).into_bytes()
}

/// The description of a record's collection.
pub fn record_collection_description(at: &Provenance) -> String {
    format!(
        "Recordings of record {} (ordinal {}) of dataset {}, snapshot {}",
        at.record_id, at.ordinal, at.dataset_id, at.snapshot_id
    )
}

/// The description of a scene's collection.
pub fn scene_collection_description(scene: &str, dataset_id: &str, snapshot_id: &str) -> String {
    format!("Recordings of scene {scene} in dataset {dataset_id}, snapshot {snapshot_id}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::format::dtype::DType;
    use crate::format::record::Axis;

    const AT: Provenance = Provenance {
        dataset_id: "ds",
        snapshot_id: "snap",
        record_id: "r1",
        ordinal: 4,
    };

    fn build(name: &str, field: &FieldMeta, meta: &RecordMeta) -> MetaLayout {
        MetaLayout::build(name, field, meta, &AT, &NamesMemo::default())
    }

    fn render(
        layout: &MetaLayout,
        tensors: Option<&BoxTensors>,
        name: &str,
        field: &FieldMeta,
        meta: &RecordMeta,
    ) -> Result<Vec<u8>, FsError> {
        let source = MetaSource {
            name,
            field,
            record: meta,
            at: &AT,
        };
        layout.render(tensors, source)
    }

    /// [`render`] of the record's own field `name`.
    fn render_own(
        layout: &MetaLayout,
        tensors: Option<&BoxTensors>,
        name: &str,
        meta: &RecordMeta,
    ) -> Result<Vec<u8>, FsError> {
        render(layout, tensors, name, &meta.fields[name], meta)
    }

    fn obj(pairs: &[(&str, Value)]) -> Object {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), v.clone()))
            .collect()
    }

    fn iq(center: f64, rate: f64) -> FieldMeta {
        let mut field = FieldMeta::new(DType::C64, vec![100]);
        field.axes = vec![Axis::new("time", 100)];
        let block = obj(&[
            ("kind", "uniform".into()),
            ("sample_rate_hz", Value::Float(rate)),
        ]);
        field.metadata = obj(&[
            ("time_coordinates", Value::Object(block)),
            ("center_frequency_hz", Value::Float(center)),
        ]);
        field
    }

    fn record(boxes: u64) -> RecordMeta {
        let mut extent = FieldMeta::new(DType::F64, vec![boxes, 4]);
        extent.metadata = obj(&[
            ("frequency_frame", "receiver_center_offset".into()),
            ("receiver_center_hz", Value::Float(1e9)),
            ("time_frame", "receiver_sample_index".into()),
            ("sample_rate_hz", Value::Float(1e6)),
        ]);
        let mut identity = FieldMeta::new(DType::I32, vec![boxes, 2]);
        let names = obj(&[("1", "burst".into())]);
        identity.metadata = obj(&[("class_names", Value::Object(names))]);
        let mut fields = BTreeMap::new();
        fields.insert("p/rx/rx0/iq".to_string(), iq(1e9, 2e6));
        fields.insert("p/labels/boxes/extent".to_string(), extent);
        fields.insert("p/labels/boxes/identity".to_string(), identity);
        RecordMeta {
            id: "r1".into(),
            scene_id: None,
            metadata: Object::new(),
            fields,
        }
    }

    fn tensors(extent: &[f64], identity: &[i32]) -> BoxTensors {
        BoxTensors {
            extent: extent.iter().flat_map(|v| v.to_le_bytes()).collect(),
            identity: Some(identity.iter().flat_map(|v| v.to_le_bytes()).collect()),
        }
    }

    #[test]
    fn slots_keep_the_size_and_sort_by_start() {
        let meta = record(3);
        let layout = build("p/rx/rx0/iq", &meta.fields["p/rx/rx0/iq"], &meta);
        let plan = layout.needs_tensors().unwrap();
        assert_eq!(plan.conversion.rate_ratio, 2.0);
        let boxes = tensors(
            &[
                50.0,
                10.0,
                -5.0,
                5.0, // box 0, starts later
                10.0,
                5.0,
                0.0,
                1.0, // box 1
                f64::NAN,
                1.0,
                0.0,
                1.0, // box 2, left out
            ],
            &[1, 0, 9, 1, 1, 2],
        );
        let text = render_own(&layout, Some(&boxes), "p/rx/rx0/iq", &meta).unwrap();
        assert_eq!(text.len() as u64, layout.len());
        let doc = json::parse_object(&text, &Default::default()).unwrap();
        let list = doc["annotations"].as_array().unwrap();
        assert_eq!(list.len(), 2);
        let first = list[0].as_object().unwrap();
        assert_eq!(first["core:sample_start"].as_u64(), Some(20));
        assert_eq!(first["core:sample_count"].as_u64(), Some(10));
        assert_eq!(first.get("core:label"), None, "class 9 has no name");
        assert_eq!(first["core:comment"].as_str(), Some("emitter 1"));
        let second = list[1].as_object().unwrap();
        assert_eq!(second["core:freq_lower_edge"].as_f64(), Some(1e9 - 5.0));
        assert_eq!(second["core:label"].as_str(), Some("burst"));
        let capture = doc["captures"].as_array().unwrap()[0].as_object().unwrap();
        assert_eq!(capture["core:frequency"].as_f64(), Some(1e9));
        // Unreadable tensors leave every slot blank, at the same size.
        let blank = render_own(&layout, None, "p/rx/rx0/iq", &meta).unwrap();
        assert_eq!(blank.len() as u64, layout.len());
        let doc = json::parse_object(&blank, &Default::default()).unwrap();
        assert_eq!(doc["annotations"].as_array().map(<[Value]>::len), Some(0));
    }

    #[test]
    fn a_document_beyond_the_cap_leaves_boxes_out_and_says_so() {
        // 100,000 boxes (the cap of a table) of one class named by 20,000 characters.
        let count = labels::MAX_BOXES;
        let mut meta = record(count);
        let identity = meta.fields.get_mut("p/labels/boxes/identity").unwrap();
        let names = obj(&[("1", Value::from("x".repeat(20_000)))]);
        identity.metadata = obj(&[("class_names", Value::Object(names))]);
        let layout = build("p/rx/rx0/iq", &meta.fields["p/rx/rx0/iq"], &meta);
        assert!(layout.len() <= MAX_META_BYTES, "{}", layout.len());
        let plan = layout.needs_tensors().unwrap();
        assert!(plan.slots < count && plan.slots > 10_000, "{}", plan.slots);
        // Box i: samples [i, i + 1), Hz [-1, 1] around the centre; class 1, emitter i.
        let extent: Vec<f64> = (0..count)
            .flat_map(|i| [i as f64, 1.0, -1.0, 1.0])
            .collect();
        let identity: Vec<i32> = (0..count as i32).flat_map(|i| [1, i]).collect();
        let text = render_own(
            &layout,
            Some(&tensors(&extent, &identity)),
            "p/rx/rx0/iq",
            &meta,
        )
        .unwrap();
        assert_eq!(text.len() as u64, layout.len());
        let doc = json::parse_object(&text, &Default::default()).unwrap();
        let list = doc["annotations"].as_array().unwrap();
        assert_eq!(list.len() as u64, plan.slots);
        let last = list.last().unwrap().as_object().unwrap();
        // The receiver samples at twice the boxes' rate.
        assert_eq!(
            last["core:sample_start"].as_u64(),
            Some(2 * (plan.slots - 1))
        );
        let label = list[0].as_object().unwrap()["core:label"].as_str().unwrap();
        assert!(label.len() <= labels::MAX_CLASS_NAME_BYTES && label.ends_with('\u{2026}'));
        let global = doc["global"].as_object().unwrap();
        assert_eq!(
            global["sdsfs:annotations_left_out"].as_u64(),
            Some(count - plan.slots)
        );
        assert!(global["sdsfs:note"]
            .as_str()
            .unwrap()
            .contains("do not fit"));
    }

    #[test]
    fn other_receivers_and_bad_frames_get_no_boxes() {
        let mut meta = record(1);
        meta.fields.insert("p/rx/rx1/iq".into(), iq(2e9, 1e6));
        let other = build("p/rx/rx1/iq", &meta.fields["p/rx/rx1/iq"], &meta);
        assert!(other.boxes.is_none());
        let extent = meta.fields.get_mut("p/labels/boxes/extent").unwrap();
        extent
            .metadata
            .insert("time_frame".into(), "wall_clock".into());
        let bad = build("p/rx/rx0/iq", &meta.fields["p/rx/rx0/iq"], &meta);
        assert!(bad.boxes.is_none());
        let text = render_own(&bad, None, "p/rx/rx0/iq", &meta).unwrap();
        assert_eq!(text.len() as u64, bad.len());
        assert!(json::parse_object(&text, &Default::default()).is_ok());
    }

    #[test]
    fn global_and_capture_state_what_the_field_states() {
        let meta = record(0);
        let mut field = meta.fields["p/rx/rx0/iq"].clone();
        field
            .metadata
            .insert("datetime".into(), "2026-01-02T03:04:05.5Z".into());
        let layout = build("p/rx/rx0/iq", &field, &meta);
        let text = String::from_utf8(render(&layout, None, "p/rx/rx0/iq", &field, &meta).unwrap())
            .unwrap();
        // Rates and frequencies are JSON floats, whatever the metadata wrote.
        assert!(text.contains("\"core:sample_rate\": 2000000.0,"), "{text}");
        assert!(text.contains("\"core:frequency\": 1000000000.0,"), "{text}");
        assert!(
            text.contains("\"core:datetime\": \"2026-01-02T03:04:05.5Z\","),
            "{text}"
        );
        assert!(text.contains("\"sdsfs:record_id\": \"r1\","), "{text}");
        field.metadata.insert("datetime".into(), "today".into());
        let layout = build("p/rx/rx0/iq", &field, &meta);
        let text = String::from_utf8(render(&layout, None, "p/rx/rx0/iq", &field, &meta).unwrap())
            .unwrap();
        assert!(!text.contains("core:datetime"), "{text}");
    }

    /// `field` with an imported SigMF document (`sigmf` in its metadata) of `annotations`.
    fn imported(field: &FieldMeta, global: Object, annotations: Vec<Value>) -> FieldMeta {
        let mut field = field.clone();
        let capture = obj(&[
            ("core:sample_start", Value::from(0u64)),
            ("core:frequency", Value::Float(9e8)),
        ]);
        let origin =
            crate::format::sigmf::origin_value(&global, vec![Value::Object(capture)], annotations);
        field.metadata.insert("sigmf".into(), origin);
        field
    }

    fn annotation(start: u64, comment: &str) -> Value {
        Value::Object(obj(&[
            ("core:sample_start", Value::from(start)),
            ("core:comment", Value::from(comment)),
        ]))
    }

    #[test]
    fn an_imported_document_comes_back_but_the_keys_the_mount_decides() {
        let meta = record(2);
        let global = obj(&[
            ("core:author", Value::from("me")),
            ("core:datatype", Value::from("ci16_le")),
            ("core:sample_rate", Value::from(2_000_000u64)),
            // A hostile row: layout keys and the mount's own namespace are not taken.
            ("core:metadata_only", Value::Bool(true)),
            ("sdsfs:ordinal", Value::from(99u64)),
            ("core:extensions", Value::from("not a list")),
        ]);
        let annotations = vec![annotation(30, "b"), annotation(5, "a"), annotation(30, "c")];
        let field = imported(&meta.fields["p/rx/rx0/iq"], global, annotations);
        let layout = build("p/rx/rx0/iq", &field, &meta);
        // Its boxes are still drawn, but the document needs no tensor.
        assert!(layout.needs_tensors().is_none());
        assert_eq!(layout.drawn_boxes().map(|plan| plan.count), Some(2));
        let text = render(&layout, None, "p/rx/rx0/iq", &field, &meta).unwrap();
        assert_eq!(text.len() as u64, layout.len());
        let doc = json::parse_object(&text, &Default::default()).unwrap();
        let comments: Vec<&str> = doc["annotations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_object().unwrap()["core:comment"].as_str().unwrap())
            .collect();
        assert_eq!(comments, ["a", "b", "c"]);
        let global = doc["global"].as_object().unwrap();
        assert_eq!(global["core:author"], Value::from("me"));
        assert_eq!(global["core:datatype"], Value::from("cf32_le"));
        assert_eq!(global["core:sample_rate"], Value::from(2_000_000u64));
        assert_eq!(global["sdsfs:ordinal"], Value::from(4u64));
        assert!(!global.contains_key("core:metadata_only"));
        let extensions = global["core:extensions"].as_array().unwrap();
        assert_eq!(extensions.len(), 1);
        let capture = doc["captures"].as_array().unwrap()[0].as_object().unwrap();
        assert_eq!(capture["core:frequency"], Value::Float(9e8));
    }

    #[test]
    fn imported_annotations_beyond_the_cap_are_left_out_and_said() {
        let meta = record(0);
        // 9,000 annotations of 2,000-character comments: 18 MB, beyond the 16 MiB cap.
        let comment = "é".repeat(1_000);
        let annotations = (0..9_000).rev().map(|i| annotation(i, &comment)).collect();
        let field = imported(&meta.fields["p/rx/rx0/iq"], Object::new(), annotations);
        let layout = build("p/rx/rx0/iq", &field, &meta);
        assert!(layout.len() <= MAX_META_BYTES, "{}", layout.len());
        let text = render(&layout, None, "p/rx/rx0/iq", &field, &meta).unwrap();
        assert_eq!(text.len() as u64, layout.len());
        let doc = json::parse_object(&text, &Default::default()).unwrap();
        let shown = doc["annotations"].as_array().unwrap();
        assert!(
            shown.len() > 7_000 && shown.len() < 9_000,
            "{}",
            shown.len()
        );
        let last = shown.last().unwrap().as_object().unwrap();
        assert_eq!(
            last["core:sample_start"].as_u64(),
            Some(shown.len() as u64 - 1)
        );
        let global = doc["global"].as_object().unwrap();
        assert_eq!(
            global["sdsfs:annotations_left_out"].as_u64(),
            Some(9_000 - shown.len() as u64)
        );
    }

    #[test]
    fn a_broken_imported_document_is_not_used() {
        let meta = record(1);
        let mut field = meta.fields["p/rx/rx0/iq"].clone();
        let broken = obj(&[("global", Value::from(3u64))]);
        field.metadata.insert("sigmf".into(), Value::Object(broken));
        let layout = build("p/rx/rx0/iq", &field, &meta);
        assert!(layout.needs_tensors().is_some());
        let text = render(&layout, None, "p/rx/rx0/iq", &field, &meta).unwrap();
        assert_eq!(text.len() as u64, layout.len());
        let doc = json::parse_object(&text, &Default::default()).unwrap();
        let global = doc["global"].as_object().unwrap();
        assert!(global["core:description"]
            .as_str()
            .unwrap()
            .contains("record r1"));
    }

    #[test]
    fn timestamps_must_be_utc_rfc3339() {
        assert!(is_utc_timestamp("2026-01-02T03:04:05Z"));
        assert!(is_utc_timestamp("2026-01-02T03:04:05.123456Z"));
        assert!(!is_utc_timestamp("2026-01-02T03:04:05+01:00"));
        assert!(!is_utc_timestamp("2026-01-02T03:04:05.Z"));
        assert!(!is_utc_timestamp("yesterday"));
    }

    #[test]
    fn collections_have_the_same_size_before_and_after_hashing() {
        let names = ["fields/a/iq".to_string(), "fields/b/iq".to_string()];
        let unhashed: Vec<Stream> = names
            .iter()
            .map(|n| Stream {
                name: n.clone(),
                meta_sha512: None,
            })
            .collect();
        let hashed: Vec<Stream> = names
            .iter()
            .map(|n| Stream::hashed(n.clone(), b"{}"))
            .collect();
        let text = collection("d", &hashed, 0);
        // Streams beyond the caps are left out, and the collection says how many.
        let metas = [("a", MAX_META_BYTES); 17];
        assert_eq!(listed("d", &metas), 16);
        assert_eq!(listed("d", &[("a", 1); 3]), 3);
        let long = "n".repeat(1 << 20);
        assert_eq!(listed("d", &vec![(long.as_str(), 1); 20]), 15);
        let cut = String::from_utf8(collection("d", &hashed, 5)).unwrap();
        assert!(cut.contains("\"sdsfs:streams_left_out\": 5"), "{cut}");
        assert_eq!(text.len(), collection("d", &unhashed, 0).len());
        let doc = json::parse_object(&text, &Default::default()).unwrap();
        let body = doc["collection"].as_object().unwrap();
        let streams = body["core:streams"].as_array().unwrap();
        let first = streams[0].as_object().unwrap();
        // SHA-512 of "{}", computed independently (sha512sum).
        assert!(first["hash"]
            .as_str()
            .unwrap()
            .starts_with("27c74670adb75075fad058d5ceaf7b20c4e7786c83bae8a32f626f9782af34c9"));
    }
}
