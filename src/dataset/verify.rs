//! Verification of a whole published dataset (`sds verify`): every rule a reader checks lazily,
//! checked eagerly, with every problem reported rather than the first.
//!
//! What is checked, in order:
//!
//! 1. `root.json` and the snapshot ([`Dataset::open`] already did; a dataset that cannot be
//!    opened is one problem and nothing else can be walked).
//! 2. Every manifest page: its size against its reference, its shape, and
//!    [`ManifestPage::validate_against`] (range, shard count, size sum, tiling).
//! 3. Every shard object referenced by an entry, once per path (views share shards): present,
//!    size equal to `stored_bytes` (absolute references too, although a reader does not check
//!    theirs), an ArrayRecord file that opens. Data and metadata shards of one entry hold the
//!    same number of records (the library does not check this: reported, never refused).
//! 4. Every record: its physical index exists in both shards (`record_indices` bounds), its
//!    metadata row parses and follows the record rules, its payload decodes (chunk hash checked
//!    on read) and follows the rules, and row and record agree.
//! 5. Annotation sets are the annotation layer's: `annotations::verify_dataset` runs this
//!    verification, then checks every set, and uses [`verify_objects`] for the integrity of
//!    set objects (size, structure, and with `deep` their content address and chunk walk).
//!
//! `deep` adds what costs a full read of every byte: a walk of every chunk of each shard and
//! annotation object from offset 0 (block headers and hashes, including chunks no index entry
//! points at). The normal mode still reads every record, so a flipped byte inside a record's
//! chunk is found either way; deep also finds damage in padding and the footer walk. (Shard
//! names derive from work ids, not content, so there is no content address to check.)
//!
//! Rationale for "report all": an operator repairing a dataset wants the full list at once. A
//! problem therefore never stops the walk; it only skips what depends on the broken object (the
//! records of a missing shard are not re-reported one by one: the shard's problem says it).

use std::collections::HashMap;
use std::sync::Arc;

use super::error::DatasetError;
use super::reader::{read_object_control, Dataset};
use super::shards::ShardReader;
use crate::arrayrecord::ArrayRecordReader;
use crate::format::documents::{DocumentError, ManifestPage, ObjectRef, Reference};
use crate::format::limits::JsonLimits;
use crate::format::path::{ObjectPath, RelPath};
use crate::format::record::{self, RecordMeta};
use crate::storage::{ObjectReader, ObjectStore};

/// How thorough a verification is.
#[derive(Debug, Clone, Copy, Default)]
pub struct VerifyOptions {
    /// Also walk every chunk of every shard.
    pub deep: bool,
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Location of the object that breaks the rule (as the store describes it).
    pub object: String,
    /// The record concerned, when the problem is about one record.
    pub ordinal: Option<u64>,
    /// The rule broken, and how.
    pub rule: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ordinal {
            Some(ordinal) => write!(f, "{} ordinal {ordinal}: {}", self.object, self.rule),
            None => write!(f, "{}: {}", self.object, self.rule),
        }
    }
}

/// What a verification found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub problems: Vec<Problem>,
    /// Records fully checked (row, payload, agreement), whether or not they had problems.
    pub records_checked: u64,
    /// The snapshot's record count.
    pub record_count: u64,
    pub pages_checked: u64,
    /// Distinct shard objects checked.
    pub shards_checked: u64,
    pub annotation_sets_checked: u64,
    pub deep: bool,
}

impl VerifyReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Opens the dataset at the root of `store` and verifies it; a dataset that cannot be opened
/// is reported as one problem.
pub fn verify_store(store: Arc<dyn ObjectStore>, options: VerifyOptions) -> VerifyReport {
    verify_store_with(store, options, verify)
}

/// [`verify_store`] with another verification of the opened dataset (the annotation layer's
/// `verify_dataset`, which adds the annotation sets).
pub fn verify_store_with(
    store: Arc<dyn ObjectStore>,
    options: VerifyOptions,
    verify_opened: impl FnOnce(&Dataset, VerifyOptions) -> VerifyReport,
) -> VerifyReport {
    verify_store_opened_with(store, super::OpenOptions::default(), options, verify_opened)
}

