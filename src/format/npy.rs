//! NPY, NumPy's array file: the one codec of the crate. The importers read the files users give
//! (`sds create --from-npy`, `--from-dir`), annotation rows read their `.npy` fields, and the
//! mount writes the header of every `.npy` view and column with [`encode_header`].
//!
//! Reading accepts format versions 1.0, 2.0 and 3.0 and only what the layout can store: a dtype
//! of the table (little-endian, or byte-order-free for one-byte types) in C order. Big-endian,
//! Fortran-order, structured and object arrays are refused with a message saying how to convert
//! them, rather than converted silently, so an import never changes values behind the user's
//! back. Writing produces version 1.0 (2.0 only when the header needs more than 65535 bytes),
//! padded so the data starts at a multiple of 64 bytes as NumPy itself pads it: a header built
//! from a metadata row alone gives the file's size without the data, and
//! `numpy.load(path, mmap_mode="r")` maps the tensor bytes in place.

use super::dtype::{DType, ALL_DTYPES};

/// The six bytes every NPY file starts with.
pub const MAGIC: &[u8] = b"\x93NUMPY";
/// Where NumPy aligns the data.
const ALIGN: usize = 64;

/// Why bytes are not an NPY file the layout can store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NpyError {
    #[error("not an NPY file (bad magic)")]
    BadMagic,
    #[error("unsupported NPY format version {0}")]
    Version(u8),
    #[error("truncated NPY header")]
    Truncated,
    #[error("NPY header is not UTF-8")]
    NotText,
    #[error("NPY header: {0}")]
    Dict(&'static str),
    #[error("NPY header: bad dimension {0:?}")]
    Dimension(String),
    #[error("NPY header has no '{0}'")]
    Missing(&'static str),
    #[error("big-endian dtype {descr:?}: convert with .astype('<{rest}') first")]
    BigEndian { descr: String, rest: String },
    #[error("dtype {0:?} is not in the layout's dtype table")]
    NotInTable(String),
    #[error("structured NPY dtypes are not supported")]
    Structured,
    #[error("Fortran-order array: save it with numpy.ascontiguousarray first")]
    Fortran,
    #[error("NPY 'fortran_order' must be True or False")]
    FortranValue,
    #[error("NPY 'shape' must be a tuple of integers")]
    ShapeValue,
    #[error("shape {0:?} overflows 64 bits")]
    Overflow(Vec<u64>),
    #[error("{actual} data bytes after the NPY header, shape {shape:?} of {dtype} needs {needed}")]
    DataLength {
        actual: u64,
        needed: u64,
        shape: Vec<u64>,
        dtype: DType,
    },
}

/// What an NPY header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    pub dtype: DType,
    pub shape: Vec<u64>,
    /// Offset of the first data byte.
    pub data_start: usize,
}

impl NpyHeader {
    /// Bytes of data the header promises.
    pub fn data_len(&self) -> Result<u64, NpyError> {
        self.shape
            .iter()
            .try_fold(self.dtype.itemsize(), |n, &d| n.checked_mul(d))
            .ok_or_else(|| NpyError::Overflow(self.shape.clone()))
    }

    /// The error for `actual` data bytes where the header promises others.
    pub fn wrong_length(&self, actual: u64) -> NpyError {
        NpyError::DataLength {
            actual,
            needed: self.data_len().unwrap_or(u64::MAX),
            shape: self.shape.clone(),
            dtype: self.dtype,
        }
    }
}

