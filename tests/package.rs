//! The Debian package, as an operator uses it: `scripts/package` builds it from this build's
//! programs, `dpkg -i` installs it, the demo dataset mounts through an fstab line with the
//! installed mount(8) helper, the man pages, completions, units and debug symbols are where
//! the system's tools look, and `dpkg -r` removes every file it installed.
//!
//! Installing needs root (CI runs as root): without it the test fails, it never skips.

#[path = "common/cli.rs"]
mod cli;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cli::run;

const SDSFS: &str = env!("CARGO_BIN_EXE_sdsfs");
/// The largest an installed program may be.
const MAX_PROGRAM_BYTES: u64 = 25 << 20;

/// Removes the packages (and unmounts `mount`) on drop, whatever happened.
struct Installed {
    mount: PathBuf,
}

impl Drop for Installed {
    fn drop(&mut self) {
        if is_mounted(&self.mount) {
            let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        }
        let _ = Command::new("dpkg")
            .args(["--purge", "sdsfs-dbgsym", "sdsfs"])
            .output();
    }
}

fn is_mounted(path: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .any(|line| line.split(' ').nth(1) == path.to_str())
}

/// The fstype /proc/self/mounts gives `path`.
fn fstype(path: &Path) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        (fields.get(1).copied() == path.to_str()).then(|| fields[2].to_string())
    })
}

/// The packages `scripts/package` built from this build's programs.
fn build_packages(out: &Path) -> (PathBuf, PathBuf) {
    let bin_dir = Path::new(SDSFS).parent().unwrap();
    let printed = run(
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/package"))
            .arg("--bin-dir")
            .arg(bin_dir)
            .arg("--out")
            .arg(out),
    );
    let paths: Vec<PathBuf> = printed
        .lines()
        .filter(|l| l.ends_with(".deb"))
        .map(PathBuf::from)
        .collect();
    assert_eq!(paths.len(), 2, "{printed}");
    (paths[0].clone(), paths[1].clone())
}

fn build_id(program: &Path) -> String {
    let notes = run(Command::new("readelf").arg("-n").arg(program));
    notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("a build id")
        .to_string()
}

#[test]
fn the_package_installs_mounts_through_fstab_documents_itself_and_removes_cleanly() {
    // SAFETY: geteuid cannot fail.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "installing a package needs root (CI runs the suite as root)"
    );
    // Installed, or removed with its configuration kept: either would be changed by the test.
    let status = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "sdsfs"])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.is_empty() || status.ends_with("not-installed"),
        "an sdsfs package is on this machine ({status}): purge it first (dpkg --purge sdsfs)"
    );
    let work = tempfile::tempdir().unwrap();
    let (deb, dbgsym) = build_packages(work.path());
    assert!(deb
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with(&format!("sdsfs_{}_", env!("CARGO_PKG_VERSION"))));
    let mnt = work.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let _installed = Installed { mount: mnt.clone() };
    run(Command::new("dpkg").arg("-i").arg(&deb).arg(&dbgsym));

    // The programs: stripped, within the size limit, naming their version and commit.
    for program in ["/usr/bin/sdsfs", "/usr/bin/sds"] {
        let size = std::fs::metadata(program).unwrap().len();
        assert!(size <= MAX_PROGRAM_BYTES, "{program}: {size} bytes");
        let version = run(Command::new(program).arg("--version"));
        let ours = run(Command::new(SDSFS).arg("--version"));
        let commit = |text: &str| text.split("(commit ").nth(1).map(str::to_string);
        assert!(
            version.contains(&format!("{} (commit ", env!("CARGO_PKG_VERSION"))),
            "{version}"
        );
        assert_eq!(commit(&version), commit(&ours), "{program}");
        // Its debug information is where gdb and perf look, by build id.
        let id = build_id(Path::new(program));
        let debug = format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]);
        assert!(Path::new(&debug).is_file(), "{debug} missing");
    }

    // The demo dataset, mounted by mount(8) from an fstab line through the installed helper.
    let dataset = work.path().join("demo");
    run(Command::new("/usr/bin/sds").arg("demo").arg(&dataset));
    let fstab = work.path().join("fstab");
    std::fs::write(
        &fstab,
        format!(
            "{} {} fuse.sdsfs ro,cache_size=64M,_netdev 0 0\n",
            dataset.display(),
            mnt.display()
        ),
    )
    .unwrap();
    assert_eq!(
        std::fs::read_link("/sbin/mount.fuse.sdsfs").unwrap(),
        Path::new("/usr/bin/sdsfs")
    );
    run(Command::new("mount").arg("-a").arg("-T").arg(&fstab));
    let mounted_as = fstype(&mnt).unwrap_or_default();
    assert!(mounted_as.starts_with("fuse"), "{mounted_as}");
    assert_eq!(
        std::fs::read(mnt.join("dataset.json")).unwrap(),
        std::fs::read(dataset.join("root.json")).unwrap()
    );
    let status = run(Command::new("/usr/bin/sdsfs")
        .args(["status", "--json"])
        .arg(&mnt));
    let report: serde_json::Value = serde_json::from_str(&status).unwrap();
    let pid = report["pid"].as_u64().expect("the daemon's pid");
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/exe")).unwrap(),
        Path::new("/usr/bin/sdsfs"),
        "the mount runs the installed program"
    );
    run(Command::new("umount").arg(&mnt));
    let deadline = Instant::now() + Duration::from_secs(10);
    while is_mounted(&mnt) {
        assert!(Instant::now() < deadline, "still mounted");
        std::thread::sleep(Duration::from_millis(20));
    }

    // Man pages, completions and units, where the system's tools find them.
    for page in ["sdsfs", "sds", "sds-create"] {
        let found = run(Command::new("man").args(["-w", page]));
        assert_eq!(
            found.trim(),
            format!("/usr/share/man/man1/{page}.1.gz"),
            "man -w {page}"
        );
    }
    for program in ["sdsfs", "sds"] {
        let script = format!(
            "source /usr/share/bash-completion/completions/{program} && complete -p {program}"
        );
        let registered = run(Command::new("bash").args(["-c", &script]));
        assert!(registered.contains(program), "{registered}");
        for path in [
            format!("/usr/share/zsh/vendor-completions/_{program}"),
            format!("/usr/share/fish/vendor_completions.d/{program}.fish"),
        ] {
            assert!(Path::new(&path).is_file(), "{path} missing");
        }
    }
    run(Command::new("systemd-analyze").args([
        "verify",
        "--man=yes",
        "/lib/systemd/system/sdsfs@.service:sdsfs@mnt-ds.service",
        "/usr/share/doc/sdsfs/examples/mnt-ds.mount",
    ]));

    // Removal takes every file the package installed.
    let listed = run(Command::new("dpkg").args(["-L", "sdsfs", "sdsfs-dbgsym"]));
    let files: Vec<&str> = listed
        .lines()
        .filter(|p| {
            // Files and links to files; not directories, nor links to them (/sbin -> usr/sbin).
            let directory = std::fs::metadata(p).is_ok_and(|m| m.is_dir());
            std::fs::symlink_metadata(p).is_ok() && !directory && !p.starts_with("/.")
        })
        .collect();
    assert!(files.len() > 20, "{listed}");
    run(Command::new("dpkg").args(["-r", "sdsfs-dbgsym", "sdsfs"]));
    let left: Vec<&&str> = files
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect();
    assert!(left.is_empty(), "left behind by dpkg -r: {left:?}");
}
