#!/usr/bin/env python3
"""The `signal-dataset` library's side of scripts/bench: the baselines a Python user has.

Usage:
  bench_library.py read ROOT MODE [FIELD]   MODE: getitem | iter | getitems | metadata
  bench_library.py write-shard SRC OUT START STOP [WORK_ID]

`read` times, from `signal_dataset.open(ROOT)` to the last byte held, one pass over every record:
  getitem   `dataset[i]` for every ordinal in order
  iter      `dataset.iter_records()`
  getitems  `dataset.__getitems__(batch)` over consecutive batches of 256 ordinals
  metadata  `dataset.iter_record_metadata()` (rows only, no data shard)
For the modes that decode records, FIELD (default: every field) is touched as a little-endian
C-order buffer, which is what `cat` of the mount's `.raw` returns. Interpreter start-up and
imports are not timed, which favours the library.

`write-shard` reads records START..STOP of SRC first (not timed), then times the library's
`write_shard(records, OUT, work_id=WORK_ID)`: the counterpart of `sds write-shard`.

Prints one JSON object: {"seconds", "cpu_seconds", "records", "bytes"}.
"""
import json
import sys
import time

import numpy as np
import signal_dataset

BATCH = 256


def field_bytes(record, field):
    names = [field] if field else list(record.fields)
    total = 0
    for name in names:
        data = np.ascontiguousarray(record.fields[name].data)
        total += memoryview(data).nbytes
    return total


def records_of(dataset, mode):
    if mode == "getitem":
        for ordinal in range(len(dataset)):
            yield dataset[ordinal]
    elif mode == "iter":
        yield from dataset.iter_records()
    elif mode == "getitems":
        for start in range(0, len(dataset), BATCH):
            yield from dataset.__getitems__(list(range(start, min(start + BATCH, len(dataset)))))
    else:
        raise SystemExit(f"bench_library.py: unknown mode {mode!r}")


def read(root, mode, field):
    wall, cpu = time.perf_counter(), time.process_time()
    dataset = signal_dataset.open(root)
    records = total = 0
    if mode == "metadata":
        for row in dataset.iter_record_metadata():
            records += 1
            total += len(row.fields)
    else:
        for record in records_of(dataset, mode):
            records += 1
            total += field_bytes(record, field)
    return wall, cpu, records, total


def write_shard(src, out, start, stop, work_id):
    dataset = signal_dataset.open(src)
    records = [dataset[ordinal] for ordinal in range(start, stop)]
    wall, cpu = time.perf_counter(), time.process_time()
    receipt = signal_dataset.write_shard(records, out, work_id=work_id)
    return wall, cpu, receipt.record_count, receipt.data_bytes + receipt.metadata_bytes


def main(argv):
    if len(argv) >= 4 and argv[1] == "read":
        wall, cpu, records, total = read(argv[2], argv[3], argv[4] if len(argv) > 4 else None)
    elif len(argv) in (6, 7) and argv[1] == "write-shard":
        work_id = argv[6] if len(argv) == 7 else "0"
        wall, cpu, records, total = write_shard(argv[2], argv[3], int(argv[4]), int(argv[5]), work_id)
    else:
        raise SystemExit(__doc__)
    print(json.dumps({
        "seconds": time.perf_counter() - wall,
        "cpu_seconds": time.process_time() - cpu,
        "records": records,
        "bytes": total,
    }))


if __name__ == "__main__":
    main(sys.argv)
