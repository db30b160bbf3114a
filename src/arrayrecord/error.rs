//! The error type of the ArrayRecord layer.
//!
//! Messages are meant for operators: they name the file (the name given when it was opened),
//! the byte offset of the chunk involved and the rule that was broken. Low-level decoding
//! code does not know file names, so it reports a [`Fault`] which the reader turns into an
//! [`Error`] once it knows where it was looking.

use std::io;

/// Result alias of this layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong reading or writing an ArrayRecord file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The byte source or sink failed.
    #[error("{name}: I/O error at offset {offset}: {source}")]
    Io {
        name: String,
        offset: u64,
        #[source]
        source: io::Error,
    },
    /// The file breaks a rule of the format (bad hash, impossible size, ...).
    #[error("{name}: chunk at offset {offset}: {detail}")]
    Corrupt {
        name: String,
        offset: u64,
        detail: String,
    },
    /// Valid Riegeli that this implementation does not handle (e.g. transposed chunks).
    #[error("{name}: chunk at offset {offset}: unsupported: {detail}")]
    Unsupported {
        name: String,
        offset: u64,
        detail: String,
    },
    /// A record index at or beyond the number of records.
    #[error("{name}: record {index} out of range (the file has {len} records)")]
    IndexOutOfRange { name: String, index: u64, len: u64 },
    /// A writer option string that the reference would reject (or that we cannot honour).
    #[error("invalid ArrayRecord writer options {options:?}: {detail}")]
    InvalidOptions { options: String, detail: String },
    /// A size beyond a configured limit (protects memory against hostile files).
    #[error("{name}: chunk at offset {offset}: limit exceeded: {detail}")]
    Limit {
        name: String,
        offset: u64,
        detail: String,
    },
}

impl Error {
    /// Whether this error says the file content is corrupt (as opposed to I/O, limits, ...).
    pub fn is_corrupt(&self) -> bool {
        matches!(self, Error::Corrupt { .. })
    }
}

/// A location-free error from the decoding internals; see [`Fault::at`].
#[derive(Debug)]
pub(crate) enum Fault {
    Corrupt(String),
    Unsupported(String),
    Limit(String),
    Io(io::Error),
}

impl Fault {
    /// Attaches the file name and the offset of the chunk being decoded.
    pub(crate) fn at(self, name: &str, offset: u64) -> Error {
        let name = name.to_owned();
        match self {
            Fault::Corrupt(detail) => Error::Corrupt {
                name,
                offset,
                detail,
            },
            Fault::Unsupported(detail) => Error::Unsupported {
                name,
                offset,
                detail,
            },
            Fault::Limit(detail) => Error::Limit {
                name,
                offset,
                detail,
            },
            Fault::Io(source) => Error::Io {
                name,
                offset,
                source,
            },
        }
    }
}

impl From<io::Error> for Fault {
    fn from(e: io::Error) -> Self {
        Fault::Io(e)
    }
}

/// Shorthand for a corruption fault.
pub(crate) fn corrupt(detail: impl Into<String>) -> Fault {
    Fault::Corrupt(detail.into())
}
