//! One memory budget (issue 27, item 1): everything the daemon keeps or decodes is charged to
//! `--cache-size`, and peak RSS (VmHWM, read from `/proc`) stays within the budget plus a fixed
//! 64 MiB, whatever the dataset makes large. The hostile datasets are small on disk (their
//! metadata compresses to almost nothing) and huge decoded.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::datasets::*;
use common::mount::{peak_rss, MountGuard};
use sdsfs::arrayrecord::WriterOptions;
use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
use sdsfs::format::json::Value;
use sdsfs::format::record::Record;

const MIB: u64 = 1 << 20;
/// What the daemon may take beyond its budget.
const OVERHEAD: u64 = 64 * MIB;

/// `records` records, each carrying a `blob_mib` MiB string in its metadata, written
/// `group_size` records to a chunk in one shard.
fn blob_dataset(records: usize, blob_mib: usize, group_size: u32) -> tempfile::TempDir {
    let blob = "x".repeat(blob_mib << 20);
    let all = (0..records).map(|i| {
        Record::new(format!("blob-{i:03}"))
            .with_metadata(obj(&[("blob", Value::from(blob.as_str()))]))
            .with_field("iq", iq_capture(vec![0u8; 64]))
    });
    let writer_options = WriterOptions {
        group_size,
        ..WriterOptions::default()
    };
    let dir = one_shard_dataset(all, writer_options);
    let on_disk: u64 = files_below(dir.path())
        .iter()
        .map(|(_, path)| std::fs::metadata(path).unwrap().len())
        .sum();
    assert!(
        on_disk < 4 * MIB,
        "the dataset is small on disk: {on_disk} bytes"
    );
    dir
}

fn record_json(mount: &MountGuard, ordinal: usize) -> std::io::Result<std::fs::Metadata> {
    std::fs::metadata(mount.path(&format!("records/{ordinal:02}/record.json")))
}

fn assert_within_budget(mount: &MountGuard, budget: u64) -> u64 {
    let peak = peak_rss(mount.pid());
    assert!(peak > 0, "VmHWM read");
    assert!(
        peak <= budget + OVERHEAD,
        "peak RSS {} MiB above the budget of {} MiB + {} MiB",
        peak / MIB,
        budget / MIB,
        OVERHEAD / MIB
    );
    peak
}

#[test]
fn rows_larger_than_the_budget_are_refused_without_being_kept() {
    let dir = blob_dataset(64, 4, 1);
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "1M"]);
    for ordinal in 0..64 {
        let error = record_json(&mount, ordinal).expect_err("a 4 MiB row cannot fit 1 MiB");
        assert_eq!(error.raw_os_error(), Some(libc::EIO), "record {ordinal}");
    }
    assert!(
        std::fs::read(mount.path("dataset.json")).is_ok(),
        "the mount is up"
    );
    let peak = assert_within_budget(&mount, MIB);
    let log = mount.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("EIO"))
        .unwrap_or_else(|| panic!("no EIO line: {log}"));
    for needle in [
        "objects/metadata/",
        "memory budget of 1048576 bytes",
        "--cache-size",
    ] {
        assert!(line.contains(needle), "{needle:?} missing from {line}");
    }
    eprintln!(
        "64 rows of 4 MiB, 1 MiB budget: peak RSS {} MiB",
        peak / MIB
    );
}

#[test]
fn rows_within_the_budget_are_served_and_memory_stays_within_it() {
    let dir = blob_dataset(64, 4, 1);
    let budget = 32 * MIB;
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "32M"]);
    for ordinal in 0..64 {
        let size = record_json(&mount, ordinal).unwrap().len();
        assert!(size > 4 * MIB, "record.json carries the blob: {size} bytes");
    }
    let text = std::fs::read(mount.path("records/63/record.json")).unwrap();
    let parsed: serde_json::Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(
        parsed["metadata"]["blob"].as_str().map(str::len),
        Some(4 << 20)
    );
    let peak = assert_within_budget(&mount, budget);
    eprintln!(
        "64 rows of 4 MiB, 32 MiB budget: peak RSS {} MiB",
        peak / MIB
    );
}

