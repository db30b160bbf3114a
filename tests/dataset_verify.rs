//! `dataset::verify` and `sds verify`: a corpus of damaged datasets, one rule each, asserting
//! that each problem is reported with its object and (for record problems) its ordinal, that
//! several problems are all reported, that deep-only rules need `--deep`, and that a clean
//! dataset passes with exit status 0.

mod common;

use std::process::Command;
use std::sync::Arc;

use common::datasets::*;
use sdsfs::dataset::{
    publish_entries, verify_store, write_shard, Problem, PublishOptions, ShardOptions,
    ShardReceipt, VerifyOptions, VerifyReport,
};
use sdsfs::format::documents::{ObjectRef, ShardEntry};
use sdsfs::format::path::RelPath;
use sdsfs::storage::{ObjectReader, ObjectStore};

const NORMAL: VerifyOptions = VerifyOptions { deep: false };
const DEEP: VerifyOptions = VerifyOptions { deep: true };

fn check(dir: &std::path::Path, options: VerifyOptions) -> VerifyReport {
    verify_store(local_store(dir), options)
}

/// The problems whose object ends with `object` (a relative path) and whose ordinal is
/// `ordinal`.
fn find<'a>(report: &'a VerifyReport, object: &str, ordinal: Option<u64>) -> Vec<&'a Problem> {
    report
        .problems
        .iter()
        .filter(|p| p.object.ends_with(object) && p.ordinal == ordinal)
        .collect()
}

fn dataset() -> Published {
    // 9 records in shards of 3, 2 and 4; two shards per page: pages [0..5) and [5..9).
    publish_dataset(&[3, 2, 4], 2)
}

fn page_path(published: &Published, index: usize) -> String {
    published.open().snapshot().manifests[index]
        .object
        .path
        .to_string()
}

/// Flips one byte in the middle of the chunk holding physical record `index` of a shard.
fn flip_in_record(published: &Published, shard: &str, index: u64) {
    let store: Arc<dyn ObjectStore> = published.store.clone();
    let path = sdsfs::dataset::relative_location(store.as_ref(), shard).unwrap();
    let source = ObjectReader::open(store, path, None).unwrap();
    let reader = sdsfs::arrayrecord::ArrayRecordReader::open(source, shard).unwrap();
    let span = reader.chunk_span(index).unwrap();
    let at = span.start + 40 + (span.end - span.start - 40) / 2;
    let file = published.file(shard);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[at as usize] ^= 0x5a;
    std::fs::write(&file, bytes).unwrap();
}

#[test]
fn clean_dataset_passes_normal_and_deep() {
    let published = dataset();
    for options in [NORMAL, DEEP] {
        let report = check(published.root(), options);
        assert!(report.is_ok(), "{:?}", report.problems);
        assert_eq!(report.records_checked, 9);
        assert_eq!(report.record_count, 9);
        assert_eq!(report.pages_checked, 2);
        assert_eq!(report.shards_checked, 6);
    }
}

#[test]
fn bad_page_is_reported_and_other_pages_still_checked() {
    let published = dataset();
    let page = page_path(&published, 1);
    let file = published.file(&page);
    let len = std::fs::metadata(&file).unwrap().len() as usize;
    std::fs::write(&file, vec![b'x'; len]).unwrap();
    let report = check(published.root(), NORMAL);
    assert_eq!(find(&report, &page, None).len(), 1, "{:?}", report.problems);
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert_eq!(
        report.records_checked, 5,
        "page 0's records are still checked"
    );
}

#[test]
fn size_mismatch_and_truncation_name_the_shard() {
    let published = dataset();
    let grown = published.receipts[0].data_uri.clone();
    let truncated = published.receipts[2].metadata_uri.clone();
    let mut bytes = std::fs::read(published.file(&grown)).unwrap();
    bytes.extend_from_slice(b"tail");
    std::fs::write(published.file(&grown), bytes).unwrap();
    let bytes = std::fs::read(published.file(&truncated)).unwrap();
    std::fs::write(published.file(&truncated), &bytes[..bytes.len() / 2]).unwrap();
    let report = check(published.root(), NORMAL);
    let grown_problems = find(&report, &grown, None);
    assert_eq!(grown_problems.len(), 1, "{:?}", report.problems);
    assert!(
        grown_problems[0].rule.contains("stored_bytes"),
        "{:?}",
        grown_problems
    );
    assert_eq!(
        find(&report, &truncated, None).len(),
        1,
        "{:?}",
        report.problems
    );
    // The records of those shards are not re-reported one by one.
    assert_eq!(report.problems.len(), 2, "{:?}", report.problems);
    assert_eq!(report.records_checked, 2);
}

#[test]
fn flipped_byte_in_a_data_chunk_names_the_ordinal() {
    let published = dataset();
    let shard = published.receipts[2].data_uri.clone();
    flip_in_record(&published, &shard, 1);
    let report = check(published.root(), NORMAL);
    // Shard 2 starts at ordinal 5: physical record 1 is ordinal 6.
    assert_eq!(
        find(&report, &shard, Some(6)).len(),
        1,
        "{:?}",
        report.problems
    );
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    // Deep verification also sees it in the chunk walk.
    let deep = check(published.root(), DEEP);
    assert_eq!(find(&deep, &shard, Some(6)).len(), 1);
    assert!(
        find(&deep, &shard, None)
            .iter()
            .any(|p| p.rule.contains("hash mismatch")),
        "{:?}",
        deep.problems
    );
    assert_eq!(deep.problems.len(), 2, "{:?}", deep.problems);
}

