//! The storage layer's error enums: [`StorageError`] for requests, [`LocationError`] for
//! location texts.
//!
//! Every variant carries `object`, the backend's human-readable location of the object involved
//! (see [`ObjectStore::describe`](super::ObjectStore::describe)), so a message printed far from
//! where it was raised still says which object failed. Callers branch on [`StorageError::kind`]
//! rather than on variants when all they need to know is "absent", "someone else won", "worth
//! retrying" or "give up": remote backends added later map their own failures onto the same
//! four kinds.

use std::io;

/// What a caller can do about a [`StorageError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The object does not exist.
    NotFound,
    /// Another writer got there first: a create-only collision or a failed compare-and-swap
    /// precondition. Re-reading may help; blind retrying will not.
    Conflict,
    /// A failure that may succeed if retried unchanged (interrupted call, timeout, throttling).
    Transient,
    /// Retrying unchanged will fail the same way.
    Permanent,
}

/// Why a text names no store location, or no object in one (see [`super::Location`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    #[error("unknown URL scheme {0:?} (use a directory path, a file:// URL, s3://bucket/prefix or gs://bucket/prefix)")]
    UnknownScheme(String),
    #[error("not a URL (expected s3://bucket/prefix or gs://bucket/prefix)")]
    NotAUrl,
    #[error("unsupported scheme {0:?} (expected s3 or gs)")]
    UnsupportedScheme(String),
    #[error("query strings and fragments are not part of a dataset location")]
    QueryOrFragment,
    #[error("the bucket name is missing")]
    NoBucket,
    #[error("invalid bucket name {0:?}")]
    InvalidBucket(String),
    #[error("invalid key prefix {0:?}")]
    InvalidPrefix(String),
    #[error("a file:// URL needs an absolute path (file:///data/ds)")]
    RelativeFileUrl,
    #[error("invalid %-escape in URL")]
    InvalidEscape,
    #[error("the location names a bucket, not an object")]
    BucketNotObject,
    #[error("the location names no file")]
    NoFile,
    /// The scheme (`s3`, `gs`) of an object-store location where a local directory is needed.
    #[error("{0}:// is an object-store location, not a local directory")]
    NotLocal(&'static str),
}

/// A storage failure, always naming the object it concerns.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{object}: not found")]
    NotFound { object: String },

    #[error(
        "{object}: already exists with different content (create-only objects are never replaced)"
    )]
    Collision { object: String },

    #[error("{object}: changed since it was read (compare-and-swap precondition failed)")]
    PreconditionFailed { object: String },

    #[error("{object}: generation {actual} found where generation {expected} was required")]
    GenerationMismatch {
        object: String,
        expected: u64,
        actual: u64,
    },

    #[error("{object}: this storage has no numeric object generations, so a generation-pinned reference cannot be honoured")]
    GenerationsUnsupported { object: String },

    #[error("{object}: refused because a symbolic link lies on its path (access is confined below the storage root)")]
    SymlinkRefused { object: String },

    /// The store's reads are confined to what another user could read (the owner of a
    /// dataset's `root.json`), and that user could not read this object. Says nothing about
    /// the object beyond what that user could learn themselves.
    #[error("{object}: refused: {reader} who owns root.json cannot read it ({detail})")]
    Unreadable {
        object: String,
        reader: String,
        detail: String,
    },

    #[error("{object}: outside the storage root {root}")]
    OutsideRoot { object: String, root: String },

    #[error("{object}: {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        object: String,
        size: u64,
        limit: u64,
    },

    #[error("{object}: byte range {start}..{end} is not within the object's {size} bytes")]
    OutOfRange {
        object: String,
        start: u64,
        end: u64,
        size: u64,
    },

    #[error("{object}: {reason}")]
    Invalid { object: String, reason: String },

    // The source is repeated in the message on purpose: most callers print only the top-level
    // message (CLI lines, FUSE logs), and "permission denied" without it is useless.
    #[error("{object}: {source}")]
    Io {
        object: String,
        #[source]
        source: io::Error,
    },
}

impl StorageError {
    /// An I/O failure concerning `object`.
    pub fn io(object: impl Into<String>, source: io::Error) -> StorageError {
        StorageError::Io {
            object: object.into(),
            source,
        }
    }

