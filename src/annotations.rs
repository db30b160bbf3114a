//! Annotation sets (`docs/FORMAT.md`, annotations): reading, publishing and verifying them,
//! in the `signal-dataset` library's format, byte for byte.
//!
//! An annotation set is a dense, per-record overlay on one published snapshot: row `k` annotates
//! source ordinal `k`. It lives entirely under `annotations/`, so publishing one never touches a
//! signal shard, and the only mutable object in a dataset, `annotations/catalog.json`, decides
//! which sets exist.
//!
//! - [`carrier`]: [`AnnotationRecord`] and its carrier record (a record with the row in its
//!   metadata and `__empty__` standing in for "no tensor fields").
//! - [`read`]: catalog pointer → revision (hash-checked) → set roots → annotation objects, every
//!   document exact-key, every carrier checked against the source record at its ordinal.
//! - [`publish`]: single-process publication (objects, set root, catalog swing) and the
//!   distributed form (workers write objects and create-only worker pointers, first pointer
//!   wins; a coordinator checks dense coverage and commits).
//! - [`rows`]: the JSON Lines row format `sds annotate` reads (`.npy` tensor fields included).
//! - [`verify`]: every problem of every set, for `sds verify`.
//!
//! Design decisions:
//! - **The library's bytes, not ours.** Every document, id and object is what the library
//!   writes for the same rows, name, metadata and options, so the two implementations can
//!   publish into one dataset, resume each other's publications, and read each other's sets.
//!   In particular the set root's metadata is exactly the caller's: nothing is added to it.
//! - **A set name is published once.** A publication whose name the catalog already holds with
//!   another root is a collision error ([`AnnotationError::Collision`]), never a replacement.
//! - **One broken set never hides another.** [`read::read_catalog`] returns each set's own
//!   result, so the mount and `sds info` can show the sound sets and report the rest (the
//!   library refuses the whole dataset instead; a mount must stay useful).
//! - **Strict on read.** A set root whose path is not where the layout puts it, whose name differs
//!   from its catalog key, or whose source snapshot is not the dataset's is refused: a reader that
//!   guessed would silently pair annotations with the wrong records.

pub mod carrier;
pub mod publish;
pub mod read;
pub mod rows;
pub mod verify;

pub use carrier::{AnnotationRecord, EMPTY_FIELD};
pub use publish::{
    commit_to_catalog, publish_annotations, publish_set, write_annotation_shard, AnnotationOptions,
    PublishedSet, ShardOutcome,
};
pub use read::{read_catalog, row_counts, AnnotationSet, Catalog, ROW_COUNTS_KEY};
pub use verify::{verify_dataset, verify_sets, Problem};

pub use crate::format::documents::AnnotationStatus;

use crate::arrayrecord;
use crate::budget::BudgetError;
use crate::dataset::DatasetError;
use crate::format::documents::DocumentError;
use crate::format::json::JsonError;
use crate::format::npy::NpyError;
use crate::format::record::RecordError;
use crate::storage::StorageError;

/// Why an annotation operation failed. Every message names the object (and the ordinal where
/// one record is concerned) and the rule or cause.
#[derive(Debug, thiserror::Error)]
pub enum AnnotationError {
    /// The source dataset could not be read (a row, a shard).
    #[error("{0}")]
    Dataset(#[from] DatasetError),
    /// An annotation object or document could not be read or written.
    #[error("{0}")]
    Storage(#[from] StorageError),
    /// An annotation document broke a rule of section 6.
    #[error("{0}")]
    Document(#[from] DocumentError),
    /// An annotation object or carrier record is damaged or disagrees with its source.
    #[error("{object}: {detail}")]
    Corrupt { object: String, detail: String },
    /// Publication refused its inputs (rows, coverage, collisions).
    #[error("annotation publication refused: {0}")]
    Refused(String),
    /// The set name is already published (another root under that name).
    #[error("annotation publication refused: {0}")]
    Collision(String),
    /// An annotation object (or a worker pointer's object) is unreadable, damaged, or disagrees
    /// with its source; the cause keeps the lower layer's error.
    #[error("{object}: {cause}")]
    Object {
        object: String,
        #[source]
        cause: Cause,
    },
    /// An annotation object could not be encoded.
    #[error("annotation publication refused: {object}: {source}")]
    Encode {
        object: String,
        #[source]
        source: arrayrecord::Error,
    },
    /// A row file of `sds annotate` was refused; `at` is the file, and the line when one
    /// line is at fault.
    #[error("{at}: {cause}")]
    Rows {
        at: String,
        #[source]
        cause: Cause,
    },
    /// The source row an annotation row is checked against could not be read.
    #[error("cannot read the source row of record {ordinal}: {source}")]
    SourceRow {
        ordinal: u64,
        #[source]
        source: DatasetError,
    },
    /// The catalog kept changing under us.
    #[error("{object}: compare-and-swap failed {attempts} times in a row (other writers kept changing it); retry later")]
    Contention { object: String, attempts: u32 },
}

impl AnnotationError {
    pub(crate) fn corrupt(object: impl Into<String>, detail: impl Into<String>) -> Self {
        AnnotationError::Corrupt {
            object: object.into(),
            detail: detail.into(),
        }
    }

    pub(crate) fn refused(detail: impl Into<String>) -> Self {
        AnnotationError::Refused(detail.into())
    }

    pub(crate) fn rows(at: impl Into<String>, cause: impl Into<Cause>) -> Self {
        AnnotationError::Rows {
            at: at.into(),
            cause: cause.into(),
        }
    }
}

/// What is wrong inside one annotation object, carrier or row file: a broken rule (the text
/// names it) or the lower layer's error, kept as the source. The message is the cause alone;
/// the [`AnnotationError`] around it names the object or file.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    /// A rule of the carrier, pointer or row format is broken.
    #[error("{0}")]
    Rule(String),
    /// Where inside the object or file the cause was found (a field, a line, a pointer).
    #[error("{context}: {source}")]
    At {
        context: String,
        #[source]
        source: Box<Cause>,
    },
    /// The object could not be read.
    #[error("{0}")]
    Storage(#[from] StorageError),
    /// The ArrayRecord container is unreadable or damaged.
    #[error("{0}")]
    Container(#[from] arrayrecord::Error),
    /// A carrier or row tensor breaks a record rule.
    #[error("{0}")]
    Record(#[from] RecordError),
    /// The source record a pointer or carrier is checked against could not be read.
    #[error("{0}")]
    Dataset(#[from] DatasetError),
    /// The memory budget refused to decode a carrier's chunk.
    #[error("{0} (--cache-size)")]
    Budget(#[from] BudgetError),
    /// A row is not strict JSON.
    #[error("{0}")]
    Json(#[from] JsonError),
    /// A row file is not UTF-8.
    #[error("not UTF-8: {0}")]
    Utf8(#[from] std::str::Utf8Error),
    /// A tensor file named by a row could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A tensor file named by a row is not an NPY file the layout can store.
    #[error("{0}")]
    Npy(#[from] NpyError),
}

impl Cause {
    pub(crate) fn rule(text: impl Into<String>) -> Cause {
        Cause::Rule(text.into())
    }

    /// This cause, found at `context` (prefixed to the message).
    pub(crate) fn at(self, context: impl Into<String>) -> Cause {
        Cause::At {
            context: context.into(),
            source: Box::new(self),
        }
    }
}
