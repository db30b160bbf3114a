//! The catalog race: eight `sds annotate` processes publish eight different sets at the same
//! moment, several rounds in a row, against one local dataset. Every set must be in the final
//! catalog, and the revisions the publishers committed must form one chain (each the previous
//! plus exactly one set), so no update was lost.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

use common::datasets::publish_dataset;
use sdsfs::format::documents::{CatalogPointer, Revision};
use sdsfs::format::json::JsonLimits;

const PROCESSES: usize = 8;
const ROUNDS: usize = 4;

fn field<'a>(stdout: &'a str, key: &str) -> Option<&'a str> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
}

#[test]
fn eight_publishers_at_once_lose_nothing() {
    let published = publish_dataset(&[3, 4], 10);
    let root = published.root().to_path_buf();
    let rows = root.join("rows.jsonl");
    std::fs::write(
        &rows,
        "{\"source_index\": 1, \"status\": \"failed\", \"detail_status\": \"x\"}\n",
    )
    .unwrap();
    let mut committed: BTreeMap<String, String> = BTreeMap::new(); // set → revision
    let mut attempts = 0u64;
    for round in 0..ROUNDS {
        let children: Vec<(String, std::process::Child)> = (0..PROCESSES)
            .map(|p| {
                let name = format!("r{round}-p{p}");
                let child = Command::new(env!("CARGO_BIN_EXE_sds"))
                    .args([
                        "annotate",
                        root.to_str().unwrap(),
                        "--name",
                        &name,
                        "--rows",
                    ])
                    .arg(&rows)
                    .args(["--fill", "skipped", "--records-per-shard", "3"])
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
            let revision = field(&stdout, "revision")
                .expect("revision line")
                .to_string();
            attempts += field(&stdout, "catalog_attempts")
                .unwrap()
                .parse::<u64>()
                .unwrap();
            committed.insert(name, revision);
        }
    }
    let total = PROCESSES * ROUNDS;
    eprintln!("{total} publications took {attempts} compare-and-swap attempts");

    // Every set is in the final catalog.
    let pointer = CatalogPointer::parse(
        &std::fs::read(root.join("annotations/catalog.json")).unwrap(),
        &JsonLimits::CONTROL,
    )
    .unwrap();
    let read_revision = |path: &str| {
        Revision::parse(
            &std::fs::read(root.join(path)).unwrap(),
            &JsonLimits::CONTROL,
        )
        .unwrap()
    };
    let last = read_revision(pointer.revision.path.as_str());
    let names: BTreeSet<&String> = last.sets.keys().collect();
    let expected: BTreeSet<&String> = committed.keys().collect();
    assert_eq!(names, expected);

    // The committed revisions form one chain: sizes 1..=total, each the previous plus its set.
    let mut chain: Vec<(usize, BTreeSet<String>, String)> = committed
        .iter()
        .map(|(name, path)| {
            let sets: BTreeSet<String> = read_revision(path).sets.keys().cloned().collect();
            assert!(sets.contains(name), "{path} lacks its own set {name}");
            (sets.len(), sets, name.clone())
        })
        .collect();
    chain.sort();
    for (i, (size, sets, name)) in chain.iter().enumerate() {
        assert_eq!(
            *size,
            i + 1,
            "revision sizes are not 1..={total}: a revision was lost"
        );
        if i > 0 {
            let previous = &chain[i - 1].1;
            let mut expected = previous.clone();
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

    // And every set reads back through the library.
    let dataset = published.open();
    let catalog = sdsfs::annotations::read_catalog(&dataset).unwrap();
    for (name, set) in &catalog.sets {
        let set = set.as_ref().unwrap_or_else(|e| panic!("{name}: {e}"));
        let rows: Vec<_> = set.iter(&dataset).map(Result::unwrap).collect();
        assert_eq!(rows.len(), 7);
        assert_eq!(rows[1].detail_status.as_deref(), Some("x"));
    }
}
