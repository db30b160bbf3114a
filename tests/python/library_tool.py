"""Drives one release of the `signal-dataset` library (the format owner) for the interop tests.

The release is whichever `signal_dataset` the interpreter imports: the tests run 0.4.0 from the
venv and older releases with `PYTHONPATH=.venv/sds-releases/<version>`. `--release V` makes the
tool refuse to run under any other version, so a misconfigured path can never pass silently.

Commands (every output is canonical JSON: sorted keys, UTF-8, integers of any size exact):

  random-spec SEED                 a randomized, fully explicit spec on stdout
  write SPEC OUT                   OUT/dataset (+ OUT/view, OUT/materialized) written by the
                                   library from SPEC, OUT/plan.json (every shard written: work
                                   id, attempt, ordinals in the published dataset) and
                                   OUT/receipts.jsonl (`dataclasses.asdict(PublishedShard)`)
  write-shards SPEC OUT            only the library's workers of SPEC into OUT (no publication)
  publish ROOT RECEIPTS ...        the library's coordinator over receipt lines (ours or its own)
  annotate SPEC ROOT               the spec's annotation sets published by the library on ROOT
  dump ROOT [--part P]             everything the library reads of ROOT (P: records, all)
  check-mount ROOT MOUNT           walk a sdsfs mount of ROOT (a directory, gs:// or s3://) and
                                   compare it with the library's reading of ROOT

Why the comparisons live here and not in Rust: metadata holds integers beyond 64 bits, which
Python's json keeps exactly; comparing canonical JSON text (not parsed values) also tells `1`
from `1.0`, which value equality in Python would not.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

import signal_dataset as sds

DTYPES = [
    "|b1", "|u1", "<u2", "<u4", "<u8", "|i1", "<i2", "<i4", "<i8", "<f2", "<f4", "<f8", "<c8",
]
VIEW_SUFFIXES = (".raw", ".json", ".npy", ".sigmf-data", ".sigmf-meta", ".spectrogram.png")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def release() -> str:
    return importlib.metadata.version("signal-dataset")


def has_parameter(function: Any, name: str) -> bool:
    import inspect

    return name in inspect.signature(function).parameters


# ---------------------------------------------------------------------------------------------
# Random specs


class Gen:
    """Seed-driven choices; every spec is explicit, so a failing seed reproduces exactly."""

    def __init__(self, seed: int, small_ints: bool = False) -> None:
        self.r = random.Random(seed)
        self.small_ints = small_ints

    def int_ok(self, value: Any) -> bool:
        return not (self.small_ints and isinstance(value, int) and not -(2**63) <= value < 2**63)

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def pick(self, items: list[Any]) -> Any:
        items = [item for item in items if self.int_ok(item)]
        return items[self.r.randrange(len(items))]

    def scalar(self) -> Any:
        return self.pick([
            2**70, -(2**65) - 7, 2**64, 18446744073709551615, 0, -1, 7, True, False, None,
            0.25, 20000.0, -0.0, 1e-05, 1e16, 1.2345678901234568e17, 5e-324, 0.30000000000000004,
            "ü ✓", "line\nbreak\t\"q\"\\", "\u2028\x7f", "\x01ctl", "", "plain", "記録",
        ])

    def json_value(self, depth: int = 0) -> Any:
        if depth >= 3 or self.chance(0.6):
            return self.scalar()
        if self.chance(0.5):
            return [self.json_value(depth + 1) for _ in range(self.r.randrange(4))]
        return self.json_object(depth + 1)

    def json_object(self, depth: int = 0) -> dict[str, Any]:
        keys = ["a", "b", "ключ", "ü", "big", "nested", "", "z z", "%", "k/slash"]
        return {self.pick(keys): self.json_value(depth) for _ in range(self.r.randrange(4))}

    def field_names(self, count: int) -> list[str]:
        pool = [
            "iq", "rx0/iq", "rx0/iq/coordinates/t", "labels/occupancy_%", "ünï/çødé ✓",
            "provenance/rx0_iq.raw/sha256", "a b/c", "x", "x/y", "deep/er/still/leaf",
            "%25/literal", "radar_rx/components/baseband", "f.npy/inner",
        ]
        self.r.shuffle(pool)
        return pool[:count]

    def shape(self) -> list[int]:
        rank = self.pick([1, 1, 1, 2, 2, 3])
        dims = [self.pick([0, 1, 2, 3, 5, 8]) if self.chance(0.1) else self.pick([1, 2, 3, 4, 6, 16])
                for _ in range(rank)]
        if rank == 1 and self.chance(0.3):
            dims = [self.pick([64, 100, 257])]
        return dims

    def coordinate(self, length: int, others: list[str]) -> dict[str, Any] | None:
        kind = self.pick(["none", "none", "values", "linear", "reference"])
        coordinate: dict[str, Any] = {}
        if kind == "none":
            return None
        if kind == "values":
            coordinate["values"] = [self.pick([1, 2.5, "x", 2**66, -0.0]) for _ in range(length)]
        elif kind == "linear":
            coordinate["start"] = self.pick([0, 0.0, -3, 1.5e-06])
            coordinate["step"] = self.pick([1e-06, 1, 0.5, 2**40])
            coordinate["unit"] = self.pick(["s", "Hz", None])
        elif others:
            coordinate["reference"] = self.pick(others)
        else:
            return None
        if self.chance(0.3):
            coordinate["metadata"] = self.json_object(2)
        return coordinate

    def field(self, name: str, index: int, others: list[str], coordinates: bool = True) -> dict[str, Any]:
        shape = self.shape()
        axes = []
        for position, length in enumerate(shape):
            axis: dict[str, Any] = {"name": self.pick(["time", "sample", "ch", "ü-axis", "t"]) + f"{position}"}
            if self.chance(0.5):
                axis["role"] = self.pick(["time", "frequency", "channel"])
            if self.chance(0.4):
                axis["id"] = f"ax-{index}-{position}"
            if coordinates:
                coordinate = self.coordinate(length, others)
                if coordinate is not None:
                    axis["coordinate"] = coordinate
            if self.chance(0.3):
                axis["metadata"] = self.json_object(2)
            axes.append(axis)
        spec: dict[str, Any] = {
            "dtype": self.pick(DTYPES), "shape": shape, "seed": self.r.randrange(2**32), "axes": axes,
        }
        if self.chance(0.6):
            spec["metadata"] = self.json_object(1)
        if self.chance(0.2):
            spec["dtype"] = "<c8"
            spec["metadata"] = {"time_coordinates": {"kind": "uniform", "sample_rate_hz": 1e6}}
        return spec

    def record(self, serial: int) -> dict[str, Any]:
        names = self.field_names(self.pick([1, 1, 2, 3, 4]))
        fields = {}
        for index, name in enumerate(names):
            others = [other for other in names if other != name]
            fields[name] = self.field(name, index, others)
        record: dict[str, Any] = {
            "id": self.pick([f"obs-{serial:06d}", f"記録-{serial} ✓", f"a/b {serial}", f"r{serial}%"]),
            "fields": fields,
        }
        if self.chance(0.7):
            record["scene_id"] = self.pick([f"scene-{serial // 2}", f"場面 {serial // 3}", "s/lash"])
        if self.chance(0.7):
            record["metadata"] = self.json_object()
        return record


def shard_plan(gen: Gen, record_count: int) -> list[dict[str, Any]]:
    """Splits records 0..n (in spec order) into shards with work ids whose string order is the
    publication order, some empty, some with several attempts (the highest must win)."""
    pieces = gen.pick([1, 2, 3, 4])
    cuts = sorted(gen.r.randrange(record_count + 1) for _ in range(pieces - 1))
    bounds = [0, *cuts, record_count]
    # Zero-padded so that string order equals this order; a second scheme is checked by
    # non-padded ids, whose string order the spec follows explicitly.
    style = gen.pick(["pad", "unicode", "plain"])
    shards = []
    for position in range(pieces):
        work_id = {"pad": f"w-{position:04d}", "unicode": f"ü-{position}-✓", "plain": f"{position}"}[style]
        attempts = [0]
        if gen.chance(0.35):
            attempts = gen.pick([[0, 1], [2, 10], [1, 3, 2]])
        shards.append({
            "work_id": work_id, "start": bounds[position], "stop": bounds[position + 1], "attempts": attempts,
        })
    if gen.chance(0.3):
        shards.append({"work_id": "zz-empty", "start": record_count, "stop": record_count, "attempts": [0]})
    return shards


def annotation_rows(gen: Gen, count: int) -> list[dict[str, Any]]:
    rows = []
    for _ in range(count):
        row: dict[str, Any] = {"status": gen.pick(["success", "success", "skipped", "failed"])}
        if gen.chance(0.7):
            row["values"] = gen.json_object()
        if gen.chance(0.5):
            row["provenance"] = {"model": gen.pick(["det-v2", "ü ✓"]), "n": gen.scalar()}
        if gen.chance(0.3):
            row["detail_status"] = gen.pick(["timeout", "low-snr", "記録"])
        if gen.chance(0.3):
            names = gen.field_names(gen.pick([1, 2]))
            row["fields"] = {}
            for i, name in enumerate(names):
                value = gen.field(name, i, [], coordinates=False)
                # The row format of `sds annotate` names axes and nothing more.
                value["axes"] = [{"name": axis["name"]} for axis in value["axes"]]
                row["fields"][name] = value
        rows.append(row)
    return rows


def random_spec(seed: int, writer_options: str | None = None, full: bool = False,
                small_ints: bool = False) -> dict[str, Any]:
    """A randomized spec; `full` forces every feature (several pages, attempts, an empty shard,
    both annotation modes, both views) so a bounded run still covers them all; `small_ints`
    keeps every integer within 64 bits (to tell a big-integer failure from any other)."""
    gen = Gen(seed, small_ints)
    count = gen.pick([1, 2, 3, 5, 8, 12]) if gen.chance(0.92) else 0
    if full:
        count = gen.pick([5, 8, 12])
    records = [gen.record(serial) for serial in range(count)]
    spec: dict[str, Any] = {
        "seed": seed,
        "dataset_id": gen.pick([f"ds-{seed}", "my dataset/ü ✓", "Data.Set_1"]),
        "snapshot_id": gen.pick([f"snap-{seed}", "snap ✓ 1", "v1.0"]),
        "metadata": gen.json_object() if gen.chance(0.7) else {},
        "writer_options": gen.pick([None, "group_size:1", "group_size:3", "brotli:6", "snappy", "uncompressed", "zstd:9"]),
        "shards_per_manifest": gen.pick([None, 1, 2, 3]),
        "records": records,
        "shards": shard_plan(gen, count),
    }
    if writer_options is not None:
        spec["writer_options"] = None if writer_options == "default" else writer_options
    if full:
        spec["metadata"]["big"] = 2**63 - 1 if small_ints else 2**70
        spec["shards_per_manifest"] = 1
        spec["shards"][0]["attempts"] = [2, 10]
        spec["shards"] = [shard for shard in spec["shards"] if shard["work_id"] != "zz-empty"]
        spec["shards"].append({"work_id": "zz-empty", "start": count, "stop": count, "attempts": [0, 1]})
    if count and (full or gen.chance(0.6)):
        spec["annotations"] = [
            {
                "name": f"set-{position}",
                "mode": ["single", "distributed"][position % 2] if full else gen.pick(["single", "distributed"]),
                "records_per_shard": gen.pick([1, 2, 5, 10000]),
                "publication_id": gen.pick([None, f"pub{seed}-{position}"]),
                "metadata": gen.json_object(),
                "rows": annotation_rows(gen, count),
            }
            for position in range(2 if full else gen.pick([1, 2]))
        ]
    if count and (full or gen.chance(0.7)):
        indices = [gen.r.randrange(count) for _ in range(gen.pick([1, 2, 4]))]
        spec["view"] = {"indices": indices, "dataset_id": "view ✓", "snapshot_id": "vsnap-1"}
        spec["materialize"] = {"indices": sorted(set(indices)), "dataset_id": "mat", "snapshot_id": "msnap",
                               "records_per_shard": gen.pick([1, 2, 10000])}
    return spec


# ---------------------------------------------------------------------------------------------
# From specs to library objects


def tensor(spec: dict[str, Any]) -> np.ndarray:
    dtype = np.dtype(spec["dtype"])
    shape = tuple(spec["shape"])
    count = int(np.prod(shape, dtype=np.int64))
    rng = np.random.default_rng(spec["seed"])
    if dtype.kind == "b":
        return rng.integers(0, 2, size=count).astype(dtype).reshape(shape)
    raw = rng.integers(0, 256, size=count * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape).copy()


def coordinate(spec: dict[str, Any] | None) -> Any:
    if spec is None:
        return None
    values = spec.get("values")
    return sds.Coordinate(
        values=None if values is None else tuple(values),
        start=spec.get("start"),
        step=spec.get("step"),
        reference=spec.get("reference"),
        unit=spec.get("unit"),
        metadata=spec.get("metadata", {}),
    )


def field(spec: dict[str, Any]) -> Any:
    data = tensor(spec)
    axes = tuple(
        sds.Axis(
            name=axis["name"], length=length, role=axis.get("role"), id=axis.get("id"),
            coordinate=coordinate(axis.get("coordinate")), metadata=axis.get("metadata", {}),
        )
        for axis, length in zip(spec["axes"], spec["shape"])
    )
    return sds.Field(data=data, axes=axes, metadata=spec.get("metadata", {}))


def record(spec: dict[str, Any]) -> Any:
    return sds.Record(
        id=spec["id"],
        fields={name: field(value) for name, value in spec["fields"].items()},
        scene_id=spec.get("scene_id"),
        metadata=spec.get("metadata", {}),
    )


def storage_options(spec: dict[str, Any]) -> Any:
    if spec.get("writer_options") is None:
        return None
    return sds.StorageOptions(writer_options=spec["writer_options"])


def receipt_line(shard: Any) -> str:
    return canonical(dataclasses.asdict(shard))


def write_workers(spec: dict[str, Any], root: Path) -> list[dict[str, Any]]:
    """Every attempt of every shard. The highest attempt gets the shard's records; a lower
    attempt writes only the first half of them, so a reader that kept the wrong attempt shows."""
    records = [record(value) for value in spec["records"]]
    done = []
    for shard in spec["shards"]:
        chosen = records[shard["start"]:shard["stop"]]
        best = max(shard["attempts"])
        for attempt in shard["attempts"]:
            subset = chosen if attempt == best else chosen[: len(chosen) // 2]
            published = sds.write_shard(
                subset, str(root), work_id=shard["work_id"], attempt=attempt, options=storage_options(spec)
            )
            done.append({"shard": shard, "attempt": attempt, "count": len(subset), "receipt": published})
    return done


def publication_options(spec: dict[str, Any]) -> Any:
    if spec.get("shards_per_manifest") is None:
        return None
    return sds.PublicationOptions(shards_per_manifest=spec["shards_per_manifest"])


def publish(spec: dict[str, Any], root: Path, receipts: list[Any]) -> Any:
    expected = sorted({shard["work_id"] for shard in spec["shards"]})
    return sds.publish(
        str(root), receipts, dataset_id=spec["dataset_id"], snapshot_id=spec["snapshot_id"],
        expected_work_ids=expected, metadata=spec.get("metadata") or None,
        storage_options=storage_options(spec), publication_options=publication_options(spec),
    )


def plan(done: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where each written shard's records are in the published dataset (shards are published in
    work-id string order, so ordinals follow that order, not the spec's)."""
    order = sorted({item["shard"]["work_id"] for item in done})
    first = {}
    position = 0
    for work_id in order:
        first[work_id] = position
        position += next(
            item["count"] for item in done
            if item["shard"]["work_id"] == work_id and item["attempt"] == max(item["shard"]["attempts"])
        )
    return [
        {"work_id": item["shard"]["work_id"], "attempt": item["attempt"],
         "first": first[item["shard"]["work_id"]], "count": item["count"]}
        for item in done
    ]


