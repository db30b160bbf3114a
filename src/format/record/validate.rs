//! The validation rules of FORMAT.md section 2 and the record limits of section 9.
//!
//! The same checks run on write (a record offered to `encode`) and on read (a decoded
//! descriptor joined with its SafeTensors header, or a metadata row), so a writer can never
//! produce what a reader refuses. Count limits run first: they are cheap and they stop hostile
//! sizes before any per-item work.
//!
//! The rules follow the format owner's library (`record/validation.py`) where `docs/FORMAT.md`
//! leaves room:
//! - `max_metadata_bytes` bounds the *total* size of a record's metadata measured as the library
//!   measures it: the UTF-8 length of Python's `json.dumps(..., ensure_ascii=False)` (default
//!   separators `", "` and `": "`) of the record metadata, every field's and axis's metadata,
//!   every coordinate's `{values, start, step, reference, unit}` object and its metadata.
//! - `max_coordinate_values` applies per axis.
//! - A coordinate has at most one form: `values`, `start`+`step`, or `reference` (any reference
//!   string counts, even an empty one); an empty reference or axis id is "none" for resolution
//!   and sharing (the library tests them for truth).
//! - Axes sharing an id must agree in length and coordinate compared as Python compares them
//!   (`python_eq`): `1 == 1.0 == true`, so a coordinate `start: 0` and one `start: 0.0` agree.

use std::collections::{BTreeMap, BTreeSet};

use super::error::{limit, rule, RecordError};
use super::model::{Axis, Coordinate, FieldMeta, RecordMeta};
use crate::format::json::{object_to_compact, to_compact, Object, Value};
use crate::format::limits::RecordLimits;

fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A record's fields as validation walks them, in name order, each lent for one check: a
/// parsed record lends its own, a row kept as its text ([`super::LazyRow`]) parses each one
/// when asked. Why a walk and not a map: a row of thousands of fields is then validated
/// without its typed model ever being whole in memory (it is several times the row's text).
pub trait FieldWalk {
    /// How many fields there are.
    fn count(&self) -> usize;
    /// Whether a field is called `name`.
    fn contains(&self, name: &str) -> bool;
    /// Calls `visit` with each field's index, name and model, in name order, until it fails.
    fn each(&self, visit: &mut FieldVisit<'_>) -> Result<(), RecordError>;
    /// Calls `visit` with field `index` (name order), when there is one.
    fn with_field(
        &self,
        index: usize,
        visit: &mut dyn FnMut(&FieldMeta) -> Result<(), RecordError>,
    ) -> Result<(), RecordError>;
}

/// What [`FieldWalk::each`] calls for every field.
pub type FieldVisit<'a> = dyn FnMut(usize, &str, &FieldMeta) -> Result<(), RecordError> + 'a;

impl FieldWalk for BTreeMap<String, FieldMeta> {
    fn count(&self) -> usize {
        self.len()
    }

    fn contains(&self, name: &str) -> bool {
        self.contains_key(name)
    }

    fn each(&self, visit: &mut FieldVisit<'_>) -> Result<(), RecordError> {
        for (index, (name, field)) in self.iter().enumerate() {
            visit(index, name, field)?;
        }
        Ok(())
    }

    fn with_field(
        &self,
        index: usize,
        visit: &mut dyn FnMut(&FieldMeta) -> Result<(), RecordError>,
    ) -> Result<(), RecordError> {
        match self.values().nth(index) {
            Some(field) => visit(field),
            None => Ok(()),
        }
    }
}

/// A record as validation sees it: its own parts and a walk over its fields.
#[derive(Clone, Copy)]
pub struct RecordParts<'a> {
    pub id: &'a str,
    pub metadata: &'a Object,
    pub fields: &'a dyn FieldWalk,
}

