//! Builders for the dataset tests: realistic records, datasets published into temporary
//! directories through `write_shard` + `publish`, hand-written control documents, and a
//! counting `ObjectStore` decorator that records which objects a reader touches.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sdsfs::dataset::{
    publish, write_shard, Dataset, OpenOptions, PublishOptions, PublishSummary, ShardOptions,
    ShardReceipt,
};
use sdsfs::format::documents::{DatasetRoot, ManifestPage, ManifestRef, Reference, Snapshot};
use sdsfs::format::dtype::{DType, ALL_DTYPES};
use sdsfs::format::json::{self, Object, Value};
use sdsfs::format::path::RelPath;
use sdsfs::format::record::{Axis, Coordinate, Field, Record};
use sdsfs::storage::{LocalStore, ObjectStore, Observed, StorageError, StoreObserver, StoreOp};
use tempfile::TempDir;

/// A small deterministic generator (xorshift), so datasets are reproducible without seeds.
pub struct Bits(u64);

impl Bits {
    pub fn new(seed: u64) -> Bits {
        Bits(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

pub fn obj(pairs: &[(&str, Value)]) -> Object {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), v.clone()))
        .collect()
}

/// Data of `count` elements of `dtype` (bools are 0/1).
fn data_for(dtype: DType, count: u64, bits: &mut Bits) -> Vec<u8> {
    let len = (count * dtype.itemsize()) as usize;
    let mut data = bits.bytes(len);
    if dtype == DType::Bool {
        data.iter_mut().for_each(|b| *b &= 1);
    }
    data
}

/// Record `serial`: an IQ capture (`complex64` with a regular time coordinate), a label field
/// cycling through every dtype (shape [1] every fourth record), record metadata, and a scene id on
/// even serials.
pub fn record(serial: usize) -> Record {
    let mut bits = Bits::new(serial as u64 + 1);
    let samples = 8 + (serial % 5) as u64;
    let iq = Field::new(
        DType::C64,
        vec![samples],
        data_for(DType::C64, samples, &mut bits),
    )
    .unwrap()
    .with_axes(vec![Axis::new("time", samples)
        .with_role("time")
        .with_id("t")
        .with_coordinate(Coordinate::regular(0.0, 1e-6).with_unit("s"))])
    .with_metadata(obj(&[("center_hz", Value::Float(2.4e9 + serial as f64))]));
    let dtype = ALL_DTYPES[serial % ALL_DTYPES.len()];
    // Shape [1] rather than 0-d: writers refuse 0-d fields (the library cannot represent them).
    let shape: Vec<u64> = if serial % 4 == 0 {
        vec![1]
    } else {
        vec![(serial % 3) as u64 + 1, 2]
    };
    let count: u64 = shape.iter().product();
    let label = Field::new(dtype, shape.clone(), data_for(dtype, count, &mut bits))
        .unwrap()
        .with_axes(
            shape
                .iter()
                .enumerate()
                .map(|(i, &n)| Axis::new(format!("a{i}"), n))
                .collect(),
        );
    let mut record = Record::new(format!("capture-{serial:05}"))
        .with_metadata(obj(&[
            ("serial", Value::Int(serial as i128)),
            ("snr_db", Value::Float(0.5 * serial as f64)),
            ("tags", Value::Array(vec!["rf".into(), "ü".into()])),
        ]))
        .with_field("iq", iq)
        .with_field("label", label);
    if serial % 2 == 0 {
        record = record.with_scene_id(format!("scene-{}", serial % 3));
    }
    record
}

/// A complex64 IQ field holding `data` (8 bytes per sample) sampled at 1 MHz: a regular time
/// coordinate and the `time_coordinates` block that gives it a SigMF pair in the mount.
pub fn iq_capture(data: Vec<u8>) -> Field {
    let samples = data.len() as u64 / 8;
    let block = obj(&[
        ("kind", Value::from("uniform")),
        ("sample_rate_hz", Value::Int(1_000_000)),
    ]);
    Field::new(DType::C64, vec![samples], data)
        .unwrap()
        .with_axes(vec![Axis::new("time", samples)
            .with_role("time")
            .with_coordinate(Coordinate::regular(0.0, 1e-6).with_unit("s"))])
        .with_metadata(obj(&[("time_coordinates", Value::Object(block))]))
}

