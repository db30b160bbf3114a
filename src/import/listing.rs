//! Listing a directory with one `openat` and `getdents64` (`rustix`'s `RawDir`), for
//! `--from-dir` imports.
//!
//! `std::fs::read_dir` goes through glibc's `opendir`, which adds an `fstat` of every
//! directory it opens. `sds create --from-dir` lists four directories per record of a typical
//! mount copy (for the stray-file check), so that `fstat` was one system call in ten of the
//! whole import. The entries' types come from the listing (`d_type`); `Unknown` (file
//! systems that do not fill it in) leaves the caller to `stat`.

use std::ffi::{OsStr, OsString};
use std::fs::OpenOptions;
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rustix::fs::{FileType, RawDir};

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

/// Bytes of listing read per `getdents64` call.
const BUFFER: usize = 32 * 1024;

/// The entries of directory `dir`, in the order the file system returns them.
pub(crate) fn list(dir: &Path) -> io::Result<Vec<Entry>> {
    let directory = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)?;
    let mut buffer = vec![MaybeUninit::<u8>::uninit(); BUFFER];
    let mut listing = RawDir::new(&directory, &mut buffer);
    let mut entries = Vec::new();
    while let Some(entry) = listing.next() {
        let entry = match entry {
            Ok(entry) => entry,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            entries.push(Entry {
                name: OsStr::from_bytes(name).to_os_string(),
                kind: kind_of(entry.file_type()),
            });
        }
    }
    Ok(entries)
}

fn kind_of(file_type: FileType) -> Kind {
    match file_type {
        FileType::Directory => Kind::Dir,
        FileType::RegularFile => Kind::File,
        FileType::Symlink => Kind::Symlink,
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
}
