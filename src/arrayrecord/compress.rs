//! Compressed buffers of simple chunks (spec sections 5 and 8).
//!
//! Writing: each of the two buffers of a simple chunk (record sizes, record values) is
//! `varint(uncompressed length) ++ compressor output`, or the raw bytes when uncompressed.
//! To reproduce the reference bytes, zstd has two modes: a one-shot frame (content size
//! known) when riegeli's 4096-byte buffer would have held everything, and a streamed frame
//! (no content size) otherwise; the caller decides which (see `writer`).
//!
//! Reading: decompression is always capped at the size the chunk header promises, so a
//! hostile frame cannot make us allocate more than the (already limit-checked) header says.

use std::io::{self, Read, Write};

use super::error::{corrupt, Fault};
use super::options::Compression;
use super::varint;

/// Appends the framed compressed form of `input` to `out`.
pub(crate) fn compress_buffer(
    compression: &Compression,
    input: &[u8],
    one_shot: bool,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    if let Compression::None = compression {
        out.extend_from_slice(input);
        return Ok(());
    }
    varint::put(out, input.len() as u64);
    match *compression {
        Compression::Zstd { level, window_log } if one_shot => {
            out.extend_from_slice(&zstd_one_shot(level, window_log, input)?)
        }
        Compression::Zstd { level, window_log } => zstd_streamed(level, window_log, input, out)?,
        Compression::Brotli {
            quality,
            window_log,
        } => brotli_compress(quality, window_log, input, out)?,
        Compression::Snappy => {
            let compressed = snap::raw::Encoder::new()
                .compress_vec(input)
                .map_err(io::Error::other)?;
            out.extend_from_slice(&compressed);
        }
        Compression::None => {}
    }
    Ok(())
}

fn zstd_one_shot(level: i32, window_log: u32, input: &[u8]) -> io::Result<Vec<u8>> {
    use zstd::zstd_safe::CParameter;
    let mut c = zstd::bulk::Compressor::new(level)?;
    c.set_parameter(CParameter::WindowLog(window_log))?;
    c.set_parameter(CParameter::ChecksumFlag(false))?;
    c.set_parameter(CParameter::ContentSizeFlag(true))?;
    c.compress(input)
}

fn zstd_streamed(level: i32, window_log: u32, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
    use zstd::zstd_safe::CParameter;
    // No pledged size: this is what makes the frame header match riegeli's streamed frames.
    let mut e = zstd::stream::write::Encoder::new(out, level)?;
    e.set_parameter(CParameter::WindowLog(window_log))?;
    e.include_checksum(false)?;
    e.include_contentsize(true)?;
    e.write_all(input)?;
    e.finish()?;
    Ok(())
}

fn brotli_compress(
    quality: u32,
    window_log: Option<u32>,
    input: &[u8],
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let lgwin = window_log.unwrap_or(22);
    let params = brotli::enc::BrotliEncoderParams {
        quality: quality as i32,
        lgwin: lgwin as i32,
        large_window: lgwin > 24,
        size_hint: input.len(),
        ..Default::default()
    };
    let mut reader = input;
    brotli::enc::BrotliCompress(&mut reader, out, &params)?;
    Ok(())
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
    let mut d = zstd::bulk::Decompressor::new()?;
    d.window_log_max(caps.zstd_window_log_max)?;
    let mut out = Vec::with_capacity(expected as usize);
    d.decompress_to_buffer(payload, &mut out)
        .map_err(|e| corrupt(format!("decompression failed: {e}")))?;
    check_len(out.len() as u64, expected, exact)?;
    Ok(out)
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

    fn round_trip(c: Compression, one_shot: bool) {
        let input: Vec<u8> = (0..20000u32).map(|i| (i % 251) as u8).collect();
        let mut buf = Vec::new();
        compress_buffer(&c, &input, one_shot, &mut buf).unwrap();
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
        round_trip(
            Compression::Brotli {
                quality: 6,
                window_log: None,
            },
            true,
        );
        round_trip(Compression::Snappy, true);
        round_trip(Compression::None, true);
    }

    #[test]
    fn zstd_frame_header_modes() {
        let zstd = Compression::Zstd {
            level: 3,
            window_log: 20,
        };
        let mut one = Vec::new();
        compress_buffer(&zstd, b"\x05", true, &mut one).unwrap();
        assert_eq!(
            hex::encode(&one),
            "0128b52ffd2001090000 05".replace(' ', "")
        );
        let mut streamed = Vec::new();
        compress_buffer(&zstd, &[7u8; 5000], false, &mut streamed).unwrap();
        // Prefix 5000 = 88 27, magic, FHD without content size / single segment, window 0x50.
        assert_eq!(
            &streamed[..8],
            &[0x88, 0x27, 0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x50]
        );
    }
}
