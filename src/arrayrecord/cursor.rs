//! Reading one chunk piece by piece: the fused read path (spec 3, 4.1, 4.2).
//!
//! [`ChunkCursor`] reads a chunk's physical bytes in pieces of at most a few MiB and hands out
//! its logical data bytes as runs that never cross a block boundary, straight out of the
//! piece that was read (no gathering copy). Every block header it steps over is checked
//! against the chunk's begin and end; every data byte is hashed exactly once, when it is
//! consumed, so decompressors can be fed from the runs while they are still in cache and the
//! data hash is known as soon as the last byte went through. [`ChunkCursor::finish`] drains
//! what the decoder did not consume, checks the data hash and the block headers in the zero
//! fill, so the checking is the same as reading the whole chunk and verifying it first.
//!
//! The cursor is also a `BufRead` (faults travel as `io::Error`, see `stream`), which is how
//! the streaming decoders and `read_into` consume it.
//!
//! Read-ahead ([`ChunkCursor::read_ahead`], for large chunks, streamed to a sink or decoded in
//! memory): a helper thread reads the following pieces, checks their block headers, hashes
//! their data bytes and hands the cursor the data alone, contiguous (block headers taken out),
//! while the caller decodes. Reading, checking and hashing (about a sixth of decoding a 256 MiB record on one
//! thread) leave the decoding thread, and zstd, given runs of megabytes instead of 64 KiB,
//! decodes its blocks in place instead of first gathering each into a buffer of its own. The
//! checks are the same: every block header up to the chunk end, and `finish` compares the
//! helper's hash of exactly the data bytes with the header's.

use std::io;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use bytes::Bytes;

use super::chunk::ChunkHeader;
use super::compress::RunSource;
use super::error::{corrupt, Fault};
use super::hash::Hasher;
use super::layout::check_block_header;
use super::position::{self, BLOCK, BLOCK_HEADER, CHUNK_HEADER};
use super::source::ByteSource;
use super::stream::fault_to_io;
use super::varint;

/// Largest positional read the cursor issues (a multiple of the block size). A chunk span no
/// larger than this is read in one go.
pub const PIECE: u64 = 4 << 20;
/// Pieces the read-ahead helper may hold ready beyond the one being decoded.
const AHEAD_PIECES: usize = 2;
/// Piece size of a cursor that only looks at a chunk's first bytes ([`ChunkCursor::peek`]).
const PEEK_PIECE: u64 = BLOCK;

/// The most memory a cursor over a chunk spanning `span_len` bytes holds in pieces: without
/// read-ahead the current piece and the next while it is read; with read-ahead one piece the
/// caller decodes and the one it just received, [`AHEAD_PIECES`] queued, and one the helper is
/// filling (headers, data and zero fill together make at most one piece).
pub(crate) fn memory_bound(span_len: u64, read_ahead: bool) -> u64 {
    if read_ahead {
        (AHEAD_PIECES as u64 + 3) * PIECE
    } else {
        2 * span_len.min(PIECE)
    }
}

/// What the read-ahead helper sends, in order: the chunk's data bytes in contiguous runs, then
/// the hash of all of them once every block header up to the chunk end is checked (or the
/// failure that stopped it).
enum Ahead {
    Data(Bytes),
    Hash(u64),
    Failed(Fault),
}

/// The cursor's state while a read-ahead helper delivers the data.
struct Logical {
    pieces: Receiver<Ahead>,
    /// The data run being consumed, and how much of it is.
    run: Bytes,
    used: usize,
}

/// The data bytes of one chunk, read piecewise.
pub struct ChunkCursor<'a, S: ?Sized> {
    source: &'a S,
    begin: u64,
    /// Physical end of the chunk (before the header is known: the limit).
    end: u64,
    /// Physical position of the next byte to deliver.
    pos: u64,
    /// Physical bytes `[piece_pos, piece_pos + piece.len())`.
    piece: Bytes,
    piece_pos: u64,
    /// Data bytes not consumed yet.
    data_left: u64,
    data_hash: u64,
    hasher: Hasher,
    /// Set while a read-ahead helper delivers the data (see the module docs).
    ahead: Option<Logical>,
    /// Largest positional read: [`PIECE`], or [`PEEK_PIECE`] for a peek.
    piece_max: u64,
}

