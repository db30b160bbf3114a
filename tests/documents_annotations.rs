//! The annotation documents against bytes the `signal-dataset` library 0.4.0 wrote: each parses,
//! writes back byte for byte, and every exact-key rule refuses what the library refuses.
//!
//! The fixtures were produced by `tests/python/annotation_tool.py` (library
//! `publish_annotations` of set `labels` on snapshot `snap-0001`, and the distributed
//! `write_shard` + `publish_shards` of set `qa`, publication `pub-1`); the interop tests in
//! `annotations_library.rs` regenerate such bytes live.

use sdsfs::format::documents::annotation::layout;
use sdsfs::format::documents::annotation::AnnotationRef;
use sdsfs::format::documents::{
    AnnotationStatus, CatalogPointer, Revision, SetRoot, WorkerPointer,
};
use sdsfs::format::json::JsonLimits;
use sdsfs::format::path::RelPath;

const LIMITS: JsonLimits = JsonLimits::CONTROL;

const CATALOG: &str = r#"{"revision":{"generation":null,"path":"annotations/catalogs/6a1d70beaca7716d54bfd429fde6d43134aba680e22de91aadc7e3d1e5f5752a.json"}}"#;
const REVISION: &str = r#"{"sets":{"labels":{"generation":null,"path":"annotations/sets/labels/d60d534d612e79d447ce73e1a2fc8558/root.json","stored_bytes":826}}}"#;
const SET_ROOT: &str = r#"{"metadata":{"tool":"x"},"name":"labels","publication_id":"d60d534d612e79d447ce73e1a2fc8558","record_count":7,"shards":[{"first_ordinal":0,"object":{"path":"annotations/sets/labels/d60d534d612e79d447ce73e1a2fc8558/objects/90/9073700d575d2122adb12726e20c525db2790e1d9284e4a74885db7f466197e2.arrayrecord","stored_bytes":131072},"record_count":3},{"first_ordinal":3,"object":{"path":"annotations/sets/labels/d60d534d612e79d447ce73e1a2fc8558/objects/43/438bb4b0b2b3a3e6d3786d85607036aebcce032f508e3d5b92af36e4a7c6a892.arrayrecord","stored_bytes":131072},"record_count":3},{"first_ordinal":6,"object":{"path":"annotations/sets/labels/d60d534d612e79d447ce73e1a2fc8558/objects/61/614f7e0918a17ff14ca82e48926ffed7f385c8ff3662362c977b66a3aa16566a.arrayrecord","stored_bytes":131072},"record_count":1}],"source_snapshot_id":"snap-0001"}"#;
const POINTER: &str = r#"{"first_ordinal":0,"generation":null,"logical_shard_id":"shard-00000000","name":"qa","publication_id":"pub-1","record_ids":["rec-0000","rec-0001","rec-0002"],"source_snapshot_id":"snap-0001","statuses":["success","failed","skipped"],"stored_bytes":131072,"terminal_statuses":["success","timeout","skipped"],"uri":"/tmp/annref/dist/annotations/sets/qa/pub-1/objects/46/4683accdcaad24ef4855de6177e3ed63.arrayrecord"}"#;
/// `annotations/sets/qa/pub-1/shards/<xx>/<sha256("shard-00000000")>.json`, where the library
/// wrote the pointer above.
const POINTER_PATH: &str = "annotations/sets/qa/pub-1/shards/45/45f5a2a4b5d610d9306d6320bef689785786387bd20a0a54b100ea5aee938a62.json";

fn refused<T: std::fmt::Debug, E: std::fmt::Display>(result: Result<T, E>, needles: &[&str]) {
    let text = match result {
        Ok(value) => panic!("accepted: {value:?}"),
        Err(e) => e.to_string(),
    };
    for needle in needles {
        assert!(text.contains(needle), "{text:?} lacks {needle:?}");
    }
}

