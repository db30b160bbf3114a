//! Reading published datasets: what `open` and lazy reads touch, the ordinal → shard mapping,
//! `record_indices`, record and row reads, the errors a damaged dataset produces (and on which
//! records only), `read_instructions`, and agreement with an independent Python reader and
//! writer of the profile.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::datasets::*;
use sdsfs::arrayrecord::{write_records, ArrayRecordReader, WriterOptions};
use sdsfs::dataset::{Dataset, DatasetError, OpenOptions};
use sdsfs::format::documents::ids::{data_shard_path, metadata_shard_path, sha256_hex};
use sdsfs::format::documents::ShardEntry;
use sdsfs::format::json::Value;
use sdsfs::format::limits::RecordLimits;
use sdsfs::format::record::{self, Record, RecordError};
use sdsfs::storage::ObjectStore;

fn small_cache(pages: usize) -> OpenOptions {
    OpenOptions {
        manifest_cache_pages: pages,
        ..OpenOptions::default()
    }
}

/// Relative path of the page holding `ordinal`, and of its entry's metadata and data shards.
fn where_is(dataset: &Dataset, ordinal: u64) -> (String, String, String) {
    let location = dataset.locate(ordinal).unwrap();
    let page = dataset.snapshot().manifests[location.page_index]
        .object
        .path
        .to_string();
    let entry = location.entry().unwrap();
    (
        page,
        entry.metadata.path.to_string(),
        entry.data.path.to_string(),
    )
}

