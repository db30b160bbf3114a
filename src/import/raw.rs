//! `--from-raw FILES... --datatype T --sample-rate HZ [--center-frequency HZ]`: headerless captures (what GNU Radio's
//! file sink or `rtl_sdr` write). The datatype uses SigMF's names; each file becomes a record
//! exactly as a SigMF recording without annotations would ([`super::sigmf`]), with id and scene
//! id the file name without its extension and `source.datatype` in the record metadata.

use std::path::PathBuf;
use std::sync::Arc;

use super::sigmf::{segments, Recording};
use super::{ImportError, Sources};

/// The records of headerless sample files.
pub fn sources(
    files: &[PathBuf],
    datatype: &str,
    sample_rate: f64,
    center_hz: Option<f64>,
    segment: Option<u64>,
) -> Result<Sources, ImportError> {
    let mut out = Sources::new();
    for file in files {
        let recording = Arc::new(Recording::raw(file, datatype, sample_rate, center_hz)?);
        out.extend(segments(&recording, segment)?);
    }
    Ok(out)
}
