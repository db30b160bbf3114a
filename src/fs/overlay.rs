//! The annotation overlay of the mount: `annotations/<set>/set.json` at the top and
//! `records/<n>/annotations/<set>/{annotation.json, fields/...}` in every record.
//!
//! Why it is built this way:
//! - **The catalog is the one mutable object**, so it is re-read at most once per metadata TTL
//!   (`--metadata-ttl`): a newly published set appears without remounting. A re-read first
//!   compares the catalog pointer's bytes; unchanged bytes keep everything already loaded, and a
//!   set whose root reference is unchanged keeps its open objects across catalog changes.
//! - **Stable numbers for changing names.** A set's inode component is its index in an
//!   append-only registry of names that lives as long as the mount, so `annotations/<set>` keeps
//!   its number when other sets come and go. At most 256 names fit (`set:8`); later ones are
//!   hidden and logged.
//! - **Failures stay local.** A catalog pointer or revision that cannot be read leaves every
//!   `annotations/` directory empty (logged against `annotations/catalog.json`, through which
//!   the revision is reached). A set root that is invalid, or was published for another
//!   snapshot, hides that set only (logged once per catalog change). A carrier that cannot be
//!   read (its object missing or corrupt), or whose id is not the source record's, fails that
//!   set's files of that record only (EIO on `annotation.json`, the field files and the
//!   `fields/` listing, which all need it), never `records/<n>/annotations/<set>/`'s listing
//!   nor other records: `fields/` is a directory whatever the carrier holds, and the adapter
//!   lists an entry whose attributes fail with attributes valid for no time.
//! - **Changes show in the mtime.** Every directory and file of the overlay carries the time
//!   the mount first saw the current catalog as its mtime, so a kernel that caches listings
//!   (the readdir cache, asked to revalidate it against the mtime) drops them when it
//!   changes; unchanged catalog bytes keep the time.
//! - Carriers are decoded whole and kept in a small LRU keyed by set root and ordinal (a
//!   republished set has a new root, so nothing stale is served); annotation rows are small.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use lru::LruCache;

use crate::budget::{Budget, Charge, Reclaim};

use super::cache::TreeCache;
use super::error::FsError;
use super::inode::MAX_CARRIER_NODE;
use super::record_tree::{DatasetIds, Node, RecordTree};
use super::views::picture::{self, IqAxes};
use super::views::sigmf::{converted_boxes, BoxPlan, BoxTensors};
use super::views::View;
use crate::annotations::read::read_pointer;
use crate::annotations::{read_catalog, AnnotationError, AnnotationRecord, AnnotationSet};
use crate::dataset::Dataset;
use crate::format::documents::annotation::layout::catalog_path;
use crate::format::documents::CatalogPointer;
use crate::format::json::Object;
use crate::format::record::{LazyRow, RecordMeta};
use crate::sync::lock;

/// A set the mount shows.
#[derive(Debug)]
pub struct VisibleSet {
    pub index: u8,
    pub name: String,
    pub set: Arc<AnnotationSet>,
}

/// The sets shown after one catalog read, sorted by name.
#[derive(Debug)]
pub struct Visible {
    pub sets: Vec<Arc<VisibleSet>>,
    pointer: Bytes,
    /// When this mount first saw these sets (the overlay's mtime).
    pub seen_at: SystemTime,
}

impl Visible {
    /// No sets, as of now.
    fn empty() -> Visible {
        Visible {
            sets: Vec::new(),
            pointer: Bytes::new(),
            seen_at: SystemTime::now(),
        }
    }
}

impl Visible {
    pub fn by_index(&self, index: u8) -> Option<&Arc<VisibleSet>> {
        self.sets.iter().find(|s| s.index == index)
    }

    pub fn by_name(&self, name: &str) -> Option<&Arc<VisibleSet>> {
        self.sets
            .binary_search_by(|s| s.name.as_str().cmp(name))
            .ok()
            .and_then(|i| self.sets.get(i))
    }
}

/// One record's annotation in one set, decoded and laid out.
#[derive(Debug)]
pub struct Carrier {
    /// Unique among the carriers of this process: with a node it names the carrier's
    /// computed files in a cache ([`Carrier::computed_key`]). A carrier never changes, so its
    /// files never go stale; a catalog change builds new carriers with new numbers.
    serial: u64,
    pub row: AnnotationRecord,
    pub annotation_json: Vec<u8>,
    /// The carrier's tensor fields as a file tree (node 0 is `fields/`).
    pub tree: RecordTree,
    /// Its memory, charged to the mount's budget while it lives.
    _charge: Charge,
}

