//! The mount under faults: a shard replaced, truncated or deleted underneath a live mount (reads
//! fail with EIO or return the old verified bytes, never wrong bytes; other shards unaffected),
//! and the daemon killed with SIGKILL (the mount point is left disconnected, `sdsfs unmount`
//! clears it, and a remount at the same place works).

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::datasets::*;
use common::mount::{force_unmount, is_mounted, MountGuard};
use sdsfs::dataset::Dataset;

/// 9 records in shards of 3, 2 and 4.
fn dataset() -> Published {
    publish_dataset(&[3, 2, 4], 10)
}

/// The data shard paths in shard order, from the manifest page.
fn data_shards(published: &Published) -> Vec<String> {
    let root: serde_json::Value =
        serde_json::from_slice(&std::fs::read(published.file("root.json")).unwrap()).unwrap();
    let snap: serde_json::Value = serde_json::from_slice(
        &std::fs::read(published.file(root["snapshot"]["path"].as_str().unwrap())).unwrap(),
    )
    .unwrap();
    let page: serde_json::Value = serde_json::from_slice(
        &std::fs::read(published.file(snap["manifests"][0]["object"]["path"].as_str().unwrap()))
            .unwrap(),
    )
    .unwrap();
    page["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["data"]["path"].as_str().unwrap().to_string())
        .collect()
}

/// Reads a whole file with the page cache dropped first, so the daemon is asked.
fn read_uncached(path: &Path) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    // SAFETY: valid descriptor; advisory call.
    unsafe {
        libc::posix_fadvise(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
            0,
            libc::POSIX_FADV_DONTNEED,
        )
    };
    let len = file.metadata()?.len() as usize;
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        let n = file.read_at(&mut buf[got..], got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    buf.truncate(got);
    Ok(buf)
}

/// The `.raw` bytes of field `iq` of `ordinal`, from the library.
fn expected_iq(dataset: &Dataset, ordinal: u64) -> Vec<u8> {
    dataset.read_record(ordinal).unwrap().fields["iq"]
        .data
        .to_vec()
}

/// Either EIO or exactly the old bytes; returns whether it was EIO.
fn eio_or_exact(mount: &MountGuard, ordinal: u64, want: &[u8]) -> bool {
    match read_uncached(&mount.path(&format!("records/{ordinal}/fields/iq.raw"))) {
        Ok(bytes) => {
            assert_eq!(bytes, want, "record {ordinal}: wrong bytes after a fault");
            false
        }
        Err(e) => {
            assert_eq!(e.raw_os_error(), Some(libc::EIO), "record {ordinal}: {e}");
            true
        }
    }
}

/// Mounts, reads the first two shards (and the third too when `warm`), applies `fault` to the
/// third shard, then reads everything three times: the first two shards stay exact, the third
/// gives EIO or the old bytes. Returns how many reads of the third shard failed.
fn fault_then_check(warm: bool, fault: impl FnOnce(&Path)) -> usize {
    let published = dataset();
    let library = published.open();
    let shards = data_shards(&published);
    let wants: Vec<Vec<u8>> = (0..9).map(|o| expected_iq(&library, o)).collect();
    let mount = MountGuard::mount(published.root(), &["--cache-size", "1M"]);
    // Warm: records read once through the mount (the daemon may keep them).
    for ordinal in 0..if warm { 9 } else { 5 } {
        assert_eq!(
            read_uncached(&mount.path(&format!("records/{ordinal}/fields/iq.raw"))).unwrap(),
            wants[ordinal as usize]
        );
    }
    // Fault the last shard (ordinals 5..9).
    fault(&published.file(&shards[2]));
    let mut eio = 0;
    for round in 0..3 {
        for ordinal in 0..9 {
            let want = wants[ordinal as usize].clone();
            if ordinal < 5 {
                assert_eq!(
                    read_uncached(&mount.path(&format!("records/{ordinal}/fields/iq.raw")))
                        .unwrap(),
                    want,
                    "round {round}"
                );
            } else if eio_or_exact(&mount, ordinal, &want) {
                eio += 1;
            }
        }
    }
    // The mount stays up and record.json (rows only) still reads.
    assert!(std::fs::metadata(&mount.mountpoint).unwrap().is_dir());
    assert!(std::fs::read(mount.path("records/7/record.json")).is_ok());
    eio
}

#[test]
fn shard_replaced_underneath_never_gives_wrong_bytes() {
    // Same size, different bytes, new file at the same path (atomic replace).
    let replace = |file: &Path| {
        let mut bytes = std::fs::read(file).unwrap();
        let mid = bytes.len() / 3;
        for b in &mut bytes[64..mid] {
            *b ^= 0xa5;
        }
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, file).unwrap();
    };
    // Warm: the daemon may serve what it already verified, or fail; never wrong bytes.
    fault_then_check(true, replace);
    // Cold: the local store pins generations, so every read of the replaced shard fails.
    assert_eq!(fault_then_check(false, replace), 12);
}