#[test]
fn open_reads_only_root_and_snapshot() {
    let ds = publish_dataset(&[3, 3, 3, 3, 3], 2);
    let (dataset, counting) = ds.open_counting(OpenOptions::default());
    let touched = counting.touched();
    let expected: BTreeSet<String> = ["root.json", "snapshots/snap-1/snapshot.json"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(touched, expected);
    assert_eq!(counting.whole_reads("root.json"), 1);
    assert_eq!(counting.whole_reads("snapshots/snap-1/snapshot.json"), 1);
    assert_eq!(dataset.len(), 15);
    assert_eq!(dataset.snapshot().manifests.len(), 3);
    assert_eq!(dataset.root().metadata, ds.options.metadata);
}

#[test]
fn stat_reads_one_page_and_one_metadata_shard() {
    let ds = publish_dataset(&[3, 3, 3, 3, 3], 2);
    let (dataset, counting) = ds.open_counting(OpenOptions::default());
    let (page, metadata, data) = where_is(&ds.open(), 7);
    counting.clear();
    let meta = dataset.record_meta(7).unwrap();
    assert_eq!(meta, ds.records[7].meta());
    let expected: BTreeSet<String> = [page.clone(), metadata].into_iter().collect();
    assert_eq!(counting.touched(), expected);
    assert!(!counting.touched().contains(&data));
    assert_eq!(counting.whole_reads(&page), 1);
    // A second row of the same shard reads no page and opens nothing new.
    counting.clear();
    assert_eq!(dataset.record_meta(8).unwrap(), ds.records[8].meta());
    assert_eq!(counting.whole_reads(&page), 0);
    assert!(counting.calls().iter().all(|c| c.op == "read_range"));
}

#[test]
fn every_row_reads_without_touching_a_data_shard() {
    let ds = publish_dataset(&[4, 0, 5, 3], 2);
    let (dataset, counting) = ds.open_counting(OpenOptions::default());
    let rows: Vec<_> = dataset.iter_record_meta().map(Result::unwrap).collect();
    let expected: Vec<_> = ds.records.iter().map(Record::meta).collect();
    assert_eq!(rows, expected);
    assert!(counting
        .touched()
        .iter()
        .all(|p| !p.starts_with("objects/data/")));
}

#[test]
fn page_cache_evicts_and_rereads() {
    let ds = publish_dataset(&[2, 2, 2, 2, 2, 2], 2);
    let (page0, _, _) = where_is(&ds.open(), 0);
    let (page1, _, _) = where_is(&ds.open(), 4);
    // One page cached: alternating between pages re-reads each time.
    let (dataset, counting) = ds.open_counting(small_cache(1));
    dataset.record_meta(0).unwrap();
    dataset.record_meta(1).unwrap();
    assert_eq!(counting.whole_reads(&page0), 1);
    dataset.record_meta(4).unwrap();
    dataset.record_meta(0).unwrap();
    assert_eq!(counting.whole_reads(&page0), 2);
    assert_eq!(counting.whole_reads(&page1), 1);
    // Two pages cached: the same pattern reads each page once.
    let (dataset, counting) = ds.open_counting(small_cache(2));
    for ordinal in [0, 4, 0, 4, 1, 5] {
        dataset.record_meta(ordinal).unwrap();
    }
    assert_eq!(counting.whole_reads(&page0), 1);
    assert_eq!(counting.whole_reads(&page1), 1);
    // The least recently used page is the one evicted.
    let (page2, _, _) = where_is(&ds.open(), 8);
    let (dataset, counting) = ds.open_counting(small_cache(2));
    for ordinal in [0, 4, 0, 8, 0] {
        dataset.record_meta(ordinal).unwrap();
    }
    assert_eq!(counting.whole_reads(&page0), 1);
    dataset.record_meta(4).unwrap();
    assert_eq!(counting.whole_reads(&page1), 2);
    assert_eq!(counting.whole_reads(&page2), 1);
}

#[test]
fn ordinals_map_to_shards_across_many_pages() {
    let sizes = [2, 0, 3, 1, 0, 4, 2, 5, 1, 0, 3];
    let ds = publish_dataset(&sizes, 3);
    let dataset = ds.open();
    // Empty shards are entries too (the library keeps them), in work-id order.
    let nonempty: Vec<_> = ds.receipts.iter().collect();
    assert_eq!(dataset.snapshot().shard_count, nonempty.len() as u64);
    assert_eq!(
        dataset.snapshot().manifests.len(),
        nonempty.len().div_ceil(3)
    );
    assert_eq!(ds.summary.manifest_pages, nonempty.len().div_ceil(3) as u64);
    let mut ordinal = 0u64;
    for (shard, receipt) in nonempty.iter().enumerate() {
        for k in 0..receipt.record_count {
            let location = dataset.locate(ordinal).unwrap();
            assert_eq!(location.page_index, shard / 3, "ordinal {ordinal}");
            assert_eq!(location.shard_index, shard % 3, "ordinal {ordinal}");
            assert_eq!(location.physical_index, k);
            assert_eq!(location.index_in_entry, k);
            let entry = location.entry().unwrap();
            assert!(receipt.data_uri.ends_with(entry.data.path.as_str()));
            assert!(receipt.metadata_uri.ends_with(entry.metadata.path.as_str()));
            ordinal += 1;
        }
    }
    assert_eq!(ordinal, dataset.len());
    assert!(matches!(
        dataset.locate(ordinal),
        Err(DatasetError::OutOfRange { ordinal: o, record_count }) if o == ordinal && record_count == ordinal
    ));
    assert!(matches!(
        dataset.read_record(u64::MAX),
        Err(DatasetError::OutOfRange { .. })
    ));
}

#[test]
fn read_record_equals_what_was_written() {
    let ds = publish_dataset(&[5, 0, 4, 6, 1], 2);
    let dataset = ds.open();
    let read: Vec<Record> = dataset.iter_records().map(Result::unwrap).collect();
    assert_eq!(read, ds.records);
    // Every dtype, one-element fields and scene ids were exercised.
    let dtypes: BTreeSet<_> = read
        .iter()
        .map(|r| r.fields["label"].meta.dtype.numpy_name())
        .collect();
    assert_eq!(dtypes.len(), 13);
    assert!(read.iter().any(|r| r.fields["label"].meta.shape == [1]));
    assert!(read.iter().any(|r| r.scene_id.is_some()) && read.iter().any(|r| r.scene_id.is_none()));
    for ordinal in 0..dataset.len() {
        let location = dataset.locate(ordinal).unwrap();
        let payload = dataset.read_payload(&location).unwrap().value;
        assert_eq!(
            dataset.payload_len(&location).unwrap(),
            payload.len() as u64
        );
        let mut streamed = Vec::new();
        let mut sink = sdsfs::arrayrecord::WriteSink::new(&mut streamed);
        let n = dataset.read_payload_into(&location, &mut sink).unwrap();
        assert_eq!(n, payload.len() as u64);
        assert_eq!(streamed, payload.to_vec());
    }
}

/// A dataset whose shards are those of `ds` but whose (single page) entries are given by hand.
fn rewire(ds: &Published, entries: Vec<ShardEntry>) -> (tempfile::TempDir, Dataset) {
    let dir = copy_tree(ds.root(), |rel| !rel.starts_with("objects/"));
    let store = local_store(dir.path());
    write_documents_by_hand(store.as_ref(), "ds-view", "view-1", vec![entries]);
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    (dir, dataset)
}

fn entry_with_indices(ds: &Published, shard: usize, first: u64, indices: Vec<u64>) -> ShardEntry {
    let receipt = &ds.receipts[shard];
    let reference = |uri: &str, bytes| {
        let path = sdsfs::dataset::relative_location(ds.store.as_ref(), uri).unwrap();
        sdsfs::format::documents::ObjectRef::new(path, bytes)
    };
    let mut entry = ShardEntry::new(
        first,
        reference(&receipt.data_uri, receipt.data_bytes),
        reference(&receipt.metadata_uri, receipt.metadata_bytes),
        indices.len() as u64,
    );
    entry.record_indices = Some(indices);
    entry
}

#[test]
fn record_indices_permute_records() {
    let ds = publish_dataset(&[4, 3], 10);
    let entries = vec![
        entry_with_indices(&ds, 0, 0, vec![3, 1, 0, 2]),
        entry_with_indices(&ds, 1, 4, vec![2, 2, 0]),
    ];
    let (_dir, dataset) = rewire(&ds, entries);
    let expected = [3usize, 1, 0, 2, 6, 6, 4];
    assert_eq!(dataset.len(), expected.len() as u64);
    for (ordinal, &serial) in expected.iter().enumerate() {
        let ordinal = ordinal as u64;
        assert_eq!(dataset.read_record(ordinal).unwrap(), ds.records[serial]);
        assert_eq!(
            dataset.record_meta(ordinal).unwrap(),
            ds.records[serial].meta()
        );
    }
    let runs: Vec<(u64, u64, u64)> = dataset
        .read_instructions(0, 7, false)
        .unwrap()
        .iter()
        .map(|i| (i.first_ordinal, i.skip, i.take))
        .collect();
    assert_eq!(
        runs,
        vec![
            (0, 3, 1),
            (1, 1, 1),
            (2, 0, 1),
            (3, 2, 1),
            (4, 2, 1),
            (5, 2, 1),
            (6, 0, 1)
        ]
    );
    // A view addressing a shard's last record only still sizes the shard to hold it.
    let (_dir, view) = rewire(&ds, vec![entry_with_indices(&ds, 0, 0, vec![3])]);
    let runs = view.read_instructions(0, 1, false).unwrap();
    assert_eq!((runs[0].skip, runs[0].take), (3, 1));
    assert!(runs[0].skip + runs[0].take <= runs[0].examples_in_shard);
    assert_eq!(view.read_record(0).unwrap(), ds.records[3]);
}

#[test]
fn out_of_range_record_indices_fail_only_those_records() {
    let ds = publish_dataset(&[4, 3], 10);
    let entries = vec![
        entry_with_indices(&ds, 0, 0, vec![0, 9, 2]),
        entry_with_indices(&ds, 1, 3, vec![1, 3, 0]),
    ];
    let (_dir, dataset) = rewire(&ds, entries);
    let good = [(0u64, 0usize), (2, 2), (3, 5), (5, 4)];
    for (ordinal, serial) in good {
        assert_eq!(dataset.read_record(ordinal).unwrap(), ds.records[serial]);
        assert_eq!(
            dataset.record_meta(ordinal).unwrap(),
            ds.records[serial].meta()
        );
    }
    for ordinal in [1u64, 4] {
        let err = dataset.read_record(ordinal).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("record_indices"), "ordinal {ordinal}: {text}");
        assert!(text.contains(&format!("ordinal {ordinal}")), "{text}");
        assert!(dataset.record_meta(ordinal).is_err());
    }
    // The good records still read after the failures (nothing was poisoned).
    assert_eq!(dataset.read_record(0).unwrap(), ds.records[0]);
}

