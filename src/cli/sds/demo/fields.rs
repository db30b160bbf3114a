//! The demo record's fields, named and shaped as an RFGen scene-observation record holds them
//! (`rfgen-storage-layout`, "What one record actually holds"), plus two fields whose names
//! exercise the mount's name encoding.
//!
//! Axes show every coordinate form the layout has: explicit `values` (box columns, radar
//! channel names), regular `start`/`step` (IQ time, raster frequency, radar fast time) and a
//! `reference` to an auxiliary coordinate field (raster time, pulse starts); shared axis ids
//! tie the box axis of the two box fields together.

use super::scene::{self, Emitter, Observation, Scene};
use super::signal;
use crate::format::dtype::DType;
use crate::format::json::{Object, Value};
use crate::format::labels::write::{self, LabelBox, WrittenFrame};
use crate::format::record::{Axis, Coordinate, Field, RecordError};

pub const IQ: &str = "projections/communications_rx/receivers/rx0/iq";
/// The second receiver of the scenes that have one.
pub const IQ_RX1: &str = "projections/communications_rx/receivers/rx1/iq";
pub const BOX_EXTENT: &str = "projections/communications_rx/labels/boxes/extent";
pub const BOX_IDENTITY: &str = "projections/communications_rx/labels/boxes/identity";
pub const SEGMENTATION: &str = "projections/communications_rx/labels/segmentation";
pub const SEGMENTATION_TIME: &str =
    "projections/communications_rx/labels/segmentation/coordinates/time_offset_s";
pub const BASEBAND: &str = "projections/radar_rx/components/baseband";
pub const BASEBAND_PULSES: &str =
    "projections/radar_rx/components/baseband/coordinates/pulse_start_offset_s";
pub const NOISE: &str = "projections/radar_rx/components/noise";
pub const NOISE_PULSES: &str =
    "projections/radar_rx/components/noise/coordinates/pulse_start_offset_s";
/// Awkward on purpose: a `%` in a leaf name (the mount writes it `%25`). One value, shape
/// `[1]` with one axis (the library cannot represent a 0-d field, so none is written).
pub const OCCUPANCY: &str = "projections/communications_rx/labels/occupancy_%";
/// Awkward on purpose: a directory segment ending in `.raw` (the mount writes `rx0_iq%2Eraw`).
pub const IQ_DIGEST: &str = "provenance/rx0_iq.raw/sha256";

/// Raster geometry: 64 frequency bins over ±500 kHz, 79 time bins of 253 samples.
pub const FREQ_BINS: usize = 64;
pub const TIME_BINS: usize = 79;
const HOP: usize = 253;
const BIN_HZ: f64 = 15_625.0;

