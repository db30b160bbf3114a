//! Annotation sets through the library: publish, read back exactly, refuse what section 6
//! refuses, verify, and republish after the source changed.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::datasets::{local_store, obj, publish_dataset, write_shards_at, Published};
use sdsfs::annotations::{
    publish_annotations, publish_set, read_catalog, verify_sets, write_annotation_shard,
    AnnotationError, AnnotationOptions, AnnotationRecord, AnnotationStatus,
};
use sdsfs::dataset::{publish, Dataset, OpenOptions, PublishOptions};
use sdsfs::format::dtype::DType;
use sdsfs::format::json::Value;
use sdsfs::format::record::{Axis, Field};

/// Rows for every record: all three statuses, tensor fields on every third row.
fn rows_for(dataset: &Dataset, salt: i128) -> Vec<AnnotationRecord> {
    (0..dataset.len())
        .map(|ordinal| {
            let id = dataset.record_meta(ordinal).unwrap().id;
            let status = [
                AnnotationStatus::Success,
                AnnotationStatus::Skipped,
                AnnotationStatus::Failed,
            ][(ordinal % 3) as usize];
            let mut row = AnnotationRecord::new(id, ordinal, status);
            row.values = obj(&[
                ("score", Value::Float(ordinal as f64 * 0.25)),
                ("salt", Value::Int(salt)),
            ]);
            row.provenance = obj(&[("model", "m-1".into())]);
            if status == AnnotationStatus::Failed {
                row.detail_status = Some(format!("timeout after {ordinal} s"));
            }
            if ordinal % 3 == 0 {
                let n = ordinal + 1;
                let data: Vec<u8> = (0..n * 4).map(|b| (b as u8) ^ (ordinal as u8)).collect();
                let field = Field::new(DType::F32, vec![n], data)
                    .unwrap()
                    .with_axes(vec![Axis::new("time", n)]);
                row.fields.insert("detections/mask".into(), field);
            }
            row
        })
        .collect()
}

fn small_options() -> AnnotationOptions {
    AnnotationOptions {
        records_per_shard: 4,
        ..AnnotationOptions::default()
    }
}

#[test]
fn a_set_reads_back_exactly_with_tensor_fields_and_every_status() {
    let published = publish_dataset(&[5, 6], 10);
    let dataset = published.open();
    let rows = rows_for(&dataset, 1);
    let meta = obj(&[("run", "r-1".into())]);
    let result = publish_annotations(&dataset, "labels", &rows, &meta, &small_options()).unwrap();
    assert_eq!(result.record_count, 11);
    assert_eq!(result.shard_count, 3);
    assert_eq!(result.catalog_attempts, 1);
    let expected_counts: BTreeMap<AnnotationStatus, u64> = [
        (AnnotationStatus::Success, 4),
        (AnnotationStatus::Skipped, 4),
        (AnnotationStatus::Failed, 3),
    ]
    .into();
    assert_eq!(result.row_counts, expected_counts);

    let catalog = read_catalog(&dataset).unwrap();
    assert_eq!(catalog.sets.len(), 1);
    let set = catalog.sets["labels"].as_ref().unwrap();
    // The set root's metadata is exactly the caller's, as the library writes it.
    assert_eq!(set.root().metadata, meta);
    assert_eq!(set.row_counts(), None);
    let back: Vec<AnnotationRecord> = set.iter(&dataset).map(Result::unwrap).collect();
    assert_eq!(back, rows);
    assert!(verify_sets(&dataset).is_empty());

    // A repeat converges: same publication id, same bytes, no new revision.
    let again = publish_annotations(&dataset, "labels", &rows, &meta, &small_options()).unwrap();
    assert_eq!(again.publication_id, result.publication_id);
    assert_eq!(again.revision_path, result.revision_path);
    assert_eq!(again.catalog_attempts, 0);

    // Different rows under the same name are a collision, never a replacement.
    let other = rows_for(&dataset, 2);
    let e = publish_annotations(&dataset, "labels", &other, &meta, &small_options()).unwrap_err();
    assert!(matches!(e, AnnotationError::Collision(_)), "{e}");
    assert!(e.to_string().contains("\"labels\" already exists"), "{e}");
    let catalog = read_catalog(&dataset).unwrap();
    let kept = catalog.sets["labels"].as_ref().unwrap();
    let back: Vec<AnnotationRecord> = kept.iter(&dataset).map(Result::unwrap).collect();
    assert_eq!(back, rows);
}

