//! The acceptance test of the format: datasets written by every release of the `signal-dataset`
//! library (the format owner, 0.2.0 to 0.4.0) read back through `sds` and the mount exactly as
//! the library reads them; and what our tools write read back by the library, byte-identical
//! to the library's own output where the inputs are the same.
//!
//! Cases are randomized (`tests/python/library_tool.py random-spec SEED`): record shapes of
//! rank 1 to 3, every dtype of the profile, axes with value / linear / reference coordinates,
//! metadata with integers beyond 64 bits and Unicode, field names with `/`, `%` and Unicode,
//! work ids whose string order is the publication order, several attempts, empty shards, small
//! `shards_per_manifest`, every ArrayRecord writer option, views and annotation sets (single
//! process and distributed). The run's seed is printed with every case and is taken from
//! `SDS_INTEROP_SEED` when set, so a failure reproduces.
//!
//! Bounded for CI: one "full" case per release (every feature, its mount walked) and one free
//! random case (checked through `sds info --json`, `sds ls` and `sds verify --deep`); the
//! comparisons with the library's reading run in Python (`check-mount`, `dump`) because
//! metadata holds integers that a Rust `f64` would round.
//!
//! Only the command line and the mount are used, never the crate's API: those surfaces are the
//! contract these tests hold the project to.

#[path = "common/cli.rs"]
mod cli;
#[path = "common/library.rs"]
mod library;
#[path = "common/mount.rs"]
mod mount;
#[path = "common/npy.rs"]
mod npy;

use std::path::Path;

use library::{CURRENT, RELEASES};
use serde_json::Value;

/// ArrayRecord writer options the library accepts (any string of the ArrayRecord writer);
/// "default" leaves the library's default (`group_size:1`, zstd).
const WRITER_OPTIONS: [&str; 8] = [
    "default",
    "group_size:3",
    "brotli:6",
    "brotli:0",
    "snappy",
    "snappy:2",
    "uncompressed",
    "zstd:9",
];

