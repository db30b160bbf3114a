#!/usr/bin/env python3
"""Drives the reference ArrayRecord implementation (PyPI array-record 0.8.6) for the Rust
interop tests and benchmark.

Records travel as length-prefixed binary: each record is a u64 LE length then its bytes.

Subcommands:
  write OUT OPTIONS            < records      write records with the reference writer
  read FILE                    > records      read all records with the reference reader
  batch JOBS.json                             many jobs in one process (startup is slow):
      [{"op": "write", "out": F, "options": O, "records": LPFILE},
       {"op": "read", "file": F, "records": LPFILE}]
"""
import json
import struct
import sys

from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter


def read_lp(stream):
    out = []
    while True:
        head = stream.read(8)
        if not head:
            return out
        if len(head) != 8:
            raise SystemExit("truncated length prefix")
        (n,) = struct.unpack("<Q", head)
        body = stream.read(n)
        if len(body) != n:
            raise SystemExit("truncated record")
        out.append(body)


def write_lp(stream, records):
    for r in records:
        stream.write(struct.pack("<Q", len(r)))
        stream.write(r)


def do_write(out, options, records):
    w = ArrayRecordWriter(out, options)
    for r in records:
        w.write(r)
    w.close()


def do_read(path):
    r = ArrayRecordReader(path)
    n = r.num_records()
    records = r.read(0, n) if n else []
    r.close()
    return records


def main(argv):
    if len(argv) >= 3 and argv[0] == "write":
        do_write(argv[1], argv[2] if len(argv) > 2 else "", read_lp(sys.stdin.buffer))
    elif len(argv) == 2 and argv[0] == "read":
        write_lp(sys.stdout.buffer, do_read(argv[1]))
    elif len(argv) == 2 and argv[0] == "batch":
        with open(argv[1]) as f:
            jobs = json.load(f)
        for job in jobs:
            if job["op"] == "write":
                with open(job["records"], "rb") as f:
                    do_write(job["out"], job["options"], read_lp(f))
            elif job["op"] == "read":
                records = do_read(job["file"])
                with open(job["records"], "wb") as f:
                    write_lp(f, records)
            else:
                raise SystemExit(f"unknown op {job['op']!r}")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