#[test]
fn a_set_of_an_empty_dataset_and_a_set_without_fields() {
    let empty = publish_dataset(&[], 10);
    let dataset = empty.open();
    let result =
        publish_annotations(&dataset, "none", &[], &Default::default(), &small_options()).unwrap();
    assert_eq!((result.record_count, result.shard_count), (0, 0));
    let catalog = read_catalog(&dataset).unwrap();
    let set = catalog.sets["none"].as_ref().unwrap();
    assert!(set.is_empty());
    assert!(set.root().shards.is_empty());

    let published = publish_dataset(&[3], 10);
    let dataset = published.open();
    let rows: Vec<AnnotationRecord> = (0..3)
        .map(|o| {
            let id = dataset.record_meta(o).unwrap().id;
            AnnotationRecord::new(id, o, AnnotationStatus::Skipped)
        })
        .collect();
    publish_annotations(
        &dataset,
        "bare",
        &rows,
        &Default::default(),
        &small_options(),
    )
    .unwrap();
    let catalog = read_catalog(&dataset).unwrap();
    let set = catalog.sets["bare"].as_ref().unwrap();
    let back: Vec<AnnotationRecord> = set.iter(&dataset).map(Result::unwrap).collect();
    assert_eq!(back, rows);
    assert!(back.iter().all(|r| r.fields.is_empty()));
}

#[test]
fn dense_coverage_and_alignment_are_required() {
    let published = publish_dataset(&[6], 10);
    let dataset = published.open();
    let rows = rows_for(&dataset, 1);
    let options = small_options();
    let id = options.publication_id_for(&dataset, "dist").unwrap();
    // Only shard 0 written: the coordinator refuses and names the gap.
    write_annotation_shard(&dataset, "dist", &id, 0, &rows[0..4], &options).unwrap();
    let e = publish_set(&dataset, "dist", &id, &Default::default(), &options).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("[4, 6)") && text.contains("shard-00000001"),
        "{text}"
    );
    // A second worker for shard 1 with other rows loses to the first and adopts it.
    let first = write_annotation_shard(&dataset, "dist", &id, 1, &rows[4..6], &options).unwrap();
    assert!(!first.adopted);
    let other = rows_for(&dataset, 9);
    let second = write_annotation_shard(&dataset, "dist", &id, 1, &other[4..6], &options).unwrap();
    assert!(second.adopted);
    assert_eq!(second.pointer, first.pointer);
    publish_set(&dataset, "dist", &id, &Default::default(), &options).unwrap();
    let catalog = read_catalog(&dataset).unwrap();
    let back: Vec<AnnotationRecord> = catalog.sets["dist"]
        .as_ref()
        .unwrap()
        .iter(&dataset)
        .map(Result::unwrap)
        .collect();
    assert_eq!(back, rows);

    // A row naming the wrong record is refused by the worker.
    let mut wrong = rows.clone();
    wrong[1].source_record_id = "not-this-one".into();
    let e = write_annotation_shard(&dataset, "other", &id, 0, &wrong[0..4], &options).unwrap_err();
    assert!(e.to_string().contains("not-this-one"), "{e}");
}

#[test]
fn verify_reports_a_damaged_object_once_per_object() {
    let published = publish_dataset(&[4], 10);
    let dataset = published.open();
    let rows = rows_for(&dataset, 1);
    let result =
        publish_annotations(&dataset, "v", &rows, &Default::default(), &small_options()).unwrap();
    let catalog = read_catalog(&dataset).unwrap();
    let set = catalog.sets["v"].as_ref().unwrap();
    let object = published.file(set.root().shards[0].object.path.as_str());
    // Flip a byte inside the object: chunk hashes fail, verify reports it once.
    let mut bytes = std::fs::read(&object).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::remove_file(&object).unwrap();
    std::fs::write(&object, &bytes).unwrap();
    let reopened = published.open();
    let problems = verify_sets(&reopened);
    assert!(!problems.is_empty(), "corruption not reported");
    assert!(
        problems.iter().all(|p| p.object.contains(".arrayrecord")),
        "{problems:?}"
    );
    let _ = result;
}