/// The dtypes as the library writes them in rows (`dtype.str`); `sds info` may print NumPy's
/// names instead, which name the same types.
fn same_dtype(ours: &str, library: &str) -> bool {
    let names = [
        ("|b1", "bool"),
        ("|u1", "uint8"),
        ("<u2", "uint16"),
        ("<u4", "uint32"),
        ("<u8", "uint64"),
        ("|i1", "int8"),
        ("<i2", "int16"),
        ("<i4", "int32"),
        ("<i8", "int64"),
        ("<f2", "float16"),
        ("<f4", "float32"),
        ("<f8", "float64"),
        ("<c8", "complex64"),
    ];
    ours == library || names.iter().any(|(s, n)| *s == library && *n == ours)
}

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// `sds info --json` agrees with the library on ids and counts.
fn assert_info_agrees(case: &str, root: &Path, library: &Value) {
    let out = cli::sds(&["info", &text(root), "--json"]);
    assert!(
        out.status.success(),
        "{case}: sds info {} failed: {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let info: Value = serde_json::from_slice(&out.stdout).expect("sds info --json prints JSON");
    for key in [
        "dataset_id",
        "snapshot_id",
        "record_count",
        "shard_count",
        "manifest_pages",
        "stored_bytes",
    ] {
        assert_eq!(info[key], library[key], "{case}: sds info `{key}`");
    }
    assert_eq!(
        info["layout_version"], "0.1",
        "{case}: sds info layout_version"
    );
    let records = library["records"].as_array().expect("records");
    let Some(first) = records.first() else {
        assert!(
            info["first_record"].is_null(),
            "{case}: empty dataset, first_record"
        );
        return;
    };
    let shown = &info["first_record"];
    assert_eq!(shown["id"], first["id"], "{case}: first record id");
    assert_eq!(
        shown["scene_id"], first["scene_id"],
        "{case}: first scene id"
    );
    let fields = first["fields"].as_object().expect("fields");
    let shown_fields = shown["fields"].as_object().expect("info fields");
    assert_eq!(
        shown_fields.keys().collect::<Vec<_>>(),
        fields.keys().collect::<Vec<_>>(),
        "{case}: first record's field names"
    );
    for (name, field) in fields {
        let ours = &shown_fields[name];
        assert!(
            same_dtype(
                ours["dtype"].as_str().unwrap_or_default(),
                field["dtype"].as_str().unwrap_or_default()
            ),
            "{case}: field {name:?} dtype {} vs library {}",
            ours["dtype"],
            field["dtype"]
        );
        assert_eq!(
            ours["shape"], field["shape"],
            "{case}: field {name:?} shape"
        );
    }
}

/// `sds ls` names every record, `sds verify --deep` finds nothing wrong.
fn assert_ls_and_verify(case: &str, root: &Path, library: &Value) {
    let listing = cli::sds(&["ls", &text(root)]);
    assert!(
        listing.status.success(),
        "{case}: sds ls failed: {}",
        String::from_utf8_lossy(&listing.stderr)
    );
    let listing = String::from_utf8_lossy(&listing.stdout);
    for record in library["records"].as_array().expect("records") {
        let id = record["id"].as_str().expect("id");
        assert!(
            listing.contains(id),
            "{case}: sds ls does not show record {id:?}:\n{listing}"
        );
    }
    let verify = cli::sds(&["verify", "--deep", &text(root)]);
    assert!(
        verify.status.success(),
        "{case}: sds verify --deep {} reports problems:\n{}{}",
        root.display(),
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
}

/// Mounts `root` and compares every file of the tree with the library's reading.
fn assert_mount_agrees(case: &str, root: &Path) -> String {
    let guard = mount::MountGuard::mount(root, &[]);
    let summary = library::tool_output(
        CURRENT,
        &["check-mount", &text(root), &text(&guard.mountpoint)],
    );
    assert!(
        summary.status.success(),
        "{case}: the mount of {} differs from the library:\n{}\nsdsfs log:\n{}",
        root.display(),
        String::from_utf8_lossy(&summary.stderr),
        guard.log_text()
    );
    String::from_utf8_lossy(&summary.stdout).trim().to_string()
}

/// One release's datasets, read by us: a full case with its mount walked, a free random case.
fn release_reads_back(release: &str) {
    let position = RELEASES
        .iter()
        .position(|r| *r == release)
        .expect("a known release");
    let seed = library::run_seed() * 10 + position as u64;
    let options = WRITER_OPTIONS[(seed as usize) % WRITER_OPTIONS.len()];
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "full",
            library::spec(dir.path(), seed, &["--full", "--writer-options", options]),
        ),
        ("random", library::spec(dir.path(), seed + 100_000, &[])),
    ];
    for (kind, spec) in cases {
        let out = dir.path().join(kind);
        library::tool(release, &["write", &text(&spec), &text(&out)]);
        for part in ["dataset", "view", "materialized"] {
            let root = out.join(part);
            if !root.exists() {
                continue;
            }
            let case = format!("signal-dataset {release} seed {seed} {kind} {part}");
            let library_view = library::dump_value(&root);
            assert_info_agrees(&case, &root, &library_view);
            assert_ls_and_verify(&case, &root, &library_view);
            let walked = if kind == "full" && part != "materialized" {
                format!("; mount walk {}", assert_mount_agrees(&case, &root))
            } else {
                String::new()
            };
            println!(
                "{case} (writer options {}): info, ls, verify --deep agree with the library \
                 ({} records, {} shards, {} pages, {} annotation sets){walked}",
                library::part(&spec, "writer_options"),
                library_view["record_count"],
                library_view["shard_count"],
                library_view["manifest_pages"],
                library_view["annotations"]
                    .as_object()
                    .map_or(0, |a| a.len()),
            );
        }
    }
}

