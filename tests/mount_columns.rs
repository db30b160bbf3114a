//! `columns/` against the library's own reading (`library_tool.py check-columns`): every
//! column's `.raw`, `.npy`, `.offsets.npy` and `.shapes.npy` hold the records' values stacked
//! as the library reads them, `records.jsonl` the rows, `README.txt` names every field left
//! out, and nothing else is there. Datasets: the demo, library-written ones of the current
//! release (uniform and ragged fields, fields left out, reference views, multi-page
//! publications, materialized views) and an empty view.

#[path = "common/cli.rs"]
mod cli;
#[path = "common/library.rs"]
mod library;
#[path = "common/mount.rs"]
mod mount;

use std::path::Path;

use library::CURRENT;
use mount::MountGuard;

fn text(path: &Path) -> String {
    path.to_str().expect("utf-8 path").to_string()
}

/// Mounts `root` and checks `columns/` with the library; returns the checker's summary.
fn assert_columns_agree(case: &str, root: &Path) -> String {
    let guard = MountGuard::mount(root, &[]);
    let output = library::tool_output(
        CURRENT,
        &["check-columns", &text(root), &text(&guard.mountpoint)],
    );
    assert!(
        output.status.success(),
        "{case}: columns/ of {} differs from the library:\n{}\nsdsfs log:\n{}",
        root.display(),
        String::from_utf8_lossy(&output.stderr),
        guard.log_text()
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[test]
fn demo_columns_are_the_records_stacked() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("demo");
    let demo = cli::sds(&["demo", &text(&root)]);
    assert!(demo.status.success());
    let summary = assert_columns_agree("demo", &root);
    // Of the demo's 12 fields, 10 are columns (its boxes ragged); 2 are left out: rx1's IQ,
    // only in scene-0002's records (4 and 5), and the segmentation raster, which gains a
    // receiver axis there.
    assert!(
        summary.contains("\"columns\":10") && summary.contains("\"left_out\":2"),
        "{summary}"
    );
}

/// A field of a spec: `dtype` and `shape`, values from `seed`, one axis per dimension.
fn spec_field(dtype: &str, shape: &[u64], seed: u64) -> serde_json::Value {
    let axes: Vec<_> = (0..shape.len())
        .map(|d| serde_json::json!({"name": format!("d{d}")}))
        .collect();
    serde_json::json!({"dtype": dtype, "shape": shape, "seed": seed, "axes": axes, "metadata": {}})
}

/// 12 records on four one-shard manifest pages: a uniform IQ column, a ragged box column (0,
/// 1 or 2 boxes), a uniform int column, a field whose dtype changes at record 6 and one that
/// appears at record 4 (both left out).
fn columns_spec(dir: &Path) -> std::path::PathBuf {
    let records: Vec<_> = (0..12u64)
        .map(|i| {
            let mut fields = serde_json::Map::new();
            fields.insert("rx0/iq".into(), spec_field("<c8", &[64], i));
            fields.insert(
                "labels/boxes/extent".into(),
                spec_field("<f8", &[i % 3, 4], 100 + i),
            );
            fields.insert("labels/class".into(), spec_field("<i4", &[2], 200 + i));
            let tag = if i < 6 { "<i2" } else { "<f4" };
            fields.insert("tag".into(), spec_field(tag, &[1], 300 + i));
            if i >= 4 {
                fields.insert("late".into(), spec_field("|u1", &[3], 400 + i));
            }
            let scene = (i % 2 == 0).then(|| format!("scene {}", i / 4));
            serde_json::json!({"id": format!("r{i}"), "scene_id": scene, "fields": fields,
                               "metadata": {"n": i, "note": "ü"}})
        })
        .collect();
    let shards: Vec<_> = [(0, 3), (3, 5), (5, 9), (9, 12)]
        .iter()
        .enumerate()
        .map(|(k, (start, stop))| {
            serde_json::json!({"work_id": format!("w-{k}"), "start": start, "stop": stop,
                               "attempts": [0]})
        })
        .collect();
    let spec = serde_json::json!({
        "dataset_id": "columns", "snapshot_id": "s1", "metadata": {}, "seed": 1,
        "records": records, "shards": shards, "shards_per_manifest": 1,
        "writer_options": "default",
    });
    let path = dir.join("columns-spec.json");
    std::fs::write(&path, serde_json::to_vec(&spec).unwrap()).unwrap();
    path
}

#[test]
fn a_library_dataset_of_uniform_and_ragged_fields_on_several_pages_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let spec = columns_spec(dir.path());
    let out = dir.path().join("out");
    library::tool(CURRENT, &["write", &text(&spec), &text(&out)]);
    for part in ["view", "materialized"] {
        if out.join(part).exists() {
            assert_columns_agree(&format!("columns spec {part}"), &out.join(part));
        }
    }
    let summary = assert_columns_agree("columns spec", &out.join("dataset"));
    assert!(
        summary.contains("\"columns\":3") && summary.contains("\"left_out\":2"),
        "{summary}"
    );
    let guard = MountGuard::mount(&out.join("dataset"), &[]);
    let readme = std::fs::read_to_string(guard.path("columns/README.txt")).unwrap();
    for why in [
        "- tag: dtype changes at record 6: int16 before, float32 there",
        "- late: missing from records 0 to 3",
    ] {
        assert!(readme.contains(why), "{why:?} not in:\n{readme}");
    }
}

#[test]
fn random_library_datasets_views_and_pages_agree() {
    let seed = library::run_seed();
    let dir = tempfile::tempdir().unwrap();
    for (kind, seed, extra) in [
        ("full", seed, &["--full"][..]),
        ("random", seed + 100_000, &[][..]),
    ] {
        let spec = library::spec(dir.path(), seed, extra);
        let out = dir.path().join(kind);
        library::tool(CURRENT, &["write", &text(&spec), &text(&out)]);
        for part in ["dataset", "view", "materialized"] {
            let root = out.join(part);
            if !root.exists() {
                continue;
            }
            let case = format!("seed {seed} {kind} {part}");
            println!("{case}: {}", assert_columns_agree(&case, &root));
        }
    }
}

#[test]
fn an_empty_dataset_has_an_empty_records_jsonl_and_no_column() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    assert!(cli::sds(&["demo", &text(&demo)]).status.success());
    let empty = dir.path().join("empty");
    let select = cli::sds(&[
        "select",
        &text(&demo),
        &text(&empty),
        "--indices",
        "0:0",
        "--dataset-id",
        "e",
        "--snapshot-id",
        "e1",
    ]);
    assert!(select.status.success());
    let summary = assert_columns_agree("empty view", &empty);
    assert!(summary.contains("\"columns\":0"), "{summary}");
    let guard = MountGuard::mount(&empty, &[]);
    assert_eq!(
        std::fs::metadata(guard.path("columns/records.jsonl"))
            .unwrap()
            .len(),
        0
    );
    // The tables of an empty dataset are valid and empty: no line, and Arrow files of no
    // row that pyarrow, polars and pandas read (check-columns above read them).
    let labels = guard.path("columns/labels.jsonl");
    assert_eq!(std::fs::metadata(labels).unwrap().len(), 0);
    assert!(
        summary.contains("\"arrow_records\":0") && summary.contains("\"arrow_labels\":0"),
        "{summary}"
    );
}
