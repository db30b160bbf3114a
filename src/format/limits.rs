//! Limits of `docs/FORMAT.md` section 9. A limit exceeded is a validation error naming the
//! limit, raised before memory in proportion to the input is committed.
//!
//! Names and defaults are the format owner's library's: [`RecordLimits`] is its
//! `ResourcePolicy` field for field, and [`JsonLimits::CONTROL`] its `ControlPolicy`
//! (`max_document_bytes` = [`JsonLimits::max_bytes`], `max_json_depth`, `max_json_nodes`).
//! Depth and node counts follow the library's `_validate_structure` (see `format::json`).

/// Bounds on one JSON document, enforced while parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonLimits {
    /// Largest accepted document, in bytes.
    pub max_bytes: usize,
    /// Deepest value: the top-level value is depth 1, its members depth 2; scalars count.
    pub max_depth: usize,
    /// Most values (objects, arrays and scalars; keys do not count).
    pub max_nodes: usize,
}

impl JsonLimits {
    /// Control documents (roots, snapshots, manifests, annotation documents): the library's
    /// `ControlPolicy()` defaults, 64 MiB, depth 128, 1,000,000 values.
    pub const CONTROL: JsonLimits = JsonLimits {
        max_bytes: 64 << 20,
        max_depth: 128,
        max_nodes: 1_000_000,
    };
    /// Record descriptors and metadata shard rows.
    pub const DESCRIPTOR: JsonLimits = JsonLimits {
        max_bytes: 16 << 20,
        max_depth: 128,
        max_nodes: 1_000_000,
    };
}

impl Default for JsonLimits {
    fn default() -> Self {
        JsonLimits::CONTROL
    }
}

/// Bounds on untrusted tensor-bearing records (section 9, "Records"): the library's
/// `ResourcePolicy`, same names, same defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordLimits {
    pub max_encoded_record_bytes: u64,
    pub max_descriptor_bytes: u64,
    pub max_fields: usize,
    pub max_axes_per_field: usize,
    pub max_coordinate_values: usize,
    pub max_tensor_bytes: u64,
    pub max_total_tensor_bytes: u64,
    pub max_metadata_bytes: u64,
    pub max_json_depth: usize,
    pub max_json_nodes: usize,
}

impl Default for RecordLimits {
    fn default() -> Self {
        RecordLimits {
            max_encoded_record_bytes: 64 << 30,
            max_descriptor_bytes: 16 << 20,
            max_fields: 10_000,
            max_axes_per_field: 128,
            max_coordinate_values: 10_000_000,
            max_tensor_bytes: 16 << 30,
            max_total_tensor_bytes: 64 << 30,
            max_metadata_bytes: 16 << 20,
            max_json_depth: 128,
            max_json_nodes: 1_000_000,
        }
    }
}

impl RecordLimits {
    /// The JSON limits of a metadata row: its size is bounded by `max_metadata_bytes`, as the
    /// library's `RecordMetadataCodec` bounds it.
    pub fn row_json(&self) -> JsonLimits {
        JsonLimits {
            max_bytes: usize::try_from(self.max_metadata_bytes).unwrap_or(usize::MAX),
            ..self.descriptor_json()
        }
    }

    /// The JSON limits of a record descriptor under these record limits.
    pub fn descriptor_json(&self) -> JsonLimits {
        JsonLimits {
            max_bytes: usize::try_from(self.max_descriptor_bytes).unwrap_or(usize::MAX),
            max_depth: self.max_json_depth,
            max_nodes: self.max_json_nodes,
        }
    }
}
