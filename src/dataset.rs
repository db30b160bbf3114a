//! Datasets: opening a published snapshot and reading it, and publishing new ones.
//!
//! - [`reader`]: [`Dataset`] — `root.json` → snapshot eagerly, manifest pages lazily through an
//!   LRU, ordinal → shard entry → physical index in O(log n), records and metadata rows, read
//!   instructions for callers that fetch themselves.
//! - [`publish`]: `write_shard` and `publish` (profile section 5): create-only, content
//!   addressed, resumable after an interruption at any point.

mod error;
mod pages;
pub mod publish;
pub mod reader;
pub(crate) mod shards;

pub use error::DatasetError;
pub use pages::RecordLocation;
pub use publish::{
    publish, write_shard, PublishOptions, PublishSummary, ShardOptions, ShardReceipt,
};
pub use reader::{Dataset, ReadInstruction};
pub use shards::ShardReader;

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
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            manifest_cache_pages: 16,
            open_shards: 64,
            control_limits: JsonLimits::CONTROL,
            record_limits: RecordLimits::default(),
        }
    }
}
