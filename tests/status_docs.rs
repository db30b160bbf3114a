//! `sdsfs status` over the hidden `.sdsfs-status` file, and the generated man pages and
//! completions.

mod common;

use std::process::Command;

use common::mount::MountGuard;
use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::record::{Field, Record};
use sdsfs::storage::LocalStore;

const SDSFS: &str = env!("CARGO_BIN_EXE_sdsfs");

fn dataset(records: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let records: Vec<Record> = (0..records)
        .map(|i| {
            Record::new(format!("r{i}")).with_field(
                "x",
                Field::new(DType::U8, vec![4], vec![i as u8; 4]).unwrap(),
            )
        })
        .collect();
    let receipt = write_shard(&store, records, "w", 0, &ShardOptions::default()).unwrap();
    publish(&store, &[receipt], &PublishOptions::new("st", "s")).unwrap();
    dir
}

fn status(mount: &MountGuard) -> serde_json::Value {
    let output = Command::new(SDSFS)
        .args(["status", "--json"])
        .arg(&mount.mountpoint)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn status_counts_reads_and_stays_unlisted() {
    let ds = dataset(3);
    let mount = MountGuard::mount(ds.path(), &["--cache-size", "16M"]);
    let before = status(&mount);
    assert_eq!(before["dataset"], ds.path().to_str().unwrap());
    assert!(before["snapshot"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(before["records"], 3);
    assert_eq!(before["cache"]["capacity_bytes"], 16 << 20);
    for _ in 0..2 {
        for i in 0..3 {
            let bytes = std::fs::read(mount.path(&format!("records/{i}/fields/x.raw"))).unwrap();
            assert_eq!(bytes, [i as u8; 4]);
        }
    }
    let after = status(&mount);
    let n = |v: &serde_json::Value, k: &str, f: &str| v[k][f].as_u64().unwrap();
    assert!(n(&after, "cache", "misses") >= 3, "{after}");
    assert!(n(&after, "cache", "loaded_bytes") > n(&before, "cache", "loaded_bytes"));
    assert!(n(&after, "requests", "fuse") > n(&before, "requests", "fuse"));
    let local = &after["storage"]["local"];
    assert!(
        local["requests"].as_u64().unwrap()
            > before["storage"]["local"]["requests"].as_u64().unwrap()
    );
    assert!(local["bytes"].as_u64().unwrap() > 0);
    assert_eq!(after["errors"], serde_json::json!({}));
    // Computed files: record.json read twice is rendered once and kept.
    assert_eq!(n(&after, "computed", "renders"), 0, "{after}");
    let record_json = std::fs::read(mount.path("records/1/record.json")).unwrap();
    assert_eq!(
        std::fs::read(mount.path("records/1/record.json")).unwrap(),
        record_json
    );
    let computed = status(&mount);
    assert_eq!(n(&computed, "computed", "renders"), 1, "{computed}");
    assert_eq!(n(&computed, "computed", "kept_files"), 1, "{computed}");
    assert_eq!(
        n(&computed, "computed", "kept_bytes"),
        record_json.len() as u64
    );
    // Hidden: not listed at the root, found by name.
    let names: Vec<String> = std::fs::read_dir(&mount.mountpoint)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.contains("sdsfs-status")),
        "{names:?}"
    );
    // The human form.
    let output = Command::new(SDSFS)
        .arg("status")
        .arg(&mount.mountpoint)
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    for needle in [
        "snapshot",
        "hit rate",
        "storage     local:",
        "computed    1 rendered",
        "errors      none",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    // Not a mount: one clear line.
    let output = Command::new(SDSFS)
        .arg("status")
        .arg(ds.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not an sdsfs mount"));
}

#[test]
fn an_eio_read_shows_under_errors_by_object() {
    let ds = dataset(2);
    std::fs::remove_dir_all(ds.path().join("objects/data")).unwrap();
    let mount = MountGuard::mount(ds.path(), &[]);
    let error = std::fs::read(mount.path("records/0/fields/x.raw")).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EIO));
    let report = status(&mount);
    let errors = report["errors"].as_object().unwrap();
    let (object, entry) = errors
        .iter()
        .find(|(k, _)| k.contains("objects/data/"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(entry["count"].as_u64().unwrap() >= 1, "{object}: {entry}");
    assert!(report["requests"]["eio"].as_u64().unwrap() >= 1);
    assert!(report["storage"]["local"]["errors"].as_u64().unwrap() >= 1);
}

#[test]
fn generated_man_pages_and_completions_cover_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(SDSFS)
        .arg("generate-docs")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).unwrap();
    let sdsfs_man = read("man/man1/sdsfs.1");
    for sub in ["mount", "unmount", "status"] {
        assert!(sdsfs_man.contains(sub), "sdsfs.1 lacks {sub}");
        assert!(dir.path().join(format!("man/man1/sdsfs-{sub}.1")).is_file());
        for file in [
            "completions/sdsfs.bash",
            "completions/_sdsfs",
            "completions/sdsfs.fish",
        ] {
            assert!(read(file).contains(sub), "{file} lacks {sub}");
        }
    }
    assert!(read("man/man1/sdsfs-mount.1").contains("cache\\-size"));
    let sds_man = read("man/man1/sds.1");
    let help = Command::new(env!("CARGO_BIN_EXE_sds"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let subcommands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| *w != "help")
        .collect();
    assert!(subcommands.len() >= 3, "{help}");
    for sub in subcommands {
        assert!(
            sds_man.contains(&sub.replace('-', "\\-")),
            "sds.1 lacks {sub}"
        );
        assert!(
            read("completions/sds.bash").contains(sub),
            "sds.bash lacks {sub}"
        );
    }
    assert!(
        !sdsfs_man.contains("generate\\-docs"),
        "hidden command documented"
    );
}
