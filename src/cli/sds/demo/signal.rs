//! Deterministic signal synthesis for the demo dataset: a seeded generator, trigonometry and
//! the two burst waveforms (raised-cosine QPSK, smoothed 2-FSK).
//!
//! Why not `f64::sin` and a `rand` distribution: the demo dataset is committed and a test
//! regenerates it byte for byte, on every platform. The platform `libm` (glibc, musl, macOS) is
//! not guaranteed to round `sin`, `cos` or `ln` identically, and `rand`'s algorithms may change
//! between releases. Everything here uses only IEEE-754 basic operations (`+ - * /`, `sqrt`,
//! `floor`, `round`), which are exactly rounded everywhere (Rust never contracts them into FMA),
//! so the same seed gives the same bits on every machine.

use std::f64::consts::PI;

/// SplitMix64: tiny, fast, and fully specified, so its stream never changes.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Approximately standard normal: the Irwin–Hall sum of 12 uniforms minus 6 (mean 0,
    /// variance 1), which needs no logarithm.
    pub fn normal(&mut self) -> f64 {
        (0..12).map(|_| self.uniform()).sum::<f64>() - 6.0
    }

    /// One of `n` values, uniformly (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// `(sin x, cos x)` from a Cody–Waite reduction to `[-π/4, π/4]` and Taylor polynomials;
/// accurate to about 1e-15 for the arguments used here (|x| < 1e6).
pub fn sin_cos(x: f64) -> (f64, f64) {
    const PIO2_HI: f64 = 1.570_796_326_734_125_6;
    const PIO2_LO: f64 = 6.077_100_506_506_192e-11;
    let k = (x * (2.0 / PI)).round();
    let r = (x - k * PIO2_HI) - k * PIO2_LO;
    let (s, c) = (taylor_sin(r), taylor_cos(r));
    match (k as i64).rem_euclid(4) {
        0 => (s, c),
        1 => (c, -s),
        2 => (-s, -c),
        _ => (-c, s),
    }
}

fn taylor_sin(r: f64) -> f64 {
    let r2 = r * r;
    let mut term = r;
    let mut sum = r;
    for n in 1..10 {
        let k = (2 * n) as f64;
        term = -term * r2 / (k * (k + 1.0));
        sum += term;
    }
    sum
}

fn taylor_cos(r: f64) -> f64 {
    let r2 = r * r;
    let mut term = 1.0;
    let mut sum = 1.0;
    for n in 1..10 {
        let k = (2 * n) as f64;
        term = -term * r2 / ((k - 1.0) * k);
        sum += term;
    }
    sum
}

/// `e^{j 2π cycles}` with the whole turns removed first, so large phases keep their precision.
pub fn phasor(cycles: f64) -> (f64, f64) {
    let (s, c) = sin_cos(2.0 * PI * (cycles - cycles.floor()));
    (c, s)
}

/// The raised-cosine pulse at `t` symbol periods with roll-off `beta`.
pub fn raised_cosine(t: f64, beta: f64) -> f64 {
    let sinc = if t == 0.0 {
        1.0
    } else {
        sin_cos(PI * t).0 / (PI * t)
    };
    let denominator = 1.0 - (2.0 * beta * t) * (2.0 * beta * t);
    if denominator.abs() < 1e-12 {
        return PI / 4.0 * sin_cos(PI / (2.0 * beta)).0 / (PI / (2.0 * beta));
    }
    sinc * sin_cos(PI * beta * t).1 / denominator
}

/// Complex baseband samples as `(re, im)` pairs in `f64`.
pub type Samples = Vec<(f64, f64)>;

/// A QPSK burst: `symbols` random symbols at `sps` samples per symbol, raised-cosine shaped
/// (roll-off `beta`, ±4 symbols of pulse), `len` samples long.
pub fn qpsk_burst(rng: &mut Rng, len: usize, sps: usize, beta: f64) -> Samples {
    let symbols = len / sps + 1;
    let scale = std::f64::consts::FRAC_1_SQRT_2;
    let points: Vec<(f64, f64)> = (0..symbols)
        .map(|_| {
            let bits = rng.below(4);
            let re = if bits & 1 == 0 { scale } else { -scale };
            let im = if bits & 2 == 0 { scale } else { -scale };
            (re, im)
        })
        .collect();
    (0..len)
        .map(|n| shaped_sample(&points, n as f64 / sps as f64, beta))
        .collect()
}

