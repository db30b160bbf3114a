//! Object stores (S3, GCS) behind the synchronous [`ObjectStore`] trait, through the
//! `object_store` crate.
//!
//! # Why synchronous over async
//!
//! Everything that reads a dataset (the ArrayRecord reader, the FUSE adapter, the `sds`
//! commands) is synchronous, and FUSE worker threads already give us concurrency. So
//! [`CloudStore`] owns a small multi-threaded tokio runtime and `block_on`s each call:
//! `Runtime::block_on` takes `&self`, so any number of FUSE threads can each drive their own
//! request at once, and the runtime's workers keep the HTTP connection pool alive between
//! calls. The one rule this imposes is that no caller may be inside a tokio runtime itself;
//! nothing in this crate is.
//!
//! # Requests
//!
//! - [`read_range`](ObjectStore::read_range) is one ranged GET; [`info`](ObjectStore::info) one
//!   HEAD; whole reads one GET.
//! - [`create`](ObjectStore::create) is a create-only PUT (`If-None-Match: *` on S3,
//!   `x-goog-if-generation-match: 0` on GCS); when the object exists its bytes are read and
//!   compared, giving [`CreateOutcome::AlreadyIdentical`] or [`StorageError::Collision`].
//! - [`create_from_file`](ObjectStore::create_from_file) of a file above the multipart
//!   threshold (64 MiB) streams it in 16 MiB parts to a temporary key (S3 multipart upload, or
//!   GCS's XML-API multipart upload), then copies it to the target create-only on the server
//!   (see `multipart` for why and how atomic).
//! - [`compare_and_swap`](ObjectStore::compare_and_swap) is a conditional PUT: the ETag on
//!   S3, the generation on GCS.
//! - Generation-pinned reads use the object generation on GCS; S3 has no numeric generation,
//!   so a pinned read there is [`StorageError::GenerationsUnsupported`].
//!
//! # Credentials and endpoints
//!
//! Both builders start from the standard environment, read by `object_store` itself: `AWS_*`
//! for S3; for GCS every `GOOGLE_*` key it knows, notably `GOOGLE_APPLICATION_CREDENTIALS`
//! (application default credentials: a service-account key, whose requests carry a
//! self-signed JWT, or gcloud's `authorized_user` file), `GOOGLE_SERVICE_ACCOUNT` /
//! `GOOGLE_SERVICE_ACCOUNT_KEY`, `GOOGLE_BEARER_TOKEN`, and `GOOGLE_BASE_URL` for an emulator;
//! with none of them, gcloud's well-known file, then the GCE metadata server. [`CloudOptions`]
//! overrides the few settings tests and S3-compatible stores need.
//!
//! # Retries
//!
//! `object_store`'s own retry loop is switched off, so that exactly one policy applies:
//! [`RetryPolicy`] (5 attempts, 1 s base, 60 s cap, jittered by default), used for idempotent
//! calls only (reads, HEADs, create-only writes). Transient means: connection, timeout and
//! body errors, HTTP 408, 429 and 5xx. Every retried failure is logged with its cause.
//! `tests/storage_faults.rs` checks all of this through a fault-injecting proxy.
//!
//! Every request has a deadline, [`CloudOptions::request_timeout`] (30 s unless set; the
//! command lines' `--request-timeout`), covering the whole request, body included: a server
//! that stops answering costs each attempt that long, and once the attempts are used up the
//! failure is a timeout ([`io::ErrorKind::TimedOut`], ETIMEDOUT on the mount).
//!
//! # Concurrency
//!
//! No lock is held around a request: concurrent reads of different records are concurrent
//! requests (counted in flight at the proxy in `tests/storage_faults.rs`). Sequential scans
//! read ahead through [`ObjectReader::prefetch`](super::ObjectReader::prefetch), driven by the
//! dataset layer.

mod location;
mod multipart;
mod retry;

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, S3CopyIfNotExists};
use object_store::client::{HttpError, HttpErrorKind};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::multipart::MultipartStore;
use object_store::path::Path as Key;
use object_store::{
    ClientConfigKey, GetOptions, GetRange, ObjectMeta, ObjectStore as Remote, PutMode, PutOptions,
    PutPayload, RetryConfig, UpdateVersion,
};

