//! Local directory storage (FORMAT.md section 8).
//!
//! **Confinement.** The root directory is opened once; every access then walks the path one
//! segment at a time with `openat(O_NOFOLLOW | O_DIRECTORY)` from that descriptor and opens the
//! leaf with `O_NOFOLLOW`. A symlink anywhere below the root is therefore refused
//! ([`StorageError::SymlinkRefused`]) rather than followed, and nothing is ever resolved as a
//! full path string, so concurrent renames or planted links cannot redirect an access outside
//! the root. ([`RelPath`] has already refused `..`, absolute paths and empty segments.) The
//! root's own path may contain symlinks: it is the operator's choice.
//!
//! **Generations.** A file's generation is its `st_mtime_ns`. Reads open the file once,
//! `fstat` it, check the generation and then `pread` from the same descriptor, so the check and
//! the bytes always concern the same inode even if the object is replaced meanwhile.
//!
//! **Create-only.** Content goes to a uniquely named temporary file in the target directory
//! (`.tmp-<random>`), is fsynced, then hard-linked to the final name with `linkat`, which is
//! atomic and fails with `EEXIST` if the name is taken: no reader ever sees a partial object,
//! and of racing creators exactly one wins. A loser (or a resumed writer) compares the existing
//! content, streamed, and reports [`CreateOutcome::AlreadyIdentical`] or
//! [`StorageError::Collision`].
//!
//! **Copies between roots.** [`ObjectStore::copy_from`] from another local root hard-links the
//! source inode under the destination name (`linkat` between the two root-confined parent
//! descriptors): no byte is copied, and since the link appears atomically and fails with
//! `EEXIST` if the name is taken, it has exactly the create-only semantics above. The source is
//! first opened with `O_NOFOLLOW` and must be a regular file. Across filesystems (`EXDEV`) or
//! where links are not permitted (`EPERM`, `EMLINK`, `ENOTSUP`) it falls back to a streamed
//! create-only copy. Shared inodes are safe because nothing published is ever modified in place
//! (the one mutable object, the catalog, is replaced by rename, never rewritten).
//!
//! **Compare-and-swap.** Writers serialise on an exclusive `flock` of a sibling `.<name>.lock`
//! file (kept, never deleted: unlinking a lock file lets two writers lock different inodes).
//! The name and the lock are the `signal-dataset` library's (`annotations/.catalog.json.lock`
//! for the catalog), so this store's writers and the library's exclude each other.
//! Under the lock the current version is re-checked, the new content is written to a temporary
//! file whose mtime is forced strictly above the replaced file's (so generations increase even
//! with a coarse or backward-stepping clock), fsynced, and `renameat`-ed over the target.
//! Readers take no lock: rename is atomic, so they see the old or the new file whole.

mod access;
mod sys;

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::ffi::{CStr, CString, OsStr};
use std::fs::{File, Metadata};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::num::NonZeroUsize;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use lru::LruCache;

use super::{CreateOutcome, ObjectInfo, ObjectStore, StorageError, Version};
use crate::format::path::RelPath;
use crate::sync::lock;
use access::Access;
pub use access::Identity;

/// Streaming unit for copies and comparisons: large enough to keep syscalls rare, small enough
/// that comparing two multi-gigabyte shards costs two such buffers of memory.
const CHUNK: usize = 1 << 20;

/// Bytes asked for past the known size when reading a whole object, to notice growth. Small,
/// because it is zero-filled on every whole read and normally comes back empty.
const PROBE: u64 = 4 << 10;

/// Attempts at finding an unused temporary name before giving up.
const TEMP_NAME_ATTEMPTS: usize = 16;

/// Margins tried, in order, for making a replacement's mtime exceed the replaced file's.
/// Escalating covers filesystems that round timestamps to microseconds, seconds or (FAT) two
/// seconds: the first margin the filesystem actually preserves wins.
const MTIME_MARGINS_NS: [u64; 5] = [1, 1_000, 1_000_000, 1_000_000_000, 2_000_000_000];

/// Objects in a local directory tree.
#[derive(Debug)]
pub struct LocalStore {
    /// Descriptor every access starts from.
    root: OwnedFd,
    /// The root as given (made absolute), for messages only; never used to reach files.
    root_path: PathBuf,
    /// Open descriptors of recently read immutable objects (see [`LocalStore::open_cached`]).
    open_objects: Mutex<LruCache<RelPath, Arc<Opened>>>,
    /// Whose permissions every read is checked against, once confined (see [`access`]).
    reader: OnceLock<Arc<Identity>>,
}

/// Symlinks followed while walking to a confined root before giving up (Linux's own limit).
const MAX_SYMLINKS: usize = 40;

/// Descriptors kept open for ranged reads of immutable objects.
const OPEN_OBJECTS: usize = 64;

/// Whether a walk may create missing directories (writes) or not (reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    Existing,
    CreateMissing,
}

/// A directory reached by a walk: the root itself (borrowed) or one below it.
enum Dir<'a> {
    Root(BorrowedFd<'a>),
    Below(OwnedFd),
}

impl Dir<'_> {
    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Dir::Root(fd) => *fd,
            Dir::Below(fd) => fd.as_fd(),
        }
    }
}

/// An opened object with the metadata of the very inode that was opened.
struct Opened {
    file: File,
    meta: Metadata,
}

