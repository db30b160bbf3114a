//! Checks of a mount point before mounting: a directory, empty, not a mount already, and not a
//! dead mount (one whose daemon is gone answers `ENOTCONN`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::DaemonError;

/// Refuses a mount point that is not a directory, is a dead mount, or (unless `nonempty`)
/// holds files or is already a mount point: mounting there would hide what is there without a
/// word, and a second mount over the first is almost always a mistake (a unit started twice,
/// a script run again).
pub fn check_mountpoint(path: &Path, nonempty: bool) -> Result<(), DaemonError> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOTCONN) => dead_mount(path),
        _ => DaemonError::io(shown.to_string())(e),
    })?;
    if !meta.is_dir() {
        return Err(DaemonError::Refused(format!(
            "{shown}: mount point is not a directory"
        )));
    }
    if nonempty {
        return Ok(());
    }
    if let Some(what) = mounted_at(path) {
        let listing = std::fs::read_dir(path).and_then(|mut entries| entries.next().transpose());
        if matches!(listing, Err(e) if e.raw_os_error() == Some(libc::ENOTCONN)) {
            return Err(dead_mount(path));
        }
        return Err(DaemonError::Refused(format!(
            "{shown}: already a mount point ({what}); unmount it first, or pass --nonempty \
             (-o nonempty) to mount over it"
        )));
    }
    let mut entries = std::fs::read_dir(path).map_err(DaemonError::io(shown.to_string()))?;
    if entries.next().is_some() {
        return Err(DaemonError::Refused(format!(
            "{shown}: mount point is not empty; use an empty directory, or pass --nonempty \
             (-o nonempty) to hide its contents under the mount"
        )));
    }
    Ok(())
}

/// The refusal of a mount point holding a mount whose daemon is gone (`ENOTCONN`).
fn dead_mount(path: &Path) -> DaemonError {
    let shown = path.display();
    DaemonError::Refused(format!(
        "{shown}: a mount whose daemon is gone is still there; clear it with \
         `sdsfs unmount {shown}`"
    ))
}

/// The filesystem type and source of the mount whose mount point is `path`, from
/// `/proc/self/mountinfo`; `None` when nothing is mounted there (or the table is unreadable).
fn mounted_at(path: &Path) -> Option<String> {
    let wanted = std::fs::canonicalize(path).ok()?;
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // Each line: id parent major:minor root MOUNTPOINT options [optional...] - TYPE SOURCE ...
    table.lines().rev().find_map(|line| {
        let mut fields = line.split(' ');
        let point = fields.nth(4)?;
        if Path::new(OsStr::from_bytes(&unescape_mountinfo(point))) != wanted {
            return None;
        }
        let mut tail = line.split(" - ").nth(1)?.split(' ');
        let fstype = tail.next()?;
        let source = tail.next().map(unescape_mountinfo).unwrap_or_default();
        Some(format!("{fstype} {}", String::from_utf8_lossy(&source)))
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
