//! Section 4 and 8 rules for `root.json`, snapshots and manifest pages: each broken rule gets
//! its own error, naming the document and the rule.

#[path = "documents_support/mod.rs"]
mod support;

use sdsfs::format::documents::*;
use sdsfs::format::json::{JsonErrorKind, JsonLimits, Value};
use support::*;

/// Values that are not nonnegative integers: the section 1 integer rule.
fn not_counts() -> Vec<(Value, &'static str)> {
    vec![
        (Value::Bool(true), "true"),
        (Value::Float(3.0), "3.0"),
        (Value::String("3".into()), "\"3\""),
        (Value::Int(-1), "-1"),
        (Value::Null, "null"),
    ]
}

fn root(text: &str) -> Result<DatasetRoot, DocumentError> {
    DatasetRoot::parse(text.as_bytes(), &LIMITS)
}

fn snapshot(text: &str) -> Result<Snapshot, DocumentError> {
    Snapshot::parse(text.as_bytes(), &LIMITS)
}

fn page(text: &str) -> Result<ManifestPage, DocumentError> {
    ManifestPage::parse(text.as_bytes(), &LIMITS)
}

// ---------------------------------------------------------------------------------------------
// root.json
// ---------------------------------------------------------------------------------------------

#[test]
fn root_refuses_each_missing_required_key() {
    for key in [
        "dataset_id",
        "format",
        "layout_version",
        "metadata",
        "snapshot",
        "snapshot_id",
    ] {
        let text = edit(ROOT, |d| remove(d, "", key));
        assert_refused(
            root(&text),
            &["root.json: ", &format!("missing required key {key:?}")],
        );
    }
    for key in ["path", "stored_bytes"] {
        let text = edit(ROOT, |d| remove(d, "snapshot", key));
        assert_refused(
            root(&text),
            &[&format!("snapshot: missing required key {key:?}")],
        );
    }
}

#[test]
fn root_refuses_wrong_types() {
    let cases = [
        (
            "dataset_id",
            Value::Int(3),
            "key \"dataset_id\" must be a string",
        ),
        (
            "snapshot_id",
            Value::Null,
            "key \"snapshot_id\" must be a string",
        ),
        (
            "metadata",
            Value::Array(vec![]),
            "key \"metadata\" must be an object",
        ),
        (
            "snapshot",
            "snapshots/x".into(),
            "a reference must be an object, not a string",
        ),
        (
            "layout_version",
            Value::Float(0.1),
            "key \"layout_version\" must be a string",
        ),
        (
            "format",
            Value::Bool(true),
            "key \"format\" must be a string",
        ),
    ];
    for (key, value, rule) in cases {
        let text = edit(ROOT, |d| set(d, "", key, value));
        assert_refused(root(&text), &[rule]);
    }
    for (value, shown) in not_counts() {
        let text = edit(ROOT, |d| set(d, "snapshot", "stored_bytes", value));
        assert_refused(
            root(&text),
            &["snapshot: key \"stored_bytes\" must be a nonnegative integer"],
        );
        let _ = shown;
    }
}

#[test]
fn root_reference_generation_is_optional_and_integer() {
    let text = edit(ROOT, |d| set(d, "snapshot", "generation", Value::Int(7)));
    assert_eq!(root(&text).unwrap().snapshot.generation, Some(7));
    let text = edit(ROOT, |d| set(d, "snapshot", "generation", Value::Null));
    assert_eq!(root(&text).unwrap().snapshot.generation, None);
    for bad in [
        Value::Int(-1),
        Value::Bool(true),
        Value::Float(7.0),
        "7".into(),
    ] {
        let text = edit(ROOT, |d| set(d, "snapshot", "generation", bad));
        assert_refused(
            root(&text),
            &["snapshot: key \"generation\" must be a nonnegative integer"],
        );
    }
}

