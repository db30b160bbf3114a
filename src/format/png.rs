//! Pictures as bytes: an RGB canvas with a tiny built-in font, and a PNG encoder whose output
//! size is a function of the dimensions alone.
//!
//! Why stored (uncompressed) deflate blocks: the mount must report a picture's exact size
//! before it reads the record, so the encoding may not depend on the pixels. A stored block
//! holds at most 65535 bytes behind a 5-byte header, so a `width × height` image always takes
//! [`palette_png_len`] bytes. Every value here is bounded by [`MAX_SIDE`].
//!
//! Why a palette: a picture drawn with at most 256 colours (a quantized colour map and a few
//! for text and marks) is one byte a pixel instead of three behind a 768-byte `PLTE`
//! ([`Canvas::to_palette_png`]): a third of RGB's size, still fixed.
//!
//! Why not the `png` crate: its `DeflateCompression::NoCompression` writes stored blocks too,
//! but its documentation reserves the right to change how it compresses (and so where blocks
//! and `IDAT` chunks split) without a semver-breaking release, and `stat` has promised these
//! sizes before the first read. The encoder here is a hundred lines; its checksums are tested
//! against their standard check values and Pillow decodes its output (`tests/mount_pictures.rs`).

/// Largest width or height a canvas takes (larger requests are clamped).
pub const MAX_SIDE: u32 = 2048;
/// Width of a glyph cell (3 pixels of glyph and one of spacing).
pub const GLYPH_W: u32 = 4;
/// Height of a glyph cell (5 pixels of glyph and one of spacing).
pub const GLYPH_H: u32 = 6;

const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
const STORED_BLOCK_MAX: u64 = 65_535;

/// An 8-bit RGB colour.
pub type Rgb = [u8; 3];

/// A `width × height` RGB image, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Canvas {
    width: u32,
    height: u32,
    pixels: Vec<u8>,
}

impl Canvas {
    /// A canvas filled with `background`; sides are clamped to `1..=MAX_SIDE`.
    pub fn new(width: u32, height: u32, background: Rgb) -> Canvas {
        let (width, height) = (width.clamp(1, MAX_SIDE), height.clamp(1, MAX_SIDE));
        let pixels = background.repeat(width as usize * height as usize);
        Canvas {
            width,
            height,
            pixels,
        }
    }

    pub fn width(&self) -> u32 {
        self.width
    }

    pub fn height(&self) -> u32 {
        self.height
    }

    /// Pixel `(x, y)`, `None` outside the canvas.
    pub fn pixel(&self, x: i64, y: i64) -> Option<Rgb> {
        if x < 0 || y < 0 || x >= i64::from(self.width) || y >= i64::from(self.height) {
            return None;
        }
        let at = 3 * (y as usize * self.width as usize + x as usize);
        let pixel = self.pixels.get(at..at + 3)?;
        Some([pixel[0], pixel[1], pixel[2]])
    }

    /// Sets pixel `(x, y)`; outside the canvas does nothing.
    pub fn set(&mut self, x: i64, y: i64, colour: Rgb) {
        if x < 0 || y < 0 || x >= i64::from(self.width) || y >= i64::from(self.height) {
            return;
        }
        let at = (y as usize * self.width as usize + x as usize) * 3;
        self.pixels[at..at + 3].copy_from_slice(&colour);
    }