impl LocalStore {
    /// Opens an existing directory as a store root.
    pub fn open(root: &Path) -> Result<LocalStore, StorageError> {
        let shown = root.display().to_string();
        let root_path = std::path::absolute(root).map_err(|e| StorageError::io(&shown, e))?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(&root_path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENOENT) => StorageError::NotFound { object: shown },
                Some(libc::ENOTDIR) => {
                    StorageError::invalid(shown, "store root is not a directory")
                }
                _ => StorageError::io(shown, e),
            })?;
        Ok(LocalStore::with_root(OwnedFd::from(file), root_path))
    }

    fn with_root(root: OwnedFd, root_path: PathBuf) -> LocalStore {
        LocalStore {
            root,
            root_path,
            open_objects: Mutex::new(LruCache::new(
                NonZeroUsize::new(OPEN_OBJECTS).unwrap_or(NonZeroUsize::MIN),
            )),
            reader: OnceLock::new(),
        }
    }

    /// Opens an existing directory as a store root whose reads are confined to what `reader`
    /// could read: the walk to the root, from `/` and through any symlinks on the way, is
    /// checked as `reader` would make it (search permission on every directory looked up in),
    /// and so is every read below it ([`confine_reads`](Self::confine_reads)).
    pub fn open_as(root: &Path, reader: Arc<Identity>) -> Result<LocalStore, StorageError> {
        let shown = root.display().to_string();
        let root_path = std::path::absolute(root).map_err(|e| StorageError::io(&shown, e))?;
        let fd = walk_as(&root_path, &reader, &shown)?;
        let store = LocalStore::with_root(fd, root_path);
        store.confine_reads(reader);
        Ok(store)
    }

    /// From now on, every read (and every size or version asked for) is refused with
    /// [`StorageError::Unreadable`] unless `reader` could make it: search permission on the
    /// root and every directory below it on the way, read permission on the object. Only the
    /// first call counts.
    pub fn confine_reads(&self, reader: Arc<Identity>) {
        let _ = self.reader.set(reader);
    }

    /// The identity reads are confined to, if any.
    pub fn reader(&self) -> Option<&Arc<Identity>> {
        self.reader.get()
    }

    /// Confines reads ([`confine_reads`](Self::confine_reads)) to the owner of the object at
    /// `path` (a dataset's `root.json`), unless this process runs as that owner (the kernel
    /// already holds it to the owner's permissions) or the owner is root (who may read
    /// anything). Returns the identity reads are now confined to, if any.
    pub fn confine_to_owner_of(
        &self,
        path: &RelPath,
    ) -> Result<Option<Arc<Identity>>, StorageError> {
        if let Some(reader) = self.reader.get() {
            return Ok(Some(reader.clone()));
        }
        let opened = self.open_object(path, None)?;
        let (uid, gid) = (opened.meta.uid(), opened.meta.gid());
        let euid = nix::unistd::geteuid().as_raw();
        if uid == euid || uid == 0 {
            return Ok(None);
        }
        let reader = Arc::new(Identity::of_user(uid, gid));
        self.confine_reads(reader.clone());
        Ok(Some(reader))
    }

    /// Refuses the walk on when the confining identity may not search `dir`.
    fn check_search(
        &self,
        dir: BorrowedFd<'_>,
        shown: &Path,
        object: &str,
    ) -> Result<(), StorageError> {
        let Some(reader) = self.reader.get() else {
            return Ok(());
        };
        let access = sys::mode_of(dir)
            .and_then(|access| access.with_acl_of(dir))
            .map_err(|e| StorageError::io(object, e))?;
        search_allowed(reader, &access, shown, object)
    }

    /// Refuses an opened object the confining identity may not read.
    fn check_read(&self, opened: &Opened, object: &str) -> Result<(), StorageError> {
        let Some(reader) = self.reader.get() else {
            return Ok(());
        };
        let access = Access::from(&opened.meta)
            .with_acl_of(opened.file.as_fd())
            .map_err(|e| StorageError::io(object, e))?;
        if reader.may_read(&access) {
            return Ok(());
        }
        Err(StorageError::Unreadable {
            object: object.to_string(),
            reader: reader.shown().to_string(),
            detail: "no read permission on it".into(),
        })
    }

    /// The root directory, as given (made absolute).
    pub fn root(&self) -> &Path {
        &self.root_path
    }

    /// The dataset-relative path of a local path below the root. Purely lexical: meant for
    /// turning command-line arguments into object paths, not for confinement (every access
    /// through the store is confined regardless).
    pub fn rel_path(&self, path: &Path) -> Result<RelPath, StorageError> {
        let shown = path.display().to_string();
        let absolute = std::path::absolute(path).map_err(|e| StorageError::io(&shown, e))?;
        let outside = || StorageError::OutsideRoot {
            object: shown.clone(),
            root: self.root_path.display().to_string(),
        };
        let rest = absolute
            .strip_prefix(&self.root_path)
            .map_err(|_| outside())?;
        let mut segments = Vec::new();
        for component in rest.components() {
            let Component::Normal(segment) = component else {
                return Err(outside());
            };
            let segment = segment
                .to_str()
                .ok_or_else(|| StorageError::invalid(&shown, "path is not UTF-8"))?;
            segments.push(segment);
        }
        RelPath::new(segments.join("/")).map_err(|e| StorageError::invalid(&shown, e.to_string()))
    }

    /// Walks to the directory holding `path`'s last segment, returning it and that segment.
    fn parent_dir(&self, path: &RelPath, walk: Walk) -> Result<(Dir<'_>, CString), StorageError> {
        let object = self.describe(path);
        let segments: Vec<&str> = path.segments().collect();
        let Some((leaf, parents)) = segments.split_last() else {
            return Err(StorageError::invalid(object, "empty path"));
        };
        let mut dir = Dir::Root(self.root.as_fd());
        // Reads of a confined store check every directory they look up in; the directory's
        // path is kept for the message only then.
        let confined = walk == Walk::Existing && self.reader.get().is_some();
        let mut dir_path = if confined {
            self.root_path.clone()
        } else {
            PathBuf::new()
        };
        for segment in parents {
            if confined {
                self.check_search(dir.fd(), &dir_path, &object)?;
                dir_path.push(segment);
            }
            let name = c_name(segment, &object)?;
            dir = Dir::Below(enter(dir.fd(), &name, walk, &object)?);
        }
        if confined {
            self.check_search(dir.fd(), &dir_path, &object)?;
        }
        Ok((dir, c_name(leaf, &object)?))
    }

    /// [`open_object`](Self::open_object) for ranged reads, keeping the descriptors of objects
    /// under `objects/` open (bounded LRU): a shard is read by many small ranged reads (index,
    /// metadata rows, records), and the confined walk (one `openat` per path segment) costs
    /// more than the `pread` itself. Only that tree is create-only (layout, "Shards"): its
    /// objects are never replaced, so a descriptor cannot go stale; `root.json` and the
    /// annotation catalog are re-opened by every read. The descriptor was obtained by the same
    /// confined walk, and the generation is checked on every use.
    /// The object opened for a read of `range`, and its description; a range reaching past
    /// the end (or ending before it starts) is [`StorageError::OutOfRange`].
    fn open_range(
        &self,
        path: &RelPath,
        range: Range<u64>,
        generation: Option<u64>,
    ) -> Result<Arc<Opened>, StorageError> {
        let opened = self.open_cached(path, generation)?;
        let size = opened.meta.len();
        if range.start > range.end || range.end > size {
            return Err(StorageError::OutOfRange {
                object: self.describe(path),
                start: range.start,
                end: range.end,
                size,
            });
        }
        Ok(opened)
    }

    fn open_cached(
        &self,
        path: &RelPath,
        generation: Option<u64>,
    ) -> Result<Arc<Opened>, StorageError> {
        if !path.as_str().starts_with("objects/") {
            return Ok(Arc::new(self.open_object(path, generation)?));
        }
        let cached = lock(&self.open_objects).get(path).cloned();
        if let Some(opened) = cached {
            // A file whose time is no generation is opened again, and refused there.
            let fresh = match generation {
                None => true,
                Some(g) => generation_of(&opened.meta, "").ok() == Some(g),
            };
            if fresh {
                return Ok(opened);
            }
        }
        let opened = Arc::new(self.open_object(path, generation)?);
        lock(&self.open_objects).put(path.clone(), opened.clone());
        Ok(opened)
    }

    /// Opens an existing regular file that may be read (see `check_read`), with its
    /// directory, leaf name and description.
    fn open_existing(&self, path: &RelPath) -> Result<Existing<'_>, StorageError> {
        let object = self.describe(path);
        let (dir, leaf) = self.parent_dir(path, Walk::Existing)?;
        let opened =
            open_regular(dir.fd(), &leaf, &object)?.ok_or_else(|| StorageError::NotFound {
                object: object.clone(),
            })?;
        self.check_read(&opened, &object)?;
        Ok(Existing {
            dir,
            leaf,
            opened,
            object,
        })
    }

    /// Opens an existing regular file, checking `generation` against the opened inode.
    fn open_object(&self, path: &RelPath, generation: Option<u64>) -> Result<Opened, StorageError> {
        let Existing { opened, object, .. } = self.open_existing(path)?;
        if let Some(expected) = generation {
            let actual = generation_of(&opened.meta, &object)?;
            if actual != expected {
                return Err(StorageError::GenerationMismatch {
                    object,
                    expected,
                    actual,
                });
            }
        }
        Ok(opened)
    }

    /// Create-only hard link of `src_leaf` in `src_dir` (whose bytes are `content`) to `dst`,
    /// with a copy where links are impossible: the shared body of `copy_from` and
    /// `adopt_file`.
    fn link_or_copy(
        &self,
        src_dir: BorrowedFd<'_>,
        src_leaf: &CStr,
        content: &Content<'_>,
        dst: &RelPath,
    ) -> Result<CreateOutcome, StorageError> {
        let object = self.describe(dst);
        let (dir, leaf) = self.parent_dir(dst, Walk::CreateMissing)?;
        if let Some(outcome) = compare_existing(dir.fd(), &leaf, content, &object)? {
            return Ok(outcome);
        }
        match sys::link_between(src_dir, src_leaf, dir.fd(), &leaf) {
            Ok(()) => {
                sys::fsync_dir(dir.fd()).map_err(|e| StorageError::io(&object, e))?;
                Ok(CreateOutcome::Created)
            }
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                compare_existing(dir.fd(), &leaf, content, &object)?.ok_or_else(|| {
                    StorageError::io(&object, io::Error::other("object vanished during copy"))
                })
            }
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EXDEV | libc::EPERM | libc::EMLINK | libc::ENOTSUP)
                ) =>
            {
                self.create_content(dst, content)
            }
            Err(e) => Err(StorageError::io(object, e)),
        }
    }

    /// Shared body of `create` and `create_from_file`.
    fn create_content(
        &self,
        path: &RelPath,
        content: &Content<'_>,
    ) -> Result<CreateOutcome, StorageError> {
        let object = self.describe(path);
        let (dir, leaf) = self.parent_dir(path, Walk::CreateMissing)?;
        // Checking first makes a resumed publication cheap: no temporary copy of a large
        // shard that is already in place.
        if let Some(outcome) = compare_existing(dir.fd(), &leaf, content, &object)? {
            return Ok(outcome);
        }
        let mut temp = TempFile::create(dir.fd(), &object)?;
        content.write_to(&mut temp.file, &object)?;
        temp.file
            .sync_all()
            .map_err(|e| StorageError::io(&object, e))?;
        match sys::link_at(dir.fd(), &temp.name, &leaf) {
            Ok(()) => {
                temp.remove().map_err(|e| StorageError::io(&object, e))?;
                sys::fsync_dir(dir.fd()).map_err(|e| StorageError::io(&object, e))?;
                Ok(CreateOutcome::Created)
            }
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                drop(temp);
                compare_existing(dir.fd(), &leaf, content, &object)?.ok_or_else(|| {
                    StorageError::io(&object, io::Error::other("object vanished during create"))
                })
            }
            Err(e) => Err(StorageError::io(object, e)),
        }
    }
}

