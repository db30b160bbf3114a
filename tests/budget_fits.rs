//! The budget serves what fits and stays within itself (issue 37, item 7): units that each fit
//! `--cache-size` are served however many requests want them at once, and peak RSS (VmHWM from
//! `/proc`) stays within the budget plus 64 MiB, with the parse of every large control
//! document (manifest pages, the annotation catalog's revision) charged before it runs. Each
//! dataset is built here, small on disk and large once parsed.

mod common;

use common::datasets::*;
use common::hostile::{page_rel, read_json, reseal, snapshot_rel, write_json};
use common::mount::{peak_rss, MountGuard};
use sdsfs::dataset::{publish, write_shard, PublishOptions, ShardOptions};
use sdsfs::format::json::Value;
use sdsfs::format::record::Record;

const MIB: u64 = 1 << 20;
/// What the daemon may take beyond its budget.
const OVERHEAD: u64 = 64 * MIB;

/// `records`, written as one shard (one record a chunk) and published in a temporary directory.
fn published(records: impl Iterator<Item = Record>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = local_store(dir.path());
    let shard = ShardOptions::default();
    let receipt = write_shard(store.as_ref(), records, "work-000", 0, &shard).unwrap();
    publish(
        store.as_ref(),
        &[receipt],
        &PublishOptions::new("fits", "v1"),
    )
    .unwrap();
    dir
}

/// The daemon's peak RSS, checked against `budget` + [`OVERHEAD`].
fn peak_within(mount: &MountGuard, budget: u64, case: &str) -> u64 {
    let peak = peak_rss(mount.pid());
    assert!(peak > 0, "VmHWM read");
    assert!(
        peak <= budget + OVERHEAD,
        "{case}: peak RSS {} MiB above the budget of {} MiB + {} MiB",
        peak / MIB,
        budget / MIB,
        OVERHEAD / MIB
    );
    eprintln!("{case}: peak RSS {} MiB", peak / MIB);
    peak
}

/// `stat`s of `records/<n>/record.json` for every `n` of `ordinals` (named with `width`
/// digits, as the mount pads them), from `threads` threads at once (thread `t` takes every
/// `threads`-th); the sizes, or the errors naming the ordinal.
fn stats_from_threads(
    width: usize,
    mount: &MountGuard,
    ordinals: &[u64],
    threads: usize,
) -> Vec<Result<u64, String>> {
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let mine: Vec<u64> = ordinals.iter().copied().skip(t).step_by(threads).collect();
                scope.spawn(move || {
                    mine.iter()
                        .map(|n| {
                            std::fs::metadata(
                                mount.path(&format!("records/{n:0width$}/record.json")),
                            )
                            .map(|m| m.len())
                            .map_err(|e| format!("record {n}: {e}"))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    })
}

fn all_served(results: &[Result<u64, String>], mount: &MountGuard) -> Vec<u64> {
    let errors: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(errors.is_empty(), "{errors:?}\n{}", tail(&mount.log_text()));
    results
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect()
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Rows of one 4 MiB string each: a row, its parse and its record's tree fit 16 MiB, so four
/// threads stat-ing them at once are all served, one after another where they must wait.
#[test]
fn rows_of_4_mib_are_served_to_4_threads_at_16_mib() {
    let blob = "x".repeat(4 << 20);
    let records = (0..8).map(|i| {
        Record::new(format!("blob-{i}"))
            .with_metadata(obj(&[("blob", Value::from(blob.as_str()))]))
            .with_field("iq", iq_capture(vec![0u8; 64]))
    });
    let dir = published(records);
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "16M"]);
    let ordinals: Vec<u64> = (0..8).chain(0..8).collect();
    let sizes = all_served(&stats_from_threads(1, &mount, &ordinals, 4), &mount);
    assert!(sizes.iter().all(|&size| size > 4 * MIB), "{sizes:?}");
    peak_within(&mount, 16 * MIB, "8 rows of 4 MiB, 4 threads, 16 MiB");
}

/// A dataset of two records on two manifest pages, each page then made to list 100,000
/// shard entries (every entry the page's one shard again, one record each: valid, and 40 MB
/// of text a page).
fn two_pages_of_100_000_entries() -> tempfile::TempDir {
    const ENTRIES: u64 = 100_000;
    let published = publish_dataset(&[1, 1], 1);
    let dir = copy_tree(published.root(), |_| false);
    let snapshot_path = dir.path().join(snapshot_rel(dir.path()));
    let mut snapshot = read_json(&snapshot_path);
    for page_index in 0..2 {
        let page_path = dir.path().join(page_rel(dir.path(), page_index));
        let mut page = read_json(&page_path);
        let first = page_index as u64 * ENTRIES;
        let entry = page["shards"][0].clone();
        let entries: Vec<serde_json::Value> = (0..ENTRIES)
            .map(|i| {
                let mut entry = entry.clone();
                entry["first_ordinal"] = (first + i).into();
                entry
            })
            .collect();
        page["shards"] = entries.into();
        page["first_ordinal"] = first.into();
        page["record_count"] = ENTRIES.into();
        write_json(&page_path, &page);
        let reference = &mut snapshot["manifests"][page_index];
        reference["first_ordinal"] = first.into();
        reference["record_count"] = ENTRIES.into();
        reference["shard_count"] = ENTRIES.into();
    }
    snapshot["record_count"] = (2 * ENTRIES).into();
    if snapshot.get("shard_count").is_some() {
        snapshot["shard_count"] = (2 * ENTRIES).into();
    }
    write_json(&snapshot_path, &snapshot);
    reseal(dir.path());
    dir
}

/// Eight concurrent first reads, four on each of two 100,000-entry pages: a page's parse is
/// priced from its text before it runs (300,000 small objects in 40 MB: about 190 MB with the
/// page built from them, measured about 130 MB), so one page is parsed at a time and then
/// keeps what it holds (about 30 MB), and every read is served within 256 MiB.
#[test]
fn first_reads_of_two_huge_manifest_pages_are_served_within_256_mib() {
    let dir = two_pages_of_100_000_entries();
    let page_bytes = std::fs::metadata(dir.path().join(page_rel(dir.path(), 0)))
        .unwrap()
        .len();
    assert!(page_bytes > 30_000_000, "a page of {page_bytes} bytes");
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "256M"]);
    let ordinals = [0, 1, 99_998, 99_999, 100_000, 100_001, 199_998, 199_999];
    let sizes = all_served(&stats_from_threads(6, &mount, &ordinals, 8), &mount);
    assert!(sizes.iter().all(|&size| size > 0), "{sizes:?}");
    peak_within(
        &mount,
        256 * MIB,
        "two pages of 100,000 entries, 8 readers, 256 MiB",
    );
}

