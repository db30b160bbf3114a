//! What `sdsfs status` reports: counters kept while a mount runs, and the storage wrapper that
//! counts requests, bytes and failures per object.
//!
//! Everything is an atomic counter or a short critical section, so counting costs no I/O and
//! never blocks a request behind another. The report is JSON, generated when the hidden
//! control file `.sdsfs-status` at the mount root is opened (see [`super::fuse`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use crate::format::path::RelPath;
use crate::storage::{ObjectStore, Observed, StorageError, StoreObserver, StoreOp};
use crate::sync::lock;

/// The hidden control file at the mount root (found by lookup, never listed).
pub const STATUS_FILE: &str = ".sdsfs-status";

/// Errors of one object (a storage object, or the data object of a record that failed).
#[derive(Debug, Clone, Default)]
struct ObjectErrors {
    count: u64,
    last: String,
}

/// The FUSE operations counted one by one in the status report (`requests.by_op`): what a
/// walk or a scan costs in round trips to the daemon, by kind, is what tells whether the
/// kernel answered from its caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FuseOp {
    Lookup,
    Forget,
    Getattr,
    Readlink,
    Open,
    Read,
    Release,
    Opendir,
    Readdir,
    Readdirplus,
    Releasedir,
    Statfs,
    Access,
    Getxattr,
    Listxattr,
    Ioctl,
    Flush,
    Fsync,
    Lseek,
}

impl FuseOp {
    const ALL: [FuseOp; 19] = [
        FuseOp::Lookup,
        FuseOp::Forget,
        FuseOp::Getattr,
        FuseOp::Readlink,
        FuseOp::Open,
        FuseOp::Read,
        FuseOp::Release,
        FuseOp::Opendir,
        FuseOp::Readdir,
        FuseOp::Readdirplus,
        FuseOp::Releasedir,
        FuseOp::Statfs,
        FuseOp::Access,
        FuseOp::Getxattr,
        FuseOp::Listxattr,
        FuseOp::Ioctl,
        FuseOp::Flush,
        FuseOp::Fsync,
        FuseOp::Lseek,
    ];

    /// The name in the status report: the kernel's opcode name, lower case.
    pub fn name(self) -> &'static str {
        match self {
            FuseOp::Lookup => "lookup",
            FuseOp::Forget => "forget",
            FuseOp::Getattr => "getattr",
            FuseOp::Readlink => "readlink",
            FuseOp::Open => "open",
            FuseOp::Read => "read",
            FuseOp::Release => "release",
            FuseOp::Opendir => "opendir",
            FuseOp::Readdir => "readdir",
            FuseOp::Readdirplus => "readdirplus",
            FuseOp::Releasedir => "releasedir",
            FuseOp::Statfs => "statfs",
            FuseOp::Access => "access",
            FuseOp::Getxattr => "getxattr",
            FuseOp::Listxattr => "listxattr",
            FuseOp::Ioctl => "ioctl",
            FuseOp::Flush => "flush",
            FuseOp::Fsync => "fsync",
            FuseOp::Lseek => "lseek",
        }
    }
}

/// Storage traffic of one backend.
#[derive(Debug, Default)]
pub struct BackendCounters {
    pub requests: AtomicU64,
    pub bytes: AtomicU64,
    pub errors: AtomicU64,
}

/// The counters of one mount.
#[derive(Debug)]
pub struct MountStats {
    started: SystemTime,
    started_at: Instant,
    /// FUSE requests served (every operation), and those answered with EIO.
    pub requests: AtomicU64,
    /// The same requests by operation, indexed like [`FuseOp::ALL`].
    by_op: [AtomicU64; FuseOp::ALL.len()],
    pub eio: AtomicU64,
    /// Opens answered with FUSE passthrough (their reads never reach the daemon).
    pub passthrough_opens: AtomicU64,
    backends: Mutex<BTreeMap<String, Arc<BackendCounters>>>,
    errors: Mutex<BTreeMap<String, ObjectErrors>>,
}

impl Default for MountStats {
    fn default() -> Self {
        MountStats {
            started: SystemTime::now(),
            started_at: Instant::now(),
            requests: AtomicU64::new(0),
            by_op: Default::default(),
            eio: AtomicU64::new(0),
            passthrough_opens: AtomicU64::new(0),
            backends: Mutex::new(BTreeMap::new()),
            errors: Mutex::new(BTreeMap::new()),
        }
    }
}

