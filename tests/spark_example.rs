//! The Spark fan-out example (`examples/spark/publish_with_spark.py`): always through its
//! `--no-spark` driver path (same task function, local thread pool), and through PySpark in
//! local mode when `pyspark` and `java` are available here (skipped, with a message, when not).
//! Both results must pass `sds verify --deep` and hold the source's records in order.

mod common;

use std::path::Path;
use std::process::Command;

use common::datasets::*;
use sdsfs::dataset::Dataset;

const SDS: &str = env!("CARGO_BIN_EXE_sds");

fn python() -> String {
    std::env::var("SDS_SPARK_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn run_example(source: &Path, out: &Path, extra: &[&str]) {
    let script = common::repo_root().join("examples/spark/publish_with_spark.py");
    let result = Command::new(python())
        .arg(script)
        .args(["--sds", SDS, "--records-per-task", "3"])
        .arg("--source")
        .arg(source)
        .arg("--out")
        .arg(out)
        .args(["--dataset-id", "spark-copy", "--snapshot-id", "s1"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let verify = Command::new(SDS)
        .args(["verify", "--deep"])
        .arg(out)
        .output()
        .unwrap();
    assert!(verify.status.success(), "{verify:?}");
}

fn check_records(source: &Published, out: &Path) {
    let dataset = Dataset::open(local_store(out), Default::default()).unwrap();
    let records: Vec<_> = dataset.iter_records().map(Result::unwrap).collect();
    assert_eq!(records, source.records);
    // 11 records, 3 per task: 4 shards.
    assert_eq!(dataset.snapshot().shard_count, 4);
}

#[test]
fn example_without_spark() {
    let source = publish_dataset(&[6, 5], 2);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    run_example(source.root(), &out, &["--no-spark"]);
    check_records(&source, &out);
    // Re-running the whole job converges.
    run_example(source.root(), &out, &["--no-spark"]);
    check_records(&source, &out);
}

#[test]
fn example_on_spark_local_mode() {
    let has_pyspark = Command::new(python())
        .args(["-c", "import pyspark"])
        .output()
        .is_ok_and(|o| o.status.success());
    let has_java = Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_pyspark || !has_java {
        eprintln!("skipped: the Spark path needs pyspark (pip install pyspark) and java 17");
        return;
    }
    let source = publish_dataset(&[6, 5], 2);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    run_example(source.root(), &out, &[]);
    check_records(&source, &out);
}
