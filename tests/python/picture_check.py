"""Checks a mount's pictures against the signal-dataset library's reading of the dataset.

Usage: picture_check.py DATASET MOUNT
  -> one JSON line: {"spectrograms", "boxes", "previews", "panels", "preview_boxes"}; any
     mismatch raises (nonzero exit, the reason on stderr).
       picture_check.py write ROOT SEED
  -> publishes, with the library, records whose IQ holds band-limited bursts exactly inside
     their label boxes over a weak noise floor: receivers at the boxes' rate and at twice it,
     boxes in both frequency frames, a pulsed radar field, a record of nine receivers (more
     than a preview shows) and one with no IQ; prints {"records", "receivers", "boxes"}.

Every PNG is read back whole (its size must be the one `stat` gives), checked by Pillow
(`Image.verify`) and decoded by Pillow. The label boxes are the `.sigmf-meta`'s, computed with
no code of sdsfs by `sigmf_check.expected_annotations`; they are mapped to pixels by the axes
docs/MOUNT.md states ("Pictures"): plot row `r` of `R` covers samples `[r·N/R, (r+1)·N/R)`,
column `c` the frequency `centre + (c − 128) · rate / 256`. For each box the mean luminance
of its interior (two pixels in from the outline) must stand above the mean luminance of the
plot outside every box (boxes grown by two pixels, and by a label's height above and below).
"""
import json
import math
import os
import sys

import numpy as np
import signal_dataset
from PIL import Image

import sigmf_check

SPECTROGRAM = {"size": (353, 292), "origin": (48, 14), "rows": 256}
PREVIEW_W, PANEL_H, PANEL_ROWS, MAX_PANELS = 353, 160, 128, 8
PANEL_LEFT = 48
PLOT_COLUMNS = 256
# The colour bar right of every plot: 8 pixels wide from x = 312, as high as the plot.
BAR_LEFT, BAR_W = 312, 8
LABEL_H = 8


def read_png(path):
    with open(path, "rb") as handle:
        data = handle.read()
    if len(data) != os.stat(path).st_size:
        raise AssertionError(f"{path}: read {len(data)} bytes, stat says {os.stat(path).st_size}")
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        if image.format != "PNG":
            raise AssertionError(f"{path}: {image.format}")
        rgb = np.asarray(image.convert("RGB"), dtype=np.float64)
    return 0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]


def is_pulsed(field):
    data = field.data
    return (data.dtype == np.complex64 and data.ndim >= 2 and min(data.shape) >= 1
            and any(axis.name == "pulse" for axis in field.axes))


def box_pixels(annotation, samples, rate, centre, rows):
    """(x0, y0, x1, y1) of a box on the plot, clipped, or None when it misses it."""
    def column(hz):
        return (hz - centre) / rate * PLOT_COLUMNS + PLOT_COLUMNS / 2

    start = annotation["core:sample_start"]
    end = start + annotation["core:sample_count"]
    x0 = math.floor(column(annotation["core:freq_lower_edge"]))
    x1 = math.ceil(column(annotation["core:freq_upper_edge"]))
    y0 = math.floor(start * rows / samples)
    y1 = math.ceil(end * rows / samples)
    if x1 < 0 or x0 > PLOT_COLUMNS or y1 < 0 or y0 > rows:
        return None
    clip = lambda v, top: min(max(v, 0), top)  # noqa: E731
    return clip(x0, PLOT_COLUMNS), clip(y0, rows), clip(x1, PLOT_COLUMNS), clip(y1, rows)


def check_boxes(where, plot, annotations, samples, rate, centre):
    """Checks every box's energy on `plot` (the plot's pixels); returns the boxes checked."""
    rows = plot.shape[0]
    outside = np.ones(plot.shape, dtype=bool)
    rects = []
    for annotation in annotations:
        rect = box_pixels(annotation, samples, rate, centre, rows)
        if rect is None:
            raise AssertionError(f"{where}: box {annotation} misses the plot")
        x0, y0, x1, y1 = rect
        outside[max(y0 - 2 - LABEL_H, 0):y1 + 2 + LABEL_H, max(x0 - 2, 0):x1 + 2] = False
        rects.append((annotation, rect))
    if not outside.any():
        raise AssertionError(f"{where}: no plot left outside the boxes")
    floor = plot[outside].mean()
    checked = 0
    for annotation, (x0, y0, x1, y1) in rects:
        inner = plot[y0 + 2:y1 - 2, x0 + 2:x1 - 2]
        if inner.size == 0:
            raise AssertionError(f"{where}: box {annotation} has no interior at {x0, y0, x1, y1}")
        if not inner.mean() > floor + 20:
            raise AssertionError(
                f"{where}: box {annotation} at {(x0, y0, x1, y1)}: luminance {inner.mean():.1f}"
                f" inside, {floor:.1f} outside")
        checked += 1
    return checked


