//! The record codec of FORMAT.md sections 2 and 3: one record is one SafeTensors payload holding a
//! JSON descriptor tensor (`__sds_descriptor__`) and one tensor per field; its metadata shard
//! row is the same description without the tensor values.
//!
//! - [`model`]: the plain data types ([`Record`], [`RecordMeta`], [`Field`], [`FieldMeta`],
//!   [`Axis`], [`Coordinate`]).
//! - [`json_form`]: their JSON forms (descriptor, row, `.json` views): every key written,
//!   unknown keys ignored on read.
//! - [`validate`](mod@validate): the section 2 rules and the section 9 limits, shared by writing
//!   and reading so a writer never produces what a reader refuses.
//! - [`payload`]: SafeTensors framing. Writing delegates to the `safetensors` crate (the byte
//!   contract); reading is a strict, zero-copy layout parser that needs only the header and the
//!   descriptor bytes, so a mount can serve fields straight from a file by byte range.
//! - [`lazy`]: a metadata row kept as its text, its fields parsed one at a time when asked.
//! - [`row`]: metadata rows and the row/record agreement check.
//! - [`error`]: [`RecordError`] and the rule and limit names it reports.

pub mod error;
pub mod json_form;
pub mod lazy;
pub mod model;
pub mod payload;
pub mod row;
pub mod validate;

pub use error::{limit, rule, RecordError};
pub use json_form::{tensor_key, RECORD_FORMAT, RECORD_VERSION, SUPPORTED_RECORD_VERSIONS};
pub use lazy::{LazyRow, RowLayout};
pub use model::{Axis, Coordinate, Field, FieldMeta, Record, RecordMeta};
pub use payload::{
    decode, encode, encode_pieces, header_len, parse_header, parse_layout, EncodedPayload,
    FieldLayout, PayloadHeader, RecordLayout, TensorEntry, DESCRIPTOR_TENSOR,
};
pub use row::{check_row_agrees, fingerprint_of};
pub use validate::{validate, validate_for_write};