def annotation_record(dataset: Any, ordinal: int, row: dict[str, Any]) -> Any:
    return sds.AnnotationRecord(
        source_record_id=dataset.record_metadata[ordinal].id,
        source_index=ordinal,
        status=sds.AnnotationStatus(row["status"]),
        values=row.get("values", {}),
        fields={name: field(value) for name, value in row.get("fields", {}).items()},
        provenance=row.get("provenance", {}),
        detail_status=row.get("detail_status"),
    )


def publish_annotation_set(dataset: Any, spec: dict[str, Any]) -> None:
    from signal_dataset.annotation import publisher

    rows = [annotation_record(dataset, ordinal, row) for ordinal, row in enumerate(spec["rows"])]
    step = spec["records_per_shard"]
    if spec["mode"] == "single":
        options = sds.AnnotationOptions(records_per_shard=step, publication_id=spec.get("publication_id"))
        sds.publish_annotations(dataset, spec["name"], rows, metadata=spec["metadata"], options=options)
        return
    publication_id = spec.get("publication_id") or hashlib.sha256(
        f"{dataset.snapshot_id}:{spec['name']}".encode()
    ).hexdigest()[:32]
    published = [
        publisher.write_annotation_shard(
            dataset, spec["name"], publication_id, first, rows[first:first + step],
            logical_shard_id=f"shard-{first // step:08d}",
        )
        for first in range(0, len(rows), step)
    ]
    publisher.publish_annotation_shards(
        dataset, spec["name"], publication_id, published, metadata=spec["metadata"]
    )


