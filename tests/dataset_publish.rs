//! Publication: `write_shard` receipts and work-id shard names, `publish` receipt selection
//! (highest attempt, work-id order, empty shards kept) and checks, convergence of repeated and interrupted publications,
//! collisions, empty datasets, and shards readable by the reference Python packages.

mod common;

use common::datasets::*;
use sdsfs::arrayrecord::WriterOptions;
use sdsfs::dataset::{
    publish, write_shard, Dataset, DatasetError, OpenOptions, PublishOptions, ShardOptions,
    ShardReceipt,
};
use sdsfs::format::documents::ids::sha256_hex;
use sdsfs::format::record::Record;

fn records(range: std::ops::Range<usize>) -> Vec<Record> {
    range.map(record).collect()
}

fn options() -> PublishOptions {
    let mut options = PublishOptions::new("ds-pub", "snap-1");
    options.shards_per_manifest = 2;
    options
}

fn publication_error(result: Result<impl std::fmt::Debug, DatasetError>) -> String {
    match result {
        Err(DatasetError::Publication(message)) => message,
        other => panic!("expected a publication error, got {other:?}"),
    }
}

#[test]
fn receipt_names_shards_by_work_id_and_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let receipt = write_shard(
        store.as_ref(),
        records(0..5),
        "w-7",
        3,
        &ShardOptions::default(),
    )
    .unwrap();
    assert_eq!(
        (
            receipt.work_id.as_str(),
            receipt.attempt,
            receipt.record_count
        ),
        ("w-7", 3, 5)
    );
    // sha256("w-7:3"), computed with Python's hashlib.
    let h = sdsfs::format::documents::ids::shard_id("w-7", 3);
    assert_eq!(h, sha256_hex(b"w-7:3"));
    let root = std::path::absolute(dir.path()).unwrap();
    for (uri, bytes, kind) in [
        (&receipt.data_uri, receipt.data_bytes, "data"),
        (&receipt.metadata_uri, receipt.metadata_bytes, "metadata"),
    ] {
        let expected = root.join(format!("objects/{kind}/{}/{h}.arrayrecord", &h[..2]));
        assert_eq!(uri, &expected.display().to_string(), "a full location");
        assert_eq!(bytes, std::fs::metadata(uri).unwrap().len());
    }
    // Local stores have no persisted generations: the receipt carries null.
    assert_eq!(
        (receipt.data_generation, receipt.metadata_generation),
        (None, None)
    );
    let json = receipt.to_json();
    assert!(json.contains("\"data_generation\":null"), "{json}");
    assert_eq!(ShardReceipt::parse(json.as_bytes()).unwrap(), receipt);
    // The library's form: json.dumps(dataclasses.asdict(shard)), key order free.
    let python = format!(
        "{{\"data_uri\": \"{}\", \"metadata_uri\": \"{}\", \"work_id\": \"w-7\", \"attempt\": 3, \"record_count\": 5, \"data_bytes\": {}, \"metadata_bytes\": {}, \"data_generation\": null, \"metadata_generation\": null}}",
        receipt.data_uri, receipt.metadata_uri, receipt.data_bytes, receipt.metadata_bytes
    );
    assert_eq!(ShardReceipt::parse(python.as_bytes()).unwrap(), receipt);
}

#[test]
fn writing_the_same_attempt_twice_converges_and_other_bytes_collide() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let opts = ShardOptions::default();
    let first = write_shard(store.as_ref(), records(0..4), "w", 0, &opts).unwrap();
    let modified = std::fs::metadata(&first.data_uri)
        .unwrap()
        .modified()
        .unwrap();
    let again = write_shard(store.as_ref(), records(0..4), "w", 0, &opts).unwrap();
    assert_eq!(again, first);
    assert_eq!(
        std::fs::metadata(&first.data_uri)
            .unwrap()
            .modified()
            .unwrap(),
        modified
    );
    let e = publication_error(write_shard(store.as_ref(), records(1..5), "w", 0, &opts));
    assert!(
        e.contains("already exists") && e.contains("attempt 0"),
        "{e}"
    );
    // A new attempt is a new name.
    let retry = write_shard(store.as_ref(), records(1..5), "w", 1, &opts).unwrap();
    assert_ne!(retry.data_uri, first.data_uri);
}

