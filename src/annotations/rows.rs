//! The row file of `sds annotate`: JSON Lines, one annotation row per line.
//!
//! ```text
//! {"source_index": 3, "status": "success", "values": {"snr_db": 12.5},
//!  "provenance": {"model": "v2"}, "detail_status": null,
//!  "fields": {"mask": {"npy": "masks/3.npy", "axes": ["time"]}}}
//! ```
//!
//! - A row names its record by `source_index` (the ordinal) or `source_record_id` (the id, which
//!   must then be unique in the dataset), or both, which must agree.
//! - `status` is a wire status (`success`, `skipped`, `failed`); `values` and `provenance` are
//!   JSON objects (default `{}`); `detail_status` a nonempty string or null (default null).
//! - `fields` (optional) maps field names to `{"npy": PATH, "axes": [NAME, ...], "metadata":
//!   {...}}`: a NumPy `.npy` file (C order, a dtype of the profile's table), relative paths
//!   resolved against the row file's directory; `axes` names each dimension (default `dim_0`,
//!   `dim_1`, ...); `metadata` is optional.
//! - Unknown keys are refused, and so is a second row for the same record: a typo must not
//!   silently become a default.
//!
//! Rows missing for some records are refused unless the caller fills them
//! ([`Fill::Skipped`]: status `skipped`, empty values and provenance, no detail, no fields).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::Path;

use crate::dataset::Dataset;
use crate::format::json::{parse_object, JsonLimits, Object, Value};
use crate::format::npy;
use crate::format::record::{Axis, Field, FieldMeta};

use super::{AnnotationError, AnnotationRecord, AnnotationStatus, Cause};

/// What to do about records no row names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Refuse the publication.
    Refuse,
    /// Give them a `skipped` row.
    Skipped,
}

/// One parsed line, not yet resolved to an ordinal.
#[derive(Debug, Clone)]
pub struct RowInput {
    pub line: usize,
    pub source_index: Option<u64>,
    pub source_record_id: Option<String>,
    pub status: AnnotationStatus,
    pub values: Object,
    pub provenance: Object,
    pub detail_status: Option<String>,
    pub fields: BTreeMap<String, Field>,
}

const ROW_KEYS: [&str; 7] = [
    "detail_status",
    "fields",
    "provenance",
    "source_index",
    "source_record_id",
    "status",
    "values",
];

/// Parses a row file; tensor paths are resolved against `base`. Errors name `file` and line.
pub fn parse_rows(text: &[u8], file: &str, base: &Path) -> Result<Vec<RowInput>, AnnotationError> {
    let text = std::str::from_utf8(text).map_err(|e| AnnotationError::rows(file, e))?;
    let mut rows = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let number = index + 1;
        let row = parse_row(line, base)
            .map_err(|cause| AnnotationError::rows(format!("{file}, line {number}"), cause))?;
        rows.push(RowInput {
            line: number,
            ..row
        });
    }
    Ok(rows)
}

fn parse_row(line: &str, base: &Path) -> Result<RowInput, Cause> {
    let doc = parse_object(line.as_bytes(), &JsonLimits::CONTROL)?;
    if let Some(key) = doc.keys().find(|k| !ROW_KEYS.contains(&k.as_str())) {
        return Err(Cause::rule(format!(
            "unknown key {key:?} (allowed: {})",
            ROW_KEYS.join(", ")
        )));
    }
    let source_index = match doc.get("source_index") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| Cause::rule("source_index must be a nonnegative integer"))?,
        ),
    };
    let source_record_id = match doc.get("source_record_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(_) => return Err(Cause::rule("source_record_id must be a nonempty string")),
    };
    if source_index.is_none() && source_record_id.is_none() {
        return Err(Cause::rule(
            "a row names its record by source_index or source_record_id",
        ));
    }
    let status = doc
        .get("status")
        .and_then(Value::as_str)
        .and_then(AnnotationStatus::from_wire)
        .ok_or_else(|| Cause::rule("status must be one of \"success\", \"skipped\", \"failed\""))?;
    let object = |key: &str| match doc.get(key) {
        None => Ok(Object::new()),
        Some(Value::Object(o)) => Ok(o.clone()),
        Some(_) => Err(Cause::rule(format!("{key} must be a JSON object"))),
    };
    let detail_status = match doc.get("detail_status") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(_) => {
            return Err(Cause::rule(
                "detail_status must be a nonempty string or null",
            ))
        }
    };
    let mut fields = BTreeMap::new();
    match doc.get("fields") {
        None | Some(Value::Null) => {}
        Some(Value::Object(specs)) => {
            for (name, spec) in specs {
                let field = field_from_spec(spec, base)
                    .map_err(|cause| cause.at(format!("field {name:?}")))?;
                fields.insert(name.to_string(), field);
            }
        }
        Some(_) => {
            return Err(Cause::rule(
                "fields must be an object of field name → {\"npy\", \"axes\"}",
            ))
        }
    }
    Ok(RowInput {
        line: 0,
        source_index,
        source_record_id,
        status,
        values: object("values")?,
        provenance: object("provenance")?,
        detail_status,
        fields,
    })
}

