#!/usr/bin/env python3
"""The released `signal-dataset` library's side of the annotation interop tests.

Every subcommand drives the library itself (never a re-implementation), so agreement with the
Rust annotations layer means agreement with the format owner.

Subcommands:
  make-dataset ROOT COUNT [PER_SHARD]
      publish a library dataset of COUNT small records (ids `rec-0000`..., `PER_SHARD` records
      per shard, default 3) with `write_shard` + `publish`; prints {"snapshot_id", "ids"}
  make-rows DIR COUNT [--no-big-int]
      write DIR/rows.jsonl (the `sds annotate` row format) for COUNT records: every status, a
      detail_status, values with floats, a 2**70 integer and non-ASCII text, provenance, and
      `.npy` tensor fields (with axes and metadata) on every third row
  publish ROOT NAME ROWS [--metadata JSON] [--records-per-shard N] [--publication-id ID]
      `publish_annotations` of the rows of ROWS (the `sds annotate` row format); prints the
      set's summary (see `read`)
  write-shard ROOT NAME PUBLICATION_ID ROWS --shard K --records-per-shard N
      one distributed worker: `write_annotation_shard` of logical shard `shard-%08d` % K
      (ordinals [K*N, (K+1)*N)); prints the returned pointer
  publish-shards ROOT NAME PUBLICATION_ID POINTER_JSON... [--metadata JSON]
      the distributed coordinator: `publish_shards` of the given pointers (files written by
      `write-shard`'s output)
  read ROOT
      open the dataset with the library and print every annotation set: name, publication id,
      metadata and every row (status, values, provenance, detail_status, fields with dtype,
      shape, axes, metadata and the sha256 of their bytes)
  hold-lock ROOT SECONDS
      take the library's catalog lock (flock LOCK_EX on annotations/.catalog.json.lock, opened
      the way the library's local store opens it), print "locked" and hold it SECONDS seconds
  lock-held ROOT
      print "free" or "held": whether a non-blocking flock of the lock file succeeds
"""
import fcntl
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import signal_dataset as sds
from signal_dataset.annotation.publisher import publish_shards, write_shard as write_annotation_shard
from signal_dataset.annotation.model import published_shard_from_dict, published_shard_to_dict

LOCK = "annotations/.catalog.json.lock"


def make_dataset(root, count, per_shard=3):
    receipts = []
    work = 0
    for first in range(0, count, per_shard):
        records = []
        for ordinal in range(first, min(count, first + per_shard)):
            iq = (np.arange(8, dtype=np.float32) + ordinal).astype(np.complex64)
            records.append(sds.Record(
                f"rec-{ordinal:04d}",
                {"iq": sds.Field(iq, (sds.Axis("time", 8),))},
                scene_id=f"scene-{ordinal // 2}",
                metadata={"ordinal": ordinal},
            ))
        receipts.append(sds.write_shard(records, root, work_id=f"{work:04d}", attempt=0))
        work += 1
    dataset = sds.publish(root, receipts, dataset_id="annot-test", snapshot_id="snap-0001",
                          expected_work_ids=[f"{w:04d}" for w in range(work)])
    return {"snapshot_id": dataset.snapshot_id,
            "ids": [dataset.record_metadata[i].id for i in range(len(dataset))]}


def make_rows(directory, count, big_int=True):
    directory = Path(directory)
    lines = []
    for ordinal in range(count):
        status = ["success", "skipped", "failed"][ordinal % 3]
        row = {
            "source_index": ordinal,
            "status": status,
            "values": {"score": ordinal * 0.25, "big": 2**70 if big_int else 2**40,
                       "label": f"ü-{ordinal}", "n": ordinal},
            "provenance": {"model": "m-1", "rate": 1e-05},
        }
        if status == "failed":
            row["detail_status"] = f"timeout after {ordinal} s"
        if ordinal % 3 == 0:
            name = f"mask-{ordinal}.npy"
            np.save(directory / name, (np.arange(ordinal + 2, dtype=np.float32) * 0.5))
            row["fields"] = {"detections/mask": {"npy": name, "axes": ["time"],
                                                 "metadata": {"unit": "dB"}}}
        lines.append(json.dumps(row, ensure_ascii=False))
    path = directory / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def load_rows(dataset, path):
    """The `sds annotate` row format (docs/ANNOTATIONS.md) as library AnnotationRecords."""
    path = Path(path)
    by_id = {dataset.record_metadata[i].id: i for i in range(len(dataset))}
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        index = row.get("source_index")
        if index is None:
            index = by_id[row["source_record_id"]]
        fields = {}
        for name, spec in (row.get("fields") or {}).items():
            data = np.load(path.parent / spec["npy"])
            names = spec.get("axes") or [f"dim_{k}" for k in range(data.ndim)]
            axes = tuple(sds.Axis(n, int(length)) for n, length in zip(names, data.shape))
            fields[name] = sds.Field(data, axes, metadata=spec.get("metadata") or {})
        rows[index] = sds.AnnotationRecord(
            dataset.record_metadata[index].id,
            index,
            sds.AnnotationStatus(row["status"]),
            values=row.get("values") or {},
            fields=fields,
            provenance=row.get("provenance") or {},
            detail_status=row.get("detail_status"),
        )
    return [rows[i] for i in range(len(dataset))]


