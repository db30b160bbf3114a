//! The mount's SigMF documents checked with the real tools: every `.sigmf-meta` and
//! `.sigmf-collection` of the demo, and of a dataset of hostile box labels, validated by the
//! `sigmf` library and compared with annotations computed in Python from the `signal-dataset`
//! library's reading of the records (`tests/python/sigmf_check.py`); `stat` of the new files
//! reads no data shard and reading them decodes a record once; inspectrum opens a pair under
//! Xvfb and draws it.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::mount::MountGuard;
use common::namespace::{counting_namespace, data_reads, lookup_path};
use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::{self, Object, Value};
use sdsfs::format::record::{Axis, Field, Record};
use sdsfs::storage::LocalStore;

fn demo() -> PathBuf {
    common::repo_root().join("fixtures/demo")
}

/// `sigmf_check.py` over a mount of `dataset`: its counts.
fn check_with_the_library(dataset: &Path, mount: &MountGuard) -> BTreeMap<String, u64> {
    let root = dataset.to_str().unwrap();
    let mounted = mount.path("");
    let output = common::run_python("sigmf_check.py", &[root, mounted.to_str().unwrap()], b"");
    let doc = json::parse_object(&output, &Default::default()).unwrap();
    doc.iter()
        .map(|(k, v)| (k.to_string(), v.as_u64().unwrap()))
        .collect()
}

/// `columns/labels.jsonl` of a mount of `dataset` against the boxes `sigmf_check.py` computes
/// from the library's records, line by line: its counts (`lines`, `null_lines`, `bytes`).
fn check_label_table(dataset: &Path, mount: &MountGuard) -> BTreeMap<String, u64> {
    let root = dataset.to_str().unwrap();
    let mounted = mount.path("");
    let args = ["labels", root, mounted.to_str().unwrap()];
    let output = common::run_python("sigmf_check.py", &args, b"");
    let doc = json::parse_object(&output, &Default::default()).unwrap();
    doc.iter()
        .map(|(k, v)| (k.to_string(), v.as_u64().unwrap()))
        .collect()
}

/// `labels.arrow` and `records.arrow` of a mount read by pyarrow (memory-mapped), polars and
/// pandas against the JSON lines beside them (`label_tables.py`): its counts.
fn check_arrow_tables(mount: &MountGuard) -> BTreeMap<String, u64> {
    let mounted = mount.path("");
    let output = common::run_python("label_tables.py", &[mounted.to_str().unwrap()], b"");
    let doc = json::parse_object(&output, &Default::default()).unwrap();
    doc.iter()
        .map(|(k, v)| (k.to_string(), v.as_u64().unwrap()))
        .collect()
}

/// The PyTorch recipe (`examples/python/sdsfs_torch.py`) run with `DataLoader(num_workers=2)`
/// over a mount of `dataset`, checked item by item against the library (`torch_loader.py`):
/// its counts (`records`, `boxes`, `labelled`, `batches`).
fn run_torch_recipe(
    dataset: &Path,
    mount: &MountGuard,
    field: &str,
    set: Option<&str>,
) -> BTreeMap<String, u64> {
    let root = dataset.to_str().unwrap();
    let mounted = mount.path("");
    let mut args = vec![root, mounted.to_str().unwrap(), field];
    args.extend(set);
    let output = common::run_python("torch_loader.py", &args, b"");
    let doc = json::parse_object(&output, &Default::default()).unwrap();
    doc.iter()
        .map(|(k, v)| (k.to_string(), v.as_u64().unwrap()))
        .collect()
}

const RX0: &str = "projections/communications_rx/receivers/rx0/iq";

fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn demo_documents_validate_and_match_the_library() {
    let mount = MountGuard::mount(&demo(), &[]);
    // By hand from the demo's scenes: 1, 1, 2 and 1 emitters, each scene observed twice; rx0
    // in every record, rx1 in scene-0002's two records (its 2 boxes each scaled to 2 MHz).
    assert_eq!(
        check_with_the_library(&demo(), &mount),
        counts(&[
            ("metas", 10),
            ("annotations", 2 * (1 + 1 + 2 + 1) + 2 * 2),
            ("record_collections", 8),
            ("scene_collections", 4),
            ("left_out", 0),
        ])
    );
    // scene-0002's first box by hand: QPSK at -50 kHz, 135 kHz wide, samples 1000..7000 at
    // 1 MHz; on rx1 (2 MHz) samples 2000..14000.
    let rx1 = std::fs::read(
        mount.path("records/4/fields/projections/communications_rx/receivers/rx1/iq.sigmf-meta"),
    )
    .unwrap();
    let doc = json::parse_object(&rx1, &Default::default()).unwrap();
    let first = doc["annotations"].as_array().unwrap()[0]
        .as_object()
        .unwrap();
    assert_eq!(first["core:sample_start"].as_u64(), Some(2000));
    assert_eq!(first["core:sample_count"].as_u64(), Some(12_000));
    assert_eq!(
        first["core:freq_lower_edge"].as_f64(),
        Some(2_399_882_500.0)
    );
    assert_eq!(
        first["core:freq_upper_edge"].as_f64(),
        Some(2_400_017_500.0)
    );
    assert_eq!(first["core:label"].as_str(), Some("qpsk"));
    // The label table: a line per box of every .sigmf-meta (the counts above), none null.
    let table = check_label_table(&demo(), &mount);
    assert_eq!(table["lines"], 2 * (1 + 1 + 2 + 1) + 2 * 2);
    assert_eq!(table["null_lines"], 0);
    // The Arrow twins: the same rows, read without a copy (pyarrow allocates nothing).
    let arrow = check_arrow_tables(&mount);
    assert_eq!(arrow["label_rows"], table["lines"]);
    assert_eq!(arrow["record_rows"], 8);
    assert_eq!((arrow["label_batches"], arrow["record_batches"]), (1, 1));
    assert_eq!(arrow["allocated"], 0, "pyarrow copied the tables");
    // The loader recipe: every record of rx0 with its boxes (1, 1, 2 and 1 emitters per
    // scene, two records each), in batches of 3.
    let loaded = run_torch_recipe(&demo(), &mount, RX0, None);
    assert_eq!(
        loaded,
        counts(&[
            ("records", 8),
            ("boxes", 10),
            ("labelled", 8),
            ("batches", 3)
        ])
    );
}

#[test]
fn stat_reads_no_data_shard_and_reading_decodes_once() {
    let (store, ns) = counting_namespace(&demo());
    let rx = "records/4/fields/projections/communications_rx/receivers";
    let paths = [
        format!("{rx}/rx0/iq.sigmf-meta"),
        format!("{rx}/rx1/iq.sigmf-meta"),
        "records/4/record.sigmf-collection".to_string(),
        "by-scene/scene-0002/scene.sigmf-collection".to_string(),
    ];
    let attrs: Vec<_> = paths.iter().map(|p| lookup_path(&ns, p)).collect();
    assert_eq!(data_reads(&store), 0, "stat of the SigMF files");
    // Reading them: record 4's data shard once (the scene's other record, 5, once too), and
    // every read returns exactly the size stat gave.
    for (path, attr) in paths.iter().zip(&attrs) {
        let bytes = ns.read(attr.ino, 0, 1 << 20).unwrap();
        assert_eq!(bytes.len() as u64, attr.size, "{path}");
    }
    let misses = ns
        .record_cache()
        .counters()
        .misses
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(misses, 2, "records 4 and 5, each decoded once");
}