use super::{CreateOutcome, ObjectInfo, ObjectStore, StorageError, Version};
use crate::format::path::RelPath;

pub use location::{CloudUrl, Service};
pub use retry::RetryPolicy;

/// Settings beyond the standard environment (`AWS_*`, `GOOGLE_*`), for S3-compatible stores,
/// GCS emulators and tests. Explicit values override the environment.
#[derive(Debug, Clone, Default)]
pub struct CloudOptions {
    pub retry: RetryPolicy,
    /// S3: the endpoint URL (MinIO, moto, ...), `AWS_ENDPOINT_URL` otherwise. GCS: the base
    /// URL requests go to (`http://127.0.0.1:4443` for an emulator), `GOOGLE_BASE_URL`
    /// otherwise, `https://storage.googleapis.com` by default.
    pub endpoint: Option<String>,
    /// S3 region; `AWS_REGION` otherwise, `us-east-1` by default.
    pub region: Option<String>,
    /// Permit plain-HTTP endpoints; `AWS_ALLOW_HTTP` otherwise.
    pub allow_http: Option<bool>,
    /// How long one request may take, from connecting to the end of its body, before it fails
    /// as timed out (a transient failure: retried by [`RetryPolicy`], then reported with
    /// [`io::ErrorKind::TimedOut`]); [`DEFAULT_REQUEST_TIMEOUT`] when `None`.
    pub request_timeout: Option<Duration>,
    /// Static S3 credentials; `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` otherwise.
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    /// Files larger than this are uploaded in parts (see `multipart`);
    /// `SDS_MULTIPART_THRESHOLD` otherwise, [`DEFAULT_MULTIPART_THRESHOLD`] by default.
    pub multipart_threshold: Option<u64>,
    /// Size of each part (at least 5 MiB, S3's minimum); `SDS_MULTIPART_PART_SIZE` otherwise,
    /// [`DEFAULT_PART_SIZE`] by default.
    pub part_size: Option<u64>,
    /// GCS credentials file (a service-account key or an `authorized_user` file, as `gcloud`
    /// writes them); `GOOGLE_APPLICATION_CREDENTIALS` otherwise, then gcloud's well-known
    /// file, then the metadata server.
    pub google_credentials: Option<PathBuf>,
}

/// A request that has not finished after 30 s fails as timed out.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Files above 64 MiB go up in parts.
pub const DEFAULT_MULTIPART_THRESHOLD: u64 = 64 << 20;
/// 16 MiB parts: with two in flight, an upload holds 32 MiB of the file at most.
pub const DEFAULT_PART_SIZE: u64 = 16 << 20;

impl CloudOptions {
    /// Defaults with the retry policy taken from `SDS_RETRY_*` (see [`RetryPolicy::from_env`]).
    pub fn from_env() -> CloudOptions {
        let number = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        CloudOptions {
            retry: RetryPolicy::from_env(),
            multipart_threshold: number("SDS_MULTIPART_THRESHOLD"),
            part_size: number("SDS_MULTIPART_PART_SIZE"),
            ..CloudOptions::default()
        }
    }
}

/// A dataset root in S3 or GCS.
pub struct CloudStore {
    url: CloudUrl,
    remote: Arc<dyn Remote>,
    runtime: tokio::runtime::Runtime,
    retry: RetryPolicy,
    /// Low-level multipart uploads (S3's, or GCS's XML-API ones), for large files.
    multipart: Arc<dyn MultipartStore>,
    multipart_threshold: u64,
    part_size: u64,
}

impl std::fmt::Debug for CloudStore {
    // The multipart client has no `Debug`; the remote stands for both.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudStore")
            .field("url", &self.url)
            .field("remote", &self.remote)
            .field("retry", &self.retry)
            .field("multipart_threshold", &self.multipart_threshold)
            .field("part_size", &self.part_size)
            .finish_non_exhaustive()
    }
}

