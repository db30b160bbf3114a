//! The mount's core (`Namespace`, no FUSE) over a counting store, for tests that check which
//! objects a tree operation reads.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use sdsfs::dataset::{Dataset, OpenOptions};
use sdsfs::fs::inode::Ino;
use sdsfs::fs::namespace::{Attr, Namespace, NamespaceConfig};
use sdsfs::storage::{LocalStore, ObjectStore};

use super::datasets::{Counting as _, CountingStore};

/// A namespace over the dataset in `dir`, with the store that counts its reads.
pub fn counting_namespace(dir: &Path) -> (Arc<CountingStore>, Namespace) {
    let local: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir).unwrap());
    let counting = Arc::new(CountingStore::new(local));
    let store: Arc<dyn ObjectStore> = counting.clone();
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    (
        counting,
        Namespace::new(Arc::new(dataset), NamespaceConfig::default()),
    )
}

/// The attributes of `path` (below the root), looked up name by name.
pub fn lookup_path(ns: &Namespace, path: &str) -> Attr {
    let mut attr = ns.getattr(Ino::Root.encode()).unwrap();
    for name in path.split('/') {
        attr = ns.lookup(attr.ino, name).unwrap();
    }
    attr
}

/// Reads of data shards since the last call (the counts are taken).
pub fn data_reads(store: &CountingStore) -> usize {
    store
        .take_paths()
        .iter()
        .filter(|p| p.starts_with("objects/data/"))
        .count()
}
