//! Section 6 rules for the exact-key annotation documents.

#[path = "documents_support/mod.rs"]
mod support;

use sdsfs::format::documents::*;
use sdsfs::format::json::Value;
use support::*;

fn catalog(text: &str) -> Result<CatalogPointer, DocumentError> {
    CatalogPointer::parse(text.as_bytes(), &LIMITS)
}
fn revision(text: &str) -> Result<Revision, DocumentError> {
    Revision::parse(text.as_bytes(), &LIMITS)
}
fn set_root(text: &str) -> Result<SetRoot, DocumentError> {
    SetRoot::parse(text.as_bytes(), &LIMITS)
}
fn pointer(text: &str) -> Result<WorkerPointer, DocumentError> {
    WorkerPointer::parse(text.as_bytes(), &LIMITS)
}

#[test]
fn catalog_pointer_has_exact_keys() {
    catalog(CATALOG).unwrap();
    let text = edit(CATALOG, |d| remove(d, "", "revision"));
    assert_refused(
        catalog(&text),
        &["annotations/catalog.json: missing required key \"revision\""],
    );
    let text = edit(CATALOG, |d| remove(d, "revision", "path"));
    assert_refused(catalog(&text), &["revision: missing required key \"path\""]);
    let text = edit(CATALOG, |d| set(d, "", "updated", "now".into()));
    assert_refused(catalog(&text), &["unknown key \"updated\""]);
    // The revision reference has no stored_bytes.
    let text = edit(CATALOG, |d| {
        set(d, "revision", "stored_bytes", Value::Int(3))
    });
    assert_refused(catalog(&text), &["revision: unknown key \"stored_bytes\""]);
    let text = edit(CATALOG, |d| set(d, "revision", "generation", Value::Int(5)));
    assert_eq!(catalog(&text).unwrap().revision.generation, Some(5));
    for bad in [
        Value::Int(-5),
        "5".into(),
        Value::Float(5.0),
        Value::Bool(false),
    ] {
        let text = edit(CATALOG, |d| set(d, "revision", "generation", bad));
        assert_refused(
            catalog(&text),
            &["revision: key \"generation\" must be a nonnegative integer"],
        );
    }
    let text = edit(CATALOG, |d| {
        set(d, "revision", "path", "../catalogs/x.json".into())
    });
    assert_refused(catalog(&text), &["revision: path: invalid relative path"]);
    let text = edit(CATALOG, |d| {
        set(d, "", "revision", "annotations/catalogs/x.json".into())
    });
    assert_refused(catalog(&text), &["revision: revision must be an object"]);
}

#[test]
fn revision_has_exact_keys_in_its_references() {
    let text = edit(REVISION, |d| remove(d, "", "sets"));
    assert_refused(
        revision(&text),
        &["annotation revision: missing required key \"sets\""],
    );
    let text = edit(REVISION, |d| set(d, "", "parent", "x".into()));
    assert_refused(revision(&text), &["unknown key \"parent\""]);
    for key in ["path", "stored_bytes"] {
        let text = edit(REVISION, |d| remove(d, "sets.labels", key));
        assert_refused(
            revision(&text),
            &[&format!("sets[\"labels\"]: missing required key {key:?}")],
        );
    }
    let text = edit(REVISION, |d| set(d, "sets.labels", "sha256", "x".into()));
    assert_refused(
        revision(&text),
        &["sets[\"labels\"]: unknown key \"sha256\""],
    );
    let text = edit(REVISION, |d| {
        set(d, "sets.labels", "generation", Value::Int(9))
    });
    assert_eq!(revision(&text).unwrap().sets["labels"].generation, Some(9));
    for (value, _) in [
        (Value::Bool(true), ""),
        (Value::Float(1.0), ""),
        ("1".into(), ""),
        (Value::Int(-1), ""),
    ] {
        let text = edit(REVISION, |d| set(d, "sets.labels", "stored_bytes", value));
        assert_refused(
            revision(&text),
            &["key \"stored_bytes\" must be a nonnegative integer"],
        );
    }
    let text = edit(REVISION, |d| set(d, "sets", "labels", Value::Int(1)));
    assert_refused(revision(&text), &["a reference must be an object"]);
    let text = edit(REVISION, |d| set(d, "", "sets", Value::Array(vec![])));
    assert_refused(revision(&text), &["key \"sets\" must be an object"]);
}

#[test]
fn revision_set_names_must_be_portable() {
    let mut rev = revision(REVISION).unwrap();
    rev.validate().unwrap();
    let reference = rev.sets["labels"].clone();
    rev.sets.insert("bad name".into(), reference);
    assert_refused(
        rev.validate(),
        &["set name \"bad name\" is not a portable identifier"],
    );
}

const SET_KEYS: [&str; 6] = [
    "metadata",
    "name",
    "publication_id",
    "record_count",
    "shards",
    "source_snapshot_id",
];

