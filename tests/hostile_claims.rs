//! Claims never drive allocation, and listings stay bounded and interruptible (issue 27,
//! items 3 and 4). Each case starts from a good published dataset (9 records in shards of 3, 2
//! and 4 on two manifest pages) and makes its snapshot claim far more records than its shards
//! hold, consistently (the last page and its shard entry claim the extra records, every
//! `stored_bytes` resealed), so the documents are valid and only the claim is hostile.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::datasets::*;
use common::hostile::*;
use common::mount::{is_mounted, MountGuard};

/// Records the mount can number: ordinals carry 36 bits.
const MOUNTABLE: u64 = 1 << 36;

/// A copy of a 9-record dataset whose snapshot claims `records` records.
fn claiming(records: u64) -> tempfile::TempDir {
    let published = publish_dataset(&[3, 2, 4], 2);
    let dir = copy_tree(published.root(), |_| false);
    let extra = records - 9;
    let snapshot_path = dir.path().join(snapshot_rel(dir.path()));
    let page_path = dir.path().join(page_rel(dir.path(), 1));
    let mut page = read_json(&page_path);
    page["record_count"] = (as_u64(&page["record_count"]) + extra).into();
    let entry = &mut page["shards"][0]["record_count"];
    *entry = (as_u64(entry) + extra).into();
    write_json(&page_path, &page);
    let mut snapshot = read_json(&snapshot_path);
    let reference = &mut snapshot["manifests"][1]["record_count"];
    *reference = (as_u64(reference) + extra).into();
    snapshot["record_count"] = records.into();
    write_json(&snapshot_path, &snapshot);
    reseal(dir.path());
    dir
}

/// `sdsfs mount -f` of `dir`: must exit by itself (not by a signal) without mounting.
fn refused_mount(dir: &Path) -> String {
    let mnt = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_sdsfs"))
        .args(["mount", "-f"])
        .arg(dir)
        .arg(mnt.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!is_mounted(mnt.path()));
    assert!(
        output.status.code().is_some_and(|code| code != 0),
        "the mount must exit with an error, not be killed by a signal: {:?}",
        output.status
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_record_count_past_what_inodes_can_number_is_refused_naming_the_snapshot_and_key() {
    for records in [1_000_000_000_000_000, MOUNTABLE + 1] {
        let dir = claiming(records);
        let stderr = refused_mount(dir.path());
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        for needle in [
            "snapshot.json",
            "record_count",
            &records.to_string(),
            &MOUNTABLE.to_string(),
        ] {
            assert!(stderr.contains(needle), "{needle:?} missing from {stderr}");
        }
    }
}

/// The inode of every entry a listing of `dir` gives from position `offset` on (positions
/// count `.` and `..`), read with `seekdir`, which hands the offset to the filesystem.
fn listed_from(dir: &Path, offset: i64) -> Vec<(String, u64)> {
    use std::ffi::{CStr, CString};
    use std::os::unix::ffi::OsStrExt;
    let path = CString::new(dir.as_os_str().as_bytes()).unwrap();
    let mut out = Vec::new();
    // SAFETY: a valid C path; the stream is used only while open and closed once.
    unsafe {
        let stream = libc::opendir(path.as_ptr());
        assert!(!stream.is_null(), "opendir {}", dir.display());
        libc::seekdir(stream, offset);
        loop {
            let entry = libc::readdir(stream);
            if entry.is_null() {
                break;
            }
            let name = CStr::from_ptr((*entry).d_name.as_ptr());
            out.push((name.to_string_lossy().into_owned(), (*entry).d_ino));
        }
        libc::closedir(stream);
    }
    out
}

#[test]
fn the_largest_numberable_dataset_mounts_and_its_last_ordinals_have_their_own_inodes() {
    use std::os::unix::fs::MetadataExt;
    let dir = claiming(MOUNTABLE);
    let mount = MountGuard::mount(dir.path(), &[]);
    let records = mount.path("records");
    let last = MOUNTABLE - 1;
    let name = |ordinal: u64| format!("{ordinal:011}");
    // The listing's last two entries, reached by offset without listing the 2^36 before them.
    let tail = listed_from(&records, (MOUNTABLE + 2 - 2) as i64);
    assert_eq!(
        tail.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        vec![name(last - 1), name(last)]
    );
    let first = std::fs::metadata(records.join(name(0))).unwrap().ino();
    let mut seen = std::collections::BTreeSet::from([first]);
    for (entry, ino) in &tail {
        let stat = std::fs::metadata(records.join(entry)).unwrap().ino();
        assert_eq!(stat, *ino, "{entry}: the listing and stat disagree");
        assert!(
            seen.insert(stat),
            "{entry} shares inode {stat} with another record"
        );
    }
    assert!(std::fs::metadata(records.join(name(MOUNTABLE))).is_err());
    // Ordinal 9 and up are claimed but not in the shard: their files fail, the mount stays up.
    assert!(std::fs::read(records.join(name(last)).join("record.json")).is_err());
    assert!(std::fs::read(records.join(name(0)).join("record.json")).is_ok());
}

#[test]
fn by_id_of_ten_billion_claimed_records_fails_at_once_with_one_line_naming_the_count() {
    let dir = claiming(10_000_000_000);
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "64M"]);
    for listing in ["by-id", "by-scene"] {
        let started = Instant::now();
        let error = std::fs::read_dir(mount.path(listing))
            .and_then(|entries| entries.collect::<Result<Vec<_>, _>>())
            .expect_err("the index cannot be built within the budget");
        assert_eq!(error.raw_os_error(), Some(libc::EIO), "{listing}: {error}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{listing} took {:?}",
            started.elapsed()
        );
    }
    assert!(
        std::fs::read(mount.path("dataset.json")).is_ok(),
        "the mount is up"
    );
    let log = mount.log_text();
    let refusals: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("by-id/ and by-scene/ unavailable"))
        .collect();
    assert_eq!(refusals.len(), 1, "one line for the refusal: {log}");
    for needle in [
        "snapshot.json",
        "record_count",
        "10,000,000,000",
        "67,108,864",
    ] {
        assert!(
            refusals[0].contains(needle),
            "{needle:?} missing: {}",
            refusals[0]
        );
    }
}