impl CloudStore {
    /// Opens `s3://bucket/prefix` or `gs://bucket/prefix` with credentials from the standard
    /// environment plus `options`. Opening sends no request.
    pub fn open(url: &str, options: &CloudOptions) -> Result<CloudStore, StorageError> {
        let parsed = CloudUrl::parse(url)
            .map_err(|reason| StorageError::invalid(url, reason.to_string()))?;
        CloudStore::open_url(parsed, options)
    }

    /// [`open`](CloudStore::open) with the location already parsed.
    pub fn open_url(parsed: CloudUrl, options: &CloudOptions) -> Result<CloudStore, StorageError> {
        let url = parsed.to_string();
        let url = url.as_str();
        let google_credentials = match &options.google_credentials {
            None => None,
            Some(file) => Some(file.to_str().ok_or_else(|| {
                StorageError::invalid(
                    url,
                    format!("credentials file {} is not a UTF-8 path", file.display()),
                )
            })?),
        };
        // One retry policy only: ours. object_store's would multiply attempts and ignore
        // our idempotency rules.
        let no_retries = RetryConfig {
            max_retries: 0,
            ..RetryConfig::default()
        };
        // Client settings go through `with_config`: `with_client_options` would replace the
        // ones `from_env` read (AWS_ALLOW_HTTP, proxies, CA bundles) wholesale.
        let timeout = options.request_timeout.unwrap_or(DEFAULT_REQUEST_TIMEOUT);
        let timeout = format!("{}ms", timeout.as_millis().max(1));
        let built = match parsed.service {
            Service::S3 => {
                let mut builder = AmazonS3Builder::from_env()
                    .with_bucket_name(&parsed.bucket)
                    .with_retry(no_retries)
                    .with_config(
                        AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
                        &timeout,
                    );
                if let Some(endpoint) = &options.endpoint {
                    builder = builder.with_endpoint(endpoint);
                }
                if let Some(region) = &options.region {
                    builder = builder.with_region(region);
                }
                if let Some(allow) = options.allow_http {
                    builder = builder.with_allow_http(allow);
                }
                if let Some(key) = &options.access_key_id {
                    builder = builder.with_access_key_id(key);
                }
                if let Some(secret) = &options.secret_access_key {
                    builder = builder.with_secret_access_key(secret);
                }
                // Create-only copies complete a one-part upload with `If-None-Match: *`
                // (the last step of a multipart create, see `multipart`).
                builder = builder.with_copy_if_not_exists(S3CopyIfNotExists::Multipart);
                if let Some(endpoint) = plain_http_endpoint(&builder) {
                    return Err(StorageError::invalid(
                        parsed.to_string(),
                        format!(
                            "endpoint {endpoint} is plain http: pass --allow-http (mount option \
                             allow_http) or set AWS_ALLOW_HTTP=true"
                        ),
                    ));
                }
                builder.build().map(|s| {
                    let s = Arc::new(s);
                    (s.clone() as Arc<dyn Remote>, s as Arc<dyn MultipartStore>)
                })
            }
            Service::Gcs => {
                let mut builder = GoogleCloudStorageBuilder::from_env()
                    .with_bucket_name(&parsed.bucket)
                    .with_retry(no_retries)
                    .with_config(GoogleConfigKey::Client(ClientConfigKey::Timeout), &timeout);
                if let Some(allow) = options.allow_http {
                    builder = builder.with_config(
                        GoogleConfigKey::Client(ClientConfigKey::AllowHttp),
                        allow.to_string(),
                    );
                }
                if let Some(endpoint) = &options.endpoint {
                    builder = builder.with_base_url(endpoint.trim_end_matches('/'));
                }
                if let Some(file) = google_credentials {
                    builder = builder.with_application_credentials(file);
                }
                builder.build().map(|s| {
                    let s = Arc::new(s);
                    (s.clone() as Arc<dyn Remote>, s as Arc<dyn MultipartStore>)
                })
            }
        };
        let (remote, multipart) =
            built.map_err(|e| StorageError::invalid(parsed.to_string(), e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sds-object-store")
            .enable_all()
            .build()
            .map_err(|e| StorageError::io(parsed.to_string(), e))?;
        Ok(CloudStore {
            url: parsed,
            remote,
            runtime,
            retry: options.retry,
            multipart,
            multipart_threshold: options
                .multipart_threshold
                .unwrap_or(DEFAULT_MULTIPART_THRESHOLD),
            part_size: options.part_size.unwrap_or(DEFAULT_PART_SIZE),
        })
    }

    /// The location this store is rooted at.
    pub fn url(&self) -> &CloudUrl {
        &self.url
    }

    /// The retry policy in force.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    fn key(&self, path: &RelPath) -> Key {
        Key::from(self.url.key(path.as_str()))
    }

    /// Runs an idempotent operation under the retry policy, logging every retried failure.
    fn retried<T>(
        &self,
        path: &RelPath,
        op: impl FnMut() -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        let object = self.describe(path);
        self.retry.run(op, |attempt, err, delay| {
            tracing::warn!(
                "{object}: attempt {attempt} failed ({err}); retrying in {:.3} s",
                delay.as_secs_f64()
            );
        })
    }

    fn get_options(
        &self,
        path: &RelPath,
        generation: Option<u64>,
    ) -> Result<GetOptions, StorageError> {
        let mut options = GetOptions::default();
        if let Some(generation) = generation {
            match self.url.service {
                Service::S3 => {
                    return Err(StorageError::GenerationsUnsupported {
                        object: self.describe(path),
                    })
                }
                Service::Gcs => options.version = Some(generation.to_string()),
            }
        }
        Ok(options)
    }

    fn version_of(&self, e_tag: Option<String>, version: Option<String>) -> Version {
        let generation = match self.url.service {
            Service::Gcs => version.and_then(|v| v.parse().ok()),
            // S3 version ids are opaque strings, not ordered generations.
            Service::S3 => None,
        };
        Version {
            generation,
            etag: e_tag,
        }
    }

    fn info_of(&self, meta: &ObjectMeta) -> ObjectInfo {
        ObjectInfo {
            size: meta.size,
            version: self.version_of(meta.e_tag.clone(), meta.version.clone()),
            modified: Some(SystemTime::from(meta.last_modified)),
        }
    }

    fn error(&self, path: &RelPath, err: object_store::Error) -> StorageError {
        map_error(self.describe(path), err)
    }

    /// A pinned read found nothing: say whether the object exists at another generation.
    fn pinned_failure(
        &self,
        path: &RelPath,
        generation: Option<u64>,
        err: StorageError,
    ) -> StorageError {
        let Some(expected) = generation else {
            return err;
        };
        if !err.is_not_found() {
            return err;
        }
        match self.info(path, None) {
            Ok(ObjectInfo {
                version:
                    Version {
                        generation: Some(actual),
                        ..
                    },
                ..
            }) if actual != expected => StorageError::GenerationMismatch {
                object: self.describe(path),
                expected,
                actual,
            },
            _ => err,
        }
    }

    /// One GET, the body collected; refuses bodies over `limit` bytes before and while reading.
    fn get_bytes(
        &self,
        path: &RelPath,
        options: &GetOptions,
        limit: Option<u64>,
    ) -> Result<(Bytes, ObjectMeta), StorageError> {
        let key = self.key(path);
        let object = self.describe(path);
        self.runtime.block_on(async {
            let result = self
                .remote
                .get_opts(&key, options.clone())
                .await
                .map_err(|e| map_error(object.clone(), e))?;
            let meta = result.meta.clone();
            let too_large = |size: u64, limit: u64| StorageError::TooLarge {
                object: object.clone(),
                size,
                limit,
            };
            if let Some(limit) = limit {
                if meta.size > limit {
                    return Err(too_large(meta.size, limit));
                }
            }
            let expected = result.range.end.saturating_sub(result.range.start);
            let mut buffer = BytesMut::with_capacity(usize::try_from(expected).unwrap_or(0));
            let mut stream = result.into_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| map_error(object.clone(), e))?;
                buffer.extend_from_slice(&chunk);
                if let Some(limit) = limit {
                    if buffer.len() as u64 > limit {
                        return Err(too_large(buffer.len() as u64, limit));
                    }
                }
            }
            Ok((buffer.freeze(), meta))
        })
    }

    /// Whether the stored object holds exactly `data`, streamed (stops at the first difference
    /// or a size mismatch).
    fn holds(&self, path: &RelPath, data: &[u8]) -> Result<bool, StorageError> {
        self.stored_matches(path, data.len() as u64, |offset, chunk| {
            let start = usize::try_from(offset).unwrap_or(usize::MAX);
            Ok(data.get(start..start.saturating_add(chunk.len())) == Some(chunk))
        })
    }

    /// Whether the stored object is `size` bytes long and every piece of its body, as it
    /// streams in, is what `same(offset, piece)` expects; stops at the first difference, so
    /// memory is one response piece (and whatever `same` reads to compare it).
    pub(super) fn stored_matches(
        &self,
        path: &RelPath,
        size: u64,
        mut same: impl FnMut(u64, &[u8]) -> Result<bool, StorageError>,
    ) -> Result<bool, StorageError> {
        let key = self.key(path);
        let object = self.describe(path);
        self.runtime.block_on(async {
            let result = self
                .remote
                .get_opts(&key, GetOptions::default())
                .await
                .map_err(|e| map_error(object.clone(), e))?;
            if result.meta.size != size {
                return Ok(false);
            }
            let mut offset = 0u64;
            let mut stream = result.into_stream();
            while let Some(piece) = stream.next().await {
                let piece = piece.map_err(|e| map_error(object.clone(), e))?;
                if offset + piece.len() as u64 > size || !same(offset, &piece)? {
                    return Ok(false);
                }
                offset += piece.len() as u64;
            }
            Ok(offset == size)
        })
    }

    fn create_bytes(&self, path: &RelPath, data: Bytes) -> Result<CreateOutcome, StorageError> {
        let key = self.key(path);
        self.retried(path, || {
            let options = PutOptions {
                mode: PutMode::Create,
                ..PutOptions::default()
            };
            let put = self.runtime.block_on(self.remote.put_opts(
                &key,
                PutPayload::from(data.clone()),
                options,
            ));
            match put {
                Ok(_) => Ok(CreateOutcome::Created),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => {
                    if self.holds(path, &data)? {
                        Ok(CreateOutcome::AlreadyIdentical)
                    } else {
                        Err(StorageError::Collision {
                            object: self.describe(path),
                        })
                    }
                }
                Err(err) => Err(self.error(path, err)),
            }
        })
    }
}

