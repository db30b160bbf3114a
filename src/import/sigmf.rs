//! `--from-sigmf FILES...`: SigMF recordings (`NAME.sigmf-meta` + `NAME.sigmf-data`).
//!
//! One record per recording, or one per `--segment-samples N` samples (the last segment may be
//! shorter). What a record holds:
//! - id `NAME` (segments: `NAME:seg000000`, ...), scene id `NAME`, so the segments of one
//!   recording form one scene;
//! - field `iq` (complex datatypes, `complex64`) or `samples` (real, `float32`/`float64`), axis
//!   `time` with a regular coordinate in seconds (start = segment offset / rate, step = 1 / rate)
//!   and a `uniform` `time_coordinates` block when `core:sample_rate` is given; field metadata
//!   `center_frequency_hz` (the `core:frequency` of the capture in effect at the segment start)
//!   and `source_datatype`; conversion rules in [`super::samples`];
//! - when annotations with both frequency edges overlap the record, the label boxes of the
//!   mount's convention (`crate::format::labels`, written by `labels::write` as every writer
//!   here does): `labels/boxes/extent` (`float64`, `(box, extent)`: `start_sample` within the
//!   record, `duration_samples`, `low_freq_hz`, `high_freq_hz`; frame `absolute`,
//!   `receiver_sample_index` at the recording's rate) and `labels/boxes/identity` (`int32`:
//!   `class_id`, `emitter_index` = the annotation's index in the file); annotations are clipped
//!   to the segment; class ids number the recording's distinct `core:label`s in sorted order
//!   (`class_names` in the field metadata), -1 for an unlabeled annotation;
//! - in the signal field's metadata, `sigmf`: the recording's SigMF document as the field's
//!   `.sigmf-meta` gives it back ([`crate::format::sigmf`]): `global` without the layout keys,
//!   the captures and annotations as written (a segment's in its own samples: the capture in
//!   effect at its start and those within it, the annotations overlapping it, clipped);
//! - record metadata `source` (data file name, datatype, sample start, count).
//!
//! Multi-channel recordings and captures with `core:header_bytes` are refused.

use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::open::read_exactly;
use super::samples::{DatatypeError, SampleFormat};
use super::{checked, open_input, read_input, stem_of, ImportError, RecordSource, Sources};
use crate::format::json::{parse_object, JsonError, JsonLimits, Object, Value};
use crate::format::record::{Axis, Coordinate, Field, FieldMeta, Record};

use crate::format::labels::write::{self, LabelBox, WrittenFrame};
use crate::format::labels::{EXTENT_NAME as EXTENT_FIELD, IDENTITY_NAME as IDENTITY_FIELD};
use crate::format::sigmf::{origin_value, ORIGIN_KEY, SAMPLE_START};

