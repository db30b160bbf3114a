//! Paths a control document names (docs/FORMAT.md, "References").
//!
//! - [`RelPath`], dataset-relative: `/`-separated, never empty or absolute, no empty, `.` or
//!   `..` segment, no backslash, NUL, `#` or `?` (the library refuses the last two as well).
//!   Everything a dataset names is reached through one of these, so a hostile document cannot
//!   address anything outside the dataset root.
//! - [`ObjectPath`], what an object reference's `path` holds: a [`RelPath`], or (reference
//!   views only) an [`AbsolutePath`], the absolute location of another dataset's object.
//!   Absolute means, as the library classifies it, a leading `/` or a full `gs://` / `s3://`
//!   URI; this project also accepts `file://` URLs (the library never writes one). The
//!   classification compares prefixes by hand: `gs:x` or `a:b/c` are ordinary relative paths.

use std::fmt;

/// A validated dataset-relative path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath(String);

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid relative path {path:?}: {rule}")]
pub struct PathError {
    pub path: String,
    pub rule: &'static str,
}

impl RelPath {
    /// Validates `path` against the reference path rules.
    pub fn new(path: impl Into<String>) -> Result<RelPath, PathError> {
        let path = path.into();
        let refuse = |rule| {
            Err(PathError {
                path: path.clone(),
                rule,
            })
        };
        if path.is_empty() {
            return refuse("path is empty");
        }
        if path.starts_with('/') {
            return refuse("path is absolute");
        }
        if path.contains('\\') {
            return refuse("path contains a backslash");
        }
        if path.contains('\0') {
            return refuse("path contains NUL");
        }
        if path.contains('#') || path.contains('?') {
            return refuse("path contains '#' or '?'");
        }
        for segment in path.split('/') {
            match segment {
                "" => return refuse("path has an empty segment"),
                "." | ".." => return refuse("path has a '.' or '..' segment"),
                _ => {}
            }
        }
        Ok(RelPath(path))
    }

