//! The annotation overlay of a real mount: `annotations/<set>/set.json`, per-record
//! `annotation.json` and carrier fields with every view, a catalog change visible after the
//! metadata TTL without remounting, a broken set hidden, and a failing or deleted object giving
//! EIO only on that set's files of the records it holds, its directories still listable.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::datasets::{obj, publish_dataset};
use common::mount::MountGuard;
use sdsfs::annotations::{
    publish_annotations, read_catalog, AnnotationOptions, AnnotationRecord, AnnotationStatus,
};
use sdsfs::dataset::Dataset;
use sdsfs::format::dtype::DType;
use sdsfs::format::json::Value;
use sdsfs::format::record::{Axis, Field};

fn rows(dataset: &Dataset, tag: &str) -> Vec<AnnotationRecord> {
    (0..dataset.len())
        .map(|o| {
            let id = dataset.record_meta(o).unwrap().id;
            let status = [
                AnnotationStatus::Success,
                AnnotationStatus::Failed,
                AnnotationStatus::Skipped,
            ][(o % 3) as usize];
            let mut row = AnnotationRecord::new(id, o, status);
            row.values = obj(&[("tag", tag.into()), ("n", Value::Int(o as i128))]);
            if status == AnnotationStatus::Failed {
                row.detail_status = Some("no lock".into());
            }
            if o % 2 == 0 {
                let data: Vec<u8> = (0..(o + 2) * 8).map(|b| b as u8 ^ 0x5a).collect();
                let field = Field::new(DType::C64, vec![o + 2], data)
                    .unwrap()
                    .with_axes(vec![Axis::new("time", o + 2)]);
                row.fields.insert("det/iq".into(), field);
            }
            row
        })
        .collect()
}

fn options(per_shard: u64) -> AnnotationOptions {
    AnnotationOptions {
        records_per_shard: per_shard,
        ..AnnotationOptions::default()
    }
}

fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    std::fs::read(path)
}

fn listing(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn annotation_overlay_of_a_real_mount() {
    let published = publish_dataset(&[4, 3], 10);
    let dataset = published.open();
    let labels = rows(&dataset, "labels");
    publish_annotations(
        &dataset,
        "labels",
        &labels,
        &Default::default(),
        &options(10),
    )
    .unwrap();
    let flaky = rows(&dataset, "flaky");
    publish_annotations(&dataset, "flaky", &flaky, &Default::default(), &options(4)).unwrap();
    let gone = rows(&dataset, "gone");
    let gone_set =
        publish_annotations(&dataset, "gone", &gone, &Default::default(), &options(10)).unwrap();
    let catalog = read_catalog(&dataset).unwrap();
    let flaky_set = catalog.sets["flaky"].as_ref().unwrap();
    let labels_root = published.file(
        catalog.sets["labels"]
            .as_ref()
            .unwrap()
            .reference()
            .path
            .as_str(),
    );
    // Break "gone" (its set root disappears) and truncate "flaky"'s first object (ordinals 0-3).
    std::fs::remove_file(published.file(gone_set.root_path.as_str())).unwrap();
    let object = published.file(flaky_set.root().shards[0].object.path.as_str());
    let bytes = std::fs::read(&object).unwrap();
    std::fs::remove_file(&object).unwrap();
    std::fs::write(&object, &bytes[..bytes.len() / 2]).unwrap();

    let mount = MountGuard::mount(published.root(), &["--metadata-ttl", "1"]);
    assert_eq!(listing(&mount.path("annotations")), ["flaky", "labels"]);
    assert_eq!(listing(&mount.path("annotations/labels")), ["set.json"]);
    assert_eq!(
        read(&mount.path("annotations/labels/set.json")).unwrap(),
        read(&labels_root).unwrap()
    );
    assert!(
        mount.log_text().contains("gone"),
        "broken set not logged: {}",
        mount.log_text()
    );

    for (o, row) in labels.iter().enumerate() {
        let dir = mount.path(&format!("records/{o}/annotations/labels"));
        assert_eq!(
            listing(&mount.path(&format!("records/{o}/annotations"))),
            ["flaky", "labels"]
        );
        assert_eq!(listing(&dir), ["annotation.json", "fields"]);
        let json = read(&dir.join("annotation.json")).unwrap();
        assert_eq!(
            String::from_utf8(json).unwrap(),
            row.to_annotation_json("labels")
        );
        let fields = dir.join("fields");
        match row.fields.get("det/iq") {
            None => assert!(listing(&fields).is_empty()),
            Some(field) => {
                assert_eq!(
                    listing(&fields.join("det")).len(),
                    6,
                    "raw, json, npy, sigmf pair, spectrogram"
                );
                // The carrier's own IQ has its picture (decoded in tests/mount_pictures.rs).
                let png = fields.join("det/iq.spectrogram.png");
                let bytes = read(&png).unwrap();
                assert_eq!(bytes.len() as u64, std::fs::metadata(&png).unwrap().len());
                assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
                assert_eq!(
                    read(&fields.join("det/iq.raw")).unwrap(),
                    field.data.to_vec()
                );
                assert_eq!(
                    read(&fields.join("det/iq.sigmf-data")).unwrap(),
                    field.data.to_vec()
                );
                let npy = common::npy::npy_bytes(field.meta.dtype, &field.meta.shape, &field.data);
                assert_eq!(read(&fields.join("det/iq.npy")).unwrap(), npy);
                let described = read(&fields.join("det/iq.json")).unwrap();
                let described: serde_json::Value = serde_json::from_slice(&described).unwrap();
                assert_eq!(described["name"], "det/iq");
                assert_eq!(described["dtype"], "<c8");
                assert_eq!(described["shape"], serde_json::json!(field.meta.shape));
            }
        }
        // The failing object: EIO on flaky's files of ordinals 0-3 only.
        let flaky_json = mount.path(&format!("records/{o}/annotations/flaky/annotation.json"));
        if o < 4 {
            let e = read(&flaky_json).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EIO), "record {o}: {e}");
        } else {
            let text = String::from_utf8(read(&flaky_json).unwrap()).unwrap();
            assert_eq!(text, flaky[o].to_annotation_json("flaky"));
        }
        assert!(read(&mount.path(&format!("records/{o}/record.json"))).is_ok());
    }

    // A set published while mounted shows after the TTL, without remounting.
    let late = rows(&dataset, "late");
    publish_annotations(&dataset, "late", &late, &Default::default(), &options(10)).unwrap();
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(
        listing(&mount.path("annotations")),
        ["flaky", "labels", "late"]
    );
    // A record's listing, cached by the kernel since the loop above, shows the new set too.
    assert_eq!(
        listing(&mount.path("records/2/annotations")),
        ["flaky", "labels", "late"]
    );
    let json = read(&mount.path("records/2/annotations/late/annotation.json")).unwrap();
    assert_eq!(
        String::from_utf8(json).unwrap(),
        late[2].to_annotation_json("late")
    );
    assert!(read(&mount.path("records/2/annotations/late/fields/det/iq.raw")).is_ok());
}