#[test]
fn root_refuses_unknown_format_and_layout() {
    let text = edit(ROOT, |d| {
        set(d, "", "format", "signal-dataset.snapshot".into())
    });
    assert_refused(
        root(&text),
        &["root.json: unsupported format \"signal-dataset.snapshot\" (expected \"signal-dataset.dataset\")"],
    );
    for layout in ["0.2", "0.1.0", "1", ""] {
        let text = edit(ROOT, |d| set(d, "", "layout_version", layout.into()));
        assert_refused(
            root(&text),
            &[&format!("unsupported layout_version {layout:?}")],
        );
    }
}

#[test]
fn root_checks_min_reader_version() {
    let with = |value: Value| edit(ROOT, |d| set(d, "", "min_reader_version", value));
    for ok in ["0.2", "0.2.0", "0.1", "0", "0.1.99", "00.2"] {
        let parsed = root(&with(ok.into())).unwrap();
        assert_eq!(parsed.min_reader_version.as_deref(), Some(ok));
    }
    let err = root(&with("0.3".into())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "root.json: min_reader_version \"0.3\" is newer than this reader (0.2)"
    );
    assert!(
        matches!(err, DocumentError::ReaderTooOld { ref required, ref reader, .. }
        if required == "0.3" && reader == "0.2")
    );
    for newer in ["0.10", "0.2.1", "1", "1.0"] {
        assert!(
            matches!(
                root(&with(newer.into())),
                Err(DocumentError::ReaderTooOld { .. })
            ),
            "{newer}"
        );
    }
    for bad in ["x.y", "", "0.2.", "v0.2", " 0.2", "0.-1"] {
        assert_refused(root(&with(bad.into())), &["is not a dotted release number"]);
    }
    assert_refused(
        root(&with(Value::Int(1))),
        &["min_reader_version must be a dotted release string, not an integer"],
    );
    assert_refused(root(&with(Value::Float(0.2))), &["not a float"]);
    assert_refused(root(&with(Value::Null)), &["not null"]);
    // A newer reader accepts what this one refuses.
    let text = with("0.3".into());
    assert!(DatasetRoot::parse_for_reader(text.as_bytes(), &LIMITS, "0.10").is_ok());
}

#[test]
fn reader_version_is_checked_before_the_rest_of_the_shape() {
    let text = edit(ROOT, |d| {
        set(d, "", "min_reader_version", "0.3".into());
        set(d, "", "layout_version", "0.2".into());
        remove(d, "", "snapshot");
    });
    assert!(matches!(
        root(&text),
        Err(DocumentError::ReaderTooOld { .. })
    ));
}

#[test]
fn root_refuses_bad_reference_paths() {
    let cases = [
        ("/abs/snapshot.json", "absolute"),
        ("snapshots/../x.json", "'..'"),
        ("snapshots/./x.json", "'.'"),
        ("snapshots//x.json", "empty segment"),
        ("snapshots/", "empty segment"),
        ("snapshots\\x.json", "backslash"),
        ("snapshots/x\0.json", "NUL"),
        ("", "empty"),
    ];
    for (path, rule) in cases {
        let text = edit(ROOT, |d| set(d, "snapshot", "path", path.into()));
        assert_refused(
            root(&text),
            &["root.json: snapshot: path: invalid relative path", rule],
        );
    }
}

#[test]
fn root_json_rules_are_wrapped() {
    let dup = ROOT.replacen(
        "\"dataset_id\": \"ds\",",
        "\"dataset_id\": \"ds\", \"dataset_id\": \"ds\",",
        1,
    );
    let err = root(&dup).unwrap_err();
    assert!(
        matches!(&err, DocumentError::Json { source, .. }
        if source.kind == JsonErrorKind::DuplicateKey("dataset_id".into())),
        "{err}"
    );
    assert!(err
        .to_string()
        .starts_with("root.json: duplicate key \"dataset_id\""));
    let nested = ROOT.replacen(
        "\"stored_bytes\": 555",
        "\"stored_bytes\": 555, \"stored_bytes\": 555",
        1,
    );
    assert!(matches!(root(&nested), Err(DocumentError::Json { .. })));
    assert!(matches!(root("[]"), Err(DocumentError::Json { .. })));
    assert!(matches!(
        root("{\"a\": NaN}"),
        Err(DocumentError::Json { .. })
    ));
    let tiny = JsonLimits {
        max_bytes: 100,
        max_depth: 128,
        max_nodes: 1000,
    };
    let err = DatasetRoot::parse(ROOT.as_bytes(), &tiny).unwrap_err();
    assert!(
        err.to_string().contains("exceeds the limit of 100 bytes"),
        "{err}"
    );
}

