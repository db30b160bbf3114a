"""Checks a mount's SigMF documents against the signal-dataset library's reading of the dataset.

Usage: sigmf_check.py DATASET MOUNT
  -> one JSON line: {"metas", "annotations", "record_collections", "scene_collections",
     "left_out"}; any mismatch raises (nonzero exit, the reason on stderr).
       sigmf_check.py validate META...
  -> one JSON line per .sigmf-meta (validated, read by the library): its global and
     annotations.
       sigmf_check.py write ROOT SEED
  -> publishes, with the library, a dataset of RFGen-style records drawn from SEED: one or
     two projections of one to three receivers at assorted rates and centres, boxes in both
     frequency frames with their keys at the top level or nested, at rates that are and are not
     a receiver's, columns in any order, some class names missing and some boxes hostile;
     prints {"records", "receivers"}.

The expected annotations are computed here from the library's record, following the box
convention as docs/MOUNT.md states it ("Labels as SigMF annotations"), with no code of sdsfs:
the frame keys at the extent metadata's top level or under its nested `metadata` key, edges
plus the receiver centre for `receiver_center_offset` (only for a receiver tuned there), as
they are for `absolute`; sample indices scaled by receiver rate / box rate, start rounded down
and end rounded up. A box table that is not float64 `(box, 4..64 columns)`, or an identity table
that is not int32 `(box, 2..64)` with as many boxes, gives none. Boxes with a non-finite number, a negative start, a duration that is not
positive or edges out of order are left out. Every document is validated with the `sigmf`
library's schemas (warnings are errors, so an undeclared extension namespace fails), and every
collection's hashes are recomputed from the files it names.
"""
import hashlib
import json
import math
import os
import sys
import warnings
from collections.abc import Mapping

import numpy as np
import signal_dataset
from sigmf import schema, sigmffile, validate

warnings.simplefilter("error")


def frame_key(metadata, key):
    if key in metadata:
        return metadata[key]
    nested = metadata.get("metadata")
    if isinstance(nested, Mapping):
        return nested.get(key)
    return None


def columns(field, wanted):
    axes = field.axes
    if len(axes) > 1 and axes[1].coordinate is not None and axes[1].coordinate.values:
        names = list(axes[1].coordinate.values)
        return [names.index(w) for w in wanted]
    return list(range(len(wanted)))


def has_pair(field):
    data = field.data
    return data.dtype == np.complex64 and data.ndim == 1 and data.shape[0] >= 1


def table(field, dtype, columns):
    """A box table: `dtype`, rank 2, at least `columns` columns (at most 64)."""
    data = field.data
    return data.dtype == dtype and data.ndim == 2 and columns <= data.shape[1] <= 64


def labels_prefix(record, name):
    """The longest proper prefix of `name` with boxes, the empty one last ("" for top-level
    labels), or None."""
    parts = name.split("/")
    for cut in range(len(parts) - 1, 0, -1):
        prefix = "/".join(parts[:cut])
        if prefix + "/labels/boxes/extent" in record.fields:
            return prefix
    return "" if "labels/boxes/extent" in record.fields else None


def boxes_path(prefix, leaf):
    return f"{prefix}/labels/boxes/{leaf}" if prefix else f"labels/boxes/{leaf}"


def label_of(class_id, names):
    """A box's label: its class's name; None for a class without one (unlabeled)."""
    return names.get(str(class_id))