def annotation_rows_jsonl(spec: dict[str, Any], directory: Path) -> Path:
    """The set's rows in `sds annotate`'s row format (docs/ANNOTATIONS.md), tensors as .npy."""
    path = directory / f"{spec['name']}.rows.jsonl"
    lines = []
    for ordinal, row in enumerate(spec["rows"]):
        out: dict[str, Any] = {
            "source_index": ordinal, "status": row["status"], "values": row.get("values", {}),
            "provenance": row.get("provenance", {}), "detail_status": row.get("detail_status"),
        }
        if row.get("fields"):
            out["fields"] = {}
            for position, (name, value) in enumerate(row["fields"].items()):
                npy = f"{spec['name']}-{ordinal}-{position}.npy"
                np.save(directory / npy, tensor(value), allow_pickle=False)
                axes = [axis["name"] for axis in value["axes"]]
                out["fields"][name] = {"npy": npy, "axes": axes, "metadata": value.get("metadata", {})}
        lines.append(canonical(out))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def check_published(spec: dict[str, Any], root: Path) -> None:
    """The library publication holds the spec's records in work-id order, each shard's highest
    attempt: a harness that compared datasets it had not written as intended would prove nothing."""
    winners = sorted(spec["shards"], key=lambda shard: shard["work_id"])
    wanted = [spec["records"][i] for shard in winners for i in range(shard["start"], shard["stop"])]
    dataset = sds.open(str(root))
    if len(dataset) != len(wanted):
        raise SystemExit(f"library publication holds {len(dataset)} records, the spec {len(wanted)}")
    for ordinal, value in enumerate(wanted):
        got = dataset[ordinal]
        expected = {name: [tensor(item).dtype.str, list(item["shape"]), hashlib.sha256(tensor(item).tobytes()).hexdigest()]
                    for name, item in value["fields"].items()}
        seen = {name: [item.data.dtype.str, list(item.data.shape), hashlib.sha256(np.ascontiguousarray(item.data).tobytes()).hexdigest()]
                for name, item in got.fields.items()}
        if (got.id, got.scene_id, canonical(thaw(got.metadata)), canonical(seen)) != (
            value["id"], value.get("scene_id"), canonical(value.get("metadata", {})), canonical(expected)
        ):
            raise SystemExit(f"library publication record {ordinal} is not the spec's")


