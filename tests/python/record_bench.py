#!/usr/bin/env python3
"""Reference-side record codec benchmark (safetensors 0.8 + json), counterpart of
examples/bench_record.rs: decodes every payload of DIR/records.lp with safetensors.numpy.load,
parses the descriptor JSON, and touches every field's bytes (a sum, like the Rust side); then
re-encodes them with safetensors.numpy.save. Best of 3 passes, process CPU time. One JSON line."""
import json
import struct
import sys
import time

import numpy as np
from safetensors.numpy import load, save

REPS = 3


def read_lp(path):
    out = []
    with open(path, "rb") as f:
        while head := f.read(8):
            (n,) = struct.unpack("<Q", head)
            out.append(f.read(n))
    return out


def main(d):
    payloads = read_lp(f"{d}/records.lp")
    decode_s = encode_s = float("inf")
    decoded = None
    for _ in range(REPS):
        t = time.process_time()
        decoded = []
        checksum = 0
        for p in payloads:
            tensors = load(p)
            descriptor = json.loads(tensors["__sds_descriptor__"].tobytes())
            for name, field in descriptor["fields"].items():
                checksum += int(tensors[field["tensor"]].view(np.uint8).sum(dtype=np.uint64))
            decoded.append(tensors)
        decode_s = min(decode_s, time.process_time() - t)
    for _ in range(REPS):
        t = time.process_time()
        same = all(save(tensors) == p for tensors, p in zip(decoded, payloads))
        encode_s = min(encode_s, time.process_time() - t)
    print(json.dumps({"records": len(payloads), "bytes": sum(map(len, payloads)),
                      "encode_s": encode_s, "decode_s": decode_s, "checksum": checksum,
                      "reencoded_identical": same}))


if __name__ == "__main__":
    main(sys.argv[1])
