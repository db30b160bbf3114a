//! Block and chunk position arithmetic (spec section 3.1).
//!
//! A Riegeli file is cut into 64 KiB blocks with a 24-byte block header at every multiple of
//! 65536. Chunks are written as a logical byte stream that skips those headers, so mapping
//! between logical sizes and physical positions is the heart of both reader and writer.
//! Everything here is checked arithmetic: positions come from untrusted files, and an
//! overflow must become a "corrupt" verdict, never a panic or a wrapped value.

/// Size of a block.
pub const BLOCK: u64 = 1 << 16;
/// Size of a block header.
pub const BLOCK_HEADER: u64 = 24;
/// Bytes of a block that are not its header.
pub const USABLE: u64 = BLOCK - BLOCK_HEADER;
/// Size of a chunk header.
pub const CHUNK_HEADER: u64 = 40;

/// Bytes from `p` to the next block boundary (0 at a boundary).
pub fn remaining_in_block(p: u64) -> u64 {
    p.wrapping_neg() % BLOCK
}

/// Whether a chunk may begin at `p`: never inside or right after a block header.
pub fn is_chunk_boundary(p: u64) -> bool {
    remaining_in_block(p) < USABLE
}

/// Physical end of `n` logical bytes written from chunk begin `b`: counts one block header
/// per boundary the bytes reach (including one at `b`), but not one at the exact end.
pub fn add_with_overhead(b: u64, n: u64) -> Option<u64> {
    let phase = (b.checked_add(USABLE - 1)?) % BLOCK;
    let headers = n.checked_add(phase)? / USABLE;
    b.checked_add(n)?
        .checked_add(headers.checked_mul(BLOCK_HEADER)?)
}

/// Moves a position that lies inside a block header to the first chunk boundary after it.
pub fn round_up_chunk_boundary(p: u64) -> Option<u64> {
    let bump = remaining_in_block(p).saturating_sub(USABLE - 1);
    p.checked_add(bump)
}

/// Where the chunk beginning at `b` ends. The second term is the record-count rule: a chunk
/// spans at least `num_records` bytes so that `begin + index` identifies a record uniquely.
pub fn chunk_end(b: u64, data_size: u64, num_records: u64) -> Option<u64> {
    let by_data = add_with_overhead(b, CHUNK_HEADER.checked_add(data_size)?)?;
    let by_count = round_up_chunk_boundary(b.checked_add(num_records)?)?;
    Some(by_data.max(by_count))
}

/// Physical position of logical byte `l` of the chunk beginning at `b` (header byte 0 is
/// logical byte 0). A position landing on a boundary is moved past that block header.
#[cfg(test)]
pub fn physical_of_logical(b: u64, l: u64) -> Option<u64> {
    let end = add_with_overhead(b, l)?;
    if end % BLOCK == 0 {
        end.checked_add(BLOCK_HEADER)
    } else {
        Some(end)
    }
}

/// The first block boundary at or after `p`.
pub fn next_boundary_at_or_after(p: u64) -> Option<u64> {
    p.checked_add(remaining_in_block(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries() {
        assert!(is_chunk_boundary(0));
        assert!(!is_chunk_boundary(1));
        assert!(!is_chunk_boundary(24));
        assert!(is_chunk_boundary(25));
        assert!(is_chunk_boundary(65535));
        assert!(is_chunk_boundary(65536));
        assert!(!is_chunk_boundary(65536 + 10));
        assert_eq!(remaining_in_block(65536), 0);
        assert_eq!(remaining_in_block(65535), 1);
    }

    #[test]
    fn overhead_counts_headers() {
        // The signature chunk: header at 0 counted, 40 bytes -> 64.
        assert_eq!(add_with_overhead(0, 40), Some(64));
        // Five-record example: chunk at 64 with 54 logical bytes ends at 118.
        assert_eq!(add_with_overhead(64, 54), Some(118));
        // Bytes ending exactly at a boundary do not count the header there.
        assert_eq!(add_with_overhead(64, 65536 - 64), Some(65536));
        assert_eq!(add_with_overhead(64, 65536 - 63), Some(65537 + 24));
        // big300k: chunk at 64 with 40 + 307205 logical bytes ends at 307405.
        assert_eq!(add_with_overhead(64, 40 + 307205), Some(307405));
        // Postscript chunk: begins at a boundary, 84 logical bytes.
        assert_eq!(add_with_overhead(65536, 84), Some(65644));
        assert_eq!(add_with_overhead(u64::MAX - 10, 100), None);
    }

    #[test]
    fn chunk_end_uses_record_count_rule() {
        assert_eq!(chunk_end(64, 33, 300), Some(364));
        assert_eq!(chunk_end(64, 14, 2), Some(118));
        // Padding chunk longer than a block (edge_boundaries vector).
        assert_eq!(chunk_end(131052, 65492, 0), Some(196608));
        // A count landing inside a block header is rounded past it.
        assert_eq!(round_up_chunk_boundary(65536 + 5), Some(65536 + 25));
        assert_eq!(round_up_chunk_boundary(65536), Some(65536));
        assert_eq!(round_up_chunk_boundary(70000), Some(70000));
        assert_eq!(chunk_end(u64::MAX - 1, 0, 0), None);
    }

    #[test]
    fn logical_to_physical() {
        assert_eq!(physical_of_logical(0, 0), Some(24));
        assert_eq!(physical_of_logical(64, 0), Some(64));
        // Chunk at 65516: header byte 20 lies after the block header at 65536.
        assert_eq!(physical_of_logical(65516, 19), Some(65535));
        assert_eq!(physical_of_logical(65516, 20), Some(65560));
        assert_eq!(next_boundary_at_or_after(65537), Some(131072));
        assert_eq!(next_boundary_at_or_after(65536), Some(65536));
    }
}