def command_write(spec: dict[str, Any], out: Path, publish_too: bool = True) -> None:
    # Absolute: a reference view records its source's shards by absolute location.
    out = out.resolve()
    root = out / "dataset"
    root.mkdir(parents=True, exist_ok=True)
    done = write_workers(spec, root)
    with open(out / "receipts.jsonl", "w", encoding="utf-8") as handle:
        for item in done:
            handle.write(receipt_line(item["receipt"]) + "\n")
    (out / "plan.json").write_text(canonical(plan(done)), encoding="utf-8")
    if not publish_too:
        return
    dataset = publish(spec, root, [item["receipt"] for item in done])
    check_published(spec, root)
    (out / "rows").mkdir(exist_ok=True)
    for set_spec in spec.get("annotations", []):
        annotation_rows_jsonl(set_spec, out / "rows")
        publish_annotation_set(dataset, set_spec)
    dataset = sds.open(str(root))
    if spec.get("view"):
        view = spec["view"]
        dataset.select(view["indices"]).publish(
            str(out / "view"), dataset_id=view["dataset_id"], snapshot_id=view["snapshot_id"]
        )
    if spec.get("materialize"):
        view = spec["materialize"]
        dataset.select(view["indices"]).materialize(
            str(out / "materialized"), dataset_id=view["dataset_id"], snapshot_id=view["snapshot_id"],
            records_per_shard=view["records_per_shard"],
        )


def command_publish(root: Path, receipt_files: list[Path], args: argparse.Namespace) -> None:
    receipts = []
    for path in receipt_files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                receipts.append(sds.PublishedShard(**json.loads(line)))
    options = None
    if args.shards_per_manifest is not None:
        options = sds.PublicationOptions(shards_per_manifest=args.shards_per_manifest)
    storage = None if args.writer_options is None else sds.StorageOptions(writer_options=args.writer_options)
    sds.publish(
        str(root), receipts, dataset_id=args.dataset_id, snapshot_id=args.snapshot_id,
        expected_work_ids=args.expected_work_ids.split(",") if args.expected_work_ids else None,
        metadata=json.loads(args.metadata) if args.metadata else None,
        storage_options=storage, publication_options=options,
    )


# ---------------------------------------------------------------------------------------------
# What the library reads


def axis_dict(axis: Any) -> dict[str, Any]:
    value = axis.coordinate
    coordinate = None
    if value is not None:
        coordinate = {
            "metadata": dict(value.metadata), "reference": value.reference, "start": value.start,
            "step": value.step, "unit": value.unit,
            "values": None if value.values is None else list(value.values),
        }
    return {
        "coordinate": coordinate, "id": axis.id, "length": axis.length,
        "metadata": dict(axis.metadata), "name": axis.name, "role": axis.role,
    }