/// Why a `.sigmf-meta` file cannot be imported; the message is the problem alone (the
/// [`ImportError::Meta`] around it names the file).
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// Not strict JSON under the control-document limits.
    #[error("invalid JSON: {0}")]
    Json(#[from] JsonError),
    /// A key breaks a SigMF rule this importer follows; the text names the key and the rule.
    #[error("{0}")]
    Rule(String),
    /// `core:datatype` names a datatype that cannot be imported.
    #[error("{0}")]
    Datatype(#[from] DatatypeError),
    /// Annotation `index` (in file order) is malformed.
    #[error("annotation {index}: {source}")]
    Annotation {
        index: usize,
        #[source]
        source: Box<MetaError>,
    },
}

impl MetaError {
    fn rule(text: impl Into<String>) -> MetaError {
        MetaError::Rule(text.into())
    }
}

/// One annotation as the box fields need it, plus the object as written.
#[derive(Debug, Clone)]
struct Annotation {
    object: Object,
    start: u64,
    count: Option<u64>,
    lower: Option<f64>,
    upper: Option<f64>,
    label: Option<String>,
}

/// What a `.sigmf-meta` file says.
#[derive(Debug, Clone)]
struct SigmfMeta {
    global: Object,
    captures: Vec<Value>,
    annotations: Vec<Annotation>,
    labels: Vec<String>,
}

/// A recording: SigMF, or a headerless file described on the command line.
#[derive(Debug)]
pub struct Recording {
    pub name: String,
    pub data_path: PathBuf,
    pub datatype: String,
    pub format: SampleFormat,
    pub sample_rate: Option<f64>,
    pub total_samples: u64,
    sigmf: Option<SigmfMeta>,
    /// The centre frequency of a headerless capture (`--center-frequency`); a SigMF
    /// recording's come from its captures.
    center_hz: Option<f64>,
}

/// The records of SigMF recordings, each named by its `.sigmf-meta`, `.sigmf-data` or base path.
pub fn sources(files: &[PathBuf], segment: Option<u64>) -> Result<Sources, ImportError> {
    let mut out = Sources::new();
    for file in files {
        let recording = Arc::new(open(file)?);
        out.extend(segments(&recording, segment)?);
    }
    Ok(out)
}

fn base_of(file: &Path) -> Result<PathBuf, ImportError> {
    let text = file.to_string_lossy();
    if text.ends_with(".sigmf") {
        return Err(ImportError::invalid(
            file,
            "SigMF archives are not supported: extract the .sigmf-meta and .sigmf-data files first",
        ));
    }
    let base = [".sigmf-meta", ".sigmf-data"]
        .iter()
        .find_map(|s| text.strip_suffix(s))
        .unwrap_or(&text);
    Ok(PathBuf::from(base))
}

fn open(file: &Path) -> Result<Recording, ImportError> {
    let base = base_of(file)?;
    let meta_path = PathBuf::from(format!("{}.sigmf-meta", base.display()));
    let data_path = PathBuf::from(format!("{}.sigmf-data", base.display()));
    let bytes = read_input(&meta_path, None, JsonLimits::CONTROL.max_bytes)?;
    let bad = |source: MetaError| ImportError::Meta {
        path: meta_path.display().to_string(),
        source,
    };
    let MetaFile {
        sigmf,
        datatype,
        format,
        sample_rate,
    } = read_meta(&bytes).map_err(bad)?;
    let name = stem_of(&PathBuf::from(format!("{}.x", base.display())))?;
    let total_samples = sample_count(&data_path, &format)?;
    Ok(Recording {
        name,
        data_path,
        datatype,
        format,
        sample_rate,
        total_samples,
        sigmf: Some(sigmf),
        center_hz: None,
    })
}

impl Recording {
    /// A headerless recording (`--from-raw`).
    pub fn raw(
        path: &Path,
        datatype: &str,
        rate: f64,
        center_hz: Option<f64>,
    ) -> Result<Recording, ImportError> {
        let format = SampleFormat::parse(datatype)?;
        if !sane_rate(rate) {
            return Err(ImportError::Option(format!(
                "--sample-rate {rate}: {RATE_RULE}"
            )));
        }
        if center_hz.is_some_and(|hz| !hz.is_finite()) {
            return Err(ImportError::Option(
                "--center-frequency must be a finite number of Hz".into(),
            ));
        }
        Ok(Recording {
            name: stem_of(path)?,
            data_path: path.to_path_buf(),
            datatype: datatype.to_string(),
            format,
            sample_rate: Some(rate),
            total_samples: sample_count(path, &format)?,
            sigmf: None,
            center_hz,
        })
    }
}

fn sample_count(data_path: &Path, format: &SampleFormat) -> Result<u64, ImportError> {
    let len = open_input(data_path, None)?.len;
    let size = format.sample_bytes();
    if len % size != 0 {
        let problem = format!("{len} bytes is not a whole number of {size}-byte samples");
        return Err(ImportError::invalid(data_path, problem));
    }
    Ok(len / size)
}

/// What a `.sigmf-meta` file says, with its datatype (as written and parsed) and sample rate.
struct MetaFile {
    sigmf: SigmfMeta,
    datatype: String,
    format: SampleFormat,
    sample_rate: Option<f64>,
}

fn read_meta(bytes: &[u8]) -> Result<MetaFile, MetaError> {
    let object = parse_object(bytes, &JsonLimits::CONTROL)?;
    let sigmf = parse_meta(&object)?;
    let datatype = match sigmf.global.get("core:datatype") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(MetaError::rule("global \"core:datatype\" must be a string")),
    };
    let format = SampleFormat::parse(&datatype)?;
    let sample_rate = sample_rate(&sigmf.global)?;
    Ok(MetaFile {
        sigmf,
        datatype,
        format,
        sample_rate,
    })
}

