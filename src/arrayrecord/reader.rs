//! The ArrayRecord reader (spec 6.5): random access to records through the index.
//!
//! `open` reads only the postscript block and the footer chunk, and validates the index as
//! strictly as the reference reader relies on it (uniform groups, increasing offsets, counts
//! adding up). A record read then costs one positional read of its chunk's span. Every number
//! taken from the file is range-checked before it sizes an allocation, so a hostile file
//! yields an error, never a panic or an out-of-memory.

use std::io::{self, Read, Write};
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use super::chunk::{self, ChunkHeader, Records};
use super::compress::{self, DecodeCaps};
use super::cursor::ChunkCursor;
use super::error::{corrupt, Error, Fault, Result};
use super::position::{self, BLOCK, BLOCK_HEADER, CHUNK_HEADER};
use super::proto::{FooterEntry, Metadata, Postscript, POSTSCRIPT_MAGIC};
use super::source::ByteSource;
use super::stream::io_to_fault;

/// Memory limits against hostile or oversized files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderLimits {
    /// Largest decoded chunk `read`/`read_chunk` will materialize (default 4 GiB).
    pub max_in_memory_record_bytes: u64,
    /// Largest decoded chunk `read_into` will stream (default 64 GiB).
    pub max_streamed_record_bytes: u64,
    /// Largest zstd window accepted (default 31, the most the reference writes).
    pub max_zstd_window_log: u32,
}

impl Default for ReaderLimits {
    fn default() -> Self {
        Self {
            max_in_memory_record_bytes: 4 << 30,
            max_streamed_record_bytes: 64 << 30,
            max_zstd_window_log: 31,
        }
    }
}

/// One index entry, validated.
#[derive(Debug, Clone, Copy)]
struct Entry {
    offset: u64,
    num_records: u64,
    /// What the index claims the chunk decodes to (verified when the chunk is read).
    decoded_data_size: u64,
}

/// Random access to the records of one ArrayRecord file.
pub struct ArrayRecordReader<S> {
    source: S,
    name: String,
    size: u64,
    footer_offset: u64,
    index: Vec<Entry>,
    num_records: u64,
    group_size: u64,
    writer_options: String,
    limits: ReaderLimits,
}

/// Reads and checks the header of the chunk at `begin`, which must end by `limit`.
pub(crate) fn read_header<S: ByteSource + ?Sized>(
    source: &S,
    begin: u64,
    limit: u64,
) -> Result<(ChunkHeader, u64), Fault> {
    if !position::is_chunk_boundary(begin) {
        return Err(corrupt("chunk offset is not a valid chunk boundary"));
    }
    let header_end = position::add_with_overhead(begin, CHUNK_HEADER)
        .filter(|&e| e <= limit)
        .ok_or_else(|| corrupt(format!("chunk header runs past {limit}")))?;
    let bytes = source.read_at(begin, (header_end - begin) as usize)?;
    // The 40 logical bytes, stepping over a block header that may interrupt them.
    let mut raw = [0u8; 40];
    let (mut got, mut p) = (0usize, begin);
    while got < raw.len() {
        if p % BLOCK == 0 {
            p += BLOCK_HEADER;
        }
        let n = position::remaining_in_block(p).min((raw.len() - got) as u64) as usize;
        let at = (p - begin) as usize;
        let piece = bytes
            .get(at..at + n)
            .ok_or_else(|| corrupt("short chunk header read"))?;
        raw[got..got + n].copy_from_slice(piece);
        got += n;
        p += n as u64;
    }
    let header = ChunkHeader::decode(&raw)?;
    let end = position::chunk_end(begin, header.data_size, header.num_records)
        .filter(|&e| e <= limit)
        .ok_or_else(|| {
            corrupt(format!(
                "chunk (data_size {}, {} records) runs past {limit}",
                header.data_size, header.num_records
            ))
        })?;
    Ok((header, end))
}

/// Checks the chunk type of a chunk that should hold records.
fn require_simple(header: &ChunkHeader) -> Result<(), Fault> {
    match header.chunk_type {
        chunk::SIMPLE => Ok(()),
        chunk::TRANSPOSED => Err(Fault::Unsupported(
            "transposed chunk (written with transpose:true); not supported".into(),
        )),
        t => Err(corrupt(format!(
            "expected a simple chunk, found chunk type 0x{t:02x}"
        ))),
    }
}