def thaw(value: Any) -> Any:
    """The library hands out frozen mappings and tuples; JSON wants dicts and lists."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(item) for item in value]
    return value


def field_dict(value: Any) -> dict[str, Any]:
    data = np.ascontiguousarray(value.data)
    return {
        "axes": thaw([axis_dict(axis) for axis in value.axes]),
        "dtype": data.dtype.str,
        "metadata": thaw(value.metadata),
        "sha256": hashlib.sha256(data.tobytes()).hexdigest(),
        "shape": list(data.shape),
    }


def record_dict(value: Any, row: Any) -> dict[str, Any]:
    fields = {name: field_dict(item) for name, item in value.fields.items()}
    for name, item in row.items():
        # The metadata row must describe the record exactly; a mismatch is a library-side
        # defect worth seeing in the dump rather than hiding.
        fields[name]["row_dtype"] = np.dtype(item.dtype).str
        fields[name]["row_shape"] = list(item.shape)
    return {"fields": fields, "id": value.id, "metadata": thaw(value.metadata), "scene_id": value.scene_id}


def annotation_dict(value: Any) -> dict[str, Any]:
    return {
        "detail_status": value.detail_status,
        "fields": {name: field_dict(item) for name, item in value.fields.items()},
        "provenance": thaw(value.provenance),
        "source_index": value.source_index,
        "source_record_id": value.source_record_id,
        "status": str(value.status.value if hasattr(value.status, "value") else value.status),
        "values": thaw(value.values),
    }


def dump(root: str) -> dict[str, Any]:
    root = root if root.startswith(("gs://", "s3://")) else str(Path(root).resolve())
    dataset = sds.open(root)
    records = [record_dict(dataset[i], dataset.record_metadata[i]) for i in range(len(dataset))]
    annotations = {
        name: {
            "metadata": thaw(value.metadata),
            "publication_id": value.publication_id,
            "rows": [annotation_dict(value[i]) for i in range(len(value))],
            "source_snapshot_id": value.source_snapshot_id,
        }
        for name, value in dataset.annotations.items()
    }
    snapshot = snapshot_document(Path(root)) if not root.startswith(("gs://", "s3://")) else {}
    return {
        "annotations": annotations,
        "dataset_id": dataset.id,
        "manifest_pages": len(snapshot.get("manifests", [])),
        "metadata": thaw(dataset.metadata),
        "record_count": len(dataset),
        "records": records,
        "shard_count": snapshot.get("shard_count"),
        "snapshot_id": dataset.snapshot_id,
        "stored_bytes": snapshot.get("stored_bytes"),
    }


def snapshot_document(root: Path) -> dict[str, Any]:
    root_doc = json.loads((root / "root.json").read_text(encoding="utf-8"))
    return json.loads((root / root_doc["snapshot"]["path"]).read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------------
# The mount, walked and compared with the library's reading


def encode_segment(segment: str, directory: bool, link: bool = False) -> str:
    """The mount's name encoding (README, "Field names as paths"); `link`: a `by-id/` or
    `by-scene/` name (one segment: `/` escaped, no view-suffix step, 255 bytes)."""
    text = segment.replace("%", "%25").replace("\x00", "%00")
    if link:
        text = text.replace("/", "%2F")
    if text == "":
        text = "%"
    elif text == ".":
        text = "%2E"
    elif text == "..":
        text = "%2E%2E"
    if directory and not link:
        for suffix in VIEW_SUFFIXES:
            if text.endswith(suffix):
                text = text[: -len(suffix)] + "%2E" + suffix[1:]
                break
    limit = 255 if directory or link else 239
    if len(text.encode()) > limit:
        cut = text.encode()[:200]
        while True:
            try:
                head = cut.decode()
            except UnicodeDecodeError:
                cut = cut[:-1]
                continue
            if "%" in head[-2:]:
                cut = cut[: len(head.encode()) - len(head[head.rindex("%"):].encode())]
                continue
            break
        text = head + "%~" + hashlib.sha256(segment.encode()).hexdigest()[:16]
    return text


def field_path(name: str) -> str:
    parts = name.split("/")
    encoded = [encode_segment(part, index < len(parts) - 1) for index, part in enumerate(parts)]
    return "/".join(encoded)


class Mismatch:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.compared = 0

    def equal(self, what: str, ours: Any, theirs: Any) -> None:
        self.compared += 1
        if canonical(ours) != canonical(theirs):
            self.problems.append(f"{what}: mount {canonical(ours)[:400]} != library {canonical(theirs)[:400]}")


class Documents:
    """The stored bytes of a dataset's objects by path below its root: read from the directory
    for a local root, through the library's own object store for a `gs://` or `s3://` one."""

    def __init__(self, root: str) -> None:
        self.remote = root.startswith(("gs://", "s3://"))
        self.root = root.rstrip("/") if self.remote else str(Path(root).resolve())
        self.store = None
        if self.remote:
            from signal_dataset.storage import object_store_for

            self.store = object_store_for(self.root)

    def read(self, path: str) -> bytes:
        if self.store is None:
            return (Path(self.root) / path).read_bytes()
        return self.store.read(f"{self.root}/{path}")

    def exists(self, path: str) -> bool:
        try:
            self.read(path)
        except FileNotFoundError:
            return False
        return True

    def json(self, path: str) -> Any:
        return json.loads(self.read(path).decode("utf-8"))


def set_root_paths(documents: Documents) -> dict[str, str]:
    """Each annotation set's root document, from the catalog pointer and its revision."""
    pointer = "annotations/catalog.json"
    if not documents.exists(pointer):
        return {}
    revision = documents.json(pointer)["revision"]["path"]
    sets = documents.json(revision)["sets"]
    return {name: value["path"] for name, value in sets.items()}


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def check_field_files(check: Mismatch, base: Path, name: str, value: Any, sigmf: bool = False) -> None:
    data = np.ascontiguousarray(value.data)
    stem = base / field_path(name)
    raw = stem.parent / (stem.name + ".raw")
    check.equal(f"{raw} sha256", hashlib.sha256(raw.read_bytes()).hexdigest(),
                hashlib.sha256(data.tobytes()).hexdigest())
    described = read_json(stem.parent / (stem.name + ".json"))
    check.equal(f"{stem}.json", described, {
        "axes": thaw([axis_dict(axis) for axis in value.axes]), "dtype": data.dtype.str,
        "metadata": thaw(value.metadata), "name": name, "shape": list(data.shape),
    })
    npy = stem.parent / (stem.name + ".npy")
    loaded = np.load(npy, allow_pickle=False)
    check.equal(f"{stem}.npy", [loaded.dtype.str, list(loaded.shape), hashlib.sha256(loaded.tobytes()).hexdigest()],
                [data.dtype.str, list(data.shape), hashlib.sha256(data.tobytes()).hexdigest()])
    # The tensor bytes start at a multiple of 64, so a memory map reads them in place.
    check.equal(f"{stem}.npy data offset % 64", (npy.stat().st_size - data.nbytes) % 64, 0)
    if sigmf and has_sigmf_pair(data):
        sigmf_data = stem.parent / (stem.name + ".sigmf-data")
        check.equal(f"{sigmf_data} sha256", hashlib.sha256(sigmf_data.read_bytes()).hexdigest(),
                    hashlib.sha256(data.tobytes()).hexdigest())
        meta = read_json(stem.parent / (stem.name + ".sigmf-meta"))
        check.equal(f"{stem}.sigmf-meta datatype", meta["global"]["core:datatype"], "cf32_le")
        check_png(check, stem.parent / (stem.name + ".spectrogram.png"))


