//! Crash test of publication: `sds write-shard` and `sds publish` (distributed), and `sds
//! create` (one command) and `sds annotate` (sequential and racing publishers), run as child processes and are killed with SIGKILL after random
//! (seeded) delays, several times per step, then re-run to completion. After every kill no
//! `root.json` may exist whose graph is broken (a reader never sees a root pointing at a
//! missing object); at the end every run must pass `sds verify --deep` and hold exactly the
//! expected records, in order: none lost, none duplicated.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::datasets::*;
use common::mount::MountGuard;
use rand::{Rng, SeedableRng};
use sdsfs::dataset::{verify_store, Dataset, VerifyOptions};

const SDS: &str = env!("CARGO_BIN_EXE_sds");
/// Work units of the fan-out: ranges of the source's records.
const RANGES: [(u64, u64); 4] = [(0, 4), (4, 9), (9, 10), (10, 14)];

fn spawn(args: &[&str]) -> Child {
    Command::new(SDS)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Starts `sds ARGS` and SIGKILLs it after a random delay below `max_micros`: whether it was
/// still running when killed, and the delay.
fn kill_after_random_delay(
    args: &[&str],
    rng: &mut rand::rngs::StdRng,
    max_micros: u64,
) -> (bool, Duration) {
    let mut child = spawn(args);
    let delay = Duration::from_micros(rng.gen_range(0..max_micros));
    std::thread::sleep(delay);
    let finished = child.try_wait().unwrap().is_some();
    child.kill().ok(); // SIGKILL
    child.wait().unwrap();
    (!finished, delay)
}

/// Runs `sds ARGS` to completion; it must succeed.
fn sds_succeeds<S: AsRef<std::ffi::OsStr>>(args: &[S], when: &str) {
    let out = Command::new(SDS).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{when}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `sds verify ARGS` passes (its report, on stdout, is the failure message).
fn assert_verify_passes<S: AsRef<std::ffi::OsStr>>(args: &[S], when: &str) {
    let verify = Command::new(SDS).arg("verify").args(args).output().unwrap();
    assert!(
        verify.status.success(),
        "{when}: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

/// `sds verify --deep ROOT` passes.
fn assert_verifies_deep(root: &str, when: &str) {
    assert_verify_passes(&["--deep", root], when);
}

/// Whatever state a kill left: if `root.json` exists, the whole graph it references is there
/// and valid.
fn assert_never_dangling(root: &Path, when: &str) {
    if !root.join("root.json").exists() {
        return;
    }
    let report = verify_store(local_store(root), VerifyOptions { deep: false });
    assert!(
        report.is_ok(),
        "{when}: root.json visible with {:?}",
        report.problems
    );
}

/// Runs `args` up to `kills` times killed after a random delay, then once to completion.
fn run_with_crashes(
    args: &[&str],
    kills: usize,
    rng: &mut rand::rngs::StdRng,
    root: &Path,
) -> usize {
    let mut killed = 0;
    for _ in 0..kills {
        let (was_running, delay) = kill_after_random_delay(args, rng, 50_000);
        killed += usize::from(was_running);
        assert_never_dangling(root, &format!("after killing {args:?} at {delay:?}"));
    }
    sds_succeeds(args, &format!("{args:?}"));
    assert_never_dangling(root, &format!("after completing {args:?}"));
    killed
}

#[test]
fn killed_publications_converge() {
    let source = publish_dataset(&[5, 4, 5], 2);
    assert_eq!(source.records.len() as u64, RANGES[3].1);
    let src = source.root().to_str().unwrap().to_string();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5d5_c4a5);
    let started = Instant::now();
    let mut iterations = 0;
    let mut kills = 0;
    while iterations < 40 && started.elapsed() < Duration::from_secs(40) {
        iterations += 1;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("out");
        let root_s = root.to_str().unwrap().to_string();
        let mut receipt_files = Vec::new();
        for (i, (a, b)) in RANGES.iter().enumerate() {
            let receipt = tmp.path().join(format!("r{i}.json"));
            let range = format!("{a}:{b}");
            let work = format!("w{i}");
            let receipt_s = receipt.to_str().unwrap().to_string();
            let args = [
                "write-shard",
                &root_s,
                "--work-id",
                &work,
                "--from-dataset",
                &src,
                "--range",
                &range,
                "--receipt-out",
                &receipt_s,
            ];
            kills += run_with_crashes(&args, rng.gen_range(0..3), &mut rng, &root);
            receipt_files.push(receipt_s);
        }
        let mut args = vec![
            "publish",
            &root_s,
            "--dataset-id",
            "crash",
            "--snapshot-id",
            "s1",
            "--expected-work-ids",
            "w0,w1,w2,w3",
            "--receipts",
        ];
        args.extend(receipt_files.iter().map(String::as_str));
        kills += run_with_crashes(&args, rng.gen_range(1..4), &mut rng, &root);

        assert_verifies_deep(&root_s, &format!("iteration {iterations}"));
        let dataset = Dataset::open(local_store(&root), Default::default()).unwrap();
        let records: Vec<_> = dataset.iter_records().map(Result::unwrap).collect();
        assert_eq!(
            records, source.records,
            "iteration {iterations}: lost or duplicated records"
        );
    }
    eprintln!("{iterations} iterations, {kills} processes killed before finishing");
    assert!(iterations >= 5);
    assert!(kills > 0, "no kill landed mid-run; the delays are too long");
}

/// `sds verify` (the command, every layer's rules) of whatever a kill left, when `root.json`
/// exists.
fn assert_verifies_if_published(root: &Path, when: &str) {
    if !root.join("root.json").exists() {
        return;
    }
    assert_verify_passes(
        &[root],
        &format!("{when}: root.json visible but sds verify fails"),
    );
}

#[test]
fn killed_creates_converge() {
    let demo = common::repo_root().join("fixtures/demo");
    let expected: Vec<_> = Dataset::open(local_store(&demo), Default::default())
        .unwrap()
        .iter_records()
        .map(Result::unwrap)
        .collect();
    // The input: the demo's records/ copied out of a mount, as a user would.
    let input = tempfile::tempdir().unwrap();
    {
        let mount = MountGuard::mount(&demo, &[]);
        let status = Command::new("cp")
            .arg("-r")
            .arg(mount.path("records"))
            .arg(input.path())
            .status()
            .unwrap();
        assert!(status.success(), "cp -r failed");
    }
    let input_s = input.path().to_str().unwrap().to_string();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x00c4_ea7e);
    let started = Instant::now();
    let (mut iterations, mut kills, mut published_kills) = (0, 0, 0);
    while iterations < 30 && started.elapsed() < Duration::from_secs(12) {
        iterations += 1;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("out");
        let root_s = root.to_str().unwrap().to_string();
        let jobs = rng.gen_range(1..4).to_string();
        let per_shard = rng.gen_range(1..5).to_string();
        let args = [
            "create",
            &root_s,
            "--from-dir",
            &input_s,
            "--jobs",
            &jobs,
            "--records-per-shard",
            &per_shard,
            "--shards-per-manifest",
            "2",
            "-q",
        ];
        for _ in 0..rng.gen_range(1..5) {
            let (was_running, delay) = kill_after_random_delay(&args, &mut rng, 130_000);
            if was_running {
                kills += 1;
                published_kills += usize::from(root.join("root.json").exists());
            }
            let when = format!("iteration {iterations}: after killing sds create at {delay:?}");
            assert_verifies_if_published(&root, &when);
        }
        sds_succeeds(&args, &format!("iteration {iterations}"));
        assert_verifies_deep(&root_s, &format!("iteration {iterations}"));
        let dataset = Dataset::open(local_store(&root), Default::default()).unwrap();
        let records: Vec<_> = dataset.iter_records().map(Result::unwrap).collect();
        assert_eq!(
            records, expected,
            "iteration {iterations}: lost or duplicated records"
        );
    }
    eprintln!(
        "{iterations} iterations, {kills} sds create processes killed before finishing \
         ({published_kills} of them after root.json was written)"
    );
    assert!(iterations >= 5);
    assert!(kills > 0, "no kill landed mid-run; the delays are too long");
}

/// The rows of set `set` for a dataset of `records` records: every record gets a row whose
/// values name the set and the ordinal, so any lost, duplicated or misplaced row shows.
fn annotation_rows(dir: &Path, set: &str, records: usize) -> String {
    let rows: String = (0..records)
        .map(|i| {
            format!(
                "{{\"source_index\": {i}, \"status\": \"success\", \
                 \"values\": {{\"set\": \"{set}\", \"ordinal\": {i}, \"pad\": \"{}\"}}}}\n",
                "x".repeat(200 + i)
            )
        })
        .collect();
    let path = dir.join(format!("{set}.jsonl"));
    std::fs::write(&path, rows).unwrap();
    path.to_str().unwrap().to_string()
}

/// Every set named is in the catalog, with one row per record holding its own values.
fn assert_sets_exact(root: &Path, sets: &[&str], records: usize, when: &str) {
    let dataset = Dataset::open(local_store(root), Default::default()).unwrap();
    let catalog = sdsfs::annotations::read_catalog(&dataset).unwrap();
    for set in sets {
        let Some(Ok(view)) = catalog.sets.get(*set) else {
            panic!("{when}: set {set} lost from the catalog");
        };
        for ordinal in 0..records as u64 {
            let row = view.get(&dataset, ordinal).unwrap();
            let values =
                sdsfs::format::json::to_compact(&sdsfs::format::json::Value::Object(row.values));
            let pad = "x".repeat(200 + ordinal as usize);
            let expected = format!("{{\"ordinal\":{ordinal},\"pad\":\"{pad}\",\"set\":\"{set}\"}}");
            assert!(
                values == expected,
                "{when}: set {set} ordinal {ordinal} holds {values}"
            );
        }
    }
}

#[test]
fn killed_annotations_converge() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xa770_7a7e);
    let started = Instant::now();
    let (mut iterations, mut kills, mut concurrent_kills) = (0, 0, 0);
    while iterations < 30 && started.elapsed() < Duration::from_secs(20) {
        iterations += 1;
        let published = publish_dataset(&[6, 5, 6], 2);
        let records = published.records.len();
        let root = published.root().to_path_buf();
        let root_s = root.to_str().unwrap().to_string();
        let rows_dir = tempfile::tempdir().unwrap();
        let sets = ["alpha", "beta", "gamma"];
        let rows: Vec<String> = sets
            .iter()
            .map(|set| annotation_rows(rows_dir.path(), set, records))
            .collect();
        let args_of = |i: usize| -> Vec<String> {
            let per_shard = (1 + i * 2).to_string();
            [
                "annotate",
                &root_s,
                "--name",
                sets[i],
                "--rows",
                &rows[i],
                "--records-per-shard",
                &per_shard,
            ]
            .map(String::from)
            .to_vec()
        };
        // Sets published one after another, each killed a few times first.
        for i in 0..2 {
            let args = args_of(i);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            for _ in 0..rng.gen_range(1..4) {
                let (was_running, delay) = kill_after_random_delay(&args, &mut rng, 60_000);
                kills += usize::from(was_running);
                let when =
                    format!("iteration {iterations}: after killing annotate {i} at {delay:?}");
                assert_verifies_if_published(&root, &when);
            }
            sds_succeeds(&args, &format!("iteration {iterations}: annotate {i}"));
        }
        // Two publishers racing on the catalog, one of them killed, then re-run.
        let racing: Vec<Vec<String>> = vec![args_of(2), args_of(1)];
        let mut children: Vec<Child> = racing
            .iter()
            .map(|a| spawn(&a.iter().map(String::as_str).collect::<Vec<_>>()))
            .collect();
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..60_000)));
        let victim = rng.gen_range(0..children.len());
        let finished = children[victim].try_wait().unwrap().is_some();
        children[victim].kill().ok();
        concurrent_kills += usize::from(!finished);
        for child in &mut children {
            child.wait().unwrap();
        }
        assert_verifies_if_published(&root, &format!("iteration {iterations}: racing kill"));
        for args in &racing {
            sds_succeeds(
                args,
                &format!("iteration {iterations}: re-run after the race"),
            );
        }
        assert_verifies_deep(&root_s, &format!("iteration {iterations}"));
        assert_sets_exact(&root, &sets, records, &format!("iteration {iterations}"));
    }
    eprintln!(
        "{iterations} iterations, {kills} sds annotate processes killed before finishing, \
         {concurrent_kills} of the racing ones"
    );
    assert!(iterations >= 5);
    assert!(kills > 0, "no kill landed mid-run; the delays are too long");
}
