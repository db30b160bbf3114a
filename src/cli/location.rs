//! The `DATASET` argument: a local directory path, a `file://` URL, or an object-store
//! location `s3://bucket/prefix` / `gs://bucket/prefix` (credentials, region and endpoint from
//! the standard `AWS_*` / `GOOGLE_*` environment, e.g. `GOOGLE_APPLICATION_CREDENTIALS` and, for
//! an emulator, `GOOGLE_BASE_URL`; see docs/STORAGE.md; retries tuned by `SDS_RETRY_*`).
//!
//! Opening errors are turned into the one line a user sees: the full location of the document
//! that broke a rule, then the rule (`/data/ds/root.json: min_reader_version "9" is newer than
//! this reader (0.2)`), so the message says what to look at without a backtrace.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::cli::CliError;
use crate::dataset::{AbsoluteReferences, Dataset, DatasetError, OpenOptions, StorageOpener};
use crate::format::documents::DocumentError;
use crate::format::path::RelPath;
use crate::storage::{CloudOptions, Location, ObjectStore, StorageError};

/// Why a dataset could not be opened: one line, ready to print after `sds: `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFailure(pub String);

impl std::fmt::Display for OpenFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OpenFailure {}

/// Explicit object-store settings on the command line, for S3-compatible stores (MinIO, Ceph,
/// moto) and emulators. Each overrides its environment variable; unset, the standard
/// environment applies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct StoreArgs {
    /// Object-store endpoint: an S3-compatible server (http://minio:9000), or a GCS base URL
    /// for an emulator; overrides AWS_ENDPOINT_URL.
    #[arg(long, global = true, value_name = "URL")]
    pub endpoint_url: Option<String>,
    /// S3 region; overrides AWS_REGION (default us-east-1).
    #[arg(long, global = true, value_name = "REGION")]
    pub region: Option<String>,
    /// Permit a plain-http endpoint (as AWS_ALLOW_HTTP=true).
    #[arg(long, global = true)]
    pub allow_http: bool,
    /// Seconds one object-store request may take, body included, before it fails as timed
    /// out (and is retried; a mount answers ETIMEDOUT once the retries are used up)
    /// [default: 30].
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_seconds)]
    pub request_timeout: Option<Duration>,
    /// Refuse absolute references (reference views point at another dataset's shards by
    /// absolute location; following them reaches outside the dataset root).
    #[arg(long, global = true)]
    pub no_absolute_references: bool,
    /// Refuse absolute references that leave the dataset's own store (a local dataset naming
    /// `s3://` or `gs://` objects, an object-store dataset naming another bucket or a local
    /// path): set by a mount that admits other users unless it allows them.
    #[arg(skip)]
    pub same_store_only: bool,
}

impl StoreArgs {
    /// The same settings as command-line arguments (for re-executing a daemon).
    pub fn to_arguments(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = Vec::new();
        if let Some(url) = &self.endpoint_url {
            out.extend(["--endpoint-url".into(), url.into()]);
        }
        if let Some(region) = &self.region {
            out.extend(["--region".into(), region.into()]);
        }
        if self.allow_http {
            out.push("--allow-http".into());
        }
        if let Some(timeout) = self.request_timeout {
            out.extend([
                "--request-timeout".into(),
                timeout.as_secs_f64().to_string().into(),
            ]);
        }
        if self.no_absolute_references {
            out.push("--no-absolute-references".into());
        }
        out
    }

    /// The options object stores are opened with: the environment's, overridden by these.
    pub fn cloud_options(&self) -> CloudOptions {
        let mut options = CloudOptions::from_env();
        options.endpoint = self.endpoint_url.clone();
        options.region = self.region.clone();
        options.allow_http = self.allow_http.then_some(true);
        if let Some(timeout) = self.request_timeout {
            options.request_timeout = Some(timeout);
        }
        options
    }
}

impl StoreArgs {
    /// How datasets are opened with these settings: the absolute-reference policy, and the
    /// store settings for the stores absolute references open.
    pub fn open_options(&self) -> OpenOptions {
        let opener = || {
            Arc::new(StorageOpener {
                cloud: self.cloud_options(),
            })
        };
        let absolute_references = if self.no_absolute_references {
            AbsoluteReferences::Refuse
        } else if self.same_store_only {
            AbsoluteReferences::FollowSameStore(opener())
        } else {
            AbsoluteReferences::Follow(opener())
        };
        OpenOptions {
            absolute_references,
            ..OpenOptions::default()
        }
    }

    /// The store a `DATASET` argument names. Local directories must exist; object-store
    /// locations are not contacted until the first read.
    pub fn open_store(&self, argument: &str) -> Result<Arc<dyn ObjectStore>, OpenFailure> {
        self.open_location(&parse(argument)?, argument)
    }

    fn open_location(
        &self,
        location: &Location,
        argument: &str,
    ) -> Result<Arc<dyn ObjectStore>, OpenFailure> {
        location.open(&self.cloud_options()).map_err(|e| {
            let e = match e {
                StorageError::Invalid { reason, .. } => StorageError::invalid(argument, reason),
                other => other,
            };
            OpenFailure(one_line(&format!("cannot open {e}")))
        })
    }

