//! The dtype table of profile section 2: NumPy names, SafeTensors names, item sizes and the
//! NumPy `descr` strings used by `.npy` views. Everything else is refused.

use std::fmt;

/// A supported element type. All are little-endian and stored in C order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Bool,
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F16,
    F32,
    F64,
    C64,
}

/// Every supported dtype, in table order.
pub const ALL_DTYPES: [DType; 13] = [
    DType::Bool,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::F32,
    DType::F64,
    DType::C64,
];

impl DType {
    /// The NumPy dtype name written in metadata rows (`complex64`, `int16`, ...).
    pub fn numpy_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::C64 => "complex64",
        }
    }

    /// The SafeTensors dtype name used in payload headers (`C64`, `I16`, ...).
    pub fn safetensors_name(self) -> &'static str {
        match self {
            DType::Bool => "BOOL",
            DType::U8 => "U8",
            DType::U16 => "U16",
            DType::U32 => "U32",
            DType::U64 => "U64",
            DType::I8 => "I8",
            DType::I16 => "I16",
            DType::I32 => "I32",
            DType::I64 => "I64",
            DType::F16 => "F16",
            DType::F32 => "F32",
            DType::F64 => "F64",
            DType::C64 => "C64",
        }
    }

    /// Bytes per element.
    pub fn itemsize(self) -> u64 {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::U16 | DType::I16 | DType::F16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 | DType::C64 => 8,
        }
    }

    /// The NumPy array-interface `descr` for a `.npy` header (`<c8`, `|u1`, `|b1`, ...).
    pub fn npy_descr(self) -> &'static str {
        match self {
            DType::Bool => "|b1",
            DType::U8 => "|u1",
            DType::U16 => "<u2",
            DType::U32 => "<u4",
            DType::U64 => "<u8",
            DType::I8 => "|i1",
            DType::I16 => "<i2",
            DType::I32 => "<i4",
            DType::I64 => "<i8",
            DType::F16 => "<f2",
            DType::F32 => "<f4",
            DType::F64 => "<f8",
            DType::C64 => "<c8",
        }
    }

    /// Looks up a NumPy dtype name; `None` for anything outside the table.
    pub fn from_numpy_name(name: &str) -> Option<DType> {
        ALL_DTYPES.into_iter().find(|d| d.numpy_name() == name)
    }

    /// Looks up a SafeTensors dtype name; `None` for anything outside the table.
    pub fn from_safetensors_name(name: &str) -> Option<DType> {
        ALL_DTYPES
            .into_iter()
            .find(|d| d.safetensors_name() == name)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.numpy_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for d in ALL_DTYPES {
            assert_eq!(DType::from_numpy_name(d.numpy_name()), Some(d));
            assert_eq!(DType::from_safetensors_name(d.safetensors_name()), Some(d));
        }
        for refused in [
            "complex128",
            "bfloat16",
            "object",
            "str",
            "float8_e4m3fn",
            "",
        ] {
            assert_eq!(DType::from_numpy_name(refused), None, "{refused}");
        }
        assert_eq!(DType::from_safetensors_name("BF16"), None);
        assert_eq!(DType::C64.itemsize(), 8);
        assert_eq!(DType::F16.npy_descr(), "<f2");
    }
}
