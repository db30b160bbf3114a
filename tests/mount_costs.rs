//! The mounted tree's cost promises, checked on the FUSE-free core with a store that records
//! every object read: mounting reads root.json and the snapshot only; listing `records/` reads
//! nothing; `stat` of a field reads one manifest page and one metadata row; only reading tensor
//! bytes touches a data shard. Listings resume exactly at any offset. An ordinal scan keeps a
//! window of records decoded ahead, within the shard being read and a quarter of the cache
//! only, and reads each metadata row once. A column scan's window is in bytes and crosses
//! shards; a random column read decodes only its records; `records.jsonl` is the same kept
//! whole or built from rows.

mod common;

use std::sync::Arc;

use common::datasets::{Counting as _, CountingStore};
use sdsfs::dataset::{publish, write_shard, Dataset, OpenOptions, PublishOptions, ShardOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::record::{Axis, Field, Record};
use sdsfs::fs::inode::Ino;
use sdsfs::fs::namespace::{DirEntry, Kind, Namespace, NamespaceConfig};
use sdsfs::storage::{LocalStore, ObjectStore};

fn record(i: u64) -> Record {
    Record::new(format!("r{i}"))
        .with_scene_id(format!("s{}", i % 3))
        .with_field(
            "a/iq",
            Field::new(DType::C64, vec![4], vec![i as u8; 32])
                .unwrap()
                .with_axes(vec![Axis::new("t", 4)]),
        )
        .with_field(
            "b",
            Field::new(DType::U8, vec![2], vec![1, 2])
                .unwrap()
                .with_axes(vec![Axis::new("n", 2)]),
        )
}

fn dataset(records: u64, per_shard: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let receipts: Vec<_> = (0..records)
        .collect::<Vec<_>>()
        .chunks(per_shard as usize)
        .enumerate()
        .map(|(w, ords)| {
            write_shard(
                &store,
                ords.iter().map(|&i| record(i)),
                &format!("w{w}"),
                0,
                &ShardOptions::default(),
            )
            .unwrap()
        })
        .collect();
    let mut options = PublishOptions::new("costs", "s1");
    options.shards_per_manifest = 2;
    publish(&store, &receipts, &options).unwrap();
    dir
}

fn mount_core(dir: &std::path::Path) -> (Arc<CountingStore>, Namespace) {
    mount_core_with(dir, NamespaceConfig::default())
}

fn mount_core_with(
    dir: &std::path::Path,
    config: NamespaceConfig,
) -> (Arc<CountingStore>, Namespace) {
    let local: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir).unwrap());
    let counting = Arc::new(CountingStore::new(local));
    let store: Arc<dyn ObjectStore> = counting.clone();
    let dataset = Dataset::open(store, OpenOptions::default()).unwrap();
    (counting, Namespace::new(Arc::new(dataset), config))
}

fn list(ns: &Namespace, ino: u64) -> Vec<DirEntry> {
    let mut out = Vec::new();
    ns.read_dir(ino, 0, |e, _| {
        out.push(e);
        false
    })
    .unwrap();
    out
}

#[test]
fn costs_do_not_grow_with_the_dataset() {
    let dir = dataset(40, 4);
    let (store, ns) = mount_core(dir.path());
    let opened = store.take_paths();
    assert!(
        opened
            .iter()
            .all(|p| p == "root.json" || p.starts_with("snapshots/")),
        "{opened:?}"
    );

    let records = list(&ns, Ino::Records.encode());
    assert_eq!(records.len(), 42);
    assert_eq!(records[2].name, "00");
    assert_eq!(records[41].name, "39");
    let record_dir = ns.lookup(Ino::Records.encode(), "17").unwrap();
    assert_eq!(record_dir.kind, Kind::Dir);
    // ".", "..", annotations, fields, preview.png, record.json, record.sigmf-collection.
    assert_eq!(list(&ns, record_dir.ino).len(), 7);
    assert!(ns.lookup(Ino::Records.encode(), "40").is_err());
    assert!(
        ns.lookup(Ino::Records.encode(), "7").is_err(),
        "names are zero-padded"
    );
    assert_eq!(
        store.take_paths(),
        Vec::<String>::new(),
        "listing records/ and a record dir reads nothing"
    );

    // stat of a field file: one manifest page, one metadata shard; never a data shard.
    let fields = ns.lookup(record_dir.ino, "fields").unwrap();
    let a = ns.lookup(fields.ino, "a").unwrap();
    let raw = ns.lookup(a.ino, "iq.raw").unwrap();
    assert_eq!(raw.size, 32);
    let touched = store.take_paths();
    assert!(
        touched.iter().any(|p| p.starts_with("manifests/")),
        "{touched:?}"
    );
    assert!(
        touched.iter().any(|p| p.starts_with("objects/metadata/")),
        "{touched:?}"
    );
    assert!(
        !touched.iter().any(|p| p.starts_with("objects/data/")),
        "{touched:?}"
    );
    // Cached: a second stat reads nothing.
    ns.getattr(raw.ino).unwrap();
    ns.lookup(a.ino, "iq.npy").unwrap();
    assert_eq!(store.take_paths(), Vec::<String>::new());

    // Reading tensor bytes touches the data shard once; other views of the record reuse it.
    let bytes = ns.read(raw.ino, 0, 4096).unwrap();
    assert_eq!(&bytes[..], &[17u8; 32][..]);
    assert!(store
        .take_paths()
        .iter()
        .any(|p| p.starts_with("objects/data/")));
    let npy = ns.lookup(a.ino, "iq.npy").unwrap();
    let npy_bytes = ns.read(npy.ino, 0, 4096).unwrap();
    assert_eq!(npy_bytes.len() as u64, npy.size);
    assert!(
        !store
            .take_paths()
            .iter()
            .any(|p| p.starts_with("objects/data/")),
        "decoded once"
    );
}

