//! The catalog race: eight `sds annotate` processes publish eight different sets at the same
//! moment, several rounds in a row, against one local dataset. Every set must be in the final
//! catalog, and the revisions the publishers committed must form one chain (each the previous
//! plus exactly one set), so no update was lost. (The same race on S3 and GCS servers is in
//! tests/storage_s3.rs and tests/storage_gcs.rs.)

mod common;

use common::annotate::{assert_no_set_lost, assert_sets_read_back, race_publishers, race_rows};
use common::datasets::publish_dataset;

const PROCESSES: usize = 8;
const ROUNDS: usize = 4;

#[test]
fn eight_publishers_at_once_lose_nothing() {
    let published = publish_dataset(&[3, 4], 10);
    let root = published.root().to_path_buf();
    let rows = race_rows(&root);
    let outcome = race_publishers(root.to_str().unwrap(), &[], &rows, PROCESSES, ROUNDS);
    assert_eq!(outcome.committed.len(), PROCESSES * ROUNDS);
    assert_no_set_lost(&outcome, |path| std::fs::read(root.join(path)).unwrap());

    // And every set reads back through the library.
    assert_eq!(published.open().len(), 7);
    assert_sets_read_back(&published.open(), PROCESSES * ROUNDS);
}
