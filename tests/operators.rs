//! What operators rely on: fstab lines through mount(8) (`mount -T FILE`, `mount -a`), and the
//! exact command line `systemd/sdsfs@.service` runs, with readiness sent to `$NOTIFY_SOCKET`.

mod common;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cli::run;
use common::mount::{force_unmount, is_mounted};
use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::record::{Field, Record};
use sdsfs::storage::LocalStore;

const SDSFS: &str = env!("CARGO_BIN_EXE_sdsfs");

fn tiny_dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let record =
        Record::new("one").with_field("x", Field::new(DType::U8, vec![3], vec![1, 2, 3]).unwrap());
    let receipt = write_shard(&store, vec![record], "w", 0, &ShardOptions::default()).unwrap();
    publish(&store, &[receipt], &PublishOptions::new("ops", "s")).unwrap();
    dir
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Unmounts on drop, whatever happened.
struct Cleanup(PathBuf);
impl Drop for Cleanup {
    fn drop(&mut self) {
        if is_mounted(&self.0) {
            force_unmount(&self.0);
        }
    }
}

/// Removes a helper symlink this test created, on drop.
struct Installed(Option<PathBuf>);
impl Drop for Installed {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn assert_demo_mount(mnt: &Path) {
    assert!(is_mounted(mnt), "{} is not mounted", mnt.display());
    let meta = std::fs::metadata(mnt.join("records/0/fields/x.raw")).unwrap();
    assert_eq!((meta.uid(), meta.len()), (1234, 3));
    assert_eq!(
        std::fs::read(mnt.join("records/0/fields/x.raw")).unwrap(),
        [1, 2, 3]
    );
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let line = mounts
        .lines()
        .find(|l| l.split(' ').nth(1) == Some(mnt.to_str().unwrap()))
        .unwrap();
    assert!(line.contains(" fuse"), "{line}");
}

fn wait_unmounted(mnt: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while is_mounted(mnt) {
        assert!(Instant::now() < deadline, "{} still mounted", mnt.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn fstab_lines_mount_through_mount_8() {
    assert!(
        is_root(),
        "mount(8) with a private fstab needs root (CI runs the suite as root)"
    );
    let dataset = tiny_dataset();
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let _cleanup = Cleanup(mnt.clone());
    let fstab = dir.path().join("fstab");
    std::fs::write(
        &fstab,
        format!(
            "# test fstab\n{} {} fuse.sdsfs ro,uid=1234,cache_size=64M,_netdev 0 0\n",
            dataset.path().display(),
            mnt.display()
        ),
    )
    .unwrap();

    // With the helper installed as the README says (/sbin/mount.fuse.sdsfs -> sdsfs):
    // `mount -T FILE MOUNTPOINT`, then `mount -a -T FILE`. (mount(8) looks for helpers in
    // /sbin only, and mount.fuse3's fallback runs `sdsfs` with a fixed PATH, so neither can be
    // pointed at a build directory.)
    let helper = Path::new("/sbin/mount.fuse.sdsfs");
    let _installed = if helper.exists() {
        let target = std::fs::read_link(helper).unwrap_or_default();
        assert_eq!(
            target,
            Path::new(SDSFS),
            "{} exists and is not this build: remove it (or the package that installed it)",
            helper.display()
        );
        Installed(None)
    } else {
        std::os::unix::fs::symlink(SDSFS, helper).unwrap();
        Installed(Some(helper.to_path_buf()))
    };
    run(Command::new("mount").arg("-T").arg(&fstab).arg(&mnt));
    assert_demo_mount(&mnt);
    run(Command::new(SDSFS).arg("unmount").arg(&mnt));
    wait_unmounted(&mnt);

    run(Command::new("mount").arg("-a").arg("-T").arg(&fstab));
    assert_demo_mount(&mnt);
    run(Command::new("umount").arg(&mnt));
    wait_unmounted(&mnt);

    // `mount -t fuse.sdsfs` without options and an fstab line of `defaults`: mount(8) passes
    // `rw` itself, and the mount is made, read-only.
    let plain = |mnt: &Path| {
        assert!(is_mounted(mnt), "{} is not mounted", mnt.display());
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        let line = mounts
            .lines()
            .find(|l| l.split(' ').nth(1) == Some(mnt.to_str().unwrap()))
            .unwrap();
        let options = line.split(' ').nth(3).unwrap();
        assert!(options.split(',').any(|o| o == "ro"), "{line}");
        assert_eq!(
            std::fs::read(mnt.join("records/0/fields/x.raw")).unwrap(),
            [1, 2, 3]
        );
    };
    run(Command::new("mount")
        .args(["-t", "fuse.sdsfs"])
        .arg(dataset.path())
        .arg(&mnt));
    plain(&mnt);
    run(Command::new("umount").arg(&mnt));
    wait_unmounted(&mnt);
    let defaults = dir.path().join("fstab.defaults");
    let line = format!(
        "{} {} fuse.sdsfs defaults 0 0\n",
        dataset.path().display(),
        mnt.display()
    );
    std::fs::write(&defaults, line).unwrap();
    run(Command::new("mount").arg("-T").arg(&defaults).arg(&mnt));
    plain(&mnt);
    run(Command::new("umount").arg(&mnt));
    wait_unmounted(&mnt);

    // mount -f (fake) checks the options without mounting; a bad option is refused.
    run(Command::new("mount")
        .arg("-f")
        .arg("-T")
        .arg(&fstab)
        .arg(&mnt));
    assert!(!is_mounted(&mnt));
    std::fs::write(
        &fstab,
        format!(
            "{} {} fuse.sdsfs ro,bogus_option 0 0\n",
            dataset.path().display(),
            mnt.display()
        ),
    )
    .unwrap();
    let output = Command::new("mount")
        .arg("-T")
        .arg(&fstab)
        .arg(&mnt)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(!is_mounted(&mnt));
}

#[test]
fn helper_forms_parse_like_mount_8_passes_them() {
    use sdsfs::cli::mount::{helper_invocation, HelperCall};
    let argv = |a: &[&str]| {
        a.iter()
            .map(Into::into)
            .collect::<Vec<std::ffi::OsString>>()
    };
    assert!(helper_invocation(&argv(&["sdsfs", "mount", "a", "b"])).is_none());
    assert!(helper_invocation(&argv(&["sdsfs", "--help"])).is_none());
    let call = helper_invocation(&argv(&[
        "/sbin/mount.fuse.sdsfs",
        "/data/ds",
        "/mnt/ds",
        "-o",
        "ro,uid=7,cache_size=2G,_netdev,log_file=/tmp/l,file_opens=daemon",
        "-n",
        "-t",
        "fuse.sdsfs",
    ]));
    let Some(Ok(HelperCall::Mount(args))) = call else {
        panic!("{call:?}")
    };
    assert_eq!(args.dataset, "/data/ds");
    assert_eq!(args.mountpoint, Path::new("/mnt/ds"));
    assert!(!args.foreground, "helpers daemonize");
    let mut applied = (*args).clone();
    sdsfs::cli::mount::apply_mount_options(&mut applied).unwrap();
    assert_eq!(applied.uid, Some(7));
    assert_eq!(applied.cache_size, 2 << 30);
    assert_eq!(applied.log_file.as_deref(), Some(Path::new("/tmp/l")));
    assert_eq!(applied.file_opens, sdsfs::fs::fuse::FileOpens::Daemon);
    let mut wrong = (*args).clone();
    wrong.options = vec!["file_opens=sometimes".into()];
    let refused = sdsfs::cli::mount::apply_mount_options(&mut wrong).unwrap_err();
    assert!(
        refused.to_string().contains("auto, kernel or daemon"),
        "{refused}"
    );
    // Object-store settings of an fstab line for an S3-compatible server.
    let call = helper_invocation(&argv(&[
        "/sbin/mount.fuse.sdsfs",
        "s3://bucket/ds",
        "/mnt/ds",
        "-o",
        "ro,endpoint_url=http://minio:9000,region=eu-west-1,allow_http,request_timeout=2.5",
    ]));
    let Some(Ok(HelperCall::Mount(mut s3))) = call else {
        panic!("{call:?}")
    };
    sdsfs::cli::mount::apply_mount_options(&mut s3).unwrap();
    assert_eq!(s3.store.endpoint_url.as_deref(), Some("http://minio:9000"));
    assert_eq!(s3.store.region.as_deref(), Some("eu-west-1"));
    assert!(s3.store.allow_http);
    let options = s3.store.cloud_options();
    assert_eq!(options.endpoint.as_deref(), Some("http://minio:9000"));
    assert_eq!(options.allow_http, Some(true));
    assert_eq!(
        options.request_timeout,
        Some(std::time::Duration::from_millis(2500))
    );
    // `sdsfs SOURCE MOUNTPOINT -o OPTS`, as mount.fuse3 runs it; -f is "fake" there.
    let call = helper_invocation(&argv(&["sdsfs", "/d", "/m", "-oro", "-f"]));
    assert!(matches!(call, Some(Ok(HelperCall::Fake))), "{call:?}");
    // `rw`, which mount(8) adds itself, is accepted: the mount is read-only anyway.
    let call = helper_invocation(&argv(&["mount.sdsfs", "/d", "/m", "-o", "rw"]));
    assert!(matches!(call, Some(Ok(HelperCall::Mount(_)))), "{call:?}");
    let call = helper_invocation(&argv(&["mount.sdsfs", "/d"]));
    assert!(
        matches!(call, Some(Err(ref e)) if e.to_string().contains("usage")),
        "{call:?}"
    );
}

/// `Environment=` and `EnvironmentFile=` lines as systemd reads them (KEY=VALUE, `#` comments).
fn parse_env(text: &str, env: &mut HashMap<String, String>) {
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let (key, value) = line.split_once('=').unwrap();
        env.insert(key.trim().to_string(), value.trim().to_string());
    }
}

/// Expands one unit command line: `%f` `%i` `%%` specifiers, `${VAR}` and `$VAR`, and the
/// program path replaced by this build's binary. Words are split on whitespace (the unit uses
/// no quoting).
fn expand(line: &str, env: &HashMap<String, String>, instance: &str, mnt: &Path) -> Vec<String> {
    let line = line
        .replace("%f", mnt.to_str().unwrap())
        .replace("%i", instance)
        .replace("%%", "%");
    line.split_whitespace()
        .map(|word| {
            let mut word = word.to_string();
            for (key, value) in env {
                word = word.replace(&format!("${{{key}}}"), value);
                if word == format!("${key}") {
                    word = value.clone();
                }
            }
            assert!(!word.contains('$'), "unexpanded variable in {word}");
            word.replace("/usr/bin/sdsfs", SDSFS)
        })
        .collect()
}

/// The unit's `[Service]` settings, key → values in order.
fn unit_settings(path: &Path) -> HashMap<String, Vec<String>> {
    let mut settings: HashMap<String, Vec<String>> = HashMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with('[') || line.is_empty() {
            continue;
        }
        let (key, value) = line.split_once('=').unwrap();
        settings
            .entry(key.to_string())
            .or_default()
            .push(value.to_string());
    }
    settings
}

struct Daemon(Option<Child>);
impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn service_cycle(notify_address: &str, socket: &UnixDatagram, stop_with_exec_stop: bool) {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/sdsfs@.service");
    let settings = unit_settings(&unit);
    assert_eq!(settings["Type"], ["notify"]);
    let dataset = tiny_dataset();
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let _cleanup = Cleanup(mnt.clone());
    let instance = mnt
        .to_str()
        .unwrap()
        .trim_start_matches('/')
        .replace('/', "-");
    // The environment as systemd builds it: Environment= first, EnvironmentFile= overrides.
    let mut env = HashMap::new();
    for assignment in &settings["Environment"] {
        parse_env(assignment, &mut env);
    }
    parse_env(
        &format!(
            "# /etc/sdsfs/{instance}.env\nSDSFS_DATASET={}\nSDSFS_OPTIONS=ro,uid=1234,cache_size=64M\n",
            dataset.path().display()
        ),
        &mut env,
    );
    assert_eq!(
        settings["EnvironmentFile"],
        ["/etc/sdsfs/%i.env"],
        "the test mirrors this file"
    );
    // ExecStartPre (a failure is ignored: "-"), clearing nothing here.
    for pre in &settings["ExecStartPre"] {
        let words = expand(pre.trim_start_matches('-'), &env, &instance, &mnt);
        let _ = Command::new(&words[0]).args(&words[1..]).output().unwrap();
    }
    let words = expand(&settings["ExecStart"][0], &env, &instance, &mnt);
    assert_eq!(words[0], SDSFS);
    let log = dir.path().join("log");
    let child = Command::new(&words[0])
        .args(&words[1..])
        .env("NOTIFY_SOCKET", notify_address)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut daemon = Daemon(Some(child));
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buffer = [0u8; 4096];
    let n = socket.recv(&mut buffer).unwrap_or_else(|e| {
        panic!(
            "no notification: {e}: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    let message = String::from_utf8_lossy(&buffer[..n]).into_owned();
    assert!(message.lines().any(|l| l == "READY=1"), "{message}");
    // READY=1 means mounted: no waiting.
    assert_demo_mount(&mnt);

    let child = daemon.0.as_mut().unwrap();
    if stop_with_exec_stop {
        let words = expand(&settings["ExecStop"][0], &env, &instance, &mnt);
        run(Command::new(&words[0]).args(&words[1..]));
    } else {
        // systemctl stop without ExecStop: KillSignal=SIGTERM.
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the daemon did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    daemon.0 = None;
    assert!(!is_mounted(&mnt));
    if !stop_with_exec_stop {
        let n = socket.recv(&mut buffer).unwrap();
        assert_eq!(&buffer[..n], b"STOPPING=1");
    }
}

#[test]
fn the_systemd_unit_command_line_notifies_ready_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&path).unwrap();
    service_cycle(path.to_str().unwrap(), &socket, false);

    // An abstract socket, as systemd itself uses, stopped by ExecStop.
    use std::os::linux::net::SocketAddrExt;
    let name = format!("sdsfs-test-{}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let socket = UnixDatagram::bind_addr(&address).unwrap();
    service_cycle(&format!("@{name}"), &socket, true);
}