def axes_of(field):
    rate = float(field.metadata["time_coordinates"]["sample_rate_hz"])
    return field.data.shape[0], rate, float(field.metadata.get("center_frequency_hz", 0.0))


def check_bar(where, pixels, top, rows):
    """The colour bar beside a plot whose top row is `top`: brightest at the top, darkest at the
    bottom, luminance never rising downwards (the colour map's levels)."""
    bar = pixels[top:top + rows, BAR_LEFT + BAR_W // 2]
    if np.any(np.diff(bar) > 0.5) or bar[0] - bar[-1] < 150:
        raise AssertionError(f"{where}: no colour bar at x={BAR_LEFT} (top {bar[0]:.0f}, bottom {bar[-1]:.0f})")


def check_record(mount, padded, record, counts):
    names = sorted(n for n, f in record.fields.items() if sigmf_check.has_pair(f))
    for name in names:
        path = os.path.join(mount, "records", padded, "fields", name + ".spectrogram.png")
        pixels = read_png(path)
        if pixels.shape[::-1] != SPECTROGRAM["size"]:
            raise AssertionError(f"{path}: {pixels.shape[::-1]}")
        left, top = SPECTROGRAM["origin"]
        plot = pixels[top:top + SPECTROGRAM["rows"], left:left + PLOT_COLUMNS]
        annotations, _ = sigmf_check.expected_annotations(record, name)
        counts["boxes"] += check_boxes(path, plot, annotations, *axes_of(record.fields[name]))
        check_bar(path, pixels, top, SPECTROGRAM["rows"])
        counts["spectrograms"] += 1
    panels = sorted(n for n, f in record.fields.items()
                    if sigmf_check.has_pair(f) or is_pulsed(f))[:MAX_PANELS]
    path = os.path.join(mount, "records", padded, "preview.png")
    pixels = read_png(path)
    want = (PREVIEW_W, 4 + PANEL_H * max(len(panels), 1))
    if pixels.shape[::-1] != want:
        raise AssertionError(f"{path}: {pixels.shape[::-1]}, want {want} for panels {panels}")
    for index, name in enumerate(panels):
        top = 4 + PANEL_H * index + 10
        check_bar(f"{path} panel {index}", pixels, top, PANEL_ROWS)
        if not sigmf_check.has_pair(record.fields[name]):
            continue
        plot = pixels[top:top + PANEL_ROWS, PANEL_LEFT:PANEL_LEFT + PLOT_COLUMNS]
        annotations, _ = sigmf_check.expected_annotations(record, name)
        counts["preview_boxes"] += check_boxes(
            f"{path} panel {index}", plot, annotations, *axes_of(record.fields[name]))
    counts["previews"] += 1
    counts["panels"] += len(panels)


def main(root, mount):
    dataset = signal_dataset.open(root)
    width = len(str(max(len(dataset) - 1, 0)))
    counts = {"spectrograms": 0, "boxes": 0, "previews": 0, "panels": 0, "preview_boxes": 0}
    for ordinal in range(len(dataset)):
        check_record(mount, f"{ordinal:0{width}d}", dataset[ordinal], counts)
    print(json.dumps(counts))


def burst(rng, samples, start, end, low, high):
    """Complex noise of unit power limited to `[low, high)` cycles per sample, on `[start, end)`."""
    out = np.zeros(samples, dtype=np.complex128)
    length = end - start
    noise = rng.standard_normal(length) + 1j * rng.standard_normal(length)
    spectrum = np.fft.fft(noise)
    frequencies = np.fft.fftfreq(length)
    spectrum[(frequencies < low) | (frequencies >= high)] = 0
    shaped = np.fft.ifft(spectrum)
    out[start:end] = shaped / max(np.sqrt(np.mean(np.abs(shaped) ** 2)), 1e-12)
    return out


def iq_field(data, rate, center):
    block = {"kind": "uniform", "sample_rate_hz": rate, "origin_s": 0.0, "axis": "time",
             "count": len(data)}
    return signal_dataset.Field(
        data=data.astype(np.complex64),
        axes=(signal_dataset.Axis(name="time", length=len(data)),),
        metadata={"time_coordinates": block, "center_frequency_hz": center})


def labelled_record(rng, index, receivers):
    """A record of `receivers` receivers (rates 1x, 2x, 1x, ...) and 1 to 3 boxes."""
    rate, center, samples = float(rng.choice([1e6, 2e6])), float(rng.choice([915e6, 2.4e9])), 8192
    absolute = index % 2 == 1
    rows, spans = [], []
    for box in range(int(rng.integers(1, 4))):
        # Boxes in separate thirds of the capture, so that none overlaps another.
        start = box * 2700 + int(rng.integers(0, 400))
        duration = int(rng.integers(800, 1600))
        low = float(rng.integers(-45, 20)) / 100.0
        width = float(rng.integers(8, 25)) / 100.0
        rows.append([start, duration, low * rate + (center if absolute else 0.0),
                     (low + width) * rate + (center if absolute else 0.0)])
        spans.append((start, duration, low, low + width))
    fields = {}
    for rx in range(receivers):
        ratio = 2 if rx % 2 == 1 else 1
        length = samples * ratio
        data = 0.001 * (rng.standard_normal(length) + 1j * rng.standard_normal(length))
        for start, duration, low, high in spans:
            first, end = start * ratio, (start + duration) * ratio
            data += burst(rng, length, first, end, low / ratio, high / ratio)
        fields[f"p/receivers/rx{rx}/iq"] = iq_field(data, rate * ratio, center)
    frame = {"frequency_frame": "absolute" if absolute else "receiver_center_offset",
             "time_frame": "receiver_sample_index", "sample_rate_hz": rate}
    if not absolute:
        frame["receiver_center_hz"] = center
    count = len(rows)
    fields["p/labels/boxes/extent"] = signal_dataset.Field(
        data=np.array(rows, dtype=np.float64),
        axes=(signal_dataset.Axis(name="box", length=count),
              signal_dataset.Axis(name="extent", length=4)),
        metadata=frame)
    ids = np.array([[1, i] for i in range(count)], dtype=np.int32).reshape(count, 2)
    fields["p/labels/boxes/identity"] = signal_dataset.Field(
        data=ids,
        axes=(signal_dataset.Axis(name="box", length=count),
              signal_dataset.Axis(name="attribute", length=2)),
        metadata={"class_names": {"1": "burst"}})
    return fields, count


def pulsed_field(rng):
    pulses, fast = 6, 300
    beat = np.exp(2j * np.pi * 0.2 * np.arange(fast))
    data = np.stack([beat + 0.01 * rng.standard_normal(fast) for _ in range(pulses)])
    return signal_dataset.Field(
        data=data.astype(np.complex64),
        axes=(signal_dataset.Axis(name="pulse", length=pulses),
              signal_dataset.Axis(name="fast_time_sample", length=fast)))


def write(root, seed):
    rng = np.random.default_rng(seed)
    records, receivers, boxes = [], 0, 0
    for index, count in enumerate([1, 2, 3, 9]):
        fields, labelled = labelled_record(rng, index, count)
        if index == 2:
            fields["radar/baseband"] = pulsed_field(rng)
        records.append(signal_dataset.Record(id=f"pic-{index}", fields=fields, scene_id="s"))
        receivers += count
        boxes += labelled * count
    plain = {"other/values": signal_dataset.Field(
        data=np.arange(16, dtype=np.float32),
        axes=(signal_dataset.Axis(name="value", length=16),))}
    records.append(signal_dataset.Record(id="pic-plain", fields=plain, scene_id="s"))
    receipt = signal_dataset.write_shard(records, str(root), work_id="w0", attempt=0)
    signal_dataset.publish(str(root), [receipt], dataset_id="pictures", snapshot_id="s1",
                           expected_work_ids=["w0"])
    print(json.dumps({"records": len(records), "receivers": receivers, "boxes": boxes}))


def panels(path):
    """A preview's panels, top to bottom: the mean luminance of each, and of its brightest
    column (a tone's); the PNG's mode and size."""
    pixels = read_png(path)
    mean, peak = [], []
    for index in range(MAX_PANELS):
        top = 4 + PANEL_H * index + 10
        plot = pixels[top:top + PANEL_ROWS, PANEL_LEFT:PANEL_LEFT + PLOT_COLUMNS]
        if plot.shape[0] < PANEL_ROWS:
            break
        mean.append(round(float(plot.mean()), 2))
        peak.append(round(float(plot.mean(axis=0).max()), 2))
    with Image.open(path) as image:
        mode = image.mode
    return {"luminance": mean, "peak": peak, "mode": mode, "bytes": os.stat(path).st_size}


if __name__ == "__main__":
    if sys.argv[1] == "panels":
        print(json.dumps(panels(sys.argv[2])))
        sys.exit(0)
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
    else:
        main(sys.argv[1], sys.argv[2])
