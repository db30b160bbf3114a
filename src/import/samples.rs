//! SigMF sample datatypes (`cf32_le`, `ci16_le`, `ci8`, `cu8`, `rf32_le`, ...) and their
//! conversion into layout dtypes without loss.
//!
//! Complex samples become `complex64`; real samples become `float32` (or `float64` for
//! `rf64`). Integer samples of 8 and 16 bits are stored as their exact integer values in the
//! float components, **unscaled** (`ci16_le` 1000 becomes 1000.0, not 1000/32768): every such
//! integer is exactly representable in `float32`, SigMF readers do not scale either, and the
//! original datatype is kept in the field metadata (`source_datatype`), so the original bytes
//! can be rebuilt exactly. Unsigned samples keep their offset (`cu8` 128 becomes 128.0).
//! Types that cannot be converted without loss (`cf64`, 32-bit integers) are refused.

use crate::format::dtype::DType;

/// The datatypes that import, as the errors list them.
const SUPPORTED: &str = "cf32_le, cf32_be, ci16_le, ci16_be, cu16_le, cu16_be, ci8, cu8, \
    rf32_le, rf32_be, rf64_le, rf64_be, ri16_le, ri16_be, ru16_le, ru16_be, ri8, ru8";

/// Why a SigMF datatype (named in the error) cannot be imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatatypeError {
    /// Not a SigMF datatype at all.
    #[error("unknown SigMF datatype {0:?} (supported: {SUPPORTED})")]
    Unknown(String),
    /// A SigMF datatype that no layout dtype holds without loss.
    #[error("SigMF datatype {0:?} cannot be stored without loss (supported: {SUPPORTED})")]
    Lossy(String),
    /// A byte-order suffix on an 8-bit type, or none on a wider one.
    #[error(
        "SigMF datatype {0:?}: 8-bit types have no byte-order suffix, wider ones need _le or _be"
    )]
    ByteOrder(String),
}

/// Element kind of a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Float,
    Int,
    Uint,
}

/// A parsed SigMF datatype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleFormat {
    complex: bool,
    kind: Kind,
    bits: u32,
    big_endian: bool,
}

impl SampleFormat {
    /// Parses a SigMF `core:datatype`; the error says why it is not importable.
    pub fn parse(name: &str) -> Result<SampleFormat, DatatypeError> {
        let bad = || DatatypeError::Unknown(name.to_string());
        let (body, big_endian) = match name.rsplit_once('_') {
            Some((body, "le")) => (body, false),
            Some((body, "be")) => (body, true),
            Some(_) => return Err(bad()),
            None => (name, false),
        };
        let mut chars = body.chars();
        let complex = match chars.next() {
            Some('c') => true,
            Some('r') => false,
            _ => return Err(bad()),
        };
        let kind = match chars.next() {
            Some('f') => Kind::Float,
            Some('i') => Kind::Int,
            Some('u') => Kind::Uint,
            _ => return Err(bad()),
        };
        let bits: u32 = chars.as_str().parse().map_err(|_| bad())?;
        let format = SampleFormat {
            complex,
            kind,
            bits,
            big_endian,
        };
        format.check(name)?;
        Ok(format)
    }

    fn check(&self, name: &str) -> Result<(), DatatypeError> {
        let supported = match self.kind {
            Kind::Float => self.bits == 32 || (self.bits == 64 && !self.complex),
            Kind::Int | Kind::Uint => self.bits == 8 || self.bits == 16,
        };
        if !supported {
            return Err(DatatypeError::Lossy(name.to_string()));
        }
        if (self.bits == 8) == name.contains('_') {
            return Err(DatatypeError::ByteOrder(name.to_string()));
        }
        Ok(())
    }

    /// Bytes per input sample (both components for complex).
    pub fn sample_bytes(&self) -> u64 {
        u64::from(self.bits / 8) * if self.complex { 2 } else { 1 }
    }

