//! The mount's pictures (`<field>.spectrogram.png`, `records/<n>/preview.png`) checked with
//! real tools: Pillow verifies and decodes every PNG of the demo and of a library-written
//! dataset whose bursts lie exactly inside their label boxes, and the energy inside each box
//! (boxes from `sigmf_check.py`'s library-side truth, mapped to pixels by the axes
//! docs/MOUNT.md states) stands above the energy outside (`tests/python/picture_check.py`);
//! `stat` of a picture reads no data shard and reading one decodes its record once; bytes are
//! the same across mounts; a corrupt record gives EIO and a huge field stays within the memory
//! budget.

mod common;

use std::path::{Path, PathBuf};

use common::datasets::{copy_tree, files_below, iq_capture};
use common::mount::{peak_rss, MountGuard};
use common::namespace::{counting_namespace, data_reads, lookup_path};
use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
use sdsfs::format::json;
use sdsfs::format::record::Record;
use sdsfs::fs::namespace::{Attr, Namespace};
use sdsfs::storage::LocalStore;

const MIB: u64 = 1 << 20;
const RX: &str = "fields/projections/communications_rx/receivers";

fn demo() -> PathBuf {
    common::repo_root().join("fixtures/demo")
}

/// `picture_check.py` over a mount of `dataset`: its counts.
fn check_with_the_library(dataset: &Path, mount: &MountGuard) -> Vec<(String, u64)> {
    let root = dataset.to_str().unwrap();
    let mounted = mount.path("");
    let output = common::run_python("picture_check.py", &[root, mounted.to_str().unwrap()], b"");
    let doc = json::parse_object(&output, &Default::default()).unwrap();
    doc.iter()
        .map(|(k, v)| (k.to_string(), v.as_u64().unwrap()))
        .collect()
}

fn count(counts: &[(String, u64)], key: &str) -> u64 {
    counts.iter().find(|(k, _)| k == key).unwrap().1
}

#[test]
fn demo_pictures_open_and_show_their_boxes() {
    let mount = MountGuard::mount(&demo(), &[]);
    let counts = check_with_the_library(&demo(), &mount);
    // By hand from the demo: rx0 in all 8 records and rx1 in scene-0002's 2; boxes 2 × (1 +
    // 1 + 2 + 1) on rx0 and 2 × 2 on rx1, each in its spectrogram and its preview panel;
    // every preview shows its receivers and the radar's baseband and noise pulses.
    let want = [
        ("spectrograms", 10),
        ("boxes", 14),
        ("previews", 8),
        ("panels", 8 * 3 + 2),
        ("preview_boxes", 14),
    ];
    for (key, value) in want {
        assert_eq!(count(&counts, key), value, "{key}: {counts:?}");
    }
}

#[test]
fn library_written_bursts_stand_inside_their_boxes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let written = common::run_python("picture_check.py", &["write", root, "3"], b"");
    let written = json::parse_object(&written, &Default::default()).unwrap();
    let mount = MountGuard::mount(dir.path(), &[]);
    let counts = check_with_the_library(dir.path(), &mount);
    // By hand from the script: receivers 1 + 2 + 3 + 9, every box on every receiver; previews
    // of 1, 2, 3 + the radar, 8 (of 9) and 0 panels.
    assert_eq!(
        count(&counts, "spectrograms"),
        written["receivers"].as_u64().unwrap()
    );
    assert_eq!(count(&counts, "spectrograms"), 15);
    assert_eq!(count(&counts, "boxes"), written["boxes"].as_u64().unwrap());
    assert_eq!(count(&counts, "previews"), 5);
    assert_eq!(count(&counts, "panels"), 1 + 2 + 4 + 8);
    assert!(count(&counts, "preview_boxes") > 0, "{counts:?}");
}

/// Reads a whole file through `ns` in pieces of `piece` bytes.
fn read_in_pieces(ns: &Namespace, ino: u64, piece: u32) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let bytes = ns.read(ino, out.len() as u64, piece).unwrap();
        if bytes.is_empty() {
            return out;
        }
        out.extend_from_slice(&bytes);
    }
}

