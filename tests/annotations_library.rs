//! Annotation sets through the library: publish, read back exactly, refuse what section 6
//! refuses, verify, and republish after the source changed.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::datasets::{local_store, obj, publish_dataset, write_shards, Published};
use sdsfs::annotations::{
    publish_annotations, publish_set, read_catalog, verify_sets, write_annotation_shard,
    AnnotationOptions, AnnotationRecord, AnnotationStatus, ROW_COUNTS_KEY,
};
use sdsfs::dataset::{publish, Dataset, OpenOptions, PublishOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::Value;
use sdsfs::format::record::{Axis, Field};

/// Rows for every record: all three statuses, tensor fields on every third row.
fn rows_for(dataset: &Dataset, salt: i128) -> Vec<AnnotationRecord> {
    (0..dataset.len())
        .map(|ordinal| {
            let id = dataset.record_meta(ordinal).unwrap().id;
            let status = [
                AnnotationStatus::Success,
                AnnotationStatus::Skipped,
                AnnotationStatus::Failed,
            ][(ordinal % 3) as usize];
            let mut row = AnnotationRecord::new(id, ordinal, status);
            row.values = obj(&[
                ("score", Value::Float(ordinal as f64 * 0.25)),
                ("salt", Value::Int(salt)),
            ]);
            row.provenance = obj(&[("model", "m-1".into())]);
            if status == AnnotationStatus::Failed {
                row.detail_status = Some(format!("timeout after {ordinal} s"));
            }
            if ordinal % 3 == 0 {
                let n = ordinal + 1;
                let data: Vec<u8> = (0..n * 4).map(|b| (b as u8) ^ (ordinal as u8)).collect();
                let field = Field::new(DType::F32, vec![n], data)
                    .unwrap()
                    .with_axes(vec![Axis::new("time", n)]);
                row.fields.insert("detections/mask".into(), field);
            }
            row
        })
        .collect()
}

fn small_options() -> AnnotationOptions {
    AnnotationOptions {
        records_per_shard: 4,
        ..AnnotationOptions::default()
    }
}

#[test]
fn a_set_reads_back_exactly_with_tensor_fields_and_every_status() {
    let published = publish_dataset(&[5, 6], 10);
    let dataset = published.open();
    let rows = rows_for(&dataset, 1);
    let meta = obj(&[("run", "r-1".into())]);
    let result = publish_annotations(&dataset, "labels", &rows, &meta, &small_options()).unwrap();
    assert_eq!(result.record_count, 11);
    assert_eq!(result.shard_count, 3);
    assert_eq!(result.catalog_attempts, 1);
    let expected_counts: BTreeMap<AnnotationStatus, u64> = [
        (AnnotationStatus::Success, 4),
        (AnnotationStatus::Skipped, 4),
        (AnnotationStatus::Failed, 3),
    ]
    .into();
    assert_eq!(result.row_counts, expected_counts);

    let catalog = read_catalog(&dataset).unwrap();
    assert_eq!(catalog.sets.len(), 1);
    let set = catalog.sets["labels"].as_ref().unwrap();
    assert_eq!(set.row_counts(), Some(expected_counts));
    assert_eq!(set.root().metadata["run"], Value::from("r-1"));
    assert!(set.root().metadata.contains_key(ROW_COUNTS_KEY));
    let back: Vec<AnnotationRecord> = set.iter(&dataset).map(Result::unwrap).collect();
    assert_eq!(back, rows);
    assert!(verify_sets(&dataset).is_empty());

    // A repeat converges: same publication id, same bytes, no new revision.
    let again = publish_annotations(&dataset, "labels", &rows, &meta, &small_options()).unwrap();
    assert_eq!(again.publication_id, result.publication_id);
    assert_eq!(again.revision_path, result.revision_path);
    assert_eq!(again.catalog_attempts, 0);

    // Different rows under the same publication id are refused, not adopted.
    let other = rows_for(&dataset, 2);
    let e = publish_annotations(&dataset, "labels", &other, &meta, &small_options()).unwrap_err();
    assert!(e.to_string().contains("another publication id"), "{e}");
}

#[test]
fn a_set_of_an_empty_dataset_and_a_set_without_fields() {
    let empty = publish_dataset(&[], 10);
    let dataset = empty.open();
    let result =
        publish_annotations(&dataset, "none", &[], &Default::default(), &small_options()).unwrap();
    assert_eq!((result.record_count, result.shard_count), (0, 0));
    let catalog = read_catalog(&dataset).unwrap();
    let set = catalog.sets["none"].as_ref().unwrap();
    assert!(set.is_empty());
    assert!(set.root().shards.is_empty());

    let published = publish_dataset(&[3], 10);
    let dataset = published.open();
    let rows: Vec<AnnotationRecord> = (0..3)
        .map(|o| {
            let id = dataset.record_meta(o).unwrap().id;
            AnnotationRecord::new(id, o, AnnotationStatus::Skipped)
        })
        .collect();
    publish_annotations(
        &dataset,
        "bare",
        &rows,
        &Default::default(),
        &small_options(),
    )
    .unwrap();
    let catalog = read_catalog(&dataset).unwrap();
    let set = catalog.sets["bare"].as_ref().unwrap();
    let back: Vec<AnnotationRecord> = set.iter(&dataset).map(Result::unwrap).collect();
    assert_eq!(back, rows);
    assert!(back.iter().all(|r| r.fields.is_empty()));
}

#[test]
fn dense_coverage_and_alignment_are_required() {
    let published = publish_dataset(&[6], 10);
    let dataset = published.open();
    let rows = rows_for(&dataset, 1);
    let options = small_options();
    let id = options.publication_id_for(&dataset, "dist").unwrap();
    // Only shard 0 written: the coordinator refuses and names the gap.
    write_annotation_shard(&dataset, "dist", &id, 0, &rows[0..4], &options).unwrap();
    let e = publish_set(&dataset, "dist", &id, &Default::default(), &options).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("[4, 6)") && text.contains("shard-00000001"),
        "{text}"
    );
    // A second worker for shard 1 with other rows loses to the first and adopts it.
    let first = write_annotation_shard(&dataset, "dist", &id, 1, &rows[4..6], &options).unwrap();
    assert!(!first.adopted);
    let other = rows_for(&dataset, 9);
    let second = write_annotation_shard(&dataset, "dist", &id, 1, &other[4..6], &options).unwrap();
    assert!(second.adopted);
    assert_eq!(second.pointer, first.pointer);
    publish_set(&dataset, "dist", &id, &Default::default(), &options).unwrap();
    let catalog = read_catalog(&dataset).unwrap();
    let back: Vec<AnnotationRecord> = catalog.sets["dist"]
        .as_ref()
        .unwrap()
        .iter(&dataset)
        .map(Result::unwrap)
        .collect();
    assert_eq!(back, rows);

    // A row naming the wrong record is refused by the worker.
    let mut wrong = rows.clone();
    wrong[1].source_record_id = "not-this-one".into();
    let e = write_annotation_shard(&dataset, "other", &id, 0, &wrong[0..4], &options).unwrap_err();
    assert!(e.to_string().contains("not-this-one"), "{e}");
}

