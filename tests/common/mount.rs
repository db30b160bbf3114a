//! Real FUSE mounts for tests: `sdsfs mount --foreground` as a child process, unmounted by a
//! guard even when the test fails, so one failure never leaves a dead mount for the next test.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct MountGuard {
    pub child: Option<Child>,
    pub mountpoint: PathBuf,
    _dir: tempfile::TempDir,
    pub log: PathBuf,
}

impl MountGuard {
    /// Mounts `dataset` in the foreground with `extra` arguments; waits until it is ready.
    pub fn mount(dataset: &Path, extra: &[&str]) -> MountGuard {
        MountGuard::mount_with_env(dataset.as_os_str(), extra, &[])
    }

    /// Like [`MountGuard::mount`], for any `DATASET` argument (e.g. `s3://b/p`) and with extra
    /// environment variables for the `sdsfs` process.
    pub fn mount_with_env(
        dataset: &std::ffi::OsStr,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> MountGuard {
        let dir = tempfile::tempdir().expect("tempdir");
        let mountpoint = dir.path().join("mnt");
        std::fs::create_dir(&mountpoint).unwrap();
        let log = dir.path().join("sdsfs.log");
        let child = Command::new(env!("CARGO_BIN_EXE_sdsfs"))
            .arg("mount")
            .arg("--foreground")
            .args(extra)
            .arg(dataset)
            .arg(&mountpoint)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn sdsfs");
        let mut guard = MountGuard {
            child: Some(child),
            mountpoint,
            _dir: dir,
            log,
        };
        guard.wait_ready();
        guard
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if is_mounted(&self.mountpoint) {
                return;
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "sdsfs exited ({status}) before mounting: {}",
                        self.log_text()
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("mount not ready after 30 s: {}", self.log_text());
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.mountpoint.join(relative)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Unmounts with SIGTERM and waits for a clean exit; returns the exit status.
    pub fn unmount(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let status = child.wait().ok();
        force_unmount(&self.mountpoint);
        status
    }
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        self.unmount();
        if is_mounted(&self.mountpoint) {
            force_unmount(&self.mountpoint);
        }
    }
}

/// A daemonized mount (`sdsfs mount` without `--foreground`, as mount(8) and fstab run it),
/// logging to its `--log-file`; unmounted on drop if the test has not.
pub struct DaemonMount {
    pub mountpoint: PathBuf,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl DaemonMount {
    /// Mounts `dataset` with `extra` arguments; `sdsfs mount` returns once it is ready.
    pub fn mount(dataset: &Path, extra: &[&str]) -> DaemonMount {
        let dir = tempfile::tempdir().expect("tempdir");
        let mountpoint = dir.path().join("mnt");
        std::fs::create_dir(&mountpoint).expect("mount point");
        let log = dir.path().join("sdsfs.log");
        let output = Command::new(env!("CARGO_BIN_EXE_sdsfs"))
            .arg("mount")
            .args(extra)
            .arg("--log-file")
            .arg(&log)
            .arg(dataset)
            .arg(&mountpoint)
            .output()
            .expect("run sdsfs mount");
        let mounted = DaemonMount {
            mountpoint,
            log,
            _dir: dir,
        };
        assert!(
            output.status.success(),
            "sdsfs mount failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        mounted
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.mountpoint.join(relative)
    }

    /// `sdsfs unmount`, then the log file's text.
    pub fn unmount(&self) -> String {
        let status = Command::new(env!("CARGO_BIN_EXE_sdsfs"))
            .arg("unmount")
            .arg(&self.mountpoint)
            .status()
            .expect("run sdsfs unmount");
        assert!(status.success(), "sdsfs unmount failed");
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for DaemonMount {
    fn drop(&mut self) {
        if is_mounted(&self.mountpoint) {
            force_unmount(&self.mountpoint);
        }
    }
}

/// Whether `path` is a mount point (its device differs from its parent's).
pub fn is_mounted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(me), Some(parent)) = (std::fs::metadata(path), path.parent()) else {
        return false;
    };
    let Ok(up) = std::fs::metadata(parent) else {
        return false;
    };
    me.dev() != up.dev()
}

pub fn force_unmount(path: &Path) {
    let _ = Command::new("umount").arg("-l").arg(path).status();
    let _ = Command::new("fusermount3")
        .arg("-uz")
        .arg(path)
        .stderr(Stdio::null())
        .status();
}

/// Peak resident memory (VmHWM) of a process, in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