/// Replaces the dataset's snapshot (root.json) with one of different records, as if the source
/// had been re-published in place.
fn republish_source(published: &Published, sizes: &[usize]) -> Dataset {
    std::fs::remove_file(published.file("root.json")).unwrap();
    let store = local_store(published.root());
    let (receipts, _) = write_shards_at(store.as_ref(), sizes, 1);
    let mut options = PublishOptions::new("ds-test", "snap-2");
    options.shards_per_manifest = 10;
    publish(store.as_ref(), &receipts, &options).unwrap();
    Dataset::open(store as Arc<_>, OpenOptions::default()).unwrap()
}

#[test]
fn a_set_republished_after_its_source_changed() {
    let published = publish_dataset(&[4], 10);
    let dataset = published.open();
    let first = publish_annotations(
        &dataset,
        "labels",
        &rows_for(&dataset, 1),
        &Default::default(),
        &small_options(),
    )
    .unwrap();
    let dataset = republish_source(&published, &[3, 3]);
    // The old set annotates another snapshot: reported, not shown.
    let catalog = read_catalog(&dataset).unwrap();
    let stale = catalog.sets["labels"].as_ref().unwrap_err().to_string();
    assert!(stale.contains("snap-1"), "{stale}");
    // The name is taken: republishing it is a collision error even though the old set is
    // stale, and the old entry stays (a publication never drops a set).
    let rows = rows_for(&dataset, 2);
    let e = publish_annotations(
        &dataset,
        "labels",
        &rows,
        &Default::default(),
        &small_options(),
    )
    .unwrap_err();
    assert!(matches!(e, AnnotationError::Collision(_)), "{e}");
    // Under a new name it publishes, with a publication id derived from the new snapshot.
    let second = publish_annotations(
        &dataset,
        "labels-v2",
        &rows,
        &Default::default(),
        &small_options(),
    )
    .unwrap();
    assert_ne!(second.publication_id, first.publication_id);
    let catalog = read_catalog(&dataset).unwrap();
    assert!(catalog.sets["labels"].is_err());
    let set = catalog.sets["labels-v2"].as_ref().unwrap();
    let back: Vec<AnnotationRecord> = set.iter(&dataset).map(Result::unwrap).collect();
    assert_eq!(back, rows);
    assert_eq!(back.len(), 6);
}

// ---------------------------------------------------------------------------------------------
// Interop with the format owner, the `signal-dataset` library (tests/python/annotation_tool.py
// drives it). The base datasets are written by the library itself.

mod library {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use sdsfs::annotations::{commit_to_catalog, AnnotationRecord};
    use sdsfs::arrayrecord::{ArrayRecordReader, ArrayRecordWriter, WriterOptions};
    use sdsfs::format::documents::annotation::layout;
    use sdsfs::format::documents::annotation::AnnotationRef;
    use sdsfs::format::documents::{CatalogPointer, Revision, SetRoot, WorkerPointer};
    use sdsfs::format::json::JsonLimits;
    use sdsfs::format::limits::RecordLimits;
    use sdsfs::format::path::RelPath;
    use sdsfs::format::record;
    use sdsfs::storage::ObjectStore;

    use super::common::cli::{ok as sds, sds as sds_output};
    use super::common::datasets::{copy_tree, files_below, local_store};
    use super::common::{python, repo_root, run_python};

    const RECORDS: u64 = 7;
    const PER_SHARD: &str = "3";
    const METADATA: &str = r#"{"n":2.5,"tool":"x","ü":[1,null]}"#;

    pub fn tool(args: &[&str]) -> String {
        String::from_utf8(run_python("annotation_tool.py", args, b"")).unwrap()
    }

    pub fn path(p: &Path) -> &str {
        p.to_str().unwrap()
    }

    /// A library dataset of `RECORDS` records at `dir/name`, and the row file for it; with
    /// `big_int`, the rows' values hold 2**70 (which needs the JSON layer's big integers).
    pub fn dataset_and_rows(dir: &Path, name: &str, big_int: bool) -> (PathBuf, PathBuf) {
        let root = dir.join(name);
        tool(&["make-dataset", path(&root), &RECORDS.to_string(), "2"]);
        let count = RECORDS.to_string();
        let mut args = vec!["make-rows", path(dir), &count];
        if !big_int {
            args.push("--no-big-int");
        }
        tool(&args);
        (root, dir.join("rows.jsonl"))
    }

