//! The computed files (pictures, `.sigmf-meta`s, collections) of hostile records, through a real
//! mount: extreme metadata values never panic the daemon and every read gives the size `stat`
//! gave; a box table at its cap with absurd class names gives documents within their caps that
//! the `sigmf` library validates and that say what they left out, rendered once and within the
//! memory budget; a collection over 200 receivers is bounded, ends on SIGINT within a second
//! and is not made again on the next read. Each dataset is built here.

mod common;

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::datasets::obj;
use common::mount::{peak_rss, MountGuard};
use common::namespace::{counting_namespace, lookup_path};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::{self, Object, Value};
use sdsfs::format::record::{Axis, Coordinate, Field, Record};
use sdsfs::fs::namespace::Namespace;
use sha2::{Digest, Sha512};

const MIB: u64 = 1 << 20;
/// The caps as docs/RELIABILITY.md states them ("Computed files").
const META_CAP: u64 = 16 * MIB;
const CLASS_NAME_CAP: usize = 256;
const SAMPLES: u64 = 1000;

/// An IQ field of [`SAMPLES`] samples (a tone) with `metadata`, and `coordinate` on its axis.
fn iq(metadata: Object, coordinate: Option<Coordinate>) -> Field {
    let data: Vec<u8> = (0..SAMPLES)
        .flat_map(|i| {
            let phase = i as f32 * 0.3;
            [phase.cos().to_le_bytes(), phase.sin().to_le_bytes()].concat()
        })
        .collect();
    let mut axis = Axis::new("time", SAMPLES);
    if let Some(coordinate) = coordinate {
        axis = axis.with_coordinate(coordinate);
    }
    Field::new(DType::C64, vec![SAMPLES], data)
        .unwrap()
        .with_axes(vec![axis])
        .with_metadata(metadata)
}

/// Field metadata stating a uniform `rate` and a `center` (either left out when `None`).
fn rx_metadata(rate: Option<f64>, center: Option<f64>) -> Object {
    let mut metadata = Object::new();
    if let Some(rate) = rate {
        let block = obj(&[
            ("kind", Value::from("uniform")),
            ("sample_rate_hz", Value::Float(rate)),
        ]);
        metadata.insert("time_coordinates".into(), Value::Object(block));
    }
    if let Some(center) = center {
        metadata.insert("center_frequency_hz".into(), Value::Float(center));
    }
    metadata
}

/// A box table (`start, duration, low, high` per row) in the absolute frame at `rate`.
fn extent(rows: &[[f64; 4]], rate: f64) -> Field {
    let bytes: Vec<u8> = rows
        .iter()
        .flatten()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let frame = obj(&[
        ("frequency_frame", Value::from("absolute")),
        ("time_frame", Value::from("receiver_sample_index")),
        ("sample_rate_hz", Value::Float(rate)),
    ]);
    let count = rows.len() as u64;
    Field::new(DType::F64, vec![count, 4], bytes)
        .unwrap()
        .with_axes(vec![Axis::new("box", count), Axis::new("extent", 4)])
        .with_metadata(frame)
}

/// `count` identities of class 1 (emitter = box index), class 1 named `name`.
fn identity(count: u64, name: &str) -> Field {
    let bytes: Vec<u8> = (0..count as i32)
        .flat_map(|i| [1i32.to_le_bytes(), i.to_le_bytes()].concat())
        .collect();
    let names = obj(&[("1", Value::from(name))]);
    Field::new(DType::I32, vec![count, 2], bytes)
        .unwrap()
        .with_axes(vec![Axis::new("box", count), Axis::new("attr", 2)])
        .with_metadata(obj(&[("class_names", Value::Object(names))]))
}

/// `count` boxes of one sample each, -1..1 Hz, at samples `i mod SAMPLES` (inside the field).
fn many_boxes(count: u64) -> Vec<[f64; 4]> {
    (0..count)
        .map(|i| [(i % SAMPLES) as f64, 1.0, -1.0, 1.0])
        .collect()
}

