//! Dead and busy mounts on a real FUSE mount: `sdsfs unmount` clears a mount whose daemon was
//! SIGKILLed while a file stayed open (a lazy detach, said on stderr) so that a remount at the
//! same path works; SIGTERM on a busy mount detaches it and the daemon exits, leaving a plain
//! directory (not ENOTCONN); mounting over a non-empty directory or an existing mount is
//! refused unless `--nonempty` / `-o nonempty` asks for it.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::datasets::{publish_dataset, Published};
use common::mount::{force_unmount, MountGuard};

fn sdsfs(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sdsfs"))
        .args(args)
        .output()
        .expect("run sdsfs")
}

/// The mount points the kernel lists for this process (`/proc/self/mountinfo`, field 5).
fn mount_points() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|line| line.split(' ').nth(4).map(PathBuf::from))
        .collect()
}

fn listed(path: &Path) -> bool {
    mount_points().iter().any(|p| p == path)
}

/// The `.raw` bytes of field `iq` of record `ordinal`, as the writer was given them.
fn iq(published: &Published, ordinal: usize) -> Vec<u8> {
    published.records[ordinal].fields["iq"].data.to_vec()
}

/// A process holding `file` open (descriptor 3 of a `sleep`) until killed, returned once the
/// descriptor is open.
struct Holder(Child);

impl Holder {
    fn open(file: &Path) -> Holder {
        let child = Command::new("sh")
            .args(["-c", "exec 3<\"$1\" && exec sleep 120", "sh"])
            .arg(file)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let holder = Holder(child);
        let fd = PathBuf::from(format!("/proc/{}/fd/3", holder.0.id()));
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_link(&fd).ok().as_deref() != Some(file) {
            assert!(Instant::now() < deadline, "{} never opened", file.display());
            std::thread::sleep(Duration::from_millis(10));
        }
        holder
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits (at most 10 s) for `child` to exit.
fn exit_of(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "the daemon did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Unmounts every mount stacked at a path on drop, whatever happened.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        while listed(&self.0) {
            force_unmount(&self.0);
        }
    }
}

#[test]
fn unmount_clears_a_killed_daemons_mount_with_a_file_open_and_a_remount_works() {
    let published = publish_dataset(&[3], 10);
    let mut mount = MountGuard::mount(published.root(), &[]);
    let mountpoint = mount.mountpoint.clone();
    let _cleanup = Cleanup(mountpoint.clone());
    let held = mount.path("records/0/fields/iq.raw");
    assert_eq!(std::fs::read(&held).unwrap(), iq(&published, 0));
    let _holder = Holder::open(&held);
    let mut daemon = mount.child.take().unwrap();
    daemon.kill().unwrap(); // SIGKILL
    daemon.wait().unwrap();
    let dead = std::fs::read_dir(&mountpoint).unwrap_err();
    assert_eq!(dead.raw_os_error(), Some(libc::ENOTCONN), "{dead}");
    // Mounting over the dead mount is refused, naming the way out.
    let out = sdsfs(&[
        "mount".as_ref(),
        published.root().as_os_str(),
        mountpoint.as_os_str(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("sdsfs unmount"));

    let out = sdsfs(&["unmount".as_ref(), mountpoint.as_os_str()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("detached lazily"), "{stderr}");
    assert!(!listed(&mountpoint), "still in /proc/self/mountinfo");
    assert_eq!(std::fs::read_dir(&mountpoint).unwrap().count(), 0);

    // A remount at the same path, the old file still open.
    let out = sdsfs(&[
        "mount".as_ref(),
        published.root().as_os_str(),
        mountpoint.as_os_str(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(mountpoint.join("records/2/fields/iq.raw")).unwrap(),
        iq(&published, 2)
    );
    assert_eq!(std::fs::read(&held).unwrap(), iq(&published, 0));
    let out = sdsfs(&["unmount".as_ref(), mountpoint.as_os_str()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "an idle mount is unmounted outright");
    assert!(!listed(&mountpoint));
}

#[test]
fn sigterm_on_a_busy_mount_detaches_it_and_the_daemon_exits() {
    let published = publish_dataset(&[2], 10);
    let mut mount = MountGuard::mount(published.root(), &[]);
    let mountpoint = mount.mountpoint.clone();
    let held = mount.path("records/1/record.json");
    let holder = Holder::open(&held);
    let mut daemon = mount.child.take().unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let status = exit_of(&mut daemon);
    assert!(status.success(), "{status}: {}", mount.log_text());
    assert!(!listed(&mountpoint), "still mounted: {}", mount.log_text());
    // A plain empty directory again, not a disconnected mount.
    assert_eq!(std::fs::read_dir(&mountpoint).unwrap().count(), 0);
    let log = mount.log_text();
    assert!(log.contains("detached lazily"), "{log}");
    assert!(!log.contains("unmount failed"), "{log}");
    drop(holder);
}

#[test]
fn mounting_over_a_nonempty_directory_or_a_mount_needs_nonempty() {
    let published = publish_dataset(&[2], 10);
    let dir = tempfile::tempdir().unwrap();
    let mountpoint = dir.path().join("mnt");
    std::fs::create_dir(&mountpoint).unwrap();
    std::fs::write(mountpoint.join("notes.txt"), b"mine").unwrap();
    let _cleanup = Cleanup(mountpoint.clone());
    let dataset = published.root().as_os_str();
    let mnt = mountpoint.as_os_str();
    for foreground in [&[][..], &["-f".as_ref()][..]] {
        let args = [&["mount".as_ref()], foreground, &[dataset, mnt]].concat();
        let out = sdsfs(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains("not empty"), "{stderr}");
        assert!(stderr.contains("--nonempty"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!listed(&mountpoint));
    }

    let out = sdsfs(&["mount".as_ref(), "--nonempty".as_ref(), dataset, mnt]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(listed(&mountpoint));
    assert!(
        !mountpoint.join("notes.txt").exists(),
        "hidden under the mount"
    );
    assert_eq!(
        std::fs::read(mountpoint.join("records/1/fields/iq.raw")).unwrap(),
        iq(&published, 1)
    );

    // Over the mount just made: refused, then allowed with -o nonempty.
    let out = sdsfs(&["mount".as_ref(), dataset, mnt]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("already a mount point"), "{stderr}");
    let stacked = |p: &Path| mount_points().iter().filter(|m| *m == p).count();
    assert_eq!(stacked(&mountpoint), 1);
    let out = sdsfs(&[
        "mount".as_ref(),
        "-o".as_ref(),
        "ro,nonempty".as_ref(),
        dataset,
        mnt,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stacked(&mountpoint), 2);
    for _ in 0..2 {
        let out = sdsfs(&["unmount".as_ref(), mnt]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(stacked(&mountpoint), 0);
    assert_eq!(
        std::fs::read(mountpoint.join("notes.txt")).unwrap(),
        b"mine"
    );
}
