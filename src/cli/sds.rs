//! The `sds` command line: the companion tool for Signal Dataset directories.
//!
//! - `sds info DATASET [--json]`: identity, counts and sizes, and the first record's fields,
//!   read from control documents and one metadata row.
//! - `sds ls DATASET [--start N] [--limit N] [--json]`: one line per record from its metadata
//!   row (ordinal, id, scene, fields, tensor bytes; with `--json` a JSON object per line),
//!   never touching a data shard; a row that cannot be read is reported on stderr and the
//!   listing goes on (exit status 1 at the end).
//! - `sds annotate DATASET --name NAME --rows ROWS.jsonl` (and `annotate write-shard`,
//!   `annotate publish`): publishes an annotation set (see [`annotate`]).
//! - `sds demo OUT`: publishes the deterministic demo dataset (the one in `fixtures/demo/`).
//! - `sds write-shard ROOT --work-id W [--attempt A] (--from-dataset SRC --range A:B | the
//!   inputs of sds create)`: one worker of a distributed publication; prints its receipt
//!   ([`distributed`]).
//! - `sds publish ROOT --receipts FILE... --dataset-id D --snapshot-id S`: the coordinator.
//! - `sds verify DATASET [--deep]`: every rule, every problem ([`verify`]).
//! - `sds select SOURCE DEST --indices SPEC ...`: views and materialized selections
//!   ([`select`]).
//! - `sds create OUT [inputs] [options]`: publishes a dataset from a copied mount tree, SigMF,
//!   NumPy or raw files ([`create`]).
//!
//! Exit status: 0 on success, 1 when a dataset cannot be opened or read (exactly one line on
//! stderr, `sds: ...`, naming the document or object and the rule broken), 2 for usage errors
//! (clap's convention). `src/bin/sds.rs` only calls [`main`].

pub mod annotate;
pub mod create;
pub mod demo;
pub mod distributed;
pub mod info;
pub mod inputs;
pub mod select;
pub mod verify;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use super::location::{self, one_line, StoreArgs};
use crate::cli::CliError;
use crate::dataset::{Dataset, PublishOptions};
use crate::format::json::{object_to_compact, Object, Value};
use crate::format::printable::{escaped, json_printable};

