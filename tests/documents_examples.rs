//! Writers' output, byte for byte: the hand-written one-record dataset and annotation documents
//! are reproduced exactly by the builders, parse back to equal values, and every document
//! round-trips (build → to_json → parse → equal).

#[path = "documents_support/mod.rs"]
mod support;

use sdsfs::format::documents::*;
use sdsfs::format::json::{Object, Value};
use support::*;

fn one_record_page() -> ManifestPage {
    let entry = ShardEntry::new(
        0,
        Reference::new(ids::data_shard_path(DATA_SHA).unwrap(), 300),
        Reference::new(ids::metadata_shard_path(META_SHA).unwrap(), 120),
        1,
    )
    .unwrap();
    ManifestPage::from_shards("snap-1", 0, 0, vec![entry]).unwrap()
}

#[test]
fn builders_write_the_hand_written_one_record_dataset() {
    let page = one_record_page();
    assert_eq!(page.to_json(), MANIFEST);
    let page_path = ids::manifest_path(&page.page_id).unwrap();
    assert_eq!(page_path.as_str(), PAGE_PATH);

    let page_ref = Reference::new(page_path, MANIFEST.len() as u64);
    assert_eq!(page_ref.stored_bytes, 640);
    let snapshot = Snapshot::from_manifests(
        "ds",
        "snap-1",
        metadata(),
        vec![ManifestRef::for_page(&page, page_ref)],
    )
    .unwrap();
    assert_eq!(snapshot.to_json(), SNAPSHOT);

    let snapshot_ref = Reference::new(ids::snapshot_path("snap-1").unwrap(), SNAPSHOT.len() as u64);
    let root = DatasetRoot::new("ds", "snap-1", snapshot_ref, metadata());
    assert_eq!(root.to_json(), ROOT);
}

#[test]
fn hand_written_documents_parse_and_validate() {
    let root = DatasetRoot::parse(ROOT.as_bytes(), &LIMITS).unwrap();
    let snapshot = Snapshot::parse(SNAPSHOT.as_bytes(), &LIMITS).unwrap();
    let page = ManifestPage::parse(MANIFEST.as_bytes(), &LIMITS).unwrap();
    root.validate().unwrap();
    root.validate_snapshot(&snapshot).unwrap();
    snapshot.validate().unwrap();
    page.validate_against(&snapshot.manifests[0], "snap-1", 0)
        .unwrap();

    assert_eq!(
        root.snapshot.path.as_str(),
        "snapshots/snap-1/snapshot.json"
    );
    assert_eq!(root.snapshot.stored_bytes, 555);
    assert_eq!(root.snapshot.generation, None);
    assert_eq!(root.min_reader_version, None);
    assert_eq!(root.metadata, metadata());
    assert_eq!(snapshot.metadata.get("rate"), Some(&Value::Float(0.25)));
    assert_eq!(page, one_record_page());
    assert_eq!(page.shards[0].physical_index(0), Some(0));
    assert_eq!(page.shards[0].physical_index(1), None);
}

// The annotation documents (catalog pointer, revisions, set roots, worker pointers) are
// tested against the library's own bytes in tests/documents_annotations.rs.

#[test]
fn optional_keys_round_trip_and_are_omitted_when_absent() {
    let (snapshot, pages) = two_pages();
    let mut page = pages[0].clone();
    page.shards[1].record_indices = Some((0..40).rev().collect());
    page.shards[0].data.generation = Some(1_700_000_000_123_456_789);
    let text = page.to_json();
    assert!(text.contains("\"record_indices\": [\n        39,"));
    assert!(text.contains("\"generation\": 1700000000123456789"));
    let parsed = ManifestPage::parse(text.as_bytes(), &LIMITS).unwrap();
    assert_eq!(parsed, page);
    parsed
        .validate_against(&snapshot.manifests[0], "S", 0)
        .unwrap();
    assert_eq!(parsed.shards[1].physical_index(0), Some(39));

    assert!(!pages[1].to_json().contains("record_indices"));
    assert!(!pages[1].to_json().contains("generation"));

    let root = DatasetRoot::new(
        "D",
        "S",
        reference("snapshots/S/snapshot.json", 10),
        Object::new(),
    )
    .with_min_reader_version("0.2");
    let text = root.to_json();
    assert!(text.contains("  \"min_reader_version\": \"0.2\",\n"));
    assert_eq!(DatasetRoot::parse(text.as_bytes(), &LIMITS).unwrap(), root);
}

#[test]
fn every_document_round_trips() {
    let (snapshot, pages) = two_pages();
    let text = snapshot.to_json();
    assert_eq!(Snapshot::parse(text.as_bytes(), &LIMITS).unwrap(), snapshot);
    for (i, page) in pages.iter().enumerate() {
        let parsed = ManifestPage::parse(page.to_json().as_bytes(), &LIMITS).unwrap();
        assert_eq!(&parsed, page);
        parsed
            .validate_against(&snapshot.manifests[i], "S", i as u64)
            .unwrap();
    }
}

#[test]
fn empty_dataset_has_no_manifests() {
    let snapshot = Snapshot::from_manifests("D", "S", Object::new(), vec![]).unwrap();
    assert_eq!(
        (
            snapshot.record_count,
            snapshot.shard_count,
            snapshot.stored_bytes
        ),
        (0, 0, 0)
    );
    assert!(snapshot.to_json().contains("\"manifests\": [],"));
    let parsed = Snapshot::parse(snapshot.to_json().as_bytes(), &LIMITS).unwrap();
    parsed.validate().unwrap();
    assert_eq!(parsed.manifest_for(0), None);
}

#[test]
fn lookups_find_the_covering_page_and_shard() {
    let (snapshot, pages) = two_pages();
    assert_eq!(snapshot.manifest_for(0), Some(0));
    assert_eq!(snapshot.manifest_for(159), Some(0));
    assert_eq!(snapshot.manifest_for(160), Some(1));
    assert_eq!(snapshot.manifest_for(229), Some(1));
    assert_eq!(snapshot.manifest_for(230), None);
    assert_eq!(pages[0].shard_for(59), Some(0));
    assert_eq!(pages[0].shard_for(60), Some(1));
    assert_eq!(pages[0].shard_for(159), Some(2));
    assert_eq!(pages[0].shard_for(160), None);
    assert_eq!(pages[1].shard_for(159), None);
    assert_eq!(pages[1].shard_for(200), Some(1));
}

#[test]
fn unknown_keys_are_ignored_on_read_and_not_written_back() {
    let text = edit(SNAPSHOT, |d| {
        set(d, "", "future", Value::Bool(true));
        set(d, "manifests.0", "checksum", "x".into());
        set(d, "manifests.0.object", "etag", "y".into());
    });
    let parsed = Snapshot::parse(text.as_bytes(), &LIMITS).unwrap();
    parsed.validate().unwrap();
    assert_eq!(parsed.to_json(), SNAPSHOT);
}