/// `stat`s `records/NN/record.json` for `ordinals` from one thread each, all at once.
fn concurrent_stats(
    mount: &MountGuard,
    ordinals: std::ops::Range<usize>,
) -> Vec<std::io::Result<u64>> {
    let root = Arc::new(mount.path("records"));
    let threads: Vec<_> = ordinals
        .map(|ordinal| {
            let root = root.clone();
            std::thread::spawn(move || {
                std::fs::metadata(Path::new(&*root).join(format!("{ordinal:02}/record.json")))
                    .map(|m| m.len())
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn concurrent_stats_of_rows_in_one_huge_chunk_share_its_decode_within_the_budget() {
    // 64 rows of 4 MiB in one chunk: a 256 MiB decode behind a file of a few KiB.
    let dir = blob_dataset(64, 4, 64);
    let budget = 320 * MIB;
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "320M"]);
    for result in concurrent_stats(&mount, 0..16) {
        assert!(result.unwrap() > 4 * MIB);
    }
    let peak = assert_within_budget(&mount, budget);
    eprintln!(
        "16 concurrent stats in a 256 MiB chunk, 320 MiB budget: peak RSS {} MiB",
        peak / MIB
    );
}

#[test]
fn a_chunk_larger_than_the_budget_is_never_decoded() {
    let dir = blob_dataset(64, 4, 64);
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "64M"]);
    for result in concurrent_stats(&mount, 0..8) {
        assert_eq!(result.unwrap_err().raw_os_error(), Some(libc::EIO));
    }
    let peak = assert_within_budget(&mount, 64 * MIB);
    assert!(
        peak < 100 * MIB,
        "nothing of the chunk was decoded: {} MiB",
        peak / MIB
    );
    let log = mount.log_text();
    assert!(
        log.contains("chunk of record") && log.contains("memory budget of 67108864 bytes"),
        "{log}"
    );
}

/// A tmpfs for the daemon's temporary files (`TMPDIR`), so the bytes they take can be read
/// from the filesystem itself: unnamed temporary files appear in no listing.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=2g", "sdsfs-test-scratch"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "mount a tmpfs");
        Scratch { dir }
    }

    /// Bytes in use on the tmpfs.
    fn used(&self) -> u64 {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(self.dir.path().as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C path and a zeroed statvfs for the call to fill.
        unsafe {
            let mut stat: libc::statvfs = std::mem::zeroed();
            assert_eq!(libc::statvfs(path.as_ptr(), &mut stat), 0);
            (stat.f_blocks - stat.f_bfree) * stat.f_frsize
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Four records of one 256 MiB zero-filled field each: a data shard of a few hundred KiB,
/// compressed with zstd windows of 2^`window_log` bytes.
fn spilling_dataset_with_window(window_log: u32) -> tempfile::TempDir {
    zeros_dataset(4, 256, window_log)
}

/// `records` records of one `mib` MiB zero-filled field each, compressed with zstd windows of
/// 2^`window_log` bytes: a data shard of a few hundred KiB.
fn zeros_dataset(records: usize, mib: usize, window_log: u32) -> tempfile::TempDir {
    let all = (0..records).map(|i| {
        Record::new(format!("wide-{i}")).with_field("iq", iq_capture(vec![0u8; mib << 20]))
    });
    let writer_options = WriterOptions {
        compression: sdsfs::arrayrecord::Compression::Zstd {
            level: 3,
            window_log,
        },
        ..WriterOptions::default()
    };
    one_shard_dataset(all, writer_options)
}

/// `records` written as one shard with `writer_options`, published in a temporary directory.
fn one_shard_dataset(
    records: impl Iterator<Item = Record>,
    writer_options: WriterOptions,
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let options = ShardOptions {
        writer_options,
        ..ShardOptions::default()
    };
    let receipt = write_shard(store.as_ref(), records, "work-000", 0, &options).unwrap();
    publish(
        store.as_ref(),
        &[receipt],
        &PublishOptions::new("hostile", "v1"),
    )
    .unwrap();
    dir
}

/// [`spilling_dataset_with_window`] with the reference writer's window (1 MiB).
fn spilling_dataset() -> tempfile::TempDir {
    spilling_dataset_with_window(20)
}

/// Reads the first 4 KiB of record `ordinal`'s IQ samples while a thread samples the scratch
/// tmpfs; returns the bytes read (or the error) and the most the tmpfs held meanwhile.
fn head_of_field(
    mount: &MountGuard,
    scratch: &Scratch,
    ordinal: usize,
) -> (std::io::Result<Vec<u8>>, u64) {
    use std::io::Read;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let most = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let mut most = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                most = most.max(scratch.used());
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            most.max(scratch.used())
        });
        let path = mount.path(&format!("records/{ordinal}/fields/iq.raw"));
        let read = std::fs::File::open(path).and_then(|file| {
            let mut head = Vec::new();
            file.take(4096).read_to_end(&mut head).map(|_| head)
        });
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (read, sampler.join().unwrap())
    });
    most
}