/// A dataset published in a temporary directory.
pub struct Published {
    pub dir: TempDir,
    pub store: Arc<LocalStore>,
    /// Every record, in ordinal order.
    pub records: Vec<Record>,
    /// The receipts `publish` received, in work order.
    pub receipts: Vec<ShardReceipt>,
    pub summary: PublishSummary,
    pub options: PublishOptions,
}

impl Published {
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn open(&self) -> Dataset {
        Dataset::open(self.store.clone(), OpenOptions::default()).unwrap()
    }

    /// Opens through a counting decorator, returning both.
    pub fn open_counting(&self, options: OpenOptions) -> (Dataset, Arc<CountingStore>) {
        let counting = Arc::new(CountingStore::new(self.store.clone()));
        let dataset = Dataset::open(counting.clone(), options).unwrap();
        (dataset, counting)
    }

    /// The absolute path of a dataset-relative object.
    pub fn file(&self, rel: &str) -> std::path::PathBuf {
        self.dir.path().join(rel)
    }
}

pub fn local_store(dir: &Path) -> Arc<LocalStore> {
    Arc::new(LocalStore::open(dir).unwrap())
}

/// Work id of shard `i`.
pub fn work_id(i: usize) -> String {
    format!("work-{i:03}")
}

/// Writes one shard per entry of `shard_sizes` (records numbered consecutively; a 0 writes an
/// empty shard, which publication keeps as an entry of no record) and returns the receipts and
/// the records.
pub fn write_shards(
    store: &dyn ObjectStore,
    shard_sizes: &[usize],
) -> (Vec<ShardReceipt>, Vec<Record>) {
    write_shards_at(store, shard_sizes, 0)
}

/// [`write_shards`] as attempt `attempt` of every work id: a re-publication of other records
/// under the same work ids needs a new attempt, since a shard pair's name is its work id and
/// attempt (writing other bytes under a taken name is a collision).
pub fn write_shards_at(
    store: &dyn ObjectStore,
    shard_sizes: &[usize],
    attempt: u64,
) -> (Vec<ShardReceipt>, Vec<Record>) {
    let mut receipts = Vec::new();
    let mut all = Vec::new();
    let mut serial = 0;
    for (i, &size) in shard_sizes.iter().enumerate() {
        let records: Vec<Record> = (serial..serial + size).map(record).collect();
        serial += size;
        let receipt = write_shard(
            store,
            records.clone(),
            &work_id(i),
            attempt,
            &ShardOptions::default(),
        )
        .unwrap();
        receipts.push(receipt);
        all.extend(records);
    }
    (receipts, all)
}

/// Publishes shards of `shard_sizes` records with at most `shards_per_manifest` per page.
pub fn publish_dataset(shard_sizes: &[usize], shards_per_manifest: usize) -> Published {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let (receipts, records) = write_shards(store.as_ref(), shard_sizes);
    let mut options = PublishOptions::new("ds-test", "snap-1");
    options.shards_per_manifest = shards_per_manifest;
    options.metadata = obj(&[("campaign", "unit-tests".into())]);
    let summary = publish(store.as_ref(), &receipts, &options).unwrap();
    Published {
        dir,
        store,
        records,
        receipts,
        summary,
        options,
    }
}

/// Writes `text` create-only at `path` and returns a reference to it.
pub fn put_document(store: &dyn ObjectStore, path: &str, text: &str) -> Reference {
    let path = RelPath::new(path).unwrap();
    store.create(&path, text.as_bytes()).unwrap();
    Reference::new(path, text.len() as u64)
}

/// Publishes `pages` (each a list of shard entries with global first ordinals) as snapshot
/// `snapshot_id` with a root, by hand, without any of `publish`'s checks. Returns the root
/// directory-relative paths of the page documents.
pub fn write_documents_by_hand(
    store: &dyn ObjectStore,
    dataset_id: &str,
    snapshot_id: &str,
    pages: Vec<Vec<sdsfs::format::documents::ShardEntry>>,
) -> Vec<String> {
    write_documents_pinned(store, dataset_id, snapshot_id, pages, |_| None)
}