/// The sample rates an import accepts, Hz: finite, positive and within what any receiver
/// records (a microhertz to a terahertz).
///
/// Why a range and not only "finite and positive": JSON cannot hold an infinity, but
/// `1.7e308` is finite, and a rate like that (or `1e-300`) puts time steps and frequency spans
/// of `1e-308` s or `1e300` Hz into the dataset, which every reader then has to survive. The
/// library accepts any positive finite value in a dataset (it is normative for dataset
/// content); what our importer writes is ours to keep sane.
pub const RATE_RANGE_HZ: std::ops::RangeInclusive<f64> = 1e-6..=1e12;

/// What [`RATE_RANGE_HZ`] says, in a refusal.
const RATE_RULE: &str =
    "a sample rate must be a finite number of samples per second from 1e-6 to 1e12";

/// Whether `rate` is within [`RATE_RANGE_HZ`] (false for NaN and infinities).
fn sane_rate(rate: f64) -> bool {
    RATE_RANGE_HZ.contains(&rate)
}

fn sample_rate(global: &Object) -> Result<Option<f64>, MetaError> {
    match global.get("core:sample_rate") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(rate) if sane_rate(rate) => Ok(Some(rate)),
            _ => Err(MetaError::rule(format!(
                "global \"core:sample_rate\" {}: {RATE_RULE}",
                v.as_f64()
                    .map_or_else(|| "(not a number)".to_string(), |r| r.to_string())
            ))),
        },
    }
}

fn parse_meta(object: &Object) -> Result<SigmfMeta, MetaError> {
    let global = match object.get("global") {
        Some(Value::Object(g)) => g.clone(),
        _ => return Err(MetaError::rule("\"global\" must be an object")),
    };
    if let Some(channels) = global.get("core:num_channels") {
        if channels.as_u64() != Some(1) {
            return Err(MetaError::rule(
                "only single-channel recordings are supported (core:num_channels 1)",
            ));
        }
    }
    let captures = array_of(object, "captures")?;
    for (index, capture) in captures.iter().enumerate() {
        let starts = capture
            .as_object()
            .and_then(|c| c.get(SAMPLE_START))
            .and_then(Value::as_u64);
        if starts.is_none() {
            return Err(MetaError::rule(format!(
                "capture {index}: must be an object with a nonnegative integer \"{SAMPLE_START}\""
            )));
        }
        let header = capture.as_object().and_then(|c| c.get("core:header_bytes"));
        if header.is_some_and(|h| h.as_u64() != Some(0)) {
            return Err(MetaError::rule(
                "captures with core:header_bytes are not supported",
            ));
        }
    }
    let annotations = array_of(object, "annotations")?
        .iter()
        .enumerate()
        .map(|(index, a)| {
            annotation(a).map_err(|source| MetaError::Annotation {
                index,
                source: Box::new(source),
            })
        })
        .collect::<Result<Vec<_>, MetaError>>()?;
    let mut labels: Vec<String> = annotations.iter().filter_map(|a| a.label.clone()).collect();
    labels.sort();
    labels.dedup();
    Ok(SigmfMeta {
        global,
        captures,
        annotations,
        labels,
    })
}

