//! The Spark job (`examples/spark/publish_with_spark.py`) run on real Spark: PySpark from the
//! test venv (`scripts/setup-test-env` installs it) with Java 17, in local mode (`local[2,4]`:
//! two threads, four attempts per task) and, for speculation, on a standalone cluster of two
//! workers on distinct loopback hosts (`tests/python/spark_cluster.py`). Nothing is skipped: a
//! missing pyspark or java fails the tests.
//!
//! The input is six SigMF recordings; the single-process publication they are compared with is
//! `sds create --jobs 1` of the same files. Every run must end in a dataset that `sds verify
//! --deep` accepts and the library reads record for record as it reads that one (so each
//! record is there exactly once, in order), whose shards are the highest attempt of each work
//! id, and whose `root.json` appeared only once every shard object it names existed. Spark's
//! own record of the task attempts (from its event log, printed by the job) is written to the
//! test output and checked: the injected failure was retried as attempt 1, the straggler got a
//! speculative copy.

mod common;
use common::library;

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use library::{dump, CURRENT};
use sha2::{Digest, Sha256};

const SDS: &str = env!("CARGO_BIN_EXE_sds");
/// Records per Spark task in the range jobs (24 records: 5 tasks, the last with 4).
const PER_TASK: usize = 5;
const RANGE_TASKS: usize = 5;

fn s(path: &Path) -> String {
    path.to_str().expect("UTF-8 path").to_string()
}

/// Writes straight to the test's stderr, past the harness's capture, so the attempts show in
/// every run's output.
fn show(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// Six SigMF recordings of 64 cf32 samples in `dir`.
fn recordings(dir: &Path) -> Vec<String> {
    (0..6)
        .map(|i| {
            let data: Vec<u8> = (0..128)
                .flat_map(|k: usize| (((k * 31 + i * 17) % 241) as f32 * 0.25 - 30.0).to_le_bytes())
                .collect();
            std::fs::write(dir.join(format!("rec{i}.sigmf-data")), data).unwrap();
            let meta = format!(
                r#"{{"global": {{"core:datatype": "cf32_le", "core:sample_rate": 2000000.0, "core:version": "1.2.0"}},
  "captures": [{{"core:sample_start": 0, "core:frequency": {}.0}}], "annotations": []}}"#,
                900_000_000 + i * 1000
            );
            let path = dir.join(format!("rec{i}.sigmf-meta"));
            std::fs::write(&path, meta).unwrap();
            s(&path)
        })
        .collect()
}

/// The input and its single-process publication (`sds create --jobs 1`): 24 records.
struct Input {
    _dir: tempfile::TempDir,
    sigmf: Vec<String>,
    reference: PathBuf,
}

