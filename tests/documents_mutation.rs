//! Mutation robustness: thousands of randomly damaged valid documents go through parsing and
//! every validation step. Each must be accepted or refused with an error, never panic; and the
//! mutations must actually reach the validators (some mutated documents parse and then fail
//! validation), so the test cannot pass by only exercising the JSON layer.

#[path = "documents_support/mod.rs"]
mod support;

use std::panic::{catch_unwind, AssertUnwindSafe};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sdsfs::format::documents::*;
use support::*;

const ROUNDS: usize = 1500;

/// Replacement numbers and look-alikes for the number-swap mutation.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "59",
    "60",
    "61",
    "160",
    "3.0",
    "1e3",
    "true",
    "null",
    "\"3\"",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-0",
    "4294967296",
];

/// Characters the insertion mutation adds: JSON structure, number and keyword pieces.
const INSERTED: &[u8] = b"{}[]\",:-0123456789.eE\\ntu";

fn mutate(text: &str, rng: &mut StdRng) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..rng.gen_range(1..=3) {
        match rng.gen_range(0..5) {
            0 => {
                let i = rng.gen_range(0..bytes.len());
                bytes[i] = rng.gen();
            }
            1 => {
                let i = rng.gen_range(0..bytes.len());
                let n = rng.gen_range(1..=8).min(bytes.len() - i);
                bytes.drain(i..i + n);
            }
            2 => {
                let i = rng.gen_range(0..=bytes.len());
                let c = INSERTED[rng.gen_range(0..INSERTED.len())];
                bytes.insert(i, c);
            }
            _ => bytes = swap_number(&bytes, rng),
        }
        if bytes.is_empty() {
            break;
        }
    }
    bytes
}

/// Replaces one run of digits (with its sign) by a value from [`NUMBERS`].
fn swap_number(bytes: &[u8], rng: &mut StdRng) -> Vec<u8> {
    let runs: Vec<(usize, usize)> = {
        let mut runs = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric()) {
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                if i >= bytes.len() || !bytes[i].is_ascii_alphabetic() {
                    runs.push((start, i));
                }
            }
            i += 1;
        }
        runs
    };
    if runs.is_empty() {
        return bytes.to_vec();
    }
    let (start, end) = runs[rng.gen_range(0..runs.len())];
    let replacement = NUMBERS[rng.gen_range(0..NUMBERS.len())];
    [&bytes[..start], replacement.as_bytes(), &bytes[end..]].concat()
}

/// Outcome of one document: refused by parsing, refused by validation, or accepted.
#[derive(Default, Debug)]
struct Tally {
    parse_refused: usize,
    validate_refused: usize,
    accepted: usize,
}

impl Tally {
    fn record(&mut self, parsed: bool, valid: bool) {
        match (parsed, valid) {
            (false, _) => self.parse_refused += 1,
            (true, false) => self.validate_refused += 1,
            (true, true) => self.accepted += 1,
        }
    }
}

