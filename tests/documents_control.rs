//! Roots, snapshots and manifest pages against documents the `signal-dataset` library wrote
//! (`documents_support`): they parse, re-serialise to the same bytes, and every rule the
//! library checks is checked; what the library accepts (unknown keys, optional keys, any
//! nonempty ids, lenient versions) is accepted.

mod documents_support;

use documents_support as support;
use sdsfs::format::documents::*;
use sdsfs::format::json::Value;
use sdsfs::format::path::ObjectPath;
use support::*;

fn root(text: &str) -> Result<DatasetRoot, DocumentError> {
    DatasetRoot::parse(text.as_bytes(), &LIMITS)
}

fn snapshot(text: &str) -> Result<Snapshot, DocumentError> {
    let parsed = Snapshot::parse(text.as_bytes(), &LIMITS)?;
    parsed.validate()?;
    Ok(parsed)
}

fn page(text: &str) -> Result<ManifestPage, DocumentError> {
    ManifestPage::parse(text.as_bytes(), &LIMITS)
}

#[test]
fn library_documents_parse_and_round_trip_byte_for_byte() {
    let parsed = root(ROOT).unwrap();
    assert_eq!(parsed.dataset_id, "my dataset/ü ✓");
    assert_eq!(parsed.min_reader_version.as_deref(), Some("0.3.0"));
    assert_eq!(
        parsed.snapshot.path.as_str(),
        "snapshots/snap-1/snapshot.json"
    );
    assert_eq!(parsed.to_json(), ROOT);
    let snap = snapshot(SNAPSHOT).unwrap();
    assert_eq!((snap.record_count, snap.shard_count), (5, 3));
    assert_eq!(snap.manifests.len(), 2);
    assert_eq!(
        snap.manifests[1].record_count, 0,
        "a page of one empty shard"
    );
    assert_eq!(snap.to_json(), SNAPSHOT);
    let first = page(MANIFEST).unwrap();
    assert_eq!(first.shards.len(), 2);
    assert_eq!(first.to_json(), MANIFEST);
    first.validate_against(&snap.manifests[0]).unwrap();
    assert_eq!(snap.manifests[0].object.path.as_str(), PAGE_PATH);
}

#[test]
fn writers_emit_the_librarys_root() {
    let written = DatasetRoot::new(
        "my dataset/ü ✓",
        reference("snapshots/snap-1/snapshot.json", 634),
        root(ROOT).unwrap().metadata,
    );
    assert_eq!(written.to_json(), ROOT);
}

#[test]
fn root_optional_keys_and_unknown_keys() {
    let minimal = edit(ROOT, |d| {
        remove(d, "", "metadata");
        remove(d, "", "min_reader_version");
        set(d, "", "future_key", Value::Bool(true));
        set(d, "snapshot", "future_key", Value::Int(1.into()));
    });
    let parsed = root(&minimal).unwrap();
    assert!(parsed.metadata.is_empty());
    assert_eq!(parsed.min_reader_version, None);
    let null_version = edit(ROOT, |d| set(d, "", "min_reader_version", Value::Null));
    assert_eq!(root(&null_version).unwrap().min_reader_version, None);
    // The library reads `metadata` as `value or {}`: every falsy value is an empty mapping.
    for falsy in ["null", "[]", "\"\"", "0", "false"] {
        let text = edit(ROOT, |d| set(d, "", "metadata", json(falsy)));
        assert!(root(&text).unwrap().metadata.is_empty(), "{falsy}");
    }
    for refused in ["[1]", "\"x\"", "1", "true"] {
        let text = edit(ROOT, |d| set(d, "", "metadata", json(refused)));
        assert_refused(root(&text), &["metadata must be an object"]);
    }
}

