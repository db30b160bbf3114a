//! The in-memory model of a record: fields with their axes and coordinates, and the record
//! itself, with or without its tensor values.
//!
//! [`RecordMeta`] is everything about a record except its tensor bytes: it is what a metadata
//! shard row holds and what a decoded descriptor plus SafeTensors header yields. [`Record`] adds
//! the bytes. Field values are raw little-endian C-order bytes held in [`bytes::Bytes`], so a
//! decoded record shares its payload buffer instead of copying tensors.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::error::{rule, RecordError};
use crate::format::dtype::DType;
use crate::format::json::{Object, Value};

/// An axis coordinate: explicit `values`, or a regular grid `start + i * step`, or neither
/// (only a `reference`, `unit` or metadata).
#[derive(Debug, Clone, PartialEq, Default, Hash)]
pub struct Coordinate {
    pub values: Option<Vec<Value>>,
    /// A JSON number (`Int` or `Float`); validation refuses anything else.
    pub start: Option<Value>,
    /// A JSON number (`Int` or `Float`); validation refuses anything else.
    pub step: Option<Value>,
    /// A field name of the same record, or a declared axis id.
    pub reference: Option<String>,
    pub unit: Option<String>,
    pub metadata: Object,
}

/// One named dimension of a field.
#[derive(Debug, Clone, PartialEq, Hash)]
pub struct Axis {
    pub name: String,
    pub length: u64,
    pub role: Option<String>,
    /// Shared identity: every axis carrying the same id has the same length and coordinate.
    pub id: Option<String>,
    pub coordinate: Option<Coordinate>,
    pub metadata: Object,
}

/// A field without its values: what a metadata row says about one tensor.
#[derive(Debug, Clone, PartialEq, Hash)]
pub struct FieldMeta {
    pub dtype: DType,
    pub shape: Vec<u64>,
    /// One per dimension, in order; empty for a 0-d field.
    pub axes: Vec<Axis>,
    pub metadata: Object,
}

/// A field with its values.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub meta: FieldMeta,
    /// Raw little-endian C-order bytes; length is the shape product times the itemsize.
    pub data: Bytes,
}

/// A record without tensor values: a metadata shard row, or a decoded descriptor.
#[derive(Debug, Clone, PartialEq, Hash)]
pub struct RecordMeta {
    pub id: String,
    pub scene_id: Option<String>,
    pub metadata: Object,
    /// Keyed by field name; the map order is code-point order, the tensor-key assignment order.
    pub fields: BTreeMap<String, FieldMeta>,
}

/// A complete record: identity, metadata and fields with their values.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub id: String,
    pub scene_id: Option<String>,
    pub metadata: Object,
    pub fields: BTreeMap<String, Field>,
}

impl Coordinate {
    /// Explicit coordinate values, one per axis position.
    pub fn from_values(values: Vec<Value>) -> Coordinate {
        Coordinate {
            values: Some(values),
            ..Coordinate::default()
        }
    }

    /// A regular coordinate `start + i * step`.
    pub fn regular(start: impl Into<Value>, step: impl Into<Value>) -> Coordinate {
        Coordinate {
            start: Some(start.into()),
            step: Some(step.into()),
            ..Coordinate::default()
        }
    }

    pub fn with_reference(mut self, reference: impl Into<String>) -> Coordinate {
        self.reference = Some(reference.into());
        self
    }

    pub fn with_unit(mut self, unit: impl Into<String>) -> Coordinate {
        self.unit = Some(unit.into());
        self
    }

    pub fn with_metadata(mut self, metadata: Object) -> Coordinate {
        self.metadata = metadata;
        self
    }
}

impl Axis {
    /// An axis with only a name and a length.
    pub fn new(name: impl Into<String>, length: u64) -> Axis {
        Axis {
            name: name.into(),
            length,
            role: None,
            id: None,
            coordinate: None,
            metadata: Object::new(),
        }
    }

    pub fn with_role(mut self, role: impl Into<String>) -> Axis {
        self.role = Some(role.into());
        self
    }

    pub fn with_id(mut self, id: impl Into<String>) -> Axis {
        self.id = Some(id.into());
        self
    }

    pub fn with_coordinate(mut self, coordinate: Coordinate) -> Axis {
        self.coordinate = Some(coordinate);
        self
    }

    pub fn with_metadata(mut self, metadata: Object) -> Axis {
        self.metadata = metadata;
        self
    }
}

impl FieldMeta {
    /// A field description whose axes are named `dim_0`, `dim_1`, ... after the shape.
    pub fn new(dtype: DType, shape: Vec<u64>) -> FieldMeta {
        let axes = shape
            .iter()
            .enumerate()
            .map(|(i, &length)| Axis::new(format!("dim_{i}"), length))
            .collect();
        FieldMeta {
            dtype,
            shape,
            axes,
            metadata: Object::new(),
        }
    }

    /// Number of elements, `None` when the shape product overflows `u64`.
    pub fn element_count(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(1u64, |count, &dim| count.checked_mul(dim))
    }

    /// Bytes of tensor data, refused as a limit when the product overflows `u64`.
    pub fn byte_len(&self) -> Result<u64, RecordError> {
        self.element_count()
            .and_then(|count| count.checked_mul(self.dtype.itemsize()))
            .ok_or(RecordError::Limit {
                limit: super::error::limit::TENSOR_BYTES,
                value: u64::MAX,
                max: u64::MAX,
            })
    }
}

impl Field {
    /// A field whose axes are named `dim_0`, `dim_1`, ...; refuses data of the wrong length.
    pub fn new(
        dtype: DType,
        shape: Vec<u64>,
        data: impl Into<Bytes>,
    ) -> Result<Field, RecordError> {
        Field::from_meta(FieldMeta::new(dtype, shape), data)
    }