/// A dataset whose annotation catalog names `sets` sets: "aaa", published for real, and
/// `sets - 1` whose set roots (where the layout puts them) do not exist (each hidden, with a
/// reason).
fn catalog_of(sets: usize) -> tempfile::TempDir {
    use sdsfs::annotations::{publish_annotations, AnnotationOptions, AnnotationRecord};
    let records =
        (0..2).map(|i| Record::new(format!("r{i}")).with_field("iq", iq_capture(vec![0; 8])));
    let dir = published(records);
    let dataset = sdsfs::dataset::Dataset::open(
        local_store(dir.path()),
        sdsfs::dataset::OpenOptions::default(),
    )
    .unwrap();
    let status = sdsfs::annotations::AnnotationStatus::Success;
    let rows = vec![
        AnnotationRecord::new("r0", 0, status),
        AnnotationRecord::new("r1", 1, status),
    ];
    let options = AnnotationOptions::default();
    publish_annotations(&dataset, "aaa", &rows, &Default::default(), &options).unwrap();
    let pointer_path = dir.path().join("annotations/catalog.json");
    let mut pointer = read_json(&pointer_path);
    let revision_rel = pointer["revision"]["path"].as_str().unwrap().to_string();
    let mut revision = read_json(&dir.path().join(&revision_rel));
    let real = revision["sets"]["aaa"].clone();
    let real_path = real["path"].as_str().unwrap().to_string();
    let named = revision["sets"].as_object_mut().unwrap();
    for i in 1..sets {
        let name = format!("set-{i:06}");
        let mut missing = real.clone();
        missing["path"] = real_path.replace("/aaa/", &format!("/{name}/")).into();
        named.insert(name, missing);
    }
    let text = serde_json::to_vec(&revision).unwrap();
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&text));
    let rel = format!("annotations/catalogs/{digest}.json");
    std::fs::write(dir.path().join(&rel), &text).unwrap();
    pointer["revision"]["path"] = rel.into();
    write_json(&pointer_path, &pointer);
    dir
}