/// The complete header (magic, version, length, dict, padding, newline) of a C-order
/// little-endian array of `dtype` and `shape`.
pub fn encode_header(dtype: DType, shape: &[u64]) -> Vec<u8> {
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

/// The size of the length field that follows the first 8 bytes (magic and version) of a file:
/// what a stream reader reads next.
pub fn length_field_size(magic_and_version: &[u8]) -> Result<usize, NpyError> {
    if magic_and_version.len() < 8 || &magic_and_version[..6] != MAGIC {
        return Err(NpyError::BadMagic);
    }
    match magic_and_version[6] {
        1 => Ok(2),
        2 | 3 => Ok(4),
        v => Err(NpyError::Version(v)),
    }
}

/// Parses the header at the start of `bytes`.
pub fn parse_header(bytes: &[u8]) -> Result<NpyHeader, NpyError> {
    let len_size = length_field_size(bytes)?;
    let dict_start = 8 + len_size;
    let len_field = bytes.get(8..dict_start).ok_or(NpyError::Truncated)?;
    let mut len_bytes = [0u8; 4];
    len_bytes[..len_size].copy_from_slice(len_field);
    let data_start = dict_start + u32::from_le_bytes(len_bytes) as usize;
    let dict = bytes
        .get(dict_start..data_start)
        .ok_or(NpyError::Truncated)?;
    let text = std::str::from_utf8(dict).map_err(|_| NpyError::NotText)?;
    header_from(&parse_dict(text)?, data_start)
}

/// A whole file held in memory: its header and exactly the data bytes it promises.
pub fn parse(bytes: &[u8]) -> Result<(NpyHeader, &[u8]), NpyError> {
    let header = parse_header(bytes)?;
    let data = &bytes[header.data_start..];
    if data.len() as u64 != header.data_len()? {
        return Err(header.wrong_length(data.len() as u64));
    }
    Ok((header, data))
}

fn header_from(entries: &[(String, Literal)], data_start: usize) -> Result<NpyHeader, NpyError> {
    let get = |key: &'static str| {
        entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .ok_or(NpyError::Missing(key))
    };
    let dtype = match get("descr")? {
        Literal::Str(descr) => dtype_of(descr)?,
        _ => return Err(NpyError::Structured),
    };
    match get("fortran_order")? {
        Literal::Bool(false) => {}
        Literal::Bool(true) => return Err(NpyError::Fortran),
        _ => return Err(NpyError::FortranValue),
    }
    let shape = match get("shape")? {
        Literal::Tuple(dims) => dims.clone(),
        _ => return Err(NpyError::ShapeValue),
    };
    Ok(NpyHeader {
        dtype,
        shape,
        data_start,
    })
}

/// The dtype of an NPY `descr`, accepting `<` for every type and `|` for one-byte types.
pub fn dtype_of(descr: &str) -> Result<DType, NpyError> {
    if let Some(rest) = descr.strip_prefix('>') {
        return Err(NpyError::BigEndian {
            descr: descr.to_string(),
            rest: rest.to_string(),
        });
    }
    let little = descr.replacen('|', "<", 1);
    ALL_DTYPES
        .into_iter()
        .find(|d| d.npy_descr().replacen('|', "<", 1) == little)
        .ok_or_else(|| NpyError::NotInTable(descr.to_string()))
}

/// A Python literal of an NPY header dict.
#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
    Other,
}

