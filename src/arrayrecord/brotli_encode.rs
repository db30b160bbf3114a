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

use super::feed::{Feed, PieceCursor};

/// Brotli's largest window without the large-window extension.
const MAX_STANDARD_WINDOW_LOG: u32 = 24;

/// Qualities 0 and 1 take brotli's one-pass and two-pass fast paths, which compress each call's
/// input as it comes: their stream depends on every call boundary.
const LAST_FAST_QUALITY: u32 = 1;
/// The lowest quality at which the encoder splits blocks (its input blocks grow from 2^14).
const MIN_QUALITY_FOR_BLOCK_SPLIT: u32 = 4;
/// The encoder's size-hint cap (`UpdateSizeHint`).
const SIZE_HINT_LIMIT: usize = 1 << 30;

/// Compresses the concatenation of `pieces`, cut into the calls of `feed`, and writes the
/// brotli stream to `out` as the encoder yields it (a large record's compressed stream is
/// never collected in memory).
///
/// Why pieces: a record reaches the writer as a header and one piece per tensor, and riegeli
/// hands it to brotli as one call. At qualities 2 and up the encoder copies its input into
/// blocks and encodes only whole blocks (or at the end), so one call cut into several at the
/// pieces' boundaries gives the same stream, with one exception: the size hint, which the
/// encoder takes from the call in which its first block fills. So that hint is computed from
/// the feed and set beforehand ([`first_block_size_hint`]), and the pieces are never joined.
/// The fast qualities (0, 1) depend on every call boundary: for them the pieces are joined.
pub(crate) fn compress<W: io::Write>(
    quality: u32,
    window_log: u32,
    pieces: &[&[u8]],
    feed: &Feed,
    out: &mut W,
) -> io::Result<()> {
    let total: usize = pieces.iter().map(|piece| piece.len()).sum();
    if feed.total() != total {
        return Err(io::Error::other("brotli feed does not cover the input"));
    }
    if quality <= LAST_FAST_QUALITY && pieces.len() > 1 {
        let whole = pieces.concat();
        return compress(quality, window_log, &[&whole], feed, out);
    }
    let mut encoder = Encoder::new(quality, window_log)?;
    if pieces.len() > 1 {
        let block = input_block_size(quality, window_log);
        let hint = first_block_size_hint(feed, block);
        if hint > 0 {
            // `hint` is at most SIZE_HINT_LIMIT (2^30), so it fits.
            encoder.set(
                sys::BrotliEncoderParameter_BROTLI_PARAM_SIZE_HINT,
                hint as u32,
            )?;
        }
    }
    let mut input = PieceCursor::new(pieces);
    for &call in &feed.flushed {
        feed_call(&mut encoder, &mut input, call, false, out)?;
    }
    feed_call(&mut encoder, &mut input, feed.last, true, out)
}

/// The encoder's input block (`1 << ComputeLgBlock`) for `quality` > 1 and its window, as
/// `SanitizeParams` and `ComputeLgBlock` of brotli 1.1.0 choose it (no `lgblock` set).
fn input_block_size(quality: u32, window_log: u32) -> usize {
    let lgwin = window_log.max(10);
    let lgblock = if quality < MIN_QUALITY_FOR_BLOCK_SPLIT {
        14
    } else if quality >= 9 && lgwin > 16 {
        lgwin.min(18)
    } else {
        16
    };
    1 << lgblock
}

/// The size hint the encoder would compute for the reference's calls (`feed`) itself: at its
/// first block, the input of the calls so far, the one being copied included (capped at
/// 2^30); the whole input when no block fills before the final call.
fn first_block_size_hint(feed: &Feed, block: usize) -> usize {
    let mut fed = 0usize;
    for &call in &feed.flushed {
        fed = fed.saturating_add(call);
        if fed >= block {
            return fed.min(SIZE_HINT_LIMIT);
        }
    }
    fed.saturating_add(feed.last).min(SIZE_HINT_LIMIT)
}