#[test]
fn root_ignores_unknown_keys() {
    let text = edit(ROOT, |d| {
        set(d, "", "publisher", "someone".into());
        set(d, "snapshot", "sha256", "abc".into());
    });
    assert_eq!(root(&text).unwrap(), root(ROOT).unwrap());
}

#[test]
fn root_validation_checks_ids_and_the_snapshot() {
    let good = root(ROOT).unwrap();
    for (key, id) in [
        ("dataset_id", "bad id"),
        ("snapshot_id", ".hidden"),
        ("dataset_id", ""),
    ] {
        let mut bad = good.clone();
        if key == "dataset_id" {
            bad.dataset_id = id.into()
        } else {
            bad.snapshot_id = id.into()
        }
        assert_refused(
            bad.validate(),
            &[&format!("{key} {id:?} is not a portable identifier")],
        );
    }
    let snap = snapshot(SNAPSHOT).unwrap();
    let mut other = snap.clone();
    other.snapshot_id = "snap-2".into();
    assert_refused(
        good.validate_snapshot(&other),
        &["root.json: snapshot_id \"snap-1\" does not match the snapshot's snapshot_id \"snap-2\""],
    );
    let mut other = snap.clone();
    other.dataset_id = "other".into();
    assert_refused(
        good.validate_snapshot(&other),
        &["dataset_id \"ds\" does not match"],
    );
    // The path is followed, not required to be canonical.
    let mut moved = good.clone();
    moved.snapshot.path = rel("elsewhere/snap.json");
    moved.validate_snapshot(&snap).unwrap();
}

#[test]
fn errors_can_be_attributed_to_a_path() {
    let err = root("{}")
        .unwrap_err()
        .with_document("gs://bucket/ds/root.json");
    assert_eq!(err.document(), "gs://bucket/ds/root.json");
    assert!(err
        .to_string()
        .starts_with("gs://bucket/ds/root.json: missing required key"));
}

// ---------------------------------------------------------------------------------------------
// snapshot.json
// ---------------------------------------------------------------------------------------------

const SNAPSHOT_KEYS: [&str; 11] = [
    "dataset_id",
    "format",
    "layout_version",
    "manifests",
    "metadata",
    "record_codec",
    "record_count",
    "shard_container",
    "shard_count",
    "snapshot_id",
    "stored_bytes",
];
const COUNT_KEYS: [&str; 3] = ["record_count", "shard_count", "stored_bytes"];

#[test]
fn snapshot_refuses_each_missing_required_key() {
    for key in SNAPSHOT_KEYS {
        let text = edit(SNAPSHOT, |d| remove(d, "", key));
        assert_refused(
            snapshot(&text),
            &["snapshot.json: ", &format!("missing required key {key:?}")],
        );
    }
    for key in [
        "first_ordinal",
        "object",
        "record_count",
        "shard_count",
        "stored_bytes",
    ] {
        let text = edit(SNAPSHOT, |d| remove(d, "manifests.0", key));
        assert_refused(
            snapshot(&text),
            &[&format!("manifests[0]: missing required key {key:?}")],
        );
    }
    for key in ["path", "stored_bytes"] {
        let text = edit(SNAPSHOT, |d| remove(d, "manifests.0.object", key));
        assert_refused(
            snapshot(&text),
            &[&format!(
                "manifests[0]: object: missing required key {key:?}"
            )],
        );
    }
}

