//! `sds annotate` end to end: the one-process form with `.npy` fields, refusals, and the
//! distributed form (write-shard per worker, then publish).

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::datasets::publish_dataset;
use sdsfs::annotations::{read_catalog, AnnotationStatus};
use sdsfs::format::dtype::DType;

fn sds(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sds"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write_npy(path: &Path, dtype: DType, shape: &[u64], data: &[u8]) {
    std::fs::write(path, common::npy::npy_bytes(dtype, shape, data)).unwrap();
}

#[test]
fn one_process_publication_with_npy_fields_and_refusals() {
    let published = publish_dataset(&[3, 2], 10);
    let root = published.root().to_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    write_npy(
        &dir.path().join("m.npy"),
        DType::I16,
        &[2, 2],
        &[1, 0, 2, 0, 3, 0, 4, 0],
    );
    let rows = dir.path().join("rows.jsonl");
    let id3 = published.records[3].id.clone();
    std::fs::write(
        &rows,
        format!(
            "{{\"source_index\": 0, \"status\": \"success\", \"values\": {{\"k\": 1}}, \
             \"fields\": {{\"mask\": {{\"npy\": \"m.npy\", \"axes\": [\"row\", \"col\"]}}}}}}\n\
             {{\"source_record_id\": \"{id3}\", \"status\": \"failed\", \"detail_status\": \"bad\"}}\n"
        ),
    )
    .unwrap();
    let rows = rows.to_str().unwrap();

    let refused = sds(&["annotate", &root, "--name", "s", "--rows", rows]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = text(&refused.stderr);
    assert!(
        stderr.contains("no row for 3 of the 5 records") && stderr.contains("--fill skipped"),
        "{stderr}"
    );

    let ok = sds(&[
        "annotate", &root, "--name", "s", "--rows", rows, "--fill", "skipped",
    ]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    let stdout = text(&ok.stdout);
    assert!(
        stdout.contains("rows success 1, skipped 3, failed 1"),
        "{stdout}"
    );

    let dataset = published.open();
    let catalog = read_catalog(&dataset).unwrap();
    let set = catalog.sets["s"].as_ref().unwrap();
    let row0 = set.get(&dataset, 0).unwrap();
    let mask = &row0.fields["mask"];
    assert_eq!(mask.meta.shape, [2, 2]);
    assert_eq!(mask.meta.axes[1].name, "col");
    assert_eq!(mask.data.as_ref(), &[1, 0, 2, 0, 3, 0, 4, 0]);
    let row3 = set.get(&dataset, 3).unwrap();
    assert_eq!(
        (row3.status, row3.detail_status.as_deref()),
        (AnnotationStatus::Failed, Some("bad"))
    );

    let info = sds(&["info", &root]);
    assert!(
        text(&info.stdout).contains(&format!(
            "  s  publication {}  5 records",
            set.publication_id()
        )),
        "{}",
        text(&info.stdout)
    );

    // The same publication again converges (nothing new written); other rows under the same
    // name are a collision: a publication never replaces a set.
    let again = sds(&[
        "annotate", &root, "--name", "s", "--rows", rows, "--fill", "skipped",
    ]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("catalog_attempts 0"),
        "{}",
        text(&again.stdout)
    );
    std::fs::write(
        dir.path().join("other.jsonl"),
        "{\"source_index\": 1, \"status\": \"success\"}\n",
    )
    .unwrap();
    let other = sds(&[
        "annotate",
        &root,
        "--name",
        "s",
        "--rows",
        dir.path().join("other.jsonl").to_str().unwrap(),
        "--fill",
        "skipped",
    ]);
    assert!(!other.status.success());
    assert!(
        text(&other.stderr).contains("annotation set \"s\" already exists"),
        "{}",
        text(&other.stderr)
    );
    let catalog = read_catalog(&published.open()).unwrap();
    assert_eq!(
        catalog.sets["s"]
            .as_ref()
            .unwrap()
            .get(&dataset, 3)
            .unwrap(),
        row3
    );

    std::fs::write(
        dir.path().join("bad.jsonl"),
        "{\"source_index\": 0, \"status\": \"ok\"}\n",
    )
    .unwrap();
    let bad = sds(&[
        "annotate",
        &root,
        "--name",
        "t",
        "--rows",
        dir.path().join("bad.jsonl").to_str().unwrap(),
    ]);
    assert!(
        text(&bad.stderr).contains("line 1: status must be one of"),
        "{}",
        text(&bad.stderr)
    );
    std::fs::write(
        dir.path().join("typo.jsonl"),
        "{\"source_index\": 0, \"status\": \"success\", \"valeus\": {}}\n",
    )
    .unwrap();
    let typo = sds(&[
        "annotate",
        &root,
        "--name",
        "t",
        "--rows",
        dir.path().join("typo.jsonl").to_str().unwrap(),
    ]);
    assert!(
        text(&typo.stderr).contains("unknown key \"valeus\""),
        "{}",
        text(&typo.stderr)
    );
}

#[test]
fn distributed_workers_then_coordinator() {
    let published = publish_dataset(&[4, 3], 10);
    let root = published.root().to_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.jsonl");
    let lines: String = (0..7)
        .map(|o| {
            format!(
                "{{\"source_index\": {o}, \"status\": \"success\", \"values\": {{\"o\": {o}}}}}\n"
            )
        })
        .collect();
    std::fs::write(&rows, lines).unwrap();
    let rows = rows.to_str().unwrap();
    let rows2 = dir.path().join("rows2.jsonl");
    let lines: String = (0..7)
        .map(|o| format!("{{\"source_index\": {o}, \"status\": \"failed\"}}\n"))
        .collect();
    std::fs::write(&rows2, lines).unwrap();
    let rows2 = rows2.to_str().unwrap();
    let common = ["--name", "d", "--records-per-shard", "3", "--rows", rows];
    let publish = sds(&[
        "annotate",
        "publish",
        &root,
        "--name",
        "d",
        "--records-per-shard",
        "3",
    ]);
    assert_eq!(publish.status.code(), Some(1));
    assert!(
        text(&publish.stderr).contains("shard-00000000"),
        "{}",
        text(&publish.stderr)
    );
    for shard in ["0", "1", "2"] {
        let mut args = vec!["annotate", "write-shard", &root, "--shard", shard];
        args.extend(common);
        let out = sds(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("outcome written"));
        // A repeat writes the same bytes: its own pointer, nothing adopted.
        let again = sds(&args);
        assert!(
            text(&again.stdout).contains("outcome written"),
            "{}",
            text(&again.stdout)
        );
        // A worker with other rows loses to the first pointer and adopts it.
        let mut other = vec!["annotate", "write-shard", &root, "--shard", shard];
        other.extend(["--name", "d", "--records-per-shard", "3", "--rows", rows2]);
        let late = sds(&other);
        assert!(
            text(&late.stdout).contains("outcome adopted"),
            "{}",
            text(&late.stdout)
        );
    }
    // The coordinator may spell the root differently from the workers (their pointers record
    // `ROOT/annotations/...`): the publication prefix in each uri identifies the object.
    let file_url = format!("file://{root}");
    let publish = sds(&[
        "annotate",
        "publish",
        &file_url,
        "--name",
        "d",
        "--records-per-shard",
        "3",
    ]);
    assert!(publish.status.success(), "{}", text(&publish.stderr));
    let dataset = published.open();
    let catalog = read_catalog(&dataset).unwrap();
    let set = catalog.sets["d"].as_ref().unwrap();
    assert_eq!(set.root().shards.len(), 3);
    let rows: Vec<_> = set.iter(&dataset).map(Result::unwrap).collect();
    assert_eq!(rows.len(), 7);
    assert_eq!(rows[6].values["o"], sdsfs::format::json::Value::Int(6));
}
