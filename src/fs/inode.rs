//! Inode numbers, computed rather than allocated.
//!
//! Why: the tree of a million-record dataset has tens of millions of nodes. Allocating inode
//! numbers on lookup would cost memory that grows with everything ever listed, and numbers would
//! have to be remembered to stay stable. Instead every node's number is a pure function of where
//! it is: the top four bits say what kind of node it is, the rest carry the ordinal and the
//! node's index within its record. Numbers are therefore stable for the life of the mount (and
//! across remounts of the same snapshot) at zero memory cost, and decoding an inode tells the
//! filesystem exactly which metadata row it needs.
//!
//! Layout: `kind:4 | payload:60`. Record nodes use `ordinal:36 | local:24`, so up to 2^36
//! records of up to 2^24 nodes each.
//!
//! Annotation sets are named, not positioned, and the catalog changes while mounted, so a set's
//! number is its index in a mount-lifetime, append-only registry of set names (at most 256:
//! `set:8`). `annotations/<set>/` and its `set.json` are kind 5 (`set << 1 | file`); the
//! per-record overlay `records/<n>/annotations/<set>/...` is kind 6, `ordinal:36 | set:8 |
//! node:16` (node 0 the set directory, 1 `annotation.json`, 2 + k node k of the carrier's field
//! tree, whose node 0 is `fields/`).
//!
//! `columns/` is one tree for the whole mount, built once: kind 7, its node index (node 0 is
//! `columns/` itself).
//! The SigMF collections are kind 8, `index << 1 | scene`: `records/<n>/record.sigmf-collection`
//! by ordinal, `by-scene/<scene>/scene.sigmf-collection` by scene index.
//! A record's `preview.png` is kind 9, its ordinal.

/// Kind 15 is the adapter's own (the status reports of [`super::status_file`]): the tree never
/// hands it out, and [`Ino::decode`] refuses it.
pub const ADAPTER_INODES: u64 = 15 << KIND_SHIFT;

/// Largest ordinal a record inode can carry.
pub const MAX_ORDINAL: u64 = (1 << 36) - 1;
/// Largest node index within one record.
pub const MAX_LOCAL: u64 = (1 << 24) - 1;
/// First field-tree node's local index (0: record dir, 1: record.json, 2: annotations/).
pub const FIELD_NODE_BASE: u64 = 3;

const KIND_SHIFT: u32 = 60;
const PAYLOAD_MASK: u64 = (1 << KIND_SHIFT) - 1;

const KIND_STATIC: u64 = 0;
const KIND_RECORD: u64 = 1;
const KIND_ID_LINK: u64 = 2;
const KIND_SCENE_DIR: u64 = 3;
const KIND_SCENE_LINK: u64 = 4;
const KIND_SET: u64 = 5;
const KIND_RECORD_SET: u64 = 6;
const KIND_COLUMN: u64 = 7;
const KIND_COLLECTION: u64 = 8;
const KIND_PREVIEW: u64 = 9;

/// Largest node index of a carrier's field tree.
pub const MAX_CARRIER_NODE: u32 = (1 << 16) - 3;

