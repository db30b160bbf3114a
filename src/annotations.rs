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

use crate::dataset::DatasetError;
use crate::format::documents::DocumentError;
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
}