#[test]
fn snapshot_counts_must_be_nonnegative_integers() {
    for key in COUNT_KEYS {
        for (value, shown) in not_counts() {
            let text = edit(SNAPSHOT, |d| set(d, "", key, value));
            assert_refused(
                snapshot(&text),
                &[&format!("key {key:?} must be a nonnegative integer")],
            );
            let _ = shown;
        }
    }
    for key in [
        "first_ordinal",
        "record_count",
        "shard_count",
        "stored_bytes",
    ] {
        for (value, _) in not_counts() {
            let text = edit(SNAPSHOT, |d| set(d, "manifests.0", key, value));
            assert_refused(
                snapshot(&text),
                &[&format!(
                    "manifests[0]: key {key:?} must be a nonnegative integer"
                )],
            );
        }
    }
    let text = edit(SNAPSHOT, |d| {
        set(d, "", "manifests", Value::Object(Default::default()))
    });
    assert_refused(snapshot(&text), &["key \"manifests\" must be an array"]);
    let text = edit(SNAPSHOT, |d| {
        set(d, "", "manifests", Value::Array(vec![Value::Int(1)]))
    });
    assert_refused(
        snapshot(&text),
        &["manifests[0]: a manifest reference must be an object"],
    );
    // Beyond u64 is refused by the JSON layer, never rounded.
    let huge = SNAPSHOT.replacen(
        "\"record_count\": 1,\n  \"shard_container\"",
        "\"record_count\": 18446744073709551616,\n  \"shard_container\"",
        1,
    );
    assert!(matches!(snapshot(&huge), Err(DocumentError::Json { .. })));
}

#[test]
fn snapshot_refuses_unknown_identifiers() {
    let cases = [
        ("format", "signal-dataset.dataset", "unsupported format"),
        (
            "layout_version",
            "0.2",
            "unsupported layout_version \"0.2\"",
        ),
        (
            "record_codec",
            "numpy",
            "unsupported record_codec \"numpy\" (expected \"safetensors\")",
        ),
        (
            "shard_container",
            "tfrecord",
            "unsupported shard_container \"tfrecord\" (expected \"array_record\")",
        ),
    ];
    for (key, value, rule) in cases {
        let text = edit(SNAPSHOT, |d| set(d, "", key, value.into()));
        assert_refused(snapshot(&text), &[rule]);
    }
}

#[test]
fn snapshot_refuses_bad_manifest_paths() {
    for path in ["/manifests/x.json", "manifests/../../x", "a\\b", "a//b"] {
        let text = edit(SNAPSHOT, |d| {
            set(d, "manifests.0.object", "path", path.into())
        });
        assert_refused(
            snapshot(&text),
            &["manifests[0]: object: path: invalid relative path"],
        );
    }
}

fn validate_edited(f: impl FnOnce(&mut Snapshot)) -> Result<(), DocumentError> {
    let (mut snapshot, _) = two_pages();
    f(&mut snapshot);
    snapshot.validate()
}

#[test]
fn snapshot_manifests_must_tile_the_records() {
    validate_edited(|_| {}).unwrap();
    assert_refused(
        validate_edited(|s| s.manifests[1].first_ordinal = 161),
        &["snapshot.json: manifest references do not tile [0, 230): entry 1 starts at 161, expected 160"],
    );
    assert_refused(
        validate_edited(|s| s.manifests[1].first_ordinal = 150),
        &["entry 1 starts at 150, expected 160"],
    );
    assert_refused(
        validate_edited(|s| s.manifests[0].first_ordinal = 1),
        &["entry 0 starts at 1, expected 0"],
    );
    assert_refused(
        validate_edited(|s| s.record_count = 229),
        &["do not tile [0, 229): entry 1 ends past the range"],
    );
    assert_refused(
        validate_edited(|s| s.record_count = 231),
        &["do not tile [0, 231): the entries end at 230"],
    );
    assert_refused(
        validate_edited(|s| s.manifests[1].record_count = u64::MAX),
        &["entry 1 ends past the range"],
    );
}