/// [`verify_store_with`] opening the dataset with `open` (e.g. refusing absolute references).
pub fn verify_store_opened_with(
    store: Arc<dyn ObjectStore>,
    open: super::OpenOptions,
    options: VerifyOptions,
    verify_opened: impl FnOnce(&Dataset, VerifyOptions) -> VerifyReport,
) -> VerifyReport {
    match Dataset::open(store.clone(), open) {
        Ok(dataset) => verify_opened(&dataset, options),
        Err(e) => {
            let fallback = RelPath::new(super::reader::ROOT_JSON)
                .map(|p| store.describe(&p))
                .unwrap_or_else(|_| super::reader::ROOT_JSON.to_string());
            let (object, rule) = split_error(&e, &fallback, store.as_ref());
            VerifyReport {
                problems: vec![Problem {
                    object,
                    ordinal: None,
                    rule: format!("cannot open the dataset: {rule}"),
                }],
                deep: options.deep,
                ..VerifyReport::default()
            }
        }
    }
}

/// Verifies an open dataset.
pub fn verify(dataset: &Dataset, options: VerifyOptions) -> VerifyReport {
    let mut verifier = Verifier {
        dataset,
        store: dataset.store().clone(),
        options,
        limits: dataset.options().control_limits,
        shards: HashMap::new(),
        report: VerifyReport {
            record_count: dataset.len(),
            deep: options.deep,
            ..VerifyReport::default()
        },
    };
    verifier.pages();
    verifier.report
}

/// Integrity of other objects stored like shards (annotation set objects): each exists, has
/// its reference's size and is a readable ArrayRecord file; with `deep`, its SHA-256 equals the
/// content address in its name and every chunk verifies. Returns the problems and how many
/// objects were checked.
pub fn verify_objects(
    dataset: &Dataset,
    references: &[Reference],
    options: VerifyOptions,
) -> (Vec<Problem>, u64) {
    let mut verifier = Verifier {
        dataset,
        store: dataset.store().clone(),
        options,
        limits: dataset.options().control_limits,
        shards: HashMap::new(),
        report: VerifyReport::default(),
    };
    for reference in references {
        verifier.shard(&ObjectRef {
            path: ObjectPath::Relative(reference.path.clone()),
            stored_bytes: reference.stored_bytes,
            generation: reference.generation,
        });
    }
    (verifier.report.problems, verifier.report.shards_checked)
}

struct Verifier<'a> {
    dataset: &'a Dataset,
    store: Arc<dyn ObjectStore>,
    options: VerifyOptions,
    limits: JsonLimits,
    /// Shards already checked, by path: the open reader, or `None` if it could not be used.
    shards: HashMap<ObjectPath, Option<Arc<ShardReader>>>,
    report: VerifyReport,
}

