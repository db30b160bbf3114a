//! The GCS backend against a real GCS XML-API server on loopback: `tests/python/gcs_server.py`
//! (a versioned bucket with generation preconditions, checking the JWT `object_store` signs
//! with the service-account key it is given through `GOOGLE_APPLICATION_CREDENTIALS`). Each
//! test starts its own server and kills it in a guard. The checks shared with S3 live in
//! tests/common/cloud.rs; this file adds what only GCS has: generations, and the
//! `signal-dataset` library writing onto GCS through its own `gs://` store (the server's JSON
//! API, reached through the library's emulator variables), read back by both sides.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::annotate::race_rows;
use common::cli::{assert_verify_deep, sds_env};
use common::cloud::{
    annotation_race, assert_info_and_mount_match, compare_and_swap_race_on, demo,
    explicit_store_options_reach, info_and_mount_match_local, library_dataset_matches_local,
    live_generation, object_operations, publish_read_back_and_measure, python_env,
    race_is_caught_on_a_server_ignoring_preconditions, rel, write_pinned_dataset, CloudServer,
    FakeGcsServer,
};
use common::mount::MountGuard;
use sdsfs::dataset::{AbsoluteReferences, Dataset, OpenOptions, StorageOpener};
use sdsfs::format::documents::ids::snapshot_path;
use sdsfs::format::record::Field;
use sdsfs::storage::{CloudOptions, CloudStore, ErrorKind, ObjectStore, StorageError};
use serde_json::json;

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
    // Through a mount: the record's data answers ESTALE, logged with the object and the
    // generations; its row still reads.
    let env = gcs.env();
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mount = MountGuard::mount_with_env(std::ffi::OsStr::new("gs://stale/ds"), &[], &env_refs);
    let fields = mount.path("records/4/fields");
    let raw = std::fs::read_dir(&fields)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "raw"))
        .unwrap_or_else(|| panic!("no .raw file in {}", fields.display()));
    let error = std::fs::read(&raw).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::ESTALE), "{error}");
    assert!(std::fs::read(mount.path("records/4/record.json")).is_ok());
    let log = mount.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("ESTALE"))
        .unwrap_or_else(|| panic!("no ESTALE line: {log}"));
    assert!(
        line.contains("record 4") && line.contains(&format!("generation {pinned} was required")),
        "{line}"
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

/// The bucket of [`the_library_writes_straight_onto_gcs_and_everything_reads_it_as_it_does`]
/// (ArrayRecord's native reader refuses bucket names under 3 characters).
const LIBRARY_BUCKET: &str = "library-gcs";
const ANNOTATION_METADATA: &str = r#"{"tool":"gcs-loopback","ü":[1,null]}"#;
/// The source ordinals the reference view selects, in its order.
const VIEW_PICKS: [u64; 4] = [7, 0, 4, 2];

/// The `signal-dataset` library writes straight onto GCS through its own `gs://` store
/// (google-cloud-storage on the JSON API for documents and uploads, ArrayRecord's native reader
/// for shards, both pointed at the server by their emulator variables): a dataset of three
/// shards on two manifest pages, a reference view of it and an annotation set. Our `gs://`
/// store (the XML API, signed) reads every record and annotation back as the library reads
/// them; `sds info --json`, `sds ls`, `sds verify --deep` and FUSE mounts of both URLs agree.
#[test]
fn the_library_writes_straight_onto_gcs_and_everything_reads_it_as_it_does() {
    let gcs = CloudServer::gcs_for_the_library(&[LIBRARY_BUCKET]);
    let (source, view) = (
        gcs.url(&format!("{LIBRARY_BUCKET}/source")),
        gcs.url(&format!("{LIBRARY_BUCKET}/view")),
    );
    let scratch = tempfile::tempdir().unwrap();
    library_writes(&gcs, &source, &view, scratch.path());
    // Everything so far went through the library's clients (JSON API, no credentials)...
    let uploads = gcs.requests();
    assert!(
        uploads.iter().all(|r| r.api == "json" && r.anonymous),
        "{uploads:?}"
    );
    // ...with one upload per object stored: nothing was rewritten.
    let stored = gcs.list_keys(LIBRARY_BUCKET, "");
    assert_eq!(
        uploads.iter().filter(|r| r.method == "POST").count(),
        stored.len()
    );
    assert_documents_as_written(&gcs);

    let theirs = library_dump(&gcs, &source);
    let theirs_view = library_dump(&gcs, &view);
    gcs.reset_requests();
    let dataset = open_gs(&gcs, "source");
    assert_records_as_the_library_reads(&dataset, &theirs);
    assert_annotations_as_the_library_reads(&dataset, &theirs);
    let view_dataset = open_gs(&gcs, "view");
    assert_records_as_the_library_reads(&view_dataset, &theirs_view);
    assert_eq!(view_dataset.len(), VIEW_PICKS.len() as u64);
    for (ordinal, picked) in VIEW_PICKS.into_iter().enumerate() {
        assert_eq!(
            view_dataset.read_record(ordinal as u64).unwrap(),
            dataset.read_record(picked).unwrap()
        );
    }
    // ...and every read since through ours (XML API, signed), the view's sources included.
    let reads = gcs.requests();
    assert!(
        !reads.is_empty() && reads.iter().all(|r| r.api == "xml" && !r.anonymous),
        "{reads:?}"
    );

    assert_cli_agrees(&gcs, &source, &theirs, 1);
    assert_cli_agrees(&gcs, &view, &theirs_view, 0);
    let checked = mount_matches_the_library(&gcs, &source);
    assert_eq!(
        (
            &checked["records"],
            &checked["fields"],
            &checked["annotation_rows"]
        ),
        (&json!(8), &json!(24), &json!(8)),
        "{checked}"
    );
    let checked = mount_matches_the_library(&gcs, &view);
    assert_eq!(
        (&checked["records"], &checked["fields"]),
        (&json!(4), &json!(12))
    );
}

/// The library's writes: `write_shard` + `publish` of records 0..8 in three shards (two
/// manifest pages) into `source`, a reference view of records 7, 0, 4, 2 into `view`, and
/// `publish_annotations` of set `labels` (rows of every status, tensor fields on some) on
/// `source`.
fn library_writes(gcs: &CloudServer, source: &str, view: &str, scratch: &std::path::Path) {
    let env = gcs.library_env();
    let spec = json!({
        "dataset_id": "gcs ✓", "snapshot_id": "snap-1", "metadata": {"campaign": "gcs"},
        "shards_per_manifest": 2,
        "shards": [
            {"work_id": "w-a", "records": [0, 1, 2]},
            {"work_id": "w-b", "records": [3, 4]},
            {"work_id": "w-c", "records": [5, 6, 7]},
        ],
    });
    let receipts = python_env(
        "graph_tool.py",
        &["publish", source, &spec.to_string()],
        &env,
    );
    let receipts: Vec<serde_json::Value> = String::from_utf8(receipts)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(receipts.len(), 3);
    for receipt in &receipts {
        // The library's store reports the generation each upload created...
        assert!(
            receipt["data_generation"].as_u64().unwrap() > 0,
            "{receipt}"
        );
        let data = receipt["data_uri"].as_str().unwrap();
        assert!(
            data.starts_with(&format!("{source}/objects/data/")),
            "{data}"
        );
    }
    let selection = json!({"dataset_id": "view", "snapshot_id": "view-1", "indices": VIEW_PICKS});
    python_env(
        "graph_tool.py",
        &["view", source, view, &selection.to_string()],
        &env,
    );
    let dir = scratch.to_str().unwrap();
    python_env(
        "annotation_tool.py",
        &["make-rows", dir, "8", "--no-big-int"],
        &[],
    );
    let rows = scratch.join("rows.jsonl");
    let publish = [
        "publish",
        source,
        "labels",
        rows.to_str().unwrap(),
        "--metadata",
        ANNOTATION_METADATA,
        "--records-per-shard",
        "3",
    ];
    python_env("annotation_tool.py", &publish, &env);
}

/// ...but 0.4.0 pins none in its documents: no `generation` in the JSON objects it wrote but
/// the catalog pointer's explicit `null`, the view's shard references are absolute `gs://` URIs into the source, and the
/// annotation catalog names set `labels`.
fn assert_documents_as_written(gcs: &CloudServer) {
    let store = gcs.store(LIBRARY_BUCKET);
    let keys = gcs.list_keys(LIBRARY_BUCKET, "");
    let documents: Vec<(String, serde_json::Value)> = keys
        .iter()
        .filter(|k| k.ends_with(".json"))
        .map(|k| {
            let bytes = store.read(&rel(k), None).unwrap();
            (k.clone(), serde_json::from_slice(&bytes).unwrap())
        })
        .collect();
    // Source: root, snapshot, two pages, catalog pointer, revision, set root. View: root,
    // snapshot, one page.
    assert_eq!(documents.len(), 10, "{keys:?}");
    for (key, document) in &documents {
        assert!(!mentions_generation(document), "{key}: {document}");
    }
    let view_pages: Vec<&serde_json::Value> = documents
        .iter()
        .filter(|(k, _)| k.starts_with("view/manifests/"))
        .map(|(_, d)| d)
        .collect();
    assert!(!view_pages.is_empty());
    let prefix = format!("gs://{LIBRARY_BUCKET}/source/objects/data/");
    for page in view_pages {
        for shard in page["shards"].as_array().unwrap() {
            let path = shard["data"]["path"].as_str().unwrap();
            assert!(path.starts_with(&prefix), "{path}");
        }
    }
    let catalog = documents
        .iter()
        .find(|(k, _)| k == "source/annotations/catalog.json")
        .map(|(_, d)| d)
        .expect("the annotation catalog pointer");
    assert_eq!(catalog["revision"]["generation"], serde_json::Value::Null);
    let revision = catalog["revision"]["path"].as_str().unwrap();
    let revision = &documents
        .iter()
        .find(|(k, _)| *k == format!("source/{revision}"))
        .expect("the catalog revision")
        .1;
    assert_eq!(
        revision["sets"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["labels"]
    );
}

/// An object key `generation` with a value other than `null`, at any depth.
fn mentions_generation(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Object(map) => map
            .iter()
            .any(|(k, v)| (k == "generation" && !v.is_null()) || mentions_generation(v)),
        serde_json::Value::Array(items) => items.iter().any(mentions_generation),
        _ => false,
    }
}

/// The library's reading of `url` (`library_tool.py dump`: records, fields by SHA-256,
/// annotation sets).
fn library_dump(gcs: &CloudServer, url: &str) -> serde_json::Value {
    let out = python_env("library_tool.py", &["dump", url], &gcs.library_env());
    serde_json::from_slice(&out).unwrap()
}

/// `gs://library-gcs/NAME` opened through our store, following absolute references (the
/// view's) with the same options.
fn open_gs(gcs: &CloudServer, name: &str) -> Dataset {
    let store: Arc<dyn ObjectStore> = Arc::new(gcs.store(&format!("{LIBRARY_BUCKET}/{name}")));
    let opener = StorageOpener {
        cloud: gcs.options(),
    };
    let options = OpenOptions {
        absolute_references: AbsoluteReferences::Follow(Arc::new(opener)),
        ..OpenOptions::default()
    };
    Dataset::open(store, options).unwrap()
}

/// JSON text of our object, parsed as `serde_json` parses the library's.
fn as_serde(object: &sdsfs::format::json::Object) -> serde_json::Value {
    serde_json::from_str(&sdsfs::format::json::object_to_compact(object)).unwrap()
}

/// dtype, shape and SHA-256 of the bytes of each field, as the library's dump has them.
fn field_digests(fields: &BTreeMap<String, Field>) -> serde_json::Value {
    let digests: serde_json::Map<String, serde_json::Value> = fields
        .iter()
        .map(|(name, field)| {
            let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&field.data));
            let shape = &field.meta.shape;
            let value = json!({"dtype": field.meta.dtype.dtype_str(), "shape": shape,
                               "sha256": digest, "metadata": as_serde(&field.meta.metadata)});
            (name.clone(), value)
        })
        .collect();
    digests.into()
}

