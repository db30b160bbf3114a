//! The `claims` target: what the mount does with the resource claims of a dataset (record,
//! shard and page counts, first ordinals, `record_indices`, `stored_bytes`, chunk and group
//! sizes, nesting), in process, under a small memory budget.
//!
//! A real small dataset is published once per process ([`base`]): two shards (3 records with
//! `group_size:1`, 5 with `group_size:3`) on two manifest pages. An input replaces some of its
//! objects, in sections:
//!
//! ```text
//! === snapshot
//! <the new bytes of the snapshot>
//! === page1
//! <the new bytes of the second manifest page>
//! ```
//!
//! Objects: `root`, `snapshot`, `page0`, `page1`, `meta0`, `data0`, `meta1`, `data1`. The
//! references to every changed object get their `stored_bytes` fixed up, up to the root
//! ([`reseal`]), so a mutation reaches past the size checks to the rule it breaks. The files are
//! written to a fresh directory, the dataset opened with a 16 MiB memory budget, and the mount's
//! core walked as `ls`, `stat` and `cat` would ([`Walk`]): the top level, the first and last few
//! records (never the whole listing) and a few of their files, `by-id/`, `by-scene/`,
//! `annotations/`.
//!
//! Properties besides "no panic" (in any thread: a panic hook counts them):
//! - the budget's `used()` never exceeds its `capacity()`, checked after every step;
//! - the process's resident memory stays under the budget + [`RSS_SLACK`] after every step
//!   (in the libFuzzer build: grows by no more than that during one input, see
//!   [`rss_from_input_start`]);
//! - the first `ls by-id/` (which starts building the index from every row) is made by a
//!   requester that gives up after [`PATIENCE`], as Ctrl-C would: it must end within
//!   [`INTERRUPT_LIMIT`] of that; every later step is made by a patient requester and must end
//!   by itself within [`STEP_LIMIT`], `by-id/` must be answered within [`STEP_LIMIT`] of that
//!   first request (its index refused by its price, or built, in that time), and a whole input
//!   must end within [`HANG_LIMIT`];
//! - the listed record directories have distinct inodes, each the one its lookup gives;
//! - once the walk is over, nothing holds the budget (no thread or charge outlives the mount)
//!   after [`RELEASE_LIMIT`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Once, OnceLock};
use std::time::{Duration, Instant};

use sdsfs::budget::Budget;
use sdsfs::dataset::{publish, write_shard, Dataset, OpenOptions, PublishOptions, ShardOptions};
use sdsfs::format::json::{parse_value, to_pretty, Object, Value};
use sdsfs::format::limits::JsonLimits;
use sdsfs::format::record::Record;
use sdsfs::fs::cache::CacheConfig;
use sdsfs::fs::inode::Ino;
use sdsfs::fs::namespace::{check_servable, DirEntry, FsError, Kind, Namespace, NamespaceConfig};
use sdsfs::storage::LocalStore;

/// The mount's memory budget (`--cache-size`).
pub const BUDGET_BYTES: u64 = 16 << 20;
/// The disk budget of its temporary files (`--spill-size`).
const SPILL_BYTES: u64 = 64 << 20;
/// What the process may hold beyond the budget: the fuzzer, its corpus, the allocator's slack.
pub const RSS_SLACK: u64 = 256 << 20;
/// How long the first, impatient `ls by-id/` waits before its requester gives up (Ctrl-C).
pub const PATIENCE: Duration = Duration::from_secs(1);
/// How soon after that the request must have ended.
pub const INTERRUPT_LIMIT: Duration = Duration::from_secs(1);
/// The longest one step may take.
pub const STEP_LIMIT: Duration = Duration::from_secs(5);
/// The longest a whole input may take before it counts as a hang.
pub const HANG_LIMIT: Duration = Duration::from_secs(20);
/// How long the mount's threads may take to let go of the budget once it is dropped.
pub const RELEASE_LIMIT: Duration = Duration::from_secs(2);

/// The objects an input may replace, in the order of [`Base::objects`].
pub const OBJECTS: [&str; 8] = [
    "root", "snapshot", "page0", "page1", "meta0", "data0", "meta1", "data1",
];

