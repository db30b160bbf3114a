#!/usr/bin/env python3
"""The reference path a Python user has to one field's bytes (counterpart of the mount benchmark).

Usage: bench_reference_reader.py ROOT ORDINAL FIELD

Follows the control documents by the paths they name: ROOT/root.json -> snapshot -> the manifest
page holding ORDINAL -> its shard entry, then reads the record with the reference packages:
`ArrayRecordReader(data_shard).read([index])`, `safetensors.numpy.load(payload)`, the field's
tensor key from the `__sds_descriptor__` JSON, and the tensor's bytes. Everything from opening
root.json to holding the field's bytes is timed (interpreter and import start-up are not).

Prints one JSON object: {"seconds", "bytes", "field", "ordinal", "dtype", "shape"}.
Exits nonzero with a one-line message when the dataset does not lead to the field.
"""
import json
import os
import sys
import time

import numpy as np
import safetensors.numpy
from array_record.python.array_record_module import ArrayRecordReader


class BenchError(Exception):
    pass


def load_json(root, relative):
    path = os.path.join(root, relative)
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise BenchError(f"{path}: {e}") from e


def locate(root, ordinal):
    """(data shard path, physical index) of logical record ORDINAL."""
    root_doc = load_json(root, "root.json")
    snapshot = load_json(root, root_doc["snapshot"]["path"])
    for ref in snapshot["manifests"]:
        first = ref["first_ordinal"]
        if first <= ordinal < first + ref["record_count"]:
            page = load_json(root, ref["object"]["path"])
            break
    else:
        raise BenchError(f"ordinal {ordinal} is not in the snapshot ({snapshot['record_count']} records)")
    for entry in page["shards"]:
        first = entry["first_ordinal"]
        if first <= ordinal < first + entry["record_count"]:
            k = ordinal - first
            indices = entry.get("record_indices")
            index = indices[k] if indices is not None else k
            return os.path.join(root, entry["data"]["path"]), index
    raise BenchError(f"ordinal {ordinal} is in no shard entry of its manifest page")


def read_field(root, ordinal, field):
    path, index = locate(root, ordinal)
    reader = ArrayRecordReader(path)
    try:
        (payload,) = reader.read([index])
    finally:
        reader.close()
    tensors = safetensors.numpy.load(payload)
    descriptor = json.loads(tensors["__sds_descriptor__"].tobytes())
    try:
        key = descriptor["fields"][field]["tensor"]
    except KeyError as e:
        raise BenchError(f"record {ordinal} has no field {field!r}") from e
    array = tensors[key]
    # The bytes a reader of .raw gets (little-endian, C order), without a further copy.
    data = memoryview(np.ascontiguousarray(array)).cast("B")
    return data, array


def main(argv):
    if len(argv) != 4:
        raise BenchError("usage: bench_reference_reader.py ROOT ORDINAL FIELD")
    root, ordinal, field = argv[1], int(argv[2]), argv[3]
    start = time.perf_counter()
    data, array = read_field(root, ordinal, field)
    seconds = time.perf_counter() - start
    print(json.dumps({
        "seconds": seconds,
        "bytes": data.nbytes,
        "field": field,
        "ordinal": ordinal,
        "dtype": array.dtype.str,
        "shape": list(array.shape),
    }))


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (BenchError, KeyError, ValueError) as e:
        print(f"bench_reference_reader.py: {e}", file=sys.stderr)
        sys.exit(1)