/// A range of an object of a [`LocalStore`], open and checked for reading (see
/// [`ObjectStore::open_local_range`]).
pub struct LocalRange {
    opened: Arc<Opened>,
    object: String,
}

impl LocalRange {
    /// Reads consecutive bytes at `offset` part by part, straight into the buffers (see
    /// [`super::read_split`]).
    pub fn read_split(
        &self,
        offset: u64,
        parts: &[(usize, usize)],
        outs: &mut [&mut Vec<u8>],
    ) -> Result<(), StorageError> {
        crate::memory::read_split_at(&self.opened.file, offset, parts, outs)
            .map_err(|e| StorageError::io(&self.object, e))
    }
}

/// An object of a [`LocalStore`], open and checked for reading, with the directory it is
/// linked in: what another local store needs to hard-link it (see
/// [`ObjectStore::local_object`]).
pub struct LocalObject {
    dir: OwnedFd,
    leaf: CString,
    content: Content<'static>,
}

/// An existing regular file opened for reading ([`LocalStore::open_existing`]).
struct Existing<'a> {
    dir: Dir<'a>,
    leaf: CString,
    opened: Opened,
    object: String,
}

impl LocalStore {
    fn open_linkable(&self, path: &RelPath) -> Result<LocalObject, StorageError> {
        let Existing {
            dir,
            leaf,
            opened,
            object,
        } = self.open_existing(path)?;
        let dir = dir
            .fd()
            .try_clone_to_owned()
            .map_err(|e| StorageError::io(&object, e))?;
        Ok(LocalObject {
            dir,
            leaf,
            content: Content::Local {
                len: opened.meta.len(),
                file: opened.file,
                shown: object,
            },
        })
    }
}