/// The published dataset every input starts from.
#[derive(Debug)]
pub struct Base {
    /// Every file, by path below the dataset root.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The path of each of [`OBJECTS`].
    pub objects: Vec<(&'static str, String)>,
}

impl Base {
    /// The path of object `name`.
    pub fn path_of(&self, name: &str) -> Option<&str> {
        self.objects
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, path)| path.as_str())
    }

    /// The bytes of object `name`.
    pub fn bytes_of(&self, name: &str) -> Option<&[u8]> {
        self.files
            .get(self.path_of(name)?)
            .map(|bytes| bytes.as_slice())
    }
}

/// The dataset, published once per process.
pub fn base() -> Result<&'static Base, String> {
    static BASE: OnceLock<Result<Base, String>> = OnceLock::new();
    BASE.get_or_init(publish_base)
        .as_ref()
        .map_err(Clone::clone)
}

fn publish_base() -> Result<Base, String> {
    let dir = ScratchDir::new("base")?;
    let store = LocalStore::open(&dir.0).map_err(|e| e.to_string())?;
    let mut receipts = Vec::new();
    for (shard, (records, options)) in [(0..3, "group_size:1"), (3..8, "group_size:3")]
        .into_iter()
        .enumerate()
    {
        let records: Vec<Record> = records.map(super::sample_record).collect();
        let options = ShardOptions {
            writer_options: sdsfs::arrayrecord::WriterOptions::parse(options)
                .map_err(|e| e.to_string())?,
            ..ShardOptions::default()
        };
        let receipt = write_shard(&store, records, &format!("w{shard}"), 0, &options)
            .map_err(|e| e.to_string())?;
        receipts.push(receipt);
    }
    let mut options = PublishOptions::new("ds-claims", "snap-claims");
    options.shards_per_manifest = 1;
    publish(&store, &receipts, &options).map_err(|e| e.to_string())?;
    let files = read_tree(&dir.0)?;
    let objects = name_objects(&files)?;
    Ok(Base { files, objects })
}

/// Every file below `root`, by relative path.
fn read_tree(root: &Path) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut files = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(root).map_err(|e| e.to_string())?;
            let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
            files.insert(rel.to_string_lossy().into_owned(), bytes);
        }
    }
    Ok(files)
}

/// Finds the path of each of [`OBJECTS`] by following the base's references.
fn name_objects(files: &BTreeMap<String, Vec<u8>>) -> Result<Vec<(&'static str, String)>, String> {
    let doc = |path: &str| files.get(path).and_then(|bytes| parse_document(bytes));
    let root = doc("root.json").ok_or("base: no root.json")?;
    let snapshot_path = ref_path(root.get("snapshot")).ok_or("base: no snapshot reference")?;
    let snapshot = doc(&snapshot_path).ok_or("base: no snapshot")?;
    let mut objects = vec![
        ("root", "root.json".to_string()),
        ("snapshot", snapshot_path),
    ];
    let manifests = snapshot.get("manifests").and_then(Value::as_array);
    for (index, manifest) in manifests.unwrap_or_default().iter().enumerate().take(2) {
        let page_path = ref_path(manifest.as_object().and_then(|m| m.get("object")))
            .ok_or("base: no page reference")?;
        let page = doc(&page_path).ok_or("base: no page")?;
        let entry = page
            .get("shards")
            .and_then(Value::as_array)
            .and_then(|shards| shards.first())
            .and_then(Value::as_object)
            .ok_or("base: a page without a shard")?;
        let meta = ref_path(entry.get("metadata")).ok_or("base: no metadata reference")?;
        let data = ref_path(entry.get("data")).ok_or("base: no data reference")?;
        let names = [["page0", "meta0", "data0"], ["page1", "meta1", "data1"]][index];
        objects.extend([(names[0], page_path), (names[1], meta), (names[2], data)]);
    }
    if objects.len() != OBJECTS.len() {
        return Err(format!(
            "base: {} objects, not {}",
            objects.len(),
            OBJECTS.len()
        ));
    }
    Ok(objects)
}

/// A control document as an object, if it parses as one.
pub fn parse_document(bytes: &[u8]) -> Option<Object> {
    match parse_value(bytes, &JsonLimits::CONTROL).ok()? {
        Value::Object(object) => Some(object),
        _ => None,
    }
}

/// The text of a document as the library writes it (pretty, with a final newline).
pub fn document_bytes(object: &Object) -> Vec<u8> {
    let mut text = to_pretty(&Value::Object(object.clone()));
    text.push('\n');
    text.into_bytes()
}