impl<'a, S: ByteSource + ?Sized> ChunkCursor<'a, S> {
    /// Opens the chunk at `begin`, which must end by `limit`: reads and checks its header
    /// (hash, extent) and the block headers it crosses. The cursor then stands at the first
    /// data byte.
    pub fn open(source: &'a S, begin: u64, limit: u64) -> Result<(Self, ChunkHeader), Fault> {
        Self::open_with_pieces(source, begin, limit, PIECE)
    }

    /// [`open`](Self::open) with reads of at most one block: for looking at the first bytes of
    /// a chunk's data (its compression, a frame header) without reading megabytes of it.
    pub fn peek(source: &'a S, begin: u64, limit: u64) -> Result<(Self, ChunkHeader), Fault> {
        Self::open_with_pieces(source, begin, limit, PEEK_PIECE)
    }

    fn open_with_pieces(
        source: &'a S,
        begin: u64,
        limit: u64,
        piece_max: u64,
    ) -> Result<(Self, ChunkHeader), Fault> {
        if !position::is_chunk_boundary(begin) {
            return Err(corrupt("chunk offset is not a valid chunk boundary"));
        }
        position::add_with_overhead(begin, CHUNK_HEADER)
            .filter(|&e| e <= limit)
            .ok_or_else(|| corrupt(format!("chunk header runs past {limit}")))?;
        let mut cursor = Self {
            source,
            begin,
            end: limit,
            pos: begin,
            piece: Bytes::new(),
            piece_pos: begin,
            data_left: 0,
            data_hash: 0,
            hasher: Hasher::new(),
            ahead: None,
            piece_max,
        };
        // The chunk end is unknown until the header is decoded: step over block headers
        // unchecked, then check them once the end is known.
        let mut raw = [0u8; 40];
        let mut got = 0usize;
        while got < raw.len() {
            if cursor.pos % BLOCK == 0 {
                cursor.pos += BLOCK_HEADER;
            }
            let run = position::remaining_in_block(cursor.pos).min((raw.len() - got) as u64);
            let bytes = cursor.physical(cursor.pos, run)?;
            raw[got..got + bytes.len()].copy_from_slice(bytes);
            got += bytes.len();
            cursor.pos += run;
        }
        let header = ChunkHeader::decode(&raw)?;
        cursor.end = position::chunk_end(begin, header.data_size, header.num_records)
            .filter(|&e| e <= limit)
            .ok_or_else(|| {
                corrupt(format!(
                    "chunk (data_size {}, {} records) runs past {limit}",
                    header.data_size, header.num_records
                ))
            })?;
        let mut at = position::next_boundary_at_or_after(begin)
            .ok_or_else(|| corrupt("chunk position overflow"))?;
        while at < cursor.pos {
            cursor.check_block_header(at)?;
            at += BLOCK;
        }
        cursor.data_left = header.data_size;
        cursor.data_hash = header.data_hash;
        Ok((cursor, header))
    }

    /// Data bytes not consumed yet.
    pub fn data_left(&self) -> u64 {
        self.data_left
    }

