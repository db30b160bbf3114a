//! Compressed buffers of simple chunks (spec sections 5 and 8).
//!
//! Writing: each of the two buffers of a simple chunk (record sizes, record values) is
//! `varint(uncompressed length) ++ compressor output`, or the raw bytes when uncompressed.
//! Every compressor reproduces the reference's bytes: zstd through libzstd, with a one-shot
//! frame (content size known) when the whole buffer reaches the compressor at close and a
//! streamed frame otherwise; brotli through the reference's C brotli, fed in the same pieces
//! (`brotli_encode`); snappy through our port of the reference's match finder
//! (`snappy_encode`). Where the pieces fall is `feed`'s model of riegeli's buffering.
//!
//! Reading: decompression is always capped at the size the chunk header promises, so a
//! hostile frame cannot make us allocate more than the (already limit-checked) header says.
//! zstd goes through zstd-safe's contexts, except what zstd-safe (7.2) does not wrap:
//! libzstd's buffer-less mode ([`zstd_segments`]), the frame header and the memory estimates
//! call `zstd-sys`, each call with its safety argument.

use std::io::{self, Read, Write};
use std::sync::Arc;

use super::error::{corrupt, Fault};
use super::feed::Feed;
use super::options::Compression;
use super::{brotli_encode, snappy_encode, varint};

/// Brotli's window when the options name none.
const DEFAULT_BROTLI_WINDOW_LOG: u32 = 22;

/// Writes the framed compressed form of a buffer to `out`: the buffer is the concatenation
/// of `pieces`, and `feed` is how the reference's writer would have handed it to the
/// compressor. zstd streamed frames and uncompressed buffers take the pieces one by one (a
/// record of gigabytes is never copied into one buffer); the other compressors need the
/// buffer whole, and get a copy when there is more than one piece.
pub(crate) fn compress_pieces<W: Write>(
    compression: &Compression,
    pieces: &[&[u8]],
    feed: &Feed,
    out: &mut W,
) -> io::Result<()> {
    if let Compression::None = compression {
        return pieces.iter().try_for_each(|piece| out.write_all(piece));
    }
    let mut prefix = Vec::with_capacity(10);
    let total = pieces.iter().map(|piece| piece.len() as u64).sum();
    varint::put(&mut prefix, total);
    out.write_all(&prefix)?;
    if let Compression::Zstd { level, window_log } = *compression {
        if !feed.is_one_shot() {
            return zstd_streamed(level, window_log, pieces, out);
        }
    }
    if let Compression::Snappy { level } = *compression {
        return snappy_encode::compress(pieces, level, out);
    }
    if let Compression::Brotli {
        quality,
        window_log,
    } = *compression
    {
        let window_log = window_log.unwrap_or(DEFAULT_BROTLI_WINDOW_LOG);
        return brotli_encode::compress(quality, window_log, pieces, feed, out);
    }
    // zstd's one-shot frame needs the input contiguous: several pieces are joined once.
    let whole = match pieces {
        [one] => std::borrow::Cow::Borrowed(*one),
        many => std::borrow::Cow::Owned(many.concat()),
    };
    let input: &[u8] = &whole;
    match *compression {
        Compression::Zstd { level, window_log } => {
            out.write_all(&zstd_one_shot(level, window_log, input)?)
        }
        Compression::Brotli { .. } | Compression::Snappy { .. } | Compression::None => Ok(()),
    }
}

fn zstd_one_shot(level: i32, window_log: u32, input: &[u8]) -> io::Result<Vec<u8>> {
    use zstd::zstd_safe::CParameter;
    with_cctx(level, |c| {
        zstd_param(c, CParameter::WindowLog(window_log))?;
        zstd_param(c, CParameter::ChecksumFlag(false))?;
        zstd_param(c, CParameter::ContentSizeFlag(true))?;
        let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(input.len()));
        c.compress2(&mut out, input)
            .map_err(|code| io::Error::other(zstd::zstd_safe::get_error_name(code)))?;
        Ok(out)
    })
}

/// A streamed frame: zstd buffers its input into whole blocks before compressing, so how the
/// input is cut into pieces does not change the output.
fn zstd_streamed<W: Write>(
    level: i32,
    window_log: u32,
    pieces: &[&[u8]],
    out: &mut W,
) -> io::Result<()> {
    use zstd::zstd_safe::CParameter;
    with_cctx(level, |c| {
        // No pledged size: this is what makes the frame header match riegeli's streamed frames.
        let mut e = zstd::stream::write::Encoder::with_context(&mut *out, c);
        e.set_parameter(CParameter::WindowLog(window_log))?;
        e.include_checksum(false)?;
        e.include_contentsize(true)?;
        for piece in pieces {
            e.write_all(piece)?;
        }
        e.finish()?;
        Ok(())
    })
}

fn zstd_param(
    c: &mut zstd::zstd_safe::CCtx<'static>,
    p: zstd::zstd_safe::CParameter,
) -> io::Result<()> {
    c.set_parameter(p)
        .map(|_| ())
        .map_err(|code| io::Error::other(zstd::zstd_safe::get_error_name(code)))
}