/// Writes a shard pair by hand from payloads and rows; returns the shard entry.
fn hand_shard(
    store: &dyn ObjectStore,
    first: u64,
    payloads: &[Vec<u8>],
    rows: &[String],
) -> ShardEntry {
    let data = write_records(WriterOptions::default(), payloads).unwrap();
    let meta = write_records(WriterOptions::default(), rows.iter().map(String::as_bytes)).unwrap();
    let data_path = data_shard_path(&sha256_hex(&data)).unwrap();
    let meta_path = metadata_shard_path(&sha256_hex(&meta)).unwrap();
    store.create(&data_path, &data).unwrap();
    store.create(&meta_path, &meta).unwrap();
    ShardEntry::new(
        first,
        sdsfs::format::documents::ObjectRef::new(data_path, data.len() as u64),
        sdsfs::format::documents::ObjectRef::new(meta_path, meta.len() as u64),
        payloads.len() as u64,
    )
}

#[test]
fn disagreeing_row_is_a_record_error_for_that_ordinal_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let records: Vec<Record> = (0..4).map(record).collect();
    let limits = RecordLimits::default();
    let mut payloads: Vec<Vec<u8>> = records
        .iter()
        .map(|r| record::encode(r, &limits).unwrap().to_vec())
        .collect();
    let mut rows: Vec<String> = records.iter().map(|r| r.meta().to_row_json()).collect();
    let mut wrong = records[2].meta();
    wrong.metadata.insert("serial".into(), Value::Int(99));
    rows[2] = wrong.to_row_json();
    let mut other_shape = records[3].meta();
    other_shape.id = "someone-else".into();
    rows[3] = other_shape.to_row_json();
    // Record 4: a row that is not JSON; record 5: a payload that is not SafeTensors.
    payloads.push(record::encode(&record(4), &limits).unwrap().to_vec());
    rows.push("{not json".into());
    payloads.push(b"garbage, not a payload".to_vec());
    rows.push(record(5).meta().to_row_json());
    let entry = hand_shard(store.as_ref(), 0, &payloads, &rows);
    write_documents_by_hand(store.as_ref(), "ds-rows", "rows-1", vec![vec![entry]]);
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    assert_eq!(dataset.read_record(0).unwrap(), records[0]);
    assert_eq!(dataset.read_record(1).unwrap(), records[1]);
    for (ordinal, what) in [(2u64, "metadata"), (3, "id")] {
        match dataset.read_record(ordinal) {
            Err(DatasetError::Record {
                ordinal: o,
                source: RecordError::RowMismatch { what: w, .. },
                ..
            }) => {
                assert_eq!(o, ordinal);
                assert_eq!(w, what);
            }
            other => panic!("ordinal {ordinal}: expected a row mismatch, got {other:?}"),
        }
        // The row itself is readable: it is only inconsistent with its record.
        assert!(dataset.record_meta(ordinal).is_ok());
    }
    let e = dataset.record_meta(4).unwrap_err();
    assert!(
        matches!(e, DatasetError::Record { ordinal: 4, .. }),
        "{e:?}"
    );
    assert!(dataset.read_record(4).is_err());
    assert_eq!(dataset.record_meta(5).unwrap(), record(5).meta());
    // (The record layer reports this garbage's absurd header length as a limit, not as
    // corruption; either way it is a record error for ordinal 5 only.)
    let e = dataset.read_record(5).unwrap_err();
    assert!(
        matches!(&e, DatasetError::Record { ordinal: 5, .. }),
        "{e:?}"
    );
    assert_eq!(dataset.read_record(1).unwrap(), records[1]);
}

