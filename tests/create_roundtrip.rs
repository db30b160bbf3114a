//! `sds create --from-dir`: fixture datasets mounted for real, copied out with `cp -r`,
//! republished, and compared record by record (and byte for byte where the options allow).

mod common;

use common::cli::ok;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use common::mount::MountGuard;
use sdsfs::dataset::{Dataset, OpenOptions};
use sdsfs::storage::{LocalStore, ObjectStore};

fn open(root: &Path) -> Dataset {
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(root).unwrap());
    Dataset::open(store, OpenOptions::default()).unwrap()
}

fn demo() -> PathBuf {
    common::repo_root().join("fixtures/demo")
}

/// Mounts `dataset` and copies its `records/` into a new directory, as a user would.
fn copy_out(dataset: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mount = MountGuard::mount(dataset, &[]);
    let status = Command::new("cp")
        .arg("-r")
        .arg(mount.path("records"))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success(), "cp -r failed");
    dir
}

/// Every record equal: ids, scene ids, metadata, fields (dtype, shape, axes, metadata, bytes).
fn assert_same_records(a: &Dataset, b: &Dataset) {
    assert_eq!(a.len(), b.len());
    for ordinal in 0..a.len() {
        let (x, y) = (
            a.read_record(ordinal).unwrap(),
            b.read_record(ordinal).unwrap(),
        );
        assert_eq!(x.id, y.id, "record {ordinal}");
        assert_eq!(x.scene_id, y.scene_id, "record {ordinal}");
        assert_eq!(x.metadata, y.metadata, "record {ordinal}");
        assert_eq!(
            x.fields.keys().collect::<Vec<_>>(),
            y.fields.keys().collect::<Vec<_>>()
        );
        for (name, field) in &x.fields {
            let other = &y.fields[name];
            assert_eq!(field.meta, other.meta, "record {ordinal} field {name}");
            assert_eq!(field.data, other.data, "record {ordinal} field {name}");
        }
    }
}

fn demo_publication_args(out: &str, from: &str) -> Vec<String> {
    let description = "description=Demo RF dataset: 4 scenes x 2 observations; 1 MHz receiver IQ with QPSK/2-FSK bursts (scene-0002 also at 2 MHz on a second receiver), box labels (scene-0003's in absolute Hz) and segmentation labels, pulsed radar";
    [
        "create",
        out,
        "--from-dir",
        from,
        "--records-per-shard",
        "3",
        "--shards-per-manifest",
        "2",
        "--dataset-id",
        "sds-demo",
        "--snapshot-id",
        "sds-demo-v1",
        "--metadata",
        "generator=sds demo",
        "--metadata",
        "seed=20250601",
        "--metadata",
        description,
        "--metadata",
        r#"rfgen_expected_work_ids=["000000000000","000000000003","000000000006"]"#,
        "--quiet",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn demo_round_trips_byte_for_byte() {
    let copy = copy_out(&demo());
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("ds");
    let args = demo_publication_args(target.to_str().unwrap(), copy.path().to_str().unwrap());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&args);
    assert_same_records(&open(&demo()), &open(&target));
    // Same records, layout and publication metadata: the very same dataset, every byte.
    assert_eq!(
        common::datasets::snapshot_tree(&demo()),
        common::datasets::snapshot_tree(&target)
    );
}

#[test]
fn npy_views_alone_round_trip() {
    let copy = copy_out(&demo());
    let mut removed = 0;
    let mut stack = vec![copy.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "raw") {
                std::fs::remove_file(&path).unwrap();
                removed += 1;
            }
        }
    }
    assert!(removed >= 80, "{removed}");
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("ds");
    let args = [
        "create",
        target.to_str().unwrap(),
        "--from-dir",
        copy.path().to_str().unwrap(),
        "-q",
    ];
    let stdout = ok(&args);
    assert!(stdout.contains("dataset_id: sds-"), "{stdout}");
    assert_same_records(&open(&demo()), &open(&target));
}

#[test]
fn jobs_do_not_change_a_byte() {
    let copy = copy_out(&demo());
    let out = tempfile::tempdir().unwrap();
    let mut trees = Vec::new();
    let mut printed = Vec::new();
    for jobs in ["1", "2", "3"] {
        let target = out.path().join(format!("jobs{jobs}"));
        let args = [
            "create",
            target.to_str().unwrap(),
            "--from-dir",
            copy.path().to_str().unwrap(),
            "--records-per-shard",
            "2",
            "--shards-per-manifest",
            "3",
            "--jobs",
            jobs,
            "-q",
            "--metadata",
            "purpose=determinism",
        ];
        let stdout = ok(&args);
        printed.push(stdout.lines().take(2).collect::<Vec<_>>().join("\n"));
        trees.push(common::datasets::snapshot_tree(&target));
        // Shards were staged in the output root (to be linked, not copied, into place); no
        // staging directory outlives the run.
        let staging: Vec<_> = std::fs::read_dir(&target)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(".sds-staging-"))
            .collect();
        assert!(staging.is_empty(), "{staging:?}");
    }
    assert_eq!(trees[0], trees[1]);
    assert_eq!(trees[0], trees[2]);
    // Derived ids are printed and identical too.
    assert_eq!(printed[0], printed[1]);
    assert!(printed[0].contains("snapshot_id: snap-"), "{}", printed[0]);
    let dataset = open(&out.path().join("jobs2"));
    assert_eq!(dataset.snapshot().shard_count, 4);
    assert_same_records(&open(&demo()), &dataset);
}

#[test]
fn edits_are_published() {
    let copy = copy_out(&demo());
    let record = copy.path().join("records/3");
    // Edit a field's bytes in place, and a record's metadata and scene.
    let raw = record.join("fields/projections/radar_rx/components/noise.raw");
    let mut bytes = std::fs::read(&raw).unwrap();
    bytes[..8].copy_from_slice(&1.5f32.to_le_bytes().repeat(2));
    std::fs::write(&raw, &bytes).unwrap();
    let json = std::fs::read_to_string(record.join("record.json")).unwrap();
    let json = json.replace("\"scene_id\": \"scene-0001\"", "\"scene_id\": \"edited\"");
    std::fs::write(record.join("record.json"), json).unwrap();
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("ds");
    ok(&[
        "create",
        target.to_str().unwrap(),
        "--from-dir",
        copy.path().to_str().unwrap(),
        "-q",
    ]);
    let edited = open(&target).read_record(3).unwrap();
    assert_eq!(edited.scene_id.as_deref(), Some("edited"));
    let noise = &edited.fields["projections/radar_rx/components/noise"];
    assert_eq!(&noise.data[..], &bytes[..]);
}
