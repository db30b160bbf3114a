//! The mount point, opened once and used only through that descriptor: checked (a directory,
//! empty, not a mount already, not a dead mount) and mounted on.
//!
//! Why a descriptor: checking a path and then mounting by path lets whoever owns a directory
//! on the way swap it between the two (`renameat2(RENAME_EXCHANGE)` with a symbolic link to a
//! non-empty directory), and root's mount then lands on the link's target. The mount point is
//! therefore opened with `O_NOFOLLOW | O_DIRECTORY` (a symbolic link is refused, never
//! followed), checked through that descriptor (its listing read from it; whether it is a mount
//! root from `/proc/self/fdinfo` and its parent, which never asks the filesystem), and mounted
//! through `/proc/self/fd/N`, which the kernel resolves to the very directory opened, whatever
//! its path names by then. A user's mount through `fusermount3` passes the path (fusermount3
//! does its own checks, and mounts only where that user may write).

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{openat, Mode, OFlags, CWD};

use super::DaemonError;

/// The filesystem type of an sdsfs mount in `/proc/self/mountinfo`.
pub const FSTYPE: &str = "fuse.sdsfs";

/// A mount point opened once; everything done to it goes through `dir`.
#[derive(Debug)]
pub struct MountPoint {
    /// The directory, opened for reading without following a final symbolic link.
    dir: OwnedFd,
    /// The path as given, for messages.
    path: PathBuf,
}

/// A mount, as `/proc/self/mountinfo` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub id: u64,
    /// Where it is mounted (octal escapes undone).
    pub point: PathBuf,
    /// `fuse.sdsfs`, `tmpfs`, ...
    pub fstype: String,
    pub source: String,
}

impl std::fmt::Display for MountEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.fstype, self.source)
    }
}

/// Opens and checks the mount point: refuses a path that is a symbolic link or not a
/// directory, a dead mount, and (unless `nonempty`) a directory holding files or a mount
/// already: mounting there would hide what is there without a word, and a second mount over
/// the first is almost always a mistake (a unit started twice, a script run again).
pub fn check_mountpoint(path: &Path, nonempty: bool) -> Result<MountPoint, DaemonError> {
    let point = MountPoint::open(path)?;
    if nonempty {
        return Ok(point);
    }
    if let Some(what) = point.mount_at_root()? {
        return Err(DaemonError::Refused(format!(
            "{}: already a mount point ({what}); unmount it first, or pass --nonempty \
             (-o nonempty) to mount over it",
            point.shown()
        )));
    }
    if point.has_entries()? {
        return Err(DaemonError::Refused(format!(
            "{}: mount point is not empty; use an empty directory, or pass --nonempty \
             (-o nonempty) to hide its contents under the mount",
            point.shown()
        )));
    }
    Ok(point)
}