def expected_annotations(record, name, refused=None):
    """(annotations, boxes left out) for IQ field `name`; the labels of the boxes left out one
    by one (not whole tables) are appended to `refused` when given."""
    prefix = labels_prefix(record, name)
    if prefix is None:
        return [], 0
    extent = record.fields[boxes_path(prefix, "extent")]
    identity = record.fields.get(boxes_path(prefix, "identity"))
    if not table(extent, np.float64, 4):
        return [], 0
    if identity is not None and (not table(identity, np.int32, 2)
                                 or identity.data.shape[0] != extent.data.shape[0]):
        return [], len(extent.data)
    iq = record.fields[name]
    meta = extent.metadata
    center = iq.metadata.get("center_frequency_hz")
    frame = frame_key(meta, "frequency_frame")
    if frame == "receiver_center_offset":
        if frame_key(meta, "receiver_center_hz") != center:
            return [], 0
        offset = center
    elif frame == "absolute":
        offset = 0.0
    else:
        return [], len(extent.data)
    if frame_key(meta, "time_frame") != "receiver_sample_index":
        return [], len(extent.data)
    ratio = iq.metadata["time_coordinates"]["sample_rate_hz"] / frame_key(meta, "sample_rate_hz")
    names = frame_key(identity.metadata, "class_names") or {} if identity else {}
    start_c, duration_c, low_c, high_c = columns(
        extent, ["start_sample", "duration_samples", "low_freq_hz", "high_freq_hz"])
    out, left_out = [], 0
    for index, row in enumerate(extent.data):
        start, duration = float(row[start_c]), float(row[duration_c])
        low, high = float(row[low_c]) + offset, float(row[high_c]) + offset
        numbers = [start, duration, float(row[low_c]), float(row[high_c]), low, high]
        if identity is not None:
            class_c, emitter_c = columns(identity, ["class_id", "emitter_index"])
            label = label_of(int(identity.data[index][class_c]), names)
        else:
            label = None
        if not all(math.isfinite(v) for v in numbers) or start < 0 or duration <= 0 or low > high:
            left_out += 1
            if refused is not None:
                refused.append(label)
            continue
        first = math.floor(start * ratio)
        end = math.ceil((start + duration) * ratio)
        annotation = {
            "core:sample_start": first,
            "core:sample_count": end - first,
            "core:freq_lower_edge": low,
            "core:freq_upper_edge": high,
        }
        if identity is not None:
            if label is not None:
                annotation["core:label"] = label
            annotation["core:comment"] = f"emitter {int(identity.data[index][emitter_c])}"
        out.append(annotation)
    out.sort(key=lambda a: (a["core:sample_start"], a["core:sample_count"],
                            a["core:freq_lower_edge"], a["core:freq_upper_edge"]))
    return out, left_out


def read_exact(path):
    with open(path, "rb") as handle:
        data = handle.read()
    if len(data) != os.stat(path).st_size:
        raise AssertionError(f"{path}: read {len(data)} bytes, stat says {os.stat(path).st_size}")
    return data


def check_meta(path, record, ordinal, name, dataset):
    raw = read_exact(path)
    document = json.loads(raw)
    validate.validate(document, schema.get_schema())
    handle = sigmffile.fromfile(path)
    handle.validate()
    want, left_out = expected_annotations(record, name)
    got = handle.get_annotations()
    if got != want:
        raise AssertionError(f"{path}: annotations\n got {got}\nwant {want}")
    iq = record.fields[name]
    glob = document["global"]
    checks = {
        "core:sample_rate": float(iq.metadata["time_coordinates"]["sample_rate_hz"]),
        "core:datatype": "cf32_le",
        "core:version": "1.2.0",
        "sdsfs:record_id": record.id,
        "sdsfs:ordinal": ordinal,
        "sdsfs:field": name,
        "sdsfs:dataset": dataset.id,
        "sdsfs:snapshot": dataset.snapshot_id,
    }
    for key, value in checks.items():
        if glob.get(key) != value:
            raise AssertionError(f"{path}: global {key} is {glob.get(key)!r}, want {value!r}")
    capture = document["captures"][0]
    if capture.get("core:frequency") != iq.metadata.get("center_frequency_hz"):
        raise AssertionError(f"{path}: capture {capture}")
    return len(want), left_out


def collection_schema():
    """The library's collection schema, its stream items made Recording Objects.

    SigMF 1.2.0's text (the schema's own description, rule 3) says a stream is an object with a
    `name` and a `hash`, and the library writes and reads them so (`SigMFCollection.set_streams`,
    `verify_stream_hashes`); the schema's `items` rule alone asks for `[name, hash]` arrays,
    which the library's own collections fail. Everything else of the schema is kept.
    """
    ref = schema.get_schema(schema_file=schema.SCHEMA_COLLECTION)
    streams = ref["properties"]["collection"]["properties"]["core:streams"]
    streams["items"] = {
        "type": "object",
        "required": ["name", "hash"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "hash": {"type": "string", "pattern": "^[0-9a-f]{128}$"},
        },
    }
    return ref


def check_collection(path, want_names):
    document = json.loads(read_exact(path))
    validate.jsonschema.validators.validate(instance=document, schema=collection_schema())
    streams = document["collection"]["core:streams"]
    names = [s["name"] for s in streams]
    if names != want_names:
        raise AssertionError(f"{path}: streams {names}, want {want_names}")
    base = os.path.dirname(path)
    for stream in streams:
        meta = read_exact(os.path.join(base, stream["name"] + ".sigmf-meta"))
        if hashlib.sha512(meta).hexdigest() != stream["hash"]:
            raise AssertionError(f"{path}: hash of {stream['name']}")
    collection = sigmffile.fromfile(path)
    collection.verify_stream_hashes()
    for index in range(len(collection)):
        if collection.get_SigMFFile(stream_index=index) is None:
            raise AssertionError(f"{path}: stream {index} does not open")


