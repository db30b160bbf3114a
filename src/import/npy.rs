//! NPY files read from streams (a file, an `.npz` member) with the format's codec
//! ([`crate::format::npy`]): the header first, then exactly the data it promises, without
//! trusting the header's claims for allocation.

use std::io::Read;
use std::path::Path;

use super::open::read_exactly;
use super::ImportError;
pub use crate::format::npy::NpyHeader;
use crate::format::npy::{length_field_size, parse_header};

/// Longest header dict accepted when reading a stream (NumPy writes a few hundred bytes).
const MAX_DICT_BYTES: usize = 1 << 20;

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
    let len_size = length_field_size(&bytes).map_err(|e| invalid(e.to_string()))?;
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
    parse_header(&bytes).map_err(|e| invalid(e.to_string()))
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
    let len = header.data_len().map_err(|e| invalid(e.to_string()))?;
    let wrong_length = |actual: u64| invalid(header.wrong_length(actual).to_string());
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
