//! The control documents (docs/FORMAT.md): what a dataset root, a snapshot, a manifest page
//! and the annotation documents contain, how they are read, checked and written, in the
//! format the `signal-dataset` library (0.2.0 to 0.4.0) reads and writes.
//!
//! Design:
//! - **Parsing and validation are separate steps.** `parse` checks one document's *shape*: the
//!   JSON rules, required keys, types, supported `format` / `layout_version` / codec
//!   identifiers, valid reference paths. Rules that relate several documents (a page against
//!   the snapshot's reference to it) live in `validate*` methods, so that a reader can
//!   apply them at the moment it holds everything they need (a manifest page, say, can only be
//!   checked once the snapshot's reference to it is known).
//! - **Two key policies.** Roots, snapshots, manifests and their references ignore unknown keys
//!   (compatible additions, seed "Complete field contracts"); annotation documents are
//!   exact-key, nested references included. Each parser states its policy explicitly.
//! - **Writers and readers share the types.** Every document has `to_json`, which produces the
//!   exact bytes a writer publishes: Python's `json.dumps(doc, sort_keys=True,
//!   ensure_ascii=False, indent=2) + "\n"`. Optional keys that are `None` are omitted, never
//!   written as `null` (except the worker pointer's `generation`, whose key is always present).
//!   Constant keys (`format`, `layout_version`, codec names) are not stored in the structs: a
//!   parsed document can only hold the one supported value, so storing it would add a field
//!   that can never vary.
//! - **Errors name the document and the rule.** A [`DocumentError`] carries the document's name
//!   (a default such as `root.json`, or the path the caller read it from, see
//!   [`DocumentError::with_document`]) and a rule text that points into the document
//!   (`manifests[2].object: missing required key "path"`).
//! - **References are followed, not second-guessed.** Readers resolve the paths references
//!   carry; they do not require those paths to be the canonical derivations of [`ids`] (the
//!   seed: "Readers resolve references directly"). Writers always use the canonical paths.

pub mod annotation;
pub mod ids;
pub mod manifest;
pub mod reference;
pub mod root;
pub mod snapshot;
pub mod version;

pub use annotation::{
    AnnotationStatus, CatalogPointer, Revision, RevisionRef, SetRoot, SetShard, WorkerPointer,
};
pub use ids::IdError;
pub use manifest::{ManifestPage, ShardEntry};
pub use reference::{ObjectRef, Reference};
pub use root::{DatasetRoot, WRITTEN_MIN_READER_VERSION};
pub use snapshot::{ManifestRef, Snapshot};
pub use version::ReleaseVersion;

use super::json::{self, AccessError, JsonError, JsonLimits, Object, ObjectExt, Value};

/// The layout versions this reader supports (section 8); checked as a set, not for equality.
pub const SUPPORTED_LAYOUTS: &[&str] = &["0.1"];

/// The layout version writers emit.
pub const LAYOUT_VERSION: &str = "0.1";

/// `format` of `root.json`.
pub const FORMAT_DATASET: &str = "signal-dataset.dataset";
/// `format` of a snapshot.
pub const FORMAT_SNAPSHOT: &str = "signal-dataset.snapshot";
/// `format` of a manifest page.
pub const FORMAT_MANIFEST: &str = "signal-dataset.manifest";
/// The only record codec of layout 0.1.
pub const RECORD_CODEC: &str = "safetensors";
/// The only shard format of layout 0.1 (`shard_format.name`).
pub const SHARD_CONTAINER: &str = "array_record";

/// Why a control document was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    /// The bytes are not a JSON object under the section 1 rules and section 9 limits.
    #[error("{document}: {source}")]
    Json {
        document: String,
        #[source]
        source: JsonError,
    },
    /// The document is JSON but breaks a rule of sections 4, 6 or 8.
    #[error("{document}: {rule}")]
    Rule { document: String, rule: String },
    /// `min_reader_version` asks for a newer reader than this one (section 8).
    #[error("{document}: min_reader_version {required:?} is newer than this reader ({reader})")]
    ReaderTooOld {
        document: String,
        required: String,
        reader: String,
    },
}