#[test]
fn listings_resume_at_any_offset() {
    let dir = dataset(25, 5);
    let (_store, ns) = mount_core(dir.path());
    for ino in [
        Ino::Root.encode(),
        Ino::Records.encode(),
        Ino::ById.encode(),
        Ino::ByScene.encode(),
    ] {
        let whole = list(&ns, ino);
        for start in 0..whole.len() as u64 {
            let mut rest = Vec::new();
            ns.read_dir(ino, start, |e, next| {
                rest.push((e, next));
                rest.len() == 3 // a "full buffer" after three entries
            })
            .unwrap();
            for (k, (entry, next)) in rest.iter().enumerate() {
                assert_eq!(entry, &whole[start as usize + k]);
                assert_eq!(*next, start + k as u64 + 1);
            }
        }
    }
}

#[test]
fn inode_numbers_are_stable_and_distinct() {
    let dir = dataset(6, 3);
    let (_store, ns) = mount_core(dir.path());
    let mut seen = std::collections::HashMap::new();
    let mut stack = vec![("".to_string(), Ino::Root.encode())];
    while let Some((path, ino)) = stack.pop() {
        for entry in list(&ns, ino).into_iter().skip(2) {
            let child = format!("{path}/{}", entry.name);
            if let Some(previous) = seen.insert(entry.ino, child.clone()) {
                // A directory reached twice (a symlink target is not followed) is a bug.
                panic!("inode {} shared by {previous} and {child}", entry.ino);
            }
            assert_eq!(
                ns.lookup(ino, &entry.name).unwrap().ino,
                entry.ino,
                "{child}"
            );
            assert_eq!(ns.getattr(entry.ino).unwrap().kind, entry.kind);
            if entry.kind == Kind::Dir {
                stack.push((child, entry.ino));
            }
        }
    }
    assert!(seen.len() > 60, "{}", seen.len());
}

/// The inode of `records/<ordinal>/fields/a/iq.raw` (two-digit names: 40 records).
fn iq_raw(ns: &Namespace, ordinal: u64) -> u64 {
    let dir = ns
        .lookup(Ino::Records.encode(), &format!("{ordinal:02}"))
        .unwrap();
    let fields = ns.lookup(dir.ino, "fields").unwrap();
    let a = ns.lookup(fields.ino, "a").unwrap();
    ns.lookup(a.ino, "iq.raw").unwrap().ino
}

/// Records the cache has decoded (its misses) so far.
fn misses(ns: &Namespace) -> u64 {
    ns.record_cache()
        .counters()
        .misses
        .load(std::sync::atomic::Ordering::Relaxed)
}

