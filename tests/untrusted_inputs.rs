//! What `sds` does with inputs and documents someone else produced: importers read regular
//! files only (and, in a `--from-dir` tree, symbolic links only inside it), publication checks
//! each receipt against its shard, `sds ls` reports bad rows and keeps going, and counts read
//! from documents never size an allocation. Every hostile input is built here.

mod common;

use common::cli::{ok, sds};

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sdsfs::format::dtype::DType;
use sdsfs::format::record::{Field, Record};
use sdsfs::fs::views;

/// The one stderr line of a run that must fail with status 1.
fn fails(args: &[&str]) -> String {
    let out = sds(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "sds {args:?}: {stderr}");
    assert!(stderr.starts_with("sds: "), "{stderr}");
    stderr
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Every file below `dir` (none when it does not exist).
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// Nothing was published in `out`: no root.json and no shard object.
fn assert_nothing_published(out: &Path) {
    assert!(
        !out.join("root.json").exists(),
        "{} has a root.json",
        out.display()
    );
    let shards: Vec<PathBuf> = files_below(&out.join("objects"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "arrayrecord"))
        .collect();
    assert!(shards.is_empty(), "shards written: {shards:?}");
}

/// A `--from-dir` tree with one record whose field `x` is `len` bytes of uint8 in
/// `records/0/fields/x.raw` (not created: the caller puts a file or a link there).
fn one_record_tree(root: &Path, len: u64) -> PathBuf {
    let field = Field::new(DType::U8, vec![len], vec![0u8; len as usize]).unwrap();
    let record = Record::new("r0").with_field("x", field);
    let dir = root.join("records/0");
    std::fs::create_dir_all(dir.join("fields")).unwrap();
    std::fs::write(
        dir.join("record.json"),
        views::record_json(&record.meta(), 0),
    )
    .unwrap();
    dir.join("fields/x.raw")
}

#[test]
fn a_link_out_of_a_from_dir_tree_is_refused_by_create_and_write_shard() {
    let shadow = Path::new("/etc/shadow");
    let secret_len = std::fs::metadata(shadow).expect("/etc/shadow").len();
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("tree");
    let raw = one_record_tree(&tree, secret_len);
    symlink(shadow, &raw).unwrap();
    let out = work.path().join("out");
    let refused = fails(&["create", text(&out), "--from-dir", text(&tree), "-q"]);
    assert!(
        refused.contains("records/0/fields/x.raw")
            && refused.contains("/etc/shadow")
            && refused.contains("outside the input tree"),
        "{refused}"
    );
    assert_nothing_published(&out);
    let worker = fails(&[
        "write-shard",
        text(&out),
        "--work-id",
        "w0",
        "--from-dir",
        text(&tree),
    ]);
    assert!(worker.contains("outside the input tree"), "{worker}");
    assert_nothing_published(&out);

    // A record directory that is itself a link out of the tree: its record.json leads out.
    std::fs::remove_file(&raw).unwrap();
    std::fs::write(&raw, vec![0u8; secret_len as usize]).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let outside_record = elsewhere.path().join("7");
    std::fs::rename(tree.join("records/0"), &outside_record).unwrap();
    symlink(&outside_record, tree.join("records/0")).unwrap();
    let linked_dir = fails(&["create", text(&out), "--from-dir", text(&tree), "-q"]);
    assert!(
        linked_dir.contains("record.json") && linked_dir.contains("outside the input tree"),
        "{linked_dir}"
    );
    assert_nothing_published(&out);
}

/// Symbolic links that stay inside the tree are followed: two records share one data file.
#[test]
fn a_link_inside_a_from_dir_tree_is_followed() {
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("tree");
    let first = one_record_tree(&tree, 5);
    std::fs::write(&first, [1u8, 2, 3, 4, 5]).unwrap();
    let second_dir = tree.join("records/1");
    std::fs::create_dir_all(second_dir.join("fields")).unwrap();
    let field = Field::new(DType::U8, vec![5], vec![0u8; 5]).unwrap();
    let record = Record::new("r1").with_field("x", field);
    std::fs::write(
        second_dir.join("record.json"),
        views::record_json(&record.meta(), 1),
    )
    .unwrap();
    symlink("../../0/fields/x.raw", second_dir.join("fields/x.raw")).unwrap();
    let out = work.path().join("out");
    ok(&["create", text(&out), "--from-dir", text(&tree), "-q"]);
    let store: std::sync::Arc<dyn sdsfs::storage::ObjectStore> =
        std::sync::Arc::new(sdsfs::storage::LocalStore::open(&out).unwrap());
    let dataset = sdsfs::dataset::Dataset::open(store, Default::default()).unwrap();
    assert_eq!(dataset.len(), 2);
    for ordinal in 0..2 {
        let record = dataset.read_record(ordinal).unwrap();
        assert_eq!(&record.fields["x"].data[..], &[1u8, 2, 3, 4, 5]);
    }
}

#[test]
fn devices_are_refused_as_raw_npy_and_sigmf_inputs() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let zero = fails(&[
        "create",
        text(&out),
        "--from-raw",
        "/dev/zero",
        "--datatype",
        "cf32_le",
        "--sample-rate",
        "1000",
    ]);
    assert!(
        zero.contains("/dev/zero")
            && zero.contains("character device")
            && zero.contains("regular files only"),
        "{zero}"
    );
    let npy = fails(&["create", text(&out), "--from-npy", "/dev/null"]);
    assert!(
        npy.contains("/dev/null") && npy.contains("character device"),
        "{npy}"
    );
    assert_nothing_published(&out);
}

