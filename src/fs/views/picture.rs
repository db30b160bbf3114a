//! Pictures of a record: a spectrogram (waterfall) PNG beside every IQ field that has a SigMF
//! pair, and one `preview.png` per record stacking its receivers' spectrograms and, for its
//! pulsed radar fields, their pulses (one row per pulse, its fast-time power spectrum: a beat
//! tone, a target's range, is a bright column).
//!
//! Why fixed dimensions: `stat` must give a picture's exact size from the metadata row alone,
//! and [`crate::format::png`] makes a PNG's size a function of its dimensions. So a spectrogram
//! is always [`SPECTROGRAM_W`] × [`SPECTROGRAM_H`] and a preview's height depends only on how
//! many panels the row says it has ([`preview_panels`], at most [`MAX_PANELS`]). A field of any
//! length is decimated into the fixed grid: each of the [`PLOT_ROWS`] time rows averages the
//! power of at most [`MAX_WINDOWS`] Hann-windowed FFTs of [`FFT_LEN`] samples spread over its
//! span, so a spectrogram reads at most `PLOT_ROWS × MAX_WINDOWS × FFT_LEN` samples (4 MiB)
//! and a preview panel `PANEL_ROWS × MAX_WINDOWS × FFT_LEN`, whatever the field's size.
//!
//! Axes use the conversions of the `.sigmf-meta`: the field's sample rate
//! ([`super::sample_rate`]) and centre frequency ([`labels::center_frequency`]); the label boxes
//! drawn are the `.sigmf-meta`'s annotations (absolute sample ranges and Hz). Time runs down from
//! sample 0: plot row `r` of `R` covers samples `[r·N/R, (r+1)·N/R)` of `N`. Frequency runs
//! right: plot column `c` is the FFT bin at `centre + (c − 128) · rate / 256` Hz. A box of
//! samples `[s, e)` and Hz `[lo, hi]` is outlined at rows `floor(s·R/N) .. ceil(e·R/N)` and
//! columns `floor(col(lo)) .. ceil(col(hi))`, `col(f) = (f − centre) / rate · 256 + 128`.
//! Colours show power in dB above the picture's noise floor (the highest median cell of its
//! plots: a preview's receivers share one floor and one scale, so a weaker field looks weaker,
//! and its pulsed fields another, their zero-frequency bin left out): black at 6 dB below the
//! floor, through purple, red and orange, to pale yellow at the top of the scale
//! (the strongest cell, at least 30 dB and at most 90 dB above the bottom), luminance rising
//! throughout. A spectrogram carries the scale as a colour bar labelled in dB over the floor.
//! The pictures are palette PNGs of [`MAP_LEVELS`] levels and a few colours for text and boxes
//! ([`crate::format::png::Canvas::to_palette_png`]): a third of RGB's size, fixed.
//! The FFT is a plain radix-2 of 256 points: small enough that a dependency would buy nothing.

use bytes::Bytes;

use super::{has_sigmf_pair, sample_rate};
use crate::format::dtype::DType;
use crate::format::labels::{self, Annotation};
use crate::format::png::{palette_png_len, Canvas, Rgb, GLYPH_H, GLYPH_W};
use crate::format::record::{FieldMeta, RecordMeta};
use crate::fs::error::FsError;
use crate::interrupt;

/// FFT size, and the plot's width in pixels (one column per frequency bin).
pub const FFT_LEN: usize = 256;
/// Time rows of a spectrogram's plot.
pub const PLOT_ROWS: u32 = 256;
/// FFTs averaged into one time row at most.
pub const MAX_WINDOWS: u64 = 8;
/// Where a spectrogram's plot starts (left margin for time ticks, top for the title).
pub const PLOT_LEFT: u32 = 48;
pub const PLOT_TOP: u32 = 14;
/// The colour bar right of a plot (a spectrogram's, a preview panel's): its left edge, width,
/// and its labels' room.
const BAR_LEFT: u32 = PLOT_LEFT + FFT_LEN as u32 + 8;
const BAR_W: u32 = 8;
const BAR_LABEL_CHARS: u32 = 7;
pub const SPECTROGRAM_W: u32 = BAR_LEFT + BAR_W + 3 + BAR_LABEL_CHARS * GLYPH_W + 2;
pub const SPECTROGRAM_H: u32 = PLOT_TOP + PLOT_ROWS + 22;
/// A preview shows at most this many panels (the first fields in name order).
pub const MAX_PANELS: usize = 8;
/// Rows of a preview panel's plot, and the panel's height with its title, its axes below
/// (ticks, their labels, the axes' names) and a gap.
pub const PANEL_ROWS: u32 = 128;
const PANEL_H: u32 = 10 + PANEL_ROWS + 18 + 4;
/// A panel's plot starts here, as a spectrogram's: room for the time ticks' labels.
const PANEL_LEFT: u32 = PLOT_LEFT;
/// A preview is as wide as a spectrogram: each panel has a colour bar beside it.
pub const PREVIEW_W: u32 = SPECTROGRAM_W;
/// The scale: its bottom this far below the noise floor, its top the strongest cell but at
/// least [`MIN_RANGE_DB`] and at most [`MAX_RANGE_DB`] above the bottom.
const BELOW_FLOOR_DB: f32 = 6.0;
const MIN_RANGE_DB: f32 = 30.0;
const MAX_RANGE_DB: f32 = 90.0;
/// Levels of the colour map (palette entries); the others are the background, text and box
/// colours.
pub const MAP_LEVELS: usize = 240;
const BYTES_PER_SAMPLE: u64 = 8;
/// Plot rows computed between two looks at whether the requester was interrupted (a row is up
/// to 8 FFTs and their reads, a look reads `/proc`).
const INTERRUPT_ROWS: u64 = 16;

const BACKGROUND: Rgb = [24, 24, 24];
const INK: Rgb = [230, 230, 230];
const BOX: Rgb = [0, 255, 255];
/// The colour map's stops: luminance rises monotonically from black to pale yellow, so a
/// brighter pixel always means more power.
const STOPS: [(f32, Rgb); 5] = [
    (0.0, [0, 0, 0]),
    (0.25, [40, 0, 120]),
    (0.5, [200, 30, 40]),
    (0.75, [250, 170, 0]),
    (1.0, [255, 255, 210]),
];