#[test]
fn snapshot_sums_must_agree() {
    assert_refused(
        validate_edited(|s| s.shard_count = 6),
        &["shard_count is 6 but the sum over manifests is 5"],
    );
    assert_refused(
        validate_edited(|s| s.stored_bytes += 1),
        &["stored_bytes is 6768 but the sum over manifests is 6767"],
    );
    assert_refused(
        validate_edited(|s| {
            s.manifests[0].stored_bytes = u64::MAX;
        }),
        &["overflows 64 bits"],
    );
}

#[test]
fn snapshot_without_records_has_no_manifests() {
    assert_refused(
        validate_edited(|s| {
            s.record_count = 0;
            s.manifests.truncate(1);
            s.manifests[0].record_count = 0;
        }),
        &["record_count is 0 but the snapshot lists 1 manifests"],
    );
}

#[test]
fn snapshot_ids_must_be_portable() {
    assert_refused(
        validate_edited(|s| s.snapshot_id = "a/b".into()),
        &["snapshot_id \"a/b\" is not a portable identifier"],
    );
    assert_refused(
        validate_edited(|s| s.dataset_id = "x".repeat(129)),
        &["dataset_id", "is not a portable identifier"],
    );
}

#[test]
fn snapshot_builder_refuses_what_validation_refuses() {
    let (snapshot, _) = two_pages();
    let mut refs = snapshot.manifests.clone();
    refs.swap(0, 1);
    assert_refused(
        Snapshot::from_manifests("D", "S", Default::default(), refs),
        &["entry 0 starts at 160, expected 0"],
    );
}

// ---------------------------------------------------------------------------------------------
// manifest pages
// ---------------------------------------------------------------------------------------------

const PAGE_KEYS: [&str; 8] = [
    "first_ordinal",
    "format",
    "layout_version",
    "page_id",
    "record_count",
    "shards",
    "snapshot_id",
    "stored_bytes",
];

#[test]
fn page_refuses_each_missing_required_key() {
    for key in PAGE_KEYS {
        let text = edit(MANIFEST, |d| remove(d, "", key));
        assert_refused(
            page(&text),
            &["manifest page: ", &format!("missing required key {key:?}")],
        );
    }
    for key in [
        "data",
        "first_ordinal",
        "metadata",
        "record_count",
        "stored_bytes",
    ] {
        let text = edit(MANIFEST, |d| remove(d, "shards.0", key));
        assert_refused(
            page(&text),
            &[&format!("shards[0]: missing required key {key:?}")],
        );
    }
    for reference in ["data", "metadata"] {
        for key in ["path", "stored_bytes"] {
            let text = edit(MANIFEST, |d| {
                remove(d, &format!("shards.0.{reference}"), key)
            });
            assert_refused(
                page(&text),
                &[&format!(
                    "shards[0]: {reference}: missing required key {key:?}"
                )],
            );
        }
    }
}

#[test]
fn page_counts_must_be_nonnegative_integers() {
    for key in ["first_ordinal", "record_count", "stored_bytes"] {
        for (value, _) in not_counts() {
            let text = edit(MANIFEST, |d| set(d, "", key, value.clone()));
            assert_refused(
                page(&text),
                &[&format!("key {key:?} must be a nonnegative integer")],
            );
            let text = edit(MANIFEST, |d| set(d, "shards.0", key, value));
            assert_refused(
                page(&text),
                &[&format!(
                    "shards[0]: key {key:?} must be a nonnegative integer"
                )],
            );
        }
    }
    for (value, shown) in not_counts() {
        let text = edit(MANIFEST, |d| {
            set(d, "shards.0", "record_indices", Value::Array(vec![value]))
        });
        if shown == "null" {
            assert_refused(
                page(&text),
                &["shards[0]: record_indices[0]: must be a nonnegative integer, not null"],
            );
        } else {
            assert_refused(
                page(&text),
                &[&format!(
                    "shards[0]: record_indices[0]: must be a nonnegative integer, not {shown}"
                )],
            );
        }
    }
    let text = edit(MANIFEST, |d| {
        set(d, "shards.0", "record_indices", "0".into())
    });
    assert_refused(page(&text), &["key \"record_indices\" must be an array"]);
    let text = edit(MANIFEST, |d| {
        set(d, "shards.0", "record_indices", Value::Null)
    });
    assert_eq!(page(&text).unwrap().shards[0].record_indices, None);
}

