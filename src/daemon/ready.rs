//! Daemonizing: the calling process re-executes this program in the foreground as a new
//! session leader with stdio detached, and waits on a pipe until that child reports the mount
//! ready (or why it failed). Re-executing instead of `fork`ing keeps the daemon free of a
//! multi-threaded parent's state.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::unistd::{pipe2, setsid};

use super::DaemonError;

/// The environment variable naming the descriptor a daemon reports on.
const READY_FD_ENV: &str = "SDSFS_READY_FD";

/// Runs this program with `arguments` (a foreground mount) as a detached daemon, its stderr
/// appended to `log_file` (discarded without one), and waits until it reports the mount ready.
pub fn spawn(arguments: Vec<OsString>, log_file: Option<&Path>) -> Result<(), DaemonError> {
    let (read_end, write_end) = pipe2(OFlag::O_CLOEXEC).map_err(DaemonError::sys("pipe"))?;
    let exe = std::env::current_exe().map_err(DaemonError::io("cannot find own executable"))?;
    let stderr = match log_file {
        Some(path) => Stdio::from(super::log::open_log_file(path)?),
        None => Stdio::null(),
    };
    let child_end = write_end.as_raw_fd();
    let mut command = Command::new(exe);
    command
        .args(arguments)
        .env(READY_FD_ENV, child_end.to_string())
        // The daemon is not the service's main process; only a foreground mount notifies.
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (setsid, fcntl) on a descriptor this process owns and keeps
    // open until the child has started.
    unsafe {
        command.pre_exec(move || {
            setsid()?;
            let inherited = BorrowedFd::borrow_raw(child_end);
            fcntl(inherited, FcntlArg::F_SETFD(FdFlag::empty()))?;
            Ok(())
        });
    }
    let child = command
        .spawn()
        .map_err(DaemonError::io("cannot start the daemon"));
    drop(write_end);
    let mut child = child?;
    let mut report = String::new();
    let _ = std::fs::File::from(read_end).read_to_string(&mut report);
    match report.trim_end() {
        "ready" => Ok(()),
        "" => {
            let status = child
                .wait()
                .map_err(DaemonError::io("waiting for the daemon"))?;
            Err(DaemonError::Refused(format!(
                "the daemon exited ({status}) before the mount was ready"
            )))
        }
        failure => Err(DaemonError::Refused(
            failure.trim_start_matches("error: ").to_string(),
        )),
    }
}

/// Tells a waiting parent (if any) how the mount went: `ready`, or `error: MESSAGE`.
pub fn report_to_parent(message: &str) {
    let Some(fd) = std::env::var(READY_FD_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return;
    };
    std::env::remove_var(READY_FD_ENV);
    // SAFETY: the parent passed this descriptor to us for exactly this one write, and nothing
    // else in this process knows it (the variable is removed above).
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let _ = writeln!(file, "{message}");
}