/// Reads, verifies and decodes the simple chunk at `begin` (ending by `limit`) in memory, in
/// one pass: block headers are checked as they are crossed, the data is hashed as it is fed to
/// the decompressor, and the data hash and the zero fill are checked at the end. A data-hash or
/// block-header fault takes precedence over a decoding fault it may have caused.
pub(crate) fn decode_chunk<S: ByteSource + ?Sized>(
    source: &S,
    begin: u64,
    limit: u64,
    caps: DecodeCaps,
    max: u64,
) -> Result<(ChunkHeader, Records), Fault> {
    std::thread::scope(|scope| {
        let (mut cursor, header) = ChunkCursor::open(source, begin, limit)?;
        require_simple(&header)?;
        if header.decoded_data_size > max {
            return Err(Fault::Limit(format!(
                "decoded_data_size {} exceeds the in-memory limit {max}",
                header.decoded_data_size
            )));
        }
        // Large chunks are read, checked and hashed by a helper while this thread decodes.
        if header.data_size >= READ_AHEAD_MIN_SPAN {
            cursor.read_ahead(scope);
        }
        match decode_payload(&mut cursor, &header, caps) {
            Ok(records) => {
                cursor.finish()?;
                Ok((header, records))
            }
            Err(Fault::Io(e)) => Err(Fault::Io(e)),
            Err(fault) => {
                cursor.finish()?;
                Err(fault)
            }
        }
    })
}

/// Reads the compression byte, the sizes buffer (decoded and checked) of a simple chunk.
fn read_sizes<S: ByteSource + ?Sized>(
    cursor: &mut ChunkCursor<'_, S>,
    header: &ChunkHeader,
    caps: DecodeCaps,
) -> Result<(u8, Vec<u64>), Fault> {
    let mut ct = [0u8; 1];
    cursor
        .read_exact(&mut ct)
        .map_err(|_| corrupt("simple chunk payload is empty"))?;
    let sizes_len = cursor.read_varint()?;
    let sizes_cap = chunk::max_sizes_len(header.num_records)
        .saturating_mul(2)
        .saturating_add(1024);
    if sizes_len > cursor.data_left() {
        return Err(corrupt("sizes buffer runs past the chunk payload"));
    }
    if sizes_len > sizes_cap {
        return Err(corrupt(format!(
            "sizes buffer length {sizes_len} is implausible"
        )));
    }
    let sizes_raw = cursor.read_vec(sizes_len)?;
    let sizes_buf = if ct[0] == 0 {
        sizes_raw
    } else {
        compress::decompress_buffer(
            ct[0],
            &sizes_raw,
            chunk::max_sizes_len(header.num_records),
            false,
            caps,
        )?
    };
    let sizes = chunk::parse_sizes(&sizes_buf, header.num_records, header.decoded_data_size)?;
    Ok((ct[0], sizes))
}

/// Decodes a simple chunk payload from the cursor into memory.
fn decode_payload<S: ByteSource + ?Sized>(
    cursor: &mut ChunkCursor<'_, S>,
    header: &ChunkHeader,
    caps: DecodeCaps,
) -> Result<Records, Fault> {
    let (ct, sizes) = read_sizes(cursor, header, caps)?;
    let expected = header.decoded_data_size;
    let values = match ct {
        // Uncompressed: the records are a slice of what was read when no block header
        // interrupts them.
        0 => cursor.read_rest()?,
        b'z' => {
            // The riegeli length prefix: read, not trusted (the cap is the header's).
            cursor.read_varint()?;
            Bytes::from(compress::zstd_from_runs(cursor, expected, caps)?)
        }
        _ => {
            cursor.read_varint()?;
            let initial = expected.min(cursor.data_left().saturating_mul(4).saturating_add(4096));
            let mut out = Vec::with_capacity(usize::try_from(initial).unwrap_or(0));
            compress::decoder(ct, &mut *cursor, caps)?
                .take(expected.saturating_add(1))
                .read_to_end(&mut out)
                .map_err(io_to_fault)?;
            Bytes::from(out)
        }
    };
    if values.len() as u64 != expected {
        return Err(corrupt(format!(
            "values buffer has {} bytes, header says {expected}",
            values.len(),
        )));
    }
    Ok(Records { values, sizes })
}

impl<S: ByteSource> ArrayRecordReader<S> {
    /// Opens a file with default limits; `name` appears in every error message.
    pub fn open(source: S, name: impl Into<String>) -> Result<Self> {
        Self::open_with_limits(source, name, ReaderLimits::default())
    }

