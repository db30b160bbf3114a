//! The mounted tree as a FUSE-free core: lookups, attributes, listings, links and reads over an
//! open [`Dataset`], in terms of computed inode numbers ([`Ino`]).
//!
//! What each operation costs (the promises of `docs/MOUNT.md`):
//! - the top level and `records/` come from the snapshot alone: listing `records/` reads
//!   nothing, and `records/<n>/` exists for every ordinal without a read;
//! - anything inside a record needs its metadata row (one small chunk read, then cached in an
//!   LRU of record trees, [`TreeCache`], which the decode-ahead worker fills too);
//! - only reading `.raw`, `.npy` or `.sigmf-data`, a `.sigmf-meta` whose record has label
//!   boxes for it, or a `.sigmf-collection` (which hashes the `.sigmf-meta`s) touches the data
//!   shard, once per record while it stays in the decoded-record cache; so do the pictures
//!   (`.spectrogram.png`, `preview.png`), whose sizes are fixed by their dimensions; every
//!   computed file (pictures, SigMF metas and collections) is charged to the memory budget at
//!   its exact size before it is rendered and kept while it is read ([`ComputedCache`]), so
//!   that reading one in small pieces, or several readers at once, renders it once;
//! - `by-id/` and `by-scene/` need every row, so they are built on first use, in the
//!   background and within the memory budget, and kept ([`super::row_index`]).
//!
//! - `columns/` needs every row, so its index is built like `by-id/`; its sizes come from
//!   that index, and a read of a column decodes the records the read covers
//!   ([`super::columns`]);
//! - annotation sets come from the catalog, re-read at most once per metadata TTL (see
//!   [`super::overlay`]); a record's annotation files need that set's carrier for the record.
//!
//! Errors are [`FsError`]s; the FUSE adapter maps them to errno values and logs the cause.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::background::Background;
use super::cache::{
    CacheConfig, CachedTree, DecodeAhead, RecordBytes, RecordCache, TreeCache, Window,
};
use super::columns::arrow::{Layout, Part};
use super::columns::labels::{
    table_rows, write_lines, BatchColumns, Group, GroupRows, LabelIndex, OwnedHead, TableRow,
};
use super::columns::{self, ColumnIndex, ColumnView, RecordColumns};
use super::computed::{self as computed, ComputedCache};
pub use super::error::FsError;
use super::inode::{Ino, MAX_ORDINAL};
use super::overlay::{Carrier, Overlay, Visible, VisibleSet};
use super::record_tree::{child_named, Node, RecordTree};
use super::row_index::{Indexes, RowIndexes};
use super::spill::OWN_FILE_MIN_BYTES;
use super::views::picture::{self, IqAxes};
use super::views::sigmf::{self, BoxPlan, BoxTensors, Provenance, Stream};
use super::views::View;
use crate::dataset::Dataset;
use crate::format::labels::{Annotation, BoxRow};
use crate::interrupt;

/// The kind of a node, as `stat` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
}

/// What `stat` needs from the core; owner, mode and times are the adapter's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    pub size: u64,
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    pub kind: Kind,
    pub name: String,
}

/// Tuning of the core.
#[derive(Debug, Clone, Copy)]
pub struct NamespaceConfig {
    pub cache: CacheConfig,
    /// Record trees (parsed rows with their file trees) kept. A tree of a one-field IQ
    /// capture's row takes about 10 KiB; walks and scans need only the few records being
    /// visited (the kernel caches what they have seen).
    pub record_trees: usize,
    /// How long a read of the annotation catalog is trusted (`--metadata-ttl`).
    pub metadata_ttl: Duration,
    /// Threads serving requests (`--threads`), which bound the decode-ahead workers
    /// ([`ahead_workers`](crate::fs::cache::ahead_workers)).
    pub threads: usize,
}

/// Threads serving requests when nothing else is said (`--threads`' default).
pub const DEFAULT_THREADS: usize = 8;

impl Default for NamespaceConfig {
    fn default() -> Self {
        NamespaceConfig {
            cache: CacheConfig::for_cache_size(1 << 30),
            record_trees: 1024,
            metadata_ttl: Duration::from_secs(5),
            threads: DEFAULT_THREADS,
        }
    }
}

/// The label tables' index of a catalog that shows sets (built in the background), and that
/// catalog.
type SetLabels = (Arc<Visible>, Arc<Background<LabelIndex>>);

/// The tree of one mounted dataset.
#[derive(Debug)]
pub struct Namespace {
    dataset: Arc<Dataset>,
    ordinal_width: usize,
    trees: Arc<TreeCache>,
    records: Arc<RecordCache>,
    /// Background decoding of the record after the one being read, during sequential scans.
    ahead: DecodeAhead,
    /// `by-id/` and `by-scene/`, built in the background on first use.
    indexes: RowIndexes,
    /// `columns/`, built in the background on first use.
    columns: Background<ColumnIndex>,
    /// The column node last read and where that read ended: a read that starts there
    /// continues a scan, and only a scan decodes ahead.
    column_scan: std::sync::Mutex<(u32, u64)>,
    /// Held by the read a column scan of small records is serving: the kernel sends a scan's
    /// reads two at a time (its readahead), and served side by side they took the cores from
    /// each other and from the reader, so each finished later; served in order, each is done
    /// sooner (10,000 records of 16 KiB: 0.37 s with both at once, 0.33 s in order). Reads
    /// of a few large records are served side by side: each is a few long decodes, which
    /// the two reads spread over the cores (1 MiB records: 0.97 s side by side, 1.05 s in
    /// order). See [`IN_ORDER_MIN_RECORDS`].
    column_scan_turn: std::sync::Mutex<()>,
    /// The batch of an Arrow file of `columns/` last encoded, charged to the memory budget: a
    /// reader's next reads are most likely in it.
    arrow_batch: std::sync::Mutex<Option<KeptBatch>>,
    /// The label tables' index while the catalog shows sets, with the catalog it was built
    /// for (see [`super::columns::label_sets`]); a new catalog replaces (and stops) it.
    set_labels: std::sync::Mutex<Option<SetLabels>>,
    /// The rows of the label group last read: a reader's next reads are most likely in it.
    kept_group: std::sync::Mutex<Option<KeptGroup>>,
    overlay: Overlay,
    /// Computed files rendered and kept while they are read, and the metas' hashes.
    computed: Arc<ComputedCache>,
    /// Annotation sets' computed files, keyed by carrier and node ([`Carrier::computed_key`]).
    carrier_files: Arc<ComputedCache>,
}

/// A record's picture of its receivers and pulses, in its directory.
pub const RECORD_PREVIEW: &str = "preview.png";
/// A record's SigMF collection, in its directory.
pub const RECORD_COLLECTION: &str = "record.sigmf-collection";
/// A scene's SigMF collection, in its `by-scene/` directory.
pub const SCENE_COLLECTION: &str = "scene.sigmf-collection";
/// A scene of more records has no collection: sizing one needs every record's row, and a
/// scene id shared by a whole dataset would make that every row (and a document as large).
pub const MAX_SCENE_COLLECTION_RECORDS: usize = 1024;
/// A collection listing more recordings is refused (EIO) rather than built.
pub const MAX_COLLECTION_STREAMS: usize = 65_536;

/// Whether a scene of `ordinals` shows `scene.sigmf-collection`.
fn has_scene_collection(ordinals: &[u64]) -> bool {
    ordinals.len() <= MAX_SCENE_COLLECTION_RECORDS
}

const TOP_LEVEL: [(&str, Ino, Kind); 7] = [
    ("annotations", Ino::Annotations, Kind::Dir),
    ("by-id", Ino::ById, Kind::Dir),
    ("by-scene", Ino::ByScene, Kind::Dir),
    ("columns", Ino::Column(0), Kind::Dir),
    ("dataset.json", Ino::DatasetJson, Kind::File),
    ("records", Ino::Records, Kind::Dir),
    ("snapshot.json", Ino::SnapshotJson, Kind::File),
];

/// Refuses a dataset the mount cannot serve: every ordinal needs inode numbers of its own,
/// and those carry 36 bits of ordinal ([`MAX_ORDINAL`]). The message names the snapshot and
/// the key.
pub fn check_servable(dataset: &Dataset) -> Result<(), FsError> {
    let count = dataset.len();
    if count > MAX_ORDINAL + 1 {
        return Err(FsError::failed(format!(
            "{}: record_count {count} is more than a mount can number ({} records: inode \
             numbers carry 36 bits of ordinal)",
            dataset.root().snapshot.path,
            MAX_ORDINAL + 1
        )));
    }
    Ok(())
}

