//! Bad-input corpus: hostile datasets built programmatically from a good one, one case per rule
//! of `docs/FORMAT.md` (sections 4, 8 and 9, the rules of the `signal-dataset` 0.4.0 reader)
//! and of `docs/MOUNT.md` "Errors a user sees". What the library opens is opened: a case is
//! hostile only if the library refuses it too. Each case asserts where the failure surfaces:
//! - `sdsfs mount -f` refused before mounting: nonzero exit and one stderr line naming the
//!   document and the rule;
//! - or EIO on exactly the affected records' files of a real mount, every other record's files
//!   byte-identical to what the library reads from a pristine copy, the mount still up;
//! - and `sds verify` naming the defect.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::datasets::*;
use common::hostile::*;
use common::library::assert_records_read_as_library;
use common::mount::{force_unmount, is_mounted, peak_rss, MountGuard};
use sdsfs::arrayrecord::{riegeli_hash, write_records, ArrayRecordReader, WriterOptions};
use sdsfs::dataset::{Dataset, OpenOptions};
use sdsfs::format::limits::RecordLimits;
use sdsfs::format::path::RelPath;
use sdsfs::format::record::{decode, parse_layout};
use sdsfs::storage::{ObjectReader, ObjectStore};

const BAD_PATHS: [&str; 4] = ["../x", "/etc/passwd", "objects//data", "objects\\data\\x"];

/// Relative paths the library's `safe_relative_path` refuses (a `..` segment, a backslash, NUL,
/// `#`, `?`); absolute locations are valid references (reference views) and tested apart.
const UNSAFE_RELATIVE_PATHS: [&str; 6] = [
    "../x",
    "manifests/../root.json",
    "objects\\data\\x",
    "objects/x\u{0}y",
    "objects/x#y",
    "objects/x?y",
];

/// 9 records in shards of 3, 2 and 4; two shards per page: page 0 holds ordinals 0..5, page 1
/// (one shard, the third) holds 5..9.
fn pristine() -> Published {
    publish_dataset(&[3, 2, 4], 2)
}

fn damaged_copy(published: &Published) -> tempfile::TempDir {
    copy_tree(published.root(), |_| false)
}

