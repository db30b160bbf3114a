//! How the reference writer hands a chunk's bytes to its compressors, piece by piece.
//!
//! A simple chunk has two compressed buffers: the record sizes (one varint per record) and the
//! record values. The reference writes them through riegeli's buffered compressor writers,
//! which collect small writes in a buffer and pass the compressor a piece whenever the buffer
//! must be flushed or a write is large enough to go straight through; what is left goes with
//! the final "finish" call. Where the compressor's output depends on those boundaries, our
//! output only matches if we cut the input in the same places:
//! - zstd writes its content size in the frame header only when all input arrives at once;
//! - brotli (at qualities 0 and 1 every piece, at any quality the moment its size hint is set
//!   and an exactly filled last block) depends on when input arrives.
//!
//! [`Feed::of`] replays riegeli's buffer sizing for a sequence of writes: buffers of at least
//! 4 KiB, growing with the position up to 64 KiB, each ending at a multiple of its length
//! rounded up to a power of two, with no size hint (the reference gives its chunk encoder
//! none). A varint write first asks for 10 bytes of room (the longest varint), as riegeli
//! does when the value is not known at compile time.

/// One write of the chunk encoder into a compressor's writer.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Write {
    /// `n` bytes of a record.
    Bytes(usize),
    /// A varint `n` bytes long (room for the longest one is asked first).
    Varint(usize),
}

/// The pieces a compressor receives: `flushed` are passed on while writing ("process"), then
/// `last` bytes at close ("finish", possibly none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Feed {
    pub flushed: Vec<usize>,
    pub last: usize,
}

const MIN_BUFFER: u64 = 4 << 10;
const MAX_BUFFER: u64 = 64 << 10;
const MAX_VARINT: u64 = 10;

impl Feed {
    /// The pieces riegeli's writer cuts `writes` into.
    pub(crate) fn of(writes: impl IntoIterator<Item = Write>) -> Feed {
        let mut buffer = Buffer::default();
        for write in writes {
            match write {
                Write::Bytes(n) => buffer.write(n as u64),
                Write::Varint(n) => {
                    buffer.push(MAX_VARINT);
                    buffer.used += n as u64;
                }
            }
        }
        Feed {
            flushed: buffer.flushed,
            last: buffer.used as usize,
        }
    }

    /// True when everything arrives with the final call.
    pub(crate) fn is_one_shot(&self) -> bool {
        self.flushed.is_empty()
    }

    /// Total bytes fed.
    pub(crate) fn total(&self) -> usize {
        self.flushed.iter().sum::<usize>() + self.last
    }
}

/// A record's bytes given as pieces (a header, then each tensor), read front to back in
/// slices that never cross a piece boundary: the compressors cut their input where the
/// reference does without joining the pieces first.
pub(crate) struct PieceCursor<'a> {
    pieces: &'a [&'a [u8]],
    /// The piece being read, and the offset in it of the next byte.
    piece: usize,
    at: usize,
}

impl<'a> PieceCursor<'a> {
    pub(crate) fn new(pieces: &'a [&'a [u8]]) -> Self {
        PieceCursor {
            pieces,
            piece: 0,
            at: 0,
        }
    }

    /// Up to `len` of the next bytes, from one piece; empty only when every piece is read.
    pub(crate) fn take(&mut self, len: usize) -> &'a [u8] {
        while self
            .pieces
            .get(self.piece)
            .is_some_and(|piece| self.at == piece.len())
        {
            self.piece += 1;
            self.at = 0;
        }
        let Some(piece) = self.pieces.get(self.piece) else {
            return &[];
        };
        let taken = &piece[self.at..self.at + len.min(piece.len() - self.at)];
        self.at += taken.len();
        taken
    }
}

/// The state of riegeli's `BufferedWriter` that decides where pieces end.
#[derive(Default)]
struct Buffer {
    /// Position of the buffer's first byte in the stream.
    start: u64,
    /// Length of the current buffer (0: none allocated).
    len: u64,
    /// Bytes written into the current buffer.
    used: u64,
    flushed: Vec<usize>,
}

impl Buffer {
    fn available(&self) -> u64 {
        self.len - self.used
    }

    /// A `Write` of `n` bytes: copied while it fits, written through when it is at least as
    /// long as a buffer at this position would be, otherwise spread over fresh buffers.
    fn write(&mut self, mut n: u64) {
        if n <= self.available() {
            self.used += n;
            return;
        }
        if n >= buffer_length(self.start + self.used, 0, 0) {
            self.sync();
            self.flushed.push(n as usize);
            self.start += n;
            return;
        }
        loop {
            n -= self.available();
            self.used = self.len;
            self.push_slow(1, n);
            if n <= self.available() {
                break;
            }
        }
        self.used += n;
    }

