//! Serving a mount in the foreground: the filesystem over the dataset, the FUSE session, and
//! its end.
//!
//! SIGINT and SIGTERM are blocked in every thread and read by the main thread from a signalfd,
//! which then unmounts cleanly (lazily when files are open); an external `umount` ends the
//! session thread, which the main thread also notices.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::{getgid, getuid};

use super::mountpoint::MountPoint;
use super::notify::notify_systemd;
use super::ready::report_to_parent;
use super::unmount::Detached;
use super::DaemonError;
use crate::dataset::Dataset;
use crate::fs::cache::CacheConfig;
use crate::fs::catalog_watch::{watch, KnownRecords};
use crate::fs::fuse::{FileOpens, MountInfo, Ownership, SdsFuse};
use crate::fs::namespace::{Namespace, NamespaceConfig};
use crate::fs::stats::MountStats;

/// What a mount is asked to be, from the command line or fstab options.
#[derive(Debug, Clone)]
pub struct MountSettings {
    /// The dataset as given (shown in logs and as the mount's source).
    pub dataset: String,
    pub mountpoint: PathBuf,
    /// Admit every user (FUSE `allow_other`).
    pub allow_other: bool,
    /// Owner shown for every entry; the mounting user's when `None`.
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// The memory budget, bytes.
    pub cache_size: u64,
    /// The temporary-file budget, bytes.
    pub spill_size: u64,
    /// Seconds a read of the annotation catalog is trusted.
    pub metadata_ttl: u64,
    /// FUSE worker threads.
    pub threads: usize,
    pub passthrough: bool,
    pub file_opens: FileOpens,
}

/// Mounts `dataset` at `settings.mountpoint` and serves it until a termination signal or an
/// external unmount; reports the outcome to a waiting parent ([`super::ready::spawn`]).
pub fn run_foreground(
    settings: MountSettings,
    point: MountPoint,
    dataset: Dataset,
    stats: Arc<MountStats>,
) -> Result<(), DaemonError> {
    let signals = termination_signals();
    super::log::init_logging();
    let result = signals.and_then(|signals| serve(&settings, &point, dataset, stats, &signals));
    if let Err(message) = &result {
        report_to_parent(&format!("error: {message}"));
    }
    result
}

fn serve(
    args: &MountSettings,
    point: &MountPoint,
    dataset: Dataset,
    stats: Arc<MountStats>,
    signals: &SignalFd,
) -> Result<(), DaemonError> {
    let cache = CacheConfig {
        spill_bytes: args.spill_size,
        ..CacheConfig::for_cache_size(args.cache_size)
    };
    let memory = crate::budget::Budget::new("memory", cache.memory_bytes);
    let dataset = Arc::new(dataset.with_memory_budget(memory));
    let owner = Ownership {
        uid: args.uid.unwrap_or_else(|| getuid().as_raw()),
        gid: args.gid.unwrap_or_else(|| getgid().as_raw()),
        mtime: dataset.root_modified().unwrap_or(std::time::UNIX_EPOCH),
    };
    let config = NamespaceConfig {
        cache,
        metadata_ttl: std::time::Duration::from_secs(args.metadata_ttl),
        threads: args.threads.max(1),
        ..NamespaceConfig::default()
    };
    let namespace = Arc::new(Namespace::new(dataset.clone(), config));
    let info = MountInfo {
        dataset: args.dataset.clone(),
        mountpoint: std::fs::canonicalize(&args.mountpoint)
            .unwrap_or_else(|_| args.mountpoint.clone())
            .display()
            .to_string(),
    };
    let known = Arc::new(KnownRecords::new(dataset.len()));
    let filesystem = SdsFuse::with_stats(namespace.clone(), owner, stats, info)
        .with_passthrough(args.passthrough)
        .with_file_opens(args.file_opens)
        .with_catalog_watch(known.clone());
    let mut fuse_config = fuser::Config::default();
    fuse_config.mount_options = vec![
        fuser::MountOption::FSName(format!("sdsfs:{}", args.dataset)),
        fuser::MountOption::Subtype("sdsfs".into()),
        fuser::MountOption::RO,
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
    ];
    if args.allow_other {
        fuse_config.acl = fuser::SessionACL::All;
    }
    fuse_config.n_threads = Some(args.threads.max(1));
    let cannot_mount = DaemonError::io(format!("cannot mount on {}", point.shown()));
    let session = match point.mount_fuse(&format!("sdsfs:{}", args.dataset), args.allow_other)? {
        Some(device) => fuser::Session::from_fd(filesystem, device, fuse_config.acl, fuse_config),
        // Not root: fusermount3 mounts by path, where this user may write (see `mountpoint`).
        None => fuser::Session::new(filesystem, point.path(), &fuse_config),
    }
    .map_err(cannot_mount)?;
    let notifier = session.notifier();
    let background = session
        .spawn()
        .map_err(DaemonError::io("cannot start the session"))?;
    std::thread::Builder::new()
        .name("sdsfs-catalog".into())
        .spawn(move || watch(namespace, known, Box::new(notifier)))
        .map_err(DaemonError::io("cannot start the catalog watcher"))?;
    match crate::fs::fuse::raise_read_ahead(&args.mountpoint) {
        Ok(kib) => tracing::debug!(read_ahead_kib = kib, "read-ahead window"),
        Err(why) => tracing::debug!(%why, "read-ahead window left at the kernel's default"),
    }
    tracing::info!(
        dataset = %args.dataset,
        mountpoint = %args.mountpoint.display(),
        snapshot = %dataset.snapshot().snapshot_id,
        records = dataset.len(),
        "mounted"
    );
    report_to_parent("ready");
    notify_systemd(&format!(
        "READY=1\nSTATUS=Serving {} at {}",
        args.dataset,
        args.mountpoint.display()
    ));
    let signalled = wait_for_end(&background, signals);
    notify_systemd("STOPPING=1");
    if !signalled {
        // Unmounted from outside (umount, `sdsfs unmount`, systemd's ExecStop): a clean end.
        tracing::info!(mountpoint = %args.mountpoint.display(), "unmounted");
        return join_without_unmount(background).map_err(session_failed(args));
    }
    tracing::info!(mountpoint = %args.mountpoint.display(), "unmounting");
    let wait = match point.detach() {
        Ok(Detached::Unmounted) => SESSION_END_WAIT,
        Ok(Detached::Lazily) => {
            tracing::warn!(
                mountpoint = %args.mountpoint.display(),
                "files are still open on the mount: detached lazily; reads of those files fail \
                 once the daemon has exited"
            );
            Duration::ZERO
        }
        // Unmounted from outside meanwhile (systemd's ExecStop, then its SIGTERM before the
        // session saw the unmount): the clean end it would have been.
        Err(DaemonError::NotMounted(_)) => {
            tracing::info!(mountpoint = %args.mountpoint.display(), "unmounted");
            SESSION_END_WAIT
        }
        // Not permitted: the connection ends with this process either way.
        Err(why) => {
            tracing::warn!(%why, "unmount");
            SESSION_END_WAIT
        }
    };
    end_session(background, wait).map_err(session_failed(args))
}

