//! The reference-written vectors in `fixtures/arrayrecord-vectors/`: we read exactly the
//! records their JSON lists, walk exactly the chunks it lists, and re-write them byte for
//! byte from the same records and options.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use sdsfs::arrayrecord::{write_records, ArrayRecordReader, Error, WriterOptions};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/arrayrecord-vectors")
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// One expected record: its length, digest and (when the JSON gives them) its bytes.
struct Expected {
    len: u64,
    sha256: String,
    bytes: Option<Vec<u8>>,
}

/// Decodes the generator expressions used in the JSONs that we can evaluate natively.
fn generate(expr: &str) -> Option<Vec<u8>> {
    let times = expr
        .strip_prefix("bytes(range(256)) * ")?
        .trim()
        .parse::<usize>()
        .ok()?;
    Some((0..256 * times).map(|i| (i % 256) as u8).collect())
}

fn expected_records(json: &Value) -> Vec<Expected> {
    if let Some(runs) = json.get("records_runs").and_then(Value::as_array) {
        let mut out = Vec::new();
        for run in runs {
            let bytes = hex::decode(run["hex"].as_str().unwrap()).unwrap();
            for _ in 0..run["count"].as_u64().unwrap() {
                out.push(Expected {
                    len: bytes.len() as u64,
                    sha256: sha256_hex(&bytes),
                    bytes: Some(bytes.clone()),
                });
            }
        }
        return out;
    }
    let records = json["records"].as_array().unwrap();
    records
        .iter()
        .map(|r| {
            let bytes = match (r.get("hex"), r.get("generator")) {
                (Some(h), _) => Some(hex::decode(h.as_str().unwrap()).unwrap()),
                (None, Some(g)) => generate(g.as_str().unwrap()),
                _ => None,
            };
            if let Some(b) = &bytes {
                assert_eq!(
                    sha256_hex(b),
                    r["sha256"].as_str().unwrap(),
                    "JSON self-check"
                );
            }
            Expected {
                len: r["len"].as_u64().unwrap(),
                sha256: r["sha256"].as_str().unwrap().to_owned(),
                bytes,
            }
        })
        .collect()
}

fn vector_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(vectors_dir())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json").map(str::to_owned)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 11, "vectors missing: {names:?}");
    names
}

fn load(name: &str) -> (Value, Bytes) {
    let dir = vectors_dir();
    let json: Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap()).unwrap();
    let file = std::fs::read(dir.join(format!("{name}.arrayrecord"))).unwrap();
    assert_eq!(
        sha256_hex(&file),
        json["file_sha256"].as_str().unwrap(),
        "{name}: fixture damaged"
    );
    (json, Bytes::from(file))
}

fn is_transposed(json: &Value) -> bool {
    json["writer_options_string"]
        .as_str()
        .unwrap()
        .contains("transpose:true")
}

#[test]
fn vectors_read_exactly_the_listed_records() {
    for name in vector_names() {
        let (json, file) = load(&name);
        let reader = ArrayRecordReader::open(file, name.clone()).unwrap();
        let expected = expected_records(&json);
        assert_eq!(
            reader.len(),
            json["num_records"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(reader.len(), expected.len() as u64, "{name}");
        assert_eq!(
            reader.writer_options(),
            json["writer_options_string"].as_str().unwrap()
        );
        if is_transposed(&json) {
            let err = reader.read(0).unwrap_err();
            assert!(matches!(err, Error::Unsupported { .. }), "{name}: {err}");
            assert!(err.to_string().contains("transposed"), "{err}");
            continue;
        }
        for (i, want) in expected.iter().enumerate() {
            let got = reader.read(i as u64).unwrap();
            assert_eq!(got.len() as u64, want.len, "{name} record {i}");
            assert_eq!(sha256_hex(&got), want.sha256, "{name} record {i}");
            if let Some(bytes) = &want.bytes {
                assert_eq!(&got[..], &bytes[..], "{name} record {i}");
            }
            let mut streamed = Vec::new();
            assert_eq!(reader.read_into(i as u64, &mut streamed).unwrap(), want.len);
            assert_eq!(streamed, got, "{name} record {i} via read_into");
        }
        let mut all = Vec::new();
        for k in 0..reader.num_chunks() {
            all.extend(reader.read_chunk(k).unwrap());
        }
        assert_eq!(all.len(), expected.len(), "{name}: read_chunk");
        assert!(matches!(
            reader.read(reader.len()),
            Err(Error::IndexOutOfRange { .. })
        ));
    }
}

fn compression_name(c: Option<u8>) -> Value {
    match c {
        None => Value::Null,
        Some(0) => "none".into(),
        Some(b'z') => "zstd".into(),
        Some(b'b') => "brotli".into(),
        Some(b's') => "snappy".into(),
        Some(other) => format!("0x{other:02x}").into(),
    }
}

#[test]
fn walking_verifies_every_chunk_and_matches_the_chunk_list() {
    for name in vector_names() {
        let (json, file) = load(&name);
        let reader = ArrayRecordReader::open(file, name.clone()).unwrap();
        let chunks = reader.verify_all().unwrap();
        let want = json["chunks"].as_array().unwrap();
        assert_eq!(chunks.len(), want.len(), "{name}");
        for (c, w) in chunks.iter().zip(want) {
            let got = serde_json::json!([
                c.offset,
                c.end,
                (c.chunk_type as char).to_string(),
                c.num_records,
                c.data_size,
                c.decoded_data_size,
                compression_name(c.compression)
            ]);
            assert_eq!(&got, w, "{name}");
        }
    }
}

#[test]
fn rewriting_reproduces_every_vector_byte_for_byte() {
    let mut checked = 0;
    for name in vector_names() {
        let (json, file) = load(&name);
        if is_transposed(&json) {
            // transpose:true is refused for writing.
            let err = WriterOptions::parse(json["options"].as_str().unwrap()).unwrap_err();
            assert!(matches!(err, Error::InvalidOptions { .. }));
            continue;
        }
        let reader = ArrayRecordReader::open(file.clone(), name.clone()).unwrap();
        let records: Vec<Bytes> = (0..reader.len()).map(|i| reader.read(i).unwrap()).collect();
        let options = WriterOptions::parse(json["options"].as_str().unwrap()).unwrap();
        assert_eq!(
            options.to_string(),
            json["writer_options_string"].as_str().unwrap()
        );
        let ours = write_records(options, &records).unwrap();
        assert_eq!(ours.len(), file.len(), "{name}: size");
        assert_eq!(
            sha256_hex(&ours),
            json["file_sha256"].as_str().unwrap(),
            "{name}: our bytes differ from the reference"
        );
        checked += 1;
    }
    assert_eq!(checked, 10);
}
