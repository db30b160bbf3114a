//! The mount daemon's lifecycle, below the command line and above the filesystem: checking the
//! mount point, daemonizing with a readiness report, serving in the foreground until a signal
//! or an external unmount, telling systemd, and unmounting.
//!
//! - [`mountpoint`]: refuses a mount point that is not an empty directory, is a mount already,
//!   or holds a dead mount.
//! - [`log`]: the log, every control character of an event escaped, and `--log-file`.
//! - [`ready`]: re-executes the program as a detached daemon and waits on a pipe for "ready".
//! - [`serve`]: the FUSE session over the dataset, its signals and its end.
//! - [`notify`]: `sd_notify(3)` for `Type=notify` units.
//! - [`mod@unmount`]: outright, lazily when busy, or through `fusermount3`.
//!
//! System calls go through `nix`'s safe wrappers. Three `unsafe` sites are left, each saying
//! why it is sound: the `pre_exec` hook of the re-executed daemon, taking ownership of the
//! readiness descriptor the parent passed down, and moving the join handle out of a fuser
//! session that must not unmount again (see [`serve`]).

pub mod log;
pub mod mountpoint;
pub mod notify;
pub mod ready;
pub mod serve;
pub mod unmount;

pub use mountpoint::check_mountpoint;
pub use notify::notify_systemd;
pub use serve::{run_foreground, MountSettings};
pub use unmount::{detach, unmount, Detached};

/// Why the daemon could not check, mount, serve or unmount: one line for the user, with the
/// system error behind it kept as the source.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// A refusal with no system error behind it (a mount point that is not a directory, a
    /// path that is not mounted, the failure a daemon reported).
    #[error("{0}")]
    Refused(String),
    /// Nothing is mounted there (the path, as shown).
    #[error("{0}: not mounted")]
    NotMounted(String),
    /// What was being done, and the I/O error it met.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// What was being done, and the system call's error.
    #[error("{context}: {source}")]
    Sys {
        context: String,
        #[source]
        source: nix::errno::Errno,
    },
}

impl DaemonError {
    /// `context: source` for an I/O error.
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> DaemonError {
        let context = context.into();
        move |source| DaemonError::Io { context, source }
    }

    /// `context: source` for a system call's error.
    pub fn sys(context: impl Into<String>) -> impl FnOnce(nix::errno::Errno) -> DaemonError {
        let context = context.into();
        move |source| DaemonError::Sys { context, source }
    }
}