#[test]
fn a_record_larger_than_the_spill_budget_writes_nothing_to_disk() {
    let dir = spilling_dataset();
    let scratch = Scratch::new();
    let tmpdir = scratch.dir.path().to_str().unwrap().to_string();
    let mount = MountGuard::mount_with_env(
        dir.path().as_os_str(),
        &["--cache-size", "16M", "--spill-size", "64M"],
        &[("TMPDIR", tmpdir.as_str())],
    );
    let (read, most) = head_of_field(&mount, &scratch, 0);
    assert_eq!(read.unwrap_err().raw_os_error(), Some(libc::EIO));
    assert!(most < MIB, "{most} bytes written to the scratch tmpfs");
    let log = mount.log_text();
    assert!(
        log.contains("spill budget of 67108864 bytes") && log.contains("--spill-size"),
        "{log}"
    );
}

#[test]
fn temporary_files_stay_within_the_spill_budget_across_records() {
    let dir = spilling_dataset();
    let scratch = Scratch::new();
    let tmpdir = scratch.dir.path().to_str().unwrap().to_string();
    let budget = 600 * MIB;
    let mount = MountGuard::mount_with_env(
        dir.path().as_os_str(),
        &["--cache-size", "32M", "--spill-size", "600M"],
        &[("TMPDIR", tmpdir.as_str())],
    );
    for ordinal in 0..4 {
        let (read, most) = head_of_field(&mount, &scratch, ordinal);
        assert_eq!(read.unwrap(), vec![0u8; 4096], "record {ordinal}");
        assert!(
            most <= budget,
            "record {ordinal}: {} MiB of temporary files, budget {} MiB",
            most / MIB,
            budget / MIB
        );
    }
    let status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(mount.path(".sdsfs-status")).unwrap()).unwrap();
    assert_eq!(status["spill"]["budget_bytes"], budget);
    assert!(status["spill"]["used_bytes"].as_u64().unwrap() <= budget);
}

#[test]
fn annotation_carriers_are_charged_to_the_budget() {
    use sdsfs::annotations::{publish_annotations, AnnotationRecord, AnnotationStatus};
    use sdsfs::format::dtype::DType;
    use sdsfs::format::record::{Axis, Field};
    // 48 records, each annotated with a 4 MiB tensor (zeros: a few KiB on disk).
    let published = publish_dataset(&[16, 16, 16], 3);
    let dataset = published.open();
    let samples = (4 << 20) / 8;
    let rows: Vec<AnnotationRecord> = (0..dataset.len())
        .map(|o| {
            let id = dataset.record_meta(o).unwrap().id;
            let mut row = AnnotationRecord::new(id, o, AnnotationStatus::Success);
            let field = Field::new(DType::C64, vec![samples], vec![0u8; 4 << 20])
                .unwrap()
                .with_axes(vec![Axis::new("time", samples)]);
            row.fields.insert("mask".into(), field);
            row
        })
        .collect();
    publish_annotations(
        &dataset,
        "masks",
        &rows,
        &Default::default(),
        &Default::default(),
    )
    .unwrap();
    let budget = 24 * MIB;
    let mount = MountGuard::mount(published.root(), &["--cache-size", "24M"]);
    for ordinal in 0..dataset.len() {
        let path = mount.path(&format!(
            "records/{ordinal:02}/annotations/masks/fields/mask.raw"
        ));
        let head = std::fs::read(&path).unwrap();
        assert_eq!(head.len(), 4 << 20, "record {ordinal}");
        assert!(head.iter().all(|&b| b == 0));
    }
    let peak = assert_within_budget(&mount, budget);
    eprintln!(
        "48 annotation carriers of 4 MiB, 24 MiB budget: peak RSS {} MiB",
        peak / MIB
    );
}