/// Carriers kept (LRU by count), giving their entries back to the memory budget on demand.
#[derive(Debug)]
struct CarrierCache(Mutex<LruCache<(String, u64), Arc<Carrier>>>);

impl Reclaim for CarrierCache {
    fn reclaim_one(&self) -> bool {
        let evicted = lock(&self.0).pop_lru();
        evicted.is_some()
    }
}

impl Carrier {
    /// The box tensors of `plan`, from the carrier's row.
    pub fn box_tensors(&self, plan: &BoxPlan) -> Option<BoxTensors> {
        let tensor = |name: &str| self.row.fields.get(name).map(|f| f.data.clone());
        Some(BoxTensors {
            extent: tensor(&plan.extent_field)?,
            identity: plan.identity.as_ref().and_then(|(name, _)| tensor(name)),
        })
    }

    /// The spectrogram of an IQ field of the carrier, with its boxes.
    fn spectrogram(&self, index: usize) -> Option<Vec<u8>> {
        let entry = self.tree.fields.get(index)?;
        let plan = entry.sigmf_meta.as_ref().and_then(|l| l.drawn_boxes());
        let boxes = plan
            .and_then(|plan| {
                let tensors = self.box_tensors(plan)?;
                converted_boxes(plan, &tensors, self.tree.ordinal, &entry.name).ok()
            })
            .unwrap_or_default();
        let read = |name: &str, offset: u64, len: usize| -> Result<Bytes, FsError> {
            let data = self
                .row
                .fields
                .get(name)
                .ok_or_else(|| FsError::failed("field missing"))?;
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(data.data.len());
            let end = start.saturating_add(len).min(data.data.len());
            Ok(data.data.slice(start..end))
        };
        let axes = IqAxes::of(&*self.tree.field_meta_at(index)?);
        picture::spectrogram_png(self.tree.id(), &entry.name, &axes, &boxes, &read).ok()
    }

    /// The key of file node `node`'s computed file (`.sigmf-meta`, picture), or `None` for
    /// a file that is not computed (tensor views, descriptors).
    pub fn computed_key(&self, node: u32) -> Option<u64> {
        let Some(Node::File { view, .. }) = self.tree.node(node) else {
            return None;
        };
        matches!(view, View::SigmfMeta | View::Spectrogram)
            .then_some(self.serial << 24 | u64::from(node))
    }

    /// The bytes of file node `node` of the field tree.
    pub fn file_bytes(&self, node: u32) -> Option<Bytes> {
        let Some(Node::File { field, view, .. }) = self.tree.node(node) else {
            return None;
        };
        let entry = self.tree.fields.get(*field as usize)?;
        let data = || self.row.fields.get(&entry.name).map(|f| f.data.clone());
        Some(match view {
            View::Raw | View::SigmfData => data()?,
            View::Json => Bytes::from(self.tree.field_json(*field as usize)?),
            View::SigmfMeta => {
                let layout = entry.sigmf_meta.as_ref()?;
                let tensors = layout
                    .needs_tensors()
                    .and_then(|plan| self.box_tensors(plan));
                Bytes::from(
                    self.tree
                        .render_sigmf_meta(*field as usize, tensors.as_ref())?
                        .ok()?,
                )
            }
            View::Spectrogram => Bytes::from(self.spectrogram(*field as usize)?),
            View::Npy => {
                let mut out = self.tree.npy_header(*field as usize)?;
                out.extend_from_slice(&data()?);
                Bytes::from(out)
            }
        })
    }
}

#[derive(Debug)]
struct State {
    loaded_at: Option<Instant>,
    visible: Arc<Visible>,
}