/// Explore and publish Signal Dataset (SDS) layout 0.1 datasets.
#[derive(Debug, Parser)]
#[command(name = "sds", version = crate::cli::VERSION, about, long_about = None)]
#[command(
    after_help = "DATASET is a local directory holding root.json, or a file:// URL \
(file:///data/ds), or an object-store location s3://bucket/prefix or gs://bucket/prefix \
(credentials, region and endpoint from the standard AWS_* / GOOGLE_* environment, e.g. \
AWS_ENDPOINT_URL and AWS_ALLOW_HTTP=true for S3-compatible stores, \
GOOGLE_APPLICATION_CREDENTIALS for GCS and GOOGLE_BASE_URL for a GCS emulator, or the explicit \
--endpoint-url, --region and --allow-http options; retries tuned by \
SDS_RETRY_ATTEMPTS, SDS_RETRY_BASE_MS, SDS_RETRY_CAP_MS).\n\n\
Exit status: 0 success; 1 the dataset cannot be opened or read (one line on stderr naming \
the document and the rule broken); 2 usage error."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub store: location::StoreArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a dataset's ids, layout version, record/shard counts, stored bytes, manifest pages
    /// and the fields (name, dtype, shape) of its first record.
    ///
    /// Reads root.json, the snapshot, the first manifest page and one metadata row (record 0);
    /// never a data shard.
    Info {
        /// Dataset directory, file:// URL, s3://bucket/prefix or gs://bucket/prefix.
        dataset: String,
        /// Print one JSON object with exactly the keys dataset_id, snapshot_id,
        /// layout_version, record_count, shard_count, stored_bytes, manifest_pages,
        /// first_record (null for an empty dataset, else {"fields": {NAME: {"dtype", "shape"}},
        /// "id", "scene_id"}), first_record_problem (null, or why record 0's row is unreadable),
        /// annotations and annotations_problem.
        #[arg(long)]
        json: bool,
    },
    /// List records from their metadata rows: ordinal, id, scene id, field count and tensor
    /// bytes. Never reads a data shard. A row that cannot be read is reported on stderr
    /// (record, object, rule) and the listing goes on; the exit status is then 1.
    Ls {
        /// Dataset directory, file:// URL, s3://bucket/prefix or gs://bucket/prefix.
        dataset: String,
        /// First ordinal to list.
        #[arg(long, default_value_t = 0)]
        start: u64,
        /// Most records to list (0: all).
        #[arg(long, default_value_t = 0)]
        limit: u64,
        /// One JSON object per line instead: ordinal, id, scene_id (null without one), fields
        /// (their count) and tensor_bytes, keys sorted.
        #[arg(long)]
        json: bool,
    },
    /// Publish the demo dataset (8 RF records in 4 scenes, 3 shards, 2 manifest pages;
    /// deterministic: the same bytes on every run) into OUT: a directory (created if missing),
    /// `s3://BUCKET/PREFIX` or `gs://BUCKET/PREFIX`.
    ///
    /// Re-running into the same directory succeeds and changes nothing; a different dataset
    /// already there is refused (publication is create-only).
    Demo {
        /// Where to publish it (the dataset root).
        out: String,
    },
    /// Write one shard pair (data + metadata) into ROOT and print its receipt as one line of
    /// JSON (the library's PublishedShard fields): one worker of a distributed publication.
    ///
    /// Create-only, at paths named by the work id and attempt: re-running after a crash writes
    /// the same bytes and succeeds. Inputs: --from-dataset SRC --range A:B re-encodes records A..B of SRC; or the
    /// inputs of `sds create` (--from-dir, --from-sigmf, --from-npy, --from-raw), all of whose
    /// records go into this one shard pair, in the order `sds create` would publish them.
    WriteShard {
        /// Dataset root directory (created if missing).
        root: String,
        /// This worker's unit of work (e.g. $JOB_COMPLETION_INDEX, $SLURM_ARRAY_TASK_ID).
        #[arg(long)]
        work_id: String,
        /// Attempt number (publication keeps the highest attempt per work id).
        #[arg(long, default_value_t = 0)]
        attempt: u64,
        /// ArrayRecord writer options, e.g. group_size:1 (the default), zstd:9, brotli:6,
        /// snappy, uncompressed.
        #[arg(long, value_name = "OPTIONS", default_value = "group_size:1")]
        writer_options: String,
        /// Source dataset whose records are re-encoded (with --range).
        #[arg(long, requires = "range", conflicts_with_all = ["from_dir", "from_sigmf", "from_npy", "from_raw"])]
        from_dataset: Option<String>,
        /// Records A..B (half-open) of the --from-dataset source.
        #[arg(long, requires = "from_dataset")]
        range: Option<String>,
        /// Files to import instead of --from-dataset (the inputs of `sds create`).
        #[command(flatten)]
        inputs: inputs::RecordInputs,
        /// Also write the receipt to this file (atomically).
        #[arg(long)]
        receipt_out: Option<PathBuf>,
    },
    /// Commit receipts as one snapshot in ROOT: manifest pages, snapshot, then root.json last,
    /// all create-only. Safe to re-run after a crash.
    Publish {
        /// Dataset root directory.
        root: String,
        /// Files holding receipts, one JSON receipt per line ("-": stdin).
        #[arg(long, required = true, num_args = 1..)]
        receipts: Vec<PathBuf>,
        #[arg(long)]
        dataset_id: String,
        #[arg(long)]
        snapshot_id: String,
        /// Exactly these work ids must be present (space- or comma-separated). Shards are
        /// always ordered by work id, the highest attempt of each kept.
        #[arg(long, num_args = 1.., value_delimiter = ',')]
        expected_work_ids: Option<Vec<String>>,
        /// At most this many shards per manifest page.
        #[arg(long, default_value_t = 10_000)]
        shards_per_manifest: usize,
        /// The publication's metadata, a JSON object written into root.json.
        #[arg(long, value_name = "JSON")]
        metadata: Option<String>,
        /// Commit the receipts without reading their shards (sizes are still checked). By
        /// default every receipt is checked before anything is written: its shards are the ones
        /// its work id and attempt name, and each holds the receipt's record count.
        #[arg(long)]
        no_verify_receipts: bool,
        /// Accepted for compatibility: record counts are always checked now (see
        /// --no-verify-receipts).
        #[arg(long, hide = true)]
        verify_record_counts: bool,
    },
    /// Check a whole dataset: control documents, counts, ranges, sizes, every record and
    /// metadata row, their agreement, annotation sets. Prints every problem, one per line
    /// (OBJECT[ ordinal N]: RULE), then a summary; exits 1 if any.
    Verify {
        /// Dataset directory, file:// URL, s3://bucket/prefix or gs://bucket/prefix.
        dataset: String,
        /// Also walk every chunk of every shard (block headers and hashes, padding included).
        #[arg(long)]
        deep: bool,
    },
    /// Publish a selection of SOURCE's records as a new dataset in DEST: by default a
    /// reference view (one entry per record pointing at SOURCE's shards by absolute location,
    /// with record_indices; nothing copied), --materialize re-encodes into new shards.
    Select {
        /// Source dataset directory, file:// URL, s3:// or gs:// location.
        source: String,
        /// Destination dataset root (created if missing).
        dest: String,
        /// Ordinals and half-open ranges, e.g. 0:100,250,300: (open ends allowed).
        #[arg(long)]
        indices: Option<String>,
        /// Also select every record of this scene (repeatable).
        #[arg(long = "scene")]
        scenes: Vec<String>,
        #[arg(long)]
        dataset_id: String,
        #[arg(long)]
        snapshot_id: String,
        /// Re-encode the selected records into new compact shards.
        #[arg(long)]
        materialize: bool,
        /// Records per new shard with --materialize.
        #[arg(long, default_value_t = 10_000)]
        records_per_shard: usize,
        /// ArrayRecord writer options of the new shards with --materialize.
        #[arg(long, value_name = "OPTIONS", default_value = "group_size:1")]
        writer_options: String,
    },
    /// Publish a dataset from a directory copied out of a mount (--from-dir), SigMF
    /// recordings, .npy/.npz files or headerless captures, in one command.
    ///
    /// Deterministic: the same inputs, options and ids give a byte-identical dataset whatever
    /// --jobs is. Ids not given are derived from the content and printed.
    Create(Box<create::CreateArgs>),
    /// Publish an annotation set from a JSON Lines row file (one row per record, by
    /// source_index or source_record_id, with status, values, provenance, detail_status and
    /// optional .npy tensor fields), or run one of its distributed steps (write-shard, publish).
    ///
    /// Rows missing for some records are refused unless --fill skipped. The publication id
    /// defaults to one derived from the set name and snapshot, so a repeated run converges.
    Annotate(Box<annotate::AnnotateArgs>),
}

