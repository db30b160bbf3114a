"""The SigMF round trip (`sds create --from-sigmf`, then the mount), checked with the `sigmf`
library and the input files as the truth, and the label boxes with the `signal-dataset` library.

    sigmf_round_trip.py make DIR
        writes realistic recordings with the sigmf library (validated as they are written) and
        prints their base paths, one a line
    sigmf_round_trip.py check DATASET INPUT_META MOUNTED_META ORDINAL [INPUT_META ...]
        for each input: the mounted `.sigmf-meta` validates; it holds every key of the input's
        global (but the layout keys; `core:datatype` is the mount's `cf32_le`), every input
        extension, the captures in order, each annotation one for one (same start, all keys,
        values equal); the mounted `.sigmf-data` holds the input's samples (integers
        unscaled); the dataset's record ORDINAL has, read by signal-dataset, one label box per
        input annotation with both frequency edges. Prints one summary line per recording.
"""

import json
import sys
from pathlib import Path

import numpy as np
import sigmf
from sigmf import SigMFFile

LAYOUT_KEYS = {
    "core:sha512",
    "core:dataset",
    "core:metadata_only",
    "core:offset",
    "core:trailing_bytes",
    "core:num_channels",
}


def tone(n, cycles, amplitude, phase=0.0):
    t = np.arange(n)
    return amplitude * np.exp(1j * (2 * np.pi * cycles * t / n + phase))


def survey(out):
    """ci16_le, three captures at different frequencies, an extension namespace, overlapping
    annotations, some without frequency edges or without a label, Unicode comments."""
    n = 12000
    rng = np.random.default_rng(7)
    iq = tone(n, 300, 9000) + rng.normal(0, 200, n) + 1j * rng.normal(0, 200, n)
    ints = np.empty(2 * n, dtype="<i2")
    ints[0::2] = np.clip(np.round(iq.real), -32768, 32767)
    ints[1::2] = np.clip(np.round(iq.imag), -32768, 32767)
    data = out / "survey_ci16.sigmf-data"
    ints.tofile(data)
    meta = SigMFFile(
        data_file=str(data),
        global_info={
            sigmf.DATATYPE_KEY: "ci16_le",
            sigmf.SAMPLE_RATE_KEY: 2_000_000,
            sigmf.AUTHOR_KEY: "Ada Field <ada@example.org>",
            sigmf.DESCRIPTION_KEY: "Band survey, roof antenna — pass 3",
            sigmf.HW_KEY: "USRP B210, 30 dB LNA",
            sigmf.RECORDER_KEY: "gr-sigmf 1.0",
            sigmf.LICENSE_KEY: "https://creativecommons.org/licenses/by/4.0/",
            sigmf.NUM_CHANNELS_KEY: 1,
            sigmf.GEOLOCATION_KEY: {"type": "Point", "coordinates": [-77.03, 38.89, 12.5]},
            sigmf.EXTENSIONS_KEY: [{"name": "antenna", "version": "1.0.0", "optional": True}],
            "antenna:gain": 2.5,
            "antenna:type": "dipole",
        },
    )
    meta.add_capture(0, {sigmf.FREQUENCY_KEY: 915e6, sigmf.DATETIME_KEY: "2026-03-04T05:06:07.25Z"})
    meta.add_capture(4000, {sigmf.FREQUENCY_KEY: 2.437e9, sigmf.DATETIME_KEY: "2026-03-04T05:06:07.252Z"})
    meta.add_capture(9000, {sigmf.FREQUENCY_KEY: 5.8e9, "core:global_index": 9000})
    annotations = [
        (100, 900, {"core:freq_lower_edge": 914.9e6, "core:freq_upper_edge": 915.1e6, "core:label": "lora",
                    "core:comment": "chirp 1 — 上行", "core:uuid": "3f1c9e4a-7d2b-4c1e-9a55-0b6f2e1d8c70"}),
        (500, 1000, {"core:freq_lower_edge": 914.95e6, "core:freq_upper_edge": 915.05e6, "core:label": "lora",
                     "core:generator": "detector v2", "antenna:azimuth_angle": 123.5}),
        (500, 20, {"core:comment": "glitch (no edges) ⚡"}),
        (4100, 3000, {"core:freq_lower_edge": 2.426e9, "core:freq_upper_edge": 2.448e9, "core:label": "wifi"}),
        (4100, 3000, {"core:freq_lower_edge": 2.43e9, "core:freq_upper_edge": 2.44e9}),
        (9500, None, {"core:label": "unknown", "core:comment": "until the end"}),
        (11990, 10, {"core:freq_lower_edge": 5.79e9, "core:freq_upper_edge": 5.81e9, "core:label": "radar",
                     "core:comment": "ends at the last sample"}),
    ]
    for start, length, keys in annotations:
        meta.add_annotation(start, length, keys)
    meta.tofile(out / "survey_ci16.sigmf-meta")
    return out / "survey_ci16"


def burst(out):
    """cf32_le, one capture, no extensions, the SigMF 1.2.0 version string, an annotation
    starting at sample 0 and one past the data's end."""
    n = 4096
    iq = (tone(n, 64, 0.5) + tone(n, 900, 0.05, 1.0)).astype(np.complex64)
    data = out / "burst_cf32.sigmf-data"
    iq.tofile(data)
    meta = SigMFFile(
        data_file=str(data),
        global_info={
            sigmf.DATATYPE_KEY: "cf32_le",
            sigmf.SAMPLE_RATE_KEY: 250000.0,
            sigmf.DESCRIPTION_KEY: "two tones",
        },
    )
    meta.add_capture(0, {sigmf.FREQUENCY_KEY: 433.92e6})
    meta.add_annotation(0, 4096, {"core:freq_lower_edge": 433.9e6, "core:freq_upper_edge": 433.94e6,
                                  "core:label": "ook"})
    meta.add_annotation(1000, 200, {"core:freq_lower_edge": 433.8e6, "core:freq_upper_edge": 433.85e6})
    meta.tofile(out / "burst_cf32.sigmf-meta")
    return out / "burst_cf32"