#[test]
fn any_writer_options_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let shard_options = ShardOptions {
        writer_options: WriterOptions::parse("group_size:3").unwrap(),
        ..ShardOptions::default()
    };
    let receipt = write_shard(store.as_ref(), records(0..5), "w", 0, &shard_options).unwrap();
    let summary = publish(store.as_ref(), &[receipt], &options()).unwrap();
    assert_eq!(summary.record_count, 5);
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    let read: Vec<Record> = dataset.iter_records().map(Result::unwrap).collect();
    assert_eq!(read, records(0..5));
}

#[test]
fn highest_attempt_wins_and_shards_go_in_work_id_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let opts = ShardOptions::default();
    let w0 = write_shard(store.as_ref(), records(0..2), "b", 0, &opts).unwrap();
    let late = write_shard(store.as_ref(), records(10..13), "a", 2, &opts).unwrap();
    let early = write_shard(store.as_ref(), records(20..21), "a", 1, &opts).unwrap();
    let latest = write_shard(store.as_ref(), records(30..32), "a", 5, &opts).unwrap();
    let summary = publish(store.as_ref(), &[w0, late, latest, early], &options()).unwrap();
    assert_eq!((summary.record_count, summary.shard_count), (4, 2));
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    let ids: Vec<String> = dataset.iter_records().map(|r| r.unwrap().id).collect();
    // "a" (attempt 5) sorts before "b", whatever order the receipts came in.
    assert_eq!(
        ids,
        [
            "capture-00030",
            "capture-00031",
            "capture-00000",
            "capture-00001"
        ]
    );
}

#[test]
fn expected_work_ids_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let (receipts, all) = write_shards(store.as_ref(), &[2, 3, 1]);
    let mut opts = options();

    opts.expected_work_ids = Some(vec![work_id(0), work_id(1), work_id(2), "work-xyz".into()]);
    let e = publication_error(publish(store.as_ref(), &receipts, &opts));
    assert!(e.contains("missing") && e.contains("work-xyz"), "{e}");

    opts.expected_work_ids = Some(vec![work_id(0), work_id(2)]);
    let e = publication_error(publish(store.as_ref(), &receipts, &opts));
    assert!(e.contains("unexpected") && e.contains(&work_id(1)), "{e}");
    assert!(!e.contains(&work_id(0)), "{e}");

    opts.expected_work_ids = Some(vec![work_id(0), work_id(0), work_id(1), work_id(2)]);
    let e = publication_error(publish(store.as_ref(), &receipts, &opts));
    assert!(e.contains("duplicate"), "{e}");
    assert!(!dir.path().join("root.json").exists());
    assert!(!dir.path().join("manifests").exists());

    // The expected ids' order does not order the shards: work-id order does.
    opts.expected_work_ids = Some(vec![work_id(2), work_id(0), work_id(1)]);
    let mut shuffled = receipts.clone();
    shuffled.reverse();
    publish(store.as_ref(), &shuffled, &opts).unwrap();
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    let read: Vec<Record> = dataset.iter_records().map(Result::unwrap).collect();
    assert_eq!(read, all);
}

#[test]
fn receipt_sizes_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let (mut receipts, _) = write_shards(store.as_ref(), &[2, 2]);
    receipts[1].metadata_bytes += 1;
    let e = publication_error(publish(store.as_ref(), &receipts, &options()));
    assert!(
        e.contains(&work_id(1)) && e.contains(&receipts[1].metadata_uri),
        "{e}"
    );
    receipts[1].metadata_bytes -= 1;
    receipts[0].data_bytes -= 3;
    let e = publication_error(publish(store.as_ref(), &receipts, &options()));
    assert!(
        e.contains(&work_id(0)) && e.contains(&receipts[0].data_uri),
        "{e}"
    );
    assert!(!dir.path().join("root.json").exists());
    // A receipt naming a shard that does not exist is refused too.
    receipts[0].data_bytes += 3;
    receipts[0].data_uri = format!("objects/data/00/{}.arrayrecord", "0".repeat(64));
    let e = publish(store.as_ref(), &receipts, &options()).unwrap_err();
    assert!(e.to_string().contains(&receipts[0].data_uri), "{e}");
}