fn publish_records(records: Vec<Record>) -> tempfile::TempDir {
    common::datasets::publish_records(records, "hostile-views")
}

/// Reads `path` whole and then drops its pages from the kernel's cache, so that the next read
/// reaches the daemon again.
fn read_uncached(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    // SAFETY: advice on a descriptor we own; it only drops clean cached pages.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    Ok(bytes)
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// User and system CPU time the process `pid` has used.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start at state; utime and
    // stime are fields 14 and 15, in clock ticks (100 a second on Linux).
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<u64> = after
        .split(' ')
        .skip(11)
        .take(2)
        .map(|v| v.parse().unwrap())
        .collect();
    Duration::from_millis((fields[0] + fields[1]) * 10)
}

fn assert_alive(mount: &mut MountGuard) {
    let exited = mount.child.as_mut().unwrap().try_wait().unwrap();
    assert!(exited.is_none(), "the daemon exited: {}", mount.log_text());
    let root = std::fs::read(mount.path("dataset.json")).expect("a later read of another file");
    assert!(!root.is_empty());
}

/// A mount of `dataset` at `--cache-size 64M`, its `file` and that file's size, checked to be
/// within the 16 MiB cap of a document.
fn mount_capped(dataset: &Path, file: &str) -> (MountGuard, std::path::PathBuf, u64) {
    let mount = MountGuard::mount(dataset, &["--cache-size", "64M"]);
    let path = mount.path(file);
    let len = size(&path);
    assert!(len <= META_CAP, "{file}: {len} bytes");
    (mount, path, len)
}

/// Coordinates no box should have, and one good box, for every receiver.
const HOSTILE_BOXES: [[f64; 4]; 7] = [
    [0.0, 10.0, -1e300, 1e300],
    [f64::NAN, 1.0, 0.0, 1.0],
    [f64::INFINITY, 1.0, 0.0, 1.0],
    [1e300, 1e300, -1e300, 1e300],
    [0.0, 1.0, f64::NAN, f64::INFINITY],
    [5.0, 5.0, 1e-300, 2e-300],
    [-1e300, f64::NEG_INFINITY, -f64::MAX, f64::MAX],
];

#[test]
fn extreme_metadata_never_panics_and_every_read_has_the_stat_size() {
    // (rate, centre, time step in seconds): what careless producers and `--from-sigmf` wrote.
    let cases: [(Option<f64>, Option<f64>, Option<f64>); 7] = [
        (Some(1e6), Some(1e100), None),
        (Some(1e300), Some(2.4e9), None),
        (None, Some(2.4e9), Some(1e-300)),
        (Some(1.7e308), Some(1.7e308), None),
        (Some(5e-324), Some(1.0), None),
        (Some(-1e6), Some(-5.0), None),
        (Some(f64::MAX), Some(f64::MIN_POSITIVE), None),
    ];
    let mut records = Vec::new();
    for (i, (rate, center, step)) in cases.iter().enumerate() {
        let coordinate = step.map(|s| Coordinate::regular(0.0, s).with_unit("s"));
        let box_rate = rate
            .filter(|r| r.is_finite() && *r > 0.0)
            .or(step.map(|s| 1.0 / s))
            .unwrap_or(1e6);
        records.push(
            Record::new(format!("extreme-{i}"))
                .with_field("p/rx0/iq", iq(rx_metadata(*rate, *center), coordinate))
                .with_field("p/labels/boxes/extent", extent(&HOSTILE_BOXES, box_rate))
                .with_field("p/labels/boxes/identity", identity(7, &"é".repeat(300))),
        );
    }
    // An empty box table.
    records.push(
        Record::new("empty-table")
            .with_field("p/rx0/iq", iq(rx_metadata(Some(1e6), Some(1e9)), None))
            .with_field("p/labels/boxes/extent", extent(&[], 1e6)),
    );
    let dir = publish_records(records);
    let mut mount = MountGuard::mount(dir.path(), &[]);
    for ordinal in 0..8 {
        let files = [
            format!("records/{ordinal}/fields/p/rx0/iq.sigmf-meta"),
            format!("records/{ordinal}/fields/p/rx0/iq.spectrogram.png"),
            format!("records/{ordinal}/preview.png"),
            format!("records/{ordinal}/record.sigmf-collection"),
        ];
        for file in &files {
            let path = mount.path(file);
            let want = size(&path);
            for attempt in 0..20 {
                let bytes = read_uncached(&path).unwrap_or_else(|e| {
                    panic!("{file}, read {attempt}: {e}\n{}", mount.log_text())
                });
                assert_eq!(bytes.len() as u64, want, "{file}, read {attempt}");
            }
            if file.ends_with(".sigmf-meta") || file.ends_with("collection") {
                let bytes = std::fs::read(&path).unwrap();
                json::parse_object(&bytes, &Default::default())
                    .unwrap_or_else(|e| panic!("{file} is not JSON: {e}"));
            }
        }
    }
    assert_alive(&mut mount);
}

