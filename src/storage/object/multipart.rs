//! Create-only uploads of large files in parts, with bounded memory, on S3 and GCS.
//!
//! # Why a temporary key and a server-side copy
//!
//! S3 honours `If-None-Match: *` on `CompleteMultipartUpload`, which would make a multipart
//! upload create-only by itself, but `object_store` 0.14.2 does not let a caller ask for it
//! (nor for a generation precondition on GCS's XML-API multipart upload):
//! `PutMultipartOptions` has no mode, and `MultipartStore::complete_multipart` always
//! completes as an overwrite. Checking for the
//! target first and then overwriting is not sound (two writers can both find it absent, and
//! the second silently replaces the first). So, on both services:
//!
//! 1. if the target exists, its bytes are compared with the file (streamed) and the answer is
//!    [`AlreadyIdentical`](CreateOutcome::AlreadyIdentical) or a collision, with no upload;
//! 2. the file is uploaded in parts to a fresh temporary key `.sds-uploads/<path>.<nonce>`
//!    under the same prefix (unique per attempt, so overwriting it is harmless);
//! 3. the temporary object is copied server-side to the target with `copy_opts` in
//!    [`CopyMode::Create`]: on S3 (with `aws_copy_if_not_exists=multipart`) an
//!    `UploadPartCopy` completed with `If-None-Match: *`, on GCS a copy (`PUT` with
//!    `x-goog-copy-source`) conditioned on `x-goog-if-generation-match: 0`; both services apply
//!    it atomically. A target that appeared meanwhile is compared as in step 1;
//! 4. the temporary object is deleted (best effort; a failure is logged).
//!
//! Readers never see a partial target: it appears only when step 3's completion succeeds, whole.
//! A writer killed between steps 2 and 4 leaves an unreferenced object under `.sds-uploads/`
//! (never reached by following references; a bucket lifecycle rule can expire the prefix; on
//! a versioned GCS bucket the deleted temporary object also stays as a noncurrent generation
//! until such a rule removes it). The cost is one server-side copy, no extra client bandwidth;
//! S3's `UploadPartCopy` caps a single copy at 5 GiB, the same limit as a single PUT.
//!
//! # Memory and retries
//!
//! At most [`UPLOADERS`] parts are in memory at once, each read from the file with a
//! positional read when its turn comes. Every part upload, the completion and the copy are
//! retried under the store's [`RetryPolicy`](super::RetryPolicy): re-uploading a part number
//! replaces it, completing an already-completed upload succeeds, and a repeated create-only
//! copy finds the target and compares it. Starting the upload is retried too; a start whose
//! response was lost leaves an orphaned, empty upload (aborted uploads cost nothing).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use bytes::Bytes;
use object_store::multipart::PartId;
use object_store::path::Path as Key;
use object_store::{CopyMode, CopyOptions, ObjectStoreExt, PutPayload};

use super::{map_error, retry::random_u64, CloudStore};
use crate::format::path::RelPath;
use crate::storage::{CreateOutcome, ObjectStore, StorageError};
use crate::sync::lock;

/// Parts uploaded (and held in memory) at once.
pub const UPLOADERS: usize = 2;

/// The smallest part S3 and GCS accept (all parts but the last).
pub const MIN_PART_SIZE: u64 = 5 << 20;

impl CloudStore {
    /// Whether a file of `size` bytes goes up in parts.
    pub(super) fn uses_multipart(&self, size: u64) -> bool {
        size > self.multipart_threshold
    }

    /// The create-only multipart upload described in the module documentation.
    pub(super) fn create_from_file_in_parts(
        &self,
        path: &RelPath,
        file: &File,
        size: u64,
    ) -> Result<CreateOutcome, StorageError> {
        match self.info(path, None) {
            Ok(_) => return self.outcome_for_existing(path, file, size),
            Err(err) if err.is_not_found() => {}
            Err(err) => return Err(err),
        }
        let temp = self.temporary_key(path);
        let uploaded = self.upload_parts(path, &temp, file, size);
        let copied = uploaded.and_then(|()| self.copy_create_only(path, &temp, file, size));
        self.delete_temporary(path, &temp);
        copied
    }

    fn temporary_key(&self, path: &RelPath) -> Key {
        let nonce = random_u64() ^ u64::from(std::process::id());
        Key::from(
            self.url
                .key(&format!(".sds-uploads/{}.{nonce:016x}", path.as_str())),
        )
    }

