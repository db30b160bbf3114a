"""Reads views of a mounted dataset with numpy and the sigmf library, printing what they return.

Usage: mount_check.py npy PATH...     -> one JSON line per path: dtype, shape, sha256 of the
                                         array's bytes, for np.load plain and with mmap_mode="r"
       mount_check.py sigmf META...   -> one JSON line per .sigmf-meta: sample count, sha256 of
                                         the samples as complex64, sample rate, datatype
"""
import hashlib
import json
import sys

import numpy as np


def npy(paths):
    for path in paths:
        plain = np.load(path)
        mapped = np.load(path, mmap_mode="r")
        print(json.dumps({
            "path": path,
            "dtype": plain.dtype.str,
            "shape": list(plain.shape),
            "sha256": hashlib.sha256(np.ascontiguousarray(plain).tobytes()).hexdigest(),
            "mmap_sha256": hashlib.sha256(np.ascontiguousarray(mapped).tobytes()).hexdigest(),
            "mmap_is_memmap": isinstance(mapped, np.memmap),
        }))


def sigmf_files(paths):
    from sigmf import sigmffile

    for path in paths:
        handle = sigmffile.fromfile(path)
        samples = handle.read_samples()
        print(json.dumps({
            "path": path,
            "count": int(samples.shape[0]),
            "sha256": hashlib.sha256(samples.astype(np.complex64).tobytes()).hexdigest(),
            "sample_rate": handle.get_global_field("core:sample_rate"),
            "datatype": handle.get_global_field("core:datatype"),
        }))


if __name__ == "__main__":
    kind, paths = sys.argv[1], sys.argv[2:]
    {"npy": npy, "sigmf": sigmf_files}[kind](paths)