#[test]
fn root_refuses_what_the_library_refuses() {
    for key in [
        "dataset_id",
        "format",
        "layout_version",
        "snapshot",
        "record_codec",
        "shard_format",
    ] {
        let text = edit(ROOT, |d| remove(d, "", key));
        assert!(root(&text).is_err(), "{key} missing was accepted");
    }
    let empty_id = edit(ROOT, |d| set(d, "", "dataset_id", "".into()));
    assert_refused(root(&empty_id), &["dataset_id", "nonempty"]);
    let other_codec = edit(ROOT, |d| set(d, "record_codec", "version", "1".into()));
    assert_refused(root(&other_codec), &["unsupported record codec"]);
    let other_format = edit(ROOT, |d| set(d, "shard_format", "name", "tfrecord".into()));
    assert_refused(root(&other_format), &["unsupported shard format"]);
    let layout = edit(ROOT, |d| set(d, "", "layout_version", "0.2".into()));
    assert_refused(root(&layout), &["layout_version", "0.2"]);
    let absolute = edit(ROOT, |d| set(d, "snapshot", "path", "/etc/passwd".into()));
    assert_refused(root(&absolute), &["snapshot", "absolute"]);
    let huge = ROOT.replace(
        "\"stored_bytes\": 634",
        "\"stored_bytes\": 18446744073709551616",
    );
    // Refused by the JSON layer or, where big integers are kept, as a count that does not fit.
    assert!(root(&huge).is_err(), "a size beyond 64 bits was accepted");
}

#[test]
fn the_sdsfs_pre_release_dialect_is_named() {
    let old = edit(ROOT, |d| {
        remove(d, "", "record_codec");
        remove(d, "", "shard_format");
        set(d, "", "snapshot_id", "snap-1".into());
    });
    assert_refused(
        root(&old),
        &["unsupported record codec", "sdsfs pre-releases"],
    );
}