/// Parses the command line, runs the command and returns the exit status.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command, &cli.store) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sds: {}", one_line(&message.to_string()));
            ExitCode::from(1)
        }
    }
}

/// Runs one command; the error is the message for stderr.
pub fn run(command: Command, store: &StoreArgs) -> Result<(), CliError> {
    match command {
        Command::Info { dataset, json } => run_info(store, &dataset, json),
        Command::Ls {
            dataset,
            start,
            limit,
            json,
        } => run_ls(store, &dataset, start, limit, json),
        Command::Demo { out } => run_demo(store, &out),
        Command::WriteShard {
            root,
            work_id,
            attempt,
            writer_options,
            from_dataset,
            range,
            inputs,
            receipt_out,
        } => {
            let input = distributed::ShardInput::from_args(from_dataset, range.as_deref(), inputs)?;
            let shard = distributed::shard_options(&writer_options)?;
            let line = distributed::write(
                store,
                &root,
                &work_id,
                attempt,
                &input,
                &shard,
                receipt_out.as_deref(),
            )?;
            print(&line)
        }
        Command::Publish {
            root,
            receipts,
            dataset_id,
            snapshot_id,
            expected_work_ids,
            shards_per_manifest,
            metadata,
            no_verify_receipts,
            verify_record_counts: _,
        } => {
            let mut options = PublishOptions::new(dataset_id, snapshot_id);
            options.expected_work_ids = expected_work_ids;
            options.shards_per_manifest = shards_per_manifest;
            options.verify_receipts = !no_verify_receipts;
            if let Some(text) = metadata {
                options.metadata = distributed::parse_metadata(&text)?;
            }
            print(&distributed::commit(store, &root, &receipts, &options)?)
        }
        Command::Verify { dataset, deep } => run_verify(store, &dataset, deep),
        Command::Select {
            source,
            dest,
            indices,
            scenes,
            dataset_id,
            snapshot_id,
            materialize,
            records_per_shard,
            writer_options,
        } => {
            let selection = select::Selection {
                indices,
                scenes,
                materialize,
                records_per_shard,
                shard: distributed::shard_options(&writer_options)?,
            };
            let options = PublishOptions::new(dataset_id, snapshot_id);
            print(&select::run(store, &source, &dest, &selection, &options)?)
        }
        Command::Create(args) => create::run(&args).and_then(|text| print(&text)),
        Command::Annotate(args) => print(&annotate::run(store, *args)?),
    }
}