#[test]
fn the_label_table_is_sized_from_the_rows_and_read_decoding_each_record_once() {
    let (store, ns) = counting_namespace(&demo());
    let attr = lookup_path(&ns, "columns/labels.jsonl");
    assert_eq!(data_reads(&store), 0, "stat of labels.jsonl");
    // Read in 4 KiB pieces, as `cat` would: every byte stat promised, each of the demo's 8
    // records (all labelled) decoded once.
    let mut bytes = Vec::new();
    while (bytes.len() as u64) < attr.size {
        let piece = ns.read(attr.ino, bytes.len() as u64, 4096).unwrap();
        assert!(!piece.is_empty());
        bytes.extend_from_slice(&piece);
    }
    assert_eq!(bytes.len() as u64, attr.size);
    assert!(ns.read(attr.ino, attr.size, 4096).unwrap().is_empty());
    let misses = ns
        .record_cache()
        .counters()
        .misses
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(misses, 8, "each record decoded once");
    let text = String::from_utf8(bytes).unwrap();
    assert_eq!(text.lines().count(), 2 * (1 + 1 + 2 + 1) + 2 * 2);
}

/// A record of 40,000 boxes and records of 3 MiB of metadata: the Arrow files' batches stay
/// bounded (16,384 rows, 8 MiB of text), a group's rows split across batches, and both files
/// still equal their JSON lines (and those the library's reading).
#[test]
fn many_boxes_and_long_texts_split_the_arrow_batches() {
    const BOXES: usize = 40_000;
    let values: Vec<f64> = (0..BOXES)
        .flat_map(|i| [(i % 900) as f64, 5.0, -1e3 - i as f64, 1e3])
        .collect();
    let rows: Vec<[i32; 2]> = (0..BOXES).map(|i| [(i % 3) as i32, 0]).collect();
    let names: Object = [("0", "a"), ("1", "bb")]
        .iter()
        .map(|(k, v)| ((*k).into(), Value::from(*v)))
        .collect();
    let long = |i: usize| -> Object {
        [
            ("note".into(), Value::from("x".repeat(3 << 20))),
            ("i".into(), Value::from(i as u64)),
        ]
        .into_iter()
        .collect()
    };
    let records = (0..4)
        .map(|i| {
            let record = Record::new(format!("m{i}"))
                .with_metadata(long(i))
                .with_field("p/receivers/rx0/iq", iq());
            let (n, boxes, ids) = if i == 1 {
                (BOXES, &values[..], &rows[..])
            } else {
                (1, &values[..4], &rows[..1])
            };
            let frame = offset_frame("receiver_center_offset");
            record
                .with_field(
                    "p/labels/boxes/extent",
                    extent(vec![n as u64, 4], boxes, frame),
                )
                .with_field(
                    "p/labels/boxes/identity",
                    identity(ids, Some(names.clone())),
                )
        })
        .collect();
    let dir = publish_records(records);
    // Read through the core in 4 KiB pieces, as `cat` would: record 1's 40,000 lines are
    // made once (they are sorted whole), each record decoded once.
    let (_, ns) = counting_namespace(dir.path());
    let attr = lookup_path(&ns, "columns/labels.jsonl");
    let mut read = 0u64;
    while read < attr.size {
        read += ns.read(attr.ino, read, 4096).unwrap().len() as u64;
    }
    let misses = ns
        .record_cache()
        .counters()
        .misses
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(misses, 4, "each record decoded once");
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "256M"]);
    let table = check_label_table(dir.path(), &mount);
    assert_eq!(table["lines"], BOXES as u64 + 3);
    let arrow = check_arrow_tables(&mount);
    assert_eq!(arrow["label_rows"], BOXES as u64 + 3);
    // 16,384 + 16,384 + the rest: record 1's rows split across three batches.
    assert_eq!(arrow["label_batches"], 3);
    // Two records of 3 MiB of text in a batch of at most 8 MiB.
    assert_eq!((arrow["record_rows"], arrow["record_batches"]), (4, 2));
    assert_eq!(arrow["allocated"], 0, "pyarrow copied the tables");
}

