//! S3 and GCS under faults: `tests/python/fault_proxy.py` between the client and the server
//! (moto, or our GCS server `tests/python/gcs_server.py`) answers a share of requests with
//! 503/500/429, resets connections before forwarding, after forwarding (the server applied the
//! request, the response is lost) and mid-body. Publications, mounts and annotators must still
//! succeed with exactly the bytes of a clean run; a read that finally fails is EIO on that file
//! only (ETIMEDOUT when the server outlasts `--request-timeout`); compare-and-swap is never
//! repeated blindly. Also: multipart create-only uploads,
//! parallel reads and read-ahead, counted at the proxy.
//!
//! Every check runs on both services, as `CHECK::s3` and `CHECK::gcs`.

mod common;

/// Runs each named check (a `fn(Kind)`) on S3 and on GCS, as the tests `NAME::s3` and
/// `NAME::gcs`.
macro_rules! on_both_services {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn s3() {
                super::$name(super::Kind::S3)
            }
            #[test]
            fn gcs() {
                super::$name(super::Kind::Gcs)
            }
        }
    )*};
}

on_both_services!(
    a_publication_through_faults_is_byte_identical_to_a_clean_one,
    a_mount_through_faults_reads_every_file_exactly,
    when_every_request_fails_a_read_is_eio_on_that_file_and_the_mount_stays_up,
    a_data_read_slower_than_the_request_timeout_is_etimedout_and_the_mount_stays_up,
    compare_and_swap_is_sent_once_and_concurrent_annotators_converge_through_faults,
    large_files_go_up_in_bounded_parts_and_stay_create_only,
    independent_reads_overlap_and_sequential_scans_read_ahead,
);

use std::collections::BTreeSet;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cloud::{walk, CloudServer, FaultProxy, Kind};
use common::datasets::{record, write_shards};
use common::mount::MountGuard;
use sdsfs::dataset::{publish, Dataset, OpenOptions, PublishOptions};
use sdsfs::format::documents::{CatalogPointer, Revision};
use sdsfs::format::json::JsonLimits;
use sdsfs::format::path::RelPath;
use sdsfs::storage::{CloudStore, CreateOutcome, ErrorKind, ObjectStore, StorageError};

/// Every kind of failure the proxy can inject.
const ALL_FAULTS: &[&str] = &[
    "503",
    "500",
    "429",
    "reset_before",
    "reset_after",
    "reset_mid",
];

fn rel(path: &str) -> RelPath {
    RelPath::new(path).unwrap()
}

