//! Real FUSE mounts of fixture datasets, compared file by file against the library.
//!
//! Each test mounts with `sdsfs mount --foreground` and unmounts in a guard, even on failure.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use common::library::assert_records_read_as_library;
use common::mount::{peak_rss, MountGuard};
use sdsfs::dataset::{publish, write_shard, Dataset, OpenOptions, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::{self, Object, Value};
use sdsfs::format::record::{Axis, Field, Record};
use sdsfs::storage::{LocalStore, ObjectStore};

fn bytes_of(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn iq_field(samples: u64, seed: u8) -> Field {
    common::datasets::iq_capture(bytes_of(samples as usize * 8, seed))
}

fn sample_record(i: usize) -> Record {
    let mut metadata = Object::new();
    metadata.insert("snr_db".into(), Value::Float(12.5 + i as f64));
    Record::new(format!("rec-{}", i % 4))
        .with_scene_id(format!("scene/{}", i / 2))
        .with_metadata(metadata)
        .with_field(
            "projections/rx/receivers/rx0/iq",
            iq_field(500 + i as u64, i as u8),
        )
        .with_field(
            "projections/rx/labels/boxes/extent",
            Field::new(DType::F64, vec![2, 4], bytes_of(64, 7))
                .unwrap()
                .with_axes(vec![Axis::new("box", 2), Axis::new("extent", 4)]),
        )
        .with_field(
            "odd%name/x.raw/y",
            Field::new(DType::I16, vec![3], bytes_of(6, 3))
                .unwrap()
                .with_axes(vec![Axis::new("n", 3)]),
        )
        .with_field(
            "scalar",
            Field::new(DType::F32, vec![1], bytes_of(4, 1)).unwrap(),
        )
        .with_field(
            "empty",
            Field::new(DType::U8, vec![0], Vec::<u8>::new())
                .unwrap()
                .with_axes(vec![Axis::new("e", 0)]),
        )
}

/// Publishes `records` (split into shards of `per_shard`) into a fresh directory.
fn build_dataset(records: Vec<Record>, per_shard: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let mut receipts = Vec::new();
    for (i, chunk) in records.chunks(per_shard).enumerate() {
        receipts.push(
            write_shard(
                &store,
                chunk.to_vec(),
                &format!("w{i}"),
                0,
                &ShardOptions::default(),
            )
            .unwrap(),
        );
    }
    let mut options = PublishOptions::new("mount-test", "snap-1");
    options.shards_per_manifest = 2;
    publish(&store, &receipts, &options).unwrap();
    dir
}

fn open(dir: &Path) -> Dataset {
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir).unwrap());
    Dataset::open(store, OpenOptions::default()).unwrap()
}

/// Every regular file under `root`, relative path → content; checks sizes and modes on the way.
fn walk_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        assert_eq!(
            meta.permissions().mode() & 0o7777,
            0o555,
            "{}",
            dir.display()
        );
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else {
                assert_eq!(
                    meta.permissions().mode() & 0o7777,
                    0o444,
                    "{}",
                    path.display()
                );
                let content = std::fs::read(&path).unwrap();
                assert_eq!(
                    meta.len(),
                    content.len() as u64,
                    "st_size of {}",
                    path.display()
                );
                let relative = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(relative, content);
            }
        }
    }
    out
}

