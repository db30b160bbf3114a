//! The mount daemon's lifecycle, below the command line and above the filesystem: checking the
//! mount point, daemonizing with a readiness report, serving in the foreground until a signal
//! or an external unmount, telling systemd, and unmounting.
//!
//! - [`mountpoint`]: refuses a mount point that is not an empty directory, is a mount already,
//!   or holds a dead mount.
//! - [`ready`]: re-executes the program as a detached daemon and waits on a pipe for "ready".
//! - [`serve`]: the FUSE session over the dataset, its signals and its end.
//! - [`notify`]: `sd_notify(3)` for `Type=notify` units.
//! - [`unmount`]: outright, lazily when busy, or through `fusermount3`.
//!
//! System calls go through `nix`'s safe wrappers. Three `unsafe` sites are left, each saying
//! why it is sound: the `pre_exec` hook of the re-executed daemon, taking ownership of the
//! readiness descriptor the parent passed down, and moving the join handle out of a fuser
//! session that must not unmount again (see [`serve`]).

pub mod mountpoint;
pub mod notify;
pub mod ready;
pub mod serve;
pub mod unmount;

pub use mountpoint::check_mountpoint;
pub use notify::notify_systemd;
pub use serve::{run_foreground, MountSettings};
pub use unmount::{detach, unmount, Detached};