fn array_of(object: &Object, key: &str) -> Result<Vec<Value>, MetaError> {
    match object.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(_) => Err(MetaError::rule(format!("{key:?} must be an array"))),
    }
}

fn annotation(value: &Value) -> Result<Annotation, MetaError> {
    let rule = MetaError::rule;
    let object = value.as_object().ok_or_else(|| rule("must be an object"))?;
    let start = object
        .get("core:sample_start")
        .and_then(Value::as_u64)
        .ok_or_else(|| rule("\"core:sample_start\" must be a nonnegative integer"))?;
    let count = match object.get("core:sample_count") {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| rule("\"core:sample_count\" must be a nonnegative integer"))?,
        ),
    };
    let edge = |key: &str| match object.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| MetaError::rule(format!("{key:?} must be a number"))),
    };
    let label = match object.get("core:label") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(rule("\"core:label\" must be a string")),
    };
    Ok(Annotation {
        object: object.clone(),
        start,
        count,
        lower: edge("core:freq_lower_edge")?,
        upper: edge("core:freq_upper_edge")?,
        label,
    })
}

/// The records of one recording: whole, or in segments of `segment` samples.
pub fn segments(recording: &Arc<Recording>, segment: Option<u64>) -> Result<Sources, ImportError> {
    let total = recording.total_samples;
    let size = match segment {
        Some(0) => {
            return Err(ImportError::Option(
                "--segment-samples must be at least 1".into(),
            ))
        }
        Some(n) => n,
        None => total.max(1),
    };
    let mut out = Sources::new();
    let mut start = 0;
    loop {
        let count = size.min(total - start);
        out.push(Box::new(Segment {
            recording: Arc::clone(recording),
            index: out.len() as u64,
            start,
            count,
            segmented: segment.is_some(),
        }));
        start += count;
        if start >= total {
            return Ok(out);
        }
    }
}

/// Samples `[start, start + count)` of a recording, as one record.
struct Segment {
    recording: Arc<Recording>,
    index: u64,
    start: u64,
    count: u64,
    segmented: bool,
}

impl RecordSource for Segment {
    fn payload_bytes(&self) -> u64 {
        self.count * self.recording.format.dtype().itemsize()
    }

    fn load(&self) -> Result<Record, ImportError> {
        let rec = &self.recording;
        let samples = rec.format.convert(self.read_samples()?);
        let name = if rec.format.is_complex() {
            "iq"
        } else {
            "samples"
        };
        let field = Field::from_meta(self.signal_meta(), samples).map_err(|source| {
            ImportError::Record {
                path: rec.data_path.display().to_string(),
                source,
            }
        })?;
        let id = if self.segmented {
            format!("{}:seg{:06}", rec.name, self.index)
        } else {
            rec.name.clone()
        };
        let mut record = Record::new(id)
            .with_scene_id(rec.name.clone())
            .with_metadata(self.record_metadata())
            .with_field(name, field);
        if let Some(sigmf) = rec.sigmf.as_ref().filter(|s| !s.annotations.is_empty()) {
            for (field_name, field) in self.box_fields(sigmf)? {
                record = record.with_field(field_name, field);
            }
        }
        checked(record, &rec.data_path)
    }
}

impl Segment {
    fn read_samples(&self) -> Result<Vec<u8>, ImportError> {
        let rec = &self.recording;
        let size = rec.format.sample_bytes();
        let io = |e| ImportError::io(&rec.data_path, e);
        let mut input = open_input(&rec.data_path, None)?;
        input
            .file
            .seek(SeekFrom::Start(self.start * size))
            .map_err(io)?;
        read_exactly(&mut input.file, self.count * size, &rec.data_path)
    }