/// The shaped waveform at time `t` (in symbols): the pulse-weighted sum of nearby symbols.
fn shaped_sample(points: &[(f64, f64)], t: f64, beta: f64) -> (f64, f64) {
    let centre = t.round() as i64;
    let mut sum = (0.0, 0.0);
    for m in (centre - 4)..=(centre + 4) {
        let Some(&(re, im)) = usize::try_from(m).ok().and_then(|m| points.get(m)) else {
            continue;
        };
        let h = raised_cosine(t - m as f64, beta);
        sum = (sum.0 + re * h, sum.1 + im * h);
    }
    sum
}

/// A continuous-phase 2-FSK burst: ±`deviation_hz` at `symbol_rate_hz`, with each frequency
/// step smoothed by a raised-cosine transition over half a symbol; `len` samples at `rate_hz`.
pub fn fsk_burst(
    rng: &mut Rng,
    len: usize,
    rate_hz: f64,
    symbol_rate_hz: f64,
    deviation_hz: f64,
) -> Samples {
    let sps = rate_hz / symbol_rate_hz;
    let symbols: Vec<f64> = (0..(len as f64 / sps) as usize + 2)
        .map(|_| if rng.below(2) == 0 { -1.0 } else { 1.0 })
        .collect();
    let mut cycles = 0.0f64;
    let mut out = Vec::with_capacity(len);
    for n in 0..len {
        out.push(phasor(cycles));
        let position = n as f64 / sps;
        let index = position.floor() as usize;
        let previous = if index == 0 {
            symbols[0]
        } else {
            symbols[index - 1]
        };
        let current = symbols.get(index).copied().unwrap_or(previous);
        let tau = ((position - index as f64) * 2.0).min(1.0);
        let ramp = (1.0 - sin_cos(PI * tau).1) / 2.0;
        let frequency = deviation_hz * (previous + (current - previous) * ramp);
        cycles += frequency / rate_hz;
        cycles -= cycles.floor();
    }
    out
}

/// Shifts `samples` (which start at absolute sample `start`) by `offset_hz`.
pub fn frequency_shift(samples: &mut Samples, start: usize, offset_hz: f64, rate_hz: f64) {
    for (k, sample) in samples.iter_mut().enumerate() {
        let (c, s) = phasor(offset_hz * (start + k) as f64 / rate_hz);
        *sample = (sample.0 * c - sample.1 * s, sample.0 * s + sample.1 * c);
    }
}

/// Complex white Gaussian noise of unit total power.
pub fn noise(rng: &mut Rng, len: usize) -> Samples {
    let sigma = std::f64::consts::FRAC_1_SQRT_2;
    (0..len)
        .map(|_| (rng.normal() * sigma, rng.normal() * sigma))
        .collect()
}

/// Little-endian complex64 bytes of `samples`.
pub fn complex64_bytes(samples: &[(f64, f64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(samples.len() * 8);
    for &(re, im) in samples {
        out.extend_from_slice(&(re as f32).to_le_bytes());
        out.extend_from_slice(&(im as f32).to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigonometry_matches_the_platform_closely() {
        for i in -2000..2000 {
            let x = i as f64 * 0.0137;
            let (s, c) = sin_cos(x);
            assert!((s - x.sin()).abs() < 1e-13, "sin {x}");
            assert!((c - x.cos()).abs() < 1e-13, "cos {x}");
        }
    }

    #[test]
    fn generator_is_fixed() {
        let mut rng = Rng::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        let mean: f64 = (0..10_000).map(|_| rng.normal()).sum::<f64>() / 10_000.0;
        assert!(mean.abs() < 0.05);
    }

    #[test]
    fn raised_cosine_is_one_at_zero_and_zero_at_other_symbols() {
        assert_eq!(raised_cosine(0.0, 0.35), 1.0);
        for k in 1..4 {
            assert!(raised_cosine(k as f64, 0.35).abs() < 1e-12);
        }
        assert!(raised_cosine(1.0 / 0.7, 0.35).is_finite());
    }
}
