//! NPY files written by hand from NumPy's format description (version 1.0: magic, version,
//! little-endian u16 header length, the header dict, spaces and a newline so the data starts
//! at a multiple of 64), independently of the crate's encoder: inputs for importers and the
//! expected bytes of the mount's `.npy` views.
#![allow(dead_code)]

use sdsfs::format::dtype::DType;

/// NumPy's `dtype.str` of `dtype`, written out here rather than asked of the crate.
pub fn descr(dtype: DType) -> &'static str {
    match dtype {
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

/// An NPY 1.0 file of a C-order array of `dtype` and `shape` holding `data`.
pub fn npy_bytes(dtype: DType, shape: &[u64], data: &[u8]) -> Vec<u8> {
    npy_bytes_of_descr(descr(dtype), shape, data)
}

/// An NPY 1.0 file of a C-order array of NumPy type `descr` and `shape` holding `data`.
pub fn npy_bytes_of_descr(descr: &str, shape: &[u64], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let tuple = match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}
