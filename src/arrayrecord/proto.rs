//! The three protobuf messages of the ArrayRecord index (spec section 6.4), hand-coded.
//!
//! They are tiny (varints and one string), so a protobuf runtime would be all cost. Encoding
//! mirrors the reference exactly (field order, every field present even when 0) because the
//! bytes end up hashed and compared; decoding is generic (any order, unknown fields skipped,
//! last value wins) as protobuf requires.

use super::varint;

/// The magic number in every postscript.
pub const POSTSCRIPT_MAGIC: u64 = 0x7193_0e70_4fda_e05e;

/// `RiegeliPostscript`: where the footer chunk begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Postscript {
    pub footer_offset: Option<u64>,
    pub magic: Option<u64>,
}

/// `RiegeliFooterMetadata.array_record_metadata`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Metadata {
    pub version: Option<u64>,
    pub num_chunks: Option<u64>,
    pub num_records: Option<u64>,
    pub writer_options: Option<String>,
}

/// `ArrayRecordFooter`: one index entry per data chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FooterEntry {
    pub chunk_offset: Option<u64>,
    pub decoded_data_size: Option<u64>,
    pub num_records: Option<u64>,
}

/// One decoded field value.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

/// Walks the fields of a message, calling `f(field_number, value)`; `None` on malformed input.
fn for_each_field<'a>(mut msg: &'a [u8], mut f: impl FnMut(u64, Value<'a>)) -> Option<()> {
    while !msg.is_empty() {
        let (key, n) = varint::get(msg)?;
        msg = msg.get(n..)?;
        let field = key >> 3;
        let value = match key & 7 {
            0 => {
                let (v, n) = varint::get(msg)?;
                msg = msg.get(n..)?;
                Value::Varint(v)
            }
            1 => {
                msg = msg.get(8..)?;
                Value::Other
            }
            2 => {
                let (len, n) = varint::get(msg)?;
                let len = usize::try_from(len).ok()?;
                let end = n.checked_add(len)?;
                let body = msg.get(n..end)?;
                msg = msg.get(end..)?;
                Value::Bytes(body)
            }
            5 => {
                msg = msg.get(4..)?;
                Value::Other
            }
            // Groups (3/4) are not used by these messages and are not worth supporting.
            _ => return None,
        };
        f(field, value);
    }
    Some(())
}

fn put_varint_field(out: &mut Vec<u8>, field: u64, v: u64) {
    varint::put(out, field << 3);
    varint::put(out, v);
}

fn put_bytes_field(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint::put(out, (field << 3) | 2);
    varint::put(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

impl Postscript {
    pub fn encode(footer_offset: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(21);
        put_varint_field(&mut out, 1, footer_offset);
        put_varint_field(&mut out, 2, POSTSCRIPT_MAGIC);
        out
    }

    pub fn decode(msg: &[u8]) -> Option<Self> {
        let mut p = Postscript {
            footer_offset: None,
            magic: None,
        };
        for_each_field(msg, |field, value| match (field, value) {
            (1, Value::Varint(v)) => p.footer_offset = Some(v),
            (2, Value::Varint(v)) => p.magic = Some(v),
            _ => {}
        })?;
        Some(p)
    }
}

impl Metadata {
    /// Encodes the whole `RiegeliFooterMetadata` (the oneof wrapper included).
    pub fn encode(num_chunks: u64, num_records: u64, writer_options: &str) -> Vec<u8> {
        let mut inner = Vec::with_capacity(32 + writer_options.len());
        put_varint_field(&mut inner, 1, 1);
        put_varint_field(&mut inner, 2, num_chunks);
        put_varint_field(&mut inner, 3, num_records);
        put_bytes_field(&mut inner, 4, writer_options.as_bytes());
        let mut out = Vec::with_capacity(inner.len() + 4);
        put_bytes_field(&mut out, 1, &inner);
        out
    }

    /// Decodes a `RiegeliFooterMetadata`; `Ok(None)` if `array_record_metadata` is absent.
    pub fn decode(msg: &[u8]) -> Option<Option<Self>> {
        let mut inner: Option<&[u8]> = None;
        for_each_field(msg, |field, value| {
            if let (1, Value::Bytes(b)) = (field, value) {
                inner = Some(b);
            }
        })?;
        let Some(inner) = inner else {
            return Some(None);
        };
        let mut m = Metadata::default();
        for_each_field(inner, |field, value| match (field, value) {
            (1, Value::Varint(v)) => m.version = Some(v),
            (2, Value::Varint(v)) => m.num_chunks = Some(v),
            (3, Value::Varint(v)) => m.num_records = Some(v),
            (4, Value::Bytes(b)) => m.writer_options = Some(String::from_utf8_lossy(b).into()),
            _ => {}
        })?;
        Some(Some(m))
    }
}

impl FooterEntry {
    pub fn encode(out: &mut Vec<u8>, chunk_offset: u64, decoded_data_size: u64, num_records: u64) {
        put_varint_field(out, 1, chunk_offset);
        put_varint_field(out, 2, decoded_data_size);
        put_varint_field(out, 3, num_records);
    }

    pub fn decode(msg: &[u8]) -> Option<Self> {
        let mut e = FooterEntry::default();
        for_each_field(msg, |field, value| match (field, value) {
            (1, Value::Varint(v)) => e.chunk_offset = Some(v),
            (2, Value::Varint(v)) => e.decoded_data_size = Some(v),
            (3, Value::Varint(v)) => e.num_records = Some(v),
            _ => {}
        })?;
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postscript_matches_reference_bytes() {
        let bytes = Postscript::encode(213);
        assert_eq!(hex::encode(&bytes), "08d50110dec0ebfe84cec3c971");
        let p = Postscript::decode(&bytes).unwrap();
        assert_eq!(p.footer_offset, Some(213));
        assert_eq!(p.magic, Some(POSTSCRIPT_MAGIC));
    }

    #[test]
    fn footer_entries_write_zero_fields() {
        let mut out = Vec::new();
        FooterEntry::encode(&mut out, 64, 0, 300);
        assert_eq!(hex::encode(&out), "0840100018ac02");
        let e = FooterEntry::decode(&out).unwrap();
        assert_eq!(e.num_records, Some(300));
        assert_eq!(e.decoded_data_size, Some(0));
    }

    #[test]
    fn metadata_round_trip_and_generic_decode() {
        let bytes = Metadata::encode(3, 5, "group_size:2");
        assert_eq!(
            &bytes[..8],
            &[0x0a, 0x14, 0x08, 0x01, 0x10, 0x03, 0x18, 0x05]
        );
        let m = Metadata::decode(&bytes).unwrap().unwrap();
        assert_eq!(m.version, Some(1));
        assert_eq!(m.num_records, Some(5));
        assert_eq!(m.writer_options.as_deref(), Some("group_size:2"));
        // Unknown fields (fixed64 field 9, varint field 7) are skipped; last value wins.
        let msg = [0x49, 1, 2, 3, 4, 5, 6, 7, 8, 0x38, 5, 0x08, 1, 0x08, 2];
        assert_eq!(FooterEntry::decode(&msg).unwrap().chunk_offset, Some(2));
        assert_eq!(Metadata::decode(&[0x38, 1]).unwrap(), None);
        // Truncated length-delimited field.
        assert!(Metadata::decode(&[0x0a, 0x05, 0x08]).is_none());
        assert!(FooterEntry::decode(&[0x0b]).is_none());
    }
}