    /// Opens a file with explicit limits.
    pub fn open_with_limits(
        source: S,
        name: impl Into<String>,
        limits: ReaderLimits,
    ) -> Result<Self> {
        let name = name.into();
        let size = source.size().map_err(|e| Fault::Io(e).at(&name, 0))?;
        let mut reader = Self {
            source,
            name,
            size,
            footer_offset: 0,
            index: Vec::new(),
            num_records: 0,
            group_size: 0,
            writer_options: String::new(),
            limits,
        };
        let footer_offset = reader.read_postscript()?;
        reader.read_footer(footer_offset)?;
        Ok(reader)
    }

    fn caps(&self) -> DecodeCaps {
        DecodeCaps {
            zstd_window_log_max: self.limits.max_zstd_window_log,
        }
    }

    fn corrupt_at(&self, offset: u64, detail: impl Into<String>) -> Error {
        corrupt(detail).at(&self.name, offset)
    }

    /// Reads the postscript (the chunk at the last block) and returns the footer offset.
    fn read_postscript(&self) -> Result<u64> {
        if self.size < 2 * BLOCK || self.size % BLOCK != 0 {
            return Err(self.corrupt_at(
                self.size,
                format!(
                    "file size {} is not a multiple of 65536 of at least 131072",
                    self.size
                ),
            ));
        }
        let begin = self.size - BLOCK;
        let (_, records) = decode_chunk(&self.source, begin, self.size, self.caps(), BLOCK)
            .map_err(|f| f.at(&self.name, begin))?;
        let first = records
            .get(0)
            .ok_or_else(|| self.corrupt_at(begin, "postscript chunk holds no record"))?;
        let ps = Postscript::decode(&first)
            .ok_or_else(|| self.corrupt_at(begin, "postscript is not a valid RiegeliPostscript"))?;
        if ps.magic != Some(POSTSCRIPT_MAGIC) {
            return Err(self.corrupt_at(begin, "postscript magic mismatch"));
        }
        let footer_offset = ps
            .footer_offset
            .ok_or_else(|| self.corrupt_at(begin, "postscript lacks footer_offset"))?;
        if footer_offset < 64
            || footer_offset >= begin
            || !position::is_chunk_boundary(footer_offset)
        {
            return Err(
                self.corrupt_at(begin, format!("footer_offset {footer_offset} out of range"))
            );
        }
        Ok(footer_offset)
    }

    /// Reads the footer chunk and builds the validated index.
    fn read_footer(&mut self, footer_offset: u64) -> Result<()> {
        let fo = footer_offset;
        let limit = self.size - BLOCK;
        // Entries have distinct chunk offsets below the footer, each at most 34 bytes encoded:
        // a footer decoding to more is a bomb, refused before it is decoded.
        let max = self
            .limits
            .max_in_memory_record_bytes
            .min(fo.saturating_mul(34).saturating_add(1 << 20));
        let (header, records) = decode_chunk(&self.source, fo, limit, self.caps(), max)
            .map_err(|f| f.at(&self.name, fo))?;
        let mut records = records.slices();
        let meta = records
            .next()
            .and_then(Metadata::decode)
            .flatten()
            .ok_or_else(|| {
                self.corrupt_at(
                    fo,
                    "footer lacks RiegeliFooterMetadata.array_record_metadata",
                )
            })?;
        if meta.version != Some(1) {
            return Err(self.corrupt_at(
                fo,
                format!("unsupported ArrayRecord version {:?}", meta.version),
            ));
        }
        let num_chunks = meta.num_chunks.unwrap_or(0);
        if num_chunks != header.num_records - 1 {
            return Err(self.corrupt_at(
                fo,
                format!(
                    "num_chunks {num_chunks} but footer holds {} entries",
                    header.num_records - 1
                ),
            ));
        }
        self.footer_offset = fo;
        self.writer_options = meta.writer_options.unwrap_or_default();
        self.num_records = meta.num_records.unwrap_or(0);
        self.index = self.parse_index(records)?;
        self.check_groups()
    }

