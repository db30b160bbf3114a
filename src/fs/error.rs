//! The `fs` layer's one error, and the errno each cause answers (`docs/MOUNT.md`, "Errors a
//! user sees").
//!
//! A failure of storage or data keeps the error that caused it as its source (a
//! [`StorageError`], a [`DatasetError`], a budget refusal), so the FUSE adapter can pick the
//! errno from the cause rather than from a message, and log the whole chain once. The errno is
//! found by walking the source chain to its first cause with an errno of its own
//! ([`ToErrno`]): a storage error anywhere below (also inside an `io::Error`, the way the
//! ArrayRecord reader carries it) decides; a chain without one is EIO.
//!
//! Which errno, and why:
//! - ESTALE: an object changed under the generation pin its reference records. The bytes the
//!   mount would serve are not the ones the dataset names; reading again will not help.
//! - ETIMEDOUT: storage did not answer in time (after the retries of the storage layer).
//! - EACCES: a reference or path refused by confinement (a symbolic link on the path, outside
//!   the storage root, not readable by the owner of `root.json`, or a reference leaving the
//!   dataset's store on a mount for other users), or storage denied access.
//! - EINTR: the requester was interrupted while the request waited for memory.
//! - EIO: everything else, a corrupt or truncated object and a missing one included. An object
//!   the dataset names but storage lacks is a defect of the dataset, not an absent file of the
//!   mount (whose tree comes from the metadata and still lists the file), so not ENOENT.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::sync::Arc;

use crate::budget::BudgetError;
use crate::dataset::DatasetError;
use crate::interrupt::Interrupted;
use crate::storage::StorageError;

/// The error a failure keeps as its cause; shared so a failure kept for later callers (a
/// background build's) can be handed to each.
pub type Source = Arc<dyn StdError + Send + Sync + 'static>;

/// The errno a cause answers.
pub trait ToErrno {
    fn to_errno(&self) -> i32;
}

impl ToErrno for StorageError {
    fn to_errno(&self) -> i32 {
        match self {
            StorageError::GenerationMismatch { .. } | StorageError::PreconditionFailed { .. } => {
                libc::ESTALE
            }
            StorageError::SymlinkRefused { .. }
            | StorageError::Unreadable { .. }
            | StorageError::OutsideRoot { .. } => libc::EACCES,
            StorageError::Io { source, .. } => io_errno(source).unwrap_or(libc::EIO),
            _ => libc::EIO,
        }
    }
}

/// The errno of an I/O error of a kind that has one other than EIO.
fn io_errno(err: &io::Error) -> Option<i32> {
    match err.kind() {
        io::ErrorKind::TimedOut => Some(libc::ETIMEDOUT),
        io::ErrorKind::PermissionDenied => Some(libc::EACCES),
        _ => None,
    }
}

/// The errno of the first cause in `err`'s chain that has one of its own, if any.
fn chain_errno(err: &(dyn StdError + 'static)) -> Option<i32> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(storage) = e.downcast_ref::<StorageError>() {
            return Some(storage.to_errno());
        }
        if let Some(DatasetError::Refused { .. }) = e.downcast_ref::<DatasetError>() {
            return Some(libc::EACCES);
        }
        if let Some(BudgetError::Interrupted { .. }) = e.downcast_ref::<BudgetError>() {
            return Some(libc::EINTR);
        }
        if let Some(io) = e.downcast_ref::<io::Error>() {
            // An `io::Error`'s `source()` skips the error it wraps: look at that one first.
            if let Some(errno) = io.get_ref().and_then(|inner| chain_errno(inner)) {
                return Some(errno);
            }
            if let Some(errno) = io_errno(io) {
                return Some(errno);
            }
        }
        current = e.source();
    }
    None
}

/// Why an operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FsError {
    #[error("no such entry")]
    NotFound,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("not a symbolic link")]
    NotLink,
    /// The requester has a signal pending (see [`crate::interrupt`]): EINTR.
    #[error(transparent)]
    Interrupted(#[from] Interrupted),
    /// Storage or data failed; the errno comes from the cause ([`Failure::errno`]).
    #[error(transparent)]
    Failed(#[from] Failure),
}

/// A failure of storage or data: what it concerns (the record, a detail) and its cause.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The record concerned, unless the source names it already.
    record: Option<u64>,
    /// What was being done or what is wrong, when the source does not say it.
    detail: Option<String>,
    source: Option<Source>,
}