/// The data shard of shard `work` of `ds`, as a file path.
fn data_file(ds: &Published, work: usize) -> std::path::PathBuf {
    ds.file(&ds.receipts[work].data_uri)
}

fn assert_only_shard_fails(
    ds: &Published,
    bad: std::ops::Range<u64>,
    check: impl Fn(&DatasetError),
) {
    let dataset = ds.open();
    for ordinal in 0..dataset.len() {
        // Rows never depend on the data shard.
        assert_eq!(
            dataset.record_meta(ordinal).unwrap(),
            ds.records[ordinal as usize].meta()
        );
        match dataset.read_record(ordinal) {
            Ok(record) => {
                assert!(!bad.contains(&ordinal), "ordinal {ordinal} should fail");
                assert_eq!(record, ds.records[ordinal as usize]);
            }
            Err(e) => {
                assert!(bad.contains(&ordinal), "ordinal {ordinal} failed: {e}");
                check(&e);
            }
        }
    }
}

#[test]
fn truncated_data_shard_fails_only_its_records() {
    let ds = publish_dataset(&[3, 3, 3], 2);
    let path = data_file(&ds, 1);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let name = path.display().to_string();
    assert_only_shard_fails(&ds, 3..6, |e| match e {
        DatasetError::SizeMismatch {
            object,
            expected,
            actual,
        } => {
            assert_eq!(object, &name);
            assert_eq!(*expected, bytes.len() as u64);
            assert_eq!(*actual, bytes.len() as u64 - 10);
        }
        other => panic!("expected a size mismatch, got {other:?}"),
    });
}