fn ref_path(reference: Option<&Value>) -> Option<String> {
    let path = reference?.as_object()?.get("path")?.as_str()?;
    Some(path.to_string())
}

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------

/// The marker that starts a section.
const SECTION: &[u8] = b"=== ";

/// The replacements an input asks for: (object name, new bytes); unknown names are skipped.
pub fn sections(input: &[u8]) -> Vec<(&'static str, &[u8])> {
    let mut found = Vec::new();
    let mut rest = match input.strip_prefix(SECTION) {
        Some(rest) => rest,
        None => return found,
    };
    loop {
        let end = find(rest, b"\n=== ");
        let section = &rest[..end.unwrap_or(rest.len())];
        let name_end = find(section, b"\n").unwrap_or(section.len());
        let body = section.get(name_end + 1..).unwrap_or_default();
        if let Some(name) = OBJECTS
            .iter()
            .find(|n| n.as_bytes() == &section[..name_end])
        {
            found.push((*name, body));
        }
        match end {
            Some(end) => rest = &rest[end + 1 + SECTION.len()..],
            None => return found,
        }
    }
}

/// An input replacing `replacements` (object name, new bytes).
pub fn input_of(replacements: &[(&str, &[u8])]) -> Vec<u8> {
    let mut input = Vec::new();
    for (i, (name, bytes)) in replacements.iter().enumerate() {
        if i > 0 {
            input.push(b'\n');
        }
        input.extend_from_slice(SECTION);
        input.extend_from_slice(name.as_bytes());
        input.push(b'\n');
        input.extend_from_slice(bytes);
    }
    input
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------------------------
// Resealing
// ---------------------------------------------------------------------------------------------

/// Fixes up the `stored_bytes` of every reference to an object whose bytes differ from the
/// base's, bottom-up: page entries naming a changed shard, the snapshot's reference to a changed
/// page (its object size, and the sum of the page's entries), the snapshot's total, the root's
/// reference to a changed snapshot. A document is rewritten (as the library writes it) only
/// when one of its references changed, so a claim an input makes about an object it did not
/// change (a `stored_bytes` of 10^15 for an unchanged shard) stays as the input wrote it.
pub fn reseal(files: &mut BTreeMap<String, Vec<u8>>, base: &BTreeMap<String, Vec<u8>>) {
    let Some(mut root) = files.get("root.json").and_then(|b| parse_document(b)) else {
        return;
    };
    let Some(snapshot_path) = ref_path(root.get("snapshot")) else {
        return;
    };
    if let Some(mut snapshot) = files.get(&snapshot_path).and_then(|b| parse_document(b)) {
        let original = snapshot.clone();
        if let Some(Value::Array(manifests)) = snapshot.get_mut("manifests") {
            for manifest in manifests.iter_mut() {
                if let Value::Object(manifest) = manifest {
                    reseal_manifest(files, base, manifest);
                }
            }
        }
        if snapshot != original {
            let total = snapshot
                .get("manifests")
                .and_then(Value::as_array)
                .unwrap_or_default()
                .iter()
                .try_fold(0u64, |total, m| {
                    total.checked_add(stored_bytes(m.as_object()?)?)
                });
            if let Some(total) = total {
                snapshot.insert("stored_bytes".into(), Value::Int(total.into()));
            }
            files.insert(snapshot_path.clone(), document_bytes(&snapshot));
        }
    }
    if changed(files, base, &snapshot_path) {
        let original = root.clone();
        set_stored_bytes(root.get_mut("snapshot"), file_len(files, &snapshot_path));
        if root != original {
            files.insert("root.json".into(), document_bytes(&root));
        }
    }
}

/// Reseals the page a snapshot's manifest reference names, then the reference itself if the
/// page changed.
fn reseal_manifest(
    files: &mut BTreeMap<String, Vec<u8>>,
    base: &BTreeMap<String, Vec<u8>>,
    manifest: &mut Object,
) {
    let Some(page_path) = ref_path(manifest.get("object")) else {
        return;
    };
    let sum = reseal_page(files, base, &page_path);
    if changed(files, base, &page_path) {
        set_stored_bytes(manifest.get_mut("object"), file_len(files, &page_path));
        if let Some(sum) = sum {
            manifest.insert("stored_bytes".into(), Value::Int(sum.into()));
        }
    }
}

/// Reseals the entries of page `path` naming changed shards; the sum of the data and metadata
/// `stored_bytes` of its entries.
fn reseal_page(
    files: &mut BTreeMap<String, Vec<u8>>,
    base: &BTreeMap<String, Vec<u8>>,
    path: &str,
) -> Option<u64> {
    let mut page = files.get(path).and_then(|b| parse_document(b))?;
    let original = page.clone();
    let mut sum = Some(0u64);
    if let Some(Value::Array(shards)) = page.get_mut("shards") {
        for entry in shards.iter_mut() {
            let Value::Object(entry) = entry else {
                continue;
            };
            for kind in ["data", "metadata"] {
                if let Some(shard) = ref_path(entry.get(kind)) {
                    if changed(files, base, &shard) {
                        set_stored_bytes(entry.get_mut(kind), file_len(files, &shard));
                    }
                }
                let claimed = entry.get(kind).and_then(|r| stored_bytes(r.as_object()?));
                sum = sum.and_then(|s| s.checked_add(claimed?));
            }
        }
    }
    if page != original {
        files.insert(path.to_string(), document_bytes(&page));
    }
    sum
}

/// Whether object `path` is there with other bytes than the base's.
fn changed(
    files: &BTreeMap<String, Vec<u8>>,
    base: &BTreeMap<String, Vec<u8>>,
    path: &str,
) -> bool {
    files.contains_key(path) && files.get(path) != base.get(path)
}

fn file_len(files: &BTreeMap<String, Vec<u8>>, path: &str) -> Option<u64> {
    files.get(path).map(|bytes| bytes.len() as u64)
}

fn stored_bytes(object: &Object) -> Option<u64> {
    object.get("stored_bytes")?.as_u64()
}

/// Sets the `stored_bytes` of reference `reference` to `len`, when both are there.
fn set_stored_bytes(reference: Option<&mut Value>, len: Option<u64>) {
    if let (Some(Value::Object(reference)), Some(len)) = (reference, len) {
        reference.insert("stored_bytes".into(), Value::Int(len.into()));
    }
}

// ---------------------------------------------------------------------------------------------
// Running one input
// ---------------------------------------------------------------------------------------------

/// Panics in any thread of the process since it started (the hook counts them).
static PANICS: AtomicU64 = AtomicU64::new(0);

fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
}

