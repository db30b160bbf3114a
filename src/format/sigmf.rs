//! The SigMF document a field was imported from, kept in the field's metadata so that the
//! mount's `.sigmf-meta` of that field gives it back (the round trip of `docs/MOUNT.md`,
//! "SigMF round trip"). Pure: no I/O; nothing read here is trusted.
//!
//! Why in the field's metadata and not the record's: the document describes one recording,
//! the field's samples; a record may hold several fields and a selection or a view may carry
//! the field elsewhere, and the `.sigmf-meta` is written from the field alone.
//!
//! The key `sigmf` of a field's metadata holds `{"global": {...}, "captures": [...],
//! "annotations": [...]}`: the input's `global` without the keys that describe the input
//! file's layout ([`LAYOUT_KEYS`]), its captures and its annotations with `core:sample_start`
//! in the field's own samples (a segment's are rebased by the importer), everything else as
//! written in the input.

use super::json::{Object, Value};

/// The field metadata key holding the imported document.
pub const ORIGIN_KEY: &str = "sigmf";

/// `global` keys describing the input file's layout, which mean nothing for the field's
/// samples: left out when a document is kept, and never taken from a kept one.
pub const LAYOUT_KEYS: [&str; 6] = [
    "core:sha512",
    "core:dataset",
    "core:metadata_only",
    "core:offset",
    "core:trailing_bytes",
    "core:num_channels",
];

/// The key every capture and annotation must have.
pub const SAMPLE_START: &str = "core:sample_start";

/// Why a field's kept document cannot be used (the mount then writes its own and logs this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field metadata \"sigmf\": {0}")]
pub struct OriginError(String);

fn broken(rule: impl Into<String>) -> OriginError {
    OriginError(rule.into())
}

/// A kept document, borrowed from the field's metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin<'a> {
    pub global: &'a Object,
    pub captures: Vec<&'a Object>,
    /// Each annotation with its `core:sample_start`, sorted by it (stably: annotations of the
    /// same start keep their order), as SigMF requires.
    pub annotations: Vec<(u64, &'a Object)>,
}

impl<'a> Origin<'a> {
    /// The document kept in `metadata` (a field's), `None` when it keeps none, or the rule
    /// it breaks: `global` an object, `captures` and `annotations` arrays of objects, each
    /// with a nonnegative integer `core:sample_start`.
    pub fn of_field(metadata: &'a Object) -> Result<Option<Origin<'a>>, OriginError> {
        let Some(value) = metadata.get(ORIGIN_KEY) else {
            return Ok(None);
        };
        let document = value
            .as_object()
            .ok_or_else(|| broken("must be an object"))?;
        let global = match document.get("global") {
            Some(Value::Object(global)) => global,
            _ => return Err(broken("\"global\" must be an object")),
        };
        let captures = objects(document, "captures")?;
        for (index, capture) in captures.iter().enumerate() {
            sample_start(capture).map_err(|rule| broken(format!("capture {index}: {rule}")))?;
        }
        let mut annotations = objects(document, "annotations")?
            .into_iter()
            .enumerate()
            .map(|(index, a)| {
                sample_start(a)
                    .map(|start| (start, a))
                    .map_err(|rule| broken(format!("annotation {index}: {rule}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        annotations.sort_by_key(|(start, _)| *start);
        Ok(Some(Origin {
            global,
            captures,
            annotations,
        }))
    }
}

fn objects<'a>(document: &'a Object, key: &str) -> Result<Vec<&'a Object>, OriginError> {
    let items = match document.get(key) {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(broken(format!("{key:?} must be an array"))),
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            item.as_object()
                .ok_or_else(|| broken(format!("{key:?} item {index} must be an object")))
        })
        .collect()
}

fn sample_start(object: &Object) -> Result<u64, String> {
    object
        .get(SAMPLE_START)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("{SAMPLE_START:?} must be a nonnegative integer"))
}

/// The value a writer keeps under [`ORIGIN_KEY`]: `global` without [`LAYOUT_KEYS`], the
/// captures and annotations as given (already in the field's samples).
pub fn origin_value(global: &Object, captures: Vec<Value>, annotations: Vec<Value>) -> Value {
    let mut kept = global.clone();
    for key in LAYOUT_KEYS {
        kept.remove(key);
    }
    let mut document = Object::new();
    document.insert("annotations".into(), Value::Array(annotations));
    document.insert("captures".into(), Value::Array(captures));
    document.insert("global".into(), Value::Object(kept));
    Value::Object(document)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::json::{parse_object, JsonLimits};

    fn metadata(text: &str) -> Object {
        parse_object(text.as_bytes(), &JsonLimits::CONTROL).unwrap()
    }

    #[test]
    fn annotations_are_sorted_stably_by_start() {
        let m = metadata(
            r#"{"sigmf": {"global": {"core:author": "a"}, "captures": [{"core:sample_start": 0}],
               "annotations": [{"core:sample_start": 9, "n": 0}, {"core:sample_start": 2, "n": 1},
                               {"core:sample_start": 9, "n": 2}]}}"#,
        );
        let origin = Origin::of_field(&m).unwrap().unwrap();
        let order: Vec<(u64, i64)> = origin
            .annotations
            .iter()
            .map(|(s, a)| (*s, a.get("n").and_then(Value::as_i64).unwrap()))
            .collect();
        assert_eq!(order, [(2, 1), (9, 0), (9, 2)]);
        assert_eq!(origin.captures.len(), 1);
        assert_eq!(origin.global.get("core:author"), Some(&Value::from("a")));
    }

    #[test]
    fn broken_documents_name_the_rule() {
        let cases = [
            (r#"{"sigmf": 3}"#, "must be an object"),
            (
                r#"{"sigmf": {"global": []}}"#,
                "\"global\" must be an object",
            ),
            (
                r#"{"sigmf": {"global": {}, "captures": {}}}"#,
                "\"captures\" must be an array",
            ),
            (
                r#"{"sigmf": {"global": {}, "annotations": [1]}}"#,
                "\"annotations\" item 0 must be an object",
            ),
            (
                r#"{"sigmf": {"global": {}, "annotations": [{"core:sample_start": -1}]}}"#,
                "annotation 0: \"core:sample_start\" must be a nonnegative integer",
            ),
            (
                r#"{"sigmf": {"global": {}, "captures": [{"core:sample_start": 1.5}]}}"#,
                "capture 0: \"core:sample_start\" must be a nonnegative integer",
            ),
        ];
        for (text, rule) in cases {
            let m = metadata(text);
            let error = Origin::of_field(&m).unwrap_err().to_string();
            assert!(error.ends_with(rule), "{text}: {error}");
        }
        assert_eq!(Origin::of_field(&metadata("{}")).unwrap(), None);
    }

    #[test]
    fn a_kept_global_has_no_layout_keys() {
        let global = metadata(
            r#"{"core:sha512": "ab", "core:dataset": "x.bin", "core:metadata_only": false,
                "core:offset": 0, "core:trailing_bytes": 0, "core:num_channels": 1,
                "core:author": "me", "core:datatype": "ci16_le"}"#,
        );
        let value = origin_value(&global, Vec::new(), Vec::new());
        let kept = value.as_object().unwrap()["global"].as_object().unwrap();
        let keys: Vec<&str> = kept.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["core:author", "core:datatype"]);
    }
}