/// Record 0: 100,000 boxes (the cap of a table) of a class named by 20,000 characters; record
/// 1: 10 boxes of a class named by 1,000,000.
fn huge_tables() -> tempfile::TempDir {
    let labelled = |id: &str, boxes: u64, name: String| {
        Record::new(id)
            .with_field("p/rx0/iq", iq(rx_metadata(Some(1e6), Some(1e9)), None))
            .with_field("p/labels/boxes/extent", extent(&many_boxes(boxes), 1e6))
            .with_field("p/labels/boxes/identity", identity(boxes, &name))
    };
    publish_records(vec![
        labelled("boxes-100000", 100_000, "n".repeat(20_000)),
        labelled("name-1000000", 10, "m".repeat(1_000_000)),
    ])
}

#[test]
fn a_capped_box_table_gives_bounded_valid_documents_within_the_budget() {
    let dir = huge_tables();
    let (mut mount, meta, len) = mount_capped(dir.path(), "records/0/fields/p/rx0/iq.sigmf-meta");
    // The first 300 bytes come at once (the whole document was rendered per read: 45 s).
    let started = Instant::now();
    let mut head = vec![0u8; 300];
    std::fs::File::open(&meta)
        .unwrap()
        .read_exact(&mut head)
        .unwrap();
    let first = started.elapsed();
    eprintln!("head -c 300: {first:?}");
    assert!(first < Duration::from_secs(5), "head -c 300: {first:?}");
    // A sequential read of the whole document renders it once: it takes about as long as the
    // first piece did, not 128 times as long.
    let started = Instant::now();
    let bytes = std::fs::read(&meta).unwrap();
    let whole = started.elapsed();
    eprintln!("cat of {len} bytes: {whole:?}");
    assert_eq!(bytes.len() as u64, len);
    assert!(whole < Duration::from_secs(5), "cat: {whole:?}");
    // The sigmf library validates it; it says how many boxes it left out.
    let line = common::run_python("sigmf_check.py", &["validate", meta.to_str().unwrap()], b"");
    let doc = json::parse_object(&line, &Default::default()).unwrap();
    let annotations = doc["annotations"].as_array().unwrap();
    let left_out = doc["global"].as_object().unwrap()["sdsfs:annotations_left_out"]
        .as_u64()
        .unwrap();
    assert!(annotations.len() > 10_000, "{}", annotations.len());
    assert_eq!(annotations.len() as u64 + left_out, 100_000);
    let label = annotations[0].as_object().unwrap()["core:label"]
        .as_str()
        .unwrap();
    assert!(
        label.len() <= CLASS_NAME_CAP && label.starts_with("nnn"),
        "{label}"
    );
    // The 1,000,000-character name: no abort, a small document with every box.
    let named = mount.path("records/1/fields/p/rx0/iq.sigmf-meta");
    let bytes = read_uncached(&named).unwrap();
    assert_eq!(bytes.len() as u64, size(&named));
    assert!(bytes.len() < 64 << 10, "{} bytes", bytes.len());
    let doc = json::parse_object(&bytes, &Default::default()).unwrap();
    assert_eq!(doc["annotations"].as_array().unwrap().len(), 10);
    for ordinal in 0..2 {
        for file in ["fields/p/rx0/iq.spectrogram.png", "preview.png"] {
            let path = mount.path(&format!("records/{ordinal}/{file}"));
            assert_eq!(read_uncached(&path).unwrap().len() as u64, size(&path));
        }
    }
    let peak = peak_rss(mount.pid());
    eprintln!("peak RSS {} MiB", peak / MIB);
    assert!(peak <= 128 * MIB, "peak RSS {} MiB", peak / MIB);
    assert_alive(&mut mount);
}