/// Reads `len` bytes of field `name` from byte `offset` (fewer at its end).
pub type ReadField<'a> = dyn Fn(&str, u64, usize) -> Result<Bytes, FsError> + 'a;

/// The size of every spectrogram PNG.
pub fn spectrogram_len() -> u64 {
    palette_png_len(SPECTROGRAM_W, SPECTROGRAM_H)
}

/// The size of a preview of `panels` panels.
pub fn preview_len(panels: usize) -> u64 {
    palette_png_len(PREVIEW_W, preview_height(panels))
}

/// The pictures' palette: the colour map's levels, then the marks' colours (the rest black).
fn palette() -> [Rgb; 256] {
    let mut palette = [[0u8; 3]; 256];
    for (level, entry) in palette.iter_mut().take(MAP_LEVELS).enumerate() {
        *entry = map_colour(level as f32 / (MAP_LEVELS - 1) as f32);
    }
    palette[MAP_LEVELS] = BACKGROUND;
    palette[MAP_LEVELS + 1] = INK;
    palette[MAP_LEVELS + 2] = BOX;
    palette
}

/// The median of the finite values of `cells`, if any.
fn median(cells: &[f32]) -> Option<f32> {
    let mut finite: Vec<f32> = cells.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.is_empty() {
        return None;
    }
    let middle = finite.len() / 2;
    let (_, value, _) = finite.select_nth_unstable_by(middle, f32::total_cmp);
    Some(*value)
}

/// Where a picture's colours sit in dB: the bottom of the scale and its range.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Scale {
    floor_db: f32,
    bottom_db: f32,
    range_db: f32,
}

impl Scale {
    /// The scale of `grids` together: the noise floor is the highest of their medians (each
    /// plot's typical cell), so no plot looks louder for its neighbours being quiet (a clean
    /// tone's leakage floor, 60 dB down, would otherwise push a plain noise plot to the top);
    /// the top is their strongest cell.
    fn of(grids: &[&Grid]) -> Scale {
        let floor = grids
            .iter()
            .filter_map(|grid| median(&grid.cells))
            .reduce(f32::max);
        let top = grids
            .iter()
            .flat_map(|grid| grid.cells.iter().copied())
            .filter(|v| v.is_finite())
            .fold(f32::MIN, f32::max);
        let Some(floor) = floor else {
            return Scale {
                floor_db: 0.0,
                bottom_db: -BELOW_FLOOR_DB,
                range_db: MIN_RANGE_DB,
            };
        };
        let bottom = floor - BELOW_FLOOR_DB;
        Scale {
            floor_db: floor,
            bottom_db: bottom,
            range_db: (top - bottom).clamp(MIN_RANGE_DB, MAX_RANGE_DB),
        }
    }

    /// The level of `value` dB, in `0..=1` (0 for NaN).
    fn level(&self, value: f32) -> f32 {
        let level = ((value - self.bottom_db) / self.range_db).clamp(0.0, 1.0);
        if level.is_nan() {
            0.0
        } else {
            level
        }
    }
}

fn preview_height(panels: usize) -> u32 {
    4 + PANEL_H * panels.clamp(1, MAX_PANELS) as u32
}

/// Complex64 of rank at least 2 with an axis named `pulse`: pulses × fast time (leading axes
/// such as channels flattened into more pulse rows).
pub fn is_pulsed(field: &FieldMeta) -> bool {
    field.dtype == DType::C64
        && field.shape.len() >= 2
        && field.shape.iter().all(|&d| d >= 1)
        && field.axes.iter().any(|axis| axis.name == "pulse")
}

/// What a preview panel shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PanelKind {
    Spectrogram,
    Pulses,
}

/// The panels of a record's preview: its SigMF fields and pulsed fields, in name order, at
/// most [`MAX_PANELS`].
pub fn preview_panels(record: &RecordMeta) -> Vec<(String, PanelKind)> {
    record
        .fields
        .iter()
        .filter_map(|(name, field)| Some((name.clone(), panel_kind(field)?)))
        .take(MAX_PANELS)
        .collect()
}

/// The panel a field gets in its record's preview, if any: a spectrogram for a SigMF field,
/// pulses for a pulsed one.
pub fn panel_kind(field: &FieldMeta) -> Option<PanelKind> {
    if has_sigmf_pair(field) {
        Some(PanelKind::Spectrogram)
    } else if is_pulsed(field) {
        Some(PanelKind::Pulses)
    } else {
        None
    }
}

/// How an IQ field's samples and Hz map onto a plot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IqAxes {
    pub samples: u64,
    pub rate_hz: Option<f64>,
    pub center_hz: Option<f64>,
}

impl IqAxes {
    pub fn of(field: &FieldMeta) -> IqAxes {
        IqAxes {
            samples: field.shape.first().copied().unwrap_or(0),
            rate_hz: sample_rate(field),
            center_hz: labels::center_frequency(&field.metadata),
        }
    }

    /// The plot column (0..FFT_LEN, fractional) of absolute frequency `hz`.
    fn column_of(&self, hz: f64) -> Option<f64> {
        let rate = self.rate_hz?;
        let offset = hz - self.center_hz.unwrap_or(0.0);
        Some(offset / rate * FFT_LEN as f64 + (FFT_LEN / 2) as f64)
    }

    /// The plot row (0..rows, fractional) of sample `sample`.
    fn row_of(&self, sample: u64, rows: u32) -> f64 {
        sample as f64 * f64::from(rows) / self.samples.max(1) as f64
    }
}

