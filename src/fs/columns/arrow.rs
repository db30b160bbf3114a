//! Arrow IPC files whose size is known before their values: the writer of `labels.arrow`
//! and `records.arrow` (`docs/MOUNT.md`, "Label tables").
//!
//! Why not the Arrow crate's `FileWriter`: it writes a column's validity bitmap only when the
//! batch has a null (arrow-ipc 60.2, `write_array_data`), so a file's size would depend on
//! the values (a box that cannot be converted, a label missing), and `stat` must give it from
//! the metadata rows alone. Here every column of every batch carries its validity bitmap
//! (all ones where nothing is null, as the format allows), so a batch's bytes follow from its
//! row count and the byte totals of its text columns. The flatbuffers (schema, messages,
//! footer) are the Arrow crate's own builders (`arrow_ipc`); only the bodies are laid out
//! here. The files are the IPC file format, version 5, buffers aligned to 64 bytes: what
//! `pyarrow.ipc.open_file(pyarrow.memory_map(path))` maps without copying.

use std::sync::Arc;

use arrow_ipc::writer::DictionaryTracker;
use arrow_ipc::{convert::IpcSchemaEncoder, MetadataVersion};
use arrow_schema::{DataType, Field, Schema};
use flatbuffers::FlatBufferBuilder;

/// Buffers and messages start at multiples of this.
const ALIGN: usize = 64;
const MAGIC: &[u8; 6] = b"ARROW1";
/// A message's metadata starts with this marker and its length.
const CONTINUATION: [u8; 4] = [0xff; 4];

/// The kinds of column a table here has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    U64,
    F64,
    /// UTF-8 text.
    Text,
    /// `int32` indices into the file's one dictionary of text (the schema says which column).
    Index,
}

/// A column of one batch, with its values (`None`: null).
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    U64(Vec<Option<u64>>),
    F64(Vec<Option<f64>>),
    Text(Vec<Option<Arc<str>>>),
    Index(Vec<Option<i32>>),
}

impl Values {
    fn rows(&self) -> usize {
        match self {
            Values::U64(v) => v.len(),
            Values::F64(v) => v.len(),
            Values::Text(v) => v.len(),
            Values::Index(v) => v.len(),
        }
    }

    /// Bytes of text (0 for other kinds).
    fn text_bytes(&self) -> usize {
        match self {
            Values::Text(v) => v.iter().flatten().map(|s| s.len()).sum(),
            _ => 0,
        }
    }

    fn nulls(&self) -> usize {
        match self {
            Values::U64(v) => v.iter().filter(|x| x.is_none()).count(),
            Values::F64(v) => v.iter().filter(|x| x.is_none()).count(),
            Values::Text(v) => v.iter().filter(|x| x.is_none()).count(),
            Values::Index(v) => v.iter().filter(|x| x.is_none()).count(),
        }
    }
}

/// What decides a batch's bytes: its row count and each column's text bytes (0 for columns
/// that are not text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub rows: usize,
    pub text_bytes: Vec<usize>,
}

/// A batch holds at most this many rows and this many bytes of text (the first row of a
/// batch whatever its text): what a read encodes at once, about 2 to 10 MiB of message, stays
/// bounded however long a dataset's texts or however many boxes a record has.
pub const BATCH_ROWS: usize = 16_384;
pub const BATCH_TEXT_BYTES: usize = 8 << 20;

impl Shape {
    /// An empty batch of a table of `columns` columns.
    pub fn empty(columns: usize) -> Shape {
        Shape {
            rows: 0,
            text_bytes: vec![0; columns],
        }
    }

    /// How many more rows of `row_text` bytes of text each the batch takes (at least one
    /// when it is empty).
    pub fn room(&self, row_text: usize) -> usize {
        let rows = BATCH_ROWS.saturating_sub(self.rows);
        let text: usize = self.text_bytes.iter().fold(0, |a, &b| a.saturating_add(b));
        let by_text = BATCH_TEXT_BYTES
            .saturating_sub(text)
            .checked_div(row_text)
            .unwrap_or(usize::MAX);
        let room = rows.min(by_text);
        if self.rows == 0 {
            room.max(1)
        } else {
            room
        }
    }
}