/// The data (or metadata) shard path of the third shard (ordinals 5..9).
fn last_shard(dir: &Path, kind: &str) -> String {
    read_json(&dir.join(page_rel(dir, 1)))["shards"][0][kind]["path"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Edits page 1's only shard entry and reseals the sizes above it.
fn edit_last_entry(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let page_path = dir.join(page_rel(dir, 1));
    let mut page = read_json(&page_path);
    edit(&mut page["shards"][0]);
    write_json(&page_path, &page);
    reseal(dir);
}

/// `sdsfs mount -f`: must exit nonzero without mounting; returns its stderr.
fn mount_refused(dir: &Path) -> String {
    let mnt = tempfile::tempdir().unwrap();
    let mountpoint = mnt.path().join("m");
    std::fs::create_dir(&mountpoint).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sdsfs"))
        .args(["mount", "-f"])
        .arg(dir)
        .arg(&mountpoint)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if Instant::now() > deadline || is_mounted(&mountpoint) {
            let _ = child.kill();
            let _ = child.wait();
            force_unmount(&mountpoint);
            panic!("sdsfs mounted (or hung on) a dataset it must refuse");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    assert!(!output.status.success());
    assert!(!is_mounted(&mountpoint));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
    stderr
}

fn assert_refused(dir: &Path, needles: &[&str]) {
    let stderr = mount_refused(dir);
    for needle in needles {
        assert!(
            stderr.to_lowercase().contains(&needle.to_lowercase()),
            "{needle:?} not in {stderr}"
        );
    }
    let out = sds_verify(dir);
    assert_eq!(out.0, Some(1), "{}", out.1);
}

/// `sds verify DIR`: exit status and stdout.
fn sds_verify(dir: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sds"))
        .arg("verify")
        .arg(dir)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn assert_verify_names(dir: &Path, needles: &[&str]) {
    let (code, stdout) = sds_verify(dir);
    assert_eq!(code, Some(1), "{stdout}");
    for needle in needles {
        assert!(stdout.contains(needle), "{needle:?} not in {stdout}");
    }
}

/// Reading `path` fails with `errno`.
fn assert_fails(path: &Path, errno: i32) {
    match std::fs::read(path) {
        Ok(bytes) => panic!(
            "{} read {} bytes, expected errno {errno}",
            path.display(),
            bytes.len()
        ),
        Err(e) => assert_eq!(e.raw_os_error(), Some(errno), "{}: {e}", path.display()),
    }
}

/// Mounts `dir`; the `.raw` files of `affected` ordinals fail with EIO, every other record is
/// exactly the pristine library's; the mount stays up. Returns the mount for more checks.
fn assert_mount_eio(dir: &Path, pristine: &Published, affected: &[u64]) -> MountGuard {
    assert_mount_fails(dir, pristine, affected, libc::EIO)
}

/// [`assert_mount_eio`] with `errno` for the affected records.
fn assert_mount_fails(
    dir: &Path,
    pristine: &Published,
    affected: &[u64],
    errno: i32,
) -> MountGuard {
    let mount = MountGuard::mount(dir, &["--cache-size", "1M"]);
    assert_records_fail(&mount, pristine, affected, errno);
    mount
}

/// [`assert_mount_eio`] on a mount already made (with other options).
fn assert_records_eio(mount: &MountGuard, pristine: &Published, affected: &[u64]) {
    assert_records_fail(mount, pristine, affected, libc::EIO)
}

/// [`assert_records_eio`] with `errno` for the affected records.
fn assert_records_fail(mount: &MountGuard, pristine: &Published, affected: &[u64], errno: i32) {
    let count = pristine.open().len();
    for &ordinal in affected {
        let record_dir = mount.path(&format!("records/{ordinal}"));
        assert_fails(&record_dir.join("fields/iq.raw"), errno);
        assert_fails(&record_dir.join("fields/label.npy"), errno);
    }
    let unaffected: Vec<u64> = (0..count).filter(|o| !affected.contains(o)).collect();
    assert_records_read_as_library(pristine.root(), &mount.mountpoint, &unaffected);
    assert_mount_up(mount);
}

/// `sds verify --no-absolute-references DIR` fails naming `location` as refused.
fn assert_verify_refuses_absolute(dir: &Path, location: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_sds"))
        .args(["verify", "--no-absolute-references"])
        .arg(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(location), "{location} not in {text}");
    assert!(text.contains("absolute reference refused"), "{text}");
}

fn assert_mount_up(mount: &MountGuard) {
    assert!(std::fs::metadata(&mount.mountpoint).unwrap().is_dir());
    assert!(!std::fs::read(mount.path("dataset.json"))
        .unwrap()
        .is_empty());
    assert_eq!(std::fs::read_dir(mount.path("records")).unwrap().count(), 9);
}

// ---------------------------------------------------------------------------------------------
// Refused at mount time: root.json and snapshot.

#[test]
fn snapshot_ref_traversal_is_refused_naming_root_json() {
    let published = pristine();
    for bad in BAD_PATHS {
        let dir = damaged_copy(&published);
        let root_path = dir.path().join("root.json");
        let mut root = read_json(&root_path);
        root["snapshot"]["path"] = bad.into();
        write_json(&root_path, &root);
        assert_refused(dir.path(), &["root.json", "path"]);
    }
}

#[test]
fn manifest_ref_traversal_is_refused_naming_the_snapshot() {
    // The library checks a relative manifest path when it reads the snapshot, so an unsafe
    // one refuses the whole dataset; this is a snapshot defect, not a page defect.
    let published = pristine();
    for bad in UNSAFE_RELATIVE_PATHS {
        let dir = damaged_copy(&published);
        let snap_path = dir.path().join(snapshot_rel(dir.path()));
        let mut snap = read_json(&snap_path);
        snap["manifests"][1]["object"]["path"] = bad.into();
        write_json(&snap_path, &snap);
        reseal(dir.path());
        assert_refused(dir.path(), &["snapshot", "path"]);
    }
}

/// Points the snapshot's second manifest reference at `location` (and reseals).
fn absolute_manifest_reference(published: &Published, location: &str) -> tempfile::TempDir {
    let dir = damaged_copy(published);
    edit_snapshot(dir.path(), |s| {
        s["manifests"][1]["object"]["path"] = location.into()
    });
    dir
}

#[test]
fn absolute_manifest_reference_gives_eio_on_that_page_or_is_refused_when_told() {
    // An absolute path is a valid reference shape, so the snapshot is sound and the dataset
    // opens (as in the library); but only shard references may reach outside the root, so the
    // page is never read: its records fail, with or without absolute references turned off.
    let published = pristine();
    for location in ["/etc/passwd", "file:///etc/passwd"] {
        for options in [&[][..], &["-o", "no_absolute_references"][..]] {
            let dir = absolute_manifest_reference(&published, location);
            let mount = MountGuard::mount(dir.path(), options);
            assert_records_eio(&mount, &published, &[5, 6, 7, 8]);
            let log = mount.log_text();
            assert!(log.contains(location), "{location} not in the log: {log}");
            assert!(
                log.contains("must be relative to the dataset root"),
                "{log}"
            );
            drop(mount);
            assert_verify_names(dir.path(), &[location, "must be relative"]);
        }
    }
}

#[test]
fn absolute_manifest_reference_to_a_valid_page_outside_a_local_root_is_not_followed() {
    // Absolute locations are the reference views' pointers to another dataset's *shards*
    // (FORMAT.md section 6, MOUNT.md "Reference views and trust"). A manifest page is read
    // through the dataset's own store, which the library confines to a local root: 0.4.0
    // opens this dataset and fails page 1's records with "path ... is outside local backend
    // root", even though the page outside is byte-identical to the real one.
    let published = pristine();
    let outside = tempfile::tempdir().unwrap();
    let dir = damaged_copy(&published);
    let page = outside.path().join("page.json");
    std::fs::copy(dir.path().join(page_rel(dir.path(), 1)), &page).unwrap();
    let location = page.to_str().unwrap().to_string();
    edit_snapshot(dir.path(), |s| {
        s["manifests"][1]["object"]["path"] = location.as_str().into()
    });
    let mount = assert_mount_eio(dir.path(), &published, &[5, 6, 7, 8]);
    assert!(mount.log_text().contains(&location), "{}", mount.log_text());
    drop(mount);
    assert_verify_names(dir.path(), &[&location]);
}

#[test]
fn root_json_symlink_out_of_the_root_is_refused() {
    let published = pristine();
    let dir = damaged_copy(&published);
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("root.json");
    std::fs::rename(dir.path().join("root.json"), &target).unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("root.json")).unwrap();
    assert_refused(dir.path(), &["root.json", "symbolic link"]);
}

#[test]
fn a_70_mib_root_json_is_refused_without_being_read_whole() {
    let published = pristine();
    let dir = damaged_copy(&published);
    let root_path = dir.path().join("root.json");
    let mut text = std::fs::read_to_string(&root_path).unwrap();
    let pad = format!("\"pad\": \"{}\"", "x".repeat(70 << 20));
    text = text.replacen("\"metadata\": {", &format!("\"metadata\": {{{pad},"), 1);
    std::fs::write(&root_path, &text).unwrap();
    drop(text);
    assert!(std::fs::metadata(&root_path).unwrap().len() > 70 << 20);

    // The library asks for at most the limit and never reads the object whole.
    let counting = Arc::new(CountingStore::new(local_store(dir.path())));
    let started = Instant::now();
    let Err(error) = Dataset::open(counting.clone(), OpenOptions::default()) else {
        panic!("a 70 MiB root.json must be refused");
    };
    let elapsed = started.elapsed();
    let message = error.to_string();
    assert!(message.contains("root.json"), "{message}");
    assert!(
        message.contains("64 MiB") || message.contains("limit") || message.contains("67108864"),
        "{message}"
    );
    let calls = counting.calls();
    assert!(
        calls.iter().all(|c| c.op != "read" && c.op != "read_range"),
        "{calls:?}"
    );
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert_refused(dir.path(), &["root.json"]);
}

#[test]
fn json_nested_10000_deep_is_refused() {
    let published = pristine();
    let dir = damaged_copy(&published);
    let root_path = dir.path().join("root.json");
    let text = std::fs::read_to_string(&root_path).unwrap();
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let text = text.replacen(
        "\"metadata\": {",
        &format!("\"metadata\": {{\"deep\": {deep},"),
        1,
    );
    std::fs::write(&root_path, text).unwrap();
    assert_refused(dir.path(), &["root.json", "nesting deeper than the limit"]);
}

#[test]
fn min_reader_version_too_new_or_unparseable_is_refused() {
    let published = pristine();
    let set_version = |version: Option<serde_json::Value>| {
        let dir = damaged_copy(&published);
        let root_path = dir.path().join("root.json");
        let mut root = read_json(&root_path);
        match version {
            Some(version) => root["min_reader_version"] = version,
            None => {
                root.as_object_mut().unwrap().remove("min_reader_version");
            }
        }
        write_json(&root_path, &root);
        dir
    };
    // Newer than this reader (0.4.0), compared as the library compares (leading digits of each
    // component, padded to three): the message names both versions.
    for version in ["0.5", "1", "0.4.1", "0.4.0.1", "0.10"] {
        let dir = set_version(Some(version.into()));
        assert_refused(dir.path(), &["root.json", version, "0.4.0"]);
    }
    // Unreadable (no leading digits in the first component) and not a string.
    for version in ["abc", "", "v0.4", ".4"] {
        let dir = set_version(Some(version.into()));
        assert_refused(dir.path(), &["root.json", "min_reader_version"]);
    }
    for version in [
        serde_json::json!(4),
        serde_json::json!(0.5),
        serde_json::json!(true),
        serde_json::json!(["0.3.0"]),
        serde_json::json!({"release": "0.3.0"}),
    ] {
        let dir = set_version(Some(version));
        assert_refused(dir.path(), &["root.json", "min_reader_version"]);
    }
    // Not newer than 0.4.0 as the library reads it ("0.3" is "0.3.0", pre-release and local
    // segments are ignored), or absent (releases before 0.3.0), or null: mounts and reads.
    for version in [
        Some(serde_json::json!("0.3")),
        Some(serde_json::json!("0.2.0")),
        Some(serde_json::json!("0.4")),
        Some(serde_json::json!("0.4.0")),
        Some(serde_json::json!("0.4.0rc1")),
        Some(serde_json::json!("0.4.0+local")),
        Some(serde_json::Value::Null),
        None,
    ] {
        let dir = set_version(version.clone());
        let mount = MountGuard::mount(dir.path(), &[]);
        assert_mount_up(&mount);
        assert_records_read_as_library(published.root(), &mount.mountpoint, &[8]);
    }
}

#[test]
fn unknown_formats_and_layouts_are_refused() {
    let published = pristine();
    let root_edits: Vec<(&str, serde_json::Value, &[&str])> = vec![
        (
            "format",
            "signal-dataset.other".into(),
            &["root.json", "format"],
        ),
        (
            "format",
            "signal-dataset.snapshot".into(),
            &["root.json", "format"],
        ),
        (
            "layout_version",
            "0.2".into(),
            &["root.json", "layout_version"],
        ),
        (
            "layout_version",
            0.1.into(),
            &["root.json", "layout_version"],
        ),
        (
            "record_codec",
            serde_json::json!({"name": "pickle"}),
            &["root.json", "record codec"],
        ),
        (
            "record_codec",
            serde_json::json!({"name": "safetensors", "level": 1}),
            &["root.json", "record codec"],
        ),
        (
            "record_codec",
            "safetensors".into(),
            &["root.json", "record codec"],
        ),
        (
            "shard_format",
            serde_json::json!({"name": "tfrecord"}),
            &["root.json", "shard format"],
        ),
        (
            "shard_format",
            serde_json::json!({}),
            &["root.json", "shard format"],
        ),
    ];
    for (key, value, needles) in root_edits {
        let dir = damaged_copy(&published);
        edit_doc(dir.path(), "root.json", |r| r[key] = value.clone());
        assert_refused(dir.path(), needles);
    }
    for key in ["record_codec", "shard_format"] {
        let dir = damaged_copy(&published);
        edit_doc(dir.path(), "root.json", |r| {
            r.as_object_mut().unwrap().remove(key);
        });
        assert_refused(dir.path(), &["root.json", key]);
    }

    let snapshot_edits: Vec<(&str, serde_json::Value)> = vec![
        ("format", "signal-dataset.other".into()),
        ("format", "signal-dataset.manifest".into()),
        ("layout_version", "0.2".into()),
    ];
    for (key, value) in snapshot_edits {
        let dir = damaged_copy(&published);
        edit_snapshot(dir.path(), |s| s[key] = value.clone());
        assert_refused(dir.path(), &["snapshot", key]);
    }
}

// ---------------------------------------------------------------------------------------------
// Lazy defects: EIO on exactly the affected records.

#[test]
fn shard_ref_traversal_gives_eio_on_that_page_only() {
    // An unsafe relative shard path makes its page invalid (the library refuses the page when it
    // reads it): EIO on that page's records, the mount up, `sds verify` naming the page.
    // `objects//data` is normalized by the library to a directory, which fails the same way.
    let published = pristine();
    for kind in ["data", "metadata"] {
        for bad in UNSAFE_RELATIVE_PATHS.iter().chain(&["objects//data"]) {
            let dir = damaged_copy(&published);
            edit_last_entry(dir.path(), |entry| entry[kind]["path"] = (*bad).into());
            let mount = assert_mount_eio(dir.path(), &published, &[5, 6, 7, 8]);
            drop(mount);
            // The unsafe paths make the page invalid; the normalized one names a directory,
            // reported as the object it is.
            let named = if *bad == "objects//data" {
                "objects/data".to_string()
            } else {
                page_rel(dir.path(), 1)
            };
            assert_verify_names(dir.path(), &[&named]);
        }
    }
}

#[test]
fn absolute_shard_reference_is_followed_and_fails_as_a_corrupt_shard_or_is_refused_when_told() {
    let published = pristine();
    for kind in ["data", "metadata"] {
        let location = "/etc/passwd";
        let dir = damaged_copy(&published);
        edit_last_entry(dir.path(), |entry| entry[kind]["path"] = location.into());

        // Followed by default (a reference view's pointer): `/etc/passwd` is read as a shard
        // and is not an ArrayRecord file, so the page's records fail with EIO, the rest read.
        let mount = assert_mount_eio(dir.path(), &published, &[5, 6, 7, 8]);
        assert!(mount.log_text().contains(location), "{}", mount.log_text());
        drop(mount);
        assert_verify_names(dir.path(), &[location]);

        // `-o no_absolute_references`: refused (EACCES), naming the reference, for the same
        // records.
        let mount = MountGuard::mount(dir.path(), &["-o", "no_absolute_references"]);
        assert_records_fail(&mount, &published, &[5, 6, 7, 8], libc::EACCES);
        let log = mount.log_text();
        assert!(log.contains(location), "{location} not in the log: {log}");
        assert!(log.contains("absolute reference refused"), "{log}");
        drop(mount);
        assert_verify_refuses_absolute(dir.path(), location);
    }
}

#[test]
fn symlinked_shard_and_shard_directory_give_eacces() {
    let published = pristine();
    // A shard file that is a symlink to a copy outside the root.
    let dir = damaged_copy(&published);
    let outside = tempfile::tempdir().unwrap();
    let shard = last_shard(dir.path(), "data");
    let target = outside.path().join("shard.arrayrecord");
    std::fs::rename(dir.path().join(&shard), &target).unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join(&shard)).unwrap();
    let mount = assert_mount_fails(dir.path(), &published, &[5, 6, 7, 8], libc::EACCES);
    assert!(mount.log_text().contains(&shard), "{}", mount.log_text());
    drop(mount);
    assert_verify_names(dir.path(), &[&shard]);

    // A shard directory that is a symlink to a copy outside the root.
    let dir = damaged_copy(&published);
    let shard = last_shard(dir.path(), "data");
    let shard_dir = Path::new(&shard).parent().unwrap().to_path_buf();
    let target = outside.path().join("dir");
    std::fs::rename(dir.path().join(&shard_dir), &target).unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join(&shard_dir)).unwrap();
    let affected: Vec<u64> = shards_under(dir.path(), shard_dir.to_str().unwrap());
    assert!(affected.contains(&5));
    let mount = assert_mount_fails(dir.path(), &published, &affected, libc::EACCES);
    drop(mount);
    assert_verify_names(dir.path(), &[&shard]);
}

/// Ordinals whose data shard lives below `prefix`.
fn shards_under(dir: &Path, prefix: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for index in 0..2 {
        let page = read_json(&dir.join(page_rel(dir, index)));
        for s in page["shards"].as_array().unwrap() {
            if s["data"]["path"].as_str().unwrap().starts_with(prefix) {
                let first = as_u64(&s["first_ordinal"]);
                out.extend(first..first + as_u64(&s["record_count"]));
            }
        }
    }
    out
}

/// Physical records of an ArrayRecord file, rewritten by `edit` and written back in place.
fn rewrite_shard(dir: &Path, rel: &str, edit: impl FnOnce(&mut Vec<Vec<u8>>)) {
    let bytes = bytes::Bytes::from(std::fs::read(dir.join(rel)).unwrap());
    let reader = ArrayRecordReader::open(bytes, rel).unwrap();
    let mut records: Vec<Vec<u8>> = (0..reader.len())
        .map(|i| reader.read(i).unwrap().to_vec())
        .collect();
    edit(&mut records);
    let options = WriterOptions::parse("group_size:1").unwrap();
    let file = write_records(options, records).unwrap();
    std::fs::write(dir.join(rel), file).unwrap();
    reseal(dir);
}

#[test]
fn a_row_that_disagrees_with_its_record_gives_eio_on_that_record() {
    let published = pristine();
    let dir = damaged_copy(&published);
    let meta = last_shard(dir.path(), "metadata");
    rewrite_shard(dir.path(), &meta, |rows| {
        let mut row: serde_json::Value = serde_json::from_slice(&rows[1]).unwrap();
        row["metadata"]["serial"] = 999.into();
        rows[1] = serde_json::to_vec(&row).unwrap();
    });
    let mount = assert_mount_eio(dir.path(), &published, &[6]);
    // The log says what differs (the record's metadata), not only that something does.
    let log = mount.log_text();
    assert!(
        log.contains("record 6")
            && log.contains("metadata row disagrees with its record: metadata differs"),
        "{log}"
    );
    // record.json comes from the row alone, so it stays readable.
    let text = std::fs::read_to_string(mount.path("records/6/record.json")).unwrap();
    assert!(text.contains("999"), "{text}");
    drop(mount);
    assert_verify_names(dir.path(), &["6"]);
}

#[test]
fn a_row_claiming_10_to_the_12_elements_fails_without_allocating() {
    let published = pristine();
    let dir = damaged_copy(&published);
    let meta = last_shard(dir.path(), "metadata");
    let huge: u64 = 1_000_000_000_000;
    rewrite_shard(dir.path(), &meta, |rows| {
        let mut row: serde_json::Value = serde_json::from_slice(&rows[0]).unwrap();
        row["fields"]["iq"]["shape"] = serde_json::json!([huge]);
        row["fields"]["iq"]["axes"][0]["length"] = huge.into();
        rows[0] = serde_json::to_vec(&row).unwrap();
    });
    let mount = assert_mount_eio(dir.path(), &published, &[5]);
    let pid = mount.pid();
    assert!(peak_rss(pid) < 256 << 20, "daemon RSS {}", peak_rss(pid));
    drop(mount);
    assert_verify_names(dir.path(), &["5"]);
}

/// Rebuilds a SafeTensors payload so that the tensor of field `field` claims `elements`
/// elements in the header, and its first axis the same length in the descriptor. The
/// descriptor moves to the front of the data buffer (so it stays readable) and the claimed
/// tensor to the back; the payload keeps only the bytes it had, so the claim is a lie.
fn claim_elements(payload: &[u8], field: &str, elements: u64) -> Vec<u8> {
    let n = u64::from_le_bytes(payload[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&payload[8..8 + n]).unwrap();
    let data = &payload[8 + n..];
    let bytes_of = |key: &str| -> &[u8] {
        let offsets = &header[key]["data_offsets"];
        &data[as_u64(&offsets[0]) as usize..as_u64(&offsets[1]) as usize]
    };
    let mut descriptor: serde_json::Value =
        serde_json::from_slice(bytes_of("__sds_descriptor__")).unwrap();
    let key = descriptor["fields"][field]["tensor"]
        .as_str()
        .unwrap()
        .to_string();
    descriptor["fields"][field]["axes"][0]["length"] = elements.into();
    let descriptor = serde_json::to_vec(&descriptor).unwrap();
    let mut order: Vec<String> = header
        .keys()
        .filter(|k| *k != "__metadata__" && *k != "__sds_descriptor__" && **k != key)
        .cloned()
        .collect();
    order.push(key.clone());
    let mut new_header = header.clone();
    let mut body = descriptor.clone();
    new_header["__sds_descriptor__"]["shape"] = serde_json::json!([descriptor.len()]);
    new_header["__sds_descriptor__"]["data_offsets"] = serde_json::json!([0, descriptor.len()]);
    for name in &order {
        let start = body.len() as u64;
        body.extend_from_slice(bytes_of(name));
        let end = if *name == key {
            let itemsize = match header[name]["dtype"].as_str().unwrap() {
                "C64" | "F64" | "I64" | "U64" => 8,
                "F32" | "I32" | "U32" => 4,
                "F16" | "I16" | "U16" => 2,
                _ => 1,
            };
            new_header[name]["shape"] = serde_json::json!([elements]);
            start + elements * itemsize
        } else {
            body.len() as u64
        };
        new_header[name]["data_offsets"] = serde_json::json!([start, end]);
    }
    let mut header_text = serde_json::to_vec(&new_header).unwrap();
    while header_text.len() % 8 != 0 {
        header_text.push(b' ');
    }
    let mut out = (header_text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&header_text);
    out.extend_from_slice(&body);
    out
}

#[test]
fn a_record_descriptor_claiming_10_to_the_12_elements_fails_without_allocating() {
    let published = pristine();
    let dir = damaged_copy(&published);
    let huge: u64 = 1_000_000_000_000;
    // The data record (ordinal 5) claims a 10^12-element `iq` in its SafeTensors header and
    // descriptor; its metadata row claims the same, so the record and row agree on everything
    // and only the size is hostile.
    let data = last_shard(dir.path(), "data");
    rewrite_shard(dir.path(), &data, |payloads| {
        payloads[0] = claim_elements(&payloads[0], "iq", huge);
    });
    let meta = last_shard(dir.path(), "metadata");
    rewrite_shard(dir.path(), &meta, |rows| {
        let mut row: serde_json::Value = serde_json::from_slice(&rows[0]).unwrap();
        row["fields"]["iq"]["shape"] = serde_json::json!([huge]);
        row["fields"]["iq"]["axes"][0]["length"] = huge.into();
        rows[0] = serde_json::to_vec(&row).unwrap();
    });
    // The data record on its own is refused for its size, not for a framing defect: both the
    // whole-payload decoder and the prefix reader the mount uses stop at the tensor-bytes limit.
    let shard = std::fs::read(dir.path().join(&data)).unwrap();
    let reader = ArrayRecordReader::open(bytes::Bytes::from(shard), &data).unwrap();
    let payload = reader.read(0).unwrap();
    let limits = RecordLimits::default();
    for error in [
        decode(payload.clone(), &limits).unwrap_err(),
        parse_layout(&payload, &limits).unwrap_err(),
    ] {
        let message = error.to_string();
        assert!(
            message.contains("tensor bytes") && message.contains("8000000000000"),
            "{message}"
        );
    }
    // So is its row (the row limit is what the mount meets first).
    let dataset = Dataset::open(local_store(dir.path()), OpenOptions::default()).unwrap();
    let message = dataset.read_record(5).unwrap_err().to_string();
    assert!(message.contains("tensor bytes"), "{message}");
    let mount = assert_mount_eio(dir.path(), &published, &[5]);
    let pid = mount.pid();
    assert!(peak_rss(pid) < 256 << 20, "daemon RSS {}", peak_rss(pid));
    drop(mount);
    assert_verify_names(dir.path(), &["5"]);
}

#[test]
fn truncated_shard_gives_eio_on_its_records() {
    let published = pristine();
    let dir = damaged_copy(&published);
    let shard = last_shard(dir.path(), "data");
    let file = dir.path().join(&shard);
    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let mount = assert_mount_eio(dir.path(), &published, &[5, 6, 7, 8]);
    // Rows are intact, so record.json stays readable.
    assert!(std::fs::read(mount.path("records/5/record.json")).is_ok());
    drop(mount);
    assert_verify_names(dir.path(), &[&shard]);
}

/// Offset of the chunk header of physical record `index` of a shard.
fn chunk_start(dir: &Path, rel: &str, index: u64) -> std::ops::Range<u64> {
    let store: Arc<dyn ObjectStore> = local_store(dir);
    let source = ObjectReader::open(store, RelPath::new(rel).unwrap(), None).unwrap();
    let reader = ArrayRecordReader::open(source, rel).unwrap();
    reader.chunk_span(index).unwrap()
}

#[test]
fn bit_flipped_chunk_gives_eio_on_its_record_only() {
    let published = pristine();
    let dir = damaged_copy(&published);
    let shard = last_shard(dir.path(), "data");
    let span = chunk_start(dir.path(), &shard, 1);
    let file = dir.path().join(&shard);
    let mut bytes = std::fs::read(&file).unwrap();
    let at = (span.start + 40 + (span.end - span.start - 40) / 2) as usize;
    bytes[at] ^= 0x10;
    std::fs::write(&file, bytes).unwrap();
    let mount = assert_mount_eio(dir.path(), &published, &[6]);
    assert!(mount.log_text().contains(&shard), "{}", mount.log_text());
    drop(mount);
    assert_verify_names(dir.path(), &[&shard]);
}

#[test]
fn footer_index_past_the_end_gives_eio_on_its_records() {
    let published = pristine();
    let dir = damaged_copy(&published);
    let shard = last_shard(dir.path(), "data");
    let file = dir.path().join(&shard);
    let mut bytes = std::fs::read(&file).unwrap();
    let len = bytes.len();
    // The postscript chunk is the last 64 KiB block: block header (24), chunk header (40), then
    // the RiegeliPostscript proto whose first field is footer_offset. Point it far past the end
    // and fix the chunk's data hash and header hash, so only the offset is wrong.
    let ps = len - 65536 + 24;
    let data_size = u64::from_le_bytes(bytes[ps + 8..ps + 16].try_into().unwrap()) as usize;
    let data = ps + 40..ps + 40 + data_size;
    // Simple chunk data: compression byte, sizes length, sizes, then the proto (tag 0x08 first).
    let mut proto = bytes[data.clone()].to_vec();
    let tag = (2..proto.len())
        .find(|&i| proto[i] == 0x08)
        .expect("footer_offset field tag");
    // Replace the varint with one of the same length whose value is huge.
    let mut end = tag + 1;
    while proto[end] & 0x80 != 0 {
        end += 1;
    }
    for b in &mut proto[tag + 1..end] {
        *b = 0xff;
    }
    proto[end] = 0x7f;
    bytes[data.clone()].copy_from_slice(&proto);
    let data_hash = riegeli_hash(&bytes[data.clone()]);
    bytes[ps + 16..ps + 24].copy_from_slice(&data_hash.to_le_bytes());
    let header_hash = riegeli_hash(&bytes[ps + 8..ps + 40]);
    bytes[ps..ps + 8].copy_from_slice(&header_hash.to_le_bytes());
    std::fs::write(&file, bytes).unwrap();
    let mount = assert_mount_eio(dir.path(), &published, &[5, 6, 7, 8]);
    drop(mount);
    assert_verify_names(dir.path(), &[&shard]);
}

#[test]
fn zstd_bomb_chunk_gives_eio_without_allocating() {
    let published = pristine();
    let dir = damaged_copy(&published);
    let shard = last_shard(dir.path(), "data");
    let span = chunk_start(dir.path(), &shard, 0);
    let file = dir.path().join(&shard);
    let mut bytes = std::fs::read(&file).unwrap();
    let h = span.start as usize;
    // decoded_data_size of the chunk: 1 TiB, header hash fixed so only the claim is hostile.
    bytes[h + 32..h + 40].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let header_hash = riegeli_hash(&bytes[h + 8..h + 40]);
    bytes[h..h + 8].copy_from_slice(&header_hash.to_le_bytes());
    std::fs::write(&file, bytes).unwrap();
    let mount = assert_mount_eio(dir.path(), &published, &[5]);
    assert!(peak_rss(mount.pid()) < 256 << 20);
    drop(mount);
    assert_verify_names(dir.path(), &[&shard]);
}

#[test]
fn missing_manifest_page_gives_eio_on_its_records() {
    let published = pristine();
    let dir = damaged_copy(&published);
    let page = page_rel(dir.path(), 1);
    std::fs::remove_file(dir.path().join(&page)).unwrap();
    let mount = assert_mount_eio(dir.path(), &published, &[5, 6, 7, 8]);
    drop(mount);
    assert_verify_names(dir.path(), &[&page]);
}

#[test]
fn out_of_range_record_indices_give_eio() {
    let published = pristine();
    let dir = damaged_copy(&published);
    edit_last_entry(dir.path(), |entry| {
        entry["record_indices"] = serde_json::json!([0, 1, 2, 40]);
    });
    let mount = MountGuard::mount(dir.path(), &[]);
    // The entry is invalid as a whole or only its last record: either way ordinal 8 fails
    // and records of the first page are untouched.
    assert_fails(&mount.path("records/8/fields/iq.raw"), libc::EIO);
    assert_records_read_as_library(published.root(), &mount.mountpoint, &[0, 1, 2, 3, 4]);
    assert_mount_up(&mount);
    drop(mount);
    let (code, _) = sds_verify(dir.path());
    assert_eq!(code, Some(1));
}

// ---------------------------------------------------------------------------------------------
// Annotation references.

fn with_annotations(published: &Published) -> tempfile::TempDir {
    use sdsfs::annotations::AnnotationStatus;
    use sdsfs::annotations::{publish_annotations, AnnotationOptions, AnnotationRecord};
    let dir = damaged_copy(published);
    let dataset = Dataset::open(local_store(dir.path()), OpenOptions::default()).unwrap();
    let rows: Vec<AnnotationRecord> = (0..dataset.len())
        .map(|o| {
            let id = dataset.record_meta(o).unwrap().id;
            AnnotationRecord::new(id, o, AnnotationStatus::Success)
        })
        .collect();
    let options = AnnotationOptions {
        records_per_shard: 4,
        ..AnnotationOptions::default()
    };
    publish_annotations(&dataset, "labels", &rows, &Default::default(), &options).unwrap();
    dir
}

/// Writes `revision` at its content address and swings the catalog pointer to it.
fn install_revision(dir: &Path, revision: &serde_json::Value) {
    let mut text = serde_json::to_string_pretty(revision).unwrap();
    text.push('\n');
    let sha = sdsfs::format::documents::ids::sha256_hex(text.as_bytes());
    let rel = format!("annotations/catalogs/{sha}.json");
    std::fs::write(dir.join(&rel), text).unwrap();
    write_json(
        &dir.join("annotations/catalog.json"),
        &serde_json::json!({"revision": {"path": rel}}),
    );
}

fn current_revision(dir: &Path) -> serde_json::Value {
    let catalog = read_json(&dir.join("annotations/catalog.json"));
    read_json(&dir.join(catalog["revision"]["path"].as_str().unwrap()))
}

fn assert_no_sets(dir: &Path, published: &Published) {
    let mount = MountGuard::mount(dir, &["--metadata-ttl", "0"]);
    assert_eq!(
        std::fs::read_dir(mount.path("annotations"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(
        std::fs::read_dir(mount.path("records/0/annotations"))
            .unwrap()
            .count(),
        0
    );
    assert_records_read_as_library(published.root(), &mount.mountpoint, &[0, 8]);
    assert_mount_up(&mount);
}

#[test]
fn annotation_reference_traversal_hides_the_annotations() {
    let published = pristine();
    // Sanity: the set is visible when nothing is broken.
    let dir = with_annotations(&published);
    {
        let mount = MountGuard::mount(dir.path(), &[]);
        assert!(mount.path("annotations/labels/set.json").is_file());
        assert!(mount
            .path("records/3/annotations/labels/annotation.json")
            .is_file());
    }
    for bad in BAD_PATHS {
        // Catalog pointer → revision.
        let dir = with_annotations(&published);
        write_json(
            &dir.path().join("annotations/catalog.json"),
            &serde_json::json!({"revision": {"path": bad}}),
        );
        assert_no_sets(dir.path(), &published);

        // Revision → set root.
        let dir = with_annotations(&published);
        let mut revision = current_revision(dir.path());
        revision["sets"]["labels"]["path"] = bad.into();
        install_revision(dir.path(), &revision);
        assert_no_sets(dir.path(), &published);

        // Set root → object.
        let dir = with_annotations(&published);
        let mut revision = current_revision(dir.path());
        let set_rel = revision["sets"]["labels"]["path"]
            .as_str()
            .unwrap()
            .to_string();
        let mut set_root = read_json(&dir.path().join(&set_rel));
        set_root["shards"][1]["object"]["path"] = bad.into();
        let new_rel = set_rel.replace("root.json", "root2.json");
        write_json(&dir.path().join(&new_rel), &set_root);
        revision["sets"]["labels"]["path"] = new_rel.clone().into();
        revision["sets"]["labels"]["stored_bytes"] = file_len(dir.path(), &new_rel).unwrap().into();
        install_revision(dir.path(), &revision);
        assert_no_sets(dir.path(), &published);
    }
}

#[test]
fn verify_of_the_pristine_dataset_is_clean() {
    let published = pristine();
    let (code, stdout) = sds_verify(published.root());
    assert_eq!(code, Some(0), "{stdout}");
    // The resealing helper itself breaks nothing.
    let dir = damaged_copy(&published);
    reseal(dir.path());
    let (code, stdout) = sds_verify(dir.path());
    assert_eq!(code, Some(0), "{stdout}");
    let _: PathBuf = dir.path().to_path_buf();
}

// ---------------------------------------------------------------------------------------------
// The remaining rules of the control graph (FORMAT.md section 4), one case each, table-driven:
// what breaks, and where it must surface.

/// Edits a JSON document of the copy in place, without resealing sizes above it.
fn edit_doc(dir: &Path, rel: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join(rel);
    let mut doc = read_json(&path);
    edit(&mut doc);
    write_json(&path, &doc);
}

/// Edits the snapshot, then reseals: only the rule the edit breaks is broken.
fn edit_snapshot(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let rel = snapshot_rel(dir);
    edit_doc(dir, &rel, edit);
    reseal(dir);
}

/// Edits page `index` without resealing the entries' own sizes, then fixes only the sizes of
/// the documents above it (the page's object size, root's snapshot size).
fn edit_page_raw(dir: &Path, index: usize, edit: impl FnOnce(&mut serde_json::Value)) {
    let page = page_rel(dir, index);
    edit_doc(dir, &page, edit);
    let page_len = file_len(dir, &page).unwrap();
    let snap = snapshot_rel(dir);
    edit_doc(dir, &snap, |s| {
        s["manifests"][index]["object"]["stored_bytes"] = page_len.into()
    });
    let snap_len = file_len(dir, &snap).unwrap();
    edit_doc(dir, "root.json", |r| {
        r["snapshot"]["stored_bytes"] = snap_len.into()
    });
}

type Damage = fn(&Path);

#[test]
fn control_graph_rules_refuse_the_mount_naming_document_and_rule() {
    let cases: Vec<(&str, Damage, &[&str])> = vec![
        (
            "root.json missing",
            |d| std::fs::remove_file(d.join("root.json")).unwrap(),
            &["root.json"],
        ),
        (
            "snapshot object missing",
            |d| std::fs::remove_file(d.join(snapshot_rel(d))).unwrap(),
            &["snapshot"],
        ),
        (
            "snapshot size differs from its reference",
            |d| {
                edit_doc(d, "root.json", |r| {
                    r["snapshot"]["stored_bytes"] =
                        (as_u64(&r["snapshot"]["stored_bytes"]) + 1).into()
                })
            },
            &["snapshot", "bytes"],
        ),
        (
            "the pre-release dialect: snapshot_id in the root, no codecs",
            |d| {
                edit_doc(d, "root.json", |r| {
                    let r = r.as_object_mut().unwrap();
                    r.remove("record_codec");
                    r.remove("shard_format");
                    r.insert("snapshot_id".into(), "snap-1".into());
                })
            },
            &["root.json", "snapshot_id", "record_codec", "pre-release"],
        ),
        (
            "dataset_id empty",
            |d| edit_doc(d, "root.json", |r| r["dataset_id"] = "".into()),
            &["root.json", "dataset_id"],
        ),
        (
            "dataset_id not a string",
            |d| edit_doc(d, "root.json", |r| r["dataset_id"] = 7.into()),
            &["root.json", "dataset_id"],
        ),
        (
            "dataset_id missing",
            |d| {
                edit_doc(d, "root.json", |r| {
                    r.as_object_mut().unwrap().remove("dataset_id");
                })
            },
            &["root.json", "dataset_id"],
        ),
        (
            "snapshot reference missing",
            |d| {
                edit_doc(d, "root.json", |r| {
                    r.as_object_mut().unwrap().remove("snapshot");
                })
            },
            &["root.json", "snapshot"],
        ),
        (
            "snapshot reference without stored_bytes",
            |d| {
                edit_doc(d, "root.json", |r| {
                    r["snapshot"]
                        .as_object_mut()
                        .unwrap()
                        .remove("stored_bytes");
                })
            },
            &["root.json", "stored_bytes"],
        ),
        (
            "snapshot reference carries a generation on a local store",
            |d| edit_doc(d, "root.json", |r| r["snapshot"]["generation"] = 5.into()),
            &["snapshot", "generation"],
        ),
        (
            "metadata not an object",
            |d| edit_doc(d, "root.json", |r| r["metadata"] = "campaign".into()),
            &["root.json", "metadata"],
        ),
        (
            "duplicate key",
            |d| {
                let text = std::fs::read_to_string(d.join("root.json")).unwrap();
                let doubled = text.replacen("{", "{\"dataset_id\": \"twice\", ", 1);
                std::fs::write(d.join("root.json"), doubled).unwrap();
            },
            &["root.json", "duplicate"],
        ),
        (
            "root is not an object",
            |d| std::fs::write(d.join("root.json"), "[]\n").unwrap(),
            &["root.json", "object"],
        ),
        (
            "layout_version unknown",
            |d| edit_doc(d, "root.json", |r| r["layout_version"] = "9.9".into()),
            &["root.json", "layout_version"],
        ),
        (
            "snapshot_id empty",
            |d| edit_snapshot(d, |s| s["snapshot_id"] = "".into()),
            &["snapshot", "snapshot_id"],
        ),
        (
            "snapshot_id not a string",
            |d| edit_snapshot(d, |s| s["snapshot_id"] = 1.into()),
            &["snapshot", "snapshot_id"],
        ),
        (
            "snapshot_id missing",
            |d| {
                edit_snapshot(d, |s| {
                    s.as_object_mut().unwrap().remove("snapshot_id");
                })
            },
            &["snapshot", "snapshot_id"],
        ),
        (
            "manifests missing",
            |d| {
                let snap = snapshot_rel(d);
                edit_doc(d, &snap, |s| {
                    s.as_object_mut().unwrap().remove("manifests");
                });
                let len = file_len(d, &snap).unwrap();
                edit_doc(d, "root.json", |r| {
                    r["snapshot"]["stored_bytes"] = len.into()
                });
            },
            &["snapshot", "manifests"],
        ),
        (
            "manifests do not tile: gap",
            |d| edit_snapshot(d, |s| s["manifests"][1]["first_ordinal"] = 6.into()),
            &["snapshot", "tile"],
        ),
        (
            "record_count disagrees with the manifests",
            |d| edit_snapshot(d, |s| s["record_count"] = 10.into()),
            &["snapshot", "record_count"],
        ),
        (
            "shard_count disagrees with the manifests",
            |d| edit_snapshot(d, |s| s["shard_count"] = 4.into()),
            &["snapshot", "shard_count"],
        ),
        (
            "stored_bytes disagrees with the manifests",
            |d| {
                let snap = snapshot_rel(d);
                edit_doc(d, &snap, |s| {
                    s["stored_bytes"] = (as_u64(&s["stored_bytes"]) + 1).into()
                });
                let len = file_len(d, &snap).unwrap();
                edit_doc(d, "root.json", |r| {
                    r["snapshot"]["stored_bytes"] = len.into()
                });
            },
            &["snapshot", "stored_bytes"],
        ),
        (
            "negative count",
            |d| edit_snapshot(d, |s| s["manifests"][0]["record_count"] = (-1).into()),
            &["snapshot", "record_count"],
        ),
        (
            "count written as a float",
            |d| edit_snapshot(d, |s| s["record_count"] = 9.0.into()),
            &["snapshot", "record_count"],
        ),
        (
            "count written as a boolean",
            |d| edit_snapshot(d, |s| s["shard_count"] = true.into()),
            &["snapshot", "shard_count"],
        ),
        (
            "count written as a string",
            |d| edit_snapshot(d, |s| s["manifests"][1]["shard_count"] = "1".into()),
            &["snapshot", "shard_count"],
        ),
    ];
    let published = pristine();
    for (name, damage, needles) in cases {
        let dir = damaged_copy(&published);
        damage(dir.path());
        let stderr = mount_refused(dir.path());
        eprint!("{name}: {stderr}");
        for needle in needles {
            assert!(
                stderr.to_lowercase().contains(&needle.to_lowercase()),
                "{name}: {needle:?} not in {stderr}"
            );
        }
        let (code, stdout) = sds_verify(dir.path());
        assert_eq!(code, Some(1), "{name}: sds verify passed: {stdout}");
    }
}

#[test]
fn unknown_keys_of_the_control_graph_are_ignored() {
    // The library ignores unknown keys in roots, snapshots, pages, entries and references, so
    // the old dialect's `snapshot_id` in a root that has the codecs, or a page's `page_id`,
    // are not defects: the dataset mounts and reads as the pristine one.
    let published = pristine();
    let dir = damaged_copy(&published);
    edit_doc(dir.path(), "root.json", |r| {
        r["snapshot_id"] = "another-snapshot".into();
        r["snapshot"]["note"] = "x".into();
    });
    edit_snapshot(dir.path(), |s| s["shard_container"] = "tfrecord".into());
    edit_last_entry(dir.path(), |entry| {
        entry["stored_bytes"] = 1.into();
        entry["data"]["note"] = "x".into();
    });
    edit_page_raw(dir.path(), 1, |p| {
        p["page_id"] = "other-00000001".into();
        p["snapshot_id"] = "another-snapshot".into();
    });
    let mount = assert_mount_eio(dir.path(), &published, &[]);
    drop(mount);
    let (code, stdout) = sds_verify(dir.path());
    assert_eq!(code, Some(0), "{stdout}");
}

#[test]
fn manifest_page_and_shard_rules_give_eio_on_that_page_only() {
    let cases: Vec<(&str, Damage)> = vec![
        ("page format unknown", |d| {
            edit_page_raw(d, 1, |p| p["format"] = "signal-dataset.other".into())
        }),
        ("page layout_version unknown", |d| {
            edit_page_raw(d, 1, |p| p["layout_version"] = "9.9".into())
        }),
        ("page is not an object", |d| {
            edit_page_raw(d, 1, |p| *p = serde_json::json!([]))
        }),
        ("page shards missing", |d| {
            edit_page_raw(d, 1, |p| {
                p.as_object_mut().unwrap().remove("shards");
            })
        }),
        ("page range disagrees with its reference", |d| {
            // Internally consistent (the entry tiles the page), but not the referenced range.
            edit_page_raw(d, 1, |p| {
                p["first_ordinal"] = 6.into();
                p["record_count"] = 3.into();
                p["shards"][0]["first_ordinal"] = 6.into();
                p["shards"][0]["record_count"] = 3.into();
            })
        }),
        (
            "page holds fewer entries than its reference's shard_count",
            |d| {
                // The snapshot's own sums still hold; only page 1 disagrees with its reference.
                edit_snapshot(d, |s| {
                    s["manifests"][1]["shard_count"] = 2.into();
                    s["shard_count"] = 4.into();
                })
            },
        ),
        ("entries' stored_bytes do not sum to the reference's", |d| {
            let snap = snapshot_rel(d);
            edit_doc(d, &snap, |s| {
                let m = &mut s["manifests"][1]["stored_bytes"];
                *m = (as_u64(m) + 1).into();
                s["stored_bytes"] = (as_u64(&s["stored_bytes"]) + 1).into();
            });
            let len = file_len(d, &snap).unwrap();
            edit_doc(d, "root.json", |r| {
                r["snapshot"]["stored_bytes"] = len.into()
            });
        }),
        ("page size differs from its reference", |d| {
            let snap = snapshot_rel(d);
            edit_doc(d, &snap, |s| {
                let size = &mut s["manifests"][1]["object"]["stored_bytes"];
                *size = (as_u64(size) + 1).into();
            });
            let len = file_len(d, &snap).unwrap();
            edit_doc(d, "root.json", |r| {
                r["snapshot"]["stored_bytes"] = len.into()
            });
        }),
        ("shard entries do not tile the page", |d| {
            edit_page_raw(d, 1, |p| p["shards"][0]["first_ordinal"] = 6.into())
        }),
        ("entry record_count written as a float", |d| {
            edit_page_raw(d, 1, |p| p["shards"][0]["record_count"] = 4.0.into())
        }),
        ("entry without its metadata reference", |d| {
            edit_page_raw(d, 1, |p| {
                p["shards"][0].as_object_mut().unwrap().remove("metadata");
            })
        }),
        (
            "entry data reference carries a generation on a local store",
            |d| edit_page_raw(d, 1, |p| p["shards"][0]["data"]["generation"] = 5.into()),
        ),
        ("record_indices of the wrong length", |d| {
            edit_page_raw(d, 1, |p| {
                p["shards"][0]["record_indices"] = serde_json::json!([0, 1])
            })
        }),
        ("record_indices holding a string", |d| {
            edit_page_raw(d, 1, |p| {
                p["shards"][0]["record_indices"] = serde_json::json!([0, 1, 2, "3"])
            })
        }),
        ("record_indices holding a negative index", |d| {
            edit_page_raw(d, 1, |p| {
                p["shards"][0]["record_indices"] = serde_json::json!([0, 1, 2, -3])
            })
        }),
        ("data shard size differs from its reference", |d| {
            let shard = d.join(last_shard(d, "data"));
            let mut bytes = std::fs::read(&shard).unwrap();
            bytes.push(0);
            std::fs::write(&shard, bytes).unwrap();
        }),
        ("metadata shard missing", |d| {
            std::fs::remove_file(d.join(last_shard(d, "metadata"))).unwrap()
        }),
    ];
    let published = pristine();
    for (name, damage) in cases {
        eprintln!("case: {name}");
        let dir = damaged_copy(&published);
        damage(dir.path());
        let mount = assert_mount_eio(dir.path(), &published, &[5, 6, 7, 8]);
        drop(mount);
        let (code, stdout) = sds_verify(dir.path());
        assert_eq!(code, Some(1), "{name}: sds verify passed: {stdout}");
    }
}
