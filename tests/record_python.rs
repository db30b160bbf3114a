//! Byte compatibility with the reference Python `safetensors==0.8.0` package.
//!
//! The interpreter is `$SDS_TEST_PYTHON`, else `<repo>/.venv/bin/python`; the test fails with a
//! clear message when neither exists (the contract is byte identity, so skipping silently would
//! hide a broken environment). Records are batched into one Python run per direction.

mod record_support;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::SeedableRng;
use record_support::random_record;
use sdsfs::format::json::to_compact;
use sdsfs::format::limits::RecordLimits;
use sdsfs::format::record::{decode, encode, tensor_key, Record, DESCRIPTOR_TENSOR};
use serde_json::{json, Value as Json};

const RECORDS: usize = 400;

fn python() -> PathBuf {
    let path = std::env::var_os("SDS_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    assert!(
        path.exists(),
        "Python interpreter {path:?} not found: set SDS_TEST_PYTHON to a venv with \
         tests/python/requirements.txt installed (safetensors==0.8.0, numpy)"
    );
    path
}

fn run_tool(mode: &str, request: &Json) -> Json {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/safetensors_tool.py");
    let mut child = Command::new(python())
        .arg(script)
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Python tool");
    let input = serde_json::to_vec(request).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        output.status.success(),
        "Python tool failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The tensors Python must be given to produce our payload: descriptor plus one per field.
fn python_spec(record: &Record) -> Json {
    let descriptor = to_compact(&sdsfs::format::record::json_form::descriptor_value(
        &record.meta(),
    ));
    let mut tensors = vec![json!([
        DESCRIPTOR_TENSOR,
        "U8",
        [descriptor.len()],
        hex::encode(descriptor)
    ])];
    for (index, field) in record.fields.values().enumerate() {
        tensors.push(json!([
            tensor_key(index),
            field.meta.dtype.safetensors_name(),
            field.meta.shape,
            hex::encode(&field.data)
        ]));
    }
    Json::Array(tensors)
}

fn records() -> Vec<Record> {
    let mut rng = StdRng::seed_from_u64(0x5d5);
    (0..RECORDS)
        .map(|serial| random_record(&mut rng, serial))
        .collect()
}

#[test]
fn encode_is_byte_identical_to_python_save() {
    let records = records();
    let specs: Vec<Json> = records.iter().map(python_spec).collect();
    let python_payloads = run_tool("save", &Json::Array(specs));
    let python_payloads = python_payloads.as_array().unwrap();
    assert_eq!(python_payloads.len(), records.len());
    for (record, theirs) in records.iter().zip(python_payloads) {
        let ours = encode(record, &RecordLimits::default()).unwrap();
        let theirs = hex::decode(theirs.as_str().unwrap()).unwrap();
        assert_eq!(
            ours, theirs,
            "record {} differs from Python's bytes",
            record.id
        );
        // And what Python wrote, we read back to the same record.
        let decoded = decode(Bytes::from(theirs), &RecordLimits::default()).unwrap();
        assert_eq!(&decoded, record);
    }
}

#[test]
fn python_load_reads_our_payloads() {
    let records = records();
    let payloads: Vec<Json> = records
        .iter()
        .map(|r| Json::from(hex::encode(encode(r, &RecordLimits::default()).unwrap())))
        .collect();
    let loaded = run_tool("load", &Json::Array(payloads));
    for (record, tensors) in records.iter().zip(loaded.as_array().unwrap()) {
        let tensors = tensors.as_object().unwrap();
        assert_eq!(
            tensors.len(),
            record.fields.len() + 1,
            "record {}",
            record.id
        );
        for (index, field) in record.fields.values().enumerate() {
            let [dtype, shape, data] = tensors[&tensor_key(index)].as_array().unwrap().as_slice()
            else {
                panic!("bad tool output")
            };
            assert_eq!(dtype, field.meta.dtype.safetensors_name());
            assert_eq!(shape, &json!(field.meta.shape));
            assert_eq!(data.as_str().unwrap(), hex::encode(&field.data));
        }
        let descriptor = &tensors[DESCRIPTOR_TENSOR].as_array().unwrap()[2];
        let text = hex::decode(descriptor.as_str().unwrap()).unwrap();
        assert!(text.starts_with(b"{\"fields\":"));
    }
}