#[test]
fn missing_shard_is_one_problem() {
    let published = dataset();
    let missing = published.receipts[1].metadata_uri.clone();
    std::fs::remove_file(published.file(&missing)).unwrap();
    let report = check(published.root(), NORMAL);
    let found = find(&report, &missing, None);
    assert_eq!(found.len(), 1, "{:?}", report.problems);
    assert!(found[0].rule.contains("not found"), "{:?}", found);
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert_eq!(report.records_checked, 7);
}

/// Publishes hand-made entries (with `publish_entries`) in a fresh directory.
fn publish_by_hand(
    make: impl FnOnce(&dyn ObjectStore, &ShardReceipt, &ShardReceipt) -> Vec<ShardEntry>,
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let options = ShardOptions::default();
    let x = write_shard(store.as_ref(), (0..3).map(record), "x", 0, &options).unwrap();
    let y = write_shard(store.as_ref(), (10..13).map(record), "y", 0, &options).unwrap();
    let entries = make(store.as_ref(), &x, &y);
    publish_entries(store.as_ref(), entries, &PublishOptions::new("ds", "s")).unwrap();
    dir
}

/// The reference for a receipt's location (below the dataset root: from `objects/` on).
fn reference(uri: &str, bytes: u64) -> ObjectRef {
    let relative = &uri[uri.find("objects/").unwrap()..];
    ObjectRef::new(RelPath::new(relative).unwrap(), bytes)
}

#[test]
fn row_and_record_disagreement_is_reported_per_ordinal() {
    let dir = publish_by_hand(|_, x, y| {
        vec![ShardEntry::new(
            0,
            reference(&x.data_uri, x.data_bytes),
            reference(&y.metadata_uri, y.metadata_bytes),
            3,
        )]
    });
    let report = check(dir.path(), NORMAL);
    assert_eq!(report.problems.len(), 3, "{:?}", report.problems);
    for (ordinal, problem) in report.problems.iter().enumerate() {
        assert_eq!(problem.ordinal, Some(ordinal as u64));
        assert!(problem.rule.contains("disagree"), "{problem}");
        assert!(problem.object.contains("objects/data/"), "{problem}");
    }
}

#[test]
fn out_of_range_record_indices_name_the_page_and_ordinal() {
    let dir = publish_by_hand(|_, x, _| {
        let mut entry = ShardEntry::new(
            0,
            reference(&x.data_uri, x.data_bytes),
            reference(&x.metadata_uri, x.metadata_bytes),
            3,
        );
        entry.record_indices = Some(vec![2, 7, 0]);
        vec![entry]
    });
    let report = check(dir.path(), NORMAL);
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let problem = &report.problems[0];
    assert_eq!(problem.ordinal, Some(1));
    assert!(problem.object.contains("manifests/"), "{problem}");
    assert!(problem.rule.contains("record_indices[1] = 7"), "{problem}");
    assert_eq!(report.records_checked, 2);
}

#[test]
fn several_problems_are_all_reported_by_the_cli() {
    let published = dataset();
    let grown = published.receipts[0].data_uri.clone();
    let missing = published.receipts[1].metadata_uri.clone();
    let flipped = published.receipts[2].data_uri.clone();
    let mut bytes = std::fs::read(published.file(&grown)).unwrap();
    bytes.push(0);
    std::fs::write(published.file(&grown), bytes).unwrap();
    std::fs::remove_file(published.file(&missing)).unwrap();
    flip_in_record(&published, &flipped, 3);
    let report = check(published.root(), NORMAL);
    assert_eq!(report.problems.len(), 3, "{:?}", report.problems);
    assert_eq!(find(&report, &grown, None).len(), 1);
    assert_eq!(find(&report, &missing, None).len(), 1);
    assert_eq!(find(&report, &flipped, Some(8)).len(), 1);

    let out = Command::new(env!("CARGO_BIN_EXE_sds"))
        .arg("verify")
        .arg(published.root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(lines
        .iter()
        .any(|l| l.contains(&grown) && l.contains("stored_bytes")));
    assert!(lines
        .iter()
        .any(|l| l.contains(&missing) && l.contains("not found")));
    assert!(lines
        .iter()
        .any(|l| l.contains(&flipped) && l.contains("ordinal 8:")));
    assert!(lines[3].starts_with("3 problems"), "{stdout}");
}

#[test]
fn cli_clean_dataset_exits_zero_and_unopenable_exits_one() {
    let published = dataset();
    let out = Command::new(env!("CARGO_BIN_EXE_sds"))
        .args(["verify", "--deep"])
        .arg(published.root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with("ok (deep verification): 9 of 9 records"),
        "{stdout}"
    );

    std::fs::remove_file(published.file("root.json")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sds"))
        .arg("verify")
        .arg(published.root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("root.json: cannot open the dataset"),
        "{stdout}"
    );
}
