//! The validation rules of profile section 2 and the record limits of section 9.
//!
//! The same checks run on write (a record offered to `encode`) and on read (a decoded
//! descriptor joined with its SafeTensors header, or a metadata row), so a writer can never
//! produce what a reader refuses. Count limits run first: they are cheap and they stop hostile
//! sizes before any per-item work.
//!
//! Decision on the metadata limit: `max_metadata_bytes` bounds the *total* compact-JSON size of
//! every metadata object in a record (record, fields, axes, coordinates), because what it
//! protects is the memory one record's metadata takes, however it is spread.

use std::collections::{BTreeMap, BTreeSet};

use super::error::{limit, rule, RecordError};
use super::model::{Axis, Coordinate, FieldMeta, RecordMeta};
use crate::format::json::{object_to_compact, Object, Value};
use crate::format::limits::RecordLimits;

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Checks every section 2 rule and section 9 limit that `meta` alone can answer.
pub fn validate(meta: &RecordMeta, limits: &RecordLimits) -> Result<(), RecordError> {
    check_counts(meta, limits)?;
    check_tensor_sizes(meta, limits)?;
    if meta.id.is_empty() {
        return Err(RecordError::validation(
            rule::ID_NONEMPTY,
            "record id is empty",
        ));
    }
    if meta.fields.is_empty() {
        let detail = format!("record {:?} has no fields", meta.id);
        return Err(RecordError::validation(rule::FIELDS_NONEMPTY, detail));
    }
    for (name, field) in &meta.fields {
        check_field(name, field)?;
    }
    check_axis_ids(meta)?;
    check_references(meta)?;
    check_metadata(meta, limits)
}

/// The rules that only writing enforces, on top of [`validate`]: readers may still show a
/// record that breaks them (a 0-d field found in stored data is served as it is).
///
/// Why 0-d fields are refused: the format owner's library decodes a 0-d SafeTensors tensor as
/// rank 1 and then refuses the record for a rank/axes mismatch, so a 0-d field written here
/// would make the record unreadable there.
pub fn validate_for_write(meta: &RecordMeta, limits: &RecordLimits) -> Result<(), RecordError> {
    validate(meta, limits)?;
    match meta.fields.iter().find(|(_, field)| field.shape.is_empty()) {
        Some((name, _)) => {
            let detail = format!("record {:?} field {name:?} is 0-d (shape [])", meta.id);
            Err(RecordError::validation(rule::FIELD_RANK_NONZERO, detail))
        }
        None => Ok(()),
    }
}

/// Field count, axes per field and total coordinate values.
fn check_counts(meta: &RecordMeta, limits: &RecordLimits) -> Result<(), RecordError> {
    let max_fields = to_u64(limits.max_fields);
    RecordError::check_limit(limit::FIELDS, to_u64(meta.fields.len()), max_fields)?;
    let max_axes = to_u64(limits.max_axes_per_field);
    let mut coordinate_values = 0u64;
    for field in meta.fields.values() {
        let rank = field.axes.len().max(field.shape.len());
        RecordError::check_limit(limit::AXES_PER_FIELD, to_u64(rank), max_axes)?;
        for axis in &field.axes {
            let values = axis.coordinate.as_ref().and_then(|c| c.values.as_ref());
            let count = values.map_or(0, |v| to_u64(v.len()));
            coordinate_values = coordinate_values.saturating_add(count);
        }
    }
    let max_values = to_u64(limits.max_coordinate_values);
    RecordError::check_limit(limit::COORDINATE_VALUES, coordinate_values, max_values)
}

/// One tensor's bytes and all tensors' bytes, from shapes alone (overflow counts as exceeded).
fn check_tensor_sizes(meta: &RecordMeta, limits: &RecordLimits) -> Result<(), RecordError> {
    let mut total = 0u64;
    for field in meta.fields.values() {
        let bytes = field_bytes(field, limits)?;
        total = total.saturating_add(bytes);
    }
    RecordError::check_limit(
        limit::TOTAL_TENSOR_BYTES,
        total,
        limits.max_total_tensor_bytes,
    )
}

/// The byte length of one field's tensor, refused above the one-tensor limit.
pub(crate) fn field_bytes(field: &FieldMeta, limits: &RecordLimits) -> Result<u64, RecordError> {
    let bytes = field
        .element_count()
        .and_then(|count| count.checked_mul(field.dtype.itemsize()))
        .unwrap_or(u64::MAX);
    RecordError::check_limit(limit::TENSOR_BYTES, bytes, limits.max_tensor_bytes)?;
    Ok(bytes)
}

