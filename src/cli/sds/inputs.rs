//! The record inputs `sds create` and `sds write-shard` share: `--from-dir`, `--from-sigmf`,
//! `--from-npy`, `--from-raw` (with `--datatype`, `--sample-rate`) and `--segment-samples`.
//!
//! One clap struct, flattened into both commands, and one function turning it into the
//! importers' [`Sources`], so a worker's shard holds exactly the records `sds create` would
//! publish from the same inputs, in the same order: `--from-dir`, then `--from-sigmf`,
//! `--from-npy`, `--from-raw`, each in the order given.

use std::path::PathBuf;

use clap::Args;

use crate::cli::size::parse_hz;
use crate::import::{self, ImportError, Sources};

/// Files to turn into records.
#[derive(Debug, Clone, Default, PartialEq, Args)]
pub struct RecordInputs {
    /// A directory laid out like a mounted record set: records/<n>/record.json and
    /// fields/**.raw (or .npy), as `cp -r MOUNT/records DIR/` produces.
    #[arg(long, value_name = "DIR")]
    pub from_dir: Option<PathBuf>,
    /// SigMF recordings (.sigmf-meta, .sigmf-data or their common base name).
    #[arg(long, value_name = "FILES", num_args = 1..)]
    pub from_sigmf: Vec<PathBuf>,
    /// NumPy .npy or .npz files: one record per file, one field per array.
    #[arg(long, value_name = "FILES", num_args = 1..)]
    pub from_npy: Vec<PathBuf>,
    /// Headerless sample files (needs --datatype and --sample-rate).
    #[arg(long, value_name = "FILES", num_args = 1..)]
    pub from_raw: Vec<PathBuf>,
    /// SigMF datatype of --from-raw files (cf32_le, ci16_le, ci8, cu8, rf32_le, ...).
    #[arg(long)]
    pub datatype: Option<String>,
    /// Sample rate of --from-raw files, in Hz: 2000000, 2M, 2.048MHz, 250k.
    #[arg(long, value_name = "HZ", value_parser = parse_hz)]
    pub sample_rate: Option<f64>,
    /// Centre frequency of --from-raw files, in Hz (2.4G, 433.92MHz): the fields'
    /// center_frequency_hz, which SigMF files and label boxes in absolute Hz need.
    #[arg(long, value_name = "HZ", value_parser = parse_hz, alias = "centre-frequency")]
    pub center_frequency: Option<f64>,
    /// Split SigMF and raw recordings into records of this many samples.
    #[arg(long, value_name = "N")]
    pub segment_samples: Option<u64>,
}

/// What to say when no input is given.
pub const NO_INPUTS: &str = "--from-dir, --from-sigmf, --from-npy or --from-raw";

impl RecordInputs {
    /// True when no input file or directory is named.
    pub fn is_empty(&self) -> bool {
        self.from_dir.is_none()
            && self.from_sigmf.is_empty()
            && self.from_npy.is_empty()
            && self.from_raw.is_empty()
    }

    /// The records of every input, in ordinal order (sized from headers; nothing loaded yet),
    /// read on up to `jobs` threads where that helps (`--from-dir`).
    pub fn sources(&self, jobs: usize) -> Result<Sources, ImportError> {
        let mut sources = Sources::new();
        if let Some(dir) = &self.from_dir {
            sources.extend(import::dir::sources(dir, jobs)?);
        }
        sources.extend(import::sigmf::sources(
            &self.from_sigmf,
            self.segment_samples,
        )?);
        sources.extend(import::arrays::sources(&self.from_npy)?);
        if !self.from_raw.is_empty() {
            let (Some(datatype), Some(rate)) = (&self.datatype, self.sample_rate) else {
                return Err(ImportError::Option(
                    "--from-raw needs --datatype (e.g. cf32_le) and --sample-rate HZ".into(),
                ));
            };
            sources.extend(import::raw::sources(
                &self.from_raw,
                datatype,
                rate,
                self.center_frequency,
                self.segment_samples,
            )?);
        }
        Ok(sources)
    }
}