fn run(program: &str, args: &[&str], env: &[(&'static str, String)]) -> Output {
    Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("run")
}

fn assert_ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn env_refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn a_publication_through_faults_is_byte_identical_to_a_clean_one(kind: Kind) {
    let server = CloudServer::start(kind, &["pub"]);
    let proxy = FaultProxy::start(&server);
    let clean = server.store("pub/clean");
    let faulty = proxy.store("pub/faulty", 12);
    let sizes = [25usize, 25, 10];
    let options = PublishOptions::new("ds-faults", "snap-1");
    let (receipts, records) = write_shards(&clean, &sizes);
    publish(&clean, &receipts, &options).unwrap();

    proxy.faults(0.3, ALL_FAULTS);
    let (receipts, _) = write_shards(&faulty, &sizes);
    publish(&faulty, &receipts, &options).unwrap();
    // Publishing again converges: every create-only object is found identical.
    publish(&faulty, &receipts, &options).unwrap();
    let stats = proxy.stats(false);
    eprintln!("{kind:?}: publication through faults: {stats}");
    assert!(proxy.faults_injected() >= 10, "{stats}");
    for mode in ["503", "reset_after", "reset_mid"] {
        assert!(stats["injected"][mode].as_u64().unwrap() > 0, "{stats}");
    }

    // Same objects, same bytes.
    let strip = |keys: Vec<String>, prefix: &str| -> BTreeSet<String> {
        keys.into_iter()
            .map(|k| k.strip_prefix(prefix).unwrap().to_string())
            .collect()
    };
    let clean_keys = strip(server.list_keys("pub", "clean/"), "clean/");
    let faulty_keys = strip(server.list_keys("pub", "faulty/"), "faulty/");
    assert!(clean_keys.len() >= 2 * sizes.len() + 3, "{clean_keys:?}");
    assert_eq!(clean_keys, faulty_keys);
    let bucket = server.store("pub");
    for key in &clean_keys {
        let clean = bucket.read(&rel(&format!("clean/{key}")), None).unwrap();
        let faulty = bucket.read(&rel(&format!("faulty/{key}")), None).unwrap();
        assert!(clean == faulty, "{key} differs");
    }

    // Read back through the faults, and verified deeply by `sds` through the faults.
    let dataset = Dataset::open(Arc::new(faulty), OpenOptions::default()).unwrap();
    for (ordinal, expected) in records.iter().enumerate() {
        assert_eq!(&dataset.read_record(ordinal as u64).unwrap(), expected);
    }
    let env = proxy.env(12);
    let out = run(
        env!("CARGO_BIN_EXE_sds"),
        &["verify", &server.url("pub/faulty"), "--deep"],
        &env,
    );
    assert_ok(&out, "sds verify --deep");
    eprintln!(
        "{kind:?}: {} objects identical; {} faults injected in all",
        clean_keys.len(),
        proxy.faults_injected()
    );
}

/// The demo dataset uploaded to `demo/ds` on a fresh server of `kind`.
fn server_with_demo(kind: Kind) -> CloudServer {
    let server = CloudServer::start(kind, &["demo"]);
    common::cloud::upload_tree(&server.store("demo/ds"), &common::cloud::demo());
    server
}

fn a_mount_through_faults_reads_every_file_exactly(kind: Kind) {
    let server = server_with_demo(kind);
    let proxy = FaultProxy::start(&server);
    proxy.faults(0.3, ALL_FAULTS);
    let env = proxy.env(12);
    let url = server.url("demo/ds");
    let remote = MountGuard::mount_with_env(url.as_ref(), &[], &env_refs(&env));
    let reference = MountGuard::mount(&common::cloud::demo(), &[]);
    let local_tree = common::cloud::assert_same_trees(&remote.mountpoint, &reference.mountpoint);
    assert!(local_tree.len() > 50);
    let bytes: usize = local_tree.values().map(Vec::len).sum();
    let stats = proxy.stats(false);
    eprintln!(
        "{kind:?}: {} files ({bytes} bytes) identical through the mount; proxy: {stats}",
        local_tree.len()
    );
    assert!(proxy.faults_injected() >= 5, "{stats}");
    assert!(
        remote.log_text().contains("retrying"),
        "{}",
        remote.log_text()
    );
}

/// `records/N/fields/...` files of record `n` in a walked tree, data files first.
fn files_of(tree: &std::collections::BTreeMap<String, Vec<u8>>, n: usize) -> Vec<String> {
    let prefix = format!("records/{n}/fields/");
    tree.keys()
        .filter(|k| k.starts_with(&prefix) && k.ends_with(".raw"))
        .cloned()
        .collect()
}

fn when_every_request_fails_a_read_is_eio_on_that_file_and_the_mount_stays_up(kind: Kind) {
    let server = server_with_demo(kind);
    let proxy = FaultProxy::start(&server);
    let env = proxy.env(3);
    let url = server.url("demo/ds");
    let remote = MountGuard::mount_with_env(url.as_ref(), &[], &env_refs(&env));
    let reference = MountGuard::mount(&common::cloud::demo(), &[]);
    let local_tree = walk(&reference.mountpoint);
    let good = &files_of(&local_tree, 0)[0];
    let bad = &files_of(&local_tree, 5)[0];
    // Listing reads every metadata row; one data file is read while storage is healthy.
    let listing = |root: &std::path::Path| {
        let mut names = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                names.push(entry.path());
                if entry.file_type().unwrap().is_dir() {
                    stack.push(entry.path());
                }
            }
        }
        names.len()
    };
    let entries = listing(&remote.mountpoint);
    assert_eq!(std::fs::read(remote.path(good)).unwrap(), local_tree[good]);

    proxy.faults(1.0, &["503"]);
    let started = Instant::now();
    let err = std::fs::read(remote.path(bad)).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(proxy.faults_injected() >= 3);
    // Only that file: what was read stays readable, the tree stays listable, the mount is up.
    assert_eq!(std::fs::read(remote.path(good)).unwrap(), local_tree[good]);
    assert_eq!(listing(&remote.mountpoint), entries);
    let status = run(
        env!("CARGO_BIN_EXE_sdsfs"),
        &["status", remote.mountpoint.to_str().unwrap()],
        &[],
    );
    let report = assert_ok(&status, "sdsfs status");
    eprintln!("{report}");
    assert!(
        report.contains("objects/data/") && report.contains("503"),
        "{report}"
    );
    let log = remote.log_text();
    assert!(
        log.contains("objects/data/") && log.contains("retrying"),
        "{log}"
    );

    // The failure is not remembered: once storage recovers, the same file reads exactly.
    proxy.faults(0.0, &[]);
    assert_eq!(std::fs::read(remote.path(bad)).unwrap(), local_tree[bad]);
}