def main(root, mount):
    dataset = signal_dataset.open(root)
    width = len(str(max(len(dataset) - 1, 0)))
    counts = {"metas": 0, "annotations": 0, "record_collections": 0, "scene_collections": 0,
              "left_out": 0}
    scenes = {}
    for ordinal in range(len(dataset)):
        record = dataset[ordinal]
        padded = f"{ordinal:0{width}d}"
        names = sorted(name for name, field in record.fields.items() if has_pair(field))
        for name in names:
            path = os.path.join(mount, "records", padded, "fields", name + ".sigmf-meta")
            annotations, left_out = check_meta(path, record, ordinal, name, dataset)
            counts["metas"] += 1
            counts["annotations"] += annotations
            counts["left_out"] += left_out
        collection = os.path.join(mount, "records", padded, "record.sigmf-collection")
        check_collection(collection, ["fields/" + n for n in names])
        counts["record_collections"] += 1
        if record.scene_id is not None:
            scenes.setdefault(record.scene_id, []).extend(f"{padded}/fields/{n}" for n in names)
    for scene, names in scenes.items():
        check_collection(os.path.join(mount, "by-scene", scene, "scene.sigmf-collection"), names)
        counts["scene_collections"] += 1
    print(json.dumps(counts))


def validate_files(paths):
    for path in paths:
        document = json.loads(read_exact(path))
        validate.validate(document, schema.get_schema())
        handle = sigmffile.fromfile(path)
        handle.validate()
        print(json.dumps({"global": document["global"], "annotations": handle.get_annotations()}))


RATES = [500_000.0, 1_000_000.0, 2_000_000.0, 3_000_000.0, 4_000_000.0]
COLUMNS = ["start_sample", "duration_samples", "low_freq_hz", "high_freq_hz"]


def uniform_iq(rng, rate, center, samples=8192):
    import signal_dataset as sds

    data = (rng.standard_normal(samples) + 1j * rng.standard_normal(samples)).astype(np.complex64)
    block = {"kind": "uniform", "sample_rate_hz": rate, "origin_s": 0.0, "axis": "time",
             "count": samples}
    return sds.Field(data=data, axes=(sds.Axis(name="time", length=samples),),
                     metadata={"time_coordinates": block, "center_frequency_hz": center})


def box_fields(rng, center, count):
    import signal_dataset as sds

    order = list(rng.permutation(4))
    rows = np.zeros((count, 4))
    for row in rows:
        # Within 1000 samples at the slowest rate: inside every capture at the fastest.
        start = float(rng.integers(0, 600)) + float(rng.choice([0.0, 0.25, 0.5]))
        low = float(rng.integers(-400, 400)) * 1000.0
        values = [start, float(rng.integers(1, 400)), low, low + float(rng.integers(1, 200)) * 1000.0]
        hostile = rng.random()
        if hostile < 0.1:
            values[0] = float("nan")
        elif hostile < 0.15:
            values[1] = -values[1]
        elif hostile < 0.2:
            values[2], values[3] = values[3], values[2]
        row[:] = [values[c] for c in order]
    absolute = bool(rng.random() < 0.5)
    if absolute:
        for row in rows:
            row[order.index(2)] += center
            row[order.index(3)] += center
    frame = {"frequency_frame": "absolute" if absolute else "receiver_center_offset",
             "time_frame": "receiver_sample_index", "sample_rate_hz": float(rng.choice(RATES))}
    if not absolute:
        frame["receiver_center_hz"] = center
    metadata = {"metadata": frame} if rng.random() < 0.5 else frame
    column_axis = sds.Axis(name="extent", length=4, role="column",
                           coordinate=sds.Coordinate(values=tuple(COLUMNS[c] for c in order)))
    extent = sds.Field(data=rows, axes=(sds.Axis(name="box", length=count), column_axis),
                       metadata=metadata)
    ids = np.array([[int(rng.integers(0, 4)), i] for i in range(count)], dtype=np.int32)
    ids = ids.reshape(count, 2)
    names = {str(c): f"class-{c}" for c in range(4) if rng.random() < 0.6}
    identity = sds.Field(data=ids, axes=(sds.Axis(name="box", length=count),
                                         sds.Axis(name="attribute", length=2)),
                         metadata={"class_names": names})
    return extent, identity


