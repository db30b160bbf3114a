//! The S3 backend against a real S3 server on loopback: moto's S3 (from the test venv, see
//! `scripts/setup-test-env`) served one request at a time by `tests/python/s3_server.py`, so
//! conditional writes are atomic (`moto_server` itself races them). Each test starts its own
//! server, which binds a free port itself, and kills it in a guard. The checks shared with GCS
//! live in tests/common/cloud.rs.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cloud::{
    annotation_race, compare_and_swap_race_on, explicit_store_options_reach, free_port,
    info_and_mount_match_local, library_dataset_matches_local, library_reference_view_on_s3,
    object_operations, publish_read_back_and_measure,
    race_is_caught_on_a_server_ignoring_preconditions, rel, write_pinned_dataset, CloudServer,
};
use sdsfs::dataset::{Dataset, OpenOptions};
use sdsfs::storage::{CloudOptions, CloudStore, ErrorKind, ObjectStore, RetryPolicy, StorageError};

#[test]
fn objects_reads_creates_and_generations() {
    let moto = CloudServer::moto(&["ops"]);
    let store = moto.store("ops/some/prefix");
    let (_, v1, v2) = object_operations(&store, "s3://ops/some/prefix");
    // S3 compares ETags; it has no numeric generation.
    assert!(v1.etag.is_some() && v1.generation.is_none() && v2.etag.is_some());
    let a = rel("dir/a.bin");
    assert!(store.info(&a, None).unwrap().version.generation.is_none());

    // Pinned references are refused, not ignored.
    assert!(!store.supports_generations());
    for err in [
        store.read(&a, Some(1)).unwrap_err(),
        store.read_range(&a, 0..10, Some(1)).unwrap_err(),
        store.read_limited(&a, Some(1), 100).unwrap_err(),
        store.info(&a, Some(1)).unwrap_err(),
    ] {
        assert!(
            matches!(err, StorageError::GenerationsUnsupported { .. }),
            "{err}"
        );
    }
}

#[test]
fn a_dataset_with_generation_references_is_refused_clearly_on_s3() {
    let moto = CloudServer::moto(&["pinned"]);
    let store: Arc<dyn ObjectStore> = Arc::new(moto.store("pinned/ds"));
    write_pinned_dataset(store.as_ref(), |_| Some(7));
    // The root's snapshot reference carries a generation: opening reads it, and must refuse.
    let err = Dataset::open(store, OpenOptions::default()).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("s3://pinned/ds/snapshots/")
            && message.contains("only GCS objects have generations"),
        "{message}"
    );
    // The CLI says the same in one line.
    let out = common::cli::sds_env(&["info", "s3://pinned/ds"], &moto.env());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("only GCS objects have generations")
            && stderr.trim_end().lines().count() == 1,
        "{stderr}"
    );
}

#[test]
fn concurrent_compare_and_swap_writers_lose_no_update() {
    compare_and_swap_race_on(&CloudServer::moto(&["cas"]));
}

/// The same race against the S3 server started to drop `If-Match` / `If-None-Match` is caught
/// losing updates: the check above can fail.
#[test]
fn the_race_check_catches_a_server_that_ignores_preconditions() {
    race_is_caught_on_a_server_ignoring_preconditions(&CloudServer::s3_ignoring_preconditions(&[
        "cas",
    ]));
}

#[test]
fn publish_to_s3_read_back_and_bytes_per_random_record() {
    let moto = CloudServer::moto(&["pub"]);
    publish_read_back_and_measure(Arc::new(moto.store("pub/datasets/one")), "ds-s3");
}

#[test]
fn sds_info_and_a_fuse_mount_of_an_s3_copy_match_the_local_dataset() {
    let moto = CloudServer::moto(&["demo"]);
    info_and_mount_match_local(&moto, "demo");
}

/// A dataset the `signal-dataset` library wrote, served from S3: `sds info`, `sds verify
/// --deep` and the mount agree with the local copy.
#[test]
fn a_reference_view_the_library_published_on_s3_mounts_with_the_library_s_bytes() {
    let moto = CloudServer::moto(&["views"]);
    assert_eq!(library_reference_view_on_s3(&moto, "views"), 9);
}

#[test]
fn a_dataset_the_library_wrote_reads_through_s3_as_it_does_locally() {
    let moto = CloudServer::moto(&["lib"]);
    assert!(library_dataset_matches_local(&moto, "lib") > 0);
}

#[test]
fn concurrent_annotation_publishers_on_s3_lose_no_set() {
    let moto = CloudServer::moto(&["race"]);
    annotation_race(&moto, "race", 8, 2);
}

#[test]
fn unreachable_servers_are_transient_and_only_idempotent_calls_are_retried() {
    // A port nothing listens on: every request is refused at connect.
    let port = free_port();
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

/// `--endpoint-url`, `--region`, `--allow-http` and their `-o` forms, with only the keys in the
/// environment.
#[test]
fn explicit_endpoint_region_and_allow_http_reach_sds_and_a_daemonized_mount() {
    let moto = CloudServer::moto(&["explicit"]);
    explicit_store_options_reach(&moto, "explicit");
}

/// `sds demo s3://BUCKET/PREFIX` publishes the demo into the bucket, byte for byte the committed
/// demo, and writes nothing locally (it once made a directory `./s3:/BUCKET/PREFIX`).
#[test]
fn sds_demo_publishes_into_a_bucket() {
    let moto = CloudServer::moto(&["made"]);
    let cwd = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sds"))
        .args(["demo", &moto.url("made/demo")])
        .envs(moto.env().iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(cwd.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_dir(cwd.path()).unwrap().count(),
        0,
        "nothing local"
    );
    let store = moto.store("made/demo");
    let files = common::datasets::files_below(&common::cloud::demo());
    assert_eq!(files.len(), 10, "the demo's objects");
    for (relative, path) in files {
        let stored = store.read(&rel(&relative), None).unwrap();
        assert_eq!(stored.as_ref(), std::fs::read(&path).unwrap(), "{relative}");
    }
}