#[test]
fn the_library_documents_parse_and_write_back_byte_for_byte() {
    let catalog = CatalogPointer::parse(CATALOG.as_bytes(), &LIMITS).unwrap();
    assert_eq!(catalog.to_json(), CATALOG);
    let revision = Revision::parse(REVISION.as_bytes(), &LIMITS).unwrap();
    revision.validate().unwrap();
    assert_eq!(revision.to_json(), REVISION);
    catalog.revision.check_bytes(REVISION.as_bytes()).unwrap();
    assert_eq!(
        layout::revision_path(REVISION.as_bytes()).unwrap(),
        catalog.revision.path
    );
    let root = SetRoot::parse(SET_ROOT.as_bytes(), &LIMITS).unwrap();
    root.validate().unwrap();
    root.validate_against("snap-0001", 7).unwrap();
    assert_eq!(root.to_json(), SET_ROOT);
    assert_eq!(revision.sets["labels"].stored_bytes, SET_ROOT.len() as u64);
    let pointer = WorkerPointer::parse(POINTER.as_bytes(), &LIMITS).unwrap();
    pointer.validate().unwrap();
    assert_eq!(pointer.terminal_statuses[1], "timeout");
    assert_eq!(pointer.statuses[1], AnnotationStatus::Failed);
    assert_eq!(pointer.to_json(), POINTER);
}

#[test]
fn ids_and_paths_are_the_library_s() {
    assert_eq!(
        layout::default_publication_id("snap-0001", "labels"),
        "d60d534d612e79d447ce73e1a2fc8558"
    );
    assert_eq!(
        layout::worker_pointer_path("qa", "pub-1", &layout::logical_shard_id(0))
            .unwrap()
            .as_str(),
        POINTER_PATH
    );
    assert_eq!(
        layout::set_root_path("labels", "d60d534d612e79d447ce73e1a2fc8558")
            .unwrap()
            .as_str(),
        "annotations/sets/labels/d60d534d612e79d447ce73e1a2fc8558/root.json"
    );
    let short = "4683accdcaad24ef4855de6177e3ed63";
    assert_eq!(
        layout::object_path("qa", "pub-1", short).unwrap().as_str(),
        "annotations/sets/qa/pub-1/objects/46/4683accdcaad24ef4855de6177e3ed63.arrayrecord"
    );
    refused(layout::object_path("qa", "pub-1", "46"), &["32 or 64"]);
    refused(layout::set_root_path("a/b", "p"), &["portable"]);
    // The content hash frames each payload with its u64 little-endian length: [1] then [2, 3]
    // differs from [1, 2] then [3]. Expected values from Python's hashlib.
    assert_eq!(
        layout::content_hash([&[1u8][..], &[2, 3]]),
        "415a0afea6bfe6dccad0406ee92284c5944026a69d66a53d8bb4add378c02db8"
    );
    assert_ne!(
        layout::content_hash([&[1u8][..], &[2, 3]]),
        layout::content_hash([&[1u8, 2][..], &[3]])
    );
}

#[test]
fn a_catalog_pointer_without_generation_is_read_and_written_with_null() {
    let text = CATALOG.replace("\"generation\":null,", "");
    let catalog = CatalogPointer::parse(text.as_bytes(), &LIMITS).unwrap();
    assert_eq!(catalog.revision.generation, None);
    assert_eq!(catalog.to_json(), CATALOG);
}

#[test]
fn exact_keys_are_enforced_at_every_level() {
    let extra = CATALOG.replace("{\"revision\"", "{\"extra\":1,\"revision\"");
    refused(CatalogPointer::parse(extra.as_bytes(), &LIMITS), &["extra"]);
    let extra = CATALOG.replace("\"generation\"", "\"stored_bytes\":3,\"generation\"");
    refused(
        CatalogPointer::parse(extra.as_bytes(), &LIMITS),
        &["revision", "stored_bytes"],
    );
    let missing = REVISION.replace(",\"stored_bytes\":826", "");
    refused(
        Revision::parse(missing.as_bytes(), &LIMITS),
        &["sets[\"labels\"]", "stored_bytes"],
    );
    let extra = SET_ROOT.replacen("\"record_count\":3}", "\"record_count\":3,\"x\":0}", 1);
    refused(
        SetRoot::parse(extra.as_bytes(), &LIMITS),
        &["shards[0]", "\"x\""],
    );
    let extra = SET_ROOT.replacen(
        "\"stored_bytes\":131072}",
        "\"stored_bytes\":131072,\"uri\":\"u\"}",
        1,
    );
    refused(
        SetRoot::parse(extra.as_bytes(), &LIMITS),
        &["shards[0]: object", "\"uri\""],
    );
    let missing = SET_ROOT.replace("\"metadata\":{\"tool\":\"x\"},", "");
    refused(SetRoot::parse(missing.as_bytes(), &LIMITS), &["metadata"]);
    let missing = POINTER.replace("\"generation\":null,", "");
    refused(
        WorkerPointer::parse(missing.as_bytes(), &LIMITS),
        &["generation"],
    );
    let extra = POINTER.replace("{\"first_ordinal\"", "{\"attempt\":0,\"first_ordinal\"");
    refused(
        WorkerPointer::parse(extra.as_bytes(), &LIMITS),
        &["attempt"],
    );
}