#[test]
fn grown_data_shard_is_a_size_mismatch() {
    let ds = publish_dataset(&[3, 3], 2);
    let path = data_file(&ds, 0);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.push(0);
    std::fs::write(&path, &bytes).unwrap();
    assert_only_shard_fails(&ds, 0..3, |e| {
        assert!(matches!(e, DatasetError::SizeMismatch { .. }), "{e:?}");
        assert!(e.to_string().contains(&ds.receipts[0].data_uri), "{e}");
    });
}

#[test]
fn deleted_data_shard_fails_only_its_records() {
    let ds = publish_dataset(&[3, 3, 3], 2);
    std::fs::remove_file(data_file(&ds, 2)).unwrap();
    assert_only_shard_fails(&ds, 6..9, |e| {
        assert!(
            matches!(e, DatasetError::Storage(s) if s.is_not_found()),
            "{e:?}"
        );
        assert!(e.to_string().contains(&ds.receipts[2].data_uri), "{e}");
    });
}

#[test]
fn bit_flip_in_a_chunk_fails_only_that_record() {
    let ds = publish_dataset(&[3, 3, 3], 2);
    let span = {
        let dataset = ds.open();
        let location = dataset.locate(4).unwrap();
        assert_eq!(location.physical_index, 1);
        dataset
            .data_shard(&location)
            .unwrap()
            .chunk_span(1)
            .unwrap()
    };
    let path = data_file(&ds, 1);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = (span.start + (span.end - span.start) * 3 / 4) as usize;
    bytes[at] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    assert_only_shard_fails(&ds, 4..5, |e| {
        assert!(matches!(e, DatasetError::Shard { .. }), "{e:?}");
    });
}

#[test]
fn missing_or_resized_manifest_page_fails_only_its_ordinals() {
    let ds = publish_dataset(&[2, 2, 2, 2], 1);
    let dataset = ds.open();
    let page2 = dataset.snapshot().manifests[2].object.path.to_string();
    let page3 = dataset.snapshot().manifests[3].object.path.to_string();
    std::fs::remove_file(ds.file(&page2)).unwrap();
    let mut text = std::fs::read(ds.file(&page3)).unwrap();
    text.push(b' ');
    std::fs::write(ds.file(&page3), &text).unwrap();
    let dataset = ds.open();
    for ordinal in 0..8u64 {
        let result = dataset.record_meta(ordinal);
        match ordinal {
            0..=3 => assert_eq!(result.unwrap(), ds.records[ordinal as usize].meta()),
            4 | 5 => {
                let e = result.unwrap_err();
                assert!(
                    matches!(&e, DatasetError::Storage(s) if s.is_not_found()),
                    "{e:?}"
                );
                assert!(e.to_string().contains(&page2), "{e}");
                assert!(dataset.read_record(ordinal).is_err());
            }
            _ => {
                let e = result.unwrap_err();
                assert!(matches!(&e, DatasetError::SizeMismatch { .. }), "{e:?}");
                assert!(e.to_string().contains(&page3), "{e}");
            }
        }
    }
}

