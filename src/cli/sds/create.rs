//! `sds create OUT [inputs] [options]`: publishes a complete dataset in one command from a
//! copied mount tree, SigMF recordings, NumPy files or headerless captures.
//!
//! The work is the library's ([`crate::import`]); this module parses options, gathers the
//! record sources in a fixed order ([`super::inputs`], shared with `sds write-shard`) and
//! reports progress on stderr: an `indicatif` bar (MB/s, records/s, ETA) on a terminal, a plain
//! line every few seconds otherwise, nothing with `--quiet`. The ids and the summary go to stdout.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::inputs::{RecordInputs, NO_INPUTS};
use crate::arrayrecord::WriterOptions;
use crate::cli::CliError;
use crate::format::json::{parse_value, JsonLimits, Object, Value};
use crate::import::{self, CreateOptions, CreateSummary, Progress};

/// Options of `sds create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Output directory (the dataset root), created if missing.
    pub out: PathBuf,
    /// The files and directories to publish.
    #[command(flatten)]
    pub inputs: RecordInputs,
    /// Dataset id (any nonempty string); derived from the content (sds-<hex>) when absent.
    #[arg(long)]
    pub dataset_id: Option<String>,
    /// Snapshot id (any nonempty string usable in a path); derived from the content (snap-<hex>) when absent.
    #[arg(long)]
    pub snapshot_id: Option<String>,
    /// Most records per shard.
    #[arg(long, default_value_t = 1000)]
    pub records_per_shard: usize,
    /// Most tensor bytes per shard (512M, 2G, ...); a larger record gets its own shard.
    #[arg(long, default_value = "1G", value_parser = super::super::size::parse_size)]
    pub max_shard_bytes: u64,
    /// Shards encoded and compressed in parallel (default: the number of cores). The output
    /// is byte-identical whatever this is.
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// ArrayRecord writer options, e.g. group_size:1 (the default), zstd:9, brotli:6, snappy,
    /// uncompressed (--compression is the older name).
    #[arg(
        long = "writer-options",
        visible_alias = "compression",
        default_value = "group_size:1"
    )]
    pub compression: String,
    /// Most shards per manifest page.
    #[arg(long, default_value_t = 10_000)]
    pub shards_per_manifest: usize,
    /// Publication metadata KEY=VALUE (repeatable); VALUE is read as JSON when it parses
    /// (3, true, {"a":1}), else as a string.
    #[arg(long, value_name = "KEY=VALUE")]
    pub metadata: Vec<String>,
    /// No progress output.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Runs `sds create`; the error is the one line for stderr.
pub fn run(args: &CreateArgs) -> Result<String, CliError> {
    let options = options(args)?;
    let sources = args
        .inputs
        .sources(options.jobs)
        .map_err(|e| e.to_string())?;
    if sources.is_empty() {
        return Err(CliError::from(format!(
            "nothing to publish: give {NO_INPUTS}"
        )));
    }
    let total: u64 = sources
        .iter()
        .map(|s| s.payload_bytes())
        .fold(0, u64::saturating_add);
    let reporter = Reporter::new(sources.len() as u64, total, args.quiet);
    let summary = import::check_options(&options)
        .and_then(|()| import::open_output(&args.out))
        .and_then(|store| import::create(store.as_ref(), &sources, &options, &reporter));
    let summary = summary.map_err(|e| e.to_string());
    reporter.finish();
    // The process exits next: freeing every record's parsed `record.json` one by one (tens of
    // thousands of small maps) would only delay that.
    std::mem::forget(sources);
    Ok(describe(args, &summary?, reporter.start.elapsed()))
}

fn options(args: &CreateArgs) -> Result<CreateOptions, CliError> {
    let writer_options = WriterOptions::parse(&args.compression).map_err(CliError::failed(
        format!("--writer-options {:?}", args.compression),
    ))?;
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    if jobs == 0 {
        return Err("--jobs must be at least 1".into());
    }
    Ok(CreateOptions {
        dataset_id: args.dataset_id.clone(),
        snapshot_id: args.snapshot_id.clone(),
        records_per_shard: args.records_per_shard,
        max_shard_bytes: args.max_shard_bytes,
        jobs,
        writer_options,
        shards_per_manifest: args.shards_per_manifest,
        metadata: metadata(&args.metadata)?,
    })
}