fn input() -> Input {
    let dir = tempfile::tempdir().unwrap();
    let sigmf = recordings(dir.path());
    let reference = dir.path().join("reference");
    let out = Command::new(SDS)
        .args([
            "create",
            "--quiet",
            "--jobs",
            "1",
            "--segment-samples",
            "16",
        ])
        .args([
            "--records-per-shard",
            "7",
            "--dataset-id",
            "ref",
            "--snapshot-id",
            "s1",
        ])
        .arg(&reference)
        .arg("--from-sigmf")
        .args(&sigmf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    Input {
        _dir: dir,
        sigmf,
        reference,
    }
}

/// `publish_with_spark.py ARGS` with the test venv's interpreter (pyspark, signal_dataset).
fn job_command(args: &[String]) -> Command {
    let mut command = Command::new(common::python());
    command
        .arg(common::repo_root().join("examples/spark/publish_with_spark.py"))
        .args(args)
        .env_remove("PYSPARK_PYTHON")
        .env_remove("SPARK_HOME")
        .env(RUN_MARK, marker(args));
    command
}

/// Every process of a job inherits `RUN_MARK=<its output>` (the driver, its JVM, the Python
/// workers, the `sds` workers), so a test can tell its own processes from other tests'.
const RUN_MARK: &str = "SDS_SPARK_TEST_RUN";

fn marker(args: &[String]) -> String {
    let at = args.iter().position(|a| a == "--out" || a == "--dataset");
    at.and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_default()
}

/// Runs the job to completion; shows and returns its stdout (Spark's task attempts, the
/// receipts kept).
fn run_job(what: &str, args: &[String]) -> String {
    let out = job_command(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    show(&format!("--- {what}\n{stdout}"));
    assert!(
        out.status.success(),
        "{what}: the Spark job failed ({}); is pyspark installed (scripts/setup-test-env) and \
         java 17 on PATH?\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn words(items: &[&str]) -> Vec<String> {
    items.iter().map(|w| w.to_string()).collect()
}

/// The arguments of a range job over `source` into `out`.
fn range_job(source: &Path, out: &Path, worker: &str, publisher: &str) -> Vec<String> {
    let mut args = words(&["publish", "--sds", SDS, "--worker", worker, "--publisher"]);
    args.push(publisher.into());
    args.extend(words(&["--dataset-id", "spark", "--snapshot-id", "s1"]));
    args.extend(["--source".into(), s(source), "--out".into(), s(out)]);
    args.extend(["--records-per-task".into(), PER_TASK.to_string()]);
    args
}

/// One task attempt as Spark's event log tells it.
#[derive(Debug)]
struct SparkAttempt {
    work_id: String,
    attempt: u64,
    speculative: bool,
    end: String,
    host: String,
}

fn spark_attempts(stdout: &str) -> Vec<SparkAttempt> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("spark task attempt "))
        .map(|json| {
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            SparkAttempt {
                work_id: v["work_id"].as_str().unwrap_or_default().to_string(),
                attempt: v["attempt"].as_u64().unwrap_or(u64::MAX),
                speculative: v["speculative"].as_bool().unwrap_or(false),
                end: v["end"].as_str().unwrap_or_default().to_string(),
                host: v["host"].as_str().unwrap_or_default().to_string(),
            }
        })
        .collect()
}

/// Watches a dataset root for `root.json`: the objects that existed the instant it appeared.
struct RootWatch {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Option<BTreeSet<String>>>,
}

impl RootWatch {
    fn start(root: &Path) -> RootWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let root = root.to_path_buf();
        let flag = stop.clone();
        let handle = std::thread::spawn(move || loop {
            if root.join("root.json").exists() {
                return Some(files_below(&root.join("objects")));
            }
            if flag.load(Ordering::Relaxed) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        });
        RootWatch { stop, handle }
    }

    /// The objects present when root.json first appeared (None: it never did).
    fn finish(self) -> Option<BTreeSet<String>> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

fn files_below(dir: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(rel) = path.strip_prefix(dir.parent().unwrap()) {
                found.insert(s(rel));
            }
        }
    }
    found
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The data object of every shard, in order, from the published documents.
fn shard_paths(root: &Path) -> Vec<(String, String)> {
    let root_doc = read_json(&root.join("root.json"));
    let snapshot = read_json(&root.join(root_doc["snapshot"]["path"].as_str().unwrap()));
    let mut shards = Vec::new();
    for page in snapshot["manifests"].as_array().unwrap() {
        let manifest = read_json(&root.join(page["object"]["path"].as_str().unwrap()));
        for shard in manifest["shards"].as_array().unwrap() {
            shards.push((
                shard["data"]["path"].as_str().unwrap().to_string(),
                shard["metadata"]["path"].as_str().unwrap().to_string(),
            ));
        }
    }
    shards
}

/// Where a shard of work id `w`, attempt `a` lives (`h = sha256("w:a")`).
fn shard_path(work_id: &str, attempt: u64) -> String {
    let h = hex::encode(Sha256::digest(format!("{work_id}:{attempt}").as_bytes()));
    format!("objects/data/{}/{h}.arrayrecord", &h[..2])
}