impl Namespace {
    pub fn new(dataset: Arc<Dataset>, config: NamespaceConfig) -> Namespace {
        let last = dataset.len().saturating_sub(1);
        Namespace {
            ordinal_width: last.to_string().len(),
            trees: TreeCache::new(config.record_trees, dataset.memory().clone()),
            records: RecordCache::new(config.cache, dataset.memory()),
            ahead: DecodeAhead::new(crate::fs::cache::ahead_workers(config.threads)),
            indexes: RowIndexes::new(),
            columns: Background::new("columns/"),
            column_scan: std::sync::Mutex::new((0, u64::MAX)),
            column_scan_turn: std::sync::Mutex::new(()),
            arrow_batch: std::sync::Mutex::new(None),
            set_labels: std::sync::Mutex::new(None),
            kept_group: std::sync::Mutex::new(None),
            overlay: Overlay::new(config.metadata_ttl, dataset.memory()),
            computed: ComputedCache::new(dataset.memory().clone()),
            carrier_files: ComputedCache::new(dataset.memory().clone()),
            dataset,
        }
    }

    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.dataset
    }

    pub fn record_cache(&self) -> &RecordCache {
        &self.records
    }

    /// Computed files (pictures, SigMF metas and collections) rendered so far.
    pub fn computed_renders(&self) -> u64 {
        self.computed.renders() + self.carrier_files.renders()
    }

    /// Computed files kept now, and their bytes.
    pub fn computed_kept(&self) -> (u64, u64) {
        let (own, sets) = (self.computed.kept_files(), self.carrier_files.kept_files());
        (own.0 + sets.0, own.1 + sets.1)
    }

    /// Pictures rendered so far (counted with the other computed files).
    pub fn picture_renders(&self) -> u64 {
        self.computed_renders()
    }

    /// The zero-padded directory name of an ordinal.
    pub fn ordinal_name(&self, ordinal: u64) -> String {
        format!("{ordinal:0width$}", width = self.ordinal_width)
    }

    fn parse_ordinal(&self, name: &str) -> Option<u64> {
        if name.len() != self.ordinal_width || !name.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let ordinal: u64 = name.parse().ok()?;
        (ordinal < self.dataset.len() && ordinal <= MAX_ORDINAL).then_some(ordinal)
    }

    /// The record tree of `ordinal` (its metadata row, parsed and laid out), cached.
    pub fn record_tree(&self, ordinal: u64) -> Result<Arc<CachedTree>, FsError> {
        self.trees.get(&self.dataset, ordinal)
    }

    /// Record `ordinal` decoded (through the cache) with at least its fields `fields`: a
    /// record above the cache's in-memory threshold is decoded field by field, those alone.
    fn decoded(&self, ordinal: u64, fields: &[String]) -> Result<Arc<RecordBytes>, FsError> {
        self.records
            .get(&self.dataset, &self.trees, ordinal, fields)
            .map_err(|e| FsError::in_record(ordinal, e))
    }

    /// Record `ordinal`'s tree and, when `needs` names the fields whose tensors what is
    /// served from the tree reads, the record decoded with them (see
    /// [`Namespace::with_record`]).
    fn tree_and_record(
        &self,
        ordinal: u64,
        needs: impl FnOnce(&RecordTree) -> Vec<String>,
    ) -> Result<(Arc<CachedTree>, Option<Arc<RecordBytes>>), FsError> {
        let tree = self.record_tree(ordinal)?;
        let fields = needs(&tree);
        self.with_record(tree, &fields)
    }

    /// `tree`, with its record decoded with `fields` when there are any (nothing is decoded,
    /// no data shard read, for none). The record is decoded with no tree held: a request
    /// must hold nothing charged to the memory budget while it may wait for room for a
    /// payload (see [`TreeCache::row_fingerprint`]). The tree is found again afterwards (a
    /// cache hit unless the payload's room was made by evicting it).
    fn with_record(
        &self,
        tree: Arc<CachedTree>,
        fields: &[String],
    ) -> Result<(Arc<CachedTree>, Option<Arc<RecordBytes>>), FsError> {
        if fields.is_empty() {
            return Ok((tree, None));
        }
        let ordinal = tree.ordinal;
        drop(tree);
        let record = self.decoded(ordinal, fields)?;
        Ok((self.record_tree(ordinal)?, Some(record)))
    }

    fn check_ordinal(&self, ordinal: u64) -> Result<(), FsError> {
        if ordinal < self.dataset.len() {
            Ok(())
        } else {
            Err(FsError::NotFound)
        }
    }

    /// Whether `ino` belongs to the annotation overlay, whose entries change when the catalog
    /// does (the adapter gives them the metadata TTL instead of the immutable one), or is a
    /// label table of `columns/`, whose rows hold the shown sets' boxes.
    pub fn is_annotation(&self, ino: u64) -> bool {
        matches!(
            Ino::decode(ino),
            Some(
                Ino::Annotations
                    | Ino::RecordAnnotations(_)
                    | Ino::SetDir(_)
                    | Ino::SetJson(_)
                    | Ino::RecordSetDir(..)
                    | Ino::RecordSetJson(..)
                    | Ino::RecordSetField(..)
            )
        ) || matches!(Ino::decode(ino), Some(Ino::Column(n)) if Self::is_label_table(n))
    }

    /// The storage object a failure at `ino` is charged to in `sdsfs status`: the annotation
    /// object of a record's annotation files (or of their directory, for a lookup in it), the
    /// data object of the record `ino` belongs to, or the dataset for everything else.
    pub fn object_of(&self, ino: u64) -> String {
        if let Some(
            Ino::RecordSetDir(o, i) | Ino::RecordSetJson(o, i) | Ino::RecordSetField(o, i, _),
        ) = Ino::decode(ino)
        {
            if let Some(object) = self.annotation_object(o, i) {
                return object;
            }
        }
        let ordinal = match Ino::decode(ino) {
            Some(
                Ino::RecordDir(o)
                | Ino::RecordJson(o)
                | Ino::RecordAnnotations(o)
                | Ino::FieldNode(o, _)
                | Ino::IdLink(o)
                | Ino::SceneLink(o)
                | Ino::RecordSetDir(o, _)
                | Ino::RecordSetJson(o, _)
                | Ino::RecordSetField(o, _, _)
                | Ino::RecordCollection(o)
                | Ino::RecordPreview(o),
            ) => o,
            _ => return "(dataset)".to_string(),
        };
        self.dataset
            .locate(ordinal)
            .ok()
            .and_then(|l| {
                l.entry()
                    .map(|e| self.dataset.describe_object(&e.data.path))
            })
            .unwrap_or_else(|| format!("(record {ordinal})"))
    }

    /// The mtime of the annotation overlay's entries: when this mount first saw the catalog
    /// it shows now (re-read if older than the metadata TTL).
    pub fn annotations_modified(&self) -> std::time::SystemTime {
        self.overlay.visible(&self.dataset).seen_at
    }

    /// The annotation sets shown now, the catalog re-read first (the same `Arc` when its
    /// bytes did not change).
    pub fn refresh_annotations(&self) -> Arc<super::overlay::Visible> {
        self.overlay.refresh(&self.dataset)
    }

    /// How long the annotation catalog is trusted.
    pub fn metadata_ttl(&self) -> Duration {
        self.overlay.ttl()
    }

    /// The visible set with registry index `index`.
    fn set_at(&self, index: u8) -> Result<Arc<VisibleSet>, FsError> {
        self.overlay
            .visible(&self.dataset)
            .by_index(index)
            .cloned()
            .ok_or(FsError::NotFound)
    }

    /// The object holding record `ordinal`'s annotation in set `index`, if the set is shown.
    fn annotation_object(&self, ordinal: u64, index: u8) -> Option<String> {
        let set = self.set_at(index).ok()?;
        let shard = set.set.shard_of(ordinal)?;
        Some(self.dataset.store().describe(&shard.object.path))
    }

    /// Record `ordinal`'s annotation in set `index`.
    fn carrier(&self, ordinal: u64, index: u8) -> Result<Arc<Carrier>, FsError> {
        self.check_ordinal(ordinal)?;
        let set = self.set_at(index)?;
        self.overlay
            .carrier(&self.dataset, &set, ordinal, &self.trees)
    }

    // -----------------------------------------------------------------------------------------
    // getattr
    // -----------------------------------------------------------------------------------------

    pub fn getattr(&self, ino: u64) -> Result<Attr, FsError> {
        let node = Ino::decode(ino).ok_or(FsError::NotFound)?;
        let (kind, size) = match node {
            Ino::Root | Ino::Records | Ino::Annotations | Ino::ById | Ino::ByScene => {
                (Kind::Dir, 0)
            }
            Ino::DatasetJson => (Kind::File, self.dataset.root_bytes().len() as u64),
            Ino::SnapshotJson => (Kind::File, self.dataset.snapshot_bytes().len() as u64),
            Ino::RecordDir(o) | Ino::RecordAnnotations(o) => {
                self.check_ordinal(o)?;
                (Kind::Dir, 0)
            }
            Ino::RecordJson(o) => {
                self.check_ordinal(o)?;
                (Kind::File, self.record_tree(o)?.record_json_len())
            }
            Ino::FieldNode(o, n) => {
                self.check_ordinal(o)?;
                let tree = self.record_tree(o)?;
                match tree.node(n).ok_or(FsError::NotFound)? {
                    Node::Dir { .. } => (Kind::Dir, 0),
                    Node::File { .. } => (Kind::File, tree.node_len(n)),
                }
            }
            Ino::IdLink(o) | Ino::SceneLink(o) => {
                let target = self.link_target(node, o)?;
                (Kind::Symlink, target.len() as u64)
            }
            Ino::RecordCollection(o) => {
                self.check_ordinal(o)?;
                (Kind::File, self.record_collection(o, false)?.len() as u64)
            }
            Ino::SceneCollection(i) => (Kind::File, self.scene_collection(i, false)?.len() as u64),
            Ino::RecordPreview(o) => {
                self.check_ordinal(o)?;
                let panels = self.record_tree(o)?.preview_panels.len();
                (Kind::File, picture::preview_len(panels))
            }
            Ino::SceneDir(i) => {
                self.indexes()?
                    .scenes
                    .get(i as usize)
                    .ok_or(FsError::NotFound)?;
                (Kind::Dir, 0)
            }
            Ino::SetDir(i) => {
                self.set_at(i)?;
                (Kind::Dir, 0)
            }
            Ino::SetJson(i) => (Kind::File, self.set_at(i)?.set.root_bytes().len() as u64),
            // `fields/` is a directory whatever the carrier holds: it stays listable in its
            // parent when the carrier cannot be read, and only what needs the carrier fails.
            Ino::RecordSetDir(o, i) | Ino::RecordSetField(o, i, 0) => {
                self.check_ordinal(o)?;
                self.set_at(i)?;
                (Kind::Dir, 0)
            }
            Ino::RecordSetJson(o, i) => {
                (Kind::File, self.carrier(o, i)?.annotation_json.len() as u64)
            }
            Ino::RecordSetField(o, i, n) => {
                let carrier = self.carrier(o, i)?;
                match carrier.tree.node(n).ok_or(FsError::NotFound)? {
                    Node::Dir { .. } => (Kind::Dir, 0),
                    Node::File { .. } => (Kind::File, carrier.tree.node_len(n)),
                }
            }
            // `columns/` itself is there before its index is built: only looking inside waits.
            Ino::Column(0) => (Kind::Dir, 0),
            Ino::Column(n) => {
                let index = self.column_index()?;
                match index.nodes.get(n as usize).ok_or(FsError::NotFound)? {
                    Node::Dir { .. } => (Kind::Dir, 0),
                    Node::File {
                        view: ColumnView::Labels,
                        ..
                    } => (Kind::File, self.label_index(&index)?.len()),
                    Node::File {
                        view: ColumnView::LabelsArrow,
                        ..
                    } => (Kind::File, self.label_index(&index)?.arrow.len()),
                    Node::File { .. } => (Kind::File, index.node_len(n)),
                }
            }
        };
        Ok(Attr { ino, kind, size })
    }

    // -----------------------------------------------------------------------------------------
    // lookup
    // -----------------------------------------------------------------------------------------

    pub fn lookup(&self, parent: u64, name: &str) -> Result<Attr, FsError> {
        let parent_node = Ino::decode(parent).ok_or(FsError::NotFound)?;
        let child = match parent_node {
            Ino::Root => TOP_LEVEL
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, ino, _)| *ino)
                .ok_or(FsError::NotFound)?,
            Ino::Records => Ino::RecordDir(self.parse_ordinal(name).ok_or(FsError::NotFound)?),
            Ino::RecordDir(o) => {
                self.check_ordinal(o)?;
                match name {
                    "record.json" => Ino::RecordJson(o),
                    RECORD_COLLECTION => Ino::RecordCollection(o),
                    RECORD_PREVIEW => Ino::RecordPreview(o),
                    "fields" => Ino::FieldNode(o, 0),
                    "annotations" => Ino::RecordAnnotations(o),
                    _ => return Err(FsError::NotFound),
                }
            }
            Ino::FieldNode(o, n) => {
                let tree = self.record_tree(o)?;
                match tree.node(n) {
                    Some(Node::Dir { .. }) => {}
                    Some(Node::File { .. }) => return Err(FsError::NotDir),
                    None => return Err(FsError::NotFound),
                }
                Ino::FieldNode(o, tree.child(n, name).ok_or(FsError::NotFound)?)
            }
            Ino::ById => Ino::IdLink(self.indexes()?.id(name).ok_or(FsError::NotFound)?),
            Ino::ByScene => {
                let index = self.indexes()?.scene(name).ok_or(FsError::NotFound)?;
                Ino::SceneDir(index as u64)
            }
            Ino::SceneDir(i) => {
                let indexes = self.indexes()?;
                let (_, ordinals) = indexes.scenes.get(i as usize).ok_or(FsError::NotFound)?;
                if name == SCENE_COLLECTION && has_scene_collection(ordinals) {
                    return self.getattr(Ino::SceneCollection(i).encode());
                }
                let ordinal = self.parse_ordinal(name).ok_or(FsError::NotFound)?;
                ordinals
                    .binary_search(&ordinal)
                    .map_err(|_| FsError::NotFound)?;
                Ino::SceneLink(ordinal)
            }
            Ino::Annotations => {
                let visible = self.overlay.visible(&self.dataset);
                Ino::SetDir(visible.by_name(name).ok_or(FsError::NotFound)?.index)
            }
            Ino::SetDir(i) => {
                self.set_at(i)?;
                match name {
                    "set.json" => Ino::SetJson(i),
                    _ => return Err(FsError::NotFound),
                }
            }
            Ino::RecordAnnotations(o) => {
                self.check_ordinal(o)?;
                let visible = self.overlay.visible(&self.dataset);
                Ino::RecordSetDir(o, visible.by_name(name).ok_or(FsError::NotFound)?.index)
            }
            Ino::RecordSetDir(o, i) => {
                self.check_ordinal(o)?;
                self.set_at(i)?;
                match name {
                    "annotation.json" => Ino::RecordSetJson(o, i),
                    "fields" => Ino::RecordSetField(o, i, 0),
                    _ => return Err(FsError::NotFound),
                }
            }
            Ino::RecordSetField(o, i, n) => {
                let carrier = self.carrier(o, i)?;
                match carrier.tree.node(n) {
                    Some(Node::Dir { .. }) => {}
                    Some(Node::File { .. }) => return Err(FsError::NotDir),
                    None => return Err(FsError::NotFound),
                }
                Ino::RecordSetField(o, i, carrier.tree.child(n, name).ok_or(FsError::NotFound)?)
            }
            Ino::Column(n) => {
                let index = self.column_index()?;
                match index.nodes.get(n as usize) {
                    Some(Node::Dir { .. }) => {}
                    Some(Node::File { .. }) => return Err(FsError::NotDir),
                    None => return Err(FsError::NotFound),
                }
                Ino::Column(child_named(&index.nodes, n, name).ok_or(FsError::NotFound)?)
            }
            _ => return Err(FsError::NotDir),
        };
        self.getattr(child.encode())
    }

    // -----------------------------------------------------------------------------------------
    // readdir
    // -----------------------------------------------------------------------------------------

    /// The parent directory's inode (for `..`).
    pub fn parent_of(&self, ino: u64) -> Result<u64, FsError> {
        let parent = match Ino::decode(ino).ok_or(FsError::NotFound)? {
            Ino::Root | Ino::Records | Ino::Annotations | Ino::ById | Ino::ByScene => Ino::Root,
            Ino::DatasetJson | Ino::SnapshotJson => Ino::Root,
            Ino::RecordDir(_) => Ino::Records,
            Ino::RecordJson(o)
            | Ino::RecordAnnotations(o)
            | Ino::FieldNode(o, 0)
            | Ino::RecordCollection(o)
            | Ino::RecordPreview(o) => Ino::RecordDir(o),
            Ino::SceneCollection(i) => Ino::SceneDir(i),
            Ino::FieldNode(o, n) => {
                let tree = self.record_tree(o)?;
                Ino::FieldNode(o, tree.node(n).ok_or(FsError::NotFound)?.parent())
            }
            Ino::IdLink(_) => Ino::ById,
            Ino::SceneDir(_) => Ino::ByScene,
            Ino::SceneLink(o) => Ino::SceneDir(self.scene_of(o)?),
            Ino::SetDir(_) => Ino::Annotations,
            Ino::SetJson(i) => Ino::SetDir(i),
            Ino::RecordSetDir(o, _) => Ino::RecordAnnotations(o),
            Ino::RecordSetJson(o, i) | Ino::RecordSetField(o, i, 0) => Ino::RecordSetDir(o, i),
            Ino::RecordSetField(o, i, n) => {
                let carrier = self.carrier(o, i)?;
                Ino::RecordSetField(
                    o,
                    i,
                    carrier.tree.node(n).ok_or(FsError::NotFound)?.parent(),
                )
            }
            Ino::Column(0) => Ino::Root,
            Ino::Column(n) => {
                let index = self.column_index()?;
                Ino::Column(
                    index
                        .nodes
                        .get(n as usize)
                        .ok_or(FsError::NotFound)?
                        .parent(),
                )
            }
        };
        Ok(parent.encode())
    }

    /// Lists directory `ino` from `offset` (0 = the start; each entry carries the offset of the
    /// next), calling `add` until it returns `true` (the reply buffer is full). `.` and `..`
    /// come first. Offsets are plain positions in a fixed order, so a listing resumes exactly.
    pub fn read_dir(
        &self,
        ino: u64,
        offset: u64,
        mut add: impl FnMut(DirEntry, u64) -> bool,
    ) -> Result<(), FsError> {
        let node = Ino::decode(ino).ok_or(FsError::NotFound)?;
        let count = self.child_count(node)?;
        let total = count + 2;
        for position in offset..total {
            let entry = match position {
                0 => DirEntry {
                    ino,
                    kind: Kind::Dir,
                    name: ".".into(),
                },
                1 => DirEntry {
                    ino: self.parent_of(ino)?,
                    kind: Kind::Dir,
                    name: "..".into(),
                },
                _ => self.child_at(node, position - 2)?,
            };
            if add(entry, position + 1) {
                break;
            }
        }
        Ok(())
    }

    fn child_count(&self, node: Ino) -> Result<u64, FsError> {
        Ok(match node {
            Ino::Root => TOP_LEVEL.len() as u64,
            Ino::Records => self.dataset.len(),
            Ino::RecordDir(o) => {
                self.check_ordinal(o)?;
                5
            }
            Ino::FieldNode(o, n) => match self.record_tree(o)?.node(n) {
                Some(Node::Dir { children, .. }) => children.len() as u64,
                Some(Node::File { .. }) => return Err(FsError::NotDir),
                None => return Err(FsError::NotFound),
            },
            Ino::ById => self.indexes()?.ids.len() as u64,
            Ino::ByScene => self.indexes()?.scenes.len() as u64,
            Ino::SceneDir(i) => {
                let indexes = self.indexes()?;
                let (_, ordinals) = indexes.scenes.get(i as usize).ok_or(FsError::NotFound)?;
                ordinals.len() as u64 + u64::from(has_scene_collection(ordinals))
            }
            Ino::Annotations => self.overlay.visible(&self.dataset).sets.len() as u64,
            Ino::RecordAnnotations(o) => {
                self.check_ordinal(o)?;
                self.overlay.visible(&self.dataset).sets.len() as u64
            }
            Ino::SetDir(i) => {
                self.set_at(i)?;
                1
            }
            Ino::RecordSetDir(o, i) => {
                self.check_ordinal(o)?;
                self.set_at(i)?;
                2
            }
            Ino::RecordSetField(o, i, n) => match self.carrier(o, i)?.tree.node(n) {
                Some(Node::Dir { children, .. }) => children.len() as u64,
                Some(Node::File { .. }) => return Err(FsError::NotDir),
                None => return Err(FsError::NotFound),
            },
            Ino::Column(n) => match self.column_index()?.nodes.get(n as usize) {
                Some(Node::Dir { children, .. }) => children.len() as u64,
                Some(Node::File { .. }) => return Err(FsError::NotDir),
                None => return Err(FsError::NotFound),
            },
            _ => return Err(FsError::NotDir),
        })
    }

    fn child_at(&self, node: Ino, index: u64) -> Result<DirEntry, FsError> {
        let entry = |ino: Ino, kind, name: String| DirEntry {
            ino: ino.encode(),
            kind,
            name,
        };
        Ok(match node {
            Ino::Root => {
                let (name, ino, kind) = TOP_LEVEL.get(index as usize).ok_or(FsError::NotFound)?;
                entry(*ino, *kind, name.to_string())
            }
            Ino::Records => entry(Ino::RecordDir(index), Kind::Dir, self.ordinal_name(index)),
            Ino::RecordDir(o) => match index {
                0 => entry(Ino::RecordAnnotations(o), Kind::Dir, "annotations".into()),
                1 => entry(Ino::FieldNode(o, 0), Kind::Dir, "fields".into()),
                2 => entry(Ino::RecordPreview(o), Kind::File, RECORD_PREVIEW.into()),
                3 => entry(Ino::RecordJson(o), Kind::File, "record.json".into()),
                _ => entry(
                    Ino::RecordCollection(o),
                    Kind::File,
                    RECORD_COLLECTION.into(),
                ),
            },
            Ino::FieldNode(o, n) => {
                let tree = self.record_tree(o)?;
                let (child, kind, name) = tree_child(&tree.nodes, n, index)?;
                entry(Ino::FieldNode(o, child), kind, name)
            }
            Ino::ById => {
                let indexes = self.indexes()?;
                let (name, ordinal) = indexes.ids.get(index as usize).ok_or(FsError::NotFound)?;
                entry(Ino::IdLink(*ordinal), Kind::Symlink, name.clone())
            }
            Ino::ByScene => {
                let indexes = self.indexes()?;
                let (name, _) = indexes
                    .scenes
                    .get(index as usize)
                    .ok_or(FsError::NotFound)?;
                entry(Ino::SceneDir(index), Kind::Dir, name.clone())
            }
            Ino::SceneDir(i) => {
                let indexes = self.indexes()?;
                let (_, ordinals) = indexes.scenes.get(i as usize).ok_or(FsError::NotFound)?;
                if index == ordinals.len() as u64 && has_scene_collection(ordinals) {
                    return Ok(entry(
                        Ino::SceneCollection(i),
                        Kind::File,
                        SCENE_COLLECTION.into(),
                    ));
                }
                let ordinal = *ordinals.get(index as usize).ok_or(FsError::NotFound)?;
                entry(
                    Ino::SceneLink(ordinal),
                    Kind::Symlink,
                    self.ordinal_name(ordinal),
                )
            }
            Ino::Annotations | Ino::RecordAnnotations(_) => {
                let visible = self.overlay.visible(&self.dataset);
                let set = visible.sets.get(index as usize).ok_or(FsError::NotFound)?;
                let ino = match node {
                    Ino::RecordAnnotations(o) => Ino::RecordSetDir(o, set.index),
                    _ => Ino::SetDir(set.index),
                };
                entry(ino, Kind::Dir, set.name.clone())
            }
            Ino::SetDir(i) => entry(Ino::SetJson(i), Kind::File, "set.json".into()),
            Ino::RecordSetDir(o, i) => match index {
                0 => entry(
                    Ino::RecordSetJson(o, i),
                    Kind::File,
                    "annotation.json".into(),
                ),
                _ => entry(Ino::RecordSetField(o, i, 0), Kind::Dir, "fields".into()),
            },
            Ino::RecordSetField(o, i, n) => {
                let (child, kind, name) = tree_child(&self.carrier(o, i)?.tree.nodes, n, index)?;
                entry(Ino::RecordSetField(o, i, child), kind, name)
            }
            Ino::Column(n) => {
                let (child, kind, name) = tree_child(&self.column_index()?.nodes, n, index)?;
                entry(Ino::Column(child), kind, name)
            }
            _ => return Err(FsError::NotFound),
        })
    }

    // -----------------------------------------------------------------------------------------
    // links
    // -----------------------------------------------------------------------------------------

    pub fn readlink(&self, ino: u64) -> Result<Vec<u8>, FsError> {
        match Ino::decode(ino).ok_or(FsError::NotFound)? {
            node @ (Ino::IdLink(o) | Ino::SceneLink(o)) => {
                Ok(self.link_target(node, o)?.into_bytes())
            }
            _ => Err(FsError::NotLink),
        }
    }

    fn link_target(&self, node: Ino, ordinal: u64) -> Result<String, FsError> {
        self.check_ordinal(ordinal)?;
        match node {
            Ino::IdLink(_) => Ok(format!("../records/{}", self.ordinal_name(ordinal))),
            _ => Ok(format!("../../records/{}", self.ordinal_name(ordinal))),
        }
    }

    // -----------------------------------------------------------------------------------------
    // read
    // -----------------------------------------------------------------------------------------

    /// Up to `size` bytes of file `ino` at `offset` (fewer at the end of the file).
    pub fn read(&self, ino: u64, offset: u64, size: u32) -> Result<Bytes, FsError> {
        match Ino::decode(ino).ok_or(FsError::NotFound)? {
            Ino::DatasetJson => Ok(slice(self.dataset.root_bytes(), offset, size)),
            Ino::SnapshotJson => Ok(slice(self.dataset.snapshot_bytes(), offset, size)),
            Ino::RecordJson(o) => {
                self.check_ordinal(o)?;
                // Written once and kept while it is read, as computed files are (the tree
                // keeps only its size).
                let text = self.computed.get(
                    ino,
                    || Ok(self.record_tree(o)?.record_json_len()),
                    || {
                        let tree = self.record_tree(o)?;
                        tree.record_json()
                            .map_err(|e| FsError::record(o, e.to_string()))
                    },
                )?;
                Ok(slice(&text, offset, size))
            }
            Ino::FieldNode(o, n) => {
                self.check_ordinal(o)?;
                self.read_field_node(o, n, offset, size)
            }
            Ino::SetJson(i) => Ok(slice(self.set_at(i)?.set.root_bytes(), offset, size)),
            Ino::RecordCollection(o) => {
                self.check_ordinal(o)?;
                let bytes =
                    self.collection_file(ino, |hashed| self.record_collection(o, hashed))?;
                Ok(slice(&bytes, offset, size))
            }
            Ino::SceneCollection(i) => {
                let bytes = self.collection_file(ino, |hashed| self.scene_collection(i, hashed))?;
                Ok(slice(&bytes, offset, size))
            }
            Ino::RecordPreview(o) => {
                self.check_ordinal(o)?;
                let png = self.computed.get(
                    ino,
                    || {
                        Ok(picture::preview_len(
                            self.record_tree(o)?.preview_panels.len(),
                        ))
                    },
                    || self.preview(o),
                )?;
                Ok(slice(&png, offset, size))
            }
            Ino::RecordSetJson(o, i) => Ok(slice_vec(
                &self.carrier(o, i)?.annotation_json,
                offset,
                size,
            )),
            Ino::RecordSetField(o, i, n) => {
                let carrier = self.carrier(o, i)?;
                match carrier.tree.node(n).ok_or(FsError::NotFound)? {
                    Node::Dir { .. } => Err(FsError::IsDir),
                    Node::File { .. } => {
                        let missing = || FsError::record(o, "annotation field data missing");
                        let bytes = match carrier.computed_key(n) {
                            // Rendered once and kept while read, as the record's own are.
                            Some(key) => self.carrier_files.get(
                                key,
                                || Ok(carrier.tree.node_len(n)),
                                || Ok(carrier.file_bytes(n).ok_or_else(missing)?.to_vec()),
                            )?,
                            None => carrier.file_bytes(n).ok_or_else(missing)?,
                        };
                        Ok(slice(&bytes, offset, size))
                    }
                }
            }
            Ino::Column(n) => self.read_column(n, offset, size),
            Ino::SetDir(_) | Ino::RecordSetDir(..) => Err(FsError::IsDir),
            Ino::Root
            | Ino::Records
            | Ino::Annotations
            | Ino::ById
            | Ino::ByScene
            | Ino::RecordDir(_)
            | Ino::RecordAnnotations(_)
            | Ino::SceneDir(_) => Err(FsError::IsDir),
            Ino::IdLink(_) | Ino::SceneLink(_) => Err(FsError::NotFound),
        }
    }

    fn read_field_node(
        &self,
        ordinal: u64,
        node: u32,
        offset: u64,
        size: u32,
    ) -> Result<Bytes, FsError> {
        let tree = self.record_tree(ordinal)?;
        let (field, view) = match tree.node(node).ok_or(FsError::NotFound)? {
            Node::Dir { .. } => return Err(FsError::IsDir),
            Node::File { field, view, .. } => (*field as usize, *view),
        };
        let entry = tree.fields.get(field).ok_or(FsError::NotFound)?;
        // A tensor's reads need only its name, length and header: the tree is let go before
        // the record is decoded (see `with_record`).
        match view {
            View::Json => {
                let text = tree.field_json(field).ok_or(FsError::NotFound)?;
                Ok(slice_vec(&text, offset, size))
            }
            View::SigmfMeta => {
                let len = tree.node_len(node);
                drop(tree);
                let meta = self.meta_bytes(ordinal, node, field, len)?;
                Ok(slice(&meta, offset, size))
            }
            View::Raw | View::SigmfData => {
                let (name, raw_len) = (entry.name.clone(), entry.raw_len);
                drop(tree);
                self.read_tensor(ordinal, &name, offset, size, raw_len)
            }
            View::Npy => {
                let (name, raw_len) = (entry.name.clone(), entry.raw_len);
                let header = tree.npy_header(field).ok_or(FsError::NotFound)?;
                drop(tree);
                with_header(&header, offset, size, |offset, size| {
                    self.read_tensor(ordinal, &name, offset, size, raw_len)
                })
            }
            View::Spectrogram => {
                drop(tree);
                let ino = Ino::FieldNode(ordinal, node).encode();
                let png = self.computed.get(
                    ino,
                    || Ok(picture::spectrogram_len()),
                    || self.spectrogram(ordinal, field),
                )?;
                Ok(slice(&png, offset, size))
            }
        }
    }

    /// Whether the dataset's typical record is decoded into temporary files: its mean stored
    /// size (the snapshot's `stored_bytes` over its records; a decoded payload is at least
    /// about as large, larger when compressed) is above the cache's file threshold. Known from
    /// the snapshot alone.
    pub fn typical_record_spills(&self) -> bool {
        let snapshot = self.dataset.snapshot();
        snapshot.record_count > 0
            && self
                .records
                .spills(snapshot.stored_bytes / snapshot.record_count)
    }

    /// Whether file `ino` may be served by the kernel from a file of the daemon's (FUSE
    /// passthrough): the `.raw` and `.sigmf-data` views of a field of at least
    /// [`OWN_FILE_MIN_BYTES`]. Depends only on the record's metadata, so every open of one
    /// inode gets the same answer (the kernel refuses to mix passthrough and cached opens).
    pub fn passthrough_candidate(&self, ino: u64) -> bool {
        self.tensor_view(ino).is_some_and(|(tree, index)| {
            tree.fields
                .get(index)
                .is_some_and(|field| field.raw_len >= OWN_FILE_MIN_BYTES)
        })
    }

    /// A file holding exactly the bytes of view `ino` from offset 0, for the kernel to serve
    /// them directly: a candidate's field when its record is decoded into temporary files
    /// (decoding it now if needed). `None` otherwise, and also when decoding fails: the
    /// file is then opened as any other, and its reads report the error.
    pub fn backing_file(&self, ino: u64) -> Option<std::fs::File> {
        let (tree, index) = self.tensor_view(ino)?;
        let field = tree.fields.get(index)?;
        if field.raw_len < OWN_FILE_MIN_BYTES {
            return None;
        }
        let (ordinal, name, raw_len) = (tree.ordinal, field.name.clone(), field.raw_len);
        drop(tree);
        let location = self.dataset.locate(ordinal).ok()?;
        if !self
            .records
            .spills(self.dataset.payload_len(&location).ok()?)
        {
            return None;
        }
        let bytes = self.decoded(ordinal, std::slice::from_ref(&name)).ok()?;
        let file = bytes.own_file(&name)?;
        // The view's size as `stat` reports it must be the file's, or reads would disagree.
        let len = file.metadata().ok()?.len();
        (len == raw_len).then(|| file.try_clone().ok())?
    }

    /// The record tree and field of a `.raw` or `.sigmf-data` view.
    fn tensor_view(&self, ino: u64) -> Option<(Arc<CachedTree>, usize)> {
        let Ino::FieldNode(ordinal, node) = Ino::decode(ino)? else {
            return None;
        };
        self.check_ordinal(ordinal).ok()?;
        let tree = self.record_tree(ordinal).ok()?;
        let Node::File { field, view, .. } = tree.node(node)? else {
            return None;
        };
        if !matches!(view, View::Raw | View::SigmfData) {
            return None;
        }
        let index = *field as usize;
        Some((tree, index))
    }

    fn read_tensor(
        &self,
        ordinal: u64,
        field: &str,
        offset: u64,
        size: u32,
        len: u64,
    ) -> Result<Bytes, FsError> {
        if offset >= len || size == 0 {
            return Ok(Bytes::new());
        }
        let bytes = self.decoded(ordinal, &[field.to_string()])?;
        self.ahead
            .after_read(&self.records, &self.trees, &self.dataset, ordinal);
        bytes
            .read_field(field, offset, size as usize)
            .map_err(|e| FsError::in_record_at(ordinal, format!("field {field:?}"), e))
    }

    // -----------------------------------------------------------------------------------------
    // SigMF documents
    // -----------------------------------------------------------------------------------------

    /// Field `index`'s `.sigmf-meta`, its boxes read from `record` (decoded
    /// with its [`box_fields`]) when it has any.
    fn sigmf_meta(
        &self,
        tree: &RecordTree,
        index: usize,
        record: Option<&RecordBytes>,
    ) -> Result<Vec<u8>, FsError> {
        let entry = tree.fields.get(index).ok_or(FsError::NotFound)?;
        let layout = entry.sigmf_meta.as_ref().ok_or(FsError::NotFound)?;
        let tensors = match layout.needs_tensors() {
            Some(plan) => Some(box_tensors(tree, plan, record)?),
            None => None,
        };
        tree.render_sigmf_meta(index, tensors.as_ref())
            .ok_or(FsError::NotFound)?
    }

    /// Field `index`'s `.spectrogram.png`.
    fn spectrogram(&self, ordinal: u64, index: usize) -> Result<Vec<u8>, FsError> {
        let (tree, record) = self.tree_and_record(ordinal, |tree| {
            let shown = tree.fields.get(index).map(|entry| entry.name.clone());
            shown.into_iter().chain(box_fields(tree, index)).collect()
        })?;
        let entry = tree.fields.get(index).ok_or(FsError::NotFound)?;
        let boxes = boxes_of(&tree, index, record.as_deref())?;
        let axes = IqAxes::of(&*tree.field_meta_at(index).ok_or(FsError::NotFound)?);
        render_picture(
            &tree,
            record.as_deref(),
            picture::spectrogram_len(),
            |read| picture::spectrogram_png(tree.id(), &entry.name, &axes, &boxes, read),
        )
    }

    /// `records/<n>/preview.png`.
    fn preview(&self, ordinal: u64) -> Result<Vec<u8>, FsError> {
        let (tree, record) = self.tree_and_record(ordinal, preview_fields)?;
        let record = record.as_deref();
        let boxes = tree
            .preview_panels
            .iter()
            .map(
                |(name, _)| match tree.fields.iter().position(|f| &f.name == name) {
                    Some(index) => boxes_of(&tree, index, record),
                    None => Ok(Vec::new()),
                },
            )
            .collect::<Result<Vec<_>, FsError>>()?;
        let expected = picture::preview_len(tree.preview_panels.len());
        render_picture(&tree, record, expected, |read| {
            picture::preview_png(
                tree.id(),
                &|name| tree.field_meta(name),
                &tree.preview_panels,
                &boxes,
                read,
            )
        })
    }

    fn provenance<'a>(&'a self, tree: &'a RecordTree) -> Provenance<'a> {
        Provenance {
            dataset_id: &self.dataset.root().dataset_id,
            snapshot_id: &self.dataset.snapshot().snapshot_id,
            record_id: tree.id(),
            ordinal: tree.ordinal,
        }
    }

    /// Field `field`'s `.sigmf-meta` (file node `node`, `len` bytes as `stat` gives it), rendered
    /// once and kept while it is read.
    fn meta_bytes(
        &self,
        ordinal: u64,
        node: u32,
        field: usize,
        len: u64,
    ) -> Result<Bytes, FsError> {
        let ino = Ino::FieldNode(ordinal, node).encode();
        self.computed.get(
            ino,
            || Ok(len),
            || {
                let (tree, record) =
                    self.tree_and_record(ordinal, |tree| document_box_fields(tree, field))?;
                self.sigmf_meta(&tree, field, record.as_deref())
            },
        )
    }

    /// The SHA-512 of a stream's `.sigmf-meta`: kept, or rendered (and kept) and hashed.
    fn meta_hash(&self, ordinal: u64, stream: &StreamFile) -> Result<computed::Sha512, FsError> {
        let ino = Ino::FieldNode(ordinal, stream.node).encode();
        if let Some(hash) = self.computed.hash(ino) {
            return Ok(hash);
        }
        let meta = self.meta_bytes(ordinal, stream.node, stream.field, stream.meta_len)?;
        let hash = computed::sha512(&meta);
        self.computed.keep_hash(ino, hash);
        Ok(hash)
    }

    /// The recordings of record `ordinal`, named below `prefix`, and its tree.
    fn stream_files(
        &self,
        ordinal: u64,
        prefix: &str,
    ) -> Result<(Vec<StreamFile>, Arc<CachedTree>), FsError> {
        let tree = self.record_tree(ordinal)?;
        let files = tree
            .sigmf_streams
            .iter()
            .filter_map(|(path, field)| {
                let node = meta_node(&tree, *field)?;
                Some(StreamFile {
                    ordinal,
                    name: format!("{prefix}{path}"),
                    node,
                    field: *field as usize,
                    meta_len: tree.node_len(node),
                })
            })
            .collect();
        Ok((files, tree))
    }

    /// The collection of `description` listing the `files` that fit its caps
    /// ([`sigmf::listed`]), hashed when `hashed` (which renders the metas not hashed yet),
    /// else with placeholder hashes of the same size. Ends when the requester is interrupted.
    fn collection_of(
        &self,
        description: &str,
        files: Vec<StreamFile>,
        hashed: bool,
    ) -> Result<Vec<u8>, FsError> {
        let sizes: Vec<(&str, u64)> = files
            .iter()
            .map(|f| (f.name.as_str(), f.meta_len))
            .collect();
        let shown = sigmf::listed(description, &sizes);
        let left_out = (files.len() - shown) as u64;
        let mut streams = Vec::with_capacity(shown);
        for file in files.into_iter().take(shown) {
            interrupt::check()?;
            let meta_sha512 = match hashed {
                true => Some(hex::encode(self.meta_hash(file.ordinal, &file)?)),
                false => None,
            };
            streams.push(Stream {
                name: file.name,
                meta_sha512,
            });
        }
        Ok(sigmf::collection(description, &streams, left_out))
    }

    /// Collection file `ino`, made by `make` (hashed, or with placeholder hashes for its size),
    /// rendered once and kept while it is read.
    fn collection_file(
        &self,
        ino: u64,
        make: impl Fn(bool) -> Result<Vec<u8>, FsError>,
    ) -> Result<Bytes, FsError> {
        self.computed
            .get(ino, || Ok(make(false)?.len() as u64), || make(true))
    }

    /// `records/<n>/record.sigmf-collection` (see [`sigmf::collection`] for `hashed`).
    fn record_collection(&self, ordinal: u64, hashed: bool) -> Result<Vec<u8>, FsError> {
        let (files, tree) = self.stream_files(ordinal, "fields/")?;
        let description = sigmf::record_collection_description(&self.provenance(&tree));
        // The tree is let go before metas are rendered: a render may wait for room.
        drop(tree);
        self.collection_of(&description, files, hashed)
    }

    /// `by-scene/<scene>/scene.sigmf-collection`: every recording of the scene's records, through
    /// the directory's links.
    fn scene_collection(&self, index: u64, hashed: bool) -> Result<Vec<u8>, FsError> {
        let indexes = self.indexes()?;
        let (scene, ordinals) = indexes
            .scenes
            .get(index as usize)
            .filter(|(_, ordinals)| has_scene_collection(ordinals))
            .ok_or(FsError::NotFound)?;
        let mut files = Vec::new();
        for &ordinal in ordinals {
            let prefix = format!("{}/fields/", self.ordinal_name(ordinal));
            let (record_files, _) = self.stream_files(ordinal, &prefix)?;
            if files.len() + record_files.len() > MAX_COLLECTION_STREAMS {
                return Err(FsError::failed(format!(
                    "by-scene/{scene}/{SCENE_COLLECTION}: more than {MAX_COLLECTION_STREAMS} \
                     recordings"
                )));
            }
            files.extend(record_files);
        }
        let root = self.dataset.root();
        let description = sigmf::scene_collection_description(
            scene,
            &root.dataset_id,
            &self.dataset.snapshot().snapshot_id,
        );
        self.collection_of(&description, files, hashed)
    }

    // -----------------------------------------------------------------------------------------
    // columns
    // -----------------------------------------------------------------------------------------

    /// The index of `columns/` (see [`super::columns`]).
    fn column_index(&self) -> Result<Arc<ColumnIndex>, FsError> {
        let index = self
            .columns
            .get(&self.dataset, columns::price, columns::build)?;
        // The index read every row: its fingerprints spare decodes reading them again.
        if index.fingerprints().len() as u64 == self.dataset.len() {
            self.trees.know_fingerprints(index.fingerprints());
        }
        Ok(index)
    }

    /// The index of the label tables: the records' own labels (indexed with the columns)
    /// while the catalog shows no set, else the index of the catalog's sets with them, built
    /// in the background once per catalog (see [`columns::label_sets`]).
    fn label_index(&self, columns: &ColumnIndex) -> Result<Arc<LabelIndex>, FsError> {
        let visible = self.overlay.visible(&self.dataset);
        if visible.sets.is_empty() {
            return Ok(columns.labels.clone());
        }
        let build = {
            let mut current = crate::sync::lock(&self.set_labels);
            match &*current {
                Some((shown, build)) if Arc::ptr_eq(shown, &visible) => build.clone(),
                _ => {
                    let build = Arc::new(Background::new("columns/labels with annotation sets"));
                    *current = Some((visible.clone(), build.clone()));
                    build
                }
            }
        };
        let sets = visible.sets.clone();
        build.get(&self.dataset, columns::price, move |dataset, stop| {
            columns::label_sets::build(dataset, sets, stop)
        })
    }

    /// Whether column node `node` is a label table: while sets are shown, its contents
    /// follow the catalog, so it is cached and invalidated like the overlay.
    fn is_label_table(node: u32) -> bool {
        matches!(node, columns::LABELS_NODE | columns::LABELS_ARROW_NODE)
    }

    /// The inodes of the label tables, for the catalog watcher to invalidate on a change.
    pub fn label_table_inodes(&self) -> [u64; 2] {
        [
            Ino::Column(columns::LABELS_NODE).encode(),
            Ino::Column(columns::LABELS_ARROW_NODE).encode(),
        ]
    }

    fn read_column(&self, node: u32, offset: u64, size: u32) -> Result<Bytes, FsError> {
        let index = self.column_index()?;
        let (field, view) = match index.nodes.get(node as usize).ok_or(FsError::NotFound)? {
            Node::Dir { .. } => return Err(FsError::IsDir),
            Node::File { field, view, .. } => (*field, *view),
        };
        let column = index.columns.get(field as usize);
        let scan = self.continues_column_scan(node, offset, size);
        match (view, column) {
            (ColumnView::Readme, _) => Ok(slice_vec(&index.readme, offset, size)),
            (ColumnView::Lines, _) => self.read_lines(&index, offset, size),
            (ColumnView::Labels, _) => {
                let labels = self.label_index(&index)?;
                self.read_labels(&labels, offset, size)
            }
            (ColumnView::LabelsArrow, _) => {
                let labels = self.label_index(&index)?;
                let encode = |batch| self.label_batch(&labels, batch);
                let file = (view, labels.serial);
                self.read_arrow(file, &labels.arrow, offset, size, encode)
            }
            (ColumnView::RecordsArrow, _) => {
                let encode = |batch| self.record_batch(&index, batch);
                self.read_arrow((view, 0), &index.records_arrow, offset, size, encode)
            }
            (ColumnView::Raw, Some(column)) => {
                self.read_column_values(&index, column, offset, size, scan)
            }
            (ColumnView::Npy, Some(column)) => {
                with_header(column.header(view), offset, size, |offset, size| {
                    self.read_column_values(&index, column, offset, size, scan)
                })
            }
            (ColumnView::Offsets, Some(column)) => {
                with_header(column.header(view), offset, size, |offset, size| {
                    let bytes = column.offsets_bytes(index.records(), offset, size.into());
                    Ok(Bytes::from(bytes))
                })
            }
            (ColumnView::Shapes, Some(column)) => {
                with_header(column.header(view), offset, size, |offset, size| {
                    Ok(Bytes::from(column.shapes_bytes(offset, size.into())))
                })
            }
            (_, None) => Err(FsError::NotFound),
        }
    }

    /// Whether a read of column node `node` at `offset` starts where the last column read
    /// ended (remembering where this one ends).
    fn continues_column_scan(&self, node: u32, offset: u64, size: u32) -> bool {
        let mut last = crate::sync::lock(&self.column_scan);
        let continues = *last == (node, offset);
        *last = (node, offset.saturating_add(size.into()));
        continues
    }

    /// Bytes of a column's `.raw`: the stretches of the records the read covers, each from
    /// the record's decoded bytes (the same the record's own `.raw` serves). A read that
    /// continues a scan keeps the records after it decoded ahead; any other decodes only the
    /// records it covers. A record's row is read only when it must be decoded (to check its
    /// payload against): a column read builds no record tree.
    fn read_column_values(
        &self,
        index: &ColumnIndex,
        column: &columns::Column,
        offset: u64,
        size: u32,
        scan: bool,
    ) -> Result<Bytes, FsError> {
        let pieces = index.pieces(column, offset, size.into());
        let in_order = scan && pieces.len() > IN_ORDER_MIN_RECORDS;
        let _turn =
            in_order.then(|| interrupt::waiting(|| crate::sync::lock(&self.column_scan_turn)));
        if scan && pieces.len() > 1 {
            self.decode_from_the_end(&column.name, &pieces)?;
        }
        let mut joined = Vec::new();
        let mut unchecked = u64::MAX;
        for piece in &pieces {
            // Asking whether the requester was interrupted reads a /proc file: once per
            // MiB served, not per record (a 1 MiB read covers 64 records of 16 KiB).
            if unchecked >= INTERRUPT_CHECK_BYTES {
                interrupt::check()?;
                unchecked = 0;
            }
            unchecked += piece.len;
            let stretch = self.column_piece(column, piece, scan)?;
            if pieces.len() == 1 {
                return Ok(stretch);
            }
            if joined.is_empty() {
                joined.reserve_exact(pieces.iter().map(|p| p.len as usize).sum());
            }
            joined.extend_from_slice(&stretch);
        }
        Ok(Bytes::from(joined))
    }

    /// Decodes a scan's read's records from the last backwards, until one is cached or being
    /// decoded: the decode-ahead workers go forwards from the read's start, so the reader and
    /// the workers meet in the middle instead of the reader waiting on the record a worker
    /// holds (a sleep and a wake-up per record). A failure is left for the in-order pass to
    /// report.
    fn decode_from_the_end(
        &self,
        field: &String,
        pieces: &[columns::Piece],
    ) -> Result<(), FsError> {
        let mut unchecked = 0u64;
        for piece in pieces.iter().rev() {
            if unchecked >= INTERRUPT_CHECK_BYTES {
                interrupt::check()?;
                unchecked = 0;
            }
            unchecked += piece.len;
            let decoded = self.records.decode_if_idle(
                &self.dataset,
                &self.trees,
                piece.ordinal,
                std::slice::from_ref(field),
            );
            if !matches!(decoded, Ok(true)) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The bytes of one record's stretch of a column.
    fn column_piece(
        &self,
        column: &columns::Column,
        piece: &columns::Piece,
        scan: bool,
    ) -> Result<Bytes, FsError> {
        let bytes = self.decoded(piece.ordinal, std::slice::from_ref(&column.name))?;
        if scan {
            let (cache, trees, dataset) = (&self.records, &self.trees, &self.dataset);
            let window = Window::COLUMNS;
            self.ahead
                .step(cache, trees, dataset, piece.ordinal, window);
        } else {
            self.ahead.note_read(piece.ordinal);
        }
        let stretch = bytes
            .read_field(&column.name, piece.offset, piece.len as usize)
            .map_err(|e| {
                let field = format!("field {:?}", column.name);
                FsError::in_record_at(piece.ordinal, field, e)
            })?;
        if stretch.len() as u64 != piece.len {
            return Err(FsError::record(
                piece.ordinal,
                format!(
                    "field {:?} holds fewer bytes than its row says",
                    column.name
                ),
            ));
        }
        // A scan that has read a record through will not read it again (the kernel keeps the
        // column's pages): keeping it cached only made every next decode take fresh memory,
        // a page fault per 4 KiB, until the cache was full of records nobody would read.
        if scan && piece.ends_record {
            self.records.let_go(piece.ordinal);
        }
        Ok(stretch)
    }

    /// Bytes of `records.jsonl`: from the text the index keeps when it fits its share of the
    /// budget, else the lines of the records the read covers, from their rows.
    fn read_lines(&self, index: &ColumnIndex, offset: u64, size: u32) -> Result<Bytes, FsError> {
        if let Some(text) = index.lines_text() {
            return Ok(slice_vec(text, offset, size));
        }
        let (ordinals, skip) = index.lines_at(offset, size.into());
        let mut lines = Vec::new();
        self.each_row(ordinals, |ordinal, row| {
            lines.extend_from_slice(&columns::record_line(row, ordinal));
        })?;
        Ok(slice_vec(&lines, skip, size))
    }

    /// Bytes of `labels.jsonl`: the lines of the groups the read covers, each record decoded
    /// with its box fields (through the record cache).
    fn read_labels(&self, index: &LabelIndex, offset: u64, size: u32) -> Result<Bytes, FsError> {
        let end = offset.saturating_add(size.into()).min(index.len());
        let (groups, _) = index.groups_at(offset, size.into());
        let mut out = Vec::new();
        for at in groups {
            interrupt::check()?;
            let (Some(group), Some(bytes)) = (index.group(at), index.group_bytes(at)) else {
                break;
            };
            // Only the lines the read covers are written: a group may be 100,000 lines and
            // a reader asks for 4 KiB or 128 KiB at a time.
            let from = offset.max(bytes.start) - bytes.start;
            let to = end.min(bytes.end) - bytes.start;
            let width = u64::from(group.width.max(1));
            let lines = (from / width) as usize..to.div_ceil(width) as usize;
            let group_rows = self.label_rows(index, at)?;
            let shown = group_rows.rows.get(lines.clone()).unwrap_or_default();
            let text = write_lines(&group_rows.head.head(), shown, width as usize);
            let skip = from - lines.start as u64 * width;
            out.extend_from_slice(&slice_vec(&text, skip, clamp_u32(to - from)));
        }
        Ok(Bytes::from(out))
    }

    /// Bytes of an Arrow file of `columns/` (`view`, laid out by `layout`): its head and tail
    /// from the index, its batches encoded by `encode` (the last one encoded is kept for the
    /// reads that follow).
    fn read_arrow(
        &self,
        file: ArrowFile,
        layout: &Layout,
        offset: u64,
        size: u32,
        encode: impl Fn(usize) -> Result<Vec<u8>, FsError>,
    ) -> Result<Bytes, FsError> {
        let end = offset.saturating_add(size.into()).min(layout.len());
        let mut out = Vec::new();
        let mut at = offset;
        while at < end {
            let want = clamp_u32(end - at);
            let piece = match layout.part_at(at) {
                Part::Head(from) => slice_vec(layout.head(), from, want),
                Part::Tail(from) => slice_vec(layout.tail(), from, want),
                Part::Batch { index, offset } => {
                    let bytes = self.arrow_batch(file, layout, index, &encode)?;
                    slice_vec(&bytes, offset, want)
                }
            };
            if piece.is_empty() {
                break;
            }
            at += piece.len() as u64;
            out.extend_from_slice(&piece);
        }
        Ok(Bytes::from(out))
    }

    /// Batch `index` of an Arrow file, encoded (or the one kept from the last read).
    fn arrow_batch(
        &self,
        file: ArrowFile,
        layout: &Layout,
        index: usize,
        encode: impl Fn(usize) -> Result<Vec<u8>, FsError>,
    ) -> Result<Arc<Vec<u8>>, FsError> {
        if let Some(kept) = crate::sync::lock(&self.arrow_batch).as_ref() {
            if (kept.file, kept.index) == (file, index) {
                return Ok(kept.bytes.clone());
            }
        }
        let bytes = encode(index)?;
        if bytes.len() as u64 != layout.batch_len(index) {
            return Err(FsError::failed(format!(
                "columns/: an Arrow batch is {} bytes where {} were promised",
                bytes.len(),
                layout.batch_len(index)
            )));
        }
        let bytes = Arc::new(bytes);
        let mut kept = crate::sync::lock(&self.arrow_batch);
        *kept = None;
        if let Ok(charge) = self.dataset.memory().charge(bytes.len() as u64) {
            *kept = Some(KeptBatch {
                file,
                index,
                bytes: bytes.clone(),
                _charge: charge,
            });
        }
        Ok(bytes)
    }

    /// Batch `batch` of `labels.arrow`, from the records its groups cover.
    fn label_batch(&self, index: &LabelIndex, batch: usize) -> Result<Vec<u8>, FsError> {
        let (groups, mut skip, mut left) = index.batch_rows(batch).ok_or(FsError::NotFound)?;
        let mut columns = BatchColumns::default();
        for at in groups {
            interrupt::check()?;
            let group_rows = self.label_rows(index, at)?;
            let rows = &group_rows.rows;
            let from = usize::try_from(skip).unwrap_or(usize::MAX).min(rows.len());
            let taken = &rows[from..rows.len().min(from.saturating_add(left))];
            columns.add(&group_rows.head.head(), taken, index);
            left -= taken.len();
            skip = 0;
        }
        Ok(columns.encode())
    }

    /// Batch `batch` of `records.arrow`, from the rows of its records.
    fn record_batch(&self, index: &ColumnIndex, batch: usize) -> Result<Vec<u8>, FsError> {
        let mut columns = RecordColumns::default();
        self.each_row(index.record_batch(batch), |ordinal, row| {
            columns.add(ordinal, row)
        })?;
        Ok(columns.encode())
    }

    /// Hands each row of `ordinals` to `take`, in order (looking between rows whether the
    /// requester was interrupted).
    fn each_row(
        &self,
        ordinals: std::ops::Range<u64>,
        mut take: impl FnMut(u64, &crate::format::record::RecordMeta),
    ) -> Result<(), FsError> {
        for ordinal in ordinals {
            if ordinal % 256 == 0 {
                interrupt::check()?;
            }
            let row = self
                .dataset
                .record_meta(ordinal)
                .map_err(|e| FsError::in_record(ordinal, e))?;
            take(ordinal, &row);
        }
        Ok(())
    }

    /// Group `at`'s table rows, with what each of its lines starts with: those kept from the
    /// last read when it was of the same group (a group of many boxes is read in many pieces,
    /// and its rows are sorted whole), else made and kept, charged to the budget.
    fn label_rows(&self, index: &LabelIndex, at: usize) -> Result<Arc<GroupRows>, FsError> {
        if let Some(kept) = crate::sync::lock(&self.kept_group).as_ref() {
            if (kept.table, kept.group) == (index.serial, at) {
                return Ok(kept.rows.clone());
            }
        }
        let group = index.group(at).ok_or(FsError::NotFound)?;
        let (head, rows) = self.make_label_rows(index, group)?;
        let rows = Arc::new(GroupRows { head, rows });
        let mut kept = crate::sync::lock(&self.kept_group);
        *kept = None;
        if let Ok(charge) = self.dataset.memory().charge(rows.heap_bytes()) {
            *kept = Some(KeptGroup {
                table: index.serial,
                group: at,
                rows: rows.clone(),
                _charge: charge,
            });
        }
        Ok(rows)
    }

    /// A group's table rows, with what each of its lines starts with. A record whose boxes
    /// cannot be read gets rows of nulls (and a log line): the tables keep their sizes and
    /// the other records' rows.
    fn make_label_rows(
        &self,
        index: &LabelIndex,
        group: Group,
    ) -> Result<(OwnedHead, Vec<TableRow>), FsError> {
        let Some(set) = usize::from(group.set).checked_sub(1) else {
            return self.own_label_rows(group);
        };
        let set = index.sets.get(set).ok_or(FsError::NotFound)?;
        // The source record's tree first, for its ids only: nothing charged is held while
        // the carrier may wait for room (see `TreeCache::row_fingerprint`).
        let source = self.record_tree(group.ordinal)?;
        let ids = (source.row.id.to_string(), source.row.scene_id.clone());
        drop(source);
        let carrier = self
            .overlay
            .carrier(&self.dataset, set, group.ordinal, &self.trees)?;
        let field = group.field as usize;
        let (entry, plan) = shown_boxes(&carrier.tree, field, group.ordinal)?;
        let rows = carrier
            .box_tensors(plan)
            .ok_or_else(|| FsError::record(group.ordinal, "its carrier's box fields are gone"))
            .and_then(|tensors| read_box_rows(plan, &tensors, group.ordinal));
        let set = Some(Arc::from(set.name.as_str()));
        Ok(group_table(ids, &entry.name, set, plan, rows, group))
    }

    /// [`Namespace::label_rows`] of a group of the record's own labels.
    fn own_label_rows(&self, group: Group) -> Result<(OwnedHead, Vec<TableRow>), FsError> {
        let field = group.field as usize;
        let (tree, record) = self.tree_and_record(group.ordinal, |tree| box_fields(tree, field))?;
        let (entry, plan) = shown_boxes(&tree, field, group.ordinal)?;
        let rows = box_tensors(&tree, plan, record.as_deref())
            .and_then(|tensors| read_box_rows(plan, &tensors, group.ordinal));
        let ids = (tree.row.id.to_string(), tree.row.scene_id.clone());
        Ok(group_table(ids, &entry.name, None, plan, rows, group))
    }

    // -----------------------------------------------------------------------------------------
    // by-id and by-scene
    // -----------------------------------------------------------------------------------------

    /// `by-id/` and `by-scene/` (see [`super::row_index`]).
    fn indexes(&self) -> Result<Arc<Indexes>, FsError> {
        self.indexes.get(&self.dataset)
    }

    /// The index of the scene directory holding `by-scene/<scene>/<ordinal>`, from the
    /// record's row.
    fn scene_of(&self, ordinal: u64) -> Result<u64, FsError> {
        let tree = self.record_tree(ordinal)?;
        let scene = tree.row.scene_id.as_deref().ok_or(FsError::NotFound)?;
        let index = self
            .indexes()?
            .scene(&crate::format::names::encode_entry(scene))
            .ok_or(FsError::NotFound)?;
        Ok(index as u64)
    }
}

/// Bytes of a column read served between two checks of whether its requester was
/// interrupted.
const INTERRUPT_CHECK_BYTES: u64 = 1 << 20;

/// A scan's reads covering more records than this are served in order, one at a time (see
/// `Namespace::column_scan_turn`).
const IN_ORDER_MIN_RECORDS: usize = 4;

/// The fields of the boxes drawn on field `index`'s pictures (its label boxes' extents and
/// identities): none when it has no boxes.
fn box_fields(tree: &RecordTree, index: usize) -> Vec<String> {
    let plan = tree
        .fields
        .get(index)
        .and_then(|entry| entry.sigmf_meta.as_ref())
        .and_then(|layout| layout.drawn_boxes());
    let Some(plan) = plan else {
        return Vec::new();
    };
    let identity = plan.identity.as_ref().map(|(name, _)| name.clone());
    std::iter::once(plan.extent_field.clone())
        .chain(identity)
        .collect()
}

/// Field `index` of `tree` and the plan of the boxes its `.sigmf-meta` shows (a table
/// group's, which the index found there).
fn shown_boxes(
    tree: &RecordTree,
    index: usize,
    ordinal: u64,
) -> Result<(&super::record_tree::FieldEntry, &BoxPlan), FsError> {
    let entry = tree.fields.get(index).ok_or(FsError::NotFound)?;
    let plan = entry
        .sigmf_meta
        .as_ref()
        .and_then(|layout| layout.drawn_boxes())
        .ok_or_else(|| FsError::record(ordinal, "its label boxes are gone"))?;
    Ok((entry, plan))
}

/// The box table `plan` reads from `tensors`.
fn read_box_rows(
    plan: &BoxPlan,
    tensors: &BoxTensors,
    ordinal: u64,
) -> Result<Vec<BoxRow>, FsError> {
    sigmf::box_rows(plan, tensors)
        .map_err(|e| FsError::record(ordinal, format!("{}: {e}", plan.extent_field)))
}

/// A group's table rows from its boxes `rows` (null when they cannot be read), with what each
/// line starts with: the record's id and scene id (`ids`), the IQ field's name and the set's.
fn group_table(
    (record_id, scene_id): (String, Option<String>),
    field: &str,
    set: Option<Arc<str>>,
    plan: &BoxPlan,
    rows: Result<Vec<BoxRow>, FsError>,
    group: Group,
) -> (OwnedHead, Vec<TableRow>) {
    let head = OwnedHead {
        ordinal: group.ordinal,
        record_id,
        scene_id,
        field: field.to_string(),
        set,
    };
    let rows = null_if_unreadable(&head, rows);
    let table = table_rows(plan, rows.as_deref(), group.count);
    (head, table)
}

/// The boxes of a group, or `None` (logged) when they cannot be read: its lines are null.
fn null_if_unreadable(head: &OwnedHead, rows: Result<Vec<BoxRow>, FsError>) -> Option<Vec<BoxRow>> {
    match rows {
        Ok(rows) => Some(rows),
        Err(e) => {
            if super::log_limit::admit("labels-table") {
                tracing::warn!(
                    ordinal = head.ordinal,
                    field = head.field.as_str(),
                    set = head.set.as_deref(),
                    "columns/labels.jsonl: boxes unreadable, their lines are null: {e}"
                );
            }
            None
        }
    }
}

/// The fields whose tensors field `index`'s `.sigmf-meta` reads: its boxes' when its
/// annotations are their slots, none when it shows imported annotations (or has no boxes).
fn document_box_fields(tree: &RecordTree, index: usize) -> Vec<String> {
    let slots = tree
        .fields
        .get(index)
        .and_then(|entry| entry.sigmf_meta.as_ref())
        .and_then(|layout| layout.needs_tensors());
    match slots {
        Some(_) => box_fields(tree, index),
        None => Vec::new(),
    }
}

/// The fields a record's preview reads: each panel's, and the fields of its boxes.
fn preview_fields(tree: &RecordTree) -> Vec<String> {
    let mut fields = Vec::new();
    for (name, _) in &tree.preview_panels {
        fields.push(name.clone());
        if let Some(index) = tree.fields.iter().position(|f| &f.name == name) {
            fields.extend(box_fields(tree, index));
        }
    }
    fields.sort();
    fields.dedup();
    fields
}

/// A recording of a collection: its name there and its `.sigmf-meta` (record, file node, field,
/// size).
struct StreamFile {
    ordinal: u64,
    name: String,
    node: u32,
    field: usize,
    meta_len: u64,
}

/// The file node of field `field`'s `.sigmf-meta`.
fn meta_node(tree: &RecordTree, field: u32) -> Option<u32> {
    tree.nodes.iter().position(|node| {
        matches!(node, Node::File { field: f, view: View::SigmfMeta, .. } if *f == field)
    })
    .and_then(|index| u32::try_from(index).ok())
}

/// `record`, which a caller decoded because what it serves reads tensors.
fn at_hand<'a>(
    tree: &RecordTree,
    record: Option<&'a RecordBytes>,
) -> Result<&'a RecordBytes, FsError> {
    // A caller that did not decode the record where it needed it is a bug in this module,
    // answered as a failure of the record rather than a panic.
    record.ok_or_else(|| FsError::record(tree.ordinal, "decoded record not at hand"))
}