/// [`write_documents_by_hand`], each manifest-page and snapshot reference carrying the
/// generation `pin` gives for the document just written (section 7's optional `generation`).
pub fn write_documents_pinned(
    store: &dyn ObjectStore,
    dataset_id: &str,
    snapshot_id: &str,
    pages: Vec<Vec<sdsfs::format::documents::ShardEntry>>,
    pin: impl Fn(&RelPath) -> Option<u64>,
) -> Vec<String> {
    let put = |path: &str, text: &str| {
        let mut reference = put_document(store, path, text);
        reference.generation = pin(&reference.path);
        reference
    };
    let mut manifests = Vec::new();
    let mut paths = Vec::new();
    let mut first = 0;
    for (index, shards) in pages.into_iter().enumerate() {
        let page = ManifestPage::from_shards(first, shards).unwrap();
        first += page.record_count;
        let path = sdsfs::format::documents::ids::manifest_path(snapshot_id, index as u64).unwrap();
        let reference = put(path.as_str(), &page.to_json());
        paths.push(path.to_string());
        let object = sdsfs::format::documents::ObjectRef {
            path: reference.path.into(),
            stored_bytes: reference.stored_bytes,
            generation: reference.generation,
        };
        manifests.push(ManifestRef::for_page(&page, object));
    }
    let snapshot = Snapshot::from_manifests(snapshot_id, manifests).unwrap();
    let snapshot_rel = sdsfs::format::documents::ids::snapshot_path(snapshot_id).unwrap();
    let snapshot_ref = put(snapshot_rel.as_str(), &snapshot.to_json());
    let root = DatasetRoot::new(dataset_id, snapshot_ref, Object::new());
    put_document(store, "root.json", &root.to_json());
    paths
}

/// Copies every object of `from` (a dataset directory) into a fresh directory, except those
/// whose relative path satisfies `skip`.
pub fn copy_tree(from: &Path, skip: impl Fn(&str) -> bool) -> TempDir {
    let to = tempfile::tempdir().unwrap();
    let mut stack = vec![from.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(from)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            if skip(&rel) {
                continue;
            }
            let target = to.path().join(&rel);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(&path, &target).unwrap();
        }
    }
    to
}

/// Every regular file below `root`: its `/`-separated relative path and its path.
pub fn files_below(root: &Path) -> Vec<(String, std::path::PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(root).unwrap().to_str().unwrap();
                out.push((relative.to_string(), path.clone()));
            }
        }
    }
    out
}

/// Every file below `dir`, relative path → bytes.
pub fn snapshot_tree(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    files_below(dir)
        .into_iter()
        .map(|(relative, path)| (relative, std::fs::read(path).unwrap()))
        .collect()
}

/// A record as comparable JSON (the shape `dataset_tool.py read` prints): id, scene id,
/// metadata, and per field dtype, shape, axes, metadata and the SHA-256 of its bytes.
pub fn record_summary(record: &Record) -> serde_json::Value {
    let mut fields = serde_json::Map::new();
    for (name, field) in &record.fields {
        let meta = &field.meta;
        let axes: Vec<Value> = meta.axes.iter().map(axis_value).collect();
        fields.insert(
            name.clone(),
            serde_json::json!({
                "dtype": meta.dtype.dtype_str(),
                "shape": meta.shape,
                "sha256": sdsfs::format::documents::ids::sha256_hex(&field.data),
                "axes": to_serde(&Value::Array(axes)),
                "metadata": to_serde(&Value::Object(meta.metadata.clone())),
            }),
        );
    }
    serde_json::json!({
        "id": record.id,
        "scene_id": record.scene_id,
        "metadata": to_serde(&Value::Object(record.metadata.clone())),
        "fields": fields,
    })
}

/// An axis in its descriptor JSON form (every key present).
fn axis_value(axis: &Axis) -> Value {
    let coordinate = axis.coordinate.as_ref().map_or(Value::Null, |c| {
        let opt = |v: &Option<Value>| v.clone().unwrap_or(Value::Null);
        let opt_s = |v: &Option<String>| v.clone().map_or(Value::Null, Value::from);
        Value::Object(obj(&[
            ("metadata", Value::Object(c.metadata.clone())),
            ("reference", opt_s(&c.reference)),
            ("start", opt(&c.start)),
            ("step", opt(&c.step)),
            ("unit", opt_s(&c.unit)),
            ("values", c.values.clone().map_or(Value::Null, Value::Array)),
        ]))
    });
    let opt_s = |v: &Option<String>| v.clone().map_or(Value::Null, Value::from);
    Value::Object(obj(&[
        ("coordinate", coordinate),
        ("id", opt_s(&axis.id)),
        ("length", Value::Int(axis.length as i128)),
        ("metadata", Value::Object(axis.metadata.clone())),
        ("name", axis.name.as_str().into()),
        ("role", opt_s(&axis.role)),
    ]))
}