/// Field `name`'s spectrogram PNG (exactly [`spectrogram_len`] bytes), with `boxes` drawn.
pub fn spectrogram_png(
    record_id: &str,
    name: &str,
    axes: &IqAxes,
    boxes: &[Annotation],
    read: &ReadField,
) -> Result<Vec<u8>, FsError> {
    let grid = power_grid(name, axes.samples, PLOT_ROWS, read)?;
    let scale = Scale::of(&[&grid]);
    let mut canvas = Canvas::new(SPECTROGRAM_W, SPECTROGRAM_H, BACKGROUND);
    let origin = (i64::from(PLOT_LEFT), i64::from(PLOT_TOP));
    paint_grid(&mut canvas, origin, &grid, &scale);
    draw_boxes(&mut canvas, origin, axes, PLOT_ROWS, boxes);
    // The title (the record, the field; below it the rate and centre) stops short of the
    // colour bar's "DB".
    let chars = ((BAR_LEFT - 4) / GLYPH_W) as usize;
    canvas.text((2, 1), &titled(record_id, name, chars), chars, INK);
    canvas.text((2, 7), &rate_and_centre(axes), chars, INK);
    let plot = Plot {
        left: i64::from(PLOT_LEFT),
        top: i64::from(PLOT_TOP),
        rows: PLOT_ROWS,
        canvas_w: i64::from(SPECTROGRAM_W),
    };
    draw_frequency_ticks(&mut canvas, plot, frequency_axis(axes));
    draw_time_ticks(&mut canvas, plot, time_axis(axes));
    draw_colour_bar(&mut canvas, &scale, i64::from(PLOT_TOP), PLOT_ROWS);
    Ok(canvas.to_palette_png(&palette()))
}

/// A record's preview PNG (exactly [`preview_len`] of `panels.len()` bytes): each panel with
/// the boxes of its field (empty for pulses).
pub fn preview_png(
    record_id: &str,
    field_of: &dyn Fn(&str) -> Option<FieldMeta>,
    panels: &[(String, PanelKind)],
    boxes: &[Vec<Annotation>],
    read: &ReadField,
) -> Result<Vec<u8>, FsError> {
    let shown = &panels[..panels.len().min(MAX_PANELS)];
    let mut canvas = Canvas::new(PREVIEW_W, preview_height(shown.len()), BACKGROUND);
    // Titles stop short of the colour bars' "DB", as a spectrogram's do.
    let chars = ((BAR_LEFT - 4) / GLYPH_W) as usize;
    if shown.is_empty() {
        canvas.text((4, 6), "NO IQ OR PULSED FIELDS", chars, INK);
    }
    // Every panel's grid first: the receivers' spectrograms share one scale, so a weaker
    // field looks weaker, and the pulsed fields another (their power is of another kind).
    let mut grids = Vec::with_capacity(shown.len());
    for (name, kind) in shown {
        let field = field_of(name).ok_or_else(|| FsError::failed("field of a panel missing"))?;
        let grid = match kind {
            PanelKind::Spectrogram => {
                power_grid(name, IqAxes::of(&field).samples, PANEL_ROWS, read)?
            }
            PanelKind::Pulses => pulse_grid(name, &field.shape, read)?,
        };
        grids.push((field, grid));
    }
    let scale_of = |wanted: PanelKind| {
        let of_kind: Vec<&Grid> = shown
            .iter()
            .zip(&grids)
            .filter(|((_, kind), _)| *kind == wanted)
            .map(|(_, (_, grid))| grid)
            .collect();
        Scale::of(&of_kind)
    };
    let (spectrum_scale, pulse_scale) = (
        scale_of(PanelKind::Spectrogram),
        scale_of(PanelKind::Pulses),
    );
    for (index, ((name, kind), (field, grid))) in shown.iter().zip(&grids).enumerate() {
        let top = 4 + i64::from(PANEL_H) * index as i64;
        let origin = (i64::from(PANEL_LEFT), top + 10);
        let plot = Plot {
            left: origin.0,
            top: origin.1,
            rows: PANEL_ROWS,
            canvas_w: i64::from(PREVIEW_W),
        };
        let scale = match kind {
            PanelKind::Spectrogram => &spectrum_scale,
            PanelKind::Pulses => &pulse_scale,
        };
        draw_colour_bar(&mut canvas, scale, origin.1, PANEL_ROWS);
        let title = match kind {
            PanelKind::Spectrogram => {
                let axes = IqAxes::of(field);
                paint_grid(&mut canvas, origin, grid, &spectrum_scale);
                let field_boxes = boxes.get(index).map_or(&[][..], Vec::as_slice);
                draw_boxes(&mut canvas, origin, &axes, PANEL_ROWS, field_boxes);
                draw_frequency_ticks(&mut canvas, plot, frequency_axis(&axes));
                draw_time_ticks(&mut canvas, plot, time_axis(&axes));
                let what = rate_and_centre(&axes);
                let room = chars.saturating_sub(what.len() + 1);
                format!("{} {what}", titled(record_id, name, room))
            }
            PanelKind::Pulses => {
                paint_grid(&mut canvas, origin, grid, &pulse_scale);
                let pulses = field.shape.split_last().map_or(0, |(_, lead)| {
                    lead.iter().fold(1u64, |n, &d| n.saturating_mul(d))
                });
                let beat = (1.0, 0.0, "BEAT FREQUENCY CYCLES/SAMPLE");
                draw_frequency_ticks(&mut canvas, plot, beat);
                draw_time_ticks(&mut canvas, plot, (pulses as f64, "PULSE"));
                format!("{} PULSES", titled(record_id, name, chars - 7))
            }
        };
        canvas.text((2, top + 2), &title, chars, INK);
    }
    Ok(canvas.to_palette_png(&palette()))
}

/// `<record id> <field>` in `chars` characters: the field's end kept (paths are told apart by
/// their ends), then the record id's start.
fn titled(record_id: &str, name: &str, chars: usize) -> String {
    let field = tail(name, chars);
    let room = chars.saturating_sub(field.chars().count() + 1);
    let id: String = record_id.chars().take(room).collect();
    if id.is_empty() {
        field.to_string()
    } else {
        format!("{id} {field}")
    }
}

/// The field's rate and centre as a title says them: `1 MS/S AT 2400 MHZ`, `250 KS/S`,
/// `NO RATE`; numbers with the digits they need (six significant at most).
fn rate_and_centre(axes: &IqAxes) -> String {
    let rate = match axes.rate_hz {
        Some(rate) => si(rate, "S/S"),
        None => "NO RATE".to_string(),
    };
    match axes.center_hz {
        Some(centre) => format!("{rate} AT {}", si(centre, "HZ")),
        None => rate,
    }
}

