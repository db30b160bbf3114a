"""Drives the signal-dataset library for the control-graph tests (tests/dataset_library.rs).

Commands (JSON on stdout):
  publish ROOT SPEC      write the shards SPEC lists with write_shard, then publish them;
                         prints the receipts as dataclasses.asdict(PublishedShard), one a line
  view SRC DEST SPEC     publish a reference view (DatasetView.publish) of SRC
  payloads ROOT SPEC     as publish, but each shard's "payloads" lists files holding encoded
                         records (sds.decode), instead of "records"
  dump ROOT              read every record with the library: id, scene id, metadata, and per
                         field dtype.str, shape and sha256 of the bytes

SPEC is a JSON object: {"dataset_id", "snapshot_id", "metadata", "expected_work_ids",
"shards_per_manifest", "writer_options", "shards": [{"work_id", "attempt", "records": [n...]}]}
where each n makes the deterministic record `record(n)`; for `view`, {"dataset_id",
"snapshot_id", "indices"}.
"""

import dataclasses
import hashlib
import json
import sys

import numpy as np
import signal_dataset as sds


def record(n):
    """Record n: complex64 IQ on a regular time axis, a uint8 label, an int16 matrix."""
    length = 8 + n
    iq = (np.arange(length, dtype=np.float32) * (n + 1)).astype(np.complex64) * (1 - 0.5j)
    time = sds.Axis("time", length, role="time", id="t",
                    coordinate=sds.Coordinate(start=0.0, step=1e-06, unit="s"))
    fields = {
        "rx0/iq": sds.Field(iq, (time,), {"sample_rate_hz": 1000000.0}),
        "rx0/label": sds.Field(np.full(length, n % 7, dtype=np.uint8), (time,)),
        "grid": sds.Field(np.arange(6, dtype=np.int16).reshape(2, 3) * n,
                          (sds.Axis("row", 2), sds.Axis("col", 3))),
    }
    scene = None if n % 3 == 2 else f"scene-{n // 2}"
    return sds.Record(f"rec-{n:04d}", fields, scene,
                      {"n": n, "name": "é ✓", "gain_db": -3.5})


def records_of(shard):
    if "payloads" in shard:
        return [sds.decode(open(path, "rb").read()) for path in shard["payloads"]]
    return [record(n) for n in shard["records"]]


def publish(root, spec):
    options = sds.StorageOptions(writer_options=spec.get("writer_options", "group_size:1"))
    receipts = []
    for shard in spec["shards"]:
        receipts.append(sds.write_shard(
            records_of(shard), root,
            work_id=shard["work_id"], attempt=shard.get("attempt", 0), options=options))
    sds.publish(
        root, receipts,
        dataset_id=spec["dataset_id"], snapshot_id=spec["snapshot_id"],
        expected_work_ids=spec.get("expected_work_ids"),
        metadata=spec.get("metadata"),
        publication_options=sds.PublicationOptions(
            shards_per_manifest=spec.get("shards_per_manifest", 10_000)),
    )
    for receipt in receipts:
        print(json.dumps(dataclasses.asdict(receipt)))


def view(source, destination, spec):
    dataset = sds.open(source)
    dataset.select(spec["indices"]).publish(
        destination, dataset_id=spec["dataset_id"], snapshot_id=spec["snapshot_id"])


def dump(root):
    dataset = sds.open(root)
    out = []
    for item in dataset:
        fields = {
            name: {"dtype": value.data.dtype.str, "shape": list(value.data.shape),
                   "sha256": hashlib.sha256(value.data.tobytes()).hexdigest()}
            for name, value in item.fields.items()
        }
        out.append({"id": item.id, "scene_id": item.scene_id,
                    "metadata": dict(item.metadata), "fields": fields})
    print(json.dumps({"dataset_id": dataset.id, "snapshot_id": dataset.snapshot_id,
                      "metadata": dict(dataset.metadata), "records": out}, sort_keys=True))


def main():
    command = sys.argv[1]
    if command in ("publish", "payloads"):
        publish(sys.argv[2], json.loads(sys.argv[3]))
    elif command == "view":
        view(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
    elif command == "dump":
        dump(sys.argv[2])
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