impl DocumentError {
    /// The document the error is about.
    pub fn document(&self) -> &str {
        match self {
            DocumentError::Json { document, .. }
            | DocumentError::Rule { document, .. }
            | DocumentError::ReaderTooOld { document, .. } => document,
        }
    }

    /// The same error attributed to `document`, typically the path the caller read it from
    /// (parsers only know a default name such as `snapshot.json`).
    pub fn with_document(mut self, name: impl Into<String>) -> DocumentError {
        let name = name.into();
        match &mut self {
            DocumentError::Json { document, .. }
            | DocumentError::Rule { document, .. }
            | DocumentError::ReaderTooOld { document, .. } => *document = name,
        }
        self
    }

    /// A rule violation in `document`.
    pub fn rule(document: impl Into<String>, rule: impl Into<String>) -> DocumentError {
        DocumentError::Rule {
            document: document.into(),
            rule: rule.into(),
        }
    }
}

/// A broken rule, located inside a document but not yet attributed to one. Nested parsers
/// return it so that each level can prefix where it looked (`manifests[2].object: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule(pub(crate) String);

impl Rule {
    pub(crate) fn new(text: impl Into<String>) -> Rule {
        Rule(text.into())
    }

    /// Prefixes the location where the rule was broken.
    pub(crate) fn at(self, location: &str) -> Rule {
        Rule(format!("{location}: {}", self.0))
    }

    pub(crate) fn in_document(self, document: &str) -> DocumentError {
        DocumentError::rule(document, self.0)
    }
}

impl From<AccessError> for Rule {
    fn from(e: AccessError) -> Rule {
        Rule(e.to_string())
    }
}

impl From<ids::IdError> for Rule {
    fn from(e: ids::IdError) -> Rule {
        Rule(e.to_string())
    }
}

pub(crate) type RuleResult<T> = Result<T, Rule>;

/// Parses `bytes` as a JSON object, attributing JSON errors to `document`.
pub(crate) fn parse_json(
    bytes: &[u8],
    limits: &JsonLimits,
    document: &str,
) -> Result<Object, DocumentError> {
    json::parse_object(bytes, limits).map_err(|source| DocumentError::Json {
        document: document.to_string(),
        source,
    })
}

/// Requires `key` to hold the string `expected` (format identifiers, codec names).
pub(crate) fn require_identifier(
    object: &Object,
    key: &str,
    expected: &str,
    what: &str,
) -> RuleResult<()> {
    let found = object.req_str(key)?;
    if found != expected {
        return Err(Rule::new(format!(
            "unsupported {what} {found:?} (expected {expected:?})"
        )));
    }
    Ok(())
}

/// Requires `layout_version` to be one this reader supports.
pub(crate) fn require_layout(object: &Object) -> RuleResult<()> {
    let found = object.req_str("layout_version")?;
    if !SUPPORTED_LAYOUTS.contains(&found) {
        return Err(Rule::new(format!(
            "unsupported layout_version {found:?} (this reader supports {SUPPORTED_LAYOUTS:?})"
        )));
    }
    Ok(())
}

/// Reads each element of the array at `key` with `item`, locating errors as `key[i]`.
pub(crate) fn req_items<T>(
    object: &Object,
    key: &str,
    item: impl Fn(&Value) -> RuleResult<T>,
) -> RuleResult<Vec<T>> {
    object
        .req_array(key)?
        .iter()
        .enumerate()
        .map(|(i, value)| item(value).map_err(|r| r.at(&format!("{key}[{i}]"))))
        .collect()
}

/// A nested object, for element parsers.
pub(crate) fn as_object<'a>(value: &'a Value, what: &str) -> RuleResult<&'a Object> {
    value.as_object().ok_or_else(|| {
        Rule::new(format!(
            "{what} must be an object, not {}",
            value.type_name()
        ))
    })
}

/// A nonnegative JSON integer element (booleans, floats and strings refused).
pub(crate) fn as_count(value: &Value) -> RuleResult<u64> {
    value.as_u64().ok_or_else(|| {
        Rule::new(format!(
            "must be a nonnegative integer, not {}",
            value_text(value)
        ))
    })
}

