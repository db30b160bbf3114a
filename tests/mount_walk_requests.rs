//! What a walk of a real mount costs in FUSE requests, by operation (`requests.by_op` of the
//! status file): a count, so it does not depend on the machine's speed.
//!
//! A second `find records/` + `du -sb records/` is answered by the kernel on its own (every
//! listing in its readdir cache, every entry and attribute cached): nothing reaches the daemon
//! but `du`'s and `find`'s `STATFS`, also after the metadata TTL (the overlay, the one mutable
//! part of the tree, is invalidated by the catalog watcher on a change instead of expiring;
//! see [`warm_walk`] for the kernel's own occasional re-listing).
//! `ls -l` of one record directory costs the same number of requests whatever the number of
//! records, and nothing the second time. Files of small records are opened by the kernel on
//! its own: a scan sends no `OPEN` or `RELEASE`, and a second scan nothing at all. Reading the
//! status file is not counted, and every reading is one whole, fresh report. An `ioctl` (Python
//! asks `isatty` at every `open`) is a round trip the kernel never saves: it is counted.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::datasets::publish_dataset;
use common::mount::MountGuard;

type Counts = BTreeMap<String, i64>;

fn by_op(mount: &MountGuard) -> Counts {
    let text = std::fs::read(mount.path(".sdsfs-status")).expect("status file");
    let report: serde_json::Value = serde_json::from_slice(&text).expect("status JSON");
    report["requests"]["by_op"]
        .as_object()
        .expect("requests.by_op")
        .iter()
        .map(|(op, n)| (op.clone(), n.as_i64().expect("a count")))
        .collect()
}

/// Counts FUSE requests by operation while `action` runs (the status file's own requests are
/// not counted by the mount: `reading_the_status_file_is_free_and_always_fresh`).
struct Meter<'a> {
    mount: &'a MountGuard,
}