impl ObjectStore for CloudStore {
    fn describe(&self, path: &RelPath) -> String {
        format!("{}/{}", self.url, path.as_str())
    }

    fn read(&self, path: &RelPath, generation: Option<u64>) -> Result<Bytes, StorageError> {
        let options = self.get_options(path, generation)?;
        self.retried(path, || self.get_bytes(path, &options, None))
            .map(|(bytes, _)| bytes)
            .map_err(|e| self.pinned_failure(path, generation, e))
    }

    fn read_limited(
        &self,
        path: &RelPath,
        generation: Option<u64>,
        max_bytes: u64,
    ) -> Result<Bytes, StorageError> {
        let options = self.get_options(path, generation)?;
        self.retried(path, || self.get_bytes(path, &options, Some(max_bytes)))
            .map(|(bytes, _)| bytes)
            .map_err(|e| self.pinned_failure(path, generation, e))
    }

    fn read_range(
        &self,
        path: &RelPath,
        range: Range<u64>,
        generation: Option<u64>,
    ) -> Result<Bytes, StorageError> {
        if range.start > range.end {
            return Err(StorageError::invalid(
                self.describe(path),
                format!("byte range {}..{} is reversed", range.start, range.end),
            ));
        }
        let out_of_range = |size: u64| StorageError::OutOfRange {
            object: self.describe(path),
            start: range.start,
            end: range.end,
            size,
        };
        if range.is_empty() {
            // An empty GET range is not expressible in HTTP: check the bounds with a HEAD.
            let size = self.info(path, generation)?.size;
            return if range.end > size {
                Err(out_of_range(size))
            } else {
                Ok(Bytes::new())
            };
        }
        let mut options = self.get_options(path, generation)?;
        options.range = Some(GetRange::Bounded(range.clone()));
        match self.retried(path, || self.get_bytes(path, &options, None)) {
            Ok((bytes, meta)) => {
                if bytes.len() as u64 != range.end - range.start {
                    Err(out_of_range(meta.size))
                } else {
                    Ok(bytes)
                }
            }
            Err(err) if err.kind() == super::ErrorKind::Permanent => {
                // A range past the end is refused by the server (416) or the client; tell
                // that apart from other failures with one HEAD.
                match self.info(path, generation) {
                    Ok(info) if range.end > info.size => Err(out_of_range(info.size)),
                    _ => Err(err),
                }
            }
            Err(err) => Err(self.pinned_failure(path, generation, err)),
        }
    }