/// A short rendering of a value for messages.
pub(crate) fn value_text(value: &Value) -> String {
    match value {
        Value::Array(_) | Value::Object(_) => value.type_name().to_string(),
        scalar => json::to_compact(scalar),
    }
}

/// Checks that ranges `(first, count)` tile `[start, end)` in order, with no gap or overlap.
/// `what` names the items (`manifest references`, `shard entries`) for the message.
pub(crate) fn check_tiling(
    ranges: impl IntoIterator<Item = (u64, u64)>,
    start: u64,
    end: u64,
    what: &str,
) -> RuleResult<()> {
    let refuse = |detail: String| {
        Err(Rule::new(format!(
            "{what} do not tile [{start}, {end}): {detail}"
        )))
    };
    let mut expected = start;
    for (i, (first, count)) in ranges.into_iter().enumerate() {
        if first != expected {
            return refuse(format!("entry {i} starts at {first}, expected {expected}"));
        }
        expected = match first.checked_add(count) {
            Some(next) if next <= end => next,
            _ => {
                return refuse(format!(
                    "entry {i} ends past the range ({first} + {count} records)"
                ))
            }
        };
    }
    if expected != end {
        return refuse(format!(
            "the entries end at {expected}, but record_count puts the end at {end}"
        ));
    }
    Ok(())
}

/// Sums `values`, refusing overflow (a hostile document can make any sum overflow).
pub(crate) fn checked_sum(values: impl IntoIterator<Item = u64>, what: &str) -> RuleResult<u64> {
    values.into_iter().try_fold(0u64, |acc, v| {
        acc.checked_add(v)
            .ok_or_else(|| Rule::new(format!("the sum of {what} overflows 64 bits")))
    })
}

/// Requires a declared total to equal the sum of its parts.
pub(crate) fn check_sum(declared: u64, parts: u64, key: &str, over: &str) -> RuleResult<()> {
    if declared != parts {
        return Err(Rule::new(format!(
            "{key} is {declared} but the sum over {over} is {parts}"
        )));
    }
    Ok(())
}

/// Builds an [`Object`] from `(key, value)` pairs.
pub(crate) fn object<const N: usize>(pairs: [(&str, Value); N]) -> Object {
    pairs.into_iter().map(|(k, v)| (k.into(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiling(ranges: &[(u64, u64)], start: u64, end: u64) -> RuleResult<()> {
        check_tiling(ranges.iter().copied(), start, end, "items")
    }

    #[test]
    fn tiling_accepts_exact_covers_only() {
        assert_eq!(tiling(&[], 5, 5), Ok(()));
        assert_eq!(tiling(&[(5, 0)], 5, 5), Ok(()));
        assert_eq!(tiling(&[(0, 2), (2, 0), (2, 3)], 0, 5), Ok(()));
        assert_eq!(
            tiling(&[(0, 2), (3, 2)], 0, 5),
            Err(Rule::new(
                "items do not tile [0, 5): entry 1 starts at 3, expected 2"
            ))
        );
        assert_eq!(
            tiling(&[(0, 6)], 0, 5),
            Err(Rule::new(
                "items do not tile [0, 5): entry 0 ends past the range (0 + 6 records)"
            ))
        );
        assert_eq!(
            tiling(&[(0, 4)], 0, 5),
            Err(Rule::new(
                "items do not tile [0, 5): the entries end at 4, but record_count puts the end at 5"
            ))
        );
        assert!(tiling(&[(u64::MAX, 1)], u64::MAX, u64::MAX).is_err());
    }

    #[test]
    fn sums_refuse_overflow() {
        assert_eq!(checked_sum([1, 2, 3], "x"), Ok(6));
        assert!(checked_sum([u64::MAX, 1], "x").is_err());
    }

    #[test]
    fn errors_keep_their_document_when_relabelled() {
        let err = Rule::new("broken")
            .at("shards[1]")
            .in_document("manifest page");
        assert_eq!(err.to_string(), "manifest page: shards[1]: broken");
        let err = err.with_document("manifests/ab/S-00000001.json");
        assert_eq!(
            err.to_string(),
            "manifests/ab/S-00000001.json: shards[1]: broken"
        );
    }
}
