#!/usr/bin/env python3
"""The numpy side of scripts/bench row S3 (not a test).

Usage: bench_npy.py RECORDS_DIR COUNT

Opens `RECORDS_DIR/<n>/fields/iq.npy` for every ordinal n < COUNT in order (names zero-padded
to the width of COUNT - 1, as the mount names records) with `np.load(mmap_mode="r")` and sums
one sample of each: what a numpy user reading the mount pays per record. Timed inside Python,
start-up and imports excluded (as bench_library.py times the library). Prints one JSON object:
{"seconds", "cpu_seconds", "records", "sum"}.
"""
import json
import os
import sys
import time

import numpy as np


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    records, count = argv[1], int(argv[2])
    width = len(str(count - 1))
    wall, cpu = time.perf_counter(), time.process_time()
    total = 0j
    for ordinal in range(count):
        path = os.path.join(records, "%0*d" % (width, ordinal), "fields", "iq.npy")
        array = np.load(path, mmap_mode="r")
        total += complex(array[ordinal % len(array)])
    print(json.dumps({
        "seconds": time.perf_counter() - wall,
        "cpu_seconds": time.process_time() - cpu,
        "records": count,
        "sum": [total.real, total.imag],
    }))


if __name__ == "__main__":
    main(sys.argv)