#[test]
fn set_root_has_exact_keys() {
    for key in SET_KEYS {
        let text = edit(SET_ROOT, |d| remove(d, "", key));
        assert_refused(
            set_root(&text),
            &[
                "annotation set root: ",
                &format!("missing required key {key:?}"),
            ],
        );
    }
    for key in ["first_ordinal", "object", "record_count"] {
        let text = edit(SET_ROOT, |d| remove(d, "shards.0", key));
        assert_refused(
            set_root(&text),
            &[&format!("shards[0]: missing required key {key:?}")],
        );
    }
    for key in ["path", "stored_bytes"] {
        let text = edit(SET_ROOT, |d| remove(d, "shards.0.object", key));
        assert_refused(
            set_root(&text),
            &[&format!("shards[0]: object: missing required key {key:?}")],
        );
    }
    let text = edit(SET_ROOT, |d| set(d, "", "created", "x".into()));
    assert_refused(set_root(&text), &["unknown key \"created\""]);
    let text = edit(SET_ROOT, |d| {
        set(d, "shards.0", "logical_shard_id", "shard-00000000".into())
    });
    assert_refused(
        set_root(&text),
        &["shards[0]: unknown key \"logical_shard_id\""],
    );
    let text = edit(SET_ROOT, |d| set(d, "shards.0.object", "uri", "x".into()));
    assert_refused(set_root(&text), &["shards[0]: object: unknown key \"uri\""]);
    let text = edit(SET_ROOT, |d| {
        set(d, "shards.0.object", "generation", Value::Int(3))
    });
    assert_eq!(
        set_root(&text).unwrap().shards[0].object.generation,
        Some(3)
    );
}

#[test]
fn set_root_counts() {
    for (value, _) in [
        (Value::Bool(true), 0),
        (Value::Float(1.0), 0),
        ("1".into(), 0),
        (Value::Int(-1), 0),
    ] {
        let text = edit(SET_ROOT, |d| set(d, "", "record_count", value.clone()));
        assert_refused(
            set_root(&text),
            &["key \"record_count\" must be a nonnegative integer"],
        );
        let text = edit(SET_ROOT, |d| set(d, "shards.0", "first_ordinal", value));
        assert_refused(
            set_root(&text),
            &["shards[0]: key \"first_ordinal\" must be a nonnegative integer"],
        );
    }
    let text = edit(SET_ROOT, |d| {
        set(d, "shards.0", "record_count", Value::Int(0))
    });
    assert_refused(
        set_root(&text),
        &["shards[0]: record_count must be positive, not 0"],
    );
    let mut root = three_shard_set();
    root.shards[1].record_count = 0;
    assert_refused(
        root.validate(),
        &["shards[1]: record_count must be positive"],
    );
}

#[test]
fn set_root_shards_tile_the_source() {
    let check = |f: &dyn Fn(&mut SetRoot)| {
        let mut root = three_shard_set();
        f(&mut root);
        root.validate()
    };
    check(&|_| {}).unwrap();
    assert_refused(
        check(&|r| r.shards[1].first_ordinal = 101),
        &["annotation set root: set shards do not tile [0, 230): entry 1 starts at 101, expected 100"],
    );
    assert_refused(
        check(&|r| r.shards[2].first_ordinal = 199),
        &["entry 2 starts at 199, expected 200"],
    );
    assert_refused(
        check(&|r| r.shards[0].first_ordinal = 1),
        &["entry 0 starts at 1, expected 0"],
    );
    assert_refused(
        check(&|r| r.record_count = 229),
        &["entry 2 ends past the range"],
    );
    assert_refused(
        check(&|r| {
            r.shards.pop();
        }),
        &["the entries end at 200"],
    );
    assert_refused(check(&|r| r.shards.clear()), &["the entries end at 0"]);
    // A source with no records: a set with no shards.
    check(&|r| {
        r.shards.clear();
        r.record_count = 0;
    })
    .unwrap();
}

#[test]
fn set_root_ids_and_source() {
    let check = |f: &dyn Fn(&mut SetRoot)| {
        let mut root = three_shard_set();
        f(&mut root);
        root.validate()
    };
    assert_refused(
        check(&|r| r.name = "a/b".into()),
        &["name \"a/b\" is not a portable identifier"],
    );
    assert_refused(
        check(&|r| r.publication_id = "".into()),
        &["publication_id \"\" is not a portable identifier"],
    );
    assert_refused(
        check(&|r| r.source_snapshot_id = "-x".into()),
        &["source_snapshot_id \"-x\""],
    );

    let (snapshot, _) = two_pages();
    let root = three_shard_set();
    root.validate_against_snapshot(&snapshot).unwrap();
    let mut other = root.clone();
    other.record_count = 229;
    assert_refused(
        other.validate_against_snapshot(&snapshot),
        &["record_count 229 differs from the source snapshot's 230"],
    );
    let mut other = root.clone();
    other.source_snapshot_id = "T".into();
    assert_refused(
        other.validate_against_snapshot(&snapshot),
        &["source_snapshot_id \"T\" is not the dataset's snapshot \"S\""],
    );
}

