//! The dataset layer's one error enum. Every message names the object (and, for record reads,
//! the ordinal) and the rule or cause, so a log line or a refused mount says what to look at.

use crate::arrayrecord;
use crate::format::documents::DocumentError;
use crate::format::record::RecordError;
use crate::storage::StorageError;

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// A control document could not be read from storage.
    #[error("{0}")]
    Storage(#[from] StorageError),
    /// A control document broke a rule of the profile.
    #[error("{0}")]
    Document(#[from] DocumentError),
    /// A control document's size differs from what its reference promises.
    #[error("{object}: size {actual} differs from the {expected} bytes its reference records")]
    SizeMismatch {
        object: String,
        expected: u64,
        actual: u64,
    },
    /// A shard object is unreadable or corrupt; only records stored in it are affected.
    #[error("{object}: {source}")]
    Shard {
        object: String,
        #[source]
        source: arrayrecord::Error,
    },
    /// A record or metadata row failed to decode or broke a record rule.
    #[error("record {ordinal} ({object}): {source}")]
    Record {
        ordinal: u64,
        object: String,
        #[source]
        source: RecordError,
    },
    /// The dataset's documents or shards disagree with each other.
    #[error("{object}: {detail}")]
    Corrupt { object: String, detail: String },
    /// A reference the dataset may not follow here (an absolute one when they are turned off,
    /// one leaving its store on a mount for other users): the same every time, and no defect
    /// of the objects.
    #[error("{object}: {detail}")]
    Refused { object: String, detail: String },
    /// An ordinal past the end of the dataset.
    #[error("ordinal {ordinal} is out of range: the dataset has {record_count} records")]
    OutOfRange { ordinal: u64, record_count: u64 },
    /// A chunk or page the memory budget refused: larger than the whole budget, no room in
    /// time, or its requester interrupted while waiting.
    #[error("{object}: {source} (--cache-size)")]
    Budget {
        object: String,
        #[source]
        source: crate::budget::BudgetError,
    },
    /// Publication refused its inputs.
    #[error("publication refused: {0}")]
    Publication(String),
    /// Local I/O while writing (temporary files for shards).
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl DatasetError {
    pub(crate) fn corrupt(object: impl Into<String>, detail: impl Into<String>) -> DatasetError {
        DatasetError::Corrupt {
            object: object.into(),
            detail: detail.into(),
        }
    }

    /// The same failure again, when it is a defect of what was read (it would fail the same
    /// way on every read: a document rule, a size mismatch, a missing object or one its owner
    /// may not read, a unit larger than the whole budget), rather than a storage fault or a
    /// full budget that may pass. Lets an immutable object's defect be remembered.
    pub(crate) fn replay(&self) -> Option<DatasetError> {
        Some(match self {
            DatasetError::Document(e) => DatasetError::Document(e.clone()),
            DatasetError::SizeMismatch {
                object,
                expected,
                actual,
            } => DatasetError::SizeMismatch {
                object: object.clone(),
                expected: *expected,
                actual: *actual,
            },
            DatasetError::Corrupt { object, detail } => DatasetError::corrupt(object, detail),
            DatasetError::Refused { object, detail } => DatasetError::Refused {
                object: object.clone(),
                detail: detail.clone(),
            },
            DatasetError::Storage(StorageError::NotFound { object }) => {
                DatasetError::Storage(StorageError::NotFound {
                    object: object.clone(),
                })
            }
            DatasetError::Storage(StorageError::Unreadable {
                object,
                reader,
                detail,
            }) => DatasetError::Storage(StorageError::Unreadable {
                object: object.clone(),
                reader: reader.clone(),
                detail: detail.clone(),
            }),
            DatasetError::Budget {
                object,
                source: source @ crate::budget::BudgetError::TooLarge { .. },
            } => DatasetError::Budget {
                object: object.clone(),
                source: source.clone(),
            },
            _ => return None,
        })
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> DatasetError {
        DatasetError::Io {
            context: context.into(),
            source,
        }
    }
}
