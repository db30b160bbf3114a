//! The daemon's edges on real mounts, each against a hostile input the test builds: a record
//! whose picture panicked the renderer (issue 37) costs that read only; a mount point swapped
//! for a symbolic link while `sdsfs mount` starts is never mounted through; `sdsfs unmount`
//! refuses a link and any filesystem but sdsfs; names and ids holding control characters
//! reach neither the log nor a terminal raw; `--log-file` refuses a link; importers refuse
//! absurd sample rates.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::datasets::{iq_capture, obj};
use common::mount::{force_unmount, MountGuard};
use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::Value;
use sdsfs::format::record::{Axis, Coordinate, Field, Record};
use sdsfs::storage::LocalStore;

/// A forged log line and a terminal title change: what a hostile name carries.
const HOSTILE: &str = "evil\nERROR forged line\r\u{1b}]0;owned\u{7}\u{9b}2J";

fn sdsfs(args: &[&OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sdsfs"))
        .args(args)
        .output()
        .expect("run sdsfs")
}

/// A new dataset of one record `r` with a 64-byte IQ field of `fill` bytes.
fn one_record_dataset(fill: u8) -> tempfile::TempDir {
    let dataset = tempfile::tempdir().unwrap();
    publish_records(
        dataset.path(),
        vec![Record::new("r").with_field("iq", iq_capture(vec![fill; 64]))],
    );
    dataset
}

fn publish_records(dir: &Path, records: Vec<Record>) {
    let store = LocalStore::open(dir).unwrap();
    let receipt = write_shard(&store, records, "w0", 0, &ShardOptions::default()).unwrap();
    publish(&store, &[receipt], &PublishOptions::new("edges", "s1")).unwrap();
}

/// Every byte below 0x20 but `\n`, DEL, and the C1 controls (UTF-8 `C2 80`..`C2 9F`).
fn raw_controls(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    text.chars()
        .filter(|&c| c != '\n' && (c < ' ' || ('\u{7f}'..='\u{9f}').contains(&c)))
        .map(|c| format!("{:#x}", c as u32))
        .collect()
}

fn alive(child: &mut Child) -> bool {
    matches!(child.try_wait(), Ok(None))
}

#[test]
fn the_issues_spectrogram_panic_costs_its_reads_only_and_the_mount_serves_on() {
    // Issue 37: a complex64 field stating `center_frequency_hz: 1e100`; each read of its
    // spectrogram panicked a FUSE thread (a tick label wider than the picture), and after a
    // few reads every file of the mount answered ENOTCONN.
    let samples = 4096u64;
    let block = obj(&[
        ("kind", Value::from("uniform")),
        ("sample_rate_hz", Value::Int(1_000_000)),
    ]);
    let wide = Field::new(DType::C64, vec![samples], vec![0u8; samples as usize * 8])
        .unwrap()
        .with_axes(vec![Axis::new("time", samples)
            .with_role("time")
            .with_coordinate(Coordinate::regular(0.0, 1e-6).with_unit("s"))])
        .with_metadata(obj(&[
            ("time_coordinates", Value::Object(block)),
            ("center_frequency_hz", Value::Float(1e100)),
        ]));
    let plain: Vec<u8> = (0..samples * 8).map(|i| (i * 7 % 251) as u8).collect();
    let dir = tempfile::tempdir().unwrap();
    publish_records(
        dir.path(),
        vec![
            Record::new("far").with_field("iq", wide),
            Record::new("near").with_field("iq", iq_capture(plain.clone())),
        ],
    );
    let mut mount = MountGuard::mount(dir.path(), &["--threads", "2"]);
    let picture = mount.path("records/0/fields/iq.spectrogram.png");
    let mut failed = 0;
    for _ in 0..20 {
        // EIO or a picture: either is fine for the picture itself.
        if std::fs::read(&picture).is_err() {
            failed += 1;
        }
    }
    let child = mount.child.as_mut().unwrap();
    assert!(alive(child), "the daemon exited: {}", mount.log_text());
    for _ in 0..3 {
        assert_eq!(
            std::fs::read(mount.path("records/1/fields/iq.raw"))
                .unwrap_or_else(|e| panic!("{e}: {}", mount.log_text())),
            plain
        );
        assert!(std::fs::read_dir(mount.path("records")).is_ok());
    }
    let log = mount.log_text();
    // A panic is one log line (the default hook's "note: run with RUST_BACKTRACE" is gone).
    assert!(!log.contains("RUST_BACKTRACE"), "{log}");
    let panics = log.lines().filter(|l| l.contains("panicked")).count();
    assert!(
        panics <= failed,
        "{panics} panic lines for {failed} failed reads: {log}"
    );
    println!("{failed} of 20 picture reads failed, {panics} panic lines logged");
}

/// The fuse mounts below `dir` (mount id, mount point) from this process's mount table.
fn fuse_mounts_below(dir: &Path) -> Vec<(u64, PathBuf)> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|line| {
            line.split(" - ")
                .nth(1)
                .is_some_and(|t| t.starts_with("fuse"))
        })
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let id = fields.next()?.parse().ok()?;
            let point = PathBuf::from(fields.nth(3)?);
            point.starts_with(dir).then_some((id, point))
        })
        .collect()
}