/// Opens a copy of `ds` whose root.json is `edit(original text)`.
fn open_with_root(ds: &Published, edit: impl Fn(&str) -> String) -> Result<Dataset, DatasetError> {
    let dir = copy_tree(ds.root(), |rel| rel == "root.json");
    let text = std::fs::read_to_string(ds.file("root.json")).unwrap();
    std::fs::write(dir.path().join("root.json"), edit(&text)).unwrap();
    Dataset::open(local_store(dir.path()), OpenOptions::default())
}

fn open_error(ds: &Published, edit: impl Fn(&str) -> String) -> String {
    open_with_root(ds, edit).unwrap_err().to_string()
}

#[test]
fn open_errors_name_the_document_and_the_rule() {
    let ds = publish_dataset(&[2, 1], 1);
    assert!(open_with_root(&ds, str::to_string).is_ok());
    let snapshot_path = "snapshots/snap-1/snapshot.json";

    let e = open_error(&ds, |t| t.replace("\"format\"", "\"format\": 1, \"x\""));
    assert!(e.contains("root.json"), "{e}");
    let e = open_error(&ds, |_| "[]".into());
    assert!(e.contains("root.json"), "{e}");
    let e = open_error(&ds, |t| t.replacen(",", ",,", 1));
    assert!(e.contains("root.json"), "{e}");

    let e = open_error(&ds, |t| {
        t.replace("\"layout_version\": \"0.1\"", "\"layout_version\": \"0.2\"")
    });
    assert!(
        e.contains("root.json") && e.contains("layout_version"),
        "{e}"
    );

    let e = open_error(&ds, |t| {
        t.replace("signal-dataset.dataset", "signal-dataset.other")
    });
    assert!(e.contains("root.json") && e.contains("format"), "{e}");

    let version = |v: &str| {
        let v = v.to_string();
        move |t: &str| {
            t.replace(
                "\"min_reader_version\": \"0.3.0\"",
                &format!("\"min_reader_version\": \"{v}\""),
            )
        }
    };
    let e = open_error(&ds, version("9"));
    assert!(
        e.contains("root.json") && e.contains("\"9\"") && e.contains("0.4.0"),
        "{e}"
    );
    let e = open_error(&ds, version("x.1"));
    assert!(e.contains("min_reader_version"), "{e}");
    assert!(open_with_root(&ds, version("0.4.0rc1")).is_ok());

    let e = open_error(&ds, |t| {
        t.replace(snapshot_path, "snapshots/none/snapshot.json")
    });
    assert!(
        e.contains("snapshots/none/snapshot.json") && e.contains("not found"),
        "{e}"
    );

    let size = std::fs::metadata(ds.file(snapshot_path)).unwrap().len();
    let e = open_with_root(&ds, |t| {
        t.replace(
            &format!("\"stored_bytes\": {size}"),
            &format!("\"stored_bytes\": {}", size + 1),
        )
    })
    .unwrap_err();
    assert!(matches!(e, DatasetError::SizeMismatch { .. }), "{e:?}");
    assert!(e.to_string().contains(snapshot_path), "{e}");

    // The library ties nothing else between root and snapshot: any dataset id opens, and an
    // absent metadata is `{}`.
    let other = open_with_root(&ds, |t| t.replace("\"ds-test\"", "\"ds-other\"")).unwrap();
    assert_eq!(other.root().dataset_id, "ds-other");
    let bare = open_with_root(&ds, |t| t.replace("\"metadata\"", "\"meta\"")).unwrap();
    assert!(bare.root().metadata.is_empty());
    let e = open_error(&ds, |t| t.replace("\"ds-test\"", "\"\""));
    assert!(e.contains("root.json") && e.contains("dataset_id"), "{e}");

    // A root holding only sds.json is the split-based prototype.
    let legacy = tempfile::tempdir().unwrap();
    std::fs::write(legacy.path().join("sds.json"), "{}").unwrap();
    let e = Dataset::open(local_store(legacy.path()), OpenOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("split-based 0.1 prototype")
            && e.to_string().contains("publish a new dataset"),
        "{e}"
    );

    let empty = tempfile::tempdir().unwrap();
    let e = Dataset::open(local_store(empty.path()), OpenOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("root.json") && e.to_string().contains("not found"),
        "{e}"
    );
}

