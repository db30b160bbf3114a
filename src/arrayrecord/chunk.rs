//! Chunks: the 40-byte chunk header (spec 4.1) and the payload of simple chunks (spec 5).
//!
//! This module knows nothing about block headers; it works on logical bytes. The writer side
//! builds payloads from one group of records; the reader side splits a payload back into
//! records and enforces every size rule before trusting a number from the file.

use std::io;

use bytes::Bytes;

use super::compress;
use super::error::{corrupt, Fault};
use super::feed::{Feed, Write};
use super::hash::hash;
use super::options::Compression;
use super::varint;

/// Chunk type bytes.
pub const SIGNATURE: u8 = b's';
pub const METADATA: u8 = b'm';
pub const PADDING: u8 = b'p';
pub const SIMPLE: u8 = b'r';
pub const TRANSPOSED: u8 = b't';

/// The largest record count a header can hold (56 bits).
const MAX_RECORDS: u64 = (1 << 56) - 1;

/// A decoded chunk header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    pub data_size: u64,
    pub data_hash: u64,
    pub chunk_type: u8,
    pub num_records: u64,
    pub decoded_data_size: u64,
}

fn le(bytes: &[u8; 40], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

impl ChunkHeader {
    /// A header describing `data`.
    pub fn for_data(chunk_type: u8, data: &[u8], num_records: u64, decoded_data_size: u64) -> Self {
        Self {
            data_size: data.len() as u64,
            data_hash: hash(data),
            chunk_type,
            num_records,
            decoded_data_size,
        }
    }

    /// Serializes the header, computing its own hash.
    pub fn encode(&self) -> [u8; 40] {
        let mut out = [0u8; 40];
        out[8..16].copy_from_slice(&self.data_size.to_le_bytes());
        out[16..24].copy_from_slice(&self.data_hash.to_le_bytes());
        let type_and_count = u64::from(self.chunk_type) | (self.num_records << 8);
        out[24..32].copy_from_slice(&type_and_count.to_le_bytes());
        out[32..40].copy_from_slice(&self.decoded_data_size.to_le_bytes());
        let h = hash(&out[8..40]);
        out[0..8].copy_from_slice(&h.to_le_bytes());
        out
    }

    /// Parses a header, checking its hash.
    pub fn decode(bytes: &[u8; 40]) -> Result<Self, Fault> {
        if hash(&bytes[8..40]) != le(bytes, 0) {
            return Err(corrupt("chunk header hash mismatch"));
        }
        let type_and_count = le(bytes, 24);
        Ok(Self {
            data_size: le(bytes, 8),
            data_hash: le(bytes, 16),
            chunk_type: type_and_count as u8,
            num_records: type_and_count >> 8,
            decoded_data_size: le(bytes, 32),
        })
    }
}

/// Payload of a simple chunk holding `sizes.len()` records whose bytes are `values`.
#[cfg(test)]
pub fn encode_simple(
    compression: &Compression,
    sizes: &[u64],
    values: &[u8],
) -> io::Result<Vec<u8>> {
    let mut data = Vec::with_capacity(values.len() + 32);
    write_simple(compression, sizes, &[values], &mut data)?;
    Ok(data)
}

/// Writes the payload of a simple chunk holding `sizes.len()` records to `out`; the records'
/// bytes are the concatenation of `values`, which need not be cut at record boundaries.
///
/// The chunk encoder writes each record's size as a varint into the sizes compressor and its
/// bytes into the values compressor; `Feed` says where riegeli's buffering cuts those writes.
pub fn write_simple<W: io::Write>(
    compression: &Compression,
    sizes: &[u64],
    values: &[&[u8]],
    out: &mut W,
) -> io::Result<()> {
    let mut sizes_buf = Vec::with_capacity(sizes.len() * 2);
    for &s in sizes {
        varint::put(&mut sizes_buf, s);
    }
    let sizes_feed = Feed::of(sizes.iter().map(|&s| Write::Varint(varint::len(s))));
    let values_feed = Feed::of(sizes.iter().map(|&s| Write::Bytes(s as usize)));

    let mut compressed_sizes = Vec::new();
    compress::compress_pieces(
        compression,
        &[&sizes_buf],
        &sizes_feed,
        &mut compressed_sizes,
    )?;
    let mut head = vec![compression.type_byte()];
    varint::put(&mut head, compressed_sizes.len() as u64);
    out.write_all(&head)?;
    out.write_all(&compressed_sizes)?;
    compress::compress_pieces(compression, values, &values_feed, out)
}

/// The records of a decoded simple chunk: a values buffer and each record's size.
#[derive(Debug)]
pub struct Records {
    pub values: Bytes,
    pub sizes: Vec<u64>,
}

impl Records {
    /// Record `i` as a slice of the values buffer (no copy).
    pub fn get(&self, i: usize) -> Option<Bytes> {
        let start: u64 = self.sizes.get(..i)?.iter().sum();
        let len = *self.sizes.get(i)?;
        let start = usize::try_from(start).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        (end <= self.values.len()).then(|| self.values.slice(start..end))
    }

    /// All records, in order, borrowed from the values buffer (no reference counting: the
    /// footer's 10,000-entry index of a large shard is walked at every open).
    pub fn slices(&self) -> impl Iterator<Item = &[u8]> {
        self.ranges().map(|range| &self.values[range])
    }

    /// All records, in order.
    pub fn into_vec(self) -> Vec<Bytes> {
        self.ranges()
            .map(|range| self.values.slice(range))
            .collect()
    }

    /// Each record's range in the values buffer, in order.
    fn ranges(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let mut start = 0usize;
        self.sizes.iter().map(move |&len| {
            // Sizes were checked to sum to values.len(), so this cannot run past the end.
            let end = start.saturating_add(len as usize).min(self.values.len());
            let range = start..end;
            start = end;
            range
        })
    }
}

/// Most bytes `num_records` size varints can take.
pub fn max_sizes_len(num_records: u64) -> u64 {
    num_records.saturating_mul(10)
}

/// Parses exactly `num_records` varints from a decompressed sizes buffer and checks that
/// they add up to `decoded_data_size`.
pub fn parse_sizes(
    buf: &[u8],
    num_records: u64,
    decoded_data_size: u64,
) -> Result<Vec<u64>, Fault> {
    if num_records > MAX_RECORDS || num_records > buf.len() as u64 {
        return Err(corrupt(format!(
            "sizes buffer of {} bytes cannot hold {num_records} records",
            buf.len()
        )));
    }
    let mut sizes = Vec::with_capacity(num_records as usize);
    let mut rest = buf;
    let mut total: u64 = 0;
    for _ in 0..num_records {
        let (size, n) = varint::get(rest).ok_or_else(|| corrupt("bad record size varint"))?;
        rest = rest.get(n..).unwrap_or_default();
        total = total
            .checked_add(size)
            .ok_or_else(|| corrupt("record sizes overflow"))?;
        sizes.push(size);
    }
    if !rest.is_empty() {
        return Err(corrupt("trailing bytes after the record sizes"));
    }
    if total != decoded_data_size {
        return Err(corrupt(format!(
            "record sizes add up to {total}, header says decoded_data_size {decoded_data_size}"
        )));
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_hash_check() {
        let h = ChunkHeader::for_data(SIMPLE, b"abc", 2, 10);
        let mut bytes = h.encode();
        assert_eq!(ChunkHeader::decode(&bytes).unwrap(), h);
        bytes[30] ^= 1;
        assert!(ChunkHeader::decode(&bytes).is_err());
    }

    #[test]
    fn signature_header_matches_reference() {
        let h = ChunkHeader::for_data(SIGNATURE, b"", 0, 0);
        assert_eq!(hex::encode(&h.encode()[..8]), "91bac23c9287e1a9");
    }

    #[test]
    fn simple_payload_encoding_and_size_rules() {
        let payload = encode_simple(&Compression::None, &[2, 8], b"r0record-1").unwrap();
        assert_eq!(hex::encode(&payload), "0002020872307265636f72642d31");
        assert_eq!(parse_sizes(&[2, 8], 2, 10).unwrap(), vec![2, 8]);
        assert!(parse_sizes(&[2, 8], 2, 11).is_err());
        assert!(parse_sizes(&[2, 8], 3, 10).is_err());
        assert!(parse_sizes(&[1, 2, 3], 2, 3).is_err());
    }
}