/// What an inode number denotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ino {
    Root,
    DatasetJson,
    SnapshotJson,
    Records,
    Annotations,
    ById,
    ByScene,
    /// `records/<ordinal>/`.
    RecordDir(u64),
    /// `records/<ordinal>/record.json`.
    RecordJson(u64),
    /// `records/<ordinal>/annotations/`.
    RecordAnnotations(u64),
    /// A node of the record's field tree; node 0 is `fields/` itself.
    FieldNode(u64, u32),
    /// `by-id/<id>`, pointing at this ordinal.
    IdLink(u64),
    /// `by-scene/<scene>/`, by index in the scene index.
    SceneDir(u64),
    /// `by-scene/<scene>/<ordinal>`.
    SceneLink(u64),
    /// `annotations/<set>/`, by registry index.
    SetDir(u8),
    /// `annotations/<set>/set.json`.
    SetJson(u8),
    /// `records/<ordinal>/annotations/<set>/`.
    RecordSetDir(u64, u8),
    /// `records/<ordinal>/annotations/<set>/annotation.json`.
    RecordSetJson(u64, u8),
    /// A node of the carrier's field tree; node 0 is `fields/` itself.
    RecordSetField(u64, u8, u32),
    /// A node of `columns/`; node 0 is `columns/` itself.
    Column(u32),
    /// `records/<ordinal>/record.sigmf-collection`.
    RecordCollection(u64),
    /// `by-scene/<scene>/scene.sigmf-collection`, by index in the scene index.
    SceneCollection(u64),
    /// `records/<ordinal>/preview.png`.
    RecordPreview(u64),
}

impl Ino {
    /// The inode number.
    pub fn encode(self) -> u64 {
        match self {
            Ino::Root => 1,
            Ino::DatasetJson => 2,
            Ino::SnapshotJson => 3,
            Ino::Records => 4,
            Ino::Annotations => 5,
            Ino::ById => 6,
            Ino::ByScene => 7,
            Ino::RecordDir(o) => record(o, 0),
            Ino::RecordJson(o) => record(o, 1),
            Ino::RecordAnnotations(o) => record(o, 2),
            Ino::FieldNode(o, node) => record(o, FIELD_NODE_BASE + u64::from(node)),
            Ino::IdLink(o) => (KIND_ID_LINK << KIND_SHIFT) | o,
            Ino::SceneDir(i) => (KIND_SCENE_DIR << KIND_SHIFT) | i,
            Ino::SceneLink(o) => (KIND_SCENE_LINK << KIND_SHIFT) | o,
            Ino::SetDir(i) => (KIND_SET << KIND_SHIFT) | (u64::from(i) << 1),
            Ino::SetJson(i) => (KIND_SET << KIND_SHIFT) | (u64::from(i) << 1) | 1,
            Ino::RecordSetDir(o, i) => record_set(o, i, 0),
            Ino::RecordSetJson(o, i) => record_set(o, i, 1),
            Ino::RecordSetField(o, i, n) => {
                record_set(o, i, 2 + u64::from(n.min(MAX_CARRIER_NODE)))
            }
            Ino::Column(n) => (KIND_COLUMN << KIND_SHIFT) | u64::from(n),
            Ino::RecordCollection(o) => (KIND_COLLECTION << KIND_SHIFT) | ((o & MAX_ORDINAL) << 1),
            Ino::SceneCollection(i) => {
                (KIND_COLLECTION << KIND_SHIFT) | ((i & (PAYLOAD_MASK >> 1)) << 1) | 1
            }
            Ino::RecordPreview(o) => (KIND_PREVIEW << KIND_SHIFT) | (o & MAX_ORDINAL),
        }
    }

