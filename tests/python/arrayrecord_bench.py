#!/usr/bin/env python3
"""Reference-side benchmark (array-record 0.8.6), counterpart of examples/bench_arrayrecord.rs.

arrayrecord_bench.py DIR: for each dataset NAME, writes DIR/NAME.lp's records to
DIR/NAME.ref.arrayrecord (timed), then reads DIR/NAME.arrayrecord (written by the Rust side)
sequentially and in a shuffled order (best of 3 passes, CPU time), one record per call like the Rust side. JSON lines out.
"""
import json
import random
import struct
import sys
import time

from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter


REPS = 3


def read_lp(path):
    out = []
    with open(path, "rb") as f:
        while head := f.read(8):
            (n,) = struct.unpack("<Q", head)
            out.append(f.read(n))
    return out


def main(d):
    rng = random.Random(1)
    for name in ["iq64k", "iq8m"]:
        records = read_lp(f"{d}/{name}.lp")
        t = time.perf_counter()
        w = ArrayRecordWriter(f"{d}/{name}.ref.arrayrecord", "")
        for r in records:
            w.write(r)
        w.close()
        write_s = time.perf_counter() - t
        r = ArrayRecordReader(f"{d}/{name}.arrayrecord", "readahead_buffer_size:0")
        n = r.num_records()
        order = list(range(n))
        rng.shuffle(order)
        # Best of REPS passes in process CPU time, like the Rust side: the machine is shared.
        seq_s = rand_s = float("inf")
        for _ in range(REPS):
            t = time.process_time()
            for i in range(n):
                r.read([i])
            seq_s = min(seq_s, time.process_time() - t)
            t = time.process_time()
            for i in order:
                r.read([i])
            rand_s = min(rand_s, time.process_time() - t)
        same = open(f"{d}/{name}.ref.arrayrecord", "rb").read() == open(f"{d}/{name}.arrayrecord", "rb").read()
        print(json.dumps({"dataset": name, "impl": "python", "bytes": sum(map(len, records)),
                          "write_s": write_s, "seq_s": seq_s, "rand_s": rand_s, "identical_files": same}))


if __name__ == "__main__":
    main(sys.argv[1])
