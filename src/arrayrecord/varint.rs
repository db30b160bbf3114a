//! Unsigned LEB128 varints, as used by the record sizes and by protobuf.
//!
//! The reader accepts non-shortest encodings (the reference does) but rejects more than 10
//! bytes or bits beyond 64, so a hostile input cannot make a value silently wrap.

/// Appends the shortest encoding of `v`.
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Length of the shortest encoding of `v`.
pub fn len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Decodes one varint from the front of `input`: `(value, bytes consumed)`, or `None` if the
/// input ends early, is longer than 10 bytes, or overflows 64 bits.
#[inline]
pub fn get(input: &[u8]) -> Option<(u64, usize)> {
    // Most varints of the formats here (field keys, small sizes) are one byte.
    if let Some(&byte) = input.first() {
        if byte < 0x80 {
            return Some((u64::from(byte), 1));
        }
    }
    let mut value: u64 = 0;
    for (i, &byte) in input.iter().enumerate().take(10) {
        let payload = u64::from(byte & 0x7f);
        if i == 9 && payload > 1 {
            return None;
        }
        value |= payload << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_lengths() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut buf = Vec::new();
            put(&mut buf, v);
            assert_eq!(buf.len(), len(v), "len of {v}");
            assert_eq!(get(&buf), Some((v, buf.len())));
        }
        let mut buf = Vec::new();
        put(&mut buf, 300);
        assert_eq!(buf, [0xac, 0x02]);
    }

    #[test]
    fn accepts_non_shortest_rejects_bad() {
        assert_eq!(get(&[0x82, 0x00]), Some((2, 2)));
        assert_eq!(get(&[0x80]), None);
        assert_eq!(get(&[]), None);
        assert_eq!(get(&[0xff; 11]), None);
        // 10th byte carrying more than one bit overflows u64.
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert_eq!(get(&over), None);
        let mut max = vec![0xff; 9];
        max.push(0x01);
        assert_eq!(get(&max), Some((u64::MAX, 10)));
    }
}