def check_png(check: Mismatch, path: Path) -> None:
    """A picture the mount draws: Pillow opens and verifies it (`tests/mount_pictures.rs` checks
    what it shows)."""
    from PIL import Image

    with Image.open(path) as image:
        image.verify()
        check.equal(f"{path} format", image.format, "PNG")


def has_sigmf_pair(data: np.ndarray) -> bool:
    """MOUNT.md: complex64 fields of rank 1 and length at least 1 get a SigMF pair."""
    return data.dtype == np.complex64 and data.ndim == 1 and data.shape[0] >= 1


def expected_field_files(fields: dict[str, Any]) -> list[str]:
    """The files below a record's `fields/` the mount shows for `fields` (name -> array)."""
    files = []
    for name, item in fields.items():
        stem = field_path(name)
        suffixes = [".raw", ".json", ".npy"]
        if has_sigmf_pair(np.asarray(item.data)):
            suffixes += [".sigmf-data", ".sigmf-meta", ".spectrogram.png"]
        files += [stem + suffix for suffix in suffixes]
    return sorted(files)


def walked_files(directory: Path) -> list[str]:
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*") if not path.is_dir())


def padded(ordinal: int, count: int) -> str:
    return str(ordinal).zfill(len(str(max(count - 1, 0))))


def check_record(check: Mismatch, dataset: Any, mount: Path, ordinal: int) -> tuple[int, int]:
    """One record's directory: record.json, every field's views, every annotation row."""
    count = len(dataset)
    value = dataset[ordinal]
    row = dataset.record_metadata[ordinal]
    directory = mount / "records" / padded(ordinal, count)
    check.equal(f"{directory}/record.json", read_json(directory / "record.json"), {
        "fields": {
            name: {"axes": thaw([axis_dict(axis) for axis in item.axes]), "dtype": np.dtype(item.dtype).str,
                   "metadata": thaw(item.metadata), "shape": list(item.shape)}
            for name, item in row.items()
        },
        "id": row.id, "metadata": thaw(row.metadata), "ordinal": ordinal, "scene_id": row.scene_id,
    })
    check.equal(f"{directory}/fields files", walked_files(directory / "fields"), expected_field_files(value.fields))
    for name, item in value.fields.items():
        check_field_files(check, directory / "fields", name, item, sigmf=True)
    check_collection(check, directory, value.fields)
    check_png(check, directory / "preview.png")
    check.equal(f"{directory}/annotations listing", sorted(os.listdir(directory / "annotations")),
                sorted(dataset.annotations))
    for set_name, annotation_set in dataset.annotations.items():
        annotation = annotation_set[ordinal]
        base = directory / "annotations" / set_name
        check.equal(f"{base}/annotation.json", read_json(base / "annotation.json"), {
            "detail_status": annotation.detail_status, "provenance": thaw(annotation.provenance),
            "set": set_name, "source_index": annotation.source_index,
            "source_record_id": annotation.source_record_id, "status": str(annotation.status.value),
            "values": thaw(annotation.values),
        })
        for name, item in annotation.fields.items():
            check_field_files(check, base / "fields", name, item)
    return len(value.fields), len(dataset.annotations)


def check_collection(check: Mismatch, directory: Path, fields: dict[str, Any]) -> None:
    """`record.sigmf-collection` names each SigMF pair of the record with its meta's SHA-512."""
    collection = read_json(directory / "record.sigmf-collection")["collection"]
    check.equal(f"{directory}/record.sigmf-collection version", collection["core:version"], "1.2.0")
    expected = []
    for name, item in sorted(fields.items(), key=lambda entry: field_path(entry[0])):
        if has_sigmf_pair(np.asarray(item.data)):
            stem = "fields/" + field_path(name)
            meta = (directory / (stem + ".sigmf-meta")).read_bytes()
            expected.append({"name": stem, "hash": hashlib.sha512(meta).hexdigest()})
    check.equal(f"{directory}/record.sigmf-collection streams", collection["core:streams"], expected)


def check_records(root: str, mount: Path, ordinals: list[int]) -> dict[str, Any]:
    """Only the given records' directories (of a mount of `root` or of a damaged copy of it)."""
    dataset = sds.open(Documents(root).root)
    check = Mismatch()
    for ordinal in ordinals:
        try:
            check_record(check, dataset, mount, ordinal)
        except OSError as exc:
            check.problems.append(f"record {ordinal}: {exc}")
    if check.problems:
        raise SystemExit(f"records differ from the library ({len(check.problems)} problems):\n" + "\n".join(check.problems[:40]))
    return {"records": len(ordinals), "compared": check.compared}


