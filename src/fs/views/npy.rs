//! The `.npy` view: a NumPy format 1.0 header (2.0 only when the header needs more than 65535
//! bytes) followed by the field's raw bytes. The header is built from the metadata row alone, so
//! the file's size is known without touching a data shard, and it is padded so the data starts
//! at a multiple of 64 bytes, as NumPy itself writes it: `numpy.load(path, mmap_mode="r")` then
//! maps the tensor bytes in place.

use crate::format::dtype::DType;

const MAGIC: &[u8] = b"\x93NUMPY";
const ALIGN: usize = 64;

/// The complete `.npy` header (magic, version, length, dict, padding, newline) for a C-order
/// little-endian array of `dtype` and `shape`.
pub fn npy_header(dtype: DType, shape: &[u64]) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        dtype.npy_descr(),
        shape_tuple(shape)
    );
    // Version 1.0 has a 10-byte prefix with a u16 length; 2.0 a 12-byte prefix with a u32.
    let v1_len = padded_len(10, dict.len());
    if v1_len - 10 <= usize::from(u16::MAX) {
        build(1, 10, &dict, v1_len)
    } else {
        build(2, 12, &dict, padded_len(12, dict.len()))
    }
}

/// Total header length once the dict, a newline and space padding fill to [`ALIGN`].
fn padded_len(prefix: usize, dict_len: usize) -> usize {
    (prefix + dict_len + 1).div_ceil(ALIGN) * ALIGN
}

fn build(major: u8, prefix: usize, dict: &str, total: usize) -> Vec<u8> {
    let mut header = Vec::with_capacity(total);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&[major, 0]);
    let body_len = total - prefix;
    if major == 1 {
        header.extend_from_slice(&(body_len as u16).to_le_bytes());
    } else {
        header.extend_from_slice(&(body_len as u32).to_le_bytes());
    }
    header.extend_from_slice(dict.as_bytes());
    header.resize(total - 1, b' ');
    header.push(b'\n');
    header
}

/// A Python tuple literal as NumPy writes it: `()`, `(5,)`, `(2, 3)`.
fn shape_tuple(shape: &[u64]) -> String {
    match shape {
        [] => "()".to_string(),
        [single] => format!("({single},)"),
        dims => {
            let parts: Vec<String> = dims.iter().map(u64::to_string).collect();
            format!("({})", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_numpy_layout() {
        let header = npy_header(DType::C64, &[20000]);
        assert_eq!(header.len(), 128);
        assert_eq!(&header[..8], b"\x93NUMPY\x01\x00");
        assert_eq!(u16::from_le_bytes([header[8], header[9]]) as usize, 118);
        let text = std::str::from_utf8(&header[10..]).unwrap();
        assert!(text.starts_with("{'descr': '<c8', 'fortran_order': False, 'shape': (20000,), }"));
        assert!(text.ends_with(" \n"));
        assert_eq!(shape_tuple(&[]), "()");
        assert_eq!(shape_tuple(&[1, 4, 400]), "(1, 4, 400)");
        assert_eq!(npy_header(DType::Bool, &[]).len() % 64, 0);
    }

    #[test]
    fn huge_headers_switch_to_version_two() {
        let shape = vec![1u64; 30_000];
        let header = npy_header(DType::U8, &shape);
        assert_eq!(header[6], 2);
        assert_eq!(header.len() % 64, 0);
        let len = u32::from_le_bytes([header[8], header[9], header[10], header[11]]) as usize;
        assert_eq!(len + 12, header.len());
    }
}