#[test]
fn a_decoder_window_larger_than_the_budget_is_never_allocated() {
    // 128 MiB windows: streaming the record would make libzstd allocate one.
    let dir = spilling_dataset_with_window(27);
    let scratch = Scratch::new();
    let tmpdir = scratch.dir.path().to_str().unwrap().to_string();
    let mount = MountGuard::mount_with_env(
        dir.path().as_os_str(),
        &["--cache-size", "64M"],
        &[("TMPDIR", tmpdir.as_str())],
    );
    let (read, _) = head_of_field(&mount, &scratch, 0);
    assert_eq!(read.unwrap_err().raw_os_error(), Some(libc::EIO));
    let peak = assert_within_budget(&mount, 64 * MIB);
    assert!(peak < 96 * MIB, "no window allocated: {} MiB", peak / MIB);
    let log = mount.log_text();
    assert!(
        log.contains("decoding its fields") && log.contains("67108864"),
        "{log}"
    );
    // Under a budget that holds the window, the same record reads.
    drop(mount);
    let mount = MountGuard::mount_with_env(
        dir.path().as_os_str(),
        &["--cache-size", "256M"],
        &[("TMPDIR", tmpdir.as_str())],
    );
    let (read, _) = head_of_field(&mount, &scratch, 0);
    assert_eq!(read.unwrap(), vec![0u8; 4096]);
    assert_within_budget(&mount, 256 * MIB);
}

/// The memory budget's bytes in use, from the status file.
fn memory_used(mount: &MountGuard) -> u64 {
    let status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(mount.path(".sdsfs-status")).unwrap()).unwrap();
    status["memory"]["used_bytes"].as_u64().unwrap()
}

/// Reads the first 4 KiB of record `ordinal`'s IQ samples.
fn head_of(mount: &MountGuard, ordinal: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let path = mount.path(&format!("records/{ordinal:02}/fields/iq.raw"));
    let mut head = Vec::new();
    std::fs::File::open(path)?
        .take(4096)
        .read_to_end(&mut head)
        .map(|_| head)
}

#[test]
fn concurrent_spilled_decodes_of_different_records_stay_within_the_budget() {
    // 16 records of 48 MiB (zeros, 4 MiB zstd windows): each read spills its record to
    // temporary files, each decode with segments, cursor and write-behind buffers of its own.
    let dir = zeros_dataset(16, 48, 22);
    let scratch = Scratch::new();
    let tmpdir = scratch.dir.path().to_str().unwrap().to_string();
    let budget = 64 * MIB;
    let mount = MountGuard::mount_with_env(
        dir.path().as_os_str(),
        &["--cache-size", "64M"],
        &[("TMPDIR", tmpdir.as_str())],
    );
    let done = std::sync::atomic::AtomicBool::new(false);
    let (heads, most_used) = std::thread::scope(|scope| {
        let mount = &mount;
        let sampler = scope.spawn(|| {
            let mut most = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                most = most.max(memory_used(mount));
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            most
        });
        let readers: Vec<_> = (0..16)
            .map(|ordinal| scope.spawn(move || head_of(mount, ordinal)))
            .collect();
        let heads: Vec<std::io::Result<Vec<u8>>> =
            readers.into_iter().map(|r| r.join().unwrap()).collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (heads, sampler.join().unwrap())
    });
    for (ordinal, head) in heads.into_iter().enumerate() {
        assert_eq!(head.unwrap(), vec![0u8; 4096], "record {ordinal}");
    }
    // Each decode's eight segments of a 4 MiB window and two 128 KiB blocks alone are 34 MiB:
    // the status shows them charged while decodes run, and never more than the budget.
    assert!(
        (34 * MIB..=budget).contains(&most_used),
        "memory budget used at most {most_used} bytes while decoding"
    );
    let peak = assert_within_budget(&mount, budget);
    eprintln!(
        "16 concurrent spilled decodes of 48 MiB records, 64 MiB budget: peak RSS {} MiB, \
         budget used at most {} MiB",
        peak / MIB,
        most_used / MIB
    );
}

