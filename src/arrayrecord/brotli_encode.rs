//! Brotli compression by the reference's own encoder: the C brotli library, release 1.1.0,
//! built from source by the `compu-brotli-sys` crate and driven as riegeli drives it.
//!
//! Why C and not the pure-Rust `brotli` crate (still used for decoding): the crate's encoder
//! is a port of an older C release and chooses differently at every quality (measured on JSON
//! rows and IQ samples: qualities 0-4 differ from 5 KB up, 5-11 from about 70 KB up), and
//! C brotli 1.0.9 and 1.2.0 differ from 1.1.0 too (1.2.0 rewrote floating-point thresholds of
//! the block splitter and of the "store uncompressed" test). The library's ArrayRecord wheel
//! links C brotli 1.1.0, so the same release is pinned here (`=1.1.0`, kept in `Cargo.lock`
//! although the crate release is yanked upstream: its bytes are the ones we need).
//!
//! The encoder is driven exactly as riegeli's `BrotliWriter` does: quality, window and the
//! large-window flag set, no size hint, every piece of the [`Feed`] passed with "process" and
//! the rest with "finish", output taken after each call until a call yields nothing. The
//! brotli stream depends on those boundaries (see `feed`).
//!
//! No safe Rust wrapper of a C brotli of this release exists, so this module holds the only
//! `unsafe` calls into it, each with the invariant it relies on.

use std::io;
use std::ptr::{self, NonNull};

use compu_brotli_sys as sys;

use super::feed::Feed;

/// Brotli's largest window without the large-window extension.
const MAX_STANDARD_WINDOW_LOG: u32 = 24;

/// Compresses `input`, cut into the pieces of `feed`, and appends the brotli stream to `out`.
pub(crate) fn compress(
    quality: u32,
    window_log: u32,
    input: &[u8],
    feed: &Feed,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    if feed.total() != input.len() {
        return Err(io::Error::other("brotli feed does not cover the input"));
    }
    let mut encoder = Encoder::new(quality, window_log)?;
    let mut rest = input;
    for &piece in &feed.flushed {
        let (now, later) = rest.split_at(piece);
        encoder.feed(
            now,
            sys::BrotliEncoderOperation_BROTLI_OPERATION_PROCESS,
            out,
        )?;
        rest = later;
    }
    encoder.feed(
        rest,
        sys::BrotliEncoderOperation_BROTLI_OPERATION_FINISH,
        out,
    )
}

/// An owned `BrotliEncoderState`.
struct Encoder {
    state: NonNull<sys::BrotliEncoderState>,
}

impl Encoder {
    fn new(quality: u32, window_log: u32) -> io::Result<Self> {
        // SAFETY: null allocator callbacks select malloc/free; the result is checked for null.
        let raw = unsafe { sys::BrotliEncoderCreateInstance(None, None, ptr::null_mut()) };
        let state = NonNull::new(raw).ok_or_else(|| io::Error::other("brotli: out of memory"))?;
        let encoder = Encoder { state };
        encoder.set(sys::BrotliEncoderParameter_BROTLI_PARAM_QUALITY, quality)?;
        let large = u32::from(window_log > MAX_STANDARD_WINDOW_LOG);
        encoder.set(sys::BrotliEncoderParameter_BROTLI_PARAM_LARGE_WINDOW, large)?;
        encoder.set(sys::BrotliEncoderParameter_BROTLI_PARAM_LGWIN, window_log)?;
        Ok(encoder)
    }

    fn set(&self, param: sys::BrotliEncoderParameter, value: u32) -> io::Result<()> {
        // SAFETY: `state` is a live encoder owned by `self`.
        let ok = unsafe { sys::BrotliEncoderSetParameter(self.state.as_ptr(), param, value) };
        if ok == 0 {
            return Err(io::Error::other(format!(
                "brotli refused parameter {param} = {value}"
            )));
        }
        Ok(())
    }

    /// One riegeli `WriteInternal`: calls the encoder with `op` until the input is consumed
    /// and a call produces no output.
    fn feed(
        &mut self,
        input: &[u8],
        op: sys::BrotliEncoderOperation,
        out: &mut Vec<u8>,
    ) -> io::Result<()> {
        let mut available_in = input.len();
        let mut next_in = input.as_ptr();
        loop {
            let mut available_out = 0usize;
            // SAFETY: `next_in`/`available_in` describe the unread tail of `input`, which
            // outlives the call; with `available_out` = 0 the encoder writes no caller memory
            // (output stays inside the state until taken).
            let ok = unsafe {
                sys::BrotliEncoderCompressStream(
                    self.state.as_ptr(),
                    op,
                    &mut available_in,
                    &mut next_in,
                    &mut available_out,
                    ptr::null_mut(),
                    ptr::null_mut(),
                )
            };
            if ok == 0 {
                return Err(io::Error::other("brotli encoder failed"));
            }
            let taken = self.take_output(out);
            if taken == 0 && available_in == 0 {
                return Ok(());
            }
        }
    }

    /// Appends the output the encoder holds to `out`; returns its length.
    fn take_output(&mut self, out: &mut Vec<u8>) -> usize {
        let mut len = 0usize;
        // SAFETY: the returned pointer is valid for `len` bytes until the next call on the
        // state; they are copied before any other call.
        unsafe {
            let data = sys::BrotliEncoderTakeOutput(self.state.as_ptr(), &mut len);
            if len > 0 && !data.is_null() {
                out.extend_from_slice(std::slice::from_raw_parts(data, len));
            }
        }
        len
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        // SAFETY: `state` was created by BrotliEncoderCreateInstance and is destroyed once.
        unsafe { sys::BrotliEncoderDestroyInstance(self.state.as_ptr()) }
    }
}

// SAFETY: a brotli encoder state has no thread affinity; `&mut self` prevents concurrent use.
unsafe impl Send for Encoder {}
