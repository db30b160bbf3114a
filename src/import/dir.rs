//! `--from-dir DIR`: records laid out as the mount shows them (`docs/MOUNT.md`), so that
//! mount → `cp -r MOUNT/records DIR/` → edit → `sds create --from-dir DIR` is a round trip.
//!
//! Each `records/<n>/` directory is one record, in numeric order of `<n>`. Its `record.json`
//! is authoritative for the id, scene id, record metadata and every field's dtype, shape, axes
//! and metadata (it is the metadata row, which is all of that). Field bytes come from
//! `fields/<encoded name>.raw`, or from `.npy` when there is no `.raw` (its header must agree
//! with `record.json`). The encoded path is found by encoding the field name with the mount's
//! rule; a data file that no field of `record.json` accounts for is refused, naming the field
//! it belongs to (decoded with the same rule, or through the `name` in its `.json` for a
//! shortened `%~` name), so an edit that adds a field without describing it is not silently
//! dropped. `.json` and `.sigmf-*` views, `annotations/` and `ordinal` are ignored.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::listing::Kind;
use super::npy::read_npy_stream;
use super::open::{linked_dir_inside, read_exactly};
use super::{checked_meta, open_input, read_input, ImportError, RecordSource, Sources};
use crate::format::json::{parse_object, ObjectExt};
use crate::format::limits::RecordLimits;
use crate::format::names::{decode_segment, encode_field_path};
use crate::format::record::{Field, FieldMeta, Record, RecordMeta};

