//! `sds write-shard` and `sds publish`: distributed publication (FORMAT.md section 5) from the
//! command line, one process per worker and one for the coordinator.
//!
//! A worker writes one shard pair and prints its receipt (one line of compact JSON) on stdout;
//! the coordinator collects receipts (files holding one receipt per line, or `-` for stdin) and
//! commits them. Receipts are the library's `PublishedShard` fields, so receipts written by the
//! library's Python driver (`json.dumps(dataclasses.asdict(shard))`, one a line) are accepted
//! too. Both steps are create-only at paths derived from work ids and attempts, so either can
//! be killed at any point (`kill -9` included) and simply re-run: a re-run writes the same
//! bytes to the same paths, finds what is already there identical, and completes; `root.json`
//! is written last, so a reader never sees a root pointing at a missing object.
//!
//! Inputs of `write-shard` are a [`ShardInput`]: a range of records of an existing dataset
//! (`--from-dataset SRC --range A:B`), re-encoded, or the same importer inputs as `sds create`
//! (`--from-dir`, `--from-sigmf`, `--from-npy`, `--from-raw`; [`RecordInputs`]), all of whose
//! records go into the worker's one shard pair, in `sds create`'s order. Both yield records in
//! a deterministic order, since determinism is what makes a repeated attempt write the same
//! bytes under its name.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::inputs::{RecordInputs, NO_INPUTS};
use crate::arrayrecord::WriterOptions;
use crate::cli::location::{self, StoreArgs};
use crate::cli::CliError;
use crate::dataset::{publish, write_shard, PublishOptions, ShardOptions, ShardReceipt};
use crate::format::json::{self, JsonLimits, Object};
use crate::format::record::Record;
use crate::import::write_sources_shard;
use crate::storage::ObjectStore;

/// Where a worker's records come from.
#[derive(Debug, Clone, PartialEq)]
pub enum ShardInput {
    /// Records `start..stop` of an existing dataset, re-encoded.
    Dataset {
        source: String,
        start: u64,
        stop: u64,
    },
    /// Every record the importers make of these files, as `sds create` would.
    Import(RecordInputs),
}

impl ShardInput {
    /// The input the command line names: `--from-dataset SRC --range A:B`, or importer inputs
    /// (one kind or the other; clap refuses a mix).
    pub fn from_args(
        from_dataset: Option<String>,
        range: Option<&str>,
        inputs: RecordInputs,
    ) -> Result<ShardInput, CliError> {
        match (from_dataset, range) {
            (Some(source), Some(range)) if inputs.is_empty() => {
                let (start, stop) = parse_range(range)?;
                Ok(ShardInput::Dataset {
                    source,
                    start,
                    stop,
                })
            }
            (Some(_), None) => Err("--from-dataset needs --range A:B".into()),
            (None, Some(_)) => Err("--range is only for --from-dataset".into()),
            (Some(_), Some(_)) => Err(CliError::from(format!(
                "give --from-dataset or {NO_INPUTS}, not both"
            ))),
            (None, None) if inputs.is_empty() => Err(CliError::from(format!(
                "nothing to write: give --from-dataset SRC --range A:B, or {NO_INPUTS}"
            ))),
            (None, None) => Ok(ShardInput::Import(inputs)),
        }
    }
}

/// Parses `A:B` (both ends required) for `--range`.
pub fn parse_range(text: &str) -> Result<(u64, u64), CliError> {
    let bad = || {
        CliError::from(format!(
            "--range {text:?}: expected A:B with integers A <= B"
        ))
    };
    let (a, b) = text.split_once(':').ok_or_else(bad)?;
    let a: u64 = a.trim().parse().map_err(|_| bad())?;
    let b: u64 = b.trim().parse().map_err(|_| bad())?;
    if a > b {
        return Err(bad());
    }
    Ok((a, b))
}

/// Opens the store a dataset is written into (a local directory is created if missing).
pub fn writable_root(store: &StoreArgs, argument: &str) -> Result<Arc<dyn ObjectStore>, CliError> {
    store.open_writable_store(argument).map_err(CliError::from)
}

/// Reads records `start..stop` of the dataset `source` (all of them, in order).
fn dataset_records(
    store: &StoreArgs,
    source: &str,
    start: u64,
    stop: u64,
) -> Result<Vec<Record>, CliError> {
    let dataset = store.open_dataset(source).map_err(CliError::from)?;
    if stop > dataset.len() {
        return Err(CliError::from(format!(
            "--range {start}:{stop} is not within the {} records of {source}",
            dataset.len()
        )));
    }
    (start..stop)
        .map(|ordinal| {
            dataset.read_record(ordinal).map_err(|e| {
                CliError::from(format!(
                    "cannot read record {ordinal} of {source}: {}",
                    location::describe(&e, dataset.store().as_ref())
                ))
            })
        })
        .collect()
}

