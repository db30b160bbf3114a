//! `sds info` end to end: the built binary on the committed demo dataset, on small datasets
//! published here, and on every kind of dataset that cannot be opened (exit status 1 and exactly
//! one line on stderr naming the document and the rule).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::{object_to_pretty, parse_object, JsonLimits, Object, Value};
use sdsfs::format::record::{Axis, Coordinate, Field, Record};
use sdsfs::storage::{LocalStore, ObjectStore};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

fn sds(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_sds"))
        .args(args)
        .output()
        .unwrap();
    Output {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn parse(text: &str) -> Object {
    parse_object(text.as_bytes(), &JsonLimits::CONTROL).unwrap()
}

fn int(v: &Value) -> i128 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap()
}

/// Two records with known fields, published as one shard.
fn tiny_records() -> Vec<Record> {
    let iq = Field::new(DType::C64, vec![8], vec![0u8; 64])
        .unwrap()
        .with_axes(vec![
            Axis::new("time", 8).with_coordinate(Coordinate::regular(0.0, 1e-6).with_unit("s"))
        ]);
    let label = Field::new(DType::U8, vec![2, 3], vec![1u8; 6]).unwrap();
    let first = Record::new("rec-0")
        .with_scene_id("scene-a")
        .with_field("rx/iq", iq.clone())
        .with_field("label", label);
    let second = Record::new("rec-1").with_field("rx/iq", iq);
    vec![first, second]
}

fn publish_tiny(dir: &Path, records: Vec<Record>) {
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir).unwrap());
    let mut receipts = Vec::new();
    if !records.is_empty() {
        receipts
            .push(write_shard(store.as_ref(), records, "w0", 0, &ShardOptions::default()).unwrap());
    }
    publish(
        store.as_ref(),
        &receipts,
        &PublishOptions::new("tiny", "tiny-v1"),
    )
    .unwrap();
}

fn tiny_dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    publish_tiny(dir.path(), tiny_records());
    dir
}

/// Sum of the sizes of every shard file under `root/objects`.
fn shard_bytes(root: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![root.join("objects")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                total += entry.metadata().unwrap().len();
            }
        }
    }
    total
}

#[test]
fn json_on_the_demo_dataset() {
    let demo = repo().join("fixtures/demo");
    let out = sds(&["info", "--json", demo.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.is_empty());
    let doc = parse(&out.stdout);
    let keys: Vec<&str> = doc.keys().map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "annotations",
            "annotations_problem",
            "dataset_id",
            "first_record",
            "first_record_problem",
            "layout_version",
            "manifest_pages",
            "record_count",
            "shard_count",
            "snapshot_id",
            "stored_bytes"
        ]
    );
    assert_eq!(doc["annotations"], Value::Array(Vec::new()));
    assert_eq!(doc["annotations_problem"], Value::Null);
    assert_eq!(doc["first_record_problem"], Value::Null);
    assert_eq!(text(&doc["dataset_id"]), "sds-demo");
    assert_eq!(text(&doc["snapshot_id"]), "sds-demo-v1");
    assert_eq!(text(&doc["layout_version"]), "0.1");
    assert_eq!(int(&doc["record_count"]), 8);
    assert_eq!(int(&doc["shard_count"]), 3);
    assert_eq!(int(&doc["manifest_pages"]), 2);
    assert_eq!(int(&doc["stored_bytes"]) as u64, shard_bytes(&demo));
    let first = doc["first_record"].as_object().unwrap();
    let keys: Vec<&str> = first.keys().map(|k| k.as_str()).collect();
    assert_eq!(keys, ["fields", "id", "scene_id"]);
    assert_eq!(text(&first["scene_id"]), "scene-0000");
    assert!(text(&first["id"]).starts_with("obs-"));
    let fields = first["fields"].as_object().unwrap();
    assert_eq!(fields.len(), 11);
    let iq = fields["projections/communications_rx/receivers/rx0/iq"]
        .as_object()
        .unwrap();
    assert_eq!(text(&iq["dtype"]), "complex64");
    assert_eq!(iq["shape"], Value::Array(vec![Value::Int(20000)]));
    let radar = fields["projections/radar_rx/components/baseband"]
        .as_object()
        .unwrap();
    let shape: Vec<i128> = radar["shape"].as_array().unwrap().iter().map(int).collect();
    assert_eq!(shape, [1, 4, 400]);
    let occupancy = fields["projections/communications_rx/labels/occupancy_%"]
        .as_object()
        .unwrap();
    // One value with one axis: writers never emit a 0-d field (the library cannot hold one).
    assert_eq!(occupancy["shape"], Value::Array(vec![Value::Int(1)]));
    // Deterministic bytes: the same report twice, pretty JSON with one final newline.
    assert_eq!(
        out.stdout,
        sds(&["info", "--json", demo.to_str().unwrap()]).stdout
    );
    assert_eq!(out.stdout, object_to_pretty(&doc));
}