/// Runs `sds ARGS`, killing it after 10 s; returns its output and how long it ran.
fn run_bounded(args: &[&str]) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_sds"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(10));
        // SAFETY: signalling a pid; at worst the child already exited.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let output = child.wait_with_output().unwrap();
    let elapsed = started.elapsed();
    drop(watchdog);
    (output, elapsed)
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(text(path)).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn fifos_and_sockets_are_refused_without_blocking() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let fifo = work.path().join("capture.raw");
    mkfifo(&fifo);
    let socket_path = work.path().join("capture.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    // A FIFO in a --from-dir tree too.
    let tree = work.path().join("tree");
    let raw = one_record_tree(&tree, 4);
    mkfifo(&raw);
    let raw_args = ["--datatype", "cf32_le", "--sample-rate", "1000"];
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (vec!["--from-raw", text(&fifo)], "capture.raw", "a FIFO"),
        (
            vec!["--from-raw", text(&socket_path)],
            "capture.sock",
            "a socket",
        ),
        (vec!["--from-npy", text(&fifo)], "capture.raw", "a FIFO"),
        (vec!["--from-dir", text(&tree)], "fields/x.raw", "a FIFO"),
    ];
    for (inputs, names, kind) in cases {
        let mut args = vec!["create", text(&out), "-q"];
        args.extend(&inputs);
        args.extend(raw_args);
        let (output, elapsed) = run_bounded(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            elapsed < Duration::from_secs(2),
            "{args:?} took {elapsed:?}: it blocked on the input"
        );
        assert!(
            stderr.contains(names)
                && stderr.contains(kind)
                && stderr.contains("regular files only"),
            "{args:?}: {stderr}"
        );
        assert_nothing_published(&out);
    }
}

/// `count` headerless cf32 captures of 4 samples each, named `<stem>-<k>.raw` in `dir`.
fn captures(dir: &Path, stem: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|k| {
            let path = dir.join(format!("{stem}-{k}.raw"));
            std::fs::write(&path, vec![k as u8; 32]).unwrap();
            path.to_str().unwrap().to_string()
        })
        .collect()
}

/// Runs `sds write-shard ROOT --work-id WORK --from-raw FILES...`; its receipt as JSON.
fn write_shard(root: &Path, work: &str, files: &[String]) -> serde_json::Value {
    let mut args = vec!["write-shard", text(root), "--work-id", work, "--from-raw"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--datatype", "cf32_le", "--sample-rate", "1000"]);
    serde_json::from_str(ok(&args).trim()).unwrap()
}

/// Runs `sds publish` on `receipts` (written to a file) with extra `options`.
fn publish(root: &Path, receipts: &[serde_json::Value], options: &[&str]) -> std::process::Output {
    let file = root.join("receipts.jsonl");
    let lines: String = receipts.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&file, lines).unwrap();
    let mut args = vec![
        "publish",
        text(root),
        "--receipts",
        text(&file),
        "--dataset-id",
        "d",
        "--snapshot-id",
        "s",
    ];
    args.extend(options);
    sds(&args)
}

