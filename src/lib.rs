//! sdsfs: the Signal Dataset (SDS) layout 0.1 as a Rust library, a read-only FUSE mount and a
//! companion writer.
//!
//! The crate is layered; each layer uses only the ones listed before it:
//!
//! | layer | job |
//! |---|---|
//! | [`format`](mod@format) | strict JSON, the record codec (SafeTensors payloads), metadata rows, control documents, limits, label conventions, the NPY codec and the mount's name encoding |
//! | [`arrayrecord`] | a native ArrayRecord/Riegeli reader and writer, byte-compatible with the reference |
//! | [`storage`] | objects behind a trait: local directories, S3 and GCS |
//! | [`dataset`] | opening a published dataset, mapping ordinals to shards, reading records and rows, publication |
//! | [`fs`] | the mounted tree (FUSE-free core) and the thin FUSE adapter |
//! | [`daemon`] | the mount daemon's lifecycle: mount-point checks, daemonizing, serving until a signal or an unmount, systemd notification, unmounting |
//! | [`import`] | importers (mounted-tree copies, SigMF, NPY, raw captures) and `sds create`'s parallel, deterministic publication |
//! | [`cli`] | the `sdsfs` and `sds` command lines |
//!
//! Below every layer, `memory` holds one helper for large fresh buffers (huge pages).
//!
//! Every layer has one error enum. `fs` keeps the errors of the layers below as the sources of
//! its own ([`fs::error`]), and the FUSE boundary picks the errno from that cause.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod annotations;
pub mod arrayrecord;
pub mod budget;
pub mod cli;
pub mod daemon;
pub mod dataset;
pub mod format;
pub mod fs;
pub mod import;
pub mod interrupt;
mod memory;
pub mod storage;
mod sync;
#[cfg(test)]
mod testing;

/// The `signal-dataset` release whose reading rules this crate implements: a dataset whose
/// `min_reader_version` is newer is refused (docs/FORMAT.md, versions).
pub const READER_VERSION: &str = "0.4.0";
