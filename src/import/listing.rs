//! Listing a directory with one `openat` and `getdents64`, for `--from-dir` imports.
//!
//! `std::fs::read_dir` goes through glibc's `opendir`, which adds an `fstat` of every
//! directory it opens. `sds create --from-dir` lists four directories per record of a typical
//! mount copy (for the stray-file check), so that `fstat` was one system call in ten of the
//! whole import. The entries' types come from the listing (`d_type`); `Unknown` (file
//! systems that do not fill it in) leaves the caller to `stat`.

use std::ffi::{OsStr, OsString};
use std::fs::OpenOptions;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// What an entry is, as the directory says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Symlink,
    /// Anything else, or a file system that does not say.
    Other,
}

/// One entry (never `.` or `..`).
#[derive(Debug)]
pub(crate) struct Entry {
    pub name: OsString,
    pub kind: Kind,
}

/// Bytes of `linux_dirent64` before the name: inode (8), offset (8), record length (2),
/// type (1).
const HEADER: usize = 19;
const BUFFER: usize = 32 * 1024;

/// The entries of directory `dir`, in the order the file system returns them.
pub(crate) fn list(dir: &Path) -> io::Result<Vec<Entry>> {
    let directory = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)?;
    let mut buffer = vec![0u8; BUFFER];
    let mut entries = Vec::new();
    loop {
        // SAFETY: the buffer is valid for writes of its whole length, and the descriptor is
        // an open directory for the duration of the call.
        let got = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                directory.as_raw_fd(),
                buffer.as_mut_ptr(),
                buffer.len(),
            )
        };
        let got = match usize::try_from(got) {
            Ok(0) => return Ok(entries),
            Ok(n) => n.min(buffer.len()),
            Err(_) => {
                let error = io::Error::last_os_error();
                if error.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error);
            }
        };
        parse(&buffer[..got], &mut entries)?;
    }
}

/// Appends the entries of one `getdents64` result, checking every record length.
fn parse(mut bytes: &[u8], entries: &mut Vec<Entry>) -> io::Result<()> {
    while !bytes.is_empty() {
        let malformed = || io::Error::other("malformed directory listing from the kernel");
        let header = bytes.get(..HEADER).ok_or_else(malformed)?;
        let length = usize::from(u16::from_ne_bytes([header[16], header[17]]));
        let record = bytes
            .get(..length)
            .filter(|_| length > HEADER)
            .ok_or_else(malformed)?;
        let name = &record[HEADER..];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        if name != b"." && name != b".." {
            entries.push(Entry {
                name: OsStr::from_bytes(name).to_os_string(),
                kind: kind_of(header[18]),
            });
        }
        bytes = &bytes[length..];
    }
    Ok(())
}

fn kind_of(d_type: u8) -> Kind {
    match d_type {
        libc::DT_DIR => Kind::Dir,
        libc::DT_REG => Kind::File,
        libc::DT_LNK => Kind::Symlink,
        _ => Kind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_names_and_kinds_like_read_dir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("a.raw"), b"x").unwrap();
        std::os::unix::fs::symlink("a.raw", dir.path().join("link")).unwrap();
        // Enough long names to need more than one getdents64 call.
        for i in 0..400 {
            std::fs::write(dir.path().join(format!("{i:0>100}")), b"").unwrap();
        }
        let mut listed: Vec<(String, Kind)> = list(dir.path())
            .unwrap()
            .into_iter()
            .map(|e| (e.name.to_string_lossy().into_owned(), e.kind))
            .collect();
        listed.sort_by(|a, b| a.0.cmp(&b.0));
        let mut expected: Vec<(String, Kind)> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let t = e.file_type().unwrap();
                let kind = if t.is_dir() {
                    Kind::Dir
                } else if t.is_symlink() {
                    Kind::Symlink
                } else {
                    Kind::File
                };
                (e.file_name().to_string_lossy().into_owned(), kind)
            })
            .collect();
        expected.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(listed.len(), 403);
        assert_eq!(listed, expected);
    }

    #[test]
    fn a_file_or_a_missing_path_is_an_error_with_its_errno() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        let not_dir = list(&dir.path().join("f")).unwrap_err();
        assert_eq!(not_dir.raw_os_error(), Some(libc::ENOTDIR));
        let missing = list(&dir.path().join("nope")).unwrap_err();
        assert_eq!(missing.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn a_truncated_record_is_refused() {
        let mut entries = Vec::new();
        // A record claiming 40 bytes where 24 are given.
        let mut bytes = vec![0u8; 24];
        bytes[16] = 40;
        assert!(parse(&bytes, &mut entries).is_err());
        bytes[16] = 10; // shorter than its own header
        assert!(parse(&bytes, &mut entries).is_err());
        assert!(entries.is_empty());
    }
}
