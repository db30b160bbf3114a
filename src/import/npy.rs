//! NPY headers (format versions 1.0, 2.0 and 3.0): dtype, shape and where the data starts.
//!
//! Only what the layout can store is accepted: a dtype of the table (little-endian, or
//! byte-order-free for one-byte types) in C order. Big-endian, Fortran-order, structured and
//! object arrays are refused with a message saying how to convert them, rather than converted
//! silently, so an import never changes values behind the user's back.

use std::io::Read;
use std::path::Path;

use super::open::read_exactly;
use super::ImportError;
use crate::format::dtype::{DType, ALL_DTYPES};

const MAGIC: &[u8] = b"\x93NUMPY";

/// Longest header dict accepted when reading a stream (NumPy writes a few hundred bytes).
const MAX_DICT_BYTES: usize = 1 << 20;

/// What an NPY header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    pub dtype: DType,
    pub shape: Vec<u64>,
    /// Offset of the first data byte.
    pub data_start: usize,
}

impl NpyHeader {
    /// Bytes of data the header promises, `None` on overflow.
    pub fn data_len(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(self.dtype.itemsize(), |n, &d| n.checked_mul(d))
    }
}

/// Reads an NPY header from the start of `reader`, leaving it at the first data byte; `place`
/// names the file (or archive member) in errors.
pub fn read_header(reader: &mut impl Read, place: &str) -> Result<NpyHeader, ImportError> {
    let invalid = |problem: String| ImportError::Invalid {
        path: place.to_string(),
        problem,
    };
    let io = |e: std::io::Error| invalid(format!("reading the NPY header: {e}"));
    let mut bytes = vec![0u8; 8];
    reader.read_exact(&mut bytes).map_err(io)?;
    if &bytes[..6] != MAGIC {
        return Err(invalid("not an NPY file (bad magic)".into()));
    }
    let len_size = match bytes[6] {
        1 => 2,
        2 | 3 => 4,
        v => return Err(invalid(format!("unsupported NPY format version {v}"))),
    };
    let mut len_bytes = [0u8; 4];
    reader.read_exact(&mut len_bytes[..len_size]).map_err(io)?;
    bytes.extend_from_slice(&len_bytes[..len_size]);
    let dict_len = u32::from_le_bytes(len_bytes) as usize;
    if dict_len > MAX_DICT_BYTES {
        return Err(invalid(format!(
            "NPY header of {dict_len} bytes is longer than {MAX_DICT_BYTES}"
        )));
    }
    let start = bytes.len();
    bytes.resize(start + dict_len, 0);
    reader.read_exact(&mut bytes[start..]).map_err(io)?;
    parse_header(&bytes).map_err(invalid)
}

/// Reads a whole NPY stream: its header, then exactly the data bytes the header promises,
/// refusing a stream with more or fewer. `stream_len`, when known (a file's `fstat` length), is
/// checked against the header before anything is allocated, and the data is then read into one
/// buffer of its size; otherwise (an archive member) the buffer grows as bytes arrive, so a
/// header claiming terabytes over a small stream allocates nothing of the sort.
pub fn read_npy_stream(
    reader: &mut impl Read,
    place: &str,
    stream_len: Option<u64>,
) -> Result<(NpyHeader, Vec<u8>), ImportError> {
    let header = read_header(reader, place)?;
    let invalid = |problem: String| ImportError::Invalid {
        path: place.to_string(),
        problem,
    };
    let len = header
        .data_len()
        .ok_or_else(|| invalid(format!("shape {:?} overflows 64 bits", header.shape)))?;
    let wrong_length = |actual: u64| {
        invalid(format!(
            "{actual} data bytes after the NPY header, shape {:?} of {} needs {len}",
            header.shape, header.dtype
        ))
    };
    let data = match stream_len {
        Some(total) => {
            let body = total.saturating_sub(header.data_start as u64);
            if body != len {
                return Err(wrong_length(body));
            }
            read_exactly(reader, len, Path::new(place))?
        }
        None => {
            let mut data = Vec::new();
            reader
                .by_ref()
                .take(len)
                .read_to_end(&mut data)
                .map_err(|e| invalid(format!("reading: {e}")))?;
            if (data.len() as u64) < len {
                return Err(wrong_length(data.len() as u64));
            }
            data
        }
    };
    let mut probe = [0u8; 1];
    let more = reader
        .read(&mut probe)
        .map_err(|e| invalid(format!("reading: {e}")))?;
    if more != 0 {
        return Err(invalid(format!(
            "more data bytes after the NPY header than shape {:?} of {} needs ({len})",
            header.shape, header.dtype
        )));
    }
    Ok((header, data))
}