    fn parse_index<'a>(&self, records: impl Iterator<Item = &'a [u8]>) -> Result<Vec<Entry>> {
        let fo = self.footer_offset;
        let mut index: Vec<Entry> = Vec::with_capacity(records.size_hint().0);
        for (k, raw) in records.enumerate() {
            let e = FooterEntry::decode(raw).ok_or_else(|| {
                self.corrupt_at(
                    fo,
                    format!("index entry {k} is not a valid ArrayRecordFooter"),
                )
            })?;
            let offset = e.chunk_offset.ok_or_else(|| {
                self.corrupt_at(fo, format!("index entry {k} lacks chunk_offset"))
            })?;
            let after_previous = index.last().map_or(64, |p| p.offset + 1);
            if offset < after_previous || offset >= fo || !position::is_chunk_boundary(offset) {
                return Err(self.corrupt_at(
                    fo,
                    format!("index entry {k}: chunk offset {offset} out of order or out of range"),
                ));
            }
            index.push(Entry {
                offset,
                num_records: e.num_records.unwrap_or(0),
                decoded_data_size: e.decoded_data_size.unwrap_or(0),
            });
        }
        Ok(index)
    }

    /// Uniform groups, counts that add up, and counts that fit their spans (the record-count
    /// rule makes a chunk at least `num_records` bytes long).
    fn check_groups(&mut self) -> Result<()> {
        let fo = self.footer_offset;
        self.group_size = self.index.first().map_or(0, |e| e.num_records);
        let mut total: u64 = 0;
        for k in 0..self.index.len() {
            let entry = self.index[k];
            let span = self.span_of_chunk(k);
            let last = k + 1 == self.index.len();
            let uniform = if last {
                entry.num_records <= self.group_size
            } else {
                entry.num_records == self.group_size
            };
            if entry.num_records == 0 || !uniform || entry.num_records > span.end - span.start {
                return Err(self.corrupt_at(
                    fo,
                    format!(
                    "index entry {k}: {} records (group size {}) do not fit the uniform grouping",
                    entry.num_records, self.group_size
                ),
                ));
            }
            total = total.saturating_add(entry.num_records);
        }
        if total != self.num_records {
            return Err(self.corrupt_at(
                fo,
                format!(
                    "index counts {total} records, metadata says {}",
                    self.num_records
                ),
            ));
        }
        Ok(())
    }

    /// Physical range from chunk k's begin to the next chunk (or the footer).
    fn span_of_chunk(&self, k: usize) -> Range<u64> {
        let start = self.index.get(k).map_or(self.footer_offset, |e| e.offset);
        let end = self
            .index
            .get(k + 1)
            .map_or(self.footer_offset, |e| e.offset);
        start..end
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.num_records
    }

    /// Whether the file holds no record.
    pub fn is_empty(&self) -> bool {
        self.num_records == 0
    }

    /// Number of data chunks.
    /// Memory the open reader keeps (its chunk index and writer options).
    pub fn index_bytes(&self) -> u64 {
        (self.index.len() * std::mem::size_of::<Entry>() + self.writer_options.len()) as u64
    }

    pub fn num_chunks(&self) -> u64 {
        self.index.len() as u64
    }

    /// Records per chunk (all chunks but the last); 0 for an empty file.
    pub fn group_size(&self) -> u64 {
        self.group_size
    }

    /// The writer options string stored by the writer.
    pub fn writer_options(&self) -> &str {
        &self.writer_options
    }

    /// The name given at open.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Begin offset of the footer chunk.
    pub fn footer_offset(&self) -> u64 {
        self.footer_offset
    }

    /// The underlying source.
    pub fn source(&self) -> &S {
        &self.source
    }

    fn locate(&self, index: u64) -> Result<(usize, usize)> {
        if index >= self.num_records || self.group_size == 0 {
            return Err(Error::IndexOutOfRange {
                name: self.name.clone(),
                index,
                len: self.num_records,
            });
        }
        Ok((
            (index / self.group_size) as usize,
            (index % self.group_size) as usize,
        ))
    }

    /// Physical byte range holding the chunk of record `record_index`: from the chunk's begin
    /// to the next chunk (or the footer), so it may include a trailing padding chunk. One
    /// ranged read of it serves every record of that chunk.
    pub fn chunk_span(&self, record_index: u64) -> Result<Range<u64>> {
        let (k, _) = self.locate(record_index)?;
        Ok(self.span_of_chunk(k))
    }

    /// Decoded size of the chunk holding record `record_index`, from the index alone (no read).
    /// With `group_size` 1 (the SDS layout) this is exactly the record's length, which lets a
    /// caller choose between an in-memory read and [`ArrayRecordReader::read_into`]. The value
    /// is what the file claims; reads still verify it.
    pub fn chunk_decoded_len(&self, record_index: u64) -> Result<u64> {
        let (k, _) = self.locate(record_index)?;
        Ok(self.index.get(k).map_or(0, |e| e.decoded_data_size))
    }

    /// Reads, verifies and decodes chunk `k` in memory.
    fn load_chunk(&self, k: usize) -> Result<Records> {
        let span = self.span_of_chunk(k);
        let max = self.limits.max_in_memory_record_bytes;
        // A span far larger than the decoded limit cannot be a chunk we accept in memory.
        let span_limit = max.saturating_add(max / 64).saturating_add(1 << 20);
        let len = span.end - span.start;
        if len > span_limit {
            return Err(Fault::Limit(format!(
                "chunk span of {len} bytes exceeds the in-memory limit; use read_into"
            ))
            .at(&self.name, span.start));
        }
        let expected = self.index.get(k).map_or(0, |e| e.num_records);
        let (header, records) = decode_chunk(&self.source, span.start, span.end, self.caps(), max)
            .map_err(|f| f.at(&self.name, span.start))?;
        if header.num_records != expected {
            return Err(self.corrupt_at(
                span.start,
                format!(
                    "chunk holds {} records, index says {expected}",
                    header.num_records
                ),
            ));
        }
        Ok(records)
    }

    /// Reads record `index` (one positional read of its chunk's span).
    pub fn read(&self, index: u64) -> Result<Bytes> {
        let (k, local) = self.locate(index)?;
        let offset = self.span_of_chunk(k).start;
        self.load_chunk(k)?
            .get(local)
            .ok_or_else(|| self.corrupt_at(offset, "record missing from chunk"))
    }

    /// All records of data chunk `k`.
    pub fn read_chunk(&self, k: u64) -> Result<Vec<Bytes>> {
        if k >= self.num_chunks() {
            return Err(Error::IndexOutOfRange {
                name: self.name.clone(),
                index: k,
                len: self.num_chunks(),
            });
        }
        Ok(self.load_chunk(k as usize)?.into_vec())
    }

    /// Streams record `index` into `sink` without holding its chunk in memory; returns the
    /// record length. The payload hash is only known at the end: on error the sink may hold
    /// partial or unverified bytes and must be discarded.
    pub fn read_into(&self, index: u64, sink: &mut dyn Write) -> Result<u64> {
        self.read_into_sink(index, &mut WriteSink::new(sink))
    }

    /// [`read_into`](Self::read_into) for a sink that lends its own buffers: the decompressor
    /// writes the record straight into them.
    pub fn read_into_sink(&self, index: u64, sink: &mut dyn RecordSink) -> Result<u64> {
        let (k, local) = self.locate(index)?;
        let span = self.span_of_chunk(k);
        let expected = self.index.get(k).map_or(0, |e| e.num_records);
        self.stream_record(span.clone(), expected, local, sink)
            .map_err(|f| f.at(&self.name, span.start))
    }

    /// The most memory streaming record `index` ([`read_into_sink`](Self::read_into_sink))
    /// takes, besides what the sink holds: the cursor's pieces (with read-ahead for a large
    /// span), the sizes buffer, and the decoder (segments or libzstd's streaming state and
    /// window, brotli's window and tables, snappy's whole block, see
    /// `decode_memory`). Computed from the chunk's header and first data bytes (reads of one
    /// block) and the constants of the streaming code, so a caller can charge it before
    /// streaming: a hostile chunk's claims make the figure large, never the allocation.
    pub fn stream_working_set(&self, index: u64) -> Result<u64> {
        let (k, _) = self.locate(index)?;
        let span = self.span_of_chunk(k);
        self.peek_working_set(span.clone())
            .map_err(|f| f.at(&self.name, span.start))
    }

    fn peek_working_set(&self, span: Range<u64>) -> Result<u64, Fault> {
        let (mut cursor, header) = ChunkCursor::peek(&self.source, span.start, span.end)?;
        require_simple(&header)?;
        let span_len = span.end - span.start;
        let pieces = super::cursor::memory_bound(span_len, span_len >= READ_AHEAD_MIN_SPAN);
        let mut ct = [0u8; 1];
        cursor
            .read_exact(&mut ct)
            .map_err(|_| corrupt("simple chunk payload is empty"))?;
        let sizes_len = cursor.read_varint()?;
        let sizes_cap = chunk::max_sizes_len(header.num_records);
        // Read as is, decompressed, parsed to one u64 per record.
        let sizes = sizes_len
            .saturating_add(sizes_cap)
            .saturating_add(header.num_records.saturating_mul(8));
        cursor.skip(sizes_len)?;
        if ct[0] != 0 {
            cursor.read_varint()?;
        }
        // A frame header is at most 18 bytes.
        let mut head = vec![0u8; cursor.data_left().min(18) as usize];
        cursor.read_exact(&mut head)?;
        let decoder = decode_memory(ct[0], &head, &header, span_len, self.caps())?;
        Ok(pieces.saturating_add(sizes).saturating_add(decoder))
    }

    fn stream_record(
        &self,
        span: Range<u64>,
        expected: u64,
        local: usize,
        sink: &mut dyn RecordSink,
    ) -> Result<u64, Fault> {
        if span.end - span.start < READ_AHEAD_MIN_SPAN {
            let (cursor, header) = ChunkCursor::open(&self.source, span.start, span.end)?;
            return self.stream_from(cursor, header, expected, local, sink);
        }
        std::thread::scope(|scope| {
            let (mut cursor, header) = ChunkCursor::open(&self.source, span.start, span.end)?;
            cursor.read_ahead(scope);
            self.stream_from(cursor, header, expected, local, sink)
        })
    }

    fn stream_from(
        &self,
        mut cursor: ChunkCursor<'_, S>,
        header: ChunkHeader,
        expected: u64,
        local: usize,
        sink: &mut dyn RecordSink,
    ) -> Result<u64, Fault> {
        require_simple(&header)?;
        if header.num_records != expected {
            return Err(corrupt(format!(
                "chunk holds {} records, index says {expected}",
                header.num_records
            )));
        }
        if header.decoded_data_size > self.limits.max_streamed_record_bytes {
            return Err(Fault::Limit(format!(
                "decoded_data_size {} exceeds the streaming limit {}",
                header.decoded_data_size, self.limits.max_streamed_record_bytes
            )));
        }
        match stream_payload(&mut cursor, &header, local, self.caps(), sink) {
            Ok(written) => {
                cursor.finish()?;
                Ok(written)
            }
            Err(Fault::Io(e)) => Err(Fault::Io(e)),
            Err(fault) => {
                cursor.finish()?;
                Err(fault)
            }
        }
    }
}