/// Nothing of a publication was written: no root.json, no snapshot, no manifest page.
fn assert_no_publication(root: &Path) {
    assert!(!root.join("root.json").exists());
    assert!(files_below(&root.join("snapshots")).is_empty());
    assert!(files_below(&root.join("manifests")).is_empty());
}

#[test]
fn publish_refuses_receipts_that_do_not_describe_their_shards() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("root");
    let w0 = write_shard(&root, "w0", &captures(work.path(), "a", 3));
    let w1 = write_shard(&root, "w1", &captures(work.path(), "b", 1));
    assert_eq!(w0["record_count"], 3);

    let mut lost = w0.clone();
    lost["record_count"] = 0.into();
    let mut invented = w0.clone();
    invented["record_count"] = 300.into();
    // w1's receipt naming w0's shard pair (sizes and count of w0's, so only the name is wrong).
    let mut borrowed = w0.clone();
    borrowed["work_id"] = "w1".into();
    let cases = [
        (
            lost,
            "w0",
            "holds 3 records but the receipt says record_count 0",
        ),
        (
            invented,
            "w0",
            "holds 3 records but the receipt says record_count 300",
        ),
        (borrowed, "w1", "is not objects/data/"),
    ];
    for (lying, work_id, rule) in cases {
        let others: Vec<serde_json::Value> = if work_id == "w0" {
            vec![lying, w1.clone()]
        } else {
            vec![w0.clone(), lying]
        };
        let out = publish(&root, &others, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("receipt of work \"{work_id}\" attempt 0"))
                && stderr.contains(rule),
            "{stderr}"
        );
        assert_no_publication(&root);
    }
    // The alias of the old option is still accepted, and the truth publishes.
    let out = publish(&root, &[w0, w1], &["--verify-record-counts"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(root.join("root.json").exists());
}

#[test]
fn verify_deep_reports_a_shard_holding_more_records_than_its_entry() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("root");
    let mut lying = write_shard(&root, "w0", &captures(work.path(), "a", 3));
    lying["record_count"] = 2.into();
    // Published on purpose without the check: the dataset a lying receipt leaves behind.
    let out = publish(&root, &[lying], &["--no-verify-receipts"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verify = sds(&["verify", "--deep", text(&root)]);
    let stdout = String::from_utf8_lossy(&verify.stdout);
    assert_eq!(verify.status.code(), Some(1), "{stdout}");
    let problems: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("holds 3 records but its entry"))
        .collect();
    // Both shards of the pair, each named, each with the entry's count.
    assert_eq!(problems.len(), 2, "{stdout}");
    assert!(
        problems.iter().any(|l| l.contains("objects/data/")),
        "{stdout}"
    );
    assert!(
        problems.iter().any(|l| l.contains("objects/metadata/")),
        "{stdout}"
    );
    assert!(
        problems.iter().all(|l| l.contains("record_count 2")),
        "{stdout}"
    );
}

/// The worker pointer file of logical shard `shard` (the JSON file saying so).
fn pointer_file(root: &Path, shard: &str) -> PathBuf {
    files_below(&root.join("annotations"))
        .into_iter()
        .find(|p| {
            let json: Option<serde_json::Value> = std::fs::read(p)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
            json.is_some_and(|j| j["logical_shard_id"] == shard)
        })
        .unwrap_or_else(|| panic!("no pointer for {shard}"))
}

#[test]
fn annotate_publish_refuses_a_pointer_naming_another_shards_object() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("ds");
    ok(&["demo", text(&root)]);
    let rows = work.path().join("rows.jsonl");
    let lines: String = (0..8)
        .map(|o| format!("{{\"source_index\": {o}, \"status\": \"success\"}}\n"))
        .collect();
    std::fs::write(&rows, lines).unwrap();
    let set = ["--name", "lab", "--records-per-shard", "4"];
    for shard in ["0", "1"] {
        let mut args = vec!["annotate", "write-shard", text(&root), "--shard", shard];
        args.extend(set);
        args.extend(["--rows", text(&rows)]);
        ok(&args);
    }
    // Shard 1's pointer now names shard 0's object (4 carriers, its true size).
    let first: serde_json::Value =
        serde_json::from_slice(&std::fs::read(pointer_file(&root, "shard-00000000")).unwrap())
            .unwrap();
    let second_path = pointer_file(&root, "shard-00000001");
    let mut second: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&second_path).unwrap()).unwrap();
    second["uri"] = first["uri"].clone();
    second["stored_bytes"] = first["stored_bytes"].clone();
    std::fs::write(&second_path, second.to_string()).unwrap();
    let mut args = vec!["annotate", "publish", text(&root)];
    args.extend(set);
    let refused = fails(&args);
    assert!(
        refused.contains("shard-00000001") && refused.contains("is not the one its carriers name"),
        "{refused}"
    );
    assert!(files_below(&root.join("annotations"))
        .iter()
        .all(|p| !p.to_string_lossy().contains("catalog")));
}