    fn signal_meta(&self) -> FieldMeta {
        let rec = &self.recording;
        let mut meta = FieldMeta::new(rec.format.dtype(), vec![self.count]);
        let mut axis = Axis::new("time", self.count).with_role("time");
        meta.metadata
            .insert("source_datatype".into(), Value::from(rec.datatype.as_str()));
        if let Some(rate) = rec.sample_rate {
            let offset = self.start as f64 / rate;
            axis = axis.with_coordinate(Coordinate::regular(offset, 1.0 / rate).with_unit("s"));
            meta.metadata.insert(
                "time_coordinates".into(),
                time_block(rate, self.count, offset),
            );
        }
        if let Some(frequency) = self.center_frequency() {
            meta.metadata
                .insert("center_frequency_hz".into(), frequency);
        }
        if let Some(sigmf) = &rec.sigmf {
            let origin = origin_value(
                &sigmf.global,
                self.captures_in_segment(sigmf),
                self.annotations_in_segment(sigmf),
            );
            meta.metadata.insert(ORIGIN_KEY.into(), origin);
        }
        meta.axes = vec![axis];
        meta
    }

    /// The recording's captures in the segment's samples: all of them as written for a whole
    /// recording; for a segment, the one in effect at its start (starting at 0) and those
    /// starting within it (rebased).
    fn captures_in_segment(&self, sigmf: &SigmfMeta) -> Vec<Value> {
        if !self.segmented {
            return sigmf.captures.clone();
        }
        let end = self.start + self.count;
        let mut in_effect = None;
        let mut within = Vec::new();
        for capture in sigmf.captures.iter().filter_map(Value::as_object) {
            let start = capture
                .get(SAMPLE_START)
                .and_then(Value::as_u64)
                .unwrap_or(0);
            if start <= self.start {
                in_effect = Some(moved_capture(
                    capture,
                    self.start - start,
                    self.recording.sample_rate,
                ));
            } else if start < end {
                within.push(rebased(capture, start - self.start, None));
            }
        }
        in_effect.into_iter().chain(within).collect()
    }

    /// The recording's annotations in the segment's samples: all of them as written for a
    /// whole recording; for a segment, those overlapping it, rebased and clipped to it.
    fn annotations_in_segment(&self, sigmf: &SigmfMeta) -> Vec<Value> {
        if !self.segmented {
            return sigmf
                .annotations
                .iter()
                .map(|a| Value::Object(a.object.clone()))
                .collect();
        }
        let end = self.start + self.count;
        self.overlapping(sigmf)
            .map(|(_, a)| {
                let first = a.start.max(self.start);
                let count = a.count.map(|count| {
                    let last = a.start.saturating_add(count).min(end).max(first);
                    last - first
                });
                rebased(&a.object, first - self.start, count)
            })
            .collect()
    }

    /// `core:frequency` of the last capture starting at or before the segment (a headerless
    /// capture's given centre).
    fn center_frequency(&self) -> Option<Value> {
        let Some(sigmf) = self.recording.sigmf.as_ref() else {
            return self.recording.center_hz.map(Value::Float);
        };
        sigmf
            .captures
            .iter()
            .filter_map(Value::as_object)
            .filter(|c| {
                c.get("core:sample_start")
                    .and_then(Value::as_u64)
                    .is_none_or(|s| s <= self.start)
            })
            .filter_map(|c| c.get("core:frequency").cloned())
            .next_back()
    }

    fn record_metadata(&self) -> Object {
        let rec = &self.recording;
        let file = rec
            .data_path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let mut source = Object::new();
        source.insert("file".into(), Value::from(file));
        source.insert("sample_start".into(), Value::from(self.start));
        source.insert("sample_count".into(), Value::from(self.count));
        source.insert("datatype".into(), Value::from(rec.datatype.as_str()));
        let mut metadata = Object::new();
        metadata.insert("source".into(), Value::Object(source));
        metadata
    }

