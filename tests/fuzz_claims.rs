//! The `claims` fuzz target (`fuzz/claims.rs`) checked on its committed seeds: each runs
//! without a finding, and the walk reaches what it is meant to reach (the first and last
//! records, their files, `by-id/`), or stops where the mount must refuse.

#[path = "../fuzz/common.rs"]
mod common;

use common::claims::{run_logged, sections};

fn seed(name: &str) -> Vec<u8> {
    let path = format!("{}/fuzz/seeds/claims/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Runs a seed; its log, after asserting that it opened and broke no property.
fn walk(name: &str) -> Vec<String> {
    let (outcome, log) = run_logged(&seed(name));
    assert_eq!(outcome, Ok(true), "{name}: {log:#?}");
    log
}

fn line<'a>(log: &'a [String], prefix: &str) -> &'a str {
    log.iter()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no step {prefix:?} in {log:#?}"))
}

#[test]
fn every_seed_runs_without_a_finding() {
    let names = common::seed_names("claims");
    assert!(names.len() >= 20, "{names:?}");
    for name in names {
        let input = seed(&name);
        assert!(!sections(&input).is_empty(), "{name} replaces nothing");
        let (outcome, log) = run_logged(&input);
        assert!(outcome.is_ok(), "{name}: {outcome:?}\n{log:#?}");
    }
}

#[test]
fn the_published_dataset_is_walked_end_to_end() {
    let log = walk("snapshot-as-published");
    // 8 records (3 + 5): ordinals 0-7, one digit; ids seed-0 .. seed-7, scene "scene".
    for step in [
        "open: ok",
        "check_servable: ok",
        "lookup records/0: ok",
        "lookup records/7: ok",
        "read records/0/record.json at 0: ok",
        "read records/7/fields/rx/iq.raw at 0: ok",
        "readlink seed-0: ok",
        "lookup seed-0: ok",
        "lookup /by-scene: ok",
    ] {
        line(&log, step);
    }
    assert!(
        log.iter().all(|l| l.ends_with(": ok")),
        "a step of the published dataset failed: {log:#?}"
    );
}

#[test]
fn a_count_beyond_the_inode_space_is_refused_before_any_walk() {
    let log = walk("record-count-2p36-plus-1");
    let refused = line(&log, "check_servable: ");
    assert!(refused.contains("record_count 68719476737"), "{refused}");
    assert!(!log.iter().any(|l| l.starts_with("lookup")), "{log:#?}");
}

#[test]
fn the_last_numberable_ordinal_is_listed_and_by_id_is_refused_by_price() {
    let log = walk("record-count-2p36");
    line(&log, "lookup records/68719476735: ");
    line(&log, "lookup records/00000000000: ok");
    assert!(
        log.iter()
            .any(|l| l.contains("more than the memory budget of 16,777,216 bytes")),
        "by-id/ not refused by its price: {log:#?}"
    );
}

#[test]
fn a_claim_about_an_unchanged_object_reaches_its_size_check() {
    // Page 0 says its data shard holds 10^15 bytes; the harness reseals the snapshot's sum for
    // the changed page, not the claim itself, so the shard's own size check refuses it.
    let log = walk("stored-bytes-1e15");
    let refused = line(&log, "read records/0/fields/label.npy at 0: ");
    assert!(
        refused.contains("size 131072 differs from the 1000000000000000 bytes"),
        "{refused}"
    );
    assert!(
        !log.iter().any(|l| l.contains("sum of its shards")),
        "{log:#?}"
    );
}