/// A dataset of `records` tiny records (written 1,000 to a chunk) and an annotation set "big"
/// of one object holding a row for each, one row to a chunk: the object's chunk index has
/// an entry per record (an offset, a count and a size: 24 bytes) and the data's index 1 per
/// 1,000.
fn dataset_with_a_large_annotation_index(records: usize) -> tempfile::TempDir {
    use sdsfs::annotations::{publish_annotations, AnnotationOptions, AnnotationRecord};
    use sdsfs::format::dtype::DType;
    use sdsfs::format::record::{Axis, Field};
    let all =
        (0..records).map(|i| Record::new(format!("r{i}")).with_field("iq", iq_capture(vec![0; 8])));
    let writer_options = WriterOptions {
        group_size: 1000,
        ..WriterOptions::default()
    };
    let dir = one_shard_dataset(all, writer_options);
    let dataset = sdsfs::dataset::Dataset::open(
        local_store(dir.path()),
        sdsfs::dataset::OpenOptions::default(),
    )
    .unwrap();
    let rows: Vec<AnnotationRecord> = (0..records)
        .map(|i| {
            let status = sdsfs::annotations::AnnotationStatus::Success;
            let mut row = AnnotationRecord::new(format!("r{i}"), i as u64, status);
            let score = Field::new(DType::U8, vec![1], vec![(i % 251) as u8])
                .unwrap()
                .with_axes(vec![Axis::new("n", 1)]);
            row.fields.insert("score".into(), score);
            row
        })
        .collect();
    let options = AnnotationOptions {
        records_per_shard: records as u64,
        ..AnnotationOptions::default()
    };
    publish_annotations(&dataset, "big", &rows, &Default::default(), &options).unwrap();
    dir
}

#[test]
fn annotation_object_indexes_are_charged_to_the_budget() {
    // 50,000 chunks: an index of 1.2 MB, more than a 1 MiB budget.
    let dir = dataset_with_a_large_annotation_index(50_000);
    let score = "records/00007/annotations/big/fields/score.raw";
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "1M"]);
    let error = std::fs::read(mount.path(score)).expect_err("the index cannot fit 1 MiB");
    assert_eq!(error.raw_os_error(), Some(libc::EIO));
    assert_eq!(
        std::fs::read(mount.path("records/00007/fields/iq.raw")).unwrap(),
        vec![0u8; 8],
        "the dataset's own files are served"
    );
    assert_within_budget(&mount, MIB);
    let log = mount.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("its chunk index"))
        .unwrap_or_else(|| panic!("no line about the index: {log}"));
    for needle in ["annotations/", "memory budget of 1048576 bytes"] {
        assert!(line.contains(needle), "{needle:?} missing from {line}");
    }
    drop(mount);
    // A budget that holds it serves the annotation.
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "8M"]);
    assert_eq!(std::fs::read(mount.path(score)).unwrap(), vec![7u8]);
    assert_within_budget(&mount, 8 * MIB);
}

/// Reads of `records/<n>/fields/iq.raw` by one reader per record `n` of `expected` (its
/// bytes), each reading its record again and again for `seconds`, with the kernel's copy
/// dropped before each read so that every read reaches the daemon; returns how many reads
/// were served exactly and the errors.
fn read_concurrently(
    mount: &MountGuard,
    expected: &[Vec<u8>],
    seconds: u64,
) -> (usize, Vec<String>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    std::thread::scope(|scope| {
        let readers: Vec<_> = expected
            .iter()
            .enumerate()
            .map(|(ordinal, want)| {
                let path = mount.path(&format!("records/{ordinal}/fields/iq.raw"));
                scope.spawn(move || {
                    let (mut served, mut errors) = (0, Vec::new());
                    while std::time::Instant::now() < deadline && errors.is_empty() {
                        let file = match std::fs::File::open(&path) {
                            Ok(file) => file,
                            Err(e) => {
                                errors.push(format!("record {ordinal}: open: {e}"));
                                break;
                            }
                        };
                        // SAFETY: a valid open descriptor; advisory call.
                        unsafe {
                            let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
                            libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
                        }
                        let mut got = Vec::new();
                        match std::io::Read::read_to_end(&mut &file, &mut got) {
                            Ok(_) if &got == want => served += 1,
                            Ok(n) => errors.push(format!("record {ordinal}: wrong {n} bytes")),
                            Err(e) => errors.push(format!("record {ordinal}: {e}")),
                        }
                    }
                    (served, errors)
                })
            })
            .collect();
        readers
            .into_iter()
            .map(|reader| reader.join().unwrap())
            .fold((0, Vec::new()), |(served, mut errors), (more, found)| {
                errors.extend(found);
                (served + more, errors)
            })
    })
}