/// What decoding a streamed chunk's values (compression `ct`, starting with `head`) takes in
/// memory at most: see [`ArrayRecordReader::stream_working_set`].
fn decode_memory(
    ct: u8,
    head: &[u8],
    header: &ChunkHeader,
    span_len: u64,
    caps: DecodeCaps,
) -> Result<u64, Fault> {
    // `stream_payload` allocates this buffer for any decoder but the segmented one.
    let buffer = STREAM_BUFFER as u64;
    Ok(match ct {
        0 => buffer,
        // Segments are used for records of SEGMENTED_MIN bytes or more; which record is
        // read is not known here, so the larger of the two ways is priced.
        b'z' => {
            let streamed = compress::zstd_decode_memory(head, caps, false)
                .ok_or_else(|| corrupt("values do not start with a zstd frame header"))?;
            let segmented = compress::zstd_decode_memory(head, caps, true).unwrap_or(0);
            (streamed + buffer).max(segmented)
        }
        b'b' => BROTLI_STREAM_MEMORY + buffer,
        // The whole compressed block (read to the end: up to twice its length in capacity)
        // and the whole decoded block.
        b's' => span_len
            .saturating_mul(2)
            .saturating_add(header.decoded_data_size)
            .saturating_add(buffer),
        other => {
            return Err(Fault::Unsupported(format!(
                "unknown compression type 0x{other:02x}"
            )))
        }
    })
}