impl<'a> RecordParts<'a> {
    fn of(meta: &'a RecordMeta) -> RecordParts<'a> {
        RecordParts {
            id: &meta.id,
            metadata: &meta.metadata,
            fields: &meta.fields,
        }
    }
}

/// Checks every section 2 rule and section 9 limit that `meta` alone can answer.
pub fn validate(meta: &RecordMeta, limits: &RecordLimits) -> Result<(), RecordError> {
    validate_sized(RecordParts::of(meta), limits, None)
}

/// [`validate`] for a record read from `source_bytes` bytes of JSON (a metadata row or a
/// descriptor): the same verdict, but the metadata is measured only when its source is large
/// enough that it could exceed the limit (`metadata_bound`).
pub fn validate_read(
    meta: &RecordMeta,
    limits: &RecordLimits,
    source_bytes: usize,
) -> Result<(), RecordError> {
    validate_parts(RecordParts::of(meta), limits, source_bytes)
}

/// [`validate_read`] of a record given as parts.
pub fn validate_parts(
    record: RecordParts<'_>,
    limits: &RecordLimits,
    source_bytes: usize,
) -> Result<(), RecordError> {
    validate_sized(record, limits, Some(to_u64(source_bytes)))
}

fn validate_sized(
    record: RecordParts<'_>,
    limits: &RecordLimits,
    source_bytes: Option<u64>,
) -> Result<(), RecordError> {
    check_counts(record.fields, limits)?;
    check_tensor_sizes(record.fields, limits)?;
    if record.id.is_empty() {
        return Err(RecordError::validation(
            rule::ID_NONEMPTY,
            "record id is empty",
        ));
    }
    if record.fields.count() == 0 {
        let detail = format!("record {:?} has no fields", record.id);
        return Err(RecordError::validation(rule::FIELDS_NONEMPTY, detail));
    }
    record
        .fields
        .each(&mut |_, name, field| check_field(name, field))?;
    check_axis_ids(record.fields)?;
    check_references(record.fields)?;
    let bounded = match source_bytes {
        Some(bytes) => metadata_bound(record.fields, bytes)? <= limits.max_metadata_bytes,
        None => false,
    };
    check_metadata(record, limits, bounded)
}

/// How much larger Python's `json.dumps` of a parsed value can be than the value's source
/// text, at most. Strings come out no longer than they went in (Python escapes only what JSON
/// requires escaped, and writes non-ASCII as it is); integers keep their digits; a float's repr
/// is at most 24 bytes while its source is at least 3 (`1e5`), and the worst real case is
/// 4.5 times (`1e15` is `1000000000000000.0`); the separators `", "` and `": "` add one byte to
/// a source byte. Tested against the exact measure in `metadata_bound_holds`.
const DUMPS_GROWTH: u64 = 8;

/// Bytes a coordinate's measured form may add to what its source holds: its five keys and
/// `null`s for those absent from the source.
const COORDINATE_FORM_BYTES: u64 = 256;

/// An upper bound of what [`check_metadata`] measures for a record read from `source_bytes`
/// of JSON: every measured value is a part of that source, except each coordinate's form,
/// whose keys and nulls are not.
fn metadata_bound(fields: &dyn FieldWalk, source_bytes: u64) -> Result<u64, RecordError> {
    let mut coordinates = 0usize;
    fields.each(&mut |_, _, field| {
        coordinates += field.axes.iter().filter(|a| a.coordinate.is_some()).count();
        Ok(())
    })?;
    Ok(source_bytes
        .saturating_mul(DUMPS_GROWTH)
        .saturating_add(to_u64(coordinates).saturating_mul(COORDINATE_FORM_BYTES)))
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

/// Field count, axes per field and coordinate values per axis.
fn check_counts(fields: &dyn FieldWalk, limits: &RecordLimits) -> Result<(), RecordError> {
    let max_fields = to_u64(limits.max_fields);
    RecordError::check_limit(limit::FIELDS, to_u64(fields.count()), max_fields)?;
    let max_axes = to_u64(limits.max_axes_per_field);
    let max_values = to_u64(limits.max_coordinate_values);
    fields.each(&mut |_, _, field| {
        let rank = field.axes.len().max(field.shape.len());
        RecordError::check_limit(limit::AXES_PER_FIELD, to_u64(rank), max_axes)?;
        for axis in &field.axes {
            let values = axis.coordinate.as_ref().and_then(|c| c.values.as_ref());
            let count = values.map_or(0, |v| to_u64(v.len()));
            RecordError::check_limit(limit::COORDINATE_VALUES, count, max_values)?;
        }
        Ok(())
    })
}

/// One tensor's bytes and all tensors' bytes, from shapes alone (overflow counts as exceeded).
fn check_tensor_sizes(fields: &dyn FieldWalk, limits: &RecordLimits) -> Result<(), RecordError> {
    let mut total = 0u64;
    fields.each(&mut |_, _, field| {
        total = total.saturating_add(field_bytes(field, limits)?);
        Ok(())
    })?;
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
    let forms = [
        coordinate.values.is_some(),
        regular != (false, false),
        coordinate.reference.is_some(),
    ];
    if forms.into_iter().filter(|&given| given).count() > 1 {
        let what = "more than one of values, start/step and reference";
        return refuse(rule::COORDINATE_FORMS_EXCLUSIVE, what);
    }
    if let Some(values) = &coordinate.values {
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

/// Axis `axis`'s id when it has a nonempty one (an empty one shares nothing).
fn shared_id(axis: &Axis) -> Option<&str> {
    axis.id.as_deref().filter(|id| !id.is_empty())
}

/// Axes sharing an id agree with the first axis of that id in length and coordinate. The
/// first of each id is remembered by where it is (its field is lent again to compare), so a
/// walk that parses fields when asked holds one field at a time.
fn check_axis_ids(fields: &dyn FieldWalk) -> Result<(), RecordError> {
    // id -> (field index, field name, axis index)
    let mut first_seen: BTreeMap<String, (usize, String, usize)> = BTreeMap::new();
    fields.each(&mut |field_index, name, field| {
        for (index, axis) in field.axes.iter().enumerate() {
            let Some(id) = shared_id(axis) else { continue };
            let Some((first_field, first_name, first_index)) = first_seen.get(id) else {
                first_seen.insert(id.to_string(), (field_index, name.to_string(), index));
                continue;
            };
            let same = |first: &Axis| {
                first.length == axis.length && same_coordinate(&first.coordinate, &axis.coordinate)
            };
            let agrees = match *first_field == field_index {
                true => field.axes.get(*first_index).is_some_and(same),
                false => {
                    let mut agrees = false;
                    fields.with_field(*first_field, &mut |first| {
                        agrees = first.axes.get(*first_index).is_some_and(same);
                        Ok(())
                    })?;
                    agrees
                }
            };
            if !agrees {
                let detail = format!(
                    "axis id {id:?}: field {name:?} axis {index} differs from field \
                     {first_name:?} axis {first_index} in length or coordinate"
                );
                return Err(RecordError::validation(rule::AXIS_ID_CONSISTENT, detail));
            }
        }
        Ok(())
    })
}

fn check_references(fields: &dyn FieldWalk) -> Result<(), RecordError> {
    let mut axis_ids: BTreeSet<String> = BTreeSet::new();
    fields.each(&mut |_, _, field| {
        axis_ids.extend(field.axes.iter().filter_map(shared_id).map(str::to_string));
        Ok(())
    })?;
    fields.each(&mut |_, name, field| {
        for (index, axis) in field.axes.iter().enumerate() {
            let reference = axis
                .coordinate
                .as_ref()
                .and_then(|c| c.reference.as_deref());
            // An empty reference resolves to nothing and is not checked (the library's rule).
            let Some(target) = reference.filter(|r| !r.is_empty()) else {
                continue;
            };
            if !fields.contains(target) && !axis_ids.contains(target) {
                let detail = format!(
                    "field {name:?} axis {index} ({:?}): reference {target:?} names no field \
                     or axis id",
                    axis.name
                );
                return Err(RecordError::validation(rule::COORDINATE_REFERENCE, detail));
            }
        }
        Ok(())
    })
}

/// Where a measured value sits, said only when it breaks a rule.
enum Place<'a> {
    Record,
    Field(&'a str),
    Axis(&'a str, usize),
    Coordinate(&'a str, usize),
    CoordinateMetadata(&'a str, usize),
}

impl std::fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Record => write!(f, "record metadata"),
            Place::Field(name) => write!(f, "field {name:?} metadata"),
            Place::Axis(name, index) => write!(f, "field {name:?} axis {index} metadata"),
            Place::Coordinate(name, index) => write!(f, "field {name:?} axis {index} coordinate"),
            Place::CoordinateMetadata(name, index) => {
                write!(f, "field {name:?} axis {index} coordinate metadata")
            }
        }
    }
}

/// A measured value: a metadata object as it is held, or a coordinate's form made for it.
enum Measured<'a> {
    Object(&'a Object),
    Owned(Value),
}

impl Measured<'_> {
    fn is_finite(&self) -> bool {
        match self {
            Measured::Object(object) => object.values().all(Value::is_finite),
            Measured::Owned(value) => value.is_finite(),
        }
    }

    fn python_dumps_len(&self) -> u64 {
        match self {
            Measured::Object(object) => to_u64(object_to_compact(object).len())
                .saturating_add(object_separator_spaces(object)),
            Measured::Owned(value) => python_dumps_len(value),
        }
    }
}

/// Finite numbers everywhere, and (unless the metadata is `bounded`: known to fit, from the
/// size of its source) the total size, measured as the library measures it
/// ([`python_dumps_len`]), within the metadata limit: the record's metadata, then each field's
/// metadata, its axes' metadata and each coordinate's five-key form and metadata, as the
/// library's `validate` sums them. (A parsed document holds no non-finite number, so for read
/// records the finiteness half only guards records built otherwise; coordinates' own numbers
/// are [`check_coordinate`]'s to check.)
fn check_metadata(
    record: RecordParts<'_>,
    limits: &RecordLimits,
    bounded: bool,
) -> Result<(), RecordError> {
    let mut total_bytes = 0u64;
    let mut measure = |place: Place<'_>, value: Measured<'_>| -> Result<(), RecordError> {
        if !value.is_finite() {
            let detail = format!("{place} holds a non-finite number");
            return Err(RecordError::validation(rule::METADATA_FINITE, detail));
        }
        if bounded {
            return Ok(());
        }
        total_bytes = total_bytes.saturating_add(value.python_dumps_len());
        RecordError::check_limit(
            limit::METADATA_BYTES,
            total_bytes,
            limits.max_metadata_bytes,
        )
    };
    measure(Place::Record, Measured::Object(record.metadata))?;
    record.fields.each(&mut |_, name, field| {
        measure(Place::Field(name), Measured::Object(&field.metadata))?;
        for (index, axis) in field.axes.iter().enumerate() {
            measure(Place::Axis(name, index), Measured::Object(&axis.metadata))?;
            let Some(coordinate) = &axis.coordinate else {
                continue;
            };
            if !bounded {
                let mut form = coordinate.to_json();
                if let Value::Object(object) = &mut form {
                    object.remove("metadata");
                }
                measure(Place::Coordinate(name, index), Measured::Owned(form))?;
            }
            let metadata = Measured::Object(&coordinate.metadata);
            measure(Place::CoordinateMetadata(name, index), metadata)?;
        }
        Ok(())
    })
}

/// The UTF-8 length of Python's `json.dumps(value, ensure_ascii=False)`: the compact form plus
/// the one space the default separators add after every `,` and every `:`. Key order does not
/// change the length, so the sorted compact writer serves.
pub(crate) fn python_dumps_len(value: &Value) -> u64 {
    to_u64(to_compact(value).len()).saturating_add(separator_spaces(value))
}

fn separator_spaces(value: &Value) -> u64 {
    match value {
        Value::Array(items) => {
            let commas = to_u64(items.len().saturating_sub(1));
            items
                .iter()
                .map(separator_spaces)
                .fold(commas, u64::saturating_add)
        }
        Value::Object(object) => object_separator_spaces(object),
        _ => 0,
    }
}

fn object_separator_spaces(object: &Object) -> u64 {
    let separators = to_u64((2 * object.len()).saturating_sub(1));
    object
        .values()
        .map(separator_spaces)
        .fold(separators, u64::saturating_add)
}

fn same_coordinate(left: &Option<Coordinate>, right: &Option<Coordinate>) -> bool {
    match (left, right) {
        (None, None) => true,
        (Some(l), Some(r)) => {
            let opt_eq = |a: &Option<Value>, b: &Option<Value>| match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => python_eq(a, b),
                _ => false,
            };
            let values_eq = match (&l.values, &r.values) {
                (None, None) => true,
                (Some(a), Some(b)) => {
                    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| python_eq(x, y))
                }
                _ => false,
            };
            values_eq
                && opt_eq(&l.start, &r.start)
                && opt_eq(&l.step, &r.step)
                && l.reference == r.reference
                && l.unit == r.unit
                && objects_python_eq(&l.metadata, &r.metadata)
        }
        _ => false,
    }
}

fn objects_python_eq(left: &Object, right: &Object) -> bool {
    left.len() == right.len()
        && left
            .iter()
            .all(|(key, l)| right.get(key).is_some_and(|r| python_eq(l, r)))
}

/// Equality of JSON values as Python's `==` decides it for what `json.loads` returns: numbers
/// compare by value across `bool`, `int` and `float` (`true == 1 == 1.0`), everything else
/// structurally.
pub(crate) fn python_eq(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Array(l), Value::Array(r)) => {
            l.len() == r.len() && l.iter().zip(r).all(|(a, b)| python_eq(a, b))
        }
        (Value::Object(l), Value::Object(r)) => objects_python_eq(l, r),
        (Value::Float(l), Value::Float(r)) => l == r,
        (l, r) => match (as_exact_int(l), as_exact_int(r)) {
            (Some(a), Some(b)) => a == b,
            _ => l == r,
        },
    }
}

