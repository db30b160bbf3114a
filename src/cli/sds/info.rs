//! `sds info DATASET [--json]`: what a dataset is, from its control documents and one metadata
//! row (record 0), never a data shard.
//!
//! The JSON form is one object with exactly the keys `annotations`, `annotations_problem`,
//! `dataset_id`, `snapshot_id`, `layout_version`, `record_count`, `shard_count`, `stored_bytes`,
//! `manifest_pages`, `first_record` and `first_record_problem`. `annotations` lists the catalog's sets in name order, each
//! `{"name", "problem", "publication_id", "record_count", "row_counts"}`: `problem` is null for
//! a sound set (else why it is hidden, the other keys then null), `row_counts` is the set root's
//! `sds.row_counts` (`{"failed", "skipped", "success"}`) or null when the set was not tallied.
//! Listing sets reads the catalog pointer, its revision and each set root, nothing more. `first_record` is `null` for an empty dataset, else
//! `{"fields": {<name>: {"dtype": <NumPy name>, "shape": [<int>, ...]}}, "id", "scene_id"}`
//! (`scene_id` may be `null`). `annotations_problem` is `null`, or why the catalog pointer or its
//! revision could not be read (`annotations` is then empty). When record 0's row cannot be read, `first_record` is `null` and
//! `first_record_problem` says why (otherwise it is `null`): a damaged shard is `sds verify`'s to
//! report, and the documents are still worth showing (the exit status stays 0). It is written as pretty deterministic JSON (keys sorted, one
//! final newline), so scripts can rely on both the keys and the bytes.

use crate::annotations::AnnotationStatus;
use crate::cli::CliError;
use crate::dataset::Dataset;
use crate::format::json::{object_to_pretty, Object, Value};
use crate::format::printable::escaped;
use crate::format::record::RecordMeta;

use super::super::size::format_size;
use crate::cli::location;

/// Everything `sds info` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Info {
    pub dataset_id: String,
    pub snapshot_id: String,
    pub layout_version: String,
    pub record_count: u64,
    pub shard_count: u64,
    pub stored_bytes: u64,
    pub manifest_pages: u64,
    /// Metadata row of record 0; `None` for an empty dataset or an unreadable row.
    pub first_record: Option<RecordMeta>,
    /// Why record 0's row could not be read.
    pub first_record_problem: Option<String>,
    /// The catalog's annotation sets, in name order (empty when the catalog is unreadable).
    pub annotations: Vec<SetInfo>,
    /// Why the catalog pointer or its revision could not be read.
    pub annotations_problem: Option<String>,
}

/// One annotation set as `sds info` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct SetInfo {
    pub name: String,
    /// `Err`: why the set is hidden.
    pub set: Result<SetSummary, Problem>,
}

/// A problem `sds info` reports instead of a part of the dataset (a hidden set, an unreadable
/// catalog), on one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Problem(pub String);

/// A sound set's identity and tally.
#[derive(Debug, Clone, PartialEq)]
pub struct SetSummary {
    pub publication_id: String,
    pub record_count: u64,
    pub row_counts: Option<std::collections::BTreeMap<AnnotationStatus, u64>>,
}

fn annotation_sets(dataset: &Dataset) -> Result<Vec<SetInfo>, Problem> {
    let catalog = crate::annotations::read_catalog(dataset).map_err(|e| {
        Problem(location::one_line(&format!(
            "cannot read the annotation catalog: {e}"
        )))
    })?;
    Ok(catalog
        .sets
        .into_iter()
        .map(|(name, set)| SetInfo {
            name,
            set: set
                .map(|s| SetSummary {
                    publication_id: s.publication_id().to_string(),
                    record_count: s.len(),
                    row_counts: s.row_counts(),
                })
                .map_err(|e| Problem(location::one_line(&e.to_string()))),
        })
        .collect())
}

/// Gathers the report: the open dataset's documents plus, when there is one, record 0's row.
pub fn gather(dataset: &Dataset) -> Result<Info, CliError> {
    let snapshot = dataset.snapshot();
    let annotations = annotation_sets(dataset);
    let annotations_problem = annotations.as_ref().map(|_| ()).map_err(|p| p.0.clone());
    let annotations = annotations.ok();
    let (first_record, first_record_problem) = if dataset.is_empty() {
        (None, None)
    } else {
        match dataset.record_meta(0) {
            Ok(row) => (Some(row), None),
            Err(e) => (
                None,
                Some(location::one_line(&format!(
                    "cannot read the metadata row of record 0: {}",
                    location::describe(&e, dataset.store().as_ref())
                ))),
            ),
        }
    };
    Ok(Info {
        dataset_id: dataset.root().dataset_id.clone(),
        snapshot_id: snapshot.snapshot_id.clone(),
        layout_version: crate::format::documents::LAYOUT_VERSION.to_string(),
        record_count: snapshot.record_count,
        shard_count: snapshot.shard_count,
        stored_bytes: snapshot.stored_bytes,
        manifest_pages: snapshot.manifests.len() as u64,
        first_record,
        first_record_problem,
        annotations: annotations.unwrap_or_default(),
        annotations_problem: annotations_problem.err(),
    })
}

/// A shape as Python writes a tuple: `()`, `(79,)`, `(64, 79)`.
fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    }
}