/// The most a brotli stream decoder holds: a ring buffer of the largest window the format
/// allows (2^24 bytes; large windows are not enabled), its Huffman tables (at most 256 trees
/// each for literals, commands and distances, under 4 MiB together) and its 64 KiB input
/// buffer.
const BROTLI_STREAM_MEMORY: u64 = (1 << 24) + (4 << 20) + (64 << 10);

/// The buffer [`stream_payload`] streams non-segmented values through.
const STREAM_BUFFER: usize = 256 * 1024;

/// Chunks spanning at least this many bytes are streamed with read-ahead (a helper thread
/// reading and hashing the next pieces, see [`crate::arrayrecord::cursor`]): two pieces, so
/// there is something to read ahead.
const READ_AHEAD_MIN_SPAN: u64 = 2 * super::cursor::PIECE;

/// Reads and drops up to `n` bytes from `reader` through `buf`; returns the count.
fn discard(reader: &mut dyn Read, n: u64, buf: &mut [u8]) -> Result<u64, Fault> {
    let mut done = 0u64;
    while done < n {
        let want = (n - done).min(buf.len() as u64) as usize;
        match reader.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(got) => done += got as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_to_fault(e)),
        }
    }
    Ok(done)
}

/// Reads up to `n` bytes from `reader` straight into the buffers `sink` lends; returns the
/// count.
fn pump(reader: &mut dyn Read, n: u64, sink: &mut dyn RecordSink) -> Result<u64, Fault> {
    let mut done = 0u64;
    while done < n {
        let want = usize::try_from(n - done).unwrap_or(usize::MAX);
        let space = sink.buffer(want).map_err(Fault::Io)?;
        if space.is_empty() {
            return Err(Fault::Io(io::Error::other("the record sink lent no space")));
        }
        let got = match reader.read(space) {
            Ok(0) => break,
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_to_fault(e)),
        };
        sink.commit(got).map_err(Fault::Io)?;
        done += got as u64;
    }
    Ok(done)
}

