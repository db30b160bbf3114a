//! Physical layout: block headers interleaved with the logical chunk stream (spec 3, 4.2).
//!
//! Writer side: [`PhysicalWriter`] turns "write this chunk" into bytes with a block header
//! at every 64 KiB boundary, tracking the file position itself so the sink can be any
//! `Write` (no seeking, nothing retained). Reader side: [`Span`] is a window of physical
//! bytes read in one go; logical ranges are gathered from it (zero-copy when no block header
//! interrupts them) and the block headers inside a chunk are verified against the chunk's
//! begin and end, like the reference reader does.

use std::io::{self, Write};

use bytes::{Bytes, BytesMut};

use super::chunk::{self, ChunkHeader};
use super::error::{corrupt, Fault};
use super::hash::hash;
use super::position::{self, BLOCK, BLOCK_HEADER, CHUNK_HEADER};

/// Serializes a block header at a boundary inside the chunk `[begin, end)`.
pub fn block_header(prev: u64, next: u64) -> [u8; 24] {
    let mut out = [0u8; 24];
    out[8..16].copy_from_slice(&prev.to_le_bytes());
    out[16..24].copy_from_slice(&next.to_le_bytes());
    let h = hash(&out[8..24]);
    out[0..8].copy_from_slice(&h.to_le_bytes());
    out
}

/// Checks the block header at boundary `at` against the chunk `[begin, end)` it interrupts.
pub fn check_block_header(bytes: &[u8], at: u64, begin: u64, end: u64) -> Result<(), Fault> {
    let word = |i: usize| -> u64 {
        let mut w = [0u8; 8];
        if let Some(s) = bytes.get(i..i + 8) {
            w.copy_from_slice(s);
        }
        u64::from_le_bytes(w)
    };
    if bytes.len() != 24 || hash(&bytes[8..24]) != word(0) {
        return Err(corrupt(format!("block header at {at}: hash mismatch")));
    }
    if word(8) != at - begin || word(16) != end - at {
        return Err(corrupt(format!(
            "block header at {at}: previous_chunk/next_chunk {}/{} do not match the chunk {begin}..{end}",
            word(8),
            word(16)
        )));
    }
    Ok(())
}

/// Writes chunks at tracked positions, inserting block headers.
pub struct PhysicalWriter<W> {
    sink: W,
    pos: u64,
}

const ZEROS: [u8; 4096] = [0u8; 4096];

impl<W: Write> PhysicalWriter<W> {
    pub fn new(sink: W) -> Self {
        Self { sink, pos: 0 }
    }

    /// Current file position (where the next chunk begins).
    pub fn pos(&self) -> u64 {
        self.pos
    }

    pub fn into_inner(self) -> W {
        self.sink
    }

    /// Writes one chunk (header + payload + zero fill up to `chunk_end`); returns its begin.
    pub fn write_chunk(&mut self, header: &ChunkHeader, data: &[u8]) -> io::Result<u64> {
        let begin = self.pos;
        let end = position::chunk_end(begin, header.data_size, header.num_records)
            .ok_or_else(|| io::Error::other("ArrayRecord file position overflow"))?;
        let head = header.encode();
        let mut pieces: [&[u8]; 2] = [&head, data];
        while self.pos < end {
            if self.pos % BLOCK == 0 {
                self.sink
                    .write_all(&block_header(self.pos - begin, end - self.pos))?;
                self.pos += BLOCK_HEADER;
            }
            let room = position::remaining_in_block(self.pos).min(end - self.pos);
            self.emit(&mut pieces, room as usize)?;
        }
        Ok(begin)
    }

    /// Emits `n` bytes taken from the front of `pieces`, then zeros once they run out.
    fn emit(&mut self, pieces: &mut [&[u8]; 2], mut n: usize) -> io::Result<()> {
        self.pos += n as u64;
        for piece in pieces.iter_mut() {
            let take = piece.len().min(n);
            self.sink.write_all(&piece[..take])?;
            *piece = &piece[take..];
            n -= take;
        }
        while n > 0 {
            let take = n.min(ZEROS.len());
            self.sink.write_all(&ZEROS[..take])?;
            n -= take;
        }
        Ok(())
    }

