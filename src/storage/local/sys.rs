//! Thin, safe wrappers over the `*at` system calls the local store needs and `std` lacks.
//!
//! Everything here works relative to an open directory descriptor, never on a full path: that
//! is what makes confinement hold even if someone renames directories or plants symlinks while
//! the store is in use. Each wrapper converts the C return convention into `io::Result` and
//! does nothing else; policy (which errno means what) lives in the caller.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Turns a `-1`-on-error return value into an `io::Result`.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `openat(dir, name, flags | O_CLOEXEC, mode)`. `name` must be a single path segment.
pub(super) fn open_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    // SAFETY: `dir` is a live descriptor for the duration of the call, `name` is a valid
    // NUL-terminated string, and the variadic mode argument is passed as the promoted
    // `c_uint` that openat reads when O_CREAT is set (and ignores otherwise).
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    })?;
    // SAFETY: openat just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
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
    // SAFETY: `dir` is live and `name` is a valid NUL-terminated string.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) }).map(drop)
}

/// Hard-links `old` to `new` within `dir`; fails with EEXIST if `new` exists in any form.
pub(super) fn link_at(dir: BorrowedFd<'_>, old: &CStr, new: &CStr) -> io::Result<()> {
    let raw = dir.as_raw_fd();
    // SAFETY: `dir` is live and both names are valid NUL-terminated strings. Flags 0: do not
    // follow `old` if it were a symlink.
    check(unsafe { libc::linkat(raw, old.as_ptr(), raw, new.as_ptr(), 0) }).map(drop)
}

/// Hard-links `old` in `old_dir` to `new` in `new_dir` (possibly another store's root); fails
/// with EEXIST if `new` exists, EXDEV across filesystems.
pub(super) fn link_between(
    old_dir: BorrowedFd<'_>,
    old: &CStr,
    new_dir: BorrowedFd<'_>,
    new: &CStr,
) -> io::Result<()> {
    // SAFETY: both descriptors are live and both names are valid NUL-terminated strings.
    // Flags 0: do not follow `old` if it were a symlink.
    check(unsafe {
        libc::linkat(
            old_dir.as_raw_fd(),
            old.as_ptr(),
            new_dir.as_raw_fd(),
            new.as_ptr(),
            0,
        )
    })
    .map(drop)
}

/// Atomically renames `old` over `new` within `dir`.
pub(super) fn rename_at(dir: BorrowedFd<'_>, old: &CStr, new: &CStr) -> io::Result<()> {
    let raw = dir.as_raw_fd();
    // SAFETY: `dir` is live and both names are valid NUL-terminated strings.
    check(unsafe { libc::renameat(raw, old.as_ptr(), raw, new.as_ptr()) }).map(drop)
}

pub(super) fn unlink_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: `dir` is live and `name` is a valid NUL-terminated string.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) }).map(drop)
}

/// Whether `name` below `dir` is itself a symbolic link (not following it).
pub(super) fn is_symlink_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<bool> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `dir` is live, `name` is NUL-terminated, and `st` points to writable memory
    // large enough for a `struct stat`.
    check(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    // SAFETY: fstatat succeeded, so it filled in `st` completely.
    let st = unsafe { st.assume_init() };
    Ok(st.st_mode & libc::S_IFMT == libc::S_IFLNK)
}

/// Takes an exclusive `flock` on `fd`, waiting as long as needed. The lock belongs to the open
/// file description, so it is released when the last descriptor for it is closed.
pub(super) fn lock_exclusive(fd: BorrowedFd<'_>) -> io::Result<()> {
    loop {
        // SAFETY: `fd` is live for the duration of the call.
        match check(unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX) }) {
            Ok(_) => return Ok(()),
            // A signal interrupted the wait; the lock is still wanted.
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        }
    }
}

/// Sets the modification time of `fd` to `mtime_ns` nanoseconds since the epoch, leaving the
/// access time alone.
pub(super) fn set_mtime_ns(fd: BorrowedFd<'_>, mtime_ns: u64) -> io::Result<()> {
    let secs = libc::time_t::try_from(mtime_ns / 1_000_000_000)
        .map_err(|_| io::Error::other("modification time out of range"))?;
    let nanos = libc::c_long::try_from(mtime_ns % 1_000_000_000)
        .map_err(|_| io::Error::other("modification time out of range"))?;
    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        libc::timespec {
            tv_sec: secs,
            tv_nsec: nanos,
        },
    ];
    // SAFETY: `fd` is live and `times` is an array of exactly two timespecs, as futimens reads.
    check(unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) }).map(drop)
}

/// Flushes a directory's entries (new links, renames) to stable storage.
pub(super) fn fsync_dir(dir: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: `dir` is live for the duration of the call.
    check(unsafe { libc::fsync(dir.as_raw_fd()) }).map(drop)
}

/// Mode, owner and group of the inode `fd` refers to (any descriptor, `O_PATH` included).
pub(super) fn mode_of(fd: BorrowedFd<'_>) -> io::Result<super::access::Access> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `fd` is live and `st` points to writable memory large enough for a `struct stat`.
    check(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded, so it filled in `st` completely.
    let st = unsafe { st.assume_init() };
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
    let path = std::ffi::CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|_| io::Error::other("descriptor path contains NUL"))?;
    let absent = |e: &io::Error| {
        matches!(
            e.raw_os_error(),
            Some(libc::ENODATA | libc::ENOTSUP | libc::ENOENT)
        )
    };
    // SAFETY: `path` and `NAME` are NUL-terminated; a null buffer of size 0 asks for the size.
    let size = unsafe { libc::getxattr(path.as_ptr(), NAME.as_ptr(), std::ptr::null_mut(), 0) };
    let size = match usize::try_from(size) {
        Ok(size) => size.min(MAX_XATTR),
        Err(_) => {
            let e = io::Error::last_os_error();
            return if absent(&e) { Ok(None) } else { Err(e) };
        }
    };
    let mut buf = vec![0u8; size];
    // SAFETY: as above, with `buf` writable for the length passed.
    let len =
        unsafe { libc::getxattr(path.as_ptr(), NAME.as_ptr(), buf.as_mut_ptr().cast(), size) };
    let len = usize::try_from(len).map_err(|_| io::Error::last_os_error())?;
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
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: `link` is live, the empty path is NUL-terminated, and `buf` is writable for the
    // length passed.
    let len = unsafe {
        libc::readlinkat(
            link.as_raw_fd(),
            c"".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    let len = usize::try_from(len).map_err(|_| io::Error::last_os_error())?;
    if len >= buf.len() {
        return Err(io::Error::other("symlink target longer than PATH_MAX"));
    }
    buf.truncate(len);
    Ok(buf)
}