/// Elements of the large test array (float32): 256 MiB of tensor bytes.
const LARGE_ELEMENTS: u64 = 64 << 20;

/// Writes `big.npy` (one float32 array of LARGE_ELEMENTS normal values), `big.npz` (the
/// same array as `x`, plus `y`, ten int16) and `big.cf32` (the same bytes, headerless) with
/// numpy.
fn large_arrays(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let script = format!(
        "import numpy as np, sys\n\
         x = np.random.default_rng(7).standard_normal({LARGE_ELEMENTS}, dtype=np.float32)\n\
         np.save(sys.argv[1] + '/big.npy', x)\n\
         np.savez(sys.argv[1] + '/big.npz', x=x, y=np.arange(10, dtype=np.int16))\n\
         x.tofile(sys.argv[1] + '/big.cf32')\n"
    );
    let status = Command::new(common::python())
        .args(["-c", &script, text(dir)])
        .status()
        .unwrap();
    assert!(status.success());
    (
        dir.join("big.npy"),
        dir.join("big.npz"),
        dir.join("big.cf32"),
    )
}

/// Runs `sds ARGS` to completion; its stdout and peak resident set in bytes (the kernel's
/// `ru_maxrss` of the child, from wait4).
// The child is reaped by `wait4` (which also gives its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_measured(args: &[&str]) -> (String, u64) {
    let child = Command::new(env!("CARGO_BIN_EXE_sds"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
        text
    });
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "sds {args:?} failed"
    );
    (reader.join().unwrap(), usage.ru_maxrss as u64 * 1024)
}

/// Every compressor the writer offers: snappy and brotli (at a quality past its fast paths)
/// compress a record's pieces without joining them and write their output as it comes, so
/// they hold no more than zstd (the default) does. Two jobs writing a large record each hold
/// one at a time (the jobs share an allowance of 1.5x the largest record).
#[test]
fn create_from_a_large_array_holds_it_one_and_a_half_times_at_most_and_counts_tensor_bytes() {
    let work = tempfile::tempdir().unwrap();
    let (npy, npz, raw) = large_arrays(work.path());
    let copy = work.path().join("copy.npy");
    std::fs::hard_link(&npy, &copy).unwrap();
    let tensor = LARGE_ELEMENTS * 4;
    // The promise: 1.5x the largest record plus a constant.
    let limit = tensor + tensor / 2 + (64 << 20);
    let npy_args = ["-j", "1", "--from-npy"];
    let raw_args = [
        "-j",
        "1",
        "--datatype",
        "cf32_le",
        "--sample-rate",
        "1e6",
        "--from-raw",
    ];
    let two_jobs = ["-j", "2", "--records-per-shard", "1", "--from-npy"];
    let runs: [(&[&str], &[&Path], u64, &str); 6] = [
        (&npy_args, &[&npy], tensor, "group_size:1"),
        (&npy_args, &[&npz], tensor + 10 * 2, "group_size:1"),
        (&npy_args, &[&npy], tensor, "snappy"),
        (&npy_args, &[&npy], tensor, "brotli:2"),
        (&raw_args, &[&raw], tensor, "snappy"),
        (&two_jobs, &[&npy, &copy], 2 * tensor, "group_size:1"),
    ];
    for (index, (options, inputs, tensor_bytes, writer)) in runs.into_iter().enumerate() {
        let out = work.path().join(format!("out-{index}"));
        let mut args = vec!["create", text(&out), "-q", "--writer-options", writer];
        args.extend(options);
        args.extend(inputs.iter().map(|input| text(input)));
        let (summary, peak) = run_measured(&args);
        assert!(
            summary.contains(&format!("({tensor_bytes} tensor bytes)")),
            "{summary}"
        );
        let shown = format!("{options:?} {writer}");
        assert!(
            peak <= limit,
            "{shown}: peak RSS {} MiB, more than {} MiB (1.5 x {} MiB + 64 MiB)",
            peak >> 20,
            limit >> 20,
            tensor >> 20
        );
        eprintln!("{shown}: peak RSS {} MiB", peak >> 20);
        std::fs::remove_dir_all(&out).unwrap();
    }
}