/// The box fields' tensors, from the decoded `record`.
fn box_tensors(
    tree: &RecordTree,
    plan: &BoxPlan,
    record: Option<&RecordBytes>,
) -> Result<BoxTensors, FsError> {
    let bytes = at_hand(tree, record)?;
    let read = |name: &str| -> Result<Bytes, FsError> {
        let len = tree
            .field_meta(name)
            .and_then(|f| f.byte_len().ok())
            .and_then(|len| usize::try_from(len).ok())
            .ok_or(FsError::NotFound)?;
        bytes
            .read_field(name, 0, len)
            .map_err(|e| FsError::in_record_at(tree.ordinal, format!("field {name:?}"), e))
    };
    Ok(BoxTensors {
        extent: read(&plan.extent_field)?,
        identity: match &plan.identity {
            Some((name, _)) => Some(read(name)?),
            None => None,
        },
    })
}

/// The boxes field `index` shows (those of its `.sigmf-meta`), absolute and sorted.
fn boxes_of(
    tree: &RecordTree,
    index: usize,
    record: Option<&RecordBytes>,
) -> Result<Vec<Annotation>, FsError> {
    let entry = tree.fields.get(index).ok_or(FsError::NotFound)?;
    match entry.sigmf_meta.as_ref().and_then(|l| l.drawn_boxes()) {
        Some(plan) => {
            let tensors = box_tensors(tree, plan, record)?;
            sigmf::converted_boxes(plan, &tensors, tree.ordinal, &entry.name)
        }
        None => Ok(Vec::new()),
    }
}