#[test]
fn broken_snapshot_is_refused_naming_it() {
    let ds = publish_dataset(&[2, 1], 1);
    let snapshot_path = "snapshots/snap-1/snapshot.json";
    let text = std::fs::read_to_string(ds.file(snapshot_path)).unwrap();
    for (from, to, needle) in [
        ("\"record_count\": 3", "\"record_count\": 4", "tile"),
        ("\"shard_count\": 2", "\"shard_count\": 3", "shard_count"),
    ] {
        let edited = text.replace(from, to);
        assert_ne!(edited, text, "{from}");
        let dir = copy_tree(ds.root(), |rel| rel == snapshot_path || rel == "root.json");
        let store = local_store(dir.path());
        let snapshot_ref = put_document(store.as_ref(), snapshot_path, &edited);
        let root = sdsfs::format::documents::DatasetRoot::new(
            "ds-test",
            snapshot_ref,
            ds.options.metadata.clone(),
        );
        put_document(store.as_ref(), "root.json", &root.to_json());
        let e = Dataset::open(store, OpenOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(snapshot_path) && e.contains(needle),
            "{from}: {e}"
        );
    }
}

#[test]
fn empty_shard_entries_are_valid_on_read() {
    let ds = publish_dataset(&[2, 3], 10);
    let mut entries = vec![
        entry_with_indices(&ds, 0, 0, vec![]),
        entry_with_indices(&ds, 0, 0, vec![0, 1]),
        entry_with_indices(&ds, 1, 2, vec![]),
        entry_with_indices(&ds, 1, 2, vec![0, 1, 2]),
        entry_with_indices(&ds, 1, 5, vec![]),
    ];
    for entry in &mut entries {
        entry.record_indices = None;
    }
    let (_dir, dataset) = rewire(&ds, entries);
    let read: Vec<Record> = dataset.iter_records().map(Result::unwrap).collect();
    assert_eq!(read, ds.records);
    let runs = dataset.read_instructions(0, 5, false).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!((runs[0].take, runs[1].take), (2, 3));
}

/// Reads every record an instruction names with our ArrayRecord reader.
fn fetch(filename: &str, skip: u64, take: u64) -> Vec<bytes::Bytes> {
    let bytes = std::fs::read(filename).unwrap();
    let reader = ArrayRecordReader::open(bytes, filename).unwrap();
    (skip..skip + take)
        .map(|i| reader.read(i).unwrap())
        .collect()
}

#[test]
fn read_instructions_address_the_records() {
    let ds = publish_dataset(&[3, 0, 4, 2, 5, 1], 2);
    let dataset = ds.open();
    let limits = RecordLimits::default();
    for (start, stop) in [(0, 15), (0, 100), (2, 11), (7, 8), (14, 15)] {
        let instructions = dataset.read_instructions(start, stop, false).unwrap();
        let rows = dataset.read_instructions(start, stop, true).unwrap();
        let stop = stop.min(dataset.len());
        assert_eq!(
            instructions.iter().map(|i| i.take).sum::<u64>(),
            stop - start
        );
        assert_eq!(instructions.len(), rows.len());
        let mut ordinal = start;
        for (instruction, row_instruction) in instructions.iter().zip(&rows) {
            assert_eq!(instruction.first_ordinal, ordinal);
            assert!(instruction
                .filename
                .starts_with(ds.root().to_str().unwrap()));
            assert!(instruction.filename.contains("/objects/data/"));
            assert!(row_instruction.filename.contains("/objects/metadata/"));
            assert_eq!(
                (
                    row_instruction.skip,
                    row_instruction.take,
                    row_instruction.first_ordinal
                ),
                (
                    instruction.skip,
                    instruction.take,
                    instruction.first_ordinal
                )
            );
            let payloads = fetch(&instruction.filename, instruction.skip, instruction.take);
            let row_bytes = fetch(
                &row_instruction.filename,
                instruction.skip,
                instruction.take,
            );
            assert!(instruction.skip + instruction.take <= instruction.examples_in_shard);
            for (payload, row) in payloads.into_iter().zip(row_bytes) {
                let expected = &ds.records[ordinal as usize];
                assert_eq!(&record::decode(payload, &limits).unwrap(), expected);
                let row = sdsfs::format::record::RecordMeta::parse_row(&row, &limits).unwrap();
                assert_eq!(row, expected.meta());
                ordinal += 1;
            }
        }
        assert_eq!(ordinal, stop);
    }
    assert!(dataset.read_instructions(15, 20, false).unwrap().is_empty());
    assert!(dataset.read_instructions(9, 3, false).unwrap().is_empty());
    // One run per shard for a full scan.
    assert_eq!(dataset.read_instructions(0, 15, false).unwrap().len(), 5);
}