def ci8(out):
    """ci8 with no annotations and no frequency."""
    n = 2000
    raw = np.random.default_rng(3).integers(-128, 128, 2 * n, dtype=np.int64).astype(np.int8)
    data = out / "plain_ci8.sigmf-data"
    raw.tofile(data)
    meta = SigMFFile(data_file=str(data), global_info={sigmf.DATATYPE_KEY: "ci8",
                                                       sigmf.SAMPLE_RATE_KEY: 1e6})
    meta.add_capture(0)
    meta.tofile(out / "plain_ci8.sigmf-meta")
    return out / "plain_ci8"


def make(out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for base in (survey(out), burst(out), ci8(out)):
        print(base)


def input_samples(meta_path):
    """The input's samples as values (integers unscaled), complex128."""
    handle = sigmf.sigmffile.fromfile(str(meta_path), autoscale=False)
    return np.asarray(handle.read_samples(), dtype=np.complex128)


def one_for_one(inputs, mounted, what):
    left = list(mounted)
    for a in inputs:
        match = [m for m in left if all(k in m and m[k] == v for k, v in a.items())]
        assert match, f"{what}: no mounted annotation holds {a}"
        left.remove(match[0])
    assert not left, f"{what}: mounted annotations not in the input: {left}"


def check(dataset, triples):
    import signal_dataset

    library = signal_dataset.open(dataset)
    for input_meta, mounted_meta, ordinal in triples:
        source = json.loads(Path(input_meta).read_text())
        mounted = json.loads(Path(mounted_meta).read_text())
        handle = sigmf.sigmffile.fromfile(mounted_meta, autoscale=False)
        handle.validate()
        what = Path(input_meta).name
        g_in, g_out = source["global"], mounted["global"]
        kept = 0
        for key, value in g_in.items():
            if key in LAYOUT_KEYS:
                assert key not in g_out, f"{what}: layout key {key} kept"
                continue
            if key == "core:datatype":
                assert g_out[key] == "cf32_le", f"{what}: datatype {g_out[key]}"
                continue
            if key == "core:extensions":
                for entry in value:
                    assert entry in g_out[key], f"{what}: extension {entry} lost"
                continue
            assert key in g_out, f"{what}: global key {key} lost"
            assert g_out[key] == value, f"{what}: global {key}: {g_out[key]!r} != {value!r}"
            kept += 1
        assert mounted["captures"] == source["captures"], f"{what}: captures differ"
        one_for_one(source["annotations"], mounted["annotations"], what)
        starts = [a["core:sample_start"] for a in mounted["annotations"]]
        assert starts == sorted(starts), f"{what}: annotations not sorted"
        want = input_samples(input_meta)
        got = np.asarray(handle.read_samples(), dtype=np.complex128)
        assert np.array_equal(want, got), f"{what}: samples differ"
        # The label boxes, as the library reads them: one per annotation with both edges,
        # clipped to the data, named by its label (-1: none).
        record = library[int(ordinal)]
        n = len(want)
        want_boxes = []
        for a in source["annotations"]:
            if "core:freq_lower_edge" not in a or "core:freq_upper_edge" not in a:
                continue
            start = a["core:sample_start"]
            end = min(start + a.get("core:sample_count", n - start), n)
            box = (float(start), float(end - start), a["core:freq_lower_edge"], a["core:freq_upper_edge"])
            want_boxes.append((box, a.get("core:label")))
        got_boxes = []
        if "labels/boxes/extent" in record.fields:
            extent = record.fields["labels/boxes/extent"].data
            identity = record.fields["labels/boxes/identity"]
            names = identity.metadata["class_names"]
            for row, ids in zip(extent, identity.data):
                box = tuple(float(x) for x in row)
                got_boxes.append((box, names.get(str(int(ids[0])))))
        assert sorted(got_boxes, key=repr) == sorted(want_boxes, key=repr), (
            f"{what}: boxes {got_boxes} != {want_boxes}"
        )
        # ... which the mount converts: the lines of columns/labels.jsonl for this record.
        mount = Path(mounted_meta).parents[3]
        lines = [json.loads(line) for line in (mount / "columns" / "labels.jsonl").read_text().splitlines()]
        table = [
            ((float(l["sample_start"]), float(l["sample_count"]), l["freq_lower_edge_hz"],
              l["freq_upper_edge_hz"]), l["label"])
            for l in lines if l["ordinal"] == int(ordinal) and l["field"] == "iq"
        ]
        assert sorted(table, key=repr) == sorted(want_boxes, key=repr), (
            f"{what}: labels.jsonl {table} != {want_boxes}"
        )
        print(
            f"{what}: {kept} global keys, {len(source['captures'])} captures, "
            f"{len(source['annotations'])} annotations, {len(want)} samples, {len(got_boxes)} boxes"
        )


def main():
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "check":
        rest = sys.argv[3:]
        check(sys.argv[2], [rest[i:i + 3] for i in range(0, len(rest), 3)])
    else:
        sys.exit(f"unknown command {sys.argv[1]!r}")


if __name__ == "__main__":
    main()
