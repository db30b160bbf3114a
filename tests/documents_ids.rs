//! Path and id derivations against SHA-256 values computed independently (Python `hashlib`
//! and `json.dumps`) when the test was written.

use sdsfs::format::documents::ids::*;

const DATA: &str = "3a6eb0790f39ac87c94f3856b2dd2c5d110e6811602261a9a923d3bb23adc8b7";

#[test]
fn sha256_of_known_inputs() {
    assert_eq!(sha256_hex(b"data"), DATA);
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}

#[test]
fn signal_paths() {
    assert_eq!(page_id("snap-1", 0), "snap-1-00000000");
    assert_eq!(page_id("S", 1), "S-00000001");
    assert_eq!(page_id("S", 123_456_789), "S-123456789");
    // sha256("snap-1-00000000") = 16342093..., sha256("S-00000001") = 9c8cb27e...
    assert_eq!(
        manifest_path("snap-1", 0).unwrap().as_str(),
        "manifests/16/snap-1-00000000.json"
    );
    assert_eq!(
        manifest_path("S", 1).unwrap().as_str(),
        "manifests/9c/S-00000001.json"
    );
    // Reference views fan out by the snapshot id's first two characters (the library's
    // publish_reference), not a hash.
    assert_eq!(
        reference_manifest_path("view-1", 0).unwrap().as_str(),
        "manifests/vi/view-1-00000000.json"
    );
    assert_eq!(
        reference_manifest_path("ü✓x", 2).unwrap().as_str(),
        "manifests/ü✓/ü✓x-00000002.json"
    );
    assert_eq!(
        snapshot_path("my dataset/ü ✓").unwrap().as_str(),
        "snapshots/my dataset/ü ✓/snapshot.json"
    );
    assert_eq!(
        snapshot_path("snap-1").unwrap().as_str(),
        "snapshots/snap-1/snapshot.json"
    );
    assert_eq!(
        data_shard_path(DATA).unwrap().as_str(),
        format!("objects/data/3a/{DATA}.arrayrecord")
    );
    assert_eq!(
        metadata_shard_path(DATA).unwrap().as_str(),
        format!("objects/metadata/3a/{DATA}.arrayrecord")
    );
}

/// Shard pair names as the library's write_shard derived them (receipts of
/// `tests/python/graph_tool.py publish`).
#[test]
fn shard_names_derive_from_work_id_and_attempt() {
    for (work_id, attempt, expected) in [
        (
            "w-b",
            0,
            "794099568d49718e1405dbf003fb80bc33ef538859a8f46f4c04ec4547caa3c3",
        ),
        (
            "w-a",
            0,
            "f7989f3f65609147ca3de144f81e81f1cee8a65c634f3e3a9ace889559ab504a",
        ),
        (
            "w-a",
            1,
            "3778c5cdfa1bf497d83a749a47f8568aa9862fc933f69f28663d780f03edda9a",
        ),
        (
            "w-empty",
            0,
            "b11e52bf1f0eb73c2f333ac3d1bab2e5da9e74746ad4e26491aa08200d2ad20d",
        ),
    ] {
        assert_eq!(shard_id(work_id, attempt), expected);
    }
    let h = shard_id("w-b", 0);
    assert_eq!(
        data_shard_path(&h).unwrap().as_str(),
        format!("objects/data/79/{h}.arrayrecord")
    );
}

#[test]
fn annotation_paths() {
    assert_eq!(catalog_path().unwrap().as_str(), "annotations/catalog.json");
    assert_eq!(
        revision_path(DATA).unwrap().as_str(),
        format!("annotations/catalogs/{DATA}.json")
    );
    assert_eq!(
        set_root_path("labels", "p1").unwrap().as_str(),
        "annotations/sets/labels/p1/root.json"
    );
    assert_eq!(logical_shard_id(0), "shard-00000000");
    assert_eq!(logical_shard_id(3), "shard-00000003");
    // sha256("shard-00000000") = 45f5a2a4..., sha256("shard-00000003") = 5f2e2f1d...
    assert_eq!(
        worker_pointer_path("labels", "p1", "shard-00000000").unwrap().as_str(),
        "annotations/sets/labels/p1/shards/45/45f5a2a4b5d610d9306d6320bef689785786387bd20a0a54b100ea5aee938a62.json"
    );
    assert_eq!(
        worker_pointer_path("labels", "p1", &logical_shard_id(3)).unwrap().as_str(),
        "annotations/sets/labels/p1/shards/5f/5f2e2f1d4a1bdbc88e96bb0f39354e0f5d7aef447955d2ec20279ad4568884d2.json"
    );
    assert_eq!(
        annotation_object_path("labels", "p1", DATA)
            .unwrap()
            .as_str(),
        format!("annotations/sets/labels/p1/objects/3a/{DATA}.arrayrecord")
    );
}

#[test]
fn default_publication_ids() {
    // sha256('{"name":"labels","source_snapshot_id":"snap-1"}')[:32]
    assert_eq!(
        default_publication_id("labels", "snap-1"),
        "2e5ba8c1c46ef197a2f3d2b9ac2bd520"
    );
    assert_eq!(
        default_publication_id("qa.v2", "S_0"),
        "e2841c719383ae204b305c163d94b211"
    );
    assert_ne!(
        default_publication_id("labels", "snap-2"),
        default_publication_id("labels", "snap-1")
    );
}

#[test]
fn derivations_refuse_unusable_inputs() {
    // Snapshot ids are any nonempty string making a valid relative path.
    assert!(snapshot_path("a/b").is_ok());
    assert!(matches!(snapshot_path(".."), Err(IdError::Path(_))));
    assert!(matches!(snapshot_path(""), Err(IdError::Path(_))));
    assert!(matches!(snapshot_path("a?b"), Err(IdError::Path(_))));
    assert!(matches!(
        data_shard_path(&DATA.to_uppercase()),
        Err(IdError::NotDigest { .. })
    ));
    assert!(matches!(
        metadata_shard_path(&DATA[..63]),
        Err(IdError::NotDigest { .. })
    ));
    assert!(matches!(
        revision_path("../x"),
        Err(IdError::NotDigest { .. })
    ));
    assert!(matches!(
        set_root_path("..", "p"),
        Err(IdError::NotPortable { .. })
    ));
    assert!(matches!(
        worker_pointer_path("s", "p/q", "shard-00000000"),
        Err(IdError::NotPortable { .. })
    ));
    assert!(matches!(
        annotation_object_path("s", "p", "zz"),
        Err(IdError::NotDigest { .. })
    ));
    assert!(manifest_path("x\\y", 0).is_err());
    let long = "s".repeat(300);
    assert!(manifest_path(&long, 0).is_ok());
}