    /// A reference's relative path read as the library reads one (its `safe_relative_path`,
    /// Python's `PurePosixPath`): empty and `.` segments are dropped (`a//b/./c` is `a/b/c`),
    /// then the rules of [`RelPath::new`] apply (so `..`, a backslash, NUL, `#` and `?` are
    /// still refused). Writers never produce such paths; readers accept what the library reads.
    pub fn normalized(path: &str) -> Result<RelPath, PathError> {
        if path.is_empty() || path.starts_with('/') {
            return RelPath::new(path);
        }
        let kept: Vec<&str> = path
            .split('/')
            .filter(|segment| !segment.is_empty() && *segment != ".")
            .collect();
        if kept.is_empty() {
            return Err(PathError {
                path: path.to_string(),
                rule: "path names no object (only empty and '.' segments)",
            });
        }
        RelPath::new(kept.join("/")).map_err(|e| PathError {
            path: path.to_string(),
            rule: e.rule,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path's `/`-separated segments, each nonempty and neither `.` nor `..`.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// This path with `child` (itself validated) appended.
    pub fn join(&self, child: &str) -> Result<RelPath, PathError> {
        RelPath::new(format!("{}/{}", self.0, child))
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for RelPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// The `path` of an object reference: relative to the dataset root, or an absolute location.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectPath {
    Relative(RelPath),
    Absolute(AbsolutePath),
}

/// The absolute location of one object as a document writes it: `/abs/path`,
/// `file:///abs/path`, `gs://bucket/key` or `s3://bucket/key`. Text whose shape only is checked
/// here (the counterpart of [`RelPath`]); not a store: when it is followed, the storage layer
/// splits it into the `storage::Location` of a store and the object's key in it
/// (`Location::parse_object`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AbsolutePath(String);

impl AbsolutePath {
    /// `text` when it is absolute in the sense of [`ObjectPath`], else `None`.
    pub fn new(text: &str) -> Option<AbsolutePath> {
        is_absolute(text).then(|| AbsolutePath(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The location's parent (everything before the last `/`) and final name, `None` when it
    /// has no name to split off (`/`, `gs://bucket`).
    pub fn split_name(&self) -> Option<(&str, &str)> {
        let (parent, name) = self.0.rsplit_once('/')?;
        let after_scheme = split_scheme(&self.0).map_or(0, |(s, _)| s.len() + 3);
        if name.is_empty() || parent.len() < after_scheme {
            return None;
        }
        Some((parent, name))
    }
}

impl fmt::Display for AbsolutePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The scheme of a location (before `://`, as written) and the rest; `None` for a path
/// without one. The one place a scheme is split off, for document references here and for
/// store locations in `storage`.
pub fn split_scheme(text: &str) -> Option<(&str, &str)> {
    text.split_once("://")
}

/// Whether `text` names an absolute location (leading `/`, or `file://`, `gs://`, `s3://`).
pub fn is_absolute(text: &str) -> bool {
    if text.starts_with('/') {
        return true;
    }
    match split_scheme(text) {
        Some((scheme, _)) => matches!(scheme, "gs" | "s3" | "file"),
        None => false,
    }
}

impl ObjectPath {
    /// Classifies and checks `text`: absolute when [`is_absolute`], else a valid [`RelPath`].
    pub fn new(text: &str) -> Result<ObjectPath, PathError> {
        match AbsolutePath::new(text) {
            Some(location) => Ok(ObjectPath::Absolute(location)),
            None => RelPath::normalized(text).map(ObjectPath::Relative),
        }
    }

    /// The path as written in the document.
    pub fn as_str(&self) -> &str {
        match self {
            ObjectPath::Relative(path) => path.as_str(),
            ObjectPath::Absolute(location) => location.as_str(),
        }
    }

    /// The relative path, `None` for an absolute location.
    pub fn relative(&self) -> Option<&RelPath> {
        match self {
            ObjectPath::Relative(path) => Some(path),
            ObjectPath::Absolute(_) => None,
        }
    }
}

impl From<RelPath> for ObjectPath {
    fn from(path: RelPath) -> ObjectPath {
        ObjectPath::Relative(path)
    }
}

impl fmt::Display for ObjectPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_paths() {
        for ok in [
            "root.json",
            "objects/data/ab/abcd.arrayrecord",
            "a/.b/c..d/...",
            "x y/z",
        ] {
            assert_eq!(RelPath::new(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn refuses_each_rule() {
        let cases = [
            ("", "empty"),
            ("/etc/passwd", "absolute"),
            ("a\\b", "backslash"),
            ("a\0b", "NUL"),
            ("a//b", "empty segment"),
            ("a/", "empty segment"),
            ("./a", "'.'"),
            ("a/../b", "'..'"),
            ("..", "'..'"),
            ("a#b", "'#'"),
            ("a?b", "'?'"),
        ];
        for (bad, rule) in cases {
            let err = RelPath::new(bad).unwrap_err();
            assert!(err.rule.contains(rule), "{bad:?}: {}", err.rule);
        }
    }

    #[test]
    fn classifies_object_paths_like_the_library() {
        for absolute in ["/data/x.arrayrecord", "gs://b/k", "s3://b/k", "file:///d/x"] {
            assert!(
                matches!(ObjectPath::new(absolute), Ok(ObjectPath::Absolute(_))),
                "{absolute}"
            );
        }
        for relative in ["gs:x", "a:b/c", "objects/data/ab/c.arrayrecord"] {
            assert!(
                matches!(ObjectPath::new(relative), Ok(ObjectPath::Relative(_))),
                "{relative}"
            );
        }
        // Not a registered scheme: a relative path, normalized as the library does.
        assert_eq!(
            ObjectPath::new("http://x/y")
                .unwrap()
                .relative()
                .map(RelPath::as_str),
            Some("http:/x/y")
        );
    }

    #[test]
    fn relative_references_are_normalized_as_the_library_reads_them() {
        for (written, read) in [
            ("a//b", "a/b"),
            ("./a/./b/", "a/b"),
            ("manifests//ea/p.json", "manifests/ea/p.json"),
        ] {
            assert_eq!(RelPath::normalized(written).unwrap().as_str(), read);
        }
        for refused in ["", ".", "./", "a/../b", "..", "a\\b", "a#b", "a?b", "a\0b"] {
            assert!(RelPath::normalized(refused).is_err(), "{refused:?}");
        }
        let location = AbsolutePath::new("gs://b/p/objects/x.arrayrecord").unwrap();
        assert_eq!(
            location.split_name(),
            Some(("gs://b/p/objects", "x.arrayrecord"))
        );
        assert_eq!(AbsolutePath::new("gs://b").unwrap().split_name(), None);
        assert_eq!(
            AbsolutePath::new("/x").unwrap().split_name(),
            Some(("", "x"))
        );
    }
}