    /// A refusal that is neither I/O nor one of the specific cases.
    pub fn invalid(object: impl Into<String>, reason: impl Into<String>) -> StorageError {
        StorageError::Invalid {
            object: object.into(),
            reason: reason.into(),
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }

    /// The object this error concerns, as the backend described it.
    pub fn object(&self) -> &str {
        match self {
            StorageError::NotFound { object }
            | StorageError::Collision { object }
            | StorageError::PreconditionFailed { object }
            | StorageError::GenerationMismatch { object, .. }
            | StorageError::GenerationsUnsupported { object }
            | StorageError::SymlinkRefused { object }
            | StorageError::Unreadable { object, .. }
            | StorageError::OutsideRoot { object, .. }
            | StorageError::TooLarge { object, .. }
            | StorageError::OutOfRange { object, .. }
            | StorageError::Invalid { object, .. }
            | StorageError::Io { object, .. } => object,
        }
    }

    /// What a caller can do about this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            StorageError::NotFound { .. } => ErrorKind::NotFound,
            StorageError::Collision { .. } | StorageError::PreconditionFailed { .. } => {
                ErrorKind::Conflict
            }
            StorageError::Io { source, .. } => io_kind(source),
            _ => ErrorKind::Permanent,
        }
    }
}

/// Classifies an I/O error. Only failures that plausibly clear by themselves count as
/// transient; a full disk or a permission problem needs someone to act first.
fn io_kind(err: &io::Error) -> ErrorKind {
    match err.kind() {
        io::ErrorKind::NotFound => ErrorKind::NotFound,
        io::ErrorKind::Interrupted
        | io::ErrorKind::WouldBlock
        | io::ErrorKind::TimedOut
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::ConnectionRefused
        | io::ErrorKind::BrokenPipe => ErrorKind::Transient,
        _ => ErrorKind::Permanent,
    }
}

/// Lets byte-source style consumers (the ArrayRecord reader) speak `io::Result` while keeping
/// the storage error, with its object name, as the inner error.
impl From<StorageError> for io::Error {
    fn from(err: StorageError) -> io::Error {
        let kind = match &err {
            StorageError::NotFound { .. } => io::ErrorKind::NotFound,
            StorageError::OutOfRange { .. } => io::ErrorKind::UnexpectedEof,
            StorageError::SymlinkRefused { .. }
            | StorageError::Unreadable { .. }
            | StorageError::OutsideRoot { .. } => io::ErrorKind::PermissionDenied,
            StorageError::Invalid { .. } | StorageError::GenerationsUnsupported { .. } => {
                io::ErrorKind::InvalidInput
            }
            StorageError::Io { source, .. } => source.kind(),
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_names_the_object() {
        let object = "/data/ds/root.json".to_string();
        let errors = [
            StorageError::NotFound {
                object: object.clone(),
            },
            StorageError::GenerationMismatch {
                object: object.clone(),
                expected: 1,
                actual: 2,
            },
            StorageError::TooLarge {
                object: object.clone(),
                size: 10,
                limit: 5,
            },
            StorageError::io(object.clone(), io::Error::other("disk on fire")),
        ];
        for err in errors {
            assert!(err.to_string().starts_with(&object), "{err}");
            assert_eq!(err.object(), object);
        }
    }

    #[test]
    fn kinds_separate_absent_conflict_transient_permanent() {
        let o = || "x".to_string();
        assert!(StorageError::NotFound { object: o() }.is_not_found());
        assert_eq!(
            StorageError::Collision { object: o() }.kind(),
            ErrorKind::Conflict
        );
        assert_eq!(
            StorageError::PreconditionFailed { object: o() }.kind(),
            ErrorKind::Conflict
        );
        let timed_out = StorageError::io(o(), io::Error::from(io::ErrorKind::TimedOut));
        assert_eq!(timed_out.kind(), ErrorKind::Transient);
        let denied = StorageError::io(o(), io::Error::from(io::ErrorKind::PermissionDenied));
        assert_eq!(denied.kind(), ErrorKind::Permanent);
        assert!(!denied.is_not_found());
    }

    #[test]
    fn io_conversion_keeps_kind_and_message() {
        let err: io::Error = StorageError::OutOfRange {
            object: "obj".into(),
            start: 5,
            end: 9,
            size: 6,
        }
        .into();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert!(err.to_string().contains("obj"));
        let err: io::Error = StorageError::NotFound {
            object: "obj".into(),
        }
        .into();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