#[test]
fn page_refuses_unknown_format_and_layout_and_ignores_unknown_keys() {
    let text = edit(MANIFEST, |d| {
        set(d, "", "format", "signal-dataset.manifest.v2".into())
    });
    assert_refused(
        page(&text),
        &["unsupported format \"signal-dataset.manifest.v2\""],
    );
    let text = edit(MANIFEST, |d| set(d, "", "layout_version", "0.2".into()));
    assert_refused(page(&text), &["unsupported layout_version \"0.2\""]);
    let text = edit(MANIFEST, |d| {
        set(d, "", "writer", "x".into());
        set(d, "shards.0", "work_id", "w".into());
        set(d, "shards.0.data", "sha256", "h".into());
    });
    assert_eq!(page(&text).unwrap(), page(MANIFEST).unwrap());
}

#[test]
fn page_refuses_bad_shard_paths() {
    for (path, rule) in [
        ("/x", "absolute"),
        ("a/../b", "'..'"),
        ("a//b", "empty segment"),
        ("a\\b", "backslash"),
        ("a\0", "NUL"),
    ] {
        let text = edit(MANIFEST, |d| {
            set(d, "shards.0.metadata", "path", path.into())
        });
        assert_refused(
            page(&text),
            &["shards[0]: metadata: path: invalid relative path", rule],
        );
    }
}

/// Page 1 of snapshot `S` over [100, 200), entries starting at 100, 130 and 150 (the third
/// should start at 160).
fn overlapping_page() -> (ManifestPage, ManifestRef) {
    let (_, pages) = two_pages();
    let mut page = pages[1].clone();
    page.first_ordinal = 100;
    page.record_count = 100;
    page.shards = vec![
        shard(100, 30, 1, 1),
        shard(130, 30, 1, 1),
        shard(150, 50, 1, 1),
    ];
    page.stored_bytes = 6;
    let reference = ManifestRef {
        first_ordinal: 100,
        object: reference("manifests/9c/S-00000001.json", 1),
        record_count: 100,
        shard_count: 3,
        stored_bytes: 6,
    };
    (page, reference)
}

#[test]
fn page_shard_entries_must_tile_the_page() {
    let (page, reference) = overlapping_page();
    let err = page.validate_against(&reference, "S", 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "manifests/9c/S-00000001.json: shard entries do not tile [100, 200): entry 2 starts at 150, expected 160"
    );
    assert_eq!(err.document(), "manifests/9c/S-00000001.json");

    let (snapshot, pages) = two_pages();
    let check = |f: &dyn Fn(&mut ManifestPage)| {
        let mut p = pages[0].clone();
        f(&mut p);
        p.validate_against(&snapshot.manifests[0], "S", 0)
    };
    check(&|_| {}).unwrap();
    assert_refused(
        check(&|p| p.shards[1].first_ordinal = 61),
        &["entry 1 starts at 61, expected 60"],
    );
    assert_refused(
        check(&|p| p.shards[0].first_ordinal = 1),
        &["entry 0 starts at 1, expected 0"],
    );
    assert_refused(
        check(&|p| p.shards[2].record_count = 61),
        &["entry 2 ends past the range"],
    );
    assert_refused(
        check(&|p| {
            p.shards.pop();
        }),
        &["shard count is 2 but the snapshot's manifest reference says 3"],
    );
    // A shard entry with no records is valid on read.
    let mut p = pages[0].clone();
    let mut empty = shard(160, 0, 5, 5);
    empty.stored_bytes = 10;
    p.shards.push(empty);
    p.stored_bytes += 10;
    let mut r = snapshot.manifests[0].clone();
    r.shard_count = 4;
    r.stored_bytes += 10;
    p.validate_against(&r, "S", 0).unwrap();
}

