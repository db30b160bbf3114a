//! Field names and ids as path names (`docs/MOUNT.md`, "Field names as paths").
//!
//! Field names are arbitrary strings, but a file name cannot be empty, `.` or `..`, cannot hold
//! `/` or NUL, and is limited to 255 bytes. A field name is split on `/` into segments and each
//! segment is encoded so that:
//! - every name maps to a legal path, and the mapping is reversible for names that fit;
//! - names without `%`, NUL, empty/`.`/`..` segments, view-suffixed directory segments or
//!   excessive length appear unchanged (the common case reads naturally);
//! - no two fields, views or directories of a record ever share a path: `%` is always escaped,
//!   so `%` alone, `%2E` and the `%~` long-name marker cannot arise from a real name; directory
//!   segments never end in a view suffix, so the directory of `x.raw/y` never meets `x.raw`.
//!
//! Over-long segments keep a 200-byte prefix and a SHA-256 tag (`%~` + 16 hex digits); their
//! full name is in the field's `.json`.

use sha2::{Digest, Sha256};

/// The view suffixes a field's files carry; a directory segment must never end in one.
pub const VIEW_SUFFIXES: [&str; 6] = [
    ".raw",
    ".json",
    ".npy",
    ".sigmf-data",
    ".sigmf-meta",
    ".spectrogram.png",
];

/// Longest encoded directory segment (a file name limit).
pub const MAX_DIR_SEGMENT: usize = 255;
/// Longest encoded leaf segment: 255 minus the longest view suffix (`.spectrogram.png`, 16
/// bytes).
pub const MAX_LEAF_SEGMENT: usize = 239;
/// Bytes of an over-long segment kept before the `%~` hash tag.
const LONG_PREFIX: usize = 200;

/// Where a segment sits in a field name: directories get the view-suffix escape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentRole {
    Directory,
    Leaf,
    /// A `by-id/` or `by-scene/` entry: steps 1, 2 and 4 with the 255-byte limit.
    Entry,
}

/// Encodes one segment per steps 1-4 of the rule.
pub fn encode_segment(segment: &str, role: SegmentRole) -> String {
    let mut encoded = escape_percent_and_nul(segment);
    if role == SegmentRole::Entry {
        encoded = encoded.replace('/', "%2F");
    }
    encoded = match segment {
        "" => "%".to_string(),
        "." => "%2E".to_string(),
        ".." => "%2E%2E".to_string(),
        _ => encoded,
    };
    if role == SegmentRole::Directory {
        encoded = escape_view_suffix(encoded);
    }
    let limit = match role {
        SegmentRole::Leaf => MAX_LEAF_SEGMENT,
        SegmentRole::Directory | SegmentRole::Entry => MAX_DIR_SEGMENT,
    };
    if encoded.len() > limit {
        encoded = shorten(&encoded, segment);
    }
    encoded
}

/// Encodes a record or scene id as one `by-id/`/`by-scene/` entry name (its `/` becomes `%2F`).
pub fn encode_entry(id: &str) -> String {
    encode_segment(id, SegmentRole::Entry)
}

/// Splits a field name into its encoded path segments: directories, then the leaf.
pub fn encode_field_path(name: &str) -> Vec<String> {
    let segments: Vec<&str> = name.split('/').collect();
    let last = segments.len() - 1;
    segments
        .iter()
        .enumerate()
        .map(|(i, segment)| {
            let role = if i == last {
                SegmentRole::Leaf
            } else {
                SegmentRole::Directory
            };
            encode_segment(segment, role)
        })
        .collect()
}

/// Reverses steps 1-3 for one encoded segment; `None` for a shortened (`%~`) or malformed one.
pub fn decode_segment(encoded: &str) -> Option<String> {
    if encoded == "%" {
        return Some(String::new());
    }
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let hex = encoded.get(i + 1..i + 3)?;
        out.push(u8::from_str_radix(hex, 16).ok()?);
        i += 3;
    }
    String::from_utf8(out).ok()
}

fn escape_percent_and_nul(segment: &str) -> String {
    segment.replace('%', "%25").replace('\0', "%00")
}

fn escape_view_suffix(encoded: String) -> String {
    match VIEW_SUFFIXES.iter().find(|s| encoded.ends_with(*s)) {
        Some(suffix) => {
            let dot = encoded.len() - suffix.len();
            format!("{}%2E{}", &encoded[..dot], &suffix[1..])
        }
        None => encoded,
    }
}