    /// The layout dtype the samples are stored as.
    pub fn dtype(&self) -> DType {
        match (self.complex, self.kind, self.bits) {
            (true, _, _) => DType::C64,
            (false, Kind::Float, 64) => DType::F64,
            _ => DType::F32,
        }
    }

    /// Whether the samples are complex.
    pub fn is_complex(&self) -> bool {
        self.complex
    }

    /// Converts whole samples of this format into little-endian bytes of [`Self::dtype`].
    /// Takes the samples by value: little-endian floats are already the stored form and are
    /// returned as they are, so a large capture is not held twice.
    pub fn convert(&self, input: Vec<u8>) -> Vec<u8> {
        let width = (self.bits / 8) as usize;
        let passthrough = self.kind == Kind::Float && !self.big_endian;
        if passthrough {
            return input;
        }
        let mut out = Vec::with_capacity(input.len() / width * self.dtype().itemsize() as usize);
        for component in input.chunks_exact(width) {
            self.push_component(component, &mut out);
        }
        out
    }

    fn push_component(&self, bytes: &[u8], out: &mut Vec<u8>) {
        let mut le = [0u8; 8];
        le[..bytes.len()].copy_from_slice(bytes);
        if self.big_endian {
            le[..bytes.len()].reverse();
        }
        match (self.kind, self.bits) {
            (Kind::Float, 64) => out.extend_from_slice(&le),
            (Kind::Float, _) => out.extend_from_slice(&le[..4]),
            (Kind::Int, 8) => out.extend((le[0] as i8 as f32).to_le_bytes()),
            (Kind::Uint, 8) => out.extend(f32::from(le[0]).to_le_bytes()),
            (Kind::Int, _) => {
                out.extend(f32::from(i16::from_le_bytes([le[0], le[1]])).to_le_bytes())
            }
            (Kind::Uint, _) => {
                out.extend(f32::from(u16::from_le_bytes([le[0], le[1]])).to_le_bytes())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floats(bytes: &[u8]) -> Vec<f32> {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    #[test]
    fn integers_convert_exactly() {
        let ci16 = SampleFormat::parse("ci16_le").unwrap();
        let input: Vec<u8> = [-32768i16, 32767, 1, -1]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(ci16.dtype(), DType::C64);
        assert_eq!(
            floats(&ci16.convert(input.clone())),
            vec![-32768.0, 32767.0, 1.0, -1.0]
        );
        let be = SampleFormat::parse("ci16_be").unwrap();
        assert_eq!(
            floats(&be.convert(vec![0x01, 0x00, 0xff, 0xfe])),
            vec![256.0, -2.0]
        );
        assert_eq!(
            floats(
                &SampleFormat::parse("ci8")
                    .unwrap()
                    .convert(vec![0x80, 0x7f])
            ),
            vec![-128.0, 127.0]
        );
        assert_eq!(
            floats(&SampleFormat::parse("cu8").unwrap().convert(vec![0, 255])),
            vec![0.0, 255.0]
        );
        let rf32 = SampleFormat::parse("rf32_le").unwrap();
        assert_eq!((rf32.dtype(), rf32.sample_bytes()), (DType::F32, 4));
        assert_eq!(SampleFormat::parse("rf64_le").unwrap().dtype(), DType::F64);
    }

    #[test]
    fn lossy_or_unknown_types_are_refused() {
        for name in [
            "cf64_le", "ci32_le", "ri32_le", "cx16", "ci8_le", "cf32", "zz",
        ] {
            assert!(SampleFormat::parse(name).is_err(), "{name}");
        }
        // An unknown name is told what is known, and every name listed parses.
        let message = SampleFormat::parse("complex64").unwrap_err().to_string();
        assert!(message.contains("cf32_le, cf32_be, ci16_le"), "{message}");
        for name in SUPPORTED.split(", ") {
            assert!(SampleFormat::parse(name).is_ok(), "{name}");
        }
    }
}
