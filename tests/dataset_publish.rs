//! Publication (profile section 5): `write_shard` receipts and content addresses, `publish`
//! receipt selection and checks, convergence of repeated and interrupted publications,
//! collisions, empty datasets, and shards readable by the reference Python packages.

mod common;

use common::datasets::*;
use sdsfs::arrayrecord::WriterOptions;
use sdsfs::dataset::{
    publish, write_shard, Dataset, DatasetError, OpenOptions, PublishOptions, ShardOptions,
    ShardReceipt,
};
use sdsfs::format::documents::ids::sha256_hex;
use sdsfs::format::path::RelPath;
use sdsfs::format::record::Record;
use sdsfs::storage::{CreateOutcome, ObjectStore};

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
fn receipt_describes_content_addressed_shards() {
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
    for (uri, bytes, kind, generation) in [
        (
            &receipt.data_uri,
            receipt.data_bytes,
            "data",
            receipt.data_generation,
        ),
        (
            &receipt.metadata_uri,
            receipt.metadata_bytes,
            "metadata",
            receipt.metadata_generation,
        ),
    ] {
        let content = std::fs::read(dir.path().join(uri)).unwrap();
        let hash = sha256_hex(&content);
        assert_eq!(
            uri,
            &format!("objects/{kind}/{}/{hash}.arrayrecord", &hash[..2])
        );
        assert_eq!(bytes, content.len() as u64);
        // Local storage has generations, and the receipt carries the shard's.
        let info = store
            .info(&RelPath::new(uri.as_str()).unwrap(), None)
            .unwrap();
        assert_eq!(generation, info.version.generation);
        assert!(generation.is_some());
    }
    let parsed = ShardReceipt::parse(receipt.to_json().as_bytes()).unwrap();
    assert_eq!(parsed, receipt);
}

#[test]
fn writing_the_same_shard_twice_converges() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let first = write_shard(
        store.as_ref(),
        records(0..4),
        "w",
        0,
        &ShardOptions::default(),
    )
    .unwrap();
    let path = dir.path().join(&first.data_uri);
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let second = write_shard(
        store.as_ref(),
        records(0..4),
        "w",
        1,
        &ShardOptions::default(),
    )
    .unwrap();
    assert_eq!(
        (
            &first.data_uri,
            &first.metadata_uri,
            first.data_bytes,
            first.metadata_bytes
        ),
        (
            &second.data_uri,
            &second.metadata_uri,
            second.data_bytes,
            second.metadata_bytes
        )
    );
    assert_eq!(first.data_generation, second.data_generation);
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        modified
    );
    let bytes = std::fs::read(&path).unwrap();
    let rel = RelPath::new(first.data_uri.as_str()).unwrap();
    assert_eq!(
        store.create(&rel, &bytes).unwrap(),
        CreateOutcome::AlreadyIdentical
    );
    // Different records land elsewhere.
    let other = write_shard(
        store.as_ref(),
        records(1..5),
        "w",
        0,
        &ShardOptions::default(),
    )
    .unwrap();
    assert_ne!(other.data_uri, first.data_uri);
}

#[test]
fn shards_must_be_written_with_group_size_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let options = ShardOptions {
        writer_options: WriterOptions::parse("group_size:4").unwrap(),
        ..ShardOptions::default()
    };
    let e = write_shard(store.as_ref(), records(0..2), "w", 0, &options).unwrap_err();
    assert!(e.to_string().contains("group_size"), "{e}");
    assert!(!dir.path().join("objects").exists());
}

#[test]
fn lowest_attempt_wins_per_work_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let opts = ShardOptions::default();
    let w0 = write_shard(store.as_ref(), records(0..2), "a", 0, &opts).unwrap();
    let late = write_shard(store.as_ref(), records(10..13), "b", 2, &opts).unwrap();
    let early = write_shard(store.as_ref(), records(20..21), "b", 1, &opts).unwrap();
    let later = write_shard(store.as_ref(), records(30..34), "b", 5, &opts).unwrap();
    let summary = publish(store.as_ref(), &[late, w0, early, later], &options()).unwrap();
    assert_eq!((summary.record_count, summary.shard_count), (3, 2));
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    let ids: Vec<String> = dataset.iter_records().map(|r| r.unwrap().id).collect();
    // No expected ids: shards in the order work ids were first given ("b" first).
    assert_eq!(ids, ["capture-00020", "capture-00000", "capture-00001"]);
}

#[test]
fn expected_work_ids_are_enforced_and_order_the_shards() {
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

    opts.expected_work_ids = Some(vec![work_id(2), work_id(0), work_id(1)]);
    let mut shuffled = receipts.clone();
    shuffled.reverse();
    publish(store.as_ref(), &shuffled, &opts).unwrap();
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    let read: Vec<Record> = dataset.iter_records().map(Result::unwrap).collect();
    let expected: Vec<Record> = [&all[5..6], &all[0..2], &all[2..5]].concat();
    assert_eq!(read, expected);
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
fn portable_ids_are_required() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let (receipts, _) = write_shards(store.as_ref(), &[1]);
    for (dataset_id, snapshot_id) in [("ds", "../x"), ("-ds", "s"), ("ds", "")] {
        let opts = PublishOptions::new(dataset_id, snapshot_id);
        let e = publication_error(publish(store.as_ref(), &receipts, &opts));
        assert!(e.contains("portable"), "{e}");
    }
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
        publish(store.as_ref(), &ds.receipts, &ds.options).unwrap();
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
    publish(local_store(dir.path()).as_ref(), &ds.receipts, &ds.options).unwrap();
    assert_eq!(snapshot_tree(dir.path()), complete);
}

#[test]
fn a_different_publication_into_the_same_root_collides() {
    let ds = publish_dataset(&[2, 2], 1);
    let before = snapshot_tree(ds.root());
    // Same shards and ids, other metadata: the pages agree, the snapshot collides.
    let mut other = ds.options.clone();
    other.metadata = obj(&[("campaign", "other".into())]);
    let e = publication_error(publish(ds.store.as_ref(), &ds.receipts, &other));
    assert!(
        e.contains("snapshots/snap-1/snapshot.json") && e.contains("already exists"),
        "{e}"
    );
    // Other shards under the same snapshot id: the first page collides.
    let (receipts, _) = write_shards(ds.store.as_ref(), &[1, 3]);
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
    for sizes in [&[][..], &[0, 0][..]] {
        let ds = publish_dataset(sizes, 2);
        assert_eq!(ds.summary.record_count, 0);
        assert_eq!(ds.summary.manifest_pages, 0);
        let dataset = ds.open();
        assert!(dataset.is_empty());
        assert!(dataset.snapshot().manifests.is_empty());
        assert_eq!(dataset.snapshot().shard_count, 0);
        assert!(dataset.read_instructions(0, 10, false).unwrap().is_empty());
        assert!(matches!(
            dataset.read_record(0),
            Err(DatasetError::OutOfRange { .. })
        ));
        assert!(!ds.root().join("manifests").exists());
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
