//! Shared fixtures for the `documents_*` tests: a dataset's control documents exactly as the
//! `signal-dataset` library 0.4.0 wrote them (`tests/python/graph_tool.py publish`: work ids
//! `w-b` (3 records), `w-a` attempts 0 and 1 (1 and 2 records), `w-empty` (none), two shards
//! per page, dataset id `my dataset/ü ✓`), a larger graph built with the writer API, and
//! helpers to edit a document's JSON before parsing it again.
#![allow(dead_code)]

use sdsfs::format::documents::*;
use sdsfs::format::json::{object_to_pretty, parse_object, JsonLimits, Object, Value};
use sdsfs::format::path::RelPath;

pub const LIMITS: JsonLimits = JsonLimits::CONTROL;

/// `manifests/<sha256("snap-1-00000000")[:2]>/snap-1-00000000.json`.
pub const PAGE_PATH: &str = "manifests/16/snap-1-00000000.json";

/// Page 0 as the library wrote it.
pub const MANIFEST: &str = r#"{
  "first_ordinal": 0,
  "format": "signal-dataset.manifest",
  "layout_version": "0.1",
  "record_count": 5,
  "shards": [
    {
      "data": {
        "path": "objects/data/37/3778c5cdfa1bf497d83a749a47f8568aa9862fc933f69f28663d780f03edda9a.arrayrecord",
        "stored_bytes": 131072
      },
      "first_ordinal": 0,
      "metadata": {
        "path": "objects/metadata/37/3778c5cdfa1bf497d83a749a47f8568aa9862fc933f69f28663d780f03edda9a.arrayrecord",
        "stored_bytes": 131072
      },
      "record_count": 2
    },
    {
      "data": {
        "path": "objects/data/79/794099568d49718e1405dbf003fb80bc33ef538859a8f46f4c04ec4547caa3c3.arrayrecord",
        "stored_bytes": 131072
      },
      "first_ordinal": 2,
      "metadata": {
        "path": "objects/metadata/79/794099568d49718e1405dbf003fb80bc33ef538859a8f46f4c04ec4547caa3c3.arrayrecord",
        "stored_bytes": 131072
      },
      "record_count": 3
    }
  ]
}
"#;

/// The snapshot as the library wrote it.
pub const SNAPSHOT: &str = r#"{
  "format": "signal-dataset.snapshot",
  "layout_version": "0.1",
  "manifests": [
    {
      "first_ordinal": 0,
      "object": {
        "path": "manifests/16/snap-1-00000000.json",
        "stored_bytes": 944
      },
      "record_count": 5,
      "shard_count": 2,
      "stored_bytes": 524288
    },
    {
      "first_ordinal": 5,
      "object": {
        "path": "manifests/ea/snap-1-00000001.json",
        "stored_bytes": 537
      },
      "record_count": 0,
      "shard_count": 1,
      "stored_bytes": 262144
    }
  ],
  "record_count": 5,
  "shard_count": 3,
  "snapshot_id": "snap-1",
  "stored_bytes": 786432
}
"#;

/// `root.json` as the library wrote it.
pub const ROOT: &str = r#"{
  "dataset_id": "my dataset/ü ✓",
  "format": "signal-dataset.dataset",
  "layout_version": "0.1",
  "metadata": {
    "purpose": "test"
  },
  "min_reader_version": "0.3.0",
  "record_codec": {
    "name": "safetensors"
  },
  "shard_format": {
    "name": "array_record"
  },
  "snapshot": {
    "path": "snapshots/snap-1/snapshot.json",
    "stored_bytes": 634
  }
}
"#;

pub fn rel(path: &str) -> RelPath {
    RelPath::new(path).unwrap()
}

pub fn reference(path: &str, bytes: u64) -> Reference {
    Reference::new(rel(path), bytes)
}

pub fn object_ref(path: &str, bytes: u64) -> ObjectRef {
    ObjectRef::new(rel(path), bytes)
}

pub fn metadata() -> Object {
    let mut m = Object::new();
    m.insert("note".into(), "héllo".into());
    m.insert("rate".into(), Value::Float(0.25));
    m
}

/// A shard entry at `first` with `count` records, named for work id `w<first>`.
pub fn shard(first: u64, count: u64, data_bytes: u64, meta_bytes: u64) -> ShardEntry {
    let h = ids::shard_id(&format!("w{first}"), 0);
    ShardEntry::new(
        first,
        ObjectRef::new(ids::data_shard_path(&h).unwrap(), data_bytes),
        ObjectRef::new(ids::metadata_shard_path(&h).unwrap(), meta_bytes),
        count,
    )
}

/// Snapshot `S`, 230 records in two pages.
/// Page 0: shards [0,60), [60,100), [100,160); page 1: shards [160,200), [200,230).
pub fn two_pages() -> (Snapshot, Vec<ManifestPage>) {
    let page0 = ManifestPage::from_shards(
        0,
        vec![
            shard(0, 60, 1000, 10),
            shard(60, 40, 2000, 20),
            shard(100, 60, 3000, 30),
        ],
    )
    .unwrap();
    let page1 =
        ManifestPage::from_shards(160, vec![shard(160, 40, 400, 4), shard(200, 30, 300, 3)])
            .unwrap();
    let refs = [&page0, &page1]
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let path = ids::manifest_path("S", i as u64).unwrap();
            ManifestRef::for_page(p, ObjectRef::new(path, p.to_json().len() as u64))
        })
        .collect();
    let snapshot = Snapshot::from_manifests("S", refs).unwrap();
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
    at(doc, path).insert(key.into(), value);
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
