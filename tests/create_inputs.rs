//! `sds create --from-sigmf / --from-npy / --from-raw`, and the errors bad inputs give; sample
//! values are checked against what the library reads back.

mod common;

use common::cli::{ok, sds};

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use sdsfs::dataset::{Dataset, OpenOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::Value;
use sdsfs::format::record::{Field, Record};
use sdsfs::fs::views;
use sdsfs::storage::{LocalStore, ObjectStore};

/// The one stderr line of a failed run.
fn fails(args: &[&str]) -> String {
    let out = sds(args);
    assert_eq!(out.status.code(), Some(1), "sds {args:?} should fail");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("sds: "), "{stderr}");
    stderr
}

fn open(root: &Path) -> Dataset {
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(root).unwrap());
    Dataset::open(store, OpenOptions::default()).unwrap()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn f64s(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

const SAMPLES: usize = 100;

/// Component `k` of a test signal as the exact value each datatype can hold, and its bytes.
fn component(datatype: &str, k: usize) -> (f32, Vec<u8>) {
    let x = (k * 37 % 251) as i64;
    match datatype {
        "cf32_le" | "rf32_le" => {
            let v = x as f32 * 0.25 - 20.0;
            (v, v.to_le_bytes().to_vec())
        }
        "ci16_le" => {
            let v = (x * 261 - 32768) as i16;
            (f32::from(v), v.to_le_bytes().to_vec())
        }
        "ci8" => {
            let v = (x - 128) as i8;
            (f32::from(v), vec![v as u8])
        }
        "cu8" => (x as f32, vec![x as u8]),
        other => panic!("{other}"),
    }
}

/// Writes `NAME.sigmf-data/-meta` with two annotations; returns the expected components.
fn write_sigmf(dir: &Path, name: &str, datatype: &str) -> Vec<f32> {
    let components = if datatype.starts_with('c') { 2 } else { 1 } * SAMPLES;
    let mut data = Vec::new();
    let mut expected = Vec::new();
    for k in 0..components {
        let (value, bytes) = component(datatype, k);
        expected.push(value);
        data.extend(bytes);
    }
    std::fs::write(dir.join(format!("{name}.sigmf-data")), data).unwrap();
    let meta = format!(
        r#"{{"global": {{"core:datatype": "{datatype}", "core:sample_rate": 1000000.0, "core:version": "1.2.0", "core:author": "test"}},
  "captures": [{{"core:sample_start": 0, "core:frequency": 2400000000.0}}],
  "annotations": [
    {{"core:sample_start": 10, "core:sample_count": 20, "core:freq_lower_edge": 2399900000.0, "core:freq_upper_edge": 2400100000.0, "core:label": "burst"}},
    {{"core:sample_start": 50, "core:sample_count": 30, "core:label": "beacon"}}]}}"#
    );
    std::fs::write(dir.join(format!("{name}.sigmf-meta")), meta).unwrap();
    expected
}