const POINTER_KEYS: [&str; 11] = [
    "first_ordinal",
    "generation",
    "logical_shard_id",
    "name",
    "publication_id",
    "record_ids",
    "source_snapshot_id",
    "statuses",
    "stored_bytes",
    "terminal_statuses",
    "uri",
];

#[test]
fn worker_pointer_has_exact_keys() {
    for key in POINTER_KEYS {
        let text = edit(WORKER_POINTER, |d| remove(d, "", key));
        assert_refused(
            pointer(&text),
            &["worker pointer: ", &format!("missing required key {key:?}")],
        );
    }
    let text = edit(WORKER_POINTER, |d| set(d, "", "attempt", Value::Int(1)));
    assert_refused(pointer(&text), &["unknown key \"attempt\""]);
    let text = edit(WORKER_POINTER, |d| set(d, "", "generation", Value::Int(12)));
    assert_eq!(pointer(&text).unwrap().generation, Some(12));
    for bad in [
        Value::Int(-1),
        "12".into(),
        Value::Float(12.0),
        Value::Bool(true),
    ] {
        let text = edit(WORKER_POINTER, |d| set(d, "", "generation", bad));
        assert_refused(
            pointer(&text),
            &["key \"generation\" must be a nonnegative integer or null"],
        );
    }
    for key in ["first_ordinal", "stored_bytes"] {
        for bad in [
            Value::Int(-1),
            "1".into(),
            Value::Float(1.0),
            Value::Bool(true),
            Value::Null,
        ] {
            let text = edit(WORKER_POINTER, |d| set(d, "", key, bad));
            assert_refused(
                pointer(&text),
                &[&format!("key {key:?} must be a nonnegative integer")],
            );
        }
    }
    let text = edit(WORKER_POINTER, |d| set(d, "", "uri", "/abs/object".into()));
    assert_refused(pointer(&text), &["uri: invalid relative path", "absolute"]);
}

#[test]
fn worker_pointer_statuses() {
    for bad in ["ok", "SUCCESS", "", "succeeded"] {
        let text = edit(WORKER_POINTER, |d| {
            set(
                d,
                "",
                "statuses",
                Value::Array(vec![bad.into(), "failed".into()]),
            )
        });
        assert_refused(
            pointer(&text),
            &[&format!("statuses[0]: status {bad:?} is not one of")],
        );
    }
    let text = edit(WORKER_POINTER, |d| {
        set(
            d,
            "",
            "terminal_statuses",
            Value::Array(vec!["success".into(), Value::Int(1)]),
        )
    });
    assert_refused(
        pointer(&text),
        &["terminal_statuses[1]: status 1 is not one of"],
    );
    for wire in ["success", "skipped", "failed"] {
        assert_eq!(AnnotationStatus::from_wire(wire).unwrap().as_wire(), wire);
    }
    assert_eq!(AnnotationStatus::from_wire("Success"), None);

    let good = pointer(WORKER_POINTER).unwrap();
    good.validate().unwrap();
    let mut bad = good.clone();
    bad.statuses.pop();
    assert_refused(
        bad.validate(),
        &["statuses has 1 entries but record_ids has 2"],
    );
    let mut bad = good.clone();
    bad.terminal_statuses.push(AnnotationStatus::Failed);
    assert_refused(
        bad.validate(),
        &["terminal_statuses has 3 entries but record_ids has 2"],
    );
}

#[test]
fn worker_pointer_ids() {
    let good = pointer(WORKER_POINTER).unwrap();
    for id in ["shard-0", "shard-000000001", "shard_00000000", "00000000"] {
        let mut bad = good.clone();
        bad.logical_shard_id = id.into();
        assert_refused(
            bad.validate(),
            &[&format!(
                "logical_shard_id {id:?} is not of the form shard-%08d"
            )],
        );
    }
    let mut bad = good.clone();
    bad.name = "no spaces".into();
    assert_refused(
        bad.validate(),
        &["name \"no spaces\" is not a portable identifier"],
    );
    let text = edit(WORKER_POINTER, |d| {
        set(
            d,
            "",
            "record_ids",
            Value::Array(vec!["r0".into(), "".into()]),
        )
    });
    assert_refused(
        pointer(&text),
        &["record_ids[1]: record id must be a nonempty string"],
    );
    let text = edit(WORKER_POINTER, |d| {
        set(
            d,
            "",
            "record_ids",
            Value::Array(vec!["r0".into(), Value::Int(1)]),
        )
    });
    assert_refused(
        pointer(&text),
        &["record_ids[1]: record id must be a string, not an integer"],
    );
}

#[test]
fn annotation_documents_refuse_duplicate_keys() {
    let dup = WORKER_POINTER.replacen(
        "\"stored_bytes\": 99,",
        "\"stored_bytes\": 99, \"stored_bytes\": 99,",
        1,
    );
    assert!(matches!(pointer(&dup), Err(DocumentError::Json { .. })));
    let dup = REVISION.replacen(
        "\"stored_bytes\": 451",
        "\"stored_bytes\": 451, \"stored_bytes\": 451",
        1,
    );
    assert!(matches!(revision(&dup), Err(DocumentError::Json { .. })));
}