/// Most objects remembered with errors; later ones are counted under "(other objects)".
const MAX_ERROR_OBJECTS: usize = 1000;

impl MountStats {
    /// Counts one FUSE request of kind `op`.
    pub fn count_request(&self, op: FuseOp) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.by_op[op as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// `{"lookup": n, ...}`: every operation counted at least once.
    pub fn requests_by_op_json(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        for op in FuseOp::ALL {
            let count = self.by_op[op as usize].load(Ordering::Relaxed);
            if count > 0 {
                out.insert(op.name().to_string(), count.into());
            }
        }
        serde_json::Value::Object(out)
    }

    /// The counters of backend `name` (`local`, `s3`, ...), created on first use.
    pub fn backend(&self, name: &str) -> Arc<BackendCounters> {
        lock(&self.backends)
            .entry(name.to_string())
            .or_default()
            .clone()
    }

    /// Counts one error of `object`, keeping the latest message.
    pub fn record_error(&self, object: &str, message: &str) {
        let mut errors = lock(&self.errors);
        let key = if errors.len() >= MAX_ERROR_OBJECTS && !errors.contains_key(object) {
            "(other objects)"
        } else {
            object
        };
        let entry = errors.entry(key.to_string()).or_default();
        entry.count += 1;
        entry.last = message.to_string();
    }

    pub fn uptime_secs(&self) -> u64 {
        self.started_at.elapsed().as_secs()
    }

    pub fn started_unix(&self) -> u64 {
        self.started
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// `{"local": {"requests", "bytes", "errors"}, ...}`.
    pub fn backends_json(&self) -> serde_json::Value {
        let backends = lock(&self.backends);
        let mut out = serde_json::Map::new();
        for (name, c) in backends.iter() {
            out.insert(
                name.clone(),
                serde_json::json!({
                    "requests": c.requests.load(Ordering::Relaxed),
                    "bytes": c.bytes.load(Ordering::Relaxed),
                    "errors": c.errors.load(Ordering::Relaxed),
                }),
            );
        }
        serde_json::Value::Object(out)
    }

    /// `{OBJECT: {"count", "last_error"}, ...}`.
    pub fn errors_json(&self) -> serde_json::Value {
        let errors = lock(&self.errors);
        let mut out = serde_json::Map::new();
        for (object, e) in errors.iter() {
            out.insert(
                object.clone(),
                serde_json::json!({"count": e.count, "last_error": e.last}),
            );
        }
        serde_json::Value::Object(out)
    }
}

/// An [`ObjectStore`] that counts requests, bytes and errors (by object) of the store it wraps.
pub type CountingStore = Observed<StoreCounter>;

/// Counts content reads and metadata requests (not writes) for one backend of a mount.
#[derive(Debug)]
pub struct StoreCounter {
    counters: Arc<BackendCounters>,
    stats: Arc<MountStats>,
}

impl StoreCounter {
    /// A transparent counting wrapper of `inner`, counted under `backend`.
    pub fn wrap(
        inner: Arc<dyn ObjectStore>,
        backend: &str,
        stats: Arc<MountStats>,
    ) -> CountingStore {
        let counter = StoreCounter {
            counters: stats.backend(backend),
            stats,
        };
        Observed::transparent(inner, counter)
    }
}

impl StoreObserver for StoreCounter {
    fn observe(
        &self,
        store: &dyn ObjectStore,
        op: StoreOp,
        path: &RelPath,
        outcome: Result<u64, &StorageError>,
    ) {
        use StoreOp::*;
        if !matches!(
            op,
            Read | ReadLimited | ReadRange | OpenLocalRange | Info | ReadVersioned
        ) {
            return;
        }
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        match outcome {
            Ok(bytes) => {
                self.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            Err(e) => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .record_error(&store.describe(path), &e.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_indexed_by_their_position() {
        for (index, op) in FuseOp::ALL.into_iter().enumerate() {
            assert_eq!(op as usize, index, "{}", op.name());
        }
    }

    #[test]
    fn requests_are_counted_by_operation() {
        let stats = MountStats::default();
        stats.count_request(FuseOp::Lookup);
        stats.count_request(FuseOp::Lookup);
        stats.count_request(FuseOp::Readdirplus);
        assert_eq!(stats.requests.load(Ordering::Relaxed), 3);
        assert_eq!(
            stats.requests_by_op_json(),
            serde_json::json!({"lookup": 2, "readdirplus": 1})
        );
    }
}
