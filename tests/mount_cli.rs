//! `sdsfs mount` as a user runs it: daemonizing, refusing a bad dataset before mounting,
//! `-o` options, owner flags, and `sdsfs unmount`.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use common::mount::{force_unmount, is_mounted};
use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::record::{Field, Record};
use sdsfs::storage::LocalStore;

fn sdsfs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sdsfs"))
}

fn tiny_dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let record =
        Record::new("one").with_field("x", Field::new(DType::U8, vec![3], vec![1, 2, 3]).unwrap());
    let receipt = write_shard(&store, vec![record], "w", 0, &ShardOptions::default()).unwrap();
    publish(&store, &[receipt], &PublishOptions::new("cli", "s")).unwrap();
    dir
}

/// Unmounts on drop, whatever happened.
struct Cleanup<'a>(&'a Path);
impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if is_mounted(self.0) {
            force_unmount(self.0);
        }
    }
}

#[test]
fn daemon_mounts_then_unmount_clears_it() {
    let dataset = tiny_dataset();
    let mnt = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(mnt.path());
    let log = mnt.path().with_extension("log");
    let output = sdsfs()
        .args([
            "mount",
            "-o",
            "ro,uid=1234,gid=4321,cache_size=8M,_netdev,x-systemd.automount",
        ])
        .arg("--log-file")
        .arg(&log)
        .arg(dataset.path())
        .arg(mnt.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Returned only once ready: the tree is there at once.
    assert!(is_mounted(mnt.path()));
    let meta = std::fs::metadata(mnt.path().join("records/0/fields/x.raw")).unwrap();
    assert_eq!((meta.uid(), meta.gid(), meta.len()), (1234, 4321, 3));
    assert_eq!(
        std::fs::read(mnt.path().join("records/0/fields/x.raw")).unwrap(),
        [1, 2, 3]
    );
    let status = sdsfs().arg("unmount").arg(mnt.path()).status().unwrap();
    assert!(status.success());
    assert!(!is_mounted(mnt.path()));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("mounted"), "{text}");
}

/// mount(8) adds `rw` itself (`mount -t fuse.sdsfs`, fstab's `defaults`): it is accepted, and
/// the mount is read-only all the same (`ro` in `/proc/self/mountinfo`, writes `EROFS`).
#[test]
fn mount_8s_rw_and_defaults_mount_read_only() {
    let dataset = tiny_dataset();
    let mnt = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(mnt.path());
    let output = sdsfs()
        .args(["mount", "-o", "rw,defaults"])
        .arg(dataset.path())
        .arg(mnt.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let point = mnt.path().to_str().unwrap();
    let line = mountinfo
        .lines()
        .find(|line| line.split(' ').nth(4) == Some(point))
        .unwrap_or_else(|| panic!("{point} not in mountinfo:\n{mountinfo}"));
    let options = line.split(' ').nth(5).unwrap();
    assert!(options.split(',').any(|o| o == "ro"), "{line}");
    let written = std::fs::write(mnt.path().join("records/0/new"), b"x");
    assert_eq!(
        written.unwrap_err().raw_os_error(),
        Some(libc::EROFS),
        "a write to the mount"
    );
    assert_eq!(
        std::fs::read(mnt.path().join("records/0/fields/x.raw")).unwrap(),
        [1, 2, 3]
    );
    assert!(sdsfs()
        .arg("unmount")
        .arg(mnt.path())
        .status()
        .unwrap()
        .success());
}

#[test]
fn bad_datasets_fail_before_mounting_with_one_line() {
    let mnt = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(mnt.path());
    let empty = tempfile::tempdir().unwrap();
    let broken = tiny_dataset();
    let root = broken.path().join("root.json");
    let text = std::fs::read_to_string(&root)
        .unwrap()
        .replace("\"0.1\"", "\"9.9\"");
    std::fs::write(&root, text).unwrap();
    for (dataset, expect) in [(empty.path(), "root.json"), (broken.path(), "layout")] {
        for foreground in [false, true] {
            let mut command = sdsfs();
            command.arg("mount");
            if foreground {
                command.arg("-f");
            }
            let output = command.arg(dataset).arg(mnt.path()).output().unwrap();
            assert!(!output.status.success());
            let stderr = String::from_utf8(output.stderr).unwrap();
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stderr.contains(expect), "{stderr}");
            assert!(!is_mounted(mnt.path()));
        }
    }
    let output = sdsfs()
        .args(["mount", "-o", "bogus"])
        .arg(empty.path())
        .arg(mnt.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("bogus"));
    // A cache below the 1 MiB the mount needs is refused, naming the minimum (it was raised
    // silently), as an option and as a mount option.
    for args in [["--cache-size", "10K"], ["-o", "cache_size=10K"]] {
        let output = sdsfs()
            .arg("mount")
            .args(args)
            .arg(empty.path())
            .arg(mnt.path())
            .output()
            .unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("below the minimum, 1.0 MiB"), "{stderr}");
        assert!(!is_mounted(mnt.path()));
    }
}

#[test]
fn sigint_unmounts_a_foreground_mount() {
    let dataset = tiny_dataset();
    let mut mount = common::mount::MountGuard::mount(dataset.path(), &[]);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(mount.pid() as i32, libc::SIGINT) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let child = mount.child.as_mut().unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "no exit after SIGINT");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    assert!(!is_mounted(&mount.mountpoint));
}

#[test]
fn help_documents_every_option_with_its_default() {
    let output = sdsfs().args(["mount", "--help"]).output().unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    for needle in [
        "--foreground",
        "--log-file",
        "--allow-other",
        "--uid",
        "--gid",
        "--cache-size",
        "[default: 1G]",
        "--metadata-ttl",
        "[default: 5]",
        "-o <OPTIONS>",
    ] {
        assert!(help.contains(needle), "missing {needle}: {help}");
    }
}