    /// Starts a helper thread in `scope` that reads, checks and hashes the rest of the chunk
    /// and delivers its data (see the module docs). Only right after [`open`](Self::open);
    /// when no thread can be started the cursor reads and hashes as before.
    pub fn read_ahead<'scope>(&mut self, scope: &'scope std::thread::Scope<'scope, '_>)
    where
        'a: 'scope,
    {
        if self.ahead.is_some() {
            return;
        }
        let (sender, pieces) = sync_channel(AHEAD_PIECES);
        let plan = AheadPlan {
            first: self.piece.clone(),
            first_pos: self.piece_pos,
            data_pos: self.pos,
            data_left: self.data_left,
            begin: self.begin,
            end: self.end,
        };
        let source = self.source;
        let started = std::thread::Builder::new()
            .name("sdsfs-read-ahead".into())
            .spawn_scoped(scope, move || plan.run(source, &sender));
        if started.is_ok() {
            self.piece = Bytes::new();
            self.ahead = Some(Logical {
                pieces,
                run: Bytes::new(),
                used: 0,
            });
        }
    }

    /// The next data bytes from the read-ahead helper (empty once the data is used up).
    fn logical_fill(&mut self) -> Result<&[u8], Fault> {
        let data_left = self.data_left;
        let Some(logical) = self.ahead.as_mut() else {
            return Ok(&[]);
        };
        if data_left == 0 {
            return Ok(&[]);
        }
        while logical.used >= logical.run.len() {
            match logical.pieces.recv() {
                Ok(Ahead::Data(run)) => {
                    logical.run = run;
                    logical.used = 0;
                }
                Ok(Ahead::Failed(fault)) => return Err(fault),
                Ok(Ahead::Hash(_)) | Err(_) => {
                    return Err(corrupt("chunk data runs past the chunk's extent"))
                }
            }
        }
        let n = (logical.run.len() - logical.used)
            .min(usize::try_from(data_left).unwrap_or(usize::MAX));
        Ok(&logical.run[logical.used..logical.used + n])
    }

    /// The hash of the data bytes: the cursor's own, or the read-ahead helper's once it has
    /// checked the chunk to its end.
    fn data_hash_seen(self) -> Result<u64, Fault> {
        let Some(logical) = self.ahead else {
            return Ok(self.hasher.finish());
        };
        match logical.pieces.recv() {
            Ok(Ahead::Hash(hash)) => Ok(hash),
            Ok(Ahead::Failed(fault)) => Err(fault),
            Ok(Ahead::Data(_)) => Err(corrupt("chunk data runs past its data_size")),
            Err(_) => Err(Fault::Io(io::Error::other("read-ahead stopped"))),
        }
    }

    /// Physical bytes `[pos, pos + len)` (inside the chunk), reading a new piece if needed.
    /// A piece ends at a block boundary (or the chunk end), so a block header is never split.
    fn physical(&mut self, pos: u64, len: u64) -> Result<&[u8], Fault> {
        let piece_end = self.piece_pos + self.piece.len() as u64;
        if pos < self.piece_pos || pos.saturating_add(len) > piece_end {
            let want_end = pos.saturating_add(len);
            if want_end > self.end {
                return Err(corrupt(format!(
                    "bytes {pos}..+{len} lie beyond the chunk's extent"
                )));
            }
            let read_end = piece_end_after(pos, self.end, self.piece_max).max(want_end);
            self.piece = self.source.read_at(pos, (read_end - pos) as usize)?;
            self.piece_pos = pos;
        }
        let start = (pos - self.piece_pos) as usize;
        Ok(&self.piece[start..start + len as usize])
    }

    fn check_block_header(&mut self, at: u64) -> Result<(), Fault> {
        let (begin, end) = (self.begin, self.end);
        let bytes = self.physical(at, BLOCK_HEADER)?;
        check_block_header(bytes, at, begin, end)
    }

    /// Length of the run of data bytes available at the cursor (0 at the end of the data),
    /// after stepping over (and checking) a block header at the cursor.
    fn prepare_run(&mut self) -> Result<u64, Fault> {
        if self.data_left == 0 {
            return Ok(0);
        }
        if self.pos % BLOCK == 0 {
            self.check_block_header(self.pos)?;
            self.pos += BLOCK_HEADER;
        }
        let run = position::remaining_in_block(self.pos).min(self.data_left);
        self.physical(self.pos, run)?;
        Ok(run)
    }

    /// The next run of data bytes (empty at the end of the data); not consumed yet.
    pub fn fill(&mut self) -> Result<&[u8], Fault> {
        if self.ahead.is_some() {
            return self.logical_fill();
        }
        let run = self.prepare_run()? as usize;
        if run == 0 {
            return Ok(&[]);
        }
        // `prepare_run` made the piece cover the run.
        let start = (self.pos - self.piece_pos) as usize;
        Ok(&self.piece[start..start + run])
    }

    /// Consumes (and hashes) `n` bytes of the run returned by the last `fill`.
    pub fn consume(&mut self, n: usize) {
        if let Some(logical) = self.ahead.as_mut() {
            let left = usize::try_from(self.data_left).unwrap_or(usize::MAX);
            let available = (logical.run.len() - logical.used).min(left);
            let n = n.min(available);
            logical.used += n;
            self.data_left -= n as u64;
            return;
        }
        let Some(start) = self.pos.checked_sub(self.piece_pos) else {
            return;
        };
        let start = start as usize;
        let avail = (position::remaining_in_block(self.pos).min(self.data_left) as usize)
            .min(self.piece.len().saturating_sub(start));
        let n = n.min(avail);
        if n == 0 {
            return;
        }
        self.hasher.update(&self.piece[start..start + n]);
        self.pos += n as u64;
        self.data_left -= n as u64;
    }

    /// Fills `out` with the next data bytes.
    pub fn read_exact(&mut self, out: &mut [u8]) -> Result<(), Fault> {
        let mut got = 0;
        while got < out.len() {
            let run = self.fill()?;
            if run.is_empty() {
                return Err(corrupt("simple chunk payload is truncated"));
            }
            let n = run.len().min(out.len() - got);
            out[got..got + n].copy_from_slice(&run[..n]);
            got += n;
            self.consume(n);
        }
        Ok(())
    }

    /// Reads a varint from the data.
    pub fn read_varint(&mut self) -> Result<u64, Fault> {
        let mut buf = [0u8; 10];
        for i in 0..buf.len() {
            self.read_exact(&mut buf[i..i + 1])?;
            if buf[i] & 0x80 == 0 {
                return varint::get(&buf[..=i])
                    .map(|(v, _)| v)
                    .ok_or_else(|| corrupt("bad varint"));
            }
        }
        Err(corrupt("bad varint"))
    }

    /// Steps over the next `n` data bytes without keeping them.
    pub fn skip(&mut self, n: u64) -> Result<(), Fault> {
        let mut left = n;
        while left > 0 {
            let run = self.fill()?.len() as u64;
            if run == 0 {
                return Err(corrupt("simple chunk payload is truncated"));
            }
            let take = run.min(left);
            self.consume(take as usize);
            left -= take;
        }
        Ok(())
    }

    /// The next `n` data bytes, which the caller has bounded.
    pub fn read_vec(&mut self, n: u64) -> Result<Vec<u8>, Fault> {
        if n > self.data_left {
            return Err(corrupt("simple chunk payload is truncated"));
        }
        let mut out = vec![0u8; n as usize];
        self.read_exact(&mut out)?;
        Ok(out)
    }

    /// All remaining data bytes: a slice of the piece (no copy) when no block boundary
    /// interrupts them, else one copy.
    pub fn read_rest(&mut self) -> Result<Bytes, Fault> {
        let n = self.data_left;
        if self.ahead.is_some() {
            return Ok(Bytes::from(self.read_vec(n)?));
        }
        let run = self.prepare_run()?;
        if run == n && n > 0 {
            let start = (self.pos - self.piece_pos) as usize;
            let out = self.piece.slice(start..start + run as usize);
            self.consume(run as usize);
            return Ok(out);
        }
        Ok(Bytes::from(self.read_vec(n)?))
    }

    /// Consumes the rest of the data, checks the data hash, then the block headers in the zero
    /// fill after the data.
    pub fn finish(mut self) -> Result<(), Fault> {
        if self.ahead.is_some() {
            // The helper checks every block header up to the chunk end itself.
            while self.data_left > 0 {
                let n = self.fill()?.len();
                self.consume(n);
            }
        } else {
            while self.data_left > 0 {
                let n = self.prepare_run()?;
                if n == 0 {
                    return Err(corrupt("chunk data runs past the chunk's extent"));
                }
                self.consume(n as usize);
            }
            let mut at = position::next_boundary_at_or_after(self.pos).unwrap_or(u64::MAX);
            while at < self.end {
                self.check_block_header(at)?;
                at = at.saturating_add(BLOCK);
            }
        }
        let expected = self.data_hash;
        if self.data_hash_seen()? != expected {
            return Err(corrupt("data hash mismatch"));
        }
        Ok(())
    }
}

