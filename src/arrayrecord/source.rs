//! Where the reader gets bytes from: positional reads over any storage.
//!
//! The reader only ever asks for whole ranges it has computed (postscript block, footer
//! chunk, one chunk span, or 4 MiB pieces of a huge chunk), so a storage layer (local file,
//! object store, cache) only has to implement two methods. Short reads are errors: every
//! range requested lies inside the file by construction, so a short read means the file
//! changed or is truncated.

use std::io;

use bytes::Bytes;

use crate::memory::{split_into, split_len};

/// Random-access bytes of one file.
pub trait ByteSource: Send + Sync {
    /// Total size in bytes.
    fn size(&self) -> io::Result<u64>;
    /// Reads exactly `len` bytes at `offset` (short read = error).
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes>;

    /// Reads consecutive bytes at `offset` and appends them part by part: each `(out, len)` of
    /// `parts`, in order, sends the next `len` bytes to the end of `outs[out]` (the caller
    /// reserves the room). How the read-ahead takes a chunk's block headers out while reading:
    /// sources that can read into several buffers at once (a local file: `preadv`) copy each
    /// byte once; the default reads the whole run, then copies the parts out.
    fn read_split(
        &self,
        offset: u64,
        parts: &[(usize, usize)],
        outs: &mut [&mut Vec<u8>],
    ) -> io::Result<()> {
        let total = usize::try_from(split_len(parts)).map_err(io::Error::other)?;
        split_into(&self.read_at(offset, total)?, parts, outs)
    }
}

fn out_of_range(offset: u64, len: usize, size: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("read of {len} bytes at {offset} runs past the end ({size} bytes)"),
    )
}

fn slice_of(bytes: &Bytes, offset: u64, len: usize) -> io::Result<Bytes> {
    let start = usize::try_from(offset).ok();
    match start.and_then(|s| Some((s, s.checked_add(len)?))) {
        Some((s, e)) if e <= bytes.len() => Ok(bytes.slice(s..e)),
        _ => Err(out_of_range(offset, len, bytes.len() as u64)),
    }
}

impl ByteSource for Bytes {
    fn size(&self) -> io::Result<u64> {
        Ok(self.len() as u64)
    }
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        slice_of(self, offset, len)
    }
}

impl ByteSource for Vec<u8> {
    fn size(&self) -> io::Result<u64> {
        Ok(self.len() as u64)
    }
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let start = usize::try_from(offset).ok();
        match start.and_then(|s| Some((s, s.checked_add(len)?))) {
            Some((s, e)) if e <= self.len() => Ok(Bytes::copy_from_slice(&self[s..e])),
            _ => Err(out_of_range(offset, len, self.len() as u64)),
        }
    }
}

impl ByteSource for std::fs::File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    /// Reads into fresh, uninitialized memory (see `crate::memory::read_exact_at_into`).
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let mut buf: Vec<u8> = Vec::with_capacity(len);
        crate::memory::read_exact_at_into(self, offset, len, &mut buf)?;
        Ok(Bytes::from(buf))
    }
    fn read_split(
        &self,
        offset: u64,
        parts: &[(usize, usize)],
        outs: &mut [&mut Vec<u8>],
    ) -> io::Result<()> {
        crate::memory::read_split_at(self, offset, parts, outs)
    }
}

/// Forwards every method of [`ByteSource`] through a pointer to a source (the one forwarding
/// mechanism: a method added to the trait is forwarded by adding it here).
macro_rules! forward_byte_source {
    ($($pointer:ty),*) => {$(
        impl<S: ByteSource + ?Sized> ByteSource for $pointer {
            fn size(&self) -> io::Result<u64> {
                (**self).size()
            }
            fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
                (**self).read_at(offset, len)
            }
            fn read_split(
                &self,
                offset: u64,
                parts: &[(usize, usize)],
                outs: &mut [&mut Vec<u8>],
            ) -> io::Result<()> {
                (**self).read_split(offset, parts, outs)
            }
        }
    )*};
}

forward_byte_source!(&S, std::sync::Arc<S>);