fn run_verify(args: &StoreArgs, dataset: &str, deep: bool) -> Result<(), CliError> {
    let store = args.open_store(dataset).map_err(CliError::from)?;
    let report = crate::dataset::verify_store_opened_with(
        store,
        args.open_options(),
        crate::dataset::VerifyOptions { deep },
        crate::annotations::verify_dataset,
    );
    print(&verify::to_text(&report))?;
    match report.problems.len() {
        0 => Ok(()),
        n => Err(CliError::from(format!(
            "{dataset}: verification found {n} problem(s)"
        ))),
    }
}

fn print(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(CliError::failed("writing to stdout"))
}

fn run_info(store: &StoreArgs, dataset: &str, json: bool) -> Result<(), CliError> {
    let opened = store.open_dataset(dataset).map_err(CliError::from)?;
    let report = info::gather(&opened)?;
    print(&if json {
        json_printable(&info::to_json(&report)).into_owned()
    } else {
        info::to_text(&report)
    })
}

/// Prints one line per record as it is read (memory does not grow with the record count). A
/// row that cannot be read is reported on stderr, naming the record and the object, and the
/// listing goes on; the command then fails with the number of such rows.
fn run_ls(
    store: &StoreArgs,
    dataset: &str,
    start: u64,
    limit: u64,
    json: bool,
) -> Result<(), CliError> {
    let opened = store.open_dataset(dataset).map_err(CliError::from)?;
    let stop = if limit == 0 {
        opened.len()
    } else {
        start.saturating_add(limit).min(opened.len())
    };
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    let write_error = |e: std::io::Error| format!("writing to stdout: {e}");
    let mut unreadable = 0u64;
    for ordinal in start..stop {
        match ls_line(&opened, ordinal, json) {
            Ok(line) => stdout.write_all(line.as_bytes()).map_err(write_error)?,
            Err(message) => {
                // Rows already printed come first, so stdout and stderr read in ordinal order.
                stdout.flush().map_err(write_error)?;
                eprintln!("sds: {}", one_line(&message.to_string()));
                unreadable += 1;
            }
        }
    }
    stdout.flush().map_err(write_error)?;
    match unreadable {
        0 => Ok(()),
        n => Err(CliError::from(format!(
            "{dataset}: {n} of {} listed records could not be read (see above)",
            stop.saturating_sub(start)
        ))),
    }
}

fn ls_line(dataset: &Dataset, ordinal: u64, json: bool) -> Result<String, CliError> {
    let row = dataset.record_meta(ordinal).map_err(|e| {
        format!(
            "cannot read record {ordinal}: {}",
            location::describe(&e, dataset.store().as_ref())
        )
    })?;
    let bytes: u64 = row
        .fields
        .values()
        .map(|f| f.byte_len().unwrap_or(u64::MAX))
        .fold(0, u64::saturating_add);
    if json {
        let object: Object = [
            ("fields", Value::from(row.fields.len() as u64)),
            ("id", Value::from(row.id.as_str())),
            ("ordinal", Value::from(ordinal)),
            (
                "scene_id",
                row.scene_id.as_deref().map_or(Value::Null, Value::from),
            ),
            ("tensor_bytes", Value::from(bytes)),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v))
        .collect();
        // The dataset's strings stay JSON but drive no terminal (DEL and C1 escaped too).
        return Ok(json_printable(&object_to_compact(&object)).into_owned() + "\n");
    }
    let width = dataset.len().saturating_sub(1).to_string().len();
    Ok(format!(
        "{ordinal:0width$}  {}  {}  {} fields  {}\n",
        escaped(&row.id),
        escaped(row.scene_id.as_deref().unwrap_or("-")),
        row.fields.len(),
        super::size::format_size(bytes)
    ))
}

fn run_demo(store: &StoreArgs, out: &str) -> Result<(), CliError> {
    let target = store.open_writable_store(out)?;
    let summary = demo::write_demo_into(target.as_ref())
        .map_err(CliError::failed("cannot write the demo dataset"))?;
    print(&format!(
        "published {} ({}) in {}: {} records, {} shards, {} manifest pages, {} bytes\n",
        demo::DATASET_ID,
        demo::SNAPSHOT_ID,
        escaped(out),
        summary.record_count,
        summary.shard_count,
        summary.manifest_pages,
        summary.stored_bytes
    ))
}