#[test]
fn min_reader_version_is_lenient_and_names_both_versions() {
    for accepted in [
        "0.3.0",
        "0.4.0",
        "0.4",
        "0.4.0rc1",
        "0.4.0+local",
        "0.2",
        "0",
    ] {
        let text = edit(ROOT, |d| set(d, "", "min_reader_version", accepted.into()));
        assert!(root(&text).is_ok(), "{accepted} refused");
    }
    let newer = edit(ROOT, |d| set(d, "", "min_reader_version", "0.4.1".into()));
    let err = root(&newer).unwrap_err();
    assert!(matches!(err, DocumentError::ReaderTooOld { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("0.4.1") && text.contains(sdsfs::READER_VERSION),
        "{text}"
    );
    assert_eq!(sdsfs::READER_VERSION, "0.4.0");
    let unreadable = edit(ROOT, |d| set(d, "", "min_reader_version", "v1".into()));
    assert_refused(root(&unreadable), &["min_reader_version"]);
    let number = edit(ROOT, |d| {
        set(d, "", "min_reader_version", Value::Int(1.into()))
    });
    assert_refused(root(&number), &["min_reader_version"]);
}

#[test]
fn snapshot_rules_are_the_librarys() {
    for key in [
        "format",
        "layout_version",
        "manifests",
        "record_count",
        "shard_count",
        "snapshot_id",
        "stored_bytes",
    ] {
        let text = edit(SNAPSHOT, |d| remove(d, "", key));
        assert!(snapshot(&text).is_err(), "{key} missing was accepted");
    }
    let unknown = edit(SNAPSHOT, |d| set(d, "", "dataset_id", "x".into()));
    assert!(snapshot(&unknown).is_ok(), "unknown keys are ignored");
    let gap = edit(SNAPSHOT, |d| {
        set(d, "manifests.1", "first_ordinal", Value::Int(6.into()))
    });
    assert_refused(snapshot(&gap), &["do not tile"]);
    let count = edit(SNAPSHOT, |d| {
        set(d, "", "record_count", Value::Int(6.into()))
    });
    assert_refused(snapshot(&count), &["do not tile"]);
    let shards = edit(SNAPSHOT, |d| {
        set(d, "", "shard_count", Value::Int(4.into()))
    });
    assert_refused(snapshot(&shards), &["shard_count is 4"]);
    let bytes = edit(SNAPSHOT, |d| {
        set(d, "", "stored_bytes", Value::Int(1.into()))
    });
    assert_refused(snapshot(&bytes), &["stored_bytes is 1"]);
    let any_id = edit(SNAPSHOT, |d| set(d, "", "snapshot_id", "ü ✓/x".into()));
    assert!(snapshot(&any_id).is_ok());
    let empty_id = edit(SNAPSHOT, |d| set(d, "", "snapshot_id", "".into()));
    assert_refused(snapshot(&empty_id), &["snapshot_id"]);
    let none = Snapshot::from_manifests("empty", vec![]).unwrap();
    assert_eq!(
        (none.record_count, none.shard_count, none.stored_bytes),
        (0, 0, 0)
    );
    assert!(snapshot(&none.to_json()).is_ok());
}

#[test]
fn pages_are_checked_against_their_reference() {
    let snap = snapshot(SNAPSHOT).unwrap();
    let reference = &snap.manifests[0];
    let parsed = page(MANIFEST).unwrap();
    let mut changed = reference.clone();
    changed.first_ordinal = 1;
    assert_refused(
        parsed.validate_against(&changed),
        &[PAGE_PATH, "first_ordinal"],
    );
    let mut changed = reference.clone();
    changed.shard_count = 3;
    assert_refused(parsed.validate_against(&changed), &["shard count"]);
    let mut changed = reference.clone();
    changed.stored_bytes += 1;
    assert_refused(parsed.validate_against(&changed), &["stored_bytes"]);
    let overlap = edit(MANIFEST, |d| {
        set(d, "shards.1", "first_ordinal", Value::Int(1.into()))
    });
    assert_refused(page(&overlap), &["shard entries do not tile"]);
    let unknown = edit(MANIFEST, |d| {
        set(d, "", "page_id", "x".into());
        set(d, "shards.0", "stored_bytes", Value::Int(3.into()));
    });
    assert!(page(&unknown).is_ok(), "unknown keys are ignored");
    for key in ["data", "first_ordinal", "metadata", "record_count"] {
        let text = edit(MANIFEST, |d| remove(d, "shards.0", key));
        assert!(page(&text).is_err(), "shard entry without {key} accepted");
    }
}

#[test]
fn record_indices_and_absolute_references() {
    let with_indices = edit(MANIFEST, |d| {
        set(d, "shards.0", "record_indices", json("[1, 0]"));
        set(
            d,
            "shards.0.data",
            "path",
            "/data/source/objects/data/ab/x.arrayrecord".into(),
        );
        set(
            d,
            "shards.0.metadata",
            "path",
            "gs://bucket/p/objects/metadata/ab/x.arrayrecord".into(),
        );
    });
    let parsed = page(&with_indices).unwrap();
    let entry = &parsed.shards[0];
    assert_eq!(entry.physical_index(0), Some(1));
    assert!(matches!(entry.data.path, ObjectPath::Absolute(_)));
    assert!(matches!(entry.metadata.path, ObjectPath::Absolute(_)));
    assert_eq!(parsed.to_json(), with_indices);
    let short = edit(MANIFEST, |d| {
        set(d, "shards.0", "record_indices", json("[0]"))
    });
    assert_refused(
        page(&short),
        &["record_indices has 1 entries but record_count is 2"],
    );
    let null = edit(MANIFEST, |d| {
        set(d, "shards.0", "record_indices", Value::Null)
    });
    assert_eq!(page(&null).unwrap().shards[0].record_indices, None);
    for bad in ["a/../b", "a#b", ".", ""] {
        let text = edit(MANIFEST, |d| set(d, "shards.0.data", "path", bad.into()));
        assert!(page(&text).is_err(), "{bad:?} accepted");
    }
    // Read as the library reads it: an unregistered scheme is a relative path, normalized.
    let normalized = edit(MANIFEST, |d| {
        set(d, "shards.0.data", "path", "http://x//y".into())
    });
    assert_eq!(
        page(&normalized).unwrap().shards[0].data.path.as_str(),
        "http:/x/y"
    );
    let relative = edit(MANIFEST, |d| {
        set(d, "shards.0.data", "path", "gs:x/y".into())
    });
    assert!(matches!(
        page(&relative).unwrap().shards[0].data.path,
        ObjectPath::Relative(_)
    ));
}

#[test]
fn writers_build_pages_of_the_librarys_shape() {
    let (snap, pages) = two_pages();
    assert_eq!(snap.record_count, 230);
    assert_eq!(snap.shard_count, 5);
    assert_eq!(snap.stored_bytes, 1010 + 2020 + 3030 + 404 + 303);
    for (page_doc, reference) in pages.iter().zip(&snap.manifests) {
        let reparsed = page(&page_doc.to_json()).unwrap();
        reparsed.validate_against(reference).unwrap();
        let keys: Vec<String> =
            sdsfs::format::json::parse_object(page_doc.to_json().as_bytes(), &LIMITS)
                .unwrap()
                .keys()
                .map(|k| k.to_string())
                .collect();
        assert_eq!(
            keys,
            [
                "first_ordinal",
                "format",
                "layout_version",
                "record_count",
                "shards"
            ]
        );
    }
    let empty = support::shard(230, 0, 5, 5);
    assert!(
        ManifestPage::from_shards(230, vec![empty]).is_ok(),
        "empty shards are kept"
    );
}