/// The failure of a session that ended with an error.
fn session_failed(args: &MountSettings) -> impl FnOnce(std::io::Error) -> DaemonError {
    DaemonError::io(format!("session on {} failed", args.mountpoint.display()))
}

/// How long a signalled daemon waits for its session to end after unmounting outright.
const SESSION_END_WAIT: Duration = Duration::from_secs(2);

/// Ends the session after this daemon detached its mount, waiting up to `wait` for it. A mount
/// unmounted outright ends its session at once; a lazily detached one lives on while files are
/// open, and is left to end with this process (the kernel aborts the connection when
/// `/dev/fuse` is closed, and those files then read ENOTCONN), since the daemon must not
/// outlive its stop.
fn end_session(background: fuser::BackgroundSession, wait: Duration) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + wait;
    while !background.guard.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if background.guard.is_finished() {
        return join_without_unmount(background);
    }
    tracing::info!("open files still held the session: ending it with the daemon");
    // Never dropped: dropping would unmount the path again, which may hold a new mount by now.
    std::mem::forget(background);
    Ok(())
}

/// Joins the session thread after an unmount from outside, without unmounting again.
///
/// Dropping a `BackgroundSession` (which `join` does) unmounts its mount point unless fuser
/// finds the connection gone, and fuser 0.18's check reads a disconnected `/dev/fuse` (poll
/// reports POLLERR) as still mounted. So a daemon that exits slowly after `umount` would
/// unmount whatever was mounted at the same path in the meantime: a remount by mount(8) or
/// systemd. The session's mount handle and channel are therefore leaked; the process exits
/// right after, and the kernel has already torn the mount down.
fn join_without_unmount(background: fuser::BackgroundSession) -> std::io::Result<()> {
    let background = std::mem::ManuallyDrop::new(background);
    // SAFETY: `background` is never dropped nor used again, so the join handle is moved out of
    // it exactly once.
    let thread = unsafe { std::ptr::read(&background.guard) };
    thread
        .join()
        .map_err(|_| std::io::Error::other("filesystem thread panicked"))?
}

/// SIGINT and SIGTERM, blocked in this thread (and every thread spawned after), so that they
/// are only ever read from the returned descriptor, by the main thread.
fn termination_signals() -> Result<SignalFd, DaemonError> {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.thread_block()
        .map_err(DaemonError::sys("cannot block SIGINT and SIGTERM"))?;
    SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(DaemonError::sys("cannot read signals"))
}

/// Returns when a termination signal arrives (`true`) or the session ends on its own, after an
/// external umount (`false`).
fn wait_for_end(session: &fuser::BackgroundSession, signals: &SignalFd) -> bool {
    loop {
        let mut ready = [PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut ready, PollTimeout::from(200u16));
        if let Ok(Some(signal)) = signals.read_signal() {
            tracing::info!(signal = signal.ssi_signo, "termination signal received");
            return true;
        }
        if session.guard.is_finished() {
            return false;
        }
    }
}