/// Parses the header at the start of `bytes`; the error is the problem, without the file name.
pub fn parse_header(bytes: &[u8]) -> Result<NpyHeader, String> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("not an NPY file (bad magic)".into());
    }
    let (len_size, dict_start) = match bytes[6] {
        1 => (2, 10),
        2 | 3 => (4, 12),
        v => return Err(format!("unsupported NPY format version {v}")),
    };
    if bytes.len() < dict_start {
        return Err("truncated NPY header".into());
    }
    let mut len_bytes = [0u8; 4];
    len_bytes[..len_size].copy_from_slice(&bytes[8..8 + len_size]);
    let dict_len = u32::from_le_bytes(len_bytes) as usize;
    let data_start = dict_start + dict_len;
    let dict = bytes
        .get(dict_start..data_start)
        .ok_or("truncated NPY header")?;
    let text = std::str::from_utf8(dict).map_err(|_| "NPY header is not UTF-8")?;
    let entries = parse_dict(text)?;
    header_from(&entries, data_start)
}

fn header_from(entries: &[(String, Literal)], data_start: usize) -> Result<NpyHeader, String> {
    let get = |key: &str| {
        entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .ok_or(format!("NPY header has no '{key}'"))
    };
    let dtype = match get("descr")? {
        Literal::Str(descr) => dtype_of(descr)?,
        _ => return Err("structured NPY dtypes are not supported".into()),
    };
    match get("fortran_order")? {
        Literal::Bool(false) => {}
        Literal::Bool(true) => {
            return Err("Fortran-order array: save it with numpy.ascontiguousarray first".into())
        }
        _ => return Err("NPY 'fortran_order' must be True or False".into()),
    }
    let shape = match get("shape")? {
        Literal::Tuple(dims) => dims.clone(),
        _ => return Err("NPY 'shape' must be a tuple of integers".into()),
    };
    Ok(NpyHeader {
        dtype,
        shape,
        data_start,
    })
}

/// The dtype of an NPY `descr`, accepting `<` for every type and `|` for one-byte types.
pub fn dtype_of(descr: &str) -> Result<DType, String> {
    if let Some(rest) = descr.strip_prefix('>') {
        return Err(format!(
            "big-endian dtype {descr:?}: convert with .astype('<{rest}') first"
        ));
    }
    let little = descr.replacen('|', "<", 1);
    ALL_DTYPES
        .into_iter()
        .find(|d| d.npy_descr().replacen('|', "<", 1) == little)
        .ok_or_else(|| format!("dtype {descr:?} is not in the layout's dtype table"))
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
fn parse_dict(text: &str) -> Result<Vec<(String, Literal)>, String> {
    let mut rest = text
        .trim_start()
        .strip_prefix('{')
        .ok_or("NPY header is not a dict")?;
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
            .ok_or("NPY header: expected ':'")?;
        let (value, after) = literal(rest.trim_start())?;
        entries.push((key, value));
        rest = after.trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

fn quoted(text: &str) -> Result<(String, &str), String> {
    let quote = text.chars().next().filter(|c| *c == '\'' || *c == '"');
    let quote = quote.ok_or("NPY header: expected a quoted string")?;
    let body = &text[1..];
    let end = body.find(quote).ok_or("NPY header: unterminated string")?;
    Ok((body[..end].to_string(), &body[end + 1..]))
}

fn literal(text: &str) -> Result<(Literal, &str), String> {
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
        let end = rest.find(')').ok_or("NPY header: unterminated tuple")?;
        return Ok((Literal::Tuple(dims(&rest[..end])?), &rest[end + 1..]));
    }
    if text.starts_with('[') {
        let end = text.rfind(']').ok_or("NPY header: unterminated list")?;
        return Ok((Literal::Other, &text[end + 1..]));
    }
    Err("NPY header: unexpected value".into())
}

fn dims(inner: &str) -> Result<Vec<u64>, String> {
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<u64>()
                .map_err(|_| format!("NPY header: bad dimension {s:?}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::views::npy::npy_header;

    #[test]
    fn reads_what_the_mount_writes() {
        for (dtype, shape) in [
            (DType::C64, vec![20000]),
            (DType::Bool, vec![]),
            (DType::I16, vec![64, 79]),
        ] {
            let header = npy_header(dtype, &shape);
            let parsed = parse_header(&header).unwrap();
            assert_eq!(parsed.dtype, dtype);
            assert_eq!(parsed.shape, shape);
            assert_eq!(parsed.data_start, header.len());
        }
    }

    #[test]
    fn refuses_what_the_layout_cannot_hold() {
        let make = |dict: &str| {
            let mut b = b"\x93NUMPY\x01\x00".to_vec();
            b.extend((dict.len() as u16).to_le_bytes());
            b.extend(dict.as_bytes());
            b
        };
        let ok = make("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }");
        assert_eq!(parse_header(&ok).unwrap().shape, vec![3, 2]);
        let err = |d: &str| parse_header(&make(d)).unwrap_err();
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
        assert!(parse_header(b"PK\x03\x04junkjunk").is_err());
        assert_eq!(dtype_of("|u1"), Ok(DType::U8));
        assert_eq!(dtype_of("<u1"), Ok(DType::U8));
    }
}
