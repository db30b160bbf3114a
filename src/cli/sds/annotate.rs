//! `sds annotate`: publishing annotation sets from a JSON Lines row file.
//!
//! - `sds annotate DATASET --name NAME --rows ROWS.jsonl [--fill skipped]` publishes a whole set
//!   in one process (every shard, then the coordinator step).
//! - `sds annotate write-shard DATASET --name NAME --rows ROWS.jsonl --shard K` is one worker:
//!   it writes logical shard `K` (ordinals `[K*N, (K+1)*N)` for `--records-per-shard N`) and its
//!   create-only worker pointer; when another worker's pointer already won, it is adopted.
//! - `sds annotate publish DATASET --name NAME` is the coordinator: it requires pointers covering
//!   every ordinal, writes the set root, a new revision, and swings the catalog.
//!
//! A name the catalog already holds with another set root is refused (a publication never
//! replaces a set); re-running the same publication succeeds and changes nothing.
//!
//! The row format is documented in [`crate::annotations::rows`]. Every form prints one line per
//! fact (`key value`), the last being `revision <path>` for the publishing forms, so a script can
//! tell which catalog revision its set went into.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};

use crate::annotations::rows::{parse_rows, resolve_rows, Fill};
use crate::annotations::{
    publish_annotations, publish_set, write_annotation_shard, AnnotationOptions, PublishedSet,
};
use crate::cli::location::StoreArgs;
use crate::cli::CliError;
use crate::dataset::Dataset;
use crate::format::json::{parse_object, JsonLimits, Object};

/// What to do about records no row names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FillArg {
    /// Give each a `skipped` row (empty values and provenance, no detail, no fields).
    Skipped,
}

/// Options shared by every form.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// Dataset directory, file:// URL, s3://bucket/prefix or gs://bucket/prefix.
    pub dataset: String,
    /// Set name (a portable identifier).
    #[arg(long)]
    pub name: String,
    /// Publication id; default: derived from the set name and the source snapshot id, so a
    /// repeated run converges on the same objects.
    #[arg(long)]
    pub publication_id: Option<String>,
    /// Rows per logical shard.
    #[arg(long, default_value_t = 10_000)]
    pub records_per_shard: u64,
    /// ArrayRecord writer options of the annotation objects, e.g. group_size:1 (the default),
    /// zstd:9 (the library uses the options its dataset was opened with).
    #[arg(long, value_name = "OPTIONS", default_value = "group_size:1")]
    pub writer_options: String,
}

/// `sds annotate DATASET ...` and its distributed forms.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct AnnotateArgs {
    #[command(subcommand)]
    pub action: Option<AnnotateAction>,
    #[command(flatten)]
    pub set: Option<SetArgs>,
    /// JSON Lines row file (one row per record; see the README).
    #[arg(long)]
    pub rows: Option<PathBuf>,
    /// Records without a row: refused unless `--fill skipped`.
    #[arg(long, value_enum)]
    pub fill: Option<FillArg>,
    /// Set metadata, a JSON object, stored in the set root as given.
    #[arg(long)]
    pub metadata: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum AnnotateAction {
    /// Worker: write one logical shard and its create-only worker pointer (first pointer wins).
    WriteShard {
        #[command(flatten)]
        set: SetArgs,
        /// JSON Lines row file; rows outside the shard's ordinals are ignored.
        #[arg(long)]
        rows: PathBuf,
        /// Logical shard index K (`shard-%08d`).
        #[arg(long)]
        shard: u64,
        #[arg(long, value_enum)]
        fill: Option<FillArg>,
    },
    /// Coordinator: check dense coverage by worker pointers, write the set root, a new
    /// revision, and swing the catalog (compare-and-swap, 8 retries).
    Publish {
        #[command(flatten)]
        set: SetArgs,
        /// Set metadata, a JSON object.
        #[arg(long)]
        metadata: Option<String>,
        /// Commit the worker pointers without reading their objects. By default each object
        /// must hold one carrier per record its pointer names and be named by their content.
        #[arg(long)]
        no_verify_receipts: bool,
    },
}

fn options(set: &SetArgs) -> Result<AnnotationOptions, CliError> {
    let shard = super::distributed::shard_options(&set.writer_options)?;
    Ok(AnnotationOptions {
        records_per_shard: set.records_per_shard.max(1),
        writer_options: shard.writer_options,
        publication_id: set.publication_id.clone(),
        // Worker pointers record object locations under the root as the user spelled it, as
        // the library does.
        root_location: Some(set.dataset.trim_end_matches('/').to_string()),
        ..AnnotationOptions::default()
    })
}