impl Verifier<'_> {
    fn problem(
        &mut self,
        object: impl Into<String>,
        ordinal: Option<u64>,
        rule: impl Into<String>,
    ) {
        self.report.problems.push(Problem {
            object: object.into(),
            ordinal,
            rule: rule.into(),
        });
    }

    fn error(&mut self, fallback: &str, ordinal: Option<u64>, error: &DatasetError) {
        let (object, rule) = split_error(error, fallback, self.store.as_ref());
        self.problem(object, ordinal, rule);
    }

    fn pages(&mut self) {
        let snapshot = self.dataset.snapshot().clone();
        for reference in &snapshot.manifests {
            let object = self.dataset.describe_object(&reference.object.path);
            let page = read_object_control(self.dataset.objects(), &reference.object, &self.limits)
                .and_then(|bytes| {
                    ManifestPage::parse(&bytes, &self.limits)
                        .map_err(|e| e.with_document(&object).into())
                })
                .and_then(|page| {
                    page.validate_against(reference)
                        .map_err(|e| e.with_document(&object))?;
                    Ok(page)
                });
            match page {
                Ok(page) => {
                    self.report.pages_checked += 1;
                    for entry in &page.shards {
                        self.entry(&object, entry);
                    }
                }
                Err(e) => self.error(&object, None, &e),
            }
        }
    }

    fn entry(&mut self, page: &str, entry: &crate::format::documents::ShardEntry) {
        let data = self.shard(&entry.data);
        let metadata = self.shard(&entry.metadata);
        let data_object = self.dataset.describe_object(&entry.data.path);
        let metadata_object = self.dataset.describe_object(&entry.metadata.path);
        if let (Some(d), Some(m)) = (&data, &metadata) {
            if d.len() != m.len() {
                self.problem(
                    &data_object,
                    None,
                    format!(
                        "holds {} records but its metadata shard {metadata_object} holds {}: the shards of an entry are aligned (FORMAT.md section 4)",
                        d.len(),
                        m.len()
                    ),
                );
            }
        }
        if self.options.deep && entry.record_indices.is_none() {
            self.whole_shards(
                page,
                entry,
                [(&data, &data_object), (&metadata, &metadata_object)],
            );
        }
        if data.is_none() && metadata.is_none() {
            // Both were reported unreadable; walking a claimed count with nothing to check
            // would only take time.
            return;
        }
        let checked = self.checkable_records(page, entry, [&data, &metadata]);
        let record_limits = self.dataset.options().record_limits;
        for k in 0..checked {
            let ordinal = entry.first_ordinal.saturating_add(k);
            let Some(physical) = entry.physical_index(k) else {
                self.problem(
                    page,
                    Some(ordinal),
                    "the shard entry has no physical index for it",
                );
                continue;
            };
            let mut in_range = true;
            for shard in [&data, &metadata].into_iter().flatten() {
                if physical >= shard.len() {
                    in_range = false;
                    let how = match entry.record_indices {
                        Some(_) => format!("record_indices[{k}] = {physical}"),
                        None => format!("physical record {physical}"),
                    };
                    self.problem(
                        page,
                        Some(ordinal),
                        format!(
                            "{how} is out of range: {} holds {} records (FORMAT.md section 4)",
                            shard.name(),
                            shard.len()
                        ),
                    );
                    break;
                }
            }
            if !in_range {
                continue;
            }
            let row = metadata.as_ref().and_then(|shard| {
                let parsed = shard
                    .read(physical)
                    .map_err(|source| DatasetError::Shard {
                        object: metadata_object.clone(),
                        source,
                    })
                    .and_then(|bytes| {
                        RecordMeta::parse_row(&bytes, &record_limits)
                            .and_then(|row| record::validate(&row, &record_limits).map(|()| row))
                            .map_err(|source| DatasetError::Record {
                                ordinal,
                                object: metadata_object.clone(),
                                source,
                            })
                    });
                match parsed {
                    Ok(row) => Some(row),
                    Err(e) => {
                        self.error(&metadata_object, Some(ordinal), &e);
                        None
                    }
                }
            });
            let decoded = data.as_ref().and_then(|shard| {
                let decoded = shard
                    .read(physical)
                    .map_err(|source| DatasetError::Shard {
                        object: data_object.clone(),
                        source,
                    })
                    .and_then(|bytes| {
                        record::decode(bytes, &record_limits)
                            .map(|record| record.meta())
                            .and_then(|meta| record::validate(&meta, &record_limits).map(|()| meta))
                            .map_err(|source| DatasetError::Record {
                                ordinal,
                                object: data_object.clone(),
                                source,
                            })
                    });
                match decoded {
                    Ok(meta) => Some(meta),
                    Err(e) => {
                        self.error(&data_object, Some(ordinal), &e);
                        None
                    }
                }
            });
            if let (Some(row), Some(meta)) = (&row, &decoded) {
                if let Err(e) = record::check_row_agrees(row, meta) {
                    self.problem(
                        &data_object,
                        Some(ordinal),
                        format!("record and its metadata row disagree: {e}"),
                    );
                }
            }
            if data.is_some() && metadata.is_some() {
                self.report.records_checked += 1;
            }
        }
    }

    /// An entry without `record_indices` covers its shards from their first record: a shard
    /// holding another number of records than the entry's `record_count` lost records or
    /// promises ones it does not hold (what a lying receipt leaves behind).
    fn whole_shards(
        &mut self,
        page: &str,
        entry: &crate::format::documents::ShardEntry,
        shards: [(&Option<Arc<ShardReader>>, &String); 2],
    ) {
        for (shard, object) in shards {
            let Some(shard) = shard else { continue };
            if shard.len() != entry.record_count {
                self.problem(
                    object.as_str(),
                    None,
                    format!(
                        "holds {} records but its entry in {page} (first_ordinal {}) says \
                         record_count {}: an entry without record_indices covers its whole shard",
                        shard.len(),
                        entry.first_ordinal,
                        entry.record_count
                    ),
                );
            }
        }
    }

    /// How many of an entry's records can be checked one by one. An entry without
    /// `record_indices` whose `record_count` exceeds its shards' records gets one problem for
    /// all the missing ones (a claim of 10^15 records must not mean 10^15 lines or iterations);
    /// with `record_indices` the list itself bounds the walk.
    fn checkable_records(
        &mut self,
        page: &str,
        entry: &crate::format::documents::ShardEntry,
        shards: [&Option<Arc<ShardReader>>; 2],
    ) -> u64 {
        if entry.record_indices.is_some() {
            return entry.record_count;
        }
        let held = shards
            .into_iter()
            .flatten()
            .map(|shard| shard.len())
            .min()
            .unwrap_or(0);
        if entry.record_count > held {
            let missing = entry.record_count - held;
            self.problem(
                page,
                Some(entry.first_ordinal.saturating_add(held)),
                format!(
                    "this and the next {} records of the entry are out of range: its shards hold \
                     {held} records but its record_count is {} (FORMAT.md section 4)",
                    missing - 1,
                    entry.record_count
                ),
            );
        }
        entry.record_count.min(held)
    }

    /// Opens and checks the shard `reference` points at, once per path.
    fn shard(&mut self, reference: &ObjectRef) -> Option<Arc<ShardReader>> {
        if let Some(known) = self.shards.get(&reference.path) {
            return known.clone();
        }
        let object = self.dataset.describe_object(&reference.path);
        let opened = self.check_object(reference, &object);
        self.shards.insert(reference.path.clone(), opened.clone());
        opened
    }

    /// Size, ArrayRecord structure and (deep) content address and chunk walk of one object.
    fn check_object(&mut self, reference: &ObjectRef, object: &str) -> Option<Arc<ShardReader>> {
        self.report.shards_checked += 1;
        let opened = self
            .dataset
            .objects()
            .resolve(&reference.path, reference.generation)
            .and_then(|resolved| {
                Ok(ObjectReader::open(
                    resolved.store,
                    resolved.path,
                    reference.generation,
                )?)
            });
        let source = match opened {
            Ok(source) => source,
            Err(e) => {
                self.error(object, None, &e);
                return None;
            }
        };
        let size = source.size().unwrap_or(0);
        if size != reference.stored_bytes {
            self.problem(
                object,
                None,
                format!(
                    "size {size} differs from the {} bytes its reference records (stored_bytes)",
                    reference.stored_bytes
                ),
            );
            return None;
        }
        let reader = match ArrayRecordReader::open(source, object.to_string()) {
            Ok(reader) => reader,
            Err(source) => {
                let e = DatasetError::Shard {
                    object: object.to_string(),
                    source,
                };
                self.error(object, None, &e);
                return None;
            }
        };
        if self.options.deep {
            if let Err(source) = reader.verify_all() {
                let e = DatasetError::Shard {
                    object: object.to_string(),
                    source,
                };
                self.error(object, None, &e);
            }
        }
        Some(Arc::new(reader))
    }
}