/// An IQ field of 1000 samples at 1 MHz centred at 1 GHz.
fn iq() -> Field {
    let block: Object = [
        ("kind".into(), Value::from("uniform")),
        ("sample_rate_hz".into(), Value::Float(1e6)),
    ]
    .into_iter()
    .collect();
    let metadata: Object = [
        ("time_coordinates".into(), Value::Object(block)),
        ("center_frequency_hz".into(), Value::Float(1e9)),
    ]
    .into_iter()
    .collect();
    Field::new(DType::C64, vec![1000], vec![0u8; 8000])
        .unwrap()
        .with_axes(vec![Axis::new("time", 1000)])
        .with_metadata(metadata)
}

fn offset_frame(frequency_frame: &str) -> Object {
    [
        ("frequency_frame", Value::from(frequency_frame)),
        ("receiver_center_hz", Value::Float(1e9)),
        ("time_frame", Value::from("receiver_sample_index")),
        ("sample_rate_hz", Value::Float(1e6)),
    ]
    .into_iter()
    .map(|(k, v)| (k.into(), v))
    .collect()
}

fn extent(shape: Vec<u64>, values: &[f64], frame: Object) -> Field {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let axes = shape
        .iter()
        .enumerate()
        .map(|(i, n)| Axis::new(format!("a{i}"), *n))
        .collect();
    Field::new(DType::F64, shape, bytes)
        .unwrap()
        .with_axes(axes)
        .with_metadata(frame)
}

fn identity(rows: &[[i32; 2]], names: Option<Object>) -> Field {
    let bytes: Vec<u8> = rows
        .iter()
        .flatten()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let metadata: Object = names
        .map(|n| ("class_names".into(), Value::Object(n)))
        .into_iter()
        .collect();
    Field::new(DType::I32, vec![rows.len() as u64, 2], bytes)
        .unwrap()
        .with_axes(vec![
            Axis::new("box", rows.len() as u64),
            Axis::new("attr", 2),
        ])
        .with_metadata(metadata)
}

/// Records of hostile labels: their boxes, identities and what each should give.
fn hostile_records() -> Vec<Record> {
    let good = [10.0, 20.0, -1e3, 1e3];
    let names: Object = [("1".into(), Value::from("burst"))].into_iter().collect();
    let record = |i: usize, extent: Field, identity: Option<Field>| {
        let mut record = Record::new(format!("h{i}"))
            .with_scene_id("hostile")
            .with_field("p/receivers/rx0/iq", iq())
            .with_field("p/labels/boxes/extent", extent);
        if let Some(identity) = identity {
            record = record.with_field("p/labels/boxes/identity", identity);
        }
        record
    };
    let bad_boxes = [
        f64::NAN,
        5.0,
        0.0,
        1.0, // NaN start
        10.0,
        -5.0,
        0.0,
        1.0, // negative duration
        10.0,
        5.0,
        0.0,
        f64::INFINITY, // infinite edge
        10.0,
        5.0,
        9.0,
        1.0, // edges out of order
    ];
    let mixed: Vec<f64> = bad_boxes.iter().chain(&good).copied().collect();
    vec![
        // 0: four hostile boxes and one good one: one annotation.
        record(
            0,
            extent(vec![5, 4], &mixed, offset_frame("receiver_center_offset")),
            Some(identity(
                &[[1, 0], [1, 1], [1, 2], [1, 3], [1, 4]],
                Some(names),
            )),
        ),
        // 1: a frame the mount does not know: none, logged.
        record(
            1,
            extent(vec![1, 4], &good, offset_frame("doppler_corrected")),
            None,
        ),
        // 2: an absurd shape (rank 3): none.
        record(
            2,
            extent(vec![1, 1, 4], &good, offset_frame("receiver_center_offset")),
            None,
        ),
        // 3: no class_names: labelled by the class id.
        record(
            3,
            extent(vec![1, 4], &good, offset_frame("receiver_center_offset")),
            Some(identity(&[[7, 0]], None)),
        ),
        // 4: an identity table of another box count: none.
        record(
            4,
            extent(vec![1, 4], &good, offset_frame("receiver_center_offset")),
            Some(identity(&[[1, 0], [1, 1]], None)),
        ),
    ]
}

