//! Load: 32 concurrent reader threads doing sequential and random reads (random offsets and
//! sizes) of fields, JSON, SigMF descriptions and pictures over a real mount with a 1 MiB cache
//! for a bounded time, every byte checked against what the library reads (or, for files the
//! library has no counterpart of, what the mount served before the load, once the library
//! check vetted them); a watchdog fails the test (and kills the daemon so stuck readers
//! return) if no read completes for 15 s; the daemon's peak RSS stays within cache + 64 MiB.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::datasets::{local_store, obj, Bits};
use common::library::assert_records_read_as_library;
use common::mount::{peak_rss, MountGuard};
use rand::{Rng, SeedableRng};
use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::Value;
use sdsfs::format::record::{Axis, Field, Record};

const THREADS: usize = 32;
/// How long the readers run: 10 s in the suite; `SDS_STRESS_SECONDS` for long runs
/// (`scripts/stress`).
fn run_time() -> Duration {
    let seconds = std::env::var("SDS_STRESS_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    Duration::from_secs(seconds)
}
const STALL: Duration = Duration::from_secs(15);
/// The memory budget: the smallest a mount takes, barely more than one of the largest decode
/// units (a 448 KiB record's chunk decoded beside its stored span, about 900 KiB), so that
/// 32 readers queue for room all the time: none may hold anything charged while it waits
/// (their record trees between them would keep the room the unit needs, and the wait would
/// end in EIO).
const CACHE: u64 = 1 << 20;

fn big_record(serial: usize) -> Record {
    let mut bits = Bits::new(serial as u64 + 7);
    // 24k to 56k complex64 samples: 192 KiB to 448 KiB per record, far more than the cache.
    let samples = 24_576 + (serial % 5) as u64 * 8192;
    let iq = Field::new(DType::C64, vec![samples], bits.bytes(samples as usize * 8))
        .unwrap()
        .with_axes(vec![Axis::new("time", samples)]);
    let small = Field::new(DType::I16, vec![3, 5], bits.bytes(30))
        .unwrap()
        .with_axes(vec![Axis::new("a", 3), Axis::new("b", 5)]);
    Record::new(format!("load-{serial:04}"))
        .with_metadata(obj(&[("serial", Value::Int(serial as i128))]))
        .with_field("rx/iq", iq)
        .with_field("small", small)
}

#[test]
fn thirty_two_readers_tiny_cache_exact_bytes_no_deadlock_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let mut receipts = Vec::new();
    let per_shard = 6;
    let total = 36;
    for shard in 0..total / per_shard {
        let records: Vec<Record> = (shard * per_shard..(shard + 1) * per_shard)
            .map(big_record)
            .collect();
        let receipt = write_shard(
            store.as_ref(),
            records,
            &format!("w{shard}"),
            0,
            &ShardOptions::default(),
        )
        .unwrap();
        receipts.push(receipt);
    }
    publish(
        store.as_ref(),
        &receipts,
        &PublishOptions::new("ds-load", "snap-load"),
    )
    .unwrap();

    let mut mount = MountGuard::mount(dir.path(), &["--cache-size", "1M"]);
    // Expected bytes of every file the readers touch: fields from the records written (raw,
    // and NPY written by hand), `record.json` as a quiet mount serves it once the library has
    // confirmed every record reads as it reads them.
    let ordinals: Vec<u64> = (0..total as u64).collect();
    assert_records_read_as_library(dir.path(), &mount.mountpoint, &ordinals);
    let mut expected: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for serial in 0..total {
        let base = format!("records/{serial:02}");
        // Files the library check has vetted, as a quiet mount serves them: the record's
        // JSON, its picture, and its IQ field's SigMF description and spectrogram (each
        // decodes the record before it finds the record's tree again).
        for quiet in [
            "record.json".to_string(),
            "preview.png".to_string(),
            "fields/rx/iq.sigmf-meta".to_string(),
            "fields/rx/iq.spectrogram.png".to_string(),
        ] {
            let rel = format!("{base}/{quiet}");
            expected.insert(rel.clone(), std::fs::read(mount.path(&rel)).unwrap());
        }
        for (name, field) in &big_record(serial).fields {
            let raw = field.data.to_vec();
            let npy = common::npy::npy_bytes(field.meta.dtype, &field.meta.shape, &raw);
            expected.insert(format!("{base}/fields/{name}.npy"), npy);
            expected.insert(format!("{base}/fields/{name}.raw"), raw);
        }
    }
    let expected: Arc<Vec<(String, Vec<u8>)>> = Arc::new(expected.into_iter().collect());

    let pid = mount.pid();
    let mountpoint = mount.mountpoint.clone();
    let progress = Arc::new(AtomicU64::new(0));
    let bytes_read = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let stalled = Arc::new(AtomicBool::new(false));

    let watchdog = {
        let (progress, done, stalled) = (progress.clone(), done.clone(), stalled.clone());
        std::thread::spawn(move || {
            let mut last = progress.load(Ordering::SeqCst);
            let mut since = Instant::now();
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(200));
                let now = progress.load(Ordering::SeqCst);
                if now != last {
                    last = now;
                    since = Instant::now();
                } else if since.elapsed() > STALL {
                    stalled.store(true, Ordering::SeqCst);
                    // The daemon's threads, for whoever reads the failure (gdb if present).
                    if let Ok(stacks) = std::process::Command::new("gdb")
                        .args([
                            "-p",
                            &pid.to_string(),
                            "-batch",
                            "-ex",
                            "thread apply all bt 40",
                        ])
                        .output()
                    {
                        eprintln!(
                            "daemon stacks:\n{}",
                            String::from_utf8_lossy(&stacks.stdout)
                        );
                    }
                    // SAFETY: signalling the test's own child daemon so stuck reads return.
                    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                    return;
                }
            }
        })
    };

    let deadline = Instant::now() + run_time();
    let readers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (expected, progress, bytes_read, stalled) = (
                expected.clone(),
                progress.clone(),
                bytes_read.clone(),
                stalled.clone(),
            );
            let mountpoint = mountpoint.clone();
            std::thread::spawn(move || -> Result<(), String> {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t as u64);
                while Instant::now() < deadline && !stalled.load(Ordering::SeqCst) {
                    let (rel, want) = &expected[rng.gen_range(0..expected.len())];
                    let path = mountpoint.join(rel);
                    let file = std::fs::File::open(&path).map_err(|e| format!("{rel}: {e}"))?;
                    // Drop the kernel's page cache of the file, so reads reach the daemon
                    // instead of being served from pages an earlier reader brought in.
                    // SAFETY: a valid open descriptor; advisory call.
                    unsafe {
                        libc::posix_fadvise(
                            std::os::fd::AsRawFd::as_raw_fd(&file),
                            0,
                            0,
                            libc::POSIX_FADV_DONTNEED,
                        )
                    };
                    let len = want.len() as u64;
                    if rng.gen_bool(0.3) {
                        // Sequential, in random-sized pieces.
                        let mut offset = 0u64;
                        let step = rng.gen_range(1..=256 * 1024);
                        let mut buf = vec![0u8; step];
                        loop {
                            let n = file
                                .read_at(&mut buf, offset)
                                .map_err(|e| format!("{rel}@{offset}: {e}"))?;
                            if n == 0 {
                                break;
                            }
                            let end = offset as usize + n;
                            if end > want.len() || buf[..n] != want[offset as usize..end] {
                                return Err(format!("{rel}: wrong bytes at {offset}+{n}"));
                            }
                            offset += n as u64;
                            bytes_read.fetch_add(n as u64, Ordering::Relaxed);
                            progress.fetch_add(1, Ordering::SeqCst);
                        }
                        if offset != len {
                            return Err(format!("{rel}: read {offset} of {len} bytes"));
                        }
                    } else {
                        for _ in 0..8 {
                            let offset = rng.gen_range(0..=len);
                            let size = rng.gen_range(1..=300 * 1024);
                            let mut buf = vec![0u8; size];
                            let mut got = 0;
                            while got < size {
                                let n = file
                                    .read_at(&mut buf[got..], offset + got as u64)
                                    .map_err(|e| format!("{rel}@{offset}: {e}"))?;
                                if n == 0 {
                                    break;
                                }
                                got += n;
                            }
                            let end = (offset as usize + size).min(want.len());
                            if buf[..got] != want[offset as usize..end] {
                                return Err(format!("{rel}: wrong bytes at {offset}+{got}"));
                            }
                            bytes_read.fetch_add(got as u64, Ordering::Relaxed);
                            progress.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
                Ok(())
            })
        })
        .collect();
    let mut failures = Vec::new();
    for reader in readers {
        match reader.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(e),
            Err(_) => failures.push("reader panicked".into()),
        }
    }
    done.store(true, Ordering::SeqCst);
    let _ = watchdog.join();
    let peak = peak_rss(pid);
    let ops = progress.load(Ordering::SeqCst);
    let total_bytes = bytes_read.load(Ordering::Relaxed);
    eprintln!(
        "stress: {THREADS} threads, {ops} reads, {} MiB checked, daemon peak RSS {} MiB",
        total_bytes >> 20,
        peak >> 20
    );
    assert!(
        !stalled.load(Ordering::SeqCst),
        "no progress for {STALL:?}: deadlock?"
    );
    assert!(failures.is_empty(), "{failures:?}\n{}", mount.log_text());
    assert!(ops > 100, "only {ops} reads");
    assert!(
        peak > 0 && peak <= CACHE + (64 << 20),
        "daemon peak RSS {peak} over cache + 64 MiB"
    );
    assert!(std::fs::metadata(mount.path("records")).unwrap().is_dir());
    let status = mount.unmount();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}