impl ObjectStore for LocalStore {
    fn describe(&self, path: &RelPath) -> String {
        self.root_path.join(path.as_str()).display().to_string()
    }

    fn read(&self, path: &RelPath, generation: Option<u64>) -> Result<Bytes, StorageError> {
        self.read_limited(path, generation, u64::MAX)
    }

    fn read_limited(
        &self,
        path: &RelPath,
        generation: Option<u64>,
        max_bytes: u64,
    ) -> Result<Bytes, StorageError> {
        let object = self.describe(path);
        let opened = self.open_object(path, generation)?;
        read_capped(&opened, max_bytes, &object)
    }

    fn read_range(
        &self,
        path: &RelPath,
        range: Range<u64>,
        generation: Option<u64>,
    ) -> Result<Bytes, StorageError> {
        let opened = self.open_range(path, range.clone(), generation)?;
        // The object is named only when something fails: naming it costs two allocations,
        // and a scan reads a range per record.
        let (mut buf, len) = reserved(range.end - range.start, || self.describe(path))?;
        crate::memory::read_exact_at_into(&opened.file, range.start, len, &mut buf)
            .map_err(|e| StorageError::io(self.describe(path), e))?;
        Ok(Bytes::from(buf))
    }

    fn open_local_range(
        &self,
        path: &RelPath,
        range: Range<u64>,
        generation: Option<u64>,
    ) -> Option<Result<LocalRange, StorageError>> {
        Some(
            self.open_range(path, range, generation)
                .map(|opened| LocalRange {
                    opened,
                    object: self.describe(path),
                }),
        )
    }

    fn local_object(&self, path: &RelPath) -> Option<Result<LocalObject, StorageError>> {
        Some(self.open_linkable(path))
    }

    fn confine_to_owner_of(&self, path: &RelPath) -> Result<Option<Arc<Identity>>, StorageError> {
        LocalStore::confine_to_owner_of(self, path)
    }

    fn location(&self) -> super::Location {
        super::Location::Local(self.root_path.clone())
    }

    fn info(&self, path: &RelPath, generation: Option<u64>) -> Result<ObjectInfo, StorageError> {
        let object = self.describe(path);
        let opened = self.open_object(path, generation)?;
        Ok(ObjectInfo {
            size: opened.meta.len(),
            version: version_of(&opened.meta, &object)?,
            modified: opened.meta.modified().ok(),
        })
    }

    fn create(&self, path: &RelPath, data: &[u8]) -> Result<CreateOutcome, StorageError> {
        self.create_content(path, &Content::Memory(data))
    }

    fn create_from_file(&self, path: &RelPath, file: &Path) -> Result<CreateOutcome, StorageError> {
        let content = Content::open_local(file)?;
        self.create_content(path, &content)
    }

    /// Hard-links `file` into place (no copy: `sds create` writes each shard once instead of
    /// twice), after making its bytes durable; copies when the link is impossible (another
    /// filesystem).
    fn adopt_file(&self, path: &RelPath, file: &Path) -> Result<CreateOutcome, StorageError> {
        let (Some(parent), Some(name)) = (file.parent(), file.file_name()) else {
            return self.create_from_file(path, file);
        };
        let content = Content::open_local(file)?;
        let shown = file.display().to_string();
        // The object must never be visible before its bytes are durable.
        content.sync(&shown)?;
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let src_dir = File::open(parent).map_err(|e| StorageError::io(&shown, e))?;
        let src_leaf = CString::new(name.as_encoded_bytes())
            .map_err(|_| StorageError::invalid(&shown, "path contains NUL"))?;
        self.link_or_copy(src_dir.as_fd(), &src_leaf, &content, path)
    }

