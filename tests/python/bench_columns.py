#!/usr/bin/env python3
"""Both sides of scripts/bench rows C1-C5 (`columns/` against the library; not a test).

Usage:
  bench_columns.py scan NPY                 np.load(NPY, mmap_mode="r"), summed in slices of 256
  bench_columns.py lib-scan ROOT FIELD      the library's iter_records(), summing FIELD
  bench_columns.py random NPY SEED          random batches of 256 ordinals through the memmap
  bench_columns.py lib-random ROOT FIELD SEED
                                            the same batches through the library's __getitems__
  bench_columns.py lines JSONL              records.jsonl read whole, json.loads per line
  bench_columns.py lib-lines ROOT           the library's iter_record_metadata()

The random modes draw as many batches as a scan has (records / 256, rounded up), each 256
distinct ordinals in ascending order from numpy's default_rng(SEED): both sides read the same
records. Timed inside Python, start-up and imports excluded (the library's open is timed, as in
bench_library.py). Prints one JSON object: {"seconds", "cpu_seconds", "records", "sum"}, where
"sum" is the sum of every value read (real and imaginary parts for complex fields), so the two
sides of a row can be checked to have read the same values.
"""
import json
import sys
import time

import numpy as np

BATCH = 256


def as_pair(total):
    value = complex(total)
    return [value.real, value.imag]


def batches(count, seed):
    rng = np.random.default_rng(seed)
    for _ in range((count + BATCH - 1) // BATCH):
        yield np.sort(rng.choice(count, size=min(BATCH, count), replace=False))


def scan(npy):
    array = np.load(npy, mmap_mode="r")
    total = 0j
    for start in range(0, len(array), BATCH):
        total += array[start:start + BATCH].sum(dtype=np.complex128)
    return len(array), as_pair(total)


def lib_scan(root, field):
    import signal_dataset

    total, records = 0j, 0
    for record in signal_dataset.open(root).iter_records():
        total += record.fields[field].data.sum(dtype=np.complex128)
        records += 1
    return records, as_pair(total)


def random(npy, seed):
    array = np.load(npy, mmap_mode="r")
    total, records = 0j, 0
    for ordinals in batches(len(array), int(seed)):
        total += array[ordinals].sum(dtype=np.complex128)
        records += len(ordinals)
    return records, as_pair(total)


def lib_random(root, field, seed):
    import signal_dataset

    dataset = signal_dataset.open(root)
    total, records = 0j, 0
    for ordinals in batches(len(dataset), int(seed)):
        for record in dataset.__getitems__([int(o) for o in ordinals]):
            total += record.fields[field].data.sum(dtype=np.complex128)
            records += 1
    return records, as_pair(total)


def lines(path):
    records = total = 0
    with open(path, "rb") as f:
        for line in f:
            total += len(json.loads(line)["metadata"])
            records += 1
    return records, [total, 0]


def lib_lines(root):
    import signal_dataset

    records = total = 0
    for row in signal_dataset.open(root).iter_record_metadata():
        total += len(row.metadata)
        records += 1
    return records, [total, 0]


MODES = {"scan": scan, "lib-scan": lib_scan, "random": random, "lib-random": lib_random,
         "lines": lines, "lib-lines": lib_lines}


def main(argv):
    if len(argv) < 3 or argv[1] not in MODES:
        raise SystemExit(__doc__)
    if argv[1].startswith("lib-"):
        import signal_dataset  # noqa: F401 (imported before the clock starts)
    wall, cpu = time.perf_counter(), time.process_time()
    records, total = MODES[argv[1]](*argv[2:])
    print(json.dumps({
        "seconds": time.perf_counter() - wall,
        "cpu_seconds": time.process_time() - cpu,
        "records": records,
        "sum": total,
    }))


if __name__ == "__main__":
    main(sys.argv)