fn publish_records(records: Vec<Record>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let receipt = write_shard(&store, records, "w0", 0, &ShardOptions::default()).unwrap();
    publish(&store, &[receipt], &PublishOptions::new("hostile", "s1")).unwrap();
    dir
}

#[test]
fn hostile_boxes_are_left_out_and_sizes_stay_exact() {
    let dir = publish_records(hostile_records());
    let mount = MountGuard::mount(dir.path(), &[]);
    assert_eq!(
        check_with_the_library(dir.path(), &mount),
        counts(&[
            ("metas", 5),
            ("annotations", 2),
            ("record_collections", 5),
            ("scene_collections", 1),
            // Record 0's four boxes, record 1's unknown frame, record 4's identity mismatch.
            ("left_out", 4 + 1 + 1),
        ])
    );
    let log = mount.log_text();
    for needle in [
        "4 of 5 boxes left out, the first: box 0: an extent is not a finite number",
        "frequency_frame \"doppler_corrected\"",
        "rank 3, not 2",
        "2 boxes, but the extent has 1",
    ] {
        assert!(log.contains(needle), "{needle:?} not in the log:\n{log}");
    }
    // The table keeps record 0's four refused boxes as lines of null numbers; the tables
    // refused whole (unknown frame, rank 3, identity mismatch) have no line.
    let table = check_label_table(dir.path(), &mount);
    assert_eq!((table["lines"], table["null_lines"]), (2 + 4, 4));
    let arrow = check_arrow_tables(&mount);
    assert_eq!((arrow["label_rows"], arrow["label_nulls"]), (2 + 4, 4));
}

/// A child process killed and reaped when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn tool(name: &str) -> PathBuf {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file());
    found.unwrap_or_else(|| panic!("{name} is not installed: run scripts/setup-test-env"))
}

/// Starts Xvfb on a display it picks itself; returns it and the display (`:N`).
fn xvfb() -> (Killed, String) {
    let mut child = Command::new(tool("Xvfb"))
        .args([
            "-displayfd",
            "1",
            "-screen",
            "0",
            "1024x768x24",
            "-nolisten",
            "tcp",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let guard = Killed(child);
    let mut number = String::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        number.push(byte[0] as char);
    }
    assert!(!number.is_empty(), "Xvfb gave no display number");
    (guard, format!(":{number}"))
}

/// Distinct pixel values of an XWD screenshot (big-endian header; 4 bytes a pixel at depth 24).
fn distinct_colours(xwd: &[u8]) -> usize {
    let word = |i: usize| u32::from_be_bytes(xwd[i * 4..i * 4 + 4].try_into().unwrap()) as usize;
    let (header, width, height, line, colours) = (word(0), word(4), word(5), word(12), word(19));
    assert_eq!(line, width * 4, "4 bytes a pixel");
    let start = header + colours * 12;
    let pixels = &xwd[start..start + line * height];
    let set: std::collections::HashSet<&[u8]> = pixels.chunks_exact(4).collect();
    set.len()
}

#[test]
fn inspectrum_opens_a_pair_under_xvfb() {
    let mount = MountGuard::mount(&demo(), &[]);
    let (_xvfb, display) = xvfb();
    let base = mount.path("records/4/fields/projections/communications_rx/receivers/rx1/iq");
    let scratch = tempfile::tempdir().unwrap();
    let stderr_path = scratch.path().join("inspectrum.err");
    let mut viewer = Killed(
        Command::new(tool("inspectrum"))
            .arg(format!("{}.sigmf-data", base.display()))
            .env("DISPLAY", &display)
            .env("XDG_RUNTIME_DIR", scratch.path())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap(),
    );
    // Wait until the window shows a drawn spectrogram (thousands of colours; a blank screen
    // has one, an error dialog a few dozen), or fail after 20 s.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut colours = 0;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            viewer.0.try_wait().unwrap().is_none(),
            "inspectrum exited: {}",
            std::fs::read_to_string(&stderr_path).unwrap_or_default()
        );
        let shot = Command::new(tool("xwd"))
            .args(["-root", "-silent", "-display", &display])
            .output()
            .unwrap();
        assert!(shot.status.success(), "xwd failed");
        colours = distinct_colours(&shot.stdout);
        if colours > 1000 {
            break;
        }
    }
    assert!(colours > 1000, "the screen has only {colours} colours");
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(!stderr.to_lowercase().contains("error"), "{stderr}");
}