/// Eight readers, each reading its own record again and again under the smallest budget
/// (1 MiB). A record's payload takes about 600 KiB of it while it is decoded (300 KiB of
/// random samples beside their stored span), and its tree about 200 KiB (a 64 KiB string in
/// its metadata, counted three times for what parsing it keeps). Two requests that each held
/// their record's tree while waiting for room for a payload would keep that room from each
/// other until the wait failed; requests hold nothing charged while they wait, so every read
/// is served, exact, and memory stays within the budget.
#[test]
fn readers_waiting_for_room_hold_nothing_so_the_smallest_budget_serves_them_all() {
    let readers = 8;
    let note = "n".repeat(64 << 10);
    let expected: Vec<Vec<u8>> = (0..readers)
        .map(|i| Bits::new(i as u64 + 1).bytes(300 << 10))
        .collect();
    let all = expected.iter().enumerate().map(|(i, samples)| {
        Record::new(format!("wide-{i}"))
            .with_metadata(obj(&[("note", Value::from(note.as_str()))]))
            .with_field("iq", iq_capture(samples.clone()))
    });
    let dir = one_shard_dataset(all, WriterOptions::default());
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "1M"]);
    let (served, errors) = read_concurrently(&mount, &expected, 4);
    assert!(
        errors.is_empty(),
        "{errors:?} ({served} reads served)\n{}",
        mount.log_text()
    );
    assert!(served >= readers, "{served} reads served");
    assert_within_budget(&mount, MIB);
}

/// The demo's record 4 (two receivers) takes about 1 MiB while it is decoded (986 KiB): under
/// the smallest budget (1 MiB) it is served, as its request holds nothing else while it
/// waits for room. Once `by-id/` is indexed (kept for the mount), smaller records are still
/// served: the index is charged in small steps, not a whole small budget at once.
#[test]
fn a_record_of_nearly_the_whole_budget_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    assert!(common::cli::sds(&["demo", demo.to_str().unwrap()])
        .status
        .success());
    let mount = MountGuard::mount(&demo, &["--cache-size", "1M"]);
    let iq = |ordinal: u64, rx: u64| {
        mount.path(&format!(
            "records/{ordinal}/fields/projections/communications_rx/receivers/rx{rx}/iq.raw"
        ))
    };
    assert_eq!(std::fs::read(iq(0, 0)).unwrap().len(), 160_000);
    assert_eq!(std::fs::read(iq(4, 0)).unwrap().len(), 160_000);
    assert_eq!(std::fs::read(iq(4, 1)).unwrap().len(), 320_000);
    // The index stays for the mount: in small steps, it leaves room for other records.
    assert_eq!(std::fs::read_dir(mount.path("by-id")).unwrap().count(), 8);
    assert_eq!(std::fs::read(iq(3, 0)).unwrap().len(), 160_000);
    assert_within_budget(&mount, MIB);
}

/// A record that fits the budget alone but not beside what the mount keeps for itself (here
/// the `by-id/` index of 2,200 long ids, about 640 KiB) is refused within seconds, as no
/// work in flight could give memory back, not after the 30 s limit, with a message saying
/// so; a smaller record is served, and the mount stays up.
#[test]
fn a_wait_no_one_can_end_is_refused_within_seconds() {
    let long_id = |i: usize| format!("{i:04}-{}", "i".repeat(245));
    let big = Bits::new(9).bytes(256 << 10);
    let all = std::iter::once(Record::new("big").with_field("iq", iq_capture(big))).chain(
        (1..2_200).map(|i| Record::new(long_id(i)).with_field("iq", iq_capture(vec![1; 64]))),
    );
    let dir = one_shard_dataset(all, WriterOptions::default());
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "1M"]);
    assert_eq!(
        std::fs::read_dir(mount.path("by-id")).unwrap().count(),
        2_200
    );
    let started = std::time::Instant::now();
    let error = std::fs::read(mount.path("records/0000/fields/iq.raw"))
        .expect_err("record 0 cannot fit beside the index");
    let waited = started.elapsed();
    assert_eq!(error.raw_os_error(), Some(libc::EIO), "{error}");
    assert!(
        waited < std::time::Duration::from_secs(10),
        "refused after {waited:?}: a wait that nothing could end (the limit is 30 s)"
    );
    assert_eq!(
        std::fs::read(mount.path("records/0001/fields/iq.raw")).unwrap(),
        vec![1; 64]
    );
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_sdsfs"))
        .arg("status")
        .arg(&mount.mountpoint)
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("do not fit in the memory budget")
            && status.contains("no other work in flight"),
        "{status}"
    );
}