    fn info(&self, path: &RelPath, generation: Option<u64>) -> Result<ObjectInfo, StorageError> {
        let mut options = self.get_options(path, generation)?;
        options.head = true;
        let key = self.key(path);
        let meta = self.retried(path, || {
            self.runtime
                .block_on(self.remote.get_opts(&key, options.clone()))
                .map(|result| result.meta)
                .map_err(|e| self.error(path, e))
        });
        match meta {
            Ok(meta) => Ok(self.info_of(&meta)),
            Err(err) => Err(self.pinned_failure(path, generation, err)),
        }
    }

    fn create(&self, path: &RelPath, data: &[u8]) -> Result<CreateOutcome, StorageError> {
        self.create_bytes(path, Bytes::copy_from_slice(data))
    }

    /// Files up to the multipart threshold go up with one create-only PUT, held in memory;
    /// larger ones in parts, with bounded memory (see `multipart`).
    fn create_from_file(&self, path: &RelPath, file: &Path) -> Result<CreateOutcome, StorageError> {
        let io_error = |e| StorageError::io(file.display().to_string(), e);
        let handle = std::fs::File::open(file).map_err(io_error)?;
        let size = handle.metadata().map_err(io_error)?.len();
        if self.uses_multipart(size) {
            return self.create_from_file_in_parts(path, &handle, size);
        }
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        std::io::Read::read_to_end(&mut &handle, &mut data).map_err(io_error)?;
        self.create_bytes(path, Bytes::from(data))
    }