/// Everything every run must end with (see the module docs); `kept` is the attempt each work
/// id's shard must come from, in work-id order.
fn check_published(
    out: &Path,
    input: &Input,
    seen_at_root: Option<BTreeSet<String>>,
    kept: &[u64],
) {
    let verify = Command::new(SDS)
        .args(["verify", "--deep"])
        .arg(out)
        .output()
        .unwrap();
    assert!(verify.status.success(), "{verify:?}");
    // The library reads both the same, record for record (canonical JSON of every record).
    assert_eq!(
        dump(CURRENT, out, "records"),
        dump(CURRENT, &input.reference, "records"),
        "{}: the library's records differ from the single-process publication",
        out.display()
    );
    let shards = shard_paths(out);
    let expected: Vec<String> = kept
        .iter()
        .enumerate()
        .map(|(i, a)| shard_path(&format!("w{i:06}"), *a))
        .collect();
    let data: Vec<String> = shards.iter().map(|(d, _)| d.clone()).collect();
    assert_eq!(data, expected, "not the highest attempt of each work id");
    let seen = seen_at_root.expect("root.json never appeared during the run");
    for (data, metadata) in &shards {
        assert!(
            seen.contains(data) && seen.contains(metadata),
            "root.json appeared before {data} / {metadata} existed"
        );
    }
}

/// The job, watched; then the checks. Returns the job's stdout.
fn run_and_check(what: &str, args: &[String], out: &Path, input: &Input, kept: &[u64]) -> String {
    let watch = RootWatch::start(out);
    let stdout = run_job(what, args);
    check_published(out, input, watch.finish(), kept);
    stdout
}

fn attempts_of<'a>(attempts: &'a [SparkAttempt], work_id: &str) -> Vec<&'a SparkAttempt> {
    attempts.iter().filter(|a| a.work_id == work_id).collect()
}

/// One task fails after writing its shard and receipt: Spark retries it as attempt 1, and the
/// publication keeps attempt 1.
fn retried_task(worker: &str, publisher: &str) {
    let input = input();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut args = range_job(&input.reference, &out, worker, publisher);
    args.extend(words(&["--inject-failure", "w000001"]));
    let what = format!("{worker} workers, {publisher} publisher, w000001 fails once");
    let stdout = run_and_check(&what, &args, &out, &input, &[0, 1, 0, 0, 0]);
    let attempts = spark_attempts(&stdout);
    assert_eq!(attempts.len(), RANGE_TASKS + 1, "{attempts:?}");
    let retried: Vec<(u64, &str)> = attempts_of(&attempts, "w000001")
        .iter()
        .map(|a| (a.attempt, a.end.as_str()))
        .collect();
    assert_eq!(retried, [(0, "ExceptionFailure"), (1, "Success")]);
    assert!(
        stdout.contains("receipts w000001: attempts [0, 1], kept 1"),
        "{stdout}"
    );
}

#[test]
fn sds_workers_sds_publisher() {
    retried_task("sds", "sds");
}

#[test]
fn sds_workers_library_publisher() {
    retried_task("sds", "library");
}

#[test]
fn library_workers_sds_publisher() {
    retried_task("library", "sds");
}

#[test]
fn library_workers_library_publisher() {
    retried_task("library", "library");
}

/// SigMF recordings in, two per task (`sds write-shard --from-sigmf`): the records of
/// `sds create` of the same files.
#[test]
fn sigmf_recordings_on_spark() {
    let input = input();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut args = words(&["publish", "--sds", SDS, "--dataset-id", "spark"]);
    args.extend(words(&[
        "--snapshot-id",
        "s1",
        "--files-per-task",
        "2",
        "--out",
    ]));
    args.push(s(&out));
    args.push("--sigmf".into());
    args.extend(input.sigmf.iter().cloned());
    // Segmented as the reference was.
    args.extend(words(&["--segment-samples", "16"]));
    let stdout = run_and_check("SigMF input", &args, &out, &input, &[0, 0, 0]);
    assert_eq!(spark_attempts(&stdout).len(), 3);
}