#[test]
fn stat_reads_no_data_shard_and_reading_decodes_once() {
    let (store, ns) = counting_namespace(&demo());
    let paths = [
        format!("records/4/{RX}/rx0/iq.spectrogram.png"),
        format!("records/4/{RX}/rx1/iq.spectrogram.png"),
        "records/4/preview.png".to_string(),
    ];
    let attrs: Vec<Attr> = paths.iter().map(|p| lookup_path(&ns, p)).collect();
    let record = lookup_path(&ns, "records/4");
    let mut names = Vec::new();
    ns.read_dir(record.ino, 0, |entry, _| {
        names.push(entry.name);
        false
    })
    .unwrap();
    assert!(names.contains(&"preview.png".to_string()), "{names:?}");
    assert_eq!(data_reads(&store), 0, "stat and ls of the pictures");
    // Every read, in 4 KiB pieces, gives exactly the size stat gave; record 4 is decoded once.
    for (path, attr) in paths.iter().zip(&attrs) {
        let bytes = read_in_pieces(&ns, attr.ino, 4096);
        assert_eq!(bytes.len() as u64, attr.size, "{path}");
        assert_eq!(&bytes[1..4], b"PNG", "{path}");
    }
    let misses = ns
        .record_cache()
        .counters()
        .misses
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(misses, 1, "record 4 decoded once");
}

/// The attributes of `path`, if it exists.
fn lookup_maybe(ns: &Namespace, path: &str) -> Option<Attr> {
    let mut attr = ns.getattr(sdsfs::fs::inode::Ino::Root.encode()).ok()?;
    for name in path.split('/') {
        attr = ns.lookup(attr.ino, name).ok()?;
    }
    Some(attr)
}

/// Every picture of the demo read in 4 KiB pieces by a thread each, all at once (a file
/// manager drawing thumbnails): each is rendered once, whatever the interleaving.
#[test]
fn concurrent_readers_of_many_pictures_render_each_once() {
    let (_store, ns) = counting_namespace(&demo());
    let mut paths = Vec::new();
    for ordinal in 0..8 {
        paths.push(format!("records/{ordinal}/preview.png"));
        for rx in 0..2 {
            let path = format!("records/{ordinal}/{RX}/rx{rx}/iq.spectrogram.png");
            if lookup_maybe(&ns, &path).is_some() {
                paths.push(path);
            }
        }
    }
    // The demo's 8 previews and 10 spectrograms.
    assert_eq!(paths.len(), 18, "{paths:?}");
    let attrs: Vec<Attr> = paths.iter().map(|p| lookup_path(&ns, p)).collect();
    std::thread::scope(|scope| {
        for (path, attr) in paths.iter().zip(&attrs) {
            let ns = &ns;
            scope.spawn(move || {
                for _ in 0..2 {
                    let bytes = read_in_pieces(ns, attr.ino, 4096);
                    assert_eq!(bytes.len() as u64, attr.size, "{path}");
                }
            });
        }
    });
    assert_eq!(ns.picture_renders(), 18);
}

/// Every picture of records 0 and 4 of a mount of `dataset`, by path.
fn pictures(dataset: &Path, extra: &[&str]) -> Vec<(String, Vec<u8>)> {
    let mount = MountGuard::mount(dataset, extra);
    let paths = [
        "records/0/preview.png".to_string(),
        format!("records/0/{RX}/rx0/iq.spectrogram.png"),
        "records/4/preview.png".to_string(),
        format!("records/4/{RX}/rx0/iq.spectrogram.png"),
        format!("records/4/{RX}/rx1/iq.spectrogram.png"),
    ];
    paths
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(mount.path(&path)).unwrap();
            (path, bytes)
        })
        .collect()
}

#[test]
fn pictures_are_the_same_bytes_across_mounts() {
    let first = pictures(&demo(), &[]);
    // A second mount, of a copy, with a cache that decodes record 4 into temporary files.
    let copy = copy_tree(&demo(), |_| false);
    let second = pictures(copy.path(), &["--cache-size", "2M"]);
    for ((path, a), (_, b)) in first.iter().zip(&second) {
        assert!(a == b, "{path} differs between mounts");
    }
    // Different records give different pictures (the comparison above is not vacuous).
    assert_ne!(first[1].1, first[3].1);
}

