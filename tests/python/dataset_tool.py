#!/usr/bin/env python3
"""An independent reader and writer of the SDS layout 0.1 profile, for the Rust dataset tests.

Written from the layout profile (docs/FORMAT.md), not from the Rust code, and using only the reference
packages (array_record, safetensors, numpy) plus json/hashlib, so that agreement with the Rust
`Dataset` means both follow the profile rather than each other.

Subcommands (each prints JSON on stdout):
  read ROOT            follow root.json -> snapshot -> manifest pages -> shards and print every
                       record as {id, scene_id, metadata, fields: {name: {dtype, shape, sha256,
                       axes, metadata}}}, checking sizes, content addresses and row agreement
  shard DATA META      the same summaries for one pair of shard files (no control documents)
  write ROOT           publish a small multi-page dataset with the reference packages and print
                       the summaries of the records it wrote, in ordinal order
"""
import hashlib
import json
import os
import struct
import sys

import numpy as np
from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

DESCRIPTOR = "__sds_descriptor__"
DTYPES = {"bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
          "float16", "float32", "float64", "complex64"}


class Corrupt(Exception):
    pass


def pretty(doc):
    return (json.dumps(doc, sort_keys=True, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def compact(doc):
    return json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise Corrupt(f"duplicate key {k!r}")
        out[k] = v
    return out


def parse(data):
    def refuse(token):
        raise Corrupt(f"non-finite number {token}")
    doc = json.loads(data.decode("utf-8"), object_pairs_hook=no_duplicates, parse_constant=refuse)
    if not isinstance(doc, dict):
        raise Corrupt("top-level value is not an object")
    return doc


def safe_path(root, rel):
    parts = rel.split("/")
    if not rel or rel.startswith("/") or "\\" in rel or "\0" in rel or any(p in ("", ".", "..") for p in parts):
        raise Corrupt(f"bad reference path {rel!r}")
    return os.path.join(root, *parts)


def follow(root, ref):
    """Reads a control document through its reference, checking stored_bytes."""
    path = safe_path(root, ref["path"])
    with open(path, "rb") as f:
        data = f.read()
    if len(data) != ref["stored_bytes"]:
        raise Corrupt(f"{ref['path']}: {len(data)} bytes, reference says {ref['stored_bytes']}")
    return parse(data)


def require(doc, fmt):
    if doc.get("format") != fmt:
        raise Corrupt(f"format {doc.get('format')!r} is not {fmt!r}")
    if doc.get("layout_version") != "0.1":
        raise Corrupt(f"layout_version {doc.get('layout_version')!r}")


def check_reader_version(root_doc):
    wanted = root_doc.get("min_reader_version")
    if wanted is None:
        return
    parts = [int(p) for p in wanted.split(".")]
    mine = [0, 2]
    n = max(len(parts), len(mine))
    if parts + [0] * (n - len(parts)) > mine + [0] * (n - len(mine)):
        raise Corrupt(f"min_reader_version {wanted} is newer than 0.2")


def open_shard(root, ref):
    """Opens a shard after checking its size and content address (this tool always deep-verifies)."""
    path = safe_path(root, ref["path"])
    size = os.path.getsize(path)
    if size != ref["stored_bytes"]:
        raise Corrupt(f"{ref['path']}: {size} bytes, reference says {ref['stored_bytes']}")
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    name = os.path.basename(path)
    if name != digest + ".arrayrecord":
        raise Corrupt(f"{ref['path']}: content hash is {digest}")
    return ArrayRecordReader(path)


def decode(payload):
    (n,) = struct.unpack("<Q", payload[:8])
    header = json.loads(payload[8:8 + n])
    if "__metadata__" in header:
        raise Corrupt("payload header carries __metadata__")
    tensors = st_load(payload)
    descriptor = parse(tensors[DESCRIPTOR].tobytes())
    if descriptor.get("format") != "signal-dataset.record" or descriptor.get("version") != "0.1":
        raise Corrupt("unsupported record format or version")
    mapped = {DESCRIPTOR}
    fields = {}
    for name, field in descriptor["fields"].items():
        array = tensors[field["tensor"]]
        mapped.add(field["tensor"])
        fields[name] = (array, field)
    if set(tensors) != mapped:
        raise Corrupt(f"unmapped tensors {sorted(set(tensors) - mapped)}")
    return descriptor, fields


def summary(descriptor, fields):
    out = {}
    for name, (array, field) in sorted(fields.items()):
        out[name] = {
            "dtype": array.dtype.str,
            "shape": list(array.shape),
            "sha256": hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest(),
            "axes": field.get("axes", []),
            "metadata": field.get("metadata", {}),
        }
    return {"id": descriptor["id"], "scene_id": descriptor.get("scene_id"),
            "metadata": descriptor.get("metadata", {}), "fields": out}


def check_row(row, record):
    if row["id"] != record["id"] or row.get("scene_id") != record["scene_id"]:
        raise Corrupt(f"row {row['id']!r} disagrees with record {record['id']!r}")
    if row.get("metadata", {}) != record["metadata"] or set(row["fields"]) != set(record["fields"]):
        raise Corrupt(f"row {row['id']!r}: metadata or field names differ")
    for name, meta in row["fields"].items():
        got = record["fields"][name]
        if meta["dtype"] != got["dtype"] or meta["shape"] != got["shape"] or meta.get("axes", []) != got["axes"]:
            raise Corrupt(f"row {row['id']!r} field {name!r} differs")


def read_pair(data, meta, indices):
    out = []
    for k in indices:
        descriptor, fields = decode(data.read([k])[0])
        record = summary(descriptor, fields)
        check_row(parse(meta.read([k])[0]), record)
        out.append(record)
    return out


def read_dataset(root):
    with open(os.path.join(root, "root.json"), "rb") as f:
        root_doc = parse(f.read())
    if root_doc.get("format") != "signal-dataset.dataset":
        raise Corrupt("root.json: wrong format")
    check_reader_version(root_doc)
    require(root_doc, "signal-dataset.dataset")
    snapshot = follow(root, root_doc["snapshot"])
    require(snapshot, "signal-dataset.snapshot")
    if snapshot["snapshot_id"] != root_doc["snapshot_id"] or snapshot["dataset_id"] != root_doc["dataset_id"]:
        raise Corrupt("snapshot ids disagree with root.json")
    if snapshot["record_codec"] != "safetensors" or snapshot["shard_container"] != "array_record":
        raise Corrupt("unsupported codec or container")
    records = []
    expected_first = 0
    for index, mref in enumerate(snapshot["manifests"]):
        page = follow(root, mref["object"])
        require(page, "signal-dataset.manifest")
        if page["page_id"] != "%s-%08d" % (snapshot["snapshot_id"], index):
            raise Corrupt(f"page {index}: page_id {page['page_id']!r}")
        if page["first_ordinal"] != expected_first or mref["first_ordinal"] != expected_first:
            raise Corrupt(f"page {index} does not start at {expected_first}")
        for entry in page["shards"]:
            if entry["first_ordinal"] != expected_first:
                raise Corrupt(f"shard entry does not start at {expected_first}")
            if entry["stored_bytes"] != entry["data"]["stored_bytes"] + entry["metadata"]["stored_bytes"]:
                raise Corrupt("shard entry stored_bytes is not the sum of its shards'")
            indices = entry.get("record_indices")
            if indices is None:
                indices = list(range(entry["record_count"]))
            if len(indices) != entry["record_count"]:
                raise Corrupt("record_indices length differs from record_count")
            if entry["record_count"]:
                data = open_shard(root, entry["data"])
                meta = open_shard(root, entry["metadata"])
                records.extend(read_pair(data, meta, indices))
                data.close()
                meta.close()
            expected_first += entry["record_count"]
        if expected_first != mref["first_ordinal"] + mref["record_count"]:
            raise Corrupt(f"page {index}: entries do not tile its range")
    if expected_first != snapshot["record_count"] or len(records) != snapshot["record_count"]:
        raise Corrupt("record_count disagrees with the manifests")
    return records


def read_shard_files(data_path, meta_path):
    data = ArrayRecordReader(data_path)
    meta = ArrayRecordReader(meta_path)
    n = data.num_records()
    if meta.num_records() != n:
        raise Corrupt("data and metadata shards differ in length")
    return read_pair(data, meta, range(n))


# ------------------------------------------------------------------------------------------
# Writer
# ------------------------------------------------------------------------------------------

def axis(name, length, role=None, axis_id=None, coordinate=None, metadata=None):
    return {"coordinate": coordinate, "id": axis_id, "length": length, "metadata": metadata or {},
            "name": name, "role": role}


def coordinate(start=None, step=None, values=None, unit=None, reference=None):
    return {"metadata": {}, "reference": reference, "start": start, "step": step, "unit": unit,
            "values": values}


def make_record(serial):
    rng = np.random.default_rng(serial)
    n = 4 + serial % 3
    iq = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    kinds = sorted(DTYPES)
    dtype = kinds[serial % len(kinds)]
    if dtype == "bool":
        extra = rng.integers(0, 2, size=(2, 3)).astype(bool)
    else:
        extra = rng.integers(0, 100, size=(2, 3)).astype(dtype)
    fields = {
        "iq": (iq, [axis("time", n, role="time", axis_id="t",
                         coordinate=coordinate(start=0.0, step=1e-06, unit="s"))],
               {"gain_db": 3.5}),
        "extra": (extra, [axis("row", 2, coordinate=coordinate(values=["a", "b"])),
                          axis("col", 3)], {}),
        # One value, shape (1,): 0-d fields are not writable (the library cannot represent them).
        "scalar": (np.array([serial], dtype=np.int64), [axis("one", 1)], {"note": "one value"}),
    }
    return {"id": f"py-{serial}", "scene_id": None if serial % 3 else f"scene-{serial // 3}",
            "metadata": {"serial": serial, "ratio": serial / 8, "label": "é"}, "fields": fields}


def encode(record):
    names = sorted(record["fields"])
    tensors = {}
    fields_desc = {}
    for i, name in enumerate(names):
        array, axes, metadata = record["fields"][name]
        key = "tensor_%06d" % i
        tensors[key] = array
        fields_desc[name] = {"axes": axes, "metadata": metadata, "tensor": key}
    descriptor = {"fields": fields_desc, "format": "signal-dataset.record", "id": record["id"],
                  "metadata": record["metadata"], "scene_id": record["scene_id"], "version": "0.1"}
    tensors[DESCRIPTOR] = np.frombuffer(compact(descriptor), dtype=np.uint8)
    row = {"fields": {name: {"axes": record["fields"][name][1], "dtype": record["fields"][name][0].dtype.str,
                             "metadata": record["fields"][name][2],
                             "shape": list(record["fields"][name][0].shape)} for name in names},
           "id": record["id"], "metadata": record["metadata"], "scene_id": record["scene_id"]}
    return st_save(tensors), compact(row)


def put(root, rel, data):
    path = os.path.join(root, *rel.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "xb") as f:
        f.write(data)
    return {"path": rel, "stored_bytes": len(data)}


def write_arrayrecord(root, kind, payloads):
    tmp = os.path.join(root, f".tmp-{kind}.arrayrecord")
    writer = ArrayRecordWriter(tmp, "group_size:1")
    for p in payloads:
        writer.write(p)
    writer.close()
    with open(tmp, "rb") as f:
        data = f.read()
    os.remove(tmp)
    digest = hashlib.sha256(data).hexdigest()
    return put(root, f"objects/{kind}/{digest[:2]}/{digest}.arrayrecord", data)


def write_dataset(root, shard_sizes=(3, 2, 4, 1, 2), shards_per_manifest=2):
    dataset_id, snapshot_id = "py-dataset", "py-snap"
    metadata = {"source": "dataset_tool.py"}
    serial = 0
    entries = []
    written = []
    for size in shard_sizes:
        records = [make_record(serial + i) for i in range(size)]
        encoded = [encode(r) for r in records]
        data = write_arrayrecord(root, "data", [e[0] for e in encoded])
        meta = write_arrayrecord(root, "metadata", [e[1] for e in encoded])
        entries.append({"data": data, "first_ordinal": serial, "metadata": meta, "record_count": size,
                        "stored_bytes": data["stored_bytes"] + meta["stored_bytes"]})
        for payload, _ in encoded:
            written.append(summary(*decode(payload)))
        serial += size
    manifests = []
    for index in range(0, len(entries), shards_per_manifest):
        shards = entries[index:index + shards_per_manifest]
        page_id = "%s-%08d" % (snapshot_id, index // shards_per_manifest)
        first = shards[0]["first_ordinal"]
        page = {"first_ordinal": first, "format": "signal-dataset.manifest", "layout_version": "0.1",
                "page_id": page_id, "record_count": sum(s["record_count"] for s in shards),
                "shards": shards, "snapshot_id": snapshot_id,
                "stored_bytes": sum(s["stored_bytes"] for s in shards)}
        xx = hashlib.sha256(page_id.encode("utf-8")).hexdigest()[:2]
        ref = put(root, f"manifests/{xx}/{page_id}.json", pretty(page))
        manifests.append({"first_ordinal": first, "object": ref, "record_count": page["record_count"],
                          "shard_count": len(shards), "stored_bytes": page["stored_bytes"]})
    snapshot = {"dataset_id": dataset_id, "format": "signal-dataset.snapshot", "layout_version": "0.1",
                "manifests": manifests, "metadata": metadata, "record_codec": "safetensors",
                "record_count": serial, "shard_container": "array_record",
                "shard_count": len(entries), "snapshot_id": snapshot_id,
                "stored_bytes": sum(m["stored_bytes"] for m in manifests)}
    snapshot_ref = put(root, f"snapshots/{snapshot_id}/snapshot.json", pretty(snapshot))
    root_doc = {"dataset_id": dataset_id, "format": "signal-dataset.dataset", "layout_version": "0.1",
                "metadata": metadata, "snapshot": snapshot_ref, "snapshot_id": snapshot_id}
    put(root, "root.json", pretty(root_doc))
    return written


def main(argv):
    if len(argv) == 2 and argv[0] == "read":
        out = read_dataset(argv[1])
    elif len(argv) == 3 and argv[0] == "shard":
        out = read_shard_files(argv[1], argv[2])
    elif len(argv) == 2 and argv[0] == "write":
        out = write_dataset(argv[1])
    else:
        raise SystemExit(__doc__)
    sys.stdout.write(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1:])