/// `KEY=VALUE` pairs as an object; VALUE as JSON when it parses, else a string.
fn metadata(pairs: &[String]) -> Result<Object, CliError> {
    let mut object = Object::new();
    for pair in pairs {
        let (key, text) = pair
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| format!("--metadata {pair:?}: expected KEY=VALUE"))?;
        let value = parse_value(text.as_bytes(), &JsonLimits::CONTROL)
            .unwrap_or_else(|_| Value::from(text));
        if object.insert(key.into(), value).is_some() {
            return Err(CliError::from(format!(
                "--metadata: key {key:?} given twice"
            )));
        }
    }
    Ok(object)
}

fn describe(args: &CreateArgs, summary: &CreateSummary, elapsed: Duration) -> String {
    let derived = |given: &Option<String>| {
        if given.is_some() {
            ""
        } else {
            " (derived from the content)"
        }
    };
    let seconds = elapsed.as_secs_f64().max(1e-9);
    let p = &summary.published;
    format!(
        "dataset_id: {}{}\nsnapshot_id: {}{}\npublished {}: {} records, {} shards, {} manifest pages, {} bytes stored ({} tensor bytes) in {:.2} s ({:.1} records/s, {:.1} MB/s)\n",
        summary.dataset_id,
        derived(&args.dataset_id),
        summary.snapshot_id,
        derived(&args.snapshot_id),
        args.out.display(),
        p.record_count,
        p.shard_count,
        p.manifest_pages,
        p.stored_bytes,
        summary.payload_bytes,
        seconds,
        p.record_count as f64 / seconds,
        summary.payload_bytes as f64 / seconds / 1e6,
    )
}

/// Progress on stderr: a bar on a terminal, periodic lines otherwise, or nothing.
struct Reporter {
    total_records: u64,
    total_bytes: u64,
    records: AtomicU64,
    bytes: AtomicU64,
    start: Instant,
    bar: Option<ProgressBar>,
    quiet: bool,
    last_line: Mutex<Instant>,
}

const LINE_EVERY: Duration = Duration::from_secs(2);

impl Reporter {
    fn new(total_records: u64, total_bytes: u64, quiet: bool) -> Reporter {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let style = ProgressStyle::with_template(
                "{elapsed_precise} {wide_bar} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} ETA {eta} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            ProgressBar::new(total_bytes).with_style(style)
        });
        Reporter {
            total_records,
            total_bytes,
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            start: Instant::now(),
            bar,
            quiet,
            last_line: Mutex::new(Instant::now()),
        }
    }

    fn line(&self, records: u64, bytes: u64) -> String {
        let seconds = self.start.elapsed().as_secs_f64().max(1e-9);
        let rate = bytes as f64 / seconds;
        let eta = if rate > 0.0 {
            format!(
                "{:.0}s",
                self.total_bytes.saturating_sub(bytes) as f64 / rate
            )
        } else {
            "?".into()
        };
        format!(
            "sds create: {records}/{} records, {:.1} records/s, {:.1} MB/s, ETA {eta}",
            self.total_records,
            records as f64 / seconds,
            rate / 1e6
        )
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Reporter {
    fn record_loaded(&self, payload_bytes: u64) {
        let records = self.records.fetch_add(1, Ordering::Relaxed) + 1;
        let bytes = self.bytes.fetch_add(payload_bytes, Ordering::Relaxed) + payload_bytes;
        if let Some(bar) = &self.bar {
            bar.set_position(bytes);
            let seconds = self.start.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!(
                "{records}/{} records {:.0}/s",
                self.total_records,
                records as f64 / seconds
            ));
            return;
        }
        if self.quiet {
            return;
        }
        let Ok(mut last) = self.last_line.lock() else {
            return;
        };
        if last.elapsed() >= LINE_EVERY || records == self.total_records {
            *last = Instant::now();
            eprintln!("{}", self.line(records, bytes));
        }
    }
}
