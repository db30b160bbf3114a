//! The normative layout-0.1 fixtures (`fixtures/normative/`, see its README and
//! `docs/COMPATIBILITY.md`): encoding, rows and publication must reproduce them byte for byte,
//! decoding must give back the record, and the reference Python packages must read them.
//!
//! Changing a fixture is a format decision, not a refactor. To regenerate deliberately:
//! `SDS_REGENERATE_FIXTURES=1 cargo test --release --test normative_fixtures`, then review the
//! diff.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::{parse_value, JsonLimits, Object, Value};
use sdsfs::format::record::{self, Axis, Coordinate, Field, Record};
use sdsfs::storage::{LocalStore, ObjectStore};

const DATASET_ID: &str = "normative-v01";
const SNAPSHOT_ID: &str = "normative-v01-s0";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/normative")
}

fn regenerating() -> bool {
    std::env::var_os("SDS_REGENERATE_FIXTURES").is_some()
}

fn obj(pairs: &[(&str, Value)]) -> Object {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), v.clone()))
        .collect()
}

/// The normative record: a complex64 IQ field on a regular time axis and a uint8 label field
/// sharing that axis (same id, same coordinate), a scene id, and metadata with floats that
/// exercise Python's `repr(float)` forms.
fn normative_record() -> Record {
    let time = Axis::new("time", 16)
        .with_role("time")
        .with_id("t")
        .with_coordinate(Coordinate::regular(0.0, 1e-06).with_unit("s"));
    let iq_bytes: Vec<u8> = (0..16)
        .flat_map(|k| {
            let re = k as f32 * 0.125;
            let im = -(k as f32) * 0.0625;
            re.to_le_bytes().into_iter().chain(im.to_le_bytes())
        })
        .collect();
    let block = obj(&[
        ("kind", "uniform".into()),
        ("sample_rate_hz", 1_000_000.0.into()),
        ("origin_s", 0.25.into()),
        ("axis", "time".into()),
        ("count", 16u64.into()),
    ]);
    let iq = Field::new(DType::C64, vec![16], iq_bytes)
        .unwrap()
        .with_axes(vec![time.clone()])
        .with_metadata(obj(&[("time_coordinates", block.into())]));
    let labels: Vec<u8> = (0..16).map(|k| u8::from((4..12).contains(&k))).collect();
    let label = Field::new(DType::U8, vec![16], labels)
        .unwrap()
        .with_axes(vec![time])
        .with_metadata(obj(&[(
            "classes",
            vec!["noise".into(), "burst".into()].into(),
        )]));
    let metadata = obj(&[
        ("center_frequency_hz", 2_400_000_000.0.into()),
        ("gain_db", (-3.5).into()),
        ("snr_db", 12.0.into()),
        ("tiny", 1e-05.into()),
        ("note", "normative record v0.1 \u{e9}".into()),
    ]);
    Record::new("normative-record-0")
        .with_scene_id("scene-0")
        .with_metadata(metadata)
        .with_field("rx0/iq", iq)
        .with_field("rx0/label", label)
}

/// Publishes the normative record as a one-record, one-shard dataset into `root`.
fn publish_graph(root: &Path) {
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(root).unwrap());
    let receipt = write_shard(
        store.as_ref(),
        [normative_record()],
        "work-0",
        0,
        &ShardOptions::default(),
    )
    .unwrap();
    let mut options = PublishOptions::new(DATASET_ID, SNAPSHOT_ID);
    options.metadata = obj(&[("purpose", "normative fixture".into())]);
    options.expected_work_ids = Some(vec!["work-0".into()]);
    publish(store.as_ref(), &[receipt], &options).unwrap();
}

use common::datasets::snapshot_tree as files;

/// Compares `actual` with the fixture `name`, or writes it when regenerating.
fn check_bytes(name: &str, actual: &[u8]) {
    let path = dir().join(name);
    if regenerating() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read(&path).unwrap();
    assert!(
        expected == actual,
        "{name} differs from the normative fixture"
    );
}

#[test]
fn encoding_the_record_gives_the_fixture() {
    let payload = record::encode(&normative_record(), &Default::default()).unwrap();
    check_bytes("record-v01.safetensors", &payload);
}

#[test]
fn the_metadata_row_gives_the_fixture() {
    let row = normative_record().meta().to_row_json();
    check_bytes("metadata-v01.json", row.as_bytes());
}