/// The file tree of `row`, the annotation of record `ordinal` (whose row is `source`) in a
/// set (`in_set` names it for errors): the carrier's own fields and the metadata-only
/// `.sigmf-meta`s of the source fields its boxes label. What the overlay shows and the label
/// tables count.
pub fn carrier_tree(
    dataset: &Dataset,
    in_set: &str,
    ordinal: u64,
    row: &AnnotationRecord,
    source: &RecordMeta,
) -> Result<RecordTree, FsError> {
    let meta = RecordMeta {
        id: row.source_record_id.clone(),
        scene_id: None,
        metadata: Object::new(),
        fields: row
            .fields
            .iter()
            .map(|(name, field)| (name.clone(), field.meta.clone()))
            .collect(),
    };
    let ids = DatasetIds {
        dataset_id: &dataset.root().dataset_id,
        snapshot_id: &dataset.snapshot().snapshot_id,
    };
    let carrier = LazyRow::of_meta(&meta).map_err(|e| FsError::in_record_at(ordinal, in_set, e))?;
    let tree = RecordTree::build_carrier(ordinal, carrier, Some(source), ids)
        .map_err(|e| FsError::in_record_at(ordinal, in_set, e))?;
    if tree.nodes.len() as u64 > u64::from(MAX_CARRIER_NODE) + 1 {
        return Err(FsError::record(
            ordinal,
            format!("{in_set}: the carrier's fields need more than {MAX_CARRIER_NODE} files"),
        ));
    }
    Ok(tree)
}

/// The full location of the catalog pointer, which every catalog problem is logged against (a
/// revision is reached only through it).
fn catalog_name(dataset: &Dataset) -> String {
    catalog_path().map_or_else(
        |_| CatalogPointer::DOCUMENT.to_string(),
        |path| dataset.store().describe(&path),
    )
}

/// The overlay's state: catalog, registry, carriers.
#[derive(Debug)]
pub struct Overlay {
    ttl: Duration,
    state: Mutex<State>,
    registry: Mutex<Vec<String>>,
    carriers: Arc<CarrierCache>,
    memory: Arc<Budget>,
}

/// The sets a catalog read hides, counted: a revision may name up to a million sets, and
/// a line for each would be tens of megabytes of log on every read. One line per reason
/// names the count and the first set (with its error).
#[derive(Default)]
struct Hidden {
    broken: usize,
    first_broken: Option<(String, String)>,
    unregistered: usize,
    first_unregistered: Option<String>,
}

impl Hidden {
    fn broken(&mut self, name: &str, error: &AnnotationError) {
        self.broken += 1;
        self.first_broken
            .get_or_insert_with(|| (name.to_string(), error.to_string()));
    }

    fn unregistered(&mut self, name: &str) {
        self.unregistered += 1;
        self.first_unregistered
            .get_or_insert_with(|| name.to_string());
    }

    fn log(&self) {
        if let Some((first, error)) = &self.first_broken {
            tracing::warn!(hidden = self.broken, first = %first, error = %error, "annotation sets hidden: unreadable or stale (the first named)");
        }
        if let Some(first) = &self.first_unregistered {
            tracing::warn!(hidden = self.unregistered, first = %first, "annotation sets hidden: more than 256 set names seen by this mount (the first named)");
        }
    }
}