/// `value` with an SI prefix (K, M, G) and `unit`, six significant digits at most, trailing
/// zeros dropped; extreme values in exponent form.
fn si(value: f64, unit: &str) -> String {
    if !value.is_finite() {
        return format!("? {unit}");
    }
    let (scaled, prefix) = [(1e9, "G"), (1e6, "M"), (1e3, "K")]
        .iter()
        .find(|(scale, _)| value.abs() >= *scale)
        .map_or((value, ""), |(scale, prefix)| (value / scale, *prefix));
    if scaled.abs() >= 1e6 || (scaled != 0.0 && scaled.abs() < 1e-3) {
        return format!("{value:.3e} {unit}");
    }
    let digits = (5 - scaled.abs().max(1.0).log10().floor() as i32).clamp(0, 6) as usize;
    let text = format!("{scaled:.digits$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text} {prefix}{unit}")
}

/// The last `chars` characters of `text` (paths are told apart by their ends).
fn tail(text: &str, chars: usize) -> &str {
    let count = text.chars().count();
    let skip = count.saturating_sub(chars);
    text.char_indices()
        .nth(skip)
        .map_or("", |(at, _)| &text[at..])
}

/// A `rows × columns` grid of dB values, row-major.
struct Grid {
    columns: usize,
    cells: Vec<f32>,
}

/// Power in dB per time row and frequency bin (zero frequency in the middle) of the complex64
/// field `name` of `samples` samples.
fn power_grid(name: &str, samples: u64, rows: u32, read: &ReadField) -> Result<Grid, FsError> {
    let mut cells = Vec::with_capacity(rows as usize * FFT_LEN);
    for row in 0..u64::from(rows) {
        if row % INTERRUPT_ROWS == 0 {
            interrupt::check()?;
        }
        let starts = window_starts(samples, row, u64::from(rows));
        cells.extend(mean_spectrum(name, (0, samples), &starts, read)?);
    }
    Ok(Grid {
        columns: FFT_LEN,
        cells,
    })
}

/// The mean power spectrum in dB (fftshifted: zero frequency in the middle) of the Hann-windowed
/// FFTs of field `name` starting at `starts`, samples counted from `base`, none read at or past
/// sample `base + end` (a window running past it is zero-padded).
fn mean_spectrum(
    name: &str,
    (base, end): (u64, u64),
    starts: &[u64],
    read: &ReadField,
) -> Result<Vec<f32>, FsError> {
    let mut power = [0f64; FFT_LEN];
    for &start in starts {
        let take = end.saturating_sub(start).min(FFT_LEN as u64) as usize;
        let offset = base
            .checked_add(start)
            .and_then(|sample| sample.checked_mul(BYTES_PER_SAMPLE))
            .ok_or_else(|| FsError::failed("sample offset overflows"))?;
        let bytes = read(name, offset, take * BYTES_PER_SAMPLE as usize)?;
        let spectrum = fft(&windowed(&bytes));
        for (bin, value) in spectrum.iter().enumerate() {
            // fftshift: bin 0 (zero frequency) goes to the middle column.
            power[(bin + FFT_LEN / 2) % FFT_LEN] += value.0 * value.0 + value.1 * value.1;
        }
    }
    let windows = starts.len().max(1) as f64;
    Ok(power
        .iter()
        .map(|p| (10.0 * (p / windows + 1e-30).log10()) as f32)
        .collect())
}

/// The first samples of the FFT windows of time row `row` of `rows` over `samples` samples:
/// one window centred on a short span, up to [`MAX_WINDOWS`] spread over a long one.
fn window_starts(samples: u64, row: u64, rows: u64) -> Vec<u64> {
    let n = FFT_LEN as u64;
    let at = |r: u64| (u128::from(samples) * u128::from(r) / u128::from(rows.max(1))) as u64;
    let (begin, end) = (at(row), at(row + 1));
    let last_start = samples.saturating_sub(n);
    let span = end.saturating_sub(begin);
    if span <= n {
        let centre = begin + span / 2;
        return vec![centre.saturating_sub(n / 2).min(last_start)];
    }
    let count = (span / n).min(MAX_WINDOWS);
    let room = u128::from(span - n);
    (0..count)
        .map(|i| {
            // In u128: `room * i` overflows u64 for a span near 2^64.
            let step = room * u128::from(i) / u128::from((count - 1).max(1));
            (begin + step as u64).min(last_start)
        })
        .collect()
}

/// Little-endian complex64 samples (zero-padded to [`FFT_LEN`]) times a Hann window.
fn windowed(bytes: &[u8]) -> Vec<(f64, f64)> {
    let mut out = vec![(0.0, 0.0); FFT_LEN];
    for (index, (re, im)) in samples(bytes).into_iter().take(FFT_LEN).enumerate() {
        let phase = 2.0 * std::f64::consts::PI * index as f64 / FFT_LEN as f64;
        let hann = 0.5 - 0.5 * phase.cos();
        out[index] = (re * hann, im * hann);
    }
    out
}

/// Little-endian complex64 samples, non-finite parts as 0 (a hostile NaN must not blank the
/// whole picture through the normalisation).
fn samples(bytes: &[u8]) -> Vec<(f64, f64)> {
    let part = |b: &[u8]| {
        let v = f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        if v.is_finite() {
            v
        } else {
            0.0
        }
    };
    bytes
        .chunks_exact(8)
        .map(|c| (part(&c[..4]), part(&c[4..])))
        .collect()
}