#[test]
fn a_set_published_for_an_earlier_source_stays_hidden_beside_a_new_one() {
    let published = publish_dataset(&[3], 10);
    let dataset = published.open();
    publish_annotations(
        &dataset,
        "labels",
        &rows(&dataset, "old"),
        &Default::default(),
        &options(10),
    )
    .unwrap();
    // The source changes in place: a new snapshot with other records.
    std::fs::remove_file(published.file("root.json")).unwrap();
    let store = common::datasets::local_store(published.root());
    let (receipts, _) = common::datasets::write_shards_at(store.as_ref(), &[2, 3], 1);
    let publish_options = sdsfs::dataset::PublishOptions::new("ds-test", "snap-2");
    sdsfs::dataset::publish(store.as_ref(), &receipts, &publish_options).unwrap();
    let dataset = published.open();

    let mount = MountGuard::mount(published.root(), &["--metadata-ttl", "1"]);
    assert!(listing(&mount.path("annotations")).is_empty());
    assert!(listing(&mount.path("records/0/annotations")).is_empty());
    assert!(mount.log_text().contains("snap-1"), "{}", mount.log_text());

    // The name is taken (a publication never replaces a set), so the new source's set gets a
    // new name; the stale one stays hidden.
    let fresh = rows(&dataset, "new");
    let taken = publish_annotations(&dataset, "labels", &fresh, &Default::default(), &options(2));
    assert!(taken.unwrap_err().to_string().contains("already exists"));
    publish_annotations(
        &dataset,
        "labels-v2",
        &fresh,
        &Default::default(),
        &options(2),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(listing(&mount.path("annotations")), ["labels-v2"]);
    for (o, row) in fresh.iter().enumerate() {
        let json = read(&mount.path(&format!(
            "records/{o}/annotations/labels-v2/annotation.json"
        )));
        assert_eq!(
            String::from_utf8(json.unwrap()).unwrap(),
            row.to_annotation_json("labels-v2")
        );
        if let Some(field) = row.fields.get("det/iq") {
            let raw = read(&mount.path(&format!(
                "records/{o}/annotations/labels-v2/fields/det/iq.raw"
            )));
            assert_eq!(raw.unwrap(), field.data.to_vec());
        }
    }
}

/// A catalog revision whose bytes no longer hash to its name leaves every `annotations/`
/// directory empty while the records still mount, the log line names the catalog and the
/// revision, and `sds verify` and `sds info` name the revision and the rule.
#[test]
fn a_revision_that_does_not_hash_to_its_name_empties_annotations_only() {
    let published = publish_dataset(&[3], 10);
    let dataset = published.open();
    let set = publish_annotations(
        &dataset,
        "labels",
        &rows(&dataset, "t"),
        &Default::default(),
        &options(10),
    )
    .unwrap();
    let revision = published.file(set.revision_path.as_str());
    let mut bytes = std::fs::read(&revision).unwrap();
    bytes.push(b' ');
    std::fs::remove_file(&revision).unwrap();
    std::fs::write(&revision, &bytes).unwrap();

    let mount = MountGuard::mount(published.root(), &[]);
    assert_eq!(listing(&mount.path("records")), ["0", "1", "2"]);
    assert!(listing(&mount.path("annotations")).is_empty());
    assert!(listing(&mount.path("records/1/annotations")).is_empty());
    // Logged against the catalog pointer, through which the revision is reached.
    let log = mount.log_text();
    let line = log.lines().find(|line| line.contains("SHA-256"));
    let line = line.unwrap_or_else(|| panic!("no line about the hash: {log}"));
    assert!(line.contains("annotations/catalog.json"), "{line}");
    assert!(line.contains(set.revision_path.as_str()), "{line}");
    drop(mount);

    let root = published.root().to_str().unwrap();
    for command in ["verify", "info"] {
        let out = common::cli::sds(&[command, root]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(set.revision_path.as_str()) && text.contains("SHA-256"),
            "sds {command}: {text}"
        );
    }
}

fn assert_eio<T: std::fmt::Debug>(what: &Path, result: std::io::Result<T>) {
    let error = result.expect_err(&what.display().to_string());
    assert_eq!(
        error.raw_os_error(),
        Some(libc::EIO),
        "{}: {error}",
        what.display()
    );
}

/// A deleted carrier object gives EIO on exactly the files that need it (`annotation.json`,
/// the field files, the `fields/` listing) of the records it holds; `annotations/<set>` stays
/// listable, other records' files read, and the errors are charged to that object in
/// `sdsfs status`.
#[test]
fn a_deleted_carrier_object_fails_its_files_and_leaves_its_directories_listable() {
    let published = publish_dataset(&[4], 10);
    let dataset = published.open();
    let labels = rows(&dataset, "t");
    publish_annotations(
        &dataset,
        "labels",
        &labels,
        &Default::default(),
        &options(2),
    )
    .unwrap();
    let catalog = read_catalog(&dataset).unwrap();
    let set = catalog.sets["labels"].as_ref().unwrap();
    // Ordinals 0 and 1 are in the first object; 2 and 3 in the second.
    let gone = set.root().shards[0].object.path.clone();
    std::fs::remove_file(published.file(gone.as_str())).unwrap();

    let mount = MountGuard::mount(published.root(), &[]);
    assert_eq!(listing(&mount.path("annotations")), ["labels"]);
    assert!(std::fs::read(mount.path("annotations/labels/set.json")).is_ok());
    for (o, row) in labels.iter().enumerate() {
        let dir = mount.path(&format!("records/{o}/annotations/labels"));
        assert_eq!(
            listing(&mount.path(&format!("records/{o}/annotations"))),
            ["labels"]
        );
        assert_eq!(listing(&dir), ["annotation.json", "fields"], "record {o}");
        assert!(std::fs::metadata(dir.join("fields")).unwrap().is_dir());
        let json = dir.join("annotation.json");
        // Even ordinals have a `det/iq` field.
        let raw = dir.join("fields/det/iq.raw");
        if o < 2 {
            assert_eio(&json, std::fs::metadata(&json));
            assert_eio(&json, std::fs::read(&json));
            assert_eio(&raw, std::fs::read(&raw));
            let fields = dir.join("fields");
            let entries = std::fs::read_dir(&fields).and_then(|d| d.collect::<Result<Vec<_>, _>>());
            assert_eio(&fields, entries);
            // `ls -l` of the set's directory: the listing, then one stat per entry.
            let ls = Command::new("ls").arg("-l").arg(&dir).output().unwrap();
            let stderr = String::from_utf8_lossy(&ls.stderr);
            assert!(stderr.contains("annotation.json"), "{stderr}");
            assert!(stderr.contains("Input/output error"), "{stderr}");
            assert!(!stderr.contains("'fields'"), "{stderr}");
        } else {
            let text = std::fs::read_to_string(&json).unwrap();
            assert_eq!(text, row.to_annotation_json("labels"));
            match row.fields.get("det/iq") {
                Some(field) => assert_eq!(std::fs::read(&raw).unwrap(), field.data.to_vec()),
                None => assert!(listing(&dir.join("fields")).is_empty()),
            }
        }
        assert!(std::fs::read(mount.path(&format!("records/{o}/record.json"))).is_ok());
    }
    // The label tables index the set's carriers: the ones that are gone have no line (as
    // they show no file), the tables still read whole at the size stat gives.
    for table in ["columns/labels.jsonl", "columns/labels.arrow"] {
        let path = mount.path(table);
        let size = std::fs::metadata(&path).unwrap().len();
        assert_eq!(std::fs::read(&path).unwrap().len() as u64, size, "{table}");
    }
    let log = mount.log_text();
    assert!(
        log.contains(gone.as_str()),
        "the log names the object: {log}"
    );
    assert!(
        log.contains("an annotation set's boxes of a record have no line"),
        "{log}"
    );
    let status = Command::new(env!("CARGO_BIN_EXE_sdsfs"))
        .args(["status", "--json"])
        .arg(&mount.mountpoint)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let charged: Vec<&String> = report["errors"].as_object().unwrap().keys().collect();
    assert!(
        !charged.is_empty() && charged.iter().all(|object| object.ends_with(gone.as_str())),
        "errors charged to {charged:?}"
    );
}