/// A dataset of three one-record shards made from raw captures; returns its root.
fn three_shards(work: &Path) -> PathBuf {
    let root = work.join("three");
    let mut args = vec!["create", text(&root), "-q", "--records-per-shard", "1"];
    let files = captures(work, "c", 3);
    args.push("--from-raw");
    args.extend(files.iter().map(String::as_str));
    args.extend(["--datatype", "cf32_le", "--sample-rate", "1000"]);
    ok(&args);
    root
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The entries of the dataset's only manifest page, and the page's path.
fn only_page(root: &Path) -> (serde_json::Value, PathBuf) {
    let snapshot = root.join(
        read_json(&root.join("root.json"))["snapshot"]["path"]
            .as_str()
            .unwrap(),
    );
    let page = root.join(
        read_json(&snapshot)["manifests"][0]["object"]["path"]
            .as_str()
            .unwrap(),
    );
    (read_json(&page), page)
}

#[test]
fn ls_prints_every_readable_row_and_reports_the_bad_one() {
    let work = tempfile::tempdir().unwrap();
    let root = three_shards(work.path());
    // Record 1's metadata shard: same size, but not an ArrayRecord file any more.
    let (page, _) = only_page(&root);
    let metadata = root.join(page["shards"][1]["metadata"]["path"].as_str().unwrap());
    let len = std::fs::metadata(&metadata).unwrap().len() as usize;
    std::fs::write(&metadata, vec![0x5a; len]).unwrap();
    let out = sds(&["ls", text(&root)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let listed: Vec<&str> = stdout.lines().collect();
    assert_eq!(listed.len(), 2, "{stdout}");
    assert!(listed[0].starts_with("0  c-0  "), "{stdout}");
    assert!(listed[1].starts_with("2  c-2  "), "{stdout}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    let damaged = metadata.file_name().unwrap().to_str().unwrap();
    assert!(
        lines[0].contains("record 1") && lines[0].contains(damaged),
        "{stderr}"
    );
    assert!(
        lines[1].contains("1 of 3 listed records could not be read"),
        "{stderr}"
    );
}

/// Claims a record count of 10^15 for the dataset's first shard entry, every count and size
/// above it made consistent, so that only the claim is wrong.
fn claim_records(root: &Path, count: u64) {
    let (mut page, page_path) = only_page(root);
    let old = page["shards"][0]["record_count"].as_u64().unwrap();
    let total = page["record_count"].as_u64().unwrap() - old + count;
    page["shards"][0]["record_count"] = count.into();
    page["record_count"] = total.into();
    std::fs::write(&page_path, serde_json::to_string_pretty(&page).unwrap()).unwrap();
    let root_path = root.join("root.json");
    let mut root_doc = read_json(&root_path);
    let snapshot_path = root.join(root_doc["snapshot"]["path"].as_str().unwrap());
    let mut snapshot = read_json(&snapshot_path);
    snapshot["manifests"][0]["record_count"] = total.into();
    snapshot["manifests"][0]["object"]["stored_bytes"] =
        std::fs::metadata(&page_path).unwrap().len().into();
    snapshot["record_count"] = total.into();
    std::fs::write(
        &snapshot_path,
        serde_json::to_string_pretty(&snapshot).unwrap(),
    )
    .unwrap();
    root_doc["snapshot"]["stored_bytes"] = std::fs::metadata(&snapshot_path).unwrap().len().into();
    std::fs::write(&root_path, serde_json::to_string_pretty(&root_doc).unwrap()).unwrap();
}

#[test]
fn a_claim_of_10_to_the_15_records_never_aborts_an_sds_command() {
    let work = tempfile::tempdir().unwrap();
    let root = three_shards(work.path());
    claim_records(&root, 1_000_000_000_000_000);
    let dest = work.path().join("view");
    let select = [
        "select",
        text(&root),
        text(&dest),
        "--indices",
        "0:1000000000000000",
        "--dataset-id",
        "v",
        "--snapshot-id",
        "s",
    ];
    let root_text = text(&root);
    let commands: Vec<Vec<&str>> = vec![
        select.to_vec(),
        vec!["verify", root_text],
        vec!["verify", "--deep", root_text],
        vec!["ls", root_text, "--limit", "5"],
        vec!["info", root_text],
    ];
    for args in &commands {
        let (output, elapsed) = run_bounded(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        // An exit status, not a signal: no abort, and no watchdog kill.
        assert!(
            matches!(output.status.code(), Some(0 | 1)),
            "sds {args:?}: {:?} after {elapsed:?}: {stderr}",
            output.status
        );
        assert!(
            elapsed < Duration::from_secs(5),
            "sds {args:?} took {elapsed:?}"
        );
    }
    // The selection is refused before anything is sized from it, naming the option and the
    // count (or the dataset is refused at opening, naming the claim).
    let refused = fails(&select);
    assert!(
        (refused.contains("--indices") && refused.contains("1000000000000002 records"))
            || refused.contains("record_count"),
        "{refused}"
    );
    assert!(!dest.join("root.json").exists());
}

/// A `record.json` longer than a descriptor may be is refused by its size, before it is read.
#[test]
fn an_oversized_record_json_is_refused_by_its_size() {
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("tree");
    let raw = one_record_tree(&tree, 3);
    std::fs::write(&raw, [1u8, 2, 3]).unwrap();
    let json = tree.join("records/0/record.json");
    let mut padded = std::fs::read(&json).unwrap();
    padded.resize(17 << 20, b' ');
    std::fs::write(&json, padded).unwrap();
    let out = work.path().join("out");
    let refused = fails(&["create", text(&out), "--from-dir", text(&tree), "-q"]);
    assert!(
        refused.contains("records/0/record.json")
            && refused.contains(&format!("{} bytes is more than the {}", 17 << 20, 16 << 20)),
        "{refused}"
    );
    assert_nothing_published(&out);
}

/// An NPY header claiming 2^40 float32 elements over 16 data bytes, as a file and as an
/// `.npz` member: refused by the data length, without allocating what the header claims.
#[test]
fn an_npy_header_claiming_terabytes_is_refused_without_allocating() {
    let work = tempfile::tempdir().unwrap();
    let script = "import numpy as np, sys, zipfile\n\
         h = np.lib.format.header_data_from_array_1_0(np.zeros(4, dtype=np.float32))\n\
         h['shape'] = (1 << 40,)\n\
         with open(sys.argv[1] + '/claim.npy', 'wb') as f:\n\
         \x20   np.lib.format.write_array_header_1_0(f, h)\n\
         \x20   f.write(bytes(16))\n\
         with zipfile.ZipFile(sys.argv[1] + '/claim.npz', 'w') as z:\n\
         \x20   z.write(sys.argv[1] + '/claim.npy', 'x.npy')\n";
    let status = Command::new(common::python())
        .args(["-c", script, text(work.path())])
        .status()
        .unwrap();
    assert!(status.success());
    let out = work.path().join("out");
    for input in ["claim.npy", "claim.npz"] {
        let path = work.path().join(input);
        let (output, elapsed) = run_bounded(&["create", text(&out), "--from-npy", text(&path)]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{input}: {stderr}");
        assert!(elapsed < Duration::from_secs(5), "{input} took {elapsed:?}");
        assert!(
            stderr.contains(input)
                && stderr.contains(&format!("needs {}", 4u64 << 40))
                && stderr.contains("16 data bytes"),
            "{stderr}"
        );
        assert_nothing_published(&out);
    }
}
