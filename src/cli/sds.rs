//! The `sds` command line: the companion tool for Signal Dataset directories.
//!
//! - `sds info DATASET [--json]`: identity, counts and sizes, and the first record's fields,
//!   read from control documents and one metadata row.
//! - `sds ls DATASET [--start N] [--limit N]`: one line per record from its metadata row
//!   (ordinal, id, scene, fields, tensor bytes), never touching a data shard.
//! - `sds annotate DATASET --name NAME --rows ROWS.jsonl` (and `annotate write-shard`,
//!   `annotate publish`): publishes an annotation set (see [`annotate`]).
//! - `sds demo OUT`: publishes the deterministic demo dataset (the one in `fixtures/demo/`).
//!
//! Exit status: 0 on success, 1 when a dataset cannot be opened or read (exactly one line on
//! stderr, `sds: ...`, naming the document or object and the rule broken), 2 for usage errors
//! (clap's convention). `src/bin/sds.rs` only calls [`main`].

pub mod annotate;
pub mod demo;
pub mod info;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use super::location::{self, one_line, open_dataset};
use crate::dataset::Dataset;

/// Explore and publish Signal Dataset (SDS) layout 0.1 datasets.
#[derive(Debug, Parser)]
#[command(name = "sds", version, about, long_about = None)]
#[command(
    after_help = "DATASET is a local directory holding root.json, or a file:// URL \
(file:///data/ds). s3:// and gs:// are not supported by this build yet.\n\n\
Exit status: 0 success; 1 the dataset cannot be opened or read (one line on stderr naming \
the document and the rule broken); 2 usage error."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a dataset's ids, layout version, record/shard counts, stored bytes, manifest pages
    /// and the fields (name, dtype, shape) of its first record.
    ///
    /// Reads root.json, the snapshot, the first manifest page and one metadata row (record 0);
    /// never a data shard.
    Info {
        /// Dataset directory or file:// URL.
        dataset: String,
        /// Print one JSON object with exactly the keys dataset_id, snapshot_id,
        /// layout_version, record_count, shard_count, stored_bytes, manifest_pages and
        /// first_record (null for an empty dataset, else {"fields": {NAME: {"dtype", "shape"}},
        /// "id", "scene_id"}).
        #[arg(long)]
        json: bool,
    },
    /// List records from their metadata rows: ordinal, id, scene id, field count and tensor
    /// bytes. Never reads a data shard.
    Ls {
        /// Dataset directory or file:// URL.
        dataset: String,
        /// First ordinal to list.
        #[arg(long, default_value_t = 0)]
        start: u64,
        /// Most records to list (0: all).
        #[arg(long, default_value_t = 0)]
        limit: u64,
    },
    /// Publish the demo dataset (8 RF records in 4 scenes, 3 shards, 2 manifest pages;
    /// deterministic: the same bytes on every run) into OUT, creating it if missing.
    ///
    /// Re-running into the same directory succeeds and changes nothing; a different dataset
    /// already there is refused (publication is create-only).
    Demo {
        /// Output directory (the dataset root).
        out: PathBuf,
    },
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
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sds: {}", one_line(&message));
            ExitCode::from(1)
        }
    }
}

/// Runs one command; the error is the message for stderr.
pub fn run(command: Command) -> Result<(), String> {
    match command {
        Command::Info { dataset, json } => run_info(&dataset, json),
        Command::Ls {
            dataset,
            start,
            limit,
        } => run_ls(&dataset, start, limit),
        Command::Demo { out } => run_demo(&out),
        Command::Annotate(args) => print(&annotate::run(*args)?),
    }
}

fn print(text: &str) -> Result<(), String> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("writing to stdout: {e}"))
}

fn run_info(dataset: &str, json: bool) -> Result<(), String> {
    let opened = open_dataset(dataset).map_err(|e| e.0)?;
    let report = info::gather(&opened)?;
    print(&if json {
        info::to_json(&report)
    } else {
        info::to_text(&report)
    })
}

fn run_ls(dataset: &str, start: u64, limit: u64) -> Result<(), String> {
    let opened = open_dataset(dataset).map_err(|e| e.0)?;
    let stop = if limit == 0 {
        opened.len()
    } else {
        start.saturating_add(limit).min(opened.len())
    };
    let mut out = String::new();
    for ordinal in start..stop {
        out.push_str(&ls_line(&opened, ordinal)?);
    }
    print(&out)
}

fn ls_line(dataset: &Dataset, ordinal: u64) -> Result<String, String> {
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
    let width = dataset.len().saturating_sub(1).to_string().len();
    Ok(format!(
        "{ordinal:0width$}  {}  {}  {} fields  {}\n",
        row.id,
        row.scene_id.as_deref().unwrap_or("-"),
        row.fields.len(),
        super::size::format_size(bytes)
    ))
}

fn run_demo(out: &std::path::Path) -> Result<(), String> {
    let summary =
        demo::write_demo(out).map_err(|e| format!("cannot write the demo dataset: {e}"))?;
    print(&format!(
        "published {} ({}) in {}: {} records, {} shards, {} manifest pages, {} bytes\n",
        demo::DATASET_ID,
        demo::SNAPSHOT_ID,
        out.display(),
        summary.record_count,
        summary.shard_count,
        summary.manifest_pages,
        summary.stored_bytes
    ))
}
