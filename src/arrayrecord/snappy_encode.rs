//! Snappy compression that produces, byte for byte, what the reference writer's snappy (the
//! C++ library, release 1.2, levels 1 and 2) produces.
//!
//! Any valid snappy stream decodes to the same bytes, so a reader does not care which encoder
//! wrote it. Writers do: the project's contract is that a shard written by `sds` is the file
//! the library writes for the same records and options, and the library's ArrayRecord writer
//! compresses with C++ snappy. Other encoders (the `snap` crate among them) choose different
//! matches. So this module reimplements the reference's match finder exactly: the same 64 KiB
//! fragments, hash-table sizes, hash functions, skipping heuristic and table updates. It
//! uses the portable multiplicative hash, which is what the reference wheel is built with (its
//! x86 CRC32 variant needs SSE 4.2 at build time).
//!
//! Only the encoder lives here; decoding uses `snap` (any correct decoder gives the same bytes).

use std::io;

use super::feed::PieceCursor;

/// The reference compresses its input in independent fragments of this size.
const FRAGMENT: usize = 1 << 16;
const MIN_TABLE_BITS: u32 = 8;
const MAX_TABLE_BITS: u32 = 15;
/// A fragment shorter than this is one literal; longer ones stop matching this far from the end.
const INPUT_MARGIN: usize = 15;

/// Compresses the concatenation of `pieces` at `level` (1 or 2) and writes the snappy stream
/// (its varint length header included) to `out`.
///
/// Why pieces and a writer: a record of gigabytes reaches the writer as a header piece and one
/// piece per tensor, and its compressed stream goes to a spool file. Concatenating the pieces
/// and collecting the output would hold the record three times; fragments are independent, so
/// only a fragment that straddles two pieces is copied (into a 64 KiB scratch buffer) and each
/// fragment's output is written out before the next is compressed.
pub(crate) fn compress<W: io::Write>(pieces: &[&[u8]], level: u32, out: &mut W) -> io::Result<()> {
    if !matches!(level, 1 | 2) {
        return Err(io::Error::other(format!("snappy level {level} (1 or 2)")));
    }
    let total = pieces.iter().map(|piece| piece.len() as u64).sum::<u64>();
    let len =
        u32::try_from(total).map_err(|_| io::Error::other("snappy input longer than 4 GiB"))?;
    let mut encoded = Vec::with_capacity(FRAGMENT + FRAGMENT / 6 + 32);
    put_varint32(&mut encoded, len);
    let mut table = vec![0u16; 1 << MAX_TABLE_BITS];
    let mut fragments = Fragments::new(pieces);
    while let Some(fragment) = fragments.next_fragment() {
        compress_one(fragment, level, &mut table, &mut encoded);
        out.write_all(&encoded)?;
        encoded.clear();
    }
    out.write_all(&encoded)
}

/// One fragment compressed at `level` (checked by the caller) into `out`.
fn compress_one(fragment: &[u8], level: u32, table: &mut [u16], out: &mut Vec<u8>) {
    let size = table_size(fragment.len());
    let table = &mut table[..size];
    table.fill(0);
    if level == 1 {
        compress_fragment(fragment, out, |limit, out| {
            single_hash_matches(fragment, table, limit, out)
        })
    } else {
        let (four, eight) = table.split_at_mut(size / 2);
        compress_fragment(fragment, out, |limit, out| {
            double_hash_matches(fragment, four, eight, limit, out)
        })
    }
}

/// The reference's 64 KiB fragments of a concatenation of pieces, borrowed where a fragment
/// lies inside one piece and copied into `scratch` where it straddles pieces.
struct Fragments<'a> {
    input: PieceCursor<'a>,
    scratch: Vec<u8>,
}