#[test]
fn sigmf_datatypes_convert_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let types = ["cf32_le", "ci16_le", "ci8", "cu8", "rf32_le"];
    let mut expected = Vec::new();
    let mut args = vec![
        "create".to_string(),
        dir.path().join("ds").display().to_string(),
    ];
    args.push("--from-sigmf".into());
    for datatype in types {
        expected.push(write_sigmf(
            dir.path(),
            &format!("rec_{datatype}"),
            datatype,
        ));
        args.push(
            dir.path()
                .join(format!("rec_{datatype}.sigmf-meta"))
                .display()
                .to_string(),
        );
    }
    args.push("-q".into());
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let dataset = open(&dir.path().join("ds"));
    assert_eq!(dataset.len(), types.len() as u64);
    for (ordinal, datatype) in types.iter().enumerate() {
        let record = dataset.read_record(ordinal as u64).unwrap();
        assert_eq!(record.id, format!("rec_{datatype}"));
        assert_eq!(record.scene_id.as_deref(), Some(record.id.as_str()));
        let name = if datatype.starts_with('c') {
            "iq"
        } else {
            "samples"
        };
        let field = &record.fields[name];
        let dtype = if datatype.starts_with('c') {
            DType::C64
        } else {
            DType::F32
        };
        assert_eq!(
            (field.meta.dtype, field.meta.shape.clone()),
            (dtype, vec![SAMPLES as u64])
        );
        assert_eq!(f32s(&field.data), expected[ordinal], "{datatype}");
        assert_eq!(views::sample_rate(&field.meta), Some(1e6));
        assert_eq!(
            field.meta.metadata["center_frequency_hz"],
            Value::Float(2.4e9)
        );
        assert_eq!(
            field.meta.metadata["source_datatype"],
            Value::from(*datatype)
        );
        // The input's SigMF document, kept in the field for its .sigmf-meta.
        let sigmf = field.meta.metadata["sigmf"].as_object().unwrap();
        assert_eq!(
            sigmf["global"].as_object().unwrap()["core:author"],
            Value::from("test")
        );
        assert_eq!(sigmf["annotations"].as_array().unwrap().len(), 2);
        assert!(!record.metadata.contains_key("sigmf"));
        // One box: the annotation with both frequency edges (the other has none).
        let extent = &record.fields["labels/boxes/extent"];
        assert_eq!(extent.meta.shape, vec![1, 4]);
        let e = f64s(&extent.data);
        assert_eq!(e, [10.0, 20.0, 2399900000.0, 2400100000.0]);
        let frame = &extent.meta.metadata;
        assert_eq!(frame["frequency_frame"], Value::from("absolute"));
        assert_eq!(frame["time_frame"], Value::from("receiver_sample_index"));
        assert_eq!(frame["sample_rate_hz"], Value::Float(1e6));
        // Labels sorted: beacon 0, burst 1; then the annotation's index in the file.
        let identity = &record.fields["labels/boxes/identity"];
        assert_eq!(i32s(&identity.data), vec![1, 0]);
        let classes = identity.meta.metadata["class_names"].as_object().unwrap();
        assert_eq!(classes["0"], Value::from("beacon"));
    }
}

#[test]
fn sigmf_segments() {
    let dir = tempfile::tempdir().unwrap();
    let expected = write_sigmf(dir.path(), "cap", "ci16_le");
    let out = dir.path().join("ds");
    let data = dir.path().join("cap.sigmf-data");
    ok(&[
        "create",
        out.to_str().unwrap(),
        "--from-sigmf",
        data.to_str().unwrap(),
        "--segment-samples",
        "40",
        "-q",
    ]);
    let dataset = open(&out);
    assert_eq!(dataset.len(), 3);
    let mut all = Vec::new();
    for (ordinal, (count, boxes)) in [(40u64, 1u64), (40, 0), (20, 0)].iter().enumerate() {
        let record = dataset.read_record(ordinal as u64).unwrap();
        assert_eq!(record.id, format!("cap:seg{ordinal:06}"));
        assert_eq!(record.scene_id.as_deref(), Some("cap"));
        let iq = &record.fields["iq"];
        assert_eq!(iq.meta.shape, vec![*count]);
        let coordinate = iq.meta.axes[0].coordinate.as_ref().unwrap();
        assert_eq!(
            coordinate.start,
            Some(Value::Float(ordinal as f64 * 40.0 / 1e6))
        );
        assert_eq!(coordinate.step, Some(Value::Float(1e-6)));
        // Only annotation 0 (samples 10..30) has frequency edges and becomes a box.
        let shape = record
            .fields
            .get("labels/boxes/extent")
            .map(|f| f.meta.shape.clone());
        assert_eq!(shape, (*boxes > 0).then(|| vec![*boxes, 4]));
        all.extend(f32s(&iq.data));
    }
    assert_eq!(all, expected);
    // Annotation 1 (samples 50..80, no edges) stays in the second segment's SigMF document
    // (its field's), in the segment's samples: 10..40 of samples 40..80.
    let second = dataset.read_record(1).unwrap();
    let sigmf = second.fields["iq"].meta.metadata["sigmf"]
        .as_object()
        .unwrap();
    let annotations = sigmf["annotations"].as_array().unwrap();
    assert_eq!(annotations.len(), 1);
    let annotation = annotations[0].as_object().unwrap();
    assert_eq!(annotation["core:sample_start"], Value::from(10u64));
    assert_eq!(annotation["core:sample_count"], Value::from(30u64));
    assert_eq!(annotation["core:label"], Value::from("beacon"));
    let captures = sigmf["captures"].as_array().unwrap();
    assert_eq!(captures.len(), 1);
    assert_eq!(
        captures[0].as_object().unwrap()["core:sample_start"],
        Value::from(0u64)
    );
}