/// The same part of each of the library's field entries.
fn library_field_digests(fields: &serde_json::Value) -> serde_json::Value {
    let digests: serde_json::Map<String, serde_json::Value> = fields
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, f)| {
            let value = json!({"dtype": f["dtype"], "shape": f["shape"], "sha256": f["sha256"],
                               "metadata": f["metadata"]});
            (name.clone(), value)
        })
        .collect();
    digests.into()
}

/// Every record of `dataset`, read through our store, is the library's, value for value.
fn assert_records_as_the_library_reads(dataset: &Dataset, theirs: &serde_json::Value) {
    assert_eq!(
        dataset.root().dataset_id,
        theirs["dataset_id"].as_str().unwrap()
    );
    assert_eq!(as_serde(&dataset.root().metadata), theirs["metadata"]);
    let records = theirs["records"].as_array().unwrap();
    assert_eq!(dataset.len(), records.len() as u64);
    for (ordinal, expected) in records.iter().enumerate() {
        let record = dataset.read_record(ordinal as u64).unwrap();
        assert_eq!(record.id, expected["id"].as_str().unwrap());
        assert_eq!(record.scene_id.as_deref(), expected["scene_id"].as_str());
        assert_eq!(
            as_serde(&record.metadata),
            expected["metadata"],
            "{ordinal}"
        );
        assert_eq!(
            field_digests(&record.fields),
            library_field_digests(&expected["fields"]),
            "record {ordinal}"
        );
        assert_eq!(record.fields.len(), 3);
    }
}