    /// Uploads `file` to `temp` in parts of `self.part_size`, [`UPLOADERS`] at a time; aborts
    /// the upload when it fails.
    fn upload_parts(
        &self,
        path: &RelPath,
        temp: &Key,
        file: &File,
        size: u64,
    ) -> Result<(), StorageError> {
        let multipart = &self.multipart;
        let object = self.describe(path);
        let id = self.retried(path, || {
            self.runtime
                .block_on(multipart.create_multipart(temp))
                .map_err(|e| map_error(object.clone(), e))
        })?;
        let part_size = self.part_size.max(MIN_PART_SIZE);
        let count = usize::try_from(size.div_ceil(part_size).max(1))
            .map_err(|_| StorageError::invalid(object.clone(), "too many parts"))?;
        let parts: Mutex<Vec<Option<PartId>>> = Mutex::new(vec![None; count]);
        let next = AtomicUsize::new(0);
        let first_error: Mutex<Option<StorageError>> = Mutex::new(None);
        let failed = || lock(&first_error).is_some();
        let upload_one = |k: usize| -> Result<PartId, StorageError> {
            let start = k as u64 * part_size;
            let len = part_size.min(size - start);
            let data = read_part(file, start, len).map_err(|e| StorageError::io(&object, e))?;
            self.retried(path, || {
                self.runtime
                    .block_on(multipart.put_part(temp, &id, k, PutPayload::from(data.clone())))
                    .map_err(|e| map_error(object.clone(), e))
            })
        };
        std::thread::scope(|scope| {
            for _ in 0..UPLOADERS.min(count) {
                scope.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::SeqCst);
                    if k >= count || failed() {
                        return;
                    }
                    match upload_one(k) {
                        Ok(part) => lock(&parts)[k] = Some(part),
                        Err(err) => {
                            lock(&first_error).get_or_insert(err);
                        }
                    }
                });
            }
        });
        let parts: Option<Vec<PartId>> = std::mem::take(&mut *lock(&parts)).into_iter().collect();
        let completed = match (lock(&first_error).take(), parts) {
            (Some(err), _) => Err(err),
            (None, None) => Err(StorageError::invalid(object.clone(), "a part went missing")),
            (None, Some(parts)) => self.retried(path, || {
                self.runtime
                    .block_on(multipart.complete_multipart(temp, &id, parts.clone()))
                    .map(|_| ())
                    .map_err(|e| map_error(object.clone(), e))
            }),
        };
        if completed.is_err() {
            // Best effort: an upload left open costs storage until a lifecycle rule ends it.
            let _ = self.runtime.block_on(multipart.abort_multipart(temp, &id));
        }
        completed
    }

    /// Copies `temp` to `path` only if `path` does not exist; an existing target is compared
    /// with the file.
    fn copy_create_only(
        &self,
        path: &RelPath,
        temp: &Key,
        file: &File,
        size: u64,
    ) -> Result<CreateOutcome, StorageError> {
        let target = self.key(path);
        let copied = self.retried(path, || {
            let options = CopyOptions {
                mode: CopyMode::Create,
                ..CopyOptions::default()
            };
            match self
                .runtime
                .block_on(self.remote.copy_opts(temp, &target, options))
            {
                Ok(()) => Ok(true),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => Ok(false),
                Err(err) => Err(self.error(path, err)),
            }
        })?;
        if copied {
            Ok(CreateOutcome::Created)
        } else {
            self.outcome_for_existing(path, file, size)
        }
    }

    fn delete_temporary(&self, path: &RelPath, temp: &Key) {
        let deleted = self.retried(path, || {
            self.runtime
                .block_on(self.remote.delete(temp))
                .map_err(|e| map_error(temp.to_string(), e))
        });
        if let Err(err) = deleted {
            tracing::warn!("could not delete the temporary upload {temp}: {err}");
        }
    }

    /// [`CreateOutcome::AlreadyIdentical`] when the stored object holds exactly the file's
    /// bytes, else a collision.
    pub(super) fn outcome_for_existing(
        &self,
        path: &RelPath,
        file: &File,
        size: u64,
    ) -> Result<CreateOutcome, StorageError> {
        if self.retried(path, || self.holds_file(path, file, size))? {
            Ok(CreateOutcome::AlreadyIdentical)
        } else {
            Err(StorageError::Collision {
                object: self.describe(path),
            })
        }
    }

    /// Whether the stored object holds exactly the `size` bytes of `file`, streamed: memory is
    /// one response chunk and its counterpart from the file.
    fn holds_file(&self, path: &RelPath, file: &File, size: u64) -> Result<bool, StorageError> {
        let object = self.describe(path);
        self.stored_matches(path, size, |offset, piece| {
            let mine = read_part(file, offset, piece.len() as u64)
                .map_err(|e| StorageError::io(&object, e))?;
            Ok(mine == piece)
        })
    }
}

/// `len` bytes of `file` at `offset`.
fn read_part(file: &File, offset: u64, len: u64) -> std::io::Result<Bytes> {
    let len = usize::try_from(len)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "part too large"))?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(Bytes::from(buf))
}
