//! Shared fixtures for the `documents_*` tests: a hand-written one-record dataset (written from
//! profile section 4 and cross-checked once against Python's `json.dumps(..., sort_keys=True,
//! ensure_ascii=False, indent=2) + "\n"`), a larger graph built with the writer API, and helpers
//! to edit a document's JSON before parsing it again.
#![allow(dead_code)]

use sdsfs::format::documents::*;
use sdsfs::format::json::{object_to_pretty, parse_object, JsonLimits, Object, Value};
use sdsfs::format::path::RelPath;

pub const LIMITS: JsonLimits = JsonLimits::CONTROL;

pub const DATA_SHA: &str = "3a6eb0790f39ac87c94f3856b2dd2c5d110e6811602261a9a923d3bb23adc8b7";
pub const META_SHA: &str = "45447b7afbd5e544f7d0f1df0fccd26014d9850130abd3f020b89ff96b82079f";

/// `manifests/<sha256("snap-1-00000000")[:2]>/snap-1-00000000.json`.
pub const PAGE_PATH: &str = "manifests/16/snap-1-00000000.json";

pub const MANIFEST: &str = r#"{
  "first_ordinal": 0,
  "format": "signal-dataset.manifest",
  "layout_version": "0.1",
  "page_id": "snap-1-00000000",
  "record_count": 1,
  "shards": [
    {
      "data": {
        "path": "objects/data/3a/3a6eb0790f39ac87c94f3856b2dd2c5d110e6811602261a9a923d3bb23adc8b7.arrayrecord",
        "stored_bytes": 300
      },
      "first_ordinal": 0,
      "metadata": {
        "path": "objects/metadata/45/45447b7afbd5e544f7d0f1df0fccd26014d9850130abd3f020b89ff96b82079f.arrayrecord",
        "stored_bytes": 120
      },
      "record_count": 1,
      "stored_bytes": 420
    }
  ],
  "snapshot_id": "snap-1",
  "stored_bytes": 420
}
"#;

pub const SNAPSHOT: &str = r#"{
  "dataset_id": "ds",
  "format": "signal-dataset.snapshot",
  "layout_version": "0.1",
  "manifests": [
    {
      "first_ordinal": 0,
      "object": {
        "path": "manifests/16/snap-1-00000000.json",
        "stored_bytes": 640
      },
      "record_count": 1,
      "shard_count": 1,
      "stored_bytes": 420
    }
  ],
  "metadata": {
    "note": "héllo",
    "rate": 0.25
  },
  "record_codec": "safetensors",
  "record_count": 1,
  "shard_container": "array_record",
  "shard_count": 1,
  "snapshot_id": "snap-1",
  "stored_bytes": 420
}
"#;

pub const ROOT: &str = r#"{
  "dataset_id": "ds",
  "format": "signal-dataset.dataset",
  "layout_version": "0.1",
  "metadata": {
    "note": "héllo",
    "rate": 0.25
  },
  "snapshot": {
    "path": "snapshots/snap-1/snapshot.json",
    "stored_bytes": 555
  },
  "snapshot_id": "snap-1"
}
"#;

pub fn rel(path: &str) -> RelPath {
    RelPath::new(path).unwrap()
}

pub fn reference(path: &str, bytes: u64) -> Reference {
    Reference::new(rel(path), bytes)
}

pub fn metadata() -> Object {
    let mut m = Object::new();
    m.insert("note".into(), "héllo".into());
    m.insert("rate".into(), Value::Float(0.25));
    m
}

/// A shard entry at `first` with `count` records and fake content addresses.
pub fn shard(first: u64, count: u64, data_bytes: u64, meta_bytes: u64) -> ShardEntry {
    let h = format!("{first:064x}");
    ShardEntry::new(
        first,
        Reference::new(ids::data_shard_path(&h).unwrap(), data_bytes),
        Reference::new(ids::metadata_shard_path(&h).unwrap(), meta_bytes),
        count,
    )
    .unwrap()
}

/// Snapshot `S` of dataset `D`, 230 records in two pages.
/// Page 0: shards [0,60), [60,100), [100,160); page 1: shards [160,200), [200,230).
pub fn two_pages() -> (Snapshot, Vec<ManifestPage>) {
    let page0 = ManifestPage::from_shards(
        "S",
        0,
        0,
        vec![
            shard(0, 60, 1000, 10),
            shard(60, 40, 2000, 20),
            shard(100, 60, 3000, 30),
        ],
    )
    .unwrap();
    let page1 = ManifestPage::from_shards(
        "S",
        1,
        160,
        vec![shard(160, 40, 400, 4), shard(200, 30, 300, 3)],
    )
    .unwrap();
    let refs = [&page0, &page1]
        .iter()
        .map(|p| {
            let path = ids::manifest_path(&p.page_id).unwrap();
            ManifestRef::for_page(p, Reference::new(path, p.to_json().len() as u64))
        })
        .collect();
    let snapshot = Snapshot::from_manifests("D", "S", Object::new(), refs).unwrap();
    (snapshot, vec![page0, page1])
}

