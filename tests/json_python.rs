//! Deterministic JSON output equals Python's `json.dumps(..., sort_keys=True, ensure_ascii=False)`
//! byte for byte (compact and pretty), on thousands of random documents, and our strict reader
//! reads Python's output back to the same values. Our depth and node limits refuse exactly the
//! documents the library's `strict_json_loads` refuses.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sdsfs::format::json::{parse_value, to_compact, to_pretty, JsonLimits, Object, Value};

const DOCUMENTS: usize = 4000;

fn random_string(rng: &mut StdRng) -> String {
    const POOL: &[char] = &[
        'a',
        'Z',
        '0',
        ' ',
        '"',
        '\\',
        '/',
        '\n',
        '\r',
        '\t',
        '\u{8}',
        '\u{c}',
        '\u{0}',
        '\u{1}',
        '\u{1f}',
        '\u{7f}',
        '\u{80}',
        'é',
        'ß',
        '\u{2028}',
        '\u{2029}',
        '€',
        '中',
        '😀',
        '\u{fffd}',
        '\u{10ffff}',
        '%',
        '.',
        '{',
        '}',
        '[',
        ']',
        ':',
        ',',
    ];
    let len = rng.gen_range(0..12);
    (0..len)
        .map(|_| POOL[rng.gen_range(0..POOL.len())])
        .collect()
}

fn random_float(rng: &mut StdRng) -> f64 {
    match rng.gen_range(0..6) {
        0 => f64::from_bits(rng.gen()),
        1 => rng.gen_range(-1e6..1e6),
        2 => (rng.gen_range(-1000i64..1000) as f64) * 10f64.powi(rng.gen_range(-20..25)),
        3 => [
            0.0,
            -0.0,
            1e16,
            1e15,
            1e-4,
            1e-5,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
            0.1,
        ][rng.gen_range(0..10)],
        4 => rng.gen::<f64>(),
        _ => (rng.gen_range(0..100000) as f64) / 8.0,
    }
}

fn random_scalar(rng: &mut StdRng) -> Value {
    match rng.gen_range(0..7) {
        0 => Value::Null,
        1 => Value::Bool(rng.gen()),
        2 => Value::Int(rng.gen_range(-1000..1000)),
        3 => Value::Int(if rng.gen() {
            i128::from(rng.gen::<u64>())
        } else {
            i128::from(rng.gen::<i64>())
        }),
        4 => Value::String(random_string(rng)),
        5 if rng.gen_bool(0.2) => {
            // Past 64 and 128 bits: Python keeps every digit, and so must we.
            let digits: String = (0..rng.gen_range(20..60))
                .map(|i| char::from(b'0' + rng.gen_range(u8::from(i == 0)..10)))
                .collect();
            let sign = if rng.gen() { "-" } else { "" };
            Value::integer(&format!("{sign}{digits}")).unwrap()
        }
        5 if rng.gen_bool(0.2) => {
            // Exact ties between two shortest digit strings (x.25, x.75 at 16 digits).
            let whole = rng.gen_range(100_000_000_000_000u64..999_999_999_999_999) as f64;
            Value::Float(whole + if rng.gen() { 0.25 } else { 0.75 })
        }
        _ => loop {
            let f = random_float(rng);
            if f.is_finite() {
                break Value::Float(f);
            }
        },
    }
}

fn random_value(rng: &mut StdRng, depth: usize) -> Value {
    if depth >= 5 || rng.gen_bool(0.5) {
        return random_scalar(rng);
    }
    if rng.gen() {
        let n = rng.gen_range(0..5);
        Value::Array((0..n).map(|_| random_value(rng, depth + 1)).collect())
    } else {
        Value::Object(random_object(rng, depth + 1))
    }
}

fn random_object(rng: &mut StdRng, depth: usize) -> Object {
    let n = rng.gen_range(0..5);
    (0..n)
        .map(|_| (random_string(rng).into(), random_value(rng, depth)))
        .collect()
}

#[test]
fn output_equals_python_json_dumps() {
    let mut rng = StdRng::seed_from_u64(0x5d5);
    let docs: Vec<Value> = (0..DOCUMENTS)
        .map(|_| Value::Object(random_object(&mut rng, 1)))
        .collect();
    let mut input = Vec::new();
    for doc in &docs {
        input.extend_from_slice(to_compact(doc).as_bytes());
        input.push(0);
    }
    let output = common::run_python("json_tool.py", &[], &input);
    let parts: Vec<&[u8]> = output.split(|b| *b == 0).collect();
    assert_eq!(
        parts.len(),
        2 * docs.len(),
        "python returned a different number of documents"
    );
    for (i, doc) in docs.iter().enumerate() {
        let python_compact = std::str::from_utf8(parts[2 * i]).unwrap();
        let python_pretty = std::str::from_utf8(parts[2 * i + 1]).unwrap();
        assert_eq!(
            to_compact(doc),
            python_compact,
            "compact form of document {i}"
        );
        assert_eq!(to_pretty(doc), python_pretty, "pretty form of document {i}");
        let reread = parse_value(python_pretty.as_bytes(), &JsonLimits::CONTROL).unwrap();
        assert_eq!(&reread, doc, "document {i} read back from Python's output");
    }
}

/// A random nesting of arrays and objects, up to `depth` levels, scalars as leaves.
fn random_shape(rng: &mut StdRng, depth: usize) -> Value {
    if depth == 0 || rng.gen_bool(0.25) {
        return Value::Int(rng.gen_range(0..10));
    }
    let n = rng.gen_range(0..4);
    if rng.gen() {
        Value::Array((0..n).map(|_| random_shape(rng, depth - 1)).collect())
    } else {
        Value::Object(
            (0..n)
                .map(|i| (format!("k{i}").into(), random_shape(rng, depth - 1)))
                .collect(),
        )
    }
}

#[test]
fn depth_and_node_limits_refuse_what_the_library_refuses() {
    let (max_depth, max_nodes) = (5usize, 14usize);
    let limits = JsonLimits {
        max_bytes: 1 << 20,
        max_depth,
        max_nodes,
    };
    let mut rng = StdRng::seed_from_u64(0xdee9);
    let docs: Vec<String> = (0..3000)
        .map(|_| to_compact(&Value::Object(random_shape_object(&mut rng))))
        .collect();
    let mut input = Vec::new();
    for doc in &docs {
        input.extend_from_slice(doc.as_bytes());
        input.push(0);
    }
    let args = [max_depth.to_string(), max_nodes.to_string()];
    let output = common::run_python(
        "record_tool.py",
        &["structure", args[0].as_str(), args[1].as_str()],
        &input,
    );
    let verdicts: Vec<&str> = std::str::from_utf8(&output).unwrap().lines().collect();
    assert_eq!(verdicts.len(), docs.len());
    let (mut accepted, mut refused) = (0, 0);
    for (doc, verdict) in docs.iter().zip(&verdicts) {
        let ours = if parse_value(doc.as_bytes(), &limits).is_ok() {
            accepted += 1;
            "ok"
        } else {
            refused += 1;
            "refused"
        };
        assert_eq!(ours, *verdict, "{doc}");
    }
    // Both outcomes occur, so the boundary itself was exercised.
    assert!(
        accepted > 100 && refused > 100,
        "{accepted} accepted, {refused} refused"
    );
}

fn random_shape_object(rng: &mut StdRng) -> Object {
    match random_shape(rng, 7) {
        Value::Object(object) => object,
        other => [("v".into(), other)].into_iter().collect(),
    }
}