#[test]
fn revision_paths_and_hashes_are_checked() {
    let bad = CATALOG.replace("annotations/catalogs/6a", "annotations/other/6a");
    refused(
        CatalogPointer::parse(bad.as_bytes(), &LIMITS),
        &["annotations/catalogs/<sha256 hex>.json"],
    );
    let catalog = CatalogPointer::parse(CATALOG.as_bytes(), &LIMITS).unwrap();
    let tampered = REVISION.replace("826", "827");
    refused(
        catalog.revision.check_bytes(tampered.as_bytes()),
        &[
            "SHA-256",
            "6a1d70beaca7716d54bfd429fde6d43134aba680e22de91aadc7e3d1e5f5752a",
        ],
    );
    let elsewhere = REVISION.replace("sets/labels/d60", "sets/other/d60");
    let revision = Revision::parse(elsewhere.as_bytes(), &LIMITS).unwrap();
    refused(
        revision.validate(),
        &["annotations/sets/labels/<publication id>/root.json"],
    );
}

#[test]
fn set_root_rules() {
    let root = SetRoot::parse(SET_ROOT.as_bytes(), &LIMITS).unwrap();
    let mut gap = root.clone();
    gap.shards.remove(1);
    refused(gap.validate(), &["do not tile"]);
    let zero = SET_ROOT.replacen("\"record_count\":1}", "\"record_count\":0}", 1);
    refused(SetRoot::parse(zero.as_bytes(), &LIMITS), &["positive"]);
    refused(root.validate_against("snap-0002", 7), &["snap-0002"]);
    refused(root.validate_against("snap-0001", 8), &["record_count 7"]);
    // The library accepts any nonempty snapshot id; so do we.
    let mut odd = root.clone();
    odd.source_snapshot_id = "my snapshot/ü ✓".into();
    odd.validate().unwrap();
    odd.source_snapshot_id.clear();
    refused(odd.validate(), &["source_snapshot_id"]);
    // A generation (0.2.x on GCS) is kept and written; none is omitted.
    let mut pinned = root.clone();
    pinned.shards[0].object = AnnotationRef {
        generation: Some(17),
        ..root.shards[0].object.clone()
    };
    let text = pinned.to_json();
    assert!(text.contains("\"generation\":17,\"path\""), "{text}");
    assert_eq!(SetRoot::parse(text.as_bytes(), &LIMITS).unwrap(), pinned);
    let path = RelPath::new("annotations/x").unwrap();
    assert_eq!(AnnotationRef::new(path, 1).generation, None);
}

#[test]
fn worker_pointer_rules() {
    let pointer = WorkerPointer::parse(POINTER.as_bytes(), &LIMITS).unwrap();
    let mut empty = pointer.clone();
    empty.record_ids.clear();
    empty.statuses.clear();
    empty.terminal_statuses.clear();
    refused(empty.validate(), &["record_ids is empty"]);
    let mut short = pointer.clone();
    short.terminal_statuses.pop();
    refused(short.validate(), &["terminal_statuses has 2 entries"]);
    let mut odd_id = pointer.clone();
    odd_id.logical_shard_id = "worker-7.attempt_2".into();
    odd_id.validate().unwrap();
    odd_id.logical_shard_id = "../x".into();
    refused(odd_id.validate(), &["logical_shard_id"]);
    let bad_status = POINTER.replace("\"failed\",\"skipped\"]", "\"lost\",\"skipped\"]");
    refused(
        WorkerPointer::parse(bad_status.as_bytes(), &LIMITS),
        &["statuses[1]", "\"lost\""],
    );
    let empty_terminal = POINTER.replace("\"timeout\"", "\"\"");
    refused(
        WorkerPointer::parse(empty_terminal.as_bytes(), &LIMITS),
        &["terminal_statuses[1]", "nonempty"],
    );
}