    fn read_versioned(&self, path: &RelPath) -> Result<Option<(Bytes, Version)>, StorageError> {
        match self.retried(path, || self.get_bytes(path, &GetOptions::default(), None)) {
            Ok((bytes, meta)) => Ok(Some((bytes, self.version_of(meta.e_tag, meta.version)))),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    fn compare_and_swap(
        &self,
        path: &RelPath,
        data: &[u8],
        expected: Option<&Version>,
    ) -> Result<Version, StorageError> {
        let precondition_failed = || StorageError::PreconditionFailed {
            object: self.describe(path),
        };
        let mode = match expected {
            None => PutMode::Create,
            Some(version) => {
                let update = match self.url.service {
                    Service::S3 => UpdateVersion {
                        e_tag: version.etag.clone(),
                        version: None,
                    },
                    Service::Gcs => UpdateVersion {
                        e_tag: version.etag.clone(),
                        version: version.generation.map(|g| g.to_string()),
                    },
                };
                // An expectation without the identity this service compares matches nothing
                // (see `Version::matches`): never fall back to a blind overwrite.
                let usable = match self.url.service {
                    Service::S3 => update.e_tag.is_some(),
                    Service::Gcs => update.version.is_some(),
                };
                if !usable {
                    return Err(precondition_failed());
                }
                PutMode::Update(update)
            }
        };
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        let put = self.runtime.block_on(self.remote.put_opts(
            &self.key(path),
            PutPayload::from(Bytes::copy_from_slice(data)),
            options,
        ));
        match put {
            Ok(result) => Ok(self.version_of(result.e_tag, result.version)),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Err(precondition_failed()),
            Err(err) => Err(self.error(path, err)),
        }
    }

    fn supports_generations(&self) -> bool {
        self.url.service == Service::Gcs
    }

    fn persists_generations(&self) -> bool {
        self.supports_generations()
    }

    fn location(&self) -> super::Location {
        super::Location::Cloud(self.url.clone())
    }
}

/// Maps an `object_store` failure onto the storage error kinds; the original error stays the
/// source, so its message (status, body, URL) reaches logs.
/// The configured S3 endpoint when it is `http://` and plain http is not permitted:
/// object_store would only say "builder error" on the first request.
fn plain_http_endpoint(builder: &AmazonS3Builder) -> Option<String> {
    let endpoint = builder.get_config_value(&AmazonS3ConfigKey::Endpoint)?;
    let allowed = builder
        .get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    (endpoint.to_ascii_lowercase().starts_with("http://") && !allowed).then_some(endpoint)
}

fn map_error(object: String, err: object_store::Error) -> StorageError {
    use object_store::Error as E;
    match err {
        E::NotFound { .. } => StorageError::NotFound { object },
        E::Precondition { .. } => StorageError::PreconditionFailed { object },
        E::AlreadyExists { .. } => StorageError::Collision { object },
        E::NotSupported { .. } | E::NotImplemented { .. } => {
            StorageError::invalid(object, err.to_string())
        }
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
            StorageError::io(object, io::Error::new(io::ErrorKind::PermissionDenied, err))
        }
        other => {
            let kind = classify(&other);
            StorageError::io(object, io::Error::new(kind, other))
        }
    }
}

/// The I/O kind of a generic remote failure: transient kinds (see
/// [`ErrorKind::Transient`](super::ErrorKind::Transient)) for connection trouble, timeouts,
/// cut-off bodies and HTTP 408/429/5xx; `Other` (permanent) for everything else.
fn classify(err: &(dyn std::error::Error + 'static)) -> io::ErrorKind {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(http) = e.downcast_ref::<HttpError>() {
            return match http.kind() {
                HttpErrorKind::Connect => io::ErrorKind::ConnectionRefused,
                HttpErrorKind::Timeout => io::ErrorKind::TimedOut,
                HttpErrorKind::Request | HttpErrorKind::Interrupted | HttpErrorKind::Decode => {
                    io::ErrorKind::ConnectionAborted
                }
                _ => io::ErrorKind::Other,
            };
        }
        if let Some(status) = http_status(&e.to_string()) {
            return if status == 408 || status == 429 || (500..600).contains(&status) {
                io::ErrorKind::ConnectionReset
            } else {
                io::ErrorKind::Other
            };
        }
        current = e.source();
    }
    io::ErrorKind::Other
}

