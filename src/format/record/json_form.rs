//! JSON forms of the record model: the descriptor (section 2), metadata rows (section 3) and the
//! per-field documents the mount serves as `.json` views.
//!
//! Writing emits every key, `null` where a value is absent, so the compact deterministic JSON
//! of a model is unique. Reading is lenient the way section 2 asks: unknown keys are ignored
//! and a missing optional key reads as `null` (or `{}` for metadata). Only the keys that carry
//! structure are required: `id` and `fields` of a record, `tensor` (descriptor) or `dtype` and
//! `shape` (row) and `axes` of a field, `name` and `length` of an axis. Whether the values obey
//! the section 2 rules is `validate`'s job, not this module's.

use std::collections::BTreeMap;

use super::error::{rule, RecordError};
use super::model::{Axis, Coordinate, FieldMeta, RecordMeta};
use crate::format::dtype::DType;
use crate::format::json::{AccessError, Object, ObjectExt, Value};

/// Turns a typed-access failure into a validation error naming where it happened.
fn key_error(place: &str) -> impl Fn(AccessError) -> RecordError + '_ {
    move |e| RecordError::validation(rule::KEY_TYPE, format!("{place}: {e}"))
}

fn as_object<'v>(value: &'v Value, place: &str) -> Result<&'v Object, RecordError> {
    value.as_object().ok_or_else(|| {
        RecordError::validation(rule::KEY_TYPE, format!("{place} must be an object"))
    })
}

/// A metadata object; absent or `null` reads as empty.
fn metadata_of(object: &Object, place: &str) -> Result<Object, RecordError> {
    let metadata = object.opt_object("metadata").map_err(key_error(place))?;
    Ok(metadata.cloned().unwrap_or_default())
}

fn opt_string(object: &Object, key: &str, place: &str) -> Result<Option<String>, RecordError> {
    let text = object.opt_str(key).map_err(key_error(place))?;
    Ok(text.map(str::to_string))
}

/// An optional raw value: absent and `null` both read as `None`.
fn opt_value(object: &Object, key: &str) -> Option<Value> {
    object.get(key).filter(|v| **v != Value::Null).cloned()
}

fn string_or_null(text: &Option<String>) -> Value {
    text.clone().map_or(Value::Null, Value::String)
}

impl Coordinate {
    /// `{"metadata","reference","start","step","unit","values"}`, every key present.
    pub fn to_json(&self) -> Value {
        let mut object = Object::new();
        object.insert("metadata".into(), Value::Object(self.metadata.clone()));
        object.insert("reference".into(), string_or_null(&self.reference));
        object.insert("start".into(), self.start.clone().unwrap_or(Value::Null));
        object.insert("step".into(), self.step.clone().unwrap_or(Value::Null));
        object.insert("unit".into(), string_or_null(&self.unit));
        let values = self.values.clone().map_or(Value::Null, Value::Array);
        object.insert("values".into(), values);
        Value::Object(object)
    }

    /// Reads a coordinate object; `place` names it in errors.
    pub fn from_json(value: &Value, place: &str) -> Result<Coordinate, RecordError> {
        let object = as_object(value, place)?;
        let values = match object.get("values") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(_) => {
                let detail = format!("{place}: key \"values\" must be an array or null");
                return Err(RecordError::validation(rule::KEY_TYPE, detail));
            }
        };
        Ok(Coordinate {
            values,
            start: opt_value(object, "start"),
            step: opt_value(object, "step"),
            reference: opt_string(object, "reference", place)?,
            unit: opt_string(object, "unit", place)?,
            metadata: metadata_of(object, place)?,
        })
    }
}

impl Axis {
    /// `{"coordinate","id","length","metadata","name","role"}`, every key present.
    pub fn to_json(&self) -> Value {
        let mut object = Object::new();
        let coordinate = self
            .coordinate
            .as_ref()
            .map_or(Value::Null, Coordinate::to_json);
        object.insert("coordinate".into(), coordinate);
        object.insert("id".into(), string_or_null(&self.id));
        object.insert("length".into(), Value::from(self.length));
        object.insert("metadata".into(), Value::Object(self.metadata.clone()));
        object.insert("name".into(), Value::String(self.name.clone()));
        object.insert("role".into(), string_or_null(&self.role));
        Value::Object(object)
    }