impl Failure {
    /// The errno this failure answers (see the module documentation).
    pub fn errno(&self) -> i32 {
        self.source
            .as_deref()
            .and_then(|source| chain_errno(source as &(dyn StdError + 'static)))
            .unwrap_or(libc::EIO)
    }

    /// The message followed by every cause below the source that the messages above do not
    /// already include: what a log line shows.
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut current = self.source.as_deref().and_then(|s| s.source());
        while let Some(e) = current {
            let message = e.to_string();
            if !text.contains(&message) {
                text.push_str(": caused by: ");
                text.push_str(&message);
            }
            current = e.source();
        }
        text
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::with_capacity(3);
        parts.extend(self.record.map(|ordinal| format!("record {ordinal}")));
        parts.extend(self.detail.clone());
        parts.extend(self.source.as_ref().map(|s| s.to_string()));
        if parts.is_empty() {
            parts.push("failed".into());
        }
        f.write_str(&parts.join(": "))
    }
}

impl StdError for Failure {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static))
    }
}

/// The ordinal `source` names in its own message, if it names one.
fn record_named(source: &(dyn StdError + 'static)) -> Option<u64> {
    if let Some(DatasetError::Record { ordinal, .. }) = source.downcast_ref::<DatasetError>() {
        return Some(*ordinal);
    }
    match source.downcast_ref::<FsError>() {
        Some(FsError::Failed(failure)) => failure.record,
        _ => source.downcast_ref::<Failure>().and_then(|f| f.record),
    }
}

impl FsError {
    /// A failure found inside `fs`, with no cause below it (EIO).
    pub fn failed(detail: impl Into<String>) -> FsError {
        FsError::Failed(Failure {
            record: None,
            detail: Some(detail.into()),
            source: None,
        })
    }

    /// A failure of record `ordinal`, found inside `fs` (EIO).
    pub fn record(ordinal: u64, detail: impl Into<String>) -> FsError {
        FsError::Failed(Failure {
            record: Some(ordinal),
            detail: Some(detail.into()),
            source: None,
        })
    }

    /// Record `ordinal` failed because of `source`.
    pub fn in_record(ordinal: u64, source: impl StdError + Send + Sync + 'static) -> FsError {
        FsError::caused(Some(ordinal), None, Arc::new(source))
    }

    /// Record `ordinal` failed at `detail` (a field, a step) because of `source`.
    pub fn in_record_at(
        ordinal: u64,
        detail: impl Into<String>,
        source: impl StdError + Send + Sync + 'static,
    ) -> FsError {
        FsError::caused(Some(ordinal), Some(detail.into()), Arc::new(source))
    }

    /// `detail` failed because of `source`.
    pub fn at(detail: impl Into<String>, source: impl StdError + Send + Sync + 'static) -> FsError {
        FsError::caused(None, Some(detail.into()), Arc::new(source))
    }

    fn caused(record: Option<u64>, detail: Option<String>, source: Source) -> FsError {
        // An interruption stays one, whatever it interrupted.
        if let Some(FsError::Interrupted(i)) = source.downcast_ref::<FsError>() {
            return FsError::Interrupted(*i);
        }
        let named = record_named(source.as_ref() as &(dyn StdError + 'static));
        FsError::Failed(Failure {
            record: record.filter(|ordinal| named != Some(*ordinal)),
            detail,
            source: Some(source),
        })
    }
}

impl From<DatasetError> for FsError {
    fn from(e: DatasetError) -> Self {
        FsError::caused(None, None, Arc::new(e))
    }
}

impl From<StorageError> for FsError {
    fn from(e: StorageError) -> Self {
        FsError::caused(None, None, Arc::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno(error: FsError) -> i32 {
        match error {
            FsError::Failed(failure) => failure.errno(),
            other => panic!("not a failure: {other:?}"),
        }
    }

    fn object() -> String {
        "/data/ds/objects/data/ab/cd.array_record".into()
    }

    /// The way the ArrayRecord reader carries a storage error: inside an `io::Error`, inside
    /// a shard error, inside a dataset error.
    fn through_shard(storage: StorageError) -> DatasetError {
        DatasetError::Shard {
            object: object(),
            source: crate::arrayrecord::Error::Io {
                name: object(),
                offset: 4096,
                source: io::Error::from(storage),
            },
        }
    }

    #[test]
    fn each_storage_cause_answers_its_errno_through_every_layer() {
        let cases: [(StorageError, i32); 7] = [
            (
                StorageError::GenerationMismatch {
                    object: object(),
                    expected: 7,
                    actual: 8,
                },
                libc::ESTALE,
            ),
            (
                StorageError::io(object(), io::Error::from(io::ErrorKind::TimedOut)),
                libc::ETIMEDOUT,
            ),
            (
                StorageError::SymlinkRefused { object: object() },
                libc::EACCES,
            ),
            (
                StorageError::OutsideRoot {
                    object: object(),
                    root: "/data/ds".into(),
                },
                libc::EACCES,
            ),
            (
                StorageError::Unreadable {
                    object: object(),
                    reader: "alice".into(),
                    detail: "mode 0600".into(),
                },
                libc::EACCES,
            ),
            (StorageError::NotFound { object: object() }, libc::EIO),
            (
                StorageError::io(object(), io::Error::from(io::ErrorKind::ConnectionReset)),
                libc::EIO,
            ),
        ];
        for (storage, want) in cases {
            let shown = storage.to_string();
            let direct = errno(FsError::from(DatasetError::Storage(storage)));
            assert_eq!(direct, want, "{shown}");
        }
        let stale = StorageError::GenerationMismatch {
            object: object(),
            expected: 7,
            actual: 8,
        };
        let failure = FsError::in_record(5, through_shard(stale));
        assert_eq!(errno(failure.clone()), libc::ESTALE);
        let timed_out = StorageError::io(object(), io::Error::from(io::ErrorKind::TimedOut));
        assert_eq!(
            errno(FsError::in_record(5, through_shard(timed_out))),
            libc::ETIMEDOUT
        );
        // The log line names the record, the object and the cause once each.
        let FsError::Failed(failure) = failure else {
            unreachable!()
        };
        let line = failure.chain();
        assert!(line.starts_with("record 5: "), "{line}");
        assert_eq!(line.matches("generation 8 found").count(), 1, "{line}");
        assert!(line.contains(&object()), "{line}");
    }

    #[test]
    fn a_refused_reference_is_eacces() {
        let refused = DatasetError::Refused {
            object: "s3://bucket/src/objects/data/x".into(),
            detail: "cross-store reference refused".into(),
        };
        assert_eq!(errno(FsError::in_record(0, refused)), libc::EACCES);
    }

    #[test]
    fn a_corrupt_chunk_or_a_failure_without_a_cause_is_eio() {
        let corrupt = DatasetError::Shard {
            object: object(),
            source: crate::arrayrecord::Error::Corrupt {
                name: object(),
                offset: 0,
                detail: "chunk hash mismatch".into(),
            },
        };
        assert_eq!(errno(FsError::in_record(2, corrupt)), libc::EIO);
        assert_eq!(errno(FsError::record(2, "no data")), libc::EIO);
        assert_eq!(errno(FsError::failed("no data")), libc::EIO);
    }

    #[test]
    fn a_record_named_by_the_source_is_not_named_twice() {
        let source = DatasetError::Corrupt {
            object: object(),
            detail: "bad row".into(),
        };
        let named = FsError::in_record(3, source).to_string();
        assert_eq!(named, format!("record 3: {}: bad row", object()));
        let inner = FsError::record(3, "payload shorter than its header");
        let outer = FsError::in_record(3, inner).to_string();
        assert_eq!(outer, "record 3: payload shorter than its header");
        let other = FsError::in_record(4, FsError::record(3, "x")).to_string();
        assert_eq!(other, "record 4: record 3: x");
    }

    #[test]
    fn an_interruption_below_stays_an_interruption() {
        let budget = BudgetError::Interrupted { what: "memory" };
        assert_eq!(errno(FsError::in_record(1, budget)), libc::EINTR);
    }
}