/// Where a piece read at `pos` ends: `piece` bytes on, rounded down to a block boundary, or at
/// the chunk end.
fn piece_end_after(pos: u64, end: u64, piece: u64) -> u64 {
    let aligned = (pos.saturating_add(piece)) / BLOCK * BLOCK;
    aligned.min(end)
}

/// What the read-ahead helper starts from: the cursor's current piece and position.
struct AheadPlan {
    first: Bytes,
    first_pos: u64,
    /// Physical position of the first data byte not delivered yet.
    data_pos: u64,
    data_left: u64,
    begin: u64,
    end: u64,
}

impl AheadPlan {
    /// Delivers the data of the current piece, then reads every piece up to the chunk end and
    /// delivers its data, then the hash. Stops quietly when the cursor is gone.
    fn run<S: ByteSource + ?Sized>(mut self, source: &S, sender: &SyncSender<Ahead>) {
        let mut hasher = Hasher::new();
        let first = std::mem::take(&mut self.first);
        let first_pos = self.first_pos;
        let mut next = first_pos + first.len() as u64;
        let from_first = |start: u64, parts: &[(usize, usize)], outs: &mut [&mut Vec<u8>]| {
            let skip = usize::try_from(start.saturating_sub(first_pos)).unwrap_or(usize::MAX);
            crate::memory::split_into(first.get(skip..).unwrap_or(&[]), parts, outs)
        };
        if !self.deliver(next, &mut hasher, sender, from_first) {
            return;
        }
        drop(first);
        while next < self.end {
            let piece_end = piece_end_after(next, self.end, PIECE);
            let from_source = |start: u64, parts: &[(usize, usize)], outs: &mut [&mut Vec<u8>]| {
                source.read_split(start, parts, outs)
            };
            if !self.deliver(piece_end, &mut hasher, sender, from_source) {
                return;
            }
            next = piece_end;
        }
        let _ = sender.send(Ahead::Hash(hasher.finish()));
    }

