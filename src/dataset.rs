//! Datasets: opening a published snapshot and reading it, and publishing new ones.
//!
//! - [`reader`]: [`Dataset`] — `root.json` → snapshot eagerly, manifest pages lazily through an
//!   LRU, ordinal → shard entry → physical index in O(log n), records and metadata rows, read
//!   instructions for callers that fetch themselves.
//! - [`mod@publish`]: `write_shard` and `publish` (docs/FORMAT.md, publication): create-only,
//!   shard pairs named by work id and attempt, resumable after an interruption at any point;
//!   `publish_entries` is its commit step alone, shared with reference views.
//! - [`verify`](mod@verify): every rule checked eagerly over a whole dataset, every problem
//!   reported (`sds verify`).
//! - [`view`]: selections of records published as reference views (absolute references to
//!   the source's shards, `record_indices`) or materialized into new shards (`sds select`).
//! - `rows`: every metadata row in order, read ahead on a second thread
//!   ([`Dataset::for_each_stored_row`]), for indexes that need every row.
//! - `objects`: what a reference's path names — the dataset's own store for relative paths, a
//!   store opened for an absolute location otherwise ([`AbsoluteReferences`]).

mod chunks;
mod error;
mod objects;
mod pages;
pub mod publish;
pub mod reader;
mod rows;
pub(crate) mod shards;
pub mod verify;
pub mod view;

pub use chunks::{Charged, Held};
pub use error::DatasetError;
pub use objects::{AbsoluteReferences, LocationOpener, Resolved, StorageOpener};
pub use pages::{LoadedPage, RecordLocation};
pub use publish::{
    encode_shard, publish, publish_entries, relative_location, write_shard, EncodedShard,
    PageLayout, PublishOptions, PublishSummary, ShardOptions, ShardReceipt,
};
pub use reader::{Dataset, ReadInstruction, StoredRow};
pub use rows::RowRead;
pub use shards::ShardReader;
pub use verify::{
    verify, verify_objects, verify_store, verify_store_opened_with, verify_store_with, Problem,
    VerifyOptions, VerifyReport,
};
pub use view::{materialize, parse_indices, select_view, ViewSummary};

use crate::format::limits::{JsonLimits, RecordLimits};

/// How a dataset is opened and read.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Manifest pages kept in memory (the reference library's default is 16).
    pub manifest_cache_pages: usize,
    /// Shard readers kept open (postscript and footer index each).
    pub open_shards: usize,
    /// Limits for control documents.
    pub control_limits: JsonLimits,
    /// Limits for records and metadata rows.
    pub record_limits: RecordLimits,
    /// Chunks fetched ahead, in the background, once a shard is read sequentially (record
    /// `i + 1` after record `i`) on an object store; 0 disables read-ahead. Local stores never
    /// read ahead (the kernel does).
    pub read_ahead_chunks: usize,
    /// Whether absolute references (reference views) are followed, and how their stores are
    /// opened.
    pub absolute_references: AbsoluteReferences,
    /// The budget pages and decoded chunks are charged to (unlimited unless a mount gives its
    /// own: [`Dataset::with_memory_budget`]).
    pub memory: std::sync::Arc<crate::budget::Budget>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            manifest_cache_pages: 16,
            open_shards: 64,
            control_limits: JsonLimits::CONTROL,
            record_limits: RecordLimits::default(),
            read_ahead_chunks: 2,
            absolute_references: AbsoluteReferences::default(),
            memory: crate::budget::Budget::unlimited("memory"),
        }
    }
}
