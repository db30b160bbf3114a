//! `ObjectStore::copy_from`: create-only copies between stores. Between two local roots it is
//! a hard link (same inode, no byte copied); through any other store it is the default read +
//! create. Both keep the create-only contract: identical → AlreadyIdentical, different →
//! Collision, never a partial object.

mod common;

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use common::datasets::{Counting as _, CountingStore};
use sdsfs::format::path::RelPath;
use sdsfs::storage::{CreateOutcome, LocalStore, ObjectStore, StorageError};

fn rel(path: &str) -> RelPath {
    RelPath::new(path).unwrap()
}

fn two_roots() -> (tempfile::TempDir, LocalStore, LocalStore) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("a")).unwrap();
    std::fs::create_dir(tmp.path().join("b")).unwrap();
    let a = LocalStore::open(&tmp.path().join("a")).unwrap();
    let b = LocalStore::open(&tmp.path().join("b")).unwrap();
    (tmp, a, b)
}

#[test]
fn local_copy_is_a_hard_link_and_create_only() {
    let (tmp, a, b) = two_roots();
    let path = rel("objects/data/ab/abc.arrayrecord");
    a.create(&path, b"shard bytes").unwrap();
    assert_eq!(
        b.copy_from(&a, &path, &path).unwrap(),
        CreateOutcome::Created
    );
    let src = std::fs::metadata(tmp.path().join("a").join(path.as_str())).unwrap();
    let dst = std::fs::metadata(tmp.path().join("b").join(path.as_str())).unwrap();
    assert_eq!(src.ino(), dst.ino(), "a local copy shares the inode");
    assert_eq!(src.nlink(), 2);
    assert_eq!(b.read(&path, None).unwrap().as_ref(), b"shard bytes");
    // Re-running converges.
    assert_eq!(
        b.copy_from(&a, &path, &path).unwrap(),
        CreateOutcome::AlreadyIdentical
    );
    // A different object under the name is a collision, and is left alone.
    let other = rel("objects/data/ab/other.arrayrecord");
    a.create(&other, b"other bytes").unwrap();
    let err = b.copy_from(&a, &other, &path).unwrap_err();
    assert!(matches!(err, StorageError::Collision { .. }), "{err}");
    assert_eq!(b.read(&path, None).unwrap().as_ref(), b"shard bytes");
    // A missing source is NotFound and creates nothing.
    let err = b
        .copy_from(&a, &rel("missing"), &rel("x/missing"))
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert!(!tmp.path().join("b/x/missing").exists());
}

#[test]
fn local_copy_refuses_a_symlinked_source() {
    let (tmp, a, b) = two_roots();
    std::fs::write(tmp.path().join("outside"), b"secret").unwrap();
    std::os::unix::fs::symlink(tmp.path().join("outside"), tmp.path().join("a/link")).unwrap();
    let err = b.copy_from(&a, &rel("link"), &rel("link")).unwrap_err();
    assert!(!err.is_not_found(), "{err}");
    assert!(!tmp.path().join("b/link").exists());
}

#[test]
fn default_copy_reads_and_creates() {
    let (tmp, a, b) = two_roots();
    let path = rel("objects/metadata/cd/cde.arrayrecord");
    a.create(&path, b"metadata bytes").unwrap();
    // Through a decorator that is not a local store: the trait's default (read + create).
    let source = CountingStore::new(Arc::new(a));
    assert_eq!(
        b.copy_from(&source, &path, &path).unwrap(),
        CreateOutcome::Created
    );
    let src = std::fs::metadata(tmp.path().join("a").join(path.as_str())).unwrap();
    let dst = std::fs::metadata(tmp.path().join("b").join(path.as_str())).unwrap();
    assert_ne!(src.ino(), dst.ino(), "the default path copies bytes");
    assert_eq!(b.read(&path, None).unwrap().as_ref(), b"metadata bytes");
    // And into a non-local destination the default applies too.
    let b2 = CountingStore::new(Arc::new(b));
    assert_eq!(
        b2.copy_from(&source, &path, &path).unwrap(),
        CreateOutcome::AlreadyIdentical
    );
}