#[test]
fn verify_reports_a_damaged_object_once_per_object() {
    let published = publish_dataset(&[4], 10);
    let dataset = published.open();
    let rows = rows_for(&dataset, 1);
    let result =
        publish_annotations(&dataset, "v", &rows, &Default::default(), &small_options()).unwrap();
    let catalog = read_catalog(&dataset).unwrap();
    let set = catalog.sets["v"].as_ref().unwrap();
    let object = published.file(set.root().shards[0].object.path.as_str());
    // Flip a byte inside the object: chunk hashes fail, verify reports it once.
    let mut bytes = std::fs::read(&object).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::remove_file(&object).unwrap();
    std::fs::write(&object, &bytes).unwrap();
    let reopened = published.open();
    let problems = verify_sets(&reopened);
    assert!(!problems.is_empty(), "corruption not reported");
    assert!(
        problems.iter().all(|p| p.object.contains(".arrayrecord")),
        "{problems:?}"
    );
    let _ = result;
}

/// Replaces the dataset's snapshot (root.json) with one of different records, as if the source
/// had been re-published in place.
fn republish_source(published: &Published, sizes: &[usize]) -> Dataset {
    std::fs::remove_file(published.file("root.json")).unwrap();
    let store = local_store(published.root());
    let (receipts, _) = write_shards(store.as_ref(), sizes);
    let mut options = PublishOptions::new("ds-test", "snap-2");
    options.shards_per_manifest = 10;
    publish(store.as_ref(), &receipts, &options).unwrap();
    Dataset::open(store as Arc<_>, OpenOptions::default()).unwrap()
}

#[test]
fn a_set_republished_after_its_source_changed() {
    let published = publish_dataset(&[4], 10);
    let dataset = published.open();
    let first = publish_annotations(
        &dataset,
        "labels",
        &rows_for(&dataset, 1),
        &Default::default(),
        &small_options(),
    )
    .unwrap();
    let dataset = republish_source(&published, &[3, 3]);
    // The old set annotates another snapshot: reported, not shown.
    let catalog = read_catalog(&dataset).unwrap();
    let stale = catalog.sets["labels"].as_ref().unwrap_err().to_string();
    assert!(stale.contains("snap-1"), "{stale}");
    // Republishing derives a new publication id and replaces the entry.
    let rows = rows_for(&dataset, 2);
    let second = publish_annotations(
        &dataset,
        "labels",
        &rows,
        &Default::default(),
        &small_options(),
    )
    .unwrap();
    assert_ne!(second.publication_id, first.publication_id);
    let catalog = read_catalog(&dataset).unwrap();
    let set = catalog.sets["labels"].as_ref().unwrap();
    let back: Vec<AnnotationRecord> = set.iter(&dataset).map(Result::unwrap).collect();
    assert_eq!(back, rows);
    assert_eq!(back.len(), 6);
}