pub type Obj = Vec<(&'static str, Value)>;

/// An object from key/value pairs.
pub fn obj(pairs: Obj) -> Object {
    pairs.into_iter().map(|(k, v)| (k.into(), v)).collect()
}

fn strings(items: &[&str]) -> Vec<Value> {
    items.iter().map(|s| Value::from(*s)).collect()
}

fn f64_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn seconds(coordinate: Coordinate) -> Coordinate {
    coordinate.with_unit("s")
}

/// A communications capture of receiver `receiver` at `rate_hz` with its `uniform`
/// time-coordinates block.
pub fn iq(
    samples: &[(f64, f64)],
    time_reference: &str,
    receiver: &str,
    rate_hz: f64,
) -> Result<Field, RecordError> {
    let n = samples.len() as u64;
    let time = Axis::new("time", n)
        .with_role("time")
        .with_coordinate(seconds(Coordinate::regular(0.0, 1.0 / rate_hz)));
    let block = obj(vec![
        ("kind", "uniform".into()),
        (
            "time_composition",
            "reference_origin_s_plus_offset_s".into(),
        ),
        ("time_reference", time_reference.into()),
        ("origin_s", scene::EPOCH_S.into()),
        ("sample_rate_hz", rate_hz.into()),
        ("axis", "time".into()),
        ("count", n.into()),
    ]);
    let metadata = obj(vec![
        ("time_coordinates", block.into()),
        ("center_frequency_hz", scene::RECEIVER_CENTER_HZ.into()),
        ("receiver", receiver.into()),
    ]);
    Ok(
        Field::new(DType::C64, vec![n], signal::complex64_bytes(samples))?
            .with_axes(vec![time])
            .with_metadata(metadata),
    )
}

/// The emitters' boxes in rx0's sample frame; the edges are offsets from the receiver centre
/// (frame keys at the metadata's top level) or, with `absolute`, RF Hz (frame keys under the
/// nested `metadata` key). Class ids are the modulations', emitter indices their positions.
fn label_boxes(emitters: &[Emitter], absolute: bool) -> Vec<LabelBox> {
    let offset_hz = if absolute {
        scene::RECEIVER_CENTER_HZ
    } else {
        0.0
    };
    emitters
        .iter()
        .enumerate()
        .map(|(index, e)| LabelBox {
            start_sample: e.start_sample as f64,
            duration_samples: e.duration_samples as f64,
            low_freq_hz: e.low_hz() + offset_hz,
            high_freq_hz: e.high_hz() + offset_hz,
            class_id: e.modulation.class_id(),
            emitter_index: index as i32,
        })
        .collect()
}

/// `labels/boxes/extent` of the emitters (see `label_boxes`).
pub fn box_extent(emitters: &[Emitter], absolute: bool) -> Result<Field, RecordError> {
    let frame = if absolute {
        let keys = WrittenFrame::Absolute {
            sample_rate_hz: scene::IQ_RATE_HZ,
        };
        obj(vec![("metadata", keys.metadata().into())])
    } else {
        WrittenFrame::CenterOffset {
            center_hz: scene::RECEIVER_CENTER_HZ,
            sample_rate_hz: scene::IQ_RATE_HZ,
        }
        .metadata()
    };
    write::extent_field(&label_boxes(emitters, absolute), frame)
}

/// `labels/boxes/identity` of the emitters.
pub fn box_identity(emitters: &[Emitter]) -> Result<Field, RecordError> {
    let classes = obj(vec![("1", "qpsk".into()), ("2", "fsk2".into())]);
    write::identity_field(&label_boxes(emitters, false), classes)
}

/// Scene-time offsets of the raster's time bins (bin centres), in seconds from the origin.
pub fn time_offsets_s() -> Vec<f64> {
    (0..TIME_BINS)
        .map(|j| (j * HOP + HOP / 2) as f64 / scene::IQ_RATE_HZ)
        .collect()
}

/// Class of every raster cell (frequency-major): the emitter covering it, else −1.
pub fn raster(emitters: &[Emitter]) -> Vec<i16> {
    let mut cells = vec![-1i16; FREQ_BINS * TIME_BINS];
    for (f, row) in cells.chunks_mut(TIME_BINS).enumerate() {
        let low = -500_000.0 + f as f64 * BIN_HZ;
        let high = low + BIN_HZ;
        for (t, cell) in row.iter_mut().enumerate() {
            let (first, last) = (t * HOP, t * HOP + HOP);
            let covering = emitters.iter().find(|e| {
                let end = e.start_sample + e.duration_samples;
                e.start_sample < last && first < end && e.low_hz() < high && low < e.high_hz()
            });
            if let Some(e) = covering {
                *cell = e.modulation.class_id() as i16;
            }
        }
    }
    cells
}

/// The single-label segmentation raster with its `explicit` time-coordinates block; with
/// several receivers, a leading receiver axis (both receivers share centre and time bins, so
/// their planes are equal).
pub fn segmentation(
    emitters: &[Emitter],
    time_reference: &str,
    receivers: &[&str],
) -> Result<Field, RecordError> {
    let plane: Vec<u8> = raster(emitters)
        .iter()
        .flat_map(|c| c.to_le_bytes())
        .collect();
    let data = plane.repeat(receivers.len());
    let frequency = Axis::new("frequency", FREQ_BINS as u64)
        .with_role("frequency")
        .with_coordinate(Coordinate::regular(-500_000.0 + BIN_HZ / 2.0, BIN_HZ).with_unit("Hz"));
    let time = Axis::new("time", TIME_BINS as u64)
        .with_role("time")
        .with_id("segmentation_time")
        .with_coordinate(seconds(
            Coordinate::default().with_reference(SEGMENTATION_TIME),
        ));
    let block = obj(vec![
        ("kind", "explicit".into()),
        ("time_composition", "origin_s_plus_explicit_offset_s".into()),
        ("time_reference", time_reference.into()),
        ("origin_s", scene::EPOCH_S.into()),
        ("axis", "time".into()),
        ("count", (TIME_BINS as u64).into()),
    ]);
    let metadata = obj(vec![
        ("time_coordinates", block.into()),
        ("background_class_id", Value::Int(-1)),
    ]);
    let (mut shape, mut axes) = (
        vec![FREQ_BINS as u64, TIME_BINS as u64],
        vec![frequency, time],
    );
    if receivers.len() > 1 {
        let count = receivers.len() as u64;
        shape.insert(0, count);
        let receiver = Axis::new("receiver", count)
            .with_role("receiver")
            .with_coordinate(Coordinate::from_values(strings(receivers)));
        axes.insert(0, receiver);
    }
    Ok(Field::new(DType::I16, shape, data)?
        .with_axes(axes)
        .with_metadata(metadata))
}

/// The raster's time offsets as their own field (the `explicit` kind's data).
pub fn segmentation_time() -> Result<Field, RecordError> {
    let time = Axis::new("time", TIME_BINS as u64)
        .with_role("time")
        .with_id("segmentation_time")
        .with_coordinate(seconds(
            Coordinate::default().with_reference(SEGMENTATION_TIME),
        ));
    Ok(Field::new(
        DType::F64,
        vec![TIME_BINS as u64],
        f64_bytes(&time_offsets_s()),
    )?
    .with_axes(vec![time]))
}

fn pulsed_block(time_reference: &str, pulses_field: &str) -> Object {
    let support =
        (scene::PULSES - 1) as f64 * scene::PRI_S + scene::FAST_TIME as f64 / scene::RADAR_RATE_HZ;
    obj(vec![
        ("kind", "pulsed".into()),
        (
            "time_composition",
            "event_origin_s_plus_pulse_start_offset_s_plus_fast_time_offset_s".into(),
        ),
        ("time_reference", time_reference.into()),
        ("event_origin_s", scene::EPOCH_S.into()),
        ("event_start_offset_s", 0.0.into()),
        ("sample_rate_hz", scene::RADAR_RATE_HZ.into()),
        ("pulse_axis", "pulse".into()),
        ("pulse_count", (scene::PULSES as u64).into()),
        ("pulse_start_offset_s_field", pulses_field.into()),
        ("fast_time_axis", "fast_time_sample".into()),
        ("fast_time_count", (scene::FAST_TIME as u64).into()),
        (
            "schedule_extent_offset_s",
            vec![0.0.into(), (scene::PULSES as f64 * scene::PRI_S).into()].into(),
        ),
        (
            "support_span_offset_s",
            vec![0.0.into(), support.into()].into(),
        ),
    ])
}

fn pulse_axis(pulses_field: &str) -> Axis {
    Axis::new("pulse", scene::PULSES as u64)
        .with_role("slow_time")
        .with_coordinate(seconds(Coordinate::default().with_reference(pulses_field)))
}

/// A radar component `(1, pulses, fast time)` with its `pulsed` time-coordinates block.
pub fn radar_component(
    samples: &[(f64, f64)],
    pulses_field: &str,
    time_reference: &str,
) -> Result<Field, RecordError> {
    let channel = Axis::new("frame_tx_rx_channel", 1)
        .with_role("channel")
        .with_coordinate(Coordinate::from_values(strings(&["tx0-rx0"])));
    let fast_time = Axis::new("fast_time_sample", scene::FAST_TIME as u64)
        .with_role("fast_time")
        .with_coordinate(seconds(Coordinate::regular(
            0.0,
            1.0 / scene::RADAR_RATE_HZ,
        )));
    let shape = vec![1, scene::PULSES as u64, scene::FAST_TIME as u64];
    let metadata = obj(vec![
        (
            "time_coordinates",
            pulsed_block(time_reference, pulses_field).into(),
        ),
        ("measurement_plane", "dechirped_beat".into()),
    ]);
    Ok(
        Field::new(DType::C64, shape, signal::complex64_bytes(samples))?
            .with_axes(vec![channel, pulse_axis(pulses_field), fast_time])
            .with_metadata(metadata),
    )
}

/// Pulse start offsets, the auxiliary coordinate field of a radar component.
pub fn pulse_starts(pulses_field: &str) -> Result<Field, RecordError> {
    Ok(Field::new(
        DType::F64,
        vec![scene::PULSES as u64],
        f64_bytes(&scene::pulse_offsets_s()),
    )?
    .with_axes(vec![pulse_axis(pulses_field)]))
}

/// Percentage of raster cells some emitter occupies: one value, shape `[1]` (a 0-d field is not
/// writable: the library cannot represent it).
pub fn occupancy(emitters: &[Emitter]) -> Result<Field, RecordError> {
    let cells = raster(emitters);
    let busy = cells.iter().filter(|c| **c >= 0).count();
    let percent = busy as f64 * 100.0 / cells.len() as f64;
    Ok(
        Field::new(DType::F64, vec![1], percent.to_le_bytes().to_vec())?
            .with_axes(vec![Axis::new("value", 1)])
            .with_metadata(obj(vec![("unit", "percent".into())])),
    )
}

/// SHA-256 of the IQ field's bytes, as 32 `uint8`.
pub fn iq_digest(iq_bytes: &[u8]) -> Result<Field, RecordError> {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(iq_bytes).to_vec();
    let axis = Axis::new("byte", 32);
    Ok(Field::new(DType::U8, vec![32], digest)?
        .with_axes(vec![axis])
        .with_metadata(obj(vec![
            ("of_field", IQ.into()),
            ("algorithm", "sha256".into()),
        ])))
}

/// Every field of `observation`, by name.
pub fn all(
    observation: &Observation,
    time_reference: &str,
) -> Result<Vec<(&'static str, Field)>, RecordError> {
    let scene: &Scene = &observation.scene;
    let rx0 = iq(
        &scene::capture(observation),
        time_reference,
        "rx0",
        scene::IQ_RATE_HZ,
    )?;
    let digest = iq_digest(&rx0.data)?;
    let receivers: &[&str] = if scene.second_receiver {
        &["rx0", "rx1"]
    } else {
        &["rx0"]
    };
    let mut fields = vec![(IQ, rx0)];
    if scene.second_receiver {
        let samples = scene::capture_rx1(observation);
        fields.push((
            IQ_RX1,
            iq(&samples, time_reference, "rx1", scene::RX1_RATE_HZ)?,
        ));
    }
    fields.extend([
        (
            BOX_EXTENT,
            box_extent(&scene.emitters, scene.absolute_boxes)?,
        ),
        (BOX_IDENTITY, box_identity(&scene.emitters)?),
        (
            SEGMENTATION,
            segmentation(&scene.emitters, time_reference, receivers)?,
        ),
        (SEGMENTATION_TIME, segmentation_time()?),
        (OCCUPANCY, occupancy(&scene.emitters)?),
        (
            BASEBAND,
            radar_component(
                &scene::radar_baseband(scene),
                BASEBAND_PULSES,
                time_reference,
            )?,
        ),
        (BASEBAND_PULSES, pulse_starts(BASEBAND_PULSES)?),
        (
            NOISE,
            radar_component(
                &scene::radar_noise(observation),
                NOISE_PULSES,
                time_reference,
            )?,
        ),
        (NOISE_PULSES, pulse_starts(NOISE_PULSES)?),
        (IQ_DIGEST, digest),
    ]);
    Ok(fields)
}