    /// The library publishes set `labels` in one process and set `qa` (publication `pub-1`)
    /// distributed, three workers then the coordinator.
    pub fn library_publishes(root: &Path, rows: &Path, scratch: &Path) {
        let (root, rows) = (path(root), path(rows));
        tool(&[
            "publish",
            root,
            "labels",
            rows,
            "--metadata",
            METADATA,
            "--records-per-shard",
            PER_SHARD,
        ]);
        let mut pointers = Vec::new();
        for k in 0..3 {
            let out = tool(&[
                "write-shard",
                root,
                "qa",
                "pub-1",
                rows,
                "--shard",
                &k.to_string(),
                "--records-per-shard",
                PER_SHARD,
            ]);
            let file = scratch.join(format!("pointer-{k}.json"));
            std::fs::write(&file, out).unwrap();
            pointers.push(file);
        }
        let mut args = vec!["publish-shards", root, "qa", "pub-1"];
        args.extend(pointers.iter().map(|p| path(p)));
        args.extend(["--metadata", METADATA]);
        tool(&args);
    }

    fn read(store: &dyn ObjectStore, rel: &str) -> Vec<u8> {
        store
            .read(&RelPath::new(rel).unwrap(), None)
            .unwrap()
            .to_vec()
    }

    /// Every carrier of `object` decodes and re-encodes to the same payload; the payloads
    /// re-written with the default options give the same object bytes. Returns the payloads.
    fn reproduce_object(bytes: &[u8], first_ordinal: u64) -> Vec<Vec<u8>> {
        let reader = ArrayRecordReader::open(bytes.to_vec(), "library object").unwrap();
        let limits = RecordLimits::default();
        let payloads: Vec<Vec<u8>> = (0..reader.len())
            .map(|k| reader.read(k).unwrap().to_vec())
            .collect();
        for (k, payload) in payloads.iter().enumerate() {
            let carrier = record::decode(bytes::Bytes::from(payload.clone()), &limits).unwrap();
            let row = AnnotationRecord::from_carrier(carrier, first_ordinal + k as u64).unwrap();
            assert_eq!(
                &record::encode(&row.to_carrier(), &limits).unwrap(),
                payload
            );
        }
        let mut writer = ArrayRecordWriter::new(Vec::new(), WriterOptions::default()).unwrap();
        for payload in &payloads {
            writer.write(payload).unwrap();
        }
        assert_eq!(writer.finish().unwrap(), bytes, "object bytes differ");
        payloads
    }

