//! The catalog race. Eight `sds annotate` processes publish eight different sets at the same
//! moment, several rounds in a row, against one local dataset: every set must be in the final
//! catalog, and the revisions the publishers committed must form one chain (each the previous
//! plus exactly one set), so no update was lost. Then the mixed race: four `sds annotate` and
//! four `signal-dataset` library publishers at once on a library dataset, which shows our
//! catalog lock and the library's exclude each other. (The same race on S3 and GCS servers is
//! in tests/storage_s3.rs and tests/storage_gcs.rs.)

mod common;

use std::process::{Command, Stdio};

use common::annotate::{assert_no_set_lost, assert_sets_read_back, race_publishers, race_rows};
use common::datasets::publish_dataset;
use common::{python, repo_root, run_python};
use sdsfs::format::documents::{CatalogPointer, Revision};
use sdsfs::format::json::JsonLimits;

const PROCESSES: usize = 8;
const ROUNDS: usize = 4;

#[test]
fn eight_publishers_at_once_lose_nothing() {
    let published = publish_dataset(&[3, 4], 10);
    let root = published.root().to_path_buf();
    let rows = race_rows(&root);
    let outcome = race_publishers(root.to_str().unwrap(), &[], &rows, PROCESSES, ROUNDS);
    assert_eq!(outcome.committed.len(), PROCESSES * ROUNDS);
    assert_no_set_lost(&outcome, |path| std::fs::read(root.join(path)).unwrap());

    // And every set reads back through the library.
    assert_eq!(published.open().len(), 7);
    assert_sets_read_back(&published.open(), PROCESSES * ROUNDS);
}

/// NEEDS THE DATASET READER OF THE REAL FORMAT (the core rewrite): `sds annotate` must open a
/// dataset the library wrote.
#[test]
fn our_publishers_and_the_library_s_at_once_keep_every_set() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let root_text = root.to_str().unwrap();
    let tool =
        |args: &[&str]| String::from_utf8(run_python("annotation_tool.py", args, b"")).unwrap();
    tool(&["make-dataset", root_text, "5", "2"]);
    tool(&[
        "make-rows",
        dir.path().to_str().unwrap(),
        "5",
        "--no-big-int",
    ]);
    let rows = dir.path().join("rows.jsonl");
    let mut children = Vec::new();
    for p in 0..4 {
        let ours = Command::new(env!("CARGO_BIN_EXE_sds"))
            .args([
                "annotate",
                root_text,
                "--name",
                &format!("ours-{p}"),
                "--rows",
            ])
            .arg(&rows)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let theirs = Command::new(python())
            .arg(repo_root().join("tests/python/annotation_tool.py"))
            .args(["publish", root_text, &format!("theirs-{p}")])
            .arg(&rows)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        children.push((format!("ours-{p}"), ours));
        children.push((format!("theirs-{p}"), theirs));
    }
    for (name, child) in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let expected: Vec<String> = (0..4)
        .flat_map(|p| [format!("ours-{p}"), format!("theirs-{p}")])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let read = |rel: &str| std::fs::read(root.join(rel)).unwrap();
    let pointer =
        CatalogPointer::parse(&read("annotations/catalog.json"), &JsonLimits::CONTROL).unwrap();
    let revision =
        Revision::parse(&read(pointer.revision.path.as_str()), &JsonLimits::CONTROL).unwrap();
    assert_eq!(revision.sets.keys().cloned().collect::<Vec<_>>(), expected);
    // The library opens every set, ours and its own.
    let listed: serde_json::Value = serde_json::from_str(&tool(&["read", root_text])).unwrap();
    let names: Vec<String> = listed.as_object().unwrap().keys().cloned().collect();
    assert_eq!(names, expected);
}
