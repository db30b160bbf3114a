//! Unmounting: outright when nothing holds the mount, lazily when files are open on it, through
//! `fusermount3` when this user may not call `umount2` itself.

use std::path::Path;
use std::process::Command;

use nix::errno::Errno;
use nix::mount::{umount2, MntFlags};

use super::DaemonError;

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
            mountpoint.display()
        );
    }
    Ok(())
}

/// Unmounts `mountpoint`: `umount2` when allowed (root), else `fusermount3 -u`; when the mount
/// is busy, the same lazily (`MNT_DETACH`, `fusermount3 -u -z`). A busy mount cannot be
/// unmounted outright even when its daemon is dead, and left in place it answers ENOTCONN to
/// everyone, including a remount at the same path.
pub fn detach(mountpoint: &Path) -> Result<Detached, DaemonError> {
    let error = match umount2(mountpoint, MntFlags::empty()) {
        Ok(()) => return Ok(Detached::Unmounted),
        Err(error) => error,
    };
    match error {
        Errno::EBUSY => match umount2(mountpoint, MntFlags::MNT_DETACH) {
            Ok(()) => Ok(Detached::Lazily),
            Err(e) => Err(DaemonError::sys(format!(
                "cannot unmount {}",
                mountpoint.display()
            ))(e)),
        },
        Errno::EPERM | Errno::EACCES => fusermount_unmount(mountpoint),
        Errno::EINVAL => Err(DaemonError::Refused(format!(
            "{}: not mounted",
            mountpoint.display()
        ))),
        _ => Err(DaemonError::sys(format!(
            "cannot unmount {}",
            mountpoint.display()
        ))(error)),
    }
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