/// A `.npy` file of `dtype` and `shape` holding `bytes`.
fn npy(path: &Path, dtype: DType, shape: &[u64], bytes: &[u8]) {
    std::fs::write(path, common::npy::npy_bytes(dtype, shape, bytes)).unwrap();
}

#[test]
fn an_annotation_sets_boxes_annotate_the_source_receivers() {
    let copy = common::datasets::copy_tree(&demo(), |_| false);
    let rows = tempfile::tempdir().unwrap();
    // One detection for record 4, in rx0's frame: samples 1500..5500, -60 kHz to +20 kHz;
    // and one whose start is NaN, which no .sigmf-meta shows (a null line of the table).
    let extent: Vec<u8> = [
        1500.0f64,
        4000.0,
        -60_000.0,
        20_000.0,
        f64::NAN,
        1.0,
        0.0,
        1.0,
    ]
    .iter()
    .flat_map(|v| v.to_le_bytes())
    .collect();
    npy(
        &rows.path().join("extent.npy"),
        DType::F64,
        &[2, 4],
        &extent,
    );
    let identity: Vec<u8> = [1i32, 0, 1, 1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    npy(
        &rows.path().join("identity.npy"),
        DType::I32,
        &[2, 2],
        &identity,
    );
    // Mounted before the set is published: the label tables follow the catalog.
    let mount = MountGuard::mount(copy.path(), &["--metadata-ttl", "1"]);
    let labels = mount.path("columns/labels.jsonl");
    let own_size = std::fs::metadata(&labels).unwrap().len();
    let own = check_label_table(copy.path(), &mount);
    assert_eq!((own["lines"], own["set_lines"]), (14, 0));
    let row = r#"{"source_index": 4, "status": "success", "fields": {
        "projections/communications_rx/labels/boxes/extent": {"npy": "extent.npy",
            "axes": ["box", "extent"], "metadata": {"frequency_frame": "receiver_center_offset",
            "receiver_center_hz": 2400000000.0, "time_frame": "receiver_sample_index",
            "sample_rate_hz": 1000000.0}},
        "projections/communications_rx/labels/boxes/identity": {"npy": "identity.npy",
            "axes": ["box", "attribute"], "metadata": {"class_names": {"1": "qpsk"}}}}}"#;
    let rows_file = rows.path().join("rows.jsonl");
    std::fs::write(&rows_file, row.replace('\n', " ") + "\n").unwrap();
    common::cli::ok(&[
        "annotate",
        copy.path().to_str().unwrap(),
        "--name",
        "detections",
        "--rows",
        rows_file.to_str().unwrap(),
        "--fill",
        "skipped",
    ]);
    // The catalog watcher sees the set within a TTL and drops the kernel's copy of the table.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::metadata(&labels).unwrap().len() == own_size {
        assert!(
            std::time::Instant::now() < deadline,
            "columns/labels.jsonl did not change"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    let receivers = mount
        .path("records/4/annotations/detections/fields/projections/communications_rx/receivers");
    let listing = |dir: PathBuf| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    assert_eq!(listing(receivers.join("rx0")), ["iq.sigmf-meta"]);
    assert_eq!(listing(receivers.join("rx1")), ["iq.sigmf-meta"]);
    let paths: Vec<String> = ["rx0", "rx1"]
        .iter()
        .map(|rx| {
            receivers
                .join(rx)
                .join("iq.sigmf-meta")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut args = vec!["validate"];
    args.extend(paths.iter().map(String::as_str));
    let output = String::from_utf8(common::run_python("sigmf_check.py", &args, b"")).unwrap();
    // By hand: rx0 at the box's own rate, rx1 at twice it; edges plus 2.4 GHz.
    let expected = [(1500u64, 4000u64), (3000, 8000)];
    for (line, (start, count)) in output.lines().zip(expected) {
        let doc = json::parse_object(line.as_bytes(), &Default::default()).unwrap();
        let global = doc["global"].as_object().unwrap();
        assert_eq!(global["core:metadata_only"], Value::Bool(true));
        let list = doc["annotations"].as_array().unwrap();
        assert_eq!(list.len(), 1);
        let a = list[0].as_object().unwrap();
        assert_eq!(a["core:sample_start"].as_u64(), Some(start));
        assert_eq!(a["core:sample_count"].as_u64(), Some(count));
        assert_eq!(a["core:freq_lower_edge"].as_f64(), Some(2_399_940_000.0));
        assert_eq!(a["core:freq_upper_edge"].as_f64(), Some(2_400_020_000.0));
        assert_eq!(a["core:label"].as_str(), Some("qpsk"));
        assert_eq!(a["core:comment"].as_str(), Some("emitter 0"));
    }
    assert_eq!(output.lines().count(), 2);
    // A record whose row has no boxes shows none.
    let skipped = mount.path("records/5/annotations/detections/fields");
    assert!(listing(skipped).is_empty());
    // The label tables: the set's boxes of both receivers beside the records' own, the NaN
    // box a line of null numbers in each (labelled), as the library reads the set.
    let table = check_label_table(copy.path(), &mount);
    assert_eq!(
        (table["lines"], table["set_lines"], table["null_lines"]),
        (14 + 4, 4, 2)
    );
    let arrow = check_arrow_tables(&mount);
    assert_eq!(arrow["label_rows"], 18);
    assert_eq!(arrow["allocated"], 0, "pyarrow copied the tables");
    // The loader recipe over the set: record 4's one box shown (the NaN one is not).
    let loaded = run_torch_recipe(copy.path(), &mount, RX0, Some("detections"));
    assert_eq!(
        loaded,
        counts(&[
            ("records", 8),
            ("boxes", 1),
            ("labelled", 1),
            ("batches", 3)
        ])
    );
}

/// `count` records of one scene, each with a 4-sample IQ field.
fn one_scene(count: usize) -> tempfile::TempDir {
    let records = (0..count).map(|i| {
        Record::new(format!("r{i}"))
            .with_scene_id("all")
            .with_field(
                "rx/iq",
                Field::new(DType::C64, vec![4], vec![0u8; 32])
                    .unwrap()
                    .with_axes(vec![Axis::new("time", 4)]),
            )
    });
    publish_records(records.collect())
}

#[test]
fn a_scene_of_more_than_1024_records_has_no_collection() {
    for (count, shown) in [(1024, true), (1025, false)] {
        let dir = one_scene(count);
        let (_, ns) = counting_namespace(dir.path());
        let scene = lookup_path(&ns, "by-scene/all");
        let mut names = Vec::new();
        ns.read_dir(scene.ino, 0, |entry, _| {
            names.push(entry.name);
            false
        })
        .unwrap();
        // ".", "..", the links, and the collection when shown.
        assert_eq!(names.len(), 2 + count + usize::from(shown), "{count}");
        assert_eq!(names.contains(&"scene.sigmf-collection".to_string()), shown);
        let found = ns.lookup(scene.ino, "scene.sigmf-collection");
        assert_eq!(found.is_ok(), shown, "{count}");
        if let Ok(attr) = found {
            // 1024 streams of "<ordinal>/fields/rx/iq", every one hashed.
            let text = ns.read(attr.ino, 0, 1 << 22).unwrap();
            assert_eq!(text.len() as u64, attr.size);
            let doc = json::parse_object(&text, &Default::default()).unwrap();
            let body = doc["collection"].as_object().unwrap();
            assert_eq!(body["core:streams"].as_array().unwrap().len(), 1024);
        }
    }
}

#[test]
fn library_written_labels_in_other_frames_rates_and_receiver_counts() {
    for seed in ["1", "7"] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let written = common::run_python("sigmf_check.py", &["write", root, seed], b"");
        let written = json::parse_object(&written, &Default::default()).unwrap();
        let receivers = written["receivers"].as_u64().unwrap();
        let mount = MountGuard::mount(dir.path(), &[]);
        let checked = check_with_the_library(dir.path(), &mount);
        // Every receiver has a pair, every record and scene a collection, and the draw both
        // converted boxes and refused some (the counts themselves are the library's truth,
        // compared box by box inside the script).
        assert_eq!(checked["metas"], receivers, "seed {seed}");
        assert_eq!(checked["record_collections"], 12, "seed {seed}");
        assert_eq!(checked["scene_collections"], 4, "seed {seed}");
        assert!(checked["annotations"] > 0, "seed {seed}: {checked:?}");
        assert!(checked["left_out"] > 0, "seed {seed}: {checked:?}");
        let table = check_label_table(dir.path(), &mount);
        let arrow = check_arrow_tables(&mount);
        assert_eq!(arrow["label_rows"], table["lines"], "seed {seed}");
        assert!(
            table["lines"] >= checked["annotations"],
            "seed {seed}: {table:?}"
        );
    }
}

/// Top-level labels (the empty prefix) a top-level `iq` gets: converted when they follow the
/// convention, and when they do not (a frame the mount does not know, as `sds create` once
/// wrote), none shown and one line at the default level naming the field and the reason (on
/// stderr in the foreground; a daemonized mount's stderr is its `--log-file`).
#[test]
fn top_level_labels_are_shown_or_their_refusal_is_logged() {
    let good = [10.0, 20.0, -1e3, 1e3];
    let records = vec![
        Record::new("kept").with_field("iq", iq()).with_field(
            "labels/boxes/extent",
            extent(vec![1, 4], &good, offset_frame("receiver_center_offset")),
        ),
        Record::new("refused").with_field("iq", iq()).with_field(
            "labels/boxes/extent",
            extent(vec![1, 4], &good, offset_frame("absolute_hz")),
        ),
    ];
    let dir = publish_records(records);
    let mount = MountGuard::mount(dir.path(), &[]);
    let annotations = |ordinal: u64| {
        let path = mount.path(&format!("records/{ordinal}/fields/iq.sigmf-meta"));
        let doc = json::parse_object(&std::fs::read(path).unwrap(), &Default::default()).unwrap();
        doc["annotations"].as_array().unwrap().len()
    };
    assert_eq!(annotations(0), 1);
    assert_eq!(annotations(1), 0);
    let text = mount.log_text();
    let line = text
        .lines()
        .find(|l| l.contains("labels left out"))
        .unwrap_or_else(|| panic!("no line for the refused labels:\n{text}"));
    assert!(
        line.contains("labels/boxes/extent") && line.contains("frequency_frame \"absolute_hz\""),
        "{line}"
    );
    assert!(line.contains("WARN"), "{line}");
    drop(mount);

    // Daemonized, the same line reaches the file given with `--log-file`.
    let daemon = common::mount::DaemonMount::mount(dir.path(), &[]);
    let meta = std::fs::read(daemon.path("records/1/fields/iq.sigmf-meta")).unwrap();
    let doc = json::parse_object(&meta, &Default::default()).unwrap();
    assert_eq!(doc["annotations"].as_array().unwrap().len(), 0);
    let text = daemon.unmount();
    let line = text
        .lines()
        .find(|l| l.contains("labels left out"))
        .unwrap_or_else(|| panic!("no line in the --log-file for the refused labels:\n{text}"));
    assert!(
        line.contains("WARN") && line.contains("frequency_frame \"absolute_hz\""),
        "{line}"
    );
}