/// The sets `records/0/annotations/` shows, or the error.
fn shown_sets(mount: &MountGuard) -> Vec<String> {
    std::fs::read_dir(mount.path("records/0/annotations"))
        .map(|dir| {
            dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_else(|e| panic!("{e}\n{}", tail(&mount.log_text())))
}

/// A catalog revision of 24 MB naming 240,000 sets. Its parse is priced before it runs: at
/// 16 MiB it does not fit, the annotations are hidden with one line naming the revision and
/// the budget, and memory stays within the budget. At 768 MiB (its price: about 550 MB) it is read, the one good set
/// is shown, and the 239,999 hidden sets make one log line with their count (not one each).
#[test]
fn a_catalog_of_240_000_sets_is_priced_and_logs_one_line_for_its_hidden_sets() {
    let sets = 240_000;
    let dir = catalog_of(sets);
    let revision_bytes: u64 = std::fs::read_dir(dir.path().join("annotations/catalogs"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .max()
        .unwrap();
    assert!(revision_bytes > 20_000_000, "{revision_bytes} bytes");

    let mount = MountGuard::mount(dir.path(), &["--cache-size", "16M"]);
    assert!(shown_sets(&mount).is_empty());
    peak_within(&mount, 16 * MIB, "catalog of 240,000 sets, 16 MiB");
    let log = mount.log_text();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("annotations/catalogs/"))
        .collect();
    // Once per catalog read (the mount's, and the watcher's ticks meanwhile).
    assert!((1..=3).contains(&refused.len()), "{refused:?}");
    assert!(
        refused[0].contains("memory budget") && refused[0].contains("--cache-size"),
        "{}",
        refused[0]
    );
    drop(mount);

    let mount = MountGuard::mount(dir.path(), &["--cache-size", "768M"]);
    assert_eq!(shown_sets(&mount), ["aaa"], "{}", tail(&mount.log_text()));
    peak_within(&mount, 768 * MIB, "catalog of 240,000 sets, 768 MiB");
    let log = mount.log_text();
    assert!(log.len() < 64 << 10, "{} bytes of log", log.len());
    // One line per catalog read (the watcher's and the request's), each with the count.
    let hidden: Vec<&str> = log.lines().filter(|l| l.contains("hidden")).collect();
    assert!((1..=3).contains(&hidden.len()), "{hidden:?}");
    for line in &hidden {
        assert!(
            line.contains(&format!("{}", sets - 1)),
            "the count of hidden sets: {line}"
        );
    }
}

/// Records of 2,000 small IQ fields each (a row of 564 KB, 10,000 small JSON objects): a
/// record's tree keeps its row as text and parses a field when asked, so the row's reading
/// is priced at about its text (its members located, then its two largest fields parsed at a
/// time) and the tree at about 2 MB, and `stat`s from 4 threads are all served at
/// `--cache-size 4M`, one tree at a time where they must wait. (Before, the row's parse was
/// priced 4.9 MB and its tree of typed fields 3.8 MB: every stat was refused at 4M.)
#[test]
fn records_of_2_000_fields_are_served_at_4_mib() {
    let records = (0..4).map(|i| {
        (0..2_000).fold(Record::new(format!("wide-{i}")), |record, f| {
            record.with_field(format!("f{f:04}"), iq_capture(vec![0u8; 8]))
        })
    });
    let dir = published(records);
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "4M"]);
    let ordinals: Vec<u64> = (0..4).chain(0..4).collect();
    let sizes = all_served(&stats_from_threads(1, &mount, &ordinals, 4), &mount);
    assert!(sizes.iter().all(|&size| size > 1_000_000), "{sizes:?}");
    let listed = std::fs::read_dir(mount.path("records/2/fields"))
        .unwrap()
        .count();
    assert_eq!(listed, 2_000 * 6, "six files a field");
    let meta = std::fs::read_to_string(mount.path("records/3/fields/f1999.sigmf-meta")).unwrap();
    assert!(meta.contains("\"core:sample_rate\": 1000000"), "{meta}");
    let record_json = std::fs::read(mount.path("records/3/record.json")).unwrap();
    assert_eq!(record_json.len() as u64, sizes[3]);
    let json = std::fs::read_to_string(mount.path("records/1/fields/f0007.json")).unwrap();
    assert!(json.contains("\"name\": \"f0007\""), "{json}");
    peak_within(&mount, 4 * MIB, "records of 2,000 fields, 4 MiB");
}

/// A dataset written by the library whose records each hold 2,500 IQ fields with metadata of
/// their own (a row of about 900 KB). Mounted at `--cache-size 8M`, every file of the second
/// record is what the library reads (`library_tool.py check-records`: `record.json`, each field's
/// `.raw`, `.npy`, `.json` and SigMF pair, the collection, the preview). Mounted at 4M, its
/// listings, `record.json`, every field's `.json` and size, and some fields' `.raw` are served
/// and equal those. (A SigMF document or picture of such a record needs its tree and the
/// decoded record's header and descriptor at once, more than 4 MiB: refused there with a line
/// naming the budget.) Memory stays within each budget.
#[test]
fn a_library_dataset_of_2_500_field_records_reads_as_the_library_reads_it() {
    use common::library;
    let time = serde_json::json!({"start": 0.0, "step": 1e-6, "unit": "s"});
    let record = |n: usize| {
        let mut fields = serde_json::Map::new();
        for i in 0..2_500 {
            let metadata = serde_json::json!({
                "center_frequency_hz": 1e9 + i as f64,
                "gain_db": 1.5 * i as f64,
                "note": format!("é\u{2028} {i}"),
                "time_coordinates": {"kind": "uniform", "sample_rate_hz": 1e6},
            });
            let axes = serde_json::json!([{"name": "time", "coordinate": time}]);
            let field = serde_json::json!({"dtype": "complex64", "shape": [16], "seed": n * 10_000 + i,
                "axes": axes, "metadata": metadata});
            fields.insert(format!("rx{i:04}/iq"), field);
        }
        serde_json::json!({"id": format!("wide-{n}"), "metadata": {"n": n, "big": 1e300},
            "fields": fields})
    };
    let spec = serde_json::json!({
        "dataset_id": "wide", "snapshot_id": "wide-1",
        "records": [record(0), record(1)],
        "shards": [{"start": 0, "stop": 2, "work_id": "w0", "attempts": [0]}],
    });
    let dir = tempfile::tempdir().unwrap();
    let spec_path = dir.path().join("spec.json");
    std::fs::write(&spec_path, serde_json::to_vec(&spec).unwrap()).unwrap();
    let out = dir.path().join("out");
    let text = |p: &std::path::Path| p.to_string_lossy().into_owned();
    library::tool(library::CURRENT, &["write", &text(&spec_path), &text(&out)]);
    let root = out.join("dataset");

    let checked_mount = MountGuard::mount(&root, &["--cache-size", "8M"]);
    let checked = library::tool_output(
        library::CURRENT,
        &[
            "check-records",
            &text(&root),
            &text(&checked_mount.mountpoint),
            "1",
        ],
    );
    assert!(
        checked.status.success(),
        "the mount differs from the library:\n{}\n{}",
        String::from_utf8_lossy(&checked.stderr),
        tail(&checked_mount.log_text())
    );
    println!("8 MiB: {}", String::from_utf8_lossy(&checked.stdout).trim());

    let small = MountGuard::mount(&root, &["--cache-size", "4M"]);
    let started = std::time::Instant::now();
    let mut compared = 0;
    let same = |path: &str| {
        let ours = std::fs::read(small.path(path))
            .unwrap_or_else(|e| panic!("{path} at 4 MiB: {e}\n{}", tail(&small.log_text())));
        assert!(
            ours == std::fs::read(checked_mount.path(path)).unwrap(),
            "{path}"
        );
    };
    for n in 0..2 {
        same(&format!("records/{n}/record.json"));
        for i in 0..2_500 {
            same(&format!("records/{n}/fields/rx{i:04}/iq.json"));
            let raw = format!("records/{n}/fields/rx{i:04}/iq.raw");
            let size = std::fs::metadata(small.path(&raw)).unwrap().len();
            assert_eq!(size, 16 * 8, "{raw}");
            compared += 2;
        }
        // A tensor's read decodes the record for that field (a decode per field read: reading
        // all 2,500 one by one at 4 MiB evicts the tree each time, minutes; not done here).
        for i in [0, 1_249, 2_499] {
            same(&format!("records/{n}/fields/rx{i:04}/iq.raw"));
            compared += 1;
        }
        let listed = std::fs::read_dir(small.path(&format!("records/{n}/fields"))).unwrap();
        assert_eq!(listed.count(), 2_500, "one directory a receiver");
    }
    println!(
        "4 MiB: {compared} reads and stats in {:.1?}",
        started.elapsed()
    );
    peak_within(
        &checked_mount,
        8 * MIB,
        "library records of 2,500 fields, 8 MiB",
    );
    peak_within(&small, 4 * MIB, "library records of 2,500 fields, 4 MiB");
}

/// `len` bytes from a xorshift seeded with `seed`, a word at a time (480 MiB of them in about
/// a second), so zstd stores them nearly as they are.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut bits = Bits::new(seed);
    let mut data = Vec::with_capacity(len + 8);
    while data.len() < len {
        data.extend_from_slice(&bits.next().to_le_bytes());
    }
    data.truncate(len);
    data
}