/// Records from this size on are decoded with [`compress::zstd_segments`] when zstd-compressed.
const SEGMENTED_MIN: u64 = 4 << 20;

/// Decodes the zstd values buffer at the cursor into segments and hands the sink the bytes of
/// `record` (a range of the decoded values); `None` when the frame does not suit segments
/// (nothing consumed: the caller streams it instead).
fn stream_segments<S: ByteSource + ?Sized>(
    cursor: &mut ChunkCursor<'_, S>,
    header: &ChunkHeader,
    record: Range<u64>,
    caps: DecodeCaps,
    sink: &mut dyn RecordSink,
) -> Result<Option<u64>, Fault> {
    let mut at = 0u64;
    let mut written = 0u64;
    let mut emit = |segment: Arc<Vec<u8>>| -> Result<(), Fault> {
        let here = at..at + segment.len() as u64;
        at = here.end;
        let (start, end) = (record.start.max(here.start), record.end.min(here.end));
        if start < end {
            let range = (start - here.start) as usize..(end - here.start) as usize;
            written += (range.end - range.start) as u64;
            sink.take_segment(segment, range).map_err(Fault::Io)?;
        }
        Ok(())
    };
    let limit = header.decoded_data_size;
    let Some(decoded) = compress::zstd_segments(cursor, caps, limit, &mut emit)? else {
        return Ok(None);
    };
    if decoded != limit {
        return Err(corrupt(format!(
            "values decode to {decoded} bytes, header says {limit}"
        )));
    }
    let len = record.end - record.start;
    if written != len {
        return Err(corrupt(format!(
            "record of {len} bytes, but the values hold {written} of them"
        )));
    }
    if cursor.data_left() > 0 {
        return Err(corrupt("trailing bytes after the zstd frame"));
    }
    Ok(Some(written))
}

/// Where a streamed record goes ([`ArrayRecordReader::read_into_sink`]): a sink that lends
/// buffers for the next bytes, so the decompressor writes into them directly (for a 256 MiB
/// record, a copy through an intermediate buffer was a twentieth of the decoding time).
pub trait RecordSink {
    /// Space for the next bytes of the record: not empty, at most `max` bytes (`max` >= 1).
    fn buffer(&mut self, max: usize) -> io::Result<&mut [u8]>;
    /// The first `n` bytes of the space last lent now hold the record's next bytes.
    fn commit(&mut self, n: usize) -> io::Result<()>;

    /// Bytes `range` of `segment` are the record's next bytes. A sink may keep the segment
    /// (read-only) until it has written them out, and must drop it then: the decoder reuses
    /// segments nobody else holds, and waits when eight are in use. The default copies them
    /// through [`buffer`](Self::buffer) and [`commit`](Self::commit).
    fn take_segment(&mut self, segment: Arc<Vec<u8>>, range: Range<usize>) -> io::Result<()> {
        let mut bytes = segment
            .get(range)
            .ok_or_else(|| io::Error::other("segment range out of bounds"))?;
        while !bytes.is_empty() {
            let space = self.buffer(bytes.len())?;
            let n = space.len().min(bytes.len());
            space[..n].copy_from_slice(&bytes[..n]);
            self.commit(n)?;
            bytes = &bytes[n..];
        }
        Ok(())
    }
}

/// A [`RecordSink`] over any `Write`, through a buffer of its own.
pub struct WriteSink<W> {
    out: W,
    buf: Vec<u8>,
}

impl<W: Write> WriteSink<W> {
    pub fn new(out: W) -> Self {
        WriteSink {
            out,
            buf: Vec::new(),
        }
    }
}

impl<W: Write> RecordSink for WriteSink<W> {
    fn buffer(&mut self, max: usize) -> io::Result<&mut [u8]> {
        const BUF: usize = 256 * 1024;
        if self.buf.len() < BUF {
            self.buf.resize(BUF, 0);
        }
        Ok(&mut self.buf[..max.clamp(1, BUF)])
    }

    fn commit(&mut self, n: usize) -> io::Result<()> {
        let written = self
            .buf
            .get(..n)
            .ok_or_else(|| io::Error::other(format!("committed {n} bytes, more than were lent")))?;
        self.out.write_all(written)
    }
}