    /// The annotations overlapping this segment, with their index in the file.
    fn overlapping<'a>(
        &'a self,
        sigmf: &'a SigmfMeta,
    ) -> impl Iterator<Item = (usize, &'a Annotation)> {
        let end = self.start + self.count;
        let total = self.recording.total_samples;
        sigmf.annotations.iter().enumerate().filter(move |(_, a)| {
            let a_end = a
                .start
                .saturating_add(a.count.unwrap_or(total.saturating_sub(a.start)));
            if a_end == a.start {
                return a.start >= self.start && a.start < end.max(self.start + 1);
            }
            a.start < end && a_end > self.start
        })
    }

    /// The label boxes of the annotations overlapping the segment that have both frequency
    /// edges (clipped to the segment), as the box fields every writer makes
    /// ([`crate::format::labels::write`]).
    fn box_fields(&self, sigmf: &SigmfMeta) -> Result<Vec<(&'static str, Field)>, ImportError> {
        let total = self.recording.total_samples;
        let end = self.start + self.count;
        let mut boxes = Vec::new();
        for (index, a) in self.overlapping(sigmf) {
            let (Some(low), Some(high)) = (a.lower, a.upper) else {
                continue;
            };
            let a_end = a
                .start
                .saturating_add(a.count.unwrap_or(total.saturating_sub(a.start)));
            let first = a.start.max(self.start);
            let last = a_end.min(end).max(first);
            let class_id = a
                .label
                .as_ref()
                .and_then(|l| sigmf.labels.iter().position(|x| x == l))
                .map_or(-1, |p| p as i32);
            boxes.push(LabelBox {
                start_sample: (first - self.start) as f64,
                duration_samples: (last - first) as f64,
                low_freq_hz: low,
                high_freq_hz: high,
                class_id,
                emitter_index: i32::try_from(index).unwrap_or(i32::MAX),
            });
        }
        if boxes.is_empty() {
            return Ok(Vec::new());
        }
        let in_record = |source| ImportError::Record {
            path: self.recording.data_path.display().to_string(),
            source,
        };
        let extent = write::extent_field(&boxes, self.extent_metadata()).map_err(in_record)?;
        let identity = write::identity_field(&boxes, class_names(sigmf)).map_err(in_record)?;
        Ok(vec![(EXTENT_FIELD, extent), (IDENTITY_FIELD, identity)])
    }

    /// The boxes' frame: absolute Hz, sample indices at the recording's rate (without a rate,
    /// the frame is incomplete and the mount says so rather than guess).
    fn extent_metadata(&self) -> Object {
        let rate = self.recording.sample_rate.unwrap_or(f64::NAN);
        let mut metadata = WrittenFrame::Absolute {
            sample_rate_hz: rate,
        }
        .metadata();
        if self.recording.sample_rate.is_none() {
            metadata.remove("sample_rate_hz");
        }
        metadata
    }
}

/// A capture in effect at a segment's start, `delta` samples after its own start, moved there:
/// `core:sample_start` 0, `core:global_index` (the index of the sample it starts at in the
/// original stream) `delta` further, and `core:datetime` `delta / rate` seconds later (left
/// out when the rate is unknown or the time is not RFC 3339, rather than wrong).
fn moved_capture(capture: &Object, delta: u64, rate: Option<f64>) -> Value {
    let mut out = capture.clone();
    out.insert(SAMPLE_START.into(), Value::from(0u64));
    if delta == 0 {
        return Value::Object(out);
    }
    if let Some(index) = capture.get("core:global_index").and_then(Value::as_u64) {
        out.insert(
            "core:global_index".into(),
            Value::from(index.saturating_add(delta)),
        );
    }
    if let Some(Value::String(time)) = capture.get("core:datetime") {
        match rate.and_then(|rate| later_by(time, delta as f64 / rate)) {
            Some(moved) => out.insert("core:datetime".into(), Value::from(moved)),
            None => out.remove("core:datetime"),
        };
    }
    Value::Object(out)
}

