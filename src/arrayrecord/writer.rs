//! The ArrayRecord writer (spec 6.6): byte-identical to the reference for the same records
//! and options (up to compressor differences documented in `compress`).
//!
//! Memory is bounded by one group: records are appended to a values buffer until the group
//! is full, then encoded as one chunk and written out. Only the index (24 bytes per chunk)
//! lives for the whole file, because the footer needs it at the end.
//!
//! A group of one record (the default) is not copied at all: its pieces go straight to the
//! compressor ([`ArrayRecordWriter::write_pieces`]). A chunk's header comes before its payload
//! but holds the payload's size and hash, so the payload is spooled first: in memory up to
//! [`SPOOL_MEMORY`], beyond that in a temporary file (in the directory given to
//! [`ArrayRecordWriter::spool_in`], else the system's). Writing a record of gigabytes thus
//! holds the caller's record and a constant, not the record twice more.

use std::io::{self, BufReader, Write};
use std::path::PathBuf;

use tempfile::{SpooledData, SpooledTempFile};

use super::chunk::{self, ChunkHeader};
use super::error::{Error, Result};
use super::hash::Hasher;
use super::layout::PhysicalWriter;
use super::options::{Compression, WriterOptions};
use super::proto::{FooterEntry, Metadata, Postscript};

/// Writes an ArrayRecord file to any `Write` sink, sequentially.
pub struct ArrayRecordWriter<W: Write> {
    out: PhysicalWriter<W>,
    options: WriterOptions,
    /// Sizes and concatenated bytes of the records of the current, unfinished group.
    sizes: Vec<u64>,
    values: Vec<u8>,
    /// (chunk offset, decoded_data_size, num_records) of every data chunk written.
    index: Vec<[u64; 3]>,
    num_records: u64,
    /// Where chunk payloads larger than [`SPOOL_MEMORY`] wait for their header.
    spool_dir: Option<PathBuf>,
}

/// A chunk payload up to this size is spooled in memory; a larger one in a temporary file.
pub const SPOOL_MEMORY: usize = 4 << 20;

const WRITER_NAME: &str = "ArrayRecord writer";

fn io_error(offset: u64, source: io::Error) -> Error {
    Error::Io {
        name: WRITER_NAME.to_owned(),
        offset,
        source,
    }
}

impl<W: Write> ArrayRecordWriter<W> {
    /// Starts a file: writes the 64-byte signature immediately.
    pub fn new(sink: W, options: WriterOptions) -> Result<Self> {
        if options.group_size == 0 || options.group_size > i32::MAX as u32 {
            return Err(Error::InvalidOptions {
                options: options.to_string(),
                detail: "group_size must be in 1..=2147483647".into(),
            });
        }
        let mut out = PhysicalWriter::new(sink);
        let signature = ChunkHeader::for_data(chunk::SIGNATURE, b"", 0, 0);
        out.write_chunk(&signature, b"")
            .map_err(|e| io_error(0, e))?;
        Ok(Self {
            out,
            options,
            sizes: Vec::new(),
            values: Vec::new(),
            index: Vec::new(),
            num_records: 0,
            spool_dir: None,
        })
    }

    /// Spools large chunk payloads in `dir` (best on the same file system as the output).
    pub fn spool_in(mut self, dir: PathBuf) -> Self {
        self.spool_dir = Some(dir);
        self
    }

    /// Appends one record; writes a chunk whenever a group is complete.
    pub fn write(&mut self, record: &[u8]) -> Result<()> {
        self.write_pieces(&[record])
    }

    /// Appends one record whose bytes are the concatenation of `pieces`.
    pub fn write_pieces(&mut self, pieces: &[&[u8]]) -> Result<()> {
        if self.options.group_size == 1 {
            // A group of one is the record itself: encoded from the caller's bytes, without
            // the copy into `values` (a record of gigabytes would otherwise be held twice).
            return self.write_single(pieces);
        }
        let len = pieces.iter().map(|piece| piece.len() as u64).sum();
        self.sizes.push(len);
        pieces
            .iter()
            .for_each(|piece| self.values.extend_from_slice(piece));
        self.num_records += 1;
        if self.sizes.len() as u64 >= u64::from(self.options.group_size) {
            self.flush_group()?;
        }
        Ok(())
    }

    /// Number of records written so far.
    pub fn len(&self) -> u64 {
        self.num_records
    }

    /// Whether no record was written yet.
    pub fn is_empty(&self) -> bool {
        self.num_records == 0
    }

    /// Writes one record as a chunk of its own (the same bytes `flush_group` writes for it).
    fn write_single(&mut self, pieces: &[&[u8]]) -> Result<()> {
        let compression = self.options.compression;
        let sizes = [pieces.iter().map(|piece| piece.len() as u64).sum()];
        let written = self.write_simple(&compression, &sizes, pieces)?;
        self.num_records += 1;
        self.chunk_written([written, sizes[0], 1])
    }