fn field_from_spec(spec: &Value, base: &Path) -> Result<Field, Cause> {
    let Value::Object(spec) = spec else {
        return Err(Cause::rule(
            "must be an object {\"npy\": PATH, \"axes\": [NAME, ...]}",
        ));
    };
    if let Some(key) = spec
        .keys()
        .find(|k| !["axes", "metadata", "npy"].contains(&k.as_str()))
    {
        return Err(Cause::rule(format!(
            "unknown key {key:?} (allowed: axes, metadata, npy)"
        )));
    }
    let path = spec
        .get("npy")
        .and_then(Value::as_str)
        .ok_or_else(|| Cause::rule("\"npy\" must be the path of a .npy file"))?;
    let path = base.join(path);
    let at_path = |cause: Cause| cause.at(path.display().to_string());
    let bytes = std::fs::read(&path).map_err(|e| at_path(e.into()))?;
    let (header, data) = npy::parse(&bytes).map_err(|e| at_path(e.into()))?;
    let (dtype, shape, data) = (header.dtype, header.shape, data.to_vec());
    let axes = match spec.get("axes") {
        None | Some(Value::Null) => FieldMeta::new(dtype, shape.clone()).axes,
        Some(Value::Array(names)) => {
            if names.len() != shape.len() {
                return Err(Cause::rule(format!(
                    "{} axis names given for an array of rank {}",
                    names.len(),
                    shape.len()
                )));
            }
            names
                .iter()
                .zip(&shape)
                .map(|(name, &len)| match name.as_str() {
                    Some(n) if !n.is_empty() => Ok(Axis::new(n, len)),
                    _ => Err(Cause::rule("axis names must be nonempty strings")),
                })
                .collect::<Result<_, _>>()?
        }
        Some(_) => return Err(Cause::rule("axes must be an array of axis names")),
    };
    let metadata = match spec.get("metadata") {
        None | Some(Value::Null) => Object::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(_) => return Err(Cause::rule("metadata must be a JSON object")),
    };
    let meta = FieldMeta {
        dtype,
        shape,
        axes,
        metadata,
    };
    Ok(Field::from_meta(meta, data)?)
}