/// Set `labels`, read through our store, is the library's row for row.
fn assert_annotations_as_the_library_reads(dataset: &Dataset, theirs: &serde_json::Value) {
    let expected = &theirs["annotations"]["labels"];
    let catalog = sdsfs::annotations::read_catalog(dataset).unwrap();
    assert_eq!(catalog.sets.keys().collect::<Vec<_>>(), ["labels"]);
    let set = catalog.sets["labels"].as_ref().unwrap();
    assert_eq!(
        set.publication_id(),
        expected["publication_id"].as_str().unwrap()
    );
    let rows = expected["rows"].as_array().unwrap();
    assert_eq!(set.len(), rows.len() as u64);
    let mut with_fields = 0;
    for (row, theirs) in set.iter(dataset).zip(rows) {
        let row = row.unwrap();
        let ours = json!({
            "source_record_id": row.source_record_id, "source_index": row.source_index,
            "status": row.status.as_wire(), "values": as_serde(&row.values),
            "provenance": as_serde(&row.provenance), "detail_status": row.detail_status,
            "fields": field_digests(&row.fields),
        });
        let theirs = json!({
            "source_record_id": theirs["source_record_id"], "source_index": theirs["source_index"],
            "status": theirs["status"], "values": theirs["values"],
            "provenance": theirs["provenance"], "detail_status": theirs["detail_status"],
            "fields": library_field_digests(&theirs["fields"]),
        });
        assert_eq!(ours, theirs);
        with_fields += usize::from(!row.fields.is_empty());
    }
    assert_eq!(with_fields, 3);
    let statuses: Vec<&str> = rows.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert!(["success", "skipped", "failed"]
        .iter()
        .all(|s| statuses.contains(s)));
}

