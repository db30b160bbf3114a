#!/usr/bin/env python3
"""Benchmark helper for scripts/bench-create (not a test).

  gen DIR N SAMPLES        write N records laid out like a mount copy (records/<n>/record.json,
                           fields/**.raw): complex64 IQ of SAMPLES samples plus box fields
  write ROOT DIR PER_SHARD publish DIR's records with the reference packages (array_record +
                           safetensors, via dataset_tool.py's encoder) in the profile's layout,
                           PER_SHARD records per shard, ids bench/bench-v1, one manifest page

Field names in `gen` need no path encoding, so `write` maps a name to fields/<name>.raw directly.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dataset_tool import encode, pretty, put, write_arrayrecord  # noqa: E402

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


def load(record_dir):
    with open(os.path.join(record_dir, "record.json"), "rb") as f:
        doc = json.load(f)
    fields = {}
    for name, field in doc["fields"].items():
        data = np.fromfile(os.path.join(record_dir, "fields", name + ".raw"), dtype=field["dtype"])
        fields[name] = (data.reshape(field["shape"]), field["axes"], field["metadata"])
    return {"id": doc["id"], "scene_id": doc["scene_id"], "metadata": doc["metadata"], "fields": fields}


def write(root, directory, per_shard):
    os.makedirs(root, exist_ok=True)
    records_dir = os.path.join(directory, "records")
    names = sorted(os.listdir(records_dir), key=int)
    entries, first = [], 0
    for start in range(0, len(names), per_shard):
        encoded = [encode(load(os.path.join(records_dir, n))) for n in names[start:start + per_shard]]
        data = write_arrayrecord(root, "data", [e[0] for e in encoded])
        meta = write_arrayrecord(root, "metadata", [e[1] for e in encoded])
        entries.append({"data": data, "first_ordinal": first, "metadata": meta, "record_count": len(encoded),
                        "stored_bytes": data["stored_bytes"] + meta["stored_bytes"]})
        first += len(encoded)
    import hashlib
    dataset_id, snapshot_id = "bench", "bench-v1"
    page_id = "%s-%08d" % (snapshot_id, 0)
    stored = sum(s["stored_bytes"] for s in entries)
    page = {"first_ordinal": 0, "format": "signal-dataset.manifest", "layout_version": "0.1", "page_id": page_id,
            "record_count": first, "shards": entries, "snapshot_id": snapshot_id, "stored_bytes": stored}
    xx = hashlib.sha256(page_id.encode("utf-8")).hexdigest()[:2]
    ref = put(root, f"manifests/{xx}/{page_id}.json", pretty(page))
    manifests = [{"first_ordinal": 0, "object": ref, "record_count": first, "shard_count": len(entries),
                  "stored_bytes": stored}]
    snapshot = {"dataset_id": dataset_id, "format": "signal-dataset.snapshot", "layout_version": "0.1",
                "manifests": manifests, "metadata": {}, "record_codec": "safetensors", "record_count": first,
                "shard_container": "array_record", "shard_count": len(entries), "snapshot_id": snapshot_id,
                "stored_bytes": stored}
    snapshot_ref = put(root, f"snapshots/{snapshot_id}/snapshot.json", pretty(snapshot))
    put(root, "root.json", pretty({"dataset_id": dataset_id, "format": "signal-dataset.dataset",
                                   "layout_version": "0.1", "metadata": {}, "snapshot": snapshot_ref,
                                   "snapshot_id": snapshot_id}))


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(__doc__)