/// An edit of a manifest reference, for table-driven cases.
type RefEdit<'a> = &'a dyn Fn(&mut ManifestRef);

#[test]
fn page_must_repeat_its_reference() {
    let (snapshot, pages) = two_pages();
    let page = &pages[1];
    let reference = &snapshot.manifests[1];
    page.validate_against(reference, "S", 1).unwrap();
    let cases: [(RefEdit, &str); 4] = [
        (
            &|r| r.first_ordinal = 161,
            "first_ordinal is 160 but the snapshot's manifest reference says 161",
        ),
        (
            &|r| r.record_count = 71,
            "record_count is 70 but the snapshot's manifest reference says 71",
        ),
        (
            &|r| r.stored_bytes = 1,
            "stored_bytes is 707 but the snapshot's manifest reference says 1",
        ),
        (
            &|r| r.shard_count = 3,
            "shard count is 2 but the snapshot's manifest reference says 3",
        ),
    ];
    for (f, rule) in cases {
        let mut r = reference.clone();
        f(&mut r);
        assert_refused(page.validate_against(&r, "S", 1), &[rule]);
    }
}

#[test]
fn page_identity_must_match() {
    let (snapshot, pages) = two_pages();
    assert_refused(
        pages[1].validate_against(&snapshot.manifests[1], "T", 1),
        &["snapshot_id \"S\" is not the snapshot's \"T\""],
    );
    assert_refused(
        pages[1].validate_against(&snapshot.manifests[1], "S", 2),
        &["page_id \"S-00000001\" is not the expected \"S-00000002\""],
    );
}

#[test]
fn page_sizes_must_add_up() {
    let (snapshot, pages) = two_pages();
    let reference = &snapshot.manifests[0];
    let mut p = pages[0].clone();
    p.shards[1].stored_bytes += 1;
    assert_refused(
        p.validate_against(reference, "S", 0),
        &["shards[1]: stored_bytes is 2021 but the sum over data and metadata is 2020"],
    );
    let mut p = pages[0].clone();
    p.shards[1].data.stored_bytes += 1;
    p.shards[0].data.stored_bytes -= 1;
    assert_refused(
        p.validate_against(reference, "S", 0),
        &["shards[0]: stored_bytes is 1010"],
    );
    let mut p = pages[0].clone();
    p.stored_bytes += 1;
    let mut r = reference.clone();
    r.stored_bytes += 1;
    assert_refused(
        p.validate_against(&r, "S", 0),
        &["stored_bytes is 6061 but the sum over shard entries is 6060"],
    );
}

#[test]
fn record_indices_need_one_index_per_record() {
    let (snapshot, pages) = two_pages();
    let mut p = pages[0].clone();
    p.shards[0].record_indices = Some(vec![0; 59]);
    assert_refused(
        p.validate_against(&snapshot.manifests[0], "S", 0),
        &["shards[0]: record_indices has 59 entries but record_count is 60"],
    );
    p.shards[0].record_indices = Some(vec![0; 61]);
    assert_refused(
        p.validate_against(&snapshot.manifests[0], "S", 0),
        &["record_indices has 61 entries"],
    );
    p.shards[0].record_indices = Some(vec![7; 60]);
    p.validate_against(&snapshot.manifests[0], "S", 0).unwrap();
    assert_eq!(p.shards[0].physical_index(59), Some(7));
}

#[test]
fn builders_refuse_overflow() {
    assert_refused(
        ShardEntry::new(0, reference("a", u64::MAX), reference("b", 1), 1),
        &["overflow"],
    );
    assert_refused(
        ManifestPage::from_shards("S", 0, u64::MAX, vec![shard(u64::MAX, 1, 1, 1)]),
        &["manifests/f0/S-00000000.json", "overflows 64 bits"],
    );
}