/// Parses `{'key': value, ...}` as NumPy writes it.
fn parse_dict(text: &str) -> Result<Vec<(String, Literal)>, NpyError> {
    let mut rest = text
        .trim_start()
        .strip_prefix('{')
        .ok_or(NpyError::Dict("not a dict"))?;
    let mut entries = Vec::new();
    loop {
        rest = rest.trim_start();
        if rest.starts_with('}') {
            return Ok(entries);
        }
        let (key, after) = quoted(rest)?;
        rest = after
            .trim_start()
            .strip_prefix(':')
            .ok_or(NpyError::Dict("expected ':'"))?;
        let (value, after) = literal(rest.trim_start())?;
        entries.push((key, value));
        rest = after.trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

fn quoted(text: &str) -> Result<(String, &str), NpyError> {
    let quote = text.chars().next().filter(|c| *c == '\'' || *c == '"');
    let quote = quote.ok_or(NpyError::Dict("expected a quoted string"))?;
    let body = &text[1..];
    let end = body
        .find(quote)
        .ok_or(NpyError::Dict("unterminated string"))?;
    Ok((body[..end].to_string(), &body[end + 1..]))
}

fn literal(text: &str) -> Result<(Literal, &str), NpyError> {
    if text.starts_with('\'') || text.starts_with('"') {
        let (s, rest) = quoted(text)?;
        return Ok((Literal::Str(s), rest));
    }
    if let Some(rest) = text.strip_prefix("True") {
        return Ok((Literal::Bool(true), rest));
    }
    if let Some(rest) = text.strip_prefix("False") {
        return Ok((Literal::Bool(false), rest));
    }
    if let Some(rest) = text.strip_prefix('(') {
        let end = rest.find(')').ok_or(NpyError::Dict("unterminated tuple"))?;
        return Ok((Literal::Tuple(dims(&rest[..end])?), &rest[end + 1..]));
    }
    if text.starts_with('[') {
        let end = text.rfind(']').ok_or(NpyError::Dict("unterminated list"))?;
        return Ok((Literal::Other, &text[end + 1..]));
    }
    Err(NpyError::Dict("unexpected value"))
}

fn dims(inner: &str) -> Result<Vec<u64>, NpyError> {
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<u64>()
                .map_err(|_| NpyError::Dimension(s.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header written by hand from NumPy's format description.
    fn by_hand(dict: &str) -> Vec<u8> {
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend((dict.len() as u16).to_le_bytes());
        b.extend(dict.as_bytes());
        b
    }

    #[test]
    fn header_matches_numpy_layout() {
        let header = encode_header(DType::C64, &[20000]);
        assert_eq!(header.len(), 128);
        assert_eq!(&header[..8], b"\x93NUMPY\x01\x00");
        assert_eq!(u16::from_le_bytes([header[8], header[9]]) as usize, 118);
        let text = std::str::from_utf8(&header[10..]).unwrap();
        assert!(text.starts_with("{'descr': '<c8', 'fortran_order': False, 'shape': (20000,), }"));
        assert!(text.ends_with(" \n"));
        assert_eq!(shape_tuple(&[]), "()");
        assert_eq!(shape_tuple(&[1, 4, 400]), "(1, 4, 400)");
        assert_eq!(encode_header(DType::Bool, &[]).len() % 64, 0);
    }

    #[test]
    fn huge_headers_switch_to_version_2() {
        let shape = vec![1u64; 30_000];
        let header = encode_header(DType::U8, &shape);
        assert_eq!(header[6], 2);
        assert_eq!(header.len() % 64, 0);
        assert_eq!(parse_header(&header).unwrap().shape, shape);
    }

    #[test]
    fn reads_what_it_writes() {
        for (dtype, shape) in [
            (DType::C64, vec![20000]),
            (DType::Bool, vec![]),
            (DType::I16, vec![64, 79]),
        ] {
            let header = encode_header(dtype, &shape);
            let parsed = parse_header(&header).unwrap();
            assert_eq!(parsed.dtype, dtype);
            assert_eq!(parsed.shape, shape);
            assert_eq!(parsed.data_start, header.len());
        }
    }

    #[test]
    fn whole_files_hold_exactly_their_data() {
        let mut bytes = by_hand("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
        bytes.extend_from_slice(&[0u8; 24]);
        let (header, data) = parse(&bytes).unwrap();
        assert_eq!(
            (header.dtype, header.shape, data.len()),
            (DType::F32, vec![2, 3], 24)
        );
        let mut bytes = by_hand("{'descr': '|u1', 'fortran_order': False, 'shape': (), }");
        bytes.push(7);
        assert_eq!(parse(&bytes).unwrap().1, [7]);
        bytes.push(8);
        let error = parse(&bytes).unwrap_err().to_string();
        assert!(
            error.contains("2 data bytes") && error.contains("needs 1"),
            "{error}"
        );
    }

    #[test]
    fn refuses_what_the_layout_cannot_hold() {
        let ok = by_hand("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }");
        assert_eq!(parse_header(&ok).unwrap().shape, vec![3, 2]);
        let err = |d: &str| parse_header(&by_hand(d)).unwrap_err().to_string();
        assert!(err("{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }").contains("big"));
        assert!(
            err("{'descr': '<c16', 'fortran_order': False, 'shape': (3,), }").contains("table")
        );
        assert!(
            err("{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }").contains("Fortran")
        );
        assert!(
            err("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }")
                .contains("structured")
        );
        assert_eq!(parse_header(b"PK\x03\x04junkjunk"), Err(NpyError::BadMagic));
        assert_eq!(
            parse_header(b"\x93NUMPY\x01\x00\x40"),
            Err(NpyError::Truncated)
        );
        assert_eq!(dtype_of("|u1"), Ok(DType::U8));
        assert_eq!(dtype_of("<u1"), Ok(DType::U8));
    }
}