/// A daemon unmounted from outside must not, while it exits, unmount a new mount made at the
/// same path in the meantime (mount(8) or systemd remounting): fuser's own unmount-on-drop
/// would, so the daemon skips it after an external unmount.
#[test]
fn an_exiting_daemon_leaves_a_new_mount_at_its_path_alone() {
    use std::time::{Duration, Instant};
    let dataset = tiny_dataset();
    for round in 0..3 {
        let mut first = common::mount::MountGuard::mount(dataset.path(), &[]);
        let mnt = first.mountpoint.clone();
        let _cleanup = Cleanup(&mnt);
        let status = Command::new("umount").arg(&mnt).status().unwrap();
        assert!(status.success(), "round {round}: umount failed");
        // Remount at once, while the first daemon notices and exits.
        let mut second = sdsfs()
            .args(["mount", "--foreground"])
            .arg(dataset.path())
            .arg(&mnt)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !is_mounted(&mnt) {
            assert!(
                Instant::now() < deadline,
                "round {round}: remount not ready"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let old = first.child.as_mut().unwrap();
        let exited = loop {
            if let Some(status) = old.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: old daemon still running"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        first.child = None;
        assert!(
            exited.success(),
            "round {round}: old daemon exited {exited}"
        );
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            is_mounted(&mnt),
            "round {round}: the old daemon unmounted the new mount"
        );
        assert_eq!(
            std::fs::read(mnt.join("records/0/fields/x.raw")).unwrap(),
            [1, 2, 3]
        );
        // SAFETY: signalling our own child.
        unsafe { libc::kill(second.id() as i32, libc::SIGTERM) };
        second.wait().unwrap();
    }
}

/// Runs `command` as `nobody` (uid and gid 65534, no supplementary groups).
fn as_nobody(command: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .args(command)
        .output()
        .unwrap()
}

/// `.sdsfs-status` (absolute paths, the pid) is the mounting user's only, even on a mount that
/// admits everyone: shown 0400 and owned by that user, and refused by the daemon to any other
/// user, since the kernel checks no modes on this mount.
#[test]
fn the_status_file_is_readable_by_the_mounting_user_only() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: getuid cannot fail.
    assert_eq!(unsafe { libc::getuid() }, 0, "this test mounts as root");
    let dataset = tiny_dataset();
    let mount = common::mount::MountGuard::mount(dataset.path(), &["--allow-other"]);
    let above = mount.mountpoint.parent().unwrap();
    std::fs::set_permissions(above, std::fs::Permissions::from_mode(0o755)).unwrap();
    let status = mount.path(".sdsfs-status");
    let data = mount.path("records/0/fields/x.raw");

    let meta = std::fs::metadata(&status).unwrap();
    assert_eq!((meta.mode() & 0o7777, meta.uid()), (0o400, 0));
    let root_status = sdsfs()
        .arg("status")
        .arg(&mount.mountpoint)
        .output()
        .unwrap();
    assert!(root_status.status.success());
    let text = String::from_utf8(root_status.stdout).unwrap();
    assert!(
        text.contains(&mount.mountpoint.display().to_string()),
        "{text}"
    );

    let nobody_data = as_nobody(&["cat".as_ref(), data.as_os_str()]);
    assert!(nobody_data.status.success(), "{nobody_data:?}");
    assert_eq!(nobody_data.stdout, [1, 2, 3]);
    for command in [&["cat"][..], &["stat", "--"][..]] {
        let mut argv: Vec<&std::ffi::OsStr> = command.iter().map(|a| a.as_ref()).collect();
        argv.push(status.as_os_str());
        let refused = as_nobody(&argv);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{command:?}: {stderr}");
        assert!(refused.stdout.is_empty(), "{command:?} printed the report");
        assert!(
            stderr.contains("Permission denied") || stderr.contains("not permitted"),
            "{command:?}: {stderr}"
        );
    }
    // Root still reads it after nobody was refused.
    assert!(std::fs::read(&status).unwrap().starts_with(b"{"));
}

/// A `generation` on root.json's snapshot reference (a local store has no generations) is a
/// defect of root.json, which holds the reference: the refusal and `sds verify` name it.
#[test]
fn a_generation_on_the_snapshot_reference_is_reported_against_root_json() {
    let dataset = tiny_dataset();
    let root_path = dataset.path().join("root.json");
    let mut root: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&root_path).unwrap()).unwrap();
    root["snapshot"]["generation"] = 7.into();
    std::fs::write(&root_path, serde_json::to_vec_pretty(&root).unwrap()).unwrap();
    let root_name = root_path.display().to_string();

    let mnt = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(mnt.path());
    let out = sdsfs()
        .args(["mount", "-f"])
        .arg(dataset.path())
        .arg(mnt.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("generation"), "{stderr}");
    // The message opens with the document holding the reference.
    let named = stderr
        .split(": ")
        .find(|part| part.ends_with(".json"))
        .unwrap_or("");
    assert!(named.ends_with(&root_name), "{stderr}");
    assert_eq!(std::fs::read_dir(mnt.path()).unwrap().count(), 0);

    let verify = common::cli::sds(&["verify", dataset.path().to_str().unwrap()]);
    let verify = String::from_utf8_lossy(&verify.stdout);
    let problem = verify
        .lines()
        .find(|line| line.contains("generation"))
        .unwrap_or_else(|| panic!("{verify}"));
    assert!(problem.starts_with(&root_name), "{problem}");
}