/// Reads `path` to its end in reads of `block` bytes; its length and SHA-256.
fn read_through(path: &std::path::Path, block: usize) -> std::io::Result<(u64, Vec<u8>)> {
    use sha2::Digest;
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; block];
    let (mut len, mut hash) = (0u64, sha2::Sha256::new());
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok((len, hash.finalize().to_vec()));
        }
        len += n as u64;
        hash.update(&buf[..n]);
    }
}

/// The daemon's resident memory now (VmRSS) and what its budget has charged now.
fn resident_and_charged(mount: &MountGuard) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", mount.pid())).unwrap();
    let resident = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(mount.path(".sdsfs-status")).unwrap()).unwrap();
    let charged = report["memory"]["used_bytes"].as_u64().unwrap();
    (resident, charged)
}

/// Sixteen readers, each reading the `.raw` file of its own 30 MiB record (one complex64
/// field of noise, which zstd as the writer uses it by default stores nearly as is) at once
/// under 128 MiB. Each record is below a quarter of the budget, so it is decoded whole in
/// memory, and only four fit: nearly every read decodes its record again (the other readers'
/// decodes evicted it). A decode's read-ahead pieces were blocks just below glibc's mapping
/// threshold, so the heap kept, after they were freed, the most that decodes had ever held at
/// once: 45-85 MiB besides the budget's records, peak RSS 129-186 MiB on 2 cores (185-205 MiB
/// measured before) and, once the readers were done, 44-67 MiB resident beyond what the
/// budget had charged. The peak depends on how many decodes overlap, so the test checks both:
/// pieces are now mappings of their own, peak 92-112 MiB and 16 MiB beyond the charges (the
/// process's code, stacks and small heap). Reads of 1 MiB (the kernel's largest request here)
/// rather than `cat`'s 128 KiB: the kernel then asks 480 times, not about 1,900 times, each a
/// 30 MiB decode: the same memory, in 6 s rather than 35.
#[test]
fn sixteen_concurrent_readers_of_30_mib_records_stay_within_the_budget() {
    use sha2::Digest;
    const READERS: u64 = 16;
    const LEN: usize = 30 << 20;
    let digests: Vec<Vec<u8>> = (0..READERS)
        .map(|i| sha2::Sha256::digest(noise(i + 1, LEN)).to_vec())
        .collect();
    let records = (0..READERS).map(|i| {
        Record::new(format!("noise-{i:02}")).with_field("iq", iq_capture(noise(i + 1, LEN)))
    });
    let dir = published(records);
    let mount = MountGuard::mount(dir.path(), &["--cache-size", "128M"]);
    let results: Vec<std::io::Result<(u64, Vec<u8>)>> = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..READERS)
            .map(|n| {
                let path = mount.path(&format!("records/{n:02}/fields/iq.raw"));
                scope.spawn(move || read_through(&path, 1 << 20))
            })
            .collect();
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for (n, (result, digest)) in results.iter().zip(&digests).enumerate() {
        match result {
            Ok((len, got)) => {
                assert_eq!(*len, LEN as u64, "record {n}: length");
                assert!(got == digest, "record {n}: bytes differ from those written");
            }
            Err(e) => panic!("record {n}: {e}\n{}", tail(&mount.log_text())),
        }
    }
    let case = "16 readers of distinct 30 MiB records, 128 MiB";
    peak_within(&mount, 128 * MIB, case);
    // What the reads left behind is charged or the process's own (16 MiB): freed
    // decoding buffers are not kept.
    let (resident, charged) = resident_and_charged(&mount);
    let beyond = resident.saturating_sub(charged);
    eprintln!(
        "{case}: resident {} MiB, charged {} MiB",
        resident / MIB,
        charged / MIB
    );
    assert!(
        beyond <= 32 * MIB,
        "{case}: {} MiB resident beyond the {} MiB charged",
        beyond / MIB,
        charged / MIB
    );
}