/// Waits until the daemon mounted something below `dir` or exited; returns where it mounted.
fn mounted_or_refused(child: &mut Child, dir: &Path) -> Option<PathBuf> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some((_, point)) = fuse_mounts_below(dir).pop() {
            return Some(point);
        }
        if !alive(child) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    panic!("neither mounted nor refused within 20 s");
}

#[test]
fn a_mount_point_swapped_for_a_link_while_mounting_is_never_mounted_through() {
    // A user owning the mount point's parent swaps the mount point for a symbolic link to a
    // non-empty directory in a loop, while root's `sdsfs mount` checks and mounts.
    let dataset = one_record_dataset(1);
    let base = tempfile::tempdir().unwrap();
    let base = base.path().to_path_buf();
    let (mnt, link, target) = (base.join("mnt"), base.join("link"), base.join("target"));
    std::fs::create_dir(&mnt).unwrap();
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("secret"), b"root's").unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();

    let running = Arc::new(AtomicBool::new(true));
    let paused = Arc::new(AtomicBool::new(false));
    // Held by the swapper for each exchange, and by the test while it looks and cleans up.
    let turn = Arc::new(Mutex::new(0u64));
    let swapper = {
        let (running, paused, turn, base) =
            (running.clone(), paused.clone(), turn.clone(), base.clone());
        std::thread::spawn(move || {
            while running.load(Ordering::Relaxed) {
                if paused.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_micros(200));
                    continue;
                }
                let mut swaps = turn.lock().unwrap();
                let swapped = nix::fcntl::renameat2(
                    nix::fcntl::AT_FDCWD,
                    &base.join("mnt"),
                    nix::fcntl::AT_FDCWD,
                    &base.join("link"),
                    nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                );
                *swaps += u64::from(swapped.is_ok());
            }
        })
    };
    let (mut mounted, mut refused, mut elsewhere) = (0, 0, Vec::new());
    let started = Instant::now();
    let attempts = 200;
    for _ in 0..attempts {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sdsfs"))
            .args([
                "mount".as_ref(),
                "--foreground".as_ref(),
                dataset.path().as_os_str(),
            ])
            .arg(&mnt)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let outcome = mounted_or_refused(&mut child, &base);
        paused.store(true, Ordering::Relaxed);
        let held = turn.lock().unwrap();
        if outcome.is_none() {
            refused += 1;
        }
        // Where the mounts are now (the names stand still while the swapper waits).
        for (_, point) in fuse_mounts_below(&base) {
            if point.ends_with("mnt") || point.ends_with("link") {
                mounted += 1;
            } else {
                elsewhere.push(point.clone());
            }
            // Forced first: that aborts the connection, so no thread of the daemon (which may
            // be stat-ing its own mount) waits on it for ever once killed.
            let _ = nix::mount::umount2(&point, nix::mount::MntFlags::MNT_FORCE);
            let _ = nix::mount::umount2(&point, nix::mount::MntFlags::MNT_DETACH);
        }
        let _ = child.kill();
        let _ = child.wait();
        for (_, point) in fuse_mounts_below(&base) {
            force_unmount(&point);
        }
        drop(held);
        paused.store(false, Ordering::Relaxed);
    }
    running.store(false, Ordering::Relaxed);
    swapper.join().unwrap();
    let swaps = *turn.lock().unwrap();
    println!(
        "{attempts} attempts in {:.1} s, {swaps} swaps: {mounted} mounted on the directory, \
         {refused} refused, {} elsewhere",
        started.elapsed().as_secs_f64(),
        elsewhere.len()
    );
    assert!(
        elsewhere.is_empty(),
        "mounted through the link: {elsewhere:?}"
    );
    assert!(!target.join("records").exists());
    assert_eq!(std::fs::read(target.join("secret")).unwrap(), b"root's");
    assert!(
        swaps > 0 && mounted > 0 && refused > 0,
        "the race was run both ways"
    );
}

