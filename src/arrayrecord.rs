//! A native ArrayRecord reader and writer, byte-compatible with the reference
//! (`array-record` 0.8.6, riegeli 2025-07-17). The wire format is described in
//! `docs/ARRAYRECORD.md`; section numbers in comments refer to it.
//!
//! # Layers inside this module
//!
//! | module | job |
//! |---|---|
//! | `hash`, `varint`, `position` | primitives: the Riegeli HighwayHash, LEB128, block arithmetic |
//! | `proto` | the three index messages (postscript, footer metadata, index entries) |
//! | `options` | writer option strings, parsed and rendered like the reference |
//! | `compress`, `chunk` | chunk headers and simple-chunk payloads (logical bytes) |
//! | `layout`, `stream` | block headers: physical bytes in memory or streamed |
//! | `writer`, `reader`, `walker` | the public file-level API |
//!
//! # Design choices
//!
//! * The reader is generic over a [`ByteSource`] (positional reads), so storage layers plug in
//!   without this module knowing about files or object stores. Each record read is one
//!   positional read of its chunk's span; huge records can be streamed with
//!   [`ArrayRecordReader::read_into`] in bounded memory.
//! * Every number read from a file is checked before use (checked arithmetic, allocation
//!   bounded by the file size and [`ReaderLimits`]); corrupt input gives [`Error::Corrupt`]
//!   naming the file, the chunk offset and the rule broken, and only affects reads of the
//!   records in the damaged chunk.
//! * The writer reproduces the reference bytes for every option string: same chunk layout,
//!   padding and footer, and the same compressor output (docs/ARRAYRECORD.md section 8):
//!   `feed` replays how riegeli's buffers hand input to a compressor; zstd and brotli are the
//!   reference's C libraries at its releases, driven with those pieces; snappy is a port of
//!   the reference's match finder (`snappy_encode`).
//! * Transposed chunks (`transpose:true`) are neither written nor read
//!   ([`Error::Unsupported`]).

mod brotli_encode;
mod chunk;
mod compress;
mod cursor;
mod error;
mod feed;
mod hash;
mod layout;
mod options;
mod position;
mod proto;
mod reader;
mod snappy_encode;
mod source;
mod stream;
mod varint;
mod walker;
mod writer;

pub use error::{Error, Result};
pub use hash::{hash as riegeli_hash, Hasher as RiegeliHasher, RIEGELI_KEY};
pub use options::{Compression, WriterOptions};
pub use position::{
    add_with_overhead, chunk_end, is_chunk_boundary, round_up_chunk_boundary, BLOCK, BLOCK_HEADER,
    CHUNK_HEADER, USABLE,
};
pub use reader::{ArrayRecordReader, ReaderLimits, RecordSink, WriteSink};
pub use source::ByteSource;
pub use walker::{walk_chunks, ChunkInfo, ChunkWalker};
pub use writer::{write_records, ArrayRecordWriter};
