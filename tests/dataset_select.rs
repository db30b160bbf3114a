//! Views and materialized selections (`dataset::view`, `sds select`): both read back exactly
//! the selected records in order; a reference view points at the source's shards by absolute
//! location, one entry per record with `record_indices`; both pass `verify --deep`.

mod common;

use std::process::Command;

use common::datasets::*;
use sdsfs::dataset::{
    materialize, parse_indices, select_view, verify_store, PublishOptions, ShardOptions,
    VerifyOptions,
};

fn read_all(dir: &std::path::Path) -> Vec<sdsfs::format::record::Record> {
    let dataset = sdsfs::dataset::Dataset::open(local_store(dir), Default::default()).unwrap();
    dataset.iter_records().map(Result::unwrap).collect()
}

#[test]
fn index_specifications() {
    assert_eq!(
        parse_indices("0:3,7,9:", 11).unwrap(),
        vec![0, 1, 2, 7, 9, 10]
    );
    assert_eq!(parse_indices(":2, 5", 6).unwrap(), vec![0, 1, 5]);
    assert_eq!(parse_indices("4:4", 6).unwrap(), Vec::<u64>::new());
    for bad in ["", "1,,2", "6", "0:7", "3:2", "-1", "a:b", "1:2:3"] {
        assert!(parse_indices(bad, 6).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn reference_view_points_at_the_source_and_reads_back_the_selection() {
    let source = publish_dataset(&[3, 2, 4], 2);
    let dest = tempfile::tempdir().unwrap();
    let store = local_store(dest.path());
    let chosen = vec![1, 2, 4, 8, 0, 5];
    let summary = select_view(
        &source.open(),
        &chosen,
        store.as_ref(),
        &PublishOptions::new("view", "v1"),
    )
    .unwrap();
    // One entry per record, as the library's reference views.
    assert_eq!(summary.publication.record_count, 6);
    assert_eq!(summary.publication.shard_count, 6);
    let expected: Vec<_> = chosen
        .iter()
        .map(|&o| source.records[o as usize].clone())
        .collect();
    assert_eq!(read_all(dest.path()), expected);
    let view = sdsfs::dataset::Dataset::open(store.clone(), Default::default()).unwrap();
    let first = view.locate(0).unwrap();
    let entry = first.entry().unwrap();
    assert_eq!(entry.record_indices, Some(vec![1]));
    // The source's shard, by absolute location; nothing was copied into the view.
    assert_eq!(entry.data.path.as_str(), source.receipts[0].data_uri);
    assert!(!dest.path().join("objects").exists());
    assert_eq!(
        view.root().metadata.get("reference_dataset"),
        Some(&sdsfs::format::json::Value::Bool(true))
    );
    assert!(
        std::fs::read_dir(dest.path().join("manifests/v1")).is_ok(),
        "pages fan out by the snapshot id's first two characters"
    );
    let report = verify_store(store.clone(), VerifyOptions { deep: true });
    assert!(report.is_ok(), "{:?}", report.problems);
    // Refusing absolute references fails the records, naming the reference.
    let options = sdsfs::dataset::OpenOptions {
        absolute_references: sdsfs::dataset::AbsoluteReferences::Refuse,
        ..Default::default()
    };
    let refusing = sdsfs::dataset::Dataset::open(store.clone(), options).unwrap();
    let err = refusing.read_record(0).unwrap_err().to_string();
    let source_root = std::path::absolute(source.root())
        .unwrap()
        .display()
        .to_string();
    assert!(
        err.contains("absolute reference refused") && err.contains(&source_root),
        "{err}"
    );
    // Re-running converges on the same bytes.
    let before = snapshot_tree(dest.path());
    select_view(
        &source.open(),
        &chosen,
        store.as_ref(),
        &PublishOptions::new("view", "v1"),
    )
    .unwrap();
    assert_eq!(snapshot_tree(dest.path()), before);
}

#[test]
fn materialized_selection_has_new_compact_shards() {
    let source = publish_dataset(&[3, 2, 4], 2);
    let dest = tempfile::tempdir().unwrap();
    let store = local_store(dest.path());
    let chosen = vec![7, 0, 3, 4];
    let summary = materialize(
        &source.open(),
        &chosen,
        store.as_ref(),
        &PublishOptions::new("mat", "m1"),
        3,
        &ShardOptions::default(),
    )
    .unwrap();
    assert_eq!((summary.record_count, summary.shard_count), (4, 2));
    let expected: Vec<_> = chosen
        .iter()
        .map(|&o| source.records[o as usize].clone())
        .collect();
    assert_eq!(read_all(dest.path()), expected);
    let view = sdsfs::dataset::Dataset::open(store.clone(), Default::default()).unwrap();
    assert_eq!(
        view.locate(0).unwrap().entry().unwrap().record_indices,
        None
    );
    let report = verify_store(store, VerifyOptions { deep: true });
    assert!(report.is_ok(), "{:?}", report.problems);
}

#[test]
fn cli_select_by_indices_and_scene() {
    let source = publish_dataset(&[3, 2, 4], 2);
    let sds = env!("CARGO_BIN_EXE_sds");
    let out = tempfile::tempdir().unwrap();
    // Scene "scene-1" holds the even serials with serial % 3 == 1: 4.
    for (name, extra) in [("view", None), ("mat", Some("--materialize"))] {
        let dest = out.path().join(name);
        let mut command = Command::new(sds);
        command
            .arg("select")
            .arg(source.root())
            .arg(&dest)
            .args(["--indices", "6:,0", "--scene", "scene-1"])
            .args(["--dataset-id", name, "--snapshot-id", "s1"]);
        if let Some(flag) = extra {
            command.arg(flag);
        }
        let status = command.output().unwrap();
        assert!(status.status.success(), "{status:?}");
        let expected: Vec<_> = [6, 7, 8, 0, 4]
            .iter()
            .map(|&o: &usize| source.records[o].clone())
            .collect();
        assert_eq!(read_all(&dest), expected, "{name}");
        let verify = Command::new(sds)
            .args(["verify", "--deep"])
            .arg(&dest)
            .output()
            .unwrap();
        assert!(verify.status.success(), "{verify:?}");
    }
    let bad = Command::new(sds)
        .arg("select")
        .arg(source.root())
        .arg(out.path().join("bad"))
        .args([
            "--indices",
            "0:99",
            "--dataset-id",
            "b",
            "--snapshot-id",
            "s",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("0:99"));
}