#[test]
fn whole_tree_matches_the_library() {
    let dir = build_dataset((0..7).map(sample_record).collect(), 3);
    let dataset = open(dir.path());
    let mount = MountGuard::mount(dir.path(), &[]);

    assert_eq!(
        std::fs::read(mount.path("dataset.json")).unwrap(),
        std::fs::read(dir.path().join("root.json")).unwrap()
    );
    assert_eq!(
        std::fs::read(mount.path("snapshot.json")).unwrap(),
        dataset.snapshot_bytes().to_vec()
    );
    let mut top: Vec<String> = std::fs::read_dir(mount.path(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    top.sort();
    assert_eq!(
        top,
        [
            "annotations",
            "by-id",
            "by-scene",
            "columns",
            "dataset.json",
            "records",
            "snapshot.json"
        ]
    );

    let listed: Vec<String> = std::fs::read_dir(mount.path("records"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, (0..7).map(|i| i.to_string()).collect::<Vec<_>>());

    let root_mtime = std::fs::metadata(dir.path().join("root.json"))
        .unwrap()
        .mtime();
    for ordinal in 0..7u64 {
        let record_dir = mount.path(&format!("records/{ordinal}"));
        assert_eq!(std::fs::metadata(&record_dir).unwrap().mtime(), root_mtime);
        // Modes and sizes of every file (the contents are the library's, checked below).
        walk_files(&record_dir);
        assert!(record_dir.join("annotations").is_dir());
    }
    let ordinals: Vec<u64> = (0..7).collect();
    assert_records_read_as_library(dir.path(), &mount.mountpoint, &ordinals);
    // The awkward name is encoded; its escape decodes back.
    assert!(mount
        .path("records/0/fields/odd%25name/x%2Eraw/y.raw")
        .is_file());

    // Preferred I/O sizes: files are read in large pieces; directories keep readdir's buffer
    // (sized from st_blksize by glibc's opendir) small, so the first names of a huge
    // `records/` come after a few READDIRPLUS requests, not hundreds.
    let blksize = |rel: &str| std::fs::metadata(mount.path(rel)).unwrap().blksize();
    assert!(blksize("records/0/fields/odd%25name/x%2Eraw/y.raw") >= 1 << 20);
    for dir in ["", "records", "records/0", "records/0/fields"] {
        assert!(blksize(dir) <= 128 << 10, "{dir}: {}", blksize(dir));
    }
}

#[test]
fn links_numpy_sigmf_and_read_only() {
    let dir = build_dataset((0..5).map(sample_record).collect(), 2);
    let dataset = open(dir.path());
    let mount = MountGuard::mount(dir.path(), &[]);

    // by-id points at the lowest ordinal with that id; by-scene groups by scene.
    assert_eq!(
        std::fs::read_link(mount.path("by-id/rec-0")).unwrap(),
        Path::new("../records/0")
    );
    assert_eq!(
        std::fs::read_link(mount.path("by-id/rec-1")).unwrap(),
        Path::new("../records/1")
    );
    assert!(mount.path("by-id/rec-0/record.json").is_file());
    let mut ids: Vec<String> = std::fs::read_dir(mount.path("by-id"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["rec-0", "rec-1", "rec-2", "rec-3"]);
    let mut scene: Vec<String> = std::fs::read_dir(mount.path("by-scene/scene%2F1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    scene.sort();
    assert_eq!(scene, ["2", "3", "scene.sigmf-collection"]);
    assert_eq!(
        std::fs::read_link(mount.path("by-scene/scene%2F1/3")).unwrap(),
        Path::new("../../records/3")
    );

    // numpy (plain and memory-mapped) and the sigmf library read the views exactly.
    let record = dataset.read_record(4).unwrap();
    let iq = &record.fields["projections/rx/receivers/rx0/iq"];
    let base = mount.path("records/4/fields/projections/rx/receivers/rx0/iq");
    let npy_paths: Vec<String> = [
        "records/4/fields/projections/rx/receivers/rx0/iq.npy",
        "records/4/fields/scalar.npy",
        "records/4/fields/empty.npy",
        "records/4/fields/projections/rx/labels/boxes/extent.npy",
    ]
    .iter()
    .map(|p| mount.path(p).to_string_lossy().into_owned())
    .collect();
    let args: Vec<&str> = std::iter::once("npy")
        .chain(npy_paths.iter().map(String::as_str))
        .collect();
    let output = String::from_utf8(common::run_python("mount_check.py", &args, b"")).unwrap();
    let results: Vec<Value> = output
        .lines()
        .map(|l| json::parse_value(l.as_bytes(), &Default::default()).unwrap())
        .collect();
    let expect = [
        ("<c8", vec![504u64], iq.data.to_vec()),
        ("<f4", vec![1], record.fields["scalar"].data.to_vec()),
        ("|u1", vec![0], vec![]),
        (
            "<f8",
            vec![2, 4],
            record.fields["projections/rx/labels/boxes/extent"]
                .data
                .to_vec(),
        ),
    ];
    for (result, (dtype, shape, data)) in results.iter().zip(expect) {
        let o = result.as_object().unwrap();
        assert_eq!(o["dtype"].as_str(), Some(dtype));
        assert_eq!(
            o["shape"],
            Value::Array(shape.into_iter().map(Value::from).collect())
        );
        let digest = sdsfs::format::documents::ids::sha256_hex(&data);
        assert_eq!(o["sha256"].as_str(), Some(digest.as_str()));
        assert_eq!(o["mmap_sha256"].as_str(), Some(digest.as_str()));
    }
    let meta_path = format!("{}.sigmf-meta", base.display());
    let output = String::from_utf8(common::run_python(
        "mount_check.py",
        &["sigmf", &meta_path],
        b"",
    ))
    .unwrap();
    let result = json::parse_value(output.trim().as_bytes(), &Default::default()).unwrap();
    let o = result.as_object().unwrap();
    assert_eq!(o["count"].as_u64(), Some(504));
    assert_eq!(o["sample_rate"].as_f64(), Some(1e6));
    assert_eq!(
        o["sha256"].as_str(),
        Some(sdsfs::format::documents::ids::sha256_hex(&iq.data).as_str())
    );

    // Every write fails with EROFS.
    let erofs = |r: std::io::Result<()>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{what}: {e}");
    };
    erofs(std::fs::write(mount.path("new.txt"), b"x"), "create");
    erofs(std::fs::create_dir(mount.path("records/newdir")), "mkdir");
    erofs(std::fs::remove_file(mount.path("dataset.json")), "unlink");
    erofs(
        std::fs::rename(mount.path("dataset.json"), mount.path("x.json")),
        "rename",
    );
    erofs(
        std::fs::set_permissions(
            mount.path("dataset.json"),
            std::fs::Permissions::from_mode(0o644),
        ),
        "chmod",
    );
    erofs(
        std::fs::OpenOptions::new()
            .write(true)
            .open(mount.path("records/0/record.json"))
            .map(|_| ()),
        "open for write",
    );
}

#[test]
fn deleted_data_shards_keep_rows_and_fail_reads_with_eio() {
    let dir = build_dataset((0..4).map(sample_record).collect(), 2);
    // Delete every data shard; metadata shards stay.
    let data_dir = dir.path().join("objects/data");
    std::fs::remove_dir_all(&data_dir).unwrap();
    let mount = MountGuard::mount(dir.path(), &[]);
    for ordinal in 0..4 {
        let record_json =
            std::fs::read(mount.path(&format!("records/{ordinal}/record.json"))).unwrap();
        assert!(!record_json.is_empty());
        let raw = mount.path(&format!("records/{ordinal}/fields/scalar.raw"));
        assert_eq!(std::fs::metadata(&raw).unwrap().len(), 4);
        let json_view =
            std::fs::read(mount.path(&format!("records/{ordinal}/fields/scalar.json"))).unwrap();
        assert!(!json_view.is_empty());
        let error = std::fs::read(&raw).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EIO), "{error}");
    }
    // The mount is still up and the log names the object and ordinal.
    assert!(mount.path("dataset.json").is_file());
    let log = mount.log_text();
    assert!(log.contains("objects/data/"), "{log}");
}

#[test]
fn concurrent_readers_with_a_tiny_cache_read_exact_bytes() {
    let records: Vec<Record> = (0..12).map(sample_record).collect();
    let dir = build_dataset(records, 4);
    let dataset = Arc::new(open(dir.path()));
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "1M"]);
    let root = mount.path("records");
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let root = root.clone();
            let dataset = dataset.clone();
            scope.spawn(move || {
                for round in 0..20u64 {
                    let ordinal = (t * 7 + round * 5) % 12;
                    let record = dataset.read_record(ordinal).unwrap();
                    let iq = &record.fields["projections/rx/receivers/rx0/iq"].data;
                    let path = root.join(format!(
                        "{ordinal:02}/fields/projections/rx/receivers/rx0/iq.raw"
                    ));
                    let file = std::fs::File::open(&path).unwrap();
                    // Unaligned partial reads as well as whole reads.
                    let offset = (round * 13) % iq.len() as u64;
                    let mut buffer = vec![0u8; 100.min(iq.len() - offset as usize)];
                    file.read_exact_at(&mut buffer, offset).unwrap();
                    assert_eq!(
                        &buffer[..],
                        &iq[offset as usize..offset as usize + buffer.len()]
                    );
                    let mut whole = Vec::new();
                    std::fs::File::open(&path)
                        .unwrap()
                        .read_to_end(&mut whole)
                        .unwrap();
                    assert_eq!(&whole[..], &iq[..]);
                }
            });
        }
    });
}