    /// A field from a full description; refuses data of the wrong length.
    pub fn from_meta(meta: FieldMeta, data: impl Into<Bytes>) -> Result<Field, RecordError> {
        let field = Field {
            meta,
            data: data.into(),
        };
        field.check_data_length("")?;
        Ok(field)
    }

    /// Replaces the axes (their number and lengths are checked by validation, not here).
    pub fn with_axes(mut self, axes: Vec<Axis>) -> Field {
        self.meta.axes = axes;
        self
    }

    pub fn with_metadata(mut self, metadata: Object) -> Field {
        self.meta.metadata = metadata;
        self
    }

    /// Refuses data whose length is not the shape product times the itemsize.
    pub(crate) fn check_data_length(&self, name: &str) -> Result<(), RecordError> {
        let expected = self.meta.byte_len()?;
        let actual = u64::try_from(self.data.len()).unwrap_or(u64::MAX);
        if actual != expected {
            return Err(RecordError::validation(
                rule::FIELD_DATA_LENGTH,
                format!("field {name:?}: {actual} bytes of data, shape needs {expected}"),
            ));
        }
        Ok(())
    }
}

impl RecordMeta {
    /// A record description with no scene, no metadata and no fields yet.
    pub fn new(id: impl Into<String>) -> RecordMeta {
        RecordMeta {
            id: id.into(),
            scene_id: None,
            metadata: Object::new(),
            fields: BTreeMap::new(),
        }
    }
}

impl Record {
    /// A record with no scene, no metadata and no fields yet.
    pub fn new(id: impl Into<String>) -> Record {
        Record {
            id: id.into(),
            scene_id: None,
            metadata: Object::new(),
            fields: BTreeMap::new(),
        }
    }

    pub fn with_scene_id(mut self, scene_id: impl Into<String>) -> Record {
        self.scene_id = Some(scene_id.into());
        self
    }

    pub fn with_metadata(mut self, metadata: Object) -> Record {
        self.metadata = metadata;
        self
    }

    pub fn with_field(mut self, name: impl Into<String>, field: Field) -> Record {
        self.fields.insert(name.into(), field);
        self
    }

    /// Everything but the tensor values (the record's metadata row).
    pub fn meta(&self) -> RecordMeta {
        RecordMeta {
            id: self.id.clone(),
            scene_id: self.scene_id.clone(),
            metadata: self.metadata.clone(),
            fields: self
                .fields
                .iter()
                .map(|(name, field)| (name.clone(), field.meta.clone()))
                .collect(),
        }
    }
}

/// What the parsed model of a record holds on the heap, charged by those who keep it: the
/// same accounting as [`Value::heap_bytes`] (each allocation's bytes and
/// [`crate::format::json::ALLOCATION`] besides).
mod held {
    use std::collections::BTreeMap;
    use std::mem::size_of;

    use super::{Axis, Coordinate, FieldMeta, RecordMeta};
    use crate::format::json::{items_heap_bytes, text_heap_bytes, ALLOCATION};

    fn text(s: &str) -> u64 {
        text_heap_bytes(s.len())
    }

    fn optional_text(s: &Option<String>) -> u64 {
        s.as_deref().map_or(0, text)
    }

    fn slots<T>(v: &Vec<T>) -> u64 {
        match v.capacity() {
            0 => 0,
            n => (n * size_of::<T>()) as u64 + ALLOCATION,
        }
    }

    /// A B-tree of `len` entries of type `(K, V)`: nodes of 11 slots, at least 5 of them used
    /// (but the root), and the slots' pointers to children.
    fn b_tree<K, V>(len: usize) -> u64 {
        let nodes = if len == 0 { 0 } else { 1 + len / 5 };
        let node = 11 * (size_of::<K>() + size_of::<V>()) + 12 * size_of::<usize>() + 16;
        (nodes * node) as u64 + nodes as u64 * ALLOCATION
    }

    impl Coordinate {
        pub fn heap_bytes(&self) -> u64 {
            let values = self.values.as_ref().map_or(0, items_heap_bytes);
            let numbers = [&self.start, &self.step]
                .iter()
                .filter_map(|n| n.as_ref().map(|n| n.heap_bytes()))
                .sum::<u64>();
            values
                + numbers
                + optional_text(&self.reference)
                + optional_text(&self.unit)
                + self.metadata.heap_bytes()
        }
    }

    impl Axis {
        pub fn heap_bytes(&self) -> u64 {
            let coordinate = self.coordinate.as_ref().map_or(0, Coordinate::heap_bytes);
            text(&self.name)
                + optional_text(&self.role)
                + optional_text(&self.id)
                + coordinate
                + self.metadata.heap_bytes()
        }
    }

    impl FieldMeta {
        pub fn heap_bytes(&self) -> u64 {
            let axes: u64 = self.axes.iter().map(Axis::heap_bytes).sum();
            slots(&self.shape) + slots(&self.axes) + axes + self.metadata.heap_bytes()
        }
    }

    impl RecordMeta {
        /// What the row's model holds on the heap (its fields' B-tree estimated from its
        /// length, all else measured).
        pub fn heap_bytes(&self) -> u64 {
            let fields: u64 = self
                .fields
                .iter()
                .map(|(name, field)| text(name) + field.heap_bytes())
                .sum();
            text(&self.id)
                + optional_text(&self.scene_id)
                + self.metadata.heap_bytes()
                + b_tree::<String, FieldMeta>(self.fields.len())
                + fields
        }
    }

    // Keeps the estimate's key type in step with the model's.
    const _: fn(&RecordMeta) -> &BTreeMap<String, FieldMeta> = |meta| &meta.fields;
}