/// The human-readable report.
pub fn to_text(info: &Info) -> String {
    let mut out = String::new();
    // Every value may hold a dataset's strings: escaped, so each stays on its line.
    let mut line =
        |key: &str, value: String| out.push_str(&format!("{key:<16}{}\n", escaped(&value)));
    line("dataset_id", info.dataset_id.clone());
    line("snapshot_id", info.snapshot_id.clone());
    line("layout_version", info.layout_version.clone());
    line("record_count", info.record_count.to_string());
    line("shard_count", info.shard_count.to_string());
    line(
        "stored_bytes",
        format!("{} ({})", info.stored_bytes, format_size(info.stored_bytes)),
    );
    line("manifest_pages", info.manifest_pages.to_string());
    match (&info.first_record, &info.first_record_problem) {
        (_, Some(problem)) => line("first_record", format!("unreadable: {problem}")),
        (None, None) => line("first_record", "none (the dataset is empty)".into()),
        (Some(row), None) => {
            let scene = row.scene_id.as_deref().unwrap_or("none");
            line("first_record", format!("id {}, scene {scene}", row.id));
            out.push_str(&fields_table(row));
        }
    }
    if let Some(problem) = &info.annotations_problem {
        let problem = escaped(&problem.to_string()).into_owned();
        out.push_str(&format!("{:<16}unreadable: {problem}\n", "annotations"));
    }
    if !info.annotations.is_empty() {
        out.push_str(&format!("annotations ({}):\n", info.annotations.len()));
    }
    for set in &info.annotations {
        match &set.set {
            Ok(summary) => {
                let counts = summary.row_counts.as_ref().map_or_else(
                    || "not tallied".to_string(),
                    |counts| {
                        counts
                            .iter()
                            .map(|(status, n)| format!("{status} {n}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                );
                out.push_str(&format!(
                    "  {}  publication {}  {} records  {}\n",
                    escaped(&set.name),
                    escaped(&summary.publication_id),
                    summary.record_count,
                    escaped(&counts)
                ));
            }
            Err(problem) => out.push_str(&format!(
                "  {}  hidden: {}\n",
                escaped(&set.name),
                escaped(&problem.to_string())
            )),
        }
    }
    out
}

/// The first record's fields, one per line: name, dtype, shape, in code-point order.
fn fields_table(row: &RecordMeta) -> String {
    let width = row
        .fields
        .keys()
        .map(|n| escaped(n).chars().count())
        .max()
        .unwrap_or(0);
    let mut out = format!("fields ({}):\n", row.fields.len());
    for (name, field) in &row.fields {
        let name = escaped(name);
        out.push_str(&format!(
            "  {name:<width$}  {:<10} {}\n",
            field.dtype.numpy_name(),
            shape_text(&field.shape)
        ));
    }
    out
}

/// The JSON report (see the module documentation for its keys).
pub fn to_json(info: &Info) -> String {
    let mut doc = Object::new();
    doc.insert("dataset_id".into(), info.dataset_id.as_str().into());
    doc.insert("snapshot_id".into(), info.snapshot_id.as_str().into());
    doc.insert("layout_version".into(), info.layout_version.as_str().into());
    doc.insert("record_count".into(), info.record_count.into());
    doc.insert("shard_count".into(), info.shard_count.into());
    doc.insert("stored_bytes".into(), info.stored_bytes.into());
    doc.insert("manifest_pages".into(), info.manifest_pages.into());
    let first = info
        .first_record
        .as_ref()
        .map_or(Value::Null, first_record_json);
    doc.insert("first_record".into(), first);
    let problem = info
        .first_record_problem
        .as_deref()
        .map_or(Value::Null, Value::from);
    doc.insert("first_record_problem".into(), problem);
    let sets: Vec<Value> = info.annotations.iter().map(set_json).collect();
    doc.insert("annotations".into(), sets.into());
    let problem = info
        .annotations_problem
        .as_deref()
        .map_or(Value::Null, Value::from);
    doc.insert("annotations_problem".into(), problem);
    object_to_pretty(&doc)
}

fn first_record_json(row: &RecordMeta) -> Value {
    let mut fields = Object::new();
    for (name, field) in &row.fields {
        let shape: Vec<Value> = field.shape.iter().map(|d| Value::from(*d)).collect();
        let mut entry = Object::new();
        entry.insert("dtype".into(), field.dtype.numpy_name().into());
        entry.insert("shape".into(), shape.into());
        fields.insert(name.as_str().into(), entry.into());
    }
    let mut out = Object::new();
    out.insert("fields".into(), fields.into());
    out.insert("id".into(), row.id.as_str().into());
    let scene = row.scene_id.as_deref().map_or(Value::Null, Value::from);
    out.insert("scene_id".into(), scene);
    out.into()
}

fn set_json(set: &SetInfo) -> Value {
    let mut out = Object::new();
    out.insert("name".into(), set.name.as_str().into());
    let (problem, publication_id, record_count, row_counts) = match &set.set {
        Ok(summary) => (
            Value::Null,
            Value::from(summary.publication_id.as_str()),
            Value::from(summary.record_count),
            summary.row_counts.as_ref().map_or(Value::Null, |counts| {
                Value::Object(
                    counts
                        .iter()
                        .map(|(status, n)| (status.as_wire().into(), Value::from(*n)))
                        .collect(),
                )
            }),
        ),
        Err(problem) => (
            Value::from(problem.0.as_str()),
            Value::Null,
            Value::Null,
            Value::Null,
        ),
    };
    out.insert("problem".into(), problem);
    out.insert("publication_id".into(), publication_id);
    out.insert("record_count".into(), record_count);
    out.insert("row_counts".into(), row_counts);
    out.into()
}
