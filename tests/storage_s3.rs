//! The S3 backend against a real S3 server on loopback: moto (`moto_server`, from the test
//! venv, see `scripts/setup-test-env`). Each test starts its own server on a free port and
//! kills it in a guard.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::datasets::write_shards;
use common::mount::MountGuard;
use sdsfs::dataset::{publish, Dataset, OpenOptions, PublishOptions};
use sdsfs::format::path::RelPath;
use sdsfs::storage::{
    CloudOptions, CloudStore, CreateOutcome, ErrorKind, ObjectInfo, ObjectStore, RetryPolicy,
    StorageError, Version,
};

/// A `moto_server` child process, killed on drop.
struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    fn start() -> Moto {
        let exe = common::repo_root().join(".venv/bin/moto_server");
        assert!(
            exe.exists(),
            "{} missing: run scripts/setup-test-env",
            exe.display()
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let child = Command::new(exe)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn moto_server");
        let moto = Moto { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if moto.request("GET", "/", b"").is_some() {
                return moto;
            }
            assert!(
                Instant::now() < deadline,
                "moto_server not ready after 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A minimal HTTP/1.1 request; the status code, or `None` when nothing answers.
    fn request(&self, method: &str, path: &str, body: &[u8]) -> Option<u16> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        );
        stream.write_all(head.as_bytes()).ok()?;
        stream.write_all(body).ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        response.split(' ').nth(1)?.parse().ok()
    }

    fn bucket(&self, name: &str) {
        assert_eq!(self.request("PUT", &format!("/{name}"), b""), Some(200));
    }

    fn store(&self, url: &str) -> CloudStore {
        let options = CloudOptions {
            retry: RetryPolicy {
                attempts: 3,
                base: Duration::from_millis(5),
                cap: Duration::from_millis(20),
            },
            endpoint: Some(self.endpoint()),
            region: Some("us-east-1".into()),
            allow_http: Some(true),
            access_key_id: Some("test".into()),
            secret_access_key: Some("test".into()),
            ..CloudOptions::default()
        };
        CloudStore::open(url, &options).unwrap()
    }

    /// The environment `sds` and `sdsfs` need to reach this server.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("SDS_RETRY_BASE_MS", "10".into()),
        ]
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rel(path: &str) -> RelPath {
    RelPath::new(path).unwrap()
}

#[test]
fn objects_reads_creates_and_generations() {
    let moto = Moto::start();
    moto.bucket("ops");
    let store = moto.store("s3://ops/some/prefix");
    let a = rel("dir/a.bin");
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();

    assert!(store.read(&a, None).unwrap_err().is_not_found());
    assert!(store.info(&a, None).unwrap_err().is_not_found());
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
    assert!(err
        .to_string()
        .starts_with("s3://ops/some/prefix/dir/a.bin"));

    assert_eq!(store.read(&a, None).unwrap(), data);
    assert_eq!(
        store.read_range(&a, 100..2100, None).unwrap(),
        &data[100..2100]
    );
    assert_eq!(
        store.read_range(&a, 9_990..10_000, None).unwrap(),
        &data[9_990..]
    );
    assert!(store
        .read_range(&a, 10_000..10_000, None)
        .unwrap()
        .is_empty());
    for bad in [9_990..10_001, 20_000..20_010, 10_001..10_001] {
        let err = store.read_range(&a, bad.clone(), None).unwrap_err();
        assert!(
            matches!(err, StorageError::OutOfRange { size: 10_000, .. }),
            "{bad:?}: {err}"
        );
    }
    let info: ObjectInfo = store.info(&a, None).unwrap();
    assert_eq!(info.size, 10_000);
    assert!(info.version.etag.is_some() && info.version.generation.is_none());
    assert!(info.modified.is_some());
    assert_eq!(store.read_limited(&a, None, 10_000).unwrap(), data);
    let err = store.read_limited(&a, None, 9_999).unwrap_err();
    assert!(
        matches!(err, StorageError::TooLarge { size: 10_000, .. }),
        "{err}"
    );

    // S3 has no numeric generations: pinned references are refused, not ignored.
    assert!(!store.supports_generations());
    for err in [
        store.read(&a, Some(1)).unwrap_err(),
        store.read_range(&a, 0..10, Some(1)).unwrap_err(),
        store.info(&a, Some(1)).unwrap_err(),
    ] {
        assert!(
            matches!(err, StorageError::GenerationsUnsupported { .. }),
            "{err}"
        );
    }

    // create_from_file: streamed compare on an existing object.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, &data).unwrap();
    let b = rel("b.bin");
    assert_eq!(
        store.create_from_file(&b, &file).unwrap(),
        CreateOutcome::Created
    );
    assert_eq!(
        store.create_from_file(&b, &file).unwrap(),
        CreateOutcome::AlreadyIdentical
    );
    std::fs::write(&file, &other).unwrap();
    assert!(matches!(
        store.create_from_file(&b, &file).unwrap_err(),
        StorageError::Collision { .. }
    ));

    // Compare-and-swap on the ETag.
    let c = rel("annotations/catalog.json");
    assert!(store.read_versioned(&c).unwrap().is_none());
    let v1 = store.compare_and_swap(&c, b"one", None).unwrap();
    assert!(matches!(
        store.compare_and_swap(&c, b"again", None).unwrap_err(),
        StorageError::PreconditionFailed { .. }
    ));
    let (bytes, seen) = store.read_versioned(&c).unwrap().unwrap();
    assert_eq!(bytes, "one");
    assert_eq!(seen.etag, v1.etag);
    let v2 = store.compare_and_swap(&c, b"two", Some(&seen)).unwrap();
    assert_ne!(v2.etag, v1.etag);
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
}

#[test]
fn concurrent_compare_and_swap_writers_lose_no_update() {
    let moto = Moto::start();
    moto.bucket("cas");
    let store = Arc::new(moto.store("s3://cas"));
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
                for _ in 0..EACH {
                    loop {
                        let (bytes, version) = store.read_versioned(&counter).unwrap().unwrap();
                        let n: u64 = std::str::from_utf8(&bytes).unwrap().parse().unwrap();
                        match store.compare_and_swap(
                            &counter,
                            (n + 1).to_string().as_bytes(),
                            Some(&version),
                        ) {
                            Ok(_) => break,
                            Err(e) if e.kind() == ErrorKind::Conflict => {
                                conflicts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let final_value = store.read(&counter, None).unwrap();
    assert_eq!(final_value, (WRITERS * EACH).to_string());
    eprintln!(
        "{} increments, {} precondition failures retried",
        WRITERS * EACH,
        conflicts.load(Ordering::Relaxed)
    );
}

/// Counts the bytes and requests of content reads (whole and ranged).
#[derive(Debug)]
struct ByteCounter {
    inner: Arc<dyn ObjectStore>,
    bytes: AtomicU64,
    reads: AtomicU64,
}

impl ByteCounter {
    fn take(&self) -> (u64, u64) {
        (
            self.bytes.swap(0, Ordering::SeqCst),
            self.reads.swap(0, Ordering::SeqCst),
        )
    }

    fn count(&self, result: Result<Bytes, StorageError>) -> Result<Bytes, StorageError> {
        if let Ok(bytes) = &result {
            self.bytes.fetch_add(bytes.len() as u64, Ordering::SeqCst);
            self.reads.fetch_add(1, Ordering::SeqCst);
        }
        result
    }
}

impl ObjectStore for ByteCounter {
    fn describe(&self, path: &RelPath) -> String {
        self.inner.describe(path)
    }
    fn read(&self, path: &RelPath, generation: Option<u64>) -> Result<Bytes, StorageError> {
        self.count(self.inner.read(path, generation))
    }
    fn read_limited(
        &self,
        path: &RelPath,
        generation: Option<u64>,
        max_bytes: u64,
    ) -> Result<Bytes, StorageError> {
        self.count(self.inner.read_limited(path, generation, max_bytes))
    }
    fn read_range(
        &self,
        path: &RelPath,
        range: Range<u64>,
        generation: Option<u64>,
    ) -> Result<Bytes, StorageError> {
        self.count(self.inner.read_range(path, range, generation))
    }
    fn info(&self, path: &RelPath, generation: Option<u64>) -> Result<ObjectInfo, StorageError> {
        self.inner.info(path, generation)
    }
    fn create(&self, path: &RelPath, data: &[u8]) -> Result<CreateOutcome, StorageError> {
        self.inner.create(path, data)
    }
    fn create_from_file(&self, path: &RelPath, file: &Path) -> Result<CreateOutcome, StorageError> {
        self.inner.create_from_file(path, file)
    }
    fn read_versioned(&self, path: &RelPath) -> Result<Option<(Bytes, Version)>, StorageError> {
        self.inner.read_versioned(path)
    }
    fn compare_and_swap(
        &self,
        path: &RelPath,
        data: &[u8],
        expected: Option<&Version>,
    ) -> Result<Version, StorageError> {
        self.inner.compare_and_swap(path, data, expected)
    }
    fn supports_generations(&self) -> bool {
        self.inner.supports_generations()
    }
}

#[test]
fn publish_to_s3_read_back_and_bytes_per_random_record() {
    let moto = Moto::start();
    moto.bucket("pub");
    let store: Arc<dyn ObjectStore> = Arc::new(moto.store("s3://pub/datasets/one"));
    let sizes = [40usize, 40, 40];
    let (receipts, records) = write_shards(store.as_ref(), &sizes);
    let options = PublishOptions::new("ds-s3", "snap-1");
    let summary = publish(store.as_ref(), &receipts, &options).unwrap();
    assert_eq!(summary.record_count, records.len() as u64);
    // Publishing again converges (create-only objects already identical).
    publish(store.as_ref(), &receipts, &options).unwrap();

    let counter = Arc::new(ByteCounter {
        inner: store.clone(),
        bytes: AtomicU64::new(0),
        reads: AtomicU64::new(0),
    });
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
    counter.take();
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
    let (bytes, requests) = counter.take();
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

fn sds(args: &[&str], env: &[(&'static str, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sds"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("run sds")
}

/// Uploads every file below `root` (create-only) under the store's prefix.
fn upload_tree(store: &dyn ObjectStore, root: &Path) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                store.create_from_file(&rel(&relative), &path).unwrap();
            }
        }
    }
}

/// Every file (content) and symbolic link (target) below `root`.
fn walk(root: &Path) -> BTreeMap<String, Vec<u8>> {
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
                let content = std::fs::read(&path).unwrap();
                assert_eq!(meta.len(), content.len() as u64, "{relative}");
                out.insert(relative, content);
            }
        }
    }
    out
}

#[test]
fn sds_info_and_a_fuse_mount_of_an_s3_copy_match_the_local_dataset() {
    let moto = Moto::start();
    moto.bucket("demo");
    let local = common::repo_root().join("fixtures/demo");
    let store = moto.store("s3://demo/copies/demo");
    upload_tree(&store, &local);
    let env = moto.env();
    let url = "s3://demo/copies/demo";

    let local_info = sds(&["info", local.to_str().unwrap()], &[]);
    let remote_info = sds(&["info", url], &env);
    assert!(
        remote_info.status.success(),
        "{}",
        String::from_utf8_lossy(&remote_info.stderr)
    );
    let local_text =
        String::from_utf8_lossy(&local_info.stdout).replace(local.to_str().unwrap(), "DS");
    let remote_text = String::from_utf8_lossy(&remote_info.stdout).replace(url, "DS");
    assert_eq!(local_text, remote_text);

    // A missing dataset is one line naming the location.
    let missing = sds(&["info", "s3://demo/nothing-here"], &env);
    assert!(!missing.status.success());
    let message = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(message.trim_end().lines().count(), 1, "{message}");
    assert!(message.contains("s3://demo/nothing-here"), "{message}");

    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let remote = MountGuard::mount_with_env(std::ffi::OsStr::new(url), &[], &env_refs);
    let reference = MountGuard::mount(&local, &[]);
    let remote_tree = walk(&remote.mountpoint);
    let local_tree = walk(&reference.mountpoint);
    assert!(!local_tree.is_empty());
    assert_eq!(
        remote_tree.keys().collect::<Vec<_>>(),
        local_tree.keys().collect::<Vec<_>>()
    );
    for (path, content) in &local_tree {
        assert!(remote_tree[path] == *content, "{path} differs");
    }
    eprintln!("{} mounted files identical", local_tree.len());
}

#[test]
fn unreachable_servers_are_transient_and_only_idempotent_calls_are_retried() {
    // A port nothing listens on: every request is refused at connect.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let options = CloudOptions {
        retry: RetryPolicy {
            attempts: 3,
            base: Duration::from_millis(50),
            cap: Duration::from_millis(200),
        },
        endpoint: Some(format!("http://127.0.0.1:{port}")),
        region: Some("us-east-1".into()),
        allow_http: Some(true),
        access_key_id: Some("test".into()),
        secret_access_key: Some("test".into()),
        ..CloudOptions::default()
    };
    let store = CloudStore::open("s3://nowhere/p", &options).unwrap();
    let path = rel("root.json");

    // Two retries, waiting at least half of 50 ms and of 100 ms (equal jitter).
    let started = Instant::now();
    let err = store.read(&path, None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
    assert!(
        err.to_string().starts_with("s3://nowhere/p/root.json"),
        "{err}"
    );
    assert!(started.elapsed() >= Duration::from_millis(75));

    // Compare-and-swap is not idempotent: one attempt, the failure reported as is.
    let started = Instant::now();
    let err = store.compare_and_swap(&path, b"x", None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
    assert!(started.elapsed() < Duration::from_millis(75));
}
