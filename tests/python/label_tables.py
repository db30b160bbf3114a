"""The Arrow tables of a mount's columns/ read by pyarrow, polars and pandas, against the JSON
lines beside them (themselves checked against the library by sigmf_check.py).

    label_tables.py MOUNT
        labels.arrow equals labels.jsonl and records.arrow equals records.jsonl, row for row
        and column for column (nulls where the JSON has null), read three ways:
        pyarrow.ipc.open_file(pyarrow.memory_map(path)) (no copy: pyarrow allocates nothing
        for the table), polars.read_ipc(path, memory_map=True) and pandas.read_feather(path).
        Each file's bytes read are the size stat gives. Prints the counts as JSON.
"""

import json
import math
import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc
import polars
import pandas

LABEL_COLUMNS = ["ordinal", "record_id", "scene_id", "field", "set", "sample_start", "sample_count",
                 "freq_lower_edge_hz", "freq_upper_edge_hz", "label"]
RECORD_COLUMNS = ["ordinal", "id", "scene_id", "metadata"]


def read_exact(path):
    data = path.read_bytes()
    if len(data) != os.stat(path).st_size:
        raise AssertionError(f"{path}: read {len(data)} bytes, stat says {os.stat(path).st_size}")
    return data


def json_rows(path, columns, transform=None):
    text = read_exact(path).decode()
    rows = []
    # Lines end at "\n" only (U+2028 may sit inside a JSON string).
    for line in text.split("\n")[:-1]:
        row = json.loads(line)
        if transform:
            row = transform(row)
        rows.append([row[c] for c in columns])
    return rows


def same(a, b, loose):
    """Equal values of the same type (`loose`: numbers compared as numbers, for pandas, whose
    nullable integers arrive as floats)."""
    if loose and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return a == b and type(a) is type(b)


def compare(name, got_rows, want_rows, loose=False):
    if len(got_rows) != len(want_rows):
        raise AssertionError(f"{name}: {len(got_rows)} rows, want {len(want_rows)}")
    for index, (g, w) in enumerate(zip(got_rows, want_rows)):
        if len(g) != len(w) or not all(same(x, y, loose) for x, y in zip(g, w)):
            raise AssertionError(f"{name} row {index}:\n got {g}\nwant {w}")


def pandas_rows(frame, columns):
    out = []
    for values in frame[columns].itertuples(index=False):
        row = []
        for v in values:
            if v is None or (isinstance(v, float) and math.isnan(v)) or v is pandas.NA:
                row.append(None)
            elif hasattr(v, "item"):
                row.append(v.item())
            else:
                row.append(v)
        out.append(row)
    return out


def check_table(path, columns, want):
    read_exact(path)
    before = pa.total_allocated_bytes()
    reader = pa.ipc.open_file(pa.memory_map(str(path)))
    table = reader.read_all()
    allocated = pa.total_allocated_bytes() - before
    if table.column_names != columns:
        raise AssertionError(f"{path}: columns {table.column_names}")
    compare(f"{path.name} (pyarrow)", [list(r.values()) for r in table.to_pylist()], want)
    frame = polars.read_ipc(str(path), memory_map=True)
    compare(f"{path.name} (polars)", [list(r) for r in frame.iter_rows()], want)
    compare(f"{path.name} (pandas)", pandas_rows(pandas.read_feather(str(path)), columns), want, loose=True)
    return table, allocated, reader.num_record_batches


def check(mount):
    """The checks above over MOUNT; their counts."""
    base = Path(mount) / "columns"
    labels_want = json_rows(base / "labels.jsonl", LABEL_COLUMNS)
    labels, labels_allocated, labels_batches = check_table(base / "labels.arrow", LABEL_COLUMNS, labels_want)
    if labels.schema.field("label").type != pa.dictionary(pa.int32(), pa.utf8()):
        raise AssertionError(f"label column: {labels.schema.field('label').type}")
    records_want = json_rows(base / "records.jsonl", RECORD_COLUMNS,
                             lambda r: {**r, "metadata": json.dumps(r["metadata"], separators=(",", ":"),
                                                                     ensure_ascii=False)})
    # The metadata text is compared as JSON values (number spellings may differ).
    records, records_allocated, records_batches = check_table_records(base / "records.arrow", records_want)
    return {
        "label_rows": len(labels_want), "label_batches": labels_batches,
        "label_nulls": sum(1 for r in labels_want if r[5] is None),
        "record_rows": records, "record_batches": records_batches,
        "allocated": labels_allocated + records_allocated,
    }


def check_table_records(path, want):
    read_exact(path)
    before = pa.total_allocated_bytes()
    reader = pa.ipc.open_file(pa.memory_map(str(path)))
    table = reader.read_all()
    allocated = pa.total_allocated_bytes() - before
    if table.column_names != RECORD_COLUMNS:
        raise AssertionError(f"{path}: columns {table.column_names}")

    def normal(rows):
        return [[r[0], r[1], r[2], json.loads(r[3])] for r in rows]

    want = normal(want)
    compare(f"{path.name} (pyarrow)", normal([list(r.values()) for r in table.to_pylist()]), want)
    compare(f"{path.name} (polars)", normal([list(r) for r in polars.read_ipc(str(path), memory_map=True).iter_rows()]), want)
    compare(f"{path.name} (pandas)", normal(pandas_rows(pandas.read_feather(str(path)), RECORD_COLUMNS)), want,
            loose=True)
    return table.num_rows, allocated, reader.num_record_batches


if __name__ == "__main__":
    print(json.dumps(check(sys.argv[1])))