/// The driver is killed (SIGKILL, its whole process group) once some tasks have finished and
/// while a straggler runs: nothing is published; the re-run completes the same dataset, with
/// the receipts of both runs given to the coordinator.
#[test]
fn driver_killed_then_rerun() {
    let input = input();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let receipts = tmp.path().join("out.receipts");
    let args = range_job(&input.reference, &out, "mixed", "library");
    let mut first = args.clone();
    first.extend(words(&["--inject-slow", "w000004=300"]));
    let watch = RootWatch::start(&out);
    let mut driver = job_command(&first)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let group = KillGroup(driver.id() as i32);
    let finished = wait_for(Duration::from_secs(120), || {
        count_files(&receipts) >= 3 || driver.try_wait().ok().flatten().is_some()
    });
    assert!(
        finished && driver.try_wait().unwrap().is_none(),
        "no tasks finished in time"
    );
    let done_before_kill = count_files(&receipts);
    drop(group);
    let status = driver.wait().unwrap();
    show(&format!(
        "--- driver killed ({status}) after {done_before_kill} receipts\n"
    ));
    wait_for_exit_of(&out);
    assert!(!out.join("root.json").exists(), "a killed driver published");
    assert!(watch.finish().is_none());
    let stdout = run_and_check(
        "re-run after the kill",
        &args,
        &out,
        &input,
        &[0; RANGE_TASKS],
    );
    assert_eq!(spark_attempts(&stdout).len(), RANGE_TASKS);
}

/// The highest attempt of each work id among the receipt files (`W.A.json`), in order.
fn highest_receipts(dir: &Path) -> Vec<u64> {
    let mut kept = vec![0u64; RANGE_TASKS];
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((work, attempt)) = name.strip_suffix(".json").and_then(|n| n.split_once('.'))
        else {
            continue;
        };
        let index: usize = work.trim_start_matches('w').parse().unwrap();
        kept[index] = kept[index].max(attempt.parse().unwrap());
    }
    kept
}

/// SIGKILLs a process group when dropped (a driver and the JVM it started).
struct KillGroup(i32);

impl Drop for KillGroup {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
        unsafe { libc::kill(-self.0, libc::SIGKILL) };
    }
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .count()
        })
        .unwrap_or(0)
}

fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Waits until no process of the job writing `root` is left (the killed run's Python and
/// `sds` workers exit once their JVM is gone), so the run leaves nothing behind.
fn wait_for_exit_of(root: &Path) {
    let mark = format!("{RUN_MARK}={}", s(root));
    let running = || {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("environ")).ok())
            .any(|env| env.split(|b| *b == 0).any(|v| v == mark.as_bytes()))
    };
    assert!(
        wait_for(Duration::from_secs(30), || !running()),
        "processes of the killed run outlived it"
    );
}

/// A standalone cluster (`tests/python/spark_cluster.py`), stopped when dropped.
struct Cluster {
    child: Child,
    master: String,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start(workers: usize) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(common::python())
            .arg(common::repo_root().join("tests/python/spark_cluster.py"))
            .arg(dir.path())
            .arg(workers.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
        let master = line.trim().strip_prefix("master ").map(str::to_string);
        let cluster = Cluster {
            child,
            master: master.clone().unwrap_or_default(),
            _dir: dir,
        };
        assert!(
            master.is_some(),
            "the standalone cluster did not start: {line:?}"
        );
        cluster
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let stopped = wait_for(Duration::from_secs(30), || {
            self.child.try_wait().ok().flatten().is_some()
        });
        if !stopped {
            // SAFETY: as in KillGroup.
            unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
            let _ = self.child.wait();
        }
    }
}