def field_summary(field):
    data = np.ascontiguousarray(field.data)
    return {
        "dtype": data.dtype.str,
        "shape": list(data.shape),
        "axes": [{"name": a.name, "length": a.length} for a in field.axes],
        "metadata": json.loads(json.dumps(dict(field.metadata), default=dict)),
        "sha256": hashlib.sha256(data.tobytes()).hexdigest(),
    }


def thaw(value):
    return json.loads(json.dumps(value, default=lambda v: dict(v) if hasattr(v, "keys") else list(v)))


def set_summary(annotation_set):
    rows = []
    for row in annotation_set:
        rows.append({
            "source_record_id": row.source_record_id,
            "source_index": row.source_index,
            "status": row.status.value,
            "values": thaw(row.values),
            "provenance": thaw(row.provenance),
            "detail_status": row.detail_status,
            "fields": {name: field_summary(f) for name, f in sorted(row.fields.items())},
        })
    return {"name": annotation_set.name, "publication_id": annotation_set.publication_id,
            "metadata": thaw(annotation_set.metadata), "rows": rows}


def option(argv, flag, default=None):
    if flag in argv:
        at = argv.index(flag)
        value = argv[at + 1]
        del argv[at:at + 2]
        return value
    return default


def main(argv):
    command, args = argv[0], list(argv[1:])
    metadata = json.loads(option(args, "--metadata", "null") or "null")
    per_shard = int(option(args, "--records-per-shard", "10000"))
    publication_id = option(args, "--publication-id")
    shard = option(args, "--shard")
    big_int = "--no-big-int" not in args
    args = [a for a in args if a != "--no-big-int"]
    if command == "make-dataset":
        out = make_dataset(args[0], int(args[1]), int(args[2]) if len(args) > 2 else 3)
    elif command == "make-rows":
        out = make_rows(args[0], int(args[1]), big_int)
    elif command == "publish":
        root, name, rows = args
        dataset = sds.open(root)
        options = sds.AnnotationOptions(records_per_shard=per_shard, publication_id=publication_id)
        published = sds.publish_annotations(dataset, name, load_rows(dataset, rows),
                                            metadata=metadata, options=options)
        out = set_summary(published)
    elif command == "write-shard":
        root, name, pid, rows = args
        dataset = sds.open(root)
        k = int(shard)
        first = k * per_shard
        records = load_rows(dataset, rows)[first:first + per_shard]
        pointer = write_annotation_shard(dataset, name, pid, first, records,
                                         logical_shard_id=f"shard-{k:08d}")
        out = published_shard_to_dict(pointer)
    elif command == "publish-shards":
        root, name, pid = args[:3]
        dataset = sds.open(root)
        pointers = [published_shard_from_dict(json.loads(Path(p).read_text())) for p in args[3:]]
        out = set_summary(publish_shards(dataset, name, pid, pointers, metadata=metadata))
    elif command == "read":
        dataset = sds.open(args[0])
        out = {name: set_summary(dataset.annotations[name]) for name in sorted(dataset.annotations)}
    elif command == "hold-lock":
        path = Path(args[0]) / LOCK
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(float(args[1]))
        os.close(descriptor)
        return
    elif command == "lock-held":
        path = Path(args[0]) / LOCK
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            out = "free"
        except BlockingIOError:
            out = "held"
        os.close(descriptor)
    else:
        raise SystemExit(f"unknown command {command!r}")
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