thread_local! {
    /// This thread's zstd compression context: creating one (`ZSTD_createCCtx`) cost more
    /// than compressing a small record, and the writer compresses two buffers per record.
    static CCTX: std::cell::RefCell<Option<zstd::zstd_safe::CCtx<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` with this thread's compression context, reset to zstd's defaults and `level`:
/// the same state a freshly created context has, so the output is byte for byte what a new
/// context would give.
fn with_cctx<T>(
    level: i32,
    f: impl FnOnce(&mut zstd::zstd_safe::CCtx<'static>) -> io::Result<T>,
) -> io::Result<T> {
    use zstd::zstd_safe::{CParameter, ResetDirective};
    let mut c = CCTX
        .with(|slot| slot.borrow_mut().take())
        .unwrap_or_else(zstd::zstd_safe::CCtx::create);
    c.reset(ResetDirective::SessionAndParameters)
        .map_err(|code| io::Error::other(zstd::zstd_safe::get_error_name(code)))?;
    zstd_param(&mut c, CParameter::CompressionLevel(level))?;
    let result = f(&mut c);
    CCTX.with(|slot| *slot.borrow_mut() = Some(c));
    result
}

/// Decompression caps and settings, derived from the reader limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecodeCaps {
    /// zstd frames with a larger window are refused (protects memory).
    pub zstd_window_log_max: u32,
}

/// Splits off the riegeli length prefix of a compressed buffer (read but, like the
/// reference, not trusted: the cap comes from the chunk header).
fn strip_prefix(buf: &[u8]) -> Result<&[u8], Fault> {
    let (_, n) =
        varint::get(buf).ok_or_else(|| corrupt("bad length prefix of a compressed buffer"))?;
    buf.get(n..)
        .ok_or_else(|| corrupt("bad length prefix of a compressed buffer"))
}

/// Returns a reader producing the decompressed form of `input`, a compressed buffer whose
/// riegeli length prefix was already consumed. The result is not capped; callers use `take`.
pub(crate) fn decoder<'a, R: io::BufRead + 'a>(
    compression_type: u8,
    input: R,
    caps: DecodeCaps,
) -> Result<Box<dyn Read + 'a>, Fault> {
    Ok(match compression_type {
        0 => Box::new(input),
        b'z' => {
            let mut d = zstd::stream::read::Decoder::with_buffer(input)?.single_frame();
            d.window_log_max(caps.zstd_window_log_max)?;
            Box::new(d)
        }
        b'b' => Box::new(brotli::Decompressor::new(input, 64 * 1024)),
        b's' => Box::new(SnappyReader::new(input)),
        other => {
            return Err(Fault::Unsupported(format!(
                "unknown compression type 0x{other:02x}"
            )))
        }
    })
}

/// Decompresses a whole framed buffer that must expand to exactly `expected` bytes.
/// `exact` = false allows fewer bytes (used for the sizes buffer, whose size is unknown).
pub(crate) fn decompress_buffer(
    compression_type: u8,
    buf: &[u8],
    expected: u64,
    exact: bool,
    caps: DecodeCaps,
) -> Result<Vec<u8>, Fault> {
    let payload = if compression_type == 0 {
        buf
    } else {
        strip_prefix(buf)?
    };
    if compression_type == b's' {
        return snappy_decompress(payload, expected, exact);
    }
    if compression_type == b'z' && expected <= EXACT_ALLOC_MAX {
        return zstd_bulk(payload, expected, exact, caps);
    }
    // Start modest and let the vector grow: `expected` comes from the file.
    let initial = expected.min(payload.len() as u64 * 4 + 4096);
    let mut out = Vec::with_capacity(usize::try_from(initial).unwrap_or(0));
    let reader = decoder(compression_type, payload, caps)?;
    reader
        .take(expected.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| corrupt(format!("decompression failed: {e}")))?;
    check_len(out.len() as u64, expected, exact)?;
    Ok(out)
}

/// Up to this size, the header's promise is allocated at once (fast path); beyond it the
/// buffer grows with the actual output, so a lying header cannot reserve huge memory.
const EXACT_ALLOC_MAX: u64 = 64 << 20;

/// One-shot zstd decoding into a buffer of exactly the promised size: output beyond it is an
/// error from libzstd, which is the cap.
fn zstd_bulk(
    payload: &[u8],
    expected: u64,
    exact: bool,
    caps: DecodeCaps,
) -> Result<Vec<u8>, Fault> {
    // Creating a context (ZSTD_createDCtx) costs more than decoding a small sizes buffer or
    // metadata row, and every record read does one: each thread keeps one, per window limit.
    let spare = SPARE_BULK.with(|s| s.borrow_mut().take());
    let mut d = match spare {
        Some((window, d)) if window == caps.zstd_window_log_max => d,
        _ => {
            let mut d = zstd::bulk::Decompressor::new()?;
            d.window_log_max(caps.zstd_window_log_max)?;
            d
        }
    };
    let mut out = Vec::with_capacity(expected as usize);
    let result = d.decompress_to_buffer(payload, &mut out);
    // A context that failed mid-frame is reset by libzstd at the next frame start, so it can
    // be kept whatever the outcome.
    SPARE_BULK.with(|s| *s.borrow_mut() = Some((caps.zstd_window_log_max, d)));
    result.map_err(|e| corrupt(format!("decompression failed: {e}")))?;
    check_len(out.len() as u64, expected, exact)?;
    Ok(out)
}

thread_local! {
    /// One spare one-shot zstd context per thread, with the window limit it was set to.
    static SPARE_BULK: std::cell::RefCell<Option<(u32, zstd::bulk::Decompressor<'static>)>> =
        const { std::cell::RefCell::new(None) };
}

/// A zstd decompression context driven through `ZSTD_decompressStream` (zstd-safe's `DCtx`),
/// for input that arrives in runs (the cursor's block-bounded pieces) and output written
/// straight into the spare capacity of a `Vec` (no zero fill, no intermediate copy).
///
/// With `stable_output`, libzstd is told (`ZSTD_d_stableOutBuffer`, a documented parameter of
/// libzstd's advanced API, stable since 1.4.x) that the output buffer never moves between
/// calls: it then decodes straight into it and uses it as its window, instead of decoding into
/// an internal window buffer and copying out. The caller guarantees this by never
/// reallocating the `Vec` during a frame.
pub(crate) struct ZstdDecoder {
    ctx: zstd::zstd_safe::DCtx<'static>,
    stable_output: bool,
}

/// A libzstd error code as the corruption it reports.
fn zstd_fault(code: zstd::zstd_safe::ErrorCode) -> Fault {
    corrupt(format!(
        "decompression failed: {}",
        zstd::zstd_safe::get_error_name(code)
    ))
}

impl ZstdDecoder {
    pub(crate) fn new(caps: DecodeCaps, stable_output: bool) -> Result<Self, Fault> {
        use zstd::zstd_safe::DParameter;
        let mut ctx = zstd::zstd_safe::DCtx::try_create()
            .ok_or_else(|| Fault::Io(io::Error::other("cannot allocate a zstd context")))?;
        ctx.set_parameter(DParameter::WindowLogMax(caps.zstd_window_log_max))
            .map_err(zstd_fault)?;
        if stable_output {
            ctx.set_parameter(DParameter::StableOutBuffer(true))
                .map_err(zstd_fault)?;
        }
        Ok(Self { ctx, stable_output })
    }

    /// Decodes from `input` into `out`'s spare capacity, which bounds the output: `out` never
    /// grows here. Returns the input bytes consumed and whether the frame is complete. With
    /// `stable_output`, `out` must not have been reallocated since the frame began.
    pub(crate) fn decompress(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(usize, bool), Fault> {
        let at = out.len();
        let mut output = zstd::zstd_safe::OutBuffer::around_pos(out, at);
        let mut input = zstd::zstd_safe::InBuffer::around(input);
        let left = self
            .ctx
            .decompress_stream(&mut output, &mut input)
            .map_err(zstd_fault)?;
        Ok((input.pos(), left == 0))
    }

    /// Forgets any frame in progress (parameters are kept).
    fn reset_session(&mut self) -> Result<(), Fault> {
        self.ctx
            .reset(zstd::zstd_safe::ResetDirective::SessionOnly)
            .map(|_| ())
            .map_err(zstd_fault)
    }

    /// A stable-output decoder for `caps`, reusing this thread's spare one when it fits:
    /// creating a context costs more than decoding a small record.
    fn stable(caps: DecodeCaps) -> Result<Self, Fault> {
        if let Some((window, mut d)) = SPARE_ZSTD.with(|s| s.borrow_mut().take()) {
            if window == caps.zstd_window_log_max && d.reset_session().is_ok() {
                return Ok(d);
            }
        }
        Self::new(caps, true)
    }

    /// Keeps a stable-output decoder as this thread's spare.
    fn recycle(self, caps: DecodeCaps) {
        if self.stable_output {
            SPARE_ZSTD.with(|s| *s.borrow_mut() = Some((caps.zstd_window_log_max, self)));
        }
    }

    /// Whether the output buffer must stay put between calls.
    pub(crate) fn stable_output(&self) -> bool {
        self.stable_output
    }
}

thread_local! {
    /// One spare stable-output zstd context per thread, with the window limit it was set to.
    static SPARE_ZSTD: std::cell::RefCell<Option<(u32, ZstdDecoder)>> =
        const { std::cell::RefCell::new(None) };
}

/// Decodes the zstd frame the cursor's data holds from here on (its riegeli length prefix
/// already consumed) into exactly `expected` bytes, which the caller has bounded (the
/// in-memory limit). The output is allocated at once and decoded in place (see
/// [`exact_output`]); only when that reservation fails does it grow with the actual output.
/// The frame must use up the data: trailing bytes are corruption.
pub(crate) fn zstd_from_runs(
    runs: &mut dyn RunSource,
    expected: u64,
    caps: DecodeCaps,
) -> Result<Vec<u8>, Fault> {
    let too_big = || corrupt(format!("values decompress to more than {expected} bytes"));
    let expected = usize::try_from(expected).map_err(|_| too_big())?;
    let (mut out, limit, mut d) = match exact_output(expected) {
        Some(out) => (out, expected, ZstdDecoder::stable(caps)?),
        None => (
            Vec::with_capacity(EXACT_ALLOC_MAX as usize),
            expected.saturating_add(1),
            ZstdDecoder::new(caps, false)?,
        ),
    };
    let result = zstd_loop(&mut d, runs, &mut out, limit);
    d.recycle(caps);
    result?;
    if runs.left() > 0 {
        return Err(corrupt("trailing bytes after the zstd frame"));
    }
    check_len(out.len() as u64, expected as u64, true)?;
    Ok(out)
}

/// An empty vector with room for exactly `len` bytes, or `None` when the room cannot be had.
/// Up to [`EXACT_ALLOC_MAX`] it is allocated outright; beyond, it is asked for with
/// `try_reserve_exact`, which fails instead of aborting. Reserving only takes address space:
/// pages are committed as the decoder writes them, so a header that promises more than the
/// frame holds costs no memory, and a large record is decoded in place (no doubling copies,
/// no window copy: a 256 MiB record decoded in half the time of the growing buffer).
fn exact_output(len: usize) -> Option<Vec<u8>> {
    if len as u64 <= EXACT_ALLOC_MAX {
        return Some(huge_capacity(len));
    }
    let mut out = Vec::new();
    out.try_reserve_exact(len).ok()?;
    crate::memory::advise_huge_pages(&out);
    Some(out)
}

/// An empty vector with room for `len` bytes, backed by huge pages when large (see
/// [`crate::memory`]).
pub(crate) fn huge_capacity(len: usize) -> Vec<u8> {
    let out = Vec::with_capacity(len);
    crate::memory::advise_huge_pages(&out);
    out
}

/// Feeds the runs to the decoder until the frame ends.
fn zstd_loop(
    d: &mut ZstdDecoder,
    runs: &mut dyn RunSource,
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), Fault> {
    let too_big = || corrupt("values decompress to more bytes than the chunk header says");
    // `out`'s capacity, which bounds what the decoder writes, never exceeds `limit`: it was
    // allocated at `limit` (stable output) or below it, and grows only up to it.
    loop {
        if !d.stable_output() && out.len() == out.capacity() && out.len() < limit {
            let more = out.len().min(limit - out.len());
            out.reserve_exact(more);
        }
        let input = runs.next_run()?;
        let input_len = input.len();
        let before = out.len();
        let (used, done) = d.decompress(input, out)?;
        runs.consume_run(used);
        if done {
            return Ok(());
        }
        if used == 0 && out.len() == before {
            return Err(if input_len == 0 {
                corrupt("zstd frame is truncated")
            } else {
                // No room left for the output the frame still has.
                too_big()
            });
        }
    }
}

/// Input handed out in runs (implemented by the chunk cursor).
pub(crate) trait RunSource {
    /// The next run of input (empty at the end).
    fn next_run(&mut self) -> Result<&[u8], Fault>;
    /// Marks `n` bytes of the last run as used.
    fn consume_run(&mut self, n: usize);
    /// Input bytes not used yet.
    fn left(&self) -> u64;
}

fn check_len(got: u64, expected: u64, exact: bool) -> Result<(), Fault> {
    if got > expected || (exact && got != expected) {
        return Err(corrupt(format!(
            "decompressed to {got} bytes, expected {}{expected}",
            if exact { "" } else { "at most " }
        )));
    }
    Ok(())
}

/// Upper bound of what a raw snappy block can expand to (a 3-byte copy yields 64 bytes).
fn snappy_bound(compressed: usize) -> u64 {
    (compressed as u64).saturating_mul(22).saturating_add(64)
}

fn snappy_decompress(payload: &[u8], expected: u64, exact: bool) -> Result<Vec<u8>, Fault> {
    let claimed = snap::raw::decompress_len(payload)
        .map_err(|e| corrupt(format!("bad snappy block: {e}")))? as u64;
    check_len(claimed, expected, exact)?;
    if claimed > snappy_bound(payload.len()) {
        return Err(corrupt("snappy block claims an impossible length"));
    }
    snap::raw::Decoder::new()
        .decompress_vec(payload)
        .map_err(|e| corrupt(format!("bad snappy block: {e}")))
}

/// Snappy raw blocks have no streaming decoder: read the block (bounded by the chunk's
/// data size, which the caller has limit-checked), then serve the decompressed bytes.
struct SnappyReader<R> {
    input: Option<R>,
    output: io::Cursor<Vec<u8>>,
}

impl<R: Read> SnappyReader<R> {
    fn new(input: R) -> Self {
        Self {
            input: Some(input),
            output: io::Cursor::new(Vec::new()),
        }
    }

    fn fill(&mut self, mut input: R) -> io::Result<()> {
        let mut payload = Vec::new();
        input.read_to_end(&mut payload)?;
        let payload = &payload[..];
        let claimed = snap::raw::decompress_len(payload).map_err(io::Error::other)?;
        if claimed as u64 > snappy_bound(payload.len()) {
            return Err(io::Error::other("snappy block claims an impossible length"));
        }
        let out = snap::raw::Decoder::new()
            .decompress_vec(payload)
            .map_err(io::Error::other)?;
        self.output = io::Cursor::new(out);
        Ok(())
    }
}

impl<R: Read> Read for SnappyReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(input) = self.input.take() {
            self.fill(input)?;
        }
        self.output.read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: DecodeCaps = DecodeCaps {
        zstd_window_log_max: 31,
    };

    /// All of `len` bytes at close, or a first piece passed on before.
    fn feed(len: usize, one_shot: bool) -> Feed {
        match one_shot {
            true => Feed {
                flushed: vec![],
                last: len,
            },
            false => Feed {
                flushed: vec![len / 2],
                last: len - len / 2,
            },
        }
    }

    fn round_trip(c: Compression, one_shot: bool) {
        let input: Vec<u8> = (0..20000u32).map(|i| (i % 251) as u8).collect();
        let mut buf = Vec::new();
        compress_pieces(&c, &[&input], &feed(input.len(), one_shot), &mut buf).unwrap();
        let out = decompress_buffer(c.type_byte(), &buf, input.len() as u64, true, CAPS).unwrap();
        assert_eq!(out, input);
        // A cap below the real size is an error, not a truncation.
        assert!(decompress_buffer(c.type_byte(), &buf, 100, true, CAPS).is_err());
    }

    #[test]
    fn all_compressors_round_trip() {
        let zstd = Compression::Zstd {
            level: 3,
            window_log: 20,
        };
        round_trip(zstd, true);
        round_trip(zstd, false);
        for quality in [0, 1, 6, 11] {
            for one_shot in [true, false] {
                let brotli = Compression::Brotli {
                    quality,
                    window_log: None,
                };
                round_trip(brotli, one_shot);
            }
        }
        round_trip(Compression::Snappy { level: 1 }, true);
        round_trip(Compression::Snappy { level: 2 }, true);
        round_trip(Compression::None, true);
    }

    #[test]
    fn pieces_compress_as_their_concatenation() {
        // Noise with repeats reaching back across piece boundaries and zstd's 128 KiB blocks.
        let mut state = 7u64;
        let mut input: Vec<u8> = (0..300_000)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                (state >> 59) as u8
            })
            .collect();
        input.extend_from_within(1000..90_000);
        let cuts = [0, 1, 4095, 70_000, 131_072, 131_073, 300_000, input.len()];
        let pieces: Vec<&[u8]> = cuts.windows(2).map(|w| &input[w[0]..w[1]]).collect();
        for c in [
            Compression::None,
            Compression::Zstd {
                level: 3,
                window_log: 20,
            },
            Compression::Snappy { level: 1 },
        ] {
            let feed = feed(input.len(), false);
            let (mut whole, mut cut) = (Vec::new(), Vec::new());
            compress_pieces(&c, &[&input], &feed, &mut whole).unwrap();
            compress_pieces(&c, &pieces, &feed, &mut cut).unwrap();
            assert_eq!(whole, cut, "{c:?}");
        }
    }

    #[test]
    fn zstd_frame_header_modes() {
        let zstd = Compression::Zstd {
            level: 3,
            window_log: 20,
        };
        let mut one = Vec::new();
        compress_pieces(&zstd, &[b"\x05"], &feed(1, true), &mut one).unwrap();
        assert_eq!(
            hex::encode(&one),
            "0128b52ffd2001090000 05".replace(' ', "")
        );
        let mut streamed = Vec::new();
        compress_pieces(&zstd, &[&[7u8; 5000]], &feed(5000, false), &mut streamed).unwrap();
        // Prefix 5000 = 88 27, magic, FHD without content size / single segment, window 0x50.
        assert_eq!(
            &streamed[..8],
            &[0x88, 0x27, 0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x50]
        );
    }
}

/// Windows up to this size are decoded into segments ([`zstd_segments`]); larger ones (the
/// reference writer's default is 1 MiB) go through the streaming decoder. With
/// [`SEGMENTS_MAX`] segments this bounds the segments' memory to 34 MiB (18 MiB for 1 MiB
/// windows).
pub(crate) const SEGMENT_WINDOW_MAX: u64 = 4 << 20;
/// Decoded segments in use at once at most: the one being decoded into, the previous one (the
/// decoder's history) and those the consumer has not released yet.
const SEGMENTS_MAX: usize = 8;

/// Decodes the zstd frame the runs hold with libzstd's buffer-less API straight into segment
/// buffers and hands each filled segment to `emit` (shared: the consumer may keep it while it
/// writes it out); returns the decoded length, or `None`, with nothing consumed, when the
/// frame does not suit (its header is not in the first run, or its window is larger than
/// [`SEGMENT_WINDOW_MAX`]).
///
/// Why: the streaming API decodes each block into an internal window buffer and copies it out
/// (an eighth of decoding a large record); here zstd decodes into our memory directly. Its
/// history is the current segment plus the previous one (libzstd keeps one earlier
/// contiguous segment, `zstd.h`: "two or more buffers of size windowSize"), so each segment
/// holds at least the window before the next starts, and the previous one is kept, unmodified,
/// while the next is decoded. Segments come back for reuse once the consumer drops them.
pub(crate) fn zstd_segments(
    runs: &mut dyn RunSource,
    caps: DecodeCaps,
    limit: u64,
    emit: &mut dyn FnMut(Arc<Vec<u8>>) -> Result<(), Fault>,
) -> Result<Option<u64>, Fault> {
    let Some(frame) = frame_header(runs.next_run()?) else {
        return Ok(None);
    };
    let Some((segment_len, block_max)) = segment_plan(&frame, caps) else {
        return Ok(None);
    };
    let mut d = BufferlessDecoder::begin()?;
    let mut segments = Segments::new(segment_len);
    let mut current = segments.take();
    let mut previous: Option<Arc<Vec<u8>>> = None;
    let mut scratch = Vec::new();
    let mut decoded = 0u64;
    loop {
        let need = d.next_src_size();
        if need == 0 {
            break;
        }
        if current.capacity() - current.len() < block_max {
            let full = Arc::new(std::mem::take(&mut current));
            emit(full.clone())?;
            segments.lend(full.clone());
            // The decoder's history is now `full`; the segment before it is free to reuse.
            previous = Some(full);
            current = segments.take();
        }
        let n = decode_step(&mut d, runs, need, &mut scratch, &mut current)?;
        decoded += n as u64;
        if decoded > limit {
            return Err(corrupt(format!(
                "values decompress to more than {limit} bytes"
            )));
        }
    }
    if !current.is_empty() {
        emit(Arc::new(current))?;
    }
    drop(previous);
    Ok(Some(decoded))
}

/// How [`zstd_segments`] decodes `frame`: the length of a segment and the largest block, or
/// `None` when the frame does not suit segments.
fn segment_plan(frame: &zstd_sys::ZSTD_frameHeader, caps: DecodeCaps) -> Option<(usize, usize)> {
    let window_max = 1u64 << caps.zstd_window_log_max.min(63);
    if frame.frameType != zstd_sys::ZSTD_frameType_e::ZSTD_frame
        || frame.windowSize > SEGMENT_WINDOW_MAX.min(window_max)
    {
        return None;
    }
    let block_max = (frame.blockSizeMax as usize).clamp(1, zstd_sys::ZSTD_BLOCKSIZE_MAX as usize);
    let segment_len = (frame.windowSize as usize + 2 * block_max).max(2 << 20);
    Some((segment_len, block_max))
}

/// The most memory decoding the zstd frame whose header starts `head` takes, the way the
/// streaming reader decodes it: [`zstd_segments`] (every segment, the gathering scratch of
/// one block, the decoder context) when `segmented` and the frame suits them, else libzstd's
/// streaming decoder (its own estimate from the frame header: context, input block and
/// window buffers). `None` when `head` does not start with a frame header.
pub(crate) fn zstd_decode_memory(head: &[u8], caps: DecodeCaps, segmented: bool) -> Option<u64> {
    let frame = frame_header(head)?;
    // SAFETY: a pure function of its argument.
    let context = unsafe { zstd_sys::ZSTD_estimateDCtxSize() } as u64;
    if let Some((segment_len, block_max)) = segment_plan(&frame, caps).filter(|_| segmented) {
        let segments = (SEGMENTS_MAX as u64).saturating_mul(segment_len as u64);
        return Some(segments + block_max as u64 + context);
    }
    // SAFETY: `head` is a valid slice; libzstd reads at most `head.len()` bytes of it.
    let code =
        unsafe { zstd_sys::ZSTD_estimateDStreamSize_fromFrame(head.as_ptr().cast(), head.len()) };
    // SAFETY: a pure function of its argument.
    let failed = unsafe { zstd_sys::ZSTD_isError(code) } != 0;
    // A window libzstd refuses to estimate is refused by the decoder too: price the window.
    Some(if failed {
        frame.windowSize.saturating_add(context)
    } else {
        code as u64
    })
}

/// The frame header at the start of `input`, if it is all there.
fn frame_header(input: &[u8]) -> Option<zstd_sys::ZSTD_frameHeader> {
    // SAFETY: ZSTD_frameHeader is a plain C struct of integers and a C enum whose zero is
    // `ZSTD_frame`; all zeros is a valid value.
    let mut header: zstd_sys::ZSTD_frameHeader = unsafe { std::mem::zeroed() };
    // SAFETY: `input` is a valid slice; libzstd reads at most `input.len()` bytes of it and
    // writes only `header`.
    let code =
        unsafe { zstd_sys::ZSTD_getFrameHeader(&mut header, input.as_ptr().cast(), input.len()) };
    (code == 0).then_some(header)
}

/// Feeds exactly `need` input bytes (from the current run, or gathered when they straddle
/// runs) to the decoder, decoding into `out`'s spare capacity; returns the bytes decoded.
fn decode_step(
    d: &mut BufferlessDecoder,
    runs: &mut dyn RunSource,
    need: usize,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<usize, Fault> {
    let run = runs.next_run()?;
    if run.len() >= need {
        let n = d.continue_into(&run[..need], out)?;
        runs.consume_run(need);
        return Ok(n);
    }
    scratch.clear();
    while scratch.len() < need {
        let run = runs.next_run()?;
        if run.is_empty() {
            return Err(corrupt("zstd frame is truncated"));
        }
        let take = run.len().min(need - scratch.len());
        scratch.extend_from_slice(&run[..take]);
        runs.consume_run(take);
    }
    d.continue_into(scratch, out)
}

/// Segment buffers: reused once nobody else holds them, at most [`SEGMENTS_MAX`] at a time.
struct Segments {
    len: usize,
    lent: Vec<Arc<Vec<u8>>>,
}

impl Segments {
    fn new(len: usize) -> Self {
        Segments {
            len,
            lent: Vec::new(),
        }
    }

    /// Remembers a segment handed out, to take it back when it is released.
    fn lend(&mut self, segment: Arc<Vec<u8>>) {
        self.lent.push(segment);
    }

    /// An empty segment: a released one, a new one, or (all in use) the first to be released.
    fn take(&mut self) -> Vec<u8> {
        loop {
            if let Some(i) = self.lent.iter().position(|s| Arc::strong_count(s) == 1) {
                if let Ok(mut segment) = Arc::try_unwrap(self.lent.swap_remove(i)) {
                    segment.clear();
                    return segment;
                }
                continue;
            }
            if self.lent.len() + 1 < SEGMENTS_MAX {
                return huge_capacity(self.len);
            }
            // Every segment is still being written out by the consumer (bounded queue): wait.
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
}

/// A zstd context in libzstd's buffer-less mode ([`zstd_segments`]): `ZSTD_decompressBegin`,
/// `ZSTD_nextSrcSizeToDecompress`, `ZSTD_decompressContinue`. zstd-safe (7.2) wraps only the
/// one-shot and streaming APIs, so this mode, like the frame header and memory estimates
/// above, calls libzstd through `zstd-sys` directly; every call is in this type or names its
/// safety argument.
struct BufferlessDecoder {
    ctx: std::ptr::NonNull<zstd_sys::ZSTD_DCtx>,
}

/// A libzstd result code as the byte count it holds, or the corruption it reports.
fn zstd_check(code: usize) -> Result<usize, Fault> {
    // SAFETY: ZSTD_isError accepts any value.
    if unsafe { zstd_sys::ZSTD_isError(code) } != 0 {
        return Err(zstd_fault(code));
    }
    Ok(code)
}

impl BufferlessDecoder {
    /// A context with a frame begun.
    fn begin() -> Result<Self, Fault> {
        // SAFETY: plain constructor; a null result (out of memory) is handled.
        let raw = unsafe { zstd_sys::ZSTD_createDCtx() };
        let ctx = std::ptr::NonNull::new(raw)
            .ok_or_else(|| Fault::Io(io::Error::other("cannot allocate a zstd context")))?;
        let d = Self { ctx };
        // SAFETY: `ctx` is a live context owned by `d`.
        zstd_check(unsafe { zstd_sys::ZSTD_decompressBegin(d.ctx.as_ptr()) })?;
        Ok(d)
    }

    /// How many input bytes the next step takes (0: the frame is complete).
    fn next_src_size(&mut self) -> usize {
        // SAFETY: `ctx` is a live context owned by `self`.
        unsafe { zstd_sys::ZSTD_nextSrcSizeToDecompress(self.ctx.as_ptr()) }
    }

    /// One step: `input` (exactly [`next_src_size`](Self::next_src_size) bytes) decoded into
    /// `out`'s spare capacity; returns the bytes decoded.
    fn continue_into(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, Fault> {
        let spare = out.capacity() - out.len();
        // SAFETY: the destination is `out`'s spare capacity (allocated, exclusively ours);
        // libzstd writes at most `spare` bytes there and reads `input.len()` bytes of
        // `input`. Its history points into this segment's earlier bytes and the previous
        // segment, which the caller keeps alive and unmodified (see `zstd_segments`).
        let code = unsafe {
            zstd_sys::ZSTD_decompressContinue(
                self.ctx.as_ptr(),
                out.as_mut_ptr().add(out.len()).cast(),
                spare,
                input.as_ptr().cast(),
                input.len(),
            )
        };
        let n = zstd_check(code)?.min(spare);
        // SAFETY: libzstd initialized the `n` (<= spare) bytes after the old length.
        unsafe { out.set_len(out.len() + n) };
        Ok(n)
    }
}

impl Drop for BufferlessDecoder {
    fn drop(&mut self) {
        // SAFETY: `ctx` came from ZSTD_createDCtx and is freed exactly once, here.
        unsafe {
            zstd_sys::ZSTD_freeDCtx(self.ctx.as_ptr());
        }
    }
}

#[cfg(test)]
mod segment_tests {
    use super::*;
    use std::collections::VecDeque;

    const CAPS: DecodeCaps = DecodeCaps {
        zstd_window_log_max: 31,
    };

    /// Input handed out in runs of at most `run` bytes (a run never crosses a multiple of
    /// `run`), like the cursor's block-bounded runs.
    struct Runs {
        data: Vec<u8>,
        pos: usize,
        run: usize,
    }

    impl RunSource for Runs {
        fn next_run(&mut self) -> Result<&[u8], Fault> {
            let end = ((self.pos / self.run + 1) * self.run).min(self.data.len());
            Ok(&self.data[self.pos..end])
        }
        fn consume_run(&mut self, n: usize) {
            self.pos += n;
        }
        fn left(&self) -> u64 {
            (self.data.len() - self.pos) as u64
        }
    }

    /// 12 MiB in which every 64 KiB block repeats one from 900 KiB to 1 MiB earlier with a
    /// few changes: matches reach back almost a whole window, across segment boundaries.
    fn far_matches() -> Vec<u8> {
        let mut x = 0x9e37_79b9_u32;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let mut data: Vec<u8> = (0..1 << 20).map(|_| next() as u8).collect();
        while data.len() < 12 << 20 {
            let back = (900 << 10) + (next() as usize % (100 << 10));
            let from = data.len() - back;
            let mut block = data[from..from + (64 << 10)].to_vec();
            let at = next() as usize % block.len();
            block[at] ^= 0x55;
            data.extend_from_slice(&block);
        }
        data
    }

    /// A frame with a content checksum, long-distance matching on (so matches up to the
    /// window are found at level 3).
    fn frame(data: &[u8], window_log: u32) -> Vec<u8> {
        use zstd::zstd_safe::CParameter;
        let mut c = zstd::bulk::Compressor::new(3).unwrap();
        for p in [
            CParameter::WindowLog(window_log),
            CParameter::EnableLongDistanceMatching(true),
            CParameter::ChecksumFlag(true),
        ] {
            c.set_parameter(p).unwrap();
        }
        c.compress(data).unwrap()
    }

    /// Decodes with segments, the consumer keeping the last `held` segments alive (as a
    /// writer thread with a queue would); returns the bytes and how many segments there were.
    fn decode(
        frame: Vec<u8>,
        run: usize,
        held: usize,
        limit: u64,
    ) -> Result<(Vec<u8>, usize), Fault> {
        let mut runs = Runs {
            data: frame,
            pos: 0,
            run,
        };
        let mut out = Vec::new();
        let mut queue = VecDeque::new();
        let mut count = 0;
        let mut emit = |segment: Arc<Vec<u8>>| {
            out.extend_from_slice(&segment);
            count += 1;
            queue.push_back(segment);
            if queue.len() > held {
                queue.pop_front();
            }
            Ok(())
        };
        let decoded = zstd_segments(&mut runs, CAPS, limit, &mut emit)?.expect("suits segments");
        assert_eq!(decoded, out.len() as u64);
        assert_eq!(runs.left(), 0, "the frame uses up the input");
        Ok((out, count))
    }

    #[test]
    fn segments_decode_matches_reaching_back_across_segments() {
        let data = far_matches();
        let compressed = frame(&data, 20);
        assert!(
            compressed.len() < data.len() / 4,
            "the data must have long matches"
        );
        // Runs of a whole frame, of riegeli block size and tiny ones (every block gathered);
        // a consumer releasing at once, and one holding five segments.
        for (run, held) in [(usize::MAX, 0), (65_512, 5), (1000, 2)] {
            let (out, segments) = decode(compressed.clone(), run, held, data.len() as u64).unwrap();
            assert!(out == data, "run {run}, held {held}");
            assert!(segments >= 5, "{segments} segments");
        }
    }

    #[test]
    fn segments_refuse_bad_frames_and_leave_large_windows_alone() {
        let data = far_matches();
        let compressed = frame(&data, 20);
        // More output than the limit.
        match decode(compressed.clone(), usize::MAX, 0, data.len() as u64 - 1) {
            Err(Fault::Corrupt(msg)) => assert!(msg.contains("more than"), "{msg}"),
            other => panic!("{other:?}"),
        }
        // Truncated.
        let cut = compressed[..compressed.len() / 2].to_vec();
        match decode(cut, 65_512, 0, data.len() as u64) {
            Err(Fault::Corrupt(msg)) => assert!(msg.contains("truncated"), "{msg}"),
            other => panic!("{other:?}"),
        }
        // Corrupted in the middle: an error (a decoding error or the frame checksum), never a
        // panic or wrong bytes.
        let mut bad = compressed.clone();
        let mid = bad.len() / 2;
        for b in &mut bad[mid..mid + 64] {
            *b ^= 0xa5;
        }
        assert!(decode(bad, 65_512, 0, data.len() as u64).is_err());
        // A 16 MiB window (no content size, so the window is declared): above
        // SEGMENT_WINDOW_MAX, so not for segments, and nothing is consumed.
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        encoder.window_log(24).unwrap();
        encoder.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut encoder, &data[..100_000]).unwrap();
        let big_window = encoder.finish().unwrap();
        let mut runs = Runs {
            data: big_window,
            pos: 0,
            run: usize::MAX,
        };
        let mut emit = |_: Arc<Vec<u8>>| Ok(());
        assert!(zstd_segments(&mut runs, CAPS, u64::MAX, &mut emit)
            .unwrap()
            .is_none());
        assert_eq!(runs.pos, 0);
    }
}