#[test]
fn a_large_field_streams_through_a_small_cache() {
    // 256 MiB of complex64 (32 Mi samples), incompressible enough to be stored at full size.
    const SAMPLES: u64 = 32 << 20;
    let mut data = vec![0u8; (SAMPLES * 8) as usize];
    let mut state = 0x9e3779b97f4a7c15u64;
    for chunk in data.chunks_mut(8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        chunk.copy_from_slice(&state.to_le_bytes());
    }
    let field = Field::new(DType::C64, vec![SAMPLES], data)
        .unwrap()
        .with_axes(vec![Axis::new("time", SAMPLES)]);
    let record = Record::new("big").with_field("iq", field);
    let expected_digest = sdsfs::format::documents::ids::sha256_hex(&record.fields["iq"].data);
    let dir = build_dataset(vec![record], 1);
    let cache = 64u64 << 20;
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "64M"]);
    let path = mount.path("records/0/fields/iq.raw");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), SAMPLES * 8);
    let mut file = std::fs::File::open(&path).unwrap();
    let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buffer).unwrap();
        if n == 0 {
            break;
        }
        sha2::Digest::update(&mut hasher, &buffer[..n]);
        total += n as u64;
    }
    assert_eq!(total, SAMPLES * 8);
    assert_eq!(hex::encode(sha2::Digest::finalize(hasher)), expected_digest);
    let peak = peak_rss(mount.pid());
    let bound = cache + (64 << 20);
    assert!(
        peak > 0 && peak <= bound,
        "daemon peak RSS {peak} exceeds cache + 64 MiB = {bound}"
    );
}