    /// Fills the rectangle `[x0, x1) × [y0, y1)` (clipped).
    pub fn fill(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), colour: Rgb) {
        let (width, height) = (i64::from(self.width), i64::from(self.height));
        let clip_x = |v: i64| v.clamp(0, width);
        let clip_y = |v: i64| v.clamp(0, height);
        for y in clip_y(y0)..clip_y(y1) {
            for x in clip_x(x0)..clip_x(x1) {
                self.set(x, y, colour);
            }
        }
    }

    /// The one-pixel outline of the rectangle `[x0, x1) × [y0, y1)`.
    pub fn outline(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), colour: Rgb) {
        self.fill((x0, y0), (x1, y0 + 1), colour);
        self.fill((x0, y1 - 1), (x1, y1), colour);
        self.fill((x0, y0), (x0 + 1, y1), colour);
        self.fill((x1 - 1, y0), (x1, y1), colour);
    }

    /// `text` in the built-in font with its top-left corner at `(x, y)`, at most `max_chars`
    /// characters (lower case drawn as upper case, unknown characters as `?`).
    pub fn text(&mut self, (x, y): (i64, i64), text: &str, max_chars: usize, colour: Rgb) {
        for (index, character) in text.chars().take(max_chars).enumerate() {
            let left = x + index as i64 * i64::from(GLYPH_W);
            for (row, bits) in glyph(character).iter().enumerate() {
                for column in 0..3 {
                    if bits & (0b100 >> column) != 0 {
                        self.set(left + column, y + row as i64, colour);
                    }
                }
            }
        }
    }

    /// The canvas as an indexed-colour PNG of `palette` (exactly [`palette_png_len`] bytes):
    /// each pixel is its colour's index, a colour not in the palette the nearest entry's.
    pub fn to_palette_png(&self, palette: &[Rgb; 256]) -> Vec<u8> {
        let mut index_of: std::collections::HashMap<Rgb, u8> = std::collections::HashMap::new();
        for (index, colour) in palette.iter().enumerate().rev() {
            index_of.insert(*colour, index as u8);
        }
        let indices: Vec<u8> = self
            .pixels
            .chunks_exact(3)
            .map(|pixel| {
                let colour = [pixel[0], pixel[1], pixel[2]];
                *index_of
                    .entry(colour)
                    .or_insert_with(|| nearest(palette, colour))
            })
            .collect();
        encode_indexed(self.width, self.height, &indices, palette)
    }
}

/// The index of the palette entry nearest `colour` (squared RGB distance).
fn nearest(palette: &[Rgb; 256], colour: Rgb) -> u8 {
    let distance = |entry: &Rgb| -> u32 {
        (0..3)
            .map(|i| {
                let d = i32::from(entry[i]) - i32::from(colour[i]);
                (d * d) as u32
            })
            .sum()
    };
    (0..256usize)
        .min_by_key(|&i| distance(&palette[i]))
        .unwrap_or(0) as u8
}

/// The size of the PNG [`Canvas::to_palette_png`] writes for a `width × height` image.
pub fn palette_png_len(width: u32, height: u32) -> u64 {
    let raw = u64::from(height) * (1 + u64::from(width));
    let blocks = raw.div_ceil(STORED_BLOCK_MAX).max(1);
    let zlib = 2 + raw + 5 * blocks + 4;
    SIGNATURE.len() as u64 + chunk_len(13) + chunk_len(768) + chunk_len(zlib) + chunk_len(0)
}

/// A PNG of 8-bit palette `indices` (row-major, `width × height` bytes): filter 0 on every
/// line, stored deflate blocks.
fn encode_indexed(width: u32, height: u32, indices: &[u8], palette: &[Rgb; 256]) -> Vec<u8> {
    let row_bytes = width as usize;
    let mut scanlines = Vec::with_capacity(height as usize * (row_bytes + 1));
    for y in 0..height as usize {
        scanlines.push(0);
        let row = indices
            .get(y * row_bytes..(y + 1) * row_bytes)
            .unwrap_or(&[]);
        scanlines.extend_from_slice(row);
        scanlines.resize((y + 1) * (row_bytes + 1), 0);
    }
    let mut header = Vec::with_capacity(13);
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    header.extend_from_slice(&[8, 3, 0, 0, 0]);
    let plte: Vec<u8> = palette.iter().flatten().copied().collect();
    let mut out = Vec::with_capacity(palette_png_len(width, height) as usize);
    out.extend_from_slice(&SIGNATURE);
    write_chunk(&mut out, b"IHDR", &header);
    write_chunk(&mut out, b"PLTE", &plte);
    write_chunk(&mut out, b"IDAT", &zlib_stored(&scanlines));
    write_chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk_len(data: u64) -> u64 {
    4 + 4 + data + 4
}

fn write_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// A zlib stream of stored deflate blocks (RFC 1950/1951).
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let mut blocks = data.chunks(STORED_BLOCK_MAX as usize).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        let last = u8::from(blocks.peek().is_none());
        let len = block.len() as u16;
        out.push(last);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= 65_521;
        b %= 65_521;
    }
    (b << 16) | a
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xedb8_8320 & mask);
        }
    }
    !crc
}

