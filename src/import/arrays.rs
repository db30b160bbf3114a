//! `--from-npy FILES...`: NumPy `.npy` and `.npz` files, one record per file.
//!
//! A `.npy` file gives one field named after the file (without `.npy`); a `.npz` archive (as
//! `numpy.savez` or `savez_compressed` write it) gives one field per array, named by its key.
//! The record id is the file name without its extension; the record metadata says which file
//! it came from (`source.file`). Axes are named `dim_0`, `dim_1`, ... Arrays must be C order
//! with a dtype of the layout's table ([`super::npy`]).

use std::io::Read;
use std::path::{Path, PathBuf};

use super::npy::parse_header;
use super::{checked, read_file, stem_of, ImportError, RecordSource, Sources};
use crate::format::json::{Object, Value};
use crate::format::record::{Field, Record};

/// The records of `.npy`/`.npz` files.
pub fn sources(files: &[PathBuf]) -> Result<Sources, ImportError> {
    files
        .iter()
        .map(|path| {
            let size = std::fs::metadata(path)
                .map_err(|e| ImportError::io(path, e))?
                .len();
            let source = ArrayFile {
                path: path.clone(),
                size,
            };
            Ok(Box::new(source) as Box<dyn RecordSource>)
        })
        .collect()
}

struct ArrayFile {
    path: PathBuf,
    size: u64,
}

impl RecordSource for ArrayFile {
    fn payload_bytes(&self) -> u64 {
        self.size
    }

    fn load(&self) -> Result<Record, ImportError> {
        let arrays = if self.path.extension().is_some_and(|e| e == "npz") {
            npz_arrays(&self.path)?
        } else {
            vec![(stem_of(&self.path)?, read_file(&self.path)?)]
        };
        let mut record =
            Record::new(stem_of(&self.path)?).with_metadata(source_metadata(&self.path));
        for (name, bytes) in arrays {
            let place = if self.path.extension().is_some_and(|e| e == "npz") {
                format!("{} (array {name:?})", self.path.display())
            } else {
                self.path.display().to_string()
            };
            record = record.with_field(name, npy_field(&bytes, &place)?);
        }
        checked(record, &self.path)
    }
}

fn source_metadata(path: &Path) -> Object {
    let file = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut source = Object::new();
    source.insert("file".into(), Value::from(file));
    let mut metadata = Object::new();
    metadata.insert("source".into(), Value::Object(source));
    metadata
}

/// A field from the bytes of one `.npy` file.
fn npy_field(bytes: &[u8], place: &str) -> Result<Field, ImportError> {
    let invalid = |problem: String| ImportError::Invalid {
        path: place.to_string(),
        problem,
    };
    let header = parse_header(bytes).map_err(invalid)?;
    if header.shape.is_empty() {
        // The record writer would refuse it too; saying so here names the file and the fix.
        return Err(invalid(
            "a 0-d array: the library cannot represent a 0-d tensor; save it with shape (1,)"
                .to_string(),
        ));
    }
    let data = &bytes[header.data_start.min(bytes.len())..];
    let expected = header.data_len().unwrap_or(u64::MAX);
    if data.len() as u64 != expected {
        return Err(invalid(format!(
            "{} data bytes after the NPY header, shape {:?} of {} needs {expected}",
            data.len(),
            header.shape,
            header.dtype
        )));
    }
    Field::new(header.dtype, header.shape, data.to_vec()).map_err(|source| ImportError::Record {
        path: place.to_string(),
        source,
    })
}

/// The `.npy` members of an `.npz` archive, by array name.
fn npz_arrays(path: &Path) -> Result<Vec<(String, Vec<u8>)>, ImportError> {
    let file = std::fs::File::open(path).map_err(|e| ImportError::io(path, e))?;
    let bad = |e: zip::result::ZipError| {
        ImportError::invalid(path, format!("not a readable .npz archive: {e}"))
    };
    let mut archive = zip::ZipArchive::new(file).map_err(bad)?;
    let mut arrays = Vec::new();
    for index in 0..archive.len() {
        let mut member = archive.by_index(index).map_err(bad)?;
        let Some(name) = member.name().strip_suffix(".npy").map(str::to_string) else {
            continue;
        };
        let mut bytes = Vec::new();
        member
            .read_to_end(&mut bytes)
            .map_err(|e| ImportError::invalid(path, format!("array {name:?}: {e}")))?;
        arrays.push((name, bytes));
    }
    if arrays.is_empty() {
        return Err(ImportError::invalid(
            path,
            "the archive holds no .npy arrays",
        ));
    }
    Ok(arrays)
}