fn a_data_read_slower_than_the_request_timeout_is_etimedout_and_the_mount_stays_up(kind: Kind) {
    let server = server_with_demo(kind);
    let proxy = FaultProxy::start(&server);
    // Two attempts of at most 1 s each, 10-80 ms apart.
    let env = proxy.env(2);
    let url = server.url("demo/ds");
    let remote =
        MountGuard::mount_with_env(url.as_ref(), &["--request-timeout", "1"], &env_refs(&env));
    let reference = MountGuard::mount(&common::cloud::demo(), &[]);
    let local_tree = walk(&reference.mountpoint);
    let good = &files_of(&local_tree, 0)[0];
    let slow = &files_of(&local_tree, 5)[0];
    assert_eq!(std::fs::read(remote.path(good)).unwrap(), local_tree[good]);

    // Every data-shard response now comes 4 s late: past the timeout, on each attempt.
    proxy.configure(serde_json::json!({
        "rate": 1.0, "modes": ["delay"], "delay_ms": 4000, "path_contains": "objects/data/",
    }));
    let started = Instant::now();
    let err = std::fs::read(remote.path(slow)).unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.raw_os_error(), Some(libc::ETIMEDOUT), "{err}");
    // The kernel asks twice (its read-ahead, then the page itself), each time two attempts
    // timed out after 1 s: about 4 s, not the server's 4 s per attempt.
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(8),
        "{took:?}"
    );
    let delayed = proxy.stats(false)["injected"]["delay"].as_u64().unwrap();
    eprintln!("{kind:?}: ETIMEDOUT after {took:?}, {delayed} delayed requests");
    assert!(delayed >= 2, "{delayed} delayed requests");
    let log = remote.log_text();
    assert!(
        log.contains("objects/data/") && log.contains("retrying"),
        "{log}"
    );

    // The mount stays up, and once the server answers in time the same file reads exactly.
    assert_eq!(std::fs::read(remote.path(good)).unwrap(), local_tree[good]);
    proxy.configure(serde_json::json!({"rate": 0.0, "modes": [], "path_contains": ""}));
    assert_eq!(std::fs::read(remote.path(slow)).unwrap(), local_tree[slow]);
}