/// Runs one input: `Ok(true)` when the dataset opened, `Err` when a property broke.
pub fn run(input: &[u8]) -> Result<bool, String> {
    run_logged(input).0
}

/// What the walk did, a line per step: `<step>: ok` or `<step>: <error>`.
pub type StepLog = Arc<Mutex<Vec<String>>>;

/// [`run`], with the log of the walk's steps.
pub fn run_logged(input: &[u8]) -> (Result<bool, String>, Vec<String>) {
    let log = StepLog::default();
    let outcome = run_input(input, &log);
    let lines = log.lock().map(|l| l.clone()).unwrap_or_default();
    (outcome, lines)
}

fn run_input(input: &[u8], log: &StepLog) -> Result<bool, String> {
    let base = base()?;
    let replacements = sections(input);
    if replacements.is_empty() {
        return Ok(false);
    }
    count_panics();
    let panics = PANICS.load(Ordering::SeqCst);
    let mut files = base.files.clone();
    for (name, bytes) in replacements {
        let path = base.path_of(name).ok_or("unknown object")?.to_string();
        files.insert(path, bytes.to_vec());
    }
    reseal(&mut files, &base.files);
    let dir = ScratchDir::new("input")?;
    for (path, bytes) in &files {
        let file = dir.0.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{path}: {e}"))?;
        }
        std::fs::write(&file, bytes).map_err(|e| format!("{path}: {e}"))?;
    }
    let outcome = run_with_limit(dir.0.clone(), log);
    if PANICS.load(Ordering::SeqCst) != panics {
        return Err("a thread panicked".into());
    }
    outcome
}