/// Our JSON value as serde_json's (through deterministic text, so numbers keep int/float).
pub fn to_serde(value: &Value) -> serde_json::Value {
    serde_json::from_str(&json::to_compact(value)).unwrap()
}

/// One storage call a [`CountingStore`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub op: &'static str,
    pub path: String,
}

/// Delegates to a store and records every call (operation and relative path), and the bytes
/// content reads returned. Opaque: not a local store, so every read is a `read*` call.
pub type CountingStore = Observed<CallLog>;

/// What a [`CountingStore`] saw.
#[derive(Debug, Default)]
pub struct CallLog {
    calls: Mutex<Vec<Call>>,
    bytes_read: AtomicU64,
}

impl StoreObserver for CallLog {
    fn observe(
        &self,
        _store: &dyn ObjectStore,
        op: StoreOp,
        path: &RelPath,
        outcome: Result<u64, &StorageError>,
    ) {
        self.calls.lock().unwrap().push(Call {
            op: op.name(),
            path: path.as_str().to_string(),
        });
        let content = matches!(
            op,
            StoreOp::Read | StoreOp::ReadLimited | StoreOp::ReadRange
        );
        if let (true, Ok(bytes)) = (content, outcome) {
            self.bytes_read.fetch_add(bytes, Ordering::SeqCst);
        }
    }
}

/// The counting store's constructor and queries.
pub trait Counting {
    fn new(inner: Arc<dyn ObjectStore>) -> Self;
    fn take_bytes_and_reads(&self) -> (u64, u64);
    fn calls(&self) -> Vec<Call>;
    fn clear(&self);
    fn take_paths(&self) -> Vec<String>;
    fn touched(&self) -> BTreeSet<String>;
    fn content_reads(&self) -> Vec<String>;
    fn whole_reads(&self, path: &str) -> usize;
}

impl Counting for CountingStore {
    fn new(inner: Arc<dyn ObjectStore>) -> CountingStore {
        Observed::opaque(inner, CallLog::default())
    }

    /// Bytes returned by content reads and the number of content reads since the last take;
    /// then starts both counts afresh.
    fn take_bytes_and_reads(&self) -> (u64, u64) {
        let calls = std::mem::take(&mut *self.observer().calls.lock().unwrap());
        let reads = calls
            .iter()
            .filter(|c| matches!(c.op, "read" | "read_limited" | "read_range"))
            .count() as u64;
        (self.observer().bytes_read.swap(0, Ordering::SeqCst), reads)
    }

    fn calls(&self) -> Vec<Call> {
        self.observer().calls.lock().unwrap().clone()
    }

    fn clear(&self) {
        self.observer().calls.lock().unwrap().clear();
    }

    /// Paths of every call since the last clear, in order; then clears.
    fn take_paths(&self) -> Vec<String> {
        let calls = std::mem::take(&mut *self.observer().calls.lock().unwrap());
        calls.into_iter().map(|c| c.path).collect()
    }

    /// Every object touched by any call since the last clear.
    fn touched(&self) -> BTreeSet<String> {
        self.calls().into_iter().map(|c| c.path).collect()
    }

    /// Objects whose content was read (not just stat'ed).
    fn content_reads(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| c.op != "info")
            .map(|c| c.path)
            .collect()
    }

    /// How many whole-object reads of `path` happened.
    fn whole_reads(&self, path: &str) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.path == path && (c.op == "read" || c.op == "read_limited"))
            .count()
    }
}

/// `records` in one shard, published as dataset `dataset_id` (snapshot `s1`) in a temporary
/// directory.
pub fn publish_records(records: Vec<Record>, dataset_id: &str) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let receipt = write_shard(&store, records, "w0", 0, &ShardOptions::default()).unwrap();
    publish(&store, &[receipt], &PublishOptions::new(dataset_id, "s1")).unwrap();
    dir
}
