#!/usr/bin/env python3
"""Benchmark helper for scripts/bench and scripts/bench-create (not a test).

  gen DIR N SAMPLES        write N records laid out like a mount copy (records/<n>/record.json,
                           fields/**.raw): complex64 IQ of SAMPLES samples plus box fields
  write ROOT DIR PER_SHARD publish DIR's records with the `signal-dataset` library, the way
                           `sds create --records-per-shard PER_SHARD` does: shard k is work id
                           `%012d` of its first position (attempt 0), ids bench/bench-v1
  iq ROOT N SAMPLES PER_SHARD
                           publish N records with the library, each one complex64 field `iq` of
                           SAMPLES samples of Gaussian noise (`PER_SHARD` records per shard),
                           scene `scene-<n // 4>`: the walk and scan rows' dataset

Field names in `gen` need no path encoding, so `write` maps a name to fields/<name>.raw directly.
"""
import json
import os
import sys

import numpy as np
import signal_dataset as sds


def pretty(doc):
    return (json.dumps(doc, sort_keys=True, ensure_ascii=False, indent=2) + "\n").encode()


FIELDS = ("rx/iq", "labels/boxes/extent", "labels/boxes/identity")


def axis(name, length, coordinate=None, axis_id=None):
    return {"coordinate": coordinate, "id": axis_id, "length": length, "metadata": {}, "name": name,
            "role": None}


def gen(directory, count, samples):
    rng = np.random.default_rng(7)
    width = len(str(count - 1))
    for n in range(count):
        iq = (rng.standard_normal(samples) + 1j * rng.standard_normal(samples)).astype(np.complex64)
        extent = rng.uniform(0, samples, (3, 4))
        identity = np.arange(6, dtype=np.int32).reshape(3, 2)
        time = {"metadata": {}, "reference": None, "start": 0.0, "step": 1e-06, "unit": "s", "values": None}
        arrays = {
            "rx/iq": (iq, [axis("time", samples, time)], {"time_coordinates": {"kind": "uniform", "sample_rate_hz": 1e6}}),
            "labels/boxes/extent": (extent, [axis("box", 3, axis_id="box"), axis("extent", 4)], {}),
            "labels/boxes/identity": (identity, [axis("box", 3, axis_id="box"), axis("attribute", 2)], {}),
        }
        record_dir = os.path.join(directory, "records", "%0*d" % (width, n))
        fields = {}
        for name, (array, axes, metadata) in arrays.items():
            path = os.path.join(record_dir, "fields", name + ".raw")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            array.tofile(path)
            fields[name] = {"axes": axes, "dtype": str(array.dtype), "metadata": metadata,
                            "shape": list(array.shape)}
        doc = {"fields": fields, "id": "rec-%06d" % n, "metadata": {"n": n}, "ordinal": n,
               "scene_id": "scene-%d" % (n // 4)}
        with open(os.path.join(record_dir, "record.json"), "wb") as f:
            f.write(pretty(doc))


def coordinate(value):
    if value is None:
        return None
    return sds.Coordinate(values=value["values"], start=value["start"], step=value["step"],
                          reference=value["reference"], unit=value["unit"], metadata=value["metadata"])


def load(record_dir):
    with open(os.path.join(record_dir, "record.json"), "rb") as f:
        doc = json.load(f)
    fields = {}
    for name, field in doc["fields"].items():
        data = np.fromfile(os.path.join(record_dir, "fields", name + ".raw"), dtype=field["dtype"])
        axes = tuple(sds.Axis(a["name"], a["length"], a["role"], a["id"], coordinate(a["coordinate"]),
                              a["metadata"]) for a in field["axes"])
        fields[name] = sds.Field(data.reshape(field["shape"]), axes, field["metadata"])
    return sds.Record(doc["id"], fields, doc["scene_id"], doc["metadata"])


def write(root, directory, per_shard):
    records_dir = os.path.join(directory, "records")
    names = sorted(os.listdir(records_dir), key=int)
    receipts = []
    for start in range(0, len(names), per_shard):
        records = [load(os.path.join(records_dir, n)) for n in names[start:start + per_shard]]
        receipts.append(sds.write_shard(records, root, work_id="%012d" % start))
    sds.publish(root, receipts, dataset_id="bench", snapshot_id="bench-v1")


def iq_dataset(root, count, samples, per_shard):
    rng = np.random.default_rng(11)
    time = sds.Coordinate(values=None, start=0.0, step=1e-06, reference=None, unit="s", metadata={})
    receipts = []
    for start in range(0, count, per_shard):
        records = []
        for n in range(start, min(start + per_shard, count)):
            iq = (rng.standard_normal(samples) + 1j * rng.standard_normal(samples)).astype(np.complex64)
            axes = (sds.Axis("time", samples, None, None, time, {}),)
            field = sds.Field(iq, axes, {"time_coordinates": {"kind": "uniform", "sample_rate_hz": 1e6}})
            records.append(sds.Record("rec-%07d" % n, {"iq": field}, "scene-%d" % (n // 4), {"n": n}))
        receipts.append(sds.write_shard(records, root, work_id="%012d" % start))
    sds.publish(root, receipts, dataset_id="walk", snapshot_id="walk-v1")


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "iq":
        iq_dataset(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit(__doc__)