/// A table's columns: names and kinds.
#[derive(Debug, Clone)]
pub struct Table {
    pub columns: Vec<(&'static str, Kind)>,
}

fn padded(len: usize) -> usize {
    len.div_ceil(ALIGN) * ALIGN
}

impl Table {
    /// The Arrow schema: every column nullable; an [`Kind::Index`] column is a dictionary of
    /// text with `int32` indices (id 0: a table has at most one).
    pub fn schema(&self) -> Schema {
        let fields: Vec<Field> = self
            .columns
            .iter()
            .map(|(name, kind)| {
                let data_type = match kind {
                    Kind::U64 => DataType::UInt64,
                    Kind::F64 => DataType::Float64,
                    Kind::Text => DataType::Utf8,
                    Kind::Index => {
                        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
                    }
                };
                Field::new(*name, data_type, true)
            })
            .collect();
        Schema::new(fields)
    }

    /// The buffers of a batch of `shape`: `(offset, length)` each, in body order.
    fn buffers(&self, shape: &Shape) -> Vec<(usize, usize)> {
        let mut buffers = Vec::new();
        let mut at = 0;
        let mut push = |len: usize| {
            buffers.push((at, len));
            at += padded(len);
        };
        for (index, (_, kind)) in self.columns.iter().enumerate() {
            push(shape.rows.div_ceil(8));
            match kind {
                Kind::U64 | Kind::F64 => push(8 * shape.rows),
                Kind::Index => push(4 * shape.rows),
                Kind::Text => {
                    push(4 * (shape.rows + 1));
                    push(shape.text_bytes.get(index).copied().unwrap_or(0));
                }
            }
        }
        buffers
    }

    fn body_len(&self, shape: &Shape) -> usize {
        self.buffers(shape)
            .last()
            .map_or(0, |(offset, len)| offset + padded(*len))
    }

    /// The record batch message of `shape` (null counts and values aside, which do not change
    /// its size): metadata framed and padded, then its body length.
    fn batch_metadata(&self, shape: &Shape, nulls: &[usize], dictionary: bool) -> Vec<u8> {
        let mut fbb = FlatBufferBuilder::new();
        let nodes: Vec<arrow_ipc::FieldNode> = (0..self.columns.len())
            .map(|i| {
                let nulls = nulls.get(i).copied().unwrap_or(0);
                arrow_ipc::FieldNode::new(shape.rows as i64, nulls as i64)
            })
            .collect();
        let buffers: Vec<arrow_ipc::Buffer> = self
            .buffers(shape)
            .iter()
            .map(|(offset, len)| arrow_ipc::Buffer::new(*offset as i64, *len as i64))
            .collect();
        let nodes = fbb.create_vector(&nodes);
        let buffers = fbb.create_vector(&buffers);
        let batch = {
            let mut batch = arrow_ipc::RecordBatchBuilder::new(&mut fbb);
            batch.add_length(shape.rows as i64);
            batch.add_nodes(nodes);
            batch.add_buffers(buffers);
            batch.finish()
        };
        let (header_type, header) = if dictionary {
            let mut dict = arrow_ipc::DictionaryBatchBuilder::new(&mut fbb);
            dict.add_id(0);
            dict.add_data(batch);
            dict.add_isDelta(false);
            let dict = dict.finish();
            (
                arrow_ipc::MessageHeader::DictionaryBatch,
                dict.as_union_value(),
            )
        } else {
            (
                arrow_ipc::MessageHeader::RecordBatch,
                batch.as_union_value(),
            )
        };
        let body_len = self.body_len(shape) as i64;
        let message = {
            let mut message = arrow_ipc::MessageBuilder::new(&mut fbb);
            message.add_version(MetadataVersion::V5);
            message.add_header_type(header_type);
            message.add_header(header);
            message.add_bodyLength(body_len);
            message.finish()
        };
        fbb.finish(message, None);
        framed(fbb.finished_data())
    }

    /// The schema message, framed.
    fn schema_message(&self) -> Vec<u8> {
        let schema = self.schema();
        let mut tracker = DictionaryTracker::new(false);
        let mut fbb = FlatBufferBuilder::new();
        let offset = IpcSchemaEncoder::new()
            .with_dictionary_tracker(&mut tracker)
            .schema_to_fb_offset(&mut fbb, &schema);
        let message = {
            let mut message = arrow_ipc::MessageBuilder::new(&mut fbb);
            message.add_version(MetadataVersion::V5);
            message.add_header_type(arrow_ipc::MessageHeader::Schema);
            message.add_header(offset.as_union_value());
            message.add_bodyLength(0);
            message.finish()
        };
        fbb.finish(message, None);
        framed(fbb.finished_data())
    }