    fn local_root(&self) -> Option<&Path> {
        Some(&self.root_path)
    }

    fn read_versioned(&self, path: &RelPath) -> Result<Option<(Bytes, Version)>, StorageError> {
        let object = self.describe(path);
        let (dir, leaf) = match self.parent_dir(path, Walk::Existing) {
            Ok(found) => found,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(opened) = open_regular(dir.fd(), &leaf, &object)? else {
            return Ok(None);
        };
        self.check_read(&opened, &object)?;
        let version = version_of(&opened.meta, &object)?;
        Ok(Some((read_capped(&opened, u64::MAX, &object)?, version)))
    }

    fn compare_and_swap(
        &self,
        path: &RelPath,
        data: &[u8],
        expected: Option<&Version>,
    ) -> Result<Version, StorageError> {
        let object = self.describe(path);
        let (dir, leaf) = self.parent_dir(path, Walk::CreateMissing)?;
        let _lock = lock_sibling(dir.fd(), &leaf, &object)?;
        let current = match open_regular(dir.fd(), &leaf, &object)? {
            Some(opened) => Some(version_of(&opened.meta, &object)?),
            None => None,
        };
        let precondition_holds = match (expected, &current) {
            (None, None) => true,
            (Some(expected), Some(current)) => expected.matches(current),
            _ => false,
        };
        if !precondition_holds {
            return Err(StorageError::PreconditionFailed { object });
        }
        let mut temp = TempFile::create(dir.fd(), &object)?;
        temp.file
            .write_all(data)
            .map_err(|e| StorageError::io(&object, e))?;
        let floor = current.and_then(|v| v.generation);
        let meta = stamp_newer(&temp.file, floor, &object)?;
        temp.file
            .sync_all()
            .map_err(|e| StorageError::io(&object, e))?;
        sys::rename_at(dir.fd(), &temp.name, &leaf).map_err(|e| StorageError::io(&object, e))?;
        temp.forget();
        sys::fsync_dir(dir.fd()).map_err(|e| StorageError::io(&object, e))?;
        version_of(&meta, &object)
    }

    fn supports_generations(&self) -> bool {
        true
    }

    fn copy_from(
        &self,
        src_store: &dyn ObjectStore,
        src: &RelPath,
        dst: &RelPath,
    ) -> Result<CreateOutcome, StorageError> {
        let Some(source) = src_store.local_object(src) else {
            let bytes = src_store.read(src, None)?;
            return self.create(dst, &bytes);
        };
        let LocalObject { dir, leaf, content } = source?;
        self.link_or_copy(dir.as_fd(), &leaf, &content, dst)
    }
}

/// A path segment as a C string. `RelPath` has refused NUL already; this only avoids a panic.
fn c_name(segment: &str, object: &str) -> Result<CString, StorageError> {
    CString::new(segment).map_err(|_| StorageError::invalid(object, "path contains NUL"))
}

/// Opens directory `name` below `dir`, creating it first when allowed and missing.
fn enter(
    dir: BorrowedFd<'_>,
    name: &CStr,
    walk: Walk,
    object: &str,
) -> Result<OwnedFd, StorageError> {
    match sys::open_dir_at(dir, name) {
        Ok(fd) => Ok(fd),
        Err(e) if walk == Walk::CreateMissing && e.raw_os_error() == Some(libc::ENOENT) => {
            match sys::mkdir_at(dir, name, 0o755) {
                // Persist the new entry so a later fsync of the object's own directory is
                // enough to make the object durable.
                Ok(()) => sys::fsync_dir(dir).map_err(|e| StorageError::io(object, e))?,
                // A concurrent writer made it first: fine, it is the same directory.
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                Err(e) => return Err(segment_error(dir, name, e, object)),
            }
            sys::open_dir_at(dir, name).map_err(|e| segment_error(dir, name, e, object))
        }
        Err(e) => Err(segment_error(dir, name, e, object)),
    }
}

/// [`StorageError::Unreadable`] unless `reader` may search the directory `access` describes.
fn search_allowed(
    reader: &Identity,
    access: &Access,
    dir: &Path,
    object: &str,
) -> Result<(), StorageError> {
    if reader.may_search(access) {
        return Ok(());
    }
    Err(StorageError::Unreadable {
        object: object.to_string(),
        reader: reader.shown().to_string(),
        detail: format!("no search permission on the directory {}", dir.display()),
    })
}

/// Opens the directory `path` (absolute) walking from `/` as `reader` would: each directory
/// is checked for `reader`'s search permission before anything is looked up in it, and
/// symlinks are resolved by hand (at most [`MAX_SYMLINKS`]) so that the directories their
/// targets lead through are checked too. Returns a readable descriptor of the directory.
fn walk_as(path: &Path, reader: &Identity, shown: &str) -> Result<OwnedFd, StorageError> {
    let io_error = |e| StorageError::io(shown, e);
    let mut pending: VecDeque<Vec<u8>> = segments_of(path.as_os_str());
    let mut dir = open_root_dir().map_err(io_error)?;
    let mut dir_path = PathBuf::from("/");
    let mut links = 0;
    while let Some(segment) = pending.pop_front() {
        let access = sys::mode_of(dir.as_fd())
            .and_then(|access| access.with_acl_of(dir.as_fd()))
            .map_err(io_error)?;
        search_allowed(reader, &access, &dir_path, shown)?;
        let name = CString::new(segment.clone())
            .map_err(|_| StorageError::invalid(shown, "path contains NUL"))?;
        let next = sys::open_path_at(dir.as_fd(), &name).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => StorageError::NotFound {
                object: shown.to_string(),
            },
            _ => io_error(e),
        })?;
        let kind = sys::mode_of(next.as_fd()).map_err(io_error)?.mode & libc::S_IFMT;
        if kind == libc::S_IFLNK {
            links += 1;
            if links > MAX_SYMLINKS {
                return Err(StorageError::invalid(
                    shown,
                    "too many levels of symbolic links",
                ));
            }
            let target = sys::read_link(next.as_fd()).map_err(io_error)?;
            if target.first() == Some(&b'/') {
                dir = open_root_dir().map_err(io_error)?;
                dir_path = PathBuf::from("/");
            }
            let mut segments = segments_of(OsStr::from_bytes(&target));
            segments.extend(pending);
            pending = segments;
        } else if kind == libc::S_IFDIR {
            dir = next;
            dir_path = step(&dir_path, &segment);
        } else {
            return Err(StorageError::invalid(
                shown,
                "store root is not a directory",
            ));
        }
    }
    sys::open_at(dir.as_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0).map_err(io_error)
}