/// Opens and walks the dataset in `dir` on a thread of its own, so that a hang is reported
/// (after [`HANG_LIMIT`]) rather than suffered.
fn run_with_limit(dir: PathBuf, log: &StepLog) -> Result<bool, String> {
    let (done, outcome) = mpsc::channel();
    let walk_log = log.clone();
    std::thread::Builder::new()
        .name("claims-walk".into())
        .spawn(move || {
            let _ = done.send(open_and_walk(&dir, walk_log));
        })
        .map_err(|e| format!("cannot start the walk: {e}"))?;
    match outcome.recv_timeout(HANG_LIMIT) {
        Ok(outcome) => outcome,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
            "hang: the input did not finish in {} s (at step {})",
            HANG_LIMIT.as_secs(),
            log.lock()
                .ok()
                .and_then(|l| l.last().cloned())
                .unwrap_or_default()
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err("the walk panicked (see the panic above)".into())
        }
    }
}

fn open_and_walk(dir: &Path, log: StepLog) -> Result<bool, String> {
    let budget = Budget::new("memory", BUDGET_BYTES);
    let store = LocalStore::open(dir).map_err(|e| format!("cannot open the store: {e}"))?;
    let options = OpenOptions {
        memory: budget.clone(),
        ..OpenOptions::default()
    };
    let rss_base = if RSS_FROM_INPUT_START.load(Ordering::Relaxed) {
        rss_bytes().unwrap_or(0)
    } else {
        0
    };
    let walk = Walk {
        budget,
        rss_limit: rss_base + BUDGET_BYTES + RSS_SLACK,
        log,
        by_id_asked: std::cell::Cell::new(None),
    };
    let opened = Dataset::open(Arc::new(store), options);
    walk.note("open", opened.as_ref().err());
    walk.check("open")?;
    let Ok(dataset) = opened else {
        return Ok(false);
    };
    let dataset = Arc::new(dataset);
    let servable = check_servable(&dataset);
    walk.note("check_servable", servable.as_ref().err());
    if servable.is_ok() {
        let config = NamespaceConfig {
            cache: CacheConfig {
                spill_bytes: SPILL_BYTES,
                ..CacheConfig::for_cache_size(BUDGET_BYTES)
            },
            ..NamespaceConfig::default()
        };
        let namespace = Namespace::new(dataset, config);
        walk.impatient_by_id(&namespace)?;
        walk.top(&namespace)?;
    } else {
        drop(dataset);
    }
    walk.released()?;
    Ok(true)
}

/// A thread standing for the process that makes the walk's requests: it exits after the
/// deadline, and a request whose requester is gone counts as interrupted (as after Ctrl-C).
struct Requester;

impl Requester {
    /// Starts it; its thread id.
    fn start(deadline: Duration) -> Result<u32, String> {
        let (sender, receiver) = mpsc::channel();
        std::thread::Builder::new()
            .name("claims-requester".into())
            .spawn(move || {
                let _ = sender.send(thread_id());
                std::thread::sleep(deadline);
            })
            .map_err(|e| format!("cannot start the requester: {e}"))?;
        match receiver.recv() {
            Ok(Some(tid)) => Ok(tid),
            _ => Err("cannot tell the requester's thread id".into()),
        }
    }
}

/// The calling thread's id, from `/proc/thread-self` (a link to `<pid>/task/<tid>`).
fn thread_id() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// Whether the resident-set bound counts from the resident set at the start of each input
/// rather than from zero (see [`rss_from_input_start`]).
static RSS_FROM_INPUT_START: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Bounds what the resident set may grow by during one input, instead of the resident set
/// itself: for the libFuzzer build, where AddressSanitizer's shadow memory and quarantine put
/// the process at about 500 MiB before any input (that process is bounded as a whole by
/// libFuzzer's `-rss_limit_mb` and `-malloc_limit_mb`).
pub fn rss_from_input_start() {
    RSS_FROM_INPUT_START.store(true, Ordering::Relaxed);
}

/// The resident set of this process, from `/proc/self/status`.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The bounded walk over the mount's core, checking the properties after every step.
struct Walk {
    budget: Arc<Budget>,
    rss_limit: u64,
    log: StepLog,
    /// When `ls by-id/` was first asked.
    by_id_asked: std::cell::Cell<Option<Instant>>,
}

/// Entries listed per directory, and record files read, at most.
const LIST_AT_MOST: usize = 6;
const FILES_AT_MOST: usize = 12;

impl Walk {
    /// Checks the budget and the resident set after step `what`.
    fn check(&self, what: &str) -> Result<(), String> {
        let (used, capacity) = (self.budget.used(), self.budget.capacity());
        if used > capacity {
            return Err(format!(
                "after {what}: budget used {used} > capacity {capacity}"
            ));
        }
        if let Some(rss) = rss_bytes() {
            if rss > self.rss_limit {
                return Err(format!(
                    "after {what}: resident set {} MiB > budget + slack {} MiB",
                    rss >> 20,
                    self.rss_limit >> 20
                ));
            }
        }
        Ok(())
    }