impl MountPoint {
    /// Opens `path` as a directory, refusing a symbolic link.
    pub fn open(path: &Path) -> Result<MountPoint, DaemonError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let dir = openat(CWD, path, flags, Mode::empty()).map_err(|e| opening(path, e))?;
        Ok(MountPoint {
            dir,
            path: path.to_path_buf(),
        })
    }

    /// The path as given, printable.
    pub fn shown(&self) -> String {
        crate::format::printable::escaped(&self.path.to_string_lossy()).into_owned()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path the kernel resolves to exactly this directory: mount(2)'s target.
    pub fn target(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()))
    }

    /// The directory's mode bits with its type (`rootmode=` of a FUSE mount).
    pub fn mode(&self) -> Result<u32, DaemonError> {
        let stat = rustix::fs::fstat(&self.dir).map_err(|e| {
            DaemonError::io(format!("{}: stat", self.shown()))(std::io::Error::from(e))
        })?;
        Ok(stat.st_mode)
    }

    /// The mount whose root the directory is, if it is one.
    pub fn mount_at_root(&self) -> Result<Option<MountEntry>, DaemonError> {
        mount_rooted_at(self.dir.as_fd(), &self.shown())
    }

    /// Mounts a read-only FUSE filesystem (`fuse.sdsfs`, source `source`) on this directory,
    /// through its descriptor, and returns the `/dev/fuse` connection to serve. `None` when
    /// this process may not call mount(2) (not root): the caller then mounts through
    /// `fusermount3`.
    ///
    /// The options are what fuser 0.18 gives its own mount(2) (`fd`, `rootmode`, `user_id`,
    /// `group_id`, `allow_other`; nodev, nosuid, read-only), with the filesystem type
    /// `fuse.sdsfs` as libfuse names it, so `/proc/self/mountinfo` shows an sdsfs mount as one
    /// (what `sdsfs unmount` checks).
    pub fn mount_fuse(
        &self,
        source: &str,
        allow_other: bool,
    ) -> Result<Option<OwnedFd>, DaemonError> {
        use nix::mount::{mount, MsFlags};
        let device = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
        {
            Ok(device) => device,
            // A user who may not open the device (mode 0600 on some systems) mounts through
            // the setuid `fusermount3`, like one who may not call mount(2).
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Ok(None),
            Err(e) => return Err(DaemonError::io("/dev/fuse")(e)),
        };
        let mut data = format!(
            "fd={},rootmode={:o},user_id={},group_id={}",
            device.as_raw_fd(),
            self.mode()?,
            nix::unistd::getuid(),
            nix::unistd::getgid()
        );
        if allow_other {
            data.push_str(",allow_other");
        }
        let flags = MsFlags::MS_RDONLY | MsFlags::MS_NODEV | MsFlags::MS_NOSUID;
        match mount(
            Some(source),
            &self.target(),
            Some(FSTYPE),
            flags,
            Some(data.as_str()),
        ) {
            Ok(()) => Ok(Some(OwnedFd::from(device))),
            Err(nix::errno::Errno::EPERM) => Ok(None),
            Err(e) => Err(DaemonError::sys(format!(
                "cannot mount on {}",
                self.shown()
            ))(e)),
        }
    }

    /// Unmounts the mount on this directory (an sdsfs one only), wherever its path is now: a
    /// mount point cannot be renamed while mounted, so the directory's present name below its
    /// present parent names it (see [`super::unmount::detach`]).
    pub fn detach(&self) -> Result<super::unmount::Detached, DaemonError> {
        let shown = self.shown();
        let up = openat(
            &self.dir,
            "..",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| DaemonError::io(format!("{shown}/..: open"))(std::io::Error::from(e)))?;
        let now = std::fs::read_link(self.target()).map_err(DaemonError::io(shown.clone()))?;
        let name = now
            .file_name()
            .ok_or_else(|| DaemonError::Refused(format!("{shown}: the mount point has no name")))?;
        super::unmount::detach_at(up.as_fd(), name, &shown, &now)
    }

    /// Whether the directory lists anything but `.` and `..`, read through the descriptor.
    fn has_entries(&self) -> Result<bool, DaemonError> {
        let listing = rustix::fs::Dir::read_from(&self.dir).map_err(|e| {
            DaemonError::io(format!("{}: list", self.shown()))(std::io::Error::from(e))
        })?;
        for entry in listing {
            let entry = entry.map_err(|e| {
                DaemonError::io(format!("{}: list", self.shown()))(std::io::Error::from(e))
            })?;
            if !matches!(entry.file_name().to_bytes(), b"." | b"..") {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The refusal or failure of opening `path` as a mount point.
fn opening(path: &Path, error: rustix::io::Errno) -> DaemonError {
    let shown = crate::format::printable::escaped(&path.to_string_lossy()).into_owned();
    match error {
        rustix::io::Errno::NOTCONN => DaemonError::Refused(format!(
            "{shown}: a mount whose daemon is gone is still there; clear it with \
             `sdsfs unmount {shown}`"
        )),
        rustix::io::Errno::LOOP => DaemonError::Refused(format!(
            "{shown}: mount point is a symbolic link; name the directory itself"
        )),
        rustix::io::Errno::NOTDIR => {
            DaemonError::Refused(format!("{shown}: mount point is not a directory"))
        }
        other => DaemonError::io(shown)(std::io::Error::from(other)),
    }
}

/// The mount whose root `dir` is, or `None` when `dir` is an ordinary directory of the mount
/// holding it. Decided from mount ids (`/proc/self/fdinfo`), which the filesystem is never
/// asked for, so a dead FUSE mount is recognised too: the root of a mount is the one directory
/// whose `..` lies on another mount.
pub fn mount_rooted_at(
    dir: BorrowedFd<'_>,
    shown: &str,
) -> Result<Option<MountEntry>, DaemonError> {
    let up = openat(
        dir,
        "..",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| DaemonError::io(format!("{shown}/..: open"))(std::io::Error::from(e)))?;
    let (own, parent) = (mount_id(dir)?, mount_id(up.as_fd())?);
    if own == parent {
        return Ok(None);
    }
    let table = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(DaemonError::io("/proc/self/mountinfo"))?;
    Ok(Some(mount_entry(&table, own).unwrap_or(MountEntry {
        id: own,
        point: PathBuf::new(),
        fstype: "(unknown)".into(),
        source: String::new(),
    })))
}

/// The mount id of the file `fd` is open on, from `/proc/self/fdinfo/FD` (`mnt_id:`).
fn mount_id(fd: BorrowedFd<'_>) -> Result<u64, DaemonError> {
    let info_path = format!("/proc/self/fdinfo/{}", fd.as_raw_fd());
    let info = std::fs::read_to_string(&info_path).map_err(DaemonError::io(&info_path))?;
    info.lines()
        .find_map(|line| line.strip_prefix("mnt_id:"))
        .and_then(|id| id.trim().parse().ok())
        .ok_or_else(|| DaemonError::Refused(format!("{info_path}: no mnt_id")))
}

/// The line of mount `id` in a mountinfo table.
pub fn mount_entry(table: &str, id: u64) -> Option<MountEntry> {
    // Each line: id parent major:minor root MOUNTPOINT options [optional...] - TYPE SOURCE ...
    table.lines().find_map(|line| {
        let mut fields = line.split(' ');
        if fields.next()?.parse::<u64>().ok()? != id {
            return None;
        }
        let point = fields.nth(3)?;
        let mut tail = line.split(" - ").nth(1)?.split(' ');
        let fstype = tail.next()?.to_string();
        let source = tail.next().map(unescape_mountinfo).unwrap_or_default();
        Some(MountEntry {
            id,
            point: PathBuf::from(OsStr::from_bytes(&unescape_mountinfo(point))),
            fstype,
            source: String::from_utf8_lossy(&source).into_owned(),
        })
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape_mountinfo(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        let octal = bytes
            .get(at + 1..at + 4)
            .filter(|digits| byte == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)))
            .and_then(|digits| u8::from_str_radix(std::str::from_utf8(digits).ok()?, 8).ok());
        match octal {
            Some(decoded) => {
                out.push(decoded);
                at += 4;
            }
            None => {
                out.push(byte);
                at += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_is_found_by_its_id_with_escapes_undone() {
        let table = "22 1 0:21 / /proc rw - proc proc rw\n\
                     97 22 0:55 / /tmp/a\\040b ro,nosuid - fuse.sdsfs sdsfs:/data\\040x rw\n";
        let entry = mount_entry(table, 97).unwrap();
        assert_eq!(entry.point, PathBuf::from("/tmp/a b"));
        assert_eq!(
            (entry.fstype.as_str(), entry.source.as_str()),
            ("fuse.sdsfs", "sdsfs:/data x")
        );
        assert_eq!(mount_entry(table, 9), None);
    }
}