    /// The bytes of a batch message of `values` (one per column, all of one row count).
    fn batch_message(&self, values: &[Values], dictionary: bool) -> Vec<u8> {
        let rows = values.first().map_or(0, Values::rows);
        let shape = Shape {
            rows,
            text_bytes: values.iter().map(Values::text_bytes).collect(),
        };
        let nulls: Vec<usize> = values.iter().map(Values::nulls).collect();
        let mut out = self.batch_metadata(&shape, &nulls, dictionary);
        let body_start = out.len();
        for column in values {
            write_column(&mut out, column);
        }
        debug_assert_eq!(out.len() - body_start, self.body_len(&shape));
        out
    }

    /// Bytes of a batch message of `shape` (what [`batch_bytes`] writes for values
    /// of that shape).
    pub fn batch_len(&self, shape: &Shape) -> usize {
        self.batch_metadata(shape, &[], false).len() + self.body_len(shape)
    }
}

/// `metadata` framed as a message's: the marker, its padded length, itself and padding.
fn framed(metadata: &[u8]) -> Vec<u8> {
    let len = (metadata.len() + 8).div_ceil(8) * 8 - 8;
    let mut out = Vec::with_capacity(8 + len);
    out.extend_from_slice(&CONTINUATION);
    out.extend_from_slice(&(len as i32).to_le_bytes());
    out.extend_from_slice(metadata);
    out.resize(8 + len, 0);
    out
}

fn pad(out: &mut Vec<u8>, start: usize) {
    let len = out.len() - start;
    out.resize(start + padded(len), 0);
}

/// A column's buffers: validity, then values (text: offsets, then bytes), each padded.
fn write_column(out: &mut Vec<u8>, column: &Values) {
    let rows = column.rows();
    let start = out.len();
    let mut validity = vec![0u8; rows.div_ceil(8)];
    let valid: Vec<bool> = match column {
        Values::U64(v) => v.iter().map(Option::is_some).collect(),
        Values::F64(v) => v.iter().map(Option::is_some).collect(),
        Values::Text(v) => v.iter().map(Option::is_some).collect(),
        Values::Index(v) => v.iter().map(Option::is_some).collect(),
    };
    for (i, ok) in valid.iter().enumerate() {
        if *ok {
            validity[i / 8] |= 1 << (i % 8);
        }
    }
    out.extend_from_slice(&validity);
    pad(out, start);
    let start = out.len();
    match column {
        Values::U64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.unwrap_or(0).to_le_bytes())),
        Values::F64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.unwrap_or(0.0).to_le_bytes())),
        Values::Index(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.unwrap_or(0).to_le_bytes())),
        Values::Text(v) => {
            let mut end = 0i32;
            out.extend_from_slice(&end.to_le_bytes());
            for text in v {
                end = end.saturating_add(text.as_ref().map_or(0, |t| t.len() as i32));
                out.extend_from_slice(&end.to_le_bytes());
            }
            pad(out, start);
            let start = out.len();
            for text in v.iter().flatten() {
                out.extend_from_slice(text.as_bytes());
            }
            pad(out, start);
            return;
        }
    }
    pad(out, start);
}

/// Where a table's parts lie in its file, and the parts that do not depend on the values.
#[derive(Debug, Default)]
pub struct Layout {
    /// The magic, the schema message and the dictionary message.
    head: Vec<u8>,
    /// Where each batch's message ends, from the end of the head.
    batch_ends: Vec<u64>,
    /// The footer, its length and the closing magic.
    tail: Vec<u8>,
}

/// Where a read of a table's file lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// `head[offset..]`.
    Head(u64),
    /// Batch `index`, from `offset` within its message.
    Batch { index: usize, offset: u64 },
    /// `tail[offset..]`.
    Tail(u64),
}