/// Renders a picture of record `tree` with `draw`, which reads its fields from the decoded
/// `record`; a picture whose size is not the one `stat` gave (`expected`) is an error, never
/// served.
fn render_picture(
    tree: &RecordTree,
    record: Option<&RecordBytes>,
    expected: u64,
    draw: impl FnOnce(&picture::ReadField) -> Result<Vec<u8>, FsError>,
) -> Result<Vec<u8>, FsError> {
    // A picture that shows no field (a preview with nothing to show) reads none: its record
    // is not decoded.
    let read = |name: &str, offset: u64, len: usize| {
        at_hand(tree, record)?
            .read_field(name, offset, len)
            .map_err(|e| FsError::in_record_at(tree.ordinal, format!("field {name:?}"), e))
    };
    let png = draw(&read).map_err(|e| FsError::in_record_at(tree.ordinal, "picture", e))?;
    if png.len() as u64 != expected {
        return Err(FsError::record(
            tree.ordinal,
            format!("picture of {} bytes, {expected} expected", png.len()),
        ));
    }
    Ok(png)
}

fn tree_child<V>(nodes: &[Node<V>], dir: u32, index: u64) -> Result<(u32, Kind, String), FsError> {
    let Some(Node::Dir { children, .. }) = nodes.get(dir as usize) else {
        return Err(FsError::NotDir);
    };
    let child = *children.get(index as usize).ok_or(FsError::NotFound)?;
    match nodes.get(child as usize) {
        Some(Node::Dir { name, .. }) => Ok((child, Kind::Dir, name.to_string())),
        Some(Node::File { name, .. }) => Ok((child, Kind::File, name.to_string())),
        None => Err(FsError::NotFound),
    }
}

