//! Identifiers and the paths derived from them (sections 4 and 6).
//!
//! Every path a writer creates is a pure function of ids (work ids and attempts for shards,
//! snapshot ids for pages and snapshots, as the library derives them), so that a repeated
//! publication converges on the same objects. The functions that build paths validate their
//! results and return [`RelPath`]s: a path built from unchecked text could otherwise escape the
//! dataset root or name a different object than intended. Dataset and snapshot ids are any
//! nonempty string (the library's rule); annotation set names and publication ids stay
//! portable identifiers.

use sha2::{Digest, Sha256};

use crate::format::json::{object_to_compact, Object};
use crate::format::path::{PathError, RelPath};

/// Why an id or digest cannot be used to derive a path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{what} {value:?} is not a portable identifier ([A-Za-z0-9][A-Za-z0-9._-]{{0,127}})")]
    NotPortable { what: &'static str, value: String },
    #[error("{what} {value:?} is not a lowercase SHA-256 hex digest")]
    NotDigest { what: &'static str, value: String },
    #[error(transparent)]
    Path(#[from] PathError),
}

/// The largest portable identifier, in bytes.
pub const MAX_PORTABLE_ID_LEN: usize = 128;

/// The path of the one mutable object of a dataset.
pub const CATALOG_PATH: &str = "annotations/catalog.json";

/// `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`: dataset ids, snapshot ids, set names, publication ids.
pub fn is_portable_id(id: &str) -> bool {
    id.len() <= MAX_PORTABLE_ID_LEN && has_portable_chars(id)
}

/// The portable-id character rule without the length bound.
fn has_portable_chars(id: &str) -> bool {
    let mut bytes = id.bytes();
    match bytes.next() {
        Some(first) if first.is_ascii_alphanumeric() => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// True for 64 lowercase hex digits.
pub fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Lowercase SHA-256 hex of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn portable<'a>(what: &'static str, id: &'a str) -> Result<&'a str, IdError> {
    if is_portable_id(id) {
        Ok(id)
    } else {
        Err(IdError::NotPortable {
            what,
            value: id.to_string(),
        })
    }
}

fn digest<'a>(what: &'static str, hex: &'a str) -> Result<&'a str, IdError> {
    if is_sha256_hex(hex) {
        Ok(hex)
    } else {
        Err(IdError::NotDigest {
            what,
            value: hex.to_string(),
        })
    }
}

/// The two-hex-digit fan-out directory of a digest (the digest was checked, so it is ASCII).
fn fan_out(hex: &str) -> &str {
    hex.get(..2).unwrap_or(hex)
}

/// `<snapshot-id>-%08d`: the id of the manifest page counted `index` from 0.
pub fn page_id(snapshot_id: &str, index: u64) -> String {
    format!("{snapshot_id}-{index:08}")
}

/// A snapshot id must be a nonempty string; it is used in paths as given, so it may hold `/`
/// (more segments) but nothing a relative path refuses.
fn snapshot_id_path(snapshot_id: &str, path: String) -> Result<RelPath, IdError> {
    if snapshot_id.is_empty() {
        return Err(IdError::Path(PathError {
            path,
            rule: "snapshot_id is empty",
        }));
    }
    Ok(RelPath::new(path)?)
}

/// `snapshots/<snapshot-id>/snapshot.json`.
pub fn snapshot_path(snapshot_id: &str) -> Result<RelPath, IdError> {
    snapshot_id_path(
        snapshot_id,
        format!("snapshots/{snapshot_id}/snapshot.json"),
    )
}

/// `manifests/<first two hex of sha256(page id)>/<page-id>.json`, page `index` of a
/// publication (`publish`).
pub fn manifest_path(snapshot_id: &str, index: u64) -> Result<RelPath, IdError> {
    let id = page_id(snapshot_id, index);
    let hash = sha256_hex(id.as_bytes());
    snapshot_id_path(
        snapshot_id,
        format!("manifests/{}/{id}.json", fan_out(&hash)),
    )
}

/// `manifests/<first two characters of the snapshot id>/<page-id>.json`, page `index` of a
/// reference view (the library's `publish_reference` fans out by the id itself, not a hash).
pub fn reference_manifest_path(snapshot_id: &str, index: u64) -> Result<RelPath, IdError> {
    let prefix: String = snapshot_id.chars().take(2).collect();
    let id = page_id(snapshot_id, index);
    snapshot_id_path(snapshot_id, format!("manifests/{prefix}/{id}.json"))
}

/// The name both files of a shard pair share: lowercase SHA-256 hex of `"<work_id>:<attempt>"`.
/// Derived from the producer's work, not from content, so a re-run of the same attempt finds
/// its own objects.
pub fn shard_id(work_id: &str, attempt: u64) -> String {
    sha256_hex(format!("{work_id}:{attempt}").as_bytes())
}

/// `objects/data/<h:2>/<h>.arrayrecord` for the shard pair named `shard_id` ([`shard_id`]).
pub fn data_shard_path(shard_id: &str) -> Result<RelPath, IdError> {
    shard_path("data", shard_id)
}

/// `objects/metadata/<h:2>/<h>.arrayrecord` for the shard pair named `shard_id`.
pub fn metadata_shard_path(shard_id: &str) -> Result<RelPath, IdError> {
    shard_path("metadata", shard_id)
}

fn shard_path(kind: &str, hex: &str) -> Result<RelPath, IdError> {
    let hex = digest("shard id", hex)?;
    Ok(RelPath::new(format!(
        "objects/{kind}/{}/{hex}.arrayrecord",
        fan_out(hex)
    ))?)
}

/// `annotations/catalog.json`.
pub fn catalog_path() -> Result<RelPath, IdError> {
    Ok(RelPath::new(CATALOG_PATH)?)
}

/// `annotations/catalogs/<sha256 of the revision bytes>.json`.
pub fn revision_path(sha256_hex: &str) -> Result<RelPath, IdError> {
    let hex = digest("revision digest", sha256_hex)?;
    Ok(RelPath::new(format!("annotations/catalogs/{hex}.json"))?)
}

/// `annotations/sets/<name>/<publication-id>`, the directory of one set publication.
fn set_dir(name: &str, publication_id: &str) -> Result<String, IdError> {
    let name = portable("set name", name)?;
    let publication_id = portable("publication_id", publication_id)?;
    Ok(format!("annotations/sets/{name}/{publication_id}"))
}

/// `annotations/sets/<name>/<publication-id>/root.json`.
pub fn set_root_path(name: &str, publication_id: &str) -> Result<RelPath, IdError> {
    Ok(RelPath::new(format!(
        "{}/root.json",
        set_dir(name, publication_id)?
    ))?)
}

/// `annotations/sets/<name>/<publication-id>/shards/<xx>/<sha256 of logical shard id>.json`,
/// where `xx` is the first two hex digits of that same hash.
pub fn worker_pointer_path(
    name: &str,
    publication_id: &str,
    logical_shard_id: &str,
) -> Result<RelPath, IdError> {
    let hash = sha256_hex(logical_shard_id.as_bytes());
    Ok(RelPath::new(format!(
        "{}/shards/{}/{hash}.json",
        set_dir(name, publication_id)?,
        fan_out(&hash)
    ))?)
}

/// `annotations/sets/<name>/<publication-id>/objects/<xx>/<sha256 of object bytes>.arrayrecord`.
pub fn annotation_object_path(
    name: &str,
    publication_id: &str,
    sha256_hex: &str,
) -> Result<RelPath, IdError> {
    let hex = digest("annotation object digest", sha256_hex)?;
    Ok(RelPath::new(format!(
        "{}/objects/{}/{hex}.arrayrecord",
        set_dir(name, publication_id)?,
        fan_out(hex)
    ))?)
}

/// `shard-%08d`: the logical id of a set's shard counted `index` from 0 in ordinal order.
pub fn logical_shard_id(index: u64) -> String {
    format!("shard-{index:08}")
}

/// The index encoded in a logical shard id, when the id is exactly what [`logical_shard_id`]
/// produces for it (so `shard-1` and `shard-000000001` are refused).
pub fn parse_logical_shard_id(id: &str) -> Option<u64> {
    let digits = id.strip_prefix("shard-")?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index: u64 = digits.parse().ok()?;
    (logical_shard_id(index) == id).then_some(index)
}

/// The first 32 hex digits of SHA-256 of the compact deterministic JSON
/// `{"name": <name>, "source_snapshot_id": <id>}`: the publication id a repeated annotation run
/// converges on.
pub fn default_publication_id(name: &str, source_snapshot_id: &str) -> String {
    let mut key = Object::new();
    key.insert("name".into(), name.into());
    key.insert("source_snapshot_id".into(), source_snapshot_id.into());
    let hash = sha256_hex(object_to_compact(&key).as_bytes());
    hash.get(..32).unwrap_or(&hash).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_ids() {
        for ok in ["a", "A9", "0", "a.b_c-d", &"x".repeat(128)] {
            assert!(is_portable_id(ok), "{ok}");
        }
        for bad in [
            "",
            ".a",
            "-a",
            "_a",
            "a/b",
            "a b",
            "é",
            &"x".repeat(129),
            "a\0",
        ] {
            assert!(!is_portable_id(bad), "{bad}");
        }
    }

    #[test]
    fn logical_ids_round_trip_only_canonically() {
        assert_eq!(logical_shard_id(7), "shard-00000007");
        assert_eq!(logical_shard_id(123_456_789), "shard-123456789");
        assert_eq!(parse_logical_shard_id("shard-00000007"), Some(7));
        assert_eq!(parse_logical_shard_id("shard-123456789"), Some(123_456_789));
        for bad in [
            "shard-7",
            "shard-000000007",
            "shard-+0000007",
            "shard-",
            "x-00000007",
        ] {
            assert_eq!(parse_logical_shard_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn derivations_refuse_bad_inputs() {
        assert!(snapshot_path("..").is_err());
        assert!(snapshot_path("").is_err());
        assert!(snapshot_path("a#b").is_err());
        assert_eq!(
            snapshot_path("my dataset/ü ✓").unwrap().as_str(),
            "snapshots/my dataset/ü ✓/snapshot.json"
        );
        assert!(data_shard_path("ABCD").is_err());
        assert!(data_shard_path(&"A".repeat(64)).is_err());
        assert!(set_root_path("ok", "bad/id").is_err());
        assert_eq!(catalog_path().unwrap().as_str(), CATALOG_PATH);
    }
}
