//! The demo's scenes and observations: what is on the air, and what each record saw.
//!
//! Four scenes, each observed twice (different noise realisation and SNR), so records share
//! scene ids the way repeated observations of one RFGen scene plan do. A scene fixes its
//! emitters (modulation, burst timing, frequency offset, symbols) and its radar target; an
//! observation fixes the noise seed and the signal level.

use super::signal::{self, Rng, Samples};

/// Sample rate of the communications receiver.
pub const IQ_RATE_HZ: f64 = 1_000_000.0;
/// Sample rate of the second receiver (`rx1`) of the scenes that have one: the same 20 ms
/// and the same centre, twice the rate, so its boxes are the first receiver's scaled by two.
pub const RX1_RATE_HZ: f64 = 2_000_000.0;
/// Samples in one communications capture (20 ms).
pub const IQ_SAMPLES: usize = 20_000;
/// The receiver's tuned centre; box edges are offsets from it.
pub const RECEIVER_CENTER_HZ: f64 = 2_400_000_000.0;
/// Scene epoch: scene time of the first sample of every capture.
pub const EPOCH_S: f64 = 0.25;
/// Radar fast-time sample rate.
pub const RADAR_RATE_HZ: f64 = 10_000_000.0;
/// Radar pulses per frame and samples per pulse (a 40 µs dwell).
pub const PULSES: usize = 4;
pub const FAST_TIME: usize = 400;
/// Pulse repetition interval.
pub const PRI_S: f64 = 0.000_06;

/// The waveform of one emitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Modulation {
    /// Raised-cosine QPSK at 100 kBd (10 samples per symbol), roll-off 0.35.
    Qpsk,
    /// Continuous-phase 2-FSK at 25 kBd with ±25 kHz deviation.
    Fsk2,
}

impl Modulation {
    pub fn name(self) -> &'static str {
        match self {
            Modulation::Qpsk => "qpsk",
            Modulation::Fsk2 => "fsk2",
        }
    }

    /// Class id written in the box and segmentation labels (−1 is background).
    pub fn class_id(self) -> i32 {
        match self {
            Modulation::Qpsk => 1,
            Modulation::Fsk2 => 2,
        }
    }

    /// Occupied bandwidth used for the box edges.
    pub fn bandwidth_hz(self) -> f64 {
        match self {
            Modulation::Qpsk => 135_000.0,
            Modulation::Fsk2 => 100_000.0,
        }
    }
}

/// One burst in a scene.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Emitter {
    pub modulation: Modulation,
    pub start_sample: usize,
    pub duration_samples: usize,
    pub offset_hz: f64,
    /// Seeds the emitter's symbols: the same in every observation of the scene.
    pub seed: u64,
}

impl Emitter {
    pub fn low_hz(&self) -> f64 {
        self.offset_hz - self.modulation.bandwidth_hz() / 2.0
    }

    pub fn high_hz(&self) -> f64 {
        self.offset_hz + self.modulation.bandwidth_hz() / 2.0
    }
}

/// A scene plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Scene {
    pub id: &'static str,
    pub emitters: Vec<Emitter>,
    /// Dechirped beat frequency of the radar target.
    pub radar_beat_hz: f64,
    /// Doppler phase advance per pulse, in cycles.
    pub doppler_cycles_per_pulse: f64,
    /// Whether a second receiver (`rx1`, at [`RX1_RATE_HZ`]) observes the scene.
    pub second_receiver: bool,
    /// Whether the box labels are written in absolute Hz, their frame keys under the extent
    /// metadata's nested `metadata` key (the consumer layout's placement), rather than as
    /// offsets from the receiver centre with the keys at the top level.
    pub absolute_boxes: bool,
}

/// One observation (one record) of a scene.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub scene: Scene,
    pub ordinal: u64,
    pub snr_db: f64,
    /// `10^(snr_db / 20)`, written out so no `powf` is needed (see `signal`).
    pub amplitude: f64,
    pub sample_seed: u64,
}

fn emitter(
    modulation: Modulation,
    start_sample: usize,
    duration_samples: usize,
    offset_hz: f64,
    seed: u64,
) -> Emitter {
    Emitter {
        modulation,
        start_sample,
        duration_samples,
        offset_hz,
        seed,
    }
}

