//! Verification of every annotation set of a dataset, for `sds verify`.
//!
//! Reads the catalog pointer and revision, every set root, and every carrier record of every
//! set (each checked for exact keys, its ordinal and alignment with the source record), and
//! reports each problem found rather than stopping at the first, so one run lists everything a
//! repair needs. A shard object that cannot be opened is reported once, not once per record.

use super::read::{read_catalog, shard_reference, AnnotationSet};
use super::{AnnotationError, Cause};
use crate::arrayrecord::ArrayRecordReader;
use crate::dataset::Dataset;
use crate::format::documents::annotation::layout::{content_hash, single_process_object_id};

/// One problem: the object concerned, the source ordinal when one record is concerned, and
/// what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub object: String,
    pub ordinal: Option<u64>,
    pub problem: String,
}

/// The rows of one set shard, in order, until its object proves unreadable as a whole: then
/// one problem for it and no more (a shard claiming 10^15 rows over a small object must not
/// mean 10^15 problems, or iterations).
fn verify_shard_rows(
    dataset: &Dataset,
    set: &AnnotationSet,
    shard: &crate::format::documents::SetShard,
    problems: &mut Vec<Problem>,
) {
    let object = dataset.store().describe(&shard.object.path);
    let end = shard.first_ordinal.saturating_add(shard.record_count);
    for ordinal in shard.first_ordinal..end {
        if let Err(e) = set.get(dataset, ordinal) {
            let whole_object = matches!(
                &e,
                AnnotationError::Storage(_) | AnnotationError::Dataset(_)
            ) || e.to_string().contains("carrier records but");
            problems.push(Problem {
                object: object.clone(),
                ordinal: Some(ordinal),
                problem: e.to_string(),
            });
            if whole_object {
                return;
            }
        }
    }
}

/// Every problem of every annotation set of `dataset`; empty when all are sound (or there is
/// no catalog).
pub fn verify_sets(dataset: &Dataset) -> Vec<Problem> {
    let catalog_object = crate::format::documents::annotation::layout::catalog_path().map_or_else(
        |_| "annotations/catalog.json".to_string(),
        |p| dataset.store().describe(&p),
    );
    let catalog = match read_catalog(dataset) {
        Ok(catalog) => catalog,
        Err(e) => {
            return vec![Problem {
                object: catalog_object,
                ordinal: None,
                problem: e.to_string(),
            }]
        }
    };
    let mut problems = Vec::new();
    for (name, set) in &catalog.sets {
        let set = match set {
            Ok(set) => set,
            Err(e) => {
                problems.push(Problem {
                    object: format!("annotation set {name:?}"),
                    ordinal: None,
                    problem: e.to_string(),
                });
                continue;
            }
        };
        for shard in &set.root().shards {
            verify_shard_rows(dataset, set, shard, &mut problems);
        }
    }
    problems
}

/// Verifies the signal dataset (see [`crate::dataset::verify()`]) and then every annotation set:
/// the catalog, revision and set roots, every carrier record, and every set object's size and
/// structure; with `deep`, also a walk of every chunk and, for objects a single-process
/// publication named, that the name is the id of the carriers inside. This is `sds verify`.
pub fn verify_dataset(
    dataset: &Dataset,
    options: crate::dataset::VerifyOptions,
) -> crate::dataset::VerifyReport {
    let mut report = crate::dataset::verify(dataset, options);
    let catalog = read_catalog(dataset).ok();
    let sets: Vec<&AnnotationSet> = catalog
        .iter()
        .flat_map(|c| c.sound().map(|(_, set)| set.as_ref()))
        .collect();
    let objects: Vec<crate::format::documents::Reference> = sets
        .iter()
        .flat_map(|set| set.root().shards.iter().map(|s| shard_reference(&s.object)))
        .collect();
    // Annotation objects are not named by the SHA-256 of their bytes, so the dataset layer's
    // deep content-address check does not apply: structure here, the deep checks below.
    let shallow = crate::dataset::VerifyOptions { deep: false };
    let (object_problems, checked) = crate::dataset::verify_objects(dataset, &objects, shallow);
    report.shards_checked += checked;
    report.problems.extend(object_problems);
    if options.deep {
        for set in &sets {
            report.problems.extend(deep_problems(dataset, set));
        }
    }
    report.annotation_sets_checked = catalog.as_ref().map_or(0, |c| c.sets.len() as u64);
    report.problems.extend(
        verify_sets(dataset)
            .into_iter()
            .map(|p| crate::dataset::Problem {
                object: p.object,
                ordinal: p.ordinal,
                rule: p.problem,
            }),
    );
    report
}

/// Deep checks of one set's objects: every chunk walks, and a 64-hex object name (what a
/// single-process publication writes) is SHA-256 of
/// `"<publication_id>:<first_ordinal>:<content hash>"` of the carriers inside. A 32-hex name
/// (distributed) depends on the worker's logical shard id, which the set root does not record,
/// so it is not checked.
fn deep_problems(dataset: &Dataset, set: &AnnotationSet) -> Vec<crate::dataset::Problem> {
    let mut problems = Vec::new();
    for shard in &set.root().shards {
        let object = dataset.store().describe(&shard.object.path);
        if let Err(cause) = check_object_deep(dataset, set, shard) {
            problems.push(crate::dataset::Problem {
                object,
                ordinal: None,
                rule: cause.to_string(),
            });
        }
    }
    problems
}

fn check_object_deep(
    dataset: &Dataset,
    set: &AnnotationSet,
    shard: &crate::format::documents::SetShard,
) -> Result<(), Cause> {
    let source = crate::storage::ObjectReader::open(
        dataset.store().clone(),
        shard.object.path.clone(),
        shard.object.generation,
    )?;
    let name = dataset.store().describe(&shard.object.path);
    let reader = ArrayRecordReader::open(source, name)?;
    reader.verify_all()?;
    let leaf = shard
        .object
        .path
        .as_str()
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let stem = leaf.strip_suffix(".arrayrecord").unwrap_or(leaf);
    if stem.len() != 64 {
        return Ok(());
    }
    let payloads = (0..reader.len())
        .map(|k| reader.read(k))
        .collect::<Result<Vec<_>, _>>()?;
    let hash = content_hash(payloads.iter().map(|p| p.as_ref()));
    let id = single_process_object_id(set.publication_id(), shard.first_ordinal, &hash);
    if id == stem {
        Ok(())
    } else {
        Err(Cause::rule(format!(
            "its name is not the id of its carriers: SHA-256 of \"<publication_id>:<first_ordinal>:<content hash>\" is {id}"
        )))
    }
}
