#!/usr/bin/env python3
"""An independent reader of one shard pair, for the Rust dataset tests.

Written from the record and row rules (docs/FORMAT.md sections 2 and 3), not from the Rust code,
using only the reference packages (array_record, safetensors, numpy) plus json/hashlib, so that
agreement with what the Rust writer produced means both follow the format. Whole datasets are
read with the format owner's library instead (tests/python/library_tool.py, graph_tool.py).

Usage (prints JSON on stdout):
  shard DATA META      every record of the pair as {id, scene_id, metadata, fields: {name:
                       {dtype, shape, sha256, axes, metadata}}}, checking row agreement
"""
import hashlib
import json
import struct
import sys

import numpy as np
from array_record.python.array_record_module import ArrayRecordReader
from safetensors.numpy import load as st_load

DESCRIPTOR = "__sds_descriptor__"


class Corrupt(Exception):
    pass


def no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise Corrupt(f"duplicate key {k!r}")
        out[k] = v
    return out


def parse(data):
    def refuse(token):
        raise Corrupt(f"non-finite number {token}")
    doc = json.loads(data.decode("utf-8"), object_pairs_hook=no_duplicates, parse_constant=refuse)
    if not isinstance(doc, dict):
        raise Corrupt("top-level value is not an object")
    return doc


def decode(payload):
    (n,) = struct.unpack("<Q", payload[:8])
    header = json.loads(payload[8:8 + n])
    if "__metadata__" in header:
        raise Corrupt("payload header carries __metadata__")
    tensors = st_load(payload)
    descriptor = parse(tensors[DESCRIPTOR].tobytes())
    if descriptor.get("format") != "signal-dataset.record" or descriptor.get("version") != "0.1":
        raise Corrupt("unsupported record format or version")
    mapped = {DESCRIPTOR}
    fields = {}
    for name, field in descriptor["fields"].items():
        array = tensors[field["tensor"]]
        mapped.add(field["tensor"])
        fields[name] = (array, field)
    if set(tensors) != mapped:
        raise Corrupt(f"unmapped tensors {sorted(set(tensors) - mapped)}")
    return descriptor, fields


def summary(descriptor, fields):
    out = {}
    for name, (array, field) in sorted(fields.items()):
        out[name] = {
            "dtype": array.dtype.str,
            "shape": list(array.shape),
            "sha256": hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest(),
            "axes": field.get("axes", []),
            "metadata": field.get("metadata", {}),
        }
    return {"id": descriptor["id"], "scene_id": descriptor.get("scene_id"),
            "metadata": descriptor.get("metadata", {}), "fields": out}


def check_row(row, record):
    if row["id"] != record["id"] or row.get("scene_id") != record["scene_id"]:
        raise Corrupt(f"row {row['id']!r} disagrees with record {record['id']!r}")
    if row.get("metadata", {}) != record["metadata"] or set(row["fields"]) != set(record["fields"]):
        raise Corrupt(f"row {row['id']!r}: metadata or field names differ")
    for name, meta in row["fields"].items():
        got = record["fields"][name]
        if meta["dtype"] != got["dtype"] or meta["shape"] != got["shape"] or meta.get("axes", []) != got["axes"]:
            raise Corrupt(f"row {row['id']!r} field {name!r} differs")


def read_pair(data, meta, indices):
    out = []
    for k in indices:
        descriptor, fields = decode(data.read([k])[0])
        record = summary(descriptor, fields)
        check_row(parse(meta.read([k])[0]), record)
        out.append(record)
    return out


def read_shard_files(data_path, meta_path):
    data = ArrayRecordReader(data_path)
    meta = ArrayRecordReader(meta_path)
    n = data.num_records()
    if meta.num_records() != n:
        raise Corrupt("data and metadata shards differ in length")
    return read_pair(data, meta, range(n))


# ------------------------------------------------------------------------------------------
# Writer
# ------------------------------------------------------------------------------------------

def main(argv):
    if len(argv) == 3 and argv[0] == "shard":
        out = read_shard_files(argv[1], argv[2])
    else:
        raise SystemExit(__doc__)
    sys.stdout.write(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1:])
