//! The GCS backend against a real GCS XML-API server on loopback: `tests/python/gcs_server.py`
//! (a versioned bucket with generation preconditions, checking the JWT `object_store` signs
//! with the service-account key it is given through `GOOGLE_APPLICATION_CREDENTIALS`). Each
//! test starts its own server and kills it in a guard. The checks shared with S3 live in
//! tests/common/cloud.rs; this file adds what only GCS has: generations.

mod common;

use std::sync::Arc;

use common::annotate::race_rows;
use common::cli::sds_env;
use common::cloud::{
    annotation_race, assert_info_and_mount_match, compare_and_swap_race_on, demo,
    explicit_store_options_reach, info_and_mount_match_local, library_dataset_matches_local,
    live_generation, object_operations, publish_read_back_and_measure,
    race_is_caught_on_a_server_ignoring_preconditions, rel, write_pinned_dataset, CloudServer,
    FakeGcsServer,
};
use sdsfs::dataset::{Dataset, OpenOptions};
use sdsfs::format::documents::ids::snapshot_path;
use sdsfs::storage::{CloudOptions, CloudStore, ErrorKind, ObjectStore, StorageError};

#[test]
fn objects_reads_creates_and_generations() {
    let gcs = CloudServer::gcs(&["ops"]);
    let store = gcs.store("ops/some/prefix");
    let (data, v1, v2) = object_operations(&store, "gs://ops/some/prefix");
    assert!(store.supports_generations());
    let a = rel("dir/a.bin");
    let info = store.info(&a, None).unwrap();
    let a_generation = info
        .version
        .generation
        .expect("GCS objects have generations");
    assert!(info.version.etag.is_some());

    // Compare-and-swap went by generation: "one" at g1, "two" at g2 > g1.
    let c = rel("annotations/catalog.json");
    let (g1, g2) = (v1.generation.unwrap(), v2.generation.unwrap());
    assert!(g2 > g1, "{g1} then {g2}");

    // The replaced generation stays readable, by every kind of read.
    assert_eq!(store.read(&c, Some(g1)).unwrap(), "one");
    assert_eq!(store.read(&c, Some(g2)).unwrap(), "two");
    assert_eq!(store.read_range(&c, 1..3, Some(g1)).unwrap(), "ne");
    assert_eq!(store.read_limited(&c, Some(g1), 3).unwrap(), "one");
    let old = store.info(&c, Some(g1)).unwrap();
    assert_eq!((old.size, old.version.generation), (3, Some(g1)));
    assert_eq!(store.read(&a, Some(a_generation)).unwrap(), data);
    assert!(store
        .read_range(&a, 10_000..10_000, Some(a_generation))
        .unwrap()
        .is_empty());

    // A generation that never existed: a mismatch naming the object and both generations.
    let missing = g2 + 1_000_000;
    for err in [
        store.read(&c, Some(missing)).unwrap_err(),
        store.read_range(&c, 0..1, Some(missing)).unwrap_err(),
        store.read_limited(&c, Some(missing), 10).unwrap_err(),
        store.info(&c, Some(missing)).unwrap_err(),
    ] {
        match &err {
            StorageError::GenerationMismatch {
                object,
                expected,
                actual,
            } => {
                assert_eq!(object, "gs://ops/some/prefix/annotations/catalog.json");
                assert_eq!((*expected, *actual), (missing, g2));
            }
            other => panic!("{other}"),
        }
        let message = err.to_string();
        assert!(message.contains(&missing.to_string()) && message.contains(&g2.to_string()));
    }
    // No object at all: not found, whatever the generation.
    assert!(store
        .read(&rel("nothing"), Some(g1))
        .unwrap_err()
        .is_not_found());
    assert!(store
        .info(&rel("nothing"), Some(g1))
        .unwrap_err()
        .is_not_found());
}

#[test]
fn a_dataset_pinned_to_generations_reads_them_after_the_objects_are_replaced() {
    let gcs = CloudServer::gcs(&["pinned"]);
    let store: Arc<dyn ObjectStore> = Arc::new(gcs.store("pinned/ds"));
    let (records, entries) =
        write_pinned_dataset(store.as_ref(), |p| live_generation(store.as_ref(), p));
    let read_all = |dataset: &Dataset| -> Vec<_> {
        (0..dataset.len())
            .map(|i| dataset.read_record(i).unwrap())
            .collect()
    };
    let dataset = Dataset::open(store.clone(), OpenOptions::default()).unwrap();
    assert_eq!(read_all(&dataset), records);

    // Replace the live objects behind the pinned references: shard 1's data object by shard
    // 0's bytes (a valid shard holding other records), the snapshot document by junk.
    let (shard0, shard1) = (
        entries[0].data.path.relative().unwrap(),
        entries[1].data.path.relative().unwrap(),
    );
    let other = store.read(shard0, None).unwrap();
    let current = store.info(shard1, None).unwrap().version;
    store
        .compare_and_swap(shard1, &other, Some(&current))
        .unwrap();
    assert_eq!(store.read(shard1, None).unwrap(), other);
    let snapshot = snapshot_path("pinned-1").unwrap();
    let current = store.info(&snapshot, None).unwrap().version;
    store
        .compare_and_swap(&snapshot, b"{}", Some(&current))
        .unwrap();

    // A fresh open still sees exactly the pinned dataset.
    let reopened = Dataset::open(store.clone(), OpenOptions::default()).unwrap();
    assert_eq!(reopened.len(), records.len() as u64);
    assert_eq!(read_all(&reopened), records);
}