fn compare_and_swap_is_sent_once_and_concurrent_annotators_converge_through_faults(kind: Kind) {
    let server = CloudServer::start(kind, &["ann"]);
    let clean = server.store("ann/ds");
    let (receipts, records) = write_shards(&clean, &[6, 6]);
    publish(&clean, &receipts, &PublishOptions::new("ds-ann", "snap-1")).unwrap();
    let proxy = FaultProxy::start(&server);

    // A swap whose response is lost: it happened, the client sees a transient error, and the
    // request was sent exactly once (no blind retry).
    let faulty = proxy.store("ann/ds", 8);
    let probe = rel("probe.json");
    proxy.faults(1.0, &["reset_after"]);
    let err = faulty.compare_and_swap(&probe, b"one", None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transient, "{err}");
    let stats = proxy.stats(true);
    let puts = stats["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["method"] == "PUT")
        .count();
    assert_eq!(puts, 1, "{stats}");
    assert_eq!(clean.read(&probe, None).unwrap(), "one");
    // A create-only write whose response is lost converges: the retry finds identical bytes.
    proxy.configure(serde_json::json!({"rate": 1.0, "modes": ["reset_after"], "limit": 1}));
    assert_eq!(
        faulty.create(&rel("probe2.json"), b"two").unwrap(),
        CreateOutcome::AlreadyIdentical
    );

    // Four annotators at once through 30% faults: all succeed, no set is lost.
    proxy.configure(serde_json::json!({"rate": 0.3, "modes": ALL_FAULTS, "limit": null}));
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.jsonl");
    std::fs::write(
        &rows,
        "{\"source_index\": 1, \"status\": \"failed\", \"detail_status\": \"x\"}\n",
    )
    .unwrap();
    let env = proxy.env(12);
    let url = server.url("ann/ds");
    let names: Vec<String> = (0..4).map(|i| format!("set-{i}")).collect();
    let children: Vec<_> = names
        .iter()
        .map(|name| {
            Command::new(env!("CARGO_BIN_EXE_sds"))
                .args(["annotate", &url, "--name", name, "--rows"])
                .arg(&rows)
                .args(["--fill", "skipped", "--records-per-shard", "4"])
                .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (name, child) in names.iter().zip(children) {
        let out = child.wait_with_output().unwrap();
        assert_ok(&out, name);
    }
    let stats = proxy.stats(false);
    eprintln!("{kind:?}: annotators through faults: {stats}");
    assert!(proxy.faults_injected() >= 5, "{stats}");
    proxy.faults(0.0, &[]);
    let dataset = Dataset::open(Arc::new(clean), OpenOptions::default()).unwrap();
    assert_eq!(dataset.len(), records.len() as u64);
    let store = dataset.store();
    let pointer = CatalogPointer::parse(
        &store.read(&rel("annotations/catalog.json"), None).unwrap(),
        &JsonLimits::CONTROL,
    )
    .unwrap();
    let revision = Revision::parse(
        &store.read(&pointer.revision.path, None).unwrap(),
        &JsonLimits::CONTROL,
    )
    .unwrap();
    let sets: BTreeSet<&String> = revision.sets.keys().collect();
    assert_eq!(
        sets,
        names.iter().collect::<BTreeSet<_>>(),
        "a set was lost"
    );
    let out = run(
        env!("CARGO_BIN_EXE_sds"),
        &["verify", &url, "--deep"],
        &server.env(),
    );
    assert_ok(&out, "sds verify --deep");
}

/// Deterministic bytes.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut bits = common::datasets::Bits::new(seed);
    (0..len).map(|_| bits.next() as u8).collect()
}

/// A store through `proxy` uploading files above 6 MiB in 5 MiB parts.
fn multipart_store(proxy: &FaultProxy, rest: &str, attempts: u32) -> CloudStore {
    let mut options = proxy.options(attempts);
    options.multipart_threshold = Some(6 << 20);
    options.part_size = Some(5 << 20);
    CloudStore::open(&proxy.server.url(rest), &options).unwrap()
}

/// Part uploads in the proxy log: `(partNumber, body bytes)`.
fn part_uploads(stats: &serde_json::Value) -> Vec<(u64, u64)> {
    stats["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["method"] == "PUT" && e["query"].as_str().unwrap().contains("partNumber"))
        .filter(|e| e["body"].as_u64().unwrap() > 0)
        .map(|e| {
            let query = e["query"].as_str().unwrap();
            let number = query
                .split('&')
                .find_map(|p| p.strip_prefix("partNumber="))
                .unwrap()
                .parse()
                .unwrap();
            (number, e["body"].as_u64().unwrap())
        })
        .collect()
}

fn large_files_go_up_in_bounded_parts_and_stay_create_only(kind: Kind) {
    let server = CloudServer::start(kind, &["multipart"]);
    let proxy = FaultProxy::start(&server);
    let store = multipart_store(&proxy, "multipart/ds", 12);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shard");
    let data = pattern(13 << 20, 1);
    std::fs::write(&file, &data).unwrap();
    let target = rel("objects/data/big.array_record");

    assert_eq!(
        store.create_from_file(&target, &file).unwrap(),
        CreateOutcome::Created
    );
    assert!(store.read(&target, None).unwrap() == data);
    // Three parts of at most 5 MiB each: the upload never held more than two parts
    // (`UPLOADERS`), i.e. 10 MiB of a 13 MiB file; no request carried the whole file.
    let stats = proxy.stats(true);
    let parts = part_uploads(&stats);
    let numbers: BTreeSet<u64> = parts.iter().map(|p| p.0).collect();
    assert_eq!(numbers, BTreeSet::from([1, 2, 3]), "{parts:?}");
    assert!(parts.iter().all(|p| p.1 <= 5 << 20), "{parts:?}");
    let largest_body = stats["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["body"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(largest_body <= 5 << 20, "{largest_body}");
    // The temporary object is gone; only the target remains (and on GCS no upload is open).
    assert_eq!(
        server.list_keys("multipart", "ds/"),
        vec!["ds/objects/data/big.array_record".to_string()]
    );

    // Same bytes again: identical, nothing uploaded. Different bytes: a collision.
    proxy.reset();
    assert_eq!(
        store.create_from_file(&target, &file).unwrap(),
        CreateOutcome::AlreadyIdentical
    );
    assert!(part_uploads(&proxy.stats(true)).is_empty());
    let mut other = data.clone();
    other[9 << 20] ^= 1;
    std::fs::write(&file, &other).unwrap();
    let err = store.create_from_file(&target, &file).unwrap_err();
    assert!(matches!(err, StorageError::Collision { .. }), "{err}");
    assert!(store.read(&target, None).unwrap() == data);

    // Through 30% faults (lost responses included), a new object still arrives whole.
    proxy.faults(0.3, ALL_FAULTS);
    let second = rel("objects/data/second.array_record");
    let outcome = store.create_from_file(&second, &file).unwrap();
    assert!(
        matches!(
            outcome,
            CreateOutcome::Created | CreateOutcome::AlreadyIdentical
        ),
        "{outcome:?}"
    );
    proxy.faults(0.0, &[]);
    assert!(store.read(&second, None).unwrap() == other);
    eprintln!("{kind:?}: multipart through faults: {}", proxy.stats(false));
    assert!(proxy.faults_injected() > 0);
}

/// A dataset of `count` records in one shard at `bucket/ds`; returns the records.
fn one_shard_dataset(
    server: &CloudServer,
    bucket: &str,
    count: usize,
) -> Vec<sdsfs::format::record::Record> {
    let store = server.store(&format!("{bucket}/ds"));
    let (receipts, _) = write_shards(&store, &[count]);
    publish(&store, &receipts, &PublishOptions::new("ds-ra", "snap-1")).unwrap();
    (0..count).map(record).collect()
}

/// GETs of the data shard in the proxy log: `(range header, finished)`.
fn data_gets(stats: &serde_json::Value) -> Vec<(String, bool)> {
    stats["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["method"] == "GET" && e["path"].as_str().unwrap().contains("/objects/data/"))
        .map(|e| {
            (
                e["range"].as_str().unwrap_or("").to_string(),
                e.get("end").is_some(),
            )
        })
        .collect()
}

fn range_header(span: std::ops::Range<u64>) -> String {
    format!("bytes={}-{}", span.start, span.end - 1)
}

fn independent_reads_overlap_and_sequential_scans_read_ahead(kind: Kind) {
    let server = CloudServer::start(kind, &["readahead"]);
    let records = one_shard_dataset(&server, "readahead", 24);
    let proxy = FaultProxy::start(&server);
    let open = || {
        let store = proxy.store("readahead/ds", 3);
        Arc::new(Dataset::open(Arc::new(store), OpenOptions::default()).unwrap())
    };
    // Whole records: the metadata shard is read too, but only data-shard GETs are counted.
    let payload = |dataset: &Dataset, ordinal: u64| dataset.read_record(ordinal).unwrap();
    let expected = |ordinal: usize| records[ordinal].clone();

    // Parallel: eight threads, different records, each request held 150 ms by the proxy.
    let dataset = open();
    payload(&dataset, 0);
    proxy.configure(serde_json::json!({"latency_ms": 150}));
    proxy.reset();
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let dataset = dataset.clone();
            std::thread::spawn(move || {
                let ordinal = 3 + t * 2;
                (ordinal, dataset.read_record(ordinal).unwrap())
            })
        })
        .collect();
    for t in threads {
        let (ordinal, bytes) = t.join().unwrap();
        assert_eq!(bytes, expected(ordinal as usize), "record {ordinal}");
    }
    let stats = proxy.stats(false);
    eprintln!("parallel reads: {stats}");
    assert!(stats["max_in_flight"].as_u64().unwrap() >= 4, "{stats}");
    proxy.configure(serde_json::json!({"latency_ms": 0}));

    // Sequential: reading record 1 after record 0 fetches the chunks of 2 and 3 in the
    // background; they are in the log, finished, before the reader asks for them.
    let dataset = open();
    let shard = dataset.data_shard(&dataset.locate(0).unwrap()).unwrap();
    let spans: Vec<String> = (0..6)
        .map(|i| range_header(shard.chunk_span(i).unwrap()))
        .collect();
    assert_eq!(payload(&dataset, 0), expected(0));
    proxy.reset();
    assert_eq!(payload(&dataset, 1), expected(1));
    let deadline = Instant::now() + Duration::from_secs(5);
    let before = loop {
        let gets = data_gets(&proxy.stats(true));
        let done = |span: &String| gets.iter().any(|(r, finished)| r == span && *finished);
        if done(&spans[2]) && done(&spans[3]) {
            break gets;
        }
        assert!(Instant::now() < deadline, "no read-ahead: {gets:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(before.len(), 3, "{before:?}");
    for ordinal in 2..6 {
        assert_eq!(payload(&dataset, ordinal), expected(ordinal as usize));
    }
    std::thread::sleep(Duration::from_millis(300));
    let after = data_gets(&proxy.stats(true));
    for (i, span) in spans.iter().enumerate().skip(1) {
        let count = after.iter().filter(|(r, _)| r == span).count();
        assert_eq!(count, 1, "chunk {i} fetched {count} times: {after:?}");
    }
    eprintln!("sequential scan of records 1..6: {} GETs", after.len());

    // Random access: no prefetch, one GET per read.
    let dataset = open();
    payload(&dataset, 0);
    proxy.reset();
    let picks = [7u64, 2, 11, 4, 19, 9, 15];
    for &ordinal in &picks {
        assert_eq!(payload(&dataset, ordinal), expected(ordinal as usize));
    }
    std::thread::sleep(Duration::from_millis(300));
    let gets = data_gets(&proxy.stats(true));
    assert_eq!(gets.len(), picks.len(), "{gets:?}");
}