    /// The store a dataset is written into; a local directory is created when missing.
    pub fn open_writable_store(&self, argument: &str) -> Result<Arc<dyn ObjectStore>, OpenFailure> {
        let location = parse(argument)?;
        if let Location::Local(root) = &location {
            std::fs::create_dir_all(root).map_err(|e| {
                OpenFailure(one_line(&format!("cannot create {}: {e}", root.display())))
            })?;
        }
        self.open_location(&location, argument)
    }

    /// Opens the dataset `argument` names, or the one-line reason it cannot be opened.
    pub fn open_dataset(&self, argument: &str) -> Result<Dataset, OpenFailure> {
        self.open_dataset_with(argument, |store, _backend| store)
    }

    /// [`open_dataset`](Self::open_dataset) through a wrapper of the store
    /// (`wrap(store, backend name)`), e.g. the counting store of a mount.
    pub fn open_dataset_with(
        &self,
        argument: &str,
        wrap: impl FnOnce(Arc<dyn ObjectStore>, &str) -> Arc<dyn ObjectStore>,
    ) -> Result<Dataset, OpenFailure> {
        let location = parse(argument)?;
        let store = wrap(self.open_location(&location, argument)?, location.backend());
        Dataset::open(store.clone(), self.open_options()).map_err(|e| {
            OpenFailure(one_line(&format!(
                "cannot open {}",
                describe(&e, store.as_ref())
            )))
        })
    }
}

/// A positive number of seconds (`30`, `2.5`), at most a day: `--request-timeout`.
pub fn parse_seconds(text: &str) -> Result<Duration, CliError> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|secs| secs.is_finite() && *secs > 0.0 && *secs <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            CliError::from(format!(
                "invalid duration {text:?}: expected a number of seconds such as 30 or 2.5"
            ))
        })
}

/// The location a `DATASET` argument names, parsed once.
pub fn parse(argument: &str) -> Result<Location, OpenFailure> {
    Location::parse(argument)
        .map_err(|reason| OpenFailure(one_line(&format!("cannot open {argument}: {reason}"))))
}

/// The local directory a `DATASET` argument names.
pub fn local_root(argument: &str) -> Result<PathBuf, OpenFailure> {
    parse(argument)?
        .local_path()
        .map_err(|reason| OpenFailure(format!("cannot open {argument}: {reason}")))
}

/// The error with its document named by full location.
pub fn describe(error: &DatasetError, store: &dyn ObjectStore) -> String {
    match error {
        DatasetError::Document(document) => {
            let name = document.document();
            let location = RelPath::new(name)
                .map(|p| store.describe(&p))
                .unwrap_or_else(|_| name.to_string());
            format!("{location}: {}", document_problem(document))
        }
        other => other.to_string(),
    }
}

/// What a document error says, without the document's name.
fn document_problem(error: &DocumentError) -> String {
    match error {
        DocumentError::Json { source, .. } => format!("invalid JSON: {source}"),
        DocumentError::Rule { rule, .. } => rule.clone(),
        DocumentError::ReaderTooOld {
            required, reader, ..
        } => format!(
            "min_reader_version {required:?} is newer than this reader ({reader}); upgrade sds"
        ),
    }
}

/// Folds any line breaks so a message stays one line.
pub fn one_line(text: &str) -> String {
    let joined = text
        .split(['\n', '\r'])
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    // What is left of a dataset's strings in it (ESC, other controls) cannot drive a terminal.
    crate::format::printable::escaped(&joined).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        // Location parsing itself is storage's (`storage::location` tests); here, the messages.
        assert_eq!(local_root("rel").unwrap(), PathBuf::from("rel"));
        let s3 = local_root("s3://bucket/p").unwrap_err().0;
        assert!(s3.contains("object-store location"), "{s3}");
        assert!(local_root("gs://bucket/p").unwrap_err().0.contains("gs://"));
        assert!(local_root("http://x/y").is_err());
        let args = StoreArgs::default();
        let store = args.open_store("s3://bucket/p").unwrap();
        assert_eq!(
            store.describe(&RelPath::new("root.json").unwrap()),
            "s3://bucket/p/root.json"
        );
        assert_eq!(parse_seconds("2.5").ok(), Some(Duration::from_millis(2500)));
        assert_eq!(parse_seconds("30").ok(), Some(Duration::from_secs(30)));
        for bad in ["0", "-1", "x", "", "1e9", "NaN"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
        let timed = StoreArgs {
            request_timeout: Some(Duration::from_millis(1500)),
            ..StoreArgs::default()
        };
        assert_eq!(
            timed.cloud_options().request_timeout,
            Some(Duration::from_millis(1500))
        );
        let again: Vec<String> = timed
            .to_arguments()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(again, ["--request-timeout", "1.5"]);
        let bad = args.open_store("s3://Bad_Bucket/p").unwrap_err().0;
        assert!(
            bad.starts_with("cannot open s3://Bad_Bucket/p") && !bad.contains('\n'),
            "{bad}"
        );
    }
}
