//! The one error type of the record codec, and the names of the rules it reports.
//!
//! Every refusal names the rule it enforces (a `&'static str` from [`rule`]) and the place
//! (field name, axis index and name, key) in its detail, so a caller can match on the rule and a
//! person can find the offending spot. The rule names are constants so tests and callers do not
//! depend on message wording.

use crate::format::json::{JsonError, JsonErrorKind};

/// Why a record, descriptor, metadata row or payload was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordError {
    /// The record breaks a validation rule of FORMAT.md section 2 (on write, or found on read).
    #[error("invalid record: {rule}: {detail}")]
    Validation { rule: &'static str, detail: String },
    /// A limit of FORMAT.md section 9 was exceeded; raised before the memory is committed.
    #[error("record limit exceeded: {limit} is {value}, the limit is {max}")]
    Limit {
        limit: &'static str,
        value: u64,
        max: u64,
    },
    /// The SafeTensors framing or the descriptor's structure is broken.
    #[error("corrupt record payload: {rule}: {detail}")]
    Corrupt { rule: &'static str, detail: String },
    /// A metadata shard row disagrees with its decoded data record (a corruption error).
    #[error("metadata row disagrees with its record: {what} differs: {detail}")]
    RowMismatch { what: &'static str, detail: String },
    /// A dtype outside the table of section 2 (object, string, complex128, bfloat16, ...).
    #[error("unsupported dtype {0:?}")]
    UnsupportedDtype(String),
    /// A descriptor whose `format` is not `signal-dataset.record`.
    #[error("unsupported record format {0:?} (expected \"signal-dataset.record\")")]
    UnsupportedFormat(String),
    /// A descriptor whose `version` is not one this reader supports.
    #[error("unsupported record version {0:?} (supported: \"0.1\")")]
    UnsupportedVersion(String),
    /// A JSON document (header, descriptor or row) that is not strict JSON.
    #[error("invalid JSON in the {context}: {source}")]
    Json {
        context: &'static str,
        source: JsonError,
    },
    /// The bytes handed in end before the part that must be read next.
    #[error("truncated input: {needed} bytes needed, {available} available")]
    Truncated { needed: u64, available: u64 },
}

impl RecordError {
    /// True for errors that mean stored bytes are damaged or inconsistent (as opposed to a
    /// record that was never valid being offered for writing).
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            RecordError::Corrupt { .. }
                | RecordError::RowMismatch { .. }
                | RecordError::Json { .. }
                | RecordError::Truncated { .. }
        )
    }

    pub(crate) fn validation(rule: &'static str, detail: impl Into<String>) -> RecordError {
        RecordError::Validation {
            rule,
            detail: detail.into(),
        }
    }

    pub(crate) fn corrupt(rule: &'static str, detail: impl Into<String>) -> RecordError {
        RecordError::Corrupt {
            rule,
            detail: detail.into(),
        }
    }

    /// Checks `value <= max`, naming `limit` otherwise.
    pub(crate) fn check_limit(
        limit: &'static str,
        value: u64,
        max: u64,
    ) -> Result<(), RecordError> {
        if value > max {
            return Err(RecordError::Limit { limit, value, max });
        }
        Ok(())
    }

    /// Wraps a JSON error; the JSON reader's own limits become [`RecordError::Limit`] so every
    /// exceeded limit is reported the same way.
    pub(crate) fn json(context: &'static str, source: JsonError) -> RecordError {
        RecordError::json_sized(context, source, limit::DESCRIPTOR_BYTES)
    }

    /// [`RecordError::json`] for a document whose byte size is bounded by `size_limit`.
    pub(crate) fn json_sized(
        context: &'static str,
        source: JsonError,
        size_limit: &'static str,
    ) -> RecordError {
        let as_u64 = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        match source.kind {
            JsonErrorKind::TooLarge { size, limit } => RecordError::Limit {
                limit: size_limit,
                value: as_u64(size),
                max: as_u64(limit),
            },
            JsonErrorKind::TooDeep { limit } => RecordError::Limit {
                limit: limit::JSON_DEPTH,
                value: as_u64(limit).saturating_add(1),
                max: as_u64(limit),
            },
            JsonErrorKind::TooManyNodes { limit } => RecordError::Limit {
                limit: limit::JSON_NODES,
                value: as_u64(limit).saturating_add(1),
                max: as_u64(limit),
            },
            _ => RecordError::Json { context, source },
        }
    }
}