fn check_field(name: &str, field: &FieldMeta) -> Result<(), RecordError> {
    if name.is_empty() {
        let detail = "a field has an empty name";
        return Err(RecordError::validation(rule::FIELD_NAME_NONEMPTY, detail));
    }
    if field.axes.len() != field.shape.len() {
        let detail = format!(
            "field {name:?}: shape {:?} has rank {} but {} axes are declared",
            field.shape,
            field.shape.len(),
            field.axes.len()
        );
        return Err(RecordError::validation(rule::RANK_EQUALS_AXES, detail));
    }
    let mut seen_names = BTreeSet::new();
    for (index, (axis, &dim)) in field.axes.iter().zip(&field.shape).enumerate() {
        let place = format!("field {name:?} axis {index} ({:?})", axis.name);
        check_axis(axis, dim, &place)?;
        if !seen_names.insert(axis.name.as_str()) {
            let detail = format!("{place}: the name is used twice");
            return Err(RecordError::validation(rule::AXIS_NAME_UNIQUE, detail));
        }
    }
    Ok(())
}

fn check_axis(axis: &Axis, dim: u64, place: &str) -> Result<(), RecordError> {
    if axis.name.is_empty() {
        let detail = format!("{place}: empty name");
        return Err(RecordError::validation(rule::AXIS_NAME_NONEMPTY, detail));
    }
    if axis.length != dim {
        let detail = format!("{place}: length {} but dimension {dim}", axis.length);
        return Err(RecordError::validation(rule::AXIS_LENGTH, detail));
    }
    match &axis.coordinate {
        Some(coordinate) => check_coordinate(coordinate, axis.length, place),
        None => Ok(()),
    }
}

fn check_coordinate(coordinate: &Coordinate, length: u64, place: &str) -> Result<(), RecordError> {
    let refuse = |rule, what: &str| Err(RecordError::validation(rule, format!("{place}: {what}")));
    let regular = (coordinate.start.is_some(), coordinate.step.is_some());
    if let Some(values) = &coordinate.values {
        if regular != (false, false) {
            return refuse(rule::COORDINATE_VALUES_EXCLUSIVE, "values with start/step");
        }
        if to_u64(values.len()) != length {
            let what = format!("{} values for length {length}", values.len());
            return refuse(rule::COORDINATE_VALUES_LENGTH, &what);
        }
        if !values.iter().all(Value::is_finite) {
            return refuse(rule::METADATA_FINITE, "non-finite coordinate value");
        }
    }
    if regular.0 != regular.1 {
        return refuse(
            rule::COORDINATE_START_STEP_TOGETHER,
            "only one of start/step",
        );
    }
    for number in [&coordinate.start, &coordinate.step].into_iter().flatten() {
        match number {
            Value::Int(_) | Value::BigInt(_) => {}
            Value::Float(f) if f.is_finite() => {}
            other => {
                let what = format!("start/step is {}", other.type_name());
                return refuse(rule::COORDINATE_NUMBER, &what);
            }
        }
    }
    Ok(())
}

/// Every axis carrying an id, with where it appears.
fn axes_with_ids(meta: &RecordMeta) -> impl Iterator<Item = (&str, &str, usize, &Axis)> {
    meta.fields.iter().flat_map(|(name, field)| {
        field
            .axes
            .iter()
            .enumerate()
            .filter_map(move |(i, axis)| axis.id.as_deref().map(|id| (id, name.as_str(), i, axis)))
    })
}

fn check_axis_ids(meta: &RecordMeta) -> Result<(), RecordError> {
    let mut first_seen: BTreeMap<&str, (&str, usize, &Axis)> = BTreeMap::new();
    for (id, field, index, axis) in axes_with_ids(meta) {
        let Some(&(first_field, first_index, first)) = first_seen.get(id) else {
            first_seen.insert(id, (field, index, axis));
            continue;
        };
        if first.length != axis.length || first.coordinate != axis.coordinate {
            let detail = format!(
                "axis id {id:?}: field {field:?} axis {index} differs from field \
                 {first_field:?} axis {first_index} in length or coordinate"
            );
            return Err(RecordError::validation(rule::AXIS_ID_CONSISTENT, detail));
        }
    }
    Ok(())
}