/// Waits until the cache has decoded `count` records; `what` names the one awaited.
fn wait_for_misses(ns: &Namespace, count: u64, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while misses(ns) < count {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} never decoded ahead"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn an_ordinal_scan_decodes_the_next_record_ahead_within_the_shard() {
    let dir = dataset(40, 4);
    let (_store, ns) = mount_core(dir.path());
    // A random read (record 9) decodes nothing ahead.
    assert_eq!(&ns.read(iq_raw(&ns, 9), 0, 64).unwrap()[..], &[9u8; 32][..]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(misses(&ns), 1);
    // A step from record 0 to record 1 (shard 0..4) starts the decoding of record 2 ...
    for ordinal in [0, 1] {
        let bytes = ns.read(iq_raw(&ns, ordinal), 0, 64).unwrap();
        assert_eq!(&bytes[..], &[ordinal as u8; 32][..]);
    }
    wait_for_misses(&ns, 4, "record 2");
    // ... so reading it is a hit with the right bytes.
    assert_eq!(&ns.read(iq_raw(&ns, 2), 0, 64).unwrap()[..], &[2u8; 32][..]);
    // (That step decoded record 3 ahead.) Record 3 ends the shard: the step to it decodes
    // nothing of the next shard (record 4).
    assert_eq!(&ns.read(iq_raw(&ns, 3), 0, 64).unwrap()[..], &[3u8; 32][..]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(misses(&ns), 5, "9, 0, 1, then 2 and 3 ahead; 4 left alone");
}

/// A mount of `dir` whose in-memory cache holds `cache_bytes` of decoded records.
fn mount_core_with_cache(dir: &std::path::Path, cache_bytes: u64) -> Namespace {
    let mut config = NamespaceConfig::default();
    config.cache.memory_bytes = cache_bytes;
    mount_core_with(dir, config).1
}

#[test]
fn a_scan_keeps_a_window_of_records_decoded_ahead() {
    use sdsfs::fs::cache::AHEAD_RECORDS;
    let dir = dataset(40, 20);
    let (_store, ns) = mount_core(dir.path());
    for ordinal in [0, 1] {
        ns.read(iq_raw(&ns, ordinal), 0, 64).unwrap();
    }
    // The step to record 1 fills the window 2 ..= 1 + AHEAD_RECORDS, and no further.
    let window_end = 1 + AHEAD_RECORDS;
    wait_for_misses(&ns, window_end + 1, &format!("record {window_end}"));
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(misses(&ns), window_end + 1, "decoded past the window");
    // Each further step moves the window by one record: one more decode, and the reads hit.
    for ordinal in 2..=4 {
        let bytes = ns.read(iq_raw(&ns, ordinal), 0, 64).unwrap();
        assert_eq!(&bytes[..], &[ordinal as u8; 32][..]);
        wait_for_misses(&ns, ordinal + AHEAD_RECORDS + 1, "the window's new end");
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(misses(&ns), 4 + AHEAD_RECORDS + 1);
}

#[test]
fn the_window_ahead_holds_at_most_a_quarter_of_the_cache() {
    let dir = dataset(40, 20);
    // Every payload here is the same size; a quarter of this cache holds two of them.
    let probe = mount_core_with_cache(dir.path(), 1 << 30);
    let location = probe.dataset().locate(0).unwrap();
    let payload = probe.dataset().payload_len(&location).unwrap();
    let ns = mount_core_with_cache(dir.path(), 4 * (2 * payload + payload / 2));
    for ordinal in [0, 1] {
        ns.read(iq_raw(&ns, ordinal), 0, 64).unwrap();
    }
    wait_for_misses(&ns, 4, "records 2 and 3");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(misses(&ns), 4, "only two records fit in the window");
}

#[test]
fn a_record_that_fails_to_decode_ahead_is_not_retried_in_a_loop() {
    use sdsfs::arrayrecord::ArrayRecordReader;
    let dir = dataset(40, 20);
    // Corrupt record 3's chunk (inside the window of a step from 0 to 1).
    let (_store, probe) = mount_core(dir.path());
    let location = probe.dataset().locate(3).unwrap();
    let path = dir
        .path()
        .join(location.entry().unwrap().data.path.as_str());
    let span = {
        let file = std::fs::File::open(&path).unwrap();
        let reader = ArrayRecordReader::open(file, "shard").unwrap();
        reader.chunk_span(location.physical_index).unwrap()
    };
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[((span.start + span.end) / 2) as usize] ^= 0x55;
    std::fs::write(&path, bytes).unwrap();

    let (store, ns) = mount_core(dir.path());
    for ordinal in [0, 1] {
        ns.read(iq_raw(&ns, ordinal), 0, 64).unwrap();
    }
    wait_for_misses(&ns, 4, "record 2 and the corrupt record 3");
    store.take_paths();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let data_reads = store
        .content_reads()
        .iter()
        .filter(|path| path.starts_with("objects/data/"))
        .count();
    // (At most the reads of the decode under way when the count was cleared.)
    assert!(
        data_reads <= 3,
        "the worker kept reading: {data_reads} data-shard reads"
    );
    // The read that needs it reports the corruption; the mount goes on.
    assert!(ns.read(iq_raw(&ns, 3), 0, 64).is_err());
    assert_eq!(&ns.read(iq_raw(&ns, 4), 0, 64).unwrap()[..], &[4u8; 32][..]);
}

/// Content reads of metadata shards since the last clear.
fn metadata_reads(store: &CountingStore) -> usize {
    store
        .content_reads()
        .iter()
        .filter(|path| path.starts_with("objects/metadata/"))
        .count()
}

#[test]
fn an_ordinal_scan_reads_each_metadata_row_once() {
    let dir = dataset(40, 4);
    // The first shard. Reference: looking each record up reads its row once (plus the
    // shard's index).
    let ordinals = 0..4u64;
    let (store, ns) = mount_core(dir.path());
    for ordinal in ordinals.clone() {
        iq_raw(&ns, ordinal);
    }
    let lookups_only = metadata_reads(&store);

    // A scan: the decode-ahead worker reads the next record's row for its decoding, and the
    // lookups of that record must find it (each step waits for the worker, so the order is
    // fixed: the worker always comes first).
    let (store, ns) = mount_core(dir.path());
    for ordinal in ordinals {
        // Records 0 and 1 are decoded by their reads; 2 and 3 ahead, by the worker.
        let decoded_by_then = if ordinal < 2 { ordinal } else { ordinal + 1 };
        wait_for_misses(&ns, decoded_by_then, &format!("record {ordinal}"));
        let bytes = ns.read(iq_raw(&ns, ordinal), 0, 64).unwrap();
        assert_eq!(&bytes[..], &[ordinal as u8; 32][..]);
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(misses(&ns), 4, "records 2 and 3 were decoded ahead");
    assert_eq!(metadata_reads(&store), lookups_only, "a row was read twice");
}

/// The attributes of `columns/<path>`.
fn column_attr(ns: &Namespace, path: &str) -> sdsfs::fs::namespace::Attr {
    let mut attr = ns.lookup(Ino::Root.encode(), "columns").unwrap();
    for name in path.split('/') {
        attr = ns.lookup(attr.ino, name).unwrap();
    }
    attr
}

#[test]
fn column_sizes_read_no_data_shard_and_a_read_decodes_only_the_records_it_covers() {
    let dir = dataset(40, 4);
    let (store, ns) = mount_core(dir.path());
    store.take_paths();
    // 40 records of 32 bytes; `b` is uniform (2,) uint8: a 128-byte NumPy header, 80 bytes.
    let raw = column_attr(&ns, "a/iq.raw");
    assert_eq!(raw.size, 40 * 32);
    assert_eq!(column_attr(&ns, "b.npy").size, 128 + 40 * 2);
    let first_line = "{\"id\":\"r0\",\"metadata\":{},\"ordinal\":0,\"scene_id\":\"s0\"}\n";
    let lines = column_attr(&ns, "records.jsonl");
    assert_eq!(
        &ns.read(lines.ino, 0, first_line.len() as u32).unwrap()[..],
        first_line.as_bytes()
    );
    let touched = store.take_paths();
    assert!(
        !touched.iter().any(|p| p.starts_with("objects/data/")),
        "sizes and lines read a data shard: {touched:?}"
    );

    // Records 10, 11 and 12 (shards 8..12 and 12..16): those three are decoded, no other.
    let decoded = misses(&ns);
    let bytes = ns.read(raw.ino, 10 * 32, 3 * 32).unwrap();
    let expected: Vec<u8> = [10u8, 11, 12].iter().flat_map(|&i| [i; 32]).collect();
    assert_eq!(&bytes[..], &expected[..]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(misses(&ns), decoded + 3, "a random read decoded ahead");
    let paths = store.take_paths();
    let mut data: Vec<&String> = paths
        .iter()
        .filter(|p| p.starts_with("objects/data/"))
        .collect();
    data.dedup();
    assert_eq!(data.len(), 2, "{data:?}");
    // The index read every row once: decodes check payloads against the fingerprints it
    // kept, reading no row again.
    let rows: Vec<&String> = paths
        .iter()
        .filter(|p| p.starts_with("objects/metadata/"))
        .collect();
    assert!(rows.is_empty(), "a column read read rows: {rows:?}");

    // The next read continues the scan: the records after it are decoded ahead, by bytes
    // (COLUMN_AHEAD_BYTES, far more than these 27 small records) and across shards, to the
    // column's end; records 0 to 9 stay untouched.
    let bytes = ns.read(raw.ino, 13 * 32, 32).unwrap();
    assert_eq!(&bytes[..], &[13u8; 32][..]);
    wait_for_misses(&ns, decoded + 4 + 26, "record 39");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(misses(&ns), decoded + 30, "decoded outside 10..40");
    assert_eq!(metadata_reads(&store), 0, "a column scan read rows");
}

#[test]
fn a_column_scan_lets_go_of_the_records_it_has_read_through() {
    let dir = dataset(40, 4);
    let (_store, ns) = mount_core(dir.path());
    let raw = column_attr(&ns, "a/iq.raw");
    // Records 0 and 1 (records of 32 bytes), then 2 continuing the scan: the window after it
    // is decoded ahead, to the column's end.
    assert_eq!(
        &ns.read(raw.ino, 0, 64).unwrap()[..],
        &[[0u8; 32], [1; 32]].concat()[..]
    );
    let before = misses(&ns);
    assert_eq!(&ns.read(raw.ino, 64, 32).unwrap()[..], &[2u8; 32][..]);
    wait_for_misses(&ns, before + 1 + 37, "record 39");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let decoded = misses(&ns);
    assert_eq!(decoded, before + 38);
    // Record 2 was read through by the scan: it is decoded again when read elsewhere.
    assert_eq!(&ns.read(raw.ino, 64, 32).unwrap()[..], &[2u8; 32][..]);
    assert_eq!(
        misses(&ns),
        decoded + 1,
        "a record the scan read through stayed cached"
    );
    // Records decoded ahead and not read yet are kept: reading them decodes nothing.
    assert_eq!(
        &ns.read(raw.ino, 5 * 32, 64).unwrap()[..],
        &[[5u8; 32], [6; 32]].concat()[..]
    );
    assert_eq!(
        misses(&ns),
        decoded + 1,
        "records decoded ahead were dropped"
    );
}

#[test]
fn with_one_thread_a_column_scan_decodes_only_what_it_reads() {
    let dir = dataset(40, 4);
    let config = NamespaceConfig {
        threads: 1,
        ..Default::default()
    };
    let (_store, ns) = mount_core_with(dir.path(), config);
    let raw = column_attr(&ns, "a/iq.raw");
    let before = misses(&ns);
    // Records 0 to 9, one read each, in order: a scan that two threads would decode ahead of
    // (see the test above), to the column's end.
    for record in 0..10u8 {
        let bytes = ns.read(raw.ino, u64::from(record) * 32, 32).unwrap();
        assert_eq!(&bytes[..], &[record; 32][..]);
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(
        misses(&ns),
        before + 10,
        "--threads 1 decoded records no read asked for"
    );
}

/// `columns/records.jsonl` of the `dataset` helper's first `records` records, by hand.
fn expected_lines(records: u64) -> String {
    (0..records)
        .map(|i| {
            format!(
                "{{\"id\":\"r{i}\",\"metadata\":{{}},\"ordinal\":{i},\"scene_id\":\"s{}\"}}\n",
                i % 3
            )
        })
        .collect()
}

/// Reads the whole of `ino` in reads of `chunk` bytes.
fn read_whole(ns: &Namespace, ino: u64, size: u64, chunk: u32) -> Vec<u8> {
    let mut out = Vec::new();
    while (out.len() as u64) < size {
        let bytes = ns.read(ino, out.len() as u64, chunk).unwrap();
        assert!(!bytes.is_empty(), "short read at {}", out.len());
        out.extend_from_slice(&bytes);
    }
    out
}

#[test]
fn records_jsonl_is_the_same_kept_whole_or_built_from_rows() {
    // 3,000 lines of about 60 bytes: about 175 KiB, within a sixteenth of 1 GiB (kept whole
    // by the index) and more than a sixteenth of 2 MiB (built from the rows each read covers).
    let records = 3000;
    let dir = dataset(records, 500);
    let expected = expected_lines(records);
    assert!(expected.len() as u64 > (2 << 20) / 16);
    for cache_bytes in [1u64 << 30, 2 << 20] {
        let config = NamespaceConfig {
            cache: sdsfs::fs::cache::CacheConfig::for_cache_size(cache_bytes),
            ..Default::default()
        };
        let (_store, ns) = mount_core_with(dir.path(), config);
        let lines = column_attr(&ns, "records.jsonl");
        assert_eq!(lines.size, expected.len() as u64, "cache {cache_bytes}");
        // Reads of 128 KiB and of an odd size, so they start and end inside lines.
        for chunk in [128 << 10, 4093] {
            let text = read_whole(&ns, lines.ino, lines.size, chunk);
            let what = format!("cache {cache_bytes}, reads of {chunk}");
            assert_eq!(String::from_utf8(text).unwrap(), expected, "{what}");
        }
    }
}