/// The discrete Fourier transform of `input` (length a power of two): iterative radix-2.
fn fft(input: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let n = input.len();
    let bits = n.trailing_zeros();
    let mut data: Vec<(f64, f64)> = (0..n)
        .map(|i| input[i.reverse_bits() >> (usize::BITS - bits) & (n - 1)])
        .collect();
    let mut size = 2;
    while size <= n {
        let step = -2.0 * std::f64::consts::PI / size as f64;
        for start in (0..n).step_by(size) {
            for k in 0..size / 2 {
                let (sin, cos) = (step * k as f64).sin_cos();
                let (a, b) = (data[start + k], data[start + k + size / 2]);
                let twisted = (b.0 * cos - b.1 * sin, b.0 * sin + b.1 * cos);
                data[start + k] = (a.0 + twisted.0, a.1 + twisted.1);
                data[start + k + size / 2] = (a.0 - twisted.0, a.1 - twisted.1);
            }
        }
        size *= 2;
    }
    data
}

/// The pulses of a pulsed field as a range-time picture: [`PANEL_ROWS`] rows sampled from its
/// pulse rows (every axis but the last flattened), each the fast-time power spectrum of its
/// pulse (what [`mean_spectrum`] gives for up to [`MAX_WINDOWS`] windows spread over the
/// pulse), so a beat tone (a target's range) is a bright column and noise is speckle.
fn pulse_grid(name: &str, shape: &[u64], read: &ReadField) -> Result<Grid, FsError> {
    let (fast, leading) = shape
        .split_last()
        .ok_or_else(|| FsError::failed("pulsed field without axes"))?;
    let pulses = leading
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| FsError::failed("pulse count overflows"))?;
    let starts = window_starts(*fast, 0, 1);
    let mut cells = Vec::with_capacity(PANEL_ROWS as usize * FFT_LEN);
    let mut last: Option<(u64, Vec<f32>)> = None;
    for row in 0..u64::from(PANEL_ROWS) {
        if row % INTERRUPT_ROWS == 0 {
            interrupt::check()?;
        }
        let pulse = (u128::from(pulses) * u128::from(row) / u128::from(PANEL_ROWS)) as u64;
        if last.as_ref().map(|(p, _)| *p) != Some(pulse) {
            let base = pulse
                .checked_mul(*fast)
                .ok_or_else(|| FsError::failed("pulse offset overflows"))?;
            let mut spectrum = mean_spectrum(name, (base, *fast), &starts, read)?;
            without_dc(&mut spectrum);
            last = Some((pulse, spectrum));
        }
        if let Some((_, values)) = &last {
            cells.extend_from_slice(values);
        }
    }
    Ok(Grid {
        columns: FFT_LEN,
        cells,
    })
}

/// The zero-frequency bin of a pulse's spectrum (the middle column) replaced by its
/// neighbours' mean: a receiver's DC offset is not a target, and as the strongest cell it
/// would set the scale and leave the beat tones and the noise dark.
fn without_dc(spectrum: &mut [f32]) {
    let middle = FFT_LEN / 2;
    if let (Some(&left), Some(&right)) = (spectrum.get(middle - 1), spectrum.get(middle + 1)) {
        if let Some(dc) = spectrum.get_mut(middle) {
            *dc = (left + right) / 2.0;
        }
    }
}

/// Paints `grid` with its top-left at `origin`, in the colours of `scale`.
fn paint_grid(canvas: &mut Canvas, origin: (i64, i64), grid: &Grid, scale: &Scale) {
    for (index, value) in grid.cells.iter().enumerate() {
        let (row, column) = (index / grid.columns, index % grid.columns);
        canvas.set(
            origin.0 + column as i64,
            origin.1 + row as i64,
            colour(scale.level(*value)),
        );
    }
}

/// The colour bar right of a plot whose top is at `top`, `rows` high: the scale from its top
/// to its bottom, ticks every 10 dB over the noise floor labelled in dB (`+20`, `0`), "DB"
/// above.
fn draw_colour_bar(canvas: &mut Canvas, scale: &Scale, top: i64, rows: u32) {
    let left = i64::from(BAR_LEFT);
    let rows = i64::from(rows);
    for y in 0..rows {
        let level = 1.0 - y as f32 / (rows - 1) as f32;
        canvas.fill(
            (left, top + y),
            (left + i64::from(BAR_W), top + y + 1),
            colour(level),
        );
    }
    let label_x = left + i64::from(BAR_W) + 3;
    canvas.text((label_x, top - 8), "DB", 2, INK);
    let over_floor = |level: f32| scale.bottom_db + level * scale.range_db - scale.floor_db;
    let first = (over_floor(0.0) / 10.0).ceil() as i64;
    let last = (over_floor(1.0) / 10.0).floor() as i64;
    for tick in first..=last {
        let db = tick as f32 * 10.0;
        let level = (db + scale.floor_db - scale.bottom_db) / scale.range_db;
        let y = top + ((1.0 - level) * (rows - 1) as f32).round() as i64;
        canvas.fill((left - 2, y), (left, y + 1), INK);
        let text = if tick > 0 {
            format!("+{}", tick * 10)
        } else {
            format!("{}", tick * 10)
        };
        canvas.text((label_x, y - 2), &text, BAR_LABEL_CHARS as usize, INK);
    }
}

/// The colour map at `level` in `0..=1`, quantized to one of its [`MAP_LEVELS`] levels (the
/// palette's entries).
pub fn colour(level: f32) -> Rgb {
    let steps = (MAP_LEVELS - 1) as f32;
    let level = if level.is_nan() {
        0.0
    } else {
        level.clamp(0.0, 1.0)
    };
    map_colour((level * steps).round() / steps)
}

/// The colour map at `level` in `0..=1`, interpolated between its stops.
fn map_colour(level: f32) -> Rgb {
    let pair = STOPS
        .windows(2)
        .find(|pair| level <= pair[1].0)
        .unwrap_or(&STOPS[3..5]);
    let ((low, from), (high, to)) = (pair[0], pair[1]);
    let t = ((level - low) / (high - low)).clamp(0.0, 1.0);
    let mix = |a: u8, b: u8| (f32::from(a) + (f32::from(b) - f32::from(a)) * t).round() as u8;
    [
        mix(from[0], to[0]),
        mix(from[1], to[1]),
        mix(from[2], to[2]),
    ]
}

