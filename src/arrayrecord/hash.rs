//! The Riegeli checksum: HighwayHash-64 keyed with `"Riegeli/records\n"` twice.
//!
//! Every block header, chunk header and chunk payload is protected by this hash. The
//! `highway` crate picks a SIMD implementation at run time; all of them give the same
//! 64-bit value, which is what the format stores (little-endian).

use highway::{HighwayHash, HighwayHasher, Key};

/// The key: the ASCII bytes `"Riegeli/records\nRiegeli/records\n"` read as four LE u64.
pub const RIEGELI_KEY: [u64; 4] = [
    0x2f69_6c65_6765_6952,
    0x0a73_6472_6f63_6572,
    0x2f69_6c65_6765_6952,
    0x0a73_6472_6f63_6572,
];

/// Hashes a complete buffer.
pub fn hash(data: &[u8]) -> u64 {
    HighwayHasher::new(Key(RIEGELI_KEY)).hash64(data)
}

/// An incremental hasher, for payloads that are streamed rather than held in memory.
/// Splitting the input into pieces does not change the result.
#[derive(Clone)]
pub struct Hasher(HighwayHasher);

impl Hasher {
    /// A hasher in its initial state.
    pub fn new() -> Self {
        Self(HighwayHasher::new(Key(RIEGELI_KEY)))
    }

    /// Feeds more bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.0.append(data);
    }

    /// The hash of everything fed so far.
    pub fn finish(self) -> u64 {
        self.0.finalize64()
    }
}

impl Default for Hasher {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counting(n: usize) -> Vec<u8> {
        (0..n).map(|i| i as u8).collect()
    }

    #[test]
    fn matches_spec_table() {
        let table: [(usize, u64); 12] = [
            (0, 0x72c3b1e9c0139fe1),
            (1, 0x2cd57bc47907559d),
            (3, 0x3bbb8da470c80319),
            (4, 0x4d9e82979ab17ce7),
            (8, 0x28aad15071ce9aff),
            (100, 0xe809487465a44f74),
            (16, 0x3e13be3a4140f4a7),
            (31, 0x4d262a709c34ae7d),
            (32, 0xb73f6df550f9dce4),
            (33, 0xec2f920014eaa741),
            (64, 0xe34b1e100f1322af),
            (63, 0xbea28b7a087e1493),
        ];
        for (n, want) in table {
            assert_eq!(hash(&counting(n)), want, "n = {n}");
        }
    }

    #[test]
    fn incremental_equals_one_shot() {
        let data = counting(1000);
        let mut h = Hasher::new();
        for piece in data.chunks(7) {
            h.update(piece);
        }
        assert_eq!(h.finish(), hash(&data));
    }
}
