//! `sds write-shard` with the inputs of `sds create` (`--from-dir`, `--from-sigmf`,
//! `--from-npy`, `--from-raw`): each worker's shard holds every record its inputs make, and
//! `sds publish` of the receipts gives a dataset whose records equal what `sds create` makes of
//! the same inputs. A repeated worker converges on the same receipt and bytes.

mod common;

use common::cli::{ok, sds};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use common::datasets::snapshot_tree;
use common::mount::MountGuard;
use sdsfs::dataset::{Dataset, OpenOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::record::Record;
use sdsfs::storage::{LocalStore, ObjectStore};

/// The one stderr line of a run that failed with `code`.
fn fails(args: &[&str], code: i32) -> String {
    let out = sds(args);
    assert_eq!(out.status.code(), Some(code), "sds {args:?} should fail");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if code == 1 {
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("sds: "), "{stderr}");
    }
    stderr
}

fn records(root: &Path) -> Vec<Record> {
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(root).unwrap());
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    dataset.iter_records().map(Result::unwrap).collect()
}

fn s(path: &Path) -> String {
    path.to_str().unwrap().to_string()
}

/// Sample files of every kind in `dir`: two SigMF recordings, two .npy files, two raw captures.
struct Inputs {
    sigmf: Vec<String>,
    npy: Vec<String>,
    raw: Vec<String>,
}

fn cf32(samples: usize, seed: usize) -> Vec<u8> {
    (0..2 * samples)
        .flat_map(|k| (((k * 37 + seed * 11) % 251) as f32 * 0.5 - 60.0).to_le_bytes())
        .collect()
}

fn write_inputs(dir: &Path) -> Inputs {
    let mut sigmf = Vec::new();
    for (i, (name, datatype, samples)) in [("alpha", "cf32_le", 64), ("beta", "ci8", 40)]
        .into_iter()
        .enumerate()
    {
        let data = if datatype == "ci8" {
            (0..2 * samples).map(|k| (k * 7 % 256) as u8).collect()
        } else {
            cf32(samples, i)
        };
        std::fs::write(dir.join(format!("{name}.sigmf-data")), data).unwrap();
        let meta = format!(
            r#"{{"global": {{"core:datatype": "{datatype}", "core:sample_rate": 1000000.0, "core:version": "1.2.0"}},
  "captures": [{{"core:sample_start": 0, "core:frequency": 915000000.0}}],
  "annotations": [{{"core:sample_start": 5, "core:sample_count": 10, "core:label": "burst"}}]}}"#
        );
        let meta_path = dir.join(format!("{name}.sigmf-meta"));
        std::fs::write(&meta_path, meta).unwrap();
        sigmf.push(s(&meta_path));
    }
    let mut npy = Vec::new();
    for (name, dtype, shape) in [
        ("tone", DType::C64, vec![30u64]),
        ("grid", DType::F32, vec![2, 3]),
    ] {
        let count: u64 = shape.iter().product();
        let width = if dtype == DType::C64 { 8 } else { 4 };
        let data: Vec<u8> = (0..count * width).map(|k| (k % 7) as u8 * 16).collect();
        let bytes = common::npy::npy_bytes(dtype, &shape, &data);
        let path = dir.join(format!("{name}.npy"));
        std::fs::write(&path, bytes).unwrap();
        npy.push(s(&path));
    }
    let mut raw = Vec::new();
    for (i, samples) in [50, 33].into_iter().enumerate() {
        let path = dir.join(format!("capture{i}.cf32"));
        std::fs::write(&path, cf32(samples, i + 5)).unwrap();
        raw.push(s(&path));
    }
    Inputs { sigmf, npy, raw }
}

fn with(flag: &str, files: &[String]) -> Vec<String> {
    std::iter::once(flag.to_string())
        .chain(files.iter().cloned())
        .collect()
}

/// `sds create` and one `sds write-shard` (run twice) + `sds publish` from the same inputs:
/// the same records; the repeated worker prints the same receipt and changes no byte.
fn check_same_as_create(inputs: &[String]) -> Vec<Record> {
    let tmp = tempfile::tempdir().unwrap();
    let args: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let created = tmp.path().join("created");
    let mut create = vec!["create", created.to_str().unwrap(), "-q"];
    create.extend(&args);
    // Small shards, so create's layout differs from the worker's single shard.
    create.extend(["--records-per-shard", "2"]);
    ok(&create);

    let root = tmp.path().join("written");
    let receipt = tmp.path().join("receipt.json");
    let mut write = vec![
        "write-shard",
        root.to_str().unwrap(),
        "--work-id",
        "w0",
        "--receipt-out",
        receipt.to_str().unwrap(),
    ];
    write.extend(&args);
    let first = ok(&write);
    let tree = snapshot_tree(&root);
    assert_eq!(std::fs::read_to_string(&receipt).unwrap(), first);
    let again = ok(&write);
    assert_eq!(
        first, again,
        "a repeated worker must print the same receipt"
    );
    assert_eq!(
        tree,
        snapshot_tree(&root),
        "a repeated worker changed bytes"
    );

    let publish = [
        "publish",
        root.to_str().unwrap(),
        "--receipts",
        receipt.to_str().unwrap(),
        "--dataset-id",
        "written",
        "--snapshot-id",
        "s1",
        "--expected-work-ids",
        "w0",
    ];
    ok(&publish);
    ok(&publish);
    ok(&["verify", "--deep", root.to_str().unwrap()]);
    let expected = records(&created);
    let got = records(&root);
    assert!(!expected.is_empty());
    assert_eq!(got, expected, "inputs {inputs:?}");
    got
}