/// Each box as an outline one pixel around it on the plot at `origin` (the box's own pixels
/// keep the signal), named above (or below, at the plot's top) by its label.
fn draw_boxes(
    canvas: &mut Canvas,
    origin: (i64, i64),
    axes: &IqAxes,
    rows: u32,
    boxes: &[Annotation],
) {
    for annotation in boxes {
        let Some(rect) = box_rect(axes, rows, annotation) else {
            continue;
        };
        let ((x0, y0), (x1, y1)) = rect;
        let at = |x: i64, y: i64| (origin.0 + x, origin.1 + y);
        // Around the box, not on it: the signal at its edges stays visible.
        canvas.outline(at(x0 - 1, y0 - 1), at(x1 + 1, y1 + 1), BOX);
        let label = annotation.label.as_deref().unwrap_or("BOX");
        let label_y = if y0 > i64::from(GLYPH_H) + 1 {
            y0 - 1 - i64::from(GLYPH_H)
        } else {
            y1 + 2
        };
        let room = (FFT_LEN as i64 - x0).max(0) as usize / GLYPH_W as usize;
        canvas.text(at(x0, label_y), label, room, BOX);
    }
}

/// A box's pixel rectangle on a plot of [`FFT_LEN`] × `rows` (`[x0, x1) × [y0, y1)`, at least
/// one pixel each way, clipped), or `None` when it misses the plot or the rate is unknown.
fn box_rect(axes: &IqAxes, rows: u32, box_: &Annotation) -> Option<((i64, i64), (i64, i64))> {
    let left = axes.column_of(box_.freq_lower_edge)?.floor();
    let right = axes.column_of(box_.freq_upper_edge)?.ceil();
    let top = axes.row_of(box_.sample_start, rows).floor();
    let end = box_.sample_start.saturating_add(box_.sample_count);
    let bottom = axes.row_of(end, rows).ceil();
    if [left, right, top, bottom].iter().any(|v| v.is_nan()) {
        return None;
    }
    let clip = |v: f64, max: u32| v.clamp(0.0, f64::from(max)) as i64;
    let (x0, x1) = (clip(left, FFT_LEN as u32), clip(right, FFT_LEN as u32));
    let (y0, y1) = (clip(top, rows), clip(bottom, rows));
    let misses = right < 0.0 || left > FFT_LEN as f64 || bottom < 0.0 || top > f64::from(rows);
    (!misses).then_some(((x0, y0), (x1.max(x0 + 1), y1.max(y0 + 1))))
}

/// Five frequency ticks under the plot, across `span` around `base` (see [`frequency_axis`]),
/// the axis name `unit` at the bottom right.
fn draw_frequency_ticks(canvas: &mut Canvas, plot: Plot, (span, base, unit): (f64, f64, &str)) {
    let decimals = decimals_for(span / 4.0, base - span / 2.0);
    let below = plot.top + i64::from(plot.rows);
    for tick in 0..=4i64 {
        let x = plot.left + (tick * 64).min(FFT_LEN as i64 - 1);
        canvas.fill((x, below), (x + 1, below + 3), INK);
        let value = base + span * (tick as f64 / 4.0 - 0.5);
        // A label that cannot be written in the room between ticks is left out.
        let Some(text) = tick_text(value, decimals, FREQUENCY_TICK_CHARS) else {
            continue;
        };
        let width = text.len() as i64 * i64::from(GLYPH_W);
        let left = (x - width / 2).clamp(0, plot.canvas_w - width);
        canvas.text((left, below + 4), &text, FREQUENCY_TICK_CHARS, INK);
    }
    let width = unit.len() as i64 * i64::from(GLYPH_W);
    canvas.text((plot.canvas_w - width - 2, below + 11), unit, 40, INK);
}

/// What a field's frequency axis shows: its span and centre, in MHz (offsets from the centre
/// without one), or cycles per sample without a rate; and the axis's name.
fn frequency_axis(axes: &IqAxes) -> (f64, f64, &'static str) {
    match axes.rate_hz {
        Some(rate) => (
            rate / 1e6,
            axes.center_hz.unwrap_or(0.0) / 1e6,
            if axes.center_hz.is_some() {
                "FREQUENCY MHZ"
            } else {
                "OFFSET FROM CENTRE MHZ"
            },
        ),
        None => (1.0, 0.0, "FREQUENCY CYCLES/SAMPLE"),
    }
}

/// What a field's time axis shows: its length in milliseconds (samples without a rate), and
/// the axis's name.
fn time_axis(axes: &IqAxes) -> (f64, &'static str) {
    match axes.rate_hz {
        Some(rate) => (axes.samples as f64 / rate * 1e3, "TIME MS"),
        None => (axes.samples as f64, "TIME SAMPLES"),
    }
}

/// Five ticks left of the plot from 0 to `total` (its rows evenly), the axis's name at the
/// bottom left.
fn draw_time_ticks(canvas: &mut Canvas, plot: Plot, (total, unit): (f64, &str)) {
    let decimals = decimals_for(total / 4.0, 0.0);
    let chars = (plot.left / i64::from(GLYPH_W) - 1).max(0) as usize;
    let last = i64::from(plot.rows) - 1;
    for tick in 0..=4i64 {
        let y = plot.top + (tick * i64::from(plot.rows) / 4).min(last);
        canvas.fill((plot.left - 3, y), (plot.left, y + 1), INK);
        if let Some(text) = tick_text(total * tick as f64 / 4.0, decimals, chars) {
            canvas.text((1, y - 2), &text, chars, INK);
        }
    }
    let below = plot.top + i64::from(plot.rows);
    canvas.text((2, below + 11), unit, 16, INK);
}

/// Where a plot lies on its canvas, for its axes.
#[derive(Debug, Clone, Copy)]
struct Plot {
    left: i64,
    top: i64,
    rows: u32,
    canvas_w: i64,
}

/// Characters of a frequency tick's label: the labels of neighbouring ticks, 64 pixels apart,
/// do not touch.
const FREQUENCY_TICK_CHARS: usize = 15;