    /// Reads an axis object; `place` names it in errors.
    pub fn from_json(value: &Value, place: &str) -> Result<Axis, RecordError> {
        let object = as_object(value, place)?;
        let coordinate = match object.get("coordinate") {
            None | Some(Value::Null) => None,
            Some(c) => Some(Coordinate::from_json(c, &format!("{place} coordinate"))?),
        };
        Ok(Axis {
            name: object
                .req_str("name")
                .map_err(key_error(place))?
                .to_string(),
            length: object.req_u64("length").map_err(key_error(place))?,
            role: opt_string(object, "role", place)?,
            id: opt_string(object, "id", place)?,
            coordinate,
            metadata: metadata_of(object, place)?,
        })
    }
}

/// Reads the required `axes` array of a field.
fn axes_of(object: &Object, place: &str) -> Result<Vec<Axis>, RecordError> {
    let items = object.req_array("axes").map_err(key_error(place))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| Axis::from_json(item, &format!("{place} axis {i}")))
        .collect()
}

fn axes_to_json(axes: &[Axis]) -> Value {
    Value::Array(axes.iter().map(Axis::to_json).collect())
}

impl FieldMeta {
    /// The row form `{"axes","dtype","metadata","shape"}` (section 3), `dtype` as NumPy's
    /// `dtype.str` (`<c8`), which is what the library writes; reading also takes plain names.
    pub fn to_row_value(&self) -> Value {
        let mut object = Object::new();
        object.insert("axes".into(), axes_to_json(&self.axes));
        object.insert("dtype".into(), Value::from(self.dtype.dtype_str()));
        object.insert("metadata".into(), Value::Object(self.metadata.clone()));
        let shape = self.shape.iter().map(|&d| Value::from(d)).collect();
        object.insert("shape".into(), Value::Array(shape));
        Value::Object(object)
    }

    /// The `.json` view of one field: the row form plus its `name`.
    pub fn to_json(&self, name: &str) -> Value {
        let mut value = self.to_row_value();
        if let Value::Object(object) = &mut value {
            object.insert("name".into(), Value::from(name));
        }
        value
    }

    /// Reads the row form of a field (unknown keys, including `name`, are ignored).
    pub fn from_row_value(value: &Value, place: &str) -> Result<FieldMeta, RecordError> {
        let object = as_object(value, place)?;
        let dtype_name = object.req_str("dtype").map_err(key_error(place))?;
        let dtype = DType::from_row_dtype(dtype_name)
            .ok_or_else(|| RecordError::UnsupportedDtype(dtype_name.to_string()))?;
        let shape = object
            .req_array("shape")
            .map_err(key_error(place))?
            .iter()
            .map(|dim| {
                dim.as_u64().ok_or_else(|| {
                    let detail = format!("{place}: shape entries must be nonnegative integers");
                    RecordError::validation(rule::KEY_TYPE, detail)
                })
            })
            .collect::<Result<Vec<u64>, RecordError>>()?;
        Ok(FieldMeta {
            dtype,
            shape,
            axes: axes_of(object, place)?,
            metadata: metadata_of(object, place)?,
        })
    }
}

/// One field as the descriptor states it: everything but dtype and shape, which the
/// SafeTensors header holds.
#[derive(Debug, Clone, PartialEq)]
pub struct DescriptorField {
    pub tensor: String,
    pub axes: Vec<Axis>,
    pub metadata: Object,
}

/// A descriptor as read, before it is joined with the SafeTensors header.
#[derive(Debug, Clone, PartialEq)]
pub struct Descriptor {
    pub format: String,
    pub version: String,
    pub id: String,
    pub scene_id: Option<String>,
    pub metadata: Object,
    pub fields: BTreeMap<String, DescriptorField>,
}