/// The four scenes.
pub fn scenes() -> Vec<Scene> {
    use Modulation::{Fsk2, Qpsk};
    vec![
        Scene {
            id: "scene-0000",
            emitters: vec![emitter(Qpsk, 2_000, 9_000, 150_000.0, 11)],
            radar_beat_hz: 1_250_000.0,
            doppler_cycles_per_pulse: 0.05,
            second_receiver: false,
            absolute_boxes: false,
        },
        Scene {
            id: "scene-0001",
            emitters: vec![emitter(Fsk2, 5_000, 12_000, -200_000.0, 12)],
            radar_beat_hz: 2_500_000.0,
            doppler_cycles_per_pulse: -0.1,
            second_receiver: false,
            absolute_boxes: false,
        },
        Scene {
            id: "scene-0002",
            emitters: vec![
                emitter(Qpsk, 1_000, 6_000, -50_000.0, 13),
                emitter(Fsk2, 9_000, 8_000, 300_000.0, 14),
            ],
            radar_beat_hz: 600_000.0,
            doppler_cycles_per_pulse: 0.2,
            second_receiver: true,
            absolute_boxes: false,
        },
        Scene {
            id: "scene-0003",
            emitters: vec![emitter(Fsk2, 500, 16_000, 100_000.0, 15)],
            radar_beat_hz: 3_200_000.0,
            doppler_cycles_per_pulse: 0.0,
            second_receiver: false,
            absolute_boxes: true,
        },
    ]
}

/// The eight observations, in ordinal order: each scene twice, at 10 dB and 18 dB.
pub fn observations(seed: u64) -> Vec<Observation> {
    const LEVELS: [(f64, f64); 2] = [
        (10.0, 3.162_277_660_168_379_5),
        (18.0, 7.943_282_347_242_815),
    ];
    let mut out = Vec::new();
    for scene in scenes() {
        for (snr_db, amplitude) in LEVELS {
            let ordinal = out.len() as u64;
            out.push(Observation {
                scene: scene.clone(),
                ordinal,
                snr_db,
                amplitude,
                sample_seed: (seed ^ ordinal.wrapping_mul(0x9e37_79b9)) & 0xffff_ffff,
            });
        }
    }
    out
}

/// The communications capture of `observation`: its bursts over unit-power noise.
pub fn capture(observation: &Observation) -> Samples {
    capture_at(observation, 1, observation.sample_seed)
}

/// The second receiver's capture: the same scene at twice the rate, its own noise.
pub fn capture_rx1(observation: &Observation) -> Samples {
    capture_at(observation, 2, observation.sample_seed ^ 0x0000_7a11)
}

/// A capture at `factor` times [`IQ_RATE_HZ`] (same duration, `factor` times the samples).
fn capture_at(observation: &Observation, factor: usize, noise_seed: u64) -> Samples {
    let mut rng = Rng::new(noise_seed);
    let mut samples = signal::noise(&mut rng, IQ_SAMPLES * factor);
    for emitter in &observation.scene.emitters {
        let start = emitter.start_sample * factor;
        let burst = burst(emitter, factor);
        for (k, (re, im)) in burst.into_iter().enumerate() {
            if let Some(slot) = samples.get_mut(start + k) {
                slot.0 += re * observation.amplitude;
                slot.1 += im * observation.amplitude;
            }
        }
    }
    samples
}

fn burst(emitter: &Emitter, factor: usize) -> Samples {
    let mut rng = Rng::new(emitter.seed);
    let len = emitter.duration_samples * factor;
    let rate = IQ_RATE_HZ * factor as f64;
    let mut samples = match emitter.modulation {
        Modulation::Qpsk => signal::qpsk_burst(&mut rng, len, 10 * factor, 0.35),
        Modulation::Fsk2 => signal::fsk_burst(&mut rng, len, rate, 25_000.0, 25_000.0),
    };
    signal::frequency_shift(
        &mut samples,
        emitter.start_sample * factor,
        emitter.offset_hz,
        rate,
    );
    samples
}

/// Radar baseband `(1, PULSES, FAST_TIME)`: the target's beat tone, advancing in phase from
/// pulse to pulse by the Doppler step.
pub fn radar_baseband(scene: &Scene) -> Samples {
    let mut out = Vec::with_capacity(PULSES * FAST_TIME);
    for pulse in 0..PULSES {
        for k in 0..FAST_TIME {
            let cycles = scene.radar_beat_hz * k as f64 / RADAR_RATE_HZ
                + scene.doppler_cycles_per_pulse * pulse as f64;
            let (re, im) = signal::phasor(cycles);
            out.push((0.5 * re, 0.5 * im));
        }
    }
    out
}

/// Radar receiver noise `(1, PULSES, FAST_TIME)`, stored beside the baseband, never summed.
pub fn radar_noise(observation: &Observation) -> Samples {
    let mut rng = Rng::new(observation.sample_seed ^ 0x5eed_0000);
    signal::noise(&mut rng, PULSES * FAST_TIME)
        .into_iter()
        .map(|(re, im)| (0.1 * re, 0.1 * im))
        .collect()
}

/// Start offsets of the pulses from the event origin, in seconds.
pub fn pulse_offsets_s() -> Vec<f64> {
    (0..PULSES).map(|p| p as f64 * PRI_S).collect()
}