fn check_references(meta: &RecordMeta) -> Result<(), RecordError> {
    let axis_ids: BTreeSet<&str> = axes_with_ids(meta).map(|(id, ..)| id).collect();
    for (name, field) in &meta.fields {
        for (index, axis) in field.axes.iter().enumerate() {
            let reference = axis
                .coordinate
                .as_ref()
                .and_then(|c| c.reference.as_deref());
            let Some(target) = reference else { continue };
            if !meta.fields.contains_key(target) && !axis_ids.contains(target) {
                let detail = format!(
                    "field {name:?} axis {index} ({:?}): reference {target:?} names no field \
                     or axis id",
                    axis.name
                );
                return Err(RecordError::validation(rule::COORDINATE_REFERENCE, detail));
            }
        }
    }
    Ok(())
}

/// Every metadata object of the record, with a description of where it sits.
fn metadata_objects(meta: &RecordMeta) -> Vec<(String, &Object)> {
    let mut found = vec![("record metadata".to_string(), &meta.metadata)];
    for (name, field) in &meta.fields {
        found.push((format!("field {name:?} metadata"), &field.metadata));
        for (index, axis) in field.axes.iter().enumerate() {
            found.push((
                format!("field {name:?} axis {index} metadata"),
                &axis.metadata,
            ));
            if let Some(coordinate) = &axis.coordinate {
                let place = format!("field {name:?} axis {index} coordinate metadata");
                found.push((place, &coordinate.metadata));
            }
        }
    }
    found
}

/// Finite numbers everywhere, and the total compact size within the metadata limit.
fn check_metadata(meta: &RecordMeta, limits: &RecordLimits) -> Result<(), RecordError> {
    let mut total_bytes = 0u64;
    for (place, object) in metadata_objects(meta) {
        if !object.values().all(Value::is_finite) {
            let detail = format!("{place} holds a non-finite number");
            return Err(RecordError::validation(rule::METADATA_FINITE, detail));
        }
        total_bytes = total_bytes.saturating_add(to_u64(object_to_compact(object).len()));
        RecordError::check_limit(
            limit::METADATA_BYTES,
            total_bytes,
            limits.max_metadata_bytes,
        )?;
    }
    Ok(())
}

/// Depth (the value itself is depth 1, scalars included) and value count of a JSON value, as
/// the reader's limits count them; lets the writer refuse a descriptor the reader would refuse.
pub(crate) fn json_extent(value: &Value) -> (usize, usize) {
    match value {
        Value::Array(items) => children_extent(items.iter()),
        Value::Object(object) => children_extent(object.values()),
        _ => (1, 1),
    }
}

fn children_extent<'v>(children: impl Iterator<Item = &'v Value>) -> (usize, usize) {
    let (depth, nodes) = children.fold((0, 0), |(depth, nodes), child| {
        let (child_depth, child_nodes) = json_extent(child);
        (depth.max(child_depth), nodes + child_nodes)
    });
    (depth + 1, nodes + 1)
}

/// Refuses a JSON value deeper or larger (in values) than the record JSON limits.
pub(crate) fn check_json_extent(value: &Value, limits: &RecordLimits) -> Result<(), RecordError> {
    let (depth, nodes) = json_extent(value);
    RecordError::check_limit(
        limit::JSON_DEPTH,
        to_u64(depth),
        to_u64(limits.max_json_depth),
    )?;
    RecordError::check_limit(
        limit::JSON_NODES,
        to_u64(nodes),
        to_u64(limits.max_json_nodes),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::json::{parse_value, JsonLimits};

    #[test]
    fn json_extent_counts_like_the_reader() {
        for (text, depth, nodes) in [
            ("{}", 1, 1),
            ("{\"a\":[1,{\"b\":null}]}", 4, 5),
            ("[[[]]]", 3, 3),
            ("[[[0]]]", 4, 4),
        ] {
            let value = parse_value(text.as_bytes(), &JsonLimits::CONTROL).unwrap();
            assert_eq!(json_extent(&value), (depth, nodes), "{text}");
            // The reader accepts exactly these limits and refuses one less.
            let exact = JsonLimits {
                max_bytes: 100,
                max_depth: depth,
                max_nodes: nodes,
            };
            assert!(parse_value(text.as_bytes(), &exact).is_ok());
            let tighter = JsonLimits {
                max_depth: depth - 1,
                ..exact
            };
            assert!(parse_value(text.as_bytes(), &tighter).is_err());
        }
    }
}