/// Keeps the first [`LONG_PREFIX`] encoded bytes, cut where no escape or UTF-8 sequence is split,
/// then `%~` and 16 hex digits of SHA-256 of the original segment.
fn shorten(encoded: &str, original: &str) -> String {
    let mut cut = LONG_PREFIX.min(encoded.len());
    while !encoded.is_char_boundary(cut) || splits_escape(encoded, cut) {
        cut -= 1;
    }
    let digest = Sha256::digest(original.as_bytes());
    format!("{}%~{}", &encoded[..cut], &hex::encode(digest)[..16])
}

/// True when cutting at `cut` would separate a `%XX` escape from its digits.
fn splits_escape(encoded: &str, cut: usize) -> bool {
    let bytes = encoded.as_bytes();
    (cut >= 1 && bytes.get(cut - 1) == Some(&b'%'))
        || (cut >= 2 && bytes.get(cut - 2) == Some(&b'%'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(name: &str) -> String {
        encode_field_path(name).join("/")
    }

    #[test]
    fn ordinary_names_are_unchanged() {
        for name in [
            "projections/communications_rx/receivers/rx0/iq",
            "a.b",
            "x.raw",
            "héllo wörld",
            "...",
        ] {
            assert_eq!(path(name), name);
        }
    }

    #[test]
    fn each_step_of_the_rule() {
        assert_eq!(path("100%"), "100%25");
        assert_eq!(path("a\0b"), "a%00b");
        assert_eq!(path("/a//b/"), "%/a/%/b/%");
        assert_eq!(path("./../x"), "%2E/%2E%2E/x");
        assert_eq!(path("x.raw/y"), "x%2Eraw/y");
        assert_eq!(path("d.sigmf-meta/e.json"), "d%2Esigmf-meta/e.json");
        assert_eq!(path("d.npyz/e"), "d.npyz/e");
        assert_eq!(encode_entry("a/b%c"), "a%2Fb%25c");
        assert_eq!(encode_entry(""), "%");
        assert_eq!(encode_entry(".."), "%2E%2E");
    }

    #[test]
    fn long_segments_are_shortened_with_a_hash() {
        let leaf = "é".repeat(130); // 260 bytes
        let encoded = encode_segment(&leaf, SegmentRole::Leaf);
        let digest = hex::encode(Sha256::digest(leaf.as_bytes()));
        assert_eq!(encoded, format!("{}%~{}", "é".repeat(100), &digest[..16]));
        // 239 bytes fit as a leaf; 240 do not. 255 fit as a directory.
        assert_eq!(
            encode_segment(&"a".repeat(239), SegmentRole::Leaf).len(),
            239
        );
        assert!(encode_segment(&"a".repeat(240), SegmentRole::Leaf).contains("%~"));
        assert_eq!(
            encode_segment(&"a".repeat(255), SegmentRole::Directory).len(),
            255
        );
        assert!(encode_segment(&"a".repeat(256), SegmentRole::Directory).contains("%~"));
        // A cut never splits an escape.
        let tricky = format!("{}%{}", "a".repeat(199), "b".repeat(100));
        let encoded = encode_segment(&tricky, SegmentRole::Leaf);
        assert!(
            encoded.starts_with(&format!("{}%~", "a".repeat(199))),
            "{encoded}"
        );
    }

    #[test]
    fn decoding_reverses_escapes() {
        for segment in ["", ".", "..", "100%", "a\0b", "plain", "é%"] {
            let encoded = encode_segment(segment, SegmentRole::Leaf);
            assert_eq!(
                decode_segment(&encoded).as_deref(),
                Some(segment),
                "{encoded}"
            );
        }
        assert_eq!(decode_segment("x%2Eraw").as_deref(), Some("x.raw"));
        assert_eq!(decode_segment("bad%zz"), None);
    }

    #[test]
    fn directories_never_meet_views() {
        for suffix in VIEW_SUFFIXES {
            let dir = encode_segment(&format!("x{suffix}"), SegmentRole::Directory);
            assert!(VIEW_SUFFIXES.iter().all(|s| !dir.ends_with(s)), "{dir}");
        }
    }
}