impl<'a> Meter<'a> {
    fn new(mount: &'a MountGuard) -> Meter<'a> {
        Meter { mount }
    }

    fn measure(&self, action: impl FnOnce()) -> Counts {
        let before = by_op(self.mount);
        action();
        difference(&by_op(self.mount), &before)
    }
}

/// `after - before`, without zeros.
fn difference(after: &Counts, before: &Counts) -> Counts {
    let get = |counts: &Counts, op: &str| counts.get(op).copied().unwrap_or(0);
    after
        .keys()
        .map(|op| (op.clone(), get(after, op) - get(before, op)))
        .filter(|(_, n)| *n != 0)
        .collect()
}

fn counts(pairs: &[(&str, i64)]) -> Counts {
    pairs.iter().map(|(op, n)| (op.to_string(), *n)).collect()
}

fn run(program: &str, args: &[&std::path::Path]) -> String {
    let out = Command::new(program).args(args).output().expect(program);
    assert!(out.status.success(), "{program}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The requests of a walk of a tree the kernel has seen, and the walk's result. Some kernels
/// drop the cached listings of a few scattered directories every few seconds, whatever the
/// memory (measured: 60 to 150 of 30,001, about every 5 s, 22 GiB free); a walk that spans
/// such a moment lists those again, and only those (`READDIRPLUS` and `READDIR` in pairs, no
/// `LOOKUP`: their entries stay). Such a walk, if it lists again under a twentieth of the
/// tree's `directories` (fewer than a record's worth of kinds, e.g. every `annotations/`), is
/// taken once more, so the count stays exact.
fn warm_walk(meter: &Meter, mount: &MountGuard, directories: i64) -> (Counts, (usize, u64)) {
    let mut result = (0, 0);
    let requests = meter.measure(|| result = walk(mount));
    let relisted = |counts: &Counts| {
        let only = |op: &str| counts.get(op).copied().unwrap_or(0);
        only("readdir") > 0
            && only("readdir") <= directories / 20
            && only("readdir") == only("readdirplus")
            && counts.len() == 2 + usize::from(counts.contains_key("statfs"))
    };
    if !relisted(&requests) {
        return (requests, result);
    }
    eprintln!("the kernel listed some directories again during the walk ({requests:?}): again");
    let requests = meter.measure(|| result = walk(mount));
    (requests, result)
}

/// `find records/` (returns its line count) and `du -sb records/` (returns the bytes).
fn walk(mount: &MountGuard) -> (usize, u64) {
    let records = mount.path("records");
    let found = run("find", &[&records]).lines().count();
    let du = run("du", &[std::path::Path::new("-sb"), &records]);
    let bytes = du.split_whitespace().next().and_then(|n| n.parse().ok());
    (found, bytes.expect("du's byte count"))
}

/// `cold` with the listings the kernel asked for again during the walk taken out: a cold walk
/// can span one of the moments when the kernel drops a few cached listings (see
/// [`warm_walk`]), and lists those directories a second time, in `READDIRPLUS` and `READDIR`
/// pairs. At most a twentieth of the tree's `directories` are taken out, so a walk that lists
/// everything twice still fails.
fn without_relistings(mut cold: Counts, directories: i64) -> Counts {
    let count = |op: &str| cold.get(op).copied().unwrap_or(0);
    let again = count("readdir") - directories;
    if again > 0 && again <= directories / 20 && count("readdirplus") == count("readdir") {
        eprintln!("the kernel listed {again} directories again during the cold walk");
        cold.insert("readdir".into(), directories);
        cold.insert("readdirplus".into(), directories);
    }
    cold
}

#[test]
fn a_warm_walk_is_answered_by_the_kernel() {
    let records = 300;
    let published = publish_dataset(&[100, 100, 100], 2);
    let mount = MountGuard::mount(published.root(), &["--metadata-ttl", "600"]);
    let meter = Meter::new(&mount);

    let mut first = (0, 0);
    let cold = meter.measure(|| first = walk(&mount));
    // Every directory listed once: a READDIRPLUS with its entries and their attributes (each
    // listing here fits in one batch), a READDIR for the end; records/ and per record its
    // directory, annotations/ and fields/. None opened after the first, and only records/
    // looked up.
    let directories = 1 + 3 * records;
    let cold = without_relistings(cold, directories);
    assert_eq!(
        cold,
        counts(&[
            ("lookup", 1),
            ("opendir", 1),
            ("readdir", directories),
            ("readdirplus", directories),
            ("statfs", 2)
        ]),
        "the first walk"
    );

    let (warm, second) = warm_walk(&meter, &mount, directories);
    assert_eq!(second, first, "the warm walk saw another tree");
    // find: records/ and, per record, at least the record, record.json, annotations/,
    // fields/ and the field files (iq: 5 views, label: 3 or more).
    assert!(first.0 > records as usize * 12, "{first:?}");
    assert_eq!(
        warm,
        counts(&[("statfs", 2)]),
        "the warm walk reached the daemon"
    );
}

#[test]
fn after_the_metadata_ttl_a_walk_still_costs_nothing() {
    let records = 60;
    let published = publish_dataset(&[30, 30], 2);
    let mount = MountGuard::mount(published.root(), &["--metadata-ttl", "1"]);
    let meter = Meter::new(&mount);
    let first = walk(&mount);
    // Two ticks of the catalog watcher: it re-read the catalog, found it unchanged, and left
    // the kernel's caches of records/<n>/annotations alone.
    std::thread::sleep(Duration::from_millis(2100));
    // records/ and per record its directory, annotations/ and fields/.
    let (later, again) = warm_walk(&meter, &mount, 1 + 3 * records);
    assert_eq!(again, first);
    assert_eq!(later, counts(&[("statfs", 2)]), "after the TTL");
}

/// The requests of a first `ls -l records/<middle>` on a fresh mount of `records` records,
/// after `ls -l records/`, and of the same `ls -l` again.
fn ls_l_costs(shards: &[usize]) -> (Counts, Counts) {
    let records: usize = shards.iter().sum();
    let published = publish_dataset(shards, 4);
    let mount = MountGuard::mount(published.root(), &[]);
    let meter = Meter::new(&mount);
    let listing = run("ls", &[std::path::Path::new("-l"), &mount.path("records")]);
    assert_eq!(
        listing.lines().count(),
        1 + records,
        "total + one line per record"
    );
    let dir = mount.path(&format!("records/{}", records / 2));
    let first = meter.measure(|| {
        let text = run("ls", &[std::path::Path::new("-l"), &dir]);
        assert_eq!(
            text.lines().count(),
            6,
            "total, annotations, fields, preview.png, record.json, record.sigmf-collection"
        );
    });
    let again = meter.measure(|| {
        run("ls", &[std::path::Path::new("-l"), &dir]);
    });
    (first, again)
}

#[test]
fn ls_l_of_a_record_directory_costs_the_same_at_any_size() {
    // (Names of the same width, so both listings are laid out alike.)
    let (small_first, small_again) = ls_l_costs(&[40, 60]);
    let (large_first, large_again) = ls_l_costs(&[200, 200, 200, 200, 100]);
    assert_eq!(small_first, large_first);
    // The directory's listing (entries and an end), nothing else: the record directory's own
    // entry and attributes came with the listing of records/.
    assert_eq!(small_first, counts(&[("readdirplus", 2)]));
    assert_eq!(
        small_again,
        Counts::new(),
        "the second ls -l reached the daemon"
    );
    assert_eq!(large_again, Counts::new());
}

/// `cat` of `files`, returning the bytes it printed.
fn cat(files: &[PathBuf]) -> Vec<u8> {
    let out = Command::new("cat").args(files).output().expect("cat");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cat: {}",
        stderr.lines().next().unwrap_or("")
    );
    out.stdout
}

/// Every record's `iq.raw`, and the bytes they hold, concatenated.
fn iq_files(
    mount: &MountGuard,
    published: &common::datasets::Published,
) -> (Vec<PathBuf>, Vec<u8>) {
    let count = published.records.len();
    let width = (count - 1).to_string().len();
    let files = (0..count)
        .map(|o| mount.path(&format!("records/{o:0width$}/fields/iq.raw")))
        .collect();
    let bytes = published
        .records
        .iter()
        .flat_map(|r| r.fields["iq"].data.iter().copied())
        .collect();
    (files, bytes)
}

#[test]
fn small_records_files_are_opened_by_the_kernel_and_a_second_scan_costs_nothing() {
    let published = publish_dataset(&[60, 40], 2);
    let mount = MountGuard::mount(published.root(), &[]);
    let meter = Meter::new(&mount);
    let (files, expected) = iq_files(&mount, &published);

    let first = meter.measure(|| assert!(cat(&files) == expected, "the first scan's bytes"));
    // One OPEN for the life of the mount, answered ENOSYS; no RELEASE ever.
    assert_eq!(first.get("open"), Some(&1), "{first:?}");
    assert_eq!(first.get("release"), None, "{first:?}");
    assert!(first.get("read").is_some_and(|&n| n >= 100), "{first:?}");

    let second = meter.measure(|| assert!(cat(&files) == expected, "the second scan's bytes"));
    assert_eq!(second, Counts::new(), "the second scan reached the daemon");
}

/// Polls the counts until `op` reaches `n` (a `RELEASE` is sent after `close` returns).
fn wait_for(mount: &MountGuard, before: &Counts, op: &str, n: i64) -> Counts {
    for _ in 0..200 {
        let now = difference(&by_op(mount), before);
        if now.get(op).copied().unwrap_or(0) >= n {
            return now;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    difference(&by_op(mount), before)
}

#[test]
fn with_daemon_opens_every_open_and_close_is_a_request() {
    let published = publish_dataset(&[60, 40], 2);
    let mount = MountGuard::mount(published.root(), &["--file-opens", "daemon"]);
    let (files, expected) = iq_files(&mount, &published);
    cat(&files);
    let before = by_op(&mount);
    assert!(cat(&files) == expected, "the second scan's bytes");
    let second = wait_for(&mount, &before, "release", 100);
    // The pages stayed cached (FOPEN_KEEP_CACHE): no READ, but a round trip per open and close.
    assert_eq!(second, counts(&[("open", 100), ("release", 100)]));
}

#[test]
fn reading_the_status_file_is_free_and_always_fresh() {
    use std::io::Read;
    let published = publish_dataset(&[20], 1);
    let mount = MountGuard::mount(published.root(), &[]);
    let path = mount.path(".sdsfs-status");
    assert_eq!(by_op(&mount), by_op(&mount), "a reading was counted");

    // A reader taking 7 bytes at a time gets one whole report, as long as its file says.
    let before = by_op(&mount);
    run("ls", &[&mount.path("records")]);
    let mut file = std::fs::File::open(&path).unwrap();
    let size = file.metadata().unwrap().len();
    let (mut text, mut piece) = (Vec::new(), [0u8; 7]);
    loop {
        let n = file.read(&mut piece).unwrap();
        if n == 0 {
            break;
        }
        text.extend_from_slice(&piece[..n]);
    }
    assert_eq!(text.len() as u64, size);
    let report: serde_json::Value = serde_json::from_slice(&text).expect("one JSON report");
    // Taken at this open: it counts the ls that came after the previous reading.
    let readdirs = report["requests"]["by_op"]["readdir"].as_i64().unwrap();
    assert!(
        readdirs > before.get("readdir").copied().unwrap_or(0),
        "{report}"
    );
    assert_eq!(report["records"], 20);
}

#[test]
fn an_ioctl_is_one_counted_request_answered_enotty_without_a_log_line() {
    use std::os::fd::AsRawFd;
    let published = publish_dataset(&[3], 1);
    let mount = MountGuard::mount(published.root(), &[]);
    let file = std::fs::File::open(mount.path("records/0/record.json")).unwrap();
    let before = by_op(&mount);
    // SAFETY: isatty only issues TCGETS on a descriptor this test owns.
    let tty = unsafe { libc::isatty(file.as_raw_fd()) };
    let errno = std::io::Error::last_os_error().raw_os_error();
    assert_eq!((tty, errno), (0, Some(libc::ENOTTY)));
    assert_eq!(difference(&by_op(&mount), &before), counts(&[("ioctl", 1)]));
    assert!(
        !mount.log_text().contains("Not Implemented"),
        "{}",
        mount.log_text()
    );
}

#[test]
fn python_reading_the_status_file_is_not_counted_either() {
    // Python's `open` asks `isatty` (an ioctl) of the file it opens.
    let published = publish_dataset(&[3], 1);
    let mount = MountGuard::mount(published.root(), &[]);
    let python = |code: &str| {
        let out = Command::new(common::python())
            .args(["-c", code])
            .arg(mount.path(".sdsfs-status"))
            .output()
            .expect("python");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let read = "import json, sys; print(json.dumps(json.load(open(sys.argv[1]))['requests']['by_op'], sort_keys=True))";
    assert_eq!(python(read), python(read));
}
