//! Dataset-relative paths (profile section 4, "References"): `/`-separated, never empty or
//! absolute, no empty, `.` or `..` segment, no backslash, no NUL. Every object a dataset names is
//! reached through one of these, so a hostile document can never address anything outside the
//! dataset root.

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
        for segment in path.split('/') {
            match segment {
                "" => return refuse("path has an empty segment"),
                "." | ".." => return refuse("path has a '.' or '..' segment"),
                _ => {}
            }
        }
        Ok(RelPath(path))
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
        ];
        for (bad, rule) in cases {
            let err = RelPath::new(bad).unwrap_err();
            assert!(err.rule.contains(rule), "{bad:?}: {}", err.rule);
        }
    }
}