/// The 3×5 glyph of `character`: five rows of three bits, the high bit leftmost.
fn glyph(character: char) -> [u8; 5] {
    match character.to_ascii_uppercase() {
        '0' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 7, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 2, 2],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        'A' => [2, 5, 7, 5, 5],
        'B' => [6, 5, 6, 5, 6],
        'C' => [3, 4, 4, 4, 3],
        'D' => [6, 5, 5, 5, 6],
        'E' => [7, 4, 6, 4, 7],
        'F' => [7, 4, 6, 4, 4],
        'G' => [3, 4, 5, 5, 3],
        'H' => [5, 5, 7, 5, 5],
        'I' => [7, 2, 2, 2, 7],
        'J' => [1, 1, 1, 5, 2],
        'K' => [5, 5, 6, 5, 5],
        'L' => [4, 4, 4, 4, 7],
        'M' => [5, 7, 7, 5, 5],
        'N' => [6, 5, 5, 5, 5],
        'O' => [2, 5, 5, 5, 2],
        'P' => [6, 5, 6, 4, 4],
        'Q' => [2, 5, 5, 6, 3],
        'R' => [6, 5, 6, 5, 5],
        'S' => [3, 4, 2, 1, 6],
        'T' => [7, 2, 2, 2, 2],
        'U' => [5, 5, 5, 5, 7],
        'V' => [5, 5, 5, 5, 2],
        'W' => [5, 5, 7, 7, 5],
        'X' => [5, 5, 2, 5, 5],
        'Y' => [5, 5, 2, 2, 2],
        'Z' => [7, 1, 2, 4, 7],
        '.' => [0, 0, 0, 0, 2],
        ',' => [0, 0, 0, 2, 4],
        '-' => [0, 0, 7, 0, 0],
        '+' => [0, 2, 7, 2, 0],
        ':' => [0, 2, 0, 2, 0],
        '/' => [1, 1, 2, 4, 4],
        '_' => [0, 0, 0, 0, 7],
        '%' => [5, 1, 2, 4, 5],
        '(' => [2, 4, 4, 4, 2],
        ')' => [2, 1, 1, 1, 2],
        '=' => [0, 7, 0, 7, 0],
        '#' => [5, 7, 5, 7, 5],
        ' ' => [0; 5],
        _ => [7, 1, 2, 0, 2],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_known_values() {
        // Standard check values of CRC-32 and Adler-32 for "123456789".
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(adler32(b"123456789"), 0x091e_01de);
        // The IEND chunk's CRC every PNG ends with.
        assert_eq!(crc32(b"IEND"), 0xae42_6082);
    }

    #[test]
    fn palette_pngs_have_their_fixed_size_and_nearest_colours() {
        let mut palette = [[0u8; 3]; 256];
        for (i, entry) in palette.iter_mut().enumerate() {
            *entry = [i as u8, 0, 0];
        }
        for (width, height) in [(1, 1), (3, 2), (352, 292), (2048, 2048)] {
            let mut canvas = Canvas::new(width, height, [9, 0, 0]);
            canvas.set(0, 0, [200, 90, 90]);
            let png = canvas.to_palette_png(&palette);
            assert_eq!(png.len() as u64, palette_png_len(width, height));
        }
        assert_eq!(nearest(&palette, [200, 90, 90]), 200);
        // 1×1: 8 + 25 + (12 + 768) + (12 + 2 + 2 + 5 + 4) + 12, counted by hand.
        assert_eq!(palette_png_len(1, 1), 850);
        assert_eq!(Canvas::new(0, 99_999, [0; 3]).height(), MAX_SIDE);
    }

    #[test]
    fn text_and_shapes_stay_on_the_canvas() {
        let mut canvas = Canvas::new(8, 8, [0; 3]);
        canvas.text((-2, 6), "A?é", 3, [255; 3]);
        canvas.outline((-5, -5), (100, 100), [1; 3]);
        canvas.fill((2, 2), (4, 3), [7; 3]);
        assert_eq!(&canvas.pixels[(2 * 8 + 2) * 3..(2 * 8 + 3) * 3], &[7, 7, 7]);
    }
}