/// Descriptor `format` identifier (section 2).
pub const RECORD_FORMAT: &str = "signal-dataset.record";
/// The record version this writer emits.
pub const RECORD_VERSION: &str = "0.1";
/// The record versions this reader accepts (section 8).
pub const SUPPORTED_RECORD_VERSIONS: &[&str] = &["0.1"];

/// The tensor key of the field at `index` in code-point order of field names.
pub fn tensor_key(index: usize) -> String {
    format!("tensor_{index:06}")
}

/// The descriptor of `meta` as a JSON value, tensor keys assigned in field-name order.
pub fn descriptor_value(meta: &RecordMeta) -> Value {
    let fields = meta
        .fields
        .iter()
        .enumerate()
        .map(|(index, (name, field))| {
            let mut object = Object::new();
            object.insert("axes".into(), axes_to_json(&field.axes));
            object.insert("metadata".into(), Value::Object(field.metadata.clone()));
            object.insert("tensor".into(), Value::String(tensor_key(index)));
            (name.clone(), Value::Object(object))
        })
        .collect();
    let mut object = record_head(meta);
    object.insert("fields".into(), Value::Object(fields));
    object.insert("format".into(), Value::from(RECORD_FORMAT));
    object.insert("version".into(), Value::from(RECORD_VERSION));
    Value::Object(object)
}

/// The keys a descriptor and a row share: `id`, `metadata`, `scene_id`.
fn record_head(meta: &RecordMeta) -> Object {
    let mut object = Object::new();
    object.insert("id".into(), Value::String(meta.id.clone()));
    object.insert("metadata".into(), Value::Object(meta.metadata.clone()));
    object.insert("scene_id".into(), string_or_null(&meta.scene_id));
    object
}

/// Reads a descriptor object. Format and version are returned, not checked: the caller does.
pub fn descriptor_from_object(object: &Object) -> Result<Descriptor, RecordError> {
    let place = "descriptor";
    let fields = object
        .req_object("fields")
        .map_err(key_error(place))?
        .iter()
        .map(|(name, value)| {
            let field_place = format!("descriptor field {name:?}");
            let field = as_object(value, &field_place)?;
            let tensor = field.req_str("tensor").map_err(key_error(&field_place))?;
            let parsed = DescriptorField {
                tensor: tensor.to_string(),
                axes: axes_of(field, &field_place)?,
                metadata: metadata_of(field, &field_place)?,
            };
            Ok((name.clone(), parsed))
        })
        .collect::<Result<_, RecordError>>()?;
    Ok(Descriptor {
        format: object
            .req_str("format")
            .map_err(key_error(place))?
            .to_string(),
        version: object
            .req_str("version")
            .map_err(key_error(place))?
            .to_string(),
        id: object.req_str("id").map_err(key_error(place))?.to_string(),
        scene_id: opt_string(object, "scene_id", place)?,
        metadata: metadata_of(object, place)?,
        fields,
    })
}

impl RecordMeta {
    /// The metadata-row document (section 3) as a JSON value.
    pub fn to_row_value(&self) -> Value {
        let fields = self
            .fields
            .iter()
            .map(|(name, field)| (name.clone(), field.to_row_value()))
            .collect();
        let mut object = record_head(self);
        object.insert("fields".into(), Value::Object(fields));
        Value::Object(object)
    }

    /// Reads a row object (unknown keys ignored); no validation.
    pub fn from_row_object(object: &Object) -> Result<RecordMeta, RecordError> {
        let place = "row";
        let fields = object
            .req_object("fields")
            .map_err(key_error(place))?
            .iter()
            .map(|(name, value)| {
                let field = FieldMeta::from_row_value(value, &format!("row field {name:?}"))?;
                Ok((name.clone(), field))
            })
            .collect::<Result<_, RecordError>>()?;
        Ok(RecordMeta {
            id: object.req_str("id").map_err(key_error(place))?.to_string(),
            scene_id: opt_string(object, "scene_id", place)?,
            metadata: metadata_of(object, place)?,
            fields,
        })
    }
}