/// The non-empty segments of a path other than `.` (`..` kept: the walk resolves it).
fn segments_of(path: &OsStr) -> VecDeque<Vec<u8>> {
    path.as_bytes()
        .split(|&b| b == b'/')
        .filter(|s| !s.is_empty() && *s != b".")
        .map(<[u8]>::to_vec)
        .collect()
}

/// `dir` after stepping into `segment`, for messages.
fn step(dir: &Path, segment: &[u8]) -> PathBuf {
    if segment == b".." {
        return dir.parent().unwrap_or(Path::new("/")).to_path_buf();
    }
    dir.join(OsStr::from_bytes(segment))
}

fn open_root_dir() -> io::Result<OwnedFd> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open("/")
        .map(OwnedFd::from)
}

/// Maps an `openat` failure on `name` below `dir` to the error callers act on.
fn segment_error(dir: BorrowedFd<'_>, name: &CStr, err: io::Error, object: &str) -> StorageError {
    let object = object.to_string();
    match err.raw_os_error() {
        Some(libc::ENOENT) => StorageError::NotFound { object },
        Some(libc::ELOOP) => StorageError::SymlinkRefused { object },
        // O_DIRECTORY | O_NOFOLLOW on a symlink may report ENOTDIR instead of ELOOP; only a
        // second look tells a symlink from a plain file standing where a directory should be.
        Some(libc::ENOTDIR) if sys::is_symlink_at(dir, name).unwrap_or(false) => {
            StorageError::SymlinkRefused { object }
        }
        _ => StorageError::io(object, err),
    }
}

/// Opens the regular file `leaf` below `dir` without following a symlink; `None` if absent.
fn open_regular(
    dir: BorrowedFd<'_>,
    leaf: &CStr,
    object: &str,
) -> Result<Option<Opened>, StorageError> {
    // O_NONBLOCK: opening a FIFO planted under the root must not hang; regular files ignore it.
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let fd = match sys::open_at(dir, leaf, flags, 0) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(segment_error(dir, leaf, e, object)),
    };
    let file = File::from(fd);
    let meta = file.metadata().map_err(|e| StorageError::io(object, e))?;
    if !meta.is_file() {
        return Err(StorageError::invalid(object, "not a regular file"));
    }
    Ok(Some(Opened { file, meta }))
}

/// A file's generation: its modification time in nanoseconds since the epoch.
fn generation_of(meta: &Metadata, object: &str) -> Result<u64, StorageError> {
    let ns = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
    u64::try_from(ns).map_err(|_| {
        StorageError::invalid(
            object,
            "modification time before 1970 cannot be a generation",
        )
    })
}

/// A file's version. The ETag adds inode and size to the generation, so a replacement that
/// happened to keep the mtime (`cp -p`, `touch -r`) still fails a compare-and-swap that
/// expected the old file.
fn version_of(meta: &Metadata, object: &str) -> Result<Version, StorageError> {
    let generation = generation_of(meta, object)?;
    Ok(Version {
        generation: Some(generation),
        etag: Some(format!(
            "{:x}-{:x}-{:x}",
            meta.ino(),
            meta.len(),
            generation
        )),
    })
}

/// An empty buffer with room for `len` bytes, and `len` as a `usize`; sizes this process
/// cannot hold are refused rather than aborting on allocation failure.
/// A buffer of `len` bytes reserved; `object` names what it is for if it cannot be.
fn reserved(len: u64, object: impl Fn() -> String) -> Result<(Vec<u8>, usize), StorageError> {
    let too_large = || StorageError::TooLarge {
        object: object(),
        size: len,
        limit: isize::MAX as u64,
    };
    let len = usize::try_from(len).map_err(|_| too_large())?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(len).map_err(|_| too_large())?;
    // Large ranges (4 MiB pieces of a shard being decoded) are fresh memory each time.
    crate::memory::advise_huge_pages(&buf);
    Ok((buf, len))
}

/// A zero-filled buffer of `len` bytes (see [`reserved`]).
fn zeroed(len: u64, object: &str) -> Result<Vec<u8>, StorageError> {
    let (mut buf, len) = reserved(len, || object.to_string())?;
    buf.resize(len, 0);
    Ok(buf)
}

/// Reads a whole opened object, refusing it when larger than `limit`: first by its stat size,
/// then by never reading more than `limit + 1` bytes in case it grew after the stat.
fn read_capped(opened: &Opened, limit: u64, object: &str) -> Result<Bytes, StorageError> {
    let size = opened.meta.len();
    let too_large = |size| StorageError::TooLarge {
        object: object.to_string(),
        size,
        limit,
    };
    if size > limit {
        return Err(too_large(size));
    }
    let cap = limit.saturating_add(1);
    let mut buf = zeroed(size, object)?;
    let mut filled = 0u64;
    loop {
        let want = cap
            .saturating_sub(filled)
            .min(size.saturating_sub(filled).max(PROBE));
        let start = usize::try_from(filled).map_err(|_| too_large(filled))?;
        let end = usize::try_from(filled + want).map_err(|_| too_large(filled + want))?;
        if buf.len() < end {
            buf.try_reserve(end - buf.len())
                .map_err(|_| too_large(filled + want))?;
            buf.resize(end, 0);
        }
        let n = pread_some(&opened.file, &mut buf[start..end], filled)
            .map_err(|e| StorageError::io(object, e))?;
        filled += n as u64;
        if n == 0 || filled >= cap {
            break;
        }
    }
    if filled > limit {
        return Err(too_large(filled.max(size)));
    }
    buf.truncate(usize::try_from(filled).map_err(|_| too_large(filled))?);
    Ok(Bytes::from(buf))
}

