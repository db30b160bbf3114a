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

/// Takes the pictures (`preview.png`, `*.spectrogram.png`) out of a record's file tree, checking
/// that each is a PNG (signature and header chunk; `tests/mount_pictures.rs` decodes them);
/// returns their paths. The library has no pictures to compare them with.
pub fn take_pictures(files: &mut std::collections::BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let names: Vec<String> = files
        .keys()
        .filter(|p| p.as_str() == "preview.png" || p.ends_with(".spectrogram.png"))
        .cloned()
        .collect();
    for name in &names {
        let bytes = files.remove(name).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{name}");
        assert_eq!(&bytes[12..16], b"IHDR", "{name}");
    }
    names
}

/// The picture paths a record's tree should hold, from its expected files: `preview.png` and a
/// spectrogram beside every SigMF pair.
pub fn expected_pictures(expected: &std::collections::BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let mut names: Vec<String> = expected
        .keys()
        .filter_map(|p| p.strip_suffix(".sigmf-data"))
        .map(|base| format!("{base}.spectrogram.png"))
        .collect();
    names.push("preview.png".to_string());
    names.sort();
    names
}

/// The expected file tree of one record as the library reads it (`record.json` and every
/// field view under `fields/`): relative path → content.
pub fn expected_record_files(
    dataset: &sdsfs::dataset::Dataset,
    ordinal: u64,
) -> std::collections::BTreeMap<String, Vec<u8>> {
    let record = dataset.read_record(ordinal).unwrap();
    let meta = record.meta();
    let mut files = std::collections::BTreeMap::new();
    files.insert(
        "record.json".to_string(),
        sdsfs::fs::views::record_json(&meta, ordinal),
    );
    for (name, field) in &record.fields {
        let base = format!(
            "fields/{}",
            sdsfs::fs::names::encode_field_path(name).join("/")
        );
        let raw = field.data.to_vec();
        let mut npy = sdsfs::fs::views::npy::npy_header(field.meta.dtype, &field.meta.shape);
        npy.extend_from_slice(&raw);
        files.insert(
            format!("{base}.json"),
            sdsfs::fs::views::field_json(name, &field.meta),
        );
        files.insert(format!("{base}.npy"), npy);
        if sdsfs::fs::views::has_sigmf_pair(&field.meta) {
            files.insert(format!("{base}.sigmf-data"), raw.clone());
            files.insert(
                format!("{base}.sigmf-meta"),
                sigmf_meta(dataset, &record, ordinal, name),
            );
        }
        files.insert(format!("{base}.raw"), raw);
    }
    files
}

/// Field `name`'s `.sigmf-meta`, its boxes from the record as the library read it.
fn sigmf_meta(
    dataset: &sdsfs::dataset::Dataset,
    record: &sdsfs::format::record::Record,
    ordinal: u64,
    name: &str,
) -> Vec<u8> {
    use sdsfs::fs::views::sigmf::{BoxTensors, MetaLayout, Provenance};
    let meta = record.meta();
    let at = Provenance {
        dataset_id: &dataset.root().dataset_id,
        snapshot_id: &dataset.snapshot().snapshot_id,
        record_id: &meta.id,
        ordinal,
    };
    let layout = MetaLayout::build(name, &meta.fields[name], &meta, &at);
    let tensors = layout.needs_tensors().map(|plan| BoxTensors {
        extent: record.fields[&plan.extent_field].data.clone(),
        identity: plan
            .identity
            .as_ref()
            .map(|(identity, _)| record.fields[identity].data.clone()),
    });
    layout.render(tensors.as_ref(), ordinal, name)
}
