"""Library-side half of the record interop tests (`tests/record_library.rs`).

Uses the format owner's library, `signal_dataset.record` (`encode`, `decode`,
`RecordMetadataCodec`), never this project's code.

Modes (frames on stdin/stdout are an 8-byte little-endian length followed by the bytes):
- `encode SEED COUNT`: builds COUNT random records (shapes, all 13 dtypes, axes, every
  coordinate form, metadata with big integers and non-ASCII text) and writes, per record, two
  frames: the library's encoded record and its metadata row
  (`RecordMetadataCodec().encode(RecordMetadata.from_record(record))`).
- `structure DEPTH NODES`: reads NUL-separated JSON documents and prints one line per document,
  `ok` or `refused`, from the library's `strict_json_loads(max_depth=DEPTH, max_nodes=NODES)`.
- `check`: reads pairs of frames (record, row) written by us; for each pair prints one JSON
  line `{"record": ..., "row": ..., "row_of_record": ..., "error": ...}` saying whether the
  library decodes the record and re-encodes it to the same bytes, parses the row and
  re-encodes it to the same bytes, and writes that same row for the decoded record.
"""

import json
import random
import struct
import sys

import numpy as np
from signal_dataset.record import (
    Axis,
    Coordinate,
    Field,
    Record,
    RecordMetadata,
    RecordMetadataCodec,
    decode,
    encode,
)

DTYPES = [
    "bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "float16", "float32", "float64", "complex64",
]
NAMES = ["iq", "a", "b/c", "é", "信号", "😀", "sp ace", 'q"uote', "back\\slash", "nl\n",
         "tensor_000000", "__sds_descriptor__", "Z", "_", "\u2028", "\x7f", "tab\t"]
BIG = [2**70, -(2**70), 2**64, 2**63, -(2**63) - 1, 2**127, 2**128 + 1, -(2**200), 10**60]


def random_float(rng: random.Random) -> float:
    choice = rng.randrange(5)
    if choice == 0:
        return rng.uniform(-1e3, 1e3)
    if choice == 1:
        return rng.choice([0.0, -0.0, 1e16, 1e-5, 1e-6, 5e-324, 1.7976931348623157e308, 0.1])
    if choice == 2:
        return rng.randrange(-10, 10) * 0.25
    if choice == 3:
        return struct.unpack("<d", struct.pack("<Q", rng.getrandbits(62) | (1 << 62) >> 2))[0]
    return rng.random() * 10 ** rng.randrange(-30, 30)


def random_json(rng: random.Random, depth: int):
    choice = rng.randrange(8 if depth > 0 else 6)
    if choice == 0:
        return None
    if choice == 1:
        return rng.random() < 0.5
    if choice == 2:
        return rng.choice(BIG) if rng.random() < 0.4 else rng.randrange(-(2**63), 2**64)
    if choice == 3:
        value = random_float(rng)
        return value if np.isfinite(value) else 1.5
    if choice in (4, 5):
        return "".join(rng.choice(NAMES) for _ in range(rng.randrange(3)))
    if choice == 6:
        return [random_json(rng, depth - 1) for _ in range(rng.randrange(3))]
    return random_object(rng, depth - 1)


def random_coordinate_value(rng: random.Random):
    """A coordinate value without objects: the library freezes coordinate values and then
    cannot serialise a frozen object (it reads them, but its encoders fail on them)."""
    while True:
        value = random_json(rng, 1)
        items = value if isinstance(value, list) else [value]
        if not any(isinstance(item, dict) for item in items):
            return value


def random_object(rng: random.Random, depth: int) -> dict:
    return {rng.choice(NAMES): random_json(rng, depth) for _ in range(rng.randrange(4))}