/// Reads `ino` in 128 KiB pieces, as `cat` does.
fn read_in_pieces(ns: &Namespace, ino: u64, len: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while (out.len() as u64) < len {
        let piece = ns.read(ino, out.len() as u64, 128 << 10).unwrap();
        assert!(!piece.is_empty());
        out.extend_from_slice(&piece);
    }
    out
}

#[test]
fn a_sequential_read_renders_a_document_once() {
    let dir = huge_tables();
    let (_store, ns) = counting_namespace(dir.path());
    let meta = lookup_path(&ns, "records/0/fields/p/rx0/iq.sigmf-meta");
    assert!(meta.size > 100 * (128 << 10), "{} bytes", meta.size);
    let bytes = read_in_pieces(&ns, meta.ino, meta.size);
    assert_eq!(bytes.len() as u64, meta.size);
    assert_eq!(ns.computed_renders(), 1);
    // The collection hashes the meta it has kept: one render more, none on a second read.
    let collection = lookup_path(&ns, "records/0/record.sigmf-collection");
    for _ in 0..2 {
        read_in_pieces(&ns, collection.ino, collection.size);
    }
    assert_eq!(ns.computed_renders(), 2);
}

/// One record of 200 receivers sharing one table of 100,000 boxes (absolute frame: each
/// receiver's `.sigmf-meta` annotates all of them).
fn two_hundred_receivers() -> tempfile::TempDir {
    let mut record = Record::new("rx-200")
        .with_field("p/labels/boxes/extent", extent(&many_boxes(100_000), 1e6))
        .with_field("p/labels/boxes/identity", identity(100_000, "burst"));
    for rx in 0..200 {
        let field = iq(rx_metadata(Some(1e6), Some(1e9 + rx as f64)), None);
        record = record.with_field(format!("p/rx{rx:03}/iq"), field);
    }
    publish_records(vec![record])
}

#[test]
fn a_collection_of_200_receivers_is_bounded_interruptible_and_kept() {
    let dir = two_hundred_receivers();
    let (mut mount, collection, len) =
        mount_capped(dir.path(), "records/0/record.sigmf-collection");
    // SIGINT ends the first read (nothing rendered yet) within a second.
    let started = Instant::now();
    let status = Command::new("timeout")
        .args(["-s", "INT", "1", "cat"])
        .arg(&collection)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    let ended = started.elapsed();
    assert!(!status.success(), "cat finished within a second");
    assert!(ended < Duration::from_secs(2), "cat ended after {ended:?}");
    // The kernel lets `cat` go while the daemon still serves its read: the daemon must stop
    // working too (it rendered and hashed 3.7 GB for 50 s on), within a second.
    std::thread::sleep(Duration::from_secs(1));
    let idle_from = cpu_time(mount.pid());
    std::thread::sleep(Duration::from_secs(1));
    let busy = cpu_time(mount.pid()) - idle_from;
    eprintln!("cat ended after {ended:?}; the daemon then worked {busy:?} in 1 s");
    assert!(
        busy < Duration::from_millis(200),
        "the daemon worked on: {busy:?}"
    );
    // Read whole: every hash listed is the SHA-512 of the meta it names; what does not fit
    // is counted.
    let bytes = read_uncached(&collection).unwrap();
    assert_eq!(bytes.len() as u64, len);
    let doc = json::parse_object(&bytes, &Default::default()).unwrap();
    let body = doc["collection"].as_object().unwrap();
    let streams = body["core:streams"].as_array().unwrap();
    let left_out = body["sdsfs:streams_left_out"].as_u64().unwrap();
    assert!(!streams.is_empty());
    assert_eq!(streams.len() as u64 + left_out, 200);
    for stream in streams.iter().take(2) {
        let stream = stream.as_object().unwrap();
        let name = stream["name"].as_str().unwrap();
        let meta = std::fs::read(mount.path(&format!("records/0/{name}.sigmf-meta"))).unwrap();
        assert_eq!(
            stream["hash"].as_str().unwrap(),
            hex::encode(Sha512::digest(&meta))
        );
    }
    // A second read is served from what the first kept: the daemon does no work to speak of.
    let before = cpu_time(mount.pid());
    assert_eq!(read_uncached(&collection).unwrap(), bytes);
    let spent = cpu_time(mount.pid()) - before;
    assert!(spent < Duration::from_millis(200), "second read: {spent:?}");
    let peak = peak_rss(mount.pid());
    eprintln!("peak RSS {} MiB", peak / MIB);
    assert!(peak <= 128 * MIB, "peak RSS {} MiB", peak / MIB);
    assert_alive(&mut mount);
}