/// Decodes a simple chunk payload from the cursor, writing record `local` to `sink`. Memory
/// stays at one piece of the cursor, the decoder state and one 256 KiB buffer.
fn stream_payload<S: ByteSource + ?Sized>(
    cursor: &mut ChunkCursor<'_, S>,
    header: &ChunkHeader,
    local: usize,
    caps: DecodeCaps,
    sink: &mut dyn RecordSink,
) -> Result<u64, Fault> {
    let (ct, sizes) = read_sizes(cursor, header, caps)?;
    let skip: u64 = sizes.iter().take(local).sum();
    let len = *sizes
        .get(local)
        .ok_or_else(|| corrupt("record missing from chunk"))?;
    if ct != 0 {
        // The riegeli length prefix of the values buffer: read, not trusted (the cap is the
        // header's decoded_data_size).
        cursor.read_varint()?;
    }
    if ct == b'z' && len >= SEGMENTED_MIN {
        let record = skip..skip.saturating_add(len);
        if let Some(written) = stream_segments(cursor, header, record, caps, sink)? {
            return Ok(written);
        }
    }
    let mut buf = vec![0u8; STREAM_BUFFER];
    let (skipped, written, rest) = {
        let mut values = compress::decoder(ct, &mut *cursor, caps)?
            .take(header.decoded_data_size.saturating_add(1));
        let skipped = discard(&mut values, skip, &mut buf)?;
        let written = pump(&mut values, len, sink)?;
        let rest = discard(&mut values, u64::MAX, &mut buf)?;
        (skipped, written, rest)
    };
    if skipped + written + rest != header.decoded_data_size || written != len {
        return Err(corrupt(format!(
            "values decode to {} bytes, header says {}",
            skipped + written + rest,
            header.decoded_data_size
        )));
    }
    if ct == b'z' && cursor.data_left() > 0 {
        return Err(corrupt("trailing bytes after the zstd frame"));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrayrecord::{write_records, Compression, WriterOptions};

    const MIB: u64 = 1 << 20;

    fn zstd_file(records: &[Vec<u8>], window_log: u32) -> ArrayRecordReader<Vec<u8>> {
        let options = WriterOptions {
            compression: Compression::Zstd {
                level: 1,
                window_log,
            },
            ..WriterOptions::default()
        };
        let file = write_records(options, records).unwrap();
        ArrayRecordReader::open(file, "test").unwrap()
    }

    /// Incompressible bytes: the hash of each 8-byte counter.
    fn noise(len: usize) -> Vec<u8> {
        (0..len as u64 / 8)
            .flat_map(|i| super::super::hash::hash(&i.to_le_bytes()).to_le_bytes())
            .collect()
    }

    #[test]
    fn the_working_set_of_a_compressible_record_is_its_eight_segments() {
        // 8 MiB of zeros, 1 MiB windows: a span of a few KiB (one piece, no read-ahead);
        // segments of 2 MiB (the floor, above 1 MiB + two 128 KiB blocks), eight of them.
        let reader = zstd_file(&[vec![0u8; 8 << 20]], 20);
        let working_set = reader.stream_working_set(0).unwrap();
        let segments = 8 * 2 * MIB;
        assert!(
            (segments..segments + MIB).contains(&working_set),
            "{working_set}"
        );
    }

    #[test]
    fn the_working_set_of_a_large_span_adds_the_read_ahead_pieces() {
        // 9 MiB of noise: a 9 MiB span, read ahead: five 4 MiB pieces, then the segments of
        // a 4 MiB window (4 MiB and two 128 KiB blocks, eight of them: 34 MiB).
        let reader = zstd_file(&[noise(9 << 20)], 22);
        let working_set = reader.stream_working_set(0).unwrap();
        let expected = 5 * 4 * MIB + 34 * MIB;
        assert!(
            (expected..expected + MIB).contains(&working_set),
            "{working_set}"
        );
    }

    #[test]
    fn the_working_set_of_a_small_uncompressed_record_is_its_span_twice_and_a_buffer() {
        let options = WriterOptions {
            compression: Compression::None,
            ..WriterOptions::default()
        };
        let file = write_records(options, [vec![7u8; 1000]]).unwrap();
        let reader = ArrayRecordReader::open(file, "test").unwrap();
        let span = reader.chunk_span(0).unwrap();
        let working_set = reader.stream_working_set(0).unwrap();
        // Two pieces of the span, the 256 KiB stream buffer, and a few bytes of sizes (one
        // record: its varint as stored, at most 10 bytes decoded, one u64 parsed).
        let pieces = 2 * (span.end - span.start);
        let expected = pieces + 256 * 1024;
        assert!(
            (expected..=expected + 64).contains(&working_set),
            "{working_set} for a span of {:?}",
            span
        );
    }
}
