//! FUSE passthrough: the `.raw`/`.sigmf-data` files of large fields (records decoded into
//! temporary files) are read by the kernel from the daemon's files directly.
//!
//! Real mounts (`sdsfs mount --foreground`, unmounted by a guard). Passthrough needs a kernel
//! that offers it and a daemon with `CAP_SYS_ADMIN`; where either is missing the tests say so
//! and check only that every byte is still right.

mod common;

use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use common::mount::MountGuard;
use sdsfs::dataset::{publish, write_shard, Dataset, OpenOptions, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::record::{Axis, Field, Record};
use sdsfs::storage::{LocalStore, ObjectStore};

/// 16 MiB: served through the daemon it takes at least 16 `READ`s of 1 MiB.
const BIG_SAMPLES: u64 = 2 << 20;

fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ seed.wrapping_mul(0x2545_f491_4f6c_dd1d);
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(n);
    out
}

fn iq_field(samples: u64, seed: u64) -> Field {
    common::datasets::iq_capture(noise(samples as usize * 8, seed))
}

/// A large IQ field, a second field of its own file's size class, and small fields that stay
/// in the payload file.
fn big_record(i: u64) -> Record {
    Record::new(format!("big-{i}"))
        .with_field("iq", iq_field(BIG_SAMPLES, i))
        .with_field(
            "spectrum",
            Field::new(DType::F32, vec![3 << 18], noise(3 << 20, i + 100))
                .unwrap()
                .with_axes(vec![Axis::new("bin", 3 << 18)]),
        )
        .with_field(
            "label",
            Field::new(DType::I16, vec![5], noise(10, i + 200))
                .unwrap()
                .with_axes(vec![Axis::new("n", 5)]),
        )
}

fn build_dataset(records: Vec<Record>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let receipt = write_shard(&store, records, "w0", 0, &ShardOptions::default()).unwrap();
    publish(
        &store,
        &[receipt],
        &PublishOptions::new("passthrough-test", "snap-1"),
    )
    .unwrap();
    dir
}

/// `n` big records published and mounted with a 64 MiB cache (records above 16 MiB decode into
/// temporary files); the `iq` bytes of each.
fn mount_big_records(n: u64) -> (tempfile::TempDir, MountGuard, Vec<Vec<u8>>) {
    let records: Vec<Record> = (0..n).map(big_record).collect();
    let expected = records
        .iter()
        .map(|r| r.fields["iq"].data.to_vec())
        .collect();
    let dir = build_dataset(records);
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "64M"]);
    (dir, mount, expected)
}

fn open(dir: &Path) -> Dataset {
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir).unwrap());
    Dataset::open(store, OpenOptions::default()).unwrap()
}

fn status(mount: &MountGuard) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(mount.path(".sdsfs-status")).unwrap()).unwrap()
}

fn fuse_requests(mount: &MountGuard) -> u64 {
    status(mount)["requests"]["fuse"].as_u64().unwrap()
}

fn passthrough_enabled(mount: &MountGuard) -> bool {
    let on = status(mount)["passthrough"]["enabled"].as_bool().unwrap();
    if !on {
        eprintln!("passthrough not available here (kernel or privileges): checking bytes only");
    }
    on
}

fn read_whole(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    std::fs::File::open(path)
        .unwrap()
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// FUSE requests the daemon saw while `path` was opened and read whole.
fn requests_to_read(mount: &MountGuard, path: &Path, expected: &[u8]) -> u64 {
    // Lookups and attributes first, so that what is counted is the open and the reads.
    assert_eq!(
        std::fs::metadata(path).unwrap().len(),
        expected.len() as u64
    );
    let before = fuse_requests(mount);
    assert!(read_whole(path) == expected, "{} differs", path.display());
    // The status file's own lookup/open/read/release are counted too.
    let served = fuse_requests(mount) - before;
    eprintln!("{}: {served} FUSE requests", path.display());
    served
}

#[test]
fn large_fields_are_read_by_the_kernel_and_every_view_is_exact() {
    let record = big_record(1);
    let iq = record.fields["iq"].data.clone();
    let spectrum = record.fields["spectrum"].data.clone();
    let label = record.fields["label"].data.clone();
    let dir = build_dataset(vec![record]);
    // 64 MiB of cache: records above 16 MiB (these are 19 MiB) are decoded into temporary
    // files, and one decoding's working set fits.
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "64M"]);
    let fields = mount.path("records/0/fields");
    let served = requests_to_read(&mount, &fields.join("iq.raw"), &iq);
    // The same open and status reads around a file of one `READ`: the fixed cost.
    let served_small = requests_to_read(&mount, &fields.join("label.raw"), &label);
    assert_eq!(read_whole(&fields.join("iq.sigmf-data")), iq);
    assert_eq!(read_whole(&fields.join("spectrum.raw")), spectrum);
    let npy = read_whole(&fields.join("iq.npy"));
    assert!(npy.starts_with(b"\x93NUMPY") && npy.ends_with(&iq));
    // Unaligned reads through two handles open at once.
    let first = std::fs::File::open(fields.join("iq.raw")).unwrap();
    let second = std::fs::File::open(fields.join("iq.raw")).unwrap();
    for offset in [0u64, 1, 4095, 1 << 20, iq.len() as u64 - 3] {
        let mut a = [0u8; 3];
        let mut b = [0u8; 3];
        first.read_exact_at(&mut a, offset).unwrap();
        second.read_exact_at(&mut b, offset).unwrap();
        let o = offset as usize;
        assert_eq!((&a[..], &b[..]), (&iq[o..o + 3], &iq[o..o + 3]));
    }
    if passthrough_enabled(&mount) {
        // 16 MiB through the daemon is at least 16 READs; by passthrough none at all.
        assert!(
            served < served_small,
            "{served} FUSE requests for 16 MiB by passthrough, {served_small} for 10 bytes"
        );
        let opens = status(&mount)["passthrough"]["opens"].as_u64().unwrap();
        assert!(opens >= 5, "{opens} passthrough opens");
        let human = std::process::Command::new(env!("CARGO_BIN_EXE_sdsfs"))
            .arg("status")
            .arg(&mount.mountpoint)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&human.stdout);
        assert!(
            text.contains(&format!("passthrough on; {opens} opens")),
            "{text}"
        );
    }
}

