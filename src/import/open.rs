//! Opening input files: regular files only, and for `--from-dir` only files inside its tree.
//!
//! Why: `sds create` is run by people (root included) on directories and files other people
//! produced. Following a symbolic link such as `records/0/fields/x.raw -> /etc/shadow` would
//! publish that file in a world-readable shard; reading `/dev/zero` or a FIFO gives a record
//! whose size is not the file's, or blocks forever. So every input is checked twice: by path
//! before it is opened (a device is never opened at all: opening some has side effects), and
//! by the open descriptor afterwards (`fstat`, and `/proc/self/fd` for where it really leads),
//! so that a path swapped between the two checks is caught too. Files are opened with
//! `O_NONBLOCK`, so that a FIFO put in place after the first check cannot block the open.
//!
//! The rules:
//! - only regular files are read (no FIFOs, sockets, character or block devices, directories);
//! - in a `--from-dir` tree, a symbolic link may point to a file inside the tree (a copy made
//!   with `cp -rs`, or two fields sharing one file, keep working) but never outside it;
//! - files named on the command line (`--from-sigmf`, `--from-npy`, `--from-raw`) may be
//!   symbolic links anywhere: the person running the command named them.

use std::fs::{File, FileType, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::ImportError;

/// The rule every refusal of a non-regular file states.
const REGULAR_ONLY: &str = "importers read regular files only";

/// An input file opened and checked, with its length as `fstat` gave it.
pub(crate) struct Input {
    pub file: File,
    pub len: u64,
}

/// Opens `path` for reading after checking that it is a regular file (and, with `tree`, that
/// it lies inside the canonical directory `tree`, symbolic links resolved).
pub(crate) fn open_input(path: &Path, tree: Option<&Path>) -> Result<Input, ImportError> {
    let before = std::fs::metadata(path).map_err(|e| ImportError::io(path, e))?;
    refuse_irregular(path, &before.file_type())?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| ImportError::io(path, e))?;
    let opened = file.metadata().map_err(|e| ImportError::io(path, e))?;
    refuse_irregular(path, &opened.file_type())?;
    if let Some(tree) = tree {
        check_inside(path, &file, tree)?;
    }
    Ok(Input {
        len: opened.len(),
        file,
    })
}

/// Reads a whole input file (see [`open_input`]) of at most `max` bytes (the limit of the
/// document it holds: a larger file is refused before anything is read), naming it on failure.
pub(crate) fn read_input(
    path: &Path,
    tree: Option<&Path>,
    max: usize,
) -> Result<Vec<u8>, ImportError> {
    let input = open_input(path, tree)?;
    let too_long = |len: u64| {
        ImportError::invalid(
            path,
            format!("{len} bytes is more than the {max} such a document may hold"),
        )
    };
    let len = usize::try_from(input.len)
        .ok()
        .filter(|&len| len <= max)
        .ok_or_else(|| too_long(input.len))?;
    let mut bytes = Vec::with_capacity(len);
    // A file growing while it is read is cut one byte past the limit, and refused.
    let limit = (max as u64).saturating_add(1);
    input
        .file
        .take(limit)
        .read_to_end(&mut bytes)
        .map_err(|e| ImportError::io(path, e))?;
    if bytes.len() > max {
        return Err(too_long(bytes.len() as u64));
    }
    Ok(bytes)
}

fn refuse_irregular(path: &Path, kind: &FileType) -> Result<(), ImportError> {
    if kind.is_file() {
        return Ok(());
    }
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    };
    Err(ImportError::invalid(
        path,
        format!("is {what}: {REGULAR_ONLY}"),
    ))
}

/// Refuses an open file whose real location (as the kernel resolved it) is outside `tree`.
fn check_inside(path: &Path, file: &File, tree: &Path) -> Result<(), ImportError> {
    let link = format!("/proc/self/fd/{}", file.as_raw_fd());
    let target = std::fs::read_link(&link).map_err(|e| ImportError::io(path, e))?;
    if target.starts_with(tree) {
        return Ok(());
    }
    Err(outside(path, &target, tree))
}

fn outside(path: &Path, target: &Path, tree: &Path) -> ImportError {
    ImportError::invalid(
        path,
        format!(
            "leads to {}, outside the input tree {}: a symbolic link in a --from-dir tree may \
             only point inside the tree",
            target.display(),
            tree.display()
        ),
    )
}

/// The canonical form of a symbolic link to a directory inside `tree`, refused when it leads
/// outside (a walk of `fields/` must not list another tree).
pub(crate) fn linked_dir_inside(path: &Path, tree: &Path) -> Result<PathBuf, ImportError> {
    let target = std::fs::canonicalize(path).map_err(|e| ImportError::io(path, e))?;
    if target.starts_with(tree) {
        Ok(target)
    } else {
        Err(outside(path, &target, tree))
    }
}

/// Exactly `len` bytes from `reader` in one allocation of that size (the importers know each
/// tensor's size before reading it, so no buffer is grown and copied); a shorter input is an
/// error naming `path`.
pub(crate) fn read_exactly(
    reader: &mut impl Read,
    len: u64,
    path: &Path,
) -> Result<Vec<u8>, ImportError> {
    let too_large = || ImportError::invalid(path, format!("cannot hold {len} bytes in memory"));
    let size = usize::try_from(len).map_err(|_| too_large())?;
    let mut data = Vec::new();
    data.try_reserve_exact(size).map_err(|_| too_large())?;
    data.resize(size, 0);
    reader.read_exact(&mut data).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            ImportError::invalid(path, format!("ends before the {len} bytes expected"))
        } else {
            ImportError::io(path, e)
        }
    })?;
    Ok(data)
}
