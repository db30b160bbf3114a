//! The mounted tree (`docs/MOUNT.md`).
//!
//! - [`views`]: the files a field shows (`.raw`, `.json`, `.npy`, SigMF pair).
//! - [`inode`]: inode numbers computed from positions, stable at zero memory cost.
//! - [`record_tree`]: one record's file tree, from its metadata row.
//! - [`columns`]: `columns/`, every record's value of a field as one file.
//! - [`cache`]: decoded records, bounded in bytes, large ones in temporary files.
//! - [`spill`]: writing a large record into temporary files, large tensors in files of their own.
//! - [`background`]: structures that need every row, built once in a thread of their own.
//! - [`row_index`]: `by-id/` and `by-scene/`, built in the background within a memory limit.
//! - [`error`]: the layer's one error, its cause kept, and the errno of each cause.
//! - [`namespace`]: the FUSE-free core: lookup, getattr, readdir, readlink, read.
//! - [`fuse`]: the thin `fuser` adapter: errno mapping, attributes, TTLs, threads.
//! - [`status_file`]: the hidden `.sdsfs-status`, a fresh immutable report per lookup.
//! - [`log_limit`]: repeated log lines rate-limited, with a count.
//! - [`panics`]: a panic in a request or a background job caught, answered and logged once.
//! - [`catalog_watch`]: invalidates the kernel's caches of the annotation overlay on a change.

pub mod background;
pub mod cache;
pub mod catalog_watch;
pub mod columns;
pub mod computed;
pub mod error;
pub mod fuse;
pub mod inode;
pub mod log_limit;
pub mod namespace;
pub mod overlay;
pub mod panics;
pub mod record_tree;
pub mod row_index;
pub mod spill;
pub mod stats;
pub mod status_file;
pub mod views;
