//! The library's legacy GCS dataset on loopback: every object `signal-dataset` 0.2.3 wrote to
//! a GCS bucket (`fixtures/legacy/legacy-0.2.3-gcs.json`, copied from the `signal-dataset`
//! 0.4.0 sdist), served by `tests/python/gcs_server.py --seed` at the exact generations it
//! had. The control documents of that release pin each referenced object to its generation
//! (see `docs/FORMAT.md`), so a reader must ask for those generations, not the live objects.
//!
//! To tell the two apart, [`shadow_pinned_objects`] gives every pinned object a newer live
//! generation with other bytes: a read that drops the pin gets the wrong bytes. The server's
//! request log shows which generation each request named. Expected values come from decoding
//! the fixture here, never from the code under test.

mod common;

use std::collections::BTreeMap;

use common::cloud::{serve_legacy_gcs, CloudServer, LegacyFixture, LegacyGcs, Requested};
use sdsfs::format::path::RelPath;
use sdsfs::storage::{CloudStore, ObjectStore, StorageError};

/// Bytes no fixture object holds: the live content of every shadowed object.
const SHADOW: &[u8] = b"a newer generation: not what the documents pinned";

/// A reference found in a control document: `{"path", "generation", "stored_bytes"?}`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pin {
    path: String,
    generation: u64,
    stored_bytes: Option<u64>,
}

/// Every generation-pinned reference in every JSON document of the fixture, by target path.
fn pins(fixture: &LegacyFixture) -> BTreeMap<String, Pin> {
    let mut found = Vec::new();
    for path in fixture.objects.keys().filter(|p| p.ends_with(".json")) {
        collect_pins(&fixture.document(path), &mut found);
    }
    let mut by_path = BTreeMap::new();
    for pin in found {
        if let Some(earlier) = by_path.insert(pin.path.clone(), pin.clone()) {
            assert_eq!(earlier, pin, "two references to {} disagree", pin.path);
        }
    }
    by_path
}

