//! Datasets: opening a published snapshot and reading it, and publishing new ones.
//!
//! - [`reader`]: [`Dataset`] — `root.json` → snapshot eagerly, manifest pages lazily through an
//!   LRU, ordinal → shard entry → physical index in O(log n), records and metadata rows, read
//!   instructions for callers that fetch themselves.
//! - [`publish`]: `write_shard` and `publish` (profile section 5): create-only, content
//!   addressed, resumable after an interruption at any point; `publish_entries` is its commit
//!   step alone, shared with views.
//! - [`verify`](mod@verify): every rule checked eagerly over a whole dataset, every problem
//!   reported (`sds verify`).
//! - [`view`]: selections of records published as lightweight views (shared shards,
//!   `record_indices`) or materialized into new shards (`sds select`).

mod error;
mod pages;
pub mod publish;
pub mod reader;
pub(crate) mod shards;
pub mod verify;
pub mod view;

pub use error::DatasetError;
pub use pages::RecordLocation;
pub use publish::{
    encode_shard, publish, publish_entries, write_shard, EncodedShard, PublishOptions,
    PublishSummary, ShardOptions, ShardReceipt,
};
pub use reader::{Dataset, ReadInstruction};
pub use shards::ShardReader;
pub use verify::{
    verify, verify_objects, verify_store, verify_store_with, Problem, VerifyOptions, VerifyReport,
};
pub use view::{dedup_in_order, materialize, parse_indices, select_view, ViewSummary};

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
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            manifest_cache_pages: 16,
            open_shards: 64,
            control_limits: JsonLimits::CONTROL,
            record_limits: RecordLimits::default(),
            read_ahead_chunks: 2,
        }
    }
}