fn fill(arg: Option<FillArg>) -> Fill {
    match arg {
        Some(FillArg::Skipped) => Fill::Skipped,
        None => Fill::Refuse,
    }
}

fn metadata(text: Option<&str>) -> Result<Object, CliError> {
    match text {
        None => Ok(Object::new()),
        Some(text) => parse_object(text.as_bytes(), &JsonLimits::CONTROL)
            .map_err(CliError::failed("--metadata must be a JSON object")),
    }
}

fn read_rows(
    dataset: &Dataset,
    path: &Path,
    range: std::ops::Range<u64>,
    fill: Fill,
) -> Result<Vec<crate::annotations::AnnotationRecord>, CliError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(CliError::failed(format!("cannot read {name}")))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let rows = parse_rows(&bytes, &name, base).map_err(|e| e.to_string())?;
    Ok(resolve_rows(dataset, rows, range, fill, &name)?)
}

/// Runs `sds annotate`; returns the text for stdout.
pub fn run(store: &StoreArgs, args: AnnotateArgs) -> Result<String, CliError> {
    match args.action {
        Some(AnnotateAction::WriteShard {
            set,
            rows,
            shard,
            fill: fill_arg,
        }) => {
            let dataset = store.open_dataset(&set.dataset).map_err(CliError::from)?;
            let options = options(&set)?;
            let publication_id = options
                .publication_id_for(&dataset, &set.name)
                .map_err(|e| e.to_string())?;
            let range = options.shard_range(&dataset, shard);
            let rows = read_rows(&dataset, &rows, range, fill(fill_arg))?;
            let outcome = write_annotation_shard(
                &dataset,
                &set.name,
                &publication_id,
                shard,
                &rows,
                &options,
            )
            .map_err(|e| e.to_string())?;
            Ok(format!(
                "set {}\npublication_id {publication_id}\nshard {}\nfirst_ordinal {}\nrecords {}\npointer {}\nobject {}\noutcome {}\n",
                set.name,
                outcome.pointer.logical_shard_id,
                outcome.pointer.first_ordinal,
                outcome.pointer.record_ids.len(),
                outcome.pointer_path,
                outcome.pointer.uri,
                if outcome.adopted { "adopted an earlier worker's pointer" } else { "written" }
            ))
        }
        Some(AnnotateAction::Publish {
            set,
            metadata: text,
            no_verify_receipts,
        }) => {
            let dataset = store.open_dataset(&set.dataset).map_err(CliError::from)?;
            let options = AnnotationOptions {
                verify_pointers: !no_verify_receipts,
                ..options(&set)?
            };
            let publication_id = options
                .publication_id_for(&dataset, &set.name)
                .map_err(|e| e.to_string())?;
            let published = publish_set(
                &dataset,
                &set.name,
                &publication_id,
                &metadata(text.as_deref())?,
                &options,
            )
            .map_err(|e| e.to_string())?;
            Ok(summary(&published))
        }
        None => {
            let set = args
                .set
                .ok_or("sds annotate needs DATASET and --name (or a subcommand)")?;
            let rows = args.rows.ok_or("sds annotate needs --rows ROWS.jsonl")?;
            let dataset = store.open_dataset(&set.dataset).map_err(CliError::from)?;
            let options = options(&set)?;
            let rows = read_rows(&dataset, &rows, 0..dataset.len(), fill(args.fill))?;
            let published = publish_annotations(
                &dataset,
                &set.name,
                &rows,
                &metadata(args.metadata.as_deref())?,
                &options,
            )
            .map_err(|e| e.to_string())?;
            Ok(summary(&published))
        }
    }
}

fn summary(published: &PublishedSet) -> String {
    let counts: Vec<String> = published
        .row_counts
        .iter()
        .map(|(status, n)| format!("{status} {n}"))
        .collect();
    format!(
        "set {}\npublication_id {}\nrecords {}\nshards {}\nrows {}\nroot {}\ncatalog_attempts {}\nrevision {}\n",
        published.name,
        published.publication_id,
        published.record_count,
        published.shard_count,
        counts.join(", "),
        published.root_path,
        published.catalog_attempts,
        published.revision_path
    )
}