#[test]
fn raw_captures() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    let mut expected = Vec::new();
    for k in 0..64 {
        let (value, b) = component("ci8", k);
        expected.push(value);
        bytes.extend(b);
    }
    let file = dir.path().join("capture.bin");
    std::fs::write(&file, &bytes).unwrap();
    let out = dir.path().join("ds");
    ok(&[
        "create",
        out.to_str().unwrap(),
        "--from-raw",
        file.to_str().unwrap(),
        "--datatype",
        "ci8",
        "--sample-rate",
        "2e6",
        "-q",
    ]);
    let record = open(&out).read_record(0).unwrap();
    assert_eq!(record.id, "capture");
    let iq = &record.fields["iq"];
    assert_eq!(iq.meta.shape, vec![32]);
    assert_eq!(f32s(&iq.data), expected);
    assert_eq!(views::sample_rate(&iq.meta), Some(2e6));
    let source = record.metadata["source"].as_object().unwrap();
    assert_eq!(source["datatype"], Value::from("ci8"));
    assert!(!iq.meta.metadata.contains_key("center_frequency_hz"));
    // Rates and centres with SI prefixes, as SDR tools write them.
    let tuned = dir.path().join("tuned");
    ok(&[
        "create",
        tuned.to_str().unwrap(),
        "--from-raw",
        file.to_str().unwrap(),
        "--datatype",
        "ci8",
        "--sample-rate",
        "2.048M",
        "--center-frequency",
        "433.92MHz",
        "-q",
    ]);
    let record = open(&tuned).read_record(0).unwrap();
    let iq = &record.fields["iq"];
    assert_eq!(views::sample_rate(&iq.meta), Some(2.048e6));
    assert_eq!(
        iq.meta.metadata["center_frequency_hz"].as_f64(),
        Some(433.92e6)
    );
    // A value that is no frequency is a usage error (exit 2), naming the rule.
    for (rate, centre) in [("2m", "1G"), ("1M", "nan")] {
        let refused = sds(&[
            "create",
            tuned.to_str().unwrap(),
            "--from-raw",
            file.to_str().unwrap(),
            "--datatype",
            "ci8",
            "--sample-rate",
            rate,
            "--center-frequency",
            centre,
        ]);
        assert_eq!(refused.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("invalid frequency"), "{stderr}");
    }
    let missing = fails(&[
        "create",
        out.to_str().unwrap(),
        "--from-raw",
        file.to_str().unwrap(),
    ]);
    assert!(missing.contains("--datatype"), "{missing}");
    // 3 bytes are not whole cf32 samples.
    std::fs::write(&file, [1u8, 2, 3]).unwrap();
    let odd = fails(&[
        "create",
        out.to_str().unwrap(),
        "--from-raw",
        file.to_str().unwrap(),
        "--datatype",
        "cf32_le",
        "--sample-rate",
        "1e6",
    ]);
    assert!(
        odd.contains("capture.bin") && odd.contains("whole number"),
        "{odd}"
    );
}

#[test]
fn npy_and_npz_files() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
import sys, numpy as np
d = sys.argv[1]
np.save(d + "/tone.npy", (np.arange(50) * (1 + 2j)).astype(np.complex64))
np.savez_compressed(d + "/pack.npz", counts=np.arange(12, dtype=np.int16).reshape(3, 4),
                    gain=np.array([0.5]), mask=np.array([True, False]))
