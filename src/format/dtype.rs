//! The dtype table of `docs/FORMAT.md` section 2: NumPy names, NumPy `dtype.str` strings,
//! SafeTensors names and item sizes. Everything else is refused.
//!
//! Metadata rows carry NumPy's `dtype.str` (`<c8`, `|u1`), because that is what the format
//! owner's library writes (`RecordMetadata.from_record` stores `array.dtype.str`). Earlier
//! writers of this project wrote the plain names (`complex64`), so a row reader accepts both
//! ([`DType::from_row_dtype`]); nothing writes the plain names any more.

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
    /// The plain NumPy dtype name (`complex64`, `int16`, ...), used in messages and listings.
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

    /// NumPy's `dtype.str` (`<c8`, `|u1`, `|b1`, ...): what metadata rows carry, and the
    /// array-interface `descr` of a `.npy` header (the two are the same string).
    pub fn dtype_str(self) -> &'static str {
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

    /// The `.npy` header `descr`: the same string as [`DType::dtype_str`].
    pub fn npy_descr(self) -> &'static str {
        self.dtype_str()
    }

    /// Looks up a NumPy `dtype.str`. A one-byte type is also accepted with `<` (NumPy reads
    /// `<u1` as `uint8` and prints it `|u1`); `None` for anything outside the table, including
    /// big-endian strings.
    pub fn from_dtype_str(text: &str) -> Option<DType> {
        ALL_DTYPES.into_iter().find(|d| {
            let canonical = d.dtype_str();
            canonical == text
                || (d.itemsize() == 1 && text.strip_prefix('<') == canonical.strip_prefix('|'))
        })
    }

    /// Reads the `dtype` of a metadata row: a `dtype.str` (what is written now) or a plain
    /// NumPy name (what earlier writers of this project wrote).
    pub fn from_row_dtype(text: &str) -> Option<DType> {
        DType::from_dtype_str(text).or_else(|| DType::from_numpy_name(text))
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

    #[test]
    fn row_dtypes_read_both_spellings() {
        // Expected strings are NumPy's `np.dtype(name).str` for each name of the table.
        let numpy = [
            ("bool", "|b1"),
            ("uint8", "|u1"),
            ("uint16", "<u2"),
            ("uint32", "<u4"),
            ("uint64", "<u8"),
            ("int8", "|i1"),
            ("int16", "<i2"),
            ("int32", "<i4"),
            ("int64", "<i8"),
            ("float16", "<f2"),
            ("float32", "<f4"),
            ("float64", "<f8"),
            ("complex64", "<c8"),
        ];
        for (d, (name, text)) in ALL_DTYPES.into_iter().zip(numpy) {
            assert_eq!(d.numpy_name(), name);
            assert_eq!(d.dtype_str(), text);
            assert_eq!(DType::from_row_dtype(text), Some(d), "{text}");
            assert_eq!(DType::from_row_dtype(name), Some(d), "{name}");
        }
        assert_eq!(DType::from_row_dtype("<u1"), Some(DType::U8));
        assert_eq!(DType::from_row_dtype("<b1"), Some(DType::Bool));
        for refused in [
            ">c8", "|c8", "<c16", ">u2", "|u2", "<U8", "|O", "c8", "C64", "",
        ] {
            assert_eq!(DType::from_row_dtype(refused), None, "{refused}");
        }
    }
}