/// Runs `ls -f DIR` with `timeout -s SIGNAL 1`, returning how long it took and its status.
fn ls_under_timeout(signal: &str, dir: &Path) -> (Duration, std::process::ExitStatus) {
    let started = Instant::now();
    let status = Command::new("timeout")
        .args(["-s", signal, "1", "ls", "-f"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    (started.elapsed(), status)
}

#[test]
fn an_ls_waiting_for_a_long_index_build_ends_on_sigint_and_sigterm_and_logs_stay_bounded() {
    // 10^7 claimed records fit the default budget's price (48 bytes each), so the index is
    // built, reading ten million rows that all fail: far longer than the signals take.
    let dir = claiming(10_000_000);
    let mount = MountGuard::mount(dir.path(), &[]);
    for signal in ["INT", "TERM"] {
        let (took, status) = ls_under_timeout(signal, &mount.path("by-id"));
        assert_eq!(
            status.code(),
            Some(124),
            "SIG{signal}: timeout reports the kill"
        );
        assert!(
            took < Duration::from_millis(2500),
            "SIG{signal}: ls took {took:?}"
        );
    }
    assert!(
        std::fs::read(mount.path("dataset.json")).is_ok(),
        "the mount is up"
    );
    std::thread::sleep(Duration::from_secs(2));
    let log = mount.log_text();
    let left_out = log
        .lines()
        .filter(|l| l.contains("left out of by-id/"))
        .count();
    assert!(
        (1..=10).contains(&left_out),
        "row failures are rate-limited: {left_out} lines in {} bytes of log",
        log.len()
    );
    assert!(log.len() < 64 << 10, "log grew to {} bytes", log.len());
}

#[test]
fn columns_of_ten_billion_claimed_records_fail_at_once_and_a_missing_row_leaves_a_readme() {
    let dir = claiming(10_000_000_000);
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "64M"]);
    let started = Instant::now();
    let error = std::fs::read_dir(mount.path("columns"))
        .and_then(|entries| entries.collect::<Result<Vec<_>, _>>())
        .expect_err("the index cannot be held within the budget");
    assert_eq!(error.raw_os_error(), Some(libc::EIO), "{error}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(std::fs::read(mount.path("dataset.json")).is_ok());
    let log = mount.log_text();
    let refusals: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("columns/ unavailable"))
        .collect();
    assert_eq!(refusals.len(), 1, "one line for the refusal: {log}");
    for needle in ["snapshot.json", "record_count", "10,000,000,000"] {
        assert!(refusals[0].contains(needle), "{needle:?}: {}", refusals[0]);
    }
    drop(mount);

    // Ten million claimed: the index is priced within the default budget, and record 9, the
    // first the shards do not hold, ends the build: README.txt alone, naming it.
    let dir = claiming(10_000_000);
    let mount = MountGuard::mount(dir.path(), &[]);
    let listed: Vec<String> = std::fs::read_dir(mount.path("columns"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(listed, ["README.txt"]);
    let readme = std::fs::read_to_string(mount.path("columns/README.txt")).unwrap();
    assert!(
        readme.contains("No column is shown: record 9's metadata row cannot be read"),
        "{readme}"
    );
}

/// Riegeli's block size: a 24-byte block header starts every 64 KiB of a shard.
const BLOCK: u64 = 1 << 16;

/// Edits the header of the chunk at `offset` of the ArrayRecord file `path` with `edit` and
/// recomputes its header hash (a chunk header is 40 bytes: the hash of the other 32, data
/// size, data hash, type and record count, decoded size), so the edit is the only defect.
fn edit_chunk_header(path: &Path, offset: u64, edit: impl FnOnce(&mut [u8])) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = if offset % BLOCK == 0 {
        offset + 24
    } else {
        offset
    };
    assert!(
        at % BLOCK + 40 <= BLOCK,
        "the header does not cross a block"
    );
    let header = &mut bytes[at as usize..at as usize + 40];
    edit(header);
    let hash = sdsfs::arrayrecord::riegeli_hash(&header[8..40]);
    header[..8].copy_from_slice(&hash.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// A copy of a dataset of shards of 3, 2 and 4 records whose second data shard's footer
/// header (the chunk holding its index) is edited with `edit`; the shard's path.
fn with_footer_edited(edit: impl FnOnce(&mut [u8])) -> (Published, tempfile::TempDir, String) {
    let published = publish_dataset(&[3, 2, 4], 2);
    let dir = copy_tree(published.root(), |_| false);
    let page = read_json(&dir.path().join(page_rel(dir.path(), 0)));
    let shard_rel = page["shards"][1]["data"]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let shard = dir.path().join(&shard_rel);
    let footer = sdsfs::arrayrecord::ArrayRecordReader::open(
        std::fs::File::open(&shard).unwrap(),
        shard_rel.clone(),
    )
    .unwrap()
    .footer_offset();
    edit_chunk_header(&shard, footer, edit);
    (published, dir, shard_rel)
}

/// Mounts `dir` under a 16 MiB budget: records 3 and 4 (the edited shard's) answer EIO, each
/// failed read with a line naming the shard and `claim`, every other record is exact, peak
/// RSS stays within the budget + 64 MiB; `sds verify` exits 1 naming the shard.
fn assert_shard_refused(published: &Published, dir: &Path, shard_rel: &str, claim: &str) {
    let budget = 16u64 << 20;
    let mount = MountGuard::mount(dir, &["--cache-size", "16M"]);
    let good = published.open();
    for ordinal in 0..good.len() {
        let iq = std::fs::read(mount.path(&format!("records/{ordinal}/fields/iq.raw")));
        if (3..5).contains(&ordinal) {
            assert_eq!(
                iq.unwrap_err().raw_os_error(),
                Some(libc::EIO),
                "record {ordinal}"
            );
        } else {
            let want = good.read_record(ordinal).unwrap().fields["iq"]
                .data
                .to_vec();
            assert_eq!(iq.unwrap(), want, "record {ordinal}");
        }
    }
    assert!(
        std::fs::read(mount.path("dataset.json")).is_ok(),
        "the mount is up"
    );
    let peak = common::mount::peak_rss(mount.pid());
    assert!(
        peak > 0 && peak <= budget + (64 << 20),
        "peak RSS {} MiB",
        peak >> 20
    );
    let log = mount.log_text();
    let eio: Vec<&str> = log.lines().filter(|l| l.contains("EIO")).collect();
    for ordinal in [3, 4] {
        let record = format!("record {ordinal}: ");
        assert!(eio.iter().any(|l| l.contains(&record)), "{record}: {log}");
    }
    for line in eio {
        assert!(line.contains(shard_rel) && line.contains(claim), "{line}");
    }
    let verify = common::cli::sds(&["verify", dir.to_str().unwrap()]);
    let report = String::from_utf8_lossy(&[verify.stdout, verify.stderr].concat()).into_owned();
    assert_eq!(verify.status.code(), Some(1), "{report}");
    assert!(report.contains(shard_rel), "{report}");
}

#[test]
fn a_shard_whose_footer_claims_to_decode_to_a_terabyte_is_refused_without_decoding_it() {
    let (published, dir, shard) = with_footer_edited(|header| {
        header[32..40].copy_from_slice(&(1u64 << 40).to_le_bytes());
    });
    assert_shard_refused(
        &published,
        dir.path(),
        &shard,
        "decoded_data_size 1099511627776",
    );
}

#[test]
fn a_shard_whose_footer_claims_a_trillion_index_entries_is_refused() {
    // The footer chunk holds one record per index entry (and its metadata): claim 10^12.
    let (published, dir, shard) = with_footer_edited(|header| {
        let chunk_type = header[24];
        let type_and_count = u64::from(chunk_type) | (1_000_000_000_000u64 << 8);
        header[24..32].copy_from_slice(&type_and_count.to_le_bytes());
    });
    assert_shard_refused(&published, dir.path(), &shard, "1000000000000 records");
}