/// The decimal text of a number that is an exact integer (bools are 0 and 1, integral floats
/// their exact value), for comparing numbers of different JSON types without rounding.
fn as_exact_int(value: &Value) -> Option<String> {
    match value {
        Value::Bool(b) => Some(u8::from(*b).to_string()),
        Value::Int(i) => Some(i.to_string()),
        Value::BigInt(big) => Some(big.as_str().to_string()),
        // `{:.0}` prints an integral f64's exact value; -0.0 equals 0 in Python.
        Value::Float(f) if f.is_finite() && f.fract() == 0.0 => {
            let digits = format!("{:.0}", f.abs());
            Some(if *f < 0.0 {
                format!("-{digits}")
            } else {
                digits
            })
        }
        _ => None,
    }
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
    fn python_equality_of_numbers() {
        let eq = |a: &str, b: &str| {
            let parse = |t: &str| parse_value(t.as_bytes(), &JsonLimits::CONTROL).unwrap();
            python_eq(&parse(a), &parse(b))
        };
        // Python: 1 == 1.0 == True, 0 == -0.0, [1] == [1.0], {"a": 1} == {"a": True}.
        for (a, b) in [
            ("[1]", "[1.0]"),
            ("[1]", "[true]"),
            ("[0]", "[-0.0]"),
            ("[1180591620717411303424]", "[1.1805916207174113e+21]"),
            ("{\"a\":[1,{\"b\":0}]}", "{\"a\":[1.0,{\"b\":false}]}"),
        ] {
            assert!(eq(a, b), "{a} == {b}");
        }
        for (a, b) in [
            ("[1]", "[1.5]"),
            ("[1]", "[\"1\"]"),
            ("[null]", "[0]"),
            ("[1180591620717411303425]", "[1.1805916207174113e+21]"),
            ("{\"a\":1}", "{\"a\":1,\"b\":1}"),
            ("[[1]]", "[[1,2]]"),
        ] {
            assert!(!eq(a, b), "{a} != {b}");
        }
    }

    #[test]
    fn metadata_bound_holds() {
        // The cases that grow most: short floats with long reprs, separators, escapes.
        let mut texts: Vec<String> = [
            "[1e15]",
            "[-1e15,9e15,1e-5,5e-324,1e16,1E15]",
            "[0,1,2,3]",
            "[[],[],{}]",
            "{\"\":{},\"a\":[]}",
            "[\"\\u0001\",\"\\\"\",\"\\n\",\"\\/\",\"\\u00e9\"]",
            "[1.0,-0.0,2.5e-308,1.7976931348623157e308]",
            "[123456789012345678901234567890,-1]",
            "{\"a\":{\"b\":{\"c\":[true,false,null]}}}",
        ]
        .iter()
        .map(|t| t.to_string())
        .collect();
        // And random compact documents of short tokens.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        const TOKENS: [&str; 8] = [
            "1e15",
            "0",
            "1.5",
            "\"\"",
            "null",
            "9e15",
            "\"\\u0007\"",
            "1e22",
        ];
        for _ in 0..2000 {
            let items: Vec<String> = (0..1 + next(12))
                .map(|i| match next(3) {
                    0 => format!("[{}]", TOKENS[next(8) as usize]),
                    1 => format!("{{\"k{i}\":{}}}", TOKENS[next(8) as usize]),
                    _ => TOKENS[next(8) as usize].to_string(),
                })
                .collect();
            texts.push(format!("[{}]", items.join(",")));
        }
        let mut worst = 0.0f64;
        for text in &texts {
            let value = parse_value(text.as_bytes(), &JsonLimits::CONTROL).unwrap();
            let measured = python_dumps_len(&value);
            let source = text.len() as u64;
            assert!(
                measured <= DUMPS_GROWTH * source,
                "{text}: {measured} > 8 * {source}"
            );
            worst = worst.max(measured as f64 / source as f64);
        }
        // The bound is not loose by accident: the worst case found is 4.5x ("[1e15]" less
        // its brackets), within 8x.
        assert!(worst > 3.0, "worst growth {worst}");
    }

    #[test]
    fn metadata_over_the_limit_is_refused_however_it_is_read() {
        // A row of 1,1,... compact: Python's separators make its metadata 1.5 times its text.
        let ones = vec!["1"; 400].join(",");
        let text = format!(
            r#"{{"id":"a","metadata":{{"a":[{ones}]}},"fields":{{"x":{{"dtype":"<f4","shape":[1],"axes":[{{"name":"t","length":1}}]}}}}}}"#
        );
        let limits = RecordLimits {
            max_metadata_bytes: text.len() as u64 + 50,
            ..RecordLimits::default()
        };
        let refused = RecordMeta::parse_row(text.as_bytes(), &limits).unwrap_err();
        assert!(refused.to_string().contains("metadata"), "{refused}");
        let meta = RecordMeta::parse_row(text.as_bytes(), &RecordLimits::default()).unwrap();
        assert!(validate(&meta, &limits).is_err());
        assert!(validate_read(&meta, &RecordLimits::default(), text.len()).is_ok());
    }

    #[test]
    fn python_dumps_length() {
        // Lengths of Python's json.dumps(value, ensure_ascii=False).encode().
        for (text, expected) in [
            ("{}", 2),
            ("{\"a\":1}", 8),
            ("{\"a\":[1,2,{}],\"é\":null}", 29),
            ("[]", 2),
        ] {
            let value = parse_value(text.as_bytes(), &JsonLimits::CONTROL).unwrap();
            assert_eq!(python_dumps_len(&value), expected, "{text}");
        }
    }

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