#[test]
fn every_input_kind_matches_create() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = write_inputs(dir.path());
    let sigmf = check_same_as_create(&with("--from-sigmf", &inputs.sigmf));
    assert_eq!(sigmf.len(), 2);
    let segmented = {
        let mut args = with("--from-sigmf", &inputs.sigmf);
        args.extend(["--segment-samples".into(), "16".into()]);
        check_same_as_create(&args)
    };
    assert_eq!(segmented.len(), 4 + 3);
    let npy = check_same_as_create(&with("--from-npy", &inputs.npy));
    assert_eq!(
        npy.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["tone", "grid"]
    );
    let mut raw = with("--from-raw", &inputs.raw);
    raw.extend(
        [
            "--datatype",
            "cf32_le",
            "--sample-rate",
            "2e6",
            "--segment-samples",
            "20",
        ]
        .map(String::from),
    );
    assert_eq!(check_same_as_create(&raw).len(), 3 + 2);
    let mut all = with("--from-sigmf", &inputs.sigmf);
    all.extend(with("--from-npy", &inputs.npy));
    all.extend(raw);
    // --segment-samples 20 splits the SigMF recordings too (64 -> 4, 40 -> 2 records).
    assert_eq!(check_same_as_create(&all).len(), 4 + 2 + 2 + 5);
}

/// Mounts the demo fixture and copies its `records/` out, as a user would.
fn demo_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mount = MountGuard::mount(&common::repo_root().join("fixtures/demo"), &[]);
    let status = Command::new("cp")
        .arg("-r")
        .arg(mount.path("records"))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success(), "cp -r failed");
    dir
}

#[test]
fn from_dir_matches_create_and_the_source() {
    let copy = demo_copy();
    let got = check_same_as_create(&["--from-dir".into(), s(copy.path())]);
    assert_eq!(got, records(&common::repo_root().join("fixtures/demo")));
}

/// A fan-out: each worker imports some of the files; the published dataset is what one
/// `sds create` of all of them (in work-id order) makes.
#[test]
fn workers_split_the_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = write_inputs(dir.path());
    let root = dir.path().join("fanout");
    let mut receipts = Vec::new();
    let parts = [
        with("--from-sigmf", &inputs.sigmf),
        with("--from-npy", &inputs.npy[..1]),
        {
            let mut raw = with("--from-raw", &inputs.raw);
            raw.extend(["--datatype", "cf32_le", "--sample-rate", "1e6"].map(String::from));
            raw
        },
    ];
    // Workers finish in any order.
    for i in [2, 0, 1] {
        let receipt = dir.path().join(format!("r{i}.json"));
        let mut args = vec![
            "write-shard".to_string(),
            s(&root),
            "--work-id".into(),
            format!("w{i}"),
            "--attempt".into(),
            "1".into(),
            "--receipt-out".into(),
            s(&receipt),
        ];
        args.extend(parts[i].iter().cloned());
        ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        receipts.push(s(&receipt));
    }
    let mut publish = vec![
        "publish",
        root.to_str().unwrap(),
        "--dataset-id",
        "fanout",
        "--snapshot-id",
        "s1",
        "--expected-work-ids",
        "w0,w1,w2",
        "--receipts",
    ];
    publish.extend(receipts.iter().map(String::as_str));
    ok(&publish);
    ok(&["verify", "--deep", root.to_str().unwrap()]);

    let created = dir.path().join("created");
    let mut create = vec!["create".to_string(), s(&created), "-q".into()];
    create.extend(parts[0].iter().cloned());
    create.extend(parts[1].iter().cloned());
    create.extend(parts[2].iter().cloned());
    ok(&create.iter().map(String::as_str).collect::<Vec<_>>());
    let got = records(&root);
    assert_eq!(got.len(), 2 + 1 + 2);
    assert_eq!(got, records(&created));
}

#[test]
fn bad_worker_inputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = write_inputs(dir.path());
    let root = s(&dir.path().join("out"));
    let receipt = dir.path().join("receipt.json");
    let receipt_s = s(&receipt);
    let base = [
        "write-shard",
        &root,
        "--work-id",
        "w0",
        "--receipt-out",
        &receipt_s,
    ];
    let run = |extra: &[&str], code: i32| {
        let mut args = base.to_vec();
        args.extend(extra);
        fails(&args, code)
    };
    let nothing = run(&[], 1);
    assert!(
        nothing.contains("--from-dir") && nothing.contains("--from-dataset"),
        "{nothing}"
    );
    let raw = run(&["--from-raw", &inputs.raw[0]], 1);
    assert!(raw.contains("--datatype"), "{raw}");
    let mixed = run(
        &[
            "--from-dataset",
            "x",
            "--range",
            "0:1",
            "--from-npy",
            &inputs.npy[0],
        ],
        2,
    );
    assert!(mixed.contains("cannot be used with"), "{mixed}");
    // A file that fails to load: the worker fails naming it, and leaves no receipt.
    let bad: PathBuf = dir.path().join("bad.npy");
    std::fs::write(&bad, b"not numpy").unwrap();
    let broken = run(&["--from-npy", &inputs.npy[0], bad.to_str().unwrap()], 1);
    assert!(broken.contains("bad.npy"), "{broken}");
    let empty = tempfile::tempdir().unwrap();
    let no_records = run(&["--from-dir", empty.path().to_str().unwrap()], 1);
    assert!(no_records.contains("no record"), "{no_records}");
    assert!(!receipt.exists());
}