#[test]
fn dataset_is_shared_across_threads() {
    let ds = publish_dataset(&[3, 3, 3, 3, 3, 3], 2);
    let dataset = Arc::new(
        Dataset::open(
            ds.store.clone(),
            OpenOptions {
                manifest_cache_pages: 1,
                open_shards: 2,
                ..OpenOptions::default()
            },
        )
        .unwrap(),
    );
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let dataset = dataset.clone();
            std::thread::spawn(move || {
                (0..18u64)
                    .map(|i| (i * 7 + t) % 18)
                    .map(|o| (o, dataset.read_record(o).unwrap()))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for thread in threads {
        for (ordinal, record) in thread.join().unwrap() {
            assert_eq!(record, ds.records[ordinal as usize]);
        }
    }
}

#[test]
fn empty_manifest_pages_are_skipped_by_the_mapping() {
    let ds = publish_dataset(&[2, 3], 10);
    let dir = copy_tree(ds.root(), |rel| !rel.starts_with("objects/"));
    let store = local_store(dir.path());
    let plain = |shard, first, n| {
        let mut entry = entry_with_indices(&ds, shard, first, (0..n).collect());
        entry.record_indices = None;
        entry
    };
    let pages = vec![
        vec![],
        vec![plain(0, 0, 2)],
        vec![],
        vec![plain(1, 2, 3)],
        vec![],
    ];
    write_documents_by_hand(store.as_ref(), "ds-pages", "pages-1", pages);
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    let read: Vec<Record> = dataset.iter_records().map(Result::unwrap).collect();
    assert_eq!(read, ds.records);
    assert_eq!(dataset.locate(1).unwrap().page_index, 1);
    assert_eq!(dataset.locate(2).unwrap().page_index, 3);
}

#[test]
fn a_pinned_generation_that_does_not_match_fails_only_its_records() {
    let ds = publish_dataset(&[2, 2], 10);
    let mut pinned = entry_with_indices(&ds, 1, 2, vec![0, 1]);
    pinned.record_indices = None;
    pinned.data.generation = Some(1);
    let mut plain = entry_with_indices(&ds, 0, 0, vec![0, 1]);
    plain.record_indices = None;
    let (_dir, dataset) = rewire(&ds, vec![plain, pinned]);
    assert_eq!(dataset.read_record(1).unwrap(), ds.records[1]);
    assert_eq!(dataset.record_meta(3).unwrap(), ds.records[3].meta());
    let e = dataset.read_record(3).unwrap_err();
    assert!(e.to_string().contains("generation"), "{e}");
}

#[test]
fn a_defective_manifest_page_is_read_once_however_many_ordinals_ask() {
    let ds = publish_dataset(&[2, 2, 2, 2], 1);
    let dataset = ds.open();
    let page3 = dataset.snapshot().manifests[3].object.path.to_string();
    let mut text = std::fs::read(ds.file(&page3)).unwrap();
    text.push(b' ');
    std::fs::write(ds.file(&page3), &text).unwrap();
    let (dataset, counting) = ds.open_counting(OpenOptions::default());
    for _ in 0..50 {
        for ordinal in 6..8u64 {
            let e = dataset.record_meta(ordinal).unwrap_err();
            assert!(matches!(&e, DatasetError::SizeMismatch { .. }), "{e:?}");
            assert!(e.to_string().contains(&page3), "{e}");
        }
    }
    assert_eq!(
        counting.whole_reads(&page3),
        1,
        "the page's defect is remembered"
    );
}