    /// A `Push(min)`: makes room for `min` bytes, flushing if there is not enough.
    fn push(&mut self, min: u64) {
        if self.available() < min {
            self.push_slow(min, 0);
        }
    }

    fn push_slow(&mut self, min: u64, recommended: u64) {
        self.sync();
        self.len = buffer_length(self.start, min, recommended);
    }

    /// Passes the buffered bytes on and drops the buffer.
    fn sync(&mut self) {
        if self.used > 0 {
            self.flushed.push(self.used as usize);
        }
        self.start += self.used;
        self.used = 0;
        self.len = 0;
    }
}

/// riegeli's write-buffer length at `pos` for a writer that was never flushed and has no size
/// hint: at least the bytes written so far (and 4 KiB), at most 64 KiB, cut so the buffer ends
/// at a multiple of that length rounded up to a power of two, and never below `min`.
fn buffer_length(pos: u64, min: u64, recommended: u64) -> u64 {
    let base = pos.max(MIN_BUFFER);
    let for_rounding = base.max(min).max(recommended).min(MAX_BUFFER);
    let mask = for_rounding.next_power_of_two() - 1;
    let rounded = (!pos & mask) + 1;
    if rounded < min {
        ((min - rounded + mask) & !mask) + rounded
    } else {
        rounded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(sizes: &[usize]) -> Feed {
        Feed::of(sizes.iter().map(|&n| Write::Bytes(n)))
    }

    #[test]
    fn small_writes_arrive_at_close() {
        assert_eq!(
            bytes(&[100, 200, 3796]),
            Feed {
                flushed: vec![],
                last: 4096
            }
        );
        assert!(bytes(&[0, 0]).is_one_shot());
    }

    #[test]
    fn a_write_as_long_as_the_first_buffer_goes_straight_through() {
        assert_eq!(
            bytes(&[4096]),
            Feed {
                flushed: vec![4096],
                last: 0
            }
        );
        assert_eq!(
            bytes(&[4095]),
            Feed {
                flushed: vec![],
                last: 4095
            }
        );
        // After 1000 bytes, 3096 still fit; 3097 do not, and go through after the 1000.
        assert_eq!(
            bytes(&[1000, 3096]),
            Feed {
                flushed: vec![],
                last: 4096
            }
        );
        assert_eq!(
            bytes(&[1000, 3097]),
            Feed {
                flushed: vec![1000, 3097],
                last: 0
            }
        );
    }

    #[test]
    fn buffers_grow_with_the_position() {
        // A write that does not fit flushes the buffer and goes through; the next buffer runs
        // from its position to the next multiple of a power of two at least that position:
        // 5000..8192, 9000..16384, 17000..32768.
        let feed = bytes(&[1000; 20]);
        assert_eq!(feed.flushed, vec![4000, 1000, 3000, 1000, 7000, 1000]);
        assert_eq!(feed.last, 3000);
        assert_eq!(feed.total(), 20_000);
    }

    #[test]
    fn varints_flush_when_ten_bytes_of_room_are_missing() {
        // 4086 one-byte varints leave exactly 10 bytes of room; the next still fits.
        let fits = Feed::of(std::iter::repeat_n(Write::Varint(1), 4087));
        assert_eq!(
            fits,
            Feed {
                flushed: vec![],
                last: 4087
            }
        );
        let flushes = Feed::of(std::iter::repeat_n(Write::Varint(1), 4088));
        assert_eq!(
            flushes,
            Feed {
                flushed: vec![4087],
                last: 1
            }
        );
    }

    #[test]
    fn buffer_lengths_follow_riegeli() {
        assert_eq!(buffer_length(0, 1, 0), 4096);
        assert_eq!(buffer_length(3000, 0, 0), 1096);
        assert_eq!(buffer_length(4096, 1, 0), 4096);
        assert_eq!(buffer_length(8192, 1, 0), 8192);
        assert_eq!(buffer_length(1 << 20, 1, 0), 64 << 10);
        // A large recommendation widens the rounding, up to 64 KiB.
        assert_eq!(buffer_length(4096, 1, 100_000), 61_440);
        // Fewer than `min` bytes to the boundary: the next boundary.
        assert_eq!(buffer_length(4090, 10, 0), 4096 + 6);
    }
}