/// The next `len` bytes of `input` as encoder calls, cut further at the pieces' boundaries:
/// "process" for all of them, or, when `finish`, "finish" for the last (possibly empty) one.
fn feed_call<W: io::Write>(
    encoder: &mut Encoder,
    input: &mut PieceCursor<'_>,
    mut len: usize,
    finish: bool,
    out: &mut W,
) -> io::Result<()> {
    loop {
        let slice = input.take(len);
        if slice.is_empty() && len > 0 {
            return Err(io::Error::other("brotli feed runs past the input"));
        }
        len -= slice.len();
        let op = if finish && len == 0 {
            sys::BrotliEncoderOperation_BROTLI_OPERATION_FINISH
        } else {
            sys::BrotliEncoderOperation_BROTLI_OPERATION_PROCESS
        };
        encoder.feed(slice, op, out)?;
        if len == 0 {
            return Ok(());
        }
    }
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
    fn feed<W: io::Write>(
        &mut self,
        input: &[u8],
        op: sys::BrotliEncoderOperation,
        out: &mut W,
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
            let taken = self.take_output(out)?;
            if taken == 0 && available_in == 0 {
                return Ok(());
            }
        }
    }

    /// Writes the output the encoder holds to `out`; returns its length.
    fn take_output<W: io::Write>(&mut self, out: &mut W) -> io::Result<usize> {
        let mut len = 0usize;
        // SAFETY: the returned pointer is valid for `len` bytes until the next call on the
        // state; they are written out before any other call.
        let taken = unsafe {
            let data = sys::BrotliEncoderTakeOutput(self.state.as_ptr(), &mut len);
            if len > 0 && !data.is_null() {
                std::slice::from_raw_parts(data, len)
            } else {
                &[]
            }
        };
        out.write_all(taken)?;
        Ok(taken.len())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrayrecord::feed::Write;

    /// Bytes with some structure (repeats at several distances), so every quality finds
    /// matches and chooses between block types.
    fn sample(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let word = (state >> 33) as usize;
            if word % 3 == 0 && out.len() > 300 {
                let back = 1 + word % 300;
                let from = out.len() - back;
                let run = 4 + word % 40;
                for i in 0..run {
                    out.push(out[from + i % back]);
                }
            } else {
                out.push(b"abcdefgh 0123"[word % 13] ^ (word as u8 & 1));
            }
        }
        out.truncate(len);
        out
    }

    fn compressed(quality: u32, window: u32, pieces: &[&[u8]], feed: &Feed) -> Vec<u8> {
        let mut out = Vec::new();
        compress(quality, window, pieces, feed, &mut out).unwrap();
        out
    }

    /// The stream of an input cut into pieces equals the stream of the same input whole (the
    /// form `arrayrecord_interop` checks against the reference writer), at every quality, for
    /// cuts before, inside and after the first input block, and for feeds of one large record
    /// and of many small ones.
    #[test]
    fn pieces_give_the_stream_of_the_whole_input() {
        let input = sample(300_000, 7);
        let cuts: [&[usize]; 5] = [
            &[37],
            &[37, 64],
            &[37, 20_000, 70_000],
            &[1 << 14, (1 << 16) + 1, 200_000],
            &[299_999],
        ];
        let feeds = [
            Feed::of([Write::Bytes(input.len())]),
            Feed::of((0..300).map(|_| Write::Bytes(1000))),
        ];
        for quality in 0..=11 {
            let windows: &[u32] = if quality >= 10 { &[18] } else { &[10, 16, 24] };
            let input = if quality >= 10 {
                &input[..120_000]
            } else {
                &input[..]
            };
            for &window in windows {
                for feed in &feeds {
                    if feed.total() != input.len() {
                        continue;
                    }
                    let whole = compressed(quality, window, &[input], feed);
                    for cut in cuts {
                        let mut pieces = Vec::new();
                        let mut from = 0;
                        for &to in cut.iter().filter(|&&to| to < input.len()) {
                            pieces.push(&input[from..to]);
                            from = to;
                        }
                        pieces.push(&input[from..]);
                        assert!(
                            compressed(quality, window, &pieces, feed) == whole,
                            "quality {quality}, window {window}, cut at {cut:?}"
                        );
                    }
                }
            }
        }
    }

    /// Inputs of a MiB and more choose other hashers than smaller ones (brotli's size hint): a
    /// first piece that fills the first block must not make the encoder see a small input.
    #[test]
    fn a_large_input_cut_early_keeps_its_size_hint() {
        let input = sample(1_300_000, 11);
        let feed = Feed::of([Write::Bytes(input.len())]);
        for quality in 2..=9 {
            let whole = compressed(quality, 22, &[&input], &feed);
            let (head, tail) = input.split_at(100_000);
            assert!(
                compressed(quality, 22, &[head, tail], &feed) == whole,
                "quality {quality}"
            );
        }
    }

    #[test]
    fn the_hint_is_the_input_up_to_the_call_that_fills_the_first_block() {
        let feed = Feed {
            flushed: vec![10, 100, 5000],
            last: 7,
        };
        assert_eq!(first_block_size_hint(&feed, 64), 110);
        assert_eq!(first_block_size_hint(&feed, 110), 110);
        assert_eq!(first_block_size_hint(&feed, 111), 5110);
        assert_eq!(first_block_size_hint(&feed, 1 << 20), 5117);
        let huge = Feed {
            flushed: vec![3 << 30],
            last: 0,
        };
        assert_eq!(first_block_size_hint(&huge, 1 << 16), 1 << 30);
    }
}
