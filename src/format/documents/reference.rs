//! Object references (docs/FORMAT.md, control graph): `{"path", "stored_bytes"}` plus an
//! optional `generation`.
//!
//! Two types for the one shape: [`Reference`] holds a dataset-relative path and is what root
//! documents (the snapshot reference: the library joins it to the root, so an absolute one is
//! refused) and annotation documents carry; [`ObjectRef`] holds an [`ObjectPath`], relative or
//! absolute, and is what manifest references and shard entries carry (reference views point
//! at another dataset's shards by absolute location).
//!
//! The same shape appears under two key policies: inside roots, snapshots and manifests unknown
//! keys are ignored; inside annotation revisions and set roots the keys are exact. The policy is
//! a parameter rather than two types because the value is the same thing either way.
//!
//! `generation: null` is read as "no generation": the key is optional, and a `null` written by
//! some other writer carries no generation to honour. Writers never emit the key for `None`.

use super::{as_object, RuleResult};
use crate::format::json::{Object, ObjectExt, Value};
use crate::format::path::{ObjectPath, RelPath};

/// Whether a parser tolerates keys it does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keys {
    /// Roots, snapshots, manifests: compatible additions are ignored.
    IgnoreUnknown,
    /// Annotation documents: every key must be one the document defines.
    Exact,
}

impl Keys {
    pub(crate) fn check(self, object: &Object, allowed: &[&str]) -> RuleResult<()> {
        match self {
            Keys::IgnoreUnknown => Ok(()),
            Keys::Exact => Ok(object.only_keys(allowed)?),
        }
    }
}

/// A reference to an object below the dataset root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// Dataset-root-relative path of the object.
    pub path: RelPath,
    /// The object's size in bytes, compared with storage when the object is first opened.
    pub stored_bytes: u64,
    /// The object generation a reader must read (section 7); new writes never set it.
    pub generation: Option<u64>,
}

impl Reference {
    /// A reference as writers create it: no generation.
    pub fn new(path: RelPath, stored_bytes: u64) -> Reference {
        Reference {
            path,
            stored_bytes,
            generation: None,
        }
    }

    pub(crate) fn from_value(value: &Value, keys: Keys) -> RuleResult<Reference> {
        let object = as_object(value, "a reference")?;
        keys.check(object, &["path", "stored_bytes", "generation"])?;
        Ok(Reference {
            path: read_path(object, "path")?,
            stored_bytes: object.req_u64("stored_bytes")?,
            generation: object.opt_u64("generation")?,
        })
    }

    pub(crate) fn to_value(&self) -> Value {
        reference_value(self.path.as_str(), self.stored_bytes, self.generation)
    }
}

/// A reference whose path may be absolute (manifest references and shard entries).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    pub path: ObjectPath,
    /// The object's size in bytes, compared with storage when the object is first opened
    /// (relative paths only, as the library does).
    pub stored_bytes: u64,
    /// The object generation a reader must read (GCS only); new writes never set it.
    pub generation: Option<u64>,
}

impl ObjectRef {
    /// A reference as writers create it: no generation.
    pub fn new(path: impl Into<ObjectPath>, stored_bytes: u64) -> ObjectRef {
        ObjectRef {
            path: path.into(),
            stored_bytes,
            generation: None,
        }
    }

    /// Unknown keys are ignored (control graph policy).
    pub(crate) fn from_value(value: &Value) -> RuleResult<ObjectRef> {
        let object = as_object(value, "a reference")?;
        let text = object.req_str("path")?;
        let path = ObjectPath::new(text).map_err(|e| super::Rule::new(format!("path: {e}")))?;
        Ok(ObjectRef {
            path,
            stored_bytes: object.req_u64("stored_bytes")?,
            generation: object.opt_u64("generation")?,
        })
    }

    pub(crate) fn to_value(&self) -> Value {
        reference_value(self.path.as_str(), self.stored_bytes, self.generation)
    }
}

/// Reads the [`ObjectRef`] at `key` of `object`, locating errors as `key: ...`.
pub(crate) fn read_object_ref(object: &Object, key: &str) -> RuleResult<ObjectRef> {
    ObjectRef::from_value(object.required(key)?).map_err(|r| r.at(key))
}

/// The JSON of a reference: `generation` only when there is one (writers never set it).
fn reference_value(path: &str, stored_bytes: u64, generation: Option<u64>) -> Value {
    let mut object = Object::new();
    object.insert("path".into(), path.into());
    object.insert("stored_bytes".into(), stored_bytes.into());
    if let Some(generation) = generation {
        object.insert("generation".into(), generation.into());
    }
    Value::Object(object)
}

/// A required key holding a valid dataset-relative path.
pub(crate) fn read_path(object: &Object, key: &str) -> RuleResult<RelPath> {
    let text = object.req_str(key)?;
    RelPath::new(text).map_err(|e| super::Rule::new(format!("{key}: {e}")))
}

/// Reads the reference at `key` of `object`, locating errors as `key: ...`.
pub(crate) fn read_reference(object: &Object, key: &str, keys: Keys) -> RuleResult<Reference> {
    Reference::from_value(object.required(key)?, keys).map_err(|r| r.at(key))
}