fn collect_pins(value: &serde_json::Value, out: &mut Vec<Pin>) {
    match value {
        serde_json::Value::Object(map) => {
            if let (Some(path), Some(generation)) = (
                map.get("path").and_then(|p| p.as_str()),
                map.get("generation").and_then(|g| g.as_u64()),
            ) {
                out.push(Pin {
                    path: path.to_string(),
                    generation,
                    stored_bytes: map.get("stored_bytes").and_then(|b| b.as_u64()),
                });
            }
            map.values().for_each(|v| collect_pins(v, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_pins(v, out)),
        _ => {}
    }
}

fn rel(path: &str) -> RelPath {
    RelPath::new(path).unwrap()
}

/// A store rooted at the dataset (`gs://legacy-bucket/legacy.sds`).
fn dataset_store(legacy: &LegacyGcs) -> CloudStore {
    let rest = legacy.url.strip_prefix("gs://").unwrap();
    legacy.server.store(rest)
}

/// Writes [`SHADOW`] over every pinned object, as its new live generation; returns the new
/// generations by path. Pinned generations stay readable (the bucket is versioned).
fn shadow_pinned_objects(legacy: &LegacyGcs) -> BTreeMap<String, u64> {
    let store = dataset_store(legacy);
    pins(&legacy.fixture)
        .keys()
        .map(|path| {
            let (_, live) = store.read_versioned(&rel(path)).unwrap().unwrap();
            let written = store
                .compare_and_swap(&rel(path), SHADOW, Some(&live))
                .unwrap();
            (path.clone(), written.generation.unwrap())
        })
        .collect()
}

/// The requests of the log for objects of the dataset, keyed by path below its root.
fn dataset_requests(server: &CloudServer, fixture: &LegacyFixture) -> Vec<(String, Requested)> {
    let prefix = format!("{}/", fixture.root.strip_prefix("gs://").unwrap());
    server
        .requests()
        .into_iter()
        .filter_map(|r| {
            let full = format!("{}/{}", r.bucket, r.key);
            let path = full.strip_prefix(&prefix)?.to_string();
            Some((path, r))
        })
        .collect()
}

/// The fixture is what its documents say: each pinned reference names an object of the fixture
/// at that very generation, with its size. (Guards the expectations of the other tests.)
#[test]
fn every_reference_in_the_fixture_pins_an_object_it_holds() {
    let fixture = LegacyFixture::load();
    assert_eq!(fixture.root, "gs://legacy-bucket/legacy.sds");
    assert_eq!(fixture.bucket(), "legacy-bucket");
    let pins = pins(&fixture);
    // root -> snapshot -> manifest -> 2 shards; catalog -> revision -> set root -> 1 shard.
    assert_eq!(pins.len(), 7, "{pins:?}");
    for pin in pins.values() {
        let (generation, bytes) = fixture
            .objects
            .get(&pin.path)
            .unwrap_or_else(|| panic!("{} is referenced but not in the fixture", pin.path));
        assert_eq!(*generation, pin.generation, "{}", pin.path);
        if let Some(size) = pin.stored_bytes {
            assert_eq!(size, bytes.len() as u64, "{}", pin.path);
        }
    }
    // Only the two entry points are not pinned by anything.
    let unpinned: Vec<&String> = fixture
        .objects
        .keys()
        .filter(|p| !pins.contains_key(*p))
        .collect();
    assert_eq!(unpinned, ["annotations/catalog.json", "root.json"]);
}

/// Each object through our storage layer at its generation: exact bytes, size, generation,
/// ranges; a generation it never had is refused; and after a newer generation shadows it,
/// the pinned read still gives the fixture's bytes while the live read gives the new ones.
#[test]
fn every_legacy_object_is_served_at_its_generation_through_the_storage_layer() {
    let legacy = serve_legacy_gcs();
    let store = dataset_store(&legacy);
    assert!(store.supports_generations());
    for (path, (generation, bytes)) in &legacy.fixture.objects {
        let at = Some(*generation);
        assert_eq!(
            &store.read(&rel(path), at).unwrap()[..],
            &bytes[..],
            "{path}"
        );
        assert_eq!(
            &store.read(&rel(path), None).unwrap()[..],
            &bytes[..],
            "{path}"
        );
        let info = store.info(&rel(path), at).unwrap();
        assert_eq!(info.size, bytes.len() as u64, "{path}");
        assert_eq!(info.version.generation, at, "{path}");
        let half = bytes.len() as u64 / 2;
        let range = store.read_range(&rel(path), 1..half, at).unwrap();
        assert_eq!(&range[..], &bytes[1..half as usize], "{path}");
        // A generation the object never had: refused, naming the one that is there.
        let never = store.read(&rel(path), Some(generation + 1)).unwrap_err();
        assert!(
            matches!(never, StorageError::GenerationMismatch { expected, actual, .. }
                if expected == generation + 1 && actual == *generation),
            "{path}: {never}"
        );
    }
    // The log shows what was asked: per object, the read, info and range at its generation,
    // one live read, and the miss at generation + 1.
    let requests = dataset_requests(&legacy.server, &legacy.fixture);
    for (path, (generation, _)) in &legacy.fixture.objects {
        let asked: Vec<Option<u64>> = requests
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, r)| r.generation)
            .collect();
        let pinned = asked.iter().filter(|g| **g == Some(*generation)).count();
        assert!(pinned >= 3, "{path}: {asked:?}");
        assert!(asked.contains(&None), "{path}: {asked:?}");
        assert!(asked.contains(&Some(generation + 1)), "{path}: {asked:?}");
    }

    let shadowed = shadow_pinned_objects(&legacy);
    let newest_fixture = legacy.fixture.objects.values().map(|(g, _)| *g).max();
    for (path, live) in &shadowed {
        let (generation, bytes) = &legacy.fixture.objects[path];
        assert!(
            Some(*live) > newest_fixture,
            "{path}: new generation {live}"
        );
        let pinned = store.read(&rel(path), Some(*generation)).unwrap();
        assert_eq!(&pinned[..], &bytes[..], "{path}");
        assert_eq!(&store.read(&rel(path), None).unwrap()[..], SHADOW, "{path}");
        assert_eq!(
            store.info(&rel(path), None).unwrap().version.generation,
            Some(*live)
        );
    }
}