#[test]
fn shard_rewritten_in_place_never_gives_wrong_bytes() {
    // Same inode, same size, different bytes.
    let rewrite = |file: &Path| {
        let mut bytes = std::fs::read(file).unwrap();
        for b in &mut bytes[64..] {
            *b = b.wrapping_add(1);
        }
        std::fs::write(file, bytes).unwrap();
    };
    fault_then_check(true, rewrite);
    assert_eq!(fault_then_check(false, rewrite), 12);
}

#[test]
fn shard_truncated_underneath_gives_eio_not_wrong_bytes() {
    let truncate = |file: &Path| {
        let len = std::fs::metadata(file).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(file)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
    };
    fault_then_check(true, truncate);
    assert_eq!(fault_then_check(false, truncate), 12);
}

#[test]
fn shard_deleted_underneath_gives_eio_not_wrong_bytes() {
    let delete = |file: &Path| std::fs::remove_file(file).unwrap();
    fault_then_check(true, delete);
    assert_eq!(fault_then_check(false, delete), 12);
}

/// A foreground mount at a given mount point, killed and unmounted on drop.
struct Foreground {
    child: Child,
    mountpoint: PathBuf,
}

impl Foreground {
    fn start(dataset: &Path, mountpoint: &Path) -> Foreground {
        let child = Command::new(env!("CARGO_BIN_EXE_sdsfs"))
            .args(["mount", "-f"])
            .arg(dataset)
            .arg(mountpoint)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut me = Foreground {
            child,
            mountpoint: mountpoint.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !is_mounted(mountpoint) {
            assert!(Instant::now() < deadline, "remount not ready");
            assert!(me.child.try_wait().unwrap().is_none(), "sdsfs exited");
            std::thread::sleep(Duration::from_millis(20));
        }
        me
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        force_unmount(&self.mountpoint);
    }
}

#[test]
fn sigkilled_daemon_then_unmount_then_remount() {
    let published = dataset();
    let library = published.open();
    let mut mount = MountGuard::mount(published.root(), &[]);
    let mountpoint = mount.mountpoint.clone();
    assert_eq!(
        read_uncached(&mount.path("records/0/fields/iq.raw")).unwrap(),
        expected_iq(&library, 0)
    );
    let mut child = mount.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();

    // The mount point is left disconnected.
    let error = std::fs::read_dir(&mountpoint).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::ENOTCONN), "{error}");

    // `sdsfs unmount` clears it.
    let out = Command::new(env!("CARGO_BIN_EXE_sdsfs"))
        .arg("unmount")
        .arg(&mountpoint)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::metadata(&mountpoint).unwrap().is_dir());
    assert!(!is_mounted(&mountpoint));

    // A remount at the same place works.
    let again = Foreground::start(published.root(), &mountpoint);
    assert_eq!(
        read_uncached(&mountpoint.join("records/8/fields/iq.raw")).unwrap(),
        expected_iq(&library, 8)
    );
    drop(again);
    assert!(!is_mounted(&mountpoint));
}