#[test]
fn a_corrupt_record_gives_eio_and_the_mount_stays_up() {
    // Every data shard overwritten with zeros of its own length: rows (metadata shards) stay.
    let copy = copy_tree(&demo(), |_| false);
    let shards = files_below(copy.path())
        .into_iter()
        .filter(|(rel, _)| rel.starts_with("objects/data/"));
    for (_, path) in shards {
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::write(&path, vec![0u8; len as usize]).unwrap();
    }
    let mount = MountGuard::mount(copy.path(), &[]);
    for path in [
        "records/4/preview.png".to_string(),
        format!("records/4/{RX}/rx1/iq.spectrogram.png"),
    ] {
        let path = mount.path(&path);
        assert!(std::fs::metadata(&path).unwrap().len() > 0);
        let error = std::fs::read(&path).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EIO), "{path:?}: {error}");
    }
    assert!(mount.path("dataset.json").is_file(), "the mount is up");
    assert!(std::fs::read(mount.path("records/4/record.json")).is_ok());
}

#[test]
fn a_huge_field_is_pictured_within_the_memory_budget() {
    // One record of a 256 MiB zero IQ field (32 Mi samples): a shard of a few hundred KiB.
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let record = Record::new("wide").with_field("iq", iq_capture(vec![0u8; 256 << 20]));
    let receipt = write_shard(&store, vec![record], "w0", 0, &ShardOptions::default()).unwrap();
    publish(&store, &[receipt], &PublishOptions::new("wide", "s1")).unwrap();
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "32M"]);
    for path in [
        "records/0/fields/iq.spectrogram.png",
        "records/0/preview.png",
    ] {
        let path = mount.path(path);
        let bytes =
            std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}\n{}", mount.log_text()));
        assert_eq!(bytes.len() as u64, std::fs::metadata(&path).unwrap().len());
    }
    // The field is served from a temporary file, and the pictures read a bounded part of it.
    let peak = peak_rss(mount.pid());
    assert!(peak > 0, "VmHWM read");
    assert!(
        peak <= 32 * MIB + 64 * MIB,
        "peak RSS {} MiB above 32 MiB + 64 MiB",
        peak / MIB
    );
}

/// `samples` complex64 samples: a tone of `amplitude` at a quarter of the rate over a noise
/// floor of about 0.01 (the same pseudo-random noise for every field).
fn tone_over_noise(samples: usize, amplitude: f32) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut noise = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let mut out = Vec::with_capacity(samples * 8);
    for k in 0..samples {
        let phase = std::f32::consts::FRAC_PI_2 * k as f32;
        let re = amplitude * phase.cos() + 0.02 * noise();
        let im = amplitude * phase.sin() + 0.02 * noise();
        out.extend_from_slice(&re.to_le_bytes());
        out.extend_from_slice(&im.to_le_bytes());
    }
    out
}

/// A record's receivers share one scale over their noise floor: a receiver whose tone is 20
/// dB weaker over the same noise has a darker panel (Pillow's luminance); the pictures are
/// palette PNGs, a spectrogram at most 120,000 bytes.
#[test]
fn a_weaker_receiver_looks_weaker_and_pictures_are_small() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let record = Record::new("two")
        .with_field("rx/a/iq", iq_capture(tone_over_noise(16_384, 1.0)))
        .with_field("rx/b/iq", iq_capture(tone_over_noise(16_384, 0.1)));
    let receipt = write_shard(&store, vec![record], "w0", 0, &ShardOptions::default()).unwrap();
    publish(&store, &[receipt], &PublishOptions::new("two", "s1")).unwrap();
    let mount = MountGuard::mount(dir.path(), &[]);
    let preview = mount.path("records/0/preview.png");
    let printed = common::run_python(
        "picture_check.py",
        &["panels", preview.to_str().unwrap()],
        b"",
    );
    let doc = json::parse_object(&printed, &Default::default()).unwrap();
    // The tone's column: same noise, so the same floor; 20 dB less is a third of a 60 dB
    // scale darker.
    let peak: Vec<f64> = doc["peak"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(peak.len(), 2, "{doc:?}");
    assert!(
        peak[0] > peak[1] + 40.0,
        "the stronger receiver's tone is not brighter: {peak:?}"
    );
    assert_eq!(doc["mode"].as_str(), Some("P"));
    let spectrogram = mount.path("records/0/fields/rx/b/iq.spectrogram.png");
    let bytes = std::fs::read(&spectrogram).unwrap();
    assert!(bytes.len() <= 120_000, "{} bytes", bytes.len());
    let printed = common::run_python(
        "picture_check.py",
        &["panels", spectrogram.to_str().unwrap()],
        b"",
    );
    assert!(String::from_utf8(printed)
        .unwrap()
        .contains("\"mode\": \"P\""));
}