/// Shard options with the ArrayRecord writer options `text` (`--writer-options`).
pub fn shard_options(text: &str) -> Result<ShardOptions, CliError> {
    let writer_options = WriterOptions::parse(text)
        .map_err(CliError::failed(format!("--writer-options {text:?}")))?;
    Ok(ShardOptions {
        writer_options,
        ..ShardOptions::default()
    })
}

/// `--metadata JSON`: a JSON object (the strict JSON rules of control documents).
pub fn parse_metadata(text: &str) -> Result<Object, CliError> {
    json::parse_object(text.as_bytes(), &JsonLimits::CONTROL)
        .map_err(CliError::failed("--metadata"))
}

/// Runs `sds write-shard`: returns the receipt line (also written to `receipt_out`).
pub fn write(
    args: &StoreArgs,
    root: &str,
    work_id: &str,
    attempt: u64,
    input: &ShardInput,
    options: &ShardOptions,
    receipt_out: Option<&Path>,
) -> Result<String, CliError> {
    let failed = |e: &dyn std::fmt::Display| format!("work {work_id}: cannot write its shard: {e}");
    let receipt = match input {
        ShardInput::Dataset {
            source,
            start,
            stop,
        } => {
            let records = dataset_records(args, source, *start, *stop)?;
            let store = writable_root(args, root)?;
            write_shard(store.as_ref(), records, work_id, attempt, options)
                .map_err(|e| failed(&e))?
        }
        ShardInput::Import(inputs) => {
            // One shard of a distributed job: its records are read on this worker's thread.
            let sources = inputs.sources(1).map_err(|e| e.to_string())?;
            if sources.is_empty() {
                return Err(CliError::from(format!(
                    "work {work_id}: the inputs hold no record"
                )));
            }
            let store = writable_root(args, root)?;
            write_sources_shard(store.as_ref(), &sources, work_id, attempt, options, &())
                .map_err(|e| failed(&e))?
        }
    };
    let line = format!("{}\n", receipt.to_json());
    if let Some(path) = receipt_out {
        write_atomically(path, line.as_bytes())?;
    }
    Ok(line)
}

/// Writes a small local file via a temporary sibling and a rename, so a killed worker never
/// leaves a half-written receipt for the coordinator to choke on.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let shown = path.display();
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(CliError::failed(format!(
        "cannot write the receipt {shown}"
    )))?;
    std::io::Write::write_all(&mut temp, bytes)
        .and_then(|()| temp.as_file().sync_all())
        .map_err(CliError::failed(format!(
            "cannot write the receipt {shown}"
        )))?;
    temp.persist(path).map_err(CliError::failed(format!(
        "cannot write the receipt {shown}"
    )))?;
    Ok(())
}

/// Reads every receipt in `files` (one per nonempty line; `-` is stdin).
pub fn read_receipts(files: &[PathBuf]) -> Result<Vec<ShardReceipt>, CliError> {
    let mut receipts = Vec::new();
    for file in files {
        let text = if file.as_os_str() == "-" {
            std::io::read_to_string(std::io::stdin())
                .map_err(CliError::failed("cannot read receipts from stdin"))?
        } else {
            std::fs::read_to_string(file).map_err(CliError::failed(format!(
                "cannot read receipts from {}",
                file.display()
            )))?
        };
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let receipt = ShardReceipt::parse(line.as_bytes()).map_err(CliError::failed(
                format!("{} line {}", file.display(), n + 1),
            ))?;
            receipts.push(receipt);
        }
    }
    Ok(receipts)
}

/// Runs `sds publish`: returns the summary line.
pub fn commit(
    args: &StoreArgs,
    root: &str,
    receipt_files: &[PathBuf],
    options: &PublishOptions,
) -> Result<String, CliError> {
    let receipts = read_receipts(receipt_files)?;
    let store = writable_root(args, root)?;
    let summary = publish(store.as_ref(), &receipts, options).map_err(|e| e.to_string())?;
    Ok(format!(
        "published {} ({}) in {root}: {} records, {} shards, {} manifest pages, {} bytes\n",
        options.dataset_id,
        options.snapshot_id,
        summary.record_count,
        summary.shard_count,
        summary.manifest_pages,
        summary.stored_bytes
    ))
}