/// The record directories under `dir` (or `dir/records`), in ordinal order; their
/// `record.json` files are read and parsed on up to `jobs` threads.
pub fn sources(dir: &Path, jobs: usize) -> Result<Sources, ImportError> {
    // Every file read must lie inside this directory, symbolic links resolved (see `open`).
    let tree = Arc::new(std::fs::canonicalize(dir).map_err(|e| ImportError::io(dir, e))?);
    let records = dir.join("records");
    let root = if records.is_dir() {
        records
    } else {
        dir.to_path_buf()
    };
    let mut numbered = Vec::new();
    let entries = std::fs::read_dir(&root).map_err(|e| ImportError::io(&root, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| ImportError::io(&root, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let ordinal: u128 = name
            .parse()
            .map_err(|_| ImportError::invalid(&entry.path(), "record number too large"))?;
        numbered.push((ordinal, entry.path()));
    }
    numbered.sort();
    check_numbering(&root, &numbered)?;
    let paths: Vec<PathBuf> = numbered.into_iter().map(|(_, path)| path).collect();
    open_all(&paths, &tree, jobs)
}

/// Opens every record directory, in order. Reading and parsing every `record.json` is the
/// serial part of `sds create` before any shard can be planned (15% of its time on one
/// thread), so the jobs share it: each takes the next block of [`OPEN_BLOCK`] records until
/// none is left (halves of the list took unequal times: directories created earlier are
/// cheaper to read), and the first error in ordinal order is the one reported, as with one
/// thread.
fn open_all(paths: &[PathBuf], tree: &Arc<PathBuf>, jobs: usize) -> Result<Sources, ImportError> {
    let open = |dir: &PathBuf| DirRecord::open(dir.clone(), Arc::clone(tree));
    let blocks: Vec<&[PathBuf]> = paths.chunks(OPEN_BLOCK).collect();
    let threads = jobs.clamp(1, blocks.len().max(1));
    if threads == 1 {
        // One thread: the calling one (see `build::write_all` on allocation arenas).
        let opened = paths.iter().map(open);
        return opened
            .map(|r| Ok(Box::new(r?) as Box<dyn RecordSource>))
            .collect();
    }
    type Opened = Mutex<Option<Result<Vec<DirRecord>, ImportError>>>;
    let results: Vec<Opened> = blocks.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let worker = || loop {
        let index = next.fetch_add(1, Ordering::Relaxed);
        let Some(block) = blocks.get(index) else {
            return;
        };
        let opened = block.iter().map(open).collect();
        if let Ok(mut slot) = results[index].lock() {
            *slot = Some(opened);
        }
    };
    std::thread::scope(|scope| {
        // The calling thread is one of them: what it allocates comes from the main heap,
        // which grows in large steps (see `build::write_all`).
        for _ in 1..threads {
            scope.spawn(worker);
        }
        worker();
    });
    let mut sources = Sources::with_capacity(paths.len());
    for result in results {
        let opened = result
            .into_inner()
            .ok()
            .flatten()
            .ok_or_else(|| ImportError::Option("a record-reading thread failed".into()))?;
        sources.extend(
            opened?
                .into_iter()
                .map(|r| Box::new(r) as Box<dyn RecordSource>),
        );
    }
    Ok(sources)
}

/// Records per block handed to one thread while reading `record.json` files.
const OPEN_BLOCK: usize = 256;

fn check_numbering(root: &Path, numbered: &[(u128, PathBuf)]) -> Result<(), ImportError> {
    if numbered.is_empty() {
        return Err(ImportError::invalid(
            root,
            "no record directories (expected records/<n>/record.json, as copied from a mount)",
        ));
    }
    for pair in numbered.windows(2) {
        if pair[0].0 == pair[1].0 {
            let problem = format!(
                "{} and {} number the same record",
                pair[0].1.display(),
                pair[1].1.display()
            );
            return Err(ImportError::invalid(root, problem));
        }
    }
    Ok(())
}

/// One `records/<n>/` directory, its `record.json` already read.
struct DirRecord {
    dir: PathBuf,
    meta: RecordMeta,
    /// The canonical input directory every file read must lie in.
    tree: Arc<PathBuf>,
}

impl DirRecord {
    fn open(dir: PathBuf, tree: Arc<PathBuf>) -> Result<DirRecord, ImportError> {
        let path = dir.join("record.json");
        let limits = RecordLimits::default().descriptor_json();
        let text = read_input(&path, Some(&tree), limits.max_bytes)?;
        let object = parse_object(&text, &limits)
            .map_err(|e| ImportError::invalid(&path, format!("invalid JSON: {e}")))?;
        let meta = RecordMeta::from_row_object(&object).map_err(|source| ImportError::Record {
            path: path.display().to_string(),
            source,
        })?;
        Ok(DirRecord { dir, meta, tree })
    }

    /// `fields/<encoded name>` without a view suffix.
    fn field_base(&self, name: &str) -> PathBuf {
        let mut path = self.dir.join("fields");
        for segment in encode_field_path(name) {
            path.push(segment);
        }
        path
    }

    /// Reads field `name` from its `.raw` or else its `.npy` file, as found in `listed` (the
    /// files under `fields/`, from the walk that checked for strays: no stat per field).
    fn load_field(
        &self,
        name: &str,
        meta: &FieldMeta,
        listed: &BTreeSet<PathBuf>,
    ) -> Result<Field, ImportError> {
        let base = self.field_base(name);
        let raw = with_suffix(&base, ".raw");
        let npy = with_suffix(&base, ".npy");
        let data = if listed.contains(&raw) {
            read_raw(&raw, meta, &self.tree)?
        } else if listed.contains(&npy) {
            read_npy(&npy, meta, &self.tree)?
        } else {
            let problem = format!("field {name:?} has neither a .raw nor a .npy file");
            return Err(ImportError::invalid(&with_suffix(&base, ".raw"), problem));
        };
        Ok(Field {
            meta: meta.clone(),
            data,
        })
    }

    /// Lists the files under `fields/`, refusing `.raw`/`.npy` files that no field of
    /// `record.json` accounts for.
    fn list_checked_files(&self) -> Result<BTreeSet<PathBuf>, ImportError> {
        let expected: BTreeSet<PathBuf> = self
            .meta
            .fields
            .keys()
            .map(|n| self.field_base(n))
            .collect();
        let mut files = Vec::new();
        walk(&self.dir.join("fields"), &self.tree, &mut files)?;
        for file in &files {
            let Some(base) = data_file_base(file) else {
                continue;
            };
            if !expected.contains(&base) {
                let name = self.stray_name(&base);
                let problem = format!(
                    "field {name:?} is not described in record.json (add its dtype, shape, axes and metadata there)"
                );
                return Err(ImportError::invalid(file, problem));
            }
        }
        Ok(files.into_iter().collect())
    }

    /// The field name a stray data file stands for (best effort, for the message).
    fn stray_name(&self, base: &Path) -> String {
        let fields = self.dir.join("fields");
        let relative = base.strip_prefix(&fields).unwrap_or(base);
        let text = relative.to_string_lossy();
        if text.contains("%~") {
            if let Some(name) = json_name(&with_suffix(base, ".json"), &self.tree) {
                return name;
            }
        }
        text.split('/')
            .map(|s| decode_segment(s).unwrap_or_else(|| s.to_string()))
            .collect::<Vec<_>>()
            .join("/")
    }
}

impl RecordSource for DirRecord {
    fn payload_bytes(&self) -> u64 {
        self.meta
            .fields
            .values()
            .map(|f| f.byte_len().unwrap_or(u64::MAX))
            .fold(0, u64::saturating_add)
    }

    fn load(&self) -> Result<Record, ImportError> {
        // The record is built from `self.meta` exactly, so its metadata is checked as it is
        // (no copy of it made just for the check).
        checked_meta(&self.meta, &self.dir.join("record.json"))?;
        let listed = self.list_checked_files()?;
        let mut record = Record::new(self.meta.id.clone());
        record.scene_id = self.meta.scene_id.clone();
        record.metadata = self.meta.metadata.clone();
        for (name, meta) in &self.meta.fields {
            record
                .fields
                .insert(name.clone(), self.load_field(name, meta, &listed)?);
        }
        Ok(record)
    }
}

fn with_suffix(base: &Path, suffix: &str) -> PathBuf {
    let mut text = base.as_os_str().to_owned();
    text.push(suffix);
    PathBuf::from(text)
}

/// The field path of a `.raw` or `.npy` file, `None` for other views.
fn data_file_base(file: &Path) -> Option<PathBuf> {
    let text = file.to_str()?;
    [".raw", ".npy"]
        .iter()
        .find_map(|s| text.strip_suffix(s))
        .map(PathBuf::from)
}

fn json_name(path: &Path, tree: &Path) -> Option<String> {
    let limits = RecordLimits::default().descriptor_json();
    let text = read_input(path, Some(tree), limits.max_bytes).ok()?;
    let object = parse_object(&text, &limits).ok()?;
    object.req_str("name").ok().map(str::to_string)
}

fn walk(dir: &Path, tree: &Path, out: &mut Vec<PathBuf>) -> Result<(), ImportError> {
    let listing = match super::listing::list(dir) {
        Ok(listing) => listing,
        // Absent or not a directory: nothing under it.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => {
            return Ok(())
        }
        Err(e) => return Err(ImportError::io(dir, e)),
    };
    let mut entries = Vec::with_capacity(listing.len());
    for entry in listing {
        let path = dir.join(&entry.name);
        // The type comes with the listing (no stat per entry, which dominated `sds create`
        // profiles); a symbolic link is followed with one stat, and only inside the tree.
        let is_dir = match entry.kind {
            Kind::Dir => true,
            Kind::File => false,
            Kind::Symlink if path.is_dir() => {
                linked_dir_inside(&path, tree)?;
                true
            }
            Kind::Symlink => false,
            Kind::Other => path.is_dir(),
        };
        entries.push((path, is_dir));
    }
    entries.sort();
    for (path, is_dir) in entries {
        if is_dir {
            walk(&path, tree, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

fn read_raw(path: &Path, meta: &FieldMeta, tree: &Path) -> Result<Bytes, ImportError> {
    let expected = expected_len(path, meta)?;
    let mut input = open_input(path, Some(tree))?;
    if input.len != expected {
        let problem = format!(
            "{} bytes, but record.json says {} {:?} ({expected} bytes)",
            input.len, meta.dtype, meta.shape
        );
        return Err(ImportError::invalid(path, problem));
    }
    Ok(Bytes::from(read_exactly(&mut input.file, expected, path)?))
}

fn read_npy(path: &Path, meta: &FieldMeta, tree: &Path) -> Result<Bytes, ImportError> {
    let expected = expected_len(path, meta)?;
    let mut input = open_input(path, Some(tree))?;
    let place = path.display().to_string();
    let (header, data) = read_npy_stream(&mut input.file, &place, Some(input.len))?;
    if header.dtype != meta.dtype || header.shape != meta.shape {
        let problem = format!(
            "holds {} {:?}, but record.json says {} {:?}",
            header.dtype, header.shape, meta.dtype, meta.shape
        );
        return Err(ImportError::invalid(path, problem));
    }
    if data.len() as u64 != expected {
        let problem = format!(
            "{} data bytes after the header, shape needs {expected}",
            data.len()
        );
        return Err(ImportError::invalid(path, problem));
    }
    Ok(Bytes::from(data))
}

fn expected_len(path: &Path, meta: &FieldMeta) -> Result<u64, ImportError> {
    meta.byte_len().map_err(|source| ImportError::Record {
        path: path.display().to_string(),
        source,
    })
}
