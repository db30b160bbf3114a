//! `--from-npy FILES...`: NumPy `.npy` and `.npz` files, one record per file.
//!
//! A `.npy` file gives one field named after the file (without `.npy`); a `.npz` archive (as
//! `numpy.savez` or `savez_compressed` write it) gives one field per array, named by its key.
//! The record id is the file name without its extension; the record metadata says which file
//! it came from (`source.file`). Axes are named `dim_0`, `dim_1`, ... Arrays must be C order
//! with a dtype of the layout's table ([`super::npy`]).

use std::path::{Path, PathBuf};

use super::npy::{read_header, read_npy_stream, NpyHeader};
use super::{checked, open_input, stem_of, ImportError, RecordSource, Sources};
use crate::format::json::{Object, Value};
use crate::format::record::{Field, Record};

/// The records of `.npy`/`.npz` files, each sized from its array headers (the tensor bytes it
/// will hold, not the file's size: an `.npz` may be compressed).
pub fn sources(files: &[PathBuf]) -> Result<Sources, ImportError> {
    files
        .iter()
        .map(|path| {
            let headers = if is_npz(path) {
                npz_headers(path)?
            } else {
                vec![npy_header(path)?]
            };
            let tensor_bytes = headers
                .iter()
                .map(|h| data_len(h, &path.display().to_string()))
                .try_fold(0u64, |sum, len| {
                    Ok::<_, ImportError>(sum.saturating_add(len?))
                })?;
            let source = ArrayFile {
                path: path.clone(),
                tensor_bytes,
            };
            Ok(Box::new(source) as Box<dyn RecordSource>)
        })
        .collect()
}

fn is_npz(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "npz")
}

fn data_len(header: &NpyHeader, place: &str) -> Result<u64, ImportError> {
    header.data_len().map_err(|e| ImportError::Invalid {
        path: place.to_string(),
        problem: e.to_string(),
    })
}

struct ArrayFile {
    path: PathBuf,
    /// What the headers promise, for shard planning and the summary.
    tensor_bytes: u64,
}

impl RecordSource for ArrayFile {
    fn payload_bytes(&self) -> u64 {
        self.tensor_bytes
    }

    fn load(&self) -> Result<Record, ImportError> {
        let mut record =
            Record::new(stem_of(&self.path)?).with_metadata(source_metadata(&self.path));
        if is_npz(&self.path) {
            for_each_member(&self.path, |name, member, place| {
                let (header, data) = read_npy_stream(member, place, None)?;
                record.fields.insert(name, npy_field(header, data, place)?);
                Ok(())
            })?;
        } else {
            let place = self.path.display().to_string();
            let mut input = open_input(&self.path, None)?;
            let (header, data) = read_npy_stream(&mut input.file, &place, Some(input.len))?;
            let field = npy_field(header, data, &place)?;
            record = record.with_field(stem_of(&self.path)?, field);
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

/// A field from one array's header and data (exactly the bytes the header promises).
fn npy_field(header: NpyHeader, data: Vec<u8>, place: &str) -> Result<Field, ImportError> {
    if header.shape.is_empty() {
        // The record writer would refuse it too; saying so here names the file and the fix.
        return Err(ImportError::Invalid {
            path: place.to_string(),
            problem:
                "a 0-d array: the library cannot represent a 0-d tensor; save it with shape (1,)"
                    .to_string(),
        });
    }
    Field::new(header.dtype, header.shape, data).map_err(|source| ImportError::Record {
        path: place.to_string(),
        source,
    })
}

fn npy_header(path: &Path) -> Result<NpyHeader, ImportError> {
    let mut input = open_input(path, None)?;
    read_header(&mut input.file, &path.display().to_string())
}

/// The headers of an `.npz` archive's arrays, in archive order.
fn npz_headers(path: &Path) -> Result<Vec<NpyHeader>, ImportError> {
    let mut headers = Vec::new();
    for_each_member(path, |_, member, place| {
        headers.push(read_header(member, place)?);
        Ok(())
    })?;
    Ok(headers)
}

/// Calls `visit(array name, member stream, place)` for every `.npy` member of an `.npz`
/// archive (as `numpy.savez` or `savez_compressed` write it), refusing an archive with none.
fn for_each_member(
    path: &Path,
    mut visit: impl FnMut(
        String,
        &mut zip::read::ZipFile<'_, std::fs::File>,
        &str,
    ) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    let input = open_input(path, None)?;
    let bad = |e: zip::result::ZipError| {
        ImportError::invalid(path, format!("not a readable .npz archive: {e}"))
    };
    let mut archive = zip::ZipArchive::new(input.file).map_err(bad)?;
    let mut arrays = 0usize;
    for index in 0..archive.len() {
        let mut member = archive.by_index(index).map_err(bad)?;
        let Some(name) = member.name().strip_suffix(".npy").map(str::to_string) else {
            continue;
        };
        let place = format!("{} (array {name:?})", path.display());
        visit(name, &mut member, &place)?;
        arrays += 1;
    }
    if arrays == 0 {
        return Err(ImportError::invalid(
            path,
            "the archive holds no .npy arrays",
        ));
    }
    Ok(())
}