/// RFC 3339 `time` plus `seconds`, in UTC with the digits it needs (`...07.252Z`).
fn later_by(time: &str, seconds: f64) -> Option<String> {
    let start = chrono::DateTime::parse_from_rfc3339(time).ok()?;
    let nanos = (seconds * 1e9).round();
    if !nanos.is_finite() || nanos.abs() > i64::MAX as f64 {
        return None;
    }
    let moved = start.checked_add_signed(chrono::Duration::nanoseconds(nanos as i64))?;
    Some(
        moved
            .with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
    )
}

/// `object` with `core:sample_start` set to `start` and, when given, `core:sample_count` to
/// `count`.
fn rebased(object: &Object, start: u64, count: Option<u64>) -> Value {
    let mut out = object.clone();
    out.insert(SAMPLE_START.into(), Value::from(start));
    if let Some(count) = count {
        out.insert("core:sample_count".into(), Value::from(count));
    }
    Value::Object(out)
}

/// `class_names` of the recording's distinct labels, numbered in sorted order.
fn class_names(sigmf: &SigmfMeta) -> Object {
    sigmf
        .labels
        .iter()
        .enumerate()
        .map(|(i, l)| (i.to_string().into(), Value::from(l.as_str())))
        .collect()
}

fn time_block(rate: f64, count: u64, offset: f64) -> Value {
    let mut block = Object::new();
    block.insert("axis".into(), Value::from("time"));
    block.insert("count".into(), Value::from(count));
    block.insert("kind".into(), Value::from("uniform"));
    block.insert("sample_rate_hz".into(), Value::Float(rate));
    block.insert("start_offset_s".into(), Value::Float(offset));
    Value::Object(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(pairs: &[(&str, Value)]) -> Object {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), v.clone()))
            .collect()
    }

    #[test]
    fn a_capture_moved_to_a_segment_start_keeps_its_time_and_index_right() {
        let original = capture(&[
            ("core:sample_start", Value::from(4000u64)),
            ("core:datetime", Value::from("2026-03-04T05:06:07.252Z")),
            ("core:global_index", Value::from(9000u64)),
            ("core:frequency", Value::Float(2.4e9)),
        ]);
        // 1,000 samples later at 2 MHz: 0.5 ms.
        let moved = moved_capture(&original, 1000, Some(2e6));
        let moved = moved.as_object().unwrap();
        assert_eq!(moved["core:sample_start"], Value::from(0u64));
        assert_eq!(
            moved["core:datetime"],
            Value::from("2026-03-04T05:06:07.252500Z")
        );
        assert_eq!(moved["core:global_index"], Value::from(10_000u64));
        assert_eq!(moved["core:frequency"], Value::Float(2.4e9));
        // A time in another zone is given in UTC; without a rate, or not RFC 3339, no time.
        let zoned = capture(&[("core:datetime", Value::from("2026-03-04T07:06:07+02:00"))]);
        let moved = moved_capture(&zoned, 3, Some(1.0));
        let time = &moved.as_object().unwrap()["core:datetime"];
        assert_eq!(time, &Value::from("2026-03-04T05:06:10Z"));
        let unmoved = moved_capture(&zoned, 3, None);
        assert!(!unmoved.as_object().unwrap().contains_key("core:datetime"));
        let bad = capture(&[("core:datetime", Value::from("yesterday"))]);
        let moved = moved_capture(&bad, 3, Some(1.0));
        assert!(!moved.as_object().unwrap().contains_key("core:datetime"));
        // No move: the capture as written (its zone too).
        let same = moved_capture(&zoned, 0, Some(1.0));
        assert_eq!(
            same.as_object().unwrap()["core:datetime"],
            zoned["core:datetime"]
        );
        // An extreme rate never overflows.
        let far = moved_capture(&original, u64::MAX, Some(1e-6));
        assert!(!far.as_object().unwrap().contains_key("core:datetime"));
    }
}