/// The object a dataset error concerns (when it names one) and its rule, without repeating the
/// object in the rule.
fn split_error(error: &DatasetError, fallback: &str, store: &dyn ObjectStore) -> (String, String) {
    let text = error.to_string();
    let object = match error {
        DatasetError::Document(document) => {
            let name = document.document();
            let named = RelPath::new(name)
                .map(|p| store.describe(&p))
                .unwrap_or_else(|_| name.to_string());
            let rule = match document {
                DocumentError::Json { source, .. } => format!("invalid JSON: {source}"),
                DocumentError::Rule { rule, .. } => rule.clone(),
                other => other.to_string(),
            };
            return (named, rule);
        }
        DatasetError::Record { object, source, .. } => {
            return (object.clone(), source.to_string());
        }
        DatasetError::SizeMismatch { object, .. }
        | DatasetError::Shard { object, .. }
        | DatasetError::Corrupt { object, .. }
        | DatasetError::Refused { object, .. } => object.clone(),
        _ => fallback.to_string(),
    };
    let rule = text
        .strip_prefix(&format!("{object}: "))
        .map(str::to_string)
        .unwrap_or(text.clone());
    // An ArrayRecord error names the file again inside: drop that repetition too.
    let rule = rule
        .strip_prefix(&format!("{object}: "))
        .map(str::to_string)
        .unwrap_or(rule);
    (object, rule)
}