    /// What `ino` denotes, or `None` for a number this filesystem never hands out.
    pub fn decode(ino: u64) -> Option<Ino> {
        let payload = ino & PAYLOAD_MASK;
        match ino >> KIND_SHIFT {
            KIND_STATIC => match ino {
                1 => Some(Ino::Root),
                2 => Some(Ino::DatasetJson),
                3 => Some(Ino::SnapshotJson),
                4 => Some(Ino::Records),
                5 => Some(Ino::Annotations),
                6 => Some(Ino::ById),
                7 => Some(Ino::ByScene),
                _ => None,
            },
            KIND_RECORD => {
                let ordinal = payload >> 24;
                match payload & MAX_LOCAL {
                    0 => Some(Ino::RecordDir(ordinal)),
                    1 => Some(Ino::RecordJson(ordinal)),
                    2 => Some(Ino::RecordAnnotations(ordinal)),
                    local => Some(Ino::FieldNode(ordinal, (local - FIELD_NODE_BASE) as u32)),
                }
            }
            KIND_ID_LINK => Some(Ino::IdLink(payload)),
            KIND_SCENE_DIR => Some(Ino::SceneDir(payload)),
            KIND_SCENE_LINK => Some(Ino::SceneLink(payload)),
            KIND_SET if payload >> 9 == 0 => {
                let index = (payload >> 1) as u8;
                Some(if payload & 1 == 0 {
                    Ino::SetDir(index)
                } else {
                    Ino::SetJson(index)
                })
            }
            KIND_RECORD_SET => {
                let ordinal = payload >> 24;
                let set = ((payload >> 16) & 0xff) as u8;
                match payload & 0xffff {
                    0 => Some(Ino::RecordSetDir(ordinal, set)),
                    1 => Some(Ino::RecordSetJson(ordinal, set)),
                    node => Some(Ino::RecordSetField(ordinal, set, (node - 2) as u32)),
                }
            }
            KIND_COLUMN => u32::try_from(payload).ok().map(Ino::Column),
            KIND_COLLECTION if payload & 1 == 0 => Some(Ino::RecordCollection(payload >> 1)),
            KIND_COLLECTION => Some(Ino::SceneCollection(payload >> 1)),
            KIND_PREVIEW if payload <= MAX_ORDINAL => Some(Ino::RecordPreview(payload)),
            _ => None,
        }
    }
}

fn record_set(ordinal: u64, set: u8, node: u64) -> u64 {
    (KIND_RECORD_SET << KIND_SHIFT)
        | ((ordinal & MAX_ORDINAL) << 24)
        | (u64::from(set) << 16)
        | node
}

fn record(ordinal: u64, local: u64) -> u64 {
    (KIND_RECORD << KIND_SHIFT) | ((ordinal & MAX_ORDINAL) << 24) | (local & MAX_LOCAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_and_numbers_are_distinct() {
        let samples = [
            Ino::Root,
            Ino::DatasetJson,
            Ino::SnapshotJson,
            Ino::Records,
            Ino::Annotations,
            Ino::ById,
            Ino::ByScene,
            Ino::RecordDir(0),
            Ino::RecordDir(MAX_ORDINAL),
            Ino::RecordJson(7),
            Ino::RecordAnnotations(7),
            Ino::FieldNode(7, 0),
            Ino::FieldNode(MAX_ORDINAL, (MAX_LOCAL - FIELD_NODE_BASE) as u32),
            Ino::IdLink(0),
            Ino::IdLink(42),
            Ino::SceneDir(3),
            Ino::SceneLink(42),
            Ino::SetDir(0),
            Ino::SetJson(0),
            Ino::SetDir(255),
            Ino::SetJson(255),
            Ino::RecordSetDir(7, 0),
            Ino::RecordSetJson(7, 0),
            Ino::RecordSetField(7, 0, 0),
            Ino::RecordSetDir(MAX_ORDINAL, 255),
            Ino::RecordSetField(MAX_ORDINAL, 255, MAX_CARRIER_NODE),
            Ino::Column(0),
            Ino::Column(u32::MAX),
            Ino::RecordCollection(0),
            Ino::RecordCollection(MAX_ORDINAL),
            Ino::SceneCollection(0),
            Ino::SceneCollection(3),
            Ino::RecordPreview(0),
            Ino::RecordPreview(MAX_ORDINAL),
        ];
        let mut seen = std::collections::HashSet::new();
        for ino in samples {
            let n = ino.encode();
            assert_ne!(n, 0);
            assert!(seen.insert(n), "{ino:?} collides");
            assert_eq!(Ino::decode(n), Some(ino));
        }
        assert_eq!(Ino::decode(0), None);
        assert_eq!(Ino::decode(8), None);
        assert_eq!(Ino::decode(15 << 60), None);
        assert_eq!(Ino::decode((9 << 60) | (MAX_ORDINAL + 1)), None);
    }
}