def check_links(check: Mismatch, dataset: Any, mount: Path, ordinals: range) -> None:
    """`by-id/` points at the lowest ordinal of each id, `by-scene/` holds every record."""
    count = len(dataset)
    first: dict[str, int] = {}
    for ordinal in ordinals:
        row = dataset.record_metadata[ordinal]
        first.setdefault(row.id, ordinal)
        if row.scene_id is not None:
            link = mount / "by-scene" / encode_segment(row.scene_id, True, link=True) / padded(ordinal, count)
            check.equal(f"by-scene {row.scene_id!r} {ordinal}", os.readlink(link), f"../../records/{padded(ordinal, count)}")
    for record_id, ordinal in first.items():
        link = mount / "by-id" / encode_segment(record_id, True, link=True)
        check.equal(f"by-id {record_id!r}", os.readlink(link), f"../records/{padded(ordinal, count)}")


def check_mount(root: str, mount: Path, limit: int | None) -> dict[str, Any]:
    stored = Documents(root)
    dataset = sds.open(stored.root)
    check = Mismatch()
    count = len(dataset)
    ordinals = range(count if limit is None else min(limit, count))
    snapshot_path = stored.json("root.json")["snapshot"]["path"]
    documents = {"dataset.json": "root.json", "snapshot.json": snapshot_path}
    documents |= {f"annotations/{name}/set.json": path for name, path in set_root_paths(stored).items()}
    fields = rows = 0
    # A file the mount fails to serve is a difference like any other: collect them all, so one
    # run shows every problem rather than the first traceback.
    for shown, path in documents.items():
        try:
            check.equal(shown, (mount / shown).read_bytes().hex(), stored.read(path).hex())
        except OSError as exc:
            check.problems.append(f"{shown}: {exc}")
    try:
        check.equal("records/ listing", sorted(os.listdir(mount / "records")), sorted(padded(i, count) for i in range(count)))
        check.equal("annotations/ listing", sorted(os.listdir(mount / "annotations")), sorted(dataset.annotations))
        check_links(check, dataset, mount, ordinals)
    except OSError as exc:
        check.problems.append(f"listings and links: {exc}")
    for ordinal in ordinals:
        try:
            record_fields, record_rows = check_record(check, dataset, mount, ordinal)
            fields += record_fields
            rows += record_rows
        except OSError as exc:
            check.problems.append(f"record {ordinal}: {exc}")
    if check.problems:
        raise SystemExit(f"mount differs from the library ({len(check.problems)} problems):\n" + "\n".join(check.problems[:40]))
    return {"records": len(ordinals), "fields": fields, "annotation_rows": rows, "compared": check.compared}


def column_kinds(rows: list[Any]) -> tuple[dict[str, Any], list[str]]:
    """The fields every row has with one dtype and rank (name -> (dtype, rank)), and the
    others, as the mount's "Columns" section defines them."""
    fields = [dict(row.items()) for row in rows]
    names = set().union(*fields) if fields else set()
    columns = {}
    for name in names:
        kinds = {None if name not in items else (np.dtype(items[name].dtype).str, len(items[name].shape))
                 for items in fields}
        if len(kinds) == 1 and None not in kinds:
            columns[name] = next(iter(kinds))
    return columns, sorted(names - set(columns))


def check_columns(root: str, mount: Path) -> dict[str, Any]:
    """`columns/` against the library's reading: every column's files are the records' values
    stacked, `records.jsonl` the rows, and nothing else is there but `README.txt` and
    `labels.jsonl`."""
    dataset = sds.open(Documents(root).root)
    count = len(dataset)
    check = Mismatch()
    base = mount / "columns"
    rows = [dataset.record_metadata[i] for i in range(count)]
    records = [dataset[i] for i in range(count)]
    columns, left_out = column_kinds(rows)
    # labels.jsonl's lines are checked against the library by sigmf_check.py (mount_sigmf).
    # (and labels.arrow, records.arrow against the JSON lines by label_tables.py).
    expected = {"README.txt", "records.jsonl", "labels.jsonl", "labels.arrow", "records.arrow"}
    for name in sorted(columns):
        values = [np.ascontiguousarray(record.fields[name].data) for record in records]
        stem = field_path(name)
        joined = b"".join(value.tobytes() for value in values)
        check.equal(f"columns/{stem}.raw", hashlib.sha256((base / f"{stem}.raw").read_bytes()).hexdigest(),
                    hashlib.sha256(joined).hexdigest())
        shapes = {value.shape for value in values}
        if len(shapes) == 1:
            expected |= {f"{stem}.raw", f"{stem}.npy"}
            array = np.load(base / f"{stem}.npy", mmap_mode="r")
            stacked = np.stack(values)
            check.equal(f"columns/{stem}.npy", [array.dtype.str, list(array.shape), hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()],
                        [stacked.dtype.str, list(stacked.shape), hashlib.sha256(stacked.tobytes()).hexdigest()])
            rng = random.Random(count)
            for _ in range(4):
                i = rng.randrange(count)
                j = rng.randrange(i, count) + 1
                check.equal(f"columns/{stem}.npy[{i}:{j}]", np.ascontiguousarray(array[i:j]).tobytes().hex(),
                            stacked[i:j].tobytes().hex())
        else:
            expected |= {f"{stem}.raw", f"{stem}.offsets.npy", f"{stem}.shapes.npy"}
            offsets = np.load(base / f"{stem}.offsets.npy")
            ends = np.cumsum([0] + [value.nbytes for value in values])
            check.equal(f"columns/{stem}.offsets.npy", [offsets.dtype.str, offsets.tolist()], ["<i8", ends.tolist()])
            shaped = np.load(base / f"{stem}.shapes.npy")
            check.equal(f"columns/{stem}.shapes.npy", [shaped.dtype.str, shaped.tolist()],
                        ["<i8", [list(value.shape) for value in values]])
    # Lines end at "\n" only: str.splitlines would also cut at U+2028 inside a JSON string.
    lines = (base / "records.jsonl").read_text(encoding="utf-8").split("\n")[:-1]
    check.equal("columns/records.jsonl", [json.loads(line) for line in lines], [
        {"id": row.id, "metadata": thaw(row.metadata), "ordinal": ordinal, "scene_id": row.scene_id}
        for ordinal, row in enumerate(rows)
    ])
    readme = (base / "README.txt").read_text(encoding="utf-8")
    for name in left_out:
        check.equal(f"README.txt names {name!r} as left out", f"- {name}: " in readme.split("Left out:")[-1], True)
    shown = {str(path.relative_to(base)) for path in base.rglob("*") if path.is_file()}
    check.equal("columns/ files", sorted(shown), sorted(expected))
    if check.problems:
        raise SystemExit(f"columns/ differs from the library ({len(check.problems)} problems):\n" + "\n".join(check.problems[:40]))
    # The Arrow twins of the JSON lines, read by pyarrow, polars and pandas.
    import label_tables  # noqa: E402 (a sibling script)

    tables = label_tables.check(mount)
    return {"records": count, "columns": len(columns), "left_out": len(left_out), "compared": check.compared,
            "arrow_records": tables["record_rows"], "arrow_labels": tables["label_rows"]}