np.savez(d + "/plain.npz", x=np.arange(3, dtype=np.uint8))
np.save(d + "/wide.npy", np.zeros(3, dtype=np.complex128))
np.save(d + "/scalar.npy", np.float64(0.5))
np.save(d + "/fortran.npy", np.asfortranarray(np.zeros((2, 3), dtype=np.float32)))
"#;
    let status = Command::new(common::python())
        .args(["-c", script, dir.path().to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = dir.path().join("ds");
    let p = |n: &str| dir.path().join(n).display().to_string();
    ok(&[
        "create",
        out.to_str().unwrap(),
        "--from-npy",
        &p("tone.npy"),
        &p("pack.npz"),
        &p("plain.npz"),
        "-q",
    ]);
    let dataset = open(&out);
    let tone = dataset.read_record(0).unwrap();
    assert_eq!(tone.id, "tone");
    let field = &tone.fields["tone"];
    assert_eq!(
        (field.meta.dtype, field.meta.shape.clone()),
        (DType::C64, vec![50])
    );
    let values = f32s(&field.data);
    assert_eq!((values[2 * 7], values[2 * 7 + 1]), (7.0, 14.0));
    let pack = dataset.read_record(1).unwrap();
    assert_eq!(
        pack.fields.keys().collect::<Vec<_>>(),
        ["counts", "gain", "mask"]
    );
    let counts = &pack.fields["counts"];
    assert_eq!(
        (counts.meta.dtype, counts.meta.shape.clone()),
        (DType::I16, vec![3, 4])
    );
    assert_eq!(&counts.data[..4], &[0, 0, 1, 0]);
    assert_eq!(pack.fields["gain"].meta.shape, vec![1]);
    assert_eq!(f64s(&pack.fields["gain"].data), vec![0.5]);
    assert_eq!(&pack.fields["mask"].data[..], &[1, 0]);
    assert_eq!(
        &dataset.read_record(2).unwrap().fields["x"].data[..],
        &[0, 1, 2]
    );
    let wide = fails(&[
        "create",
        out.to_str().unwrap(),
        "--from-npy",
        &p("wide.npy"),
    ]);
    assert!(wide.contains("wide.npy") && wide.contains("<c16"), "{wide}");
    // 0-d arrays are refused: the library cannot represent a 0-d tensor.
    let scalar = fails(&[
        "create",
        out.to_str().unwrap(),
        "--from-npy",
        &p("scalar.npy"),
    ]);
    assert!(
        scalar.contains("scalar.npy") && scalar.contains("0-d") && scalar.contains("(1,)"),
        "{scalar}"
    );
    let fortran = fails(&[
        "create",
        out.to_str().unwrap(),
        "--from-npy",
        &p("fortran.npy"),
    ]);
    assert!(
        fortran.contains("fortran.npy") && fortran.contains("Fortran"),
        "{fortran}"
    );
}

/// A one-record directory as a mount copy looks: record.json plus fields/x.raw.
fn record_dir(root: &Path) -> std::path::PathBuf {
    let field = Field::new(DType::F64, vec![3], f64s_bytes(&[1.0, 2.0, 3.0])).unwrap();
    let record = Record::new("r0").with_field("a/x", field);
    let dir = root.join("records/0");
    std::fs::create_dir_all(dir.join("fields/a")).unwrap();
    std::fs::write(
        dir.join("record.json"),
        views::record_json(&record.meta(), 0),
    )
    .unwrap();
    std::fs::write(dir.join("fields/a/x.raw"), f64s_bytes(&[1.0, 2.0, 3.0])).unwrap();
    dir
}

fn f64s_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

#[test]
fn bad_inputs_give_one_line_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    let dir = record_dir(root.path());
    let out = root.path().join("ds");
    let (o, from) = (out.to_str().unwrap(), root.path().to_str().unwrap());
    // Sound first.
    ok(&["create", o, "--from-dir", from, "-q"]);
    let raw = dir.join("fields/a/x.raw");
    // Wrong length.
    std::fs::write(&raw, [0u8; 16]).unwrap();
    let short = fails(&["create", o, "--from-dir", from]);
    assert!(
        short.contains("x.raw") && short.contains("16 bytes"),
        "{short}"
    );
    // Too long: the message gives the file's whole length.
    std::fs::write(&raw, [0u8; 100]).unwrap();
    let long = fails(&["create", o, "--from-dir", from]);
    assert!(
        long.contains("x.raw") && long.contains("100 bytes") && long.contains("24 bytes"),
        "{long}"
    );
    // Missing .raw and .npy.
    std::fs::remove_file(&raw).unwrap();
    let missing = fails(&["create", o, "--from-dir", from]);
    assert!(
        missing.contains("x.raw") && missing.contains("neither"),
        "{missing}"
    );
    // A .npy of another dtype.
    let npy = dir.join("fields/a/x.npy");
    let bytes = common::npy::npy_bytes(DType::F32, &[3], &[0u8; 12]);
    std::fs::write(&npy, &bytes).unwrap();
    let dtype = fails(&["create", o, "--from-dir", from]);
    assert!(
        dtype.contains("x.npy") && dtype.contains("float32") && dtype.contains("float64"),
        "{dtype}"
    );
    // A broken NPY header.
    std::fs::write(&npy, b"not numpy at all").unwrap();
    let header = fails(&["create", o, "--from-dir", from]);
    assert!(
        header.contains("x.npy") && header.contains("magic"),
        "{header}"
    );
    std::fs::remove_file(&npy).unwrap();
    std::fs::write(&raw, f64s_bytes(&[1.0, 2.0, 3.0])).unwrap();
    // A field file record.json does not describe.
    std::fs::write(dir.join("fields/a/new%25.raw"), [0u8; 4]).unwrap();
    let stray = fails(&["create", o, "--from-dir", from]);
    assert!(
        stray.contains("new%25.raw") && stray.contains("\"a/new%\""),
        "{stray}"
    );
    std::fs::remove_file(dir.join("fields/a/new%25.raw")).unwrap();
    // Ids are any nonempty string (the library's rule), so an empty one is refused.
    let id = fails(&["create", o, "--from-dir", from, "--dataset-id", ""]);
    assert!(
        id.contains("--dataset-id") && id.contains("nonempty"),
        "{id}"
    );
    // A record.json that is not JSON.
    std::fs::write(dir.join("record.json"), "{").unwrap();
    let json = fails(&["create", o, "--from-dir", from]);
    assert!(
        json.contains("record.json") && json.contains("invalid JSON"),
        "{json}"
    );
    // SigMF datatypes that would lose precision.
    let sigmf = root.path().join("wide.sigmf-meta");
    std::fs::write(&sigmf, r#"{"global": {"core:datatype": "ci32_le"}}"#).unwrap();
    std::fs::write(root.path().join("wide.sigmf-data"), [0u8; 8]).unwrap();
    let wide = fails(&["create", o, "--from-sigmf", sigmf.to_str().unwrap()]);
    assert!(
        wide.contains("wide.sigmf-meta") && wide.contains("without loss"),
        "{wide}"
    );
}

/// SigMF recordings written by the `sigmf` library (several captures at different
/// frequencies, an extension namespace, overlapping annotations, some without frequency edges
/// or label, Unicode comments, ci16/cf32/ci8) come back through `sds create` and the mount:
/// each field's `.sigmf-meta` validates and holds every global key of the input but the
/// layout's, its captures in order, each annotation with all its keys; the samples read back
/// as the input's; every annotation with both edges is a label box the library reads
/// (`tests/python/sigmf_round_trip.py`, the input files as the truth).
#[test]
fn sigmf_recordings_come_back_whole_through_the_mount() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    let made = common::run_python(
        "sigmf_round_trip.py",
        &["make", inputs.to_str().unwrap()],
        b"",
    );
    let bases: Vec<String> = String::from_utf8(made)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(bases.len(), 3);
    let out = dir.path().join("ds");
    let mut args = vec!["create", out.to_str().unwrap(), "--from-sigmf"];
    let metas: Vec<String> = bases.iter().map(|b| format!("{b}.sigmf-meta")).collect();
    args.extend(metas.iter().map(String::as_str));
    args.push("-q");
    ok(&args);
    let dataset = open(&out);
    let mount = common::mount::MountGuard::mount(&out, &[]);
    let mut check = vec!["check".to_string(), out.display().to_string()];
    for (meta, base) in metas.iter().zip(&bases) {
        let name = Path::new(base).file_name().unwrap().to_str().unwrap();
        let ordinal = (0..dataset.len())
            .find(|&o| dataset.read_record(o).unwrap().id == name)
            .unwrap();
        let mounted = mount.path(&format!("records/{ordinal}/fields/iq.sigmf-meta"));
        check.extend([
            meta.clone(),
            mounted.display().to_string(),
            ordinal.to_string(),
        ]);
    }
    let args: Vec<&str> = check.iter().map(String::as_str).collect();
    let printed = String::from_utf8(common::run_python("sigmf_round_trip.py", &args, b"")).unwrap();
    // What the inputs hold (by hand from the script's recordings): global keys kept beside
    // the datatype, extensions and layout keys; captures; annotations; samples; boxes.
    for line in [
        "survey_ci16.sigmf-meta: 10 global keys, 3 captures, 7 annotations, 12000 samples, 5 boxes",
        "burst_cf32.sigmf-meta: 3 global keys, 1 captures, 2 annotations, 4096 samples, 2 boxes",
        "plain_ci8.sigmf-meta: 2 global keys, 1 captures, 0 annotations, 2000 samples, 0 boxes",
    ] {
        assert!(printed.contains(line), "{line} not in:\n{printed}");
    }
}