/// Names of the section 9 limits, as reported in [`RecordError::Limit`].
pub mod limit {
    pub const ENCODED_RECORD_BYTES: &str = "encoded record bytes";
    /// Also bounds the SafeTensors header JSON (see the module docs of `record::payload`).
    pub const DESCRIPTOR_BYTES: &str = "descriptor bytes";
    pub const FIELDS: &str = "fields";
    pub const AXES_PER_FIELD: &str = "axes per field";
    pub const COORDINATE_VALUES: &str = "coordinate values";
    pub const TENSOR_BYTES: &str = "tensor bytes";
    pub const TOTAL_TENSOR_BYTES: &str = "total tensor bytes";
    pub const METADATA_BYTES: &str = "metadata bytes";
    pub const JSON_DEPTH: &str = "JSON depth";
    pub const JSON_NODES: &str = "JSON nodes";
}

/// Names of the rules reported in [`RecordError::Validation`] and [`RecordError::Corrupt`].
pub mod rule {
    // Validation (FORMAT.md section 2).
    pub const ID_NONEMPTY: &str = "id must be a nonempty string";
    pub const FIELDS_NONEMPTY: &str = "fields must be a nonempty object";
    pub const FIELD_NAME_NONEMPTY: &str = "field names must be nonempty";
    pub const RANK_EQUALS_AXES: &str = "field rank must equal its number of axes";
    /// Write-only: the library reads a 0-d tensor back as rank 1 and then refuses the record.
    pub const FIELD_RANK_NONZERO: &str =
        "the library cannot represent a 0-d tensor; give it shape [1]";
    pub const AXIS_LENGTH: &str = "axis length must equal the tensor dimension";
    pub const AXIS_NAME_NONEMPTY: &str = "axis names must be nonempty";
    pub const AXIS_NAME_UNIQUE: &str = "axis names must be unique within a field";
    pub const AXIS_ID_CONSISTENT: &str =
        "a reused axis id must have the same length and coordinate everywhere";
    pub const COORDINATE_VALUES_LENGTH: &str =
        "coordinate values length must equal the axis length";
    pub const COORDINATE_FORMS_EXCLUSIVE: &str =
        "a coordinate has at most one of values, start/step and reference";
    pub const COORDINATE_START_STEP_TOGETHER: &str =
        "coordinate start and step must be given together";
    pub const COORDINATE_NUMBER: &str = "coordinate start and step must be numbers";
    pub const COORDINATE_REFERENCE: &str =
        "coordinate reference must name a field of the record or a declared axis id";
    pub const METADATA_FINITE: &str = "metadata and coordinate numbers must be finite";
    pub const FIELD_DATA_LENGTH: &str = "field data length must equal shape product times itemsize";
    /// A key of a descriptor or row is missing or has the wrong JSON type.
    pub const KEY_TYPE: &str = "descriptor or row key missing or of the wrong type";

    // Framing (SafeTensors payload).
    pub const HEADER_LENGTH: &str = "header length prefix";
    pub const HEADER_METADATA: &str = "a header __metadata__ must be an object of strings";
    pub const HEADER_ENTRY: &str = "a tensor entry has exactly dtype, shape and data_offsets";
    pub const DATA_OFFSETS: &str = "data_offsets must match shape and itemsize";
    pub const DATA_COVERAGE: &str = "tensor data must cover the data buffer without gap or overlap";
    pub const PAYLOAD_LENGTH: &str = "payload length must equal header plus data buffer";
    pub const DESCRIPTOR_MISSING: &str = "the __sds_descriptor__ tensor is missing";
    pub const DESCRIPTOR_TENSOR: &str = "the descriptor tensor must be uint8 of rank 1";
    pub const FIELD_TENSOR_MISSING: &str = "a field's tensor key is not in the payload";
    pub const FIELD_TENSOR_SHARED: &str = "two fields map to the same tensor";
    pub const UNMAPPED_TENSOR: &str = "a tensor no field maps to";
}