#[test]
fn ids_are_any_nonempty_strings() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let (receipts, _) = write_shards(store.as_ref(), &[1]);
    for (dataset_id, snapshot_id) in [("ds", "../x"), ("", "s"), ("ds", ""), ("ds", "a?b")] {
        let opts = PublishOptions::new(dataset_id, snapshot_id);
        let e = publication_error(publish(store.as_ref(), &receipts, &opts));
        assert!(e.contains("_id"), "{e}");
    }
    assert!(!dir.path().join("root.json").exists());
    let opts = PublishOptions::new("my dataset/ü ✓", "snap ü");
    publish(store.as_ref(), &receipts, &opts).unwrap();
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    assert_eq!(dataset.root().dataset_id, "my dataset/ü ✓");
    assert!(dir.path().join("snapshots/snap ü/snapshot.json").exists());
}

#[test]
fn rerunning_a_finished_publication_changes_nothing() {
    let ds = publish_dataset(&[3, 0, 2, 4, 1], 2);
    let before = snapshot_tree(ds.root());
    let again = publish(ds.store.as_ref(), &ds.receipts, &ds.options).unwrap();
    assert_eq!(again, ds.summary);
    assert_eq!(snapshot_tree(ds.root()), before);
}

/// Which objects an interruption lost.
type Lost = fn(&str) -> bool;

/// The receipts with their locations moved from `from` to the copy `to`.
fn moved(
    receipts: &[ShardReceipt],
    from: &std::path::Path,
    to: &std::path::Path,
) -> Vec<ShardReceipt> {
    let (from, to) = (
        std::path::absolute(from).unwrap().display().to_string(),
        std::path::absolute(to).unwrap().display().to_string(),
    );
    receipts
        .iter()
        .map(|r| ShardReceipt {
            data_uri: r.data_uri.replacen(&from, &to, 1),
            metadata_uri: r.metadata_uri.replacen(&from, &to, 1),
            ..r.clone()
        })
        .collect()
}

#[test]
fn interrupted_publications_converge_to_the_same_bytes() {
    let ds = publish_dataset(&[3, 0, 2, 4, 1], 2);
    let complete = snapshot_tree(ds.root());
    let interruptions: [(&str, Lost); 3] = [
        ("root", |rel| rel == "root.json"),
        ("snapshot and root", |rel| {
            rel == "root.json" || rel.starts_with("snapshots/")
        }),
        ("everything but shards", |rel| !rel.starts_with("objects/")),
    ];
    for (what, lost) in interruptions {
        let dir = copy_tree(ds.root(), lost);
        let store = local_store(dir.path());
        assert!(
            Dataset::open(store.clone(), OpenOptions::default()).is_err(),
            "{what}"
        );
        let receipts = moved(&ds.receipts, ds.root(), dir.path());
        publish(store.as_ref(), &receipts, &ds.options).unwrap();
        assert_eq!(snapshot_tree(dir.path()), complete, "{what}");
    }
    // A publication interrupted after some pages only (the last page lost) converges too.
    let dataset = ds.open();
    let last = dataset
        .snapshot()
        .manifests
        .last()
        .unwrap()
        .object
        .path
        .to_string();
    let dir = copy_tree(ds.root(), |rel| {
        rel == last || rel == "root.json" || rel.starts_with("snapshots/")
    });
    let receipts = moved(&ds.receipts, ds.root(), dir.path());
    publish(local_store(dir.path()).as_ref(), &receipts, &ds.options).unwrap();
    assert_eq!(snapshot_tree(dir.path()), complete);
}