# ---------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", help="refuse to run under any other signal-dataset version")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version")
    p = sub.add_parser("random-spec"); p.add_argument("seed", type=int)
    p.add_argument("--writer-options", help='override ("default": the library default)')
    p.add_argument("--full", action="store_true")
    p.add_argument("--small-ints", action="store_true")
    p = sub.add_parser("write"); p.add_argument("spec"); p.add_argument("out")
    p = sub.add_parser("write-shards"); p.add_argument("spec"); p.add_argument("out")
    p = sub.add_parser("annotate"); p.add_argument("spec"); p.add_argument("root")
    p = sub.add_parser("rows"); p.add_argument("spec"); p.add_argument("out")
    p = sub.add_parser("publish"); p.add_argument("root"); p.add_argument("receipts", nargs="+")
    p.add_argument("--dataset-id", required=True); p.add_argument("--snapshot-id", required=True)
    p.add_argument("--expected-work-ids"); p.add_argument("--metadata")
    p.add_argument("--shards-per-manifest", type=int); p.add_argument("--writer-options")
    p = sub.add_parser("part"); p.add_argument("spec"); p.add_argument("path")
    p = sub.add_parser("npy-digest"); p.add_argument("files", nargs="+")
    p = sub.add_parser("dump"); p.add_argument("root"); p.add_argument("--part", default="all")
    p = sub.add_parser("check-mount"); p.add_argument("root"); p.add_argument("mount")
    p.add_argument("--limit", type=int)
    p = sub.add_parser("check-records"); p.add_argument("root"); p.add_argument("mount")
    p.add_argument("ordinals", type=int, nargs="+")
    p = sub.add_parser("check-columns"); p.add_argument("root"); p.add_argument("mount")
    p = sub.add_parser("ls"); p.add_argument("root")
    args = parser.parse_args()
    if args.release is not None and release() != args.release:
        raise SystemExit(f"expected signal-dataset {args.release}, imported {release()} from {sds.__file__}")
    if args.command == "version":
        print(release())
    elif args.command == "random-spec":
        print(canonical(random_spec(args.seed, args.writer_options, args.full, args.small_ints)))
    elif args.command in ("write", "write-shards"):
        spec = json.loads(Path(args.spec).read_text(encoding="utf-8"))
        command_write(spec, Path(args.out), publish_too=args.command == "write")
    elif args.command == "annotate":
        spec = json.loads(Path(args.spec).read_text(encoding="utf-8"))
        dataset = sds.open(str(Path(args.root).resolve()))
        for set_spec in spec.get("annotations", []):
            publish_annotation_set(dataset, set_spec)
    elif args.command == "rows":
        spec = json.loads(Path(args.spec).read_text(encoding="utf-8"))
        Path(args.out).mkdir(parents=True, exist_ok=True)
        for set_spec in spec.get("annotations", []):
            annotation_rows_jsonl(set_spec, Path(args.out))
    elif args.command == "publish":
        command_publish(Path(args.root).resolve(), [Path(p) for p in args.receipts], args)
    elif args.command == "part":
        # Pieces of a spec for the command lines of our tools, digits of big integers intact.
        value: Any = json.loads(Path(args.spec).read_text(encoding="utf-8"))
        for key in args.path.split("."):
            value = value[int(key)] if isinstance(value, list) else value.get(key)
        print(value if isinstance(value, str) else canonical(value))
    elif args.command == "ls":
        # What `sds ls --json` should print, from the library's metadata rows: a line per record.
        dataset = sds.open(str(Path(args.root).resolve()))
        for ordinal, meta in enumerate(dataset.iter_record_metadata()):
            tensor_bytes = sum(int(np.prod(f.shape, dtype=np.int64)) * np.dtype(f.dtype).itemsize
                               for f in meta.fields.values())
            print(json.dumps({"fields": len(meta.fields), "id": meta.id, "ordinal": ordinal,
                              "scene_id": meta.scene_id, "tensor_bytes": tensor_bytes}))
    elif args.command == "npy-digest":
        # What `sds create --from-npy` was given: per file, each array's dtype, shape, digest.
        out = []
        for path in args.files:
            loaded = np.load(path, allow_pickle=False)
            arrays = [loaded] if isinstance(loaded, np.ndarray) else [loaded[key] for key in loaded.files]
            out.append(sorted(canonical([a.dtype.str, list(a.shape), hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()]) for a in arrays))
        print(canonical(out))
    elif args.command == "dump":
        value = dump(args.root)
        print(canonical(value if args.part == "all" else value[args.part]))
    elif args.command == "check-mount":
        print(canonical(check_mount(args.root, Path(args.mount), args.limit)))
    elif args.command == "check-records":
        print(canonical(check_records(args.root, Path(args.mount), args.ordinals)))
    elif args.command == "check-columns":
        print(canonical(check_columns(args.root, Path(args.mount))))


if __name__ == "__main__":
    sys.exit(main())