/// The HTTP status in an `object_store` request error's message ("... status code: 503 ...").
/// `object_store` does not export its request error type, so its message is the only handle.
fn http_status(message: &str) -> Option<u16> {
    let (_, rest) = message.split_once("status code: ")?;
    rest.get(..3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_are_found_in_messages() {
        assert_eq!(
            http_status("Error performing GET x in 1ms - Server returned non-2xx status code: 503 Service Unavailable: slow down"),
            Some(503)
        );
        assert_eq!(http_status("nothing here"), None);
    }

    #[test]
    fn generic_failures_classify_by_status() {
        let unavailable = object_store::Error::Generic {
            store: "S3",
            source: "Server returned non-2xx status code: 503 Service Unavailable".into(),
        };
        assert_eq!(
            map_error("o".into(), unavailable).kind(),
            super::super::ErrorKind::Transient
        );
        let bad = object_store::Error::Generic {
            store: "S3",
            source: "Server returned non-2xx status code: 400 Bad Request".into(),
        };
        assert_eq!(
            map_error("o".into(), bad).kind(),
            super::super::ErrorKind::Permanent
        );
        let missing = object_store::Error::NotFound {
            path: "p".into(),
            source: "404".into(),
        };
        assert!(map_error("o".into(), missing).is_not_found());
    }

    #[test]
    fn generations_are_refused_on_s3() {
        let store = CloudStore::open("s3://bucket/prefix", &CloudOptions::default()).unwrap();
        let path = RelPath::new("root.json").unwrap();
        assert_eq!(store.describe(&path), "s3://bucket/prefix/root.json");
        assert!(!store.supports_generations());
        let err = store.read(&path, Some(3)).unwrap_err();
        assert!(
            matches!(err, StorageError::GenerationsUnsupported { .. }),
            "{err}"
        );
    }
}