#[test]
fn a_different_publication_into_the_same_root_collides() {
    let ds = publish_dataset(&[2, 2], 1);
    let before = snapshot_tree(ds.root());
    // Same shards and ids, other metadata (in the root only): pages and snapshot agree, the
    // root collides.
    let mut other = ds.options.clone();
    other.metadata = obj(&[("campaign", "other".into())]);
    let e = publication_error(publish(ds.store.as_ref(), &ds.receipts, &other));
    assert!(
        e.contains("root.json") && e.contains("already exists"),
        "{e}"
    );
    // Other shards under the same snapshot id: the first page collides.
    let opts = ShardOptions::default();
    let receipts = vec![
        write_shard(ds.store.as_ref(), records(0..1), "other-0", 0, &opts).unwrap(),
        write_shard(ds.store.as_ref(), records(1..4), "other-1", 0, &opts).unwrap(),
    ];
    let e = publication_error(publish(ds.store.as_ref(), &receipts, &ds.options));
    assert!(
        e.contains("manifests/") && e.contains("snap-1-00000000"),
        "{e}"
    );
    // Another snapshot id: everything new until root.json, which collides.
    let mut renamed = ds.options.clone();
    renamed.snapshot_id = "snap-2".into();
    let e = publication_error(publish(ds.store.as_ref(), &ds.receipts, &renamed));
    assert!(e.contains("root.json"), "{e}");
    // The published dataset is untouched and still reads.
    let after = snapshot_tree(ds.root());
    for (path, bytes) in &before {
        assert_eq!(after.get(path), Some(bytes), "{path}");
    }
    assert_eq!(ds.open().iter_records().count(), 4);
}

#[test]
fn a_publication_with_no_records_opens() {
    // No shard: no page at all. Empty shards: kept, on pages of no record.
    for (sizes, pages) in [(&[][..], 0), (&[0, 0][..], 1)] {
        let ds = publish_dataset(sizes, 2);
        assert_eq!(ds.summary.record_count, 0);
        assert_eq!(ds.summary.manifest_pages, pages);
        assert_eq!(ds.summary.shard_count, sizes.len() as u64);
        let dataset = ds.open();
        assert!(dataset.is_empty());
        assert_eq!(dataset.snapshot().manifests.len() as u64, pages);
        assert!(dataset.read_instructions(0, 10, false).unwrap().is_empty());
        assert!(matches!(
            dataset.read_record(0),
            Err(DatasetError::OutOfRange { .. })
        ));
        assert!(sdsfs::dataset::verify(&dataset, Default::default()).is_ok());
    }
}

#[test]
fn published_documents_are_canonical() {
    let ds = publish_dataset(&[2, 3, 1], 2);
    let dataset = ds.open();
    assert_eq!(
        dataset.root().to_json().as_bytes(),
        &dataset.root_bytes()[..]
    );
    assert_eq!(
        dataset.snapshot().to_json().as_bytes(),
        &dataset.snapshot_bytes()[..]
    );
    assert_eq!(dataset.root().metadata, ds.options.metadata);
    let text = String::from_utf8(dataset.root_bytes().to_vec()).unwrap();
    assert!(
        text.ends_with("}\n") && !text.contains("generation"),
        "{text}"
    );
    assert_eq!(ds.summary.stored_bytes, dataset.snapshot().stored_bytes);
    let shard_bytes: u64 = ds
        .receipts
        .iter()
        .map(|r| r.data_bytes + r.metadata_bytes)
        .sum();
    assert_eq!(ds.summary.stored_bytes, shard_bytes);
}

#[test]
fn shards_are_readable_by_the_reference_python_packages() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let written = records(0..13);
    let receipt = write_shard(
        store.as_ref(),
        written.clone(),
        "w",
        0,
        &ShardOptions::default(),
    )
    .unwrap();
    let data = dir.path().join(&receipt.data_uri);
    let meta = dir.path().join(&receipt.metadata_uri);
    let out = common::run_python(
        "dataset_tool.py",
        &["shard", data.to_str().unwrap(), meta.to_str().unwrap()],
        b"",
    );
    let theirs: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let ours: Vec<_> = written.iter().map(record_summary).collect();
    assert_eq!(theirs, serde_json::Value::Array(ours));
}

#[test]
fn an_invalid_record_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let mut bad = records(0..3);
    // The field's axis count no longer matches its rank.
    let field = bad[1].fields.get_mut("iq").unwrap();
    field.meta.axes.clear();
    let e = write_shard(store.as_ref(), bad, "w-9", 0, &ShardOptions::default()).unwrap_err();
    assert!(
        matches!(&e, DatasetError::Record { ordinal: 1, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("w-9"), "{e}");
    assert!(!dir.path().join("objects").exists());
}