#[test]
fn decoding_the_fixture_gives_the_record() {
    let bytes = std::fs::read(dir().join("record-v01.safetensors")).unwrap();
    let decoded = record::decode(bytes.into(), &Default::default()).unwrap();
    assert_eq!(decoded, normative_record());
    let row = std::fs::read(dir().join("metadata-v01.json")).unwrap();
    let meta = record::RecordMeta::parse_row(&row, &Default::default()).unwrap();
    assert_eq!(meta, normative_record().meta());
}

#[test]
fn publishing_the_record_gives_the_graph() {
    let temp = tempfile::tempdir().unwrap();
    publish_graph(temp.path());
    let graph = dir().join("graph");
    if regenerating() {
        let _ = std::fs::remove_dir_all(&graph);
        std::fs::create_dir_all(&graph).unwrap();
        publish_graph(&graph);
    }
    let fresh = files(temp.path());
    let expected = files(&graph);
    assert_eq!(
        fresh.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "the set of published paths differs"
    );
    for (path, bytes) in &expected {
        assert!(&fresh[path] == bytes, "graph/{path} differs");
    }
}

fn graph_shard(kind: &str) -> PathBuf {
    let graph = dir().join("graph");
    let (path, _) = files(&graph)
        .into_iter()
        .find(|(p, _)| p.starts_with(&format!("objects/{kind}/")))
        .unwrap();
    graph.join(path)
}

fn read_with_reference_arrayrecord(path: &Path) -> Vec<Vec<u8>> {
    let out = common::run_python(
        "arrayrecord_tool.py",
        &["read", path.to_str().unwrap()],
        b"",
    );
    let mut records = Vec::new();
    let mut rest = out.as_slice();
    while !rest.is_empty() {
        let n = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
        records.push(rest[8..8 + n].to_vec());
        rest = &rest[8 + n..];
    }
    records
}

#[test]
fn reference_arrayrecord_reads_the_graph_shards() {
    let record = std::fs::read(dir().join("record-v01.safetensors")).unwrap();
    let row = std::fs::read(dir().join("metadata-v01.json")).unwrap();
    assert_eq!(
        read_with_reference_arrayrecord(&graph_shard("data")),
        [record]
    );
    assert_eq!(
        read_with_reference_arrayrecord(&graph_shard("metadata")),
        [row]
    );
}

#[test]
fn reference_safetensors_loads_the_record() {
    let payload = std::fs::read(dir().join("record-v01.safetensors")).unwrap();
    let request = format!("[\"{}\"]", hex::encode(&payload));
    let out = common::run_python("safetensors_tool.py", &["load"], request.as_bytes());
    let wrapped = format!("{{\"r\":{}}}", String::from_utf8(out).unwrap());
    let doc = parse_value(wrapped.as_bytes(), &JsonLimits::CONTROL).unwrap();
    let loaded = doc.as_object().unwrap()["r"].as_array().unwrap()[0]
        .as_object()
        .unwrap()
        .clone();
    let keys: Vec<&str> = loaded.keys().map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        ["__sds_descriptor__", "tensor_000000", "tensor_000001"]
    );
    let record = normative_record();
    for (key, name) in [("tensor_000000", "rx0/iq"), ("tensor_000001", "rx0/label")] {
        let tensor = loaded[key].as_array().unwrap();
        let field = &record.fields[name];
        assert_eq!(
            tensor[0].as_str(),
            Some(field.meta.dtype.safetensors_name())
        );
        assert_eq!(tensor[2].as_str(), Some(hex::encode(&field.data).as_str()));
    }
}

/// The library, given the fixture's record (decoded from `record-v01.safetensors`) and the same
/// work id, ids and metadata, writes exactly the files of `graph/`: the graph fixture is the
/// library's output, not only ours.
#[test]
fn the_library_writes_the_graph_fixture() {
    let temp = tempfile::tempdir().unwrap();
    let out = temp.path().join("graph");
    let payload = dir().join("record-v01.safetensors");
    let spec = serde_json::json!({
        "dataset_id": DATASET_ID,
        "snapshot_id": SNAPSHOT_ID,
        "metadata": {"purpose": "normative fixture"},
        "expected_work_ids": ["work-0"],
        "shards": [{"work_id": "work-0", "attempt": 0, "payloads": [payload]}],
    });
    common::run_python(
        "graph_tool.py",
        &["payloads", out.to_str().unwrap(), &spec.to_string()],
        b"",
    );
    let written = files(&out);
    let expected = files(&dir().join("graph"));
    assert_eq!(
        written.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (path, bytes) in &expected {
        assert!(
            &written[path] == bytes,
            "graph/{path}: the library wrote other bytes"
        );
    }
}
