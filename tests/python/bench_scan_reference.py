#!/usr/bin/env python3
"""Workload 3 of scripts/bench, reference side: read FIELD of every record in ordinal order.

Usage: bench_scan_reference.py ROOT FIELD

The reference path a Python user has, made as fast as the packages allow: control documents
read once (root.json -> snapshot -> every manifest page), each data shard opened once with
`ArrayRecordReader` and read record by record (`read([i])`, so memory stays at one record),
`safetensors.numpy.load`, the tensor key from `__sds_descriptor__`, and the field's bytes as a
little-endian C-order buffer (what `cat` of the mount's .raw returns). Interpreter start-up and
imports are not timed, which favours Python.

Prints one JSON object: {"seconds", "cpu_seconds", "records", "bytes"}.
"""
import json
import os
import sys
import time

import numpy as np
import safetensors.numpy
from array_record.python.array_record_module import ArrayRecordReader


def load_json(root, relative):
    with open(os.path.join(root, relative), "rb") as f:
        return json.load(f)


def shard_entries(root):
    snapshot = load_json(root, load_json(root, "root.json")["snapshot"]["path"])
    for ref in snapshot["manifests"]:
        yield from load_json(root, ref["object"]["path"])["shards"]


def scan(root, field):
    records = total = 0
    for entry in shard_entries(root):
        reader = ArrayRecordReader(os.path.join(root, entry["data"]["path"]))
        try:
            indices = entry.get("record_indices") or range(entry["record_count"])
            for index in indices:
                (payload,) = reader.read([index])
                tensors = safetensors.numpy.load(payload)
                descriptor = json.loads(tensors["__sds_descriptor__"].tobytes())
                array = tensors[descriptor["fields"][field]["tensor"]]
                data = memoryview(np.ascontiguousarray(array)).cast("B")
                total += data.nbytes
                records += 1
        finally:
            reader.close()
    return records, total


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: bench_scan_reference.py ROOT FIELD")
    wall, cpu = time.perf_counter(), time.process_time()
    records, total = scan(argv[1], argv[2])
    print(json.dumps({
        "seconds": time.perf_counter() - wall,
        "cpu_seconds": time.process_time() - cpu,
        "records": records,
        "bytes": total,
    }))


if __name__ == "__main__":
    main(sys.argv)
