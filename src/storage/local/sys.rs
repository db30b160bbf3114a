//! Thin wrappers over the `*at` system calls the local store needs and `std` lacks, on
//! `rustix`'s safe bindings.
//!
//! Everything here works relative to an open directory descriptor, never on a full path: that
//! is what makes confinement hold even if someone renames directories or plants symlinks while
//! the store is in use. Each wrapper converts to `io::Result` and does nothing else; policy
//! (which errno means what) lives in the caller.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, Timespec, Timestamps};

/// `openat(dir, name, flags | O_CLOEXEC, mode)`. `name` must be a single path segment.
pub(super) fn open_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    // The flags are the C ones, bit for bit (`libc` and `rustix` name the same kernel ABI).
    let flags = OFlags::from_bits_retain(flags as libc::c_uint) | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(
        dir,
        name,
        flags,
        Mode::from_raw_mode(mode),
    )?)
}

/// Opens the directory `name` below `dir` without following a symlink.
pub(super) fn open_dir_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<OwnedFd> {
    open_at(
        dir,
        name,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
    )
}

pub(super) fn mkdir_at(dir: BorrowedFd<'_>, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    Ok(rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode))?)
}

/// Hard-links `old` to `new` within `dir`; fails with EEXIST if `new` exists in any form.
pub(super) fn link_at(dir: BorrowedFd<'_>, old: &CStr, new: &CStr) -> io::Result<()> {
    link_between(dir, old, dir, new)
}

/// Hard-links `old` in `old_dir` to `new` in `new_dir` (possibly another store's root); fails
/// with EEXIST if `new` exists, EXDEV across filesystems.
pub(super) fn link_between(
    old_dir: BorrowedFd<'_>,
    old: &CStr,
    new_dir: BorrowedFd<'_>,
    new: &CStr,
) -> io::Result<()> {
    // No flags: do not follow `old` if it were a symlink.
    Ok(rustix::fs::linkat(
        old_dir,
        old,
        new_dir,
        new,
        AtFlags::empty(),
    )?)
}

/// Atomically renames `old` over `new` within `dir`.
pub(super) fn rename_at(dir: BorrowedFd<'_>, old: &CStr, new: &CStr) -> io::Result<()> {
    Ok(rustix::fs::renameat(dir, old, dir, new)?)
}

pub(super) fn unlink_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?)
}

/// Whether `name` below `dir` is itself a symbolic link (not following it).
pub(super) fn is_symlink_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<bool> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(FileType::from_raw_mode(st.st_mode).is_symlink())
}

/// Takes an exclusive `flock` on `fd`, waiting as long as needed. The lock belongs to the open
/// file description, so it is released when the last descriptor for it is closed.
pub(super) fn lock_exclusive(fd: BorrowedFd<'_>) -> io::Result<()> {
    loop {
        match rustix::fs::flock(fd, FlockOperation::LockExclusive) {
            Ok(()) => return Ok(()),
            // A signal interrupted the wait; the lock is still wanted.
            Err(rustix::io::Errno::INTR) => continue,
            Err(err) => return Err(err.into()),
        }
    }
}

/// Sets the modification time of `fd` to `mtime_ns` nanoseconds since the epoch, leaving the
/// access time alone.
pub(super) fn set_mtime_ns(fd: BorrowedFd<'_>, mtime_ns: u64) -> io::Result<()> {
    let out_of_range = |_| io::Error::other("modification time out of range");
    let times = Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        last_modification: Timespec {
            tv_sec: (mtime_ns / 1_000_000_000)
                .try_into()
                .map_err(out_of_range)?,
            tv_nsec: (mtime_ns % 1_000_000_000)
                .try_into()
                .map_err(out_of_range)?,
        },
    };
    Ok(rustix::fs::futimens(fd, &times)?)
}

/// Flushes a directory's entries (new links, renames) to stable storage.
pub(super) fn fsync_dir(dir: BorrowedFd<'_>) -> io::Result<()> {
    Ok(rustix::fs::fsync(dir)?)
}

/// Mode, owner and group of the inode `fd` refers to (any descriptor, `O_PATH` included).
pub(super) fn mode_of(fd: BorrowedFd<'_>) -> io::Result<super::access::Access> {
    let st = rustix::fs::fstat(fd)?;
    Ok(super::access::Access {
        mode: st.st_mode,
        uid: st.st_uid,
        gid: st.st_gid,
        acl: None,
    })
}

/// The raw POSIX access ACL (`system.posix_acl_access`) of the inode `fd` refers to, `None`
/// when it has none (or the filesystem has no ACLs). Read through `/proc/self/fd`, which also
/// works for `O_PATH` descriptors; without `/proc` ACLs are not seen.
pub(super) fn access_acl(fd: BorrowedFd<'_>) -> io::Result<Option<Vec<u8>>> {
    const NAME: &CStr = c"system.posix_acl_access";
    /// The largest extended attribute Linux stores.
    const MAX_XATTR: usize = 64 << 10;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let size = match rustix::fs::getxattr_query(path.as_str(), NAME) {
        Ok(size) => size.min(MAX_XATTR),
        Err(rustix::io::Errno::NODATA | rustix::io::Errno::NOTSUP | rustix::io::Errno::NOENT) => {
            return Ok(None)
        }
        Err(e) => return Err(e.into()),
    };
    let mut buf = vec![0u8; size];
    let len = rustix::fs::getxattr(path.as_str(), NAME, &mut buf[..])?;
    buf.truncate(len);
    Ok(Some(buf))
}

/// A path-only descriptor of `name` below `dir`, not following a symlink: it can be a
/// directory to walk on from, a symlink to read, or a file to look at, and opening it reads
/// nothing and needs no permission on `name` itself.
pub(super) fn open_path_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<OwnedFd> {
    open_at(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
}

/// The target of the symlink a path-only descriptor ([`open_path_at`]) refers to.
pub(super) fn read_link(link: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    let target = rustix::fs::readlinkat(link, c"", Vec::new())?;
    Ok(target.into_bytes())
}
