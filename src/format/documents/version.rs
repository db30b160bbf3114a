//! Release numbers and the `min_reader_version` check (docs/FORMAT.md, versions).
//!
//! Parsed as the library's `versions.parse` does: split at `.`, keep each component's leading
//! digits, stop at the first component without any (`0.3.0rc1` is `0.3.0`, `0.3.x.1` is
//! `0.3`); no digits at all is unreadable. Compared component by component with missing
//! components counting as 0 (the library pads to three), so `0.2.0` equals `0.2` and `0.10`
//! is newer than `0.9`. Only ASCII digits count (Python's `isdigit` also takes other scripts'
//! digits; no release uses them).
//! Components are kept as digit strings and compared by value without converting to an integer
//! type, so an absurd component (`0.99999999999999999999999`) is ordered correctly instead of
//! overflowing.

use std::cmp::Ordering;
use std::fmt;

/// A parsed dotted release number.
#[derive(Debug, Clone)]
pub struct ReleaseVersion {
    text: String,
    /// Each component with leading zeros removed (`"0"` becomes `""`), so that comparing
    /// lengths and then bytes compares values.
    components: Vec<String>,
}

impl ReleaseVersion {
    /// Parses leniently as described in the module docs; `None` when the first component has
    /// no leading digit (empty, `v0.2`, ` 0.2`, `.2`).
    pub fn parse(text: &str) -> Option<ReleaseVersion> {
        let mut components = Vec::new();
        for part in text.split('.') {
            let digits = part.len() - part.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 {
                break;
            }
            components.push(part[..digits].trim_start_matches('0').to_string());
        }
        if components.is_empty() {
            return None;
        }
        Some(ReleaseVersion {
            text: text.to_string(),
            components,
        })
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn component(&self, i: usize) -> &str {
        self.components.get(i).map_or("", String::as_str)
    }
}

impl Ord for ReleaseVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        let n = self.components.len().max(other.components.len());
        (0..n)
            .map(|i| {
                let (a, b) = (self.component(i), other.component(i));
                a.len().cmp(&b.len()).then_with(|| a.cmp(b))
            })
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

impl PartialOrd for ReleaseVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Equal by value: `0.2` == `0.2.0` == `00.2`.
impl PartialEq for ReleaseVersion {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ReleaseVersion {}

impl fmt::Display for ReleaseVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why a `min_reader_version` was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum VersionRefusal {
    Unparseable,
    Newer,
}

/// Checks `required` against the reader release `reader`.
pub(crate) fn check_min_reader(required: &str, reader: &str) -> Result<(), VersionRefusal> {
    let required = ReleaseVersion::parse(required).ok_or(VersionRefusal::Unparseable)?;
    // The reader's own version is a crate constant; if it were ever malformed, refusing every
    // dataset that states a requirement is the safe failure.
    let reader = ReleaseVersion::parse(reader).ok_or(VersionRefusal::Newer)?;
    if required > reader {
        return Err(VersionRefusal::Newer);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> ReleaseVersion {
        ReleaseVersion::parse(text).unwrap()
    }

    #[test]
    fn compares_component_wise_with_missing_as_zero() {
        assert_eq!(v("0.2"), v("0.2.0"));
        assert_eq!(v("0.2"), v("00.2.0.0"));
        assert!(v("0.10") > v("0.9"));
        assert!(v("0.2.1") > v("0.2"));
        assert!(v("1") > v("0.99"));
        assert!(v("0.1.9") < v("0.2"));
        assert!(v("0.99999999999999999999999999") > v("0.99999999999999999999999998"));
    }

    #[test]
    fn parses_leading_digits_like_the_library() {
        for bad in ["", ".", ".2", "x.y", "v0.2", " 0.2", "+1", "-1", "٣"] {
            assert!(ReleaseVersion::parse(bad).is_none(), "{bad:?}");
        }
        assert_eq!(v("0.3.0rc1"), v("0.3.0"));
        assert_eq!(v("0.3"), v("0.3.0"));
        assert_eq!(v("0.3.0+local"), v("0.3.0"));
        assert_eq!(v("0.4.x.9"), v("0.4"));
        assert_eq!(v("0,2"), v("0"));
        assert!(v("0.3.0.1") > v("0.3.0"));
        assert_eq!(v("0.2.0").as_str(), "0.2.0");
    }

    #[test]
    fn checks_against_the_reader() {
        assert_eq!(check_min_reader("0.4.0", "0.4.0"), Ok(()));
        assert_eq!(check_min_reader("0.3.0", "0.4.0"), Ok(()));
        assert_eq!(
            check_min_reader("0.4.1", "0.4.0"),
            Err(VersionRefusal::Newer)
        );
        assert_eq!(check_min_reader("0.2", "0.2"), Ok(()));
        assert_eq!(check_min_reader("0.1", "0.2"), Ok(()));
        assert_eq!(check_min_reader("0.2.0", "0.2"), Ok(()));
        assert_eq!(check_min_reader("0.3", "0.2"), Err(VersionRefusal::Newer));
        assert_eq!(check_min_reader("0.2.1", "0.2"), Err(VersionRefusal::Newer));
        assert_eq!(check_min_reader("0.10", "0.2"), Err(VersionRefusal::Newer));
        assert_eq!(
            check_min_reader("x.y", "0.2"),
            Err(VersionRefusal::Unparseable)
        );
    }
}
