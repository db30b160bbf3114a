//! Unmounting an sdsfs mount: outright when nothing holds the mount, lazily when files are open
//! on it, through `fusermount3` when this user may not call `umount2` itself; never through a
//! symbolic link, never another filesystem (see [`detach`]).

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::errno::Errno;
use nix::mount::{umount2, MntFlags};
use rustix::fs::{openat, statat, AtFlags, FileType, Mode, OFlags, CWD};

use super::mountpoint::{mount_rooted_at, MountEntry, FSTYPE};
use super::DaemonError;
use crate::format::printable::escaped;

/// How an unmount went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detached {
    /// Unmounted outright: nothing held it.
    Unmounted,
    /// Files were still open on it (possibly with its daemon dead): detached from the
    /// namespace lazily, so the path is free at once; the mount itself ends when the last of
    /// those files is closed.
    Lazily,
}

/// `sdsfs unmount`: unmounts `mountpoint`, detaching it lazily when it is busy (saying so on
/// stderr), so that a mount whose daemon died with files open is cleared too.
pub fn unmount(mountpoint: &Path) -> Result<(), DaemonError> {
    if detach(mountpoint)? == Detached::Lazily {
        eprintln!(
            "sdsfs: {}: busy (files are still open on it): detached lazily; the path is free \
             now, and those files stay open until closed",
            escaped(&mountpoint.to_string_lossy())
        );
    }
    Ok(())
}

/// Unmounts the sdsfs mount at `mountpoint`: `umount2` when allowed (root), else
/// `fusermount3 -u`; when the mount is busy, the same lazily (`MNT_DETACH`, `fusermount3 -u
/// -z`). A busy mount cannot be unmounted outright even when its daemon is dead, and left in
/// place it answers ENOTCONN to everyone, including a remount at the same path.
///
/// Only an sdsfs mount, and never through a link: root runs this from a unit's
/// `ExecStartPre`/`ExecStop` and on the daemon's advice, often on paths below directories other
/// users own. So the mount point is opened without following a final link, relative to its
/// parent directory (opened once); the mount rooted there is identified by its mount id and
/// must be `fuse.sdsfs` in `/proc/self/mountinfo`; and `umount2` gets that same name below
/// the same parent (`/proc/self/fd/PARENT/NAME`) with `UMOUNT_NOFOLLOW`. Between the check and
/// the unmount the name cannot come to hold another mount: a directory that is a mount point
/// cannot be renamed, and a link put in its place is refused by `UMOUNT_NOFOLLOW`.
pub fn detach(mountpoint: &Path) -> Result<Detached, DaemonError> {
    let shown = escaped(&mountpoint.to_string_lossy()).into_owned();
    let (parent, name) = split_mountpoint(mountpoint)?;
    let parent = openat(
        CWD,
        parent,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| DaemonError::io(shown.clone())(std::io::Error::from(e)))?;
    detach_at(parent.as_fd(), name, &shown, mountpoint)
}

/// Unmounts the sdsfs mount on directory `name` of the directory `parent` (see [`detach`]);
/// `mountpoint` is its path, for `fusermount3`.
pub fn detach_at(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    shown: &str,
    mountpoint: &Path,
) -> Result<Detached, DaemonError> {
    check_sdsfs_mount(parent, name, shown)?;
    let target = PathBuf::from(format!("/proc/self/fd/{}", parent.as_raw_fd())).join(name);
    let error = match umount2(&target, MntFlags::UMOUNT_NOFOLLOW) {
        Ok(()) => return Ok(Detached::Unmounted),
        Err(error) => error,
    };
    match error {
        Errno::EBUSY => match umount2(&target, MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW) {
            Ok(()) => Ok(Detached::Lazily),
            Err(e) => Err(DaemonError::sys(format!("cannot unmount {shown}"))(e)),
        },
        Errno::EPERM | Errno::EACCES => fusermount_unmount(mountpoint),
        Errno::EINVAL => Err(DaemonError::NotMounted(shown.to_string())),
        _ => Err(DaemonError::sys(format!("cannot unmount {shown}"))(error)),
    }
}

/// The parent directory and the last name of a mount point path (`.` for a bare name).
fn split_mountpoint(mountpoint: &Path) -> Result<(&Path, &OsStr), DaemonError> {
    let name = mountpoint.file_name().ok_or_else(|| {
        DaemonError::Refused(format!(
            "{}: not a mount point sdsfs unmounts (name the mount point itself)",
            escaped(&mountpoint.to_string_lossy())
        ))
    })?;
    let parent = match mountpoint.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((parent, name))
}

/// Refuses `name` below `parent` unless it is a directory (not a link) on which an sdsfs
/// mount is rooted.
fn check_sdsfs_mount(parent: BorrowedFd<'_>, name: &OsStr, shown: &str) -> Result<(), DaemonError> {
    let is_link = statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)
        .map(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink)
        .unwrap_or(false);
    if is_link {
        return Err(DaemonError::Refused(format!(
            "{shown}: a symbolic link; sdsfs unmount never follows one (name the mount point \
             itself)"
        )));
    }
    // O_PATH asks nothing of the filesystem, so a dead mount opens too.
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = openat(parent, name, flags, Mode::empty())
        .map_err(|e| DaemonError::io(shown.to_string())(std::io::Error::from(e)))?;
    let mount = mount_rooted_at(dir.as_fd(), shown)?
        .ok_or_else(|| DaemonError::NotMounted(shown.to_string()))?;
    if !is_sdsfs(&mount) {
        return Err(DaemonError::Refused(format!(
            "{shown}: not an sdsfs mount ({} {}); sdsfs unmount unmounts sdsfs mounts only",
            escaped(&mount.fstype),
            escaped(&mount.source)
        )));
    }
    Ok(())
}

/// Whether a mount is sdsfs's: `fuse.sdsfs` (this version, and any version mounting through
/// fusermount3), or `fuse` with an `sdsfs:` source (earlier versions' own mount(2)).
fn is_sdsfs(mount: &MountEntry) -> bool {
    mount.fstype == FSTYPE || (mount.fstype == "fuse" && mount.source.starts_with("sdsfs:"))
}

/// `fusermount3 -u` (the unprivileged way), then `-u -z` if that fails (busy).
fn fusermount_unmount(mountpoint: &Path) -> Result<Detached, DaemonError> {
    for program in ["fusermount3", "fusermount"] {
        let Ok(plain) = Command::new(program).arg("-u").arg(mountpoint).output() else {
            continue;
        };
        if plain.status.success() {
            return Ok(Detached::Unmounted);
        }
        let lazy = Command::new(program)
            .arg("-u")
            .arg("-z")
            .arg(mountpoint)
            .output()
            .map_err(DaemonError::io(format!(
                "{program} -u -z {}",
                mountpoint.display()
            )))?;
        if lazy.status.success() {
            return Ok(Detached::Lazily);
        }
        return Err(DaemonError::Refused(format!(
            "{program} -u {} failed: {}",
            mountpoint.display(),
            String::from_utf8_lossy(&plain.stderr).trim()
        )));
    }
    Err(DaemonError::Refused(format!(
        "cannot unmount {}: not permitted and no fusermount3 found",
        mountpoint.display()
    )))
}