#[test]
fn text_on_a_small_dataset() {
    let dir = tiny_dataset();
    let out = sds(&["info", dir.path().to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let bytes = shard_bytes(dir.path());
    let expected = format!(
        "dataset_id      tiny\n\
         snapshot_id     tiny-v1\n\
         layout_version  0.1\n\
         record_count    2\n\
         shard_count     1\n\
         stored_bytes    {bytes} (256.0 KiB)\n\
         manifest_pages  1\n\
         first_record    id rec-0, scene scene-a\n\
         fields (2):\n  \
         label  uint8      (2, 3)\n  \
         rx/iq  complex64  (8,)\n"
    );
    assert_eq!(out.stdout, expected);
}

#[test]
fn json_on_a_small_dataset_and_a_file_url() {
    let dir = tiny_dataset();
    let url = format!("file://{}", dir.path().display());
    let out = sds(&["info", &url, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc = parse(&out.stdout);
    assert_eq!(int(&doc["record_count"]), 2);
    assert_eq!(int(&doc["manifest_pages"]), 1);
    let first = doc["first_record"].as_object().unwrap();
    assert_eq!(text(&first["id"]), "rec-0");
    let label = first["fields"].as_object().unwrap()["label"]
        .as_object()
        .unwrap();
    assert_eq!(text(&label["dtype"]), "uint8");
    let shape: Vec<i128> = label["shape"].as_array().unwrap().iter().map(int).collect();
    assert_eq!(shape, [2, 3]);
}

#[test]
fn empty_dataset_has_no_first_record() {
    let dir = tempfile::tempdir().unwrap();
    publish_tiny(dir.path(), Vec::new());
    let out = sds(&["info", "--json", dir.path().to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc = parse(&out.stdout);
    assert_eq!(doc["first_record"], Value::Null);
    assert_eq!(int(&doc["record_count"]), 0);
    assert_eq!(int(&doc["manifest_pages"]), 0);
    assert_eq!(int(&doc["stored_bytes"]), 0);
    let out = sds(&["info", dir.path().to_str().unwrap()]);
    assert!(
        out.stdout.contains("first_record    none"),
        "{}",
        out.stdout
    );
}

#[test]
fn an_unreadable_first_row_is_reported_beside_the_documents() {
    let dir = tiny_dataset();
    // Truncate the metadata shard: the documents still open, record 0's row does not.
    let meta = std::fs::read_dir(dir.path().join("objects/metadata"))
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .next()
        .unwrap();
    std::fs::write(&meta, vec![0u8; 16]).unwrap();
    let out = sds(&["info", "--json", dir.path().to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc = parse(&out.stdout);
    assert_eq!(text(&doc["dataset_id"]), "tiny");
    assert_eq!(int(&doc["record_count"]), 2);
    assert_eq!(doc["first_record"], Value::Null);
    let problem = text(&doc["first_record_problem"]);
    let name = meta.file_name().unwrap().to_str().unwrap();
    assert!(
        problem.contains("record 0") && problem.contains(name),
        "{problem}"
    );
    let out = sds(&["info", dir.path().to_str().unwrap()]);
    assert!(
        out.stdout.contains("first_record    unreadable: "),
        "{}",
        out.stdout
    );
}

/// Runs `sds info` on `dataset` and checks the failure contract: status 1, nothing on stdout,
/// exactly one line on stderr containing every one of `needles`.
fn assert_refused(dataset: &str, needles: &[&str]) {
    for args in [vec!["info", dataset], vec!["info", "--json", dataset]] {
        let out = sds(&args);
        assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{}", out.stdout);
        assert!(out.stderr.starts_with("sds: "), "{}", out.stderr);
        assert_eq!(out.stderr.matches('\n').count(), 1, "{:?}", out.stderr);
        assert!(out.stderr.ends_with('\n'));
        for needle in needles {
            assert!(
                out.stderr.contains(needle),
                "{needle:?} not in {:?}",
                out.stderr
            );
        }
    }
}

/// A tiny dataset whose `root.json` has been edited by `edit`.
fn with_root(edit: impl FnOnce(&mut Object)) -> tempfile::TempDir {
    let dir = tiny_dataset();
    let path = dir.path().join("root.json");
    let mut root = parse(&std::fs::read_to_string(&path).unwrap());
    edit(&mut root);
    std::fs::write(&path, object_to_pretty(&root)).unwrap();
    dir
}

#[test]
fn missing_root_json() {
    let dir = tiny_dataset();
    std::fs::remove_file(dir.path().join("root.json")).unwrap();
    let root = dir.path().join("root.json");
    assert_refused(
        dir.path().to_str().unwrap(),
        &["cannot open", root.to_str().unwrap(), "not found"],
    );
}

#[test]
fn missing_directory() {
    assert_refused(
        "/nonexistent/sds-dataset",
        &["/nonexistent/sds-dataset", "not found"],
    );
}

#[test]
fn bad_json() {
    let dir = tiny_dataset();
    let root = dir.path().join("root.json");
    std::fs::write(&root, "{\"dataset_id\": \"tiny\",\n \"dataset_id\": 1}\n").unwrap();
    assert_refused(
        dir.path().to_str().unwrap(),
        &[root.to_str().unwrap(), "invalid JSON", "duplicate key"],
    );
    std::fs::write(&root, "{not json").unwrap();
    assert_refused(
        dir.path().to_str().unwrap(),
        &[root.to_str().unwrap(), "invalid JSON"],
    );
}

#[test]
fn wrong_layout() {
    let dir = with_root(|root| {
        root.insert("layout_version".into(), "0.9".into());
    });
    let root = dir.path().join("root.json");
    assert_refused(
        dir.path().to_str().unwrap(),
        &[root.to_str().unwrap(), "layout_version", "0.9"],
    );
}

#[test]
fn reader_too_old() {
    let dir = with_root(|root| {
        root.insert("min_reader_version".into(), "0.4.1".into());
    });
    let root = dir.path().join("root.json");
    assert_refused(
        dir.path().to_str().unwrap(),
        &[
            root.to_str().unwrap(),
            "min_reader_version",
            "0.4.1",
            "0.4.0",
        ],
    );
}

#[test]
fn snapshot_missing() {
    let dir = tiny_dataset();
    let snapshot = dir.path().join("snapshots/tiny-v1/snapshot.json");
    std::fs::remove_file(&snapshot).unwrap();
    assert_refused(
        dir.path().to_str().unwrap(),
        &[snapshot.to_str().unwrap(), "not found"],
    );
}

#[test]
fn snapshot_of_another_size() {
    let dir = tiny_dataset();
    let snapshot = dir.path().join("snapshots/tiny-v1/snapshot.json");
    let mut text = std::fs::read_to_string(&snapshot).unwrap();
    text.push('\n');
    std::fs::write(&snapshot, text).unwrap();
    assert_refused(
        dir.path().to_str().unwrap(),
        &[snapshot.to_str().unwrap(), "size"],
    );
}

#[test]
fn malformed_object_store_locations_are_one_line_refusals() {
    // Object stores themselves are exercised against a server in tests/storage_s3.rs.
    assert_refused(
        "s3://Bad_Bucket/prefix",
        &["s3://Bad_Bucket", "invalid bucket name"],
    );
    assert_refused(
        "gs://bucket/a//b",
        &["gs://bucket/a//b", "invalid key prefix"],
    );
}

#[test]
fn usage_errors_exit_2_and_help_documents_everything() {
    assert_eq!(sds(&["info"]).code, 2);
    assert_eq!(sds(&["frobnicate"]).code, 2);
    let help = sds(&["info", "--help"]);
    assert_eq!(help.code, 0);
    for needle in ["--json", "first_record", "DATASET", "file://"] {
        assert!(
            help.stdout.contains(needle),
            "{needle} not in {}",
            help.stdout
        );
    }
    let top = sds(&["--help"]);
    for needle in ["info", "ls", "demo", "Exit status"] {
        assert!(
            top.stdout.contains(needle),
            "{needle} not in {}",
            top.stdout
        );
    }
}

#[test]
fn ls_lists_records_from_rows() {
    let demo = repo().join("fixtures/demo");
    let out = sds(&["ls", demo.to_str().unwrap(), "--start", "6"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("6  obs-") && lines[0].contains("scene-0003"));
    let out = sds(&["ls", demo.to_str().unwrap(), "--limit", "3"]);
    assert_eq!(out.stdout.lines().count(), 3);
}
