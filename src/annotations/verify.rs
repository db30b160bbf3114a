//! Verification of every annotation set of a dataset, for `sds verify`.
//!
//! Reads the catalog pointer and revision, every set root, and every carrier record of every
//! set (each checked for exact keys, its ordinal and alignment with the source record), and
//! reports each problem found rather than stopping at the first, so one run lists everything a
//! repair needs. A shard object that cannot be opened is reported once, not once per record.

use std::collections::BTreeSet;

use super::read::read_catalog;
use super::AnnotationError;
use crate::dataset::Dataset;

/// One problem: the object concerned, the source ordinal when one record is concerned, and
/// what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub object: String,
    pub ordinal: Option<u64>,
    pub problem: String,
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
        let mut broken_objects = BTreeSet::new();
        for ordinal in 0..set.len() {
            let object = set
                .shard_of(ordinal)
                .map(|s| dataset.store().describe(&s.object.path))
                .unwrap_or_default();
            if broken_objects.contains(&object) {
                continue;
            }
            if let Err(e) = set.get(dataset, ordinal) {
                let whole_object = matches!(
                    &e,
                    AnnotationError::Storage(_) | AnnotationError::Dataset(_)
                ) || e.to_string().contains("carrier records but");
                if whole_object {
                    broken_objects.insert(object.clone());
                }
                problems.push(Problem {
                    object,
                    ordinal: Some(ordinal),
                    problem: e.to_string(),
                });
            }
        }
    }
    problems
}

/// Verifies the signal dataset (see [`crate::dataset::verify`]) and then every annotation set:
/// the catalog, revision and set roots, every carrier record, and the integrity of every set
/// object (with `deep`, its content address and a walk of every chunk). This is `sds verify`.
pub fn verify_dataset(
    dataset: &Dataset,
    options: crate::dataset::VerifyOptions,
) -> crate::dataset::VerifyReport {
    let mut report = crate::dataset::verify(dataset, options);
    let objects: Vec<crate::format::documents::Reference> = read_catalog(dataset)
        .map(|catalog| {
            catalog
                .sound()
                .flat_map(|(_, set)| {
                    set.root()
                        .shards
                        .iter()
                        .map(|s| super::read::shard_reference(&s.object))
                })
                .collect()
        })
        .unwrap_or_default();
    let (object_problems, checked) = crate::dataset::verify_objects(dataset, &objects, options);
    report.shards_checked += checked;
    report.problems.extend(object_problems);
    let set_count = read_catalog(dataset).map_or(0, |c| c.sets.len() as u64);
    report.annotation_sets_checked = set_count;
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