/// `value` in at most `max` characters: with `decimals` decimals when that fits and does not
/// show a value that is not zero as zero, else in exponent form with as many digits as fit
/// (`1.23e94`); `None` when it is not finite or nothing fits (the label is left out, never
/// cut: a cut number reads as another number).
fn tick_text(value: f64, decimals: usize, max: usize) -> Option<String> {
    if !value.is_finite() {
        return None;
    }
    let fixed = format!("{value:.decimals$}");
    let smallest_shown = 0.5 * 10f64.powi(-(decimals as i32));
    if fixed.len() <= max && (value == 0.0 || value.abs() >= smallest_shown) {
        return Some(fixed);
    }
    (0..=3)
        .rev()
        .map(|precision| format!("{value:.precision$e}"))
        .find(|text| text.len() <= max)
}

/// The fewest decimals (0 to 6) that write ticks from `first` every `step` exactly: `5` ms
/// steps need none, `0.25` MHz two; a value finer than a millionth is rounded at 6.
fn decimals_for(step: f64, first: f64) -> usize {
    if !(step.is_finite() && step > 0.0 && first.is_finite()) {
        return 0;
    }
    let exact = |value: f64, decimals: i32| {
        let scaled = value * 10f64.powi(decimals);
        (scaled - scaled.round()).abs() <= 1e-6 * scaled.abs().max(1.0)
    };
    (0..=6)
        .find(|&d| exact(step, d) && exact(first, d))
        .unwrap_or(6) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(samples: usize, cycles_per_sample: f64) -> Vec<u8> {
        (0..samples)
            .flat_map(|i| {
                let phase = 2.0 * std::f64::consts::PI * cycles_per_sample * i as f64;
                let (re, im) = (phase.cos() as f32, phase.sin() as f32);
                [re.to_le_bytes(), im.to_le_bytes()].concat()
            })
            .collect()
    }

    fn reader(data: Vec<u8>) -> impl Fn(&str, u64, usize) -> Result<Bytes, FsError> {
        let data = Bytes::from(data);
        move |_, offset, len| {
            let start = (offset as usize).min(data.len());
            Ok(data.slice(start..(start + len).min(data.len())))
        }
    }

    #[test]
    fn fft_of_a_tone_peaks_at_its_bin() {
        // A tone of 1/8 cycle per sample is bin 32 of 256, by hand.
        let bytes = tone(FFT_LEN, 0.125);
        let spectrum = fft(&windowed(&bytes));
        let peak = (0..FFT_LEN)
            .max_by(|&a, &b| {
                let p = |i: usize| spectrum[i].0.hypot(spectrum[i].1);
                p(a).total_cmp(&p(b))
            })
            .unwrap();
        assert_eq!(peak, 32);
    }

    #[test]
    fn grid_places_the_tone_right_of_centre() {
        let read = reader(tone(10_000, 0.25));
        let grid = power_grid("x", 10_000, 4, &read).unwrap();
        let row = &grid.cells[..FFT_LEN];
        let peak = (0..FFT_LEN)
            .max_by(|&a, &b| row[a].total_cmp(&row[b]))
            .unwrap();
        // +1/4 cycle per sample is a quarter of the plot right of the middle column.
        assert_eq!(peak, FFT_LEN / 2 + FFT_LEN / 4);
    }

    #[test]
    fn windows_stay_inside_and_are_bounded() {
        assert_eq!(window_starts(10, 0, 256), vec![0]);
        assert_eq!(window_starts(1000, 255, 256), vec![744]);
        let many = window_starts(u64::MAX / 16, 3, 256);
        assert_eq!(many.len() as u64, MAX_WINDOWS);
        assert!(many.windows(2).all(|w| w[0] < w[1]));
    }

    /// A reader of zeros that counts the bytes asked for.
    fn counting(
        asked: &std::cell::Cell<u64>,
    ) -> impl Fn(&str, u64, usize) -> Result<Bytes, FsError> + '_ {
        move |_, _, len| {
            asked.set(asked.get() + len as u64);
            Ok(Bytes::from(vec![0u8; len]))
        }
    }

    #[test]
    fn a_huge_field_is_read_within_the_bound() {
        // By hand: 256 rows × 8 windows × 256 samples × 8 bytes = 4 MiB per spectrogram.
        let bound = 256 * 8 * 256 * 8;
        let asked = std::cell::Cell::new(0);
        let axes = IqAxes {
            samples: u64::MAX / 8,
            rate_hz: Some(1e6),
            center_hz: Some(1e9),
        };
        let png = spectrogram_png("r", "iq", &axes, &[], &counting(&asked)).unwrap();
        assert_eq!(png.len() as u64, spectrogram_len());
        assert_eq!(asked.get(), bound);
        // A pulsed field of 2^30 pulses of 2^30 samples: 128 rows of at most 8 windows each.
        asked.set(0);
        let grid = pulse_grid("p", &[1 << 30, 1 << 30], &counting(&asked)).unwrap();
        assert_eq!(grid.cells.len(), 128 * 256);
        assert_eq!(asked.get(), 128 * 8 * 256 * 8);
        // Sample offsets past u64 are an error, not a wrapped read.
        assert!(pulse_grid("p", &[1 << 40, 1 << 40], &counting(&asked)).is_err());
    }

    #[test]
    fn pulses_show_a_beat_tone_as_a_column() {
        // 4 pulses of 400 samples of a tone of -1/8 cycle per sample: a quarter of a half
        // plot left of the middle column (128 - 32), in every row.
        let pulse = tone(400, -0.125);
        let read = reader(pulse.repeat(4));
        let grid = pulse_grid("p", &[4, 400], &read).unwrap();
        for row in grid.cells.chunks(FFT_LEN) {
            let peak = (0..FFT_LEN)
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .unwrap();
            assert_eq!(peak, FFT_LEN / 2 - FFT_LEN / 8);
        }
    }

    #[test]
    fn colour_map_luminance_rises() {
        let luminance =
            |c: Rgb| 299 * u32::from(c[0]) + 587 * u32::from(c[1]) + 114 * u32::from(c[2]);
        let levels: Vec<u32> = (0..=100)
            .map(|i| luminance(colour(i as f32 / 100.0)))
            .collect();
        assert!(levels.windows(2).all(|w| w[0] <= w[1]), "{levels:?}");
        assert_eq!(colour(0.0), [0, 0, 0]);
        assert_eq!(colour(1.0), [255, 255, 210]);
    }

    #[test]
    fn titles_say_the_rate_and_centre_with_the_digits_they_need() {
        let axes = |rate: Option<f64>, centre: Option<f64>| IqAxes {
            samples: 1,
            rate_hz: rate,
            center_hz: centre,
        };
        let cases = [
            (axes(Some(1e6), Some(2.4e9)), "1 MS/S AT 2.4 GHZ"),
            (axes(Some(250e3), Some(433.92e6)), "250 KS/S AT 433.92 MHZ"),
            (axes(Some(30.72e6), None), "30.72 MS/S"),
            (axes(None, Some(915e6)), "NO RATE AT 915 MHZ"),
            (axes(Some(1.7e308), Some(f64::NAN)), "1.700e308 S/S AT ? HZ"),
            (axes(Some(5e-324), Some(-1e6)), "4.941e-324 S/S AT -1 MHZ"),
        ];
        for (axes, want) in cases {
            assert_eq!(rate_and_centre(&axes), want);
        }
        assert_eq!(titled("rec-1", "a/b/iq", 20), "rec-1 a/b/iq");
        assert_eq!(
            titled("a-very-long-record-id", "x/y/iq", 12),
            "a-ver x/y/iq"
        );
        assert_eq!(titled("id", "projections/rx/iq", 5), "rx/iq");
    }

    #[test]
    fn a_box_is_outlined_around_its_pixels_not_on_them() {
        let signal = colour(0.8);
        let mut canvas = Canvas::new(300, 300, signal);
        let axes = IqAxes {
            samples: 256,
            rate_hz: Some(256.0),
            center_hz: Some(0.0),
        };
        // Samples [100, 150) and -28..-8 Hz: plot rows 100..150, columns 100..120.
        let annotation = Annotation {
            sample_start: 100,
            sample_count: 50,
            freq_lower_edge: -28.0,
            freq_upper_edge: -8.0,
            label: None,
            comment: None,
        };
        draw_boxes(&mut canvas, (10, 10), &axes, 256, &[annotation]);
        for (x, y) in [(100, 100), (119, 100), (100, 149), (119, 149), (110, 120)] {
            assert_eq!(
                canvas.pixel(10 + x, 10 + y),
                Some(signal),
                "box pixel ({x}, {y})"
            );
        }
        for (x, y) in [
            (99, 99),
            (120, 150),
            (99, 120),
            (120, 120),
            (110, 99),
            (110, 150),
        ] {
            assert_eq!(
                canvas.pixel(10 + x, 10 + y),
                Some(BOX),
                "ring pixel ({x}, {y})"
            );
        }
    }

    #[test]
    fn extreme_axes_draw_at_the_fixed_size() {
        // Values a careless producer writes: centres and rates far beyond any radio, steps of
        // 1e-300 s (a rate of 1e300), the smallest positive floats; boxes at the extremes.
        let extremes = [1e300, 1e100, 1.7e308, f64::MAX, 5e-324, 1e-300, 1.0];
        let boxes: Vec<Annotation> = [-1e300, 0.0, 1e300, f64::MAX]
            .iter()
            .map(|&hz| Annotation {
                sample_start: u64::MAX / 2,
                sample_count: u64::MAX,
                freq_lower_edge: -hz,
                freq_upper_edge: hz,
                label: Some("L".repeat(300).into()),
                comment: None,
            })
            .collect();
        let asked = std::cell::Cell::new(0);
        for &rate in &extremes {
            for center in [None, Some(1e100), Some(f64::MAX), Some(rate)] {
                let axes = IqAxes {
                    samples: 1,
                    rate_hz: Some(rate),
                    center_hz: center,
                };
                let png = spectrogram_png("r", "iq", &axes, &boxes, &counting(&asked)).unwrap();
                assert_eq!(png.len() as u64, spectrogram_len(), "{axes:?}");
            }
        }
    }

    #[test]
    fn tick_labels_fit_or_are_left_out() {
        assert_eq!(tick_text(2400.5, 1, 15).as_deref(), Some("2400.5"));
        assert_eq!(tick_text(1e94, 0, 15).as_deref(), Some("1.000e94"));
        assert_eq!(tick_text(-1.7e308, 0, 15).as_deref(), Some("-1.700e308"));
        // A value that fixed decimals would show as zero is written with its exponent.
        assert_eq!(tick_text(1e-300, 6, 11).as_deref(), Some("1.000e-300"));
        assert_eq!(tick_text(0.0, 2, 11).as_deref(), Some("0.00"));
        assert_eq!(tick_text(f64::NAN, 2, 11), None);
        assert_eq!(tick_text(f64::INFINITY, 0, 11), None);
        assert_eq!(tick_text(-1.5e-300, 0, 3), None);
    }

    #[test]
    fn spectrogram_has_its_fixed_size_whatever_the_field() {
        let axes = IqAxes {
            samples: 3,
            rate_hz: None,
            center_hz: None,
        };
        let boxes = [Annotation {
            sample_start: 0,
            sample_count: 9,
            freq_lower_edge: f64::NAN,
            freq_upper_edge: 1e300,
            label: Some("é".repeat(500).into()),
            comment: None,
        }];
        let png = spectrogram_png("r", "a/b", &axes, &boxes, &reader(tone(3, 0.1))).unwrap();
        assert_eq!(png.len() as u64, spectrogram_len());
        assert_eq!(decimals_for(0.25, 2399.5), 2);
        assert_eq!(decimals_for(250.0, 0.0), 0);
        // The decimals the ticks need, no more: 5 ms steps, 1 pulse, 0.5 MHz around 915.
        assert_eq!(decimals_for(5.0, 0.0), 0);
        assert_eq!(decimals_for(1.0, 0.0), 0);
        assert_eq!(decimals_for(0.5, 914.0), 1);
        assert_eq!(decimals_for(0.0625, 433.795), 4);
        assert_eq!(decimals_for(1.0 / 3.0, 0.0), 6);
        assert_eq!(decimals_for(f64::NAN, 0.0), 0);
        assert_eq!(tail("abcdef", 3), "def");
    }
}