impl<'a> Fragments<'a> {
    fn new(pieces: &'a [&'a [u8]]) -> Self {
        Fragments {
            input: PieceCursor::new(pieces),
            scratch: Vec::new(),
        }
    }

    fn next_fragment(&mut self) -> Option<&[u8]> {
        let first = self.input.take(FRAGMENT);
        if first.is_empty() {
            return None;
        }
        if first.len() == FRAGMENT {
            return Some(first);
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(first);
        while self.scratch.len() < FRAGMENT {
            let more = self.input.take(FRAGMENT - self.scratch.len());
            if more.is_empty() {
                break;
            }
            self.scratch.extend_from_slice(more);
        }
        Some(&self.scratch)
    }
}

/// The hash-table length for a fragment: the power of two at or above its length, clamped.
fn table_size(fragment_len: usize) -> usize {
    fragment_len
        .next_power_of_two()
        .clamp(1 << MIN_TABLE_BITS, 1 << MAX_TABLE_BITS)
}

fn put_varint32(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn load32(input: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&input[at..at + 4]);
    u32::from_le_bytes(b)
}

fn load64(input: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&input[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Level 1's slot for the four bytes `bytes`. The reference computes a byte offset into its
/// `u16` table (`hash & 2 * (len - 1)`); halving it gives the index.
fn slot(bytes: u32, table_len: usize) -> usize {
    let hash = bytes.wrapping_mul(0x1e35_a7bd) >> (31 - MAX_TABLE_BITS);
    (hash as usize & (2 * (table_len - 1))) >> 1
}

/// Level 2's slot for a four-byte match.
fn slot4(bytes: u32, table_len: usize) -> usize {
    let hash = bytes.wrapping_mul(2_654_435_761) >> (32 - MAX_TABLE_BITS);
    (hash as usize & (2 * (table_len - 1))) >> 1
}

/// Level 2's slot for an eight-byte match.
fn slot8(bytes: u64, table_len: usize) -> usize {
    let hash = (bytes.wrapping_mul(58_295_818_150_454_627) >> (64 - MAX_TABLE_BITS)) as usize;
    (hash & (2 * (table_len - 1))) >> 1
}

/// How many bytes from `a` equal those from `b` (`a < b`), stopping at the end of `input`.
fn match_len(input: &[u8], a: usize, b: usize) -> usize {
    input[b..]
        .iter()
        .zip(&input[a..])
        .take_while(|(x, y)| x == y)
        .count()
}

fn emit_literal(out: &mut Vec<u8>, literal: &[u8]) {
    let n = literal.len() - 1;
    if n < 60 {
        out.push((n as u8) << 2);
    } else {
        let count = (usize::BITS - 1 - n.leading_zeros()) / 8 + 1;
        out.push(((59 + count) as u8) << 2);
        out.extend_from_slice(&(n as u32).to_le_bytes()[..count as usize]);
    }
    out.extend_from_slice(literal);
}

/// A copy of `len` (4..=64) bytes from `offset` back.
fn emit_copy_at_most_64(out: &mut Vec<u8>, offset: usize, len: usize) {
    if len < 12 && offset < 2048 {
        out.push(1 | (((len - 4) as u8) << 2) | (((offset >> 8) as u8) << 5));
        out.push(offset as u8);
    } else {
        out.push(2 | (((len - 1) as u8) << 2));
        out.extend_from_slice(&(offset as u16).to_le_bytes());
    }
}

/// A copy of any length, split as the reference splits it (64-byte pieces, keeping at least
/// four bytes for the last one).
fn emit_copy(out: &mut Vec<u8>, offset: usize, mut len: usize) {
    if len >= 12 {
        while len >= 68 {
            emit_copy_at_most_64(out, offset, 64);
            len -= 64;
        }
        if len > 64 {
            emit_copy_at_most_64(out, offset, 60);
            len -= 60;
        }
    }
    emit_copy_at_most_64(out, offset, len);
}

/// One fragment: `matches` emits literals and copies while positions stay below the limit
/// (the reference stops 15 bytes before the end) and returns where it stopped; the rest is one
/// literal. A fragment shorter than the margin is one literal.
fn compress_fragment(
    input: &[u8],
    out: &mut Vec<u8>,
    matches: impl FnOnce(usize, &mut Vec<u8>) -> usize,
) {
    let n = input.len();
    let rest = match n.checked_sub(INPUT_MARGIN) {
        Some(ip_limit) => matches(ip_limit, out),
        None => 0,
    };
    if rest < n {
        emit_literal(out, &input[rest..]);
    }
}

/// Level 1 (the default): one table of four-byte hashes, a first stretch of 16 positions
/// probed one by one, then heuristic skipping (one more byte per probe every 32 misses).
fn single_hash_matches(
    input: &[u8],
    table: &mut [u16],
    ip_limit: usize,
    out: &mut Vec<u8>,
) -> usize {
    let len = table.len();
    let mut ip = 0;
    'fragment: loop {
        let next_emit = ip;
        ip += 1;
        let mut skip: u32 = 32;
        let mut found = None;
        if ip_limit.saturating_sub(ip) >= 16 {
            for i in 0..16 {
                let bytes = load32(input, ip + i);
                let s = slot(bytes, len);
                let candidate = table[s] as usize;
                table[s] = (ip + i) as u16;
                if load32(input, candidate) == bytes {
                    found = Some(candidate);
                    ip += i;
                    break;
                }
            }
            if found.is_none() {
                ip += 16;
                skip += 16;
            }
        }
        let mut candidate = match found {
            Some(candidate) => candidate,
            None => loop {
                let bytes = load32(input, ip);
                let s = slot(bytes, len);
                let step = (skip >> 5) as usize;
                skip += step as u32;
                let next_ip = ip + step;
                if next_ip > ip_limit {
                    ip = next_emit;
                    break 'fragment;
                }
                let candidate = table[s] as usize;
                table[s] = ip as u16;
                if load32(input, candidate) == bytes {
                    break candidate;
                }
                ip = next_ip;
            },
        };
        emit_literal(out, &input[next_emit..ip]);
        loop {
            let base = ip;
            let matched = 4 + match_len(input, candidate + 4, ip + 4);
            ip += matched;
            emit_copy(out, base - candidate, matched);
            if ip >= ip_limit {
                break 'fragment;
            }
            table[slot(load32(input, ip - 1), len)] = (ip - 1) as u16;
            let bytes = load32(input, ip);
            let s = slot(bytes, len);
            candidate = table[s] as usize;
            table[s] = ip as u16;
            if load32(input, candidate) != bytes {
                break;
            }
        }
    }
    ip
}

/// Level 2: tables of four- and eight-byte hashes, slower skipping, a one-byte look-ahead for a
/// longer match, and matches extended backwards.
fn double_hash_matches(
    input: &[u8],
    four: &mut [u16],
    eight: &mut [u16],
    ip_limit: usize,
    out: &mut Vec<u8>,
) -> usize {
    let len = four.len();
    let mut ip = 0;
    'fragment: loop {
        let next_emit = ip;
        ip += 1;
        let mut skip: u32 = 512;
        let (mut candidate, mut candidate_len) = loop {
            let data = load64(input, ip);
            let s8 = slot8(data, len);
            let step = (skip >> 9) as usize;
            skip += 1;
            let next_ip = ip + step;
            if next_ip > ip_limit {
                ip = next_emit;
                break 'fragment;
            }
            let candidate = eight[s8] as usize;
            eight[s8] = ip as u16;
            if data as u32 == load32(input, candidate) {
                break (candidate, 4 + match_len(input, candidate + 4, ip + 4));
            }
            let s4 = slot4(data as u32, len);
            let candidate = four[s4] as usize;
            four[s4] = ip as u16;
            if data as u32 == load32(input, candidate) {
                let found_len = 4 + match_len(input, candidate + 4, ip + 4);
                let s8_next = slot8(load64(input, ip + 1), len);
                let candidate_next = eight[s8_next] as usize;
                let next_len = match_len(input, candidate_next, ip + 1);
                if next_len > found_len {
                    eight[s8_next] = ip as u16;
                    ip += 1;
                    break (candidate_next, next_len);
                }
                break (candidate, found_len);
            }
            ip = next_ip;
        };
        while ip > next_emit && candidate > 0 && input[ip - 1] == input[candidate - 1] {
            ip -= 1;
            candidate -= 1;
            candidate_len += 1;
        }
        eight[slot8(load64(input, ip + 1), len)] = (ip + 1) as u16;
        eight[slot8(load64(input, ip + 2), len)] = (ip + 2) as u16;
        four[slot4(load32(input, ip + 1), len)] = (ip + 1) as u16;
        if ip > next_emit {
            emit_literal(out, &input[next_emit..ip]);
        }
        loop {
            let base = ip;
            ip += candidate_len;
            emit_copy(out, base - candidate, candidate_len);
            if ip >= ip_limit {
                break 'fragment;
            }
            if ip > 7 {
                eight[slot8(load64(input, ip - 7), len)] = (ip - 7) as u16;
                eight[slot8(load64(input, ip - 4), len)] = (ip - 4) as u16;
            }
            eight[slot8(load64(input, ip - 3), len)] = (ip - 3) as u16;
            eight[slot8(load64(input, ip - 2), len)] = (ip - 2) as u16;
            four[slot4(load32(input, ip - 2), len)] = (ip - 2) as u16;
            four[slot4(load32(input, ip - 1), len)] = (ip - 1) as u16;
            let here = load32(input, ip);
            let s8 = slot8(load64(input, ip), len);
            candidate = eight[s8] as usize;
            eight[s8] = ip as u16;
            if here == load32(input, candidate) {
                candidate_len = 4 + match_len(input, candidate + 4, ip + 4);
                continue;
            }
            let s4 = slot4(here, len);
            candidate = four[s4] as usize;
            four[s4] = ip as u16;
            if here == load32(input, candidate) {
                candidate_len = 4 + match_len(input, candidate + 4, ip + 4);
                continue;
            }
            break;
        }
    }
    ip
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compressed(pieces: &[&[u8]], level: u32) -> Vec<u8> {
        let mut out = Vec::new();
        compress(pieces, level, &mut out).unwrap();
        out
    }

    /// An input cut into pieces (inside fragments, on fragment boundaries, empty pieces,
    /// pieces shorter than the input margin) compresses to the stream of the input whole (the
    /// form `arrayrecord_interop` checks against the reference writer), which decodes back.
    #[test]
    fn pieces_give_the_stream_of_the_whole_input() {
        let input: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 27) as u8 ^ (i / 7) as u8)
            .collect();
        let cuts: [&[usize]; 6] = [
            &[],
            &[0, 0, 5],
            &[10, 20, FRAGMENT],
            &[FRAGMENT - 3, FRAGMENT + 3, 3 * FRAGMENT],
            &[100_000, 100_001, 100_002, 299_990],
            &[299_999, 300_000],
        ];
        for level in [1, 2] {
            let whole = compressed(&[&input], level);
            assert_eq!(
                snap::raw::Decoder::new().decompress_vec(&whole).unwrap(),
                input
            );
            for cut in cuts {
                let mut pieces = Vec::new();
                let mut from = 0;
                for &to in cut {
                    pieces.push(&input[from..to]);
                    from = to;
                }
                pieces.push(&input[from..]);
                assert!(
                    compressed(&pieces, level) == whole,
                    "level {level}, cut {cut:?}"
                );
            }
        }
        assert_eq!(compressed(&[], 1), vec![0]);
        assert!(compress(&[&input], 3, &mut Vec::new()).is_err());
    }
}