/// `sds info --json`, `sds ls` and `sds verify --deep` on `url` say what the library read
/// (`sets`: how many annotation sets `url` has).
fn assert_cli_agrees(gcs: &CloudServer, url: &str, theirs: &serde_json::Value, sets: usize) {
    let env = gcs.env();
    let info = sds_env(&["info", "--json", url], &env);
    assert!(
        info.status.success(),
        "{}",
        String::from_utf8_lossy(&info.stderr)
    );
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    let records = theirs["records"].as_array().unwrap();
    assert_eq!(info["dataset_id"], theirs["dataset_id"]);
    assert_eq!(info["snapshot_id"], theirs["snapshot_id"]);
    assert_eq!(info["record_count"], json!(records.len()));
    assert_eq!(info["first_record"]["id"], records[0]["id"]);
    assert_eq!(
        info["annotations"].as_array().unwrap().len(),
        sets,
        "{info}"
    );
    if sets > 0 {
        assert_eq!(info["annotations"][0]["name"], "labels");
        assert_eq!(info["annotations"][0]["problem"], serde_json::Value::Null);
    }

    let ls = sds_env(&["ls", url], &env);
    assert!(
        ls.status.success(),
        "{}",
        String::from_utf8_lossy(&ls.stderr)
    );
    let text = String::from_utf8(ls.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), records.len(), "{text}");
    for (ordinal, (line, record)) in lines.iter().zip(records).enumerate() {
        let columns: Vec<&str> = line.split("  ").collect();
        let scene = record["scene_id"].as_str().unwrap_or("-");
        assert_eq!(
            columns[..4],
            [
                &ordinal.to_string(),
                record["id"].as_str().unwrap(),
                scene,
                "3 fields"
            ],
            "{line}"
        );
    }

    assert_verify_deep(url, &env);
}

/// A FUSE mount of `url` (through our store) walked by `library_tool.py check-mount`, which
/// compares every document, record, field view and annotation file with the library's own
/// reading of `url` from GCS, and `check-columns`, which compares `columns/`. Returns the
/// first's counts.
fn mount_matches_the_library(gcs: &CloudServer, url: &str) -> serde_json::Value {
    let env = gcs.env();
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mount = MountGuard::mount_with_env(std::ffi::OsStr::new(url), &[], &env_refs);
    let mountpoint = mount.mountpoint.to_str().unwrap();
    let out = python_env(
        "library_tool.py",
        &["check-mount", url, mountpoint],
        &gcs.library_env(),
    );
    let checked: serde_json::Value = serde_json::from_slice(&out).unwrap();
    eprintln!("{url}: the mount matches the library's reading: {checked}");
    // And columns/ holds the records' values stacked as the library reads them from GCS.
    let columns = python_env(
        "library_tool.py",
        &["check-columns", url, mountpoint],
        &gcs.library_env(),
    );
    eprintln!(
        "{url}: columns/ matches: {}",
        String::from_utf8_lossy(&columns)
    );
    checked
}