#[test]
fn a_pinned_generation_that_is_gone_fails_its_records_clearly() {
    let gcs = CloudServer::gcs(&["stale"]);
    let store: Arc<dyn ObjectStore> = Arc::new(gcs.store("stale/ds"));
    // Data shards pinned one generation past the live one; everything else at the live one.
    let (records, entries) = write_pinned_dataset(store.as_ref(), |p| {
        let live = live_generation(store.as_ref(), p)?;
        Some(if p.as_str().starts_with("objects/data/") {
            live + 1
        } else {
            live
        })
    });
    let dataset = Dataset::open(store.clone(), OpenOptions::default()).unwrap();
    // Metadata is pinned right: rows still answer.
    assert_eq!(dataset.record_meta(4).unwrap(), records[4].meta());
    let err = dataset.read_record(4).unwrap_err().to_string();
    let pinned = entries[1].data.generation.unwrap();
    assert!(
        err.contains(&format!("gs://stale/ds/{}", entries[1].data.path.as_str()))
            && err.contains(&format!("generation {pinned} was required")),
        "{err}"
    );
}

#[test]
fn a_foreign_key_is_refused_permanently() {
    let gcs = CloudServer::gcs(&["auth"]);
    let other = CloudServer::gcs(&[]);
    let options = CloudOptions {
        google_credentials: Some(other.credentials()),
        ..gcs.options()
    };
    let store = CloudStore::open("gs://auth/p", &options).unwrap();
    let err = store.read(&rel("root.json"), None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permanent, "{err}");
    let message = err.to_string();
    assert!(
        message.starts_with("gs://auth/p/root.json") && message.contains("401"),
        "{message}"
    );
    // The right key reaches the same (missing) object.
    assert!(gcs
        .store("auth/p")
        .read(&rel("root.json"), None)
        .unwrap_err()
        .is_not_found());
}

#[test]
fn concurrent_compare_and_swap_writers_lose_no_update() {
    compare_and_swap_race_on(&CloudServer::gcs(&["cas"]));
}

/// The same race against the GCS server started to ignore `x-goog-if-generation-match` is
/// caught losing updates: the check above can fail.
#[test]
fn the_race_check_catches_a_server_that_ignores_preconditions() {
    race_is_caught_on_a_server_ignoring_preconditions(&CloudServer::gcs_ignoring_preconditions(&[
        "cas",
    ]));
}

#[test]
fn publish_to_gcs_read_back_and_bytes_per_random_record() {
    let gcs = CloudServer::gcs(&["pub"]);
    publish_read_back_and_measure(Arc::new(gcs.store("pub/datasets/one")), "ds-gcs");
}

#[test]
fn sds_info_and_a_fuse_mount_of_a_gcs_copy_match_the_local_dataset() {
    let gcs = CloudServer::gcs(&["demo"]);
    info_and_mount_match_local(&gcs, "demo");
}

/// A dataset the `signal-dataset` library wrote, served from GCS: `sds info`, `sds verify
/// --deep` and the mount agree with the local copy.
#[test]
fn a_dataset_the_library_wrote_reads_through_gcs_as_it_does_locally() {
    let gcs = CloudServer::gcs(&["lib"]);
    assert!(library_dataset_matches_local(&gcs, "lib") > 0);
}

#[test]
fn concurrent_annotation_publishers_on_gcs_lose_no_set() {
    let gcs = CloudServer::gcs(&["race"]);
    annotation_race(&gcs, "race", 8, 2);
}

/// An independent GCS emulator agrees on reads: the same `sds info` and the same mounted tree,
/// through object_store's emulator route (`GOOGLE_SERVICE_ACCOUNT` naming `gcs_base_url`).
/// It cannot stand in for our server, though: it refuses object_store's uploads.
#[test]
fn fake_gcs_server_serves_the_same_tree_but_refuses_object_store_uploads() {
    let fake = FakeGcsServer::start("demo-bucket", "copies/demo", &demo());
    let env = fake.env();
    let url = "gs://demo-bucket/copies/demo";
    assert_info_and_mount_match(url, "gs://demo-bucket/nothing-here", &env);

    let dir = tempfile::tempdir().unwrap();
    let rows = race_rows(dir.path());
    let args = [
        "annotate", url, "--name", "x", "--fill", "skipped", "--rows",
    ];
    let out = sds_env(&[&args[..], &[rows.to_str().unwrap()]].concat(), &env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains(url)
            && stderr.contains("400 Bad Request")
            && stderr.contains("invalid uploadType"),
        "{stderr}"
    );
}

/// `--endpoint-url` and `-o endpoint_url=` instead of `GOOGLE_BASE_URL`, with only the
/// credentials file in the environment.
#[test]
fn an_explicit_endpoint_reaches_sds_and_a_daemonized_mount() {
    let gcs = CloudServer::gcs(&["explicit"]);
    explicit_store_options_reach(&gcs, "explicit");
}