/// A tmpfs at `path` (root only), unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(path: &Path) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        nix::mount::mount(
            Some("edges-tmpfs"),
            path,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some("size=1m"),
        )
        .unwrap();
        Tmpfs(path.to_path_buf())
    }

    fn mounted(&self) -> bool {
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(self.0.to_str().unwrap()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn unmount_refuses_a_link_and_any_filesystem_but_sdsfs() {
    let dir = tempfile::tempdir().unwrap();
    let tmpfs = Tmpfs::mount(&dir.path().join("tmp"));
    // Busy: a file open on it (what made the old lazy detach take it away).
    let held = std::fs::File::create(tmpfs.0.join("held")).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&tmpfs.0, &link).unwrap();
    for (path, says) in [
        (&link, "symbolic link"),
        (&tmpfs.0, "not an sdsfs mount (tmpfs"),
    ] {
        let out = sdsfs(&["unmount".as_ref(), path.as_os_str()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{path:?}: {stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(tmpfs.mounted(), "{path:?} left the tmpfs mounted");
    }
    drop(held);
    // A directory that is no mount at all.
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let out = sdsfs(&["unmount".as_ref(), plain.as_os_str()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not mounted"));

    // A real sdsfs mount, and one reached through a link to it: the link is refused, the
    // mount point itself is unmounted.
    let dataset = one_record_dataset(2);
    let mut mount = MountGuard::mount(dataset.path(), &[]);
    let to_mount = dir.path().join("to-mount");
    std::os::unix::fs::symlink(&mount.mountpoint, &to_mount).unwrap();
    let out = sdsfs(&["unmount".as_ref(), to_mount.as_os_str()]);
    assert!(!out.status.success());
    assert!(common::mount::is_mounted(&mount.mountpoint));
    let out = sdsfs(&["unmount".as_ref(), mount.mountpoint.as_os_str()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!common::mount::is_mounted(&mount.mountpoint));
    let status = mount.unmount();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

#[test]
fn names_and_ids_with_control_characters_reach_neither_log_nor_terminal_raw() {
    // The dataset's directory, a record id and a field name hold CR, LF, ESC, an OSC title
    // change and a C1 CSI; an annotation catalog names a set the same way (its set root is
    // missing, so the mount hides it, logging its name).
    let parent = tempfile::tempdir().unwrap();
    let root = parent.path().join(format!("ds-{HOSTILE}"));
    std::fs::create_dir(&root).unwrap();
    publish_records(
        &root,
        vec![Record::new(format!("id-{HOSTILE}"))
            .with_field(format!("field-{HOSTILE}"), iq_capture(vec![3u8; 64]))],
    );
    write_catalog(&root, &format!("set-{HOSTILE}"));
    let log = parent.path().join("daemon.log");
    let mountpoint = parent.path().join("mnt");
    std::fs::create_dir(&mountpoint).unwrap();
    let out = sdsfs(&[
        "mount".as_ref(),
        "--log-file".as_ref(),
        log.as_os_str(),
        root.as_os_str(),
        mountpoint.as_os_str(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _unmount = Unmount(mountpoint.clone());
    // What makes the daemon log the names: the annotation overlay, a listing, a read.
    let listing: Vec<_> = std::fs::read_dir(mountpoint.join("records/0/fields"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(!listing.is_empty());
    let _ = std::fs::read_dir(mountpoint.join("annotations"));
    let status = sdsfs(&["status".as_ref(), mountpoint.as_os_str()]);
    let status_json = sdsfs(&["status".as_ref(), "--json".as_ref(), mountpoint.as_os_str()]);
    let info = common::cli::sds(&["info", root.to_str().unwrap()]);
    let info_json = common::cli::sds(&["info", "--json", root.to_str().unwrap()]);
    let ls = common::cli::sds(&["ls", root.to_str().unwrap()]);
    let verify = common::cli::sds(&["verify", root.to_str().unwrap()]);
    let missing = common::cli::sds(&[
        "ls",
        parent
            .path()
            .join(format!("no-{HOSTILE}"))
            .to_str()
            .unwrap(),
    ]);
    let out = sdsfs(&["unmount".as_ref(), mountpoint.as_os_str()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(Duration::from_millis(300));
    let log_bytes = std::fs::read(&log).unwrap();
    let log_text = String::from_utf8_lossy(&log_bytes);
    let mut outputs = vec![("log".to_string(), log_bytes.clone())];
    for (name, out) in [
        ("sdsfs status", &status),
        ("sdsfs status --json", &status_json),
        ("sds info", &info),
        ("sds info --json", &info_json),
        ("sds ls", &ls),
        ("sds verify", &verify),
        ("sds ls (missing)", &missing),
    ] {
        outputs.push((format!("{name} stdout"), out.stdout.clone()));
        outputs.push((format!("{name} stderr"), out.stderr.clone()));
    }
    assert!(String::from_utf8_lossy(&ls.stdout)
        .contains("id-evil\\nERROR forged line\\r\\x1b]0;owned\\x07"));
    assert!(log_text.contains("set-evil\\n"), "{log_text}");
    assert!(String::from_utf8_lossy(&info.stdout).contains("set-evil\\n"));
    assert!(String::from_utf8_lossy(&status.stdout).contains("ds-evil\\n"));
    for (name, bytes) in &outputs {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            raw_controls(bytes).is_empty(),
            "{name}: raw controls {:?} in {text:?}",
            raw_controls(bytes)
        );
        assert!(
            !text.lines().any(|l| l.starts_with("ERROR forged")),
            "{name}: a forged line in {text:?}"
        );
    }
}

/// Hand-written catalog pointer and revision naming one set whose root does not exist.
fn write_catalog(root: &Path, set: &str) {
    use sha2::{Digest, Sha256};
    let revision = serde_json::json!({"sets": {set: {
        "generation": null,
        "path": "annotations/sets/x/y/root.json",
        "stored_bytes": 10
    }}});
    let bytes = serde_json::to_vec(&revision).unwrap();
    let sha = format!("{:x}", Sha256::digest(&bytes));
    std::fs::create_dir_all(root.join("annotations/catalogs")).unwrap();
    std::fs::write(
        root.join(format!("annotations/catalogs/{sha}.json")),
        &bytes,
    )
    .unwrap();
    let pointer = serde_json::json!({"revision": {
        "generation": null,
        "path": format!("annotations/catalogs/{sha}.json")
    }});
    std::fs::write(
        root.join("annotations/catalog.json"),
        serde_json::to_vec(&pointer).unwrap(),
    )
    .unwrap();
}

/// Unmounts a daemonized mount when dropped.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        if common::mount::is_mounted(&self.0) {
            force_unmount(&self.0);
        }
    }
}

#[test]
fn a_log_file_that_is_a_symbolic_link_is_refused() {
    let dataset = one_record_dataset(4);
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"root's file\n").unwrap();
    let log = dir.path().join("log");
    std::os::unix::fs::symlink(&victim, &log).unwrap();
    let mountpoint = dir.path().join("mnt");
    std::fs::create_dir(&mountpoint).unwrap();
    let _unmount = Unmount(mountpoint.clone());
    let out = sdsfs(&[
        "mount".as_ref(),
        "--log-file".as_ref(),
        log.as_os_str(),
        dataset.path().as_os_str(),
        mountpoint.as_os_str(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!common::mount::is_mounted(&mountpoint));
    assert_eq!(std::fs::read(&victim).unwrap(), b"root's file\n");
}

#[test]
fn importers_refuse_absurd_sample_rates_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("cap.sigmf-data");
    std::fs::write(&data, vec![0u8; 64]).unwrap();
    for rate in ["1.7e308", "1e300", "0", "-5", "1e-300", "1e13"] {
        std::fs::write(
            dir.path().join("cap.sigmf-meta"),
            format!(
                r#"{{"global":{{"core:datatype":"cf32_le","core:sample_rate":{rate},"core:version":"1.0.0"}},"captures":[{{"core:sample_start":0}}],"annotations":[]}}"#
            ),
        )
        .unwrap();
        let out_dir = dir.path().join(format!("out-{rate}"));
        let out = common::cli::sds(&[
            "create",
            out_dir.to_str().unwrap(),
            "--from-sigmf",
            data.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{rate}: {stderr}");
        assert!(stderr.contains("core:sample_rate"), "{rate}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{rate}: {stderr}");
        assert!(!out_dir.join("root.json").exists());
        let raw = common::cli::sds(&[
            "create",
            dir.path().join(format!("raw-{rate}")).to_str().unwrap(),
            "--from-raw",
            data.to_str().unwrap(),
            "--datatype",
            "cf32_le",
            &format!("--sample-rate={rate}"),
        ]);
        let stderr = String::from_utf8_lossy(&raw.stderr);
        assert_eq!(raw.status.code(), Some(1), "{rate}: {stderr}");
        assert!(stderr.contains("sample rate"), "{rate}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{rate}: {stderr}");
    }
    // A sane rate still imports.
    std::fs::write(
        dir.path().join("cap.sigmf-meta"),
        r#"{"global":{"core:datatype":"cf32_le","core:sample_rate":1e6,"core:version":"1.0.0"},"captures":[{"core:sample_start":0}],"annotations":[]}"#,
    )
    .unwrap();
    let out = common::cli::sds(&[
        "create",
        dir.path().join("ok").to_str().unwrap(),
        "--from-sigmf",
        data.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