/// Parses `text`, lets `f` edit the object, writes it back as pretty JSON.
pub fn edit(text: &str, f: impl FnOnce(&mut Object)) -> String {
    let mut doc = parse_object(text.as_bytes(), &LIMITS).unwrap();
    f(&mut doc);
    object_to_pretty(&doc)
}

/// The object at a `.`-separated path of keys and array indices (`""` is the document).
pub fn at<'a>(doc: &'a mut Object, path: &str) -> &'a mut Object {
    let mut steps = path.split('.').filter(|s| !s.is_empty());
    let Some(first) = steps.next() else {
        return doc;
    };
    let mut value = doc.get_mut(first).unwrap();
    for step in steps {
        value = match value {
            Value::Array(items) => &mut items[step.parse::<usize>().unwrap()],
            Value::Object(o) => o.get_mut(step).unwrap(),
            other => panic!("cannot step into {other:?}"),
        };
    }
    match value {
        Value::Object(o) => o,
        other => panic!("path ends at {other:?}"),
    }
}

/// `set(doc, "a.0.b", key, value)`.
pub fn set(doc: &mut Object, path: &str, key: &str, value: Value) {
    at(doc, path).insert(key.to_string(), value);
}

pub fn remove(doc: &mut Object, path: &str, key: &str) {
    at(doc, path).remove(key).unwrap();
}

/// The error text, panicking when `result` is Ok.
pub fn err_text<T: std::fmt::Debug>(result: Result<T, DocumentError>) -> String {
    result.unwrap_err().to_string()
}

/// Asserts that `result` failed with a message containing every one of `needles`.
#[track_caller]
pub fn assert_refused<T: std::fmt::Debug>(result: Result<T, DocumentError>, needles: &[&str]) {
    let text = err_text(result);
    for needle in needles {
        assert!(text.contains(needle), "{text:?} lacks {needle:?}");
    }
}

/// Parses JSON literal text into a [`Value`].
pub fn json(text: &str) -> Value {
    sdsfs::format::json::parse_value(text.as_bytes(), &LIMITS).unwrap()
}

pub const PUB: &str = "2e5ba8c1c46ef197a2f3d2b9ac2bd520";
pub const OBJ_SHA: &str = "8bacd9b88d790d5da18932eea96a4a4e43e5d2d6ba3dd4877fd9938be584bcb2";
pub const REVISION_SHA: &str = "3d59d53e1d04fd89ac8cfd8671193933ba27176497b18b4ed63c7487a48813d3";

pub const WORKER_POINTER: &str = r#"{
  "first_ordinal": 0,
  "generation": null,
  "logical_shard_id": "shard-00000000",
  "name": "labels",
  "publication_id": "2e5ba8c1c46ef197a2f3d2b9ac2bd520",
  "record_ids": [
    "r0",
    "r1"
  ],
  "source_snapshot_id": "snap-1",
  "statuses": [
    "success",
    "failed"
  ],
  "stored_bytes": 99,
  "terminal_statuses": [
    "success",
    "skipped"
  ],
  "uri": "annotations/sets/labels/2e5ba8c1c46ef197a2f3d2b9ac2bd520/objects/8b/8bacd9b88d790d5da18932eea96a4a4e43e5d2d6ba3dd4877fd9938be584bcb2.arrayrecord"
}
"#;

pub const SET_ROOT: &str = r#"{
  "metadata": {},
  "name": "labels",
  "publication_id": "2e5ba8c1c46ef197a2f3d2b9ac2bd520",
  "record_count": 1,
  "shards": [
    {
      "first_ordinal": 0,
      "object": {
        "path": "annotations/sets/labels/2e5ba8c1c46ef197a2f3d2b9ac2bd520/objects/8b/8bacd9b88d790d5da18932eea96a4a4e43e5d2d6ba3dd4877fd9938be584bcb2.arrayrecord",
        "stored_bytes": 99
      },
      "record_count": 1
    }
  ],
  "source_snapshot_id": "snap-1"
}
"#;

pub const REVISION: &str = r#"{
  "sets": {
    "labels": {
      "path": "annotations/sets/labels/2e5ba8c1c46ef197a2f3d2b9ac2bd520/root.json",
      "stored_bytes": 451
    }
  }
}
"#;

pub const CATALOG: &str = r#"{
  "revision": {
    "path": "annotations/catalogs/3d59d53e1d04fd89ac8cfd8671193933ba27176497b18b4ed63c7487a48813d3.json"
  }
}
"#;

/// A set root over [0, 230) in three shards, for tiling tests.
pub fn three_shard_set() -> SetRoot {
    let shard = |first, count| SetShard {
        first_ordinal: first,
        object: sdsfs::format::documents::annotation::AnnotationRef::new(
            rel(&format!(
                "annotations/sets/s/p/objects/aa/{first}.arrayrecord"
            )),
            10,
        ),
        record_count: count,
    };
    SetRoot {
        metadata: Object::new(),
        name: "s".into(),
        publication_id: "p".into(),
        record_count: 230,
        shards: vec![shard(0, 100), shard(100, 100), shard(200, 30)],
        source_snapshot_id: "S".into(),
    }
}