def random_coordinate(rng: random.Random, length: int, names: list[str]) -> Coordinate:
    form = rng.randrange(4)
    unit = rng.choice([None, "s", "Hz", "µs"])
    metadata = random_object(rng, 1)
    if form == 0:
        values = tuple(random_coordinate_value(rng) for _ in range(length))
        return Coordinate(values=values, unit=unit, metadata=metadata)
    if form == 1:
        number = lambda: rng.choice([rng.randrange(-5, 5), random_float(rng), rng.choice(BIG)])
        return Coordinate(start=number(), step=number(), unit=unit, metadata=metadata)
    if form == 2:
        return Coordinate(reference=rng.choice(names), unit=unit, metadata=metadata)
    return Coordinate(unit=unit, metadata=metadata)


def random_data(rng: random.Random, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64))
    if dtype == "bool":
        raw = np.frombuffer(bytes(rng.randrange(2) for _ in range(count)), dtype=np.uint8)
        return raw.astype(bool).reshape(shape)
    itemsize = np.dtype(dtype).itemsize
    raw = bytes(rng.getrandbits(8) for _ in range(count * itemsize))
    return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape).copy()


def random_record(rng: random.Random, serial: int) -> Record:
    names = sorted({rng.choice(NAMES) for _ in range(rng.randrange(1, 5))})
    shared_length = rng.randrange(5)
    shared_coordinate = random_coordinate(rng, shared_length, names) if rng.random() < 0.5 else None
    fields = {}
    for name in names:
        rank = rng.randrange(1, 4)
        axes = []
        for index in range(rank):
            if index == 0 and rng.random() < 0.3:
                # An axis id shared by several fields: same length and coordinate everywhere.
                axes.append(Axis(f"ax{index}", shared_length, "time", "shared", shared_coordinate,
                                 {"shared": True}))
                continue
            length = rng.randrange(5)
            coordinate = random_coordinate(rng, length, names) if rng.random() < 0.6 else None
            role = rng.choice([None, "time", "channel", "é"])
            axes.append(Axis(f"ax{index}", length, role, None, coordinate, random_object(rng, 1)))
        shape = tuple(axis.length for axis in axes)
        dtype = rng.choice(DTYPES)
        fields[name] = Field(random_data(rng, dtype, shape), tuple(axes), random_object(rng, 2))
    scene = rng.choice([None, f"scene-{serial % 5}", "场景"])
    return Record(f"rec-{serial}-é", fields, scene, random_object(rng, 3))


def write_frame(out, data: bytes) -> None:
    out.write(struct.pack("<Q", len(data)))
    out.write(data)


def read_frames(data: bytes) -> list[bytes]:
    frames, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        offset += 8
        frames.append(data[offset : offset + length])
        offset += length
    return frames


def mode_encode(seed: int, count: int) -> None:
    rng = random.Random(seed)
    codec = RecordMetadataCodec()
    out = sys.stdout.buffer
    for serial in range(count):
        record = random_record(rng, serial)
        write_frame(out, encode(record))
        write_frame(out, codec.encode(RecordMetadata.from_record(record)))


def mode_check() -> None:
    frames = read_frames(sys.stdin.buffer.read())
    codec = RecordMetadataCodec()
    for payload, row in zip(frames[0::2], frames[1::2], strict=True):
        result = {"record": False, "row": False, "row_of_record": False, "error": None}
        try:
            record = decode(payload)
            result["record"] = encode(record) == payload
            result["row"] = codec.encode(codec.decode(row)) == row
            result["row_of_record"] = codec.encode(RecordMetadata.from_record(record)) == row
        except Exception as exc:  # reported to the Rust side, which fails the test
            result["error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(result))


def mode_structure(max_depth: int, max_nodes: int) -> None:
    from signal_dataset._internal.json import strict_json_loads

    for raw in sys.stdin.buffer.read().split(b"\0"):
        if not raw:
            continue
        try:
            strict_json_loads(raw, max_depth=max_depth, max_nodes=max_nodes)
            print("ok")
        except ValueError:
            print("refused")


def main() -> None:
    if sys.argv[1:2] == ["encode"] and len(sys.argv) == 4:
        mode_encode(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1:2] == ["structure"] and len(sys.argv) == 4:
        mode_structure(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1:] == ["check"]:
        mode_check()
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