    /// Records a data chunk (offset, decoded size, records) in the index, then pads.
    fn chunk_written(&mut self, entry: [u64; 3]) -> Result<()> {
        self.index.push(entry);
        if self.options.pad_to_block_boundary {
            let pos = self.out.pos();
            self.out
                .pad_to_block_boundary()
                .map_err(|e| io_error(pos, e))?;
        }
        Ok(())
    }

    fn flush_group(&mut self) -> Result<()> {
        if self.sizes.is_empty() {
            return Ok(());
        }
        let n = self.sizes.len() as u64;
        let decoded = self.values.len() as u64;
        let compression = self.options.compression;
        // Take the buffers out to lend them while `self` is borrowed mutably; they go back
        // afterwards so their capacity is reused by the next group.
        let mut sizes = std::mem::take(&mut self.sizes);
        let mut values = std::mem::take(&mut self.values);
        let written = self.write_simple(&compression, &sizes, &[&values]);
        sizes.clear();
        values.clear();
        self.sizes = sizes;
        self.values = values;
        self.chunk_written([written?, decoded, n])
    }

    /// Writes a simple chunk holding records whose sizes are `sizes` and whose bytes are the
    /// concatenation of `values`; returns its begin offset.
    fn write_simple(
        &mut self,
        compression: &Compression,
        sizes: &[u64],
        values: &[&[u8]],
    ) -> Result<u64> {
        let pos = self.out.pos();
        let fail = |e| io_error(pos, e);
        let mut spool = Spool::new(self.spool_dir.as_ref());
        chunk::write_simple(compression, sizes, values, &mut spool).map_err(fail)?;
        let header = ChunkHeader {
            data_size: spool.len,
            data_hash: spool.hasher.clone().finish(),
            chunk_type: chunk::SIMPLE,
            num_records: sizes.len() as u64,
            decoded_data_size: values.iter().map(|piece| piece.len() as u64).sum(),
        };
        match spool.file.into_inner() {
            SpooledData::InMemory(cursor) => self.out.write_chunk(&header, cursor.get_ref()),
            SpooledData::OnDisk(mut file) => {
                io::Seek::rewind(&mut file).map_err(fail)?;
                let reader = BufReader::with_capacity(1 << 20, file);
                self.out.write_chunk_from(&header, reader)
            }
        }
        .map_err(fail)
    }

    /// Writes the last group, the footer (index), the postscript and the padding; returns
    /// the sink.
    pub fn finish(mut self) -> Result<W> {
        self.flush_group()?;
        let footer_offset = self.out.pos();
        let (sizes, values) = self.footer_records();
        let compression = self.options.compression;
        self.write_simple(&compression, &sizes, &[&values])?;
        self.pad()?;
        let postscript = Postscript::encode(footer_offset);
        let copies = postscript.repeat(3);
        let len = postscript.len() as u64;
        self.write_simple(&Compression::None, &[len, len, len], &[&copies])?;
        self.pad()?;
        let pos = self.out.pos();
        self.out.flush().map_err(|e| io_error(pos, e))?;
        Ok(self.out.into_inner())
    }

    fn pad(&mut self) -> Result<()> {
        let pos = self.out.pos();
        self.out
            .pad_to_block_boundary()
            .map_err(|e| io_error(pos, e))
    }

    /// The footer chunk's records: metadata, then one index entry per data chunk.
    fn footer_records(&self) -> (Vec<u64>, Vec<u8>) {
        let meta = Metadata::encode(
            self.index.len() as u64,
            self.num_records,
            &self.options.to_string(),
        );
        let mut values = meta.clone();
        let mut sizes = Vec::with_capacity(self.index.len() + 1);
        sizes.push(meta.len() as u64);
        for &[offset, decoded, n] in &self.index {
            let before = values.len();
            FooterEntry::encode(&mut values, offset, decoded, n);
            sizes.push((values.len() - before) as u64);
        }
        (sizes, values)
    }
}

/// A chunk payload being written: spooled (see the module docs), measured and hashed.
struct Spool {
    file: SpooledTempFile,
    hasher: Hasher,
    len: u64,
}

impl Spool {
    fn new(dir: Option<&PathBuf>) -> Self {
        let file = match dir {
            Some(dir) => SpooledTempFile::new_in(SPOOL_MEMORY, dir),
            None => SpooledTempFile::new(SPOOL_MEMORY),
        };
        Spool {
            file,
            hasher: Hasher::new(),
            len: 0,
        }
    }
}

impl Write for Spool {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Writes `records` with `options` into an in-memory file.
pub fn write_records<I, R>(options: WriterOptions, records: I) -> Result<Vec<u8>>
where
    I: IntoIterator<Item = R>,
    R: AsRef<[u8]>,
{
    let mut w = ArrayRecordWriter::new(Vec::new(), options)?;
    for r in records {
        w.write(r.as_ref())?;
    }
    w.finish()
}