impl Layout {
    /// The layout of `table`'s file of batches of `shapes`, with `dictionary` (the one
    /// dictionary's texts, when the table has an index column).
    pub fn new(table: &Table, shapes: &[Shape], dictionary: &[Arc<str>]) -> Layout {
        let mut head = MAGIC.to_vec();
        head.resize(8, 0);
        head.extend_from_slice(&table.schema_message());
        let has_dictionary = table.columns.iter().any(|(_, k)| *k == Kind::Index);
        let mut dictionary_blocks = Vec::new();
        if has_dictionary {
            let values = Values::Text(dictionary.iter().cloned().map(Some).collect());
            let message = Table {
                columns: vec![("dictionary", Kind::Text)],
            }
            .batch_message(&[values], true);
            dictionary_blocks.push(block(head.len(), &message));
            head.extend_from_slice(&message);
        }
        let mut batch_ends = Vec::with_capacity(shapes.len());
        let mut record_blocks = Vec::with_capacity(shapes.len());
        let mut at = head.len() as u64;
        for shape in shapes {
            let len = table.batch_len(shape) as u64;
            let meta = table.batch_metadata(shape, &[], false).len();
            record_blocks.push(arrow_ipc::Block::new(
                at as i64,
                meta as i32,
                table.body_len(shape) as i64,
            ));
            at += len;
            batch_ends.push(at - head.len() as u64);
        }
        let tail = footer(table, &dictionary_blocks, &record_blocks);
        Layout {
            head,
            batch_ends,
            tail,
        }
    }

    /// Bytes of the file.
    pub fn len(&self) -> u64 {
        self.head.len() as u64
            + self.batch_ends.last().copied().unwrap_or(0)
            + self.tail.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where byte `offset` lies.
    pub fn part_at(&self, offset: u64) -> Part {
        let head = self.head.len() as u64;
        if offset < head {
            return Part::Head(offset);
        }
        let within = offset - head;
        let batches = self.batch_ends.last().copied().unwrap_or(0);
        if within >= batches {
            return Part::Tail(within - batches);
        }
        let index = self.batch_ends.partition_point(|&end| end <= within);
        let start = index.checked_sub(1).map_or(0, |i| self.batch_ends[i]);
        Part::Batch {
            index,
            offset: within - start,
        }
    }

    /// Bytes of batch `index`'s message.
    pub fn batch_len(&self, index: usize) -> u64 {
        let start = index.checked_sub(1).map_or(0, |i| self.batch_ends[i]);
        self.batch_ends.get(index).map_or(0, |end| end - start)
    }

    pub fn head(&self) -> &[u8] {
        &self.head
    }

    pub fn tail(&self) -> &[u8] {
        &self.tail
    }

    /// Bytes the layout holds.
    pub fn heap_bytes(&self) -> u64 {
        (self.head.capacity() + self.tail.capacity() + 8 * self.batch_ends.capacity()) as u64
    }
}

/// The footer's entry for `message`, written at `at`.
fn block(at: usize, message: &[u8]) -> arrow_ipc::Block {
    // The framed metadata's length is in bytes 4..8; the body follows it.
    let meta_len = message
        .get(4..8)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map_or(0, i32::from_le_bytes);
    let meta = 8 + meta_len as usize;
    arrow_ipc::Block::new(at as i64, meta as i32, (message.len() - meta) as i64)
}

fn footer(
    table: &Table,
    dictionaries: &[arrow_ipc::Block],
    batches: &[arrow_ipc::Block],
) -> Vec<u8> {
    let mut fbb = FlatBufferBuilder::new();
    let dictionaries = fbb.create_vector(dictionaries);
    let batches = fbb.create_vector(batches);
    let mut tracker = DictionaryTracker::new(false);
    let schema = IpcSchemaEncoder::new()
        .with_dictionary_tracker(&mut tracker)
        .schema_to_fb_offset(&mut fbb, &table.schema());
    let root = {
        let mut footer = arrow_ipc::FooterBuilder::new(&mut fbb);
        footer.add_version(MetadataVersion::V5);
        footer.add_schema(schema);
        footer.add_dictionaries(dictionaries);
        footer.add_recordBatches(batches);
        footer.finish()
    };
    fbb.finish(root, None);
    let data = fbb.finished_data();
    let mut out = data.to_vec();
    out.extend_from_slice(&(data.len() as i32).to_le_bytes());
    out.extend_from_slice(MAGIC);
    out
}

/// The message of a batch of `values` (of the shape the layout was made with), exactly
/// [`Layout::batch_len`] bytes.
pub fn batch_bytes(table: &Table, values: &[Values]) -> Vec<u8> {
    table.batch_message(values, false)
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int32Type, UInt64Type};
    use arrow_array::Array;
    use arrow_ipc::reader::FileReader;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn table() -> Table {
        Table {
            columns: vec![
                ("n", Kind::U64),
                ("text", Kind::Text),
                ("x", Kind::F64),
                ("label", Kind::Index),
            ],
        }
    }

