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
use crate::format::json::{AccessError, Object, Value};

/// Where a value sits, for error messages: formatted only when an error is reported, so that
/// reading a valid record builds no message text (a row has dozens of places).
type Place<'a> = &'a dyn std::fmt::Display;

/// `{place} {what}` or `{place} {what} {index}`: a place inside another.
struct Inside<'a> {
    outer: Place<'a>,
    what: &'static str,
    index: Option<usize>,
}

impl std::fmt::Display for Inside<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(index) => write!(f, "{} {} {index}", self.outer, self.what),
            None => write!(f, "{} {}", self.outer, self.what),
        }
    }
}

/// `{what} {name:?}`: a named field of a row or a descriptor.
struct NamedField<'a> {
    what: &'static str,
    name: &'a str,
}

impl std::fmt::Display for NamedField<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?}", self.what, self.name)
    }
}

/// Turns a typed-access failure into a validation error naming where it happened.
fn key_error(place: Place<'_>) -> impl Fn(AccessError) -> RecordError + '_ {
    move |e| RecordError::validation(rule::KEY_TYPE, format!("{place}: {e}"))
}

fn into_object(value: Value, place: Place<'_>) -> Result<Object, RecordError> {
    match value {
        Value::Object(object) => Ok(object),
        _ => Err(RecordError::validation(
            rule::KEY_TYPE,
            format!("{place} must be an object"),
        )),
    }
}

// Reading takes the parsed document by value and moves its parts into the model: copying them
// (metadata objects, names) cost as much as parsing them. Each helper refuses what the
// borrowed `ObjectExt` accessor of the same name refuses, with the same message.

/// The values of a fixed set of keys, moved out of an object in one pass over it (its other
/// keys are dropped with it). Removing the keys one by one searched and rebalanced the
/// object's B-tree for each: parsing a 356-byte row took 4.5 µs that way, 3.9 µs this way.
struct Keys<const N: usize> {
    names: [&'static str; N],
    values: [Option<Value>; N],
}

impl<const N: usize> Keys<N> {
    /// `names` must be in the object's key order (byte order): the pass merges the two.
    fn take(object: Object, names: [&'static str; N]) -> Self {
        let mut values = [const { None }; N];
        let mut at = 0;
        for (key, value) in object {
            while at < N && names[at] < key.as_str() {
                at += 1;
            }
            if at == N {
                break;
            }
            if names[at] == key.as_str() {
                values[at] = Some(value);
                at += 1;
            }
        }
        Keys { names, values }
    }

    /// The value of `key` (one of the names), if the object had it; taken once.
    fn remove(&mut self, key: &str) -> Option<Value> {
        let index = self.names.iter().position(|name| *name == key)?;
        self.values[index].take()
    }
}

fn take_required<const N: usize>(keys: &mut Keys<N>, key: &str) -> Result<Value, AccessError> {
    keys.remove(key)
        .ok_or_else(|| AccessError::Missing(key.to_string()))
}

fn take_string<const N: usize>(keys: &mut Keys<N>, key: &str) -> Result<String, AccessError> {
    match take_required(keys, key)? {
        Value::String(text) => Ok(text),
        _ => Err(AccessError::wrong_type(key, "a string")),
    }
}

fn take_u64<const N: usize>(keys: &mut Keys<N>, key: &str) -> Result<u64, AccessError> {
    take_required(keys, key)?
        .as_u64()
        .ok_or_else(|| AccessError::wrong_type(key, "a nonnegative integer"))
}

fn take_object<const N: usize>(keys: &mut Keys<N>, key: &str) -> Result<Object, AccessError> {
    match take_required(keys, key)? {
        Value::Object(inner) => Ok(inner),
        _ => Err(AccessError::wrong_type(key, "an object")),
    }
}

fn take_array<const N: usize>(keys: &mut Keys<N>, key: &str) -> Result<Vec<Value>, AccessError> {
    match take_required(keys, key)? {
        Value::Array(items) => Ok(items),
        _ => Err(AccessError::wrong_type(key, "an array")),
    }
}

/// A metadata object; absent or `null` reads as empty.
fn take_metadata<const N: usize>(
    keys: &mut Keys<N>,
    place: Place<'_>,
) -> Result<Object, RecordError> {
    match keys.remove("metadata") {
        None | Some(Value::Null) => Ok(Object::new()),
        Some(Value::Object(metadata)) => Ok(metadata),
        Some(_) => Err(key_error(place)(AccessError::wrong_type(
            "metadata",
            "an object or null",
        ))),
    }
}

/// An optional string; absent or `null` reads as `None`.
fn take_opt_string<const N: usize>(
    keys: &mut Keys<N>,
    key: &str,
    place: Place<'_>,
) -> Result<Option<String>, RecordError> {
    match keys.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(key_error(place)(AccessError::wrong_type(
            key,
            "a string or null",
        ))),
    }
}

/// An optional raw value: absent and `null` both read as `None`.
fn take_opt_value<const N: usize>(keys: &mut Keys<N>, key: &str) -> Option<Value> {
    keys.remove(key).filter(|v| *v != Value::Null)
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
        Coordinate::from_value(value.clone(), &place)
    }

    fn from_value(value: Value, place: Place<'_>) -> Result<Coordinate, RecordError> {
        let object = into_object(value, place)?;
        let mut keys = Keys::take(
            object,
            ["metadata", "reference", "start", "step", "unit", "values"],
        );
        let values = match keys.remove("values") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(items),
            Some(_) => {
                let detail = format!("{place}: key \"values\" must be an array or null");
                return Err(RecordError::validation(rule::KEY_TYPE, detail));
            }
        };
        Ok(Coordinate {
            values,
            start: take_opt_value(&mut keys, "start"),
            step: take_opt_value(&mut keys, "step"),
            reference: take_opt_string(&mut keys, "reference", place)?,
            unit: take_opt_string(&mut keys, "unit", place)?,
            metadata: take_metadata(&mut keys, place)?,
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
        Axis::from_value(value.clone(), &place)
    }

    fn from_value(value: Value, place: Place<'_>) -> Result<Axis, RecordError> {
        let object = into_object(value, place)?;
        let mut keys = Keys::take(
            object,
            ["coordinate", "id", "length", "metadata", "name", "role"],
        );
        let coordinate = match keys.remove("coordinate") {
            None | Some(Value::Null) => None,
            Some(c) => {
                let inside = Inside {
                    outer: place,
                    what: "coordinate",
                    index: None,
                };
                Some(Coordinate::from_value(c, &inside)?)
            }
        };
        Ok(Axis {
            name: take_string(&mut keys, "name").map_err(key_error(place))?,
            length: take_u64(&mut keys, "length").map_err(key_error(place))?,
            role: take_opt_string(&mut keys, "role", place)?,
            id: take_opt_string(&mut keys, "id", place)?,
            coordinate,
            metadata: take_metadata(&mut keys, place)?,
        })
    }
}

/// Reads the required `axes` array of a field.
fn take_axes<const N: usize>(
    keys: &mut Keys<N>,
    place: Place<'_>,
) -> Result<Vec<Axis>, RecordError> {
    let items = take_array(keys, "axes").map_err(key_error(place))?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let inside = Inside {
                outer: place,
                what: "axis",
                index: Some(i),
            };
            Axis::from_value(item, &inside)
        })
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
        FieldMeta::from_row_owned(value.clone(), &place)
    }

    /// Reads the row form of field `name` of a row, moving its parts into the model (what a
    /// row read one field at a time calls: errors name the field as a whole row's read does).
    pub fn from_row_field(name: &str, value: Value) -> Result<FieldMeta, RecordError> {
        let place = NamedField {
            what: "row field",
            name,
        };
        FieldMeta::from_row_owned(value, &place)
    }

    fn from_row_owned(value: Value, place: Place<'_>) -> Result<FieldMeta, RecordError> {
        let object = into_object(value, place)?;
        let mut keys = Keys::take(object, ["axes", "dtype", "metadata", "shape"]);
        let dtype_name = take_string(&mut keys, "dtype").map_err(key_error(place))?;
        let dtype =
            DType::from_row_dtype(&dtype_name).ok_or(RecordError::UnsupportedDtype(dtype_name))?;
        let shape = take_array(&mut keys, "shape")
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
            axes: take_axes(&mut keys, place)?,
            metadata: take_metadata(&mut keys, place)?,
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
            (name.as_str().into(), Value::Object(object))
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
pub fn descriptor_from_object(object: Object) -> Result<Descriptor, RecordError> {
    let place: Place<'_> = &"descriptor";
    let mut keys = Keys::take(
        object,
        ["fields", "format", "id", "metadata", "scene_id", "version"],
    );
    let fields = take_object(&mut keys, "fields")
        .map_err(key_error(place))?
        .into_iter()
        .map(|(name, value)| {
            let field_place = NamedField {
                what: "descriptor field",
                name: &name,
            };
            let field = into_object(value, &field_place)?;
            let mut field = Keys::take(field, ["axes", "metadata", "tensor"]);
            let tensor = take_string(&mut field, "tensor").map_err(key_error(&field_place))?;
            let parsed = DescriptorField {
                tensor,
                axes: take_axes(&mut field, &field_place)?,
                metadata: take_metadata(&mut field, &field_place)?,
            };
            Ok((name.into_string(), parsed))
        })
        .collect::<Result<_, RecordError>>()?;
    Ok(Descriptor {
        format: take_string(&mut keys, "format").map_err(key_error(place))?,
        version: take_string(&mut keys, "version").map_err(key_error(place))?,
        id: take_string(&mut keys, "id").map_err(key_error(place))?,
        scene_id: take_opt_string(&mut keys, "scene_id", place)?,
        metadata: take_metadata(&mut keys, place)?,
        fields,
    })
}

impl RecordMeta {
    /// The metadata-row document (section 3) as a JSON value.
    pub fn to_row_value(&self) -> Value {
        let fields = self
            .fields
            .iter()
            .map(|(name, field)| (name.as_str().into(), field.to_row_value()))
            .collect();
        let mut object = record_head(self);
        object.insert("fields".into(), Value::Object(fields));
        Value::Object(object)
    }

    /// Reads a row object (unknown keys ignored); no validation.
    pub fn from_row_object(object: &Object) -> Result<RecordMeta, RecordError> {
        RecordMeta::from_row_owned(object.clone())
    }

    /// [`RecordMeta::from_row_object`], moving the parts of `object` into the model.
    pub fn from_row_owned(object: Object) -> Result<RecordMeta, RecordError> {
        let place: Place<'_> = &"row";
        let mut keys = Keys::take(object, ["fields", "id", "metadata", "scene_id"]);
        let fields = take_object(&mut keys, "fields")
            .map_err(key_error(place))?
            .into_iter()
            .map(|(name, value)| {
                let field_place = NamedField {
                    what: "row field",
                    name: &name,
                };
                let field = FieldMeta::from_row_owned(value, &field_place)?;
                Ok((name.into_string(), field))
            })
            .collect::<Result<_, RecordError>>()?;
        Ok(RecordMeta {
            id: take_string(&mut keys, "id").map_err(key_error(place))?,
            scene_id: take_opt_string(&mut keys, "scene_id", place)?,
            metadata: take_metadata(&mut keys, place)?,
            fields,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_taken_in_one_pass_among_other_keys() {
        // Unknown keys before, between and after the named ones, and one named key absent.
        let text = r#"{"a": 0, "id": "r1", "fields": {}, "m": 1, "scene_id": null, "zz": [2]}"#;
        let limits = crate::format::limits::JsonLimits::CONTROL;
        let Value::Object(object) =
            crate::format::json::parse_value(text.as_bytes(), &limits).unwrap()
        else {
            panic!("not an object");
        };
        let mut keys = Keys::take(object, ["fields", "id", "metadata", "scene_id"]);
        assert_eq!(keys.remove("id"), Some(Value::String("r1".into())));
        assert_eq!(keys.remove("id"), None, "a key is taken once");
        assert_eq!(keys.remove("fields"), Some(Value::Object(Object::new())));
        assert_eq!(keys.remove("scene_id"), Some(Value::Null));
        assert_eq!(keys.remove("metadata"), None);
        assert_eq!(keys.remove("a"), None, "not one of the names");
    }
}