/// Parses and validates `bytes` as `kind`, returning (parsed, valid).
fn exercise(kind: usize, bytes: &[u8], snapshot: &Snapshot) -> (bool, bool) {
    let ok = |r: Result<(), DocumentError>| {
        if let Err(e) = &r {
            // Rendering the message is part of what must not panic.
            assert!(!e.to_string().is_empty());
        }
        r.is_ok()
    };
    match kind {
        0 => match DatasetRoot::parse(bytes, &LIMITS) {
            Ok(root) => (
                true,
                ok(root.validate()) & ok(root.validate_snapshot(snapshot)),
            ),
            Err(e) => {
                assert!(!e.to_string().is_empty());
                (false, false)
            }
        },
        1 => match Snapshot::parse(bytes, &LIMITS) {
            Ok(s) => {
                let valid = ok(s.validate());
                // Lookups must not panic on anything; on a validated snapshot they must also
                // find the manifest that covers each ordinal.
                for o in 0..s.record_count.min(300) {
                    let found = s.manifest_for(o).and_then(|i| s.manifests.get(i));
                    if valid {
                        let m = found.expect("a validated snapshot covers every ordinal");
                        assert!(m.first_ordinal <= o && o < m.first_ordinal + m.record_count);
                    }
                }
                (true, valid)
            }
            Err(_) => (false, false),
        },
        2 | 3 => match ManifestPage::parse(bytes, &LIMITS) {
            Ok(p) => {
                let index = (kind - 2) as u64;
                let reference = &snapshot.manifests[index as usize];
                let valid = ok(p.validate_against(reference, "S", index));
                for o in 0..300 {
                    let found = p.shard_for(o).and_then(|i| p.shards.get(i));
                    if valid && (p.first_ordinal..p.first_ordinal + p.record_count).contains(&o) {
                        let s = found.expect("a validated page covers every ordinal");
                        assert!(s.first_ordinal <= o && o < s.first_ordinal + s.record_count);
                    }
                }
                for s in &p.shards {
                    for k in 0..70 {
                        let _ = s.physical_index(k);
                    }
                }
                (true, valid)
            }
            Err(_) => (false, false),
        },
        4 => match SetRoot::parse(bytes, &LIMITS) {
            Ok(r) => (
                true,
                ok(r.validate()) & ok(r.validate_against_snapshot(snapshot)),
            ),
            Err(_) => (false, false),
        },
        5 => match WorkerPointer::parse(bytes, &LIMITS) {
            Ok(p) => (true, ok(p.validate())),
            Err(_) => (false, false),
        },
        6 => match Revision::parse(bytes, &LIMITS) {
            Ok(r) => (true, ok(r.validate())),
            Err(_) => (false, false),
        },
        _ => (CatalogPointer::parse(bytes, &LIMITS).is_ok(), true),
    }
}

#[test]
fn mutated_documents_never_panic() {
    let (snapshot, pages) = two_pages();
    let mut set = three_shard_set();
    set.source_snapshot_id = "S".into();
    let root = DatasetRoot::new(
        "D",
        "S",
        reference("snapshots/S/snapshot.json", 1),
        Default::default(),
    );
    let documents = [
        root.to_json(),
        snapshot.to_json(),
        pages[0].to_json(),
        pages[1].to_json(),
        set.to_json(),
        WORKER_POINTER.to_string(),
        REVISION.to_string(),
        CATALOG.to_string(),
    ];
    // Every pristine document is accepted, so refusals below come from the mutations.
    for (kind, text) in documents.iter().enumerate() {
        assert_eq!(
            exercise(kind, text.as_bytes(), &snapshot),
            (true, true),
            "{kind}"
        );
    }

    let mut rng = StdRng::seed_from_u64(0x5d5f_0001);
    let mut tallies: Vec<Tally> = (0..documents.len()).map(|_| Tally::default()).collect();
    for round in 0..ROUNDS {
        for (kind, text) in documents.iter().enumerate() {
            let bytes = mutate(text, &mut rng);
            let outcome = catch_unwind(AssertUnwindSafe(|| exercise(kind, &bytes, &snapshot)));
            match outcome {
                Ok((parsed, valid)) => tallies[kind].record(parsed, valid),
                Err(_) => panic!(
                    "round {round}, document {kind} panicked on:\n{}",
                    String::from_utf8_lossy(&bytes)
                ),
            }
        }
    }
    eprintln!("{tallies:#?}");
    for (kind, tally) in tallies.iter().enumerate() {
        assert!(tally.parse_refused > 0, "document {kind}: {tally:?}");
        assert!(
            tally.accepted > 0 || kind == 7,
            "document {kind}: {tally:?}"
        );
    }
    // The arithmetic validators are reached by the mutations that keep the JSON well-formed.
    for kind in [1, 2, 3, 4] {
        assert!(
            tallies[kind].validate_refused > 0,
            "document {kind}: {:?}",
            tallies[kind]
        );
    }
}