/// A read of `size` bytes at `offset` of a file that is `header` followed by a body, whose
/// bytes `body(offset, size)` reads.
fn with_header(
    header: &[u8],
    offset: u64,
    size: u32,
    body: impl FnOnce(u64, u32) -> Result<Bytes, FsError>,
) -> Result<Bytes, FsError> {
    let header_len = header.len() as u64;
    if offset >= header_len {
        return body(offset - header_len, size);
    }
    // A read that starts in the header: header bytes, then body bytes.
    let head = slice_vec(header, offset, size);
    let rest = size - head.len() as u32;
    if rest == 0 {
        return Ok(head);
    }
    let tail = body(0, rest)?;
    if tail.is_empty() {
        return Ok(head);
    }
    let mut joined = Vec::with_capacity(head.len() + tail.len());
    joined.extend_from_slice(&head);
    joined.extend_from_slice(&tail);
    Ok(Bytes::from(joined))
}

fn slice(bytes: &Bytes, offset: u64, size: u32) -> Bytes {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let end = start.saturating_add(size as usize).min(bytes.len());
    bytes.slice(start..end)
}

/// The table rows of the label group last read, charged to the memory budget.
#[derive(Debug)]
struct KeptGroup {
    /// The [`LabelIndex::serial`] of the index the group is of.
    table: u64,
    group: usize,
    rows: Arc<GroupRows>,
    _charge: crate::budget::Charge,
}

/// An Arrow file of `columns/`, as what is kept of it is keyed: its view and, for
/// `labels.arrow`, the [`LabelIndex::serial`] of the index it is read from (0 otherwise).
type ArrowFile = (ColumnView, u64);

/// A batch of an Arrow file kept between reads, with its charge.
#[derive(Debug)]
struct KeptBatch {
    file: ArrowFile,
    index: usize,
    bytes: Arc<Vec<u8>>,
    _charge: crate::budget::Charge,
}

fn clamp_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn slice_vec(bytes: &[u8], offset: u64, size: u32) -> Bytes {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let end = start.saturating_add(size as usize).min(bytes.len());
    Bytes::copy_from_slice(&bytes[start..end])
}