/// Resolves parsed rows to one row per ordinal of `range`, in order: by index or id (the id
/// must be unique in the dataset), each at most once; records without a row are refused or
/// filled per `fill`. Rows for ordinals outside `range` are ignored (a worker given the whole
/// file takes its own shard's rows).
pub fn resolve_rows(
    dataset: &Dataset,
    rows: Vec<RowInput>,
    range: Range<u64>,
    fill: Fill,
    file: &str,
) -> Result<Vec<AnnotationRecord>, AnnotationError> {
    let mut by_ordinal = place_rows(dataset, rows, &range, file)?;
    // Sized from the rows given, not from the range: the range comes from the snapshot's
    // record count, a document's claim; what is pushed beyond follows records actually read.
    let mut out = Vec::with_capacity(by_ordinal.len());
    let mut missing = Vec::new();
    for ordinal in range.clone() {
        let source = dataset
            .record_meta(ordinal)
            .map_err(|source| AnnotationError::SourceRow { ordinal, source })?;
        match by_ordinal.remove(&ordinal) {
            Some(row) => {
                if let Some(id) = &row.source_record_id {
                    if *id != source.id {
                        return Err(AnnotationError::rows(
                            format!("{file}, line {}", row.line),
                            Cause::rule(format!(
                                "source_record_id {id:?} is not the id of record {ordinal}, {:?}",
                                source.id
                            )),
                        ));
                    }
                }
                out.push(AnnotationRecord {
                    source_record_id: source.id,
                    source_index: ordinal,
                    status: row.status,
                    values: row.values,
                    fields: row.fields,
                    provenance: row.provenance,
                    detail_status: row.detail_status,
                });
            }
            None if fill == Fill::Skipped => out.push(AnnotationRecord::new(
                source.id,
                ordinal,
                AnnotationStatus::Skipped,
            )),
            None => missing.push(ordinal),
        }
    }
    if !missing.is_empty() {
        let shown: Vec<String> = missing.iter().take(10).map(u64::to_string).collect();
        let rule = format!(
            "no row for {} of the {} records (ordinals {}{}); a set is dense: add rows \
             or pass --fill skipped",
            missing.len(),
            range.end - range.start,
            shown.join(", "),
            if missing.len() > 10 { ", ..." } else { "" }
        );
        return Err(AnnotationError::rows(file, Cause::rule(rule)));
    }
    Ok(out)
}

/// The rows whose ordinal lies in `range`, by ordinal; a row naming no record, a record out of
/// the dataset, or a record another row already names is refused.
fn place_rows(
    dataset: &Dataset,
    rows: Vec<RowInput>,
    range: &Range<u64>,
    file: &str,
) -> Result<BTreeMap<u64, RowInput>, AnnotationError> {
    let ids = if rows.iter().any(|r| r.source_index.is_none()) {
        Some(id_index(dataset)?)
    } else {
        None
    };
    let mut by_ordinal: BTreeMap<u64, RowInput> = BTreeMap::new();
    for row in rows {
        let refuse = |rule: String| {
            AnnotationError::rows(format!("{file}, line {}", row.line), Cause::rule(rule))
        };
        let ordinal = match (row.source_index, &row.source_record_id, &ids) {
            (Some(i), _, _) => i,
            (None, Some(id), Some(ids)) => match ids.get(id) {
                Some(Ok(o)) => *o,
                Some(Err(ordinals)) => {
                    return Err(refuse(format!(
                        "record id {id:?} is not unique (ordinals {ordinals:?}); name the record by source_index"
                    )))
                }
                None => return Err(refuse(format!("no record has id {id:?}"))),
            },
            _ => return Err(refuse("the row names no record".into())),
        };
        if ordinal >= dataset.len() {
            return Err(refuse(format!(
                "source_index {ordinal} is out of range: the dataset has {} records",
                dataset.len()
            )));
        }
        if !range.contains(&ordinal) {
            continue;
        }
        if let Some(previous) = by_ordinal.get(&ordinal) {
            return Err(refuse(format!(
                "a second row for ordinal {ordinal} (the first is on line {})",
                previous.line
            )));
        }
        by_ordinal.insert(ordinal, row);
    }
    Ok(by_ordinal)
}

/// Record id → its ordinal, or every ordinal holding it when it is not unique.
fn id_index(dataset: &Dataset) -> Result<HashMap<String, Result<u64, Vec<u64>>>, AnnotationError> {
    let mut ids: HashMap<String, Result<u64, Vec<u64>>> = HashMap::new();
    for ordinal in 0..dataset.len() {
        let row = dataset
            .record_meta(ordinal)
            .map_err(|source| AnnotationError::SourceRow { ordinal, source })?;
        ids.entry(row.id)
            .and_modify(|e| match e {
                Ok(first) => *e = Err(vec![*first, ordinal]),
                Err(all) => all.push(ordinal),
            })
            .or_insert(Ok(ordinal));
    }
    Ok(ids)
}