    /// Delivers the physical bytes from `data_pos` to `end`, which `read` puts in place with
    /// one split read: block headers into one buffer, the data bytes into the contiguous run
    /// for the cursor, the zero fill after the data into a scratch buffer (from a local file:
    /// one `preadv`, each byte copied once, where reading the piece and then gathering its
    /// data copied it twice). Then checks the headers, hashes the data and sends it; false
    /// when the cursor is gone or the read or a header failed (the failure is sent).
    fn deliver(
        &mut self,
        end: u64,
        hasher: &mut Hasher,
        sender: &SyncSender<Ahead>,
        read: impl FnOnce(u64, &[(usize, usize)], &mut [&mut Vec<u8>]) -> io::Result<()>,
    ) -> bool {
        const HEADERS: usize = 0;
        const DATA: usize = 1;
        const FILL: usize = 2;
        let start = self.data_pos;
        let mut parts: Vec<(usize, usize)> = Vec::new();
        let mut sizes = [0usize; 3];
        let mut push = |out: usize, len: u64| {
            let len = len as usize;
            if len == 0 {
                return;
            }
            sizes[out] += len;
            match parts.last_mut() {
                Some((last, n)) if *last == out => *n += len,
                _ => parts.push((out, len)),
            }
        };
        let mut headers_at = Vec::new();
        let (mut pos, mut data_left) = (start, self.data_left);
        while pos < end {
            if pos % BLOCK == 0 {
                // A header cut by the end is read short, and then fails its check.
                let len = BLOCK_HEADER.min(end - pos);
                headers_at.push(pos);
                push(HEADERS, len);
                pos += len;
                continue;
            }
            let in_block = position::remaining_in_block(pos).min(end - pos);
            let run = in_block.min(data_left);
            push(DATA, run);
            // Past the data: only the block headers of the zero fill are left to check.
            push(FILL, in_block - run);
            data_left -= run;
            pos += in_block;
        }
        let mut headers = Vec::with_capacity(sizes[HEADERS]);
        // A mapping of its own when large: see `crate::memory::piece_buffer`.
        let mut data = crate::memory::piece_buffer(sizes[DATA]);
        let mut fill = Vec::with_capacity(sizes[FILL]);
        if let Err(e) = read(start, &parts, &mut [&mut headers, &mut data, &mut fill]) {
            let _ = sender.send(Ahead::Failed(Fault::Io(e)));
            return false;
        }
        let header_len = BLOCK_HEADER as usize;
        for (k, &at) in headers_at.iter().enumerate() {
            let from = (k * header_len).min(headers.len());
            let header = &headers[from..(from + header_len).min(headers.len())];
            if let Err(fault) = check_block_header(header, at, self.begin, self.end) {
                let _ = sender.send(Ahead::Failed(fault));
                return false;
            }
        }
        hasher.update(&data);
        self.data_left = data_left;
        self.data_pos = pos;
        data.is_empty() || sender.send(Ahead::Data(Bytes::from(data))).is_ok()
    }
}

