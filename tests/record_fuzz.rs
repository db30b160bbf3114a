//! Mutation robustness: corrupted payloads never panic the decoder; each gives an error or a
//! record that re-encodes and re-decodes consistently.

mod record_support;

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use record_support::*;
use sdsfs::format::json::{object_to_compact, CompactString, Value};
use sdsfs::format::limits::RecordLimits;
use sdsfs::format::record::*;

/// Decodes `payload` under `catch_unwind`; a decoded record must satisfy its own rules.
fn check(payload: Vec<u8>, limits: &RecordLimits) -> bool {
    let outcome = catch_unwind(AssertUnwindSafe(|| decode(Bytes::from(payload), limits)));
    match outcome.expect("decode panicked") {
        Ok(record) => {
            validate(&record.meta(), limits).unwrap();
            for (name, field) in &record.fields {
                assert_eq!(
                    field.data.len() as u64,
                    field.meta.byte_len().unwrap(),
                    "{name}"
                );
            }
            true
        }
        Err(_) => false,
    }
}

fn seeds(rng: &mut StdRng) -> Vec<Vec<u8>> {
    let limits = RecordLimits::default();
    let mut out = vec![encode(&sample_record(), &limits).unwrap()];
    for serial in 0..20 {
        out.push(encode(&random_record(rng, serial), &limits).unwrap());
    }
    out
}

#[test]
fn bit_flips_and_byte_edits() {
    let mut rng = StdRng::seed_from_u64(1);
    let limits = RecordLimits::default();
    let mut accepted = 0;
    for seed in seeds(&mut rng) {
        for _ in 0..300 {
            let mut payload = seed.clone();
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(0..payload.len());
                if rng.gen() {
                    payload[i] ^= 1 << rng.gen_range(0..8);
                } else {
                    payload[i] = rng.gen();
                }
            }
            accepted += check(payload, &limits) as usize;
        }
    }
    // Flips inside tensor data leave valid records; the test only needs that some happen.
    assert!(accepted > 0);
}

#[test]
fn truncations_and_extensions() {
    let mut rng = StdRng::seed_from_u64(2);
    let limits = RecordLimits::default();
    for seed in seeds(&mut rng) {
        for cut in 0..seed.len() {
            assert!(
                !check(seed[..cut].to_vec(), &limits),
                "truncated at {cut} accepted"
            );
        }
        let mut longer = seed.clone();
        longer.push(0);
        assert!(!check(longer, &limits));
    }
}

#[test]
fn header_length_fuzz() {
    let mut rng = StdRng::seed_from_u64(3);
    let limits = RecordLimits::default();
    for seed in seeds(&mut rng) {
        let n = u64::from_le_bytes(seed[..8].try_into().unwrap());
        let candidates = [
            0,
            1,
            n - 1,
            n + 1,
            n + 8,
            n - 8,
            u64::MAX,
            1 << 63,
            1 << 24,
            rng.gen(),
        ];
        for value in candidates {
            let mut payload = seed.clone();
            payload[..8].copy_from_slice(&value.to_le_bytes());
            check(payload, &limits);
        }
    }
}

/// Random edits of the header JSON: values replaced, keys removed or added.
#[test]
fn header_json_edits() {
    let mut rng = StdRng::seed_from_u64(4);
    let limits = RecordLimits::default();
    let replacements = [
        Value::Null,
        Value::Int(-1),
        Value::Int(u64::MAX as i128),
        Value::Float(1.5),
        Value::from("U8"),
        Value::from("BF16"),
        Value::Array(vec![]),
        Value::Array(vec![Value::Int(0), Value::Int(1 << 40)]),
        Value::Array(vec![Value::Int(1 << 40); 3]),
        Value::Object(obj(&[])),
    ];
    for seed in seeds(&mut rng) {
        let (header, data) = split(&seed);
        for _ in 0..150 {
            let mut edited = header.clone();
            let keys: Vec<CompactString> = edited.keys().cloned().collect();
            let key = &keys[rng.gen_range(0..keys.len())];
            match rng.gen_range(0..4) {
                0 => drop(edited.remove(key)),
                1 => drop(edited.insert(format!("{key}x").into(), edited[key].clone())),
                _ => {
                    let Value::Object(entry) = edited.get_mut(key).unwrap() else {
                        panic!()
                    };
                    let field = ["dtype", "shape", "data_offsets"][rng.gen_range(0..3)];
                    let value = replacements[rng.gen_range(0..replacements.len())].clone();
                    entry.insert(field.into(), value);
                }
            }
            check(frame_text(&object_to_compact(&edited), &data), &limits);
        }
    }
}

/// Random edits of the descriptor JSON text (characters dropped, duplicated, replaced).
#[test]
fn descriptor_json_edits() {
    let mut rng = StdRng::seed_from_u64(5);
    let limits = RecordLimits::default();
    let desc = to_text(&descriptor_of(&sample_record()));
    let tensors = || {
        let record = sample_record();
        record
            .fields
            .values()
            .enumerate()
            .map(|(i, f)| {
                raw(
                    &tensor_key(i),
                    f.meta.dtype.safetensors_name(),
                    &f.meta.shape,
                    f.data.to_vec(),
                )
            })
            .collect::<Vec<_>>()
    };
    for _ in 0..2000 {
        let mut text = desc.clone().into_bytes();
        for _ in 0..rng.gen_range(1..3) {
            let i = rng.gen_range(0..text.len());
            match rng.gen_range(0..3) {
                0 => drop(text.remove(i)),
                1 => text.insert(i, text[i]),
                _ => text[i] = b"{}[],:\"0-9.eE\\ntfa"[rng.gen_range(0..18)],
            }
        }
        let mut all = vec![raw("__sds_descriptor__", "U8", &[text.len() as u64], text)];
        all.extend(tensors());
        let (header, data) = header_and_data(&all);
        check(frame(&header, &data), &limits);
    }
}

fn descriptor_of(record: &Record) -> Value {
    sdsfs::format::record::json_form::descriptor_value(&record.meta())
}

fn to_text(value: &Value) -> String {
    sdsfs::format::json::to_compact(value)
}
