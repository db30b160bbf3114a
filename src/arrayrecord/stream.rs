//! Streaming access to one chunk, for chunks too large to hold in memory.
//!
//! [`LogicalStream`] reads a chunk's physical bytes in pieces of a few MiB and presents its
//! logical bytes (header, payload, zero fill) as a `Read`, verifying each block header it
//! steps over. [`HashingReader`] hashes what passes through, so the payload hash can be
//! checked at the end without a second pass. Memory stays at one piece plus decoder state.

use std::io::{self, Read};

use bytes::Bytes;

use super::error::Fault;
use super::hash::Hasher;
use super::layout::check_block_header;
use super::position::{self, BLOCK, BLOCK_HEADER};
use super::source::ByteSource;

/// Size of each positional read.
pub const PIECE: u64 = 4 << 20;

/// The logical bytes of the chunk `[begin, end)`, from logical byte 0.
pub struct LogicalStream<'a, S: ?Sized> {
    source: &'a S,
    begin: u64,
    end: u64,
    /// Next physical position to deliver.
    pos: u64,
    /// Physical bytes `[buf_pos, buf_pos + buf.len())` read ahead.
    buf: Bytes,
    buf_pos: u64,
}

/// Wraps a fault so it can travel through `io::Read`.
pub fn fault_to_io(f: Fault) -> io::Error {
    io::Error::other(FaultBox(std::sync::Mutex::new(Some(f))))
}

/// Recovers a fault that travelled through `io::Read`. Any other error came from a
/// decompressor, i.e. the compressed bytes are bad.
pub fn io_to_fault(e: io::Error) -> Fault {
    if e.get_ref().is_some_and(|inner| inner.is::<FaultBox>()) {
        if let Some(inner) = e.into_inner() {
            if let Ok(boxed) = inner.downcast::<FaultBox>() {
                if let Some(f) = boxed.0.lock().ok().and_then(|mut g| g.take()) {
                    return f;
                }
            }
        }
        return Fault::Corrupt("decoding failed".into());
    }
    Fault::Corrupt(format!("decompression failed: {e}"))
}

#[derive(Debug)]
struct FaultBox(std::sync::Mutex<Option<Fault>>);

impl std::fmt::Display for FaultBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.lock().ok().as_deref() {
            Some(Some(Fault::Corrupt(d))) | Some(Some(Fault::Unsupported(d))) => f.write_str(d),
            Some(Some(Fault::Limit(d))) => f.write_str(d),
            Some(Some(Fault::Io(e))) => write!(f, "{e}"),
            _ => f.write_str("chunk decoding fault"),
        }
    }
}

impl std::error::Error for FaultBox {}

impl<'a, S: ByteSource + ?Sized> LogicalStream<'a, S> {
    pub fn new(source: &'a S, begin: u64, end: u64) -> Self {
        Self {
            source,
            begin,
            end,
            pos: begin,
            buf: Bytes::new(),
            buf_pos: begin,
        }
    }

    /// Physical bytes `[pos, pos + len)`, served from the read-ahead piece when possible.
    fn physical(&mut self, pos: u64, len: u64) -> Result<Bytes, Fault> {
        let in_buf = pos >= self.buf_pos && pos + len <= self.buf_pos + self.buf.len() as u64;
        if !in_buf {
            let want = PIECE.max(len).min(self.end - pos);
            self.buf = self.source.read_at(pos, want as usize)?;
            self.buf_pos = pos;
        }
        let start = (pos - self.buf_pos) as usize;
        Ok(self.buf.slice(start..start + len as usize))
    }

    /// Steps over (and checks) a block header if the position is at a boundary.
    fn skip_block_header(&mut self) -> Result<(), Fault> {
        if self.pos % BLOCK == 0 && self.pos < self.end {
            let header = self.physical(self.pos, BLOCK_HEADER)?;
            check_block_header(&header, self.pos, self.begin, self.end)?;
            self.pos += BLOCK_HEADER;
        }
        Ok(())
    }

    fn read_logical(&mut self, out: &mut [u8]) -> Result<usize, Fault> {
        self.skip_block_header()?;
        if self.pos >= self.end || out.is_empty() {
            return Ok(0);
        }
        let n = position::remaining_in_block(self.pos)
            .min(self.end - self.pos)
            .min(out.len() as u64);
        let bytes = self.physical(self.pos, n)?;
        out[..n as usize].copy_from_slice(&bytes);
        self.pos += n;
        Ok(n as usize)
    }

    /// Checks the block headers between the current position and the chunk end (those in
    /// the zero fill that nobody reads).
    pub fn finish(&mut self) -> Result<(), Fault> {
        let mut at = position::next_boundary_at_or_after(self.pos).unwrap_or(u64::MAX);
        while at < self.end {
            let header = self.physical(at, BLOCK_HEADER)?;
            check_block_header(&header, at, self.begin, self.end)?;
            at = at.saturating_add(BLOCK);
        }
        Ok(())
    }
}

impl<S: ByteSource + ?Sized> Read for LogicalStream<'_, S> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.read_logical(out).map_err(fault_to_io)
    }
}

/// Hashes everything read through it.
pub struct HashingReader<R> {
    pub inner: R,
    pub hasher: Hasher,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            hasher: Hasher::new(),
        }
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(out)?;
        self.hasher.update(&out[..n]);
        Ok(n)
    }
}
