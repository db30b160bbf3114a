//! The catalog race, for any backend: `sds annotate` processes publishing different sets
//! against one dataset at the same moment, and the check that no set was lost.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};

use sdsfs::format::documents::{CatalogPointer, Revision};
use sdsfs::format::json::JsonLimits;

/// What the publishers of a race committed.
pub struct RaceOutcome {
    /// Set name → the catalog revision its publisher committed.
    pub committed: BTreeMap<String, String>,
    /// Compare-and-swap attempts, summed over the publishers.
    pub attempts: u64,
}

fn field<'a>(stdout: &'a str, key: &str) -> Option<&'a str> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
}

/// Runs `rounds` rounds of `processes` simultaneous `sds annotate DATASET --name rR-pP --rows
/// ROWS` publishers (with `env`), each round waiting for the previous one.
pub fn race_publishers(
    dataset: &str,
    env: &[(&str, String)],
    rows: &Path,
    processes: usize,
    rounds: usize,
) -> RaceOutcome {
    let mut committed = BTreeMap::new();
    let mut attempts = 0u64;
    for round in 0..rounds {
        let children: Vec<(String, std::process::Child)> = (0..processes)
            .map(|p| {
                let name = format!("r{round}-p{p}");
                let child = Command::new(env!("CARGO_BIN_EXE_sds"))
                    .args(["annotate", dataset, "--name", &name, "--rows"])
                    .arg(rows)
                    .args(["--fill", "skipped", "--records-per-shard", "3"])
                    .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                (name, child)
            })
            .collect();
        for (name, child) in children {
            let out = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let revision = field(&stdout, "revision").expect("revision line");
            attempts += field(&stdout, "catalog_attempts")
                .unwrap()
                .parse::<u64>()
                .unwrap();
            committed.insert(name, revision.to_string());
        }
    }
    eprintln!(
        "{} publications took {attempts} compare-and-swap attempts",
        committed.len()
    );
    RaceOutcome {
        committed,
        attempts,
    }
}

/// Checks, reading dataset objects through `read` (a dataset-relative path → bytes), that the
/// final catalog holds exactly the committed sets and that the committed revisions form one
/// chain: sizes 1..=n, each the previous plus its own set, so no update was lost.
pub fn assert_no_set_lost(outcome: &RaceOutcome, read: impl Fn(&str) -> Vec<u8>) {
    let committed = &outcome.committed;
    let pointer =
        CatalogPointer::parse(&read("annotations/catalog.json"), &JsonLimits::CONTROL).unwrap();
    let read_revision = |path: &str| Revision::parse(&read(path), &JsonLimits::CONTROL).unwrap();
    let last = read_revision(pointer.revision.path.as_str());
    let names: BTreeSet<&String> = last.sets.keys().collect();
    let expected: BTreeSet<&String> = committed.keys().collect();
    assert_eq!(names, expected, "the final catalog lost a set");

    let mut chain: Vec<(usize, BTreeSet<String>, String)> = committed
        .iter()
        .map(|(name, path)| {
            let sets: BTreeSet<String> = read_revision(path).sets.keys().cloned().collect();
            assert!(sets.contains(name), "{path} lacks its own set {name}");
            (sets.len(), sets, name.clone())
        })
        .collect();
    chain.sort();
    let total = committed.len();
    for (i, (size, sets, name)) in chain.iter().enumerate() {
        assert_eq!(
            *size,
            i + 1,
            "revision sizes are not 1..={total}: a revision was lost"
        );
        if i > 0 {
            let mut expected = chain[i - 1].1.clone();
            expected.insert(name.clone());
            assert_eq!(
                sets, &expected,
                "revision for {name} does not extend its predecessor"
            );
        }
    }
    assert_eq!(
        chain.last().map(|c| c.1.clone()),
        Some(last.sets.keys().cloned().collect())
    );
}

/// The one-row annotation input every racing publisher uses, written into `dir`.
pub fn race_rows(dir: &Path) -> std::path::PathBuf {
    let rows = dir.join("rows.jsonl");
    std::fs::write(
        &rows,
        "{\"source_index\": 1, \"status\": \"failed\", \"detail_status\": \"x\"}\n",
    )
    .unwrap();
    rows
}

/// Every set in the catalog reads back through the library: `sets` of them, one row per
/// record, row 1 the failed one of [`race_rows`].
pub fn assert_sets_read_back(dataset: &sdsfs::dataset::Dataset, sets: usize) {
    let catalog = sdsfs::annotations::read_catalog(dataset).unwrap();
    assert_eq!(catalog.sets.len(), sets);
    for (name, set) in &catalog.sets {
        let set = set.as_ref().unwrap_or_else(|e| panic!("{name}: {e}"));
        let rows: Vec<_> = set.iter(dataset).map(Result::unwrap).collect();
        assert_eq!(rows.len() as u64, dataset.len());
        assert_eq!(rows[1].detail_status.as_deref(), Some("x"));
    }
}