def write(root, seed):
    import signal_dataset as sds

    rng = np.random.default_rng(seed)
    records, receivers = [], 0
    for index in range(12):
        fields = {}
        for projection in range(int(rng.integers(1, 3))):
            prefix = f"projections/p{projection}"
            center = float(rng.choice([915e6, 2.4e9, 5.8e9]))
            for rx in range(int(rng.integers(1, 4))):
                # Now and then a receiver tuned elsewhere, whose offset boxes are not its own.
                tuned = center + 1e6 if rng.random() < 0.2 else center
                fields[f"{prefix}/receivers/rx{rx}/iq"] = uniform_iq(rng, float(rng.choice(RATES)), tuned)
                receivers += 1
            extent, identity = box_fields(rng, center, int(rng.integers(1, 7)))
            fields[f"{prefix}/labels/boxes/extent"] = extent
            if rng.random() < 0.8:
                fields[f"{prefix}/labels/boxes/identity"] = identity
        records.append(sds.Record(id=f"rec-{index}", fields=fields, scene_id=f"scene-{index % 4}"))
    receipt = sds.write_shard(records, str(root), work_id="w0", attempt=0)
    sds.publish(str(root), [receipt], dataset_id="rfgen-labels", snapshot_id="s1",
                expected_work_ids=["w0"])
    print(json.dumps({"records": len(records), "receivers": receivers}))


class Fields:
    """What expected_annotations reads of a record: its fields."""

    def __init__(self, fields):
        self.fields = fields


def shown_fields(record, ordinal, annotation_set):
    """(IQ field name, the fields its boxes are read from) for each .sigmf-meta of the record
    that can show boxes: the record's own SigMF fields with the record's fields, or, for an
    annotation set's row, the carrier's own SigMF fields and the record's SigMF fields the
    carrier does not hold, each with the carrier's fields (docs/MOUNT.md, "Annotation sets")."""
    if annotation_set is None:
        return [(n, record) for n, f in record.fields.items() if has_pair(f)]
    carrier = dict(annotation_set[ordinal].fields)
    shown = [(n, Fields(carrier)) for n, f in carrier.items() if has_pair(f)]
    for name, field in record.fields.items():
        if has_pair(field) and name not in carrier:
            shown.append((name, Fields({**carrier, name: field})))
    return shown


def check_labels(root, mount):
    """columns/labels.jsonl against every IQ field's boxes as computed here from the library's
    reading of the records and of every annotation set: the converted boxes sorted as the
    .sigmf-meta sorts them, then those it leaves out, with null numbers; by ordinal, field,
    then set (the record's own first, then the sets by name)."""
    dataset = signal_dataset.open(root)
    sets = [(name, list(dataset.annotations[name])) for name in sorted(dataset.annotations)]
    want = []
    nulls = 0
    for ordinal in range(len(dataset)):
        record = dataset[ordinal]
        groups = []
        for order, (set_name, rows) in enumerate([(None, None)] + sets):
            for name, fields in shown_fields(record, ordinal, rows):
                groups.append((name, order, set_name, fields))
        for name, _, set_name, fields in sorted(groups, key=lambda g: (g[0], g[1])):
            head = {"ordinal": ordinal, "record_id": record.id, "scene_id": record.scene_id,
                    "field": name, "set": set_name}
            refused = []
            annotations, _ = expected_annotations(fields, name, refused)
            for a in annotations:
                want.append({**head, "sample_start": a["core:sample_start"],
                             "sample_count": a["core:sample_count"],
                             "freq_lower_edge_hz": a["core:freq_lower_edge"],
                             "freq_upper_edge_hz": a["core:freq_upper_edge"],
                             "label": a.get("core:label")})
            for label in refused:
                nulls += 1
                want.append({**head, "sample_start": None, "sample_count": None,
                             "freq_lower_edge_hz": None, "freq_upper_edge_hz": None,
                             "label": label})
    raw = read_exact(os.path.join(mount, "columns", "labels.jsonl"))
    got = [json.loads(line) for line in raw.decode().splitlines()]
    for index, (g, w) in enumerate(zip(got, want)):
        if g != w:
            raise AssertionError(f"labels.jsonl line {index}:\n got {g}\nwant {w}")
    if len(got) != len(want):
        raise AssertionError(f"labels.jsonl: {len(got)} lines, want {len(want)}")
    set_lines = sum(1 for line in got if line["set"] is not None)
    print(json.dumps({"lines": len(got), "null_lines": nulls, "set_lines": set_lines,
                      "bytes": len(raw)}))


if __name__ == "__main__":
    if sys.argv[1] == "validate":
        validate_files(sys.argv[2:])
    elif sys.argv[1] == "labels":
        check_labels(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
    else:
        main(sys.argv[1], sys.argv[2])