    /// Logs step `what` and its error, if any.
    fn note(&self, what: &str, error: Option<&impl std::fmt::Display>) {
        let line = match error {
            Some(error) => format!("{what}: {error}"),
            None => format!("{what}: ok"),
        };
        if let Ok(mut log) = self.log.lock() {
            log.push(line);
        }
    }

    /// Runs one step of the walk: its outcome, or `Err` when a property broke.
    fn step<T>(
        &self,
        what: &str,
        operation: impl FnOnce() -> Result<T, FsError>,
    ) -> Result<Option<T>, String> {
        self.note(what, Some(&"running"));
        let started = Instant::now();
        let outcome = operation();
        let took = started.elapsed();
        if let Ok(mut log) = self.log.lock() {
            log.pop();
        }
        self.note(what, outcome.as_ref().err());
        if took > STEP_LIMIT {
            return Err(format!("{what} took {:.1} s", took.as_secs_f64()));
        }
        self.check(what)?;
        Ok(outcome.ok())
    }

    /// Up to `at_most` entries (`.` and `..` included) of directory `ino` from `offset`,
    /// without `.` and `..`.
    fn list(
        &self,
        namespace: &Namespace,
        ino: u64,
        offset: u64,
        at_most: usize,
    ) -> Result<Vec<DirEntry>, String> {
        let what = format!("readdir {ino:#x} at {offset}");
        let listed = self.step(&what, || {
            let mut entries = Vec::new();
            namespace.read_dir(ino, offset, |entry, _| {
                entries.push(entry);
                entries.len() >= at_most
            })?;
            Ok(entries)
        })?;
        Ok(listed
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.name != "." && e.name != "..")
            .collect())
    }

    /// `ls by-id/` by a requester that gives up after [`PATIENCE`] (as Ctrl-C would), while
    /// the index is built for the first time: the request must end within
    /// [`INTERRUPT_LIMIT`] of that, whether the index was refused, built or still building.
    fn impatient_by_id(&self, namespace: &Namespace) -> Result<(), String> {
        let requester = Requester::start(PATIENCE)?;
        let started = Instant::now();
        self.by_id_asked.set(Some(started));
        let by_id = Ino::ById.encode();
        sdsfs::interrupt::serving(requester, || {
            self.step("ls by-id/ by an impatient requester", || {
                namespace.read_dir(by_id, 0, |_, _| true)
            })
        })?;
        let took = started.elapsed();
        if took > PATIENCE + INTERRUPT_LIMIT {
            return Err(format!(
                "ls by-id/ ended {:.1} s after its requester gave up",
                (took - PATIENCE).as_secs_f64()
            ));
        }
        Ok(())
    }

    /// `by-id/` answered (refused by its price, built, or failed) within [`STEP_LIMIT`] of the
    /// first request for it.
    fn by_id_answered_in_time(&self) -> Result<(), String> {
        let waited = self.by_id_asked.get().map(|asked| asked.elapsed());
        match waited {
            Some(waited) if waited > STEP_LIMIT => Err(format!(
                "by-id/ answered {:.1} s after it was first asked (the index must be refused or \
                 built within {} s)",
                waited.as_secs_f64(),
                STEP_LIMIT.as_secs()
            )),
            _ => Ok(()),
        }
    }

    /// The walk proper, by a patient requester (every step must end by itself).
    fn top(&self, namespace: &Namespace) -> Result<(), String> {
        let root = Ino::Root.encode();
        self.step("getattr /", || namespace.getattr(root))?;
        for entry in self.list(namespace, root, 0, 16)? {
            let name = entry.name.clone();
            let Some(attr) =
                self.step(&format!("lookup /{name}"), || namespace.lookup(root, &name))?
            else {
                continue;
            };
            match (name.as_str(), attr.kind) {
                ("records", _) => self.walk_records(namespace, attr.ino)?,
                ("by-id", _) => {
                    self.walk_links(namespace, attr.ino)?;
                    self.by_id_answered_in_time()?;
                }
                ("by-scene", _) => {
                    for scene in self.list(namespace, attr.ino, 0, LIST_AT_MOST)? {
                        self.walk_links(namespace, scene.ino)?;
                    }
                }
                (_, Kind::Dir) => {
                    self.list(namespace, attr.ino, 0, LIST_AT_MOST)?;
                }
                (_, _) => self.read_file(namespace, &name, attr.ino, attr.size)?,
            }
        }
        Ok(())
    }

    /// `records/`: the first and the last few entries, each visited; their inodes distinct
    /// and the ones their lookups give.
    fn walk_records(&self, namespace: &Namespace, records: u64) -> Result<(), String> {
        let total = namespace.dataset().len().saturating_add(2);
        let tail_from = total.saturating_sub(3).max(2);
        let mut listed = self.list(namespace, records, 0, 2 + 3)?;
        listed.extend(self.list(namespace, records, tail_from, 3)?);
        let mut seen = BTreeMap::new();
        for entry in &listed {
            if let Some(other) = seen.insert(entry.ino, entry.name.clone()) {
                if other != entry.name {
                    return Err(format!(
                        "records/{other} and records/{} share inode {:#x}",
                        entry.name, entry.ino
                    ));
                }
            }
            let what = format!("lookup records/{}", entry.name);
            let found = self.step(&what, || namespace.lookup(records, &entry.name))?;
            match found {
                Some(attr) if attr.ino != entry.ino => {
                    return Err(format!(
                        "records/{} is listed as inode {:#x}, looked up as {:#x}",
                        entry.name, entry.ino, attr.ino
                    ))
                }
                Some(_) => self.walk_record(namespace, &entry.name, entry.ino)?,
                None => return Err(format!("records/{} is listed but not found", entry.name)),
            }
        }
        Ok(())
    }

    /// One record directory: its entries, `record.json`, and a few files of `fields/`.
    fn walk_record(&self, namespace: &Namespace, name: &str, ino: u64) -> Result<(), String> {
        let mut budget = FILES_AT_MOST;
        let mut directories = vec![(format!("records/{name}"), ino)];
        while let Some((path, dir)) = directories.pop() {
            for entry in self.list(namespace, dir, 0, LIST_AT_MOST)? {
                let child = format!("{path}/{}", entry.name);
                let Some(attr) =
                    self.step(&format!("getattr {child}"), || namespace.getattr(entry.ino))?
                else {
                    continue;
                };
                match attr.kind {
                    Kind::Dir => directories.push((child, attr.ino)),
                    Kind::File if budget > 0 => {
                        budget -= 1;
                        self.read_file(namespace, &child, attr.ino, attr.size)?;
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The first and the last page of file `ino`.
    fn read_file(
        &self,
        namespace: &Namespace,
        path: &str,
        ino: u64,
        size: u64,
    ) -> Result<(), String> {
        self.step(&format!("read {path} at 0"), || {
            namespace.read(ino, 0, 4096)
        })?;
        let tail = size.saturating_sub(4096);
        if tail > 0 {
            self.step(&format!("read {path} at {tail}"), || {
                namespace.read(ino, tail, 4096)
            })?;
        }
        Ok(())
    }

    /// A directory of links (`by-id/`, a scene of `by-scene/`): a few entries, each read and
    /// looked up.
    fn walk_links(&self, namespace: &Namespace, dir: u64) -> Result<(), String> {
        for entry in self.list(namespace, dir, 0, LIST_AT_MOST)? {
            self.step(&format!("readlink {}", entry.name), || {
                namespace.readlink(entry.ino)
            })?;
            self.step(&format!("lookup {}", entry.name), || {
                namespace.lookup(dir, &entry.name)
            })?;
        }
        Ok(())
    }

    /// Nothing holds the budget once the walk is over (every thread of the mount has let go).
    fn released(&self) -> Result<(), String> {
        let started = Instant::now();
        while Arc::strong_count(&self.budget) > 1 {
            if started.elapsed() > RELEASE_LIMIT {
                return Err(format!(
                    "{} bytes of the budget still held {} s after the mount's core was dropped",
                    self.budget.used(),
                    RELEASE_LIMIT.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }
}

/// A scratch directory below the system's temporary directory, removed when dropped.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(what: &str) -> Result<ScratchDir, String> {
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let name = format!("sdsfs-fuzz-claims-{}-{what}-{serial}", std::process::id());
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(ScratchDir(path))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