#[test]
fn without_passthrough_the_daemon_serves_the_reads() {
    let record = big_record(2);
    let iq = record.fields["iq"].data.clone();
    let label = record.fields["label"].data.clone();
    let dir = build_dataset(vec![record]);
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "64M", "--no-passthrough"]);
    let fields = mount.path("records/0/fields");
    let served = requests_to_read(&mount, &fields.join("iq.raw"), &iq);
    let served_small = requests_to_read(&mount, &fields.join("label.raw"), &label);
    // The negative control of the test above: the same read takes the daemon's READs.
    assert!(
        served >= served_small + 15,
        "{served} FUSE requests for 16 MiB, {served_small} for 10 bytes"
    );
    let status = status(&mount);
    assert_eq!(status["passthrough"]["enabled"], false);
    assert_eq!(status["passthrough"]["opens"], 0);
}

#[test]
fn mapped_and_evicted_records_stay_exact() {
    let (dir, mount, expected) = mount_big_records(6);
    let path = |i: usize| mount.path(&format!("records/{i}/fields/iq.raw"));
    // Record 0 stays open (and mapped) while five more records push it out of the cache,
    // which keeps four decoded files.
    let held = std::fs::File::open(path(0)).unwrap();
    let mapped = MappedFile::new(&held, expected[0].len());
    for (i, want) in expected.iter().enumerate().skip(1) {
        assert!(read_whole(&path(i)) == *want, "record {i}");
    }
    let mut tail = vec![0u8; 4096];
    held.read_exact_at(&mut tail, (expected[0].len() - 4096) as u64)
        .unwrap();
    assert_eq!(&tail[..], &expected[0][expected[0].len() - 4096..]);
    assert!(
        mapped.bytes() == &expected[0][..],
        "mapped record 0 differs"
    );
    drop(mapped);
    drop(held);
    // Reopened after its last close: decoded again, registered again.
    assert!(read_whole(&path(0)) == expected[0]);
    let dataset = open(dir.path());
    assert_eq!(dataset.len(), 6);
}

#[test]
fn concurrent_opens_and_closes_of_one_file_never_mix_modes() {
    // The kernel fails (EIO) an open whose mode differs from the inode's other open files, and
    // a backing file dropped too early fails reads: eight threads opening, reading and closing
    // the same files at once exercise both.
    let (_dir, mount, expected) = mount_big_records(2);
    std::thread::scope(|scope| {
        for t in 0..8usize {
            let (mount, expected) = (&mount, &expected);
            scope.spawn(move || {
                for round in 0..25usize {
                    let i = (t + round) % 2;
                    let path = mount.path(&format!("records/{i}/fields/iq.raw"));
                    let file = std::fs::File::open(&path).unwrap();
                    let offset = (t * 7919 + round * 104_729) % (expected[i].len() - 4096);
                    let mut buffer = vec![0u8; 4096];
                    file.read_exact_at(&mut buffer, offset as u64).unwrap();
                    assert!(buffer == expected[i][offset..offset + 4096], "record {i}");
                    if round % 5 == 0 {
                        assert!(read_whole(&path) == expected[i], "record {i} whole");
                    }
                }
            });
        }
    });
    assert_eq!(status(&mount)["requests"]["eio"], 0);
}

#[test]
fn a_corrupt_large_record_fails_its_reads_with_eio_and_the_mount_stays_up() {
    let records: Vec<Record> = (0..2).map(big_record).collect();
    let second = records[1].fields["iq"].data.clone();
    let dir = build_dataset(records);
    // Flip one byte in the middle of the first record's chunk (the shard holds both records,
    // one chunk each, the first one first).
    let shard = common::datasets::files_below(dir.path())
        .into_iter()
        .find(|(name, _)| name.contains("objects/data/"))
        .unwrap()
        .1;
    let mut bytes = std::fs::read(&shard).unwrap();
    let middle = bytes.len() / 4;
    bytes[middle] ^= 0x40;
    std::fs::write(&shard, bytes).unwrap();
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "64M"]);
    let bad = mount.path("records/0/fields/iq.raw");
    let error = std::fs::read(&bad).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EIO), "{error}");
    assert!(read_whole(&mount.path("records/1/fields/iq.raw")) == second);
    let error = std::fs::read(&bad).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EIO), "{error}");
    assert!(status(&mount)["requests"]["eio"].as_u64().unwrap() >= 2);
}

/// A read-only shared mapping of a file, unmapped on drop.
struct MappedFile {
    address: *mut libc::c_void,
    len: usize,
}

impl MappedFile {
    fn new(file: &std::fs::File, len: usize) -> MappedFile {
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh read-only shared mapping of an open file; checked for failure.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(address, libc::MAP_FAILED, "mmap failed");
        MappedFile { address, len }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.address as *const u8, self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe {
            libc::munmap(self.address, self.len);
        }
    }
}