    /// A batch of `rows` random rows, some null where `nulls`.
    fn batch(rng: &mut rand::rngs::StdRng, rows: usize, nulls: bool) -> Vec<Values> {
        let maybe = |rng: &mut rand::rngs::StdRng| !nulls || rng.gen_bool(0.8);
        let n = (0..rows)
            .map(|i| maybe(rng).then_some(i as u64 * 7))
            .collect();
        let text = (0..rows)
            .map(|i| maybe(rng).then(|| Arc::from(format!("é{}", "x".repeat(i % 5)))))
            .collect();
        let x = (0..rows)
            .map(|i| maybe(rng).then_some(i as f64 / 3.0))
            .collect();
        let label = (0..rows)
            .map(|i| maybe(rng).then_some((i % 3) as i32))
            .collect();
        vec![
            Values::U64(n),
            Values::Text(text),
            Values::F64(x),
            Values::Index(label),
        ]
    }

    fn shape(values: &[Values]) -> Shape {
        Shape {
            rows: values[0].rows(),
            text_bytes: values.iter().map(Values::text_bytes).collect(),
        }
    }

    #[test]
    fn files_of_several_batches_read_back_with_the_arrow_reader() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let table = table();
        let batches: Vec<Vec<Values>> = [(3, false), (1000, true), (17, true), (64, false)]
            .iter()
            .map(|&(rows, nulls)| batch(&mut rng, rows, nulls))
            .collect();
        let dictionary: Vec<Arc<str>> = vec!["a".into(), "".into(), "ünï".into()];
        let shapes: Vec<Shape> = batches.iter().map(|b| shape(b)).collect();
        let layout = Layout::new(&table, &shapes, &dictionary);
        let mut file = layout.head().to_vec();
        for (index, values) in batches.iter().enumerate() {
            let bytes = batch_bytes(&table, values);
            // Nulls or none, a batch is the size its shape promised.
            assert_eq!(bytes.len() as u64, layout.batch_len(index));
            file.extend_from_slice(&bytes);
        }
        file.extend_from_slice(layout.tail());
        assert_eq!(file.len() as u64, layout.len());
        let reader = FileReader::try_new(std::io::Cursor::new(file), None).unwrap();
        let read: Vec<_> = reader.map(Result::unwrap).collect();
        assert_eq!(read.len(), batches.len());
        for (got, want) in read.iter().zip(&batches) {
            let Values::U64(n) = &want[0] else { panic!() };
            let col = got.column(0).as_primitive::<UInt64Type>();
            let got_n: Vec<Option<u64>> = col.iter().collect();
            assert_eq!(&got_n, n);
            let Values::Text(text) = &want[1] else {
                panic!()
            };
            let got_text: Vec<Option<Arc<str>>> = got
                .column(1)
                .as_string::<i32>()
                .iter()
                .map(|t| t.map(Arc::from))
                .collect();
            assert_eq!(&got_text, text);
            let Values::F64(x) = &want[2] else { panic!() };
            let got_x: Vec<Option<f64>> =
                got.column(2).as_primitive::<Float64Type>().iter().collect();
            assert_eq!(&got_x, x);
            let Values::Index(label) = &want[3] else {
                panic!()
            };
            let dict = got.column(3).as_dictionary::<Int32Type>();
            let keys: Vec<Option<i32>> = dict.keys().iter().collect();
            assert_eq!(&keys, label);
            let names = dict.values().as_string::<i32>();
            assert_eq!(names.value(2), "ünï");
            assert_eq!(
                dict.null_count(),
                label.iter().filter(|l| l.is_none()).count()
            );
        }
        // Every byte lands in one part, in order.
        assert_eq!(layout.part_at(0), Part::Head(0));
        let first_batch = layout.head().len() as u64;
        assert_eq!(
            layout.part_at(first_batch + layout.batch_len(0)),
            Part::Batch {
                index: 1,
                offset: 0
            }
        );
        assert_eq!(
            layout.part_at(layout.len() - 1),
            Part::Tail(layout.tail().len() as u64 - 1)
        );
    }

    #[test]
    fn an_empty_table_is_a_valid_file() {
        let layout = Layout::new(&table(), &[], &[]);
        let mut file = layout.head().to_vec();
        file.extend_from_slice(layout.tail());
        let reader = FileReader::try_new(std::io::Cursor::new(file), None).unwrap();
        assert_eq!(reader.schema().fields().len(), 4);
        assert_eq!(reader.count(), 0);
    }
}
