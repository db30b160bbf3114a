//! Physical layout: block headers interleaved with the logical chunk stream (spec 3, 4.2).
//!
//! Writer side: [`PhysicalWriter`] turns "write this chunk" into bytes with a block header
//! at every 64 KiB boundary, tracking the file position itself so the sink can be any
//! `Write` (no seeking, nothing retained). Reader side: [`check_block_header`] verifies a block
//! header against the chunk it interrupts, like the reference reader does (the walk itself is
//! in `cursor` and `stream`).

use std::io::{self, BufRead, Read, Write};

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
        self.write_chunk_from(header, data)
    }

    /// [`Self::write_chunk`] with the payload read from `data` (`header.data_size` bytes), so
    /// a payload spooled to a file never needs to be in memory whole.
    pub fn write_chunk_from<R: BufRead>(
        &mut self,
        header: &ChunkHeader,
        data: R,
    ) -> io::Result<u64> {
        let begin = self.pos;
        let end = position::chunk_end(begin, header.data_size, header.num_records)
            .ok_or_else(|| io::Error::other("ArrayRecord file position overflow"))?;
        let head = header.encode();
        let mut source = (&head[..]).chain(data);
        while self.pos < end {
            if self.pos % BLOCK == 0 {
                self.sink
                    .write_all(&block_header(self.pos - begin, end - self.pos))?;
                self.pos += BLOCK_HEADER;
            }
            let room = position::remaining_in_block(self.pos).min(end - self.pos);
            self.emit(&mut source, room as usize)?;
        }
        Ok(begin)
    }

    /// Emits the next `n` bytes of `source`, then zeros once it runs out.
    fn emit(&mut self, source: &mut impl BufRead, mut n: usize) -> io::Result<()> {
        self.pos += n as u64;
        while n > 0 {
            let available = source.fill_buf()?;
            if available.is_empty() {
                break;
            }
            let take = available.len().min(n);
            self.sink.write_all(&available[..take])?;
            source.consume(take);
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
}