impl<S: ByteSource + ?Sized> io::Read for ChunkCursor<'_, S> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let run = self.fill().map_err(fault_to_io)?;
        let n = run.len().min(out.len());
        out[..n].copy_from_slice(&run[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<S: ByteSource + ?Sized> io::BufRead for ChunkCursor<'_, S> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.fill().map_err(fault_to_io)
    }

    fn consume(&mut self, n: usize) {
        ChunkCursor::consume(self, n)
    }
}

impl<S: ByteSource + ?Sized> RunSource for ChunkCursor<'_, S> {
    fn next_run(&mut self) -> Result<&[u8], Fault> {
        self.fill()
    }

    fn consume_run(&mut self, n: usize) {
        self.consume(n)
    }

    fn left(&self) -> u64 {
        self.data_left
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrayrecord::chunk::{self, encode_simple};
    use crate::arrayrecord::compress::DecodeCaps;
    use crate::arrayrecord::layout::PhysicalWriter;
    use crate::arrayrecord::options::Compression;
    use crate::arrayrecord::reader::decode_chunk;

    const CAPS: DecodeCaps = DecodeCaps {
        zstd_window_log_max: 31,
    };

    /// A file holding the signature, one simple chunk of `records` and padding; returns the
    /// file and the chunk's begin and end.
    fn file_with(compression: Compression, records: &[&[u8]]) -> (Bytes, u64, u64) {
        let mut w = PhysicalWriter::new(Vec::new());
        let sig = ChunkHeader::for_data(chunk::SIGNATURE, b"", 0, 0);
        w.write_chunk(&sig, b"").unwrap();
        let sizes: Vec<u64> = records.iter().map(|r| r.len() as u64).collect();
        let values = records.concat();
        let data = encode_simple(&compression, &sizes, &values).unwrap();
        let header = ChunkHeader::for_data(
            chunk::SIMPLE,
            &data,
            sizes.len() as u64,
            values.len() as u64,
        );
        let begin = w.write_chunk(&header, &data).unwrap();
        let end = w.pos();
        w.pad_to_block_boundary().unwrap();
        (Bytes::from(w.into_inner()), begin, end)
    }

    #[test]
    fn chunks_across_boundaries_decode_with_every_compressor() {
        let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 / 5) as u8).collect();
        for c in [
            Compression::None,
            Compression::Zstd {
                level: 3,
                window_log: 20,
            },
            Compression::Brotli {
                quality: 1,
                window_log: None,
            },
            Compression::Snappy { level: 1 },
        ] {
            let (file, begin, end) = file_with(c, &[b"ab", &big, b""]);
            let (header, records) = decode_chunk(&file, begin, end, CAPS, u64::MAX).unwrap();
            assert_eq!(header.num_records, 3);
            let all = records.into_vec();
            assert_eq!(
                (&all[0][..], &all[1][..], &all[2][..]),
                (&b"ab"[..], &big[..], &b""[..])
            );
            // A limit before the chunk end is a corruption, never a panic.
            assert!(decode_chunk(&file, begin, end - 1, CAPS, u64::MAX).is_err());
            // The in-memory limit is enforced before decoding.
            assert!(matches!(
                decode_chunk(&file, begin, end, CAPS, 1000),
                Err(Fault::Limit(_))
            ));
        }
    }

    #[test]
    fn uncompressed_records_inside_one_block_are_not_copied() {
        let (file, begin, end) = file_with(Compression::None, &[b"hello", b"world"]);
        let (_, records) = decode_chunk(&file, begin, end, CAPS, u64::MAX).unwrap();
        let rec = records.get(1).unwrap();
        assert_eq!(&rec[..], b"world");
        let inside = file.as_ptr_range();
        assert!(inside.contains(&rec.as_ptr()));
    }

    #[test]
    fn every_block_header_and_the_data_hash_are_checked() {
        let big = noise(200_000, 0x9e37_79b9);
        let zstd = Compression::Zstd {
            level: 3,
            window_log: 20,
        };
        let (file, begin, end) = file_with(zstd, &[&big]);
        decode_chunk(&file, begin, end, CAPS, u64::MAX).unwrap();
        assert!(end > 3 * BLOCK);
        let flip = |at: u64| {
            let mut f = file.to_vec();
            f[at as usize] ^= 1;
            decode_chunk(&Bytes::from(f), begin, end, CAPS, u64::MAX).unwrap_err()
        };
        // A block header inside the chunk, one in its zero fill region's vicinity and a data
        // byte right after a boundary.
        for at in [BLOCK + 3, 2 * BLOCK + 20, BLOCK + 30, end - 5] {
            let err = flip(at);
            assert!(matches!(err, Fault::Corrupt(_)), "{at}: {err:?}");
        }
        match flip(2 * BLOCK + 100) {
            Fault::Corrupt(msg) => assert_eq!(msg, "data hash mismatch"),
            other => panic!("{other:?}"),
        }
    }

    /// `len` xorshift bytes from `seed`: incompressible, and the same in every run.
    fn noise(len: usize, seed: u32) -> Vec<u8> {
        let mut x = seed;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect()
    }

    /// Every data byte of the chunk, read through a cursor with read-ahead, then `finish`.
    fn read_all<S: ByteSource>(source: &S, begin: u64, end: u64) -> Result<Vec<u8>, Fault> {
        std::thread::scope(|scope| {
            let (mut cursor, header) = ChunkCursor::open(source, begin, end)?;
            cursor.read_ahead(scope);
            let data = cursor.read_vec(header.data_size)?;
            cursor.finish()?;
            Ok(data)
        })
    }

    /// Fails every read that reaches past `fail_from`.
    struct FailingAfter {
        file: Bytes,
        fail_from: u64,
    }

    impl ByteSource for FailingAfter {
        fn size(&self) -> io::Result<u64> {
            self.file.size()
        }
        fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
            if offset + len as u64 > self.fail_from {
                return Err(io::Error::other("disk on fire"));
            }
            self.file.read_at(offset, len)
        }
    }

    #[test]
    fn read_ahead_delivers_every_byte_and_checks_the_hash() {
        // Three and a bit pieces: the helper reads several pieces, the last one short.
        let record = noise((3 * PIECE + 12_345) as usize, 0x2545_f491);
        let (file, begin, end) = file_with(Compression::None, &[&record]);
        let data = read_all(&file, begin, end).unwrap();
        // The data is the simple chunk's encoding: its last bytes are the record.
        assert!(data.ends_with(&record));

        // A data byte deep in the third piece: only the helper's hash can notice.
        let mut flipped = file.to_vec();
        let at = (begin + 2 * PIECE + 777) as usize;
        assert_ne!(at as u64 % BLOCK, 0);
        flipped[at] ^= 1;
        match read_all(&Bytes::from(flipped.clone()), begin, end) {
            Err(Fault::Corrupt(msg)) => assert_eq!(msg, "data hash mismatch"),
            other => panic!("{other:?}"),
        }

        // A block header in the fourth piece: still checked by the cursor.
        let mut header_flipped = file.to_vec();
        header_flipped[(3 * PIECE + 5) as usize] ^= 1;
        assert!(matches!(
            read_all(&Bytes::from(header_flipped.clone()), begin, end),
            Err(Fault::Corrupt(_))
        ));

        // The same through a file, whose split reads go straight into place (`preadv`).
        let on_disk = |bytes: &[u8]| {
            let mut f = tempfile::tempfile().unwrap();
            io::Write::write_all(&mut f, bytes).unwrap();
            f
        };
        assert_eq!(read_all(&on_disk(&file), begin, end).unwrap(), data);
        match read_all(&on_disk(&flipped), begin, end) {
            Err(Fault::Corrupt(msg)) => assert_eq!(msg, "data hash mismatch"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            read_all(&on_disk(&header_flipped), begin, end),
            Err(Fault::Corrupt(_))
        ));
    }

    /// Notes which threads read from the file.
    struct ThreadsReading {
        file: Bytes,
        readers: std::sync::Mutex<Vec<std::thread::ThreadId>>,
    }

    impl ByteSource for ThreadsReading {
        fn size(&self) -> io::Result<u64> {
            self.file.size()
        }
        fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
            if let Ok(mut readers) = self.readers.lock() {
                readers.push(std::thread::current().id());
            }
            self.file.read_at(offset, len)
        }
    }

    #[test]
    fn large_chunks_decode_in_memory_with_a_read_ahead_helper() {
        // A zstd chunk of more than two pieces (noise barely compresses): decoded in memory,
        // its later pieces read by a helper thread, every record intact.
        let big = noise((2 * PIECE + 300_000) as usize, 0x1234_5679);
        let zstd = Compression::Zstd {
            level: 1,
            window_log: 20,
        };
        let (file, begin, end) = file_with(zstd, &[b"ab", &big, b"cd"]);
        assert!(end - begin > 2 * PIECE);
        let source = ThreadsReading {
            file: file.clone(),
            readers: Default::default(),
        };
        let (header, records) = decode_chunk(&source, begin, end, CAPS, u64::MAX).unwrap();
        assert_eq!(header.num_records, 3);
        let all = records.into_vec();
        assert!(all[0][..] == b"ab"[..] && all[1][..] == big[..] && all[2][..] == b"cd"[..]);
        let me = std::thread::current().id();
        let readers = source.readers.lock().unwrap();
        assert!(readers.iter().any(|&t| t != me), "no helper read the chunk");

        // The helper's hash covers the pieces it read: a data byte in the last piece.
        let mut flipped = file.to_vec();
        let at = (begin + 2 * PIECE + 4_321) as usize;
        assert_ne!(at as u64 % BLOCK, 0);
        flipped[at] ^= 1;
        match decode_chunk(&Bytes::from(flipped), begin, end, CAPS, u64::MAX) {
            Err(Fault::Corrupt(msg)) => assert_eq!(msg, "data hash mismatch"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_header_promising_more_than_the_frame_holds_is_corrupt() {
        // Sizes and header agree on 1 GiB, the frame holds 1,000 bytes: the output is reserved
        // for the promise (address space only) and the short frame is reported.
        let promised = 1u64 << 30;
        let zstd = Compression::Zstd {
            level: 3,
            window_log: 20,
        };
        let data = encode_simple(&zstd, &[promised], &noise(1000, 7)).unwrap();
        let mut w = PhysicalWriter::new(Vec::new());
        let sig = ChunkHeader::for_data(chunk::SIGNATURE, b"", 0, 0);
        w.write_chunk(&sig, b"").unwrap();
        let begin = w.write_chunk(
            &ChunkHeader::for_data(chunk::SIMPLE, &data, 1, promised),
            &data,
        );
        let begin = begin.unwrap();
        let end = w.pos();
        let file = Bytes::from(w.into_inner());
        match decode_chunk(&file, begin, end, CAPS, u64::MAX) {
            Err(Fault::Corrupt(msg)) => {
                assert!(msg.contains(&promised.to_string()), "{msg}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_failed_read_ahead_is_the_error_and_never_hangs() {
        let record = noise((3 * PIECE) as usize, 0x2545_f491);
        let (file, begin, end) = file_with(Compression::None, &[&record]);
        let failing = FailingAfter {
            file,
            fail_from: begin + 2 * PIECE,
        };
        match read_all(&failing, begin, end) {
            Err(Fault::Io(e)) => assert!(e.to_string().contains("disk on fire"), "{e}"),
            other => panic!("{other:?}"),
        }
        // A reader that stops early (decode error) leaves the helper to finish on its own:
        // the scope returns.
        std::thread::scope(|scope| {
            let (mut cursor, _) = ChunkCursor::open(&failing, begin, end).unwrap();
            cursor.read_ahead(scope);
            let mut first = [0u8; 10];
            cursor.read_exact(&mut first).unwrap();
        });
    }
}