/// `sds info --json` on the served legacy dataset reports what its documents hold, reading
/// every pinned object at its pinned generation (the live ones are shadowed by other bytes).
///
/// Needs a reader of the library's layout (root `dataset_id`, `snapshot` reference,
/// `manifests` pages, the annotation catalog pointer); the placeholder shards of the fixture
/// are never valid ArrayRecord files.
#[test]
fn sds_info_json_reports_the_legacy_dataset_read_at_its_pinned_generations() {
    let legacy = serve_legacy_gcs();
    shadow_pinned_objects(&legacy);
    legacy.server.reset_requests();
    let fixture = &legacy.fixture;
    let root = fixture.document("root.json");
    let snapshot_path = root["snapshot"]["path"].as_str().unwrap();
    let snapshot = fixture.document(snapshot_path);

    let out = common::cli::sds_env(&["info", "--json", &legacy.url], &legacy.env);
    let stderr = String::from_utf8_lossy(&out.stderr);

    // Every request for a pinned object named its pinned generation (checked first: it holds
    // for whatever part of the dataset was read); the root, snapshot and manifest were read.
    let pins = pins(fixture);
    let requests = dataset_requests(&legacy.server, fixture);
    for (path, request) in &requests {
        if let Some(pin) = pins.get(path) {
            let pinned = Some(pin.generation);
            assert_eq!(request.generation, pinned, "{path}: {request:?} ({stderr})");
        }
    }
    let manifest_path = snapshot["manifests"][0]["object"]["path"].as_str().unwrap();
    for wanted in ["root.json", snapshot_path, manifest_path] {
        let read = requests
            .iter()
            .any(|(p, r)| p == wanted && r.method == "GET");
        assert!(read, "{wanted} was never read: {requests:?} ({stderr})");
    }

    assert!(out.status.success(), "sds info {}: {stderr}", legacy.url);
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["dataset_id"], root["dataset_id"], "{info}");
    assert_eq!(info["dataset_id"], "legacy");
    assert_eq!(info["snapshot_id"], snapshot["snapshot_id"], "{info}");
    assert_eq!(info["snapshot_id"], "snap");
    assert_eq!(info["record_count"], snapshot["record_count"], "{info}");
    assert_eq!(info["record_count"], 4);
    assert_eq!(info["shard_count"], snapshot["shard_count"], "{info}");
    assert_eq!(info["stored_bytes"], snapshot["stored_bytes"], "{info}");
    let pages = snapshot["manifests"].as_array().unwrap().len();
    assert_eq!(info["manifest_pages"], pages as u64, "{info}");
    assert_legacy_annotation_set(&info, fixture);
}

/// The annotation set the fixture's catalog lists (`labels`), as its set root describes it.
fn assert_legacy_annotation_set(info: &serde_json::Value, fixture: &LegacyFixture) {
    let pointer = fixture.document("annotations/catalog.json");
    let revision = fixture.document(pointer["revision"]["path"].as_str().unwrap());
    let sets = revision["sets"].as_object().unwrap();
    assert_eq!(sets.keys().collect::<Vec<_>>(), ["labels"]);
    let set_root = fixture.document(sets["labels"]["path"].as_str().unwrap());
    let listed = info["annotations"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{info}");
    assert_eq!(listed[0]["name"], "labels", "{info}");
    assert_eq!(listed[0]["problem"], serde_json::Value::Null, "{info}");
    assert_eq!(
        listed[0]["publication_id"], set_root["publication_id"],
        "{info}"
    );
    assert_eq!(
        listed[0]["record_count"], set_root["record_count"],
        "{info}"
    );
}

/// A seed the server cannot load exactly is refused before it serves, naming the file, the
/// object and the rule, rather than served approximately.
#[test]
fn a_malformed_seed_is_refused_naming_the_object_and_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            r#"{"objects": {"gs://b/k": {"generation": 0, "payload": ""}}}"#,
            "gs://b/k: \"generation\" must be a positive integer",
        ),
        (
            r#"{"objects": {"gs://b/k": {"generation": 3, "payload": "not base64!"}}}"#,
            "gs://b/k: \"payload\" is not base64",
        ),
        (
            r#"{"objects": {"s3://b/k": {"generation": 3, "payload": ""}}}"#,
            "'s3://b/k' is not gs://BUCKET/KEY",
        ),
        (r#"{"root": "gs://b"}"#, "no \"objects\" mapping"),
    ];
    for (i, (seed, rule)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("seed-{i}.json"));
        std::fs::write(&path, seed).unwrap();
        let out = std::process::Command::new(common::python())
            .arg(common::repo_root().join("tests/python/gcs_server.py"))
            .args(["--port", "0", "--seed"])
            .arg(&path)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{seed}: served anyway");
        assert!(out.stdout.is_empty(), "{seed}: announced READY");
        let named = format!("{}: ", path.display());
        assert!(
            stderr.contains(&named) && stderr.contains(rule),
            "{seed}: {stderr}"
        );
    }
}