impl Overlay {
    /// An overlay re-reading the catalog every `ttl`, its carriers charged to `memory`.
    pub fn new(ttl: Duration, memory: &Arc<Budget>) -> Overlay {
        let carriers = Arc::new(CarrierCache(Mutex::new(LruCache::new(
            NonZeroUsize::new(1024).unwrap_or(NonZeroUsize::MIN),
        ))));
        memory.register(&carriers);
        Overlay {
            ttl,
            state: Mutex::new(State {
                loaded_at: None,
                visible: Arc::new(Visible::empty()),
            }),
            registry: Mutex::new(Vec::new()),
            carriers,
            memory: memory.clone(),
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The sets to show now, re-reading the catalog when the last read is older than the TTL.
    pub fn visible(&self, dataset: &Dataset) -> Arc<Visible> {
        let previous = {
            let state = lock(&self.state);
            match state.loaded_at {
                Some(at) if at.elapsed() < self.ttl => return state.visible.clone(),
                _ => state.visible.clone(),
            }
        };
        self.load(dataset, &previous)
    }

    /// The sets to show now, the catalog re-read whatever the age of the last read (the
    /// catalog watcher's tick). Unchanged catalog bytes return the same `Arc`.
    pub fn refresh(&self, dataset: &Dataset) -> Arc<Visible> {
        let previous = lock(&self.state).visible.clone();
        self.load(dataset, &previous)
    }

    fn load(&self, dataset: &Dataset, previous: &Arc<Visible>) -> Arc<Visible> {
        let visible = self.reload(dataset, previous);
        let mut state = lock(&self.state);
        state.loaded_at = Some(Instant::now());
        state.visible = visible.clone();
        visible
    }

    fn reload(&self, dataset: &Dataset, previous: &Arc<Visible>) -> Arc<Visible> {
        match read_pointer(dataset) {
            Ok(Some((_, _, bytes))) if bytes == previous.pointer => return previous.clone(),
            Ok(None) if previous.pointer.is_empty() => return previous.clone(),
            _ => {}
        }
        let catalog = match read_catalog(dataset) {
            Ok(catalog) => catalog,
            Err(e) => {
                let catalog = catalog_name(dataset);
                tracing::error!(error = %e, "{catalog}: annotation catalog unreadable: every annotations/ directory is empty");
                return Arc::new(Visible::empty());
            }
        };
        let mut sets = Vec::new();
        let mut hidden = Hidden::default();
        for (name, set) in catalog.sets {
            let set = match set {
                Ok(set) => set,
                Err(e) => {
                    hidden.broken(&name, &e);
                    continue;
                }
            };
            let Some(index) = self.register(&name) else {
                hidden.unregistered(&name);
                continue;
            };
            let set = match previous.by_name(&name) {
                Some(old) if old.set.reference() == set.reference() => old.set.clone(),
                _ => set,
            };
            sets.push(Arc::new(VisibleSet { index, name, set }));
        }
        hidden.log();
        tracing::info!(sets = sets.len(), "annotation catalog read");
        Arc::new(Visible {
            sets,
            pointer: catalog.pointer_bytes,
            seen_at: SystemTime::now(),
        })
    }

    /// The registry index of `name`, assigned on first sight.
    fn register(&self, name: &str) -> Option<u8> {
        let mut registry = lock(&self.registry);
        if let Some(i) = registry.iter().position(|n| n == name) {
            return u8::try_from(i).ok();
        }
        let index = u8::try_from(registry.len()).ok()?;
        registry.push(name.to_string());
        Some(index)
    }

    /// The annotation of `ordinal` in `set`, checked against the source record (its tree from
    /// `trees`).
    pub fn carrier(
        &self,
        dataset: &Dataset,
        set: &VisibleSet,
        ordinal: u64,
        trees: &TreeCache,
    ) -> Result<Arc<Carrier>, FsError> {
        let key = (set.set.reference().path.to_string(), ordinal);
        if let Some(carrier) = lock(&self.carriers.0).get(&key) {
            return Ok(carrier.clone());
        }
        let in_set = format!("set {:?}", set.name);
        let row = set
            .set
            .get_unaligned(dataset, ordinal)
            .map_err(|e| FsError::in_record_at(ordinal, &in_set, e))?;
        // The source record's tree only now: nothing charged is held while the set's group
        // may wait for room (see `TreeCache::row_fingerprint`).
        let source = trees.get(dataset, ordinal)?;
        if row.source_record_id != source.id() {
            return Err(FsError::record(
                ordinal,
                format!(
                    "{in_set}: carrier id {:?} is not the source record's id {:?}",
                    row.source_record_id,
                    source.id()
                ),
            ));
        }
        let source_meta = source
            .record_meta()
            .map_err(|e| FsError::in_record_at(ordinal, &in_set, e))?;
        let tree = carrier_tree(dataset, &in_set, ordinal, &row, &source_meta)?;
        for clash in &tree.clashes {
            tracing::warn!(set = %set.name, ordinal, path = %clash, "annotation field path clashes and is not shown");
        }
        let annotation_json = row.to_annotation_json(&set.name).into_bytes();
        let tensors: usize = row.fields.values().map(|f| f.data.len()).sum();
        let held = super::cache::tree_bytes(&tree) + (annotation_json.len() + tensors) as u64;
        let charge = self.memory.charge(held).map_err(|e| {
            FsError::in_record_at(
                ordinal,
                format!("{in_set}: its annotation (--cache-size)"),
                e,
            )
        })?;
        static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let carrier = Arc::new(Carrier {
            serial: SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            annotation_json,
            row,
            tree,
            _charge: charge,
        });
        lock(&self.carriers.0).put(key, carrier.clone());
        Ok(carrier)
    }
}