/// One `pread`, retried if a signal interrupts it.
fn pread_some(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    loop {
        match file.read_at(buf, offset) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// What a create-only write stores: bytes in memory or a local file streamed from disk.
enum Content<'a> {
    Memory(&'a [u8]),
    Local { file: File, len: u64, shown: String },
}

impl Content<'_> {
    fn open_local(path: &Path) -> Result<Content<'static>, StorageError> {
        let shown = path.display().to_string();
        let file = File::open(path).map_err(|e| StorageError::io(&shown, e))?;
        let meta = file.metadata().map_err(|e| StorageError::io(&shown, e))?;
        if !meta.is_file() {
            return Err(StorageError::invalid(shown, "source is not a regular file"));
        }
        Ok(Content::Local {
            file,
            len: meta.len(),
            shown,
        })
    }

    /// Makes a local file's bytes durable (memory content has nothing to sync).
    fn sync(&self, object: &str) -> Result<(), StorageError> {
        match self {
            Content::Memory(_) => Ok(()),
            Content::Local { file, .. } => file.sync_all().map_err(|e| StorageError::io(object, e)),
        }
    }

    fn len(&self) -> u64 {
        match self {
            Content::Memory(data) => data.len() as u64,
            Content::Local { len, .. } => *len,
        }
    }

    /// The `len` bytes at `offset`, borrowed from memory or read into `scratch`.
    fn chunk<'s>(
        &'s self,
        offset: u64,
        len: usize,
        scratch: &'s mut Vec<u8>,
        object: &str,
    ) -> Result<&'s [u8], StorageError> {
        match self {
            Content::Memory(data) => usize::try_from(offset)
                .ok()
                .and_then(|start| data.get(start..start.checked_add(len)?))
                .ok_or_else(|| {
                    StorageError::invalid(object, "chunk outside the data being written")
                }),
            Content::Local { file, shown, .. } => {
                scratch.resize(len, 0);
                file.read_exact_at(scratch, offset)
                    .map_err(|e| StorageError::io(shown.as_str(), e))?;
                Ok(scratch)
            }
        }
    }

    /// Chunk lengths and offsets covering the content.
    fn chunks(&self) -> impl Iterator<Item = (u64, usize)> {
        let len = self.len();
        (0..len)
            .step_by(CHUNK)
            .map(move |offset| (offset, (len - offset).min(CHUNK as u64) as usize))
    }

    fn write_to(&self, out: &mut File, object: &str) -> Result<(), StorageError> {
        let mut scratch = Vec::new();
        for (offset, len) in self.chunks() {
            let chunk = self.chunk(offset, len, &mut scratch, object)?;
            out.write_all(chunk)
                .map_err(|e| StorageError::io(object, e))?;
        }
        Ok(())
    }

    /// Whether `existing` holds exactly this content, streamed chunk by chunk.
    fn equals(&self, existing: &Opened, object: &str) -> Result<bool, StorageError> {
        if existing.meta.len() != self.len() {
            return Ok(false);
        }
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for (offset, len) in self.chunks() {
            theirs.resize(len, 0);
            existing
                .file
                .read_exact_at(&mut theirs, offset)
                .map_err(|e| StorageError::io(object, e))?;
            if self.chunk(offset, len, &mut ours, object)? != theirs.as_slice() {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The outcome of a create-only write if `leaf` already exists; `None` if it does not.
fn compare_existing(
    dir: BorrowedFd<'_>,
    leaf: &CStr,
    content: &Content<'_>,
    object: &str,
) -> Result<Option<CreateOutcome>, StorageError> {
    let existing = match open_regular(dir, leaf, object) {
        Ok(Some(existing)) => existing,
        Ok(None) => return Ok(None),
        // A directory or device under the name is a collision, not a malformed request.
        Err(StorageError::Invalid { object, .. }) => {
            return Err(StorageError::Collision { object })
        }
        Err(e) => return Err(e),
    };
    if content.equals(&existing, object)? {
        Ok(Some(CreateOutcome::AlreadyIdentical))
    } else {
        Err(StorageError::Collision {
            object: object.to_string(),
        })
    }
}

/// Takes the exclusive lock serialising compare-and-swap writers of `leaf`; held until the
/// returned file is dropped.
fn lock_sibling(dir: BorrowedFd<'_>, leaf: &CStr, object: &str) -> Result<File, StorageError> {
    let mut name = b".".to_vec();
    name.extend_from_slice(leaf.to_bytes());
    name.extend_from_slice(b".lock");
    let name =
        CString::new(name).map_err(|_| StorageError::invalid(object, "path contains NUL"))?;
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW;
    let fd =
        sys::open_at(dir, &name, flags, 0o644).map_err(|e| segment_error(dir, &name, e, object))?;
    sys::lock_exclusive(fd.as_fd()).map_err(|e| StorageError::io(object, e))?;
    Ok(File::from(fd))
}

/// Gives `file` an mtime strictly greater than `floor` (the replaced file's generation) and at
/// least the current time, returning its metadata. With no floor the write time stands.
fn stamp_newer(file: &File, floor: Option<u64>, object: &str) -> Result<Metadata, StorageError> {
    let stat = || file.metadata().map_err(|e| StorageError::io(object, e));
    let Some(floor) = floor else {
        return stat();
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_nanos()).ok())
        .unwrap_or(0);
    for margin in MTIME_MARGINS_NS {
        let candidate = now.max(floor.saturating_add(margin));
        sys::set_mtime_ns(file.as_fd(), candidate).map_err(|e| StorageError::io(object, e))?;
        let meta = stat()?;
        if generation_of(&meta, object)? > floor {
            return Ok(meta);
        }
    }
    Err(StorageError::io(
        object,
        io::Error::other(
            "filesystem timestamps too coarse to give the new version a newer generation",
        ),
    ))
}

/// A temporary file in the target directory, removed on drop unless renamed away.
struct TempFile<'d> {
    dir: BorrowedFd<'d>,
    name: CString,
    file: File,
    armed: bool,
}

impl<'d> TempFile<'d> {
    fn create(dir: BorrowedFd<'d>, object: &str) -> Result<TempFile<'d>, StorageError> {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        for _ in 0..TEMP_NAME_ATTEMPTS {
            let name = c_name(&temp_name(), object)?;
            match sys::open_at(dir, &name, flags, 0o644) {
                Ok(fd) => {
                    return Ok(TempFile {
                        dir,
                        name,
                        file: File::from(fd),
                        armed: true,
                    })
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
                Err(e) => return Err(StorageError::io(object, e)),
            }
        }
        Err(StorageError::io(
            object,
            io::Error::other("no unused temporary file name found"),
        ))
    }

    /// Removes the temporary name, reporting failure (used once the content is linked).
    fn remove(mut self) -> io::Result<()> {
        self.armed = false;
        sys::unlink_at(self.dir, &self.name)
    }

    /// The name no longer exists (renamed over the target): nothing to clean up.
    fn forget(&mut self) {
        self.armed = false;
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if self.armed {
            // Best effort on an error path: the error that got us here is the one to report.
            let _ = sys::unlink_at(self.dir, &self.name);
        }
    }
}

/// `.tmp-` and 16 hex digits, unpredictable and distinct per call. `RandomState` is seeded
/// from the OS per process; the counter, pid and clock keep calls within a process distinct.
fn temp_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    format!(".tmp-{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, LocalStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        (dir, store)
    }

    #[test]
    fn temp_names_are_distinct_and_hidden() {
        let names: std::collections::HashSet<String> = (0..1000).map(|_| temp_name()).collect();
        assert_eq!(names.len(), 1000);
        assert!(names
            .iter()
            .all(|n| n.starts_with(".tmp-") && n.len() == 21));
    }

    #[test]
    fn open_refuses_missing_and_non_directory_roots() {
        let dir = tempfile::tempdir().unwrap();
        let missing = LocalStore::open(&dir.path().join("nope")).unwrap_err();
        assert!(missing.is_not_found(), "{missing}");
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let err = LocalStore::open(&file).unwrap_err();
        assert!(matches!(err, StorageError::Invalid { .. }), "{err}");
    }

    #[test]
    fn replacement_generation_exceeds_a_future_mtime() {
        // The clock "went back": the current file claims to be from an hour ahead.
        let (dir, store) = store();
        let path = RelPath::new("c.json").unwrap();
        let v1 = store.compare_and_swap(&path, b"1", None).unwrap();
        let future = SystemTime::now() + std::time::Duration::from_secs(3600);
        File::options()
            .write(true)
            .open(dir.path().join("c.json"))
            .unwrap()
            .set_modified(future)
            .unwrap();
        let (_, current) = store.read_versioned(&path).unwrap().unwrap();
        assert!(current.generation > v1.generation);
        let v2 = store.compare_and_swap(&path, b"2", Some(&current)).unwrap();
        assert!(v2.generation.unwrap() > current.generation.unwrap());
        assert_eq!(store.info(&path, None).unwrap().version, v2);
    }

    #[test]
    fn read_capped_notices_growth_after_the_stat() {
        let (dir, store) = store();
        std::fs::write(dir.path().join("big"), vec![7u8; 100]).unwrap();
        std::fs::write(dir.path().join("small"), vec![7u8; 10]).unwrap();
        let big = store
            .open_object(&RelPath::new("big").unwrap(), None)
            .unwrap();
        let small = store
            .open_object(&RelPath::new("small").unwrap(), None)
            .unwrap();
        // The stat said 10 bytes, but the file holds 100: as if it grew after the stat.
        let grown = Opened {
            file: big.file,
            meta: small.meta,
        };
        match read_capped(&grown, 50, "o") {
            Err(StorageError::TooLarge { size, limit, .. }) => {
                assert_eq!(
                    (size, limit),
                    (51, 50),
                    "reads stop one byte past the limit"
                );
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
        assert_eq!(read_capped(&grown, 100, "o").unwrap().len(), 100);
    }

    #[test]
    fn directory_in_the_way_is_a_collision() {
        let (dir, store) = store();
        std::fs::create_dir(dir.path().join("taken")).unwrap();
        let err = store
            .create(&RelPath::new("taken").unwrap(), b"x")
            .unwrap_err();
        assert!(matches!(err, StorageError::Collision { .. }), "{err}");
    }

    #[test]
    fn rel_path_is_lexical_and_confined() {
        let (dir, store) = store();
        let inside = store.rel_path(&dir.path().join("a/b.json")).unwrap();
        assert_eq!(inside.as_str(), "a/b.json");
        let err = store.rel_path(Path::new("/etc/passwd")).unwrap_err();
        assert!(matches!(err, StorageError::OutsideRoot { .. }), "{err}");
    }
}
