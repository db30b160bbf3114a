//! The control graph against the `signal-dataset` library itself (tests/python/graph_tool.py,
//! run with `SDS_TEST_PYTHON`; fails when the library is missing):
//!
//! - a dataset the library publishes (unordered work ids, a retried attempt, an empty shard,
//!   several manifest pages, a non-portable dataset id) opens in `sds info`, `sds ls` and
//!   `sds verify --deep`, in work-id order with the highest attempt kept;
//! - `sds write-shard --from-dataset` + `sds publish` with the same work ids, attempts, ids and
//!   metadata write the library's files byte for byte (shards, pages, snapshot, root), and the
//!   library's own receipts are accepted by `sds publish`;
//! - `sds select` writes the library's reference view byte for byte, and the view reads back
//!   (unless absolute references are refused).

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::datasets::snapshot_tree;

const DATASET_ID: &str = "my dataset/ü ✓";
const SNAPSHOT_ID: &str = "snap-1";

fn sds(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sds"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = sds(args);
    assert!(
        out.status.success(),
        "sds {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The library's publication: w-b (records 0..3), w-a attempt 0 (record 3) and attempt 1
/// (records 4, 5), w-empty (none); two shards per page. Returns the library's receipts.
fn library_dataset(root: &Path) -> String {
    let spec = serde_json::json!({
        "dataset_id": DATASET_ID,
        "snapshot_id": SNAPSHOT_ID,
        "metadata": {"purpose": "library interop", "n": 3},
        "expected_work_ids": ["w-b", "w-a", "w-empty"],
        "shards_per_manifest": 2,
        "shards": [
            {"work_id": "w-b", "attempt": 0, "records": [0, 1, 2]},
            {"work_id": "w-a", "attempt": 0, "records": [3]},
            {"work_id": "w-a", "attempt": 1, "records": [4, 5]},
            {"work_id": "w-empty", "attempt": 0, "records": []},
        ],
    });
    let out = common::run_python(
        "graph_tool.py",
        &["publish", root.to_str().unwrap(), &spec.to_string()],
        b"",
    );
    String::from_utf8(out).unwrap()
}

#[test]
fn a_library_dataset_opens_in_work_id_order() {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("lib");
    library_dataset(&root);
    let root = root.to_str().unwrap();
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", root, "--json"])).unwrap();
    assert_eq!(info["dataset_id"], DATASET_ID);
    assert_eq!(info["snapshot_id"], SNAPSHOT_ID);
    assert_eq!(info["record_count"], 5);
    assert_eq!(info["shard_count"], 3, "the empty shard is kept");
    assert_eq!(info["manifest_pages"], 2);
    let ids: Vec<String> = ok(&["ls", root])
        .lines()
        .map(|line| line.split_whitespace().nth(1).unwrap().to_string())
        .collect();
    // w-a (attempt 1: records 4, 5) sorts before w-b (records 0, 1, 2).
    assert_eq!(
        ids,
        ["rec-0004", "rec-0005", "rec-0000", "rec-0001", "rec-0002"]
    );
    // `sds ls --json`: the library's metadata rows, line for line (library_tool.py ls).
    let parse = |text: &str| -> Vec<serde_json::Value> {
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    };
    let ours = parse(&ok(&["ls", root, "--json"]));
    let library = common::run_python("library_tool.py", &["ls", root], b"");
    let library = parse(&String::from_utf8(library).unwrap());
    assert_eq!(ours.len(), 5);
    assert_eq!(ours, library);
    let verified = ok(&["verify", "--deep", root]);
    assert!(verified.starts_with("ok"), "{verified}");
}

/// `sds write-shard` re-encodes the library's records under the same work ids; the receipts
/// (ours) are published with the same ids and metadata.
fn our_copy(library: &Path, out: &Path) -> String {
    let (lib, dest) = (library.to_str().unwrap(), out.to_str().unwrap());
    let mut receipts = String::new();
    for (work_id, attempt, range) in [
        ("w-a", "1", "0:2"),
        ("w-b", "0", "2:5"),
        ("w-empty", "0", "5:5"),
    ] {
        receipts += &ok(&[
            "write-shard",
            dest,
            "--work-id",
            work_id,
            "--attempt",
            attempt,
            "--from-dataset",
            lib,
            "--range",
            range,
        ]);
    }
    receipts
}

fn publish_args<'a>(dest: &'a str, receipts: &'a str) -> Vec<&'a str> {
    vec![
        "publish",
        dest,
        "--receipts",
        receipts,
        "--dataset-id",
        DATASET_ID,
        "--snapshot-id",
        SNAPSHOT_ID,
        "--shards-per-manifest",
        "2",
        "--expected-work-ids",
        "w-b,w-a,w-empty",
        "--metadata",
        r#"{"purpose": "library interop", "n": 3}"#,
    ]
}

/// The library's dataset in `temp/lib` and our re-publication of it in `temp/ours`.
fn library_and_ours(temp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let library = temp.join("lib");
    library_dataset(&library);
    let ours = temp.join("ours");
    let receipts_file = temp.join("receipts.jsonl");
    std::fs::write(&receipts_file, our_copy(&library, &ours)).unwrap();
    ok(&publish_args(
        ours.to_str().unwrap(),
        receipts_file.to_str().unwrap(),
    ));
    (library, ours)
}

#[test]
fn our_writers_reproduce_the_library_byte_for_byte() {
    let temp = tempfile::tempdir().unwrap();
    let (library, ours) = library_and_ours(temp.path());
    let expected = snapshot_tree(&library);
    let written = snapshot_tree(&ours);
    for (path, bytes) in &written {
        assert!(
            expected.get(path) == Some(bytes),
            "{path} differs from the library's"
        );
    }
    // The library also wrote w-a attempt 0, which its publication does not reference.
    let unreferenced: Vec<&String> = expected
        .keys()
        .filter(|p| !written.contains_key(*p))
        .collect();
    assert_eq!(unreferenced.len(), 2, "{unreferenced:?}");
}

#[test]
fn sds_publish_accepts_the_librarys_receipts() {
    let temp = tempfile::tempdir().unwrap();
    let library = temp.path().join("lib");
    let receipts = library_dataset(&library);
    let before = snapshot_tree(&library);
    let receipts_file = temp.path().join("library-receipts.jsonl");
    std::fs::write(&receipts_file, receipts).unwrap();
    // Publishing the same receipts again converges on the library's bytes (create-only,
    // identical documents accepted).
    ok(&publish_args(
        library.to_str().unwrap(),
        receipts_file.to_str().unwrap(),
    ));
    assert_eq!(snapshot_tree(&library), before);
}

#[test]
fn our_reference_view_is_the_librarys() {
    let temp = tempfile::tempdir().unwrap();
    let library = temp.path().join("lib");
    library_dataset(&library);
    let lib = library.to_str().unwrap();
    let theirs = temp.path().join("their-view");
    let spec =
        serde_json::json!({"dataset_id": "view", "snapshot_id": "view-1", "indices": [4, 0, 2]});
    common::run_python(
        "graph_tool.py",
        &["view", lib, theirs.to_str().unwrap(), &spec.to_string()],
        b"",
    );
    let ours = temp.path().join("our-view");
    let dest = ours.to_str().unwrap();
    ok(&[
        "select",
        lib,
        dest,
        "--indices",
        "4,0,2",
        "--dataset-id",
        "view",
        "--snapshot-id",
        "view-1",
    ]);
    assert_eq!(snapshot_tree(&ours), snapshot_tree(&theirs));
    let ids: Vec<String> = ok(&["ls", dest])
        .lines()
        .map(|line| line.split_whitespace().nth(1).unwrap().to_string())
        .collect();
    assert_eq!(ids, ["rec-0002", "rec-0004", "rec-0000"]);
    assert!(ok(&["verify", dest]).starts_with("ok"));
    let refused = sds(&["--no-absolute-references", "ls", dest]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("absolute reference refused") && message.contains(lib),
        "{message}"
    );
}

#[test]
fn a_library_dataset_reads_back_in_the_library_after_our_publication() {
    let temp = tempfile::tempdir().unwrap();
    let (library, ours) = library_and_ours(temp.path());
    let dump =
        |root: &Path| common::run_python("graph_tool.py", &["dump", root.to_str().unwrap()], b"");
    assert_eq!(dump(&ours), dump(&library));
}
