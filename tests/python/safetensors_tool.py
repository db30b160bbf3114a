"""Reference oracle for the record codec tests: the Python `safetensors` package.

Usage: safetensors_tool.py save|load, JSON on stdin, JSON on stdout.

save: stdin is a list of payload specs, each a list of [name, safetensors_dtype, shape, hex];
      prints a list of hex payloads made by `safetensors.numpy.save(tensors, metadata=None)`.
load: stdin is a list of hex payloads; prints, per payload, a map name -> [dtype, shape, hex]
      read back by `safetensors.numpy.load`.
"""

import json
import sys

import numpy as np
import safetensors
import safetensors.numpy

NUMPY_OF = {
    "BOOL": np.bool_,
    "U8": np.uint8,
    "U16": np.uint16,
    "U32": np.uint32,
    "U64": np.uint64,
    "I8": np.int8,
    "I16": np.int16,
    "I32": np.int32,
    "I64": np.int64,
    "F16": np.float16,
    "F32": np.float32,
    "F64": np.float64,
    "C64": np.complex64,
}
NAME_OF = {np.dtype(t).name: name for name, t in NUMPY_OF.items()}


def save(specs):
    out = []
    for spec in specs:
        tensors = {}
        for name, dtype, shape, hexdata in spec:
            array = np.frombuffer(bytes.fromhex(hexdata), dtype=NUMPY_OF[dtype])
            tensors[name] = array.reshape(tuple(shape))
        out.append(safetensors.numpy.save(tensors, metadata=None).hex())
    return out


def load(payloads):
    out = []
    for hexdata in payloads:
        arrays = safetensors.numpy.load(bytes.fromhex(hexdata))
        out.append(
            {
                name: [NAME_OF[a.dtype.name], list(a.shape), a.tobytes().hex()]
                for name, a in arrays.items()
            }
        )
    return out


def main():
    if safetensors.__version__ != "0.8.0":
        sys.exit(f"safetensors 0.8.0 required, found {safetensors.__version__}")
    mode = sys.argv[1]
    request = json.load(sys.stdin)
    result = save(request) if mode == "save" else load(request)
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