    /// Our documents, ids and objects equal the library's, built from what it wrote.
    #[test]
    fn our_writers_reproduce_the_library_s_sets_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let (root, rows) = dataset_and_rows(dir.path(), "ds", false);
        library_publishes(&root, &rows, dir.path());
        let store = local_store(&root);
        let limits = JsonLimits::CONTROL;
        let pointer_bytes = read(store.as_ref(), "annotations/catalog.json");
        let pointer = CatalogPointer::parse(&pointer_bytes, &limits).unwrap();
        assert_eq!(pointer.to_json().as_bytes(), pointer_bytes);
        let revision_bytes = read(store.as_ref(), pointer.revision.path.as_str());
        pointer.revision.check_bytes(&revision_bytes).unwrap();
        let revision = Revision::parse(&revision_bytes, &limits).unwrap();
        assert_eq!(revision.to_json().as_bytes(), revision_bytes);
        assert_eq!(revision.sets.len(), 2);
        for (name, reference) in &revision.sets {
            let root_bytes = read(store.as_ref(), reference.path.as_str());
            let set = SetRoot::parse(&root_bytes, &limits).unwrap();
            assert_eq!(set.to_json().as_bytes(), root_bytes);
            assert_eq!(
                set.metadata,
                sdsfs::format::json::parse_object(METADATA.as_bytes(), &limits).unwrap()
            );
            let expected_pid = match name.as_str() {
                "labels" => layout::default_publication_id("snap-0001", "labels"),
                _ => "pub-1".to_string(),
            };
            assert_eq!(set.publication_id, expected_pid);
            assert_eq!(
                reference.path,
                layout::set_root_path(name, &expected_pid).unwrap()
            );
            for (index, shard) in set.shards.iter().enumerate() {
                let bytes = read(store.as_ref(), shard.object.path.as_str());
                let payloads = reproduce_object(&bytes, shard.first_ordinal);
                let hash = layout::content_hash(payloads.iter().map(Vec::as_slice));
                let shard_id = layout::logical_shard_id(index as u64);
                let id = if name == "labels" {
                    layout::single_process_object_id(
                        &set.publication_id,
                        shard.first_ordinal,
                        &hash,
                    )
                } else {
                    layout::distributed_object_id(name, &set.publication_id, &shard_id, &hash)
                };
                assert_eq!(
                    shard.object.path,
                    layout::object_path(name, &set.publication_id, &id).unwrap()
                );
                let pointer_path =
                    layout::worker_pointer_path(name, &set.publication_id, &shard_id).unwrap();
                if name == "labels" {
                    assert!(
                        store.info(&pointer_path, None).is_err(),
                        "a one-process set has no worker pointers"
                    );
                    continue;
                }
                let pointer_bytes = read(store.as_ref(), pointer_path.as_str());
                let pointer = WorkerPointer::parse(&pointer_bytes, &limits).unwrap();
                pointer.validate().unwrap();
                assert_eq!(pointer.to_json().as_bytes(), pointer_bytes);
                assert_eq!(
                    pointer.uri,
                    format!("{}/{}", path(&root), shard.object.path)
                );
            }
        }
    }

    /// Every file under `dir/annotations`, relative to `dir`, with its bytes, by path.
    pub fn annotation_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out: Vec<(String, Vec<u8>)> = files_below(dir)
            .into_iter()
            .filter(|(rel, _)| rel.starts_with("annotations/"))
            .map(|(rel, file)| (rel, std::fs::read(file).unwrap()))
            .collect();
        out.sort();
        out
    }

    /// NEEDS THE DATASET READER OF THE REAL FORMAT (the core rewrite): `sds annotate` on a copy
    /// of a library dataset writes every annotation file the library wrote on the original,
    /// byte for byte (worker pointers up to the root they record), the library reads our sets
    /// back equal to its own, and our reader reads the library's sets, distributed included.
    #[test]
    fn sds_annotate_writes_the_library_s_files_and_each_reads_the_other_s() {
        let dir = tempfile::tempdir().unwrap();
        let (ours_src, rows) = dataset_and_rows(dir.path(), "ds", true);
        let theirs = copy_tree(&ours_src, |_| false);
        library_publishes(theirs.path(), &rows, dir.path());
        let ours = ours_src.to_str().unwrap();
        let rows = path(&rows);
        sds(&[
            "annotate",
            ours,
            "--name",
            "labels",
            "--rows",
            rows,
            "--metadata",
            METADATA,
            "--records-per-shard",
            PER_SHARD,
        ]);
        for k in 0..3 {
            sds(&[
                "annotate",
                "write-shard",
                ours,
                "--name",
                "qa",
                "--publication-id",
                "pub-1",
                "--rows",
                rows,
                "--shard",
                &k.to_string(),
                "--records-per-shard",
                PER_SHARD,
            ]);
        }
        sds(&[
            "annotate",
            "publish",
            ours,
            "--name",
            "qa",
            "--publication-id",
            "pub-1",
            "--metadata",
            METADATA,
            "--records-per-shard",
            PER_SHARD,
        ]);
        // The catalog revisions depend on publication order only, which both sides share.
        let mine = annotation_files(&ours_src);
        let theirs_files: Vec<(String, Vec<u8>)> = annotation_files(theirs.path())
            .into_iter()
            .map(|(p, b)| {
                let text = String::from_utf8_lossy(&b).replace(path(theirs.path()), ours);
                let bytes = if p.contains("/shards/") {
                    text.into_bytes()
                } else {
                    b
                };
                (p, bytes)
            })
            .collect();
        let names =
            |files: &[(String, Vec<u8>)]| files.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
        assert_eq!(names(&mine), names(&theirs_files));
        for ((p, a), (_, b)) in mine.iter().zip(&theirs_files) {
            assert!(
                a == b,
                "{p} differs:\n ours   {}\n theirs {}",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
        }
        // The library reads our sets exactly as it reads its own.
        assert_eq!(tool(&["read", ours]), tool(&["read", path(theirs.path())]));
        // And our reader reads the library's.
        let dataset = super::open_local(theirs.path());
        let catalog = sdsfs::annotations::read_catalog(&dataset).unwrap();
        assert_eq!(catalog.sets.len(), 2);
        let mine = super::open_local(&ours_src);
        let my_catalog = sdsfs::annotations::read_catalog(&mine).unwrap();
        for name in ["labels", "qa"] {
            let a: Vec<AnnotationRecord> = catalog.sets[name]
                .as_ref()
                .unwrap()
                .iter(&dataset)
                .map(Result::unwrap)
                .collect();
            let b: Vec<AnnotationRecord> = my_catalog.sets[name]
                .as_ref()
                .unwrap()
                .iter(&mine)
                .map(Result::unwrap)
                .collect();
            assert_eq!(a.len() as u64, RECORDS);
            assert_eq!(a, b);
        }
        assert!(sdsfs::annotations::verify_sets(&dataset).is_empty());
        // A name the library published is a collision for us, with a clear message.
        let out = sds_output(&[
            "annotate",
            path(theirs.path()),
            "--name",
            "labels",
            "--rows",
            rows,
            "--fill",
            "skipped",
        ]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("\"labels\" already exists"), "{err}");
    }

    fn hold_lock_in_python(root: &Path, seconds: &str) -> std::process::Child {
        let mut child = Command::new(python())
            .arg(repo_root().join("tests/python/annotation_tool.py"))
            .args(["hold-lock", path(root), seconds])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let stdout = child.stdout.as_mut().unwrap();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
        assert_eq!(line.trim(), "locked");
        child
    }

    /// Our compare-and-swap of the catalog waits while the library's lock is held, and the
    /// library's waits while ours is: both take `annotations/.catalog.json.lock` the same way.
    #[test]
    fn the_catalog_lock_excludes_the_library_and_us_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let (root, rows) = dataset_and_rows(dir.path(), "ds", false);
        let store = local_store(&root);
        let limits = JsonLimits::CONTROL;
        let fake = |name: &str| {
            let pid = layout::default_publication_id("snap-0001", name);
            AnnotationRef::new(layout::set_root_path(name, &pid).unwrap(), 10)
        };
        // The library creates the first catalog (create-only, no lock).
        tool(&["publish", path(&root), "a", path(&rows)]);

        // We hold the lock (as our store does: flock on the same file); the library waits.
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(root.join("annotations/.catalog.json.lock"))
            .unwrap();
        // SAFETY: `lock` is an open file for the duration of the call.
        assert_eq!(
            unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) },
            0
        );
        assert_eq!(tool(&["lock-held", path(&root)]).trim(), "\"held\"");
        let mut library = Command::new(python())
            .arg(repo_root().join("tests/python/annotation_tool.py"))
            .args(["publish", path(&root), "c", path(&rows)])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        assert!(
            library.try_wait().unwrap().is_none(),
            "the library published through our lock"
        );
        drop(lock);
        assert!(library.wait().unwrap().success());

        // The library holds it (its own way, from Python) and our swap waits.
        let mut holder = hold_lock_in_python(&root, "1.5");
        let started = Instant::now();
        commit_to_catalog(store.as_ref(), &limits, "b", &fake("b"), 8).unwrap();
        let waited = started.elapsed();
        assert!(holder.wait().unwrap().success());
        assert!(
            waited >= Duration::from_millis(1200),
            "our swap did not wait for the library's lock: {waited:?}"
        );
        let state = sdsfs::annotations::read::read_catalog_state(store.as_ref(), &limits).unwrap();
        let names: Vec<String> = state.revision.unwrap().sets.into_keys().collect();
        assert_eq!(names, ["a", "b", "c"]);
    }
}

/// Opens a local dataset with default options.
fn open_local(root: &std::path::Path) -> Dataset {
    Dataset::open(local_store(root) as Arc<_>, OpenOptions::default()).unwrap()
}