    /// Pads to the next block boundary with a padding chunk (spec 4.4).
    pub fn pad_to_block_boundary(&mut self) -> io::Result<()> {
        let mut room = position::remaining_in_block(self.pos);
        if room == 0 {
            return Ok(());
        }
        if room < CHUNK_HEADER {
            room += position::USABLE;
        }
        let zeros = vec![0u8; (room - CHUNK_HEADER) as usize];
        let header = ChunkHeader::for_data(chunk::PADDING, &zeros, 0, 0);
        self.write_chunk(&header, &zeros)?;
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.sink.flush()
    }
}

/// Physical bytes `[base, base + bytes.len())` of a file, read in one go.
pub struct Span {
    pub base: u64,
    pub bytes: Bytes,
}

impl Span {
    /// The end of the span (exclusive).
    pub fn end(&self) -> u64 {
        self.base + self.bytes.len() as u64
    }

    /// Physical bytes `[pos, pos + len)`, if inside the span.
    fn slice(&self, pos: u64, len: u64) -> Result<Bytes, Fault> {
        let start = pos
            .checked_sub(self.base)
            .and_then(|s| usize::try_from(s).ok());
        let end = start.and_then(|s| s.checked_add(usize::try_from(len).ok()?));
        match (start, end) {
            (Some(s), Some(e)) if e <= self.bytes.len() => Ok(self.bytes.slice(s..e)),
            _ => Err(corrupt(format!(
                "bytes {pos}..+{len} lie beyond the chunk's extent"
            ))),
        }
    }

    /// Logical bytes `[l0, l0 + len)` of the chunk beginning at `begin`. Zero-copy when no
    /// block header interrupts the range.
    pub fn gather(&self, begin: u64, l0: u64, len: u64) -> Result<Bytes, Fault> {
        let overflow = || corrupt("chunk position overflow");
        let mut p = position::physical_of_logical(begin, l0).ok_or_else(overflow)?;
        let first = position::remaining_in_block(p).min(len);
        if first == len {
            return self.slice(p, len);
        }
        let mut out = BytesMut::with_capacity(usize::try_from(len).map_err(|_| overflow())?);
        let mut left = len;
        while left > 0 {
            if p % BLOCK == 0 {
                p = p.checked_add(BLOCK_HEADER).ok_or_else(overflow)?;
            }
            let n = position::remaining_in_block(p).min(left);
            out.extend_from_slice(&self.slice(p, n)?);
            p += n;
            left -= n;
        }
        Ok(out.freeze())
    }

    /// Verifies every block header inside the chunk `[begin, end)`.
    pub fn verify_blocks(&self, begin: u64, end: u64) -> Result<(), Fault> {
        let mut at = position::next_boundary_at_or_after(begin)
            .ok_or_else(|| corrupt("chunk position overflow"))?;
        while at < end {
            check_block_header(&self.slice(at, BLOCK_HEADER)?, at, begin, end)?;
            at = match at.checked_add(BLOCK) {
                Some(next) => next,
                None => break,
            };
        }
        Ok(())
    }

    /// Reads and checks the chunk header of the chunk beginning at `begin`.
    pub fn chunk_header(&self, begin: u64) -> Result<ChunkHeader, Fault> {
        let raw = self.gather(begin, 0, CHUNK_HEADER)?;
        let mut bytes = [0u8; 40];
        bytes.copy_from_slice(&raw);
        ChunkHeader::decode(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_block_header_matches_reference() {
        assert_eq!(
            hex::encode(block_header(0, 64)),
            "83af70d10d884a3f00000000000000004000000000000000"
        );
    }

    #[test]
    fn chunk_written_across_boundaries_reads_back() {
        let mut w = PhysicalWriter::new(Vec::new());
        let sig = ChunkHeader::for_data(chunk::SIGNATURE, b"", 0, 0);
        w.write_chunk(&sig, b"").unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let header = ChunkHeader::for_data(chunk::SIMPLE, &data, 1, 1);
        let begin = w.write_chunk(&header, &data).unwrap();
        let end = w.pos();
        w.pad_to_block_boundary().unwrap();
        assert_eq!(w.pos() % BLOCK, 0);
        let file = w.into_inner();
        assert_eq!(file.len() as u64 % BLOCK, 0);
        let span = Span {
            base: 0,
            bytes: Bytes::from(file),
        };
        assert_eq!(span.chunk_header(begin).unwrap(), header);
        assert_eq!(span.gather(begin, 40, data.len() as u64).unwrap(), data);
        span.verify_blocks(begin, end).unwrap();
        assert!(span.verify_blocks(begin, end + 1).is_err());
    }
}
