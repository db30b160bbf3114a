//! The embedded demo dataset (`fixtures/demo/`): `sds demo` regenerates it byte for byte, it
//! stays small, it opens, and every record decodes and agrees with its metadata row.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use sdsfs::cli::sds::demo::fields;
use sdsfs::dataset::{Dataset, OpenOptions};
use sdsfs::format::dtype::DType;
use sdsfs::storage::{LocalStore, ObjectStore};

fn committed() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/demo")
}

use common::datasets::snapshot_tree as files;

fn open(root: &Path) -> Dataset {
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(root).unwrap());
    Dataset::open(store, OpenOptions::default()).unwrap()
}

#[test]
fn regenerating_gives_the_committed_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    for _ in 0..2 {
        // The second run converges on the same objects (create-only, identical bytes).
        let run = Command::new(env!("CARGO_BIN_EXE_sds"))
            .arg("demo")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let fresh = files(&out);
    let expected = files(&committed());
    assert_eq!(
        fresh.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (path, bytes) in &expected {
        assert!(
            &fresh[path] == bytes,
            "{path} differs from the committed copy"
        );
    }
    let total: usize = expected.values().map(Vec::len).sum();
    assert!(total <= 3 << 20, "the demo dataset grew to {total} bytes");
}

#[test]
fn library_generator_matches_the_committed_records() {
    let dataset = open(&committed());
    let records = sdsfs::cli::sds::demo::demo_records().unwrap();
    assert_eq!(records.len() as u64, dataset.len());
    for (ordinal, record) in records.iter().enumerate() {
        assert_eq!(&dataset.read_record(ordinal as u64).unwrap(), record);
    }
}

#[test]
fn every_record_reads_and_has_the_rfgen_shape() {
    let dataset = open(&committed());
    assert_eq!(dataset.len(), 8);
    assert_eq!(dataset.snapshot().shard_count, 3);
    assert_eq!(dataset.snapshot().manifests.len(), 2);
    let mut scenes: BTreeMap<String, usize> = BTreeMap::new();
    for ordinal in 0..dataset.len() {
        let record = dataset.read_record(ordinal).unwrap();
        let row = dataset.record_meta(ordinal).unwrap();
        assert_eq!(row, record.meta());
        *scenes.entry(record.scene_id.clone().unwrap()).or_default() += 1;
        let iq = &record.fields[fields::IQ];
        assert_eq!(iq.meta.dtype, DType::C64);
        assert_eq!(iq.meta.shape, [20_000]);
        let block = iq.meta.metadata["time_coordinates"].as_object().unwrap();
        assert_eq!(block["kind"].as_str(), Some("uniform"));
        assert_eq!(block["sample_rate_hz"].as_f64(), Some(1e6));
        let boxes = &record.fields[fields::BOX_EXTENT].meta.shape;
        assert_eq!(record.fields[fields::BOX_IDENTITY].meta.shape[0], boxes[0]);
        // scene-0002 (ordinals 4, 5) has a second receiver at 2 MHz over the same 20 ms, and
        // its raster a leading receiver axis; scene-0003's boxes are in absolute Hz.
        let two_receivers = matches!(ordinal, 4 | 5);
        assert_eq!(record.fields.contains_key(fields::IQ_RX1), two_receivers);
        if two_receivers {
            let rx1 = &record.fields[fields::IQ_RX1].meta;
            assert_eq!(rx1.shape, [40_000]);
            let block = rx1.metadata["time_coordinates"].as_object().unwrap();
            assert_eq!(block["sample_rate_hz"].as_f64(), Some(2e6));
            assert_eq!(record.fields[fields::SEGMENTATION].meta.shape, [2, 64, 79]);
        } else {
            assert_eq!(record.fields[fields::SEGMENTATION].meta.shape, [64, 79]);
        }
        let extent = &record.fields[fields::BOX_EXTENT].meta.metadata;
        let frame = match ordinal {
            6 | 7 => extent["metadata"].as_object().unwrap(),
            _ => extent,
        };
        let absolute = frame["frequency_frame"].as_str() == Some("absolute");
        assert_eq!(absolute, matches!(ordinal, 6 | 7));
        assert_eq!(record.fields[fields::BASEBAND].meta.shape, [1, 4, 400]);
        assert_eq!(record.fields[fields::NOISE_PULSES].meta.shape, [4]);
        assert!(record.fields.contains_key(fields::OCCUPANCY));
        assert!(record.fields.contains_key(fields::IQ_DIGEST));
        assert!(record.metadata["rfgen"].as_object().is_some());
    }
    assert_eq!(scenes.len(), 4);
    assert!(scenes.values().all(|n| *n == 2));
}

#[test]
fn the_burst_is_really_there() {
    // The first record's QPSK burst (samples 2000..11000, 10 dB) carries far more power than
    // the noise-only stretch before it.
    let dataset = open(&committed());
    let record = dataset.read_record(0).unwrap();
    let data = &record.fields[fields::IQ].data;
    let power = |range: std::ops::Range<usize>| -> f64 {
        let n = range.len() as f64;
        range
            .map(|i| {
                let re = f32::from_le_bytes(data[i * 8..i * 8 + 4].try_into().unwrap()) as f64;
                let im = f32::from_le_bytes(data[i * 8 + 4..i * 8 + 8].try_into().unwrap()) as f64;
                re * re + im * im
            })
            .sum::<f64>()
            / n
    };
    let noise = power(0..1_900);
    let burst = power(3_000..10_000);
    assert!((0.8..1.2).contains(&noise), "noise power {noise}");
    assert!(burst > 5.0 * noise, "burst power {burst}, noise {noise}");
}