/// Speculative execution on a two-host standalone cluster: the first attempt of w000002
/// writes its shard and then stalls; Spark launches a speculative copy on the other host,
/// which wins; the publication keeps the copy's attempt.
#[test]
fn speculative_copy_on_a_standalone_cluster() {
    let input = input();
    let cluster = Cluster::start(2);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut args = range_job(&input.reference, &out, "mixed", "sds");
    args.extend([
        "--master".into(),
        cluster.master.clone(),
        "--speculation".into(),
    ]);
    args.extend(words(&["--inject-slow", "w000002=120"]));
    let watch = RootWatch::start(&out);
    let stdout = run_job("speculation", &args);
    // Any task may get a copy (a slow first start, say): each work id's highest attempt with
    // a receipt must be the one published, and the straggler's is its copy's.
    let kept = highest_receipts(&tmp.path().join("out.receipts"));
    assert_eq!(kept[2], 1, "{kept:?}");
    check_published(&out, &input, watch.finish(), &kept);
    let attempts = spark_attempts(&stdout);
    let straggler = attempts_of(&attempts, "w000002");
    let copy = straggler
        .iter()
        .find(|a| a.speculative && a.end == "Success")
        .unwrap_or_else(|| panic!("no successful speculative copy: {straggler:?}"));
    assert_eq!(copy.attempt, 1);
    let original = straggler.iter().find(|a| a.attempt == 0).unwrap();
    assert_ne!(original.host, copy.host, "{straggler:?}");
    // Killed once the copy won, perhaps after the job's end was logged.
    assert!(
        ["TaskKilled", "running"].contains(&original.end.as_str()),
        "{straggler:?}"
    );
}

/// An annotation set over the input published by Spark (mixed workers, a task failing once)
/// reads back, through the library, exactly as `sds annotate` in one process publishes it.
fn annotation_set(publisher: &str) {
    let input = input();
    let tmp = tempfile::tempdir().unwrap();
    let spark_copy = tmp.path().join("spark");
    let single = tmp.path().join("single");
    for copy in [&spark_copy, &single] {
        let status = Command::new("cp")
            .arg("-r")
            .arg(&input.reference)
            .arg(copy)
            .status()
            .unwrap();
        assert!(status.success());
    }
    let rows_dir = tmp.path();
    common::run_python(
        "annotation_tool.py",
        &["make-rows", &s(rows_dir), "24"],
        b"",
    );
    let rows = s(&rows_dir.join("rows.jsonl"));
    let mut args = words(&["annotate", "--sds", SDS, "--worker", "mixed", "--publisher"]);
    args.push(publisher.into());
    args.extend(words(&[
        "--name",
        "labels",
        "--records-per-shard",
        "5",
        "--rows",
    ]));
    args.extend([rows.clone(), "--dataset".into(), s(&spark_copy)]);
    args.extend(words(&["--inject-failure", "shard-00000001"]));
    let stdout = run_job(&format!("annotations, {publisher} publisher"), &args);
    let attempts = spark_attempts(&stdout);
    let retried: Vec<u64> = attempts_of(&attempts, "shard-00000001")
        .iter()
        .map(|a| a.attempt)
        .collect();
    assert_eq!(retried, [0, 1]);
    let out = Command::new(SDS)
        .args([
            "annotate",
            "--name",
            "labels",
            "--records-per-shard",
            "5",
            "--rows",
        ])
        .arg(&rows)
        .arg(&single)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for root in [&spark_copy, &single] {
        let verify = Command::new(SDS)
            .args(["verify", "--deep"])
            .arg(root)
            .output()
            .unwrap();
        assert!(verify.status.success(), "{verify:?}");
    }
    let read = |root: &Path| common::run_python("annotation_tool.py", &["read", &s(root)], b"");
    let spark_set = read(&spark_copy);
    assert!(String::from_utf8_lossy(&spark_set).contains("\"labels\""));
    assert_eq!(spark_set, read(&single));
}

#[test]
fn annotation_set_sds_publisher() {
    annotation_set("sds");
}

#[test]
fn annotation_set_library_publisher() {
    annotation_set("library");
}

/// The same task function without Spark (`--no-spark`, a thread pool that retries a failed
/// task with the next attempt): the same dataset.
#[test]
fn example_without_spark() {
    let input = input();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut args = range_job(&input.reference, &out, "mixed", "sds");
    args.extend(words(&["--no-spark", "--inject-failure", "w000003"]));
    run_and_check("no Spark", &args, &out, &input, &[0, 0, 0, 1, 0]);
    // Re-running the whole job converges.
    run_job("no Spark, again", &args);
    assert_eq!(shard_paths(&out).len(), RANGE_TASKS);
}
