//! Decode only what is asked (issue 37, item 3): a read of one field of a record decodes that
//! field and keeps nothing else, in memory or on disk; a picture decodes only the fields it
//! shows, and a preview with nothing to show reads no data shard at all.
//!
//! Bytes written to disk come from the daemon's `/proc/PID/io` (`write_bytes`: pages dirtied
//! on a block device; `wchar`: every byte the daemon wrote through a system call, its answers
//! to FUSE reads included), peaks from `/proc/PID/status` (`VmHWM`), data-shard reads from a
//! store that counts them (the mount's core, no FUSE). Every dataset is built here, and every
//! byte read is compared with the bytes this test wrote.

mod common;

use std::io::Read;
use std::path::Path;

use common::datasets::{iq_capture, local_store};
use common::mount::{peak_rss, MountGuard};
use common::namespace::{counting_namespace, data_reads, lookup_path};
use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::record::{Axis, Field, Record};

const MIB: u64 = 1 << 20;
/// What the daemon may take beyond its budget.
const OVERHEAD: u64 = 64 * MIB;
/// The large field of the case.
const BIG: usize = 300_000_000;
/// The small field beside it.
const SMALL: usize = 4096;
/// What "nearly nothing" written means: the daemon's answers to the reads, log lines.
const NEARLY_NOTHING: u64 = MIB;

/// Byte `i` of a field seeded `seed`: compressible (zstd finds a match 256 bytes back), and
/// every 4 KiB block different from its neighbours, so a misplaced block is seen.
fn pattern(seed: u8, i: usize) -> u8 {
    (i as u8)
        .wrapping_mul(7)
        .wrapping_add((i >> 12) as u8)
        .wrapping_add(seed)
}

fn pattern_bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| pattern(seed, i)).collect()
}

/// A uint8 vector field (no SigMF pair, not pulsed: nothing a picture shows).
fn bytes_field(data: Vec<u8>) -> Field {
    let len = data.len() as u64;
    Field::new(DType::U8, vec![len], data)
        .unwrap()
        .with_axes(vec![Axis::new("n", len)])
}

/// `records` published as one shard (zstd, the library's default options).
fn dataset(records: Vec<Record>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let receipt = write_shard(
        store.as_ref(),
        records,
        "work-000",
        0,
        &ShardOptions::default(),
    )
    .unwrap();
    publish(
        store.as_ref(),
        &[receipt],
        &PublishOptions::new("decode-only", "v1"),
    )
    .unwrap();
    dir
}

/// Record 0: a 300 MB field `big` and a 4 KiB field `small`, no picture to draw. Record 1: a
/// 512 KiB IQ field `iq` (a SigMF pair, so a spectrogram and a preview panel) beside the same
/// 300 MB `big`.
fn huge_and_small() -> tempfile::TempDir {
    let big = pattern_bytes(1, BIG);
    let first = Record::new("huge-and-small")
        .with_field("big", bytes_field(big.clone()))
        .with_field("small", bytes_field(pattern_bytes(2, SMALL)));
    let second = Record::new("huge-and-iq")
        .with_field("big", bytes_field(big))
        .with_field("iq", iq_capture(pattern_bytes(3, 512 << 10)));
    dataset(vec![first, second])
}

/// `write_bytes` and `wchar` of process `pid`.
fn written(pid: u32) -> (u64, u64) {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    let field = |name: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{name} in /proc/{pid}/io: {io}"))
    };
    (field("write_bytes:"), field("wchar:"))
}

/// What `action` made the daemon of `mount` write: (`write_bytes`, `wchar`).
fn writes_of(mount: &MountGuard, action: impl FnOnce()) -> (u64, u64) {
    let before = written(mount.pid());
    action();
    let after = written(mount.pid());
    (after.0 - before.0, after.1 - before.1)
}

fn assert_nearly_nothing_written(what: &str, (disk, chars): (u64, u64)) {
    assert!(
        disk < NEARLY_NOTHING && chars < NEARLY_NOTHING,
        "{what}: {disk} bytes written to disk, {chars} written in all"
    );
}

/// `head -c len` of `path`.
fn head(path: &Path, len: u64) -> Vec<u8> {
    let mut out = Vec::new();
    std::fs::File::open(path)
        .unwrap_or_else(|e| panic!("{path:?}: {e}"))
        .take(len)
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("{path:?}: {e}"));
    out
}

/// Whether the file at `path` holds exactly `pattern(seed, i)` for `len` bytes, read in 1 MiB
/// pieces (nothing of the size of the file is held).
fn holds_pattern(path: &Path, seed: u8, len: usize) -> Result<(), String> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("{path:?}: {e}"))?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut at = 0usize;
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(|e| format!("{path:?} at {at}: {e}"))?;
        if n == 0 {
            break;
        }
        if let Some(bad) = (0..n).find(|&k| buffer[k] != pattern(seed, at + k)) {
            return Err(format!("{path:?}: byte {} differs", at + bad));
        }
        at += n;
    }
    match at == len {
        true => Ok(()),
        false => Err(format!("{path:?}: {at} bytes, {len} written")),
    }
}

