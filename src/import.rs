//! Importers: turning files people already have into records, and publishing them as one
//! dataset (`sds create`).
//!
//! Why a two-phase design (plan, then load): every input is first turned into a list of
//! [`RecordSource`]s, each of which knows its payload size from headers and control files alone
//! (`record.json`, `.sigmf-meta`, NPY headers, file sizes) without reading sample data. Shard
//! boundaries are then fixed from those sizes before anything is written, so they depend only on
//! the inputs and the options, never on `--jobs` or timing. Loading, encoding and compression of
//! each shard then run on worker threads ([`build`]), and shards are published in shard order:
//! the same inputs and ids give a byte-identical dataset whatever the parallelism.
//!
//! - [`dir`]: a directory laid out like a mounted record set (`records/<n>/record.json` plus
//!   `fields/**.raw|.npy`), what `cp -r MOUNT/records DIR/` produces; round-trips exactly.
//! - [`sigmf`]: SigMF recordings (`.sigmf-meta` + `.sigmf-data`), whole or in segments.
//! - [`raw`]: headerless sample files with a datatype and a sample rate given on the command line.
//! - [`arrays`]: `.npy` and `.npz` files, one record per file, one field per array.
//! - [`npy`]: the NPY header parser the others share.
//! - [`samples`]: SigMF sample datatypes and their lossless conversion.
//! - `open`: the rules on which files are read at all (regular files only; in a `--from-dir`
//!   tree, symbolic links only to files inside it).
//! - [`build`]: shard planning, parallel shard writing, content-derived ids and publication.
//!
//! Layering: `import` sits beside `fs` above `dataset` and imports nothing from `fs`: the
//! mount's field-name encoding, which `--from-dir` must reverse exactly, and the NPY codec are
//! pure encodings in [`crate::format`] that both use.

mod allowance;
pub mod arrays;
pub mod build;
pub mod dir;
mod listing;
pub mod npy;
mod open;
pub mod raw;
pub mod samples;
pub mod sigmf;

use std::path::Path;

use crate::dataset::DatasetError;
use crate::format::record::{Record, RecordError, RecordMeta};

pub use build::{
    check_options, create, open_output, write_sources_shard, CreateOptions, CreateSummary, Progress,
};

/// Why an import failed. Every message names the file (or option) and the problem.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A file's content breaks a rule of its format or disagrees with its description.
    #[error("{path}: {problem}")]
    Invalid { path: String, problem: String },
    /// The record built from a file breaks a record rule (section 2).
    #[error("{path}: {source}")]
    Record {
        path: String,
        #[source]
        source: RecordError,
    },
    /// A `.sigmf-meta` file cannot be imported.
    #[error("{path}: {source}")]
    Meta {
        path: String,
        #[source]
        source: sigmf::MetaError,
    },
    /// A command-line option is unusable.
    #[error("{0}")]
    Option(String),
    /// `--datatype` names a sample datatype that cannot be imported.
    #[error("{0}")]
    Datatype(#[from] samples::DatatypeError),
    /// Writing shards or publishing failed.
    #[error("{0}")]
    Dataset(#[from] DatasetError),
}

impl ImportError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> ImportError {
        ImportError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    pub(crate) fn invalid(path: &Path, problem: impl Into<String>) -> ImportError {
        ImportError::Invalid {
            path: path.display().to_string(),
            problem: problem.into(),
        }
    }
}

/// One record to import: sized from headers at planning time, loaded on a worker thread.
pub trait RecordSource: Send + Sync {
    /// Bytes of tensor data the record will hold (used to plan shard boundaries).
    fn payload_bytes(&self) -> u64;
    /// Reads the record's files and builds the record.
    fn load(&self) -> Result<Record, ImportError>;
}

/// The records of an import, in ordinal order.
pub type Sources = Vec<Box<dyn RecordSource>>;

pub(crate) use open::{open_input, read_input};

/// The file's name without its last extension, for record ids.
pub(crate) fn stem_of(path: &Path) -> Result<String, ImportError> {
    path.file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| ImportError::invalid(path, "file name is not valid UTF-8 or is empty"))
}

/// Checks a built record against the section 2 rules, naming the file it came from.
pub(crate) fn checked(record: Record, path: &Path) -> Result<Record, ImportError> {
    checked_meta(&record.meta(), path)?;
    Ok(record)
}

/// Checks a record's metadata against the section 2 rules, naming the file it came from.
pub(crate) fn checked_meta(meta: &RecordMeta, path: &Path) -> Result<(), ImportError> {
    let limits = crate::format::limits::RecordLimits::default();
    crate::format::record::validate_for_write(meta, &limits).map_err(|source| ImportError::Record {
        path: path.display().to_string(),
        source,
    })
}