#[test]
fn a_collection_is_rendered_once_and_its_metas_hashed_once() {
    let dir = two_hundred_receivers();
    let (_store, ns) = counting_namespace(dir.path());
    let collection = lookup_path(&ns, "records/0/record.sigmf-collection");
    let first = read_in_pieces(&ns, collection.ino, collection.size);
    let doc = json::parse_object(&first, &Default::default()).unwrap();
    let listed = doc["collection"].as_object().unwrap()["core:streams"]
        .as_array()
        .unwrap()
        .len() as u64;
    // The collection and each meta it lists, once.
    assert_eq!(ns.computed_renders(), 1 + listed);
    assert_eq!(read_in_pieces(&ns, collection.ino, collection.size), first);
    assert_eq!(ns.computed_renders(), 1 + listed);
}

/// An annotation set whose row labels record 0's IQ field with 100,000 boxes: the
/// metadata-only `.sigmf-meta` the set shows for that field is rendered once for a sequential
/// read and kept (it was rendered for every 128 KiB read: about 100 renders of 16 MiB), and a
/// second read renders nothing.
#[test]
fn an_annotation_set_s_document_is_rendered_once_for_a_sequential_read() {
    use sdsfs::annotations::{
        publish_annotations, AnnotationOptions, AnnotationRecord, AnnotationStatus,
    };
    let dir =
        publish_records(vec![Record::new("source")
            .with_field("p/rx0/iq", iq(rx_metadata(Some(1e6), Some(1e9)), None))]);
    let dataset = sdsfs::dataset::Dataset::open(
        common::datasets::local_store(dir.path()),
        sdsfs::dataset::OpenOptions::default(),
    )
    .unwrap();
    let mut row = AnnotationRecord::new("source", 0, AnnotationStatus::Success);
    row.fields.insert(
        "p/labels/boxes/extent".into(),
        extent(&many_boxes(100_000), 1e6),
    );
    row.fields.insert(
        "p/labels/boxes/identity".into(),
        identity(100_000, &"n".repeat(200)),
    );
    let options = AnnotationOptions::default();
    publish_annotations(&dataset, "det", &[row], &Default::default(), &options).unwrap();
    let (_store, ns) = counting_namespace(dir.path());
    let meta = lookup_path(&ns, "records/0/annotations/det/fields/p/rx0/iq.sigmf-meta");
    assert!(meta.size > 100 * (128 << 10), "{} bytes", meta.size);
    let before = ns.computed_renders();
    let bytes = read_in_pieces(&ns, meta.ino, meta.size);
    let doc = json::parse_object(&bytes, &Default::default()).unwrap();
    assert!(doc["annotations"].as_array().unwrap().len() > 10_000);
    assert_eq!(ns.computed_renders() - before, 1);
    assert_eq!(read_in_pieces(&ns, meta.ino, meta.size), bytes);
    assert_eq!(ns.computed_renders() - before, 1);
}
