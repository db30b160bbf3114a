//! Walking every chunk of a file from offset 0 (for deep verification).
//!
//! The index-based reader only touches the chunks it needs; this walker instead follows the
//! chain of chunks from the signature to the end of the file, checking every chunk header,
//! block header and payload hash. Payloads are streamed, so memory stays bounded whatever
//! the chunk sizes claim (and sizes are bounded by the file size before anything is read).

use std::io::Read;

use super::chunk;
use super::error::{corrupt, Error, Fault, Result};
use super::position::CHUNK_HEADER;
use super::reader::{read_header, ArrayRecordReader};
use super::source::ByteSource;
use super::stream::{io_to_fault, HashingReader, LogicalStream};

/// What the walker found at one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkInfo {
    pub offset: u64,
    pub end: u64,
    pub chunk_type: u8,
    pub num_records: u64,
    pub data_size: u64,
    pub decoded_data_size: u64,
    /// First payload byte of record-holding chunks ('r', 't'): the compression type.
    pub compression: Option<u8>,
}

/// Iterator over the chunks of a file; stops after the first error.
pub struct ChunkWalker<'a, S: ?Sized> {
    source: &'a S,
    name: String,
    size: Option<u64>,
    pos: u64,
    failed: bool,
}

/// Walks the chunks of `source` from offset 0.
pub fn walk_chunks<'a, S: ByteSource + ?Sized>(source: &'a S, name: &str) -> ChunkWalker<'a, S> {
    ChunkWalker {
        source,
        name: name.to_owned(),
        size: None,
        pos: 0,
        failed: false,
    }
}

impl<S: ByteSource + ?Sized> ChunkWalker<'_, S> {
    fn step(&mut self, size: u64) -> Result<ChunkInfo, Fault> {
        let begin = self.pos;
        let (header, end) = read_header(self.source, begin, size)?;
        let mut stream = LogicalStream::new(self.source, begin, end);
        (&mut stream)
            .take(CHUNK_HEADER)
            .read_to_end(&mut Vec::new())
            .map_err(io_to_fault)?;
        let mut data = HashingReader::new((&mut stream).take(header.data_size));
        let mut first = [0u8; 1];
        let compression = match header.chunk_type {
            chunk::SIMPLE | chunk::TRANSPOSED if header.data_size > 0 => {
                data.read_exact(&mut first).map_err(io_to_fault)?;
                Some(first[0])
            }
            _ => None,
        };
        std::io::copy(&mut data, &mut std::io::sink()).map_err(io_to_fault)?;
        if data.hasher.finish() != header.data_hash {
            return Err(corrupt("data hash mismatch"));
        }
        stream.finish()?;
        self.pos = end;
        Ok(ChunkInfo {
            offset: begin,
            end,
            chunk_type: header.chunk_type,
            num_records: header.num_records,
            data_size: header.data_size,
            decoded_data_size: header.decoded_data_size,
            compression,
        })
    }
}

impl<S: ByteSource + ?Sized> Iterator for ChunkWalker<'_, S> {
    type Item = Result<ChunkInfo>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let size = match self.size {
            Some(s) => s,
            None => match self.source.size() {
                Ok(s) => *self.size.insert(s),
                Err(e) => {
                    self.failed = true;
                    return Some(Err(Fault::Io(e).at(&self.name, 0)));
                }
            },
        };
        if self.pos >= size {
            return None;
        }
        let at = self.pos;
        let result = self.step(size).map_err(|f| f.at(&self.name, at));
        self.failed = result.is_err();
        Some(result)
    }
}

impl<S: ByteSource> ArrayRecordReader<S> {
    /// Walks and verifies every chunk of the file (hashes, block headers), and checks that
    /// the chunk chain agrees with the index. Returns the chunk list.
    pub fn verify_all(&self) -> Result<Vec<ChunkInfo>> {
        let chunks = walk_chunks(self.source(), self.name()).collect::<Result<Vec<_>>>()?;
        let bad = |offset: u64, detail: String| Error::Corrupt {
            name: self.name().to_owned(),
            offset,
            detail,
        };
        match chunks.first() {
            Some(c) if c.chunk_type == chunk::SIGNATURE => {}
            _ => return Err(bad(0, "file does not start with a signature chunk".into())),
        }
        for c in &chunks {
            let known = matches!(
                c.chunk_type,
                chunk::SIGNATURE
                    | chunk::METADATA
                    | chunk::PADDING
                    | chunk::SIMPLE
                    | chunk::TRANSPOSED
            );
            if !known && c.num_records > 0 {
                return Err(Error::Unsupported {
                    name: self.name().to_owned(),
                    offset: c.offset,
                    detail: format!("unknown chunk type 0x{:02x} with records", c.chunk_type),
                });
            }
        }
        let mut walked = chunks
            .iter()
            .filter(|c| c.offset < self.footer_offset() && c.num_records > 0);
        for k in 0..self.num_chunks() {
            let span = self.read_chunk_span(k);
            match walked.next() {
                Some(c) if c.offset == span => {}
                _ => {
                    return Err(bad(
                        span,
                        format!("index entry {k} does not match the chunk chain"),
                    ))
                }
            }
        }
        if walked.next().is_some() || !chunks.iter().any(|c| c.offset == self.footer_offset()) {
            return Err(bad(
                self.footer_offset(),
                "chunk chain and index disagree".into(),
            ));
        }
        Ok(chunks)
    }

    fn read_chunk_span(&self, k: u64) -> u64 {
        let per = self.group_size().max(1);
        self.chunk_span(k.saturating_mul(per))
            .map_or(0, |r| r.start)
    }
}