/// The daemon's storage requests so far, from its status file.
fn storage_requests(mount: &MountGuard) -> u64 {
    let status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(mount.path(".sdsfs-status")).unwrap()).unwrap();
    status["storage"]
        .as_object()
        .unwrap()
        .values()
        .map(|backend| backend["requests"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_small_field_of_a_huge_record_is_read_without_writing_the_record_to_disk() {
    let dir = huge_and_small();
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "64M"]);
    let small = mount.path("records/0/fields/small.raw");
    // The record's tree first (its row), so that what follows is the reads alone.
    assert_eq!(std::fs::metadata(&small).unwrap().len(), SMALL as u64);
    let mut read = Vec::new();
    let writes = writes_of(&mount, || read = head(&small, 4096));
    assert_eq!(read, pattern_bytes(2, SMALL), "{}", mount.log_text());
    assert_nearly_nothing_written("head -c 4096 of the small field", writes);

    // Record 0 shows nothing: its preview reads no data shard and writes nothing.
    let preview = mount.path("records/0/preview.png");
    let requests = storage_requests(&mount);
    let mut png = Vec::new();
    let writes = writes_of(&mount, || png = std::fs::read(&preview).unwrap());
    assert_eq!(&png[1..4], b"PNG");
    assert_nearly_nothing_written("preview.png of a record with nothing to show", writes);
    assert_eq!(
        storage_requests(&mount),
        requests,
        "storage read for the preview"
    );

    let peak = peak_rss(mount.pid());
    assert!(
        peak <= 64 * MIB + OVERHEAD,
        "peak RSS {} MiB above 64 MiB + 64 MiB",
        peak / MIB
    );
    // The large field reads byte-exact afterwards (spilled now, to its own file alone).
    let big = mount.path("records/0/fields/big.raw");
    let (disk, _) = writes_of(&mount, || holds_pattern(&big, 1, BIG).unwrap());
    assert!(
        disk <= BIG as u64 + NEARLY_NOTHING,
        "{disk} bytes written to disk for a field of {BIG}"
    );
    assert_eq!(head(&small, 4096), pattern_bytes(2, SMALL));
    eprintln!(
        "head -c 4096 of a 4 KiB field beside a 300 MB one at 64M: peak RSS {} MiB",
        peak / MIB
    );
}

#[test]
fn pictures_decode_only_the_fields_they_show() {
    let dir = huge_and_small();
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "64M"]);
    for picture in [
        "records/1/preview.png",
        "records/1/fields/iq.spectrogram.png",
    ] {
        let path = mount.path(picture);
        let size = std::fs::metadata(&path).unwrap().len();
        let mut png = Vec::new();
        let writes = writes_of(&mount, || png = std::fs::read(&path).unwrap());
        assert_eq!(png.len() as u64, size, "{picture}: {}", mount.log_text());
        assert_eq!(&png[1..4], b"PNG", "{picture}");
        // The answers to the reads themselves are the picture's bytes.
        let (disk, chars) = writes;
        assert_nearly_nothing_written(picture, (disk, chars.saturating_sub(size)));
    }
    let iq = mount.path("records/1/fields/iq.raw");
    holds_pattern(&iq, 3, 512 << 10).unwrap();
    let peak = peak_rss(mount.pid());
    assert!(
        peak <= 64 * MIB + OVERHEAD,
        "peak RSS {} MiB above 64 MiB + 64 MiB",
        peak / MIB
    );
}

#[test]
fn a_preview_with_nothing_to_show_reads_no_data_shard() {
    // A small record (decoded in memory) and a large one (streamed), neither with a field a
    // preview shows.
    let dir = dataset(vec![
        Record::new("small").with_field("n", bytes_field(pattern_bytes(4, 1000))),
        Record::new("large").with_field("n", bytes_field(pattern_bytes(5, 64 << 20))),
    ]);
    let (store, ns) = counting_namespace(dir.path());
    for ordinal in 0..2 {
        let attr = lookup_path(&ns, &format!("records/{ordinal}/preview.png"));
        data_reads(&store);
        let png = ns.read(attr.ino, 0, attr.size as u32).unwrap();
        assert_eq!(png.len() as u64, attr.size, "record {ordinal}");
        assert_eq!(data_reads(&store), 0, "record {ordinal}: data shard read");
    }
    let misses = ns
        .record_cache()
        .counters()
        .misses
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(misses, 0, "records decoded for previews that show nothing");
}