#[test]
fn every_release_is_installed_where_the_tests_run_it() {
    for release in RELEASES {
        let reported = library::tool_text(release, &["version"]);
        assert_eq!(
            reported, release,
            "importlib.metadata reports {reported} under release {release}'s path"
        );
    }
}

#[test]
fn datasets_of_release_0_2_0_read_back_as_the_library_reads_them() {
    release_reads_back("0.2.0");
}

#[test]
fn datasets_of_release_0_2_1_read_back_as_the_library_reads_them() {
    release_reads_back("0.2.1");
}

#[test]
fn datasets_of_release_0_2_2_read_back_as_the_library_reads_them() {
    release_reads_back("0.2.2");
}

#[test]
fn datasets_of_release_0_2_3_read_back_as_the_library_reads_them() {
    release_reads_back("0.2.3");
}

#[test]
fn datasets_of_release_0_3_0_read_back_as_the_library_reads_them() {
    release_reads_back("0.3.0");
}

#[test]
fn datasets_of_release_0_4_0_read_back_as_the_library_reads_them() {
    release_reads_back("0.4.0");
}

// ---------------------------------------------------------------------------------------------
// Us → library

/// Runs `sds ARGS`, asserting success, naming the case.
fn sds_ok(case: &str, args: &[String]) -> String {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = cli::sds(&refs);
    assert!(
        out.status.success(),
        "{case}: sds {refs:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// `--writer-options X` when the spec names one.
fn writer_option_args(spec: &Path) -> Vec<String> {
    let value = library::part(spec, "writer_options");
    if value == "null" {
        Vec::new()
    } else {
        strings(&["--writer-options", &value])
    }
}

/// Our workers re-write every shard the library's workers wrote (every attempt), from the
/// library's dataset `source`, into `root`; returns the receipt files.
fn our_workers(
    case: &str,
    spec: &Path,
    source: &Path,
    library_out: &Path,
    root: &Path,
) -> Vec<String> {
    let mut receipts = Vec::new();
    for (k, shard) in library::plan(library_out).iter().enumerate() {
        let receipt = root.with_extension(format!("receipt-{k}.json"));
        let mut args = strings(&[
            "write-shard",
            &text(root),
            "--from-dataset",
            &text(source),
            "--range",
            &format!("{}:{}", shard.first, shard.first + shard.count),
            "--work-id",
            &shard.work_id,
            "--attempt",
            &shard.attempt.to_string(),
            "--receipt-out",
            &text(&receipt),
        ]);
        args.extend(writer_option_args(spec));
        sds_ok(case, &args);
        receipts.push(text(&receipt));
    }
    receipts
}

/// The work ids, ids, page size and metadata of the spec's publication, as `sds publish`
/// (and `library_tool.py publish`) options.
fn publication_args(spec: &Path, library_out: &Path) -> Vec<String> {
    let mut work_ids: Vec<String> = library::plan(library_out)
        .into_iter()
        .map(|s| s.work_id)
        .collect();
    work_ids.sort();
    work_ids.dedup();
    let mut args = strings(&[
        "--dataset-id",
        &library::part(spec, "dataset_id"),
        "--snapshot-id",
        &library::part(spec, "snapshot_id"),
        "--expected-work-ids",
        &work_ids.join(","),
    ]);
    let per_page = library::part(spec, "shards_per_manifest");
    if per_page != "null" {
        args.extend(strings(&["--shards-per-manifest", &per_page]));
    }
    let metadata = library::part(spec, "metadata");
    if metadata != "{}" && metadata != "null" {
        args.extend(strings(&["--metadata", &metadata]));
    }
    args
}

fn not_annotations(path: &str) -> bool {
    path.starts_with("annotations/")
}

fn the_lock_file(path: &str) -> bool {
    path == "annotations/.catalog.json.lock"
}

/// The library (0.4.0 and 0.3.0) reads `ours` exactly as it reads `theirs`.
fn assert_library_reads_the_same(case: &str, ours: &Path, theirs: &Path, parts: &[&str]) {
    for release in [CURRENT, "0.3.0"] {
        for part in parts {
            assert_eq!(
                library::dump(release, ours, part),
                library::dump(release, theirs, part),
                "{case}: signal-dataset {release} reads `{part}` of {} differently from the \
                 library's own publication {}",
                ours.display(),
                theirs.display()
            );
        }
    }
}

/// Our annotation publishers (single process and distributed) over the spec's rows.
fn our_annotation_sets(case: &str, spec: &Path, library_out: &Path, root: &Path) -> usize {
    let sets = library::part(spec, "annotations");
    let count: Value = serde_json::from_str(&sets).unwrap_or(Value::Null);
    let sets = count.as_array().map_or(0, Vec::len);
    let records = library::dump_value(root)["record_count"]
        .as_u64()
        .expect("count");
    for k in 0..sets {
        let key = |name: &str| library::part(spec, &format!("annotations.{k}.{name}"));
        let name = key("name");
        let per_shard = key("records_per_shard");
        let rows = library_out.join("rows").join(format!("{name}.rows.jsonl"));
        let mut common = strings(&["--name", &name, "--records-per-shard", &per_shard]);
        // The library writes annotation objects with the options its dataset was opened with.
        common.extend(writer_option_args(spec));
        let publication = key("publication_id");
        if publication != "null" {
            common.extend(strings(&["--publication-id", &publication]));
        }
        let metadata = strings(&["--metadata", &key("metadata")]);
        if key("mode") == "single" {
            let mut args = strings(&["annotate", &text(root), "--rows", &text(&rows)]);
            args.extend(common.clone());
            args.extend(metadata);
            sds_ok(case, &args);
            continue;
        }
        let step: u64 = per_shard.parse().expect("records_per_shard");
        for shard in 0..records.div_ceil(step) {
            let mut args = strings(&[
                "annotate",
                "write-shard",
                &text(root),
                "--rows",
                &text(&rows),
            ]);
            args.extend(strings(&["--shard", &shard.to_string()]));
            args.extend(common.clone());
            sds_ok(case, &args);
        }
        let mut args = strings(&["annotate", "publish", &text(root)]);
        args.extend(common);
        args.extend(metadata);
        sds_ok(case, &args);
    }
    sets
}

/// A full library publication (dataset, annotation sets, views) for `seed`, in `dir/library`.
struct LibraryCase {
    case: String,
    spec: std::path::PathBuf,
    theirs: std::path::PathBuf,
    ours: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// Writer options for the cases compared byte for byte, picked by `seed`: every option string
/// the library's cases use, plus the other compressor levels (our brotli is the reference's C
/// brotli, our snappy a port of its match finder, so all of them must match).
fn byte_exact_writer_options(seed: u64) -> &'static str {
    const OPTIONS: [&str; 10] = [
        "default",
        "group_size:1",
        "group_size:3",
        "brotli:6",
        "brotli:1,group_size:2",
        "brotli:11",
        "snappy",
        "snappy:2,group_size:3",
        "uncompressed",
        "zstd:9",
    ];
    // Mixed, so that each test (whose seed is `run * 10 + k`) sees every option across runs.
    let mixed = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
    OPTIONS[(mixed % OPTIONS.len() as u64) as usize]
}

impl LibraryCase {
    fn write(seed: u64, what: &str) -> LibraryCase {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = byte_exact_writer_options(seed);
        let spec = library::spec(dir.path(), seed, &["--full", "--writer-options", options]);
        let theirs = dir.path().join("library");
        library::tool(CURRENT, &["write", &text(&spec), &text(&theirs)]);
        let ours = dir.path().join("ours");
        std::fs::create_dir_all(&ours).expect("mkdir");
        LibraryCase {
            case: format!("{what} vs signal-dataset {CURRENT} seed {seed}"),
            spec,
            theirs,
            ours,
            _dir: dir,
        }
    }

    fn source(&self) -> std::path::PathBuf {
        self.theirs.join("dataset")
    }

    /// `sds select` of the library's dataset into `ours/<dir>` with the ids of the spec's
    /// `<key>`, compared with the library's `<dir>`; `extra` adds options (`--materialize`).
    fn select(&self, key: &str, dir: &str, indices: &str, extra: &[String]) {
        let mut args = strings(&[
            "select",
            &text(&self.source()),
            &text(&self.ours.join(dir)),
            "--indices",
            indices,
            "--dataset-id",
            &library::part(&self.spec, &format!("{key}.dataset_id")),
            "--snapshot-id",
            &library::part(&self.spec, &format!("{key}.snapshot_id")),
        ]);
        args.extend_from_slice(extra);
        sds_ok(&self.case, &args);
        library::assert_same_tree(
            &self.case,
            &self.ours.join(dir),
            &self.theirs.join(dir),
            the_lock_file,
        );
        assert_library_reads_the_same(
            &self.case,
            &self.ours.join(dir),
            &self.theirs.join(dir),
            &["records", "annotations"],
        );
    }

    /// The spec's `<part>.indices`, as `sds select --indices` takes them.
    fn indices(&self, part: &str) -> String {
        let listed = library::part(&self.spec, &format!("{part}.indices"));
        let values: Vec<i64> = serde_json::from_str(&listed).expect("indices");
        values
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[test]
fn our_workers_coordinator_and_annotators_write_what_the_library_writes_byte_for_byte() {
    let run = LibraryCase::write(
        library::run_seed() * 10 + 7,
        "sds write-shard/publish/annotate",
    );
    let (case, source) = (&run.case, run.source());
    let root = run.ours.join("dataset");
    let receipts = our_workers(case, &run.spec, &source, &run.theirs, &root);
    let mut args = strings(&["publish", &text(&root), "--receipts"]);
    args.extend(receipts);
    args.extend(publication_args(&run.spec, &run.theirs));
    sds_ok(case, &args);
    library::assert_same_tree(case, &root, &source, not_annotations);
    assert_library_reads_the_same(case, &root, &source, &["records"]);
    println!("{case}: sds write-shard + sds publish: every shard, page, snapshot and root byte-identical; read back equal by 0.4.0 and 0.3.0");

    let sets = our_annotation_sets(case, &run.spec, &run.theirs, &root);
    library::assert_same_tree(case, &root, &source, the_lock_file);
    assert_library_reads_the_same(case, &root, &source, &["annotations"]);
    println!("{case}: sds annotate ({sets} sets, single and distributed): every file byte-identical; rows read back equal");
}

#[test]
fn our_reference_views_are_the_library_s_byte_for_byte() {
    let run = LibraryCase::write(library::run_seed() * 10 + 5, "sds select");
    let indices = run.indices("view");
    run.select("view", "view", &indices, &[]);
    println!(
        "{}: sds select {indices}: reference view (annotation sets re-published) byte-identical, read back equal",
        run.case
    );
}

#[test]
fn our_materialized_views_are_the_library_s_byte_for_byte() {
    let run = LibraryCase::write(library::run_seed() * 10 + 6, "sds select --materialize");
    let kept = run.indices("materialize");
    let per_shard = library::part(&run.spec, "materialize.records_per_shard");
    run.select(
        "materialize",
        "materialized",
        &kept,
        &strings(&["--materialize", "--records-per-shard", &per_shard]),
    );
    println!(
        "{}: sds select --materialize {kept} ({per_shard} records per shard): byte-identical, read back equal",
        run.case
    );
}

#[test]
fn mixed_distributed_publications_match_the_library_s_own() {
    let seed = library::run_seed() * 10 + 8;
    let case = format!("mixed publication seed {seed}");
    let dir = tempfile::tempdir().expect("tempdir");
    let options = byte_exact_writer_options(seed);
    let spec = library::spec(dir.path(), seed, &["--full", "--writer-options", options]);
    let theirs = dir.path().join("library");
    library::tool(CURRENT, &["write", &text(&spec), &text(&theirs)]);
    let source = theirs.join("dataset");

    // Library workers, our coordinator.
    let workers = dir.path().join("library-workers");
    library::tool(CURRENT, &["write-shards", &text(&spec), &text(&workers)]);
    let mut args = strings(&["publish", &text(&workers.join("dataset")), "--receipts"]);
    args.push(text(&workers.join("receipts.jsonl")));
    args.extend(publication_args(&spec, &theirs));
    sds_ok(&case, &args);
    library::assert_same_tree(&case, &workers.join("dataset"), &source, not_annotations);
    println!("{case}: library write_shard workers + sds publish: byte-identical to the library's publication");

    // Our workers, the library's coordinator.
    let ours = dir.path().join("our-workers");
    std::fs::create_dir_all(&ours).expect("mkdir");
    let root = ours.join("dataset");
    let receipts = our_workers(&case, &spec, &source, &theirs, &root);
    let mut args = strings(&["publish", &text(&root)]);
    args.extend(receipts);
    args.extend(publication_args(&spec, &theirs));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    library::tool(CURRENT, &refs);
    library::assert_same_tree(&case, &root, &source, not_annotations);
    assert_library_reads_the_same(&case, &root, &source, &["records"]);
    println!("{case}: sds write-shard workers + library publish: byte-identical to the library's publication");
}

#[test]
fn datasets_sds_create_makes_from_npy_read_back_in_the_library() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seed = library::run_seed();
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut bytes = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 33) as u8
            })
            .collect()
    };
    let arrays: [(&str, &[usize], usize); 5] = [
        ("<c8", &[64], 8),
        ("<f4", &[3, 4], 4),
        ("|u1", &[5], 1),
        ("<i2", &[2, 3, 2], 2),
        ("<u8", &[7], 8),
    ];
    let mut files = Vec::new();
    for (k, (descr, shape, size)) in arrays.iter().enumerate() {
        let path = dir.path().join(format!("capture-{k}.npy"));
        let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        let data = bytes(shape.iter().product::<usize>() * size);
        std::fs::write(&path, npy::npy_bytes_of_descr(descr, &dims, &data)).expect("write npy");
        files.push(text(&path));
    }
    let root = dir.path().join("created");
    let mut args = strings(&[
        "create",
        &text(&root),
        "--dataset-id",
        "npy-1",
        "--snapshot-id",
        "s-1",
        "--from-npy",
    ]);
    args.extend(files.clone());
    sds_ok("sds create --from-npy", &args);
    let mut digest_args = vec!["npy-digest"];
    digest_args.extend(files.iter().map(String::as_str));
    let expected: Value =
        serde_json::from_str(&library::tool_text(CURRENT, &digest_args)).expect("digest");
    for release in [CURRENT, "0.3.0"] {
        let read: Value =
            serde_json::from_str(&library::dump(release, &root, "all")).expect("dump");
        let mut seen: Vec<Value> = read["records"]
            .as_array()
            .expect("records")
            .iter()
            .map(|record| {
                let mut fields: Vec<String> = record["fields"]
                    .as_object()
                    .expect("fields")
                    .values()
                    .map(|f| {
                        serde_json::to_string(&serde_json::json!([
                            f["dtype"],
                            f["shape"],
                            f["sha256"]
                        ]))
                        .expect("json")
                    })
                    .collect();
                fields.sort();
                Value::from(fields)
            })
            .collect();
        let mut want = expected.as_array().expect("digests").clone();
        seen.sort_by_key(|v| v.to_string());
        want.sort_by_key(|v| v.to_string());
        assert_eq!(
            seen, want,
            "signal-dataset {release} reads sds create --from-npy's arrays back"
        );
        assert_eq!(read["dataset_id"], "npy-1");
        println!("sds create --from-npy seed {seed}: {} records read back equal by signal-dataset {release}", seen.len());
    }
}
